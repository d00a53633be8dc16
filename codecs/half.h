/* Internal: the one scalar fp32 <-> fp16/bf16 conversion of the codecs. The cast kernels'
 * portable table (cast_base.c), top-k's fp16/bf16 values (topk_impl.h) and the bf16 residual
 * store (ef.c) all convert through these; they differ only in what happens at the edges
 * of the format, and each rule has its own name:
 *
 *   gcomp_f16_rne       IEEE binary16, round to nearest even, as F16C's vcvtps2ph does:
 *                       finite |x| >= 65520 becomes Inf; NaN keeps its sign and top 10
 *                       payload bits and is made quiet (bit 9).            (cast fp16)
 *   gcomp_f16_rne_sat   the same, except that a finite x never becomes Inf: beyond 65504
 *                       it saturates to +-65504. With error feedback the excess stays in
 *                       the residual instead of turning into an Inf.        (top-k fp16)
 *   gcomp_bf16_rne      the top 16 bits of x rounded to nearest even (fp32 subnormals
 *                       included, no flush); NaN keeps its sign and top 7 payload bits
 *                       and is made quiet (bit 6), so it never rounds to Inf.
 *                                                                 (cast bf16, top-k bf16)
 *   gcomp_bf16_rne_sat  the same, except that a finite x never becomes Inf (saturates to
 *                       +-0x1.fep127) and NaN becomes +0: a residual store keeps only
 *                       finite values, and one NaN must not poison later steps. (ef bf16)
 *   gcomp_f16_to_f32    exact widening, NaN made quiet as vcvtph2ps does; subnormals are
 *                       built without an fp32 denormal operand, so a thread with DAZ set
 *                       still decodes them exactly.
 *   gcomp_bf16_to_f32   exact widening, NaN bits kept as they are.
 *
 * All are branch-free selects over integer arms so that loops over them vectorise. The
 * magnitude forms (_mag) take and return the value without its sign bit. */
#ifndef GCOMP_HALF_H
#define GCOMP_HALF_H

#include <float.h>
#include <stdint.h>
#include <string.h>

static inline uint32_t gcomp_f2u(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}
static inline float gcomp_u2f(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* fp32 magnitude bits a (sign cleared) -> fp16 magnitude bits, round to nearest even */
static inline uint32_t gcomp_f16_rne_mag(uint32_t a) {
  uint32_t nan = 0x7e00u | ((a >> 13) & 0x3ffu);                      /* quiet, payload kept */
  uint32_t nrm = (a - 0x38000000u + 0xfffu + ((a >> 13) & 1u)) >> 13;  /* >= 2^-14 */
#if defined(FLT_EVAL_METHOD) && FLT_EVAL_METHOD == 0
  /* below 2^-14: adding 0.5 lines |x| up with the fp16 subnormal grid (ulp(0.5) is 2^-24),
   * and the add rounds to nearest even, exactly (default rounding mode, no DAZ) */
  uint32_t sub = gcomp_f2u(gcomp_u2f(a) + 0.5f) - 0x3f000000u;
#else
  uint32_t s = 126u - (a >> 23), m = (a & 0x7fffffu) | 0x800000u;   /* s in [14, 24] */
  uint32_t sub = a <= 0x33000000u ? 0 : (m + (1u << (s - 1)) - 1u + ((m >> s) & 1u)) >> s;
#endif
  uint32_t h = a >= 0x38800000u ? nrm : sub;
  h = a >= 0x477ff000u ? 0x7c00u : h;                                 /* >= 65520: Inf */
  return a > 0x7f800000u ? nan : h;
}

/* The fp32 magnitudes from which gcomp_f16_rne gives Inf (finite ones overflow), and at or
 * below which it gives 0 (nonzero ones underflow). */
enum { GCOMP_F16_OVERFLOW_MAG = 0x477ff000, GCOMP_F16_UNDERFLOW_MAG = 0x33000000 };

static inline uint16_t gcomp_f16_rne(float x) {
  uint32_t w = gcomp_f2u(x);
  return (uint16_t)((w >> 16 & 0x8000u) | gcomp_f16_rne_mag(w & 0x7fffffffu));
}

static inline uint16_t gcomp_f16_rne_sat(float x) {
  uint32_t w = gcomp_f2u(x), a = w & 0x7fffffffu;
  uint32_t h = a >= GCOMP_F16_OVERFLOW_MAG && a < 0x7f800000u ? 0x7bffu : gcomp_f16_rne_mag(a);
  return (uint16_t)((w >> 16 & 0x8000u) | h);
}

static inline float gcomp_f16_to_f32(uint32_t h) {
  uint32_t sign = (h & 0x8000u) << 16, em = h & 0x7fffu;
  /* normal: an exact multiply moves the exponent bias 15 -> 127. subnormal: mantissa times
   * 2^-24, exact, and never through an fp32 denormal (which a thread with DAZ set, e.g.
   * after torch.set_flush_denormal(True), would read as 0 where vcvtph2ps stays exact) */
  uint32_t v = em >= 0x400u ? gcomp_f2u(gcomp_u2f(em << 13) * 0x1p112f)
                            : gcomp_f2u((float)em * 0x1p-24f);
  /* Inf, or NaN made quiet */
  uint32_t sp = 0x7f800000u | (em & 0x3ffu) << 13 | (em > 0x7c00u ? 0x400000u : 0);
  return gcomp_u2f(sign | (em >= 0x7c00u ? sp : v));
}

/* fp32 bits w -> bf16 bits, round to nearest even, NaN quieted */
static inline uint32_t gcomp_bf16_rne_bits(uint32_t w) {
  uint32_t a = w & 0x7fffffffu;
  return a > 0x7f800000u ? (w >> 16) | 0x40u : (w + 0x7fffu + ((w >> 16) & 1u)) >> 16;
}
static inline uint16_t gcomp_bf16_rne(float x) {
  return (uint16_t)gcomp_bf16_rne_bits(gcomp_f2u(x));
}

static inline uint16_t gcomp_bf16_rne_sat(float x) {
  uint32_t w = gcomp_f2u(x), a = w & 0x7fffffffu;
  uint32_t r = (w + 0x7fffu + ((w >> 16) & 1u)) >> 16;
  r -= (r & 0x7fffu) == 0x7f80u && a < 0x7f800000u;   /* rounded up to Inf: the largest finite */
  return (uint16_t)(a > 0x7f800000u ? 0 : r);
}

static inline float gcomp_bf16_to_f32(uint32_t h) { return gcomp_u2f(h << 16); }

#endif /* GCOMP_HALF_H */
