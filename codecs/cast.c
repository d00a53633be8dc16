/* "fp16" and "bf16": cast fp32 gradients to 16 bits (kernels in cast_base.c and
 * cast_avx2.c, rules in cast.h).
 *
 *   fp16[:scale=auto|none][,round=nearest|stochastic][,seed=N]
 *   bf16[:round=nearest|stochastic][,seed=N]
 *
 * fp16 scale=auto (the default) multiplies the frame by 2^k, k chosen from the frame's
 * largest finite magnitude M so that M * 2^k lies in [2^12, 2^15) (in [2^14, 2^15) for
 * frames of at most 16384 values and for round=stochastic): nothing overflows and at most
 * two binades of fp16's range go unused above the maximum. k is stored in the frame's
 * parameter word (low byte, two's complement) and the decoder multiplies by 2^-k; both
 * multiplications are exact. With round=nearest, M is found during the encode pass (see
 * gcomp_cast_f16_auto), so scaling costs no extra pass over the input in the common case.
 * scale=none is the plain IEEE cast: |x| >= 65520 becomes Inf (counted in overflows) and
 * |x| <= 2^-25 becomes 0 (counted in underflows). NaN and Inf are kept and counted in
 * nonfinite_inputs; they never affect the scale.
 *
 * round=stochastic draws 32 bits per element from a counter-based generator keyed by
 * (seed, frame sequence number, element index), so a frame's bits do not depend on how
 * the work is split. seed is only valid with round=stochastic; the canonical form prints
 * it only then ("fp16:scale=auto,round=nearest", "bf16:round=stochastic,seed=7").
 */
#include <stdio.h>
#include <string.h>

#include "cast.h"
#include "codec_impl.h"
#include "frame.h"

typedef struct {
  int scale;          /* 0: auto, 1: none (fp16 only) */
  int round;          /* 0: nearest, 1: stochastic */
  int seed_set;
  uint64_t seed;
} cast_cfg;

enum { SCALE_AUTO = 0, SCALE_NONE = 1, ROUND_NEAREST = 0, ROUND_STOCHASTIC = 1 };

_Static_assert(sizeof(cast_cfg) <= GCOMP_KIND_CFG_BYTES, "cast_cfg must fit gcomp_kind_cfg");

static const gcomp_cast_kernels *avx512_table(void) {
  if (!gcomp_cpu_has(GCOMP_CPU_VPCLMUL)) return &gcomp_cast_avx512_xmmsum;
  return gcomp_cpu_has(GCOMP_CPU_AVX512BF16) ? &gcomp_cast_avx512bf16 : &gcomp_cast_avx512;
}

static const gcomp_cast_kernels *avx2_table(void) {
  return gcomp_cpu_has(GCOMP_CPU_VPCLMUL) ? &gcomp_cast_avx2_vpclmul : &gcomp_cast_avx2;
}

const gcomp_cast_kernels *gcomp_cast_kernels_get(void) {
  gcomp_isa l = gcomp_kernel_level(GCOMP_KF_CAST);
  return l >= GCOMP_ISA_AVX512 ? avx512_table() : l >= GCOMP_ISA_AVX2 ? avx2_table()
                                                                      : &gcomp_cast_base;
}

const gcomp_cast_kernels *const *gcomp_cast_tables(size_t *n) {
  static const gcomp_cast_kernels *t[6];
  size_t k = 0;
  gcomp_isa best = gcomp_isa_best_level(gcomp_cpu_detect());
  unsigned f = gcomp_cpu_detect();
  t[k++] = &gcomp_cast_base;
  if (best >= GCOMP_ISA_AVX2) t[k++] = &gcomp_cast_avx2;
  if (best >= GCOMP_ISA_AVX2 && (f & GCOMP_CPU_VPCLMUL)) t[k++] = &gcomp_cast_avx2_vpclmul;
  if (best >= GCOMP_ISA_AVX512) t[k++] = &gcomp_cast_avx512_xmmsum;
  if (best >= GCOMP_ISA_AVX512 && (f & GCOMP_CPU_VPCLMUL)) t[k++] = &gcomp_cast_avx512;
  if (best >= GCOMP_ISA_AVX512 && (f & GCOMP_CPU_VPCLMUL) && (f & GCOMP_CPU_AVX512BF16))
    t[k++] = &gcomp_cast_avx512bf16;
  *n = k;
  return t;
}

