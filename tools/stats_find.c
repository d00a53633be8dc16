/* gcomp-stats' findings: what a job's GCOMP_STATS files show, each with its evidence in
 * numbers, what it costs and what to try. The thresholds say where noise ends: a loaded
 * machine's scheduler alone moves a rank by tens of microseconds on average and by up to
 * ~0.1 s once (measured: 85 ms on 2 cores under a load average of 17). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gcomp.h"
#include "stats_file.h"
#include "stats_job.h"

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

static int by_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* the median of x[0..n) (sorted in place); 0 for n == 0 */
static double median_of(double *x, int n) {
  if (n <= 0) return 0;
  qsort(x, (size_t)n, sizeof *x, by_double);
  return n % 2 ? x[n / 2] : (x[n / 2 - 1] + x[n / 2]) / 2;
}

/* ---- the ranks' distribution: a straggler ------------------------------------------------ */
/* how late a rank typically arrives: the mean of window medians where the file has it (one
 * long pause does not move it), else the mean */
static double typical_us(const rank_stats *r) {
  return r->has_typical ? r->late_typical_us : r->late_mean_us;
}

/* The others' median of v(rank), leaving out rank `skip`. */
static double others_median(const rank_stats *rs, int n, int skip,
                            double (*v)(const rank_stats *)) {
  double *x = malloc((size_t)n * sizeof *x);
  int m = 0;
  for (int i = 0; x && i < n; i++)
    if (i != skip && rs[i].has_skew) x[m++] = v(&rs[i]);
  double med = x ? median_of(x, m) : 0;
  free(x);
  return med;
}

/* The same over every other rank, with or without lateness figures. */
static double others_median_all(const rank_stats *rs, int n, int skip,
                                double (*v)(const rank_stats *)) {
  double *x = malloc((size_t)n * sizeof *x);
  int m = 0;
  for (int i = 0; x && i < n; i++)
    if (i != skip) x[m++] = v(&rs[i]);
  double med = x ? median_of(x, m) : 0;
  free(x);
  return med;
}

static double compute_of(const rank_stats *r) { return r->compute_s; }

static void straggler_evidence(finding *f, const rank_stats *rs, int n, int worst, double med,
                               double waited) {
  const rank_stats *r = &rs[worst];
  size_t len = (size_t)snprintf(
      f->evidence, sizeof f->evidence,
      "\"late_typical_ms\": %.3f, \"late_mean_ms\": %.3f, \"late_max_ms\": %.3f, \"last_calls\": "
      "%.0f, \"calls\": %.0f, \"others_late_median_ms\": %.3f, \"others_waited_s\": %.3f",
      typical_us(r) / 1e3, r->late_mean_us / 1e3, r->late_max_us / 1e3, r->last, r->skew_calls,
      med / 1e3, waited);
  if (r->has_steps && len < sizeof f->evidence) {
    double others = others_median(rs, n, worst, compute_of);
    snprintf(f->evidence + len, sizeof f->evidence - len,
             ", \"compute_s\": %.3f, \"others_compute_median_s\": %.3f", r->compute_s, others);
  }
}

/* The rank whose typical lateness stands out from the others' (their median): by more than
 * twice that median and 50 us, and (files with the step split) costing the others more than
 * 5% of their run: a loaded machine's scheduler alone makes a rank typically a few ms late
 * at calls that take tens of ms (measured: 3.3 ms against 1 ms, 5% of a 1.5 s run, under a
 * load average of 35 on 2 cores). With the split, its extra compute must also account for at
 * least 3/4 of that wait (a straggler's accounts for all of it): a rank that computes no
 * longer than the others but arrives late does so because its calls end late (at the far end
 * of a slow link: see slow_link), or because the scheduler delays it (measured: 5 ms late
 * typically, 0.064 s of wait against 0.035 s more compute, load average 35). */
