/* AVX2 + F16C fp16/bf16 cast kernels (PCLMULQDQ and SSE4.2 fold the block checksums).
 * Same results as cast_base.c bit for bit (rules in cast.h); heads that align a streaming
 * store and tails shorter than a vector go through the base kernels. Large outputs are
 * written with non-temporal stores. */
#include <immintrin.h>
#include <string.h>

#include "cast.h"
#include "crc_fold.h"
#include "frame.h"
#include "rand_simd.h"

#define SET1(v) _mm256_set1_epi32((int)(v))
#define GCOMP_CAST_UNLIKELY(x) __builtin_expect(!!(x), 0)


static uint32_t hmax_epu32(__m256i m) {
  __m128i h = _mm_max_epu32(_mm256_castsi256_si128(m), _mm256_extracti128_si256(m, 1));
  h = _mm_max_epu32(h, _mm_shuffle_epi32(h, 0x4e));
  h = _mm_max_epu32(h, _mm_shuffle_epi32(h, 0xb1));
  return (uint32_t)_mm_cvtsi128_si32(h);
}

/* ---- max |x| over finite x -------------------------------------------------------------- */
static uint32_t maxabs_avx2(const float *src, size_t n) {
  const __m256i abs = SET1(0x7fffffff), inf = SET1(0x7f800000);
  __m256i m0 = _mm256_setzero_si256(), m1 = m0, m2 = m0, m3 = m0;
  size_t i = 0;
#define MAXSTEP(m, off)                                                                   \
  do {                                                                                    \
    __m256i a = _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(src + i + off)), abs); \
    m = _mm256_max_epu32(m, _mm256_and_si256(a, _mm256_cmpgt_epi32(inf, a)));             \
  } while (0)
  for (; i + 32 <= n; i += 32) {
    MAXSTEP(m0, 0);
    MAXSTEP(m1, 8);
    MAXSTEP(m2, 16);
    MAXSTEP(m3, 24);
  }
  for (; i + 8 <= n; i += 8) MAXSTEP(m0, 0);
#undef MAXSTEP
  uint32_t mx = hmax_epu32(_mm256_max_epu32(_mm256_max_epu32(m0, m1), _mm256_max_epu32(m2, m3)));
  uint32_t t = gcomp_cast_base.maxabs(src + i, n - i);
  return t > mx ? t : mx;
}

/* ---- round-to-nearest-even encoders ------------------------------------------------------
 * Counting is kept off the hot path: one range test on |x| flags a vector that holds a
 * NaN/Inf, an overflow or an underflow (rare in gradients), and only then are the three
 * counts taken. For x * scale with scale = 2^k exact, "overflows" is |x| >= hi and
 * "underflows" is 0 < |x| <= lo, where hi and lo are the thresholds moved by 2^-k. */
typedef struct {
  __m256i abs, hi_m1, lo_p1, naninf_m1, zero;
} range_test;

