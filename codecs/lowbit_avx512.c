/* AVX-512 (F, BW, VL) low-bit kernels: sixteen values a vector; codes become bytes with
 * vpmovdb and merge with multiply-adds (1, 2, 4 bits) or PEXT (3, 5, 6, 7); two B-byte
 * groups unpack per vector with the byte shuffle of lowbit_avx2.c on each half; sign bits
 * and zero bits are mask registers. Same results as lowbit_base.c bit for bit (rules in
 * lowbit.h); what does not fill a vector goes through the base kernels. */
#include <immintrin.h>

#include "lowbit.h"
#include "nt_store.h"
#include "rand_simd.h"

#define SET1(v) _mm512_set1_epi32((int)(v))
#define B_ gcomp_lowbit_base

#define PREFETCH GCOMP_LB_PREFETCH

/* ---- quant ----------------------------------------------------------------------------- */
static int minmax_avx512(const float *x, size_t n, float *mn, float *mx) {
  if (n < 16) return B_.minmax(x, n, mn, mx);
  __m512 lo = _mm512_loadu_ps(x), hi = lo;
  __mmask16 bad = 0;
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    PREFETCH(x + i);
    __m512 v = _mm512_loadu_ps(x + i);
    __m512i e = _mm512_and_si512(_mm512_castps_si512(v), SET1(0x7f800000));
    bad |= _mm512_cmpeq_epi32_mask(e, SET1(0x7f800000));
    lo = _mm512_min_ps(lo, v);
    hi = _mm512_max_ps(hi, v);
  }
  float l = _mm512_reduce_min_ps(lo), h = _mm512_reduce_max_ps(hi), tl, th;
  int b = bad != 0;
  if (i < n) {
    b |= B_.minmax(x + i, n - i, &tl, &th);
    l = tl < l ? tl : l;
    h = th > h ? th : h;
  }
  *mn = l + 0.0f;
  *mx = h + 0.0f;
  return b;
}

static inline __m512i code16(const float *p, __m512 mn, __m512 inv, __m512i top) {
  __m512 t = _mm512_mul_ps(_mm512_sub_ps(_mm512_loadu_ps(p), mn), inv);
  __m512i c = _mm512_sub_epi32(_mm512_castps_si512(_mm512_add_ps(t, _mm512_set1_ps(0x1.8p23f))),
                               SET1(0x4b400000));
  return _mm512_min_epu32(c, top);
}

static inline __m512i code16_sr(const float *p, __m512 mn, __m512 inv, __m512i top, __m512i r) {
  __m512 t = _mm512_mul_ps(_mm512_sub_ps(_mm512_loadu_ps(p), mn), inv);
  __m512i u = _mm512_cvttps_epi32(_mm512_mul_ps(t, _mm512_set1_ps(0x1p23f)));
  __mmask16 up = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, SET1(0x7fffff)),
                                         _mm512_srli_epi32(r, 9));
  __m512i fl = _mm512_srli_epi32(u, 23);
  return _mm512_min_epu32(_mm512_mask_add_epi32(fl, up, fl, SET1(1)), top);
}

/* 32 codes (two vectors of 16, in order, each < 2^bits) -> 4 * bits bytes at out */
static inline void pack32(__m512i c0, __m512i c1, unsigned bits, uint8_t *out) {
  if (bits == 1) {
    uint32_t m = (uint32_t)_mm512_test_epi32_mask(c0, c0) |
                 (uint32_t)_mm512_test_epi32_mask(c1, c1) << 16;
    memcpy(out, &m, 4);
    return;
  }
  __m256i b = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm512_cvtepi32_epi8(c0)),
                                      _mm512_cvtepi32_epi8(c1), 1);
  if (bits == 8) {
    _mm256_storeu_si256((__m256i *)out, b);
    return;
  }
  if (bits == 4 || bits == 2) {
    __m256i w = _mm256_maddubs_epi16(b, _mm256_set1_epi16(bits == 4 ? 0x1001 : 0x0401));
    if (bits == 4) {
      _mm_storeu_si128((__m128i *)out, _mm256_cvtepi16_epi8(w));
    } else {
      w = _mm256_madd_epi16(w, _mm256_set1_epi32(0x00100001));
      uint64_t v;
      _mm_storel_epi64((__m128i *)&v, _mm256_cvtepi32_epi8(w));
      memcpy(out, &v, 8);
    }
    return;
  }
  uint64_t q[4];
  _mm256_storeu_si256((__m256i *)q, b);
  gcomp_lb_pack_pext(q, bits, out);
}

