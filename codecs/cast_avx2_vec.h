/* Internal: the AVX2 vector steps of the cast kernels, shared by the files built with the
 * AVX2 flags (cast_avx2.c; cast_vpclmul_avx2.c, which folds the block checksums on ymm).
 * Every step gives the results of cast_base.c bit for bit (rules in cast.h). */
#ifndef GCOMP_CAST_AVX2_VEC_H
#define GCOMP_CAST_AVX2_VEC_H

#include <immintrin.h>
#include <stdint.h>

#include "cast.h"

#define SET1(v) _mm256_set1_epi32((int)(v))
#define GCOMP_CAST_UNLIKELY(x) __builtin_expect(!!(x), 0)

static inline uint32_t hmax_epu32(__m256i m) {
  __m128i h = _mm_max_epu32(_mm256_castsi256_si128(m), _mm256_extracti128_si256(m, 1));
  h = _mm_max_epu32(h, _mm_shuffle_epi32(h, 0x4e));
  h = _mm_max_epu32(h, _mm_shuffle_epi32(h, 0xb1));
  return (uint32_t)_mm_cvtsi128_si32(h);
}

/* The 128 bytes of input GCOMP_CAST_PREFETCH_AVX2_BYTES past p (two lines). */
static inline void gcomp_cast_prefetch128(const float *p) {
  _mm_prefetch((const char *)p + GCOMP_CAST_PREFETCH_AVX2_BYTES, _MM_HINT_T0);
  _mm_prefetch((const char *)p + GCOMP_CAST_PREFETCH_AVX2_BYTES + 64, _MM_HINT_T0);
}

/* ---- round-to-nearest-even encoders ------------------------------------------------------
 * Counting is kept off the hot path: one range test on |x| flags a vector that holds a
 * NaN/Inf, an overflow or an underflow (rare in gradients), and only then are the three
 * counts taken. For x * scale with scale = 2^k exact, "overflows" is |x| >= hi and
 * "underflows" is 0 < |x| <= lo, where hi and lo are the thresholds moved by 2^-k. */
typedef struct {
  __m256i abs, hi_m1, lo_p1, naninf_m1, zero;
  __m256i lo_m1;   /* for bf16_vec only, whose lo (0x8000) is not 0 */
} range_test;

static inline range_test range_init(uint32_t hi, uint32_t lo) {
  range_test r = {SET1(0x7fffffff), SET1(hi - 1), SET1(lo + 1), SET1(0x7f7fffff),
                  _mm256_setzero_si256(), SET1(lo - 1)};
  return r;
}

static inline __m256i range_flags(const range_test *r, __m256i a0, __m256i *hi, __m256i *lo) {
  *hi = _mm256_cmpgt_epi32(a0, r->hi_m1);
  *lo = _mm256_andnot_si256(_mm256_cmpeq_epi32(a0, r->zero), _mm256_cmpgt_epi32(r->lo_p1, a0));
  return _mm256_or_si256(*hi, *lo);
}

static inline void range_count(const range_test *r, __m256i a0, __m256i hi, __m256i lo,
                               gcomp_cast_counts *k) {
  __m256i nf = _mm256_cmpgt_epi32(a0, r->naninf_m1);
  k->nonfinite += (uint64_t)__builtin_popcount((unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(nf)));
  k->overflow += (uint64_t)__builtin_popcount(
      (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_andnot_si256(nf, hi))));
  k->underflow += (uint64_t)__builtin_popcount((unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(lo)));
}

/* two vectors of 32-bit lanes holding values <= 0xffff -> 16 little-endian halves */
static inline __m256i pack16(__m256i lo8, __m256i hi8) {
  return _mm256_permute4x64_epi64(_mm256_packus_epi32(lo8, hi8), 0xd8);
}

/* bf16 of 8 values that are not NaN: the top half rounded to nearest even (Inf stays Inf,
 * the largest values round to it). */
