/* gcomp-stats: a job's GCOMP_STATS files (one per rank) as one diagnosis: where each rank's
 * time went, what it sent, how late it arrived at its calls, and findings in the order a
 * performance engineer measures (the step split; the collective's time, latency- or
 * bandwidth-bound; the ranks' distribution: stragglers; then placement), each with its
 * evidence in numbers and what to try. The text output names the same findings in words,
 * most costly first; --json gives one object with `ranks` and `findings`.
 *
 *   GCOMP_STATS=out-%r.json gcomp-run -n 8 -- ./train
 *   gcomp-stats out-*.json
 *   gcomp-stats --json out-*.json */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gcomp.h"
#include "stats_file.h"

typedef struct {
  const char *path;
  double rank, size, node, nodes, calls, bytes, total, wait, reduce, encode, decode, wire, shm;
  double nonfinite, late_mean_us, late_max_us, last, skew_calls, has_skew, spread_mean_us;
  int has_model;
  double intra_a, intra_b, inter_a, inter_b, gamma, shm_a, shm_b;   /* us and GB/s */
} rank_stats;

/* One finding: what, about whom, the evidence (a JSON object's members, and the same in
 * words), what to try, and what it costs (seconds of the job; < 0: not known). */
typedef struct {
  const char *kind;
  int order;             /* place in the measuring order (JSON order) */
  int rank, node;        /* -1: not about one */
  double cost_s;
  char evidence[512];    /* JSON members: "late_mean_ms": 10.1, ... */
  char words[512];
  char try_[400];
} finding;

enum { MAX_FINDINGS = 16 };
typedef struct {
  finding f[MAX_FINDINGS];
  int n;
} findings;

/* the measuring order of the kinds */
enum { ORDER_STEP, ORDER_COLLECTIVE, ORDER_RANKS, ORDER_PLACEMENT };

static void usage(FILE *f) {
  fprintf(f,
          "usage: gcomp-stats [--json] FILE...\n"
          "  FILE: the GCOMP_STATS files of one job (GCOMP_STATS=out-%%r.json writes one per\n"
          "  rank). Prints per rank: calls, time inside gcomp_allreduce and its split, bytes\n"
          "  sent through the fabric and copied through the node's segment, NaN/Inf seen, and\n"
          "  how late the rank arrived at its calls; then findings (straggler, latency_bound,\n"
          "  placement, ...), most costly first, each with its evidence and what to try.\n"
          "  --json: one object, {\"ranks\": [...], \"findings\": [...]}, findings in the order\n"
          "  they are measured (step split, collective time, ranks, placement).\n");
}

static int load_fail(const char *path, char *text, const char *key, int got) {
  if (got == -2)
    fprintf(stderr, "gcomp-stats: '%s': \"%s\" is out of range or not a finite number\n", path,
            key);
  else
    fprintf(stderr, "gcomp-stats: '%s' is not a GCOMP_STATS file (no \"%s\")\n", path, key);
  free(text);
  return -1;
}

static void load_model(const char *text, rank_stats *r) {
  const char *m = strstr(text, "\"model\":");
  r->has_model = m && !stats_number(m, "intra_alpha_us", &r->intra_a) &&
                 !stats_number(m, "intra_GBps", &r->intra_b) &&
                 !stats_number(m, "inter_alpha_us", &r->inter_a) &&
                 !stats_number(m, "inter_GBps", &r->inter_b) &&
                 !stats_number(m, "reduce_GBps", &r->gamma) && r->intra_b > 0 && r->inter_b > 0 &&
                 r->gamma > 0;
  if (m && (stats_number(m, "shm_alpha_us", &r->shm_a) || stats_number(m, "shm_GBps", &r->shm_b)))
    r->shm_a = r->shm_b = 0;
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
    if (got != 0) return load_fail(path, text, keys[i], got);
  }
  if (r->rank < 0 || r->rank != floor(r->rank) || r->rank > 1e9) {
    fprintf(stderr, "gcomp-stats: '%s': \"rank\" %g is not a rank\n", path, r->rank);
    free(text);
    return -1;
  }
  stats_number(text, "shm_bytes", &r->shm);   /* files from before shm_bytes have none */
  stats_number(text, "bytes", &r->bytes);
  if (stats_number(text, "size", &r->size)) r->size = 0;
  if (stats_number(text, "nodes", &r->nodes)) r->nodes = 0;
  load_model(text, r);
  const char *skew = strstr(text, "\"skew\":");
  if (skew && !stats_number(skew, "calls", &r->skew_calls) &&
      !stats_number(skew, "late_mean_us", &r->late_mean_us) &&
      !stats_number(skew, "late_max_us", &r->late_max_us) && !stats_number(skew, "last", &r->last))
    r->has_skew = r->skew_calls > 0;
  if (skew) stats_number(skew, "spread_mean_us", &r->spread_mean_us);
  free(text);
  return 0;
}

