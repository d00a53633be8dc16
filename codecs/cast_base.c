/* Portable fp16/bf16 cast kernels: bit manipulation and a few exact float operations in
 * the default rounding mode (no _Float16, no F16C), written branch-free so the compiler
 * can vectorise them for any target. Every SIMD table is tested against these, and these
 * against an independent IEEE reference over all 2^32 inputs. The rules are in cast.h. */
#include <string.h>

#include "cast.h"
#include "frame.h"
#include "half.h"

/* Payload words are little-endian; on little-endian hosts a memcpy is one plain move that
 * the vectoriser can widen. */
static inline uint32_t load16(const uint8_t *p) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  uint16_t v;
  memcpy(&v, p, 2);
  return v;
#else
  return (uint32_t)p[0] | (uint32_t)p[1] << 8;
#endif
}
static inline void store16(uint8_t *p, uint32_t v) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  uint16_t h = (uint16_t)v;
  memcpy(p, &h, 2);
#else
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
#endif
}
/* Shifts that give 0 for counts >= 32, as AVX2's vpsllvd/vpsrlvd do. */
static inline uint32_t shl(uint32_t x, uint32_t c) { return c < 32 ? x << c : 0; }
static inline uint32_t shr(uint32_t x, uint32_t c) { return c < 32 ? x >> c : 0; }

static inline uint32_t f16_sr_mag(uint32_t a, uint32_t r) {
  if (a >= 0x7f800000u) return gcomp_f16_rne_mag(a);
  if (a >= 0x38800000u) {
    uint32_t t = (a + (r >> 19)) & ~0x1fffu;
    return t >= 0x47800000u ? 0x7c00u : (t - 0x38000000u) >> 13;
  }
  /* subnormal result: |x| = m * 2^-s in units of 2^-24 */
  uint32_t e = a >> 23;
  uint32_t m = (a & 0x7fffffu) | (e ? 0x800000u : 0);
  uint32_t s = 126u - (e ? e : 1u);
  uint32_t frac = shl(m, 32u - s) | shr(m, s - 32u);   /* dropped part, 32-bit fixed point */
  return shr(m, s) + (r < frac);
}

/* Counts for one element: a0 the unscaled input magnitude, h16 the output magnitude. */
#define COUNT(c, a0, hmag, inf)                                   \
  do {                                                            \
    (c)->nonfinite += (a0) >= 0x7f800000u;                        \
    (c)->overflow += (a0) < 0x7f800000u && (hmag) == (inf);       \
    (c)->underflow += (a0) != 0 && (hmag) == 0;                   \
  } while (0)

static uint32_t maxabs_base(const float *src, size_t n) {
  uint32_t mx = 0;
  for (size_t i = 0; i < n; i++) {
    uint32_t a = gcomp_f2u(src[i]) & 0x7fffffffu;
    a = a < 0x7f800000u ? a : 0;
    mx = a > mx ? a : mx;
  }
  return mx;
}

static uint32_t f16_enc_base(const float *src, size_t n, uint8_t *dst, float scale,
                             gcomp_cast_counts *c) {
  gcomp_cast_counts k = {0, 0, 0};
  uint32_t mx = 0;
  for (size_t i = 0; i < n; i++) {
    uint32_t w = gcomp_f2u(src[i]), a0 = w & 0x7fffffffu;
    mx = a0 > mx && a0 < 0x7f800000u ? a0 : mx;
    uint32_t h = gcomp_f16_rne_mag(gcomp_f2u(src[i] * scale) & 0x7fffffffu);
    COUNT(&k, a0, h, 0x7c00u);
    store16(dst + 2 * i, (w >> 16 & 0x8000u) | h);
  }
  c->nonfinite += k.nonfinite, c->overflow += k.overflow, c->underflow += k.underflow;
  return mx;
}

static void f16_enc_sr_base(const float *src, size_t n, uint8_t *dst, float scale, uint64_t key,
                            uint32_t i0, gcomp_cast_counts *c) {
  gcomp_cast_counts k = {0, 0, 0};
  for (size_t i = 0; i < n; i++) {
    uint32_t w = gcomp_f2u(src[i]), a0 = w & 0x7fffffffu;
    uint32_t r = gcomp_cast_rand(key, i0 + (uint32_t)i);
    uint32_t h = f16_sr_mag(gcomp_f2u(src[i] * scale) & 0x7fffffffu, r);
    COUNT(&k, a0, h, 0x7c00u);
    store16(dst + 2 * i, (w >> 16 & 0x8000u) | h);
  }
  c->nonfinite += k.nonfinite, c->overflow += k.overflow, c->underflow += k.underflow;
}

