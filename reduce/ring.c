/* Ring allreduce: a pipelined reduce-scatter then a pipelined allgather around the group.
 * Bandwidth-optimal (2(n-1)/n of the message per rank), 2(n-1) steps of latency.
 *
 * Each chunk travels in segments; the send of a segment at step s+1 is posted as soon as
 * that segment was reduced at step s, so reduction, receive and send overlap across steps
 * and not only within one. Receives land in two scratch slots, alternating by step. */
#include <stdlib.h>
#include <string.h>

#include "abort.h"
#include "coll.h"

static int mod(int a, int n) { return ((a % n) + n) % n; }

typedef struct {
  gcomp_coll *c;
  const gcomp_group *g;
  uint8_t *buf;
  size_t count, seg;     /* seg: elements per segment */
  int n, steps, nseg;
  gcomp_treq **sreq, **rreq;   /* [steps * nseg] */
  size_t *rbytes;        /* [steps * nseg] what each receive must bring, in bytes */
  int left;
  unsigned phase;
  /* posted requests in post order (indices into sreq[0 .. 2 * slots)). Completions come
   * nearly in post order, so each pass tests from the oldest and stops at the first still
   * pending: one progress call per queue and pass, not one per request. */
  int *rq, *sq;
  int rq_head, rq_tail, sq_head, sq_tail;
} ring_state;

static void seg_range(const ring_state *r, int chunk, int j, size_t *off, size_t *len) {
  size_t coff, clen;
  gcomp_chunk(r->count, r->n, chunk, &coff, &clen);
  size_t start = (size_t)j * r->seg;
  *off = coff + (start < clen ? start : clen);
  *len = start < clen ? (clen - start < r->seg ? clen - start : r->seg) : 0;
}

static int post_send(ring_state *r, unsigned phase, int s, int chunk, int j) {
  size_t off, len;
  seg_range(r, chunk, j, &off, &len);
  int right = r->g->ranks[mod(r->g->me + 1, r->n)];
  r->c->stats->wire_bytes += len * r->c->esize;
  r->sq[r->sq_tail++] = s * r->nseg + j;
  /* out of place, the first step sends the caller's own values straight from its buffer */
  const uint8_t *from = s == 0 && r->c->src ? r->c->src : r->buf;
  return gcomp_isend(r->c->t, right,
                     gcomp_coll_stag(r->c, phase, (unsigned)s, (unsigned)j, len * r->c->esize),
                     from + off * r->c->esize, len * r->c->esize, &r->sreq[s * r->nseg + j]);
}

static int post_recv(ring_state *r, unsigned phase, int s, int chunk, int j, uint8_t *base) {
  size_t off, len;
  seg_range(r, chunk, j, &off, &len);
  int left = r->g->ranks[mod(r->g->me - 1, r->n)];
  /* base NULL: land in place; else in the step's scratch slot at the segment's offset */
  uint8_t *at = base ? base + (size_t)j * r->seg * r->c->esize : r->buf + off * r->c->esize;
  r->rq[r->rq_tail++] = (int)((size_t)r->steps * (size_t)r->nseg) + s * r->nseg + j;
  r->rbytes[s * r->nseg + j] = len * r->c->esize;
  return gcomp_irecv(r->c->t, left,
                     gcomp_coll_stag(r->c, phase, (unsigned)s, (unsigned)j, len * r->c->esize), at,
                     len * r->c->esize, &r->rreq[s * r->nseg + j]);
}

