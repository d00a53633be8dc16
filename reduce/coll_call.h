/* Internal: one collective call as the algorithms see it (gcomp_coll), the groups of ranks
 * it runs over, its tags, the element-wise reduction kernels, and the helpers every
 * algorithm uses on it (scratch, waiting, segmented exchanges). Part of coll.h. */
#ifndef GCOMP_COLL_CALL_H
#define GCOMP_COLL_CALL_H

#include <stddef.h>
#include <stdint.h>

#include "gcomp_common.h"
#include "transport.h"

typedef struct gcomp_shm gcomp_shm;   /* a node's shared-memory segment (reduce/shm.c) */

/* The collectives a call may be. Each algorithm serves one (gcomp_algo.kind), and the
 * planner prices only those of the call's kind. The working vector an algorithm gets holds
 * count elements for allreduce and broadcast, and size x block for reduce_scatter,
 * allgather and alltoall, where block r (the gcomp_chunk partition) is rank r's. */
typedef enum {
  GCOMP_COLL_ALLREDUCE,
  GCOMP_COLL_REDUCE_SCATTER,
  GCOMP_COLL_ALLGATHER,
  GCOMP_COLL_BROADCAST,
  GCOMP_COLL_BARRIER,
  GCOMP_COLL_ALLTOALL,
  GCOMP_COLL_KINDS
} gcomp_coll_kind;
/* "allreduce", "reduce_scatter", ...; NULL out of range */
const char *gcomp_coll_kind_name(int kind);

/* Scratch memory the algorithms borrow: grown on demand, kept from call to call by its
 * owner (a communicator), never shared by two calls at once. */
typedef struct {
  uint8_t *p;
  size_t cap;
} gcomp_scratch;
void gcomp_scratch_free(gcomp_scratch *s);

/* A subset of the transport's ranks taking part in one (sub-)collective. */
typedef struct {
  const int *ranks;   /* world ranks, in the group's order */
  int n;              /* group size */
  int me;             /* my index in ranks[] */
} gcomp_group;

/* Element-wise dst = dst op src over n elements. */
typedef void (*gcomp_reduce_fn)(void *restrict dst, const void *restrict src, size_t n);
/* dst = a op b (sums only; NULL for other ops). */
typedef void (*gcomp_reduce3_fn)(void *restrict dst, const void *restrict a,
                                 const void *restrict b, size_t n);

/* One allreduce call as the algorithms see it: the buffer is reduced in place. */
typedef struct gcomp_coll {
  gcomp_transport *t;
  uint32_t seq;              /* per-call sequence number, part of every tag */
  size_t esize;              /* bytes per element of the working type */
  gcomp_reduce_fn reduce;    /* dst op= src for the working type */
  gcomp_reduce3_fn reduce3;  /* dst = a op b, or NULL */
  /* The caller's input when it differs from the buffer being reduced (out of place),
   * else NULL. Algorithms that can read it directly do (the ring); the others call
   * gcomp_coll_inplace first. */
  const uint8_t *src;
  /* gcomp_coll_exchange with dst: 1 puts the received data first in the reduction
   * (received op mine, in the scratch, then copied into place: one more pass over the
   * segment), 0 (the default) mine first. Where two ranks both reduce the same pair
   * (recursive doubling) the lower takes 0 and the higher 1: the same kernel on the same
   * operands on both, so min/max of +0 and -0, and NaN payloads, come out the same bits.
   * Only floating-point data needs it (float_data): integer results do not depend on
   * operand order. */
  int recv_first;
  int float_data;
  gcomp_scratch *scratch;    /* receive scratch (gcomp_coll_reserve), owned by the caller */
  size_t seg_bytes;          /* pipeline segment size */
  /* results of at least this many bytes that nobody reads soon may be written with
   * streaming stores (GCOMP_STREAM_BYTES, 0 there is 1 here); 0: never */
  size_t stream_from;
  /* the machine is oversubscribed (more ranks than CPUs): long waits nap (gcomp_idle_naps) */
  int nap;
  gcomp_comm_stats *stats;   /* the call's own figures: wait_s, reduce_s, wire_bytes, ...
                                are added here (merged into the communicator's after it) */
  const struct gcomp_plan_in *plan;   /* the call's cost-model inputs (for sub-choices) */
  const int *world;          /* 0, 1, ..., size-1: the group of all ranks */
  int root;                  /* broadcast: the rank whose buffer is sent */
  /* A broadcast whose shape is compared in its own first round, not agreed on before
   * (call_coll.c: gcomp_call_self_agreeing): shaped, and the call's shape word. When a
   * rank's differed, the run fails with GCOMP_ERR_INVALID on every rank and says which
   * (shape_who, a local rank, else -1; shape_theirs, its word): the communicator is
   * intact and the message is the caller's. */
  int shaped;
  uint64_t shape;
  int shape_who;
  uint64_t shape_theirs;
  gcomp_shm *shm;            /* this node's shared segment, or NULL */
  /* compressed calls only (NULL otherwise) */
  gcomp_codec *codec;        /* the caller's codec: first quantisation, error feedback */
  gcomp_codec *codec2;       /* the same codec without +ef: re-encodes reduced shards */
  uint64_t key;              /* the caller's tensor key */
  gcomp_codec *intra;        /* GCOMP_INTRA_CODEC for hierarchical calls, or NULL (fp32) */
  gcomp_codec *intra2;       /* its second stage */
  struct gcomp_abort *abort; /* the abort notices. watch (abort.h); NULL in internal uses */
  /* nonzero while a pipeline has transfers in flight (reduce/hier_pipe.c): the node's
   * shared-memory rounds and waits drive the transport's progress meanwhile */
  int drive;
  /* out: when nonfinite_counted, the algorithm counted the NaN and Inf of this rank's
   * share of the result (its gcomp_chunk over the ranks), nonfinite_share of them, while
   * the values were in cache: the call need not read its share once more */
  int nonfinite_counted;
  uint64_t nonfinite_share;
} gcomp_coll;

