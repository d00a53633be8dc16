/* Internal: communicators over any transport (the libfabric one, or the in-process
 * loopback used by unit tests and the convergence simulator). */
#ifndef GCOMP_COMM_H
#define GCOMP_COMM_H

#include "gcomp.h"
#include "gcomp_common.h"
#include "transport.h"

/* Wraps a transport (taking ownership when own != 0; on failure the caller keeps it) into a
 * communicator with a copy of the settings `set` (NULL: the environment's). Collective over
 * the transport's ranks: it calibrates the cost model (unless GCOMP_ALPHA_BETA is set) and
 * agrees on the settings that must be equal everywhere. */
int gcomp_comm_create(gcomp_transport *t, int own, const gcomp_settings *set, gcomp_comm **out);
/* gcomp_comm_create with the environment's settings. */
int gcomp_comm_from_transport(gcomp_transport *t, int own, gcomp_comm **out);

/* What the transport of a communicator with the settings `set` takes from them (the
 * environment's: gcomp_config_settings(NULL)). The strings point into set. */
void gcomp_fabric_opts_from(const gcomp_settings *set, gcomp_fabric_opts *out);

/* The algorithm the planner would run for a call of `bytes` (after GCOMP_ALGO). */
const char *gcomp_comm_plan_name(gcomp_comm *comm, size_t bytes);

#endif /* GCOMP_COMM_H */
