/* The quant and sign codecs through the public API: spec errors naming the token; nearest
 * within half a step of each bucket's grid; stochastic unbiased over many seeds (and
 * nearest measurably not, on the same data); NaN/Inf buckets sent as is, counted, and
 * propagated; one huge value spoiling only its bucket; wire size against B/8 + 8/S; sign's
 * scale, zeros and masks; error feedback fused bucket by bucket equal to the plain way, its
 * many-step invariant, bf16 residuals and checkpoints; every kernel level writing the same
 * frames; damaged and lying frames refused. */
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

#include "test_env.h"

#include "codec_impl.h"
#include "ef.h"
#include "frame.h"
#include "gcomp.h"
#include "gcomp_common.h"
#include "spec.h"
#include "test_util.h"
#include "test_hooks.h"

static void gradient(float *g, size_t n, double sigma) {
  for (size_t i = 0; i < n; i++) g[i] = (float)(gauss() * sigma);
}

static gcomp_codec *make(const char *spec) {
  gcomp_codec *c = NULL;
  if (gcomp_codec_create(spec, &c) != GCOMP_OK) fail_msg("%s: %s", spec, gcomp_last_error());
  return c;
}

typedef struct {
  uint8_t *f;
  size_t len;
} frame;

static frame enc(gcomp_codec *c, uint64_t key, const float *g, size_t n) {
  frame e;
  size_t cap = gcomp_codec_max_encoded_size(c, n);
  e.f = malloc(cap);
  if (gcomp_encode(c, key, g, n, e.f, cap, &e.len) != GCOMP_OK)
    fail_msg("encode: %s", gcomp_last_error());
  return e;
}

static void dec(gcomp_codec *c, frame e, float *y, size_t n) {
  if (gcomp_decode(c, e.f, e.len, y, n) != GCOMP_OK) fail_msg("decode: %s", gcomp_last_error());
}

/* ---- specs ------------------------------------------------------------------------------ */
static void expect_spec_error(const char *spec, const char *fragment) {
  gcomp_codec *c = NULL;
  int s = gcomp_codec_create(spec, &c);
  if (s != GCOMP_ERR_INVALID) fail_msg("'%s' gave %d", spec, s);
  if (!strstr(gcomp_last_error(), fragment))
    fail_msg("'%s': error '%s' lacks '%s'", spec, gcomp_last_error(), fragment);
}

static void test_specs(void **state) {
  const char *const pairs[][2] = {
      {"quant", "quant:bits=4,bucket=512,round=nearest"},
      {"quant:bits=8,bucket=128", "quant:bits=8,bucket=128,round=nearest"},
      {"quant:round=stochastic", "quant:bits=4,bucket=512,round=stochastic,seed=0"},
      {"quant:bits=2,round=stochastic,seed=9+ef", "quant:bits=2,bucket=512,round=stochastic,"
                                                  "seed=9+ef:dtype=fp32"},
      {"sign", "sign:bucket=512"},
      {"sign:bucket=32+ef:dtype=bf16", "sign:bucket=32+ef:dtype=bf16"},
      {"quant+zstd", "quant:bits=4,bucket=512,round=nearest+zstd:level=1,planes=exp"}};
  for (size_t i = 0; i < sizeof pairs / sizeof *pairs; i++) {
    gcomp_codec *c = make(pairs[i][0]);
    char buf[256];
    gcomp_codec_spec(c, buf, sizeof buf);
    assert_string_equal(buf, pairs[i][1]);
    gcomp_codec_destroy(c);
    gcomp_codec_destroy(make(pairs[i][1]));   /* the canonical form reads back */
  }
  expect_spec_error("quant:bits=9", "bits='9' is out of range [1, 8]");
  expect_spec_error("quant:bits=0", "bits='0' is out of range [1, 8]");
  expect_spec_error("quant:bits=four", "bits='four' is not a non-negative integer");
  expect_spec_error("quant:bucket=100", "bucket='100' must be a multiple of 32");
  expect_spec_error("quant:bucket=16", "bucket='16' is out of range [32, 1048576]");
  expect_spec_error("quant:bucket=2097152", "bucket='2097152' is out of range");
  expect_spec_error("quant:round=up", "round='up' is not one of nearest|stochastic");
  expect_spec_error("quant:seed=3", "seed=3 has no effect with round=nearest");
  expect_spec_error("quant:scale=auto",
                    "unknown parameter 'scale' (valid: bits, bucket, round, seed)");
  expect_spec_error("sign:bits=1", "unknown parameter 'bits' (valid: bucket)");
  expect_spec_error("sign:bucket=33", "bucket='33' must be a multiple of 32");
  expect_spec_error("quant+ef:momentum=0.9", "momentum correction for sparsifying codecs");
  expect_spec_error("quantt",
                    "unknown codec 'quantt' (valid: none, fp16, bf16, topk, quant, sign)");
}

