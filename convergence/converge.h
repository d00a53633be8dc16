/* The convergence harness as a small static library: data sets, models, the data-parallel
 * training run (W workers, one loopback rank and one thread each, every gradient through
 * gcomp_allreduce), metrics against the fp32 baseline, tolerances and reports.
 *
 * tools/gcomp-converge.c is a thin command line over it; tests/unit/test_converge.c drives
 * it directly. Every function returns a gcomp status (0 ok, negative error) and leaves a
 * detail in gcomp_last_error() on failure, like the library it checks. */
#ifndef GCOMP_CONVERGE_H
#define GCOMP_CONVERGE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "gcomp.h"

/* ---- data ------------------------------------------------------------------------------ */
typedef struct {
  char name[64];          /* "digits", "gmm", "teacher", or the file's base name */
  int nfeat, nclass;
  int ntrain, ntest;
  float *xtrain, *xtest;  /* row-major, standardised with the training set's mean and std */
  int *ytrain, *ytest;
} gcomp_cv_data;

/* Reads a CSV (plain or gzip) with the label, an integer in [0, max_classes), in the last
 * column and an optional header line; splits it into train and test (test_frac of the rows,
 * chosen by a fixed permutation of split_seed). Errors name the file, line and field. */
int gcomp_cv_load_csv(const char *path, const char *name, int max_classes, double test_frac,
                      uint64_t split_seed, gcomp_cv_data *out);
/* The same, keeping only max_rows of the file's rows (0: all), a subset chosen by another
 * permutation of split_seed before the split: the data set as a smaller one would be.
 * GCOMP_ERR_INVALID when max_rows is below 2 or above the file's rows. */
int gcomp_cv_load_csv_rows(const char *path, const char *name, int max_classes,
                           double test_frac, uint64_t split_seed, int max_rows,
                           gcomp_cv_data *out);

/* Seeded synthetic tasks.
 *   gmm:     nclass Gaussian clusters in dim dimensions; feature j is scaled by
 *            cond^(-j/(dim-1)) so the Hessian's condition number grows as cond^2.
 *   teacher: labels are the argmax of a random two-layer ReLU teacher network. */
typedef struct {
  const char *kind;   /* "gmm" or "teacher" */
  int dim, nclass, ntrain, ntest;
  double cond;        /* gmm only */
  double sep;         /* gmm: distance scale of the class means */
  uint64_t seed;
} gcomp_cv_synth;
int gcomp_cv_make_synth(const gcomp_cv_synth *s, gcomp_cv_data *out);
void gcomp_cv_data_free(gcomp_cv_data *d);

/* ---- models ---------------------------------------------------------------------------- */
typedef enum { GCOMP_CV_SOFTMAX = 0, GCOMP_CV_MLP = 1 } gcomp_cv_model_kind;

typedef struct {
  gcomp_cv_model_kind kind;
  int nin, nhid, nout;   /* nhid unused by softmax */
  size_t nparams;
} gcomp_cv_model;

int gcomp_cv_model_parse(const char *name, int hidden, gcomp_cv_model *m);  /* softmax | mlp */
void gcomp_cv_model_shape(gcomp_cv_model *m, int nin, int nout);
const char *gcomp_cv_model_name(const gcomp_cv_model *m);
void gcomp_cv_model_init(const gcomp_cv_model *m, float *theta, uint64_t seed);
/* The parameter tensors (W1, b1[, W2, b2]) as offsets and lengths into the flat vector;
 * returns their count (at most 4). */
int gcomp_cv_model_tensors(const gcomp_cv_model *m, size_t off[4], size_t len[4]);
/* Scratch for forward and backward of up to `rows` rows. */
size_t gcomp_cv_model_scratch(const gcomp_cv_model *m, int rows);
/* Mean cross-entropy over the n rows; grad (may be NULL) receives its gradient. */
double gcomp_cv_model_loss(const gcomp_cv_model *m, const float *theta, const float *x,
                           const int *y, int n, float *grad, float *scratch, int *correct);

/* The training loss of the curves is measured on the first (up to) this many training rows
 * (the rows are already in a seeded random order); test accuracy on the whole test set. */
enum { GCOMP_CV_EVAL_ROWS = 4096 };

