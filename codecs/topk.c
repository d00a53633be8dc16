/* "topk": keep the k largest magnitudes, send them as (delta-coded index, value) pairs.
 *
 * Selection (approximate, the default): estimate the magnitude threshold from a sample of
 * whole cache lines (or take the tensor's last threshold when a small sample agrees with
 * it), then one filtering pass. Too many survivors are trimmed to exactly k by a radix
 * selection among them; too few (the sample misjudged) trigger a second pass with a lower
 * threshold. exact=1 aims the threshold low with a margin and always trims to exactly k,
 * ties broken by lower index. Zeros are never sent (they decode to zero anyway), so the
 * kept count is min(k, nonzeros); NaN and Inf are always sent, even beyond k.
 *
 * Payload (little-endian):
 *   0  u8  index coding: 0 bit-packed gaps, 1 LEB128 varint gaps, 2 dense (no indices)
 *   1  u8  value type: 0 fp32, 1 bf16, 2 fp16 (must match the codec's values=)
 *   2  u8  bit width of a packed gap (0..32; 0 unless bit-packed)
 *   3  u8  0
 *   4  u64 kept count c
 *   12 u64 index section length L
 *   20     L bytes of gaps (gap_j = idx_j - idx_{j-1} - 1, idx_{-1} = -1), then c values
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec_impl.h"
#include "frame.h"
#include "half.h"
#include "topk.h"

enum { TOPK_V_FP32 = 0, TOPK_V_BF16 = 1, TOPK_V_FP16 = 2 };
enum { CODE_PACKED = 0, CODE_VARINT = 1, CODE_DENSE = 2 };
enum { HDR = 20, BLOCK = 4096 };
/* values written between reports to the frame's block checksums (gcomp_enc_progress):
 * the payload is written in order, so each block is summed while it is in cache */
enum { PROGRESS = 1 << 14 };

typedef struct {
  double ratio;     /* > 0 unless the spec gave k= */
  uint64_t k;       /* > 0 when the spec gave k= */
  int exact;
  int values;       /* TOPK_V_* */
  uint64_t seed;
  uint8_t given_ratio, given_k;
  uint32_t warmup;  /* calls of a tensor over which k falls from dense to its value (0: none) */
} topk_cfg;

_Static_assert(sizeof(topk_cfg) <= GCOMP_KIND_CFG_BYTES, "topk_cfg does not fit");

static const char *const value_names = "fp32|bf16|fp16";
static unsigned vbytes(int v) { return v == TOPK_V_FP32 ? 4 : 2; }

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
  return HDR + count * vbytes(c->values);
}

/* ---- values (codecs/half.h: fp16 saturates at +-65504, counted as an overflow, so with
 * error feedback the excess stays in the residual instead of turning into Inf) --------- */
static inline void put_value(uint8_t *p, float x, int vt, gcomp_codec_stats *st) {
  uint16_t h;
  switch (vt) {
  case TOPK_V_FP32:
    gcomp_store_le32(p, gcomp_f2u(x));
    return;
  case TOPK_V_BF16:
    h = gcomp_bf16_rne(x);
    st->overflows += (h & 0x7fffu) == 0x7f80u && (gcomp_f2u(x) & 0x7fffffffu) < 0x7f800000u;
    break;
  default:
    h = gcomp_f16_rne_sat(x);
    st->overflows += (gcomp_f2u(x) & 0x7fffffffu) >= GCOMP_F16_OVERFLOW_MAG &&
                     (gcomp_f2u(x) & 0x7fffffffu) < 0x7f800000u;
    break;
  }
  st->underflows += (h & 0x7fffu) == 0 && (gcomp_f2u(x) & 0x7fffffffu) != 0;
  p[0] = (uint8_t)h;
  p[1] = (uint8_t)(h >> 8);
}

