/* quant and sign through the compressed allreduces (direct, hier-direct) on in-process
 * ranks (gcomp_comm_init_local, one thread a rank): every rank ends with the same bits;
 * each value is quantised at most twice, so the error of an average stays within two
 * quantisations of the inputs whatever the rank count (2, 4, 8); sign + EF keeps the
 * error feedback on both sides (each rank's, and the owner's of its reduced shard), so
 * what the calls deliver tracks what went in over many calls. Only gcomp.h. */
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gcomp.h"

enum { MAXR = 8, N = 40000, CALLS = 40 };

typedef struct {
  gcomp_comm *comm;
  const char *spec;
  int calls;
  float *x;        /* [calls][N]: this rank's inputs, one row a call */
  float *y;        /* [calls][N]: what each call gave back */
  int status;
  char algo[32];
  uint64_t wire, nonfinite, shm;   /* the rank's figures after its calls */
} job;

static void *rank_main(void *arg) {
  job *j = arg;
  gcomp_codec *c = NULL;
  j->status = gcomp_codec_create(j->spec, &c);
  for (int t = 0; t < j->calls && j->status == GCOMP_OK; t++) {
    j->status = gcomp_allreduce(j->comm, j->x + (size_t)t * N, j->y + (size_t)t * N, N,
                                GCOMP_FLOAT32, GCOMP_AVG, c, 3);
    snprintf(j->algo, sizeof j->algo, "%s", gcomp_comm_last_algo(j->comm));
  }
  gcomp_comm_stats st = {.struct_size = sizeof st};
  gcomp_comm_get_stats(j->comm, &st);
  j->wire = st.wire_bytes, j->nonfinite = st.nonfinite, j->shm = st.shm_bytes;
  gcomp_codec_destroy(c);
  return NULL;
}

static uint64_t rng = 5;
static double unif(void) {
  rng = rng * 6364136223846793005ull + 1442695040888963407ull;
  return (double)(rng >> 11) / 9007199254740992.0;
}

/* GCOMP_SEGMENT_BYTES of the runs when set (4096: hier-direct pipelines 16 slices of N) */
static const char *seg_bytes;
/* GCOMP_SHM_BYTES of the runs when set (the node segment's slot) */
static const char *slot_bytes;
/* GCOMP_STREAM_BYTES of the runs when set */
static const char *stream_bytes;
/* GCOMP_HOST_RANKS of the runs when set */
static const char *host_ranks;
/* When below N: rank 1's input there is NaN, rank n-1's at inf_at +Inf (first call) */
static size_t nan_at = N, inf_at = N;

/* Runs `calls` AVG calls of spec on n ranks (2 emulated nodes for hier-direct); inputs
 * uniform in [-1, 1) * 1e-3 with an offset per rank. */
