/* CPU feature detection (CPUID + XGETBV) and the choice of kernel level, made once. */
#include <stdio.h>
#include <string.h>

#include "gcomp_common.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
static uint64_t xgetbv0(void) {
  uint32_t lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return ((uint64_t)hi << 32) | lo;
}
#endif

unsigned gcomp_cpu_detect(void) {
  unsigned f = 0;
#if defined(__x86_64__) || defined(__i386__)
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
  if (d & (1u << 26)) f |= GCOMP_CPU_SSE2;
  if (c & (1u << 20)) f |= GCOMP_CPU_SSE42;
  if (c & (1u << 1)) f |= GCOMP_CPU_PCLMUL;
  int osxsave = (c >> 27) & 1;
  uint64_t xcr0 = osxsave ? xgetbv0() : 0;
  int ymm_ok = (xcr0 & 0x6) == 0x6;           /* XMM and YMM state saved by the OS */
  int zmm_ok = ymm_ok && (xcr0 & 0xe0) == 0xe0; /* opmask, ZMM_Hi256, Hi16_ZMM */
  if (ymm_ok && (c & (1u << 28))) f |= GCOMP_CPU_AVX;
  if (ymm_ok && (c & (1u << 29))) f |= GCOMP_CPU_F16C;
  if (ymm_ok && (c & (1u << 12))) f |= GCOMP_CPU_FMA;
  if (__get_cpuid_max(0, NULL) >= 7) {
    __cpuid_count(7, 0, a, b, c, d);
    if (ymm_ok && (b & (1u << 5))) f |= GCOMP_CPU_AVX2;
    if (b & (1u << 8)) f |= GCOMP_CPU_BMI2;
    if (zmm_ok && (b & (1u << 16))) f |= GCOMP_CPU_AVX512F;
    if (zmm_ok && (b & (1u << 30))) f |= GCOMP_CPU_AVX512BW;
    if (zmm_ok && (b & (1u << 31))) f |= GCOMP_CPU_AVX512VL;
    if (zmm_ok && (b & (1u << 17))) f |= GCOMP_CPU_AVX512DQ;
    if (zmm_ok && (c & (1u << 1))) f |= GCOMP_CPU_AVX512VBMI;
    if (ymm_ok && (c & (1u << 10))) f |= GCOMP_CPU_VPCLMUL;
    if (zmm_ok && (d & (1u << 23))) f |= GCOMP_CPU_AVX512FP16;
    __cpuid_count(7, 1, a, b, c, d);
    if (zmm_ok && (a & (1u << 5))) f |= GCOMP_CPU_AVX512BF16;
  }
#endif
  return f;
}

gcomp_isa gcomp_isa_best_level(unsigned f) {
  /* the avx2 kernels are built with -mavx2 -mf16c -mfma -mbmi2 -mpclmul -msse4.2: all or
   * none (every AVX2 CPU has the last two) */
  const unsigned avx2 = GCOMP_CPU_AVX2 | GCOMP_CPU_F16C | GCOMP_CPU_FMA | GCOMP_CPU_BMI2 |
                        GCOMP_CPU_PCLMUL | GCOMP_CPU_SSE42;
  const unsigned avx512 = avx2 | GCOMP_CPU_AVX512F | GCOMP_CPU_AVX512BW | GCOMP_CPU_AVX512VL;
  if ((f & avx512) == avx512) return GCOMP_ISA_AVX512;
  if ((f & avx2) == avx2) return GCOMP_ISA_AVX2;
  return GCOMP_ISA_BASE;
}

const char *gcomp_isa_name(gcomp_isa isa) {
  switch (isa) {
  case GCOMP_ISA_AVX2: return "avx2";
  case GCOMP_ISA_AVX512: return "avx512";
  default: return "base";
  }
}

static unsigned features;
static gcomp_isa selected = GCOMP_ISA_BASE;
static char feature_text[256];

int gcomp_cpu_select(void) {
  features = gcomp_cpu_detect();
  static const struct { unsigned bit; const char *name; } names[] = {
      {GCOMP_CPU_SSE2, "sse2"}, {GCOMP_CPU_SSE42, "sse4.2"}, {GCOMP_CPU_AVX, "avx"},
      {GCOMP_CPU_AVX2, "avx2"}, {GCOMP_CPU_F16C, "f16c"}, {GCOMP_CPU_FMA, "fma"},
      {GCOMP_CPU_BMI2, "bmi2"}, {GCOMP_CPU_AVX512F, "avx512f"}, {GCOMP_CPU_AVX512BW, "avx512bw"},
      {GCOMP_CPU_AVX512VL, "avx512vl"}, {GCOMP_CPU_AVX512DQ, "avx512dq"},
      {GCOMP_CPU_AVX512VBMI, "avx512vbmi"}, {GCOMP_CPU_AVX512BF16, "avx512bf16"},
      {GCOMP_CPU_AVX512FP16, "avx512fp16"}, {GCOMP_CPU_PCLMUL, "pclmul"},
      {GCOMP_CPU_VPCLMUL, "vpclmulqdq"}};
  feature_text[0] = '\0';
  for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
    if (!(features & names[i].bit)) continue;
    size_t len = strlen(feature_text);
    snprintf(feature_text + len, sizeof feature_text - len, "%s%s", len ? " " : "", names[i].name);
  }
  gcomp_isa best = gcomp_isa_best_level(features);
  /* enum order of GCOMP_ISA: auto|base|avx2|avx512 */
  int64_t want = gcomp_param_int(GCOMP_P_ISA);
  gcomp_isa asked = want == 0 ? best : (gcomp_isa)(want - 1);
  GCOMP_FAIL_IF(asked > best, GCOMP_ERR_UNSUPPORTED,
                "GCOMP_ISA=%s asks for more than this CPU has (best: %s; features: %s)",
                gcomp_isa_name(asked), gcomp_isa_name(best), feature_text);
  selected = asked;
  GCOMP_INFO(GCOMP_SUB_INIT, "cpu features: %s; kernels: %s", feature_text, gcomp_isa_name(selected));
  return GCOMP_OK;
}

gcomp_isa gcomp_isa_level(void) { return selected; }
int gcomp_cpu_has(unsigned bits) { return (features & bits) == bits; }
/* the public getters initialise the library first, as every other entry point does (before,
 * they answered "" and "base" on any CPU until something else had) */
const char *gcomp_cpu_features(void) {
  (void)gcomp_init();
  return feature_text;
}
const char *gcomp_isa_selected(void) {
  (void)gcomp_init();
  return gcomp_isa_name(selected);
}
const char *gcomp_isa_best(void) {
  (void)gcomp_init();
  return gcomp_isa_name(gcomp_isa_best_level(features));
}
