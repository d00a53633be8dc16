/* AVX2 low-bit kernels (quant and sign): eight values a vector, codes packed 32 at a time
 * (1, 2, 4 and 8 bits by byte packing and multiply-add merges, other widths by PEXT) and
 * unpacked 8 at a time (one B-byte group broadcast, a byte shuffle and a variable shift,
 * any width). Same results as lowbit_base.c bit for bit (rules in lowbit.h); what does not
 * fill a vector goes through the base kernels. */
#include <immintrin.h>

#include "lowbit.h"
#include "rand_simd.h"

#define SET1(v) _mm256_set1_epi32((int)(v))
#define B_ gcomp_lowbit_base
#define PREFETCH GCOMP_LB_PREFETCH

/* ---- quant ----------------------------------------------------------------------------- */
static int minmax_avx2(const float *x, size_t n, float *mn, float *mx) {
  if (n < 8) return B_.minmax(x, n, mn, mx);
  const __m256i expo = SET1(0x7f800000);
  __m256 lo = _mm256_loadu_ps(x), hi = lo, lo1 = lo, hi1 = lo;   /* two chains: 16 a step */
  __m256i bad = _mm256_setzero_si256();
#define MINMAX8(v, l, h)                                                                     \
  bad = _mm256_or_si256(bad, _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_castps_si256(v), expo), \
                                                expo));                                       \
  l = _mm256_min_ps(l, v), h = _mm256_max_ps(h, v)
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    PREFETCH(x + i);
    __m256 v0 = _mm256_loadu_ps(x + i), v1 = _mm256_loadu_ps(x + i + 8);
    MINMAX8(v0, lo, hi);
    MINMAX8(v1, lo1, hi1);
  }
  for (; i + 8 <= n; i += 8) {
    __m256 v = _mm256_loadu_ps(x + i);
    MINMAX8(v, lo, hi);
  }
#undef MINMAX8
  lo = _mm256_min_ps(lo, lo1), hi = _mm256_max_ps(hi, hi1);   /* +-0 alike: both end as +0 */
  float l[8], h[8], tl, th;
  _mm256_storeu_ps(l, lo);
  _mm256_storeu_ps(h, hi);
  int b = !_mm256_testz_si256(bad, bad);
  if (i < n) {
    b |= B_.minmax(x + i, n - i, &tl, &th);
    l[0] = tl < l[0] ? tl : l[0];
    h[0] = th > h[0] ? th : h[0];
  }
  for (int j = 1; j < 8; j++) l[0] = l[j] < l[0] ? l[j] : l[0], h[0] = h[j] > h[0] ? h[j] : h[0];
  *mn = l[0] + 0.0f;
  *mx = h[0] + 0.0f;
  return b;
}

static inline __m256i code8(const float *p, __m256 mn, __m256 inv, __m256i top) {
  __m256 t = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(p), mn), inv);
  __m256i c = _mm256_sub_epi32(_mm256_castps_si256(_mm256_add_ps(t, _mm256_set1_ps(0x1.8p23f))),
                               SET1(0x4b400000));
  return _mm256_min_epu32(c, top);
}

static inline __m256i code8_sr(const float *p, __m256 mn, __m256 inv, __m256i top, __m256i r) {
  __m256 t = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(p), mn), inv);
  __m256i u = _mm256_cvttps_epi32(_mm256_mul_ps(t, _mm256_set1_ps(0x1p23f)));
  __m256i up = _mm256_cmpgt_epi32(_mm256_and_si256(u, SET1(0x7fffff)), _mm256_srli_epi32(r, 9));
  return _mm256_min_epu32(_mm256_sub_epi32(_mm256_srli_epi32(u, 23), up), top);
}

