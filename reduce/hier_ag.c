/* Hierarchical allgather: the blocks cross the nodes once, then spread inside each node.
 *
 * With the blocks laid out by (index in the node, node) (coll_hier.h),
 *  1. every node's i-th ranks allgather their blocks among themselves: a ring, or
 *     (hier-direct, ZeRO++'s qwZ) each owner encodes its block once and every one of them,
 *     the owner too, decodes the same frames;
 *  2. the node allgathers those pieces in fp32 (its shared segment, else a ring): copies of
 *     the decoded values, so every rank holds bitwise the same parameters.
 * A node receives each other node's blocks once ((nodes - 1) / nodes of the vector), not once
 * per rank as through a flat ring that crosses between nodes at every step. */
#include <stdlib.h>
#include <string.h>

#include "coll_hier.h"

#define SALT_CROSS 0xa12u   /* the owner's error-feedback slot (a codec with +ef) */

/* hier-direct over node runs (gcomp_hier_blocks_runs): nothing moved. My block, encoded and
 * on its way to the other sub-nodes, is decoded in place (the owner keeps the decoded values
 * too) and shared in the node while the frames cross; then each other sub-node's block, as
 * its frame is in, decoded and shared. The frames are gcomp_direct_allgather's. */
static int ag_runs(gcomp_coll *c, const gcomp_hier_blocks *h, const gcomp_group *cross,
                   uint8_t *buf, size_t block) {
  size_t es = c->esize, run = (size_t)h->g * block;
  gcomp_dx x;
  int st = gcomp_dx_init(&x, cross, (float *)(void *)(buf + (size_t)h->idx * block * es),
                         (size_t)h->nsub * block, 2, 0, SALT_CROSS, NULL, c->codec);
  x.stride = run;
  if (st == GCOMP_OK) st = gcomp_coll_reserve(c, x.bytes);
  x.mem = gcomp_coll_tmp(c);
  if (st == GCOMP_OK) st = gcomp_dx_post_ag(c, &x);
  if (st == GCOMP_OK) st = gcomp_dx_send_ag(c, &x);
  gcomp_coll sc = *c;
  sc.drive = 1;   /* frames are in flight while the node's rounds wait */
  for (int k = 0; st == GCOMP_OK && k < h->nsub; k++) {
    int j = (h->sub + k) % h->nsub;   /* mine first */
    st = gcomp_dx_gather_one(c, &x, j);
    if (st == GCOMP_OK && h->g > 1)
      st = gcomp_shm_allgather(&sc, c->shm, buf + (size_t)j * run * es, run);
  }
  return gcomp_dx_end(c, &x, st);
}

/* hier (exact) over node runs: my block sent to the other sub-nodes' ranks of my index and
 * shared in the node while it crosses; each other sub-node's block received in place and
 * shared as it lands. Each link carries what the ring across does ((S-1) blocks a rank). */
static int ag_runs_exact(gcomp_coll *c, const gcomp_hier_blocks *h, uint8_t *buf, size_t block) {
  const int S = h->nsub;
  const size_t es = c->esize, run = (size_t)h->g * block, bytes = block * es;
  gcomp_treq **req = calloc(2 * (size_t)S, sizeof *req);   /* sends | receives */
  GCOMP_FAIL_IF(!req, GCOMP_ERR_NOMEM, "hier: %d requests", 2 * S);
  int st = GCOMP_OK;
  for (int k = 0; st == GCOMP_OK && k < S; k++)
    if (k != h->sub)
      st = gcomp_irecv(c->t, h->cross[k], gcomp_coll_stag(c, 2, 0, (unsigned)k, bytes),
                       buf + (size_t)(k * h->g + h->idx) * bytes, bytes, &req[S + k]);
  const uint8_t *mine = buf + (size_t)(h->sub * h->g + h->idx) * bytes;
  for (int i = 1; st == GCOMP_OK && i < S; i++) {
    int k = (h->sub + i) % S;
    c->stats->wire_bytes += bytes;
    st = gcomp_isend(c->t, h->cross[k], gcomp_coll_stag(c, 2, 0, (unsigned)h->sub, bytes), mine,
                     bytes, &req[k]);
  }
  gcomp_coll sc = *c;
  sc.drive = 1;   /* blocks are in flight while the node's rounds wait */
  for (int i = 0; st == GCOMP_OK && i < S; i++) {
    int j = (h->sub + i) % S;   /* mine first */
    if (j != h->sub) st = gcomp_coll_waitall(c, 1, &req[S + j]);
    if (st == GCOMP_OK) st = gcomp_shm_allgather(&sc, c->shm, buf + (size_t)j * run * es, run);
  }
  if (st == GCOMP_OK) st = gcomp_coll_waitall(c, 2 * S, req);
  for (int i = 0; st < 0 && i < 2 * S; i++)
    if (req[i]) gcomp_cancel(c->t, req[i]), req[i] = NULL;
  free(req);
  return st;
}

