/* Compressed allreduce by direct exchange: every rank encodes each shard of its gradient
 * once (error feedback applied there) and sends shard j to its owner j; the owner decodes
 * and adds the n contributions in rank order into fp32, encodes the reduced shard once
 * more, and the shards are allgathered. Every value is quantised at most twice, whatever
 * the rank count — unlike a ring that re-quantises the partial sum at each of its hops.
 * Every rank (the owner too) decodes the same allgathered bytes: results are identical. */
#include <stdlib.h>
#include <string.h>

#include "abort.h"
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

static void cancel_all(gcomp_coll *c, gcomp_treq **reqs, int n) {
  for (int i = 0; i < n; i++)
    if (reqs[i]) gcomp_cancel(c->t, reqs[i]), reqs[i] = NULL;
}

/* Lays out one frame slot per shard of count elements (its codec's size bound) from
 * off[0]; off[n] is where the slots end. */
static size_t shard_slots(const gcomp_codec *codec, size_t count, int n, size_t *off) {
  size_t at = 0;
  for (int j = 0; j < n; j++) {
    size_t o, l;
    gcomp_chunk(count, n, j, &o, &l);
    off[j] = at;
    at += gcomp_codec_max_encoded_size(codec, l);
  }
  off[n] = at;
  return at;
}

/* Waits for the sends (the caller reuses the scratch next), cancels everything left on a
 * failure, frees the tables. */
static int finish(gcomp_coll *c, int st, int n, gcomp_treq **reqs, size_t *off) {
  if (st == GCOMP_OK) st = gcomp_coll_waitall(c, n, reqs);
  if (st < 0 && reqs) cancel_all(c, reqs, 2 * n);
  free(off);
  free(reqs);
  if (st < 0) return gcomp_error_trace(st, __FILE__, __LINE__);
  return GCOMP_OK;
}

/* Shards to their owners: rank j receives every rank's encoding of shard j and sums the
 * decoded contributions in rank order (the same order on every owner) into buf's shard j.
 * Other shards of buf are left as they were. */
int gcomp_direct_reduce_scatter(gcomp_coll *c, const gcomp_group *g, float *buf, size_t count,
                                unsigned phase, uint64_t key_salt, gcomp_codec *codec) {
  int n = g->n, me = g->me;
  if (count == 0) return GCOMP_OK;
  size_t my_off, my_len;
  gcomp_chunk(count, n, me, &my_off, &my_len);
  /* scratch: n outgoing frames (shard j for owner j) | n incoming frames of my shard */
  size_t *off = calloc(2 * (size_t)n + 1, sizeof *off);
  gcomp_treq **reqs = calloc(2 * (size_t)n, sizeof *reqs);
  int st = off && reqs ? GCOMP_OK
                       : gcomp_error_set(GCOMP_ERR_NOMEM, __FILE__, __LINE__, "direct: tables");
  size_t at = st == GCOMP_OK ? shard_slots(codec, count, n, off) : 0;
  size_t in_cap = gcomp_codec_max_encoded_size(codec, my_len);
  for (int r = 0; st == GCOMP_OK && r < n; r++) off[n + r] = at, at += in_cap;
  if (st == GCOMP_OK) off[2 * n] = at, st = gcomp_coll_reserve(c, at);
  uint8_t *scratch = gcomp_coll_tmp(c);

  /* receives first, then encode and send shard by shard, so encoding the next shard
   * overlaps the transfer of the last */
  for (int r = 0; st == GCOMP_OK && r < n; r++)
    if (r != me)
      st = gcomp_irecv(c->t, g->ranks[r], gcomp_coll_stag(c, phase, 0, (unsigned)r, in_cap),
                       scratch + off[n + r], in_cap, &reqs[n + r]);
  size_t my_frame_len = 0;
  for (int k = 1; st == GCOMP_OK && k <= n; k++) {
    int j = (me + k) % n;   /* my own shard last: the others are waiting for theirs */
    size_t o, l, flen;
    gcomp_chunk(count, n, j, &o, &l);
    uint64_t t0 = gcomp_now_ns();
    st = gcomp_encode(codec, gcomp_shard_key(c->key, key_salt, j), buf + o, l, scratch + off[j],
                      off[j + 1] - off[j], &flen);
    c->stats->encode_s += elapsed(t0);
    if (st < 0) break;
    if (j == me) {
      memcpy(scratch + off[n + me], scratch + off[j], flen);
      my_frame_len = flen;
    } else {
      c->stats->wire_bytes += flen;
      gcomp_abort_corrupt_frame(c->abort, scratch + off[j], flen, g->ranks[j]);   /* GCOMP_FAULT */
      /* owner j's capacity for it: the bound of shard j, as j computes it (in_cap) */
      st = gcomp_isend(c->t, g->ranks[j],
                       gcomp_coll_stag(c, phase, 0, (unsigned)me, off[j + 1] - off[j]),
                       scratch + off[j], flen, &reqs[j]);
    }
  }
  float *acc = buf + my_off;
  for (int r = 0; st == GCOMP_OK && r < n; r++) {
    size_t flen = my_frame_len;
    if (r != me) st = wait_one(c, &reqs[n + r], &flen);
    if (st < 0) break;
    uint64_t t0 = gcomp_now_ns();
    st = r == 0 ? gcomp_decode(codec, scratch + off[n + r], flen, acc, my_len)
                : gcomp_decode_add(codec, scratch + off[n + r], flen, acc, my_len);
    c->stats->decode_s += elapsed(t0);
    if (st == GCOMP_ERR_CORRUPT) st = gcomp_abort_corrupt_from(c->abort, c, st, g->ranks[r]);
  }
  return finish(c, st, n, reqs, off);
}