/* 32 codes (each < 2^bits, four vectors of 8 in order) -> 4 * bits bytes at out */
static inline void pack32(__m256i c0, __m256i c1, __m256i c2, __m256i c3, unsigned bits,
                          uint8_t *out) {
  if (bits == 1) {   /* codes are 0 or 1: their low bit to the sign, then movemask */
#define LOWBITS(c) (uint32_t)_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_slli_epi32(c, 31)))
    uint32_t m = LOWBITS(c0) | LOWBITS(c1) << 8 | LOWBITS(c2) << 16 | LOWBITS(c3) << 24;
#undef LOWBITS
    memcpy(out, &m, 4);
    return;
  }
  /* the 32 codes as bytes, in order */
  __m256i b = _mm256_packus_epi16(_mm256_packus_epi32(c0, c1), _mm256_packus_epi32(c2, c3));
  b = _mm256_permutevar8x32_epi32(b, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
  if (bits == 8) {
    _mm256_storeu_si256((__m256i *)out, b);
    return;
  }
  if (bits == 4 || bits == 2) {
    __m256i w = _mm256_maddubs_epi16(b, _mm256_set1_epi16(bits == 4 ? 0x1001 : 0x0401));
    if (bits == 2)   /* pairs of 4-bit pairs: byte = w[2k] + 16 w[2k+1] */
      w = _mm256_madd_epi16(w, _mm256_set1_epi32(0x00100001));
    /* the low byte of each 16-bit (4 bits) or 32-bit (2 bits) lane, in order */
    __m256i sel = bits == 4 ? _mm256_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, -1, -1, -1, -1, -1, -1,
                                               -1, -1, 0, 2, 4, 6, 8, 10, 12, 14, -1, -1, -1, -1,
                                               -1, -1, -1, -1)
                            : _mm256_setr_epi8(0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1,
                                               -1, -1, -1, 0, 4, 8, 12, -1, -1, -1, -1, -1, -1,
                                               -1, -1, -1, -1, -1, -1);
    w = _mm256_shuffle_epi8(w, sel);
    if (bits == 4) {
      _mm_storel_epi64((__m128i *)out, _mm256_castsi256_si128(w));
      _mm_storel_epi64((__m128i *)(out + 8), _mm256_extracti128_si256(w, 1));
    } else {
      uint32_t lo = (uint32_t)_mm256_cvtsi256_si32(w);
      uint32_t hi = (uint32_t)_mm_cvtsi128_si32(_mm256_extracti128_si256(w, 1));
      memcpy(out, &lo, 4);
      memcpy(out + 4, &hi, 4);
    }
    return;
  }
  /* 3, 5, 6, 7 bits: the low bits of each byte, gathered eight bytes at a time */
  uint64_t q[4];
  _mm256_storeu_si256((__m256i *)q, b);
  gcomp_lb_pack_pext(q, bits, out);
}

static void qenc_avx2(const float *x, size_t n, unsigned bits, float mn, float inv,
                      uint8_t *codes) {
  const __m256 m = _mm256_set1_ps(mn), iv = _mm256_set1_ps(inv);
  const __m256i top = SET1((1u << bits) - 1);
  size_t i = 0;
  for (; i + 32 <= n; i += 32)
    pack32(code8(x + i, m, iv, top), code8(x + i + 8, m, iv, top),
           code8(x + i + 16, m, iv, top), code8(x + i + 24, m, iv, top), bits,
           codes + i / 8 * bits);
  B_.qenc(x + i, n - i, bits, mn, inv, codes + i / 8 * bits);
}

static void qenc_sr_avx2(const float *x, size_t n, unsigned bits, float mn, float inv,
                         uint64_t key, uint32_t i0, uint8_t *codes) {
  const __m256 m = _mm256_set1_ps(mn), iv = _mm256_set1_ps(inv);
  const __m256i top = SET1((1u << bits) - 1);
  const __m256i klo = SET1((uint32_t)key), khi = SET1((uint32_t)(key >> 32)), step = SET1(8);
  __m256i idx = _mm256_add_epi32(SET1(i0), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    __m256i c[4];
    for (int j = 0; j < 4; j++) {
      c[j] = code8_sr(x + i + 8 * j, m, iv, top, gcomp_rand8(idx, klo, khi));
      idx = _mm256_add_epi32(idx, step);
    }
    pack32(c[0], c[1], c[2], c[3], bits, codes + i / 8 * bits);
  }
  B_.qenc_sr(x + i, n - i, bits, mn, inv, key, i0 + (uint32_t)i, codes + i / 8 * bits);
}

static inline __m256 apply8(float *d, __m256 v, int mode) {
  if (mode == GCOMP_LB_ADD) return _mm256_add_ps(_mm256_loadu_ps(d), v);
  if (mode == GCOMP_LB_SUB) return _mm256_sub_ps(_mm256_loadu_ps(d), v);
  return v;
}

/* GCOMP_LB_STREAM's stores (sdec only): the width of the streaming stores dst allows, 32 or
 * 16 bytes (every 8 values keep the alignment, so it is checked once a call); 0: plain
 * stores. qdec keeps plain stores: with streaming ones its decode took about 2.4 times as
 * long in the pipelined call, whose result is read again soon after. */
