/* gcomp-lab measure: what gcomp's own measurement costs. Three communicators over the same
 * ranks, links and calibration, differing only in what they measure: "off" (GCOMP_MEASURE=0,
 * GCOMP_SKEW_WINDOW=0), "split" (the step split, no straggler detection) and "all" (the step
 * split and the detector at its default window). Each round times a short block of
 * back-to-back calls on each in turn (the order rotating), so all three see the same machine
 * weather; the cost is each one's total time over off's, and the median of the rounds'
 * ratios. Then the step observer alone, timed in-process on fabricated calls: its cost per
 * call without the network's noise. Run it under a launcher:
 *   gcomp-run -n 4 --nodes 2 -- gcomp-lab measure [--bytes 1m] [--iters 20] [--rounds 60] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab.h"
#include "comm_impl.h"
#include "gcomp.h"
#include "gcomp_common.h"

enum { NCFG = 3, MAX_ROUNDS = 999 };
static const char *const cfg_name[NCFG] = {"off", "split", "all"};

/* An allgather of small records over an existing communicator: each rank's record in its
 * own slot of zeros, summed as int32 (one contribution per slot: exact bits) */
static int comm_allgather(void *ctx, const void *mine, size_t len, void *all) {
  gcomp_comm *c = ctx;
  int size = gcomp_comm_size(c), rank = gcomp_comm_rank(c);
  size_t words = (len + 3) / 4;
  int32_t *buf = calloc((size_t)size * words, 4);
  if (!buf) return -1;
  memcpy(buf + (size_t)rank * words, mine, len);
  int st = gcomp_allreduce(c, buf, buf, (size_t)size * words, GCOMP_INT32, GCOMP_SUM, NULL, 0);
  for (int r = 0; st == GCOMP_OK && r < size; r++)
    memcpy((char *)all + (size_t)r * len, buf + (size_t)r * words, len);
  free(buf);
  return st == GCOMP_OK ? 0 : -1;
}

static int make(gcomp_comm *base, int k, gcomp_comm **out) {
  gcomp_config *cfg;
  int st = gcomp_config_create(&cfg);
  if (st == GCOMP_OK) st = gcomp_config_set(cfg, "GCOMP_MEASURE", k == 0 ? "0" : "1");
  if (st == GCOMP_OK && k < 2) st = gcomp_config_set(cfg, "GCOMP_SKEW_WINDOW", "0");
  if (st == GCOMP_OK) st = gcomp_config_share_calibration(cfg, base);
  if (st == GCOMP_OK)
    st = gcomp_comm_init_oob(gcomp_comm_rank(base), gcomp_comm_size(base), NULL, comm_allgather,
                             base, cfg, out);
  gcomp_config_destroy(cfg);
  return st;
}

static double all_max(gcomp_comm *c, double v) {
  gcomp_allreduce(c, &v, &v, 1, GCOMP_FLOAT64, GCOMP_MAX, NULL, 0);
  return v;
}

static int by_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *x, int n) {
  qsort(x, (size_t)n, sizeof *x, by_double);
  return n % 2 ? x[n / 2] : (x[n / 2 - 1] + x[n / 2]) / 2;
}

/* seconds per call of iters back-to-back calls on c, the slowest rank's */
static double time_calls(gcomp_comm *base, gcomp_comm *c, float *buf, size_t count, int iters,
                         int *st) {
  *st = gcomp_allreduce(c, buf, buf, count, GCOMP_FLOAT32, GCOMP_SUM, NULL, 0);   /* lines up */
  double t0 = (double)gcomp_now_ns() * 1e-9;
  for (int i = 0; *st == GCOMP_OK && i < iters; i++)
    *st = gcomp_allreduce(c, buf, buf, count, GCOMP_FLOAT32, GCOMP_SUM, NULL, 0);
  return all_max(base, ((double)gcomp_now_ns() * 1e-9 - t0) / iters);
}

static int parse(int argc, char **argv, double *bytes, double *iters, double *rounds) {
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    double *dst = !strcmp(a, "--bytes") ? bytes : !strcmp(a, "--iters") ? iters
                  : !strcmp(a, "--rounds") ? rounds : NULL;
    double hi = dst == bytes ? 1 << 30 : dst == iters ? 1e6 : MAX_ROUNDS;
    if (!dst || !v) {
      fprintf(stderr, "usage: gcomp-lab measure [--bytes B] [--iters N] [--rounds R]\n");
      return -1;
    }
    if (dst == bytes) {
      char *end;
      double x = strtod(v, &end);
      x *= *end == 'k' ? 1024 : *end == 'm' ? 1048576 : 1;
      if (end == v || (*end && strcmp(end, "k") && strcmp(end, "m")) || x < 4 || x > hi) {
        fprintf(stderr, "gcomp-lab measure: --bytes '%s' is not a size in [4, 1g]\n", v);
        return -1;
      }
      *dst = x;
    } else if (gcomp_bench_num("gcomp-lab measure", a, v, 1, hi, dst)) {
      return -1;
    }
    i++;
  }
  return 0;
}

