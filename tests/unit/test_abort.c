/* reduce/abort.c over the loopback: the failure-path exchange names the rank that stays
 * silent, a corrupt-frame notice reaches a rank blocked on something else without
 * GCOMP_FAULT (the notice is always on), so does one of a peer found dead or silent (not
 * echoed by the ranks told), and GCOMP_FAULT only injects. No test bounds the
 * time: a notice that did not arrive shows as the detail of a timeout instead. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "abort.h"
#include "coll.h"
#include "gcomp_internal.h"
#include "gcomp_common.h"
#include "transport.h"
#include "test_env.h"
#include "test_hooks.h"

enum { N = 3 };

typedef struct {
  gcomp_transport *t;
  gcomp_abort *a;
  int st;
  char detail[1024];
} job;

/* n loopback ranks after the environment is set: GCOMP_FAULT (NULL: unset) and
 * GCOMP_TIMEOUT_MS (NULL: left as it is); with `a`, each rank's watch (notice on) */
static void world(int n, const char *fault, const char *timeout_ms, gcomp_transport **t,
                  gcomp_abort **a) {
  if (fault) setenv("GCOMP_FAULT", fault, 1);
  else unsetenv("GCOMP_FAULT");
  if (timeout_ms) setenv("GCOMP_TIMEOUT_MS", timeout_ms, 1);
  assert_int_equal(gcomp_reinit_for_testing(), GCOMP_OK);
  assert_int_equal(gcomp_loopback_for_testing(n, NULL, t), GCOMP_OK);
  for (int r = 0; a && r < n; r++) {
    assert_int_equal(gcomp_abort_create(t[r], 1, &a[r]), GCOMP_OK);
    assert_non_null(a[r]);
  }
}

static void world_free(int n, gcomp_transport **t, gcomp_abort **a) {
  for (int r = 0; a && r < n; r++) gcomp_abort_destroy(a[r]);
  for (int r = 0; r < n; r++) gcomp_transport_destroy(t[r]);
}

/* ---- blame: ranks 0 and 1 fail, rank 2 never answers ---------------------------------- */
static void *blame_rank(void *arg) {
  job *j = arg;
  gcomp_error_set(GCOMP_ERR_TIMEOUT, __FILE__, __LINE__, "waited on rank 2");
  j->st = gcomp_abort_blame(j->t, 7, GCOMP_ERR_TIMEOUT);
  snprintf(j->detail, sizeof j->detail, "%s", gcomp_last_error());
  return NULL;
}

static void test_blame_names_the_silent_rank(void **state) {
  (void)state;
  gcomp_transport *t[N];
  world(N, NULL, NULL, t, NULL);
  job jobs[2] = {{.t = t[0]}, {.t = t[1]}};
  pthread_t th[2];
  for (int r = 0; r < 2; r++) pthread_create(&th[r], NULL, blame_rank, &jobs[r]);
  for (int r = 0; r < 2; r++) pthread_join(th[r], NULL);
  for (int r = 0; r < 2; r++) {
    assert_int_equal(jobs[r].st, GCOMP_ERR_TIMEOUT);
    assert_non_null(strstr(jobs[r].detail, "no word after the failure from rank 2 "));
    char other[32];
    snprintf(other, sizeof other, "failed too: rank %d;", 1 - r);
    assert_non_null(strstr(jobs[r].detail, other));
    assert_non_null(strstr(jobs[r].detail, "this rank: waited on rank 2"));
  }
  /* other statuses pass unchanged, detail and all */
  gcomp_error_set(GCOMP_ERR_INVALID, __FILE__, __LINE__, "rank 1 sent 8 bytes");
  char before[256];
  snprintf(before, sizeof before, "%s", gcomp_last_error());
  assert_int_equal(gcomp_abort_blame(t[0], 8, GCOMP_ERR_INVALID), GCOMP_ERR_INVALID);
  assert_string_equal(gcomp_last_error(), before);
  world_free(N, t, NULL);
}

/* ---- blame after a corrupt frame, without the notice: rank 1 found rank 0's data corrupt,
 * ranks 0 and 2 timed out waiting: all three report the corruption and its culprit ------ */
