/* Internal: CRC-32C of a kernel's output while it is still in registers, by carry-less
 * multiplication (the folding method of Gopal et al., "Fast CRC Computation for Generic
 * Polynomials Using PCLMULQDQ", Intel 2009, for the reflected Castagnoli polynomial). A
 * kernel that writes a frame block with streaming stores folds every 64 bytes it stores
 * into four 128-bit accumulators; at the end of the block the accumulators fold into one
 * 128-bit value with the same remainder, whose CRC the crc32 instruction takes. So the
 * block's checksum costs a few multiplications per 64 bytes and no read of the output.
 *
 * The constants: K(e) = bitreflect32(x^e mod P) << 1. Moving 16 bytes A forward by d bytes
 * (the CRC of A followed by d zero bytes equals the CRC of the moved value) multiplies the
 * low qword of A by K(8d + 32) and the high qword by K(8d - 32) and adds the products.
 * tests/unit/test_crc_fold.c checks them against ISA-L's crc32_iscsi.
 *
 * Included by *_avx2.c (PCLMULQDQ on xmm; with -mvpclmulqdq, VPCLMULQDQ on ymm) and
 * *_avx512.c (VPCLMULQDQ on zmm); each part exists only when the file's flags allow it. */
#ifndef GCOMP_CRC_FOLD_H
#define GCOMP_CRC_FOLD_H

#include <immintrin.h>
#include <stdint.h>

#define GCOMP_K_FOLD64_LO 0x740eef02ull    /* K(544): 64 bytes */
#define GCOMP_K_FOLD64_HI 0x9e4addf8ull    /* K(480) */
#define GCOMP_K_FOLD48_LO 0x1c291d04ull    /* K(416): 48 bytes */
#define GCOMP_K_FOLD48_HI 0x1d82c63daull   /* K(352) */
#define GCOMP_K_FOLD32_LO 0x1384aa63aull   /* K(288): 32 bytes */
#define GCOMP_K_FOLD32_HI 0xba4fc28eull    /* K(224) */
#define GCOMP_K_FOLD16_LO 0xf20c0dfeull    /* K(160): 16 bytes */
#define GCOMP_K_FOLD16_HI 0x14cd00bd6ull   /* K(96) */

#if defined(__PCLMUL__) && defined(__SSE4_2__)
/* A moved forward by the distance whose constants k holds (lo qword, hi qword) */
static inline __m128i gcomp_fold128(__m128i a, __m128i k) {
  return _mm_xor_si128(_mm_clmulepi64_si128(a, k, 0x00), _mm_clmulepi64_si128(a, k, 0x11));
}
static inline __m128i gcomp_fold_k(uint64_t lo, uint64_t hi) {
  return _mm_set_epi64x((long long)hi, (long long)lo);
}

/* The running CRC of a block: four accumulators, each holding every fourth 16 bytes. */
typedef struct {
  __m128i a[4];
} gcomp_crc_fold;
#define GCOMP_CRC_FOLD_ZERO \
  {{_mm_setzero_si128(), _mm_setzero_si128(), _mm_setzero_si128(), _mm_setzero_si128()}}

/* Starts with the block's first 64 bytes v0..v3 (in order) and the CRC register seed
 * (0xffffffff for the standard CRC-32C): the seed goes into the first 4 bytes. */
static inline void gcomp_crc_fold_init(gcomp_crc_fold *f, __m128i v0, __m128i v1, __m128i v2,
                                       __m128i v3, uint32_t seed) {
  f->a[0] = _mm_xor_si128(v0, _mm_cvtsi32_si128((int)seed));
  f->a[1] = v1, f->a[2] = v2, f->a[3] = v3;
}

/* Adds the next 64 bytes. */
static inline void gcomp_crc_fold_64(gcomp_crc_fold *f, __m128i v0, __m128i v1, __m128i v2,
                                     __m128i v3) {
  const __m128i k = gcomp_fold_k(GCOMP_K_FOLD64_LO, GCOMP_K_FOLD64_HI);
  f->a[0] = _mm_xor_si128(gcomp_fold128(f->a[0], k), v0);
  f->a[1] = _mm_xor_si128(gcomp_fold128(f->a[1], k), v1);
  f->a[2] = _mm_xor_si128(gcomp_fold128(f->a[2], k), v2);
  f->a[3] = _mm_xor_si128(gcomp_fold128(f->a[3], k), v3);
}

