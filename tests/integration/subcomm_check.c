/* Communicators made from communicators, over real processes (started by gcomp-run), using
 * only the public header (and gcomp_internal.h's error detail).
 *   subcomm_check concurrent ROUNDS
 *     Each rank's two threads create a communicator each at the same time, bootstrapped with
 *     gcomp_comm_init_oob through an exchange communicator of their own (as the MPI shim
 *     does under MPI_THREAD_MULTIPLE), reduce on it and destroy it, ROUNDS times. Even ranks
 *     start thread A first, odd ranks thread B: a lock held across a whole creation would
 *     deadlock them; and one thread's endpoint setup must not break the other's (the shm
 *     sweep once removed this process's live regions while a peer still had to open one).
 *   subcomm_check split CALLS
 *     A dup of the world and a split by rank parity (so that, over gcomp-run's consecutive
 *     blocks of ranks per node, the groups hold different numbers of ranks per node), each
 *     reduced on CALLS times by a thread of its own at the same time, exact results checked;
 *     with GCOMP_ALGO=hier every call on a communicator across nodes must have run hier.
 * Exit 0 when every check passed; prints "subcomm_check: rank R: ..." lines. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <unistd.h>

#include "gcomp_internal.h"

static int rank_, size_;
static int failures;
static pthread_mutex_t out_lock = PTHREAD_MUTEX_INITIALIZER;

static void fail(const char *what, int st) {
  pthread_mutex_lock(&out_lock);
  failures++;
  printf("subcomm_check: rank %d: FAIL: %s: %s: %s\n", rank_, what, gcomp_strerror(st),
         gcomp_last_error());
  fflush(stdout);
  pthread_mutex_unlock(&out_lock);
}

/* gcomp_comm_init_oob's allgather over a gcomp communicator: each rank's record in its own
 * slot of a zeroed int64 array, summed (exact). ctx is the communicator. */
static int comm_allgather(void *ctx, const void *mine, size_t len, void *all) {
  gcomp_comm *via = ctx;
  size_t words = (len + 7) / 8, n = (size_t)gcomp_comm_size(via);
  int64_t *buf = calloc(words * n, 8);
  if (!buf) return 1;
  memcpy(buf + words * (size_t)gcomp_comm_rank(via), mine, len);
  int st = gcomp_allreduce(via, buf, buf, words * n, GCOMP_INT64, GCOMP_SUM, NULL, 0);
  for (size_t r = 0; st == GCOMP_OK && r < n; r++)
    memcpy((char *)all + r * len, buf + words * r, len);
  free(buf);
  return st != GCOMP_OK;
}

/* Sum of ranks' (rank + 1) * (i + 1) over `count` floats: exact */
static int reduce_check(gcomp_comm *c, size_t count, int salt) {
  float *x = malloc(count * sizeof *x);
  if (!x) return GCOMP_ERR_NOMEM;
  int r = gcomp_comm_rank(c), n = gcomp_comm_size(c);
  for (size_t i = 0; i < count; i++) x[i] = (float)((r + 1) * (int)(i % 100 + 1) + salt);
  int st = gcomp_allreduce(c, x, x, count, GCOMP_FLOAT32, GCOMP_SUM, NULL, 0);
  for (size_t i = 0; st == GCOMP_OK && i < count; i++) {
    float want = (float)(n * (n + 1) / 2 * (int)(i % 100 + 1) + n * salt);
    if (x[i] != want)
      st = gcomp_error_set(GCOMP_ERR_CORRUPT, __FILE__, __LINE__, "[%zu] = %g, expected %g", i,
                           (double)x[i], (double)want);
  }
  free(x);
  return st;
}

typedef struct {
  gcomp_comm *via;   /* the exchange this thread bootstraps through */
  int first;         /* this rank starts this thread first */
  int rounds, id;
} creator;

static void *create_rounds(void *p) {
  creator *a = p;
  for (int k = 0; k < a->rounds; k++) {
    if (!a->first) usleep(2000 + 1000 * (unsigned)(k % 3));   /* the other thread goes first */
    gcomp_comm *c = NULL;
    int st = gcomp_comm_init_oob(rank_, size_, NULL, comm_allgather, a->via, NULL, &c);
    if (st < 0) {
      fail("gcomp_comm_init_oob from a second thread", st);
      return NULL;
    }
    st = reduce_check(c, (size_t)(1000 + 300 * a->id), a->id * 100 + k);
    if (st < 0) fail("allreduce on a communicator made concurrently", st);
    int dst = gcomp_comm_destroy(c);
    if (dst < 0) fail("gcomp_comm_destroy concurrently", dst);
    if (st < 0 || dst < 0) return NULL;
  }
  return NULL;
}

