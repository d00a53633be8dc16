/* The fp16/bf16 cast kernels: each SIMD table against cast_base.c (lengths 0..257 and
 * large, misaligned pointers, buffers that end at a guard page), both against the
 * independent IEEE reference in test_cast_ref.h (sampled here; every pattern in
 * tests/long), all 65,536 patterns of each format decoded, and stochastic rounding's
 * bias measured against a statistical bound. */
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

#if defined(__x86_64__)
#include <xmmintrin.h>
#endif

#include "cast.h"
#include "frame.h"
#include "gcomp_common.h"
#include "test_cast_ref.h"
#include "test_util.h"
#include "test_hooks.h"

/* ---- helpers ------------------------------------------------------------------------- */
static uint64_t rng_state = 0x243f6a8885a308d3ull;
static uint32_t rnd32(void) {
  rng_state ^= rng_state << 13, rng_state ^= rng_state >> 7, rng_state ^= rng_state << 17;
  return (uint32_t)(rng_state >> 16);
}

/* A mix of everything the encoders must get right: random bit patterns (NaN payloads,
 * subnormals, huge values), gradient-like values, ties and thresholds of both formats. */
static uint32_t interesting(void) {
  static const uint32_t edges[] = {
      0x00000000, 0x80000000, 0x7f800000, 0xff800000, 0x7fc00000, 0x7f800001, 0xffbfffff,
      0x477fe000, 0x477fefff, 0x477ff000, 0x477ff001, 0x477fffff, 0x47800000, /* 65504.. */
      0x38800000, 0x387fffff, 0x387ff000, 0x38000000, 0x33000000, 0x33000001, 0x33800000,
      0x32ffffff, 0x3f801000, 0x3f803000, 0x3f800fff, 0x3f808000, 0x3f818000, 0x3f7fffff,
      0x7f7f8000, 0x7f7f7fff, 0x7f7fffff, 0x00008000, 0x00008001, 0x00018000, 0x00000001,
      0x007fffff, 0x00800000, 0x3f80c000, 0x3f814000};
  uint32_t r = rnd32();
  switch (r & 7) {
  case 0: case 1: return rnd32();
  case 2: return edges[rnd32() % (sizeof edges / sizeof *edges)] ^ (rnd32() & 0x80000000u);
  case 3: return edges[rnd32() % (sizeof edges / sizeof *edges)] + (rnd32() % 5) - 2;
  default: {
    float g = ((float)(int32_t)rnd32() / 2147483648.0f) * 1e-3f;
    return ref_f2u(g * ((r & 8) ? 1.0f : 4096.0f));
  }
  }
}

static void fill(float *p, size_t n) {
  for (size_t i = 0; i < n; i++) p[i] = ref_u2f(interesting());
}

/* The SIMD tables this CPU runs (every table but the portable one), each said once. */
static const gcomp_cast_kernels *const *simd_tables(size_t *n) {
  size_t all;
  const gcomp_cast_kernels *const *t = gcomp_cast_tables(&all);
  static int said;
  if (!said++) {
    if (all < 2) print_message("no AVX2+F16C on this CPU: SIMD kernels not tested\n");
    else if (!(gcomp_cpu_detect() & GCOMP_CPU_VPCLMUL))
      print_message("no VPCLMULQDQ on this CPU: the ymm and zmm block sums are not tested\n");
    else if (gcomp_isa_best_level(gcomp_cpu_detect()) < GCOMP_ISA_AVX512)
      print_message("no AVX-512 F/BW/VL on this CPU: the avx512 kernels are not tested\n");
    else if (!(gcomp_cpu_detect() & GCOMP_CPU_AVX512BF16))
      print_message("no AVX512_BF16 on this CPU: the avx512bf16 kernels are not tested\n");
  }
  *n = all - 1;
  return t + 1;
}
#define FOR_SIMD(K)                                                                         \
  size_t nsimd_;                                                                            \
  const gcomp_cast_kernels *const *simd_ = simd_tables(&nsimd_);                            \
  for (const gcomp_cast_kernels *K; nsimd_ && (K = *simd_, 1); simd_++, nsimd_--)

static int same_counts(const gcomp_cast_counts *a, const gcomp_cast_counts *b) {
  return a->nonfinite == b->nonfinite && a->overflow == b->overflow && a->underflow == b->underflow;
}

/* decode_add may pick either NaN operand's payload when both are NaN: equal, or both NaN */
static int same_float(float a, float b) {
  return ref_f2u(a) == ref_f2u(b) || (isnan(a) && isnan(b));
}