static void qenc_avx512(const float *x, size_t n, unsigned bits, float mn, float inv,
                        uint8_t *codes) {
  const __m512 m = _mm512_set1_ps(mn), iv = _mm512_set1_ps(inv);
  const __m512i top = SET1((1u << bits) - 1);
  size_t i = 0;
  for (; i + 32 <= n; i += 32)
    pack32(code16(x + i, m, iv, top), code16(x + i + 16, m, iv, top), bits,
           codes + i / 8 * bits);
  B_.qenc(x + i, n - i, bits, mn, inv, codes + i / 8 * bits);
}

static void qenc_sr_avx512(const float *x, size_t n, unsigned bits, float mn, float inv,
                           uint64_t key, uint32_t i0, uint8_t *codes) {
  const __m512 m = _mm512_set1_ps(mn), iv = _mm512_set1_ps(inv);
  const __m512i top = SET1((1u << bits) - 1);
  const __m512i klo = SET1((uint32_t)key), khi = SET1((uint32_t)(key >> 32)), step = SET1(16);
  __m512i idx = _mm512_add_epi32(SET1(i0), _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10,
                                                             11, 12, 13, 14, 15));
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    __m512i c0 = code16_sr(x + i, m, iv, top, gcomp_rand16(idx, klo, khi));
    idx = _mm512_add_epi32(idx, step);
    __m512i c1 = code16_sr(x + i + 16, m, iv, top, gcomp_rand16(idx, klo, khi));
    idx = _mm512_add_epi32(idx, step);
    pack32(c0, c1, bits, codes + i / 8 * bits);
  }
  B_.qenc_sr(x + i, n - i, bits, mn, inv, key, i0 + (uint32_t)i, codes + i / 8 * bits);
}

static inline __m512 apply16(float *d, __m512 v, int mode) {
  if (mode == GCOMP_LB_ADD) return _mm512_add_ps(_mm512_loadu_ps(d), v);
  if (mode == GCOMP_LB_SUB) return _mm512_sub_ps(_mm512_loadu_ps(d), v);
  return v;
}

/* A decoder's output, 16 values at a time from dst on. In GCOMP_LB_STREAM whole 64-byte
 * lines are streamed (nt_store.h; at 16- or 32-byte alignment each line joins two vectors,
 * and the partial lines at either end get masked plain stores), so a decode of a result
 * nobody reads soon does not first read every line it writes; the other modes store
 * apply16's value. */
typedef struct {
  float *dst;
  int mode, sm;      /* GCOMP_LB_*; the store (gcomp_store_mode) */
  gcomp_nt_run run;  /* sm NT16/NT32: set by the first vector */
} out16;

static inline out16 out16_open(float *dst, int mode, size_t nvec) {
  return (out16){dst, mode, gcomp_store_mode((uint8_t *)dst, mode == GCOMP_LB_STREAM && nvec),
                 {NULL, _mm512_setzero_si512(), 16}};
}
/* vector j (values [j, j + 16)), in order */
static inline void out16_put(out16 *o, size_t j, __m512 y) {
  if (o->sm == GCOMP_ST_PLAIN) _mm512_storeu_ps(o->dst + j, apply16(o->dst + j, y, o->mode));
  else if (o->sm == GCOMP_ST_NT64) _mm512_stream_ps(o->dst + j, y);
  else if (j) gcomp_nt_run_next(&o->run, _mm512_castps_si512(y));
  else gcomp_nt_run_first(&o->run, (uint8_t *)o->dst, _mm512_castps_si512(y));
}
static inline void out16_close(out16 *o) {
  if (o->sm == GCOMP_ST_NT16 || o->sm == GCOMP_ST_NT32) gcomp_nt_run_end(&o->run);
}

/* Codes j..j+16 as fp32 from the two groups at g0 and g1 */
static inline __m512 qdec16(__m128i g0, __m128i g1, __m512i shuf, __m512i sh, __m512i mask,
                            __m512 m, __m512 st) {
  __m512i w = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_broadcastq_epi64(g0)),
                                 _mm256_broadcastq_epi64(g1), 1);
  __m512i v = _mm512_and_si512(_mm512_srlv_epi32(_mm512_shuffle_epi8(w, shuf), sh), mask);
  return _mm512_add_ps(m, _mm512_mul_ps(_mm512_cvtepi32_ps(v), st));
}

