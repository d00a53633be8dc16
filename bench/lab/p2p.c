/* gcomp-lab p2p: point-to-point latency and bandwidth of the gcomp transport, against
 * libfabric's own fi_pingpong on the same provider, in the same run.
 *
 *   gcomp-lab p2p [--provider shm|tcp] [--min BYTES] [--max BYTES] [--reps N] [--json]
 *
 * Both sides measure the same way: a ping-pong of `iters` round trips; latency is half a
 * round trip, bandwidth is size / latency (fi_pingpong's usec/xfer and MB/sec). The driver
 * (this command without --worker) never initialises libfabric: for each size and repetition
 * it runs a pair of fi_pingpong processes, then a pair of gcomp ranks through gcomp-run
 * (`gcomp-lab p2p --worker`), back to back, so both see the same load on a noisy machine.
 * Each figure is the best (lowest latency) of --reps runs. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lab.h"
#include "gcomp_common.h"
#include "transport.h"
#include "test_hooks.h"

#define P2P_MAX_SIZES 32

typedef struct {
  size_t size;
  int iters;
  double ref_us, ref_mbs;   /* fi_pingpong (0: not measured) */
  double us, mbs;           /* gcomp */
} p2p_row;

static int iters_for(size_t size) {
  /* about 0.1-0.3 s per size on shm, fewer round trips for big messages */
  if (size <= 4096) return 20000;
  if (size <= 65536) return 5000;
  if (size <= (1u << 20)) return 500;
  if (size <= (8u << 20)) return 60;
  return 12;
}

static double now_s(void) { return (double)gcomp_now_ns() * 1e-9; }

/* Runs one fi_pingpong pair; returns 0 and fills us/mbs from the client's result line. */
static int pingpong_ref(const char *prov, size_t size, int iters, double *us, double *mbs) {
  for (int attempt = 0; attempt < 3; attempt++) {
    int port = 40000 + (int)((gcomp_now_ns() / 1000 + (uint64_t)getpid() * 7 + (uint64_t)attempt * 131) % 20000);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "fi_pingpong -p '%s' -e rdm -m tagged -S %zu -I %d -B %d 2>&1", prov,
             size, iters, port);
    FILE *server = popen(cmd, "r");
    if (!server) return -1;
    struct timespec ts = {0, 200000000L};
    nanosleep(&ts, NULL);
    snprintf(cmd, sizeof cmd, "fi_pingpong -p '%s' -e rdm -m tagged -S %zu -I %d -P %d 127.0.0.1 2>&1",
             prov, size, iters, port);
    FILE *client = popen(cmd, "r");
    char line[512];
    int found = 0;
    while (client && fgets(line, sizeof line, client)) {
      char c0[32], c1[32], c2[32], c3[32], c4[32];
      double mb = 0, u = 0;
      if (sscanf(line, "%31s %31s %31s %31s %31s %lf %lf", c0, c1, c2, c3, c4, &mb, &u) == 7 &&
          c0[0] >= '0' && c0[0] <= '9') {
        *mbs = mb;
        *us = u;
        found = 1;
      }
    }
    int crc = client ? pclose(client) : -1;
    int src = pclose(server);
    if (found && crc == 0) return 0;
    (void)src;
  }
  return -1;
}

/* One ping-pong series between ranks 0 and 1; returns seconds per one-way transfer. */
static int pingpong_gcomp(gcomp_transport *t, void *sbuf, void *rbuf, size_t size, int iters,
                          double *one_way_s) {
  int me = t->rank, peer = 1 - me;
  double t0 = 0;
  int warm = iters / 10 + 2;
  for (int it = -warm; it < iters; it++) {
    if (it == 0) t0 = now_s();
    uint64_t tag = gcomp_tag((uint32_t)(it + warm), 1);
    gcomp_treq *r = NULL, *s = NULL;
    if (me == 0) {
      GCOMP_CHECK(gcomp_irecv(t, peer, tag, rbuf, size, &r));
      GCOMP_CHECK(gcomp_isend(t, peer, tag, sbuf, size, &s));
      GCOMP_CHECK(gcomp_wait(t, s, NULL));
      GCOMP_CHECK(gcomp_wait(t, r, NULL));
    } else {
      GCOMP_CHECK(gcomp_irecv(t, peer, tag, rbuf, size, &r));
      GCOMP_CHECK(gcomp_wait(t, r, NULL));
      GCOMP_CHECK(gcomp_isend(t, peer, tag, sbuf, size, &s));
      GCOMP_CHECK(gcomp_wait(t, s, NULL));
    }
  }
  *one_way_s = (now_s() - t0) / (2.0 * iters);
  return GCOMP_OK;
}

