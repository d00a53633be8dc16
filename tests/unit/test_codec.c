/* The codec pipeline: spec parsing and printing, frames, checksums, the identity kind,
 * error feedback plumbing and the zstd stage. Kind-specific tests live beside each kind. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "codec_impl.h"
#include "frame.h"
#include "gcomp.h"
#include "spec.h"

static float *gradient(size_t n, unsigned seed) {
  float *g = malloc((n ? n : 1) * sizeof *g);
  uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
  for (size_t i = 0; i < n; i++) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    g[i] = (float)((double)(s >> 11) / 9007199254740992.0 - 0.5) * 2e-3f;
  }
  return g;
}

static void expect_spec_error(const char *spec, const char *fragment) {
  gcomp_codec *c = (gcomp_codec *)0x1;
  int s = gcomp_codec_create(spec, &c);
  if (s != GCOMP_ERR_INVALID) fail_msg("spec '%s' gave %d, expected GCOMP_ERR_INVALID", spec, s);
  assert_null(c);
  if (!strstr(gcomp_last_error(), fragment))
    fail_msg("spec '%s': error '%s' lacks '%s'", spec, gcomp_last_error(), fragment);
}

static void test_spec_errors_name_the_token(void **state) {
  expect_spec_error("", "empty");
  expect_spec_error("fp61", "unknown codec 'fp61' (valid: none");
  expect_spec_error("none:x=1", "unknown parameter 'x'");
  expect_spec_error("none+zstd:level=99", "level='99' is out of range");
  expect_spec_error("none+zstd:lvl=1", "unknown parameter 'lvl'");
  expect_spec_error("none+zstd:level", "parameter 'level' needs a value");
  expect_spec_error("none+zstd:level=", "empty value");
  expect_spec_error("none+zstd:", "followed by no parameters");
  expect_spec_error("none+", "empty stage name");
  expect_spec_error("none++zstd", "empty stage name");
  expect_spec_error("none+lz4", "unknown stage 'lz4' (valid: ef, zstd");
  expect_spec_error("none+ef+ef", "'+ef' appears twice");
  expect_spec_error("none+zstd+ef", "must come before the lossless stage");
  expect_spec_error("none+zstd+zstd", "second lossless stage");
  expect_spec_error("none+none", "is a codec, not a stage");
  expect_spec_error("none+ef:dtype=fp8", "dtype='fp8' is not one of fp32|bf16");
  expect_spec_error("none + ef", "white space");
  /* the whole spec is quoted so the user sees which of several specs was wrong */
  expect_spec_error("none+lz4", "codec spec 'none+lz4'");
}

static void test_spec_canonical_roundtrip(void **state) {
  const char *specs[] = {"none", "none+ef", "none+zstd", "none+ef+zstd:level=3",
                         "none+ef:dtype=fp32+zstd:level=1"};
  for (size_t i = 0; i < sizeof specs / sizeof *specs; i++) {
    gcomp_codec *a, *b;
    assert_int_equal(gcomp_codec_create(specs[i], &a), GCOMP_OK);
    char ca[256], cb[256];
    size_t n = gcomp_codec_spec(a, ca, sizeof ca);
    assert_int_equal(n, strlen(ca));
    assert_int_equal(gcomp_codec_create(ca, &b), GCOMP_OK);
    gcomp_codec_spec(b, cb, sizeof cb);
    assert_string_equal(ca, cb);
    gcomp_codec_destroy(a);
    gcomp_codec_destroy(b);
  }
  gcomp_codec *c;
  assert_int_equal(gcomp_codec_create("none+ef+zstd", &c), GCOMP_OK);
  char buf[8];
  size_t need = gcomp_codec_spec(c, buf, sizeof buf);
  assert_string_equal(buf, "none+ef");  /* truncated like snprintf */
  assert_true(need > sizeof buf);
  gcomp_codec_destroy(c);
}

static void roundtrip(const char *spec, size_t n) {
  gcomp_codec *c;
  assert_int_equal(gcomp_codec_create(spec, &c), GCOMP_OK);
  float *g = gradient(n, (unsigned)n + 1);
  size_t cap = gcomp_codec_max_encoded_size(c, n), len = 0;
  uint8_t *frame = malloc(cap);
  assert_int_equal(gcomp_encode(c, 7, g, n, frame, cap, &len), GCOMP_OK);
  assert_true(len <= cap);
  float *out = malloc((n ? n : 1) * sizeof *out);
  assert_int_equal(gcomp_decode(c, frame, len, out, n), GCOMP_OK);
  assert_memory_equal(out, g, n * sizeof *g);   /* none is lossless, bit for bit */
  for (size_t i = 0; i < n; i++) out[i] = 1.0f;
  assert_int_equal(gcomp_decode_add(c, frame, len, out, n), GCOMP_OK);
  for (size_t i = 0; i < n; i++) assert_true(out[i] == 1.0f + g[i]);
  free(out);
  free(frame);
  free(g);
  gcomp_codec_destroy(c);
}

