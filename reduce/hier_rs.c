/* Hierarchical reduce_scatter, as ZeRO++'s qgZ: the node sums first, in fp32, and only the
 * node's sum crosses to the other nodes, where each block's owner sums the nodes' sums.
 *
 * The blocks are laid out by (index in the node, node) (coll_hier.h), so that
 *  1. the node's reduce-scatter (its shared segment; else a ring, or GCOMP_INTRA_CODEC by
 *     direct exchange, quantised once) leaves its i-th rank the node's fp32 sum of the
 *     blocks of every node's i-th rank;
 *  2. those ranks, one per node, reduce-scatter that piece among themselves: a ring in
 *     fp32, or (hier-direct) the codec's direct exchange, each node's sum encoded once on
 *     its way to the block's owner, who sums the decoded sums in fp32 with error feedback
 *     per key and block.
 * Each node sends (nodes - 1) / nodes of its sum, not the flat ring's (ranks - 1) / ranks of
 * every rank's input: at 4 ranks on 2 nodes a third less over the nodes' links, and each
 * value is quantised at most once per level. With a codec that encodes in parts and the
 * node's segment, step 2's encoders are fed by step 1's rounds (gcomp_dx_feed_part, as
 * hier-direct's pipeline does): the node's sum of a rank's piece is never stored. */
#include <stdlib.h>
#include <string.h>

#include "coll_hier.h"

/* error-feedback slots of the two levels, apart from every other algorithm's */
#define SALT_NODE 0x210u
#define SALT_CROSS 0x310u

/* The input in pos[] order in buf: scattered from c->src, or moved in place */
static int place_input(gcomp_coll *c, const gcomp_hier_blocks *h, uint8_t *buf, size_t block) {
  if (h->identity) return GCOMP_OK;
  if (!c->src) return gcomp_hier_blocks_move(c, h, buf, block, 1);
  size_t bytes = block * c->esize;
  for (int r = 0; r < h->g * h->nsub; r++)
    memcpy(buf + (size_t)h->pos[r] * bytes, c->src + (size_t)r * bytes, bytes);
  c->src = NULL;
  return GCOMP_OK;
}

/* Step 1: the sub-node's sum of chunk h->idx (of count cut into g) into buf */
static int node_sum(gcomp_coll *c, const gcomp_hier_blocks *h, uint8_t *buf, size_t count) {
  gcomp_group in = {h->in, h->g, h->idx};
  if (h->g == 1) {
    gcomp_coll_inplace(c, buf, count);
    return GCOMP_OK;
  }
  if (c->intra) {
    gcomp_coll_inplace(c, buf, count);
    return gcomp_direct_reduce_scatter(c, &in, (float *)(void *)buf, count, 0, SALT_NODE, c->intra);
  }
  if (c->shm && h->whole) {
    int st = gcomp_shm_reduce_scatter(c, c->shm, buf, count);
    c->src = NULL;
    return st;
  }
  return gcomp_ring_reduce_scatter(c, &in, buf, count, 0);
}

/* Steps 1 and 2 at once: the node's rounds feed the encoders of the frames to the owners
 * (same frames, same residuals as gcomp_direct_reduce_scatter of the stored sum) */
static int fed(gcomp_coll *c, const gcomp_group *cross, uint8_t *buf, size_t count,
               float *piece, size_t plen) {
  gcomp_dx x;
  int st = gcomp_dx_init(&x, cross, piece, plen, 2, 0, SALT_CROSS, c->codec, NULL);
  if (st == GCOMP_OK) st = gcomp_coll_reserve(c, x.bytes);
  x.mem = gcomp_coll_tmp(c);
  if (st == GCOMP_OK) st = gcomp_dx_post_rs(c, &x);
  if (st == GCOMP_OK) {
    gcomp_coll sc = *c;
    sc.drive = 1;   /* frames are in flight while the node's rounds wait */
    gcomp_dx_feed f = {.c = c, .x = &x};
    const uint8_t *in = c->src ? c->src : buf;
    st = gcomp_shm_reduce_scatter_parts(&sc, c->shm, in, count, gcomp_dx_feed_part, &f);
    if (st == GCOMP_OK) st = gcomp_dx_feed_end(&f);
    c->src = NULL;
  }
  if (st == GCOMP_OK) st = gcomp_dx_reduce(c, &x);
  return gcomp_dx_end(c, &x, st);
}

