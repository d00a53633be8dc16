/* "none": fp32 as is. The identity kind: a frame around a copy. */
#include <string.h>

#include "codec_impl.h"

static void none_defaults(gcomp_kind_cfg *cfg) { memset(cfg, 0, sizeof *cfg); }

static int none_set(gcomp_kind_cfg *cfg, const char *key, const char *value) {
  GCOMP_FAIL(GCOMP_ERR_INVALID, "none: unknown parameter '%s' (none takes no parameters)", key);
}

static int none_validate(const gcomp_kind_cfg *cfg) { return GCOMP_OK; }

static size_t none_print(const gcomp_kind_cfg *cfg, char *buf, size_t n) {
  if (n) buf[0] = '\0';
  return 0;
}

static void none_ident(const gcomp_kind_cfg *cfg, uint64_t w[GCOMP_KIND_WORDS], uint64_t *seed) {
  (void)cfg, (void)w, (void)seed;   /* no parameters */
}

static size_t none_max_payload(const gcomp_kind_cfg *cfg, size_t count) { return count * 4; }

/* Copies in pieces of one frame block: each is checksummed while it is still in cache. */
enum { PIECE = 1 << 16 };

static int none_encode(const gcomp_kind_cfg *cfg, gcomp_enc_ctx *ctx, const float *restrict src,
                       size_t count, uint8_t *restrict dst, size_t cap, size_t *len) {
  GCOMP_FAIL_IF(cap < count * 4, GCOMP_ERR_NOMEM, "none: %zu bytes of room for %zu values", cap,
                count);
  uint64_t nonfinite = 0;
  size_t bytes = count * 4;
  for (size_t at = 0; at < bytes; at += PIECE) {   /* src may be NULL when count is 0 */
    size_t n = bytes - at < PIECE ? bytes - at : PIECE;
    const float *p = src + at / 4;
    for (size_t i = 0; i < n / 4; i++) {
      uint32_t bits;
      memcpy(&bits, &p[i], 4);
      nonfinite += (bits & 0x7f800000u) == 0x7f800000u;
    }
    memcpy(dst + at, p, n);
    gcomp_enc_progress(ctx, at + n);
  }
  ctx->stats->nonfinite_inputs += nonfinite;
  *len = bytes;
  return GCOMP_OK;
}

static int none_decode(const gcomp_kind_cfg *cfg, uint32_t param, const uint8_t *restrict src,
                       size_t len, float *restrict dst, size_t count, int add,
                       gcomp_frame_check *chk) {
  GCOMP_FAIL_IF(param != 0, GCOMP_ERR_CORRUPT, "none: frame parameter 0x%x should be 0",
                (unsigned)param);
  GCOMP_FAIL_IF(len != count * 4, GCOMP_ERR_CORRUPT,
                "none: payload of %zu bytes cannot hold %zu fp32 values", len, count);
  for (size_t at = 0; at < len; at += PIECE) {   /* dst may be NULL when count is 0 */
    size_t n = len - at < PIECE ? len - at : PIECE;
    GCOMP_CHECK(gcomp_dec_need(chk, at + n));
    if (!add) {
      memcpy((uint8_t *)dst + at, src + at, n);
      continue;
    }
    float *restrict d = dst + at / 4;
    for (size_t i = 0; i < n / 4; i++) {
      float v;
      memcpy(&v, src + at + 4 * i, 4);
      d[i] += v;
    }
  }
  return GCOMP_OK;
}

const gcomp_kind gcomp_kind_none = {
    .name = "none",
    .id = GCOMP_KIND_NONE,
    .keys = "",
    .elem_bytes = 4,
    .reads_in_blocks = 1,
    .defaults = none_defaults,
    .set = none_set,
    .validate = none_validate,
    .print = none_print,
    .ident = none_ident,
    .max_payload = none_max_payload,
    .encode = none_encode,
    .decode = none_decode,
    .encode_ef = gcomp_ef_encode_generic,
};