static void cast_defaults(gcomp_kind_cfg *cfg) {
  memset(cfg, 0, sizeof *cfg);
}

static int cast_set(const char *kind, int has_scale, gcomp_kind_cfg *cfg, const char *key,
                    const char *value) {
  cast_cfg *c = (cast_cfg *)cfg->bytes;
  if (has_scale && strcmp(key, "scale") == 0)
    return gcomp_kv_choice(kind, key, value, "auto|none", &c->scale);
  if (strcmp(key, "round") == 0) return gcomp_kv_choice(kind, key, value, "nearest|stochastic", &c->round);
  if (strcmp(key, "seed") == 0) {
    c->seed_set = 1;
    return gcomp_kv_u64(kind, key, value, 0, UINT64_MAX, &c->seed);
  }
  GCOMP_FAIL(GCOMP_ERR_INVALID, "%s: unknown parameter '%s' (valid: %s)", kind, key,
             has_scale ? "scale, round, seed" : "round, seed");
}

static int fp16_set(gcomp_kind_cfg *cfg, const char *key, const char *value) {
  return cast_set("fp16", 1, cfg, key, value);
}
static int bf16_set(gcomp_kind_cfg *cfg, const char *key, const char *value) {
  return cast_set("bf16", 0, cfg, key, value);
}

static int cast_validate(const char *kind, const gcomp_kind_cfg *cfg) {
  const cast_cfg *c = (const cast_cfg *)cfg->bytes;
  GCOMP_FAIL_IF(c->seed_set && c->round != ROUND_STOCHASTIC, GCOMP_ERR_INVALID,
                "%s: seed=%llu has no effect with round=nearest (add round=stochastic)", kind,
                (unsigned long long)c->seed);
  return GCOMP_OK;
}
static int fp16_validate(const gcomp_kind_cfg *cfg) { return cast_validate("fp16", cfg); }
static int bf16_validate(const gcomp_kind_cfg *cfg) { return cast_validate("bf16", cfg); }

static size_t cast_print(int has_scale, const gcomp_kind_cfg *cfg, char *buf, size_t n) {
  const cast_cfg *c = (const cast_cfg *)cfg->bytes;
  char seed[40] = "";
  if (c->round == ROUND_STOCHASTIC)
    snprintf(seed, sizeof seed, ",seed=%llu", (unsigned long long)c->seed);
  return (size_t)snprintf(buf, n, "%s%s%s%s", has_scale ? "scale=" : "",
                          has_scale ? (c->scale == SCALE_NONE ? "none," : "auto,") : "",
                          c->round == ROUND_STOCHASTIC ? "round=stochastic" : "round=nearest",
                          seed);
}
static size_t fp16_print(const gcomp_kind_cfg *cfg, char *buf, size_t n) {
  return cast_print(1, cfg, buf, n);
}
static size_t bf16_print(const gcomp_kind_cfg *cfg, char *buf, size_t n) {
  return cast_print(0, cfg, buf, n);
}
/* seed_set stays out: it only makes validate refuse a seed with round=nearest (bf16's scale
 * stays 0, as it has none) */
static void cast_ident(const gcomp_kind_cfg *cfg, uint64_t w[GCOMP_KIND_WORDS], uint64_t *seed) {
  const cast_cfg *c = (const cast_cfg *)cfg->bytes;
  w[0] = (uint64_t)c->scale, w[1] = (uint64_t)c->round;
  *seed = c->round == ROUND_STOCHASTIC ? c->seed : 0;
}

static size_t cast_max_payload(const gcomp_kind_cfg *cfg, size_t count) { return count * 2; }

