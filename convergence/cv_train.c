/* One data-parallel training run, simulated in one process: W workers, each a thread
 * driving its own loopback rank and communicator, each with its own shard, minibatch order,
 * model replica and codec (so error-feedback residuals are per rank, as in a real job).
 * Every step the workers' gradients go through gcomp_allreduce -- the library's codec,
 * error feedback and algorithm, hop by hop -- and rank 0 compares the result with the exact
 * fp32 average it computes serially from copies of the workers' gradients. */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <time.h>

#include "converge.h"
#include "cv_check.h"
#include "cv_rng.h"

enum { GRAD_KEY = 1 };

double gcomp_cv_lr_at(const gcomp_cv_train_cfg *cfg, int step) {
  double T = cfg->steps > 0 ? cfg->steps : 1;
  switch (cfg->lr_schedule) {
  case GCOMP_CV_LR_COSINE: return cfg->lr * 0.5 * (1.0 + cos(M_PI * step / T));
  case GCOMP_CV_LR_STEP:
    return step >= 3 * T / 4 ? cfg->lr / 100 : step >= T / 2 ? cfg->lr / 10 : cfg->lr;
  default: return cfg->lr;
  }
}

const char *gcomp_cv_lr_schedule_name(int schedule) {
  return schedule == GCOMP_CV_LR_COSINE ? "cosine"
         : schedule == GCOMP_CV_LR_STEP ? "step"
                                        : "constant";
}

void gcomp_cv_train_defaults(gcomp_cv_train_cfg *cfg) {
  *cfg = (gcomp_cv_train_cfg){.workers = 8, .steps = 600, .batch = 16, .lr = 0.05,
                              .momentum = 0.9, .weight_decay = 0, .seed = 1, .eval_every = 10,
                              .op = GCOMP_AVG, .progress = 0, .label = "",
                              .momentum_correction = GCOMP_CV_MC_ON};
}

/* DGC's momentum correction, which is what a user of top-k with momentum SGD deploys:
 * error feedback delays most coordinates by many steps, and a momentum buffer applied
 * after the aggregation keeps pushing along those stale, delayed values. The correction
 * only exists for a sparsifier (the library refuses ef momentum elsewhere), and a spec
 * that names ef momentum itself (momentum=0 included) runs as written. Without masking by
 * default: on these small models the same coordinates are sent most steps, and masking
 * turns them into plain SGD at a tenth of the baseline's step, which trains visibly worse. */
int gcomp_cv_plan_codec(const gcomp_cv_train_cfg *cfg, const char *spec, gcomp_cv_codec_plan *out) {
  GCOMP_FAIL_IF(!cfg || !spec || !out, GCOMP_ERR_INVALID, "gcomp_cv_plan_codec: NULL argument");
  memset(out, 0, sizeof *out);
  gcomp_codec *c = NULL;
  GCOMP_CHECK(gcomp_codec_create(spec, &c));
  gcomp_codec_info info = {.struct_size = sizeof info};
  int st = gcomp_codec_describe(c, &info);
  snprintf(out->run_spec, sizeof out->run_spec, "%s", spec);
  out->ef_momentum = info.ef_momentum;
  if (st == GCOMP_OK && info.error_feedback && info.sparse && !info.ef_momentum_given &&
      cfg->momentum_correction != GCOMP_CV_MC_OFF && cfg->momentum > 0) {
    char m[40], params[64];
    gcomp_dtoa(m, sizeof m, cfg->momentum);   /* 0.9 under any locale */
    snprintf(params, sizeof params, "momentum=%s,mask=%d", m,
             cfg->momentum_correction == GCOMP_CV_MC_MASKED);
    st = gcomp_codec_spec_with(c, "ef", params, out->run_spec, sizeof out->run_spec);
    if (st == GCOMP_ERR_NOMEM)
      st = gcomp_error_set(GCOMP_ERR_INVALID, __FILE__, __LINE__,
                           "codec '%s': too long with ef momentum added", spec);
    out->ef_momentum = cfg->momentum;
    out->corrected = 1;
  }
  gcomp_codec_destroy(c);
  GCOMP_CHECK(st);
  out->opt_momentum = out->ef_momentum > 0 ? 0 : cfg->momentum;
  return GCOMP_OK;
}

/* What gcomp_cv_setup_env asked for, applied to every run's communicators through a
 * gcomp_config (the environment is left as it is) */
static struct {
  int given;
  long long codec_min_bytes;
  char alpha_beta[256];
  char guard[128];   /* GCOMP_GUARD, "" for the environment's */
} cv_env;

/* A run's settings: the environment's, those of gcomp_cv_setup_env, and GCOMP_ALGO=algo */
static int run_config(const char *algo, gcomp_config **out) {
  GCOMP_CHECK(gcomp_config_create(out));
  char v[32];
  snprintf(v, sizeof v, "%lld", cv_env.codec_min_bytes);
  int st = GCOMP_OK;
  if (cv_env.given && cv_env.codec_min_bytes >= 0)
    st = gcomp_config_set(*out, "GCOMP_CODEC_MIN_BYTES", v);
  if (cv_env.given && st == GCOMP_OK) st = gcomp_config_set(*out, "GCOMP_CODEC", "none");
  if (cv_env.given && st == GCOMP_OK)
    st = gcomp_config_set(*out, "GCOMP_ALPHA_BETA", cv_env.alpha_beta);
  if (st == GCOMP_OK) st = gcomp_config_set(*out, "GCOMP_ALGO", algo);
  if (st == GCOMP_OK && cv_env.guard[0]) st = gcomp_config_set(*out, "GCOMP_GUARD", cv_env.guard);
  if (st < 0) {
    gcomp_config_destroy(*out);
    *out = NULL;
    return gcomp_error_trace(st, __FILE__, __LINE__);
  }
  return GCOMP_OK;
}

int gcomp_cv_setup_env(long long codec_min_bytes, const char *alpha_beta) {
  cv_env.given = 1;
  cv_env.codec_min_bytes = codec_min_bytes;
  snprintf(cv_env.alpha_beta, sizeof cv_env.alpha_beta, "%s",
           alpha_beta ? alpha_beta : "2,0.1,20,0.05");
  gcomp_config *probe = NULL;   /* a bad value is an error now, not at the first run */
  int st = run_config("auto", &probe);
  gcomp_config_destroy(probe);
  if (st < 0) cv_env.given = 0;
  return st;
}

