/* Internal: the fp16/bf16 cast kernels, one table per ISA (cast_base.c, cast_avx2.c).
 *
 * Wire payload of the kinds fp16 (id 2) and bf16 (id 3) (docs/wire-format.md defers here):
 * `count` little-endian 16-bit words, exactly 2 * count bytes (anything else is
 * GCOMP_ERR_CORRUPT). fp16: IEEE binary16 of x * 2^k; the frame's parameter word holds k
 * in its low byte as a two's-complement int8 in [-127, 127], the other bits zero (else
 * GCOMP_ERR_CORRUPT); decoding multiplies by 2^-k. k is 0 with scale=none; with
 * scale=auto see codecs/cast.c. bf16: the bfloat16 of x; parameter word 0.
 *
 * Payloads are little-endian 16-bit words at any alignment. Every kernel takes any n
 * (including 0) and any pointer alignment. The rules, identical in every table (the
 * differential and exhaustive tests hold them to it bit for bit):
 *
 *   fp16 encode, round to nearest even: IEEE binary32 -> binary16 conversion of x * scale
 *     (scale a power of two, so the product is exact), as F16C's vcvtps2ph with
 *     _MM_FROUND_TO_NEAREST_INT does it: finite values >= 65520 in magnitude become Inf;
 *     NaN keeps its sign and the top 10 payload bits and is made quiet (bit 9 set).
 *   bf16 encode, round to nearest even: the top 16 bits of x rounded to nearest even
 *     (fp32 subnormals included, no flush); NaN keeps its sign and the top 7 payload bits
 *     and is made quiet (bit 6 set), so it never rounds to Inf.
 *   stochastic (both formats): |x| rounds up to the next representable magnitude with
 *     probability (dropped part)/(quantum), decided by 32 random bits per element from
 *     gcomp_cast_rand(key, index). bf16 drops 16 bits: exact. fp16 drops 13 bits for
 *     results in the normal range and 14..32 bits for subnormal results (exact); for
 *     |x * scale| < 2^-32 the probability is truncated to 32 bits (bias < 2^-32 of the
 *     quantum 2^-24). Rounding up past the largest finite value gives Inf (counted).
 *   decode: exact widening (fp16 NaN is quieted as F16C's vcvtph2ps does; bf16 NaN bits
 *     are kept as they are), then multiplied by inv_scale (fp16; exact unless the result
 *     is an fp32 subnormal). decode_add: acc[i] = acc[i] + decode(x[i]): two roundings at
 *     most, the same as decoding into a temporary and adding it. When acc[i] and the
 *     decoded value are both NaN the result is a NaN whose payload and sign may be either
 *     one's (the one exception to bit for bit: compilers order the operands of a
 *     commutative add as they like, and x86 returns the first NaN operand).
 *
 * Counters (added to *c): nonfinite = NaN/Inf inputs; overflow = finite inputs that
 * became Inf; underflow = nonzero inputs that became +-0.
 */
#ifndef GCOMP_CAST_H
#define GCOMP_CAST_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "codec_impl.h"

typedef struct {
  uint64_t nonfinite;
  uint64_t overflow;
  uint64_t underflow;
} gcomp_cast_counts;

