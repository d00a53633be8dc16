/* Internal: the top-k filter kernels (one row per ISA level) and the pieces of the codec
 * that tests reach directly. */
#ifndef GCOMP_TOPK_H
#define GCOMP_TOPK_H

#include <stddef.h>
#include <stdint.h>

/* A value's magnitude key: its fp32 bits without the sign. Keys order like |x| for finite
 * values; Inf (0x7f800000) and NaN (above it) order above every finite value, so a
 * threshold never above 0x7f800000 always selects them. */
#define GCOMP_TOPK_KEY_INF 0x7f800000u

typedef struct {
  /* For i in [0, n): when key(src[i]) >= t, appends base + i to idx and src[i] to val.
   * Writes at most n entries; returns how many. t >= 1. */
  size_t (*filter)(const float *restrict src, size_t n, uint32_t t, uint32_t base,
                   uint32_t *restrict idx, float *restrict val);
  /* Error feedback fused with the filter: x = grad[i] + residual[i]; when key(x) >= t,
   * appends (base + i, x) and sets residual[i] = 0, else residual[i] = x. */
  size_t (*filter_ef)(const float *restrict grad, float *restrict residual, size_t n,
                      uint32_t t, uint32_t base, uint32_t *restrict idx, float *restrict val);
} gcomp_topk_kernels;

extern const gcomp_topk_kernels gcomp_topk_kernels_base;
extern const gcomp_topk_kernels gcomp_topk_kernels_avx2;
extern const gcomp_topk_kernels gcomp_topk_kernels_avx512;

/* The row for the level chosen at init for GCOMP_KF_TOPK. */
const gcomp_topk_kernels *gcomp_topk_kernels_get(void);

/* The r-th largest (1-based, 1 <= r <= m) of keys[0..m), by radix selection in O(m);
 * tmp holds m keys of scratch. */
uint32_t gcomp_topk_kth_key(const uint32_t *keys, size_t m, size_t r, uint32_t *tmp);

#endif /* GCOMP_TOPK_H */
