/* AVX-512 (F, BW, VL) fp16/bf16 cast kernels: 16 lanes a vector, mask registers for the
 * counters and the NaN lanes. Same results as cast_base.c bit for bit (rules in cast.h);
 * tails shorter than a vector and heads that align a streaming store go through the base
 * kernels. The block-summing encoders fold their checksum on zmm with VPCLMULQDQ (this
 * file is also built with -mvpclmulqdq; gcomp_cast_kernels_get hands them out only on a
 * CPU that has it, else the AVX2 ones). bf16 rounds with integer operations rather than
 * AVX512_BF16's vcvtne2ps2bf16, which flushes fp32 subnormals to zero (the rule here
 * keeps them) and would need a fix-up pass anyway: the kernel is bound by memory, not by
 * those few instructions. */
#include <immintrin.h>
#include <string.h>

#include "cast.h"
#include "crc_fold.h"
#include "nt_store.h"
#include "rand_simd.h"

#define SET1(v) _mm512_set1_epi32((int)(v))


/* ---- max |x| over finite x -------------------------------------------------------------- */
static inline __m512i finite_abs(__m512i w) {
  __m512i a = _mm512_and_si512(w, SET1(0x7fffffff));
  return _mm512_maskz_mov_epi32(_mm512_cmplt_epu32_mask(a, SET1(0x7f800000)), a);
}

static uint32_t maxabs_avx512(const float *src, size_t n) {
  __m512i m0 = _mm512_setzero_si512(), m1 = m0;
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    m0 = _mm512_max_epu32(m0, finite_abs(_mm512_loadu_si512(src + i)));
    m1 = _mm512_max_epu32(m1, finite_abs(_mm512_loadu_si512(src + i + 16)));
  }
  for (; i + 16 <= n; i += 16)
    m0 = _mm512_max_epu32(m0, finite_abs(_mm512_loadu_si512(src + i)));
  uint32_t mx = _mm512_reduce_max_epu32(_mm512_max_epu32(m0, m1));
  uint32_t t = gcomp_cast_base.maxabs(src + i, n - i);
  return t > mx ? t : mx;
}

/* ---- round-to-nearest-even encoders ------------------------------------------------------
 * The three counters from masks of |x|: NaN/Inf, at or past the overflow threshold, and
 * nonzero at or below the underflow one (thresholds moved by the scale, as in cast_avx2.c);
 * popcounts only when a vector holds any of them. */
typedef struct {
  uint32_t hi, lo;
} thresholds;

static inline void count16(__m512i a0, thresholds t, gcomp_cast_counts *k) {
  __mmask16 nf = _mm512_cmpgt_epu32_mask(a0, SET1(0x7f7fffff));
  __mmask16 hi = _mm512_cmpge_epu32_mask(a0, SET1(t.hi));
  __mmask16 lo = _mm512_mask_cmple_epu32_mask(_mm512_test_epi32_mask(a0, a0), a0, SET1(t.lo));
  if (__builtin_expect(!_kortestz_mask16_u8(hi, lo), 0)) {
    k->nonfinite += (uint64_t)__builtin_popcount(nf);
    k->overflow += (uint64_t)__builtin_popcount(hi & (__mmask16)~nf);
    k->underflow += (uint64_t)__builtin_popcount(lo);
  }
}

/* 16 fp16 halves of x * scale; m gathers the finite maximum of |x|. One masked compare
 * tells the common vector, every lane zero or strictly between the thresholds (finite,
 * nothing to count: |x| - (lo + 1) < hi - lo - 1 unsigned), from one that needs the
 * counters and the mask of its non-finite lanes. */
