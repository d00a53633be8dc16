/* gcomp-lab kernels: single-thread kernel rates over 64 MiB of gradient-like data, each
 * next to a memory reference (memcpy, a read pass, an fp32 add loop) timed in the same run. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lab.h"
#include "gcomp.h"
#include "gcomp_common.h"

enum { MAX_SUITES = 16 };
static struct {
  const char *name;
  gcomp_kbench_suite_fn fn;
} suites[MAX_SUITES];
static int nsuites;

void gcomp_bench_register_suite(const char *name, gcomp_kbench_suite_fn fn) {
  if (nsuites < MAX_SUITES) suites[nsuites].name = name, suites[nsuites++].fn = fn;
}

/* --cpu-time: the calling thread's CPU time rather than the wall clock. On a machine shared
 * with other jobs the wall clock also counts the time the thread waited for a core, which
 * lands on the kernel or on its reference at random; its own CPU time does not (stalls on
 * memory still count: the thread runs through them). */
static clockid_t bench_clock = CLOCK_MONOTONIC;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(bench_clock, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

const char *gcomp_bench_ref_name(gcomp_bench_ref ref) {
  static const char *const names[] = {"memcpy", "read", "add"};
  return names[ref];
}

/* The references. Kept out of line and observable so the compiler cannot drop them. */
static volatile float sink_f;
static __attribute__((noinline)) void ref_run(gcomp_kbench *kb, gcomp_bench_ref ref) {
  switch (ref) {
  case GCOMP_REF_MEMCPY:
    memcpy(kb->out, kb->grad, kb->bytes);
    break;
  case GCOMP_REF_READ: {
    /* a read pass: 8 independent sums so the loop is bound by loads, not by latency */
    float s[8] = {0};
    const float *g = kb->grad;
    size_t n = kb->count & ~(size_t)7;
    for (size_t i = 0; i < n; i += 8)
      for (int j = 0; j < 8; j++) s[j] += g[i + j];
    sink_f = s[0] + s[1] + s[2] + s[3] + s[4] + s[5] + s[6] + s[7];
    break;
  }
  case GCOMP_REF_ADD: {
    /* four floats an add in the baseline ISA (SSE2), bound by memory as any compiler's
     * vectorised loop is: the plain loop stayed scalar under gcc 12's -O2, 2.3x slower than
     * memory on a Zen 5, which flattered every decode-and-add compared with it */
    typedef float v4 __attribute__((vector_size(16)));
    float *acc = kb->acc;
    const float *g = kb->grad;
    size_t i = 0;
    for (; i + 4 <= kb->count; i += 4) {
      v4 a, b;
      memcpy(&a, acc + i, sizeof a);
      memcpy(&b, g + i, sizeof b);
      a += b;
      memcpy(acc + i, &a, sizeof a);
    }
    for (; i < kb->count; i++) acc[i] += g[i];
    break;
  }
  }
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

double gcomp_kbench_measure(gcomp_kbench *kb, gcomp_kbench_fn fn, void *arg, gcomp_bench_ref ref,
                            double *ref_s) {
  double t[64], r[64];
  int reps = kb->reps > 64 ? 64 : kb->reps;
  fn(kb, arg);   /* warm up: page faults, caches, branch history */
  ref_run(kb, ref);
  for (int i = 0; i < reps; i++) {
    double t0 = now_s();
    fn(kb, arg);
    double t1 = now_s();
    ref_run(kb, ref);
    double t2 = now_s();
    t[i] = t1 - t0;
    r[i] = t2 - t1;
  }
  qsort(t, (size_t)reps, sizeof *t, cmp_double);
  qsort(r, (size_t)reps, sizeof *r, cmp_double);
  if (ref_s) *ref_s = r[reps / 2];
  return t[reps / 2];
}

void gcomp_kbench_row(gcomp_kbench *kb, const char *suite, const char *name, const char *kernel,
                      double rate_bytes, double seconds, gcomp_bench_ref ref, double ref_seconds,
                      double ref_rate_bytes, const char *extra_name, double extra) {
  double gbps = rate_bytes / seconds / 1e9;
  double ref_gbps = ref_rate_bytes / ref_seconds / 1e9;
  double ratio = gbps / ref_gbps;
  if (kb->json) {
    fprintf(kb->sink,
            "%s{\"suite\": \"%s\", \"name\": \"%s\", \"kernel\": \"%s\", \"bytes\": %.0f, "
            "\"seconds\": %.6g, \"GBps\": %.4g, \"reference\": \"%s\", \"reference_GBps\": %.4g, "
            "\"ratio\": %.4g",
            kb->rows ? ",\n " : "[", suite, name, kernel, rate_bytes, seconds, gbps,
            gcomp_bench_ref_name(ref), ref_gbps, ratio);
    if (extra_name) fprintf(kb->sink, ", \"%s\": %.6g", extra_name, extra);
    fprintf(kb->sink, "}");
  } else {
    if (!kb->rows)
      fprintf(kb->sink, "%-10s %-34s %-7s %9s %9s %-7s %7s  %s\n", "suite", "case", "kernel",
              "ms", "GB/s", "ref", "ratio", "extra");
    fprintf(kb->sink, "%-10s %-34s %-7s %9.3f %9.2f %-7s %7.3f", suite, name, kernel,
            seconds * 1e3, gbps, gcomp_bench_ref_name(ref), ratio);
    if (extra_name) fprintf(kb->sink, "  %s=%.4g", extra_name, extra);
    fprintf(kb->sink, "\n");
  }
  fflush(kb->sink);
  kb->rows++;
}

/* Gradient-like data: Gaussian, sigma 1e-3, from a fixed seed (Box-Muller over xorshift). */
static void fill_gradient(float *g, size_t n, uint64_t seed) {
  uint64_t s = seed | 1;
  for (size_t i = 0; i < n; i += 2) {
    double u[2];
    for (int j = 0; j < 2; j++) {
      s ^= s << 13, s ^= s >> 7, s ^= s << 17;
      u[j] = ((double)(s >> 11) + 0.5) / 9007199254740992.0;
    }
    double r = sqrt(-2.0 * log(u[0])) * 1e-3;
    g[i] = (float)(r * cos(2 * M_PI * u[1]));
    if (i + 1 < n) g[i + 1] = (float)(r * sin(2 * M_PI * u[1]));
  }
}

static int cmd_kernels(int argc, char **argv) {
  gcomp_kbench kb = {.count = (64u << 20) / 4, .reps = 7, .sink = stdout};
  const char *only = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--json")) kb.json = 1;
    else if (!strcmp(argv[i], "--size") && i + 1 < argc) {
      int64_t v = 0;   /* 64m, 1g, 4096 ... */
      if (gcomp_parse_size(argv[++i], &v) != 0 || v < 1 || v > ((int64_t)1 << 36)) {
        fprintf(stderr, "gcomp-lab kernels: --size '%s' is not a size in [1, 64g] (e.g. 64m)\n",
                argv[i]);
        return 2;
      }
      kb.count = (size_t)((v + 4095) / 4096 * 4096) / 4;   /* whole pages: aligned_alloc */
    }
    else if (!strcmp(argv[i], "--reps") && i + 1 < argc) {
      double d;
      if (gcomp_bench_num("gcomp-lab kernels", "--reps", argv[++i], 1, 64, &d) < 0) return 2;
      kb.reps = (int)d;
    }
    else if (!strcmp(argv[i], "--suite") && i + 1 < argc) only = argv[++i];
    else if (!strcmp(argv[i], "--cpu-time")) bench_clock = CLOCK_THREAD_CPUTIME_ID;
    else {
      fprintf(stderr, "usage: gcomp-lab kernels [--size BYTES] [--reps N] [--suite NAME] [--cpu-time] [--json]\n"
                      "suites:");
      for (int s = 0; s < nsuites; s++) fprintf(stderr, " %s", suites[s].name);
      fprintf(stderr, "\n");
      return strcmp(argv[i], "-h") && strcmp(argv[i], "--help") ? 2 : 0;
    }
  }
  if (kb.count < 1024) kb.count = 1024;
  kb.bytes = kb.count * 4;
  kb.grad = aligned_alloc(4096, kb.bytes);
  kb.acc = aligned_alloc(4096, kb.bytes);
  kb.out = aligned_alloc(4096, 2 * kb.bytes + 4096);
  if (!kb.grad || !kb.acc || !kb.out) {
    fprintf(stderr, "gcomp-lab: cannot allocate %zu MiB buffers\n", kb.bytes >> 20);
    return 1;
  }
  fill_gradient(kb.grad, kb.count, 42);
  memset(kb.acc, 0, kb.bytes);
  memset(kb.out, 0, 2 * kb.bytes + 4096);
  if (!kb.json)
    printf("# gcomp %s, kernels %s, %zu MiB of fp32, %d reps (medians), 1 thread, %s\n",
           gcomp_version(), gcomp_isa_selected(), kb.bytes >> 20, kb.reps,
           bench_clock == CLOCK_MONOTONIC ? "wall clock" : "thread CPU time");
  int ran = 0;
  for (int s = 0; s < nsuites; s++) {
    if (only && strcmp(only, suites[s].name)) continue;
    suites[s].fn(&kb);
    ran++;
  }
  if (kb.json) printf("%s]\n", kb.rows ? "" : "[");
  free(kb.grad);
  free(kb.acc);
  free(kb.out);
  if (!ran) {
    fprintf(stderr, "gcomp-lab kernels: no suite named '%s'\n", only ? only : "");
    return 2;
  }
  return 0;
}

/* The references themselves, as rows, so every table shows the floor it is compared to. */
static void self_fn(gcomp_kbench *kb, void *arg) { ref_run(kb, *(gcomp_bench_ref *)arg); }
static void suite_memory(gcomp_kbench *kb) {
  for (gcomp_bench_ref ref = GCOMP_REF_MEMCPY; ref <= GCOMP_REF_ADD; ref++) {
    double rs, t = gcomp_kbench_measure(kb, self_fn, &ref, GCOMP_REF_READ, &rs);
    gcomp_kbench_row(kb, "memory", gcomp_bench_ref_name(ref), "c", (double)kb->bytes, t,
                     GCOMP_REF_READ, rs, (double)kb->bytes, NULL, 0);
  }
}

GCOMP_BENCH_CONSTRUCTOR(register_kernels) {
  gcomp_bench_register("kernels", cmd_kernels, "codec kernel rates vs memcpy/read/add (1 thread)");
  gcomp_bench_register_suite("memory", suite_memory);
}
