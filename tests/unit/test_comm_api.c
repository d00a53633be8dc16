/* The public ways to make and end communicators: gcomp_comm_init_local, gcomp_comm_init_oob
 * (real processes over real providers, with a caller's allgather), configs instead of the
 * environment, sized stats structs, and gcomp_comm_destroy with pending requests. Only
 * gcomp.h: this is what a program built on gcomp sees. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "gcomp.h"

enum { MAXR = 8, COUNT = 1000 };

/* Settings every test's communicators get: fixed link figures, so no calibration */
static gcomp_config *quiet_config(const char *algo) {
  gcomp_config *c = NULL;
  assert_int_equal(gcomp_config_create(&c), GCOMP_OK);
  assert_int_equal(gcomp_config_set(c, "GCOMP_ALPHA_BETA", "1,10,20,1"), GCOMP_OK);
  if (algo) assert_int_equal(gcomp_config_set(c, "GCOMP_ALGO", algo), GCOMP_OK);
  return c;
}

typedef struct {
  gcomp_comm *comm;
  int status;
  float x[COUNT];
  char algo[32];
} rank_job;

static void *sum_main(void *arg) {
  rank_job *j = arg;
  int r = gcomp_comm_rank(j->comm);
  for (int i = 0; i < COUNT; i++) j->x[i] = (float)(r * COUNT + i);
  j->status = gcomp_allreduce(j->comm, j->x, j->x, COUNT, GCOMP_FLOAT32, GCOMP_SUM, NULL, 0);
  snprintf(j->algo, sizeof j->algo, "%s", gcomp_comm_last_algo(j->comm));
  return NULL;
}

/* One thread per rank, each summing its own inputs; checks the sums. */
static void run_sums(int n, gcomp_comm **comms, rank_job *jobs) {
  pthread_t th[MAXR];
  for (int r = 0; r < n; r++) {
    jobs[r].comm = comms[r];
    assert_int_equal(pthread_create(&th[r], NULL, sum_main, &jobs[r]), 0);
  }
  for (int r = 0; r < n; r++) pthread_join(th[r], NULL);
  for (int r = 0; r < n; r++) {
    assert_int_equal(jobs[r].status, GCOMP_OK);
    for (int i = 0; i < COUNT; i += 97)
      assert_true(jobs[r].x[i] == (float)(COUNT * n * (n - 1) / 2 + n * i));
  }
}

static void destroy_all(int n, gcomp_comm **comms) {
  for (int r = 0; r < n; r++) assert_int_equal(gcomp_comm_destroy(comms[r]), GCOMP_OK);
}

static void test_init_local_runs_collectives(void **state) {
  unsetenv("GCOMP_ALGO");
  gcomp_config *c = quiet_config("hier");
  gcomp_comm *comms[4];
  int node_of[4] = {0, 0, 1, 1};   /* hier needs as many ranks on every node */
  assert_int_equal(gcomp_comm_init_local(4, node_of, c, comms), GCOMP_OK);
  gcomp_config_destroy(c);   /* the communicators hold copies */
  for (int r = 0; r < 4; r++) {
    assert_int_equal(gcomp_comm_rank(comms[r]), r);
    assert_int_equal(gcomp_comm_size(comms[r]), 4);
    assert_int_equal(gcomp_comm_node(comms[r]), node_of[r]);
    assert_int_equal(gcomp_comm_nnodes(comms[r]), 2);
  }
  static rank_job jobs[4];
  run_sums(4, comms, jobs);
  for (int r = 0; r < 4; r++) assert_string_equal(jobs[r].algo, "hier");
  assert_null(getenv("GCOMP_ALGO"));   /* the library never calls setenv */
  destroy_all(4, comms);
}