static void find_straggler(const rank_stats *rs, int n, findings *fs) {
  int worst = -1;
  for (int i = 0; i < n; i++)
    if (rs[i].has_skew && (worst < 0 || typical_us(&rs[i]) > typical_us(&rs[worst]))) worst = i;
  if (worst < 0 || n < 2) return;
  double med = others_median(rs, n, worst, typical_us);
  const rank_stats *r = &rs[worst];
  double excess_us = typical_us(r) - med;
  if (!(excess_us > 2 * med && excess_us > 50)) return;
  double waited = excess_us * 1e-6 * r->skew_calls;   /* by every other rank */
  if (r->has_steps && !(waited > 0.05 * r->run_s &&
                        r->compute_s - others_median(rs, n, worst, compute_of) > 0.75 * waited))
    return;
  finding *f = add(fs, "straggler", ORDER_RANKS, (int)r->rank, (int)r->node, waited);
  if (!f) return;
  straggler_evidence(f, rs, n, worst, med, waited);
  char step[160] = "";
  if (r->has_steps)
    snprintf(step, sizeof step, "; it computes %.3f s outside gcomp, the others' median %.3f s",
             r->compute_s, others_median(rs, n, worst, compute_of));
  put(f->words, sizeof f->words,
      "rank %.0f (node %.0f) typically arrives %.3f ms after the first rank (the others' median: "
      "%.3f ms), last in %.0f of %.0f calls: every other rank waited %.3f s for it%s", r->rank,
      r->node, typical_us(r) / 1e3, med / 1e3, r->last, r->skew_calls, waited, step);
  put(f->try_, sizeof f->try_,
      "see what rank %.0f does between calls (GCOMP_TRACE shows its gaps): a slower device or "
      "input pipeline, more work (uneven batches or shards), or a busy core; balance the work or "
      "move the rank", r->rank);
}

/* A straggler in a run too short for the detector (fewer calls than one GCOMP_SKEW_WINDOW:
 * no rank has lateness figures), from the step split alone: the rank that computes longest
 * outside gcomp, at least 1.4x the others' median and by more than 5% of the run, while the
 * others wait inside gcomp for most of that difference (at least half of it) more than it
 * does. A 20-60 step profiling run with one rank computing 2x showed 92% compute against
 * the others' 46% and their 53% wait; a loaded machine's scheduler alone moved a clean
 * rank's compute by under 1.3x (diagnose.sh's clean job, load average ~30 on 2 cores). */
static double wait_of(const rank_stats *r) { return r->split_wait_s; }

static void find_straggler_early(const rank_stats *rs, int n, findings *fs) {
  int worst = -1;
  for (int i = 0; i < n; i++) {
    if (rs[i].has_skew || !rs[i].has_steps) return;   /* the detector's rule decides */
    if (worst < 0 || rs[i].compute_s > rs[worst].compute_s) worst = i;
  }
  if (worst < 0 || n < 2) return;
  const rank_stats *r = &rs[worst];
  double others = others_median_all(rs, n, worst, compute_of);
  double others_wait = others_median_all(rs, n, worst, wait_of);
  double extra = r->compute_s - others, waited = others_wait - r->split_wait_s;
  if (!(r->compute_s >= 1.4 * others && extra > 0.05 * r->run_s && waited > 0.5 * extra)) return;
  finding *f = add(fs, "straggler", ORDER_RANKS, (int)r->rank, (int)r->node, waited);
  if (!f) return;
  put(f->evidence, sizeof f->evidence,
      "\"from\": \"step_split\", \"compute_s\": %.3f, \"others_compute_median_s\": %.3f, "
      "\"compute_ratio\": %.2f, \"wait_s\": %.3f, \"others_wait_median_s\": %.3f, "
      "\"others_waited_s\": %.3f, \"run_s\": %.3f, \"calls\": %.0f",
      r->compute_s, others, others > 0 ? r->compute_s / others : 0.0, r->split_wait_s,
      others_wait, waited, r->run_s, r->calls);
  put(f->words, sizeof f->words,
      "rank %.0f (node %.0f) computes %.3f s outside gcomp, %.2fx the others' median %.3f s, over "
      "%.0f calls (too few for the lateness detector's window): the others wait %.3f s for it "
      "inside gcomp (their median %.3f s, its own %.3f s)", r->rank, r->node, r->compute_s,
      others > 0 ? r->compute_s / others : 0.0, others, r->calls, waited, others_wait,
      r->split_wait_s);
  put(f->try_, sizeof f->try_,
      "see what rank %.0f does between calls (GCOMP_TRACE shows its gaps): a slower device or "
      "input pipeline, more work (uneven batches or shards), or a busy core; balance the work or "
      "move the rank", r->rank);
}

/* ---- the ranks' distribution: one late arrival --------------------------------------------- */
/* A single arrival later than twenty times the usual spread and than 0.25 s (a checkpoint
 * or an evaluation on one rank): its call and what the others waited. */
