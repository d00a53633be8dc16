/* The protocol's flow control (the protocol: ofi_proto.c): its peers' queues, the data
 * chunks of a message and their windows, and the headers: sending one with a credit, and
 * pumping what credits allow. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include "ofi_proto.h"

/* ---- queues ----------------------------------------------------------------------------- */

void ofi_q_add(ofi_transport *t, gcomp_treq *r, int q) {
  ofi_queue *Q = &t->peers[r->peer].q[q];
  r->queue = q;
  r->qnext = NULL;
  r->qprev = Q->tail;
  if (Q->tail)
    Q->tail->qnext = r;
  else
    Q->head = r;
  Q->tail = r;
}

void ofi_proto_unqueue(ofi_transport *t, gcomp_treq *r) {
  if (!r->queue) return;
  ofi_queue *Q = &t->peers[r->peer].q[r->queue];
  if (r->qprev)
    r->qprev->qnext = r->qnext;
  else
    Q->head = r->qnext;
  if (r->qnext)
    r->qnext->qprev = r->qprev;
  else
    Q->tail = r->qprev;
  r->qnext = r->qprev = NULL;
  r->queue = Q_NONE;
}

/* a scheduled receive in its peer's token list (found by the sender's length header) */
void ofi_tok_add(ofi_transport *t, gcomp_treq *r) {
  ofi_queue *Q = &t->peers[r->peer].tok;
  r->in_tok = 1;
  r->tnext = NULL;
  r->tprev = Q->tail;
  if (Q->tail)
    Q->tail->tnext = r;
  else
    Q->head = r;
  Q->tail = r;
}

void ofi_tok_del(ofi_transport *t, gcomp_treq *r) {
  if (!r->in_tok) return;
  ofi_queue *Q = &t->peers[r->peer].tok;
  if (r->tprev)
    r->tprev->tnext = r->tnext;
  else
    Q->head = r->tnext;
  if (r->tnext)
    r->tnext->tprev = r->tprev;
  else
    Q->tail = r->tprev;
  r->tnext = r->tprev = NULL;
  r->in_tok = 0;
}

/* Every request of a peer fails (a header exchange with it failed: nothing more can match) */
void ofi_peer_fail(ofi_transport *t, int peer, int status, const char *msg) {
  t->peers[peer].broken = 1;
  t->pub.failed = 1;
  for (gcomp_treq *r = t->active; r; r = r->next)
    if (r->peer == peer) ofi_req_fail(r, status, "%s rank %d: %s", ofi_op_name(r), peer, msg);
}

/* ---- data chunks -------------------------------------------------------------------------- */

/* The window of a message, in chunks: OFI_WINDOW_BYTES in flight (small chunks are
 * latency-bound otherwise: 8 of 8 KiB is one round trip per 64 KiB), at least OFI_WINDOW
 * chunks and at most OFI_WINDOW_MAX provider messages (runs of batch chunks). */
static size_t window_of(size_t chunk, int batch) {
  size_t w = chunk ? OFI_WINDOW_BYTES / chunk : OFI_WINDOW;
  size_t max = (size_t)OFI_WINDOW_MAX * (size_t)(batch > 0 ? batch : 1);
  return w < OFI_WINDOW ? OFI_WINDOW : w > max ? max : w;
}

/* Chunks per provider message of the receives an endpoint posts. Over shm every message
 * above its inject size costs one process_vm_readv (64 MiB in 8 KiB messages streams 2.5x
 * slower than in 4 MiB ones: bench/p2p_floor.c), so granted chunks go OFI_RUN_BYTES at a
 * time, at most half a window (a second run is posted while one lands). Over tcp;ofi_rxm
 * every chunk stays one eager message (rxm's eager limit is the chunk size, fabric/ofi_ep.c);
 * other providers are left as they were. */
int ofi_batch_of(const ofi_ep *e) {
  size_t cap = OFI_RUN_BYTES < OFI_WINDOW_BYTES / 2 ? OFI_RUN_BYTES : OFI_WINDOW_BYTES / 2;
  if (strcmp(e->prov, "shm") != 0 || e->chunk >= cap) return 1;
  size_t b = cap / e->chunk, max = e->info->ep_attr->max_msg_size;
  if (b > UINT16_MAX) b = UINT16_MAX;   /* the header's field */
  if (max && b > max / e->chunk) b = max / e->chunk;
  return b < 1 ? 1 : (int)b;
}

