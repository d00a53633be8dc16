/* gcomp-converge: does a codec still train like fp32?
 *
 * Trains small real models data-parallel (W workers, one loopback rank each, every
 * gradient through gcomp_allreduce), once uncompressed and once per codec, with the same
 * seeds; compares loss, accuracy, drift and gradient error with the baseline; exits non-zero
 * when a codec exceeds its tolerance. See README.md, "Convergence harness". The run and
 * compare subcommands judge the user's own training the same way (converge_run.c).
 *
 * Exit status: 0 every codec within tolerance (and every --must-fail codec flagged),
 * 1 a codec exceeded its tolerance (or a --must-fail codec was not flagged), 2 an error
 * (bad usage or data, unknown codec, the library refused a codec). */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "converge.h"
#include "converge_run.h"
#include "gcomp.h"

static const char *const shipped[] = {"none",
                                      "fp16",
                                      "bf16",
                                      "fp16:round=stochastic",
                                      "topk:ratio=0.01+ef",
                                      "topk:ratio=0.001+ef",
                                      "quant:bits=8,bucket=128",
                                      "quant:bits=4,bucket=128",
                                      "quant:bits=2,bucket=128+ef",
                                      "sign+ef"};

static void usage(FILE *f) {
  fprintf(f,
    "usage: gcomp-converge [options]\n"
    "       gcomp-converge run [options] -- COMMAND...   (your training: run --help)\n"
    "       gcomp-converge compare BASELINE.jsonl NAME=FILE.jsonl...   (compare --help)\n"
    "Trains small models data-parallel through gcomp_allreduce, once in fp32 (the baseline)\n"
    "and once per codec, and checks each codec against its tolerances.\n\n"
    "codecs\n"
    "  --codec SPEC          a codec to check (repeatable; default: every shipped codec the\n"
    "                        library knows: none fp16 bf16 fp16:round=stochastic\n"
    "                        topk:ratio=0.01+ef topk:ratio=0.001+ef quant:bits=8,bucket=128\n"
    "                        quant:bits=4,bucket=128 quant:bits=2,bucket=128+ef sign+ef)\n"
    "  --must-fail SPEC      a codec that must be flagged (repeatable): proves the check bites\n"
    "  --algo NAME           allreduce algorithm for codec runs (default auto: the codec's\n"
    "                        compressed one, sparse for top-k, direct otherwise; planner:\n"
    "                        the cost model decides; or any name gcomp-info lists)\n"
    "  --min-bytes N         GCOMP_CODEC_MIN_BYTES for the run (default 0: compress everything)\n"
    "  --deployed-min-bytes N|off\n"
    "                        the GCOMP_CODEC_MIN_BYTES of the job the report speaks for\n"
    "                        (default: as this environment sets it, else the library's 64 KiB):\n"
    "                        calls under it go uncompressed there, and the table's deployed\n"
    "                        column says what that job gets beside each codec's own verdict\n"
    "  --alpha-beta A,B,C,D  link figures the planner uses (default 2,0.1,20,0.05)\n"
    "  --guard SPEC          GCOMP_GUARD for every run (e.g. on, every=100,budget=0.5): the\n"
    "                        report says per codec how many checks went over budget\n"
    "problems\n"
    "  --task LIST           digits, gmm, teacher (comma-separated, repeatable;\n"
    "                        default digits,gmm,teacher; digits is skipped if not found)\n"
    "  --data FILE           a CSV (or .csv.gz) task: label last, optional header (repeatable)\n"
    "  --digits FILE         where the digits CSV is (default: source tree, then install)\n"
    "  --model LIST          softmax, mlp (default softmax,mlp): every task runs every model\n"
    "  --problem TASK/MODEL  one task with one model (repeatable), e.g. digits/mlp; replaces\n"
    "                        the --task x --model cross product\n"
    "  --hidden N            MLP hidden units (default 64)\n"
    "  --classes N           labels must be integers in [0, N) (default 256)\n"
    "  --test-frac F         held-out fraction (default 0.2); --split-seed N (default 12345)\n"
    "  --max-rows N          CSV tasks (digits, --data): keep N rows of the file, a seeded\n"
    "                        subset, before the split (a small data set; synthetic: --synth-n)\n"
    "  --synth-dim N --synth-cond C --synth-n N   synthetic task shape (32, 30, 8000 train rows\n                        + a quarter of that for test)\n"
    "training\n"
    "  --workers W (8) --steps N (600) --batch B (16 per worker) --lr X (0.05)\n"
    "  --momentum X (0.9) --weight-decay X (0) --seed N (1) --eval-every N (steps/50)\n"
    "  --seeds N             train every run with seeds --seed .. --seed+N-1 and judge the\n"
    "                        means over them, paired by seed (default 1)\n"
    "  --lr-schedule constant|cosine|step\n"
    "                        constant (default); cosine: to zero at the last step; step: /10\n"
    "                        at half the steps, /100 at three quarters\n"
    "  --momentum-correction on|masked|off\n"
    "                        on (default): a top-k codec with +ef runs as\n"
    "                        +ef:momentum=<--momentum>,mask=0 (DGC's momentum correction:\n"
    "                        momentum accumulated before sparsifying, optimizer without it);\n"
    "                        masked: +ef:momentum=<--momentum>,mask=1 (and DGC's momentum\n"
    "                        factor masking); off: as given, optimizer momentum after the\n"
    "                        allreduce. A spec naming ef momentum itself runs as given\n"
    "  --op avg|sum          how the gradients are combined (default avg)\n"
    "  --per-layer           one allreduce per parameter tensor, each its own EF key\n"
    "                        (default: one call over the flat gradient, like one bucket)\n"
    "  --real                one worker per process, started by a launcher:\n"
    "                        gcomp-run -n 8 -- gcomp-converge --real ...  (or mpirun); the\n"
    "                        workers are the job's ranks, rank 0 reports\n"
    "  --ci                  the CI-sized check: digits/softmax, digits/mlp, gmm/softmax, and\n"
    "                        (unless --must-fail is given) test_biased, topk:ratio=0.001 and\n"
    "                        quant:bits=1 (nearest at 1 bit, no EF) as codecs that must be\n"
    "                        flagged\n"
    "tolerances (defaults in README.md; later rules win)\n"
    "  --noise-floor N       for long runs, where trajectories part from rounding alone:\n"
    "                        train the baseline N (2..8; 3 recommended) more times with\n"
    "                        the workers placed on the ranks in shuffled orders: the same\n"
    "                        fp32 gradients added in other orders (each twin checked to\n"
    "                        differ bitwise). Each limit becomes the tolerance + a bound one\n"
    "                        more such run stays under with 99%% probability (Student's t;\n"
    "                        README). Needs 3 or more workers. Default 0: no floor\n"
    "  --tol 'PATTERN k=v,...'  keys acc (points), loss, gap (fractions), drift; 'inf' disables\n"
    "  --tolerances FILE     one such rule per line, # comments\n"
    "  --list-tolerances     print the tolerance each codec gets, then exit\n"
    "reports\n"
    "  --json FILE  --junit FILE  --plot FILE.svg  --progress / --no-progress  --quiet\n");
}

