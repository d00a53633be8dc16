/* gcomp-lab's kernel suites (gcomp-lab kernels --suite NAME): each file of bench/lab/ registers
 * its own, timed against a memory reference over the same buffers. */
#ifndef GCOMP_LAB_H
#define GCOMP_LAB_H

#include "bench.h"

/* ---- kernel micro-benchmarks (gcomp-lab kernels) ----------------------------------- */
typedef enum { GCOMP_REF_MEMCPY, GCOMP_REF_READ, GCOMP_REF_ADD } gcomp_bench_ref;

typedef struct {
  size_t count;        /* fp32 elements per buffer (--size, default 64 MiB of them) */
  size_t bytes;        /* count * 4 */
  float *grad;         /* gradient-like data: N(0, 1e-3), seeded */
  float *acc;          /* a second fp32 buffer (accumulator, residual, ...) */
  uint8_t *out;        /* 2 * bytes + 4096 of scratch output */
  int reps;            /* timed repetitions; medians are reported */
  int json;            /* --json: rows as JSON objects */
  FILE *sink;          /* where rows go (stdout) */
  int rows;            /* rows printed so far */
} gcomp_kbench;

typedef void (*gcomp_kbench_fn)(gcomp_kbench *kb, void *arg);
typedef void (*gcomp_kbench_suite_fn)(gcomp_kbench *kb);
void gcomp_bench_register_suite(const char *name, gcomp_kbench_suite_fn fn);

/* Times fn reps times, each run followed by a run of the reference ref over the same
 * buffers, so both see the same machine weather. Returns median seconds of fn; *ref_s
 * gets the reference's median. */
double gcomp_kbench_measure(gcomp_kbench *kb, gcomp_kbench_fn fn, void *arg, gcomp_bench_ref ref,
                            double *ref_s);

/* Prints one result row. rate_bytes: bytes of input per call (for GB/s; fp32 input for
 * encoders). ratio: fn's rate over the reference's (>1: faster than the reference). extra
 * is an optional named figure (e.g. "kept/k"), NULL for none. */
void gcomp_kbench_row(gcomp_kbench *kb, const char *suite, const char *name, const char *kernel,
                      double rate_bytes, double seconds, gcomp_bench_ref ref, double ref_seconds,
                      double ref_rate_bytes, const char *extra_name, double extra);

const char *gcomp_bench_ref_name(gcomp_bench_ref ref);

#endif /* GCOMP_LAB_H */
