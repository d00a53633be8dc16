/* The point-to-point transport that reduce/ is written against.
 *
 * One small, non-blocking ops table. Two implementations fill it:
 *   - libfabric (fabric/ofi*.c): RDM endpoints, tagged messages, `shm` inside a node and
 *     `tcp;ofi_rxm` (GCOMP_PROVIDER) between nodes, created for a job from the launcher's
 *     variables with gcomp_transport_create_env() or from any out-of-band exchange with
 *     gcomp_transport_create();
 *   - loopback (fabric/loopback.c): N ranks inside one process, for unit tests and the
 *     single-process convergence simulator, created with gcomp_loopback_create().
 *
 * Semantics (both implementations):
 *   - isend/irecv post an operation and return at once with a request. The caller's buffer
 *     must stay valid and untouched until the request completes or is cancelled.
 *   - peer is another rank: a rank never sends to itself (GCOMP_ERR_INVALID).
 *   - Flow control is the transport's (over libfabric: fabric/ofi_proto.c): any number of
 *     sends and receives may be outstanding, posted in any order, to and from any peers;
 *     none of them can block the provider or another peer's messages, and the memory a
 *     rank spends on messages it has not matched yet is bounded whatever its peers send
 *     (a fast sender waits at the sender). Callers keep no budget of messages in flight.
 *   - A send may stay pending until the matching receive is posted (always so on the
 *     loopback, and over libfabric for messages above a few KiB): post receives before
 *     waiting on sends.
 *   - Messages between one (sender, receiver) pair with the same tag are matched in the
 *     order they were posted (MPI's non-overtaking rule). Different tags never match.
 *   - A receive may get fewer bytes than its capacity (frames vary in size); test/wait
 *     report the received length. A message longer than the capacity fails the receive
 *     (GCOMP_ERR_INVALID, as every length the ranks disagree on), found from the
 *     message's header before any of it moves; the send completes and the transport
 *     stays usable.
 *   - test() drives progress itself; a request is consumed (freed) when test reports it
 *     done or failed, and by cancel. A request not completed within GCOMP_TIMEOUT_MS of
 *     its last activity fails with GCOMP_ERR_TIMEOUT; a peer known to have died turns its
 *     requests into GCOMP_ERR_PEER. gcomp_last_error() names the peer.
 *   - One transport object is used by one thread at a time (FI_THREAD_DOMAIN). Loopback
 *     ranks of one world may be driven by different threads, one thread per rank, or all
 *     from one thread.
 *
 * Tags: the low GCOMP_TAG_BITS bits are the caller's; the transport uses the rest. Build
 * them with gcomp_tag(seq, step): seq is a per-collective sequence number (so successive
 * collectives never match each other's messages), step is the algorithm's own step id.
 *
 * Scheduled messages: a caller that knows on both ends that a transfer will happen (both
 * follow one schedule, as every collective of reduce/ does) may mark the send and the
 * receive with GCOMP_TAG_SCHED, both or neither. The mark changes no match and no result;
 * over libfabric it lets the receiver announce its posted buffer as soon as the receive is
 * posted, so the data moves as soon as the sender has it (fabric/ofi_proto.c). Rules:
 * post marked receives early, and those from one peer in the order it sends them (posted
 * receives announce themselves a few at a time, in posting order); a marked send waits for
 * its receive to be posted, whatever its size. A marked receive cancelled after it was
 * posted takes no message. Ends that disagree on the mark (ranks that size the transfer
 * differently) fail with GCOMP_ERR_INVALID where the transport can tell, else time out.
 * The loopback ignores the mark.
 */
#ifndef GCOMP_TRANSPORT_H
#define GCOMP_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>

#define GCOMP_TAG_BITS 57
#define GCOMP_TAG_MASK ((UINT64_C(1) << GCOMP_TAG_BITS) - 1)
#define GCOMP_TAG_SEQ_BITS 24   /* seq wraps modulo 2^24 */
#define GCOMP_TAG_STEP_BITS 32
/* The caller's mark of a scheduled message (see "Scheduled messages" above) */
#define GCOMP_TAG_SCHED (UINT64_C(1) << 56)

