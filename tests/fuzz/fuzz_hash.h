/* The fuzz targets' deterministic choices (part lengths) drawn from their input: a hash of
 * the input's bytes, then a mixing step per draw. */
#ifndef GCOMP_FUZZ_HASH_H
#define GCOMP_FUZZ_HASH_H

#include <stddef.h>
#include <stdint.h>

static inline uint64_t gcomp_fuzz_hash(const uint8_t *p, size_t n) {
  uint64_t h = 0x9e3779b97f4a7c15ull ^ n;
  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

/* The next draw */
static inline uint64_t gcomp_fuzz_mix(uint64_t h) {
  h ^= h >> 29, h *= 0xbf58476d1ce4e5b9ull, h ^= h >> 32;
  return h;
}

#endif
