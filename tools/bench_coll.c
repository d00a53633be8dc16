/* gcomp-bench reduce_scatter|allgather|broadcast|alltoall: nccl-tests-style table of time,
 * algbw and busbw per size (size: the whole buffer, size x block, as nccl-tests counts it),
 * the CPU a rank spends per call beside the time, and optionally Open MPI's same call on
 * the same buffers in the same processes (--baseline mpi, launched by mpirun). Only gcomp.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef GCOMP_BENCH_MPI
#include <mpi.h>
#endif

#include "bench.h"
#include "gcomp.h"

typedef struct {
  const char *coll;
  size_t minb, maxb;
  double factor;
  int iters, rounds, mpi;
  const char *codec;
} co_opts;

static double wall_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
static double cpu_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double all_max(gcomp_comm *c, double v) {
  gcomp_allreduce(c, &v, &v, 1, GCOMP_FLOAT64, GCOMP_MAX, NULL, 0);
  return v;
}
static double all_mean(gcomp_comm *c, double v) {
  gcomp_allreduce(c, &v, &v, 1, GCOMP_FLOAT64, GCOMP_AVG, NULL, 0);
  return v;
}

/* One call of the collective over `total` floats (block = total / size) */
static int one(gcomp_comm *c, const char *coll, float *send, float *recv, size_t total,
               gcomp_codec *codec) {
  int n = gcomp_comm_size(c);
  size_t block = total / (size_t)n;
  if (!strcmp(coll, "reduce_scatter"))
    return gcomp_reduce_scatter(c, send, recv, block, GCOMP_FLOAT32, GCOMP_SUM, codec, total);
  if (!strcmp(coll, "allgather"))
    return gcomp_allgather(c, send, recv, block, GCOMP_FLOAT32, codec, total);
  if (!strcmp(coll, "broadcast")) return gcomp_broadcast(c, recv, total, GCOMP_FLOAT32, 0);
  if (!strcmp(coll, "barrier")) return gcomp_barrier(c);
  return gcomp_alltoall(c, send, recv, block, GCOMP_FLOAT32);
}