typedef struct {
  gcomp_dx_feed *f;
  size_t base;   /* the run's first element in the piece */
} run_feed;

static int run_part(void *arg, size_t at, size_t n, const float *const *src, int nsrc) {
  run_feed *rf = arg;
  return gcomp_dx_feed_part(rf->f, rf->base + at, n, src, nsrc);
}

/* fed() over node runs: one node reduce-scatter per run, the other sub-nodes' shards first,
 * each from the one after mine on (the nodes do not all send to one node at once), my own
 * last, so that a frame crosses while the node still sums the next (in piece order the
 * first sub-node's ranks sent only when the node's whole sum was done); the input is read
 * where it lies. mine: where my shard's sum goes (my rank's block of the working vector).
 * My own shard's node sum is stored there in fp32 and the other nodes' decoded sums added
 * to it (gcomp_dx's own_exact): at 2 nodes half the codec passes (one shard encoded and
 * decoded, not two), and the owner's node's share of the sum exact. */
static int fed_runs(gcomp_coll *c, const gcomp_hier_blocks *h, const gcomp_group *cross,
                    const uint8_t *in, float *mine, size_t block) {
  size_t run = (size_t)h->g * block, es = c->esize;
  gcomp_dx x;
  /* buf such that my shard (piece index h->sub) is `mine`: the only shard of it written */
  int st = gcomp_dx_init(&x, cross, mine - (size_t)h->sub * block, (size_t)h->nsub * block, 2, 0,
                         SALT_CROSS, c->codec, NULL);
  x.own_exact = 1;   /* my shard's node sum straight into mine, never quantised */
  if (st == GCOMP_OK) st = gcomp_coll_reserve(c, x.bytes);
  x.mem = gcomp_coll_tmp(c);
  if (st == GCOMP_OK) st = gcomp_dx_post_rs(c, &x);
  gcomp_coll sc = *c;
  sc.drive = 1;   /* frames are in flight while the node's rounds wait */
  gcomp_dx_feed f = {.c = c, .x = &x};
  for (int k = 1; st == GCOMP_OK && k <= h->nsub; k++) {
    int j = (h->sub + k) % h->nsub;
    run_feed rf = {&f, (size_t)j * block};
    st = gcomp_dx_feed_shard(&f, j);
    if (st == GCOMP_OK)
      st = gcomp_shm_reduce_scatter_parts(&sc, c->shm, in + (size_t)j * run * es, run, run_part,
                                          &rf);
    if (st == GCOMP_OK) st = gcomp_dx_feed_sent(&f, j);
  }
  c->src = NULL;
  if (st == GCOMP_OK) st = gcomp_dx_reduce(c, &x);
  return gcomp_dx_end(c, &x, st);
}

/* Sends, receives and cancels on failure (what is still pending) */
static int finish(gcomp_coll *c, int n, gcomp_treq **req, int st) {
  if (st == GCOMP_OK) st = gcomp_coll_waitall(c, n, req);
  for (int i = 0; st < 0 && i < n; i++)
    if (req[i]) gcomp_cancel(c->t, req[i]), req[i] = NULL;
  return st;
}

/* hier (exact) over node runs: the node's reduce-scatter run by run, the other sub-nodes'
 * first (each from the one after mine on), each of their blocks sent to its owner as soon
 * as the node has summed it, so that it crosses while the node sums the next; then the
 * owners' sums in sub-node order added to mine. Each link carries what the ring across
 * does ((S-1) blocks a rank); the node's sums no longer all come before the first byte
 * crosses, and the input is read where it lies. */