static inline float get_value(const uint8_t *p, int vt) {
  if (vt == TOPK_V_FP32) return gcomp_u2f(gcomp_load_le32(p));
  uint16_t h = (uint16_t)(p[0] | p[1] << 8);
  return vt == TOPK_V_BF16 ? gcomp_bf16_to_f32(h) : gcomp_f16_to_f32(h);
}

/* What the receiver will see for x. */
static inline float roundtrip_value(float x, int vt) {
  gcomp_codec_stats dummy = {0};
  uint8_t b[4];
  put_value(b, x, vt, &dummy);
  return get_value(b, vt);
}

/* ---- radix selection ------------------------------------------------------------------- */
uint32_t gcomp_topk_kth_key(const uint32_t *keys, size_t m, size_t r, uint32_t *tmp) {
  static const unsigned shift[3] = {20, 9, 0}, bits[3] = {11, 11, 9};
  size_t hist[2048];
  const uint32_t *cur = keys;
  uint32_t prefix = 0;
  for (int lv = 0; lv < 3; lv++) {
    uint32_t mask = (1u << bits[lv]) - 1;
    size_t nb = (size_t)mask + 1;
    memset(hist, 0, nb * sizeof *hist);
    for (size_t i = 0; i < m; i++) hist[(cur[i] >> shift[lv]) & mask]++;
    size_t b = nb - 1, above = 0;
    while (above + hist[b] < r) above += hist[b--];   /* r <= m: stops at a bin */
    r -= above;
    prefix |= (uint32_t)b << shift[lv];
    if (lv == 2) break;
    size_t o = 0;   /* keep the keys of bin b (in place when cur == tmp: o <= i) */
    for (size_t i = 0; i < m; i++)
      if (((cur[i] >> shift[lv]) & mask) == b) tmp[o++] = cur[i];
    cur = tmp;
    m = o;
  }
  return prefix;
}

/* ---- sampling -------------------------------------------------------------------------- */
static inline uint64_t mix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* The input of one encode: src alone, or grad + residual (error feedback). */
typedef struct {
  const float *src, *grad, *res;
} topk_input;

static inline float input_at(const topk_input *in, size_t i) {
  return in->src ? in->src[i] : in->grad[i] + in->res[i];
}

/* Fills keys with about `want` magnitude keys: whole 16-float lines, one picked at a
 * seeded random offset in each of evenly spaced windows (cheaper than scattered gathers).
 * Everything when want >= n. Returns the number of keys. */
static size_t sample_keys(const topk_input *in, size_t n, size_t want, uint64_t seed,
                          uint32_t *keys) {
  if (want >= n || n < 64) {
    for (size_t i = 0; i < n; i++) keys[i] = gcomp_f2u(input_at(in, i)) & 0x7fffffffu;
    return n;
  }
  size_t lines = n / 16, take = (want + 15) / 16;
  if (take > lines) take = lines;
  size_t window = lines / take;
  for (size_t j = 0; j < take; j++) {
    size_t line = j * window + (size_t)(mix64(seed ^ (j * 0x9e3779b97f4a7c15ull)) % window);
    uint32_t *restrict out = keys + 16 * j;
    if (in->src) {
      const float *p = in->src + line * 16;
      for (size_t e = 0; e < 16; e++) out[e] = gcomp_f2u(p[e]) & 0x7fffffffu;
    } else {
      const float *g = in->grad + line * 16, *r = in->res + line * 16;
      for (size_t e = 0; e < 16; e++) out[e] = gcomp_f2u(g[e] + r[e]) & 0x7fffffffu;
    }
  }
  return take * 16;
}

/* ---- selection ------------------------------------------------------------------------- */
typedef struct {
  const topk_cfg *cfg;
  const gcomp_topk_kernels *kt;
  topk_input in;
  float *res;          /* error feedback: the residual (NULL without) */
  int fused;           /* the residual was updated by the last pass (filter_ef) */
  size_t n, k;
  uint32_t *idx;       /* candidates, increasing indices */
  float *val;
  size_t c, cap;       /* cap: entries idx/val can take beyond one BLOCK of slack */
  uint32_t *keys, *tmp; /* scratch for selections, cap + BLOCK each */
} topk_sel;

