/* Recursive halving/doubling (Rabenseifner) and recursive doubling.
 *
 * rhd: reduce-scatter by recursive halving, allgather by recursive doubling: log2(p) steps
 * each way and 2(p-1)/p of the message per rank — fewer steps than the ring, same volume.
 * rd: every step exchanges the whole vector: log2(p) steps, for small messages where
 * latency dominates.
 * Rank counts that are not a power of two fold the first 2r ranks in pairs (r = n - p):
 * the even rank of a pair hands its vector to the odd one and waits for the result. */
#include <string.h>

#include "coll.h"

enum { STEP_FOLD = 0xff0, STEP_UNFOLD = 0xff1 };

static int floor_pow2(int n) {
  int p = 1;
  while (p * 2 <= n) p *= 2;
  return p;
}

/* Folds the group into p = 2^k virtual ranks. *v gets my virtual rank, or -1 when I sat
 * out (then I wait for unfold). */
static int fold(gcomp_coll *c, const gcomp_group *g, uint8_t *buf, size_t bytes, unsigned phase,
                int p, int *v) {
  int r = g->n - p, me = g->me;
  *v = me >= 2 * r ? me - r : (me & 1) ? me / 2 : -1;
  if (me >= 2 * r) return GCOMP_OK;
  int peer = g->ranks[me ^ 1];
  if (me & 1)   /* odd: receive the even rank's vector and reduce it in */
    return gcomp_coll_exchange(c, peer, phase, STEP_FOLD, NULL, 0, NULL, bytes, buf, NULL);
  return gcomp_coll_exchange(c, peer, phase, STEP_FOLD, buf, bytes, NULL, 0, NULL, NULL);
}

static int unfold(gcomp_coll *c, const gcomp_group *g, uint8_t *buf, size_t bytes, unsigned phase,
                  int p) {
  int r = g->n - p, me = g->me;
  if (me >= 2 * r) return GCOMP_OK;
  int peer = g->ranks[me ^ 1];
  if (me & 1) return gcomp_coll_exchange(c, peer, phase, STEP_UNFOLD, buf, bytes, NULL, 0, NULL, NULL);
  return gcomp_coll_exchange(c, peer, phase, STEP_UNFOLD, NULL, 0, buf, bytes, NULL, NULL);
}

/* World rank of virtual rank v. */
static int vrank_to_rank(const gcomp_group *g, int p, int v) {
  int r = g->n - p;
  return g->ranks[v < r ? 2 * v + 1 : v + r];
}

int gcomp_rhd_allreduce(gcomp_coll *c, const gcomp_group *g, uint8_t *buf, size_t count,
                        unsigned phase) {
  int p = floor_pow2(g->n);
  /* reading the caller's buffer directly needs a sum and no folding */
  if (g->n == 1 || count == 0 || p != g->n || !c->reduce3) gcomp_coll_inplace(c, buf, count);
  if (g->n == 1 || count == 0) return GCOMP_OK;
  size_t es = c->esize;
  int v;
  GCOMP_CHECK(fold(c, g, buf, count * es, phase, p, &v));
  if (v >= 0) {
    /* halving: at step k (distance 2^k) keep the half selected by bit k of v */
    size_t lo = 0, hi = count;
    size_t los[32], his[32];
    int k = 0;
    for (int d = 1; d < p; d *= 2, k++) {
      int partner = vrank_to_rank(g, p, v ^ d);
      size_t mid = lo + (hi - lo) / 2;
      los[k] = lo, his[k] = hi;
      size_t keep_lo = (v & d) ? mid : lo, keep_hi = (v & d) ? hi : mid;
      size_t give_lo = (v & d) ? lo : mid, give_hi = (v & d) ? mid : hi;
      /* out of place, the first step reads the caller's buffer: its half goes out and
       * the kept half is summed straight into the result */
      const uint8_t *from = c->src ? c->src : buf;
      GCOMP_CHECK(gcomp_coll_exchange(c, partner, phase, (unsigned)k, from + give_lo * es,
                                      (give_hi - give_lo) * es, NULL, (keep_hi - keep_lo) * es,
                                      buf + keep_lo * es, c->src ? c->src + keep_lo * es : NULL));
      c->src = NULL;
      lo = keep_lo, hi = keep_hi;
    }
    /* doubling: undo the halving in reverse, exchanging owned ranges */
    for (int d = p / 2; d >= 1; d /= 2) {
      k--;
      int partner = vrank_to_rank(g, p, v ^ d);
      size_t plo = los[k], phi = his[k], mid = plo + (phi - plo) / 2;
      size_t other_lo = (v & d) ? plo : mid, other_hi = (v & d) ? mid : phi;
      GCOMP_CHECK(gcomp_coll_exchange(c, partner, phase, 0x100u + (unsigned)k, buf + lo * es,
                                      (hi - lo) * es, buf + other_lo * es,
                                      (other_hi - other_lo) * es, NULL, NULL));
      lo = plo, hi = phi;
    }
  }
  return unfold(c, g, buf, count * es, phase, p);
}

int gcomp_rd_allreduce(gcomp_coll *c, const gcomp_group *g, uint8_t *buf, size_t count,
                       unsigned phase) {
  int p = floor_pow2(g->n);
  if (g->n == 1 || count == 0 || p != g->n || !c->reduce3) gcomp_coll_inplace(c, buf, count);
  if (g->n == 1 || count == 0) return GCOMP_OK;
  size_t bytes = count * c->esize;
  int v;
  GCOMP_CHECK(fold(c, g, buf, bytes, phase, p, &v));
  if (v >= 0) {
    /* the partner's vector lands in scratch and is reduced in. Both sides reduce the same
     * pair, so both put the lower virtual rank's vector first: sums are commutative, but
     * which NaN payload an add returns, and min/max of +0 and -0, follow operand order */
    int k = 0;
    for (int d = 1; d < p; d *= 2, k++)
    {
      const uint8_t *from = c->src ? c->src : buf;
      c->recv_first = c->float_data && (v & d) != 0;
      int st = gcomp_coll_exchange(c, vrank_to_rank(g, p, v ^ d), phase, (unsigned)k, from,
                                   bytes, NULL, bytes, buf, c->src);
      c->recv_first = 0;
      GCOMP_CHECK(st);
      c->src = NULL;
    }
  }
  return unfold(c, g, buf, bytes, phase, p);
}
