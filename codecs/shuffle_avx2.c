/* Byte-plane split and join in AVX2 for 2- and 4-byte elements (bf16/fp16 and fp32/u32):
 * in-lane byte shuffles, then cross-lane permutes. Other widths, and the tail that does
 * not fill a whole block, go to the portable twin. */
#include <immintrin.h>

#include "lossless.h"

static void split2(const uint8_t *restrict in, size_t blocks, uint8_t *const *planes) {
  /* per 128-bit lane: the 8 low bytes, then the 8 high bytes */
  const __m256i grp = _mm256_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15,
                                       0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
  uint8_t *p0 = planes[0], *p1 = planes[1];
  for (size_t k = 0; k < blocks; k++) {   /* 32 elements, 64 bytes */
    __m256i a = _mm256_loadu_si256((const __m256i *)(in + 64 * k));
    __m256i b = _mm256_loadu_si256((const __m256i *)(in + 64 * k + 32));
    /* qwords: lo(e0-7) hi(e0-7) lo(e8-15) hi(e8-15) -> lo lo hi hi */
    a = _mm256_permute4x64_epi64(_mm256_shuffle_epi8(a, grp), 0xd8);
    b = _mm256_permute4x64_epi64(_mm256_shuffle_epi8(b, grp), 0xd8);
    _mm256_storeu_si256((__m256i *)(p0 + 32 * k), _mm256_permute2x128_si256(a, b, 0x20));
    _mm256_storeu_si256((__m256i *)(p1 + 32 * k), _mm256_permute2x128_si256(a, b, 0x31));
  }
}

static void split4(const uint8_t *restrict in, size_t blocks, uint8_t *const *planes) {
  /* per lane: byte 0 of its 4 elements, then byte 1, 2, 3 (one dword each) */
  const __m256i grp = _mm256_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15,
                                       0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  /* dwords -> qword j holds plane j of the vector's 8 elements */
  const __m256i perm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  uint8_t *p0 = planes[0], *p1 = planes[1], *p2 = planes[2], *p3 = planes[3];
  for (size_t k = 0; k < blocks; k++) {   /* 32 elements, 128 bytes */
    const uint8_t *s = in + 128 * k;
    __m256i v0 = _mm256_permutevar8x32_epi32(
        _mm256_shuffle_epi8(_mm256_loadu_si256((const __m256i *)s), grp), perm);
    __m256i v1 = _mm256_permutevar8x32_epi32(
        _mm256_shuffle_epi8(_mm256_loadu_si256((const __m256i *)(s + 32)), grp), perm);
    __m256i v2 = _mm256_permutevar8x32_epi32(
        _mm256_shuffle_epi8(_mm256_loadu_si256((const __m256i *)(s + 64)), grp), perm);
    __m256i v3 = _mm256_permutevar8x32_epi32(
        _mm256_shuffle_epi8(_mm256_loadu_si256((const __m256i *)(s + 96)), grp), perm);
    __m256i t0 = _mm256_unpacklo_epi64(v0, v1), t1 = _mm256_unpackhi_epi64(v0, v1);
    __m256i t2 = _mm256_unpacklo_epi64(v2, v3), t3 = _mm256_unpackhi_epi64(v2, v3);
    _mm256_storeu_si256((__m256i *)(p0 + 32 * k), _mm256_permute2x128_si256(t0, t2, 0x20));
    _mm256_storeu_si256((__m256i *)(p1 + 32 * k), _mm256_permute2x128_si256(t1, t3, 0x20));
    _mm256_storeu_si256((__m256i *)(p2 + 32 * k), _mm256_permute2x128_si256(t0, t2, 0x31));
    _mm256_storeu_si256((__m256i *)(p3 + 32 * k), _mm256_permute2x128_si256(t1, t3, 0x31));
  }
}

