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
 * Every header is OFI_HDR_WIRE bytes laid out field by field, little-endian, with a magic
 * and the wire version (ofi_hdr.h): a header of another build, a corrupt one, or one giving
 * back more credits than its sender can owe fails every request of that peer, naming why.
 *
 * Matching is done in software (ofi_match.c), in the order the caller posted (per peer: the
 * first posted receive with the tag takes the first arrived header with it), so the
 * caller's posting order never blocks the provider: headers are taken at once whether or
 * not a receive waits for them. Headers that match nothing wait there (OFI_UNEXP_MAX per peer,
 * inline bytes copied; beyond that their slots' credits come back only when they are
 * matched, so a flood from a fast sender stops at the sender). Memory is bounded whatever
 * the senders do: nslots slots, nslots + 2 header send buffers and OFI_UNEXP_MAX headers per
 * peer. The provider sees at most nslots receives per peer plus OFI_WINDOW runs per
 * message being received, and wider windows (small chunks: OFI_WINDOW_BYTES in flight per
 * message) only while less than half its receive entries are taken, never an unexpected
 * message of ours, and never a truncation (run receives have the sender's exact lengths;
 * libfabric 1.17's shm deadlock above its inject size and rxm's disabled endpoint after a
 * truncation cannot be reached). */
#include <stdlib.h>
#include <string.h>

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include "ofi_proto.h"

/* ---- completions -------------------------------------------------------------------------- */

void ofi_proto_done(ofi_transport *t, ofi_ctx *c, size_t len, uint64_t tag, uint64_t data) {
  if (c->what == CTX_HRECV) {
    ofi_on_header(t, (ofi_hrecv *)c, len, tag, data);
    return;
  }
  if (c->what == CTX_HSEND) {
    ofi_hsend *hs = (ofi_hsend *)c;
    hs->busy = 0;
    gcomp_treq *r = hs->req;
    hs->req = NULL;
    if (r) r->finished = 1, r->last_ns = 0;
    ofi_dirty(t, hs->peer);
    return;
  }
  ofi_slot *s = (ofi_slot *)c;
  gcomp_treq *r = s->req;
  s->req = NULL;
  r->inflight--;
  r->inbytes -= s->len;
  ofi_rx_unroom(r);
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
    ofi_sched_retire(t, r);
  } else if (r->op == OP_SEND || r->inbytes <= r->wide / 2) {   /* half a window: a grant */
    ofi_post_data(t, r);
  }
}

void ofi_proto_error(ofi_transport *t, ofi_ctx *c, int status, const char *msg) {
  if (c->what == CTX_HRECV) {
    ofi_hrecv *h = (ofi_hrecv *)c;
    h->posted = 0;
    if (status) ofi_peer_fail(t, h->peer, status, msg);
    return;
  }
  if (c->what == CTX_HSEND) {
    ofi_hsend *hs = (ofi_hsend *)c;
    hs->busy = 0;
    hs->req = NULL;
    if (status) ofi_peer_fail(t, hs->peer, status, msg);
    return;
  }
  ofi_slot *s = (ofi_slot *)c;
  gcomp_treq *r = s->req;
  s->req = NULL;
  r->inflight--;
  r->inbytes -= s->len;
  ofi_rx_unroom(r);
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
    e->batch = ofi_batch_of(e);
    e->inline_max = INLINE_MAX;
    if (e->inject >= OFI_HDR_WIRE + 1024 && e->inject - OFI_HDR_WIRE < INLINE_MAX) {
      e->inline_max = e->inject - OFI_HDR_WIRE;
      /* the sizes between go alone (shm: 4049-4096 B), their slot takes them whole */
      e->bare_max = e->inject <= OFI_HDR_BYTES ? e->inject : OFI_HDR_BYTES;
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
      if (!ofi_hdr_repost(t, h))
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
