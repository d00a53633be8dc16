/* The convergence harness checks itself: it must flag a deliberately biased codec and top-k
 * without error feedback, pass the same top-k with +ef (with momentum correction, as the
 * harness runs it), repeat itself bitwise, run 32 workers, and reject bad input with errors
 * that name the file and line or the token. */
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

static int setup_env(void **state) {
  (void)state;
  assert_int_equal(gcomp_cv_setup_env(0, NULL), GCOMP_OK);
  return 0;
}

/* A small Gaussian-mixture task: cheap, and the same every time. */
static void make_gmm(gcomp_cv_data *d, int ntrain) {
  gcomp_cv_synth s = {.kind = "gmm", .dim = 16, .nclass = 10, .ntrain = ntrain,
                      .ntest = ntrain / 2, .cond = 10, .sep = 0.6, .seed = 7};
  assert_int_equal(gcomp_cv_make_synth(&s, d), GCOMP_OK);
}

static void make_model(gcomp_cv_model *m, const char *kind, const gcomp_cv_data *d) {
  assert_int_equal(gcomp_cv_model_parse(kind, 32, m), GCOMP_OK);
  gcomp_cv_model_shape(m, d->nfeat, d->nclass);
}

static void base_cfg(gcomp_cv_train_cfg *cfg, int steps) {
  gcomp_cv_train_defaults(cfg);
  cfg->steps = steps;
  cfg->eval_every = steps / 20 > 0 ? steps / 20 : 1;
  cfg->algo = "auto";
}

static void run_ok(const gcomp_cv_train_cfg *cfg, const gcomp_cv_data *d, const gcomp_cv_model *m,
                   const char *spec, const gcomp_cv_run *base, gcomp_cv_run *out) {
  int st = gcomp_cv_train(cfg, d, m, spec, base, out);
  if (st != GCOMP_OK) fail_msg("run '%s' failed: %s", spec ? spec : "baseline", out->error);
  assert_true(out->replicas_equal);
}

static gcomp_cv_verdict judge_default(const gcomp_cv_run *base, const gcomp_cv_run *run) {
  gcomp_cv_tol tol = gcomp_cv_tol_for(NULL, run->spec, run->canon);
  gcomp_cv_verdict v;
  gcomp_cv_judge(base, run, &tol, NULL, &v);
  return v;
}

static int have_codec(const char *spec) {
  gcomp_codec *c = NULL;
  int st = gcomp_codec_create(spec, &c);
  gcomp_codec_destroy(c);
  return st == GCOMP_OK;
}

/* ---- the harness can fail ------------------------------------------------------------ */
static void test_biased_is_flagged_on_mlp(void **state) {
  (void)state;
  gcomp_cv_data d;
  gcomp_cv_model m;
  gcomp_cv_train_cfg cfg;
  make_gmm(&d, 2000);
  make_model(&m, "mlp", &d);
  base_cfg(&cfg, 300);
  gcomp_cv_run base, none, biased;
  run_ok(&cfg, &d, &m, NULL, NULL, &base);
  run_ok(&cfg, &d, &m, "none", &base, &none);
  run_ok(&cfg, &d, &m, "test_biased", &base, &biased);
  gcomp_cv_verdict vn = judge_default(&base, &none), vb = judge_default(&base, &biased);
  /* the identity passes (no false alarm) and the biased codec is caught */
  if (vn.pass != 1) fail_msg("'none' was flagged: %s", vn.why);
  if (vb.pass != 0) fail_msg("test_biased was not flagged (loss %g vs %g, acc %g vs %g)",
                             biased.final_loss, base.final_loss, biased.final_acc, base.final_acc);
  /* the verdict names the metric and the margin */
  assert_true(strstr(vb.why, "above the baseline") || strstr(vb.why, "below the baseline"));
  assert_non_null(strstr(vb.why, "exceeded by"));
  assert_true(biased.relerr_mean > 0.05);                    /* its gradients are visibly wrong */
  assert_true(none.relerr_mean < 1e-5);
  gcomp_cv_run_free(&base);
  gcomp_cv_run_free(&none);
  gcomp_cv_run_free(&biased);
  gcomp_cv_data_free(&d);
}

/* On the real data set's MLP (4810 parameters): top-k at 0.1% keeps ~5 values per worker and
 * step. Without error feedback the rest is lost and the model falls behind; with +ef it is
 * only delayed. The harness runs +ef with momentum correction (momentum in the error
 * feedback, none in the optimizer), and says so in the run. (On the synthetic MLPs 0.1%+ef
 * still trails after 600 steps, with or without the correction, as too few steps for its
 * delays to catch up: the assertion lives where the claim holds, on digits.) */
static void test_topk_without_ef_flagged_with_ef_passes(void **state) {
  (void)state;
  if (!have_codec("topk:ratio=0.001") || !have_codec("topk:ratio=0.001+ef")) {
    print_message("topk is not in this build yet: %s\n", gcomp_last_error());
    skip();
  }
  if (access(GCOMP_CV_DIGITS_SRC, R_OK) != 0) {
    print_message("digits data set not extracted (run scripts/setup)\n");
    skip();
  }
  gcomp_cv_data d;
  assert_int_equal(gcomp_cv_load_csv(GCOMP_CV_DIGITS_SRC, "digits", 10, 0.2, 12345, &d), GCOMP_OK);
  gcomp_cv_model m;
  assert_int_equal(gcomp_cv_model_parse("mlp", 64, &m), GCOMP_OK);
  gcomp_cv_model_shape(&m, d.nfeat, d.nclass);
  gcomp_cv_train_cfg cfg;
  base_cfg(&cfg, 300);
  gcomp_cv_run base, noef, ef;
  run_ok(&cfg, &d, &m, NULL, NULL, &base);
  run_ok(&cfg, &d, &m, "topk:ratio=0.001", &base, &noef);
  run_ok(&cfg, &d, &m, "topk:ratio=0.001+ef", &base, &ef);
  gcomp_cv_verdict vn = judge_default(&base, &noef), ve = judge_default(&base, &ef);
  if (vn.pass != 0) fail_msg("topk:ratio=0.001 without EF was not flagged (acc %g vs %g)",
                             noef.final_acc, base.final_acc);
  if (ve.pass != 1) fail_msg("topk:ratio=0.001+ef was flagged: %s", ve.why);
  assert_true(noef.wire_bytes * 5 < base.wire_bytes);   /* it really was sparse on the wire */
  assert_true(ef.wire_bytes * 5 < base.wire_bytes);
  /* what ran: the corrected spec, and the optimizer without momentum; without EF, as given */
  assert_true(ef.corrected && ef.ef_momentum == 0.9 && ef.opt_momentum == 0);
  assert_non_null(strstr(ef.canon, "+ef:dtype=fp32,momentum=0.9,mask=0"));
  assert_true(!noef.corrected && noef.ef_momentum == 0 && noef.opt_momentum == 0.9);
  assert_null(strstr(noef.canon, "momentum"));
  gcomp_cv_run_free(&base);
  gcomp_cv_run_free(&noef);
  gcomp_cv_run_free(&ef);
  gcomp_cv_data_free(&d);
}

/* ---- momentum correction ------------------------------------------------------------------ */
static void expect_plan(const gcomp_cv_train_cfg *cfg, const char *spec, const char *want_in_run,
                        double ef_m, double opt_m, int corrected) {
  gcomp_cv_codec_plan p;
  if (gcomp_cv_plan_codec(cfg, spec, &p) != GCOMP_OK) fail_msg("'%s': %s", spec, gcomp_last_error());
  if (want_in_run ? !strstr(p.run_spec, want_in_run) : strcmp(p.run_spec, spec) != 0)
    fail_msg("'%s' runs as '%s' (wanted %s '%s')", spec, p.run_spec,
             want_in_run ? "something with" : "exactly", want_in_run ? want_in_run : spec);
  if (p.ef_momentum != ef_m || p.opt_momentum != opt_m || p.corrected != corrected)
    fail_msg("'%s': ef momentum %g, optimizer %g, corrected %d", spec, p.ef_momentum,
             p.opt_momentum, p.corrected);
}

