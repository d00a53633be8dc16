/* What planners ask of a codec instead of reading its spec text: gcomp_codec_describe and
 * gcomp_codec_spec_with (public), and the typed compare, wire identity, clone and second
 * stage reduce/ uses; and the planner's table found by the typed compare. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "codec_impl.h"
#include "comm_impl.h"
#include "test_hooks.h"
#include "transport.h"

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

/* Codecs compare by their parsed fields: written differently, the same spec is the same
 * codec; any parameter apart, they differ. The canonical text is the reference: equal
 * exactly when the typed compare says so (but for -0, which prints apart and means 0). */
static int text_same(const gcomp_codec *a, const gcomp_codec *b) {
  char x[256], y[256];
  gcomp_codec_spec(a, x, sizeof x);
  gcomp_codec_spec(b, y, sizeof y);
  return strcmp(x, y) == 0;
}

static void test_same(void **state) {
  static const char *const same[][2] = {
      {"fp16", "fp16:round=nearest,scale=auto"},
      {"bf16:round=stochastic", "bf16:seed=0,round=stochastic"},
      {"topk", "topk:seed=0,values=fp32,exact=0,ratio=0.01"},
      {"topk:seed=3,ratio=0.05", "topk:ratio=5e-2,seed=3"},
      {"topk:k=100,warmup=0", "topk:k=100"},
      {"quant", "quant:round=nearest,bucket=512,bits=4"},
      {"quant:round=stochastic,seed=7", "quant:seed=7,round=stochastic"},
      {"sign", "sign:bucket=512"},
      {"test_biased", "test_biased:bits=7,drop=0.1"},
      {"bf16+ef", "bf16+ef:dtype=fp32"},
      {"topk+ef", "topk+ef:momentum=0"},
      {"topk+ef:momentum=0.9", "topk+ef:mask=1,momentum=0.9"},
      {"none+zstd", "none+zstd:planes=exp,level=1"},
      {"fp16+ef:dtype=bf16+igzip:level=2",
       "fp16:scale=auto+ef:dtype=bf16+igzip:planes=exp,level=2"},
  };
  static const char *const other[][2] = {
      {"bf16", "fp16"},
      {"fp16", "fp16:scale=none"},
      {"fp16", "fp16:round=stochastic"},
      {"bf16", "bf16:round=stochastic"},
      {"topk:ratio=0.01", "topk:ratio=0.02"},
      {"topk:k=10", "topk:k=11"},
      {"topk:k=10", "topk:ratio=0.01"},
      {"topk", "topk:exact=1"},
      {"topk", "topk:values=bf16"},
      {"topk:values=fp16", "topk:values=bf16"},
      {"topk", "topk:warmup=5"},
      {"quant", "quant:bits=8"},
      {"quant", "quant:bucket=1024"},
      {"quant", "quant:round=stochastic"},
      {"sign", "sign:bucket=64"},
      {"test_biased", "test_biased:drop=0.2"},
      {"test_biased", "test_biased:bits=3"},
      {"bf16", "bf16+ef"},
      {"bf16+ef", "bf16+ef:dtype=bf16"},
      {"topk+ef:momentum=0.9", "topk+ef:momentum=0.8"},
      {"topk+ef:momentum=0.9", "topk+ef:momentum=0.9,mask=0"},
      {"none", "none+zstd"},
      {"none+zstd", "none+igzip"},
      {"none+zstd", "none+zstd:level=3"},
      {"none+zstd", "none+zstd:planes=all"},
      {"sign+ef+zstd", "sign+zstd"},
  };
  enum { NSAME = sizeof same / sizeof *same, NOTHER = sizeof other / sizeof *other };
  for (size_t i = 0; i < NSAME + NOTHER; i++) {
    const char *const *pair = i < NSAME ? same[i] : other[i - NSAME];
    gcomp_codec *x = make(pair[0]), *y = make(pair[1]);
    int want = i < NSAME;
    if (gcomp_codec_same(x, y) != want || gcomp_codec_same(y, x) != want ||
        (gcomp_codec_wire_id(x) == gcomp_codec_wire_id(y)) != want || text_same(x, y) != want)
      fail_msg("'%s' and '%s': same %d, wire ids %s, text %s; want %s", pair[0], pair[1],
               gcomp_codec_same(x, y), gcomp_codec_wire_id(x) == gcomp_codec_wire_id(y)
               ? "equal" : "apart", text_same(x, y) ? "equal" : "apart", want ? "same" : "apart");
    assert_true(gcomp_codec_same(x, x));
    gcomp_codec_destroy(x), gcomp_codec_destroy(y);
  }
  /* the two zeros mean the same drop rate, though they print apart */
  gcomp_codec *z = make("test_biased:drop=0"), *m = make("test_biased:drop=-0");
  assert_true(gcomp_codec_same(z, m));
  assert_true(gcomp_codec_wire_id(z) == gcomp_codec_wire_id(m));
  gcomp_codec_destroy(z), gcomp_codec_destroy(m);
  /* NULL is "none" on the wire, but the same as no codec but NULL */
  gcomp_codec *none = make("none");
  assert_true(gcomp_codec_same(NULL, NULL));
  assert_false(gcomp_codec_same(none, NULL) || gcomp_codec_same(NULL, none));
  assert_true(gcomp_codec_wire_id(NULL) == gcomp_codec_wire_id(none));
  /* a clone is the same codec */
  gcomp_codec *c = make("topk:ratio=0.05,seed=9+ef:momentum=0.9+zstd"), *k = NULL;
  assert_int_equal(gcomp_codec_clone(c, &k), GCOMP_OK);
  assert_true(gcomp_codec_same(c, k) && text_same(c, k));
  assert_int_equal(gcomp_codec_clone(NULL, &k), GCOMP_ERR_INVALID);
  gcomp_codec_destroy(c), gcomp_codec_destroy(k), gcomp_codec_destroy(none);
}

