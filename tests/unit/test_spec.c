/* The codec spec grammar: every valid form with its canonical print, every kind of invalid
 * spec with the exact message a user sees, and parse(print(s)) == s. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gcomp.h"
#include "spec.h"

static void canonical(const char *in, const char *want) {
  gcomp_spec s, t;
  if (gcomp_spec_parse(in, &s) != GCOMP_OK) fail_msg("'%s' refused: %s", in, gcomp_last_error());
  char buf[512], again[512];
  size_t n = gcomp_spec_print(&s, buf, sizeof buf);
  assert_int_equal(n, strlen(buf));
  if (strcmp(buf, want) != 0) fail_msg("'%s' printed as '%s', expected '%s'", in, buf, want);
  /* parse(print(s)) == s: the canonical form is a fixed point */
  assert_int_equal(gcomp_spec_parse(buf, &t), GCOMP_OK);
  gcomp_spec_print(&t, again, sizeof again);
  assert_string_equal(again, buf);
  assert_ptr_equal(t.kind, s.kind);
  assert_ptr_equal(t.stage, s.stage);
  assert_int_equal(t.ef, s.ef);
  assert_int_equal(t.ef_dtype, s.ef_dtype);
  assert_true(t.ef_momentum == s.ef_momentum);
  assert_int_equal(t.ef_mask, s.ef_mask);
  assert_memory_equal(&t.stage_cfg, &s.stage_cfg, sizeof s.stage_cfg);
  /* and the public API agrees */
  gcomp_codec *c;
  assert_int_equal(gcomp_codec_create(in, &c), GCOMP_OK);
  gcomp_codec_spec(c, again, sizeof again);
  assert_string_equal(again, want);
  gcomp_codec_destroy(c);
}

static void test_valid_specs_and_canonical_forms(void **state) {
  canonical("none", "none");
  canonical("none+ef", "none+ef:dtype=fp32");
  canonical("none+ef:dtype=fp32", "none+ef:dtype=fp32");
  canonical("none+zstd", "none+zstd:level=1,planes=exp");
  canonical("none+zstd:level=19", "none+zstd:level=19,planes=exp");
  canonical("none+zstd:planes=all", "none+zstd:level=1,planes=all");
  canonical("none+zstd:planes=all,level=3", "none+zstd:level=3,planes=all");
  canonical("none+igzip", "none+igzip:level=1,planes=exp");
  canonical("none+igzip:level=0", "none+igzip:level=0,planes=exp");
  canonical("none+igzip:level=3,planes=all", "none+igzip:level=3,planes=all");
  canonical("none+ef+igzip:level=2", "none+ef:dtype=fp32+igzip:level=2,planes=exp");
  canonical("none+ef:dtype=fp32+zstd:level=1,planes=exp",
            "none+ef:dtype=fp32+zstd:level=1,planes=exp");
  /* ef momentum 0 is plain error feedback, on any kind, and is not printed (the canonical
   * form of every spec without momentum stays what it was) */
  canonical("none+ef:momentum=0", "none+ef:dtype=fp32");
}

