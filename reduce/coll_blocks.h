/* Internal: the building blocks the algorithms are made of, over a group of ranks: dense
 * (ring, halving/doubling, doubling), compressed (direct exchange, whole or in steps, and
 * sparse), and hier's pipeline. Part of coll.h. */
#ifndef GCOMP_COLL_BLOCKS_H
#define GCOMP_COLL_BLOCKS_H

#include "coll_call.h"

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
/* reduce_scatter by recursive halving and allgather by recursive doubling (reduce/rhd_coll.c):
 * block i of buf (the gcomp_chunk partition over the group) is rank i's, any group size. */
int gcomp_rhd_reduce_scatter(gcomp_coll *c, const gcomp_group *g, uint8_t *buf, size_t count,
                             unsigned phase);
int gcomp_rhd_allgather(gcomp_coll *c, const gcomp_group *g, uint8_t *buf, size_t count,
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
  /* as the caller set it after init: 0, shard j is buf's gcomp_chunk j; else shard j starts
   * at buf + j * stride (count a multiple of n: shards of equal length, gaps between them
   * left alone) */
  size_t stride;
  /* as the caller set it after init (a reduce-scatter fed by the node's rounds, stride 0):
   * my own shard's contribution is not encoded; the feed stores its fp32 sum in buf's shard
   * g->me and reduce adds the others' decoded contributions to it. Only the owner ever
   * holds that sum, so nothing asks for it to be quantised: an encode and a decode of a
   * shard less a call, and the owner's own share of the sum exact. */
  int own_exact;
} gcomp_dx;
int gcomp_dx_init(gcomp_dx *x, const gcomp_group *g, float *buf, size_t count, unsigned phase,
                  unsigned step, uint64_t key_salt, gcomp_codec *rs_codec, gcomp_codec *ag_codec);
int gcomp_dx_post_rs(gcomp_coll *c, gcomp_dx *x);
int gcomp_dx_send_rs(gcomp_coll *c, gcomp_dx *x);
int gcomp_dx_reduce(gcomp_coll *c, gcomp_dx *x);
int gcomp_dx_post_ag(gcomp_coll *c, gcomp_dx *x);
int gcomp_dx_send_ag(gcomp_coll *c, gcomp_dx *x);
int gcomp_dx_gather(gcomp_coll *c, gcomp_dx *x);
/* gather's step for shard r alone (waiting for its frame unless it is mine), in an order
 * of the caller's: every shard once, after send_ag */
int gcomp_dx_gather_one(gcomp_coll *c, gcomp_dx *x, int r);
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
/* Shard by shard instead, in any order: feed_shard(j), j's parts at their offsets in buf,
 * then feed_sent(j) checks that they filled it (it is on its way) */
int gcomp_dx_feed_shard(gcomp_dx_feed *f, int j);
int gcomp_dx_feed_sent(const gcomp_dx_feed *f, int j);
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

#endif /* GCOMP_COLL_BLOCKS_H */