static inline __m256i f16_vec(const float *p, __m512 sc, thresholds t, __m512i *m,
                              gcomp_cast_counts *k) {
  __m512 x = _mm512_loadu_ps(p);
  __m512i a0 = _mm512_and_si512(_mm512_castps_si512(x), SET1(0x7fffffff));
  __mmask16 odd = _mm512_mask_cmpge_epu32_mask(_mm512_test_epi32_mask(a0, a0),
                                               _mm512_sub_epi32(a0, SET1(t.lo + 1)),
                                               SET1(t.hi - t.lo - 1));
  if (__builtin_expect(odd != 0, 0)) {
    count16(a0, t, k);
    a0 = _mm512_maskz_mov_epi32(_mm512_cmplt_epu32_mask(a0, SET1(0x7f800000)), a0);
  }
  *m = _mm512_max_epu32(*m, a0);
  return _mm512_cvtps_ph(_mm512_mul_ps(x, sc), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}

static uint32_t f16_enc_avx512(const float *src, size_t n, uint8_t *dst, float scale,
                               gcomp_cast_counts *c) {
  gcomp_cast_counts k = {0, 0, 0};
  thresholds t;
  gcomp_cast_f16_thresholds(scale, &t.hi, &t.lo);
  const __m512 sc = _mm512_set1_ps(scale);
  __m512i m0 = _mm512_setzero_si512(), m1 = m0;
  uint32_t mx = 0;
  size_t i = 0;
  int nt = gcomp_cast_streaming(2 * n);
  if (nt) {
    i = gcomp_cast_head_for(dst, 2, 32, n);
    mx = gcomp_cast_base.f16_enc(src, i, dst, scale, &k);
    for (; i + 32 <= n; i += 32) {
      _mm256_stream_si256((__m256i *)(dst + 2 * i), f16_vec(src + i, sc, t, &m0, &k));
      _mm256_stream_si256((__m256i *)(dst + 2 * i + 32), f16_vec(src + i + 16, sc, t, &m1, &k));
    }
    _mm_sfence();
  }
  for (; i + 16 <= n; i += 16)
    _mm256_storeu_si256((__m256i *)(dst + 2 * i), f16_vec(src + i, sc, t, &m0, &k));
  uint32_t v = _mm512_reduce_max_epu32(_mm512_max_epu32(m0, m1));
  mx = v > mx ? v : mx;
  v = gcomp_cast_base.f16_enc(src + i, n - i, dst + 2 * i, scale, &k);
  mx = v > mx ? v : mx;
  gcomp_cast_add_counts(c, &k);
  return mx;
}

/* 16 bf16 halves of the fp32 bits w: round to nearest even, NaN quieted (cast.h) */
static inline __m256i bf16_vec(const float *p, gcomp_cast_counts *k) {
  const thresholds t = {0x7f7f8000u, 0x8000u};
  __m512i w = _mm512_loadu_si512(p);
  __m512i a = _mm512_and_si512(w, SET1(0x7fffffff));
  count16(a, t, k);
  __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(w, 16), SET1(1));
  __m512i r = _mm512_srli_epi32(_mm512_add_epi32(w, _mm512_add_epi32(SET1(0x7fff), lsb)), 16);
  __m512i q = _mm512_or_si512(_mm512_srli_epi32(w, 16), SET1(0x40));
  r = _mm512_mask_blend_epi32(_mm512_cmpgt_epu32_mask(a, SET1(0x7f800000)), r, q);
  return _mm512_cvtepi32_epi16(r);
}

static void bf16_enc_avx512(const float *src, size_t n, uint8_t *dst, gcomp_cast_counts *c) {
  gcomp_cast_counts k = {0, 0, 0};
  size_t i = 0;
  if (gcomp_cast_streaming(2 * n)) {
    i = gcomp_cast_head_for(dst, 2, 32, n);
    gcomp_cast_base.bf16_enc(src, i, dst, &k);
    for (; i + 32 <= n; i += 32) {
      _mm256_stream_si256((__m256i *)(dst + 2 * i), bf16_vec(src + i, &k));
      _mm256_stream_si256((__m256i *)(dst + 2 * i + 32), bf16_vec(src + i + 16, &k));
    }
    _mm_sfence();
  }
  for (; i + 16 <= n; i += 16)
    _mm256_storeu_si256((__m256i *)(dst + 2 * i), bf16_vec(src + i, &k));
  gcomp_cast_base.bf16_enc(src + i, n - i, dst + 2 * i, &k);
  gcomp_cast_add_counts(c, &k);
}

/* ---- one frame block, its CRC-32C folded in registers (n a multiple of 32) --------------
 * Streaming stores at any 16-byte alignment of the output (nt_store.h). */