static void test_none_roundtrip(void **state) {
  size_t sizes[] = {0, 1, 2, 3, 17, 1000, 65537};
  for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
    roundtrip("none", sizes[i]);
    roundtrip("none+zstd", sizes[i]);
    roundtrip("none+zstd:level=5", sizes[i]);
  }
}

static void test_zstd_stage_shrinks_or_goes_raw(void **state) {
  gcomp_codec *c;
  assert_int_equal(gcomp_codec_create("none+zstd", &c), GCOMP_OK);
  size_t n = 1 << 16;
  float *zeros = calloc(n, sizeof *zeros);
  size_t cap = gcomp_codec_max_encoded_size(c, n), len;
  uint8_t *frame = malloc(cap);
  assert_int_equal(gcomp_encode(c, 0, zeros, n, frame, cap, &len), GCOMP_OK);
  assert_true(len < n * 4 / 50);          /* zeros compress */
  assert_int_equal(frame[6], GCOMP_STAGE_ZSTD);
  /* random bytes do not compress: the payload goes raw, never larger */
  uint32_t *noise = (uint32_t *)zeros;
  uint64_t s = 88172645463325252ull;
  for (size_t i = 0; i < n; i++) s ^= s << 13, s ^= s >> 7, s ^= s << 17, noise[i] = (uint32_t)s;
  assert_int_equal(gcomp_encode(c, 0, zeros, n, frame, cap, &len), GCOMP_OK);
  assert_int_equal(len, gcomp_frame_size(n * 4));
  assert_int_equal(frame[6], GCOMP_STAGE_NONE);
  float *out = malloc(n * sizeof *out);
  assert_int_equal(gcomp_decode(c, frame, len, out, n), GCOMP_OK);
  assert_memory_equal(out, zeros, n * 4);
  free(out);
  free(frame);
  free(zeros);
  gcomp_codec_destroy(c);
}

static void test_corrupt_frames_rejected(void **state) {
  gcomp_codec *c, *z;
  assert_int_equal(gcomp_codec_create("none", &c), GCOMP_OK);
  assert_int_equal(gcomp_codec_create("none+zstd", &z), GCOMP_OK);
  size_t n = 64;
  float g[64], out[64];
  for (size_t i = 0; i < n; i++) g[i] = (float)i * 0.25f;
  uint8_t frame[512], bad[512];
  size_t len;
  gcomp_codec *codecs[] = {c, z};
  for (int which = 0; which < 2; which++) {
    gcomp_codec *cc = codecs[which];
    assert_int_equal(gcomp_encode(cc, 0, g, n, frame, sizeof frame, &len), GCOMP_OK);
    /* every single-bit flip anywhere in the frame is caught */
    for (size_t bit = 0; bit < len * 8; bit++) {
      memcpy(bad, frame, len);
      bad[bit / 8] ^= (uint8_t)(1u << (bit % 8));
      int s = gcomp_decode(cc, bad, len, out, n);
      if (s != GCOMP_ERR_CORRUPT) fail_msg("bit %zu flipped: status %d", bit, s);
    }
    /* every truncation */
    for (size_t cut = 0; cut < len; cut++)
      assert_int_equal(gcomp_decode(cc, frame, cut, out, n), GCOMP_ERR_CORRUPT);
    /* trailing garbage */
    memcpy(bad, frame, len);
    bad[len] = 0;
    assert_int_equal(gcomp_decode(cc, bad, len + 1, out, n), GCOMP_ERR_CORRUPT);
    /* wrong element count */
    assert_int_equal(gcomp_decode(cc, frame, len, out, n - 1), GCOMP_ERR_CORRUPT);
    assert_non_null(strstr(gcomp_last_error(), "frame holds 64 values, the caller expects 63"));
  }
  /* a frame from one pipeline is refused by another */
  assert_int_equal(gcomp_encode(z, 0, g, n, frame, sizeof frame, &len), GCOMP_OK);
  if (frame[6] == GCOMP_STAGE_ZSTD)
    assert_int_equal(gcomp_decode(c, frame, len, out, n), GCOMP_ERR_CORRUPT);
  /* a frame whose header names an unknown version */
  assert_int_equal(gcomp_encode(c, 0, g, n, frame, sizeof frame, &len), GCOMP_OK);
  frame[4] = 9;
  assert_int_equal(gcomp_decode(c, frame, len, out, n), GCOMP_ERR_CORRUPT);
  assert_non_null(strstr(gcomp_last_error(), "version 9"));
  gcomp_codec_destroy(c);
  gcomp_codec_destroy(z);
}

