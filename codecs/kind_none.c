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

static size_t none_max_payload(const gcomp_kind_cfg *cfg, size_t count) { return count * 4; }

static int none_encode(const gcomp_kind_cfg *cfg, gcomp_enc_ctx *ctx, const float *restrict src,
                       size_t count, uint8_t *restrict dst, size_t cap, size_t *len) {
  GCOMP_FAIL_IF(cap < count * 4, GCOMP_ERR_NOMEM, "none: %zu bytes of room for %zu values", cap,
                count);
  for (size_t i = 0; i < count; i++) {
    uint32_t bits;
    memcpy(&bits, &src[i], 4);
    ctx->stats->nonfinite_inputs += (bits & 0x7f800000u) == 0x7f800000u;
  }
  if (count) memcpy(dst, src, count * 4);   /* src may be NULL when count is 0 */
  *len = count * 4;
  return GCOMP_OK;
}

static int none_decode(const gcomp_kind_cfg *cfg, uint32_t param, const uint8_t *restrict src,
                       size_t len, float *restrict dst, size_t count, int add) {
  GCOMP_FAIL_IF(param != 0, GCOMP_ERR_CORRUPT, "none: frame parameter 0x%x should be 0",
                (unsigned)param);
  GCOMP_FAIL_IF(len != count * 4, GCOMP_ERR_CORRUPT,
                "none: payload of %zu bytes cannot hold %zu fp32 values", len, count);
  if (!add) {
    if (len) memcpy(dst, src, len);   /* dst may be NULL when count is 0 */
    return GCOMP_OK;
  }
  for (size_t i = 0; i < count; i++) {
    float v;
    memcpy(&v, src + 4 * i, 4);
    dst[i] += v;
  }
  return GCOMP_OK;
}

const gcomp_kind gcomp_kind_none = {
    .name = "none",
    .id = GCOMP_KIND_NONE,
    .keys = "",
    .elem_bytes = 4,
    .defaults = none_defaults,
    .set = none_set,
    .validate = none_validate,
    .print = none_print,
    .max_payload = none_max_payload,
    .encode = none_encode,
    .decode = none_decode,
    .encode_ef = gcomp_ef_encode_generic,
};
