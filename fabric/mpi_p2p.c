/* The transport over a caller's MPI point-to-point messages (gcomp_p2p_ops, include/gcomp.h).
 *
 * Why function pointers and not mpi.h: the library is one build for every MPI and for none;
 * fabric/ must not need an MPI to compile. The caller's program, compiled against its MPI
 * (Open MPI, MPICH, or SimGrid's SMPI through smpicc), lends MPI_Isend, MPI_Irecv,
 * MPI_Test, MPI_Waitany, MPI_Cancel and MPI_Wtime through the header-only adapter
 * include/gcomp_mpi.h, which is the only new code that includes mpi.h. The same libgcomp.so
 * then runs under smpirun unchanged: SMPI privatises the program's globals, and the
 * library's own globals (settings read once, CPU dispatch, the log) are the same for every
 * simulated rank.
 *
 * Tags: gcomp's tags have 57 bits, MPI's at least 23 (MPI_TAG_UB >= 2^23 - 1; 2^31 - 1 for
 * Open MPI and SMPI). A tag folds to an MPI tag that keeps what tells apart the messages one
 * pair can have in flight at once: the algorithm's phase and step whole (bits 16-31 of the
 * step field), the low bits of the segment and of the call sequence; sequences from
 * GCOMP_SEQ_RESERVED up (creation, calibration, abort notices: reserved_seq.h) get a range
 * of their own, so a long-lived notice receive never takes a call's message. Two tags that
 * fold alike between one pair match in posting order (MPI's rule): reduce/'s schedules post
 * both ends in one order, so a fold collision would reorder nothing. The SCHED mark is
 * ignored, as on the loopback.
 *
 * Waiting: with ops->simulated every MPI_Test that finds nothing costs simulated time
 * (SMPI injects smpi/test, 100 us by default), so a test of a request that was already
 * found pending with nothing completed since blocks in MPI_Waitany over the requests the
 * caller tested in between: those are what its loop waits for. Elsewhere test polls, and
 * a request pending GCOMP_TIMEOUT_MS after it was posted fails with GCOMP_ERR_TIMEOUT. */
#include <stdlib.h>
#include <string.h>

#include "gcomp_common.h"
#include "transport.h"

struct gcomp_treq {
  int slot;              /* index of its MPI handle in the transport's array; -1 once done */
  int peer, is_recv;
  double posted;         /* wtime at post */
  unsigned long seen;    /* the transport's completion count when last found pending */
  int done;              /* completed by another request's waitany: status and len below */
  int status;
  size_t len;
};

typedef struct {
  gcomp_transport pub;
  gcomp_p2p_ops ops;
  void *ctx;
  int *topo;             /* gcomp_topology_fill's tables */
  int seq_bits, fold_bits, res_fold_bits;
  unsigned char *handles;   /* [cap] MPI request handles, ops.req_bytes each */
  gcomp_treq **owner;       /* [cap] the request of each slot, NULL when free */
  int cap, hint;
  unsigned long completions, watch_epoch;
  int *watch, nwatch;       /* slots found pending since the last completion */
  unsigned char *scratch;   /* waitany's contiguous copy of the watched handles */
} p2p_transport;

static void *handle(p2p_transport *p, int slot) {
  return p->handles + (size_t)slot * p->ops.req_bytes;
}

/* ---- tags --------------------------------------------------------------------------- */
/* The step field keeps its high 16 bits (phase, step) and the low bits - 16 of the segment */
static uint32_t fold_step(uint32_t step, int bits) {
  return (step >> 16) << (bits - 16) | (step & ((1u << (bits - 16)) - 1));
}