/* ---- quant error bounds ------------------------------------------------------------------ */
/* Each bucket's grid as the encoder computes it from the bucket's min and max. */
static void bucket_grid(const float *x, size_t n, unsigned bits, float *mn, float *step,
                        float *amax) {
  float lo = x[0], hi = x[0], a = 0;
  for (size_t i = 0; i < n; i++) {
    lo = fminf(lo, x[i]), hi = fmaxf(hi, x[i]), a = fmaxf(a, fabsf(x[i]));
  }
  *mn = lo;
  *step = (hi - lo) / (float)((1u << bits) - 1);
  *amax = a;
}

/* nearest: every value within half a step of its bucket's grid; the slack is fp32's, said
 * exactly: the code comes from (x - min) / step rounded once more (2^-22 of a step per
 * unit of the code's size, at most 255: < 2^-13 of a step) and min + c * step rounds twice
 * (2 ulp of the bucket's largest magnitude). */
static void nearest_bound(const char *spec, unsigned bits, size_t bucket, size_t n) {
  gcomp_codec *c = make(spec);
  float *g = malloc(n * 4), *y = malloc(n * 4);
  gradient(g, n, 1e-3);
  for (size_t i = 0; i < n; i += 97) g[i] *= 40;   /* uneven buckets */
  frame e = enc(c, 0, g, n);
  dec(c, e, y, n);
  double worst = 0;
  for (size_t b0 = 0; b0 < n; b0 += bucket) {
    size_t m = n - b0 < bucket ? n - b0 : bucket;
    float mn, step, amax;
    bucket_grid(g + b0, m, bits, &mn, &step, &amax);
    double tol = 0.5 * step * (1 + 0x1p-13) + 2 * ldexp(amax, -23);
    for (size_t i = b0; i < b0 + m; i++) {
      double err = fabs((double)y[i] - g[i]);
      if (err > tol)
        fail_msg("%s: value %zu off by %g, bound %g (step %g)", spec, i, err, tol, step);
      worst = fmax(worst, err / step);
    }
  }
  assert_true(worst > 0.4);   /* the bound is nearly reached: it is the real one */
  free(e.f), free(g), free(y);
  gcomp_codec_destroy(c);
}

static void test_nearest_within_half_a_step(void **state) {
  test_rng = 11;
  for (unsigned bits = 1; bits <= 8; bits++) {
    char spec[64];
    snprintf(spec, sizeof spec, "quant:bits=%u,bucket=128", bits);
    nearest_bound(spec, bits, 128, 100003);
  }
  nearest_bound("quant", 4, 512, 70001);
  nearest_bound("quant:bits=8,bucket=32", 8, 32, 1000);
}

/* stochastic: over many seeds the mean decoded value is the input within a statistical
 * bound (5 sigma of the summed Bernoulli variances); nearest on the same values, every one
 * a quarter step above a grid point, is biased by far more. */
