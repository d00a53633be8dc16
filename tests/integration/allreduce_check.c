/* Multi-process allreduce check, started by gcomp-run or mpirun over real providers.
 *   allreduce_check dense         every dtype x op x awkward count, exact reference
 *   allreduce_check codecs        bf16 / fp16 / top-k+ef: bounded error, identical ranks
 *   allreduce_check kill VICTIM   VICTIM SIGKILLs itself mid-run; the others must fail in time
 *   allreduce_check stop VICTIM   VICTIM SIGSTOPs itself mid-run (printing its pid first); the
 *                                 others must fail in time; once continued, its own next call
 *                                 must fail too (its peers are gone), not hang
 *   allreduce_check corrupt CALL CULPRIT SPEC
 *                                 with GCOMP_FAULT=corrupt:rank=CULPRIT,call=CALL: calls with
 *                                 codec SPEC succeed before CALL; call CALL fails on every rank
 *                                 with GCOMP_ERR_CORRUPT naming CULPRIT, found by the rank or
 *                                 told by its abort notice (not by a timeout); the next call
 *                                 fails as the communicator's first failure said
 *   allreduce_check refused       creation must fail (a setting on one rank, or its build,
 *                                 differs: the test sets it); prints the status and detail
 *   allreduce_check big COUNT     float32 sums of COUNT elements (small integers: exact),
 *                                 with whatever GCOMP_ALGO / GCOMP_SEGMENT_BYTES the test sets
 * Exit 0 when every check passed; prints "allreduce_check: rank R: ..." lines. */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm.h"
#include "gcomp.h"
#include "gcomp_common.h"

static int rank_, size_;

static double input(int op, int r, size_t i) {
  unsigned h = (unsigned)(r * 2654435761u) ^ (unsigned)(i * 40503u + 17u);
  h ^= h >> 13;
  if (op == GCOMP_PROD) return (h & 1) ? 1.0 : ((h & 2) ? 2.0 : -1.0);   /* exact products */
  return (double)((int)(h % 61) - 30);   /* integers: sums exact in fp32 and wider */
}

/* What an exact result becomes in a 16-bit float: the library sums in fp32 and rounds once
 * to nearest even. Sums of up to 8 ranks' inputs are exact in bf16 (|x| <= 256); with more
 * ranks they need this rounding, and fp16 products of 16 or more ranks overflow to Inf. */
static double in_dtype(gcomp_dtype d, double x) {
  if (d == GCOMP_FLOAT16) return (double)(_Float16)x;
  if (d != GCOMP_BFLOAT16) return x;
  float f = (float)x;
  uint32_t u;
  memcpy(&u, &f, 4);
  u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
  memcpy(&f, &u, 4);
  return f;
}

static size_t dsize(gcomp_dtype d) {
  static const size_t s[] = {4, 8, 4, 8, 2, 2};
  return s[d];
}

static void put(gcomp_dtype d, void *b, size_t i, double v) {
  float f = (float)v;
  uint32_t u;
  memcpy(&u, &f, 4);
  switch (d) {
  case GCOMP_FLOAT32: ((float *)b)[i] = f; break;
  case GCOMP_FLOAT64: ((double *)b)[i] = v; break;
  case GCOMP_INT32: ((int32_t *)b)[i] = (int32_t)v; break;
  case GCOMP_INT64: ((int64_t *)b)[i] = (int64_t)v; break;
  case GCOMP_BFLOAT16: ((uint16_t *)b)[i] = (uint16_t)(u >> 16); break;   /* exact for these ints */
  case GCOMP_FLOAT16: {
    /* small integers: exact; build the half by hand */
    uint16_t h = 0;
    if (v != 0) {
      int e;
      double m = frexp(fabs(v), &e);
      h = (uint16_t)(((e - 1 + 15) << 10) | (uint16_t)llround((m * 2 - 1) * 1024));
      if (v < 0) h |= 0x8000;
    }
    ((uint16_t *)b)[i] = h;
    break;
  }
  }
}

static double get(gcomp_dtype d, const void *b, size_t i) {
  switch (d) {
  case GCOMP_FLOAT32: return ((const float *)b)[i];
  case GCOMP_FLOAT64: return ((const double *)b)[i];
  case GCOMP_INT32: return ((const int32_t *)b)[i];
  case GCOMP_INT64: return (double)((const int64_t *)b)[i];
  case GCOMP_BFLOAT16: {
    uint32_t u = (uint32_t)((const uint16_t *)b)[i] << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
  }
  case GCOMP_FLOAT16: {
    uint16_t h = ((const uint16_t *)b)[i];
    int e = (h >> 10) & 31, m = h & 1023;
    double v = e ? ldexp(1 + m / 1024.0, e - 15) : ldexp(m / 1024.0, -14);
    return (h & 0x8000) ? -v : v;
  }
  }
  return 0;
}

