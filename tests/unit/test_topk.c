/* topk: parameters, filter kernels (AVX2 vs base), kept-count tolerance, exact selection
 * against a sort, determinism, round trips and hostile payloads. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "test_env.h"

#include "codec_impl.h"
#include "frame.h"
#include "gcomp.h"
#include "topk.h"
#include "test_hooks.h"

/* ---- data ---------------------------------------------------------------------------- */
static uint64_t rng_state;
static uint64_t rnd(void) {
  uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
static double unif(void) { return ((double)(rnd() >> 11) + 0.5) / 9007199254740992.0; }
static double gauss(void) { return sqrt(-2 * log(unif())) * cos(2 * M_PI * unif()); }

enum { D_GAUSS, D_HEAVY, D_TIES, D_ZEROS, D_RAMP, D_BIMODAL, D_COUNT };
static const char *const dist_names[] = {"gaussian", "heavy-tailed", "many ties", "mostly zeros",
                                         "ramp", "bimodal"};

static void fill(float *x, size_t n, int dist, uint64_t seed) {
  rng_state = seed;
  for (size_t i = 0; i < n; i++) {
    switch (dist) {
    case D_GAUSS: x[i] = (float)(gauss() * 1e-3); break;
    case D_HEAVY: x[i] = (float)(1e-3 * tan(M_PI * (unif() - 0.5))); break;   /* Cauchy */
    case D_TIES: x[i] = (float)((int)(rnd() % 7) - 3); break;                /* -3..3 */
    case D_ZEROS: x[i] = rnd() % 100 == 0 ? (float)gauss() : 0.0f; break;    /* 99% zeros */
    case D_RAMP: x[i] = (float)i * (i % 2 ? 1.0f : -1.0f); break;            /* sorted */
    case D_BIMODAL: x[i] = (float)(gauss() * (i < n / 2 ? 1e-6 : 1.0)); break;
    }
  }
}

static uint32_t key_of(float x) {
  uint32_t b;
  memcpy(&b, &x, 4);
  return b & 0x7fffffffu;
}

static int have_avx2(void) { return gcomp_isa_best_level(gcomp_cpu_detect()) >= GCOMP_ISA_AVX2; }

static void set_isa(const char *isa) {
  setenv("GCOMP_ISA", isa, 1);
  assert_int_equal(gcomp_reinit_for_testing(), GCOMP_OK);
}

/* ---- helpers around the codec ---------------------------------------------------------- */
typedef struct {
  uint8_t *frame;
  size_t len;
} enc_out;

static enc_out encode(gcomp_codec *c, uint64_t key, const float *x, size_t n) {
  enc_out o;
  size_t cap = gcomp_codec_max_encoded_size(c, n);
  o.frame = malloc(cap);
  int s = gcomp_encode(c, key, x, n, o.frame, cap, &o.len);
  if (s != GCOMP_OK) fail_msg("encode of %zu values: %s", n, gcomp_last_error());
  return o;
}

static float *decode(gcomp_codec *c, enc_out o, size_t n) {
  float *y = malloc((n ? n : 1) * sizeof *y);
  for (size_t i = 0; i < n; i++) y[i] = 12345.0f;   /* decode must overwrite everything */
  int s = gcomp_decode(c, o.frame, o.len, y, n);
  if (s != GCOMP_OK) fail_msg("decode: %s", gcomp_last_error());
  return y;
}

static gcomp_codec *make(const char *spec) {
  gcomp_codec *c;
  if (gcomp_codec_create(spec, &c) != GCOMP_OK) fail_msg("spec '%s': %s", spec, gcomp_last_error());
  return c;
}

/* ---- parameters ------------------------------------------------------------------------ */
static void expect_bad(const char *spec, const char *fragment) {
  gcomp_codec *c = NULL;
  assert_int_equal(gcomp_codec_create(spec, &c), GCOMP_ERR_INVALID);
  if (!strstr(gcomp_last_error(), fragment))
    fail_msg("spec '%s': error '%s' lacks '%s'", spec, gcomp_last_error(), fragment);
}

static void test_params(void **state) {
  expect_bad("topk:ratio=0", "must be > 0");
  expect_bad("topk:ratio=1.5", "out of range");
  expect_bad("topk:ratio=-0.1", "out of range");
  expect_bad("topk:k=0", "out of range");
  expect_bad("topk:ratio=0.01,k=5", "not both");
  expect_bad("topk:k=5,ratio=0.01", "not both");
  expect_bad("topk:values=fp8", "values='fp8' is not one of fp32|bf16|fp16");
  expect_bad("topk:exact=2", "out of range");
  expect_bad("topk:ratoi=0.1", "unknown parameter 'ratoi' (valid: ratio, k, exact, values, seed, "
                                   "warmup)");
  const char *specs[][2] = {
      {"topk", "topk:ratio=0.01,exact=0,values=fp32,seed=0"},
      {"topk:k=7", "topk:k=7,exact=0,values=fp32,seed=0"},
      {"topk:ratio=0.001,exact=1,values=bf16,seed=9+ef",
       "topk:ratio=0.001,exact=1,values=bf16,seed=9+ef:dtype=fp32"},
      {"topk:ratio=0.3333333333333333", "topk:ratio=0.3333333333333333,exact=0,values=fp32,seed=0"},
  };
  for (size_t i = 0; i < sizeof specs / sizeof *specs; i++) {
    gcomp_codec *c = make(specs[i][0]);
    char buf[256];
    gcomp_codec_spec(c, buf, sizeof buf);
    assert_string_equal(buf, specs[i][1]);
    gcomp_codec *d = make(buf);   /* canonical form reads back as itself */
    char buf2[256];
    gcomp_codec_spec(d, buf2, sizeof buf2);
    assert_string_equal(buf, buf2);
    gcomp_codec_destroy(c);
    gcomp_codec_destroy(d);
  }
}

/* ---- kernels: AVX2 against base --------------------------------------------------------- */
typedef struct {
  uint8_t *map;
  size_t map_len;
  void *p;
} guarded;

/* len bytes ending exactly at a PROT_NONE page. */
static guarded guard_alloc(size_t len) {
  guarded g;
  size_t page = (size_t)sysconf(_SC_PAGESIZE), pages = (len + page - 1) / page;
  g.map_len = (pages + 1) * page;
  g.map = mmap(NULL, g.map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  assert_true(g.map != MAP_FAILED);
  assert_int_equal(mprotect(g.map + pages * page, page, PROT_NONE), 0);
  g.p = g.map + pages * page - len;
  return g;
}
static void guard_free(guarded g) { munmap(g.map, g.map_len); }

static void fill_kernel_input(float *x, size_t n, uint64_t seed) {
  rng_state = seed;
  for (size_t i = 0; i < n; i++) {
    uint64_t r = rnd();
    switch (r % 16) {
    case 0: x[i] = NAN; break;
    case 1: x[i] = (r & 16) ? INFINITY : -INFINITY; break;
    case 2: x[i] = (r & 16) ? 0.0f : -0.0f; break;
    case 3: x[i] = 1.0f; break;   /* ties with the threshold below */
    default: x[i] = (float)gauss(); break;
    }
  }
}

static void check_filter(const gcomp_topk_kernels *k, size_t n, size_t offset, uint32_t t) {
  /* input, residuals and outputs all end at guard pages: an over-read or over-write faults */
  guarded gx = guard_alloc((n + offset) * 4), gr = guard_alloc((n + offset) * 4);
  guarded gi = guard_alloc(n * 4), gv = guard_alloc(n * 4);
  float *x = (float *)gx.p + offset, *r = (float *)gr.p + offset;
  fill_kernel_input(x, n, n * 31 + offset);
  float *r0 = malloc((n + 1) * 4), *r1 = malloc((n + 1) * 4);
  fill_kernel_input(r, n, n * 77 + 5);
  for (size_t i = 0; i < n; i++) r[i] *= 0.5f;
  memcpy(r0, r, n * 4);
  uint32_t *ib = malloc((n + 1) * 4);
  float *vb = malloc((n + 1) * 4);
  /* plain filter */
  size_t cb = gcomp_topk_kernels_base.filter(x, n, t, 100, ib, vb);
  size_t ck = k->filter(x, n, t, 100, gi.p, gv.p);
  size_t expect = 0;
  for (size_t i = 0; i < n; i++) expect += key_of(x[i]) >= t;
  assert_int_equal(cb, expect);
  assert_int_equal(ck, cb);
  assert_memory_equal(gi.p, ib, cb * 4);
  assert_memory_equal(gv.p, vb, cb * 4);
  for (size_t j = 0; j < cb; j++) assert_true(key_of(vb[j]) >= t && ib[j] >= 100);
  /* fused error feedback */
  cb = gcomp_topk_kernels_base.filter_ef(x, r0, n, t, 0, ib, vb);
  memcpy(r1, r, n * 4);
  ck = k->filter_ef(x, r, n, t, 0, gi.p, gv.p);
  assert_int_equal(ck, cb);
  assert_memory_equal(gi.p, ib, cb * 4);
  assert_memory_equal(gv.p, vb, cb * 4);
  assert_memory_equal(r, r0, n * 4);
  /* and what the fused kernel means: x = g + r; sent -> 0, else x */
  for (size_t i = 0, j = 0; i < n; i++) {
    float xi = x[i] + r1[i];
    if (key_of(xi) >= t) {
      assert_int_equal(ib[j], i);
      assert_memory_equal(&vb[j], &xi, 4);
      assert_true(r0[i] == 0.0f);
      j++;
    } else {
      assert_memory_equal(&r0[i], &xi, 4);
    }
  }
  free(r0), free(r1), free(ib), free(vb);
  guard_free(gx), guard_free(gr), guard_free(gi), guard_free(gv);
}

static void test_kernels_differential(void **state) {
  const gcomp_topk_kernels *rows[] = {&gcomp_topk_kernels_base, &gcomp_topk_kernels_avx2,
                                       &gcomp_topk_kernels_avx512};
  gcomp_isa best = gcomp_isa_best_level(gcomp_cpu_detect());
  int nrows = best >= GCOMP_ISA_AVX512 ? 3 : best >= GCOMP_ISA_AVX2 ? 2 : 1;
  if (nrows == 1) print_message("no AVX2 on this CPU: checking the base kernels only\n");
  if (nrows == 2) print_message("no AVX-512 F/BW/VL on this CPU: avx512 kernels not tested\n");
  const uint32_t ts[] = {1, 0x3f800000u /* 1.0: ties */, 0x40000000u, GCOMP_TOPK_KEY_INF};
  for (int r = 0; r < nrows; r++)
    for (size_t t = 0; t < sizeof ts / sizeof *ts; t++) {
      for (size_t n = 0; n <= 257; n++) check_filter(rows[r], n, n % 8, ts[t]);
      check_filter(rows[r], 100003, 3, ts[t]);
    }
}

static void test_kth_key(void **state) {
  size_t m = 5000;
  uint32_t *k = malloc(m * 4), *tmp = malloc(m * 4), *sorted = malloc(m * 4);
  for (int round = 0; round < 3; round++) {
    rng_state = (uint64_t)round;
    for (size_t i = 0; i < m; i++)
      k[i] = round == 2 ? (uint32_t)(rnd() % 5) : (uint32_t)(rnd() & 0x7fffffffu);
    memcpy(sorted, k, m * 4);
    for (size_t i = 1; i < m; i++)   /* insertion sort, descending: an independent oracle */
      for (size_t j = i; j > 0 && sorted[j - 1] < sorted[j]; j--) {
        uint32_t t = sorted[j];
        sorted[j] = sorted[j - 1];
        sorted[j - 1] = t;
      }
    const size_t rs[] = {1, 2, 17, 2500, 4999, 5000};
    for (size_t i = 0; i < sizeof rs / sizeof *rs; i++)
      assert_int_equal(gcomp_topk_kth_key(k, m, rs[i], tmp), sorted[rs[i] - 1]);
  }
  free(k), free(tmp), free(sorted);
}

/* ---- selection -------------------------------------------------------------------------- */
/* Checks a decoded frame is a top set of x: every sent value equals x there, and no dropped
 * magnitude exceeds a kept one; returns the kept count. */
static size_t check_top_set(const float *x, const float *y, size_t n) {
  size_t kept = 0;
  uint32_t min_kept = 0xffffffffu, max_dropped = 0;
  for (size_t i = 0; i < n; i++) {
    if (y[i] != 0.0f || isnan(y[i])) {
      if (memcmp(&x[i], &y[i], 4) != 0) fail_msg("index %zu: sent %g, input %g", i, y[i], x[i]);
      kept++;
      if (key_of(x[i]) < min_kept) min_kept = key_of(x[i]);
    } else if (key_of(x[i]) > max_dropped) {
      max_dropped = key_of(x[i]);
    }
  }
  if (kept && max_dropped > min_kept)
    fail_msg("dropped magnitude key %#x above kept key %#x", max_dropped, min_kept);
  return kept;
}

static void kept_count_sweep(void) {
  int codings_seen[3] = {0};
  const size_t n = 1 << 20;
  const double ratios[] = {1e-4, 1e-3, 1e-2, 0.1, 0.5};
  float *x = malloc(n * sizeof *x);
  for (int d = 0; d < D_COUNT; d++) {
    fill(x, n, d, 1000 + (uint64_t)d);
    size_t nnz = 0;
    for (size_t i = 0; i < n; i++) nnz += x[i] != 0.0f;
    for (size_t r = 0; r < sizeof ratios / sizeof *ratios; r++) {
      char spec[64];
      snprintf(spec, sizeof spec, "topk:ratio=%g", ratios[r]);
      gcomp_codec *c = make(spec);
      size_t k = (size_t)floor(ratios[r] * n + 0.5), want = k < nnz ? k : nnz;
      /* three calls: cold (sample), then warm (the last threshold as first guess) */
      for (int call = 0; call < 3; call++) {
        enc_out o = encode(c, 1, x, n);
        codings_seen[o.frame[GCOMP_FRAME_HEADER] % 3]++;
        float *y = decode(c, o, n);
        size_t kept = check_top_set(x, y, n);
        if ((double)kept < 0.9 * (double)want || (double)kept > 1.1 * (double)want)
          fail_msg("%s ratio %g call %d: kept %zu, k %zu (nonzeros %zu)", dist_names[d],
                   ratios[r], call, kept, k, nnz);
        free(y), free(o.frame);
      }
      gcomp_codec_destroy(c);
    }
  }
  free(x);
  /* both index codings were chosen somewhere in the sweep */
  assert_true(codings_seen[0] > 0 && codings_seen[1] > 0);
}

static void test_kept_count_tolerance(void **state) {
  set_isa("base");
  kept_count_sweep();
  if (have_avx2()) {
    set_isa("avx2");
    kept_count_sweep();
  }
  unsetenv("GCOMP_ISA");
  assert_int_equal(gcomp_reinit_for_testing(), GCOMP_OK);
}

/* A stale first guess: one codec (one state word) alternates tensors of very different
 * scales, and a tensor drifts by 2x per call. The count must hold every time. */
static void test_stale_threshold(void **state) {
  const size_t n = 200000;
  float *a = malloc(n * 4), *b = malloc(n * 4);
  fill(a, n, D_GAUSS, 5);
  fill(b, n, D_GAUSS, 6);
  for (size_t i = 0; i < n; i++) b[i] *= 1000.0f;
  gcomp_codec *c = make("topk:ratio=0.001");
  size_t k = 200;
  for (int call = 0; call < 12; call++) {
    float *x = call % 2 ? b : a;
    if (call >= 6)
      for (size_t i = 0; i < n; i++) a[i] *= 2.0f;
    enc_out o = encode(c, 0, x, n);
    float *y = decode(c, o, n);
    size_t kept = check_top_set(x, y, n);
    if (kept < 180 || kept > 220) fail_msg("call %d: kept %zu of k %zu", call, kept, k);
    free(y), free(o.frame);
  }
  gcomp_codec_destroy(c);
  free(a), free(b);
}

/* Data that fools the line sampler: the large values sit in one line per 64-line window,
 * at the same place in every window, so a sample sees a random number of them. Depending
 * on the seed the first cut is too high (a second pass must follow) or too low (the
 * candidates overflow and are trimmed on the way). Either way the count must hold. */
static void test_sample_misjudged(void **state) {
  const size_t n = 100000, k = 1000;
  float *x = malloc(n * sizeof *x);
  rng_state = 17;
  for (size_t i = 0; i < n; i++) {
    size_t line = i / 16;
    x[i] = (float)(gauss() * (line % 64 == 5 ? 1.0 : 1e-3));
  }
  for (uint64_t seed = 0; seed < 24; seed++) {
    char spec[64];
    snprintf(spec, sizeof spec, "topk:k=%zu,seed=%llu", k, (unsigned long long)seed);
    gcomp_codec *c = make(spec);
    enc_out o = encode(c, 0, x, n);
    float *y = decode(c, o, n);
    size_t kept = check_top_set(x, y, n);
    if (kept < 900 || kept > 1100) fail_msg("seed %llu: kept %zu of %zu", (unsigned long long)seed, kept, k);
    free(y), free(o.frame);
    gcomp_codec_destroy(c);
  }
  free(x);
}

/* The reference: sort by (|x| descending, index ascending), NaN/Inf first, zeros never. */
static const float *ref_x;
static int ref_cmp(const void *pa, const void *pb) {
  size_t a = *(const size_t *)pa, b = *(const size_t *)pb;
  uint32_t ka = key_of(ref_x[a]), kb = key_of(ref_x[b]);
  if (ka >= 0x7f800000u) ka = 0x7f800000u;   /* all non-finite rank alike, by index */
  if (kb >= 0x7f800000u) kb = 0x7f800000u;
  if (ka != kb) return ka > kb ? -1 : 1;
  return a < b ? -1 : a > b;
}

static void exact_case(const float *x, size_t n, size_t k, const char *what) {
  char spec[64];
  snprintf(spec, sizeof spec, "topk:k=%zu,exact=1", k);
  gcomp_codec *c = make(spec);
  enc_out o = encode(c, 0, x, n);
  float *y = decode(c, o, n);
  size_t *order = malloc(n * sizeof *order);
  for (size_t i = 0; i < n; i++) order[i] = i;
  ref_x = x;
  qsort(order, n, sizeof *order, ref_cmp);
  float *want = calloc(n, sizeof *want);
  size_t nonfinite = 0;
  for (size_t i = 0; i < n; i++) nonfinite += key_of(x[i]) >= 0x7f800000u;
  size_t take = k > nonfinite ? k : nonfinite;
  for (size_t j = 0; j < take && j < n && x[order[j]] != 0.0f; j++) want[order[j]] = x[order[j]];
  for (size_t i = 0; i < n; i++)
    if (memcmp(&want[i], &y[i], 4) != 0 && !(want[i] == 0 && y[i] == 0))
      fail_msg("%s, k=%zu: index %zu got %g want %g", what, k, i, y[i], want[i]);
  free(order), free(want), free(y), free(o.frame);
  gcomp_codec_destroy(c);
}

static void exact_sweep(void) {
  const size_t n = 100000;
  float *x = malloc(n * sizeof *x);
  const size_t ks[] = {1, 10, 100, 1000, 33333, 50000};
  for (int d = 0; d < D_COUNT; d++) {
    fill(x, n, d, 77 + (uint64_t)d);
    for (size_t i = 0; i < sizeof ks / sizeof *ks; i++) exact_case(x, n, ks[i], dist_names[d]);
  }
  /* beyond the whole-sample size (65536): the threshold comes from a sample */
  size_t big = 300000;
  float *xb = malloc(big * sizeof *xb);
  fill(xb, big, D_TIES, 3);
  exact_case(xb, big, 3000, "ties, sampled");
  fill(xb, big, D_GAUSS, 4);
  exact_case(xb, big, 300, "gaussian, sampled");
  exact_case(xb, big, 30000, "gaussian, sampled");
  /* non-finite values are always sent, even beyond k */
  fill(x, n, D_GAUSS, 8);
  for (size_t i = 0; i < 40; i++) x[i * 997] = i % 3 ? NAN : (i % 2 ? INFINITY : -INFINITY);
  exact_case(x, n, 10, "non-finite beyond k");
  exact_case(x, n, 100, "non-finite within k");
  free(x), free(xb);
}

static void test_exact_matches_sort(void **state) {
  set_isa("base");
  exact_sweep();
  if (have_avx2()) {
    set_isa("avx2");
    exact_sweep();
  }
  unsetenv("GCOMP_ISA");
  assert_int_equal(gcomp_reinit_for_testing(), GCOMP_OK);
}

static void test_deterministic(void **state) {
  const size_t n = 500000;
  float *x = malloc(n * sizeof *x);
  const char *specs[] = {"topk:ratio=0.001,seed=5", "topk:ratio=0.01,seed=5+ef",
                         "topk:ratio=0.001,exact=1,seed=5"};
  for (size_t s = 0; s < sizeof specs / sizeof *specs; s++) {
    gcomp_codec *a = make(specs[s]), *b = make(specs[s]);
    for (int step = 0; step < 4; step++) {
      fill(x, n, step % 2 ? D_HEAVY : D_GAUSS, 40 + (uint64_t)step);
      enc_out oa = encode(a, 3, x, n), ob = encode(b, 3, x, n);
      assert_int_equal(oa.len, ob.len);
      assert_memory_equal(oa.frame, ob.frame, oa.len);
      free(oa.frame), free(ob.frame);
    }
    gcomp_codec_destroy(a), gcomp_codec_destroy(b);
  }
  free(x);
}

/* ---- round trips ------------------------------------------------------------------------ */
static float ref_bf16(float x) {
  uint32_t b;
  memcpy(&b, &x, 4);
  if (isnan(x)) return x;
  b = (b + 0x7fffu + ((b >> 16) & 1)) & 0xffff0000u;
  memcpy(&x, &b, 4);
  return x;
}
/* fp16 round to nearest even, computed another way: scale by the quantum of x's binade
 * (exact in double) and let nearbyint (ties to even) round; beyond 65504 it saturates. */
static float ref_fp16(float x) {
  if (isnan(x) || isinf(x) || x == 0) return x;
  int e;
  frexp(x, &e);
  int q = (e - 1 < -14 ? -14 : e - 1) - 10;
  double y = ldexp(nearbyint(ldexp((double)x, -q)), q);
  if (fabs(y) > 65504.0) y = y > 0 ? 65504.0 : -65504.0;
  return (float)y;
}

static void roundtrip_case(const char *spec, const float *x, size_t n, float (*conv)(float),
                           int all_sent) {
  gcomp_codec *c = make(spec);
  enc_out o = encode(c, 0, x, n);
  float *y = decode(c, o, n);
  float *acc = malloc((n ? n : 1) * sizeof *acc);
  for (size_t i = 0; i < n; i++) acc[i] = (float)i * 0.5f;
  assert_int_equal(gcomp_decode_add(c, o.frame, o.len, acc, n), GCOMP_OK);
  for (size_t i = 0; i < n; i++) {
    float want = y[i] == 0.0f && !all_sent ? 0.0f : (conv ? conv(x[i]) : x[i]);
    if (memcmp(&want, &y[i], 4) != 0 && !(isnan(want) && isnan(y[i])) &&
        !(want == 0 && y[i] == 0))
      fail_msg("%s n=%zu index %zu: decoded %a, want %a (x %a)", spec, n, i, y[i], want, x[i]);
    float sum = (float)i * 0.5f + y[i];
    if (memcmp(&sum, &acc[i], 4) != 0 && !(isnan(sum) && isnan(acc[i])))
      fail_msg("%s: decode_add index %zu: %g, want %g", spec, i, acc[i], sum);
  }
  free(acc), free(y), free(o.frame);
  gcomp_codec_destroy(c);
}

static void test_roundtrips(void **state) {
  const size_t sizes[] = {0, 1, 2, 3, 15, 16, 17, 100, 1000, 70000};
  const char *specs[] = {"topk:ratio=0.1", "topk:ratio=0.1,values=bf16", "topk:ratio=0.1,values=fp16",
                         "topk:ratio=1", "topk:k=1", "topk:k=5,values=fp16", "topk:ratio=0.01+zstd"};
  float (*convs[])(float) = {NULL, ref_bf16, ref_fp16, NULL, NULL, ref_fp16, NULL};
  for (size_t z = 0; z < sizeof sizes / sizeof *sizes; z++) {
    size_t n = sizes[z];
    float *x = malloc((n ? n : 1) * sizeof *x);
    fill(x, n, D_HEAVY, n);
    for (size_t i = 0; i < n; i += 7) x[i] *= 1e5f;        /* fp16 saturation */
    for (size_t i = 3; i < n; i += 11) x[i] *= 1e-9f;      /* fp16 subnormals and underflow */
    if (n > 20) x[13] = NAN, x[19] = -INFINITY;
    for (size_t s = 0; s < sizeof specs / sizeof *specs; s++)
      roundtrip_case(specs[s], x, n, convs[s], strstr(specs[s], "ratio=1") != NULL);
    free(x);
  }
  /* every fp16 and bf16 conversion of a wide sweep, dense (k >= n) */
  size_t n = 1 << 16;
  float *x = malloc(n * sizeof *x);
  for (size_t i = 0; i < n; i++) {
    uint32_t b = (uint32_t)(i * 65521u) ^ ((uint32_t)i << 16);
    memcpy(&x[i], &b, 4);
    if (isnan(x[i])) x[i] = 1.0f;
  }
  roundtrip_case("topk:ratio=1,values=fp16", x, n, ref_fp16, 1);
  roundtrip_case("topk:ratio=1,values=bf16", x, n, ref_bf16, 1);
  free(x);
}

static void test_degenerate_inputs(void **state) {
  gcomp_codec *c = make("topk:ratio=0.01");
  /* all zeros: a valid frame with nothing in it */
  size_t n = 100000;
  float *x = calloc(n, sizeof *x);
  enc_out o = encode(c, 0, x, n);
  assert_true(o.len <= gcomp_frame_size(20));
  float *y = decode(c, o, n);
  for (size_t i = 0; i < n; i++) assert_true(y[i] == 0.0f);
  free(y), free(o.frame);
  /* n = 0 */
  o = encode(c, 0, x, 0);
  assert_int_equal(gcomp_decode(c, o.frame, o.len, NULL, 0), GCOMP_OK);
  assert_int_equal(gcomp_decode_add(c, o.frame, o.len, NULL, 0), GCOMP_OK);
  free(o.frame);
  /* NaN/Inf beyond k are all sent */
  for (size_t i = 0; i < 5000; i++) x[i * 20] = i % 2 ? NAN : INFINITY;
  o = encode(c, 0, x, n);
  y = decode(c, o, n);
  for (size_t i = 0; i < 5000; i++) assert_true(!isfinite(y[i * 20]));
  gcomp_codec_stats st = {.struct_size = sizeof st};
  gcomp_codec_get_stats(c, &st);
  assert_int_equal(st.nonfinite_inputs, 5000);
  free(y), free(o.frame);
  /* all NaN: every value is sent (as gaps of 0 bits, no larger than dense) */
  for (size_t i = 0; i < n; i++) x[i] = NAN;
  o = encode(c, 0, x, n);
  y = decode(c, o, n);
  for (size_t i = 0; i < n; i++) assert_true(isnan(y[i]));
  free(y), free(o.frame);
  free(x);
  gcomp_codec_destroy(c);
}

/* ---- hostile payloads ------------------------------------------------------------------- */
static const gcomp_kind *topk_kind(void) {
  const gcomp_kind *k = gcomp_kind_find("topk");
  assert_non_null(k);
  return k;
}

static void put_hdr(uint8_t *p, int code, int vt, int w, uint64_t c, uint64_t l) {
  p[0] = (uint8_t)code, p[1] = (uint8_t)vt, p[2] = (uint8_t)w, p[3] = 0;
  gcomp_store_le64(p + 4, c);
  gcomp_store_le64(p + 12, l);
}

/* Decodes payload (copied to end at a guard page) into 10 values: the status. */
static int decode_payload(const uint8_t *payload, size_t len) {
  const gcomp_kind *k = topk_kind();
  gcomp_kind_cfg cfg;
  k->defaults(&cfg);
  guarded g = guard_alloc(len ? len : 1);
  uint8_t *p = (uint8_t *)g.p + (len ? 0 : 1);
  memcpy(p, payload, len);
  float out[10];
  for (int i = 0; i < 10; i++) out[i] = 7.0f;
  int s = k->decode(&cfg, 0, p, len, out, 10, 1, NULL);
  if (s != GCOMP_OK)   /* a refused payload leaves the accumulator alone */
    for (int i = 0; i < 10; i++) assert_true(out[i] == 7.0f);
  guard_free(g);
  return s;
}

static void test_bad_payloads(void **state) {
  uint8_t p[128];
  float one = 1.0f;
  uint32_t onebits;
  memcpy(&onebits, &one, 4);
  /* a good one first: varint gaps 2, 0 -> indices 2, 3 */
  put_hdr(p, 1, 0, 0, 2, 2);
  p[20] = 2, p[21] = 0;
  gcomp_store_le32(p + 22, onebits), gcomp_store_le32(p + 26, onebits);
  assert_int_equal(decode_payload(p, 30), GCOMP_OK);
  /* every truncation of it */
  for (size_t cut = 0; cut < 30; cut++) assert_int_equal(decode_payload(p, cut), GCOMP_ERR_CORRUPT);
  /* index out of range: gap 9 after index 2 */
  p[21] = 9;
  assert_int_equal(decode_payload(p, 30), GCOMP_ERR_CORRUPT);
  assert_non_null(strstr(gcomp_last_error(), "out of range"));
  /* a gap that would wrap 32 bits (not increasing once truncated) */
  put_hdr(p, 1, 0, 0, 2, 6);
  p[20] = 2, p[21] = 0xff, p[22] = 0xff, p[23] = 0xff, p[24] = 0xff, p[25] = 0x0f;
  gcomp_store_le32(p + 26, onebits), gcomp_store_le32(p + 30, onebits);
  assert_int_equal(decode_payload(p, 34), GCOMP_ERR_CORRUPT);
  p[25] = 0x1f;   /* more than 32 bits */
  assert_int_equal(decode_payload(p, 34), GCOMP_ERR_CORRUPT);
  /* varint running past its section */
  put_hdr(p, 1, 0, 0, 1, 1);
  p[20] = 0x81;
  gcomp_store_le32(p + 21, onebits);
  assert_int_equal(decode_payload(p, 25), GCOMP_ERR_CORRUPT);
  /* index section longer than the gaps use */
  put_hdr(p, 1, 0, 0, 1, 2);
  p[20] = 1, p[21] = 0;
  gcomp_store_le32(p + 22, onebits);
  assert_int_equal(decode_payload(p, 26), GCOMP_ERR_CORRUPT);
  /* bit-packed: 3 gaps of 2 bits (1, 1, 3) -> 1, 3, 7; then the last gap too big */
  put_hdr(p, 0, 0, 2, 3, 1);
  p[20] = (uint8_t)(1 | 1 << 2 | 3 << 4);
  for (int j = 0; j < 3; j++) gcomp_store_le32(p + 21 + 4 * j, onebits);
  assert_int_equal(decode_payload(p, 33), GCOMP_OK);
  put_hdr(p, 0, 0, 3, 3, 2);   /* width 3: 1, 1, 7 -> 1, 3, 11 */
  p[20] = (uint8_t)(1 | 1 << 3 | (7 & 3) << 6), p[21] = 7 >> 2;
  for (int j = 0; j < 3; j++) gcomp_store_le32(p + 22 + 4 * j, onebits);
  assert_int_equal(decode_payload(p, 34), GCOMP_ERR_CORRUPT);
  put_hdr(p, 0, 0, 2, 3, 2);   /* section length does not match 3 x 2 bits */
  assert_int_equal(decode_payload(p, 34), GCOMP_ERR_CORRUPT);
  put_hdr(p, 0, 0, 33, 1, 5);  /* width beyond 32 */
  assert_int_equal(decode_payload(p, 29), GCOMP_ERR_CORRUPT);
  /* header fields */
  put_hdr(p, 3, 0, 0, 0, 0);   /* unknown coding */
  assert_int_equal(decode_payload(p, 20), GCOMP_ERR_CORRUPT);
  put_hdr(p, 0, 1, 0, 0, 0);   /* bf16 values into an fp32 codec */
  assert_int_equal(decode_payload(p, 20), GCOMP_ERR_CORRUPT);
  put_hdr(p, 0, 0, 0, 11, 0);  /* more entries than values */
  assert_int_equal(decode_payload(p, 20 + 44), GCOMP_ERR_CORRUPT);
  put_hdr(p, 2, 0, 0, 9, 0);   /* dense with a missing value */
  assert_int_equal(decode_payload(p, 20 + 36), GCOMP_ERR_CORRUPT);
  put_hdr(p, 0, 0, 0, 0, UINT64_MAX);   /* huge section length */
  assert_int_equal(decode_payload(p, 20), GCOMP_ERR_CORRUPT);
  put_hdr(p, 0, 0, 0, UINT64_MAX / 2, 0);   /* count overflow */
  assert_int_equal(decode_payload(p, 20), GCOMP_ERR_CORRUPT);
  put_hdr(p, 0, 0, 0, 0, 0);
  assert_int_equal(decode_payload(p, 20), GCOMP_OK);   /* empty is fine */
  assert_int_equal(decode_payload(p, 21), GCOMP_ERR_CORRUPT);   /* trailing byte is not */

  /* through the public API: a sealed frame with a bad payload is refused */
  gcomp_codec *c = make("topk:k=2");
  uint8_t frame[GCOMP_FRAME_HEADER + 64];
  put_hdr(frame + GCOMP_FRAME_HEADER, 1, 0, 0, 2, 2);
  frame[GCOMP_FRAME_HEADER + 20] = 2, frame[GCOMP_FRAME_HEADER + 21] = 9;   /* 2, 12 */
  gcomp_store_le32(frame + GCOMP_FRAME_HEADER + 22, onebits);
  gcomp_store_le32(frame + GCOMP_FRAME_HEADER + 26, onebits);
  gcomp_frame_info info = {.kind = GCOMP_KIND_TOPK, .count = 10, .payload_len = 30};
  gcomp_frame_seal(frame, &info);
  float out[10];
  assert_int_equal(gcomp_decode(c, frame, gcomp_frame_size(30), out, 10), GCOMP_ERR_CORRUPT);
  frame[GCOMP_FRAME_HEADER + 21] = 5;   /* 2, 8: fine */
  gcomp_frame_seal(frame, &info);
  assert_int_equal(gcomp_decode(c, frame, gcomp_frame_size(30), out, 10), GCOMP_OK);
  assert_true(out[2] == 1.0f && out[8] == 1.0f && out[0] == 0.0f);
  gcomp_codec_destroy(c);
}

/* Frames of real encodes, every truncation and a sample of bit flips: refused, never a
 * crash (the CRC catches flips; truncations are caught before any payload is read). */
static void test_real_frames_damaged(void **state) {
  size_t n = 3000;
  float *x = malloc(n * sizeof *x), out[3000];
  fill(x, n, D_GAUSS, 9);
  gcomp_codec *c = make("topk:ratio=0.02,values=bf16");
  enc_out o = encode(c, 0, x, n);
  for (size_t cut = 0; cut < o.len; cut++)
    assert_int_equal(gcomp_decode(c, o.frame, cut, out, n), GCOMP_ERR_CORRUPT);
  for (size_t bit = 0; bit < o.len * 8; bit += 7) {
    o.frame[bit / 8] ^= (uint8_t)(1u << bit % 8);
    assert_int_equal(gcomp_decode(c, o.frame, o.len, out, n), GCOMP_ERR_CORRUPT);
    o.frame[bit / 8] ^= (uint8_t)(1u << bit % 8);
  }
  gcomp_codec *d = make("topk:ratio=0.02");   /* other value type */
  assert_int_equal(gcomp_decode(d, o.frame, o.len, out, n), GCOMP_ERR_CORRUPT);
  free(o.frame), free(x);
  gcomp_codec_destroy(c), gcomp_codec_destroy(d);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(test_params, test_env_restore),
      cmocka_unit_test_teardown(test_kernels_differential, test_env_restore),
      cmocka_unit_test_teardown(test_kth_key, test_env_restore),
      cmocka_unit_test_teardown(test_kept_count_tolerance, test_env_restore),
      cmocka_unit_test_teardown(test_stale_threshold, test_env_restore),
      cmocka_unit_test_teardown(test_sample_misjudged, test_env_restore),
      cmocka_unit_test_teardown(test_exact_matches_sort, test_env_restore),
      cmocka_unit_test_teardown(test_deterministic, test_env_restore),
      cmocka_unit_test_teardown(test_roundtrips, test_env_restore),
      cmocka_unit_test_teardown(test_degenerate_inputs, test_env_restore),
      cmocka_unit_test_teardown(test_bad_payloads, test_env_restore),
      cmocka_unit_test_teardown(test_real_frames_damaged, test_env_restore),
  };
  return cmocka_run_group_tests_name("topk", tests, test_env_save, test_env_free);
}
