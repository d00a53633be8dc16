/* Communicators made from communicators (gcomp_comm_split, gcomp_comm_dup,
 * gcomp_config_share_calibration) on in-process ranks (gcomp_comm_init_local with node_of,
 * one thread a rank), and the hierarchical algorithms on nodes that hold different numbers
 * of ranks, which splits make common. The internal header is read only to check which
 * calibration figures a communicator took. */
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

#include "comm_impl.h"
#include "gcomp.h"

enum { MAXR = 8 };

static gcomp_config *config(const char *algo, int links) {
  gcomp_config *c = NULL;
  assert_int_equal(gcomp_config_create(&c), GCOMP_OK);
  if (links) assert_int_equal(gcomp_config_set(c, "GCOMP_ALPHA_BETA", "1,10,20,1"), GCOMP_OK);
  if (algo) assert_int_equal(gcomp_config_set(c, "GCOMP_ALGO", algo), GCOMP_OK);
  return c;
}

/* One thread per rank running fn(job); cmocka's checks stay on the main thread. */
typedef struct job job;
typedef void (*rank_fn)(job *j);
struct job {
  gcomp_comm *comm, *child;
  int rank, color, key;
  int status;           /* the first failure, GCOMP_OK when none */
  char error[512];
  char algo[32];        /* the algorithm of the child's last call */
  long wrong;           /* results that differ from the expected ones */
  int crank, csize, cnode, cnnodes;
  int ctimeout;         /* the child's transport's timeout */
  const char *spec;     /* a codec for the calls, or NULL */
  float *last;          /* the last lossy result */
};

static void note(job *j, int st) {
  if (st < 0 && j->status == GCOMP_OK) {
    j->status = st;
    snprintf(j->error, sizeof j->error, "%s", gcomp_last_error());
  }
}

static void *thread_main(void *arg) {
  void **a = arg;
  ((rank_fn)(uintptr_t)a[0])(a[1]);
  return NULL;
}

static void run_ranks(int n, gcomp_comm **comms, job *jobs, rank_fn fn) {
  pthread_t th[MAXR];
  void *args[MAXR][2];
  for (int r = 0; r < n; r++) {
    jobs[r].comm = comms[r], jobs[r].rank = r, jobs[r].status = GCOMP_OK;
    args[r][0] = (void *)(uintptr_t)fn, args[r][1] = &jobs[r];
    assert_int_equal(pthread_create(&th[r], NULL, thread_main, args[r]), 0);
  }
  for (int r = 0; r < n; r++) pthread_join(th[r], NULL);
}

static void all_ok(int n, const job *jobs) {
  for (int r = 0; r < n; r++) {
    if (jobs[r].status != GCOMP_OK) fail_msg("rank %d: %s", r, jobs[r].error);
    assert_int_equal(jobs[r].wrong, 0);
  }
}

/* ---- exact calls on a communicator ---------------------------------------------------- */
/* Input of member m (its rank in c) at element i: small integers, so sums are exact */
static double input(int m, size_t i, int salt) {
  return (double)((int)((i * 7 + (size_t)m * 13 + (size_t)salt) % 41) - 20);
}

/* Calls of several counts, dtypes and ops on j->child; counts the results that are not the
 * exact reduction. */
static void exact_calls(job *j, gcomp_comm *c) {
  static const size_t counts[] = {1, 2, 3, 5, 17, 1000, 4097, 60001};
  static const gcomp_dtype dts[] = {GCOMP_FLOAT32, GCOMP_INT32, GCOMP_FLOAT64};
  static const gcomp_op ops[] = {GCOMP_SUM, GCOMP_MAX};
  int me = gcomp_comm_rank(c), n = gcomp_comm_size(c);
  double *x = malloc(60001 * sizeof *x);
  for (size_t ci = 0; ci < sizeof counts / sizeof *counts && j->status == GCOMP_OK; ci++)
    for (int d = 0; d < 3; d++)
      for (int o = 0; o < 2 && j->status == GCOMP_OK; o++) {
        size_t count = counts[ci];
        int salt = (int)ci * 6 + d * 2 + o;
        for (size_t i = 0; i < count; i++) {
          double v = input(me, i, salt);
          if (dts[d] == GCOMP_FLOAT32) ((float *)x)[i] = (float)v;
          else if (dts[d] == GCOMP_INT32) ((int32_t *)x)[i] = (int32_t)v;
          else x[i] = v;
        }
        note(j, gcomp_allreduce(c, x, x, count, dts[d], ops[o], NULL, 0));
        snprintf(j->algo, sizeof j->algo, "%s", gcomp_comm_last_algo(c));
        for (size_t i = 0; i < count && j->status == GCOMP_OK; i++) {
          double want = ops[o] == GCOMP_SUM ? 0 : -1e30;
          for (int m = 0; m < n; m++)
            want = ops[o] == GCOMP_SUM ? want + input(m, i, salt) : fmax(want, input(m, i, salt));
          double got = dts[d] == GCOMP_FLOAT32 ? ((float *)x)[i]
                       : dts[d] == GCOMP_INT32 ? ((int32_t *)x)[i] : x[i];
          j->wrong += got != want;
        }
      }
  free(x);
}

