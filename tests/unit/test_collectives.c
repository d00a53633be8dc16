/* reduce_scatter, allgather, broadcast, barrier and alltoall on in-process ranks
 * (gcomp_comm_init_local, one thread a rank), checked bitwise against a serial reference:
 * every dtype and op, 1-6 ranks on one node and over two (uneven) nodes, in place and out
 * of place, blocking and non-blocking in issue order with allreduce, on splits, with each
 * algorithm forced; disagreeing ranks fail with GCOMP_ERR_INVALID on every rank; codecs
 * within their bound and allgather's decoded values the same on every rank. Inputs are
 * small integers (products: powers of two), so every reduction order gives the same bits. */
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

enum { MAXR = 8, NDT = 6, NOP = 5 };

static size_t dsize(gcomp_dtype d) {
  static const size_t s[] = {4, 8, 4, 8, 2, 2};
  return s[d];
}

/* float -> bf16 / fp16, rounding to nearest even, as the library's narrowing does */
static uint16_t to_bf16(float f) {
  uint32_t b;
  memcpy(&b, &f, 4);
  b += 0x7fffu + ((b >> 16) & 1);
  return (uint16_t)(b >> 16);
}
static uint16_t to_f16(float f) {
  _Float16 h = (_Float16)f;
  uint16_t u;
  memcpy(&u, &h, 2);
  return u;
}

static void store(gcomp_dtype d, void *buf, size_t i, double v) {
  switch (d) {
  case GCOMP_FLOAT32: ((float *)buf)[i] = (float)v; break;
  case GCOMP_FLOAT64: ((double *)buf)[i] = v; break;
  case GCOMP_INT32: ((int32_t *)buf)[i] = (int32_t)v; break;
  case GCOMP_INT64: ((int64_t *)buf)[i] = (int64_t)v; break;
  case GCOMP_BFLOAT16: ((uint16_t *)buf)[i] = to_bf16((float)v); break;
  case GCOMP_FLOAT16: ((uint16_t *)buf)[i] = to_f16((float)v); break;
  }
}
/* Rank r's element i (salt separates calls): small integers; powers of two for products */
static double input(int r, size_t i, int salt, gcomp_op op) {
  uint64_t h = (uint64_t)(r + 1) * 0x9e3779b97f4a7c15ull ^ (uint64_t)(i + 3 + 131 * salt) * 0xbf58476d1ce4e5b9ull;
  h ^= h >> 29;
  if (op == GCOMP_PROD) {
    static const double p[] = {1, -1, 2, -2, 0.5, -0.5};
    return p[h % 6];
  }
  return (double)(int)(h % 17) - 8;
}

/* The reduction over n ranks of element i, in the result's type, as bits in out[at] */
static void reference(gcomp_dtype d, gcomp_op op, int n, size_t i, int salt, void *out, size_t at) {
  int ints = d == GCOMP_INT32 || d == GCOMP_INT64;
  double acc = input(0, i, salt, op);
  if (ints) acc = trunc(acc);   /* as stored: products of halves are 0 in integers */
  for (int r = 1; r < n; r++) {
    double v = input(r, i, salt, op);
    if (ints) v = trunc(v);
    switch (op) {
    case GCOMP_SUM: case GCOMP_AVG: acc += v; break;
    case GCOMP_PROD: acc *= v; break;
    case GCOMP_MIN: acc = v < acc ? v : acc; break;
    case GCOMP_MAX: acc = v > acc ? v : acc; break;
    }
  }
  if (op == GCOMP_AVG) {
    if (ints) acc = trunc(acc / n);
    else if (d == GCOMP_FLOAT64) acc = acc / n;
    else acc = (double)((float)acc / (float)n);   /* fp32 working type, then rounded */
  }
  store(d, out, at, acc);
}

/* ---- per-rank jobs ---------------------------------------------------------------------- */
typedef struct {
  gcomp_comm *comm;
  int status;
  char error[600];
  long wrong;
  char what[160];   /* the first wrong result */
  int sizes;        /* 0: the small sweep; 1: a longer vector too */
  char algo[64];    /* the algorithm of a last allgather */
} job;

static void note(job *j, int st, const char *what) {
  if (st < 0 && j->status == GCOMP_OK) {
    j->status = st;
    snprintf(j->error, sizeof j->error, "%s: %s", what, gcomp_last_error());
  }
}
static void wrong(job *j, const char *fmt, ...) {
  if (!j->wrong++) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(j->what, sizeof j->what, fmt, ap);
    va_end(ap);
  }
}