/* The provider's receive entries stay bounded however many messages are being received:
 * every message may post its first OFI_WINDOW runs (none waits for another to finish,
 * as before windows grew), more only while the endpoint's header slots and chunk receives
 * take less than half its entries: the other half stays for the first chunks of messages
 * matched later (libfabric 1.17's shm stalls with every entry taken: wide windows taking a
 * quarter on top stalled fabric_p2p's ordering step with FI_SHM_RX_SIZE=64). */
static int rx_room(gcomp_treq *r) {
  if (r->op != OP_RECV) return 1;
  ofi_ep *e = r->ep;
  if (r->inflight >= OFI_WINDOW && e->rx_hdr + e->rx_used >= e->rx_size / 2) return 0;
  e->rx_used++;
  return 1;
}

/* Posts runs of chunks up to the limit (send: what the receiver granted; receive: the
 * message) while the window allows. A run is `batch` chunks in one provider message, cut at
 * multiples of chunk x batch from the message's start (the last one shorter), so both ends
 * cut alike: the receiver grants whole runs, and the sender sends a run only once all of it
 * is granted. Backpressure is not an error: progress retries (want_post). */
void ofi_post_data(ofi_transport *t, gcomp_treq *r) {
  ofi_ep *e = r->ep;
  size_t limit = r->op == OP_SEND ? r->grant : r->total;
  size_t run = r->chunk * (size_t)(r->batch > 0 ? r->batch : 1);
  size_t wbytes = window_of(r->chunk, r->batch) * r->chunk;
  int ops = (int)((wbytes + run - 1) / run);   /* provider messages a full window takes */
  if (ops > OFI_WINDOW && ofi_slots_widen(r)) ops = OFI_WINDOW;   /* no memory: narrower */
  if (r->want_post) r->want_post = 0, t->npost_pending--;
  while (r->status == 0 && !r->zombie && r->next_off < limit && r->inbytes < wbytes &&
         r->inflight < ops) {
    size_t end = r->op == OP_SEND ? r->total : limit;
    size_t n = end - r->next_off < run ? end - r->next_off : run;
    if (r->next_off + n > limit) break;   /* a send: the rest of the run is not granted yet */
    if (!rx_room(r)) break;
    ofi_slot *s = ofi_slot_get(r);
    s->req = r;
    s->c.what = CTX_DATA;
    s->off = r->next_off;
    s->len = n;
    uint64_t tag = KIND_DATA | (r->token & GCOMP_TAG_MASK);
    char *p = r->buf + r->next_off;
    ssize_t rc = r->op == OP_SEND ? fi_tsend(e->ep, p, n, r->desc, r->addr, tag, &s->c.ctx)
                                  : fi_trecv(e->ep, p, n, r->desc, r->addr, tag, 0, &s->c.ctx);
    if (rc == 0) {
      r->inflight++;
      r->inbytes += n;
      r->next_off += n;
      t->pub.data_msgs++;
      continue;
    }
    s->req = NULL;
    ofi_rx_unroom(r);
    if (ofi_is_backpressure(rc)) {
      r->want_post = 1;
      t->npost_pending++;
    } else {
      ofi_req_fail(r, GCOMP_ERR_FABRIC, "posting a %s rank %d over %s: %s",
                   r->op == OP_SEND ? "send to" : "receive from", r->peer, e->prov,
                   fi_strerror((int)-rc));
    }
    break;
  }
  if (r->inbytes > r->wide) r->wide = r->inbytes;
  if (r->op == OP_RECV && r->next_off > r->grant) {   /* new room: tell the sender */
    r->grant = r->next_off;
    if (r->sched && !r->rtr_sent) return;   /* the RTR, still queued, will say so */
    if (r->queue != Q_CTS) ofi_q_add(t, r, Q_CTS);
    ofi_dirty(t, r->peer);
  }
}