static inline int stream_width(const float *dst, int mode) {
  uintptr_t a = (uintptr_t)dst;
  return mode != GCOMP_LB_STREAM || (a & 15) ? 0 : (a & 31) ? 16 : 32;
}

/* Codes j..j+8 of the group at g (8 bytes readable there) as fp32 */
static inline __m256 qdec8(const uint8_t *g, __m256i shuf, __m256i sh, __m256i mask, __m256 m,
                           __m256 st) {
  long long w;
  memcpy(&w, g, 8);
  __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi64x(w), shuf);
  v = _mm256_and_si256(_mm256_srlv_epi32(v, sh), mask);
  return _mm256_add_ps(m, _mm256_mul_ps(_mm256_cvtepi32_ps(v), st));
}

static void qdec_avx2(const uint8_t *codes, size_t n, unsigned bits, float mn, float step,
                      float *dst, int mode) {
  const __m256 m = _mm256_set1_ps(mn), st = _mm256_set1_ps(step);
  const __m256i shuf = _mm256_loadu_si256((const __m256i *)gcomp_lb_shuf[bits]);
  __m256i sh = _mm256_setr_epi32(0, (int)gcomp_lb_shift(bits, 1), (int)gcomp_lb_shift(bits, 2),
                                 (int)gcomp_lb_shift(bits, 3), (int)gcomp_lb_shift(bits, 4),
                                 (int)gcomp_lb_shift(bits, 5), (int)gcomp_lb_shift(bits, 6),
                                 (int)gcomp_lb_shift(bits, 7));
  const __m256i mask = SET1((1u << bits) - 1);
  size_t total = gcomp_lb_bytes(n, bits), j = 0, ng = n / 8;
  /* a group of 8 codes is `bits` bytes; each load takes 8: the groups whose load stays
   * inside the codes read them in place ... */
  size_t safe = total >= 8 ? (total - 8) / bits + 1 : 0;
  safe = safe < ng ? safe : ng;
  for (; j < safe * 8; j += 8)
    _mm256_storeu_ps(dst + j, apply8(dst + j, qdec8(codes + j / 8 * bits, shuf, sh, mask, m, st),
                                     mode));
  /* ... and the last few (up to 8 / bits of them) from a zero-padded copy: left to the
   * scalar kernel they took more time than the rest of a 1- or 2-bit bucket of 512 */
  if (j < ng * 8) {
    uint8_t pad[2 * 8 + 8] = {0};
    size_t at = j / 8 * bits;
    memcpy(pad, codes + at, total - at);
    for (; j < ng * 8; j += 8)
      _mm256_storeu_ps(dst + j, apply8(dst + j, qdec8(pad + (j / 8 * bits - at), shuf, sh, mask,
                                                      m, st), mode));
  }
  B_.qdec(codes + j / 8 * bits, n - j, bits, mn, step, dst + j, mode);
}

/* ---- sign ------------------------------------------------------------------------------ */
/* The scan of x, or with g (error feedback) of x = x + g, stored: one body, inlined into
 * both, g NULL or not at compile time. */
static inline __attribute__((always_inline)) int scan_avx2(float *x, const float *g, size_t n,
                                                           float *sum, size_t *nnz) {
  const __m256i abs = SET1(0x7fffffff);
  __m256 a0 = _mm256_setzero_ps(), a1 = a0;   /* running sums of lanes 0-7 and 8-15 */
  __m256i bad = _mm256_setzero_si256();
  size_t zeros = 0, i = 0;
  for (; i + 16 <= n; i += 16) {
    PREFETCH(x + i);
    __m256 x0 = _mm256_loadu_ps(x + i), x1 = _mm256_loadu_ps(x + i + 8);
    if (g) {
      PREFETCH(g + i);
      x0 = _mm256_add_ps(x0, _mm256_loadu_ps(g + i));
      x1 = _mm256_add_ps(x1, _mm256_loadu_ps(g + i + 8));
      _mm256_storeu_ps(x + i, x0);
      _mm256_storeu_ps(x + i + 8, x1);
    }
    __m256i v0 = _mm256_and_si256(_mm256_castps_si256(x0), abs);
    __m256i v1 = _mm256_and_si256(_mm256_castps_si256(x1), abs);
    bad = _mm256_or_si256(bad, _mm256_or_si256(_mm256_cmpgt_epi32(v0, SET1(0x7f7fffff)),
                                               _mm256_cmpgt_epi32(v1, SET1(0x7f7fffff))));
    __m256i z0 = _mm256_cmpeq_epi32(v0, _mm256_setzero_si256());
    __m256i z1 = _mm256_cmpeq_epi32(v1, _mm256_setzero_si256());
    zeros += (size_t)__builtin_popcount((unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(z0)) |
                                        (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(z1)) << 8);
    a0 = _mm256_add_ps(a0, _mm256_castsi256_ps(v0));
    a1 = _mm256_add_ps(a1, _mm256_castsi256_ps(v1));
  }
  float acc[16];
  _mm256_storeu_ps(acc, a0);
  _mm256_storeu_ps(acc + 8, a1);
  int b = !_mm256_testz_si256(bad, bad);
  for (; i < n; i++) {   /* value i into lane i % 16, as the base kernel does */
    if (g) x[i] += g[i];
    uint32_t a = gcomp_f2u(x[i]) & 0x7fffffffu;
    b |= a >= 0x7f800000u;
    zeros += a == 0;
    acc[i % 16] += gcomp_u2f(a);
  }
  *sum = gcomp_lb_sum16(acc);
  *nnz = n - zeros;
  return b;
}