int gcomp_cv_setup_guard(const char *spec) {
  snprintf(cv_env.guard, sizeof cv_env.guard, "%s", spec ? spec : "");
  gcomp_config *probe = NULL;   /* a bad spec is an error at the first communicator */
  int st = run_config("auto", &probe);
  gcomp_comm *c = NULL;
  if (st == GCOMP_OK) st = gcomp_comm_init_local(1, NULL, probe, &c);
  gcomp_comm_destroy(c);
  gcomp_config_destroy(probe);
  if (st < 0) cv_env.guard[0] = '\0';
  return st;
}

/* GCOMP_ALGO for this run's ranks. "auto" for a codec run means the library's compressed
 * algorithm for that codec (sparse for top-k, direct otherwise): the planner's choice
 * depends on measured codec speed, which would make runs irreproducible and could skip the
 * codec altogether. "planner" leaves the choice to the planner. */
static const char *select_algo(const char *algo, const gcomp_codec_info *codec) {
  const char *a = algo && *algo ? algo : "auto";
  if (codec && strcmp(a, "auto") == 0) a = codec->sparse ? "sparse" : "direct";
  if (strcmp(a, "planner") == 0) a = "auto";
  return a;
}

uint64_t gcomp_cv_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static pthread_once_t c_once = PTHREAD_ONCE_INIT;
static locale_t c_locale;
static void make_c_locale(void) { c_locale = newlocale(LC_ALL_MASK, "C", (locale_t)0); }

locale_t gcomp_cv_c_locale(void) {
  pthread_once(&c_once, make_c_locale);
  return c_locale ? c_locale : LC_GLOBAL_LOCALE;   /* (locale_t)0 only when out of memory */
}

void gcomp_cv_run_free(gcomp_cv_run *run) {
  if (!run) return;
  free(run->eval_step);
  free(run->train_loss);
  free(run->test_acc);
  free(run->drift);
  free(run->snap);
  free(run->step_loss);
  free(run->grad_relerr);
  free(run->grad_cos);
  free(run->theta);
  free(run->seed_loss);
  free(run->seed_acc);
  memset(run, 0, sizeof *run);
}

static void mean_into(double *acc, const double *x, size_t n, int k) {
  for (size_t i = 0; i < n; i++) acc[i] += (x[i] - acc[i]) / (k + 1);
}

int gcomp_cv_run_merge(gcomp_cv_run *acc, const gcomp_cv_run *x, int k) {
  GCOMP_FAIL_IF(k < 1 || acc->nseeds != k, GCOMP_ERR_INVALID,
                "merging seed %d into a merge of %d seeds", k, acc->nseeds);
  if (x->status < 0 || acc->status < 0) {   /* a failed seed fails the merge */
    if (acc->status >= 0) {
      acc->status = x->status;
      snprintf(acc->error, sizeof acc->error, "seed %d: %.480s", k, x->error);
    }
    acc->nseeds = k + 1;
    return GCOMP_OK;
  }
  GCOMP_FAIL_IF(x->neval != acc->neval || x->steps != acc->steps, GCOMP_ERR_INVALID,
                "merging runs of different lengths");
  double *sl = realloc(acc->seed_loss, (size_t)(k + 1) * sizeof *sl);
  if (sl) acc->seed_loss = sl;
  double *sa = sl ? realloc(acc->seed_acc, (size_t)(k + 1) * sizeof *sa) : NULL;
  if (sa) acc->seed_acc = sa;
  GCOMP_FAIL_IF(!sl || !sa, GCOMP_ERR_NOMEM, "per-seed results");
  if (k == 1) acc->seed_loss[0] = acc->final_loss, acc->seed_acc[0] = acc->final_acc;
  acc->seed_loss[k] = x->final_loss, acc->seed_acc[k] = x->final_acc;
  mean_into(acc->train_loss, x->train_loss, (size_t)acc->neval, k);
  mean_into(acc->test_acc, x->test_acc, (size_t)acc->neval, k);
  mean_into(acc->drift, x->drift, (size_t)acc->neval, k);
  mean_into(acc->step_loss, x->step_loss, (size_t)acc->steps, k);
  mean_into(acc->grad_relerr, x->grad_relerr, (size_t)acc->steps, k);
  mean_into(acc->grad_cos, x->grad_cos, (size_t)acc->steps, k);
  double *m[] = {&acc->final_loss, &acc->final_acc, &acc->final_train_acc, &acc->relerr_mean,
                 &acc->cos_mean, &acc->curve_gap, &acc->final_drift, &acc->moved_frac,
                 &acc->never_moved_frac};
  const double v[] = {x->final_loss, x->final_acc, x->final_train_acc, x->relerr_mean,
                      x->cos_mean, x->curve_gap, x->final_drift, x->moved_frac,
                      x->never_moved_frac};
  for (size_t i = 0; i < sizeof v / sizeof *v; i++) *m[i] += (v[i] - *m[i]) / (k + 1);
  if (x->relerr_max > acc->relerr_max) acc->relerr_max = x->relerr_max;
  if (x->max_drift > acc->max_drift) acc->max_drift = x->max_drift;
  if (x->cos_min < acc->cos_min) acc->cos_min = x->cos_min;
  acc->replicas_equal = acc->replicas_equal && x->replicas_equal;
  /* bytes: means too, so that ratios against the baseline stay per run */
  uint64_t *b[] = {&acc->wire_bytes, &acc->user_bytes, &acc->codec_in, &acc->codec_out};
  const uint64_t bx[] = {x->wire_bytes, x->user_bytes, x->codec_in, x->codec_out};
  for (size_t i = 0; i < 4; i++)
    *b[i] = (uint64_t)llround((double)*b[i] + ((double)bx[i] - (double)*b[i]) / (k + 1));
  acc->seconds += x->seconds;
  acc->guard_checks += x->guard_checks, acc->guard_fallbacks += x->guard_fallbacks;
  acc->guard_backoff_calls += x->guard_backoff_calls;
  if (x->guard_max_error > acc->guard_max_error) acc->guard_max_error = x->guard_max_error;
  acc->nseeds = k + 1;
  return GCOMP_OK;
}

