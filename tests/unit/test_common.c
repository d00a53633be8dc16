/* common/: status codes, error detail, parameters, logging, CPU levels. */
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

#include "gcomp_common.h"
#include "test_hooks.h"

static int setup(void **state) {
  test_env_clear();   /* tests start from the defaults */
  assert_int_equal(gcomp_reinit_for_testing(), GCOMP_OK);
  return 0;
}

static void test_status_codes_fixed(void **state) {
  assert_int_equal(GCOMP_OK, 0);
  assert_int_equal(GCOMP_ERR_INVALID, -1);
  assert_int_equal(GCOMP_ERR_NOMEM, -2);
  assert_int_equal(GCOMP_ERR_CORRUPT, -3);
  assert_int_equal(GCOMP_ERR_UNSUPPORTED, -4);
  assert_int_equal(GCOMP_ERR_FABRIC, -5);
  assert_int_equal(GCOMP_ERR_TIMEOUT, -6);
  assert_int_equal(GCOMP_ERR_PEER, -7);
  assert_int_equal(GCOMP_ERR_BOOTSTRAP, -8);
  for (int s = 0; s >= -8; s--) assert_non_null(strstr(gcomp_strerror(s), "GCOMP_"));
  assert_non_null(strstr(gcomp_strerror(-99), "UNKNOWN"));
  assert_non_null(strstr(gcomp_strerror(GCOMP_ERR_CORRUPT), "CORRUPT"));
}

static int inner(int x) {
  GCOMP_FAIL_IF(x > 3, GCOMP_ERR_INVALID, "x=%d is too big", x);
  return GCOMP_OK;
}
static int outer(int x) {
  GCOMP_CHECK(inner(x));
  return 7;
}

static void test_error_detail_and_trace(void **state) {
  gcomp_error_clear();
  assert_int_equal(outer(1), 7);
  assert_string_equal(gcomp_last_error(), "");
  assert_int_equal(outer(9), GCOMP_ERR_INVALID);
  const char *e = gcomp_last_error();
  assert_non_null(strstr(e, "x=9 is too big"));
  assert_non_null(strstr(e, "unit/test_common.c:"));   /* file:line of the failure */
  assert_non_null(strstr(e, " <- unit/test_common.c:"));  /* and of the propagation */
}

static void test_param_defaults(void **state) {
  assert_int_equal(gcomp_param_int(GCOMP_P_TIMEOUT_MS), 30000);
  assert_int_equal(gcomp_param_int(GCOMP_P_CODEC_MIN_BYTES), 65536);
  assert_string_equal(gcomp_param_str(GCOMP_P_CODEC), "none");
  assert_false(gcomp_param_is_set(GCOMP_P_CODEC));
  assert_string_equal(gcomp_param_name(GCOMP_P_TIMEOUT_MS), "GCOMP_TIMEOUT_MS");
  assert_int_equal(gcomp_log_level, GCOMP_LOG_WARN);
  /* every registered default must itself be valid */
  for (int i = 0; i < gcomp_param_count(); i++) {
    gcomp_param_info p;
    assert_int_equal(gcomp_param_describe(i, &p), GCOMP_OK);
    assert_string_equal(p.value, p.dflt);
    assert_true(strlen(p.help) > 10);
  }
  gcomp_param_info p;
  assert_int_equal(gcomp_param_describe(gcomp_param_count(), &p), GCOMP_ERR_INVALID);
}

