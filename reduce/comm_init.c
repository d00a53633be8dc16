/* The public ways to make communicators: from the environment (a launcher's variables and
 * the TCP rendezvous), from a caller's out-of-band allgather (the MPI shim, bindings), and
 * as in-process ranks over the loopback (simulations, tests). Each ends in
 * gcomp_comm_create with one table of settings: a config's, or the environment's. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm.h"

void gcomp_fabric_opts_from(const gcomp_settings *set, gcomp_fabric_opts *out) {
  *out = (gcomp_fabric_opts){
      .timeout_ms = (int)gcomp_settings_int(set, GCOMP_P_TIMEOUT_MS),
      .chunk_bytes = (size_t)gcomp_settings_int(set, GCOMP_P_CHUNK_BYTES),
      .provider = gcomp_settings_str(set, GCOMP_P_PROVIDER),
      .intra_provider = gcomp_settings_str(set, GCOMP_P_INTRA_PROVIDER),
      .node_id = gcomp_settings_str(set, GCOMP_P_NODE_ID),
      .cq_wait = gcomp_settings_int(set, GCOMP_P_CQ_WAIT) != 0};
}

/* This rank's node: the caller's name for it, else the settings' GCOMP_NODE_ID, else the
 * host's name (into host) */
static const char *node_name(const char *node_id, const gcomp_fabric_opts *o, char *host,
                             size_t n) {
  if (node_id) return node_id;
  if (o->node_id[0]) return o->node_id;
  gethostname(host, n - 1);
  return host;
}

gcomp_status gcomp_comm_init_env_config(const gcomp_config *config, gcomp_comm **out) {
  GCOMP_FAIL_IF(!out, GCOMP_ERR_INVALID, "gcomp_comm_init_env: out is NULL");
  *out = NULL;
  GCOMP_CHECK(gcomp_init());
  const gcomp_settings *set = gcomp_config_settings(config);
  gcomp_fabric_opts opts;
  gcomp_fabric_opts_from(set, &opts);
  gcomp_transport *t = NULL;
  int st = gcomp_transport_create_env(&opts, &t);
  if (st == GCOMP_OK) st = gcomp_comm_create(t, 1, set, out);
  if (st < 0 && t) gcomp_transport_destroy(t);
  return st < 0 ? gcomp_error_trace(st, __FILE__, __LINE__) : GCOMP_OK;
}

gcomp_status gcomp_comm_init_env(gcomp_comm **out) { return gcomp_comm_init_env_config(NULL, out); }

         /* ---- out-of-band -------------------------------------------------------------------- */
         typedef struct {
  gcomp_allgather_fn fn;
  void *ctx;
} user_oob;

static int user_allgather(gcomp_oob *oob, const void *mine, size_t len, void *all) {
  const user_oob *u = oob->ctx;
  int rc = u->fn(u->ctx, mine, len, all);
  GCOMP_FAIL_IF(rc != 0, GCOMP_ERR_BOOTSTRAP,
                "rank %d: the caller's allgather of %zu-byte records failed (it returned %d)",
                oob->rank, len, rc);
  return GCOMP_OK;
}

static void user_close(gcomp_oob *oob) { (void)oob; }

gcomp_status gcomp_comm_init_oob(int rank, int size, const char *node_id,
                                 gcomp_allgather_fn allgather, void *ctx,
                                 const gcomp_config *config, gcomp_comm **out) {
  GCOMP_FAIL_IF(!out, GCOMP_ERR_INVALID, "gcomp_comm_init_oob: out is NULL");
  *out = NULL;
  GCOMP_FAIL_IF(!allgather, GCOMP_ERR_INVALID, "gcomp_comm_init_oob: allgather is NULL");
  GCOMP_FAIL_IF(size < 1 || rank < 0 || rank >= size, GCOMP_ERR_INVALID,
                "gcomp_comm_init_oob: rank %d of %d ranks (need 0 <= rank < size)", rank, size);
  GCOMP_CHECK(gcomp_init());
  const gcomp_settings *set = gcomp_config_settings(config);
  gcomp_fabric_opts opts;
  gcomp_fabric_opts_from(set, &opts);
  char host[256] = "";
  node_id = node_name(node_id, &opts, host, sizeof host);
  user_oob u = {allgather, ctx};
  gcomp_oob oob = {.rank = rank, .size = size, .allgather = user_allgather, .close = user_close,
                   .ctx = &u};
  gcomp_transport *t = NULL;
  int st = gcomp_transport_create(&oob, node_id, &opts, &t);
  if (st == GCOMP_OK) st = gcomp_comm_create(t, 1, set, out);
  if (st < 0 && t) gcomp_transport_destroy(t);
  return st < 0 ? gcomp_error_trace(st, __FILE__, __LINE__) : GCOMP_OK;
}

/* ---- in-process ranks ------------------------------------------------------------------ */
/* Creation is collective (calibration, agreement), so each rank is created by a thread of
 * its own. */
typedef struct {
  gcomp_transport *t;
  const gcomp_settings *set;
  gcomp_comm *comm;
  int status;
  char error[1024];
} local_rank;

