/* A communicator's life: creation (settings, calibration, the shared segment, agreement),
 * destruction, and what callers may ask of it. Calls are in call.c, non-blocking ones in
 * progress.c (the map of the communicator's files is at the top of comm_impl.h). */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "abort.h"
#include "comm_impl.h"

static void log_model(const gcomp_comm *comm) {
  const gcomp_transport *t = comm->t;
  const gcomp_plan_in *m = &comm->model;
  GCOMP_INFO(GCOMP_SUB_TUNING,
             "rank %d/%d node %d/%d: intra %.2f us %.2f GB/s, inter %.2f us %.2f GB/s, "
             "add %.2f GB/s, shm %.2f us %.2f GB/s (%zu B rounds)",
             t->rank, t->size, t->node, t->nnodes, m->intra.alpha_s * 1e6,
             1e-9 / m->intra.beta_spb, m->inter.alpha_s * 1e6, 1e-9 / m->inter.beta_spb,
             1e-9 / m->gamma_spb, m->shm_alpha * 1e6, m->shm_spb > 0 ? 1e-9 / m->shm_spb : 0,
             m->shm_slot);
}

/* More ranks share this machine (GCOMP_HOST_RANKS, else the node's local ranks) than there
 * are CPUs this rank may run on: a waiting rank's spins and yields then take time from the
 * ranks it waits for (with 4 ranks on 2 vCPUs, napping in hier-direct's pipelined waits
 * took 4-6% off a 64 MiB sign+ef call). A progress thread that serves non-blocking calls
 * shares the CPUs with its rank's computation too (a DDP backward pass): where each rank's
 * two threads outnumber the CPUs, its waits nap from the start instead of spinning and
 * yielding, which on a shared core takes the CPU from the computation the call was meant
 * to hide behind. */
static void machine_load(gcomp_comm *comm) {
  int ranks = comm->agreed.host_ranks ? comm->agreed.host_ranks : comm->t->local_size;
  cpu_set_t set;
  int cpus = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 0;
  if (cpus <= 0) cpus = (int)sysconf(_SC_NPROCESSORS_ONLN);
  comm->oversubscribed = cpus > 0 && ranks > cpus;
  comm->progress_naps = cpus > 0 && 2 * ranks > cpus;
  GCOMP_TRACE(GCOMP_SUB_INIT, "%d ranks on this machine, %d CPUs for this one%s%s", ranks, cpus,
              comm->oversubscribed ? ": pipelined waits nap" : "",
              comm->progress_naps ? ", the progress thread's waits nap" : "");
}

/* Everything creation does after the settings are copied, in order: this rank's settings
 * read (which may fail on one rank alone), then compared with every rank's before anything
 * else collective, so that a malformed or differing setting fails every rank at once, named,
 * instead of leaving the others waiting in calibration */
static int build(gcomp_comm *comm) {
  gcomp_transport *t = comm->t;
  comm->world = malloc((size_t)t->size * sizeof *comm->world);
  GCOMP_FAIL_IF(!comm->world, GCOMP_ERR_NOMEM, "world");
  for (int r = 0; r < t->size; r++) comm->world[r] = r;
  comm->model.n = t->size;
  comm->model.nnodes = t->nnodes;
  comm->model.local = gcomp_even_local(t);
  if (!comm->model.local && t->nnodes > 1)
    GCOMP_CHECK(gcomp_hier_placement(t, &comm->model.local_min, &comm->model.local_max,
                                     &comm->model.pieces));
  comm->tracing = gcomp_settings_str(&comm->set, GCOMP_P_TRACE)[0] != '\0';
  int own = gcomp_agreed_read(comm);
  if (own >= 0 && comm->agreed.links_given)
    own = gcomp_plan_parse_links(gcomp_settings_str(&comm->set, GCOMP_P_ALPHA_BETA),
                                 "GCOMP_ALPHA_BETA", &comm->model);
  GCOMP_CHECK(gcomp_agreed_check(comm, own));
  if (!comm->agreed.links_given) GCOMP_CHECK(gcomp_calibrate(comm));
  /* a shared segment per node: the shm algorithm on one node, hier's intra-node halves on
   * several */
  if (t->local_size > 1 && !t->no_shared_memory)
    GCOMP_CHECK(gcomp_shm_create(t, comm->agreed.shm_bytes, &comm->shm));
  machine_load(comm);
  if (comm->shm && t->nnodes == 1) {
    comm->model.shm_slot = gcomp_shm_slot_bytes(comm->shm);
    if (!comm->agreed.links_given) GCOMP_CHECK(gcomp_calibrate_shm(comm));
  }
  return GCOMP_OK;
}

