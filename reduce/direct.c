/* Compressed allreduce by direct exchange: every rank encodes each shard of its gradient
 * once (error feedback applied there) and sends shard j to its owner j; the owner decodes
 * and adds the n contributions in rank order into fp32, encodes the reduced shard once
 * more, and the shards are allgathered. Every value is quantised at most twice, whatever
 * the rank count — unlike a ring that re-quantises the partial sum at each of its hops.
 * Every rank (the owner too) decodes the same allgathered bytes: results are identical.
 *
 * The exchange runs in steps (gcomp_dx, coll.h) so that a pipeline (reduce/hier_pipe.c)
 * can keep several in flight; the blocking halves below run the same steps in a row. */
#include <stdlib.h>
#include <string.h>

#include "abort.h"
#include "codec_parts.h"
#include "coll.h"

static uint64_t mix64(uint64_t h) {
  h += 0x9e3779b97f4a7c15ull;
  h ^= h >> 30, h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 27, h *= 0x94d049bb133111ebull;
  return h ^ (h >> 31);
}

/* Each input mixed in turn: XORing them first made key k with salt s collide with key
 * k ^ s with salt 0 (tensor 0 of a hierarchical call shared tensor 256's residual). */
uint64_t gcomp_shard_key(uint64_t key, uint64_t salt, int part) {
  return mix64(mix64(mix64(key) ^ salt) ^ (uint64_t)(unsigned)part);
}

static double elapsed(uint64_t t0) { return (double)(gcomp_now_ns() - t0) * 1e-9; }

/* Waits for one request, counting the time as waiting; *len gets the received bytes. */
static int wait_one(gcomp_coll *c, gcomp_treq **req, size_t *len) {
  uint64_t t0 = gcomp_now_ns();
  int st = gcomp_abort_wait(c->abort, c->t, *req, len);
  *req = NULL;
  c->stats->wait_s += elapsed(t0);
  return st;
}

/* Where shard j lies in buf (its gcomp_chunk, or j strides on: shards of equal length),
 * and its length */
static size_t shard_of(const gcomp_dx *x, int j, size_t *len) {
  size_t o;
  gcomp_chunk(x->count, x->g->n, j, &o, len);
  return x->stride ? (size_t)j * x->stride : o;
}

/* Lays out one frame slot per shard of count elements (its codec's size bound) from
 * base: off[0] .. off[n], where off[n] is where the slots end. */
static size_t shard_slots(const gcomp_codec *codec, size_t count, int n, size_t base,
                          size_t *off) {
  size_t at = base;
  for (int j = 0; j < n; j++) {
    size_t o, l;
    gcomp_chunk(count, n, j, &o, &l);
    off[j] = at;
    at += codec ? gcomp_codec_max_encoded_size(codec, l) : 0;
  }
  off[n] = at;
  return at;
}

/* Slots: off[0..n] the frames to the owners, off[n..2n] the frames of my shard received
 * (in_cap each), off[2n..3n] the allgathered frames. A half without a codec takes none. */
int gcomp_dx_init(gcomp_dx *x, const gcomp_group *g, float *buf, size_t count, unsigned phase,
                  unsigned step, uint64_t key_salt, gcomp_codec *rs_codec, gcomp_codec *ag_codec) {
  int n = g->n;
  *x = (gcomp_dx){.g = g, .buf = buf, .count = count, .phase = phase, .step = step,
                  .key_salt = key_salt, .rs_codec = rs_codec, .ag_codec = ag_codec};
  x->off = calloc(4 * (size_t)n + 1, sizeof *x->off);   /* ag_len too */
  x->reqs = calloc(4 * (size_t)n, sizeof *x->reqs);
  GCOMP_FAIL_IF(!x->off || !x->reqs, GCOMP_ERR_NOMEM, "direct: tables");
  x->ag_len = x->off + 3 * (size_t)n + 1;
  size_t my_off, my_len, at = shard_slots(rs_codec, count, n, 0, x->off);
  gcomp_chunk(count, n, g->me, &my_off, &my_len);
  x->in_cap = rs_codec ? gcomp_codec_max_encoded_size(rs_codec, my_len) : 0;
  for (int r = 0; r < n; r++) x->off[n + r] = at, at += x->in_cap;
  x->bytes = shard_slots(ag_codec, count, n, at, x->off + 2 * n);
  return GCOMP_OK;
}

