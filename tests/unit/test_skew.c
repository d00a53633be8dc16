/* Straggler detection's bookkeeping (reduce/skew.c) driven by hand: ranks whose arrivals
 * are known, the two MAX exchanges done here. A rank late at every call is the worst and
 * typically late; a rank that pauses once (a checkpoint) has a large mean and maximum, the
 * call named, and a typical lateness near zero; the typical spread ignores the pause. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "skew.h"

enum { N = 3, W = 8, WINDOWS = 3 };

/* how late rank r arrives at call c (counted from 1), seconds */
static double arrival(int r, int c) {
  if (r == 1) return 2e-3;                  /* always 2 ms late */
  if (r == 2 && c == 11) return 3.0;        /* one 3 s pause */
  return 1e-5 * (double)((r + c) % 3);      /* jitter of tens of microseconds */
}

static void exchange(gcomp_skew *s) {
  size_t len = gcomp_skew_vec(&s[0]);
  for (int r = 1; r < N; r++) assert_int_equal(gcomp_skew_vec(&s[r]), len);
  for (size_t i = 0; i < len; i++) {   /* the first MAX allreduce */
    int32_t m = s[0].vec[i];   /* an integer MAX, as the exchange runs it (GCOMP_INT32) */
    for (int r = 1; r < N; r++) m = s[r].vec[i] > m ? s[r].vec[i] : m;
    for (int r = 0; r < N; r++) s[r].vec[i] = m;
  }
  size_t tl = 0;
  for (int r = 0; r < N; r++) tl = gcomp_skew_absorb(&s[r], r);
  for (size_t i = 0; i < tl; i++) {   /* the second */
    double m = s[0].table[i];
    for (int r = 1; r < N; r++) m = fmax(m, s[r].table[i]);
    for (int r = 0; r < N; r++) s[r].table[i] = m;
  }
  for (int r = 0; r < N; r++) gcomp_skew_finish(&s[r]);
}

static void test_typical_and_once(void **state) {
  (void)state;
  gcomp_skew s[N];
  for (int r = 0; r < N; r++) assert_int_equal(gcomp_skew_init(&s[r], W, N), GCOMP_OK);
  const double end = 4.0;   /* every call ends 4 s after the earliest possible arrival */
  for (int c = 1; c <= W * WINDOWS; c++) {
    int due = 0;
    for (int r = 0; r < N; r++) due += gcomp_skew_note(&s[r], end - arrival(r, c), SIZE_MAX);
    assert_true(due == 0 || due == N);
    if (due) exchange(s);
  }
  for (int r = 0; r < N; r++) {
    assert_int_equal(s[r].mine.calls, W * WINDOWS);
    assert_int_equal(s[r].mine.worst_rank, 2);   /* by the mean: the pause dominates it */
  }
  /* rank 1: typically ~2 ms late (less the others' jitter); rank 2: typically on time */
  assert_true(fabs(s[1].late_typical_s - 2e-3) < 3e-5);
  assert_true(s[2].late_typical_s < 3e-5 && s[0].late_typical_s < 3e-5);
  assert_true(fabs(gcomp_skew_rank_typical(&s[0], 1) - s[1].late_typical_s) < 1e-12);
  /* rank 2's pause: its longest lateness, at call 11, ~3 s */
  assert_int_equal(s[2].late_max_call, 11);
  assert_true(fabs(s[2].mine.late_max_s - 3.0) < 1e-3);
  assert_int_equal(gcomp_skew_rank_max_call(&s[1], 2), 11);
  /* the typical spread is rank 1's 2 ms, not the pause */
  assert_true(fabs(s[0].spread_typical_s - 2e-3) < 3e-5);
  assert_true(s[0].mine.spread_mean_s > 0.1);
  for (int r = 0; r < N; r++) gcomp_skew_free(&s[r]);
}

/* even and odd windows, ties: the median is the middle value (upper middle for even n) */
static void test_window_of_one(void **state) {
  (void)state;
  gcomp_skew s[N];
  for (int r = 0; r < N; r++) assert_int_equal(gcomp_skew_init(&s[r], 1, N), GCOMP_OK);
  for (int c = 1; c <= 4; c++) {
    for (int r = 0; r < N; r++) gcomp_skew_note(&s[r], 1.0 - (r == 0 ? 0.5 : 0.0), SIZE_MAX);
    exchange(s);
  }
  assert_true(fabs(s[0].late_typical_s - 0.5) < 1e-6);
  assert_int_equal(s[0].late_max_call, 1);   /* the first of equal maxima */
  assert_true(s[1].late_typical_s == 0);
  for (int r = 0; r < N; r++) gcomp_skew_free(&s[r]);
}

/* The exchange orders the times by their bits as integers: a zero time (a -0 or a NaN noted
 * as one) must stay the shortest, and the longest and shortest come back exact */
static void test_zero_and_bits(void **state) {
  (void)state;
  gcomp_skew s[N];
  for (int r = 0; r < N; r++) assert_int_equal(gcomp_skew_init(&s[r], 1, N), GCOMP_OK);
  gcomp_skew_note(&s[0], -0.0, SIZE_MAX);
  gcomp_skew_note(&s[1], NAN, SIZE_MAX);
  gcomp_skew_note(&s[2], 0.25e-6, SIZE_MAX);   /* a quarter of a microsecond */
  assert_true(s[0].own[0] == 0 && !signbit(s[0].own[0]) && s[1].own[0] == 0);
  exchange(s);
  for (int r = 0; r < N; r++) {
    assert_true(fabs(s[r].mine.spread_mean_s - 0.25e-6) < 1e-12);
    assert_int_equal(s[r].mine.calls, 1);
  }
  assert_int_equal(s[2].mine.last, 0);   /* ranks 0 and 1 tie as the last to arrive */
  assert_int_equal(s[0].mine.last, 1);
  assert_int_equal(s[1].mine.last, 1);
  assert_true(fabs(s[0].mine.late_mean_s - 0.25e-6) < 1e-12 && s[2].mine.late_mean_s == 0);
  for (int r = 0; r < N; r++) gcomp_skew_free(&s[r]);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_typical_and_once),
      cmocka_unit_test(test_window_of_one),
      cmocka_unit_test(test_zero_and_bits),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
