/* The descriptors of reduce_scatter's, allgather's and barrier's algorithms, built from the
 * blocks allreduce's algorithms are made of (ring.c, shm.c, direct.c) and rhd_coll.c's: each
 * runs over the whole working vector, block r being rank r's (the gcomp_chunk partition over
 * the ranks, which is exactly size blocks of the caller's count), and is priced from the
 * cost primitives of cost.c. */
#include "coll_hier.h"

static gcomp_group world_group(const gcomp_coll *c) {
  return (gcomp_group){c->world, c->t->size, c->t->rank};
}

/* one half of an allreduce's cost: n-1 steps carrying (n-1)/n of the vector */
static double half_ring(const gcomp_plan_in *in, double wire, double gamma) {
  gcomp_link l = gcomp_cost_flat_link(in);
  int n = in->n;
  if (n <= 1) return 0;
  return (n - 1) * l.alpha_s + (double)(n - 1) / n * (double)in->bytes * (wire * l.beta_spb + gamma);
}

/* halving (or doubling) over p = 2^k ranks: k steps carrying (p-1)/p of the vector; a group
 * that is not a power of two folds (rhd_coll.c): one more step with the whole vector (reduced,
 * for the reduce-scatter) and one with a block. The farthest pairs move the largest halves,
 * every rank of a node at once, so across nodes the node's link is shared. */
static double half_rhd(const gcomp_plan_in *in, double gamma) {
  int n = in->n, k = 0, p = 1;
  if (n <= 1) return 0;
  while (p * 2 <= n) p *= 2, k++;
  gcomp_link l = gcomp_cost_shared_link(in);
  double m = (double)in->bytes;
  double t = k * l.alpha_s + (double)(p - 1) / p * m * (l.beta_spb + gamma);
  if (p != n) t += 2 * l.alpha_s + (m + m / n) * l.beta_spb + m * gamma;
  return t;
}

/* the shared segment's rounds: half of its allreduce's (one copy in, or one out, per value) */
static double half_shm(const gcomp_plan_in *in) {
  double c = gcomp_cost_shm(in);
  return c < 0 ? c : 0.5 * c;
}

/* the direct exchange's one half: frames to (or from) every peer at once over the node's
 * shared link, the codec over the whole vector once */
static double half_direct(const gcomp_plan_in *in, double gamma) {
  if (in->ratio <= 0) return -1;
  int n = in->n;
  double m = (double)in->bytes;
  if (n <= 1) return m * in->codec_spb;
  gcomp_link l = gcomp_cost_shared_link(in);
  return (n - 1) * l.alpha_s + (double)(n - 1) / n * m * (in->ratio * l.beta_spb + gamma) +
         m * in->codec_spb;
}

/* ---- reduce_scatter: rank r ends with the reduction of block r ---------------------- */
static int rs_ring_run(gcomp_coll *c, uint8_t *buf, size_t count) {
  gcomp_group g = world_group(c);
  return gcomp_ring_reduce_scatter(c, &g, buf, count, 0);
}
static double rs_ring_cost(const gcomp_plan_in *in) { return half_ring(in, 1, in->gamma_spb); }

static int rs_rhd_run(gcomp_coll *c, uint8_t *buf, size_t count) {
  gcomp_group g = world_group(c);
  return gcomp_rhd_reduce_scatter(c, &g, buf, count, 0);
}
static double rs_rhd_cost(const gcomp_plan_in *in) { return half_rhd(in, in->gamma_spb); }

static int rs_shm_run(gcomp_coll *c, uint8_t *buf, size_t count) {
  return gcomp_shm_reduce_scatter(c, c->shm, buf, count);
}
static double rs_shm_cost(const gcomp_plan_in *in) { return half_shm(in); }

/* the codec once per value: each rank encodes block j for its owner j, who sums the decoded
 * contributions in fp32 (error feedback per key and block) */
/* A rank has its block before the ranks know whether every frame was sound: one more small
 * exchange keeps them in the call until the rank that found a corrupt frame (and left
 * without joining it) stops them, by its notice (abort.h) or their timeout and the failure
 * exchange, so that every rank fails the call, as allreduce's allgather half makes them. */