/* Receives of the contributions to my shard, posted before anything is sent. */
int gcomp_dx_post_rs(gcomp_coll *c, gcomp_dx *x) {
  const gcomp_group *g = x->g;
  int n = g->n;
  for (int r = 0; x->count && r < n; r++)
    if (r != g->me)
      GCOMP_CHECK(gcomp_irecv(c->t, g->ranks[r],
                              gcomp_coll_stag(c, x->phase, x->step, (unsigned)r, x->in_cap),
                              x->mem + x->off[n + r], x->in_cap, &x->reqs[n + r]));
  return GCOMP_OK;
}

/* Shard j's frame, encoded at its slot (flen bytes), to its owner; my own kept. */
static int send_shard(gcomp_coll *c, gcomp_dx *x, int j, size_t flen) {
  const gcomp_group *g = x->g;
  int n = g->n, me = g->me;
  size_t *off = x->off;
  if (j == me) {
    memcpy(x->mem + off[n + me], x->mem + off[j], flen);
    x->mine_len = flen;
    return GCOMP_OK;
  }
  c->stats->wire_bytes += flen;
  gcomp_abort_corrupt_frame(c->abort, x->mem + off[j], flen, g->ranks[j]);   /* GCOMP_FAULT */
  /* owner j's capacity for it: the bound of shard j, as j computes it (in_cap) */
  uint64_t tag = gcomp_coll_stag(c, x->phase, x->step, (unsigned)me, off[j + 1] - off[j]);
  return gcomp_isend(c->t, g->ranks[j], tag, x->mem + off[j], flen, &x->reqs[j]);
}

/* Encodes and sends shard by shard, so that encoding the next shard overlaps the transfer
 * of the last; my own shard last (the others are waiting for theirs), kept here. */
int gcomp_dx_send_rs(gcomp_coll *c, gcomp_dx *x) {
  const gcomp_group *g = x->g;
  int n = g->n, me = g->me;
  size_t *off = x->off;
  for (int k = 1; x->count && k <= n; k++) {
    int j = (me + k) % n;
    size_t l, flen, o = shard_of(x, j, &l);
    uint64_t t0 = gcomp_now_ns();
    int st = gcomp_encode(x->rs_codec, gcomp_shard_key(c->key, x->key_salt, j), x->buf + o, l,
                          x->mem + off[j], off[j + 1] - off[j], &flen);
    c->stats->encode_s += elapsed(t0);
    GCOMP_CHECK(st);
    GCOMP_CHECK(send_shard(c, x, j, flen));
  }
  return GCOMP_OK;
}

/* ---- the reduce-scatter's encode fed by the node's reduce-scatter ---------------------
 * Shard after shard in index order, each begun when the parts reach it, sent when they
 * have filled it; an empty one is sent as soon as the parts reach where it would start. */
static int own_shard(const gcomp_dx_feed *f) { return f->x->own_exact && f->j == f->x->g->me; }

static int feed_close(gcomp_dx_feed *f) {
  gcomp_dx *x = f->x;
  if (own_shard(f)) {   /* stored in buf as it came: nothing to encode or send */
    f->open = 0, f->j++;
    x->mine_len = 0;
    return GCOMP_OK;
  }
  size_t flen;
  uint64_t t0 = gcomp_now_ns();
  int st = gcomp_encode_sum_end(x->rs_codec, &flen);
  f->c->stats->encode_s += elapsed(t0);
  GCOMP_CHECK(st);
  f->open = 0;
  return send_shard(f->c, x, f->j++, flen);
}

/* Opens the shard that starts at element `at` of the piece, closing empty ones on the way. */
static int feed_open(gcomp_dx_feed *f, size_t at) {
  gcomp_dx *x = f->x;
  int n = x->g->n;
  while (!f->open && f->j < n) {
    size_t o, l;
    gcomp_chunk(x->count, n, f->j, &o, &l);
    GCOMP_FAIL_IF(o != at, GCOMP_ERR_INVALID, "direct: shard %d starts at %zu, parts at %zu",
                  f->j, o, at);
    if (!own_shard(f))
      GCOMP_CHECK(gcomp_encode_sum_begin(x->rs_codec, gcomp_shard_key(f->c->key, x->key_salt, f->j),
                                       l, x->mem + x->off[f->j],
                                       x->off[f->j + 1] - x->off[f->j]));
    f->open = 1, f->end = o + l;
    if (l == 0) GCOMP_CHECK(feed_close(f));
  }
  return GCOMP_OK;
}