static void test_stochastic_unbiased(void **state) {
  enum { N = 2048, SEEDS = 300 };
  const unsigned bits = 3, top = 7;
  float x[N], y[N];
  for (size_t i = 0; i < N; i++) x[i] = (float)(((i * 5) % top) + 0.25) / top;
  for (size_t b = 0; b < N; b += 512) x[b] = 0.0f, x[b + 1] = 1.0f;   /* each bucket: [0, 1] */
  double sum[N] = {0}, var = 0, nearest_err = 0;
  for (int s = 0; s < SEEDS; s++) {
    char spec[64];
    snprintf(spec, sizeof spec, "quant:bits=%u,round=stochastic,seed=%d", bits, s);
    gcomp_codec *c = make(spec);
    frame e = enc(c, 0, x, N);
    dec(c, e, y, N);
    for (size_t i = 0; i < N; i++) sum[i] += y[i];
    free(e.f);
    gcomp_codec_destroy(c);
  }
  double total = 0;
  for (size_t i = 0; i < N; i++) {
    double t = x[i] * top, p = t - floor(t);
    var += p * (1 - p) / ((double)top * top) / SEEDS;
    total += sum[i] / SEEDS - x[i];
  }
  double bound = 5 * sqrt(var) + 1e-6 * N;
  if (fabs(total) > bound) fail_msg("summed mean error %g, bound %g", total, bound);
  gcomp_codec *c = make("quant:bits=3");
  frame e = enc(c, 0, x, N);
  dec(c, e, y, N);
  for (size_t i = 0; i < N; i++) nearest_err += y[i] - x[i];
  assert_true(fabs(nearest_err) > 20 * bound);   /* the bound tells biased from unbiased */
  free(e.f);
  gcomp_codec_destroy(c);
}

/* ---- what does not fit a grid ------------------------------------------------------------ */
static void test_nonfinite_and_huge(void **state) {
  enum { N = 4096, S = 512 };
  const char *specs[] = {"quant", "quant:round=stochastic", "sign", "quant+ef", "sign+ef"};
  float g[N], y[N];
  for (size_t s = 0; s < sizeof specs / sizeof *specs; s++) {
    test_rng = 3;
    gradient(g, N, 1e-3);
    g[700] = NAN, g[701] = INFINITY, g[3000] = -INFINITY;   /* buckets 1 and 5 */
    g[1500] = 1e30f;                                        /* bucket 2: one huge value */
    g[2100] = -3e38f, g[2101] = 3e38f;                      /* bucket 4: range overflows */
    gcomp_codec *c = make(specs[s]);
    frame e = enc(c, 5, g, N);
    dec(c, e, y, N);
    gcomp_codec_stats st;
    assert_int_equal(gcomp_codec_get_stats(c, &st), GCOMP_OK);
    assert_int_equal(st.nonfinite_inputs, 3);
    assert_true(isnan(y[700]) && y[701] == INFINITY && y[3000] == -INFINITY);
    /* buckets with NaN/Inf or an overflowing range come through exactly */
    for (size_t i = S; i < 2 * S; i++) assert_true(i == 700 || y[i] == g[i]);
    for (size_t i = 4 * S; i < 6 * S; i++) assert_true(i == 3000 || y[i] == g[i]);
    /* the huge value spoils only its own bucket: the others keep a small error */
    int sign = strncmp(specs[s], "sign", 4) == 0;
    for (size_t b = 0; b < N / S; b++) {
      if (b == 1 || b == 4 || b == 5) continue;
      double worst = 0;
      for (size_t i = b * S; i < (b + 1) * S; i++) worst = fmax(worst, fabs((double)y[i] - g[i]));
      if (b == 2 && !sign) assert_true(worst > 1e-3);   /* the grid is 1e30 wide there */
      if (b != 2) assert_true(worst < (sign ? 5e-3 : 1e-3));
    }
    /* the next call starts clean: no NaN was carried in a residual */
    for (size_t i = 0; i < N; i++) g[i] = 1e-3f;
    free(e.f);
    e = enc(c, 5, g, N);
    dec(c, e, y, N);
    for (size_t i = 0; i < N; i++) assert_true(isfinite(y[i]));
    free(e.f);
    gcomp_codec_destroy(c);
  }
}