typedef struct {
  const char *name;   /* "base", "avx2", "avx2-vpclmul", ... */
  /* Largest finite |src[i]| as fp32 bits (0 when none); NaN and Inf are ignored. */
  uint32_t (*maxabs)(const float *src, size_t n);
  /* Returns the largest finite |src[i]| as fp32 bits, found on the way (as maxabs). */
  uint32_t (*f16_enc)(const float *src, size_t n, uint8_t *dst, float scale,
                      gcomp_cast_counts *c);
  /* i0: element index of src[0] within the frame (low 32 bits; the caller folds the high
   * bits into the key and never lets i0 + n wrap past 2^32). */
  void (*f16_enc_sr)(const float *src, size_t n, uint8_t *dst, float scale, uint64_t key,
                     uint32_t i0, gcomp_cast_counts *c);
  void (*f16_dec)(const uint8_t *src, size_t n, float *dst, float inv_scale);
  void (*f16_dec_add)(const uint8_t *src, size_t n, float *acc, float inv_scale);
  void (*bf16_enc)(const float *src, size_t n, uint8_t *dst, gcomp_cast_counts *c);
  void (*bf16_enc_sr)(const float *src, size_t n, uint8_t *dst, uint64_t key, uint32_t i0,
                      gcomp_cast_counts *c);
  void (*bf16_dec)(const uint8_t *src, size_t n, float *dst);
  /* As f16_dec and bf16_dec, with non-temporal stores when stream is set rather than when
   * n is large: a caller that decodes a large frame a block at a time decides for it. */
  void (*f16_dec_nt)(const uint8_t *src, size_t n, float *dst, float inv_scale, int stream);
  void (*bf16_dec_nt)(const uint8_t *src, size_t n, float *dst, int stream);
  /* One frame block: as f16_enc (the maximum in *mx) and bf16_enc for n values, n a
   * positive multiple of 32, returning the standard CRC-32C of the 2n bytes written. The
   * SIMD tables fold it from registers as they store (codecs/crc_fold.h), with streaming
   * stores when stream is set; the portable one writes, then sums with ISA-L. */
  uint32_t (*f16_enc_sum)(const float *src, size_t n, uint8_t *dst, float scale,
                          gcomp_cast_counts *c, uint32_t *mx, int stream);
  uint32_t (*bf16_enc_sum)(const float *src, size_t n, uint8_t *dst, gcomp_cast_counts *c,
                           int stream);
  void (*bf16_dec_add)(const uint8_t *src, size_t n, float *acc);
  /* One frame block added (as f16_dec_add and bf16_dec_add, n a positive multiple of 32)
   * while the next block, the 2n bytes at next, is checksummed: returns their standard
   * CRC-32C. The caller compares it before it adds that block, so a decode-and-add reads
   * the frame once, in the same stream as the accumulator, rather than a block's CRC pass
   * and then its add. The avx512 tables with VPCLMULQDQ fold the CRC from registers as
   * they add (codecs/crc_fold.h); the others add, then sum the next block with ISA-L (the
   * work of verifying it before its add, as a decoder without this entry does). */
  uint32_t (*f16_dec_add_sum)(const uint8_t *src, size_t n, float *acc, float inv_scale,
                              const uint8_t *next);
  uint32_t (*bf16_dec_add_sum)(const uint8_t *src, size_t n, float *acc, const uint8_t *next);
} gcomp_cast_kernels;

extern const gcomp_cast_kernels gcomp_cast_base;
extern const gcomp_cast_kernels gcomp_cast_avx2;   /* only when the CPU has AVX2+F16C+FMA */
extern const gcomp_cast_kernels gcomp_cast_avx2_vpclmul;   /* and VPCLMULQDQ (on ymm) */
extern const gcomp_cast_kernels gcomp_cast_avx512;   /* AVX-512 F/BW/VL and VPCLMULQDQ */
extern const gcomp_cast_kernels gcomp_cast_avx512_xmmsum;   /* AVX-512 F/BW/VL without it */
extern const gcomp_cast_kernels gcomp_cast_avx512bf16;   /* gcomp_cast_avx512 + AVX512_BF16 */
/* Its bf16 encoders (cast_bf16_avx512.c, built with -mavx512bf16). */
void gcomp_cast_bf16_enc_avx512bf16(const float *src, size_t n, uint8_t *dst,
                                    gcomp_cast_counts *c);
uint32_t gcomp_cast_bf16_enc_sum_avx512bf16(const float *src, size_t n, uint8_t *dst,
                                            gcomp_cast_counts *c, int stream);
/* The AVX2 table's block-summing encoders (folded on xmm), which the second one borrows. */
uint32_t gcomp_cast_f16_enc_sum_avx2(const float *src, size_t n, uint8_t *dst, float scale,
                                     gcomp_cast_counts *c, uint32_t *mx, int stream);
uint32_t gcomp_cast_bf16_enc_sum_avx2(const float *src, size_t n, uint8_t *dst,
                                      gcomp_cast_counts *c, int stream);
