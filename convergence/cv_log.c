/* Logged curves: a training program's metrics (JSON lines, converge.h's convention) read
 * into runs the verdicts judge like the harness's own. The reader knows just enough JSON
 * for one object per line: the keys it needs must be numbers, and every other value
 * (strings, objects, arrays the program adds beside them) is skipped whole. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "converge.h"
#include "cv_check.h"

typedef struct {
  const char *path;
  int line;
  const char *p;   /* the cursor in the line */
} cursor;

static void skip_ws(cursor *c) {
  while (*c->p == ' ' || *c->p == '\t' || *c->p == '\r' || *c->p == '\n') c->p++;
}

/* A string's end (the cursor on its opening quote); 0 when it does not close. */
static int skip_string(cursor *c) {
  for (c->p++; *c->p && *c->p != '"'; c->p++)
    if (*c->p == '\\' && c->p[1]) c->p++;
  if (*c->p != '"') return 0;
  c->p++;
  return 1;
}

/* Any value: nested objects and arrays by their brackets, strings whole, scalars up to the
 * next separator. 0 when the line ends inside it. */
static int skip_value(cursor *c) {
  skip_ws(c);
  if (*c->p == '"') return skip_string(c);
  if (*c->p == '{' || *c->p == '[') {
    int depth = 0;
    do {
      if (*c->p == '"') {
        if (!skip_string(c)) return 0;
        continue;
      }
      depth += *c->p == '{' || *c->p == '[';
      depth -= *c->p == '}' || *c->p == ']';
      if (!*c->p) return 0;
      c->p++;
    } while (depth > 0);
    return 1;
  }
  const char *start = c->p;
  c->p += strcspn(c->p, ",} \t\r\n");
  return c->p > start;
}

/* A number, with NaN, Infinity and -Infinity as Python's json writes them. */
static int read_number(cursor *c, double *out) {
  skip_ws(c);
  static const struct { const char *word; double v; } words[] = {
      {"NaN", NAN}, {"Infinity", INFINITY}, {"-Infinity", -INFINITY}};
  for (size_t i = 0; i < sizeof words / sizeof *words; i++) {
    size_t n = strlen(words[i].word);
    if (strncmp(c->p, words[i].word, n) == 0) {
      c->p += n;
      *out = words[i].v;
      return 1;
    }
  }
  if (!(*c->p == '-' || (*c->p >= '0' && *c->p <= '9'))) return 0;
  errno = 0;
  char *end = NULL;
  double v = gcomp_strtod(c->p, &end);   /* a '.' whatever the locale */
  if (errno == EINVAL || end == c->p) return 0;
  c->p = end;
  *out = v;
  return 1;
}

typedef struct {
  double step, loss, acc, rows;   /* NAN: not in the line (a loss may be NaN itself) */
  unsigned have;                  /* bit k: names[k] was in the line */
} record;