/* idx and val share one allocation (one block for malloc to recycle between calls). */
static int grow(topk_sel *s, size_t cap) {
  uint32_t *idx = malloc((cap + BLOCK) * (sizeof *idx + sizeof *s->val));
  GCOMP_FAIL_IF(!idx, GCOMP_ERR_NOMEM, "topk: %zu candidate slots", cap + BLOCK);
  float *val = (float *)(void *)(idx + cap + BLOCK);
  if (s->idx) {
    memcpy(idx, s->idx, s->c * sizeof *idx);
    memcpy(val, s->val, s->c * sizeof *val);
    free(s->idx);
  }
  s->idx = idx;
  s->val = val;
  s->cap = cap;
  /* selection scratch: allocated by the first trim that needs it */
  free(s->keys);
  free(s->tmp);
  s->keys = s->tmp = NULL;
  return GCOMP_OK;
}

/* Keeps exactly the top k of the candidates (ties at the cut: lower index first; NaN and
 * Inf always, even beyond k). A dropped candidate's value goes back into the residual when
 * the fused pass had cleared it. *cut_out: the key of the cut. */
static int trim(topk_sel *s, size_t k, uint32_t *cut_out) {
  size_t c = s->c;
  if (!s->keys) {
    s->keys = malloc((s->cap + BLOCK) * sizeof *s->keys);
    s->tmp = malloc((s->cap + BLOCK) * sizeof *s->tmp);
    GCOMP_FAIL_IF(!s->keys || !s->tmp, GCOMP_ERR_NOMEM, "topk: selecting among %zu", c);
  }
  for (size_t i = 0; i < c; i++) s->keys[i] = gcomp_f2u(s->val[i]) & 0x7fffffffu;
  uint32_t cut = gcomp_topk_kth_key(s->keys, c, k, s->tmp);
  size_t ties = 0, o = 0;
  if (cut >= GCOMP_TOPK_KEY_INF) {
    cut = GCOMP_TOPK_KEY_INF;
  } else {
    size_t above = 0;
    for (size_t i = 0; i < c; i++) above += (gcomp_f2u(s->val[i]) & 0x7fffffffu) > cut;
    ties = k - above;
  }
  for (size_t i = 0; i < c; i++) {
    uint32_t key = gcomp_f2u(s->val[i]) & 0x7fffffffu;
    int keep = key > cut || (key == cut && (cut == GCOMP_TOPK_KEY_INF || ties > 0));
    if (key == cut && keep && cut != GCOMP_TOPK_KEY_INF) ties--;
    if (keep) {
      s->idx[o] = s->idx[i];
      s->val[o++] = s->val[i];
    } else if (s->fused) {
      s->res[s->idx[i]] = s->val[i];
    }
  }
  s->c = o;
  *cut_out = cut;
  return GCOMP_OK;
}

/* One pass over the input with threshold t (a key >= 1). When the candidates would
 * overflow, the ones so far are trimmed to k and the threshold rises past their cut:
 * nothing later can beat them on a tie (higher index), so the result is unchanged. */
static int filter_pass(topk_sel *s, uint32_t *pt, int fused) {
  uint32_t t = *pt;
  s->c = 0;
  s->fused = fused;
  for (size_t i = 0; i < s->n; i += BLOCK) {
    size_t nb = s->n - i < BLOCK ? s->n - i : BLOCK;
    if (s->c + nb > s->cap) {
      uint32_t cut;
      GCOMP_CHECK(trim(s, s->k, &cut));
      t = cut >= GCOMP_TOPK_KEY_INF ? GCOMP_TOPK_KEY_INF : cut + 1;
      if (s->c + nb > s->cap) GCOMP_CHECK(grow(s, 2 * s->cap));
    }
    if (fused)
      s->c += s->kt->filter_ef(s->in.grad + i, s->res + i, nb, t, (uint32_t)i, s->idx + s->c,
                               s->val + s->c);
    else
      s->c += s->kt->filter(s->in.src + i, nb, t, (uint32_t)i, s->idx + s->c, s->val + s->c);
  }
  *pt = t;   /* the cut in force at the end: a better first guess for next time */
  return GCOMP_OK;
}

