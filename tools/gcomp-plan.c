/* gcomp-plan: what the planner would run, and what it predicts, for a job that does not
 * exist yet. The same cost functions gcomp_allreduce uses (reduce/plan.c), fed with link
 * figures given on the command line or taken from a GCOMP_STATS file of a real run, over a
 * range of node counts: the predicted allreduce time, its bus bandwidth, and the scaling
 * efficiency of a data-parallel step that computes for --compute-ms and then waits for the
 * allreduce (no overlap: the pessimistic bound; perfect overlap would hide min(T, compute)). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll.h"
#include "stats_file.h"

static void usage(FILE *out) {
  fprintf(out,
          "usage: gcomp-plan [--bytes SIZE] [--ranks-per-node L] [--nodes N[,N...]]\n"
          "                  [--links INTRA_US,INTRA_GBPS,INTER_US,INTER_GBPS[,SHM_US,SHM_GBPS]]\n"
          "                  [--reduce-gbps G] [--from-stats FILE] [--compute-ms T]\n"
          "                  [--codec-ratio R --codec-gbps G [--sparse]] [--json]\n"
          "  Predicts the allreduce of SIZE bytes (default 100m) on N nodes of L ranks (default\n"
          "  1,2,4,...,64 nodes of 8), prints every algorithm's estimate at the largest N with\n"
          "  --json, and per N the planner's choice, time, busbw and step efficiency.\n"
          "  Links default to 0.5 us / 20 GB/s inside a node and 10 us / 12.5 GB/s (100 Gbit/s)\n"
          "  between nodes; --from-stats reads the figures a communicator measured (GCOMP_STATS\n"
          "  file of a real run; --links still overrides them).\n");
}

static int stats_model(const char *path, const char *text, gcomp_plan_in *in);

static int load_stats(const char *path, gcomp_plan_in *in) {
  char *text = stats_slurp(path);
  if (!text) {
    fprintf(stderr, "gcomp-plan: cannot read '%s': %s\n", path, strerror(errno));
    return -1;
  }
  int st = stats_model(path, text, in);
  free(text);
  return st;
}

static int stats_model(const char *path, const char *text, gcomp_plan_in *in) {
  double ia, ib, ea, eb, g, sa = 0, sb = 0;
  if (stats_number(text, "intra_alpha_us", &ia) || stats_number(text, "intra_GBps", &ib) ||
      stats_number(text, "inter_alpha_us", &ea) || stats_number(text, "inter_GBps", &eb) ||
      stats_number(text, "reduce_GBps", &g) || ib <= 0 || eb <= 0 || g <= 0) {
    fprintf(stderr, "gcomp-plan: '%s' is not a GCOMP_STATS file (no model figures)\n", path);
    return -1;
  }
  in->intra = (gcomp_link){ia * 1e-6, 1.0 / (ib * 1e9)};
  double nodes = 0;
  if (!stats_number(text, "nodes", &nodes) && nodes >= 2)
    in->inter = (gcomp_link){ea * 1e-6, 1.0 / (eb * 1e9)};
  else
    fprintf(stderr, "gcomp-plan: '%s' comes from a single-node run: its inter-node figures are "
                    "the intra-node ones; keeping the default (or --links) between nodes\n", path);
  in->gamma_spb = 1.0 / (g * 1e9);
  if (!stats_number(text, "shm_alpha_us", &sa) && !stats_number(text, "shm_GBps", &sb) && sa > 0 &&
      sb > 0)
    in->shm_alpha = sa * 1e-6, in->shm_spb = 1.0 / (sb * 1e9);
  return 0;
}

int main(int argc, char **argv) {
  int64_t bytes = 100 << 20;
  int local = 8, json = 0, nnodes_list[64], nn = 0;
  double compute_ms = 0, codec_ratio = 0, codec_gbps = 0, reduce_gbps = 8;
  int sparse = 0;
  gcomp_plan_in base = {0};
  base.intra = (gcomp_link){0.5e-6, 1.0 / 20e9};
  base.inter = (gcomp_link){10e-6, 1.0 / 12.5e9};
  const char *stats = NULL, *links = NULL;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    int used = 1;
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); return 0; }
    else if (!strcmp(a, "--json")) json = 1, used = 0;
    else if (!strcmp(a, "--sparse")) sparse = 1, used = 0;
    else if (!v) { fprintf(stderr, "gcomp-plan: %s needs a value\n", a); return 2; }
    else if (!strcmp(a, "--bytes")) {
      if (gcomp_parse_size(v, &bytes) != GCOMP_OK || bytes <= 0) {
        fprintf(stderr, "gcomp-plan: --bytes '%s' is not a size (e.g. 64m)\n", v);
        return 2;
      }
    } else if (!strcmp(a, "--ranks-per-node")) {
      char *end;
      long l = strtol(v, &end, 10);
      if (end == v || *end || l < 1 || l > 4096) {
        fprintf(stderr, "gcomp-plan: --ranks-per-node '%s' is not a count in [1, 4096]\n", v);
        return 2;
      }
      local = (int)l;
    } else if (!strcmp(a, "--nodes")) {
      nn = 0;
      for (char *s = (char *)v, *end; *s && nn < 64; s = *end == ',' ? end + 1 : end) {
        long k = strtol(s, &end, 10);
        if (end == s || k < 1 || k > 1 << 20 || (*end && *end != ',')) {
          fprintf(stderr, "gcomp-plan: --nodes '%s' is not a list of node counts (e.g. 1,2,8)\n", v);
          return 2;
        }
        nnodes_list[nn++] = (int)k;
      }
    } else if (!strcmp(a, "--links")) links = v;
    else if (!strcmp(a, "--from-stats")) stats = v;
    else if (!strcmp(a, "--compute-ms")) compute_ms = atof(v);
    else if (!strcmp(a, "--reduce-gbps")) reduce_gbps = atof(v);
    else if (!strcmp(a, "--codec-ratio")) codec_ratio = atof(v);
    else if (!strcmp(a, "--codec-gbps")) codec_gbps = atof(v);
    else { fprintf(stderr, "gcomp-plan: unknown option '%s'\n", a); usage(stderr); return 2; }
    i += used;
  }
  if (reduce_gbps <= 0 || compute_ms < 0 || codec_ratio < 0 || codec_gbps < 0 ||
      (codec_ratio > 0) != (codec_gbps > 0)) {
    fprintf(stderr, "gcomp-plan: --reduce-gbps must be > 0, --compute-ms >= 0, and --codec-ratio "
                    "and --codec-gbps go together (both > 0)\n");
    return 2;
  }
  base.gamma_spb = 1.0 / (reduce_gbps * 1e9);
  if (stats && load_stats(stats, &base) < 0) return 1;   /* --links, when given, wins */
  if (links) {   /* GCOMP_ALPHA_BETA's format and parser; gamma stays --reduce-gbps */
    double gamma = base.gamma_spb;
    if (gcomp_plan_parse_links(links, "--links", &base) != GCOMP_OK) {
      fprintf(stderr, "gcomp-plan: %s\n", gcomp_last_error());
      return 2;
    }
    base.gamma_spb = gamma;
  }
  if (base.shm_alpha < 0) base.shm_alpha = 0;   /* no shm figures: no shm estimate */
  if (base.shm_alpha > 0) base.shm_slot = 256 << 10;
  if (codec_ratio > 0) {
    base.ratio = codec_ratio;
    base.codec_spb = 1.0 / (codec_gbps * 1e9);
    base.sparse = sparse;
  }
  if (!nn)
    for (int k = 1; k <= 64; k *= 2) nnodes_list[nn++] = k;

  for (int k = 0; k < nn; k++)   /* the planner counts ranks in int */
    if ((long long)local * nnodes_list[k] > (1 << 24)) {
      fprintf(stderr, "gcomp-plan: %d ranks per node on %d nodes is %lld ranks: at most %d\n",
              local, nnodes_list[k], (long long)local * nnodes_list[k], 1 << 24);
      return 2;
    }
  if (!json)
    printf("# gcomp-plan: %lld B per allreduce, %d ranks per node; intra %.2f us %.2f GB/s, inter "
           "%.2f us %.2f GB/s, reduce %.2f GB/s%s%s\n"
           "#  nodes  ranks          algo    time (ms)  busbw (GB/s)  step efficiency\n",
           (long long)bytes, local, base.intra.alpha_s * 1e6, 1e-9 / base.intra.beta_spb,
           base.inter.alpha_s * 1e6, 1e-9 / base.inter.beta_spb, 1e-9 / base.gamma_spb,
           codec_ratio > 0 ? ", with a codec" : "", compute_ms > 0 ? "" : " (no --compute-ms)");
  else
    printf("{\"bytes\": %lld, \"ranks_per_node\": %d, \"compute_ms\": %g, \"rows\": [", (long long)bytes,
           local, compute_ms);
  for (int k = 0; k < nn; k++) {
    gcomp_plan_in in = base;
    in.bytes = (size_t)bytes;
    in.nnodes = nnodes_list[k];
    in.local = local;
    in.n = local * in.nnodes;
    const gcomp_algo *best = gcomp_plan_pick(&in, NULL);
    double t = best->cost(&in);
    double busbw = in.n > 1 && t > 0 ? (double)bytes / t * 2.0 * (in.n - 1) / in.n * 1e-9 : 0;
    double eff = compute_ms > 0 ? compute_ms / (compute_ms + t * 1e3) : NAN;
    if (!json) {
      printf("  %6d %6d %13s %12.3f %13.2f", in.nnodes, in.n, best->name, t * 1e3, busbw);
      if (compute_ms > 0) printf(" %15.1f%%", eff * 100);
      printf("\n");
      continue;
    }
    printf("%s\n  {\"nodes\": %d, \"ranks\": %d, \"algo\": \"%s\", \"ms\": %.6f, \"busbw\": %.4f",
           k ? "," : "", in.nnodes, in.n, best->name, t * 1e3, busbw);
    if (compute_ms > 0) printf(", \"efficiency\": %.6f", eff);
    printf(", \"estimates_ms\": {");
    for (int i = 0, first = 1; i < gcomp_algo_total(); i++) {
      double c = gcomp_algo_at(i)->cost(&in);
      if (c < 0 || c >= 1e29) continue;
      printf("%s\"%s\": %.6f", first ? "" : ", ", gcomp_algo_at(i)->name, c * 1e3);
      first = 0;
    }
    printf("}}");
  }
  if (json) printf("\n]}\n");
  return 0;
}
