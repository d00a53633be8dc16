/* gcomp-sim: gcomp's own allreduce on a simulated cluster, beside gcomp-plan's prediction.
 *
 * For each node count N it writes a SimGrid platform (N hosts of L ranks: the intra-node
 * figures are each host's loopback link, the inter-node ones its link to a non-blocking
 * backbone), runs gcomp-sim-rank under smpirun (every rank a gcomp communicator over SMPI's
 * point-to-point messages: include/gcomp_mpi.h) and reads back the simulated times. The
 * prediction comes from the same public cost model gcomp-plan prints (gcomp_plan_predict)
 * for the same links, so the two tools read alike and each checks the other.
 *
 * Link figures map to the platform so that the model's alpha and beta are what the simulator
 * charges: a message between nodes crosses two host links (lat = INTER_US / 2 each; the
 * backbone adds nothing), links are split-duplex (a ring sends and receives at full rate),
 * SMPI's latency and bandwidth correction factors are 1 and cross-traffic is off. By default
 * only the network and --compute-ms take simulated time (the model's reduction term is
 * dropped too): runs are then exact and repeatable. --cpu also charges the CPU time the ranks
 * really spend (reductions, codecs, the library's own work) at this machine's speed
 * (smpi/host-speed equal to the hosts'), wall-clock measured and so as noisy as the machine.
 * Docs: docs/simulation.md. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gcomp.h"

enum { MAX_ROWS = 32 };

typedef struct {
  uint64_t bytes;
  int rpn, nodes[MAX_ROWS], nrows;
  const char *links, *algo, *rank_prog, *smpirun, *keep;
  double compute_ms, reduce_gbps;
  int iters, json, check, cpu, shared, overlap;
} sim_opts;

typedef struct {
  int ok;
  double sim_s, step_s, create_s, first_s, rss;
  char algo[32];
} sim_row;

static void usage(FILE *out) {
  fprintf(out,
          "usage: gcomp-sim --bytes SIZE --ranks-per-node L --nodes N[,N...]\n"
          "                 --links INTRA_US,INTRA_GBPS,INTER_US,INTER_GBPS --algo ALGO\n"
          "                 [--compute-ms T [--overlap]] [--iters K] [--cpu [--reduce-gbps G]]\n"
          "                 [--check | --shared] [--json] [--keep DIR] [--smpirun PATH]\n"
          "                 [--rank-program PATH]\n"
          "  Runs gcomp's own allreduce of SIZE bytes (fp32) under SimGrid's smpirun on N\n"
          "  simulated nodes of L ranks, and prints per N the simulated time of one call, its\n"
          "  bus bandwidth and the efficiency of a step of T ms of compute, beside gcomp-plan's\n"
          "  prediction for the same links (GB/s, as gcomp-plan). ALGO: a name from gcomp-info\n"
          "  or auto. --check verifies every element of every result. --overlap: efficiency\n"
          "  as T / max(T, call), the call hidden behind T's compute (DDP's overlap with the\n"
          "  backward pass), instead of T / (T + call). --iters 0: the first call only.\n"
          "  --shared: every rank's buffers share memory (large payloads; no --check).\n"
          "  Simulated time is the network's and T's; --cpu adds this machine's CPU time\n"
          "  (reductions included; the prediction then reduces at G GB/s). --keep DIR keeps\n"
          "  the platform files. Defaults: 1m, 8 ranks per node, nodes 1,2,4, links 0.5,20,10,12.5, ring,\n"
          "  3 timed calls, reduce 8 GB/s.\n");
}

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

static int parse_nodes(const char *text, sim_opts *o) {
  o->nrows = 0;
  const char *p = text;
  while (*p) {
    char *end;
    long n = strtol(p, &end, 10);
    if (end == p || n < 1 || n > 65536 || o->nrows == MAX_ROWS) return -1;
    o->nodes[o->nrows++] = (int)n;
    if (*end == ',') end++;
    else if (*end) return -1;
    p = end;
  }
  return o->nrows ? 0 : -1;
}

static int bad(const char *opt, const char *v, const char *what) {
  fprintf(stderr, "gcomp-sim: %s '%s' is not %s\n", opt, v, what);
  return 2;
}

static int parse_args(int argc, char **argv, sim_opts *o) {
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    char *end = NULL;
    if (!strcmp(a, "--json")) { o->json = 1; continue; }
    if (!strcmp(a, "--check")) { o->check = 1; continue; }
    if (!strcmp(a, "--cpu")) { o->cpu = 1; continue; }
    if (!strcmp(a, "--shared")) { o->shared = 1; continue; }
    if (!strcmp(a, "--overlap")) { o->overlap = 1; continue; }
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) { usage(stdout); return 1; }
    if (!v) { fprintf(stderr, "gcomp-sim: %s needs a value\n", a); return 2; }
    i++;
    if (!strcmp(a, "--bytes")) {
      if (parse_bytes(v, &o->bytes) || o->bytes % 4 || o->bytes > (UINT64_C(1) << 33))
        return bad(a, v, "a size in whole floats up to 8g (e.g. 1m)");
    } else if (!strcmp(a, "--ranks-per-node")) {
      long l = strtol(v, &end, 10);
      if (end == v || *end || l < 1 || l > 4096) return bad(a, v, "a count in [1, 4096]");
      o->rpn = (int)l;
      end = NULL;
    } else if (!strcmp(a, "--nodes")) {
      if (parse_nodes(v, o)) return bad(a, v, "a list of node counts (e.g. 1,2,8)");
    } else if (!strcmp(a, "--links")) o->links = v;
    else if (!strcmp(a, "--algo")) o->algo = v;
    else if (!strcmp(a, "--keep")) o->keep = v;
    else if (!strcmp(a, "--smpirun")) o->smpirun = v;
    else if (!strcmp(a, "--rank-program")) o->rank_prog = v;
    else if (!strcmp(a, "--compute-ms")) o->compute_ms = strtod(v, &end);
    else if (!strcmp(a, "--reduce-gbps")) o->reduce_gbps = strtod(v, &end);
    else if (!strcmp(a, "--iters")) {
      long k = strtol(v, &end, 10);
      if (end == v || *end || k < 0 || k > 1000) return bad(a, v, "a count in [0, 1000]");
      o->iters = (int)k;
      end = NULL;
    } else {
      fprintf(stderr, "gcomp-sim: unknown option '%s'\n", a);
      usage(stderr);
      return 2;
    }
    if (end && (end == v || *end)) return bad(a, v, "a number");
  }
  if (o->check && o->shared) {
    fprintf(stderr, "gcomp-sim: --check needs each rank's own buffers: not with --shared\n");
    return 2;
  }
  if (!(o->compute_ms >= 0) || !(o->reduce_gbps > 0)) {
    fprintf(stderr, "gcomp-sim: --compute-ms must be >= 0 and --reduce-gbps > 0\n");
    return 2;
  }
  for (int k = 0; k < o->nrows; k++)
    if ((long long)o->nodes[k] * o->rpn > 65536) {
      fprintf(stderr, "gcomp-sim: %d nodes of %d ranks: at most 65536 ranks\n", o->nodes[k],
              o->rpn);
      return 2;
    }
  return 0;
}

/* ---- the platform ------------------------------------------------------------------- */
static int write_platform(const sim_opts *o, const gcomp_plan_query *q, int nodes,
                          const char *dir, char *plat, char *hosts, size_t cap) {
  snprintf(plat, cap, "%s/platform-%d.xml", dir, nodes);
  snprintf(hosts, cap, "%s/hosts-%d.txt", dir, nodes);
  FILE *f = fopen(plat, "w");
  if (!f) return -1;
  /* the cluster's route between two hosts crosses both hosts' links: each takes half the
   * latency. No backbone (a non-blocking one): a backbone constraint, even FATPIPE, joins
   * every flow of the job in one system that SimGrid's solver solves again at every
   * event, which made a 256-rank ring take minutes; without it each solve spans the few
   * links one event touches. A core per rank: the ranks of a host compute side by side */
  fprintf(f,
          "<?xml version='1.0'?>\n"
          "<!DOCTYPE platform SYSTEM \"https://simgrid.org/simgrid.dtd\">\n"
          "<platform version=\"4.1\">\n"
          "  <zone id=\"world\" routing=\"Full\">\n"
          "    <cluster id=\"gcomp\" prefix=\"node-\" suffix=\"\" radical=\"0-%d\" speed=\"1Gf\"\n"
          "             core=\"%d\"\n"
          "             bw=\"%.9gBps\" lat=\"%.9gs\" sharing_policy=\"SPLITDUPLEX\"\n"
          "             loopback_bw=\"%.9gBps\" loopback_lat=\"%.9gs\"/>\n"
          "  </zone>\n"
          "</platform>\n",
          nodes - 1, o->rpn, q->inter_Bps, q->inter_alpha_s / 2, q->intra_Bps, q->intra_alpha_s);
  if (fclose(f)) return -1;
  f = fopen(hosts, "w");
  if (!f) return -1;
  for (int n = 0; n < nodes; n++)
    for (int l = 0; l < o->rpn; l++) fprintf(f, "node-%d\n", n);
  return fclose(f) ? -1 : 0;
}

