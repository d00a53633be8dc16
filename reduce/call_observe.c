/* The observers of the call stream (call.c): the communicator's figures, the trace, and
 * straggler detection; and the JSON files the first two leave at destroy. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm_impl.h"

/* ---- stats ---------------------------------------------------------------------------- */
/* What a call adds to the communicator's figures. A field appended to gcomp_comm_stats
 * that calls accumulate through gcomp_coll.stats is added here too. */
static void stats_add(gcomp_comm_stats *s, const gcomp_comm_stats *a) {
  s->wire_bytes += a->wire_bytes;
  s->wait_s += a->wait_s;
  s->reduce_s += a->reduce_s;
  s->encode_s += a->encode_s;
  s->decode_s += a->decode_s;
  s->nonfinite += a->nonfinite;
  s->shm_bytes += a->shm_bytes;
  s->overflows += a->overflows;
}

/* The caller holds mu (call.c): gcomp_comm_get_stats may read them from another thread */
int gcomp_stats_observe(gcomp_comm *comm, gcomp_call *call) {
  gcomp_comm_stats *s = &comm->stats;
  s->calls++;
  s->bytes += call->bytes;
  stats_add(s, &call->acc);
  if (call->completed) s->total_s += (double)(call->end_ns - call->start_ns) * 1e-9;
  if (call->algo) comm->last_algo = call->algo->name;
  return GCOMP_OK;
}

/* ---- trace ---------------------------------------------------------------------------- */
int gcomp_trace_observe(gcomp_comm *comm, gcomp_call *call) {
  if (!comm->tracing || !call->completed) return GCOMP_OK;
  if (comm->ntrace == comm->trace_cap) {
    size_t cap = comm->trace_cap ? comm->trace_cap * 2 : 1024;
    if (cap > (1u << 22)) return GCOMP_OK;   /* a bounded trace: the first 4M calls */
    gcomp_trace_event *p = realloc(comm->trace, cap * sizeof *p);
    if (!p) return GCOMP_OK;
    comm->trace = p, comm->trace_cap = cap;
  }
  const gcomp_comm_stats *a = &call->acc;
  call->trace_at = comm->ntrace;
  comm->trace[comm->ntrace++] = (gcomp_trace_event){
      call->start_ns, call->end_ns, call->bytes, call->algo->name, a->wait_s, a->encode_s,
      a->decode_s, a->reduce_s, a->wire_bytes, a->shm_bytes, -1.0, -1.0};
  return GCOMP_OK;
}

/* ---- stragglers ----------------------------------------------------------------------- */
/* The detector's two exchanges, through the planner's choice of algorithm like any small
 * call, on the internal path: kept out of the caller's figures, trace and last algorithm. Out of
 * line: inlined, its register saves were paid by every call's observer. */
__attribute__((noinline)) static int skew_exchange(gcomp_comm *comm) {
  gcomp_skew *s = &comm->skew;
  uint64_t t0 = gcomp_now_ns();
  int n = s->n;
  size_t len = gcomp_skew_vec(s);
  int st = gcomp_call_internal(comm, s->vec, len, GCOMP_INT32, GCOMP_MAX, NULL, 0);
  if (st == GCOMP_OK) {
    pthread_mutex_lock(&comm->mu);   /* gcomp_comm_get_skew reads s->mine */
    len = gcomp_skew_absorb(s, comm->t->rank);
    pthread_mutex_unlock(&comm->mu);
    for (int i = 0; comm->tracing && i < n; i++)
      if (s->trace_at[i] < comm->ntrace) {
        comm->trace[s->trace_at[i]].late_s = s->late[i];
        comm->trace[s->trace_at[i]].waited_s = gcomp_skew_waited(s, i);
      }
    st = gcomp_call_internal(comm, s->table, len, GCOMP_FLOAT64, GCOMP_MAX, NULL, 0);
  }
  s->exchange_s += (double)(gcomp_now_ns() - t0) * 1e-9;
  if (st < 0) {
    s->n = 0;
    return gcomp_error_trace(st, __FILE__, __LINE__);
  }
  pthread_mutex_lock(&comm->mu);
  gcomp_skew_finish(s);
  pthread_mutex_unlock(&comm->mu);
  const gcomp_skew_stats *m = &s->mine;
  if (comm->t->rank == 0)
    GCOMP_INFO(GCOMP_SUB_REDUCE,
               "stragglers after %llu calls: rank %d arrives %.3f ms after the first on average "
               "and last in %llu calls; first to last arrival %.3f ms on average",
               (unsigned long long)m->calls, m->worst_rank, m->worst_late_mean_s * 1e3,
               (unsigned long long)m->worst_last, m->spread_mean_s * 1e3);
  return GCOMP_OK;
}