/* And its block-summing decode-and-add kernels (folded on xmm), borrowed the same way. */
uint32_t gcomp_cast_f16_dec_add_sum_avx2(const uint8_t *src, size_t n, float *acc,
                                         float inv_scale, const uint8_t *next);
uint32_t gcomp_cast_bf16_dec_add_sum_avx2(const uint8_t *src, size_t n, float *acc,
                                          const uint8_t *next);

/* For the SIMD tables: decode-and-add of the values past the last whole vector, and the
 * entries f16_dec_add_<isa> and bf16_dec_add_<isa> made of the file's generic
 * dec_add(src, n, acc, f16, inv_scale) (f16 a constant: one loop each). */
static inline void gcomp_cast_dec_add_tail(const uint8_t *src, size_t n, float *acc, int f16,
                                           float inv_scale) {
  if (f16) gcomp_cast_base.f16_dec_add(src, n, acc, inv_scale);
  else gcomp_cast_base.bf16_dec_add(src, n, acc);
}
#define GCOMP_CAST_DEC_ADD_ENTRIES(isa)                                                   \
  static void f16_dec_add_##isa(const uint8_t *src, size_t n, float *acc, float inv_scale) { \
    dec_add(src, n, acc, 1, inv_scale);                                                   \
  }                                                                                       \
  static void bf16_dec_add_##isa(const uint8_t *src, size_t n, float *acc) {              \
    dec_add(src, n, acc, 0, 1.0f);                                                        \
  }

/* gcomp_cast_avx2_vpclmul's block kernels (cast_vpclmul_avx2.c, built with -mvpclmulqdq). */
uint32_t gcomp_cast_f16_enc_sum_avx2v(const float *src, size_t n, uint8_t *dst, float scale,
                                      gcomp_cast_counts *c, uint32_t *mx, int stream);
uint32_t gcomp_cast_bf16_enc_sum_avx2v(const float *src, size_t n, uint8_t *dst,
                                       gcomp_cast_counts *c, int stream);
uint32_t gcomp_cast_f16_dec_add_sum_avx2v(const uint8_t *src, size_t n, float *acc,
                                          float inv_scale, const uint8_t *next);
uint32_t gcomp_cast_bf16_dec_add_sum_avx2v(const uint8_t *src, size_t n, float *acc,
                                           const uint8_t *next);

/* The table for GCOMP_KF_CAST's level (and the CPU's VPCLMULQDQ and AVX512_BF16). */
const gcomp_cast_kernels *gcomp_cast_kernels_get(void);
/* Every table this CPU can run, the portable one first; *n receives their number (for
 * tests and benchmarks, which compare each with the first). */
const gcomp_cast_kernels *const *gcomp_cast_tables(size_t *n);

/* fp16 scale=auto, round to nearest (codecs/cast.c; the benchmark times it per table):
 * encodes src with a power-of-two scale 2^k such that M * 2^k is in [2^12, 2^15), M the
 * largest finite |src[i]| (exactly [2^14, 2^15) for frames of at most
 * GCOMP_CAST_AUTO_PREFIX elements), and returns k. ctx (NULL: none): the encode of a frame,
 * told of the output block by block. */
int gcomp_cast_f16_auto(const gcomp_cast_kernels *K, const float *src, size_t n, uint8_t *dst,
                        gcomp_cast_counts *c, gcomp_enc_ctx *ctx);
enum { GCOMP_CAST_AUTO_PREFIX = 16384, GCOMP_CAST_AUTO_HEADROOM = 2 };

/* Outputs at least this many bytes are written with non-temporal stores by the SIMD
 * kernels (they will not be read back from cache anyway). */
enum { GCOMP_CAST_STREAM_BYTES = 8u << 20 };
/* The AVX-512 block encoders prefetch their input this many bytes ahead: on a Xeon the
 * hardware prefetchers alone leave the loads waiting (15-20% of the block encode); a
 * prefetch past the end of the input is harmless (it never faults). */
