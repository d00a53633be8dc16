/* Internal: what the communicator measures beyond each call's own figures (GCOMP_MEASURE).
 *
 *   step.c   the step split: each rank's run as compute (time outside gcomp between its
 *            calls), communication (inside, moving and reducing) and wait (inside, waiting
 *            for the last rank to arrive: the straggler detector's figure for each call of
 *            a complete window, the wait loops' for the calls after it), over the run and
 *            per step (between two gcomp_comm_mark_step, or every window of calls when the
 *            caller marks none), into GCOMP_STATS and GCOMP_TRACE.
 *   links.c  what the process's TCP connections delivered per local and remote address,
 *            as the kernel measured it: the links' throughput under the job's own traffic. */
#ifndef GCOMP_MEASURE_H
#define GCOMP_MEASURE_H

#include <stdint.h>
#include <stdio.h>

#include <stddef.h>

/* ---- the step split (step.c) ---------------------------------------------------------- */
typedef struct {
  uint64_t start_ns, end_ns;
  size_t ev_from, ev_to;   /* its calls' trace events [from, to) */
  double inside_s;         /* time inside its calls */
  double loop_wait_s;      /* of which in wait loops */
  uint64_t calls;
  int marked;              /* ended by gcomp_comm_mark_step, not by a window's count */
} gcomp_step_rec;

typedef struct {
  int on;                  /* GCOMP_MEASURE */
  int window;              /* calls per step while the caller marks none */
  uint64_t first_ns;       /* the first call's arrival; 0 before it */
  uint64_t last_end_ns;    /* the last call's end */
  double inside_s;         /* every call's time inside gcomp */
  double exchange_s;       /* the detector's exchanges before the last call: inside too */
  /* wait loops' time of the calls the straggler detector has not covered yet, and how many
   * calls it had covered when that began */
  double pending_wait_s;
  uint64_t covered;
  uint64_t marks;          /* gcomp_comm_mark_step calls */
  uint64_t nsteps;         /* steps (or windows) finished with calls in them */
  gcomp_step_rec cur;      /* the step under way */
  /* trace events up to the last call's: comm->ntrace as this observer last saw it (a mark
   * on another thread must not read it while a call adds to it) */
  size_t ev_seen;
  gcomp_step_rec *recs;    /* finished steps, kept for the trace (GCOMP_TRACE set) */
  size_t nrecs, cap;
} gcomp_step;

struct gcomp_comm;
struct gcomp_call;
int gcomp_step_init(struct gcomp_comm *comm);
void gcomp_step_free(gcomp_step *s);
/* The observer (under comm->mu: gcomp_comm_mark_step may run on another thread): _locked
 * when the caller holds it (call.c), else it takes it */
int gcomp_step_observe(struct gcomp_comm *comm, struct gcomp_call *call);
int gcomp_step_observe_locked(struct gcomp_comm *comm, struct gcomp_call *call);
/* GCOMP_STATS members: "cores", and with GCOMP_MEASURE "run_s", "compute_s", "comm_s",
 * "split_wait_s", "steps", "marked_steps", "links" */
void gcomp_measure_write_stats(const struct gcomp_comm *comm, FILE *f);
/* GCOMP_TRACE: one event per step on the rank's second track (each preceded by ",\n") */
void gcomp_step_write_trace(const struct gcomp_comm *comm, FILE *f, double origin_us);

/* ---- what the process's TCP connections delivered (links.c) --------------------------- */
/* "links": [{"local": IP, "remote": IP, "bytes": B, "busy_s": S}, ...] */
void gcomp_links_write(FILE *f);

#endif /* GCOMP_MEASURE_H */