static void test_param_valid(void **state) {
  setenv("GCOMP_TIMEOUT_MS", "1500", 1);
  setenv("GCOMP_CODEC_MIN_BYTES", "4k", 1);
  setenv("GCOMP_DEBUG", "INFO", 1);
  setenv("GCOMP_CODEC", "bf16", 1);
  assert_int_equal(gcomp_reinit_for_testing(), GCOMP_OK);
  assert_int_equal(gcomp_param_int(GCOMP_P_TIMEOUT_MS), 1500);
  assert_int_equal(gcomp_param_int(GCOMP_P_CODEC_MIN_BYTES), 4096);
  assert_int_equal(gcomp_log_level, GCOMP_LOG_INFO);
  assert_string_equal(gcomp_param_str(GCOMP_P_CODEC), "bf16");
  assert_true(gcomp_param_is_set(GCOMP_P_CODEC));
  int64_t v;
  assert_int_equal(gcomp_parse_size("2MiB", &v), GCOMP_OK);
  assert_int_equal(v, 2 << 20);
  assert_int_equal(gcomp_parse_size("1g", &v), GCOMP_OK);
  assert_int_equal(v, 1 << 30);
  assert_int_equal(gcomp_parse_size("12q", &v), GCOMP_ERR_INVALID);
  assert_int_equal(gcomp_parse_size("-1", &v), GCOMP_ERR_INVALID);
  assert_int_equal(gcomp_parse_size("", &v), GCOMP_ERR_INVALID);
}

static void expect_bad(const char *name, const char *value, const char *fragment) {
  test_env_clear();   /* tests start from the defaults */
  setenv(name, value, 1);
  assert_int_equal(gcomp_reinit_for_testing(), GCOMP_ERR_INVALID);
  const char *e = gcomp_last_error();
  if (!strstr(e, name) || !strstr(e, value) || !strstr(e, fragment))
    fail_msg("error for %s=%s lacks name/value/'%s': %s", name, value, fragment, e);
  /* a bad value never leaves a half-applied setting behind */
  assert_int_equal(gcomp_param_int(GCOMP_P_TIMEOUT_MS), 30000);
  assert_int_equal(gcomp_init(), GCOMP_ERR_INVALID);   /* sticky */
  unsetenv(name);
}

static void test_param_invalid(void **state) {
  expect_bad("GCOMP_TIMEOUT_MS", "abc", "not an integer");
  expect_bad("GCOMP_TIMEOUT_MS", "12x", "not an integer");
  expect_bad("GCOMP_TIMEOUT_MS", "0", "out of range");
  expect_bad("GCOMP_CODEC_MIN_BYTES", "lots", "byte count");
  expect_bad("GCOMP_DEBUG", "loud", "none|warn|info|trace");
  expect_bad("GCOMP_ISA", "sse9", "auto|base|avx2|avx512");
  expect_bad("GCOMP_DEBUG_SUBSYS", "codec,netwrk", "netwrk");
  /* a value that is all blanks is no number (it read as 0: straggler detection off) */
  expect_bad("GCOMP_SKEW_WINDOW", " ", "not an integer");
  expect_bad("GCOMP_TIMEOUT_MS", "\t", "not an integer");
  /* an empty subsystem list silenced every message, warnings included */
  expect_bad("GCOMP_DEBUG_SUBSYS", "", "names no subsystem");
  expect_bad("GCOMP_DEBUG_SUBSYS", ",", "names no subsystem");
  test_env_clear();   /* tests start from the defaults */
  assert_int_equal(gcomp_reinit_for_testing(), GCOMP_OK);
}

static char *slurp(const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) return NULL;
  static char buf[1 << 16];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  buf[n] = '\0';
  fclose(f);
  return buf;
}

/* Initialises with the variables already set and the log going to a fresh file (path: a
 * "/tmp/gcomp-log-XXXXXX" buffer, unlinked by the caller); returns the log's text. */
static const char *log_of_init(char *path) {
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  close(fd);
  setenv("GCOMP_DEBUG_FILE", path, 1);
  assert_int_equal(gcomp_reinit_for_testing(), GCOMP_OK);
  gcomp_log_close();
  const char *log = slurp(path);
  assert_non_null(log);
  return log;
}

/* The job's secret is never printed: not in the info log of set variables, not by
 * gcomp_param_describe (gcomp-info -e). */