static int mpi_tag(const p2p_transport *p, uint64_t tag) {
  uint32_t seq = (uint32_t)(tag >> GCOMP_TAG_STEP_BITS) & ((1u << GCOMP_TAG_SEQ_BITS) - 1);
  uint32_t step = (uint32_t)tag;
  int top = p->fold_bits + p->seq_bits;
  if (seq >= GCOMP_SEQ_RESERVED)
    return (int)(1u << top | (seq - GCOMP_SEQ_RESERVED) << p->res_fold_bits |
                 fold_step(step, p->res_fold_bits));
  /* hier's pieces run 2^20 sequences apart (reduce/hier.c): mix those bits in */
  uint32_t s = (seq + (seq >> 20) * 5u) & ((1u << p->seq_bits) - 1);
  return (int)(s << p->fold_bits | fold_step(step, p->fold_bits));
}

_Static_assert(GCOMP_SEQ_RESERVED_SPAN == 16, "tag_layout gives the reserved sequences 4 bits");

static int tag_layout(p2p_transport *p, int tag_ub) {
  int bits = 0;
  while (bits < 31 && ((int64_t)1 << (bits + 1)) - 1 <= tag_ub) bits++;
  GCOMP_FAIL_IF(bits < 23, GCOMP_ERR_INVALID,
                "MPI transport: MPI_TAG_UB %d is below 2^23 - 1 (the MPI standard's floor)", tag_ub);
  int normal = bits - 1;   /* the top bit splits normal and reserved sequences */
  p->seq_bits = (normal - 16) / 2;
  p->fold_bits = normal - p->seq_bits;
  p->res_fold_bits = normal - 4;
  return GCOMP_OK;
}

/* ---- request slots ------------------------------------------------------------------ */
static int slot_take(p2p_transport *p, gcomp_treq *r) {
  for (int k = 0; k < p->cap; k++) {
    int s = (p->hint + k) % p->cap;
    if (!p->owner[s]) {
      p->hint = s + 1;
      p->owner[s] = r;
      return s;
    }
  }
  int cap = p->cap ? 2 * p->cap : 64;
  unsigned char *h = realloc(p->handles, (size_t)cap * p->ops.req_bytes);
  GCOMP_FAIL_IF(!h, GCOMP_ERR_NOMEM, "MPI transport: %d request handles", cap);
  p->handles = h;
  gcomp_treq **o = realloc(p->owner, (size_t)cap * sizeof *o);
  GCOMP_FAIL_IF(!o, GCOMP_ERR_NOMEM, "MPI transport: %d requests", cap);
  p->owner = o;
  int *w = realloc(p->watch, (size_t)cap * sizeof *w);
  GCOMP_FAIL_IF(!w, GCOMP_ERR_NOMEM, "MPI transport: %d watched requests", cap);
  p->watch = w;
  unsigned char *sc = realloc(p->scratch, (size_t)cap * p->ops.req_bytes);
  GCOMP_FAIL_IF(!sc, GCOMP_ERR_NOMEM, "MPI transport: %d request handles", cap);
  p->scratch = sc;
  for (int s = p->cap; s < cap; s++) {
    p->owner[s] = NULL;
    p->ops.null_req(handle(p, s));
  }
  int s = p->cap;
  p->cap = cap;
  p->owner[s] = r;
  p->hint = s + 1;
  return s;
}

static void slot_free(p2p_transport *p, gcomp_treq *r) {
  if (r->slot < 0) return;
  for (int i = 0; i < p->nwatch; i++)   /* a cancelled request is watched no more */
    if (p->watch[i] == r->slot) p->watch[i--] = p->watch[--p->nwatch];
  p->owner[r->slot] = NULL;
  p->ops.null_req(handle(p, r->slot));
  r->slot = -1;
}

