/* Top-k selection: which entries a tensor sends. A magnitude threshold is estimated from
 * a sample of whole cache lines (or the tensor's last threshold is reused when a small
 * sample agrees with it), then one filtering pass keeps what reaches it. Too many
 * survivors are trimmed to exactly k by a radix selection among them; too few (the sample
 * misjudged) trigger a second pass with a lower threshold. exact=1 aims the threshold low
 * with a margin and always trims to exactly k, ties broken by lower index. Zeros are never
 * kept; NaN and Inf always are, even beyond k. With error feedback the first pass is fused
 * with the residual update (the kernels' filter_ef). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "topk_impl.h"

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

/* Fills keys with about `want` magnitude keys: whole 16-float lines, one picked at a
 * seeded random offset in each of evenly spaced windows (cheaper than scattered gathers).
 * Everything when want >= n. Returns the number of keys. */
static size_t sample_keys(const topk_input *in, size_t n, size_t want, uint64_t seed,
                          uint32_t *keys) {
  if (want >= n || n < 64) {
    for (size_t i = 0; i < n; i++) keys[i] = gcomp_f2u(topk_input_at(in, i)) & 0x7fffffffu;
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
/* idx and val share one allocation (one block for malloc to recycle between calls). */
int gcomp_topk_sel_grow(topk_sel *s, size_t cap) {
  uint32_t *idx = malloc((cap + TOPK_BLOCK) * (sizeof *idx + sizeof *s->val));
  GCOMP_FAIL_IF(!idx, GCOMP_ERR_NOMEM, "topk: %zu candidate slots", cap + TOPK_BLOCK);
  float *val = (float *)(void *)(idx + cap + TOPK_BLOCK);
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
    s->keys = malloc((s->cap + TOPK_BLOCK) * sizeof *s->keys);
    s->tmp = malloc((s->cap + TOPK_BLOCK) * sizeof *s->tmp);
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
  for (size_t i = 0; i < s->n; i += TOPK_BLOCK) {
    size_t nb = s->n - i < TOPK_BLOCK ? s->n - i : TOPK_BLOCK;
    if (s->c + nb > s->cap) {
      uint32_t cut;
      GCOMP_CHECK(trim(s, s->k, &cut));
      t = cut >= GCOMP_TOPK_KEY_INF ? GCOMP_TOPK_KEY_INF : cut + 1;
      if (s->c + nb > s->cap) GCOMP_CHECK(gcomp_topk_sel_grow(s, 2 * s->cap));
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

void gcomp_topk_unfuse(topk_sel *s) {
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

int gcomp_topk_select(topk_sel *s, uint64_t seed, uint64_t *hint) {
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
    gcomp_topk_unfuse(s);
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