int gcomp_comm_create(gcomp_transport *t, int own, const gcomp_settings *set, gcomp_comm **out) {
  GCOMP_FAIL_IF(!t || !out, GCOMP_ERR_INVALID, "gcomp_comm_create: NULL argument");
  *out = NULL;
  GCOMP_CHECK(gcomp_init());
  gcomp_comm *comm = calloc(1, sizeof *comm);
  GCOMP_FAIL_IF(!comm, GCOMP_ERR_NOMEM, "allocating a communicator");
  int st = gcomp_settings_copy(&comm->set, set);
  if (st < 0) {
    free(comm);
    return gcomp_error_trace(st, __FILE__, __LINE__);
  }
  comm->t = t;
  comm->born_ns = gcomp_now_ns();
  struct timespec real;
  clock_gettime(CLOCK_REALTIME, &real);
  comm->born_real_us = comm->epoch_real_us =
      (double)real.tv_sec * 1e6 + (double)real.tv_nsec / 1e3;
  pthread_mutex_init(&comm->mu, NULL);
  pthread_cond_init(&comm->cv, NULL);
  st = build(comm);
  if (st >= 0) st = gcomp_step_init(comm);
  if (st >= 0)
    st = gcomp_abort_create(t, gcomp_settings_int(&comm->set, GCOMP_P_NOTICE) != 0, &comm->abort);
  if (st < 0) {
    comm->own = 0;   /* the caller keeps the transport on failure */
    gcomp_comm_destroy(comm);
    return gcomp_error_trace(st, __FILE__, __LINE__);
  }
  comm->own = own;
  log_model(comm);
  *out = comm;
  return GCOMP_OK;
}

int gcomp_comm_from_transport(gcomp_transport *t, int own, gcomp_comm **out) {
  return gcomp_comm_create(t, own, NULL, out);
}

gcomp_status gcomp_comm_destroy(gcomp_comm *comm) {
  if (!comm) return GCOMP_OK;
  /* requests the caller has not completed: destroying would free what the progress thread
   * and the caller's later wait or test still use */
  int pending = gcomp_progress_pending(comm);
  GCOMP_FAIL_IF(pending > 0, GCOMP_ERR_INVALID,
                "gcomp_comm_destroy: %d gcomp_iallreduce request%s pending: complete %s with "
                "gcomp_request_wait or gcomp_request_test first (the communicator stays usable)",
                pending, pending == 1 ? " is" : "s are", pending == 1 ? "it" : "them");
  gcomp_progress_stop(comm);
  /* aborted: the peers hear it now if no call told them, and the goodbyes are brief */
  if (gcomp_abort_requested(comm->abort)) {
    gcomp_abort_here(comm->abort);
    comm->t->failed = 1;
  }
  locale_t old_locale = uselocale(gcomp_c_locale());   /* JSON numbers: 0.5, never 0,5 */
  gcomp_stats_write(comm);
  gcomp_trace_write(comm);
  uselocale(old_locale);
  free(comm->trace);
  gcomp_skew_free(&comm->skew);
  gcomp_guard_free(comm);
  gcomp_step_free(&comm->step);
  gcomp_shm_destroy(comm->shm);
  gcomp_abort_destroy(comm->abort);
  if (comm->own) gcomp_transport_destroy(comm->t);
  gcomp_agreed_free(&comm->agreed);
  gcomp_codec_plan_free(comm);
  free(comm->world);
  gcomp_scratch_free(&comm->scratch);
  free(comm->work);
  pthread_mutex_destroy(&comm->mu);
  pthread_cond_destroy(&comm->cv);
  gcomp_settings_free(&comm->set);
  free(comm);
  return GCOMP_OK;
}