/* Each communicator keeps the settings it was created with, whatever came later. */
static void test_configs_are_per_communicator(void **state) {
  gcomp_config *ring = quiet_config("ring"), *rhd = quiet_config("rhd");
  gcomp_comm *a[2], *b[2];
  assert_int_equal(gcomp_comm_init_local(2, NULL, ring, a), GCOMP_OK);
  assert_int_equal(gcomp_comm_init_local(2, NULL, rhd, b), GCOMP_OK);
  gcomp_config_destroy(ring);
  gcomp_config_destroy(rhd);
  static rank_job ja[2], jb[2];
  run_sums(2, a, ja);
  run_sums(2, b, jb);
  assert_string_equal(ja[0].algo, "ring");
  assert_string_equal(jb[1].algo, "rhd");
  destroy_all(2, a);
  destroy_all(2, b);
  /* NULL config: the environment */
  gcomp_comm *e[2];
  assert_int_equal(gcomp_comm_init_local(2, NULL, NULL, e), GCOMP_OK);
  static rank_job je[2];
  run_sums(2, e, je);
  destroy_all(2, e);
}

static void test_init_local_refuses(void **state) {
  gcomp_comm *comms[4] = {NULL};
  int bad_node[2] = {0, 2};
  assert_int_equal(gcomp_comm_init_local(0, NULL, NULL, comms), GCOMP_ERR_INVALID);
  assert_int_equal(gcomp_comm_init_local(4097, NULL, NULL, comms), GCOMP_ERR_INVALID);
  assert_int_equal(gcomp_comm_init_local(2, bad_node, NULL, comms), GCOMP_ERR_INVALID);
  assert_non_null(strstr(gcomp_last_error(), "node_of[1] = 2"));
  assert_int_equal(gcomp_comm_init_local(2, NULL, NULL, NULL), GCOMP_ERR_INVALID);
  /* a value only a communicator checks (the link figures' count): every rank fails alike,
   * and nothing is left over */
  gcomp_config *c = quiet_config(NULL);
  assert_int_equal(gcomp_config_set(c, "GCOMP_ALPHA_BETA", "1,2,3"), GCOMP_OK);
  comms[0] = comms[1] = (gcomp_comm *)c;
  assert_int_equal(gcomp_comm_init_local(2, NULL, c, comms), GCOMP_ERR_INVALID);
  assert_non_null(strstr(gcomp_last_error(), "GCOMP_ALPHA_BETA"));
  assert_null(comms[0]);
  assert_null(comms[1]);
  gcomp_config_destroy(c);
}

/* gcomp_config_set checks algorithm names and codec specs at once,
 * naming the token, and leaves the config unchanged (it accepted them all before) */
static void test_config_set_checks_values(void **state) {
  gcomp_config *c = quiet_config("ring");
  assert_int_equal(gcomp_config_set(c, "GCOMP_ALGO", "rnig"), GCOMP_ERR_INVALID);
  assert_non_null(strstr(gcomp_last_error(), "GCOMP_ALGO='rnig' is not an algorithm"));
  assert_int_equal(gcomp_config_set(c, "CODEC", "topk:ratio=2"), GCOMP_ERR_INVALID);
  assert_non_null(strstr(gcomp_last_error(), "ratio"));
  assert_int_equal(gcomp_config_set(c, "GCOMP_INTRA_CODEC", "bf17"), GCOMP_ERR_INVALID);
  assert_non_null(strstr(gcomp_last_error(), "bf17"));
  const char *v = NULL;
  assert_int_equal(gcomp_config_get(c, "GCOMP_ALGO", &v, NULL), GCOMP_OK);
  assert_string_equal(v, "ring");
  assert_int_equal(gcomp_config_get(c, "GCOMP_CODEC", &v, NULL), GCOMP_OK);
  assert_string_equal(v, "none");
  /* good values pass, and NULL goes back to the default */
  assert_int_equal(gcomp_config_set(c, "GCOMP_ALGO", "auto"), GCOMP_OK);
  assert_int_equal(gcomp_config_set(c, "GCOMP_CODEC", "topk:ratio=0.01+ef"), GCOMP_OK);
  assert_int_equal(gcomp_config_set(c, "GCOMP_INTRA_CODEC", "none"), GCOMP_OK);
  assert_int_equal(gcomp_config_set(c, "GCOMP_CODEC", NULL), GCOMP_OK);
  gcomp_config_destroy(c);
}