static job *run(const char *spec, const char *algo, int n, int calls) {
  gcomp_config *cfg = NULL;
  assert_int_equal(gcomp_config_create(&cfg), GCOMP_OK);
  if (seg_bytes)
    assert_int_equal(gcomp_config_set(cfg, "GCOMP_SEGMENT_BYTES", seg_bytes), GCOMP_OK);
  if (slot_bytes)
    assert_int_equal(gcomp_config_set(cfg, "GCOMP_SHM_BYTES", slot_bytes), GCOMP_OK);
  if (stream_bytes)
    assert_int_equal(gcomp_config_set(cfg, "GCOMP_STREAM_BYTES", stream_bytes), GCOMP_OK);
  if (host_ranks)
    assert_int_equal(gcomp_config_set(cfg, "GCOMP_HOST_RANKS", host_ranks), GCOMP_OK);
  assert_int_equal(gcomp_config_set(cfg, "GCOMP_ALPHA_BETA", "1,10,20,1"), GCOMP_OK);
  assert_int_equal(gcomp_config_set(cfg, "GCOMP_ALGO", algo), GCOMP_OK);
  assert_int_equal(gcomp_config_set(cfg, "GCOMP_CODEC_MIN_BYTES", "0"), GCOMP_OK);
  gcomp_comm *comms[MAXR];
  int node_of[MAXR];
  for (int r = 0; r < n; r++) node_of[r] = r < n / 2 ? 0 : 1;
  int hier = !strncmp(algo, "hier", 4);
  assert_int_equal(gcomp_comm_init_local(n, hier ? node_of : NULL, cfg, comms), GCOMP_OK);
  gcomp_config_destroy(cfg);
  assert_true(n >= 1 && n <= MAXR);
  job *jobs = calloc(MAXR, sizeof *jobs);
  pthread_t th[MAXR];
  for (int r = 0; r < n; r++) {
    /* results 64-byte aligned, as a framework's tensors are (sign streams its result 32
     * bytes a store from 32-byte boundaries, 16 from 16-byte ones) */
    jobs[r] = (job){comms[r], spec, calls, malloc((size_t)calls * N * 4),
                    aligned_alloc(64, (size_t)calls * N * 4), 0, "", 0, 0, 0};
    for (size_t i = 0; i < (size_t)calls * N; i++)
      jobs[r].x[i] = (float)((unif() * 2 - 1) * 1e-3 + 2e-4 * r);
  }
  if (nan_at < N) jobs[1].x[nan_at] = NAN;
  if (inf_at < N) jobs[n - 1].x[inf_at] = INFINITY;
  for (int r = 0; r < n; r++)
    assert_int_equal(pthread_create(&th[r], NULL, rank_main, &jobs[r]), 0);
  for (int r = 0; r < n; r++) pthread_join(th[r], NULL);
  for (int r = 0; r < n; r++) {
    if (jobs[r].status != GCOMP_OK) fail_msg("%s %s n=%d rank %d: %s", spec, algo, n, r,
                                             gcomp_last_error());
    assert_string_equal(jobs[r].algo, algo);   /* the algorithm asked for really ran */
    assert_int_equal(gcomp_comm_destroy(comms[r]), GCOMP_OK);
  }
  /* every rank holds the same bits: the owner decodes its own re-encoded shard too */
  for (int r = 1; r < n; r++)
    if (memcmp(jobs[r].y, jobs[0].y, (size_t)calls * N * 4))
      fail_msg("%s %s n=%d: rank %d differs from rank 0", spec, algo, n, r);
  return jobs;
}

static void free_jobs(job *jobs, int n) {
  for (int r = 0; r < n; r++) free(jobs[r].x), free(jobs[r].y);
  free(jobs);
}

/* The exact average of call t, value i. */
static double exact(const job *jobs, int n, int t, size_t i) {
  double s = 0;
  for (int r = 0; r < n; r++) s += jobs[r].x[(size_t)t * N + i];
  return s / n;
}

/* One quantisation of a rank's inputs is off by at most half a step of its bucket, a
 * step at most (the rank's range) / (2^B - 1); the average of n such errors is within the
 * largest rank's half step; the second quantisation, of the reduced shard, within half a
 * step of the average's range (itself widened by the first errors). So whatever n:
 *   |y - exact| <= R1 / (2L) + (Ravg + R1 / L) / (2L)   (plus fp32's rounding)
 * with R1 the largest rank range and Ravg the exact average's range (stochastic rounding:
 * a whole step each, twice that). A ring that
 * re-quantised partial sums at each of its n - 1 hops would grow with n. */
