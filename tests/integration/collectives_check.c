/* Multi-process check of reduce_scatter, allgather, broadcast, barrier and alltoall,
 * started by gcomp-run over real providers.
 *   collectives_check dense [RS AG [intra|A2A]]
 *                                  every collective x dtype x op x awkward count, in place
 *                                  and not, bitwise against a serial reference; intra:
 *                                  every fp32 sum's reduce_scatter must have encoded
 *                                  (GCOMP_INTRA_CODEC inside the nodes); A2A (alltoall:NAME):
 *                                  the algorithm every alltoall must have run
 *   collectives_check codecs [RS AG] compressed reduce_scatter and allgather: within the
 *                                  codec's bound, allgather the same bits on every rank
 *                                  RS, AG: the algorithms every reduce_scatter and allgather
 *                                  must have run (a forced one the planner fell back from
 *                                  fails the check)
 *   collectives_check kill VICTIM COLL / stop VICTIM COLL
 *                                  VICTIM SIGKILLs / SIGSTOPs itself during a run of COLL
 *                                  calls; the others must fail in time (the scripts check)
 *   collectives_check corrupt CALL CULPRIT SPEC COLL [late|ALGO]
 *                                  with GCOMP_FAULT=corrupt:rank=CULPRIT,call=CALL: call CALL
 *                                  (COLL: reduce_scatter or allgather with codec SPEC) fails
 *                                  on every rank with GCOMP_ERR_CORRUPT naming CULPRIT;
 *                                  ALGO: the algorithm the calls before it must have run
 * Prints "collectives_check: rank R: ..." lines; exit 0 when every check passed, 3 after
 * an expected error. Only gcomp.h. */
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gcomp.h"

static int rank_, size_;

static uint64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static size_t dsize(gcomp_dtype d) {
  static const size_t s[] = {4, 8, 4, 8, 2, 2};
  return s[d];
}

/* small integers (products: +-1, +-2), exact in every dtype and every reduction order */
static double input(int op, int r, size_t i, int salt) {
  unsigned h = (unsigned)(r * 2654435761u) ^ (unsigned)(i * 40503u + 17u + (unsigned)salt * 7919u);
  h ^= h >> 13;
  if (op == GCOMP_PROD) return (h & 1) ? 1.0 : ((h & 2) ? 2.0 : -1.0);
  return (double)((int)(h % 17) - 8);
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
  case GCOMP_BFLOAT16: ((uint16_t *)b)[i] = (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16); break;
  case GCOMP_FLOAT16: {
    _Float16 h = (_Float16)f;
    memcpy((uint16_t *)b + i, &h, 2);
    break;
  }
  }
}

/* The reduction of element i over the ranks (AVG: in the working type, fp32 for 16-bit) */
static double reduced(gcomp_dtype d, int op, size_t i, int salt) {
  double acc = input(op, 0, i, salt);
  for (int r = 1; r < size_; r++) {
    double v = input(op, r, i, salt);
    acc = op == GCOMP_PROD ? acc * v : op == GCOMP_MIN ? fmin(acc, v) : op == GCOMP_MAX ? fmax(acc, v) : acc + v;
  }
  if (op != GCOMP_AVG) return acc;
  if (d == GCOMP_INT32 || d == GCOMP_INT64) return trunc(acc / size_);
  if (d == GCOMP_FLOAT64) return acc / size_;
  return (double)((float)acc / (float)size_);
}

static int bad_;
static const char *want_rs_, *want_ag_, *want_a2a_;
static int want_intra_;   /* GCOMP_INTRA_CODEC must have encoded inside the nodes */

/* The call just made ran the algorithm the test forced (when it names one; a call of no
 * elements runs none) */
static void ran(const gcomp_comm *comm, const char *what, const char *want, size_t count) {
  const char *got = gcomp_comm_last_algo(comm);
  if (want && count && (!got || strcmp(got, want))) {
    printf("collectives_check: rank %d: FAILED %s: ran %s, not %s\n", rank_, what,
           got ? got : "nothing", want);
    bad_++;
  }
}
static void verdict(const char *what, int st, const void *got, const void *want, size_t bytes) {
  if (st) {
    printf("collectives_check: rank %d: FAILED %s: %s: %s\n", rank_, what, gcomp_strerror(st),
           gcomp_last_error());
    bad_++;
  } else if (memcmp(got, want, bytes)) {
    printf("collectives_check: rank %d: FAILED %s: wrong result\n", rank_, what);
    bad_++;
  }
}

