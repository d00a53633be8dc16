/* "quant": bucketed 1-8 bit quantisation (kernels in lowbit_*.c, rules in lowbit.h).
 *
 *   quant[:bits=B][,bucket=S][,round=nearest|stochastic][,seed=N]
 *
 * B in 1..8 (default 4); S a multiple of 32 in [32, 2^20] (default 512). Each bucket of S
 * consecutive values (the last one may be shorter) is coded on the grid of 2^B points
 * from its minimum to its maximum: nearest keeps every value within half a step of its
 * bucket's grid (up to fp32 rounding of the step), stochastic rounds up or down with the
 * probabilities that make the code's mean the value (its random bits from (seed, frame
 * sequence number, bucket, index), so a frame's bits do not depend on how it is split).
 * A bucket holding NaN or Inf (counted in nonfinite_inputs), or whose range overflows
 * fp32 or is too small to step through, is sent as is: one huge value spoils only its own
 * bucket. seed is only valid with round=stochastic and printed only then.
 *
 * Payload (little-endian), bucket after bucket, nothing else:
 *   f32 min, f32 step, ceil(B n / 8) bytes of codes      (a bucket of n values), or
 *   u32 0xffffffff, n f32 values                        (a bucket sent as is)
 * min is finite, step finite and >= +0 (0: every value is min). The frame's parameter word
 * is B | S << 8: a decoder refuses a frame made with other parameters.
 * Size: B/8 + 8/S bytes a value (and the frame's header and block checksums).
 *
 * With +ef the error feedback is fused bucket by bucket: x = grad + residual is formed in
 * the residual itself, coded, and the decoded bucket subtracted from it while it is still
 * in cache.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "codec_impl.h"
#include "frame.h"
#include "lowbit.h"

typedef struct {
  uint64_t bits, bucket;
  int round;   /* 0 nearest, 1 stochastic */
  int seed_set;
  uint64_t seed;
} quant_cfg;

_Static_assert(sizeof(quant_cfg) <= GCOMP_KIND_CFG_BYTES, "quant_cfg must fit gcomp_kind_cfg");

static void quant_defaults(gcomp_kind_cfg *cfg) {
  memset(cfg, 0, sizeof *cfg);
  quant_cfg *c = (quant_cfg *)(void *)cfg->bytes;
  c->bits = 4;
  c->bucket = 512;
}

static int quant_set(gcomp_kind_cfg *cfg, const char *key, const char *value) {
  quant_cfg *c = (quant_cfg *)(void *)cfg->bytes;
  if (!strcmp(key, "bits")) return gcomp_kv_u64("quant", key, value, 1, 8, &c->bits);
  if (!strcmp(key, "bucket")) return gcomp_lb_set_bucket("quant", value, &c->bucket);
  if (!strcmp(key, "round"))
    return gcomp_kv_choice("quant", key, value, "nearest|stochastic", &c->round);
  if (!strcmp(key, "seed")) {
    c->seed_set = 1;
    return gcomp_kv_u64("quant", key, value, 0, UINT64_MAX, &c->seed);
  }
  GCOMP_FAIL(GCOMP_ERR_INVALID,
             "quant: unknown parameter '%s' (valid: bits, bucket, round, seed)", key);
}

static int quant_validate(const gcomp_kind_cfg *cfg) {
  const quant_cfg *c = (const quant_cfg *)(const void *)cfg->bytes;
  GCOMP_FAIL_IF(c->seed_set && c->round == 0, GCOMP_ERR_INVALID,
                "quant: seed=%llu has no effect with round=nearest (add round=stochastic)",
                (unsigned long long)c->seed);
  return GCOMP_OK;
}

static size_t quant_print(const gcomp_kind_cfg *cfg, char *buf, size_t n) {
  const quant_cfg *c = (const quant_cfg *)(const void *)cfg->bytes;
  char seed[40] = "";
  if (c->round) snprintf(seed, sizeof seed, ",seed=%llu", (unsigned long long)c->seed);
  int len = snprintf(buf, n, "bits=%llu,bucket=%llu,round=%s%s", (unsigned long long)c->bits,
                     (unsigned long long)c->bucket, c->round ? "stochastic" : "nearest", seed);
  return len < 0 ? 0 : (size_t)len;
}

static void quant_ident(const gcomp_kind_cfg *cfg, uint64_t w[GCOMP_KIND_WORDS], uint64_t *seed) {
  const quant_cfg *c = (const quant_cfg *)(const void *)cfg->bytes;
  w[0] = c->bits, w[1] = c->bucket, w[2] = (uint64_t)c->round;
  *seed = c->round ? c->seed : 0;
}

static size_t nbuckets(const quant_cfg *c, size_t count) {
  return count / c->bucket + (count % c->bucket != 0);
}