/* ---- wire size ------------------------------------------------------------------------- */
static void test_wire_size(void **state) {
  enum { N = 1 << 20 };
  float *g = malloc(N * 4);
  test_rng = 4;
  gradient(g, N, 1e-3);
  for (unsigned bits = 1; bits <= 8; bits++)
    for (size_t s = 32; s <= 4096; s *= 4) {
      char spec[64];
      snprintf(spec, sizeof spec, "quant:bits=%u,bucket=%zu", bits, s);
      gcomp_codec *c = make(spec);
      frame e = enc(c, 0, g, N);
      double per = (double)(e.len - gcomp_frame_size(0)) / N, want = bits / 8.0 + 8.0 / (double)s;
      if (fabs(per / want - 1) > 0.05) fail_msg("%s: %g bytes a value, %g wanted", spec, per, want);
      free(e.f);
      gcomp_codec_destroy(c);
    }
  gcomp_codec *c = make("sign");   /* no zeros: one bit a value and the scale */
  frame e = enc(c, 0, g, N);
  double per = (double)(e.len - gcomp_frame_size(0)) / N;
  assert_true(fabs(per / (1 / 8.0 + 4 / 512.0) - 1) < 0.05);
  free(e.f);
  gcomp_codec_destroy(c);
  free(g);
}

/* ---- sign -------------------------------------------------------------------------------- */
static void test_sign_scale_and_zeros(void **state) {
  enum { N = 1000, S = 128 };
  float g[N], y[N];
  test_rng = 8;
  gradient(g, N, 1.0);
  for (size_t i = 128; i < 256; i += 3) g[i] = 0.0f;   /* bucket 1: some zeros */
  for (size_t i = 256; i < 384; i++) g[i] = (i & 1) ? 0.0f : -0.0f;   /* bucket 2: all zero */
  gcomp_codec *c = make("sign:bucket=128");
  frame e = enc(c, 0, g, N);
  dec(c, e, y, N);
  size_t o = GCOMP_FRAME_HEADER;   /* walk the payload: bucket by bucket */
  for (size_t b0 = 0; b0 < N; b0 += S) {
    size_t n = N - b0 < S ? N - b0 : S, nb = (n + 7) / 8, nnz = 0;
    double sum = 0;
    for (size_t i = b0; i < b0 + n; i++) sum += fabs(g[i]), nnz += g[i] != 0;
    uint32_t w = gcomp_load_le32(e.f + o);
    float scale;
    memcpy(&scale, &w, 4);
    int has_mask = (w >> 31) != 0;
    assert_int_equal(has_mask, nnz > 0 && nnz < n);
    double s = nnz ? sum / (double)nnz : 0;
    assert_true(fabs(fabs(scale) - s) <= 1e-6 * s);   /* the mean magnitude */
    for (size_t i = b0; i < b0 + n; i++) {
      float want = g[i] == 0 ? 0.0f : g[i] < 0 ? -fabsf(scale) : fabsf(scale);
      assert_true(memcmp(&y[i], &want, 4) == 0);   /* zeros exactly +0 */
    }
    o += 4 + nb * (has_mask ? 2 : 1);
  }
  assert_int_equal(o, GCOMP_FRAME_HEADER + gcomp_load_le64(e.f + 16));
  free(e.f);
  gcomp_codec_destroy(c);
}

/* ---- error feedback ---------------------------------------------------------------------- */
/* The fused path (bucket by bucket) gives the plain path's frame bit for bit, and its
 * residual value for value. */
static void test_fused_ef_equals_plain(void **state) {
  const char *specs[] = {"quant+ef", "quant:bits=2,bucket=128,round=stochastic,seed=5+ef",
                         "quant:bits=8,bucket=32+ef", "sign+ef", "sign:bucket=64+ef"};
  enum { N = 10007 };
  float g[N], r0[N], r1[N];
  for (size_t s = 0; s < sizeof specs / sizeof *specs; s++) {
    gcomp_spec sp;
    assert_int_equal(gcomp_spec_parse(specs[s], &sp), GCOMP_OK);
    size_t cap = sp.kind->max_payload(&sp.cfg, N), l0, l1;
    uint8_t *f0 = malloc(cap), *f1 = malloc(cap);
    test_rng = 21;
    for (size_t i = 0; i < N; i++) r0[i] = r1[i] = (float)(gauss() * 1e-4);
    for (int step = 0; step < 3; step++) {
      gradient(g, N, 1e-3);
      if (step == 1) g[77] = NAN;
      gcomp_codec_stats st = {0};
      gcomp_enc_ctx c0 = {.seq = (uint64_t)step, .stats = &st};
      gcomp_enc_ctx c1 = c0;
      assert_int_equal(sp.kind->encode_ef(sp.kind, &sp.cfg, &c0, g, r0, N, f0, cap, &l0), GCOMP_OK);
      assert_int_equal(gcomp_ef_encode_generic(sp.kind, &sp.cfg, &c1, g, r1, N, f1, cap, &l1),
                       GCOMP_OK);
      assert_int_equal(l0, l1);
      assert_memory_equal(f0, f1, l0);
      /* equal values; the plain path (-(-x + decoded)) spells an exact zero -0 */
      for (size_t i = 0; i < N; i++)
        if (r0[i] != r1[i]) fail_msg("%s step %d: residual %zu %a != %a", specs[s], step, i,
                                     r0[i], r1[i]);
    }
    free(f0), free(f1);
  }
}

