/* Private: the harness's seeded generator (splitmix64). Same seed, same numbers, on every
 * platform: the reproducibility tests depend on it. */
#ifndef GCOMP_CV_RNG_H
#define GCOMP_CV_RNG_H

#include <math.h>
#include <stdint.h>

typedef struct {
  uint64_t s;
} gcomp_cv_rng;

static inline gcomp_cv_rng gcomp_cv_rng_make(uint64_t seed, uint64_t stream) {
  gcomp_cv_rng r = {seed * 0x9e3779b97f4a7c15ull ^ (stream + 1) * 0xd1b54a32d192ed03ull};
  return r;
}

static inline uint64_t gcomp_cv_next(gcomp_cv_rng *r) {
  uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* uniform in [0, 1) with 53 bits */
static inline double gcomp_cv_uniform(gcomp_cv_rng *r) {
  return (double)(gcomp_cv_next(r) >> 11) * (1.0 / 9007199254740992.0);
}

/* uniform integer in [0, n) */
static inline uint64_t gcomp_cv_below(gcomp_cv_rng *r, uint64_t n) {
  return (uint64_t)(gcomp_cv_uniform(r) * (double)n) % n;
}

static inline double gcomp_cv_normal(gcomp_cv_rng *r) {
  double u1 = gcomp_cv_uniform(r), u2 = gcomp_cv_uniform(r);
  if (u1 < 1e-300) u1 = 1e-300;
  return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

/* Fisher-Yates over idx[0..n) */
static inline void gcomp_cv_shuffle(gcomp_cv_rng *r, int *idx, int n) {
  for (int i = n - 1; i > 0; i--) {
    int j = (int)gcomp_cv_below(r, (uint64_t)i + 1);
    int t = idx[i];
    idx[i] = idx[j];
    idx[j] = t;
  }
}

#endif /* GCOMP_CV_RNG_H */