/* ---- one training run ------------------------------------------------------------------ */
typedef struct {
  int workers;          /* W data-parallel workers = loopback ranks = threads */
  int steps;
  int batch;            /* rows per worker per step */
  double lr, momentum, weight_decay;
  int lr_schedule;      /* GCOMP_CV_LR_*: the learning rate at step t of T */
  uint64_t seed;        /* model init and minibatch order */
  int nseeds;           /* for the reports: runs merged over seeds seed .. seed+nseeds-1
                           (gcomp_cv_run_merge; gcomp_cv_train itself runs one seed) */
  int eval_every;       /* steps between full-set evaluations (the loss curve) */
  gcomp_op op;          /* GCOMP_AVG (default) or GCOMP_SUM (then scaled by 1/W) */
  int progress;         /* print a progress line on stderr */
  const char *label;    /* for the progress line */
  int per_layer;        /* one gcomp_allreduce per parameter tensor, each with its own key
                           (error-feedback slot), instead of one over the flat vector */
  int real;             /* one worker per process (gcomp_comm_init_env, started by gcomp-run
                           or mpirun; workers = the job's size) instead of W threads */
  const char *algo;     /* GCOMP_ALGO for codec runs ("auto": the planner); the baseline
                           always runs uncompressed with the planner's dense choice */
  int placement;        /* 0 (default); k > 0: rank w trains as worker
                           gcomp_cv_placed_worker(k, W, w), on that worker's shard and
                           minibatch stream: the same job with its workers placed on the
                           ranks in another order (a noise-floor twin) */
  int momentum_correction;   /* GCOMP_CV_MC_*: what a top-k codec with +ef whose ef stage
                           names no momentum runs as (see gcomp_cv_plan_codec) */
} gcomp_cv_train_cfg;

/* Momentum correction for top-k with error feedback (cfg->momentum_correction):
 *   ON     (default) +ef runs as +ef:momentum=<momentum>,mask=0
 *   MASKED +ef runs as +ef:momentum=<momentum>,mask=1 (DGC with momentum factor masking)
 *   OFF    every spec runs as given, the optimizer's momentum after the allreduce */
enum { GCOMP_CV_MC_OFF = 0, GCOMP_CV_MC_ON = 1, GCOMP_CV_MC_MASKED = 2 };

/* Learning-rate schedules (cfg->lr_schedule), lr_t at step t of T steps:
 *   CONSTANT (default) lr
 *   COSINE   lr * (1 + cos(pi t / T)) / 2, to zero at the end
 *   STEP     lr, then lr / 10 from T/2, lr / 100 from 3T/4 */
enum { GCOMP_CV_LR_CONSTANT = 0, GCOMP_CV_LR_COSINE = 1, GCOMP_CV_LR_STEP = 2 };
double gcomp_cv_lr_at(const gcomp_cv_train_cfg *cfg, int step);
const char *gcomp_cv_lr_schedule_name(int schedule);

void gcomp_cv_train_defaults(gcomp_cv_train_cfg *cfg);

/* What a codec run trains with. With momentum in the codec's error feedback (ef:momentum,
 * given or added by momentum_correction) the workers accumulate momentum before
 * sparsifying, and the optimizer applies the averaged result without momentum of its own:
 * the same lr and the same effective step as the baseline's momentum SGD.
 *   run_spec:     the spec that runs (spec itself, or the canonical spec with ef
 *                 momentum added)
 *   ef_momentum:  the momentum of its error feedback (0: none)
 *   opt_momentum: the momentum the optimizer applies (cfg->momentum, or 0)
 *   corrected:    1 when the harness added the ef momentum
 * GCOMP_ERR_INVALID (detail from the library) when the spec is not a codec. */
typedef struct {
  char run_spec[256];
  double ef_momentum, opt_momentum;
  int corrected;
} gcomp_cv_codec_plan;
int gcomp_cv_plan_codec(const gcomp_cv_train_cfg *cfg, const char *spec, gcomp_cv_codec_plan *out);