static void usage(FILE *f) {
  fprintf(f, "usage: gcomp-lab p2p [--provider shm|tcp] [--min BYTES] [--max BYTES] [--reps N]\n"
             "                       [--no-ref] [--json]\n"
             "  latency and bandwidth, 8 B to 64 MiB by default, of the gcomp transport (2 ranks\n"
             "  started with gcomp-run) against fi_pingpong on the same provider (tcp means\n"
             "  tcp;ofi_rxm). For each size and repetition the two run back to back, so both see\n"
             "  the same machine weather; the best of --reps (3) is kept. Ratios: gcomp/fi_pingpong.\n");
}

static void print_rows(const char *prov, const p2p_row *rows, int n, int json) {
  if (json) {
    printf("{\"bench\": \"p2p\", \"provider\": \"%s\", \"rows\": [", prov);
    for (int i = 0; i < n; i++) {
      const p2p_row *r = &rows[i];
      printf("%s\n  {\"bytes\": %zu, \"iters\": %d, \"gcomp_us\": %.3f, \"gcomp_MBps\": %.1f, "
             "\"ref_us\": %.3f, \"ref_MBps\": %.1f, \"lat_ratio\": %.3f, \"bw_ratio\": %.3f}",
             i ? "," : "", r->size, r->iters, r->us, r->mbs, r->ref_us, r->ref_mbs,
             r->ref_us > 0 ? r->us / r->ref_us : 0.0, r->ref_mbs > 0 ? r->mbs / r->ref_mbs : 0.0);
    }
    printf("\n]}\n");
    return;
  }
  printf("p2p over %s (gcomp vs fi_pingpong -m tagged, same run; ratios gcomp/fi_pingpong)\n", prov);
  printf("%10s %8s %11s %11s %9s %11s %11s %9s\n", "bytes", "iters", "gcomp us", "fi_pp us",
         "lat x", "gcomp MB/s", "fi_pp MB/s", "bw x");
  for (int i = 0; i < n; i++) {
    const p2p_row *r = &rows[i];
    printf("%10zu %8d %11.2f %11.2f %9.2f %11.0f %11.0f %9.2f\n", r->size, r->iters, r->us,
           r->ref_us, r->ref_us > 0 ? r->us / r->ref_us : 0.0, r->mbs, r->ref_mbs,
           r->ref_mbs > 0 ? r->mbs / r->ref_mbs : 0.0);
  }
}

/* Worker (one of the 2 ranks gcomp-run started): ping-pong one size; rank 0 prints
 * "P2P <bytes> <iters> <us>". */
static int p2p_worker(size_t size, int iters) {
  gcomp_transport *t = NULL;
  int s = gcomp_transport_env_for_testing(&t);
  if (s < 0) {
    fprintf(stderr, "gcomp-lab p2p: %s: %s\n", gcomp_strerror(s), gcomp_last_error());
    return 1;
  }
  if (t->size != 2) {
    fprintf(stderr, "gcomp-lab p2p: needs exactly 2 ranks, got %d\n", t->size);
    gcomp_transport_destroy(t);
    return 2;
  }
  void *sbuf = malloc(size ? size : 1), *rbuf = malloc(size ? size : 1);
  int rc = 0;
  if (!sbuf || !rbuf) {
    fprintf(stderr, "gcomp-lab p2p: cannot allocate 2 x %zu bytes\n", size);
    rc = 1;
  } else {
    memset(sbuf, 0x5a, size);
    memset(rbuf, 0, size);
    double one_way = 0;
    s = pingpong_gcomp(t, sbuf, rbuf, size, iters, &one_way);
    if (s < 0) {
      fprintf(stderr, "gcomp-lab p2p: rank %d at %zu bytes: %s\n", t->rank, size, gcomp_last_error());
      rc = 1;
    } else if (t->rank == 0) {
      printf("P2P %zu %d %.6f\n", size, iters, one_way * 1e6);
    }
  }
  gcomp_transport_destroy(t);
  free(sbuf);
  free(rbuf);
  return rc;
}

/* Driver: never initialises libfabric itself, so it may start processes at will. */
static int run_gcomp_pair(const char *self, const char *prov_arg, size_t size, int iters,
                          double *us) {
  char dir[4096], run[4200];
  if (strlen(self) >= sizeof dir) return -1;
  snprintf(dir, sizeof dir, "%s", self);
  char *slash = strrchr(dir, '/');
  if (slash) *slash = '\0';
  /* gcomp-run of the same build tree (gcomp-lab is built in bench/, gcomp-run in tools/),
   * else one beside it, else the PATH's */
  snprintf(run, sizeof run, "%s/../tools/gcomp-run", dir);
  if (access(run, X_OK) != 0) snprintf(run, sizeof run, "%s/gcomp-run", dir);
  if (access(run, X_OK) != 0) snprintf(run, sizeof run, "gcomp-run");
  char cmd[8600];
  snprintf(cmd, sizeof cmd, "'%s' -n 2 -- '%s' p2p --worker --provider '%s' "
           "--min %zu --iters %d", run, self, prov_arg, size, iters);
  FILE *f = popen(cmd, "r");
  if (!f) return -1;
  char line[512];
  int found = 0;
  while (fgets(line, sizeof line, f)) {
    size_t sz;
    int it;
    double u;
    if (sscanf(line, "P2P %zu %d %lf", &sz, &it, &u) == 3 && sz == size) {
      *us = u;
      found = 1;
    }
  }
  int rc = pclose(f);
  return found && rc == 0 ? 0 : -1;
}

