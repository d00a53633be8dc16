/* gcomp-bench allreduce: nccl-tests-style table of time, algbw and busbw per size, out of
 * place and in place, with #wrong from an exact check; optionally Open MPI's MPI_Allreduce
 * on the same buffers in the same processes, interleaved with gcomp's runs. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifdef GCOMP_BENCH_MPI
#include <mpi.h>
#endif

#include "bench.h"
#include "gcomp_internal.h"   /* gcomp_error_restore; the rest is gcomp.h, as a user's program */

typedef struct {
  size_t minb, maxb;
  double factor;
  int iters, warmup, rounds;
  int json, check, mpi;
  const char *codecs[8];   /* --codec, repeatable; none: one uncompressed table */
  int ncodecs;
  double overlap_ms;       /* --overlap-ms: a step of that much device compute per call */
  int overlap_cpu;         /* --overlap-cpu: that compute runs on the CPU (a fixed amount of
                              work that takes overlap_ms alone), not on an accelerator */
  int delay_rank;          /* --delay-rank R --delay-ms T: rank R arrives T ms late at every */
  double delay_ms;         /* timed call (a straggler, for the detector) */
  const char *ab;          /* --ab NAME=VALUE: rounds alternate (ABBA) with a communicator
                              that has this setting */
} ar_opts;

static const ar_opts *g_opts;   /* for time_gcomp's straggler */
static gcomp_comm *g_comm_b;    /* --ab's communicator */

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
/* CPU seconds of this process, every thread (the progress thread's too) */
static double cpu_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

#ifdef GCOMP_BENCH_MPI
static int mpi_allgather(void *ctx, const void *mine, size_t len, void *all) {
  (void)ctx;
  return MPI_Allgather(mine, (int)len, MPI_BYTE, all, (int)len, MPI_BYTE, MPI_COMM_WORLD) !=
         MPI_SUCCESS;
}
#endif

/* Agrees on a figure across ranks: the slowest rank's time is the collective's time. */
static double all_max(gcomp_comm *comm, double v) {
  gcomp_allreduce(comm, &v, &v, 1, GCOMP_FLOAT64, GCOMP_MAX, NULL, 0);
  return v;
}
static double all_mean(gcomp_comm *comm, double v) {
  gcomp_allreduce(comm, &v, &v, 1, GCOMP_FLOAT64, GCOMP_AVG, NULL, 0);
  return v;
}

/* Elements found wrong over the whole run (every rank agrees on it): the exit status says
 * so, so that a script running the benchmark (scripts/demo) cannot carry on past them. */
static size_t bench_wrong;

/* Values whose sum over any rank count is exact in fp32, so #wrong can be exact. */
static void fill(float *x, size_t n, int rank, unsigned salt) {
  for (size_t i = 0; i < n; i++) x[i] = (float)((int)((i * 7 + (size_t)rank * 13 + salt) % 64) - 32);
}
static size_t count_wrong(const float *x, size_t n, int size, unsigned salt) {
  size_t bad = 0;
  for (size_t i = 0; i < n; i++) {
    float want = 0;
    for (int r = 0; r < size; r++) want += (float)((int)((i * 7 + (size_t)r * 13 + salt) % 64) - 32);
    bad += x[i] != want;
  }
  return bad;
}

/* Gradient-like values for compressed runs: Gaussian-ish, sigma 1e-3, rank-dependent. */
static void fill_grad(float *x, size_t n, int rank, unsigned salt) {
  uint64_t s = 0x9e3779b97f4a7c15ull * (uint64_t)(rank + 1) + salt;
  for (size_t i = 0; i < n; i++) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    /* sum of 4 uniforms: close enough to a bell for a codec's purposes, and cheap */
    uint64_t t = s;
    double u = 0;
    for (int k = 0; k < 4; k++, t >>= 16) u += (double)(t & 0xffff) / 65536.0;
    x[i] = (float)((u - 2.0) * 1.7e-3);
  }
}

/* The ranks meet in a dense allreduce of one value, outside any time: else a rank's first
 * call would time its wait for peers still filling or copying their buffers (at 64 MiB,
 * 4 ranks on 2 cores, filling takes tens of ms, and the ranks end it apart). */
static int meet(gcomp_comm *comm) {
  float one = 1.0f;
  return gcomp_allreduce(comm, &one, &one, 1, GCOMP_FLOAT32, GCOMP_SUM, NULL, 0);
}

