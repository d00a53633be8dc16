/* Tolerances: built-in defaults per codec class, overridden by rules ("PATTERN key=value")
 * from flags or a file, and the verdict that compares a run with its baseline. */
#include <errno.h>
#include <fnmatch.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdarg.h>
#include <string.h>

#include "converge.h"
#include "cv_check.h"

typedef struct {
  char pattern[128];
  gcomp_cv_tol tol;   /* NAN: not set by this rule */
} rule;

struct gcomp_cv_tolset {
  rule *rules;
  int n, cap;
};

int gcomp_cv_tolset_create(gcomp_cv_tolset **out) {
  *out = calloc(1, sizeof **out);
  GCOMP_FAIL_IF(!*out, GCOMP_ERR_NOMEM, "tolerance set");
  return GCOMP_OK;
}

void gcomp_cv_tolset_destroy(gcomp_cv_tolset *ts) {
  if (!ts) return;
  free(ts->rules);
  free(ts);
}

/* The kind's name: "topk" of "topk:ratio=0.01+ef". */
static void kind_of(const char *spec, char *kind, size_t n) {
  size_t len = strcspn(spec, ":+");
  if (len >= n) len = n - 1;
  memcpy(kind, spec, len);
  kind[len] = '\0';
}

gcomp_cv_tol gcomp_cv_tol_default(const char *canon, const char **cls) {
  char kind[32];
  kind_of(canon, kind, sizeof kind);
  int ef = strstr(canon, "+ef") != NULL;
  const char *c;
  gcomp_cv_tol t;
  if (strcmp(kind, "none") == 0) {
    /* identity: anything but the baseline's numbers is a bug, up to summation order */
    c = "exact", t = (gcomp_cv_tol){0.1, 0.001, 0.001, 1e-3};
  } else if (strcmp(kind, "fp16") == 0 || strcmp(kind, "bf16") == 0 ||
             strcmp(kind, "test_biased") == 0) {
    c = "cast", t = (gcomp_cv_tol){0.5, 0.01, 0.02, INFINITY};
  } else if (strcmp(kind, "topk") == 0) {
    c = ef ? "topk+ef" : "topk", t = (gcomp_cv_tol){1.0, 0.10, INFINITY, INFINITY};
  } else {
    c = "other", t = (gcomp_cv_tol){1.0, 0.05, INFINITY, INFINITY};
  }
  if (cls) *cls = c;
  return t;
}

static int parse_value(const char *key, const char *val, const char *where, double *out) {
  if (strcmp(val, "inf") == 0 || strcmp(val, "off") == 0) {
    *out = INFINITY;
    return GCOMP_OK;
  }
  errno = 0;
  char *end = NULL;
  double v = gcomp_strtod(val, &end);   /* 0.5 under any locale */
  GCOMP_FAIL_IF(errno || end == val || *end || !(v >= 0), GCOMP_ERR_INVALID,
                "%s: tolerance %s='%s' is not a non-negative number or 'inf'", where, key, val);
  *out = v;
  return GCOMP_OK;
}