static int concurrent(gcomp_comm *world, int rounds) {
  /* one exchange communicator per thread, made one after the other */
  gcomp_comm *via[2] = {NULL, NULL};
  for (int i = 0; i < 2; i++) {
    int st = gcomp_comm_init_oob(rank_, size_, NULL, comm_allgather, world, NULL, &via[i]);
    if (st < 0) {
      fail("an exchange communicator", st);
      return 1;
    }
  }
  creator a = {via[0], rank_ % 2 == 0, rounds, 0}, b = {via[1], rank_ % 2 == 1, rounds, 1};
  pthread_t th;
  if (pthread_create(&th, NULL, create_rounds, &b) != 0) return 1;
  create_rounds(&a);
  pthread_join(th, NULL);
  for (int i = 0; i < 2; i++) gcomp_comm_destroy(via[i]);
  if (!failures)
    printf("subcomm_check: rank %d: %d rounds of two concurrent creations: ok\n", rank_, rounds);
  return failures != 0;
}

/* ---- split and dup, driven at once ----------------------------------------------------- */
typedef struct {
  gcomp_comm *c;
  const char *name;
  int calls, hier;
} driver;

static void *drive(void *p) {
  driver *d = p;
  for (int k = 0; k < d->calls; k++) {
    size_t count = k % 3 ? (size_t)(1000 + 7 * k) : (size_t)(300000 + k);
    int st = reduce_check(d->c, count, k);
    if (st < 0) {
      fail(d->name, st);
      return NULL;
    }
    const char *algo = gcomp_comm_last_algo(d->c);
    if (d->hier && strcmp(algo, "hier") != 0) {
      pthread_mutex_lock(&out_lock);
      failures++;
      printf("subcomm_check: rank %d: FAIL: %s: ran %s, not hier\n", rank_, d->name, algo);
      pthread_mutex_unlock(&out_lock);
      return NULL;
    }
  }
  return NULL;
}

static int split(gcomp_comm *world, int calls, int want_hier) {
  gcomp_comm *dup = NULL, *half = NULL;
  int st = gcomp_comm_dup(world, &dup);
  if (st < 0) fail("gcomp_comm_dup", st);
  if (st == GCOMP_OK) st = gcomp_comm_split(world, rank_ % 2, -rank_, &half);
  if (st < 0) fail("gcomp_comm_split", st);
  if (st < 0) return 1;
  /* keys reverse the parent's order */
  int n = size_ / 2 + (rank_ % 2 == 0 ? size_ % 2 : 0), want = (n - 1) - rank_ / 2;
  if (gcomp_comm_size(half) != n || gcomp_comm_rank(half) != want) {
    printf("subcomm_check: rank %d: FAIL: split: rank %d of %d, expected %d of %d\n", rank_,
           gcomp_comm_rank(half), gcomp_comm_size(half), want, n);
    failures++;
  }
  driver a = {dup, "dup", calls, want_hier && gcomp_comm_nnodes(dup) > 1};
  driver b = {half, "split", calls, want_hier && gcomp_comm_nnodes(half) > 1};
  pthread_t th;
  if (pthread_create(&th, NULL, drive, &a) != 0) return 1;
  drive(&b);
  pthread_join(th, NULL);
  st = reduce_check(world, 5000, 1);   /* the world still serves */
  if (st < 0) fail("world after the split", st);
  printf("subcomm_check: rank %d: split rank %d of %d on %d node(s), dup on %d: %s\n", rank_,
         gcomp_comm_rank(half), n, gcomp_comm_nnodes(half), gcomp_comm_nnodes(dup),
         failures ? "FAIL" : "ok");
  gcomp_comm_destroy(half);
  gcomp_comm_destroy(dup);
  return failures != 0;
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "";
  gcomp_comm *world = NULL;
  int st = gcomp_comm_init_env(&world);
  if (st < 0) {
    fprintf(stderr, "subcomm_check: gcomp_comm_init_env: %s\n", gcomp_last_error());
    return 1;
  }
  rank_ = gcomp_comm_rank(world), size_ = gcomp_comm_size(world);
  int rc = 2;
  const char *algo = "";
  gcomp_config_get(NULL, "GCOMP_ALGO", &algo, NULL);
  if (!strcmp(mode, "concurrent") && argc > 2) rc = concurrent(world, atoi(argv[2]));
  else if (!strcmp(mode, "split") && argc > 2) rc = split(world, atoi(argv[2]), !strcmp(algo, "hier"));
  else fprintf(stderr, "usage: subcomm_check concurrent ROUNDS | split CALLS\n");
  gcomp_comm_destroy(world);
  return rc;
}
