/* "test_biased": a deliberately wrong codec, for the convergence harness's own tests (a
 * check that cannot fail is worthless). It rounds every value toward zero, keeping `bits`
 * mantissa bits, and drops a fixed `drop` fraction of the positions of every frame (the
 * same positions each time, chosen by a hash of the index), so its error is a bias that
 * error-free averaging cannot wash out. Its id (GCOMP_KIND_TEST_BIASED) keeps it out of the
 * advertised codec names; it is never meant for training. */
#include <stdio.h>
#include <string.h>

#include "codec_impl.h"

typedef struct {
  double drop;     /* fraction of positions zeroed */
  uint64_t bits;   /* mantissa bits kept (0..23), rounding toward zero */
} biased_cfg;

static void biased_defaults(gcomp_kind_cfg *cfg) {
  memset(cfg, 0, sizeof *cfg);
  biased_cfg *c = (biased_cfg *)(void *)cfg->bytes;
  c->drop = 0.1;
  c->bits = 7;
}

static int biased_set(gcomp_kind_cfg *cfg, const char *key, const char *value) {
  biased_cfg *c = (biased_cfg *)(void *)cfg->bytes;
  if (strcmp(key, "drop") == 0) return gcomp_kv_double("test_biased", key, value, 0, 1, &c->drop);
  if (strcmp(key, "bits") == 0) return gcomp_kv_u64("test_biased", key, value, 0, 23, &c->bits);
  GCOMP_FAIL(GCOMP_ERR_INVALID, "test_biased: unknown parameter '%s' (valid: drop, bits)", key);
}

static int biased_validate(const gcomp_kind_cfg *cfg) { return GCOMP_OK; }

static size_t biased_print(const gcomp_kind_cfg *cfg, char *buf, size_t n) {
  const biased_cfg *c = (const biased_cfg *)(const void *)cfg->bytes;
  char drop[40];
  gcomp_dtoa(drop, sizeof drop, c->drop);
  int len = snprintf(buf, n, "drop=%s,bits=%llu", drop, (unsigned long long)c->bits);
  return len < 0 ? 0 : (size_t)len;
}

static void biased_ident(const gcomp_kind_cfg *cfg, uint64_t w[GCOMP_KIND_WORDS],
                         uint64_t *seed) {
  const biased_cfg *c = (const biased_cfg *)(const void *)cfg->bytes;
  w[0] = gcomp_ident_dbl(c->drop), w[1] = c->bits;
  (void)seed;
}

static size_t biased_max_payload(const gcomp_kind_cfg *cfg, size_t count) { return count * 4; }

/* position i is dropped when its hash falls in the lowest `drop` fraction */
static int dropped(uint64_t i, double drop) {
  uint64_t h = (i + 1) * 0x9e3779b97f4a7c15ull;
  h ^= h >> 29, h *= 0xbf58476d1ce4e5b9ull, h ^= h >> 32;
  return (double)(h >> 11) * (1.0 / 9007199254740992.0) < drop;
}

static int biased_encode(const gcomp_kind_cfg *cfg, gcomp_enc_ctx *ctx, const float *restrict src,
                         size_t count, uint8_t *restrict dst, size_t cap, size_t *len) {
  const biased_cfg *c = (const biased_cfg *)(const void *)cfg->bytes;
  GCOMP_FAIL_IF(cap < count * 4, GCOMP_ERR_NOMEM, "test_biased: %zu bytes of room for %zu values",
                cap, count);
  uint32_t mask = ~((UINT32_C(1) << (23 - c->bits)) - 1);   /* truncation: toward zero */
  for (size_t i = 0; i < count; i++) {
    uint32_t b;
    memcpy(&b, &src[i], 4);
    if ((b & 0x7f800000u) == 0x7f800000u) {
      ctx->stats->nonfinite_inputs++;
    } else {
      uint32_t t = dropped(i, c->drop) ? (b & 0x80000000u) : (b & mask);
      ctx->stats->underflows += (b & 0x7fffffffu) && !(t & 0x7fffffffu);
      b = t;
    }
    memcpy(dst + 4 * i, &b, 4);
  }
  *len = count * 4;
  return GCOMP_OK;
}

static int biased_decode(const gcomp_kind_cfg *cfg, uint32_t param, const uint8_t *restrict src,
                         size_t len, float *restrict dst, size_t count, int add,
                         gcomp_frame_check *chk) {
  GCOMP_FAIL_IF(param != 0, GCOMP_ERR_CORRUPT, "test_biased: frame parameter 0x%x should be 0",
                (unsigned)param);
  GCOMP_FAIL_IF(len != count * 4, GCOMP_ERR_CORRUPT,
                "test_biased: payload of %zu bytes cannot hold %zu values", len, count);
  for (size_t i = 0; i < count; i++) {
    float v;
    memcpy(&v, src + 4 * i, 4);
    dst[i] = add ? dst[i] + v : v;
  }
  return GCOMP_OK;
}

const gcomp_kind gcomp_kind_test_biased = {
    .name = "test_biased",
    .id = GCOMP_KIND_TEST_BIASED,
    .keys = "drop, bits",
    .elem_bytes = 4,
    .defaults = biased_defaults,
    .set = biased_set,
    .validate = biased_validate,
    .print = biased_print,
    .ident = biased_ident,
    .max_payload = biased_max_payload,
    .encode = biased_encode,
    .decode = biased_decode,
    .encode_ef = gcomp_ef_encode_generic,
};