int gcomp_dx_feed_ok(const gcomp_coll *c, const gcomp_dx *x, int nsrc) {
  return c->esize == 4 && c->reduce3 == gcomp_reduce3_kernel(GCOMP_FLOAT32, GCOMP_SUM) &&
         nsrc <= GCOMP_DX_FEED_SRC && gcomp_codec_part_values(x->rs_codec);
}

/* dst = the sum of the n-element parts src[0..nsrc): the node's sum of my own shard. An
 * operand may be dst itself (the call's input reduced in place): it is summed into, the
 * others added to it, never read through a second pointer while dst is written. */
static void own_sum(const gcomp_coll *c, float *dst, const float *const *src, int nsrc,
                    size_t n) {
  int self = -1;
  for (int i = 0; i < nsrc; i++)
    if (src[i] == dst) self = i;
  int first = 0;
  if (self < 0 && nsrc >= 2) {
    c->reduce3(dst, src[0], src[1], n);
    first = 2;
  } else if (self < 0) {
    if (nsrc) memcpy(dst, src[0], n * sizeof *dst);
    first = 1;
  }
  for (int i = first; i < nsrc; i++)
    if (i != self) c->reduce(dst, src[i], n);
}

int gcomp_dx_feed_part(void *arg, size_t at, size_t n, const float *const *src, int nsrc) {
  gcomp_dx_feed *f = arg;
  GCOMP_FAIL_IF(nsrc > GCOMP_DX_FEED_SRC || at != f->at, GCOMP_ERR_INVALID,
                "direct: a part at %zu of %d sources (%zu expected)", at, nsrc, f->at);
  for (size_t done = 0; done < n;) {
    GCOMP_CHECK(feed_open(f, f->at));
    GCOMP_FAIL_IF(!f->open, GCOMP_ERR_INVALID, "direct: parts past the last shard");
    size_t take = f->end - f->at < n - done ? f->end - f->at : n - done;
    const float *p[GCOMP_DX_FEED_SRC];
    for (int i = 0; i < nsrc; i++) p[i] = src[i] + done;
    uint64_t t0 = gcomp_now_ns();
    if (own_shard(f)) {
      own_sum(f->c, f->x->buf + f->at, p, nsrc, take);
      f->c->stats->reduce_s += elapsed(t0);
    } else {
      int st = gcomp_encode_sum_part(f->x->rs_codec, p, nsrc, take);
      f->c->stats->encode_s += elapsed(t0);
      GCOMP_CHECK(st);
    }
    done += take, f->at += take;
    if (f->at == f->end) GCOMP_CHECK(feed_close(f));
  }
  return GCOMP_OK;
}

/* The next parts are shard j's alone, from its first element: a caller that reduces one
 * shard at a time, in an order of its own (the owners across a slow link first), starts
 * each so; the shard is sent when its parts have filled it (gcomp_dx_feed_sent). */
int gcomp_dx_feed_shard(gcomp_dx_feed *f, int j) {
  size_t o, l;
  GCOMP_FAIL_IF(f->open || j < 0 || j >= f->x->g->n, GCOMP_ERR_INVALID,
                "direct: shard %d fed while shard %d is open", j, f->j);
  gcomp_chunk(f->x->count, f->x->g->n, j, &o, &l);
  f->j = j, f->at = o;
  return GCOMP_OK;
}

int gcomp_dx_feed_sent(const gcomp_dx_feed *f, int j) {
  GCOMP_FAIL_IF(f->open || f->j != j + 1, GCOMP_ERR_INVALID,
                "direct: the parts of shard %d ended at %zu, short of its end", j, f->at);
  return GCOMP_OK;
}

int gcomp_dx_feed_end(gcomp_dx_feed *f) {
  if (!f->x->count) return GCOMP_OK;   /* as gcomp_dx_send_rs: nothing to send */
  GCOMP_CHECK(feed_open(f, f->at));    /* empty shards at the end */
  GCOMP_FAIL_IF(f->open || f->j != f->x->g->n, GCOMP_ERR_INVALID,
                "direct: the parts ended at %zu of %zu elements", f->at, f->x->count);
  return GCOMP_OK;
}

/* Sums the decoded contributions in rank order (the same order on every owner) into buf's
 * shard g->me; the other shards of buf are left as they were. */
