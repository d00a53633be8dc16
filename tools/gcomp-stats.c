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

#include "stats_file.h"
#include "stats_job.h"

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

/* "peers": [{"peer": P, "bytes": B, "busy_s": S}, ...]: what this rank sent to each peer
 * and how long those sends were in flight. Entries that do not parse are skipped. */
static void load_peers(const char *text, rank_stats *r) {
  const char *p = strstr(text, "\"peers\": [");
  const char *end = p ? strchr(p, ']') : NULL;
  if (!end) return;
  int cap = 0;
  for (const char *q = p; (q = strchr(q + 1, '{')) && q < end;) cap++;
  r->peers = cap ? calloc((size_t)cap, sizeof *r->peers) : NULL;
  for (const char *q = p; r->peers && (q = strchr(q + 1, '{')) && q < end;) {
    double peer, bytes, busy;
    if (stats_number(q, "peer", &peer) || stats_number(q, "bytes", &bytes) ||
        stats_number(q, "busy_s", &busy) || peer < 0 || peer > 1e9 || bytes < 0 || busy < 0)
      continue;
    r->peers[r->npeers++] = (peer_stats){(int)peer, bytes, busy};
  }
}

/* "key": "text" in obj (up to the next '}'), copied into out; -1 when absent or too long */
static int stats_string(const char *obj, const char *key, char *out, size_t cap) {
  char pat[64];
  snprintf(pat, sizeof pat, "\"%s\": \"", key);
  const char *p = strstr(obj, pat), *close = strchr(obj, '}');
  if (!p || (close && p > close)) return -1;
  p += strlen(pat);
  const char *q = strchr(p, '"');
  if (!q || (size_t)(q - p) >= cap) return -1;
  memcpy(out, p, (size_t)(q - p));
  out[q - p] = '\0';
  return 0;
}

/* "links": [{"local": IP, "remote": IP, "bytes": B, "busy_s": S}, ...]: what this rank's TCP
 * connections delivered. Entries that do not parse are skipped. */
static void load_links(const char *text, rank_stats *r) {
  const char *p = strstr(text, "\"links\": [");
  const char *end = p ? strchr(p, ']') : NULL;
  if (!end) return;
  int cap = 0;
  for (const char *q = p; (q = strchr(q + 1, '{')) && q < end;) cap++;
  r->links = cap ? calloc((size_t)cap, sizeof *r->links) : NULL;
  for (const char *q = p; r->links && (q = strchr(q + 1, '{')) && q < end;) {
    link_stats *l = &r->links[r->nlinks];
    if (stats_string(q, "local", l->local, sizeof l->local) ||
        stats_string(q, "remote", l->remote, sizeof l->remote) ||
        stats_number(q, "bytes", &l->bytes) || stats_number(q, "busy_s", &l->busy_s) ||
        l->bytes < 0 || l->busy_s < 0)
      continue;
    if (stats_number(q, "lport", &l->lport) || stats_number(q, "rport", &l->rport))
      l->lport = l->rport = -1;
    l->peer = -1;
    r->nlinks++;
  }
}

/* Figures later files carry (each absent in older ones): the step split, the cores, the
 * detector's robust figures, what went to each peer. */
static void load_later(const char *text, const char *skew, rank_stats *r) {
  r->has_steps = !stats_number(text, "run_s", &r->run_s) &&
                 !stats_number(text, "compute_s", &r->compute_s) && r->run_s > 0;
  if (stats_number(text, "steps", &r->steps)) r->steps = 0;
  if (stats_number(text, "comm_s", &r->comm_s) ||
      stats_number(text, "split_wait_s", &r->split_wait_s))
    r->comm_s = r->total - r->wait, r->split_wait_s = r->wait;
  if (stats_number(text, "cores", &r->cores)) r->cores = 0;
  r->has_typical = skew && !stats_number(skew, "late_typical_us", &r->late_typical_us) &&
                   !stats_number(skew, "spread_typical_us", &r->spread_typical_us) &&
                   !stats_number(skew, "late_max_call", &r->late_max_call);
  load_peers(text, r);
  load_links(text, r);
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
  load_later(text, skew, r);
  free(text);
  return 0;
}

/* Each connection's peer: the rank whose file holds its mirror image (addresses and ports
 * swapped) */
static void link_peers(rank_stats *rs, int n) {
  for (int i = 0; i < n; i++)
    for (int k = 0; k < rs[i].nlinks; k++) {
      link_stats *l = &rs[i].links[k];
      for (int j = 0; l->lport >= 0 && l->peer < 0 && j < n; j++)
        for (int m = 0; j != i && m < rs[j].nlinks; m++) {
          const link_stats *o = &rs[j].links[m];
          if (o->lport == l->rport && o->rport == l->lport && !strcmp(o->local, l->remote) &&
              !strcmp(o->remote, l->local)) {
            l->peer = (int)rs[j].rank;
            break;
          }
        }
    }
}

static int by_rank(const void *a, const void *b) {
  double x = ((const rank_stats *)a)->rank, y = ((const rank_stats *)b)->rank;
  return (x > y) - (x < y);
}

static double pct(double part, double whole) { return whole > 0 ? 100 * part / whole : 0; }

/* ---- output ------------------------------------------------------------------------------- */
/* The columns of time inside gcomp, then (files with the step split) each rank's run split
 * into compute (outside gcomp), communication and wait (inside it). */
