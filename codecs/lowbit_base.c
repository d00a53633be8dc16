/* Portable low-bit kernels: the rules of lowbit.h written out one value at a time, the twin
 * every SIMD table is tested against. Codes go through a small buffer of 32 so the packing
 * loop stays simple. */
#include <math.h>

#include "lowbit.h"

enum { GROUP = 32 };

static int minmax_base(const float *x, size_t n, float *mn, float *mx) {
  float lo = x[0], hi = x[0];
  int bad = 0;
  for (size_t i = 0; i < n; i++) {
    bad |= (gcomp_f2u(x[i]) & 0x7f800000u) == 0x7f800000u;
    lo = x[i] < lo ? x[i] : lo;
    hi = x[i] > hi ? x[i] : hi;
  }
  *mn = lo + 0.0f;   /* -0 + +0 is +0: the bucket's minimum has one spelling */
  *mx = hi + 0.0f;
  return bad;
}

static void qenc_base(const float *x, size_t n, unsigned bits, float mn, float inv,
                      uint8_t *codes) {
  uint32_t c[GROUP], top = (1u << bits) - 1;
  for (size_t i = 0; i < n; i += GROUP) {
    size_t m = n - i < GROUP ? n - i : GROUP;
    for (size_t j = 0; j < m; j++) c[j] = gcomp_lb_code(x[i + j], mn, inv, top);
    gcomp_lb_pack(c, m, bits, codes + i / 8 * bits);   /* i is a multiple of 32 */
  }
}

static void qenc_sr_base(const float *x, size_t n, unsigned bits, float mn, float inv,
                         uint64_t key, uint32_t i0, uint8_t *codes) {
  uint32_t c[GROUP], top = (1u << bits) - 1;
  for (size_t i = 0; i < n; i += GROUP) {
    size_t m = n - i < GROUP ? n - i : GROUP;
    for (size_t j = 0; j < m; j++) {
      uint32_t r = gcomp_cast_rand(key, i0 + (uint32_t)(i + j));
      c[j] = gcomp_lb_code_sr(x[i + j], mn, inv, top, r);
    }
    gcomp_lb_pack(c, m, bits, codes + i / 8 * bits);
  }
}

static void qdec_base(const uint8_t *codes, size_t n, unsigned bits, float mn, float step,
                      float *dst, int mode) {
  for (size_t j = 0; j < n; j++) {
    float v = mn + (float)gcomp_lb_unpack(codes, j, bits) * step;
    dst[j] = gcomp_lb_apply(dst[j], v, mode);
  }
}

static int sscan_base(const float *x, size_t n, float *sum, size_t *nnz) {
  float acc[16] = {0};
  size_t nz = 0;
  int bad = 0;
  for (size_t i = 0; i < n; i++) {
    uint32_t a = gcomp_f2u(x[i]) & 0x7fffffffu;
    bad |= a >= 0x7f800000u;
    nz += a != 0;
    acc[i % 16] += gcomp_u2f(a);
  }
  *sum = gcomp_lb_sum16(acc);
  *nnz = nz;
  return bad;
}

static void senc_base(const float *x, size_t n, uint8_t *bits, uint8_t *zmask) {
  for (size_t i = 0; i < n; i += 8) {
    uint8_t b = 0, z = 0;
    for (size_t j = 0; j < 8 && i + j < n; j++) {
      b |= (uint8_t)((x[i + j] < 0.0f) << j);
      z |= (uint8_t)((x[i + j] == 0.0f) << j);
    }
    bits[i / 8] = b;
    if (zmask) zmask[i / 8] = z;
  }
}

static void sdec_base(const uint8_t *bits, const uint8_t *zmask, size_t n, float s, float *dst,
                      int mode) {
  for (size_t j = 0; j < n; j++) {
    int neg = bits[j / 8] >> (j % 8) & 1, zero = zmask ? zmask[j / 8] >> (j % 8) & 1 : 0;
    float v = zero ? 0.0f : neg ? -s : s;
    dst[j] = gcomp_lb_apply(dst[j], v, mode);
  }
}

static void addto_base(float *restrict r, const float *restrict g, size_t n) {
  for (size_t i = 0; i < n; i++) r[i] += g[i];
}

static void addto2_base(float *restrict r, const float *restrict a, const float *restrict b,
                        size_t n) {
  for (size_t i = 0; i < n; i++) r[i] += a[i] + b[i];
}

/* The fused error-feedback kernels are defined as the two steps they fuse. */
static int sscan_ef_base(float *restrict r, const float *restrict g, size_t n, float *sum,
                         size_t *nnz) {
  if (g) addto_base(r, g, n);
  return sscan_base(r, n, sum, nnz);
}

static void senc_ef_base(float *r, size_t n, float s, uint8_t *bits, uint8_t *zmask) {
  senc_base(r, n, bits, zmask);
  sdec_base(bits, zmask, n, s, r, GCOMP_LB_SUB);
}

static void widen_base(float *restrict x, const uint16_t *restrict r16, size_t n) {
  for (size_t i = 0; i < n; i++) x[i] = gcomp_bf16_to_f32(r16[i]);
}

static void narrow_base(uint16_t *restrict r16, const float *restrict x, size_t n) {
  for (size_t i = 0; i < n; i++) r16[i] = gcomp_bf16_rne_sat(x[i]);
}

const gcomp_lowbit_kernels gcomp_lowbit_base = {
    .name = "base",
    .minmax = minmax_base,
    .qenc = qenc_base,
    .qenc_sr = qenc_sr_base,
    .qdec = qdec_base,
    .sscan = sscan_base,
    .senc = senc_base,
    .sdec = sdec_base,
    .addto = addto_base,
    .addto2 = addto2_base,
    .sscan_ef = sscan_ef_base,
    .senc_ef = senc_ef_base,
    .widen = widen_base,
    .narrow = narrow_base,
};