static void *blame_as(void *arg) {
  job *j = arg;
  if (j->st == GCOMP_ERR_CORRUPT)
    gcomp_error_set(GCOMP_ERR_CORRUPT, __FILE__, __LINE__, "data from rank 0 failed validation at rank 1: crc");
  else
    gcomp_error_set(j->st, __FILE__, __LINE__, "waited on rank 1");
  j->st = gcomp_abort_blame(j->t, 9, j->st);
  snprintf(j->detail, sizeof j->detail, "%s", gcomp_last_error());
  return NULL;
}

static void test_blame_spreads_a_corruption(void **state) {
  (void)state;
  gcomp_transport *t[N];
  world(N, NULL, NULL, t, NULL);
  job jobs[N];
  pthread_t th[N];
  for (int r = 0; r < N; r++) {
    jobs[r] = (job){.t = t[r], .st = r == 1 ? GCOMP_ERR_CORRUPT : GCOMP_ERR_TIMEOUT};
    pthread_create(&th[r], NULL, blame_as, &jobs[r]);
  }
  for (int r = 0; r < N; r++) pthread_join(th[r], NULL);
  for (int r = 0; r < N; r++) {
    assert_int_equal(jobs[r].st, GCOMP_ERR_CORRUPT);
    assert_non_null(strstr(jobs[r].detail, "data from rank 0 failed validation at rank 1: crc"));
    if (r == 1) assert_null(strstr(jobs[r].detail, "reported"));   /* its own detail, as it was */
    else assert_non_null(strstr(jobs[r].detail, "rank 1 reported: data from rank 0"));
  }
  world_free(N, t, NULL);
}

/* ---- corrupt notice -------------------------------------------------------------------- */
/* A rank blocked on a receive nobody sends: only the notice can end its wait */
static void *blocked_rank(void *arg) {
  job *j = arg;
  gcomp_treq *r = NULL;
  char buf[8];
  j->st = gcomp_irecv(j->t, 1, gcomp_tag(3, 99), buf, sizeof buf, &r);
  if (j->st == GCOMP_OK) j->st = gcomp_abort_wait(j->a, j->t, r, NULL);
  snprintf(j->detail, sizeof j->detail, "%s", gcomp_last_error());
  return NULL;
}

static void *detecting_rank(void *arg) {
  job *j = arg;
  gcomp_coll c = {.t = j->t, .seq = 3};
  gcomp_error_set(GCOMP_ERR_CORRUPT, __FILE__, __LINE__, "frame checksum mismatch");
  j->st = gcomp_abort_corrupt_from(j->a, &c, GCOMP_ERR_CORRUPT, 0);
  snprintf(j->detail, sizeof j->detail, "%s", gcomp_last_error());
  return NULL;
}

/* GCOMP_FAULT=corrupt: rank 0 only, its 2nd call only, one frame only */
static void test_fault_only_injects(void **state) {
  (void)state;
  gcomp_transport *t[N];
  gcomp_abort *a[N];
  world(N, "corrupt:rank=0,call=2", NULL, t, a);
  uint8_t frame[64] = {0}, zero[64] = {0};
  for (int call = 1; call <= 3; call++)
    for (int r = 0; r < N; r++) {
      gcomp_abort_call_begins(a[r]);
      gcomp_abort_corrupt_frame(a[r], frame, sizeof frame, (r + 1) % N);
      gcomp_abort_corrupt_frame(a[r], frame, sizeof frame, (r + 1) % N);
      int flipped = memcmp(frame, zero, sizeof frame) != 0;
      assert_int_equal(flipped, r == 0 && call == 2);
      assert_int_equal(frame[32], flipped ? 0x5a : 0);
      memset(frame, 0, sizeof frame);
    }
  world_free(N, t, a);
}

/* Production: no GCOMP_FAULT, a timeout far longer than the test. Ranks 0 and 2 wait on
 * receives nobody sends; rank 1 finds corrupt data: the notice, not a timeout, ends their
 * waits (a timeout would return GCOMP_ERR_TIMEOUT, with no "notice" in the detail). */