static void quant_within_two_quantisations(const char *spec, unsigned bits, const char *algo) {
  const int ns[] = {2, 4, 8};
  /* stochastic rounding moves a value to either neighbour: up to a whole step */
  double L = (double)((1u << bits) - 1) / (strstr(spec, "stochastic") ? 2 : 1), worst_ratio[3];
  for (int k = 0; k < 3; k++) {
    int n = ns[k];
    job *jobs = run(spec, algo, n, 1);
    double r1 = 0, lo = INFINITY, hi = -INFINITY, worst = 0;
    for (int r = 0; r < n; r++) {
      float a = INFINITY, b = -INFINITY;
      for (size_t i = 0; i < N; i++) a = fminf(a, jobs[r].x[i]), b = fmaxf(b, jobs[r].x[i]);
      r1 = fmax(r1, (double)b - a);
    }
    for (size_t i = 0; i < N; i++) {
      double e = exact(jobs, n, 0, i);
      lo = fmin(lo, e), hi = fmax(hi, e);
    }
    double bound = r1 / (2 * L) + ((hi - lo) + r1 / L) / (2 * L) + 1e-9;
    for (size_t i = 0; i < N; i++) worst = fmax(worst, fabs(jobs[0].y[i] - exact(jobs, n, 0, i)));
    if (worst > bound) fail_msg("%s %s n=%d: error %g above two quantisations %g", spec, algo, n,
                                worst, bound);
    worst_ratio[k] = worst / bound;
    free_jobs(jobs, n);
  }
  print_message("%s %s: error / bound at 2, 4, 8 ranks: %.3f %.3f %.3f\n", spec, algo,
                worst_ratio[0], worst_ratio[1], worst_ratio[2]);
  assert_true(worst_ratio[0] > 0.2);   /* the bound is the real one, not a loose wall */
}

static void test_quant_direct(void **state) {
  quant_within_two_quantisations("quant:bits=4,bucket=128", 4, "direct");
  quant_within_two_quantisations("quant:bits=8", 8, "direct");
  quant_within_two_quantisations("quant:bits=2,bucket=128+ef", 2, "direct");
}

static void test_quant_hier_direct(void **state) {
  quant_within_two_quantisations("quant:bits=4,bucket=128", 4, "hier-direct");
  quant_within_two_quantisations("quant:bits=8,round=stochastic,seed=2", 8, "hier-direct");
}

/* sign + EF: over many calls what was delivered tracks what went in: sum_t y_t - sum_t
 * avg_t is what the residuals of both sides still hold (each rank's, averaged, and the
 * owner's), a few sign magnitudes, not a drift that grows with the calls. */
static void sign_tracks_inputs(const char *algo, int n) {
  job *jobs = run("sign:bucket=128+ef", algo, n, CALLS);
  double half = 0, full = 0, smax = 0;
  for (size_t i = 0; i < N; i++) {
    double din = 0, dout = 0;
    for (int t = 0; t < CALLS; t++) {
      din += exact(jobs, n, t, i), dout += jobs[0].y[(size_t)t * N + i];
      smax = fmax(smax, fabs(jobs[0].y[(size_t)t * N + i]));
      if (t == CALLS / 2 - 1) half = fmax(half, fabs(dout - din));
    }
    full = fmax(full, fabs(dout - din));
  }
  print_message("sign+ef %s n=%d: |sum delivered - sum in| <= %g after %d calls, %g after %d "
                "(largest sign magnitude %g)\n", algo, n, half, CALLS / 2, full, CALLS, smax);
  assert_true(full <= 8 * smax);        /* a few magnitudes: what the residuals hold */
  assert_true(full <= 1.5 * half + smax);   /* and not growing with the calls */
  free_jobs(jobs, n);
}

static void test_sign_ef_both_sides(void **state) {
  sign_tracks_inputs("direct", 2);
  sign_tracks_inputs("direct", 4);
  sign_tracks_inputs("hier-direct", 4);
}

/* hier-direct's pipeline: the same guarantees as the call in one piece */
static void test_hier_pipelined(void **state) {
  seg_bytes = "4096";
  quant_within_two_quantisations("quant:bits=4,bucket=128", 4, "hier-direct");
  quant_within_two_quantisations("quant:bits=8,round=stochastic,seed=2", 8, "hier-direct");
  sign_tracks_inputs("hier-direct", 4);
  seg_bytes = NULL;
}

/* bf16 casts value by value: cutting the call into slices changes no arithmetic, so the
 * pipelined call gives the unpipelined call's bits (and sends 16 slices' frame headers
 * instead of one's: the pipeline did run) */