static const float scales[] = {1.0f, 0x1p14f, 0x1p-3f, 0x1p127f, 0x1p-113f, 0x1p40f};
enum { NSCALES = sizeof scales / sizeof *scales };

/* The block-summing decode-and-add kernels (n a multiple of 32): the sums of the plain
 * ones, and the CRC-32C of the 2n bytes at next as ISA-L computes it. */
static void diff_dec_add_sums(const gcomp_cast_kernels *K, const uint8_t *p, size_t n,
                              const uint8_t *next, float *f0, float *f1, float inv,
                              const char *where) {
  const gcomp_cast_kernels *B = &gcomp_cast_base;
  uint32_t want = ~gcomp_crc32c(0xffffffffu, next, 2 * n);
  for (int f16 = 0; f16 < 2; f16++) {
    for (size_t i = 0; i < n; i++) f0[i] = f1[i] = (float)(int32_t)rnd32() * 1e-12f;
    for (int t = 0; t < 2; t++) {   /* the portable table's, then K's, each on the last sums */
      const gcomp_cast_kernels *T = t ? K : B;
      uint32_t s;
      if (f16) {
        B->f16_dec_add(p, n, f0, inv);
        s = T->f16_dec_add_sum(p, n, f1, inv, next);
      } else {
        B->bf16_dec_add(p, n, f0);
        s = T->bf16_dec_add_sum(p, n, f1, next);
      }
      if (s != want)
        fail_msg("%s: %s %s_dec_add_sum n=%zu: CRC %08x, want %08x", where, T->name,
                 f16 ? "f16" : "bf16", n, s, want);
      for (size_t i = 0; i < n; i++)
        if (!same_float(f0[i], f1[i]))
          fail_msg("%s: %s %s_dec_add_sum n=%zu at %zu", where, T->name, f16 ? "f16" : "bf16",
                   n, i);
    }
  }
}

/* The block-summing encoders (n a multiple of 32): the same bytes and counters as the
 * plain ones, and the CRC-32C of those bytes as ISA-L computes it (the portable table's
 * sums are ISA-L's), with and without streaming stores. Then the block-summing
 * decode-and-add kernels, nfull >= n values at src and in the outputs: the last 2n bytes of
 * o1 added to the accumulators' last n values while the last 2n bytes of src are summed, so
 * that every read and write ends where the buffers do (at a guard page when they end at
 * one). */
static void diff_sums(const gcomp_cast_kernels *K, const float *src, size_t nfull, uint8_t *o0,
                      uint8_t *o1, float *f0, float *f1, const char *where) {
  const gcomp_cast_kernels *B = &gcomp_cast_base;
  size_t n = nfull & ~(size_t)31;
  const uint8_t *next = (const uint8_t *)src + 4 * nfull - 2 * n;
  for (int s = 0; s < NSCALES; s++) {
    for (int nt = 0; nt < 2; nt++) {
      gcomp_cast_counts c0 = {0, 0, 0}, c1 = {0, 0, 0};
      uint32_t m0, m1;
      uint32_t s0 = B->f16_enc_sum(src, n, o0, scales[s], &c0, &m0, nt);
      uint32_t s1 = K->f16_enc_sum(src, n, o1, scales[s], &c1, &m1, nt);
      if (memcmp(o0, o1, 2 * n) || !same_counts(&c0, &c1) || m0 != m1 || s0 != s1 ||
          s0 != ~gcomp_crc32c(0xffffffffu, o1, 2 * n))
        fail_msg("%s: %s f16_enc_sum scale=%g n=%zu stream=%d", where, K->name,
                 (double)scales[s], n, nt);
    }
  }
  /* over the last fp16 payload (scale 2^40), decoded with a scale that depends on n */
  diff_dec_add_sums(K, o1 + 2 * (nfull - n), n, next, f0 + (nfull - n), f1 + (nfull - n),
                    1.0f / scales[nfull % NSCALES], where);
  for (int nt = 0; nt < 2; nt++) {
    gcomp_cast_counts c0 = {0, 0, 0}, c1 = {0, 0, 0};
    uint32_t s0 = B->bf16_enc_sum(src, n, o0, &c0, nt), s1 = K->bf16_enc_sum(src, n, o1, &c1, nt);
    if (memcmp(o0, o1, 2 * n) || !same_counts(&c0, &c1) || s0 != s1 ||
        s0 != ~gcomp_crc32c(0xffffffffu, o1, 2 * n))
      fail_msg("%s: %s bf16_enc_sum n=%zu stream=%d", where, K->name, n, nt);
  }
}

