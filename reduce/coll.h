/* Internal: the machinery every allreduce algorithm shares — groups of ranks, the call
 * context, element-wise reduction kernels, and the algorithm table. */
#ifndef GCOMP_COLL_H
#define GCOMP_COLL_H

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

/* Dense building blocks over a group (reduce/ring.c, reduce/rhd.c). phase separates the
 * tags of sub-collectives within one call (0..15). A ring's step is 12 bits of the tag: it
 * serves groups of at most GCOMP_RING_MAX_RANKS, and the planner prices it only there. */
#define GCOMP_RING_MAX_RANKS 4096
int gcomp_ring_reduce_scatter(gcomp_coll *c, const gcomp_group *g, uint8_t *buf, size_t count,
                              unsigned phase);
int gcomp_ring_allgather(gcomp_coll *c, const gcomp_group *g, uint8_t *buf, size_t count,
                         unsigned phase);
int gcomp_ring_allreduce(gcomp_coll *c, const gcomp_group *g, uint8_t *buf, size_t count,
                         unsigned phase);
int gcomp_rhd_allreduce(gcomp_coll *c, const gcomp_group *g, uint8_t *buf, size_t count,
                        unsigned phase);
int gcomp_rd_allreduce(gcomp_coll *c, const gcomp_group *g, uint8_t *buf, size_t count,
                       unsigned phase);

/* Compressed building blocks over a group (reduce/direct.c, reduce/sparse.c): buf holds
 * fp32 values; key_salt separates the error-feedback slots of sub-collectives. */
int gcomp_direct_allreduce(gcomp_coll *c, const gcomp_group *g, float *buf, size_t count,
                           unsigned phase, uint64_t key_salt);
/* Its two halves, with any codec: after the reduce-scatter, shard g->me of buf (the
 * gcomp_chunk partition) holds the fp32 sum of the decoded contributions. */
int gcomp_direct_reduce_scatter(gcomp_coll *c, const gcomp_group *g, float *buf, size_t count,
                                unsigned phase, uint64_t key_salt, gcomp_codec *codec);
/* The allgather encodes the owner's shard once (key_salt keys its error feedback, for a
 * second stage that keeps one: the owner's residual per tensor and shard). */
int gcomp_direct_allgather(gcomp_coll *c, const gcomp_group *g, float *buf, size_t count,
                           unsigned phase, uint64_t key_salt, gcomp_codec *codec);
int gcomp_sparse_allreduce(gcomp_coll *c, const gcomp_group *g, float *buf, size_t count,
                           unsigned phase, uint64_t key_salt);

/* A byte string (a frame). */
typedef struct {
  const uint8_t *p;
  size_t len;
} gcomp_bytes;

/* The direct exchange in steps, so that several can be in flight at once (hier's pipeline):
 * init lays out the frames (x->bytes of scratch, which the caller points x->mem at); then
 * post_rs, send_rs, reduce (the reduce-scatter with rs_codec: after it shard g->me of buf
 * holds the sum), post_ag, send_ag, gather (the allgather with ag_codec), each in that
 * order, the receives of a half posted before anything of it is sent; end waits for the
 * sends (st == GCOMP_OK) or cancels everything left, and frees. A half whose codec is NULL
 * has no frames. The reduce-scatter's messages take tag step `step`, the allgather's
 * step + 1; key_salt keys both halves' error feedback as gcomp_direct_allgather says. */
typedef struct {
  const gcomp_group *g;
  float *buf;
  size_t count;
  unsigned phase, step;
  uint64_t key_salt;
  gcomp_codec *rs_codec, *ag_codec;
  uint8_t *mem;              /* the frames: x->bytes */
  size_t bytes, in_cap;
  size_t *off;               /* [3n + 1]: to the owners | my shard received | allgathered */
  gcomp_treq **reqs;         /* [4n]: reduce-scatter sends, receives; allgather's alike */
  size_t mine_len, red_len;  /* my own shard's frame; my reduced shard's frame */
  size_t *ag_len;            /* [n]: each allgathered frame's bytes (gcomp_dx_gather) */
  /* gather, as the caller set them after init: stream, every shard decoded with streaming
   * stores (nobody reads it soon); nonfinite, the NaN and Inf it wrote to buf[share_lo,
   * share_hi), counted by the decoders where they can (gcomp_nonfinite_within) */
  int stream;
  size_t share_lo, share_hi;
  uint64_t nonfinite;
} gcomp_dx;
int gcomp_dx_init(gcomp_dx *x, const gcomp_group *g, float *buf, size_t count, unsigned phase,
                  unsigned step, uint64_t key_salt, gcomp_codec *rs_codec, gcomp_codec *ag_codec);
