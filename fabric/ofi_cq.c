/* The libfabric transport's completions: reading the completion queues and what each
 * completion (or error) does to its request. See ofi_impl.h for the file map. */
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

/* ---- completions -------------------------------------------------------------------- */

static void on_done(ofi_transport *t, ofi_slot *s, size_t len, uint64_t flags, uint64_t data) {
  gcomp_treq *r = s->req;
  s->req = NULL;
  r->inflight--;
  r->last_ns = 0;   /* activity: the silence (timeout) clock restarts at the next look */
  if (r->op == OP_RECV) {
    if (s->first) {
      r->first_done = 1;
      uint64_t total = (flags & FI_REMOTE_CQ_DATA) ? data & ((UINT64_C(1) << LEN_BITS) - 1) : len;
      r->seq = (flags & FI_REMOTE_CQ_DATA) ? data >> LEN_BITS : 0;
      r->total = (size_t)total;
      if (total > r->cap)
        ofi_req_fail(r, GCOMP_ERR_INVALID, "message of %" PRIu64 " bytes from rank %d exceeds the "
                 "receive capacity of %zu bytes: do all ranks pass the same count and dtype?",
                 total, r->peer, r->cap);
      else if (len != (total < r->ep->first ? total : r->ep->first))
        ofi_req_fail(r, GCOMP_ERR_INVALID, "first chunk from rank %d has %zu bytes, expected %zu "
                 "(is GCOMP_CHUNK_BYTES equal on all ranks?)", r->peer, len,
                 (size_t)(total < r->ep->first ? total : r->ep->first));
    }
    r->done_bytes += len;
  }
  if (r->zombie && !r->inflight)
    ofi_req_free(t, r);
  else if (r->status == 0 && !r->zombie && (r->op == OP_SEND || r->first_done))
    ofi_req_post(t, r);
}

/* Reads one error entry; returns 0, or the negative fi_cq_readerr result when the entry
 * cannot be read (the caller must then stop reading this queue: see cq_broken). */
static ssize_t on_error(ofi_transport *t, ofi_ep *e) {
  struct fi_cq_err_entry err;
  memset(&err, 0, sizeof err);
  ssize_t rc = t->fault_cqerr ? -FI_EOTHER : fi_cq_readerr(e->cq, &err, 0);
  if (rc == -FI_EAGAIN) return 0;   /* taken meanwhile: fi_cq_read tells what is left */
  if (rc < 0) return rc;
  ofi_slot *s = err.op_context;
  if (!s || !s->req) {
    GCOMP_WARN(GCOMP_SUB_FABRIC, "%s completion error without a request: %s", e->prov,
               fi_strerror(err.err));
    return 0;
  }
  gcomp_treq *r = s->req;
  s->req = NULL;
  r->inflight--;
  err.err = abs(err.err);   /* providers disagree on the sign */
  if (err.err != FI_ECANCELED) {
    char prov[200] = "";
    const char *txt = fi_cq_strerror(e->cq, err.prov_errno, err.err_data, prov, sizeof prov);
    int status = err.err == FI_ETRUNC ? GCOMP_ERR_INVALID
                 : (err.err == FI_ECONNREFUSED || err.err == FI_ECONNRESET ||
                    err.err == FI_ENOTCONN || err.err == FI_ECONNABORTED || err.err == FI_EIO ||
                    err.err == FI_EHOSTUNREACH)
                     ? GCOMP_ERR_PEER
                     : GCOMP_ERR_FABRIC;
    if (err.err == FI_ETRUNC)
      ofi_req_fail(r, status, "a message from rank %d does not fit its %zu-byte receive buffer (%s): "
               "do all ranks pass the same count and dtype?", r->peer, r->cap, e->prov);
    else
      ofi_req_fail(r, status, "%s rank %d over %s failed: %s (%s)", ofi_op_name(r), r->peer, e->prov,
               fi_strerror(err.err), txt && *txt ? txt : "no provider detail");
  }
  if (r->zombie && !r->inflight) ofi_req_free(t, r);
  return 0;
}

/* A completion queue that reports an error no fi_cq_readerr can read would report it again
 * at every read: nothing on it can complete any more. Every request on the endpoint fails
 * (their buffers may still be the provider's: they stay allocated, as zombies, until the
 * transport is destroyed) and the queue is not read again. */
static void cq_broken(ofi_transport *t, ofi_ep *e, ssize_t rc) {
  e->cq_broken = 1;
  t->failed = 1;
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
      for (ssize_t k = 0; k < n; k++)
        if (ent[k].op_context) on_done(t, ent[k].op_context, ent[k].len, ent[k].flags, ent[k].data);
      if (n < 16) break;
    }
  }
  for (int q = 0; q < 2; q++)
    if (t->fifo_head[q]) ofi_fifo_pump(t, q);
  if (t->npost_pending)
    for (gcomp_treq *r = t->active, *nx; r; r = nx) {
      nx = r->next;
      if (r->want_post) ofi_req_post(t, r);
    }
  return GCOMP_OK;
}