#include "reserved_seq.h"   /* the sequences no call takes */
_Static_assert(GCOMP_SEQ_RESERVED + GCOMP_SEQ_RESERVED_SPAN == 1u << GCOMP_TAG_SEQ_BITS,
               "the reserved sequences are the top of the sequence space");

static inline uint64_t gcomp_tag(uint32_t seq, uint32_t step) {
  return ((uint64_t)(seq & ((1u << GCOMP_TAG_SEQ_BITS) - 1)) << GCOMP_TAG_STEP_BITS) | step;
}

/* The version of what ranks exchange: rank cards, transport headers, the communicator's
 * reserved messages. Ranks of one job must hold the same: a rank card (fabric/ofi.c) and
 * communicator creation (reduce/agree.c) refuse a mismatch, naming both versions. Raise it
 * with any change to what goes on the wire. */
#define GCOMP_WIRE_VERSION 3u
/* GCOMP_WIRE_VERSION, or the next one on the rank GCOMP_FAULT=wire-version:rank=R names
 * (fault.h: tests of mismatched builds) */
unsigned gcomp_wire_version(int rank);

typedef struct gcomp_transport gcomp_transport;
typedef struct gcomp_treq gcomp_treq;   /* opaque request */

/* What a transport takes from its communicator's settings, passed to every constructor:
 * reduce/ fills it from the communicator's own table (gcomp_fabric_opts_from), so fabric/
 * reads no setting of a communicator from the parameter registry. Read only while the
 * constructor runs (the strings are not kept). What fabric/ still reads from the registry
 * belongs to the process, not to a communicator: GCOMP_FAULT (fault.h, debug injection; a
 * config refuses it) and the launcher's variables behind rank discovery and the rendezvous
 * (bootstrap.c: GCOMP_RANK, _SIZE, _LOCAL_RANK, _ROOT, _JOB_TOKEN). */
typedef struct gcomp_fabric_opts {
  int timeout_ms;               /* GCOMP_TIMEOUT_MS: a request idle this long fails */
  size_t chunk_bytes;           /* GCOMP_CHUNK_BYTES: libfabric's largest provider message */
  const char *provider;         /* GCOMP_PROVIDER: libfabric's provider between nodes */
  const char *intra_provider;   /* GCOMP_INTRA_PROVIDER: libfabric's provider inside a node */
  /* GCOMP_NODE_ID ("": the host name), for gcomp_transport_create_env; the other
   * constructors take their caller's node id */
  const char *node_id;
  /* GCOMP_CQ_WAIT: a long wait blocks on the completion queue's wait fd where the provider
   * has one (tcp;ofi_rxm) and the rank is alone on its node, not in timed naps (gcomp_idle) */
  int cq_wait;
} gcomp_fabric_opts;

typedef struct gcomp_transport_ops {
  const char *name;   /* "ofi", "loopback" */
  /* Posts a send of len bytes (0 allowed) to rank peer. *req receives the request. */
  int (*isend)(gcomp_transport *t, int peer, uint64_t tag, const void *buf, size_t len,
               gcomp_treq **req);
  /* Posts a receive of at most capacity bytes from rank peer. */
  int (*irecv)(gcomp_transport *t, int peer, uint64_t tag, void *buf, size_t capacity,
               gcomp_treq **req);
  /* Drives progress, then: *done = 0 (pending, req still owned by the caller) or
   * *done = 1 (complete, req freed; *len, when non-NULL, gets the bytes moved). A negative
   * return is a failure; the request is freed then too. */
  int (*test)(gcomp_transport *t, gcomp_treq *req, int *done, size_t *len);
  /* Drives the completion queues once without waiting. */
  int (*progress)(gcomp_transport *t);
  /* Withdraws a pending request; the caller must not use req afterwards. A receive that
   * nothing matched yet takes no message. Over libfabric a send (or a receive) the provider
   * has already started may still touch the buffer until the provider lets go of it; the
   * transport keeps that state internally and frees it later. */
  int (*cancel)(gcomp_transport *t, gcomp_treq *req);
  /* Frees the transport (pending requests included). Over libfabric this is collective,
   * like MPI_Finalize: it waits (up to GCOMP_TIMEOUT_MS, 1 s after a failure) until every
   * live peer destroys too, so nothing still in flight is lost. */
  void (*destroy)(gcomp_transport *t);
} gcomp_transport_ops;