/* 8 bytes at p of which `have` exist (masked-off bytes are not read: no fault past the end) */
static inline __m128i load8(const uint8_t *p, size_t have) {
  if (have >= 8) return _mm_loadl_epi64((const __m128i *)(const void *)p);
  return _mm_maskz_loadu_epi8((__mmask16)((1u << have) - 1), p);
}

/* One bit: a code is a mask bit, sixteen from two bytes (no byte shuffle, no tail of
 * over-long loads); the two values are the rule's mn + (float)c * step for c = 0 and 1,
 * rounded by the same two operations. The shuffle path ran at 0.8x the add loop at 1 bit
 * on a Zen 5 (64 MiB), half the rate of its own 2-bit decode. */
static void qdec1_avx512(const uint8_t *codes, size_t n, float mn, float step, float *dst,
                         int mode) {
  const __m512 m = _mm512_set1_ps(mn), st = _mm512_set1_ps(step);
  const __m512 v0 = _mm512_add_ps(m, _mm512_mul_ps(_mm512_setzero_ps(), st));
  const __m512 v1 = _mm512_add_ps(m, _mm512_mul_ps(_mm512_set1_ps(1.0f), st));
  size_t j = 0, nv = n / 16;
  out16 out = out16_open(dst, mode, nv);
  for (; j < nv * 16; j += 16) {
    uint16_t b;
    memcpy(&b, codes + j / 8, 2);
    out16_put(&out, j, _mm512_mask_blend_ps((__mmask16)b, v0, v1));
  }
  out16_close(&out);
  B_.qdec(codes + j / 8, n - j, 1, mn, step, dst + j, mode);
}

/* Streams (out16) as sdec_avx512 does: on a Xeon (AVX-512) a 64 MiB 4-bit call
 * took 9% less CPU a rank; lowbit_avx2.c's qdec keeps plain stores, measured slower
 * streamed on a Zen 3. */
static void qdec_avx512(const uint8_t *codes, size_t n, unsigned bits, float mn, float step,
                        float *dst, int mode) {
  if (bits == 1) {
    qdec1_avx512(codes, n, mn, step, dst, mode);
    return;
  }
  const __m512 m = _mm512_set1_ps(mn), st = _mm512_set1_ps(step);
  const __m512i shuf = _mm512_broadcast_i64x4(
      _mm256_loadu_si256((const __m256i *)gcomp_lb_shuf[bits]));
  int s[8];
  for (unsigned l = 0; l < 8; l++) s[l] = (int)gcomp_lb_shift(bits, l);
  const __m512i sh = _mm512_setr_epi32(s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7], s[0],
                                       s[1], s[2], s[3], s[4], s[5], s[6], s[7]);
  const __m512i mask = SET1((1u << bits) - 1);
  size_t total = gcomp_lb_bytes(n, bits), j = 0, nv = n / 16;
  /* the vectors: two groups of 8 codes each, bytes [at, at + 2 bits); the ones whose two
   * 8-byte loads stay inside the codes read them plainly ... */
  size_t safe = total >= 8 ? ((total - 8) / bits + 1) / 2 : 0;
  safe = safe < nv ? safe : nv;
  out16 out = out16_open(dst, mode, nv);
  for (; j < safe * 16; j += 16) {
    const uint8_t *g = codes + j / 8 * bits;
    out16_put(&out, j, qdec16(_mm_loadl_epi64((const __m128i *)(const void *)g),
                              _mm_loadl_epi64((const __m128i *)(const void *)(g + bits)), shuf,
                              sh, mask, m, st));
  }
  /* ... and the last few (up to 4 / bits of them) with masked loads: left to the scalar
   * kernel they took more time than the rest of a 2-bit bucket of 512 */
  for (; j < nv * 16; j += 16) {
    size_t at = j / 8 * bits;
    out16_put(&out, j, qdec16(load8(codes + at, total - at), load8(codes + at + bits,
                                                                   total - at - bits),
                              shuf, sh, mask, m, st));
  }
  out16_close(&out);
  B_.qdec(codes + j / 8 * bits, n - j, bits, mn, step, dst + j, mode);
}