int gcomp_dx_post_rs(gcomp_coll *c, gcomp_dx *x);
int gcomp_dx_send_rs(gcomp_coll *c, gcomp_dx *x);
int gcomp_dx_reduce(gcomp_coll *c, gcomp_dx *x);
int gcomp_dx_post_ag(gcomp_coll *c, gcomp_dx *x);
int gcomp_dx_send_ag(gcomp_coll *c, gcomp_dx *x);
int gcomp_dx_gather(gcomp_coll *c, gcomp_dx *x);
/* send_rs with the sum of buf not stored but fed, a part at a time, to the shards' encoders
 * (gcomp_encode_sum_*): gcomp_dx_feed_part is a gcomp_shm_sum_fn over the node's operands of
 * buf's elements (the node's reduce-scatter: buf stands for their sum, and is not read),
 * and sends each shard when its parts are in; feed_end after the last part. Only when
 * gcomp_dx_feed_ok (fp32 sums, a codec that encodes in parts, at most
 * GCOMP_DX_FEED_SRC operands). The frames and residuals are send_rs's of the sum. */
enum { GCOMP_DX_FEED_SRC = 16 };
typedef struct {
  gcomp_coll *c;
  gcomp_dx *x;
  int j, open;       /* the shard being encoded (open), or the next */
  size_t at, end;    /* elements fed; where shard j ends */
} gcomp_dx_feed;
int gcomp_dx_feed_ok(const gcomp_coll *c, const gcomp_dx *x, int nsrc);
int gcomp_dx_feed_part(void *arg, size_t at, size_t n, const float *const *src, int nsrc);
int gcomp_dx_feed_end(gcomp_dx_feed *f);
/* reduce and send_ag at once: the contributions decoded a part at a time and re-encoded
 * from cache, the sum never stored in buf (only when gcomp_dx_fold_ok: both codecs code
 * in parts; the same frames and residuals as reduce then send_ag). */
int gcomp_dx_fold_ok(const gcomp_dx *x);
int gcomp_dx_fold(gcomp_coll *c, gcomp_dx *x);
/* After gcomp_dx_gather: part[r] = the frame of shard r it decoded (n parts). */
void gcomp_dx_frames(const gcomp_dx *x, gcomp_bytes *part);
int gcomp_dx_end(gcomp_coll *c, gcomp_dx *x, int st);

/* hier-direct over equal nodes with a shared segment, cut into slices that flow through
 * the node's reduce-scatter, the exchange across nodes and the node's allgather at once
 * (reduce/hier_pipe.c); cross: my group across the nodes (my local index on each). */
int gcomp_hier_direct_pipelined(gcomp_coll *c, const gcomp_group *cross, uint8_t *buf,
                                size_t count, int nslices);
/* The slices it cuts count elements into (1: no pipeline). */
int gcomp_hier_pipe_slices(const gcomp_coll *c, size_t count);
/* The error-feedback key of shard `part` of tensor `key`. */
uint64_t gcomp_shard_key(uint64_t key, uint64_t salt, int part);

/* The shared-memory allreduce (reduce/shm.c). gcomp_shm_create is collective over the
 * node's ranks and leaves *out NULL (with a warning) when the node cannot have a segment. */
int gcomp_shm_create(gcomp_transport *t, size_t slot_bytes, gcomp_shm **out);
void gcomp_shm_destroy(gcomp_shm *s);
size_t gcomp_shm_slot_bytes(const gcomp_shm *s);
/* All ranks of a single-node communicator; buf as for any algorithm (c->src: the input). */
int gcomp_shm_allreduce(gcomp_coll *c, gcomp_shm *s, uint8_t *buf, size_t count);
/* The node's ranks only (any placement): after the reduce-scatter, shard local_rank of buf
 * (the gcomp_chunk partition over local_size) holds the node's reduction of it (input:
 * c->src when set, else buf); the allgather copies every local rank's shard into all. */
int gcomp_shm_reduce_scatter(gcomp_coll *c, gcomp_shm *s, uint8_t *buf, size_t count);
int gcomp_shm_allgather(gcomp_coll *c, gcomp_shm *s, uint8_t *buf, size_t count);
/* The reduce-scatter's rounds with the reduction left to fn: for each round's piece of
 * this rank's shard (elements [at, at + n) of the shard) fn(arg, at, n, src, L) gets the
 * node's L operands of it in local rank order (its own: the input in; the others' in their
 * slots, valid during the call), for fp32 elements only; nothing is written to any
 * output. fn's failure ends the rounds and is returned. */
typedef int (*gcomp_shm_sum_fn)(void *arg, size_t at, size_t n, const float *const *src, int L);
int gcomp_shm_reduce_scatter_parts(gcomp_coll *c, gcomp_shm *s, const uint8_t *in, size_t count,
                                   gcomp_shm_sum_fn fn, void *arg);
/* An allgather of byte strings in one round: every local rank puts nparts parts (a
 * pipeline slice's codec frames) into its slot, and fn(arg, j, k, p, len) is called for
 * part k of every other local rank j, in rank order, while its slot is held; then
 * *all_in = 1. When some rank's parts did not fit its slot, fn is called for none and
 * *all_in = 0 on every rank alike. count (the elements the parts stand for) is compared
 * across ranks like any call's shape. */
typedef int (*gcomp_shm_part_fn)(void *arg, int j, int k, const uint8_t *p, size_t len);
int gcomp_shm_allgather_parts(gcomp_coll *c, gcomp_shm *s, const gcomp_bytes *part, int nparts,
                              size_t count, gcomp_shm_part_fn fn, void *arg, int *all_in);
