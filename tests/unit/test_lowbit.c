/* The low-bit kernels (quant and sign): each SIMD table against lowbit_base.c bit for bit,
 * for every width 1..8, lengths 0..300 and a large one, misaligned pointers, buffers that
 * end at a guard page, the stochastic path under fixed keys, every decode mode; the base
 * kernels against the rules of lowbit.h written out once more here, independently (the
 * pack order, the shuffle tables, the code formulas, the fixed-order sum). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "gcomp_common.h"
#include "lowbit.h"
#include "test_util.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint32_t rnd32(void) {
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return (uint32_t)(rng >> 16);
}
static float rndf(void) { return (float)((double)rnd32() / 4294967296.0 - 0.5); }

/* Gradient-like values with zeros, ties of the grid, negative zeros and a few outliers. */
static void fill(float *x, size_t n) {
  for (size_t i = 0; i < n; i++) {
    uint32_t r = rnd32() % 16;
    x[i] = r == 0 ? 0.0f : r == 1 ? -0.0f : r == 2 ? 0.25f * (float)(rnd32() % 9) - 1.0f
                                                    : rndf() * (r == 3 ? 50.0f : 1e-3f);
  }
}

static const gcomp_lowbit_kernels *const *simd(size_t *n) {
  size_t all;
  const gcomp_lowbit_kernels *const *t = gcomp_lowbit_tables(&all);
  static int said;
  if (!said++) {
    if (all < 2) print_message("no AVX2 on this CPU: SIMD low-bit kernels not tested\n");
    else if (all < 3) print_message("no AVX-512 F/BW/VL on this CPU: avx512 kernels not tested\n");
  }
  *n = all - 1;
  return t + 1;
}

static int same_bits(const float *a, const float *b, size_t n) { return !memcmp(a, b, 4 * n); }

/* The error-feedback kernels: sign's fused pair (against base, which is the two steps it
 * fuses: addto + sscan, senc + sdec(SUB)) with residuals r = x reversed and gradients x,
 * with and without zero bits, and the bf16 residual conversions over x and over the edges
 * of gcomp_bf16_rne_sat (largest finite and what rounds past it, Inf, NaN, subnormals). */
static void diff_ef(const gcomp_lowbit_kernels *K, const float *x, size_t n, uint8_t *c0,
                    uint8_t *c1, float *d0, float *d1, const char *where) {
  const gcomp_lowbit_kernels *B = &gcomp_lowbit_base;
  float s0, s1;
  size_t z0, z1, nb = (n + 7) / 8;
  for (size_t i = 0; i < n; i++) d0[i] = d1[i] = x[n - 1 - i];
  int b0 = B->sscan_ef(d0, x, n, &s0, &z0), b1 = K->sscan_ef(d1, x, n, &s1, &z1);
  if (b0 != b1 || gcomp_f2u(s0) != gcomp_f2u(s1) || z0 != z1 || !same_bits(d0, d1, n))
    fail_msg("%s %s sscan_ef n=%zu", K->name, where, n);
  for (int z = 0; z < 2; z++) {
    float *e0 = malloc(4 * n + 4), *e1 = malloc(4 * n + 4);
    memcpy(e0, d0, 4 * n), memcpy(e1, d0, 4 * n);
    memset(c0, 0xa5, 2 * nb), memset(c1, 0x5a, 2 * nb);
    B->senc_ef(e0, n, 0.375f, c0, z ? c0 + nb : NULL);
    K->senc_ef(e1, n, 0.375f, c1, z ? c1 + nb : NULL);
    if (memcmp(c0, c1, z ? 2 * nb : nb) || !same_bits(e0, e1, n))
      fail_msg("%s %s senc_ef z=%d n=%zu", K->name, where, z, n);
    free(e0), free(e1);
  }
  static const uint32_t edges[] = {0x7f7f7fff, 0x7f7f8000, 0x7f7f8001, 0x7f7fffff, 0x7f800000,
                                   0x7f800001, 0x7fc00000, 0x7fffffff, 0x00000001, 0x00007fff,
                                   0x00008000, 0x00018000, 0x007fffff, 0x3f808000, 0x3f818000,
                                   0x00000000, 0x7f7effff, 0x7f7e8000};
  uint16_t *h0 = malloc(2 * n + 2), *h1 = malloc(2 * n + 2);
  float *y = malloc(4 * n + 4);
  for (int pass = 0; pass < 2; pass++) {
    for (size_t i = 0; i < n; i++)
      y[i] = pass == 0 ? x[i]
                       : gcomp_u2f(edges[(i * 7) % (sizeof edges / sizeof *edges)] |
                                   (i & 1 ? 0x80000000u : 0));
    B->narrow(h0, y, n);
    K->narrow(h1, y, n);
    if (memcmp(h0, h1, 2 * n)) fail_msg("%s %s narrow pass=%d n=%zu", K->name, where, pass, n);
    for (size_t i = 0; i < n; i++) h0[i] = (uint16_t)(rnd32() >> 7);   /* every bf16, NaN too */
    B->widen(d0, h0, n);
    K->widen(d1, h0, n);
    if (!same_bits(d0, d1, n)) fail_msg("%s %s widen n=%zu", K->name, where, n);
  }
  free(h0), free(h1), free(y);
}