enum { GCOMP_CAST_PREFETCH_BYTES = 8192 };
/* The AVX2 block encoders prefetch their input this many bytes ahead: on a Zen 3 the
 * hardware prefetchers alone leave the loads waiting. */
enum { GCOMP_CAST_PREFETCH_AVX2_BYTES = 4096 };
/* The ymm decode-and-add that folds the next block prefetches the accumulator this far
 * ahead, the block and the next block half as far (the same values ahead): on a Zen 3 that
 * took the bf16 decode-and-add of 64 MiB from 1.04-1.16x torch's add_ to 1.16-1.31x. */
enum { GCOMP_CAST_DEC_PREFETCH_AVX2_BYTES = 4096 };
/* The zmm decode-and-add that checksums the next block meanwhile prefetches the
 * accumulator and the next block this far ahead. On an AMD Zen 5, 64 MiB against torch's
 * add_: no software prefetch 0.96x, 8 KiB 1.06-1.09x, 4 KiB
 * 1.09-1.16x (bf16), the hardware prefetchers alone leaving the three streams waiting. */
enum { GCOMP_CAST_DEC_PREFETCH_BYTES = 4096 };

/* The fp16 encoder's thresholds for scale = 2^k, as fp32 bits of |x|: |x| >= *hi overflows
 * to Inf, 0 < |x| <= *lo underflows to 0 (the SIMD kernels count with them). */
static inline void gcomp_cast_f16_thresholds(float scale, uint32_t *hi, uint32_t *lo) {
  uint32_t sb;
  memcpy(&sb, &scale, 4);
  int k = (int)((sb >> 23) & 0xff) - 127;   /* scale is a normal power of two */
  /* 65520 = 4095 * 2^4: hi = 4095 * 2^(4 - k), whose exponent is 15 - k */
  int e = 4 - k + 11;
  *hi = e > 127 ? 0x7f800000u : (uint32_t)(e + 127) << 23 | 0x7ff000u;
  int le = -25 - k;                          /* lo = 2^-25 * 2^-k, 0 below fp32's range */
  *lo = le >= -126 ? (uint32_t)(le + 127) << 23 : le >= -149 ? 1u << (le + 149) : 0;
}

/* The stochastic-rounding generator: 32 bits for element i under a 64-bit key. Two
 * rounds of a 32-bit integer hash (lowbias32); the SIMD kernels compute the same. */
static inline uint32_t gcomp_cast_hash32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  return x;
}
static inline uint32_t gcomp_cast_rand(uint64_t key, uint32_t i) {
  return gcomp_cast_hash32(gcomp_cast_hash32(i + (uint32_t)key) ^ (uint32_t)(key >> 32));
}

/* The key of a frame's elements [hi * 2^32, (hi + 1) * 2^32): from (seed, seq, hi),
 * chained through splitmix64 so that no two small triples collide. */
static inline uint64_t gcomp_cast_mix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
static inline uint64_t gcomp_cast_key(uint64_t seed, uint64_t seq, uint32_t hi) {
  return gcomp_cast_mix64(gcomp_cast_mix64(gcomp_cast_mix64(seed) ^ seq) ^ hi);
}

/* For the SIMD tables: whether an output of out_bytes is written with streaming stores;
 * the elements of elem bytes to hand to the base kernel first so that p + elem * i is
 * aligned to align (all n when it never is); counters added up. */
static inline int gcomp_cast_streaming(size_t out_bytes) {
  return out_bytes >= GCOMP_CAST_STREAM_BYTES;
}
static inline size_t gcomp_cast_head_for(const void *p, size_t elem, size_t align, size_t n) {
  uintptr_t mis = (uintptr_t)p & (align - 1);
  if (mis % elem) return n;
  size_t h = mis ? (align - mis) / elem : 0;
  return h < n ? h : n;
}
static inline void gcomp_cast_add_counts(gcomp_cast_counts *c, const gcomp_cast_counts *k) {
  c->nonfinite += k->nonfinite, c->overflow += k->overflow, c->underflow += k->underflow;
}

#endif /* GCOMP_CAST_H */
