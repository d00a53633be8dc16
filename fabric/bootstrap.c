/* Rank discovery: who this process is in the job (rank, size, local rank, node) and where
 * the job meets (the rendezvous address and token), from GCOMP_* variables or those of the
 * launcher that started it (torchrun, Open MPI, PMI, Slurm). The meeting itself is
 * rendezvous.c. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bootstrap.h"
#include "gcomp_common.h"
#include "rendezvous.h"

/* ---- environment ---------------------------------------------------------------------- */

/* GCOMP_NODE_ID is a communicator's setting: ctx, its caller's. The other GCOMP_* variables
 * read here are the launcher's, which are the process's: from the registry. */
static const char *env_lookup_real(const char *name, void *ctx) {
  if (strcmp(name, "GCOMP_NODE_ID") == 0) return ctx;
  if (strncmp(name, "GCOMP_", 6) == 0) {
    int id = gcomp_param_lookup(name);
    return id >= 0 && gcomp_param_is_set((gcomp_param_id)id) ? gcomp_param_str((gcomp_param_id)id)
                                                              : NULL;
  }
  return gcomp_env_foreign(name);
}

static int parse_int_var(const char *name, const char *text, long lo, long hi, int *out) {
  char *end = NULL;
  errno = 0;
  long v = strtol(text, &end, 10);
  int none = end == text;
  while (end && isspace((unsigned char)*end)) end++;   /* as the parameter registry reads it */
  GCOMP_FAIL_IF(errno || none || *end != '\0' || v < lo || v > hi, GCOMP_ERR_BOOTSTRAP,
                "%s='%s' is not an integer in [%ld, %ld]", name, text, lo, hi);
  *out = (int)v;
  return GCOMP_OK;
}

/* GCOMP_RANK, GCOMP_SIZE, GCOMP_LOCAL_RANK set to -1, their documented default, mean unset */
static const char *unless_default(const char *text) {
  if (!text) return NULL;
  char *end = NULL;
  long v = strtol(text, &end, 10);
  while (end && isspace((unsigned char)*end)) end++;
  return end != text && *end == '\0' && v == -1 ? NULL : text;
}

typedef struct {
  const char *source, *rank, *size, *local_rank;
} launcher_vars;

