/* bf16 round-to-nearest-even encoders on AVX512_BF16 (built with -mavx512bf16; handed out
 * by gcomp_cast_kernels_get only on a CPU that has it, in the table gcomp_cast_avx512bf16).
 *
 * vcvtne2ps2bf16 rounds 32 values to nearest even in one instruction, their order kept,
 * but flushes fp32 subnormals to zero where cast.h's rule keeps them. So each pair of
 * vectors is tested first: where every value is zero or a normal magnitude below the
 * overflow threshold 0x7f7f8000 (the common case of gradients: nothing to fix and nothing
 * to count), the instruction's result is the rule's; a pair holding a nonzero subnormal,
 * a value that rounds to Inf, an Inf or a NaN goes through the portable kernel (which also
 * counts them). One unsigned compare per vector, against AVX-512's integer rounding plus
 * the three counter compares of cast_avx512.c.
 *
 * Streaming stores at any 16-byte alignment of the output, whole lines (nt_store.h). */
#include <immintrin.h>
#include <string.h>

#include "cast.h"
#include "crc_fold.h"
#include "nt_store.h"

#define SET1(v) _mm512_set1_epi32((int)(v))

/* nonzero lanes of |x| outside [2^-126, 0x7f7f8000): e = |x| - 2^-126 wraps below it */
static inline __mmask16 rare16(__m512i w) {
  __m512i a = _mm512_and_si512(w, SET1(0x7fffffff));
  return _mm512_mask_cmpgt_epu32_mask(_mm512_test_epi32_mask(a, a),
                                      _mm512_sub_epi32(a, SET1(0x00800000)), SET1(0x7eff7fff));
}

/* 32 values at p as bf16, in order; a pair with a rare lane is converted by the base rule */
static inline __m512i bf16_32(const float *p, gcomp_cast_counts *k) {
  _mm_prefetch((const char *)p + GCOMP_CAST_PREFETCH_BYTES, _MM_HINT_T0);
  _mm_prefetch((const char *)p + GCOMP_CAST_PREFETCH_BYTES + 64, _MM_HINT_T0);
  __m512i w0 = _mm512_loadu_si512(p), w1 = _mm512_loadu_si512(p + 16);
  if (__builtin_expect(!_kortestz_mask16_u8(rare16(w0), rare16(w1)), 0)) {
    uint8_t tmp[64];
    gcomp_cast_base.bf16_enc(p, 32, tmp, k);
    return _mm512_loadu_si512(tmp);
  }
  return (__m512i)_mm512_cvtne2ps_pbh(_mm512_castsi512_ps(w1), _mm512_castsi512_ps(w0));
}

uint32_t gcomp_cast_bf16_enc_sum_avx512bf16(const float *src, size_t n, uint8_t *dst,
                                            gcomp_cast_counts *c, int stream) {
  gcomp_cast_counts k = {0, 0, 0};
  int mode = gcomp_store_mode(dst, stream);
  __m512i v = bf16_32(src, &k);
  __m512i f = gcomp_crc_fold512_init(v, 0xffffffffu);
  if (mode == GCOMP_ST_NT16 || mode == GCOMP_ST_NT32) {   /* whole lines, realigned */
    gcomp_nt_run run;
    gcomp_nt_run_first(&run, dst, v);
    for (size_t i = 32; i < n; i += 32) {
      v = bf16_32(src + i, &k);
      gcomp_nt_run_next(&run, v);
      f = gcomp_crc_fold512_64(f, v);
    }
    gcomp_nt_run_end(&run);
    _mm_sfence();
    c->nonfinite += k.nonfinite, c->overflow += k.overflow, c->underflow += k.underflow;
    return ~gcomp_crc_fold512_end(f);
  }
  gcomp_store64(dst, v, mode);
#define STEP(M)                                                                           \
  for (size_t i = 32; i < n; i += 32) {                                                   \
    v = bf16_32(src + i, &k);                                                             \
    gcomp_store64(dst + 2 * i, v, M);                                                           \
    f = gcomp_crc_fold512_64(f, v);                                                       \
  }
  /* one loop a store mode, so the switch is not in it */
  if (mode == GCOMP_ST_NT64) STEP(GCOMP_ST_NT64)
  else STEP(GCOMP_ST_PLAIN)
#undef STEP
  if (mode != GCOMP_ST_PLAIN) _mm_sfence();
  c->nonfinite += k.nonfinite, c->overflow += k.overflow, c->underflow += k.underflow;
  return ~gcomp_crc_fold512_end(f);
}

void gcomp_cast_bf16_enc_avx512bf16(const float *src, size_t n, uint8_t *dst,
                                    gcomp_cast_counts *c) {
  gcomp_cast_counts k = {0, 0, 0};
  size_t i = 0;
  int mode = GCOMP_ST_PLAIN;
  if (2 * n >= GCOMP_CAST_STREAM_BYTES && !((uintptr_t)dst & 1)) {
    /* peel a head so that the stores are 64-byte aligned */
    i = (64 - ((uintptr_t)dst & 63)) % 64 / 2;
    gcomp_cast_base.bf16_enc(src, i, dst, &k);
    mode = GCOMP_ST_NT64;
  }
  if (mode == GCOMP_ST_NT64) {
    for (; i + 32 <= n; i += 32) gcomp_store64(dst + 2 * i, bf16_32(src + i, &k), GCOMP_ST_NT64);
    _mm_sfence();
  }
  for (; i + 32 <= n; i += 32) gcomp_store64(dst + 2 * i, bf16_32(src + i, &k), GCOMP_ST_PLAIN);
  gcomp_cast_base.bf16_enc(src + i, n - i, dst + 2 * i, &k);
  c->nonfinite += k.nonfinite, c->overflow += k.overflow, c->underflow += k.underflow;
}