/* 2^e as a float for e in [-149, 127] (exact, subnormals included) */
static float pow2f(int e) {
  uint32_t u = e >= -126 ? (uint32_t)(e + 127) << 23 : 1u << (e + 149);
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* k such that M * 2^k is in [2^14, 2^15), M given as fp32 bits; 0 for M == 0 */
static int scale_exponent(uint32_t mbits) {
  if (mbits == 0) return 0;
  int e = mbits >= 0x800000u ? (int)(mbits >> 23) - 127 : (31 - __builtin_clz(mbits)) - 149;
  int k = 14 - e;
  return k > 127 ? 127 : k;   /* M below 2^-113 (fp32 subnormal): the largest scale */
}

/* The 16-bit values of one frame block. When the frame is summed as it is written (ctx
 * given and summing), the kernels run a block at a time: whole blocks through the _sum
 * kernels, which fold the block's checksum from registers (and stream a large frame past
 * the cache), the last partial block reported for summing while it is in cache. Otherwise
 * in one call (large outputs then stream past the cache). */
enum { BLOCK_VALUES = GCOMP_FRAME_BLOCK / 2 };
static size_t piece(const gcomp_enc_ctx *ctx, size_t left) {
  return ctx && gcomp_enc_summing(ctx) && left > BLOCK_VALUES ? BLOCK_VALUES : left;
}
static int stream_frame(size_t n) { return 2 * n >= GCOMP_CAST_STREAM_BYTES; }

static uint32_t f16_enc_frame(const gcomp_cast_kernels *K, const float *src, size_t n,
                              uint8_t *dst, float scale, gcomp_cast_counts *c,
                              gcomp_enc_ctx *ctx) {
  uint32_t mx = 0, v;
  for (size_t i = 0, m; i < n; i += m) {
    m = piece(ctx, n - i);
    if (m == BLOCK_VALUES) {
      uint32_t crc = K->f16_enc_sum(src + i, m, dst + 2 * i, scale, c, &v, stream_frame(n));
      gcomp_enc_block_sum(ctx, 2 * i, crc);
    } else {
      v = K->f16_enc(src + i, m, dst + 2 * i, scale, c);
      if (ctx) gcomp_enc_progress(ctx, 2 * (i + m));
    }
    mx = v > mx ? v : mx;
  }
  return mx;
}

/* The speculative scale: the prefix's maximum with GCOMP_CAST_AUTO_HEADROOM binades to
 * spare, checked against the whole frame's maximum, which the encode pass finds on the
 * way. Gradients rarely hold a value 4x larger than everything in their first 64 KiB, so
 * this is one pass over the input where the plain way (max-abs scan, then encode) is two;
 * when the guess is wrong (it would overflow) the frame is encoded again with the exact
 * scale. The result depends only on the frame's values. */
int gcomp_cast_f16_auto(const gcomp_cast_kernels *K, const float *src, size_t n, uint8_t *dst,
                        gcomp_cast_counts *c, gcomp_enc_ctx *ctx) {
  uint32_t prefix = n > GCOMP_CAST_AUTO_PREFIX ? K->maxabs(src, GCOMP_CAST_AUTO_PREFIX) : 0;
  if (prefix) {
    int k = scale_exponent(prefix) - GCOMP_CAST_AUTO_HEADROOM;
    gcomp_cast_counts trial = {0, 0, 0};
    uint32_t m = f16_enc_frame(K, src, n, dst, pow2f(k), &trial, ctx);
    if (k <= scale_exponent(m)) {   /* M * 2^k < 2^15: nothing overflowed */
      c->nonfinite += trial.nonfinite, c->overflow += trial.overflow;
      c->underflow += trial.underflow;
      return k;
    }
    GCOMP_TRACE(GCOMP_SUB_CODEC, "fp16 scale: prefix guess 2^%d overflows, encoding again", k);
    if (ctx) gcomp_enc_restart(ctx);
  }
  int k = scale_exponent(K->maxabs(src, n));
  f16_enc_frame(K, src, n, dst, pow2f(k), c, ctx);
  return k;
}

static void add_stats(gcomp_enc_ctx *ctx, const gcomp_cast_counts *k) {
  ctx->stats->nonfinite_inputs += k->nonfinite;
  ctx->stats->overflows += k->overflow;
  ctx->stats->underflows += k->underflow;
}

/* Stochastic encoders run per 2^32-element segment: the key carries the high index bits. */
typedef void (*sr_fn)(const gcomp_cast_kernels *K, const float *src, size_t n, uint8_t *dst,
                      float scale, uint64_t key, uint32_t i0, gcomp_cast_counts *c);
static void sr_f16(const gcomp_cast_kernels *K, const float *src, size_t n, uint8_t *dst,
                   float scale, uint64_t key, uint32_t i0, gcomp_cast_counts *c) {
  K->f16_enc_sr(src, n, dst, scale, key, i0, c);
}
static void sr_bf16(const gcomp_cast_kernels *K, const float *src, size_t n, uint8_t *dst,
                    float scale, uint64_t key, uint32_t i0, gcomp_cast_counts *c) {
  K->bf16_enc_sr(src, n, dst, key, i0, c);
}
static void encode_sr(sr_fn fn, const gcomp_cast_kernels *K, const cast_cfg *c,
                      gcomp_enc_ctx *ctx, const float *src, size_t count, uint8_t *dst,
                      float scale, gcomp_cast_counts *cnt) {
  for (size_t i = 0; i < count;) {
    uint64_t hi = (uint64_t)i >> 32;
    uint64_t end = (hi + 1) << 32;
    size_t n = (uint64_t)count < end ? count - i : (size_t)(end - i);
    n = piece(ctx, n);
    fn(K, src + i, n, dst + 2 * i, scale, gcomp_cast_key(c->seed, ctx->seq, (uint32_t)hi),
       (uint32_t)i, cnt);
    i += n;
    gcomp_enc_progress(ctx, 2 * i);
  }
}

static int fp16_encode(const gcomp_kind_cfg *cfg, gcomp_enc_ctx *ctx, const float *restrict src,
                       size_t count, uint8_t *restrict dst, size_t cap, size_t *len) {
  const cast_cfg *c = (const cast_cfg *)cfg->bytes;
  GCOMP_FAIL_IF(cap / 2 < count, GCOMP_ERR_NOMEM, "fp16: %zu bytes of room for %zu values", cap,
                count);
  const gcomp_cast_kernels *K = gcomp_cast_kernels_get();
  gcomp_cast_counts cnt = {0, 0, 0};
  int k = 0;
  if (c->round == ROUND_NEAREST && c->scale == SCALE_AUTO) {
    k = gcomp_cast_f16_auto(K, src, count, dst, &cnt, ctx);
  } else if (c->round == ROUND_NEAREST) {
    f16_enc_frame(K, src, count, dst, 1.0f, &cnt, ctx);
  } else {
    /* the stochastic kernel is compute-bound: a separate max-abs scan costs little */
    if (c->scale == SCALE_AUTO) k = scale_exponent(K->maxabs(src, count));
    encode_sr(sr_f16, K, c, ctx, src, count, dst, pow2f(k), &cnt);
  }
  add_stats(ctx, &cnt);
  ctx->param = (uint32_t)(uint8_t)(int8_t)k;
  *len = count * 2;
  return GCOMP_OK;
}

/* Decodes (add: adds) a frame's values a block at a time, each block verified before it
 * is read. Adding, while the next block is whole and not verified yet, the _dec_add_sum
 * kernels checksum it as they add this one (it is verified before it is added in turn):
 * the payload is read in the accumulator's stream, once from memory, not in a CRC pass of
 * its own a block ahead. f16: fp16 values times inv, else bf16. */
static int decode_blocks(const gcomp_cast_kernels *K, int f16, float inv, const uint8_t *src,
                         size_t count, float *dst, int add, gcomp_frame_check *chk) {
  int stream = 4 * count >= GCOMP_CAST_STREAM_BYTES;
  for (size_t i = 0, m; i < count; i += m) {
    m = count - i < BLOCK_VALUES ? count - i : BLOCK_VALUES;
    GCOMP_CHECK(gcomp_dec_need(chk, 2 * (i + m)));
    const uint8_t *next = add && m == BLOCK_VALUES ? gcomp_frame_next_block(chk, 2 * (i + m))
                                                   : NULL;
    if (next) {
      uint32_t crc = f16 ? K->f16_dec_add_sum(src + 2 * i, m, dst + i, inv, next)
                         : K->bf16_dec_add_sum(src + 2 * i, m, dst + i, next);
      GCOMP_CHECK(gcomp_frame_verify_sum(chk, 2 * (i + m), crc));
    } else if (add && f16) {
      K->f16_dec_add(src + 2 * i, m, dst + i, inv);
    } else if (add) {
      K->bf16_dec_add(src + 2 * i, m, dst + i);
    } else if (f16) {
      K->f16_dec_nt(src + 2 * i, m, dst + i, inv, stream);
    } else {
      K->bf16_dec_nt(src + 2 * i, m, dst + i, stream);
    }
  }
  return GCOMP_OK;
}

static int fp16_decode(const gcomp_kind_cfg *cfg, uint32_t param, const uint8_t *restrict src,
                       size_t len, float *restrict dst, size_t count, int add,
                       gcomp_frame_check *chk) {
  GCOMP_FAIL_IF(len / 2 != count || len % 2, GCOMP_ERR_CORRUPT,
                "fp16: payload of %zu bytes cannot hold %zu fp16 values", len, count);
  int k = (int8_t)(uint8_t)param;
  GCOMP_FAIL_IF(param > 0xffu || k == -128, GCOMP_ERR_CORRUPT,
                "fp16: frame parameter 0x%x is not a scale exponent", (unsigned)param);
  const gcomp_cast_kernels *K = gcomp_cast_kernels_get();
  return decode_blocks(K, 1, pow2f(-k), src, count, dst, add, chk);
}

static int bf16_encode(const gcomp_kind_cfg *cfg, gcomp_enc_ctx *ctx, const float *restrict src,
                       size_t count, uint8_t *restrict dst, size_t cap, size_t *len) {
  const cast_cfg *c = (const cast_cfg *)cfg->bytes;
  GCOMP_FAIL_IF(cap / 2 < count, GCOMP_ERR_NOMEM, "bf16: %zu bytes of room for %zu values", cap,
                count);
  const gcomp_cast_kernels *K = gcomp_cast_kernels_get();
  gcomp_cast_counts cnt = {0, 0, 0};
  if (c->round == ROUND_NEAREST) {
    for (size_t i = 0, m; i < count; i += m) {
      m = piece(ctx, count - i);
      if (m == BLOCK_VALUES) {
        uint32_t crc = K->bf16_enc_sum(src + i, m, dst + 2 * i, &cnt, stream_frame(count));
        gcomp_enc_block_sum(ctx, 2 * i, crc);
      } else {
        K->bf16_enc(src + i, m, dst + 2 * i, &cnt);
        gcomp_enc_progress(ctx, 2 * (i + m));
      }
    }
  } else {
    encode_sr(sr_bf16, K, c, ctx, src, count, dst, 1.0f, &cnt);
  }
  add_stats(ctx, &cnt);
  ctx->param = 0;
  *len = count * 2;
  return GCOMP_OK;
}

static int bf16_decode(const gcomp_kind_cfg *cfg, uint32_t param, const uint8_t *restrict src,
                       size_t len, float *restrict dst, size_t count, int add,
                       gcomp_frame_check *chk) {
  GCOMP_FAIL_IF(len / 2 != count || len % 2, GCOMP_ERR_CORRUPT,
                "bf16: payload of %zu bytes cannot hold %zu bf16 values", len, count);
  GCOMP_FAIL_IF(param != 0, GCOMP_ERR_CORRUPT, "bf16: frame parameter 0x%x should be 0",
                (unsigned)param);
  const gcomp_cast_kernels *K = gcomp_cast_kernels_get();
  return decode_blocks(K, 0, 1.0f, src, count, dst, add, chk);
}

const gcomp_kind gcomp_kind_fp16 = {
    .name = "fp16",
    .id = GCOMP_KIND_FP16,
    .keys = "scale, round, seed",
    .elem_bytes = 2,
    .reads_in_blocks = 1,
    .defaults = cast_defaults,
    .set = fp16_set,
    .validate = fp16_validate,
    .print = fp16_print,
    .ident = cast_ident,
    .max_payload = cast_max_payload,
    .encode = fp16_encode,
    .decode = fp16_decode,
    .encode_ef = gcomp_ef_encode_generic,
};

const gcomp_kind gcomp_kind_bf16 = {
    .name = "bf16",
    .id = GCOMP_KIND_BF16,
    .keys = "round, seed",
    .elem_bytes = 2,
    .reads_in_blocks = 1,
    .defaults = cast_defaults,
    .set = bf16_set,
    .validate = bf16_validate,
    .print = bf16_print,
    .ident = cast_ident,
    .max_payload = cast_max_payload,
    .encode = bf16_encode,
    .decode = bf16_decode,
    .encode_ef = gcomp_ef_encode_generic,
};