typedef struct {
  char **v;
  int n;
} strlist;

/* Exit status 2, as every error that stops the tool before a verdict */
static int out_of_memory(const char *what) {
  fprintf(stderr, "gcomp-converge: out of memory (%s)\n", what);
  return 2;
}

static void push(strlist *l, const char *s) {
  char **nv = realloc(l->v, (size_t)(l->n + 1) * sizeof *nv);
  if (!nv || !(nv[l->n] = strdup(s))) exit(out_of_memory("option lists"));
  l->v = nv;
  l->n++;
}

static void push_csv(strlist *l, const char *s) {
  char *d = strdup(s);
  if (!d) exit(out_of_memory("option lists"));
  for (char *tok = strtok(d, ","); tok; tok = strtok(NULL, ",")) push(l, tok);
  free(d);
}

static double num(const char *opt, const char *v, double lo, double hi) {
  errno = 0;
  char *end = NULL;
  double x = strtod(v, &end);
  if (errno || end == v || *end || !(x >= lo && x <= hi)) {
    fprintf(stderr, "gcomp-converge: %s '%s' is not a number in [%g, %g]\n", opt, v, lo, hi);
    exit(2);
  }
  return x;
}

/* A whole number in [lo, hi], all of v ("2.9", "4x" and "1e3" are errors: a double would
 * truncate them, and round seeds above 2^53). */
static unsigned long long whole(const char *opt, const char *v, unsigned long long lo,
                                unsigned long long hi) {
  errno = 0;
  char *end = NULL;
  unsigned long long x = strtoull(v, &end, 10);
  if (errno || end == v || *end || v[0] == '-' || x < lo || x > hi) {
    fprintf(stderr, "gcomp-converge: %s '%s' is not a whole number in [%llu, %llu]\n", opt, v,
            lo, hi);
    exit(2);
  }
  return x;
}

static int file_exists(const char *p) { return p && access(p, R_OK) == 0; }

/* A problem that cannot be judged (no baseline, no noise floor) gets no verdicts: each an
 * ERROR saying why. */
static void no_verdicts(gcomp_cv_problem *pr, const char *why) {
  for (int i = 0; i < pr->nruns; i++) {
    memset(&pr->verdicts[i], 0, sizeof pr->verdicts[i]);
    pr->verdicts[i].pass = -1;
    snprintf(pr->verdicts[i].why, sizeof pr->verdicts[i].why, "%s", why);
  }
}

/* ... and when its codecs were not even run, each run says so too. */
static void not_run(gcomp_cv_problem *pr, const strlist *codecs, const strlist *mustfail,
                    int status, const char *why) {
  for (int i = 0; i < pr->nruns; i++) {
    gcomp_cv_run *r = &pr->runs[i];
    r->status = status;
    snprintf(r->spec, sizeof r->spec, "%s",
             i < codecs->n ? codecs->v[i] : mustfail->v[i - codecs->n]);
    snprintf(r->error, sizeof r->error, "not run: %s", why);
    pr->must_fail[i] = i >= codecs->n;
  }
  no_verdicts(pr, why);
}

/* GCOMP_CODEC_MIN_BYTES of the checked runs (--min-bytes) and of a deployed job, for
 * switching between them; the link figures go with them (gcomp_cv_setup_env). */
typedef struct {
  long long raw, deployed;
  const char *alpha_beta;
} min_bytes_env;

/* A byte count as the library reads one (k, m, g: binary multiples, optional "iB" or "B");
 * -1 when it is not one. */
