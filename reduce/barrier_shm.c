/* Barrier inside one node through the node's shared segment (shm.c): one round of flags,
 * the call's shape word beside each (call_coll.c: gcomp_call_self_agreeing), no data. The
 * agreement's exchange it replaces (barrier:agree) was a small allreduce of 13 words through
 * the segment's slots; this round touches only each rank's hot line. */
#include "coll.h"

static int shm_run(gcomp_coll *c, uint8_t *buf, size_t count) {
  (void)buf, (void)count;
  c->shape_who = -1;
  if (c->t->size == 1) return GCOMP_OK;
  GCOMP_FAIL_IF(!c->shm || c->t->nnodes != 1, GCOMP_ERR_INVALID,
                "barrier:shm: needs one node with a shared segment (%d nodes)", c->t->nnodes);
  return gcomp_shm_barrier(c, c->shm);
}

/* one round of the segment, nothing copied */
static double shm_cost(const gcomp_plan_in *in) {
  gcomp_plan_in none = *in;
  none.bytes = 0;
  return gcomp_cost_shm(&none);
}

const gcomp_algo gcomp_algo_barrier_shm = {
    "barrier:shm", "one node: a round of the shared segment's flags, the call's shape beside them",
    shm_run, shm_cost, 0, GCOMP_COLL_BARRIER};