static range_test range_init(uint32_t hi, uint32_t lo) {
  range_test r = {SET1(0x7fffffff), SET1(hi - 1), SET1(lo + 1), SET1(0x7f7fffff),
                  _mm256_setzero_si256()};
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

/* The max-abs of scale=auto rides along: one vpmaxud per vector on the common path; a
 * vector flagged by the range test (it may hold NaN/Inf) masks its non-finite lanes. */
static uint32_t f16_enc_avx2(const float *src, size_t n, uint8_t *dst, float scale,
                             gcomp_cast_counts *c) {
  gcomp_cast_counts k = {0, 0, 0};
  uint32_t hi, lo, mx = 0;
  gcomp_cast_f16_thresholds(scale, &hi, &lo);
  const range_test rt = range_init(hi, lo);
  const __m256i inf = SET1(0x7f800000);
  const __m256 sc = _mm256_set1_ps(scale);
  __m256i m0 = _mm256_setzero_si256(), m1 = m0;
  size_t i = 0;
  int nt = gcomp_cast_streaming(2 * n);
  if (nt) {
    i = gcomp_cast_head_for(dst, 2, 16, n);
    mx = gcomp_cast_base.f16_enc(src, i, dst, scale, &k);
  }
#define F16STEP(m, off, store)                                                            \
  do {                                                                                    \
    __m256 x = _mm256_loadu_ps(src + i + off);                                            \
    __m128i h = _mm256_cvtps_ph(_mm256_mul_ps(x, sc), _MM_FROUND_TO_NEAREST_INT);         \
    __m256i a0 = _mm256_and_si256(_mm256_castps_si256(x), rt.abs), fh, fl;                \
    if (GCOMP_CAST_UNLIKELY(!_mm256_testz_si256(range_flags(&rt, a0, &fh, &fl), rt.abs))) { \
      range_count(&rt, a0, fh, fl, &k);                                                   \
      a0 = _mm256_and_si256(a0, _mm256_cmpgt_epi32(inf, a0));                             \
    }                                                                                     \
    m = _mm256_max_epu32(m, a0);                                                          \
    store((__m128i *)(dst + 2 * (i + off)), h);                                           \
  } while (0)
  if (nt) {
    for (; i + 16 <= n; i += 16) {
      F16STEP(m0, 0, _mm_stream_si128);
      F16STEP(m1, 8, _mm_stream_si128);
    }
    _mm_sfence();
  }
  for (; i + 16 <= n; i += 16) {
    F16STEP(m0, 0, _mm_storeu_si128);
    F16STEP(m1, 8, _mm_storeu_si128);
  }
  for (; i + 8 <= n; i += 8) F16STEP(m0, 0, _mm_storeu_si128);
#undef F16STEP
  uint32_t v = hmax_epu32(_mm256_max_epu32(m0, m1));
  mx = v > mx ? v : mx;
  v = gcomp_cast_base.f16_enc(src + i, n - i, dst + 2 * i, scale, &k);
  mx = v > mx ? v : mx;
  gcomp_cast_add_counts(c, &k);
  return mx;
}

/* two vectors of 32-bit lanes holding values <= 0xffff -> 16 little-endian halves */
static inline __m256i pack16(__m256i lo8, __m256i hi8) {
  return _mm256_permute4x64_epi64(_mm256_packus_epi32(lo8, hi8), 0xd8);
}

static inline __m256i bf16_rne8(__m256i w) {
  const __m256i one = SET1(1), bias = SET1(0x7fff), inf = SET1(0x7f800000);
  __m256i a = _mm256_and_si256(w, SET1(0x7fffffff));
  __m256i r = _mm256_add_epi32(w, _mm256_add_epi32(bias, _mm256_and_si256(_mm256_srli_epi32(w, 16), one)));
  r = _mm256_srli_epi32(r, 16);
  __m256i q = _mm256_or_si256(_mm256_srli_epi32(w, 16), SET1(0x40));
  return _mm256_blendv_epi8(r, q, _mm256_cmpgt_epi32(a, inf));
}

static void bf16_enc_avx2(const float *src, size_t n, uint8_t *dst, gcomp_cast_counts *c) {
  gcomp_cast_counts k = {0, 0, 0};
  const range_test rt = range_init(0x7f7f8000u, 0x8000u);
  size_t i = 0;
  int nt = gcomp_cast_streaming(2 * n);
  if (nt) {
    i = gcomp_cast_head_for(dst, 2, 32, n);
    gcomp_cast_base.bf16_enc(src, i, dst, &k);
  }
#define BF16STEP(store)                                                                   \
  do {                                                                                    \
    __m256i w0 = _mm256_loadu_si256((const __m256i *)(src + i));                          \
    __m256i w1 = _mm256_loadu_si256((const __m256i *)(src + i + 8));                      \
    __m256i a0 = _mm256_and_si256(w0, rt.abs), a1 = _mm256_and_si256(w1, rt.abs);         \
    __m256i h0, l0, h1, l1;                                                               \
    __m256i any = _mm256_or_si256(range_flags(&rt, a0, &h0, &l0), range_flags(&rt, a1, &h1, &l1)); \
    if (GCOMP_CAST_UNLIKELY(!_mm256_testz_si256(any, any))) {                             \
      range_count(&rt, a0, h0, l0, &k);                                                   \
      range_count(&rt, a1, h1, l1, &k);                                                   \
    }                                                                                     \
    store((__m256i *)(dst + 2 * i), pack16(bf16_rne8(w0), bf16_rne8(w1)));                \
  } while (0)
  if (nt) {
    for (; i + 16 <= n; i += 16) BF16STEP(_mm256_stream_si256);
    _mm_sfence();
  }
  for (; i + 16 <= n; i += 16) BF16STEP(_mm256_storeu_si256);
#undef BF16STEP
  gcomp_cast_base.bf16_enc(src + i, n - i, dst + 2 * i, &k);
  gcomp_cast_add_counts(c, &k);
}

/* ---- one frame block, its CRC-32C folded in registers (codecs/crc_fold.h) ---------------
 * n is a multiple of 32 (64 output bytes a step); with stream and a 16-byte aligned dst
 * the output bypasses the cache, which is the point: the checksum needs no read of it. */
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

/* Stores 64 bytes of one block (streaming when nt) and folds them into its checksum. */
static inline void emit64(uint8_t *d, __m128i h0, __m128i h1, __m128i h2, __m128i h3, int nt,
                          gcomp_crc_fold *f, int first) {
  if (nt) {
    _mm_stream_si128((__m128i *)d, h0), _mm_stream_si128((__m128i *)(d + 16), h1);
    _mm_stream_si128((__m128i *)(d + 32), h2), _mm_stream_si128((__m128i *)(d + 48), h3);
  } else {
    _mm_storeu_si128((__m128i *)d, h0), _mm_storeu_si128((__m128i *)(d + 16), h1);
    _mm_storeu_si128((__m128i *)(d + 32), h2), _mm_storeu_si128((__m128i *)(d + 48), h3);
  }
  if (first) gcomp_crc_fold_init(f, h0, h1, h2, h3, 0xffffffffu);
  else gcomp_crc_fold_64(f, h0, h1, h2, h3);
}

uint32_t gcomp_cast_f16_enc_sum_avx2(const float *src, size_t n, uint8_t *dst, float scale,
                                     gcomp_cast_counts *c, uint32_t *mx, int stream) {
  gcomp_cast_counts k = {0, 0, 0};
  uint32_t hi, lo;
  gcomp_cast_f16_thresholds(scale, &hi, &lo);
  const range_test rt = range_init(hi, lo);
  const __m256 sc = _mm256_set1_ps(scale);
  __m256i m0 = _mm256_setzero_si256(), m1 = m0;
  int nt = stream && !((uintptr_t)dst & 15);
  gcomp_crc_fold f = GCOMP_CRC_FOLD_ZERO;
  for (size_t i = 0; i < n; i += 32) {
    __m128i h0 = f16_vec(src + i, sc, &rt, &m0, &k), h1 = f16_vec(src + i + 8, sc, &rt, &m1, &k);
    __m128i h2 = f16_vec(src + i + 16, sc, &rt, &m0, &k);
    __m128i h3 = f16_vec(src + i + 24, sc, &rt, &m1, &k);
    emit64(dst + 2 * i, h0, h1, h2, h3, nt, &f, i == 0);
  }
  if (nt) _mm_sfence();
  gcomp_cast_add_counts(c, &k);
  *mx = hmax_epu32(_mm256_max_epu32(m0, m1));
  return ~gcomp_crc_fold_end(&f);
}

static inline __m256i bf16_vec(const float *p, const range_test *rt, gcomp_cast_counts *k) {
  __m256i w0 = _mm256_loadu_si256((const __m256i *)p);
  __m256i w1 = _mm256_loadu_si256((const __m256i *)(p + 8));
  __m256i a0 = _mm256_and_si256(w0, rt->abs), a1 = _mm256_and_si256(w1, rt->abs);
  __m256i h0, l0, h1, l1;
  __m256i any = _mm256_or_si256(range_flags(rt, a0, &h0, &l0), range_flags(rt, a1, &h1, &l1));
  if (GCOMP_CAST_UNLIKELY(!_mm256_testz_si256(any, any))) {
    range_count(rt, a0, h0, l0, k);
    range_count(rt, a1, h1, l1, k);
  }
  return pack16(bf16_rne8(w0), bf16_rne8(w1));
}

uint32_t gcomp_cast_bf16_enc_sum_avx2(const float *src, size_t n, uint8_t *dst,
                                      gcomp_cast_counts *c, int stream) {
  gcomp_cast_counts k = {0, 0, 0};
  const range_test rt = range_init(0x7f7f8000u, 0x8000u);
  int nt = stream && !((uintptr_t)dst & 15);
  gcomp_crc_fold f = GCOMP_CRC_FOLD_ZERO;
  for (size_t i = 0; i < n; i += 32) {
    __m256i v0 = bf16_vec(src + i, &rt, &k), v1 = bf16_vec(src + i + 16, &rt, &k);
    __m128i h0 = _mm256_castsi256_si128(v0), h1 = _mm256_extracti128_si256(v0, 1);
    __m128i h2 = _mm256_castsi256_si128(v1), h3 = _mm256_extracti128_si256(v1, 1);
    emit64(dst + 2 * i, h0, h1, h2, h3, nt, &f, i == 0);
  }
  if (nt) _mm_sfence();
  gcomp_cast_add_counts(c, &k);
  return ~gcomp_crc_fold_end(&f);
}

/* ---- stochastic rounding -------------------------------------------------------------- */
/* 32-bit lane counters (i0 + n never passes 2^32, so n/8 fits a lane) */
typedef struct {
  __m256i nf, ov, uf;
} lane_counts;

static inline void lane_count(lane_counts *lc, __m256i a0, __m256i hmag, uint32_t inf16) {
  __m256i nf = _mm256_cmpgt_epi32(a0, SET1(0x7f7fffff));
  __m256i ov = _mm256_andnot_si256(nf, _mm256_cmpeq_epi32(hmag, SET1(inf16)));
  __m256i uf = _mm256_andnot_si256(_mm256_cmpeq_epi32(a0, _mm256_setzero_si256()),
                                   _mm256_cmpeq_epi32(hmag, _mm256_setzero_si256()));
  lc->nf = _mm256_sub_epi32(lc->nf, nf);
  lc->ov = _mm256_sub_epi32(lc->ov, ov);
  lc->uf = _mm256_sub_epi32(lc->uf, uf);
}

static uint64_t hsum32(__m256i v) {
  uint32_t t[8];
  _mm256_storeu_si256((__m256i *)t, v);
  uint64_t s = 0;
  for (int j = 0; j < 8; j++) s += t[j];
  return s;
}

static void lane_flush(const lane_counts *lc, gcomp_cast_counts *c) {
  c->nonfinite += hsum32(lc->nf);
  c->overflow += hsum32(lc->ov);
  c->underflow += hsum32(lc->uf);
}

/* fp16 magnitude of |y| = a with random bits r (the rule of f16_sr_mag in cast_base.c) */
static inline __m256i f16_sr8(__m256i a, __m256i r) {
  const __m256i inf = SET1(0x7f800000), sb = SET1(0x80000000u);
  /* normal results */
  __m256i t = _mm256_and_si256(_mm256_add_epi32(a, _mm256_srli_epi32(r, 19)), SET1(~0x1fffu));
  __m256i hn = _mm256_min_epu32(_mm256_srli_epi32(_mm256_sub_epi32(t, SET1(0x38000000)), 13),
                                SET1(0x7c00));
  /* subnormal results */
  __m256i e = _mm256_srli_epi32(a, 23);
  __m256i m = _mm256_or_si256(_mm256_and_si256(a, SET1(0x7fffff)),
                              _mm256_andnot_si256(_mm256_cmpeq_epi32(e, _mm256_setzero_si256()),
                                                  SET1(0x800000)));
  __m256i s = _mm256_sub_epi32(SET1(126), _mm256_max_epi32(e, SET1(1)));
  __m256i frac = _mm256_or_si256(_mm256_sllv_epi32(m, _mm256_sub_epi32(SET1(32), s)),
                                 _mm256_srlv_epi32(m, _mm256_sub_epi32(s, SET1(32))));
  __m256i up = _mm256_cmpgt_epi32(_mm256_xor_si256(frac, sb), _mm256_xor_si256(r, sb));
  __m256i hs = _mm256_sub_epi32(_mm256_srlv_epi32(m, s), up);
  /* NaN and Inf */
  __m256i sp = _mm256_or_si256(SET1(0x7c00), _mm256_and_si256(_mm256_srli_epi32(a, 13), SET1(0x3ff)));
  sp = _mm256_or_si256(sp, _mm256_and_si256(_mm256_cmpgt_epi32(a, inf), SET1(0x200)));
  __m256i h = _mm256_blendv_epi8(hs, hn, _mm256_cmpgt_epi32(a, SET1(0x387fffff)));
  return _mm256_blendv_epi8(h, sp, _mm256_cmpgt_epi32(a, SET1(0x7f7fffff)));
}

static void f16_enc_sr_avx2(const float *src, size_t n, uint8_t *dst, float scale, uint64_t key,
                            uint32_t i0, gcomp_cast_counts *c) {
  const __m256i abs = SET1(0x7fffffff), step = SET1(8), sgn = SET1(0x8000);
  const __m256i klo = SET1((uint32_t)key), khi = SET1((uint32_t)(key >> 32));
  const __m256 sc = _mm256_set1_ps(scale);
  __m256i idx = _mm256_add_epi32(SET1(i0), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  lane_counts lc = {_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256()};
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m256i hv[2];
    for (int j = 0; j < 2; j++) {
      __m256 x = _mm256_loadu_ps(src + i + 8 * j);
      __m256i w = _mm256_castps_si256(x), a0 = _mm256_and_si256(w, abs);
      __m256i a = _mm256_and_si256(_mm256_castps_si256(_mm256_mul_ps(x, sc)), abs);
      __m256i h = f16_sr8(a, gcomp_rand8(idx, klo, khi));
      idx = _mm256_add_epi32(idx, step);
      lane_count(&lc, a0, h, 0x7c00);
      hv[j] = _mm256_or_si256(h, _mm256_and_si256(_mm256_srli_epi32(w, 16), sgn));
    }
    _mm256_storeu_si256((__m256i *)(dst + 2 * i), pack16(hv[0], hv[1]));
  }
  gcomp_cast_counts k = {0, 0, 0};
  lane_flush(&lc, &k);
  gcomp_cast_base.f16_enc_sr(src + i, n - i, dst + 2 * i, scale, key, i0 + (uint32_t)i, &k);
  gcomp_cast_add_counts(c, &k);
}

static void bf16_enc_sr_avx2(const float *src, size_t n, uint8_t *dst, uint64_t key, uint32_t i0,
                             gcomp_cast_counts *c) {
  const __m256i abs = SET1(0x7fffffff), step = SET1(8), inf = SET1(0x7f800000);
  const __m256i klo = SET1((uint32_t)key), khi = SET1((uint32_t)(key >> 32));
  __m256i idx = _mm256_add_epi32(SET1(i0), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  lane_counts lc = {_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256()};
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m256i hv[2];
    for (int j = 0; j < 2; j++) {
      __m256i w = _mm256_loadu_si256((const __m256i *)(src + i + 8 * j));
      __m256i a0 = _mm256_and_si256(w, abs);
      __m256i r = gcomp_rand8(idx, klo, khi);
      idx = _mm256_add_epi32(idx, step);
      __m256i h = _mm256_srli_epi32(_mm256_add_epi32(w, _mm256_srli_epi32(r, 16)), 16);
      __m256i q = _mm256_or_si256(_mm256_srli_epi32(w, 16), SET1(0x40));
      h = _mm256_blendv_epi8(h, q, _mm256_cmpgt_epi32(a0, inf));
      lane_count(&lc, a0, _mm256_and_si256(h, SET1(0x7fff)), 0x7f80);
      hv[j] = h;
    }
    _mm256_storeu_si256((__m256i *)(dst + 2 * i), pack16(hv[0], hv[1]));
  }
  gcomp_cast_counts k = {0, 0, 0};
  lane_flush(&lc, &k);
  gcomp_cast_base.bf16_enc_sr(src + i, n - i, dst + 2 * i, key, i0 + (uint32_t)i, &k);
  gcomp_cast_add_counts(c, &k);
}

/* ---- decoders --------------------------------------------------------------------------- */
static void f16_dec_nt_avx2(const uint8_t *src, size_t n, float *dst, float inv_scale, int nt) {
  const __m256 inv = _mm256_set1_ps(inv_scale);
  size_t i = 0;
  if (nt) {
    i = gcomp_cast_head_for(dst, 4, 32, n);
    gcomp_cast_base.f16_dec(src, i, dst, inv_scale);
  }
#define DECSTEP(off, store)                                                               \
  store(dst + i + off,                                                                    \
        _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + 2 * (i + off)))), inv))
  if (nt) {
    for (; i + 16 <= n; i += 16) {
      DECSTEP(0, _mm256_stream_ps);
      DECSTEP(8, _mm256_stream_ps);
    }
    _mm_sfence();
  }
  for (; i + 8 <= n; i += 8) DECSTEP(0, _mm256_storeu_ps);