/* ---- destroy with pending requests ----------------------------------------------------- */
static void *late_rank(void *arg) {
  usleep(100 * 1000);   /* rank 0 tries to destroy meanwhile: its request cannot finish */
  return sum_main(arg);
}

static void test_destroy_refuses_pending(void **state) {
  gcomp_config *c = quiet_config(NULL);
  gcomp_comm *comms[2];
  assert_int_equal(gcomp_comm_init_local(2, NULL, c, comms), GCOMP_OK);
  gcomp_config_destroy(c);
  static rank_job jobs[2];
  float x[COUNT];
  for (int i = 0; i < COUNT; i++) x[i] = (float)i;
  gcomp_request *req = NULL;
  assert_int_equal(gcomp_iallreduce(comms[0], x, x, COUNT, GCOMP_FLOAT32, GCOMP_SUM, NULL, 0,
                                    &req), GCOMP_OK);
  /* rank 1 has not called yet: the request is still running on the progress thread */
  assert_int_equal(gcomp_comm_destroy(comms[0]), GCOMP_ERR_INVALID);
  assert_non_null(strstr(gcomp_last_error(), "1 gcomp_iallreduce request is pending"));
  jobs[1].comm = comms[1];
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, late_rank, &jobs[1]), 0);
  assert_int_equal(gcomp_request_wait(req), GCOMP_OK);   /* still usable */
  pthread_join(th, NULL);
  assert_int_equal(jobs[1].status, GCOMP_OK);
  for (int i = 0; i < COUNT; i += 97) assert_true(x[i] == (float)(COUNT + 2 * i));
  /* a finished request not yet waited for is pending too: its memory is the caller's to free */
  gcomp_comm *one[1];
  assert_int_equal(gcomp_comm_init_local(1, NULL, NULL, one), GCOMP_OK);
  gcomp_request *a = NULL, *b = NULL;
  assert_int_equal(gcomp_iallreduce(one[0], x, x, 4, GCOMP_FLOAT32, GCOMP_SUM, NULL, 0, &a), 0);
  assert_int_equal(gcomp_iallreduce(one[0], x, x, 4, GCOMP_FLOAT32, GCOMP_SUM, NULL, 0, &b), 0);
  assert_int_equal(gcomp_comm_destroy(one[0]), GCOMP_ERR_INVALID);
  assert_non_null(strstr(gcomp_last_error(), "2 gcomp_iallreduce requests are pending"));
  assert_int_equal(gcomp_request_wait(a), GCOMP_OK);
  int done = 0;
  while (!done) assert_int_equal(gcomp_request_test(b, &done), GCOMP_OK);
  assert_int_equal(gcomp_comm_destroy(one[0]), GCOMP_OK);
  destroy_all(2, comms);
}

/* ---- sized stats structs --------------------------------------------------------------- */
/* The getter writes exactly min(struct_size, sizeof) bytes and refuses a size below the
 * first layout. */
#define CHECK_SIZED(type, last, call)                                                        \
  do {                                                                                       \
    unsigned char buf[sizeof(type) + 32];                                                    \
    size_t first = offsetof(type, last) + sizeof(((type *)0)->last);                         \
    size_t sizes[] = {first, sizeof(type), sizeof buf};                                      \
    for (int k = 0; k < 3; k++) {                                                            \
      memset(buf, 0xab, sizeof buf);                                                         \
      memcpy(buf, &sizes[k], sizeof(size_t));                                                \
      assert_int_equal(call((type *)(void *)buf), GCOMP_OK);                                 \
      size_t n = sizes[k] < sizeof(type) ? sizes[k] : sizeof(type);                          \
      for (size_t i = n; i < sizeof buf; i++) assert_int_equal(buf[i], 0xab);                \
      size_t kept;                                                                           \
      memcpy(&kept, buf, sizeof kept);                                                       \
      assert_int_equal(kept, sizes[k]);                                                      \
    }                                                                                        \
    type small = {.struct_size = first - 1};                                                 \
    assert_int_equal(call(&small), GCOMP_ERR_INVALID);                                       \
    assert_non_null(strstr(gcomp_last_error(), "struct_size"));                              \
  } while (0)

