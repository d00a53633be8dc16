/* fp16 and bf16 through the public codec API: specs, frames, scaling, non-finite values,
 * counters, decode-and-add, error feedback, at both kernel levels. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "test_env.h"

#include "frame.h"
#include "gcomp.h"
#include "gcomp_common.h"
#include "test_cast_ref.h"
#include "test_hooks.h"

static const char *const levels[] = {"base", "avx2", "avx512"};

/* Runs fn once per kernel level this CPU has. */
static void each_level(void (*fn)(void)) {
  int best = gcomp_isa_best_level(gcomp_cpu_detect());
  for (int l = 0; l <= best; l++) {
    setenv("GCOMP_ISA", levels[l], 1);
    assert_int_equal(gcomp_reinit_for_testing(), GCOMP_OK);
    assert_string_equal(gcomp_isa_selected(), levels[l]);
    fn();
  }
  unsetenv("GCOMP_ISA");
  assert_int_equal(gcomp_reinit_for_testing(), GCOMP_OK);
}

static gcomp_codec *make(const char *spec) {
  gcomp_codec *c = NULL;
  int s = gcomp_codec_create(spec, &c);
  if (s != GCOMP_OK) fail_msg("create '%s': %s", spec, gcomp_last_error());
  return c;
}

typedef struct {
  uint8_t *frame;
  size_t len;
} encoded;

static encoded enc(gcomp_codec *c, const float *x, size_t n) {
  size_t cap = gcomp_codec_max_encoded_size(c, n);
  encoded e = {malloc(cap), 0};
  int s = gcomp_encode(c, 1, x, n, e.frame, cap, &e.len);
  if (s != GCOMP_OK) fail_msg("encode: %s", gcomp_last_error());
  return e;
}

static float *dec(gcomp_codec *c, encoded e, size_t n) {
  float *y = malloc((n ? n : 1) * 4);
  int s = gcomp_decode(c, e.frame, e.len, y, n);
  if (s != GCOMP_OK) fail_msg("decode: %s", gcomp_last_error());
  return y;
}

/* ---- specs ---------------------------------------------------------------------------- */
static void expect_canonical(const char *spec, const char *canon) {
  gcomp_codec *c = make(spec), *d;
  char a[128], b[128];
  gcomp_codec_spec(c, a, sizeof a);
  /* canon is a prefix: what follows a stage name belongs to the stage */
  if (strncmp(a, canon, strlen(canon)) != 0) fail_msg("'%s' -> '%s', expected '%s'", spec, a, canon);
  if (!strchr(canon, '+')) assert_string_equal(a, canon);
  d = make(a);
  gcomp_codec_spec(d, b, sizeof b);
  assert_string_equal(a, b);
  gcomp_codec_destroy(c);
  gcomp_codec_destroy(d);
}

static void test_specs_canonical(void **state) {
  expect_canonical("fp16", "fp16:scale=auto,round=nearest");
  expect_canonical("bf16", "bf16:round=nearest");
  expect_canonical("fp16:scale=none", "fp16:scale=none,round=nearest");
  expect_canonical("fp16:round=stochastic", "fp16:scale=auto,round=stochastic,seed=0");
  expect_canonical("bf16:round=stochastic,seed=7", "bf16:round=stochastic,seed=7");
  expect_canonical("bf16:seed=7,round=stochastic", "bf16:round=stochastic,seed=7");
  expect_canonical("fp16:round=stochastic,scale=none,seed=18446744073709551615",
                   "fp16:scale=none,round=stochastic,seed=18446744073709551615");
  expect_canonical("bf16+ef", "bf16:round=nearest+ef:dtype=fp32");
  expect_canonical("fp16+zstd", "fp16:scale=auto,round=nearest+zstd:");
}

static void expect_error(const char *spec, const char *fragment) {
  gcomp_codec *c = (gcomp_codec *)0x1;
  assert_int_equal(gcomp_codec_create(spec, &c), GCOMP_ERR_INVALID);
  assert_null(c);
  if (!strstr(gcomp_last_error(), fragment))
    fail_msg("'%s': error '%s' lacks '%s'", spec, gcomp_last_error(), fragment);
}

