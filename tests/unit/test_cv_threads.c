/* The convergence harness when it cannot start all its worker threads: an error naming how
 * many started, never a hang or an abort (it called abort() there). pthread_create is
 * wrapped for this program (converge.cmake: -Wl,--wrap=pthread_create), so the library's
 * and the harness's creations can be made to fail one at a time. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "converge.h"
#include "gcomp.h"

int __real_pthread_create(pthread_t *th, const pthread_attr_t *attr, void *(*fn)(void *),
                          void *arg);
int __wrap_pthread_create(pthread_t *th, const pthread_attr_t *attr, void *(*fn)(void *),
                          void *arg);

static int created;        /* creations since the counter was reset */
static int fail_at = -1;   /* the creation that fails (0-based), -1: none */

int __wrap_pthread_create(pthread_t *th, const pthread_attr_t *attr, void *(*fn)(void *),
                          void *arg) {
  if (created++ == fail_at) return 11;   /* EAGAIN */
  return __real_pthread_create(th, attr, fn, arg);
}

enum { W = 4 };

static int train(gcomp_cv_run *run) {
  gcomp_cv_data d;
  gcomp_cv_synth syn = {.kind = "gmm", .dim = 8, .nclass = 4, .ntrain = 64, .ntest = 32,
                        .cond = 10, .sep = 0.6, .seed = 7};
  assert_int_equal(gcomp_cv_make_synth(&syn, &d), GCOMP_OK);
  gcomp_cv_model m;
  assert_int_equal(gcomp_cv_model_parse("softmax", 8, &m), GCOMP_OK);
  gcomp_cv_model_shape(&m, d.nfeat, d.nclass);
  gcomp_cv_train_cfg cfg;
  gcomp_cv_train_defaults(&cfg);
  cfg.steps = 3;
  cfg.eval_every = 1;
  cfg.workers = W;
  cfg.batch = 4;
  cfg.algo = "auto";
  int st = gcomp_cv_train(&cfg, &d, &m, NULL, NULL, run);
  gcomp_cv_data_free(&d);
  return st;
}

static void test_worker_threads_fail_to_start(void **state) {
  assert_int_equal(gcomp_cv_setup_env(0, NULL), GCOMP_OK);
  gcomp_cv_run run;
  created = 0, fail_at = -1;
  assert_int_equal(train(&run), GCOMP_OK);   /* counts the creations of one run */
  gcomp_cv_run_free(&run);
  int total = created;
  assert_true(total >= W);   /* the workers are the last W, made by this thread */
  for (int k = 0; k < W; k += W - 1) {   /* the first worker, then the last */
    created = 0, fail_at = total - W + k;
    int st = train(&run);
    fail_at = -1;
    assert_int_equal(st, GCOMP_ERR_NOMEM);
    char want[64];
    snprintf(want, sizeof want, "could start only %d of %d worker threads", k, W);
    if (!strstr(run.error, want)) fail_msg("error '%s' lacks '%s'", run.error, want);
    gcomp_cv_run_free(&run);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_worker_threads_fail_to_start)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
