/* Error feedback: the per-step identity, the many-step invariant (exact where arithmetic is
 * exact, within a derived rounding bound elsewhere), bf16 residuals, momentum correction
 * against a scalar reference, reset, and the residual checkpoint file (round trip with and
 * without velocities, damage, mismatched codecs and shapes). */
#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "codec_impl.h"
#include "ef.h"
#include "gcomp.h"
#include "spec.h"

static uint64_t rng_state;
static uint64_t rnd(void) {
  uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
static double unif(void) { return ((double)(rnd() >> 11) + 0.5) / 9007199254740992.0; }
static double gauss(void) { return sqrt(-2 * log(unif())) * cos(2 * M_PI * unif()); }

/* One EF step through the internal store, so the residual can be read back. */
typedef struct {
  gcomp_spec spec;
  gcomp_ef *ef;
  uint8_t *frame;
  size_t cap;
  gcomp_codec *codec;   /* the same spec, for decoding */
  gcomp_codec_stats stats;
  uint64_t seq;
} ef_rig;

static ef_rig rig_make(const char *spec, size_t n) {
  ef_rig r;
  memset(&r, 0, sizeof r);
  assert_int_equal(gcomp_spec_parse(spec, &r.spec), GCOMP_OK);
  assert_true(r.spec.ef);
  assert_int_equal(gcomp_ef_create(r.spec.ef_dtype, r.spec.ef_momentum, r.spec.ef_mask, &r.ef), GCOMP_OK);
  assert_int_equal(gcomp_codec_create(spec, &r.codec), GCOMP_OK);
  r.cap = gcomp_codec_max_encoded_size(r.codec, n);
  r.frame = malloc(r.cap);
  return r;
}
static void rig_free(ef_rig *r) {
  gcomp_ef_destroy(r->ef);
  gcomp_codec_destroy(r->codec);
  free(r->frame);
}

/* Encodes g for key, decodes into dec (payload only: the kind's decode). */
static void rig_step(ef_rig *r, uint64_t key, const float *g, size_t n, float *dec) {
  gcomp_enc_ctx ctx = {.seq = r->seq++, .stats = &r->stats};
  size_t len;
  if (gcomp_ef_encode(r->ef, r->spec.kind, &r->spec.cfg, &ctx, key, g, n, r->frame, r->cap, &len) !=
      GCOMP_OK)
    fail_msg("ef encode: %s", gcomp_last_error());
  if (r->spec.kind->decode(&r->spec.cfg, ctx.param, r->frame, len, dec, n, 0, NULL) !=
      GCOMP_OK)
    fail_msg("decode: %s", gcomp_last_error());
}

/* dec + new residual == g + old residual, per element, for every step:
 *   fp32 residuals: exactly fl(g + r_old) (top-k sends x or nothing; bf16/fp16 values leave
 *   x - round(x), which is exact), so the identity holds bit for bit. */
static void test_step_identity(void **state) {
  const char *specs[] = {"topk:ratio=0.05+ef", "topk:ratio=0.05,values=bf16+ef",
                         "topk:ratio=0.05,values=fp16+ef", "topk:ratio=0.05,exact=1+ef",
                         "topk:ratio=1+ef", "none+ef"};
  size_t n = 20000;
  float *g = malloc(n * 4), *r0 = malloc(n * 4), *r1 = malloc(n * 4), *dec = malloc(n * 4);
  for (size_t s = 0; s < sizeof specs / sizeof *specs; s++) {
    ef_rig r = rig_make(specs[s], n);
    rng_state = s;
    memset(r0, 0, n * 4);
    for (int step = 0; step < 20; step++) {
      for (size_t i = 0; i < n; i++) g[i] = (float)(gauss() * (i % 100 == 0 ? 10.0 : 1e-3));
      rig_step(&r, 1, g, n, dec);
      assert_int_equal(gcomp_ef_residual(r.ef, 1, r1, n), GCOMP_OK);
      for (size_t i = 0; i < n; i++) {
        float x = g[i] + r0[i];
        double lhs = (double)dec[i] + (double)r1[i];
        if (lhs != (double)x)
          fail_msg("%s step %d index %zu: decoded %a + residual %a != x %a", specs[s], step, i,
                   dec[i], r1[i], x);
      }
      memcpy(r0, r1, n * 4);
    }
    rig_free(&r);
  }
  free(g), free(r0), free(r1), free(dec);
}

/* The same identity when the first (fused) pass finds too few and the selection is redone
 * from the residual (data that fools the line sampler, as in test_topk). */
static void test_step_identity_resampled(void **state) {
  size_t n = 100000;
  float *g = malloc(n * 4), *r0 = malloc(n * 4), *r1 = malloc(n * 4), *dec = malloc(n * 4);
  for (unsigned seed = 0; seed < 14; seed++) {
    /* the last two: small integers, so ties overflow the candidates mid-pass and the
     * fused pass must hand the dropped ones back to the residual */
    int ties = seed >= 12;
    char spec[64];
    snprintf(spec, sizeof spec, "topk:k=1000,seed=%u+ef", seed);
    ef_rig r = rig_make(spec, n);
    rng_state = 17;
    memset(r0, 0, n * 4);
    for (int step = 0; step < 3; step++) {
      for (size_t i = 0; i < n; i++)
        g[i] = ties ? (float)((int)(rnd() % 7) - 3)
                    : (float)(gauss() * ((i / 16) % 64 == 5 ? 1.0 : 1e-3));
      rig_step(&r, 1, g, n, dec);
      assert_int_equal(gcomp_ef_residual(r.ef, 1, r1, n), GCOMP_OK);
      size_t kept = 0;
      for (size_t i = 0; i < n; i++) {
        float x = g[i] + r0[i];
        kept += dec[i] != 0;
        if ((double)dec[i] + (double)r1[i] != (double)x)
          fail_msg("%s step %d index %zu: decoded %a + residual %a != x %a", spec, step, i,
                   dec[i], r1[i], x);
      }
      assert_true(kept >= 900 && kept <= 1100);
      memcpy(r0, r1, n * 4);
    }
    rig_free(&r);
  }
  free(g), free(r0), free(r1), free(dec);
}

/* Over many steps: sum of decoded + final residual == sum of inputs. Exact when every
 * addition is exact: integer gradients whose running sums stay below 2^24. */
static void test_invariant_exact_integers(void **state) {
  size_t n = 5000;
  int steps = 300;
  float *g = malloc(n * 4), *dec = malloc(n * 4), *res = malloc(n * 4);
  double *sum_in = calloc(n, sizeof *sum_in), *sum_out = calloc(n, sizeof *sum_out);
  const char *specs[] = {"topk:ratio=0.01+ef", "topk:k=3,exact=1+ef"};
  for (size_t s = 0; s < 2; s++) {
    ef_rig r = rig_make(specs[s], n);
    memset(sum_in, 0, n * sizeof *sum_in);
    memset(sum_out, 0, n * sizeof *sum_out);
    rng_state = 99 + s;
    for (int step = 0; step < steps; step++) {
      for (size_t i = 0; i < n; i++) {
        g[i] = (float)((int)(rnd() % 2001) - 1000);
        sum_in[i] += g[i];
      }
      rig_step(&r, 7, g, n, dec);
      for (size_t i = 0; i < n; i++) sum_out[i] += dec[i];
    }
    assert_int_equal(gcomp_ef_residual(r.ef, 7, res, n), GCOMP_OK);
    size_t nonzero_res = 0;
    for (size_t i = 0; i < n; i++) {
      if (sum_out[i] + res[i] != sum_in[i])
        fail_msg("%s index %zu: sent %.17g + residual %.17g != input %.17g", specs[s], i,
                 sum_out[i], (double)res[i], sum_in[i]);
      nonzero_res += res[i] != 0;
    }
    assert_true(nonzero_res > n / 2);   /* feedback really carried something */
    rig_free(&r);
  }
  free(g), free(dec), free(res), free(sum_in), free(sum_out);
}

/* Real-valued gradients: the only error is the rounding of x = g + r (and, with bf16
 * residuals, of storing r), so |sent + residual - inputs| <= sum over steps of
 * 2^-24 |x| (+ 2^-9 |r| for bf16), plus the error of the double sums themselves. */
static void invariant_bound(const char *spec, int bf16_res) {
  size_t n = 4000;
  int steps = 200;
  float *g = malloc(n * 4), *dec = malloc(n * 4), *r0 = malloc(n * 4), *r1 = malloc(n * 4);
  double *sin = calloc(n, 8), *sout = calloc(n, 8), *bound = calloc(n, 8);
  ef_rig r = rig_make(spec, n);
  rng_state = 5;
  memset(r0, 0, n * 4);
  for (int step = 0; step < steps; step++) {
    for (size_t i = 0; i < n; i++) {
      g[i] = (float)(gauss() * 1e-3);
      sin[i] += g[i];
    }
    rig_step(&r, 2, g, n, dec);
    assert_int_equal(gcomp_ef_residual(r.ef, 2, r1, n), GCOMP_OK);
    for (size_t i = 0; i < n; i++) {
      sout[i] += dec[i];
      double x = (double)g[i] + (double)r0[i];
      bound[i] += ldexp(fabs(x), -24) + (bf16_res ? ldexp(fabs((double)r1[i]), -8) : 0) +
                  ldexp(fabs(sin[i]) + fabs(sout[i]), -50);
    }
    memcpy(r0, r1, n * 4);
  }
  double worst = 0;
  for (size_t i = 0; i < n; i++) {
    double err = fabs(sout[i] + r1[i] - sin[i]);
    if (err > bound[i])
      fail_msg("%s index %zu: error %g above the rounding bound %g", spec, i, err, bound[i]);
    if (err > worst) worst = err;
  }
  print_message("%s: worst invariant error %g\n", spec, worst);
  rig_free(&r);
  free(g), free(dec), free(r0), free(r1), free(sin), free(sout), free(bound);
}

static void test_invariant_rounding(void **state) {
  invariant_bound("topk:ratio=0.01+ef", 0);
  invariant_bound("topk:ratio=0.01+ef:dtype=bf16", 1);
  invariant_bound("topk:ratio=0.01,values=bf16+ef:dtype=bf16", 1);
}

/* The bf16 store really keeps bf16: half the memory, values on the bf16 grid. */
static void test_bf16_residuals(void **state) {
  size_t n = 1000;
  ef_rig r = rig_make("topk:ratio=0.1+ef:dtype=bf16", n);
  float *g = malloc(n * 4), *dec = malloc(n * 4), *res = malloc(n * 4);
  rng_state = 3;
  for (size_t i = 0; i < n; i++) g[i] = (float)gauss();
  rig_step(&r, 0, g, n, dec);
  assert_int_equal(gcomp_ef_residual(r.ef, 0, res, n), GCOMP_OK);
  size_t rounded = 0;
  for (size_t i = 0; i < n; i++) {
    uint32_t b;
    memcpy(&b, &res[i], 4);
    assert_int_equal(b & 0xffffu, 0);   /* on the bf16 grid */
    if (dec[i] == 0) {
      assert_true(fabsf(res[i] - g[i]) <= ldexpf(fabsf(g[i]), -8));
      rounded += res[i] != g[i];
    }
  }
  assert_true(rounded > n / 2);   /* fp32 inputs mostly need rounding: the test can fail */
  float *p;
  assert_int_equal(gcomp_ef_slot(r.ef, 0, n, &p), GCOMP_ERR_UNSUPPORTED);
  rig_free(&r);
  free(g), free(dec), free(res);
}

static void test_nonfinite_leaves_no_residual(void **state) {
  size_t n = 1000;
  ef_rig r = rig_make("topk:ratio=0.01+ef", n);
  float *g = calloc(n, 4), *dec = malloc(n * 4), *res = malloc(n * 4);
  for (size_t i = 0; i < n; i++) g[i] = 1e-3f * (float)(i % 17);
  g[5] = NAN, g[6] = INFINITY;
  rig_step(&r, 0, g, n, dec);
  assert_true(isnan(dec[5]) && dec[6] == INFINITY);
  assert_int_equal(gcomp_ef_residual(r.ef, 0, res, n), GCOMP_OK);
  assert_true(res[5] == 0 && res[6] == 0);
  g[5] = g[6] = 1.0f;
  rig_step(&r, 0, g, n, dec);
  assert_true(dec[5] == 1.0f && dec[6] == 1.0f);   /* no NaN carried over */
  /* 99% NaN: all of them are sent (beyond k), and as (index, value) pairs they would take
   * more room than the dense form (990 values + 1-bit gaps > 1000 values), so everything
   * goes dense: the finite 1% is sent exactly and leaves no residual, the NaN none either */
  for (size_t i = 0; i < n; i++) g[i] = i % 100 ? NAN : 1.0f + (float)i;
  rig_step(&r, 0, g, n, dec);
  assert_int_equal(r.frame[0], 2);   /* the payload's index coding: dense */
  assert_int_equal(gcomp_ef_residual(r.ef, 0, res, n), GCOMP_OK);
  for (size_t i = 0; i < n; i++) {
    assert_true(res[i] == 0.0f);
    assert_true(i % 100 ? isnan(dec[i]) : dec[i] != 0.0f);
  }
  /* 50% NaN: sparse is still smaller; the finite values beyond k stay in the residual */
  for (size_t i = 0; i < n; i++) g[i] = i % 2 ? NAN : 1e-6f;
  rig_step(&r, 0, g, n, dec);
  assert_int_equal(gcomp_ef_residual(r.ef, 0, res, n), GCOMP_OK);
  for (size_t i = 0; i < n; i++) {
    if (i % 2) assert_true(isnan(dec[i]) && res[i] == 0.0f);
    else assert_true(dec[i] == 0.0f && res[i] == 1e-6f);
  }
  rig_free(&r);
  free(g), free(dec), free(res);
}

/* ---- momentum correction (ef:momentum) against a scalar model of it ---------------------- */
static float bf16_round(float x) {   /* nearest even, finite inputs */
  uint32_t b;
  memcpy(&b, &x, 4);
  b = (b + 0x7fffu + ((b >> 16) & 1)) & 0xffff0000u;
  memcpy(&x, &b, 4);
  return x;
}

/* The reference, one step for n elements, in the store's float arithmetic:
 *   u = m u + g;  x = r + u;  send the k largest |x| (ties: lower index first);
 *   r = x where not sent, 0 where sent (rounded to bf16 for a bf16 store);
 *   u = 0 where sent when masking. */
static const float *sort_x;
static int cmp_mag(const void *a, const void *b) {
  size_t i = *(const size_t *)a, j = *(const size_t *)b;
  float xi = fabsf(sort_x[i]), xj = fabsf(sort_x[j]);
  if (xi != xj) return xi > xj ? -1 : 1;
  return i < j ? -1 : 1;
}
static void ref_step(float m, int mask, int bf16_store, size_t k, const float *g, float *u,
                     float *r, float *sent, size_t n) {
  float *x = malloc(n * 4);
  size_t *ord = malloc(n * sizeof *ord);
  for (size_t i = 0; i < n; i++) {
    u[i] = m * u[i] + g[i];
    x[i] = r[i] + u[i];
    ord[i] = i;
    sent[i] = 0;
  }
  sort_x = x;
  qsort(ord, n, sizeof *ord, cmp_mag);
  for (size_t j = 0; j < k; j++) sent[ord[j]] = x[ord[j]];
  for (size_t i = 0; i < n; i++) {
    int s = sent[i] != 0;
    r[i] = s ? 0.0f : bf16_store ? bf16_round(x[i]) : x[i];
    if (s && mask) u[i] = 0.0f;
  }
  free(x), free(ord);
}

static void momentum_vs_reference(const char *spec, float m, int mask, int bf16_store) {
  size_t n = 300, k = 6;
  int steps = 25;
  ef_rig r = rig_make(spec, n);
  float *g = malloc(n * 4), *dec = malloc(n * 4), *u = calloc(n, 4), *res = calloc(n, 4);
  float *sent = malloc(n * 4), *got_r = malloc(n * 4), *got_u = malloc(n * 4);
  rng_state = 41;
  size_t masked = 0, carried = 0;
  for (int step = 0; step < steps; step++) {
    /* a few large, persistent coordinates (sent again and again: masking matters there)
     * and many small ones that wait in the residual */
    for (size_t i = 0; i < n; i++)
      g[i] = (float)(i % 50 == 3 ? 1.0 + 0.1 * gauss() : 0.05 * gauss());
    float *u_before = malloc(n * 4);
    memcpy(u_before, u, n * 4);
    ref_step(m, mask, bf16_store, k, g, u, res, sent, n);
    rig_step(&r, 9, g, n, dec);
    assert_int_equal(gcomp_ef_residual(r.ef, 9, got_r, n), GCOMP_OK);
    assert_int_equal(gcomp_ef_velocity(r.ef, 9, got_u, n), GCOMP_OK);
    for (size_t i = 0; i < n; i++) {
      if (dec[i] != sent[i])
        fail_msg("%s step %d index %zu: sent %a, reference %a", spec, step, i, dec[i], sent[i]);
      if (got_r[i] != res[i])
        fail_msg("%s step %d index %zu: residual %a, reference %a", spec, step, i, got_r[i], res[i]);
      if (got_u[i] != u[i])
        fail_msg("%s step %d index %zu: velocity %a, reference %a", spec, step, i, got_u[i], u[i]);
      masked += sent[i] != 0 && got_u[i] == 0 && m * u_before[i] + g[i] != 0;
      carried += sent[i] != 0 && got_u[i] != 0;
    }
    free(u_before);
  }
  /* the reference really distinguished the cases: masking zeroed velocities of sent
   * values, no masking kept them */
  if (mask) assert_true(masked >= (size_t)steps && carried == 0);
  else assert_true(carried >= (size_t)steps && masked == 0);
  rig_free(&r);
  free(g), free(dec), free(u), free(res), free(sent), free(got_r), free(got_u);
}

static void test_momentum_reference(void **state) {
  momentum_vs_reference("topk:k=6,exact=1+ef:momentum=0.9", 0.9f, 1, 0);
  momentum_vs_reference("topk:k=6,exact=1+ef:momentum=0.9,mask=0", 0.9f, 0, 0);
  momentum_vs_reference("topk:k=6,exact=1+ef:momentum=0.5,mask=1", 0.5f, 1, 0);
  momentum_vs_reference("topk:k=6,exact=1+ef:dtype=bf16,momentum=0.9", 0.9f, 1, 1);
  /* and a store without momentum keeps no velocity */
  ef_rig r = rig_make("topk:k=6,exact=1+ef", 10);
  float g[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, dec[10], v[10];
  rig_step(&r, 1, g, 10, dec);
  assert_int_equal(gcomp_ef_velocity(r.ef, 1, v, 10), GCOMP_ERR_INVALID);
  rig_free(&r);
}

/* Momentum changes what is sent: the same gradients give other frames than plain EF (so
 * the reference test above does not pass by both being plain EF), and a NaN gradient
 * leaves neither residual nor velocity behind. */
static void test_momentum_effect_and_nonfinite(void **state) {
  size_t n = 1000;
  ef_rig a = rig_make("topk:ratio=0.01+ef:momentum=0.9", n), b = rig_make("topk:ratio=0.01+ef", n);
  float *g = malloc(n * 4), *da = malloc(n * 4), *db = malloc(n * 4), *v = malloc(n * 4);
  rng_state = 8;
  int differ = 0;
  for (int step = 0; step < 5; step++) {
    for (size_t i = 0; i < n; i++) g[i] = (float)gauss();
    rig_step(&a, 0, g, n, da);
    rig_step(&b, 0, g, n, db);
    differ |= memcmp(da, db, n * 4) != 0;
  }
  assert_true(differ);
  g[5] = NAN, g[6] = -INFINITY;
  rig_step(&a, 0, g, n, da);
  assert_true(isnan(da[5]) && da[6] == -INFINITY);
  assert_int_equal(gcomp_ef_velocity(a.ef, 0, v, n), GCOMP_OK);
  assert_true(v[5] == 0 && v[6] == 0);
  for (size_t i = 0; i < n; i++) assert_true(isfinite(v[i]));
  g[5] = g[6] = 0.5f;
  rig_step(&a, 0, g, n, da);
  assert_int_equal(gcomp_ef_velocity(a.ef, 0, v, n), GCOMP_OK);
  assert_true(isfinite(v[5]) && isfinite(v[6]));
  /* the same without masking: the non-finite velocity is dropped all the same */
  ef_rig c = rig_make("topk:ratio=0.01+ef:momentum=0.9,mask=0", n);
  g[5] = NAN;
  rig_step(&c, 0, g, n, da);
  assert_int_equal(gcomp_ef_velocity(c.ef, 0, v, n), GCOMP_OK);
  assert_true(v[5] == 0 && v[6] != 0);
  rig_free(&a), rig_free(&b), rig_free(&c);
  free(g), free(da), free(db), free(v);
}

static void test_reset_and_shapes(void **state) {
  gcomp_codec *c;
  assert_int_equal(gcomp_codec_create("topk:ratio=0.5+ef", &c), GCOMP_OK);
  float g[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  uint8_t frame[256];
  size_t len;
  assert_int_equal(gcomp_encode(c, 4, g, 8, frame, sizeof frame, &len), GCOMP_OK);
  assert_int_equal(gcomp_encode(c, 4, g, 6, frame, sizeof frame, &len), GCOMP_ERR_INVALID);
  assert_non_null(strstr(gcomp_last_error(), "key 4 had 8 elements and now has 6"));
  assert_non_null(strstr(gcomp_last_error(), "gcomp_codec_reset_residuals"));
  assert_int_equal(gcomp_codec_reset_residuals(c), GCOMP_OK);
  assert_int_equal(gcomp_encode(c, 4, g, 6, frame, sizeof frame, &len), GCOMP_OK);
  /* after a reset the residual starts from zero: the first half of a fresh encode again */
  float out[6];
  assert_int_equal(gcomp_decode(c, frame, len, out, 6), GCOMP_OK);
  assert_true(out[5] == 6 && out[4] == 5 && out[3] == 4 && out[0] == 0);
  assert_int_equal(gcomp_codec_reset_residuals(NULL), GCOMP_ERR_INVALID);
  gcomp_codec_destroy(c);
}

/* ---- the residual file ----------------------------------------------------------------- */
static char path[256];

static void fill_steps(gcomp_codec *c, int steps, uint64_t seed) {
  size_t sizes[3] = {1000, 37, 5000};
  float *g = malloc(5000 * 4);
  uint8_t *frame = malloc(gcomp_codec_max_encoded_size(c, 5000));
  rng_state = seed;
  for (int s = 0; s < steps; s++)
    for (uint64_t key = 0; key < 3; key++) {
      for (size_t i = 0; i < sizes[key]; i++) g[i] = (float)gauss();
      size_t len;
      assert_int_equal(gcomp_encode(c, key * 1000 + 1, g, sizes[key], frame,
                                    gcomp_codec_max_encoded_size(c, 5000), &len),
                       GCOMP_OK);
    }
  free(g), free(frame);
}

/* Two codecs encode the same steps; equal frames mean equal residuals and state. */
static void expect_same_future(gcomp_codec *a, gcomp_codec *b) {
  size_t n = 5000, cap = gcomp_codec_max_encoded_size(a, n), la, lb;
  float *g = malloc(n * 4);
  uint8_t *fa = malloc(cap), *fb = malloc(cap);
  rng_state = 1234;
  for (int s = 0; s < 3; s++) {
    for (size_t i = 0; i < n; i++) g[i] = (float)gauss();
    assert_int_equal(gcomp_encode(a, 2001, g, n, fa, cap, &la), GCOMP_OK);
    assert_int_equal(gcomp_encode(b, 2001, g, n, fb, cap, &lb), GCOMP_OK);
    assert_int_equal(la, lb);
    assert_memory_equal(fa, fb, la);
  }
  free(g), free(fa), free(fb);
}

static uint8_t *read_all(const char *p, size_t *n) {
  FILE *f = fopen(p, "rb");
  assert_non_null(f);
  fseek(f, 0, SEEK_END);
  *n = (size_t)ftell(f);
  fseek(f, 0, SEEK_SET);
  uint8_t *b = malloc(*n);
  assert_int_equal(fread(b, 1, *n, f), *n);
  fclose(f);
  return b;
}
/* Two threads of one process save to one path at once: each save has its own temporary
 * (it was path.tmp.PID, shared by the threads: one thread's rename took the other's half-
 * written file, or failed), so every save succeeds, the file loads, and no temporary is
 * left beside it */
typedef struct {
  gcomp_codec *c;
  const char *path;
  int st;
} saver;

static void *save_many(void *arg) {
  saver *s = arg;
  for (int i = 0; i < 40 && s->st == GCOMP_OK; i++) s->st = gcomp_codec_save_residuals(s->c, s->path);
  return NULL;
}

static void test_concurrent_saves(void **state) {
  (void)state;
  char dir[] = "/tmp/gcomp-ef-XXXXXX", file[300];
  assert_non_null(mkdtemp(dir));
  snprintf(file, sizeof file, "%s/residuals", dir);
  saver s[2];
  pthread_t th[2];
  for (int t = 0; t < 2; t++) {
    s[t] = (saver){.path = file};
    assert_int_equal(gcomp_codec_create("topk:ratio=0.01+ef", &s[t].c), GCOMP_OK);
    fill_steps(s[t].c, 2 + t, 10);
  }
  for (int t = 0; t < 2; t++) pthread_create(&th[t], NULL, save_many, &s[t]);
  for (int t = 0; t < 2; t++) pthread_join(th[t], NULL);
  for (int t = 0; t < 2; t++) assert_int_equal(s[t].st, GCOMP_OK);
  gcomp_codec *back;
  assert_int_equal(gcomp_codec_create("topk:ratio=0.01+ef", &back), GCOMP_OK);
  assert_int_equal(gcomp_codec_load_residuals(back, file), GCOMP_OK);
  DIR *d = opendir(dir);
  assert_non_null(d);
  int entries = 0;
  for (struct dirent *e; (e = readdir(d));)
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) entries++;
  closedir(d);
  assert_int_equal(entries, 1);
  remove(file);
  rmdir(dir);
  for (int t = 0; t < 2; t++) gcomp_codec_destroy(s[t].c);
  gcomp_codec_destroy(back);
}

static void test_save_restore(void **state) {
  const char *specs[] = {"topk:ratio=0.01+ef", "topk:ratio=0.02+ef:dtype=bf16", "none+ef",
                         "topk:ratio=0.01+ef:momentum=0.9",
                         "topk:ratio=0.02+ef:dtype=bf16,momentum=0.5,mask=0"};
  for (size_t s = 0; s < sizeof specs / sizeof *specs; s++) {
    gcomp_codec *a, *b, *fresh;
    assert_int_equal(gcomp_codec_create(specs[s], &a), GCOMP_OK);
    assert_int_equal(gcomp_codec_create(specs[s], &b), GCOMP_OK);
    assert_int_equal(gcomp_codec_create(specs[s], &fresh), GCOMP_OK);
    fill_steps(a, 4, 10);
    fill_steps(b, 1, 77);   /* b holds other residuals, to be replaced by the load */
    assert_int_equal(gcomp_codec_save_residuals(a, path), GCOMP_OK);
    assert_int_equal(gcomp_codec_load_residuals(b, path), GCOMP_OK);
    /* the loaded codec continues exactly like the saved one */
    expect_same_future(a, b);
    /* the same residuals give the same file, byte for byte */
    char path2[300];
    snprintf(path2, sizeof path2, "%s.2", path);
    assert_int_equal(gcomp_codec_save_residuals(a, path), GCOMP_OK);
    assert_int_equal(gcomp_codec_save_residuals(b, path2), GCOMP_OK);
    size_t n1, n2;
    uint8_t *f1 = read_all(path, &n1), *f2 = read_all(path2, &n2);
    assert_int_equal(n1, n2);
    assert_memory_equal(f1, f2, n1);
    free(f1), free(f2);
    remove(path2);
    /* and a codec without the residuals does not (so the check above can fail) */
    if (strncmp(specs[s], "none", 4) != 0) {
      size_t n = 5000, cap = gcomp_codec_max_encoded_size(a, n), la, lf;
      float *g = malloc(n * 4);
      uint8_t *fa = malloc(cap), *ff = malloc(cap);
      for (size_t i = 0; i < n; i++) g[i] = (float)gauss();
      assert_int_equal(gcomp_encode(a, 2001, g, n, fa, cap, &la), GCOMP_OK);
      assert_int_equal(gcomp_encode(fresh, 2001, g, n, ff, cap, &lf), GCOMP_OK);
      assert_true(la != lf || memcmp(fa + 32, ff + 32, la - 32) != 0);
      free(g), free(fa), free(ff);
    }
    gcomp_codec_destroy(a), gcomp_codec_destroy(b), gcomp_codec_destroy(fresh);
  }
  remove(path);
}

/* The store itself: every key's residual and velocity come back bit for bit, the file is
 * version 2 with velocities and version 1 (as it always was) without. */
static void test_save_restore_velocity(void **state) {
  const char *specs[] = {"topk:ratio=0.05+ef:momentum=0.9", "topk:ratio=0.05+ef:dtype=bf16,momentum=0.9,mask=0",
                         "topk:ratio=0.05+ef"};
  size_t sizes[3] = {400, 7, 1300};
  for (size_t s = 0; s < sizeof specs / sizeof *specs; s++) {
    int vel = strstr(specs[s], "momentum") != NULL;
    ef_rig a = rig_make(specs[s], 1300), b = rig_make(specs[s], 1300);
    char canon[256];
    gcomp_spec_print(&a.spec, canon, sizeof canon);
    float *g = malloc(1300 * 4), *dec = malloc(1300 * 4), *x = malloc(1300 * 4), *y = malloc(1300 * 4);
    rng_state = 21;
    for (int step = 0; step < 6; step++)
      for (uint64_t key = 0; key < 3; key++) {
        for (size_t i = 0; i < sizes[key]; i++) g[i] = (float)gauss();
        rig_step(&a, key + 10, g, sizes[key], dec);
        if (step == 0) rig_step(&b, key + 10, g, sizes[key], dec);   /* something to replace */
      }
    assert_int_equal(gcomp_ef_save(a.ef, canon, path), GCOMP_OK);
    size_t n;
    uint8_t *file = read_all(path, &n);
    assert_int_equal(file[8], vel ? 2 : 1);
    free(file);
    assert_int_equal(gcomp_ef_load(b.ef, canon, path), GCOMP_OK);
    assert_int_equal(gcomp_ef_keys(b.ef), 3);
    size_t nonzero_vel = 0;
    for (uint64_t key = 0; key < 3; key++) {
      size_t c = sizes[key];
      assert_int_equal(gcomp_ef_residual(a.ef, key + 10, x, c), GCOMP_OK);
      assert_int_equal(gcomp_ef_residual(b.ef, key + 10, y, c), GCOMP_OK);
      assert_memory_equal(x, y, c * 4);
      if (!vel) {
        assert_int_equal(gcomp_ef_velocity(b.ef, key + 10, y, c), GCOMP_ERR_INVALID);
        continue;
      }
      assert_int_equal(gcomp_ef_velocity(a.ef, key + 10, x, c), GCOMP_OK);
      assert_int_equal(gcomp_ef_velocity(b.ef, key + 10, y, c), GCOMP_OK);
      assert_memory_equal(x, y, c * 4);
      for (size_t i = 0; i < c; i++) nonzero_vel += x[i] != 0;
    }
    if (vel) assert_true(nonzero_vel > 1000);   /* there was a velocity to lose */
    /* a store with other momentum settings refuses the file (the spec says which) */
    int bf16 = strstr(specs[s], "bf16") != NULL;
    ef_rig o = rig_make(!vel ? "topk:ratio=0.05+ef:momentum=0.9"
                        : bf16 ? "topk:ratio=0.05+ef:dtype=bf16" : "topk:ratio=0.05+ef", 10);
    char ocanon[256];
    gcomp_spec_print(&o.spec, ocanon, sizeof ocanon);
    assert_int_equal(gcomp_ef_load(o.ef, ocanon, path), GCOMP_ERR_INVALID);
    assert_non_null(strstr(gcomp_last_error(), "written by codec"));
    /* and one whose spec was made up to match is refused for the velocities alone */
    assert_int_equal(gcomp_ef_load(o.ef, canon, path), GCOMP_ERR_INVALID);
    assert_non_null(strstr(gcomp_last_error(), "velocities"));
    rig_free(&o);
    rig_free(&a), rig_free(&b);
    free(g), free(dec), free(x), free(y);
  }
  remove(path);
}

static void write_all(const char *p, const uint8_t *b, size_t n) {
  FILE *f = fopen(p, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(b, 1, n, f), n);
  fclose(f);
}

static void damaged_files(const char *spec) {
  gcomp_codec *a, *b;
  assert_int_equal(gcomp_codec_create(spec, &a), GCOMP_OK);
  assert_int_equal(gcomp_codec_create(spec, &b), GCOMP_OK);
  fill_steps(a, 2, 3);
  fill_steps(b, 2, 4);
  assert_int_equal(gcomp_codec_save_residuals(a, path), GCOMP_OK);
  size_t n;
  uint8_t *good = read_all(path, &n), *bad = malloc(n);
  char badpath[300];
  snprintf(badpath, sizeof badpath, "%s.bad", path);
  /* b's own residuals, to check that failed loads leave them alone */
  char bpath[300];
  snprintf(bpath, sizeof bpath, "%s.b", path);
  assert_int_equal(gcomp_codec_save_residuals(b, bpath), GCOMP_OK);
  size_t nb;
  uint8_t *bsaved = read_all(bpath, &nb);
  /* a bit flip anywhere (stepping through the file) */
  for (size_t bit = 0; bit < n * 8; bit += 61) {
    memcpy(bad, good, n);
    bad[bit / 8] ^= (uint8_t)(1u << bit % 8);
    write_all(badpath, bad, n);
    int s = gcomp_codec_load_residuals(b, badpath);
    if (s != GCOMP_ERR_CORRUPT) fail_msg("bit %zu flipped: status %d (%s)", bit, s, gcomp_last_error());
  }
  /* every truncation near the ends, and a sample in between */
  for (size_t cut = 0; cut < n; cut += (cut < 64 || cut > n - 64) ? 1 : 97) {
    write_all(badpath, good, cut);
    assert_int_equal(gcomp_codec_load_residuals(b, badpath), GCOMP_ERR_CORRUPT);
  }
  /* trailing garbage */
  memcpy(bad, good, n);
  write_all(badpath, good, n);
  FILE *f = fopen(badpath, "ab");
  fputc(0, f);
  fclose(f);
  assert_int_equal(gcomp_codec_load_residuals(b, badpath), GCOMP_ERR_CORRUPT);
  /* not a residual file at all; no file */
  write_all(badpath, (const uint8_t *)"hello, world, this is not it at all....", 40);
  assert_int_equal(gcomp_codec_load_residuals(b, badpath), GCOMP_ERR_CORRUPT);
  assert_int_equal(gcomp_codec_load_residuals(b, "/nonexistent/dir/res"), GCOMP_ERR_INVALID);
  /* after all that, b still holds its own residuals */
  assert_int_equal(gcomp_codec_save_residuals(b, badpath), GCOMP_OK);
  size_t nb2;
  uint8_t *bafter = read_all(badpath, &nb2);
  assert_int_equal(nb2, nb);
  assert_memory_equal(bafter, bsaved, nb);
  remove(badpath), remove(bpath), remove(path);
  free(good), free(bad), free(bsaved), free(bafter);
  gcomp_codec_destroy(a), gcomp_codec_destroy(b);
}

static void test_damaged_files(void **state) {
  damaged_files("topk:ratio=0.1+ef");
  damaged_files("topk:ratio=0.1+ef:momentum=0.9");   /* version 2: velocities too */
}

static void test_mismatched_files(void **state) {
  gcomp_codec *a;
  assert_int_equal(gcomp_codec_create("topk:ratio=0.1+ef", &a), GCOMP_OK);
  fill_steps(a, 1, 3);
  assert_int_equal(gcomp_codec_save_residuals(a, path), GCOMP_OK);
  const char *others[] = {"topk:ratio=0.2+ef", "topk:ratio=0.1+ef:dtype=bf16", "none+ef",
                          "topk:ratio=0.1,exact=1+ef", "topk:ratio=0.1+ef:momentum=0.9"};
  for (size_t i = 0; i < sizeof others / sizeof *others; i++) {
    gcomp_codec *o;
    assert_int_equal(gcomp_codec_create(others[i], &o), GCOMP_OK);
    assert_int_equal(gcomp_codec_load_residuals(o, path), GCOMP_ERR_INVALID);
    assert_non_null(strstr(gcomp_last_error(), "written by codec 'topk:ratio=0.1"));
    gcomp_codec_destroy(o);
  }
  /* a codec without error feedback has nothing to save or load */
  gcomp_codec *plain;
  assert_int_equal(gcomp_codec_create("topk:ratio=0.1", &plain), GCOMP_OK);
  assert_int_equal(gcomp_codec_load_residuals(plain, path), GCOMP_ERR_INVALID);
  assert_int_equal(gcomp_codec_save_residuals(plain, path), GCOMP_ERR_INVALID);
  gcomp_codec_destroy(plain);
  /* shapes: the loaded residual of key 1 has 1000 values; another length is refused */
  gcomp_codec *b;
  assert_int_equal(gcomp_codec_create("topk:ratio=0.1+ef", &b), GCOMP_OK);
  assert_int_equal(gcomp_codec_load_residuals(b, path), GCOMP_OK);
  float g[999] = {0};
  uint8_t frame[8192];
  size_t len;
  assert_int_equal(gcomp_encode(b, 1, g, 999, frame, sizeof frame, &len), GCOMP_ERR_INVALID);
  assert_non_null(strstr(gcomp_last_error(), "key 1 had 1000 elements and now has 999"));
  gcomp_codec_destroy(b);
  gcomp_codec_destroy(a);
  remove(path);
}

static int setup(void **state) {
  snprintf(path, sizeof path, "/tmp/gcomp-test-ef-%ld.res", (long)getpid());
  return 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_step_identity),
      cmocka_unit_test(test_step_identity_resampled),
      cmocka_unit_test(test_invariant_exact_integers),
      cmocka_unit_test(test_invariant_rounding),
      cmocka_unit_test(test_bf16_residuals),
      cmocka_unit_test(test_nonfinite_leaves_no_residual),
      cmocka_unit_test(test_momentum_reference),
      cmocka_unit_test(test_momentum_effect_and_nonfinite),
      cmocka_unit_test(test_reset_and_shapes),
      cmocka_unit_test(test_save_restore),
      cmocka_unit_test(test_concurrent_saves),
      cmocka_unit_test(test_save_restore_velocity),
      cmocka_unit_test(test_damaged_files),
      cmocka_unit_test(test_mismatched_files),
  };
  return cmocka_run_group_tests_name("ef", tests, setup, NULL);
}
