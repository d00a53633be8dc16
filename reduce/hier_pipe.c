/* hier-direct as a pipeline. Run phase after phase (hier.c), a call keeps the node links
 * idle while the node reduces the input in its shared segment and while it copies the
 * result back out: at 64 MiB over 1 Gbit/s with 4-bit frames those copies took about a
 * third of the call. Here the vector is cut into slices, and at tick t every rank
 *   posts the receives of slice t's reduce-scatter across nodes and of slice r's
 *     allgather, r = t - RS_LAG (from each peer in the order that peer sends them),
 *   reduces slice t in the node (shared segment; its rounds drive the transport),
 *   encodes and sends its shard of slice t to the other nodes' owners (for sign and
 *     nearest quant, straight from the node's operands in the segment: see enter),
 *   waits for slice t - AG_LAG's reduced shards, decodes them (its own too) and hands
 *     the node's other ranks those frames to decode (shared segment; or copies of the
 *     decoded piece when some rank's frames do not fit a slot),
 *   waits for slice r's contributions, adds them, re-encodes and sends the sum,
 * so the links carry a few slices while the node copies others. A slice is what
 * hier-direct does to a whole call (each value quantised at most twice, every rank
 * decoding the same allgathered bytes, its own shard too), with error-feedback slots of
 * its own (slice 0's are the unpipelined call's). Every wait of a tick is for what every
 * rank sent in an earlier tick, so no rank waits for one that waits for it. */
#include <stdlib.h>

#include "codec_parts.h"
#include "coll.h"

/* At most 16 slices; a slice is reduced across nodes RS_LAG ticks after it entered and
 * leaves AG_LAG ticks after (AG_LAG > RS_LAG): the links hold a few slices' frames while
 * the node copies, so that a rank descheduled for a while (4 ranks on 2 cores) stalls them
 * less (2 and 4 were the best of the lags tried, in noisy runs) */
enum { MAX_SLICES = 16, RS_LAG = 2, AG_LAG = 4 };
/* a slice at most: at 64 MiB, 16 slices fill and drain the pipeline in ~1/16 of a call */
#define SLICE_MAX_BYTES ((size_t)4 << 20)

int gcomp_hier_pipe_slices(const gcomp_coll *c, size_t count) {
  size_t slice = c->seg_bytes < SLICE_MAX_BYTES ? c->seg_bytes : SLICE_MAX_BYTES;
  size_t s = count * c->esize / (slice ? slice : 1);
  if (s > MAX_SLICES) s = MAX_SLICES;
  /* every rank's shard of every slice non-empty */
  if (s > count / (size_t)c->t->size) s = count / (size_t)c->t->size;
  return s < 1 ? 1 : (int)s;
}

typedef struct {
  gcomp_dx x;
  size_t off, len;   /* the slice: elements [off, off + len) of the call */
} slice;

/* The node's half of slice s through the shared segment: its reduce-scatter (input: the
 * caller's, c->src when set) or its allgather. */
static int node_step(const gcomp_coll *c, const slice *sl, uint8_t *buf, int gather) {
  gcomp_coll sc = *c;
  sc.drive = 1;
  sc.src = c->src ? c->src + sl->off * c->esize : NULL;
  uint8_t *at = buf + sl->off * c->esize;
  return gather ? gcomp_shm_allgather(&sc, c->shm, at, sl->len)
                : gcomp_shm_reduce_scatter(&sc, c->shm, at, sl->len);
}

/* The pipeline's tables. */
typedef struct {
  slice *sl;
  int S, n;            /* slices; nodes (the cross group) */
  gcomp_bytes *part;   /* [n]: a slice's frames */
  int fp32;            /* the node's allgathers copy fp32 from here on */
  size_t count;        /* the call's elements */
  size_t share_at, share_len;   /* this rank's share of them (gcomp_chunk over the ranks) */
  int stream;          /* the result is decoded with streaming stores (see streams) */
  uint64_t nonfinite;  /* NaN and Inf in this rank's share of the result so far */
} pipe_state;

typedef struct {
  const gcomp_coll *c;
  pipe_state *p;
  const slice *sl;
  uint8_t *buf;
} frames_to;

/* The NaN and Inf of this rank's share of the call (gcomp_chunk over the ranks) among
 * elements [at, at + len) of buf, just copied in fp32: counted while they are in cache, so
 * that the call need not read its share again (gcomp_coll.nonfinite_counted; decoded
 * frames come with their decoders' counts). */
static void count_share(pipe_state *p, const uint8_t *buf, size_t at, size_t len) {
  size_t so = p->share_at, sl = p->share_len;
  size_t lo = at > so ? at : so, hi = at + len < so + sl ? at + len : so + sl;
  if (lo < hi)
    p->nonfinite += gcomp_count_nonfinite_f32((const float *)(const void *)buf + lo, hi - lo);
}