/* After a fused pass that must be redone: put the candidates' values back so the residual
 * holds x everywhere; later passes read x from it. */
static void unfuse(topk_sel *s) {
  if (!s->fused) return;
  for (size_t i = 0; i < s->c; i++) s->res[s->idx[i]] = s->val[i];
  s->in.src = s->res;
  s->fused = 0;
}

static inline size_t rank_for(double expect, double sigmas, size_t m) {
  double r = expect + sigmas * sqrt(expect) + (sigmas > 0 ? 2 : 0);
  if (r < 1) r = 1;
  return r >= (double)m ? m : (size_t)r;
}

/* Chooses the candidates: on return s->idx/val hold the kept entries in index order. */
static int select_topk(topk_sel *s, uint64_t seed, uint64_t *hint) {
  size_t n = s->n, k = s->k;
  int exact = s->cfg->exact;
  size_t lo = exact ? k : k - k / 10, hi = exact ? k : k + k / 10;
  /* a sample that puts ~1000 of its keys above the cut (sd ~3%), at most 1/128 of the
   * data (at small ratios fewer land above the cut: the aim is higher and the surplus is
   * trimmed, cheaply, as k is small); small tensors are taken whole, the cut is then exact */
  double most = fmax(16384.0, (double)n / 128);
  size_t want = n <= 65536 ? n : (size_t)fmin(most, fmax(16384.0, 1024.0 * (double)n / (double)k));
  uint32_t *sample = malloc((want + 16) * 2 * sizeof *sample);
  GCOMP_FAIL_IF(!sample, GCOMP_ERR_NOMEM, "topk: sample of %zu keys", want);
  size_t m = 0;
  double f = 0;
  uint32_t t = 0;
  int s_ok = GCOMP_OK;

  /* the tensor's last cut, when a small sample agrees it still gives about k */
  uint64_t h = hint ? *hint : 0;
  if (!exact && h >= 1 && h <= GCOMP_TOPK_KEY_INF) {
    size_t small = (size_t)fmin((double)want, fmax(4096.0, 128.0 * (double)n / (double)k));
    size_t ms = sample_keys(&s->in, n, small, seed + 1, sample);
    size_t above = 0;
    for (size_t i = 0; i < ms; i++) above += sample[i] >= h;
    double expect = (double)k * (double)ms / (double)n;
    if ((double)above >= 0.8 * expect && (double)above <= 1.25 * expect) t = (uint32_t)h;
  }
  int estimated = 0, passes = 0;
  for (int round = 0;; round++) {
    if (!t) {
      if (!estimated) {
        m = sample_keys(&s->in, n, want, seed, sample);
        f = (double)m / (double)n;
        estimated = 1;
      }
      /* aim above k (trimming is cheap, a second pass is not); exact needs >= k */
      double expect = (double)k * f * (round ? 1.5 * round : 1.0);
      size_t r = m == n ? k : rank_for(expect, exact ? 4.0 : 2.0, m);
      t = r >= m && m < n ? 1 : gcomp_topk_kth_key(sample, m, r, sample + m);
      if (t == 0) t = 1;   /* zeros are never sent */
      if (t > GCOMP_TOPK_KEY_INF) t = GCOMP_TOPK_KEY_INF;   /* NaN and Inf always are */
    }
    uint32_t t0 = t;
    s_ok = filter_pass(s, &t, s->res && round == 0);
    passes++;
    if (s_ok < 0) break;
    if (s->c >= lo || t0 == 1) break;
    /* too few: the sample misjudged (or the hint was stale); lower the cut and redo */
    unfuse(s);
    t = 0;
    if (round >= 3) t = 1;
  }
  free(sample);
  GCOMP_CHECK(s_ok);
  uint32_t cut = t;
  size_t found = s->c;
  if (s->c > hi) GCOMP_CHECK(trim(s, k, &cut));
  if (hint) *hint = cut;
  GCOMP_TRACE(GCOMP_SUB_CODEC, "topk: n=%zu k=%zu first cut %s, %d pass(es), %zu found, %zu kept",
              n, k, h && passes == 1 && estimated == 0 ? "from last call" : "sampled", passes, found,
              s->c);
  return GCOMP_OK;
}