static int post(p2p_transport *p, int peer, int is_recv, gcomp_treq **out, gcomp_treq **r) {
  GCOMP_FAIL_IF(!out, GCOMP_ERR_INVALID, "MPI transport: NULL request pointer");
  *out = NULL;
  GCOMP_FAIL_IF(peer < 0 || peer >= p->pub.size || peer == p->pub.rank, GCOMP_ERR_INVALID,
                "MPI transport: rank %d cannot %s rank %d (of %d)", p->pub.rank,
                is_recv ? "receive from" : "send to", peer, p->pub.size);
  *r = calloc(1, sizeof **r);
  GCOMP_FAIL_IF(!*r, GCOMP_ERR_NOMEM, "MPI transport: a request");
  (*r)->peer = peer;
  (*r)->is_recv = is_recv;
  /* simulated: no timeout is enforced, and SMPI's MPI_Wtime is not free: it stops and
   * restarts the rank's CPU timer (two clock syscalls) and injects a sleep (smpi/wtime, 10 ns)
   * that the simulator schedules as an activity of its own, per message on both ends */
  (*r)->posted = p->ops.simulated ? 0 : p->ops.wtime(p->ctx);
  (*r)->seen = p->completions - 1;   /* not yet seen pending */
  int s = slot_take(p, *r);
  if (s < 0) {
    free(*r);
    return s;
  }
  (*r)->slot = s;
  return GCOMP_OK;
}

static int posted(p2p_transport *p, gcomp_treq *r, int rc, gcomp_treq **out) {
  if (rc < 0) {
    int peer = r->peer, is_recv = r->is_recv;
    slot_free(p, r);
    free(r);
    GCOMP_FAIL(rc, "MPI transport: rank %d: posting a %s %s rank %d failed", p->pub.rank,
               is_recv ? "receive" : "send", is_recv ? "from" : "to", peer);
  }
  *out = r;
  return GCOMP_OK;
}

static int p2p_isend(gcomp_transport *t, int peer, uint64_t tag, const void *buf, size_t len,
                     gcomp_treq **out) {
  p2p_transport *p = (p2p_transport *)t;
  gcomp_treq *r = NULL;
  GCOMP_CHECK(post(p, peer, 0, out, &r));
  int rc = p->ops.isend(p->ctx, peer, mpi_tag(p, tag), buf, len, handle(p, r->slot));
  return posted(p, r, rc, out);
}

static int p2p_irecv(gcomp_transport *t, int peer, uint64_t tag, void *buf, size_t capacity,
                     gcomp_treq **out) {
  p2p_transport *p = (p2p_transport *)t;
  gcomp_treq *r = NULL;
  GCOMP_CHECK(post(p, peer, 1, out, &r));
  int rc = p->ops.irecv(p->ctx, peer, mpi_tag(p, tag), buf, capacity, handle(p, r->slot));
  return posted(p, r, rc, out);
}

/* Ends r (freed) with status st and length len, as test reports it */
static int finish(p2p_transport *p, gcomp_treq *r, int st, size_t rlen, int *done, size_t *len) {
  int peer = r->peer, is_recv = r->is_recv;
  slot_free(p, r);
  free(r);
  *done = 1;
  if (len) *len = rlen;
  if (st == GCOMP_ERR_INVALID)
    GCOMP_FAIL(st, "MPI transport: rank %d: the message from rank %d is longer than the receive",
               p->pub.rank, peer);
  if (st < 0) p->pub.failed_peer = peer;
  if (st < 0)
    GCOMP_FAIL(st, "MPI transport: rank %d: a %s %s rank %d failed", p->pub.rank,
               is_recv ? "receive" : "send", is_recv ? "from" : "to", peer);
  return GCOMP_OK;
}

/* Blocks until one watched request completes; records it in its request */
static int block(p2p_transport *p) {
  size_t rb = p->ops.req_bytes;
  for (int i = 0; i < p->nwatch; i++) memcpy(p->scratch + (size_t)i * rb, handle(p, p->watch[i]), rb);
  int index = -1;
  size_t len = 0;
  int st = p->ops.waitany(p->ctx, p->nwatch, p->scratch, &index, &len);
  for (int i = 0; i < p->nwatch; i++) memcpy(handle(p, p->watch[i]), p->scratch + (size_t)i * rb, rb);
  if (index >= 0 && index < p->nwatch) {
    gcomp_treq *r = p->owner[p->watch[index]];
    r->done = 1;
    r->status = st;
    r->len = len;
    p->ops.null_req(handle(p, r->slot));
  } else if (st < 0) {
    GCOMP_FAIL(st, "MPI transport: rank %d: waiting for %d requests failed", p->pub.rank,
               p->nwatch);
  }
  p->completions++;
  p->nwatch = 0;
  return GCOMP_OK;
}

