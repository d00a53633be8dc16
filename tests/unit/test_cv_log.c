/* Logged curves (gcomp-converge run and compare): fed the same curves, the log path gives
 * the harness's own verdicts, word for word, with and without the noise floor and the
 * accuracy's resolution; and every malformed log is an error naming its file and line. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "converge.h"
#include "gcomp.h"

enum { NE = 11, ROWS = 400 };

static char dir[64];

static int make_dir(void **state) {
  (void)state;
  snprintf(dir, sizeof dir, "%s/test_cv_log.XXXXXX", P_tmpdir);
  assert_non_null(mkdtemp(dir));
  return 0;
}

static int remove_dir(void **state) {
  (void)state;
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  return system(cmd) == 0 ? 0 : -1;
}

/* A curve as the harness's training fills a run: evaluations every 20 steps, the final
 * metrics the last evaluation's, drift 0 (a log has none), its workers agreeing. `scale`
 * stretches the loss from step `from` on; acc_rows is the final accuracy in rows of ROWS. */
static void make_run(gcomp_cv_run *r, const char *spec, double scale, int from, int acc_rows,
                     double jitter) {
  memset(r, 0, sizeof *r);
  snprintf(r->spec, sizeof r->spec, "%s", spec);
  gcomp_codec *c = NULL;
  if (gcomp_codec_create(spec, &c) == GCOMP_OK) gcomp_codec_spec(c, r->canon, sizeof r->canon);
  gcomp_codec_destroy(c);
  r->neval = NE;
  r->eval_step = calloc(NE, sizeof *r->eval_step);
  r->train_loss = calloc(NE, sizeof *r->train_loss);
  r->test_acc = calloc(NE, sizeof *r->test_acc);
  r->drift = calloc(NE, sizeof *r->drift);
  assert_true(r->eval_step && r->train_loss && r->test_acc && r->drift);
  for (int e = 0; e < NE; e++) {
    r->eval_step[e] = 20 * e;
    r->train_loss[e] = 2.3 / (1 + 0.05 * r->eval_step[e]) * (1 + jitter * sin(e + 1.0));
    if (r->eval_step[e] >= from) r->train_loss[e] *= scale;
    r->test_acc[e] = (double)(acc_rows - 3 * (NE - 1 - e)) / ROWS;
  }
  r->steps = 200;
  r->final_loss = r->train_loss[NE - 1];
  r->final_acc = r->test_acc[NE - 1];
  r->replicas_equal = 1;
  r->nseeds = 1;
}

/* The run's curve as a program logs it (the accuracy in percent, every digit). */
static void write_log(const char *path, const gcomp_cv_run *r, int rows) {
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  for (int e = 0; e < r->neval; e++) {
    fprintf(f, "{\"step\": %d, \"loss\": ", r->eval_step[e]);
    if (isnan(r->train_loss[e])) fputs("NaN", f);
    else fprintf(f, "%.17g", r->train_loss[e]);
    fprintf(f, ", \"accuracy\": %.17g", r->test_acc[e] * 100);
    if (rows) fprintf(f, ", \"test_rows\": %d", rows);
    fputs(", \"comm\": {\"wire_bytes\": [1, 2], \"codec\": \"x}\"}}\n", f);
  }
  fclose(f);
}

typedef struct {
  const char *spec;
  double scale;
  int from, acc_rows, must_fail;
} codec_case;

static const codec_case cases[] = {
    {"bf16", 1.004, 0, 361, 0},                 /* within everything */
    {"bf16", 1.03, 180, 361, 0},                /* final loss over 1% */
    {"fp16", 1.05, 40, 361, 0},                 /* curve gap and loss */
    {"topk:ratio=0.01+ef", 1.02, 0, 352, 0},    /* accuracy: 9 rows down */
    {"bf16", 1.0, 0, 358, 0},                   /* 3 rows down: chance, by the paired test */
    {"topk:ratio=0.001", 1.6, 20, 330, 1},      /* must fail, and does */
    {"quant:bits=8,bucket=128", 1.001, 0, 361, 1},   /* must fail, and does not */
    {"none", NAN, 200, 361, 0},                 /* diverged at the end */
    {"none", 1.0, 0, 361, 0},                   /* exact */
};
enum { NC = sizeof cases / sizeof *cases };

/* Judges cases through the harness (runs as training fills them) and through the logs,
 * with `rows` test rows said (0: not said) and `ntwins` noise-floor twins; the verdicts
 * must be the same, word for word. */