static void test_job_token_not_shown(void **state) {
  char path[] = "/tmp/gcomp-log-XXXXXX";
  setenv("GCOMP_DEBUG", "info", 1);
  setenv("GCOMP_JOB_TOKEN", "s3cret-job-token", 1);
  const char *log = log_of_init(path);
  assert_non_null(strstr(log, "GCOMP_JOB_TOKEN=(set, not shown)"));
  assert_null(strstr(log, "s3cret"));
  for (int i = 0; i < gcomp_param_count(); i++) {
    gcomp_param_info p;
    assert_int_equal(gcomp_param_describe(i, &p), GCOMP_OK);
    if (strcmp(p.name, "GCOMP_JOB_TOKEN") == 0) assert_string_equal(p.value, "(set, not shown)");
    assert_null(strstr(p.value, "s3cret"));
  }
  assert_string_equal(gcomp_param_str(GCOMP_P_JOB_TOKEN), "s3cret-job-token");   /* still used */
  unlink(path);
  test_env_clear();   /* tests start from the defaults */
  assert_int_equal(gcomp_reinit_for_testing(), GCOMP_OK);
}

static void test_unknown_variable_warns_with_suggestion(void **state) {
  char path[] = "/tmp/gcomp-log-XXXXXX";
  setenv("GCOMP_CODEK", "fp16", 1);
  setenv("GCOMP_ZZZZZZZZZZZZ", "1", 1);
  setenv("GCOMP_LIBRARY", "/nowhere/libgcomp.so", 1);   /* the Python package's: known */
  setenv("GCOMP_METRICS", "/nowhere/m.jsonl", 1);        /* gcomp-converge run's: known */
  setenv("GCOMP_SEED", "2", 1);
  const char *log = log_of_init(path);
  assert_non_null(strstr(log, "unknown variable GCOMP_CODEK ignored; did you mean GCOMP_CODEC?"));
  assert_non_null(strstr(log, "unknown variable GCOMP_ZZZZZZZZZZZZ ignored (gcomp-info"));
  assert_null(strstr(log, "GCOMP_DEBUG_FILE ignored"));
  assert_null(strstr(log, "GCOMP_LIBRARY ignored"));
  assert_null(strstr(log, "GCOMP_METRICS ignored"));
  assert_null(strstr(log, "GCOMP_SEED ignored"));
  unsetenv("GCOMP_LIBRARY");
  unsetenv("GCOMP_METRICS");
  unsetenv("GCOMP_SEED");
  unlink(path);
}

static void test_log_file_pattern_and_levels(void **state) {
  char pattern[256], path[256], host[64] = "";
  gethostname(host, sizeof host - 1);
  snprintf(pattern, sizeof pattern, "/tmp/gcomp-test-%%h-%%p.log");
  snprintf(path, sizeof path, "/tmp/gcomp-test-%s-%ld.log", host, (long)getpid());
  unlink(path);
  setenv("GCOMP_DEBUG_FILE", pattern, 1);
  setenv("GCOMP_DEBUG", "info", 1);
  setenv("GCOMP_DEBUG_SUBSYS", "codec", 1);
  assert_int_equal(gcomp_reinit_for_testing(), GCOMP_OK);
  GCOMP_INFO(GCOMP_SUB_CODEC, "visible %d", 42);
  GCOMP_INFO(GCOMP_SUB_FABRIC, "filtered by subsystem");
  GCOMP_TRACE(GCOMP_SUB_CODEC, "filtered by level");
  gcomp_log_close();
  const char *log = slurp(path);
  assert_non_null(log);
  assert_non_null(strstr(log, "gcomp INFO codec test_common.c:"));
  assert_non_null(strstr(log, "visible 42"));
  assert_null(strstr(log, "filtered"));
  unlink(path);
}

/* Arguments must not be evaluated when the level is off. */
static int evaluated;
static int touch(void) { return ++evaluated; }
static void test_log_checks_level_first(void **state) {
  gcomp_log_level = GCOMP_LOG_WARN;
  evaluated = 0;
  GCOMP_TRACE(GCOMP_SUB_CODEC, "%d", touch());
  assert_int_equal(evaluated, 0);
}

