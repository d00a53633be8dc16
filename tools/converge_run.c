/* gcomp-converge run and compare: the harness's verdicts on the user's own training.
 *
 * run: starts the user's command (under a launcher when given) once with no codec, the
 * baseline, and once per codec with GCOMP_CODEC set; each run writes its metrics (JSON
 * lines, convergence/converge.h) to the file GCOMP_METRICS names. compare: judges logs that
 * already exist. Both read the logs into runs and judge them with the harness's own
 * gcomp_cv_judge_problem, and write its table, JSON, JUnit and SVG.
 *
 * Exit status as the harness's: 0 every codec within tolerance (and every --must-fail codec
 * flagged), 1 a codec outside it (or a must-fail one within), 2 an error: bad usage, a
 * command that failed, a metrics log that is missing or malformed or logs other steps. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "converge.h"
#include "converge_run.h"
#include "gcomp.h"

extern char **environ;

enum { MAX_RUNS = 64 };

typedef struct {
  char name[128];     /* codec spec (run), NAME (compare), or "baseline", "seed N" */
  char canon[160];    /* the library's canonical spec when name is a codec */
  char path[4096];    /* the metrics log */
  char out[4096];     /* run: the command's output */
  int must_fail;
  double seconds;     /* run: the command's wall time */
} job;

typedef struct {
  job base, runs[MAX_RUNS], twins[GCOMP_CV_MAX_TWINS];
  int nruns, ntwins;
  const char *json, *junit, *plot, *name;
  int quiet;
  int twins_given;    /* compare --twin: other baselines, their seeds unknown */
  gcomp_cv_tolset *ts;
  char command[2048];
} setup;

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

static void usage_run(FILE *f) {
  fprintf(f,
    "usage: gcomp-converge run [options] -- COMMAND [ARGS...]\n"
    "Runs COMMAND once with no codec (GCOMP_CODEC=none: the baseline) and once per codec\n"
    "with GCOMP_CODEC set, each with its own GCOMP_METRICS file, and judges each codec's\n"
    "logged curves against the baseline's with the harness's tolerances.\n"
    "COMMAND writes JSON lines to $GCOMP_METRICS from rank 0, one per evaluation:\n"
    "  {\"step\": 40, \"loss\": 0.53, \"accuracy\": 91.2, \"test_rows\": 360}\n"
    "(accuracy in percent and test_rows optional; Python: gcomp.metrics.log(step, loss=...)).\n\n"
    "  --codec SPEC        a codec that must stay within its tolerance (repeatable)\n"
    "  --must-fail SPEC    a codec that must be flagged (repeatable): proves the check bites\n"
    "  --launch 'WORDS'    the launcher before COMMAND, split at spaces (no shell quoting),\n"
    "                      e.g. 'gcomp-run -n 4 --nodes 2'\n"
    "  --noise-floor K     K (2..8) more baselines with seeds --seed+1..+K (GCOMP_SEED, which\n"
    "                      COMMAND must honour): each limit becomes the tolerance plus a 99%%\n"
    "                      bound on how far fp32 with another seed moves\n"
    "  --seed N            GCOMP_SEED of the baseline and codec runs (default 1)\n"
    "  --dir DIR           keep the logs and the command's output in DIR (default: a\n"
    "                      temporary directory, removed unless a run failed)\n"
    "  --name NAME         the problem's name in the reports (default: COMMAND's script)\n"
    "  --tol 'PATTERN k=v,...'  --tolerances FILE   as gcomp-converge's (--list-tolerances)\n"
    "  --json FILE  --junit FILE  --plot FILE.svg  --quiet\n");
}