/* ---- one simulation ------------------------------------------------------------------ */
static double field(const char *line, const char *key) {
  char pat[64];
  snprintf(pat, sizeof pat, "\"%s\": ", key);
  const char *p = strstr(line, pat);
  return p ? strtod(p + strlen(pat), NULL) : NAN;
}

static int run_one(const sim_opts *o, const char *plat, const char *hosts, int ranks,
                   const char *alpha_beta, sim_row *row) {
  char cmd[4096], np[16], count[32], iters[16], compute[32];
  snprintf(np, sizeof np, "%d", ranks);
  snprintf(count, sizeof count, "%llu", (unsigned long long)(o->bytes / 4));
  snprintf(iters, sizeof iters, "%d", o->iters);
  snprintf(compute, sizeof compute, "%.9g", o->compute_ms);
  int out_pipe[2];
  if (pipe(out_pipe)) return -1;
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    close(out_pipe[0]);
    dup2(out_pipe[1], 1);
    close(out_pipe[1]);
    /* gcomp's settings reach the simulated ranks through the environment smpirun keeps */
    setenv("GCOMP_ALPHA_BETA", alpha_beta, 1);
    /* abort notices off unless asked for: each rank posts a receive from every peer for
     * them (reduce/abort.c), which SMPI's matcher scans for every message, and polls them
     * all now and then: half of a 128-rank run's CPU, and no simulated time */
    setenv("GCOMP_NOTICE", "0", 0);
    if (strcmp(o->algo, "auto")) setenv("GCOMP_ALGO", o->algo, 1);
    const char *argv[40];
    int a = 0;
    argv[a++] = o->smpirun;
    argv[a++] = "-np", argv[a++] = np;
    argv[a++] = "-platform", argv[a++] = plat;
    argv[a++] = "-hostfile", argv[a++] = hosts;
    argv[a++] = "--cfg=smpi/test:0";   /* waits block (fabric/mpi_p2p.c), tests cost nothing */
    /* MPI_Wtime injects no sleep: the transport reads no clock when simulated, and a sleep
     * of its own for each of the rank program's few readings would only add noise */
    argv[a++] = "--cfg=smpi/wtime:0";
    /* MPI's own collectives (the node-id allgather at creation, the rank program's timing
     * reductions) as Open MPI picks them: SMPI's default allgather posts n - 1 receives and
     * sends per rank and waits on them, O(n^2) a rank: most of a 256-rank run's CPU */
    argv[a++] = "--cfg=smpi/coll-selector:ompi";
    /* no detached sends: SimGrid 3.32 keeps every detached send in flight in one global list
     * that each completion searches (CommImpl::finish), O(ranks) a message; a ring then
     * cost O(n^3) of CPU. A send completes when it is delivered instead */
    argv[a++] = "--cfg=smpi/send-is-detached-thresh:0";
    argv[a++] = "--cfg=smpi/lat-factor:0:1";
    argv[a++] = "--cfg=smpi/bw-factor:0:1";
    argv[a++] = "--cfg=network/crosstraffic:0";
    argv[a++] = "--cfg=smpi/host-speed:1Gf";
    argv[a++] = o->cpu ? "--cfg=smpi/cpu-threshold:0" : "--cfg=smpi/simulate-computation:no";
    argv[a++] = "--log=root.thres:critical";
    argv[a++] = "--log=smpi_config.thres:critical";
    argv[a++] = o->rank_prog;
    argv[a++] = "--count", argv[a++] = count;
    argv[a++] = "--iters", argv[a++] = iters;
    argv[a++] = "--compute-ms", argv[a++] = compute;
    if (o->check) argv[a++] = "--check";
    if (o->shared) argv[a++] = "--shared";
    argv[a] = NULL;
    execvp(argv[0], (char *const *)argv);
    fprintf(stderr, "gcomp-sim: cannot run %s: %s\n", argv[0], strerror(errno));
    _exit(127);
  }
  close(out_pipe[1]);
  FILE *in = fdopen(out_pipe[0], "r");
  char line[2048];
  row->ok = 0;
  while (in && fgets(line, sizeof line, in)) {
    if (strncmp(line, "{\"ranks\"", 8)) continue;
    row->sim_s = field(line, "sim_s");
    row->step_s = field(line, "step_s");
    row->create_s = field(line, "create_s");
    row->first_s = field(line, "first_call_s");
    row->rss = field(line, "rss_bytes");
    const char *al = strstr(line, "\"algo\": \"");
    if (al) sscanf(al + 9, "%31[^\"]", row->algo);
    row->ok = 1;
  }
  if (in) fclose(in);
  int status = 0;
  waitpid(pid, &status, 0);
  (void)cmd;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) row->ok = 0;
  return row->ok ? 0 : -1;
}