static void describe_child(job *j) {
  j->crank = gcomp_comm_rank(j->child), j->csize = gcomp_comm_size(j->child);
  j->cnode = gcomp_comm_node(j->child), j->cnnodes = gcomp_comm_nnodes(j->child);
  j->ctimeout = j->child->t->timeout_ms;
}

/* ---- dup ------------------------------------------------------------------------------- */
static void dup_rank(job *j) {
  note(j, gcomp_comm_dup(j->comm, &j->child));
  if (j->status < 0) return;
  describe_child(j);
  exact_calls(j, j->child);
  exact_calls(j, j->comm);   /* the parent stays usable, and independent */
  note(j, gcomp_comm_destroy(j->child));
}

/* The environment's GCOMP_TIMEOUT_MS, as gcomp_init read it */
static int env_timeout(void) {
  const char *v = NULL;
  assert_int_equal(gcomp_config_get(NULL, "GCOMP_TIMEOUT_MS", &v, NULL), GCOMP_OK);
  return atoi(v);
}

/* The dup of a communicator made with a config: the config's GCOMP_TIMEOUT_MS (not the
 * environment's) reaches the transports of both, and a communicator made without a config
 * afterwards has the environment's. */
static void test_dup(void **state) {
  (void)state;
  enum { CONFIG_TIMEOUT = 54321 };
  assert_int_not_equal(env_timeout(), CONFIG_TIMEOUT);
  gcomp_config *c = config(NULL, 1);
  assert_int_equal(gcomp_config_set(c, "GCOMP_TIMEOUT_MS", "54321"), GCOMP_OK);
  int node_of[4] = {0, 0, 1, 1};
  gcomp_comm *comms[4];
  assert_int_equal(gcomp_comm_init_local(4, node_of, c, comms), GCOMP_OK);
  gcomp_config_destroy(c);
  job jobs[4] = {0};
  run_ranks(4, comms, jobs, dup_rank);
  all_ok(4, jobs);
  for (int r = 0; r < 4; r++) {
    assert_int_equal(jobs[r].crank, r);
    assert_int_equal(jobs[r].csize, 4);
    assert_int_equal(jobs[r].cnode, node_of[r]);
    assert_int_equal(jobs[r].cnnodes, 2);
    assert_int_equal(comms[r]->t->timeout_ms, CONFIG_TIMEOUT);
    assert_int_equal(jobs[r].ctimeout, CONFIG_TIMEOUT);
    assert_int_equal(gcomp_comm_destroy(comms[r]), GCOMP_OK);
  }
  gcomp_comm *e[2];
  assert_int_equal(gcomp_comm_init_local(2, NULL, NULL, e), GCOMP_OK);
  for (int r = 0; r < 2; r++) {
    assert_int_equal(e[r]->t->timeout_ms, env_timeout());
    assert_int_equal(gcomp_comm_destroy(e[r]), GCOMP_OK);
  }
}

/* ---- split: groups uneven over the nodes, forced hier --------------------------------- */
static void split_rank(job *j) {
  note(j, gcomp_comm_split(j->comm, j->color, j->key, &j->child));
  if (j->status < 0 || !j->child) return;
  describe_child(j);
  exact_calls(j, j->child);
  note(j, gcomp_comm_destroy(j->child));
}