/* bf16 residuals: the fused path (each bucket widened, updated and rounded back; taken when
 * there is room for the largest payload) gives the same frames and the same residual bits
 * as widening the whole residual around the fp32 encode (taken with one byte less), step
 * after step, through zeros, a NaN bucket and a partial last bucket. */
static void test_fused_bf16_ef_equals_widened(void **state) {
  const char *specs[] = {"sign+ef:dtype=bf16", "sign:bucket=128+ef:dtype=bf16",
                         "quant+ef:dtype=bf16",
                         "quant:bits=2,bucket=96,round=stochastic,seed=3+ef:dtype=bf16"};
  enum { N = 10007 };
  static float g[N], r0[N], r1[N];
  for (size_t s = 0; s < sizeof specs / sizeof *specs; s++) {
    gcomp_spec sp;
    assert_int_equal(gcomp_spec_parse(specs[s], &sp), GCOMP_OK);
    gcomp_ef *e0, *e1;
    assert_int_equal(gcomp_ef_create(sp.ef_dtype, 0, 0, &e0), GCOMP_OK);
    assert_int_equal(gcomp_ef_create(sp.ef_dtype, 0, 0, &e1), GCOMP_OK);
    size_t cap = sp.kind->max_payload(&sp.cfg, N), l0, l1;
    uint8_t *f0 = malloc(cap), *f1 = malloc(cap);
    test_rng = 23;
    for (int step = 0; step < 4; step++) {
      gradient(g, N, 1e-3);
      for (size_t i = 0; i < N; i += 13) g[i] = 0.0f;
      if (step == 1) g[77] = NAN;
      gcomp_codec_stats st = {0};
      gcomp_enc_ctx c0 = {.seq = (uint64_t)step, .stats = &st};
      gcomp_enc_ctx c1 = c0;
      assert_int_equal(gcomp_ef_encode(e0, sp.kind, &sp.cfg, &c0, 9, g, N, f0, cap, &l0), GCOMP_OK);
      assert_int_equal(gcomp_ef_encode(e1, sp.kind, &sp.cfg, &c1, 9, g, N, f1, cap - 1, &l1),
                       GCOMP_OK);
      assert_int_equal(l0, l1);
      assert_memory_equal(f0, f1, l0);
      assert_int_equal(gcomp_ef_residual(e0, 9, r0, N), GCOMP_OK);
      assert_int_equal(gcomp_ef_residual(e1, 9, r1, N), GCOMP_OK);
      assert_memory_equal(r0, r1, sizeof r0);
    }
    size_t moved = 0;   /* the residual is not trivially zero: the comparison can fail */
    for (size_t i = 0; i < N; i++) moved += r0[i] != 0.0f;
    assert_true(moved > N / 2);
    gcomp_ef_destroy(e0), gcomp_ef_destroy(e1);
    free(f0), free(f1);
  }
}

/* Many steps: what was sent plus what is left equals what came in, within the rounding of
 * forming x = g + r and of r = x - decoded (2^-24 of |x| and of |r| each step, and
 * |x| <= |decoded| + |r|: 2^-23 (|decoded| + |r|) covers both), plus, with bf16 residuals,
 * storing r (2^-8 |r|). Read through the residual store itself. */