static void find_late_arrival(const rank_stats *rs, int n, findings *fs) {
  double spread_us = 0;
  for (int i = 0; i < n; i++)
    if (rs[i].has_typical) spread_us = fmax(spread_us, rs[i].spread_typical_us);
  for (int i = 0; i < n; i++) {
    const rank_stats *r = &rs[i];
    double usual_us = fmax(spread_us, r->late_typical_us);
    if (!r->has_typical || r->late_max_call < 1 || !(r->late_max_us > 20 * usual_us) ||
        !(r->late_max_us > 250e3))
      continue;
    double waited = (r->late_max_us - usual_us) * 1e-6;
    finding *f = add(fs, "late_arrival", ORDER_RANKS, (int)r->rank, (int)r->node, waited);
    if (!f) return;
    put(f->evidence, sizeof f->evidence,
        "\"call\": %.0f, \"late_s\": %.3f, \"others_waited_s\": %.3f, \"usual_spread_ms\": %.3f",
        r->late_max_call, r->late_max_us * 1e-6, waited, usual_us / 1e3);
    put(f->words, sizeof f->words,
        "rank %.0f (node %.0f) arrived %.3f s late at call %.0f, where the calls' usual spread is "
        "%.3f ms: every other rank waited about %.3f s there", r->rank, r->node,
        r->late_max_us * 1e-6, r->late_max_call, usual_us / 1e3, waited);
    put(f->try_, sizeof f->try_,
        "find what rank %.0f did before call %.0f (a checkpoint, an evaluation, logging, a "
        "garbage collection): do it on every rank at once, asynchronously, or off the step's "
        "critical path", r->rank, r->late_max_call);
  }
}

/* ---- the ranks' distribution: one bad link or node ----------------------------------------- */
typedef struct {
  int nodes;
  double *bytes, *busy;   /* [nodes * nodes], a < b at [a * nodes + b] */
  double *best;           /* [nodes]: the best rate of any measured pair of the node, bytes/s */
  int from_links;         /* measured by the kernel on TCP connections, not by sends */
} pair_table;

enum { MIN_PAIR_BYTES = 1 << 20 };   /* less is too little to time a link by */

static double pair_rate(const pair_table *p, int a, int b) {
  int lo = a < b ? a : b, hi = a < b ? b : a;
  size_t k = (size_t)lo * (size_t)p->nodes + (size_t)hi;
  return p->bytes[k] >= MIN_PAIR_BYTES && p->busy[k] > 0 ? p->bytes[k] / p->busy[k] : 0;
}

static void pair_add(pair_table *p, int a, int b, double bytes, double busy) {
  size_t at = (size_t)(a < b ? a : b) * (size_t)p->nodes + (size_t)(a < b ? b : a);
  p->bytes[at] += bytes, p->busy[at] += busy;
}

/* The node of a local address of some rank's connections: -1 when none has it, -2 when
 * ranks of two nodes have it (127.0.0.1 when the emulated nodes share one network) */
static int node_of_addr(const rank_stats *rs, int n, const char *addr) {
  int node = -1;
  for (int i = 0; i < n; i++)
    for (int k = 0; k < rs[i].nlinks; k++)
      if (!strcmp(rs[i].links[k].local, addr)) {
        if (node >= 0 && node != (int)rs[i].node) return -2;
        node = (int)rs[i].node;
      }
  return node;
}

/* The kernel's figures of every rank's TCP connections per node pair, the remote end's node
 * known by its address (another rank's local one); the number of links used. */
static int pair_fill_links(const rank_stats *rs, int n, pair_table *p) {
  int used = 0;
  for (int i = 0; i < n; i++)
    for (int k = 0; k < rs[i].nlinks; k++) {
      const link_stats *l = &rs[i].links[k];
      int a = (int)rs[i].node, b = node_of_addr(rs, n, l->remote);
      if (l->bytes < MIN_PAIR_BYTES || b < 0 || a == b || a < 0 || a >= p->nodes ||
          b >= p->nodes || node_of_addr(rs, n, l->local) != a)
        continue;
      pair_add(p, a, b, l->bytes, l->busy_s);
      used++;
    }
  return used;
}

/* Per node pair, what the TCP links delivered where the files have it, else every rank's
 * sends to ranks of other nodes; 0 when there is nothing to compare (fewer than 3 nodes
 * measured, or not every rank's file). */
