/* An ordinary MPI program (built with plain mpicc, knowing nothing of gcomp) that checks
 * MPI_Allreduce results; the shim tests run it with and without libgcomp_mpi.so preloaded.
 *
 *   shim_check exact   every type the shim maps x SUM/MIN/MAX/PROD x counts 0, 1, primes,
 *                      1 MiB, in place and not, on MPI_COMM_WORLD and on a dup of it; on a
 *                      split communicator (halves of world: served when they hold two ranks
 *                      or more); then calls the shim must pass to MPI (a derived type, an
 *                      unsigned type, a user op); MPI_Iallreduce on world (served).
 *                      Integer-valued data, so every result must be exact.
 *   shim_check exact multiple   the same after MPI_Init_thread(MPI_THREAD_MULTIPLE)
 *   shim_check lossy   float sums of values bf16 cannot represent, 1 MiB and a prime count,
 *                      a few steps each on the same buffers (as a training loop would): the
 *                      results must be within bf16's error of the exact sums, and some must
 *                      differ from them (so a lossy codec really ran).
 *
 *   shim_check route   float sums and maxima of 8 B to 1 MiB, 30 calls of each size (300 of
 *                      8 B), then one MPI_Iallreduce of each: all exact (GCOMP_SHIM_ROUTE
 *                      sends some to MPI).
 *
 *   shim_check repeat [shim]  the same MPI_Allreduce 40 times in a row on world and on a
 *                      dup, then on a dup freed and a new dup made (MPI may hand the freed
 *                      handle out again): all exact. With "shim": the shim must not look the
 *                      repeats up again (no PMPI_Type_size, no PMPI_Comm_get_attr during them;
 *                      this program counts both, preloaded ahead of MPI).
 *
 *   shim_check badbuf [shim]  erroneous buffer arguments MPI reports (recvbuf MPI_IN_PLACE,
 *                      send and receive buffers aliased without MPI_IN_PLACE), under
 *                      MPI_ERRORS_RETURN: each returns an error, nothing crashes, and ordinary
 *                      calls after them still give exact sums. With "shim" also NULL buffers
 *                      (Open MPI alone crashes on those; the shim reports MPI_ERR_BUFFER).
 *
 *   shim_check silent [return]   the last rank goes silent (sleeps 60 s) before its first
 *                      MPI_Allreduce; the others call it. Run with a short GCOMP_TIMEOUT_MS:
 *                      under the default MPI_ERRORS_ARE_FATAL the job is aborted; with
 *                      "return" (MPI_ERRORS_RETURN on world) each caller prints "rank R:
 *                      MPI_Allreduce returned <error string> after T ms" and aborts the job.
 *
 * Rank 0 prints "calls: world N dup N split N dtype N op N iallreduce N" (how many calls of
 * each kind every rank made) and "shim_check: PASS" or the failures; exit status 1 on any. */
#define _GNU_SOURCE   /* RTLD_NEXT */
#include <dlfcn.h>
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int rank, size, failures;
static long n_world, n_dup, n_split, n_dtype, n_op, n_iallreduce;

static void fail(const char *what, const char *type, const char *op, int count, int inplace,
                 long i, double got, double want) {
  if (failures++ < 10)
    fprintf(stderr, "rank %d: %s %s %s count %d%s: [%ld] = %.17g, expected %.17g\n", rank, what,
            type, op, count, inplace ? " in place" : "", i, got, want);
}

/* rank r's element i: small integers, so sums and products stay exact in every type */
static long value(int op, int r, long i) {
  if (op == 0) return (i * 7 + r * 3) % 97 - 40;   /* SUM */
  if (op == 3) return ((i + r) % 5 == 0) ? -2 : ((i + r) % 3 == 0 ? 2 : 1);   /* PROD */
  return (i * 31 + r * 17) % 101 - 50;   /* MIN, MAX */
}

