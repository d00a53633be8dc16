/* The table of codec kinds, and the parameter parsing helpers every kind shares. */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec_impl.h"

extern const gcomp_kind gcomp_kind_none;
extern const gcomp_kind gcomp_kind_fp16;
extern const gcomp_kind gcomp_kind_bf16;
extern const gcomp_kind gcomp_kind_topk;
extern const gcomp_kind gcomp_kind_quant;
extern const gcomp_kind gcomp_kind_sign;
extern const gcomp_kind gcomp_kind_test_biased;

static const gcomp_kind *const kinds[] = {
    &gcomp_kind_none,
    &gcomp_kind_fp16,
    &gcomp_kind_bf16,
    &gcomp_kind_topk,
    &gcomp_kind_quant,
    &gcomp_kind_sign,
    &gcomp_kind_test_biased,
};
enum { NKINDS = sizeof kinds / sizeof *kinds };

const gcomp_kind *gcomp_kind_find(const char *name) {
  for (size_t i = 0; i < NKINDS; i++)
    if (strcmp(kinds[i]->name, name) == 0) return kinds[i];
  return NULL;
}

static char kind_names[256];
static void build_kind_names(void) {
  for (size_t i = 0; i < NKINDS; i++) {
    if (kinds[i]->id >= GCOMP_KIND_TEST_BIASED) continue;   /* test kinds stay unadvertised */
    size_t len = strlen(kind_names);
    snprintf(kind_names + len, sizeof kind_names - len, "%s%s", len ? ", " : "", kinds[i]->name);
  }
}

const char *gcomp_kind_names(void) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;   /* error messages of concurrent creates */
  pthread_once(&once, build_kind_names);
  return kind_names;
}

int gcomp_kv_double(const char *kind, const char *key, const char *value, double lo, double hi,
                    double *out) {
  errno = 0;
  char *end = NULL;
  double v = gcomp_strtod(value, &end);   /* "0.5" under any locale */
  GCOMP_FAIL_IF(errno || end == value || *end != '\0' || !isfinite(v), GCOMP_ERR_INVALID,
                "%s: %s='%s' is not a number", kind, key, value);
  GCOMP_FAIL_IF(v < lo || v > hi, GCOMP_ERR_INVALID, "%s: %s='%s' is out of range [%g, %g]", kind,
                key, value, lo, hi);
  *out = v;
  return GCOMP_OK;
}

int gcomp_kv_u64(const char *kind, const char *key, const char *value, uint64_t lo, uint64_t hi,
                 uint64_t *out) {
  errno = 0;
  char *end = NULL;
  unsigned long long v = strtoull(value, &end, 10);
  GCOMP_FAIL_IF(errno || end == value || *end != '\0' || value[0] == '-', GCOMP_ERR_INVALID,
                "%s: %s='%s' is not a non-negative integer", kind, key, value);
  GCOMP_FAIL_IF(v < lo || v > hi, GCOMP_ERR_INVALID, "%s: %s='%s' is out of range [%llu, %llu]",
                kind, key, value, (unsigned long long)lo, (unsigned long long)hi);
  *out = v;
  return GCOMP_OK;
}

int gcomp_kv_choice(const char *kind, const char *key, const char *value, const char *choices,
                    int *out) {
  int idx = 0;
  size_t n = strlen(value);
  for (const char *p = choices;; idx++) {
    const char *bar = strchr(p, '|');
    size_t len = bar ? (size_t)(bar - p) : strlen(p);
    if (len == n && strncmp(p, value, n) == 0) {
      *out = idx;
      return GCOMP_OK;
    }
    if (!bar) break;
    p = bar + 1;
  }
  GCOMP_FAIL(GCOMP_ERR_INVALID, "%s: %s='%s' is not one of %s", kind, key, value, choices);
}
