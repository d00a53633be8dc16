/* Data for the harness: CSV files (plain or gzip, label last, optional header) and seeded
 * synthetic tasks, split into train and test and standardised with training statistics. */
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "converge.h"
#include "cv_rng.h"
#include "cv_check.h"

void gcomp_cv_data_free(gcomp_cv_data *d) {
  if (!d) return;
  free(d->xtrain);
  free(d->xtest);
  free(d->ytrain);
  free(d->ytest);
  memset(d, 0, sizeof *d);
}

/* ---- CSV ------------------------------------------------------------------------------ */
typedef struct {
  gzFile gz;
  char *buf;
  size_t cap;
} line_reader;

/* Reads one line (without its newline) into r->buf; 0 at end of file, 1 for a line. */
static int read_line(line_reader *r, const char *path, long lineno) {
  size_t len = 0;
  for (;;) {
    if (r->cap - len < 2) {
      size_t ncap = r->cap ? r->cap * 2 : 4096;
      char *p = realloc(r->buf, ncap);
      GCOMP_FAIL_IF(!p, GCOMP_ERR_NOMEM, "%s:%ld: line buffer", path, lineno);
      r->buf = p, r->cap = ncap;
    }
    size_t room = r->cap - len > 1 << 30 ? 1 << 30 : r->cap - len;
    if (!gzgets(r->gz, r->buf + len, (int)room)) {
      int err = 0;
      const char *msg = gzerror(r->gz, &err);
      /* Z_BUF_ERROR at the end is zlib's "unexpected end of file": a cut .gz */
      GCOMP_FAIL_IF(err == Z_BUF_ERROR, GCOMP_ERR_CORRUPT,
                    "%s:%ld: the gzip stream ends early (truncated file?)", path, lineno);
      GCOMP_FAIL_IF(err != Z_OK, GCOMP_ERR_CORRUPT, "%s:%ld: read error: %s", path, lineno, msg);
      if (len == 0) return 0;
      break;
    }
    size_t got = strlen(r->buf + len);
    len += got;
    if (len && r->buf[len - 1] == '\n') break;
    /* gzgets stops at a newline, a full buffer or the end; anything shorter was cut by a
     * NUL byte, which would glue this line to the next */
    GCOMP_FAIL_IF(got < room - 1 && !gzeof(r->gz), GCOMP_ERR_INVALID,
                  "%s:%ld: NUL byte in the line (a binary file?)", path, lineno);
  }
  while (len && (r->buf[len - 1] == '\n' || r->buf[len - 1] == '\r')) r->buf[--len] = '\0';
  return 1;
}

static int is_blank(const char *s) {
  for (; *s; s++)
    if (*s != ' ' && *s != '\t') return 0;
  return 1;
}

static int count_fields(const char *line) {
  int n = 1;
  for (; *line; line++) n += *line == ',';
  return n;
}

/* Splits a line at commas in place; returns the field count (fields[] gets up to max). */
static int split_fields(char *line, char **fields, int max) {
  int n = 0;
  for (char *p = line;;) {
    char *comma = strchr(p, ',');
    if (n < max) fields[n] = p;
    n++;
    if (!comma) break;
    *comma = '\0';
    p = comma + 1;
  }
  return n;
}

/* 1: a number; 0: not one; -1: a number outside fp32's range (features are fp32) */
static int parse_double(const char *s, double *out) {
  while (*s == ' ' || *s == '\t') s++;
  errno = 0;
  char *end = NULL;
  double v = gcomp_strtod(s, &end);   /* 1.5 under any locale */
  if (end == s || (errno && errno != ERANGE)) return 0;
  while (*end == ' ' || *end == '\t') end++;
  if (*end || (!isfinite(v) && errno != ERANGE)) return 0;   /* "nan", "inf" */
  if (!(fabs(v) <= FLT_MAX)) return -1;                        /* 1e39, 1e999 */
  *out = v;
  return 1;
}

typedef struct {
  float *x;
  int *y;
  int rows, cap, nfeat;
} table;

