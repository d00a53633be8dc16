/* The libfabric transport's test and cancel: completion, timeouts and peer liveness.
 * See ofi_impl.h for the file map. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include "ofi_impl.h"
#include "procs.h"

/* A same-host peer whose process is gone will never answer: say so instead of waiting. */
static int peer_dead(ofi_transport *t, int peer) {
  if (strcmp(t->cards[peer].host, t->host) != 0 || !t->pidns[0] ||
      strcmp(t->cards[peer].pidns, t->pidns) != 0)
    return 0;
  uint64_t now = gcomp_now_ns();
  if (now - t->live_check_ns[peer] < LIVENESS_NS) return 0;
  t->live_check_ns[peer] = now;
  return gcomp_pid_gone((int)t->cards[peer].pid);
}

int ofi_test(gcomp_transport *tp, gcomp_treq *r, int *done, size_t *len) {
  ofi_transport *t = (ofi_transport *)tp;
  GCOMP_FAIL_IF(!r || !done, GCOMP_ERR_INVALID, "gcomp_test: NULL argument");
  *done = 0;
  if (r->status == 0 && !ofi_req_complete(r)) ofi_progress(tp);
  if (r->status == 0 && ofi_req_complete(r)) {
    if (len) *len = r->op == OP_SEND ? r->cap : r->total;
    ofi_req_free(t, r);
    *done = 1;
    return GCOMP_OK;
  }
  /* the clock is read every 32nd test only: a spinning waiter polls the CQ, not the clock */
  if (r->status == 0 && (++r->polls & 31u) == 0) {
    uint64_t now = gcomp_now_ns();
    if (!r->last_ns) r->last_ns = now;
    /* a request waiting behind others to a peer that keeps talking is not stalled (a flood
     * of sends drains at the receiver's pace): silence is the request's and its peer's */
    ofi_peer *P = &t->peers[r->peer];
    if (P->heard) P->heard = 0, P->heard_ns = now;
    uint64_t heard = P->heard_ns;
    uint64_t idle = now - (heard > r->last_ns ? heard : r->last_ns);
    if (idle > LIVENESS_NS && peer_dead(t, r->peer))
      ofi_req_fail(r, GCOMP_ERR_PEER, "%s rank %d: its process (pid %d on %s) has exited",
               ofi_op_name(r), r->peer, (int)t->cards[r->peer].pid, t->cards[r->peer].host);
    else if (idle / 1000000u >= (uint64_t)tp->timeout_ms) {
      char where[160];
      if (r->op == OP_SEND && r->sched && !r->matched)
        snprintf(where, sizeof where, "a scheduled send waits for the receive's ready-to-receive "
                 "header: the peer has not posted it");
      else if (r->op == OP_SEND && !r->matched)
        snprintf(where, sizeof where, "its header waits for a credit: the peer takes no more "
                 "messages from this rank");
      else if (r->op == OP_SEND && !r->grant)
        snprintf(where, sizeof where, "the peer has not posted a receive for it");
      else if (r->op == OP_SEND)
        snprintf(where, sizeof where, "%zu of %zu bytes sent", r->done_bytes, r->cap);
      else if (!r->matched)
        snprintf(where, sizeof where, "nothing arrived");
      else
        snprintf(where, sizeof where, "%zu of %zu bytes arrived", r->done_bytes, r->total);
      ofi_req_fail(r, GCOMP_ERR_TIMEOUT, "%s rank %d over %s: no progress within "
                   "GCOMP_TIMEOUT_MS=%d (%s; the peer is stalled, or in another call: do all "
                   "ranks make the same calls with the same counts?)", ofi_op_name(r), r->peer,
                   r->ep->prov, tp->timeout_ms, where);
    }
  }
  if (r->status < 0) {
    int s = r->status;
    t->pub.failed = 1;
    t->pub.failed_peer = r->peer;
    char msg[sizeof r->err];
    memcpy(msg, r->err, sizeof msg);
    ofi_req_abandon(t, r);
    GCOMP_FAIL(s, "rank %d: %s", tp->rank, msg);
  }
  return GCOMP_OK;
}

int ofi_cancel(gcomp_transport *tp, gcomp_treq *r) {
  if (!r) return GCOMP_OK;
  ofi_transport *t = (ofi_transport *)tp;
  int peer = r->peer, inflight = r->inflight;
  ofi_req_abandon(t, r);
  if (inflight)
    GCOMP_TRACE(GCOMP_SUB_FABRIC, "cancelled a request to/from rank %d with %d chunks in flight",
                peer, inflight);
  /* give the provider a moment to hand the buffers back */
  for (int i = 0; i < 64; i++) ofi_progress(tp);
  return GCOMP_OK;
}