static void test_momentum_correction_plan(void **state) {
  (void)state;
  gcomp_cv_train_cfg cfg;
  base_cfg(&cfg, 10);
  const char *mc = "+ef:dtype=fp32,momentum=0.9,mask=0";
  expect_plan(&cfg, "topk:ratio=0.01+ef", mc, 0.9, 0, 1);
  expect_plan(&cfg, "topk:k=3+ef+zstd", "+ef:dtype=fp32,momentum=0.9,mask=0+zstd:", 0.9, 0, 1);
  expect_plan(&cfg, "topk:ratio=0.01+ef:dtype=bf16", "+ef:dtype=bf16,momentum=0.9,mask=0", 0.9, 0, 1);
  /* no error feedback, not a sparsifier, or momentum named in the spec: as given */
  expect_plan(&cfg, "topk:ratio=0.01", NULL, 0, 0.9, 0);
  expect_plan(&cfg, "none+ef", NULL, 0, 0.9, 0);
  expect_plan(&cfg, "fp16+ef", NULL, 0, 0.9, 0);
  expect_plan(&cfg, "topk:ratio=0.01+ef:momentum=0", NULL, 0, 0.9, 0);
  expect_plan(&cfg, "topk:ratio=0.01+ef:momentum=0.5", NULL, 0.5, 0, 0);
  cfg.momentum_correction = GCOMP_CV_MC_MASKED;
  expect_plan(&cfg, "topk:ratio=0.01+ef", "+ef:dtype=fp32,momentum=0.9,mask=1", 0.9, 0, 1);
  cfg.momentum_correction = GCOMP_CV_MC_OFF;
  expect_plan(&cfg, "topk:ratio=0.01+ef", NULL, 0, 0.9, 0);
  cfg.momentum_correction = GCOMP_CV_MC_ON;
  cfg.momentum = 0;   /* plain SGD: nothing to correct */
  expect_plan(&cfg, "topk:ratio=0.01+ef", NULL, 0, 0, 0);
  gcomp_cv_codec_plan p;
  assert_int_equal(gcomp_cv_plan_codec(&cfg, "topk:ratio=2+ef", &p), GCOMP_ERR_INVALID);
  assert_non_null(strstr(gcomp_last_error(), "ratio"));
}

/* The wiring, end to end: top-k that keeps every value (ratio=1) with ef momentum and no
 * optimizer momentum is momentum SGD exactly (the workers' velocities average to the
 * global one), so it must follow the baseline to rounding. Momentum applied twice, or
 * not at all, or masking (which turns a value sent every step into plain SGD) would not. */
static void test_momentum_correction_is_momentum_sgd(void **state) {
  (void)state;
  gcomp_cv_data d;
  make_gmm(&d, 1000);
  gcomp_cv_model m;
  make_model(&m, "softmax", &d);
  gcomp_cv_train_cfg cfg;
  base_cfg(&cfg, 100);
  gcomp_cv_run base, dense, masked;
  run_ok(&cfg, &d, &m, NULL, NULL, &base);
  run_ok(&cfg, &d, &m, "topk:ratio=1+ef", &base, &dense);
  assert_true(dense.corrected && dense.opt_momentum == 0);
  if (!(dense.final_drift < 1e-4 && dense.relerr_max < 1e-5))
    fail_msg("ratio=1 with momentum correction: drift %g, gradient error %g", dense.final_drift,
             dense.relerr_max);
  cfg.momentum_correction = GCOMP_CV_MC_MASKED;
  run_ok(&cfg, &d, &m, "topk:ratio=1+ef", &base, &masked);
  assert_true(masked.final_drift > 1e-2);   /* plain SGD: visibly another trajectory */
  gcomp_cv_run_free(&base);
  gcomp_cv_run_free(&dense);
  gcomp_cv_run_free(&masked);
  gcomp_cv_data_free(&d);
}

/* Learning-rate schedules: their values, and that they reach the optimizer on both paths
 * (momentum in the optimizer, momentum in the codec): with every value sent, the corrected
 * run under a cosine schedule is still momentum SGD under that schedule. */
static void test_lr_schedules(void **state) {
  (void)state;
  gcomp_cv_train_cfg cfg;
  base_cfg(&cfg, 100);
  cfg.lr = 0.2;
  assert_true(gcomp_cv_lr_at(&cfg, 0) == 0.2 && gcomp_cv_lr_at(&cfg, 99) == 0.2);
  cfg.lr_schedule = GCOMP_CV_LR_COSINE;
  assert_true(fabs(gcomp_cv_lr_at(&cfg, 0) - 0.2) < 1e-12);
  assert_true(fabs(gcomp_cv_lr_at(&cfg, 50) - 0.1) < 1e-12);
  assert_true(gcomp_cv_lr_at(&cfg, 99) > 0 && gcomp_cv_lr_at(&cfg, 99) < 0.2 * 1e-3);
  cfg.lr_schedule = GCOMP_CV_LR_STEP;
  assert_true(gcomp_cv_lr_at(&cfg, 49) == 0.2);
  assert_true(fabs(gcomp_cv_lr_at(&cfg, 50) - 0.02) < 1e-12);
  assert_true(fabs(gcomp_cv_lr_at(&cfg, 74) - 0.02) < 1e-12);
  assert_true(fabs(gcomp_cv_lr_at(&cfg, 75) - 0.002) < 1e-12);

  gcomp_cv_data d;
  make_gmm(&d, 1000);
  gcomp_cv_model m;
  make_model(&m, "softmax", &d);
  base_cfg(&cfg, 100);
  gcomp_cv_run constant, base, dense;
  run_ok(&cfg, &d, &m, NULL, NULL, &constant);
  cfg.lr_schedule = GCOMP_CV_LR_COSINE;
  run_ok(&cfg, &d, &m, NULL, NULL, &base);
  run_ok(&cfg, &d, &m, "topk:ratio=1+ef", &base, &dense);
  assert_memory_not_equal(constant.theta, base.theta, base.nparams * sizeof(float));
  assert_true(dense.corrected);
  if (!(dense.final_drift < 1e-4))
    fail_msg("ratio=1 with momentum correction under cosine: drift %g", dense.final_drift);
  gcomp_cv_run_free(&constant);
  gcomp_cv_run_free(&base);
  gcomp_cv_run_free(&dense);
  gcomp_cv_data_free(&d);
}

/* Coverage: the baseline delivers every parameter every step; top-k with k values per worker
 * moves between k and W x k parameters per step (the workers' picks may overlap) */
static void test_coverage(void **state) {
  (void)state;
  gcomp_cv_data d;
  make_gmm(&d, 1000);
  gcomp_cv_model m;
  make_model(&m, "softmax", &d);   /* 16 x 10 + 10 = 170 parameters */
  gcomp_cv_train_cfg cfg;
  base_cfg(&cfg, 50);
  gcomp_cv_run base, sparse;
  run_ok(&cfg, &d, &m, NULL, NULL, &base);
  assert_true(base.moved_frac == 1.0 && base.never_moved_frac == 0.0);
  run_ok(&cfg, &d, &m, "topk:ratio=0.01,exact=1+ef", &base, &sparse);   /* k = 2 of 170 */
  double k = 2.0 / 170, W = cfg.workers;
  if (!(sparse.moved_frac >= k - 1e-12 && sparse.moved_frac <= W * k + 1e-12))
    fail_msg("top-k moved %g of the parameters per step, not within [%g, %g]", sparse.moved_frac,
             k, W * k);
  assert_true(sparse.never_moved_frac >= 0 && sparse.never_moved_frac < 1);
  gcomp_cv_run_free(&base);
  gcomp_cv_run_free(&sparse);
  gcomp_cv_data_free(&d);
}