static void test_spec_errors(void **state) {
  expect_error("fp16:scael=none", "unknown parameter 'scael' (valid: scale, round, seed)");
  expect_error("bf16:scale=auto", "unknown parameter 'scale' (valid: round, seed)");
  expect_error("fp16:scale=big", "scale='big' is not one of auto|none");
  expect_error("bf16:round=up", "round='up' is not one of nearest|stochastic");
  expect_error("bf16:round=stochastic,seed=-1", "seed='-1'");
  expect_error("bf16:round=stochastic,seed=x", "seed='x'");
  expect_error("fp16:seed=3", "seed=3 has no effect with round=nearest");
}

/* ---- round trips ---------------------------------------------------------------------- */
static float *gradient(size_t n, uint64_t seed, double sigma) {
  float *g = malloc((n ? n : 1) * 4);
  uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
  for (size_t i = 0; i < n; i++) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    g[i] = (float)(((double)(s >> 11) / 9007199254740992.0 - 0.5) * 2 * sigma);
  }
  return g;
}

/* bf16 and fp16 scale=none frames hold exactly the reference's conversion; decode_add is
 * acc + decode, bit for bit */
static void frames_match_reference(void) {
  size_t sizes[] = {0, 1, 7, 8, 9, 31, 100, 4099, 2 * 32768 + 33};
  for (size_t t = 0; t < sizeof sizes / sizeof *sizes; t++) {
    size_t n = sizes[t];
    float *g = gradient(n, n + 3, 70000.0);   /* beyond fp16's range too */
    for (int fmt = 0; fmt < 2; fmt++) {
      gcomp_codec *c = make(fmt ? "bf16" : "fp16:scale=none");
      assert_int_equal(gcomp_codec_max_encoded_size(c, n), gcomp_frame_size(2 * n));
      encoded e = enc(c, g, n);
      assert_int_equal(e.len, gcomp_frame_size(2 * n));
      float *y = dec(c, e, n);
      for (size_t i = 0; i < n; i++) {
        uint32_t w = ref_f2u(g[i]);
        uint32_t want = fmt ? ref_bf16_to_f32(ref_bf16(w)) : ref_f16_to_f32(ref_f16(w, 0));
        if (ref_f2u(y[i]) != want) fail_msg("%s n=%zu i=%zu: %a", fmt ? "bf16" : "fp16", n, i, (double)g[i]);
      }
      float *acc = gradient(n, 99, 1.0);
      float *want = malloc((n ? n : 1) * 4);
      for (size_t i = 0; i < n; i++) want[i] = acc[i] + y[i];
      assert_int_equal(gcomp_decode_add(c, e.frame, e.len, acc, n), GCOMP_OK);
      assert_memory_equal(acc, want, n * 4);
      free(acc), free(want), free(y), free(e.frame);
      gcomp_codec_destroy(c);
    }
    free(g);
  }
}
static void test_frames_match_reference(void **state) { each_level(frames_match_reference); }

/* scale=auto: frames of magnitude 1e-10 .. 1e10 round-trip within fp16's unit roundoff
 * (2^-11 relative) for every element within 2^10 of the frame's maximum — far past what
 * the plain cast can hold at either end — and the scale is a power of two in the frame. */
static void scaling_roundtrips(void) {
  enum { N = 1000 };
  gcomp_codec *c = make("fp16"), *plain = make("fp16:scale=none");
  for (int p = -10; p <= 10; p++) {
    float *g = gradient(N, (uint64_t)p + 50, 1.0);
    for (size_t i = 0; i < N; i++) g[i] = (float)((fabs(g[i]) * 0.999 + 0.001) * pow(10, p) * (i & 1 ? -1 : 1));
    encoded e = enc(c, g, N);
    float *y = dec(c, e, N);
    double worst = 0;
    for (size_t i = 0; i < N; i++) worst = fmax(worst, fabs((double)y[i] - g[i]) / fabs((double)g[i]));
    if (worst > 0x1p-11) fail_msg("1e%d: relative error %g > 2^-11", p, worst);
    /* the plain cast loses these frames at the ends of the range */
    if (p <= -9 || p >= 6) {
      encoded f = enc(plain, g, N);
      float *z = dec(plain, f, N);
      double pw = 0;
      for (size_t i = 0; i < N; i++) pw = fmax(pw, fabs((double)z[i] - g[i]) / fabs((double)g[i]));
      assert_true(pw > 0x1p-11 || isnan(pw));
      free(z), free(f.frame);
    }
    free(g), free(y), free(e.frame);
  }
  gcomp_codec_stats st = {.struct_size = sizeof st};
  assert_int_equal(gcomp_codec_get_stats(c, &st), GCOMP_OK);
  assert_int_equal(st.overflows, 0);
  assert_int_equal(st.frames_encoded, 21);
  assert_int_equal(gcomp_codec_get_stats(plain, &st), GCOMP_OK);
  assert_true(st.overflows > 0 && st.underflows > 0);
  gcomp_codec_destroy(c);
  gcomp_codec_destroy(plain);
}
static void test_scaling_roundtrips(void **state) { each_level(scaling_roundtrips); }

