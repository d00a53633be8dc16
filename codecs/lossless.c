/* Lossless stages: zstd over (optionally byte-shuffled) payload bytes. */
#include <stdio.h>
#include <string.h>

#include <zstd.h>
#include <zstd_errors.h>

#include "frame.h"
#include "lossless.h"

void gcomp_shuffle(const uint8_t *restrict in, size_t n, unsigned width, uint8_t *restrict out) {
  size_t elems = n / width;
  for (unsigned b = 0; b < width; b++)
    for (size_t i = 0; i < elems; i++) out[b * elems + i] = in[i * width + b];
  memcpy(out + elems * width, in + elems * width, n - elems * width);
}

void gcomp_unshuffle(const uint8_t *restrict in, size_t n, unsigned width, uint8_t *restrict out) {
  size_t elems = n / width;
  for (unsigned b = 0; b < width; b++)
    for (size_t i = 0; i < elems; i++) out[i * width + b] = in[b * elems + i];
  memcpy(out + elems * width, in + elems * width, n - elems * width);
}

typedef struct {
  int level;
} zstd_cfg;

static void zstd_defaults(gcomp_stage_cfg *cfg) {
  memset(cfg, 0, sizeof *cfg);
  ((zstd_cfg *)cfg)->level = 1;
}

static int zstd_set(gcomp_stage_cfg *cfg, const char *key, const char *value) {
  if (strcmp(key, "level") == 0) {
    uint64_t v;
    GCOMP_CHECK(gcomp_kv_u64("zstd", key, value, 1, 19, &v));
    ((zstd_cfg *)cfg)->level = (int)v;
    return GCOMP_OK;
  }
  GCOMP_FAIL(GCOMP_ERR_INVALID, "zstd: unknown parameter '%s' (valid: level)", key);
}

static size_t zstd_print(const gcomp_stage_cfg *cfg, char *buf, size_t n) {
  return (size_t)snprintf(buf, n, "level=%d", ((const zstd_cfg *)cfg)->level);
}

static int zstd_compress(const gcomp_stage_cfg *cfg, const uint8_t *in, size_t in_len,
                         uint8_t *out, size_t cap, size_t *out_len) {
  size_t r = ZSTD_compress(out, cap, in, in_len, ((const zstd_cfg *)cfg)->level);
  if (ZSTD_isError(r)) {
    GCOMP_FAIL_IF(ZSTD_getErrorCode(r) == ZSTD_error_dstSize_tooSmall, GCOMP_ERR_NOMEM,
                  "zstd: output does not fit in %zu bytes", cap);
    GCOMP_FAIL(GCOMP_ERR_INVALID, "zstd: %s", ZSTD_getErrorName(r));
  }
  *out_len = r;
  return GCOMP_OK;
}

static int zstd_decompress(const uint8_t *in, size_t in_len, uint8_t *out, size_t cap,
                           size_t *out_len) {
  unsigned long long size = ZSTD_getFrameContentSize(in, in_len);
  GCOMP_FAIL_IF(size == ZSTD_CONTENTSIZE_ERROR || size == ZSTD_CONTENTSIZE_UNKNOWN,
                GCOMP_ERR_CORRUPT, "zstd: payload is not a zstd frame with a known size");
  GCOMP_FAIL_IF(size > cap, GCOMP_ERR_CORRUPT, "zstd: payload expands to %llu bytes, more than %zu",
                size, cap);
  size_t r = ZSTD_decompress(out, cap, in, in_len);
  GCOMP_FAIL_IF(ZSTD_isError(r), GCOMP_ERR_CORRUPT, "zstd: %s", ZSTD_getErrorName(r));
  *out_len = r;
  return GCOMP_OK;
}

static const gcomp_stage stage_zstd = {
    .name = "zstd",
    .id = GCOMP_STAGE_ZSTD,
    .keys = "level",
    .shuffle = 1,
    .defaults = zstd_defaults,
    .set = zstd_set,
    .print = zstd_print,
    .compress = zstd_compress,
    .decompress = zstd_decompress,
};

static const gcomp_stage *const stages[] = {&stage_zstd};
enum { NSTAGES = sizeof stages / sizeof *stages };

const gcomp_stage *gcomp_stage_find(const char *name) {
  for (size_t i = 0; i < NSTAGES; i++)
    if (strcmp(stages[i]->name, name) == 0) return stages[i];
  return NULL;
}

const gcomp_stage *gcomp_stage_by_id(uint8_t id) {
  for (size_t i = 0; i < NSTAGES; i++)
    if (stages[i]->id == id) return stages[i];
  return NULL;
}

const char *gcomp_stage_names(void) {
  static char names[128];
  if (names[0]) return names;
  for (size_t i = 0; i < NSTAGES; i++) {
    size_t len = strlen(names);
    snprintf(names + len, sizeof names - len, "%s%s", len ? ", " : "", stages[i]->name);
  }
  return names;
}