static void check_rs(job *j, gcomp_dtype d, gcomp_op op, size_t rc, int inplace, int salt) {
  gcomp_comm *c = j->comm;
  int n = gcomp_comm_size(c), me = gcomp_comm_rank(c);
  size_t es = dsize(d);
  uint8_t *send = malloc(n * rc * es + 1), *recv = malloc(rc * es + 1), *want = malloc(rc * es + 1);
  for (size_t i = 0; i < n * rc; i++) store(d, send, i, input(me, i, salt, op));
  for (size_t i = 0; i < rc; i++) reference(d, op, n, me * rc + i, salt, want, i);
  void *out = inplace ? send + me * rc * es : recv;
  note(j, gcomp_reduce_scatter(c, send, out, rc, d, op, NULL, 1), "reduce_scatter");
  if (j->status == GCOMP_OK && memcmp(out, want, rc * es))
    wrong(j, "reduce_scatter dtype %d op %d count %zu inplace %d", d, op, rc, inplace);
  free(send), free(recv), free(want);
}

static void check_ag(job *j, gcomp_dtype d, size_t sc, int inplace, int salt) {
  gcomp_comm *c = j->comm;
  int n = gcomp_comm_size(c), me = gcomp_comm_rank(c);
  size_t es = dsize(d);
  uint8_t *send = malloc(sc * es + 1), *recv = malloc(n * sc * es + 1), *want = malloc(n * sc * es + 1);
  for (size_t i = 0; i < n * sc; i++) store(d, want, i, input((int)(i / (sc ? sc : 1)), i, salt, GCOMP_SUM));
  memset(recv, 0x5a, n * sc * es);
  for (size_t i = 0; i < sc; i++) store(d, inplace ? recv + me * sc * es : send, i,
                                        input(me, me * sc + i, salt, GCOMP_SUM));
  const void *in = inplace ? recv + me * sc * es : send;
  note(j, gcomp_allgather(c, in, recv, sc, d, NULL, 2), "allgather");
  if (j->status == GCOMP_OK && memcmp(recv, want, n * sc * es))
    wrong(j, "allgather dtype %d count %zu inplace %d", d, sc, inplace);
  free(send), free(recv), free(want);
}

static void check_bcast(job *j, gcomp_dtype d, size_t count, int root, int salt) {
  gcomp_comm *c = j->comm;
  int me = gcomp_comm_rank(c);
  size_t es = dsize(d);
  uint8_t *buf = malloc(count * es + 1), *want = malloc(count * es + 1);
  for (size_t i = 0; i < count; i++) {
    store(d, want, i, input(root, i, salt, GCOMP_SUM));
    store(d, buf, i, me == root ? input(root, i, salt, GCOMP_SUM) : 99);
  }
  note(j, gcomp_broadcast(c, buf, count, d, root), "broadcast");
  if (j->status == GCOMP_OK && memcmp(buf, want, count * es))
    wrong(j, "broadcast dtype %d count %zu root %d", d, count, root);
  free(buf), free(want);
}

/* Block b of rank r's send buffer, element i: input(r, b * count + i) */
static void check_a2a(job *j, gcomp_dtype d, size_t count, int inplace, int salt) {
  gcomp_comm *c = j->comm;
  int n = gcomp_comm_size(c), me = gcomp_comm_rank(c);
  size_t es = dsize(d), all = n * count;
  uint8_t *send = malloc(all * es + 1), *recv = malloc(all * es + 1), *want = malloc(all * es + 1);
  for (size_t i = 0; i < all; i++) store(d, send, i, input(me, i, salt, GCOMP_SUM));
  for (int r = 0; r < n; r++)
    for (size_t i = 0; i < count; i++)
      store(d, want, r * count + i, input(r, me * count + i, salt, GCOMP_SUM));
  void *out = inplace ? send : recv;
  note(j, gcomp_alltoall(c, send, out, count, d), "alltoall");
  if (j->status == GCOMP_OK && memcmp(out, want, all * es))
    wrong(j, "alltoall dtype %d count %zu inplace %d", d, count, inplace);
  free(send), free(recv), free(want);
}