static int sscan_avx2(const float *x, size_t n, float *sum, size_t *nnz) {
  return scan_avx2((float *)x, NULL, n, sum, nnz);   /* read only: g is NULL */
}

static void senc_avx2(const float *x, size_t n, uint8_t *bits, uint8_t *zmask) {
  const __m256 zero = _mm256_setzero_ps();
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 v = _mm256_loadu_ps(x + i);
    bits[i / 8] = (uint8_t)_mm256_movemask_ps(_mm256_cmp_ps(v, zero, _CMP_LT_OQ));
    if (zmask) zmask[i / 8] = (uint8_t)_mm256_movemask_ps(_mm256_cmp_ps(v, zero, _CMP_EQ_OQ));
  }
  B_.senc(x + i, n - i, bits + i / 8, zmask ? zmask + i / 8 : NULL);
}

/* the eight bits of byte b as eight all-ones / all-zeros lanes */
static inline __m256i lanes_of(uint8_t b) {
  const __m256i bit = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
  return _mm256_cmpeq_epi32(_mm256_and_si256(SET1(b), bit), bit);
}

/* Values j..j+7: +-s by their sign bits, +0 where zmask (may be NULL) says zero. */
static inline __m256i sdec8(__m256i sv, __m256i sign, const uint8_t *bits, const uint8_t *zmask,
                            size_t j) {
  __m256i v = _mm256_xor_si256(sv, _mm256_and_si256(lanes_of(bits[j / 8]), sign));
  return zmask ? _mm256_andnot_si256(lanes_of(zmask[j / 8]), v) : v;
}

static void sdec_avx2(const uint8_t *bits, const uint8_t *zmask, size_t n, float s, float *dst,
                      int mode) {
  const __m256i sv = _mm256_castps_si256(_mm256_set1_ps(s)), sign = SET1(0x80000000u);
  size_t j = 0;
  const int w = stream_width(dst, mode);
  if (w == 32)
    for (; j + 8 <= n; j += 8)
      _mm256_stream_si256((__m256i *)(void *)(dst + j), sdec8(sv, sign, bits, zmask, j));
  if (w == 16)
    for (; j + 8 <= n; j += 8) {
      __m256i v = sdec8(sv, sign, bits, zmask, j);
      _mm_stream_si128((__m128i *)(void *)(dst + j), _mm256_castsi256_si128(v));
      _mm_stream_si128((__m128i *)(void *)(dst + j + 4), _mm256_extracti128_si256(v, 1));
    }
  for (; j + 8 <= n; j += 8)
    _mm256_storeu_ps(dst + j, apply8(dst + j, _mm256_castsi256_ps(sdec8(sv, sign, bits, zmask, j)),
                                     mode));
  B_.sdec(bits + j / 8, zmask ? zmask + j / 8 : NULL, n - j, s, dst + j, mode);
}

static void addto_avx2(float *restrict r, const float *restrict g, size_t n) {
  size_t i = 0;
#define ADDTO8(j) _mm256_storeu_ps(r + (j), _mm256_add_ps(_mm256_loadu_ps(r + (j)),         \
                                                          _mm256_loadu_ps(g + (j))))
  for (; i + 16 <= n; i += 16) {
    PREFETCH(r + i);
    PREFETCH(g + i);
    ADDTO8(i);
    ADDTO8(i + 8);
  }
  for (; i + 8 <= n; i += 8) ADDTO8(i);
#undef ADDTO8
  B_.addto(r + i, g + i, n - i);
}

