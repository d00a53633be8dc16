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

/* A run of 64-byte chunks from d on, d 16-byte aligned but not 64: rather than two or four
 * narrow streaming stores a chunk (GCOMP_ST_NT16/32, slower than whole-line streaming on a
 * Xeon), each whole line in the run is streamed once: the line at
 * d + h + 64 j (h = bytes from d to the next line) holds chunk j's bytes [h, 64) and chunk
 * j + 1's first h bytes (valignd of the two). The first and last partial lines are
 * written with masked plain stores (masked-off bytes are never touched). */
typedef struct {
  uint8_t *line;   /* the next whole line */
  __m512i prev;    /* the last chunk given */
  unsigned h;      /* 16, 32 or 48 */
} gcomp_nt_run;

static inline __m512i gcomp_nt_join(__m512i next, __m512i prev, unsigned h) {
  switch (h) {   /* valignd takes its shift as an immediate */
  case 16: return _mm512_alignr_epi32(next, prev, 4);
  case 32: return _mm512_alignr_epi32(next, prev, 8);
  default: return _mm512_alignr_epi32(next, prev, 12);
  }
}
static inline void gcomp_nt_run_first(gcomp_nt_run *r, uint8_t *d, __m512i v) {
  r->h = 64 - (unsigned)((uintptr_t)d & 63);
  r->line = d + r->h;
  r->prev = v;
  _mm512_mask_storeu_epi8(d, (__mmask64)((1ull << r->h) - 1), v);
}
static inline void gcomp_nt_run_next(gcomp_nt_run *r, __m512i v) {
  _mm512_stream_si512((void *)r->line, gcomp_nt_join(v, r->prev, r->h));
  r->line += 64;
  r->prev = v;
}
static inline void gcomp_nt_run_end(gcomp_nt_run *r) {
  _mm512_mask_storeu_epi8(r->line, (__mmask64)((1ull << (64 - r->h)) - 1),
                          gcomp_nt_join(_mm512_setzero_si512(), r->prev, r->h));
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