static void test_isa_levels(void **state) {
  unsigned f = gcomp_cpu_detect();
  gcomp_isa best = gcomp_isa_best_level(f);
  assert_int_equal(gcomp_isa_best_level(0), GCOMP_ISA_BASE);
  assert_int_equal(gcomp_isa_best_level(GCOMP_CPU_AVX2), GCOMP_ISA_BASE); /* needs F16C+FMA too */
  /* the avx2 kernels are built with BMI2, PCLMUL and SSE4.2 too: a CPU without one of
   * them gets base */
  const unsigned avx2 = GCOMP_CPU_AVX2 | GCOMP_CPU_F16C | GCOMP_CPU_FMA | GCOMP_CPU_BMI2 |
                        GCOMP_CPU_PCLMUL | GCOMP_CPU_SSE42;
  assert_int_equal(gcomp_isa_best_level(avx2), GCOMP_ISA_AVX2);
  const unsigned each[] = {GCOMP_CPU_BMI2, GCOMP_CPU_PCLMUL, GCOMP_CPU_SSE42, GCOMP_CPU_F16C};
  for (size_t i = 0; i < sizeof each / sizeof *each; i++)
    assert_int_equal(gcomp_isa_best_level(avx2 & ~each[i]), GCOMP_ISA_BASE);
  /* avx512: F, BW and VL on top (VPCLMULQDQ and the rest are asked per kernel file) */
  const unsigned avx512 = avx2 | GCOMP_CPU_AVX512F | GCOMP_CPU_AVX512BW | GCOMP_CPU_AVX512VL;
  assert_int_equal(gcomp_isa_best_level(avx512), GCOMP_ISA_AVX512);
  assert_int_equal(gcomp_isa_best_level(avx512 & ~GCOMP_CPU_AVX512BW), GCOMP_ISA_AVX2);

  setenv("GCOMP_ISA", "base", 1);
  assert_int_equal(gcomp_reinit_for_testing(), GCOMP_OK);
  assert_int_equal(gcomp_isa_level(), GCOMP_ISA_BASE);
  assert_string_equal(gcomp_isa_selected(), "base");

  setenv("GCOMP_ISA", "avx2", 1);
  if (best >= GCOMP_ISA_AVX2) {
    assert_int_equal(gcomp_reinit_for_testing(), GCOMP_OK);
    assert_int_equal(gcomp_isa_level(), GCOMP_ISA_AVX2);
  } else {
    assert_int_equal(gcomp_reinit_for_testing(), GCOMP_ERR_UNSUPPORTED);
    assert_non_null(strstr(gcomp_last_error(), "more than this CPU has"));
  }
  setenv("GCOMP_ISA", "avx512", 1);
  if (best >= GCOMP_ISA_AVX512) {
    assert_int_equal(gcomp_reinit_for_testing(), GCOMP_OK);
    assert_int_equal(gcomp_isa_level(), GCOMP_ISA_AVX512);
    assert_string_equal(gcomp_isa_selected(), "avx512");
  } else {
    print_message("no AVX-512 F/BW/VL on this CPU: GCOMP_ISA=avx512 must be refused\n");
    assert_int_equal(gcomp_reinit_for_testing(), GCOMP_ERR_UNSUPPORTED);
    assert_non_null(strstr(gcomp_last_error(), "GCOMP_ISA=avx512"));
  }

  unsetenv("GCOMP_ISA");   /* auto: the best the CPU has */
  assert_int_equal(gcomp_reinit_for_testing(), GCOMP_OK);
  assert_int_equal(gcomp_isa_level(), best);
  if (f & GCOMP_CPU_AVX2) assert_non_null(strstr(gcomp_cpu_features(), "avx2"));
}

/* Which level each kernel family runs at: GCOMP_ISA forces every family; auto gives each a
 * level this CPU runs, the best unless the table of measured CPUs lowers it. No timing. */
static gcomp_isa level_named(const char *name) {
  return !strcmp(name, "avx512") ? GCOMP_ISA_AVX512 : !strcmp(name, "avx2") ? GCOMP_ISA_AVX2
                                                                            : GCOMP_ISA_BASE;
}