#undef DECSTEP
  gcomp_cast_base.f16_dec(src + 2 * i, n - i, dst + i, inv_scale);
}

static void f16_dec_avx2(const uint8_t *src, size_t n, float *dst, float inv_scale) {
  f16_dec_nt_avx2(src, n, dst, inv_scale, gcomp_cast_streaming(4 * n));
}

static inline __m256 bf16_widen8(const uint8_t *p) {
  __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
}

static void bf16_dec_nt_avx2(const uint8_t *src, size_t n, float *dst, int nt) {
  size_t i = 0;
  if (nt) {
    i = gcomp_cast_head_for(dst, 4, 32, n);
    gcomp_cast_base.bf16_dec(src, i, dst);
    for (; i + 16 <= n; i += 16) {
      _mm256_stream_ps(dst + i, bf16_widen8(src + 2 * i));
      _mm256_stream_ps(dst + i + 8, bf16_widen8(src + 2 * i + 16));
    }
    _mm_sfence();
  }
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, bf16_widen8(src + 2 * i));
  gcomp_cast_base.bf16_dec(src + 2 * i, n - i, dst + i);
}

static void bf16_dec_avx2(const uint8_t *src, size_t n, float *dst) {
  bf16_dec_nt_avx2(src, n, dst, gcomp_cast_streaming(4 * n));
}