static const launcher_vars launchers[] = {
    {"GCOMP", "GCOMP_RANK", "GCOMP_SIZE", "GCOMP_LOCAL_RANK"},
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK"},
    {"Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
    {"PMI", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID"},
    {"Slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"},
};

/* "host:port", "[v6addr]:port" */
static int parse_hostport(const char *name, const char *text, char *host, size_t host_size,
                          int *port) {
  const char *colon;
  size_t hl;
  if (text[0] == '[') {
    const char *close = strchr(text, ']');
    GCOMP_FAIL_IF(!close || close[1] != ':', GCOMP_ERR_BOOTSTRAP,
                  "%s='%s' is not [address]:port", name, text);
    colon = close + 1;
    text++;
    hl = (size_t)(close - text);
  } else {
    colon = strrchr(text, ':');
    GCOMP_FAIL_IF(!colon, GCOMP_ERR_BOOTSTRAP, "%s='%s' is not host:port", name, text);
    hl = (size_t)(colon - text);
  }
  GCOMP_FAIL_IF(hl == 0 || hl >= host_size, GCOMP_ERR_BOOTSTRAP, "%s='%s': bad host part", name,
                text);
  memcpy(host, text, hl);
  host[hl] = '\0';
  return parse_int_var(name, colon + 1, 1, 65535, port);
}

int gcomp_boot_env_parse(gcomp_env_lookup lookup, void *ctx, const char *hostname,
                         gcomp_boot_env *out) {
  GCOMP_FAIL_IF(!out, GCOMP_ERR_INVALID, "gcomp_boot_env_parse: NULL output");
  if (!lookup) lookup = env_lookup_real;
  memset(out, 0, sizeof *out);
  out->rank = 0;
  out->size = 1;
  out->local_rank = -1;
  out->source = "default";

  /* the first launcher whose rank variable is set supplies rank, size and local rank;
   * GCOMP_* override each one individually */
  const launcher_vars *use = NULL;
  for (size_t i = 1; i < sizeof launchers / sizeof launchers[0] && !use; i++)
    if (lookup(launchers[i].rank, ctx)) use = &launchers[i];
  if (use) {
    const char *r = lookup(use->rank, ctx), *s = lookup(use->size, ctx);
    GCOMP_FAIL_IF(!s, GCOMP_ERR_BOOTSTRAP, "%s is set (%s launcher) but %s is not", use->rank,
                  use->source, use->size);
    GCOMP_CHECK(parse_int_var(use->rank, r, 0, 1 << 20, &out->rank));
    GCOMP_CHECK(parse_int_var(use->size, s, 1, 1 << 20, &out->size));
    const char *l = lookup(use->local_rank, ctx);
    if (l) GCOMP_CHECK(parse_int_var(use->local_rank, l, 0, 1 << 20, &out->local_rank));
    out->source = use->source;
  }
  const launcher_vars *g = &launchers[0];
  const char *gr = unless_default(lookup(g->rank, ctx)), *gs = unless_default(lookup(g->size, ctx)),
             *gl = unless_default(lookup(g->local_rank, ctx));
  if (gr) GCOMP_CHECK(parse_int_var(g->rank, gr, 0, 1 << 20, &out->rank));
  if (gs) GCOMP_CHECK(parse_int_var(g->size, gs, 1, 1 << 20, &out->size));
  if (gl) GCOMP_CHECK(parse_int_var(g->local_rank, gl, 0, 1 << 20, &out->local_rank));
  if (gr || gs) out->source = "GCOMP";
  GCOMP_FAIL_IF(gr && !gs && !use, GCOMP_ERR_BOOTSTRAP, "GCOMP_RANK is set but GCOMP_SIZE is not");
  /* without it every process would be rank 0 of the job */
  GCOMP_FAIL_IF(gs && !gr && !use && out->size > 1, GCOMP_ERR_BOOTSTRAP,
                "GCOMP_SIZE is set but GCOMP_RANK is not");
  GCOMP_FAIL_IF(out->rank >= out->size, GCOMP_ERR_BOOTSTRAP,
                "rank %d is not below size %d (from %s variables)", out->rank, out->size,
                out->source);

  const char *node = lookup("GCOMP_NODE_ID", ctx);
  if (node && *node) {
    GCOMP_FAIL_IF(strlen(node) >= sizeof out->node_id, GCOMP_ERR_BOOTSTRAP,
                  "GCOMP_NODE_ID is longer than %zu characters", sizeof out->node_id - 1);
    strcpy(out->node_id, node);
  } else if (hostname) {
    snprintf(out->node_id, sizeof out->node_id, "%s", hostname);
  } else {
    GCOMP_FAIL_IF(gethostname(out->node_id, sizeof out->node_id - 1) != 0, GCOMP_ERR_BOOTSTRAP,
                  "gethostname failed: %s", strerror(errno));
  }

  const char *root = lookup("GCOMP_ROOT", ctx);
  const char *maddr = lookup("MASTER_ADDR", ctx), *mport = lookup("MASTER_PORT", ctx);
  if (root && *root) {
    GCOMP_CHECK(parse_hostport("GCOMP_ROOT", root, out->root_host, sizeof out->root_host,
                               &out->root_port));
  } else if (maddr && mport) {
    GCOMP_FAIL_IF(strlen(maddr) >= sizeof out->root_host, GCOMP_ERR_BOOTSTRAP,
                  "MASTER_ADDR is too long");
    strcpy(out->root_host, maddr);
    /* MASTER_PORT itself is torch's: torchrun's agent (or init_process_group) already runs
     * its store there, so gcomp meets on the next port */
    GCOMP_CHECK(parse_int_var("MASTER_PORT", mport, 1, 65534, &out->root_port));
    out->root_port++;
  } else if (out->size > 1) {
    GCOMP_FAIL(GCOMP_ERR_BOOTSTRAP,
               "rank %d of %d (from %s variables): no rendezvous address; set GCOMP_ROOT=host:port "
               "or MASTER_ADDR and MASTER_PORT (gcomp-run sets them)",
               out->rank, out->size, out->source);
  }
  const char *tok = lookup("GCOMP_JOB_TOKEN", ctx);
  if (tok) {
    GCOMP_FAIL_IF(strlen(tok) > RV_MAX_TOKEN, GCOMP_ERR_BOOTSTRAP,
                  "GCOMP_JOB_TOKEN is longer than %u characters", RV_MAX_TOKEN);
    strcpy(out->token, tok);
  }
  return GCOMP_OK;
}