static void test_kernel_families(void **state) {
  unsigned f = gcomp_cpu_detect();
  gcomp_isa best = gcomp_isa_best_level(f);
  gcomp_cpu_id self = gcomp_cpu_identify();
  static const char *const levels[] = {"base", "avx2", "avx512"};
  for (int l = 0; l <= (int)best; l++) {   /* forced: every family at that level */
    setenv("GCOMP_ISA", levels[l], 1);
    assert_int_equal(gcomp_reinit_for_testing(), GCOMP_OK);
    const char *fam = NULL, *lvl;
    int i = 0;
    for (; (lvl = gcomp_kernel_choice(i, &fam)) != NULL; i++) {
      assert_string_equal(lvl, levels[l]);
      assert_int_equal(gcomp_kernel_level((gcomp_kfamily)i), (gcomp_isa)l);
      assert_string_equal(fam, gcomp_kfamily_name((gcomp_kfamily)i));
    }
    assert_int_equal(i, GCOMP_KF_COUNT);
  }
  unsetenv("GCOMP_ISA");   /* auto: what the table says for this CPU, within what it runs */
  assert_int_equal(gcomp_reinit_for_testing(), GCOMP_OK);
  int at_best = 0;
  for (int i = 0; i < GCOMP_KF_COUNT; i++) {
    const char *fam = NULL, *lvl = gcomp_kernel_choice(i, &fam);
    assert_non_null(lvl);
    gcomp_isa l = level_named(lvl);
    assert_string_equal(lvl, gcomp_isa_name(l));
    assert_true(l <= best);
    assert_int_equal(l, gcomp_kernel_pick((gcomp_kfamily)i, f, &self));
    at_best += l == best;
    print_message("%s=%s\n", fam, lvl);
  }
  assert_true(at_best > 0);   /* the table lowers some families, never all */
  assert_null(gcomp_kernel_choice(GCOMP_KF_COUNT, NULL));
  assert_null(gcomp_kernel_choice(-1, NULL));

  /* the table itself, on CPUs this one is not */
  const unsigned avx2 = GCOMP_CPU_AVX2 | GCOMP_CPU_F16C | GCOMP_CPU_FMA | GCOMP_CPU_BMI2 |
                        GCOMP_CPU_PCLMUL | GCOMP_CPU_SSE42;
  const unsigned avx512 = avx2 | GCOMP_CPU_AVX512F | GCOMP_CPU_AVX512BW | GCOMP_CPU_AVX512VL;
  const gcomp_cpu_id zen5 = {"AuthenticAMD", 0x1a, 0x02}, xeon = {"GenuineIntel", 6, 0x8f};
  for (int i = 0; i < GCOMP_KF_COUNT; i++) {
    gcomp_kfamily k = (gcomp_kfamily)i;
    assert_int_equal(gcomp_kernel_pick(k, avx512, &xeon), GCOMP_ISA_AVX512);
    assert_int_equal(gcomp_kernel_pick(k, avx512, &zen5),
                     k == GCOMP_KF_QUANT_DEC ? GCOMP_ISA_AVX2 : GCOMP_ISA_AVX512);
    assert_int_equal(gcomp_kernel_pick(k, avx2, &zen5), GCOMP_ISA_AVX2);   /* never raised */
    assert_int_equal(gcomp_kernel_pick(k, 0, &zen5), GCOMP_ISA_BASE);
  }
  /* the identity is read from CPUID: a vendor string of 12 characters on x86 */
#if defined(__x86_64__)
  assert_int_equal(strlen(self.vendor), 12);
  assert_true(self.family >= 6);
#endif
}

