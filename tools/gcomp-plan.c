/* gcomp-plan: what the planner would run, and what it predicts, for a job that does not
 * exist yet. The same cost model gcomp_allreduce uses (gcomp_plan_predict, the public
 * header), fed with link figures given on the command line or taken from a GCOMP_STATS file
 * of a real run, over a range of node counts: the planner's choice and a forced ring side by
 * side, each with its predicted time, bus bandwidth, the share of that time the latency
 * terms take, and the scaling efficiency of a data-parallel step that computes for
 * --compute-ms (without overlap, the pessimistic bound, or with --overlap perfect overlap,
 * the optimistic one). Then where each becomes latency-bound and where its efficiency falls
 * most as the node count doubles: the latency/bandwidth crossover, predicted rather than
 * discovered at 1,024 devices. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gcomp.h"
#include "stats_file.h"

enum { MAX_ROWS = 64 };

typedef struct {
  gcomp_plan_query q;
  double compute_ms;
  int overlap, json;
  const char *compare;   /* the forced algorithm beside the planner's choice */
  int nodes[MAX_ROWS], nrows;
} plan_opts;

/* One algorithm at one node count: its prediction and the step's efficiency. */
typedef struct {
  int ok;                /* 0: the algorithm cannot serve this placement */
  gcomp_plan_result r;
  double eff;            /* NAN without --compute-ms */
} cell;

static void usage(FILE *out) {
  fprintf(out,
          "usage: gcomp-plan [--bytes SIZE] [--ranks-per-node L] [--nodes N[,N...]]\n"
          "                  [--links INTRA_US,INTRA_GBPS,INTER_US,INTER_GBPS[,SHM_US,SHM_GBPS]]\n"
          "                  [--reduce-gbps G] [--from-stats FILE] [--compute-ms T [--overlap]]\n"
          "                  [--codec-ratio R --codec-gbps G [--sparse]] [--cores-per-node C]\n"
          "                  [--compare ALGO] [--json]\n"
          "  Predicts the allreduce of SIZE bytes (default 100m) on N nodes of L ranks (default\n"
          "  1,2,4,...,64 nodes of 8): per N the planner's choice and a forced ring (--compare:\n"
          "  another algorithm), each with time, busbw, the latency terms' share and the\n"
          "  efficiency of a step of T ms of compute (no overlap; --overlap: perfect overlap);\n"
          "  then where each turns latency-bound and where its efficiency falls most.\n"
          "  Links default to 0.5 us / 20 GB/s inside a node and 10 us / 12.5 GB/s (100 Gbit/s)\n"
          "  between nodes; --from-stats reads the figures a communicator measured (GCOMP_STATS\n"
          "  file of a real run; --links still overrides them). --cores-per-node C: with more\n"
          "  ranks than cores the model's times are lower bounds, and marked so.\n");
}

/* "64m", "100MiB", "4096": a whole number with an optional k/m/g (KiB, MiB, GiB) suffix */
static int parse_bytes(const char *text, uint64_t *out) {
  char *end;
  errno = 0;
  unsigned long long v = strtoull(text, &end, 10);
  if (end == text || errno || text[0] == '-') return -1;
  const char *units = "kmg";
  const char *u = *end ? strchr(units, tolower((unsigned char)*end)) : NULL;
  int shift = u ? 10 * (int)(u - units + 1) : 0;
  if (u) end++;
  if (u && (*end == 'i' || *end == 'I')) end++;
  if (u && (*end == 'b' || *end == 'B')) end++;
  if (*end || v == 0 || v > (UINT64_MAX >> 1 >> shift)) return -1;
  *out = (uint64_t)v << shift;
  return 0;
}