static int dense(gcomp_comm *comm) {
  static const size_t counts[] = {0, 3, 1001, 70001};
  int salt = 0;
  for (size_t ci = 0; ci < sizeof counts / sizeof *counts; ci++) {
    size_t k = counts[ci];
    for (gcomp_dtype d = GCOMP_FLOAT32; d <= GCOMP_FLOAT16; d++) {
      if (k > 1001 && d != GCOMP_FLOAT32 && d != GCOMP_BFLOAT16) continue;   /* keep it quick */
      size_t es = dsize(d), all = k * (size_t)size_;
      uint8_t *a = malloc(all * es + 8), *b = malloc(all * es + 8), *w = malloc(all * es + 8);
      char what[96];
      for (int op = GCOMP_SUM; op <= GCOMP_PROD; op++) {
        if (k > 3 && op != GCOMP_SUM && op != GCOMP_MAX && d != GCOMP_INT32) continue;
        int ip = (int)(ci + (size_t)op) & 1;
        salt++;
        for (size_t i = 0; i < all; i++) put(d, a, i, input(op, rank_, i, salt));
        for (size_t i = 0; i < k; i++) put(d, w, i, reduced(d, op, (size_t)rank_ * k + i, salt));
        void *out = ip ? a + (size_t)rank_ * k * es : b;
        snprintf(what, sizeof what, "reduce_scatter dtype %d op %d count %zu inplace %d", d, op, k, ip);
        gcomp_comm_stats before = {.struct_size = sizeof before}, after = before;
        gcomp_comm_get_stats(comm, &before);
        verdict(what, gcomp_reduce_scatter(comm, a, out, k, d, (gcomp_op)op, NULL, 0), out, w, k * es);
        ran(comm, what, want_rs_, k);
        gcomp_comm_get_stats(comm, &after);
        /* fp32 sums cross the node through the intra codec (bf16 holds these small
         * integers and their node sums exactly: the result stays bitwise) */
        int coded = d == GCOMP_FLOAT32 && (op == GCOMP_SUM || op == GCOMP_AVG) && k;
        if (want_intra_ && coded && !(after.encode_s > before.encode_s)) {
          printf("collectives_check: rank %d: FAILED %s: GCOMP_INTRA_CODEC encoded nothing\n", rank_, what);
          bad_++;
        }
      }
      for (int ip = 0; ip < 2; ip++) {
        salt++;
        for (size_t i = 0; i < all; i++) put(d, w, i, input(0, (int)(i / k), i, salt));
        memset(b, 0x33, all * es);
        uint8_t *mine = ip ? b + (size_t)rank_ * k * es : a;
        for (size_t i = 0; i < k; i++) put(d, mine, i, input(0, rank_, (size_t)rank_ * k + i, salt));
        snprintf(what, sizeof what, "allgather dtype %d count %zu inplace %d", d, k, ip);
        verdict(what, gcomp_allgather(comm, mine, b, k, d, NULL, 0), b, w, all * es);
        ran(comm, what, want_ag_, k);
      }
      for (int root = 0; root < size_; root += size_ > 2 ? size_ - 1 : 1) {
        salt++;
        for (size_t i = 0; i < all; i++) put(d, w, i, input(0, root, i, salt));
        if (rank_ == root) memcpy(a, w, all * es);
        else memset(a, 0x44, all * es);
        snprintf(what, sizeof what, "broadcast dtype %d count %zu root %d", d, all, root);
        verdict(what, gcomp_broadcast(comm, a, all, d, root), a, w, all * es);
      }
      for (int ip = 0; ip < 2; ip++) {
        salt++;
        for (size_t i = 0; i < all; i++) put(d, a, i, input(0, rank_, i, salt));
        for (size_t i = 0; i < all; i++) put(d, w, i, input(0, (int)(i / k), (size_t)rank_ * k + i % k, salt));
        void *out = ip ? a : b;
        snprintf(what, sizeof what, "alltoall dtype %d count %zu inplace %d", d, k, ip);
        verdict(what, gcomp_alltoall(comm, a, out, k, d), out, w, all * es);
        ran(comm, what, want_a2a_, k);
      }
      free(a), free(b), free(w);
    }
    verdict("barrier", gcomp_barrier(comm), "", "", 0);
  }
  /* the non-blocking twins in one queue with an allreduce */
  float x[64], y[64 * 16], z[64 * 16], ar = 1;
  gcomp_request *req[4];
  for (int i = 0; i < 64; i++) x[i] = (float)(rank_ * 64 + i);
  int st = gcomp_iallreduce(comm, &ar, &ar, 1, GCOMP_FLOAT32, GCOMP_SUM, NULL, 0, &req[0]);
  if (!st) st = gcomp_iallgather(comm, x, y, 64, GCOMP_FLOAT32, NULL, 0, &req[1]);
  if (!st) st = gcomp_ibarrier(comm, &req[2]);
  if (!st) st = gcomp_ialltoall(comm, y, z, 64, GCOMP_FLOAT32, &req[3]);
  for (int k = 0; k < 4 && !st; k++) st = gcomp_request_wait(req[k]);
  int ok = !st && ar == (float)size_;
  for (int i = 0; i < 64 * size_ && ok; i++) ok = y[i] == (float)i && z[i] == (float)(rank_ * 64 + i % 64);
  verdict("non-blocking", st, &ok, &(int){1}, sizeof ok);
  if (!bad_) printf("collectives_check: rank %d: dense passed (%s last)\n", rank_, gcomp_comm_last_algo(comm));
  return bad_ ? 1 : 0;
}