static void print_table(const rank_stats *rs, int n) {
  int steps = 0;
  for (int i = 0; i < n; i++) steps |= rs[i].has_steps;
  printf("# gcomp-stats: %d rank%s\n", n, n == 1 ? "" : "s");
  printf("# %4s %4s %8s %9s %5s %7s %7s %7s %9s %9s %9s %11s %10s %6s%s\n", "rank", "node", "calls",
         "time (s)", "wait", "reduce", "encode", "decode", "wire MB", "shm MB", "NaN/Inf",
         "late (ms)", "max (ms)", "last", steps ? " | run (s) compute    comm    wait" : "");
  for (int i = 0; i < n; i++) {
    const rank_stats *r = &rs[i];
    printf("  %4.0f %4.0f %8.0f %9.3f %4.0f%% %6.0f%% %6.0f%% %6.0f%% %9.2f %9.2f %9.0f", r->rank,
           r->node, r->calls, r->total, pct(r->wait, r->total), pct(r->reduce, r->total),
           pct(r->encode, r->total), pct(r->decode, r->total), r->wire / 1e6, r->shm / 1e6,
           r->nonfinite);
    if (r->has_skew)
      printf(" %11.3f %10.3f %6.0f", r->late_mean_us / 1e3, r->late_max_us / 1e3, r->last);
    else
      printf(" %11s %10s %6s", "-", "-", "-");
    if (r->has_steps)
      printf(" | %7.3f %6.1f%% %6.1f%% %6.1f%%", r->run_s, pct(r->compute_s, r->run_s),
             pct(r->comm_s, r->run_s), pct(r->split_wait_s, r->run_s));
    printf("\n");
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
  printf("  {\"rank\": %.0f, \"node\": %.0f, ", r->rank, r->node);
  if (r->has_steps)
    printf("\"compute_frac\": %.4f, \"comm_frac\": %.4f, \"wait_frac\": %.4f, \"run_s\": %.6f, "
           "\"compute_s\": %.6f, \"comm_s\": %.6f, \"split_wait_s\": %.6f, \"steps\": %.0f, ",
           r->compute_s / r->run_s, r->comm_s / r->run_s, r->split_wait_s / r->run_s, r->run_s,
           r->compute_s, r->comm_s, r->split_wait_s, r->steps);
  else
    printf("\"compute_frac\": null, \"comm_frac\": null, \"wait_frac\": null, ");
  printf("\"calls\": %.0f, \"bytes\": %.0f, \"total_s\": %.6f, \"wait_s\": %.6f, "
         "\"reduce_s\": %.6f, \"encode_s\": %.6f, \"decode_s\": %.6f, \"wire_bytes\": %.0f, "
         "\"shm_bytes\": %.0f, \"nonfinite\": %.0f", r->calls, r->bytes, r->total, r->wait,
         r->reduce, r->encode, r->decode, r->wire, r->shm, r->nonfinite);
  if (r->has_skew)
    printf(", \"late_mean_us\": %.1f, \"late_max_us\": %.1f, \"last\": %.0f, \"skew_calls\": %.0f",
           r->late_mean_us, r->late_max_us, r->last, r->skew_calls);
  if (r->has_typical)
    printf(", \"late_typical_us\": %.1f, \"late_max_call\": %.0f", r->late_typical_us,
           r->late_max_call);
  /* what reached each peer rank over TCP, by the kernel's figures */
  printf(", \"links\": [");
  for (int k = 0, first = 1; k < r->nlinks; k++) {
    const link_stats *l = &r->links[k];
    if (l->peer < 0) continue;
    printf("%s{\"peer\": %d, \"bytes\": %.0f, \"busy_s\": %.6f, \"gbps\": %.3f}",
           first ? "" : ", ", l->peer, l->bytes, l->busy_s,
           l->busy_s > 0 ? l->bytes / l->busy_s * 8e-9 : 0);
    first = 0;
  }
  printf("]}%s\n", last ? "" : ",");
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

static void free_all(rank_stats *rs, int n) {
  for (int i = 0; rs && i < n; i++) free(rs[i].peers), free(rs[i].links);
  free(rs);
}

/* Loads the files (sorted by rank, no rank twice); NULL on error (message printed). */
static rank_stats *load_all(char **paths, int n) {
  rank_stats *rs = calloc((size_t)n, sizeof *rs);
  if (!rs) return NULL;
  for (int i = 0; i < n; i++)
    if (load(paths[i], &rs[i]) != 0) {
      free_all(rs, i);
      return NULL;
    }
  qsort(rs, (size_t)n, sizeof *rs, by_rank);
  link_peers(rs, n);
  for (int i = 1; i < n; i++)
    if (rs[i].rank == rs[i - 1].rank) {
      fprintf(stderr, "gcomp-stats: '%s' and '%s' are both rank %.0f: files of two jobs?\n",
              rs[i - 1].path, rs[i].path, rs[i].rank);
      free_all(rs, n);
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
  stats_find_all(rs, n, &fs);
  if (json) {
    print_json(rs, n, &fs);
  } else {
    print_table(rs, n);
    print_footer(rs, n);
    print_findings(&fs);
  }
  free_all(rs, n);
  return 0;
}