static int stats_model(const char *path, const char *text, gcomp_plan_query *q) {
  double ia, ib, ea, eb, g, sa = 0, sb = 0, nodes = 0;
  if (stats_number(text, "intra_alpha_us", &ia) || stats_number(text, "intra_GBps", &ib) ||
      stats_number(text, "inter_alpha_us", &ea) || stats_number(text, "inter_GBps", &eb) ||
      stats_number(text, "reduce_GBps", &g) || ib <= 0 || eb <= 0 || g <= 0) {
    fprintf(stderr, "gcomp-plan: '%s' is not a GCOMP_STATS file (no model figures)\n", path);
    return -1;
  }
  q->intra_alpha_s = ia * 1e-6, q->intra_Bps = ib * 1e9;
  if (!stats_number(text, "nodes", &nodes) && nodes >= 2)
    q->inter_alpha_s = ea * 1e-6, q->inter_Bps = eb * 1e9;
  else
    fprintf(stderr, "gcomp-plan: '%s' comes from a single-node run: its inter-node figures are "
                    "the intra-node ones; keeping the default (or --links) between nodes\n", path);
  q->reduce_Bps = g * 1e9;
  if (!stats_number(text, "shm_alpha_us", &sa) && !stats_number(text, "shm_GBps", &sb) && sa > 0 &&
      sb > 0)
    q->shm_alpha_s = sa * 1e-6, q->shm_Bps = sb * 1e9;
  double cores = 0;   /* files written since the cores were recorded */
  if (!q->cores_per_node && !stats_number(text, "cores", &cores) && cores >= 1 && cores < 1e6)
    q->cores_per_node = (int)cores;
  return 0;
}

static int load_stats(const char *path, gcomp_plan_query *q) {
  char *text = stats_slurp(path);
  if (!text) {
    fprintf(stderr, "gcomp-plan: cannot read '%s': %s\n", path, strerror(errno));
    return -1;
  }
  int st = stats_model(path, text, q);
  free(text);
  return st;
}

static int parse_nodes(const char *v, plan_opts *o) {
  o->nrows = 0;
  for (const char *s = v; *s;) {
    char *end;
    long k = strtol(s, &end, 10);
    if (end == s || k < 1 || k > 1 << 20 || (*end && *end != ',') || o->nrows == MAX_ROWS)
      return -1;
    o->nodes[o->nrows++] = (int)k;
    s = *end ? end + 1 : end;
  }
  return o->nrows ? 0 : -1;
}

static int bad(const char *opt, const char *v, const char *what) {
  fprintf(stderr, "gcomp-plan: %s '%s' is not %s\n", opt, v, what);
  return 2;
}

/* Parses argv into o; returns 0, or the exit status (1: unreadable stats, 2: usage). */
static int parse_args(int argc, char **argv, plan_opts *o) {
  const char *stats = NULL, *links = NULL;
  double reduce_gbps = 8, codec_ratio = 0, codec_gbps = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    char *end = NULL;
    if (!strcmp(a, "--json")) { o->json = 1; continue; }
    if (!strcmp(a, "--sparse")) { o->q.codec_sparse = 1; continue; }
    if (!strcmp(a, "--overlap")) { o->overlap = 1; continue; }
    if (!v) { fprintf(stderr, "gcomp-plan: %s needs a value\n", a); return 2; }
    i++;
    if (!strcmp(a, "--bytes")) {
      if (parse_bytes(v, &o->q.bytes)) return bad(a, v, "a size (e.g. 64m)");
    } else if (!strcmp(a, "--ranks-per-node") || !strcmp(a, "--cores-per-node")) {
      long l = strtol(v, &end, 10);
      if (end == v || *end || l < 1 || l > 4096) return bad(a, v, "a count in [1, 4096]");
      *(a[2] == 'r' ? &o->q.ranks_per_node : &o->q.cores_per_node) = (int)l;
    } else if (!strcmp(a, "--nodes")) {
      if (parse_nodes(v, o)) return bad(a, v, "a list of node counts (e.g. 1,2,8)");
    } else if (!strcmp(a, "--links")) links = v;
    else if (!strcmp(a, "--from-stats")) stats = v;
    else if (!strcmp(a, "--compare")) o->compare = v;
    else if (!strcmp(a, "--compute-ms")) o->compute_ms = strtod(v, &end);
    else if (!strcmp(a, "--reduce-gbps")) reduce_gbps = strtod(v, &end);
    else if (!strcmp(a, "--codec-ratio")) codec_ratio = strtod(v, &end);
    else if (!strcmp(a, "--codec-gbps")) codec_gbps = strtod(v, &end);
    else { fprintf(stderr, "gcomp-plan: unknown option '%s'\n", a); usage(stderr); return 2; }
    if (end && (end == v || *end)) return bad(a, v, "a number");
  }
  if (!(reduce_gbps > 0) || !(o->compute_ms >= 0) || !(codec_ratio >= 0 && codec_ratio <= 1) ||
      !(codec_gbps >= 0) || (codec_ratio > 0) != (codec_gbps > 0) ||
      (o->overlap && !o->compute_ms)) {
    fprintf(stderr, "gcomp-plan: --reduce-gbps must be > 0, --compute-ms >= 0 (and given with "
                    "--overlap), and --codec-ratio (at most 1) and --codec-gbps go together (both "
                    "> 0)\n");
    return 2;
  }
  o->q.reduce_Bps = reduce_gbps * 1e9;
  o->q.codec_ratio = codec_ratio, o->q.codec_Bps = codec_gbps * 1e9;
  if (stats && load_stats(stats, &o->q) < 0) return 1;   /* --links, when given, wins */
  if (links && gcomp_plan_links(&o->q, links) != GCOMP_OK) {
    fprintf(stderr, "gcomp-plan: --links: %s\n", gcomp_last_error());
    return 2;
  }
  int known = 0;
  for (int i = 0; i < gcomp_algo_count() && !known; i++) {
    const char *name;
    known = gcomp_algo_describe(i, &name, NULL) == GCOMP_OK && !strcmp(name, o->compare);
  }
  if (!known) return bad("--compare", o->compare, "an algorithm (gcomp-info lists them)");
  for (int k = 0; k < o->nrows; k++)   /* the planner counts ranks in int */
    if ((long long)o->q.ranks_per_node * o->nodes[k] > (1 << 24)) {
      fprintf(stderr, "gcomp-plan: %d ranks per node on %d nodes is %lld ranks: at most %d\n",
              o->q.ranks_per_node, o->nodes[k], (long long)o->q.ranks_per_node * o->nodes[k],
              1 << 24);
      return 2;
    }
  return 0;
}

