/* What a communicator reports: the fp16/bf16 overflows of its calls in its figures, a
 * warning when its stats or trace file cannot be written whole (a full disk), and the
 * status of a shared segment it could not have. Only gcomp.h (shm_open is wrapped for
 * this program: tests/CMakeLists.txt). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "gcomp.h"

enum { COUNT = 1001 };

int __real_shm_open(const char *name, int flags, mode_t mode);
int __wrap_shm_open(const char *name, int flags, mode_t mode);
static int fail_shm_open;   /* 1: the creating call fails, 2: the opening one */
int __wrap_shm_open(const char *name, int flags, mode_t mode) {
  if (fail_shm_open == ((flags & O_CREAT) ? 1 : 2)) {
    errno = EACCES;
    return -1;
  }
  return __real_shm_open(name, flags, mode);
}   /* odd: the ranks' chunks differ in length */

static gcomp_config *quiet_config(void) {
  gcomp_config *c = NULL;
  assert_int_equal(gcomp_config_create(&c), GCOMP_OK);
  assert_int_equal(gcomp_config_set(c, "GCOMP_ALPHA_BETA", "1,10,20,1"), GCOMP_OK);
  return c;
}

typedef struct {
  gcomp_comm *comm;
  gcomp_dtype dtype;
  uint16_t x[COUNT];
  int status;
} rank_job;

static void *reduce_main(void *arg) {
  rank_job *j = arg;
  j->status = gcomp_allreduce(j->comm, j->x, j->x, COUNT, j->dtype, GCOMP_SUM, NULL, 0);
  return NULL;
}

/* Two in-process ranks, each summing COUNT copies of its value (rank 0 a, rank 1 b) */
static void sum_pair(gcomp_comm **comms, rank_job *jobs, gcomp_dtype dtype, uint16_t a,
                     uint16_t b) {
  gcomp_config *c = quiet_config();
  assert_int_equal(gcomp_comm_init_local(2, NULL, c, comms), GCOMP_OK);
  gcomp_config_destroy(c);
  pthread_t th[2];
  for (int r = 0; r < 2; r++) {
    jobs[r].comm = comms[r];
    jobs[r].dtype = dtype;
    for (int i = 0; i < COUNT; i++) jobs[r].x[i] = r ? b : a;
    assert_int_equal(pthread_create(&th[r], NULL, reduce_main, &jobs[r]), 0);
  }
  for (int r = 0; r < 2; r++) pthread_join(th[r], NULL);
}

/* Two ranks sum 16-bit values whose fp32 sum is finite but beyond the type: every result
 * overflows, and the ranks' counts add up to COUNT, once each. */
static void check_overflows(gcomp_dtype dtype, uint16_t a, uint16_t b, uint16_t inf) {
  gcomp_comm *comms[2];
  static rank_job jobs[2];
  sum_pair(comms, jobs, dtype, a, b);
  uint64_t overflows = 0;
  for (int r = 0; r < 2; r++) {
    assert_int_equal(jobs[r].status, GCOMP_OK);
    for (int i = 0; i < COUNT; i++) assert_int_equal(jobs[r].x[i], inf);
    gcomp_comm_stats s = {.struct_size = sizeof s};
    assert_int_equal(gcomp_comm_get_stats(comms[r], &s), GCOMP_OK);
    assert_int_equal(s.nonfinite, 0);   /* the fp32 sums were finite */
    assert_true(s.overflows > 0);       /* each rank counts a share */
    overflows += s.overflows;
  }
  assert_int_equal(overflows, COUNT);
  for (int r = 0; r < 2; r++) assert_int_equal(gcomp_comm_destroy(comms[r]), GCOMP_OK);
}

static void test_fp16_overflows_counted(void **state) {
  /* 40000 + 40000 = 80000 > 65504 */
  check_overflows(GCOMP_FLOAT16, 0x78e2, 0x78e2, 0x7c00);
}