/* Runs every kernel of K and of base on src[0..n) (src, out0 and out1 as given) and
 * compares outputs and counters. */
static void diff_all(const gcomp_cast_kernels *K, const float *src, size_t n, uint8_t *o0,
                     uint8_t *o1, float *f0, float *f1, const char *where) {
  const gcomp_cast_kernels *B = &gcomp_cast_base;
  if (K->maxabs(src, n) != B->maxabs(src, n)) fail_msg("%s: maxabs n=%zu", where, n);
  for (int s = 0; s < NSCALES; s++) {
    gcomp_cast_counts c0 = {0, 0, 0}, c1 = {0, 0, 0};
    uint32_t m0 = B->f16_enc(src, n, o0, scales[s], &c0);
    uint32_t m1 = K->f16_enc(src, n, o1, scales[s], &c1);
    if (memcmp(o0, o1, 2 * n) || !same_counts(&c0, &c1) || m0 != m1 || m0 != B->maxabs(src, n))
      fail_msg("%s: f16_enc scale=%g n=%zu", where, (double)scales[s], n);
    uint64_t key = 0x9e3779b97f4a7c15ull * (uint64_t)(s + 1);
    uint32_t i0 = s == 2 ? UINT32_MAX - (uint32_t)n : (uint32_t)s * 1000u;
    memset(&c0, 0, sizeof c0), memset(&c1, 0, sizeof c1);
    B->f16_enc_sr(src, n, o0, scales[s], key, i0, &c0);
    K->f16_enc_sr(src, n, o1, scales[s], key, i0, &c1);
    if (memcmp(o0, o1, 2 * n) || !same_counts(&c0, &c1))
      fail_msg("%s: f16_enc_sr scale=%g n=%zu", where, (double)scales[s], n);
    /* decoders over the payload just made (NaN, Inf, subnormals included) */
    float inv = 1.0f / scales[s];
    B->f16_dec(o0, n, f0, inv);
    K->f16_dec(o0, n, f1, inv);
    if (memcmp(f0, f1, 4 * n)) fail_msg("%s: f16_dec inv=%g n=%zu", where, (double)inv, n);
    for (int nt = 0; nt < 2; nt++) {   /* streaming stores asked for, or not, at any n */
      K->f16_dec_nt(o0, n, f1, inv, nt);
      if (memcmp(f0, f1, 4 * n)) fail_msg("%s: f16_dec_nt(%d) n=%zu", where, nt, n);
    }
    for (size_t i = 0; i < n; i++) f0[i] = f1[i] = (float)(int32_t)rnd32() * 1e-12f;
    B->f16_dec_add(o0, n, f0, inv);
    K->f16_dec_add(o0, n, f1, inv);
    for (size_t i = 0; i < n; i++)
      if (!same_float(f0[i], f1[i])) fail_msg("%s: f16_dec_add n=%zu at %zu", where, n, i);
  }
  if (n >= 32) diff_sums(K, src, n, o0, o1, f0, f1, where);
  gcomp_cast_counts c0 = {0, 0, 0}, c1 = {0, 0, 0};
  B->bf16_enc(src, n, o0, &c0);
  K->bf16_enc(src, n, o1, &c1);
  if (memcmp(o0, o1, 2 * n) || !same_counts(&c0, &c1)) fail_msg("%s: bf16_enc n=%zu", where, n);
  memset(&c0, 0, sizeof c0), memset(&c1, 0, sizeof c1);
  B->bf16_enc_sr(src, n, o0, 12345, 77, &c0);
  K->bf16_enc_sr(src, n, o1, 12345, 77, &c1);
  if (memcmp(o0, o1, 2 * n) || !same_counts(&c0, &c1)) fail_msg("%s: bf16_enc_sr n=%zu", where, n);
  B->bf16_dec(o0, n, f0);
  K->bf16_dec(o0, n, f1);
  if (memcmp(f0, f1, 4 * n)) fail_msg("%s: bf16_dec n=%zu", where, n);
  for (int nt = 0; nt < 2; nt++) {
    K->bf16_dec_nt(o0, n, f1, nt);
    if (memcmp(f0, f1, 4 * n)) fail_msg("%s: bf16_dec_nt(%d) n=%zu", where, nt, n);
  }
  for (size_t i = 0; i < n; i++) f0[i] = f1[i] = (float)(int32_t)rnd32() * 1e-12f;
  B->bf16_dec_add(o0, n, f0);
  K->bf16_dec_add(o0, n, f1);
  for (size_t i = 0; i < n; i++)
    if (!same_float(f0[i], f1[i])) fail_msg("%s: bf16_dec_add n=%zu at %zu", where, n, i);
}