/* ---- reproducible, bitwise --------------------------------------------------------------- */
static void expect_same(const gcomp_cv_run *a, const gcomp_cv_run *b) {
  assert_int_equal(a->nparams, b->nparams);
  assert_memory_equal(a->theta, b->theta, a->nparams * sizeof(float));
  assert_memory_equal(a->train_loss, b->train_loss, (size_t)a->neval * sizeof(double));
  assert_memory_equal(a->test_acc, b->test_acc, (size_t)a->neval * sizeof(double));
  assert_memory_equal(a->drift, b->drift, (size_t)a->neval * sizeof(double));
  assert_memory_equal(a->grad_relerr, b->grad_relerr, (size_t)a->steps * sizeof(double));
  assert_memory_equal(a->step_loss, b->step_loss, (size_t)a->steps * sizeof(double));
  assert_true(a->wire_bytes == b->wire_bytes);
}

static void test_reproducible_bitwise(void **state) {
  (void)state;
  gcomp_cv_data d1, d2;
  make_gmm(&d1, 1000);
  make_gmm(&d2, 1000);
  assert_memory_equal(d1.xtrain, d2.xtrain, (size_t)d1.ntrain * (size_t)d1.nfeat * sizeof(float));
  gcomp_cv_model m;
  make_model(&m, "mlp", &d1);
  gcomp_cv_train_cfg cfg;
  base_cfg(&cfg, 60);
  /* error feedback and stochastic rounding carry state from step to step: the hardest case */
  const char *spec = have_codec("fp16:round=stochastic+ef") ? "fp16:round=stochastic+ef"
                                                            : "test_biased+ef";
  gcomp_cv_run b1, b2, r1, r2;
  run_ok(&cfg, &d1, &m, NULL, NULL, &b1);
  run_ok(&cfg, &d2, &m, NULL, NULL, &b2);
  expect_same(&b1, &b2);
  run_ok(&cfg, &d1, &m, spec, &b1, &r1);
  run_ok(&cfg, &d2, &m, spec, &b2, &r2);
  expect_same(&r1, &r2);
  /* and a different seed gives different numbers: the check above could fail */
  cfg.seed = 2;
  gcomp_cv_run b3;
  run_ok(&cfg, &d1, &m, NULL, NULL, &b3);
  assert_memory_not_equal(b1.theta, b3.theta, b1.nparams * sizeof(float));
  gcomp_cv_run_free(&b1);
  gcomp_cv_run_free(&b2);
  gcomp_cv_run_free(&b3);
  gcomp_cv_run_free(&r1);
  gcomp_cv_run_free(&r2);
  gcomp_cv_data_free(&d1);
  gcomp_cv_data_free(&d2);
}

/* ---- scale: 32 workers, one thread and one loopback rank each ----------------------------- */
static void test_32_workers(void **state) {
  (void)state;
  gcomp_cv_data d;
  make_gmm(&d, 1000);
  gcomp_cv_model m;
  make_model(&m, "softmax", &d);
  gcomp_cv_train_cfg cfg;
  base_cfg(&cfg, 20);
  cfg.workers = 32;
  cfg.batch = 4;
  gcomp_cv_run base, run;
  run_ok(&cfg, &d, &m, NULL, NULL, &base);
  run_ok(&cfg, &d, &m, "none+ef", &base, &run);
  assert_true(base.train_loss[base.neval - 1] < base.train_loss[0]);   /* it learns */
  assert_true(run.final_drift < 1e-4);
  assert_true(run.relerr_max < 1e-5);
  gcomp_cv_run_free(&base);
  gcomp_cv_run_free(&run);
  gcomp_cv_data_free(&d);
}

/* ---- one allreduce per tensor: every tensor its own error-feedback slot ------------------- */
static void test_per_layer(void **state) {
  (void)state;
  gcomp_cv_data d;
  make_gmm(&d, 1000);
  gcomp_cv_model m;
  make_model(&m, "mlp", &d);
  size_t off[4], len[4];
  assert_int_equal(gcomp_cv_model_tensors(&m, off, len), 4);
  assert_true(off[3] + len[3] == m.nparams);
  gcomp_cv_train_cfg cfg;
  base_cfg(&cfg, 60);
  cfg.per_layer = 1;
  const char *ef = have_codec("topk:ratio=0.05+ef") ? "topk:ratio=0.05+ef" : "test_biased+ef";
  gcomp_cv_run base, exact, r1, r2;
  run_ok(&cfg, &d, &m, NULL, NULL, &base);
  run_ok(&cfg, &d, &m, "none+ef", &base, &exact);
  assert_true(exact.relerr_max < 1e-5);   /* identity through four keyed calls */
  assert_true(exact.final_drift < 1e-4);
  run_ok(&cfg, &d, &m, ef, &base, &r1);
  run_ok(&cfg, &d, &m, ef, &base, &r2);
  expect_same(&r1, &r2);
  assert_true(r1.relerr_mean > 1e-3);      /* the lossy codec really ran on every call */
  /* the flat call gives a different (but also valid) trajectory for a lossy codec */
  cfg.per_layer = 0;
  gcomp_cv_run flat;
  run_ok(&cfg, &d, &m, ef, &base, &flat);
  assert_memory_not_equal(flat.theta, r1.theta, m.nparams * sizeof(float));
  gcomp_cv_run_free(&base);
  gcomp_cv_run_free(&exact);
  gcomp_cv_run_free(&r1);
  gcomp_cv_run_free(&r2);
  gcomp_cv_run_free(&flat);
  gcomp_cv_data_free(&d);
}

/* ---- bad input ---------------------------------------------------------------------------- */
static char *write_tmp(const char *text) {
  static char path[64];
  snprintf(path, sizeof path, "/tmp/gcomp_cv_XXXXXX");
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  size_t n = strlen(text);
  assert_int_equal(write(fd, text, n), (ssize_t)n);
  close(fd);
  return path;
}

static void expect_csv_error(const char *text, int max_classes, const char *needle1,
                             const char *needle2) {
  char *path = write_tmp(text);
  gcomp_cv_data d;
  int st = gcomp_cv_load_csv(path, NULL, max_classes, 0.25, 1, &d);
  const char *err = gcomp_last_error();
  if (st == GCOMP_OK || !strstr(err, path) || !strstr(err, needle1) || !strstr(err, needle2))
    fail_msg("csv %s: status %d, error '%s' (wanted '%s' and '%s')", path, st, err, needle1,
             needle2);
  unlink(path);
}