/* ---- configs ------------------------------------------------------------------------- */
static void test_config_starts_from_environment(void **state) {
  setenv("GCOMP_CODEC_MIN_BYTES", "4k", 1);
  assert_int_equal(gcomp_reinit_for_testing(), GCOMP_OK);
  gcomp_config *c = NULL;
  assert_int_equal(gcomp_config_create(&c), GCOMP_OK);
  const char *v = NULL;
  int set = -1;
  assert_int_equal(gcomp_config_get(c, "GCOMP_CODEC_MIN_BYTES", &v, &set), GCOMP_OK);
  assert_string_equal(v, "4k");
  assert_int_equal(set, 1);
  assert_int_equal(gcomp_config_get(c, "CODEC", &v, &set), GCOMP_OK);   /* prefix optional */
  assert_string_equal(v, "none");
  assert_int_equal(set, 0);
  /* the config changes, the environment and the process's values do not */
  assert_int_equal(gcomp_config_set(c, "CODEC_MIN_BYTES", "1m"), GCOMP_OK);
  assert_int_equal(gcomp_settings_int(gcomp_config_settings(c), GCOMP_P_CODEC_MIN_BYTES), 1 << 20);
  assert_string_equal(getenv("GCOMP_CODEC_MIN_BYTES"), "4k");
  assert_int_equal(gcomp_param_int(GCOMP_P_CODEC_MIN_BYTES), 4096);
  assert_int_equal(gcomp_config_set(c, "GCOMP_CODEC_MIN_BYTES", NULL), GCOMP_OK);   /* default */
  assert_int_equal(gcomp_config_get(c, "GCOMP_CODEC_MIN_BYTES", &v, &set), GCOMP_OK);
  assert_string_equal(v, "65536");
  assert_int_equal(set, 0);
  gcomp_config_destroy(c);
  gcomp_config_destroy(NULL);
}

static void test_config_refuses(void **state) {
  gcomp_config *c = NULL;
  assert_int_equal(gcomp_config_create(&c), GCOMP_OK);
  const char *v = NULL;
  /* a bad value names the setting and the value, and leaves the config as it was */
  assert_int_equal(gcomp_config_set(c, "GCOMP_TIMEOUT_MS", "1500"), GCOMP_OK);
  assert_int_equal(gcomp_config_set(c, "GCOMP_TIMEOUT_MS", "soon"), GCOMP_ERR_INVALID);
  assert_non_null(strstr(gcomp_last_error(), "GCOMP_TIMEOUT_MS='soon'"));
  assert_int_equal(gcomp_config_set(c, "TIMEOUT_MS", "0"), GCOMP_ERR_INVALID);   /* range */
  assert_int_equal(gcomp_config_get(c, "GCOMP_TIMEOUT_MS", &v, NULL), GCOMP_OK);
  assert_string_equal(v, "1500");
  assert_int_equal(gcomp_config_set(c, "GCOMP_CODEK", "bf16"), GCOMP_ERR_INVALID);
  assert_non_null(strstr(gcomp_last_error(), "'GCOMP_CODEK' is not a gcomp setting"));
  assert_int_equal(gcomp_config_get(c, "GCOMP_CODEK", &v, NULL), GCOMP_ERR_INVALID);
  static const char *const process[] = {"GCOMP_DEBUG", "DEBUG_SUBSYS", "GCOMP_DEBUG_FILE",
                                        "GCOMP_ISA", "GCOMP_SHIM_STRICT", "GCOMP_FAULT"};
  for (size_t i = 0; i < sizeof process / sizeof *process; i++) {
    assert_int_equal(gcomp_config_set(c, process[i], "1"), GCOMP_ERR_INVALID);
    assert_non_null(strstr(gcomp_last_error(), "a setting of the whole process"));
  }
  static const char *const launcher[] = {"GCOMP_RANK", "GCOMP_SIZE", "GCOMP_LOCAL_RANK",
                                         "GCOMP_ROOT", "JOB_TOKEN"};
  for (size_t i = 0; i < sizeof launcher / sizeof *launcher; i++) {
    assert_int_equal(gcomp_config_set(c, launcher[i], "1"), GCOMP_ERR_INVALID);
    assert_non_null(strstr(gcomp_last_error(), "the launcher's"));
  }
  assert_non_null(strstr(gcomp_last_error(), "GCOMP_JOB_TOKEN"));   /* the full name */
  assert_int_equal(gcomp_config_get(c, "GCOMP_DEBUG", &v, NULL), GCOMP_OK);   /* readable */
  assert_string_equal(v, "warn");
  assert_int_equal(gcomp_config_create(NULL), GCOMP_ERR_INVALID);
  assert_int_equal(gcomp_config_set(NULL, "GCOMP_CODEC", "bf16"), GCOMP_ERR_INVALID);
  assert_int_equal(gcomp_config_set(c, NULL, "bf16"), GCOMP_ERR_INVALID);
  assert_int_equal(gcomp_config_get(c, NULL, &v, NULL), GCOMP_ERR_INVALID);
  gcomp_config_destroy(c);
}

