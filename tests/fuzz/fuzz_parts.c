/* Fuzz target: an encode in parts (codec_parts.h) against gcomp_encode of the stored sum.
 *
 * Input: one selector byte, then fp32 values (any bit patterns: NaN payloads, -0,
 * subnormals, huge values), split into 1 to 3 operands of equal length.
 *   selector % NSPECS            the codec
 *   selector / NSPECS % 3 + 1    the operands
 * Two codecs of that spec (fresh residuals) encode two calls of the same key: one
 * gcomp_encode of the sum stored (x = src0 + src1 + ..., in fp32, in that order), the other
 * gcomp_encode_sum_* of the operands in parts of lengths drawn from the input. They must
 * agree on the status and, on success, on every byte of the frame (the second call's too:
 * the residual the first left is then the same), and the frame must decode.
 * NaN payloads are not compared: of two NaN operands a sum keeps one's payload, and which
 * depends on the operand order a compiler chose for the add (both results are NaN). So
 * every NaN among the inputs is made the machine's default NaN (what Inf - Inf gives), and
 * then every NaN of either path has the same bits. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "codec_parts.h"
#include "fuzz_hash.h"
#include "gcomp.h"

static const char *const specs[] = {"sign",
                                    "sign+ef",
                                    "sign:bucket=32+ef",
                                    "quant",
                                    "quant:bits=8,bucket=32",
                                    "quant:bits=2,bucket=64+ef",
                                    "quant:bits=1,bucket=32",
                                    "quant:bits=3,bucket=96+ef"};
enum { NSPECS = sizeof specs / sizeof *specs, MAX_VALUES = 1 << 14, MAX_PART = 3000 };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The second codec's frame of the operands, in parts; its status */
static int encode_in_parts(gcomp_codec *c, float *const *src, int nsrc, size_t n, uint8_t *dst,
                           size_t cap, size_t *len, uint64_t *h) {
  int s = gcomp_encode_sum_begin(c, 7, n, dst, cap);
  for (size_t at = 0; s == GCOMP_OK && at < n;) {
    *h = gcomp_fuzz_mix(*h);
    size_t m = 1 + (size_t)(*h % MAX_PART);
    if (m > n - at) m = n - at;
    const float *p[3] = {src[0] + at, src[1] + at, src[2] + at};
    s = gcomp_encode_sum_part(c, p, nsrc, m);
    at += m;
  }
  return s == GCOMP_OK ? gcomp_encode_sum_end(c, len) : s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  const char *spec = specs[data[0] % NSPECS];
  int nsrc = data[0] / NSPECS % 3 + 1;
  size_t n = (size - 1) / 4 / (size_t)nsrc;
  if (n > MAX_VALUES) n = MAX_VALUES;
  gcomp_codec *a = NULL, *b = NULL;
  if (gcomp_codec_create(spec, &a) != GCOMP_OK || gcomp_codec_create(spec, &b) != GCOMP_OK)
    __builtin_trap();   /* the specs are valid */
  size_t cap = gcomp_codec_max_encoded_size(a, n);
  float *src[3], *x = malloc((n + 1) * sizeof *x), *out = malloc((n + 1) * sizeof *out);
  uint8_t *fa = malloc(cap), *fb = malloc(cap);
  for (int k = 0; k < 3; k++) {
    src[k] = calloc(n + 1, sizeof *src[k]);
    if (src[k] && k < nsrc) memcpy(src[k], data + 1 + 4 * n * (size_t)k, 4 * n);
  }
  if (!x || !out || !fa || !fb || !src[0] || !src[1] || !src[2]) goto done;
  volatile float inf = INFINITY;
  const float dnan = inf - inf;
  for (int k = 0; k < nsrc; k++)
    for (size_t i = 0; i < n; i++)
      if (isnan(src[k][i])) src[k][i] = dnan;
  for (size_t i = 0; i < n; i++) {
    float v = src[0][i];
    for (int k = 1; k < nsrc; k++) v = v + src[k][i];
    x[i] = v;
  }
  uint64_t h = gcomp_fuzz_hash(data, size);
  for (int call = 0; call < 2; call++) {
    size_t la = 0, lb = 0;
    int sa = gcomp_encode(a, 7, x, n, fa, cap, &la);
    int sb = encode_in_parts(b, src, nsrc, n, fb, cap, &lb, &h);
    if (sa != sb) __builtin_trap();
    if (sa != GCOMP_OK) break;
    if (la != lb || memcmp(fa, fb, la)) __builtin_trap();
    if (gcomp_decode(a, fa, la, out, n) != GCOMP_OK) __builtin_trap();
  }
done:
  for (int k = 0; k < 3; k++) free(src[k]);
  free(x), free(out), free(fa), free(fb);
  gcomp_codec_destroy(a);
  gcomp_codec_destroy(b);
  return 0;
}
