/* The libfabric transport's completions: reading the completion queues and what each
 * completion (or error) does to its request. See ofi_impl.h for the file map. */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
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

/* ---- completions -------------------------------------------------------------------- */

/* Reads one error entry; returns 0, or the negative fi_cq_readerr result when the entry
 * cannot be read (the caller must then stop reading this queue: see cq_broken). */
static ssize_t on_error(ofi_transport *t, ofi_ep *e) {
  struct fi_cq_err_entry err;
  memset(&err, 0, sizeof err);
  ssize_t rc = t->fault_cqerr ? -FI_EOTHER : fi_cq_readerr(e->cq, &err, 0);
  if (rc == -FI_EAGAIN) return 0;   /* taken meanwhile: fi_cq_read tells what is left */
  if (rc < 0) return rc;
  ofi_ctx *c = err.op_context;
  if (!c) {
    GCOMP_WARN(GCOMP_SUB_FABRIC, "%s completion error without a context: %s", e->prov,
               fi_strerror(err.err));
    return 0;
  }
  err.err = abs(err.err);   /* providers disagree on the sign */
  if (err.err == FI_ECANCELED) {
    ofi_proto_error(t, c, 0, NULL);
    return 0;
  }
  char prov[200] = "", msg[400];
  const char *txt = fi_cq_strerror(e->cq, err.prov_errno, err.err_data, prov, sizeof prov);
  int status = (err.err == FI_ECONNREFUSED || err.err == FI_ECONNRESET ||
                err.err == FI_ENOTCONN || err.err == FI_ECONNABORTED || err.err == FI_EIO ||
                err.err == FI_EHOSTUNREACH)
                   ? GCOMP_ERR_PEER
                   : GCOMP_ERR_FABRIC;
  snprintf(msg, sizeof msg, "over %s failed: %s (%s)", e->prov, fi_strerror(err.err),
           txt && *txt ? txt : "no provider detail");
  ofi_proto_error(t, c, status, msg);
  return 0;
}

/* A completion queue that reports an error no fi_cq_readerr can read would report it again
 * at every read: nothing on it can complete any more. Every request on the endpoint fails
 * (their buffers may still be the provider's: they stay allocated, as zombies, until the
 * transport is destroyed) and the queue is not read again. */
static void cq_broken(ofi_transport *t, ofi_ep *e, ssize_t rc) {
  e->cq_broken = 1;
  t->pub.failed = 1;
  GCOMP_WARN(GCOMP_SUB_FABRIC, "%s completion queue reports an error that fi_cq_readerr cannot "
             "read (%s): the endpoint is unusable", e->prov, fi_strerror((int)-rc));
  for (gcomp_treq *r = t->active; r; r = r->next)
    if (r->ep == e)
      ofi_req_fail(r, GCOMP_ERR_FABRIC, "%s rank %d over %s: the completion queue reports an "
                   "error that fi_cq_readerr cannot read (%s)", ofi_op_name(r), r->peer, e->prov,
                   fi_strerror((int)-rc));
}

int ofi_progress(gcomp_transport *tp) {
  ofi_transport *t = (ofi_transport *)tp;
  for (int i = 0; i < t->neps; i++) {
    ofi_ep *e = &t->eps[i];
    struct fi_cq_tagged_entry ent[16];
    while (!e->cq_broken) {
      ssize_t n = t->fault_cqerr ? -FI_EAVAIL : fi_cq_read(e->cq, ent, 16);
      if (n == -FI_EAGAIN) break;
      if (n == -FI_EAVAIL) {
        ssize_t rc = on_error(t, e);
        if (rc < 0) cq_broken(t, e, rc);
        continue;
      }
      if (n < 0) {
        GCOMP_WARN(GCOMP_SUB_FABRIC, "fi_cq_read on %s: %s", e->prov, fi_strerror((int)-n));
        break;
      }
      if (n > 0) gcomp_moved();   /* the waiter keeps polling while chunks flow */
      for (ssize_t k = 0; k < n; k++)
        if (ent[k].op_context)
          ofi_proto_done(t, ent[k].op_context, ent[k].len, ent[k].tag, ent[k].data);
      if (n < 16) break;
    }
  }
  ofi_proto_pump(t);
  /* the wait that follows, if any, may block on the CQs' wait fds */
  if (t->can_block) gcomp_idle_blocker(tp, ofi_block, t->block_whole);
  return GCOMP_OK;
}

/* An idle wait sleeps in poll() on the CQs' wait fds, at most ns, once fi_trywait says that
 * nothing is pending that the fds would not announce (libfabric's rule: without it an event
 * already taken off the sockets, or a completion already queued, is never signalled again).
 * fi_trywait also drives the provider once (rxm reads tcp's queue; tcp moves socket data and
 * asks for POLLOUT while a send is queued), so a trywait that finds something returns at
 * once to the wait loop, whose progress takes it. */
int ofi_block(gcomp_transport *tp, long ns) {
  ofi_transport *t = (ofi_transport *)tp;
  struct pollfd pfd[2];
  nfds_t n = 0;
  for (int i = 0; i < t->neps; i++) {
    ofi_ep *e = &t->eps[i];
    if (e->cq_fd < 0 || e->cq_broken) continue;
    struct fid *fid = &e->cq->fid;
    int rc = fi_trywait(e->fabric, &fid, 1);
    /* the wait loop's progress takes what trywait found; should trywait find something
     * again at once (data the provider cannot place yet), the wait naps instead of spinning
     * through trywait */
    if (rc == -FI_EAGAIN) return t->trywait_again++ == 0;
    if (rc) {   /* not expected of a provider that gave an fd: nap from now on */
      GCOMP_WARN(GCOMP_SUB_FABRIC, "fi_trywait on %s: %s: its waits nap from now on", e->prov,
                 fi_strerror(-rc));
      e->cq_fd = -1;
      continue;
    }
    pfd[n].fd = e->cq_fd;
    pfd[n].events = POLLIN;
    pfd[n].revents = 0;
    n++;
  }
  if (!n) return 0;
  t->trywait_again = 0;
  struct timespec ts = {ns / 1000000000L, ns % 1000000000L};
  tp->blocked_waits++;
  int k = ppoll(pfd, n, &ts, NULL);
  if (k > 0) tp->fd_wakes++;
  if (k < 0 && errno != EINTR) {   /* once: the waits nap from now on */
    GCOMP_WARN(GCOMP_SUB_FABRIC, "ppoll on the completion queues' wait fds: %s: waits nap from "
               "now on", strerror(errno));
    t->can_block = 0;
  }
  return 1;
}