static long long parse_bytes(const char *v) {
  errno = 0;
  char *end = NULL;
  long long x = strtoll(v, &end, 10);
  if (errno || end == v || x < 0 || v[0] == '-') return -1;
  int shift = *end == 'k' || *end == 'K' ? 10 : *end == 'm' || *end == 'M' ? 20
              : *end == 'g' || *end == 'G' ? 30 : 0;
  if (shift) end++;
  if (shift && (*end == 'i' || *end == 'I')) end++;
  if (shift && (*end == 'b' || *end == 'B')) end++;
  if (*end || x > (1ll << 50) >> shift) return -1;
  return x << shift;
}

/* What a job started from this environment would use: GCOMP_CODEC_MIN_BYTES as it is set
 * here (read before the harness sets its own), else the library's default. */
static long long deployed_min_bytes(void) {
  for (int i = 0; i < gcomp_param_count(); i++) {
    gcomp_param_info pi;
    if (gcomp_param_describe(i, &pi) == GCOMP_OK && !strcmp(pi.name, "GCOMP_CODEC_MIN_BYTES"))
      return parse_bytes(pi.value);
  }
  return -1;
}

/* Codec i of seed k against that seed's baseline `base` (base_st < 0: that baseline failed,
 * and so does this seed of the codec), paired with it and folded into the problem's run i
 * (seed 0 becomes it). Then the same for the deployed job when it was planned to train.
 * Returns the number of errors. */
static int codec_seed(const gcomp_cv_train_cfg *cfg, const gcomp_cv_data *d, gcomp_cv_problem *pr,
                      int i, const char *spec, const gcomp_cv_run *base, int base_st, int k,
                      const min_bytes_env *env, const char *label) {
  int errors = 0, deployed = pr->deployed && pr->deployed[i].trained;
  for (int pass = 0; pass <= deployed; pass++) {
    gcomp_cv_run *acc = pass ? &pr->deployed[i].run : &pr->runs[i], tmp;
    gcomp_cv_paired *pairs = pass ? &pr->deployed[i].paired : &pr->paired[i];
    gcomp_cv_run *x = k ? &tmp : acc;
    if (pass && gcomp_cv_setup_env(env->deployed, env->alpha_beta) < 0) {
      fprintf(stderr, "gcomp-converge: %s: %s\n", label, gcomp_last_error());
      return errors + 1;
    }
    if (base_st >= 0) {
      gcomp_cv_train(cfg, d, pr->model, spec, base, x);
      /* --real: only rank 0 holds the metrics, and judges */
      if (x->status >= 0 && x->rank == 0 && gcomp_cv_pair(pr->model, d, base, x, pairs) < 0) {
        fprintf(stderr, "gcomp-converge: %s: %s\n", label, gcomp_last_error());
        errors++;
      }
    } else {
      tmp = *base, tmp.status = base_st;   /* shallow: the merge reads only status and error */
    }
    if (pass && gcomp_cv_setup_env(env->raw, env->alpha_beta) < 0) {
      fprintf(stderr, "gcomp-converge: %s: %s\n", label, gcomp_last_error());
      errors++;
    }
    if (k && gcomp_cv_run_merge(acc, &tmp, k) < 0) {
      fprintf(stderr, "gcomp-converge: %s: %s\n", label, gcomp_last_error());
      errors++;
    }
    if (k && base_st >= 0) gcomp_cv_run_free(&tmp);
  }
  return errors;
}