typedef struct {
  const gcomp_cv_train_cfg *cfg;
  const gcomp_cv_data *data;
  const gcomp_cv_model *m;
  const char *spec;     /* the spec that runs (gcomp_cv_plan_codec), NULL: baseline */
  const gcomp_cv_run *base;
  gcomp_cv_run *run;
  float opt_mu;         /* the optimizer's momentum */
  double ef_mu;         /* the codec's error-feedback momentum (0: none) */
  double *mref;         /* [np] rank 0 with ef momentum: momentum of the exact averages */
  uint8_t *moved;       /* [np] rank 0: delivered nonzero at least once */
  uint64_t nmoved;      /* rank 0: nonzero values delivered, summed over steps */
  int W;
  size_t np;
  gcomp_comm **comms;   /* [W] simulated: the loopback ranks' communicators */
  pthread_barrier_t bar;
  /* the start gate: workers wait until every thread started (1) or one could not be (-1),
   * so a partial world never reaches the barrier */
  pthread_mutex_t gate_mu;
  pthread_cond_t gate_cv;
  int gate;
  float *local[2];      /* [W * np] each: the workers' gradients of even and odd steps */
  double *bloss[2];     /* [W] their minibatch losses */
  float *thetas;        /* [W * np] final replicas */
  atomic_int failed;
  int *status;          /* [W] */
  char (*error)[512];   /* [W] */
  gcomp_comm_stats *cstats;   /* [W] */
  gcomp_codec_stats *kstats;  /* [W] */
  float *eval_scratch;
  uint64_t t0;
  int real;             /* one process per worker (gcomp_comm_init_env), not threads */
  gcomp_comm *real_comm;
  int real_equal;       /* real mode: every rank ended with the same parameters */
} sim;

typedef struct {
  sim *s;
  int w;
} worker_arg;

static double dot_d(const float *a, const double *b, size_t n) {
  double s = 0;
  for (size_t i = 0; i < n; i++) s += (double)a[i] * b[i];
  return s;
}

/* Rank 0, between the allreduce and the update of step `step`: the gradient error of the
 * library's result g against the exact average. */
static void grad_metrics(gcomp_cv_run *r, int step, const float *g, const double *exact, size_t np) {
  double ee = 0, gg = 0, diff = 0;
  for (size_t i = 0; i < np; i++) {
    ee += exact[i] * exact[i];
    gg += (double)g[i] * g[i];
    double d = (double)g[i] - exact[i];
    diff += d * d;
  }
  double ge = dot_d(g, exact, np);
  r->grad_relerr[step] = ee > 0 ? sqrt(diff / ee) : sqrt(diff);
  r->grad_cos[step] = (ee > 0 && gg > 0) ? ge / sqrt(ee * gg) : (diff == 0 ? 1.0 : 0.0);
}

/* What the library's result is compared with: the exact average, or with momentum in the
 * codec (the workers send momentum, not gradients) the momentum of the exact averages, the
 * update the baseline's optimizer would apply to the same gradients. */
static void compare(sim *s, int step, const float *g, const double *exact) {
  for (size_t i = 0; i < s->np; i++)
    if (g[i] != 0) s->nmoved++, s->moved[i] = 1;
  if (!s->mref) {
    grad_metrics(s->run, step, g, exact, s->np);
    return;
  }
  for (size_t i = 0; i < s->np; i++) s->mref[i] = s->ef_mu * s->mref[i] + exact[i];
  grad_metrics(s->run, step, g, s->mref, s->np);
}

/* Simulated mode: the exact average is a plain serial sum (in double, in rank order) of
 * the copies the workers left in s->local. */
static void step_metrics(sim *s, int step, const float *g, double *exact) {
  size_t np = s->np;
  const float *loc = s->local[step & 1];
  memset(exact, 0, np * sizeof *exact);
  for (int w = 0; w < s->W; w++)
    for (size_t i = 0; i < np; i++) exact[i] += loc[(size_t)w * np + i];
  for (size_t i = 0; i < np; i++) exact[i] /= s->W;
  compare(s, step, g, exact);
  double l = 0;
  for (int w = 0; w < s->W; w++) l += s->bloss[step & 1][w];
  s->run->step_loss[step] = l / s->W;
}

static void evaluate(sim *s, int e, const float *theta) {
  const gcomp_cv_data *d = s->data;
  gcomp_cv_run *r = s->run;
  int correct = 0;
  int ntr = d->ntrain < GCOMP_CV_EVAL_ROWS ? d->ntrain : GCOMP_CV_EVAL_ROWS;
  r->train_loss[e] = gcomp_cv_model_loss(s->m, theta, d->xtrain, d->ytrain, ntr, NULL,
                                         s->eval_scratch, &correct);
  r->final_train_acc = (double)correct / ntr;
  gcomp_cv_model_loss(s->m, theta, d->xtest, d->ytest, d->ntest, NULL, s->eval_scratch, &correct);
  r->test_acc[e] = (double)correct / d->ntest;
  if (r->snap) memcpy(r->snap + (size_t)e * s->np, theta, s->np * sizeof *theta);
  if (s->base) {
    const float *b = s->base->snap + (size_t)e * s->np;
    double dd = 0, bb = 0;
    for (size_t i = 0; i < s->np; i++) {
      double x = (double)theta[i] - b[i];
      dd += x * x;
      bb += (double)b[i] * b[i];
    }
    r->drift[e] = bb > 0 ? sqrt(dd / bb) : sqrt(dd);
  }
}

static void progress_line(sim *s, int step) {
  static _Thread_local uint64_t last;
  uint64_t now = gcomp_cv_now_ns();
  if (step + 1 < s->cfg->steps && now - last < 500000000ull) return;
  last = now;
  fprintf(stderr, "\r  %-28s %-26.26s step %5d/%-5d loss %.4f  %5.1f s ", s->cfg->label,
          s->run->spec, step + 1, s->cfg->steps, s->run->step_loss[step],
          (double)(now - s->t0) * 1e-9);
  if (step + 1 == s->cfg->steps) fprintf(stderr, "\r%*s\r", 100, "");
  fflush(stderr);
}

static int fail_worker(sim *s, int w, int st, const char *what) {
  s->status[w] = st;
  snprintf(s->error[w], sizeof s->error[w], "rank %d: %s: %s: %s", w, what, gcomp_strerror(st),
           gcomp_last_error());
  atomic_store(&s->failed, 1);
  return st;
}

/* Real mode, after the last step: traffic summed over ranks and whether every rank holds
 * the same parameters (a hash of them, compared by max and min), for rank 0's report. */