static void test_split_uneven_hier(void **state) {
  (void)state;
  gcomp_config *c = config("hier", 1);
  int node_of[6] = {0, 0, 0, 1, 1, 1};
  gcomp_comm *comms[6];
  assert_int_equal(gcomp_comm_init_local(6, node_of, c, comms), GCOMP_OK);
  gcomp_config_destroy(c);
  /* {3, 1, 0} by key (2 + 1 over the nodes), {2, 4} (ties: the parent's order), 5 alone out */
  job jobs[6] = {0};
  int color[6] = {0, 0, 7, 0, 7, GCOMP_UNDEFINED}, key[6] = {-0, -1, 5, -3, 5, 0};
  int want_rank[6] = {2, 1, 0, 0, 1, -1}, want_size[6] = {3, 3, 2, 3, 2, 0};
  for (int r = 0; r < 6; r++) jobs[r].color = color[r], jobs[r].key = key[r];
  run_ranks(6, comms, jobs, split_rank);
  all_ok(6, jobs);
  for (int r = 0; r < 6; r++) {
    if (color[r] == GCOMP_UNDEFINED) {
      assert_null(jobs[r].child);
      continue;
    }
    assert_int_equal(jobs[r].crank, want_rank[r]);
    assert_int_equal(jobs[r].csize, want_size[r]);
    assert_int_equal(jobs[r].cnnodes, 2);
    /* the parent's node map, nodes numbered by their lowest rank in the child (the first
     * group's rank 0 is parent rank 3, of node 1) */
    assert_int_equal(jobs[r].cnode, color[r] == 0 ? (node_of[r] == 1 ? 0 : 1) : node_of[r]);
    assert_string_equal(jobs[r].algo, "hier");   /* not a flat fallback */
  }
  for (int r = 0; r < 6; r++) assert_int_equal(gcomp_comm_destroy(comms[r]), GCOMP_OK);
}

/* ---- hier on uneven nodes, from the start ---------------------------------------------- */
static void exact_rank(job *j) { exact_calls(j, j->comm); }

/* values in [1, 2) that bf16 cannot hold */
static double lossy_input(int m, size_t i, int call) {
  return 1.0 + 0.001 * (double)((i * 37 + (size_t)m * 11 + (size_t)call) % 997);
}

/* bf16 across the nodes (hier-direct) or top-k keeping everything (hier-sparse): every rank
 * ends with the same bits, within two bf16 roundings of the exact sum (top-k: exact) */
static void lossy_rank(job *j) {
  enum { N = 50001 };
  gcomp_codec *codec = NULL;
  note(j, gcomp_codec_create(j->spec, &codec));
  float *x = malloc(N * sizeof *x);
  int me = gcomp_comm_rank(j->comm), n = gcomp_comm_size(j->comm);
  for (int call = 0; call < 3 && j->status == GCOMP_OK; call++) {
    for (size_t i = 0; i < N; i++) x[i] = (float)lossy_input(me, i, call);
    note(j, gcomp_allreduce(j->comm, x, x, N, GCOMP_FLOAT32, GCOMP_SUM, codec, 1));
    snprintf(j->algo, sizeof j->algo, "%s", gcomp_comm_last_algo(j->comm));
    int exact = strncmp(j->spec, "topk", 4) == 0;
    for (size_t i = 0; i < N && j->status == GCOMP_OK; i++) {
      double want = 0;
      for (int m = 0; m < n; m++) want += (float)lossy_input(m, i, call);
      double err = fabs(x[i] - want);
      j->wrong += exact ? err > 1e-3 : !(err <= want * (3.0 / 256));
    }
  }
  j->last = x;   /* compared across ranks */
  gcomp_codec_destroy(codec);
}

static void hier_layout(int n, const int *node_of, const char *algo, const char *spec) {
  gcomp_config *c = config(algo, 1);
  if (spec) assert_int_equal(gcomp_config_set(c, "GCOMP_CODEC_MIN_BYTES", "0"), GCOMP_OK);
  gcomp_comm *comms[MAXR];
  assert_int_equal(gcomp_comm_init_local(n, node_of, c, comms), GCOMP_OK);
  gcomp_config_destroy(c);
  job jobs[MAXR] = {{0}};
  for (int r = 0; r < n; r++) jobs[r].spec = spec;
  run_ranks(n, comms, jobs, spec ? lossy_rank : exact_rank);
  all_ok(n, jobs);
  for (int r = 0; r < n; r++) {
    assert_string_equal(jobs[r].algo, algo);
    if (spec) {
      assert_memory_equal(jobs[r].last, jobs[0].last, 50001 * sizeof(float));
    }
  }
  for (int r = 0; r < n; r++) {
    free(jobs[r].last);
    assert_int_equal(gcomp_comm_destroy(comms[r]), GCOMP_OK);
  }
}

