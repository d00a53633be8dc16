/* Top-k's payload: the chosen entries written as (delta-coded index, value) pairs, and
 * read back. A payload is checked whole before the destination is touched.
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
#include <string.h>

#include "topk_impl.h"

enum { CODE_PACKED = 0, CODE_VARINT = 1, CODE_DENSE = 2 };
/* values written between reports to the frame's block checksums (gcomp_enc_progress):
 * the payload is written in order, so each block is summed while it is in cache */
enum { PROGRESS = 1 << 14 };

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

int gcomp_topk_write_empty(const topk_cfg *cfg, uint8_t *dst, size_t cap, size_t *len) {
  GCOMP_FAIL_IF(cap < TOPK_HDR, GCOMP_ERR_NOMEM, "topk: %zu bytes of room", cap);
  put_header(dst, CODE_PACKED, cfg->values, 0, 0, 0);
  *len = TOPK_HDR;
  return GCOMP_OK;
}

/* Both ways, and the smaller (bit-packing on a tie). */
void gcomp_topk_plan_sparse(const uint32_t *idx, size_t c, int *code, unsigned *w, size_t *l) {
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

int gcomp_topk_write_sparse(const topk_cfg *cfg, gcomp_enc_ctx *ctx, const uint32_t *idx,
                            const float *val, size_t c, int code, unsigned w, size_t l,
                            uint8_t *dst, size_t cap, size_t *len) {
  size_t vb = topk_vbytes(cfg->values), total = TOPK_HDR + l + c * vb;
  GCOMP_FAIL_IF(total > cap, GCOMP_ERR_NOMEM, "topk: %zu bytes of room, %zu needed", cap, total);
  put_header(dst, code, cfg->values, w, c, l);
  uint8_t *p = dst + TOPK_HDR;
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
      topk_put_value(p, val[j], cfg->values, ctx->stats);
      if ((j & (PROGRESS - 1)) == PROGRESS - 1) gcomp_enc_progress(ctx, (size_t)(p - dst) + vb);
    }
  }
  ctx->stats->nonfinite_inputs += nonfinite;
  *len = total;
  return GCOMP_OK;
}

/* k >= n, or a sparse payload would be larger. */
int gcomp_topk_write_dense(const topk_cfg *cfg, gcomp_enc_ctx *ctx, const topk_input *in,
                           float *res, size_t n, uint8_t *dst, size_t cap, size_t *len) {
  size_t vb = topk_vbytes(cfg->values), total = TOPK_HDR + n * vb;
  GCOMP_FAIL_IF(total > cap, GCOMP_ERR_NOMEM, "topk: %zu bytes of room, %zu needed", cap, total);
  put_header(dst, CODE_DENSE, cfg->values, 0, n, 0);
  uint8_t *p = dst + TOPK_HDR;
  for (size_t i = 0; i < n; i++, p += vb) {
    float x = topk_input_at(in, i);
    ctx->stats->nonfinite_inputs += (gcomp_f2u(x) & 0x7f800000u) == 0x7f800000u;
    topk_put_value(p, x, cfg->values, ctx->stats);
    if (res) {
      float r = x - topk_get_value(p, cfg->values);
      res[i] = isfinite(r) ? r : 0.0f;
    }
    if ((i & (PROGRESS - 1)) == PROGRESS - 1) gcomp_enc_progress(ctx, (size_t)(p - dst) + vb);
  }
  *len = total;
  return GCOMP_OK;
}

/* ---- decoding -------------------------------------------------------------------------- */
/* Applies entries [j0, j0 + nb) whose indices are in at[]. */
static void apply(float *dst, const size_t *at, size_t nb, const uint8_t *vals, size_t j0, int vt,
                  int add) {
  size_t vb = topk_vbytes(vt);
  for (size_t b = 0; b < nb; b++) {
    float v = topk_get_value(vals + (j0 + b) * vb, vt);
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

int gcomp_topk_decode(const gcomp_kind_cfg *cfg, uint32_t param, const uint8_t *restrict src,
                      size_t len, float *restrict dst, size_t count, int add,
                      gcomp_frame_check *chk) {
  const topk_cfg *tc = (const topk_cfg *)cfg->bytes;
  GCOMP_FAIL_IF(param != 0, GCOMP_ERR_CORRUPT, "topk: frame parameter 0x%x should be 0",
                (unsigned)param);
  GCOMP_FAIL_IF(len < TOPK_HDR, GCOMP_ERR_CORRUPT,
                "topk: payload of %zu bytes is shorter than its header", len);
  int code = src[0], vt = src[1];
  unsigned w = src[2];
  uint64_t c = gcomp_load_le64(src + 4), l = gcomp_load_le64(src + 12);
  GCOMP_FAIL_IF(code > CODE_DENSE || src[3] != 0, GCOMP_ERR_CORRUPT, "topk: unknown index coding %d", code);
  GCOMP_FAIL_IF(vt != tc->values, GCOMP_ERR_CORRUPT, "topk: value type %d, the codec expects %d", vt,
                tc->values);
  GCOMP_FAIL_IF(c > count, GCOMP_ERR_CORRUPT, "topk: %llu entries for %zu values",
                (unsigned long long)c, count);
  size_t vb = topk_vbytes(vt);
  GCOMP_FAIL_IF(l > len - TOPK_HDR || len - TOPK_HDR - l != c * vb, GCOMP_ERR_CORRUPT,
                "topk: payload of %zu bytes does not hold %llu entries and %llu index bytes", len,
                (unsigned long long)c, (unsigned long long)l);
  const uint8_t *vals = src + TOPK_HDR + l;
  if (code == CODE_DENSE) {
    GCOMP_FAIL_IF(c != count || l != 0 || w != 0, GCOMP_ERR_CORRUPT,
                  "topk: dense payload with %llu of %zu values", (unsigned long long)c, count);
    for (size_t i = 0; i < count; i++) {
      float v = topk_get_value(vals + i * vb, vt);
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
  GCOMP_CHECK(walk(code, w, src + TOPK_HDR, (size_t)l, vals, vt, (size_t)c, count, NULL, add));
  if (!add && count) memset(dst, 0, count * sizeof *dst);
  return walk(code, w, src + TOPK_HDR, (size_t)l, vals, vt, (size_t)c, count, dst, add);
}
