/* Internal: gcomp_cast_rand (codecs/cast.h) for 8 lanes (AVX2) and 16 lanes (AVX-512), for
 * the stochastic-rounding kernels of the *_avx2.c and *_avx512.c files. Each part exists
 * only when the including file's flags allow it. */
#ifndef GCOMP_RAND_SIMD_H
#define GCOMP_RAND_SIMD_H

#include <immintrin.h>

#if defined(__AVX2__)
static inline __m256i gcomp_hash8(__m256i x) {
  x = _mm256_xor_si256(x, _mm256_srli_epi32(x, 16));
  x = _mm256_mullo_epi32(x, _mm256_set1_epi32(0x7feb352d));
  x = _mm256_xor_si256(x, _mm256_srli_epi32(x, 15));
  x = _mm256_mullo_epi32(x, _mm256_set1_epi32((int)0x846ca68bu));
  return _mm256_xor_si256(x, _mm256_srli_epi32(x, 16));
}
/* gcomp_cast_rand(key, idx) for 8 lanes: klo, khi are the key's halves broadcast */
static inline __m256i gcomp_rand8(__m256i idx, __m256i klo, __m256i khi) {
  return gcomp_hash8(_mm256_xor_si256(gcomp_hash8(_mm256_add_epi32(idx, klo)), khi));
}
#endif

#if defined(__AVX512F__)
static inline __m512i gcomp_hash16(__m512i x) {
  x = _mm512_xor_si512(x, _mm512_srli_epi32(x, 16));
  x = _mm512_mullo_epi32(x, _mm512_set1_epi32(0x7feb352d));
  x = _mm512_xor_si512(x, _mm512_srli_epi32(x, 15));
  x = _mm512_mullo_epi32(x, _mm512_set1_epi32((int)0x846ca68bu));
  return _mm512_xor_si512(x, _mm512_srli_epi32(x, 16));
}
static inline __m512i gcomp_rand16(__m512i idx, __m512i klo, __m512i khi) {
  return gcomp_hash16(_mm512_xor_si512(gcomp_hash16(_mm512_add_epi32(idx, klo)), khi));
}
#endif

#endif /* GCOMP_RAND_SIMD_H */