/* 8 decoded values at p: fp16 times inv (f16 set), else bf16 */
static inline __m256 widen8(const uint8_t *p, int f16, __m256 inv) {
  return f16 ? _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p)), inv)
             : bf16_widen8(p);
}
static inline void add8(float *acc, const uint8_t *p, int f16, __m256 inv) {
  _mm256_storeu_ps(acc, _mm256_add_ps(_mm256_loadu_ps(acc), widen8(p, f16, inv)));
}

static inline void dec_add(const uint8_t *src, size_t n, float *acc, int f16, float inv_scale) {
  const __m256 inv = _mm256_set1_ps(inv_scale);
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    add8(acc + i, src + 2 * i, f16, inv);
    add8(acc + i + 8, src + 2 * i + 16, f16, inv);
  }
  for (; i + 8 <= n; i += 8) add8(acc + i, src + 2 * i, f16, inv);
  gcomp_cast_dec_add_tail(src + 2 * i, n - i, acc + i, f16, inv_scale);
}
GCOMP_CAST_DEC_ADD_ENTRIES(avx2)

/* One block added, then the next one's CRC with ISA-L while it is brought into cache for
 * its own add: the work of verifying block b + 1 before adding it, as before. Folding it
 * on xmm within the add loop (as the avx512 table does on zmm) costs 8 PCLMULQDQ per 64
 * bytes, which leave that loop no faster than memory even in cache (bench/RESULTS.md). */
