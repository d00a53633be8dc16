/* gcomp-stats: one table for a job's GCOMP_STATS files (one per rank): where each rank's
 * time went, what it sent, and how late it arrived at its calls, then the ranks that stand
 * out.
 *
 *   GCOMP_STATS=out-%r.json gcomp-run -n 8 -- ./train
 *   gcomp-stats out-*.json */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stats_file.h"

typedef struct {
  const char *path;
  double rank, node, calls, total, wait, reduce, encode, decode, wire, shm, nonfinite;
  double late_mean_us, late_max_us, last, skew_calls, has_skew;
} rank_stats;

static void usage(FILE *f) {
  fprintf(f,
          "usage: gcomp-stats FILE...\n"
          "  FILE: the GCOMP_STATS files of one job (GCOMP_STATS=out-%%r.json writes one per\n"
          "  rank). Prints per rank: calls, time inside gcomp_allreduce and its split, bytes\n"
          "  sent through the fabric and copied through the node's segment, NaN/Inf seen, and\n"
          "  how late the rank arrived at its calls; then the ranks that stand out.\n");
}

static int load(const char *path, rank_stats *r) {
  char *text = stats_slurp(path);
  if (!text) {
    fprintf(stderr, "gcomp-stats: cannot read '%s': %s\n", path, strerror(errno));
    return -1;
  }
  memset(r, 0, sizeof *r);
  r->path = path;
  static const char *const keys[] = {"rank", "node", "calls", "total_s", "wait_s", "reduce_s",
                                     "encode_s", "decode_s", "wire_bytes", "nonfinite"};
  double *dst[] = {&r->rank, &r->node, &r->calls, &r->total, &r->wait, &r->reduce, &r->encode,
                   &r->decode, &r->wire, &r->nonfinite};
  for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
    int got = stats_number(text, keys[i], dst[i]);
    if (got != 0) {
      if (got == -2)
        fprintf(stderr, "gcomp-stats: '%s': \"%s\" is out of range or not a finite number\n",
                path, keys[i]);
      else
        fprintf(stderr, "gcomp-stats: '%s' is not a GCOMP_STATS file (no \"%s\")\n", path,
                keys[i]);
      free(text);
      return -1;
    }
  }
  if (r->rank < 0 || r->rank != floor(r->rank) || r->rank > 1e9) {
    fprintf(stderr, "gcomp-stats: '%s': \"rank\" %g is not a rank\n", path, r->rank);
    free(text);
    return -1;
  }
  stats_number(text, "shm_bytes", &r->shm);   /* files from before shm_bytes have none */
  const char *skew = strstr(text, "\"skew\":");
  if (skew && !stats_number(skew, "calls", &r->skew_calls) &&
      !stats_number(skew, "late_mean_us", &r->late_mean_us) &&
      !stats_number(skew, "late_max_us", &r->late_max_us) && !stats_number(skew, "last", &r->last))
    r->has_skew = r->skew_calls > 0;
  free(text);
  return 0;
}

static int by_rank(const void *a, const void *b) {
  double x = ((const rank_stats *)a)->rank, y = ((const rank_stats *)b)->rank;
  return (x > y) - (x < y);
}

static double pct(double part, double whole) { return whole > 0 ? 100 * part / whole : 0; }

int main(int argc, char **argv) {
  if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  int n = argc - 1;
  rank_stats *rs = calloc((size_t)n, sizeof *rs);
  if (!rs) return 2;
  for (int i = 0; i < n; i++)
    if (load(argv[i + 1], &rs[i]) != 0) {
      free(rs);
      return 2;
    }
  qsort(rs, (size_t)n, sizeof *rs, by_rank);
  for (int i = 1; i < n; i++)
    if (rs[i].rank == rs[i - 1].rank) {
      fprintf(stderr, "gcomp-stats: '%s' and '%s' are both rank %.0f: files of two jobs?\n",
              rs[i - 1].path, rs[i].path, rs[i].rank);
      free(rs);
      return 2;
    }

  printf("# gcomp-stats: %d rank%s\n", n, n == 1 ? "" : "s");
  printf("# %4s %4s %8s %9s %5s %7s %7s %7s %9s %9s %9s %11s %10s %6s\n", "rank", "node", "calls",
         "time (s)", "wait", "reduce", "encode", "decode", "wire MB", "shm MB", "NaN/Inf",
         "late (ms)", "max (ms)", "last");
  int worst_late = -1, worst_wait = -1, least_wait = -1;
  for (int i = 0; i < n; i++) {
    const rank_stats *r = &rs[i];
    printf("  %4.0f %4.0f %8.0f %9.3f %4.0f%% %6.0f%% %6.0f%% %6.0f%% %9.2f %9.2f %9.0f", r->rank,
           r->node, r->calls, r->total, pct(r->wait, r->total), pct(r->reduce, r->total),
           pct(r->encode, r->total), pct(r->decode, r->total), r->wire / 1e6, r->shm / 1e6,
           r->nonfinite);
    if (r->has_skew)
      printf(" %11.3f %10.3f %6.0f\n", r->late_mean_us / 1e3, r->late_max_us / 1e3, r->last);
    else
      printf(" %11s %10s %6s\n", "-", "-", "-");
    if (r->has_skew && (worst_late < 0 || r->late_mean_us > rs[worst_late].late_mean_us))
      worst_late = i;
    if (r->total > 0 && (worst_wait < 0 || pct(r->wait, r->total) >
                                                pct(rs[worst_wait].wait, rs[worst_wait].total)))
      worst_wait = i;
    if (r->total > 0 && (least_wait < 0 || pct(r->wait, r->total) <
                                                pct(rs[least_wait].wait, rs[least_wait].total)))
      least_wait = i;
  }
  for (int i = 1; i < n; i++)
    if (rs[i].calls != rs[0].calls)
      printf("# note: ranks made different numbers of calls (rank %.0f: %.0f, rank %.0f: %.0f):"
             " files of different communicators or jobs?\n", rs[0].rank, rs[0].calls, rs[i].rank,
             rs[i].calls);
  if (worst_late >= 0) {
    const rank_stats *r = &rs[worst_late];
    printf("# latest to arrive: rank %.0f, %.3f ms after the first on average (at most %.3f ms), "
           "last in %.0f of %.0f calls\n", r->rank, r->late_mean_us / 1e3, r->late_max_us / 1e3,
           r->last, r->skew_calls);
  } else {
    printf("# no straggler figures: fewer calls than one GCOMP_SKEW_WINDOW, or it was 0\n");
  }
  if (worst_wait >= 0 && least_wait >= 0 && n > 1)
    printf("# most time waiting: rank %.0f (%.0f%%); least: rank %.0f (%.0f%%)\n",
           rs[worst_wait].rank, pct(rs[worst_wait].wait, rs[worst_wait].total),
           rs[least_wait].rank, pct(rs[least_wait].wait, rs[least_wait].total));
  free(rs);
  return 0;
}