/* ---- headers ------------------------------------------------------------------------------ */

/* Sends one header (and n inline bytes) to peer, spending a credit and giving back what is
 * owed. Returns 0 when sent, 1 when it must wait (no credit, no buffer, backpressure). With
 * done != NULL the header goes by a buffer whose completion finishes that send. */
static int hdr_send(ofi_transport *t, int peer, ofi_hdr *h, const void *payload, size_t n,
                    gcomp_treq *done) {
  ofi_peer *P = &t->peers[peer];
  if (P->cred < (h->type == H_CREDIT ? 1 : 2)) return 1;
  ofi_ep *e = &t->eps[t->ep_of[peer]];
  h->ret = (uint32_t)P->owed;
  size_t bytes = OFI_HDR_WIRE + n;
  ssize_t rc;
  if (bytes > e->inject && h->type == H_RTS && (h->flags & F_INLINE) && n <= e->bare_max &&
      !done && !(h->mtag >> KIND_SHIFT)) {
    rc = fi_tinjectdata(e->ep, payload, n, h->ret, t->addr[peer], KIND_BARE | h->mtag);
  } else if (bytes <= e->inject && !done) {
    uint8_t buf[OFI_HDR_BYTES];
    ofi_hdr_encode(h, t->wire, buf);
    if (n) memcpy(buf + OFI_HDR_WIRE, payload, n);
    rc = fi_tinject(e->ep, buf, bytes, t->addr[peer], KIND_HDR);
  } else {
    ofi_hsend *hs = NULL;
    for (int i = 0; i < P->nslots + 2 && !hs; i++)
      if (!P->hsend[i].busy) hs = &P->hsend[i];
    if (!hs) return 1;
    ofi_hdr_encode(h, t->wire, (uint8_t *)hs->buf);
    if (n) memcpy(hs->buf + OFI_HDR_WIRE, payload, n);
    rc = fi_tsend(e->ep, hs->buf, bytes, e->arena_desc, t->addr[peer], KIND_HDR, &hs->c.ctx);
    if (rc == 0) hs->busy = 1, hs->req = done;
  }
  if (rc == 0) {
    P->owed = 0;
    P->cred--;
    return 0;
  }
  if (ofi_is_backpressure(rc)) return 1;
  char msg[160];
  snprintf(msg, sizeof msg, "sending a header over %s: %s", e->prov, fi_strerror((int)-rc));
  ofi_peer_fail(t, peer, GCOMP_ERR_FABRIC, msg);
  return 1;
}

int ofi_hdr_repost(ofi_transport *t, ofi_hrecv *h) {
  ofi_ep *e = &t->eps[t->ep_of[h->peer]];
  ssize_t rc = fi_trecv(e->ep, h->buf, OFI_HDR_BYTES, e->arena_desc, t->addr[h->peer], KIND_HDR,
                        e->bare_max ? HDR_IGNORE : 0, &h->c.ctx);
  h->posted = rc == 0;
  return rc == 0;
}

/* Sends what the peer's credits allow, in this order: grants (they let data move), refusals,
 * messages' headers in posting order, then credits alone when half the slots are owed. */