static int setup(ring_state *r, gcomp_coll *c, const gcomp_group *g, uint8_t *buf, size_t count) {
  memset(r, 0, sizeof *r);
  r->c = c, r->g = g, r->buf = buf, r->count = count, r->n = g->n, r->steps = g->n - 1;
  size_t maxchunk = (count + (size_t)g->n - 1) / (size_t)g->n;
  r->seg = gcomp_coll_seg_elems(c, maxchunk);
  if (r->seg > maxchunk) r->seg = maxchunk ? maxchunk : 1;
  /* a segment's number is 16 bits of the tag: a chunk of more segments takes longer ones */
  if ((maxchunk + r->seg - 1) / r->seg > 0xffff) r->seg = (maxchunk + 0xfffe) / 0xffff;
  r->nseg = (int)((maxchunk + r->seg - 1) / r->seg);
  if (r->nseg < 1) r->nseg = 1;
  /* the planner never picks a ring past GCOMP_RING_MAX_RANKS (plan.c, hier.c) */
  GCOMP_FAIL_IF(r->steps > GCOMP_RING_MAX_RANKS - 1, GCOMP_ERR_UNSUPPORTED,
                "ring: %d ranks exceed the ring's %d (its steps are 12 bits of the tag)", r->n,
                GCOMP_RING_MAX_RANKS);
  size_t slots = (size_t)r->steps * (size_t)r->nseg;
  /* requests and expected lengths share one block (both 8-byte items) */
  r->sreq = calloc(2 * slots * sizeof *r->sreq + slots * sizeof *r->rbytes, 1);
  r->sq = calloc(2 * slots, sizeof *r->sq);
  if (!r->sreq || !r->sq) {
    free(r->sreq), free(r->sq);
    r->sreq = NULL, r->sq = NULL;
    GCOMP_FAIL(GCOMP_ERR_NOMEM, "ring: request table of %zu", 2 * slots);
  }
  r->rbytes = (size_t *)(void *)(r->sreq + 2 * slots);
  r->rreq = r->sreq + slots;
  r->rq = r->sq + slots;
  r->left = (int)(2 * slots);
  return GCOMP_OK;
}

static void teardown(ring_state *r) {
  size_t slots = (size_t)r->steps * (size_t)r->nseg;
  for (size_t i = 0; r->sreq && i < 2 * slots; i++)
    if (r->sreq[i]) gcomp_cancel(r->c->t, r->sreq[i]);
  free(r->sreq);   /* and rbytes with it */
  free(r->sq);
}

/* Drives every posted request once; on_recv runs for each completed receive. */
typedef int (*on_recv_fn)(ring_state *r, int s, int j);

/* Tests the queue from its oldest entry until one is still pending; returns how many
 * completed, or an error. Receives run on_recv, which may post more. */
static int drain(ring_state *r, int *q, int *head, const int *tail, on_recv_fn on_recv) {
  size_t slots = (size_t)r->steps * (size_t)r->nseg;
  int completed = 0;
  while (*head < *tail) {
    int i = q[*head];
    int done = 0;
    size_t got = 0;
    int st = gcomp_test(r->c->t, r->sreq[i], &done, &got);
    if (st < 0) {
      r->sreq[i] = NULL;
      return gcomp_error_trace(st, __FILE__, __LINE__);
    }
    if (!done) break;
    r->sreq[i] = NULL;
    /* a receive brings exactly its segment, or the ranks disagree on the call */
    GCOMP_FAIL_IF((size_t)i >= slots && got != r->rbytes[(size_t)i - slots], GCOMP_ERR_INVALID,
                  "ring: rank %d sent %zu bytes where this rank expected %zu: do all ranks pass "
                  "the same count and dtype?", r->g->ranks[mod(r->g->me - 1, r->n)], got,
                  r->rbytes[(size_t)i - slots]);
    (*head)++;
    r->left--;
    completed++;
    if ((size_t)i >= slots) {
      int s = (int)(((size_t)i - slots) / (size_t)r->nseg), j = (int)(((size_t)i - slots) % (size_t)r->nseg);
      GCOMP_CHECK(on_recv(r, s, j));
    }
  }
  return completed;
}

