/* A training loop with the failure modes gcomp-stats diagnoses, made on purpose, started by
 * gcomp-run over real providers. Each step "computes" (sleeps: time outside gcomp, as a
 * device would take it) and then allreduces BYTES of floats.
 *   diagnose_job [--steps N] [--bytes B] [--compute-ms T] [--slow-rank R]
 *                [--sleep-once R:STEP:SECONDS] [--mark-steps 1]
 *   --slow-rank R         rank R computes twice as long every step (a straggler)
 *   --slow-factor F       ... F times as long instead of twice
 *   --sleep-once R:S:SEC  rank R sleeps SEC seconds once, before step S (a checkpoint)
 *   --mark-steps 1        gcomp_comm_mark_step after each step's allreduce
 * Public API only. Exit 0 when every call succeeded and the sums are right. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gcomp.h"

typedef struct {
  int steps;
  size_t bytes;
  double compute_ms;
  int slow_rank;
  double slow_factor;
  int once_rank, once_step;
  double once_s;
  int mark;
} job_opts;

static void pause_s(double s) {
  if (s <= 0) return;
  struct timespec ts = {(time_t)s, (long)(fmod(s, 1.0) * 1e9)};
  while (nanosleep(&ts, &ts) != 0) {}
}

static int parse(int argc, char **argv, job_opts *o) {
  *o = (job_opts){.steps = 64, .bytes = 1 << 20, .compute_ms = 0, .slow_rank = -1,
                  .slow_factor = 2, .once_rank = -1};
  for (int i = 1; i + 1 < argc; i += 2) {
    const char *a = argv[i], *v = argv[i + 1];
    if (!strcmp(a, "--steps")) o->steps = atoi(v);
    else if (!strcmp(a, "--bytes")) o->bytes = (size_t)atol(v);
    else if (!strcmp(a, "--compute-ms")) o->compute_ms = atof(v);
    else if (!strcmp(a, "--slow-rank")) o->slow_rank = atoi(v);
    else if (!strcmp(a, "--slow-factor")) o->slow_factor = atof(v);
    else if (!strcmp(a, "--mark-steps")) o->mark = atoi(v);
    else if (!strcmp(a, "--sleep-once")) {
      if (sscanf(v, "%d:%d:%lf", &o->once_rank, &o->once_step, &o->once_s) != 3) return -1;
    } else return -1;
  }
  return o->steps > 0 && o->bytes >= 4 ? 0 : -1;
}

int main(int argc, char **argv) {
  job_opts o;
  if (parse(argc, argv, &o)) {
    fprintf(stderr, "usage: diagnose_job [--steps N] [--bytes B] [--compute-ms T] "
                    "[--slow-rank R [--slow-factor F]] [--sleep-once R:STEP:SECONDS] [--mark-steps 1]\n");
    return 2;
  }
  gcomp_comm *comm;
  int st = gcomp_comm_init_env(&comm);
  if (st != GCOMP_OK) {
    fprintf(stderr, "diagnose_job: init: %s\n", gcomp_last_error());
    return 1;
  }
  int rank = gcomp_comm_rank(comm), size = gcomp_comm_size(comm);
  if (gcomp_comm_mark_step(NULL) != GCOMP_ERR_INVALID) {
    fprintf(stderr, "diagnose_job: gcomp_comm_mark_step(NULL) is not GCOMP_ERR_INVALID\n");
    return 1;
  }
  /* out of place, the input written once: a step's time outside gcomp is its pause alone
   * (refilling 8 MiB each step, slow under ASan on a loaded machine, added the same time to
   * every rank and pushed a 1.5x straggler's compute ratio under the finding's 1.4) */
  size_t count = o.bytes / 4;
  float *in = malloc(count * sizeof *in), *buf = malloc(count * sizeof *buf);
  if (!in || !buf) return 1;
  for (size_t i = 0; i < count; i++) in[i] = (float)(rank + 1);
  int bad = 0;
  for (int s = 0; s < o.steps && st == GCOMP_OK; s++) {
    double ms = o.compute_ms * (rank == o.slow_rank ? o.slow_factor : 1);
    pause_s(ms * 1e-3);
    if (rank == o.once_rank && s == o.once_step) pause_s(o.once_s);
    buf[0] = buf[count - 1] = -1;
    st = gcomp_allreduce(comm, in, buf, count, GCOMP_FLOAT32, GCOMP_SUM, NULL, 0);
    float want = (float)(size * (size + 1) / 2);
    bad += st == GCOMP_OK && (buf[0] != want || buf[count - 1] != want);
    if (o.mark && st == GCOMP_OK) st = gcomp_comm_mark_step(comm);
  }
  if (st != GCOMP_OK) fprintf(stderr, "diagnose_job: rank %d: %s\n", rank, gcomp_last_error());
  if (bad) fprintf(stderr, "diagnose_job: rank %d: %d wrong sums\n", rank, bad);
  free(in);
  free(buf);
  int dst = gcomp_comm_destroy(comm);
  return st != GCOMP_OK || bad || dst != GCOMP_OK;
}
