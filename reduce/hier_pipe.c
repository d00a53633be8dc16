/* hier-direct as a pipeline. Run phase after phase (hier.c), a call keeps the node links
 * idle while the node reduces the input in its shared segment and while it copies the
 * result back out: at 64 MiB over 1 Gbit/s with 4-bit frames those copies took about a
 * third of the call. Here the vector is cut into slices, and at tick t every rank
 *   posts the receives of slice t's reduce-scatter across nodes and of slice r's
 *     allgather, r = t - RS_LAG (from each peer in the order that peer sends them),
 *   reduces slice t in the node (shared segment; its rounds drive the transport),
 *   encodes and sends its shard of slice t to the other nodes' owners,
 *   waits for slice t - AG_LAG's reduced shards, decodes them (its own too) and copies
 *     that slice into the node's other ranks (shared segment),
 *   waits for slice r's contributions, adds them, re-encodes and sends the sum,
 * so the links carry a few slices while the node copies others. A slice is what
 * hier-direct does to a whole call (each value quantised at most twice, every rank
 * decoding the same allgathered bytes, its own shard too), with error-feedback slots of
 * its own (slice 0's are the unpipelined call's). Every wait of a tick is for what every
 * rank sent in an earlier tick, so no rank waits for one that waits for it. */
#include <stdlib.h>

#include "coll.h"

/* At most 16 slices; a slice is reduced across nodes RS_LAG ticks after it entered and
 * leaves AG_LAG ticks after (AG_LAG > RS_LAG): the links hold a few slices' frames while
 * the node copies, so that a rank descheduled for a while (4 ranks on 2 cores) stalls them
 * less (2 and 4 chosen from noisy runs, bench/RESULTS.md) */
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

/* Tick t of the pipeline (see the top): slice t enters, slice t - RS_LAG is reduced
 * across nodes, slice t - AG_LAG leaves. */
static int tick(gcomp_coll *c, slice *sl, int S, int t, uint8_t *buf) {
  int in = t, red = t - RS_LAG, out = t - AG_LAG;
  if (in < S) GCOMP_CHECK(gcomp_dx_post_rs(c, &sl[in].x));
  if (red >= 0 && red < S) GCOMP_CHECK(gcomp_dx_post_ag(c, &sl[red].x));
  if (in < S) {
    GCOMP_CHECK(node_step(c, &sl[in], buf, 0));
    GCOMP_CHECK(gcomp_dx_send_rs(c, &sl[in].x));
  }
  if (out >= 0 && out < S) {
    GCOMP_CHECK(gcomp_dx_gather(c, &sl[out].x));
    GCOMP_CHECK(node_step(c, &sl[out], buf, 1));
  }
  if (red >= 0 && red < S) {
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
  GCOMP_FAIL_IF(!sl, GCOMP_ERR_NOMEM, "hier pipeline: %d slices", S);
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
    bytes += s->x.bytes;
  }
  if (st == GCOMP_OK) st = gcomp_coll_reserve(c, bytes);
  size_t at = 0;
  for (int s = 0; st == GCOMP_OK && s < S; s++) {
    sl[s].x.mem = gcomp_coll_tmp(c) + at;
    at += sl[s].x.bytes;
  }
  for (int k = 0; st == GCOMP_OK && k < S + AG_LAG; k++) st = tick(c, sl, S, k, buf);
  for (int s = 0; s < made; s++) {
    int e = gcomp_dx_end(c, &sl[s].x, st);
    if (st == GCOMP_OK) st = e;
  }
  free(sl);
  if (st < 0) return gcomp_error_trace(st, __FILE__, __LINE__);
  return GCOMP_OK;
}