void ofi_pump_peer(ofi_transport *t, int peer) {
  ofi_peer *P = &t->peers[peer];
  if (P->dirty) P->dirty = 0, t->ndirty--;
  if (P->broken) return;
  int wait = 0;
  for (int i = 0; i < P->nslots; i++)
    if (!P->hrecv[i].posted) {
      if (!ofi_hdr_repost(t, &P->hrecv[i])) {
        wait = 1;
        break;
      }
      if (P->hrecv[i].owe) P->owed++;
    }
  gcomp_treq *r;
  while (!wait && (r = P->q[Q_CTS].head)) {
    ofi_hdr h = {.type = H_CTS, .flags = r->sched ? F_SCHED : 0, .batch = (uint16_t)r->batch,
                 .len = r->grant, .id = r->id, .token = r->token, .chunk = r->chunk};
    if ((wait = hdr_send(t, peer, &h, NULL, 0, NULL))) break;
    ofi_proto_unqueue(t, r);
  }
  /* a scheduled send tells its length before its data (the receiver cuts its posted
   * chunks to it), then sends what the RTR granted */
  while (!wait && (r = P->q[Q_SLEN].head)) {
    ofi_hdr h = {.type = H_SLEN, .len = r->total, .id = r->id, .token = r->token};
    if ((wait = hdr_send(t, peer, &h, NULL, 0, NULL))) break;
    ofi_proto_unqueue(t, r);
    r->last_ns = 0;
    if (r->total > r->peer_cap || r->total == 0) {
      r->finished = 1;   /* refused (the receive fails from this header), or nothing to move */
    } else {
      ofi_q_add(t, r, Q_AWAIT);
      ofi_post_data(t, r);
    }
  }
  while (!wait && P->nowed_hdr) {
    ofi_owed *o = &P->owed_hdr[P->nowed_hdr - 1];
    ofi_hdr h = {.type = (uint8_t)o->type, .flags = (uint8_t)o->flags, .token = o->token,
                 .len = o->len, .id = o->id};
    if ((wait = hdr_send(t, peer, &h, NULL, 0, NULL))) break;
    P->nowed_hdr--;
  }
  /* scheduled receives in posting order: a few at a time post their first chunks (the
   * provider's receive entries stay bounded), then say so; ready-to-receive headers, like
   * RTS, may wait unmatched at the peer: the upper half of the credits */
  while (!wait && (r = P->q[Q_RTR].head)) {
    if (!r->active) {
      if (P->nactive >= OFI_SCHED_ACTIVE) break;
      r->active = 1;
      P->nactive++;
      ofi_post_data(t, r);
    }
    if (P->cred <= P->nslots / 2) break;   /* credits coming back mark the peer again */
    ofi_hdr h = {.type = H_RTR, .batch = (uint16_t)r->batch, .mtag = r->mtag, .len = r->grant,
                 .id = r->cap, .token = r->token, .chunk = r->chunk};
    if ((wait = hdr_send(t, peer, &h, NULL, 0, NULL))) break;
    ofi_proto_unqueue(t, r);
    r->rtr_sent = 1;
    r->last_ns = 0;
    ofi_tok_add(t, r);
  }
  /* messages' headers take at most half the credits: the other half stays for grants and
   * refusals, which the peer never holds (held RTS credits could otherwise leave a grant
   * waiting for the very receive it would let complete) */
  while (!wait && P->cred > P->nslots / 2 && (r = P->q[Q_RTS].head)) {
    /* a scheduled send here was refused (its peer's receive of the tag is unscheduled):
     * its RTS, without data, tells that receive to fail */
    int in = !r->sched && (r->total <= r->ep->inline_max ||
                           (r->total <= r->ep->bare_max && !r->no_inject));
    ofi_hdr h = {.type = H_RTS, .flags = in ? F_INLINE : r->sched ? F_UNSCHED : 0,
                 .mtag = OFI_BASE(r->mtag), .len = r->total, .id = r->id};
    if ((wait = hdr_send(t, peer, &h, r->buf, in ? r->total : 0, in && r->no_inject ? r : NULL)))
      break;
    ofi_proto_unqueue(t, r);
    r->matched = 1;
    r->last_ns = 0;
    if (r->sched)
      r->finished = 1;
    else if (!in)
      ofi_q_add(t, r, Q_AWAIT);
    else if (!r->no_inject)
      r->finished = 1;
  }
  if (!wait && P->owed > 0 && P->owed >= P->nslots / 4) {
    ofi_hdr h = {.type = H_CREDIT};
    wait = hdr_send(t, peer, &h, NULL, 0, NULL);
  }
  /* waiting for credits needs nothing: their arrival marks the peer again */
  if (wait && P->cred >= 2) ofi_dirty(t, peer);
}

void ofi_proto_pump(ofi_transport *t) {
  if (t->npost_pending)
    for (gcomp_treq *r = t->active, *nx; r; r = nx) {
      nx = r->next;
      if (r->want_post) ofi_post_data(t, r);
    }
  for (int p = 0; p < t->pub.size && t->ndirty; p++)
    if (t->peers[p].dirty) ofi_pump_peer(t, p);
}