int gcomp_dx_reduce(gcomp_coll *c, gcomp_dx *x) {
  const gcomp_group *g = x->g;
  int n = g->n;
  size_t my_len, my_off = shard_of(x, g->me, &my_len);
  float *acc = x->buf + my_off;
  for (int r = 0; x->count && r < n; r++) {
    if (x->own_exact && r == g->me) continue;   /* in acc already, in fp32 */
    size_t flen = x->mine_len;
    if (r != g->me) GCOMP_CHECK(wait_one(c, &x->reqs[n + r], &flen));
    uint64_t t0 = gcomp_now_ns();
    const uint8_t *f = x->mem + x->off[n + r];
    int st = r == 0 && !x->own_exact ? gcomp_decode(x->rs_codec, f, flen, acc, my_len)
                                     : gcomp_decode_add(x->rs_codec, f, flen, acc, my_len);
    c->stats->decode_s += elapsed(t0);
    if (st == GCOMP_ERR_CORRUPT) st = gcomp_abort_corrupt_from(c->abort, c, st, g->ranks[r]);
    GCOMP_CHECK(st);
  }
  return GCOMP_OK;
}

static size_t ag_cap(const gcomp_dx *x, int r) {
  return x->off[2 * x->g->n + r + 1] - x->off[2 * x->g->n + r];
}

/* Receives of the other owners' reduced shards (their buffers are announced to the
 * senders while this rank still encodes). */
int gcomp_dx_post_ag(gcomp_coll *c, gcomp_dx *x) {
  const gcomp_group *g = x->g;
  int n = g->n;
  for (int r = 0; x->count && r < n; r++)
    if (r != g->me)
      GCOMP_CHECK(gcomp_irecv(c->t, g->ranks[r],
                              gcomp_coll_stag(c, x->phase, x->step + 1, (unsigned)r, ag_cap(x, r)),
                              x->mem + x->off[2 * n + r], ag_cap(x, r), &x->reqs[3 * n + r]));
  return GCOMP_OK;
}

/* The error-feedback key of my reduced shard: a second stage with error feedback (sign)
 * keeps the owner's residual per shard, the key of the reduce-scatter's moved to its own
 * range */
static uint64_t reduced_key(const gcomp_coll *c, const gcomp_dx *x) {
  return gcomp_shard_key(c->key, x->key_salt ^ 0x5ec0000000000000ull, x->g->me);
}

/* My reduced shard's frame (x->red_len bytes at its slot) to every other rank. */
static int send_reduced(gcomp_coll *c, gcomp_dx *x) {
  const gcomp_group *g = x->g;
  int n = g->n, me = g->me;
  uint8_t *mine = x->mem + x->off[2 * n + me];
  /* GCOMP_FAULT: an allgather's frame (an allreduce's first frames are its reduce-scatter's,
   * which take the one corruption of a call) */
  if (n > 1) gcomp_abort_corrupt_frame(c->abort, mine, x->red_len, g->ranks[(me + 1) % n]);
  for (int r = 0; r < n; r++) {
    if (r == me) continue;
    c->stats->wire_bytes += x->red_len;
    GCOMP_CHECK(gcomp_isend(c->t, g->ranks[r],
                            gcomp_coll_stag(c, x->phase, x->step + 1, (unsigned)me, ag_cap(x, me)),
                            mine, x->red_len, &x->reqs[2 * n + r]));
  }
  return GCOMP_OK;
}

/* Encodes my (reduced) shard once and sends it to every other rank. */
int gcomp_dx_send_ag(gcomp_coll *c, gcomp_dx *x) {
  const gcomp_group *g = x->g;
  int n = g->n, me = g->me;
  if (!x->count) return GCOMP_OK;
  size_t my_len, my_off = shard_of(x, me, &my_len);
  uint64_t t0 = gcomp_now_ns();
  int st = gcomp_encode(x->ag_codec, reduced_key(c, x), x->buf + my_off, my_len,
                        x->mem + x->off[2 * n + me], ag_cap(x, me), &x->red_len);
  c->stats->encode_s += elapsed(t0);
  GCOMP_CHECK(st);
  return send_reduced(c, x);
}

/* ---- reduce and send_ag in one pass ---------------------------------------------------
 * The contributions decoded a part (about 16 KiB) at a time into a buffer, in rank order,
 * and the part's sum re-encoded from there: the sum of my shard is never stored (every
 * rank decodes it from the allgathered frame anyway). */