/* step efficiency: compute / step time; the step waits for the allreduce after computing
 * (no overlap), or for whichever of the two takes longer (perfect overlap) */
static double efficiency(const plan_opts *o, double t_s) {
  if (o->compute_ms <= 0) return NAN;
  double t = t_s * 1e3;
  return o->compute_ms / (o->overlap ? fmax(o->compute_ms, t) : o->compute_ms + t);
}

static cell predict(const plan_opts *o, int nodes, uint64_t bytes, const char *algo) {
  cell c = {0};
  gcomp_plan_query q = o->q;
  q.nodes = nodes, q.bytes = bytes;
  c.r.struct_size = sizeof c.r;
  c.ok = gcomp_plan_predict(&q, algo, &c.r) == GCOMP_OK;
  c.eff = c.ok ? efficiency(o, c.r.time_s) : NAN;
  return c;
}

static int latency_bound(const cell *c) { return c->ok && c->r.latency_s > c->r.time_s / 2; }

static void text_row(const plan_opts *o, int nodes, const cell *p, const cell *f) {
  const char *lb = p->r.oversubscribed ? ">=" : "";
  printf("  %6d %6d %12s %s%10.3f %9.2f %4.0f%%", nodes, nodes * o->q.ranks_per_node, p->r.algo,
         lb, p->r.time_s * 1e3, p->r.busbw_Bps * 1e-9, 100 * p->r.latency_s / p->r.time_s);
  if (o->compute_ms > 0) printf(" %s%6.1f%%", p->r.oversubscribed ? "<=" : "", p->eff * 100);
  if (f->ok) {
    printf(" | %s%10.3f %4.0f%%", lb, f->r.time_s * 1e3, 100 * f->r.latency_s / f->r.time_s);
    if (o->compute_ms > 0) printf(" %s%6.1f%%", f->r.oversubscribed ? "<=" : "", f->eff * 100);
  } else {
    printf(" | %11s", "-");
  }
  printf("\n");
}

