/* Internal: the low-bit kernels behind "quant" (quant.c) and "sign" (sign.c), one table per
 * ISA (lowbit_base.c, lowbit_avx2.c, lowbit_avx512.c), and the scalar rules every table
 * follows bit for bit (the SIMD kernels use these for their tails; the differential tests
 * hold them to it).
 *
 * Codes: value j of a bucket occupies bits [B j, B (j + 1)) of the bucket's code bytes,
 * least significant bit first (byte k holds values 8k/B ...): for B = 4 the low nibble is
 * the even value, for B = 1 bit i of byte k is value 8k + i. A run of n codes takes
 * ceil(B n / 8) bytes.
 *
 * quant, one bucket of finite values with minimum mn and maximum mx (both +0 rather than
 * -0), L = 2^B - 1: range = mx - mn; step = range / L and inv = L / range (fp32; range 0:
 * step 0, inv 0); t = (x - mn) * inv;
 *   nearest     c = min(L, round-half-even(t))  (t + 1.5 * 2^23 rounds it exactly: t < 2^22)
 *   stochastic  u = (uint32_t)(t * 2^23) (truncated); c = min(L, (u >> 23) + ((r >> 9) <
 *               (u & 0x7fffff))) with r = gcomp_cast_rand(key, index): up with probability
 *               frac(t) truncated to 23 bits, so the code's mean is t within 2^-23
 *   decoded     mn + (float)c * step  (two roundings, no fused multiply-add)
 * sign, one bucket: s = sum |x| / nnz over its nonzero values (the sum in the fixed order
 * of gcomp_lb_sum16: sixteen running sums by index mod 16, then a fixed tree); bit = x < 0;
 * zero = x == 0; decoded: 0 where zero, else -s where bit, else s.
 */
#ifndef GCOMP_LOWBIT_H
#define GCOMP_LOWBIT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "cast.h"
#include "codec_impl.h"
#include "half.h"

/* What a decoder does. GCOMP_LB_STREAM stores as GCOMP_LB_STORE does, the same bits, but a
 * kernel may use streaming stores, which do not read each line into the cache first: for an
 * output nobody reads soon (sdec_avx2, sdec_avx512 and qdec_avx512 do, where the output is
 * 16-byte aligned). The caller fences (gcomp_decode_tally) before anyone else reads it. */
enum { GCOMP_LB_STORE = 0, GCOMP_LB_ADD = 1, GCOMP_LB_SUB = 2, GCOMP_LB_STREAM = 3,
       GCOMP_LB_MODES = 4 };

/* For the SIMD tables: the first pass over a bucket reads it from memory, prefetched this
 * far ahead, once per 64 bytes (the hardware prefetchers alone leave the loads waiting, a
 * bucket at a time: on a Zen 5 the AVX2 encoders without it ran at
 * 0.46-0.50x memcpy, 61% of the time in minmax's loads; a prefetch past the end of the
 * array never faults). The later passes find the bucket in cache. */
enum { GCOMP_LB_PREFETCH_BYTES = 8192 };
#define GCOMP_LB_PREFETCH(p) _mm_prefetch((const char *)(p) + GCOMP_LB_PREFETCH_BYTES, _MM_HINT_T0)

