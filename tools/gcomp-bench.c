/* gcomp-bench and gcomp-lab: measure gcomp against references taken in the same run.
 * Subcommands register themselves (tools/bench_*.c for gcomp-bench, bench/lab/ for
 * gcomp-lab); this file, their shared front end, uses the library's headers for users. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "gcomp.h"
#include "gcomp_internal.h"   /* gcomp_parse_size: the library's own size syntax */

enum { MAX_CMDS = 16 };
static struct {
  const char *name, *help;
  gcomp_bench_cmd_fn fn;
} cmds[MAX_CMDS];
static int ncmds;

int gcomp_bench_num(const char *tool, const char *opt, const char *text, double lo, double hi,
                    double *out) {
  char *end;
  double v = strtod(text, &end);
  if (end == text || *end || !(v >= lo && v <= hi)) {
    fprintf(stderr, "%s: %s '%s' is not a number in [%g, %g]\n", tool, opt, text, lo, hi);
    return -1;
  }
  *out = v;
  return 0;
}

int gcomp_bench_size(const char *text, int64_t *out) { return gcomp_parse_size(text, out); }

int gcomp_bench_env_rank(void) {
  const char *v = NULL;
  int set = 0;
  if (gcomp_config_get(NULL, "GCOMP_RANK", &v, &set) != GCOMP_OK || !set || !v) return -1;
  char *end;
  long r = strtol(v, &end, 10);
  return end != v && !*end && r >= 0 && r < (1L << 30) ? (int)r : -1;
}

void gcomp_bench_register(const char *name, gcomp_bench_cmd_fn fn, const char *help) {
  if (ncmds < MAX_CMDS) cmds[ncmds++] = (__typeof__(cmds[0])){name, help, fn};
}

static const char *prog = "gcomp-bench";

static void usage(FILE *out) {
  fprintf(out, "usage: %s COMMAND [options]   (COMMAND -h for its options)\n", prog);
  for (int i = 0; i < ncmds; i++) fprintf(out, "  %-10s %s\n", cmds[i].name, cmds[i].help);
}

int main(int argc, char **argv) {
  if (argc > 0 && argv[0]) {
    const char *slash = strrchr(argv[0], '/');
    prog = slash ? slash + 1 : argv[0];
  }
  if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  int s = gcomp_init();
  if (s != GCOMP_OK) {
    fprintf(stderr, "%s: %s: %s\n", prog, gcomp_strerror(s), gcomp_last_error());
    return 1;
  }
  for (int i = 0; i < ncmds; i++)
    if (!strcmp(argv[1], cmds[i].name)) return cmds[i].fn(argc - 1, argv + 1);
  fprintf(stderr, "%s: unknown command '%s'\n", prog, argv[1]);
  usage(stderr);
  return 2;
}