static void test_bad_csv(void **state) {
  (void)state;
  expect_csv_error("a,b,label\n1,2,0\n3,4\n5,6,1\n", 10, ":3:", "malformed line");
  expect_csv_error("1,2,0\n3,x,1\n", 10, ":2:", "field 2 'x' is not a number");
  expect_csv_error("1,2,0\n3,4,12\n", 10, ":2:", "label '12' out of range");
  expect_csv_error("1,2,0\n3,4,1.5\n", 10, ":2:", "label '1.5' out of range");
  expect_csv_error("1,2,-1\n", 10, ":1:", "label '-1' out of range");
  expect_csv_error("", 10, "empty file", "no data rows");
  expect_csv_error("f1,f2,label\n\n", 10, "empty file", "no data rows");
  /* a header and good rows load, with the label last */
  char *path = write_tmp("f1,f2,label\n1,2,0\n3,4,1\n5,6,2\n7,8,1\n");
  gcomp_cv_data d;
  assert_int_equal(gcomp_cv_load_csv(path, NULL, 10, 0.25, 1, &d), GCOMP_OK);
  assert_int_equal(d.nfeat, 2);
  assert_int_equal(d.nclass, 3);
  assert_int_equal(d.ntrain + d.ntest, 4);
  gcomp_cv_data_free(&d);
  unlink(path);
  gcomp_cv_data d2;
  assert_int_not_equal(gcomp_cv_load_csv("/nonexistent/x.csv", NULL, 10, 0.25, 1, &d2), GCOMP_OK);
  assert_non_null(strstr(gcomp_last_error(), "/nonexistent/x.csv"));
}

static void test_digits_loads(void **state) {
  (void)state;
  if (access(GCOMP_CV_DIGITS_SRC, R_OK) != 0) {
    print_message("digits data set not extracted (run scripts/setup)\n");
    skip();
  }
  gcomp_cv_data d;
  assert_int_equal(gcomp_cv_load_csv(GCOMP_CV_DIGITS_SRC, "digits", 10, 0.2, 12345, &d), GCOMP_OK);
  assert_int_equal(d.nfeat, 64);
  assert_int_equal(d.nclass, 10);
  assert_int_equal(d.ntrain + d.ntest, 1797);
  int seen[10] = {0};
  for (int i = 0; i < d.ntrain; i++) seen[d.ytrain[i]]++;
  for (int c = 0; c < 10; c++) assert_true(seen[c] > 100);
  gcomp_cv_data_free(&d);
  /* a few hundred rows of it, as a small data set: the same split fraction, every class,
   * the same subset every time; a count outside [2, rows] is an error naming it */
  gcomp_cv_data a, b;
  assert_int_equal(gcomp_cv_load_csv_rows(GCOMP_CV_DIGITS_SRC, "digits", 10, 0.2, 12345, 300, &a),
                   GCOMP_OK);
  assert_true(a.ntrain == 240 && a.ntest == 60 && a.nclass == 10);
  assert_int_equal(gcomp_cv_load_csv_rows(GCOMP_CV_DIGITS_SRC, "digits", 10, 0.2, 12345, 300, &b),
                   GCOMP_OK);
  assert_memory_equal(a.xtest, b.xtest, (size_t)a.ntest * 64 * sizeof(float));
  int cls[10] = {0};
  for (int i = 0; i < a.ntrain; i++) cls[a.ytrain[i]]++;
  for (int c = 0; c < 10; c++) assert_true(cls[c] > 10);
  gcomp_cv_data_free(&a);
  gcomp_cv_data_free(&b);
  assert_int_equal(gcomp_cv_load_csv_rows(GCOMP_CV_DIGITS_SRC, "digits", 10, 0.2, 12345, 1798, &a),
                   GCOMP_ERR_INVALID);
  assert_non_null(strstr(gcomp_last_error(), "cannot keep 1798 of its 1797 rows"));
  assert_int_equal(gcomp_cv_load_csv_rows(GCOMP_CV_DIGITS_SRC, "digits", 10, 0.2, 12345, 1, &a),
                   GCOMP_ERR_INVALID);
}

static void test_unknown_codec(void **state) {
  (void)state;
  gcomp_cv_data d;
  make_gmm(&d, 200);
  gcomp_cv_model m;
  make_model(&m, "softmax", &d);
  gcomp_cv_train_cfg cfg;
  base_cfg(&cfg, 5);
  gcomp_cv_run base, run;
  run_ok(&cfg, &d, &m, NULL, NULL, &base);
  assert_int_equal(gcomp_cv_train(&cfg, &d, &m, "bogus:ratio=1", &base, &run), GCOMP_ERR_INVALID);
  assert_non_null(strstr(run.error, "bogus"));
  gcomp_cv_verdict v;
  gcomp_cv_tol tol = gcomp_cv_tol_for(NULL, run.spec, run.canon);
  gcomp_cv_judge(&base, &run, &tol, NULL, &v);
  assert_int_equal(v.pass, -1);
  gcomp_cv_run_free(&run);
  assert_int_equal(gcomp_cv_train(&cfg, &d, &m, "none+ef:bad=1", &base, &run), GCOMP_ERR_INVALID);
  assert_non_null(strstr(run.error, "bad"));
  gcomp_cv_run_free(&run);
  /* a baseline evaluated at other steps is refused (drift and curve gap read its points:
   * they were read past its end) */
  gcomp_cv_train_cfg every1 = cfg;
  every1.eval_every = 2;   /* the baseline evaluated every step */
  assert_int_equal(gcomp_cv_train(&every1, &d, &m, "bf16", &base, &run), GCOMP_ERR_INVALID);
  assert_non_null(strstr(gcomp_last_error(), "evaluation points"));
  gcomp_cv_run_free(&run);
  gcomp_cv_run_free(&base);
  gcomp_cv_data_free(&d);
  gcomp_cv_model bad;
  assert_int_equal(gcomp_cv_model_parse("resnet", 8, &bad), GCOMP_ERR_INVALID);
  assert_non_null(strstr(gcomp_last_error(), "resnet"));
}

