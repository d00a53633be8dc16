/* The drift guard (reduce/guard.c) on in-process ranks: the setting's grammar and errors,
 * top-k 0.1% without error feedback under every=1 giving exact sums (and the same codec
 * unguarded giving others), the backoff, bf16 never falling back under the default budget,
 * top-k 1% + EF checked by running sums (no fallback; over a tiny budget the window's
 * running sum made exact), ranks whose keys and codec objects differ deciding alike (the
 * guard counts calls by size), and the key, error and count in GCOMP_STATS. */
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

#include "gcomp.h"

enum { N = 4, COUNT = 20000, MAXSTEPS = 64 };

/* Integer-valued inputs (exact in fp32, and so are their sums in any order): most small,
 * a few large, both signs; `drift` scales a part every step shares (a gradient's mean). */
static float value(int r, size_t i, int step, int drift) {
  uint64_t h = (uint64_t)(r + 1) * 0x9e3779b97f4a7c15ull ^
               (uint64_t)(i + 3) * 0xbf58476d1ce4e5b9ull ^
               (uint64_t)(step + 1) * 0x94d049bb133111ebull;
  h ^= h >> 29, h *= 0xbf58476d1ce4e5b9ull, h ^= h >> 32;
  int v = (int)(h % 17) - 8;
  if ((h >> 20) % 64 == 0) v *= 64;
  v += drift * ((int)(i % 7) - 3);
  return (float)v;
}

typedef struct {
  gcomp_comm *comm;
  const char *spec;
  int steps, drift, in_place;
  int last_only;       /* out holds the last step's result only */
  float *out;          /* [steps][COUNT]: every step's result */
  int status;
  char error[600];
  gcomp_guard_stats guard;
} job;

static void *rank_main(void *arg) {
  job *j = arg;
  int r = gcomp_comm_rank(j->comm);
  gcomp_codec *codec = NULL;
  float *in = malloc(COUNT * sizeof *in);
  j->status = gcomp_codec_create(j->spec, &codec);
  for (int s = 0; s < j->steps && j->status == GCOMP_OK; s++) {
    float *res = j->out + (j->last_only ? 0 : (size_t)s * COUNT);
    float *src = j->in_place ? res : in;
    for (size_t i = 0; i < COUNT; i++) src[i] = value(r, i, s, j->drift);
    j->status = gcomp_allreduce(j->comm, src, res, COUNT, GCOMP_FLOAT32, GCOMP_SUM, codec, 42);
  }
  if (j->status < 0) snprintf(j->error, sizeof j->error, "%s", gcomp_last_error());
  j->guard = (gcomp_guard_stats){.struct_size = sizeof j->guard};
  gcomp_comm_get_guard(j->comm, &j->guard);
  gcomp_codec_destroy(codec);
  free(in);
  return NULL;
}

static gcomp_config *config_with(const char *guard, const char *algo) {
  gcomp_config *cfg;
  assert_int_equal(gcomp_config_create(&cfg), GCOMP_OK);
  assert_int_equal(gcomp_config_set(cfg, "GCOMP_ALPHA_BETA", "5,10,20,1"), GCOMP_OK);
  assert_int_equal(gcomp_config_set(cfg, "GCOMP_ALGO", algo), GCOMP_OK);
  assert_int_equal(gcomp_config_set(cfg, "GCOMP_SKEW_WINDOW", "0"), GCOMP_OK);
  if (guard) assert_int_equal(gcomp_config_set(cfg, "GCOMP_GUARD", guard), GCOMP_OK);
  return cfg;
}

/* Runs `steps` calls on N ranks; returns rank 0's results (caller frees), after checking
 * every rank got the same bits and the same guard figures; *g: rank 0's. */