/* Local rank j's nparts parts in its slot of slot_bytes, as gcomp_shm_allgather_parts
 * wrote them, each to fn: GCOMP_ERR_CORRUPT when a length leaves the slot, else fn's
 * first failure. */
int gcomp_shm_parts_read(const uint8_t *slot, size_t slot_bytes, int j, int nparts,
                         gcomp_shm_part_fn fn, void *arg);

/* ---- the algorithm table -------------------------------------------------------------- */
typedef struct {
  double alpha_s;    /* latency per message */
  double beta_spb;   /* seconds per byte */
} gcomp_link;

typedef struct gcomp_plan_in {
  int kind;             /* gcomp_coll_kind: only that collective's algorithms are priced */
  size_t bytes;         /* payload of the call: the working vector's bytes (gcomp_coll_kind) */
  int n;                /* ranks */
  int nnodes, local;    /* placement: nodes and ranks per node (0 when uneven) */
  /* uneven nodes (local == 0): the fewest and most ranks on a node, and the pieces hier
   * cuts a long vector into (gcomp_hier_placement); 0 when not known */
  int local_min, local_max, pieces;
  gcomp_link intra, inter;
  double gamma_spb;     /* reduction seconds per byte */
  /* the shared-memory allreduce of a single-node communicator: seconds per round and per
   * byte, measured at creation; shm_alpha == 0 when there is none */
  double shm_alpha, shm_spb;
  size_t shm_slot;      /* bytes per round */
  /* compressed calls: 0 when the call is not compressed */
  double ratio;         /* wire bytes / fp32 bytes of the codec (from its size bound) */
  double codec_spb;     /* encode + decode seconds per fp32 byte */
  int sparse;           /* the codec is top-k: its frames can be summed without re-encoding */
} gcomp_plan_in;

typedef struct {
  const char *name;
  const char *desc;
  /* runs the allreduce over all ranks of c->t on buf (count elements), in place */
  int (*run)(gcomp_coll *c, uint8_t *buf, size_t count);
  /* predicted seconds; < 0 when the algorithm cannot serve this call */
  double (*cost)(const gcomp_plan_in *in);
  int compressed;   /* runs the codec (needs c->codec) */
  int kind;         /* the collective it serves (gcomp_coll_kind; 0: allreduce) */
} gcomp_algo;

const gcomp_algo *gcomp_algo_find(const char *name);
/* GCOMP_ALGO's text into forced[GCOMP_COLL_KINDS] (NULL: the planner's choice): "auto", or
 * a comma-separated list of NAME (an allreduce algorithm) and COLLECTIVE=NAME items, the
 * latter naming table entry "COLLECTIVE:NAME" ("allgather=ring,reduce_scatter=direct");
 * GCOMP_ERR_INVALID names a bad item. */
int gcomp_algo_parse(const char *text, const gcomp_algo **forced);
const char *gcomp_algo_names(void);

/* Link figures from text ("intra_us,intra_GBps,inter_us,inter_GBps[,shm_us,shm_GBps]",
 * GCOMP_ALPHA_BETA's and gcomp-plan's format) into m; what names the source in errors.
 * Sets gamma to 8 GB/s. */
int gcomp_plan_parse_links(const char *text, const char *what, gcomp_plan_in *m);

/* Picks the cheapest algorithm for the call (or the GCOMP_ALGO override) and logs the
 * estimates under the tuning subsystem. */
const gcomp_algo *gcomp_plan_pick(const gcomp_plan_in *in, const gcomp_algo *forced);

/* hier's view of a placement: the fewest and most ranks on a node, and how many pieces
 * the nodes' chunk boundaries cut a long vector into (more than hier takes: 17). */
int gcomp_hier_placement(const gcomp_transport *t, int *local_min, int *local_max, int *pieces);

/* Model costs of the compressed blocks (reduce/cost.c). */
double gcomp_cost_direct(int n, double bytes, gcomp_link l, const gcomp_plan_in *in);
double gcomp_cost_sparse(int n, double bytes, gcomp_link l, const gcomp_plan_in *in);

/* The link a flat algorithm runs at the pace of (the inter-node one when it crosses nodes),
 * and that link shared by every rank of a node at once (all-to-all steps). */
gcomp_link gcomp_cost_flat_link(const gcomp_plan_in *in);
gcomp_link gcomp_cost_shared_link(const gcomp_plan_in *in);
/* The single-node shared-memory allreduce; < 0 when it cannot serve the call. */
double gcomp_cost_shm(const gcomp_plan_in *in);

/* Model costs of the building blocks (reduce/cost.c), shared by the algorithms' costs. */
double gcomp_cost_ring(int n, double bytes, gcomp_link l, double gamma);
double gcomp_cost_rhd(int n, double bytes, gcomp_link l, double gamma);
double gcomp_cost_rd(int n, double bytes, gcomp_link l, double gamma);

#endif /* GCOMP_COLL_H */
