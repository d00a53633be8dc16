/* The AVX2 table's block kernels for CPUs with VPCLMULQDQ on ymm (Zen 3 and later, Ice Lake
 * and later): each 64 bytes of a frame block folded into its CRC-32C by 4 carry-less
 * multiplications on two ymm rather than 8 on four xmm (codecs/crc_fold.h). The encoders
 * are cast_avx2.c's block encoders with that fold; the decode-and-add kernels fold the next
 * block as they add this one, loading both in one loop, rather than adding and then
 * running ISA-L over the next block (on a Zen 3 that second pass costs 15-25% of the
 * decode-and-add; the fold in the loop is hidden under its memory traffic). Results bit for
 * bit those of cast_base.c (rules in cast.h). */
#include <immintrin.h>

#include "cast.h"
#include "cast_avx2_vec.h"
#include "crc_fold.h"

/* Stores 64 bytes of a block as two or four streaming stores when mode says (dst aligned
 * to 32 or to 16), else plainly, and folds them into the block's checksum. */
enum { ST_PLAIN, ST_NT16, ST_NT32 };
static inline int store_mode(const uint8_t *dst, int stream) {
  uintptr_t a = (uintptr_t)dst;
  return !stream || (a & 15) ? ST_PLAIN : (a & 31) ? ST_NT16 : ST_NT32;
}
static inline void emit64(uint8_t *d, __m256i v0, __m256i v1, int mode, gcomp_crc_fold256 *f,
                          int first) {
  if (mode == ST_NT32) {
    _mm256_stream_si256((__m256i *)d, v0), _mm256_stream_si256((__m256i *)(d + 32), v1);
  } else if (mode == ST_NT16) {
    _mm_stream_si128((__m128i *)d, _mm256_castsi256_si128(v0));
    _mm_stream_si128((__m128i *)(d + 16), _mm256_extracti128_si256(v0, 1));
    _mm_stream_si128((__m128i *)(d + 32), _mm256_castsi256_si128(v1));
    _mm_stream_si128((__m128i *)(d + 48), _mm256_extracti128_si256(v1, 1));
  } else {
    _mm256_storeu_si256((__m256i *)d, v0), _mm256_storeu_si256((__m256i *)(d + 32), v1);
  }
  if (first) gcomp_crc_fold256_init(f, v0, v1, 0xffffffffu);
  else gcomp_crc_fold256_64(f, v0, v1);
}

uint32_t gcomp_cast_f16_enc_sum_avx2v(const float *src, size_t n, uint8_t *dst, float scale,
                                      gcomp_cast_counts *c, uint32_t *mx, int stream) {
  gcomp_cast_counts k = {0, 0, 0};
  uint32_t hi, lo;
  gcomp_cast_f16_thresholds(scale, &hi, &lo);
  const range_test rt = range_init(hi, lo);
  const __m256 sc = _mm256_set1_ps(scale);
  __m256i m0 = _mm256_setzero_si256(), m1 = m0;
  const int mode = store_mode(dst, stream);
  gcomp_crc_fold256 f = {_mm256_setzero_si256(), _mm256_setzero_si256()};
  for (size_t i = 0; i < n; i += 32) {
    gcomp_cast_prefetch128(src + i);
    __m128i h0 = f16_vec(src + i, sc, &rt, &m0, &k), h1 = f16_vec(src + i + 8, sc, &rt, &m1, &k);
    __m128i h2 = f16_vec(src + i + 16, sc, &rt, &m0, &k);
    __m128i h3 = f16_vec(src + i + 24, sc, &rt, &m1, &k);
    emit64(dst + 2 * i, _mm256_set_m128i(h1, h0), _mm256_set_m128i(h3, h2), mode, &f, i == 0);
  }
  if (mode != ST_PLAIN) _mm_sfence();
  gcomp_cast_add_counts(c, &k);
  *mx = hmax_epu32(_mm256_max_epu32(m0, m1));
  return ~gcomp_crc_fold256_end(&f);
}

uint32_t gcomp_cast_bf16_enc_sum_avx2v(const float *src, size_t n, uint8_t *dst,
                                       gcomp_cast_counts *c, int stream) {
  gcomp_cast_counts k = {0, 0, 0};
  const range_test rt = range_init(0x7f7f8000u, 0x8000u);
  const int mode = store_mode(dst, stream);
  gcomp_crc_fold256 f = {_mm256_setzero_si256(), _mm256_setzero_si256()};
  for (size_t i = 0; i < n; i += 32) {
    gcomp_cast_prefetch128(src + i);
    __m256i v0 = bf16_vec(src + i, &rt, &k), v1 = bf16_vec(src + i + 16, &rt, &k);
    emit64(dst + 2 * i, v0, v1, mode, &f, i == 0);
  }
  if (mode != ST_PLAIN) _mm_sfence();
  gcomp_cast_add_counts(c, &k);
  return ~gcomp_crc_fold256_end(&f);
}

/* n values added (a multiple of 32) while the 2n bytes at next are folded: one loop, so
 * the next block's loads go out with the accumulator's and the block's own; all three
 * streams prefetched the same number of values ahead (cast.h). */
static inline uint32_t dec_add_sum(const uint8_t *src, size_t n, float *acc, int f16,
                                   float inv_scale, const uint8_t *next) {
  const __m256 inv = _mm256_set1_ps(inv_scale);
  gcomp_crc_fold256 f;
  gcomp_crc_fold256_init(&f, _mm256_loadu_si256((const __m256i *)next),
                         _mm256_loadu_si256((const __m256i *)(next + 32)), 0xffffffffu);
  for (size_t i = 0; i < n; i += 32) {
    _mm_prefetch((const char *)(acc + i) + GCOMP_CAST_DEC_PREFETCH_AVX2_BYTES, _MM_HINT_T0);
    _mm_prefetch((const char *)(acc + i) + GCOMP_CAST_DEC_PREFETCH_AVX2_BYTES + 64, _MM_HINT_T0);
    _mm_prefetch((const char *)(src + 2 * i) + GCOMP_CAST_DEC_PREFETCH_AVX2_BYTES / 2, _MM_HINT_T0);
    _mm_prefetch((const char *)(next + 2 * i) + GCOMP_CAST_DEC_PREFETCH_AVX2_BYTES / 2, _MM_HINT_T0);
    add8(acc + i, src + 2 * i, f16, inv);
    add8(acc + i + 8, src + 2 * i + 16, f16, inv);
    add8(acc + i + 16, src + 2 * i + 32, f16, inv);
    add8(acc + i + 24, src + 2 * i + 48, f16, inv);
    if (i)
      gcomp_crc_fold256_64(&f, _mm256_loadu_si256((const __m256i *)(next + 2 * i)),
                           _mm256_loadu_si256((const __m256i *)(next + 2 * i + 32)));
  }
  return ~gcomp_crc_fold256_end(&f);
}

uint32_t gcomp_cast_f16_dec_add_sum_avx2v(const uint8_t *src, size_t n, float *acc,
                                          float inv_scale, const uint8_t *next) {
  return dec_add_sum(src, n, acc, 1, inv_scale, next);
}
uint32_t gcomp_cast_bf16_dec_add_sum_avx2v(const uint8_t *src, size_t n, float *acc,
                                           const uint8_t *next) {
  return dec_add_sum(src, n, acc, 0, 1.0f, next);
}