static void addto2_avx2(float *restrict r, const float *restrict a, const float *restrict b,
                        size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    if (i % 16 == 0) PREFETCH(r + i), PREFETCH(a + i), PREFETCH(b + i);
    __m256 s = _mm256_add_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i));
    _mm256_storeu_ps(r + i, _mm256_add_ps(_mm256_loadu_ps(r + i), s));
  }
  B_.addto2(r + i, a + i, b + i, n - i);
}

/* ---- error feedback, fused (lowbit.h) ---------------------------------------------------- */
static int sscan_ef_avx2(float *restrict r, const float *restrict g, size_t n, float *sum,
                         size_t *nnz) {
  return scan_avx2(r, g, n, sum, nnz);
}

/* senc and sdec(GCOMP_LB_SUB) in one pass: bits of r, then r minus the decoded value */
static void senc_ef_avx2(float *r, size_t n, float s, uint8_t *bits, uint8_t *zmask) {
  const __m256 zero = _mm256_setzero_ps(), sv = _mm256_set1_ps(s);
  const __m256 sign = _mm256_castsi256_ps(SET1(0x80000000u));
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 v = _mm256_loadu_ps(r + i);
    __m256 neg = _mm256_cmp_ps(v, zero, _CMP_LT_OQ);
    bits[i / 8] = (uint8_t)_mm256_movemask_ps(neg);
    __m256 d = _mm256_xor_ps(sv, _mm256_and_ps(neg, sign));
    if (zmask) {
      __m256 z = _mm256_cmp_ps(v, zero, _CMP_EQ_OQ);
      zmask[i / 8] = (uint8_t)_mm256_movemask_ps(z);
      d = _mm256_andnot_ps(z, d);   /* +0 where zero */
    }
    _mm256_storeu_ps(r + i, _mm256_sub_ps(v, d));
  }
  B_.senc_ef(r + i, n - i, s, bits + i / 8, zmask ? zmask + i / 8 : NULL);
}

static void widen_avx2(float *restrict x, const uint16_t *restrict r16, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    if (!(i & 31)) PREFETCH(r16 + i);   /* once per 64 bytes */
    __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(r16 + i)));
    _mm256_storeu_si256((__m256i *)(x + i), _mm256_slli_epi32(v, 16));
  }
  B_.widen(x + i, r16 + i, n - i);
}

/* gcomp_bf16_rne_sat of eight values, in 32-bit lanes */
static inline __m256i bf16_sat8(__m256i w) {
  __m256i a = _mm256_and_si256(w, SET1(0x7fffffff));
  __m256i r = _mm256_srli_epi32(
      _mm256_add_epi32(w, _mm256_add_epi32(SET1(0x7fff), _mm256_and_si256(_mm256_srli_epi32(w, 16),
                                                                          SET1(1)))),
      16);
  /* rounded up to Inf from a finite value: one less, the largest finite */
  __m256i inf = _mm256_cmpeq_epi32(_mm256_and_si256(r, SET1(0x7fff)), SET1(0x7f80));
  __m256i fin = _mm256_cmpgt_epi32(SET1(0x7f800000), a);
  r = _mm256_add_epi32(r, _mm256_and_si256(inf, fin));   /* -1 where both */
  return _mm256_andnot_si256(_mm256_cmpgt_epi32(a, SET1(0x7f800000)), r);   /* NaN: 0 */
}

static void narrow_avx2(uint16_t *restrict r16, const float *restrict x, size_t n) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m256i lo = bf16_sat8(_mm256_loadu_si256((const __m256i *)(x + i)));
    __m256i hi = bf16_sat8(_mm256_loadu_si256((const __m256i *)(x + i + 8)));
    __m256i p = _mm256_permute4x64_epi64(_mm256_packus_epi32(lo, hi), 0xd8);
    _mm256_storeu_si256((__m256i *)(r16 + i), p);
  }
  B_.narrow(r16 + i, x + i, n - i);
}

const gcomp_lowbit_kernels gcomp_lowbit_avx2 = {
    .name = "avx2",
    .minmax = minmax_avx2,
    .qenc = qenc_avx2,
    .qenc_sr = qenc_sr_avx2,
    .qdec = qdec_avx2,
    .sscan = sscan_avx2,
    .senc = senc_avx2,
    .sdec = sdec_avx2,
    .addto = addto_avx2,
    .addto2 = addto2_avx2,
    .sscan_ef = sscan_ef_avx2,
    .senc_ef = senc_ef_avx2,
    .widen = widen_avx2,
    .narrow = narrow_avx2,
};
