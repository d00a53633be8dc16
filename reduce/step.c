/* The step split: where each rank's run goes. Compute is the time outside gcomp between the
 * rank's first call and its last; communication is the time inside moving and reducing;
 * wait is the time inside waiting for the last rank to arrive. That wait is the straggler
 * detector's (skew.c) for every call of a complete window: the rank's time in the call less
 * the last arrival's, no clocks compared; calls after the last window count their wait
 * loops' time instead (which also holds time the data spent on the wire). Over the run
 * into GCOMP_STATS; per step (between gcomp_comm_mark_step calls, or every window of calls
 * until the caller marks one) into GCOMP_TRACE. */
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "comm_impl.h"

enum { MAX_STEP_RECS = 1 << 20 };   /* a bounded trace, like the calls' */

int gcomp_step_init(gcomp_comm *comm) {
  gcomp_step *s = &comm->step;
  memset(s, 0, sizeof *s);
  s->on = gcomp_settings_int(&comm->set, GCOMP_P_MEASURE) != 0;
  s->window = comm->agreed.skew_window > 0 ? comm->agreed.skew_window : 256;
  return GCOMP_OK;
}

void gcomp_step_free(gcomp_step *s) {
  free(s->recs);
  s->recs = NULL, s->nrecs = s->cap = 0;
}

static void close_step(gcomp_comm *comm, uint64_t at_ns) {
  gcomp_step *s = &comm->step;
  s->cur.end_ns = at_ns;
  s->cur.ev_to = s->ev_seen;
  if (s->cur.calls) s->nsteps++;
  s->cur.marked = s->marks > 0;
  if (comm->tracing && s->cur.calls) {
    if (s->nrecs == s->cap && s->cap < MAX_STEP_RECS) {
      size_t cap = s->cap ? s->cap * 2 : 256;
      gcomp_step_rec *p = realloc(s->recs, cap * sizeof *p);
      if (p) s->recs = p, s->cap = cap;
    }
    if (s->nrecs < s->cap) s->recs[s->nrecs++] = s->cur;
  }
  s->cur = (gcomp_step_rec){.start_ns = at_ns, .ev_from = s->ev_seen};
}

int gcomp_step_observe(gcomp_comm *comm, gcomp_call *call) {
  pthread_mutex_lock(&comm->mu);
  int st = gcomp_step_observe_locked(comm, call);
  pthread_mutex_unlock(&comm->mu);
  return st;
}

int gcomp_step_observe_locked(gcomp_comm *comm, gcomp_call *call) {
  gcomp_step *s = &comm->step;
  if (!s->on) return GCOMP_OK;
  if (!s->first_ns) {
    s->first_ns = call->arrive_ns;
    if (!s->cur.start_ns) s->cur.start_ns = call->arrive_ns;
  }
  double inside = (double)(call->end_ns - call->start_ns) * 1e-9;
  s->inside_s += inside;
  s->last_end_ns = call->end_ns;
  if (call->trace_at != SIZE_MAX) s->ev_seen = call->trace_at + 1;
  s->exchange_s = comm->skew.exchange_s;   /* those after this call lie past the run's end */
  /* runs before the detector's observer: a window it has folded in since the last call
   * covers every call up to that one */
  if (comm->skew.mine.calls != s->covered)
    s->covered = comm->skew.mine.calls, s->pending_wait_s = 0;
  s->pending_wait_s += call->acc.wait_s;
  s->cur.inside_s += inside;
  s->cur.loop_wait_s += call->acc.wait_s;
  s->cur.calls++;
  if (!s->marks && s->cur.calls == (uint64_t)s->window) close_step(comm, call->end_ns);
  return GCOMP_OK;
}

gcomp_status gcomp_comm_mark_step(gcomp_comm *comm) {
  GCOMP_FAIL_IF(!comm, GCOMP_ERR_INVALID, "gcomp_comm_mark_step: comm is NULL");
  gcomp_step *s = &comm->step;
  pthread_mutex_lock(&comm->mu);
  s->marks++;
  if (s->on) close_step(comm, gcomp_now_ns());   /* the step, or the window, under way */
  pthread_mutex_unlock(&comm->mu);
  return GCOMP_OK;
}

static int cores(void) {
  cpu_set_t set;
  return sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 0;
}

void gcomp_measure_write_stats(const gcomp_comm *comm, FILE *f) {
  const gcomp_step *s = &comm->step;
  fprintf(f, " \"cores\": %d", cores());
  if (!s->on) {
    fprintf(f, ", \"measure\": false");
    return;
  }
  double run = s->first_ns ? (double)(s->last_end_ns - s->first_ns) * 1e-9 : 0;
  /* the detector's exchanges run inside the caller's call, after its own work */
  double inside = s->inside_s + s->exchange_s;
  /* pending counts only while no window has been folded in since the last call */
  double pending = comm->skew.mine.calls == s->covered ? s->pending_wait_s : 0;
  double wait = comm->skew.waited_s + pending;
  if (wait > inside) wait = inside;
  double compute = run > inside ? run - inside : 0;
  fprintf(f,
          ", \"run_s\": %.6f, \"compute_s\": %.6f, \"comm_s\": %.6f, \"split_wait_s\": %.6f, "
          "\"steps\": %llu, \"marked_steps\": %llu,\n ",
          run, compute, inside - wait, wait,
          (unsigned long long)s->nsteps + (s->cur.calls > 0),
          (unsigned long long)s->marks);
  gcomp_links_write(f);
}

/* A step's wait: its calls' waits for the last arrival where the detector has them, their
 * wait loops' time for the others */
static double step_wait(const gcomp_comm *comm, const gcomp_step_rec *r) {
  double wait = 0;
  for (size_t i = r->ev_from; i < r->ev_to && i < comm->ntrace; i++) {
    const gcomp_trace_event *e = &comm->trace[i];
    wait += e->waited_s >= 0 ? e->waited_s : e->wait_s;
  }
  return wait < r->inside_s ? wait : r->inside_s;
}

void gcomp_step_write_trace(const gcomp_comm *comm, FILE *f, double origin_us) {
  const gcomp_step *s = &comm->step;
  for (size_t i = 0; i < s->nrecs; i++) {
    const gcomp_step_rec *r = &s->recs[i];
    double span = (double)(r->end_ns - r->start_ns) * 1e-9, wait = step_wait(comm, r);
    fprintf(f,
            ",\n {\"name\": \"%s %zu\", \"cat\": \"gcomp.step\", \"ph\": \"X\", \"pid\": %d, "
            "\"tid\": 1, \"ts\": %.3f, \"dur\": %.3f, \"args\": {\"calls\": %llu, "
            "\"compute_us\": %.1f, \"comm_us\": %.1f, \"wait_us\": %.1f}}",
            r->marked ? "step" : "window", i + 1, comm->t->rank,
            (double)(r->start_ns - comm->born_ns) / 1e3 + origin_us, span * 1e6,
            (unsigned long long)r->calls, (span > r->inside_s ? span - r->inside_s : 0) * 1e6,
            (r->inside_s - wait) * 1e6, wait * 1e6);
  }
}