/* Every collective, dtype and op, in place and not, at a few awkward counts */
static void suite(job *j) {
  int n = gcomp_comm_size(j->comm), salt = 0;
  static const size_t counts[] = {0, 1, 3, 5};
  static const size_t more[] = {0, 1, 3, 5, 3001};
  const size_t *cs = j->sizes ? more : counts;
  int ncs = j->sizes ? 5 : 4;
  for (int ci = 0; ci < ncs && j->status == GCOMP_OK; ci++) {
    size_t k = cs[ci];
    for (int d = 0; d < NDT; d++) {
      for (int op = 0; op < NOP; op++)
        for (int ip = 0; ip < 2; ip++) check_rs(j, (gcomp_dtype)d, (gcomp_op)op, k, ip, salt++);
      for (int ip = 0; ip < 2; ip++) check_ag(j, (gcomp_dtype)d, k, ip, salt++);
      check_bcast(j, (gcomp_dtype)d, k * 3 + 1, (int)(k + d) % n, salt++);
      for (int ip = 0; ip < 2; ip++) check_a2a(j, (gcomp_dtype)d, k, ip, salt++);
    }
    note(j, gcomp_barrier(j->comm), "barrier");
  }
}

static void *suite_main(void *arg) {
  job *j = arg;
  suite(j);
  float x[3] = {1, 2, 3}, all[3 * MAXR];
  note(j, gcomp_allgather(j->comm, x, all, 3, GCOMP_FLOAT32, NULL, 0), "allgather");
  snprintf(j->algo, sizeof j->algo, "%s", gcomp_comm_last_algo(j->comm));
  /* calls of no elements, NULL buffers allowed: on one node they still take their round */
  note(j, gcomp_allgather(j->comm, NULL, NULL, 0, GCOMP_FLOAT32, NULL, 0), "empty allgather");
  note(j, gcomp_reduce_scatter(j->comm, NULL, NULL, 0, GCOMP_BFLOAT16, GCOMP_SUM, NULL, 0),
       "empty bf16 reduce_scatter");
  note(j, gcomp_alltoall(j->comm, NULL, NULL, 0, GCOMP_FLOAT16), "empty alltoall");
  note(j, gcomp_broadcast(j->comm, NULL, 0, GCOMP_INT64, 0), "empty broadcast");
  return NULL;
}

static void run_jobs(int n, job *jobs, void *(*fn)(void *)) {
  pthread_t th[MAXR];
  for (int r = 0; r < n; r++) assert_int_equal(pthread_create(&th[r], NULL, fn, &jobs[r]), 0);
  for (int r = 0; r < n; r++) pthread_join(th[r], NULL);
}

static void all_ok(int n, const job *jobs, const char *what) {
  for (int r = 0; r < n; r++) {
    if (jobs[r].status != GCOMP_OK) fail_msg("%s rank %d: %s", what, r, jobs[r].error);
    if (jobs[r].wrong) fail_msg("%s rank %d: %ld wrong, first %s", what, r, jobs[r].wrong, jobs[r].what);
  }
}

static gcomp_config *config(const char *algo) {
  gcomp_config *c = NULL;
  assert_int_equal(gcomp_config_create(&c), GCOMP_OK);
  assert_int_equal(gcomp_config_set(c, "GCOMP_ALPHA_BETA", "1,10,20,1,1,10"), GCOMP_OK);
  if (algo) assert_int_equal(gcomp_config_set(c, "GCOMP_ALGO", algo), GCOMP_OK);
  /* the segment broadcast in many rounds: a 4 KiB slot holds ~1000 of the long vector's
   * elements */
  if (algo && strstr(algo, "broadcast=shm"))
    assert_int_equal(gcomp_config_set(c, "GCOMP_SHM_BYTES", "4k"), GCOMP_OK);
  return c;
}

static void make(int n, const int *node_of, const char *algo, gcomp_comm **comms) {
  gcomp_config *cfg = config(algo);
  int st = gcomp_comm_init_local(n, node_of, cfg, comms);
  if (st != GCOMP_OK) fail_msg("init_local %d: %s", n, gcomp_last_error());
  gcomp_config_destroy(cfg);
}