uint32_t gcomp_cast_f16_dec_add_sum_avx2(const uint8_t *src, size_t n, float *acc,
                                         float inv_scale, const uint8_t *next) {
  dec_add(src, n, acc, 1, inv_scale);
  return ~gcomp_crc32c(0xffffffffu, next, 2 * n);
}
uint32_t gcomp_cast_bf16_dec_add_sum_avx2(const uint8_t *src, size_t n, float *acc,
                                          const uint8_t *next) {
  dec_add(src, n, acc, 0, 1.0f);
  return ~gcomp_crc32c(0xffffffffu, next, 2 * n);
}

const gcomp_cast_kernels gcomp_cast_avx2 = {
    .name = "avx2",
    .maxabs = maxabs_avx2,
    .f16_enc = f16_enc_avx2,
    .f16_enc_sr = f16_enc_sr_avx2,
    .f16_dec = f16_dec_avx2,
    .f16_dec_add = f16_dec_add_avx2,
    .bf16_enc = bf16_enc_avx2,
    .bf16_enc_sr = bf16_enc_sr_avx2,
    .bf16_dec = bf16_dec_avx2,
    .bf16_dec_add = bf16_dec_add_avx2,
    .f16_dec_nt = f16_dec_nt_avx2,
    .bf16_dec_nt = bf16_dec_nt_avx2,
    .f16_enc_sum = gcomp_cast_f16_enc_sum_avx2,
    .bf16_enc_sum = gcomp_cast_bf16_enc_sum_avx2,
    .f16_dec_add_sum = gcomp_cast_f16_dec_add_sum_avx2,
    .bf16_dec_add_sum = gcomp_cast_bf16_dec_add_sum_avx2,
};