/* The raw CRC register after everything folded so far (the standard CRC-32C is its
 * complement when the seed was 0xffffffff). */
static inline uint32_t gcomp_crc_fold_end(const gcomp_crc_fold *f) {
  __m128i x = gcomp_fold128(f->a[0], gcomp_fold_k(GCOMP_K_FOLD48_LO, GCOMP_K_FOLD48_HI));
  x = _mm_xor_si128(x, gcomp_fold128(f->a[1], gcomp_fold_k(GCOMP_K_FOLD32_LO, GCOMP_K_FOLD32_HI)));
  x = _mm_xor_si128(x, gcomp_fold128(f->a[2], gcomp_fold_k(GCOMP_K_FOLD16_LO, GCOMP_K_FOLD16_HI)));
  x = _mm_xor_si128(x, f->a[3]);
  uint64_t c = _mm_crc32_u64(0, (uint64_t)_mm_cvtsi128_si64(x));
  return (uint32_t)_mm_crc32_u64(c, (uint64_t)_mm_extract_epi64(x, 1));
}
#endif

#if defined(__AVX2__) && defined(__VPCLMULQDQ__) && defined(__PCLMUL__) && defined(__SSE4_2__)
/* The same with the four accumulators as the four 128-bit lanes of two ymm: a0 holds the
 * first 32 bytes of every 64, a1 the last 32 (half the multiplications of the xmm fold). */
typedef struct {
  __m256i a0, a1;
} gcomp_crc_fold256;
static inline void gcomp_crc_fold256_init(gcomp_crc_fold256 *f, __m256i v0, __m256i v1,
                                          uint32_t seed) {
  f->a0 = _mm256_xor_si256(v0, _mm256_setr_epi32((int)seed, 0, 0, 0, 0, 0, 0, 0));
  f->a1 = v1;
}
static inline __m256i gcomp_fold256(__m256i a, __m256i k, __m256i v) {
  return _mm256_xor_si256(_mm256_xor_si256(_mm256_clmulepi64_epi128(a, k, 0x00),
                                           _mm256_clmulepi64_epi128(a, k, 0x11)), v);
}
static inline void gcomp_crc_fold256_64(gcomp_crc_fold256 *f, __m256i v0, __m256i v1) {
  const __m256i k = _mm256_broadcastsi128_si256(gcomp_fold_k(GCOMP_K_FOLD64_LO, GCOMP_K_FOLD64_HI));
  f->a0 = gcomp_fold256(f->a0, k, v0);
  f->a1 = gcomp_fold256(f->a1, k, v1);
}
static inline uint32_t gcomp_crc_fold256_end(const gcomp_crc_fold256 *f) {
  gcomp_crc_fold x = {{_mm256_castsi256_si128(f->a0), _mm256_extracti128_si256(f->a0, 1),
                       _mm256_castsi256_si128(f->a1), _mm256_extracti128_si256(f->a1, 1)}};
  return gcomp_crc_fold_end(&x);
}
#endif

#if defined(__AVX512F__) && defined(__VPCLMULQDQ__) && defined(__PCLMUL__) && defined(__SSE4_2__)
/* The same with the four accumulators as the four lanes of one zmm. */
static inline __m512i gcomp_crc_fold512_init(__m512i v, uint32_t seed) {
  return _mm512_xor_si512(v, _mm512_castsi128_si512(_mm_cvtsi32_si128((int)seed)));
}
static inline __m512i gcomp_crc_fold512_64(__m512i a, __m512i v) {
  const __m512i k = _mm512_broadcast_i32x4(gcomp_fold_k(GCOMP_K_FOLD64_LO, GCOMP_K_FOLD64_HI));
  return _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(a, k, 0x00),
                                   _mm512_clmulepi64_epi128(a, k, 0x11), v, 0x96);
}
static inline uint32_t gcomp_crc_fold512_end(__m512i a) {
  gcomp_crc_fold f = {{_mm512_extracti32x4_epi32(a, 0), _mm512_extracti32x4_epi32(a, 1),
                       _mm512_extracti32x4_epi32(a, 2), _mm512_extracti32x4_epi32(a, 3)}};
  return gcomp_crc_fold_end(&f);
}
#endif

#endif /* GCOMP_CRC_FOLD_H */