static void usage_compare(FILE *f) {
  fprintf(f,
    "usage: gcomp-converge compare [options] BASELINE.jsonl NAME=FILE.jsonl...\n"
    "Judges metrics logs that exist (gcomp-converge run --help describes them): each\n"
    "NAME=FILE against BASELINE, NAME a codec spec (its tolerances) or any name (FILE\n"
    "is what follows the last '=').\n\n"
    "  --must-fail NAME=FILE   a run that must be flagged (repeatable)\n"
    "  --twin FILE         a baseline with another seed, for the noise floor (2..8 of them)\n"
    "  --name NAME         the problem's name in the reports (default: BASELINE's)\n"
    "  --tol 'PATTERN k=v,...'  --tolerances FILE  --json FILE  --junit FILE  --plot FILE.svg\n"
    "  --quiet\n");
}

/* The codec's canonical spec; 0 when the library does not know it. */
static int canonical(const char *spec, char *canon, size_t n) {
  gcomp_codec *c = NULL;
  int ok = gcomp_codec_create(spec, &c) == GCOMP_OK;
  if (ok) gcomp_codec_spec(c, canon, n);
  gcomp_codec_destroy(c);
  return ok;
}

static int add_job(job *jobs, int *n, int max, const char *name, const char *path, int must_fail) {
  if (*n >= max) {
    fprintf(stderr, "gcomp-converge: more than %d runs\n", max);
    return -1;
  }
  job *j = &jobs[(*n)++];
  memset(j, 0, sizeof *j);
  snprintf(j->name, sizeof j->name, "%s", name);
  if (path) snprintf(j->path, sizeof j->path, "%s", path);
  j->must_fail = must_fail;
  return 0;
}