/* One line's record; GCOMP_ERR_INVALID naming file and line. */
static int parse_line(cursor *c, record *r) {
  *r = (record){NAN, NAN, NAN, NAN, 0};
  skip_ws(c);
  GCOMP_FAIL_IF(*c->p != '{', GCOMP_ERR_INVALID, "%s:%d: not a JSON object: '%.40s'", c->path,
                c->line, c->p);
  c->p++;
  skip_ws(c);
  if (*c->p == '}') c->p++;
  else
    for (;;) {
      skip_ws(c);
      const char *key = c->p + 1;
      GCOMP_FAIL_IF(*c->p != '"' || !skip_string(c), GCOMP_ERR_INVALID,
                    "%s:%d: a key must be a string at '%.20s'", c->path, c->line, c->p);
      size_t klen = (size_t)(c->p - key - 1);
      skip_ws(c);
      GCOMP_FAIL_IF(*c->p != ':', GCOMP_ERR_INVALID, "%s:%d: ':' expected after \"%.*s\"",
                    c->path, c->line, (int)klen, key);
      c->p++;
      static const char *const names[] = {"step", "loss", "accuracy", "test_rows"};
      double *slots[] = {&r->step, &r->loss, &r->acc, &r->rows};
      int k = -1;
      for (int i = 0; i < 4; i++)
        if (strlen(names[i]) == klen && strncmp(key, names[i], klen) == 0) k = i;
      if (k >= 0) r->have |= 1u << k;
      if (k >= 0)
        GCOMP_FAIL_IF(!read_number(c, slots[k]), GCOMP_ERR_INVALID,
                      "%s:%d: \"%s\" is not a number", c->path, c->line, names[k]);
      else
        GCOMP_FAIL_IF(!skip_value(c), GCOMP_ERR_INVALID, "%s:%d: the value of \"%.*s\" does "
                      "not end on the line", c->path, c->line, (int)klen, key);
      skip_ws(c);
      if (*c->p == ',') {
        c->p++;
        continue;
      }
      GCOMP_FAIL_IF(!*c->p, GCOMP_ERR_INVALID, "%s:%d: the line ends before its object "
                    "closes (one JSON object per line)", c->path, c->line);
      GCOMP_FAIL_IF(*c->p != '}', GCOMP_ERR_INVALID, "%s:%d: ',' or '}' expected at '%.20s' "
                    "(one JSON object per line)", c->path, c->line, c->p);
      c->p++;
      break;
    }
  skip_ws(c);
  GCOMP_FAIL_IF(*c->p, GCOMP_ERR_INVALID, "%s:%d: text after the object: '%.20s' (one JSON "
                "object per line)", c->path, c->line, c->p);
  GCOMP_FAIL_IF(!(r->have & 1), GCOMP_ERR_INVALID, "%s:%d: no \"step\"", c->path, c->line);
  GCOMP_FAIL_IF(!(r->step >= 0 && r->step <= 2e9 && r->step == floor(r->step)),
                GCOMP_ERR_INVALID, "%s:%d: \"step\" %g is not a whole number >= 0", c->path,
                c->line, r->step);
  /* a NaN loss is a diverged run; a record without one says nothing */
  GCOMP_FAIL_IF(!(r->have & 2), GCOMP_ERR_INVALID,
                "%s:%d: no \"loss\"", c->path, c->line);
  GCOMP_FAIL_IF(!isnan(r->acc) && !(r->acc >= 0 && r->acc <= 100), GCOMP_ERR_INVALID,
                "%s:%d: \"accuracy\" %g is not a percentage in [0, 100]", c->path, c->line,
                r->acc);
  GCOMP_FAIL_IF(!isnan(r->rows) && !(r->rows >= 1 && r->rows <= 2e9 && r->rows == floor(r->rows)),
                GCOMP_ERR_INVALID, "%s:%d: \"test_rows\" %g is not a whole number >= 1",
                c->path, c->line, r->rows);
  return GCOMP_OK;
}

/* The arrays a logged run holds, grown as records come */
static int grow(gcomp_cv_run *run, int *cap) {
  if (run->neval < *cap) return GCOMP_OK;
  int n = *cap ? 2 * *cap : 64;
  int *st = realloc(run->eval_step, (size_t)n * sizeof *st);
  if (st) run->eval_step = st;
  double *lo = realloc(run->train_loss, (size_t)n * sizeof *lo);
  if (lo) run->train_loss = lo;
  double *ac = realloc(run->test_acc, (size_t)n * sizeof *ac);
  if (ac) run->test_acc = ac;
  GCOMP_FAIL_IF(!st || !lo || !ac, GCOMP_ERR_NOMEM, "metrics log of %d records", n);
  *cap = n;
  return GCOMP_OK;
}

static int read_records(FILE *f, const char *path, gcomp_cv_run *run) {
  char *line = NULL;
  size_t cap = 0;
  int ncap = 0, st = GCOMP_OK, rows_line = 0;
  cursor c = {.path = path};
  for (ssize_t len; st == GCOMP_OK && (len = getline(&line, &cap, f)) >= 0;) {
    c.line++;
    c.p = line;
    skip_ws(&c);
    if (!*c.p) continue;   /* blank lines, a trailing newline */
    record r;
    if ((st = parse_line(&c, &r)) < 0) break;
    int e = run->neval;
    if (e > 0 && !(r.step > run->eval_step[e - 1])) {
      st = gcomp_error_set(GCOMP_ERR_INVALID, __FILE__, __LINE__, "%s:%d: step %.0f after step "
                           "%d: steps must increase (two runs written to one file?)", path,
                           c.line, r.step, run->eval_step[e - 1]);
      break;
    }
    if (!isnan(r.rows)) {
      if (run->test_rows && run->test_rows != (int)r.rows) {
        st = gcomp_error_set(GCOMP_ERR_INVALID, __FILE__, __LINE__, "%s:%d: test_rows %.0f, "
                             "but %d on line %d: the accuracy must count the same rows", path,
                             c.line, r.rows, run->test_rows, rows_line);
        break;
      }
      run->test_rows = (int)r.rows, rows_line = c.line;
    }
    if ((st = grow(run, &ncap)) < 0) break;
    run->eval_step[e] = (int)r.step;
    run->train_loss[e] = r.loss;
    run->test_acc[e] = r.acc / 100;   /* NAN stays NAN: no accuracy in this record */
    run->neval++;
  }
  free(line);
  if (st == GCOMP_OK && ferror(f))
    st = gcomp_error_set(GCOMP_ERR_INVALID, __FILE__, __LINE__, "%s: read failed after line "
                         "%d", path, c.line);
  return st;
}