static void real_totals(sim *s, int w, const float *theta) {
  gcomp_comm *comm = s->real_comm;
  int64_t sums[4] = {(int64_t)s->cstats[0].wire_bytes, (int64_t)s->cstats[0].bytes,
                     (int64_t)s->kstats[0].bytes_in, (int64_t)s->kstats[0].bytes_out};
  uint64_t h = 1469598103934665603ull;
  const unsigned char *b = (const unsigned char *)theta;
  for (size_t i = 0; i < s->np * sizeof(float); i++) h = (h ^ b[i]) * 1099511628211ull;
  int64_t hmax = (int64_t)(h >> 1), hmin = hmax;
  int st = gcomp_allreduce(comm, sums, sums, 4, GCOMP_INT64, GCOMP_SUM, NULL, 0);
  if (st == GCOMP_OK) st = gcomp_allreduce(comm, &hmax, &hmax, 1, GCOMP_INT64, GCOMP_MAX, NULL, 0);
  if (st == GCOMP_OK) st = gcomp_allreduce(comm, &hmin, &hmin, 1, GCOMP_INT64, GCOMP_MIN, NULL, 0);
  if (st < 0) {
    fail_worker(s, w, st, "the closing totals");
    return;
  }
  s->cstats[0].wire_bytes = (uint64_t)sums[0];
  s->cstats[0].bytes = (uint64_t)sums[1];
  s->kstats[0].bytes_in = (uint64_t)sums[2];
  s->kstats[0].bytes_out = (uint64_t)sums[3];
  s->real_equal = hmax == hmin;
}

/* One worker's training loop. Simulated: w is a thread's loopback rank, and the ranks meet
 * at a barrier every step so rank 0 can read everyone's gradient copy. Real: w is this
 * process's rank, and rank 0 gets the exact average from an fp64 allreduce of the same
 * copies (uncompressed, and in double: a reference, not the path under test). */
static void worker_body(sim *s, int w, gcomp_comm *comm, int st) {
  int W = s->W, B = s->cfg->batch;
  const gcomp_cv_train_cfg *cfg = s->cfg;
  const gcomp_cv_data *d = s->data;
  size_t np = s->np;
  gcomp_codec *codec = NULL;
  if (st == GCOMP_OK && s->spec) {   /* the baseline passes no codec: plain fp32 */
    st = gcomp_codec_create(s->spec, &codec);
    if (st < 0) fail_worker(s, w, st, "creating the codec");
  }
  /* the worker this rank plays: itself, or under a placement (a noise-floor twin) another's
   * shard and minibatch stream, so the same W gradients are added in another rank order */
  int id = gcomp_cv_placed_worker(cfg->placement, W, w), placed = id >= 0;
  if (!placed) id = w;   /* out of memory: reported with the buffers below */
  /* shard: every W-th training row from id; minibatches sampled without replacement */
  int nshard = (d->ntrain - id + W - 1) / W;
  if (nshard < 1) nshard = 1;
  int *order = malloc((size_t)nshard * sizeof *order);
  float *theta = malloc(np * sizeof *theta), *vel = calloc(np, sizeof *vel);
  float *grad = malloc(np * sizeof *grad);
  float *xb = malloc((size_t)B * (size_t)d->nfeat * sizeof *xb);
  int *yb = malloc((size_t)B * sizeof *yb);
  float *scratch = malloc(gcomp_cv_model_scratch(s->m, B) * sizeof *scratch);
  double *exact = w == 0 || s->real ? malloc((np + 1) * sizeof *exact) : NULL;
  if (st == GCOMP_OK && (!placed || !order || !theta || !vel || !grad || !xb || !yb || !scratch ||
                         ((w == 0 || s->real) && !exact)))
    st = fail_worker(s, w, gcomp_error_set(GCOMP_ERR_NOMEM, __FILE__, __LINE__, "worker"), "memory");
  /* everyone meets once, so a failed creation stops all ranks before the first collective */
  if (!s->real) pthread_barrier_wait(&s->bar);
  if (atomic_load(&s->failed)) goto out;

  for (int i = 0; i < nshard; i++) order[i] = (id + i * W) % d->ntrain;
  gcomp_cv_rng rng = gcomp_cv_rng_make(cfg->seed, 0x100 + (uint64_t)id);
  gcomp_cv_shuffle(&rng, order, nshard);
  int pos = 0, e = 0;
  const char *algo = "";
  uint64_t wire = 0, user = 0;
  size_t toff[4], tlen[4];   /* the tensors, for per-layer calls (the first, W1, is the largest) */
  int ntensor = gcomp_cv_model_tensors(s->m, toff, tlen);
  gcomp_cv_model_init(s->m, theta, cfg->seed);
  if (w == 0) evaluate(s, e++, theta);
  float mu = s->opt_mu, wd = (float)cfg->weight_decay;
  /* with momentum in the codec, weight decay joins the gradient before it, as in DGC, so
   * that it is part of the momentum as it is in the baseline's optimizer */
  float wd_in = s->ef_mu > 0 ? wd : 0.0f, wd_opt = s->ef_mu > 0 ? 0.0f : wd;

  for (int step = 0; step < cfg->steps; step++) {
    for (int b = 0; b < B; b++) {
      if (pos == nshard) {
        gcomp_cv_shuffle(&rng, order, nshard);
        pos = 0;
      }
      int row = order[pos++];
      memcpy(xb + (size_t)b * (size_t)d->nfeat, d->xtrain + (size_t)row * (size_t)d->nfeat,
             (size_t)d->nfeat * sizeof *xb);
      yb[b] = d->ytrain[row];
    }
    double loss = gcomp_cv_model_loss(s->m, theta, xb, yb, B, grad, scratch, NULL);
    if (wd_in != 0.0f)
      for (size_t i = 0; i < np; i++) grad[i] += wd_in * theta[i];
    if (s->real) {
      for (size_t i = 0; i < np; i++) exact[i] = grad[i];
      exact[np] = loss;
    } else {
      s->bloss[step & 1][w] = loss;
      memcpy(s->local[step & 1] + (size_t)w * np, grad, np * sizeof *grad);
    }
    gcomp_comm_stats before = {.struct_size = sizeof before}, after = {.struct_size = sizeof after};
    gcomp_comm_get_stats(comm, &before);
    if (cfg->per_layer) {   /* one call per tensor, as a framework hands them over */
      for (int t = 0; t < ntensor && st == GCOMP_OK; t++) {
        st = gcomp_allreduce(comm, grad + toff[t], grad + toff[t], tlen[t], GCOMP_FLOAT32,
                             cfg->op, codec, GRAD_KEY + (uint64_t)t);
        if (t == 0 && (w == 0 || s->real)) algo = gcomp_comm_last_algo(comm);
      }
    } else {
      st = gcomp_allreduce(comm, grad, grad, np, GCOMP_FLOAT32, cfg->op, codec, GRAD_KEY);
      if (w == 0 || s->real) algo = gcomp_comm_last_algo(comm);
    }
    if (st < 0) fail_worker(s, w, st, "gcomp_allreduce");
    gcomp_comm_get_stats(comm, &after);   /* the gradients' traffic only, not the reference's */
    wire += after.wire_bytes - before.wire_bytes;
    user += after.bytes - before.bytes;
    if (cfg->op == GCOMP_SUM)
      for (size_t i = 0; i < np; i++) grad[i] /= (float)W;
    if (s->real) {
      if (st < 0) break;
      st = gcomp_allreduce(comm, exact, exact, np + 1, GCOMP_FLOAT64, GCOMP_SUM, NULL, 0);
      if (st < 0) {
        fail_worker(s, w, st, "the fp64 reference allreduce");
        break;
      }
      if (w == 0) {
        for (size_t i = 0; i <= np; i++) exact[i] /= W;
        compare(s, step, grad, exact);
        s->run->step_loss[step] = exact[np];
      }
    } else {
      pthread_barrier_wait(&s->bar);
      if (atomic_load(&s->failed)) break;
      if (w == 0) step_metrics(s, step, grad, exact);
    }
    /* the schedule scales the step, not the gradient: with momentum in the codec, values
     * sent late are applied at the rate of the step that sends them, as in DGC */
    float lr = (float)gcomp_cv_lr_at(cfg, step);
    for (size_t i = 0; i < np; i++) {
      vel[i] = mu * vel[i] + grad[i] + wd_opt * theta[i];
      theta[i] -= lr * vel[i];
    }
    if (w == 0) {
      if (e < s->run->neval && s->run->eval_step[e] == step + 1) evaluate(s, e++, theta);
      if (cfg->progress) progress_line(s, step);
    }
  }
  if (!atomic_load(&s->failed)) {
    int slot = s->real ? 0 : w;
    memcpy(s->thetas + (size_t)slot * np, theta, np * sizeof *theta);
    s->cstats[slot].struct_size = sizeof s->cstats[slot];
    gcomp_comm_get_stats(comm, &s->cstats[slot]);
    s->cstats[slot].wire_bytes = wire;
    s->cstats[slot].bytes = user;
    s->kstats[slot].struct_size = sizeof s->kstats[slot];
    if (codec) gcomp_codec_get_stats(codec, &s->kstats[slot]);
    if (w == 0 || s->real) {
      snprintf(s->run->algo, sizeof s->run->algo, "%s", algo);
      gcomp_guard_stats g = {.struct_size = sizeof g};
      if (gcomp_comm_get_guard(comm, &g) == GCOMP_OK) {
        s->run->guard_checks = g.checks, s->run->guard_fallbacks = g.fallbacks;
        s->run->guard_backoff_calls = g.backoff_calls, s->run->guard_max_error = g.max_error;
      }
    }
    if (s->real) real_totals(s, w, theta);
  }
out:
  gcomp_codec_destroy(codec);
  free(order);
  free(theta);
  free(vel);
  free(grad);
  free(xb);
  free(yb);
  free(scratch);
  free(exact);
}