static uint32_t f16_enc_sum_avx512(const float *src, size_t n, uint8_t *dst, float scale,
                                   gcomp_cast_counts *c, uint32_t *mx, int stream) {
  gcomp_cast_counts k = {0, 0, 0};
  thresholds t;
  gcomp_cast_f16_thresholds(scale, &t.hi, &t.lo);
  const __m512 sc = _mm512_set1_ps(scale);
  __m512i m0 = _mm512_setzero_si512(), m1 = m0, f = m0;
  int mode = gcomp_store_mode(dst, stream);
  int realign = mode == GCOMP_ST_NT16 || mode == GCOMP_ST_NT32;   /* whole lines streamed */
  gcomp_nt_run run = {NULL, _mm512_setzero_si512(), 16};   /* set by the first chunk */
  for (size_t i = 0; i < n; i += 32) {
    _mm_prefetch((const char *)(src + i) + GCOMP_CAST_PREFETCH_BYTES, _MM_HINT_T0);
    _mm_prefetch((const char *)(src + i) + GCOMP_CAST_PREFETCH_BYTES + 64, _MM_HINT_T0);
    __m512i v = _mm512_inserti64x4(_mm512_castsi256_si512(f16_vec(src + i, sc, t, &m0, &k)),
                                   f16_vec(src + i + 16, sc, t, &m1, &k), 1);
    if (!realign) gcomp_store64(dst + 2 * i, v, mode);
    else if (i) gcomp_nt_run_next(&run, v);
    else gcomp_nt_run_first(&run, dst, v);
    f = i ? gcomp_crc_fold512_64(f, v) : gcomp_crc_fold512_init(v, 0xffffffffu);
  }
  if (realign) gcomp_nt_run_end(&run);
  if (mode != GCOMP_ST_PLAIN) _mm_sfence();
  gcomp_cast_add_counts(c, &k);
  *mx = _mm512_reduce_max_epu32(_mm512_max_epu32(m0, m1));
  return ~gcomp_crc_fold512_end(f);
}

static uint32_t bf16_enc_sum_avx512(const float *src, size_t n, uint8_t *dst,
                                    gcomp_cast_counts *c, int stream) {
  gcomp_cast_counts k = {0, 0, 0};
  __m512i f = _mm512_setzero_si512();
  int mode = gcomp_store_mode(dst, stream);
  for (size_t i = 0; i < n; i += 32) {
    __m512i v = _mm512_inserti64x4(_mm512_castsi256_si512(bf16_vec(src + i, &k)),
                                   bf16_vec(src + i + 16, &k), 1);
    gcomp_store64(dst + 2 * i, v, mode);
    f = i ? gcomp_crc_fold512_64(f, v) : gcomp_crc_fold512_init(v, 0xffffffffu);
  }
  if (mode != GCOMP_ST_PLAIN) _mm_sfence();
  gcomp_cast_add_counts(c, &k);
  return ~gcomp_crc_fold512_end(f);
}

/* ---- stochastic rounding (gcomp_cast_rand for 16 lanes: rand_simd.h) -------------------- */
/* counters of one vector: a0 the input magnitude, hmag the output magnitude */
static inline void sr_count(__m512i a0, __m512i hmag, uint32_t inf16, gcomp_cast_counts *k) {
  __mmask16 nf = _mm512_cmpgt_epu32_mask(a0, SET1(0x7f7fffff));
  __mmask16 ov = _mm512_mask_cmpeq_epi32_mask((__mmask16)~nf, hmag, SET1(inf16));
  __mmask16 uf = _mm512_mask_cmpeq_epi32_mask(_mm512_test_epi32_mask(a0, a0), hmag,
                                              _mm512_setzero_si512());
  k->nonfinite += (uint64_t)__builtin_popcount(nf);
  k->overflow += (uint64_t)__builtin_popcount(ov);
  k->underflow += (uint64_t)__builtin_popcount(uf);
}