static void test_hier_pipelined_same_bits(void **state) {
  const int ns[] = {4, 8};
  for (int k = 0; k < 2; k++) {
    int n = ns[k];
    rng = 11;
    job *whole = run("bf16", "hier-direct", n, 2);
    rng = 11;
    seg_bytes = "4096";
    job *sliced = run("bf16", "hier-direct", n, 2);
    seg_bytes = NULL;
    for (int r = 0; r < n; r++) assert_memory_equal(whole[r].x, sliced[r].x, 2 * N * 4);
    if (memcmp(whole[0].y, sliced[0].y, 2 * N * 4))
      fail_msg("bf16 hier-direct n=%d: the pipelined call's bits differ", n);
    assert_true(sliced[0].wire > whole[0].wire);
    free_jobs(whole, n);
    free_jobs(sliced, n);
  }
}

/* A NaN and an Inf in the inputs reach every rank's result through the pipeline (their
 * buckets are sent as they are), each counted once over the ranks */
static void test_hier_pipelined_nonfinite(void **state) {
  seg_bytes = "4096", nan_at = 12345, inf_at = 33333;
  job *jobs = run("quant:bits=4,bucket=128", "hier-direct", 4, 1);
  seg_bytes = NULL, nan_at = N, inf_at = N;
  uint64_t counted = 0;
  for (int r = 0; r < 4; r++) {
    assert_true(isnan(jobs[r].y[12345]));
    assert_true(isinf(jobs[r].y[33333]) && jobs[r].y[33333] > 0);
    counted += jobs[r].nonfinite;
  }
  assert_int_equal(counted, 2);
  for (size_t i = 0; i < N; i++)   /* and spoil nothing outside their buckets */
    if (i / 128 != 12345 / 128 && i / 128 != 33333 / 128) assert_true(isfinite(jobs[0].y[i]));
  free_jobs(jobs, 4);
}

/* Each rank counts the NaN and Inf of its share of the result, from the decoders' counts
 * (a frame's only non-finite values sit in raw buckets, counted from its payload) or, where
 * a frame straddles two shares, by reading its part back: over the ranks, every call's
 * non-finite values once, whether the result streams or not. At 6 ranks, 40000-byte
 * segments (4 slices) and 2 nodes the shares start at 6667 k (and 6667 * 3 = 20001 lies
 * inside the frame of values [20000, 21667)): the NaN at 20000 is rank 2's, the Inf at
 * 20500 rank 3's, both from one frame. */
static void test_hier_pipelined_nonfinite_counts(void **state) {
  static const char *specs[] = {"sign+ef", "sign:bucket=128", "quant:bits=4,bucket=128",
                                "quant:bits=8"};
  static const size_t at[][2] = {{20000, 20500}, {12345, 33333}, {0, N - 1}};
  const int ns[] = {4, 6, 8};
  for (size_t s = 0; s < sizeof specs / sizeof *specs; s++)
    for (int k = 0; k < 3; k++)
      for (size_t a = 0; a < sizeof at / sizeof *at; a++)
        for (int streamed = 0; streamed < 2; streamed++) {
          int n = ns[k];
          seg_bytes = "40000", nan_at = at[a][0], inf_at = at[a][1];
          stream_bytes = streamed ? "0" : "1024g";
          job *jobs = run(specs[s], "hier-direct", n, 2);
          seg_bytes = NULL, stream_bytes = NULL, nan_at = N, inf_at = N;
          uint64_t counted = 0, there = 0;
          for (int r = 0; r < n; r++) counted += jobs[r].nonfinite;
          for (size_t i = 0; i < (size_t)2 * N; i++) there += !isfinite(jobs[0].y[i]);
          if (counted != there || there != 2)
            fail_msg("%s n=%d NaN at %zu, Inf at %zu, %s: %llu counted, %llu in the result",
                     specs[s], n, at[a][0], at[a][1], streamed ? "streamed" : "plain",
                     (unsigned long long)counted, (unsigned long long)there);
          free_jobs(jobs, n);
        }
}