static gcomp_comm *stats_comm;
static gcomp_codec *stats_codec;
static int comm_stats(gcomp_comm_stats *s) { return gcomp_comm_get_stats(stats_comm, s); }
static int skew_stats(gcomp_skew_stats *s) { return gcomp_comm_get_skew(stats_comm, s); }
static int codec_stats(gcomp_codec_stats *s) { return gcomp_codec_get_stats(stats_codec, s); }

static void test_sized_stats(void **state) {
  assert_int_equal(gcomp_comm_init_local(1, NULL, NULL, &stats_comm), GCOMP_OK);
  float x[4] = {1, 2, 3, 4};
  assert_int_equal(gcomp_allreduce(stats_comm, x, x, 4, GCOMP_FLOAT32, GCOMP_SUM, NULL, 0), 0);
  assert_int_equal(gcomp_codec_create("bf16", &stats_codec), GCOMP_OK);
  CHECK_SIZED(gcomp_comm_stats, shm_bytes, comm_stats);
  CHECK_SIZED(gcomp_skew_stats, worst_last, skew_stats);
  CHECK_SIZED(gcomp_codec_stats, underflows, codec_stats);
  gcomp_comm_stats s = {.struct_size = sizeof s};
  assert_int_equal(gcomp_comm_get_stats(stats_comm, &s), GCOMP_OK);
  assert_int_equal(s.calls, 1);
  assert_int_equal(s.bytes, 16);
  gcomp_codec_destroy(stats_codec);
  assert_int_equal(gcomp_comm_destroy(stats_comm), GCOMP_OK);
}

static void test_algo_compresses(void **state) {
  assert_int_equal(gcomp_algo_compresses("direct"), 1);
  assert_int_equal(gcomp_algo_compresses("sparse"), 1);
  assert_int_equal(gcomp_algo_compresses("ring"), 0);
  assert_int_equal(gcomp_algo_compresses("nope"), GCOMP_ERR_INVALID);
  assert_int_equal(gcomp_algo_compresses(NULL), GCOMP_ERR_INVALID);
}

/* A communicator plans for as many codec specs as its calls use: it once kept 8 and refused
 * a ninth (GCOMP_ERR_UNSUPPORTED), which also broke the communicator for every later call.
 * Nine specs, then the first again; every sum must be exact (each value is 1, the sum 2, on
 * a grid of every codec here). */
enum { NSPECS = 9 };
static const char *const limit_specs[NSPECS] = {
    "quant:bits=1", "quant:bits=2", "quant:bits=3", "quant:bits=4", "quant:bits=5",
    "quant:bits=6", "quant:bits=7", "quant:bits=8", "sign"};
typedef struct {
  gcomp_comm *comm;
  gcomp_codec *codecs[NSPECS];
  int status[NSPECS + 1];
  char error[256];
} limit_job;

static void *limit_main(void *arg) {
  limit_job *j = arg;
  static float x[2][COUNT];
  float *v = x[gcomp_comm_rank(j->comm)];
  for (int k = 0; k <= NSPECS; k++) {
    for (int i = 0; i < COUNT; i++) v[i] = 1.0f;
    j->status[k] = gcomp_allreduce(j->comm, v, v, COUNT, GCOMP_FLOAT32, GCOMP_SUM,
                                   j->codecs[k % NSPECS], 0);
    if (j->status[k] < 0 && !j->error[0])
      snprintf(j->error, sizeof j->error, "%s: %s", limit_specs[k % NSPECS], gcomp_last_error());
    for (int i = 0; i < COUNT && j->status[k] == GCOMP_OK; i++)
      if (v[i] != 2.0f) j->status[k] = 99;
  }
  return NULL;
}