static void *create_rank(void *arg) {
  local_rank *r = arg;
  r->status = gcomp_comm_create(r->t, 1, r->set, &r->comm);
  if (r->status < 0) snprintf(r->error, sizeof r->error, "%s", gcomp_last_error());
  else r->t = NULL;   /* the communicator owns it */
  return NULL;
}

/* Runs create_rank for every rank at once; returns the first failure (its detail named by
 * rank). A rank whose thread cannot start fails, and so, within GCOMP_TIMEOUT_MS, do the
 * ones that wait for it. */
static int create_all(int size, local_rank *ranks) {
  pthread_t *th = calloc((size_t)size, sizeof *th);
  GCOMP_FAIL_IF(!th, GCOMP_ERR_NOMEM, "gcomp_comm_init_local: %d threads", size);
  int started = 0;
  for (; started < size; started++)
    if (pthread_create(&th[started], NULL, create_rank, &ranks[started]) != 0) break;
  for (int r = started; r < size; r++) {
    ranks[r].status = GCOMP_ERR_NOMEM;
    snprintf(ranks[r].error, sizeof ranks[r].error, "cannot start a thread to create it");
  }
  for (int r = 0; r < started; r++) pthread_join(th[r], NULL);
  free(th);
  for (int r = 0; r < size; r++)
    if (ranks[r].status < 0)
      return gcomp_error_set(ranks[r].status, __FILE__, __LINE__, "rank %d of %d: %s", r, size,
                             ranks[r].error);
  return GCOMP_OK;
}

gcomp_status gcomp_comm_init_local(int size, const int *node_of, const gcomp_config *config,
                                   gcomp_comm **comms) {
  GCOMP_FAIL_IF(!comms, GCOMP_ERR_INVALID, "gcomp_comm_init_local: comms is NULL");
  GCOMP_FAIL_IF(size < 1 || size > 4096, GCOMP_ERR_INVALID,
                "gcomp_comm_init_local: %d ranks (1 to 4096)", size);
  memset(comms, 0, (size_t)size * sizeof *comms);
  for (int r = 0; node_of && r < size; r++)
    GCOMP_FAIL_IF(node_of[r] < 0 || node_of[r] >= size, GCOMP_ERR_INVALID,
                  "gcomp_comm_init_local: node_of[%d] = %d (0 to %d)", r, node_of[r], size - 1);
  GCOMP_CHECK(gcomp_init());
  const gcomp_settings *set = gcomp_config_settings(config);
  gcomp_transport **t = calloc((size_t)size, sizeof *t);
  local_rank *ranks = calloc((size_t)size, sizeof *ranks);
  int st = t && ranks ? GCOMP_OK
                      : gcomp_error_set(GCOMP_ERR_NOMEM, __FILE__, __LINE__,
                                        "gcomp_comm_init_local: %d ranks", size);
  gcomp_fabric_opts opts;
  gcomp_fabric_opts_from(set, &opts);
  if (st == GCOMP_OK) st = gcomp_loopback_create(size, node_of, &opts, t);
  for (int r = 0; st == GCOMP_OK && r < size; r++) ranks[r] = (local_rank){.t = t[r], .set = set};
  if (st == GCOMP_OK) st = create_all(size, ranks);
  for (int r = 0; ranks && r < size; r++) {
    if (st == GCOMP_OK) {
      comms[r] = ranks[r].comm;
      continue;
    }
    gcomp_comm_destroy(ranks[r].comm);   /* in-process ranks: does not wait for the others */
    gcomp_transport_destroy(ranks[r].t);
  }
  free(t);
  free(ranks);
  return st < 0 ? gcomp_error_trace(st, __FILE__, __LINE__) : GCOMP_OK;
}

/* ---- over a caller's point-to-point functions (an MPI's: include/gcomp_mpi.h) -------- */
gcomp_status gcomp_comm_init_p2p(int rank, int size, const char *node_id,
                                 const gcomp_p2p_ops *ops, void *ctx, const gcomp_config *config,
                                 gcomp_comm **out) {
  if (out) *out = NULL;
  int st = !out || !ops ? gcomp_error_set(GCOMP_ERR_INVALID, __FILE__, __LINE__,
                                          "gcomp_comm_init_p2p: out or ops is NULL")
                        : gcomp_init();
  gcomp_transport *t = NULL;
  if (st == GCOMP_OK) {
    const gcomp_settings *set = gcomp_config_settings(config);
    gcomp_fabric_opts opts;
    gcomp_fabric_opts_from(set, &opts);
    char host[256] = "";
    node_id = node_name(node_id, &opts, host, sizeof host);
    st = gcomp_p2p_transport_create(rank, size, node_id, ops, ctx, &opts, &t);
    if (st == GCOMP_OK) st = gcomp_comm_create(t, 1, set, out);
  }
  if (st < 0 && t) t->ops->destroy(t);   /* calls ops->close */
  else if (st < 0 && ops && ops->close) ops->close(ctx);
  return st < 0 ? gcomp_error_trace(st, __FILE__, __LINE__) : GCOMP_OK;
}