/* ---- SIMD vs base ---------------------------------------------------------------------- */
static void lengths_and_alignment(const gcomp_cast_kernels *K) {
  enum { MAXN = 257, PAD = 8 };
  float *src = malloc((MAXN + PAD) * sizeof *src), *f0 = malloc((MAXN + PAD) * 4),
        *f1 = malloc((MAXN + PAD) * 4);
  uint8_t *o0 = malloc(2 * MAXN + 2 * PAD), *o1 = malloc(2 * MAXN + 2 * PAD);
  for (size_t n = 0; n <= MAXN; n++) {
    /* float pointers shifted by 0..7 elements (never 32-byte aligned for most), payload
     * pointers by 0..3 bytes (odd addresses included) */
    size_t fa = n % 8, ba = n % 4;
    fill(src + fa, n);
    diff_all(K, src + fa, n, o0 + ba, o1 + (3 - ba), f0 + fa, f1 + (7 - fa), "lengths");
  }
  free(src), free(f0), free(f1), free(o0), free(o1);
}
static void test_simd_vs_base_lengths_and_alignment(void **state) {
  FOR_SIMD(K) lengths_and_alignment(K);
}

static void guard_page(const gcomp_cast_kernels *K) {
  for (size_t n = 0; n <= 257; n += (n < 40 ? 1 : 7)) {
    guarded gs, g0, g1, gf0, gf1;
    float *src = guard_alloc(&gs, 4 * n);
    uint8_t *o0 = guard_alloc(&g0, 2 * n + (n & 1)), *o1 = guard_alloc(&g1, 2 * n);
    float *f0 = guard_alloc(&gf0, 4 * n), *f1 = guard_alloc(&gf1, 4 * n);
    fill(src, n);
    diff_all(K, src, n, o0 + (n & 1), o1, f0, f1, "guard page");
    guard_free(&gs), guard_free(&g0), guard_free(&g1), guard_free(&gf0), guard_free(&gf1);
  }
}
static void test_simd_vs_base_guard_page(void **state) { FOR_SIMD(K) guard_page(K); }

/* Large enough for the streaming-store paths (GCOMP_CAST_STREAM_BYTES), with a head that
 * has to be peeled to align them and an odd tail. */
static void large(const gcomp_cast_kernels *K) {
  size_t n = GCOMP_CAST_STREAM_BYTES / 2 + 1001;
  float *src = malloc((n + 8) * 4), *f0 = malloc((n + 8) * 4), *f1 = malloc((n + 8) * 4);
  uint8_t *o0 = malloc(2 * n + 64), *o1 = malloc(2 * n + 64);
  fill(src, n + 8);
  diff_all(K, src + 3, n, o0 + 6, o1 + 6, f0 + 5, f1 + 5, "large, aligned head");
  diff_all(K, src + 1, n - 5, o0 + 1, o1 + 1, f0 + 1, f1 + 1, "large, odd payload");
  free(src), free(f0), free(f1), free(o0), free(o1);
}
static void test_simd_vs_base_large(void **state) { FOR_SIMD(K) large(K); }

/* Gradient-like values (normal magnitudes, zeros of both signs) with a special value (from
 * interesting(): subnormals, values that round to Inf, Inf, NaN) about once in 700, so that
 * most 32-value groups hold none (the kernels' fast paths, e.g. avx512bf16's
 * vcvtne2ps2bf16) and some hold one (their fallbacks); outputs at each 16-byte alignment
 * within a cache line and at an odd address, for the streaming-store modes. */