static int drive(ring_state *r, on_recv_fn on_recv) {
  unsigned spins = 0;
  uint64_t idle_from = 0;
  while (r->left > 0) {
    int got_r = drain(r, r->rq, &r->rq_head, &r->rq_tail, on_recv);
    if (got_r < 0) return got_r;
    int got_s = drain(r, r->sq, &r->sq_head, &r->sq_tail, on_recv);
    if (got_s < 0) return got_s;
    if (got_r + got_s) {
      spins = 0;
      if (idle_from) r->c->stats->wait_s += (double)(gcomp_now_ns() - idle_from) * 1e-9;
      idle_from = 0;
    } else {
      if (!idle_from) idle_from = gcomp_now_ns();
      gcomp_idle(&spins);
      int st = r->c->abort ? gcomp_abort_poll(r->c->abort) : GCOMP_OK;   /* abort.h */
      if (st < 0) return st;
    }
  }
  if (idle_from) r->c->stats->wait_s += (double)(gcomp_now_ns() - idle_from) * 1e-9;
  return GCOMP_OK;
}

/* ---- reduce-scatter: rank me ends owning chunk me ----------------------------------- */
/* step s sends chunk me-s-1 and receives chunk me-s-2, which it reduces and forwards */
static int rs_send_chunk(const ring_state *r, int s) { return mod(r->g->me - s - 1, r->n); }
static uint8_t *rs_slot(const ring_state *r, int s) {
  size_t maxchunk = (size_t)r->nseg * r->seg;
  return gcomp_coll_tmp(r->c) + (size_t)(s & 1) * maxchunk * r->c->esize;
}

static int rs_on_recv(ring_state *r, int s, int j) {
  size_t off, len;
  int chunk = rs_send_chunk(r, s + 1);
  seg_range(r, chunk, j, &off, &len);
  uint64_t t0 = gcomp_now_ns();
  size_t es = r->c->esize;
  const uint8_t *in = rs_slot(r, s) + (size_t)j * r->seg * es;
  if (r->c->src)   /* every chunk is reduced once per rank: its own part comes from src */
    r->c->reduce3(r->buf + off * es, r->c->src + off * es, in, len);
  else
    r->c->reduce(r->buf + off * es, in, len);
  r->c->stats->reduce_s += (double)(gcomp_now_ns() - t0) * 1e-9;
  unsigned phase = r->phase;
  if (s + 1 < r->steps) GCOMP_CHECK(post_send(r, phase, s + 1, chunk, j));
  if (s + 2 < r->steps) GCOMP_CHECK(post_recv(r, phase, s + 2, rs_send_chunk(r, s + 3), j, rs_slot(r, s)));
  return GCOMP_OK;
}

static int ag_post(ring_state *r, gcomp_coll *c, const gcomp_group *g, uint8_t *buf,
                   size_t count, unsigned phase);

/* With ag != NULL the allgather's receives (phase ag_phase) are posted once the
 * reduce-scatter's own are, and *ag_live says whether they were (ag_finish or teardown) */
static int reduce_scatter(gcomp_coll *c, const gcomp_group *g, uint8_t *buf, size_t count,
                          unsigned phase, ring_state *ag, unsigned ag_phase, int *ag_live) {
  if (g->n == 1 || count == 0 || !c->reduce3) gcomp_coll_inplace(c, buf, count);
  if (g->n == 1 || count == 0) return GCOMP_OK;
  ring_state r;
  /* receives of two steps are posted at once: the left neighbour may send a step ahead.
   * Posted in the order the left neighbour sends (all of step 0, then step 1): scheduled
   * messages announce their receives in posting order (fabric/transport.h) */
  GCOMP_CHECK(setup(&r, c, g, buf, count));
  int st = gcomp_coll_reserve(c, 2 * (size_t)r.nseg * r.seg * c->esize);
  r.phase = phase;
  for (int j = 0; st == GCOMP_OK && j < r.nseg; j++) {
    st = post_recv(&r, phase, 0, rs_send_chunk(&r, 1), j, rs_slot(&r, 0));
    if (st == GCOMP_OK) st = post_send(&r, phase, 0, rs_send_chunk(&r, 0), j);
  }
  for (int j = 0; st == GCOMP_OK && r.steps > 1 && j < r.nseg; j++)
    st = post_recv(&r, phase, 1, rs_send_chunk(&r, 2), j, rs_slot(&r, 1));
  if (st == GCOMP_OK && ag) {
    st = ag_post(ag, c, g, buf, count, ag_phase);
    *ag_live = st == GCOMP_OK;
  }
  if (st == GCOMP_OK) st = drive(&r, rs_on_recv);
  teardown(&r);
  c->src = NULL;   /* my chunk is in buf now; the rest comes by allgather */
  if (st < 0) return gcomp_error_trace(st, __FILE__, __LINE__);
  return GCOMP_OK;
}