/* ---- judging, shared by run and compare ------------------------------------------------ */
/* Reads every log, fits it to the baseline's, judges, reports. Returns the exit status. */
static int judge_logs(setup *s) {
  static gcomp_cv_problem pr;
  static gcomp_cv_run runs[MAX_RUNS], twins[GCOMP_CV_MAX_TWINS];
  static gcomp_cv_verdict verdicts[MAX_RUNS];
  static gcomp_cv_paired paired[MAX_RUNS];
  static int must_fail[MAX_RUNS];
  int errors = 0;
  memset(&pr, 0, sizeof pr);
  snprintf(pr.task, sizeof pr.task, "%s", s->name);
  pr.nruns = s->nruns, pr.runs = runs, pr.verdicts = verdicts, pr.paired = paired;
  pr.must_fail = must_fail;
  if (gcomp_cv_log_read(s->base.path, "baseline", &pr.base) < 0) {
    fprintf(stderr, "gcomp-converge: the baseline: %s\n", gcomp_last_error());
    return 2;   /* nothing to judge against: no verdicts at all */
  }
  pr.base.seconds = s->base.seconds;
  for (int i = 0; i < s->nruns; i++) {
    const job *j = &s->runs[i];
    must_fail[i] = j->must_fail;
    if (j->seconds < 0) {   /* the command failed: said when it did */
      memset(&runs[i], 0, sizeof runs[i]);
      snprintf(runs[i].spec, sizeof runs[i].spec, "%s", j->name);
      runs[i].logged = 1, runs[i].status = GCOMP_ERR_INVALID;
      snprintf(runs[i].error, sizeof runs[i].error, "the %s run failed (%s)", j->name, j->out);
      continue;
    }
    if (gcomp_cv_log_read(j->path, j->name, &runs[i]) == GCOMP_OK &&
        gcomp_cv_log_fit(&pr.base, s->base.path, &runs[i], j->path, &paired[i]) < 0) {
      runs[i].status = GCOMP_ERR_INVALID;
      snprintf(runs[i].error, sizeof runs[i].error, "%s", gcomp_last_error());
    }
    snprintf(runs[i].canon, sizeof runs[i].canon, "%s", j->canon);
    runs[i].seconds = j->seconds;
    /* a pass that checked nothing: the codec never touched this program's gradients */
    if (runs[i].status >= 0 && runs[i].curve_gap == 0 && strncmp(j->name, "none", 4) &&
        (runs[i].final_acc == pr.base.final_acc || isnan(runs[i].final_acc)))
      fprintf(stderr, "gcomp-converge: note: %s logged the baseline's curve exactly: did the "
              "codec run? (calls under GCOMP_CODEC_MIN_BYTES, 64 KiB by default, go "
              "uncompressed; on fast links the planner may not compress; the program must take "
              "its codec from GCOMP_CODEC)\n", j->name);
  }
  /* the noise floor: baselines with other seeds, fitted like runs */
  int twin_seeds[GCOMP_CV_MAX_TWINS];
  pr.floor_wanted = s->ntwins > 0;
  for (int t = 0; t < s->ntwins; t++) {
    const job *j = &s->twins[t];
    twin_seeds[t] = atoi(j->name + strcspn(j->name, "0123456789"));
    int st = gcomp_cv_log_read(j->path, j->name, &twins[t]);
    if (st == GCOMP_OK) st = gcomp_cv_log_fit(&pr.base, s->base.path, &twins[t], j->path, NULL);
    if (st == GCOMP_OK && twins[t].curve_gap == 0 &&
        twins[t].final_acc == pr.base.final_acc) {   /* NaN too: no accuracy, no difference */
      st = GCOMP_ERR_INVALID;
      fprintf(stderr, "gcomp-converge: %s: the same curve as the baseline's: the command does "
              "not take its seed from GCOMP_SEED, so it cannot measure a noise floor\n", j->path);
    } else if (st < 0) {
      fprintf(stderr, "gcomp-converge: noise floor: %s\n", gcomp_last_error());
    }
    if (st < 0) {
      for (int k = 0; k <= t; k++) gcomp_cv_run_free(&twins[k]);
      gcomp_cv_run_free(&pr.base);
      for (int i = 0; i < s->nruns; i++) gcomp_cv_run_free(&runs[i]);
      return 2;   /* without the floor asked for, the verdicts would be the unfloored ones */
    }
    twins[t].seconds = j->seconds;
  }
  if (s->ntwins > 0) {
    pr.twins = twins, pr.ntwins = s->ntwins;
    if (gcomp_cv_floor_measure(&pr.base, twins, twin_seeds, s->ntwins, &pr.floor) < 0) {
      fprintf(stderr, "gcomp-converge: no noise floor: %s\n", gcomp_last_error());
      errors++;
      for (int i = 0; i < s->nruns; i++) {
        verdicts[i].pass = -1;
        snprintf(verdicts[i].why, sizeof verdicts[i].why, "no noise floor");
      }
    }
    pr.floor.by_seed = s->twins_given ? 2 : 1;
  }
  int failures = 0;
  if (!errors) failures = gcomp_cv_judge_problem(&pr, s->ts, stderr, s->name, &errors);
  gcomp_cv_report rep = {.command = s->command, .nproblems = 1, .problems = &pr};
  if (!s->quiet) gcomp_cv_print_table(stdout, &rep);
  fflush(stdout);
  if (s->json && gcomp_cv_write_json(s->json, &rep) < 0)
    errors++, fprintf(stderr, "gcomp-converge: %s\n", gcomp_last_error());
  if (s->junit && gcomp_cv_write_junit(s->junit, &rep) < 0)
    errors++, fprintf(stderr, "gcomp-converge: %s\n", gcomp_last_error());
  if (s->plot && gcomp_cv_write_svg(s->plot, &rep) < 0)
    errors++, fprintf(stderr, "gcomp-converge: %s\n", gcomp_last_error());
  gcomp_cv_print_unexpected(stderr, &rep);
  int rc = errors ? 2 : failures ? 1 : 0;
  if (!s->quiet)
    printf("\ngcomp-converge: %s (%d codec%s; %d outside tolerance, %d error%s)\n",
           rc == 0 ? "PASS" : rc == 1 ? "FAIL" : "ERROR", s->nruns, s->nruns == 1 ? "" : "s",
           failures, errors, errors == 1 ? "" : "s");
  gcomp_cv_run_free(&pr.base);
  for (int i = 0; i < s->nruns; i++) gcomp_cv_run_free(&runs[i]);
  for (int t = 0; t < s->ntwins; t++) gcomp_cv_run_free(&twins[t]);
  return rc;
}