/* A call this large (c->stream_from: GCOMP_STREAM_BYTES, 16 MiB by default) writes the
 * result with streaming stores (gcomp_decode_tally): plain stores first read every line
 * they write, and a result this large is not in cache when the caller reads it (every rank
 * of a node writes all of it). The NaN and Inf of this rank's share come from the
 * decoders' counts, so the share is not read back either: reading it would bring back
 * into cache the lines the streaming stores kept out. */
static int streams(const gcomp_coll *c, size_t count) {
  return c->stream_from && count * c->esize >= c->stream_from;
}

/* Local rank j's frame of shard k of its piece of the slice, decoded into buf where that
 * rank decoded it: the same bytes through the same decoder, so the same bits. */
static int decode_part(void *arg, int j, int k, const uint8_t *p, size_t len) {
  const frames_to *a = arg;
  const gcomp_coll *c = a->c;
  size_t co, cl, o, l;
  gcomp_chunk(a->sl->len, c->t->local_size, j, &co, &cl);
  gcomp_chunk(cl, a->p->n, k, &o, &l);
  uint64_t t0 = gcomp_now_ns(), tally;
  size_t at = a->sl->off + co + o;
  float *dst = (float *)(void *)a->buf;
  int st = gcomp_decode_tally(c->codec2, p, len, dst + at, l, a->p->stream, &tally);
  c->stats->decode_s += (double)(gcomp_now_ns() - t0) * 1e-9;
  /* the writer decoded these very bytes before it published them */
  GCOMP_FAIL_IF(st == GCOMP_ERR_CORRUPT, st, "hier pipeline: local rank %d's frame %d of a "
                "slice is corrupt in the node's shared segment", j, k);
  if (st == GCOMP_OK)
    a->p->nonfinite += gcomp_nonfinite_within(dst, at, l, a->p->share_at,
                                              a->p->share_at + a->p->share_len, tally);
  return st;
}

/* The node's allgather of slice sl. The frames each rank decoded are 1/32 (sign) to
 * about 1/4 (8-bit) of the fp32 piece they stand for: handing them to the node's other
 * ranks, which decode them too, saves each rank a copy of its piece into the segment and
 * one of every other piece out of it. Frames have no useful size bound (a bucket with a
 * NaN goes raw), so each rank says in the round whether its frames fit its slot; if one
 * did not, every rank saw it, and the slice and all after it copy fp32 instead. */
static int node_gather(const gcomp_coll *c, pipe_state *p, const slice *sl, uint8_t *buf) {
  if (!p->fp32 && c->codec2) {
    gcomp_coll sc = *c;
    sc.drive = 1;
    gcomp_dx_frames(&sl->x, p->part);
    frames_to a = {c, p, sl, buf};
    int all_in = 0;
    GCOMP_CHECK(gcomp_shm_allgather_parts(&sc, c->shm, p->part, p->n, sl->len, decode_part, &a,
                                          &all_in));
    if (all_in) return GCOMP_OK;
    p->fp32 = 1;
  }
  GCOMP_CHECK(node_step(c, sl, buf, 1));
  for (int j = 0; j < c->t->local_size; j++) {   /* the other local ranks' pieces, copied */
    size_t co, cl;
    gcomp_chunk(sl->len, c->t->local_size, j, &co, &cl);
    if (j != c->t->local_rank) count_share(p, buf, sl->off + co, cl);
  }
  return GCOMP_OK;
}

/* Slice sl enters: the node's reduce-scatter, then my piece's shards encoded and sent. A
 * codec that encodes in parts (sign, quant with nearest rounding) is fed the node's
 * operands of each round of the reduce-scatter, a few KiB at a time: the node's sum of my
 * piece is never stored, nor read back by the encoder (the same frames, the same
 * residuals). */
static int enter(gcomp_coll *c, slice *sl, uint8_t *buf) {
  if (!gcomp_dx_feed_ok(c, &sl->x, c->t->local_size)) {
    GCOMP_CHECK(node_step(c, sl, buf, 0));
    return gcomp_dx_send_rs(c, &sl->x);
  }
  gcomp_coll sc = *c;
  sc.drive = 1;
  const uint8_t *in = (c->src ? c->src : buf) + sl->off * c->esize;
  gcomp_dx_feed f = {.c = c, .x = &sl->x};
  GCOMP_CHECK(gcomp_shm_reduce_scatter_parts(&sc, c->shm, in, sl->len, gcomp_dx_feed_part, &f));
  return gcomp_dx_feed_end(&f);
}