static void same_verdicts(int rows, int ntwins) {
  static gcomp_cv_run runs[NC], logged[NC], twins[GCOMP_CV_MAX_TWINS], ltwins[GCOMP_CV_MAX_TWINS];
  static gcomp_cv_verdict v1[NC], v2[NC];
  static gcomp_cv_paired p1[NC], p2[NC];
  static int must_fail[NC];
  gcomp_cv_problem h = {.task = "t"}, l = {.task = "t"};
  char bpath[128], path[128];
  snprintf(bpath, sizeof bpath, "%s/base.jsonl", dir);
  make_run(&h.base, "baseline", 1, 0, 361, 0);
  write_log(bpath, &h.base, rows);
  assert_int_equal(gcomp_cv_log_read(bpath, "baseline", &l.base), GCOMP_OK);
  for (int i = 0; i < NC; i++) {
    const codec_case *c = &cases[i];
    make_run(&runs[i], c->spec, c->scale, c->from, c->acc_rows, 0);
    runs[i].curve_gap = gcomp_cv_curve_gap(runs[i].eval_step, runs[i].train_loss,
                                           h.base.train_loss, NE);
    must_fail[i] = c->must_fail;
    memset(&p1[i], 0, sizeof p1[i]);
    if (rows) {   /* the pairs a log can give: the net drop as rows lost */
      long d = lround((h.base.final_acc - runs[i].final_acc) * rows);
      p1[i] = (gcomp_cv_paired){.seeds = 1, .rows = rows, .lost = d > 0 ? (int)d : 0,
                                .gained = d < 0 ? (int)-d : 0, .base_loss = h.base.final_loss};
    }
    snprintf(path, sizeof path, "%s/run%d.jsonl", dir, i);
    write_log(path, &runs[i], rows);
    assert_int_equal(gcomp_cv_log_read(path, c->spec, &logged[i]), GCOMP_OK);
    snprintf(logged[i].canon, sizeof logged[i].canon, "%s", runs[i].canon);
    assert_int_equal(gcomp_cv_log_fit(&l.base, bpath, &logged[i], path, &p2[i]), GCOMP_OK);
  }
  int placements[GCOMP_CV_MAX_TWINS];
  for (int t = 0; t < ntwins; t++) {   /* fp32 again with other seeds: small wobbles */
    make_run(&twins[t], "baseline", 1, 0, 361 + (t % 2 ? 1 : -1), 0.004 * (t + 1));
    twins[t].curve_gap = gcomp_cv_curve_gap(twins[t].eval_step, twins[t].train_loss,
                                            h.base.train_loss, NE);
    placements[t] = t + 2;
    snprintf(path, sizeof path, "%s/twin%d.jsonl", dir, t);
    write_log(path, &twins[t], rows);
    assert_int_equal(gcomp_cv_log_read(path, "twin", &ltwins[t]), GCOMP_OK);
    assert_int_equal(gcomp_cv_log_fit(&l.base, bpath, &ltwins[t], path, NULL), GCOMP_OK);
  }
  if (ntwins) {
    assert_int_equal(gcomp_cv_floor_measure(&h.base, twins, placements, ntwins, &h.floor),
                     GCOMP_OK);
    assert_int_equal(gcomp_cv_floor_measure(&l.base, ltwins, placements, ntwins, &l.floor),
                     GCOMP_OK);
    h.ntwins = l.ntwins = ntwins;
    h.twins = twins, l.twins = ltwins;
  }
  h.nruns = l.nruns = NC;
  h.runs = runs, l.runs = logged;
  h.verdicts = v1, l.verdicts = v2;
  h.paired = p1, l.paired = p2;
  h.must_fail = l.must_fail = must_fail;
  int e1 = 0, e2 = 0;
  int f1 = gcomp_cv_judge_problem(&h, NULL, stderr, "harness", &e1);
  int f2 = gcomp_cv_judge_problem(&l, NULL, stderr, "logged", &e2);
  assert_int_equal(f1, f2);
  assert_int_equal(e1, 0);
  assert_int_equal(e2, 0);
  int fails = 0, notes = 0;
  for (int i = 0; i < NC; i++) {
    if (v1[i].pass != v2[i].pass || strcmp(v1[i].why, v2[i].why) || strcmp(v1[i].note, v2[i].note))
      fail_msg("case %d (%s): harness %d '%s' '%s', logged %d '%s' '%s'", i, cases[i].spec,
               v1[i].pass, v1[i].why, v1[i].note, v2[i].pass, v2[i].why, v2[i].note);
    assert_int_equal(v1[i].unresolved, v2[i].unresolved);
    assert_int_equal(v1[i].coarse, v2[i].coarse);
    fails += v1[i].pass == 0;
    notes += v1[i].note[0] != 0;
  }
  /* the cases bite: failures of each kind, and a must-fail that escaped */
  assert_true(fails >= (ntwins ? 2 : 5));   /* a floor widens every limit */
  assert_true(f1 >= 1);
  if (rows && !ntwins) assert_int_equal(notes, 1);   /* 3 rows of 400: within chance */
  gcomp_cv_run_free(&h.base);
  gcomp_cv_run_free(&l.base);
  for (int i = 0; i < NC; i++) gcomp_cv_run_free(&runs[i]), gcomp_cv_run_free(&logged[i]);
  for (int t = 0; t < ntwins; t++) gcomp_cv_run_free(&twins[t]), gcomp_cv_run_free(&ltwins[t]);
}

