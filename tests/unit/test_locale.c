/* The host program's locale must not change what the library reads or writes for
 * machines. Runs under de_DE.UTF-8 (decimal comma), built with localedef into a temporary
 * directory when the system has no compiled de_DE (the 'locales' package, which
 * scripts/setup installs, has the source). */
#include <locale.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "test_env.h"

#include "coll.h"
#include "comm.h"
#include "gcomp.h"
#include "gcomp_common.h"
#include "transport.h"
#ifdef GCOMP_TEST_CONVERGE
#include "converge.h"
#include "test_hooks.h"
#endif

static char tmpdir[64];

static void spec_reads_back(const char *spec, const char *want) {
  gcomp_codec *a, *b;
  if (gcomp_codec_create(spec, &a) != GCOMP_OK) fail_msg("%s: %s", spec, gcomp_last_error());
  char ca[256], cb[256];
  gcomp_codec_spec(a, ca, sizeof ca);
  if (!strstr(ca, want)) fail_msg("%s: canonical '%s' lacks '%s'", spec, ca, want);
  if (gcomp_codec_create(ca, &b) != GCOMP_OK) fail_msg("canonical %s: %s", ca, gcomp_last_error());
  gcomp_codec_spec(b, cb, sizeof cb);
  assert_string_equal(ca, cb);
  gcomp_codec_destroy(a);
  gcomp_codec_destroy(b);
}

static void test_specs_under_decimal_comma(void **state) {
  (void)state;
  char probe[16];
  snprintf(probe, sizeof probe, "%.1f", 0.5);
  assert_string_equal(probe, "0,5");   /* the locale is in force: this test means something */
  spec_reads_back("topk:ratio=0.01", "ratio=0.01,");
  spec_reads_back("topk", "ratio=0.01,");
  spec_reads_back("topk:ratio=0.001+ef:momentum=0.9", "momentum=0.9,");
  spec_reads_back("test_biased:drop=0.123456789", "drop=0.123456789,");   /* full precision */
  gcomp_codec *c;
  assert_int_equal(gcomp_codec_create("topk:ratio=0,01", &c), GCOMP_ERR_INVALID);
}

static void test_json_and_env_under_decimal_comma(void **state) {
  (void)state;
  char stats[128];
  snprintf(stats, sizeof stats, "%s/stats.json", tmpdir);
  setenv("GCOMP_STATS", stats, 1);
  setenv("GCOMP_ALPHA_BETA", "1.5,10.25,20,0.5", 1);   /* parsed in the C locale */
  assert_int_equal(gcomp_reinit_for_testing(), GCOMP_OK);
  gcomp_transport *t[1];
  assert_int_equal(gcomp_loopback_for_testing(1, NULL, t), GCOMP_OK);
  gcomp_comm *comm = NULL;
  if (gcomp_comm_from_transport(t[0], 1, &comm) != GCOMP_OK) fail_msg("%s", gcomp_last_error());
  float x[1000];
  for (int i = 0; i < 1000; i++) x[i] = (float)i;
  assert_int_equal(gcomp_allreduce(comm, x, x, 1000, GCOMP_FLOAT32, GCOMP_SUM, NULL, 0), GCOMP_OK);
  gcomp_comm_destroy(comm);
  unsetenv("GCOMP_STATS");
  unsetenv("GCOMP_ALPHA_BETA");
  FILE *f = fopen(stats, "r");
  assert_non_null(f);
  char buf[8192];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  /* the link figures come back as given, with points; no number has a decimal comma (a
   * digit, a comma, a digit: JSON separates fields with ", ") */
  if (!strstr(buf, "\"intra_alpha_us\": 1.500")) fail_msg("stats: %s", buf);
  for (size_t i = 1; i + 1 < n; i++)
    if (buf[i] == ',' && buf[i - 1] >= '0' && buf[i - 1] <= '9' && buf[i + 1] >= '0' &&
        buf[i + 1] <= '9')
      fail_msg("decimal comma at byte %zu: %.40s", i, buf + (i > 20 ? i - 20 : 0));
  unlink(stats);
}