/* ---- where the rank program lives ---------------------------------------------------- */
static const char *find_rank_program(char *buf, size_t cap) {
  char exe[2048];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) return NULL;
  exe[n] = '\0';
  char *slash = strrchr(exe, '/');
  if (!slash) return NULL;
  *slash = '\0';
  const char *tries[] = {"%s/gcomp-sim-rank", "%s/../libexec/gcomp/gcomp-sim-rank"};
  for (size_t i = 0; i < sizeof tries / sizeof *tries; i++) {
    if (snprintf(buf, cap, tries[i], exe) >= (int)cap) continue;
    if (access(buf, R_OK) == 0) return buf;
  }
  return NULL;
}

/* A step of T ms of compute and one call of `call` seconds: without overlap they add up;
 * with it (--overlap) the call hides behind the compute until it outgrows it */
static double step_efficiency(const sim_opts *o, double call) {
  double t = o->compute_ms * 1e-3;
  if (!(t > 0)) return NAN;
  return o->overlap ? t / (call > t ? call : t) : t / (t + call);
}

static void print_row(const sim_opts *o, int ranks, int nodes, const sim_row *s,
                      const gcomp_plan_result *p, int plan_ok) {
  double busbw = (double)o->bytes * 2.0 * (ranks - 1) / ranks / s->sim_s;
  double eff = step_efficiency(o, s->sim_s);
  double peff = plan_ok ? step_efficiency(o, p->time_s) : NAN;
  double mem = s->rss / ranks;
  if (o->json) {
    printf("{\"ranks\": %d, \"nodes\": %d, \"ranks_per_node\": %d, \"bytes\": %llu, "
           "\"algo\": \"%s\", \"sim_s\": %.9g, \"plan_s\": ",
           ranks, nodes, o->rpn, (unsigned long long)o->bytes, s->algo, s->sim_s);
    if (plan_ok) printf("%.9g, \"plan_algo\": \"%s\"", p->time_s, p->algo);
    else printf("null, \"plan_algo\": null");
    printf(", \"busbw_gbps\": %.6g, \"plan_busbw_gbps\": ", busbw / 1e9);
    if (plan_ok) printf("%.6g", p->busbw_Bps / 1e9);
    else printf("null");
    printf(", \"efficiency\": ");
    if (isnan(eff)) printf("null"); else printf("%.6g", eff);
    printf(", \"plan_efficiency\": ");
    if (isnan(peff)) printf("null"); else printf("%.6g", peff);
    printf(", \"step_s\": %.9g, \"create_s\": %.9g, \"first_call_s\": %.9g, "
           "\"mem_per_rank_bytes\": %.0f, \"compute_ms\": %.9g, \"overlap\": %s, "
           "\"links\": \"%s\"}\n",
           s->step_s, s->create_s, s->first_s, mem, o->compute_ms,
           o->overlap ? "true" : "false", o->links);
    return;
  }
  printf("%6d %5d %-6s %10.3f ", ranks, nodes, s->algo, s->sim_s * 1e3);
  if (plan_ok) printf("%10.3f %6.2f ", p->time_s * 1e3, s->sim_s / p->time_s);
  else printf("%10s %6s ", "-", "-");
  printf("%8.2f ", busbw / 1e9);
  if (plan_ok) printf("%8.2f ", p->busbw_Bps / 1e9);
  else printf("%8s ", "-");
  if (!isnan(eff)) printf("%6.1f%% ", eff * 100);
  else printf("%7s ", "-");
  if (!isnan(peff)) printf("%6.1f%% ", peff * 100);
  else printf("%7s ", "-");
  printf("%9.1f %9.3f %9.3f\n", mem / 1024.0, s->create_s * 1e3, s->first_s * 1e3);
}

