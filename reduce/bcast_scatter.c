/* Broadcast of long messages as a scatter then an allgather (van de Geijn): the root sends
 * block r of the message (the gcomp_chunk partition) to rank r, and the ring allgather
 * (ring.c) completes every rank's copy. Each rank then moves about twice the message
 * however many ranks there are, where a tree moves it log2(n) times along its path. */
#include <stdlib.h>

#include "coll.h"

static int scatter_run(gcomp_coll *c, uint8_t *buf, size_t count) {
  int n = c->t->size, me = c->t->rank;
  if (n == 1 || count == 0) return GCOMP_OK;
  size_t es = c->esize, off, len;
  gcomp_treq **reqs = calloc((size_t)n, sizeof *reqs);
  GCOMP_FAIL_IF(!reqs, GCOMP_ERR_NOMEM, "broadcast: %d requests", n);
  int st = GCOMP_OK;
  if (me == c->root) {
    for (int r = 0; st == GCOMP_OK && r < n; r++) {
      if (r == me) continue;
      gcomp_chunk(count, n, r, &off, &len);
      c->stats->wire_bytes += len * es;
      st = gcomp_isend(c->t, r, gcomp_coll_stag(c, 0, 0, 0, len * es), buf + off * es, len * es,
                       &reqs[r]);
    }
  } else {
    gcomp_chunk(count, n, me, &off, &len);
    st = gcomp_irecv(c->t, c->root, gcomp_coll_stag(c, 0, 0, 0, len * es), buf + off * es,
                     len * es, &reqs[me]);
  }
  if (st == GCOMP_OK) st = gcomp_coll_waitall(c, n, reqs);
  for (int r = 0; st < 0 && r < n; r++)
    if (reqs[r]) gcomp_cancel(c->t, reqs[r]);
  free(reqs);
  if (st < 0) return gcomp_error_trace(st, __FILE__, __LINE__);
  gcomp_group g = {c->world, n, me};
  return gcomp_ring_allgather(c, &g, buf, count, 1);
}

static double scatter_cost(const gcomp_plan_in *in) {
  int n = in->n;
  if (n <= 1) return 0;
  gcomp_link l = gcomp_cost_flat_link(in);
  double part = (double)(n - 1) / n * (double)in->bytes * l.beta_spb;
  return 2.0 * (n - 1) * l.alpha_s + 2.0 * part;
}

const gcomp_algo gcomp_algo_bcast_scatter = {
    "broadcast:scatter", "the root scatters blocks, a ring allgathers them: ~2x the message per rank",
    scatter_run, scatter_cost, 0, GCOMP_COLL_BROADCAST};