/* Sign's decode of the result outside each rank's share with streaming stores
 * (GCOMP_STREAM_BYTES 0: every call streams; 1024g: none does) changes no bit of any rank's
 * result nor any count. 40000-byte segments cut the calls into 4 slices whose shards start
 * alternately on and off 32-byte boundaries (10000 bytes each): both widths of streaming
 * stores run. */
static void test_hier_pipelined_streamed(void **state) {
  static const char *specs[] = {"sign+ef", "sign:bucket=128", "quant:bits=4,bucket=128"};
  const int ns[] = {4, 8};
  for (size_t s = 0; s < sizeof specs / sizeof *specs; s++)
    for (int k = 0; k < 2; k++) {
      int n = ns[k];
      seg_bytes = "40000", nan_at = 12345, inf_at = 33333;
      rng = 29, stream_bytes = "1024g";
      job *plain = run(specs[s], "hier-direct", n, 3);
      rng = 29, stream_bytes = "0";
      job *streamed = run(specs[s], "hier-direct", n, 3);
      seg_bytes = NULL, stream_bytes = NULL, nan_at = N, inf_at = N;
      if (memcmp(plain[0].y, streamed[0].y, (size_t)3 * N * 4))
        fail_msg("%s n=%d: the streamed result's bits differ", specs[s], n);
      for (int r = 0; r < n; r++) assert_int_equal(plain[r].nonfinite, streamed[r].nonfinite);
      assert_true(isnan(streamed[0].y[12345]) && isinf(streamed[0].y[33333]));
      free_jobs(plain, n);
      free_jobs(streamed, n);
    }
}

/* Where more ranks share the machine than it has CPUs (GCOMP_HOST_RANKS), the pipeline's
 * waits nap instead of spinning: the same bits and counts as with spins (1: off), and no
 * wait is lost while its ranks sleep (each rank here is a thread, napping on its own). */
static void test_hier_pipelined_napping(void **state) {
  static const char *specs[] = {"sign+ef", "quant:bits=4,bucket=128", "bf16"};
  for (size_t s = 0; s < sizeof specs / sizeof *specs; s++) {
    seg_bytes = "4096", nan_at = 12345, inf_at = 33333;
    rng = 31, host_ranks = "1";
    job *spin = run(specs[s], "hier-direct", 4, 3);
    rng = 31, host_ranks = "1048576";
    job *nap = run(specs[s], "hier-direct", 4, 3);
    seg_bytes = NULL, host_ranks = NULL, nan_at = N, inf_at = N;
    if (memcmp(spin[0].y, nap[0].y, (size_t)3 * N * 4))
      fail_msg("%s: the bits differ with napping waits", specs[s]);
    for (int r = 0; r < 4; r++) assert_int_equal(spin[r].nonfinite, nap[r].nonfinite);
    free_jobs(spin, 4);
    free_jobs(nap, 4);
  }
}

/* The pipeline's allgather in the node hands the other local ranks the frames to decode
 * instead of fp32 copies of the decoded piece (reduce/hier_pipe.c), and copies fp32 when
 * some rank's frames do not fit its slot. Either way every rank decodes the same bytes, so
 * both give the same bits; what a rank copied into the segment says which ran: fp32 copies
 * are the reduce-scatter's (its input for the other local ranks, (L-1)/L of it) plus its
 * own piece (1/L), frames only a fraction of that piece. */