static int ag_hier_with(gcomp_coll *c, uint8_t *buf, size_t count, int compressed) {
  const gcomp_transport *t = c->t;
  size_t block = count / (size_t)t->size, es = c->esize;
  gcomp_hier_blocks h;
  GCOMP_CHECK(gcomp_hier_blocks_make(t, &h));
  gcomp_group cross = {h.cross, h.nsub, h.sub}, in = {h.in, h.g, h.idx};
  size_t plen = (size_t)h.nsub * block;
  uint8_t *piece = buf + (size_t)h.idx * plen * es;
  if (block && c->shm && h.whole && h.g > 1 && gcomp_hier_blocks_runs(&h)) {
    int st = compressed ? ag_runs(c, &h, &cross, buf, block) : ag_runs_exact(c, &h, buf, block);
    GCOMP_TRACE(GCOMP_SUB_REDUCE, "allgather:hier %zu B over node runs, %d sub-node(s) of %d",
                count * es, h.nsub, h.g);
    gcomp_hier_blocks_free(&h);
    if (st < 0) return gcomp_error_trace(st, __FILE__, __LINE__);
    return GCOMP_OK;
  }
  /* only my own block holds data yet (call_coll.c put it at my rank's place) */
  if (h.pos[t->rank] != t->rank && block)
    memcpy(buf + (size_t)h.pos[t->rank] * block * es, buf + (size_t)t->rank * block * es,
           block * es);
  uint64_t t0 = gcomp_now_ns();
  int st = compressed ? gcomp_direct_allgather(c, &cross, (float *)(void *)piece, plen, 2,
                                               SALT_CROSS, c->codec)
                      : gcomp_ring_allgather(c, &cross, piece, plen, 2);
  uint64_t t1 = gcomp_now_ns();
  if (st == GCOMP_OK && h.g > 1)
    st = c->shm && h.whole ? gcomp_shm_allgather(c, c->shm, buf, count)
                           : gcomp_ring_allgather(c, &in, buf, count, 4);
  if (st == GCOMP_OK) st = gcomp_hier_blocks_move(c, &h, buf, block, 0);
  GCOMP_TRACE(GCOMP_SUB_REDUCE, "allgather:hier %zu B, %d sub-node(s) of %d: across %.2f ms, "
              "node %.2f ms", count * es, h.nsub, h.g, (double)(t1 - t0) * 1e-6,
              (double)(gcomp_now_ns() - t1) * 1e-6);
  gcomp_hier_blocks_free(&h);
  if (st < 0) return gcomp_error_trace(st, __FILE__, __LINE__);
  return GCOMP_OK;
}

static int ag_hier_run(gcomp_coll *c, uint8_t *buf, size_t count) {
  return ag_hier_with(c, buf, count, 0);
}
static int ag_hier_direct_run(gcomp_coll *c, uint8_t *buf, size_t count) {
  return ag_hier_with(c, buf, count, 1);
}

/* The piece across the sub-nodes (a node's g ranks on its link at once: each node takes
 * in (S-1)/S of the vector), then the node's allgather (a ring's half over g ranks) */
static double ag_hier_cost_with(const gcomp_plan_in *in, int compressed) {
  if (in->nnodes < 2 || (compressed && in->ratio <= 0)) return -1;
  int g = gcomp_hier_blocks_g(in), S = in->n / g;
  int sharing = in->local > 0 ? in->local : in->local_max;
  if (S > GCOMP_RING_MAX_RANKS || g > GCOMP_RING_MAX_RANKS) return -1;
  double m = (double)in->bytes, part = m / g;
  double node = (g - 1) * in->intra.alpha_s + (double)(g - 1) / g * m * in->intra.beta_spb;
  double wire = compressed ? in->ratio : 1;
  double cross = (S - 1) * in->inter.alpha_s +
                 (double)(S - 1) / S * part * wire * in->inter.beta_spb * (sharing > 1 ? sharing : 1);
  return node + cross + (compressed ? part * in->codec_spb : 0);
}
static double ag_hier_cost(const gcomp_plan_in *in) { return ag_hier_cost_with(in, 0); }
static double ag_hier_direct_cost(const gcomp_plan_in *in) { return ag_hier_cost_with(in, 1); }

const gcomp_algo gcomp_algo_ag_hier = {
    "allgather:hier", "nodes: blocks allgathered across nodes once, then inside each node",
    ag_hier_run, ag_hier_cost, 0, GCOMP_COLL_ALLGATHER};
const gcomp_algo gcomp_algo_ag_hier_direct = {
    "allgather:hier-direct",
    "nodes: each block encoded once by its owner across nodes, decoded values copied in node (qwZ)",
    ag_hier_direct_run, ag_hier_direct_cost, 1, GCOMP_COLL_ALLGATHER};
