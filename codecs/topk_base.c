/* Top-k filter kernels, portable C. */
#include <string.h>

#include "topk.h"

static inline uint32_t key_of(float x) {
  uint32_t b;
  memcpy(&b, &x, 4);
  return b & 0x7fffffffu;
}

static size_t filter_base(const float *restrict src, size_t n, uint32_t t, uint32_t base,
                          uint32_t *restrict idx, float *restrict val) {
  size_t c = 0;
  for (size_t i = 0; i < n; i++) {
    /* branchless append: the slot is written always, kept only when selected */
    idx[c] = base + (uint32_t)i;
    val[c] = src[i];
    c += key_of(src[i]) >= t;
  }
  return c;
}

static size_t filter_ef_base(const float *restrict grad, float *restrict residual, size_t n,
                             uint32_t t, uint32_t base, uint32_t *restrict idx,
                             float *restrict val) {
  size_t c = 0;
  for (size_t i = 0; i < n; i++) {
    float x = grad[i] + residual[i];
    int sel = key_of(x) >= t;
    idx[c] = base + (uint32_t)i;
    val[c] = x;
    residual[i] = sel ? 0.0f : x;
    c += (size_t)sel;
  }
  return c;
}

const gcomp_topk_kernels gcomp_topk_kernels_base = {filter_base, filter_ef_base};
