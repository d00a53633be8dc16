/* Broadcast down a binomial tree rooted at the root: ceil(log2 n) rounds, each rank
 * receiving the whole message once from its parent and sending it to its children. The
 * message travels in segments (gcomp_coll_seg_elems), and each segment is forwarded as soon
 * as it lands, so a long message streams down the tree instead of waiting at each level.
 * For small messages; long ones go by scatter and allgather (bcast_scatter.c). */
#include <stdlib.h>

#include "abort.h"
#include "coll.h"

typedef struct {
  gcomp_coll *c;
  uint8_t *buf;
  size_t bytes, seg;   /* seg: bytes per segment */
  int nseg;
} tree;

static size_t seg_len(const tree *t, int j) {
  size_t off = (size_t)j * t->seg;
  return t->bytes - off < t->seg ? t->bytes - off : t->seg;
}

/* Sends segment j to every child (virtual ranks vr + mask for each mask below top) */
static int forward(tree *t, int vr, int top, int j, gcomp_treq **sreq, int *ns) {
  gcomp_coll *c = t->c;
  int n = c->t->size;
  for (int mask = top >> 1; mask > 0; mask >>= 1) {
    if (vr + mask >= n) continue;
    int child = (vr + mask + c->root) % n;
    size_t len = seg_len(t, j);
    c->stats->wire_bytes += len;
    GCOMP_CHECK(gcomp_isend(c->t, child, gcomp_coll_stag(c, 0, 0, (unsigned)j, len),
                            t->buf + (size_t)j * t->seg, len, &sreq[(*ns)++]));
  }
  return GCOMP_OK;
}

static int tree_run(gcomp_coll *c, uint8_t *buf, size_t count) {
  int n = c->t->size, vr = (c->t->rank - c->root + n) % n;
  if (n == 1 || count == 0) return GCOMP_OK;
  size_t esz = c->esize;
  tree t = {c, buf, count * esz, gcomp_coll_seg_elems(c, count) * esz, 0};
  t.nseg = (int)((t.bytes + t.seg - 1) / t.seg);
  /* my parent: vr with its lowest set bit cleared; my children below that bit */
  int top = 1;
  while (top < n && !(vr & top)) top <<= 1;
  int children = 0;
  for (int mask = top >> 1; mask > 0; mask >>= 1) children += vr + mask < n;
  gcomp_treq **rreq = calloc((size_t)t.nseg * (size_t)(children + 1), sizeof *rreq);
  GCOMP_FAIL_IF(!rreq, GCOMP_ERR_NOMEM, "broadcast: %d segments", t.nseg);
  gcomp_treq **sreq = rreq + t.nseg;
  int ns = 0, st = GCOMP_OK;
  if (vr == 0) {   /* the root: top is past n, every power of two below it a child */
    for (int j = 0; st == GCOMP_OK && j < t.nseg; j++) st = forward(&t, vr, top, j, sreq, &ns);
  } else {
    int parent = (vr - top + c->root) % n;
    for (int j = 0; st == GCOMP_OK && j < t.nseg; j++)
      st = gcomp_irecv(c->t, parent, gcomp_coll_stag(c, 0, 0, (unsigned)j, seg_len(&t, j)),
                       buf + (size_t)j * t.seg, seg_len(&t, j), &rreq[j]);
    for (int j = 0; st == GCOMP_OK && j < t.nseg; j++) {
      size_t got = 0;
      uint64_t t0 = gcomp_now_ns();
      st = gcomp_abort_wait(c->abort, c->t, rreq[j], &got);
      rreq[j] = NULL;
      c->stats->wait_s += (double)(gcomp_now_ns() - t0) * 1e-9;
      if (st == GCOMP_OK && got != seg_len(&t, j))
        st = gcomp_error_set(GCOMP_ERR_INVALID, __FILE__, __LINE__,
                             "broadcast: rank %d sent %zu bytes where %zu were expected", parent,
                             got, seg_len(&t, j));
      if (st == GCOMP_OK) st = forward(&t, vr, top, j, sreq, &ns);
    }
  }
  if (st == GCOMP_OK) st = gcomp_coll_waitall(c, ns, sreq);
  for (int i = 0; st < 0 && i < t.nseg + ns; i++)
    if (rreq[i]) gcomp_cancel(c->t, rreq[i]);
  free(rreq);
  if (st < 0) return gcomp_error_trace(st, __FILE__, __LINE__);
  return GCOMP_OK;
}

static double tree_cost(const gcomp_plan_in *in) {
  int rounds = 0;
  while ((1 << rounds) < in->n) rounds++;
  gcomp_link l = gcomp_cost_flat_link(in);
  return rounds * (l.alpha_s + (double)in->bytes * l.beta_spb);
}

const gcomp_algo gcomp_algo_bcast_tree = {
    "broadcast:tree", "binomial tree: log2(n) rounds of the whole message, segments forwarded as they land",
    tree_run, tree_cost, 0, GCOMP_COLL_BROADCAST};
