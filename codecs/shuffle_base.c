/* Byte-plane split and join, portable: the reference every SIMD variant is tested against. */
#include <string.h>

#include "lossless.h"

void gcomp_split_planes_base(const uint8_t *restrict in, size_t elems, unsigned width,
                             uint8_t *const *planes) {
  if (width == 1) {
    memcpy(planes[0], in, elems);
    return;
  }
  for (unsigned b = 0; b < width; b++) {
    uint8_t *restrict p = planes[b];
    const uint8_t *restrict s = in + b;
    for (size_t i = 0; i < elems; i++) p[i] = s[i * width];
  }
}

void gcomp_join_planes_base(const uint8_t *const *planes, size_t elems, unsigned width,
                            uint8_t *restrict out) {
  if (width == 1) {
    memcpy(out, planes[0], elems);
    return;
  }
  for (unsigned b = 0; b < width; b++) {
    const uint8_t *restrict p = planes[b];
    uint8_t *restrict d = out + b;
    for (size_t i = 0; i < elems; i++) d[i * width] = p[i];
  }
}

const gcomp_shuffle_kernels gcomp_shuffle_kernels_base = {
    .name = "base",
    .split = gcomp_split_planes_base,
    .join = gcomp_join_planes_base,
};