typedef struct {
  const char *name;
  /* quant. minmax: the minimum and maximum of x[0..n) (n >= 1), each +0 rather than -0;
   * returns nonzero (and leaves them unspecified) when any value is NaN or Inf. */
  int (*minmax)(const float *x, size_t n, float *mn, float *mx);
  /* The codes of x[0..n), packed at codes (ceil(bits n / 8) bytes); x within the bucket's
   * grid [mn, mn + range] (outside it a code is still some code < 2^bits). */
  void (*qenc)(const float *x, size_t n, unsigned bits, float mn, float inv, uint8_t *codes);
  /* Stochastic: value j draws gcomp_cast_rand(key, i0 + j) (i0 + n never wraps). */
  void (*qenc_sr)(const float *x, size_t n, unsigned bits, float mn, float inv, uint64_t key,
                  uint32_t i0, uint8_t *codes);
  /* dst[j] = (or +=, -=: mode GCOMP_LB_*) mn + (float)c_j * step. */
  void (*qdec)(const uint8_t *codes, size_t n, unsigned bits, float mn, float step, float *dst,
               int mode);
  /* sign. sscan: *sum = sum |x| (fixed order), *nnz = nonzero values; nonzero return when
   * any value is NaN or Inf. */
  int (*sscan)(const float *x, size_t n, float *sum, size_t *nnz);
  /* The sign bits of x[0..n) (x < 0), and when zmask is not NULL its zero bits (x == 0),
   * ceil(n / 8) bytes each. */
  void (*senc)(const float *x, size_t n, uint8_t *bits, uint8_t *zmask);
  /* dst[j] = (or +=, -=) the decoded value; zmask NULL: no zeros. */
  void (*sdec)(const uint8_t *bits, const uint8_t *zmask, size_t n, float s, float *dst,
               int mode);
  /* Error feedback's first step: r[i] = r[i] + g[i]. */
  void (*addto)(float *restrict r, const float *restrict g, size_t n);
  /* ... with g given as a sum: r[i] = r[i] + (a[i] + b[i]), read in one pass (an encode in
   * parts of a node's two operands, codec.c). */
  void (*addto2)(float *restrict r, const float *restrict a, const float *restrict b,
                 size_t n);
  /* sign with error feedback, fused: addto(r, g, n) then sscan(r, ...) in one pass (g
   * NULL: r already holds x, sscan(r, ...)) ... */
  int (*sscan_ef)(float *restrict r, const float *restrict g, size_t n, float *sum,
                  size_t *nnz);
  /* ... and senc(r, ...) then sdec(..., s, r, GCOMP_LB_SUB) in one more (r: what was not
   * sent). */
  void (*senc_ef)(float *r, size_t n, float s, uint8_t *bits, uint8_t *zmask);
  /* bf16 residual stores (ef:dtype=bf16): x[i] = the exact widening of r16[i]
   * (gcomp_bf16_to_f32), and back, r16[i] = gcomp_bf16_rne_sat(x[i]). */
  void (*widen)(float *restrict x, const uint16_t *restrict r16, size_t n);
  void (*narrow)(uint16_t *restrict r16, const float *restrict x, size_t n);
} gcomp_lowbit_kernels;

extern const gcomp_lowbit_kernels gcomp_lowbit_base;
extern const gcomp_lowbit_kernels gcomp_lowbit_avx2;
extern const gcomp_lowbit_kernels gcomp_lowbit_avx512;

/* The table for gcomp_isa_level() (the fp32 adds outside quant and sign); the table of
 * family f's level (GCOMP_KF_QUANT_ENC ... GCOMP_KF_SIGN_DEC); every table this CPU runs,
 * base first (tests). */
const gcomp_lowbit_kernels *gcomp_lowbit_kernels_get(void);
const gcomp_lowbit_kernels *gcomp_lowbit_kernels_for(gcomp_kfamily f);
const gcomp_lowbit_kernels *const *gcomp_lowbit_tables(size_t *n);

/* ---- what quant.c and sign.c share (lowbit.c) --------------------------------------------
 * A bucket whose values cannot be coded (NaN or Inf among them, or a range fp32 cannot
 * step through) is sent as is: the marker word, then its values as little-endian fp32. */
enum { GCOMP_LB_RAW = 0xffffffffu };   /* a NaN no encoder writes as a step or a scale */
/* Writes the marker and x[0..n); returns the bytes written (4 + 4n). */
size_t gcomp_lb_raw_put(uint8_t *p, const float *x, size_t n);
/* dst[0..n) = (+=, -=) the n raw values at p. */
void gcomp_lb_raw_get(const uint8_t *p, size_t n, float *dst, int mode);
/* NaN and Inf among x[0..n). */
uint64_t gcomp_lb_nonfinite(const float *x, size_t n);
/* The bucket parameter shared by both kinds: a multiple of 32 in [32, 2^20]. */
int gcomp_lb_set_bucket(const char *kind, const char *value, uint64_t *bucket);
/* The encode loop of both kinds: bucket after bucket, each coded by fn at the next free
 * byte and reported for the frame's block checksums. Without error feedback fn gets the
 * bucket's values x (g and res NULL); with it, x NULL, the bucket's gradient g and its fp32
 * residual res, which fn turns into x = g + res (in res) and then into what was not sent
 * (grad NULL, so g NULL: res holds x already). fn returns the bytes it wrote, 0 when they
 * would pass end.
 * With error feedback the residual is res (fp32) or res16 (bf16, the other NULL): a bf16
 * bucket is widened into a bucket-sized fp32 buffer for fn, then rounded back
 * (gcomp_bf16_rne_sat), the same arithmetic as widening the whole residual around an fp32
 * encode; a failure after the first bucket leaves res16 partly updated, so the caller
 * gives room for the largest payload. */
