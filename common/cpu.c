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

gcomp_cpu_id gcomp_cpu_identify(void) {
  gcomp_cpu_id id = {"", 0, 0};
#if defined(__x86_64__) || defined(__i386__)
  unsigned a, b, c, d;
  if (!__get_cpuid(0, &a, &b, &c, &d)) return id;
  memcpy(id.vendor, &b, 4);
  memcpy(id.vendor + 4, &d, 4);
  memcpy(id.vendor + 8, &c, 4);
  id.vendor[12] = '\0';
  if (!__get_cpuid(1, &a, &b, &c, &d)) return id;
  unsigned fam = (a >> 8) & 0xf, model = (a >> 4) & 0xf;
  id.family = fam == 0xf ? fam + ((a >> 20) & 0xff) : fam;
  id.model = fam == 0x6 || fam == 0xf ? model | ((a >> 16) & 0xf) << 4 : model;
#endif
  return id;
}

const char *gcomp_kfamily_name(gcomp_kfamily f) {
  static const char *const names[GCOMP_KF_COUNT] = {"cast", "topk", "quant-encode",
                                                    "quant-decode", "sign-encode", "sign-decode"};
  return (unsigned)f < GCOMP_KF_COUNT ? names[f] : "?";
}

/* Where a family runs better below the CPU's best level, measured through the public API
 * against an fp32 add loop or memcpy timed in the same run (figures in the commit that
 * added this table). A CPU not listed runs every family at its best level: on the Intel
 * Xeon measured every AVX-512 family was the faster one. A timing at first use
 * was the alternative; on this shared machine the same two kernels ranked both ways from
 * one run, one buffer placement, one harness to the next, and a table costs nothing at
 * init and picks the same on every rank with the same CPU. */
static const struct {
  const char *vendor;
  unsigned family;
  unsigned families;   /* bits 1 << gcomp_kfamily */
  gcomp_isa level;
} lowered[] = {
    /* Zen 5: the AVX-512 quant decode-and-add (4 bits, 64 MiB) ran at 0.81-1.49x the add
     * loop depending on where the accumulator sat (the slow end with it at the add loop's
     * source's offset mod 4 KiB), the AVX2 one at 1.11-1.43x; the other families were
     * faster on AVX-512 or level */
    {"AuthenticAMD", 0x1a, 1u << GCOMP_KF_QUANT_DEC, GCOMP_ISA_AVX2},
};

gcomp_isa gcomp_kernel_pick(gcomp_kfamily f, unsigned features, const gcomp_cpu_id *id) {
  gcomp_isa best = gcomp_isa_best_level(features);
  for (size_t i = 0; i < sizeof lowered / sizeof *lowered; i++)
    if (id->family == lowered[i].family && !strcmp(id->vendor, lowered[i].vendor) &&
        (lowered[i].families >> f & 1) && lowered[i].level < best)
      return lowered[i].level;
  return best;
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
static gcomp_isa family_level[GCOMP_KF_COUNT];   /* all GCOMP_ISA_BASE until init */
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
  gcomp_cpu_id id = gcomp_cpu_identify();
  char choice[160] = "";
  for (int k = 0; k < GCOMP_KF_COUNT; k++) {
    family_level[k] = want == 0 ? gcomp_kernel_pick((gcomp_kfamily)k, features, &id) : asked;
    size_t len = strlen(choice);
    snprintf(choice + len, sizeof choice - len, "%s%s=%s", k ? " " : "",
             gcomp_kfamily_name((gcomp_kfamily)k), gcomp_isa_name(family_level[k]));
  }
  GCOMP_INFO(GCOMP_SUB_INIT, "cpu %s family 0x%x model 0x%x, features: %s; kernels: %s (%s)",
             id.vendor, id.family, id.model, feature_text, gcomp_isa_name(selected), choice);
  return GCOMP_OK;
}

gcomp_isa gcomp_kernel_level(gcomp_kfamily f) {
  return (unsigned)f < GCOMP_KF_COUNT ? family_level[f] : GCOMP_ISA_BASE;
}

const char *gcomp_kernel_choice(int i, const char **family) {
  (void)gcomp_init();
  if (i < 0 || i >= GCOMP_KF_COUNT) return NULL;
  if (family) *family = gcomp_kfamily_name((gcomp_kfamily)i);
  return gcomp_isa_name(family_level[i]);
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