/* Every kernel of K against base on x[0..n); codes/outputs where the caller put them (so
 * they may end at a guard page). */
static void diff_one(const gcomp_lowbit_kernels *K, const float *x, size_t n, uint8_t *c0,
                     uint8_t *c1, float *d0, float *d1, const char *where) {
  const gcomp_lowbit_kernels *B = &gcomp_lowbit_base;
  if (n) {
    float mn0, mx0, mn1, mx1;
    int b0 = B->minmax(x, n, &mn0, &mx0), b1 = K->minmax(x, n, &mn1, &mx1);
    if (b0 != b1 || (!b0 && (gcomp_f2u(mn0) != gcomp_f2u(mn1) || gcomp_f2u(mx0) != gcomp_f2u(mx1))))
      fail_msg("%s %s minmax n=%zu", K->name, where, n);
  }
  for (unsigned bits = 1; bits <= 8; bits++) {
    size_t cb = gcomp_lb_bytes(n, bits);
    float top = (float)((1u << bits) - 1), mn = -0.6f, inv = top / 1.2f, step = 1.2f / top;
    memset(c0, 0xa5, cb), memset(c1, 0x5a, cb);
    B->qenc(x, n, bits, mn, inv, c0);
    K->qenc(x, n, bits, mn, inv, c1);
    if (memcmp(c0, c1, cb)) fail_msg("%s %s qenc bits=%u n=%zu", K->name, where, bits, n);
    uint64_t key = 0x1234567890abcdefull ^ bits;
    B->qenc_sr(x, n, bits, mn, inv, key, 77, c0);
    K->qenc_sr(x, n, bits, mn, inv, key, 77, c1);
    if (memcmp(c0, c1, cb)) fail_msg("%s %s qenc_sr bits=%u n=%zu", K->name, where, bits, n);
    for (int mode = 0; mode < GCOMP_LB_MODES; mode++) {
      for (size_t i = 0; i < n; i++) d0[i] = d1[i] = x[i];
      B->qdec(c0, n, bits, mn, step, d0, mode);
      K->qdec(c0, n, bits, mn, step, d1, mode);
      if (!same_bits(d0, d1, n)) fail_msg("%s %s qdec bits=%u mode=%d n=%zu", K->name, where,
                                          bits, mode, n);
    }
  }
  for (size_t i = 0; i < n; i++) d0[i] = d1[i] = x[n - 1 - i];
  B->addto(d0, x, n);
  K->addto(d1, x, n);
  if (!same_bits(d0, d1, n)) fail_msg("%s %s addto n=%zu", K->name, where, n);
  float *e = malloc(4 * n + 4);   /* addto2: a third operand, x scaled and shifted */
  for (size_t i = 0; i < n; i++) e[i] = x[(i * 5) % n] * -0.75f;
  B->addto2(d0, x, e, n);
  K->addto2(d1, x, e, n);
  if (!same_bits(d0, d1, n)) fail_msg("%s %s addto2 n=%zu", K->name, where, n);
  free(e);
  float s0, s1;
  size_t z0, z1;
  if (B->sscan(x, n, &s0, &z0) != K->sscan(x, n, &s1, &z1) || gcomp_f2u(s0) != gcomp_f2u(s1) ||
      z0 != z1)
    fail_msg("%s %s sscan n=%zu", K->name, where, n);
  size_t nb = (n + 7) / 8;
  uint8_t *m0 = c0 + nb, *m1 = c1 + nb;   /* the zero masks right after the sign bits */
  B->senc(x, n, c0, m0);
  K->senc(x, n, c1, m1);
  if (memcmp(c0, c1, 2 * nb)) fail_msg("%s %s senc n=%zu", K->name, where, n);
  K->senc(x, n, c1, NULL);   /* without zero bits: the sign bits alone, the same */
  if (memcmp(c0, c1, nb)) fail_msg("%s %s senc without zmask n=%zu", K->name, where, n);
  for (int mode = 0; mode < GCOMP_LB_MODES; mode++)
    for (int z = 0; z < 2; z++) {
      for (size_t i = 0; i < n; i++) d0[i] = d1[i] = x[i];
      B->sdec(c0, z ? m0 : NULL, n, 0.375f, d0, mode);
      K->sdec(c0, z ? m0 : NULL, n, 0.375f, d1, mode);
      if (!same_bits(d0, d1, n)) fail_msg("%s %s sdec mode=%d z=%d n=%zu", K->name, where, mode,
                                          z, n);
    }
  diff_ef(K, x, n, c0, c1, d0, d1, where);
}