static void json_cell(const char *name, const cell *c) {
  printf("\"%s\": {\"ms\": %.6f, \"busbw\": %.4f, \"latency_frac\": %.4f", name, c->r.time_s * 1e3,
         c->r.busbw_Bps * 1e-9, c->r.latency_s / c->r.time_s);
  if (!isnan(c->eff)) printf(", \"efficiency\": %.6f", c->eff);
  printf("}");
}

static void json_row(const plan_opts *o, int k, const cell *p, const cell *f) {
  int nodes = o->nodes[k];
  printf("%s\n  {\"nodes\": %d, \"ranks\": %d, \"algo\": \"%s\", \"ms\": %.6f, \"busbw\": %.4f, "
         "\"latency_frac\": %.4f, \"oversubscribed\": %s", k ? "," : "", nodes,
         nodes * o->q.ranks_per_node, p->r.algo, p->r.time_s * 1e3, p->r.busbw_Bps * 1e-9,
         p->r.latency_s / p->r.time_s, p->r.oversubscribed ? "true" : "false");
  if (!isnan(p->eff)) printf(", \"efficiency\": %.6f", p->eff);
  printf(", ");
  if (f->ok) json_cell(o->compare, f), printf(", ");
  printf("\"estimates_ms\": {");
  int first = 1;
  for (int i = 0; i < gcomp_algo_count(); i++) {
    const char *name;
    gcomp_algo_describe(i, &name, NULL);
    cell c = predict(o, nodes, o->q.bytes, name);
    if (!c.ok) continue;
    printf("%s\"%s\": %.6f", first ? "" : ", ", name, c.r.time_s * 1e3);
    first = 0;
  }
  printf("}}");
}

/* Where the rows turn latency-bound, and the doubling of nodes that costs the most
 * efficiency (rows[k] against rows[k-1] when it has twice the nodes). */
typedef struct {
  int bound_from;           /* first row latency-bound, or -1 */
  int drop_at;              /* row whose efficiency fell most against the one before, or -1 */
  double drop;
} trend;

static trend find_trend(const plan_opts *o, const cell *c) {
  trend t = {-1, -1, 0};
  for (int k = 0; k < o->nrows; k++) {
    if (t.bound_from < 0 && latency_bound(&c[k])) t.bound_from = k;
    if (k && c[k].ok && c[k - 1].ok && !isnan(c[k].eff) && o->nodes[k] == 2 * o->nodes[k - 1] &&
        c[k - 1].eff - c[k].eff > t.drop)
      t.drop = c[k - 1].eff - c[k].eff, t.drop_at = k;
  }
  return t;
}

static void text_trend(const plan_opts *o, const char *who, const cell *c, trend t) {
  int L = o->q.ranks_per_node;
  if (t.bound_from >= 0)
    printf("# %s: latency-bound from %d nodes (%d ranks): the latency terms are %.0f%% of the "
           "call\n", who, o->nodes[t.bound_from], o->nodes[t.bound_from] * L,
           100 * c[t.bound_from].r.latency_s / c[t.bound_from].r.time_s);
  else
    printf("# %s: bandwidth-bound at every node count shown\n", who);
  if (t.drop_at >= 0)
    printf("# %s: efficiency falls most from %d to %d nodes (%d to %d ranks): %.1f%% -> %.1f%%\n",
           who, o->nodes[t.drop_at - 1], o->nodes[t.drop_at], o->nodes[t.drop_at - 1] * L,
           o->nodes[t.drop_at] * L, 100 * c[t.drop_at - 1].eff, 100 * c[t.drop_at].eff);
}

static void json_trend(const char *who, const plan_opts *o, trend t) {
  printf("\"%s\": {\"latency_bound_from_nodes\": ", who);
  if (t.bound_from >= 0) printf("%d", o->nodes[t.bound_from]);
  else printf("null");
  if (t.drop_at >= 0)
    printf(", \"largest_drop\": {\"from_nodes\": %d, \"to_nodes\": %d, \"efficiency_drop\": %.6f}",
           o->nodes[t.drop_at - 1], o->nodes[t.drop_at], t.drop);
  printf("}");
}

static void oversubscribed_note(const plan_opts *o) {
  printf("# %d busy ranks per node on %d cores: ranks wait for the scheduler, which the model "
         "does not see (it prices best cases; measured 2.6x to 75x slower on such a node, "
         "bench/RESULTS.md). The times above are lower bounds and the efficiencies upper "
         "bounds; the choices of algorithm held.\n", o->q.ranks_per_node, o->q.cores_per_node);
}

