/* The protocol's software matching (the protocol: ofi_proto.c): a header that arrives
 * meets the request it is for, or waits here for it; a request that is posted meets the
 * header that waits for it, or waits for it in its peer's queue. */
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
  ofi_post_data(t, r);
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
      ofi_peer_fail(t, peer, GCOMP_ERR_NOMEM, "no memory for a header owed to the peer");
      return;
    }
    P->owed_hdr = p, P->owed_hdr_cap = cap;
  }
  P->owed_hdr[P->nowed_hdr++] = (ofi_owed){type, flags, token, len, id};
  ofi_dirty(t, peer);
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
  for (s = P->q[Q_SCHED].head; s && OFI_BASE(s->mtag) != OFI_BASE(r->mtag); s = s->qnext) {}
  if (s) {
    ofi_proto_unqueue(t, s);
    ofi_q_add(t, s, Q_RTS);
    ofi_dirty(t, r->peer);
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
void ofi_sched_retire(ofi_transport *t, gcomp_treq *r) {
  if (!r->active) return;
  r->active = 0;
  t->peers[r->peer].nactive--;
  ofi_dirty(t, r->peer);
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
  ofi_q_add(t, r, Q_SLEN);
  ofi_dirty(t, r->peer);
}

/* A scheduled receive learns its message's length: too long fails it; shorter than the
 * capacity withdraws the chunks posted beyond the end (their cancellations complete the
 * request, which waits for every posted chunk to come back). */
static void sched_len(ofi_transport *t, gcomp_treq *r, uint64_t len, uint64_t id, int unsched) {
  ofi_tok_del(t, r);
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
    ofi_sched_retire(t, r);
  }
}

static ofi_unexp *unexp_new(ofi_transport *t, int peer, size_t n, int *held) {
  ofi_peer *P = &t->peers[peer];
  ofi_unexp *u = malloc(sizeof *u + n);
  if (!u) {
    ofi_peer_fail(t, peer, GCOMP_ERR_NOMEM, "no memory for an unmatched message's header");
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
  if (u->held) P->owed++, ofi_dirty(t, peer);
  return u;
}

static gcomp_treq *sched_send_by_token(ofi_peer *P, uint64_t token) {
  for (int q = Q_SLEN; q; q = q == Q_SLEN ? Q_AWAIT : 0)
    for (gcomp_treq *r = P->q[q].head; r; r = r->qnext)
      if (r->sched && r->token == token) return r;
  return NULL;
}

void ofi_on_header(ofi_transport *t, ofi_hrecv *hr, size_t len, uint64_t tag, uint64_t cqdata) {
  int peer = hr->peer;
  ofi_peer *P = &t->peers[peer];
  hr->posted = 0;
  ofi_hdr h;
  const char *data;
  size_t n;
  /* every credit the peer gives back is one of a header this side sent it */
  unsigned owed = (unsigned)(P->nslots - P->cred);
  int status;
  if ((tag & ~GCOMP_TAG_MASK) == KIND_BARE) {   /* an inline RTS, the payload alone */
    status = ofi_hdr_bare(tag & GCOMP_TAG_MASK, len, cqdata, owed, &h);
    data = hr->buf;
    n = len;
  } else {
    status = ofi_hdr_decode((const uint8_t *)hr->buf, len, t->wire, owed, &h);
    data = hr->buf + OFI_HDR_WIRE;
    n = len - OFI_HDR_WIRE;
  }
  if (status) {   /* logged too: no request of that peer may be there to carry it */
    char why[256];
    snprintf(why, sizeof why, "%s", gcomp_last_error());
    GCOMP_WARN(GCOMP_SUB_FABRIC, "rank %d: a header from rank %d refused: %s", t->pub.rank, peer,
               why);
    ofi_peer_fail(t, peer, status, why);
    return;
  }
  if (h.ret) P->cred += (int)h.ret, ofi_dirty(t, peer);
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
    for (r = P->q[Q_RTR].head; r && OFI_BASE(r->mtag) != h.mtag; r = r->qnext) {}
    if (!r)
      for (r = P->tok.head; r && OFI_BASE(r->mtag) != h.mtag; r = r->tnext) {}
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
      for (r = P->q[q].head; r && r->mtag != OFI_BASE(h.mtag); r = r->qnext) {}
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
    ofi_post_data(t, r);
    break;
  case H_CREDIT:
    break;
  default:
    ofi_peer_fail(t, peer, GCOMP_ERR_CORRUPT, "a header of an unknown type arrived");
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
  if (ofi_hdr_repost(t, hr)) {
    if (hr->owe) P->owed++, ofi_dirty(t, peer);
  } else {
    ofi_dirty(t, peer);   /* pump reposts it and gives its credit back then */
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
      ofi_q_add(t, r, Q_SCHED);
      return GCOMP_OK;
    }
    sched_match(t, r, u->len, u->id, u->token, u->chunk, u->batch);
    free(u);
    if (P->dirty) ofi_pump_peer(t, peer);
    return GCOMP_OK;
  }
  if (op == OP_RECV && r->sched) {   /* posts its first chunks and says so at once */
    ofi_unexp *u = P->uhead, *prev = NULL;   /* an unscheduled message of its tag: refused */
    while (u && u->mtag != OFI_BASE(mtag)) prev = u, u = u->next;
    if (u) {
      if (prev)
        prev->next = u->next;
      else
        P->uhead = u->next;
      if (P->utail == u) P->utail = prev;
      P->nunexp--;
      if (u->held) P->owed++, ofi_dirty(t, peer);
      unsched_recv(t, r, u->len, u->id, u->in);
      free(u);
      if (P->dirty) ofi_pump_peer(t, peer);
      return GCOMP_OK;
    }
    r->token = P->next_token++;
    r->chunk = e->chunk;
    r->batch = e->batch;
    r->total = len;   /* the limit until the sender's length header comes */
    ofi_q_add(t, r, Q_RTR);
    ofi_dirty(t, peer);
    ofi_pump_peer(t, peer);
    return GCOMP_OK;
  }
  if (op == OP_SEND && !(mtag >> KIND_SHIFT)) {   /* a scheduled receive's RTR of its tag */
    ofi_unexp *u = rtr_take(t, peer, mtag | GCOMP_TAG_SCHED, 0);
    if (u) {
      r->total = len;
      unsched_send(t, r, u->id, u->token);
      free(u);
      ofi_pump_peer(t, peer);
      return GCOMP_OK;
    }
  }
  if (op == OP_SEND) {
    r->id = P->next_id++;
    ofi_q_add(t, r, Q_RTS);
    if (P->q[Q_RTS].head == r) ofi_pump_peer(t, peer);   /* at once: latency */
    return GCOMP_OK;
  }
  ofi_unexp *u = P->uhead, *prev = NULL;
  while (u && u->mtag != mtag) prev = u, u = u->next;
  if (!u) {
    ofi_q_add(t, r, Q_POSTED);
    return GCOMP_OK;
  }
  if (prev)
    prev->next = u->next;
  else
    P->uhead = u->next;
  if (P->utail == u) P->utail = prev;
  P->nunexp--;
  if (u->held) P->owed++, ofi_dirty(t, peer);
  match(t, r, u->len, u->id, u->in, u->data, u->n, u->unsched);
  free(u);
  if (P->dirty) ofi_pump_peer(t, peer);
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
  ofi_tok_del(t, r);
  ofi_sched_retire(t, r);
}