/* NaN and Inf survive both formats (with and without scale), are counted, and do not move
 * fp16's scale: the finite values round-trip as if they were alone. */
static void nonfinite_kept(void) {
  const char *specs[] = {"fp16", "fp16:scale=none", "bf16", "fp16:round=stochastic",
                         "bf16:round=stochastic,seed=3"};
  for (size_t s = 0; s < sizeof specs / sizeof *specs; s++) {
    enum { N = 37 };
    float g[N];
    for (int i = 0; i < N; i++) g[i] = 1e-3f * (float)(i - 18);
    g[3] = INFINITY, g[10] = -INFINITY, g[20] = NAN, g[36] = -NAN;
    gcomp_codec *c = make(specs[s]);
    encoded e = enc(c, g, N);
    float *y = dec(c, e, N);
    assert_true(isinf(y[3]) && y[3] > 0);
    assert_true(isinf(y[10]) && y[10] < 0);
    assert_true(isnan(y[20]) && isnan(y[36]));
    for (int i = 0; i < N; i++)
      if (isfinite(g[i]) && fabsf(y[i] - g[i]) > fabsf(g[i]) * 0x1p-7f)  /* one bf16 quantum */
        fail_msg("%s: %g -> %g", specs[s], (double)g[i], (double)y[i]);
    if (strcmp(specs[s], "fp16") == 0) {
      /* the scale comes from the finite maximum 0.018: 2^k * 0.018 in [2^14, 2^15) */
      uint32_t param = gcomp_load_le32(e.frame + 24);
      assert_int_equal((int8_t)param, 14 - ilogbf(0.018f));
    }
    gcomp_codec_stats st = {.struct_size = sizeof st};
    gcomp_codec_get_stats(c, &st);
    assert_int_equal(st.nonfinite_inputs, 4);
    assert_int_equal(st.overflows, 0);
    float acc[N] = {0};
    assert_int_equal(gcomp_decode_add(c, e.frame, e.len, acc, N), GCOMP_OK);
    assert_true(isinf(acc[3]) && isnan(acc[20]));
    free(y), free(e.frame);
    gcomp_codec_destroy(c);
  }
}
static void test_nonfinite_kept(void **state) { each_level(nonfinite_kept); }

/* Frames longer than the prefix the scale is guessed from: the scale puts the frame's
 * maximum M in [2^12, 2^15), the values are exactly the reference's conversion at that
 * scale, and a maximum hiding past the prefix (1e4 times larger) is neither lost nor
 * turned into Inf: the frame is encoded again with the exact scale. */
static void check_scaled_frame(gcomp_codec *c, const float *g, size_t n, int lo_exp) {
  encoded e = enc(c, g, n);
  int k = (int8_t)gcomp_load_le32(e.frame + 24);
  float m = 0;
  for (size_t i = 0; i < n; i++) m = fmaxf(m, fabsf(g[i]));
  int top = ilogbf(m) + k;
  if (top < lo_exp || top > 14) fail_msg("max 2^%d scaled by 2^%d: 2^%d", ilogbf(m), k, top);
  float *y = dec(c, e, n);
  for (size_t i = 0; i < n; i++) {
    float want = ldexpf(ref_u2f(ref_f16_to_f32(ref_f16(ref_f2u(g[i]), k))), -k);
    if (ref_f2u(y[i]) != ref_f2u(want)) fail_msg("i=%zu: %a -> %a, want %a", i, (double)g[i], (double)y[i], (double)want);
  }
  free(y), free(e.frame);
}