int gcomp_cv_tolset_add(gcomp_cv_tolset *ts, const char *text, const char *where) {
  char buf[512];
  GCOMP_FAIL_IF(strlen(text) >= sizeof buf, GCOMP_ERR_INVALID, "%s: tolerance rule too long", where);
  strcpy(buf, text);
  char *p = buf;
  while (*p == ' ' || *p == '\t') p++;
  char *pat = p;
  p += strcspn(p, " \t");
  GCOMP_FAIL_IF(!*p, GCOMP_ERR_INVALID,
                "%s: tolerance rule '%s' needs 'PATTERN key=value[,key=value]' (keys: acc, loss, "
                "gap, drift)", where, text);
  *p++ = '\0';
  rule r = {.tol = {NAN, NAN, NAN, NAN}};
  GCOMP_FAIL_IF(strlen(pat) >= sizeof r.pattern, GCOMP_ERR_INVALID, "%s: pattern too long", where);
  strcpy(r.pattern, pat);
  for (char *tok = strtok(p, ", \t"); tok; tok = strtok(NULL, ", \t")) {
    char *eq = strchr(tok, '=');
    GCOMP_FAIL_IF(!eq, GCOMP_ERR_INVALID, "%s: '%s' is not key=value (keys: acc, loss, gap, drift)",
                  where, tok);
    *eq = '\0';
    double v = 0;
    GCOMP_CHECK(parse_value(tok, eq + 1, where, &v));
    if (strcmp(tok, "acc") == 0)
      r.tol.acc_pts = v;
    else if (strcmp(tok, "loss") == 0)
      r.tol.loss_rel = v;
    else if (strcmp(tok, "gap") == 0)
      r.tol.gap_rel = v;
    else if (strcmp(tok, "drift") == 0)
      r.tol.drift = v;
    else
      GCOMP_FAIL(GCOMP_ERR_INVALID, "%s: unknown tolerance '%s' (valid: acc, loss, gap, drift)",
                 where, tok);
  }
  if (ts->n == ts->cap) {
    int ncap = ts->cap ? 2 * ts->cap : 8;
    rule *nr = realloc(ts->rules, (size_t)ncap * sizeof *nr);
    GCOMP_FAIL_IF(!nr, GCOMP_ERR_NOMEM, "tolerance rules");
    ts->rules = nr, ts->cap = ncap;
  }
  ts->rules[ts->n++] = r;
  return GCOMP_OK;
}

int gcomp_cv_tolset_load(gcomp_cv_tolset *ts, const char *path) {
  FILE *f = fopen(path, "r");
  GCOMP_FAIL_IF(!f, GCOMP_ERR_INVALID, "%s: cannot open: %s", path, strerror(errno));
  char line[512], where[600];
  int lineno = 0, st = GCOMP_OK;
  while (st == GCOMP_OK && fgets(line, sizeof line, f)) {
    lineno++;
    if (!strchr(line, '\n') && !feof(f)) {   /* its tail would be read as another rule */
      st = gcomp_error_set(GCOMP_ERR_INVALID, __FILE__, __LINE__,
                           "%s:%d: line longer than %zu characters", path, lineno,
                           sizeof line - 2);
      break;
    }
    line[strcspn(line, "#\r\n")] = '\0';   /* comments */
    char *p = line;
    while (*p == ' ' || *p == '\t') p++;
    if (!*p) continue;
    snprintf(where, sizeof where, "%s:%d", path, lineno);
    st = gcomp_cv_tolset_add(ts, p, where);
  }
  fclose(f);
  return st;
}

gcomp_cv_tol gcomp_cv_tol_for(const gcomp_cv_tolset *ts, const char *spec, const char *canon) {
  gcomp_cv_tol t = gcomp_cv_tol_default(canon && *canon ? canon : spec, NULL);
  for (int i = 0; ts && i < ts->n; i++) {
    const rule *r = &ts->rules[i];
    if (fnmatch(r->pattern, spec, 0) != 0 && !(canon && fnmatch(r->pattern, canon, 0) == 0))
      continue;
    if (!isnan(r->tol.acc_pts)) t.acc_pts = r->tol.acc_pts;
    if (!isnan(r->tol.loss_rel)) t.loss_rel = r->tol.loss_rel;
    if (!isnan(r->tol.gap_rel)) t.gap_rel = r->tol.gap_rel;
    if (!isnan(r->tol.drift)) t.drift = r->tol.drift;
  }
  return t;
}

static void add_why(gcomp_cv_verdict *v, const char *fmt, ...) GCOMP_PRINTF(2, 3);
static void add_why(gcomp_cv_verdict *v, const char *fmt, ...) {
  size_t len = strlen(v->why);
  if (len && len < sizeof v->why - 2) {
    strcpy(v->why + len, "; ");
    len += 2;
  }
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(v->why + len, sizeof v->why - len, fmt, ap);
  va_end(ap);
}

/* Student's t, one-sided 99%, by degrees of freedom 1..GCOMP_CV_MAX_TWINS */
static const double t99[GCOMP_CV_MAX_TWINS] = {31.821, 6.965, 4.541, 3.747,
                                               3.365,  3.143, 2.998, 2.896};

double gcomp_cv_t99(int df) {
  return df >= 1 && df <= GCOMP_CV_MAX_TWINS ? t99[df - 1] : NAN;
}