int main(int argc, char **argv) {
  sim_opts o = {.bytes = 1 << 20, .rpn = 8, .nodes = {1, 2, 4}, .nrows = 3,
                .links = "0.5,20,10,12.5", .algo = "ring", .smpirun = "smpirun",
                .iters = 3, .reduce_gbps = 8};
  int rc = parse_args(argc, argv, &o);
  if (rc) return rc == 1 ? 0 : rc;
  gcomp_plan_query q = {.struct_size = sizeof q, .bytes = o.bytes, .ranks_per_node = o.rpn,
                        .reduce_Bps = o.cpu ? o.reduce_gbps * 1e9 : 1e15};
  if (gcomp_plan_links(&q, o.links) != GCOMP_OK) {
    fprintf(stderr, "gcomp-sim: --links: %s\n", gcomp_last_error());
    return 2;
  }
  const char *plan_algo = strcmp(o.algo, "auto") ? o.algo : NULL;
  gcomp_plan_result probe = {.struct_size = sizeof probe};
  q.nodes = 2;
  if (plan_algo && gcomp_plan_predict(&q, plan_algo, &probe) == GCOMP_ERR_INVALID) {
    fprintf(stderr, "gcomp-sim: --algo: %s\n", gcomp_last_error());
    return 2;
  }
  char rank_buf[2200];
  if (!o.rank_prog) o.rank_prog = find_rank_program(rank_buf, sizeof rank_buf);
  if (!o.rank_prog) {
    fprintf(stderr, "gcomp-sim: gcomp-sim-rank not found beside this program or in "
                    "../libexec/gcomp (built only where smpicc was found); --rank-program\n");
    return 2;
  }
  char tmp[] = "/tmp/gcomp-sim-XXXXXX";
  const char *dir = o.keep;
  if (dir) mkdir(dir, 0755);
  else if (!(dir = mkdtemp(tmp))) {
    fprintf(stderr, "gcomp-sim: cannot make a directory for the platform: %s\n", strerror(errno));
    return 1;
  }
  char alpha_beta[256];
  snprintf(alpha_beta, sizeof alpha_beta, "%.9g,%.9g,%.9g,%.9g", q.intra_alpha_s * 1e6,
           q.intra_Bps / 1e9, q.inter_alpha_s * 1e6, q.inter_Bps / 1e9);
  if (!o.json)
    printf("# gcomp-sim: %llu bytes, %d ranks/node, links %s, algo %s, compute %.3g ms%s\n"
           "%6s %5s %-6s %10s %10s %6s %8s %8s %7s %7s %9s %9s %9s\n",
           (unsigned long long)o.bytes, o.rpn, o.links, o.algo, o.compute_ms,
           o.cpu ? ", CPU time simulated" : ", network only", "ranks", "nodes", "algo", "sim_ms", "plan_ms",
           "ratio", "busbw", "plan_bw", "eff", "plan_eff", "KiB/rank", "create_ms", "first_ms");
  int failures = 0;
  for (int k = 0; k < o.nrows; k++) {
    int nodes = o.nodes[k], ranks = nodes * o.rpn;
    char plat[4200], hosts[4200];
    if (write_platform(&o, &q, nodes, dir, plat, hosts, sizeof plat) < 0) {
      fprintf(stderr, "gcomp-sim: cannot write the platform in %s: %s\n", dir, strerror(errno));
      return 1;
    }
    sim_row s = {0};
    if (ranks < 2 || run_one(&o, plat, hosts, ranks, alpha_beta, &s) < 0) {
      fprintf(stderr, "gcomp-sim: the simulation of %d ranks on %d nodes failed%s\n", ranks,
              nodes, ranks < 2 ? " (needs 2 ranks or more)" : " (its errors are above)");
      failures++;
      if (!o.keep) unlink(plat), unlink(hosts);
      continue;
    }
    gcomp_plan_result p = {.struct_size = sizeof p};
    q.nodes = nodes;
    int plan_ok = gcomp_plan_predict(&q, plan_algo, &p) == GCOMP_OK;
    print_row(&o, ranks, nodes, &s, &p, plan_ok);
    fflush(stdout);
    if (!o.keep) unlink(plat), unlink(hosts);
  }
  if (!o.keep) rmdir(dir);
  return failures ? 1 : 0;
}