/* Tags: phase (4 bits) | step (12 bits) | segment (16 bits), under the call's seq. */
static inline uint64_t gcomp_coll_tag(const gcomp_coll *c, unsigned phase, unsigned step,
                                      unsigned seg) {
  return gcomp_tag(c->seq, (phase & 0xfu) << 28 | (step & 0xfffu) << 16 | (seg & 0xffffu));
}

/* A scheduled message's tag (fabric/transport.h, GCOMP_TAG_SCHED): both ends of a transfer
 * mark it when the receive's capacity, which both compute alike from the call, is at least
 * GCOMP_COLL_SCHED_MIN bytes. The receiver's posted buffer is then announced to the sender
 * as soon as the receive is posted, and the data moves without a request and grant on its
 * way: post such receives early, and from one peer in the order it sends. */
#define GCOMP_COLL_SCHED_MIN 8192
static inline uint64_t gcomp_coll_stag(const gcomp_coll *c, unsigned phase, unsigned step,
                                       unsigned seg, size_t cap) {
  uint64_t tag = gcomp_coll_tag(c, phase, step, seg);
  return cap >= GCOMP_COLL_SCHED_MIN ? tag | GCOMP_TAG_SCHED : tag;
}

/* Balanced partition of count elements into n chunks: chunk k is [off, off + len). */
static inline void gcomp_chunk(size_t count, int n, int k, size_t *off, size_t *len) {
  size_t base = count / (size_t)n, extra = count % (size_t)n;
  *off = (size_t)k * base + ((size_t)k < extra ? (size_t)k : extra);
  *len = base + ((size_t)k < extra);
}

gcomp_reduce_fn gcomp_reduce_kernel(gcomp_dtype dtype, gcomp_op op);
gcomp_reduce3_fn gcomp_reduce3_kernel(gcomp_dtype dtype, gcomp_op op);

/* Copies c->src into buf (once) so that an algorithm can work in place. */
void gcomp_coll_inplace(gcomp_coll *c, uint8_t *buf, size_t count);
uint64_t gcomp_count_nonfinite_f32(const float *x, size_t n);   /* NaN and Inf */
/* The NaN and Inf among elements [lo, hi) of x that lie in [at, at + len), which a decoder
 * just wrote and counted `tally` NaN and Inf in (gcomp_decode_tally; UINT64_MAX: unknown):
 * none when it counted none, its count when the range holds all of [at, at + len), else
 * read back and counted. */
uint64_t gcomp_nonfinite_within(const float *x, size_t at, size_t len, size_t lo, size_t hi,
                                uint64_t tally);
void gcomp_scale_f32(float *x, size_t n, float divisor);         /* x[i] /= divisor */

/* Grows the call's scratch to at least `bytes` (c->scratch->p, which may move). */
int gcomp_coll_reserve(gcomp_coll *c, size_t bytes);
static inline uint8_t *gcomp_coll_tmp(const gcomp_coll *c) { return c->scratch->p; }

/* Waits for reqs, counting the time as waiting. */
int gcomp_coll_waitall(gcomp_coll *c, int n, gcomp_treq **reqs);

/* Segments one transfer is cut into, at most: bounds the requests (memory) a transfer
 * holds and keeps segment numbers within the tag's 16 bits. The transport needs no budget:
 * any number of messages may be posted in any order (fabric/transport.h). */
#define GCOMP_COLL_MAX_SEGMENTS 4096

/* Elements per segment for count elements that go to one peer: c->seg_bytes / esize, or
 * more where count would need more than GCOMP_COLL_MAX_SEGMENTS. It depends only on its
 * arguments and GCOMP_SEGMENT_BYTES (compared across ranks when a communicator is
 * created), so both ends of a transfer cut alike. */
size_t gcomp_coll_seg_elems(const gcomp_coll *c, size_t count);

/* Sends slen bytes to peer while receiving rlen bytes from it, in pipeline segments.
 * dst != NULL: each received segment is reduced into dst as it lands (via c->tmp): dst op=
 * received, or dst = addend + received when addend is given (out of place, sums only);
 * dst == NULL: segments land at rbuf. */
int gcomp_coll_exchange(gcomp_coll *c, int peer, unsigned phase, unsigned step,
                        const uint8_t *sbuf, size_t slen, uint8_t *rbuf, size_t rlen,
                        uint8_t *dst, const uint8_t *addend);

/* A byte string (a frame). */
typedef struct {
  const uint8_t *p;
  size_t len;
} gcomp_bytes;

#endif /* GCOMP_COLL_CALL_H */