int gcomp_dx_fold_ok(const gcomp_dx *x) {
  size_t u = gcomp_codec_part_values(x->rs_codec);
  return u && u == gcomp_codec_part_values(x->ag_codec) && !x->own_exact;
}

/* Part values of r's contribution decoded (r == 0: stored, else added) into tmp. */
static int fold_one(gcomp_coll *c, gcomp_dx *x, gcomp_dec_parts *d, int r, float *tmp, size_t m,
                    int end) {
  uint64_t t0 = gcomp_now_ns();
  int st = end ? gcomp_decode_parts_end(&d[r]) : gcomp_decode_part(&d[r], tmp, m, r > 0);
  c->stats->decode_s += elapsed(t0);
  if (st == GCOMP_ERR_CORRUPT) st = gcomp_abort_corrupt_from(c->abort, c, st, x->g->ranks[r]);
  return st;
}

static int fold_run(gcomp_coll *c, gcomp_dx *x, gcomp_dec_parts *d, float *tmp, size_t T) {
  const gcomp_group *g = x->g;
  int n = g->n, me = g->me;
  size_t my_off, my_len;
  gcomp_chunk(x->count, n, me, &my_off, &my_len);
  for (int r = 0; r < n; r++) {
    size_t flen = x->mine_len;
    if (r != me) GCOMP_CHECK(wait_one(c, &x->reqs[n + r], &flen));
    int st = gcomp_decode_parts_begin(x->rs_codec, x->mem + x->off[n + r], flen, my_len, &d[r]);
    if (st == GCOMP_ERR_CORRUPT) st = gcomp_abort_corrupt_from(c->abort, c, st, g->ranks[r]);
    GCOMP_CHECK(st);
  }
  GCOMP_CHECK(gcomp_encode_sum_begin(x->ag_codec, reduced_key(c, x), my_len,
                                     x->mem + x->off[2 * n + me], ag_cap(x, me)));
  const float *sum[1] = {tmp};
  for (size_t at = 0; at < my_len; at += T) {
    size_t m = my_len - at < T ? my_len - at : T;
    for (int r = 0; r < n; r++) GCOMP_CHECK(fold_one(c, x, d, r, tmp, m, 0));
    uint64_t t0 = gcomp_now_ns();
    int st = gcomp_encode_sum_part(x->ag_codec, sum, 1, m);
    c->stats->encode_s += elapsed(t0);
    GCOMP_CHECK(st);
  }
  for (int r = 0; r < n; r++) GCOMP_CHECK(fold_one(c, x, d, r, tmp, 0, 1));
  GCOMP_CHECK(gcomp_encode_sum_end(x->ag_codec, &x->red_len));
  return send_reduced(c, x);
}

int gcomp_dx_fold(gcomp_coll *c, gcomp_dx *x) {
  if (!x->count) return GCOMP_OK;   /* as reduce and send_ag */
  size_t unit = gcomp_codec_part_values(x->ag_codec);
  size_t T = unit < 4096 ? unit * (4096 / unit) : unit;
  gcomp_dec_parts *d = malloc((size_t)x->g->n * sizeof *d);
  float *tmp = malloc(T * sizeof *tmp);
  int st = d && tmp ? fold_run(c, x, d, tmp, T)
                    : gcomp_error_set(GCOMP_ERR_NOMEM, __FILE__, __LINE__,
                                      "direct: a fold of %zu values", T);
  free(d), free(tmp);
  return st;
}

/* Decodes every shard, my own too, so that all ranks hold the same values. */
int gcomp_dx_gather(gcomp_coll *c, gcomp_dx *x) {
  for (int k = 0; k < x->g->n; k++)   /* my own shard needs no wait: decode it first */
    GCOMP_CHECK(gcomp_dx_gather_one(c, x, (x->g->me + k) % x->g->n));
  return GCOMP_OK;
}

