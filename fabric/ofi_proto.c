/* The libfabric transport's protocol: flow control by construction, for every provider.
 *
 * One rule: payload goes only into a buffer the receiver has posted. Only fixed-size
 * headers (OFI_HDR_BYTES at most, small payloads with them or, over shm, alone) arrive
 * unsolicited, and only into header slots the receiver keeps posted for that peer, bounded
 * by credits:
 *
 *   header slots  each rank keeps nslots receives of OFI_HDR_BYTES posted per peer (provider
 *                 tag KIND_HDR); a rank sends a peer a header only with a credit, one per
 *                 slot of the peer's it may fill. Every header gives back the credits its
 *                 sender owes (slots reposted since); CREDIT headers do so alone when a
 *                 quarter of the slots are owed. The last credit is kept for CREDIT
 *                 headers, so two ranks that owe each other can always say so, and RTS
 *                 headers use only the upper half, so grants always find credits.
 *   RTS           ready to send: match tag, length, message id; a message of up to
 *                 inline_max bytes travels inside it and the send is done (the slot size
 *                 less the header, 4 KiB and a little, or less where that exceeds the
 *                 provider's inject size and the inject size is large enough: shm's 4 KiB
 *                 less the header). Beyond that, up to the inject size, the payload goes
 *                 alone (fi_tinjectdata, provider tag KIND_BARE | match tag, the credits
 *                 given back as CQ data) into a header slot, whose receives then ignore
 *                 the bits that tell the two apart: an RTS without its header.
 *   CTS           clear to send: for a longer message, once the receiver has matched it,
 *                 has posted receives (provider tag KIND_DATA | token) for its first chunks
 *                 into the caller's buffer; it grants the bytes posted so far and names the
 *                 chunk size and the batch. It grants more, half a window at a time, as
 *                 chunks land.
 *   runs          the chunk is the unit of windows and grants; the provider message is a run
 *                 of `batch` chunks (the receiver's choice, named in its CTS and RTR: over
 *                 shm up to OFI_RUN_BYTES, since shm pays per message; elsewhere 1). Runs
 *                 are cut at multiples of chunk x batch from the message's start, the last
 *                 one shorter, so both ends cut alike: the receiver posts and grants whole
 *                 runs (one provider receive each), the sender sends a run, as one provider
 *                 message, only once all of it is granted, so every message lands in a
 *                 receive of its exact length (or, for a scheduled message's last run, a
 *                 longer one).
 *   DROP          the matched receive is too small: the receive fails (GCOMP_ERR_INVALID)
 *                 from the header, before anything is posted, and the send completes.
 *
 * Scheduled messages (the caller's GCOMP_TAG_SCHED mark, set alike by both ends of a
 * transfer whose sizes both know: every collective of reduce/) turn the handshake round:
 *   RTR           ready to receive: sent as soon as the receive is posted (at most
 *                 OFI_SCHED_ACTIVE of them per peer at a time, in posting order), once the
 *                 first window of chunk receives (KIND_DATA | token) is posted into the
 *                 caller's buffer: match tag, capacity, token, chunk size, bytes granted.
 *                 The sender pairs RTRs with its scheduled sends of the tag in order (a
 *                 scheduled send never sends an RTS; it waits for its RTR, or finds it
 *                 stored here: RTRs wait unmatched like RTS, and use the same upper half of
 *                 the credits), so the data moves as soon as the sender has it: no request
 *                 and grant on the critical path, where a header could wait behind bulk data
 *                 in a rate-limited queue, or for a peer busy computing.
 *   SLEN          the sender's length, sent before its first chunk: shorter than the
 *                 capacity, the receiver withdraws the chunks posted beyond the end (fi_cancel;
 *                 the request completes when they are back); longer, the receive fails
 *                 (GCOMP_ERR_INVALID) and the send completes without moving data. A receive
 *                 filled to its capacity completes without waiting for it.
 *   CTS           more grants as chunks land, as for RTS (flagged, found by token).
 *   RCANCEL       a cancelled scheduled receive's RTR is void: dropped if stored, or the send
 *                 it paired with completes. A cancelled scheduled receive thus takes no
 *                 message (the next receive of the tag pairs with the next send).
 * The mark changes no match: a marked and an unmarked message of one tag meeting (ranks that
 * disagree on a size, so on the mark) fail both ends with GCOMP_ERR_INVALID, the receive
 * from the RTS or the sender's refusing SLEN, the send from the RTR.
 *
 * Matching is done here, in software, in the order the caller posted (per peer: the first
 * posted receive with the tag takes the first arrived header with it), so the caller's
 * posting order never blocks the provider: headers are taken at once whether or not a
 * receive waits for them. Headers that match nothing wait here (OFI_UNEXP_MAX per peer,
 * inline bytes copied; beyond that their slots' credits come back only when they are
 * matched, so a flood from a fast sender stops at the sender). Memory is bounded whatever
 * the senders do: nslots slots, nslots + 2 header send buffers and OFI_UNEXP_MAX headers per
 * peer. The provider sees at most nslots receives per peer plus OFI_WINDOW runs per
 * message being received, and wider windows (small chunks: OFI_WINDOW_BYTES in flight per
 * message) only while less than half its receive entries are taken, never an unexpected
 * message of ours, and never a truncation (run receives have the sender's exact lengths;
 * libfabric 1.17's shm deadlock above its inject size and rxm's disabled endpoint after a
 * truncation cannot be reached). */
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