static void sparse_specials(const gcomp_cast_kernels *K) {
  enum { N = 3 * 32768 + 77 };
  float *src = malloc(N * 4), *f0 = malloc(N * 4), *f1 = malloc(N * 4);
  size_t ob = (2 * N + 128 + 63) / 64 * 64;   /* aligned_alloc: a multiple of the alignment */
  uint8_t *o0 = aligned_alloc(64, ob), *o1 = aligned_alloc(64, ob);
  for (size_t i = 0; i < N; i++) {
    uint32_t r = rnd32();
    if (r % 700 == 0) src[i] = ref_u2f(interesting());
    else if (r % 97 == 0) src[i] = ref_u2f(r & 0x80000000u);   /* +-0 */
    else src[i] = ref_u2f((r & 0x80000000u) | (0x30000000u + (rnd32() % 0x0f000000u)));
  }
  static const size_t offs[] = {0, 16, 32, 48, 1};
  for (size_t k = 0; k < sizeof offs / sizeof *offs; k++) {
    diff_all(K, src, N, o0 + offs[k], o1 + offs[k], f0, f1, "sparse specials");
    /* whole blocks as the frame encoder runs them, streaming */
    gcomp_cast_counts c0 = {0, 0, 0}, c1 = {0, 0, 0};
    for (size_t i = 0; i + 32768 <= N; i += 32768) {
      uint32_t s0 = gcomp_cast_base.bf16_enc_sum(src + i, 32768, o0 + offs[k] + 2 * i, &c0, 1);
      uint32_t s1 = K->bf16_enc_sum(src + i, 32768, o1 + offs[k] + 2 * i, &c1, 1);
      if (s0 != s1) fail_msg("%s: bf16_enc_sum block at %zu, offset %zu", K->name, i, offs[k]);
    }
    if (memcmp(o0 + offs[k], o1 + offs[k], 2 * (N / 32768 * 32768)) || !same_counts(&c0, &c1))
      fail_msg("%s: bf16_enc_sum blocks, offset %zu", K->name, offs[k]);
  }
  free(src), free(f0), free(f1), free(o0), free(o1);
}
static void test_simd_vs_base_sparse_specials(void **state) { FOR_SIMD(K) sparse_specials(K); }

/* ---- against the IEEE reference ------------------------------------------------------- */
static void check_against_reference(const gcomp_cast_kernels *K) {
  enum { N = 1 << 18 };
  float *src = malloc(N * 4);
  uint8_t *out = malloc(2 * N);
  fill(src, N);
  for (int s = 0; s < NSCALES; s++) {
    gcomp_cast_counts c = {0, 0, 0};
    K->f16_enc(src, N, out, scales[s], &c);
    int k = ilogbf(scales[s]);
    uint64_t nf = 0, ov = 0, uf = 0;
    for (size_t i = 0; i < N; i++) {
      uint32_t w = ref_f2u(src[i]);
      uint16_t want = ref_f16(w, k), got = (uint16_t)(out[2 * i] | out[2 * i + 1] << 8);
      if (want != got)
        fail_msg("%s f16 scale 2^%d: %08x -> %04x, reference %04x", K->name, k, w, got, want);
      nf += isnan(src[i]) || isinf(src[i]);
      ov += isfinite(src[i]) && (want & 0x7fff) == 0x7c00;
      uf += src[i] != 0 && (want & 0x7fff) == 0;
    }
    assert_int_equal(c.nonfinite, nf);
    assert_int_equal(c.overflow, ov);
    assert_int_equal(c.underflow, uf);
  }
  gcomp_cast_counts c = {0, 0, 0};
  K->bf16_enc(src, N, out, &c);
  uint64_t nf = 0, ov = 0, uf = 0;
  for (size_t i = 0; i < N; i++) {
    uint32_t w = ref_f2u(src[i]);
    uint16_t want = ref_bf16(w), got = (uint16_t)(out[2 * i] | out[2 * i + 1] << 8);
    if (want != got) fail_msg("%s bf16: %08x -> %04x, reference %04x", K->name, w, got, want);
    nf += isnan(src[i]) || isinf(src[i]);
    ov += isfinite(src[i]) && (want & 0x7fff) == 0x7f80;
    uf += src[i] != 0 && (want & 0x7fff) == 0;
  }
  assert_int_equal(c.nonfinite, nf);
  assert_int_equal(c.overflow, ov);
  assert_int_equal(c.underflow, uf);
  free(src), free(out);
}

static void test_encoders_match_ieee_reference(void **state) {
  check_against_reference(&gcomp_cast_base);
  FOR_SIMD(K) check_against_reference(K);
}