/* Ranks may pick different seeds, nothing else: the wire identity leaves the seed out (the
 * planner's entries do not: the seed is part of the spec a caller gave) */
static void test_wire_identity(void **state) {
  const char *seeded[][2] = {{"bf16:round=stochastic,seed=1", "bf16:round=stochastic,seed=9"},
                             {"fp16:round=stochastic", "fp16:round=stochastic,seed=2"},
                             {"topk:ratio=0.01,seed=4+ef", "topk:ratio=0.01,seed=5+ef"},
                             {"quant:round=stochastic,seed=1+zstd",
                              "quant:round=stochastic,seed=2+zstd"}};
  for (size_t i = 0; i < sizeof seeded / sizeof *seeded; i++) {
    gcomp_codec *x = make(seeded[i][0]), *y = make(seeded[i][1]);
    if (gcomp_codec_wire_id(x) != gcomp_codec_wire_id(y) || gcomp_codec_same(x, y))
      fail_msg("'%s' and '%s': wire ids %llx %llx, same %d", seeded[i][0], seeded[i][1],
               (unsigned long long)gcomp_codec_wire_id(x),
               (unsigned long long)gcomp_codec_wire_id(y), gcomp_codec_same(x, y));
    gcomp_codec_destroy(x), gcomp_codec_destroy(y);
  }
}

/* The second stage, made from the parsed spec, is the codec its canonical text makes:
 * equal field by field, in text and on the wire */
static void test_second_stage(void **state) {
  const char *cases[][2] = {
      {"bf16+ef", "bf16"},
      {"fp16:scale=none+ef:dtype=bf16+zstd", "fp16:scale=none,round=nearest+zstd:level=1"},
      {"topk:ratio=0.01+ef", "none"},
      {"topk:k=5,values=bf16+ef:momentum=0.9+zstd", "none"},
      {"bf16", "bf16"},
      {"bf16:round=stochastic,seed=5+ef", "bf16:round=stochastic,seed=5"},
      {"quant:bits=8+ef:dtype=bf16+igzip:level=2", "quant:bits=8+igzip:level=2"},
      {"sign:bucket=64+ef:dtype=bf16", "sign:bucket=64+ef:dtype=bf16"},   /* second_ef */
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    gcomp_codec *c = make(cases[i][0]), *s = NULL, *w = make(cases[i][1]);
    assert_int_equal(gcomp_codec_second_stage(c, &s), GCOMP_OK);
    char got[256], want[256];
    gcomp_codec_spec(s, got, sizeof got);
    gcomp_codec_spec(w, want, sizeof want);
    if (!gcomp_codec_same(s, w) || strcmp(got, want) ||
        gcomp_codec_wire_id(s) != gcomp_codec_wire_id(w))
      fail_msg("second stage of '%s': '%s', want '%s' (same %d)", cases[i][0], got, want,
               gcomp_codec_same(s, w));
    gcomp_codec_info info = {.struct_size = sizeof info}, winfo = info;
    assert_int_equal(gcomp_codec_describe(s, &info), GCOMP_OK);
    assert_int_equal(gcomp_codec_describe(w, &winfo), GCOMP_OK);
    assert_int_equal(info.error_feedback, winfo.error_feedback);
    assert_true(info.ef_momentum == winfo.ef_momentum && info.ef_mask == winfo.ef_mask);
    gcomp_codec_destroy(c), gcomp_codec_destroy(s), gcomp_codec_destroy(w);
  }
}