static void invariant(const char *spec, int bf16) {
  enum { N = 3000, STEPS = 150 };
  static float g[N], y[N], r[N];
  static double sin[N], sout[N], bound[N];
  memset(sin, 0, sizeof sin), memset(sout, 0, sizeof sout), memset(bound, 0, sizeof bound);
  gcomp_spec sp;
  gcomp_ef *ef;
  assert_int_equal(gcomp_spec_parse(spec, &sp), GCOMP_OK);
  assert_int_equal(gcomp_ef_create(sp.ef_dtype, 0, 0, &ef), GCOMP_OK);
  size_t cap = sp.kind->max_payload(&sp.cfg, N), len;
  uint8_t *f = malloc(cap);
  gcomp_codec_stats st = {0};
  test_rng = 31;
  for (int step = 0; step < STEPS; step++) {
    gradient(g, N, 1e-3);
    gcomp_enc_ctx ctx = {.seq = (uint64_t)step, .stats = &st};
    assert_int_equal(gcomp_ef_encode(ef, sp.kind, &sp.cfg, &ctx, 4, g, N, f, cap, &len), GCOMP_OK);
    assert_int_equal(sp.kind->decode(&sp.cfg, ctx.param, f, len, y, N, 0, NULL), GCOMP_OK);
    assert_int_equal(gcomp_ef_residual(ef, 4, r, N), GCOMP_OK);
    for (size_t i = 0; i < N; i++) {
      sin[i] += g[i], sout[i] += y[i];
      bound[i] += ldexp(fabs(y[i]) + fabs(r[i]), -23) + (bf16 ? ldexp(fabs(r[i]), -8) : 0) +
                  ldexp(fabs(sin[i]) + fabs(sout[i]), -50);
    }
  }
  double worst = 0, carried = 0;
  for (size_t i = 0; i < N; i++) {
    double err = fabs(sout[i] + r[i] - sin[i]);
    if (err > bound[i])
      fail_msg("%s value %zu: error %g above the bound %g", spec, i, err, bound[i]);
    worst = fmax(worst, err), carried = fmax(carried, fabs(r[i]));
  }
  assert_true(carried > 0);   /* feedback really carried something */
  print_message("%s: worst invariant error %g, largest residual %g\n", spec, worst, carried);
  free(f);
  gcomp_ef_destroy(ef);
}

/* A checkpoint of the residuals, loaded into a fresh codec, continues exactly as the
 * original (nearest rounding: the frames do not depend on the frame count). */
static void checkpoint(const char *spec) {
  enum { N = 5000 };
  float g[N];
  gcomp_codec *c = make(spec), *d = make(spec);
  test_rng = 41;
  for (int step = 0; step < 5; step++) {
    gradient(g, N, 1e-3);
    free(enc(c, 4, g, N).f);
  }
  char path[64];
  snprintf(path, sizeof path, "/tmp/gcomp-test-quant-%ld.res", (long)getpid());
  assert_int_equal(gcomp_codec_save_residuals(c, path), GCOMP_OK);
  assert_int_equal(gcomp_codec_load_residuals(d, path), GCOMP_OK);
  remove(path);
  for (int step = 0; step < 3; step++) {
    gradient(g, N, 1e-3);
    frame e1 = enc(c, 4, g, N), e2 = enc(d, 4, g, N);
    assert_int_equal(e1.len, e2.len);
    assert_memory_equal(e1.f, e2.f, e1.len);
    free(e1.f), free(e2.f);
  }
  gcomp_codec_destroy(c);
  gcomp_codec_destroy(d);
}

static void test_ef_invariant_and_checkpoint(void **state) {
  invariant("quant:bits=2,bucket=128+ef", 0);
  invariant("quant:bits=4+ef:dtype=bf16", 1);
  invariant("sign+ef", 0);
  invariant("sign+ef:dtype=bf16", 1);
  checkpoint("quant:bits=4,bucket=128+ef");
  checkpoint("sign+ef:dtype=bf16");
}