static void test_codec_spec_limit(void **state) {
  gcomp_config *c = quiet_config("direct");
  assert_int_equal(gcomp_config_set(c, "GCOMP_CODEC_MIN_BYTES", "0"), GCOMP_OK);
  gcomp_comm *comms[2];
  assert_int_equal(gcomp_comm_init_local(2, NULL, c, comms), GCOMP_OK);
  gcomp_config_destroy(c);
  limit_job jobs[2];
  memset(jobs, 0, sizeof jobs);
  pthread_t th[2];
  for (int r = 0; r < 2; r++) {
    jobs[r].comm = comms[r];
    for (int k = 0; k < NSPECS; k++)
      assert_int_equal(gcomp_codec_create(limit_specs[k], &jobs[r].codecs[k]), GCOMP_OK);
    assert_int_equal(pthread_create(&th[r], NULL, limit_main, &jobs[r]), 0);
  }
  for (int r = 0; r < 2; r++) pthread_join(th[r], NULL);
  for (int r = 0; r < 2; r++) {
    if (jobs[r].error[0]) fprintf(stderr, "rank %d: %s\n", r, jobs[r].error);
    for (int k = 0; k <= NSPECS; k++) assert_int_equal(jobs[r].status[k], GCOMP_OK);
    for (int k = 0; k < NSPECS; k++) gcomp_codec_destroy(jobs[r].codecs[k]);
    assert_int_equal(gcomp_comm_destroy(comms[r]), GCOMP_OK);
  }
}

/* ---- out-of-band bootstrap, over real processes ---------------------------------------- */
/* The caller's allgather: a shared page per rank and a process-shared barrier. */
enum { OOB_SLOT = 64 << 10 };
typedef struct {
  pthread_barrier_t bar;
  int calls[MAXR];
  unsigned char slot[MAXR][OOB_SLOT];
} oob_area;

typedef struct {
  oob_area *area;
  int rank, size;
} oob_ctx;

static int shm_allgather(void *ctx, const void *mine, size_t len, void *all) {
  oob_ctx *o = ctx;
  if (len > OOB_SLOT) return 1;
  o->area->calls[o->rank]++;
  memcpy(o->area->slot[o->rank], mine, len);
  pthread_barrier_wait(&o->area->bar);
  for (int r = 0; r < o->size; r++) memcpy((char *)all + (size_t)r * len, o->area->slot[r], len);
  pthread_barrier_wait(&o->area->bar);   /* nobody overwrites a slot still being read */
  return 0;
}

/* A config's providers reach the libfabric transport: a provider libfabric does not have is
 * refused on every rank, by name; the next communicator gets the environment's. */
static int oob_bad_provider(oob_ctx *o, const char *node) {
  gcomp_config *c = NULL;
  if (gcomp_config_create(&c) || gcomp_config_set(c, "GCOMP_TIMEOUT_MS", "20000") ||
      gcomp_config_set(c, "GCOMP_PROVIDER", "nosuchprov") ||
      gcomp_config_set(c, "GCOMP_INTRA_PROVIDER", "nosuchprov"))
    return 15;
  gcomp_comm *comm = NULL;
  int st = gcomp_comm_init_oob(o->rank, o->size, node, shm_allgather, o, c, &comm);
  gcomp_config_destroy(c);
  if (st != GCOMP_ERR_UNSUPPORTED || comm || !strstr(gcomp_last_error(), "'nosuchprov'")) {
    fprintf(stderr, "rank %d: %d: %s\n", o->rank, st, gcomp_last_error());
    return 16;
  }
  return 0;
}

