/* "sign": scaled sign, one bit a value and one fp32 scale a bucket (kernels in
 * lowbit_*.c, rules in lowbit.h), meant with +ef (EF-signSGD; 1-bit Adam's compression).
 *
 *   sign[:bucket=S]      S a multiple of 32 in [32, 2^20], default 512
 *
 * A bucket's value x decodes to s * sign(x), s the mean magnitude of the bucket's nonzero
 * values: for fixed signs that s minimises the squared error (d/ds sum (|x| - s)^2 = 0),
 * and the decoded bucket keeps the bucket's L1 norm. Zeros are explicit, as a sign cannot
 * say 0: a bucket holding some zeros (ReLU-sparse gradients, frozen or padded rows) also
 * sends a bit a value saying which, and they decode to exactly 0 (else a zero would be
 * sent as +s, and error feedback would push it back and forth); a bucket of zeros only
 * sends s = 0. A bucket holding NaN or Inf (counted in nonfinite_inputs), or whose sum of
 * magnitudes overflows, is sent as is.
 *
 * Payload (little-endian), bucket after bucket, nothing else (n values in the bucket):
 *   f32 scale, ceil(n / 8) bytes of sign bits (1: negative)           no zeros in it, or
 *   f32 -scale (sign bit set), ceil(n / 8) sign bytes, ceil(n / 8) bytes of zero bits, or
 *   u32 0xffffffff, n f32 values                                      sent as is
 * |scale| is finite. The frame's parameter word is S. Size: 1/8 + 4/S bytes a value
 * (1/4 + 4/S in buckets with zeros).
 *
 * With +ef the error feedback is fused bucket by bucket: one pass adds the gradient to the
 * residual and sums the magnitudes, a second (over the bucket, still in cache) writes the
 * sign bits and subtracts the decoded values from the residual; a bf16 residual is widened
 * and rounded back bucket by bucket around them. A compressed
 * allreduce re-signs each reduced shard with error feedback too (the owner keeps a residual
 * per tensor and shard, as 1-bit Adam's server does): the second sign's error is carried to
 * the next call rather than lost.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "codec_impl.h"
#include "frame.h"
#include "lowbit.h"

typedef struct {
  uint64_t bucket;
} sign_cfg;

static void sign_defaults(gcomp_kind_cfg *cfg) {
  memset(cfg, 0, sizeof *cfg);
  ((sign_cfg *)(void *)cfg->bytes)->bucket = 512;
}

static int sign_set(gcomp_kind_cfg *cfg, const char *key, const char *value) {
  sign_cfg *c = (sign_cfg *)(void *)cfg->bytes;
  if (!strcmp(key, "bucket")) return gcomp_lb_set_bucket("sign", value, &c->bucket);
  GCOMP_FAIL(GCOMP_ERR_INVALID, "sign: unknown parameter '%s' (valid: bucket)", key);
}

static int sign_validate(const gcomp_kind_cfg *cfg) { return GCOMP_OK; }

static size_t sign_print(const gcomp_kind_cfg *cfg, char *buf, size_t n) {
  const sign_cfg *c = (const sign_cfg *)(const void *)cfg->bytes;
  int len = snprintf(buf, n, "bucket=%llu", (unsigned long long)c->bucket);
  return len < 0 ? 0 : (size_t)len;
}

static void sign_ident(const gcomp_kind_cfg *cfg, uint64_t w[GCOMP_KIND_WORDS], uint64_t *seed) {
  w[0] = ((const sign_cfg *)(const void *)cfg->bytes)->bucket;
  (void)seed;
}

static size_t sign_max_payload(const gcomp_kind_cfg *cfg, size_t count) {
  const sign_cfg *c = (const sign_cfg *)(const void *)cfg->bytes;
  return 4 * count + 4 * (count / c->bucket + (count % c->bucket != 0));
}

typedef struct {
  const gcomp_lowbit_kernels *K;
  gcomp_enc_ctx *ctx;
} sign_run_args;

/* Codes bucket x[0..n) at p, or with error feedback x = g + res formed in res, the scan
 * fused with that add and the sign bits with the residual's update (lowbit.h); 0 when
 * past end. */
static size_t sign_bucket(void *arg, const float *x, const float *g, size_t n, uint64_t b,
                          float *res, uint8_t *p, const uint8_t *end) {
  const gcomp_lowbit_kernels *K = ((sign_run_args *)arg)->K;
  gcomp_enc_ctx *ctx = ((sign_run_args *)arg)->ctx;
  float sum;
  size_t nnz;
  int bad = res ? K->sscan_ef(res, g, n, &sum, &nnz) : K->sscan(x, n, &sum, &nnz);
  if (res) x = res;
  if (bad || !isfinite(sum)) {
    if ((size_t)(end - p) < 4 + 4 * n) return 0;
    ctx->stats->nonfinite_inputs += gcomp_lb_nonfinite(x, n);
    size_t w = gcomp_lb_raw_put(p, x, n);
    if (res) memset(res, 0, n * sizeof *res);
    return w;
  }
  float s = nnz ? sum / (float)nnz : 0.0f;
  int zeros = nnz > 0 && nnz < n;
  size_t nb = (n + 7) / 8, w = 4 + nb * (zeros ? 2 : 1);
  if ((size_t)(end - p) < w) return 0;
  gcomp_store_le32(p, gcomp_f2u(zeros ? -s : s));
  uint8_t *zm = zeros ? p + 4 + nb : NULL;
  if (res) K->senc_ef(res, n, s, p + 4, zm);
  else K->senc(x, n, p + 4, zm);
  return w;
}