int gcomp_ring_reduce_scatter(gcomp_coll *c, const gcomp_group *g, uint8_t *buf, size_t count,
                              unsigned phase) {
  return reduce_scatter(c, g, buf, count, phase, NULL, 0, NULL);
}

/* ---- allgather: rank me starts owning chunk me ---------------------------------------- */
/* step s sends chunk me-s and receives chunk me-s-1 in place, then forwards it.
 *
 * Receives are posted AG_AHEAD steps ahead of the oldest one pending, not all n-1 at
 * once: a matcher that scans a rank's posted receives for each arriving message (SimGrid's
 * SMPI, software tag matching) made a call cost O(n^2) that way, and a 256-rank simulation
 * never ended. The left neighbour's later sends wait for these (scheduled messages) or
 * queue as unexpected; over libfabric at most OFI_SCHED_ACTIVE (8) receives per peer are
 * announced at a time anyway, and up to 9 ranks every step is posted at the start as
 * before. 8 steps also keep a hop of the simulator's default links (10 us, 16 KiB chunks)
 * busy. Completions are handled in posting order (drain), so receive (s + AG_AHEAD, j) is
 * posted in step-then-segment order: the order the left neighbour sends. */
#define AG_AHEAD 8

static int ag_post_recv(ring_state *r, int s, int j) {
  return post_recv(r, r->phase, s, mod(r->g->me - s - 1, r->n), j, NULL);
}

static int ag_on_recv(ring_state *r, int s, int j) {
  if (s + 1 < r->steps) GCOMP_CHECK(post_send(r, r->phase, s + 1, mod(r->g->me - s - 1, r->n), j));
  if (s + AG_AHEAD < r->steps) GCOMP_CHECK(ag_post_recv(r, s + AG_AHEAD, j));
  return GCOMP_OK;
}

/* The allgather's receives of its first AG_AHEAD steps (in place: each lands in a chunk
 * this rank no longer reads by the time its data can come) */
static int ag_post(ring_state *r, gcomp_coll *c, const gcomp_group *g, uint8_t *buf,
                   size_t count, unsigned phase) {
  GCOMP_CHECK(setup(r, c, g, buf, count));
  int st = GCOMP_OK;
  r->phase = phase;
  for (int s = 0; st == GCOMP_OK && s < r->steps && s < AG_AHEAD; s++)
    for (int j = 0; st == GCOMP_OK && j < r->nseg; j++) st = ag_post_recv(r, s, j);
  if (st < 0) teardown(r);
  return st;
}

/* Sends the own chunk and forwards the others as they land; frees r */
static int ag_finish(ring_state *r) {
  int st = GCOMP_OK;
  for (int j = 0; st == GCOMP_OK && j < r->nseg; j++)
    st = post_send(r, r->phase, 0, r->g->me, j);
  if (st == GCOMP_OK) st = drive(r, ag_on_recv);
  teardown(r);
  if (st < 0) return gcomp_error_trace(st, __FILE__, __LINE__);
  return GCOMP_OK;
}