typedef struct {
  char spec[128];       /* the codec spec as given ("none" for the baseline) */
  char canon[160];      /* the library's canonical form of the spec that ran (with ef
                           momentum when the harness added it: see gcomp_cv_plan_codec) */
  double ef_momentum;   /* momentum inside the codec's error feedback (0: none) */
  double opt_momentum;  /* momentum the optimizer applied (the baseline: cfg->momentum) */
  int corrected;        /* the harness added ef momentum (momentum correction) */
  char algo[32];        /* the allreduce algorithm the library ran (rank 0, last step) */
  int workers;          /* data-parallel workers of the run */
  int rank;             /* real mode: this process's rank (only rank 0 holds the metrics) */
  int status;           /* GCOMP_OK, or the error that stopped the run */
  char error[512];
  int neval;
  int *eval_step;       /* [neval] */
  double *train_loss;   /* [neval] training loss (first GCOMP_CV_EVAL_ROWS rows) */
  double *test_acc;     /* [neval] test accuracy, 0..1 */
  double *drift;        /* [neval] ||theta - theta_base|| / ||theta_base|| (0 for baseline) */
  float *snap;          /* [neval * nparams] parameter snapshots (kept for the baseline) */
  double *step_loss;    /* [steps] mean minibatch loss over workers */
  double *grad_relerr;  /* [steps] ||g_lib - g_exact|| / ||g_exact|| (with ef momentum
                           g_exact is the momentum of the exact averages: what the
                           baseline's optimizer would apply) */
  double *grad_cos;     /* [steps] cosine(g_lib, g_exact) */
  float *theta;         /* final parameters (rank 0) */
  size_t nparams;
  int steps;
  double final_loss, final_acc, final_train_acc;
  double relerr_mean, relerr_max, cos_mean, cos_min;
  double curve_gap;     /* mean over eval points of |loss - loss_base| / loss_base */
  double final_drift, max_drift;
  int replicas_equal;   /* every worker ended with bitwise the same parameters */
  /* coverage: what the allreduce delivered (rank 0). A sparsifying codec moves few
   * parameters per step; when each moves only a few times in the whole run, its gap to the
   * baseline is a rate limit, not noise. */
  double moved_frac;    /* fraction of the parameters delivered nonzero, mean over steps */
  double never_moved_frac;   /* fraction never delivered nonzero in the whole run */
  uint64_t wire_bytes;  /* summed over ranks */
  uint64_t user_bytes;  /* fp32 bytes given to gcomp_allreduce, summed over ranks */
  uint64_t codec_in, codec_out;   /* gcomp_codec_get_stats, summed over ranks */
  double seconds;
  /* the drift guard (gcomp_cv_setup_guard), rank 0's figures (sums and the max over seeds) */
  uint64_t guard_checks, guard_fallbacks, guard_backoff_calls;
  double guard_max_error;
  /* several seeds (gcomp_cv_run_merge): the metrics above are means over the seeds (maxima
   * for the max_ fields, minima for the min_ ones); per seed: */
  int nseeds;           /* 1 for a single run */
  double *seed_loss;    /* [nseeds] final training loss of each seed (NULL when nseeds 1) */
  double *seed_acc;     /* [nseeds] final test accuracy of each seed */
  /* curves a training program logged (gcomp_cv_log_read): only eval_step, train_loss and
   * test_acc (NAN where a record has no accuracy) are there; no parameters, gradients or
   * bytes, and drift is NAN (not measured, so never judged) */
  int logged;
  int test_rows;        /* logged: the test rows its accuracy counts (0: not said) */
} gcomp_cv_run;

/* Folds run `x` (seed number k of the same problem and codec, k >= 1) into `acc`, which
 * holds the merge of seeds 0..k-1: running means of every metric and curve. Judging the
 * merged runs compares means over seeds, paired by seed (each codec run's drift and curve
 * gap are against its own seed's baseline). x is left as it was. */
int gcomp_cv_run_merge(gcomp_cv_run *acc, const gcomp_cv_run *x, int k);

/* Trains with the codec `spec` (NULL or "none": uncompressed). With `base` (a finished
 * baseline run of the same problem) drift and curve gap are measured against it. A codec
 * the library refuses (unknown spec, or gcomp_allreduce failing) sets run->status and
 * run->error and returns that status. */
int gcomp_cv_train(const gcomp_cv_train_cfg *cfg, const gcomp_cv_data *data,
                   const gcomp_cv_model *model, const char *spec, const gcomp_cv_run *base,
                   gcomp_cv_run *run);
void gcomp_cv_run_free(gcomp_cv_run *run);

/* Sets the environment the simulated runs need before the library reads it:
 * GCOMP_CODEC_MIN_BYTES (< 0 keeps it; the harness passes 0 so small models compress),
 * GCOMP_CODEC=none (the baseline passes no codec) and fixed link figures (alpha_beta, NULL
 * for the default: a 2 us, 0.1 GB/s link where compression pays) so the planner's choice
 * never depends on a noisy calibration. */