enum { H_RTS = 1, H_CTS, H_DROP, H_CREDIT, H_RTR, H_SLEN, H_RCANCEL };

/* payload follows the header; a scheduled message's; SLEN: the send is not a scheduled one */
enum { F_INLINE = 1, F_SCHED = 2, F_UNSCHED = 4 };

#define BASE(tag) ((tag) & ~GCOMP_TAG_SCHED)   /* the tag a mark does not change */

typedef struct {
  uint8_t type;
  uint8_t flags;
  uint16_t batch;   /* CTS, RTR: chunks per provider message (0 from an older peer: 1) */
  uint32_t ret;     /* credits given back */
  uint64_t mtag;    /* RTS, RTR */
  uint64_t len;     /* RTS, SLEN: message length; CTS, RTR: bytes granted so far */
  uint64_t id;      /* RTS, CTS, DROP, SLEN: the sender's message number; RTR: capacity */
  uint64_t token;   /* CTS, RTR, SLEN, RCANCEL: data tag */
  uint64_t chunk;   /* CTS, RTR: chunk size */
} ofi_hdr;

#define INLINE_MAX (OFI_HDR_BYTES - sizeof(ofi_hdr))

/* ---- queues ----------------------------------------------------------------------------- */

static void q_add(ofi_transport *t, gcomp_treq *r, int q) {
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
static void tok_add(ofi_transport *t, gcomp_treq *r) {
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

static void tok_del(ofi_transport *t, gcomp_treq *r) {
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

static void dirty(ofi_transport *t, int peer) {
  if (!t->peers[peer].dirty) t->peers[peer].dirty = 1, t->ndirty++;
}

/* Every request of a peer fails (a header exchange with it failed: nothing more can match) */
static void peer_fail(ofi_transport *t, int peer, int status, const char *msg) {
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
static int batch_of(const ofi_ep *e) {
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

static void rx_unroom(gcomp_treq *r) {   /* one chunk receive is no longer posted */
  if (r->op == OP_RECV) r->ep->rx_used--;
}

/* Posts runs of chunks up to the limit (send: what the receiver granted; receive: the
 * message) while the window allows. A run is `batch` chunks in one provider message, cut at
 * multiples of chunk x batch from the message's start (the last one shorter), so both ends
 * cut alike: the receiver grants whole runs, and the sender sends a run only once all of it
 * is granted. Backpressure is not an error: progress retries (want_post). */
static void post_data(ofi_transport *t, gcomp_treq *r) {
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
    rx_unroom(r);
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
    if (r->queue != Q_CTS) q_add(t, r, Q_CTS);
    dirty(t, r->peer);
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
  size_t bytes = sizeof *h + n;
  ssize_t rc;
  if (bytes > e->inject && h->type == H_RTS && (h->flags & F_INLINE) && n <= e->bare_max &&
      !done && !(h->mtag >> KIND_SHIFT)) {
    rc = fi_tinjectdata(e->ep, payload, n, h->ret, t->addr[peer], KIND_BARE | h->mtag);
  } else if (bytes <= e->inject && !done) {
    char buf[OFI_HDR_BYTES];
    memcpy(buf, h, sizeof *h);
    if (n) memcpy(buf + sizeof *h, payload, n);
    rc = fi_tinject(e->ep, buf, bytes, t->addr[peer], KIND_HDR);
  } else {
    ofi_hsend *hs = NULL;
    for (int i = 0; i < P->nslots + 2 && !hs; i++)
      if (!P->hsend[i].busy) hs = &P->hsend[i];
    if (!hs) return 1;
    memcpy(hs->buf, h, sizeof *h);
    if (n) memcpy(hs->buf + sizeof *h, payload, n);
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
  peer_fail(t, peer, GCOMP_ERR_FABRIC, msg);
  return 1;
}

static int repost(ofi_transport *t, ofi_hrecv *h) {
  ofi_ep *e = &t->eps[t->ep_of[h->peer]];
  ssize_t rc = fi_trecv(e->ep, h->buf, OFI_HDR_BYTES, e->arena_desc, t->addr[h->peer], KIND_HDR,
                        e->bare_max ? HDR_IGNORE : 0, &h->c.ctx);
  h->posted = rc == 0;
  return rc == 0;
}

/* Sends what the peer's credits allow, in this order: grants (they let data move), refusals,
 * messages' headers in posting order, then credits alone when half the slots are owed. */
static void pump_peer(ofi_transport *t, int peer) {
  ofi_peer *P = &t->peers[peer];
  if (P->dirty) P->dirty = 0, t->ndirty--;
  if (P->broken) return;
  int wait = 0;
  for (int i = 0; i < P->nslots; i++)
    if (!P->hrecv[i].posted) {
      if (!repost(t, &P->hrecv[i])) {
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
      q_add(t, r, Q_AWAIT);
      post_data(t, r);
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
      post_data(t, r);
    }
    if (P->cred <= P->nslots / 2) break;   /* credits coming back mark the peer again */
    ofi_hdr h = {.type = H_RTR, .batch = (uint16_t)r->batch, .mtag = r->mtag, .len = r->grant,
                 .id = r->cap, .token = r->token, .chunk = r->chunk};
    if ((wait = hdr_send(t, peer, &h, NULL, 0, NULL))) break;
    ofi_proto_unqueue(t, r);
    r->rtr_sent = 1;
    r->last_ns = 0;
    tok_add(t, r);
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
                 .mtag = BASE(r->mtag), .len = r->total, .id = r->id};
    if ((wait = hdr_send(t, peer, &h, r->buf, in ? r->total : 0, in && r->no_inject ? r : NULL)))
      break;
    ofi_proto_unqueue(t, r);
    r->matched = 1;
    r->last_ns = 0;
    if (r->sched)
      r->finished = 1;
    else if (!in)
      q_add(t, r, Q_AWAIT);
    else if (!r->no_inject)
      r->finished = 1;
  }
  if (!wait && P->owed > 0 && P->owed >= P->nslots / 4) {
    ofi_hdr h = {.type = H_CREDIT};
    wait = hdr_send(t, peer, &h, NULL, 0, NULL);
  }
  /* waiting for credits needs nothing: their arrival marks the peer again */
  if (wait && P->cred >= 2) dirty(t, peer);
}

void ofi_proto_pump(ofi_transport *t) {
  if (t->npost_pending)
    for (gcomp_treq *r = t->active, *nx; r; r = nx) {
      nx = r->next;
      if (r->want_post) post_data(t, r);
    }
  for (int p = 0; p < t->pub.size && t->ndirty; p++)
    if (t->peers[p].dirty) pump_peer(t, p);
}

/* ---- matching ----------------------------------------------------------------------------- */

static void owe_hdr(ofi_transport *t, int peer, int type, int flags, uint64_t token,
                    uint64_t len, uint64_t id);

/* A receive meets its message's header: refused, done (inline), or granted. */
static void match(ofi_transport *t, gcomp_treq *r, uint64_t len, uint64_t id, int in,
                  const char *data, size_t n, int unsched) {
  ofi_peer *P = &t->peers[r->peer];
  r->matched = 1;
  r->total = (size_t)len;
  r->id = id;
  r->last_ns = 0;
  if (unsched) {   /* nothing follows: the send is over at the peer */
    ofi_req_fail(r, GCOMP_ERR_INVALID, "rank %d sent a scheduled message of %" PRIu64 " bytes "
                 "where this rank expected an unscheduled one of up to %zu (the ranks size the "
                 "transfer differently): do all ranks pass the same count and dtype?", r->peer,
                 len, r->cap);
    return;
  }
  if (len > r->cap) {
    ofi_req_fail(r, GCOMP_ERR_INVALID, "message of %" PRIu64 " bytes from rank %d exceeds the "
                 "receive capacity of %zu bytes: do all ranks pass the same count and dtype?",
                 len, r->peer, r->cap);
    if (!in) owe_hdr(t, r->peer, H_DROP, 0, 0, 0, id);
    return;
  }
  if (in) {
    if (n != len) {
      ofi_req_fail(r, GCOMP_ERR_CORRUPT, "header from rank %d carries %zu bytes of a %" PRIu64
                   "-byte message", r->peer, n, len);
      return;
    }
    if (n) memcpy(r->buf, data, n);
    r->done_bytes = n;
    r->finished = 1;
    return;
  }
  r->token = P->next_token++;
  r->chunk = r->ep->chunk;
  r->batch = r->ep->batch;
  post_data(t, r);
}

/* A header no request will carry (RCANCEL, a refusing SLEN): sent by pump_peer */
static void owe_hdr(ofi_transport *t, int peer, int type, int flags, uint64_t token,
                    uint64_t len, uint64_t id) {
  ofi_peer *P = &t->peers[peer];
  if (P->broken) return;
  if (P->nowed_hdr == P->owed_hdr_cap) {
    int cap = P->owed_hdr_cap ? 2 * P->owed_hdr_cap : 8;
    ofi_owed *p = realloc(P->owed_hdr, (size_t)cap * sizeof *p);
    if (!p) {
      peer_fail(t, peer, GCOMP_ERR_NOMEM, "no memory for a header owed to the peer");
      return;
    }
    P->owed_hdr = p, P->owed_hdr_cap = cap;
  }
  P->owed_hdr[P->nowed_hdr++] = (ofi_owed){type, flags, token, len, id};
  dirty(t, peer);
}

/* The two ends marked one transfer differently (GCOMP_TAG_SCHED: the ranks size it
 * differently, a call they disagree on): the request fails, the peer learns it from the
 * header this side owes it (a refusal of its RTS, or of its RTR). */
static void unsched_recv(ofi_transport *t, gcomp_treq *r, uint64_t len, uint64_t id, int in) {
  ofi_peer *P = &t->peers[r->peer];
  ofi_req_fail(r, GCOMP_ERR_INVALID, "rank %d sent an unscheduled message of %" PRIu64 " bytes "
               "where this rank expected a scheduled one of up to %zu (the ranks size the "
               "transfer differently): do all ranks pass the same count and dtype?", r->peer, len,
               r->cap);
  if (!in) owe_hdr(t, r->peer, H_DROP, 0, 0, 0, id);
  /* this rank's scheduled send of the tag waits for an RTR that will not come: refused, so
   * that the peer's receive fails too (an inline send of the peer's is already over) */
  gcomp_treq *s;
  for (s = P->q[Q_SCHED].head; s && BASE(s->mtag) != BASE(r->mtag); s = s->qnext) {}
  if (s) {
    ofi_proto_unqueue(t, s);
    q_add(t, s, Q_RTS);
    dirty(t, r->peer);
  }
}

static void unsched_send(ofi_transport *t, gcomp_treq *r, uint64_t cap, uint64_t token) {
  ofi_req_fail(r, GCOMP_ERR_INVALID, "rank %d posted a scheduled receive of up to %" PRIu64
               " bytes where this rank sent an unscheduled message of %zu (the ranks size the "
               "transfer differently): do all ranks pass the same count and dtype?", r->peer, cap,
               r->total);
  owe_hdr(t, r->peer, H_SLEN, F_UNSCHED, token, r->total, 0);
}

/* A scheduled receive that is complete (or leaving) makes room for the next one */
static void sched_retire(ofi_transport *t, gcomp_treq *r) {
  if (!r->active) return;
  r->active = 0;
  t->peers[r->peer].nactive--;
  dirty(t, r->peer);
}

/* A scheduled send meets its receive's RTR: it tells its length, then sends into the
 * chunks the receive has posted (pump_peer, Q_SLEN). */
static void sched_match(ofi_transport *t, gcomp_treq *r, uint64_t grant, uint64_t cap,
                        uint64_t token, uint64_t chunk, int batch) {
  r->matched = 1;
  r->last_ns = 0;
  if (chunk == 0) {
    ofi_req_fail(r, GCOMP_ERR_CORRUPT, "ready-to-receive from rank %d names chunks of 0 bytes",
                 r->peer);
    return;
  }
  r->token = token;
  r->chunk = (size_t)chunk;
  r->batch = batch ? batch : 1;
  r->peer_cap = (size_t)cap;
  r->grant = grant < r->total ? (size_t)grant : r->total;
  q_add(t, r, Q_SLEN);
  dirty(t, r->peer);
}

/* A scheduled receive learns its message's length: too long fails it; shorter than the
 * capacity withdraws the chunks posted beyond the end (their cancellations complete the
 * request, which waits for every posted chunk to come back). */
static void sched_len(ofi_transport *t, gcomp_treq *r, uint64_t len, uint64_t id, int unsched) {
  tok_del(t, r);
  r->len_known = 1;
  r->matched = 1;
  r->id = id;
  r->last_ns = 0;
  if (unsched) {
    unsched_recv(t, r, len, 0, 1);
    return;
  }
  if (len > r->cap) {
    ofi_req_fail(r, GCOMP_ERR_INVALID, "message of %" PRIu64 " bytes from rank %d exceeds the "
                 "receive capacity of %zu bytes: do all ranks pass the same count and dtype?",
                 len, r->peer, r->cap);
    return;
  }
  r->total = (size_t)len;
  if (r->next_off > r->total) r->next_off = r->total;
  if (r->grant > r->total) r->grant = r->total;
  for (int i = 0; i < ofi_nslots(r); i++) {
    ofi_slot *s = ofi_slot_at(r, i);
    if (s->req && s->off >= r->total) fi_cancel(&r->ep->ep->fid, &s->c.ctx);
  }
  if (r->done_bytes >= r->total) {
    r->finished = 1;
    if (r->queue == Q_CTS) ofi_proto_unqueue(t, r);
    sched_retire(t, r);
  }
}

static ofi_unexp *unexp_new(ofi_transport *t, int peer, size_t n, int *held) {
  ofi_peer *P = &t->peers[peer];
  ofi_unexp *u = malloc(sizeof *u + n);
  if (!u) {
    peer_fail(t, peer, GCOMP_ERR_NOMEM, "no memory for an unmatched message's header");
    return NULL;
  }
  memset(u, 0, sizeof *u);
  u->held = *held = P->nunexp >= OFI_UNEXP_MAX;
  P->nunexp++;
  return u;
}

/* Takes the first stored RTR with mtag (or with token when mtag is 0 and by_token) */
static ofi_unexp *rtr_take(ofi_transport *t, int peer, uint64_t key, int by_token) {
  ofi_peer *P = &t->peers[peer];
  ofi_unexp *u = P->ruhead, *prev = NULL;
  while (u && (by_token ? u->token != key : u->mtag != key)) prev = u, u = u->next;
  if (!u) return NULL;
  if (prev)
    prev->next = u->next;
  else
    P->ruhead = u->next;
  if (P->rutail == u) P->rutail = prev;
  P->nunexp--;
  if (u->held) P->owed++, dirty(t, peer);
  return u;
}

static gcomp_treq *sched_send_by_token(ofi_peer *P, uint64_t token) {
  for (int q = Q_SLEN; q; q = q == Q_SLEN ? Q_AWAIT : 0)
    for (gcomp_treq *r = P->q[q].head; r; r = r->qnext)
      if (r->sched && r->token == token) return r;
  return NULL;
}

static void on_header(ofi_transport *t, ofi_hrecv *hr, size_t len, uint64_t tag,
                      uint64_t cqdata) {
  int peer = hr->peer;
  ofi_peer *P = &t->peers[peer];
  hr->posted = 0;
  ofi_hdr h;
  const char *data;
  size_t n;
  if ((tag & ~GCOMP_TAG_MASK) == KIND_BARE) {   /* an inline RTS, the payload alone */
    h = (ofi_hdr){.type = H_RTS, .flags = F_INLINE, .ret = (uint32_t)cqdata,
                  .mtag = tag & GCOMP_TAG_MASK, .len = len};
    data = hr->buf;
    n = len;
  } else {
    if (len < sizeof h) {
      peer_fail(t, peer, GCOMP_ERR_CORRUPT, "a header of too few bytes arrived");
      return;
    }
    memcpy(&h, hr->buf, sizeof h);
    data = hr->buf + sizeof h;
    n = len - sizeof h;
  }
  if (h.ret) P->cred += (int)h.ret, dirty(t, peer);
  int fresh = 0;   /* the header went to the unexpected lists (see the end) */
  int held = 0;
  gcomp_treq *r;
  ofi_unexp *u;
  switch (h.type) {
  case H_RTS:
    for (r = P->q[Q_POSTED].head; r && r->mtag != h.mtag; r = r->qnext) {}
    if (r) {
      ofi_proto_unqueue(t, r);
      match(t, r, h.len, h.id, h.flags & F_INLINE, data, n, h.flags & F_UNSCHED);
      break;
    }
    /* a scheduled receive of the same tag waits for it: the ranks disagree */
    for (r = P->q[Q_RTR].head; r && BASE(r->mtag) != h.mtag; r = r->qnext) {}
    if (!r)
      for (r = P->tok.head; r && BASE(r->mtag) != h.mtag; r = r->tnext) {}
    if (r && !(h.mtag >> KIND_SHIFT) && !(h.flags & F_UNSCHED)) {
      unsched_recv(t, r, h.len, h.id, h.flags & F_INLINE);
      break;
    }
    u = unexp_new(t, peer, n, &held);
    if (!u) break;
    fresh = 1;
    u->mtag = h.mtag;
    u->len = h.len;
    u->id = h.id;
    u->in = h.flags & F_INLINE;
    u->unsched = h.flags & F_UNSCHED;
    u->n = n;
    if (n) memcpy(u->data, data, n);
    if (P->utail)
      P->utail->next = u;
    else
      P->uhead = u;
    P->utail = u;
    break;
  case H_RTR:
    for (r = P->q[Q_SCHED].head; r && r->mtag != h.mtag; r = r->qnext) {}
    if (r) {
      ofi_proto_unqueue(t, r);
      sched_match(t, r, h.len, h.id, h.token, h.chunk, h.batch);
      break;
    }
    for (int q = Q_RTS; !r && q; q = q == Q_RTS ? Q_AWAIT : 0)
      for (r = P->q[q].head; r && r->mtag != BASE(h.mtag); r = r->qnext) {}
    if (r) {   /* an unscheduled send of the same tag: the ranks disagree */
      ofi_proto_unqueue(t, r);
      unsched_send(t, r, h.id, h.token);
      break;
    }
    u = unexp_new(t, peer, 0, &held);
    if (!u) break;
    fresh = 1;
    u->mtag = h.mtag;
    u->len = h.len;
    u->id = h.id;
    u->token = h.token;
    u->chunk = h.chunk;
    u->batch = h.batch;
    if (P->rutail)
      P->rutail->next = u;
    else
      P->ruhead = u;
    P->rutail = u;
    break;
  case H_SLEN:
    for (r = P->tok.head; r && r->token != h.token; r = r->tnext) {}
    /* else: cancelled, or complete at its capacity */
    if (r) sched_len(t, r, h.len, h.id, h.flags & F_UNSCHED);
    break;
  case H_RCANCEL:
    u = rtr_take(t, peer, h.token, 1);
    if (u) {
      free(u);
    } else if ((r = sched_send_by_token(P, h.token))) {
      ofi_proto_unqueue(t, r);
      r->finished = 1;   /* the receive is gone: the send is over (its chunks may drain) */
      r->last_ns = 0;
    }
    break;
  case H_CTS:
  case H_DROP:
    if (h.type == H_CTS && (h.flags & F_SCHED)) {
      /* a grant for a scheduled send, by its token: the send may not have told its length
       * yet (its receive posted the chunks of its RTR later) */
      r = sched_send_by_token(P, h.token);
      if (!r)   /* its RTR is still stored here (the receive posted its chunks late) */
        for (u = P->ruhead; u; u = u->next)
          if (u->token == h.token && h.len > u->len) u->len = h.len;
      if (r && h.len > r->total) h.len = r->total;   /* granted before its length arrived */
      if (r && r->queue == Q_SLEN) {
        if (h.len > r->grant) r->grant = (size_t)h.len;
        break;
      }
    } else {
      for (r = P->q[Q_AWAIT].head; r && r->id != h.id; r = r->qnext) {}
    }
    if (!r) break;   /* cancelled or complete meanwhile */
    r->last_ns = 0;
    if (h.type == H_DROP) {
      ofi_proto_unqueue(t, r);
      r->finished = 1;   /* the receiver failed, from the header; the send is over */
      break;
    }
    int hb = h.batch ? h.batch : 1;
    /* runs are cut from the chunk size and batch: a grant naming others mid-message would
     * cut them differently from the receives posted (a truncation) */
    if (h.chunk == 0 || h.len > r->total ||
        (r->next_off && (h.chunk != r->chunk || hb != r->batch))) {
      ofi_req_fail(r, GCOMP_ERR_CORRUPT, "grant from rank %d of %" PRIu64 " bytes in chunks of %"
                   PRIu64 " (%d a message) for a %zu-byte message", peer, h.len, h.chunk, hb,
                   r->total);
      break;
    }
    r->token = h.token;
    r->chunk = (size_t)h.chunk;
    r->batch = hb;
    if (h.len > r->grant) r->grant = (size_t)h.len;
    post_data(t, r);
    break;
  case H_CREDIT:
    break;
  default:
    peer_fail(t, peer, GCOMP_ERR_CORRUPT, "a header of an unknown type arrived");
    return;
  }
  /* The peer is alive and busy towards this rank (requests waiting behind others to it are
   * not stalled) when the header moves something here: credits alone, a match, a grant, a
   * length, or credits on any header while headers here wait for them. A new message or
   * receive that nothing here waits for proves nothing: a peer in another call, or one
   * reporting its own failure or saying goodbye, sends those while this rank's request
   * starves (it timed out only once that peer had exited). */
  if (!fresh || (h.ret && (P->q[Q_RTS].head || P->q[Q_RTR].head))) P->heard = 1;
  hr->owe = !held;
  if (repost(t, hr)) {
    if (hr->owe) P->owed++, dirty(t, peer);
  } else {
    dirty(t, peer);   /* pump reposts it and gives its credit back then */
  }
}

/* ---- posting ------------------------------------------------------------------------------ */

int ofi_post(ofi_transport *t, int op, int peer, uint64_t mtag, void *buf, size_t len,
             gcomp_treq **out, int no_inject) {
  GCOMP_FAIL_IF(peer < 0 || peer >= t->pub.size || peer == t->pub.rank, GCOMP_ERR_INVALID,
                "rank %d: peer %d is not another rank of the %d", t->pub.rank, peer, t->pub.size);
  GCOMP_FAIL_IF(!out || (len && !buf), GCOMP_ERR_INVALID, "rank %d: NULL buffer or request",
                t->pub.rank);
  ofi_ep *e = &t->eps[t->ep_of[peer]];
  ofi_peer *P = &t->peers[peer];
  GCOMP_FAIL_IF(e->cq_broken || P->broken, GCOMP_ERR_FABRIC, "rank %d: the %s endpoint to rank "
                "%d is unusable after an earlier failure", t->pub.rank, e->prov, peer);
  gcomp_treq *r = ofi_req_alloc(t);
  GCOMP_FAIL_IF(!r, GCOMP_ERR_NOMEM, "request");
  r->op = op;
  r->peer = peer;
  r->ep = e;
  r->addr = t->addr[peer];
  r->mtag = mtag;
  r->buf = buf;
  r->cap = len;
  r->total = op == OP_SEND ? len : 0;
  r->no_inject = no_inject;
  r->sched = (mtag & GCOMP_TAG_SCHED) && !(mtag >> KIND_SHIFT);
  size_t in_max = e->inline_max > e->bare_max ? e->inline_max : e->bare_max;
  if (e->mr_local && len && (len > in_max || r->sched)) {
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
  *out = r;
  if (op == OP_SEND && r->sched) {   /* waits for its receive's RTR, in order per tag */
    r->id = P->next_id++;
    ofi_unexp *u = rtr_take(t, peer, mtag, 0);
    if (!u) {
      q_add(t, r, Q_SCHED);
      return GCOMP_OK;
    }
    sched_match(t, r, u->len, u->id, u->token, u->chunk, u->batch);
    free(u);
    if (P->dirty) pump_peer(t, peer);
    return GCOMP_OK;
  }
  if (op == OP_RECV && r->sched) {   /* posts its first chunks and says so at once */
    ofi_unexp *u = P->uhead, *prev = NULL;   /* an unscheduled message of its tag: refused */
    while (u && u->mtag != BASE(mtag)) prev = u, u = u->next;
    if (u) {
      if (prev)
        prev->next = u->next;
      else
        P->uhead = u->next;
      if (P->utail == u) P->utail = prev;
      P->nunexp--;
      if (u->held) P->owed++, dirty(t, peer);
      unsched_recv(t, r, u->len, u->id, u->in);
      free(u);
      if (P->dirty) pump_peer(t, peer);
      return GCOMP_OK;
    }
    r->token = P->next_token++;
    r->chunk = e->chunk;
    r->batch = e->batch;
    r->total = len;   /* the limit until the sender's length header comes */
    q_add(t, r, Q_RTR);
    dirty(t, peer);
    pump_peer(t, peer);
    return GCOMP_OK;
  }
  if (op == OP_SEND && !(mtag >> KIND_SHIFT)) {   /* a scheduled receive's RTR of its tag */
    ofi_unexp *u = rtr_take(t, peer, mtag | GCOMP_TAG_SCHED, 0);
    if (u) {
      r->total = len;
      unsched_send(t, r, u->id, u->token);
      free(u);
      pump_peer(t, peer);
      return GCOMP_OK;
    }
  }
  if (op == OP_SEND) {
    r->id = P->next_id++;
    q_add(t, r, Q_RTS);
    if (P->q[Q_RTS].head == r) pump_peer(t, peer);   /* at once: latency */
    return GCOMP_OK;
  }
  ofi_unexp *u = P->uhead, *prev = NULL;
  while (u && u->mtag != mtag) prev = u, u = u->next;
  if (!u) {
    q_add(t, r, Q_POSTED);
    return GCOMP_OK;
  }
  if (prev)
    prev->next = u->next;
  else
    P->uhead = u->next;
  if (P->utail == u) P->utail = prev;
  P->nunexp--;
  if (u->held) P->owed++, dirty(t, peer);
  match(t, r, u->len, u->id, u->in, u->data, u->n, u->unsched);
  free(u);
  if (P->dirty) pump_peer(t, peer);
  return GCOMP_OK;
}

int ofi_isend(gcomp_transport *tp, int peer, uint64_t tag, const void *buf, size_t len,
              gcomp_treq **req) {
  GCOMP_FAIL_IF(tag & ~GCOMP_TAG_MASK, GCOMP_ERR_INVALID, "tag 0x%" PRIx64 " uses reserved bits",
                tag);
  return ofi_post((ofi_transport *)tp, OP_SEND, peer, tag, (void *)buf, len, req, 0);
}

int ofi_irecv(gcomp_transport *tp, int peer, uint64_t tag, void *buf, size_t capacity,
              gcomp_treq **req) {
  GCOMP_FAIL_IF(tag & ~GCOMP_TAG_MASK, GCOMP_ERR_INVALID, "tag 0x%" PRIx64 " uses reserved bits",
                tag);
  return ofi_post((ofi_transport *)tp, OP_RECV, peer, tag, buf, capacity, req, 0);
}

/* A request leaves: a scheduled receive whose RTR went out and whose sender has not told
 * its length yet tells the sender (cancelled) that the RTR is void. */
void ofi_proto_forget(ofi_transport *t, gcomp_treq *r, int cancelled) {
  if (cancelled && r->in_tok) owe_hdr(t, r->peer, H_RCANCEL, 0, r->token, 0, 0);
  tok_del(t, r);
  sched_retire(t, r);
}

/* ---- completions -------------------------------------------------------------------------- */

void ofi_proto_done(ofi_transport *t, ofi_ctx *c, size_t len, uint64_t tag, uint64_t data) {
  if (c->what == CTX_HRECV) {
    on_header(t, (ofi_hrecv *)c, len, tag, data);
    return;
  }
  if (c->what == CTX_HSEND) {
    ofi_hsend *hs = (ofi_hsend *)c;
    hs->busy = 0;
    gcomp_treq *r = hs->req;
    hs->req = NULL;
    if (r) r->finished = 1, r->last_ns = 0;
    dirty(t, hs->peer);
    return;
  }
  ofi_slot *s = (ofi_slot *)c;
  gcomp_treq *r = s->req;
  s->req = NULL;
  r->inflight--;
  r->inbytes -= s->len;
  rx_unroom(r);
  r->last_ns = 0;   /* activity: the silence (timeout) clock restarts at the next look */
  size_t want = s->len;   /* a scheduled message's last run may be shorter than posted */
  if (r->op == OP_RECV && r->sched)
    want = !r->len_known ? (len < s->len ? len : s->len)
           : s->off >= r->total ? 0
           : r->total - s->off < s->len ? r->total - s->off : s->len;
  if (r->op == OP_RECV && len != want && r->status == 0)
    ofi_req_fail(r, GCOMP_ERR_CORRUPT, "a chunk from rank %d has %zu bytes, expected %zu",
                 r->peer, len, want);
  r->done_bytes += want;
  if (r->zombie) {
    if (!r->inflight) ofi_req_free(t, r);
    return;
  }
  if (r->status) return;
  if (r->done_bytes >= r->total) {
    r->finished = 1;
    if (r->queue == Q_AWAIT) ofi_proto_unqueue(t, r);
    sched_retire(t, r);
  } else if (r->op == OP_SEND || r->inbytes <= r->wide / 2) {   /* half a window: a grant */
    post_data(t, r);
  }
}

void ofi_proto_error(ofi_transport *t, ofi_ctx *c, int status, const char *msg) {
  if (c->what == CTX_HRECV) {
    ofi_hrecv *h = (ofi_hrecv *)c;
    h->posted = 0;
    if (status) peer_fail(t, h->peer, status, msg);
    return;
  }
  if (c->what == CTX_HSEND) {
    ofi_hsend *hs = (ofi_hsend *)c;
    hs->busy = 0;
    hs->req = NULL;
    if (status) peer_fail(t, hs->peer, status, msg);
    return;
  }
  ofi_slot *s = (ofi_slot *)c;
  gcomp_treq *r = s->req;
  s->req = NULL;
  r->inflight--;
  r->inbytes -= s->len;
  rx_unroom(r);
  if (status) ofi_req_fail(r, status, "%s rank %d: %s", ofi_op_name(r), r->peer, msg);
  if (r->zombie && !r->inflight) ofi_req_free(t, r);
}

/* ---- setup and teardown ------------------------------------------------------------------- */

int ofi_proto_setup(ofi_transport *t) {
  int n = t->pub.size, me = t->pub.rank;
  t->peers = calloc((size_t)n, sizeof *t->peers);
  GCOMP_FAIL_IF(!t->peers, GCOMP_ERR_NOMEM, "peer tables for %d ranks", n);
  for (int i = 0; i < t->neps; i++) {
    /* inline payload goes by inject where a whole slot would not (shm: 4 KiB, a send above
     * that is shm's slower copy: a 4 KiB payload inline, its header by fi_tsend, took 2.1x
     * the time of RTS, CTS and data); tcp;ofi_rxm's 64 B is too small to matter (4 KiB
     * inline there: 1 eager message instead of 3, 0.34x the time) */
    ofi_ep *e = &t->eps[i];
    e->rx_size = (int)(e->info->rx_attr->size ? e->info->rx_attr->size : 1024);
    e->batch = batch_of(e);
    e->inline_max = INLINE_MAX;
#ifndef OFI_INLINE_PAST_INJECT
    if (e->inject >= sizeof(ofi_hdr) + 1024 && e->inject - sizeof(ofi_hdr) < INLINE_MAX)
#else
    if (0)
#endif
    {
      e->inline_max = e->inject - sizeof(ofi_hdr);
      /* the sizes between go alone (shm: 4049-4096 B), their slot takes them whole */
#ifndef OFI_NO_BARE
      e->bare_max = e->inject <= OFI_HDR_BYTES ? e->inject : OFI_HDR_BYTES;
#endif
    }
  }
  size_t per = 0;
  for (int p = 0; p < n; p++) {
    if (p == me) continue;
    ofi_peer *P = &t->peers[p];
    ofi_ep *e = &t->eps[t->ep_of[p]];
    /* half the provider's receive entries for header slots, at most OFI_SLOTS_MAX a peer
     * (every rank computes the same from the job size and the provider's defaults) */
    size_t rx = e->info->rx_attr->size ? e->info->rx_attr->size : 1024;
    size_t k = rx / (2 * (size_t)(n - 1));
    P->nslots = k > OFI_SLOTS_MAX ? OFI_SLOTS_MAX : k < 4 ? 4 : (int)k;
    e->rx_hdr += P->nslots;
    P->cred = P->nslots;
    per += (size_t)(2 * P->nslots + 2);
  }
  t->arena_bytes = per * OFI_HDR_BYTES;
  t->arena = t->arena_bytes ? calloc(1, t->arena_bytes) : NULL;
  GCOMP_FAIL_IF(t->arena_bytes && !t->arena, GCOMP_ERR_NOMEM, "header slots (%zu bytes)",
                t->arena_bytes);
  for (int i = 0; i < t->neps; i++) {
    ofi_ep *e = &t->eps[i];
    if (!e->mr_local || !t->arena) continue;
    int rc = fi_mr_reg(e->domain, t->arena, t->arena_bytes, FI_SEND | FI_RECV, 0, 0, 0,
                       &e->arena_mr, NULL);
    GCOMP_FAIL_IF(rc, GCOMP_ERR_FABRIC, "registering the header slots over %s: %s", e->prov,
                  fi_strerror(-rc));
    e->arena_desc = fi_mr_desc(e->arena_mr);
  }
  char *b = t->arena;
  for (int p = 0; p < n; p++) {
    if (p == me) continue;
    ofi_peer *P = &t->peers[p];
    P->hrecv = calloc((size_t)P->nslots, sizeof *P->hrecv);
    P->hsend = calloc((size_t)P->nslots + 2, sizeof *P->hsend);
    GCOMP_FAIL_IF(!P->hrecv || !P->hsend, GCOMP_ERR_NOMEM, "header slots");
    for (int i = 0; i < P->nslots + 2; i++) {
      P->hsend[i].c.what = CTX_HSEND;
      P->hsend[i].peer = p;
      P->hsend[i].buf = b;
      b += OFI_HDR_BYTES;
    }
    for (int i = 0; i < P->nslots; i++) {
      ofi_hrecv *h = &P->hrecv[i];
      h->c.what = CTX_HRECV;
      h->peer = p;
      h->buf = b;
      b += OFI_HDR_BYTES;
      if (!repost(t, h))
        GCOMP_FAIL(GCOMP_ERR_FABRIC, "posting %d header slots for rank %d over %s", P->nslots,
                   p, t->eps[t->ep_of[p]].prov);
    }
  }
  return GCOMP_OK;
}

/* After the endpoints are closed (nothing is posted any more) */
void ofi_proto_free(ofi_transport *t) {
  for (int i = 0; i < t->neps; i++)
    if (t->eps[i].arena_mr) fi_close(&t->eps[i].arena_mr->fid), t->eps[i].arena_mr = NULL;
  if (t->peers)
    for (int p = 0; p < t->pub.size; p++) {
      ofi_peer *P = &t->peers[p];
      while (P->uhead) {
        ofi_unexp *u = P->uhead;
        P->uhead = u->next;
        free(u);
      }
      while (P->ruhead) {
        ofi_unexp *u = P->ruhead;
        P->ruhead = u->next;
        free(u);
      }
      free(P->owed_hdr);
      free(P->hrecv);
      free(P->hsend);
    }
  free(t->peers);
  free(t->arena);
  t->peers = NULL;
  t->arena = NULL;
}