static int pair_fill(const rank_stats *rs, int n, pair_table *p) {
  int nodes = (int)rs[0].nodes;
  if (nodes < 3 || n != (int)rs[0].size || nodes > 4096) return 0;
  p->nodes = nodes;
  p->bytes = calloc((size_t)nodes * (size_t)nodes, sizeof *p->bytes);
  p->busy = calloc((size_t)nodes * (size_t)nodes, sizeof *p->busy);
  p->best = calloc((size_t)nodes, sizeof *p->best);
  if (!p->bytes || !p->busy || !p->best) return 0;
  p->from_links = pair_fill_links(rs, n, p) > 0;
  for (int i = 0; !p->from_links && i < n; i++)
    for (int k = 0; k < rs[i].npeers; k++) {
      const peer_stats *q = &rs[i].peers[k];
      if (q->peer < 0 || q->peer >= n || q->bytes < MIN_PAIR_BYTES) continue;   /* too few */
      int a = (int)rs[i].node, b = (int)rs[q->peer].node;
      if (a == b || a < 0 || b < 0 || a >= nodes || b >= nodes) continue;
      pair_add(p, a, b, q->bytes, q->busy_s);
    }
  int measured = 0;
  for (int a = 0; a < nodes; a++) {
    for (int b = 0; b < nodes; b++)
      if (b != a) p->best[a] = fmax(p->best[a], pair_rate(p, a, b));
    measured += p->best[a] > 0;
  }
  return measured >= 3;
}

/* the measured pairs of node a, as JSON members "a-b": Gbit/s */
static void pairs_json(const pair_table *p, int a, char *out, size_t cap) {
  size_t len = 0;
  out[0] = '\0';
  for (int b = 0; b < p->nodes && len < cap; b++) {
    double r = b == a ? 0 : pair_rate(p, a, b);
    if (r > 0)
      len += (size_t)snprintf(out + len, cap - len, "%s\"%d-%d\": %.3f", len ? ", " : "",
                              a < b ? a : b, a < b ? b : a, r * 8e-9);
  }
}

static double mean_total(const rank_stats *rs, int n) {
  double t = 0;
  for (int i = 0; i < n; i++) t += rs[i].total / n;
  return t;
}

static void slow_node(const rank_stats *rs, int n, const pair_table *p, int a, double med,
                      findings *fs) {
  double ratio = p->best[a] / med;
  finding *f = add(fs, "slow_link", ORDER_RANKS, -1, a, mean_total(rs, n) * (1 - ratio));
  if (!f) return;
  char pairs[300];
  pairs_json(p, a, pairs, sizeof pairs);
  put(f->evidence, sizeof f->evidence,
      "\"node_gbps\": %.3f, \"median_node_gbps\": %.3f, \"ratio\": %.3f, \"pairs_gbps\": {%s}, "
      "\"measured_by\": \"%s\"", p->best[a] * 8e-9, med * 8e-9, ratio, pairs,
      p->from_links ? "tcp_info" : "sends");
  put(f->words, sizeof f->words,
      "node %d's link delivers at most %.3f Gbit/s to any other node, %.0f%% of the median "
      "node's %.3f Gbit/s (measured on the job's own %s): every pair with node %d is slow",
      a, p->best[a] * 8e-9, 100 * ratio, med * 8e-9,
      p->from_links ? "TCP connections, by the kernel" : "sends", a);
  put(f->try_, sizeof f->try_,
      "check node %d's network (link speed and errors, its switch port, a NIC driver or "
      "offload setting, other traffic on it); until fixed, leave it out of the job", a);
}

static void slow_pair(const rank_stats *rs, int n, const pair_table *p, int a, int b,
                      double expect, findings *fs) {
  double r = pair_rate(p, a, b), ratio = r / expect;
  finding *f = add(fs, "slow_link", ORDER_RANKS, -1, a, mean_total(rs, n) * (1 - ratio));
  if (!f) return;
  put(f->evidence, sizeof f->evidence,
      "\"nodes\": [%d, %d], \"pair_gbps\": %.3f, \"nodes_best_gbps\": %.3f, \"ratio\": %.3f", a, b,
      r * 8e-9, expect * 8e-9, ratio);
  put(f->words, sizeof f->words,
      "the link between nodes %d and %d delivers %.3f Gbit/s, %.0f%% of what both nodes reach "
      "with others (%.3f Gbit/s)", a, b, r * 8e-9, 100 * ratio, expect * 8e-9);
  put(f->try_, sizeof f->try_,
      "check the path between nodes %d and %d (a congested or misconfigured switch link, a "
      "routing detour)", a, b);
}