int gcomp_cv_setup_env(long long codec_min_bytes, const char *alpha_beta);
/* GCOMP_GUARD for every run's communicators (NULL or "": the environment's); a bad spec is
 * an error now. The runs then report the guard's checks and fallbacks. */
int gcomp_cv_setup_guard(const char *spec);

/* ---- the noise floor ------------------------------------------------------------------ */
/* How far fp32 training moves from the baseline when nothing changes but the order in which
 * the allreduce adds the workers' gradients. A twin is the baseline run again, uncompressed,
 * with the workers placed on the ranks in a shuffled order (cfg->placement): every step the
 * same W gradients, added in another order, as when a scheduler places the same job's
 * processes differently. Its deviation from the baseline is what rounding alone does to
 * this run. On short runs it is near zero; on long non-convex runs trajectories part from
 * rounding alone, and a fixed tolerance would flag `none` itself.
 *
 * From n twins (n >= 2) each metric gets a bound that one more fp32 run stays under with
 * probability 99% if the twins' deviations are normal (Student's t, one-sided, t99(df)):
 *   accuracy drop, loss rise (signed, centred on the baseline):
 *       t99(n) * sqrt(mean of the twins' squared deviations)
 *   curve gap, drift (amounts, >= 0):
 *       mean + t99(n - 1) * sd * sqrt(1 + 1/n)   (a prediction bound for a new amount)
 * The twins share the baseline, which makes the first bound somewhat conservative. A codec
 * fails a metric when it deviates by more than the tolerance plus the floor (gcomp_cv_judge). */
enum { GCOMP_CV_MAX_TWINS = 8 };
typedef struct {
  int n;                            /* twins the floor is measured from (0: no floor) */
  int placements[GCOMP_CV_MAX_TWINS];
  double acc_pts;                   /* test accuracy, points */
  double loss_rel;                  /* final training loss, relative to the baseline's */
  double gap_rel;                   /* loss-curve mean relative gap */
  double drift;                     /* final parameter drift */
  int by_seed;                      /* logged curves: 1 the twins are the baseline with
                                       other seeds, and placements[] holds those seeds;
                                       2 other baselines as given, numbered 1.. */
} gcomp_cv_floor;

/* Student's t one-sided 99% quantile for df = 1..GCOMP_CV_MAX_TWINS; NAN outside. */
double gcomp_cv_t99(int df);

/* The worker rank `rank` plays under placement k of W workers: a seeded shuffle (0: rank);
 * -1 when rank is not in [0, W) or memory ran out. */
int gcomp_cv_placed_worker(int placement, int W, int rank);

/* Trains n (2..GCOMP_CV_MAX_TWINS) fp32 twins of `base`, a finished baseline of the same
 * cfg, data and model whose workers agree (replicas_equal), with 3 or more workers, into
 * twins[0..n). fixed 0: tries placements 1, 2, 3, ... and keeps the first n whose final
 * parameters differ bitwise from the baseline's and from each other (an algorithm can add
 * a shuffled order in the same pairs: rhd's butterfly does for some), giving up after
 * 4n + 8 tries; a 2-step probe of each placement skips the ones whose first steps repeat
 * the baseline's or a kept twin's, so only distinct ones train the whole run; placements[]
 * receives the kept ones. fixed 1: trains exactly placements[0..n) (another seed's twins)
 * and requires the same. GCOMP_ERR_INVALID, with nothing left in twins, when n distinct
 * twins cannot be had, a twin failed, or its workers' replicas differ. */
int gcomp_cv_train_twins(const gcomp_cv_train_cfg *cfg, const gcomp_cv_data *data,
                         const gcomp_cv_model *model, const gcomp_cv_run *base, int n, int fixed,
                         int *placements, gcomp_cv_run *twins);

/* The floor from n >= 2 finished twins of `base` (twin i trained with placements[i]).
 * GCOMP_ERR_INVALID when the baseline has no finite final metrics, or a twin failed or has
 * none (naming it). */
int gcomp_cv_floor_measure(const gcomp_cv_run *base, const gcomp_cv_run *twins,
                           const int *placements, int n, gcomp_cv_floor *out);

