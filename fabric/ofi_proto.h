/* What the protocol's files share (the protocol itself: ofi_proto.c):
 *   ofi_proto.c  the protocol; completions; header slots set up and freed
 *   ofi_flow.c   queues, data chunks and windows, header sending with credits, the pump
 *   ofi_match.c  software matching of arriving headers with posted requests; posting
 *   ofi_hdr.c    the header's wire encoding (ofi_hdr.h)
 */
#ifndef GCOMP_OFI_PROTO_H
#define GCOMP_OFI_PROTO_H

#include <stddef.h>
#include <stdint.h>

#include "ofi_hdr.h"
#include "ofi_impl.h"

#define OFI_BASE(tag) ((tag) & ~GCOMP_TAG_SCHED)   /* the tag a mark does not change */

_Static_assert(OFI_SLOTS_MAX <= 255, "a header gives back at most 255 credits (ofi_hdr.h)");
_Static_assert(GCOMP_WIRE_VERSION < 255, "a header carries the wire version's low byte");

/* inline payload bytes a header slot holds after its header */
#define INLINE_MAX (OFI_HDR_BYTES - OFI_HDR_WIRE)

/* progress pumps the peer (inline: every header and grant marks one, as when this was one
 * file) */
static inline void ofi_dirty(ofi_transport *t, int peer) {
  if (!t->peers[peer].dirty) t->peers[peer].dirty = 1, t->ndirty++;
}

static inline void ofi_rx_unroom(gcomp_treq *r) {   /* one chunk receive is no longer posted */
  if (r->op == OP_RECV) r->ep->rx_used--;
}

/* ---- ofi_flow.c ---- */
void ofi_q_add(ofi_transport *t, gcomp_treq *r, int q);   /* to the tail of its peer's q */
void ofi_tok_add(ofi_transport *t, gcomp_treq *r);        /* its peer's token list */
void ofi_tok_del(ofi_transport *t, gcomp_treq *r);
/* every request of the peer fails: a header exchange with it failed */
void ofi_peer_fail(ofi_transport *t, int peer, int status, const char *msg);
int ofi_batch_of(const ofi_ep *e);         /* chunks per provider message of its receives */
void ofi_post_data(ofi_transport *t, gcomp_treq *r);   /* posts chunks the window allows */
int ofi_hdr_repost(ofi_transport *t, ofi_hrecv *h);    /* 1: the header slot is posted */
void ofi_pump_peer(ofi_transport *t, int peer);        /* sends what the credits allow */

/* ---- ofi_match.c ---- */
void ofi_sched_retire(ofi_transport *t, gcomp_treq *r);   /* room for the next scheduled recv */
/* a header slot's completion: len bytes, the provider tag and CQ data */
void ofi_on_header(ofi_transport *t, ofi_hrecv *hr, size_t len, uint64_t tag, uint64_t cqdata);

#endif /* GCOMP_OFI_PROTO_H */