int gcomp_bench_p2p(int argc, char **argv) {
  const char *prov_arg = "shm";
  int64_t min = 8, max = 64 << 20;
  int reps = 3, json = 0, ref = 1, worker = 0, iters = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--provider") && i + 1 < argc) {
      prov_arg = argv[++i];
    } else if (!strcmp(argv[i], "--min") && i + 1 < argc) {
      if (gcomp_parse_size(argv[++i], &min) != 0) return usage(stderr), 2;
    } else if (!strcmp(argv[i], "--max") && i + 1 < argc) {
      if (gcomp_parse_size(argv[++i], &max) != 0) return usage(stderr), 2;
    } else if ((!strcmp(argv[i], "--reps") || !strcmp(argv[i], "--iters")) && i + 1 < argc) {
      double d;
      int is_reps = !strcmp(argv[i], "--reps");
      if (gcomp_bench_num("gcomp-lab p2p", argv[i], argv[i + 1], 1, 1e9, &d) < 0) return 2;
      i++;
      if (is_reps) reps = (int)d;
      else iters = (int)d;
    } else if (!strcmp(argv[i], "--json")) {
      json = 1;
    } else if (!strcmp(argv[i], "--no-ref")) {
      ref = 0;
    } else if (!strcmp(argv[i], "--worker")) {
      worker = 1;
    } else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
      usage(stdout);
      return 0;
    } else {
      fprintf(stderr, "gcomp-lab p2p: unknown option '%s'\n", argv[i]);
      usage(stderr);
      return 2;
    }
  }
  const char *prov = !strcmp(prov_arg, "tcp") ? "tcp;ofi_rxm" : prov_arg;
  const char *fi_prov = !strcmp(prov_arg, "tcp") || !strcmp(prov_arg, "tcp;ofi_rxm") ? "tcp" : prov_arg;
  if (min < 1) min = 1;
  if (worker) {
    /* the provider under test serves both ranks, whether gcomp-run put them on one node or two */
    setenv("GCOMP_INTRA_PROVIDER", prov, 1);
    setenv("GCOMP_PROVIDER", prov, 1);
    if (gcomp_reinit_for_testing() < 0) {
      fprintf(stderr, "gcomp-lab p2p: %s\n", gcomp_last_error());
      return 1;
    }
    return p2p_worker((size_t)min, iters > 0 ? iters : iters_for((size_t)min));
  }
  char self[4096];
  ssize_t sl = readlink("/proc/self/exe", self, sizeof self - 1);
  if (sl <= 0) {
    fprintf(stderr, "gcomp-lab p2p: cannot find my own executable\n");
    return 1;
  }
  self[sl] = '\0';
  p2p_row rows[P2P_MAX_SIZES];
  int n = 0;
  for (size_t sz = (size_t)min; sz <= (size_t)max && n < P2P_MAX_SIZES; sz *= 8) {
    rows[n] = (p2p_row){sz, iters_for(sz), 0, 0, 0, 0};
    n++;
  }
  if (n && rows[n - 1].size != (size_t)max && n < P2P_MAX_SIZES) {
    rows[n] = (p2p_row){(size_t)max, iters_for((size_t)max), 0, 0, 0, 0};
    n++;
  }
  int rc = 0;
  for (int i = 0; i < n; i++) {
    for (int k = 0; k < reps; k++) {
      double us = 0, mbs = 0;
      if (ref && pingpong_ref(fi_prov, rows[i].size, rows[i].iters, &us, &mbs) == 0 &&
          (rows[i].ref_us == 0 || us < rows[i].ref_us)) {
        rows[i].ref_us = us;
        rows[i].ref_mbs = mbs;
      }
      if (run_gcomp_pair(self, prov_arg, rows[i].size, rows[i].iters, &us) == 0) {
        if (rows[i].us == 0 || us < rows[i].us) {
          rows[i].us = us;
          rows[i].mbs = (double)rows[i].size / us;
        }
      }
    }
    if (ref && rows[i].ref_us == 0)
      fprintf(stderr, "gcomp-lab p2p: fi_pingpong -p %s failed at %zu bytes (libfabric-bin "
              "installed?)\n", fi_prov, rows[i].size);
    if (rows[i].us == 0) {
      fprintf(stderr, "gcomp-lab p2p: the gcomp ranks failed at %zu bytes\n", rows[i].size);
      rc = 1;
    }
  }
  print_rows(prov, rows, n, json);
  return rc;
}

GCOMP_BENCH_CONSTRUCTOR(gcomp_bench_p2p_register) {
  gcomp_bench_register("p2p", gcomp_bench_p2p,
                       "point-to-point latency/bandwidth vs fi_pingpong (run under gcomp-run -n 2)");
}
