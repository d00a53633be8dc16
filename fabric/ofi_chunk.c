/* The libfabric transport's chunk protocol: how one message becomes provider messages.
 *
 * Wire protocol of one message (len bytes, user tag T, from a sender's k-th message to
 * this peer, k = seq):
 *   first chunk   tag KIND_FIRST|T, remote CQ data = seq << 40 | len, min(len, first) bytes
 *   other chunks  tag KIND_CONT|seq, chunk bytes each (the last one shorter)
 * first is the chunk size, except on shm, where it is the inject size: libfabric 1.17's shm
 * deadlocks both processes when it truncates a longer message (ranks that disagree on a
 * call's count), while an injected one is truncated cleanly, and the length it carries
 * then shows the mismatch before any further chunk is posted.
 * The receiver posts only the first chunk, learns len and seq from its completion, then
 * posts the rest: receives never need to know the length in advance, and continuation
 * chunks of different messages can never match each other (FI_ORDER_SAS keeps chunks of
 * one message in order). Up to OFI_WINDOW chunks of a request are in flight at once.
 *
 * Receive entries: posted receives and unexpected messages share the provider's entries
 * (rx_attr->size, 1024 on shm). On libfabric 1.17's shm, once they are all taken (receives
 * waiting for later messages, messages whose receives are not posted yet) the message at
 * the head of its queue, often the next chunk of one already matched, finds none and is
 * never taken, and no receive can be posted either: a stall for good. The timeout turns it
 * into GCOMP_ERR_TIMEOUT; when the rank's provider refused a receive in the last second,
 * the message adds that (a wedged endpoint with nothing left to post says nothing more).
 * The collectives budget the chunks they keep in flight to one peer (GCOMP_COLL_MAX_ENTRIES
 * in reduce/coll.h). */
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

/* Posts as many chunks as the window allows. Backpressure is not an error: a first chunk
 * stays at the head of its FIFO, a later chunk is marked, and progress retries both after
 * draining the completion queues. */
void ofi_req_post(ofi_transport *t, gcomp_treq *r) {
  if (r->want_post) {
    r->want_post = 0;
    t->npost_pending--;
  }
  while (r->status == 0 && !r->zombie) {
    ofi_ep *e = r->ep;
    ssize_t rc;
    if (!r->first_posted) {
      size_t n = r->op == OP_SEND ? (r->total < e->first ? r->total : e->first)
                                  : (r->cap < e->first ? r->cap : e->first);
      if (r->op == OP_SEND && n <= e->inject && !r->no_inject) {
        uint64_t data = r->seq << LEN_BITS | r->total;
        rc = fi_tinjectdata(e->ep, r->buf, n, data, r->addr, r->tag);
        if (rc == 0) {
          r->first_posted = 1;
          r->next_off = n;
          r->last_ns = 0;
          continue;
        }
      } else {
        ofi_slot *s = ofi_slot_get(r);
        s->req = r;
        s->first = 1;
        if (r->op == OP_SEND)
          rc = fi_tsenddata(e->ep, r->buf, n, r->desc, r->seq << LEN_BITS | r->total, r->addr,
                            r->tag, &s->ctx);
        else
          rc = fi_trecv(e->ep, r->buf, n, r->desc, r->addr, r->tag, 0, &s->ctx);
        if (rc == 0) {
          r->first_posted = 1;
          r->inflight++;
          r->next_off = n;
          continue;
        }
        s->req = NULL;
      }
    } else {
      if (r->op == OP_RECV && !r->first_done) return;
      if (r->next_off >= r->total || r->inflight >= OFI_WINDOW) return;
      size_t n = r->total - r->next_off < e->chunk ? r->total - r->next_off : e->chunk;
      ofi_slot *s = ofi_slot_get(r);
      s->req = r;
      s->first = 0;
      uint64_t tag = KIND_CONT | (r->seq & GCOMP_TAG_MASK);
      void *p = r->buf + r->next_off;
      if (r->op == OP_SEND)
        rc = fi_tsend(e->ep, p, n, r->desc, r->addr, tag, &s->ctx);
      else
        rc = fi_trecv(e->ep, p, n, r->desc, r->addr, tag, 0, &s->ctx);
      if (rc == 0) {
        r->inflight++;
        r->next_off += n;
        continue;
      }
      s->req = NULL;
    }
    if (ofi_is_backpressure(rc)) {
      if (r->op == OP_RECV) e->recv_refused_ns = gcomp_now_ns();
      if (r->first_posted) {
        r->want_post = 1;
        t->npost_pending++;
      }
    } else {
      ofi_req_fail(r, GCOMP_ERR_FABRIC, "posting a %s rank %d over %s: %s", r->op == OP_SEND ? "send" : "receive",
               r->peer, e->prov, fi_strerror((int)-rc));
    }
    return;
  }
}

