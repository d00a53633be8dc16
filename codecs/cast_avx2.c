/* AVX2 + F16C fp16/bf16 cast kernels (PCLMULQDQ and SSE4.2 fold the block checksums).
 * Same results as cast_base.c bit for bit (rules in cast.h); heads that align a streaming
 * store and tails shorter than a vector go through the base kernels. Large outputs are
 * written with non-temporal stores. */
#include <immintrin.h>
#include <string.h>

#include "cast.h"
#include "cast_avx2_vec.h"
#include "crc_fold.h"
#include "frame.h"
#include "rand_simd.h"

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

/* The max-abs of scale=auto rides along: one vpmaxud per vector on the common path; a
 * vector flagged by the range test (it may hold NaN/Inf) masks its non-finite lanes. */
static uint32_t f16_enc_avx2(const float *src, size_t n, uint8_t *dst, float scale,
                             gcomp_cast_counts *c) {
  gcomp_cast_counts k = {0, 0, 0};
  uint32_t hi, lo, mx = 0;
  gcomp_cast_f16_thresholds(scale, &hi, &lo);
  const range_test rt = range_init(hi, lo);
  const __m256 sc = _mm256_set1_ps(scale);
  __m256i m0 = _mm256_setzero_si256(), m1 = m0;
  size_t i = 0;
  int nt = gcomp_cast_streaming(2 * n);
  if (nt) {
    i = gcomp_cast_head_for(dst, 2, 16, n);
    mx = gcomp_cast_base.f16_enc(src, i, dst, scale, &k);
  }
#define F16STEP(m, off, store) \
  store((__m128i *)(dst + 2 * (i + off)), f16_vec(src + i + off, sc, &rt, &m, &k))
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

static void bf16_enc_avx2(const float *src, size_t n, uint8_t *dst, gcomp_cast_counts *c) {
  gcomp_cast_counts k = {0, 0, 0};
  const range_test rt = range_init(0x7f7f8000u, 0x8000u);
  size_t i = 0;
  if (gcomp_cast_streaming(2 * n)) {
    i = gcomp_cast_head_for(dst, 2, 32, n);
    gcomp_cast_base.bf16_enc(src, i, dst, &k);
    for (; i + 16 <= n; i += 16)
      _mm256_stream_si256((__m256i *)(dst + 2 * i), bf16_vec(src + i, &rt, &k));
    _mm_sfence();
  }
  for (; i + 16 <= n; i += 16)
    _mm256_storeu_si256((__m256i *)(dst + 2 * i), bf16_vec(src + i, &rt, &k));
  gcomp_cast_base.bf16_enc(src + i, n - i, dst + 2 * i, &k);
  gcomp_cast_add_counts(c, &k);
}

/* ---- one frame block, its CRC-32C folded in registers (codecs/crc_fold.h) ---------------
 * n is a multiple of 32 (64 output bytes a step); with stream and a 16-byte aligned dst
 * the output bypasses the cache, which is the point: the checksum needs no read of it.
 * The input is prefetched GCOMP_CAST_PREFETCH_AVX2_BYTES ahead (cast.h). */

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
    gcomp_cast_prefetch128(src + i);
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

uint32_t gcomp_cast_bf16_enc_sum_avx2(const float *src, size_t n, uint8_t *dst,
                                      gcomp_cast_counts *c, int stream) {
  gcomp_cast_counts k = {0, 0, 0};
  const range_test rt = range_init(0x7f7f8000u, 0x8000u);
  int nt = stream && !((uintptr_t)dst & 15);
  gcomp_crc_fold f = GCOMP_CRC_FOLD_ZERO;
  for (size_t i = 0; i < n; i += 32) {
    gcomp_cast_prefetch128(src + i);
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
 * bytes, which leave that loop no faster than memory even in cache. */
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

#define AVX2_ENTRIES                                                                      \
  .maxabs = maxabs_avx2, .f16_enc = f16_enc_avx2, .f16_enc_sr = f16_enc_sr_avx2,            \
  .f16_dec = f16_dec_avx2, .f16_dec_add = f16_dec_add_avx2, .bf16_enc = bf16_enc_avx2,      \
  .bf16_enc_sr = bf16_enc_sr_avx2, .bf16_dec = bf16_dec_avx2,                               \
  .bf16_dec_add = bf16_dec_add_avx2, .f16_dec_nt = f16_dec_nt_avx2,                         \
  .bf16_dec_nt = bf16_dec_nt_avx2

const gcomp_cast_kernels gcomp_cast_avx2 = {
    .name = "avx2",
    AVX2_ENTRIES,
    .f16_enc_sum = gcomp_cast_f16_enc_sum_avx2,
    .bf16_enc_sum = gcomp_cast_bf16_enc_sum_avx2,
    .f16_dec_add_sum = gcomp_cast_f16_dec_add_sum_avx2,
    .bf16_dec_add_sum = gcomp_cast_bf16_dec_add_sum_avx2,
};

/* With VPCLMULQDQ on ymm: the block kernels of cast_vpclmul_avx2.c. */
const gcomp_cast_kernels gcomp_cast_avx2_vpclmul = {
    .name = "avx2-vpclmul",
    AVX2_ENTRIES,
    .f16_enc_sum = gcomp_cast_f16_enc_sum_avx2v,
    .bf16_enc_sum = gcomp_cast_bf16_enc_sum_avx2v,
    .f16_dec_add_sum = gcomp_cast_f16_dec_add_sum_avx2v,
    .bf16_dec_add_sum = gcomp_cast_bf16_dec_add_sum_avx2v,
};