const char *gcomp_cv_metric_names(unsigned bits, char *buf, size_t n) {
  static const char *const names[4] = {"accuracy", "final loss", "curve gap", "drift"};
  size_t len = 0;
  if (!n) return buf;
  buf[0] = '\0';
  for (int m = 0; m < 4; m++)
    if (bits & (1u << m)) {
      int w = snprintf(buf + len, n - len, "%s%s", len ? ", " : "", names[m]);
      if (w < 0 || (size_t)w >= n - len) {   /* whole names only */
        buf[len] = '\0';
        break;
      }
      len += (size_t)w;
    }
  return buf;
}

int gcomp_cv_floor_measure(const gcomp_cv_run *base, const gcomp_cv_run *twins,
                           const int *placements, int n, gcomp_cv_floor *out) {
  memset(out, 0, sizeof *out);
  GCOMP_FAIL_IF(n < 2 || n > GCOMP_CV_MAX_TWINS, GCOMP_ERR_INVALID,
                "%d noise-floor twins (2 to %d)", n, GCOMP_CV_MAX_TWINS);
  GCOMP_FAIL_IF(base->status < 0, GCOMP_ERR_INVALID, "the baseline failed: %s", base->error);
  int no_acc = base->logged && isnan(base->final_acc);   /* a log without accuracy */
  GCOMP_FAIL_IF((!no_acc && !isfinite(base->final_acc)) || !isfinite(base->final_loss),
                GCOMP_ERR_INVALID, "the baseline has no finite final metrics (it diverged)");
  double ss[2] = {0, 0};                 /* acc, loss: sums of squares */
  double amt[2][GCOMP_CV_MAX_TWINS];     /* gap, drift of each twin */
  for (int i = 0; i < n; i++) {
    const gcomp_cv_run *t = &twins[i];
    GCOMP_FAIL_IF(t->status < 0, GCOMP_ERR_INVALID,
                  "noise-floor twin (%s %d) failed: %s", t->logged ? "seed" : "placement",
                  placements[i], t->error);
    double acc = no_acc ? 0 : (t->final_acc - base->final_acc) * 100;
    double dl = t->final_loss - base->final_loss;
    double loss = dl == 0 ? 0 : dl / base->final_loss;   /* 0 / 0 is no deviation */
    /* logged twins have no parameters: their drift is not measured, nor judged */
    const double x[4] = {acc, loss, t->curve_gap, t->logged ? 0 : t->final_drift};
    for (int m = 0; m < 4; m++)   /* a NaN must not hide in the floor */
      GCOMP_FAIL_IF(!isfinite(x[m]), GCOMP_ERR_INVALID, "noise-floor twin (%s %d) has "
                    "no finite metrics", t->logged ? "seed" : "placement", placements[i]);
    ss[0] += acc * acc, ss[1] += loss * loss;
    amt[0][i] = x[2], amt[1][i] = x[3];
    out->placements[i] = placements[i];
  }
  /* signed deviations around the baseline: n degrees of freedom */
  out->acc_pts = gcomp_cv_t99(n) * sqrt(ss[0] / n);
  out->loss_rel = gcomp_cv_t99(n) * sqrt(ss[1] / n);
  /* amounts: mean and spread estimated, n - 1 degrees of freedom */
  double b[2];
  for (int m = 0; m < 2; m++) {
    double mean = 0, var = 0;
    for (int i = 0; i < n; i++) mean += amt[m][i] / n;
    for (int i = 0; i < n; i++) var += (amt[m][i] - mean) * (amt[m][i] - mean) / (n - 1);
    b[m] = mean + gcomp_cv_t99(n - 1) * sqrt(var) * sqrt(1 + 1.0 / n);
  }
  out->gap_rel = b[0];
  out->drift = b[1];
  out->n = n;
  return GCOMP_OK;
}

/* " + noise floor 0.70" when there is a floor: the limit the metric was held to */
static const char *floor_part(char *buf, size_t n, const gcomp_cv_floor *fl, double x,
                              const char *fmt) {
  buf[0] = '\0';
  if (fl && fl->n > 0) {
    char num[32];
    snprintf(num, sizeof num, fmt, x);
    snprintf(buf, n, " + noise floor %s", num);
  }
  return buf;
}