static int oob_rank(oob_area *area, int rank, int size, const char *node) {
  oob_ctx o = {area, rank, size};
  int bad = oob_bad_provider(&o, node);
  if (bad) return bad;
  gcomp_config *c = NULL;
  if (gcomp_config_create(&c) || gcomp_config_set(c, "GCOMP_TIMEOUT_MS", "20000")) return 10;
  gcomp_comm *comm = NULL;
  int st = gcomp_comm_init_oob(rank, size, node, shm_allgather, &o, c, &comm);
  gcomp_config_destroy(c);
  if (st < 0) {
    fprintf(stderr, "rank %d: %s\n", rank, gcomp_last_error());
    return 11;
  }
  if (gcomp_comm_rank(comm) != rank || gcomp_comm_size(comm) != size) return 12;
  if (gcomp_comm_nnodes(comm) != 2) return 13;
  double x[64];
  for (int i = 0; i < 64; i++) x[i] = rank + i;
  st = gcomp_allreduce(comm, x, x, 64, GCOMP_FLOAT64, GCOMP_SUM, NULL, 0);
  bad = st != GCOMP_OK;
  for (int i = 0; i < 64; i++) bad |= x[i] != size * (size - 1) / 2.0 + size * i;
  if (gcomp_comm_destroy(comm) != GCOMP_OK) bad = 1;
  return bad ? 14 : 0;
}

static void test_init_oob_real_processes(void **state) {
  enum { N = 3 };
  oob_area *area = mmap(NULL, sizeof *area, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                        -1, 0);
  assert_true(area != MAP_FAILED);
  pthread_barrierattr_t ba;
  pthread_barrierattr_init(&ba);
  pthread_barrierattr_setpshared(&ba, PTHREAD_PROCESS_SHARED);
  pthread_barrier_init(&area->bar, &ba, N);
  /* two nodes by the caller's say: ranks 0 and 1 share one, rank 2 has its own */
  const char *nodes[N] = {"node-a", "node-a", "node-b"};
  pid_t pid[N];
  for (int r = 0; r < N; r++) {
    pid[r] = fork();   /* before any libfabric call in this process */
    assert_true(pid[r] >= 0);
    if (pid[r] == 0) _exit(oob_rank(area, r, N, nodes[r]));
  }
  for (int r = 0; r < N; r++) {
    int ws = 0;
    assert_int_equal(waitpid(pid[r], &ws, 0), pid[r]);
    assert_true(WIFEXITED(ws));
    assert_int_equal(WEXITSTATUS(ws), 0);
    assert_true(area->calls[r] > 0);
    assert_int_equal(area->calls[r], area->calls[0]);   /* every rank, the same calls */
  }
  munmap(area, sizeof *area);
}

static int failing_allgather(void *ctx, const void *mine, size_t len, void *all) {
  ++*(int *)ctx;
  return -5;
}

static void test_init_oob_refuses(void **state) {
  gcomp_comm *comm = (gcomp_comm *)state;
  int calls = 0;
  assert_int_equal(gcomp_comm_init_oob(2, 2, NULL, failing_allgather, &calls, NULL, &comm),
                   GCOMP_ERR_INVALID);
  assert_null(comm);
  assert_int_equal(gcomp_comm_init_oob(0, 1, NULL, NULL, NULL, NULL, &comm), GCOMP_ERR_INVALID);
  assert_int_equal(gcomp_comm_init_oob(0, 1, NULL, failing_allgather, &calls, NULL, NULL),
                   GCOMP_ERR_INVALID);
  assert_int_equal(calls, 0);
  /* the callback's failure is the bootstrap's */
  assert_int_equal(gcomp_comm_init_oob(0, 1, "solo", failing_allgather, &calls, NULL, &comm),
                   GCOMP_ERR_BOOTSTRAP);
  assert_int_equal(calls, 1);
  assert_null(comm);
  assert_non_null(strstr(gcomp_last_error(), "the caller's allgather"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      /* first: the children must fork before this process touches libfabric */
      cmocka_unit_test(test_init_oob_real_processes),
      cmocka_unit_test(test_init_local_runs_collectives),
      cmocka_unit_test(test_configs_are_per_communicator),
      cmocka_unit_test(test_init_local_refuses),
      cmocka_unit_test(test_config_set_checks_values),
      cmocka_unit_test(test_destroy_refuses_pending),
      cmocka_unit_test(test_sized_stats),
      cmocka_unit_test(test_algo_compresses),
      cmocka_unit_test(test_codec_spec_limit),
      cmocka_unit_test(test_init_oob_refuses),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
