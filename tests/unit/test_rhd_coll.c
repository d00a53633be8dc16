/* The halving reduce-scatter and doubling allgather (reduce/rhd_coll.c) as building blocks,
 * over the loopback transport: every rank count to 8 (powers of two and the folded ones),
 * counts the ranks do not divide, counts below the rank count and zero, so that blocks
 * differ in length (the gcomp_chunk partition) and some are empty, which the public calls
 * never produce (their vector is size x block). Rank r must end with block r. Sums read
 * the input in place and out of place (dst = src + received); max has no three-operand
 * kernel and copies it first. Small segments cut each step into several messages. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "coll.h"
#include "gcomp.h"
#include "test_hooks.h"
#include "transport.h"

enum { MAXN = 8 };

typedef struct {
  gcomp_transport *t;
  int n, rank, ag, outplace;
  gcomp_op op;
  size_t count;
  unsigned seq;
  int32_t *buf, *src;
  int st;
  char error[512];
} job;

static int32_t value(int r, size_t i) { return (int32_t)((r * 7919 + (int)i * 104729) % 2001) - 1000; }

static void *rank_main(void *arg) {
  job *j = arg;
  int world[MAXN];
  for (int r = 0; r < j->n; r++) world[r] = r;
  gcomp_scratch scratch = {0};
  gcomp_comm_stats stats;
  memset(&stats, 0, sizeof stats);
  gcomp_coll c = {.t = j->t, .seq = j->seq, .esize = 4, .scratch = &scratch, .seg_bytes = 16,
                  .stats = &stats, .world = world};
  c.reduce = gcomp_reduce_kernel(GCOMP_INT32, j->op);
  c.reduce3 = gcomp_reduce3_kernel(GCOMP_INT32, j->op);
  c.src = (const uint8_t *)j->src;
  gcomp_group g = {world, j->n, j->rank};
  j->st = j->ag ? gcomp_rhd_allgather(&c, &g, (uint8_t *)j->buf, j->count, 0)
                : gcomp_rhd_reduce_scatter(&c, &g, (uint8_t *)j->buf, j->count, 0);
  if (j->st != GCOMP_OK) snprintf(j->error, sizeof j->error, "%s", gcomp_last_error());
  gcomp_scratch_free(&scratch);
  return NULL;
}

/* One call on n loopback ranks; checks rank r's block r (reduce-scatter) or the whole
 * vector on every rank (allgather). */
static void one(gcomp_transport **t, int n, size_t count, int ag, gcomp_op op, int outplace,
                unsigned seq) {
  job jobs[MAXN];
  pthread_t th[MAXN];
  for (int r = 0; r < n; r++) {
    jobs[r] = (job){.t = t[r], .n = n, .rank = r, .ag = ag, .outplace = outplace, .op = op,
                    .count = count, .seq = seq};
    jobs[r].buf = malloc(count * 4 + 4);
    jobs[r].src = outplace ? malloc(count * 4 + 4) : NULL;
    int32_t *in = outplace ? jobs[r].src : jobs[r].buf;
    for (size_t i = 0; i < count; i++) jobs[r].buf[i] = 0x5a5a5a5a;
    size_t off, len;
    gcomp_chunk(count, n, r, &off, &len);
    for (size_t i = 0; i < count; i++)   /* allgather: only my own block is known */
      if (!ag || (i >= off && i < off + len)) in[i] = value(r, i);
  }
  for (int r = 0; r < n; r++) assert_int_equal(pthread_create(&th[r], NULL, rank_main, &jobs[r]), 0);
  for (int r = 0; r < n; r++) pthread_join(th[r], NULL);
  for (int r = 0; r < n; r++) {
    if (jobs[r].st != GCOMP_OK)
      fail_msg("n=%d count=%zu %s rank %d: %s", n, count, ag ? "allgather" : "reduce_scatter", r,
               jobs[r].error);
    size_t off, len;
    gcomp_chunk(count, n, r, &off, &len);
    for (size_t i = ag ? 0 : off; i < (ag ? count : off + len); i++) {
      int32_t want = value(0, i);
      if (ag) {
        int owner = 0;
        for (int k = 0; k < n; k++) {
          size_t o, l;
          gcomp_chunk(count, n, k, &o, &l);
          if (i >= o && i < o + l) owner = k;
        }
        want = value(owner, i);
      } else {
        for (int k = 1; k < n; k++)
          want = op == GCOMP_SUM ? want + value(k, i) : (value(k, i) > want ? value(k, i) : want);
      }
      if (jobs[r].buf[i] != want)
        fail_msg("n=%d count=%zu %s op %d outplace %d: rank %d element %zu is %d, not %d", n,
                 count, ag ? "allgather" : "reduce_scatter", op, outplace, r, i, jobs[r].buf[i],
                 want);
    }
  }
  for (int r = 0; r < n; r++) free(jobs[r].buf), free(jobs[r].src);
}

static void test_blocks(void **state) {
  (void)state;
  for (int n = 1; n <= MAXN; n++) {
    gcomp_transport *t[MAXN];
    assert_int_equal(gcomp_loopback_for_testing(n, NULL, t), GCOMP_OK);
    const size_t counts[] = {0, 1, (size_t)n - 1, (size_t)n + 1, 3 * (size_t)n + 2, 1001};
    unsigned seq = 1;
    for (int ci = 0; ci < 6; ci++) {
      for (int outplace = 0; outplace < 2; outplace++) {
        one(t, n, counts[ci], 0, GCOMP_SUM, outplace, seq++);
        one(t, n, counts[ci], 0, GCOMP_MAX, outplace, seq++);
      }
      one(t, n, counts[ci], 1, GCOMP_SUM, 0, seq++);
    }
    for (int r = 0; r < n; r++) gcomp_transport_destroy(t[r]);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_blocks)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
