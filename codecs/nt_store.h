/* Internal: how the AVX-512 block kernels store 64 bytes of a frame's payload. Streaming
 * (non-temporal) stores need an aligned address, and a payload sits 32 bytes past its
 * frame's header, so a 64-byte aligned frame has a payload that is only 32-byte aligned,
 * and a frame from malloc one that may be only 16-byte aligned: each 64 bytes then goes
 * out as two or four aligned streaming stores rather than as plain stores (which would
 * read every line of the output into the cache before writing it). */
#ifndef GCOMP_NT_STORE_H
#define GCOMP_NT_STORE_H

#include <immintrin.h>
#include <stdint.h>

#if defined(__AVX512F__)
enum { GCOMP_ST_PLAIN, GCOMP_ST_NT16, GCOMP_ST_NT32, GCOMP_ST_NT64 };

/* The widest streaming store dst allows (stream set), else plain stores. */
static inline int gcomp_store_mode(const uint8_t *dst, int stream) {
  uintptr_t a = (uintptr_t)dst;
  if (!stream || (a & 15)) return GCOMP_ST_PLAIN;
  return !(a & 63) ? GCOMP_ST_NT64 : !(a & 31) ? GCOMP_ST_NT32 : GCOMP_ST_NT16;
}

/* 64 bytes at d (d keeps the alignment the mode was chosen for). */
static inline void gcomp_store64(uint8_t *d, __m512i v, int mode) {
  switch (mode) {
  case GCOMP_ST_NT64:
    _mm512_stream_si512((void *)d, v);
    break;
  case GCOMP_ST_NT32:
    _mm256_stream_si256((__m256i *)d, _mm512_castsi512_si256(v));
    _mm256_stream_si256((__m256i *)(d + 32), _mm512_extracti64x4_epi64(v, 1));
    break;
  case GCOMP_ST_NT16:
    _mm_stream_si128((__m128i *)d, _mm512_castsi512_si128(v));
    _mm_stream_si128((__m128i *)(d + 16), _mm512_extracti32x4_epi32(v, 1));
    _mm_stream_si128((__m128i *)(d + 32), _mm512_extracti32x4_epi32(v, 2));
    _mm_stream_si128((__m128i *)(d + 48), _mm512_extracti32x4_epi32(v, 3));
    break;
  default:
    _mm512_storeu_si512(d, v);
  }
}
#endif

#endif /* GCOMP_NT_STORE_H */