static void test_hier_uneven_nodes(void **state) {
  (void)state;
  int a[4] = {0, 0, 0, 1};                 /* 3 + 1 */
  int b[6] = {0, 0, 1, 1, 1, 2};           /* 2 + 3 + 1: pieces at thirds and halves */
  int c[7] = {0, 1, 1, 1, 1, 2, 2};        /* 1 + 4 + 2 */
  int d[5] = {0, 1, 0, 1, 0};              /* 3 + 2, ranks interleaved over the nodes */
  hier_layout(4, a, "hier", NULL);
  hier_layout(6, b, "hier", NULL);
  hier_layout(7, c, "hier", NULL);
  hier_layout(5, d, "hier", NULL);
  hier_layout(6, b, "hier-direct", "bf16");
  hier_layout(5, d, "hier-direct", "bf16");
  hier_layout(6, b, "hier-sparse", "topk:ratio=1");
}

/* The planner offers hier on uneven nodes (it used to price it as impossible) */
static void test_plan_uneven(void **state) {
  (void)state;
  gcomp_plan_in in = {.bytes = 64 << 20, .n = 5, .nnodes = 2, .local = 0, .local_min = 2,
                      .local_max = 3, .pieces = 4, .intra = {1e-6, 1e-10},
                      .inter = {2e-5, 8e-9}, .gamma_spb = 1e-10};
  double hier = gcomp_algo_find("hier")->cost(&in);
  assert_true(hier > 0);
  in.local_min = in.local_max = 0;   /* placement unknown: not offered */
  assert_true(gcomp_algo_find("hier")->cost(&in) < 0);
  in.local_min = 2, in.local_max = 3, in.pieces = 17;   /* more pieces than hier takes */
  assert_true(gcomp_algo_find("hier")->cost(&in) < 0);
  /* equal nodes: the usual cost, the same as through local */
  gcomp_plan_in even = {.bytes = 64 << 20, .n = 4, .nnodes = 2, .local = 2, .intra = in.intra,
                        .inter = in.inter, .gamma_spb = in.gamma_spb};
  gcomp_plan_in as_uneven = even;
  as_uneven.local = 0, as_uneven.local_min = as_uneven.local_max = as_uneven.pieces = 2;
  assert_true(fabs(gcomp_algo_find("hier")->cost(&even) -
                   gcomp_algo_find("hier")->cost(&as_uneven)) < 1e-12);
}

/* ---- calibration shared ---------------------------------------------------------------- */
static void split_halves_rank(job *j) {
  note(j, gcomp_comm_dup(j->comm, &j->child));
  gcomp_comm *half = NULL;
  if (j->status == GCOMP_OK) note(j, gcomp_comm_split(j->comm, j->rank / 2, 0, &half));
  /* what the children took, kept in the job for the main thread */
  if (j->status == GCOMP_OK) {
    j->crank = j->child->calib_inherited;
    j->cnode = half->calib_inherited;
    j->csize = memcmp(j->child->calib.f, j->comm->calib.f, 5 * sizeof(double)) == 0 &&
               memcmp(half->calib.f, j->comm->calib.f, 5 * sizeof(double)) == 0;
    j->cnnodes = half->model.shm_alpha > 0;   /* its own shm figures, measured for 2 ranks */
  }
  exact_calls(j, half);
  note(j, gcomp_comm_destroy(half));
  note(j, gcomp_comm_destroy(j->child));
}

static void test_split_shares_calibration(void **state) {
  (void)state;
  gcomp_config *c = config(NULL, 0);   /* measured */
  gcomp_comm *comms[4];
  assert_int_equal(gcomp_comm_init_local(4, NULL, c, comms), GCOMP_OK);
  assert_int_equal(comms[0]->calib_inherited, 0);
  job jobs[4] = {0};
  run_ranks(4, comms, jobs, split_halves_rank);
  all_ok(4, jobs);
  for (int r = 0; r < 4; r++) {
    assert_int_equal(jobs[r].crank, 1);    /* the dup took the figures */
    assert_int_equal(jobs[r].cnode, 1);    /* so did each half */
    assert_int_equal(jobs[r].csize, 1);    /* the same figures */
    assert_int_equal(jobs[r].cnnodes, 1);  /* and measured its own shared-memory round */
  }
  /* lent through a config: taken on one node; two nodes need inter-node figures that a
   * one-node parent never measured, so they are measured */
  gcomp_config *lent = config(NULL, 0);
  assert_int_equal(gcomp_config_share_calibration(lent, comms[0]), GCOMP_OK);
  for (int r = 0; r < 4; r++) assert_int_equal(gcomp_comm_destroy(comms[r]), GCOMP_OK);
  gcomp_comm *one[2], *two[2];
  int node_of[2] = {0, 1};
  assert_int_equal(gcomp_comm_init_local(2, NULL, lent, one), GCOMP_OK);
  assert_int_equal(gcomp_comm_init_local(2, node_of, lent, two), GCOMP_OK);
  assert_int_equal(one[0]->calib_inherited, 1);
  assert_int_equal(one[1]->calib_inherited, 1);
  assert_int_equal(two[0]->calib_inherited, 0);
  for (int r = 0; r < 2; r++) {
    assert_int_equal(gcomp_comm_destroy(one[r]), GCOMP_OK);
    assert_int_equal(gcomp_comm_destroy(two[r]), GCOMP_OK);
  }
  assert_int_equal(gcomp_config_share_calibration(NULL, NULL), GCOMP_ERR_INVALID);
  gcomp_config_destroy(lent);
  gcomp_config_destroy(c);
}

