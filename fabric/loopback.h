/* The ranks of an in-process world, shared by the two loopback transports (fabric/loopback.c
 * and the unit tests' tests/support/loopback_constrained.c): each rank is this struct over
 * its implementation's world. */
#ifndef GCOMP_LOOPBACK_H
#define GCOMP_LOOPBACK_H

#include "transport.h"

typedef struct gcomp_lb_rank {
  gcomp_transport pub;
  void *world;
  int *topo;
} gcomp_lb_rank;

/* out[0..size) receive one rank each over world, with ops, the topology of node_of (NULL:
 * one node) and opts->timeout_ms. On failure no rank is left (the world is the caller's). */
int gcomp_lb_ranks_create(int size, const int *node_of, const gcomp_transport_ops *ops,
                          void *world, const gcomp_fabric_opts *opts, gcomp_transport **out);
/* Frees the rank itself (not its world). */
void gcomp_lb_rank_free(gcomp_transport *t);

#endif /* GCOMP_LOOPBACK_H */