/* Every implementation starts with this header; the fields are read-only for users, but for
 * failed. */
struct gcomp_transport {
  const gcomp_transport_ops *ops;
  int rank, size;
  int node, nnodes;         /* node index of this rank; nodes numbered by lowest rank */
  int local_rank, local_size;
  const int *node_of;       /* [size]: node index of every rank */
  const int *local_ranks;   /* [local_size]: the ranks of my node, ascending */
  int timeout_ms;           /* gcomp_fabric_opts.timeout_ms at creation */
  /* Provider messages of payload this rank has posted, sends and receives (libfabric only;
   * a chunk run is one: fabric/ofi_proto.c). A count for tests and traces. */
  uint64_t data_msgs;
  /* Idle steps of this transport's waits that blocked on its completion queues' wait fd
   * (gcomp_idle), and those of them that the fd woke before their timeout (libfabric only,
   * GCOMP_CQ_WAIT). Counts for tests and the log. */
  uint64_t blocked_waits, fd_wakes;
  /* Nonzero once something failed: one of the transport's own requests, or a call of its
   * user (who sets it; a failure elsewhere, e.g. in a node's shared segment, leaves the
   * peers in no state to say goodbye). destroy then waits at most 1 s. The one field a
   * user may write. */
  int failed;
  /* The peer whose request failed last (GCOMP_ERR_PEER or _TIMEOUT), -1 before any: the
   * rank an abort notice names (reduce/abort.h). Written by the transports, by the node's
   * shared segment (reduce/shm.c), whose waits fail outside them, and by a notice that names
   * a dead peer (reduce/abort.c). */
  int failed_peer;
  /* Nonzero when the ranks of a node must not share memory (the MPI transport under a
   * simulator: all ranks in one process, and a futex wait would stop them all). */
  int no_shared_memory;
};

/* ---- thin wrappers -------------------------------------------------------------------- */
static inline int gcomp_isend(gcomp_transport *t, int peer, uint64_t tag, const void *buf,
                              size_t len, gcomp_treq **req) {
  return t->ops->isend(t, peer, tag, buf, len, req);
}
static inline int gcomp_irecv(gcomp_transport *t, int peer, uint64_t tag, void *buf,
                              size_t capacity, gcomp_treq **req) {
  return t->ops->irecv(t, peer, tag, buf, capacity, req);
}
static inline int gcomp_test(gcomp_transport *t, gcomp_treq *req, int *done, size_t *len) {
  return t->ops->test(t, req, done, len);
}
static inline int gcomp_progress(gcomp_transport *t) { return t->ops->progress(t); }
static inline int gcomp_cancel(gcomp_transport *t, gcomp_treq *req) {
  return t->ops->cancel(t, req);
}

/* Blocks (driving progress, yielding the CPU when idle) until req completes. */
int gcomp_wait(gcomp_transport *t, gcomp_treq *req, size_t *len);
/* Waits for all n requests (NULL entries are skipped and set entries become NULL as they
 * complete). On the first failure the remaining requests are cancelled and the failure is
 * returned. lens may be NULL. */
int gcomp_waitall(gcomp_transport *t, int n, gcomp_treq **reqs, size_t *lens);
/* Blocking conveniences over isend/irecv + wait. */
int gcomp_send(gcomp_transport *t, int peer, uint64_t tag, const void *buf, size_t len);
int gcomp_recv(gcomp_transport *t, int peer, uint64_t tag, void *buf, size_t capacity,
               size_t *len);
/* The idle step of every wait loop: spins a little, then sched_yield()s, then naps. Naps
 * are only for a wait whose transport moves nothing: gcomp_moved() (a transport's progress
 * completed something on this thread since the last idle step: a chunk, a header) takes
 * the wait back to yielding, so a long message arriving in many small chunks is polled,
 * not napped through (its request completes only at its end). */
