/* Internal: what the hierarchical reduce_scatter and allgather (reduce/hier_rs.c,
 * reduce/hier_ag.c) share: the placement of the ranks' blocks in the working vector. */
#ifndef GCOMP_COLL_HIER_H
#define GCOMP_COLL_HIER_H

#include "coll.h"

/* The ranks cut into sub-nodes of g ranks each, g the greatest common divisor of the
 * nodes' rank counts (equal nodes: a sub-node is a node), consecutive local ranks of one
 * node in each. Block r of the working vector moves to position pos[r] = (r's index in its
 * sub-node) x nsub + (r's sub-node), so that
 *  - chunk i of the vector cut into g (gcomp_chunk) holds the blocks of the ranks with
 *    index i in every sub-node, in sub-node order: a sub-node's reduce-scatter (or
 *    allgather) over that cut leaves its i-th rank the sub-node's sum of exactly them;
 *  - chunk i cut into nsub is one block per sub-node, block k owned by the i-th rank of
 *    sub-node k: the reduce-scatter (allgather) across the sub-nodes over `cross` hands
 *    every rank its own block. */
typedef struct {
  int g, nsub;         /* ranks per sub-node; sub-nodes */
  int sub, idx;        /* my sub-node, my index in it */
  int whole;           /* a sub-node is a whole node (equal nodes) */
  int identity;        /* pos[r] == r for every rank: nothing to move */
  int *in;             /* [g]: my sub-node's ranks, in local order */
  int *cross;          /* [nsub]: the ranks of my index in every sub-node */
  int *pos;            /* [size] */
} gcomp_hier_blocks;

int gcomp_hier_blocks_make(const gcomp_transport *t, gcomp_hier_blocks *h);
/* Are the blocks in node runs: rank r local rank r % g of sub-node r / g (equal nodes of
 * consecutive ranks, as --map-by slot places them)? Then sub-node k's blocks are one run
 * of the vector in rank order, and a node step over that run alone (g blocks, cut into g)
 * moves the blocks of sub-node k's i-th ranks: shard k of the pieces, none moved. */
int gcomp_hier_blocks_runs(const gcomp_hier_blocks *h);
void gcomp_hier_blocks_free(gcomp_hier_blocks *h);
/* Moves the blocks of buf (block elements each) from rank order to pos[] order (to_pos)
 * or back, in place, a cycle at a time through one block of the call's scratch. */
int gcomp_hier_blocks_move(gcomp_coll *c, const gcomp_hier_blocks *h, uint8_t *buf, size_t block,
                           int to_pos);
/* The ranks per sub-node the planner assumes: the nodes' rank count when they are equal;
 * otherwise 1 (their gcd is not among the model's inputs), so uneven nodes are priced as
 * the flat exchange they may well become. */
int gcomp_hier_blocks_g(const gcomp_plan_in *in);

/* A compressed reduce_scatter's last step: one small exchange over all ranks, so that a
 * rank that found a corrupt frame (and left without joining it) stops the others (its
 * notice, or their timeout and the failure exchange) instead of letting them return. */
int gcomp_rs_settle(gcomp_coll *c);

#endif /* GCOMP_COLL_HIER_H */
