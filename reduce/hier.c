/* Hierarchical allreduce: reduce-scatter inside each node, allreduce of every shard across
 * nodes (each local rank carries one shard, so all local ranks drive the fabric at once and
 * each node sends one reduced payload in total), allgather inside the node. */
#include <stdlib.h>

#include "coll.h"

/* The ranks holding local index `li` on every node, in node order. Needs every node to
 * hold the same number of ranks. */
static int cross_group(const gcomp_transport *t, int *ranks) {
  int *seen = calloc((size_t)t->nnodes, sizeof *seen);
  GCOMP_FAIL_IF(!seen, GCOMP_ERR_NOMEM, "hier: node table");
  for (int r = 0; r < t->size; r++) {
    int node = t->node_of[r];
    if (seen[node]++ == t->local_rank) ranks[node] = r;
  }
  int even = 1;
  for (int k = 0; k < t->nnodes; k++) even &= seen[k] == t->local_size;
  free(seen);
  GCOMP_FAIL_IF(!even, GCOMP_ERR_UNSUPPORTED, "hier: nodes hold different numbers of ranks");
  return GCOMP_OK;
}

/* How the shard crosses the nodes. */
enum { CROSS_DENSE, CROSS_DIRECT, CROSS_SPARSE };

static int hier_run_with(gcomp_coll *c, uint8_t *buf, size_t count, int how) {
  gcomp_transport *t = c->t;
  gcomp_group local = {t->local_ranks, t->local_size, t->local_rank};
  int *xr = malloc((size_t)t->nnodes * sizeof *xr);
  GCOMP_FAIL_IF(!xr, GCOMP_ERR_NOMEM, "hier: cross group");
  int st = cross_group(t, xr);
  gcomp_group cross = {xr, t->nnodes, t->node};
  size_t off, len;
  gcomp_chunk(count, local.n, local.me, &off, &len);
  uint64_t t0 = gcomp_now_ns(), t1 = t0, t2 = t0;
  /* inside the node: fp32 by the ring, or GCOMP_INTRA_CODEC by direct exchange */
  if (st == GCOMP_OK && c->intra) {
    gcomp_coll_inplace(c, buf, count);
    st = gcomp_direct_reduce_scatter(c, &local, (float *)(void *)buf, count, 0, 0x200u, c->intra);
  } else if (st == GCOMP_OK && c->shm) {
    st = gcomp_shm_reduce_scatter(c, c->shm, buf, count);   /* the node's shared segment */
    c->src = NULL;   /* buf holds the input's place from here on */
  } else if (st == GCOMP_OK) {
    st = gcomp_ring_reduce_scatter(c, &local, buf, count, 0);
  }
  t1 = gcomp_now_ns();
  if (st == GCOMP_OK && how != CROSS_DENSE) {
    /* fp32 inside the node, the codec across: each local rank compresses its own shard */
    float *shard = (float *)(void *)(buf + off * c->esize);
    uint64_t salt = 0x100u + (uint64_t)local.me;
    st = how == CROSS_DIRECT ? gcomp_direct_allreduce(c, &cross, shard, len, 2, salt)
                             : gcomp_sparse_allreduce(c, &cross, shard, len, 2, salt);
  } else if (st == GCOMP_OK) {
    /* the shard's own choice: ring or halving/doubling over the inter-node link */
    double bytes = (double)(len * c->esize);
    double ring = gcomp_cost_ring(cross.n, bytes, c->plan->inter, c->plan->gamma_spb);
    double rhd = gcomp_cost_rhd(cross.n, bytes, c->plan->inter, c->plan->gamma_spb);
    uint8_t *shard = buf + off * c->esize;
    st = ring <= rhd ? gcomp_ring_allreduce(c, &cross, shard, len, 2)
                     : gcomp_rhd_allreduce(c, &cross, shard, len, 2);
  }
  t2 = gcomp_now_ns();
  if (st == GCOMP_OK && c->intra)
    st = gcomp_direct_allgather(c, &local, (float *)(void *)buf, count, 4, 0x200u, c->intra2);
  else if (st == GCOMP_OK && c->shm)
    st = gcomp_shm_allgather(c, c->shm, buf, count);
  else if (st == GCOMP_OK)
    st = gcomp_ring_allgather(c, &local, buf, count, 4);
  free(xr);
  if (st < 0) return gcomp_error_trace(st, __FILE__, __LINE__);
  GCOMP_TRACE(GCOMP_SUB_REDUCE, "hier %zu B: in-node reduce-scatter %.2f ms, across %.2f ms, "
              "in-node allgather %.2f ms", count * c->esize, (double)(t1 - t0) * 1e-6,
              (double)(t2 - t1) * 1e-6, (double)(gcomp_now_ns() - t2) * 1e-6);
  return GCOMP_OK;
}

static int hier_run(gcomp_coll *c, uint8_t *buf, size_t count) {
  return hier_run_with(c, buf, count, CROSS_DENSE);
}
static int hier_direct_run(gcomp_coll *c, uint8_t *buf, size_t count) {
  return hier_run_with(c, buf, count, CROSS_DIRECT);
}
static int hier_sparse_run(gcomp_coll *c, uint8_t *buf, size_t count) {
  return hier_run_with(c, buf, count, CROSS_SPARSE);
}

static double hier_cost_with(const gcomp_plan_in *in, int how) {
  if (in->nnodes < 2 || in->local < 1) return -1;
  if (how != CROSS_DENSE && in->ratio <= 0) return -1;
  if (how == CROSS_SPARSE && !in->sparse) return -1;
  double m = (double)in->bytes;
  int L = in->local, M = in->nnodes;
  /* inside the node: a reduce-scatter and an allgather, a ring's volume */
  double intra = gcomp_cost_ring(L, m, in->intra, in->gamma_spb);
  /* the L shards cross the node's one link together: m bytes in all, not m / L */
  gcomp_link shared = {in->inter.alpha_s, in->inter.beta_spb * L};
  if (how == CROSS_DIRECT) return intra + gcomp_cost_direct(M, m / L, shared, in);
  if (how == CROSS_SPARSE) return intra + gcomp_cost_sparse(M, m / L, shared, in);
  double ring = gcomp_cost_ring(M, m / L, shared, in->gamma_spb);
  double rhd = gcomp_cost_rhd(M, m / L, shared, in->gamma_spb);
  return intra + (ring < rhd ? ring : rhd);
}
static double hier_cost(const gcomp_plan_in *in) { return hier_cost_with(in, CROSS_DENSE); }
static double hier_direct_cost(const gcomp_plan_in *in) { return hier_cost_with(in, CROSS_DIRECT); }
static double hier_sparse_cost(const gcomp_plan_in *in) { return hier_cost_with(in, CROSS_SPARSE); }

const gcomp_algo gcomp_algo_hier = {
    "hier", "reduce-scatter in each node, allreduce of shards across nodes, allgather in node",
    hier_run, hier_cost, 0};
const gcomp_algo gcomp_algo_hier_direct = {
    "hier-direct", "hier with fp32 inside nodes and the codec's direct exchange across them",
    hier_direct_run, hier_direct_cost, 1};
const gcomp_algo gcomp_algo_hier_sparse = {
    "hier-sparse", "hier with fp32 inside nodes and top-k frames allgathered across them",
    hier_sparse_run, hier_sparse_cost, 1};