/* every bucket sent as is: the bound */
static size_t quant_max_payload(const gcomp_kind_cfg *cfg, size_t count) {
  const quant_cfg *c = (const quant_cfg *)(const void *)cfg->bytes;
  return 4 * count + 8 * nbuckets(c, count);
}

static uint32_t param_of(const quant_cfg *c) { return (uint32_t)(c->bits | c->bucket << 8); }

/* One bucket's grid: 0 with its step and inverse step, or nonzero when it must go raw. */
static int grid(float mn, float mx, unsigned bits, float *step, float *inv) {
  float range = mx - mn, top = (float)((1u << bits) - 1);
  if (!isfinite(range)) return 1;
  if (range == 0.0f) return *step = 0.0f, *inv = 0.0f, 0;
  *step = range / top;
  *inv = top / range;
  return !isfinite(*inv) || *step == 0.0f;
}

typedef struct {
  const quant_cfg *cfg;
  const gcomp_lowbit_kernels *K;
  gcomp_enc_ctx *ctx;
  uint64_t key0;   /* stochastic: the frame's key, mixed with each bucket's index */
} quant_run;

/* Codes bucket x[0..n) (index b) at p; res: error feedback (res == x, updated to x minus
 * what was sent). Returns the bytes written, 0 when they would pass end. */
static size_t code_bucket(void *arg, const float *x, const float *g, size_t n, uint64_t b,
                          float *res, uint8_t *p, const uint8_t *end) {
  const quant_run *q = arg;
  if (res) {   /* x = grad + residual, formed in the residual while it is in cache */
    if (g) q->K->addto(res, g, n);   /* g NULL: the residual holds x already */
    x = res;
  }
  unsigned bits = (unsigned)q->cfg->bits;
  float mn, mx, step = 0, inv = 0;
  int raw = q->K->minmax(x, n, &mn, &mx) || grid(mn, mx, bits, &step, &inv);
  if (raw) {
    if ((size_t)(end - p) < 4 + 4 * n) return 0;
    q->ctx->stats->nonfinite_inputs += gcomp_lb_nonfinite(x, n);
    size_t w = gcomp_lb_raw_put(p, x, n);
    if (res) memset(res, 0, n * sizeof *res);   /* sent exactly; NaN and Inf leave nothing */
    return w;
  }
  size_t cb = gcomp_lb_bytes(n, bits);
  if ((size_t)(end - p) < 8 + cb) return 0;
  gcomp_store_le32(p, gcomp_f2u(mn));
  gcomp_store_le32(p + 4, gcomp_f2u(step));
  if (q->cfg->round)
    q->K->qenc_sr(x, n, bits, mn, inv, gcomp_cast_mix64(q->key0 ^ b), 0, p + 8);
  else
    q->K->qenc(x, n, bits, mn, inv, p + 8);
  if (res) q->K->qdec(p + 8, n, bits, mn, step, res, GCOMP_LB_SUB);
  return 8 + cb;
}

static int quant_run_all(const quant_cfg *c, gcomp_enc_ctx *ctx, const float *src,
                         const float *grad, float *res, uint16_t *res16, size_t count,
                         uint8_t *dst, size_t cap, size_t *len) {
  quant_run q = {c, gcomp_lowbit_kernels_for(GCOMP_KF_QUANT_ENC), ctx,
                 gcomp_cast_key(c->seed, ctx->seq, 0)};
  ctx->param = param_of(c);
  return gcomp_lb_encode("quant", q.K, ctx, (size_t)c->bucket, src, grad, res, res16, count,
                         dst, cap, len, code_bucket, &q);
}

/* Nearest rounding codes each bucket alone: any whole number of them is a part (stochastic
 * rounding keys its draws on the bucket's index in the frame) */
static size_t quant_part_values(const gcomp_kind_cfg *cfg) {
  const quant_cfg *c = (const quant_cfg *)(const void *)cfg->bytes;
  return c->round ? 0 : (size_t)c->bucket;
}

static int quant_encode(const gcomp_kind_cfg *cfg, gcomp_enc_ctx *ctx, const float *restrict src,
                        size_t count, uint8_t *restrict dst, size_t cap, size_t *len) {
  return quant_run_all((const quant_cfg *)(const void *)cfg->bytes, ctx, src, NULL, NULL, NULL,
                       count, dst, cap, len);
}

static int quant_encode_ef(const gcomp_kind *kind, const gcomp_kind_cfg *cfg, gcomp_enc_ctx *ctx,
                           const float *restrict grad, float *restrict residual, size_t count,
                           uint8_t *restrict dst, size_t cap, size_t *len) {
  return quant_run_all((const quant_cfg *)(const void *)cfg->bytes, ctx, NULL, grad, residual,
                       NULL, count, dst, cap, len);
}