/* Options both subcommands take; 1 when handled, -1 on an error. */
static int common_option(setup *s, int o, const char *arg) {
  switch (o) {
  case 't':
    if (gcomp_cv_tolset_add(s->ts, arg, "--tol") < 0) break;
    return 1;
  case 'T':
    if (gcomp_cv_tolset_load(s->ts, arg) < 0) break;
    return 1;
  case 'j': s->json = arg; return 1;
  case 'u': s->junit = arg; return 1;
  case 'p': s->plot = arg; return 1;
  case 'N': s->name = arg; return 1;
  case 'q': s->quiet = 1; return 1;
  default: return 0;
  }
  fprintf(stderr, "gcomp-converge: %s\n", gcomp_last_error());
  return -1;
}

#define COMMON_OPTIONS                                                                      \
  {"tol", 1, 0, 't'}, {"tolerances", 1, 0, 'T'}, {"json", 1, 0, 'j'}, {"junit", 1, 0, 'u'}, \
      {"plot", 1, 0, 'p'}, {"name", 1, 0, 'N'}, {"quiet", 0, 0, 'q'}, {"help", 0, 0, 'h'}

/* ---- compare --------------------------------------------------------------------------- */
/* "NAME=FILE" into a job; a codec NAME gets its canonical spec (its tolerance class). */
static int named_log(setup *s, const char *arg, int must_fail) {
  const char *eq = strrchr(arg, '=');   /* codec specs hold '=' themselves: the file may not */
  if (!eq || eq == arg || !eq[1]) {
    fprintf(stderr, "gcomp-converge: '%s' is not NAME=FILE.jsonl\n", arg);
    return -1;
  }
  char name[128];
  snprintf(name, sizeof name, "%.*s", (int)(eq - arg), arg);
  if (add_job(s->runs, &s->nruns, MAX_RUNS, name, eq + 1, must_fail) < 0) return -1;
  job *j = &s->runs[s->nruns - 1];
  if (!canonical(name, j->canon, sizeof j->canon)) j->canon[0] = '\0';
  return 0;
}

static int compare_main(setup *s, int argc, char **argv) {
  static const struct option opts[] = {COMMON_OPTIONS, {"must-fail", 1, 0, 'm'},
                                       {"twin", 1, 0, 'w'}, {0, 0, 0, 0}};
  for (int o; (o = getopt_long(argc, argv, "h", opts, NULL)) != -1;) {
    int c = common_option(s, o, optarg);
    if (c < 0) return 2;
    if (c) continue;
    if (o == 'm' && named_log(s, optarg, 1) == 0) continue;
    if (o == 'm') return 2;
    if (o == 'w') {
      char name[32];
      snprintf(name, sizeof name, "twin %d", s->ntwins + 1);
      if (add_job(s->twins, &s->ntwins, GCOMP_CV_MAX_TWINS, name, optarg, 0) < 0) return 2;
      s->twins_given = 1;
      continue;
    }
    if (o == 'h') {
      usage_compare(stdout);
      return 0;
    }
    usage_compare(stderr);
    return 2;
  }
  if (optind >= argc) {
    fprintf(stderr, "gcomp-converge compare: no BASELINE.jsonl\n");
    usage_compare(stderr);
    return 2;
  }
  if (s->ntwins == 1) {
    fprintf(stderr, "gcomp-converge compare: --twin needs 2 or more baselines (3 recommended)\n");
    return 2;
  }
  add_job(&s->base, &(int){0}, 1, "baseline", argv[optind++], 0);
  for (; optind < argc; optind++)
    if (named_log(s, argv[optind], 0) < 0) return 2;
  if (!s->nruns) {
    fprintf(stderr, "gcomp-converge compare: no NAME=FILE.jsonl to judge\n");
    return 2;
  }
  if (!s->name) s->name = s->base.path;
  snprintf(s->command, sizeof s->command, "compare against %.2000s", s->base.path);
  return judge_logs(s);
}