#ifdef GCOMP_BENCH_MPI
static int one_mpi(const char *coll, float *send, float *recv, size_t total, int n) {
  int block = (int)(total / (size_t)n);
  if (!strcmp(coll, "reduce_scatter"))
    return MPI_Reduce_scatter_block(send, recv, block, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  if (!strcmp(coll, "allgather"))
    return MPI_Allgather(send, block, MPI_FLOAT, recv, block, MPI_FLOAT, MPI_COMM_WORLD);
  if (!strcmp(coll, "broadcast")) return MPI_Bcast(recv, (int)total, MPI_FLOAT, 0, MPI_COMM_WORLD);
  if (!strcmp(coll, "barrier")) return MPI_Barrier(MPI_COMM_WORLD);
  return MPI_Alltoall(send, block, MPI_FLOAT, recv, block, MPI_FLOAT, MPI_COMM_WORLD);
}
static int mpi_allgather(void *ctx, const void *mine, size_t len, void *all) {
  (void)ctx;
  return MPI_Allgather(mine, (int)len, MPI_BYTE, all, (int)len, MPI_BYTE, MPI_COMM_WORLD) != MPI_SUCCESS;
}
#endif

/* "64m", "8", "1g": bytes, or -1 */
static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* Median over rounds of the per-call time (slowest rank) and CPU (mean of the ranks) */
static char algo_[64];   /* the algorithm of the last timed gcomp call */
static int time_calls(gcomp_comm *c, const co_opts *o, float *send, float *recv, size_t total,
                      gcomp_codec *codec, int mpi, double *t, double *cpu) {
  double ts[16], cs[16];
  int n = gcomp_comm_size(c);
  for (int r = 0; r < o->rounds; r++) {
    int st = gcomp_barrier(c);
    if (st < 0) return st;
    double w0 = wall_s(), c0 = cpu_s();
    for (int i = 0; i < o->iters; i++) {
#ifdef GCOMP_BENCH_MPI
      if (mpi) {
        one_mpi(o->coll, send, recv, total, n);
        continue;
      }
#endif
      (void)mpi;
      st = one(c, o->coll, send, recv, total, codec);
      if (st < 0) return st;
    }
    double dt = wall_s() - w0, dc = cpu_s() - c0;
    if (!mpi) snprintf(algo_, sizeof algo_, "%s", gcomp_comm_last_algo(c));
    ts[r] = all_max(c, dt / o->iters);
    cs[r] = all_mean(c, dc / o->iters);
  }
  qsort(ts, (size_t)o->rounds, sizeof *ts, cmp_d);
  qsort(cs, (size_t)o->rounds, sizeof *cs, cmp_d);
  *t = ts[o->rounds / 2], *cpu = cs[o->rounds / 2];
  return GCOMP_OK;
}

static int run(gcomp_comm *c, const co_opts *o) {
  int rank = gcomp_comm_rank(c), n = gcomp_comm_size(c);
  size_t cap = o->maxb / 4 + (size_t)n;
  float *send = malloc(cap * sizeof *send), *recv = malloc(cap * sizeof *recv);
  gcomp_codec *codec = NULL;
  if (!send || !recv || (o->codec && gcomp_codec_create(o->codec, &codec))) {
    free(send), free(recv);
    return GCOMP_ERR_NOMEM;
  }
  for (size_t i = 0; i < cap; i++) send[i] = recv[i] = (float)((int)((i * 7 + (size_t)rank) % 64) - 32) * 1e-3f;
  double busf = !strcmp(o->coll, "broadcast") ? 1.0 : (double)(n - 1) / n;
  if (rank == 0)
    printf("# gcomp-bench %s: %d ranks on %d node(s), float, %d iters x %d rounds (median), codec %s\n"
           "# %10s %12s %6s %22s | %9s %7s %7s %8s%s\n", o->coll, n, gcomp_comm_nnodes(c), o->iters,
           o->rounds, o->codec ? o->codec : "none", "size(B)", "count", "type", "algo",
           "time(us)", "algbw", "busbw", "cpu(us)", o->mpi ? " | mpi(us) mpi busbw  mpi/gcomp" : "");
  int st = GCOMP_OK;
  const int barrier = !strcmp(o->coll, "barrier");   /* one row of no data */
  for (double b = (double)o->minb; b <= (double)o->maxb && st == GCOMP_OK; b *= o->factor) {
    size_t total = ((size_t)b / 4 / (size_t)n) * (size_t)n;
    if (!total) total = (size_t)n;
    if (barrier) total = 0, b = (double)o->maxb;
    size_t bytes = total * 4;
    double t, cpu, tm = 0, cm = 0;
    one(c, o->coll, send, recv, total, codec);   /* warm-up */
    st = time_calls(c, o, send, recv, total, codec, 0, &t, &cpu);
    if (st == GCOMP_OK && o->mpi) st = time_calls(c, o, send, recv, total, NULL, 1, &tm, &cm);
    if (st < 0 || rank) continue;
    double algbw = (double)bytes / t * 1e-9;
    printf("  %10zu %12zu %6s %22s | %9.1f %7.2f %7.2f %8.1f", bytes, total, "float",
           algo_, t * 1e6, algbw, algbw * busf, cpu * 1e6);
    if (o->mpi) printf(" | %7.1f %9.2f %9.2fx", tm * 1e6, (double)bytes / tm * 1e-9 * busf, tm / t);
    printf("\n");
  }
  gcomp_codec_destroy(codec);
  free(send), free(recv);
  return st;
}

static int cmd(const char *coll, int argc, char **argv) {
  co_opts o = {.coll = coll, .minb = 8, .maxb = 64u << 20, .factor = 2, .iters = 10, .rounds = 3};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    int more = i + 1 < argc;
    double d = 0;
    int bad = 0;
    if ((!strcmp(a, "-b") || !strcmp(a, "-e")) && more) {
      int64_t v = 0;
      if (gcomp_bench_size(argv[++i], &v) || v < 4) {
        fprintf(stderr, "gcomp-bench %s: %s '%s' is not a size of at least 4 bytes (e.g. 64k, 16M)\n",
                coll, a, argv[i]);
        return 2;
      }
      *(a[1] == 'b' ? &o.minb : &o.maxb) = (size_t)v;
    }
    else if (!strcmp(a, "-f") && more) bad = gcomp_bench_num(coll, a, argv[++i], 1.01, 1e6, &o.factor);
    else if (!strcmp(a, "-n") && more) bad = gcomp_bench_num(coll, a, argv[++i], 1, 1e9, &d), o.iters = (int)d;
    else if (!strcmp(a, "--rounds") && more) bad = gcomp_bench_num(coll, a, argv[++i], 1, 16, &d), o.rounds = (int)d;
    else if (!strcmp(a, "--codec") && more) o.codec = argv[++i];
    else if (!strcmp(a, "--baseline") && more && !strcmp(argv[i + 1], "mpi")) o.mpi = 1, i++;
    else bad = 1;
    if (bad < 0) return 2;
    if (bad) {
      fprintf(stderr, "usage: gcomp-bench %s [-b MINBYTES] [-e MAXBYTES] [-f FACTOR] [-n ITERS]\n"
                      "       [--rounds R] [--codec SPEC] [--baseline mpi]\n"
                      "  launch with gcomp-run -n N (mpirun -n N with --baseline mpi); sizes are\n"
                      "  whole buffers (size x block); GCOMP_ALGO=%s=NAME forces an algorithm\n",
              coll, coll);
      return 2;
    }
  }
  gcomp_comm *c = NULL;
  int st;
#ifdef GCOMP_BENCH_MPI
  if (o.mpi) {
    MPI_Init(NULL, NULL);
    int r, s;
    MPI_Comm_rank(MPI_COMM_WORLD, &r), MPI_Comm_size(MPI_COMM_WORLD, &s);
    st = gcomp_comm_init_oob(r, s, NULL, mpi_allgather, NULL, NULL, &c);
  } else
#endif
  {
    if (o.mpi) {
      fprintf(stderr, "gcomp-bench %s: --baseline mpi: built without MPI\n", coll);
      return 2;
    }
    st = gcomp_comm_init_env(&c);
  }
  if (st == GCOMP_OK) st = run(c, &o);
  if (st < 0) fprintf(stderr, "gcomp-bench %s: %s: %s\n", coll, gcomp_strerror(st), gcomp_last_error());
  gcomp_comm_destroy(c);
#ifdef GCOMP_BENCH_MPI
  if (o.mpi) MPI_Finalize();
#endif
  return st < 0 ? 1 : 0;
}

static int cmd_rs(int argc, char **argv) { return cmd("reduce_scatter", argc, argv); }
static int cmd_ag(int argc, char **argv) { return cmd("allgather", argc, argv); }
static int cmd_bc(int argc, char **argv) { return cmd("broadcast", argc, argv); }
static int cmd_a2a(int argc, char **argv) { return cmd("alltoall", argc, argv); }
static int cmd_bar(int argc, char **argv) { return cmd("barrier", argc, argv); }

GCOMP_BENCH_CONSTRUCTOR(register_coll) {
  gcomp_bench_register("reduce_scatter", cmd_rs, "reduce_scatter per size (nccl-tests format), vs MPI");
  gcomp_bench_register("allgather", cmd_ag, "allgather per size (nccl-tests format), vs MPI");
  gcomp_bench_register("broadcast", cmd_bc, "broadcast per size (nccl-tests format), vs MPI");
  gcomp_bench_register("alltoall", cmd_a2a, "alltoall per size (nccl-tests format), vs MPI");
  gcomp_bench_register("barrier", cmd_bar, "barrier (one row, no data), vs MPI");
}