static int table_push(table *t, const double *vals, int label, const char *path) {
  if (t->rows == t->cap) {
    int ncap = t->cap ? t->cap * 2 : 1024;
    float *x = realloc(t->x, (size_t)ncap * (size_t)t->nfeat * sizeof *x);
    if (x) t->x = x;
    int *y = realloc(t->y, (size_t)ncap * sizeof *y);
    if (y) t->y = y;
    GCOMP_FAIL_IF(!x || !y, GCOMP_ERR_NOMEM, "%s: %d rows", path, ncap);
    t->cap = ncap;
  }
  for (int j = 0; j < t->nfeat; j++) t->x[(size_t)t->rows * (size_t)t->nfeat + (size_t)j] = (float)vals[j];
  t->y[t->rows++] = label;
  return GCOMP_OK;
}

static int parse_rows(line_reader *r, const char *path, int max_classes, table *t) {
  char **fields = NULL;
  double *vals = NULL;
  int ncol = 0, st = GCOMP_OK;
  long lineno = 0;
  for (;;) {
    int got = read_line(r, path, lineno + 1);
    if (got <= 0) {
      st = got;
      break;
    }
    lineno++;
    if (is_blank(r->buf)) continue;
    char *dup = NULL;
    if (!ncol) {   /* first non-blank line: fixes the column count; may be a header */
      ncol = count_fields(r->buf);
      fields = malloc((size_t)ncol * sizeof *fields);
      vals = malloc((size_t)ncol * sizeof *vals);
      if (!fields || !vals) {
        st = gcomp_error_set(GCOMP_ERR_NOMEM, __FILE__, __LINE__, "%s: %d columns", path, ncol);
        break;
      }
      if (ncol < 2) {
        st = gcomp_error_set(GCOMP_ERR_INVALID, __FILE__, __LINE__,
                             "%s:%ld: need at least one feature and a label, found %d field",
                             path, lineno, ncol);
        break;
      }
      t->nfeat = ncol - 1;
      dup = strdup(r->buf);
      if (!dup) {
        st = gcomp_error_set(GCOMP_ERR_NOMEM, __FILE__, __LINE__, "%s: line copy", path);
        break;
      }
      split_fields(dup, fields, ncol);
      int numeric = 1;
      for (int j = 0; j < ncol && numeric; j++) numeric = parse_double(fields[j], &vals[j]) != 0;
      free(dup);
      if (!numeric && t->rows == 0 && lineno == 1) continue;   /* a header */
    }
    int n = split_fields(r->buf, fields, ncol);
    if (n != ncol) {
      st = gcomp_error_set(GCOMP_ERR_INVALID, __FILE__, __LINE__,
                           "%s:%ld: malformed line: %d fields, expected %d (features, then the label)",
                           path, lineno, n, ncol);
      break;
    }
    for (int j = 0; j < ncol && st == GCOMP_OK; j++) {
      int num = parse_double(fields[j], &vals[j]);
      if (num == 0)
        st = gcomp_error_set(GCOMP_ERR_INVALID, __FILE__, __LINE__,
                             "%s:%ld: field %d '%.40s' is not a number", path, lineno, j + 1,
                             fields[j]);
      else if (num < 0)
        st = gcomp_error_set(GCOMP_ERR_INVALID, __FILE__, __LINE__,
                             "%s:%ld: field %d '%.40s' is outside fp32's range (|x| <= 3.4e38)",
                             path, lineno, j + 1, fields[j]);
    }
    if (st < 0) break;
    double lab = vals[ncol - 1];
    if (lab != floor(lab) || lab < 0 || lab >= max_classes) {
      st = gcomp_error_set(GCOMP_ERR_INVALID, __FILE__, __LINE__,
                           "%s:%ld: label '%s' out of range: labels are integers in [0, %d)", path,
                           lineno, fields[ncol - 1], max_classes);
      break;
    }
    st = table_push(t, vals, (int)lab, path);
    if (st < 0) break;
  }
  free(fields);
  free(vals);
  if (st < 0) return st;
  GCOMP_FAIL_IF(t->rows == 0, GCOMP_ERR_INVALID, "%s: empty file: no data rows (%ld lines read)",
                path, lineno);
  return GCOMP_OK;
}

/* Moves rows of t into d by a fixed permutation and standardises every feature with the
 * training rows' mean and standard deviation. */
