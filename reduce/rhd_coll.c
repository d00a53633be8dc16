/* Recursive halving reduce-scatter and recursive doubling allgather over a group: log2(p)
 * steps where the ring takes n-1, and the same (n-1)/n of the vector per rank, so they pay
 * where latency dominates (small blocks, many ranks).
 *
 * The blocks are the gcomp_chunk partition over the group's n ranks, and rank i ends with
 * block i as the ring's does. That fixes the order of the partners: the halving pairs the
 * farthest ranks first (distance p/2 down to 1), each pair splitting the range of ranks they
 * share at its middle, so that what a rank keeps stays one contiguous run of blocks that
 * narrows to its own. (Nearest first, as rhd.c's allreduce does, ends rank v on the
 * bit-reversed block.) The doubling retraces the halving backwards.
 *
 * A group of n = p + r ranks (p = 2^k) folds its first 2r ranks in pairs, as rhd.c does:
 * the pair's odd rank stands for both as virtual rank v < r, owning blocks 2v and 2v + 1;
 * virtual rank v >= r owns block v + r. Each virtual rank's blocks are contiguous and in
 * order, so the halving over virtual ranks still cuts at block boundaries. The fold costs
 * the reduce-scatter one whole vector in and one block out, the allgather one block in and
 * one whole vector out. */
#include "coll.h"

enum { STEP_FOLD = 0xff0, STEP_UNFOLD = 0xff1, STEP_DOUBLE = 0x100 };

typedef struct {
  const gcomp_group *g;
  size_t count, es;
  int p, r;   /* virtual ranks; folded pairs */
  int v;      /* my virtual rank, -1 when my pair's odd rank stands for me */
} rhd_shape;

static rhd_shape shape(const gcomp_coll *c, const gcomp_group *g, size_t count) {
  rhd_shape s = {g, count, c->esize, 1, 0, 0};
  while (s.p * 2 <= g->n) s.p *= 2;
  s.r = g->n - s.p;
  int me = g->me;
  s.v = me >= 2 * s.r ? me - s.r : (me & 1) ? me / 2 : -1;
  return s;
}

/* The first element of virtual rank v's blocks (v == p: the end of the vector). */
static size_t vstart(const rhd_shape *s, int v) {
  int block = v < s->r ? 2 * v : v + s->r;
  if (block >= s->g->n) return s->count;
  size_t off, len;
  gcomp_chunk(s->count, s->g->n, block, &off, &len);
  return off;
}

static int vpeer(const rhd_shape *s, int v) {
  return s->g->ranks[v < s->r ? 2 * v + 1 : v + s->r];
}

/* My block's elements. */
static void my_block(const rhd_shape *s, size_t *off, size_t *len) {
  gcomp_chunk(s->count, s->g->n, s->g->me, off, len);
}