static float *run_kept(gcomp_config *cfg, const char *spec, int steps, int drift, int in_place,
                       int last_only, gcomp_guard_stats *g) {
  gcomp_comm *comms[N];
  assert_int_equal(gcomp_comm_init_local(N, NULL, cfg, comms), GCOMP_OK);
  gcomp_config_destroy(cfg);
  job jobs[N];
  pthread_t th[N];
  for (int r = 0; r < N; r++) {
    jobs[r] = (job){.comm = comms[r], .spec = spec, .steps = steps, .drift = drift,
                    .in_place = in_place, .last_only = last_only};
    int kept = last_only ? 1 : steps;
    jobs[r].out = calloc((size_t)kept * COUNT, sizeof(float));
    assert_int_equal(pthread_create(&th[r], NULL, rank_main, &jobs[r]), 0);
  }
  for (int r = 0; r < N; r++) pthread_join(th[r], NULL);
  for (int r = 0; r < N; r++) {
    if (jobs[r].status != GCOMP_OK) fail_msg("rank %d: %s", r, jobs[r].error);
    assert_memory_equal(jobs[r].out, jobs[0].out,
                        (size_t)(last_only ? 1 : steps) * COUNT * sizeof(float));
    assert_int_equal(jobs[r].guard.checks, jobs[0].guard.checks);
    assert_int_equal(jobs[r].guard.fallbacks, jobs[0].guard.fallbacks);
    gcomp_comm_destroy(comms[r]);
  }
  *g = jobs[0].guard;
  for (int r = 1; r < N; r++) free(jobs[r].out);
  return jobs[0].out;
}

static float *run(gcomp_config *cfg, const char *spec, int steps, int drift, int in_place,
                  gcomp_guard_stats *g) {
  return run_kept(cfg, spec, steps, drift, in_place, 0, g);
}

static double exact(size_t i, int step, int drift) {
  double s = 0;
  for (int r = 0; r < N; r++) s += value(r, i, step, drift);
  return s;
}

/* step `step`'s result (out holds every step) is exactly the sum */
static int is_exact(const float *out, int step, int drift) {
  for (size_t i = 0; i < COUNT; i++)
    if (out[(size_t)step * COUNT + i] != exact(i, step, drift)) return 0;
  return 1;
}

/* steps whose result is exactly the sum */
static int exact_steps(const float *out, int steps, int drift) {
  int k = 0;
  for (int s = 0; s < steps; s++) k += is_exact(out, s, drift);
  return k;
}

static double rel_error(const float *out, int step, int drift) {
  double d2 = 0, e2 = 0;
  for (size_t i = 0; i < COUNT; i++) {
    double e = exact(i, step, drift), d = out[(size_t)step * COUNT + i] - e;
    d2 += d * d, e2 += e * e;
  }
  return sqrt(d2 / e2);
}

/* ---- the setting ---------------------------------------------------------------------- */
static void expect_refused(const char *guard, const char *token) {
  gcomp_config *cfg = config_with(guard, "auto");
  gcomp_comm *comms[2];
  int st = gcomp_comm_init_local(2, NULL, cfg, comms);
  gcomp_config_destroy(cfg);
  assert_int_equal(st, GCOMP_ERR_INVALID);
  if (!strstr(gcomp_last_error(), "GCOMP_GUARD") || !strstr(gcomp_last_error(), token))
    fail_msg("'%s': the error does not name '%s': %s", guard, token, gcomp_last_error());
  assert_null(comms[0]);
}

static void test_setting(void **state) {
  (void)state;
  expect_refused("every=0", "every");
  expect_refused("every=5,bogus=1", "bogus");
  expect_refused("every=5,budget=-1", "budget");
  expect_refused("budget=abc", "abc");
  expect_refused("every", "every");
  expect_refused("backoff=x", "x");
  /* accepted: the figures as given, defaults for the rest; off by default */
  const char *ok[] = {NULL, "off", "on", "every=7,budget=0.25", "backoff=3,budget=0.5,every=2"};
  const int every[] = {0, 0, 100, 7, 2}, backoff[] = {100, 100, 100, 100, 3};
  const double budget[] = {0.5, 0.5, 0.5, 0.25, 0.5};
  for (int c = 0; c < 5; c++) {
    gcomp_config *cfg = config_with(ok[c], "auto");
    gcomp_comm *comms[1];
    assert_int_equal(gcomp_comm_init_local(1, NULL, cfg, comms), GCOMP_OK);
    gcomp_config_destroy(cfg);
    gcomp_guard_stats g = {.struct_size = sizeof g};
    assert_int_equal(gcomp_comm_get_guard(comms[0], &g), GCOMP_OK);
    assert_int_equal(g.every, every[c]);
    assert_int_equal(g.backoff, backoff[c]);
    assert_true(g.budget == budget[c]);
    assert_int_equal(g.checks, 0);
    gcomp_comm_destroy(comms[0]);
  }
  gcomp_guard_stats small = {.struct_size = 8};
  assert_int_equal(gcomp_comm_get_guard(NULL, &small), GCOMP_ERR_INVALID);
}

