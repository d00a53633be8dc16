/* gcomp_comm_abort from another thread (label tsan too): requests waiting on a peer that
 * never calls finish with GCOMP_ERR_ABORTED, as does a blocking call and every later call;
 * the peer's own call then fails from the notice (not after its 30 s timeout: a timeout
 * would be GCOMP_ERR_TIMEOUT); destroy succeeds. No clock is asserted. Only gcomp.h. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "gcomp.h"

enum { N = 2, COUNT = 1024 };

static void make_comms(gcomp_comm **comms) {
  gcomp_config *c = NULL;
  assert_int_equal(gcomp_config_create(&c), GCOMP_OK);
  assert_int_equal(gcomp_config_set(c, "GCOMP_ALPHA_BETA", "1,10,20,1"), GCOMP_OK);
  assert_int_equal(gcomp_config_set(c, "GCOMP_TIMEOUT_MS", "30000"), GCOMP_OK);
  assert_int_equal(gcomp_comm_init_local(N, NULL, c, comms), GCOMP_OK);
  gcomp_config_destroy(c);
}

/* lets the requests start waiting first: scheduling only, nothing is timed */
static void *aborter(void *arg) {
  struct timespec ts = {0, 50 * 1000 * 1000};
  nanosleep(&ts, NULL);
  assert_int_equal(gcomp_comm_abort(arg), GCOMP_OK);
  return NULL;
}

/* the peer that was stopped comes back: its call hears rank 0's notice */
static void peer_hears_the_notice(gcomp_comm *peer) {
  float x[COUNT] = {0};
  int st = gcomp_allreduce(peer, x, x, COUNT, GCOMP_FLOAT32, GCOMP_SUM, NULL, 0);
  assert_int_equal(st, GCOMP_ERR_ABORTED);
  assert_non_null(strstr(gcomp_last_error(), "rank 0"));
  assert_int_equal(gcomp_comm_destroy(peer), GCOMP_OK);
}

static void test_requests_aborted(void **state) {
  (void)state;
  gcomp_comm *comms[N];
  make_comms(comms);
  static float x[3][COUNT];
  gcomp_request *req[3];
  for (int i = 0; i < 3; i++)
    assert_int_equal(gcomp_iallreduce(comms[0], x[i], x[i], COUNT, GCOMP_FLOAT32, GCOMP_SUM,
                                      NULL, (uint64_t)i, &req[i]),
                     GCOMP_OK);
  pthread_t th;
  pthread_create(&th, NULL, aborter, comms[0]);
  for (int i = 0; i < 3; i++) {
    assert_int_equal(gcomp_request_wait(req[i]), GCOMP_ERR_ABORTED);
    assert_non_null(strstr(gcomp_last_error(), "gcomp_comm_abort"));
  }
  pthread_join(th, NULL);
  /* later calls too, and a second abort changes nothing */
  assert_int_equal(gcomp_comm_abort(comms[0]), GCOMP_OK);
  assert_int_equal(gcomp_allreduce(comms[0], x[0], x[0], COUNT, GCOMP_FLOAT32, GCOMP_SUM, NULL, 0),
                   GCOMP_ERR_ABORTED);
  assert_int_equal(gcomp_comm_destroy(comms[0]), GCOMP_OK);
  peer_hears_the_notice(comms[1]);
  assert_int_equal(gcomp_comm_abort(NULL), GCOMP_OK);
  assert_string_equal(gcomp_strerror(GCOMP_ERR_ABORTED),
                      "GCOMP_ERR_ABORTED: communicator aborted");
}

/* A blocking call on the caller's thread (no progress thread), aborted from another */
static void test_blocking_call_aborted(void **state) {
  (void)state;
  gcomp_comm *comms[N];
  make_comms(comms);
  static float x[COUNT];
  pthread_t th;
  pthread_create(&th, NULL, aborter, comms[0]);
  assert_int_equal(gcomp_allreduce(comms[0], x, x, COUNT, GCOMP_FLOAT32, GCOMP_SUM, NULL, 0),
                   GCOMP_ERR_ABORTED);
  pthread_join(th, NULL);
  assert_int_equal(gcomp_comm_destroy(comms[0]), GCOMP_OK);
  peer_hears_the_notice(comms[1]);
}

/* Aborted while idle: destroy tells the peer, whose next call fails from the notice */
static void test_idle_abort(void **state) {
  (void)state;
  gcomp_comm *comms[N];
  make_comms(comms);
  assert_int_equal(gcomp_comm_abort(comms[0]), GCOMP_OK);
  assert_int_equal(gcomp_comm_destroy(comms[0]), GCOMP_OK);
  peer_hears_the_notice(comms[1]);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_requests_aborted),
      cmocka_unit_test(test_blocking_call_aborted),
      cmocka_unit_test(test_idle_abort),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
