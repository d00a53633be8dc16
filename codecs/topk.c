/* "topk": keep the k largest magnitudes, send them as (delta-coded index, value) pairs.
 *
 * This file is the codec: its settings, k for each call (with the sparsity warm-up), and
 * the encode driver that ties selection (topk_select.c: approximate by default, exact=1
 * for exactly k), the residual of error feedback, and the payload (topk_payload.c, which
 * also decodes) together. Zeros are never sent (they decode to zero anyway), so the kept
 * count is min(k, nonzeros); NaN and Inf are always sent, even beyond k.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "topk_impl.h"

_Static_assert(sizeof(topk_cfg) <= GCOMP_KIND_CFG_BYTES, "topk_cfg does not fit");

static const char *const value_names = "fp32|bf16|fp16";

/* ---- parameters ---------------------------------------------------------------------- */
static void topk_defaults(gcomp_kind_cfg *cfg) {
  memset(cfg, 0, sizeof *cfg);
  topk_cfg *c = (topk_cfg *)cfg->bytes;
  c->ratio = 0.01;
}

static int topk_set(gcomp_kind_cfg *cfg, const char *key, const char *value) {
  topk_cfg *c = (topk_cfg *)cfg->bytes;
  if (!strcmp(key, "ratio")) {
    double r;
    GCOMP_CHECK(gcomp_kv_double("topk", key, value, 0.0, 1.0, &r));
    GCOMP_FAIL_IF(r <= 0.0, GCOMP_ERR_INVALID, "topk: ratio='%s' must be > 0 (0 < ratio <= 1)",
                  value);
    GCOMP_FAIL_IF(c->given_k, GCOMP_ERR_INVALID, "topk: give ratio or k, not both");
    c->ratio = r;
    c->given_ratio = 1;
    return GCOMP_OK;
  }
  if (!strcmp(key, "k")) {
    GCOMP_CHECK(gcomp_kv_u64("topk", key, value, 1, UINT32_MAX, &c->k));
    GCOMP_FAIL_IF(c->given_ratio, GCOMP_ERR_INVALID, "topk: give ratio or k, not both");
    c->ratio = 0;
    c->given_k = 1;
    return GCOMP_OK;
  }
  if (!strcmp(key, "exact")) {
    uint64_t e;
    GCOMP_CHECK(gcomp_kv_u64("topk", key, value, 0, 1, &e));
    c->exact = (int)e;
    return GCOMP_OK;
  }
  if (!strcmp(key, "values")) return gcomp_kv_choice("topk", key, value, value_names, &c->values);
  if (!strcmp(key, "seed")) return gcomp_kv_u64("topk", key, value, 0, UINT64_MAX, &c->seed);
  if (!strcmp(key, "warmup")) {
    uint64_t w;
    GCOMP_CHECK(gcomp_kv_u64("topk", key, value, 0, UINT32_MAX, &w));
    c->warmup = (uint32_t)w;
    return GCOMP_OK;
  }
  GCOMP_FAIL(GCOMP_ERR_INVALID, "topk: unknown parameter '%s' (valid: ratio, k, exact, values, "
             "seed, warmup)", key);
}

static int topk_validate(const gcomp_kind_cfg *cfg) {
  const topk_cfg *c = (const topk_cfg *)cfg->bytes;
  GCOMP_FAIL_IF((c->ratio > 0) == (c->k > 0), GCOMP_ERR_INVALID,
                "topk: exactly one of ratio and k is needed");
  return GCOMP_OK;
}

static size_t topk_print(const gcomp_kind_cfg *cfg, char *buf, size_t n) {
  const topk_cfg *c = (const topk_cfg *)cfg->bytes;
  char amount[64];
  if (c->ratio > 0) {
    memcpy(amount, "ratio=", 6);
    gcomp_dtoa(amount + 6, sizeof amount - 6, c->ratio);
  } else {
    snprintf(amount, sizeof amount, "k=%llu", (unsigned long long)c->k);
  }
  static const char *const vn[] = {"fp32", "bf16", "fp16"};
  char warm[32] = "";   /* only when set: the specs without it read as they always have */
  if (c->warmup) snprintf(warm, sizeof warm, ",warmup=%u", (unsigned)c->warmup);
  return (size_t)snprintf(buf, n, "%s,exact=%d,values=%s,seed=%llu%s", amount, c->exact,
                          vn[c->values], (unsigned long long)c->seed, warm);
}

/* given_ratio and given_k stay out: ratio is 0 when k was given, k 0 when it was not */
static void topk_ident(const gcomp_kind_cfg *cfg, uint64_t w[GCOMP_KIND_WORDS], uint64_t *seed) {
  const topk_cfg *c = (const topk_cfg *)cfg->bytes;
  w[0] = gcomp_ident_dbl(c->ratio), w[1] = c->k, w[2] = (uint64_t)c->exact;
  w[3] = (uint64_t)c->values, w[4] = c->warmup;
  *seed = c->seed;
}

/* k for a tensor of n values: ratio * n rounded to nearest, at least 1, at most n. */
static size_t topk_k(const topk_cfg *c, size_t n) {
  if (n == 0) return 0;
  double kk = c->ratio > 0 ? floor(c->ratio * (double)n + 0.5) : (double)c->k;
  if (kk < 1) kk = 1;
  return kk >= (double)n ? n : (size_t)kk;
}

/* Sparsity warm-up (Deep Gradient Compression, Lin et al. 2018): over the first `warmup`
 * calls of a tensor the kept fraction falls exponentially from everything to k/n, as
 * (k/n)^(call/warmup): DGC's schedule (a quarter as dense each epoch), one step a call. */