static void test_simd_vs_base_lengths(void **state) {
  enum { MAXN = 300, PAD = 16 };
  size_t nt;
  const gcomp_lowbit_kernels *const *T = simd(&nt);
  float *x = malloc((MAXN + PAD) * 4), *d0 = malloc((MAXN + PAD) * 4);
  float *d1 = malloc((MAXN + PAD) * 4);
  uint8_t *c0 = malloc(2 * MAXN + PAD), *c1 = malloc(2 * MAXN + PAD);
  for (size_t t = 0; t < nt; t++)
    for (size_t n = 0; n <= MAXN; n++) {
      size_t a = n % 16, b = n % 7;   /* misaligned floats and codes */
      fill(x + a, n);
      diff_one(T[t], x + a, n, c0 + b, c1 + (6 - b), d0 + a, d1 + (15 - a), "lengths");
    }
  free(x), free(d0), free(d1), free(c0), free(c1);
}

/* Every kernel with its output or input ending exactly at a guard page: codes of exactly
 * ceil(bits n / 8) bytes, sign and zero bits of exactly ceil(n / 8) each. */
static void guard_codes(const gcomp_lowbit_kernels *K, const float *x, size_t n, float *d) {
  for (unsigned bits = 1; bits <= 8; bits++) {
    guarded g;
    uint8_t *c = guard_alloc(&g, gcomp_lb_bytes(n, bits));
    float mn = -0.6f, inv = (float)((1u << bits) - 1) / 1.2f;
    K->qenc(x, n, bits, mn, inv, c);
    K->qenc_sr(x, n, bits, mn, inv, 99, 0, c);
    for (int mode = 0; mode < GCOMP_LB_MODES; mode++) K->qdec(c, n, bits, mn, 1.0f / inv, d, mode);
    guard_free(&g);
  }
  guarded gb, gz;
  uint8_t *b = guard_alloc(&gb, (n + 7) / 8), *z = guard_alloc(&gz, (n + 7) / 8);
  K->senc(x, n, b, z);
  for (int mode = 0; mode < GCOMP_LB_MODES; mode++) K->sdec(b, z, n, 0.25f, d, mode);
  guard_free(&gb), guard_free(&gz);
}