/* n ranks (node_of, algo as make's) each run fn once; every rank must succeed */
static void run_all(int n, const int *node_of, const char *algo, void *(*fn)(void *),
                    const char *what) {
  gcomp_comm *comms[MAXR];
  make(n, node_of, algo, comms);
  job jobs[MAXR];
  memset(jobs, 0, sizeof jobs);
  for (int r = 0; r < n; r++) jobs[r].comm = comms[r];
  run_jobs(n, jobs, fn);
  all_ok(n, jobs, what);
  for (int r = 0; r < n; r++) assert_int_equal(gcomp_comm_destroy(comms[r]), GCOMP_OK);
}

static void sweep_algo(int n, const int *node_of, const char *algo, int sizes, const char *ag) {
  gcomp_comm *comms[MAXR];
  make(n, node_of, algo, comms);
  job jobs[MAXR];
  memset(jobs, 0, sizeof jobs);
  for (int r = 0; r < n; r++) jobs[r].comm = comms[r], jobs[r].sizes = sizes;
  run_jobs(n, jobs, suite_main);
  char what[128];
  snprintf(what, sizeof what, "n=%d nodes=%s algo=%s", n, node_of ? "2" : "1", algo ? algo : "auto");
  all_ok(n, jobs, what);
  for (int r = 0; ag && r < n; r++) assert_string_equal(jobs[r].algo, ag);
  for (int r = 0; r < n; r++) assert_int_equal(gcomp_comm_destroy(comms[r]), GCOMP_OK);
}

static void sweep(int n, const int *node_of, const char *algo, int sizes) {
  sweep_algo(n, node_of, algo, sizes, NULL);
}

static void test_one_node(void **state) {
  (void)state;
  for (int n = 1; n <= 6; n++) sweep(n, NULL, NULL, n == 4);
}

static const char *const forced[] = {
    "reduce_scatter=ring,allgather=ring,broadcast=tree",
    "reduce_scatter=shm,allgather=shm,broadcast=scatter",
    "allgather=shm,broadcast=shm",
    "reduce_scatter=rhd,allgather=rhd",
};

static void test_forced(void **state) {
  (void)state;
  static const char *const ag[] = {"allgather:ring", "allgather:shm", "allgather:shm",
                                   "allgather:rhd"};
  for (int a = 0; a < 3; a++)
    for (int n = 2; n <= 5; n += 3) sweep_algo(n, NULL, forced[a], 1, ag[a]);
  /* halving/doubling: powers of two, and groups that fold one pair (3, 5) or two (6) */
  static const int rhd_n[] = {2, 3, 4, 5, 6, 8};
  for (int i = 0; i < 6; i++) sweep_algo(rhd_n[i], NULL, forced[3], 1, ag[3]);
}

static void test_two_nodes(void **state) {
  (void)state;
  static const int even[] = {0, 0, 1, 1}, uneven[] = {0, 0, 0, 1, 1}, rr[] = {0, 1, 0, 1, 0, 1};
  /* the planner: the hierarchy on equal nodes (2 + 2: one slow step, not the ring's 3),
   * the ring on uneven ones, where the hierarchical algorithms are a flat exchange */
  sweep_algo(4, even, NULL, 1, "allgather:hier");
  sweep_algo(5, uneven, NULL, 0, "allgather:ring");
  sweep(6, rr, forced[0], 0);
  /* hierarchical over 4 + 2 ranks: sub-nodes of 2 (the greatest common divisor), two on
   * the first node, blocks reordered by (index in the sub-node, sub-node) and back */
  static const int four_two[] = {0, 0, 0, 0, 1, 1};
  sweep_algo(6, four_two, "reduce_scatter=hier,allgather=hier", 1, "allgather:hier");
}

/* ---- the segment broadcast at its slot's edges ------------------------------------------- */
/* A piece of exactly one slot is one round (its part's header has room beside the slot,
 * shm_seg.h): the counts around one and two 4 KiB slots, in every element size. */
static void *slot_edges_main(void *arg) {
  job *j = arg;
  int n = gcomp_comm_size(j->comm), salt = 0;
  static const gcomp_dtype ds[] = {GCOMP_FLOAT32, GCOMP_FLOAT64, GCOMP_BFLOAT16};
  for (int d = 0; d < 3; d++) {
    size_t per = 4096 / dsize(ds[d]);
    const size_t counts[] = {per - 1, per, per + 1, 2 * per - 1, 2 * per, 2 * per + 1};
    for (int k = 0; k < 6; k++) check_bcast(j, ds[d], counts[k], (d + k) % n, salt++);
  }
  return NULL;
}