/* count 0 takes NULL buffers, as the API says (the none kind passed NULL to memcpy: UBSan) */
static void test_zero_count_null_buffers(void **state) {
  const char *specs[] = {"none", "none+ef", "none+zstd", "bf16", "fp16", "topk:k=1",
                         "topk:ratio=0.1+ef"};
  for (size_t i = 0; i < sizeof specs / sizeof *specs; i++) {
    gcomp_codec *c;
    assert_int_equal(gcomp_codec_create(specs[i], &c), GCOMP_OK);
    uint8_t frame[256];
    size_t len = 0;
    if (gcomp_encode(c, 1, NULL, 0, frame, sizeof frame, &len) != GCOMP_OK)
      fail_msg("%s: encode: %s", specs[i], gcomp_last_error());
    assert_int_equal(gcomp_decode(c, frame, len, NULL, 0), GCOMP_OK);
    assert_int_equal(gcomp_decode_add(c, frame, len, NULL, 0), GCOMP_OK);
    gcomp_codec_destroy(c);
  }
}

/* A frame's parameter word means something only to kinds that use it; the others refuse a
 * nonzero one (as they refuse unknown flag bits) instead of decoding a frame a newer writer
 * meant differently. */
static void test_param_word_checked(void **state) {
  const char *specs[] = {"none", "topk:ratio=0.1", "bf16", "test_biased", "none+zstd"};
  float g[256], out[256];
  for (int i = 0; i < 256; i++) g[i] = (float)(i % 17) - 8.5f;
  for (size_t s = 0; s < sizeof specs / sizeof *specs; s++) {
    gcomp_codec *c;
    assert_int_equal(gcomp_codec_create(specs[s], &c), GCOMP_OK);
    uint8_t frame[2048];
    size_t len;
    assert_int_equal(gcomp_encode(c, 0, g, 256, frame, sizeof frame, &len), GCOMP_OK);
    assert_int_equal(gcomp_decode(c, frame, len, out, 256), GCOMP_OK);
    gcomp_frame_info info = {.kind = frame[5], .stage = frame[6], .flags = frame[7],
                             .count = gcomp_load_le64(frame + 8),
                             .payload_len = gcomp_load_le64(frame + 16), .param = 0xdeadbeefu};
    gcomp_frame_seal(frame, &info);   /* a valid CRC over the new word */
    int st = gcomp_decode(c, frame, len, out, 256);
    if (st != GCOMP_ERR_CORRUPT) fail_msg("%s: parameter 0xdeadbeef: status %d", specs[s], st);
    if (!strstr(gcomp_last_error(), "parameter")) fail_msg("%s: %s", specs[s], gcomp_last_error());
    gcomp_codec_destroy(c);
  }
}

/* Sizes that wrap size_t: the sizing call says no buffer is large enough (it returned 36
 * for 2^62 + 1 floats, and the encode then passed its room check). */
static void test_huge_counts_refused(void **state) {
  const char *specs[] = {"none", "bf16", "topk:ratio=0.1", "none+zstd"};
  for (size_t i = 0; i < sizeof specs / sizeof *specs; i++) {
    gcomp_codec *c;
    assert_int_equal(gcomp_codec_create(specs[i], &c), GCOMP_OK);
    size_t huge = ((size_t)1 << 62) + 1;
    assert_true(gcomp_codec_max_encoded_size(c, huge) == SIZE_MAX);
    float x = 1;
    uint8_t buf[64];
    size_t len;
    assert_int_equal(gcomp_encode(c, 0, &x, huge, buf, SIZE_MAX, &len), GCOMP_ERR_INVALID);
    assert_int_equal(gcomp_decode(c, buf, sizeof buf, &x, huge), GCOMP_ERR_INVALID);
    gcomp_codec_destroy(c);
  }
}

/* A stage that does not pay is no failure: the last error's detail survives the encode
 * (the header promises it until the next failing call; the encode used to clear it). */