static int split_standardise(table *t, double test_frac, uint64_t seed, gcomp_cv_data *d) {
  int n = t->rows, f = t->nfeat;
  int ntest = (int)floor(n * test_frac + 0.5);
  if (ntest < 1) ntest = 1;
  GCOMP_FAIL_IF(n - ntest < 1, GCOMP_ERR_INVALID, "%s: %d rows are too few to split", d->name, n);
  int *perm = malloc((size_t)n * sizeof *perm);
  GCOMP_FAIL_IF(!perm, GCOMP_ERR_NOMEM, "permutation");
  for (int i = 0; i < n; i++) perm[i] = i;
  gcomp_cv_rng rng = gcomp_cv_rng_make(seed, 0x5917);
  gcomp_cv_shuffle(&rng, perm, n);
  d->nfeat = f;
  d->ntrain = n - ntest;
  d->ntest = ntest;
  d->xtrain = malloc((size_t)d->ntrain * (size_t)f * sizeof(float));
  d->xtest = malloc((size_t)ntest * (size_t)f * sizeof(float));
  d->ytrain = malloc((size_t)d->ntrain * sizeof(int));
  d->ytest = malloc((size_t)ntest * sizeof(int));
  double *mean = calloc((size_t)f, sizeof *mean), *sd = calloc((size_t)f, sizeof *sd);
  int ok = d->xtrain && d->xtest && d->ytrain && d->ytest && mean && sd;
  if (ok) {
    for (int i = 0; i < n; i++) {
      int test = i >= d->ntrain;
      int row = test ? i - d->ntrain : i;
      float *dst = (test ? d->xtest : d->xtrain) + (size_t)row * (size_t)f;
      memcpy(dst, t->x + (size_t)perm[i] * (size_t)f, (size_t)f * sizeof(float));
      (test ? d->ytest : d->ytrain)[row] = t->y[perm[i]];
    }
    for (int i = 0; i < d->ntrain; i++)
      for (int j = 0; j < f; j++) mean[j] += d->xtrain[(size_t)i * (size_t)f + (size_t)j];
    for (int j = 0; j < f; j++) mean[j] /= d->ntrain;
    for (int i = 0; i < d->ntrain; i++)
      for (int j = 0; j < f; j++) {
        double v = d->xtrain[(size_t)i * (size_t)f + (size_t)j] - mean[j];
        sd[j] += v * v;
      }
    for (int j = 0; j < f; j++) {
      sd[j] = sqrt(sd[j] / d->ntrain);
      if (sd[j] < 1e-6) sd[j] = 1;   /* constant feature (digits has a few): centre only */
    }
    for (int i = 0; i < n; i++) {
      int test = i >= d->ntrain;
      float *row = (test ? d->xtest : d->xtrain) + (size_t)(test ? i - d->ntrain : i) * (size_t)f;
      for (int j = 0; j < f; j++) row[j] = (float)((row[j] - mean[j]) / sd[j]);
    }
    int maxy = 0;
    for (int i = 0; i < n; i++) maxy = t->y[i] > maxy ? t->y[i] : maxy;
    d->nclass = maxy + 1 > d->nclass ? maxy + 1 : d->nclass;
  }
  free(perm);
  free(mean);
  free(sd);
  if (!ok) {
    gcomp_cv_data_free(d);
    GCOMP_FAIL(GCOMP_ERR_NOMEM, "data set of %d x %d", n, f);
  }
  return GCOMP_OK;
}

/* Keeps max_rows of t's rows, a seeded random subset, in their order in the file. */
static int subsample(table *t, int max_rows, uint64_t seed, const char *path) {
  GCOMP_FAIL_IF(max_rows < 2 || max_rows > t->rows, GCOMP_ERR_INVALID,
                "%s: cannot keep %d of its %d rows (2 to %d)", path, max_rows, t->rows, t->rows);
  uint8_t *keep = calloc((size_t)t->rows, 1);
  int *perm = malloc((size_t)t->rows * sizeof *perm);
  if (!keep || !perm) {
    free(keep);
    free(perm);
    GCOMP_FAIL(GCOMP_ERR_NOMEM, "%s: subset of %d rows", path, max_rows);
  }
  for (int i = 0; i < t->rows; i++) perm[i] = i;
  gcomp_cv_rng rng = gcomp_cv_rng_make(seed, 0x5ab5);   /* not the split's stream */
  gcomp_cv_shuffle(&rng, perm, t->rows);
  for (int i = 0; i < max_rows; i++) keep[perm[i]] = 1;
  int n = 0;
  size_t f = (size_t)t->nfeat;
  for (int i = 0; i < t->rows; i++) {
    if (!keep[i]) continue;
    memmove(t->x + (size_t)n * f, t->x + (size_t)i * f, f * sizeof *t->x);
    t->y[n++] = t->y[i];
  }
  t->rows = n;
  free(keep);
  free(perm);
  return GCOMP_OK;
}

