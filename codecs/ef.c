/* Error feedback: the residual store and the generic (unfused) encode around any kind. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "codec_impl.h"
#include "ef.h"
#include "spec.h"

typedef struct {
  uint64_t key;
  size_t count;
  float *residual;   /* NULL: empty slot */
} ef_slot;

struct gcomp_ef {
  int dtype;
  ef_slot *slots;    /* open addressing, power-of-two capacity */
  size_t cap, used;
};

int gcomp_ef_create(int dtype, gcomp_ef **out) {
  GCOMP_FAIL_IF(dtype != GCOMP_EF_FP32, GCOMP_ERR_UNSUPPORTED,
                "ef: dtype=bf16 residuals are not implemented yet (use dtype=fp32)");
  gcomp_ef *ef = calloc(1, sizeof *ef);
  GCOMP_FAIL_IF(!ef, GCOMP_ERR_NOMEM, "ef: allocating the residual store");
  ef->dtype = dtype;
  *out = ef;
  return GCOMP_OK;
}

void gcomp_ef_destroy(gcomp_ef *ef) {
  if (!ef) return;
  for (size_t i = 0; i < ef->cap; i++) free(ef->slots[i].residual);
  free(ef->slots);
  free(ef);
}

static size_t hash_key(uint64_t key) {
  key ^= key >> 33;
  key *= 0xff51afd7ed558ccdull;
  key ^= key >> 33;
  return (size_t)key;
}

static int grow(gcomp_ef *ef) {
  size_t cap = ef->cap ? ef->cap * 2 : 16;
  ef_slot *slots = calloc(cap, sizeof *slots);
  GCOMP_FAIL_IF(!slots, GCOMP_ERR_NOMEM, "ef: growing the residual table to %zu slots", cap);
  for (size_t i = 0; i < ef->cap; i++) {
    if (!ef->slots[i].residual) continue;
    size_t j = hash_key(ef->slots[i].key) & (cap - 1);
    while (slots[j].residual) j = (j + 1) & (cap - 1);
    slots[j] = ef->slots[i];
  }
  free(ef->slots);
  ef->slots = slots;
  ef->cap = cap;
  return GCOMP_OK;
}

int gcomp_ef_slot(gcomp_ef *ef, uint64_t key, size_t count, float **residual) {
  if (ef->cap) {
    for (size_t j = hash_key(key) & (ef->cap - 1); ef->slots[j].residual; j = (j + 1) & (ef->cap - 1)) {
      if (ef->slots[j].key != key) continue;
      GCOMP_FAIL_IF(ef->slots[j].count != count, GCOMP_ERR_INVALID,
                    "ef: tensor key %llu had %zu elements and now has %zu (keys must name one "
                    "tensor; reset residuals when shapes change)",
                    (unsigned long long)key, ef->slots[j].count, count);
      *residual = ef->slots[j].residual;
      return GCOMP_OK;
    }
  }
  if ((ef->used + 1) * 2 > ef->cap) GCOMP_CHECK(grow(ef));
  float *r = calloc(count ? count : 1, sizeof *r);
  GCOMP_FAIL_IF(!r, GCOMP_ERR_NOMEM, "ef: allocating %zu residuals for key %llu", count,
                (unsigned long long)key);
  size_t j = hash_key(key) & (ef->cap - 1);
  while (ef->slots[j].residual) j = (j + 1) & (ef->cap - 1);
  ef->slots[j] = (ef_slot){key, count, r};
  ef->used++;
  *residual = r;
  return GCOMP_OK;
}

int gcomp_ef_encode_generic(const gcomp_kind *kind, const gcomp_kind_cfg *cfg,
                            gcomp_enc_ctx *ctx, const float *restrict grad,
                            float *restrict residual, size_t count, uint8_t *restrict dst,
                            size_t cap, size_t *len) {
  if (count == 0) return kind->encode(cfg, ctx, grad, 0, dst, cap, len);
  float *x = malloc(count * sizeof *x);
  GCOMP_FAIL_IF(!x, GCOMP_ERR_NOMEM, "ef: temporary of %zu values", count);
  for (size_t i = 0; i < count; i++) x[i] = grad[i] + residual[i];
  const float *xs = x;
  int s = kind->encode(cfg, ctx, xs, count, dst, cap, len);
  if (s == GCOMP_OK) {
    /* residual = x - decode(encode(x)): decode-and-add into -x gives -(residual) */
    for (size_t i = 0; i < count; i++) residual[i] = -x[i];
    s = kind->decode(cfg, ctx->param, dst, *len, residual, count, 1);
    /* a non-finite value is sent as it is and leaves no residual: one NaN must not
     * poison every later step of that element */
    for (size_t i = 0; i < count; i++) {
      float r = -residual[i];
      residual[i] = isfinite(r) ? r : 0.0f;
    }
  }
  free(x);
  if (s < 0) return gcomp_error_trace(s, __FILE__, __LINE__);
  return GCOMP_OK;
}