/* Tick t of the pipeline (see the top): slice t enters, slice t - RS_LAG is reduced
 * across nodes, slice t - AG_LAG leaves. */
static int tick(gcomp_coll *c, pipe_state *p, int t, uint8_t *buf) {
  slice *sl = p->sl;
  int S = p->S, in = t, red = t - RS_LAG, out = t - AG_LAG;
  if (in < S) GCOMP_CHECK(gcomp_dx_post_rs(c, &sl[in].x));
  if (red >= 0 && red < S) GCOMP_CHECK(gcomp_dx_post_ag(c, &sl[red].x));
  if (in < S) GCOMP_CHECK(enter(c, &sl[in], buf));
  if (out >= 0 && out < S) {
    GCOMP_CHECK(gcomp_dx_gather(c, &sl[out].x));
    p->nonfinite += sl[out].x.nonfinite;   /* in my piece, just decoded */
    GCOMP_CHECK(node_gather(c, p, &sl[out], buf));
  }
  if (red >= 0 && red < S && gcomp_dx_fold_ok(&sl[red].x)) {
    GCOMP_CHECK(gcomp_dx_fold(c, &sl[red].x));   /* the sum of my shard never stored */
  } else if (red >= 0 && red < S) {
    GCOMP_CHECK(gcomp_dx_reduce(c, &sl[red].x));
    GCOMP_CHECK(gcomp_dx_send_ag(c, &sl[red].x));
  }
  return GCOMP_OK;
}

int gcomp_hier_direct_pipelined(gcomp_coll *c, const gcomp_group *cross, uint8_t *buf,
                                size_t count, int S) {
  const gcomp_transport *t = c->t;
  GCOMP_FAIL_IF(S < 1 || S > MAX_SLICES || !c->shm, GCOMP_ERR_INVALID,
                "hier pipeline: %d slices%s", S, c->shm ? "" : " without a shared segment");
  slice *sl = calloc((size_t)S, sizeof *sl);
  pipe_state p = {sl, S, cross->n, calloc((size_t)cross->n, sizeof *p.part), 0, count, 0, 0,
                  streams(c, count), 0};
  gcomp_chunk(count, t->size, t->rank, &p.share_at, &p.share_len);
  if (!sl || !p.part) {
    free(sl), free(p.part);
    GCOMP_FAIL(GCOMP_ERR_NOMEM, "hier pipeline: %d slices", S);
  }
  /* waits nap where the machine has more ranks than CPUs (c->nap): a rank that spins and
   * yields while it waits takes the CPU from the ranks it waits for */
  int was_napping = gcomp_idle_naps(c->nap);
  if (was_napping) gcomp_idle_naps(1);   /* a progress thread that naps (comm.c) keeps on */
  int st = GCOMP_OK, made = 0;
  size_t bytes = 0;
  for (; st == GCOMP_OK && made < S; made++) {
    slice *s = &sl[made];
    size_t co, cl;
    gcomp_chunk(count, S, made, &s->off, &s->len);
    gcomp_chunk(s->len, t->local_size, t->local_rank, &co, &cl);
    float *piece = (float *)(void *)(buf + (s->off + co) * c->esize);
    uint64_t salt = 0x100u + (uint64_t)t->local_rank + ((uint64_t)made << 32);
    st = gcomp_dx_init(&s->x, cross, piece, cl, 2, 2u * (unsigned)made, salt, c->codec,
                       c->codec2);
    if (st == GCOMP_OK) {   /* the share within the piece, for its NaN and Inf */
      size_t lo = s->off + co, hi = lo + cl, so = p.share_at, se = so + p.share_len;
      s->x.stream = p.stream;
      s->x.share_lo = so > lo ? (so < hi ? so : hi) - lo : 0;
      s->x.share_hi = se > lo ? (se < hi ? se : hi) - lo : 0;
    }
    bytes += s->x.bytes;
  }
  if (st == GCOMP_OK) st = gcomp_coll_reserve(c, bytes);
  size_t at = 0;
  for (int s = 0; st == GCOMP_OK && s < S; s++) {
    sl[s].x.mem = gcomp_coll_tmp(c) + at;
    at += sl[s].x.bytes;
  }
  for (int k = 0; st == GCOMP_OK && k < S + AG_LAG; k++) st = tick(c, &p, k, buf);
  for (int s = 0; s < made; s++) {
    int e = gcomp_dx_end(c, &sl[s].x, st);
    if (st == GCOMP_OK) st = e;
  }
  free(sl), free(p.part);
  gcomp_idle_naps(was_napping);
  if (st < 0) return gcomp_error_trace(st, __FILE__, __LINE__);
  c->nonfinite_counted = 1, c->nonfinite_share = p.nonfinite;
  return GCOMP_OK;
}