/* ---- what the rows resolve ------------------------------------------------------------ */
double gcomp_cv_mcnemar_p(int lost, int gained) {
  if (lost <= 0) return 1.0;
  int n = lost + (gained > 0 ? gained : 0);
  /* P(X >= lost), X ~ Bin(n, 1/2): the terms in logs (n can be tens of thousands of rows) */
  double p = 0, lnorm = lgamma(n + 1.0) - n * log(2.0);
  for (int k = lost; k <= n; k++) p += exp(lnorm - lgamma(k + 1.0) - lgamma(n - k + 1.0));
  return p < 1 ? p : 1;
}

int gcomp_cv_mcnemar_min_rows(double alpha) {
  int k = 1;
  while (k < 64 && gcomp_cv_mcnemar_p(k, 0) > alpha) k++;
  return k;
}

int gcomp_cv_pair(const gcomp_cv_model *m, const gcomp_cv_data *d, const gcomp_cv_run *base,
                  const gcomp_cv_run *run, gcomp_cv_paired *acc) {
  GCOMP_FAIL_IF(base->status < 0 || run->status < 0 || !base->theta || !run->theta,
                GCOMP_ERR_INVALID, "pairing '%s' with its baseline: a run did not finish",
                run->spec);
  GCOMP_FAIL_IF(base->nparams != m->nparams || run->nparams != m->nparams || m->nin != d->nfeat,
                GCOMP_ERR_INVALID, "pairing '%s': the runs do not fit the model and data",
                run->spec);
  float *scratch = malloc(gcomp_cv_model_scratch(m, 1) * sizeof *scratch);
  GCOMP_FAIL_IF(!scratch, GCOMP_ERR_NOMEM, "pairing scratch");
  /* the test rows one at a time: which of them each model gets right */
  int lost = 0, gained = 0, nb = 0, nr = 0;
  for (int i = 0; i < d->ntest; i++) {
    const float *x = d->xtest + (size_t)i * (size_t)d->nfeat;
    int cb = 0, cr = 0;
    gcomp_cv_model_loss(m, base->theta, x, &d->ytest[i], 1, NULL, scratch, &cb);
    gcomp_cv_model_loss(m, run->theta, x, &d->ytest[i], 1, NULL, scratch, &cr);
    lost += cb && !cr, gained += cr && !cb, nb += cb, nr += cr;
  }
  /* the training rows the final loss is measured on: the paired differences' spread */
  int nl = d->ntrain < GCOMP_CV_EVAL_ROWS ? d->ntrain : GCOMP_CV_EVAL_ROWS;
  double mean = 0, m2 = 0, lb = 0;
  for (int i = 0; i < nl; i++) {
    const float *x = d->xtrain + (size_t)i * (size_t)d->nfeat;
    double a = gcomp_cv_model_loss(m, base->theta, x, &d->ytrain[i], 1, NULL, scratch, NULL);
    double b = gcomp_cv_model_loss(m, run->theta, x, &d->ytrain[i], 1, NULL, scratch, NULL);
    double dd = b - a, delta = dd - mean;   /* Welford */
    mean += delta / (i + 1);
    m2 += delta * (dd - mean);
    lb += a;
  }
  free(scratch);
  /* the runs evaluated these parameters: their accuracies are these counts */
  GCOMP_FAIL_IF(fabs(nb - base->final_acc * d->ntest) > 0.5 ||
                    fabs(nr - run->final_acc * d->ntest) > 0.5,
                GCOMP_ERR_INVALID, "pairing '%s': per-row predictions give %d and %d of %d test "
                "rows right, the runs' accuracies %.4f and %.4f", run->spec, nb, nr, d->ntest,
                base->final_acc, run->final_acc);
  /* the mean difference over nl of ntrain rows drawn without replacement */
  double var = nl > 1 ? m2 / (nl - 1) / nl * (1 - (double)nl / d->ntrain) : 0;
  acc->seeds++;
  acc->rows += d->ntest;
  acc->lost += lost, acc->gained += gained;
  acc->loss_rows = nl, acc->train_rows = d->ntrain;
  acc->loss_var += var > 0 ? var : 0;
  acc->base_loss += nl ? lb / nl : 0;
  return GCOMP_OK;
}