static void header(const plan_opts *o) {
  const gcomp_plan_query *q = &o->q;
  printf("# gcomp-plan: %llu B per allreduce, %d ranks per node; intra %.2f us %.2f GB/s, inter "
         "%.2f us %.2f GB/s, reduce %.2f GB/s%s", (unsigned long long)q->bytes, q->ranks_per_node,
         q->intra_alpha_s * 1e6, q->intra_Bps * 1e-9, q->inter_alpha_s * 1e6, q->inter_Bps * 1e-9,
         q->reduce_Bps * 1e-9, q->codec_ratio > 0 ? ", with a codec" : "");
  if (o->compute_ms > 0)
    printf("; %g ms of compute, %s overlap\n", o->compute_ms, o->overlap ? "perfect" : "no");
  else
    printf(" (no --compute-ms)\n");
  printf("#  nodes  ranks      planner    time (ms) busbw GB/s  lat%s | %-6s time (ms)  lat%s\n",
         o->compute_ms > 0 ? "     eff" : "", o->compare, o->compute_ms > 0 ? "     eff" : "");
}

int main(int argc, char **argv) {
  for (int i = 1; i < argc; i++)
    if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
      usage(stdout);
      return 0;
    }
  plan_opts o = {.compare = "ring"};
  o.q.struct_size = sizeof o.q;
  o.q.bytes = 100u << 20;
  o.q.ranks_per_node = 8;
  o.q.intra_alpha_s = 0.5e-6, o.q.intra_Bps = 20e9;
  o.q.inter_alpha_s = 10e-6, o.q.inter_Bps = 12.5e9;
  int st = parse_args(argc, argv, &o);
  if (st) return st;
  if (!o.nrows)
    for (int k = 1; k <= 64; k *= 2) o.nodes[o.nrows++] = k;
  cell mine[MAX_ROWS], forced[MAX_ROWS];
  for (int k = 0; k < o.nrows; k++) {
    mine[k] = predict(&o, o.nodes[k], o.q.bytes, NULL);
    forced[k] = predict(&o, o.nodes[k], o.q.bytes, o.compare);
    if (!mine[k].ok) {   /* a figure out of the model's range */
      fprintf(stderr, "gcomp-plan: %s\n", gcomp_last_error());
      return 2;
    }
  }
  trend tp = find_trend(&o, mine), tf = find_trend(&o, forced);
  gcomp_plan_query last = o.q;
  last.nodes = o.nodes[o.nrows - 1];
  uint64_t cross = plan_crossover_bytes(&last);
  if (o.json) {
    printf("{\"bytes\": %llu, \"ranks_per_node\": %d, \"compute_ms\": %g, \"overlap\": %s, "
           "\"cores_per_node\": %d, \"compare\": \"%s\", \"rows\": [",
           (unsigned long long)o.q.bytes, o.q.ranks_per_node, o.compute_ms, o.overlap ? "true" : "false", o.q.cores_per_node,
           o.compare);
    for (int k = 0; k < o.nrows; k++) json_row(&o, k, &mine[k], &forced[k]);
    printf("\n], ");
    json_trend("planner", &o, tp);
    printf(", ");
    json_trend(o.compare, &o, tf);
    printf(", \"crossover_bytes\": {\"nodes\": %d, \"bytes\": %llu}}\n", o.nodes[o.nrows - 1],
           (unsigned long long)cross);
    return 0;
  }
  header(&o);
  for (int k = 0; k < o.nrows; k++) text_row(&o, o.nodes[k], &mine[k], &forced[k]);
  text_trend(&o, "planner", mine, tp);
  text_trend(&o, o.compare, forced, tf);
  if (cross)
    printf("# on %d nodes the planner's calls are latency-bound below %llu B: fuse smaller "
           "tensors into buckets at least that large\n", o.nodes[o.nrows - 1],
           (unsigned long long)cross);
  if (mine[0].r.oversubscribed) oversubscribed_note(&o);
  return 0;
}