/* ---- sparse encoding ------------------------------------------------------------------- */
/* Branch-free: gap sizes are random, a branch per boundary mispredicts. */
static inline size_t varint_len(uint32_t v) {
  return 1 + (size_t)(v >= (1u << 7)) + (size_t)(v >= (1u << 14)) + (size_t)(v >= (1u << 21)) +
         (size_t)(v >= (1u << 28));
}

/* The LEB128 bytes of v in the low bytes of the result (continuation bits set). */
static inline uint64_t varint_bytes(uint32_t v, size_t len) {
  uint64_t x = v;
  uint64_t w = (x & 0x7f) | (x & 0x3f80) << 1 | (x & 0x1fc000) << 2 | (x & 0xfe00000) << 3 |
               (x & 0xf0000000) << 4;
  return w | (0x8080808080ull & ((1ull << (8 * (len - 1))) - 1));
}

static void put_header(uint8_t *dst, int code, int vt, unsigned w, uint64_t c, uint64_t l) {
  dst[0] = (uint8_t)code;
  dst[1] = (uint8_t)vt;
  dst[2] = (uint8_t)w;
  dst[3] = 0;
  gcomp_store_le64(dst + 4, c);
  gcomp_store_le64(dst + 12, l);
}

/* Sizes the gap stream both ways and picks the smaller (bit-packing on a tie). */
static void plan_sparse(const uint32_t *idx, size_t c, int *code, unsigned *w, size_t *l) {
  uint32_t maxgap = 0, prev = 0;
  size_t vlen = 0;
  for (size_t j = 0; j < c; j++) {
    uint32_t gap = idx[j] - prev;   /* prev = idx_{j-1} + 1 */
    prev = idx[j] + 1;
    maxgap |= gap;
    vlen += varint_len(gap);
  }
  *w = maxgap ? 32u - (unsigned)__builtin_clz(maxgap) : 0;
  size_t plen = (c * *w + 7) / 8;
  *code = vlen < plen ? CODE_VARINT : CODE_PACKED;
  *l = *code == CODE_VARINT ? vlen : plen;
  if (*code == CODE_VARINT) *w = 0;
}