static void scale_window(void) {
  enum { N = 100000 };
  gcomp_codec *c = make("fp16");
  float *g = gradient(N, 77, 1e-3);
  check_scaled_frame(c, g, N, 12);
  g[N - 10] = 10.0f;                       /* far above the prefix's maximum */
  check_scaled_frame(c, g, N, 14);
  g[N - 10] = 0;
  for (size_t i = 0; i < 16384; i++) g[i] = 0;   /* nothing to guess from */
  check_scaled_frame(c, g, N, 14);
  check_scaled_frame(c, g + 16384, 16384, 14);   /* short frames: the exact scale */
  gcomp_codec_stats st = {.struct_size = sizeof st};
  gcomp_codec_get_stats(c, &st);
  assert_int_equal(st.overflows, 0);
  free(g);
  gcomp_codec_destroy(c);
}
static void test_scale_window(void **state) { each_level(scale_window); }

static void test_overflow_underflow_counted(void **state) {
  float g[6] = {1e5f, -7e4f, 65504.0f, 3e-8f, 2.9e-8f, 0.0f};
  gcomp_codec *c = make("fp16:scale=none");
  encoded e = enc(c, g, 6);
  float *y = dec(c, e, 6);
  assert_true(isinf(y[0]) && y[0] > 0 && isinf(y[1]) && y[1] < 0);
  assert_true(y[2] == 65504.0f);
  assert_true(y[3] == 0x1p-24f);                /* rounds up to the smallest subnormal */
  assert_true(y[4] == 0.0f);                    /* below 2^-25: gone */
  gcomp_codec_stats st = {.struct_size = sizeof st};
  gcomp_codec_get_stats(c, &st);
  assert_int_equal(st.overflows, 2);
  assert_int_equal(st.underflows, 1);           /* the zero input is not an underflow */
  assert_int_equal(st.nonfinite_inputs, 0);
  free(y), free(e.frame);
  gcomp_codec_destroy(c);
  /* the same frame with the default scale loses nothing */
  c = make("fp16");
  e = enc(c, g, 6);
  y = dec(c, e, 6);
  assert_true(y[0] == 1e5f || fabsf(y[0] - 1e5f) < 1e5f * 0x1p-11f);
  free(y), free(e.frame);
  gcomp_codec_destroy(c);
}

/* ---- stochastic through the API ------------------------------------------------------- */
static void test_stochastic_seeded_per_frame(void **state) {
  enum { N = 5000 };
  float *g = gradient(N, 5, 1e-3);
  gcomp_codec *a = make("bf16:round=stochastic,seed=7"), *b = make("bf16:round=stochastic,seed=7"),
              *d = make("bf16:round=stochastic,seed=8");
  encoded a1 = enc(a, g, N), b1 = enc(b, g, N), d1 = enc(d, g, N), a2 = enc(a, g, N);
  assert_memory_equal(a1.frame, b1.frame, a1.len);            /* same seed, same frame */
  assert_true(memcmp(a1.frame + 32, d1.frame + 32, 2 * N) != 0); /* another seed */
  assert_true(memcmp(a1.frame + 32, a2.frame + 32, 2 * N) != 0); /* the next frame */
  free(a1.frame), free(b1.frame), free(d1.frame), free(a2.frame), free(g);
  gcomp_codec_destroy(a), gcomp_codec_destroy(b), gcomp_codec_destroy(d);
}

/* ---- error feedback and stages -------------------------------------------------------- */
/* With +ef nothing is lost over time: the decoded frames plus the last residual sum to
 * the gradients, up to fp32 rounding (the residual is carried in fp32). */
