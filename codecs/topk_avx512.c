/* Top-k filter kernels, AVX-512 (F): sixteen magnitude keys compared into a mask register,
 * the survivors packed with vcompress into a register and stored whole (a compress with a
 * memory destination is microcoded and slow on Zen 4). Blocks with no survivor, most of
 * them at small ratios, cost a load, a compare and a mask test. */
#include <immintrin.h>

#include "topk.h"

/* Appends the lanes of x (and their indices first + lane) selected by m at idx[c], val[c].
 * Writes sixteen slots; only popcount(m) of them count. */
static inline size_t compress16(__m512 x, __mmask16 m, uint32_t first, uint32_t *restrict idx,
                                float *restrict val, size_t c) {
  const __m512i lanes = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  __m512i at = _mm512_add_epi32(_mm512_set1_epi32((int)first), lanes);
  _mm512_storeu_si512(idx + c, _mm512_maskz_compress_epi32(m, at));
  _mm512_storeu_ps(val + c, _mm512_maskz_compress_ps(m, x));
  return c + (size_t)__builtin_popcount(m);
}

static inline __mmask16 selected(__m512 x, __m512i t) {
  __m512i key = _mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32(0x7fffffff));
  return _mm512_cmpge_epu32_mask(key, t);
}

static size_t filter_avx512(const float *restrict src, size_t n, uint32_t t, uint32_t base,
                            uint32_t *restrict idx, float *restrict val) {
  const __m512i tv = _mm512_set1_epi32((int)t);
  size_t c = 0, i = 0;
  for (; i + 32 <= n; i += 32) {
    __m512 x0 = _mm512_loadu_ps(src + i), x1 = _mm512_loadu_ps(src + i + 16);
    __mmask16 m0 = selected(x0, tv), m1 = selected(x1, tv);
    if (_kortestz_mask16_u8(m0, m1)) continue;
    c = compress16(x0, m0, base + (uint32_t)i, idx, val, c);
    c = compress16(x1, m1, base + (uint32_t)i + 16, idx, val, c);
  }
  return c + gcomp_topk_kernels_base.filter(src + i, n - i, t, base + (uint32_t)i, idx + c,
                                            val + c);
}

static size_t filter_ef_avx512(const float *restrict grad, float *restrict residual, size_t n,
                               uint32_t t, uint32_t base, uint32_t *restrict idx,
                               float *restrict val) {
  const __m512i tv = _mm512_set1_epi32((int)t);
  size_t c = 0, i = 0;
  for (; i + 16 <= n; i += 16) {
    __m512 x = _mm512_add_ps(_mm512_loadu_ps(grad + i), _mm512_loadu_ps(residual + i));
    __mmask16 m = selected(x, tv);
    /* the residual keeps what is not sent */
    _mm512_storeu_ps(residual + i, _mm512_maskz_mov_ps((__mmask16)~m, x));
    if (m) c = compress16(x, m, base + (uint32_t)i, idx, val, c);
  }
  return c + gcomp_topk_kernels_base.filter_ef(grad + i, residual + i, n - i, t,
                                               base + (uint32_t)i, idx + c, val + c);
}

const gcomp_topk_kernels gcomp_topk_kernels_avx512 = {filter_avx512, filter_ef_avx512};