/* ---- tolerances and verdicts ----------------------------------------------------------- */
typedef struct {
  double acc_pts;    /* test accuracy may be at most this many points below the baseline */
  double loss_rel;   /* final training loss at most this fraction above the baseline */
  double gap_rel;    /* mean relative gap of the loss curve */
  double drift;      /* final parameter drift */
} gcomp_cv_tol;

typedef struct gcomp_cv_tolset gcomp_cv_tolset;   /* defaults + overrides, by spec pattern */
int gcomp_cv_tolset_create(gcomp_cv_tolset **out);
void gcomp_cv_tolset_destroy(gcomp_cv_tolset *ts);
/* "PATTERN key=value[,key=value...]", PATTERN a shell glob over the canonical or given
 * spec ("topk*", "*+ef", "fp16:round=stochastic"); keys acc, loss, gap, drift; "inf"
 * disables a check. Later rules win. `where` names the origin for error messages. */
int gcomp_cv_tolset_add(gcomp_cv_tolset *ts, const char *rule, const char *where);
int gcomp_cv_tolset_load(gcomp_cv_tolset *ts, const char *path);
gcomp_cv_tol gcomp_cv_tol_for(const gcomp_cv_tolset *ts, const char *spec, const char *canon);
/* The built-in default for a spec, and where it comes from ("cast", "topk+ef", ...). */
gcomp_cv_tol gcomp_cv_tol_default(const char *canon, const char **cls);

/* ---- what the data resolves ------------------------------------------------------------ */
/* A codec's final model and its baseline's on the same rows, per seed (gcomp_cv_pair adds
 * one seed), summed over seeds: which test rows each classifies right, for McNemar's exact
 * test of the accuracy difference, and the per-row training losses, for the sampling error
 * of the final-loss difference when the loss is measured on a sample of the training rows
 * (GCOMP_CV_EVAL_ROWS of more). */
typedef struct {
  int seeds;          /* seeds paired (0: none) */
  int rows;           /* test rows compared, summed over seeds */
  int lost;           /* test rows the baseline classifies right and the codec wrong */
  int gained;         /* test rows the codec classifies right and the baseline wrong */
  int loss_rows;      /* training rows the final loss is measured on */
  int train_rows;     /* training rows of the set */
  double loss_var;    /* summed over seeds: sampling variance of the seed's final-loss
                         difference (per-row differences, finite-population corrected) */
  double base_loss;   /* summed over seeds: the baseline's final loss */
} gcomp_cv_paired;

/* Adds the pair (base, run) of one seed to acc (zeroed before the first). Both must have
 * finished with their final parameters (theta) on this data and model. GCOMP_ERR_INVALID
 * when they do not fit the data, or when the per-row predictions do not reproduce the
 * runs' own final accuracies (then the parameters are not the evaluated ones). */
int gcomp_cv_pair(const gcomp_cv_model *m, const gcomp_cv_data *d, const gcomp_cv_run *base,
                  const gcomp_cv_run *run, gcomp_cv_paired *acc);

/* McNemar's exact test, one-sided: the probability that `lost` or more of the lost + gained
 * rows two models disagree on go against the codec when each is a fair coin (no real
 * difference). 1 when there is no disagreement. */
double gcomp_cv_mcnemar_p(int lost, int gained);
/* The level at which the accuracy verdict calls a drop real, and the fewest rows a drop
 * must have for that (5: a drop of 4 rows, none gained, is p = 1/16). */
#define GCOMP_CV_PAIRED_ALPHA 0.05
int gcomp_cv_mcnemar_min_rows(double alpha);