/* ---- top-k 0.1% without error feedback ------------------------------------------------ */
static void test_topk_every_call_exact(void **state) {
  (void)state;
  enum { STEPS = 6 };
  gcomp_guard_stats g;
  /* unguarded, the codec's sums are far from exact: what the guard must catch */
  float *raw = run(config_with(NULL, "sparse"), "topk:ratio=0.001", STEPS, 0, 0, &g);
  assert_int_equal(exact_steps(raw, STEPS, 0), 0);
  assert_true(rel_error(raw, 0, 0) > 0.5);
  assert_int_equal(g.checks, 0);
  free(raw);
  /* every=1,backoff=0: every call checked, every one over budget, every sum exact */
  for (int in_place = 0; in_place < 2; in_place++) {
    float *out = run(config_with("every=1,backoff=0", "sparse"), "topk:ratio=0.001", STEPS, 0,
                     in_place, &g);
    assert_int_equal(exact_steps(out, STEPS, 0), STEPS);
    assert_int_equal(g.checks, STEPS);
    assert_int_equal(g.fallbacks, STEPS);
    assert_int_equal(g.backoff_calls, 0);
    assert_true(g.last_error > 0.5 && g.max_error >= g.last_error);
    assert_int_equal(g.last_fallback_key, 42);
    free(out);
  }
  /* with the default backoff the first call falls back, the next ones run uncompressed */
  float *out = run(config_with("every=1", "sparse"), "topk:ratio=0.001", STEPS, 0, 0, &g);
  assert_int_equal(exact_steps(out, STEPS, 0), STEPS);
  assert_int_equal(g.checks, 1);
  assert_int_equal(g.fallbacks, 1);
  assert_int_equal(g.backoff_calls, STEPS - 1);
  free(out);
  /* backoff=2, every=3: check (fall back), 2 uncompressed, check again (fall back), ... */
  out = run(config_with("every=3,backoff=2", "sparse"), "topk:ratio=0.001", STEPS, 0, 0, &g);
  assert_int_equal(exact_steps(out, STEPS, 0), STEPS);
  assert_int_equal(g.checks, 2);
  assert_int_equal(g.backoff_calls, 4);
  free(out);
}

/* ---- codecs that must pass ------------------------------------------------------------ */
static void test_bf16_never_falls_back(void **state) {
  (void)state;
  enum { STEPS = 12 };
  gcomp_guard_stats g;
  float *out = run(config_with("every=1", "direct"), "bf16", STEPS, 1, 0, &g);
  assert_int_equal(g.checks, STEPS);
  assert_int_equal(g.fallbacks, 0);
  assert_true(g.max_error > 0 && g.max_error < 0.01);   /* inexact, and checked as such */
  assert_true(exact_steps(out, STEPS, 1) < STEPS);      /* the codec's own results */
  free(out);
}

static void test_topk_ef_running_sum(void **state) {
  (void)state;
  enum { STEPS = 300 };
  gcomp_guard_stats g;
  /* a shared drift (a gradient's mean) under noise: error feedback delivers it, about
   * 1/ratio calls late; the running sums since the first call agree within the default
   * budget at calls 100, 200 and 300 (the sums since the check before are off by more) */
  float *out = run_kept(config_with("every=100", "sparse"), "topk:ratio=0.01+ef", STEPS, 4, 0,
                        1, &g);
  assert_int_equal(g.checks, STEPS / 100);
  assert_int_equal(g.fallbacks, 0);
  assert_true(g.max_error > 0 && g.max_error < 0.5);
  /* the lag is about the same at every check while the sums grow with the calls: by call
   * 300 its share is near a third of call 100's (sums restarted at each check stay put) */
  assert_true(g.last_error < 0.5 * g.max_error);
  free(out);
  /* over a tiny budget: each check (calls 10 and 20: after a fallback the sums start again)
   * falls back, and that call's result is the exact sum */
  out = run(config_with("every=10,budget=1e-9,backoff=0", "sparse"), "topk:ratio=0.01+ef", 20,
            1, 0, &g);
  assert_int_equal(g.checks, 2);
  assert_int_equal(g.fallbacks, 2);
  assert_true(is_exact(out, 9, 1) && is_exact(out, 19, 1));
  assert_true(rel_error(out, 8, 1) > 0.3);   /* the others are the codec's */
  free(out);
}

