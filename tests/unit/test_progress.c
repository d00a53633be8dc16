/* The progress thread against the threads around it, for ThreadSanitizer (label tsan:
 * scripts/test builds this program alone with -fsanitize=thread and runs it): requests
 * waited for from another thread than the one that issued them, test and wait racing the
 * progress thread, the figures read while the progress thread writes them, and destroy
 * with requests pending. The sums are checked too, so the program gates in every tree.
 * Only gcomp.h. */
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "gcomp.h"

enum { N = 2, COUNT = 4096, CALLS = 24 };

static void make_comms(gcomp_comm **comms) {
  gcomp_config *c = NULL;
  assert_int_equal(gcomp_config_create(&c), GCOMP_OK);
  assert_int_equal(gcomp_config_set(c, "GCOMP_ALPHA_BETA", "1,10,20,1"), GCOMP_OK);
  assert_int_equal(gcomp_config_set(c, "GCOMP_SKEW_WINDOW", "4"), GCOMP_OK);   /* exchanges */
  assert_int_equal(gcomp_comm_init_local(N, NULL, c, comms), GCOMP_OK);
  gcomp_config_destroy(c);
}

/* ---- requests handed to a waiter thread, figures read by a reader thread ---------------- */
typedef struct {
  gcomp_request *req[CALLS];
  _Atomic int issued;   /* requests published to the waiter */
  int status;
} handoff;

typedef struct {
  gcomp_comm *comm;
  int rank;
  float x[CALLS][COUNT];
  handoff h;
  _Atomic int stop_reader;
  int reads, reader_status;
} rank_job;

static void *waiter_main(void *arg) {
  handoff *h = arg;
  h->status = GCOMP_OK;
  for (int i = 0; i < CALLS; i++) {
    while (atomic_load(&h->issued) <= i) sched_yield();
    int st;
    if (i % 2) {
      st = gcomp_request_wait(h->req[i]);
    } else {   /* polled: test races the progress thread finishing it */
      int done = 0;
      do st = gcomp_request_test(h->req[i], &done);
      while (st == GCOMP_OK && !done);
    }
    if (st < 0 && h->status == GCOMP_OK) h->status = st;
  }
  return NULL;
}

/* Reads what the progress thread writes (the figures, the skew table, the last algorithm)
 * for as long as calls run */
static void *reader_main(void *arg) {
  rank_job *j = arg;
  j->reader_status = GCOMP_OK;
  while (!atomic_load(&j->stop_reader)) {
    gcomp_comm_stats s = {.struct_size = sizeof s};
    gcomp_skew_stats k = {.struct_size = sizeof k};
    int st = gcomp_comm_get_stats(j->comm, &s);
    if (st == GCOMP_OK) st = gcomp_comm_get_skew(j->comm, &k);
    if (st == GCOMP_OK && s.calls > CALLS + 1) st = -1000;   /* a torn or garbage count */
    (void)gcomp_comm_last_algo(j->comm);
    if (st < 0) j->reader_status = st;
    j->reads++;
    sched_yield();
  }
  return NULL;
}