static void test_bcast_slot_edges(void **state) {
  (void)state;
  run_all(3, NULL, "broadcast=shm", slot_edges_main, "broadcast:shm at the slot's edges");
}

/* ---- splits ----------------------------------------------------------------------------- */
static void *split_main(void *arg) {
  job *j = arg;
  gcomp_comm *child = NULL, *dup = NULL;
  int me = gcomp_comm_rank(j->comm);
  note(j, gcomp_comm_split(j->comm, me % 2, -me, &child), "split");
  if (j->status != GCOMP_OK) return NULL;
  note(j, gcomp_comm_dup(child, &dup), "dup");
  if (j->status != GCOMP_OK) return NULL;
  job sub = *j;
  sub.comm = child;
  suite(&sub);
  sub.comm = dup;
  suite(&sub);
  *j = sub;
  j->comm = NULL;
  note(j, gcomp_comm_destroy(dup), "destroy");
  note(j, gcomp_comm_destroy(child), "destroy");
  return NULL;
}

static void test_splits(void **state) {
  (void)state;
  static const int nodes[] = {0, 0, 0, 1, 1, 1};
  run_all(6, nodes, NULL, split_main, "splits");
}

/* ---- non-blocking: every kind queued behind each other and an allreduce ---------------- */
static void *nb_main(void *arg) {
  job *j = arg;
  gcomp_comm *c = j->comm;
  int n = gcomp_comm_size(c), me = gcomp_comm_rank(c);
  enum { K = 6 };
  float ar[K], rs_in[4 * K], rs_out[K], ag_in[K], ag_out[4 * K], bc[K], a2a_in[4 * K], a2a_out[4 * K];
  for (int i = 0; i < K; i++) ar[i] = (float)(me + i), ag_in[i] = (float)(100 * me + i), bc[i] = me == 1 ? (float)(7 * i) : -1;
  for (int i = 0; i < n * K; i++) rs_in[i] = (float)(me * i), a2a_in[i] = (float)(1000 * me + i);
  gcomp_request *req[6];
  note(j, gcomp_iallreduce(c, ar, ar, K, GCOMP_FLOAT32, GCOMP_SUM, NULL, 0, &req[0]), "i");
  note(j, gcomp_ireduce_scatter(c, rs_in, rs_out, K, GCOMP_FLOAT32, GCOMP_SUM, NULL, 0, &req[1]), "i");
  note(j, gcomp_iallgather(c, ag_in, ag_out, K, GCOMP_FLOAT32, NULL, 0, &req[2]), "i");
  note(j, gcomp_ibroadcast(c, bc, K, GCOMP_FLOAT32, 1, &req[3]), "i");
  note(j, gcomp_ibarrier(c, &req[4]), "i");
  note(j, gcomp_ialltoall(c, a2a_in, a2a_out, K, GCOMP_FLOAT32, &req[5]), "i");
  if (j->status != GCOMP_OK) return NULL;
  for (int k = 5; k >= 0; k--) {   /* completed in any order */
    int done = 0;
    if (k % 2) note(j, gcomp_request_wait(req[k]), "wait");
    else {
      while (!done && j->status == GCOMP_OK) note(j, gcomp_request_test(req[k], &done), "test");
    }
  }
  int sumr = n * (n - 1) / 2;
  for (int i = 0; i < K; i++) {
    if (ar[i] != (float)(sumr + n * i)) wrong(j, "iallreduce %d", i);
    if (rs_out[i] != (float)(sumr * (me * K + i))) wrong(j, "ireduce_scatter %d", i);
    if (bc[i] != (float)(7 * i)) wrong(j, "ibroadcast %d", i);
  }
  for (int i = 0; i < n * K; i++) {
    if (ag_out[i] != (float)(100 * (i / K) + i % K)) wrong(j, "iallgather %d", i);
    if (a2a_out[i] != (float)(1000 * (i / K) + me * K + i % K)) wrong(j, "ialltoall %d", i);
  }
  /* a blocking call after the queue ran keeps the order too */
  note(j, gcomp_barrier(c), "barrier");
  return NULL;
}

static void test_nonblocking(void **state) {
  (void)state;
  for (int n = 2; n <= 4; n++) run_all(n, NULL, NULL, nb_main, "non-blocking");
}