int gcomp_rs_settle(gcomp_coll *c) {
  gcomp_group g = world_group(c);
  float sound = 0;
  return g.n > 1 ? gcomp_rd_allreduce(c, &g, (uint8_t *)&sound, 1, 1) : GCOMP_OK;
}
static int rs_direct_run(gcomp_coll *c, uint8_t *buf, size_t count) {
  gcomp_group g = world_group(c);
  gcomp_coll_inplace(c, buf, count);
  GCOMP_CHECK(gcomp_direct_reduce_scatter(c, &g, (float *)(void *)buf, count, 0, 0, c->codec));
  return gcomp_rs_settle(c);
}
static double rs_direct_cost(const gcomp_plan_in *in) { return half_direct(in, in->gamma_spb); }

/* ---- allgather: block r comes from rank r -------------------------------------------- */
static int ag_ring_run(gcomp_coll *c, uint8_t *buf, size_t count) {
  gcomp_group g = world_group(c);
  return gcomp_ring_allgather(c, &g, buf, count, 0);
}
static double ag_ring_cost(const gcomp_plan_in *in) { return half_ring(in, 1, 0); }

static int ag_rhd_run(gcomp_coll *c, uint8_t *buf, size_t count) {
  gcomp_group g = world_group(c);
  return gcomp_rhd_allgather(c, &g, buf, count, 0);
}
static double ag_rhd_cost(const gcomp_plan_in *in) { return half_rhd(in, 0); }

static int ag_shm_run(gcomp_coll *c, uint8_t *buf, size_t count) {
  return gcomp_shm_allgather(c, c->shm, buf, count);
}
static double ag_shm_cost(const gcomp_plan_in *in) { return half_shm(in); }

/* the owner encodes its block once; every rank, the owner too, decodes every block from
 * the same frames: all hold the same bits */
static int ag_direct_run(gcomp_coll *c, uint8_t *buf, size_t count) {
  gcomp_group g = world_group(c);
  return gcomp_direct_allgather(c, &g, (float *)(void *)buf, count, 0, 0xa11ull, c->codec);
}
static double ag_direct_cost(const gcomp_plan_in *in) { return half_direct(in, 0); }

/* ---- barrier: the call's agreement (call_coll.c) met every rank already -------------- */
static int barrier_run(gcomp_coll *c, uint8_t *buf, size_t count) {
  (void)c, (void)buf, (void)count;
  return GCOMP_OK;
}
static double barrier_cost(const gcomp_plan_in *in) {
  (void)in;
  return 0;
}

const gcomp_algo gcomp_algo_rs_ring = {
    "reduce_scatter:ring", "pipelined ring: n-1 steps, (n-1)/n of the vector per rank",
    rs_ring_run, rs_ring_cost, 0, GCOMP_COLL_REDUCE_SCATTER};
const gcomp_algo gcomp_algo_rs_rhd = {
    "reduce_scatter:rhd", "recursive halving: log2(n) steps, the ring's volume; for small blocks",
    rs_rhd_run, rs_rhd_cost, 0, GCOMP_COLL_REDUCE_SCATTER};
const gcomp_algo gcomp_algo_rs_shm = {
    "reduce_scatter:shm", "one node: through the shared segment, each rank sums its block",
    rs_shm_run, rs_shm_cost, 0, GCOMP_COLL_REDUCE_SCATTER};
const gcomp_algo gcomp_algo_rs_direct = {
    "reduce_scatter:direct", "compressed: blocks encoded once to their owners, summed in fp32",
    rs_direct_run, rs_direct_cost, 1, GCOMP_COLL_REDUCE_SCATTER};
const gcomp_algo gcomp_algo_ag_ring = {
    "allgather:ring", "pipelined ring: n-1 steps, each block forwarded as it lands",
    ag_ring_run, ag_ring_cost, 0, GCOMP_COLL_ALLGATHER};
const gcomp_algo gcomp_algo_ag_rhd = {
    "allgather:rhd", "recursive doubling: log2(n) steps, the ring's volume; for small blocks",
    ag_rhd_run, ag_rhd_cost, 0, GCOMP_COLL_ALLGATHER};
const gcomp_algo gcomp_algo_ag_shm = {
    "allgather:shm", "one node: every rank's block through the shared segment",
    ag_shm_run, ag_shm_cost, 0, GCOMP_COLL_ALLGATHER};
const gcomp_algo gcomp_algo_ag_direct = {
    "allgather:direct", "compressed: each owner encodes its block once, every rank decodes all",
    ag_direct_run, ag_direct_cost, 1, GCOMP_COLL_ALLGATHER};
const gcomp_algo gcomp_algo_barrier = {
    "barrier:agree", "the call's agreement exchange (a small allreduce) is the barrier",
    barrier_run, barrier_cost, 0, GCOMP_COLL_BARRIER};