static void join2(const uint8_t *const *planes, size_t blocks, uint8_t *restrict out) {
  const uint8_t *p0 = planes[0], *p1 = planes[1];
  for (size_t k = 0; k < blocks; k++) {
    __m256i a = _mm256_loadu_si256((const __m256i *)(p0 + 32 * k));
    __m256i b = _mm256_loadu_si256((const __m256i *)(p1 + 32 * k));
    __m256i lo = _mm256_unpacklo_epi8(a, b);   /* lanes: e0-7, e16-23 */
    __m256i hi = _mm256_unpackhi_epi8(a, b);   /* lanes: e8-15, e24-31 */
    _mm256_storeu_si256((__m256i *)(out + 64 * k), _mm256_permute2x128_si256(lo, hi, 0x20));
    _mm256_storeu_si256((__m256i *)(out + 64 * k + 32), _mm256_permute2x128_si256(lo, hi, 0x31));
  }
}

static void join4(const uint8_t *const *planes, size_t blocks, uint8_t *restrict out) {
  const uint8_t *p0 = planes[0], *p1 = planes[1], *p2 = planes[2], *p3 = planes[3];
  for (size_t k = 0; k < blocks; k++) {
    __m256i a = _mm256_loadu_si256((const __m256i *)(p0 + 32 * k));
    __m256i b = _mm256_loadu_si256((const __m256i *)(p1 + 32 * k));
    __m256i c = _mm256_loadu_si256((const __m256i *)(p2 + 32 * k));
    __m256i d = _mm256_loadu_si256((const __m256i *)(p3 + 32 * k));
    __m256i ablo = _mm256_unpacklo_epi8(a, b), abhi = _mm256_unpackhi_epi8(a, b);
    __m256i cdlo = _mm256_unpacklo_epi8(c, d), cdhi = _mm256_unpackhi_epi8(c, d);
    __m256i y0 = _mm256_unpacklo_epi16(ablo, cdlo);   /* lanes: e0-3, e16-19 */
    __m256i y1 = _mm256_unpackhi_epi16(ablo, cdlo);   /* e4-7, e20-23 */
    __m256i y2 = _mm256_unpacklo_epi16(abhi, cdhi);   /* e8-11, e24-27 */
    __m256i y3 = _mm256_unpackhi_epi16(abhi, cdhi);   /* e12-15, e28-31 */
    uint8_t *o = out + 128 * k;
    _mm256_storeu_si256((__m256i *)o, _mm256_permute2x128_si256(y0, y1, 0x20));
    _mm256_storeu_si256((__m256i *)(o + 32), _mm256_permute2x128_si256(y2, y3, 0x20));
    _mm256_storeu_si256((__m256i *)(o + 64), _mm256_permute2x128_si256(y0, y1, 0x31));
    _mm256_storeu_si256((__m256i *)(o + 96), _mm256_permute2x128_si256(y2, y3, 0x31));
  }
}

static void split_avx2(const uint8_t *restrict in, size_t elems, unsigned width,
                       uint8_t *const *planes) {
  if (width != 2 && width != 4) {
    gcomp_split_planes_base(in, elems, width, planes);
    return;
  }
  size_t blocks = elems / 32, done = blocks * 32;
  if (width == 2) split2(in, blocks, planes);
  else split4(in, blocks, planes);
  uint8_t *rest[4];
  for (unsigned b = 0; b < width; b++) rest[b] = planes[b] + done;
  gcomp_split_planes_base(in + done * width, elems - done, width, rest);
}

static void join_avx2(const uint8_t *const *planes, size_t elems, unsigned width,
                      uint8_t *restrict out) {
  if (width != 2 && width != 4) {
    gcomp_join_planes_base(planes, elems, width, out);
    return;
  }
  size_t blocks = elems / 32, done = blocks * 32;
  if (width == 2) join2(planes, blocks, out);
  else join4(planes, blocks, out);
  const uint8_t *rest[4];
  for (unsigned b = 0; b < width; b++) rest[b] = planes[b] + done;
  gcomp_join_planes_base(rest, elems - done, width, out + done * width);
}

const gcomp_shuffle_kernels gcomp_shuffle_kernels_avx2 = {
    .name = "avx2",
    .split = split_avx2,
    .join = join_avx2,
};