static void *worker_main(void *arg) {
  worker_arg *a = arg;
  sim *s = a->s;
  pthread_mutex_lock(&s->gate_mu);
  while (!s->gate) pthread_cond_wait(&s->gate_cv, &s->gate_mu);
  int go = s->gate > 0;
  pthread_mutex_unlock(&s->gate_mu);
  if (go) worker_body(s, a->w, s->comms[a->w], GCOMP_OK);
  gcomp_comm_destroy(s->comms[a->w]);   /* in-process ranks: does not wait for the others */
  s->comms[a->w] = NULL;
  return NULL;
}

static int alloc_run(gcomp_cv_run *r, const gcomp_cv_train_cfg *cfg, size_t np, int keep_snap) {
  int every = cfg->eval_every > 0 ? cfg->eval_every : 1;
  int neval = 1 + (cfg->steps + every - 1) / every;
  r->neval = neval;
  r->steps = cfg->steps;
  r->nparams = np;
  r->eval_step = malloc((size_t)neval * sizeof *r->eval_step);
  r->train_loss = calloc((size_t)neval, sizeof *r->train_loss);
  r->test_acc = calloc((size_t)neval, sizeof *r->test_acc);
  r->drift = calloc((size_t)neval, sizeof *r->drift);
  r->snap = keep_snap ? malloc((size_t)neval * np * sizeof *r->snap) : NULL;
  size_t ns = cfg->steps > 0 ? (size_t)cfg->steps : 1;
  r->step_loss = calloc(ns, sizeof *r->step_loss);
  r->grad_relerr = calloc(ns, sizeof *r->grad_relerr);
  r->grad_cos = calloc(ns, sizeof *r->grad_cos);
  r->theta = malloc(np * sizeof *r->theta);
  GCOMP_FAIL_IF(!r->eval_step || !r->train_loss || !r->test_acc || !r->drift ||
                    (keep_snap && !r->snap) || !r->step_loss || !r->grad_relerr || !r->grad_cos ||
                    !r->theta,
                GCOMP_ERR_NOMEM, "run buffers for %d evaluations of %zu parameters", neval, np);
  for (int e = 0; e < neval; e++) {
    int s = e * every;
    r->eval_step[e] = s < cfg->steps ? s : cfg->steps;
  }
  return GCOMP_OK;
}