static void test_same_verdicts(void **state) {
  (void)state;
  same_verdicts(0, 0);
}

static void test_same_verdicts_rows(void **state) {
  (void)state;
  same_verdicts(ROWS, 0);
}

static void test_same_verdicts_floor(void **state) {
  (void)state;
  same_verdicts(ROWS, 3);
  same_verdicts(0, 2);
}

/* Writes text to a log and reads it; returns the status, the error in err. */
static int read_text(const char *text, char *err, size_t n, gcomp_cv_run *run) {
  char path[128];
  snprintf(path, sizeof path, "%s/bad.jsonl", dir);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
  int st = gcomp_cv_log_read(path, "x", run);
  snprintf(err, n, "%s", gcomp_last_error());
  return st;
}

static void expect_error(const char *text, const char *where, const char *what) {
  char err[1024];
  gcomp_cv_run run;
  int st = read_text(text, err, sizeof err, &run);
  if (st != GCOMP_ERR_INVALID || !strstr(err, where) || !strstr(err, what))
    fail_msg("log '%s': status %d, error '%s' (wanted '%s' and '%s')", text, st, err, where, what);
  assert_int_equal(run.status, GCOMP_ERR_INVALID);
  assert_null(run.eval_step);
  assert_true(strstr(run.error, what) != NULL);
}

static void test_bad_logs(void **state) {
  (void)state;
  const char *ok = "{\"step\": 0, \"loss\": 2.3}\n";
  expect_error("", "bad.jsonl", "no metrics records");
  expect_error("\n\n", "bad.jsonl", "no metrics records");
  expect_error("step 0 loss 1\n", "bad.jsonl:1", "not a JSON object");
  expect_error("{\"step\": 0, \"loss\": 2}\n[1]\n", "bad.jsonl:2", "not a JSON object");
  expect_error("{\"loss\": 2.3}\n", "bad.jsonl:1", "no \"step\"");
  expect_error("{\"step\": 3}\n", "bad.jsonl:1", "no \"loss\"");
  expect_error("{\"step\": 1.5, \"loss\": 2}\n", "bad.jsonl:1", "not a whole number");
  expect_error("{\"step\": -1, \"loss\": 2}\n", "bad.jsonl:1", "not a whole number");
  expect_error("{\"step\": 0, \"loss\": \"2\"}\n", "bad.jsonl:1", "\"loss\" is not a number");
  expect_error("{\"step\": 0, \"loss\": 2, \"accuracy\": 101}\n", "bad.jsonl:1",
               "not a percentage");
  expect_error("{\"step\": 0, \"loss\": 2}\n{\"step\": 0, \"loss\": 1}\n", "bad.jsonl:2",
               "steps must increase");
  expect_error("{\"step\": 0, \"loss\": 2, \"test_rows\": 10}\n"
               "{\"step\": 5, \"loss\": 1, \"test_rows\": 11}\n", "bad.jsonl:2", "test_rows 11");
  expect_error("{\"step\": 0, \"loss\": 2, \"test_rows\": 0}\n", "bad.jsonl:1", "test_rows");
  expect_error("{\"step\": 0, \"loss\": 2\n", "bad.jsonl:1", "ends before its object closes");
  expect_error("{\"step\": 0, \"loss\": 2} x\n", "bad.jsonl:1", "text after the object");
  expect_error("{\"step\": 0, \"loss\": 2, \"m\": [1, {\"a\": 2}\n", "bad.jsonl:1",
               "does not end on the line");
  expect_error("{step: 0}\n", "bad.jsonl:1", "a key must be a string");
  /* good ones: other keys of any kind skipped, NaN a diverged loss, blank lines */
  char err[1024];
  gcomp_cv_run run;
  assert_int_equal(read_text("{\"step\": 0, \"loss\": 2.5, \"n\": null, \"s\": \"a,}\\\"b\", "
                             "\"v\": [1, [2, {\"x\": \"]\"}]], \"ok\": true}\n\n"
                             "{ \"loss\" : NaN , \"step\" : 10 }\r\n", err, sizeof err, &run),
                   GCOMP_OK);
  assert_int_equal(run.neval, 2);
  assert_int_equal(run.eval_step[1], 10);
  assert_true(isnan(run.final_loss));
  assert_true(isnan(run.final_acc));
  assert_int_equal(run.steps, 10);
  gcomp_cv_run_free(&run);
  assert_int_equal(read_text(ok, err, sizeof err, &run), GCOMP_OK);
  gcomp_cv_run_free(&run);
  /* a file that is not there */
  assert_int_equal(gcomp_cv_log_read("/nonexistent/m.jsonl", "x", &run), GCOMP_ERR_INVALID);
  assert_non_null(strstr(gcomp_last_error(), "/nonexistent/m.jsonl: cannot read"));
  assert_non_null(strstr(run.error, "/nonexistent/m.jsonl"));
}

