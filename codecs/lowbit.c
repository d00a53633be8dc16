/* The low-bit kernels' dispatch, and what the quant and sign kinds share: raw buckets and
 * the bucket parameter. */
#include <stdio.h>
#include <stdlib.h>

#include "codec_impl.h"
#include "frame.h"
#include "lowbit.h"

static const gcomp_lowbit_kernels *table_at(gcomp_isa l) {
  return l >= GCOMP_ISA_AVX512 ? &gcomp_lowbit_avx512
         : l >= GCOMP_ISA_AVX2 ? &gcomp_lowbit_avx2
                               : &gcomp_lowbit_base;
}

const gcomp_lowbit_kernels *gcomp_lowbit_kernels_get(void) {
  return table_at(gcomp_isa_level());
}

const gcomp_lowbit_kernels *gcomp_lowbit_kernels_for(gcomp_kfamily f) {
  return table_at(gcomp_kernel_level(f));
}

const gcomp_lowbit_kernels *const *gcomp_lowbit_tables(size_t *n) {
  static const gcomp_lowbit_kernels *const all[] = {&gcomp_lowbit_base, &gcomp_lowbit_avx2,
                                                    &gcomp_lowbit_avx512};
  gcomp_isa best = gcomp_isa_best_level(gcomp_cpu_detect());
  *n = best >= GCOMP_ISA_AVX512 ? 3 : best >= GCOMP_ISA_AVX2 ? 2 : 1;
  return all;
}

size_t gcomp_lb_raw_put(uint8_t *p, const float *x, size_t n) {
  gcomp_store_le32(p, GCOMP_LB_RAW);
  for (size_t i = 0; i < n; i++) gcomp_store_le32(p + 4 + 4 * i, gcomp_f2u(x[i]));
  return 4 + 4 * n;
}

void gcomp_lb_raw_get(const uint8_t *p, size_t n, float *dst, int mode) {
  for (size_t i = 0; i < n; i++)
    dst[i] = gcomp_lb_apply(dst[i], gcomp_u2f(gcomp_load_le32(p + 4 + 4 * i)), mode);
}

uint64_t gcomp_lb_nonfinite(const float *x, size_t n) {
  uint64_t k = 0;
  for (size_t i = 0; i < n; i++) k += (gcomp_f2u(x[i]) & 0x7f800000u) == 0x7f800000u;
  return k;
}

int gcomp_lb_set_bucket(const char *kind, const char *value, uint64_t *bucket) {
  GCOMP_CHECK(gcomp_kv_u64(kind, "bucket", value, 32, 1u << 20, bucket));
  GCOMP_FAIL_IF(*bucket % 32, GCOMP_ERR_INVALID,
                "%s: bucket='%s' must be a multiple of 32 (32, 64, ..., 1048576)", kind, value);
  return GCOMP_OK;
}

int gcomp_lb_encode(const char *kind, const gcomp_lowbit_kernels *K, gcomp_enc_ctx *ctx,
                    size_t bucket, const float *src, const float *grad, float *res,
                    uint16_t *res16, size_t count, uint8_t *dst, size_t cap, size_t *len,
                    gcomp_lb_bucket_fn fn, void *arg) {
  float *wide = NULL;   /* res16: the bucket's residual, widened */
  if (res16) {
    wide = malloc((count < bucket ? count : bucket) * sizeof *wide + sizeof *wide);
    GCOMP_FAIL_IF(!wide, GCOMP_ERR_NOMEM, "%s: a bucket of %zu residuals", kind, bucket);
  }
  size_t o = 0;
  int st = GCOMP_OK;
  for (size_t b0 = 0, b = 0; b0 < count; b0 += bucket, b++) {
    size_t n = count - b0 < bucket ? count - b0 : bucket, w;
    if (res16) {
      K->widen(wide, res16 + b0, n);
      w = fn(arg, NULL, grad ? grad + b0 : NULL, n, b, wide, dst + o, dst + cap);
      if (w) K->narrow(res16 + b0, wide, n);
    } else if (res) {
      w = fn(arg, NULL, grad ? grad + b0 : NULL, n, b, res + b0, dst + o, dst + cap);
    } else {
      w = fn(arg, src + b0, NULL, n, b, NULL, dst + o, dst + cap);
    }
    if (!w) {
      st = gcomp_error_set(GCOMP_ERR_NOMEM, __FILE__, __LINE__,
                           "%s: %zu bytes of room for %zu values", kind, cap, count);
      break;
    }
    o += w;
    gcomp_enc_progress(ctx, o);
  }
  free(wide);
  if (st < 0) return st;
  *len = o;
  return GCOMP_OK;
}

int gcomp_lb_decode_raw(const char *kind, const uint8_t *src, size_t len, size_t *o, size_t n,
                        size_t b0, float *dst, int mode, gcomp_frame_check *chk) {
  GCOMP_FAIL_IF((len - *o - 4) / 4 < n, GCOMP_ERR_CORRUPT,
                "%s: payload ends inside the raw bucket at value %zu", kind, b0);
  GCOMP_CHECK(gcomp_dec_need(chk, *o + 4 + 4 * n));
  gcomp_lb_raw_get(src + *o, n, dst, mode);
  if (chk) {   /* the only values of a frame that may be NaN or Inf: counted from cache */
    uint64_t k = 0;
    for (size_t i = 0; i < n; i++)
      k += (gcomp_load_le32(src + *o + 4 + 4 * i) & 0x7f800000u) == 0x7f800000u;
    gcomp_dec_tally(chk, k);
  }
  *o += 4 + 4 * n;
  return GCOMP_OK;
}

int gcomp_lb_decode_whole(const gcomp_kind *kind, const gcomp_kind_cfg *cfg, uint32_t param,
                          const uint8_t *src, size_t len, float *dst, size_t count, int add,
                          gcomp_frame_check *chk) {
  size_t o = 0;
  GCOMP_CHECK(kind->decode_part(cfg, param, src, len, &o, dst, 0, count, add, chk));
  GCOMP_FAIL_IF(o != len, GCOMP_ERR_CORRUPT, "%s: %zu bytes after the last bucket", kind->name,
                len - o);
  return GCOMP_OK;
}