static inline __m256i bf16_rne8_num(__m256i w) {
  const __m256i one = SET1(1), bias = SET1(0x7fff);
  __m256i r = _mm256_add_epi32(w, _mm256_add_epi32(bias, _mm256_and_si256(_mm256_srli_epi32(w, 16), one)));
  return _mm256_srli_epi32(r, 16);
}
/* and of any 8 values: a NaN is truncated and made quiet, so that it never rounds to Inf */
static inline __m256i bf16_rne8(__m256i w) {
  const __m256i inf = SET1(0x7f800000);
  __m256i a = _mm256_and_si256(w, SET1(0x7fffffff));
  __m256i q = _mm256_or_si256(_mm256_srli_epi32(w, 16), SET1(0x40));
  return _mm256_blendv_epi8(bf16_rne8_num(w), q, _mm256_cmpgt_epi32(a, inf));
}

/* 8 fp16 values of p[0..8) * sc, the maximum of their finite magnitudes into *m */
static inline __m128i f16_vec(const float *p, __m256 sc, const range_test *rt, __m256i *m,
                              gcomp_cast_counts *k) {
  __m256 x = _mm256_loadu_ps(p);
  __m128i h = _mm256_cvtps_ph(_mm256_mul_ps(x, sc), _MM_FROUND_TO_NEAREST_INT);
  __m256i a0 = _mm256_and_si256(_mm256_castps_si256(x), rt->abs), fh, fl;
  if (GCOMP_CAST_UNLIKELY(!_mm256_testz_si256(range_flags(rt, a0, &fh, &fl), rt->abs))) {
    range_count(rt, a0, fh, fl, k);
    a0 = _mm256_and_si256(a0, _mm256_cmpgt_epi32(SET1(0x7f800000), a0));
  }
  *m = _mm256_max_epu32(*m, a0);
  return h;
}

/* 16 bf16 values of p[0..16). A NaN is flagged by the range test (it lies above any
 * overflow threshold), so the common path rounds without looking for one. */
static inline __m256i bf16_vec(const float *p, const range_test *rt, gcomp_cast_counts *k) {
  __m256i w0 = _mm256_loadu_si256((const __m256i *)p);
  __m256i w1 = _mm256_loadu_si256((const __m256i *)(p + 8));
  __m256i a0 = _mm256_and_si256(w0, rt->abs), a1 = _mm256_and_si256(w1, rt->abs);
  /* both vectors at once: some |x| >= hi, or some |x| - 1 <= lo - 1 as unsigned, that is
   * 0 < |x| <= lo (a zero wraps to the largest value and is never flagged); only then the
   * per-lane flags */
  __m256i mx = _mm256_max_epu32(a0, a1), ones = _mm256_cmpeq_epi32(a0, a0);
  __m256i mn = _mm256_min_epu32(_mm256_add_epi32(a0, ones), _mm256_add_epi32(a1, ones));
  __m256i any = _mm256_or_si256(_mm256_cmpgt_epi32(mx, rt->hi_m1),
                                _mm256_cmpeq_epi32(_mm256_min_epu32(mn, rt->lo_m1), mn));
  if (GCOMP_CAST_UNLIKELY(!_mm256_testz_si256(any, any))) {
    __m256i h0, l0, h1, l1;
    range_flags(rt, a0, &h0, &l0), range_flags(rt, a1, &h1, &l1);
    range_count(rt, a0, h0, l0, k);
    range_count(rt, a1, h1, l1, k);
    return pack16(bf16_rne8(w0), bf16_rne8(w1));
  }
  return pack16(bf16_rne8_num(w0), bf16_rne8_num(w1));
}

/* ---- decoders --------------------------------------------------------------------------- */
static inline __m256 bf16_widen8(const uint8_t *p) {
  __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
}

/* 8 decoded values at p: fp16 times inv (f16 set), else bf16 */
static inline __m256 widen8(const uint8_t *p, int f16, __m256 inv) {
  return f16 ? _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p)), inv)
             : bf16_widen8(p);
}
static inline void add8(float *acc, const uint8_t *p, int f16, __m256 inv) {
  _mm256_storeu_ps(acc, _mm256_add_ps(_mm256_loadu_ps(acc), widen8(p, f16, inv)));
}

#endif /* GCOMP_CAST_AVX2_VEC_H */