static void summarise(sim *s) {
  gcomp_cv_run *r = s->run;
  size_t np = s->np;
  int W = s->W;
  r->replicas_equal = 1;
  for (int w = 1; w < W && !s->real; w++)
    if (memcmp(s->thetas, s->thetas + (size_t)w * np, np * sizeof(float)) != 0) r->replicas_equal = 0;
  if (s->real) r->replicas_equal = s->real_equal, W = 1;   /* totals already summed */
  memcpy(r->theta, s->thetas, np * sizeof(float));
  for (int w = 0; w < W; w++) {
    r->wire_bytes += s->cstats[w].wire_bytes;
    r->user_bytes += s->cstats[w].bytes;
    r->codec_in += s->kstats[w].bytes_in;
    r->codec_out += s->kstats[w].bytes_out;
  }
  int ne = r->neval;
  r->final_loss = r->train_loss[ne - 1];
  r->final_acc = r->test_acc[ne - 1];
  r->final_drift = r->drift[ne - 1];
  r->relerr_mean = r->relerr_max = r->cos_mean = 0;
  r->cos_min = 1;
  for (int i = 0; i < r->steps; i++) {
    r->relerr_mean += r->grad_relerr[i];
    r->cos_mean += r->grad_cos[i];
    if (r->grad_relerr[i] > r->relerr_max) r->relerr_max = r->grad_relerr[i];
    if (r->grad_cos[i] < r->cos_min) r->cos_min = r->grad_cos[i];
  }
  if (r->steps) r->relerr_mean /= r->steps, r->cos_mean /= r->steps;
  size_t never = 0;
  for (size_t i = 0; i < np; i++) never += !s->moved[i];
  r->moved_frac = r->steps && np ? (double)s->nmoved / ((double)r->steps * (double)np) : 0;
  r->never_moved_frac = np ? (double)never / (double)np : 0;
  r->max_drift = 0;
  for (int e = 0; e < ne; e++)
    if (r->drift[e] > r->max_drift) r->max_drift = r->drift[e];
  r->curve_gap = s->base ? gcomp_cv_curve_gap(r->eval_step, r->train_loss, s->base->train_loss, ne)
                         : 0;
}

static int train(const gcomp_cv_train_cfg *cfg, const gcomp_cv_data *data,
                 const gcomp_cv_model *model, const char *spec, const gcomp_cv_run *base,
                 gcomp_cv_run *run) {
  snprintf(run->spec, sizeof run->spec, "%s", spec ? spec : "baseline");
  GCOMP_FAIL_IF(cfg->workers < 1 || cfg->workers > 1024, GCOMP_ERR_INVALID,
                "workers %d out of range [1, 1024]", cfg->workers);
  GCOMP_FAIL_IF(cfg->steps < 1 || cfg->batch < 1, GCOMP_ERR_INVALID, "steps %d and batch %d must be >= 1",
                cfg->steps, cfg->batch);
  GCOMP_FAIL_IF(cfg->placement < 0, GCOMP_ERR_INVALID, "placement %d must be >= 0",
                cfg->placement);
  GCOMP_FAIL_IF(model->nin != data->nfeat || model->nout != data->nclass, GCOMP_ERR_INVALID,
                "model shape %dx%d does not fit data %dx%d", model->nin, model->nout, data->nfeat,
                data->nclass);
  size_t np = model->nparams;
  if (base) {
    /* the same evaluation points too: drift and curve gap read the baseline's at each */
    int every = cfg->eval_every > 0 ? cfg->eval_every : 1;
    int same_evals = base->neval == 1 + (cfg->steps + every - 1) / every;
    for (int e = 0; same_evals && e < base->neval; e++)
      same_evals = base->eval_step[e] == (e * every < cfg->steps ? e * every : cfg->steps);
    GCOMP_FAIL_IF(!base->snap || base->nparams != np || base->steps != cfg->steps ||
                      !same_evals,
                  GCOMP_ERR_INVALID, "baseline run does not match this problem (parameters, "
                  "steps and evaluation points must be the same)");
  }

  /* the spec must be one the library knows: a clear error before any thread starts */
  gcomp_cv_codec_plan plan = {.opt_momentum = cfg->momentum};
  gcomp_codec_info info = {.struct_size = sizeof info, .kind = "none"};
  if (spec) {
    gcomp_codec *probe = NULL;
    int pst = gcomp_cv_plan_codec(cfg, spec, &plan);
    if (pst == GCOMP_OK) pst = gcomp_codec_create(plan.run_spec, &probe);
    if (pst < 0) {
      run->status = pst;
      snprintf(run->error, sizeof run->error, "codec '%s': %s", spec, gcomp_last_error());
      return gcomp_error_restore(pst, run->error);
    }
    gcomp_codec_spec(probe, run->canon, sizeof run->canon);
    pst = gcomp_codec_describe(probe, &info);
    gcomp_codec_destroy(probe);
    GCOMP_CHECK(pst);
  } else {
    snprintf(run->spec, sizeof run->spec, "baseline");
    snprintf(run->canon, sizeof run->canon, "(no codec: fp32)");
  }
  run->ef_momentum = plan.ef_momentum;
  run->opt_momentum = plan.opt_momentum;
  run->corrected = plan.corrected;
  gcomp_config *config = NULL;
  GCOMP_CHECK(run_config(select_algo(spec ? cfg->algo : "auto", spec ? &info : NULL), &config));
  int W = cfg->workers, rank = 0;
  gcomp_comm *rcomm = NULL;
  if (cfg->real) {   /* this process is one worker; the launcher made the others */
    int rst = gcomp_comm_init_env_config(config, &rcomm);
    if (rst < 0) gcomp_config_destroy(config);
    GCOMP_CHECK(rst);
    W = gcomp_comm_size(rcomm);
    rank = gcomp_comm_rank(rcomm);
  }
  run->workers = W;
  run->rank = rank;
  if (data->ntrain < W) {
    gcomp_config_destroy(config);
    gcomp_comm_destroy(rcomm);
    GCOMP_FAIL(GCOMP_ERR_INVALID, "%d training rows cannot feed %d workers", data->ntrain, W);
  }
  if (cfg->batch > data->ntrain / W) {   /* a minibatch would repeat the shard's rows */
    gcomp_config_destroy(config);
    gcomp_comm_destroy(rcomm);
    GCOMP_FAIL(GCOMP_ERR_INVALID, "batch %d is larger than a worker's shard: %d training rows "
               "over %d workers leave %d each", cfg->batch, data->ntrain, W, data->ntrain / W);
  }
  int st = alloc_run(run, cfg, np, base == NULL);
  if (st < 0) {
    gcomp_config_destroy(config);
    gcomp_comm_destroy(rcomm);
    return st;
  }
  sim s = {.cfg = cfg, .data = data, .m = model, .spec = spec ? plan.run_spec : NULL,
           .base = base, .run = run, .opt_mu = (float)plan.opt_momentum,
           .ef_mu = plan.ef_momentum, .W = W, .np = np, .real = cfg->real, .real_comm = rcomm};
  size_t Ws = cfg->real ? 1 : (size_t)W;   /* per-worker slots kept in this process */
  s.comms = calloc(Ws, sizeof *s.comms);
  s.local[0] = malloc(Ws * np * sizeof(float));
  s.local[1] = malloc(Ws * np * sizeof(float));
  s.bloss[0] = calloc(Ws, sizeof(double));
  s.bloss[1] = calloc(Ws, sizeof(double));
  s.thetas = malloc(Ws * np * sizeof(float));
  s.status = calloc((size_t)W, sizeof *s.status);
  s.error = calloc((size_t)W, sizeof *s.error);
  s.cstats = calloc(Ws, sizeof *s.cstats);
  s.kstats = calloc(Ws, sizeof *s.kstats);
  int rows = data->ntrain < GCOMP_CV_EVAL_ROWS ? data->ntrain : GCOMP_CV_EVAL_ROWS;
  if (data->ntest > rows) rows = data->ntest;
  s.eval_scratch = malloc(gcomp_cv_model_scratch(model, rows) * sizeof(float));
  if (s.ef_mu > 0) s.mref = calloc(np, sizeof *s.mref);
  s.moved = calloc(np, 1);
  pthread_t *th = calloc((size_t)W, sizeof *th);
  worker_arg *args = calloc((size_t)W, sizeof *args);
  if (!s.comms || !s.local[0] || !s.local[1] || !s.bloss[0] || !s.bloss[1] || !s.thetas ||
      !s.status ||
      !s.error || !s.cstats || !s.kstats || !s.eval_scratch || !th || !args || !s.moved ||
      (s.ef_mu > 0 && !s.mref))
    st = gcomp_error_set(GCOMP_ERR_NOMEM, __FILE__, __LINE__, "simulation of %d workers", W);
  if (st == GCOMP_OK && cfg->real) {
    s.t0 = gcomp_cv_now_ns();
    worker_body(&s, rank, rcomm, GCOMP_OK);
    run->seconds = (double)(gcomp_cv_now_ns() - s.t0) * 1e-9;
  }
  gcomp_comm_destroy(rcomm);
  if (st == GCOMP_OK && !cfg->real) {
    s.t0 = gcomp_cv_now_ns();   /* the run's time includes creating its communicators */
    st = gcomp_comm_init_local(W, NULL, config, s.comms);
  }
  gcomp_config_destroy(config);   /* the communicators hold copies */
  int started = 0;
  if (st == GCOMP_OK && !cfg->real) {
    pthread_barrier_init(&s.bar, NULL, (unsigned)W);
    pthread_mutex_init(&s.gate_mu, NULL);
    pthread_cond_init(&s.gate_cv, NULL);
    for (; started < W; started++) {
      args[started] = (worker_arg){&s, started};
      if (pthread_create(&th[started], NULL, worker_main, &args[started]) != 0) break;
    }
    pthread_mutex_lock(&s.gate_mu);
    s.gate = started == W ? 1 : -1;   /* a partial world would wait at the barrier forever */
    pthread_cond_broadcast(&s.gate_cv);
    pthread_mutex_unlock(&s.gate_mu);
    for (int w = 0; w < started; w++) pthread_join(th[w], NULL);
    for (int w = started; w < W; w++) {   /* the workers that never ran: theirs to destroy */
      gcomp_comm_destroy(s.comms[w]);
      s.comms[w] = NULL;
    }
    if (started < W)
      st = gcomp_error_set(GCOMP_ERR_NOMEM, __FILE__, __LINE__,
                           "could start only %d of %d worker threads", started, W);
    pthread_cond_destroy(&s.gate_cv);
    pthread_mutex_destroy(&s.gate_mu);
    pthread_barrier_destroy(&s.bar);
    run->seconds = (double)(gcomp_cv_now_ns() - s.t0) * 1e-9;
  }
  if (st == GCOMP_OK && atomic_load(&s.failed)) {
    int w = 0;
    while (w < W && s.status[w] == GCOMP_OK) w++;
    st = w < W ? s.status[w] : GCOMP_ERR_INVALID;
    snprintf(run->error, sizeof run->error, "codec '%s': %s", run->spec,
             w < W ? s.error[w] : "a worker failed");
    gcomp_error_restore(st, run->error);
  } else if (st == GCOMP_OK) {
    summarise(&s);
    /* a lossy codec the planner declined to use would "pass" without being tested (the
     * guard's backoff after a fallback is no such refusal) */
    if (spec && strcmp(info.kind, "none") != 0 && gcomp_algo_compresses(run->algo) != 1 &&
        run->guard_fallbacks == 0) {
      st = gcomp_error_set(GCOMP_ERR_UNSUPPORTED, __FILE__, __LINE__,
                           "codec '%s': the library ran '%s', an uncompressed algorithm, so the "
                           "codec was never exercised (check GCOMP_CODEC_MIN_BYTES and --algo)",
                           spec, run->algo);
      snprintf(run->error, sizeof run->error, "%s", gcomp_last_error());
    }
  } else {
    snprintf(run->error, sizeof run->error, "codec '%s': %s", run->spec, gcomp_last_error());
  }
  run->status = st;
  free(s.comms);
  free(s.local[0]);
  free(s.local[1]);
  free(s.bloss[0]);
  free(s.bloss[1]);
  free(s.thetas);
  free(s.status);
  free(s.error);
  free(s.cstats);
  free(s.kstats);
  free(s.eval_scratch);
  free(s.mref);
  free(s.moved);
  free(th);
  free(args);
  return st;
}