/* With a malformed variable the library runs on defaults and refuses configs, but the text
 * stays readable (the MPI shim's GCOMP_SHIM_STRICT must hold exactly then). */
static void test_config_get_after_bad_environment(void **state) {
  setenv("GCOMP_SHIM_STRICT", "yes", 1);
  setenv("GCOMP_TIMEOUT_MS", "abc", 1);
  assert_int_equal(gcomp_reinit_for_testing(), GCOMP_ERR_INVALID);
  const char *v = NULL;
  int set = 0;
  assert_int_equal(gcomp_config_get(NULL, "GCOMP_SHIM_STRICT", &v, &set), GCOMP_OK);
  assert_string_equal(v, "yes");
  assert_int_equal(set, 1);
  gcomp_config *c = (gcomp_config *)&set;
  assert_int_equal(gcomp_config_create(&c), GCOMP_ERR_INVALID);
  assert_null(c);
  assert_non_null(strstr(gcomp_last_error(), "GCOMP_TIMEOUT_MS='abc'"));
  unsetenv("GCOMP_SHIM_STRICT");
  unsetenv("GCOMP_TIMEOUT_MS");
  assert_int_equal(gcomp_reinit_for_testing(), GCOMP_OK);
}

/* A config's table is its own and NULL's is the environment's, the one gcomp_param_* read
 * whatever configs exist: reduce/ fills a transport's settings from one table
 * (gcomp_fabric_opts_from; tests/unit/test_comm_split.c and test_comm_api.c check them
 * arrive). */
static void test_config_tables(void **state) {
  setenv("GCOMP_TIMEOUT_MS", "4321", 1);
  assert_int_equal(gcomp_reinit_for_testing(), GCOMP_OK);
  gcomp_config *c = NULL;
  assert_int_equal(gcomp_config_create(&c), GCOMP_OK);
  assert_int_equal(gcomp_config_set(c, "GCOMP_TIMEOUT_MS", "1234"), GCOMP_OK);
  assert_int_equal(gcomp_settings_int(gcomp_config_settings(c), GCOMP_P_TIMEOUT_MS), 1234);
  assert_int_equal(gcomp_settings_int(gcomp_config_settings(NULL), GCOMP_P_TIMEOUT_MS), 4321);
  assert_true(gcomp_settings_is_set(gcomp_config_settings(NULL), GCOMP_P_TIMEOUT_MS));
  assert_int_equal(gcomp_param_int(GCOMP_P_TIMEOUT_MS), 4321);
  gcomp_config_destroy(c);
}

/* A failure is logged under its layer's subsystem only, so GCOMP_DEBUG_SUBSYS filters it
 * (it was logged under all of them). */
/* Logs at info, only `subsys`, to a fresh file (path: a "/tmp/gcomp-log-XXXXXX" buffer) */
static void log_info_to_temp(char *path, const char *subsys) {
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  close(fd);
  setenv("GCOMP_DEBUG_FILE", path, 1);
  setenv("GCOMP_DEBUG", "info", 1);
  setenv("GCOMP_DEBUG_SUBSYS", subsys, 1);
  assert_int_equal(gcomp_reinit_for_testing(), GCOMP_OK);
}

static void test_failure_logged_under_its_subsystem(void **state) {
  char path[] = "/tmp/gcomp-log-XXXXXX";
  log_info_to_temp(path, "codec");
  gcomp_codec *codec = NULL;
  assert_int_equal(gcomp_codec_create("bogus-codec", &codec), GCOMP_ERR_INVALID);
  gcomp_error_set(GCOMP_ERR_FABRIC, "src/fabric/ofi.c", 2, "fabric-failure");
  gcomp_error_set(GCOMP_ERR_PEER, "reduce/comm.c", 3, "reduce-failure");
  gcomp_error_set(GCOMP_ERR_INVALID, NULL, 0, "caller-failure");   /* a caller's: init */
  gcomp_log_close();
  const char *log = slurp(path);
  assert_non_null(log);
  assert_non_null(strstr(log, " INFO codec "));
  assert_non_null(strstr(log, "bogus-codec"));
  assert_null(strstr(log, "fabric-failure"));
  assert_null(strstr(log, "reduce-failure"));
  assert_null(strstr(log, "caller-failure"));
  assert_null(strstr(log, " all "));
  unlink(path);
}