static void test_simd_vs_base_guard_page(void **state) {
  size_t nt;
  const gcomp_lowbit_kernels *const *T = gcomp_lowbit_tables(&nt);
  for (size_t t = 0; t < nt; t++)
    for (size_t n = 0; n <= 300; n += n < 70 ? 1 : 13) {
      guarded gx, gd;
      float *x = guard_alloc(&gx, 4 * n), *d = guard_alloc(&gd, 4 * n);
      fill(x, n);
      float mn, mx, sum;
      size_t nnz;
      if (n) T[t]->minmax(x, n, &mn, &mx);
      T[t]->sscan(x, n, &sum, &nnz);
      guard_codes(T[t], x, n, d);
      guard_free(&gx), guard_free(&gd);
    }
}

static void test_simd_vs_base_large(void **state) {
  enum { N = 1 << 16 };
  size_t nt;
  const gcomp_lowbit_kernels *const *T = simd(&nt);
  float *x = malloc(N * 4 + 64), *d0 = malloc(N * 4), *d1 = malloc(N * 4);
  uint8_t *c0 = malloc(2 * N), *c1 = malloc(2 * N);
  fill(x, N + 16);
  for (size_t t = 0; t < nt; t++) diff_one(T[t], x + 5, N - 11, c0, c1 + 1, d0, d1, "large");
  free(x), free(d0), free(d1), free(c0), free(c1);
}

/* A bucket with NaN or Inf is flagged by both scans, wherever it sits. */
/* GCOMP_LB_STREAM at each alignment class of the output (32-byte and 16-byte aligned: the
 * two widths of sdec's streaming stores; 4-byte: plain stores): the values a store gives,
 * bit for bit, and not a byte written before or after the output. */
static void test_stream_mode_stores(void **state) {
  enum { MAXN = 1100, PAD = 64 };
  size_t nt;
  const gcomp_lowbit_kernels *const *T = gcomp_lowbit_tables(&nt);
  float *x = malloc(MAXN * 4), *want = malloc(MAXN * 4);
  uint8_t *c = malloc(2 * MAXN + 16), *mem = NULL;
  assert_int_equal(posix_memalign((void **)&mem, 64, MAXN * 4 + 2 * PAD * 4), 0);
  assert_non_null(x), assert_non_null(want), assert_non_null(c);
  const size_t ns[] = {0, 1, 7, 8, 9, 15, 16, 17, 100, 512, 1031, MAXN};
  const size_t shifts[] = {0, 4, 8, 1, 3};   /* floats past a 64-byte boundary */
  for (size_t t = 0; t < nt; t++)
    for (size_t i = 0; i < sizeof ns / sizeof *ns; i++)
      for (size_t a = 0; a < sizeof shifts / sizeof *shifts; a++) {
        size_t n = ns[i];
        float *d = (float *)(void *)mem + PAD + shifts[a];
        fill(x, n);
        for (unsigned bits = 1; bits <= 8; bits++) {
          float top = (float)((1u << bits) - 1), mn = -0.6f, inv = top / 1.2f, step = 1.2f / top;
          gcomp_lowbit_base.qenc(x, n, bits, mn, inv, c);
          gcomp_lowbit_base.qdec(c, n, bits, mn, step, want, GCOMP_LB_STORE);
          memset(mem, 0x7b, MAXN * 4 + 2 * PAD * 4);
          T[t]->qdec(c, n, bits, mn, step, d, GCOMP_LB_STREAM);
          if (!same_bits(d, want, n))
            fail_msg("%s qdec stream bits=%u n=%zu shift=%zu", T[t]->name, bits, n, shifts[a]);
          for (size_t b = 0; b < MAXN * 4 + 2 * PAD * 4; b++)
            if ((b < (PAD + shifts[a]) * 4 || b >= (PAD + shifts[a] + n) * 4) && mem[b] != 0x7b)
              fail_msg("%s qdec stream wrote byte %zu outside the output", T[t]->name, b);
        }
        size_t nb = (n + 7) / 8;
        gcomp_lowbit_base.senc(x, n, c, c + nb);
        for (int z = 0; z < 2; z++) {
          gcomp_lowbit_base.sdec(c, z ? c + nb : NULL, n, 0.375f, want, GCOMP_LB_STORE);
          memset(mem, 0x7b, MAXN * 4 + 2 * PAD * 4);
          T[t]->sdec(c, z ? c + nb : NULL, n, 0.375f, d, GCOMP_LB_STREAM);
          if (!same_bits(d, want, n))
            fail_msg("%s sdec stream z=%d n=%zu shift=%zu", T[t]->name, z, n, shifts[a]);
          for (size_t b = 0; b < MAXN * 4 + 2 * PAD * 4; b++)
            if ((b < (PAD + shifts[a]) * 4 || b >= (PAD + shifts[a] + n) * 4) && mem[b] != 0x7b)
              fail_msg("%s sdec stream wrote byte %zu outside the output", T[t]->name, b);
        }
      }
  free(x), free(want), free(c), free(mem);
}