/* The tensor key is the size: one error-feedback slot per tensor shape. The ranks meet
 * before the first call; refill (in place): copied into recv before each call, outside the
 * time, and the ranks meet again. Not with --delay-ms, whose calls are to show the delayed
 * rank's lateness, every one of them (the meetings would be calls where it is on time). Without
 * the refill each call in place reduces what the last one left, n ranks' worth larger: at
 * 4 ranks the values pass fp32's range after about 64 calls, and from there a lossy codec
 * sends every bucket raw (NaN and Inf), so the column would time another data set.
 * cpu (may be NULL): the process's CPU seconds per timed call, the refills' left out.
 *
 * Only the wall clock (vDSO, tens of ns) is read around each refill. The process CPU clock
 * is a system call (1-9 us on a loaded 2-vCPU VM): read around each refill, one of its two
 * reads fell inside the timed part and made the 8 B call in place 3.0 us against 0.6 out
 * of place. The refills' CPU is taken from a loop of them alone, after the timed one. */
static int refill_once(gcomp_comm *comm, float *recv, const float *refill, size_t n,
                       int delaying) {
  memcpy(recv, refill, n * sizeof *recv);
  return delaying ? GCOMP_OK : meet(comm);
}

static int time_gcomp(gcomp_comm *comm, float *send, float *recv, size_t n, int iters,
                      gcomp_codec *codec, const float *refill, double *secs, double *cpu) {
  int delaying = g_opts && g_opts->delay_ms > 0;   /* the same on every rank */
  if (!refill && !delaying) {
    int st = meet(comm);
    if (st < 0) return st;
  }
  double t0 = now_s(), c0 = cpu_s(), untimed = 0;
  int late = delaying && gcomp_comm_rank(comm) == g_opts->delay_rank;
  for (int i = 0; i < iters; i++) {
    if (refill) {
      double w0 = now_s();
      int st = refill_once(comm, recv, refill, n, delaying);
      if (st < 0) return st;
      untimed += now_s() - w0;
    }
    if (late) {
      struct timespec ts = {(time_t)(g_opts->delay_ms / 1e3),
                            (long)(fmod(g_opts->delay_ms, 1e3) * 1e6)};
      nanosleep(&ts, NULL);
    }
    int st = gcomp_allreduce(comm, send, recv, n, GCOMP_FLOAT32, GCOMP_SUM, codec, n * 4);
    if (st < 0) return st;
  }
  *secs = (now_s() - t0 - untimed) / iters;
  double used = cpu_s() - c0;
  if (cpu && refill) {
    double u0 = cpu_s();
    for (int i = 0; i < iters; i++) {
      int st = refill_once(comm, recv, refill, n, delaying);
      if (st < 0) return st;
    }
    used -= cpu_s() - u0;
  }
  if (cpu) *cpu = (used > 0 ? used : 0) / iters;
  return GCOMP_OK;
}