static float cval(int r, size_t i) { return (float)sin(0.001 * (double)i * (r + 1)) + 0.01f * (float)r; }

/* hier-direct over node runs (consecutive ranks, equal nodes) keeps the owner's own node
 * sum in fp32 (reduce/hier_rs.c): with every other node's contribution zero, an owner's
 * result is its node's sum up to fp32 rounding, where 4 bits would err by up to 1/15 of the
 * range. Checked only where the call ran hier-direct over node runs. */
static int own_exact(gcomp_comm *comm, gcomp_codec *codec, size_t k, float *in, float *out) {
  int32_t me = gcomp_comm_node(comm), *node = malloc(sizeof(int32_t) * (size_t)size_);
  int st = node ? gcomp_allgather(comm, &me, node, 1, GCOMP_INT32, NULL, 0) : GCOMP_ERR_NOMEM;
  int g = size_ / gcomp_comm_nnodes(comm), runs = !st && g > 1;
  for (int r = 0; r < size_ && runs; r++)
    for (int q = 0; q < size_; q++) runs &= (node[r] == node[q]) == (r / g == q / g);
  for (size_t i = 0; i < k * (size_t)size_ && !st; i++)
    in[i] = node[i / k] == me ? cval(rank_, i) : 0.0f;
  if (!st) st = gcomp_reduce_scatter(comm, in, out, k, GCOMP_FLOAT32, GCOMP_SUM, codec, 11);
  double worst = 0;
  for (size_t i = 0; i < k && !st; i++) {
    double want = 0;
    for (int r = 0; r < size_; r++) want += node[r] == me ? cval(r, (size_t)rank_ * k + i) : 0;
    worst = fmax(worst, fabs(out[i] - want));
  }
  free(node);
  if (st || (runs && !strcmp(gcomp_comm_last_algo(comm), "reduce_scatter:hier-direct") &&
             worst > 1e-5)) {
    printf("collectives_check: rank %d: FAILED own node's sum through hier-direct: %s, error %g\n",
           rank_, gcomp_strerror(st), worst);
    return 1;
  }
  if (runs) printf("collectives_check: rank %d: own node's sum error %g\n", rank_, worst);
  return 0;
}