static void test_bf16_overflows_counted(void **state) {
  /* 0x7f7f (the largest bf16 below 2^128 but one step) + 1.5 * 2^119: a finite fp32 sum
   * above the last bf16 value's rounding boundary */
  check_overflows(GCOMP_BFLOAT16, 0x7f7f, 0x7b40, 0x7f80);
}

/* Runs fn with this process's stderr in a file; returns what was written (caller frees). */
static char *stderr_of(void (*fn)(void)) {
  char path[] = "/tmp/gcomp-test-stderr-XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  fflush(stderr);
  int saved = dup(2);
  assert_true(saved >= 0);
  assert_true(dup2(fd, 2) >= 0);
  fn();
  fflush(stderr);
  assert_true(dup2(saved, 2) >= 0);
  close(saved);
  off_t n = lseek(fd, 0, SEEK_END);
  char *text = calloc((size_t)n + 1, 1);
  assert_non_null(text);
  assert_int_equal(pread(fd, text, (size_t)n, 0), n);
  close(fd);
  unlink(path);
  return text;
}

static void full_disk_run(void) {
  gcomp_config *c = quiet_config();
  assert_int_equal(gcomp_config_set(c, "GCOMP_STATS", "/dev/full"), GCOMP_OK);
  assert_int_equal(gcomp_config_set(c, "GCOMP_TRACE", "/dev/full"), GCOMP_OK);
  gcomp_comm *comm;
  assert_int_equal(gcomp_comm_init_local(1, NULL, c, &comm), GCOMP_OK);
  gcomp_config_destroy(c);
  float x[64] = {1};
  for (int k = 0; k < 200; k++)   /* a trace longer than one stdio buffer */
    assert_int_equal(gcomp_allreduce(comm, x, x, 64, GCOMP_FLOAT32, GCOMP_SUM, NULL, 0), 0);
  assert_int_equal(gcomp_comm_destroy(comm), GCOMP_OK);   /* the call did its work */
}

static void test_full_disk_warns(void **state) {
  char *log = stderr_of(full_disk_run);
  if (!strstr(log, "GCOMP_STATS: writing '/dev/full' failed: No space left on device"))
    fail_msg("no warning for the stats file; stderr: %s", log);
  if (!strstr(log, "GCOMP_TRACE: writing '/dev/full' failed: No space left on device"))
    fail_msg("no warning for the trace file; stderr: %s", log);
  free(log);
}

/* No shared segment: a warning with the right status, and the communicator still works */
static void no_segment_run(void) {
  gcomp_comm *comms[2];
  static rank_job jobs[2];
  sum_pair(comms, jobs, GCOMP_BFLOAT16, 0x3f80, 0x3f80);   /* 1.0 + 1.0 */
  for (int r = 0; r < 2; r++) {
    assert_int_equal(jobs[r].status, GCOMP_OK);
    assert_int_equal(jobs[r].x[COUNT - 1], 0x4000);   /* 2.0 */
    assert_string_equal(gcomp_comm_last_algo(comms[r]), gcomp_comm_last_algo(comms[0]));
    assert_true(strcmp(gcomp_comm_last_algo(comms[r]), "shm") != 0);
  }
  for (int r = 0; r < 2; r++) assert_int_equal(gcomp_comm_destroy(comms[r]), GCOMP_OK);
}

static void test_no_segment_status(void **state) {
  static const char *const want[] = {"", "shm_open", "shm_open"};
  static const char *const status[] = {"", "(GCOMP_ERR_UNSUPPORTED", "(GCOMP_ERR_BOOTSTRAP"};
  for (int k = 1; k <= 2; k++) {
    fail_shm_open = k;
    char *log = stderr_of(no_segment_run);
    fail_shm_open = 0;
    if (!strstr(log, "no shared-memory allreduce on this node") || !strstr(log, want[k]) ||
        !strstr(log, status[k]))
      fail_msg("shm_open failing (%s): want %s: stderr: %s", k == 1 ? "create" : "open",
               status[k], log);
    free(log);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fp16_overflows_counted),
      cmocka_unit_test(test_bf16_overflows_counted),
      cmocka_unit_test(test_full_disk_warns),
      cmocka_unit_test(test_no_segment_status),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
