/* gcomp-sim-rank: one simulated rank of gcomp-sim, built with smpicc and run by smpirun.
 *
 * Every rank creates a gcomp communicator over SMPI's point-to-point messages
 * (include/gcomp_mpi.h), then runs `--iters` steps of [compute --compute-ms of simulated
 * time, gcomp_allreduce of --count floats] after one untimed warm-up call, all in simulated
 * time (MPI_Wtime). Rank 0 prints one JSON line: the slowest rank's creation, first call
 * and mean call times, the step time and the process's peak resident memory.
 * --check fills every rank's input with small integers and checks every element of every
 * result exactly (the sums are exact in fp32); a wrong element fails the run (exit 1) on
 * the rank that saw it, which names it. --iters 0 runs the first call only and reports it
 * as the call (half the simulator's CPU of --iters 1). --shared: SMPI_SHARED_MALLOC'd
 * buffers (large payloads at many ranks; below).
 *
 * The program uses gcomp.h and gcomp_mpi.h only; gcomp's settings (GCOMP_ALGO,
 * GCOMP_ALPHA_BETA, GCOMP_CODEC) come from the environment smpirun passes on. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <mpi.h>

#include "gcomp.h"
#include "gcomp_mpi.h"

typedef struct {
  long long count;
  int iters, check, shared;
  double compute_ms;
} rank_opts;

static int parse(int argc, char **argv, rank_opts *o) {
  *o = (rank_opts){.count = 262144, .iters = 3};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--check")) {
      o->check = 1;
      continue;
    }
    if (!strcmp(a, "--shared")) {
      o->shared = 1;
      continue;
    }
    if (!v) return -1;
    if (!strcmp(a, "--count")) o->count = atoll(v);
    else if (!strcmp(a, "--iters")) o->iters = atoi(v);
    else if (!strcmp(a, "--compute-ms")) o->compute_ms = atof(v);
    else return -1;
    i++;
  }
  /* --iters 0: the first call is the only one (and is reported as the call) */
  return o->count > 0 && o->iters >= 0 && o->compute_ms >= 0 && !(o->check && o->shared) ? 0 : -1;
}

/* Rank r's element i: small integers, so every sum is exact in fp32 */
static float value(int r, long long i) { return (float)((r * 7 + i * 3) % 11); }

static long long wrong(const float *out, long long count, int size) {
  for (long long i = 0; i < count; i++) {
    double want = 0;
    for (int r = 0; r < size; r++) want += value(r, i);
    if (out[i] != (float)want) return i;
  }
  return -1;
}

/* the process's peak resident memory: every simulated rank lives in it. With --shared the
 * ranks map the same pages, which resident memory counts once per mapping: the
 * proportional set size now (/proc/self/smaps_rollup, Pss) counts them once */
static double resident_bytes(int shared) {
  if (shared) {
    FILE *f = fopen("/proc/self/smaps_rollup", "r");
    char line[256];
    double kb = -1;
    while (f && fgets(line, sizeof line, f))
      if (sscanf(line, "Pss: %lf kB", &kb) == 1) break;
    if (f) fclose(f);
    if (kb >= 0) return kb * 1024.0;
  }
  struct rusage u;
  if (getrusage(RUSAGE_SELF, &u)) return 0;
  return (double)u.ru_maxrss * 1024.0;
}

static double slowest(double mine) {
  double max = 0;
  MPI_Allreduce(&mine, &max, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return max;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  rank_opts o;
  if (parse(argc, argv, &o) < 0) {
    if (rank == 0)
      fprintf(stderr, "usage: gcomp-sim-rank [--count N] [--iters K] [--compute-ms T] [--check | --shared]\n");
    MPI_Finalize();
    return 2;
  }
  size_t n = (size_t)o.count;
  /* --shared: every rank's buffers are the same physical pages (SMPI_SHARED_MALLOC), and
   * SMPI copies nothing out of them: memory and copying stay flat in the payload, the sums
   * are meaningless (so no --check), and network-only simulated times are unchanged */
  float *in = o.shared ? SMPI_SHARED_MALLOC(n * sizeof *in) : malloc(n * sizeof *in);
  float *out = o.shared ? SMPI_SHARED_MALLOC(n * sizeof *out) : malloc(n * sizeof *out);
  if (!in || !out) {
    fprintf(stderr, "gcomp-sim-rank: rank %d: no memory for %zu floats\n", rank, n);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  for (size_t i = 0; !o.shared && i < n; i++) in[i] = value(rank, (long long)i);
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = MPI_Wtime();
  gcomp_comm *comm = NULL;
  int st = gcomp_comm_init_mpi(MPI_COMM_WORLD, NULL, NULL, &comm);
  double t_create = MPI_Wtime() - t0;
  int failed = st < 0;
  if (failed) fprintf(stderr, "gcomp-sim-rank: rank %d: %s\n", rank, gcomp_last_error());
  double t_first = 0, t_calls = 0, t_steps = 0;
  long long bad = -1;
  for (int it = -1; !failed && it < o.iters; it++) {
    int timed = it >= 0 || o.iters == 0;
    double s0 = MPI_Wtime();
    if (timed && o.compute_ms > 0) smpi_execute(o.compute_ms * 1e-3);
    double c0 = MPI_Wtime();
    st = gcomp_allreduce(comm, in, out, n, GCOMP_FLOAT32, GCOMP_SUM, NULL, 0);
    double c1 = MPI_Wtime();
    if (st < 0) {
      fprintf(stderr, "gcomp-sim-rank: rank %d: call %d: %s\n", rank, it + 1, gcomp_last_error());
      failed = 1;
      break;
    }
    if (it < 0) t_first = c1 - c0;
    if (timed) t_calls += c1 - c0, t_steps += c1 - s0;
    if (o.check && bad < 0) bad = wrong(out, o.count, size);
  }
  if (bad >= 0) {
    fprintf(stderr, "gcomp-sim-rank: rank %d: element %lld of the sum is wrong\n", rank, bad);
    failed = 1;
  }
  const char *algo = failed ? "" : gcomp_comm_last_algo(comm);
  int any_failed = (int)slowest(failed);
  double create = slowest(t_create), first = slowest(t_first);
  int ncalls = o.iters ? o.iters : 1;
  double call = slowest(t_calls / ncalls), step = slowest(t_steps / ncalls);
  if (rank == 0 && !any_failed)
    printf("{\"ranks\": %d, \"bytes\": %lld, \"algo\": \"%s\", \"sim_s\": %.9g, \"step_s\": %.9g, "
           "\"create_s\": %.9g, \"first_call_s\": %.9g, \"rss_bytes\": %.0f, "
           "\"checked\": %d}\n",
           size, o.count * 4, algo, call, step, create, first, resident_bytes(o.shared), o.check);
  gcomp_comm_destroy(comm);
  if (o.shared) {
    SMPI_SHARED_FREE(in);
    SMPI_SHARED_FREE(out);
  } else {
    free(in);
    free(out);
  }
  MPI_Finalize();
  return any_failed ? 1 : 0;
}