int main(int argc, char **argv) {
  /* the user's own training: gcomp-converge run|compare (converge_run.c) */
  if (argc > 1 && (!strcmp(argv[1], "run") || !strcmp(argv[1], "compare")))
    return gcomp_converge_subcommand(argc - 1, argv + 1);
  gcomp_cv_train_cfg cfg;
  gcomp_cv_train_defaults(&cfg);
  /* static: what main holds stays reachable when a usage error returns early, as it does
   * until exit anyway (the normal path frees it; LeakSanitizer runs the CLI test too) */
  static strlist codecs, mustfail, tasks, datas, models, tols, tolfiles, pairs;
  const char *json = NULL, *junit = NULL, *plot = NULL, *digits = NULL, *alpha_beta = NULL;
  const char *guard = NULL;
  const char *algo = "auto";
  long long min_bytes = 0, dep_min_bytes = -2;   /* -2: as this environment sets it */
  int max_rows = 0;
  int hidden = 64, classes = 256, synth_dim = 32, synth_n = 8000, quiet = 0, list_tol = 0;
  int progress = isatty(2), ci = 0;
  double test_frac = 0.2, synth_cond = 30;
  uint64_t split_seed = 12345;
  int nseeds = 1, noise_floor = 0;
  enum { O_CODEC = 256, O_MUSTFAIL, O_ALGO, O_MINB, O_AB, O_TASK, O_DATA, O_DIGITS, O_MODEL,
         O_HIDDEN, O_CLASSES, O_TFRAC, O_SSEED, O_SDIM, O_SCOND, O_SN, O_WORKERS, O_STEPS,
         O_BATCH, O_LR, O_MOM, O_WD, O_SEED, O_EVAL, O_OP, O_CI, O_TOL, O_TOLF, O_LTOL, O_JSON,
         O_JUNIT, O_PLOT, O_PROG, O_NOPROG, O_QUIET, O_HELP, O_PROBLEM, O_REAL, O_PERLAYER, O_MCORR,
         O_LRS, O_SEEDS, O_FLOOR, O_DEPMINB, O_MAXROWS, O_GUARD };
  static const struct option opts[] = {
      {"codec", 1, 0, O_CODEC},       {"must-fail", 1, 0, O_MUSTFAIL}, {"algo", 1, 0, O_ALGO},
      {"min-bytes", 1, 0, O_MINB},    {"alpha-beta", 1, 0, O_AB},     {"task", 1, 0, O_TASK},
      {"data", 1, 0, O_DATA},         {"digits", 1, 0, O_DIGITS},     {"model", 1, 0, O_MODEL},
      {"hidden", 1, 0, O_HIDDEN},     {"classes", 1, 0, O_CLASSES},   {"test-frac", 1, 0, O_TFRAC},
      {"split-seed", 1, 0, O_SSEED},  {"synth-dim", 1, 0, O_SDIM},    {"synth-cond", 1, 0, O_SCOND},
      {"synth-n", 1, 0, O_SN},        {"workers", 1, 0, O_WORKERS},   {"steps", 1, 0, O_STEPS},
      {"batch", 1, 0, O_BATCH},       {"lr", 1, 0, O_LR},             {"momentum", 1, 0, O_MOM},
      {"weight-decay", 1, 0, O_WD},   {"seed", 1, 0, O_SEED},         {"eval-every", 1, 0, O_EVAL},
      {"op", 1, 0, O_OP},             {"ci", 0, 0, O_CI},             {"tol", 1, 0, O_TOL},
      {"tolerances", 1, 0, O_TOLF},   {"list-tolerances", 0, 0, O_LTOL}, {"json", 1, 0, O_JSON},
      {"junit", 1, 0, O_JUNIT},       {"plot", 1, 0, O_PLOT},         {"progress", 0, 0, O_PROG},
      {"no-progress", 0, 0, O_NOPROG}, {"quiet", 0, 0, O_QUIET},      {"help", 0, 0, O_HELP},
      {"problem", 1, 0, O_PROBLEM},   {"real", 0, 0, O_REAL},
      {"per-layer", 0, 0, O_PERLAYER}, {"momentum-correction", 1, 0, O_MCORR},
      {"lr-schedule", 1, 0, O_LRS},   {"seeds", 1, 0, O_SEEDS},
      {"noise-floor", 1, 0, O_FLOOR}, {"deployed-min-bytes", 1, 0, O_DEPMINB},
      {"max-rows", 1, 0, O_MAXROWS},  {"guard", 1, 0, O_GUARD},
      {0, 0, 0, 0}};
  int eval_set = 0;
  for (int o; (o = getopt_long(argc, argv, "h", opts, NULL)) != -1;) {
    switch (o) {
    case O_CODEC: push(&codecs, optarg); break;
    case O_MUSTFAIL: push(&mustfail, optarg); break;
    case O_ALGO: algo = optarg; break;
    case O_MINB: min_bytes = (long long)whole("--min-bytes", optarg, 0, 1ull << 50); break;
    case O_AB: alpha_beta = optarg; break;
    case O_GUARD: guard = optarg; break;
    case O_DEPMINB:
      if (!strcmp(optarg, "off")) {
        dep_min_bytes = -1;
      } else if ((dep_min_bytes = parse_bytes(optarg)) < 0) {
        fprintf(stderr, "gcomp-converge: --deployed-min-bytes '%s' is not a byte count (e.g. "
                "65536, 64k) or 'off'\n", optarg);
        return 2;
      }
      break;
    case O_MAXROWS: max_rows = (int)whole("--max-rows", optarg, 2, 100000000ull); break;
    case O_TASK: push_csv(&tasks, optarg); break;
    case O_DATA: push(&datas, optarg); break;
    case O_DIGITS: digits = optarg; break;
    case O_MODEL: push_csv(&models, optarg); break;
    case O_PROBLEM: {
      const char *slash = strchr(optarg, '/');
      if (!slash || slash == optarg || !slash[1]) {
        fprintf(stderr, "gcomp-converge: --problem '%s' is not TASK/MODEL (e.g. digits/mlp)\n", optarg);
        return 2;
      }
      push(&pairs, optarg);
      break;
    }
    case O_HIDDEN: hidden = (int)whole("--hidden", optarg, 1, 4096); break;
    case O_CLASSES: classes = (int)whole("--classes", optarg, 2, 65536); break;
    case O_TFRAC: test_frac = num("--test-frac", optarg, 0.001, 0.999); break;
    case O_SSEED: split_seed = whole("--split-seed", optarg, 0, UINT64_MAX); break;
    case O_SDIM: synth_dim = (int)whole("--synth-dim", optarg, 1, 256); break;
    case O_SCOND: synth_cond = num("--synth-cond", optarg, 1, 1e6); break;
    case O_SN: synth_n = (int)whole("--synth-n", optarg, 16, 10000000ull); break;
    case O_WORKERS: cfg.workers = (int)whole("--workers", optarg, 1, 1024); break;
    case O_STEPS: cfg.steps = (int)whole("--steps", optarg, 1, 100000000ull); break;
    case O_BATCH: cfg.batch = (int)whole("--batch", optarg, 1, 1000000ull); break;
    case O_LR: cfg.lr = num("--lr", optarg, 0, 1e3); break;
    case O_LRS:
      if (!strcmp(optarg, "constant")) cfg.lr_schedule = GCOMP_CV_LR_CONSTANT;
      else if (!strcmp(optarg, "cosine")) cfg.lr_schedule = GCOMP_CV_LR_COSINE;
      else if (!strcmp(optarg, "step")) cfg.lr_schedule = GCOMP_CV_LR_STEP;
      else {
        fprintf(stderr, "gcomp-converge: --lr-schedule '%s' is not constant, cosine or step\n",
                optarg);
        return 2;
      }
      break;
    case O_MOM: cfg.momentum = num("--momentum", optarg, 0, 0.9999); break;
    case O_WD: cfg.weight_decay = num("--weight-decay", optarg, 0, 1); break;
    case O_SEED: cfg.seed = whole("--seed", optarg, 0, UINT64_MAX - 1000); break;
    case O_SEEDS: nseeds = (int)whole("--seeds", optarg, 1, 1000); break;
    case O_FLOOR:
      noise_floor = (int)whole("--noise-floor", optarg, 0, GCOMP_CV_MAX_TWINS);
      if (noise_floor == 1) {   /* t(1) = 64: one twin says nothing about a spread */
        fprintf(stderr,
                "gcomp-converge: --noise-floor needs 2 or more twins (3 recommended), or 0\n");
        return 2;
      }
      break;
    case O_EVAL:
      cfg.eval_every = (int)whole("--eval-every", optarg, 1, 100000000ull);
      eval_set = 1;
      break;
    case O_OP:
      if (strcmp(optarg, "avg") && strcmp(optarg, "sum")) {
        fprintf(stderr, "gcomp-converge: --op '%s' is not avg or sum\n", optarg);
        return 2;
      }
      cfg.op = strcmp(optarg, "sum") == 0 ? GCOMP_SUM : GCOMP_AVG;
      break;
    case O_CI: ci = 1; break;
    case O_REAL: cfg.real = 1; break;
    case O_PERLAYER: cfg.per_layer = 1; break;
    case O_MCORR:
      if (strcmp(optarg, "on") && strcmp(optarg, "masked") && strcmp(optarg, "off")) {
        fprintf(stderr, "gcomp-converge: --momentum-correction '%s' is not on, masked or off\n",
                optarg);
        return 2;
      }
      cfg.momentum_correction = !strcmp(optarg, "on")       ? GCOMP_CV_MC_ON
                                : !strcmp(optarg, "masked") ? GCOMP_CV_MC_MASKED
                                                            : GCOMP_CV_MC_OFF;
      break;
    case O_TOL: push(&tols, optarg); break;
    case O_TOLF: push(&tolfiles, optarg); break;
    case O_LTOL: list_tol = 1; break;
    case O_JSON: json = optarg; break;
    case O_JUNIT: junit = optarg; break;
    case O_PLOT: plot = optarg; break;
    case O_PROG: progress = 1; break;
    case O_NOPROG: progress = 0; break;
    case O_QUIET: quiet = 1; break;
    case 'h': case O_HELP: usage(stdout); return 0;
    default: usage(stderr); return 2;
    }
  }
  if (optind < argc) {
    fprintf(stderr, "gcomp-converge: unexpected argument '%s'\n", argv[optind]);
    usage(stderr);
    return 2;
  }
  if (ci) {   /* the CI-sized check: small enough for two cores in well under two minutes */
    if (!tasks.n && !datas.n && !pairs.n) {
      push(&pairs, "digits/softmax");
      push(&pairs, "digits/mlp");
      push(&pairs, "gmm/softmax");
    }
  }
  if (!eval_set) cfg.eval_every = cfg.steps >= 50 ? cfg.steps / 50 : 1;
  cfg.progress = progress && !quiet;
  cfg.algo = algo;
  cfg.nseeds = nseeds;

  if (noise_floor == 2 && !quiet)
    fprintf(stderr, "gcomp-converge: note: with 2 twins the curve-gap and drift floors sit 39 "
            "standard deviations of 2 samples above their mean (t99(1) = 31.8): 3 or more "
            "twins make those two checks bite\n");
  if (noise_floor && !cfg.real && cfg.workers < 3) {   /* a + b is b + a: no other order */
    fprintf(stderr, "gcomp-converge: --noise-floor needs 3 or more workers (%d add in one order)\n",
            cfg.workers);
    return 2;
  }
  if (dep_min_bytes == -2) {   /* before the harness sets its own */
    if ((dep_min_bytes = deployed_min_bytes()) < 0) {
      fprintf(stderr, "gcomp-converge: %s\n", gcomp_last_error());
      return 2;
    }
  }
  if (dep_min_bytes == min_bytes) dep_min_bytes = -1;   /* the checked runs are the job's */
  const min_bytes_env menv = {min_bytes, dep_min_bytes, alpha_beta};
  int st = gcomp_cv_setup_env(min_bytes, alpha_beta);
  if (st == GCOMP_OK && guard) st = gcomp_cv_setup_guard(guard);
  if (st < 0) {
    fprintf(stderr, "gcomp-converge: %s\n", gcomp_last_error());
    return 2;
  }

  static gcomp_cv_tolset *ts;
  if (gcomp_cv_tolset_create(&ts) < 0) return 2;
  for (int i = 0; i < tolfiles.n; i++)
    if (gcomp_cv_tolset_load(ts, tolfiles.v[i]) < 0) {
      fprintf(stderr, "gcomp-converge: %s\n", gcomp_last_error());
      return 2;
    }
  for (int i = 0; i < tols.n; i++)
    if (gcomp_cv_tolset_add(ts, tols.v[i], "--tol") < 0) {
      fprintf(stderr, "gcomp-converge: %s\n", gcomp_last_error());
      return 2;
    }

  /* codecs: those given (an unknown one is an error), else the shipped ones this build has */
  if (!codecs.n && !mustfail.n) {
    for (size_t i = 0; i < sizeof shipped / sizeof *shipped; i++) {
      gcomp_codec *c = NULL;
      if (gcomp_codec_create(shipped[i], &c) == GCOMP_OK)
        push(&codecs, shipped[i]);
      else
        fprintf(stderr, "gcomp-converge: note: '%s' is not in this build (%s); skipped\n",
                shipped[i], gcomp_last_error());
      gcomp_codec_destroy(c);
    }
  }
  if (ci && !mustfail.n) {   /* the check must show it can fail, too */
    static const char *const bad[] = {"test_biased", "topk:ratio=0.001", "quant:bits=1"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
      gcomp_codec *c = NULL;
      if (gcomp_codec_create(bad[i], &c) == GCOMP_OK) push(&mustfail, bad[i]);
      gcomp_codec_destroy(c);
    }
  }
  int nrun = codecs.n + mustfail.n;
  for (int i = 0; i < nrun; i++) {
    const char *spec = i < codecs.n ? codecs.v[i] : mustfail.v[i - codecs.n];
    gcomp_codec *c = NULL;
    if (gcomp_codec_create(spec, &c) < 0) {
      fprintf(stderr, "gcomp-converge: unknown or bad codec '%s': %s\n", spec, gcomp_last_error());
      return 2;
    }
    if (list_tol) {
      char canon[160];
      gcomp_codec_spec(c, canon, sizeof canon);
      const char *cls;
      gcomp_cv_tol_default(canon, &cls);
      gcomp_cv_tol t = gcomp_cv_tol_for(ts, spec, canon);
      char a[32], l[32], g[32], dr[32];
      snprintf(a, sizeof a, isinf(t.acc_pts) ? "off" : "%.3g points", t.acc_pts);
      snprintf(l, sizeof l, isinf(t.loss_rel) ? "off" : "%.3g%%", t.loss_rel * 100);
      snprintf(g, sizeof g, isinf(t.gap_rel) ? "off" : "%.3g%%", t.gap_rel * 100);
      snprintf(dr, sizeof dr, isinf(t.drift) ? "off" : "%.3g", t.drift);
      printf("%-28s %-8s accuracy %s, final loss %s, curve gap %s, drift %s\n", spec, cls, a, l, g,
             dr);
    }
    gcomp_codec_destroy(c);
  }
  if (list_tol) return 0;

  /* data sets: --problem pairs name their tasks (a --data file's task is its base name up
   * to the first dot, as gcomp_cv_load_csv names it) */
  for (int i = 0; i < pairs.n; i++) {
    char task[64];
    snprintf(task, sizeof task, "%.*s", (int)(strchr(pairs.v[i], '/') - pairs.v[i]), pairs.v[i]);
    int seen = 0;
    for (int j = 0; j < tasks.n; j++) seen |= strcmp(tasks.v[j], task) == 0;
    for (int j = 0; j < datas.n; j++) {
      const char *base = strrchr(datas.v[j], '/');
      base = base ? base + 1 : datas.v[j];
      size_t len = strcspn(base, ".");
      if (len == 0) len = strlen(base);
      seen |= strlen(task) == len && strncmp(base, task, len) == 0;
    }
    if (!seen) push(&tasks, task);
  }
  if (!tasks.n && !datas.n) push_csv(&tasks, "digits,gmm,teacher");
  int ndata = 0;
  static gcomp_cv_data *data;
  data = calloc((size_t)(tasks.n + datas.n), sizeof *data);
  if (!data) return out_of_memory("data sets");
  for (int i = 0; i < tasks.n; i++) {
    const char *t = tasks.v[i];
    if (strcmp(t, "digits") == 0) {
      const char *p = digits ? digits
                      : file_exists(GCOMP_CV_DIGITS_SRC) ? GCOMP_CV_DIGITS_SRC
                      : file_exists(GCOMP_CV_DIGITS_INSTALLED) ? GCOMP_CV_DIGITS_INSTALLED : NULL;
      if (!p) {
        fprintf(stderr, "gcomp-converge: note: digits data set not found (run scripts/setup, or "
                "--digits FILE); skipped\n");
        continue;
      }
      st = gcomp_cv_load_csv_rows(p, "digits", classes, test_frac, split_seed, max_rows,
                                  &data[ndata]);
    } else {
      gcomp_cv_synth s = {.kind = t, .dim = synth_dim, .nclass = 10, .ntrain = synth_n,
                          .ntest = synth_n / 4, .cond = synth_cond, .sep = 0.5, .seed = split_seed};
      st = gcomp_cv_make_synth(&s, &data[ndata]);
    }
    if (st < 0) {
      fprintf(stderr, "gcomp-converge: task '%s': %s\n", t, gcomp_last_error());
      return 2;
    }
    ndata++;
  }
  for (int i = 0; i < datas.n; i++) {
    st = gcomp_cv_load_csv_rows(datas.v[i], NULL, classes, test_frac, split_seed, max_rows,
                                &data[ndata]);
    if (st < 0) {
      fprintf(stderr, "gcomp-converge: %s\n", gcomp_last_error());
      return 2;
    }
    ndata++;
  }
  if (!ndata) {
    fprintf(stderr, "gcomp-converge: no task to run\n");
    return 2;
  }
  if (!models.n) push_csv(&models, "softmax,mlp");
  for (int i = 0; i < pairs.n; i++) {
    const char *mname = strchr(pairs.v[i], '/') + 1;
    int seen = 0;
    for (int j = 0; j < models.n; j++) seen |= strcmp(models.v[j], mname) == 0;
    if (!seen) push(&models, mname);
  }
  static gcomp_cv_model *mods;
  mods = calloc((size_t)models.n, sizeof *mods);
  if (models.n && !mods) return out_of_memory("models");
  for (int i = 0; i < models.n; i++)
    if (gcomp_cv_model_parse(models.v[i], hidden, &mods[i]) < 0) {
      fprintf(stderr, "gcomp-converge: %s\n", gcomp_last_error());
      return 2;
    }

  /* the runs */
  int nprob = ndata * models.n;
  static gcomp_cv_problem *probs;
  static gcomp_cv_model *shaped;
  probs = calloc((size_t)nprob, sizeof *probs);
  shaped = calloc((size_t)nprob, sizeof *shaped);
  if (nprob && (!probs || !shaped)) return out_of_memory("problems");
  int errors = 0, failures = 0, nprob_used = 0, follower = 0;
  char label[96];
  for (int d = 0; d < ndata; d++)
    for (int m = 0; m < models.n; m++) {
      if (pairs.n) {
        char want[160];
        snprintf(want, sizeof want, "%s/%s", data[d].name, models.v[m]);
        int sel = 0;
        for (int i = 0; i < pairs.n; i++) sel |= strcmp(pairs.v[i], want) == 0;
        if (!sel) continue;
      }
      int p = nprob_used++;
      gcomp_cv_problem *pr = &probs[p];
      shaped[p] = mods[m];
      gcomp_cv_model_shape(&shaped[p], data[d].nfeat, data[d].nclass);
      pr->model = &shaped[p];
      snprintf(pr->task, sizeof pr->task, "%s", data[d].name);
      pr->nruns = nrun;
      pr->runs = calloc((size_t)nrun, sizeof *pr->runs);
      pr->verdicts = calloc((size_t)nrun, sizeof *pr->verdicts);
      pr->must_fail = calloc((size_t)nrun, sizeof *pr->must_fail);
      pr->paired = calloc((size_t)nrun, sizeof *pr->paired);
      if (dep_min_bytes >= 0) pr->deployed = calloc((size_t)nrun, sizeof *pr->deployed);
      if (!pr->runs || !pr->verdicts || !pr->must_fail || !pr->paired ||
          (dep_min_bytes >= 0 && !pr->deployed))
        return out_of_memory("runs");
      pr->test_rows = data[d].ntest, pr->train_rows = data[d].ntrain;
      for (int i = 0; pr->deployed && i < nrun; i++) {
        gcomp_cv_deployed *dep = &pr->deployed[i];
        gcomp_cv_deployed_plan(&shaped[p], cfg.per_layer, dep_min_bytes, dep);
        /* only a job that compresses some calls and not others is neither the checked run
         * nor the baseline: that one is trained too */
        dep->trained = dep->compressed > 0 && dep->compressed < dep->calls;
      }
      snprintf(label, sizeof label, "%s/%s", data[d].name, gcomp_cv_model_name(&shaped[p]));
      cfg.label = label;
      uint64_t seed0 = cfg.seed;
      pr->floor_wanted = noise_floor > 0;   /* null in the JSON when it cannot be had */
      st = gcomp_cv_train(&cfg, &data[d], &shaped[p], NULL, NULL, &pr->base);
      if (cfg.real) {   /* the job's size is the worker count; only rank 0 reports */
        cfg.workers = pr->base.workers;
        if (pr->base.rank != 0) quiet = 1, follower = 1, cfg.progress = 0, json = junit = plot = NULL;
      }
      if (st < 0) {
        fprintf(stderr, "gcomp-converge: %s baseline: %s\n", label, pr->base.error);
        errors++;
        char why[600];
        snprintf(why, sizeof why, "baseline failed: %.500s", pr->base.error);
        not_run(pr, &codecs, &mustfail, st, why);
        continue;
      }
      /* the noise floor: the baseline again with the workers placed in other orders */
      int twin_pl[GCOMP_CV_MAX_TWINS];
      if (noise_floor) {
        pr->twins = calloc((size_t)noise_floor, sizeof *pr->twins);
        if (!pr->twins) return out_of_memory("noise floor runs");
        if (gcomp_cv_train_twins(&cfg, &data[d], &shaped[p], &pr->base, noise_floor, 0, twin_pl,
                                 pr->twins) < 0) {
          /* the codecs are not run: without the floor asked for, their verdicts would be the
           * short-run ones */
          char why[420];
          snprintf(why, sizeof why, "no noise floor: %.380s", gcomp_last_error());
          if (!follower) fprintf(stderr, "gcomp-converge: %s: %s\n", label, why);
          errors++;
          not_run(pr, &codecs, &mustfail, GCOMP_ERR_INVALID, why);
          continue;
        }
        pr->ntwins = noise_floor;
      }
      for (int i = 0; i < nrun; i++) {
        const char *spec = i < codecs.n ? codecs.v[i] : mustfail.v[i - codecs.n];
        pr->must_fail[i] = i >= codecs.n;
        errors += codec_seed(&cfg, &data[d], pr, i, spec, &pr->base, GCOMP_OK, 0, &menv, label);
      }
      /* more seeds: each codec against its own seed's baseline, folded into the means */
      for (int k = 1; k < nseeds && pr->base.status >= 0; k++) {
        gcomp_cv_run base_k;
        cfg.seed = seed0 + (uint64_t)k;
        int stk = gcomp_cv_train(&cfg, &data[d], &shaped[p], NULL, NULL, &base_k);
        for (int i = 0; i < nrun; i++) {
          const char *spec = i < codecs.n ? codecs.v[i] : mustfail.v[i - codecs.n];
          errors += codec_seed(&cfg, &data[d], pr, i, spec, &base_k, stk, k, &menv, label);
        }
        if (pr->ntwins > 0 && pr->twins[0].status >= 0) {   /* seed 0's placements */
          gcomp_cv_run tw_k[GCOMP_CV_MAX_TWINS];
          int stt = stk < 0 ? stk
                    : gcomp_cv_train_twins(&cfg, &data[d], &shaped[p], &base_k, pr->ntwins, 1,
                                           twin_pl, tw_k);
          if (stt < 0) {   /* the floor is then an error (gcomp_cv_floor_measure names it) */
            pr->twins[0].status = stt;
            snprintf(pr->twins[0].error, sizeof pr->twins[0].error, "seed %llu: %s",
                     (unsigned long long)cfg.seed,
                     stk < 0 ? "its baseline failed" : gcomp_last_error());
          }
          for (int t = 0; stt >= 0 && t < pr->ntwins; t++) {
            if (gcomp_cv_run_merge(&pr->twins[t], &tw_k[t], k) < 0) {
              fprintf(stderr, "gcomp-converge: %s: %s\n", label, gcomp_last_error());
              errors++;
            }
          }
          for (int t = 0; stt >= 0 && t < pr->ntwins; t++) gcomp_cv_run_free(&tw_k[t]);
        }
        if (gcomp_cv_run_merge(&pr->base, &base_k, k) < 0) {
          fprintf(stderr, "gcomp-converge: %s: %s\n", label, gcomp_last_error());
          errors++;
        }
        gcomp_cv_run_free(&base_k);
      }
      cfg.seed = seed0;
      if (pr->ntwins > 0 &&
          gcomp_cv_floor_measure(&pr->base, pr->twins, twin_pl, pr->ntwins, &pr->floor) < 0) {
        /* without its floor a verdict would be the short-run one, silently: none at all */
        char why[420];
        snprintf(why, sizeof why, "no noise floor: %.380s", gcomp_last_error());
        if (!follower) fprintf(stderr, "gcomp-converge: %s: %s\n", label, why);
        errors++;
        no_verdicts(pr, why);
        continue;
      }
      failures += gcomp_cv_judge_problem(pr, ts, stderr, label, &errors);
    }

  nprob = nprob_used;
  if (!nprob) {
    fprintf(stderr, "gcomp-converge: no problem to run (check --problem against the tasks found)\n");
    return 2;
  }
  gcomp_cv_report rep = {.cfg = &cfg, .algo = algo, .nproblems = nprob, .problems = probs,
                         .min_bytes = min_bytes};
  if (!quiet) gcomp_cv_print_table(stdout, &rep);
  fflush(stdout);   /* the table first, then the verdicts on stderr */
  if (json && gcomp_cv_write_json(json, &rep) < 0) errors++, fprintf(stderr, "%s\n", gcomp_last_error());
  if (junit && gcomp_cv_write_junit(junit, &rep) < 0) errors++, fprintf(stderr, "%s\n", gcomp_last_error());
  if (plot && gcomp_cv_write_svg(plot, &rep) < 0) errors++, fprintf(stderr, "%s\n", gcomp_last_error());

  /* every verdict that is not the expected one, on stderr, naming metric and margin */
  if (!follower) gcomp_cv_print_unexpected(stderr, &rep);
  int rc = errors ? 2 : failures ? 1 : 0;
  if (follower) rc = errors ? 2 : 0;   /* rank 0 judges */
  if (!quiet)
    printf("\ngcomp-converge: %s (%d problem%s x %d codec%s; %d outside tolerance, %d error%s)\n",
           rc == 0 ? "PASS" : rc == 1 ? "FAIL" : "ERROR", nprob, nprob == 1 ? "" : "s", nrun,
           nrun == 1 ? "" : "s", failures, errors, errors == 1 ? "" : "s");

  for (int p = 0; p < nprob; p++) {
    gcomp_cv_run_free(&probs[p].base);
    for (int i = 0; i < probs[p].nruns; i++) gcomp_cv_run_free(&probs[p].runs[i]);
    for (int t = 0; t < probs[p].ntwins; t++) gcomp_cv_run_free(&probs[p].twins[t]);
    free(probs[p].twins);
    for (int i = 0; probs[p].deployed && i < probs[p].nruns; i++)
      gcomp_cv_run_free(&probs[p].deployed[i].run);
    free(probs[p].deployed);
    free(probs[p].paired);
    free(probs[p].runs);
    free(probs[p].verdicts);
    free(probs[p].must_fail);
  }
  free(probs);
  free(shaped);
  free(mods);
  for (int d = 0; d < ndata; d++) gcomp_cv_data_free(&data[d]);
  free(data);
  gcomp_cv_tolset_destroy(ts);
  strlist *all[] = {&codecs, &mustfail, &tasks, &datas, &models, &tols, &tolfiles, &pairs};
  for (size_t k = 0; k < sizeof all / sizeof *all; k++) {
    for (int i = 0; i < all[k]->n; i++) free(all[k]->v[i]);
    free(all[k]->v);
  }
  return rc;
}