/* The planner's table: one entry per spec however it was written, a new one for any other
 * spec (a seed included), each with its own codec to compare with */
static void test_plan_lookup(void **state) {
  gcomp_transport *t[1];
  assert_int_equal(gcomp_loopback_for_testing(1, NULL, t), GCOMP_OK);
  gcomp_comm *comm = NULL;
  assert_int_equal(gcomp_comm_from_transport(t[0], 1, &comm), GCOMP_OK);
  const char *specs[] = {"bf16+ef", "bf16+ef:dtype=fp32", "bf16", "topk:seed=1,ratio=0.1",
                         "topk:ratio=0.1,seed=1", "topk:ratio=0.1,seed=2"};
  const int entry[] = {0, 0, 1, 2, 2, 3};
  gcomp_codec_entry *got[6];
  for (int i = 0; i < 6; i++) {
    gcomp_codec *c = make(specs[i]);
    assert_int_equal(gcomp_codec_plan(comm, c, &got[i]), GCOMP_OK);
    assert_true(got[i] == comm->codecs[entry[i]] && comm->ncodecs == entry[i] + 1);
    assert_true(got[i]->codec != c && gcomp_codec_same(got[i]->codec, c));
    gcomp_codec_destroy(c);   /* the entry holds its own */
  }
  assert_string_equal(got[0]->spec, "bf16:round=nearest+ef:dtype=fp32");
  assert_true(got[0]->ratio > 0 && got[0]->spb > 0 && !got[0]->sparse && got[3]->sparse);
  gcomp_comm_destroy(comm);
}

/* A collective other than allreduce agrees on the call's codec by its wire identity first:
 * other codecs fail on every rank, naming the codec; other seeds only are one call */
typedef struct {
  gcomp_transport *t;
  const char *spec;
  int st;
  char error[512];
} rs_job;

static void *rs_main(void *arg) {
  rs_job *j = arg;
  gcomp_comm *comm = NULL;
  gcomp_codec *codec = NULL;
  float in[8] = {1, 2, 3, 4, 5, 6, 7, 8}, out[4];
  j->st = gcomp_comm_from_transport(j->t, 1, &comm);
  if (j->st == GCOMP_OK) j->st = gcomp_codec_create(j->spec, &codec);
  if (j->st == GCOMP_OK)
    j->st = gcomp_reduce_scatter(comm, in, out, 4, GCOMP_FLOAT32, GCOMP_SUM, codec, 1);
  snprintf(j->error, sizeof j->error, "%s", gcomp_last_error());
  gcomp_codec_destroy(codec);
  gcomp_comm_destroy(comm);
  return NULL;
}

static void test_call_codec_agreement(void **state) {
  const char *pairs[][2] = {{"bf16", "fp16"},
                            {"topk:ratio=0.1+ef", "topk:ratio=0.2+ef"},
                            {"bf16:round=stochastic,seed=1", "bf16:round=stochastic,seed=2"},
                            {"quant+ef", "quant:bits=4,bucket=512+ef:dtype=fp32"}};
  for (int p = 0; p < 4; p++) {
    gcomp_transport *t[2];
    assert_int_equal(gcomp_loopback_for_testing(2, NULL, t), GCOMP_OK);
    rs_job j[2] = {{.t = t[0], .spec = pairs[p][0]}, {.t = t[1], .spec = pairs[p][1]}};
    pthread_t th[2];
    for (int r = 0; r < 2; r++) assert_int_equal(pthread_create(&th[r], NULL, rs_main, &j[r]), 0);
    for (int r = 0; r < 2; r++) pthread_join(th[r], NULL);
    for (int r = 0; r < 2; r++) {
      int apart = p < 2;
      if (apart ? j[r].st != GCOMP_ERR_INVALID || !strstr(j[r].error, "disagree on the codec")
                : j[r].st != GCOMP_OK)
        fail_msg("'%s' and '%s': rank %d: %d '%s'", pairs[p][0], pairs[p][1], r, j[r].st,
                 j[r].error);
    }
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_describe),
      cmocka_unit_test(test_spec_with),
      cmocka_unit_test(test_same),
      cmocka_unit_test(test_wire_identity),
      cmocka_unit_test(test_second_stage),
      cmocka_unit_test(test_plan_lookup),
      cmocka_unit_test(test_call_codec_agreement),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