static uint64_t digest(const void *p, size_t n) {
  const unsigned char *b = p;
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

/* All ranks hold the same bytes: the min and max of the digest agree. */
static int same_everywhere(gcomp_comm *comm, const void *buf, size_t bytes) {
  int64_t h = (int64_t)(digest(buf, bytes) >> 1), lo = h, hi = h;
  if (gcomp_allreduce(comm, &lo, &lo, 1, GCOMP_INT64, GCOMP_MIN, NULL, 0) ||
      gcomp_allreduce(comm, &hi, &hi, 1, GCOMP_INT64, GCOMP_MAX, NULL, 0))
    return 0;
  return lo == hi;
}

static int fail(const char *what) {
  printf("allreduce_check: rank %d: FAILED %s: %s\n", rank_, what, gcomp_last_error());
  return 1;
}

static int dense(gcomp_comm *comm) {
  static const size_t counts[] = {0, 1, 2, 3, 1000, 65537, 1u << 20};
  char big_algo[32] = "";
  int bad = 0;
  for (gcomp_dtype d = GCOMP_FLOAT32; d <= GCOMP_FLOAT16; d++)
    for (gcomp_op op = GCOMP_SUM; op <= GCOMP_PROD; op++)
      for (size_t c = 0; c < sizeof counts / sizeof *counts; c++) {
        size_t n = counts[c];
        if (n > 65537 && (op != GCOMP_SUM || d == GCOMP_FLOAT64)) continue;   /* keep it quick */
        uint8_t *buf = malloc(n * dsize(d) + 1), *in = malloc(n * dsize(d) + 1);
        for (size_t i = 0; i < n; i++) put(d, in, i, input(op, rank_, i));
        int inplace = (int)(c + op) & 1;
        if (inplace) memcpy(buf, in, n * dsize(d));
        int st = gcomp_allreduce(comm, inplace ? buf : in, buf, n, d, op, NULL, 0);
        if (n > 65537) snprintf(big_algo, sizeof big_algo, "%s", gcomp_comm_last_algo(comm));
        char what[96];
        snprintf(what, sizeof what, "dtype %d op %d count %zu", d, op, n);
        if (st) return fail(what);
        for (size_t i = 0; i < n && !bad; i++) {
          double want = input(op, 0, i);
          for (int r = 1; r < size_; r++) {
            double v = input(op, r, i);
            want = op == GCOMP_SUM || op == GCOMP_AVG ? want + v
                 : op == GCOMP_PROD ? want * v
                 : op == GCOMP_MIN ? fmin(want, v) : fmax(want, v);
          }
          if (op == GCOMP_AVG) want = (d == GCOMP_INT32 || d == GCOMP_INT64) ? trunc(want / size_) : want / size_;
          if (op != GCOMP_AVG) want = in_dtype(d, want);
          double got = get(d, buf, i);
          double tol = op == GCOMP_AVG ? fabs(want) * (d >= GCOMP_BFLOAT16 ? 0x1p-7 : 1e-6) : 0;
          if (!(fabs(got - want) <= tol) && !(isinf(want) && got == want)) {
            printf("allreduce_check: rank %d: FAILED %s: [%zu] = %g, want %g\n", rank_, what, i, got, want);
            bad = 1;
          }
        }
        if (!same_everywhere(comm, buf, n * dsize(d))) {
          printf("allreduce_check: rank %d: FAILED %s: ranks differ\n", rank_, what);
          bad = 1;
        }
        free(buf);
        free(in);
        if (bad) return 1;
      }
  printf("allreduce_check: rank %d: dense passed (%s for 1 Mi elements)\n", rank_, big_algo);
  return 0;
}

/* Large calls, out of place and in place, twice each. With small segments they used to
 * post more receives to one peer than libfabric 1.17's shm has entries for, which stalled
 * every rank until the timeout. */
static int big(gcomp_comm *comm, size_t n) {
  float *in = malloc(n * sizeof *in + 1), *out = malloc(n * sizeof *out + 1);
  if (!in || !out) {
    free(in), free(out);
    return fail("allocating");
  }
  size_t wrong = 0;
  for (int call = 0; call < 4 && !wrong; call++) {
    for (size_t i = 0; i < n; i++) in[i] = (float)((i * 7u + (size_t)rank_ * 3u + (size_t)call) % 1000u);
    float *src = call & 1 ? out : in;
    if (call & 1) memcpy(out, in, n * sizeof *in);
    if (gcomp_allreduce(comm, src, out, n, GCOMP_FLOAT32, GCOMP_SUM, NULL, 0)) {
      free(in), free(out);
      return fail(call & 1 ? "big allreduce in place" : "big allreduce");
    }
    for (size_t i = 0; i < n; i++) {
      double want = 0;
      for (int r = 0; r < size_; r++) want += (double)((i * 7u + (size_t)r * 3u + (size_t)call) % 1000u);
      if ((double)out[i] != want && wrong++ == 0)
        printf("allreduce_check: rank %d: FAILED big call %d: [%zu] = %g, want %g\n", rank_, call, i,
               out[i], want);
    }
  }
  free(in), free(out);
  const char *algo = gcomp_comm_last_algo(comm), *want = getenv("GCOMP_ALGO");
  printf("allreduce_check: rank %d: big: 4 calls of %zu floats by %s, %zu wrong\n", rank_, n,
         algo, wrong);
  if (want && strcmp(want, "auto") != 0 && strcmp(algo, want) != 0) {
    printf("allreduce_check: rank %d: FAILED big: ran %s, not GCOMP_ALGO=%s\n", rank_, algo, want);
    return 1;
  }
  return wrong ? 1 : 0;
}

static int codecs(gcomp_comm *comm) {
  static const char *specs[] = {"bf16", "fp16", "topk:ratio=0.01+ef", "bf16+ef+zstd"};
  size_t n = (1u << 20) + 3;
  float *x = malloc(n * sizeof *x), *g = malloc(n * sizeof *g);
  char algo[32] = "";
  double *cum_got = malloc(n * sizeof(double)), *cum_exact = malloc(n * sizeof(double)),
         *cum_slack = malloc(n * sizeof(double));
  for (size_t s = 0; s < sizeof specs / sizeof *specs; s++) {
    gcomp_codec *codec;
    if (gcomp_codec_create(specs[s], &codec)) return fail(specs[s]);
    for (size_t i = 0; i < n; i++) cum_got[i] = cum_exact[i] = cum_slack[i] = 0;
    for (int step = 0; step < 3; step++) {
      for (size_t i = 0; i < n; i++)
        g[i] = x[i] = (float)(input(GCOMP_SUM, rank_ + step, i) * 1e-4);
      if (gcomp_allreduce(comm, x, x, n, GCOMP_FLOAT32, GCOMP_SUM, codec, 5)) return fail(specs[s]);
      snprintf(algo, sizeof algo, "%s", gcomp_comm_last_algo(comm));
      if (!same_everywhere(comm, x, n * sizeof *x)) {
        printf("allreduce_check: rank %d: FAILED %s: ranks differ\n", rank_, specs[s]);
        return 1;
      }
      if (strncmp(specs[s], "topk", 4) != 0) {
        /* casts: two roundings at most per value. With error feedback the residual of one
         * step is sent in the next, so the bound holds for the running sum over steps, with
         * the last step's residual (one rounding of each input) still outstanding. */
        int ef = strstr(specs[s], "+ef") != NULL;
        double u = specs[s][0] == 'b' ? 0x1p-8 : 0x1p-11;
        for (size_t i = 0; i < n; i++) {
          double exact = 0, mag = 0;
          for (int r = 0; r < size_; r++) {
            double v = (float)(input(GCOMP_SUM, r + step, i) * 1e-4);
            exact += v, mag += fabs(v);
          }
          double second = u * (fabs(exact) + u * mag) + size_ * 0x1p-24 * mag + 1e-30;
          if (ef) {
            cum_got[i] += x[i], cum_exact[i] += exact, cum_slack[i] += second + 2 * u * mag;
          }
          double err = ef ? fabs(cum_got[i] - cum_exact[i]) : fabs(x[i] - exact);
          double tol = ef ? cum_slack[i] + u * mag : u * mag + second;
          if (err > tol) {
            printf("allreduce_check: rank %d: FAILED %s step %d: [%zu] error %g > %g\n", rank_,
                   specs[s], step, i, err, tol);
            return 1;
          }
        }
      }
    }
    printf("allreduce_check: rank %d: %s passed (%s)\n", rank_, specs[s], algo);
    gcomp_codec_destroy(codec);
  }
  free(x), free(g), free(cum_got), free(cum_exact), free(cum_slack);
  return 0;
}

/* Ranks pass different counts (a user error): every rank must get an error saying so, and
 * none may hang (libfabric 1.17's shm deadlocked on truncating a message over 4 KiB). */
static int mismatch_run(gcomp_comm *comm) {
  size_t n = rank_ % 2 ? 3000 : 1000;   /* 12000 vs 4000 bytes: over shm's inject size */
  float *x = calloc(n, sizeof *x);
  int st = gcomp_allreduce(comm, x, x, n, GCOMP_FLOAT32, GCOMP_SUM, NULL, 0);
  free(x);
  if (st == GCOMP_OK) {
    printf("allreduce_check: rank %d: FAILED: %zu elements against the others' counts succeeded\n",
           rank_, n);
    return 1;
  }
  /* the diagnosis of one of the checks, not a timeout (whose message suggests the same) */
  const char *e = gcomp_last_error();
  if (st == GCOMP_ERR_TIMEOUT || !strstr(e, "same count") ||
      !(strstr(e, " sent ") || strstr(e, "does not fit") || strstr(e, "exceeds the receive") ||
        strstr(e, " called "))) {
    printf("allreduce_check: rank %d: FAILED: the error does not say why: %s\n", rank_, e);
    return 1;
  }
  printf("allreduce_check: rank %d: mismatch refused: %s\n", rank_, gcomp_strerror(st));
  return 0;   /* both ranks live on: destroying the failed communicator must work too */
}

/* One rank corrupts a frame it sends at call `bad` (GCOMP_FAULT, set by the test): every
 * rank, not only the receiver, must fail that call with GCOMP_ERR_CORRUPT naming the
 * culprit, without waiting out the timeout: its detail says it found the corruption itself
 * or heard it in a peer's notice (a rank that timed out says "rank N reported" instead);
 * the communicator is then unusable (every later call fails, naming the first failure) and
 * can be destroyed. The times are printed, not asserted. */
static int corrupt_run(gcomp_comm *comm, int bad, int culprit, const char *spec) {
  size_t n = (1u << 18) + 5;
  float *x = malloc(n * sizeof *x);
  gcomp_codec *codec = NULL;
  if (!x || gcomp_codec_create(spec, &codec)) {
    free(x);
    return fail(spec);
  }
  int rc = 0;
  for (int call = 1; call <= bad + 1 && !rc; call++) {
    for (size_t i = 0; i < n; i++) x[i] = (float)((int)((i + (size_t)rank_) % 7) - 3);
    uint64_t t0 = gcomp_now_ns();
    int st = gcomp_allreduce(comm, x, x, n, GCOMP_FLOAT32, GCOMP_SUM, codec, 1);
    unsigned long long ms = (gcomp_now_ns() - t0) / 1000000;
    const char *e = gcomp_last_error();
    if (call < bad) {
      /* small integers: exact in bf16, within one quantisation step otherwise */
      double worst = 0;
      for (size_t i = 0; i < n && !st; i++) {
        double want = 0;
        for (int r = 0; r < size_; r++) want += (double)((int)((i + (size_t)r) % 7) - 3);
        if (fabs(x[i] - want) > worst) worst = fabs(x[i] - want);
      }
      if (st || worst > 0.25 * size_) {
        printf("allreduce_check: rank %d: FAILED call %d before the fault: %s, worst error %g: %s\n",
               rank_, call, gcomp_strerror(st), worst, st ? e : "");
        rc = 1;
      }
    } else if (call == bad) {
      char want[64], found[64];
      snprintf(want, sizeof want, "data from rank %d failed validation", culprit);
      snprintf(found, sizeof found, "failed validation at rank %d:", rank_);
      printf("allreduce_check: rank %d: corrupt call %d: %s after %llu ms: %s\n", rank_, call,
             gcomp_strerror(st), ms, e);
      int told = strstr(e, "'s notice (call seq") != NULL, own = strncmp(e, want, strlen(want)) == 0;
      if (st != GCOMP_ERR_CORRUPT || !strstr(e, want) || (!told && !(own && strstr(e, found)))) {
        printf("allreduce_check: rank %d: FAILED: call %d must fail with GCOMP_ERR_CORRUPT naming "
               "rank %d, found here or told by a notice (not after a timeout)\n", rank_, call,
               culprit);
        rc = 1;
      }
    } else if (st != GCOMP_ERR_PEER || !strstr(e, "unusable") || !strstr(e, "GCOMP_ERR_CORRUPT")) {
      printf("allreduce_check: rank %d: FAILED: the call after the corrupt one returned %s after "
             "%llu ms (want GCOMP_ERR_PEER, naming the corrupt call): %s\n", rank_,
             gcomp_strerror(st), ms, st ? e : "");
      rc = 1;
    } else {
      printf("allreduce_check: rank %d: then unusable: %s\n", rank_, gcomp_strerror(st));
    }
  }
  gcomp_codec_destroy(codec);
  free(x);
  if (!rc) printf("allreduce_check: rank %d: corrupt passed (%s)\n", rank_, spec);
  return rc;
}

static int kill_run(gcomp_comm *comm, int victim, int sig) {
  size_t n = 4u << 20;
  float *x = calloc(n, sizeof *x);
  uint64_t t0 = 0;
  int resumed = 0;
  for (int it = 0; it < 1000; it++) {
    if (it == 3 && rank_ == victim) {
      if (sig == SIGSTOP) printf("allreduce_check: rank %d: stopping (pid %d)\n", rank_, (int)getpid());
      raise(sig);
      resumed = 1;   /* SIGSTOP only: someone sent SIGCONT */
    }
    t0 = gcomp_now_ns();
    int st = gcomp_allreduce(comm, x, x, n, GCOMP_FLOAT32, GCOMP_SUM, NULL, 0);
    if (st) {
      printf("allreduce_check: rank %d: %serror after %llu ms: %s: %s\n", rank_,
             resumed ? "resumed: " : "", (unsigned long long)((gcomp_now_ns() - t0) / 1000000),
             gcomp_strerror(st), gcomp_last_error());
      free(x);
      return 3;
    }
  }
  printf("allreduce_check: rank %d: no error although rank %d %s\n", rank_, victim,
         sig == SIGKILL ? "died" : "was stopped");
  free(x);
  return 1;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc < 2) {
    fprintf(stderr, "usage: allreduce_check dense|codecs|big COUNT|kill VICTIM|stop VICTIM|mismatch|corrupt CALL CULPRIT SPEC\n");
    return 2;
  }
  gcomp_comm *comm;
  int st = gcomp_comm_init_env(&comm);
  if (!strcmp(argv[1], "refused")) {
    /* the script checks every rank's line: the same error, naming the rank and the value */
    printf("allreduce_check: refused: %s: %s\n", st ? gcomp_strerror(st) : "FAILED: created",
           st ? gcomp_last_error() : "");
    if (!st) gcomp_comm_destroy(comm);
    return st ? 0 : 1;
  }
  if (st) {
    printf("allreduce_check: init failed: %s: %s\n", gcomp_strerror(st), gcomp_last_error());
    return 1;
  }
  rank_ = gcomp_comm_rank(comm), size_ = gcomp_comm_size(comm);
  int rc = 2;
  if (!strcmp(argv[1], "dense")) rc = dense(comm);
  else if (!strcmp(argv[1], "codecs")) rc = codecs(comm);
  else if (!strcmp(argv[1], "big") && argc > 2) rc = big(comm, (size_t)strtoull(argv[2], NULL, 0));
  else if (!strcmp(argv[1], "kill") && argc > 2) rc = kill_run(comm, atoi(argv[2]), SIGKILL);
  else if (!strcmp(argv[1], "stop") && argc > 2) rc = kill_run(comm, atoi(argv[2]), SIGSTOP);
  else if (!strcmp(argv[1], "mismatch")) rc = mismatch_run(comm);
  else if (!strcmp(argv[1], "corrupt") && argc > 4)
    rc = corrupt_run(comm, atoi(argv[2]), atoi(argv[3]), argv[4]);
  /* also after a failure (rc 3, the peers gone or stopped): a failed communicator must still
   * be destroyable, and skipping it left the communicator to LeakSanitizer whenever no
   * register happened to hold its pointer at exit */
  uint64_t t0 = gcomp_now_ns();
  gcomp_comm_destroy(comm);
  /* gcomp.h: after a failure destroy waits at most 1 s for goodbyes (the scripts check) */
  if (rc == 3)
    printf("allreduce_check: rank %d: destroyed after the failure in %llu ms\n", rank_,
           (unsigned long long)((gcomp_now_ns() - t0) / 1000000));
  return rc;
}