/* The resolution of each metric from the pairs. */
static void resolve(gcomp_cv_verdict *v, const gcomp_cv_tol *tol) {
  const gcomp_cv_paired *pa = &v->paired;
  v->acc_row_pts = 100.0 / pa->rows;
  v->acc_min_pts = gcomp_cv_mcnemar_min_rows(GCOMP_CV_PAIRED_ALPHA) * v->acc_row_pts;
  v->acc_p = gcomp_cv_mcnemar_p(pa->lost, pa->gained);
  v->loss_se_rel = pa->base_loss > 0 ? sqrt(pa->loss_var) / pa->base_loss : 0;
  if (isfinite(tol->acc_pts) && v->acc_min_pts > tol->acc_pts + 1e-9)
    v->unresolved |= GCOMP_CV_M_ACC;
  if (isfinite(tol->loss_rel) && 2.326 * v->loss_se_rel > tol->loss_rel)
    v->unresolved |= GCOMP_CV_M_LOSS;
}

/* "; 3 rows lost and 1 gained of 360, McNemar p = 0.31" */
static const char *pairs_part(char *buf, size_t n, const gcomp_cv_verdict *v) {
  buf[0] = '\0';
  if (v->paired.seeds > 0)
    snprintf(buf, n, "; %d lost and %d gained of %d test rows, McNemar p = %.2g", v->paired.lost,
             v->paired.gained, v->paired.rows, v->acc_p);
  return buf;
}

static void judge_acc(gcomp_cv_verdict *v, const gcomp_cv_run *base, const gcomp_cv_run *run) {
  const gcomp_cv_tol *tol = &v->tol;
  const gcomp_cv_floor *fl = &v->floor;
  char fp[64], pp[128];
  /* "within 0.5 points" includes 0.5: accuracies are counts over the test set, and their
   * difference in points carries binary rounding (1620/2000 - 1610/2000 is 0.5000000000000004
   * points), so the comparison allows for that much and no more */
  double drop = (base->final_acc - run->final_acc) * 100;
  double lim = tol->acc_pts + fl->acc_pts;
  if (!(drop > lim + 1e-9)) return;
  if (v->paired.seeds > 0 && !(v->acc_p <= GCOMP_CV_PAIRED_ALPHA)) {
    /* past the limit, but on rows that chance alone moves this much: not a drop the set can
     * tell, so no failure, and the verdict says why */
    snprintf(v->note, sizeof v->note, "test accuracy %.2f points below the baseline's is over "
             "the %.2f-point limit, but on %d lost and %d gained of %d test rows chance alone "
             "does as much (McNemar p = %.2g > %.2g; one row is %.2f points, and a drop can be "
             "called real from %d rows, %.2f points)", drop, lim, v->paired.lost,
             v->paired.gained, v->paired.rows, v->acc_p, GCOMP_CV_PAIRED_ALPHA, v->acc_row_pts,
             gcomp_cv_mcnemar_min_rows(GCOMP_CV_PAIRED_ALPHA), v->acc_min_pts);
    return;
  }
  v->pass = 0;
  add_why(v, "test accuracy %.2f%% is %.2f points below the baseline's %.2f%% (tolerance %.2f%s, "
          "exceeded by %.2f%s)", run->final_acc * 100, drop, base->final_acc * 100, tol->acc_pts,
          floor_part(fp, sizeof fp, fl, fl->acc_pts, "%.2f"), drop - lim,
          pairs_part(pp, sizeof pp, v));
}

/* "; sampling error 0.04% on 4096 of 8000 training rows" */
static const char *loss_part(char *buf, size_t n, const gcomp_cv_verdict *v) {
  buf[0] = '\0';
  if (v->paired.seeds == 0 || v->paired.train_rows == 0) return buf;   /* logged: unknown */
  if (v->paired.loss_rows >= v->paired.train_rows)
    snprintf(buf, n, "; on all %d training rows: no sampling error", v->paired.train_rows);
  else
    snprintf(buf, n, "; sampling error %.2g%% on %d of %d training rows", v->loss_se_rel * 100,
             v->paired.loss_rows, v->paired.train_rows);
  return buf;
}