/* ---- keys that differ between ranks --------------------------------------------------- */
/* The shim's keys are buffer addresses: each rank has its own, one rank may reuse a buffer
 * for two tensors where another has two, and a buffer freed and allocated again is a new key
 * on one rank only. The guard's collectives (the exact reduction, the error's exchange) and
 * its backoff must not depend on them: every rank takes the same decisions from what the
 * ranks share (the calls' order and sizes). Keyed by the caller's key, rank 2 (a new key
 * every call) would check every call and rank 0 (one key) every third: their collectives
 * would part ways and the calls time out. Codec objects are each rank's own too: rank 1
 * passes one per tensor, the others one for both. */
enum { TENSORS = 2, KSTEPS = 7 };

static uint64_t key_of(int r, int step, int t) {
  switch (r) {
  case 0: return 7;                                     /* one buffer for both tensors */
  case 1: return 100 + (uint64_t)t;                     /* a buffer each */
  case 2: return 1000 + (uint64_t)step * TENSORS + t;   /* a new buffer every call */
  default: return 200 + (uint64_t)((t + step) % TENSORS);   /* the two swapped each step */
  }
}

typedef struct {
  gcomp_comm *comm;
  const char *spec;
  float *out;          /* [KSTEPS][TENSORS][COUNT] */
  int status;
  char error[600];
  gcomp_guard_stats guard;
} keyed_job;

static void *keyed_rank(void *arg) {
  keyed_job *j = arg;
  int r = gcomp_comm_rank(j->comm);
  gcomp_codec *codec[TENSORS] = {NULL};
  float *in = malloc(COUNT * sizeof *in);
  j->status = gcomp_codec_create(j->spec, &codec[0]);
  if (j->status == GCOMP_OK && r == 1) j->status = gcomp_codec_create(j->spec, &codec[1]);
  for (int s = 0; s < KSTEPS && j->status == GCOMP_OK; s++)
    for (int t = 0; t < TENSORS && j->status == GCOMP_OK; t++) {
      for (size_t i = 0; i < COUNT; i++) in[i] = value(r, i, s * TENSORS + t, 0);
      float *res = j->out + ((size_t)s * TENSORS + t) * COUNT;
      j->status = gcomp_allreduce(j->comm, in, res, COUNT, GCOMP_FLOAT32, GCOMP_SUM,
                                  codec[r == 1 ? t : 0], key_of(r, s, t));
    }
  if (j->status < 0) snprintf(j->error, sizeof j->error, "%s", gcomp_last_error());
  j->guard = (gcomp_guard_stats){.struct_size = sizeof j->guard};
  gcomp_comm_get_guard(j->comm, &j->guard);
  for (int t = 0; t < TENSORS; t++) gcomp_codec_destroy(codec[t]);
  free(in);
  return NULL;
}

/* KSTEPS x TENSORS calls under `guard`; every rank must finish with the same bits and the
 * same guard figures; returns rank 0's results (caller frees) and guard figures */
static float *run_keyed(const char *guard, const char *spec, const char *algo,
                        gcomp_guard_stats *g) {
  gcomp_config *cfg = config_with(guard, algo);
  /* a guard whose ranks part ways shows as a timeout: a short one keeps the test short */
  assert_int_equal(gcomp_config_set(cfg, "GCOMP_TIMEOUT_MS", "5000"), GCOMP_OK);
  gcomp_comm *comms[N];
  assert_int_equal(gcomp_comm_init_local(N, NULL, cfg, comms), GCOMP_OK);
  gcomp_config_destroy(cfg);
  keyed_job jobs[N];
  pthread_t th[N];
  size_t kept = (size_t)KSTEPS * TENSORS * COUNT;
  for (int r = 0; r < N; r++) {
    jobs[r] = (keyed_job){.comm = comms[r], .spec = spec, .out = calloc(kept, sizeof(float))};
    assert_int_equal(pthread_create(&th[r], NULL, keyed_rank, &jobs[r]), 0);
  }
  for (int r = 0; r < N; r++) pthread_join(th[r], NULL);
  for (int r = 0; r < N; r++) {
    if (jobs[r].status != GCOMP_OK) fail_msg("rank %d: %s", r, jobs[r].error);
    assert_memory_equal(jobs[r].out, jobs[0].out, kept * sizeof(float));
    assert_int_equal(jobs[r].guard.checks, jobs[0].guard.checks);
    assert_int_equal(jobs[r].guard.fallbacks, jobs[0].guard.fallbacks);
    assert_int_equal(jobs[r].guard.backoff_calls, jobs[0].guard.backoff_calls);
    gcomp_comm_destroy(comms[r]);
  }
  *g = jobs[0].guard;
  for (int r = 1; r < N; r++) free(jobs[r].out);
  return jobs[0].out;
}