void gcomp_idle(unsigned *spins);
void gcomp_moved(void);
/* Where a transport's progress can sleep until something arrives (a libfabric wait fd), its
 * progress names it here, on the thread that drives it: the next idle step of that thread
 * past its first few spins calls block(t, ns) instead of napping, if no idle step came in
 * between (so a loop that waits for something else, or a transport this thread no longer
 * drives, is never blocked in). block waits at most ns and returns 1, or 0 if it could not
 * (the caller naps). whole: every message of t can wake it; the wait may then last longer
 * than a nap (up to GCOMP_BLOCK_NS), else it is capped at the nap it replaces. */
typedef int (*gcomp_block_fn)(gcomp_transport *t, long ns);
void gcomp_idle_blocker(gcomp_transport *t, gcomp_block_fn block, int whole);
/* While on (this thread), gcomp_idle naps after a few spins, never yields: for long waits
 * on a machine with more ranks than CPUs, where spinning and yielding take the CPU from the
 * ranks being waited for. GCOMP_NAPS_LENGTHEN (a progress thread beside its rank's
 * computation): each nap of a wait with nothing moving is twice the last, up to a few
 * hundred microseconds. Returns the previous setting, for the caller to restore. */
enum { GCOMP_NAPS_OFF, GCOMP_NAPS_ON, GCOMP_NAPS_LENGTHEN };
int gcomp_idle_naps(int on);

void gcomp_transport_destroy(gcomp_transport *t);   /* NULL is a no-op; see ops.destroy */

/* ---- topology ------------------------------------------------------------------------- */
/* Fills node, nnodes, local_rank, local_size, node_of and local_ranks from one node key per
 * rank (equal keys = same node). node_of and local_ranks are allocated into *storage
 * (free it with free()). */
int gcomp_topology_fill(gcomp_transport *t, const char *const *node_keys, int **storage);

/* ---- out-of-band exchange -------------------------------------------------------------
 * Bootstrap needs only an allgather of small fixed-size records. The TCP rendezvous in
 * bootstrap.c provides one; the MPI shim can provide another (MPI_Allgather). */
typedef struct gcomp_oob {
  int rank, size;
  /* all receives size * len bytes, rank r's record at r * len. */
  int (*allgather)(struct gcomp_oob *oob, const void *mine, size_t len, void *all);
  void (*close)(struct gcomp_oob *oob);
  void *ctx;
} gcomp_oob;

/* Creates the libfabric transport over an existing out-of-band exchange. node_id names this
 * rank's node (ranks with equal node ids talk over opts->intra_provider, others over
 * opts->provider). The oob is only used during the call. */
int gcomp_transport_create(gcomp_oob *oob, const char *node_id, const gcomp_fabric_opts *opts,
                           gcomp_transport **out);

/* Reads rank and size from GCOMP_* or launcher variables, meets the other ranks at the
 * rendezvous (GCOMP_ROOT or MASTER_ADDR:MASTER_PORT) and creates the transport, on the node
 * opts->node_id names (else the host's). Every rank then pings every peer, so an
 * unreachable peer is an error here, not a hang later. libfabric is initialised here: fork
 * (without exec) only before this call. */
int gcomp_transport_create_env(const gcomp_fabric_opts *opts, gcomp_transport **out);

/* N ranks in this process: out[0..size) receive one transport per rank, each destroyed
 * separately. node_of (may be NULL: one node) gives each rank's node index, so
 * hierarchical algorithms can be tested. Of opts, only timeout_ms applies. */
int gcomp_loopback_create(int size, const int *node_of, const gcomp_fabric_opts *opts,
                          gcomp_transport **out);

/* The transport over a caller's MPI point-to-point functions (fabric/mpi_p2p.c; the table is
 * gcomp_p2p_ops in include/gcomp.h). node_id names this rank's node. ops is copied, ctx
 * kept; ops->close(ctx) runs at destroy (not when creation fails). Of opts, only timeout_ms
 * applies. */
struct gcomp_p2p_ops;
int gcomp_p2p_transport_create(int rank, int size, const char *node_id,
                               const struct gcomp_p2p_ops *ops, void *ctx,
                               const gcomp_fabric_opts *opts, gcomp_transport **out);

#endif /* GCOMP_TRANSPORT_H */