/* The logging door of layers built on gcomp (the MPI shim) */
static void test_public_log(void **state) {
  char path[] = "/tmp/gcomp-log-XXXXXX";
  log_info_to_temp(path, "shim");
  assert_true(gcomp_log_enabled(GCOMP_LOG_INFO, "shim"));
  assert_true(gcomp_log_enabled(GCOMP_LOG_WARN, "shim"));
  assert_false(gcomp_log_enabled(GCOMP_LOG_TRACE, "shim"));
  assert_false(gcomp_log_enabled(GCOMP_LOG_INFO, "codec"));
  assert_false(gcomp_log_enabled(GCOMP_LOG_INFO, "no-such-subsystem"));
  assert_false(gcomp_log_enabled(GCOMP_LOG_INFO, NULL));
  gcomp_log_message(GCOMP_LOG_INFO, "shim", "shim/mpi_shim.c", 7, "hello %d", 5);
  gcomp_log_message(GCOMP_LOG_INFO, "codec", "x.c", 1, "filtered");
  gcomp_log_message(GCOMP_LOG_WARN, "shim", NULL, 0, "no file");
  gcomp_log_close();
  const char *log = slurp(path);
  assert_non_null(log);
  assert_non_null(strstr(log, "gcomp INFO shim mpi_shim.c:7 hello 5"));
  assert_non_null(strstr(log, "gcomp WARN shim :0 no file"));
  assert_null(strstr(log, "filtered"));
  unlink(path);
}

int main(void) {
  /* before anything initialised the library: the CPU getters answer for this CPU (they
   * said "base" and "" until something else had called gcomp_init) */
  if (strcmp(gcomp_isa_best(), gcomp_isa_name(gcomp_isa_best_level(gcomp_cpu_detect()))) != 0 ||
      (gcomp_cpu_detect() && !gcomp_cpu_features()[0])) {
    fprintf(stderr, "CPU getters before gcomp_init: best %s, features '%s'\n", gcomp_isa_best(),
            gcomp_cpu_features());
    return 1;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_status_codes_fixed, setup, test_env_restore),
      cmocka_unit_test_setup_teardown(test_error_detail_and_trace, setup, test_env_restore),
      cmocka_unit_test_setup_teardown(test_param_defaults, setup, test_env_restore),
      cmocka_unit_test_setup_teardown(test_param_valid, setup, test_env_restore),
      cmocka_unit_test_setup_teardown(test_param_invalid, setup, test_env_restore),
      cmocka_unit_test_setup_teardown(test_unknown_variable_warns_with_suggestion, setup, test_env_restore),
      cmocka_unit_test_setup_teardown(test_log_file_pattern_and_levels, setup, test_env_restore),
      cmocka_unit_test_setup_teardown(test_log_checks_level_first, setup, test_env_restore),
      cmocka_unit_test_setup_teardown(test_isa_levels, setup, test_env_restore),
      cmocka_unit_test_setup_teardown(test_kernel_families, setup, test_env_restore),
      cmocka_unit_test_setup_teardown(test_job_token_not_shown, setup, test_env_restore),
      cmocka_unit_test_setup_teardown(test_config_starts_from_environment, setup, test_env_restore),
      cmocka_unit_test_setup_teardown(test_config_refuses, setup, test_env_restore),
      cmocka_unit_test_setup_teardown(test_config_get_after_bad_environment, setup, test_env_restore),
      cmocka_unit_test_setup_teardown(test_config_tables, setup, test_env_restore),
      cmocka_unit_test_setup_teardown(test_failure_logged_under_its_subsystem, setup, test_env_restore),
      cmocka_unit_test_setup_teardown(test_public_log, setup, test_env_restore),
  };
  return cmocka_run_group_tests_name("common", tests, test_env_save, test_env_free);
}