int gcomp_cv_log_read(const char *path, const char *name, gcomp_cv_run *run) {
  memset(run, 0, sizeof *run);
  snprintf(run->spec, sizeof run->spec, "%s", name ? name : path);
  run->logged = 1;
  FILE *f = fopen(path, "r");
  int st = f ? read_records(f, path, run)
             : gcomp_error_set(GCOMP_ERR_INVALID, __FILE__, __LINE__, "%s: cannot read the "
                               "metrics: %s", path, strerror(errno));
  if (f) fclose(f);
  if (st == GCOMP_OK && run->neval == 0)
    st = gcomp_error_set(GCOMP_ERR_INVALID, __FILE__, __LINE__, "%s: no metrics records (the "
                         "program writes one JSON line per evaluation to $GCOMP_METRICS, from "
                         "rank 0)", path);
  if (st < 0) {
    gcomp_cv_run_free(run);
    snprintf(run->spec, sizeof run->spec, "%s", name ? name : path);
    run->logged = 1;
    run->status = st;
    snprintf(run->error, sizeof run->error, "%s", gcomp_last_error());
    return st;
  }
  int ne = run->neval;
  run->steps = run->eval_step[ne - 1];
  run->final_loss = run->train_loss[ne - 1];
  run->final_acc = run->test_acc[ne - 1];
  run->final_train_acc = NAN;
  run->final_drift = run->max_drift = NAN;   /* no parameters: not measured, never judged */
  run->relerr_mean = run->relerr_max = run->cos_mean = run->cos_min = NAN;
  run->moved_frac = run->never_moved_frac = NAN;
  run->replicas_equal = 1;   /* one program's own log: its ranks are its business */
  run->nseeds = 1;
  return GCOMP_OK;
}

int gcomp_cv_log_fit(const gcomp_cv_run *base, const char *base_path, gcomp_cv_run *run,
                     const char *path, gcomp_cv_paired *paired) {
  if (paired) memset(paired, 0, sizeof *paired);
  GCOMP_FAIL_IF(base->status < 0 || run->status < 0 || !base->logged || !run->logged,
                GCOMP_ERR_INVALID, "%s: fitting logs that were not read", path);
  /* the same steps: a curve judged against another's must be sampled where it is */
  int n = base->neval < run->neval ? base->neval : run->neval;
  for (int e = 0; e < n; e++)
    GCOMP_FAIL_IF(base->eval_step[e] != run->eval_step[e], GCOMP_ERR_INVALID,
                  "%s and %s log different steps: record %d is step %d in the baseline's and "
                  "step %d in this one (the runs must evaluate at the same steps)", base_path,
                  path, e + 1, base->eval_step[e], run->eval_step[e]);
  GCOMP_FAIL_IF(base->neval != run->neval, GCOMP_ERR_INVALID,
                "%s and %s log different steps: %d records to step %d in the baseline's, %d to "
                "step %d in this one (a run that stopped early, or a different --steps?)",
                base_path, path, base->neval, base->steps, run->neval, run->steps);
  for (int e = 0; e < n; e++)
    GCOMP_FAIL_IF(isnan(base->test_acc[e]) != isnan(run->test_acc[e]), GCOMP_ERR_INVALID,
                  "%s and %s: step %d has an accuracy in %s only", base_path, path,
                  run->eval_step[e], isnan(run->test_acc[e]) ? "the baseline's log" : "this log");
  GCOMP_FAIL_IF(base->test_rows && run->test_rows && base->test_rows != run->test_rows,
                GCOMP_ERR_INVALID, "%s and %s: accuracy on %d and %d test rows (the same test "
                "set is needed)", base_path, path, base->test_rows, run->test_rows);
  run->curve_gap = gcomp_cv_curve_gap(run->eval_step, run->train_loss, base->train_loss, n);
  if (paired && base->test_rows && run->test_rows && isfinite(base->final_acc) &&
      isfinite(run->final_acc)) {
    /* net rows from the percentages; a log knows no more than the difference */
    long d = lround((base->final_acc - run->final_acc) * base->test_rows);
    paired->seeds = 1;
    paired->rows = base->test_rows;
    paired->lost = d > 0 ? (int)d : 0;
    paired->gained = d < 0 ? (int)-d : 0;
    paired->base_loss = base->final_loss;   /* loss_rows, train_rows 0: sampling not known */
  }
  return GCOMP_OK;
}