/* ---- run ------------------------------------------------------------------------------- */
typedef struct {
  char **argv;     /* launcher words, then COMMAND */
  char dir[1024];
  int keep;        /* --dir given: the directory is the user's */
  unsigned long long seed;
} runner;

/* The last lines of a command's output, on stderr, for a run that failed. */
static void tail_output(const char *path, int lines) {
  FILE *f = fopen(path, "r");
  if (!f) return;
  static char buf[1 << 14];
  long size = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : 0;
  if (size > (long)sizeof buf - 1) fseek(f, size - (long)sizeof buf + 1, SEEK_SET);
  else rewind(f);
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  while (n && buf[n - 1] == '\n') buf[--n] = '\0';
  const char *p = buf + n;
  for (int k = 0; p > buf; p--)
    if (p[-1] == '\n' && ++k == lines) break;
  fprintf(stderr, "----- the last lines of %s -----\n%s\n-----\n", path, p);
}

/* One run of the command: GCOMP_CODEC, GCOMP_METRICS and GCOMP_SEED set for it alone, its
 * output into j->out. 0 when it exited 0; else -1 after saying how it ended. */
static int run_one(const runner *r, job *j, const char *codec, unsigned long long seed,
                   const char *stem) {
  snprintf(j->path, sizeof j->path, "%s/%s.jsonl", r->dir, stem);
  snprintf(j->out, sizeof j->out, "%s/%s.out", r->dir, stem);
  unlink(j->path);   /* a log left from before must not pass for this run's */
  char seedtxt[32];
  snprintf(seedtxt, sizeof seedtxt, "%llu", seed);
  /* the child's environment is ours with these three: set here, where only this process
   * reads them, and passed on whole */
  if (setenv("GCOMP_CODEC", codec, 1) || setenv("GCOMP_METRICS", j->path, 1) ||
      setenv("GCOMP_SEED", seedtxt, 1)) {
    fprintf(stderr, "gcomp-converge: setenv: %s\n", strerror(errno));
    return -1;
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, j->out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  pid_t pid;
  double t0 = now_s();
  int err = posix_spawnp(&pid, r->argv[0], &fa, NULL, r->argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  if (err) {
    fprintf(stderr, "gcomp-converge: the %s run: cannot start '%s': %s\n", j->name, r->argv[0],
            strerror(err));
    j->seconds = -1;
    return -1;
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
  j->seconds = now_s() - t0;
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
    if (access(j->path, F_OK) == 0) return 0;
    fprintf(stderr, "gcomp-converge: the %s run wrote no metrics to %s: COMMAND must log them "
            "to the file GCOMP_METRICS names, from rank 0 (in Python: gcomp.metrics.log)\n",
            j->name, j->path);
    snprintf(j->out, sizeof j->out, "'%s' wrote no metrics", r->argv[0]);
    j->seconds = -1;
    return -1;
  }
  char how[64];
  if (WIFEXITED(status))
    snprintf(how, sizeof how, "exited with status %d", WEXITSTATUS(status));
  else
    snprintf(how, sizeof how, "was killed by signal %d", WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  fprintf(stderr, "gcomp-converge: the %s run failed: '%s' %s (GCOMP_CODEC=%s; its output: "
          "%s)\n", j->name, r->argv[0], how, codec, j->out);
  tail_output(j->out, 12);
  snprintf(j->out, sizeof j->out, "'%s' %s", r->argv[0], how);
  j->seconds = -1;
  return -1;
}

/* Splits --launch at blanks into argv[0..); returns the count. */
static int split_words(char *text, char **argv, int max) {
  int n = 0;
  for (char *w = strtok(text, " \t"); w && n < max; w = strtok(NULL, " \t")) argv[n++] = w;
  return n;
}

/* The problem's name: COMMAND's script (the first word ending in .py or .sh), else its
 * program. */
static const char *command_name(char **cmd, int n) {
  const char *pick = cmd[0];
  for (int i = 0; i < n; i++) {
    size_t len = strlen(cmd[i]);
    if (len > 3 && (!strcmp(cmd[i] + len - 3, ".py") || !strcmp(cmd[i] + len - 3, ".sh"))) {
      pick = cmd[i];
      break;
    }
  }
  const char *slash = strrchr(pick, '/');
  return slash ? slash + 1 : pick;
}

static void remove_dir(const runner *r, const setup *s) {
  const job *all[2 + MAX_RUNS + GCOMP_CV_MAX_TWINS];
  int n = 0;
  all[n++] = &s->base;
  for (int i = 0; i < s->nruns; i++) all[n++] = &s->runs[i];
  for (int t = 0; t < s->ntwins; t++) all[n++] = &s->twins[t];
  for (int i = 0; i < n; i++) {
    char out[4200];
    unlink(all[i]->path);
    snprintf(out, sizeof out, "%.4090s", all[i]->path);
    char *dot = strrchr(out, '.');
    if (dot) strcpy(dot, ".out");
    unlink(out);
  }
  rmdir(r->dir);
}

static int run_main(setup *s, int argc, char **argv) {
  static const struct option opts[] = {COMMON_OPTIONS, {"codec", 1, 0, 'c'},
                                       {"must-fail", 1, 0, 'm'}, {"launch", 1, 0, 'l'},
                                       {"noise-floor", 1, 0, 'n'}, {"seed", 1, 0, 's'},
                                       {"dir", 1, 0, 'd'}, {0, 0, 0, 0}};
  static runner r;
  static char launch[2048];
  static char *words[256];
  int nlaunch = 0;
  r.seed = 1;
  for (int o; (o = getopt_long(argc, argv, "+h", opts, NULL)) != -1;) {
    int c = common_option(s, o, optarg);
    if (c < 0) return 2;
    if (c) continue;
    char *end = NULL;
    switch (o) {
    case 'c':
    case 'm': {
      char canon[160];
      if (!canonical(optarg, canon, sizeof canon)) {
        fprintf(stderr, "gcomp-converge: unknown or bad codec '%s': %s\n", optarg,
                gcomp_last_error());
        return 2;
      }
      if (add_job(s->runs, &s->nruns, MAX_RUNS, optarg, NULL, o == 'm') < 0) return 2;
      snprintf(s->runs[s->nruns - 1].canon, sizeof s->runs[0].canon, "%s", canon);
      break;
    }
    case 'l':
      snprintf(launch, sizeof launch, "%s", optarg);
      nlaunch = split_words(launch, words, 128);
      break;
    case 'n':
      s->ntwins = (int)strtol(optarg, &end, 10);
      if (!*optarg || *end || s->ntwins < 2 || s->ntwins > GCOMP_CV_MAX_TWINS) {
        fprintf(stderr, "gcomp-converge: --noise-floor '%s' is not 2..%d (3 recommended)\n",
                optarg, GCOMP_CV_MAX_TWINS);
        return 2;
      }
      break;
    case 's':
      errno = 0;
      r.seed = strtoull(optarg, &end, 10);
      if (errno || !*optarg || *end || optarg[0] == '-' || r.seed > 1000000000ull) {
        fprintf(stderr, "gcomp-converge: --seed '%s' is not a whole number up to 1e9\n", optarg);
        return 2;
      }
      break;
    case 'd':
      if (strlen(optarg) >= sizeof r.dir) {
        fprintf(stderr, "gcomp-converge: --dir: a path of %zu characters or fewer\n",
                sizeof r.dir - 1);
        return 2;
      }
      snprintf(r.dir, sizeof r.dir, "%s", optarg);
      r.keep = 1;
      break;
    case 'h': usage_run(stdout); return 0;
    default: usage_run(stderr); return 2;
    }
  }
  if (optind >= argc) {
    fprintf(stderr, "gcomp-converge run: no COMMAND (gcomp-converge run [options] -- COMMAND)\n");
    usage_run(stderr);
    return 2;
  }
  if (!s->nruns) {
    fprintf(stderr, "gcomp-converge run: no --codec or --must-fail to judge\n");
    return 2;
  }
  int ncmd = argc - optind;
  if (nlaunch + ncmd > 254) {
    fprintf(stderr, "gcomp-converge run: command too long\n");
    return 2;
  }
  for (int i = 0; i < ncmd; i++) words[nlaunch + i] = argv[optind + i];
  words[nlaunch + ncmd] = NULL;
  r.argv = words;
  size_t len = 0;
  for (int i = 0; i < nlaunch + ncmd && len < sizeof s->command - 1; i++)
    len += (size_t)snprintf(s->command + len, sizeof s->command - len, "%s%s", i ? " " : "",
                            words[i]);
  if (!s->name) s->name = command_name(argv + optind, ncmd);
  if (r.keep) {
    if (mkdir(r.dir, 0755) < 0 && errno != EEXIST) {
      fprintf(stderr, "gcomp-converge: --dir %s: %s\n", r.dir, strerror(errno));
      return 2;
    }
  } else {
    snprintf(r.dir, sizeof r.dir, "%s/gcomp-converge.XXXXXX", P_tmpdir);
    if (!mkdtemp(r.dir)) {
      fprintf(stderr, "gcomp-converge: a directory for the logs: %s\n", strerror(errno));
      return 2;
    }
  }

  double t0 = now_s(), children = 0;
  int failed = 0;
  snprintf(s->base.name, sizeof s->base.name, "baseline");
  if (!s->quiet) fprintf(stderr, "gcomp-converge: baseline (GCOMP_CODEC=none): %s\n", s->command);
  if (run_one(&r, &s->base, "none", r.seed, "baseline") < 0) {
    fprintf(stderr, "gcomp-converge: no baseline, no verdicts (the logs stay in %s)\n", r.dir);
    return 2;
  }
  children += s->base.seconds;
  for (int t = 0; t < s->ntwins; t++) {
    job *j = &s->twins[t];
    char stem[32];
    snprintf(j->name, sizeof j->name, "seed %llu", r.seed + 1 + (unsigned long long)t);
    snprintf(stem, sizeof stem, "seed-%llu", r.seed + 1 + (unsigned long long)t);
    if (!s->quiet) fprintf(stderr, "gcomp-converge: noise floor, %s\n", j->name);
    if (run_one(&r, j, "none", r.seed + 1 + (unsigned long long)t, stem) < 0) {
      fprintf(stderr, "gcomp-converge: no noise floor, no verdicts (the logs stay in %s)\n", r.dir);
      return 2;
    }
    children += j->seconds;
  }
  for (int i = 0; i < s->nruns; i++) {
    job *j = &s->runs[i];
    char stem[32];
    snprintf(stem, sizeof stem, "codec-%d", i + 1);
    if (!s->quiet) fprintf(stderr, "gcomp-converge: GCOMP_CODEC=%s\n", j->name);
    if (run_one(&r, j, j->name, r.seed, stem) < 0) failed++;
    else children += j->seconds;
  }
  int rc = judge_logs(s);
  double total = now_s() - t0;
  if (!s->quiet)
    printf("gcomp-converge: %d runs of the command took %.2f s; judging and reports %.3f s\n",
           1 + s->ntwins + s->nruns - failed, children, total - children);
  if (rc == 2 || failed || r.keep) {
    if (!r.keep) fprintf(stderr, "gcomp-converge: the logs stay in %s\n", r.dir);
  } else {
    remove_dir(&r, s);
  }
  return rc;
}

int gcomp_converge_subcommand(int argc, char **argv) {
  static setup s;
  memset(&s, 0, sizeof s);
  if (gcomp_cv_tolset_create(&s.ts) < 0) return 2;
  int rc = !strcmp(argv[0], "run") ? run_main(&s, argc, argv) : compare_main(&s, argc, argv);
  gcomp_cv_tolset_destroy(s.ts);
  return rc;
}
