/* Internal: who am I (rank discovery from GCOMP_* or launcher variables, bootstrap.c) and
 * the TCP rendezvous that exchanges fabric addresses among the job's ranks (rendezvous*.c). */
#ifndef GCOMP_BOOTSTRAP_H
#define GCOMP_BOOTSTRAP_H

#include "transport.h"

typedef struct {
  int rank, size;
  int local_rank;            /* -1 when no variable gives it (derived from the topology) */
  char node_id[128];         /* GCOMP_NODE_ID, else the host name */
  char root_host[256];       /* rendezvous; empty when size == 1 */
  int root_port;
  char token[256];           /* GCOMP_JOB_TOKEN ("" when unset) */
  const char *source;        /* "GCOMP", "torchrun", "Open MPI", "PMI", "Slurm", "default" */
} gcomp_boot_env;

/* Looks a variable up; NULL when unset. */
typedef const char *(*gcomp_env_lookup)(const char *name, void *ctx);

/* Parses the variables through lookup. NULL: the real environment's, but for GCOMP_NODE_ID,
 * a communicator's setting, which is then ctx (a string; NULL: unset). hostname is the node
 * identity when GCOMP_NODE_ID is not given (NULL: gethostname).
 * GCOMP_ERR_BOOTSTRAP names the variable that is missing or malformed. */
int gcomp_boot_env_parse(gcomp_env_lookup lookup, void *ctx, const char *hostname,
                         gcomp_boot_env *out);

/* Meets the other ranks at env->root_host:root_port (rank 0 listens there). Every rank must
 * present env->token; strangers, wrong tokens and duplicate ranks are refused and logged.
 * Gives up with GCOMP_ERR_TIMEOUT after timeout_ms, naming the ranks that never came. */
int gcomp_rendezvous_open(const gcomp_boot_env *env, int timeout_ms, gcomp_oob **out);

#endif /* GCOMP_BOOTSTRAP_H */