/* Posts first chunks in FIFO order until one meets backpressure. */
void ofi_fifo_pump(ofi_transport *t, int q) {
  gcomp_treq *r;
  while ((r = t->fifo_head[q])) {
    if (r->status == 0 && !r->zombie) {
      ofi_req_post(t, r);
      if (r->status == 0 && !r->first_posted) return;   /* backpressure: keep the order */
    }
    t->fifo_head[q] = r->fnext;
    if (!t->fifo_head[q]) t->fifo_tail[q] = NULL;
    r->in_fifo = 0;
    r->fnext = NULL;
    if (r->zombie && !r->inflight) ofi_req_free(t, r);
  }
}

/* ---- posting ---------------------------------------------------------------------------- */

int ofi_post(ofi_transport *t, int op, int peer, uint64_t fulltag, void *buf, size_t len,
                    gcomp_treq **out, int no_inject) {
  GCOMP_FAIL_IF(peer < 0 || peer >= t->pub.size || peer == t->pub.rank, GCOMP_ERR_INVALID,
                "rank %d: peer %d is not another rank of the %d", t->pub.rank, peer, t->pub.size);
  GCOMP_FAIL_IF(!out || (len && !buf), GCOMP_ERR_INVALID, "rank %d: NULL buffer or request",
                t->pub.rank);
  GCOMP_FAIL_IF(op == OP_SEND && (uint64_t)len >> LEN_BITS, GCOMP_ERR_INVALID,
                "message of %zu bytes is over the 1 TiB limit", len);
  ofi_ep *e = &t->eps[t->ep_of[peer]];
  GCOMP_FAIL_IF(e->cq_broken, GCOMP_ERR_FABRIC, "rank %d: the %s endpoint to rank %d is unusable "
                "(its completion queue reported an error that could not be read)", t->pub.rank,
                e->prov, peer);
  gcomp_treq *r = ofi_req_alloc(t);
  GCOMP_FAIL_IF(!r, GCOMP_ERR_NOMEM, "request");
  r->op = op;
  r->peer = peer;
  r->ep = e;
  r->addr = t->addr[peer];
  r->tag = fulltag;
  r->buf = buf;
  r->cap = len;
  r->total = op == OP_SEND ? len : 0;
  r->last_ns = 0;
  r->no_inject = no_inject;
  if (op == OP_SEND) r->seq = t->send_seq[peer]++ & SEQ_MASK;
  if (e->mr_local && len) {
    int rc = fi_mr_reg(e->domain, buf, len, op == OP_SEND ? FI_SEND : FI_RECV, 0, 0, 0, &r->mr,
                       NULL);
    if (rc) {
      r->next = t->spare;   /* back to the spares: nothing links to it yet */
      t->spare = r;
      t->nspare++;
      GCOMP_FAIL(GCOMP_ERR_FABRIC, "registering %zu bytes for rank %d over %s: %s", len, peer,
                 e->prov, fi_strerror(-rc));
    }
    r->desc = fi_mr_desc(r->mr);
  }
  ofi_req_link(t, r);
  int q = op - 1;
  r->in_fifo = 1;
  if (t->fifo_tail[q])
    t->fifo_tail[q]->fnext = r;
  else
    t->fifo_head[q] = r;
  t->fifo_tail[q] = r;
  if (t->fifo_head[q] == r) ofi_fifo_pump(t, q);
  *out = r;
  return GCOMP_OK;
}

int ofi_isend(gcomp_transport *tp, int peer, uint64_t tag, const void *buf, size_t len,
                     gcomp_treq **req) {
  GCOMP_FAIL_IF(tag & ~GCOMP_TAG_MASK, GCOMP_ERR_INVALID, "tag 0x%" PRIx64 " uses reserved bits",
                tag);
  return ofi_post((ofi_transport *)tp, OP_SEND, peer, KIND_FIRST | tag, (void *)buf, len, req, 0);
}

int ofi_irecv(gcomp_transport *tp, int peer, uint64_t tag, void *buf, size_t capacity,
                     gcomp_treq **req) {
  GCOMP_FAIL_IF(tag & ~GCOMP_TAG_MASK, GCOMP_ERR_INVALID, "tag 0x%" PRIx64 " uses reserved bits",
                tag);
  return ofi_post((ofi_transport *)tp, OP_RECV, peer, KIND_FIRST | tag, buf, capacity, req, 0);
}
