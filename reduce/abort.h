/* Internal: the abort notice, so that an error one rank finds mid-call reaches every rank of
 * the call at once instead of leaving the others to wait out GCOMP_TIMEOUT_MS, and the
 * corrupt-frame fault (GCOMP_FAULT=corrupt:rank=R,call=N) that tests it.
 *
 * Armed only while GCOMP_FAULT is set (any kind but corrupt-quiet): a communicator then keeps one receive
 * posted per peer on a reserved tag (sequence 0xfffff1, which no call takes), its wait loops
 * test them when idle, and a rank that finds a peer's frame corrupt sends each peer a small
 * notice (its rank, the culprit's, the call's number, the detail) before it fails. Unset,
 * the watch is NULL and every hook is one NULL test: no receive, no message, no cost.
 *
 * What a notice does: the waiting rank fails its call with the notice's status and a detail
 * naming the reporting rank and the rank whose data was corrupt; the call then breaks the
 * communicator like any failed call (gcomp.h: every later call returns GCOMP_ERR_PEER at
 * once, naming the first failure; destroy it and create a new one), as NCCL's communicator
 * after ncclCommAbort and MPI's MPI_ERRORS_RETURN leave theirs. A rank that finished the
 * call before the notice came (possible only when the corrupt frame was one no other rank
 * waits on, e.g. top-k's allgather) meets it in its next call instead.
 *
 * Without a codec there is nothing to check: the dense path sends raw values, no checksum,
 * so a corrupt fault on a dense call corrupts nothing (a warning says so once). */
#ifndef GCOMP_ABORT_H
#define GCOMP_ABORT_H

#include <stddef.h>
#include <stdint.h>

#include "transport.h"

typedef struct gcomp_abort gcomp_abort;
struct gcomp_coll;

/* *out = NULL when GCOMP_FAULT is unset; else posts the watch (collective in effect: every
 * rank arms alike, since GCOMP_FAULT is read from each rank's own environment, which the
 * tests set alike). */
int gcomp_abort_create(gcomp_transport *t, gcomp_abort **out);
void gcomp_abort_destroy(gcomp_abort *a);   /* NULL: no-op; cancels the watch */

/* A user call begins (call.c): counts calls, arms the corrupt fault at call N on rank R. */
void gcomp_abort_call_begins(gcomp_abort *a);

/* The sender's side of the fault: when armed for this call, flips one byte in the middle of
 * the payload of the sealed frame (len bytes) about to be sent to peer, once per call. */
void gcomp_abort_corrupt_frame(gcomp_abort *a, uint8_t *frame, size_t len, int peer);

/* A frame from world rank `culprit` failed to decode with status st (GCOMP_ERR_CORRUPT):
 * names the culprit in the detail and, when armed, sends the notice to every peer. Returns
 * st. a may be NULL. */
int gcomp_abort_corrupt_from(gcomp_abort *a, const struct gcomp_coll *c, int st, int culprit);

/* Tests the watch (every 16th time it is called: wait loops call it when idle). GCOMP_OK,
 * or a notice's status with its detail. a must not be NULL. */
int gcomp_abort_poll(gcomp_abort *a);

/* After a call failed with GCOMP_ERR_TIMEOUT, _PEER or _CORRUPT (always on: it costs
 * nothing until a call fails): every failing rank tells every peer it failed (sequence
 * 0xfffff2, its status and detail) and listens for theirs, for up to min(250 ms,
 * GCOMP_TIMEOUT_MS / 4), or until every peer has
 * answered or is known to have exited. A rank that neither answers nor has exited is
 * stopped, hung, or still waiting on another: the detail then starts by naming those (and
 * the exited ones), so that every rank names the culprit, not only the ranks that waited on
 * it directly. A rank that timed out while a peer found corrupt data returns
 * GCOMP_ERR_CORRUPT with that peer's detail first: without GCOMP_FAULT's prompt notice,
 * every rank still reports the corruption and its culprit, after GCOMP_TIMEOUT_MS (the
 * detecting rank waits up to that long more for them to hear it). A mismatch a peer found
 * (GCOMP_ERR_INVALID: the ranks called with different counts or dtypes) is returned the same
 * way, for the rank whose own wait found only the silence or exit of the peer that saw it.
 * Returns
 * st otherwise (other statuses pass unchanged; a detecting rank keeps its own detail). */
int gcomp_abort_blame(gcomp_transport *t, uint32_t seq, int st);

/* gcomp_wait / gcomp_waitall watching the notices too (plain when a is NULL). */
int gcomp_abort_wait(gcomp_abort *a, gcomp_transport *t, gcomp_treq *req, size_t *len);
int gcomp_abort_waitall(gcomp_abort *a, gcomp_transport *t, int n, gcomp_treq **reqs);

#endif /* GCOMP_ABORT_H */