/* ---- sign ------------------------------------------------------------------------------ */
/* The scan of x, or with g (error feedback) of x = x + g, stored: one body, inlined into
 * both, g NULL or not at compile time. */
static inline __attribute__((always_inline)) int scan_avx512(float *x, const float *g, size_t n,
                                                             float *sum, size_t *nnz) {
  __m512 acc = _mm512_setzero_ps();   /* lane l: the running sum of values l mod 16 */
  __mmask16 bad = 0;
  size_t zeros = 0, i = 0;
  for (; i + 16 <= n; i += 16) {
    PREFETCH(x + i);
    __m512 y = _mm512_loadu_ps(x + i);
    if (g) {
      PREFETCH(g + i);
      y = _mm512_add_ps(y, _mm512_loadu_ps(g + i));
      _mm512_storeu_ps(x + i, y);
    }
    __m512i v = _mm512_and_si512(_mm512_castps_si512(y), SET1(0x7fffffff));
    bad |= _mm512_cmpgt_epu32_mask(v, SET1(0x7f7fffff));
    zeros += (size_t)__builtin_popcount(_mm512_testn_epi32_mask(v, v));
    acc = _mm512_add_ps(acc, _mm512_castsi512_ps(v));
  }
  float a[16];
  _mm512_storeu_ps(a, acc);
  int b = bad != 0;
  for (; i < n; i++) {
    if (g) x[i] += g[i];
    uint32_t u = gcomp_f2u(x[i]) & 0x7fffffffu;
    b |= u >= 0x7f800000u;
    zeros += u == 0;
    a[i % 16] += gcomp_u2f(u);
  }
  *sum = gcomp_lb_sum16(a);
  *nnz = n - zeros;
  return b;
}

static int sscan_avx512(const float *x, size_t n, float *sum, size_t *nnz) {
  return scan_avx512((float *)x, NULL, n, sum, nnz);   /* read only: g is NULL */
}

static void senc_avx512(const float *x, size_t n, uint8_t *bits, uint8_t *zmask) {
  const __m512 zero = _mm512_setzero_ps();
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m512 v = _mm512_loadu_ps(x + i);
    uint16_t b = _mm512_cmp_ps_mask(v, zero, _CMP_LT_OQ);
    memcpy(bits + i / 8, &b, 2);
    if (zmask) {
      uint16_t z = _mm512_cmp_ps_mask(v, zero, _CMP_EQ_OQ);
      memcpy(zmask + i / 8, &z, 2);
    }
  }
  B_.senc(x + i, n - i, bits + i / 8, zmask ? zmask + i / 8 : NULL);
}

static inline __m512 sdec16(__m512 pos, __m512 neg, const uint8_t *bits, const uint8_t *zmask,
                            size_t j) {
  uint16_t b, z = 0;
  memcpy(&b, bits + j / 8, 2);
  if (zmask) memcpy(&z, zmask + j / 8, 2);
  return _mm512_maskz_mov_ps((__mmask16)~z, _mm512_mask_blend_ps(b, pos, neg));
}

/* Streams in GCOMP_LB_STREAM (out16). The other modes keep a loop of their own: out16's
 * test of the store per vector made this small loop's decode-and-add 10-20% slower. */
static void sdec_avx512(const uint8_t *bits, const uint8_t *zmask, size_t n, float s,
                        float *dst, int mode) {
  const __m512 pos = _mm512_set1_ps(s), neg = _mm512_set1_ps(-s);
  size_t j = 0;
  out16 out = out16_open(dst, mode, n / 16);
  if (out.sm == GCOMP_ST_PLAIN)
    for (; j + 16 <= n; j += 16)
      _mm512_storeu_ps(dst + j, apply16(dst + j, sdec16(pos, neg, bits, zmask, j), mode));
  else
    for (; j + 16 <= n; j += 16) out16_put(&out, j, sdec16(pos, neg, bits, zmask, j));
  out16_close(&out);
  B_.sdec(bits + j / 8, zmask ? zmask + j / 8 : NULL, n - j, s, dst + j, mode);
}