static int write_sparse(const topk_cfg *cfg, gcomp_enc_ctx *ctx, const uint32_t *idx,
                        const float *val, size_t c, int code, unsigned w, size_t l, uint8_t *dst,
                        size_t cap, size_t *len) {
  size_t vb = vbytes(cfg->values), total = HDR + l + c * vb;
  GCOMP_FAIL_IF(total > cap, GCOMP_ERR_NOMEM, "topk: %zu bytes of room, %zu needed", cap, total);
  put_header(dst, code, cfg->values, w, c, l);
  uint8_t *p = dst + HDR;
  uint32_t prev = 0;
  if (code == CODE_VARINT) {
    const uint8_t *end = p + l;
    for (size_t j = 0; j < c; j++) {
      uint32_t gap = idx[j] - prev;
      prev = idx[j] + 1;
      size_t vl = varint_len(gap);
      uint64_t bytes = varint_bytes(gap, vl);
      if (end - p >= 8) {   /* an 8-byte store that stays inside the index section */
        gcomp_store_le64(p, bytes);
      } else {
        for (size_t i = 0; i < vl; i++) p[i] = (uint8_t)(bytes >> (8 * i));
      }
      p += vl;
    }
  } else if (w) {
    uint64_t acc = 0;
    unsigned nbits = 0;
    for (size_t j = 0; j < c; j++) {
      uint32_t gap = idx[j] - prev;
      prev = idx[j] + 1;
      acc |= (uint64_t)gap << nbits;
      nbits += w;
      if (nbits >= 32) {   /* w <= 32, so acc never holds more than 63 bits */
        gcomp_store_le32(p, (uint32_t)acc);
        p += 4, acc >>= 32, nbits -= 32;
      }
    }
    for (; nbits > 0; nbits = nbits > 8 ? nbits - 8 : 0) *p++ = (uint8_t)acc, acc >>= 8;
  }
  uint64_t nonfinite = 0;
  if (cfg->values == TOPK_V_FP32) {
    for (size_t j = 0; j < c; j++, p += 4) {
      uint32_t b = gcomp_f2u(val[j]);
      nonfinite += (b & 0x7f800000u) == 0x7f800000u;
      gcomp_store_le32(p, b);
      if ((j & (PROGRESS - 1)) == PROGRESS - 1) gcomp_enc_progress(ctx, (size_t)(p - dst) + 4);
    }
  } else {
    for (size_t j = 0; j < c; j++, p += vb) {
      nonfinite += (gcomp_f2u(val[j]) & 0x7f800000u) == 0x7f800000u;
      put_value(p, val[j], cfg->values, ctx->stats);
      if ((j & (PROGRESS - 1)) == PROGRESS - 1) gcomp_enc_progress(ctx, (size_t)(p - dst) + vb);
    }
  }
  ctx->stats->nonfinite_inputs += nonfinite;
  *len = total;
  return GCOMP_OK;
}