/* ---- disagreement: GCOMP_ERR_INVALID everywhere, then the communicator still works ---- */
typedef struct {
  job j;
  int mode;
  int st;
  char msg[600];
} djob;

static void *disagree_main(void *arg) {
  djob *d = arg;
  gcomp_comm *c = d->j.comm;
  int me = gcomp_comm_rank(c), n = gcomp_comm_size(c);
  float buf[64] = {0}, out[64];
  switch (d->mode) {
  case 0: d->st = gcomp_reduce_scatter(c, buf, out, me == 1 ? 3 : 4, GCOMP_FLOAT32, GCOMP_SUM, NULL, 0); break;
  case 1: d->st = gcomp_broadcast(c, buf, 8, GCOMP_FLOAT32, me == 0 ? 1 : 0); break;
  case 2: d->st = gcomp_broadcast(c, buf, 8, GCOMP_FLOAT32, me == 2 ? n : 0); break;
  case 3: d->st = me == 0 ? gcomp_barrier(c) : gcomp_allgather(c, buf, out, 4, GCOMP_FLOAT32, NULL, 0); break;
  case 4: d->st = gcomp_alltoall(c, buf, out, 2, me == 1 ? GCOMP_INT32 : GCOMP_FLOAT32); break;
  case 5: d->st = gcomp_allgather(c, buf, out, me == 2 ? 0 : 5, GCOMP_FLOAT32, NULL, 0); break;
  /* broadcasts on one node compare their shapes in their own round (call_coll.c) */
  case 7: d->st = gcomp_broadcast(c, buf, me == 1 ? 7 : 8, GCOMP_FLOAT32, 0); break;
  case 8: d->st = gcomp_broadcast(c, buf, 8, me == 2 ? GCOMP_INT32 : GCOMP_FLOAT32, 0); break;
  case 9: d->st = gcomp_broadcast(c, buf, me == 0 ? 0 : 8, GCOMP_FLOAT32, 1); break;
  case 10: d->st = gcomp_broadcast(c, buf, 8, GCOMP_FLOAT32, n); break;   /* every rank refuses */
  case 11: d->st = gcomp_broadcast(c, me == 1 ? NULL : buf, 8, GCOMP_FLOAT32, 0); break;
  /* and so do the others (barrier, reduce_scatter, allgather, alltoall) */
  case 12: d->st = gcomp_reduce_scatter(c, buf, out, 4, GCOMP_FLOAT32, me == 2 ? GCOMP_MAX : GCOMP_SUM, NULL, 0); break;
  case 13: d->st = gcomp_alltoall(c, buf, out, me == 0 ? 1 : 2, GCOMP_FLOAT32); break;
  case 14: d->st = gcomp_allgather(c, buf, out, 4, me == 1 ? GCOMP_FLOAT64 : GCOMP_FLOAT32, NULL, 0); break;
  case 15: d->st = gcomp_alltoall(c, buf, me == 1 ? NULL : out, 2, GCOMP_FLOAT32); break;
  case 16: d->st = me == 2 ? gcomp_alltoall(c, buf, out, 2, GCOMP_FLOAT32) : gcomp_barrier(c); break;
  case 17: d->st = gcomp_allgather(c, buf, out, 4, (gcomp_dtype)(me == 1 ? 99 : GCOMP_FLOAT32), NULL, 0); break;
  default: d->st = gcomp_reduce_scatter(c, me == 1 ? NULL : buf, out, 4, GCOMP_FLOAT32, GCOMP_SUM, NULL, 0); break;
  }
  snprintf(d->msg, sizeof d->msg, "%s", gcomp_last_error());
  float one = 1;
  note(&d->j, gcomp_allreduce(c, &one, &one, 1, GCOMP_FLOAT32, GCOMP_SUM, NULL, 0), "after");
  if (one != (float)n) wrong(&d->j, "allreduce after the refusal: %g", one);
  note(&d->j, gcomp_barrier(c), "barrier after");
  /* on one node the barrier is the segment's round, no agreement exchange before it */
  if (strcmp(gcomp_comm_last_algo(c), "barrier:shm"))
    wrong(&d->j, "barrier after: %s, not barrier:shm", gcomp_comm_last_algo(c));
  return NULL;
}