static void f16_dec_base(const uint8_t *src, size_t n, float *dst, float inv_scale) {
  for (size_t i = 0; i < n; i++) dst[i] = gcomp_f16_to_f32(load16(src + 2 * i)) * inv_scale;
}

static void f16_dec_nt_base(const uint8_t *src, size_t n, float *dst, float inv_scale,
                            int stream) {
  f16_dec_base(src, n, dst, inv_scale);
}

static void f16_dec_add_base(const uint8_t *src, size_t n, float *acc, float inv_scale) {
  for (size_t i = 0; i < n; i++) acc[i] += gcomp_f16_to_f32(load16(src + 2 * i)) * inv_scale;
}

static void bf16_enc_base(const float *src, size_t n, uint8_t *dst, gcomp_cast_counts *c) {
  gcomp_cast_counts k = {0, 0, 0};
  for (size_t i = 0; i < n; i++) {
    uint32_t w = gcomp_f2u(src[i]), a = w & 0x7fffffffu;
    uint32_t h = gcomp_bf16_rne_bits(w);
    COUNT(&k, a, h & 0x7fffu, 0x7f80u);
    store16(dst + 2 * i, h);
  }
  c->nonfinite += k.nonfinite, c->overflow += k.overflow, c->underflow += k.underflow;
}

static void bf16_enc_sr_base(const float *src, size_t n, uint8_t *dst, uint64_t key, uint32_t i0,
                             gcomp_cast_counts *c) {
  gcomp_cast_counts k = {0, 0, 0};
  for (size_t i = 0; i < n; i++) {
    uint32_t w = gcomp_f2u(src[i]), a = w & 0x7fffffffu;
    uint32_t r = gcomp_cast_rand(key, i0 + (uint32_t)i);
    uint32_t h = a > 0x7f800000u ? (w >> 16) | 0x40u : (w + (r >> 16)) >> 16;
    COUNT(&k, a, h & 0x7fffu, 0x7f80u);
    store16(dst + 2 * i, h);
  }
  c->nonfinite += k.nonfinite, c->overflow += k.overflow, c->underflow += k.underflow;
}

static void bf16_dec_base(const uint8_t *src, size_t n, float *dst) {
  for (size_t i = 0; i < n; i++) dst[i] = gcomp_bf16_to_f32(load16(src + 2 * i));
}

static void bf16_dec_nt_base(const uint8_t *src, size_t n, float *dst, int stream) {
  bf16_dec_base(src, n, dst);
}

static void bf16_dec_add_base(const uint8_t *src, size_t n, float *acc) {
  for (size_t i = 0; i < n; i++) acc[i] += gcomp_bf16_to_f32(load16(src + 2 * i));
}

static uint32_t f16_enc_sum_base(const float *src, size_t n, uint8_t *dst, float scale,
                                 gcomp_cast_counts *c, uint32_t *mx, int stream) {
  *mx = f16_enc_base(src, n, dst, scale, c);
  return ~gcomp_crc32c(0xffffffffu, dst, 2 * n);
}

static uint32_t bf16_enc_sum_base(const float *src, size_t n, uint8_t *dst, gcomp_cast_counts *c,
                                  int stream) {
  bf16_enc_base(src, n, dst, c);
  return ~gcomp_crc32c(0xffffffffu, dst, 2 * n);
}

static uint32_t f16_dec_add_sum_base(const uint8_t *src, size_t n, float *acc, float inv_scale,
                                     const uint8_t *next) {
  f16_dec_add_base(src, n, acc, inv_scale);
  return ~gcomp_crc32c(0xffffffffu, next, 2 * n);
}

static uint32_t bf16_dec_add_sum_base(const uint8_t *src, size_t n, float *acc,
                                      const uint8_t *next) {
  bf16_dec_add_base(src, n, acc);
  return ~gcomp_crc32c(0xffffffffu, next, 2 * n);
}

const gcomp_cast_kernels gcomp_cast_base = {
    .name = "base",
    .maxabs = maxabs_base,
    .f16_enc = f16_enc_base,
    .f16_enc_sr = f16_enc_sr_base,
    .f16_dec = f16_dec_base,
    .f16_dec_add = f16_dec_add_base,
    .bf16_enc = bf16_enc_base,
    .bf16_enc_sr = bf16_enc_sr_base,
    .bf16_dec = bf16_dec_base,
    .bf16_dec_add = bf16_dec_add_base,
    .f16_dec_nt = f16_dec_nt_base,
    .bf16_dec_nt = bf16_dec_nt_base,
    .f16_enc_sum = f16_enc_sum_base,
    .bf16_enc_sum = bf16_enc_sum_base,
    .f16_dec_add_sum = f16_dec_add_sum_base,
    .bf16_dec_add_sum = bf16_dec_add_sum_base,
};