int gcomp_cv_load_csv(const char *path, const char *name, int max_classes, double test_frac,
                      uint64_t split_seed, gcomp_cv_data *out) {
  return gcomp_cv_load_csv_rows(path, name, max_classes, test_frac, split_seed, 0, out);
}

int gcomp_cv_load_csv_rows(const char *path, const char *name, int max_classes,
                           double test_frac, uint64_t split_seed, int max_rows,
                           gcomp_cv_data *out) {
  GCOMP_FAIL_IF(!path || !out, GCOMP_ERR_INVALID, "gcomp_cv_load_csv: NULL argument");
  GCOMP_FAIL_IF(max_classes < 2, GCOMP_ERR_INVALID, "max_classes %d < 2", max_classes);
  GCOMP_FAIL_IF(!(test_frac > 0 && test_frac < 1), GCOMP_ERR_INVALID,
                "test fraction %g is not in (0, 1)", test_frac);
  memset(out, 0, sizeof *out);
  FILE *probe = fopen(path, "rb");
  GCOMP_FAIL_IF(!probe, GCOMP_ERR_INVALID, "%s: cannot open: %s", path, strerror(errno));
  fclose(probe);
  line_reader r = {.gz = gzopen(path, "rb")};   /* gzip or plain: zlib reads both */
  GCOMP_FAIL_IF(!r.gz, GCOMP_ERR_INVALID, "%s: cannot open", path);
  table t = {0};
  int st = parse_rows(&r, path, max_classes, &t);
  gzclose(r.gz);
  free(r.buf);
  if (st == GCOMP_OK && max_rows) st = subsample(&t, max_rows, split_seed, path);
  if (st == GCOMP_OK) {
    if (name) {
      snprintf(out->name, sizeof out->name, "%s", name);
    } else {
      const char *base = strrchr(path, '/');
      snprintf(out->name, sizeof out->name, "%s", base ? base + 1 : path);
      char *dot = strchr(out->name, '.');
      if (dot && dot != out->name) *dot = '\0';
    }
    out->nclass = 2;
    st = split_standardise(&t, test_frac, split_seed, out);
  }
  free(t.x);
  free(t.y);
  return st < 0 ? gcomp_error_trace(st, __FILE__, __LINE__) : GCOMP_OK;
}

/* ---- synthetic ------------------------------------------------------------------------ */
static void synth_gmm(const gcomp_cv_synth *s, gcomp_cv_rng *rng, const double *means,
                      const double *scale, float *x, int *y) {
  int c = (int)gcomp_cv_below(rng, (uint64_t)s->nclass);
  *y = c;
  for (int j = 0; j < s->dim; j++)
    x[j] = (float)((means[(size_t)c * (size_t)s->dim + (size_t)j] + gcomp_cv_normal(rng)) * scale[j]);
}

/* teacher: h = relu(W1 x + b1), logits = W2 h + b2 */
static void synth_teacher(const gcomp_cv_synth *s, gcomp_cv_rng *rng, const double *w,
                          float *x, int *y) {
  int d = s->dim, h = 2 * s->dim, k = s->nclass;
  const double *w1 = w, *b1 = w1 + (size_t)h * (size_t)d, *w2 = b1 + h, *b2 = w2 + (size_t)k * (size_t)h;
  double hid[512];
  for (int j = 0; j < d; j++) x[j] = (float)gcomp_cv_normal(rng);
  for (int i = 0; i < h; i++) {
    double a = b1[i];
    for (int j = 0; j < d; j++) a += w1[(size_t)i * (size_t)d + (size_t)j] * x[j];
    hid[i] = a > 0 ? a : 0;
  }
  int best = 0;
  double bestv = -INFINITY;
  for (int c = 0; c < k; c++) {
    double a = b2[c];
    for (int i = 0; i < h; i++) a += w2[(size_t)c * (size_t)h + (size_t)i] * hid[i];
    if (a > bestv) bestv = a, best = c;
  }
  *y = best;
}