int gcomp_cv_train(const gcomp_cv_train_cfg *cfg, const gcomp_cv_data *data,
                   const gcomp_cv_model *model, const char *spec, const gcomp_cv_run *base,
                   gcomp_cv_run *run) {
  GCOMP_FAIL_IF(!cfg || !data || !model || !run, GCOMP_ERR_INVALID, "gcomp_cv_train: NULL argument");
  memset(run, 0, sizeof *run);
  run->nseeds = 1;
  int st = train(cfg, data, model, spec, base, run);
  if (st < 0) {   /* every failure leaves its reason in the run, for the reports */
    run->status = st;
    if (!run->error[0]) snprintf(run->error, sizeof run->error, "%s", gcomp_last_error());
  }
  return st;
}

int gcomp_cv_placed_worker(int placement, int W, int rank) {
  if (W < 1 || rank < 0 || rank >= W) return -1;
  if (placement <= 0 || W < 2) return rank;
  int *perm = malloc((size_t)W * sizeof *perm);   /* a --real job may have any size */
  if (!perm) return -1;
  for (int i = 0; i < W; i++) perm[i] = i;
  gcomp_cv_rng r = gcomp_cv_rng_make((uint64_t)placement, 0x706c616365ull);   /* "place" */
  gcomp_cv_shuffle(&r, perm, W);
  int id = perm[rank];
  free(perm);
  return id;
}