/* All 65,536 patterns of each format, decoded and decoded-and-added, every kernel. */
static void decode_all(const gcomp_cast_kernels *K, int with_scale) {
  uint8_t *p = malloc(2 * 65536);
  float *out = malloc(65536 * 4);
  for (uint32_t h = 0; h < 65536; h++) p[2 * h] = (uint8_t)h, p[2 * h + 1] = (uint8_t)(h >> 8);
  for (int fmt = 0; fmt < 2; fmt++) {
    if (fmt == 0) K->f16_dec(p, 65536, out, 1.0f);
    else K->bf16_dec(p, 65536, out);
    for (uint32_t h = 0; h < 65536; h++) {
      uint32_t want = fmt == 0 ? ref_f16_to_f32((uint16_t)h) : ref_bf16_to_f32((uint16_t)h);
      if (ref_f2u(out[h]) != want)
        fail_msg("%s %s decode %04x -> %08x, reference %08x", K->name, fmt ? "bf16" : "fp16", h,
                 ref_f2u(out[h]), want);
    }
    for (uint32_t h = 0; h < 65536; h++) out[h] = 1.5f;
    if (fmt == 0) K->f16_dec_add(p, 65536, out, 1.0f);
    else K->bf16_dec_add(p, 65536, out);
    for (uint32_t h = 0; h < 65536; h++) {
      float want = 1.5f + ref_u2f(fmt == 0 ? ref_f16_to_f32((uint16_t)h) : ref_bf16_to_f32((uint16_t)h));
      if (!same_float(out[h], want))
        fail_msg("%s %s decode_add %04x -> %a, expected %a", K->name, fmt ? "bf16" : "fp16", h,
                 (double)out[h], (double)want);
    }
  }
  /* a power-of-two inverse scale multiplies exactly: fp16 2^-k decoded with inv = 2^-20 */
  if (with_scale) K->f16_dec(p, 65536, out, 0x1p-20f);
  for (uint32_t h = 0; with_scale && h < 0x7c00; h++) {
    float want = ldexpf(ref_u2f(ref_f16_to_f32((uint16_t)h)), -20);
    if (ref_f2u(out[h]) != ref_f2u(want)) fail_msg("%s fp16 decode %04x * 2^-20", K->name, h);
  }
  free(p), free(out);
}

static void test_decode_all_patterns(void **state) {
  decode_all(&gcomp_cast_base, 1);
  FOR_SIMD(K) decode_all(K, 1);
}

/* A thread that flushes denormals (MXCSR DAZ+FTZ, as torch.set_flush_denormal(True) sets)
 * still decodes every fp16 exactly: fp16 subnormals are normal fp32 numbers, and the
 * portable kernel once built them through an fp32 denormal, which DAZ read as 0. (The
 * scaled part of decode_all is left out: its products can be fp32 denormals, which FTZ
 * flushes in every kernel alike.) */
static void test_decode_under_daz(void **state) {
#if defined(__x86_64__)
  unsigned csr = _mm_getcsr();
  _mm_setcsr(csr | 0x8040u);   /* FTZ (bit 15) and DAZ (bit 6) */
  decode_all(&gcomp_cast_base, 0);
  FOR_SIMD(K) decode_all(K, 0);
  _mm_setcsr(csr);
#else
  skip();
#endif
}

/* ---- stochastic rounding --------------------------------------------------------------- */
static double f16_value(const uint8_t *p) {
  return ref_u2f(ref_f16_to_f32((uint16_t)(p[0] | p[1] << 8)));
}
static double bf16_value(const uint8_t *p) {
  return ref_u2f(ref_bf16_to_f32((uint16_t)(p[0] | p[1] << 8)));
}

/* Neighbours of |x| in the format: dn <= |x| <= up, found with the reference's RNE of
 * values nudged down and up. */
static void neighbours(int fp16, float x, double *dn, double *up) {
  double v = fabs((double)x);
  uint16_t r = fp16 ? ref_f16(ref_f2u(fabsf(x)), 0) : ref_bf16(ref_f2u(fabsf(x)));
  double rv = fp16 ? ref_u2f(ref_f16_to_f32(r)) : ref_u2f(ref_bf16_to_f32(r));
  uint16_t other = rv > v ? (uint16_t)(r - 1) : rv < v ? (uint16_t)(r + 1) : r;
  double ov = fp16 ? ref_u2f(ref_f16_to_f32(other)) : ref_u2f(ref_bf16_to_f32(other));
  *dn = fmin(rv, ov), *up = fmax(rv, ov);
}

/* N copies of x, rounded stochastically: every result is one of the two neighbours, and
 * the mean error is within 5 standard deviations of zero (for these x, round to nearest
 * is off by >= 1/8 of the quantum, hundreds of standard deviations: the bound bites). */
