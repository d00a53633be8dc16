/* The ring orders its ranks by node: over a round-robin placement (rank r on node r % M,
 * gcomp-run --map-by node) a ring in rank order crosses between nodes on every hop; ordered
 * by node it crosses once per node, as over a block placement, and moves the same bytes
 * between nodes. Counted on the loopback transport by wrapping its send. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "comm.h"
#include "gcomp_common.h"
#include "gcomp.h"
#include "transport.h"
#include "test_env.h"
#include "test_hooks.h"

enum { MAXN = 8 };

/* The loopback's own ops, and what each rank sent to another node while recording. */
static const gcomp_transport_ops *g_inner;
static uint64_t g_cross_bytes[MAXN];
static int g_recording[MAXN];

static int counting_isend(gcomp_transport *t, int peer, uint64_t tag, const void *buf, size_t len,
                          gcomp_treq **req) {
  if (g_recording[t->rank] && t->node_of[peer] != t->node_of[t->rank])
    g_cross_bytes[t->rank] += len;
  return g_inner->isend(t, peer, tag, buf, len, req);
}

static gcomp_transport_ops g_counting;

typedef struct {
  gcomp_transport *t;
  size_t count;
  int status;
  char error[600];
  int32_t *out;
} job;

static void *rank_main(void *arg) {
  job *j = arg;
  gcomp_comm *comm = NULL;
  j->status = gcomp_comm_from_transport(j->t, 0, &comm);
  int32_t *in = malloc(j->count * sizeof *in);
  for (size_t i = 0; in && i < j->count; i++) in[i] = (int32_t)(j->t->rank * 1000 + (int)(i % 997));
  if (j->status == GCOMP_OK && in) {
    g_recording[j->t->rank] = 1;
    j->status = gcomp_allreduce(comm, in, j->out, j->count, GCOMP_INT32, GCOMP_SUM, NULL, 0);
    g_recording[j->t->rank] = 0;
  }
  if (j->status < 0) snprintf(j->error, sizeof j->error, "%s", gcomp_last_error());
  if (comm) assert_string_equal(gcomp_comm_last_algo(comm), "ring");
  free(in);
  gcomp_comm_destroy(comm);
  return NULL;
}

/* Runs one forced-ring allreduce of count int32 on n ranks placed by node_of; checks the
 * sums on every rank and returns the bytes all ranks sent across nodes. */
static uint64_t ring_cross_bytes(int n, const int *node_of, size_t count) {
  gcomp_transport *t[MAXN];
  assert_int_equal(gcomp_loopback_for_testing(n, node_of, t), GCOMP_OK);
  g_inner = t[0]->ops;
  g_counting = *g_inner;
  g_counting.isend = counting_isend;
  job jobs[MAXN];
  pthread_t th[MAXN];
  memset(g_cross_bytes, 0, sizeof g_cross_bytes);
  for (int r = 0; r < n; r++) {
    t[r]->ops = &g_counting;
    jobs[r] = (job){.t = t[r], .count = count, .out = calloc(count, sizeof(int32_t))};
    pthread_create(&th[r], NULL, rank_main, &jobs[r]);
  }
  for (int r = 0; r < n; r++) pthread_join(th[r], NULL);
  uint64_t total = 0;
  for (int r = 0; r < n; r++) {
    if (jobs[r].status != GCOMP_OK) fail_msg("rank %d: %s", r, jobs[r].error);
    for (size_t i = 0; i < count; i++) {
      int32_t want = (int32_t)(1000 * n * (n - 1) / 2 + n * (int)(i % 997));
      if (jobs[r].out[i] != want)
        fail_msg("rank %d, element %zu: %d, not %d", r, i, jobs[r].out[i], want);
    }
    free(jobs[r].out);
    total += g_cross_bytes[r];
  }
  for (int r = 0; r < n; r++) {
    t[r]->ops = g_inner;
    gcomp_transport_destroy(t[r]);
  }
  return total;
}

static void setup_env(void) {
  setenv("GCOMP_ALGO", "ring", 1);
  setenv("GCOMP_ALPHA_BETA", "1,10,20,1", 1);
  setenv("GCOMP_SKEW_WINDOW", "0", 1);   /* its exchanges would be counted too */
  setenv("GCOMP_SHM_BYTES", "0", 1);
  assert_int_equal(gcomp_reinit_for_testing(), GCOMP_OK);
}

static void test_round_robin_crosses_like_blocks(void **state) {
  (void)state;
  setup_env();
  enum { COUNT = 60000 };
  const int block4[] = {0, 0, 1, 1}, rr4[] = {0, 1, 0, 1};
  const int block8[] = {0, 0, 0, 0, 1, 1, 1, 1}, rr8[] = {0, 1, 0, 1, 0, 1, 0, 1};
  const int block6x3[] = {0, 0, 1, 1, 2, 2}, rr6x3[] = {0, 1, 2, 0, 1, 2};
  const int *pairs[][2] = {{block4, rr4}, {block8, rr8}, {block6x3, rr6x3}};
  const int sizes[] = {4, 8, 6};
  for (int k = 0; k < 3; k++) {
    uint64_t blocks = ring_cross_bytes(sizes[k], pairs[k][0], COUNT);
    uint64_t rr = ring_cross_bytes(sizes[k], pairs[k][1], COUNT);
    /* ring in rank order over round-robin: every one of the n hops crosses, n/M times as
     * many bytes as the M crossings of a block placement */
    if (rr != blocks || blocks == 0)
      fail_msg("%d ranks: %llu bytes crossed nodes round-robin, %llu in blocks", sizes[k],
               (unsigned long long)rr, (unsigned long long)blocks);
  }
}

/* Nodes of different sizes, interleaved (4 ranks on node 0, 2 on node 1; rank order
 * crosses 4 times): the same bytes cross as with blocks of 4 and 2, and the same sums. */
static void test_uneven_interleaved(void **state) {
  (void)state;
  setup_env();
  const int mixed[] = {0, 1, 0, 1, 0, 0}, block[] = {0, 0, 0, 0, 1, 1};
  assert_int_equal(ring_cross_bytes(6, mixed, 1001), ring_cross_bytes(6, block, 1001));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(test_round_robin_crosses_like_blocks, test_env_restore),
      cmocka_unit_test_teardown(test_uneven_interleaved, test_env_restore),
  };
  /* every test ends with the GCOMP_* environment the program started with */
  return cmocka_run_group_tests(tests, test_env_save, test_env_free);
}