static size_t topk_k_at(const topk_cfg *c, size_t n, uint64_t call) {
  size_t k = topk_k(c, n);
  if (!c->warmup || call >= c->warmup || n == 0) return k;
  double frac = pow((double)k / (double)n, (double)call / (double)c->warmup);
  double kk = floor(frac * (double)n + 0.5);
  return kk >= (double)n ? n : kk <= (double)k ? k : (size_t)kk;
}

/* A sparse payload larger than the dense one is sent dense instead (many NaN can push
 * the kept count past k), so the dense size bounds every payload. */
static size_t topk_max_payload(const gcomp_kind_cfg *cfg, size_t count) {
  const topk_cfg *c = (const topk_cfg *)cfg->bytes;
  return TOPK_HDR + count * topk_vbytes(c->values);
}

const gcomp_topk_kernels *gcomp_topk_kernels_get(void) {
  gcomp_isa l = gcomp_kernel_level(GCOMP_KF_TOPK);
  return l >= GCOMP_ISA_AVX512 ? &gcomp_topk_kernels_avx512
         : l >= GCOMP_ISA_AVX2 ? &gcomp_topk_kernels_avx2
                               : &gcomp_topk_kernels_base;
}

static int topk_run(const topk_cfg *cfg, gcomp_enc_ctx *ctx, topk_input in, float *res,
                    size_t n, uint8_t *dst, size_t cap, size_t *len) {
  GCOMP_FAIL_IF(n > UINT32_MAX, GCOMP_ERR_UNSUPPORTED,
                "topk: %zu values in one tensor (at most 2^32 - 1)", n);
  /* the tensor's state word: the last cut in the low 32 bits, and during warm-up the calls
   * so far in the high 32 (saved with the residuals, so a checkpoint resumes the ramp) */
  uint64_t *word = ctx->kind_state;
  uint64_t calls = word && cfg->warmup ? *word >> 32 : 0, hint = word ? *word & 0xffffffffu : 0;
  size_t k = topk_k_at(cfg, n, calls);
  if (n == 0) return gcomp_topk_write_empty(cfg, dst, cap, len);
  if (k >= n) {
    GCOMP_CHECK(gcomp_topk_write_dense(cfg, ctx, &in, res, n, dst, cap, len));
    if (word) *word = (calls + (calls < cfg->warmup)) << 32 | hint;
    return GCOMP_OK;
  }
  topk_sel s = {.cfg = cfg, .kt = gcomp_topk_kernels_get(), .in = in, .res = res, .n = n, .k = k};
  size_t cap0 = 2 * k + TOPK_BLOCK;
  int st = gcomp_topk_sel_grow(&s, cap0 > n ? n : cap0);
  if (st == GCOMP_OK) st = gcomp_topk_select(&s, cfg->seed, word ? &hint : NULL);
  if (st == GCOMP_OK) {
    int code;
    unsigned w;
    size_t l;
    gcomp_topk_plan_sparse(s.idx, s.c, &code, &w, &l);
    if (l + s.c * topk_vbytes(cfg->values) > n * topk_vbytes(cfg->values)) {
      /* denser than dense (many NaN): send everything; the residual holds x again */
      gcomp_topk_unfuse(&s);
      topk_input whole = res ? (topk_input){.src = res} : in;
      st = gcomp_topk_write_dense(cfg, ctx, &whole, res, n, dst, cap, len);
    } else {
      /* residual = x - decode(encode(x)) for what is sent; unsent entries hold x. The fused
       * pass already left 0 for fp32 values: only rounding (or a re-pass) needs the scatter */
      int scatter = res && (cfg->values != TOPK_V_FP32 || !s.fused);
      for (size_t j = 0; scatter && j < s.c; j++) {
        if (j + 16 < s.c) __builtin_prefetch(&res[s.idx[j + 16]], 1);
        float x = s.val[j];
        float r = cfg->values == TOPK_V_FP32 ? 0.0f : x - topk_roundtrip_value(x, cfg->values);
        res[s.idx[j]] = isfinite(r) ? r : 0.0f;
      }
      st = gcomp_topk_write_sparse(cfg, ctx, s.idx, s.val, s.c, code, w, l, dst, cap, len);
    }
  }
  free(s.idx);
  free(s.keys);
  free(s.tmp);
  if (st < 0) return gcomp_error_trace(st, __FILE__, __LINE__);
  if (word) *word = (calls + (calls < cfg->warmup)) << 32 | (hint & 0xffffffffu);
  return GCOMP_OK;
}

static int topk_encode(const gcomp_kind_cfg *cfg, gcomp_enc_ctx *ctx, const float *restrict src,
                       size_t count, uint8_t *restrict dst, size_t cap, size_t *len) {
  topk_input in = {.src = src};
  return topk_run((const topk_cfg *)cfg->bytes, ctx, in, NULL, count, dst, cap, len);
}

static int topk_encode_ef(const gcomp_kind *kind, const gcomp_kind_cfg *cfg, gcomp_enc_ctx *ctx,
                          const float *restrict grad, float *restrict residual, size_t count,
                          uint8_t *restrict dst, size_t cap, size_t *len) {
  topk_input in = {.grad = grad, .res = residual};
  return topk_run((const topk_cfg *)cfg->bytes, ctx, in, residual, count, dst, cap, len);
}

const gcomp_kind gcomp_kind_topk = {
    .name = "topk",
    .id = GCOMP_KIND_TOPK,
    .sparse = 1,
    .keys = "ratio, k, exact, values, seed, warmup",
    .elem_bytes = 0,
    .defaults = topk_defaults,
    .set = topk_set,
    .validate = topk_validate,
    .print = topk_print,
    .ident = topk_ident,
    .max_payload = topk_max_payload,
    .encode = topk_encode,
    .decode = gcomp_topk_decode,
    .encode_ef = topk_encode_ef,
};