/* nanoseconds per call of the step observer, on fabricated calls of comm (which it counts:
 * comm is not used for anything else afterwards) */
static double observer_ns(gcomp_comm *comm) {
  gcomp_call call;
  memset(&call, 0, sizeof call);
  enum { N = 200000 };
  uint64_t t0 = gcomp_now_ns();
  for (int i = 0; i < N; i++) {
    call.arrive_ns = call.start_ns = t0 + 2 * (uint64_t)i, call.end_ns = call.start_ns + 1;
    gcomp_step_observe(comm, &call);
  }
  return (double)(gcomp_now_ns() - t0) / N;
}

static void report(gcomp_comm *base, double (*t)[NCFG], int rounds, size_t bytes, int iters,
                   double obs_ns, const gcomp_comm *all) {
  if (gcomp_comm_rank(base) != 0) return;
  printf("# gcomp-lab measure: %d ranks on %d node(s), %zu B calls, %d back to back per "
         "timing, %d rounds\n", gcomp_comm_size(base), gcomp_comm_nnodes(base), bytes, iters,
         rounds);
  printf("# %-6s %12s %12s %12s %11s\n", "config", "mean (us)", "median (us)", "cost (total)",
         "cost (med)");
  double off_med = 0;
  for (int k = 0; k < NCFG; k++) {
    static double per[MAX_ROUNDS], ratio[MAX_ROUNDS];
    double sum = 0, off = 0;
    for (int r = 0; r < rounds; r++) {
      per[r] = t[r][k], ratio[r] = t[r][k] / t[r][0] - 1;
      sum += t[r][k], off += t[r][0];
    }
    double med = median(per, rounds);
    if (k == 0) off_med = med;
    printf("  %-6s %12.1f %12.1f %+11.2f%% %+10.2f%%\n", cfg_name[k], sum / rounds * 1e6,
           med * 1e6, 100 * (sum / off - 1), 100 * median(ratio, rounds));
  }
  printf("# cost: a config's total time over off's (and the median of the rounds' ratios), "
         "minus 1\n");
  printf("# step observer alone: %.1f ns per call, %.4f%% of off's median call\n", obs_ns,
         100 * obs_ns * 1e-9 / off_med);
  /* the detector's exchanges on "all", as its own clock counted them */
  const gcomp_skew *k = &all->skew;
  if (k->windows)
    printf("# detector (all): %llu windows of %d calls, %.1f us an exchange, %.1f ns per call "
           "(%.4f%% of off's median call); with the observer %.4f%%\n",
           (unsigned long long)k->windows, k->window, k->exchange_s / (double)k->windows * 1e6,
           k->exchange_s / (double)k->mine.calls * 1e9,
           100 * k->exchange_s / (double)k->mine.calls / off_med,
           100 * (k->exchange_s / (double)k->mine.calls + obs_ns * 1e-9) / off_med);
}

static int cmd_measure(int argc, char **argv) {
  double bytes = 1 << 20, iters = 20, rounds = 60;
  if (parse(argc, argv, &bytes, &iters, &rounds)) return 2;
  gcomp_comm *base, *c[NCFG] = {NULL, NULL, NULL};
  int st = gcomp_comm_init_env(&base);
  for (int k = 0; st == GCOMP_OK && k < NCFG; k++) st = make(base, k, &c[k]);
  size_t count = (size_t)bytes / 4;
  float *buf = calloc(count, sizeof *buf);
  static double t[MAX_ROUNDS][NCFG];
  for (int k = 0; st == GCOMP_OK && buf && k < NCFG; k++)   /* first touches, codec probes */
    time_calls(base, c[k], buf, count, 2, &st);
  for (int r = 0; st == GCOMP_OK && buf && r < (int)rounds; r++)
    for (int j = 0; st == GCOMP_OK && j < NCFG; j++) {
      int k = (j + r) % NCFG;
      t[r][k] = time_calls(base, c[k], buf, count, (int)iters, &st);
    }
  if (st == GCOMP_OK && buf)
    report(base, t, (int)rounds, count * 4, (int)iters, observer_ns(c[1]), c[2]);
  if (st != GCOMP_OK) fprintf(stderr, "gcomp-lab measure: %s\n", gcomp_last_error());
  free(buf);
  for (int k = NCFG - 1; k >= 0; k--) gcomp_comm_destroy(c[k]);
  if (st == GCOMP_OK) gcomp_comm_destroy(base);
  return st == GCOMP_OK && buf ? 0 : 1;
}

GCOMP_BENCH_CONSTRUCTOR(register_measure) {
  gcomp_bench_register("measure", cmd_measure,
                       "what gcomp's measurement costs: calls with it off, split, all");
}