#ifdef GCOMP_TEST_CONVERGE
/* The convergence harness's parsers and files: CSV numbers, tolerance rules, the momentum
 * it adds to a top-k spec (under de_DE it read 0.9 as 0 and applied momentum twice), and
 * its JSON. */
static void test_harness_under_decimal_comma(void **state) {
  (void)state;
  gcomp_cv_train_cfg cfg;
  gcomp_cv_train_defaults(&cfg);
  gcomp_cv_codec_plan plan;
  if (gcomp_cv_plan_codec(&cfg, "topk:ratio=0.01+ef:momentum=0.9", &plan) != GCOMP_OK)
    fail_msg("%s", gcomp_last_error());
  assert_true(plan.ef_momentum == 0.9 && plan.opt_momentum == 0);
  if (gcomp_cv_plan_codec(&cfg, "topk:ratio=0.01+ef", &plan) != GCOMP_OK)
    fail_msg("%s", gcomp_last_error());
  assert_true(plan.corrected && plan.ef_momentum == 0.9);
  gcomp_codec *c = NULL;
  if (gcomp_codec_create(plan.run_spec, &c) != GCOMP_OK) fail_msg("%s", gcomp_last_error());
  gcomp_codec_destroy(c);
  gcomp_cv_tolset *ts;
  assert_int_equal(gcomp_cv_tolset_create(&ts), GCOMP_OK);
  assert_int_equal(gcomp_cv_tolset_add(ts, "bf16 acc=0.25", "--tol"), GCOMP_OK);
  assert_true(gcomp_cv_tol_for(ts, "bf16", "bf16").acc_pts == 0.25);
  gcomp_cv_tolset_destroy(ts);
  char csv[128];
  snprintf(csv, sizeof csv, "%s/d.csv", tmpdir);
  FILE *f = fopen(csv, "w");
  assert_non_null(f);
  for (int i = 0; i < 40; i++) fprintf(f, "%d.5,0.25,%d\n", i, i % 2);   /* points, always */
  fclose(f);
  gcomp_cv_data d;
  if (gcomp_cv_load_csv(csv, NULL, 2, 0.25, 1, &d) != GCOMP_OK) fail_msg("%s", gcomp_last_error());
  gcomp_cv_data_free(&d);
  unlink(csv);
}
#endif

static int use_de_locale(void) {
  if (setlocale(LC_ALL, "de_DE.UTF-8")) return 0;
  snprintf(tmpdir, sizeof tmpdir, "/tmp/gcomp-locale-XXXXXX");
  if (!mkdtemp(tmpdir)) return -1;
  char cmd[256];
  snprintf(cmd, sizeof cmd, "localedef -i de_DE -f UTF-8 %s/de_DE.UTF-8 >/dev/null 2>&1", tmpdir);
  if (system(cmd) != 0) {
    fprintf(stderr, "test_locale: localedef could not build de_DE.UTF-8 (install the 'locales' "
                    "package: scripts/setup does)\n");
    return -1;
  }
  setenv("LOCPATH", tmpdir, 1);
  return setlocale(LC_ALL, "de_DE.UTF-8") ? 0 : -1;
}

int main(void) {
  if (use_de_locale() != 0) {
    fprintf(stderr, "test_locale: no de_DE.UTF-8 locale\n");
    return 1;
  }
  if (!tmpdir[0]) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/gcomp-locale-XXXXXX");
    if (!mkdtemp(tmpdir)) return 1;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(test_specs_under_decimal_comma, test_env_restore),
      cmocka_unit_test_teardown(test_json_and_env_under_decimal_comma, test_env_restore),
#ifdef GCOMP_TEST_CONVERGE
      cmocka_unit_test_teardown(test_harness_under_decimal_comma, test_env_restore),
#endif
  };
  int rc = cmocka_run_group_tests(tests, test_env_save, test_env_free);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
  if (system(cmd) != 0) rc = rc ? rc : 1;
  return rc;
}