static void ef_conserves(void) {
  const char *specs[] = {"bf16+ef", "fp16+ef", "bf16:round=stochastic,seed=1+ef"};
  for (size_t s = 0; s < sizeof specs / sizeof *specs; s++) {
    enum { N = 777, STEPS = 20 };
    gcomp_codec *c = make(specs[s]);
    double *sent = calloc(N, sizeof *sent), *given = calloc(N, sizeof *given);
    float *acc = calloc(N, 4), *last = NULL;
    for (int t = 0; t < STEPS; t++) {
      float *g = gradient(N, (uint64_t)t + 11, 1e-3);
      encoded e = enc(c, g, N);
      float *y = dec(c, e, N);
      assert_int_equal(gcomp_decode_add(c, e.frame, e.len, acc, N), GCOMP_OK);
      for (size_t i = 0; i < N; i++) sent[i] += y[i], given[i] += g[i];
      free(last);
      last = g;
      free(y), free(e.frame);
    }
    /* residual after the last step = what is still owed: encode zeros to flush it out */
    float *zeros = calloc(N, 4);
    encoded e = enc(c, zeros, N);
    float *y = dec(c, e, N);
    double worst = 0, plain = 0;
    for (size_t i = 0; i < N; i++) {
      worst = fmax(worst, fabs(sent[i] + y[i] - given[i]));
      plain = fmax(plain, fabs((double)acc[i] - sent[i]));
    }
    /* the residual is at most one bf16 quantum of a value below 2^-9 (2^-16); flushing it
     * loses at most one quantum of it (2^-23), plus fp32 rounding of 20 steps. Without
     * feedback the summed error would be ~1e-5. */
    if (worst > 0x1p-23 + 1e-8) fail_msg("%s: EF lost %g", specs[s], worst);
    assert_true(plain < 1e-6);   /* decode_add accumulated the same frames */
    free(zeros), free(y), free(e.frame), free(sent), free(given), free(acc), free(last);
    gcomp_codec_destroy(c);
  }
}
static void test_ef_conserves(void **state) { each_level(ef_conserves); }

static void test_lossless_stage_roundtrip(void **state) {
  enum { N = 20000 };
  float *g = gradient(N, 3, 1e-3);
  const char *specs[] = {"fp16+zstd", "bf16+zstd:level=3"};
  for (int s = 0; s < 2; s++) {
    gcomp_codec *c = make(specs[s]), *p = make(s ? "bf16" : "fp16");
    encoded e = enc(c, g, N), f = enc(p, g, N);
    float *y = dec(c, e, N), *z = dec(p, f, N);
    assert_memory_equal(y, z, N * 4);   /* the stage is lossless over the cast */
    free(y), free(z), free(e.frame), free(f.frame);
    gcomp_codec_destroy(c), gcomp_codec_destroy(p);
  }
  free(g);
}

/* ---- corrupt frames ------------------------------------------------------------------- */
static void test_corrupt_frames(void **state) {
  float g[16];
  for (int i = 0; i < 16; i++) g[i] = (float)i * 0.5f;
  gcomp_codec *f = make("fp16"), *b = make("bf16");
  encoded e = enc(f, g, 16);
  float out[16];
  /* a frame of the other kind */
  assert_int_equal(gcomp_decode(b, e.frame, e.len, out, 16), GCOMP_ERR_CORRUPT);
  /* a well-sealed frame whose scale word is not a scale */
  gcomp_frame_info info = {.kind = e.frame[5], .count = 16, .payload_len = 32, .param = 0x180};
  gcomp_frame_seal(e.frame, &info);
  assert_int_equal(gcomp_decode(f, e.frame, e.len, out, 16), GCOMP_ERR_CORRUPT);
  assert_non_null(strstr(gcomp_last_error(), "scale exponent"));
  info.param = 0x80;   /* -128 */
  gcomp_frame_seal(e.frame, &info);
  assert_int_equal(gcomp_decode(f, e.frame, e.len, out, 16), GCOMP_ERR_CORRUPT);
  /* a payload one byte short of its count */
  info.param = 0;
  info.count = 17;
  gcomp_frame_seal(e.frame, &info);
  assert_int_equal(gcomp_decode(f, e.frame, e.len, out, 17), GCOMP_ERR_CORRUPT);
  encoded h = enc(b, g, 16);
  gcomp_frame_info bi = {.kind = h.frame[5], .count = 16, .payload_len = 32, .param = 1};
  gcomp_frame_seal(h.frame, &bi);
  assert_int_equal(gcomp_decode(b, h.frame, h.len, out, 16), GCOMP_ERR_CORRUPT);
  free(e.frame), free(h.frame);
  gcomp_codec_destroy(f), gcomp_codec_destroy(b);
}