static void test_nonfinite_flagged(void **state) {
  size_t nt;
  const gcomp_lowbit_kernels *const *T = gcomp_lowbit_tables(&nt);
  const uint32_t bad[] = {0x7f800000u, 0xff800000u, 0x7fc00000u, 0x7f800001u, 0xffffffffu};
  float x[100];
  for (size_t t = 0; t < nt; t++)
    for (size_t n = 1; n <= 100; n += 9)
      for (size_t at = 0; at < n; at += 1 + n / 5)
        for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
          fill(x, n);
          uint32_t w = bad[k];
          memcpy(&x[at], &w, 4);
          float a, b;
          size_t z;
          assert_true(T[t]->minmax(x, n, &a, &b) != 0);
          assert_true(T[t]->sscan(x, n, &a, &z) != 0);
        }
}

/* ---- base against the rules, spelled out again ------------------------------------------ */
static uint32_t bit_at(const uint8_t *p, size_t bit) { return p[bit / 8] >> (bit % 8) & 1u; }

static void test_base_follows_the_rules(void **state) {
  enum { N = 777 };
  float x[N], d[N];
  uint8_t c[N];
  fill(x, N);
  for (size_t i = 0; i < N; i++)   /* within the grid [mn, mn + 1.2] used below */
    x[i] = x[i] < -0.6f ? -0.6f : x[i] > 0.6f ? 0.6f : x[i];
  const gcomp_lowbit_kernels *B = &gcomp_lowbit_base;
  for (unsigned bits = 1; bits <= 8; bits++) {
    uint32_t top = (1u << bits) - 1;
    float mn = -0.6f, inv = (float)top / 1.2f, step = 1.2f / (float)top;
    B->qenc(x, N, bits, mn, inv, c);
    for (size_t j = 0; j < N; j++) {
      /* the code, LSB first at bit bits*j */
      uint32_t got = 0;
      for (unsigned b = 0; b < bits; b++) got |= bit_at(c, bits * j + b) << b;
      double t = ((double)x[j] - mn) * inv;   /* no double rounding at these magnitudes */
      float tf = (x[j] - mn) * inv;
      double want = nearbyint((double)tf);    /* round half even in the default mode */
      want = want > top ? top : want < 0 ? 0 : want;
      if (got != (uint32_t)want)
        fail_msg("bits=%u j=%zu: code %u, rule %g (t=%g)", bits, j, got, want, t);
      /* and the shuffle tables unpack it */
      size_t g = j / 8, lane = j % 8;
      uint32_t w = c[g * bits + gcomp_lb_shuf[bits][lane < 4 ? 4 * lane : 16 + 4 * (lane - 4)]];
      uint8_t second = gcomp_lb_shuf[bits][(lane < 4 ? 4 * lane : 16 + 4 * (lane - 4)) + 1];
      if (second != 0x80) w |= (uint32_t)c[g * bits + second] << 8;
      if (((w >> gcomp_lb_shift(bits, (unsigned)lane)) & top) != got)
        fail_msg("shuffle table bits=%u lane %zu", bits, lane);
    }
    B->qdec(c, N, bits, mn, step, d, GCOMP_LB_STORE);
    for (size_t j = 0; j < N; j++) {
      float want = mn + (float)gcomp_lb_unpack(c, j, bits) * step;
      assert_true(gcomp_f2u(d[j]) == gcomp_f2u(want));
    }
  }
  /* the sum: sixteen running sums by index mod 16, then the fixed tree */
  float acc[16] = {0}, sum;
  size_t nnz = 0, want_nnz = 0;
  for (size_t i = 0; i < N; i++) acc[i % 16] += fabsf(x[i]), want_nnz += x[i] != 0;
  float s8[8], s4[4];
  for (int j = 0; j < 8; j++) s8[j] = acc[j] + acc[j + 8];
  for (int j = 0; j < 4; j++) s4[j] = s8[j] + s8[j + 4];
  assert_int_equal(B->sscan(x, N, &sum, &nnz), 0);
  assert_true(gcomp_f2u(sum) == gcomp_f2u((s4[0] + s4[2]) + (s4[1] + s4[3])));
  assert_int_equal(nnz, want_nnz);
  /* sign bits and zero bits, LSB first; decoded +-s and exactly +0 */
  B->senc(x, N, c, c + (N + 7) / 8);
  B->sdec(c, c + (N + 7) / 8, N, 0.5f, d, GCOMP_LB_STORE);
  for (size_t j = 0; j < N; j++) {
    assert_int_equal(bit_at(c, j), x[j] < 0);
    assert_int_equal(bit_at(c + (N + 7) / 8, j), x[j] == 0);
    float want = x[j] == 0 ? 0.0f : x[j] < 0 ? -0.5f : 0.5f;
    assert_true(gcomp_f2u(d[j]) == gcomp_f2u(want));
  }
}

