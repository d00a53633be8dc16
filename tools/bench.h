/* gcomp-bench (tools/bench_*.c: the collectives as a user calls them, gcomp.h only) and
 * gcomp-lab (bench/lab/: the layers underneath, timed through internal headers) share this
 * front end: subcommands register themselves from their own files, so each lives beside
 * its peers without a shared table to edit. */
#ifndef GCOMP_BENCH_H
#define GCOMP_BENCH_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef int (*gcomp_bench_cmd_fn)(int argc, char **argv);

/* An option's number in [lo, hi] into *out; otherwise says so on stderr, naming the tool,
 * the option and the value, and returns -1. */
int gcomp_bench_num(const char *tool, const char *opt, const char *text, double lo, double hi,
                    double *out);
/* A size as gcomp's settings write it (4096, 64k, 1M, 2GiB) into *out: 0, or nonzero when
 * text is not one. */
int gcomp_bench_size(const char *text, int64_t *out);
/* GCOMP_RANK as the launcher set it, -1 when unset: who is speaking before a communicator
 * exists. */
int gcomp_bench_env_rank(void);
void gcomp_bench_register(const char *name, gcomp_bench_cmd_fn fn, const char *help);

#define GCOMP_BENCH_CONSTRUCTOR(fn) static void fn(void) __attribute__((constructor)); \
  static void fn(void)

#endif /* GCOMP_BENCH_H */
