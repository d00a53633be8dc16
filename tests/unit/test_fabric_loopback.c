/* The loopback transport: the same semantics the libfabric one promises (see transport.h),
 * driven from one thread and from one thread per rank. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gcomp_common.h"
#include "transport.h"
#include "test_hooks.h"

static uint8_t pat(int src, int dst, int idx, size_t i) {
  return (uint8_t)(i * 17u + (size_t)src * 3u + (size_t)dst * 5u + (size_t)idx * 11u);
}

static void destroy_all(gcomp_transport **t, int n) {
  for (int i = 0; i < n; i++) gcomp_transport_destroy(t[i]);
}

/* Drives every pending request of every rank from this one thread. */
static void drive(gcomp_transport **t, int nreq, gcomp_treq **reqs, const int *owner, size_t *lens) {
  for (int spins = 0; spins < 1000000; spins++) {
    int left = 0;
    for (int i = 0; i < nreq; i++) {
      if (!reqs[i]) continue;
      int done = 0;
      assert_int_equal(gcomp_test(t[owner[i]], reqs[i], &done, &lens[i]), GCOMP_OK);
      if (done)
        reqs[i] = NULL;
      else
        left++;
    }
    if (!left) return;
  }
  fail_msg("requests never completed");
}

static void test_all_pairs_one_thread(void **state) {
  enum { N = 4, S = 5 };
  static const size_t sizes[S] = {0, 1, 100, 4096, 1 << 20};
  gcomp_transport *t[N];
  assert_int_equal(gcomp_loopback_for_testing(N, NULL, t), GCOMP_OK);
  gcomp_treq *reqs[N * N * S * 2] = {0};
  int owner[N * N * S * 2];
  size_t lens[N * N * S * 2] = {0};
  uint8_t *bufs[N * N * S * 2] = {0};
  int k = 0;
  /* receives posted before sends for half the pairs, after for the other half */
  for (int pass = 0; pass < 2; pass++)
    for (int a = 0; a < N; a++)
      for (int b = 0; b < N; b++) {
        if (a == b) continue;
        for (int s = 0; s < S; s++) {
          int recv_first = (a + b + s) % 2;
          int idx = ((a * N + b) * S + s) * 2;
          if (pass == 0 && recv_first) {
            bufs[idx + 1] = malloc(sizes[s] + 8);
            owner[idx + 1] = b;
            assert_int_equal(gcomp_irecv(t[b], a, gcomp_tag(1, (uint32_t)s), bufs[idx + 1],
                                         sizes[s] + 8, &reqs[idx + 1]), GCOMP_OK);
          }
          if (pass == 1) {
            bufs[idx] = malloc(sizes[s] + 1);
            for (size_t i = 0; i < sizes[s]; i++) bufs[idx][i] = pat(a, b, s, i);
            owner[idx] = a;
            assert_int_equal(gcomp_isend(t[a], b, gcomp_tag(1, (uint32_t)s), bufs[idx], sizes[s],
                                         &reqs[idx]), GCOMP_OK);
            if (!recv_first) {
              bufs[idx + 1] = malloc(sizes[s] + 8);
              owner[idx + 1] = b;
              assert_int_equal(gcomp_irecv(t[b], a, gcomp_tag(1, (uint32_t)s), bufs[idx + 1],
                                           sizes[s] + 8, &reqs[idx + 1]), GCOMP_OK);
            }
            k += 2;
          }
        }
      }
  assert_int_equal(k, N * (N - 1) * S * 2);
  for (int i = 0; i < N * N * S * 2; i++)
    if (!bufs[i]) owner[i] = 0;
  drive(t, N * N * S * 2, reqs, owner, lens);
  for (int a = 0; a < N; a++)
    for (int b = 0; b < N; b++) {
      if (a == b) continue;
      for (int s = 0; s < S; s++) {
        int idx = ((a * N + b) * S + s) * 2;
        assert_int_equal(lens[idx], sizes[s]);
        assert_int_equal(lens[idx + 1], sizes[s]);
        for (size_t i = 0; i < sizes[s]; i++)
          if (bufs[idx + 1][i] != pat(a, b, s, i)) fail_msg("byte %zu of %d->%d size %zu", i, a, b, sizes[s]);
        free(bufs[idx]);
        free(bufs[idx + 1]);
      }
    }
  destroy_all(t, N);
}