static int quant_encode_ef_bf16(const gcomp_kind *kind, const gcomp_kind_cfg *cfg,
                                gcomp_enc_ctx *ctx, const float *restrict grad,
                                uint16_t *restrict residual, size_t count, uint8_t *restrict dst,
                                size_t cap, size_t *len) {
  return quant_run_all((const quant_cfg *)(const void *)cfg->bytes, ctx, NULL, grad, NULL,
                       residual, count, dst, cap, len);
}

/* Values [at, at + count) (at a bucket's start) from payload byte *o on, into dst[0..count);
 * *o moves past them. */
static int quant_decode_part(const gcomp_kind_cfg *cfg, uint32_t param,
                             const uint8_t *restrict src, size_t len, size_t *o_io,
                             float *restrict dst, size_t at, size_t count, int add,
                             gcomp_frame_check *chk) {
  const quant_cfg *c = (const quant_cfg *)(const void *)cfg->bytes;
  GCOMP_FAIL_IF(param != param_of(c), GCOMP_ERR_CORRUPT,
                "quant: frame made with bits=%u, bucket=%u; this codec has bits=%llu, "
                "bucket=%llu", param & 0xffu, param >> 8, (unsigned long long)c->bits,
                (unsigned long long)c->bucket);
  const gcomp_lowbit_kernels *K = gcomp_lowbit_kernels_for(GCOMP_KF_QUANT_DEC);
  unsigned bits = (unsigned)c->bits;
  int mode = gcomp_lb_mode(add);
  size_t o = *o_io;
  for (size_t i0 = 0; i0 < count; i0 += c->bucket) {
    size_t n = count - i0 < c->bucket ? count - i0 : (size_t)c->bucket;
    size_t b0 = at + i0;   /* the bucket's first value in the frame */
    GCOMP_FAIL_IF(len - o < 4, GCOMP_ERR_CORRUPT,
                  "quant: payload ends before the bucket at value %zu", b0);
    GCOMP_CHECK(gcomp_dec_need(chk, o + 4));
    uint32_t w0 = gcomp_load_le32(src + o);
    if (w0 == GCOMP_LB_RAW) {
      GCOMP_CHECK(gcomp_lb_decode_raw("quant", src, len, &o, n, b0, dst + i0, mode, chk));
      continue;
    }
    size_t cb = gcomp_lb_bytes(n, bits);
    GCOMP_FAIL_IF(len - o < 8 || len - o - 8 < cb, GCOMP_ERR_CORRUPT,
                  "quant: payload ends inside the bucket at value %zu", b0);
    uint32_t sbits = gcomp_load_le32(src + o + 4);
    GCOMP_FAIL_IF((w0 & 0x7f800000u) == 0x7f800000u || sbits >= 0x7f800000u, GCOMP_ERR_CORRUPT,
                  "quant: bucket at value %zu has min %08x, step %08x (a finite min and a "
                  "finite step >= 0 expected)", b0, w0, sbits);
    GCOMP_CHECK(gcomp_dec_need(chk, o + 8 + cb));
    float mn = gcomp_u2f(w0), step = gcomp_u2f(sbits);
    /* mn + c * step rounds monotonically in c (step >= 0): finite at the grid's ends, finite
     * for every code; a grid that ends past FLT_MAX leaves the count unknown */
    if (chk && !isfinite(mn + (float)((1u << bits) - 1) * step)) gcomp_dec_tally(chk, UINT64_MAX);
    K->qdec(src + o + 8, n, bits, mn, step, dst + i0, mode);
    o += 8 + cb;
  }
  *o_io = o;
  return GCOMP_OK;
}

extern const gcomp_kind gcomp_kind_quant;   /* below */

static int quant_decode(const gcomp_kind_cfg *cfg, uint32_t param, const uint8_t *restrict src,
                        size_t len, float *restrict dst, size_t count, int add,
                        gcomp_frame_check *chk) {
  return gcomp_lb_decode_whole(&gcomp_kind_quant, cfg, param, src, len, dst, count, add, chk);
}

const gcomp_kind gcomp_kind_quant = {
    .name = "quant",
    .id = GCOMP_KIND_QUANT,
    .keys = "bits, bucket, round, seed",
    .elem_bytes = 0,
    .reads_in_blocks = 1,
    .counts_nonfinite = 1,
    .defaults = quant_defaults,
    .set = quant_set,
    .validate = quant_validate,
    .print = quant_print,
    .ident = quant_ident,
    .max_payload = quant_max_payload,
    .encode = quant_encode,
    .decode = quant_decode,
    .encode_ef = quant_encode_ef,
    .encode_ef_bf16 = quant_encode_ef_bf16,
    .part_values = quant_part_values,
    .decode_part = quant_decode_part,
};
