/* All-to-all's algorithms: pairwise exchange (here) and, on one node, the shared segment's
 * rounds (shm.c).
 *
 * Pairwise exchange: in step k rank me sends its block for rank me + k and
 * receives rank me - k's block for it, every step's transfers posted at once (the
 * transport takes any number in flight), the receives first so that scheduled messages
 * find their buffers announced (fabric/transport.h). Blocks travel in segments
 * (gcomp_coll_seg_elems). Exact: bytes are moved, never reduced. */
#include <stdlib.h>
#include <string.h>

#include "coll.h"

static int pairwise_run(gcomp_coll *c, uint8_t *buf, size_t count) {
  int n = c->t->size, me = c->t->rank;
  size_t es = c->esize, block = count / (size_t)n, bb = block * es;
  const uint8_t *in = c->src ? c->src : buf;
  if (in != buf) memcpy(buf + (size_t)me * bb, in + (size_t)me * bb, bb);
  if (n == 1 || block == 0) return GCOMP_OK;
  size_t seg = gcomp_coll_seg_elems(c, block) * es;
  int nseg = (int)((bb + seg - 1) / seg);
  size_t total = 2 * (size_t)(n - 1) * (size_t)nseg;
  gcomp_treq **reqs = calloc(total, sizeof *reqs);
  GCOMP_FAIL_IF(!reqs, GCOMP_ERR_NOMEM, "alltoall: %zu requests", total);
  int st = GCOMP_OK;
  size_t at = 0;
  for (int k = 1; st == GCOMP_OK && k < n; k++) {
    int from = (me - k + n) % n;
    for (int j = 0; st == GCOMP_OK && j < nseg; j++) {
      size_t off = (size_t)j * seg, len = bb - off < seg ? bb - off : seg;
      st = gcomp_irecv(c->t, from, gcomp_coll_stag(c, 0, 0, (unsigned)j, len),
                       buf + (size_t)from * bb + off, len, &reqs[at++]);
    }
  }
  for (int k = 1; st == GCOMP_OK && k < n; k++) {
    int to = (me + k) % n;
    for (int j = 0; st == GCOMP_OK && j < nseg; j++) {
      size_t off = (size_t)j * seg, len = bb - off < seg ? bb - off : seg;
      c->stats->wire_bytes += len;
      st = gcomp_isend(c->t, to, gcomp_coll_stag(c, 0, 0, (unsigned)j, len),
                       in + (size_t)to * bb + off, len, &reqs[at++]);
    }
  }
  if (st == GCOMP_OK) st = gcomp_coll_waitall(c, (int)at, reqs);
  for (size_t i = 0; st < 0 && i < at; i++)
    if (reqs[i]) gcomp_cancel(c->t, reqs[i]);
  free(reqs);
  if (st < 0) return gcomp_error_trace(st, __FILE__, __LINE__);
  return GCOMP_OK;
}

/* every rank sends (n-1)/n of its vector at once over the node's shared link */
static double pairwise_cost(const gcomp_plan_in *in) {
  int n = in->n;
  if (n <= 1) return 0;
  gcomp_link l = gcomp_cost_shared_link(in);
  return (n - 1) * l.alpha_s + (double)(n - 1) / n * (double)in->bytes * l.beta_spb;
}

const gcomp_algo gcomp_algo_alltoall = {
    "alltoall:pairwise", "every block straight to its rank, all steps in flight at once",
    pairwise_run, pairwise_cost, 0, GCOMP_COLL_ALLTOALL};

/* one node: every byte copied into the segment once and out once, in rounds of one slot,
 * like the segment's allreduce without the sum */
static int shm_run(gcomp_coll *c, uint8_t *buf, size_t count) {
  return gcomp_shm_alltoall(c, c->shm, buf, count);
}
static double shm_cost(const gcomp_plan_in *in) { return gcomp_cost_shm(in); }

const gcomp_algo gcomp_algo_alltoall_shm = {
    "alltoall:shm", "one node: every block through the shared segment, one copy in and one out",
    shm_run, shm_cost, 0, GCOMP_COLL_ALLTOALL};