int gcomp_dx_gather_one(gcomp_coll *c, gcomp_dx *x, int r) {
  const gcomp_group *g = x->g;
  int n = g->n, me = g->me;
  if (x->count) {
    size_t flen = x->red_len, l;
    if (r != me) GCOMP_CHECK(wait_one(c, &x->reqs[3 * n + r], &flen));
    size_t o = shard_of(x, r, &l);
    x->ag_len[r] = flen;
    uint64_t t0 = gcomp_now_ns(), tally;
    int st = gcomp_decode_tally(x->ag_codec, x->mem + x->off[2 * n + r], flen, x->buf + o, l,
                                x->stream, &tally);
    c->stats->decode_s += elapsed(t0);
    if (st == GCOMP_ERR_CORRUPT) st = gcomp_abort_corrupt_from(c->abort, c, st, g->ranks[r]);
    GCOMP_CHECK(st);
    x->nonfinite += gcomp_nonfinite_within(x->buf, o, l, x->share_lo, x->share_hi, tally);
  }
  return GCOMP_OK;
}

void gcomp_dx_frames(const gcomp_dx *x, gcomp_bytes *part) {
  for (int r = 0; r < x->g->n; r++)
    part[r] = (gcomp_bytes){x->mem + x->off[2 * x->g->n + r], x->ag_len[r]};
}

/* Waits for the sends when st is GCOMP_OK (the scratch is reused next), cancels whatever
 * is left otherwise, frees the tables; returns st (or the sends' failure). */
int gcomp_dx_end(gcomp_coll *c, gcomp_dx *x, int st) {
  int n = x->g ? x->g->n : 0;
  if (st == GCOMP_OK && x->reqs) {
    st = gcomp_coll_waitall(c, n, x->reqs);
    if (st == GCOMP_OK) st = gcomp_coll_waitall(c, n, x->reqs + 2 * n);
  }
  for (int i = 0; st < 0 && x->reqs && i < 4 * n; i++)
    if (x->reqs[i]) gcomp_cancel(c->t, x->reqs[i]), x->reqs[i] = NULL;
  free(x->off);
  free(x->reqs);
  x->off = NULL, x->reqs = NULL, x->ag_len = NULL;
  return st;
}

/* One half in a row over the call's scratch: post, send, finish (the other half's codec
 * NULL: no frames for it) */
static int dx_half(gcomp_coll *c, const gcomp_group *g, float *buf, size_t count,
                   unsigned phase, uint64_t key_salt, gcomp_codec *rs_codec,
                   gcomp_codec *ag_codec, int (*post)(gcomp_coll *, gcomp_dx *),
                   int (*send)(gcomp_coll *, gcomp_dx *), int (*finish)(gcomp_coll *, gcomp_dx *)) {
  if (count == 0) return GCOMP_OK;
  gcomp_dx x;
  int st = gcomp_dx_init(&x, g, buf, count, phase, 0, key_salt, rs_codec, ag_codec);
  if (st == GCOMP_OK) st = gcomp_coll_reserve(c, x.bytes);
  x.mem = gcomp_coll_tmp(c);
  if (st == GCOMP_OK) st = post(c, &x);
  if (st == GCOMP_OK) st = send(c, &x);
  if (st == GCOMP_OK) st = finish(c, &x);
  st = gcomp_dx_end(c, &x, st);
  if (st < 0) return gcomp_error_trace(st, __FILE__, __LINE__);
  return GCOMP_OK;
}

/* Shards to their owners: rank j receives every rank's encoding of shard j and sums the
 * decoded contributions in rank order into buf's shard j. */
int gcomp_direct_reduce_scatter(gcomp_coll *c, const gcomp_group *g, float *buf, size_t count,
                                unsigned phase, uint64_t key_salt, gcomp_codec *codec) {
  return dx_half(c, g, buf, count, phase, key_salt, codec, NULL, gcomp_dx_post_rs,
                 gcomp_dx_send_rs, gcomp_dx_reduce);
}

/* Every rank encodes its (reduced) shard once, the frames are allgathered, and every rank
 * decodes every shard. The allgather's messages take step 1 (dx: step + 1). */
int gcomp_direct_allgather(gcomp_coll *c, const gcomp_group *g, float *buf, size_t count,
                           unsigned phase, uint64_t key_salt, gcomp_codec *codec) {
  return dx_half(c, g, buf, count, phase, key_salt, NULL, codec, gcomp_dx_post_ag,
                 gcomp_dx_send_ag, gcomp_dx_gather);
}

int gcomp_direct_allreduce(gcomp_coll *c, const gcomp_group *g, float *buf, size_t count,
                           unsigned phase, uint64_t key_salt) {
  GCOMP_CHECK(gcomp_direct_reduce_scatter(c, g, buf, count, phase, key_salt, c->codec));
  return gcomp_direct_allgather(c, g, buf, count, phase, key_salt, c->codec2);
}