static int rs_runs(gcomp_coll *c, const gcomp_hier_blocks *h, uint8_t *buf, size_t block) {
  const int S = h->nsub;
  const size_t es = c->esize, run = (size_t)h->g * block, bytes = block * es;
  gcomp_treq **req = calloc(2 * (size_t)S, sizeof *req);   /* sends | receives */
  GCOMP_FAIL_IF(!req, GCOMP_ERR_NOMEM, "hier: %d requests", 2 * S);
  int st = gcomp_coll_reserve(c, (size_t)S * bytes);
  uint8_t *tmp = gcomp_coll_tmp(c);
  for (int k = 0; st == GCOMP_OK && k < S; k++)
    if (k != h->sub)
      st = gcomp_irecv(c->t, h->cross[k], gcomp_coll_stag(c, 2, 0, (unsigned)k, bytes),
                       tmp + (size_t)k * bytes, bytes, &req[S + k]);
  const uint8_t *src = c->src;
  for (int i = 1; st == GCOMP_OK && i <= S; i++) {
    int j = (h->sub + i) % S;
    gcomp_coll sc = *c;
    sc.drive = 1;   /* blocks are in flight while the node's rounds wait */
    sc.src = src ? src + (size_t)j * run * es : NULL;
    uint8_t *at = buf + (size_t)j * run * es;
    st = gcomp_shm_reduce_scatter(&sc, c->shm, at, run);
    if (st == GCOMP_OK && j != h->sub) {
      c->stats->wire_bytes += bytes;
      st = gcomp_isend(c->t, h->cross[j], gcomp_coll_stag(c, 2, 0, (unsigned)h->sub, bytes),
                       at + (size_t)h->idx * bytes, bytes, &req[j]);
    }
  }
  c->src = NULL;
  uint8_t *mine = buf + (size_t)(h->sub * h->g + h->idx) * bytes;
  for (int k = 0; st == GCOMP_OK && k < S; k++) {
    if (k == h->sub) continue;
    st = gcomp_coll_waitall(c, 1, &req[S + k]);
    uint64_t t0 = gcomp_now_ns();
    if (st == GCOMP_OK) c->reduce(mine, tmp + (size_t)k * bytes, block);
    c->stats->reduce_s += (double)(gcomp_now_ns() - t0) * 1e-9;
  }
  st = finish(c, 2 * S, req, st);
  free(req);
  return st;
}