static void test_last_error_survives_raw_fallback(void **state) {
  gcomp_codec *bad = NULL, *z;
  assert_int_equal(gcomp_codec_create("fp16:scael=none", &bad), GCOMP_ERR_INVALID);
  char before[256];
  snprintf(before, sizeof before, "%s", gcomp_last_error());
  assert_non_null(strstr(before, "scael"));
  assert_int_equal(gcomp_codec_create("none+zstd", &z), GCOMP_OK);
  float noise[512];
  uint32_t h = 12345;
  for (int i = 0; i < 512; i++) {   /* random bits: incompressible, so the payload goes raw */
    h = h * 1664525u + 1013904223u;
    uint32_t b = h ^ (h >> 13) * 0x9e3779b1u;   /* every bit random, exponents included */
    memcpy(&noise[i], &b, 4);
  }
  uint8_t frame[4096];
  size_t len;
  assert_int_equal(gcomp_encode(z, 0, noise, 512, frame, sizeof frame, &len), GCOMP_OK);
  assert_int_equal(frame[6], GCOMP_STAGE_NONE);   /* it did go raw */
  assert_string_equal(gcomp_last_error(), before);
  gcomp_codec_destroy(z);
}

static void test_encode_checks_capacity(void **state) {
  gcomp_codec *c;
  assert_int_equal(gcomp_codec_create("none", &c), GCOMP_OK);
  float g[10] = {0};
  uint8_t frame[64];
  size_t len;
  assert_int_equal(gcomp_encode(c, 0, g, 10, frame, sizeof frame, &len), GCOMP_ERR_NOMEM);
  assert_non_null(strstr(gcomp_last_error(), "gcomp_codec_max_encoded_size"));
  assert_int_equal(gcomp_encode(c, 0, NULL, 10, frame, sizeof frame, &len), GCOMP_ERR_INVALID);
  gcomp_codec_destroy(c);
}

static void test_stats_and_nonfinite(void **state) {
  gcomp_codec *c;
  assert_int_equal(gcomp_codec_create("none", &c), GCOMP_OK);
  float g[4] = {1.0f, NAN, INFINITY, -INFINITY}, out[4];
  uint8_t frame[128];
  size_t len;
  assert_int_equal(gcomp_encode(c, 0, g, 4, frame, sizeof frame, &len), GCOMP_OK);
  gcomp_codec_stats st = {.struct_size = sizeof st};
  assert_int_equal(gcomp_codec_get_stats(c, &st), GCOMP_OK);
  assert_int_equal(st.nonfinite_inputs, 3);
  assert_int_equal(st.frames_encoded, 1);
  assert_int_equal(st.bytes_in, 16);
  assert_int_equal(st.bytes_out, len);
  assert_int_equal(gcomp_decode(c, frame, len, out, 4), GCOMP_OK);
  assert_true(isnan(out[1]) && out[2] == INFINITY && out[3] == -INFINITY);
  gcomp_codec_reset_stats(c);
  assert_int_equal(gcomp_codec_get_stats(c, &st), GCOMP_OK);
  assert_int_equal(st.frames_encoded, 0);
  gcomp_codec_destroy(c);
}

static void test_ef_key_shape_change(void **state) {
  gcomp_codec *c;
  assert_int_equal(gcomp_codec_create("none+ef", &c), GCOMP_OK);
  float g[8] = {1, 2, 3, 4, 5, 6, 7, 8}, out[8];
  uint8_t frame[128];
  size_t len;
  assert_int_equal(gcomp_encode(c, 42, g, 8, frame, sizeof frame, &len), GCOMP_OK);
  assert_int_equal(gcomp_decode(c, frame, len, out, 8), GCOMP_OK);
  assert_memory_equal(out, g, sizeof g);   /* identity: no residual */
  assert_int_equal(gcomp_encode(c, 42, g, 7, frame, sizeof frame, &len), GCOMP_ERR_INVALID);
  assert_non_null(strstr(gcomp_last_error(), "key 42 had 8 elements and now has 7"));
  for (uint64_t k = 0; k < 100; k++)   /* many keys: the table grows */
    assert_int_equal(gcomp_encode(c, k * 1000003, g, 8, frame, sizeof frame, &len), GCOMP_OK);
  gcomp_codec_destroy(c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_spec_errors_name_the_token),
      cmocka_unit_test(test_spec_canonical_roundtrip),
      cmocka_unit_test(test_none_roundtrip),
      cmocka_unit_test(test_zstd_stage_shrinks_or_goes_raw),
      cmocka_unit_test(test_corrupt_frames_rejected),
      cmocka_unit_test(test_encode_checks_capacity),
      cmocka_unit_test(test_zero_count_null_buffers),
      cmocka_unit_test(test_huge_counts_refused),
      cmocka_unit_test(test_last_error_survives_raw_fallback),
      cmocka_unit_test(test_param_word_checked),
      cmocka_unit_test(test_stats_and_nonfinite),
      cmocka_unit_test(test_ef_key_shape_change),
  };
  return cmocka_run_group_tests_name("codec", tests, NULL, NULL);
}