static void frames_or_fp32(const char *spec, int n, const char *small_slot) {
  const int L = n / 2;
  const double rs = (double)N * 4 * CALLS * (L - 1) / L, piece = (double)N * 4 * CALLS / L;
  seg_bytes = "4096";
  rng = 17;
  job *frames = run(spec, "hier-direct", n, CALLS);
  rng = 17;
  slot_bytes = small_slot;
  job *copies = run(spec, "hier-direct", n, CALLS);
  slot_bytes = NULL, seg_bytes = NULL;
  if (memcmp(frames[0].y, copies[0].y, (size_t)CALLS * N * 4))
    fail_msg("%s n=%d: frames in the segment and fp32 copies give different bits", spec, n);
  /* local rank 0 of each node: out of place, the reduce-scatter reads its own piece from
   * the input, so it copies exactly rs + (fp32 allgather) piece */
  for (int r = 0; r < n; r += L) {
    print_message("%s n=%d rank %d: segment bytes %llu with frames, %llu with %s-byte slots "
                  "(fp32 would be %.0f)\n", spec, n, r, (unsigned long long)frames[r].shm,
                  (unsigned long long)copies[r].shm, small_slot, rs + piece);
    assert_true((double)frames[r].shm < rs + piece / 2);   /* frames (8-bit: 0.29 of it) */
    assert_true((double)copies[r].shm == rs + piece);      /* every slice copied fp32 */
  }
  free_jobs(frames, n);
  free_jobs(copies, n);
}

static void test_hier_pipelined_frames(void **state) {
  frames_or_fp32("quant:bits=4,bucket=128", 4, "256");
  frames_or_fp32("sign:bucket=128+ef", 4, "256");
  frames_or_fp32("quant:bits=8", 8, "256");
}

/* A bucket with a NaN or an Inf goes raw, so the frames of its slice grow: with slots
 * that hold the other slices' frames (4-bit, 2 nodes of 2 ranks: about 960 bytes of
 * 1024) but not those, the node's ranks all see it in that slice's round and copy fp32
 * from there on; the bits stay those of the run whose slots hold every slice's frames. */
static void test_hier_pipelined_frames_then_fp32(void **state) {
  const double rs = (double)N * 4 / 2, piece = (double)N * 4 / 2;
  seg_bytes = "4096", nan_at = 12345, inf_at = 33333;
  rng = 23;
  job *frames = run("quant:bits=4,bucket=128", "hier-direct", 4, 1);
  rng = 23;
  slot_bytes = "1024";
  job *mixed = run("quant:bits=4,bucket=128", "hier-direct", 4, 1);
  slot_bytes = NULL, seg_bytes = NULL, nan_at = N, inf_at = N;
  if (memcmp(frames[0].y, mixed[0].y, (size_t)N * 4))
    fail_msg("frames then fp32 copies: the bits differ from frames throughout");
  assert_true(isnan(mixed[3].y[12345]) && isinf(mixed[1].y[33333]));
  for (int r = 0; r < 4; r += 2) {
    print_message("rank %d: segment bytes %llu with frames, %llu with 1024-byte slots (fp32 "
                  "would be %.0f)\n", r, (unsigned long long)frames[r].shm,
                  (unsigned long long)mixed[r].shm, rs + piece);
    assert_true((double)frames[r].shm < rs + piece / 2);
    /* some slices went as frames, the NaN's slice and those after it as fp32 */
    assert_true(mixed[r].shm > frames[r].shm && (double)mixed[r].shm < rs + piece);
  }
  /* the pipeline counts each rank's share of the result as it writes it, the copied slices'
   * too: the NaN and the Inf once each over the ranks */
  uint64_t counted_frames = 0, counted_mixed = 0;
  for (int r = 0; r < 4; r++)
    counted_frames += frames[r].nonfinite, counted_mixed += mixed[r].nonfinite;
  assert_int_equal(counted_frames, 2);
  assert_int_equal(counted_mixed, 2);
  free_jobs(frames, 4);
  free_jobs(mixed, 4);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_quant_direct),
      cmocka_unit_test(test_quant_hier_direct),
      cmocka_unit_test(test_sign_ef_both_sides),
      cmocka_unit_test(test_hier_pipelined),
      cmocka_unit_test(test_hier_pipelined_same_bits),
      cmocka_unit_test(test_hier_pipelined_nonfinite),
      cmocka_unit_test(test_hier_pipelined_nonfinite_counts),
      cmocka_unit_test(test_hier_pipelined_frames),
      cmocka_unit_test(test_hier_pipelined_streamed),
      cmocka_unit_test(test_hier_pipelined_napping),
      cmocka_unit_test(test_hier_pipelined_frames_then_fp32),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