static void test_corrupt_notice_reaches_every_rank(void **state) {
  (void)state;
  gcomp_transport *t[N];
  gcomp_abort *a[N];
  world(N, NULL, "30000", t, a);
  job jobs[N];
  for (int r = 0; r < N; r++) jobs[r] = (job){.t = t[r], .a = a[r]};
  pthread_t th[N];
  pthread_create(&th[0], NULL, blocked_rank, &jobs[0]);
  pthread_create(&th[2], NULL, blocked_rank, &jobs[2]);
  pthread_create(&th[1], NULL, detecting_rank, &jobs[1]);
  for (int r = 0; r < N; r++) pthread_join(th[r], NULL);
  for (int r = 0; r < N; r++) {
    assert_int_equal(jobs[r].st, GCOMP_ERR_CORRUPT);
    assert_non_null(strstr(jobs[r].detail, "data from rank 0 failed validation at rank 1: "
                                           "frame checksum mismatch"));
    if (r != 1) assert_non_null(strstr(jobs[r].detail, "call aborted by rank 1's notice (call seq 3)"));
  }
  world_free(N, t, a);
}

/* ---- a peer found dead or silent ---------------------------------------------------- */
static void *finding_rank(void *arg) {
  job *j = arg;
  j->t->failed_peer = 2;
  gcomp_error_set(j->st, __FILE__, __LINE__, "rank 1: receive from rank 2: it went away");
  j->st = gcomp_abort_failed(j->a, 4, j->st);
  snprintf(j->detail, sizeof j->detail, "%s", gcomp_last_error());
  return NULL;
}

/* Rank 1 finds rank 2 dead (st GCOMP_ERR_PEER) or silent (GCOMP_ERR_TIMEOUT); rank 0,
 * waiting on rank 1 (alive, sending nothing), fails at once with the same status, naming
 * both, and does not echo the notice; rank 2 (alive here: the loopback cannot die) gets
 * rank 1's notice in its next wait, and only that one. */
static void peer_notice(int st, const char *says) {
  gcomp_transport *t[N];
  gcomp_abort *a[N];
  world(N, NULL, "30000", t, a);
  job jobs[N];
  for (int r = 0; r < N; r++) jobs[r] = (job){.t = t[r], .a = a[r], .st = st};
  pthread_t th[2];
  pthread_create(&th[0], NULL, blocked_rank, &jobs[0]);
  pthread_create(&th[1], NULL, finding_rank, &jobs[1]);
  for (int r = 0; r < 2; r++) pthread_join(th[r], NULL);
  assert_int_equal(jobs[1].st, st);
  assert_non_null(strstr(jobs[1].detail, "rank 1: receive from rank 2: it went away"));
  assert_int_equal(jobs[0].st, st);
  assert_non_null(strstr(jobs[0].detail, says));
  assert_non_null(strstr(jobs[0].detail, "rank 1: receive from rank 2: it went away"));
  /* what rank 0 heard it does not tell again; rank 1 tells once per communicator */
  assert_int_equal(gcomp_abort_failed(jobs[0].a, 4, st), st);
  gcomp_error_set(st, __FILE__, __LINE__, "rank 1: a second failure");
  assert_int_equal(gcomp_abort_failed(jobs[1].a, 5, st), st);
  int got = GCOMP_OK;
  for (int i = 0; i < 64 && got == GCOMP_OK; i++) got = gcomp_abort_poll(jobs[2].a);
  assert_int_equal(got, st);
  assert_non_null(strstr(gcomp_last_error(), "rank 1's notice (call seq 4)"));
  for (int i = 0; i < 256; i++) assert_int_equal(gcomp_abort_poll(jobs[2].a), GCOMP_OK);
  world_free(N, t, a);
}

static void test_peer_death_notice(void **state) {
  (void)state;
  peer_notice(GCOMP_ERR_PEER, "rank 2 is gone: rank 1's notice (call seq 4) says: ");
}

/* a silent peer stays a timeout on the ranks told of it */
static void test_peer_silence_notice(void **state) {
  (void)state;
  peer_notice(GCOMP_ERR_TIMEOUT, "rank 2 was silent towards rank 1: rank 1's notice (call seq 4) says: ");
}

/* Past 8 ranks a poll tests 8 peers in turn: a notice from any peer is still seen, within
 * ceil(n / 8) polls of 16 */