/* fp16 magnitude of |y| = a with random bits r (f16_sr_mag of cast_base.c) */
static inline __m512i f16_sr16(__m512i a, __m512i r) {
  __m512i t = _mm512_and_si512(_mm512_add_epi32(a, _mm512_srli_epi32(r, 19)), SET1(~0x1fffu));
  __m512i hn = _mm512_min_epu32(_mm512_srli_epi32(_mm512_sub_epi32(t, SET1(0x38000000)), 13),
                                SET1(0x7c00));
  __m512i e = _mm512_srli_epi32(a, 23);
  __m512i mant = _mm512_and_si512(a, SET1(0x7fffff));
  __m512i m = _mm512_mask_or_epi32(mant, _mm512_test_epi32_mask(e, e), mant, SET1(0x800000));
  __m512i s = _mm512_sub_epi32(SET1(126), _mm512_max_epi32(e, SET1(1)));
  __m512i frac = _mm512_or_si512(_mm512_sllv_epi32(m, _mm512_sub_epi32(SET1(32), s)),
                                 _mm512_srlv_epi32(m, _mm512_sub_epi32(s, SET1(32))));
  __mmask16 up = _mm512_cmpgt_epu32_mask(frac, r);
  __m512i q = _mm512_srlv_epi32(m, s);
  __m512i hs = _mm512_mask_add_epi32(q, up, q, SET1(1));
  __m512i sp = _mm512_or_si512(SET1(0x7c00),
                               _mm512_and_si512(_mm512_srli_epi32(a, 13), SET1(0x3ff)));
  sp = _mm512_mask_or_epi32(sp, _mm512_cmpgt_epu32_mask(a, SET1(0x7f800000)), sp, SET1(0x200));
  __m512i h = _mm512_mask_blend_epi32(_mm512_cmpgt_epu32_mask(a, SET1(0x387fffff)), hs, hn);
  return _mm512_mask_blend_epi32(_mm512_cmpgt_epu32_mask(a, SET1(0x7f7fffff)), h, sp);
}

static void f16_enc_sr_avx512(const float *src, size_t n, uint8_t *dst, float scale,
                              uint64_t key, uint32_t i0, gcomp_cast_counts *c) {
  const __m512i klo = SET1((uint32_t)key), khi = SET1((uint32_t)(key >> 32));
  const __m512 sc = _mm512_set1_ps(scale);
  __m512i idx = _mm512_add_epi32(SET1(i0), _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10,
                                                             11, 12, 13, 14, 15));
  gcomp_cast_counts k = {0, 0, 0};
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m512 x = _mm512_loadu_ps(src + i);
    __m512i w = _mm512_castps_si512(x), a0 = _mm512_and_si512(w, SET1(0x7fffffff));
    __m512i a = _mm512_and_si512(_mm512_castps_si512(_mm512_mul_ps(x, sc)), SET1(0x7fffffff));
    __m512i h = f16_sr16(a, gcomp_rand16(idx, klo, khi));
    idx = _mm512_add_epi32(idx, SET1(16));
    sr_count(a0, h, 0x7c00, &k);
    h = _mm512_or_si512(h, _mm512_and_si512(_mm512_srli_epi32(w, 16), SET1(0x8000)));
    _mm256_storeu_si256((__m256i *)(dst + 2 * i), _mm512_cvtepi32_epi16(h));
  }
  gcomp_cast_base.f16_enc_sr(src + i, n - i, dst + 2 * i, scale, key, i0 + (uint32_t)i, &k);
  gcomp_cast_add_counts(c, &k);
}

static void bf16_enc_sr_avx512(const float *src, size_t n, uint8_t *dst, uint64_t key,
                               uint32_t i0, gcomp_cast_counts *c) {
  const __m512i klo = SET1((uint32_t)key), khi = SET1((uint32_t)(key >> 32));
  __m512i idx = _mm512_add_epi32(SET1(i0), _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10,
                                                             11, 12, 13, 14, 15));
  gcomp_cast_counts k = {0, 0, 0};
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m512i w = _mm512_loadu_si512(src + i), a0 = _mm512_and_si512(w, SET1(0x7fffffff));
    __m512i r = gcomp_rand16(idx, klo, khi);
    idx = _mm512_add_epi32(idx, SET1(16));
    __m512i h = _mm512_srli_epi32(_mm512_add_epi32(w, _mm512_srli_epi32(r, 16)), 16);
    __m512i q = _mm512_or_si512(_mm512_srli_epi32(w, 16), SET1(0x40));
    h = _mm512_mask_blend_epi32(_mm512_cmpgt_epu32_mask(a0, SET1(0x7f800000)), h, q);
    sr_count(a0, _mm512_and_si512(h, SET1(0x7fff)), 0x7f80, &k);
    _mm256_storeu_si256((__m256i *)(dst + 2 * i), _mm512_cvtepi32_epi16(h));
  }
  gcomp_cast_base.bf16_enc_sr(src + i, n - i, dst + 2 * i, key, i0 + (uint32_t)i, &k);
  gcomp_cast_add_counts(c, &k);
}