/* the same final parameters, bitwise: the same sums at every step */
static int same_theta(const gcomp_cv_run *a, const gcomp_cv_run *b) {
  return a->theta && b->theta && a->nparams == b->nparams &&
         memcmp(a->theta, b->theta, a->nparams * sizeof(float)) == 0;
}

/* A few steps of placement k, to see whether it adds in a new order before paying for the
 * whole run. Its replicas must agree: in --real mode every rank decides on its own copy. */
enum { PROBE_STEPS = 2 };
static int probe(const gcomp_cv_train_cfg *cfg, const gcomp_cv_data *data,
                 const gcomp_cv_model *model, int placement, gcomp_cv_run *out) {
  gcomp_cv_train_cfg c = *cfg;
  c.placement = placement;
  c.steps = cfg->steps < PROBE_STEPS ? cfg->steps : PROBE_STEPS;
  c.eval_every = 1;
  c.progress = 0;
  int st = gcomp_cv_train(&c, data, model, NULL, NULL, out);
  GCOMP_FAIL_IF(st == GCOMP_OK && !out->replicas_equal, GCOMP_ERR_INVALID,
                "placement %d's probe: the workers' replicas differ", placement);
  return st;
}

int gcomp_cv_train_twins(const gcomp_cv_train_cfg *cfg, const gcomp_cv_data *data,
                         const gcomp_cv_model *model, const gcomp_cv_run *base, int n, int fixed,
                         int *placements, gcomp_cv_run *twins) {
  GCOMP_FAIL_IF(!cfg || !data || !model || !base || !placements || !twins, GCOMP_ERR_INVALID,
                "gcomp_cv_train_twins: NULL argument");
  GCOMP_FAIL_IF(n < 2 || n > GCOMP_CV_MAX_TWINS, GCOMP_ERR_INVALID,
                "%d noise-floor twins: 2 to %d (one says nothing about a spread)", n,
                GCOMP_CV_MAX_TWINS);
  /* replicas_equal is agreed by all ranks in --real mode, the copies compared below are not:
   * with a baseline whose replicas differ, ranks could choose different twins and hang */
  GCOMP_FAIL_IF(base->status < 0 || !base->theta || !base->replicas_equal, GCOMP_ERR_INVALID,
                "noise-floor twins need a finished baseline whose workers agree");
  /* diverged: decided on the parameters, which every rank holds alike (in --real mode only
   * rank 0 evaluates the loss, so deciding on it would split the ranks) */
  int finite = 1;
  for (size_t i = 0; finite && i < base->nparams; i++) finite = isfinite(base->theta[i]);
  GCOMP_FAIL_IF(!finite, GCOMP_ERR_INVALID,
                "the baseline diverged (non-finite parameters): no noise floor to measure");
  GCOMP_FAIL_IF(base->workers < 3, GCOMP_ERR_INVALID, "noise-floor twins need 3 or more "
                "workers: %d add in one order wherever they sit", base->workers);
  memset(twins, 0, (size_t)n * sizeof *twins);
  gcomp_cv_run probes[GCOMP_CV_MAX_TWINS + 1];   /* [0] the baseline's, then the kept ones' */
  memset(probes, 0, sizeof probes);
  int have = 0, tries = fixed ? n : 4 * n + 8, st = GCOMP_OK;
  char err[600] = "";
  if (!fixed && (st = probe(cfg, data, model, 0, &probes[0])) < 0)
    snprintf(err, sizeof err, "the baseline's probe failed: %s", gcomp_last_error());
  for (int k = 0; st == GCOMP_OK && k < tries && have < n; k++) {
    gcomp_cv_train_cfg c = *cfg;
    c.placement = fixed ? placements[k] : k + 1;
    if (!fixed) {   /* same sums in the first steps: the same tree, most likely; skip it */
      gcomp_cv_run *pr = &probes[have + 1];
      if ((st = probe(cfg, data, model, c.placement, pr)) < 0) {
        snprintf(err, sizeof err, "placement %d's probe failed: %s", c.placement,
                 gcomp_last_error());
        break;
      }
      int seen = 0;
      for (int j = 0; !seen && j <= have; j++) seen = same_theta(pr, &probes[j]);
      if (seen) {
        gcomp_cv_run_free(pr);
        continue;
      }
    }
    gcomp_cv_run *t = &twins[have];
    st = gcomp_cv_train(&c, data, model, NULL, base, t);
    snprintf(t->spec, sizeof t->spec, "fp32, placement %d", c.placement);
    if (st < 0) {
      snprintf(err, sizeof err, "noise-floor twin (placement %d) failed: %s", c.placement,
               t->error);
      break;
    }
    if (!t->replicas_equal) {   /* fp32 whose ranks disagree: a library bug, never a yardstick */
      st = GCOMP_ERR_INVALID;
      snprintf(err, sizeof err, "noise-floor twin (placement %d): the workers' replicas differ",
               c.placement);
      break;
    }
    /* a placement the algorithm adds in the same pairs as the baseline or an earlier twin
     * (a butterfly's tree ignores some permutations) repeats it bitwise: no new sample */
    int dup = same_theta(t, base) ? 0 : -1;
    for (int j = 0; dup < 0 && j < have; j++)
      if (same_theta(t, &twins[j])) dup = j + 1;
    if (dup >= 0) {
      if (fixed) {
        st = GCOMP_ERR_INVALID;
        snprintf(err, sizeof err, "noise-floor twin (placement %d) repeats %s bitwise for seed "
                 "%llu", c.placement, dup == 0 ? "the baseline" : twins[dup - 1].spec,
                 (unsigned long long)cfg->seed);
        break;
      }
      gcomp_cv_run_free(t);
      gcomp_cv_run_free(&probes[have + 1]);
      continue;
    }
    placements[have++] = c.placement;
  }
  for (int j = 0; j <= GCOMP_CV_MAX_TWINS; j++) gcomp_cv_run_free(&probes[j]);
  if (st == GCOMP_OK && have < n) {
    st = GCOMP_ERR_INVALID;
    snprintf(err, sizeof err, "%d workers gave %d distinct fp32 orders in %d placements, fewer "
             "than the %d noise-floor twins asked for (the algorithm adds them in few distinct "
             "trees; ask for fewer)", base->workers, have, tries, n);
  }
  if (st < 0) {
    for (int j = 0; j <= have && j < n; j++) gcomp_cv_run_free(&twins[j]);
    return gcomp_error_set(GCOMP_ERR_INVALID, __FILE__, __LINE__, "%s", err);
  }
  return GCOMP_OK;
}