/* Simulated: a first sight of a pending request only notes it (an MPI_Test that finds
 * nothing would cost simulated time); finding it again with nothing completed in between
 * means the caller's loop went round idle, so block until one of the noted requests ends. */
static int test_simulated(p2p_transport *p, gcomp_treq *r) {
  if (p->watch_epoch != p->completions) {
    p->nwatch = 0;
    p->watch_epoch = p->completions;
  }
  if (r->seen != p->completions) {
    r->seen = p->completions;
    p->watch[p->nwatch++] = r->slot;
    return GCOMP_OK;
  }
  return block(p);
}

static int p2p_test(gcomp_transport *t, gcomp_treq *r, int *done, size_t *len) {
  p2p_transport *p = (p2p_transport *)t;
  GCOMP_FAIL_IF(!r || !done, GCOMP_ERR_INVALID, "MPI transport: test of a NULL request");
  *done = 0;
  if (!r->done && p->ops.simulated) {
    GCOMP_CHECK(test_simulated(p, r));
    if (!r->done) return GCOMP_OK;
  }
  if (r->done) return finish(p, r, r->status, r->len, done, len);
  int fin = 0;
  size_t n = 0;
  int st = p->ops.test(p->ctx, handle(p, r->slot), &fin, &n);
  if (st < 0 || fin) {
    p->completions++;
    return finish(p, r, st, n, done, len);
  }
  double waited = p->ops.wtime(p->ctx) - r->posted;
  if (waited * 1e3 < (double)p->pub.timeout_ms) return GCOMP_OK;
  int peer = r->peer, is_recv = r->is_recv;
  p->ops.cancel(p->ctx, handle(p, r->slot));
  slot_free(p, r);
  free(r);
  p->pub.failed = 1;
  p->pub.failed_peer = peer;
  GCOMP_FAIL(GCOMP_ERR_TIMEOUT, "MPI transport: rank %d: a %s %s rank %d pending for %d ms",
             p->pub.rank, is_recv ? "receive" : "send", is_recv ? "from" : "to", peer,
             p->pub.timeout_ms);
}

static int p2p_progress(gcomp_transport *t) {
  (void)t;   /* MPI progresses inside its test and wait calls */
  return GCOMP_OK;
}

static int p2p_cancel(gcomp_transport *t, gcomp_treq *r) {
  p2p_transport *p = (p2p_transport *)t;
  if (!r) return GCOMP_OK;
  if (!r->done && r->slot >= 0) p->ops.cancel(p->ctx, handle(p, r->slot));
  slot_free(p, r);
  free(r);
  return GCOMP_OK;
}

static void p2p_destroy(gcomp_transport *t) {
  p2p_transport *p = (p2p_transport *)t;
  for (int s = 0; s < p->cap; s++)
    if (p->owner[s]) {
      gcomp_treq *r = p->owner[s];
      if (!r->done) p->ops.cancel(p->ctx, handle(p, s));
      p->owner[s] = NULL;
      free(r);
    }
  if (p->ops.close) p->ops.close(p->ctx);
  free(p->handles);
  free(p->owner);
  free(p->watch);
  free(p->scratch);
  free(p->topo);
  free(p);
}

static const gcomp_transport_ops p2p_ops = {
    .name = "mpi",
    .isend = p2p_isend,
    .irecv = p2p_irecv,
    .test = p2p_test,
    .progress = p2p_progress,
    .cancel = p2p_cancel,
    .destroy = p2p_destroy,
};

/* ---- creation ------------------------------------------------------------------------- */
#define NODE_KEY_BYTES 256