/* ---- decoders --------------------------------------------------------------------------- */
static inline __m512 f16_widen16(const uint8_t *p, __m512 inv) {
  return _mm512_mul_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p)), inv);
}
static inline __m512 bf16_widen16(const uint8_t *p) {
  __m512i v = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)p));
  return _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
}

static void f16_dec_nt_avx512(const uint8_t *src, size_t n, float *dst, float inv_scale,
                              int nt) {
  const __m512 inv = _mm512_set1_ps(inv_scale);
  size_t i = 0;
  if (nt) {
    i = gcomp_cast_head_for(dst, 4, 64, n);
    gcomp_cast_base.f16_dec(src, i, dst, inv_scale);
    for (; i + 16 <= n; i += 16) _mm512_stream_ps(dst + i, f16_widen16(src + 2 * i, inv));
    _mm_sfence();
  }
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(dst + i, f16_widen16(src + 2 * i, inv));
  gcomp_cast_base.f16_dec(src + 2 * i, n - i, dst + i, inv_scale);
}
static void f16_dec_avx512(const uint8_t *src, size_t n, float *dst, float inv_scale) {
  f16_dec_nt_avx512(src, n, dst, inv_scale, gcomp_cast_streaming(4 * n));
}

static void bf16_dec_nt_avx512(const uint8_t *src, size_t n, float *dst, int nt) {
  size_t i = 0;
  if (nt) {
    i = gcomp_cast_head_for(dst, 4, 64, n);
    gcomp_cast_base.bf16_dec(src, i, dst);
    for (; i + 16 <= n; i += 16) _mm512_stream_ps(dst + i, bf16_widen16(src + 2 * i));
    _mm_sfence();
  }
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(dst + i, bf16_widen16(src + 2 * i));
  gcomp_cast_base.bf16_dec(src + 2 * i, n - i, dst + i);
}
static void bf16_dec_avx512(const uint8_t *src, size_t n, float *dst) {
  bf16_dec_nt_avx512(src, n, dst, gcomp_cast_streaming(4 * n));
}

/* 16 decoded values at p: fp16 times inv (f16 set), else bf16 */
static inline __m512 widen16(const uint8_t *p, int f16, __m512 inv) {
  return f16 ? f16_widen16(p, inv) : bf16_widen16(p);
}
static inline void add16(float *acc, const uint8_t *p, int f16, __m512 inv) {
  _mm512_storeu_ps(acc, _mm512_add_ps(_mm512_loadu_ps(acc), widen16(p, f16, inv)));
}

/* decode_add streams two inputs (payload and accumulator): both prefetched ahead */
static inline void dec_add_prefetch(const uint8_t *src, const float *acc) {
  _mm_prefetch((const char *)acc + GCOMP_CAST_PREFETCH_BYTES, _MM_HINT_T0);
  _mm_prefetch((const char *)src + GCOMP_CAST_PREFETCH_BYTES / 2, _MM_HINT_T0);
}

static inline void dec_add(const uint8_t *src, size_t n, float *acc, int f16, float inv_scale) {
  const __m512 inv = _mm512_set1_ps(inv_scale);
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    dec_add_prefetch(src + 2 * i, acc + i);
    add16(acc + i, src + 2 * i, f16, inv);
  }
  gcomp_cast_dec_add_tail(src + 2 * i, n - i, acc + i, f16, inv_scale);
}
GCOMP_CAST_DEC_ADD_ENTRIES(avx512)

/* One block added while the next one's CRC folds on zmm: per 32 values, two accumulator
 * lines and a payload line of this block (in cache: its CRC was taken during the block
 * before) and one payload line of the next block, all in one stream. */
