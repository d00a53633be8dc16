/* Broadcast inside one node through the node's shared segment (shm.c). Each round the root
 * copies the next slot's worth of the message into its slot and every other rank copies it
 * out: two copies of the message in all, at any rank count, where the tree and the scatter
 * send it through libfabric's shm provider (a locked queue and a process_vm_readv a message,
 * log2(n) hops down the tree). The rounds are gcomp_shm_allgather_parts': the root's one
 * part is the piece, every other rank's is empty; its double-buffered slots let the root
 * fill round k + 1 while the others still read round k. */
#include <string.h>

#include "coll.h"

typedef struct {
  uint8_t *dst;   /* this round's piece of the caller's buffer */
  size_t len;
  int root;       /* the root's local rank */
} piece;

/* A part of local rank j: the root's is the piece (copied out), the others' are empty. A
 * rank that put something else called with another root or count than this one. */
static int take(void *arg, int j, int k, const uint8_t *p, size_t len) {
  piece *pc = arg;
  (void)k;
  size_t want = j == pc->root ? pc->len : 0;
  GCOMP_FAIL_IF(len != want, GCOMP_ERR_INVALID,
                "broadcast:shm: local rank %d put %zu bytes where %zu were expected: do all "
                "ranks pass the same root and count?", j, len, want);
  if (len) memcpy(pc->dst, p, len);
  return GCOMP_OK;
}

static int shm_run(gcomp_coll *c, uint8_t *buf, size_t count) {
  const gcomp_transport *t = c->t;
  c->shape_who = -1;
  /* a shaped call's first round is its agreement: it runs at count 0 too */
  if (t->size == 1 || (count == 0 && !c->shaped)) return GCOMP_OK;
  GCOMP_FAIL_IF(!c->shm || t->nnodes != 1, GCOMP_ERR_INVALID,
                "broadcast:shm: needs one node with a shared segment (%d nodes)", t->nnodes);
  int root = -1;
  for (int i = 0; i < t->local_size; i++)
    if (t->local_ranks[i] == c->root) root = i;
  GCOMP_FAIL_IF(root < 0, GCOMP_ERR_INVALID, "broadcast:shm: root %d is not on this node",
                c->root);
  const int me_root = t->local_rank == root;
  static uint8_t none[1];
  if (!buf) buf = none;   /* a shaped call of no elements (its buffer may be NULL) */
  /* A message of at most a slot is one piece (its header has room of its own, shm_seg.h).
   * A longer one goes in pieces of a slot less 64 bytes, as before the header had room:
   * pieces of a whole 1 MiB slot made a 16 MiB broadcast of 4 ranks 1.7-2x slower
   * (gcomp-bench: 3.3-4.9 ms against 1.9-2.3 ms with a 1 MiB - 64 B slot; cause not found) */
  const size_t slot = gcomp_shm_slot_bytes(c->shm), bytes = count * c->esize;
  const size_t step = bytes <= slot ? slot : slot - 64;
  for (size_t at = 0; at < bytes || (at == 0 && c->shaped); at += step) {
    piece pc = {buf + at, bytes - at < step ? bytes - at : step, root};
    gcomp_bytes part = {pc.dst, me_root ? pc.len : 0};   /* never NULL: memcpy's source */
    int all_in = 0;
    if (c->shaped)   /* the ranks' shapes were not compared before: every round compares */
      GCOMP_CHECK(gcomp_shm_shaped_parts(c, c->shm, &part, 1, c->shape, take, &pc, &all_in,
                                         &c->shape_who, &c->shape_theirs));
    else
      GCOMP_CHECK(gcomp_shm_allgather_parts(c, c->shm, &part, 1, count, take, &pc, &all_in));
    /* a piece always fits the root's slot: not in it means another rank's part did not */
    GCOMP_FAIL_IF(!all_in, GCOMP_ERR_INVALID,
                  "broadcast:shm: a rank's part did not fit its slot: do all ranks pass the "
                  "same root and count?");
  }
  return GCOMP_OK;
}

/* a copy in at the root and one out at the others, overlapped by the double buffering:
 * about half the segment allreduce's copies and sums */
static double shm_cost(const gcomp_plan_in *in) {
  double c = gcomp_cost_shm(in);
  return c < 0 ? c : 0.5 * c;
}

const gcomp_algo gcomp_algo_bcast_shm = {
    "broadcast:shm", "one node: the root's pieces through the shared segment, one copy in and one out",
    shm_run, shm_cost, 0, GCOMP_COLL_BROADCAST};