static long expected(int op, long i) {
  long acc = value(op, 0, i);
  for (int r = 1; r < size; r++) {
    long v = value(op, r, i);
    if (op == 0) acc += v;
    else if (op == 1) acc = v < acc ? v : acc;
    else if (op == 2) acc = v > acc ? v : acc;
    else acc *= v;
  }
  return acc;
}

typedef struct {
  MPI_Datatype dt;
  const char *name;
  int bytes;
  int kind;   /* 0 float, 1 double, 2 int32, 3 int64 */
} type_case;

static void put(const type_case *t, void *buf, long i, long v) {
  switch (t->kind) {
  case 0: ((float *)buf)[i] = (float)v; break;
  case 1: ((double *)buf)[i] = (double)v; break;
  case 2: ((int32_t *)buf)[i] = (int32_t)v; break;
  default: ((int64_t *)buf)[i] = (int64_t)v; break;
  }
}

static double get(const type_case *t, const void *buf, long i) {
  switch (t->kind) {
  case 0: return ((const float *)buf)[i];
  case 1: return ((const double *)buf)[i];
  case 2: return ((const int32_t *)buf)[i];
  default: return (double)((const int64_t *)buf)[i];
  }
}

/* One allreduce of `count` elements on comm, checked against the sum over the ranks in
 * `ranks` (NULL: 0..size-1). */
static void one(MPI_Comm comm, const type_case *t, int op, int count, int inplace, char *send,
                char *recv) {
  static const MPI_Op ops[] = {MPI_SUM, MPI_MIN, MPI_MAX, MPI_PROD};
  static const char *const names[] = {"SUM", "MIN", "MAX", "PROD"};
  for (long i = 0; i < count; i++) put(t, inplace ? recv : send, i, value(op, rank, i));
  /* a canary past the end: count elements, not one more */
  memset(recv + (size_t)count * t->bytes, 0x5a, (size_t)t->bytes);
  int rc = MPI_Allreduce(inplace ? MPI_IN_PLACE : send, recv, count, t->dt, ops[op], comm);
  if (rc != MPI_SUCCESS) {
    fail("MPI_Allreduce returned an error", t->name, names[op], count, inplace, -1, rc, 0);
    return;
  }
  for (long i = 0; i < count; i++) {
    double got = get(t, recv, i), want = (double)expected(op, i);
    if (got != want) {
      fail("wrong result", t->name, names[op], count, inplace, i, got, want);
      break;
    }
  }
  for (int b = 0; b < t->bytes; b++)
    if ((unsigned char)recv[(size_t)count * t->bytes + b] != 0x5a) {
      fail("wrote past the end", t->name, names[op], count, inplace, count, 0, 0);
      break;
    }
}

static void pair_add(void *in, void *inout, int *len, MPI_Datatype *dt) {
  (void)dt;
  const int *a = in;
  int *b = inout;
  for (int i = 0; i < 2 * *len; i++) b[i] += a[i];
}