typedef size_t (*gcomp_lb_bucket_fn)(void *arg, const float *x, const float *g, size_t n,
                                     uint64_t b, float *res, uint8_t *p, const uint8_t *end);
int gcomp_lb_encode(const char *kind, const gcomp_lowbit_kernels *K, gcomp_enc_ctx *ctx,
                    size_t bucket, const float *src, const float *grad, float *res,
                    uint16_t *res16, size_t count, uint8_t *dst, size_t cap, size_t *len,
                    gcomp_lb_bucket_fn fn, void *arg);
/* A decoder's raw bucket at payload offset o (the marker read): checks the length,
 * verifies, decodes, tallies its NaN and Inf (gcomp_dec_tally); *o moves past it. */
int gcomp_lb_decode_raw(const char *kind, const uint8_t *src, size_t len, size_t *o, size_t n,
                        size_t b0, float *dst, int mode, gcomp_frame_check *chk);
/* A kind's decode (gcomp_kind.decode) through its decode_part: every value, then no byte
 * left over. */
int gcomp_lb_decode_whole(const gcomp_kind *kind, const gcomp_kind_cfg *cfg, uint32_t param,
                          const uint8_t *src, size_t len, float *dst, size_t count, int add,
                          gcomp_frame_check *chk);

/* The stochastic-rounding key of bucket b of frame seq (quant:round=stochastic). */
static inline uint64_t gcomp_lb_key(uint64_t seed, uint64_t seq, uint64_t b) {
  return gcomp_cast_mix64(gcomp_cast_key(seed, seq, 0) ^ b);
}

/* ---- the scalar rules -------------------------------------------------------------------- */
static inline size_t gcomp_lb_bytes(size_t n, unsigned bits) { return (n * bits + 7) / 8; }

static inline uint32_t gcomp_lb_code(float x, float mn, float inv, uint32_t top) {
  float t = (x - mn) * inv;
  uint32_t c = gcomp_f2u(t + 0x1.8p23f) - 0x4b400000u;
  return c < top ? c : top;
}

static inline uint32_t gcomp_lb_code_sr(float x, float mn, float inv, uint32_t top, uint32_t r) {
  float t = (x - mn) * inv;
  uint32_t u = (uint32_t)(int32_t)(t * 0x1p23f);
  uint32_t c = (u >> 23) + ((r >> 9) < (u & 0x7fffffu));
  return c < top ? c : top;
}

/* A kernel mode from a kind's gcomp_dec_mode. */
static inline int gcomp_lb_mode(int dec) {
  return dec == GCOMP_DEC_ADD ? GCOMP_LB_ADD : dec == GCOMP_DEC_STREAM ? GCOMP_LB_STREAM
                                                                     : GCOMP_LB_STORE;
}

static inline float gcomp_lb_apply(float d, float v, int mode) {
  return mode == GCOMP_LB_ADD ? d + v : mode == GCOMP_LB_SUB ? d - v : v;
}

/* Packs codes c[0..n) (each < 2^bits), the first at bit 0 of out. */
static inline void gcomp_lb_pack(const uint32_t *c, size_t n, unsigned bits, uint8_t *out) {
  uint32_t acc = 0;
  unsigned nb = 0;
  size_t o = 0;
  for (size_t j = 0; j < n; j++) {
    acc |= c[j] << nb;
    nb += bits;
    while (nb >= 8) out[o++] = (uint8_t)acc, acc >>= 8, nb -= 8;
  }
  if (nb) out[o] = (uint8_t)acc;
}