/* ef:momentum (top-k only) and its masking switch, printed once momentum is set. */
static void test_ef_momentum_canonical(void **state) {
  const char *t = "topk:ratio=0.01,exact=0,values=fp32,seed=0";
  char in[256], want[256];
  const char *cases[][2] = {
      {"+ef:momentum=0.9", "+ef:dtype=fp32,momentum=0.9,mask=1"},
      {"+ef:momentum=0.9,mask=1", "+ef:dtype=fp32,momentum=0.9,mask=1"},
      {"+ef:mask=0,momentum=0.95", "+ef:dtype=fp32,momentum=0.95,mask=0"},
      {"+ef:momentum=0.5,dtype=bf16", "+ef:dtype=bf16,momentum=0.5,mask=1"},
      {"+ef:momentum=0.123456789", "+ef:dtype=fp32,momentum=0.123456789,mask=1"},
      {"+ef:momentum=9e-1", "+ef:dtype=fp32,momentum=0.9,mask=1"},
      {"+ef:momentum=0", "+ef:dtype=fp32"},
      {"+ef:momentum=0.9+zstd", "+ef:dtype=fp32,momentum=0.9,mask=1+zstd:level=1,planes=exp"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    snprintf(in, sizeof in, "topk:ratio=0.01%s", cases[i][0]);
    snprintf(want, sizeof want, "%s%s", t, cases[i][1]);
    canonical(in, want);
  }
  gcomp_spec s;
  assert_int_equal(gcomp_spec_parse("topk+ef:momentum=0.9,mask=0", &s), GCOMP_OK);
  assert_true(s.ef_momentum == 0.9 && s.ef_mask == 0);
  assert_int_equal(gcomp_spec_parse("topk+ef:momentum=0.9", &s), GCOMP_OK);
  assert_int_equal(s.ef_mask, 1);
  assert_int_equal(gcomp_spec_parse("topk+ef", &s), GCOMP_OK);
  assert_true(s.ef_momentum == 0 && s.ef_mask == 0);
}

/* Kinds other engineers register: their canonical forms must be fixed points too. */
static void test_other_kinds_round_trip(void **state) {
  const char *specs[] = {"fp16", "bf16", "fp16+zstd", "bf16+ef+igzip:planes=all",
                         "topk:ratio=0.01", "topk:ratio=0.01+ef+zstd:level=3"};
  int ran = 0;
  for (size_t i = 0; i < sizeof specs / sizeof *specs; i++) {
    gcomp_spec s, t;
    if (gcomp_spec_parse(specs[i], &s) != GCOMP_OK) {
      print_message("skipping '%s': %s\n", specs[i], gcomp_last_error());
      continue;
    }
    ran++;
    char a[512], b[512];
    gcomp_spec_print(&s, a, sizeof a);
    assert_int_equal(gcomp_spec_parse(a, &t), GCOMP_OK);
    gcomp_spec_print(&t, b, sizeof b);
    assert_string_equal(a, b);
    assert_memory_equal(&t.cfg, &s.cfg, sizeof s.cfg);
  }
  print_message("%d of %zu other-kind specs exercised\n", ran,
                sizeof specs / sizeof *specs);
}

/* The exact detail for each way a spec can be wrong (the "[file:line]" suffix aside). */
static void refused(const char *spec, const char *want) {
  gcomp_spec s;
  int st = gcomp_spec_parse(spec, &s);
  if (st != GCOMP_ERR_INVALID) fail_msg("'%s' gave %d, expected GCOMP_ERR_INVALID", spec, st);
  const char *got = gcomp_last_error();
  size_t n = strlen(want);
  if (strncmp(got, want, n) != 0 || got[n] != ' ' || got[n + 1] != '[')
    fail_msg("'%s':\n  got  '%s'\n  want '%s [file:line]'", spec, got, want);
  /* gcomp_codec_create reports the same detail and leaves *out NULL */
  gcomp_codec *c = (gcomp_codec *)&s;
  assert_int_equal(gcomp_codec_create(spec, &c), GCOMP_ERR_INVALID);
  assert_null(c);
  assert_int_equal(strncmp(gcomp_last_error(), want, n), 0);
}

static void test_invalid_specs_exact_messages(void **state) {
  const char *names = gcomp_kind_names();
  char want[1024];
  /* whole-spec problems */
  snprintf(want, sizeof want, "codec spec is empty (valid codecs: %s)", names);
  refused("", want);
  refused("none + ef", "codec spec 'none + ef' contains white space");
  refused("none\t", "codec spec 'none\t' contains white space");
  char long_spec[600];
  memset(long_spec, 'a', sizeof long_spec - 1);
  long_spec[sizeof long_spec - 1] = '\0';
  refused(long_spec, "codec spec is 599 characters long (limit 511)");
  /* the codec */
  snprintf(want, sizeof want, "codec spec 'fp61': unknown codec 'fp61' (valid: %s)", names);
  refused("fp61", want);
  snprintf(want, sizeof want, "codec spec ':x=1': the codec name is empty (valid: %s)", names);
  refused(":x=1", want);
  snprintf(want, sizeof want, "codec spec '+zstd': the codec name is empty (valid: %s)", names);
  refused("+zstd", want);
  refused("none:", "codec spec 'none:': 'none:' is followed by no parameters");
  refused("none:x=1", "codec spec 'none:x=1': none: unknown parameter 'x' (none takes no parameters)");
  /* stages */
  refused("none+", "codec spec 'none+': empty stage name (valid: ef, zstd, igzip)");
  refused("none++zstd", "codec spec 'none++zstd': empty stage name (valid: ef, zstd, igzip)");
  refused("none+lz4", "codec spec 'none+lz4': unknown stage 'lz4' (valid: ef, zstd, igzip)");
  refused("none+ZSTD", "codec spec 'none+ZSTD': unknown stage 'ZSTD' (valid: ef, zstd, igzip)");
  refused("none+none",
          "codec spec 'none+none': 'none' is a codec, not a stage: only one codec per spec, first");
  refused("none+ef+ef", "codec spec 'none+ef+ef': '+ef' appears twice");
  refused("none+zstd+ef",
          "codec spec 'none+zstd+ef': '+ef' must come before the lossless stage '+zstd'");
  refused("none+zstd+igzip",
          "codec spec 'none+zstd+igzip': a second lossless stage '+igzip' (one at most)");
  /* parameters: shape */
  refused("none+zstd:level", "codec spec 'none+zstd:level': zstd: parameter 'level' needs a value (level=...)");
  refused("none+zstd:level=", "codec spec 'none+zstd:level=': zstd: parameter 'level' has an empty value");
  refused("none+zstd:=3", "codec spec 'none+zstd:=3': zstd: empty parameter name before '=3'");
  refused("none+zstd:", "codec spec 'none+zstd:': 'zstd:' is followed by no parameters");
  refused("none+zstd:lvl=1", "codec spec 'none+zstd:lvl=1': zstd: unknown parameter 'lvl' (valid: level, planes)");
  refused("none+igzip:speed=1", "codec spec 'none+igzip:speed=1': igzip: unknown parameter 'speed' (valid: level, planes)");
  refused("none+ef:x=1",
          "codec spec 'none+ef:x=1': ef: unknown parameter 'x' (valid: dtype, momentum, mask)");
  /* parameters: values */
  refused("none+zstd:level=0", "codec spec 'none+zstd:level=0': zstd: level='0' is out of range [1, 19]");
  refused("none+zstd:level=20", "codec spec 'none+zstd:level=20': zstd: level='20' is out of range [1, 19]");
  refused("none+zstd:level=-1", "codec spec 'none+zstd:level=-1': zstd: level='-1' is not a non-negative integer");
  refused("none+zstd:level=1.5", "codec spec 'none+zstd:level=1.5': zstd: level='1.5' is not a non-negative integer");
  refused("none+zstd:level=fast", "codec spec 'none+zstd:level=fast': zstd: level='fast' is not a non-negative integer");
  refused("none+igzip:level=4", "codec spec 'none+igzip:level=4': igzip: level='4' is out of range [0, 3]");
  refused("none+zstd:planes=mantissa", "codec spec 'none+zstd:planes=mantissa': zstd: planes='mantissa' is not one of exp|all");
  refused("none+igzip:planes=", "codec spec 'none+igzip:planes=': igzip: parameter 'planes' has an empty value");
  refused("none+ef:dtype=fp8", "codec spec 'none+ef:dtype=fp8': ef: dtype='fp8' is not one of fp32|bf16");
  refused("none+zstd:level=1,", "codec spec 'none+zstd:level=1,': zstd: empty parameter (a stray ',')");
  refused("none+zstd:,level=1", "codec spec 'none+zstd:,level=1': zstd: empty parameter (a stray ',')");
  refused("none+zstd:level=1,,planes=all",
          "codec spec 'none+zstd:level=1,,planes=all': zstd: empty parameter (a stray ',')");
  refused("none+zstd:level=2,level=5",
          "codec spec 'none+zstd:level=2,level=5': zstd: parameter 'level' is given twice");
  refused("none+ef:dtype=fp32,dtype=fp32",
          "codec spec 'none+ef:dtype=fp32,dtype=fp32': ef: parameter 'dtype' is given twice");
  refused("none+zstd:level=1=2", "codec spec 'none+zstd:level=1=2': zstd: level='1=2' is not a non-negative integer");
  /* ef momentum */
  refused("topk+ef:momentum=1", "codec spec 'topk+ef:momentum=1': ef: momentum='1' is out of range [0, 1)");
  refused("topk+ef:momentum=-0.1",
          "codec spec 'topk+ef:momentum=-0.1': ef: momentum='-0.1' is out of range [0, 1)");
  /* the velocity is fp32: values that round to 1 or to 0 there are refused */
  refused("topk+ef:momentum=0.99999999",
          "codec spec 'topk+ef:momentum=0.99999999': ef: momentum='0.99999999' rounds to 1 in fp32, where the velocity is kept");
  refused("topk+ef:momentum=1e-50",
          "codec spec 'topk+ef:momentum=1e-50': ef: momentum='1e-50' rounds to 0 in fp32, where the velocity is kept");
  gcomp_spec ok;
  assert_int_equal(gcomp_spec_parse("topk+ef:momentum=0.99999994", &ok), GCOMP_OK);
  refused("topk+ef:momentum=fast",
          "codec spec 'topk+ef:momentum=fast': ef: momentum='fast' is not a number");
  refused("topk+ef:momentum=nan", "codec spec 'topk+ef:momentum=nan': ef: momentum='nan' is not a number");
  refused("topk+ef:momentum=0.9,mask=2",
          "codec spec 'topk+ef:momentum=0.9,mask=2': ef: mask='2' is not one of 0|1");
  refused("topk+ef:momentum=0.9,momentum=0.5",
          "codec spec 'topk+ef:momentum=0.9,momentum=0.5': ef: parameter 'momentum' is given twice");
  refused("topk+ef:mask=1",
          "codec spec 'topk+ef:mask=1': ef: mask=1 needs momentum=M (it masks the momentum of sent values)");
  refused("topk+ef:momentum=0,mask=0",
          "codec spec 'topk+ef:momentum=0,mask=0': ef: mask=0 needs momentum=M (it masks the momentum of "
          "sent values)");
  refused("fp16+ef:momentum=0.9",
          "codec spec 'fp16+ef:momentum=0.9': ef: momentum=0.9 is momentum correction for sparsifying "
          "codecs (topk); 'fp16' sends every value every step: keep the momentum in the optimizer");
  refused("none+ef:momentum=0.5",
          "codec spec 'none+ef:momentum=0.5': ef: momentum=0.5 is momentum correction for sparsifying "
          "codecs (topk); 'none' sends every value every step: keep the momentum in the optimizer");
}

static void test_null_and_truncated_print(void **state) {
  gcomp_spec s;
  assert_int_equal(gcomp_spec_parse(NULL, &s), GCOMP_ERR_INVALID);
  assert_int_equal(gcomp_spec_parse("none", NULL), GCOMP_ERR_INVALID);
  assert_int_equal(gcomp_spec_parse("none+ef+zstd:planes=all", &s), GCOMP_OK);
  const char *full = "none+ef:dtype=fp32+zstd:level=1,planes=all";
  char buf[64];
  for (size_t n = 0; n <= strlen(full) + 1; n++) {
    memset(buf, 'x', sizeof buf);
    size_t need = gcomp_spec_print(&s, buf, n);
    assert_int_equal(need, strlen(full));   /* like snprintf: the length it needs */
    if (n) {
      assert_int_equal(strlen(buf), n - 1 < need ? n - 1 : need);
      assert_int_equal(strncmp(buf, full, strlen(buf)), 0);
    }
    assert_int_equal(buf[n < sizeof buf ? n : 0] == 'x' || n == 0, 1);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_valid_specs_and_canonical_forms),
      cmocka_unit_test(test_other_kinds_round_trip),
      cmocka_unit_test(test_ef_momentum_canonical),
      cmocka_unit_test(test_invalid_specs_exact_messages),
      cmocka_unit_test(test_null_and_truncated_print),
  };
  return cmocka_run_group_tests_name("spec", tests, NULL, NULL);
}