/* k >= n: every value, no indices. With error feedback the residual keeps the rounding. */
static int write_dense(const topk_cfg *cfg, gcomp_enc_ctx *ctx, const topk_input *in,
                       float *res, size_t n, uint8_t *dst, size_t cap, size_t *len) {
  size_t vb = vbytes(cfg->values), total = HDR + n * vb;
  GCOMP_FAIL_IF(total > cap, GCOMP_ERR_NOMEM, "topk: %zu bytes of room, %zu needed", cap, total);
  put_header(dst, CODE_DENSE, cfg->values, 0, n, 0);
  uint8_t *p = dst + HDR;
  for (size_t i = 0; i < n; i++, p += vb) {
    float x = input_at(in, i);
    ctx->stats->nonfinite_inputs += (gcomp_f2u(x) & 0x7f800000u) == 0x7f800000u;
    put_value(p, x, cfg->values, ctx->stats);
    if (res) {
      float r = x - get_value(p, cfg->values);
      res[i] = isfinite(r) ? r : 0.0f;
    }
    if ((i & (PROGRESS - 1)) == PROGRESS - 1) gcomp_enc_progress(ctx, (size_t)(p - dst) + vb);
  }
  *len = total;
  return GCOMP_OK;
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
  if (n == 0) {
    GCOMP_FAIL_IF(cap < HDR, GCOMP_ERR_NOMEM, "topk: %zu bytes of room", cap);
    put_header(dst, CODE_PACKED, cfg->values, 0, 0, 0);
    *len = HDR;
    return GCOMP_OK;
  }
  if (k >= n) {
    GCOMP_CHECK(write_dense(cfg, ctx, &in, res, n, dst, cap, len));
    if (word) *word = (calls + (calls < cfg->warmup)) << 32 | hint;
    return GCOMP_OK;
  }
  topk_sel s = {.cfg = cfg, .kt = gcomp_topk_kernels_get(), .in = in, .res = res, .n = n, .k = k};
  size_t cap0 = 2 * k + BLOCK;
  int st = grow(&s, cap0 > n ? n : cap0);
  if (st == GCOMP_OK) st = select_topk(&s, cfg->seed, word ? &hint : NULL);
  if (st == GCOMP_OK) {
    int code;
    unsigned w;
    size_t l;
    plan_sparse(s.idx, s.c, &code, &w, &l);
    if (l + s.c * vbytes(cfg->values) > n * vbytes(cfg->values)) {
      /* denser than dense (many NaN): send everything; the residual holds x again */
      unfuse(&s);
      topk_input whole = res ? (topk_input){.src = res} : in;
      st = write_dense(cfg, ctx, &whole, res, n, dst, cap, len);
    } else {
      /* residual = x - decode(encode(x)) for what is sent; unsent entries hold x. The fused
       * pass already left 0 for fp32 values: only rounding (or a re-pass) needs the scatter */
      int scatter = res && (cfg->values != TOPK_V_FP32 || !s.fused);
      for (size_t j = 0; scatter && j < s.c; j++) {
        if (j + 16 < s.c) __builtin_prefetch(&res[s.idx[j + 16]], 1);
        float x = s.val[j];
        float r = cfg->values == TOPK_V_FP32 ? 0.0f : x - roundtrip_value(x, cfg->values);
        res[s.idx[j]] = isfinite(r) ? r : 0.0f;
      }
      st = write_sparse(cfg, ctx, s.idx, s.val, s.c, code, w, l, dst, cap, len);
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

/* ---- decoding -------------------------------------------------------------------------- */
/* Applies entries [j0, j0 + nb) whose indices are in at[]. */
static void apply(float *dst, const size_t *at, size_t nb, const uint8_t *vals, size_t j0, int vt,
                  int add) {
  size_t vb = vbytes(vt);
  for (size_t b = 0; b < nb; b++) {
    float v = get_value(vals + (j0 + b) * vb, vt);
    dst[at[b]] = add ? dst[at[b]] + v : v;
  }
}

/* Reads the gap stream. With dst == NULL only validates (every index < count, exactly
 * l bytes used); else dst[idx] = value (add: +=). Indices are decoded a batch ahead and
 * their lines prefetched: the scatter is bound by cache misses, not by arithmetic. */
enum { BATCH = 64 };
static int walk(int code, unsigned w, const uint8_t *ix, size_t l, const uint8_t *vals, int vt,
                size_t c, size_t count, float *dst, int add) {
  uint64_t next = 0;   /* idx_{j-1} + 1 */
  size_t pos = 0;
  uint64_t acc = 0;
  unsigned nbits = 0;
  size_t buf[2][BATCH], prev_j0 = 0, prev_nb = 0;
  for (size_t j0 = 0, turn = 0; j0 < c; j0 += BATCH, turn ^= 1) {
    size_t nb = c - j0 < BATCH ? c - j0 : BATCH, *at = buf[turn];
    for (size_t b = 0; b < nb; b++) {
      size_t j = j0 + b;
      uint64_t gap = 0;
      if (code == CODE_VARINT) {
        for (unsigned sh = 0;; sh += 7) {
          GCOMP_FAIL_IF(pos >= l, GCOMP_ERR_CORRUPT, "topk: index stream ends inside entry %zu", j);
          GCOMP_FAIL_IF(sh == 28 && ix[pos] > 0x0f, GCOMP_ERR_CORRUPT,
                        "topk: index gap %zu does not fit 32 bits", j);
          uint8_t byte = ix[pos++];
          gap |= (uint64_t)(byte & 0x7f) << sh;
          if (!(byte & 0x80)) break;
        }
      } else if (w) {
        while (nbits < w) {
          GCOMP_FAIL_IF(pos >= l, GCOMP_ERR_CORRUPT, "topk: index stream ends inside entry %zu", j);
          acc |= (uint64_t)ix[pos++] << nbits;
          nbits += 8;
        }
        gap = acc & ((1ull << w) - 1);
        acc >>= w;
        nbits -= w;
      }
      uint64_t i = next + gap;
      GCOMP_FAIL_IF(i >= count, GCOMP_ERR_CORRUPT,
                    "topk: index %llu of entry %zu is out of range (%zu values)",
                    (unsigned long long)i, j, count);
      next = i + 1;
      at[b] = (size_t)i;
    }
    if (!dst) continue;
    for (size_t b = 0; b < nb; b++) __builtin_prefetch(&dst[at[b]], 1);
    apply(dst, buf[turn ^ 1], prev_nb, vals, prev_j0, vt, add);
    prev_j0 = j0;
    prev_nb = nb;
  }
  if (dst) apply(dst, buf[(((c + BATCH - 1) / BATCH) & 1) ^ 1], prev_nb, vals, prev_j0, vt, add);
  GCOMP_FAIL_IF(pos != l, GCOMP_ERR_CORRUPT, "topk: index stream has %zu bytes, %zu used", l, pos);
  return GCOMP_OK;
}

static int topk_decode(const gcomp_kind_cfg *cfg, uint32_t param, const uint8_t *restrict src,
                       size_t len, float *restrict dst, size_t count, int add,
                       gcomp_frame_check *chk) {
  const topk_cfg *tc = (const topk_cfg *)cfg->bytes;
  GCOMP_FAIL_IF(param != 0, GCOMP_ERR_CORRUPT, "topk: frame parameter 0x%x should be 0",
                (unsigned)param);
  GCOMP_FAIL_IF(len < HDR, GCOMP_ERR_CORRUPT, "topk: payload of %zu bytes is shorter than its header", len);
  int code = src[0], vt = src[1];
  unsigned w = src[2];
  uint64_t c = gcomp_load_le64(src + 4), l = gcomp_load_le64(src + 12);
  GCOMP_FAIL_IF(code > CODE_DENSE || src[3] != 0, GCOMP_ERR_CORRUPT, "topk: unknown index coding %d", code);
  GCOMP_FAIL_IF(vt != tc->values, GCOMP_ERR_CORRUPT, "topk: value type %d, the codec expects %d", vt,
                tc->values);
  GCOMP_FAIL_IF(c > count, GCOMP_ERR_CORRUPT, "topk: %llu entries for %zu values",
                (unsigned long long)c, count);
  size_t vb = vbytes(vt);
  GCOMP_FAIL_IF(l > len - HDR || len - HDR - l != c * vb, GCOMP_ERR_CORRUPT,
                "topk: payload of %zu bytes does not hold %llu entries and %llu index bytes", len,
                (unsigned long long)c, (unsigned long long)l);
  const uint8_t *vals = src + HDR + l;
  if (code == CODE_DENSE) {
    GCOMP_FAIL_IF(c != count || l != 0 || w != 0, GCOMP_ERR_CORRUPT,
                  "topk: dense payload with %llu of %zu values", (unsigned long long)c, count);
    for (size_t i = 0; i < count; i++) {
      float v = get_value(vals + i * vb, vt);
      dst[i] = add ? dst[i] + v : v;
    }
    return GCOMP_OK;
  }
  if (code == CODE_PACKED)
    GCOMP_FAIL_IF(w > 32 || l != (c * w + 7) / 8, GCOMP_ERR_CORRUPT,
                  "topk: %llu gaps of %u bits in %llu bytes", (unsigned long long)c, w,
                  (unsigned long long)l);
  else
    GCOMP_FAIL_IF(w != 0, GCOMP_ERR_CORRUPT, "topk: varint payload with a bit width");
  /* validate everything before touching dst */
  GCOMP_CHECK(walk(code, w, src + HDR, (size_t)l, vals, vt, (size_t)c, count, NULL, add));
  if (!add && count) memset(dst, 0, count * sizeof *dst);
  return walk(code, w, src + HDR, (size_t)l, vals, vt, (size_t)c, count, dst, add);
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
    .max_payload = topk_max_payload,
    .encode = topk_encode,
    .decode = topk_decode,
    .encode_ef = topk_encode_ef,
};