static void exact(void) {
  const type_case types[] = {
      {MPI_FLOAT, "MPI_FLOAT", 4, 0},         {MPI_DOUBLE, "MPI_DOUBLE", 8, 1},
      {MPI_INT, "MPI_INT", 4, 2},             {MPI_INT32_T, "MPI_INT32_T", 4, 2},
      {MPI_LONG, "MPI_LONG", 8, 3},           {MPI_INT64_T, "MPI_INT64_T", 8, 3},
      {MPI_LONG_LONG, "MPI_LONG_LONG", 8, 3},
  };
  const int counts[] = {0, 1, 2, 7, 13, 127, 1021, 65537};
  const int big = 1 << 18;   /* 1 MiB of 4-byte elements */
  char *send = malloc((size_t)big * 8 + 8), *recv = malloc((size_t)big * 8 + 8);
  if (!send || !recv) MPI_Abort(MPI_COMM_WORLD, 2);
  MPI_Comm dup;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);

  for (size_t t = 0; t < sizeof types / sizeof *types; t++)
    for (int op = 0; op < 4; op++)
      for (size_t c = 0; c < sizeof counts / sizeof *counts; c++)
        for (int inplace = 0; inplace < 2; inplace++) {
          one(MPI_COMM_WORLD, &types[t], op, counts[c], inplace, send, recv);
          n_world++;
        }
  for (size_t t = 0; t < sizeof types / sizeof *types; t++)
    for (int inplace = 0; inplace < 2; inplace++) {
      one(MPI_COMM_WORLD, &types[t], inplace ? 0 : 2, big, inplace, send, recv);
      n_world++;
    }
  /* a duplicate of world: served, by a gcomp communicator of its own */
  for (int inplace = 0; inplace < 2; inplace++) {
    one(dup, &types[0], 0, 1021, inplace, send, recv);
    one(dup, &types[3], 1, big, inplace, send, recv);
    n_dup += 2;
  }

  /* a split communicator, halves of world: served (MPI's when a half has one rank) */
  MPI_Comm half;
  int color = rank % 2;
  MPI_Comm_split(MPI_COMM_WORLD, color, rank, &half);
  int hsize;
  MPI_Comm_size(half, &hsize);
  for (int inplace = 0; inplace < 2; inplace++) {
    float *s = (float *)send, *r = (float *)recv;
    for (int i = 0; i < 4099; i++) (inplace ? r : s)[i] = (float)(rank + i % 13);
    MPI_Allreduce(inplace ? MPI_IN_PLACE : s, r, 4099, MPI_FLOAT, MPI_SUM, half);
    n_split++;
    for (int i = 0; i < 4099; i++) {
      double want = 0;
      for (int q = color; q < size; q += 2) want += q + i % 13;
      if (r[i] != want) {
        fail("split communicator", "MPI_FLOAT", "SUM", 4099, inplace, i, r[i], want);
        break;
      }
    }
  }
  MPI_Comm_free(&half);

  /* ---- calls the shim must hand to MPI unchanged ---- */
  /* a derived type: pairs of ints (predefined ops take only predefined types: a user op) */
  MPI_Datatype pair;
  MPI_Type_contiguous(2, MPI_INT, &pair);
  MPI_Type_commit(&pair);
  MPI_Op pair_sum;
  MPI_Op_create(pair_add, 1, &pair_sum);
  {
    int *s = (int *)send, *r = (int *)recv;
    for (int i = 0; i < 2 * 1000; i++) s[i] = rank + i;
    MPI_Allreduce(s, r, 1000, pair, pair_sum, MPI_COMM_WORLD);
    n_dtype++;
    for (int i = 0; i < 2 * 1000; i++) {
      long want = (long)size * i + (long)size * (size - 1) / 2;
      if (r[i] != want) {
        fail("derived type", "pair", "SUM", 1000, 0, i, r[i], (double)want);
        break;
      }
    }
  }
  MPI_Op_free(&pair_sum);
  MPI_Type_free(&pair);

  /* an unsigned type */
  {
    unsigned *s = (unsigned *)send, *r = (unsigned *)recv;
    for (int i = 0; i < 333; i++) s[i] = (unsigned)(rank * 1000 + i);
    MPI_Allreduce(s, r, 333, MPI_UNSIGNED, MPI_MAX, MPI_COMM_WORLD);
    n_dtype++;
    for (int i = 0; i < 333; i++)
      if (r[i] != (unsigned)((size - 1) * 1000 + i)) {
        fail("unsigned", "MPI_UNSIGNED", "MAX", 333, 0, i, r[i], (size - 1) * 1000 + i);
        break;
      }
  }

  /* MPI_BAND: a predefined op gcomp has no equivalent for */
  {
    int *s = (int *)send, *r = (int *)recv;
    for (int i = 0; i < 77; i++) s[i] = ~(1 << (rank % 31));
    MPI_Allreduce(s, r, 77, MPI_INT, MPI_BAND, MPI_COMM_WORLD);
    n_op++;
    int want = -1;
    for (int q = 0; q < size; q++) want &= ~(1 << (q % 31));
    for (int i = 0; i < 77; i++)
      if (r[i] != want) {
        fail("MPI_BAND", "MPI_INT", "BAND", 77, 0, i, r[i], want);
        break;
      }
  }

  /* MPI_Iallreduce: served through gcomp_iallreduce */
  {
    double *s = (double *)send, *r = (double *)recv;
    for (int i = 0; i < 513; i++) s[i] = rank + i;
    MPI_Request req;
    MPI_Iallreduce(s, r, 513, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    n_iallreduce++;
    for (int i = 0; i < 513; i++) {
      double want = (double)size * i + (double)size * (size - 1) / 2;
      if (r[i] != want) {
        fail("MPI_Iallreduce", "MPI_DOUBLE", "SUM", 513, 0, i, r[i], want);
        break;
      }
    }
  }
  MPI_Comm_free(&dup);
  free(send);
  free(recv);
}

