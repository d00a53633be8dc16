/* Helpers several unit tests share: a seeded splitmix64 stream (rnd, unif, gauss) and
 * buffers that end at a PROT_NONE page, so a kernel that reads or writes one byte too far
 * faults. Include after cmocka.h. */
#ifndef GCOMP_TEST_UTIL_H
#define GCOMP_TEST_UTIL_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

static uint64_t test_rng = 1;
static inline uint64_t rnd(void) {
  uint64_t z = (test_rng += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
static inline double unif(void) { return ((double)(rnd() >> 11) + 0.5) / 9007199254740992.0; }
static inline double gauss(void) { return sqrt(-2 * log(unif())) * cos(2 * M_PI * unif()); }

typedef struct {
  uint8_t *base;
  size_t len;
} guarded;
/* A buffer of `bytes` whose last byte is the last one before a PROT_NONE page. */
static inline void *guard_alloc(guarded *g, size_t bytes) {
  size_t pg = (size_t)sysconf(_SC_PAGESIZE), data = (bytes + pg - 1) / pg * pg;
  g->len = data + pg;
  g->base = mmap(NULL, g->len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  assert_true(g->base != MAP_FAILED);
  assert_int_equal(mprotect(g->base + data, pg, PROT_NONE), 0);
  return g->base + data - bytes;
}
static inline void guard_free(guarded *g) { munmap(g->base, g->len); }

#endif