int gcomp_ring_allgather(gcomp_coll *c, const gcomp_group *g, uint8_t *buf, size_t count,
                         unsigned phase) {
  if (g->n == 1 || count == 0) return GCOMP_OK;
  ring_state r;
  GCOMP_CHECK(ag_post(&r, c, g, buf, count, phase));
  return ag_finish(&r);
}

/* ---- the order around the ring ---------------------------------------------------------- */
/* Times the ring crosses from one node to another going once around g. */
static int node_crossings(const gcomp_transport *t, const gcomp_group *g) {
  int k = 0;
  for (int i = 0; i < g->n; i++)
    k += t->node_of[g->ranks[i]] != t->node_of[g->ranks[(i + 1) % g->n]];
  return k;
}

/* g's ranks regrouped by node (nodes in order of their index, each node's ranks in g's
 * order), so that the ring crosses each node boundary once, as over a block placement:
 * over a round-robin one (--map-by node) every hop of g's own order crosses, and the ring
 * moves at the inter-node link's pace on every step instead of on one per node (NCCL builds
 * its rings from the topology for the same reason). *order is NULL when g's order already
 * crosses no more than that; else the caller frees it. Every rank computes the same order
 * from the same node table, so the result stays the same on every rank. */
static int order_by_node(const gcomp_transport *t, const gcomp_group *g, gcomp_group *out,
                         int **order) {
  *out = *g;
  *order = NULL;
  int *seen = calloc((size_t)t->nnodes, sizeof *seen);
  GCOMP_FAIL_IF(!seen, GCOMP_ERR_NOMEM, "ring: node table");
  int nodes = 0;
  for (int i = 0; i < g->n; i++) nodes += !seen[t->node_of[g->ranks[i]]]++;
  int k = node_crossings(t, g);
  if (nodes < 2 || k <= nodes) {
    free(seen);
    return GCOMP_OK;
  }
  int *ranks = malloc((size_t)g->n * sizeof *ranks);
  if (!ranks) free(seen);
  GCOMP_FAIL_IF(!ranks, GCOMP_ERR_NOMEM, "ring: order of %d ranks", g->n);
  for (int v = 0, at = 0; v < t->nnodes; v++) {   /* seen[v] becomes node v's first slot */
    int cnt = seen[v];
    seen[v] = at;
    at += cnt;
  }
  for (int i = 0; i < g->n; i++) {
    int slot = seen[t->node_of[g->ranks[i]]]++;
    ranks[slot] = g->ranks[i];
    if (i == g->me) out->me = slot;
  }
  free(seen);
  out->ranks = ranks;
  *order = ranks;
  GCOMP_TRACE(GCOMP_SUB_REDUCE, "ring: %d ranks cross nodes %d times in rank order; by node %d",
              g->n, k, nodes);
  return GCOMP_OK;
}

int gcomp_ring_allreduce(gcomp_coll *c, const gcomp_group *g, uint8_t *buf, size_t count,
                         unsigned phase) {
  gcomp_group ring;
  int *order;
  GCOMP_CHECK(order_by_node(c->t, g, &ring, &order));
  /* Up to 3 ranks the reduce-scatter posts all its receives at its start: the allgather's
   * are posted right after them, so that (scheduled messages, fabric/transport.h) their
   * buffers are announced to the senders before these need them; from one peer they are
   * still posted in the order it sends. With more steps the reduce-scatter posts later
   * receives as it goes, which must not queue behind the allgather's. */
  ring_state ag;
  int early = ring.n > 1 && ring.n <= 3 && count > 0, ag_live = 0;
  int st = reduce_scatter(c, &ring, buf, count, phase, early ? &ag : NULL, phase + 1, &ag_live);
  if (ag_live && st == GCOMP_OK)
    st = ag_finish(&ag);
  else if (ag_live)
    teardown(&ag);
  else if (st == GCOMP_OK)
    st = gcomp_ring_allgather(c, &ring, buf, count, phase + 1);
  free(order);
  GCOMP_CHECK(st);
  return GCOMP_OK;
}