/* Code j of a packed run. */
static inline uint32_t gcomp_lb_unpack(const uint8_t *codes, size_t j, unsigned bits) {
  size_t bit = j * bits, b = bit >> 3;
  unsigned sh = (unsigned)(bit & 7);
  uint32_t w = codes[b];
  if (sh + bits > 8) w |= (uint32_t)codes[b + 1] << 8;
  return (w >> sh) & ((1u << bits) - 1);
}

#if defined(__BMI2__)
#include <immintrin.h>
/* The SIMD kernels' packing of widths 3, 5, 6, 7: 32 codes, one a byte in q, to 4 * bits
 * bytes (PEXT gathers the low bits of eight bytes at a time). */
static inline void gcomp_lb_pack_pext(const uint64_t q[4], unsigned bits, uint8_t *out) {
  uint64_t keep = 0x0101010101010101ull * ((1u << bits) - 1);
  for (int k = 0; k < 4; k++) {
    uint64_t v = _pext_u64(q[k], keep);
    memcpy(out + k * bits, &v, bits);
  }
}
#endif

/* The sign kernels' sum: sixteen running sums (value i goes to acc[i % 16]), reduced
 * pairwise in a fixed tree; any SIMD width that keeps the lanes so gets the same bits. */
static inline float gcomp_lb_sum16(const float *acc) {
  float s8[8], s4[4];
  for (int j = 0; j < 8; j++) s8[j] = acc[j] + acc[j + 8];
  for (int j = 0; j < 4; j++) s4[j] = s8[j] + s8[j + 4];
  return (s4[0] + s4[2]) + (s4[1] + s4[3]);
}

/* pshufb masks and shifts that unpack the 8 codes of one B-byte group into eight 32-bit
 * lanes (the group's 8 bytes in both 128-bit halves; lanes 0-3 from the low half): lane j
 * takes bytes (B j) / 8 and the next when the code crosses into it, then shifts right by
 * (B j) % 8. Written out from that rule; test_lowbit.c checks them for every B. */
static const uint8_t gcomp_lb_shuf[9][32] = {
    {0},
#define Z 0x80
    {0, Z, Z, Z, 0, Z, Z, Z, 0, Z, Z, Z, 0, Z, Z, Z,
     0, Z, Z, Z, 0, Z, Z, Z, 0, Z, Z, Z, 0, Z, Z, Z},
    {0, Z, Z, Z, 0, Z, Z, Z, 0, Z, Z, Z, 0, Z, Z, Z,
     1, Z, Z, Z, 1, Z, Z, Z, 1, Z, Z, Z, 1, Z, Z, Z},
    {0, Z, Z, Z, 0, Z, Z, Z, 0, 1, Z, Z, 1, Z, Z, Z,
     1, Z, Z, Z, 1, 2, Z, Z, 2, Z, Z, Z, 2, Z, Z, Z},
    {0, Z, Z, Z, 0, Z, Z, Z, 1, Z, Z, Z, 1, Z, Z, Z,
     2, Z, Z, Z, 2, Z, Z, Z, 3, Z, Z, Z, 3, Z, Z, Z},
    {0, Z, Z, Z, 0, 1, Z, Z, 1, Z, Z, Z, 1, 2, Z, Z,
     2, 3, Z, Z, 3, Z, Z, Z, 3, 4, Z, Z, 4, Z, Z, Z},
    {0, Z, Z, Z, 0, 1, Z, Z, 1, 2, Z, Z, 2, Z, Z, Z,
     3, Z, Z, Z, 3, 4, Z, Z, 4, 5, Z, Z, 5, Z, Z, Z},
    {0, Z, Z, Z, 0, 1, Z, Z, 1, 2, Z, Z, 2, 3, Z, Z,
     3, 4, Z, Z, 4, 5, Z, Z, 5, 6, Z, Z, 6, Z, Z, Z},
    {0, Z, Z, Z, 1, Z, Z, Z, 2, Z, Z, Z, 3, Z, Z, Z,
     4, Z, Z, Z, 5, Z, Z, Z, 6, Z, Z, Z, 7, Z, Z, Z},
#undef Z
};
static inline unsigned gcomp_lb_shift(unsigned bits, unsigned lane) { return (bits * lane) & 7; }

#endif /* GCOMP_LOWBIT_H */