static int by_rank(const void *a, const void *b) {
  double x = ((const rank_stats *)a)->rank, y = ((const rank_stats *)b)->rank;
  return (x > y) - (x < y);
}

static int by_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double pct(double part, double whole) { return whole > 0 ? 100 * part / whole : 0; }

static finding *add(findings *fs, const char *kind, int order, int rank, int node, double cost) {
  if (fs->n == MAX_FINDINGS) return NULL;
  finding *f = &fs->f[fs->n++];
  memset(f, 0, sizeof *f);
  f->kind = kind, f->order = order, f->rank = rank, f->node = node, f->cost_s = cost;
  return f;
}

static void put(char *dst, size_t cap, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(dst, cap, fmt, ap);
  va_end(ap);
}

/* ---- the ranks' distribution: a straggler ------------------------------------------------ */
/* The rank whose mean lateness stands out from the others' (their median): by more than
 * twice that median and 50 us, below which a loaded machine's scheduler alone moves ranks
 * (bench/RESULTS.md, "Stragglers": 4 us on an idle node, 40 us across a 1 Gbit/s link). */
static void find_straggler(const rank_stats *rs, int n, findings *fs) {
  int worst = -1, m = 0;
  double *others = malloc((size_t)n * sizeof *others);
  if (!others) return;
  for (int i = 0; i < n; i++)
    if (rs[i].has_skew && (worst < 0 || rs[i].late_mean_us > rs[worst].late_mean_us)) worst = i;
  for (int i = 0; i < n; i++)
    if (rs[i].has_skew && i != worst) others[m++] = rs[i].late_mean_us;
  if (worst < 0 || m == 0) {
    free(others);
    return;
  }
  qsort(others, (size_t)m, sizeof *others, by_double);
  double median = m % 2 ? others[m / 2] : (others[m / 2 - 1] + others[m / 2]) / 2;
  free(others);
  const rank_stats *r = &rs[worst];
  double excess_us = r->late_mean_us - median;
  if (!(excess_us > 2 * median && excess_us > 50)) return;
  double waited = excess_us * 1e-6 * r->skew_calls;   /* by every other rank */
  finding *f = add(fs, "straggler", ORDER_RANKS, (int)r->rank, (int)r->node, waited);
  if (!f) return;
  put(f->evidence, sizeof f->evidence,
      "\"late_mean_ms\": %.3f, \"late_max_ms\": %.3f, \"last_calls\": %.0f, \"calls\": %.0f, "
      "\"others_late_median_ms\": %.3f, \"others_waited_s\": %.3f", r->late_mean_us / 1e3,
      r->late_max_us / 1e3, r->last, r->skew_calls, median / 1e3, waited);
  put(f->words, sizeof f->words,
      "rank %.0f (node %.0f) arrives %.3f ms after the first rank on average (the others' median: "
      "%.3f ms), last in %.0f of %.0f calls: every other rank waited %.3f s for it",
      r->rank, r->node, r->late_mean_us / 1e3, median / 1e3, r->last, r->skew_calls, waited);
  put(f->try_, sizeof f->try_,
      "see what rank %.0f does between calls (GCOMP_TRACE shows its gaps): a slower device or "
      "input pipeline, more work (uneven batches or shards), or a busy core; balance the work or "
      "move the rank", r->rank);
}

/* ---- the collective's time: latency-bound calls -------------------------------------------- */
static int model_query(const rank_stats *rs, int n, gcomp_plan_query *q) {
  const rank_stats *m = NULL;
  for (int i = 0; i < n && !m; i++)
    if (rs[i].has_model) m = &rs[i];
  int size = (int)rs[0].size, nodes = (int)rs[0].nodes;
  if (!m || size < 2 || nodes < 1 || size % nodes) return -1;   /* uneven nodes: not modelled */
  memset(q, 0, sizeof *q);
  q->struct_size = sizeof *q;
  q->nodes = nodes, q->ranks_per_node = size / nodes;
  q->intra_alpha_s = m->intra_a * 1e-6, q->intra_Bps = m->intra_b * 1e9;
  q->inter_alpha_s = m->inter_a * 1e-6, q->inter_Bps = m->inter_b * 1e9;
  q->reduce_Bps = m->gamma * 1e9;
  if (m->shm_a > 0 && m->shm_b > 0) q->shm_alpha_s = m->shm_a * 1e-6, q->shm_Bps = m->shm_b * 1e9;
  return 0;
}

/* The mean call of the job priced by the model the communicator measured: latency-bound
 * when the latency terms are more than half its predicted time. */