static void test_same_tag_order_and_tags_separate(void **state) {
  gcomp_transport *t[2];
  assert_int_equal(gcomp_loopback_for_testing(2, NULL, t), GCOMP_OK);
  int v[6] = {10, 11, 12, 13, 14, 15}, got[6] = {0};
  gcomp_treq *r[6], *s[6];
  /* a receive for another tag must not take these */
  int other = -1;
  gcomp_treq *ro;
  assert_int_equal(gcomp_irecv(t[1], 0, gcomp_tag(2, 0), &other, sizeof other, &ro), GCOMP_OK);
  for (int i = 0; i < 3; i++) assert_int_equal(gcomp_isend(t[0], 1, gcomp_tag(1, 0), &v[i], sizeof v[i], &s[i]), GCOMP_OK);
  for (int i = 0; i < 6; i++) assert_int_equal(gcomp_irecv(t[1], 0, gcomp_tag(1, 0), &got[i], sizeof got[i], &r[i]), GCOMP_OK);
  for (int i = 3; i < 6; i++) assert_int_equal(gcomp_isend(t[0], 1, gcomp_tag(1, 0), &v[i], sizeof v[i], &s[i]), GCOMP_OK);
  assert_int_equal(gcomp_waitall(t[0], 6, s, NULL), GCOMP_OK);
  assert_int_equal(gcomp_waitall(t[1], 6, r, NULL), GCOMP_OK);
  for (int i = 0; i < 6; i++) assert_int_equal(got[i], v[i]);
  int done = 1;
  assert_int_equal(gcomp_test(t[1], ro, &done, NULL), GCOMP_OK);
  assert_int_equal(done, 0);
  assert_int_equal(other, -1);
  assert_int_equal(gcomp_cancel(t[1], ro), GCOMP_OK);
  /* a cancelled receive takes nothing: the next message goes to the next receive */
  int x = 99, y = 0;
  gcomp_treq *sx;
  assert_int_equal(gcomp_isend(t[0], 1, gcomp_tag(2, 0), &x, sizeof x, &sx), GCOMP_OK);
  size_t len = 0;
  assert_int_equal(gcomp_recv(t[1], 0, gcomp_tag(2, 0), &y, sizeof y, &len), GCOMP_OK);
  assert_int_equal(gcomp_wait(t[0], sx, NULL), GCOMP_OK);
  assert_int_equal(y, 99);
  assert_int_equal(len, sizeof y);
  destroy_all(t, 2);
}

static void test_short_receive_and_truncation(void **state) {
  gcomp_transport *t[2];
  assert_int_equal(gcomp_loopback_for_testing(2, NULL, t), GCOMP_OK);
  char msg[10] = "123456789", buf[64];
  gcomp_treq *s, *r;
  size_t len = 0;
  assert_int_equal(gcomp_irecv(t[1], 0, 5, buf, sizeof buf, &r), GCOMP_OK);
  assert_int_equal(gcomp_isend(t[0], 1, 5, msg, 10, &s), GCOMP_OK);
  assert_int_equal(gcomp_wait(t[1], r, &len), GCOMP_OK);
  assert_int_equal(gcomp_wait(t[0], s, NULL), GCOMP_OK);
  assert_int_equal(len, 10);
  assert_string_equal(buf, "123456789");
  assert_int_equal(gcomp_isend(t[0], 1, 6, msg, 10, &s), GCOMP_OK);
  assert_int_equal(gcomp_irecv(t[1], 0, 6, buf, 4, &r), GCOMP_OK);
  assert_int_equal(gcomp_wait(t[1], r, &len), GCOMP_ERR_INVALID);
  assert_non_null(strstr(gcomp_last_error(), "exceeds the receive capacity"));
  assert_int_equal(gcomp_wait(t[0], s, NULL), GCOMP_OK);
  /* bad peers are errors, not crashes */
  assert_int_equal(gcomp_isend(t[0], 2, 0, msg, 1, &s), GCOMP_ERR_INVALID);
  assert_int_equal(gcomp_irecv(t[0], -1, 0, buf, 1, &r), GCOMP_ERR_INVALID);
  assert_int_equal(gcomp_isend(t[1], 1, 0, msg, 1, &s), GCOMP_ERR_INVALID);   /* not to itself */
  destroy_all(t, 2);
}