static void sr_unbiased(const gcomp_cast_kernels *K, int fp16, float x) {
  enum { N = 1 << 18 };
  float *src = malloc(N * 4);
  uint8_t *out = malloc(2 * N);
  for (size_t i = 0; i < N; i++) src[i] = x;
  gcomp_cast_counts c = {0, 0, 0};
  if (fp16) K->f16_enc_sr(src, N, out, 1.0f, 0xfeedull, 0, &c);
  else K->bf16_enc_sr(src, N, out, 0xfeedull, 0, &c);
  double dn, up, sum = 0;
  neighbours(fp16, x, &dn, &up);
  double v = fabs((double)x), p = (v - dn) / (up - dn);
  for (size_t i = 0; i < N; i++) {
    double y = fp16 ? f16_value(out + 2 * i) : bf16_value(out + 2 * i);
    if (!!signbit(y) != !!signbit(x) && y != 0) fail_msg("sign lost");
    y = fabs(y);
    if (y != dn && y != up) fail_msg("%s: %a became %a, not %a or %a", K->name, (double)x, y, dn, up);
    sum += y - v;
  }
  double mean = sum / N, sigma = (up - dn) * sqrt(p * (1 - p) / N);
  if (fabs(mean) > 5 * sigma + 1e-3 * (up - dn) / N)
    fail_msg("%s %s x=%a: mean error %g, bound %g (p=%g)", K->name, fp16 ? "fp16" : "bf16",
             (double)x, mean, 5 * sigma, p);
  free(src), free(out);
}

static void sr_checks(const gcomp_cast_kernels *K) {
  sr_unbiased(K, 1, 1.0f + 0x1p-12f);          /* fp16 normal, p = 1/4 */
  sr_unbiased(K, 1, -1000.3f);                 /* negative */
  sr_unbiased(K, 1, 3.3f * 0x1p-24f);          /* fp16 subnormal result */
  sr_unbiased(K, 1, 0x1.8p-30f);               /* far below the smallest subnormal */
  sr_unbiased(K, 1, 0x1.fffp-15f);             /* just below the normal range */
  sr_unbiased(K, 0, 1.0f + 0x1p-10f);          /* bf16, p = 1/8 */
  sr_unbiased(K, 0, -3.0e-3f);
  sr_unbiased(K, 0, ref_u2f(0x00012345));      /* fp32 subnormal */
}

static void test_stochastic_unbiased(void **state) {
  sr_checks(&gcomp_cast_base);
  FOR_SIMD(K) sr_checks(K);
}

/* Gradient-like values: the mean signed error over the frame is within 5 sigma of zero,
 * sigma from each element's own Bernoulli variance; round-to-nearest on the same data is
 * biased toward zero by construction here (every |x| sits 1/4 quantum above a grid point). */
static void test_stochastic_gradient_mean_error(void **state) {
  enum { N = 1 << 18 };
  float *src = malloc(N * 4);
  uint8_t *out = malloc(2 * N);
  size_t ntables;
  const gcomp_cast_kernels *const *tables = gcomp_cast_tables(&ntables);
  for (size_t i = 0; i < N; i++) {
    float g = (float)((int32_t)rnd32() / 2147483648.0) * 1e-2f;
    uint16_t h = ref_f16(ref_f2u(g), 0);
    double base = ref_u2f(ref_f16_to_f32(h)), dn, up;
    neighbours(1, g, &dn, &up);
    src[i] = (float)((fabs(base) + 0.25 * (up - dn)) * (g < 0 ? -1 : 1));
  }
  for (size_t t = 0; t < ntables; t++) {
    gcomp_cast_counts c = {0, 0, 0};
    tables[t]->f16_enc_sr(src, N, out, 1.0f, 99, 0, &c);
    double err = 0, var = 0, rne_err = 0;
    for (size_t i = 0; i < N; i++) {
      double dn, up, v = fabs((double)src[i]);
      neighbours(1, src[i], &dn, &up);
      double p = up > dn ? (v - dn) / (up - dn) : 0;
      var += (up - dn) * (up - dn) * p * (1 - p);
      err += fabs(f16_value(out + 2 * i)) - v;
      rne_err += fabs(ref_u2f(ref_f16_to_f32(ref_f16(ref_f2u(src[i]), 0)))) - v;
    }
    double bound = 5 * sqrt(var);
    if (fabs(err) > bound) fail_msg("%s: summed error %g > %g", tables[t]->name, err, bound);
    assert_true(fabs(rne_err) > 20 * bound);   /* the bound tells biased from unbiased */
  }
  free(src), free(out);
}