#ifdef GCOMP_BENCH_MPI
static double time_mpi(float *send, float *recv, size_t n, int iters) {
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = now_s();
  for (int i = 0; i < iters; i++)
    MPI_Allreduce(send == recv ? MPI_IN_PLACE : send, recv, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  double t = (now_s() - t0) / iters;
  MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return t;
}
#endif

/* The largest size's time per codec, for the closing comparison. */
static struct {
  const char *spec;
  char algo[32];
  double t, cpu;   /* out of place: time per call, CPU a rank per call (mean of the ranks) */
  size_t bytes;
} last_row[8];
static int nlast;

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static int run(gcomp_comm *comm, const ar_opts *o, const char *spec) {
  int rank = gcomp_comm_rank(comm), size = gcomp_comm_size(comm);
  /* 64-byte aligned, as PyTorch's CPU allocator aligns tensors (OSU's and nccl-tests'
   * buffers are page- and 256-byte aligned); sign's decode streams the result at 32 bytes
   * a store from 32-byte boundaries, at 16 from malloc's 16 (gcomp_decode_tally) */
  float *send = NULL, *recv = NULL;
  if (posix_memalign((void **)&send, 64, o->maxb + 64) ||
      posix_memalign((void **)&recv, 64, o->maxb + 64)) {
    free(send);
    return GCOMP_ERR_NOMEM;
  }
  gcomp_codec *codec = NULL;
  int cst = spec ? gcomp_codec_create(spec, &codec) : GCOMP_OK;
  if (cst < 0) {
    free(send), free(recv);
    return cst;
  }
  float *ref = malloc(o->maxb + 64);   /* the fp32 result; in place, what to refill with */
  if (!ref) {
    free(send), free(recv), gcomp_codec_destroy(codec);
    return GCOMP_ERR_NOMEM;
  }
  if (rank == 0 && !o->json) {
    printf("# gcomp-bench allreduce: %d ranks on %d node(s), float sum, %d iters x %d rounds "
           "(median), codec %s\n", size, gcomp_comm_nnodes(comm), o->iters, o->rounds,
           spec ? spec : "none");
    if (codec)
      printf("# algbw/busbw are effective: computed from the uncompressed size; wire B/call: bytes\n"
             "# the busiest rank sent through the fabric (not its copies into the node's shared\n"
             "# segment); ratio: what a flat fp32 ring sends per rank over that\n");
    printf("# %10s %12s %6s %6s %8s | %9s %7s %7s %6s | %9s %7s %7s %6s%s\n", "size", "count",
           "type", "redop", "algo", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw",
           "#wrong", codec ? " |  wire B/call  ratio  max rel err" : o->mpi ? " |   mpi time  mpi busbw  busbw ratio" : "");
    printf("# %10s %12s %6s %6s %8s | %9s %7s %7s %6s | %9s %7s %7s %6s\n", "(B)", "(elements)",
           "", "", "", "(us)", "(GB/s)", "(GB/s)", "oop", "(us)", "(GB/s)", "(GB/s)", "inplace");
  }
  if (rank == 0 && o->json) printf("[");
  gcomp_comm_stats st0 = {.struct_size = sizeof st0};
  gcomp_comm_get_stats(comm, &st0);
  double sum_busbw = 0, last_co = 0, last_ci = 0;   /* the largest size's CPU a rank per call */
  int nsizes = 0, status = GCOMP_OK;
  for (size_t bytes = o->minb; bytes <= o->maxb && status == GCOMP_OK;
       bytes = (size_t)fmax((double)bytes + 4, (double)bytes * o->factor)) {
    size_t n = bytes / 4;
    if (!n) continue;
    double t_oop[16], t_ip[16], t_mpi[16], b_oop[16], b_ip[16];
    double c_oop[16], c_ip[16], cb_oop[16], cb_ip[16];   /* CPU a rank per call */
    int na = 0, nb = 0;
    size_t wrong_oop = 0, wrong_ip = 0;
    for (int w = 0; w < o->warmup && status == GCOMP_OK; w++) {
      double dummy;
      status = time_gcomp(comm, send, recv, n, 1, codec, NULL, &dummy, NULL);
    }
    double max_err = 0, wire = 0;
    char ran[32] = "";
    if (codec) {
      /* the error against an fp32 allreduce of the same data, and the bytes one call sends */
      fill_grad(send, n, rank, 99);
      status = gcomp_allreduce(comm, send, ref, n, GCOMP_FLOAT32, GCOMP_SUM, NULL, 0);
      gcomp_comm_stats s0 = {.struct_size = sizeof s0}, s1 = {.struct_size = sizeof s1};
      gcomp_comm_get_stats(comm, &s0);
      if (status == GCOMP_OK)
        status = gcomp_allreduce(comm, send, recv, n, GCOMP_FLOAT32, GCOMP_SUM, codec, bytes);
      gcomp_comm_get_stats(comm, &s1);
      double top = 0;
      for (size_t i = 0; i < n; i++) {
        double e = fabs((double)recv[i] - ref[i]);
        if (e > max_err) max_err = e;
        if (fabs(ref[i]) > top) top = fabs(ref[i]);
      }
      max_err = all_max(comm, top > 0 ? max_err / top : max_err);
      wire = all_max(comm, (double)(s1.wire_bytes - s0.wire_bytes));
    }
    for (int r = 0; r < o->rounds && status == GCOMP_OK; r++) {
      /* --ab: rounds 1, 2, 5, 6, ... (ABBA order, so a drift over the run or a round's
       * position favours neither) time the other communicator */
      gcomp_comm *tc = g_comm_b && (r % 4 == 1 || r % 4 == 2) ? g_comm_b : comm;
      double *to_r = tc == comm ? &t_oop[na] : &b_oop[nb];
      double *ti_r = tc == comm ? &t_ip[na] : &b_ip[nb];
      double *co_r = tc == comm ? &c_oop[na] : &cb_oop[nb];
      double *ci_r = tc == comm ? &c_ip[na] : &cb_ip[nb];
      if (codec) fill_grad(send, n, rank, (unsigned)r);
      else fill(send, n, rank, (unsigned)r);
      status = time_gcomp(tc, send, recv, n, o->iters, codec, NULL, to_r, co_r);
      if (status < 0) break;
      *to_r = all_max(comm, *to_r);
      *co_r = all_mean(comm, *co_r);
      if (o->check && r == 0) wrong_oop = count_wrong(recv, n, size, 0);
      /* in place: refill before each call so the check sees one reduction */
      if (codec) fill_grad(recv, n, rank, 1);
      else fill(recv, n, rank, 1);
      memcpy(ref, recv, n * sizeof *ref);
      status = gcomp_allreduce(comm, recv, recv, n, GCOMP_FLOAT32, GCOMP_SUM, codec, bytes);
      if (o->check && r == 0 && status == GCOMP_OK) wrong_ip = count_wrong(recv, n, size, 1);
      snprintf(ran, sizeof ran, "%s", gcomp_comm_last_algo(comm));   /* (not the meeting's) */
      if (status == GCOMP_OK)
        status = time_gcomp(tc, recv, recv, n, o->iters, codec, ref, ti_r, ci_r);
      if (status < 0) break;
      *ti_r = all_max(comm, *ti_r);
      *ci_r = all_mean(comm, *ci_r);
      if (tc == comm) na++;
      else nb++;
#ifdef GCOMP_BENCH_MPI
      if (o->mpi) t_mpi[r] = time_mpi(send, recv, n, o->iters);
#endif
    }
    if (status < 0) break;
    if (codec) wrong_oop = wrong_ip = 0;   /* lossy: the error column says how far off */
    wrong_oop = (size_t)all_max(comm, (double)wrong_oop);
    wrong_ip = (size_t)all_max(comm, (double)wrong_ip);
    bench_wrong += wrong_oop + wrong_ip;
    qsort(t_oop, (size_t)na, sizeof(double), cmp_d);
    qsort(t_ip, (size_t)na, sizeof(double), cmp_d);
    double to = t_oop[na / 2], ti = t_ip[na / 2];
    qsort(c_oop, (size_t)na, sizeof(double), cmp_d);
    qsort(c_ip, (size_t)na, sizeof(double), cmp_d);
    double co = c_oop[na / 2], ci = c_ip[na / 2];
    last_co = co, last_ci = ci;
    if (nb && rank == 0 && !o->json) {
      qsort(b_oop, (size_t)nb, sizeof(double), cmp_d);
      qsort(b_ip, (size_t)nb, sizeof(double), cmp_d);
      qsort(cb_oop, (size_t)nb, sizeof(double), cmp_d);
      qsort(cb_ip, (size_t)nb, sizeof(double), cmp_d);
      printf("# --ab %s, %d and %d rounds in ABBA order, medians: out of place %.1f us against "
             "%.1f us without it (%.3f), in place %.1f against %.1f (%.3f)\n", o->ab, nb, na,
             b_oop[nb / 2] * 1e6, to * 1e6, b_oop[nb / 2] / to, b_ip[nb / 2] * 1e6, ti * 1e6,
             b_ip[nb / 2] / ti);
      printf("#   CPU a rank per call, mean of the ranks: out of place %.1f us against %.1f us "
             "(%.3f), in place %.1f against %.1f (%.3f)\n", cb_oop[nb / 2] * 1e6, co * 1e6,
             cb_oop[nb / 2] / co, cb_ip[nb / 2] * 1e6, ci * 1e6, cb_ip[nb / 2] / ci);
    }
    double bus = 2.0 * (size - 1) / size;
    double algo = (double)bytes / to / 1e9, algi = (double)bytes / ti / 1e9;
    double tm = 0;
    if (o->mpi) {
      qsort(t_mpi, (size_t)o->rounds, sizeof(double), cmp_d);
      tm = t_mpi[o->rounds / 2];
    }
    sum_busbw += algo * bus;
    nsizes++;
    if (nlast < 8) {
      last_row[nlast].spec = spec ? spec : "none";
      snprintf(last_row[nlast].algo, sizeof last_row[nlast].algo, "%s", ran);
      last_row[nlast].t = to;
      last_row[nlast].cpu = co;
      last_row[nlast].bytes = bytes;
    }
    if (rank == 0) {
      const char *algo_name = ran;   /* what the timed calls ran */
      if (o->json) {
        printf("%s\n {\"bytes\": %zu, \"count\": %zu, \"type\": \"float\", \"redop\": \"sum\", "
               "\"algo\": \"%s\", \"ranks\": %d, \"oop_us\": %.3f, \"oop_algbw\": %.4f, "
               "\"oop_busbw\": %.4f, \"oop_wrong\": %zu, \"ip_us\": %.3f, \"ip_algbw\": %.4f, "
               "\"ip_busbw\": %.4f, \"ip_wrong\": %zu, \"oop_cpu_us\": %.3f, \"ip_cpu_us\": %.3f",
               nsizes > 1 ? "," : "", bytes, n, algo_name, size, to * 1e6, algo, algo * bus,
               wrong_oop, ti * 1e6, algi, algi * bus, wrong_ip, co * 1e6, ci * 1e6);
        if (o->mpi)
          printf(", \"mpi_us\": %.3f, \"mpi_busbw\": %.4f, \"busbw_ratio\": %.4f", tm * 1e6,
                 (double)bytes / tm / 1e9 * bus, tm / to);
        if (codec)
          printf(", \"codec\": \"%s\", \"wire_bytes\": %.0f, \"compression\": %.4f, "
                 "\"max_rel_err\": %.4g", spec, wire, wire > 0 ? (double)bytes * bus / wire : 0, max_err);
        printf("}");
      } else {
        printf("  %10zu %12zu %6s %6s %8s | %9.1f %7.3f %7.3f %6zu | %9.1f %7.3f %7.3f %6zu",
               bytes, n, "float", "sum", algo_name, to * 1e6, algo, algo * bus, wrong_oop, ti * 1e6,
               algi, algi * bus, wrong_ip);
        if (o->mpi)
          printf(" | %9.1f %10.3f %12.3f", tm * 1e6, (double)bytes / tm / 1e9 * bus, tm / to);
        /* fp32 bytes a flat ring would send per rank over the fabric bytes sent */
        if (codec)
          printf(" | %12.0f %6.2f %12.3g", wire, wire > 0 ? (double)bytes * bus / wire : 0, max_err);
        printf("\n");
      }
      fflush(stdout);
    }
  }
  /* where this rank's time went, over every call of the table */
  gcomp_comm_stats st1 = {.struct_size = sizeof st1};
  gcomp_comm_get_stats(comm, &st1);
  double tot = st1.total_s - st0.total_s;
  double split[5] = {st1.wait_s - st0.wait_s, st1.encode_s - st0.encode_s,
                     st1.decode_s - st0.decode_s, st1.reduce_s - st0.reduce_s, tot};
  if (rank == 0) {
    if (o->json) printf("\n]\n");
    else if (nsizes) {
      printf("# Avg bus bandwidth    : %g\n", sum_busbw / nsizes);
      if (tot > 0)
        printf("# rank 0 time split: wait %.0f%%, encode %.0f%%, decode %.0f%%, reduce %.0f%%, "
               "other (posting, copies, progress) %.0f%%\n", 100 * split[0] / tot,
               100 * split[1] / tot, 100 * split[2] / tot, 100 * split[3] / tot,
               /* phases overlap by a timer read or two: never print a negative rest */
               fmax(0.0, 100 * (tot - split[0] - split[1] - split[2] - split[3]) / tot));
      /* with more ranks than cores the time is what the ranks' CPU adds up to, and this is
       * steadier across runs than the time, which the neighbours' load moves */
      printf("# CPU a rank per call at the largest size (mean of the ranks, every thread): out "
             "of place %.1f us, in place %.1f us\n", last_co * 1e6, last_ci * 1e6);
    }
  }
  /* NaN and Inf in the results of every call of the table (each rank counts its share of
   * each result): the inputs have none, so any is the benchmark's or the library's fault */
  double bad = (double)(st1.nonfinite - st0.nonfinite);
  if (status == GCOMP_OK)
    gcomp_allreduce(comm, &bad, &bad, 1, GCOMP_FLOAT64, GCOMP_SUM, NULL, 0);
  if (rank == 0 && !o->json && nsizes && status == GCOMP_OK)
    printf("# non-finite values in the results: %.0f\n", bad);
  if (nsizes) nlast++;
  gcomp_codec_destroy(codec);
  free(send);
  free(recv);
  free(ref);
  return status;
}

/* --overlap-ms T: one training step is T ms of compute on an accelerator (the CPU sleeps,
 * as it does while a GPU works) and one allreduce of the gradients. Blocking: compute, then
 * gcomp_allreduce. Overlapped: gcomp_iallreduce, compute, gcomp_request_wait (the previous
 * step's gradients travel while this step computes, as DDP's bucketed backward does). */
static void device_compute(double ms) {
  struct timespec ts = {(time_t)(ms / 1e3), (long)(fmod(ms, 1e3) * 1e6)};
  while (nanosleep(&ts, &ts) != 0) {}
}

/* --overlap-cpu: a fixed amount of arithmetic, calibrated to take `ms` on an idle core, so
 * that a progress thread competing for the core makes it take longer. */
static double cpu_iters_per_ms;
static volatile double cpu_sink;
static void cpu_spin(double iters) {
  double x = 1.0;
  for (long i = 0; i < (long)iters; i++) x = x * 1.0000001 + 1e-9;
  cpu_sink = x;
}
static void cpu_calibrate(void) {
  double best = 1e30;
  for (int r = 0; r < 5; r++) {   /* the fastest of five: an idle core */
    double t0 = now_s();
    cpu_spin(2e7);
    double t = now_s() - t0;
    if (t < best) best = t;
  }
  cpu_iters_per_ms = 2e7 / (best * 1e3);
}
static void step_compute(const ar_opts *o) {
  if (o->overlap_cpu) cpu_spin(o->overlap_ms * cpu_iters_per_ms);
  else device_compute(o->overlap_ms);
}

static int run_overlap(gcomp_comm *comm, const ar_opts *o) {
  int rank = gcomp_comm_rank(comm);
  if (o->overlap_cpu) cpu_calibrate();
  float *buf = malloc(o->maxb);
  if (!buf) return gcomp_error_restore(GCOMP_ERR_NOMEM, "overlap buffer");
  memset(buf, 0, o->maxb);
  if (rank == 0 && !o->json)
    printf("# gcomp-bench allreduce --overlap-ms %g%s: %d ranks, %d iters x %d rounds (median)\n"
           "#       size  allreduce (ms)  compute (ms)  blocking step (ms)  overlapped step (ms)"
           "  hidden\n", o->overlap_ms, o->overlap_cpu ? " (CPU compute)" : "",
           gcomp_comm_size(comm), o->iters, o->rounds);
  int st = GCOMP_OK;
  for (size_t b = o->minb; b <= o->maxb && st == GCOMP_OK; b = (size_t)((double)b * o->factor)) {
    size_t n = b / 4 ? b / 4 : 1;
    double ta[16], tb[16], to[16];
    for (int r = 0; r < o->rounds && st == GCOMP_OK; r++) {
      double t0 = now_s();
      for (int i = 0; i < o->iters && st == GCOMP_OK; i++)
        st = gcomp_allreduce(comm, buf, buf, n, GCOMP_FLOAT32, GCOMP_SUM, NULL, 1);
      ta[r] = all_max(comm, (now_s() - t0) / o->iters);
      t0 = now_s();
      for (int i = 0; i < o->iters && st == GCOMP_OK; i++) {
        step_compute(o);
        st = gcomp_allreduce(comm, buf, buf, n, GCOMP_FLOAT32, GCOMP_SUM, NULL, 1);
      }
      tb[r] = all_max(comm, (now_s() - t0) / o->iters);
      t0 = now_s();
      for (int i = 0; i < o->iters && st == GCOMP_OK; i++) {
        gcomp_request *req = NULL;
        st = gcomp_iallreduce(comm, buf, buf, n, GCOMP_FLOAT32, GCOMP_SUM, NULL, 1, &req);
        step_compute(o);
        if (st == GCOMP_OK) st = gcomp_request_wait(req);
      }
      to[r] = all_max(comm, (now_s() - t0) / o->iters);
    }
    if (st < 0) break;
    qsort(ta, (size_t)o->rounds, sizeof(double), cmp_d);
    qsort(tb, (size_t)o->rounds, sizeof(double), cmp_d);
    qsort(to, (size_t)o->rounds, sizeof(double), cmp_d);
    double a = ta[o->rounds / 2], bl = tb[o->rounds / 2], ov = to[o->rounds / 2];
    double hidden = a > 0 ? (bl - ov) / (a < o->overlap_ms * 1e-3 ? a : o->overlap_ms * 1e-3) : 0;
    if (rank == 0 && o->json)
      printf("{\"bytes\": %zu, \"allreduce_ms\": %.4f, \"compute_ms\": %g, \"blocking_ms\": %.4f, "
             "\"overlapped_ms\": %.4f, \"hidden\": %.4f}\n", b, a * 1e3, o->overlap_ms, bl * 1e3,
             ov * 1e3, hidden);
    else if (rank == 0)
      printf("%12zu %15.3f %13.3f %19.3f %21.3f %6.0f%%\n", b, a * 1e3, o->overlap_ms, bl * 1e3,
             ov * 1e3, hidden * 100);
  }
  free(buf);
  return st;
}

static int num_arg(const char *opt, const char *text, double lo, double hi, double *out) {
  return gcomp_bench_num("gcomp-bench allreduce", opt, text, lo, hi, out);
}

/* --ab's communicator meets through the first: an allgather of small records, as a MAX
 * allreduce of one int32 a byte (zero but for each rank's own record) */
static int ab_allgather(void *ctx, const void *mine, size_t len, void *all) {
  gcomp_comm *a = ctx;
  int size = gcomp_comm_size(a), rank = gcomp_comm_rank(a);
  size_t n = len * (size_t)size;
  int32_t *w = calloc(n ? n : 1, sizeof *w);
  if (!w) return -1;
  for (size_t i = 0; i < len; i++) w[(size_t)rank * len + i] = ((const uint8_t *)mine)[i];
  int st = gcomp_allreduce(a, w, w, n, GCOMP_INT32, GCOMP_MAX, NULL, 0);
  for (size_t i = 0; st == GCOMP_OK && i < n; i++) ((uint8_t *)all)[i] = (uint8_t)w[i];
  free(w);
  return st == GCOMP_OK ? 0 : -1;
}

/* The communicator --ab NAME=VALUE names: comm's settings and calibration, and that one. */
static int make_ab(gcomp_comm *comm, const char *ab) {
  char name[128];
  const char *eq = strchr(ab, '=');
  size_t k = eq ? (size_t)(eq - ab) : 0;
  if (k == 0 || k >= sizeof name)
    return gcomp_error_set(GCOMP_ERR_INVALID, __FILE__, __LINE__, "--ab '%s': NAME=VALUE", ab);
  memcpy(name, ab, k), name[k] = '\0';
  gcomp_config *cfg = NULL;
  int st = gcomp_config_create(&cfg);
  if (st == GCOMP_OK) st = gcomp_config_set(cfg, name, ab + k + 1);
  if (st == GCOMP_OK) st = gcomp_config_share_calibration(cfg, comm);
  if (st == GCOMP_OK)
    st = gcomp_comm_init_oob(gcomp_comm_rank(comm), gcomp_comm_size(comm), NULL, ab_allgather,
                             comm, cfg, &g_comm_b);
  gcomp_config_destroy(cfg);
  return st;
}

static int cmd_allreduce(int argc, char **argv) {
  ar_opts o = {.minb = 8, .maxb = 64u << 20, .factor = 2, .iters = 10, .warmup = 2, .rounds = 3,
               .check = 1};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    int more = i + 1 < argc;
    int64_t v;
    double d = 0;
    int bad = 0;   /* a known option with a bad value: already said why */
    if ((!strcmp(a, "-b") || !strcmp(a, "--minbytes")) && more && !gcomp_bench_size(argv[i + 1], &v)) o.minb = (size_t)v, i++;
    else if ((!strcmp(a, "-e") || !strcmp(a, "--maxbytes")) && more && !gcomp_bench_size(argv[i + 1], &v)) o.maxb = (size_t)v, i++;
    else if ((!strcmp(a, "-f") || !strcmp(a, "--stepfactor")) && more)
      bad = num_arg(a, argv[++i], 1.01, 1e6, &o.factor);
    else if ((!strcmp(a, "-n") || !strcmp(a, "--iters")) && more)
      bad = num_arg(a, argv[++i], 1, 1e9, &d), o.iters = (int)d;
    else if ((!strcmp(a, "-w") || !strcmp(a, "--warmup_iters")) && more)
      bad = num_arg(a, argv[++i], 0, 1e9, &d), o.warmup = (int)d;
    else if (!strcmp(a, "--rounds") && more)
      bad = num_arg(a, argv[++i], 1, 16, &d), o.rounds = (int)d;
    else if (!strcmp(a, "--codec") && more && o.ncodecs == (int)(sizeof o.codecs / sizeof *o.codecs)) {
      fprintf(stderr, "gcomp-bench allreduce: at most 8 --codec options (a 9th: %s)\n", argv[i + 1]);
      return 2;
    } else if (!strcmp(a, "--codec") && more) o.codecs[o.ncodecs++] = argv[++i];
    else if (!strcmp(a, "--json")) o.json = 1;
    else if (!strcmp(a, "--no-check")) o.check = 0;
    else if (!strcmp(a, "--baseline") && more && !strcmp(argv[i + 1], "mpi")) o.mpi = 1, i++;
    else if (!strcmp(a, "--overlap-ms") && more)
      bad = num_arg(a, argv[++i], 0.001, 1e7, &o.overlap_ms);
    else if (!strcmp(a, "--overlap-cpu")) o.overlap_cpu = 1;
    else if (!strcmp(a, "--delay-rank") && more)
      bad = num_arg(a, argv[++i], 0, 1048576, &d), o.delay_rank = (int)d;
    else if (!strcmp(a, "--delay-ms") && more)
      bad = num_arg(a, argv[++i], 0.001, 1e7, &o.delay_ms);
    else if (!strcmp(a, "--ab") && more && strchr(argv[i + 1], '='))
      o.ab = argv[++i];
    else
      bad = 1;
    if (bad < 0) return 2;
    if (bad) {
      fprintf(stderr,
              "usage: gcomp-bench allreduce [-b MIN] [-e MAX] [-f FACTOR] [-n ITERS] [-w WARMUP]\n"
              "                             [--rounds R] [--codec SPEC] [--baseline mpi] [--json]\n"
              "                             [--overlap-ms T [--overlap-cpu]] [--delay-rank R --delay-ms T]\n"
              "                             [--ab NAME=VALUE]\n"
              "  launch with gcomp-run -n N (or mpirun -n N ... with --baseline mpi)\n"
              "  --overlap-ms T: steps of T ms of (accelerator) compute plus one allreduce, blocking\n"
              "  vs gcomp_iallreduce overlapped with the compute (--overlap-cpu: the compute is\n"
              "  a fixed amount of CPU work that takes T ms alone)\n"
              "  --delay-rank R --delay-ms T: rank R sleeps T ms before each timed call (a\n"
              "  straggler); the last line names the rank the detector found arriving last\n"
              "  --ab NAME=VALUE: every size's rounds alternate in ABBA order between the\n"
              "  communicator and one made with that setting (e.g. GCOMP_STREAM_BYTES=1024g);\n"
              "  a line gives both medians (the table is the rounds without it; --rounds >= 4)\n");
      return strcmp(a, "-h") && strcmp(a, "--help") ? 2 : 0;
    }
  }
  g_opts = &o;
  if (o.ab && (o.rounds < 4 || o.mpi || o.overlap_ms > 0)) {
    fprintf(stderr, "gcomp-bench allreduce: --ab needs --rounds 4 or more (ABBA), and neither "
            "--baseline mpi nor --overlap-ms\n");
    return 2;
  }
  if (o.minb < 4 || o.maxb < o.minb) {
    fprintf(stderr, "gcomp-bench allreduce: sizes from %zu to %zu bytes: -b must be at least 4 "
            "(one float) and -e at least -b\n", o.minb, o.maxb);
    return 2;
  }
  gcomp_comm *comm = NULL;
  int st;
  if (o.mpi) {
#ifdef GCOMP_BENCH_MPI
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    /* bootstrapped through MPI's allgather; nodes from GCOMP_NODE_ID or the host name */
    st = gcomp_comm_init_oob(rank, size, NULL, mpi_allgather, NULL, NULL, &comm);
#else
    fprintf(stderr, "gcomp-bench: built without MPI; --baseline mpi is not available\n");
    return 2;
#endif
  } else {
    st = gcomp_comm_init_env(&comm);
  }
  if (st == GCOMP_OK && o.ab) st = make_ab(comm, o.ab);
  if (st == GCOMP_OK && o.overlap_ms > 0) st = run_overlap(comm, &o);
  for (int c = 0; st == GCOMP_OK && o.overlap_ms <= 0 && c < (o.ncodecs ? o.ncodecs : 1); c++)
    st = run(comm, &o, o.ncodecs ? o.codecs[c] : NULL);
  if (st == GCOMP_OK && nlast > 1 && gcomp_comm_rank(comm) == 0 && !o.json) {
    int best = 0, base = -1;
    for (int i = 0; i < nlast; i++) {
      if (last_row[i].t < last_row[best].t) best = i;
      if (!strcmp(last_row[i].spec, "none")) base = i;
    }
    printf("# at %zu B: fastest codec %s (the planner ran %s)", last_row[best].bytes,
           last_row[best].spec, last_row[best].algo);
    if (base >= 0) printf(", %.2f x the uncompressed time", last_row[base].t / last_row[best].t);
    printf("\n");
    for (int i = 0; i < nlast; i++)
      if (base >= 0 && i != base)
        printf("#   %-28s %.2f x faster than none (%s); CPU a rank per call %.1f ms (none: %.1f)\n",
               last_row[i].spec, last_row[base].t / last_row[i].t, last_row[i].algo,
               last_row[i].cpu * 1e3, last_row[base].cpu * 1e3);
  }
  gcomp_skew_stats sk = {.struct_size = sizeof sk};
  if (st == GCOMP_OK && gcomp_comm_get_skew(comm, &sk) == GCOMP_OK && sk.calls &&
      gcomp_comm_rank(comm) == 0 && !o.json)
    printf("# stragglers over %llu calls: rank %d arrived %.3f ms after the first on average, "
           "last in %llu; first to last arrival %.3f ms on average\n",
           (unsigned long long)sk.calls, sk.worst_rank, sk.worst_late_mean_s * 1e3,
           (unsigned long long)sk.worst_last, sk.spread_mean_s * 1e3);
  if (st < 0 && comm)
    fprintf(stderr, "gcomp-bench allreduce: rank %d: %s: %s\n", gcomp_comm_rank(comm),
            gcomp_strerror(st), gcomp_last_error());
  else if (st < 0 && gcomp_bench_env_rank() >= 0)   /* no communicator: GCOMP_RANK */
    fprintf(stderr, "gcomp-bench allreduce: rank %d: %s: %s\n", gcomp_bench_env_rank(),
            gcomp_strerror(st), gcomp_last_error());
  else if (st < 0)   /* the error says which rank when it knows */
    fprintf(stderr, "gcomp-bench allreduce: %s: %s\n", gcomp_strerror(st), gcomp_last_error());
  gcomp_comm_destroy(g_comm_b);
  gcomp_comm_destroy(comm);
#ifdef GCOMP_BENCH_MPI
  if (o.mpi) MPI_Finalize();
#endif
  if (st == GCOMP_OK && bench_wrong) {
    fprintf(stderr, "gcomp-bench allreduce: %zu wrong element(s) in the #wrong columns\n",
            bench_wrong);
    return 1;
  }
  return st < 0 ? 1 : 0;
}

GCOMP_BENCH_CONSTRUCTOR(register_allreduce) {
  gcomp_bench_register("allreduce", cmd_allreduce,
                       "allreduce time/algbw/busbw per size (nccl-tests format), vs MPI_Allreduce");
}