/* ---- tolerances ------------------------------------------------------------------------------ */
static void test_tolerance_rules(void **state) {
  (void)state;
  gcomp_cv_tolset *ts;
  assert_int_equal(gcomp_cv_tolset_create(&ts), GCOMP_OK);
  gcomp_cv_tol t = gcomp_cv_tol_for(ts, "bf16", "bf16");
  assert_true(t.acc_pts == 0.5 && t.loss_rel == 0.01);
  t = gcomp_cv_tol_for(ts, "topk:ratio=0.01+ef", "topk:ratio=0.01,exact=0+ef");
  assert_true(t.acc_pts == 1.0);
  assert_int_equal(gcomp_cv_tolset_add(ts, "topk* acc=2,loss=inf", "--tol"), GCOMP_OK);
  assert_int_equal(gcomp_cv_tolset_add(ts, "*+ef drift=0.5", "--tol"), GCOMP_OK);
  t = gcomp_cv_tol_for(ts, "topk:ratio=0.01+ef", "topk:ratio=0.01,exact=0+ef");
  assert_true(t.acc_pts == 2.0 && isinf(t.loss_rel) && t.drift == 0.5);
  t = gcomp_cv_tol_for(ts, "bf16", "bf16");
  assert_true(t.acc_pts == 0.5);
  assert_int_equal(gcomp_cv_tolset_add(ts, "bf16 accuracy=1", "cfg:3"), GCOMP_ERR_INVALID);
  assert_non_null(strstr(gcomp_last_error(), "cfg:3"));
  assert_non_null(strstr(gcomp_last_error(), "accuracy"));
  assert_int_equal(gcomp_cv_tolset_add(ts, "bf16 acc=-1", "cfg:4"), GCOMP_ERR_INVALID);
  assert_int_equal(gcomp_cv_tolset_add(ts, "bf16", "cfg:5"), GCOMP_ERR_INVALID);
  gcomp_cv_tolset_destroy(ts);

  /* a drop equal to the tolerance is within it, although its binary value is a hair above:
   * 1620 and 1610 of 2000 right are 81.00% and 80.50%, 0.5 points; one fewer is outside */
  {
    gcomp_cv_run b = {.final_loss = 1.0, .final_acc = 1620 / 2000.0, .replicas_equal = 1};
    gcomp_cv_run x = {.final_loss = 1.0, .final_acc = 1610 / 2000.0, .replicas_equal = 1};
    gcomp_cv_tol half = {0.5, INFINITY, INFINITY, INFINITY};
    gcomp_cv_verdict vv;
    gcomp_cv_judge(&b, &x, &half, NULL, &vv);
    if (vv.pass != 1) fail_msg("a 0.5-point drop against a 0.5-point tolerance: %s", vv.why);
    x.final_acc = 1609 / 2000.0;
    gcomp_cv_judge(&b, &x, &half, NULL, &vv);
    assert_int_equal(vv.pass, 0);
  }

  /* the verdict names the metric and the margin */
  gcomp_cv_run base = {.final_loss = 1.0, .final_acc = 0.90, .replicas_equal = 1};
  gcomp_cv_run run = {.final_loss = 1.03, .final_acc = 0.893, .replicas_equal = 1};
  gcomp_cv_tol tol = {0.5, 0.01, INFINITY, INFINITY};
  gcomp_cv_verdict v;
  gcomp_cv_judge(&base, &run, &tol, NULL, &v);
  assert_int_equal(v.pass, 0);
  assert_non_null(strstr(v.why, "test accuracy"));
  assert_non_null(strstr(v.why, "exceeded by 0.20"));
  assert_non_null(strstr(v.why, "3.00% above"));
  run.final_acc = 0.899, run.final_loss = 1.005;
  gcomp_cv_judge(&base, &run, &tol, NULL, &v);
  assert_int_equal(v.pass, 1);
  run.replicas_equal = 0;
  gcomp_cv_judge(&base, &run, &tol, NULL, &v);
  assert_int_equal(v.pass, 0);
  assert_string_equal(v.hint, "");   /* no coverage figures: not a sparsifier */

  /* a loss difference equal to the tolerance is within it (1.1 / 1.0 - 1 is a hair above
   * 0.1 in binary), as for accuracy */
  {
    gcomp_cv_run b1 = {.final_loss = 1.0, .final_acc = 0.9, .replicas_equal = 1};
    gcomp_cv_run x1 = {.final_loss = 1.1, .final_acc = 0.9, .replicas_equal = 1};
    gcomp_cv_tol ten = {INFINITY, 0.10, INFINITY, INFINITY};
    gcomp_cv_judge(&b1, &x1, &ten, NULL, &v);
    if (v.pass != 1) fail_msg("a 10%% loss rise against a 10%% tolerance: %s", v.why);
    x1.final_loss = 1.1001;
    gcomp_cv_judge(&b1, &x1, &ten, NULL, &v);
    assert_int_equal(v.pass, 0);
    /* a baseline that diverged is no reference: an error, not a pass or a codec's failure */
    b1.final_loss = NAN;
    gcomp_cv_judge(&b1, &x1, &ten, NULL, &v);
    assert_int_equal(v.pass, -1);
    assert_non_null(strstr(v.why, "baseline itself diverged"));
  }

  /* a failed sparsifier with error feedback says how often each parameter moved; one
   * without error feedback, a passing one, or a dense codec gets no such note */
  gcomp_cv_run sp = {.final_loss = 1.2, .final_acc = 0.90, .replicas_equal = 1, .steps = 600,
                     .moved_frac = 0.0086};
  snprintf(sp.spec, sizeof sp.spec, "topk:ratio=0.001+ef");
  snprintf(sp.canon, sizeof sp.canon, "topk:ratio=0.001,exact=0+ef:momentum=0.9");
  gcomp_cv_tol topk = {1.0, 0.10, INFINITY, INFINITY};
  gcomp_cv_judge(&base, &sp, &topk, NULL, &v);
  assert_int_equal(v.pass, 0);
  if (!strstr(v.hint, "moved 5.2 times in 600 steps")) fail_msg("hint: '%s'", v.hint);
  snprintf(sp.canon, sizeof sp.canon, "topk:ratio=0.001,exact=0");
  gcomp_cv_judge(&base, &sp, &topk, NULL, &v);
  assert_int_equal(v.pass, 0);
  assert_string_equal(v.hint, "");
  snprintf(sp.canon, sizeof sp.canon, "topk:ratio=0.001,exact=0+ef");
  sp.final_loss = 1.05;
  gcomp_cv_judge(&base, &sp, &topk, NULL, &v);
  assert_int_equal(v.pass, 1);
  assert_string_equal(v.hint, "");
  sp.final_loss = 1.2, sp.moved_frac = 1.0;
  gcomp_cv_judge(&base, &sp, &topk, NULL, &v);
  assert_int_equal(v.pass, 0);
  assert_string_equal(v.hint, "");
}

/* ---- the noise floor ------------------------------------------------------------------------ */
/* Accuracy and loss floors are t99(n) times the rms of the twins' signed deviations; gap and
 * drift floors a prediction bound on the amount, mean + t99(n-1) sd sqrt(1 + 1/n). A
 * verdict's limit is the tolerance plus the floor; without a floor (NULL or n 0) verdicts
 * are the tolerances'. */