/* Seeded: the same (key, index) gives the same bits however the frame is split; another
 * key gives other bits. */
static void test_stochastic_reproducible_and_chunk_independent(void **state) {
  enum { N = 10007 };
  float *src = malloc(N * 4);
  uint8_t *a = malloc(2 * N), *b = malloc(2 * N);
  fill(src, N);
  size_t ntables;
  const gcomp_cast_kernels *const *tables = gcomp_cast_tables(&ntables);
  for (int fmt = 0; fmt < 2; fmt++) {
    uint64_t key = gcomp_cast_key(7, 3, 0);
    gcomp_cast_counts c = {0, 0, 0};
    uint8_t *first = malloc(2 * N);
    for (size_t t = 0; t < ntables; t++) {
      const gcomp_cast_kernels *K = tables[t];
      if (fmt == 0) K->f16_enc_sr(src, N, a, 0x1p4f, key, 0, &c);
      else K->bf16_enc_sr(src, N, a, key, 0, &c);
      if (t == 0) memcpy(first, a, 2 * N);
      assert_memory_equal(first, a, 2 * N);   /* every table, same bits */
      for (size_t cut = 0; cut <= N; cut += 1237) {
        if (fmt == 0) {
          K->f16_enc_sr(src, cut, b, 0x1p4f, key, 0, &c);
          K->f16_enc_sr(src + cut, N - cut, b + 2 * cut, 0x1p4f, key, (uint32_t)cut, &c);
        } else {
          K->bf16_enc_sr(src, cut, b, key, 0, &c);
          K->bf16_enc_sr(src + cut, N - cut, b + 2 * cut, key, (uint32_t)cut, &c);
        }
        assert_memory_equal(a, b, 2 * N);
      }
      uint64_t other = gcomp_cast_key(8, 3, 0);
      if (fmt == 0) K->f16_enc_sr(src, N, b, 0x1p4f, other, 0, &c);
      else K->bf16_enc_sr(src, N, b, other, 0, &c);
      assert_true(memcmp(a, b, 2 * N) != 0);
    }
    free(first);
  }
  /* keys of neighbouring seeds, sequence numbers and index segments all differ */
  assert_true(gcomp_cast_key(0, 1, 0) != gcomp_cast_key(1, 0, 0));
  assert_true(gcomp_cast_key(0, 0, 1) != gcomp_cast_key(0, 1, 0));
  assert_true(gcomp_cast_key(0, 0, 0) != gcomp_cast_key(0, 0, 1));
  free(src), free(a), free(b);
}

/* The table dispatched at each kernel level follows the CPU's features: at avx2, the
 * ymm-folding block kernels exactly when it has VPCLMULQDQ. */
static void test_dispatch_by_level_and_features(void **state) {
  static const char *const levels[] = {"base", "avx2", "avx512"};
  unsigned f = gcomp_cpu_detect();
  int best = gcomp_isa_best_level(f);
  for (int l = 0; l <= best; l++) {
    setenv("GCOMP_ISA", levels[l], 1);
    assert_int_equal(gcomp_reinit_for_testing(), GCOMP_OK);
    const char *name = gcomp_cast_kernels_get()->name;
    if (l == GCOMP_ISA_BASE) assert_string_equal(name, "base");
    if (l == GCOMP_ISA_AVX2)
      assert_string_equal(name, (f & GCOMP_CPU_VPCLMUL) ? "avx2-vpclmul" : "avx2");
    if (l == GCOMP_ISA_AVX512) assert_true(strncmp(name, "avx512", 6) == 0);
  }
  unsetenv("GCOMP_ISA");
  assert_int_equal(gcomp_reinit_for_testing(), GCOMP_OK);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_simd_vs_base_lengths_and_alignment),
      cmocka_unit_test(test_simd_vs_base_guard_page),
      cmocka_unit_test(test_simd_vs_base_large),
      cmocka_unit_test(test_simd_vs_base_sparse_specials),
      cmocka_unit_test(test_encoders_match_ieee_reference),
      cmocka_unit_test(test_decode_under_daz),
      cmocka_unit_test(test_decode_all_patterns),
      cmocka_unit_test(test_stochastic_unbiased),
      cmocka_unit_test(test_stochastic_gradient_mean_error),
      cmocka_unit_test(test_stochastic_reproducible_and_chunk_independent),
      cmocka_unit_test(test_dispatch_by_level_and_features),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
