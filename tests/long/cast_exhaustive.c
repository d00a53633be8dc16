/* Every one of the 2^32 fp32 bit patterns through each fp16/bf16 encoder: the base kernel
 * against the independent IEEE reference (tests/unit/test_cast_ref.h), the best SIMD table
 * this CPU runs (avx512 where it has it, else avx2; the unit tests compare every table)
 * against base bit for bit, counters included; its stochastic encoders against base as
 * well. fp16 at scale 1 (the plain cast; other scales are an exact
 * exponent shift, sampled in the unit tests).
 *
 *   cast_exhaustive fp16|bf16 SHARD NSHARDS     patterns [SHARD, SHARD+1) * 2^32/NSHARDS
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cast.h"
#include "gcomp_common.h"
#include "test_cast_ref.h"

enum { BLOCK = 1 << 16 };

static int failures;
static void fail(const char *what, uint32_t w, unsigned got, unsigned want) {
  if (failures++ < 20)
    fprintf(stderr, "%s: %08x -> %04x, expected %04x\n", what, w, got, want);
}

static unsigned load16(const uint8_t *p) { return (unsigned)p[0] | (unsigned)p[1] << 8; }

int main(int argc, char **argv) {
  if (argc != 4 || (strcmp(argv[1], "fp16") && strcmp(argv[1], "bf16"))) {
    fprintf(stderr, "usage: %s fp16|bf16 SHARD NSHARDS\n", argv[0]);
    return 2;
  }
  int fp16 = !strcmp(argv[1], "fp16");
  uint64_t shard = strtoull(argv[2], NULL, 10), nshards = strtoull(argv[3], NULL, 10);
  if (!nshards || shard >= nshards || (1ull << 32) % (nshards * BLOCK)) {
    fprintf(stderr, "bad shard %s/%s\n", argv[2], argv[3]);
    return 2;
  }
  /* the best SIMD table this CPU runs (the unit tests compare every table with base) */
  size_t ntables;
  const gcomp_cast_kernels *const *tables = gcomp_cast_tables(&ntables);
  const gcomp_cast_kernels *simd = ntables > 1 ? tables[ntables - 1] : NULL;
  if (!simd) printf("no AVX2+F16C: base against the reference only\n");
  else printf("%s against base\n", simd->name);
  const gcomp_cast_kernels *B = &gcomp_cast_base;
  uint32_t *src = malloc(BLOCK * 4);
  uint8_t *o0 = malloc(2 * BLOCK), *o1 = malloc(2 * BLOCK);
  uint64_t per = (1ull << 32) / nshards, lo = shard * per, hi = lo + per;
  uint64_t key = gcomp_cast_key(1, 2, 3);
  for (uint64_t base = lo; base < hi; base += BLOCK) {
    for (uint32_t i = 0; i < BLOCK; i++) src[i] = (uint32_t)(base + i);
    const float *f = (const float *)src;
    gcomp_cast_counts c0 = {0, 0, 0}, c1 = {0, 0, 0}, want = {0, 0, 0};
    if (fp16) B->f16_enc(f, BLOCK, o0, 1.0f, &c0);
    else B->bf16_enc(f, BLOCK, o0, &c0);
    for (uint32_t i = 0; i < BLOCK; i++) {
      unsigned r = fp16 ? ref_f16(src[i], 0) : ref_bf16(src[i]);
      unsigned got = load16(o0 + 2 * i);
      if (got != r) fail(fp16 ? "base fp16 vs reference" : "base bf16 vs reference", src[i], got, r);
      uint32_t a = src[i] & 0x7fffffffu;
      unsigned inf = fp16 ? 0x7c00u : 0x7f80u;
      want.nonfinite += a >= 0x7f800000u;
      want.overflow += a < 0x7f800000u && (r & 0x7fffu) == inf;
      want.underflow += a != 0 && (r & 0x7fffu) == 0;
    }
    if (memcmp(&c0, &want, sizeof want)) fail("base counters", (uint32_t)base, 0, 0);
    if (!simd) continue;
    if (fp16) simd->f16_enc(f, BLOCK, o1, 1.0f, &c1);
    else simd->bf16_enc(f, BLOCK, o1, &c1);
    if (memcmp(o0, o1, 2 * BLOCK) || memcmp(&c0, &c1, sizeof c0))
      for (uint32_t i = 0; i < BLOCK; i++)
        if (load16(o0 + 2 * i) != load16(o1 + 2 * i) || i == BLOCK - 1)
          fail(fp16 ? "simd fp16 vs base" : "simd bf16 vs base", src[i], load16(o1 + 2 * i),
               load16(o0 + 2 * i));
    memset(&c0, 0, sizeof c0), memset(&c1, 0, sizeof c1);
    if (fp16) {
      B->f16_enc_sr(f, BLOCK, o0, 1.0f, key, (uint32_t)base, &c0);
      simd->f16_enc_sr(f, BLOCK, o1, 1.0f, key, (uint32_t)base, &c1);
    } else {
      B->bf16_enc_sr(f, BLOCK, o0, key, (uint32_t)base, &c0);
      simd->bf16_enc_sr(f, BLOCK, o1, key, (uint32_t)base, &c1);
    }
    if (memcmp(o0, o1, 2 * BLOCK) || memcmp(&c0, &c1, sizeof c0))
      for (uint32_t i = 0; i < BLOCK; i++)
        if (load16(o0 + 2 * i) != load16(o1 + 2 * i) || i == BLOCK - 1)
          fail(fp16 ? "simd fp16 stochastic vs base" : "simd bf16 stochastic vs base", src[i],
               load16(o1 + 2 * i), load16(o0 + 2 * i));
  }
  free(src), free(o0), free(o1);
  printf("%s patterns %08llx..%08llx: %d failures\n", argv[1], (unsigned long long)lo,
         (unsigned long long)(hi - 1), failures);
  return failures ? 1 : 0;
}