double gcomp_cv_curve_gap(const int *step, const double *loss, const double *base_loss, int n) {
  double gap = 0;
  int ng = 0;
  for (int e = 0; e < n; e++) {
    if (step[e] <= 0) continue;   /* step 0 is the common start */
    double b = base_loss[e];
    gap += fabs(loss[e] - b) / (b > 1e-12 ? b : 1e-12);
    ng++;
  }
  return ng ? gap / ng : 0;
}

void gcomp_cv_judge(const gcomp_cv_run *base, const gcomp_cv_run *run, const gcomp_cv_tol *tol,
                    const gcomp_cv_floor *floor, gcomp_cv_verdict *v) {
  gcomp_cv_judge_paired(base, run, tol, floor, NULL, v);
}

void gcomp_cv_judge_paired(const gcomp_cv_run *base, const gcomp_cv_run *run,
                           const gcomp_cv_tol *tol, const gcomp_cv_floor *floor,
                           const gcomp_cv_paired *paired, gcomp_cv_verdict *v) {
  memset(v, 0, sizeof *v);
  v->tol = *tol;
  v->acc_p = v->acc_row_pts = v->acc_min_pts = v->loss_se_rel = NAN;
  if (floor && floor->n > 0) v->floor = *floor;
  const gcomp_cv_floor *fl = &v->floor;   /* all zero without a floor */
  char fp[64], lp[96];
  if (run->status < 0) {
    v->pass = -1;
    snprintf(v->why, sizeof v->why, "run failed: %.480s", run->error);
    return;
  }
  /* a logged baseline need not log accuracy (then no run has it to judge) */
  if (!isfinite(base->final_loss) || (!base->logged && !isfinite(base->final_acc))) {
    /* nothing to compare with: the codec must not take the blame */
    v->pass = -1;
    snprintf(v->why, sizeof v->why, "the baseline itself diverged (final training loss %g): "
             "check the data and the learning rate", base->final_loss);
    return;
  }
  v->pass = 1;
  if (paired && paired->seeds > 0 && paired->rows > 0) {
    v->paired = *paired;
    resolve(v, tol);
  }
  /* a floor above the tolerance: the run cannot resolve that tolerance (said, not judged) */
  if (fl->n > 0) {
    const double f[4] = {fl->acc_pts, fl->loss_rel, fl->gap_rel, fl->drift};
    const double t[4] = {tol->acc_pts, tol->loss_rel, tol->gap_rel, tol->drift};
    for (int m = 0; m < 4; m++)
      if (isfinite(t[m]) && f[m] > t[m]) v->coarse |= 1u << m;
  }
  if (!isfinite(run->final_loss)) {
    v->pass = 0;
    add_why(v, "final training loss is %g (diverged)", run->final_loss);
    return;
  }
  judge_acc(v, base, run);
  /* a loss difference equal to the tolerance is within it too (1.1 / 1.0 - 1 is
   * 0.10000000000000009) */
  double lrel = (run->final_loss - base->final_loss) / base->final_loss;
  double lim = tol->loss_rel + fl->loss_rel;
  if (lrel > lim + 1e-12) {
    v->pass = 0;
    add_why(v, "final training loss %.5g is %.2f%% above the baseline's %.5g (tolerance %.2f%%%s, "
            "exceeded by %.2f points%s)", run->final_loss, lrel * 100, base->final_loss,
            tol->loss_rel * 100, floor_part(fp, sizeof fp, fl, fl->loss_rel * 100, "%.2f%%"),
            (lrel - lim) * 100, loss_part(lp, sizeof lp, v));
  }
  lim = tol->gap_rel + fl->gap_rel;
  if (run->curve_gap > lim || isnan(run->curve_gap)) {
    v->pass = 0;
    add_why(v, "loss curve's mean relative gap %.2f%% exceeds tolerance %.2f%%%s by %.2f points",
            run->curve_gap * 100, tol->gap_rel * 100,
            floor_part(fp, sizeof fp, fl, fl->gap_rel * 100, "%.2f%%"),
            (run->curve_gap - lim) * 100);
  }
  lim = tol->drift + fl->drift;
  if (run->final_drift > lim) {
    v->pass = 0;
    /* drift has no sampling error: what blurs it is fp32 itself, which only twins measure */
    add_why(v, "parameter drift %.3g exceeds tolerance %.3g%s by %.3g%s", run->final_drift,
            tol->drift, floor_part(fp, sizeof fp, fl, fl->drift, "%.3g"), run->final_drift - lim,
            fl->n > 0 || v->paired.seeds == 0 ? ""
            : " (how far fp32 alone drifts on this run is not measured: --noise-floor)");
  }
  if (!run->replicas_equal) {
    v->pass = 0;
    add_why(v, "the workers' model replicas differ: ranks received different allreduce results");
  }
  /* Error feedback delivers everything a sparsifier held back, only later: its gap to the
   * baseline shrinks with the number of times each parameter gets to move, and with a
   * decaying learning rate, so a longer run judges a sparsifier more kindly. Say so,
   * with the count, so a short run's verdict is read as one about this run's length; the
   * verdict itself stands. Without error feedback the dropped mass is gone: no hint. */
  const char *spec = run->canon[0] ? run->canon : run->spec;
  if (v->pass == 0 && run->moved_frac > 0 && run->moved_frac < 0.5 && strstr(spec, "+ef"))
    snprintf(v->hint, sizeof v->hint, "each parameter moved %.1f times in %d steps on average; "
             "with error feedback a sparsifier catches up over runs long against 1/ratio "
             "with a decaying learning rate, so judge it at your job's --steps and "
             "--lr-schedule (a long run with --noise-floor)", run->moved_frac * run->steps,
             run->steps);
}