static void test_noise_floor_verdicts(void **state) {
  (void)state;
  gcomp_cv_run base = {.final_loss = 1.0, .final_acc = 0.80, .replicas_equal = 1};
  gcomp_cv_run tw[3] = {
      {.final_loss = 1.04, .final_acc = 0.806, .curve_gap = 0.01, .final_drift = 0.2},
      {.final_loss = 0.93, .final_acc = 0.797, .curve_gap = 0.03, .final_drift = 0.1},
      {.final_loss = 1.0, .final_acc = 0.80, .curve_gap = 0.0, .final_drift = 0.0}};
  const int pl[3] = {1, 2, 4};
  gcomp_cv_floor fl;
  assert_int_equal(gcomp_cv_floor_measure(&base, tw, pl, 3, &fl), GCOMP_OK);
  assert_int_equal(fl.n, 3);
  /* by hand, with t99(3) = 4.541 and t99(2) = 6.965 (one-sided Student's t tables):
   * accuracy (+0.6, -0.3, 0) points: rms sqrt(0.15); loss (+4%, -7%, 0): rms sqrt(0.0065/3);
   * gaps (1%, 3%, 0): mean 1/75, sd sqrt(7/30000); drifts (0.2, 0.1, 0): mean 0.1, sd 0.1 */
  assert_true(fabs(gcomp_cv_t99(3) - 4.541) < 1e-12 && fabs(gcomp_cv_t99(2) - 6.965) < 1e-12);
  assert_true(fabs(fl.acc_pts - 4.541 * sqrt(0.15)) < 1e-9);
  assert_true(fabs(fl.loss_rel - 4.541 * sqrt(0.0065 / 3)) < 1e-9);
  assert_true(fabs(fl.gap_rel - (1.0 / 75 + 6.965 * sqrt(7.0 / 30000) * sqrt(4.0 / 3))) < 1e-9);
  assert_true(fabs(fl.drift - (0.1 + 6.965 * 0.1 * sqrt(4.0 / 3))) < 1e-9);
  assert_true(fl.placements[0] == 1 && fl.placements[2] == 4);
  assert_true(isnan(gcomp_cv_t99(0)) && isnan(gcomp_cv_t99(9)));
  assert_true(gcomp_cv_t99(8) < gcomp_cv_t99(2));   /* more twins, tighter */

  /* outside the tolerances alone, inside tolerance + floor on every metric */
  gcomp_cv_tol tol = {1.0, 0.10, 0.02, 0.1};
  gcomp_cv_run run = {.final_acc = 0.80 - (tol.acc_pts + fl.acc_pts - 0.01) / 100,
                      .final_loss = 1.0 + tol.loss_rel + fl.loss_rel - 0.001,
                      .curve_gap = tol.gap_rel + fl.gap_rel - 0.001,
                      .final_drift = tol.drift + fl.drift - 0.001, .replicas_equal = 1};
  gcomp_cv_verdict v;
  gcomp_cv_judge(&base, &run, &tol, NULL, &v);
  assert_int_equal(v.pass, 0);
  assert_null(strstr(v.why, "noise floor"));
  assert_int_equal(v.floor.n, 0);
  gcomp_cv_floor none = {0};
  gcomp_cv_verdict v0;
  gcomp_cv_judge(&base, &run, &tol, &none, &v0);   /* an empty floor is no floor */
  assert_string_equal(v0.why, v.why);
  gcomp_cv_judge(&base, &run, &tol, &fl, &v);
  if (v.pass != 1) fail_msg("within tolerance + floor, but: %s", v.why);
  assert_int_equal(v.floor.n, 3);
  /* every floor here exceeds its tolerance: each metric is marked coarse, and named */
  assert_int_equal(v.coarse, GCOMP_CV_M_ACC | GCOMP_CV_M_LOSS | GCOMP_CV_M_GAP | GCOMP_CV_M_DRIFT);
  char names[64];
  assert_string_equal(gcomp_cv_metric_names(v.coarse, names, sizeof names),
                      "accuracy, final loss, curve gap, drift");
  assert_int_equal(v0.coarse, 0);   /* no floor, nothing coarse */
  {
    gcomp_cv_tol wide = {5.0, INFINITY, 1.0, 0.05};   /* off is never coarse */
    gcomp_cv_verdict vw;
    gcomp_cv_judge(&base, &run, &wide, &fl, &vw);
    assert_int_equal(vw.coarse, GCOMP_CV_M_DRIFT);
    assert_string_equal(gcomp_cv_metric_names(vw.coarse, names, sizeof names), "drift");
    assert_string_equal(gcomp_cv_metric_names(0, names, sizeof names), "");
    /* whole names only when the buffer is short; nothing written when it is empty */
    assert_string_equal(gcomp_cv_metric_names(15, names, 12), "accuracy");
    names[0] = 'x';
    gcomp_cv_metric_names(15, names, 0);
    assert_int_equal(names[0], 'x');
    /* a failed run is an ERROR, not a coarse verdict */
    gcomp_cv_run failed = run;
    failed.status = GCOMP_ERR_PEER;
    gcomp_cv_judge(&base, &failed, &tol, &fl, &vw);
    assert_int_equal(vw.pass, -1);
    assert_int_equal(vw.coarse, 0);
  }
  /* each metric alone just past its limit fails, naming tolerance, floor and margin */
  gcomp_cv_run r2 = run;
  r2.final_acc -= 0.02 / 100;
  gcomp_cv_judge(&base, &r2, &tol, &fl, &v);
  assert_int_equal(v.pass, 0);
  if (!strstr(v.why, "tolerance 1.00 + noise floor 1.76, exceeded by 0.01")) fail_msg("%s", v.why);
  r2 = run, r2.final_loss += 0.002;
  gcomp_cv_judge(&base, &r2, &tol, &fl, &v);
  assert_int_equal(v.pass, 0);
  if (!strstr(v.why, "tolerance 10.00% + noise floor 21.14%, exceeded by 0.10 points"))
    fail_msg("%s", v.why);
  r2 = run, r2.curve_gap += 0.002;
  gcomp_cv_judge(&base, &r2, &tol, &fl, &v);
  assert_int_equal(v.pass, 0);
  if (!strstr(v.why, "noise floor 13.62%")) fail_msg("%s", v.why);
  r2 = run, r2.final_drift += 0.002;
  gcomp_cv_judge(&base, &r2, &tol, &fl, &v);
  assert_int_equal(v.pass, 0);
  if (!strstr(v.why, "tolerance 0.1 + noise floor 0.904")) fail_msg("%s", v.why);
  /* the floor never excuses replicas that differ */
  r2 = run, r2.replicas_equal = 0;
  gcomp_cv_judge(&base, &r2, &tol, &fl, &v);
  assert_int_equal(v.pass, 0);

  /* a baseline loss of 0 with twins at 0 is no deviation; a failed or NaN twin is an error
   * naming its placement, a baseline without finite metrics one naming the baseline, and
   * fewer than 2 twins none at all: never a smaller floor */
  gcomp_cv_run zb = {.final_loss = 0, .final_acc = 1};
  gcomp_cv_run zt[2] = {{.final_loss = 0, .final_acc = 1}, {.final_loss = 0, .final_acc = 1}};
  assert_int_equal(gcomp_cv_floor_measure(&zb, zt, pl, 2, &fl), GCOMP_OK);
  assert_true(fl.loss_rel == 0 && fl.acc_pts == 0);
  tw[1].status = GCOMP_ERR_PEER;
  snprintf(tw[1].error, sizeof tw[1].error, "rank 3 went away");
  assert_int_equal(gcomp_cv_floor_measure(&base, tw, pl, 3, &fl), GCOMP_ERR_INVALID);
  assert_non_null(strstr(gcomp_last_error(), "placement 2"));
  assert_non_null(strstr(gcomp_last_error(), "rank 3 went away"));
  assert_int_equal(fl.n, 0);
  tw[1].status = GCOMP_OK, tw[1].final_drift = NAN;
  assert_int_equal(gcomp_cv_floor_measure(&base, tw, pl, 3, &fl), GCOMP_ERR_INVALID);
  assert_non_null(strstr(gcomp_last_error(), "placement 2"));
  tw[1].final_drift = 0.1;
  gcomp_cv_run nb = base;
  nb.final_loss = NAN;
  assert_int_equal(gcomp_cv_floor_measure(&nb, tw, pl, 3, &fl), GCOMP_ERR_INVALID);
  assert_non_null(strstr(gcomp_last_error(), "baseline"));
  assert_int_equal(gcomp_cv_floor_measure(&base, tw, pl, GCOMP_CV_MAX_TWINS + 1, &fl),
                   GCOMP_ERR_INVALID);
  assert_int_equal(gcomp_cv_floor_measure(&base, tw, pl, 1, &fl), GCOMP_ERR_INVALID);
}

/* ---- verdicts that respect the data ------------------------------------------------------ */
/* McNemar's exact one-sided p against the binomial sums (Python's math.comb), the fewest
 * rows a drop needs, and verdicts: past the point limit a drop fails only when the paired
 * test calls it real; each verdict states what the rows resolve. */