/* A rank arrives at a non-blocking call when it calls gcomp_iallreduce (arrive_ns) */
int gcomp_skew_observe(gcomp_comm *comm, gcomp_call *call) {
  if (!call->completed) return GCOMP_OK;
  double inside = (double)(call->end_ns - call->arrive_ns) * 1e-9;
  return gcomp_skew_note(&comm->skew, inside, call->trace_at) ? skew_exchange(comm) : GCOMP_OK;
}

/* ---- the files ------------------------------------------------------------------------ */
/* The file a path setting names for this rank (path: its expansion), or NULL: not set, or
 * not writable (a warning) */
static FILE *open_output(const gcomp_comm *comm, gcomp_param_id id, char *path, size_t n) {
  const char *pattern = gcomp_settings_str(&comm->set, id);
  if (!pattern[0]) return NULL;
  gcomp_path_expand(pattern, comm->t->rank, path, n);
  FILE *f = fopen(path, "w");
  if (!f) GCOMP_WARN(GCOMP_SUB_REDUCE, "%s: cannot write '%s'", gcomp_param_name(id), path);
  return f;
}

/* Closes a file open_output opened. A failed write (a full disk) leaves truncated JSON: it
 * draws a warning naming the file instead of passing silently. */
static void close_output(FILE *f, gcomp_param_id id, const char *path) {
  int failed = ferror(f), err = 0;
  if (fflush(f) != 0) failed = 1, err = errno;
  if (fclose(f) != 0 && !err) failed = 1, err = errno;
  if (failed)
    GCOMP_WARN(GCOMP_SUB_REDUCE, "%s: writing '%s' failed%s%s: the file is incomplete",
               gcomp_param_name(id), path, err ? ": " : "", err ? strerror(err) : "");
}

void gcomp_stats_write(const gcomp_comm *comm) {
  char path[4096];
  FILE *f = open_output(comm, GCOMP_P_STATS, path, sizeof path);
  if (!f) return;
  const gcomp_comm_stats *s = &comm->stats;
  fprintf(f,
          "{\"rank\": %d, \"size\": %d, \"node\": %d, \"nodes\": %d, \"calls\": %llu, "
          "\"bytes\": %llu, \"wire_bytes\": %llu, \"shm_bytes\": %llu, \"total_s\": %.6f, "
          "\"wait_s\": %.6f, "
          "\"reduce_s\": %.6f, \"encode_s\": %.6f, \"decode_s\": %.6f, \"nonfinite\": %llu, "
          "\"overflows\": %llu,\n"
          " \"model\": {\"intra_alpha_us\": %.3f, \"intra_GBps\": %.3f, \"inter_alpha_us\": %.3f, "
          "\"inter_GBps\": %.3f, \"reduce_GBps\": %.3f, \"shm_alpha_us\": %.3f, "
          "\"shm_GBps\": %.3f},\n",
          comm->t->rank, comm->t->size, comm->t->node, comm->t->nnodes,
          (unsigned long long)s->calls, (unsigned long long)s->bytes,
          (unsigned long long)s->wire_bytes, (unsigned long long)s->shm_bytes, s->total_s,
          s->wait_s, s->reduce_s, s->encode_s,
          s->decode_s, (unsigned long long)s->nonfinite, (unsigned long long)s->overflows,
          comm->model.intra.alpha_s * 1e6,
          1e-9 / comm->model.intra.beta_spb, comm->model.inter.alpha_s * 1e6,
          1e-9 / comm->model.inter.beta_spb, 1e-9 / comm->model.gamma_spb,
          comm->model.shm_alpha > 0 ? comm->model.shm_alpha * 1e6 : 0,
          comm->model.shm_alpha > 0 && comm->model.shm_spb > 0 ? 1e-9 / comm->model.shm_spb : 0);
  /* stragglers: this rank's figures, then every rank's as of the last window */
  const gcomp_skew *k = &comm->skew;
  const gcomp_skew_stats *m = &k->mine;
  fprintf(f,
          " \"skew\": {\"window\": %d, \"calls\": %llu, \"late_mean_us\": %.1f, \"late_max_us\": "
          "%.1f, \"last\": %llu, \"spread_mean_us\": %.1f, \"exchange_s\": %.6f, "
          "\"worst_rank\": %d, \"late_typical_us\": %.1f, \"spread_typical_us\": %.1f, "
          "\"late_max_call\": %llu, \"waited_s\": %.6f, \"ranks_late_mean_us\": [",
          k->window, (unsigned long long)m->calls, m->late_mean_s * 1e6, m->late_max_s * 1e6,
          (unsigned long long)m->last, m->spread_mean_s * 1e6, k->exchange_s, m->worst_rank,
          k->late_typical_s * 1e6, k->spread_typical_s * 1e6,
          (unsigned long long)k->late_max_call, k->waited_s);
  for (int r = 0; k->table && m->calls && r < k->size; r++)
    fprintf(f, "%s%.1f", r ? ", " : "", k->table[3 * r] * 1e6);
  fprintf(f, "], \"ranks_last\": [");
  for (int r = 0; k->table && m->calls && r < k->size; r++)
    fprintf(f, "%s%.0f", r ? ", " : "", k->table[3 * r + 2]);
  fprintf(f, "]}");
  gcomp_guard_write(comm, f);
  fprintf(f, ",\n");
  gcomp_measure_write_stats(comm, f);
  fprintf(f, "}\n");
  close_output(f, GCOMP_P_STATS, path);
}