/* ---- errors, and the children's files -------------------------------------------------- */
static void bad_color_rank(job *j) {
  int st = gcomp_comm_split(j->comm, j->rank == 1 ? -5 : 0, 0, &j->child);
  j->crank = st;
  snprintf(j->error, sizeof j->error, "%s", gcomp_last_error());
  exact_calls(j, j->comm);   /* still usable */
}

static void files_rank(job *j) {
  gcomp_comm *a = NULL, *b = NULL;
  note(j, gcomp_comm_dup(j->comm, &a));
  if (j->status == GCOMP_OK) note(j, gcomp_comm_split(a, 0, 0, &b));   /* a's first child */
  if (j->status == GCOMP_OK) note(j, gcomp_comm_split(j->comm, j->rank, 0, &j->child));
  note(j, gcomp_comm_destroy(b));
  note(j, gcomp_comm_destroy(a));
  note(j, gcomp_comm_destroy(j->child));
}

static void test_split_errors_and_files(void **state) {
  (void)state;
  gcomp_comm *out = (gcomp_comm *)1;
  assert_int_equal(gcomp_comm_split(NULL, 0, 0, &out), GCOMP_ERR_INVALID);
  assert_null(out);
  assert_int_equal(gcomp_comm_dup(NULL, &out), GCOMP_ERR_INVALID);
  char dir[] = "/tmp/gcomp-split-XXXXXX", pattern[64];
  assert_non_null(mkdtemp(dir));
  snprintf(pattern, sizeof pattern, "%s/st-%%r.json", dir);
  gcomp_config *c = config(NULL, 1);
  assert_int_equal(gcomp_config_set(c, "GCOMP_STATS", pattern), GCOMP_OK);
  gcomp_comm *comms[3];
  assert_int_equal(gcomp_comm_init_local(3, NULL, c, comms), GCOMP_OK);
  gcomp_config_destroy(c);
  job jobs[3] = {0};
  run_ranks(3, comms, jobs, bad_color_rank);
  for (int r = 0; r < 3; r++) {
    assert_int_equal(jobs[r].crank, GCOMP_ERR_INVALID);   /* on every rank alike */
    assert_non_null(strstr(jobs[r].error, "rank 1 passed color -5"));
    assert_null(jobs[r].child);
    assert_int_equal(jobs[r].wrong, 0);
  }
  memset(jobs, 0, sizeof jobs);
  run_ranks(3, comms, jobs, files_rank);
  all_ok(3, jobs);
  for (int r = 0; r < 3; r++) assert_int_equal(gcomp_comm_destroy(comms[r]), GCOMP_OK);
  /* the failed split made nothing and counts for nothing: the dup is .s1, its own first
   * split .s1.s1, the next split of the world .s2 */
  const char *names[] = {"st-%d.json", "st-%d.s1.json", "st-%d.s1.s1.json", "st-%d.s2.json"};
  for (int r = 0; r < 3; r++)
    for (int k = 0; k < 4; k++) {
      char name[64], path[160];
      snprintf(name, sizeof name, names[k], r);
      snprintf(path, sizeof path, "%s/%s", dir, name);
      if (access(path, F_OK) != 0) fail_msg("no %s", path);
      unlink(path);
    }
  rmdir(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_dup),
      cmocka_unit_test(test_split_uneven_hier),
      cmocka_unit_test(test_hier_uneven_nodes),
      cmocka_unit_test(test_plan_uneven),
      cmocka_unit_test(test_split_shares_calibration),
      cmocka_unit_test(test_split_errors_and_files),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