/* Compressed reduce_scatter and allgather (GCOMP_CODEC_MIN_BYTES=0 from the test) */
static int codecs(gcomp_comm *comm) {
  static const char *const specs[] = {"quant:bits=8", "quant:bits=4+ef", "bf16"};
  static const double bound[] = {2.0 / 255, 2.0 / 15, 1.0 / 128};
  size_t k = 100003;
  float *in = malloc(sizeof(float) * k * (size_t)size_), *out = malloc(sizeof(float) * k * (size_t)size_);
  for (int s = 0; s < 3; s++) {
    gcomp_codec *codec = NULL;
    if (gcomp_codec_create(specs[s], &codec)) return printf("codec %s\n", specs[s]), 1;
    for (size_t i = 0; i < k * (size_t)size_; i++) in[i] = cval(rank_, i);
    int st = gcomp_reduce_scatter(comm, in, out, k, GCOMP_FLOAT32, GCOMP_SUM, codec, 7);
    double worst = 0;
    for (size_t i = 0; i < k && !st; i++) {
      double want = 0;
      for (int r = 0; r < size_; r++) want += cval(r, (size_t)rank_ * k + i);
      worst = fmax(worst, fabs(out[i] - want));
    }
    if (st || worst > bound[s] * size_) {
      printf("collectives_check: rank %d: FAILED reduce_scatter %s: %s, error %g\n", rank_, specs[s],
             gcomp_strerror(st), worst);
      bad_++;
    }
    const char *rs_algo = gcomp_comm_last_algo(comm);
    ran(comm, "compressed reduce_scatter", want_rs_, k);
    if (s == 1) bad_ += own_exact(comm, codec, k, in, out);
    st = gcomp_allgather(comm, in + (size_t)rank_ * k, out, k, GCOMP_FLOAT32, codec, 8);
    ran(comm, "compressed allgather", want_ag_, k);
    worst = 0;
    for (size_t i = 0; i < k * (size_t)size_ && !st; i++) worst = fmax(worst, fabs(out[i] - cval((int)(i / k), i)));
    /* every rank the same bits: compare digests through a MIN and MAX allreduce */
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < k * (size_t)size_ * 4; i++) h = (h ^ ((uint8_t *)out)[i]) * 1099511628211ull;
    int64_t lo = (int64_t)(h >> 1), hi = lo;
    if (!st) st = gcomp_allreduce(comm, &lo, &lo, 1, GCOMP_INT64, GCOMP_MIN, NULL, 0);
    if (!st) st = gcomp_allreduce(comm, &hi, &hi, 1, GCOMP_INT64, GCOMP_MAX, NULL, 0);
    if (st || worst > bound[s] || lo != hi) {
      printf("collectives_check: rank %d: FAILED allgather %s: %s, error %g, same %d\n", rank_,
             specs[s], gcomp_strerror(st), worst, lo == hi);
      bad_++;
    } else {
      printf("collectives_check: rank %d: %s: reduce_scatter by %s, allgather identical (error %g)\n",
             rank_, specs[s], rs_algo, worst);
    }
    gcomp_codec_destroy(codec);
  }
  free(in), free(out);
  return bad_ ? 1 : 0;
}

/* One call of COLL over about 4 MiB a rank */
static int one(gcomp_comm *comm, const char *coll, float *a, float *b, size_t k) {
  if (!strcmp(coll, "reduce_scatter"))
    return gcomp_reduce_scatter(comm, a, b, k, GCOMP_FLOAT32, GCOMP_SUM, NULL, 0);
  if (!strcmp(coll, "allgather")) return gcomp_allgather(comm, a, b, k, GCOMP_FLOAT32, NULL, 0);
  if (!strcmp(coll, "broadcast")) return gcomp_broadcast(comm, a, k * (size_t)size_, GCOMP_FLOAT32, 0);
  if (!strcmp(coll, "alltoall")) return gcomp_alltoall(comm, a, b, k, GCOMP_FLOAT32);
  if (!strcmp(coll, "barrier")) return gcomp_barrier(comm);
  return gcomp_allreduce(comm, a, b, k * (size_t)size_, GCOMP_FLOAT32, GCOMP_SUM, NULL, 0);
}

static int kill_run(gcomp_comm *comm, int victim, int sig, const char *coll) {
  size_t k = (1u << 20) / (size_t)size_;
  float *a = calloc(k * (size_t)size_, sizeof *a), *b = calloc(k * (size_t)size_, sizeof *b);
  int resumed = 0;
  for (int it = 0; it < 100000; it++) {
    if (it == 3 && rank_ == victim) {
      if (sig == SIGSTOP) printf("collectives_check: rank %d: stopping (pid %d)\n", rank_, (int)getpid());
      raise(sig);
      resumed = 1;
    }
    uint64_t t0 = now_ms();
    int st = one(comm, coll, a, b, k);
    if (st) {
      printf("collectives_check: rank %d: %serror after %llu ms: %s: %s\n", rank_,
             resumed ? "resumed: " : "", (unsigned long long)(now_ms() - t0), gcomp_strerror(st),
             gcomp_last_error());
      free(a), free(b);
      return 3;
    }
  }
  printf("collectives_check: rank %d: no error although rank %d %s\n", rank_, victim,
         sig == SIGKILL ? "died" : "was stopped");
  free(a), free(b);
  return 1;
}

