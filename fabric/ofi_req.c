/* The libfabric transport's requests: a pool of reusable request records and their state.
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

/* ---- requests ----------------------------------------------------------------------- */

void ofi_req_link(ofi_transport *t, gcomp_treq *r) {
  r->prev = NULL;
  r->next = t->active;
  if (t->active) t->active->prev = r;
  t->active = r;
}

void ofi_req_free(ofi_transport *t, gcomp_treq *r) {
  if (r->prev)
    r->prev->next = r->next;
  else
    t->active = r->next;
  if (r->next) r->next->prev = r->prev;
  if (r->want_post) t->npost_pending--;
  ofi_proto_unqueue(t, r);
  ofi_proto_forget(t, r, 0);
  if (r->mr) fi_close(&r->mr->fid);
  if (t->nspare < MAX_SPARE_REQS) {
    r->next = t->spare;
    t->spare = r;
    t->nspare++;
  } else {
    ofi_req_release(r);
  }
}

gcomp_treq *ofi_req_alloc(ofi_transport *t) {
  gcomp_treq *r = t->spare;
  if (!r) return calloc(1, sizeof *r);
  t->spare = r->next;
  t->nspare--;
  memset(r, 0, REQ_HEADER_BYTES);
  return r;
}

void ofi_req_fail(gcomp_treq *r, int status, const char *fmt, ...) {
  if (r->status < 0) return;   /* keep the first cause */
  r->status = status;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->err, sizeof r->err, fmt, ap);
  va_end(ap);
}

int ofi_nslots(const gcomp_treq *r) { return r->xslot ? OFI_WINDOW_MAX : OFI_WINDOW; }

ofi_slot *ofi_slot_at(gcomp_treq *r, int i) {
  return i < OFI_WINDOW ? &r->slot[i] : &r->xslot[i - OFI_WINDOW];
}

/* chunks complete nearly in posting order: the slot after the last one taken is free */
ofi_slot *ofi_slot_get(gcomp_treq *r) {
  int n = ofi_nslots(r);
  for (int k = 0; k < n; k++) {
    int i = (r->slot_hint + k) % n;
    ofi_slot *s = ofi_slot_at(r, i);
    if (!s->req) {
      r->slot_hint = (i + 1) % n;
      return s;
    }
  }
  return NULL;
}

/* Kept with the request when it goes back to the spares (free slots: nothing to clear) */
int ofi_slots_widen(gcomp_treq *r) {
  if (!r->xslot) r->xslot = calloc(OFI_WINDOW_MAX - OFI_WINDOW, sizeof *r->xslot);
  return r->xslot ? 0 : -1;
}

void ofi_req_release(gcomp_treq *r) {
  free(r->xslot);
  free(r);
}

int ofi_req_complete(const gcomp_treq *r) { return r->finished && !r->inflight; }

const char *ofi_op_name(const gcomp_treq *r) {
  return r->op == OP_SEND ? "send to" : "receive from";
}

int ofi_is_backpressure(ssize_t rc) {
  /* shm answers a full receive pool with -FI_ENOMEM rather than -FI_EAGAIN */
  return rc == -FI_EAGAIN || rc == -FI_ENOMEM;
}

/* Withdraws what is still queued or posted; the request is freed once the provider gives the slots
 * back (at once when nothing is in flight). */
void ofi_req_abandon(ofi_transport *t, gcomp_treq *r) {
  r->zombie = 1;
  if (r->want_post) {
    r->want_post = 0;
    t->npost_pending--;
  }
  ofi_proto_unqueue(t, r);   /* a header not sent or a receive not matched: gone at once */
  ofi_proto_forget(t, r, 1);   /* a scheduled receive's RTR: void at the sender */
  ofi_peer *P = &t->peers[r->peer];
  for (int i = 0; i < P->nslots + 2; i++)   /* a goodbye's header buffer forgets it */
    if (P->hsend && P->hsend[i].req == r) P->hsend[i].req = NULL;
  for (int i = 0; i < ofi_nslots(r); i++)
    if (ofi_slot_at(r, i)->req) fi_cancel(&r->ep->ep->fid, &ofi_slot_at(r, i)->c.ctx);
  if (!r->inflight) ofi_req_free(t, r);
}
