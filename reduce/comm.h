/* Internal: communicators over any transport (the libfabric one, or the in-process
 * loopback used by unit tests and the convergence simulator). */
#ifndef GCOMP_COMM_H
#define GCOMP_COMM_H

#include "gcomp.h"
#include "transport.h"

/* Wraps a transport (taking ownership when own != 0) into a communicator. Collective over
 * the transport's ranks: it calibrates the cost model (unless GCOMP_ALPHA_BETA is set). */
int gcomp_comm_from_transport(gcomp_transport *t, int own, gcomp_comm **out);

gcomp_transport *gcomp_comm_transport(gcomp_comm *comm);

/* The algorithm the planner would run for a call of `bytes` (after GCOMP_ALGO). */
const char *gcomp_comm_plan_name(gcomp_comm *comm, size_t bytes);

/* The algorithm the last gcomp_allreduce on this communicator ran ("" before any). */
const char *gcomp_comm_last_algo(const gcomp_comm *comm);

#endif /* GCOMP_COMM_H */