/* Stochastic codes: the mean code over many keys is t within a statistical bound (and the
 * nearest code, on the same values, is off by far more): the kernels are unbiased. */
static void test_stochastic_codes_unbiased(void **state) {
  enum { N = 64, KEYS = 4000 };
  size_t nt;
  const gcomp_lowbit_kernels *const *T = gcomp_lowbit_tables(&nt);
  float x[N];
  for (size_t i = 0; i < N; i++) x[i] = (float)i / (N - 1) * 0.9f + 0.03f;   /* in [0, 1) */
  for (size_t t = 0; t < nt; t++)
    for (unsigned bits = 1; bits <= 8; bits += 3) {
      uint32_t top = (1u << bits) - 1;
      float inv = (float)top;   /* mn 0, range 1 */
      double sum[N] = {0};
      uint8_t c[N];
      for (uint64_t k = 0; k < KEYS; k++) {
        T[t]->qenc_sr(x, N, bits, 0.0f, inv, gcomp_cast_mix64(k), 0, c);
        for (size_t j = 0; j < N; j++) sum[j] += gcomp_lb_unpack(c, j, bits);
      }
      for (size_t j = 0; j < N; j++) {
        double tj = (double)(x[j] * inv), p = tj - floor(tj);
        double sd = sqrt(p * (1 - p) / KEYS) + 1e-9;
        double mean = sum[j] / KEYS;
        if (fabs(mean - tj) > 5 * sd + 1e-6)
          fail_msg("%s bits=%u j=%zu: mean code %g, t=%g (5 sd = %g)", T[t]->name, bits, j, mean,
                   tj, 5 * sd);
      }
    }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_simd_vs_base_lengths),
      cmocka_unit_test(test_simd_vs_base_guard_page),
      cmocka_unit_test(test_simd_vs_base_large),
      cmocka_unit_test(test_stream_mode_stores),
      cmocka_unit_test(test_nonfinite_flagged),
      cmocka_unit_test(test_base_follows_the_rules),
      cmocka_unit_test(test_stochastic_codes_unbiased),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