/* A run must log the baseline's steps, its accuracy on the same records and rows. */
static void expect_misfit(const char *base, const char *run, const char *what) {
  char bp[128], rp[128];
  snprintf(bp, sizeof bp, "%s/fb.jsonl", dir);
  snprintf(rp, sizeof rp, "%s/fr.jsonl", dir);
  FILE *f = fopen(bp, "w");
  fputs(base, f);
  fclose(f);
  f = fopen(rp, "w");
  fputs(run, f);
  fclose(f);
  gcomp_cv_run b, r;
  gcomp_cv_paired p;
  assert_int_equal(gcomp_cv_log_read(bp, "baseline", &b), GCOMP_OK);
  assert_int_equal(gcomp_cv_log_read(rp, "bf16", &r), GCOMP_OK);
  int st = gcomp_cv_log_fit(&b, bp, &r, rp, &p);
  const char *err = gcomp_last_error();
  if (st != GCOMP_ERR_INVALID || !strstr(err, "fb.jsonl") || !strstr(err, "fr.jsonl") ||
      !strstr(err, what))
    fail_msg("fit: status %d, error '%s' (wanted '%s')", st, err, what);
  gcomp_cv_run_free(&b);
  gcomp_cv_run_free(&r);
}

static void test_misfits(void **state) {
  (void)state;
  const char *base = "{\"step\": 0, \"loss\": 2, \"accuracy\": 50, \"test_rows\": 100}\n"
                     "{\"step\": 10, \"loss\": 1, \"accuracy\": 60, \"test_rows\": 100}\n";
  expect_misfit(base, "{\"step\": 0, \"loss\": 2, \"accuracy\": 50}\n", "1 to step 0");
  expect_misfit(base, "{\"step\": 0, \"loss\": 2, \"accuracy\": 50}\n"
                      "{\"step\": 12, \"loss\": 1, \"accuracy\": 60}\n", "step 10 in the baseline");
  expect_misfit(base, "{\"step\": 0, \"loss\": 2, \"accuracy\": 50}\n"
                      "{\"step\": 10, \"loss\": 1}\n", "has an accuracy in the baseline's log only");
  expect_misfit(base, "{\"step\": 0, \"loss\": 2, \"accuracy\": 50, \"test_rows\": 90}\n"
                      "{\"step\": 10, \"loss\": 1, \"accuracy\": 60}\n", "100 and 90 test rows");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_same_verdicts),
      cmocka_unit_test(test_same_verdicts_rows),
      cmocka_unit_test(test_same_verdicts_floor),
      cmocka_unit_test(test_bad_logs),
      cmocka_unit_test(test_misfits),
  };
  return cmocka_run_group_tests(tests, make_dir, remove_dir);
}