static inline uint32_t dec_add_sum(const uint8_t *src, size_t n, float *acc, const uint8_t *next,
                                   int f16, float inv_scale) {
  const __m512 inv = _mm512_set1_ps(inv_scale);
  __m512i f = gcomp_crc_fold512_init(_mm512_loadu_si512(next), 0xffffffffu);
  for (size_t i = 0; i < n; i += 32) {
    _mm_prefetch((const char *)(acc + i) + GCOMP_CAST_DEC_PREFETCH_BYTES, _MM_HINT_T0);
    _mm_prefetch((const char *)(acc + i) + GCOMP_CAST_DEC_PREFETCH_BYTES + 64, _MM_HINT_T0);
    _mm_prefetch((const char *)(next + 2 * i) + GCOMP_CAST_DEC_PREFETCH_BYTES, _MM_HINT_T0);
    if (i) f = gcomp_crc_fold512_64(f, _mm512_loadu_si512(next + 2 * i));
    add16(acc + i, src + 2 * i, f16, inv);
    add16(acc + i + 16, src + 2 * i + 32, f16, inv);
  }
  return ~gcomp_crc_fold512_end(f);
}
static uint32_t f16_dec_add_sum_avx512(const uint8_t *src, size_t n, float *acc, float inv_scale,
                                       const uint8_t *next) {
  return dec_add_sum(src, n, acc, next, 1, inv_scale);
}
static uint32_t bf16_dec_add_sum_avx512(const uint8_t *src, size_t n, float *acc,
                                        const uint8_t *next) {
  return dec_add_sum(src, n, acc, next, 0, 1.0f);
}

#define AVX512_ENTRIES                                                                    \
  .maxabs = maxabs_avx512, .f16_enc = f16_enc_avx512, .f16_enc_sr = f16_enc_sr_avx512,    \
  .f16_dec = f16_dec_avx512, .f16_dec_add = f16_dec_add_avx512,                           \
  .bf16_enc_sr = bf16_enc_sr_avx512,                                                      \
  .bf16_dec = bf16_dec_avx512, .bf16_dec_add = bf16_dec_add_avx512,                       \
  .f16_dec_nt = f16_dec_nt_avx512, .bf16_dec_nt = bf16_dec_nt_avx512
/* the block-summing kernels that fold on zmm (VPCLMULQDQ) */
#define AVX512_ZMM_SUMS                                                                   \
  .f16_enc_sum = f16_enc_sum_avx512, .f16_dec_add_sum = f16_dec_add_sum_avx512,           \
  .bf16_dec_add_sum = bf16_dec_add_sum_avx512

const gcomp_cast_kernels gcomp_cast_avx512 = {
    .name = "avx512",
    AVX512_ENTRIES,
    AVX512_ZMM_SUMS,
    .bf16_enc = bf16_enc_avx512,
    .bf16_enc_sum = bf16_enc_sum_avx512,
};

/* With AVX512_BF16 as well: bf16 encoders on vcvtne2ps2bf16 (cast_bf16_avx512.c). */
const gcomp_cast_kernels gcomp_cast_avx512bf16 = {
    .name = "avx512bf16",
    AVX512_ENTRIES,
    AVX512_ZMM_SUMS,
    .bf16_enc = gcomp_cast_bf16_enc_avx512bf16,
    .bf16_enc_sum = gcomp_cast_bf16_enc_sum_avx512bf16,
};

/* For AVX-512 CPUs without VPCLMULQDQ (Skylake-X, Cascade Lake): the block sums of the
 * AVX2 table, folded on xmm. */
const gcomp_cast_kernels gcomp_cast_avx512_xmmsum = {
    .name = "avx512-xmmsum",
    AVX512_ENTRIES,
    .bf16_enc = bf16_enc_avx512,
    .f16_enc_sum = gcomp_cast_f16_enc_sum_avx2,
    .bf16_enc_sum = gcomp_cast_bf16_enc_sum_avx2,
    .f16_dec_add_sum = gcomp_cast_f16_dec_add_sum_avx2,
    .bf16_dec_add_sum = gcomp_cast_bf16_dec_add_sum_avx2,
};