static void addto_avx512(float *restrict r, const float *restrict g, size_t n) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    PREFETCH(r + i);
    PREFETCH(g + i);
    _mm512_storeu_ps(r + i, _mm512_add_ps(_mm512_loadu_ps(r + i), _mm512_loadu_ps(g + i)));
  }
  B_.addto(r + i, g + i, n - i);
}

static void addto2_avx512(float *restrict r, const float *restrict a, const float *restrict b,
                          size_t n) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    PREFETCH(r + i), PREFETCH(a + i), PREFETCH(b + i);
    __m512 s = _mm512_add_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i));
    _mm512_storeu_ps(r + i, _mm512_add_ps(_mm512_loadu_ps(r + i), s));
  }
  B_.addto2(r + i, a + i, b + i, n - i);
}

/* ---- error feedback, fused (lowbit.h) ---------------------------------------------------- */
static int sscan_ef_avx512(float *restrict r, const float *restrict g, size_t n, float *sum,
                           size_t *nnz) {
  return scan_avx512(r, g, n, sum, nnz);
}

/* senc and sdec(GCOMP_LB_SUB) in one pass: bits of r, then r minus the decoded value */
static void senc_ef_avx512(float *r, size_t n, float s, uint8_t *bits, uint8_t *zmask) {
  const __m512 zero = _mm512_setzero_ps(), pos = _mm512_set1_ps(s), neg = _mm512_set1_ps(-s);
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m512 v = _mm512_loadu_ps(r + i);
    __mmask16 b = _mm512_cmp_ps_mask(v, zero, _CMP_LT_OQ), z = 0;
    uint16_t bw = b;
    memcpy(bits + i / 8, &bw, 2);
    if (zmask) {
      z = _mm512_cmp_ps_mask(v, zero, _CMP_EQ_OQ);
      uint16_t zw = z;
      memcpy(zmask + i / 8, &zw, 2);
    }
    __m512 d = _mm512_maskz_mov_ps((__mmask16)~z, _mm512_mask_blend_ps(b, pos, neg));
    _mm512_storeu_ps(r + i, _mm512_sub_ps(v, d));
  }
  B_.senc_ef(r + i, n - i, s, bits + i / 8, zmask ? zmask + i / 8 : NULL);
}

static void widen_avx512(float *restrict x, const uint16_t *restrict r16, size_t n) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    PREFETCH(r16 + i);
    __m512i v = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(r16 + i)));
    _mm512_storeu_si512(x + i, _mm512_slli_epi32(v, 16));
  }
  B_.widen(x + i, r16 + i, n - i);
}

/* gcomp_bf16_rne_sat of sixteen values */
static void narrow_avx512(uint16_t *restrict r16, const float *restrict x, size_t n) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m512i w = _mm512_loadu_si512(x + i), a = _mm512_and_si512(w, SET1(0x7fffffff));
    __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(w, 16), SET1(1));
    __m512i r = _mm512_srli_epi32(_mm512_add_epi32(w, _mm512_add_epi32(SET1(0x7fff), lsb)), 16);
    /* rounded up to Inf from a finite value: the largest finite; NaN: 0 */
    __mmask16 up = _mm512_mask_cmpeq_epi32_mask(_mm512_cmplt_epu32_mask(a, SET1(0x7f800000)),
                                                _mm512_and_si512(r, SET1(0x7fff)), SET1(0x7f80));
    r = _mm512_mask_sub_epi32(r, up, r, SET1(1));
    r = _mm512_maskz_mov_epi32(_mm512_cmple_epu32_mask(a, SET1(0x7f800000)), r);
    _mm256_storeu_si256((__m256i *)(r16 + i), _mm512_cvtepi32_epi16(r));
  }
  B_.narrow(r16 + i, x + i, n - i);
}

const gcomp_lowbit_kernels gcomp_lowbit_avx512 = {
    .name = "avx512",
    .minmax = minmax_avx512,
    .qenc = qenc_avx512,
    .qenc_sr = qenc_sr_avx512,
    .qdec = qdec_avx512,
    .sscan = sscan_avx512,
    .senc = senc_avx512,
    .sdec = sdec_avx512,
    .addto = addto_avx512,
    .addto2 = addto2_avx512,
    .sscan_ef = sscan_ef_avx512,
    .senc_ef = senc_ef_avx512,
    .widen = widen_avx512,
    .narrow = narrow_avx512,
};
