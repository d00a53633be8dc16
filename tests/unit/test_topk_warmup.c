/* Sparsity warm-up, topk:...,warmup=S: over the first S calls of each key the kept count
 * falls from every value to k as n * (k/n)^(call/S) (DGC's exponential schedule), then stays
 * at k; each key ramps on its own; the count is saved with the residuals, so a checkpoint
 * resumes the ramp; a spec without warmup= encodes and prints as before. */
#include <math.h>
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

enum { N = 10000 };

static float src[N], out[N];
static uint8_t frame[8 * N + 4096];

/* Values that are all nonzero, different on every call. */
static void fill(int call) {
  for (int i = 0; i < N; i++)
    src[i] = (float)((1.5 + sin(0.37 * i + 1.7 * call)) * (i % 2 ? 1 : -1));
}

/* Encodes one call of key and returns how many values the frame carries. */
static size_t kept(gcomp_codec *c, uint64_t key, int call) {
  fill(call);
  size_t len = 0;
  assert_int_equal(gcomp_encode(c, key, src, N, frame, sizeof frame, &len), GCOMP_OK);
  memset(out, 0, sizeof out);
  assert_int_equal(gcomp_decode(c, frame, len, out, N), GCOMP_OK);
  size_t nz = 0;
  for (int i = 0; i < N; i++) nz += out[i] != 0;
  return nz;
}

/* The schedule: n * (k/n)^(t/S), rounded, between k and n. */
static size_t expect(size_t k, int t, int S) {
  if (t >= S) return k;
  double kk = floor(N * pow((double)k / N, (double)t / S) + 0.5);
  return kk <= (double)k ? k : kk >= N ? N : (size_t)kk;
}

static void test_spec(void **state) {
  (void)state;
  gcomp_codec *c = NULL;
  char canon[256];
  assert_int_equal(gcomp_codec_create("topk:ratio=0.01,warmup=50+ef", &c), GCOMP_OK);
  gcomp_codec_spec(c, canon, sizeof canon);
  if (!strstr(canon, "seed=0,warmup=50+ef")) fail_msg("canonical: %s", canon);
  gcomp_codec_destroy(c);
  assert_int_equal(gcomp_codec_create("topk:ratio=0.01+ef", &c), GCOMP_OK);
  gcomp_codec_spec(c, canon, sizeof canon);
  assert_null(strstr(canon, "warmup"));   /* unchanged without it */
  gcomp_codec_destroy(c);
  assert_int_equal(gcomp_codec_create("topk:ratio=0.01,warmup=-3", &c), GCOMP_ERR_INVALID);
  assert_non_null(strstr(gcomp_last_error(), "warmup"));
  assert_int_equal(gcomp_codec_create("topk:ratio=0.01,warmup=ten", &c), GCOMP_ERR_INVALID);
  assert_non_null(strstr(gcomp_last_error(), "ten"));
  assert_int_equal(gcomp_codec_create("topk:ratio=0.01,warmp=5", &c), GCOMP_ERR_INVALID);
  assert_non_null(strstr(gcomp_last_error(), "warmup"));   /* the valid keys are listed */
}

static void test_schedule(void **state) {
  (void)state;
  enum { S = 8 };
  gcomp_codec *c = NULL;
  assert_int_equal(gcomp_codec_create("topk:ratio=0.01,exact=1,warmup=8+ef", &c), GCOMP_OK);
  for (int t = 0; t < S + 3; t++) {
    size_t got = kept(c, 1, t), want = expect(100, t, S);
    if (got != want) fail_msg("call %d: %zu kept, schedule %zu", t, got, want);
  }
  assert_int_equal(expect(100, 0, S), N);       /* dense first */
  assert_int_equal(expect(100, S / 2, S), 1000); /* half way: the geometric mean of n and k */
  /* another key starts its own ramp */
  assert_int_equal(kept(c, 2, 0), N);
  assert_int_equal(kept(c, 2, 1), expect(100, 1, S));
  gcomp_codec_destroy(c);
  /* without warm-up: k from the first call */
  assert_int_equal(gcomp_codec_create("topk:ratio=0.01,exact=1+ef", &c), GCOMP_OK);
  assert_int_equal(kept(c, 1, 0), 100);
  gcomp_codec_destroy(c);
}

/* Saved after 3 calls, loaded into a fresh codec: its next call is call 3 of the ramp. */
static void test_checkpoint(void **state) {
  (void)state;
  enum { S = 10 };
  const char *spec = "topk:ratio=0.01,exact=1,warmup=10+ef";
  gcomp_codec *a = NULL, *b = NULL;
  assert_int_equal(gcomp_codec_create(spec, &a), GCOMP_OK);
  assert_int_equal(gcomp_codec_create(spec, &b), GCOMP_OK);
  for (int t = 0; t < 3; t++) kept(a, 5, t);
  char path[] = "/tmp/gcomp-warmup-XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  close(fd);
  assert_int_equal(gcomp_codec_save_residuals(a, path), GCOMP_OK);
  assert_int_equal(gcomp_codec_load_residuals(b, path), GCOMP_OK);
  unlink(path);
  assert_int_equal(kept(b, 5, 3), expect(100, 3, S));
  assert_int_equal(kept(a, 5, 3), expect(100, 3, S));
  gcomp_codec_destroy(a);
  gcomp_codec_destroy(b);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_spec),
      cmocka_unit_test(test_schedule),
      cmocka_unit_test(test_checkpoint),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