typedef struct {
  int pass;          /* 1 within tolerance, 0 exceeded, -1 the run failed */
  char why[512];     /* "test accuracy 0.93 points below baseline (tolerance 0.5)" */
  char hint[320];    /* for a failed sparsifier with error feedback: how often each
                        parameter moved in the run, and that the verdict depends on the
                        run's length and schedule (empty otherwise) */
  gcomp_cv_tol tol;
  gcomp_cv_floor floor;   /* the noise floor the verdict allowed for (n 0: none) */
  unsigned coarse;        /* GCOMP_CV_M_* bits: metrics whose floor exceeds the tolerance.
                             fp32 itself does not repeat that closely on this run, so the
                             verdict bounds the codec's effect there by tolerance + floor,
                             not by the tolerance (a pass says less; a must-fail may escape) */
  /* what the rows resolve (gcomp_cv_judge_paired; paired.seeds 0 and the rest 0 or NAN
   * from gcomp_cv_judge) */
  gcomp_cv_paired paired;
  double acc_p;           /* McNemar's one-sided p of the accuracy difference */
  double acc_row_pts;     /* one test row, in points (over seeds: of the mean) */
  double acc_min_pts;     /* the smallest drop the paired test can call real (min rows) */
  double loss_se_rel;     /* sampling error (one standard error) of the relative final-loss
                             difference from the rows it is measured on; 0 when they are
                             the whole training set */
  unsigned unresolved;    /* GCOMP_CV_M_* bits: tolerances finer than the rows resolve:
                             accuracy when acc_min_pts exceeds it, final loss when 2.33
                             standard errors do (99% one-sided) */
  char note[400];         /* a pass the paired test decided: the accuracy fell by more than
                             the tolerance on too few rows to be a real drop */
} gcomp_cv_verdict;
enum { GCOMP_CV_M_ACC = 1, GCOMP_CV_M_LOSS = 2, GCOMP_CV_M_GAP = 4, GCOMP_CV_M_DRIFT = 8 };
/* "accuracy, final loss" for coarse bits (into buf) */
const char *gcomp_cv_metric_names(unsigned bits, char *buf, size_t n);
/* floor NULL (or n 0): the tolerances alone. With a floor each limit is the tolerance plus
 * the floor's figure for that metric. */
void gcomp_cv_judge(const gcomp_cv_run *base, const gcomp_cv_run *run, const gcomp_cv_tol *tol,
                    const gcomp_cv_floor *floor, gcomp_cv_verdict *v);
/* The same with the runs' pairs (NULL or seeds 0: as gcomp_cv_judge). An accuracy drop
 * past its limit fails only when McNemar's test also calls it real at
 * GCOMP_CV_PAIRED_ALPHA: a drop of a few rows of a small test set is within what the rows
 * can tell apart, and the verdict says so in `note` instead of failing. The limit itself is
 * not widened. The verdict also states each metric's resolution (acc_row_pts,
 * acc_min_pts, loss_se_rel, unresolved). */
void gcomp_cv_judge_paired(const gcomp_cv_run *base, const gcomp_cv_run *run,
                           const gcomp_cv_tol *tol, const gcomp_cv_floor *floor,
                           const gcomp_cv_paired *paired, gcomp_cv_verdict *v);

/* The loss curve's mean relative gap to the baseline's, over the n evaluations after step 0
 * (the same steps in both): what the curve-gap tolerance bounds. */
double gcomp_cv_curve_gap(const int *step, const double *loss, const double *base_loss, int n);

/* ---- small tensors: what a deployed job runs -------------------------------------------- */
/* The harness compresses every call (--min-bytes 0) so that the codec itself is checked.
 * A deployed job sends a call under GCOMP_CODEC_MIN_BYTES uncompressed, and a small model's
 * gradient (or a small tensor of it, one call per tensor) is under the default 64 KiB:
 * there the job trains as fp32 whatever the codec, and the raw verdict is not the job's. */
typedef struct {
  long long min_bytes;     /* the deployment's GCOMP_CODEC_MIN_BYTES */
  int calls;               /* gradient calls per step (1, or one per tensor) */
  int compressed;          /* of which at least min_bytes: compressed in the deployed job */
  size_t smallest, largest;   /* the calls' bytes */
  int trained;             /* some calls compress and some do not: the deployed job was
                              trained and judged (run, paired, verdict); otherwise it is the
                              raw run (every call compresses) or the baseline (none does) */
  gcomp_cv_run run;
  gcomp_cv_paired paired;
  gcomp_cv_verdict verdict;
} gcomp_cv_deployed;

/* Fills calls, compressed, smallest and largest for the model's calls (one over the flat
 * gradient, or one per tensor with per_layer) under min_bytes; trained 0. */
void gcomp_cv_deployed_plan(const gcomp_cv_model *m, int per_layer, long long min_bytes,
                            gcomp_cv_deployed *out);
/* "as checked" (every call compresses), "fp32" (none does: the job trains as the
 * baseline), or the trained deployed run's verdict word. */
const char *gcomp_cv_deployed_word(const gcomp_cv_deployed *dep);