static void find_latency_bound(const rank_stats *rs, int n, findings *fs) {
  gcomp_plan_query q;
  if (rs[0].calls < 1 || rs[0].bytes < 1 || model_query(rs, n, &q)) return;
  q.bytes = (uint64_t)(rs[0].bytes / rs[0].calls);
  gcomp_plan_result r = {.struct_size = sizeof r};
  if (gcomp_plan_predict(&q, NULL, &r) != GCOMP_OK || !(r.latency_s > r.time_s / 2)) return;
  uint64_t cross = plan_crossover_bytes(&q);
  double frac = r.latency_s / r.time_s, mean_total = 0;
  for (int i = 0; i < n; i++) mean_total += rs[i].total / n;
  finding *f = add(fs, "latency_bound", ORDER_COLLECTIVE, -1, -1, mean_total * frac);
  if (!f) return;
  double measured_us = rs[0].total / rs[0].calls * 1e6;
  put(f->evidence, sizeof f->evidence,
      "\"mean_call_bytes\": %llu, \"algo\": \"%s\", \"predicted_us\": %.3f, \"latency_frac\": %.3f, "
      "\"measured_us\": %.3f, \"crossover_bytes\": %llu, \"calls\": %.0f", (unsigned long long)q.bytes,
      r.algo, r.time_s * 1e6, frac, measured_us, (unsigned long long)cross, rs[0].calls);
  put(f->words, sizeof f->words,
      "calls of %llu B on average (%.0f calls, %.1f us each measured): at %d x %d ranks the model "
      "the communicator measured spends %.0f%% of such a call (%s, %.1f us) on latency; calls "
      "below %llu B are latency-bound here", (unsigned long long)q.bytes, rs[0].calls, measured_us,
      q.nodes, q.ranks_per_node, 100 * frac, r.algo, r.time_s * 1e6, (unsigned long long)cross);
  put(f->try_, sizeof f->try_,
      "fuse small tensors into buckets of at least %llu B (DDP's bucket_cap_mb) or make fewer, "
      "larger calls; on more nodes the crossover moves up (gcomp-plan --from-stats shows where)",
      (unsigned long long)cross);
}

/* ---- placement ----------------------------------------------------------------------------- */
/* Neighbours in rank order that sit on different nodes, against the fewest any placement
 * needs (one per node, going round): a round-robin placement crosses on every hop. */
static void find_placement(const rank_stats *rs, int n, findings *fs) {
  int nodes = (int)rs[0].nodes, size = (int)rs[0].size;
  if (nodes < 2 || n != size) return;   /* needs every rank's file */
  int cross = 0;
  for (int i = 0; i < n; i++) cross += rs[i].node != rs[(i + 1) % n].node;
  if (cross <= nodes) return;
  finding *f = add(fs, "placement", ORDER_PLACEMENT, -1, -1, -1);
  if (!f) return;
  put(f->evidence, sizeof f->evidence,
      "\"neighbour_crossings\": %d, \"needed\": %d, \"ranks\": %d, \"nodes\": %d", cross, nodes, n,
      nodes);
  put(f->words, sizeof f->words,
      "%d of %d neighbouring ranks (r, r+1) sit on different nodes where %d would do: the ranks "
      "are scattered over the nodes (round-robin?)", cross, n, nodes);
  put(f->try_, sizeof f->try_,
      "place consecutive ranks on one node (mpirun --map-by slot, srun --distribution=block, "
      "gcomp-run without --map-by node): gcomp's ring orders itself by node, but halving/doubling, "
      "recursive doubling and the program's own neighbour exchanges follow rank order");
}

/* ---- output ------------------------------------------------------------------------------- */
static void print_table(const rank_stats *rs, int n) {
  printf("# gcomp-stats: %d rank%s\n", n, n == 1 ? "" : "s");
  printf("# %4s %4s %8s %9s %5s %7s %7s %7s %9s %9s %9s %11s %10s %6s\n", "rank", "node", "calls",
         "time (s)", "wait", "reduce", "encode", "decode", "wire MB", "shm MB", "NaN/Inf",
         "late (ms)", "max (ms)", "last");
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
  }
}