static void user_op_max(void *in, void *inout, int *len, MPI_Datatype *dt) {
  (void)dt;
  float *a = in, *b = inout;
  for (int i = 0; i < *len; i++) b[i] = a[i] > b[i] ? a[i] : b[i];
}

/* The sizes a program repeats, each many times: the shim (GCOMP_SHIM_ROUTE=auto) times gcomp
 * and MPI on the first calls of each size and sends the rest to the faster, so every result
 * must be exact whichever way a call went; then MPI_Iallreduce of each size, which follows
 * its size's agreed route. */
static void route(void) {
  static const int counts[] = {2, 16, 1024, 16384, 262144};
  const type_case t = {MPI_FLOAT, "MPI_FLOAT", 4, 0};
  char *send = malloc(262145 * 4), *recv = malloc(262145 * 4);
  if (!send || !recv) MPI_Abort(MPI_COMM_WORLD, 2);
  for (size_t c = 0; c < sizeof counts / sizeof *counts; c++) {
    for (int i = 0; i < (c ? 30 : 300); i++, n_world++)
      one(MPI_COMM_WORLD, &t, i % 3 ? 0 : 2, counts[c], i & 1, send, recv);
    float *r = (float *)(void *)recv;
    for (int i = 0; i < counts[c]; i++) r[i] = (float)value(0, rank, i);
    MPI_Request req;
    MPI_Iallreduce(MPI_IN_PLACE, r, counts[c], MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    n_iallreduce++;
    for (int i = 0; i < counts[c]; i++)
      if (r[i] != (float)expected(0, i)) {
        fail("MPI_Iallreduce", "MPI_FLOAT", "SUM", counts[c], 1, i, r[i], (double)expected(0, i));
        break;
      }
  }
  free(send);
  free(recv);
}

/* The shim's look-ups of a call's type and communicator, counted: the program's own
 * definitions come first for the preloaded shim too (linked -rdynamic). */
static long lookups;

int PMPI_Type_size(MPI_Datatype type, int *out) {
  static int (*next)(MPI_Datatype, int *);
  if (!next) *(void **)&next = dlsym(RTLD_NEXT, "PMPI_Type_size");
  lookups++;
  return next(type, out);
}

int PMPI_Comm_get_attr(MPI_Comm comm, int keyval, void *attr, int *flag) {
  static int (*next)(MPI_Comm, int, void *, int *);
  if (!next) *(void **)&next = dlsym(RTLD_NEXT, "PMPI_Comm_get_attr");
  lookups++;
  return next(comm, keyval, attr, flag);
}

/* calls of one MPI_Allreduce (float sums, count elements) on comm, checked; returns the
 * look-ups the shim made during all but the first */
static long repeated(MPI_Comm comm, int count, int calls, float *send, float *recv, long *n) {
  long before = 0;
  for (int c = 0; c < calls; c++, (*n)++) {
    for (int i = 0; i < count; i++) send[i] = (float)value(0, rank, i + c);
    if (c == 1) before = lookups;
    MPI_Allreduce(send, recv, count, MPI_FLOAT, MPI_SUM, comm);
    for (int i = 0; i < count; i++)
      if (recv[i] != (float)expected(0, i + c)) {
        fail("repeated MPI_Allreduce", "MPI_FLOAT", "SUM", count, 0, i, recv[i],
             (double)expected(0, i + c));
        break;
      }
  }
  return lookups - before;
}

static void repeat(int under_shim) {
  enum { COUNT = 256 };
  float send[COUNT], recv[COUNT];
  MPI_Comm dup, again;
  long seen = repeated(MPI_COMM_WORLD, COUNT, 40, send, recv, &n_world);
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  seen += repeated(dup, COUNT, 40, send, recv, &n_dup);
  MPI_Comm_free(&dup);
  /* a communicator made after one was freed: a repeat of the freed one's call must not
   * reach the freed one's gcomp communicator (Open MPI reuses the handle) */
  MPI_Comm_dup(MPI_COMM_WORLD, &again);
  repeated(again, COUNT, 3, send, recv, &n_dup);
  MPI_Comm_free(&again);
  if (under_shim && seen) {
    failures++;
    fprintf(stderr, "rank %d: %ld type or communicator look-ups in 78 repeated calls\n", rank,
            seen);
  }
}

/* A user op, checked in both modes: never reaches gcomp. */
static void user_op(void) {
  MPI_Op op;
  MPI_Op_create(user_op_max, 1, &op);
  float s[31], r[31];
  for (int i = 0; i < 31; i++) s[i] = (float)(rank * 100 + i);
  MPI_Allreduce(s, r, 31, MPI_FLOAT, op, MPI_COMM_WORLD);
  n_op++;
  for (int i = 0; i < 31; i++)
    if (r[i] != (float)((size - 1) * 100 + i)) {
      fail("user op", "MPI_FLOAT", "user max", 31, 0, i, r[i], (size - 1) * 100 + i);
      break;
    }
  MPI_Op_free(&op);
}

/* Non-integer floats in [1, 2): bf16 keeps 8 significant bits, so each rounding is off by
 * up to 2^-8 of the value; a compressed sum rounds at most twice (each partial sum once on
 * the way in, the reduced sum once on the way out). */
static void lossy(void) {
  const int counts[] = {1 << 18, 100003};
  const int steps = 3;
  long inexact = 0, total = 0;
  double worst = 0;
  for (size_t c = 0; c < sizeof counts / sizeof *counts; c++) {
    int n = counts[c];
    float *buf = malloc((size_t)n * sizeof *buf);
    if (!buf) MPI_Abort(MPI_COMM_WORLD, 2);
    for (int step = 0; step < steps; step++) {
      for (int i = 0; i < n; i++) buf[i] = (float)(1.0 + 0.001 * ((i * 37 + rank * 11 + step) % 997));
      MPI_Allreduce(MPI_IN_PLACE, buf, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      n_world++;
      for (int i = 0; i < n; i++) {
        double want = 0, mag = 0;
        for (int r = 0; r < size; r++) {
          double v = (float)(1.0 + 0.001 * ((i * 37 + r * 11 + step) % 997));
          want += v, mag += fabs(v);
        }
        double err = fabs(buf[i] - want);
        if (err / mag > worst) worst = err / mag;
        if (err > mag * 1e-6) inexact++;
        total++;
        if (!(err <= mag * (3.0 / 256))) {   /* two roundings of 2^-8 each, with room */
          fail("beyond bf16 error", "MPI_FLOAT", "SUM", n, 1, i, buf[i], want);
          break;
        }
      }
    }
    free(buf);
  }
  long all_inexact = 0;
  MPI_Reduce(&inexact, &all_inexact, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    printf("lossy: worst relative error %.3g, %ld of %ld results inexact on rank 0\n", worst,
           inexact, total);
    if (all_inexact == 0) {
      fprintf(stderr, "rank 0: every result is exact: no lossy codec ran\n");
      failures++;
    }
  }
}

static void silent(int errors_return) {
  if (errors_return) MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  enum { N = 1 << 18 };
  float *buf = calloc(N, sizeof *buf);
  if (rank == size - 1) sleep(60);   /* silent, not dead: only a timeout can tell */
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  int rc = MPI_Allreduce(MPI_IN_PLACE, buf, N, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  char msg[MPI_MAX_ERROR_STRING] = "";
  int len = 0;
  if (rc != MPI_SUCCESS) MPI_Error_string(rc, msg, &len);
  printf("rank %d: MPI_Allreduce returned %s after %.0f ms\n", rank,
         rc == MPI_SUCCESS ? "MPI_SUCCESS" : msg,
         (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6);
  fflush(stdout);
  free(buf);
  MPI_Abort(MPI_COMM_WORLD, 3);   /* the silent rank will not finish: end the job */
}

static void badbuf(int under_shim) {
  enum { N = 1000 };
  float a[N], b[N];
  for (int i = 0; i < N; i++) a[i] = (float)(i + rank);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int rc1 = MPI_Allreduce(a, MPI_IN_PLACE, N, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  int rc2 = MPI_Allreduce(a, a, N, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  /* NULL buffers: Open MPI alone crashes on them; under the shim they are an error */
  int rc3 = under_shim ? MPI_Allreduce(a, NULL, N, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD) : 1;
  int rc4 = under_shim ? MPI_Allreduce(NULL, b, N, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD) : 1;
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
  if (rc3 == MPI_SUCCESS || rc4 == MPI_SUCCESS)
    fail("NULL buffer accepted", "float", "sum", N, 0, 0, 0, 1);
  if (rc1 == MPI_SUCCESS) fail("recvbuf MPI_IN_PLACE accepted", "float", "sum", N, 0, 0, 0, 1);
  if (rc2 == MPI_SUCCESS) fail("aliased buffers accepted", "float", "sum", N, 0, 0, 0, 1);
  for (int step = 0; step < 3; step++) {   /* the communicator still serves */
    for (int i = 0; i < N; i++) a[i] = (float)(i + rank);
    MPI_Allreduce(a, b, N, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    n_world++;
    for (int i = 0; i < N; i++) {
      double want = (double)i * size + (double)size * (size - 1) / 2;
      if (b[i] != want) fail("after bad calls", "float", "sum", N, 0, i, b[i], want);
    }
  }
}

int main(int argc, char **argv) {
  if (argc > 2 && !strcmp(argv[2], "multiple")) {
    int provided = MPI_THREAD_SINGLE;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0) printf("thread level: %s\n", provided == MPI_THREAD_MULTIPLE ? "multiple" : "less");
  } else {
    MPI_Init(&argc, &argv);
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const char *mode = argc > 1 ? argv[1] : "exact";
  if (!strcmp(mode, "exact")) {
    exact();
  } else if (!strcmp(mode, "lossy")) {
    lossy();
  } else if (!strcmp(mode, "route")) {
    route();
  } else if (!strcmp(mode, "repeat")) {
    repeat(argc > 2 && !strcmp(argv[2], "shim"));
  } else if (!strcmp(mode, "badbuf")) {
    badbuf(argc > 2 && !strcmp(argv[2], "shim"));
  } else if (!strcmp(mode, "silent")) {
    silent(argc > 2 && !strcmp(argv[2], "return"));
  } else {
    if (rank == 0) fprintf(stderr, "usage: shim_check exact [multiple] | lossy | route | repeat [shim] | badbuf | silent [return]\n");
    MPI_Finalize();
    return 2;
  }
  user_op();
  int all = 0;
  MPI_Reduce(&failures, &all, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    printf("calls: world %ld dup %ld split %ld dtype %ld op %ld iallreduce %ld\n", n_world, n_dup,
           n_split, n_dtype, n_op, n_iallreduce);
    printf("shim_check: %s (%d failures)\n", all ? "FAIL" : "PASS", all);
  }
  MPI_Finalize();
  return all ? 1 : 0;
}
