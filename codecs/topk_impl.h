/* Internal to the top-k codec: what its three files share. topk.c is the codec (settings,
 * k per call, the encode driver with error feedback), topk_select.c chooses the entries,
 * topk_payload.c writes and reads them. The per-value helpers are inline: they run once
 * per kept value, in the encoder's and the decoder's loops. */
#ifndef GCOMP_TOPK_IMPL_H
#define GCOMP_TOPK_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "codec_impl.h"
#include "frame.h"
#include "half.h"
#include "topk.h"

enum { TOPK_V_FP32 = 0, TOPK_V_BF16 = 1, TOPK_V_FP16 = 2 };
/* TOPK_HDR: payload header bytes; TOPK_BLOCK: values the filter kernels take at a time */
enum { TOPK_HDR = 20, TOPK_BLOCK = 4096 };

typedef struct {
  double ratio;     /* > 0 unless the spec gave k= */
  uint64_t k;       /* > 0 when the spec gave k= */
  int exact;
  int values;       /* TOPK_V_* */
  uint64_t seed;
  uint8_t given_ratio, given_k;
  uint32_t warmup;  /* calls of a tensor over which k falls from dense to its value (0: none) */
} topk_cfg;

static inline unsigned topk_vbytes(int v) { return v == TOPK_V_FP32 ? 4 : 2; }

/* ---- values (codecs/half.h: fp16 saturates at +-65504, counted as an overflow, so with
 * error feedback the excess stays in the residual instead of turning into Inf) --------- */
static inline void topk_put_value(uint8_t *p, float x, int vt, gcomp_codec_stats *st) {
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

static inline float topk_get_value(const uint8_t *p, int vt) {
  if (vt == TOPK_V_FP32) return gcomp_u2f(gcomp_load_le32(p));
  uint16_t h = (uint16_t)(p[0] | p[1] << 8);
  return vt == TOPK_V_BF16 ? gcomp_bf16_to_f32(h) : gcomp_f16_to_f32(h);
}

/* What the receiver will see for x. */
static inline float topk_roundtrip_value(float x, int vt) {
  gcomp_codec_stats dummy = {0};
  uint8_t b[4];
  topk_put_value(b, x, vt, &dummy);
  return topk_get_value(b, vt);
}

/* The input of one encode: src alone, or grad + residual (error feedback). */
typedef struct {
  const float *src, *grad, *res;
} topk_input;

static inline float topk_input_at(const topk_input *in, size_t i) {
  return in->src ? in->src[i] : in->grad[i] + in->res[i];
}

/* ---- selection (topk_select.c) --------------------------------------------------------- */
typedef struct {
  const topk_cfg *cfg;
  const gcomp_topk_kernels *kt;
  topk_input in;
  float *res;          /* error feedback: the residual (NULL without) */
  int fused;           /* the residual was updated by the last pass (filter_ef) */
  size_t n, k;
  uint32_t *idx;       /* candidates, increasing indices */
  float *val;
  size_t c, cap;       /* cap: entries idx/val can take beyond one TOPK_BLOCK of slack */
  uint32_t *keys, *tmp; /* scratch for selections, cap + TOPK_BLOCK each */
} topk_sel;

/* Room for cap candidates (keeping those held). The caller frees s->idx (val shares its
 * allocation), s->keys and s->tmp. */
int gcomp_topk_sel_grow(topk_sel *s, size_t cap);

/* Chooses the candidates: on return s->idx/val hold the kept entries in index order.
 * hint (may be NULL): the tensor's last cut in, this call's out. */
int gcomp_topk_select(topk_sel *s, uint64_t seed, uint64_t *hint);

/* After a fused pass that must be redone: put the candidates' values back so the residual
 * holds x everywhere; later passes read x from it. */
void gcomp_topk_unfuse(topk_sel *s);

/* ---- payload (topk_payload.c) ---------------------------------------------------------- */
/* The payload of an empty tensor. */
int gcomp_topk_write_empty(const topk_cfg *cfg, uint8_t *dst, size_t cap, size_t *len);

/* Sizes the gap stream of c increasing indices: *code and *w for gcomp_topk_write_sparse,
 * *l its bytes. */
void gcomp_topk_plan_sparse(const uint32_t *idx, size_t c, int *code, unsigned *w, size_t *l);

/* The entries (idx, val)[0..c) as planned by gcomp_topk_plan_sparse. */
int gcomp_topk_write_sparse(const topk_cfg *cfg, gcomp_enc_ctx *ctx, const uint32_t *idx,
                            const float *val, size_t c, int code, unsigned w, size_t l,
                            uint8_t *dst, size_t cap, size_t *len);

/* All n values, no indices; with res, the residual keeps the rounding. */
int gcomp_topk_write_dense(const topk_cfg *cfg, gcomp_enc_ctx *ctx, const topk_input *in,
                           float *res, size_t n, uint8_t *dst, size_t cap, size_t *len);

/* The kind's decode (gcomp_kind.decode). */
int gcomp_topk_decode(const gcomp_kind_cfg *cfg, uint32_t param, const uint8_t *restrict src,
                      size_t len, float *restrict dst, size_t count, int add,
                      gcomp_frame_check *chk);

#endif /* GCOMP_TOPK_IMPL_H */