static void test_disagree(void **state) {
  (void)state;
  enum { N = 3 };
  gcomp_comm *comms[MAXR];
  make(N, NULL, NULL, comms);
  /* what every rank's message names, where it is the same on all */
  enum { MODES = 18 };
  static const char *const names[MODES] = {
      [0] = "count", [1] = "root", [3] = "collective", [4] = "dtype", [5] = "count",
      [7] = "count", [8] = "dtype", [9] = "count", [10] = "root", [12] = "op", [13] = "count",
      [14] = "dtype", [16] = "collective"};
  /* the rank whose own arguments were refused, which the others' messages name */
  static const int refuser[MODES] = {[2] = 2, [6] = 1, [11] = 1, [15] = 1, [17] = 1};
  for (int mode = 0; mode < MODES; mode++) {
    djob d[N];
    memset(d, 0, sizeof d);
    pthread_t th[N];
    for (int r = 0; r < N; r++) d[r].j.comm = comms[r], d[r].mode = mode;
    for (int r = 0; r < N; r++) assert_int_equal(pthread_create(&th[r], NULL, disagree_main, &d[r]), 0);
    for (int r = 0; r < N; r++) pthread_join(th[r], NULL);
    for (int r = 0; r < N; r++) {
      if (d[r].st != GCOMP_ERR_INVALID)
        fail_msg("mode %d rank %d: status %d (%s)", mode, r, d[r].st, d[r].msg);
      if (names[mode] && !strstr(d[r].msg, names[mode]))
        fail_msg("mode %d rank %d: the message does not name the %s: %s", mode, r, names[mode],
                 d[r].msg);
      /* the shapes compared in the round name the rank that refused */
      char who[16];
      snprintf(who, sizeof who, "rank %d", refuser[mode]);
      if (refuser[mode] > 0 && r != refuser[mode] && !strstr(d[r].msg, who))
        fail_msg("mode %d rank %d: the message does not name %s: %s", mode, r, who, d[r].msg);
      if (d[r].j.status != GCOMP_OK || d[r].j.wrong)
        fail_msg("mode %d rank %d afterwards: %s %s", mode, r, d[r].j.error, d[r].j.what);
    }
  }
  for (int r = 0; r < N; r++) assert_int_equal(gcomp_comm_destroy(comms[r]), GCOMP_OK);
}

/* ---- codecs ------------------------------------------------------------------------------- */
enum { CN = 4, CK = 40000 };
typedef struct {
  job j;
  float *rs_out, *ag_out;
  const char *spec;
} cjob;

static float cval(int r, size_t i) { return (float)sin(0.001 * (double)i * (r + 1)) + 0.01f * r; }

static void *codec_main(void *arg) {
  cjob *cj = arg;
  gcomp_comm *c = cj->j.comm;
  int n = gcomp_comm_size(c), me = gcomp_comm_rank(c);
  gcomp_codec *codec = NULL;
  note(&cj->j, gcomp_codec_create(cj->spec, &codec), "codec");
  float *in = malloc(sizeof(float) * CK * n), *mine = malloc(sizeof(float) * CK);
  for (size_t i = 0; i < (size_t)CK * n; i++) in[i] = cval(me, i);
  note(&cj->j, gcomp_reduce_scatter(c, in, cj->rs_out, CK, GCOMP_FLOAT32, GCOMP_SUM, codec, 5), "rs");
  for (size_t i = 0; i < CK; i++) mine[i] = cval(me, (size_t)me * CK + i);
  note(&cj->j, gcomp_allgather(c, mine, cj->ag_out, CK, GCOMP_FLOAT32, codec, 6), "ag");
  gcomp_codec_destroy(codec);
  free(in), free(mine);
  return NULL;
}

