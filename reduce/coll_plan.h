/* Internal: the algorithm table (reduce/coll_algos.c), the planner's inputs and choice
 * (reduce/plan.c), and the cost model's pieces (reduce/cost.c). Part of coll.h. */
#ifndef GCOMP_COLL_PLAN_H
#define GCOMP_COLL_PLAN_H

#include "coll_call.h"

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
/* the flat ring over in's placement: intra- and inter-node hops (cost.c) */
double gcomp_cost_ring_nodes(const gcomp_plan_in *in);
double gcomp_cost_rhd(int n, double bytes, gcomp_link l, double gamma);
double gcomp_cost_rd(int n, double bytes, gcomp_link l, double gamma);

#endif /* GCOMP_COLL_PLAN_H */
