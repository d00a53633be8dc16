/* An independent reference for the cast kernels, written from the IEEE 754 definition with
 * double arithmetic (every fp32 value, times any power of two in range, is exact in a
 * double): find the quantum of the binade, divide, round half to even by comparing the
 * remainder with one half, multiply back, then spell the result out field by field. Slow
 * and obvious on purpose; shares no code with codecs/cast_base.c.
 *
 * NaN rule (IEEE leaves payloads open; this is what F16C does and what gcomp documents):
 * sign and top payload bits kept, quiet bit set. */
#ifndef TEST_CAST_REF_H
#define TEST_CAST_REF_H

#include <math.h>
#include <stdint.h>
#include <string.h>

static inline float ref_u2f(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}
static inline uint32_t ref_f2u(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}

/* round half to even of a non-negative double holding an exact value */
static inline double ref_rne(double n) {
  double fl = floor(n), d = n - fl;
  if (d > 0.5) return fl + 1;
  if (d < 0.5) return fl;
  return fmod(fl, 2.0) == 0.0 ? fl : fl + 1;
}

/* binary16 of the fp32 value w times 2^k, round to nearest even */
static inline uint16_t ref_f16(uint32_t w, int k) {
  uint16_t sign = (uint16_t)((w >> 31) << 15);
  float f = ref_u2f(w);
  if (isnan(f)) return (uint16_t)(sign | 0x7e00 | ((w >> 13) & 0x3ff));
  if (isinf(f)) return (uint16_t)(sign | 0x7c00);
  double v = ldexp(fabs((double)f), k);
  if (v == 0) return sign;
  int e = ilogb(v);
  if (e < -14) e = -14;                          /* subnormal binade: quantum 2^-24 */
  double q = ldexp(1.0, e - 10);                 /* 11 significant bits */
  double y = ref_rne(v / q) * q;
  if (y > 65504.0) return (uint16_t)(sign | 0x7c00);   /* rounded past the largest finite */
  if (y < ldexp(1.0, -14)) return (uint16_t)(sign | (uint16_t)(y / ldexp(1.0, -24)));
  int ey = ilogb(y);
  uint16_t mant = (uint16_t)(y / ldexp(1.0, ey - 10) - 1024.0);
  return (uint16_t)(sign | (uint16_t)((ey + 15) << 10) | mant);
}

/* bfloat16 of the fp32 value w, round to nearest even */
static inline uint16_t ref_bf16(uint32_t w) {
  uint16_t sign = (uint16_t)((w >> 31) << 15);
  float f = ref_u2f(w);
  if (isnan(f)) return (uint16_t)((w >> 16) | 0x40);
  if (isinf(f)) return (uint16_t)(sign | 0x7f80);
  double v = fabs((double)f);
  if (v == 0) return sign;
  int e = ilogb(v);
  if (e < -126) e = -126;                        /* subnormal binade: quantum 2^-133 */
  double q = ldexp(1.0, e - 7);                  /* 8 significant bits */
  double y = ref_rne(v / q) * q;
  double max = ldexp(255.0, 127 - 7);            /* 0x7f7f */
  if (y > max) return (uint16_t)(sign | 0x7f80);
  /* y is a bfloat16 value, so it is an fp32 whose low 16 bits are zero */
  return (uint16_t)(sign | (ref_f2u((float)y) >> 16));
}

/* fp32 value of a binary16 (NaN: quiet, payload kept) */
static inline uint32_t ref_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h >> 15) << 31;
  int e = (h >> 10) & 0x1f, m = h & 0x3ff;
  if (e == 31) return sign | 0x7f800000u | (m ? 0x400000u | (uint32_t)m << 13 : 0);
  double v = e ? ldexp(1024.0 + m, e - 25) : ldexp((double)m, -24);
  return sign | ref_f2u((float)v);
}

static inline uint32_t ref_bf16_to_f32(uint16_t h) { return (uint32_t)h << 16; }

#endif /* TEST_CAST_REF_H */