static void test_codecs(void **state) {
  (void)state;
  static const char *const specs[] = {"quant:bits=8", "quant:bits=4+ef"};
  for (int s = 0; s < 2; s++) {
    gcomp_comm *comms[MAXR];
    gcomp_config *cfg = config("reduce_scatter=direct,allgather=direct");
    assert_int_equal(gcomp_config_set(cfg, "GCOMP_CODEC_MIN_BYTES", "0"), GCOMP_OK);
    assert_int_equal(gcomp_comm_init_local(CN, NULL, cfg, comms), GCOMP_OK);
    gcomp_config_destroy(cfg);
    cjob cj[CN];
    memset(cj, 0, sizeof cj);
    pthread_t th[CN];
    for (int r = 0; r < CN; r++) {
      cj[r].j.comm = comms[r], cj[r].spec = specs[s];
      cj[r].rs_out = malloc(sizeof(float) * CK);
      cj[r].ag_out = malloc(sizeof(float) * CK * CN);
    }
    for (int r = 0; r < CN; r++) assert_int_equal(pthread_create(&th[r], NULL, codec_main, &cj[r]), 0);
    for (int r = 0; r < CN; r++) pthread_join(th[r], NULL);
    for (int r = 0; r < CN; r++) {
      if (cj[r].j.status != GCOMP_OK) fail_msg("%s rank %d: %s", specs[s], r, cj[r].j.error);
      assert_string_equal(gcomp_comm_last_algo(comms[r]), "allgather:direct");
      /* the reduce-scatter: each value quantised once per contribution; relative to the
       * range of the contributions, 4 bits err by up to 1/15 of it per rank */
      double bound = s ? CN * 2.0 / 15 : CN * 2.0 / 255, worst = 0;
      for (size_t i = 0; i < CK; i++) {
        double want = 0;
        for (int q = 0; q < CN; q++) want += cval(q, (size_t)r * CK + i);
        double e = fabs(cj[r].rs_out[i] - want);
        if (e > worst) worst = e;
      }
      if (worst > bound) fail_msg("%s reduce_scatter rank %d: error %g > %g", specs[s], r, worst, bound);
      /* the allgather: the same bits on every rank, the owner's block decoded too */
      if (memcmp(cj[r].ag_out, cj[0].ag_out, sizeof(float) * CK * CN))
        fail_msg("%s allgather: rank %d differs from rank 0", specs[s], r);
      double aw = 0;
      int exact = 1;
      for (size_t i = 0; i < (size_t)CK * CN; i++) {
        double e = fabs(cj[r].ag_out[i] - cval((int)(i / CK), i));
        if (e > aw) aw = e;
        exact &= e == 0;
      }
      if (aw > (s ? 2.0 / 15 : 2.0 / 255) || exact)
        fail_msg("%s allgather rank %d: error %g (exact %d)", specs[s], r, aw, exact);
    }
    for (int r = 0; r < CN; r++) {
      free(cj[r].rs_out), free(cj[r].ag_out);
      assert_int_equal(gcomp_comm_destroy(comms[r]), GCOMP_OK);
    }
  }
}

/* ---- GCOMP_ALGO per collective ----------------------------------------------------------- */
static void test_algo_setting(void **state) {
  (void)state;
  gcomp_config *c = NULL;
  assert_int_equal(gcomp_config_create(&c), GCOMP_OK);
  assert_int_equal(gcomp_config_set(c, "GCOMP_ALGO", "ring,allgather=ring,reduce_scatter=shm"), GCOMP_OK);
  assert_int_equal(gcomp_config_set(c, "GCOMP_ALGO", "broadcast:tree"), GCOMP_OK);
  assert_int_equal(gcomp_config_set(c, "GCOMP_ALGO", "allgather=bogus"), GCOMP_ERR_INVALID);
  assert_non_null(strstr(gcomp_last_error(), "allgather=bogus"));
  assert_int_equal(gcomp_config_set(c, "GCOMP_ALGO", "allgather=ring,allgather=shm"), GCOMP_ERR_INVALID);
  assert_int_equal(gcomp_config_set(c, "GCOMP_ALGO", "ring,"), GCOMP_ERR_INVALID);
  gcomp_config_destroy(c);
  /* every collective's algorithms are listed */
  int seen[6] = {0};
  static const char *const kinds[] = {"reduce_scatter:", "allgather:", "broadcast:", "barrier:", "alltoall:"};
  for (int i = 0; i < gcomp_algo_count(); i++) {
    const char *name;
    assert_int_equal(gcomp_algo_describe(i, &name, NULL), GCOMP_OK);
    for (int k = 0; k < 5; k++) seen[k] += !strncmp(name, kinds[k], strlen(kinds[k]));
  }
  for (int k = 0; k < 5; k++) assert_true(seen[k] > 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_algo_setting), cmocka_unit_test(test_one_node),
      cmocka_unit_test(test_forced),       cmocka_unit_test(test_bcast_slot_edges),
      cmocka_unit_test(test_two_nodes),
      cmocka_unit_test(test_splits),       cmocka_unit_test(test_nonblocking),
      cmocka_unit_test(test_disagree),     cmocka_unit_test(test_codecs),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