static void test_watch_in_turn(void **state) {
  (void)state;
  enum { M = 20 };
  gcomp_transport *t[M];
  gcomp_abort *a[M];
  world(M, NULL, "30000", t, a);
  const int from[] = {19, 1, 11};   /* past the first pass, at the start, in between */
  for (int i = 0; i < 3; i++) {
    t[from[i]]->failed_peer = 0;
    gcomp_error_set(GCOMP_ERR_PEER, __FILE__, __LINE__, "rank %d: its peer went away", from[i]);
    assert_int_equal(gcomp_abort_failed(a[from[i]], 2, GCOMP_ERR_PEER), GCOMP_ERR_PEER);
    int got = GCOMP_OK, polls = 0;
    while (got == GCOMP_OK && polls < 16 * 3) got = gcomp_abort_poll(a[5]), polls++;
    assert_int_equal(got, GCOMP_ERR_PEER);
    char want[64];
    snprintf(want, sizeof want, "rank %d's notice (call seq 2)", from[i]);
    assert_non_null(strstr(gcomp_last_error(), want));
  }
  world_free(M, t, a);
}

/* A notice receive from a peer that sent nothing for GCOMP_TIMEOUT_MS times out and is posted
 * again: no failure of the transport's user (failed_peer stays -1) */
static void test_idle_watch_is_no_failure(void **state) {
  (void)state;
  gcomp_transport *t[2];
  gcomp_abort *a[2];
  world(2, NULL, "20", t, a);
  struct timespec nap = {0, 50 * 1000000L};
  nanosleep(&nap, NULL);
  for (int i = 0; i < 64; i++) assert_int_equal(gcomp_abort_poll(a[0]), GCOMP_OK);
  assert_int_equal(t[0]->failed_peer, -1);
  assert_int_equal(t[0]->failed, 0);
  world_free(2, t, a);
}

/* GCOMP_NOTICE=0 (the measurement's off-switch): nothing posted, the waits are plain, and a
 * NULL watch (internal calls) is a no-op everywhere */
static void test_off_switch(void **state) {
  (void)state;
  gcomp_transport *t[2];
  world(2, NULL, NULL, t, NULL);
  gcomp_abort *a = NULL;
  assert_int_equal(gcomp_abort_create(t[0], 0, &a), GCOMP_OK);
  assert_non_null(a);
  assert_int_equal(gcomp_abort_call_begins(a), 0);
  uint8_t frame[8] = {0};
  gcomp_abort_corrupt_frame(a, frame, sizeof frame, 1);
  assert_int_equal(frame[4], 0);
  for (int i = 0; i < 64; i++) assert_int_equal(gcomp_abort_poll(a), GCOMP_OK);
  /* a call's start reads the abort mark (call.c fails the call when it is set) */
  gcomp_abort_request(a);
  assert_int_not_equal(gcomp_abort_call_begins(a), 0);
  assert_int_not_equal(gcomp_abort_requested(a), 0);
  assert_int_equal(gcomp_abort_poll(a), GCOMP_ERR_ABORTED);
  gcomp_abort_destroy(a);
  assert_int_equal(gcomp_abort_call_begins(NULL), 0);
  assert_int_equal(gcomp_abort_requested(NULL), 0);
  gcomp_abort_corrupt_frame(NULL, frame, sizeof frame, 1);
  assert_int_equal(gcomp_abort_poll(NULL), GCOMP_OK);
  assert_int_equal(frame[4], 0);
  world_free(2, t, NULL);
}

static int restore(void **state) {
  test_env_restore(state);
  return gcomp_reinit_for_testing() == GCOMP_OK ? 0 : -1;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(test_blame_names_the_silent_rank, restore),
      cmocka_unit_test_teardown(test_blame_spreads_a_corruption, restore),
      cmocka_unit_test_teardown(test_corrupt_notice_reaches_every_rank, restore),
      cmocka_unit_test_teardown(test_fault_only_injects, restore),
      cmocka_unit_test_teardown(test_peer_death_notice, restore),
      cmocka_unit_test_teardown(test_peer_silence_notice, restore),
      cmocka_unit_test_teardown(test_watch_in_turn, restore),
      cmocka_unit_test_teardown(test_idle_watch_is_no_failure, restore),
      cmocka_unit_test_teardown(test_off_switch, restore),
  };
  return cmocka_run_group_tests(tests, test_env_save, NULL);
}