static int node_keys(p2p_transport *p, const char *node_id, char **keys_out) {
  int n = p->pub.size;
  char mine[NODE_KEY_BYTES] = {0};
  GCOMP_FAIL_IF(strlen(node_id) >= sizeof mine, GCOMP_ERR_INVALID,
                "MPI transport: node id of %zu bytes (at most %d)", strlen(node_id),
                NODE_KEY_BYTES - 1);
  memcpy(mine, node_id, strlen(node_id));
  char *all = calloc((size_t)n, NODE_KEY_BYTES);
  GCOMP_FAIL_IF(!all, GCOMP_ERR_NOMEM, "MPI transport: node ids of %d ranks", n);
  int rc = p->ops.allgather(p->ctx, mine, NODE_KEY_BYTES, all);
  if (rc != 0) {
    free(all);
    GCOMP_FAIL(GCOMP_ERR_BOOTSTRAP, "MPI transport: rank %d: the node-id allgather failed (%d)",
               p->pub.rank, rc);
  }
  for (int r = 0; r < n; r++) all[(size_t)r * NODE_KEY_BYTES + NODE_KEY_BYTES - 1] = '\0';
  *keys_out = all;
  return GCOMP_OK;
}

int gcomp_p2p_transport_create(int rank, int size, const char *node_id,
                               const struct gcomp_p2p_ops *ops, void *ctx,
                               const gcomp_fabric_opts *opts, gcomp_transport **out) {
  GCOMP_FAIL_IF(!out || !ops || !node_id || !opts, GCOMP_ERR_INVALID,
                "MPI transport: NULL argument");
  *out = NULL;
  GCOMP_FAIL_IF(!ops->isend || !ops->irecv || !ops->test || !ops->waitany || !ops->cancel ||
                    !ops->null_req || !ops->wtime || !ops->allgather || ops->req_bytes == 0,
                GCOMP_ERR_INVALID, "gcomp_comm_init_p2p: a function of the table is missing");
  GCOMP_FAIL_IF(size < 1 || rank < 0 || rank >= size, GCOMP_ERR_INVALID,
                "gcomp_comm_init_p2p: rank %d of %d ranks", rank, size);
  p2p_transport *p = calloc(1, sizeof *p);
  GCOMP_FAIL_IF(!p, GCOMP_ERR_NOMEM, "MPI transport");
  p->ops = *ops;
  p->ctx = ctx;
  p->pub.ops = &p2p_ops;
  p->pub.rank = rank;
  p->pub.size = size;
  p->pub.timeout_ms = opts->timeout_ms;
  p->pub.failed_peer = -1;
  p->pub.no_shared_memory = ops->simulated != 0;
  int st = tag_layout(p, ops->tag_ub);
  char *keys = NULL;
  const char **ptrs = NULL;
  if (st == GCOMP_OK) st = node_keys(p, node_id, &keys);
  if (st == GCOMP_OK) {
    ptrs = malloc((size_t)size * sizeof *ptrs);
    st = ptrs ? GCOMP_OK
              : gcomp_error_set(GCOMP_ERR_NOMEM, __FILE__, __LINE__, "node ids of %d ranks", size);
  }
  for (int r = 0; st == GCOMP_OK && r < size; r++) ptrs[r] = keys + (size_t)r * NODE_KEY_BYTES;
  if (st == GCOMP_OK) st = gcomp_topology_fill(&p->pub, ptrs, &p->topo);
  free(ptrs);
  free(keys);
  if (st < 0) {
    p->ops.close = NULL;   /* the caller keeps ctx on failure */
    p2p_destroy(&p->pub);
    return gcomp_error_trace(st, __FILE__, __LINE__);
  }
  GCOMP_INFO(GCOMP_SUB_FABRIC, "rank %d/%d: MPI transport, node %d/%d, %d-bit tags%s", rank, size,
             p->pub.node, p->pub.nnodes, p->fold_bits + p->seq_bits + 1,
             ops->simulated ? ", simulated (blocking waits, no shared memory)" : "");
  *out = &p->pub;
  return GCOMP_OK;
}