/* Chrome trace-event format: one complete ("X") event per call on this rank's track. Times
 * count from the job's epoch (see gcomp_agreed_check), so the ranks' files merge into one
 * timeline. */
void gcomp_trace_write(const gcomp_comm *comm) {
  char path[4096];
  FILE *f = open_output(comm, GCOMP_P_TRACE, path, sizeof path);
  if (!f) return;
  fprintf(f, "{\"traceEvents\": [\n");
  fprintf(f, " {\"name\": \"process_name\", \"ph\": \"M\", \"pid\": %d, \"args\": {\"name\": "
             "\"rank %d (node %d)\"}}", comm->t->rank, comm->t->rank, comm->t->node);
  for (size_t i = 0; i < comm->ntrace; i++) {
    const gcomp_trace_event *e = &comm->trace[i];
    fprintf(f,
            ",\n {\"name\": \"allreduce %s\", \"cat\": \"gcomp\", \"ph\": \"X\", \"pid\": %d, "
            "\"tid\": 0, \"ts\": %.3f, \"dur\": %.3f, \"args\": {\"bytes\": %zu, \"wire_bytes\": "
            "%llu, \"shm_bytes\": %llu, \"wait_us\": %.1f, \"encode_us\": %.1f, "
            "\"decode_us\": %.1f, \"reduce_us\": %.1f",
            e->algo, comm->t->rank,
            (double)(e->start_ns - comm->born_ns) / 1e3 +
                (comm->born_real_us - comm->epoch_real_us),
            (double)(e->end_ns - e->start_ns) / 1e3, e->bytes, (unsigned long long)e->wire_bytes,
            (unsigned long long)e->shm_bytes, e->wait_s * 1e6, e->encode_s * 1e6,
            e->decode_s * 1e6, e->reduce_s * 1e6);
    if (e->late_s >= 0) fprintf(f, ", \"late_us\": %.1f", e->late_s * 1e6);
    if (e->waited_s >= 0) fprintf(f, ", \"waited_us\": %.1f", e->waited_s * 1e6);
    fprintf(f, "}}");
  }
  gcomp_step_write_trace(comm, f, comm->born_real_us - comm->epoch_real_us);
  fprintf(f, "\n], \"displayTimeUnit\": \"ms\", \"otherData\": {\"time_origin_unix_us\": %.0f}}\n",
          comm->epoch_real_us);
  close_output(f, GCOMP_P_TRACE, path);
}

