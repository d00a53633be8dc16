/* Sparse allreduce for top-k: every rank encodes its whole gradient once (error feedback
 * applied there), the (index, value) frames are allgathered, and every rank sums the n
 * frames in rank order into a dense fp32 result. Volume grows with n * k; the planner
 * switches to the direct exchange (dense reduced shards) once the union is dense enough
 * that dense is cheaper, as SparCML does. */
#include <stdlib.h>
#include <string.h>

#include "abort.h"
#include "coll.h"

int gcomp_sparse_allreduce(gcomp_coll *c, const gcomp_group *g, float *buf, size_t count,
                           unsigned phase, uint64_t key_salt) {
  int n = g->n, me = g->me;
  if (count == 0) return GCOMP_OK;
  size_t cap = gcomp_codec_max_encoded_size(c->codec, count);
  gcomp_treq **reqs = calloc(2 * (size_t)n, sizeof *reqs);
  size_t *lens = calloc((size_t)n, sizeof *lens);
  int st = reqs && lens ? GCOMP_OK
                        : gcomp_error_set(GCOMP_ERR_NOMEM, __FILE__, __LINE__, "sparse: tables");
  if (st == GCOMP_OK) st = gcomp_coll_reserve(c, cap * (size_t)n);
  uint8_t *frames = gcomp_coll_tmp(c);
  for (int r = 0; st == GCOMP_OK && r < n; r++)
    if (r != me)
      st = gcomp_irecv(c->t, g->ranks[r], gcomp_coll_stag(c, phase, 0, (unsigned)r, cap),
                       frames + cap * (size_t)r, cap, &reqs[n + r]);
  if (st == GCOMP_OK) {
    uint64_t t0 = gcomp_now_ns();
    st = gcomp_encode(c->codec, gcomp_shard_key(c->key, key_salt, 0), buf, count,
                      frames + cap * (size_t)me, cap, &lens[me]);
    c->stats->encode_s += (double)(gcomp_now_ns() - t0) * 1e-9;
  }
  for (int r = 0; st == GCOMP_OK && r < n; r++) {
    if (r == me) continue;
    c->stats->wire_bytes += lens[me];
    st = gcomp_isend(c->t, g->ranks[r], gcomp_coll_stag(c, phase, 0, (unsigned)me, cap),
                     frames + cap * (size_t)me, lens[me], &reqs[r]);
  }
  for (int r = 0; st == GCOMP_OK && r < n; r++) {
    if (r != me) {
      uint64_t t0 = gcomp_now_ns();
      st = gcomp_abort_wait(c->abort, c->t, reqs[n + r], &lens[r]);
      reqs[n + r] = NULL;
      c->stats->wait_s += (double)(gcomp_now_ns() - t0) * 1e-9;
      if (st < 0) break;
    }
    uint64_t t0 = gcomp_now_ns();
    st = r == 0 ? gcomp_decode(c->codec, frames + cap * (size_t)r, lens[r], buf, count)
                : gcomp_decode_add(c->codec, frames + cap * (size_t)r, lens[r], buf, count);
    c->stats->decode_s += (double)(gcomp_now_ns() - t0) * 1e-9;
    if (st == GCOMP_ERR_CORRUPT) st = gcomp_abort_corrupt_from(c->abort, c, st, g->ranks[r]);
  }
  if (st == GCOMP_OK) st = gcomp_coll_waitall(c, n, reqs);
  for (int i = 0; st < 0 && reqs && i < 2 * n; i++)
    if (reqs[i]) gcomp_cancel(c->t, reqs[i]);
  free(reqs);
  free(lens);
  if (st < 0) return gcomp_error_trace(st, __FILE__, __LINE__);
  return GCOMP_OK;
}
