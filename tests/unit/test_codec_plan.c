/* What planners ask of a codec instead of reading its spec text: gcomp_codec_describe and
 * gcomp_codec_spec_with (public), and the wire identity and second stage reduce/ uses. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "codec_impl.h"

static gcomp_codec *make(const char *spec) {
  gcomp_codec *c = NULL;
  assert_int_equal(gcomp_codec_create(spec, &c), GCOMP_OK);
  return c;
}

static gcomp_codec_info describe(const char *spec) {
  gcomp_codec *c = make(spec);
  gcomp_codec_info info = {.struct_size = sizeof info};
  assert_int_equal(gcomp_codec_describe(c, &info), GCOMP_OK);
  gcomp_codec_destroy(c);
  return info;
}

static void test_describe(void **state) {
  gcomp_codec_info i = describe("topk:ratio=0.01+ef");
  assert_string_equal(i.kind, "topk");
  assert_true(i.sparse && i.error_feedback && !i.ef_momentum_given);
  assert_true(i.ef_momentum == 0);
  i = describe("topk+ef:momentum=0");   /* named, even as 0: the harness runs it as written */
  assert_true(i.ef_momentum_given);
  i = describe("topk+ef:momentum=0.9,mask=0");
  assert_true(i.ef_momentum == 0.9 && i.ef_momentum_given && i.ef_mask == 0);
  i = describe("bf16:round=stochastic,seed=3+zstd");
  assert_string_equal(i.kind, "bf16");
  assert_true(!i.sparse && !i.error_feedback);
  i = describe("none+ef");
  assert_string_equal(i.kind, "none");
  gcomp_codec *c = make("fp16");
  gcomp_codec_info small = {.struct_size = 4};
  assert_int_equal(gcomp_codec_describe(c, &small), GCOMP_ERR_INVALID);
  assert_int_equal(gcomp_codec_describe(NULL, &small), GCOMP_ERR_INVALID);
  gcomp_codec_destroy(c);
}

static void test_spec_with(void **state) {
  gcomp_codec *c = make("topk:ratio=0.01+ef+zstd");
  char buf[256], canon[256];
  assert_int_equal(gcomp_codec_spec_with(c, "ef", "momentum=0.9,mask=0", buf, sizeof buf), 0);
  assert_non_null(strstr(buf, "+ef:dtype=fp32,momentum=0.9,mask=0+zstd"));
  gcomp_codec *d = make(buf);   /* a spec gcomp_codec_create takes, and prints alike */
  gcomp_codec_spec(d, canon, sizeof canon);
  assert_string_equal(buf, canon);
  gcomp_codec_destroy(d);
  assert_int_equal(gcomp_codec_spec_with(c, "topk", "ratio=0.5", buf, sizeof buf), 0);
  assert_non_null(strstr(buf, "topk:ratio=0.5"));
  /* refusals: no such stage, a bad value, no room */
  assert_int_equal(gcomp_codec_spec_with(c, "igzip", "level=1", buf, sizeof buf),
                   GCOMP_ERR_INVALID);
  assert_int_equal(gcomp_codec_spec_with(c, "ef", "momentum=2", buf, sizeof buf),
                   GCOMP_ERR_INVALID);
  assert_non_null(strstr(gcomp_last_error(), "momentum"));
  assert_int_equal(gcomp_codec_spec_with(c, "ef", "momentum=0.5", buf, 8), GCOMP_ERR_NOMEM);
  gcomp_codec_destroy(c);
  c = make("none");   /* a stage without parameters takes its first */
  assert_int_equal(gcomp_codec_spec_with(c, "none", "bogus=1", buf, sizeof buf),
                   GCOMP_ERR_INVALID);
  gcomp_codec_destroy(c);
}

/* Ranks may pick different seeds, nothing else */
static void test_wire_identity(void **state) {
  const char *same[][2] = {{"bf16:round=stochastic,seed=1", "bf16:round=stochastic,seed=9"},
                           {"topk:ratio=0.01,seed=4+ef", "topk:ratio=0.01,seed=5+ef"},
                           {"fp16:round=stochastic", "fp16:round=stochastic,seed=2"}};
  const char *other[][2] = {{"bf16", "fp16"}, {"topk:ratio=0.01+ef", "topk:ratio=0.02+ef"},
                            {"bf16+ef", "bf16"}, {"none", "none+zstd"}};
  for (size_t i = 0; i < 7; i++) {
    const char *const *pair = i < 3 ? same[i] : other[i - 3];
    char a[256], b[256];
    gcomp_codec *x = make(pair[0]), *y = make(pair[1]);
    gcomp_codec_wire_spec(x, a, sizeof a);
    gcomp_codec_wire_spec(y, b, sizeof b);
    assert_int_equal(strcmp(a, b) == 0, i < 3);
    gcomp_codec_destroy(x), gcomp_codec_destroy(y);
  }
}

static void test_second_stage(void **state) {
  const char *cases[][2] = {{"bf16+ef", "bf16"}, {"fp16:scale=none+ef:dtype=bf16+zstd", NULL},
                            {"topk:ratio=0.01+ef", "none"}, {"bf16", "bf16"}};
  for (size_t i = 0; i < 4; i++) {
    gcomp_codec *c = make(cases[i][0]), *s = NULL;
    assert_int_equal(gcomp_codec_second_stage(c, &s), GCOMP_OK);
    char got[256], want[256];
    gcomp_codec_spec(s, got, sizeof got);
    gcomp_codec_info info = {.struct_size = sizeof info};
    assert_int_equal(gcomp_codec_describe(s, &info), GCOMP_OK);
    assert_false(info.error_feedback);
    if (cases[i][1]) {
      gcomp_codec *w = make(cases[i][1]);
      gcomp_codec_spec(w, want, sizeof want);
      gcomp_codec_destroy(w);
      assert_string_equal(got, want);
    } else {
      assert_non_null(strstr(got, "fp16:scale=none"));
      assert_non_null(strstr(got, "+zstd"));
    }
    gcomp_codec_destroy(c), gcomp_codec_destroy(s);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_describe),
      cmocka_unit_test(test_spec_with),
      cmocka_unit_test(test_wire_identity),
      cmocka_unit_test(test_second_stage),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