static void test_paired_verdicts(void **state) {
  (void)state;
  assert_true(gcomp_cv_mcnemar_p(0, 0) == 1 && gcomp_cv_mcnemar_p(0, 7) == 1);
  assert_true(fabs(gcomp_cv_mcnemar_p(1, 0) - 0.5) < 1e-12);
  assert_true(fabs(gcomp_cv_mcnemar_p(4, 0) - 1.0 / 16) < 1e-12);
  assert_true(fabs(gcomp_cv_mcnemar_p(5, 0) - 1.0 / 32) < 1e-12);
  assert_true(fabs(gcomp_cv_mcnemar_p(3, 1) - 0.3125) < 1e-12);
  assert_true(fabs(gcomp_cv_mcnemar_p(60, 40) - 0.028443966820490395) < 1e-9);
  assert_true(fabs(gcomp_cv_mcnemar_p(1040, 960) - 0.03864344528133421) < 1e-9);
  assert_int_equal(gcomp_cv_mcnemar_min_rows(0.05), 5);
  assert_int_equal(gcomp_cv_mcnemar_min_rows(0.01), 7);

  /* one row of 60 (1.67 points) against a 0.5-point tolerance: over the limit, no real drop */
  gcomp_cv_run base = {.final_loss = 1.0, .final_acc = 56 / 60.0, .replicas_equal = 1};
  gcomp_cv_run run = {.final_loss = 1.0, .final_acc = 55 / 60.0, .replicas_equal = 1};
  gcomp_cv_tol cast = {0.5, 0.01, INFINITY, INFINITY};
  gcomp_cv_paired pa = {.seeds = 1, .rows = 60, .lost = 1, .gained = 0, .loss_rows = 240,
                        .train_rows = 240, .base_loss = 1.0};
  gcomp_cv_verdict v;
  gcomp_cv_judge(&base, &run, &cast, NULL, &v);   /* unpaired: the point tolerance alone */
  assert_int_equal(v.pass, 0);
  assert_true(isnan(v.acc_p) && v.paired.seeds == 0 && v.unresolved == 0);
  gcomp_cv_judge_paired(&base, &run, &cast, NULL, &pa, &v);
  if (v.pass != 1) fail_msg("one row of 60: %s", v.why);
  if (!strstr(v.note, "1 lost and 0 gained of 60 test rows") || !strstr(v.note, "p = 0.5"))
    fail_msg("note: '%s'", v.note);
  assert_true(fabs(v.acc_row_pts - 100.0 / 60) < 1e-12 && fabs(v.acc_min_pts - 500.0 / 60) < 1e-12);
  assert_int_equal(v.unresolved, GCOMP_CV_M_ACC);   /* 60 rows cannot resolve 0.5 points */
  assert_true(v.loss_se_rel == 0);                  /* the whole training set */
  /* six rows lost and none gained is a real drop (p = 1/64): it fails, saying so */
  run.final_acc = 50 / 60.0, pa.lost = 6;
  gcomp_cv_judge_paired(&base, &run, &cast, NULL, &pa, &v);
  assert_int_equal(v.pass, 0);
  if (!strstr(v.why, "6 lost and 0 gained of 60 test rows, McNemar p = 0.016")) fail_msg("%s", v.why);
  assert_string_equal(v.note, "");
  /* the same net drop with rows swapping both ways is not (8 lost, 2 gained: p = 0.055) */
  pa.lost = 8, pa.gained = 2;
  gcomp_cv_judge_paired(&base, &run, &cast, NULL, &pa, &v);
  assert_int_equal(v.pass, 1);
  /* no wider tolerance: on 2000 rows 11 rows (0.55 points, p = 0.0005) against 0.5 fail, and
   * that set resolves 0.5 points (5 rows are 0.25) */
  gcomp_cv_run b2 = {.final_loss = 1.0, .final_acc = 1620 / 2000.0, .replicas_equal = 1};
  gcomp_cv_run r2 = {.final_loss = 1.0, .final_acc = 1609 / 2000.0, .replicas_equal = 1};
  gcomp_cv_paired p2 = {.seeds = 1, .rows = 2000, .lost = 11, .loss_rows = 4096,
                        .train_rows = 8000, .loss_var = 1e-6, .base_loss = 1.0};
  gcomp_cv_judge_paired(&b2, &r2, &cast, NULL, &p2, &v);
  assert_int_equal(v.pass, 0);
  assert_int_equal(v.unresolved & GCOMP_CV_M_ACC, 0);
  /* the loss's sampling error: sqrt(1e-6) of a loss of 1 is 0.1%, resolved against 1%;
   * against 0.2% (2.33 standard errors are 0.23%) it is not, and a failing loss says it */
  assert_true(fabs(v.loss_se_rel - 1e-3) < 1e-12);
  assert_int_equal(v.unresolved & GCOMP_CV_M_LOSS, 0);
  gcomp_cv_tol fine = {0.5, 0.002, INFINITY, INFINITY};
  r2.final_loss = 1.003;
  gcomp_cv_judge_paired(&b2, &r2, &fine, NULL, &p2, &v);
  assert_int_equal(v.unresolved & GCOMP_CV_M_LOSS, GCOMP_CV_M_LOSS);
  if (!strstr(v.why, "sampling error 0.1% on 4096 of 8000 training rows")) fail_msg("%s", v.why);
  /* with a floor, the limit is tolerance + floor and the paired test still decides */
  gcomp_cv_floor fl = {.n = 3, .acc_pts = 0.2};
  r2.final_loss = 1.0, r2.final_acc = 1605 / 2000.0, p2.lost = 15;   /* 0.75 > 0.7, p 3e-5 */
  gcomp_cv_judge_paired(&b2, &r2, &cast, &fl, &p2, &v);
  assert_int_equal(v.pass, 0);
  assert_non_null(strstr(v.why, "+ noise floor 0.20"));
  /* seeds pool rows: 3 seeds of 60 rows resolve 3 times finer */
  pa = (gcomp_cv_paired){.seeds = 3, .rows = 180, .lost = 3, .loss_rows = 240, .train_rows = 240,
                         .base_loss = 3.0};
  run.final_acc = base.final_acc - 1.0 / 60;
  gcomp_cv_judge_paired(&base, &run, &cast, NULL, &pa, &v);
  assert_true(fabs(v.acc_min_pts - 500.0 / 180) < 1e-12);
  /* a failed run is an ERROR whatever the pairs */
  run.status = GCOMP_ERR_PEER;
  gcomp_cv_judge_paired(&base, &run, &cast, NULL, &pa, &v);
  assert_int_equal(v.pass, -1);
}

/* The pairs of real runs: test rows each model gets right reproduce the runs' accuracies,
 * a run paired with itself disagrees nowhere, and parameters that were not the evaluated
 * ones are refused, not paired. */
static void test_pair_runs(void **state) {
  (void)state;
  gcomp_cv_data d;
  make_gmm(&d, 1000);
  gcomp_cv_model m;
  make_model(&m, "softmax", &d);
  gcomp_cv_train_cfg cfg;
  base_cfg(&cfg, 60);
  gcomp_cv_run base, biased;
  run_ok(&cfg, &d, &m, NULL, NULL, &base);
  run_ok(&cfg, &d, &m, "test_biased", &base, &biased);
  gcomp_cv_paired pa = {0}, self = {0};
  if (gcomp_cv_pair(&m, &d, &base, &biased, &pa) != GCOMP_OK) fail_msg("%s", gcomp_last_error());
  assert_true(pa.seeds == 1 && pa.rows == d.ntest && pa.loss_rows == 1000 && pa.train_rows == 1000);
  assert_int_equal(pa.lost - pa.gained, (int)lround((base.final_acc - biased.final_acc) * d.ntest));
  assert_true(pa.loss_var == 0);   /* every training row: no sampling error */
  assert_true(fabs(pa.base_loss - base.final_loss) < 1e-9 * base.final_loss);
  assert_int_equal(gcomp_cv_pair(&m, &d, &base, &base, &self), GCOMP_OK);
  assert_true(self.lost == 0 && self.gained == 0);
  assert_int_equal(gcomp_cv_pair(&m, &d, &base, &biased, &pa), GCOMP_OK);   /* another seed */
  assert_true(pa.seeds == 2 && pa.rows == 2 * d.ntest);
  memset(biased.theta, 0, biased.nparams * sizeof *biased.theta);
  assert_int_equal(gcomp_cv_pair(&m, &d, &base, &biased, &pa), GCOMP_ERR_INVALID);
  assert_non_null(strstr(gcomp_last_error(), "per-row predictions"));
  biased.status = GCOMP_ERR_PEER;
  assert_int_equal(gcomp_cv_pair(&m, &d, &base, &biased, &pa), GCOMP_ERR_INVALID);
  gcomp_cv_run_free(&base);
  gcomp_cv_run_free(&biased);
  gcomp_cv_data_free(&d);

  /* small tensors: the calls a deployed job compresses under GCOMP_CODEC_MIN_BYTES */
  gcomp_cv_model mlp;
  assert_int_equal(gcomp_cv_model_parse("mlp", 64, &mlp), GCOMP_OK);
  gcomp_cv_model_shape(&mlp, 64, 10);   /* digits: W1 16 KiB, b1 256 B, W2 2560 B, b2 40 B */
  gcomp_cv_deployed dep;
  gcomp_cv_deployed_plan(&mlp, 0, 65536, &dep);
  assert_true(dep.calls == 1 && dep.compressed == 0 && dep.largest == 4810 * 4);
  assert_string_equal(gcomp_cv_deployed_word(&dep), "fp32");
  gcomp_cv_deployed_plan(&mlp, 1, 4096, &dep);
  assert_true(dep.calls == 4 && dep.compressed == 1 && dep.smallest == 40 && dep.largest == 16384);
  dep.verdict.pass = 0;
  assert_string_equal(gcomp_cv_deployed_word(&dep), "FAIL");
  gcomp_cv_deployed_plan(&mlp, 1, 40, &dep);
  assert_int_equal(dep.compressed, 4);
  assert_string_equal(gcomp_cv_deployed_word(&dep), "as checked");
}

