/* Internal: a node's shared-memory segment and the collectives over it (reduce/shm.c).
 * Part of coll.h. */
#ifndef GCOMP_SHM_H
#define GCOMP_SHM_H

#include "coll_call.h"

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
/* A single-node communicator's all-to-all: block j (count / size elements) of the input goes
 * to rank j, block i of buf comes from rank i. */
int gcomp_shm_alltoall(gcomp_coll *c, gcomp_shm *s, uint8_t *buf, size_t count);
/* One round of the node's ranks with no data: a barrier of a single-node communicator.
 * These four run one round at least when c->shaped, at count 0 too: it compares the ranks'
 * shapes (call_coll.c: gcomp_call_self_agreeing). */
int gcomp_shm_barrier(gcomp_coll *c, gcomp_shm *s);
/* The reduce-scatter's rounds with the reduction left to fn: for each round's piece of
 * this rank's shard (elements [at, at + n) of the shard) fn(arg, at, n, src, L) gets the
 * node's L operands of it in local rank order (its own: the input in; the others' in their
 * slots, valid during the call), for fp32 elements only; nothing is written to any
 * output. fn's failure ends the rounds and is returned. */
typedef int (*gcomp_shm_sum_fn)(void *arg, size_t at, size_t n, const float *const *src, int L);
int gcomp_shm_reduce_scatter_parts(gcomp_coll *c, gcomp_shm *s, const uint8_t *in, size_t count,
                                   gcomp_shm_sum_fn fn, void *arg);
/* An allgather of byte strings in one round: every local rank puts nparts parts (a
 * pipeline slice's codec frames) into its slot (with room for their lengths beside it: a
 * single part of gcomp_shm_slot_bytes fits), and fn(arg, j, k, p, len) is called for
 * part k of every other local rank j, in rank order, while its slot is held; then
 * *all_in = 1. When some rank's parts did not fit its slot, fn is called for none and
 * *all_in = 0 on every rank alike. count (the elements the parts stand for) is compared
 * across ranks like any call's shape. */
typedef int (*gcomp_shm_part_fn)(void *arg, int j, int k, const uint8_t *p, size_t len);
int gcomp_shm_allgather_parts(gcomp_coll *c, gcomp_shm *s, const gcomp_bytes *part, int nparts,
                              size_t count, gcomp_shm_part_fn fn, void *arg, int *all_in);
/* gcomp_shm_allgather_parts' round for a call that compares its shape in it instead of
 * agreeing on it before (a broadcast on one node, call_coll.c): shape, a word below 2^61,
 * stands for the call. When some rank's differs, every rank sees it in this same round
 * and fails it alike with GCOMP_ERR_INVALID and no message (the caller's), fn called for
 * none, *who the first local rank whose shape differs and *theirs its shape; the segment
 * stays usable. *who is -1 when no shape differed. */
int gcomp_shm_shaped_parts(gcomp_coll *c, gcomp_shm *s, const gcomp_bytes *part, int nparts,
                           uint64_t shape, gcomp_shm_part_fn fn, void *arg, int *all_in,
                           int *who, uint64_t *theirs);
/* Local rank j's nparts parts in its slot of slot_bytes, as gcomp_shm_allgather_parts
 * wrote them, each to fn: GCOMP_ERR_CORRUPT when a length leaves the slot, else fn's
 * first failure. */
int gcomp_shm_parts_read(const uint8_t *slot, size_t slot_bytes, int j, int nparts,
                         gcomp_shm_part_fn fn, void *arg);

#endif /* GCOMP_SHM_H */