static void test_keys_differ_between_ranks(void **state) {
  (void)state;
  gcomp_guard_stats g;
  /* top-k 0.1% without EF, every=3,backoff=2 over the calls of one size (14 of them): check
   * (fall back), 2 uncompressed, check, ...: calls 0, 3, 6, 9, 12 checked, the rest in
   * backoff, every result exact */
  float *out = run_keyed("every=3,backoff=2", "topk:ratio=0.001", "sparse", &g);
  assert_int_equal(g.checks, 5);
  assert_int_equal(g.fallbacks, 5);
  assert_int_equal(g.backoff_calls, KSTEPS * TENSORS - 5);
  for (int c = 0; c < KSTEPS * TENSORS; c++)
    if (!is_exact(out, c, 0)) fail_msg("call %d: not the exact sum", c);
  free(out);
  /* bf16 under the default budget, every=4: calls 0, 4, 8, 12 checked, none falls back */
  out = run_keyed("every=4", "bf16", "direct", &g);
  assert_int_equal(g.checks, 4);
  assert_int_equal(g.fallbacks, 0);
  free(out);
  /* top-k 1% + EF, every=5,backoff=0: the running sums cover the calls of the size on every
   * rank alike; calls 4 and 9 compare them (a fallback starts them again: 5 calls later) */
  out = run_keyed("every=5,backoff=0", "topk:ratio=0.01+ef", "sparse", &g);
  assert_int_equal(g.checks, 2);
  free(out);
}

/* ---- GCOMP_STATS ---------------------------------------------------------------------- */
static void test_stats_file(void **state) {
  (void)state;
  char dir[] = "/tmp/gcomp_guard_XXXXXX", pattern[128], path[160];
  assert_non_null(mkdtemp(dir));
  snprintf(pattern, sizeof pattern, "%s/stats.%%r.json", dir);
  gcomp_config *cfg = config_with("every=2,backoff=1", "sparse");
  assert_int_equal(gcomp_config_set(cfg, "GCOMP_STATS", pattern), GCOMP_OK);
  gcomp_guard_stats g;
  free(run(cfg, "topk:ratio=0.001", 4, 0, 0, &g));
  assert_int_equal(g.fallbacks, 2);   /* calls 0 and 2 checked (after a backoff the count
                                         starts again), 1 and 3 in backoff */
  for (int r = 0; r < N; r++) {
    snprintf(path, sizeof path, "%s/stats.%d.json", dir, r);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char text[8192];
    size_t len = fread(text, 1, sizeof text - 1, f);
    text[len] = '\0';
    fclose(f);
    unlink(path);
    const char *gs = strstr(text, "\"guard\": {\"every\": 2, \"budget\": 0.5, \"backoff\": 1, "
                                  "\"checks\": 2, \"fallbacks\": 2, \"backoff_calls\": 2");
    if (!gs) fail_msg("rank %d: no guard figures in %s", r, text);
    if (!strstr(gs, "{\"key\": 42, \"count\": 20000, \"running_sum\": 0, \"checks\": 2, "
                    "\"fallbacks\": 2, \"last_error\": "))
      fail_msg("rank %d: key 42 not listed: %s", r, gs);
  }
  rmdir(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_setting),
      cmocka_unit_test(test_topk_every_call_exact),
      cmocka_unit_test(test_bf16_never_falls_back),
      cmocka_unit_test(test_topk_ef_running_sum),
      cmocka_unit_test(test_keys_differ_between_ranks),
      cmocka_unit_test(test_stats_file),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