static void test_timeout_names_peer(void **state) {
  gcomp_transport *t[3];
  assert_int_equal(gcomp_loopback_for_testing(3, NULL, t), GCOMP_OK);
  t[0]->timeout_ms = 50;
  char b[4];
  gcomp_treq *r;
  assert_int_equal(gcomp_irecv(t[0], 2, gcomp_tag(3, 1), b, sizeof b, &r), GCOMP_OK);
  uint64_t t0 = gcomp_now_ns();
  assert_int_equal(gcomp_wait(t[0], r, NULL), GCOMP_ERR_TIMEOUT);
  assert_true(gcomp_now_ns() - t0 >= 50000000u);
  assert_non_null(strstr(gcomp_last_error(), "receive from rank 2"));
  /* waitall cancels the rest on the first failure */
  gcomp_treq *rs[2];
  assert_int_equal(gcomp_irecv(t[0], 1, 1, b, sizeof b, &rs[0]), GCOMP_OK);
  assert_int_equal(gcomp_irecv(t[0], 2, 1, b, sizeof b, &rs[1]), GCOMP_OK);
  assert_int_equal(gcomp_waitall(t[0], 2, rs, NULL), GCOMP_ERR_TIMEOUT);
  assert_null(rs[0]);
  assert_null(rs[1]);
  destroy_all(t, 3);
}

static void test_topology(void **state) {
  static const int node_of[5] = {0, 0, 1, 1, 1};
  gcomp_transport *t[5];
  assert_int_equal(gcomp_loopback_for_testing(5, node_of, t), GCOMP_OK);
  assert_int_equal(t[3]->nnodes, 2);
  assert_int_equal(t[3]->node, 1);
  assert_int_equal(t[3]->local_size, 3);
  assert_int_equal(t[3]->local_rank, 1);
  assert_int_equal(t[3]->local_ranks[0], 2);
  assert_int_equal(t[3]->local_ranks[2], 4);
  assert_int_equal(t[1]->local_size, 2);
  assert_int_equal(t[1]->node_of[4], 1);
  assert_string_equal(t[0]->ops->name, "loopback");
  destroy_all(t, 5);
}

/* one thread per rank: a ring of non-blocking exchanges, many rounds */
typedef struct {
  gcomp_transport *t;
  int rounds;
  int status;
} ring_arg;

static void *ring_main(void *p) {
  ring_arg *a = p;
  gcomp_transport *t = a->t;
  int n = t->size, me = t->rank;
  size_t len = 3000;
  uint8_t *sb = malloc(len), *rb = malloc(len);
  for (int it = 0; it < a->rounds && a->status == 0; it++) {
    for (size_t i = 0; i < len; i++) sb[i] = pat(me, (me + 1) % n, it, i);
    gcomp_treq *r[2];
    size_t lens[2];
    size_t l = len - (size_t)(it % 7);
    a->status = gcomp_irecv(t, (me + n - 1) % n, gcomp_tag((uint32_t)it, 0), rb, len, &r[0]);
    if (!a->status) a->status = gcomp_isend(t, (me + 1) % n, gcomp_tag((uint32_t)it, 0), sb, l, &r[1]);
    if (!a->status) a->status = gcomp_waitall(t, 2, r, lens);
    if (!a->status && lens[0] != l) a->status = -100;
    for (size_t i = 0; i < l && !a->status; i++)
      if (rb[i] != pat((me + n - 1) % n, me, it, i)) a->status = -101;
  }
  free(sb);
  free(rb);
  return NULL;
}

static void test_threads_ring(void **state) {
  enum { N = 4 };
  gcomp_transport *t[N];
  assert_int_equal(gcomp_loopback_for_testing(N, NULL, t), GCOMP_OK);
  pthread_t th[N];
  ring_arg a[N];
  for (int i = 0; i < N; i++) {
    a[i] = (ring_arg){t[i], 300, 0};
    assert_int_equal(pthread_create(&th[i], NULL, ring_main, &a[i]), 0);
  }
  for (int i = 0; i < N; i++) pthread_join(th[i], NULL);
  for (int i = 0; i < N; i++) assert_int_equal(a[i].status, 0);
  destroy_all(t, N);
}

static void test_tag_helper(void **state) {
  assert_int_equal(gcomp_tag(1, 2), (UINT64_C(1) << 32) | 2);
  assert_int_equal(gcomp_tag(1u << GCOMP_TAG_SEQ_BITS, 0), 0);   /* seq wraps */
  assert_int_equal(gcomp_tag(0xffffffu, 0xffffffffu) & ~GCOMP_TAG_MASK, 0);
}