int gcomp_comm_mark_broken(gcomp_comm *comm, int st) {
  comm->broken = 1;
  /* a peer dead, silent or sending garbage: destroy's goodbyes are brief, whichever layer
   * failed. Not for a mismatch the ranks found (GCOMP_ERR_INVALID): the peers are alive and
   * say goodbye, and a peer still waiting needs this rank's refusal, which only a full
   * goodbye is sure to deliver before the process exits */
  if (st != GCOMP_ERR_INVALID) comm->t->failed = 1;
  snprintf(comm->broken_why, sizeof comm->broken_why, "%s: %s", gcomp_strerror(st),
           gcomp_last_error());
  return gcomp_error_trace(st, __FILE__, __LINE__);
}

int gcomp_comm_abort(gcomp_comm *comm) {
  if (!comm) return GCOMP_OK;
  /* only a mark: the transport has one user at a time, the running call or the next one,
   * which sees the mark at its next idle poll (abort.c) */
  gcomp_abort_request(comm->abort);
  GCOMP_INFO(GCOMP_SUB_REDUCE, "rank %d: gcomp_comm_abort", comm->t->rank);
  return GCOMP_OK;
}

/* ---- what callers may ask ------------------------------------------------------------- */
int gcomp_comm_rank(const gcomp_comm *comm) { return comm ? comm->t->rank : -1; }
int gcomp_comm_size(const gcomp_comm *comm) { return comm ? comm->t->size : -1; }
int gcomp_comm_node(const gcomp_comm *comm) { return comm ? comm->t->node : -1; }
int gcomp_comm_nnodes(const gcomp_comm *comm) { return comm ? comm->t->nnodes : -1; }

/* The figures the observers write under mu, read from any thread */
static pthread_mutex_t *lock_of(const gcomp_comm *comm) { return (pthread_mutex_t *)&comm->mu; }

gcomp_status gcomp_comm_get_stats(const gcomp_comm *comm, gcomp_comm_stats *out) {
  GCOMP_FAIL_IF(!comm || !out, GCOMP_ERR_INVALID, "gcomp_comm_get_stats: NULL argument");
  pthread_mutex_lock(lock_of(comm));
  int st = GCOMP_SIZED_COPY(out, &comm->stats, gcomp_comm_stats, shm_bytes,
                            "gcomp_comm_get_stats");
  pthread_mutex_unlock(lock_of(comm));
  return st;
}

gcomp_status gcomp_comm_get_skew(const gcomp_comm *comm, gcomp_skew_stats *out) {
  GCOMP_FAIL_IF(!comm || !out, GCOMP_ERR_INVALID, "gcomp_comm_get_skew: NULL argument");
  pthread_mutex_lock(lock_of(comm));
  int st = GCOMP_SIZED_COPY(out, &comm->skew.mine, gcomp_skew_stats, worst_last,
                            "gcomp_comm_get_skew");
  pthread_mutex_unlock(lock_of(comm));
  return st;
}

const char *gcomp_comm_last_algo(const gcomp_comm *comm) {
  if (!comm) return "";
  pthread_mutex_lock(lock_of(comm));
  const char *a = comm->last_algo;
  pthread_mutex_unlock(lock_of(comm));
  return a ? a : "";
}

const char *gcomp_comm_plan_name(gcomp_comm *comm, size_t bytes) {
  gcomp_plan_in in = comm->model;
  in.bytes = bytes;
  return gcomp_plan_pick(&in, comm->agreed.forced)->name;
}