int gcomp_cv_make_synth(const gcomp_cv_synth *s, gcomp_cv_data *out) {
  GCOMP_FAIL_IF(!s || !out, GCOMP_ERR_INVALID, "gcomp_cv_make_synth: NULL argument");
  int teacher = strcmp(s->kind, "teacher") == 0;
  GCOMP_FAIL_IF(!teacher && strcmp(s->kind, "gmm") != 0, GCOMP_ERR_INVALID,
                "synthetic task '%s' is unknown (valid: gmm, teacher)", s->kind);
  GCOMP_FAIL_IF(s->dim < 1 || s->dim > 256 || s->nclass < 2 || s->nclass > 256 || s->ntrain < 1 ||
                    s->ntest < 1 || !(s->cond >= 1),
                GCOMP_ERR_INVALID, "synthetic task %s: dim %d (1..256), classes %d (2..256), "
                "train %d, test %d, cond %g (>= 1)", s->kind, s->dim, s->nclass, s->ntrain,
                s->ntest, s->cond);
  memset(out, 0, sizeof *out);
  snprintf(out->name, sizeof out->name, "%s", s->kind);
  int d = s->dim, k = s->nclass, h = 2 * d;
  size_t nw = teacher ? (size_t)h * (size_t)d + (size_t)h + (size_t)k * (size_t)h + (size_t)k
                      : (size_t)k * (size_t)d + (size_t)d;
  double *w = malloc(nw * sizeof *w);
  table t = {.nfeat = d};
  int n = s->ntrain + s->ntest;
  t.x = malloc((size_t)n * (size_t)d * sizeof(float));
  t.y = malloc((size_t)n * sizeof(int));
  t.rows = t.cap = n;
  if (!w || !t.x || !t.y) {
    free(w);
    free(t.x);
    free(t.y);
    GCOMP_FAIL(GCOMP_ERR_NOMEM, "synthetic task of %d x %d", n, d);
  }
  gcomp_cv_rng rng = gcomp_cv_rng_make(s->seed, teacher ? 0x7eac : 0x6a3);
  if (teacher) {
    for (size_t i = 0; i < nw; i++) w[i] = gcomp_cv_normal(&rng);
    /* scale the layers so pre-activations are O(1) */
    for (size_t i = 0; i < (size_t)h * (size_t)d; i++) w[i] /= sqrt((double)d);
    for (size_t i = (size_t)h * (size_t)d + (size_t)h; i < nw; i++) w[i] /= sqrt((double)h);
  } else {
    double *scale = w + (size_t)k * (size_t)d;
    for (size_t i = 0; i < (size_t)k * (size_t)d; i++) w[i] = s->sep * gcomp_cv_normal(&rng);
    for (int j = 0; j < d; j++) scale[j] = pow(s->cond, d > 1 ? -(double)j / (d - 1) : 0.0);
  }
  /* balance teacher classes a little: resample rows of classes already over-represented */
  int *seen = calloc((size_t)k, sizeof *seen);
  for (int i = 0; i < n; i++) {
    float *x = t.x + (size_t)i * (size_t)d;
    for (int tries = 0; tries < 20; tries++) {
      if (teacher)
        synth_teacher(s, &rng, w, x, &t.y[i]);
      else
        synth_gmm(s, &rng, w, w + (size_t)k * (size_t)d, x, &t.y[i]);
      if (!seen || seen[t.y[i]] <= 2 * (i / k + 1)) break;
    }
    if (seen) seen[t.y[i]]++;
  }
  free(seen);
  free(w);
  out->nclass = k;
  double frac = (double)s->ntest / n;
  /* the synthetic rows are i.i.d. already; the split still goes through the same code */
  int st = split_standardise(&t, frac, s->seed, out);
  free(t.x);
  free(t.y);
  return st;
}