/* decode_add of frames of several blocks, whose kernels checksum block b + 1 as they add
 * block b: the sums are acc + decode bit for bit (the last block whole, or partial), and a
 * frame damaged in block b is refused with that block named, no value of it or of a later
 * block added (the blocks before it may have been, once). */
static void blocks_added_then_verified(void) {
  enum { BV = GCOMP_FRAME_BLOCK / 2 };   /* values per block */
  static const size_t sizes[] = {3 * BV, 4 * BV + 1000, BV + 32, 2 * BV - 1};
  for (size_t z = 0; z < sizeof sizes / sizeof *sizes; z++) {
    size_t n = sizes[z], nb = (n + BV - 1) / BV;
    float *g = gradient(n, 11 + z, 1e-2), *r = gradient(n, 50 + z, 1.0);
    float *acc = malloc(n * 4), *want = malloc(n * 4);
    for (int k = 0; k < 2; k++) {
      gcomp_codec *c = make(k ? "bf16" : "fp16");
      encoded e = enc(c, g, n);
      float *d = dec(c, e, n);
      for (size_t i = 0; i < n; i++) want[i] = r[i] + d[i];
      memcpy(acc, r, n * 4);
      assert_int_equal(gcomp_decode_add(c, e.frame, e.len, acc, n), GCOMP_OK);
      if (memcmp(acc, want, n * 4)) fail_msg("%s n=%zu: decode_add differs", k ? "bf16" : "fp16", n);
      uint8_t *bad = malloc(e.len);
      for (size_t b = 0; b < nb; b++) {
        size_t at = b * GCOMP_FRAME_BLOCK, blen = 2 * n - at < GCOMP_FRAME_BLOCK ? 2 * n - at
                                                                                 : GCOMP_FRAME_BLOCK;
        memcpy(bad, e.frame, e.len);
        bad[GCOMP_FRAME_HEADER + at + (12345 + 77 * b) % blen] ^= 0x10;
        memcpy(acc, r, n * 4);
        assert_int_equal(gcomp_decode_add(c, bad, e.len, acc, n), GCOMP_ERR_CORRUPT);
        char name[32];
        snprintf(name, sizeof name, "frame block %zu ", b);
        if (!strstr(gcomp_last_error(), name)) fail_msg("block %zu: '%s'", b, gcomp_last_error());
        for (size_t i = b * BV; i < n; i++)
          if (memcmp(acc + i, r + i, 4)) fail_msg("block %zu damaged: value %zu added", b, i);
        for (size_t i = 0; i < b * BV; i++)
          if (memcmp(acc + i, r + i, 4) && memcmp(acc + i, want + i, 4))
            fail_msg("block %zu damaged: value %zu is neither kept nor added once", b, i);
      }
      free(bad), free(d), free(e.frame);
      gcomp_codec_destroy(c);
    }
    free(g), free(r), free(acc), free(want);
  }
}
static void test_blocks_added_then_verified(void **state) { each_level(blocks_added_then_verified); }

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(test_specs_canonical, test_env_restore),
      cmocka_unit_test_teardown(test_spec_errors, test_env_restore),
      cmocka_unit_test_teardown(test_frames_match_reference, test_env_restore),
      cmocka_unit_test_teardown(test_scaling_roundtrips, test_env_restore),
      cmocka_unit_test_teardown(test_nonfinite_kept, test_env_restore),
      cmocka_unit_test_teardown(test_scale_window, test_env_restore),
      cmocka_unit_test_teardown(test_overflow_underflow_counted, test_env_restore),
      cmocka_unit_test_teardown(test_stochastic_seeded_per_frame, test_env_restore),
      cmocka_unit_test_teardown(test_ef_conserves, test_env_restore),
      cmocka_unit_test_teardown(test_lossless_stage_roundtrip, test_env_restore),
      cmocka_unit_test_teardown(test_corrupt_frames, test_env_restore),
      cmocka_unit_test_teardown(test_blocks_added_then_verified, test_env_restore),
  };
  return cmocka_run_group_tests(tests, test_env_save, test_env_free);
}
