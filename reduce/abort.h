/* Internal: the abort notice, so that an error one rank finds mid-call reaches every rank of
 * the call at once instead of leaving the others to wait out GCOMP_TIMEOUT_MS, and the
 * corrupt-frame fault (GCOMP_FAULT=corrupt:rank=R,call=N) that tests it.
 *
 * Always on: every communicator keeps one receive posted per peer on a reserved tag
 * (GCOMP_SEQ_NOTICE, which no call takes), its wait loops test them when idle (every 16th
 * idle poll, up to 8 peers each time, in turn), and a rank sends each peer a small notice (its rank, the culprit's, the call's
 * number, its status and detail) before it fails, once per communicator, when it finds
 *   - a peer's frame corrupt (gcomp_abort_corrupt_from),
 *   - a peer dead or silent: its call failed with GCOMP_ERR_PEER or _TIMEOUT from the
 *     transport or the node's segment (gcomp_abort_failed; not a failure a notice caused:
 *     notices are never echoed), so that a rank stuck behind another survivor fails at once,
 *     not when that one exits or at its own GCOMP_TIMEOUT_MS,
 *   - or that gcomp_comm_abort was called (gcomp_abort_here).
 * Sends wait at most min(1 s, GCOMP_TIMEOUT_MS), never for the rank found dead or silent.
 * On the success path that is one test of the posted receives per 16 idle polls: no message, and no
 * difference gcomp-bench allreduce --ab GCOMP_NOTICE=0 could tell from noise at 8 B or
 * 1 MiB. GCOMP_NOTICE=0 (agreed, for that measurement only) posts no receive. GCOMP_FAULT
 * only injects: it changes the bytes sent, never how the fault is found or reported.
 *
 * What a notice does: the waiting rank fails its call with the notice's status (a silent
 * peer stays a timeout, a dead one GCOMP_ERR_PEER) and a detail naming the reporting rank
 * and the rank it found dead, silent or corrupt; the call then breaks the
 * communicator like any failed call (gcomp.h: every later call returns GCOMP_ERR_PEER at
 * once, naming the first failure; destroy it and create a new one), as NCCL's communicator
 * after ncclCommAbort and MPI's MPI_ERRORS_RETURN leave theirs. A rank that finished the
 * call before the notice came (possible only when the fault was in a message no other rank
 * waits on, e.g. top-k's allgather, or after its last wait on the faulty rank) meets it in
 * its next call instead.
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

/* Posts the watch when `watch` (GCOMP_NOTICE, agreed: every rank posts alike) and arms the
 * corrupt fault when GCOMP_FAULT names it for this rank. */
int gcomp_abort_create(gcomp_transport *t, int watch, gcomp_abort **out);
void gcomp_abort_destroy(gcomp_abort *a);   /* NULL: no-op; cancels the watch */

/* What a call's start reads, first in struct gcomp_abort so that the check is inline: two
 * loads, no call (the two calls it was cost ~28 instructions of an 8 B allreduce). */
typedef struct {
  int aborted;   /* gcomp_comm_abort was called (atomic: any thread sets it) */
  int counting;  /* GCOMP_FAULT=corrupt is armed on this rank: calls are counted */
} gcomp_abort_head;

/* The corrupt fault's side of a call's start: counts it, arms the fault at call N */
void gcomp_abort_count_call(gcomp_abort *a);

/* A user call begins (call.c): counts calls when the corrupt fault is armed (at call N on
 * rank R); returns nonzero when the communicator was aborted (gcomp_abort_requested).
 * a may be NULL in this and every function below but gcomp_abort_blame. */
static inline int gcomp_abort_call_begins(gcomp_abort *a) {
  if (!a) return 0;
  gcomp_abort_head *h = (gcomp_abort_head *)(void *)a;
  if (h->counting) gcomp_abort_count_call(a);
  return __atomic_load_n(&h->aborted, __ATOMIC_ACQUIRE);
}

/* The sender's side of the fault: when armed for this call, flips one byte in the middle of
 * the payload of the sealed frame (len bytes) about to be sent to peer, once per call. */
void gcomp_abort_corrupt_frame(gcomp_abort *a, uint8_t *frame, size_t len, int peer);

/* A frame from world rank `culprit` failed to decode with status st (GCOMP_ERR_CORRUPT):
 * names the culprit in the detail and sends the notice to every peer. Returns st. */
int gcomp_abort_corrupt_from(gcomp_abort *a, const struct gcomp_coll *c, int st, int culprit);

/* A call failed with st after its collective ran (call.c, before gcomp_abort_blame): when st
 * is GCOMP_ERR_PEER or _TIMEOUT found by this rank (not heard in a notice) and no notice
 * went out yet, sends every peer one naming t->failed_peer. Returns st, its detail kept. */
int gcomp_abort_failed(gcomp_abort *a, uint32_t seq, int st);

/* gcomp_comm_abort: marks the communicator aborted (any thread; no transport use) */
void gcomp_abort_request(gcomp_abort *a);
static inline int gcomp_abort_requested(const gcomp_abort *a) {
  return a && __atomic_load_n(&((const gcomp_abort_head *)(const void *)a)->aborted,
                              __ATOMIC_ACQUIRE);
}
/* From the transport's user (a call, destroy): when aborted, tells every peer once (bounded
 * by min(1 s, GCOMP_TIMEOUT_MS)) and returns GCOMP_ERR_ABORTED; else GCOMP_OK. */
int gcomp_abort_here(gcomp_abort *a);

/* Tests the watch (every 16th time it is called, 8 peers in turn: wait loops call it when
 * idle; memory and posted receives stay O(n) a rank) and the
 * abort mark (every time). GCOMP_OK, or a notice's status with its detail, or
 * GCOMP_ERR_ABORTED. */
int gcomp_abort_poll(gcomp_abort *a);

/* After a call failed with GCOMP_ERR_TIMEOUT, _PEER or _CORRUPT (always on: it costs
 * nothing until a call fails): every failing rank tells every peer it failed (on
 * GCOMP_SEQ_BLAME, its status and detail) and listens for theirs, for up to min(250 ms,
 * GCOMP_TIMEOUT_MS / 4), or until every peer has
 * answered or is known to have exited (the dead peer a GCOMP_ERR_PEER names, t->failed_peer,
 * is not waited for). A rank that neither answers nor has exited is
 * stopped, hung, or still waiting on another: the detail then starts by naming those (and
 * the exited ones), so that every rank names the culprit, not only the ranks that waited on
 * it directly. A rank that timed out while a peer found corrupt data returns
 * GCOMP_ERR_CORRUPT with that peer's detail first: should the notice not arrive (a rank
 * that never posted it), every rank still reports the corruption and its culprit, after GCOMP_TIMEOUT_MS (the
 * detecting rank waits up to that long more for them to hear it). A mismatch a peer found
 * (GCOMP_ERR_INVALID: the ranks called with different counts or dtypes) is returned the same
 * way, for the rank whose own wait found only the silence or exit of the peer that saw it.
 * Returns
 * st otherwise (other statuses pass unchanged; a detecting rank keeps its own detail). */
int gcomp_abort_blame(gcomp_transport *t, uint32_t seq, int st);

/* gcomp_wait / gcomp_waitall watching the notices too (plain when a is NULL or not watching). */
int gcomp_abort_wait(gcomp_abort *a, gcomp_transport *t, gcomp_treq *req, size_t *len);
int gcomp_abort_waitall(gcomp_abort *a, gcomp_transport *t, int n, gcomp_treq **reqs);

#endif /* GCOMP_ABORT_H */