static void print_footer(const rank_stats *rs, int n) {
  int worst_late = -1, worst_wait = -1, least_wait = -1;
  for (int i = 0; i < n; i++) {
    const rank_stats *r = &rs[i];
    if (r->has_skew && (worst_late < 0 || r->late_mean_us > rs[worst_late].late_mean_us))
      worst_late = i;
    double w = pct(r->wait, r->total);
    if (r->total > 0 && (worst_wait < 0 || w > pct(rs[worst_wait].wait, rs[worst_wait].total)))
      worst_wait = i;
    if (r->total > 0 && (least_wait < 0 || w < pct(rs[least_wait].wait, rs[least_wait].total)))
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
}

/* costliest first; findings of unknown cost after the others, in measuring order */
static int by_cost(const void *a, const void *b) {
  const finding *x = a, *y = b;
  if ((x->cost_s < 0) != (y->cost_s < 0)) return x->cost_s < 0 ? 1 : -1;
  if (x->cost_s != y->cost_s) return x->cost_s > y->cost_s ? -1 : 1;
  return x->order - y->order;
}

static int by_order(const void *a, const void *b) {
  const finding *x = a, *y = b;
  return x->order != y->order ? x->order - y->order : by_cost(a, b);
}

static void print_findings(findings *fs) {
  qsort(fs->f, (size_t)fs->n, sizeof *fs->f, by_cost);
  if (!fs->n) {
    printf("# findings: none\n");
    return;
  }
  printf("# findings, most costly first:\n");
  for (int i = 0; i < fs->n; i++) {
    const finding *f = &fs->f[i];
    printf("# %d. %s: %s.", i + 1, f->kind, f->words);
    if (f->cost_s >= 0) printf(" Cost: about %.3f s.", f->cost_s);
    printf(" Try: %s.\n", f->try_);
  }
}

static void json_rank(const rank_stats *r, int last) {
  printf("  {\"rank\": %.0f, \"node\": %.0f, \"compute_frac\": null, \"comm_frac\": null, "
         "\"wait_frac\": null, \"calls\": %.0f, \"bytes\": %.0f, \"total_s\": %.6f, \"wait_s\": %.6f, "
         "\"reduce_s\": %.6f, \"encode_s\": %.6f, \"decode_s\": %.6f, \"wire_bytes\": %.0f, "
         "\"shm_bytes\": %.0f, \"nonfinite\": %.0f", r->rank, r->node, r->calls, r->bytes, r->total,
         r->wait, r->reduce, r->encode, r->decode, r->wire, r->shm, r->nonfinite);
  if (r->has_skew)
    printf(", \"late_mean_us\": %.1f, \"late_max_us\": %.1f, \"last\": %.0f, \"skew_calls\": %.0f",
           r->late_mean_us, r->late_max_us, r->last, r->skew_calls);
  printf("}%s\n", last ? "" : ",");
}

/* what to try is prose: quotes and backslashes escaped */
static void json_text(const char *s) {
  putchar('"');
  for (; *s; s++) {
    if (*s == '"' || *s == '\\') putchar('\\');
    putchar(*s);
  }
  putchar('"');
}

static void print_json(const rank_stats *rs, int n, findings *fs) {
  qsort(fs->f, (size_t)fs->n, sizeof *fs->f, by_order);
  printf("{\"ranks\": [\n");
  for (int i = 0; i < n; i++) json_rank(&rs[i], i == n - 1);
  printf("], \"findings\": [");
  for (int i = 0; i < fs->n; i++) {
    const finding *f = &fs->f[i];
    printf("%s\n  {\"kind\": \"%s\"", i ? "," : "", f->kind);
    if (f->rank >= 0) printf(", \"rank\": %d", f->rank);
    if (f->node >= 0) printf(", \"node\": %d", f->node);
    printf(", \"evidence\": {%s}, ", f->evidence);
    if (f->cost_s >= 0) printf("\"cost_s\": %.6f, ", f->cost_s);
    printf("\"summary\": ");
    json_text(f->words);
    printf(", \"try\": ");
    json_text(f->try_);
    printf("}");
  }
  printf("%s]}\n", fs->n ? "\n" : "");
}

/* Loads the files (sorted by rank, no rank twice); NULL on error (message printed). */
static rank_stats *load_all(char **paths, int n) {
  rank_stats *rs = calloc((size_t)n, sizeof *rs);
  if (!rs) return NULL;
  for (int i = 0; i < n; i++)
    if (load(paths[i], &rs[i]) != 0) {
      free(rs);
      return NULL;
    }
  qsort(rs, (size_t)n, sizeof *rs, by_rank);
  for (int i = 1; i < n; i++)
    if (rs[i].rank == rs[i - 1].rank) {
      fprintf(stderr, "gcomp-stats: '%s' and '%s' are both rank %.0f: files of two jobs?\n",
              rs[i - 1].path, rs[i].path, rs[i].rank);
      free(rs);
      return NULL;
    }
  return rs;
}

int main(int argc, char **argv) {
  int json = argc > 1 && !strcmp(argv[1], "--json");
  if (argc < 2 + json || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
    usage(argc < 2 + json ? stderr : stdout);
    return argc < 2 + json ? 2 : 0;
  }
  int n = argc - 1 - json;
  rank_stats *rs = load_all(argv + 1 + json, n);
  if (!rs) return 2;
  findings fs = {0};
  find_latency_bound(rs, n, &fs);
  find_straggler(rs, n, &fs);
  find_placement(rs, n, &fs);
  if (json) {
    print_json(rs, n, &fs);
  } else {
    print_table(rs, n);
    print_footer(rs, n);
    print_findings(&fs);
  }
  free(rs);
  return 0;
}