static int theta_equal(const gcomp_cv_run *a, const gcomp_cv_run *b) {
  return memcmp(a->theta, b->theta, a->nparams * sizeof(float)) == 0;
}

/* A twin trains on the same data as the baseline, only with the workers on other ranks:
 * the first step's losses are the same W minibatches, and the parameters part only by
 * summation order. Twins differ bitwise from the baseline and from each other (a placement
 * that adds in the same pairs is skipped), and a placement is a permutation. */
static void test_noise_floor_twins(void **state) {
  (void)state;
  for (int W = 1; W <= 33; W += 4)
    for (int k = 0; k < 4; k++) {
      int seen[40] = {0};
      for (int r = 0; r < W; r++) {
        int id = gcomp_cv_placed_worker(k, W, r);
        assert_true(id >= 0 && id < W && !seen[id]);
        seen[id] = 1;
        if (k == 0) assert_int_equal(id, r);
      }
    }
  gcomp_cv_data d;
  make_gmm(&d, 1000);
  gcomp_cv_model m;
  make_model(&m, "mlp", &d);
  gcomp_cv_train_cfg cfg;
  base_cfg(&cfg, 100);
  gcomp_cv_run base, tw[3], again[3];
  int pl[3];
  run_ok(&cfg, &d, &m, NULL, NULL, &base);
  if (gcomp_cv_train_twins(&cfg, &d, &m, &base, 3, 0, pl, tw) != GCOMP_OK)
    fail_msg("twins: %s", gcomp_last_error());
  for (int i = 0; i < 3; i++) {
    if (fabs(tw[i].step_loss[0] - base.step_loss[0]) > 1e-12 * base.step_loss[0])
      fail_msg("placement %d: first-step loss %.17g, baseline %.17g: not the same minibatches",
               pl[i], tw[i].step_loss[0], base.step_loss[0]);
    if (!(tw[i].final_drift > 0 && tw[i].final_drift < 1e-4))
      fail_msg("placement %d: drift %g after 100 steps (wanted rounding only, above 0)", pl[i],
               tw[i].final_drift);
    assert_true(fabs(tw[i].final_acc - base.final_acc) <= 0.0021);   /* a test row or so */
    assert_false(theta_equal(&tw[i], &base));
    for (int j = 0; j < i; j++) assert_false(theta_equal(&tw[i], &tw[j]));
    assert_non_null(strstr(tw[i].spec, "fp32, placement"));
  }
  /* the same placements again (another seed's twins use them so): the same runs */
  if (gcomp_cv_train_twins(&cfg, &d, &m, &base, 3, 1, pl, again) != GCOMP_OK)
    fail_msg("fixed twins: %s", gcomp_last_error());
  for (int i = 0; i < 3; i++) assert_true(theta_equal(&tw[i], &again[i]));
  for (int i = 0; i < 3; i++) gcomp_cv_run_free(&again[i]);
  /* fixed placements that repeat each other are refused, not counted twice */
  int twice[2] = {pl[0], pl[0]};
  assert_int_equal(gcomp_cv_train_twins(&cfg, &d, &m, &base, 2, 1, twice, again),
                   GCOMP_ERR_INVALID);
  assert_non_null(strstr(gcomp_last_error(), "repeats"));
  for (int i = 0; i < 3; i++) gcomp_cv_run_free(&tw[i]);
  gcomp_cv_run_free(&base);

  /* two workers add in one order whatever their places: no twin can be had */
  cfg.workers = 2;
  run_ok(&cfg, &d, &m, NULL, NULL, &base);
  assert_int_equal(gcomp_cv_train_twins(&cfg, &d, &m, &base, 2, 0, pl, tw), GCOMP_ERR_INVALID);
  assert_non_null(strstr(gcomp_last_error(), "3 or more workers"));
  gcomp_cv_run_free(&base);
  /* four workers under a butterfly (rhd, rd) pair up in 3 ways: 2 twins, never 3 */
  cfg.workers = 4;
  run_ok(&cfg, &d, &m, NULL, NULL, &base);
  if (!strcmp(base.algo, "rhd") || !strcmp(base.algo, "rd")) {
    assert_int_equal(gcomp_cv_train_twins(&cfg, &d, &m, &base, 3, 0, pl, tw), GCOMP_ERR_INVALID);
    assert_non_null(strstr(gcomp_last_error(), "4 workers gave 2 distinct fp32 orders"));
    assert_int_equal(gcomp_cv_train_twins(&cfg, &d, &m, &base, 2, 0, pl, tw), GCOMP_OK);
    for (int i = 0; i < 2; i++) gcomp_cv_run_free(&tw[i]);
  } else {   /* the planner's figures are fixed (gcomp_cv_setup_env): this is a change */
    fail_msg("4 workers ran %s, not a butterfly: revisit the 3-pairing case", base.algo);
  }
  assert_int_equal(gcomp_cv_train_twins(&cfg, &d, &m, &base, 1, 0, pl, tw), GCOMP_ERR_INVALID);
  cfg.placement = -1;
  assert_int_equal(gcomp_cv_train(&cfg, &d, &m, NULL, &base, &tw[0]), GCOMP_ERR_INVALID);
  gcomp_cv_run_free(&tw[0]);
  gcomp_cv_run_free(&base);
  gcomp_cv_data_free(&d);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_tolerance_rules),
      cmocka_unit_test(test_noise_floor_verdicts),
      cmocka_unit_test(test_noise_floor_twins),
      cmocka_unit_test(test_paired_verdicts),
      cmocka_unit_test(test_pair_runs),
      cmocka_unit_test(test_bad_csv),
      cmocka_unit_test(test_digits_loads),
      cmocka_unit_test(test_unknown_codec),
      cmocka_unit_test(test_momentum_correction_plan),
      cmocka_unit_test(test_momentum_correction_is_momentum_sgd),
      cmocka_unit_test(test_lr_schedules),
      cmocka_unit_test(test_coverage),
      cmocka_unit_test(test_reproducible_bitwise),
      cmocka_unit_test(test_32_workers),
      cmocka_unit_test(test_per_layer),
      cmocka_unit_test(test_biased_is_flagged_on_mlp),
      cmocka_unit_test(test_topk_without_ef_flagged_with_ef_passes),
  };
  return cmocka_run_group_tests(tests, setup_env, NULL);
}