static int sign_run(const sign_cfg *c, gcomp_enc_ctx *ctx, const float *src, const float *grad,
                    float *res, uint16_t *res16, size_t count, uint8_t *dst, size_t cap,
                    size_t *len) {
  sign_run_args a = {gcomp_lowbit_kernels_for(GCOMP_KF_SIGN_ENC), ctx};
  ctx->param = (uint32_t)c->bucket;
  return gcomp_lb_encode("sign", a.K, ctx, (size_t)c->bucket, src, grad, res, res16, count, dst,
                         cap, len, sign_bucket, &a);
}

static int sign_encode(const gcomp_kind_cfg *cfg, gcomp_enc_ctx *ctx, const float *restrict src,
                       size_t count, uint8_t *restrict dst, size_t cap, size_t *len) {
  return sign_run((const sign_cfg *)(const void *)cfg->bytes, ctx, src, NULL, NULL, NULL, count,
                  dst, cap, len);
}

static int sign_encode_ef(const gcomp_kind *kind, const gcomp_kind_cfg *cfg, gcomp_enc_ctx *ctx,
                          const float *restrict grad, float *restrict residual, size_t count,
                          uint8_t *restrict dst, size_t cap, size_t *len) {
  return sign_run((const sign_cfg *)(const void *)cfg->bytes, ctx, NULL, grad, residual, NULL,
                  count, dst, cap, len);
}

static int sign_encode_ef_bf16(const gcomp_kind *kind, const gcomp_kind_cfg *cfg,
                               gcomp_enc_ctx *ctx, const float *restrict grad,
                               uint16_t *restrict residual, size_t count, uint8_t *restrict dst,
                               size_t cap, size_t *len) {
  return sign_run((const sign_cfg *)(const void *)cfg->bytes, ctx, NULL, grad, NULL, residual,
                  count, dst, cap, len);
}

/* Buckets are coded one by one, each alone: any whole number of them is a part */
static size_t sign_part_values(const gcomp_kind_cfg *cfg) {
  return (size_t)((const sign_cfg *)(const void *)cfg->bytes)->bucket;
}

/* Values [at, at + count) (at a bucket's start) from payload byte *o on, into dst[0..count);
 * *o moves past them. */
static int sign_decode_part(const gcomp_kind_cfg *cfg, uint32_t param,
                            const uint8_t *restrict src, size_t len, size_t *o_io,
                            float *restrict dst, size_t at, size_t count, int add,
                            gcomp_frame_check *chk) {
  const sign_cfg *c = (const sign_cfg *)(const void *)cfg->bytes;
  GCOMP_FAIL_IF(param != c->bucket, GCOMP_ERR_CORRUPT,
                "sign: frame made with bucket=%u; this codec has bucket=%llu", (unsigned)param,
                (unsigned long long)c->bucket);
  const gcomp_lowbit_kernels *K = gcomp_lowbit_kernels_for(GCOMP_KF_SIGN_DEC);
  int mode = gcomp_lb_mode(add);
  size_t o = *o_io;
  for (size_t i0 = 0; i0 < count; i0 += c->bucket) {
    size_t n = count - i0 < c->bucket ? count - i0 : (size_t)c->bucket, nb = (n + 7) / 8;
    size_t b0 = at + i0;   /* the bucket's first value in the frame */
    GCOMP_FAIL_IF(len - o < 4, GCOMP_ERR_CORRUPT,
                  "sign: payload ends before the bucket at value %zu", b0);
    GCOMP_CHECK(gcomp_dec_need(chk, o + 4));
    uint32_t w0 = gcomp_load_le32(src + o);
    if (w0 == GCOMP_LB_RAW) {
      GCOMP_CHECK(gcomp_lb_decode_raw("sign", src, len, &o, n, b0, dst + i0, mode, chk));
      continue;
    }
    /* a finite scale decodes to finite values: nothing for the tally */
    GCOMP_FAIL_IF((w0 & 0x7f800000u) == 0x7f800000u, GCOMP_ERR_CORRUPT,
                  "sign: bucket at value %zu has scale %08x (finite expected)", b0, w0);
    int zeros = w0 >> 31;
    size_t w = 4 + nb * (zeros ? 2 : 1);
    GCOMP_FAIL_IF(len - o < w, GCOMP_ERR_CORRUPT,
                  "sign: payload ends inside the bucket at value %zu", b0);
    GCOMP_CHECK(gcomp_dec_need(chk, o + w));
    K->sdec(src + o + 4, zeros ? src + o + 4 + nb : NULL, n, gcomp_u2f(w0 & 0x7fffffffu),
            dst + i0, mode);
    o += w;
  }
  *o_io = o;
  return GCOMP_OK;
}

extern const gcomp_kind gcomp_kind_sign;   /* below */

static int sign_decode(const gcomp_kind_cfg *cfg, uint32_t param, const uint8_t *restrict src,
                       size_t len, float *restrict dst, size_t count, int add,
                       gcomp_frame_check *chk) {
  return gcomp_lb_decode_whole(&gcomp_kind_sign, cfg, param, src, len, dst, count, add, chk);
}

const gcomp_kind gcomp_kind_sign = {
    .name = "sign",
    .id = GCOMP_KIND_SIGN,
    .keys = "bucket",
    .elem_bytes = 0,
    .reads_in_blocks = 1,
    .counts_nonfinite = 1,
    .second_ef = 1,
    .defaults = sign_defaults,
    .set = sign_set,
    .validate = sign_validate,
    .print = sign_print,
    .ident = sign_ident,
    .max_payload = sign_max_payload,
    .encode = sign_encode,
    .decode = sign_decode,
    .encode_ef = sign_encode_ef,
    .encode_ef_bf16 = sign_encode_ef_bf16,
    .part_values = sign_part_values,
    .decode_part = sign_decode_part,
};