static void *rank_main(void *arg) {
  rank_job *j = arg;
  pthread_t waiter, reader;
  atomic_store(&j->h.issued, 0);
  if (pthread_create(&waiter, NULL, waiter_main, &j->h) != 0) {
    j->h.status = -1002;
    return NULL;
  }
  if (pthread_create(&reader, NULL, reader_main, j) != 0) {
    atomic_store(&j->h.issued, CALLS);   /* a waiter with nothing to wait for: it ends */
    pthread_join(waiter, NULL);
    j->h.status = -1002;
    return NULL;
  }
  int st = GCOMP_OK;
  for (int i = 0; i < CALLS && st == GCOMP_OK; i++) {
    for (int k = 0; k < COUNT; k++) j->x[i][k] = (float)(j->rank + i + k);
    st = gcomp_iallreduce(j->comm, j->x[i], j->x[i], COUNT, GCOMP_FLOAT32, GCOMP_SUM, NULL, 0,
                          &j->h.req[i]);
    if (st == GCOMP_OK) atomic_store(&j->h.issued, i + 1);
  }
  /* a blocking call behind them, on this thread, while the waiter still waits */
  float y[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  if (st == GCOMP_OK) st = gcomp_allreduce(j->comm, y, y, 8, GCOMP_FLOAT32, GCOMP_SUM, NULL, 0);
  if (st == GCOMP_OK && y[7] != 8.0f * N) st = -1001;
  if (st < 0) atomic_store(&j->h.issued, CALLS);   /* the waiter must not wait forever */
  pthread_join(waiter, NULL);
  atomic_store(&j->stop_reader, 1);
  pthread_join(reader, NULL);
  j->h.status = st < 0 ? st : j->h.status;
  return NULL;
}

static void test_wait_from_another_thread(void **state) {
  gcomp_comm *comms[N];
  make_comms(comms);
  static rank_job jobs[N];
  pthread_t th[N];
  for (int r = 0; r < N; r++) {
    memset(&jobs[r], 0, sizeof jobs[r]);
    jobs[r].comm = comms[r], jobs[r].rank = r;
    assert_int_equal(pthread_create(&th[r], NULL, rank_main, &jobs[r]), 0);
  }
  for (int r = 0; r < N; r++) pthread_join(th[r], NULL);
  for (int r = 0; r < N; r++) {
    if (jobs[r].h.status != GCOMP_OK) fail_msg("rank %d: %d %s", r, jobs[r].h.status,
                                               gcomp_last_error());
    assert_int_equal(jobs[r].reader_status, GCOMP_OK);
    assert_true(jobs[r].reads > 0);
    for (int i = 0; i < CALLS; i++)
      for (int k = 0; k < COUNT; k += 511)   /* sum over r of (r + i + k) */
        assert_true(jobs[r].x[i][k] == (float)(N * (i + k) + N * (N - 1) / 2));
    gcomp_comm_stats s = {.struct_size = sizeof s};
    assert_int_equal(gcomp_comm_get_stats(comms[r], &s), GCOMP_OK);
    assert_int_equal(s.calls, CALLS + 1);
  }
  for (int r = 0; r < N; r++) assert_int_equal(gcomp_comm_destroy(comms[r]), GCOMP_OK);
}

/* ---- destroy with requests pending -------------------------------------------------------- */
typedef struct {
  gcomp_comm *comm;
  float x[COUNT];
  int destroy_status, status;
  char error[256];
  pthread_barrier_t *bar;
} pending_job;

static void *pending_main(void *arg) {
  pending_job *j = arg;
  for (int k = 0; k < COUNT; k++) j->x[k] = 1.0f;
  gcomp_request *req = NULL;
  j->status = gcomp_iallreduce(j->comm, j->x, j->x, COUNT, GCOMP_FLOAT32, GCOMP_SUM, NULL, 0,
                               &req);
  if (j->status < 0) return NULL;
  /* refused whatever the progress thread is doing with the request meanwhile */
  j->destroy_status = gcomp_comm_destroy(j->comm);
  snprintf(j->error, sizeof j->error, "%s", gcomp_last_error());
  pthread_barrier_wait(j->bar);   /* both ranks tried before either completes */
  j->status = gcomp_request_wait(req);
  return NULL;
}

static void test_destroy_with_pending(void **state) {
  gcomp_comm *comms[N];
  make_comms(comms);
  pthread_barrier_t bar;
  pthread_barrier_init(&bar, NULL, N);
  static pending_job jobs[N];
  pthread_t th[N];
  for (int r = 0; r < N; r++) {
    memset(&jobs[r], 0, sizeof jobs[r]);
    jobs[r].comm = comms[r], jobs[r].bar = &bar;
    assert_int_equal(pthread_create(&th[r], NULL, pending_main, &jobs[r]), 0);
  }
  for (int r = 0; r < N; r++) pthread_join(th[r], NULL);
  pthread_barrier_destroy(&bar);
  for (int r = 0; r < N; r++) {
    assert_int_equal(jobs[r].status, GCOMP_OK);
    assert_int_equal(jobs[r].destroy_status, GCOMP_ERR_INVALID);
    assert_non_null(strstr(jobs[r].error, "1 gcomp_iallreduce request is pending"));
    assert_true(jobs[r].x[COUNT - 1] == (float)N);   /* the communicator stayed usable */
  }
  for (int r = 0; r < N; r++) assert_int_equal(gcomp_comm_destroy(comms[r]), GCOMP_OK);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_wait_from_another_thread),
      cmocka_unit_test(test_destroy_with_pending),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