int gcomp_rhd_reduce_scatter(gcomp_coll *c, const gcomp_group *g, uint8_t *buf, size_t count,
                             unsigned phase) {
  /* the caller's input is read in place only by sums (dst = src + received) */
  if (g->n == 1 || count == 0 || !c->reduce3) gcomp_coll_inplace(c, buf, count);
  if (g->n == 1 || count == 0) return GCOMP_OK;
  rhd_shape s = shape(c, g, count);
  size_t es = s.es;
  int me = g->me, folded = me < 2 * s.r;
  if (folded) {   /* the even rank's whole vector is reduced into its odd partner's */
    int peer = g->ranks[me ^ 1];
    const uint8_t *from = c->src ? c->src : buf;
    if (s.v < 0)
      GCOMP_CHECK(gcomp_coll_exchange(c, peer, phase, STEP_FOLD, from, count * es, NULL, 0,
                                      NULL, NULL));
    else
      GCOMP_CHECK(gcomp_coll_exchange(c, peer, phase, STEP_FOLD, NULL, 0, NULL, count * es, buf,
                                      c->src));
    c->src = NULL;
  }
  if (s.v >= 0) {
    int vlo = 0, vhi = s.p;
    unsigned k = 0;
    for (int d = s.p / 2; d >= 1; d /= 2, k++) {
      int upper = (s.v & d) != 0, vmid = vlo + d;
      int klo = upper ? vmid : vlo, khi = upper ? vhi : vmid;
      size_t keep_lo = vstart(&s, klo), keep_hi = vstart(&s, khi);
      size_t give_lo = vstart(&s, upper ? vlo : vmid), give_hi = vstart(&s, upper ? vmid : vhi);
      /* out of place, the first step sends from the caller's buffer and sums its kept
       * part straight into the result */
      const uint8_t *from = c->src ? c->src : buf;
      GCOMP_CHECK(gcomp_coll_exchange(c, vpeer(&s, s.v ^ d), phase, k, from + give_lo * es,
                                      (give_hi - give_lo) * es, NULL, (keep_hi - keep_lo) * es,
                                      buf + keep_lo * es, c->src ? c->src + keep_lo * es : NULL));
      c->src = NULL;
      vlo = klo, vhi = khi;
    }
  }
  if (!folded) return GCOMP_OK;
  /* the odd rank hands the even one its block */
  int peer = g->ranks[me ^ 1];
  size_t off, len;
  gcomp_chunk(count, g->n, me ^ 1, &off, &len);
  if (s.v >= 0)
    return gcomp_coll_exchange(c, peer, phase, STEP_UNFOLD, buf + off * es, len * es, NULL, 0,
                               NULL, NULL);
  my_block(&s, &off, &len);
  return gcomp_coll_exchange(c, peer, phase, STEP_UNFOLD, NULL, 0, buf + off * es, len * es, NULL,
                             NULL);
}

int gcomp_rhd_allgather(gcomp_coll *c, const gcomp_group *g, uint8_t *buf, size_t count,
                        unsigned phase) {
  gcomp_coll_inplace(c, buf, count);
  if (g->n == 1 || count == 0) return GCOMP_OK;
  rhd_shape s = shape(c, g, count);
  size_t es = s.es, off, len;
  int me = g->me, folded = me < 2 * s.r;
  if (folded) {   /* the even rank's block joins its odd partner's */
    int peer = g->ranks[me ^ 1];
    gcomp_chunk(count, g->n, s.v < 0 ? me : me ^ 1, &off, &len);
    if (s.v < 0)
      GCOMP_CHECK(gcomp_coll_exchange(c, peer, phase, STEP_FOLD, buf + off * es, len * es, NULL,
                                      0, NULL, NULL));
    else
      GCOMP_CHECK(gcomp_coll_exchange(c, peer, phase, STEP_FOLD, NULL, 0, buf + off * es,
                                      len * es, NULL, NULL));
  }
  if (s.v >= 0) {
    int vlo = s.v, vhi = s.v + 1;
    unsigned k = 0;
    for (int d = 1; d < s.p; d *= 2, k++) {
      /* my run of d virtual ranks and my partner's, the other half of the run of 2d */
      int upper = (s.v & d) != 0;
      int plo = upper ? vlo - d : vhi, phi = upper ? vlo : vhi + d;
      size_t lo = vstart(&s, vlo), hi = vstart(&s, vhi);
      size_t rlo = vstart(&s, plo), rhi = vstart(&s, phi);
      GCOMP_CHECK(gcomp_coll_exchange(c, vpeer(&s, s.v ^ d), phase, STEP_DOUBLE + k,
                                      buf + lo * es, (hi - lo) * es, buf + rlo * es,
                                      (rhi - rlo) * es, NULL, NULL));
      vlo = upper ? plo : vlo, vhi = upper ? vhi : phi;
    }
  }
  if (!folded) return GCOMP_OK;
  /* the odd rank hands the even one the whole vector (its own block included: one
   * message, not two around it; the bytes it lands on are the same) */
  int peer = g->ranks[me ^ 1];
  if (s.v >= 0)
    return gcomp_coll_exchange(c, peer, phase, STEP_UNFOLD, buf, count * es, NULL, 0, NULL, NULL);
  return gcomp_coll_exchange(c, peer, phase, STEP_UNFOLD, NULL, 0, buf, count * es, NULL, NULL);
}