/* ---- reports --------------------------------------------------------------------------- */
typedef struct {
  char task[64];
  const gcomp_cv_model *model;   /* NULL: logged curves */
  gcomp_cv_run base;
  int nruns;
  gcomp_cv_run *runs;
  gcomp_cv_verdict *verdicts;
  int *must_fail;    /* [nruns]: this codec is expected to be flagged */
  int floor_wanted;  /* --noise-floor was asked for (the floor may still have failed) */
  int ntwins;        /* the noise floor's fp32 twins (0: no floor) */
  gcomp_cv_run *twins;
  gcomp_cv_floor floor;
  gcomp_cv_paired *paired;      /* [nruns] or NULL: each codec's pairs with its baseline */
  gcomp_cv_deployed *deployed;  /* [nruns] or NULL: the small-tensor report */
  int test_rows, train_rows;    /* the data set's (for the resolution line) */
} gcomp_cv_problem;

typedef struct {
  const gcomp_cv_train_cfg *cfg;   /* NULL: logged curves (gcomp-converge run, compare) */
  const char *command;             /* logged curves: what ran, or the baseline's file */
  const char *algo;
  int nproblems;
  gcomp_cv_problem *problems;
  long long min_bytes;   /* GCOMP_CODEC_MIN_BYTES of the checked runs */
} gcomp_cv_report;

/* Judges every codec of a problem whose baseline (and noise floor, when asked for) is
 * there: each against the tolerance gcomp_cv_tol_for gives its spec, with its pairs
 * (pr->paired, may be NULL) and the floor; the deployed runs too (reported, not gating).
 * Runs that failed are errors: counted into *errors and named on `err` after `label`.
 * Returns how many verdicts are not the expected one (a codec outside its tolerance, or a
 * must-fail codec within it). Every path to a verdict goes through here. */
int gcomp_cv_judge_problem(gcomp_cv_problem *pr, const gcomp_cv_tolset *ts, FILE *err,
                           const char *label, int *errors);
/* Every verdict that is not the expected one, one line each on f, naming metric and margin */
void gcomp_cv_print_unexpected(FILE *f, const gcomp_cv_report *r);
/* "mlp", "softmax", or "logged" for curves from a metrics log (no model) */
const char *gcomp_cv_problem_model(const gcomp_cv_problem *pr);

void gcomp_cv_print_table(FILE *f, const gcomp_cv_report *r);
int gcomp_cv_write_json(const char *path, const gcomp_cv_report *r);
int gcomp_cv_write_junit(const char *path, const gcomp_cv_report *r);
int gcomp_cv_write_svg(const char *path, const gcomp_cv_report *r);

/* ---- logged curves: a training program's own metrics ----------------------------------- */
/* The metrics convention: the program writes JSON lines, one object per evaluation, from
 * rank 0, to the file GCOMP_METRICS names:
 *   {"step": 40, "loss": 0.53, "accuracy": 91.2, "test_rows": 360}
 * step: a whole number, increasing from line to line; loss: the training loss (NaN or
 * Infinity, as Python's json writes them, is a diverged run: a verdict, not an error);
 * accuracy (optional): test accuracy in percent; test_rows (optional): the rows it is
 * counted on, which gives the accuracy its resolution. Other keys are ignored.
 *
 * Reads such a file into `run` (spec `name`, logged 1). GCOMP_ERR_INVALID naming the file,
 * and the line when a line is at fault: a file that cannot be read or holds no records, a
 * line that is not a JSON object, a step or loss missing or not a number, steps that do not
 * increase, an accuracy outside [0, 100], test_rows that change. */
int gcomp_cv_log_read(const char *path, const char *name, gcomp_cv_run *run);
/* Fits the logged `run` (read from path) to its logged baseline (read from base_path): the
 * same steps (else GCOMP_ERR_INVALID naming both files and the first step that differs),
 * accuracy on the same records and the same test rows; then measures its curve gap, and
 * fills `paired` (may be NULL) when both say their test rows: a net drop of d rows read as
 * d rows lost and none gained, the least the paired test could be shown, so an accuracy
 * drop within chance is said so rather than failed, and one that may be real fails. */
int gcomp_cv_log_fit(const gcomp_cv_run *base, const char *base_path, gcomp_cv_run *run,
                     const char *path, gcomp_cv_paired *paired);

#endif /* GCOMP_CONVERGE_H */