static int corrupt_run(gcomp_comm *comm, int bad, int culprit, const char *spec, const char *coll,
                       int late, const char *algo, long timeout) {
  size_t k = (1u << 16) + 3;
  float *a = malloc(sizeof(float) * k * (size_t)size_), *b = malloc(sizeof(float) * k * (size_t)size_);
  gcomp_codec *codec = NULL;
  if (gcomp_codec_create(spec, &codec)) return 1;
  timeout += late ? 3000 : 0;
  int rc = 0, ag = !strcmp(coll, "allgather");
  for (int call = 1; call <= bad + 1 && !rc; call++) {
    for (size_t i = 0; i < k * (size_t)size_; i++) a[i] = (float)((int)((i + (size_t)rank_) % 7) - 3);
    uint64_t t0 = now_ms();
    int st = ag ? gcomp_allgather(comm, a, b, k, GCOMP_FLOAT32, codec, 1)
                : gcomp_reduce_scatter(comm, a, b, k, GCOMP_FLOAT32, GCOMP_SUM, codec, 1);
    unsigned long long ms = now_ms() - t0;
    const char *e = gcomp_last_error();
    char want[64];
    snprintf(want, sizeof want, "data from rank %d failed validation", culprit);
    if (call < bad && st) {
      printf("collectives_check: rank %d: FAILED call %d before the fault: %s\n", rank_, call, e);
      rc = 1;
    } else if (call < bad && algo) {
      bad_ = 0;
      ran(comm, "call before the fault", algo, k);
      rc = bad_ > 0;
    } else if (call == bad) {
      printf("collectives_check: rank %d: corrupt call %d: %s after %llu ms: %s\n", rank_, call,
             gcomp_strerror(st), ms, e);
      if (st != GCOMP_ERR_CORRUPT || !strstr(e, want) || ms >= (unsigned long long)timeout) {
        printf("collectives_check: rank %d: FAILED: call %d must fail with GCOMP_ERR_CORRUPT naming "
               "rank %d within %ld ms\n", rank_, call, culprit, timeout);
        rc = 1;
      }
    } else if (call > bad && (st != GCOMP_ERR_PEER || ms > 1000)) {
      printf("collectives_check: rank %d: FAILED: the call after the corrupt one returned %s\n",
             rank_, gcomp_strerror(st));
      rc = 1;
    }
  }
  gcomp_codec_destroy(codec);
  free(a), free(b);
  if (!rc) printf("collectives_check: rank %d: corrupt passed (%s %s)\n", rank_, coll, spec);
  return rc;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc < 2) {
    fprintf(stderr, "usage: collectives_check dense|codecs [RS AG [intra|A2A]]|kill VICTIM COLL|stop VICTIM COLL|"
                    "corrupt CALL CULPRIT SPEC COLL [late|ALGO]\n");
    return 2;
  }
  gcomp_comm *comm;
  int st = gcomp_comm_init_env(&comm);
  if (st) {
    printf("collectives_check: init failed: %s: %s\n", gcomp_strerror(st), gcomp_last_error());
    return 1;
  }
  rank_ = gcomp_comm_rank(comm), size_ = gcomp_comm_size(comm);
  const char *tmo = getenv("GCOMP_TIMEOUT_MS");
  int rc = 2;
  if ((!strcmp(argv[1], "dense") || !strcmp(argv[1], "codecs")) && argc > 3)
    want_rs_ = argv[2], want_ag_ = argv[3];
  want_intra_ = !strcmp(argv[1], "dense") && argc > 4 && !strcmp(argv[4], "intra");
  if (!strcmp(argv[1], "dense") && argc > 4 && !strncmp(argv[4], "alltoall:", 9)) want_a2a_ = argv[4];
  if (!strcmp(argv[1], "dense")) rc = dense(comm);
  else if (!strcmp(argv[1], "codecs")) rc = codecs(comm);
  else if (!strcmp(argv[1], "kill") && argc > 3) rc = kill_run(comm, atoi(argv[2]), SIGKILL, argv[3]);
  else if (!strcmp(argv[1], "stop") && argc > 3) rc = kill_run(comm, atoi(argv[2]), SIGSTOP, argv[3]);
  else if (!strcmp(argv[1], "corrupt") && argc > 5)
    rc = corrupt_run(comm, atoi(argv[2]), atoi(argv[3]), argv[4], argv[5],
                     argc > 6 && !strcmp(argv[6], "late"),
                     argc > 6 && strcmp(argv[6], "late") ? argv[6] : NULL, tmo ? atol(tmo) : 30000);
  uint64_t t0 = now_ms();
  gcomp_comm_destroy(comm);
  if (rc == 3)
    printf("collectives_check: rank %d: destroyed after the failure in %llu ms\n", rank_,
           (unsigned long long)(now_ms() - t0));
  return rc;
}