/* A node whose best pair is below half the median node's best is a slow node; a pair below
 * half of what both its nodes reach elsewhere (neither slow) is a slow link. */
static void find_slow_link(const rank_stats *rs, int n, findings *fs) {
  pair_table p = {0};
  if (pair_fill(rs, n, &p)) {
    double *x = malloc((size_t)p.nodes * sizeof *x);
    int m = 0;
    for (int a = 0; x && a < p.nodes; a++)
      if (p.best[a] > 0) x[m++] = p.best[a];
    double med = x ? median_of(x, m) : 0;
    free(x);
    for (int a = 0; med > 0 && a < p.nodes; a++)
      if (p.best[a] > 0 && p.best[a] < med / 2) slow_node(rs, n, &p, a, med, fs);
    for (int a = 0; med > 0 && a < p.nodes; a++)
      for (int b = a + 1; b < p.nodes; b++) {
        double expect = fmin(p.best[a], p.best[b]), r = pair_rate(&p, a, b);
        if (r > 0 && p.best[a] >= med / 2 && p.best[b] >= med / 2 && r < expect / 2)
          slow_pair(rs, n, &p, a, b, expect, fs);
      }
  }
  free(p.bytes), free(p.busy), free(p.best);
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
  q->cores_per_node = m->cores > 0 && m->cores < 1e6 ? (int)m->cores : 0;
  return 0;
}

static void latency_words(finding *f, const gcomp_plan_query *q, const gcomp_plan_result *r,
                          const rank_stats *r0, uint64_t cross) {
  double frac = r->latency_s / r->time_s, measured_us = r0->total / r0->calls * 1e6;
  put(f->evidence, sizeof f->evidence,
      "\"mean_call_bytes\": %llu, \"algo\": \"%s\", \"predicted_us\": %.3f, "
      "\"latency_frac\": %.3f, \"measured_us\": %.3f, \"crossover_bytes\": %llu, \"calls\": %.0f, \"oversubscribed\": %s",
      (unsigned long long)q->bytes, r->algo, r->time_s * 1e6, frac, measured_us,
      (unsigned long long)cross, r0->calls, r->oversubscribed ? "true" : "false");
  put(f->words, sizeof f->words,
      "calls of %llu B on average (%.0f calls, %.1f us each measured): at %d x %d ranks the model "
      "the communicator measured spends %.0f%% of such a call (%s, %s%.1f us) on latency; calls "
      "below %llu B are latency-bound here", (unsigned long long)q->bytes, r0->calls, measured_us,
      q->nodes, q->ranks_per_node, 100 * frac, r->algo, r->oversubscribed ? ">= " : "",
      r->time_s * 1e6, (unsigned long long)cross);
  put(f->try_, sizeof f->try_,
      "fuse small tensors into buckets of at least %llu B (DDP's bucket_cap_mb) or make fewer, "
      "larger calls; on more nodes the crossover moves up (gcomp-plan --from-stats shows where)%s",
      (unsigned long long)cross, r->oversubscribed ? "; and run no more busy ranks than cores"
                                                   : "");
}

/* The mean call of the job priced by the model the communicator measured: latency-bound
 * when the latency terms are more than half its predicted time. */
static void find_latency_bound(const rank_stats *rs, int n, findings *fs) {
  gcomp_plan_query q;
  if (rs[0].calls < 1 || rs[0].bytes < 1 || model_query(rs, n, &q)) return;
  q.bytes = (uint64_t)(rs[0].bytes / rs[0].calls);
  gcomp_plan_result r = {.struct_size = sizeof r};
  if (gcomp_plan_predict(&q, NULL, &r) != GCOMP_OK || !(r.latency_s > r.time_s / 2)) return;
  finding *f = add(fs, "latency_bound", ORDER_COLLECTIVE, -1, -1,
                   mean_total(rs, n) * r.latency_s / r.time_s);
  if (f) latency_words(f, &q, &r, &rs[0], plan_crossover_bytes(&q));
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

void stats_find_all(const rank_stats *rs, int n, findings *fs) {
  find_latency_bound(rs, n, fs);
  find_straggler(rs, n, fs);
  find_straggler_early(rs, n, fs);
  find_late_arrival(rs, n, fs);
  find_slow_link(rs, n, fs);
  find_placement(rs, n, fs);
}