/* ---- every kernel level writes the same frames ------------------------------------------ */
static void test_levels_identical(void **state) {
  static const char *const levels[] = {"base", "avx2", "avx512"};
  const char *specs[] = {"quant", "quant:bits=3,bucket=96", "quant:bits=1",
                         "quant:bits=7,round=stochastic,seed=4", "sign", "sign:bucket=32+ef",
                         "sign:bucket=128+ef:dtype=bf16", "quant:bits=4+ef:dtype=bf16"};
  enum { N = 5003 };
  float g[N], y0[N], y1[N];
  int best = gcomp_isa_best_level(gcomp_cpu_detect());
  for (size_t s = 0; s < sizeof specs / sizeof *specs; s++) {
    frame first = {0};
    for (int l = 0; l <= best; l++) {
      setenv("GCOMP_ISA", levels[l], 1);
      assert_int_equal(gcomp_reinit_for_testing(), GCOMP_OK);
      test_rng = 77;
      gradient(g, N, 1e-2);
      for (size_t i = 0; i < N; i += 11) g[i] = 0;
      gcomp_codec *c = make(specs[s]);
      frame e = enc(c, 1, g, N);
      dec(c, e, l ? y1 : y0, N);
      if (!l) {
        first = e;
      } else {
        assert_int_equal(e.len, first.len);
        assert_memory_equal(e.f, first.f, e.len);
        assert_memory_equal(y0, y1, sizeof y0);
        free(e.f);
      }
      gcomp_codec_destroy(c);
    }
    free(first.f);
  }
  unsetenv("GCOMP_ISA");
  assert_int_equal(gcomp_reinit_for_testing(), GCOMP_OK);
}

/* ---- damage and lies ---------------------------------------------------------------------- */
static size_t reseal(uint8_t *f, uint64_t plen, uint32_t param) {
  gcomp_frame_info info = {.kind = f[5], .stage = f[6], .flags = f[7],
                           .count = gcomp_load_le64(f + 8), .payload_len = plen, .param = param};
  gcomp_frame_seal(f, &info);
  return (size_t)gcomp_frame_size(plen);
}

static void expect_corrupt(gcomp_codec *c, const uint8_t *f, size_t len, size_t n,
                           const char *fragment) {
  float *y = malloc(n * 4 + 4);
  int s = gcomp_decode_add(c, f, len, y, n);
  free(y);
  if (s != GCOMP_ERR_CORRUPT)
    fail_msg("status %d, expected corrupt (%s)", s, fragment ? fragment : "any message");
  if (fragment && !strstr(gcomp_last_error(), fragment))
    fail_msg("'%s' lacks '%s'", gcomp_last_error(), fragment);
}

static void test_corrupt_frames(void **state) {
  enum { N = 300 };   /* buckets of 128: two full, one of 44 */
  float g[N];
  test_rng = 9;
  gradient(g, N, 1e-3);
  g[200] = NAN;   /* bucket 1 goes raw */
  gcomp_codec *q = make("quant:bits=4,bucket=128"), *s = make("sign:bucket=128");
  frame e = enc(q, 0, g, N);
  uint64_t plen = gcomp_load_le64(e.f + 16);
  uint32_t param = gcomp_load_le32(e.f + 24);
  uint8_t *b = malloc(e.len + 64);
  for (size_t bit = 0; bit < e.len * 8; bit += 3) {   /* bit flips: the checksums */
    memcpy(b, e.f, e.len);
    b[bit / 8] ^= (uint8_t)(1u << bit % 8);
    expect_corrupt(q, b, e.len, N, NULL);
  }
  memcpy(b, e.f, e.len);   /* a frame of other parameters */
  expect_corrupt(q, b, reseal(b, plen, 8 | 128 << 8), N,
                 "frame made with bits=8, bucket=128; this codec has bits=4, bucket=128");
  memcpy(b, e.f, e.len);
  expect_corrupt(s, b, e.len, N, "frame holds codec id 5");
  const uint32_t bad_steps[] = {0x80000000u, 0xbf800000u, 0x7f800000u, 0x7fc00000u};
  for (size_t k = 0; k < 4; k++) {   /* bucket 0's step: negative, Inf, a NaN that is no marker */
    memcpy(b, e.f, e.len);
    gcomp_store_le32(b + GCOMP_FRAME_HEADER + 4, bad_steps[k]);
    expect_corrupt(q, b, reseal(b, plen, param), N, "a finite step >= 0 expected");
  }
  memcpy(b, e.f, e.len);   /* a min that is not finite */
  gcomp_store_le32(b + GCOMP_FRAME_HEADER, 0xff800000u);
  expect_corrupt(q, b, reseal(b, plen, param), N, "a finite min");
  for (uint64_t cut = 1; cut < plen; cut += 7) {   /* every truncation */
    memcpy(b, e.f, GCOMP_FRAME_HEADER + plen - cut);
    expect_corrupt(q, b, reseal(b, plen - cut, param), N, "quant: payload ends");
  }
  memcpy(b, e.f, GCOMP_FRAME_HEADER + plen);   /* trailing bytes */
  memset(b + GCOMP_FRAME_HEADER + plen, 0, 5);
  expect_corrupt(q, b, reseal(b, plen + 5, param), N, "5 bytes after the last bucket");
  free(e.f);
  /* sign: a scale that is not finite, truncations, a frame of another bucket size */
  e = enc(s, 0, g, N);
  plen = gcomp_load_le64(e.f + 16);
  param = gcomp_load_le32(e.f + 24);
  memcpy(b, e.f, e.len);
  gcomp_store_le32(b + GCOMP_FRAME_HEADER, 0x7f800000u);
  expect_corrupt(s, b, reseal(b, plen, param), N, "finite expected");
  for (uint64_t cut = 1; cut < plen; cut += 5) {
    memcpy(b, e.f, GCOMP_FRAME_HEADER + plen - cut);
    expect_corrupt(s, b, reseal(b, plen - cut, param), N, "sign: payload ends");
  }
  memcpy(b, e.f, e.len);
  expect_corrupt(s, b, reseal(b, plen, 512), N, "frame made with bucket=512");
  free(e.f), free(b);
  gcomp_codec_destroy(q);
  gcomp_codec_destroy(s);
}

