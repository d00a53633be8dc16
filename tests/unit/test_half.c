/* The one scalar fp16/bf16 conversion (codecs/half.h) that the cast kernels, top-k's values
 * and the bf16 residual store share: each named rule against the independent IEEE
 * reference of test_cast_ref.h (every 2^16th fp32 pattern plus the edges of both formats,
 * each sign), every 16-bit pattern widened, and the two saturating rules at exactly the
 * points where they part from the plain ones. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "half.h"
#include "test_cast_ref.h"

/* The fp32 patterns every rule is checked at: a stride over all 2^32, and each format's
 * thresholds (overflow, underflow, subnormal, tie) with their neighbours. */
static int pattern(uint64_t i, uint32_t *w) {
  static const uint32_t edges[] = {
      0x00000000, 0x7f800000, 0x7fc00000, 0x7f800001, 0x7fbfffff, 0x7fffffff, 0x477fe000,
      0x477fefff, 0x477ff000, 0x477ff001, 0x477fffff, 0x47800000, 0x38800000, 0x387fffff,
      0x33000000, 0x33000001, 0x32ffffff, 0x7f7f7fff, 0x7f7f8000, 0x7f7f8001, 0x7f7fffff,
      0x00008000, 0x00008001, 0x00018000, 0x00000001, 0x007fffff, 0x00800000, 0x3f808000,
      0x3f818000, 0x3f801000, 0x3f803000};
  enum { NE = sizeof edges / sizeof *edges, STRIDE = 65521 };   /* a prime: all low bits */
  uint64_t nstride = (1ull << 32) / STRIDE;
  if (i < 2 * NE) {
    *w = edges[i / 2] ^ (i & 1 ? 0x80000000u : 0);
    return 1;
  }
  i -= 2 * NE;
  if (i > nstride) return 0;
  *w = (uint32_t)(i * STRIDE);
  return 1;
}

static void test_plain_rules_match_ieee(void **state) {
  (void)state;
  uint32_t w;
  for (uint64_t i = 0; pattern(i, &w); i++) {
    float x = gcomp_u2f(w);
    if (gcomp_f16_rne(x) != ref_f16(w, 0)) fail_msg("f16_rne(0x%08x)", w);
    if (gcomp_bf16_rne(x) != ref_bf16(w)) fail_msg("bf16_rne(0x%08x)", w);
  }
}

/* The saturating rules are the plain ones except where the plain one turns a finite value
 * into Inf (both) and, for bf16, at NaN. */
static void test_saturating_rules(void **state) {
  (void)state;
  uint32_t w;
  for (uint64_t i = 0; pattern(i, &w); i++) {
    float x = gcomp_u2f(w);
    uint32_t a = w & 0x7fffffffu, sign16 = w >> 16 & 0x8000u;
    uint16_t h = ref_f16(w, 0), want = h;
    if (a < 0x7f800000u && (h & 0x7fffu) == 0x7c00u) want = (uint16_t)(sign16 | 0x7bffu);
    if (gcomp_f16_rne_sat(x) != want) fail_msg("f16_rne_sat(0x%08x)", w);
    uint16_t b = ref_bf16(w);
    want = b;
    if (a < 0x7f800000u && (b & 0x7fffu) == 0x7f80u) want = (uint16_t)(sign16 | 0x7f7fu);
    if (a > 0x7f800000u) want = 0;
    if (gcomp_bf16_rne_sat(x) != want) fail_msg("bf16_rne_sat(0x%08x)", w);
  }
  /* the points themselves, spelled out */
  assert_int_equal(gcomp_f16_rne(65519.0f), 0x7bff);
  assert_int_equal(gcomp_f16_rne(65520.0f), 0x7c00);
  assert_int_equal(gcomp_f16_rne_sat(65520.0f), 0x7bff);
  assert_int_equal(gcomp_f16_rne_sat(-1e30f), 0xfbff);
  assert_int_equal(gcomp_f16_rne_sat(-INFINITY), 0xfc00);   /* Inf stays Inf */
  assert_int_equal(gcomp_f16_rne_sat(NAN) & 0x7e00, 0x7e00);   /* NaN stays NaN */
  assert_int_equal(gcomp_bf16_rne(3.4e38f), 0x7f80);
  assert_int_equal(gcomp_bf16_rne_sat(3.4e38f), 0x7f7f);
  assert_int_equal(gcomp_bf16_rne_sat(-3.4e38f), 0xff7f);
  assert_int_equal(gcomp_bf16_rne_sat(INFINITY), 0x7f80);
  assert_int_equal(gcomp_bf16_rne_sat(-NAN), 0);
  assert_int_equal(gcomp_bf16_rne(-NAN) & 0xffc0, 0xffc0);   /* quiet, sign kept */
}

static void test_widening_every_pattern(void **state) {
  (void)state;
  for (uint32_t h = 0; h < 65536; h++) {
    if (gcomp_f2u(gcomp_f16_to_f32(h)) != ref_f16_to_f32((uint16_t)h)) fail_msg("f16 0x%04x", h);
    if (gcomp_f2u(gcomp_bf16_to_f32(h)) != ref_bf16_to_f32((uint16_t)h))
      fail_msg("bf16 0x%04x", h);
  }
}

/* Every finite value survives a round trip through the saturating rules as a finite value:
 * what error feedback needs (the residual x - decoded stays finite). */
static void test_saturating_round_trip_is_finite(void **state) {
  (void)state;
  uint32_t w;
  for (uint64_t i = 0; pattern(i, &w); i++) {
    float x = gcomp_u2f(w);
    if (!isfinite(x)) continue;
    if (!isfinite(gcomp_f16_to_f32(gcomp_f16_rne_sat(x)))) fail_msg("f16 0x%08x", w);
    if (!isfinite(gcomp_bf16_to_f32(gcomp_bf16_rne_sat(x)))) fail_msg("bf16 0x%08x", w);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_plain_rules_match_ieee),
      cmocka_unit_test(test_saturating_rules),
      cmocka_unit_test(test_widening_every_pattern),
      cmocka_unit_test(test_saturating_round_trip_is_finite),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