/* gcomp_idle_naps is per thread and hands back the setting it replaced, so a pipeline that
 * turns it on for its waits restores its caller's; idle steps in either mode return. */
static void *naps_elsewhere(void *arg) {
  (void)arg;
  return (void *)(intptr_t)gcomp_idle_naps(0);   /* a new thread starts without naps */
}

static void test_idle_naps(void **state) {
  assert_int_equal(gcomp_idle_naps(1), 0);
  pthread_t th;
  void *other = (void *)1;
  assert_int_equal(pthread_create(&th, NULL, naps_elsewhere, NULL), 0);
  pthread_join(th, &other);
  assert_int_equal((intptr_t)other, 0);
  unsigned spins = 0;
  for (int i = 0; i < 50; i++) gcomp_idle(&spins);   /* past the spins: naps, returns */
  assert_true(spins >= 50);
  assert_int_equal(gcomp_idle_naps(1), 1);
  assert_int_equal(gcomp_idle_naps(0), 1);
  assert_int_equal(gcomp_idle_naps(0), 0);
  spins = 0;
  for (int i = 0; i < 50; i++) gcomp_idle(&spins);
  /* a progress thread's naps lengthen through a long wait, and are short again once its
   * transport moved something (a chunk arrived: the next may follow at once) */
  assert_int_equal(gcomp_idle_naps(GCOMP_NAPS_LENGTHEN), GCOMP_NAPS_OFF);
  spins = 0;
  for (int i = 0; i < 40; i++) gcomp_idle(&spins);
  assert_true(spins >= 40);
  gcomp_moved();
  gcomp_idle(&spins);
  assert_true(spins < 40);
  assert_int_equal(gcomp_idle_naps(GCOMP_NAPS_OFF), GCOMP_NAPS_LENGTHEN);
}

/* gcomp_idle_blocker: an idle step blocks in the transport only when that transport's
 * progress ran on this thread since the previous idle step, and only past the wait's first
 * spins; a transport left behind by a wait that ended (it may be freed, or driven by another
 * thread by now) is never blocked in by the next wait, whatever it waits for. */
static int blocks;
static long block_ns;
static int fake_block(gcomp_transport *t, long ns) {
  (void)t;
  blocks++;
  block_ns = ns;
  return 1;
}

static void test_idle_blocker(void **state) {
  (void)state;
  gcomp_transport *fake = (gcomp_transport *)&blocks;   /* never dereferenced by gcomp_idle */
  int was = gcomp_idle_naps(GCOMP_NAPS_LENGTHEN);
  unsigned spins = 0;
  for (int i = 0; i < 60; i++) {   /* a wait whose transport's progress runs every time */
    gcomp_idle_blocker(fake, fake_block, 0);
    gcomp_idle(&spins);
  }
  assert_true(blocks > 0 && blocks < 60);   /* the first spins do not block */
  assert_true(block_ns > 0 && block_ns <= 1000000);   /* capped at the nap it replaces */
  int whole_before = blocks;
  gcomp_idle_blocker(fake, fake_block, 1);
  gcomp_idle(&spins);
  assert_int_equal(blocks, whole_before + 1);
  assert_true(block_ns >= 1000000);   /* a whole transport's fd ends the wait: longer */
  /* the wait ends right after its transport's progress; the next wait polls something else */
  gcomp_idle_blocker(fake, fake_block, 0);
  int before = blocks;
  spins = 0;
  for (int i = 0; i < 60; i++) gcomp_idle(&spins);
  assert_int_equal(blocks, before);
  /* a wait that is already past its spins and stops driving the transport */
  spins = 0;
  for (int i = 0; i < 30; i++) gcomp_idle_blocker(fake, fake_block, 0), gcomp_idle(&spins);
  before = blocks;
  for (int i = 0; i < 30; i++) gcomp_idle(&spins);
  assert_int_equal(blocks, before);
  gcomp_idle_naps(was);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_all_pairs_one_thread),
      cmocka_unit_test(test_same_tag_order_and_tags_separate),
      cmocka_unit_test(test_short_receive_and_truncation),
      cmocka_unit_test(test_timeout_names_peer),
      cmocka_unit_test(test_topology),
      cmocka_unit_test(test_threads_ring),
      cmocka_unit_test(test_tag_helper),
      cmocka_unit_test(test_idle_naps),
      cmocka_unit_test(test_idle_blocker),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