static int rs_hier_with(gcomp_coll *c, uint8_t *buf, size_t count, int compressed) {
  const gcomp_transport *t = c->t;
  size_t block = count / (size_t)t->size, es = c->esize;
  gcomp_hier_blocks h;
  GCOMP_CHECK(gcomp_hier_blocks_make(t, &h));
  gcomp_group cross = {h.cross, h.nsub, h.sub};
  size_t plen = (size_t)h.nsub * block;
  uint8_t *piece = buf + (size_t)h.idx * plen * es;
  uint8_t *want = buf + (size_t)t->rank * block * es;   /* where the call reads my block */
  uint64_t t0 = gcomp_now_ns(), t1 = t0;
  int st = GCOMP_OK, done = 0;
  if (compressed && c->shm && h.whole && h.g > 1 && !c->intra) {
    gcomp_dx probe = {.rs_codec = c->codec};
    done = gcomp_dx_feed_ok(c, &probe, h.g);
  }
  int runs = block && c->shm && h.whole && h.g > 1 && gcomp_hier_blocks_runs(&h);
  if (done && runs) {
    st = fed_runs(c, &h, &cross, c->src ? c->src : buf, (float *)(void *)want, block);
    piece = want - (size_t)h.sub * block * es;   /* my shard is in place already */
  } else if (!compressed && !c->intra && runs) {
    st = rs_runs(c, &h, buf, block);
    piece = want - (size_t)h.sub * block * es;
    done = 2;
  } else {
    st = place_input(c, &h, buf, block);
    if (st == GCOMP_OK && done) st = fed(c, &cross, buf, count, (float *)(void *)piece, plen);
  }
  if (st == GCOMP_OK && !done) {
    st = node_sum(c, &h, buf, count);
    t1 = gcomp_now_ns();
    if (st == GCOMP_OK && compressed)
      st = gcomp_direct_reduce_scatter(c, &cross, (float *)(void *)piece, plen, 2, SALT_CROSS,
                                       c->codec);
    else if (st == GCOMP_OK)
      st = gcomp_ring_reduce_scatter(c, &cross, piece, plen, 2);
  }
  /* my block, the piece's block h.sub, to where the call reads it */
  uint8_t *mine = piece + (size_t)h.sub * block * es;
  if (st == GCOMP_OK && mine != want) memcpy(want, mine, block * es);
  if (st == GCOMP_OK && (compressed || c->intra)) st = gcomp_rs_settle(c);
  GCOMP_TRACE(GCOMP_SUB_REDUCE, "reduce_scatter:hier %zu B, %d sub-node(s) of %d, node %s: "
              "%.2f ms, across and after %.2f ms", count * es, h.nsub, h.g,
              done == 2  ? "run by run"
              : done     ? "fed to the encoders"
              : c->intra ? "by GCOMP_INTRA_CODEC"
                         : "in fp32",
              (double)(t1 - t0) * 1e-6, (double)(gcomp_now_ns() - t1) * 1e-6);
  gcomp_hier_blocks_free(&h);
  if (st < 0) return gcomp_error_trace(st, __FILE__, __LINE__);
  return GCOMP_OK;
}

static int rs_hier_run(gcomp_coll *c, uint8_t *buf, size_t count) {
  return rs_hier_with(c, buf, count, 0);
}
static int rs_hier_direct_run(gcomp_coll *c, uint8_t *buf, size_t count) {
  return rs_hier_with(c, buf, count, 1);
}

/* The node's reduce-scatter (a ring's half over g ranks) and the piece's across the
 * sub-nodes, whose g ranks a node holds send over its link at once. */
static double rs_hier_cost_with(const gcomp_plan_in *in, int compressed) {
  if (in->nnodes < 2 || (compressed && in->ratio <= 0)) return -1;
  int g = gcomp_hier_blocks_g(in), S = in->n / g;
  int sharing = in->local > 0 ? in->local : in->local_max;
  if (S > GCOMP_RING_MAX_RANKS || g > GCOMP_RING_MAX_RANKS) return -1;
  double m = (double)in->bytes, part = m / g;
  double node = (g - 1) * in->intra.alpha_s +
                (double)(g - 1) / g * m * (in->intra.beta_spb + in->gamma_spb);
  double wire = compressed ? in->ratio : 1;
  double cross = (S - 1) * in->inter.alpha_s +
                 (double)(S - 1) / S * part *
                     (wire * in->inter.beta_spb * (sharing > 1 ? sharing : 1) + in->gamma_spb);
  return node + cross + (compressed ? part * in->codec_spb : 0);
}
static double rs_hier_cost(const gcomp_plan_in *in) { return rs_hier_cost_with(in, 0); }
static double rs_hier_direct_cost(const gcomp_plan_in *in) { return rs_hier_cost_with(in, 1); }

const gcomp_algo gcomp_algo_rs_hier = {
    "reduce_scatter:hier", "nodes: fp32 sum in the node, its blocks reduce-scattered across nodes",
    rs_hier_run, rs_hier_cost, 0, GCOMP_COLL_REDUCE_SCATTER};
const gcomp_algo gcomp_algo_rs_hier_direct = {
    "reduce_scatter:hier-direct",
    "nodes: fp32 sum in the node, encoded once to each block's owner on the other nodes (qgZ)",
    rs_hier_direct_run, rs_hier_direct_cost, 1, GCOMP_COLL_REDUCE_SCATTER};