int gcomp_cv_judge_problem(gcomp_cv_problem *pr, const gcomp_cv_tolset *ts, FILE *err,
                           const char *label, int *errors) {
  const gcomp_cv_floor *floor = pr->ntwins > 0 ? &pr->floor : NULL;
  int failures = 0;
  for (int i = 0; i < pr->nruns; i++) {
    gcomp_cv_run *run = &pr->runs[i];
    gcomp_cv_tol tol = gcomp_cv_tol_for(ts, run->spec, run->canon);
    gcomp_cv_judge_paired(&pr->base, run, &tol, floor, pr->paired ? &pr->paired[i] : NULL,
                          &pr->verdicts[i]);
    if (pr->deployed && pr->deployed[i].trained) {   /* reported, not gating */
      gcomp_cv_deployed *dep = &pr->deployed[i];
      gcomp_cv_judge_paired(&pr->base, &dep->run, &tol, floor, &dep->paired, &dep->verdict);
      if (dep->run.status < 0) {
        fprintf(err, "gcomp-converge: %s: the deployed job's run failed: %s\n", label,
                dep->run.error);
        ++*errors;
      }
    }
    if (run->status < 0) {
      fprintf(err, "gcomp-converge: %s: %s%s\n", label,
              run->logged ? "" : "the library refused or failed: ", run->error);
      ++*errors;
    } else if ((pr->verdicts[i].pass == 1) == (pr->must_fail[i] != 0)) {
      failures++;
    }
  }
  return failures;
}

/* ---- small tensors ---------------------------------------------------------------------- */
void gcomp_cv_deployed_plan(const gcomp_cv_model *m, int per_layer, long long min_bytes,
                            gcomp_cv_deployed *out) {
  memset(out, 0, sizeof *out);
  out->min_bytes = min_bytes;
  size_t off[4], len[4];
  int n = per_layer ? gcomp_cv_model_tensors(m, off, len) : 1;
  if (!per_layer) len[0] = m->nparams;
  out->calls = n;
  out->smallest = SIZE_MAX;
  for (int t = 0; t < n; t++) {
    size_t bytes = len[t] * sizeof(float);
    /* the library's rule (reduce/comm.c): a call under the threshold goes uncompressed */
    out->compressed += (long long)bytes >= min_bytes;
    if (bytes < out->smallest) out->smallest = bytes;
    if (bytes > out->largest) out->largest = bytes;
  }
}

const char *gcomp_cv_deployed_word(const gcomp_cv_deployed *dep) {
  if (dep->compressed == dep->calls) return "as checked";
  if (dep->compressed == 0) return "fp32";
  const gcomp_cv_verdict *v = &dep->verdict;
  return v->pass < 0 ? "ERROR" : v->pass ? "pass" : "FAIL";
}