/* decode_add is acc + decode, bit for bit; and a lossless stage round-trips */
static void test_decode_add_and_stages(void **state) {
  const char *specs[] = {"quant", "quant:bits=8+zstd", "sign+igzip",
                         "quant:bits=2+zstd:planes=all"};
  enum { N = 70000 };
  float *g = malloc(N * 4), *y = malloc(N * 4), *acc = malloc(N * 4), *want = malloc(N * 4);
  test_rng = 12;
  gradient(g, N, 1e-3);
  for (size_t s = 0; s < sizeof specs / sizeof *specs; s++) {
    gcomp_codec *c = make(specs[s]), *plain = NULL;
    frame e = enc(c, 0, g, N);
    dec(c, e, y, N);
    for (size_t i = 0; i < N; i++) acc[i] = (float)i * 1e-5f, want[i] = acc[i] + y[i];
    assert_int_equal(gcomp_decode_add(c, e.f, e.len, acc, N), GCOMP_OK);
    assert_memory_equal(acc, want, N * 4);
    /* the stage changes bytes, never values: the same codec without it decodes the same */
    char base[64];
    snprintf(base, sizeof base, "%s", specs[s]);
    char *plus = strchr(base, '+');
    if (plus) {
      *plus = '\0';
      plain = make(base);
      frame p = enc(plain, 0, g, N);
      dec(plain, p, acc, N);
      assert_memory_equal(acc, y, N * 4);
      free(p.f);
      gcomp_codec_destroy(plain);
    }
    free(e.f);
    gcomp_codec_destroy(c);
  }
  free(g), free(y), free(acc), free(want);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(test_specs, test_env_restore),
      cmocka_unit_test_teardown(test_nearest_within_half_a_step, test_env_restore),
      cmocka_unit_test_teardown(test_stochastic_unbiased, test_env_restore),
      cmocka_unit_test_teardown(test_nonfinite_and_huge, test_env_restore),
      cmocka_unit_test_teardown(test_wire_size, test_env_restore),
      cmocka_unit_test_teardown(test_sign_scale_and_zeros, test_env_restore),
      cmocka_unit_test_teardown(test_fused_ef_equals_plain, test_env_restore),
      cmocka_unit_test_teardown(test_fused_bf16_ef_equals_widened, test_env_restore),
      cmocka_unit_test_teardown(test_ef_invariant_and_checkpoint, test_env_restore),
      cmocka_unit_test_teardown(test_levels_identical, test_env_restore),
      cmocka_unit_test_teardown(test_corrupt_frames, test_env_restore),
      cmocka_unit_test_teardown(test_decode_add_and_stages, test_env_restore),
  };
  return cmocka_run_group_tests(tests, test_env_save, test_env_free);
}