/* Every rank encodes its (reduced) shard once, the frames are allgathered, and every rank
 * decodes every shard — its own too, so that all ranks hold the same values. */
int gcomp_direct_allgather(gcomp_coll *c, const gcomp_group *g, float *buf, size_t count,
                           unsigned phase, uint64_t key_salt, gcomp_codec *codec) {
  int n = g->n, me = g->me;
  if (count == 0) return GCOMP_OK;
  size_t *off = calloc((size_t)n + 1, sizeof *off);
  gcomp_treq **reqs = calloc(2 * (size_t)n, sizeof *reqs);
  int st = off && reqs ? GCOMP_OK
                       : gcomp_error_set(GCOMP_ERR_NOMEM, __FILE__, __LINE__, "direct: tables");
  if (st == GCOMP_OK) st = gcomp_coll_reserve(c, shard_slots(codec, count, n, off));
  uint8_t *scratch = gcomp_coll_tmp(c);
  size_t my_off, my_len, red_len = 0;
  gcomp_chunk(count, n, me, &my_off, &my_len);
  /* receives before the encoding: their buffers are announced to the senders meanwhile */
  for (int r = 0; st == GCOMP_OK && r < n; r++)
    if (r != me)
      st = gcomp_irecv(c->t, g->ranks[r],
                       gcomp_coll_stag(c, phase, 1, (unsigned)r, off[r + 1] - off[r]),
                       scratch + off[r], off[r + 1] - off[r], &reqs[n + r]);
  if (st == GCOMP_OK) {
    uint64_t t0 = gcomp_now_ns();
    /* a second stage with error feedback (sign) keeps the owner's residual per shard: the
     * key of the reduce-scatter's, moved to its own range */
    uint64_t key = gcomp_shard_key(c->key, key_salt ^ 0x5ec0000000000000ull, me);
    st = gcomp_encode(codec, key, buf + my_off, my_len, scratch + off[me], off[me + 1] - off[me],
                      &red_len);
    c->stats->encode_s += elapsed(t0);
  }
  for (int r = 0; st == GCOMP_OK && r < n; r++) {
    if (r == me) continue;
    c->stats->wire_bytes += red_len;
    st = gcomp_isend(c->t, g->ranks[r],
                     gcomp_coll_stag(c, phase, 1, (unsigned)me, off[me + 1] - off[me]),
                     scratch + off[me], red_len, &reqs[r]);
  }
  for (int k = 0; st == GCOMP_OK && k < n; k++) {
    int r = (me + k) % n;   /* my own shard needs no wait: decode it first */
    size_t flen = red_len, o, l;
    if (r != me) st = wait_one(c, &reqs[n + r], &flen);
    if (st < 0) break;
    gcomp_chunk(count, n, r, &o, &l);
    uint64_t t0 = gcomp_now_ns();
    st = gcomp_decode(codec, scratch + off[r], flen, buf + o, l);
    c->stats->decode_s += elapsed(t0);
    if (st == GCOMP_ERR_CORRUPT) st = gcomp_abort_corrupt_from(c->abort, c, st, g->ranks[r]);
  }
  return finish(c, st, n, reqs, off);
}

int gcomp_direct_allreduce(gcomp_coll *c, const gcomp_group *g, float *buf, size_t count,
                           unsigned phase, uint64_t key_salt) {
  GCOMP_CHECK(gcomp_direct_reduce_scatter(c, g, buf, count, phase, key_salt, c->codec));
  return gcomp_direct_allgather(c, g, buf, count, phase, key_salt, c->codec2);
}
