/* An ordinary MPI program (plain mpicc, nothing of gcomp) that reduces on the communicators
 * a training program makes: a dup of world, a split, one made by MPI_Comm_create, and, to be
 * passed to MPI, an inter-communicator and MPI_COMM_SELF. Blocking and non-blocking calls,
 * completed by every MPI completion call, from two threads at once under
 * MPI_THREAD_MULTIPLE.
 *
 *   shim_comms exact|lossy [multiple]
 *     exact: integer-valued data, every result must be exact.
 *     lossy: floats in [1, 2) that bf16 cannot hold: results within two bf16 roundings of
 *            the exact sums, and on every served communicator some results inexact (a
 *            lossy codec really ran there).
 *     multiple: MPI_Init_thread(MPI_THREAD_MULTIPLE), then two threads reduce on the dup
 *            and on the created communicator at once, each rank starting them in the
 *            opposite order of its neighbour (one lock for all communicators would hold a
 *            call on one while its peers wait in the other: a deadlock); then, four times,
 *            two fresh dups whose first calls (where the shim creates their gcomp
 *            communicators) two threads make at once, freed in opposite orders.
 *   shim_comms silent [return]
 *     The last rank stops answering on the dup (it sleeps past GCOMP_TIMEOUT_MS) while the
 *     others MPI_Iallreduce on it and MPI_Wait. The dup has its own error handler: it must
 *     be the one called (world's stays MPI_ERRORS_ARE_FATAL), MPI_Wait must return an
 *     error, and a Waitall after it MPI_ERR_IN_STATUS with the status saying why. With
 *     return, a Waitany then returns MPI_ERR_OTHER (through the dup's handler), and a call
 *     that failed on the dup, completed after MPI_Comm_free of it, goes through world's.
 *
 * The split: the last rank alone (one rank: passed to MPI) and the others together in
 * reverse order (key = -rank); the created communicator holds every rank in reverse order.
 * Rank 0 prints "calls: dup N split N created N inter N self N iallreduce N fresh N" (calls
 * each rank made; iallreduce counts the non-blocking ones among the others) and
 * "shim_comms: PASS" or the failures; exit status 1 on any. Every rank prints "expect rank
 * R: served A B; one rank C D; inter-communicator E F; datatype G H; communicators K": how
 * the shim must route its calls (A, C, E, G blocking, B, D, F, H non-blocking; K gcomp
 * communicators: world, the dup, the created one, the split where it has two ranks, and the
 * fresh dups). */
#include <math.h>
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int rank, size, lossy_mode;
static long failures;
static long n_dup, n_split, n_created, n_inter, n_self, n_iall;
/* what the shim's report at MPI_Finalize must say for this rank: [0] MPI_Allreduce,
 * [1] MPI_Iallreduce */
static long x_served[2], x_self[2], x_inter[2], x_dtype[2];
static pthread_mutex_t count_lock = PTHREAD_MUTEX_INITIALIZER;

typedef struct {
  const char *name;
  MPI_Comm comm;
  int n;            /* members */
  int *world;       /* their world ranks, by rank in comm */
  long *counter;
  long inexact, results;   /* lossy mode: results not equal to the exact sum */
} comm_case;

static void fail(const comm_case *c, const char *what, long i, double got, double want) {
  pthread_mutex_lock(&count_lock);
  if (failures++ < 12)
    fprintf(stderr, "rank %d: %s: %s [%ld] = %.9g, expected %.9g\n", rank, c->name, what, i, got,
            want);
  pthread_mutex_unlock(&count_lock);
}

static void count(comm_case *c, int nonblocking) {
  pthread_mutex_lock(&count_lock);
  ++*c->counter;
  n_iall += nonblocking;
  if (c->n > 1) x_served[nonblocking]++;
  else x_self[nonblocking]++;   /* the split's lone rank */
  pthread_mutex_unlock(&count_lock);
}

/* world rank r's element i at step s: small integers (exact), or values bf16 cannot hold */
static float value(int r, long i, int s) {
  if (lossy_mode) return (float)(1.0 + 0.001 * (double)((i * 37 + r * 11 + s * 5) % 997));
  return (float)((i * 7 + r * 3 + s) % 61 - 30);
}

static void fill(const comm_case *c, float *buf, long n, int s) {
  int me;
  MPI_Comm_rank(c->comm, &me);
  for (long i = 0; i < n; i++) buf[i] = value(c->world[me], i, s);
}

/* Exact (or within two bf16 roundings of the magnitude, with room) */
static void check(comm_case *c, const float *got, long n, int s) {
  long inexact = 0;
  for (long i = 0; i < n; i++) {
    double want = 0, mag = 0;
    for (int m = 0; m < c->n; m++) {
      double v = value(c->world[m], i, s);
      want += v, mag += fabs(v);
    }
    double err = fabs(got[i] - want);
    inexact += err > 1e-6 * mag;
    if (lossy_mode ? !(err <= mag * (3.0 / 256)) : got[i] != want) {
      fail(c, lossy_mode ? "beyond bf16's error" : "wrong sum", i, got[i], want);
      return;
    }
  }
  pthread_mutex_lock(&count_lock);
  c->inexact += inexact, c->results += n;
  pthread_mutex_unlock(&count_lock);
}

static void rc_ok(const comm_case *c, const char *call, int rc) {
  if (rc == MPI_SUCCESS) return;
  char msg[MPI_MAX_ERROR_STRING] = "";
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  pthread_mutex_lock(&count_lock);
  if (failures++ < 12) fprintf(stderr, "rank %d: %s: %s returned %s\n", rank, c->name, call, msg);
  pthread_mutex_unlock(&count_lock);
}

static void blocking(comm_case *c, float *buf, long n, int s, int inplace, float *send) {
  fill(c, inplace ? buf : send, n, s);
  rc_ok(c, "MPI_Allreduce",
        MPI_Allreduce(inplace ? MPI_IN_PLACE : send, buf, (int)n, MPI_FLOAT, MPI_SUM, c->comm));
  count(c, 0);
  check(c, buf, n, s);
}

/* A completed request: MPI_REQUEST_NULL, and a status as Open MPI gives a collective's
 * (no elements, not cancelled) */
static void status_ok(const comm_case *c, MPI_Request req, const MPI_Status *st, int want_error) {
  if (req != MPI_REQUEST_NULL) fail(c, "request not MPI_REQUEST_NULL after completion", 0, 0, 0);
  int elems = -1, cancelled = -1;
  MPI_Get_elements(st, MPI_FLOAT, &elems);
  MPI_Test_cancelled(st, &cancelled);
  if (elems != 0 || cancelled != 0) fail(c, "status: elements, cancelled", 0, elems, cancelled);
  if (want_error && st->MPI_ERROR != MPI_SUCCESS) fail(c, "status MPI_ERROR", 0, st->MPI_ERROR, 0);
}

enum { N_SMALL = 1021, N_BIG = 1 << 18 };

/* Every completion call on requests from MPI_Iallreduce, served or not, mixed with
 * point-to-point requests and MPI_REQUEST_NULL. */
static void nonblocking(comm_case *a, comm_case *b, comm_case *other, int s0) {
  float *x = malloc(N_BIG * sizeof *x), *y = malloc(N_BIG * sizeof *y);
  float *z = malloc(N_SMALL * sizeof *z);
  unsigned *u = malloc(N_SMALL * sizeof *u);
  if (!x || !y || !z || !u) MPI_Abort(MPI_COMM_WORLD, 2);
  MPI_Request r[6];
  MPI_Status st[6];
  int s = s0;

  /* MPI_Wait, with a status */
  fill(a, x, N_BIG, s);
  rc_ok(a, "MPI_Iallreduce",
        MPI_Iallreduce(MPI_IN_PLACE, x, N_BIG, MPI_FLOAT, MPI_SUM, a->comm, &r[0]));
  rc_ok(a, "MPI_Wait", MPI_Wait(&r[0], &st[0]));
  count(a, 1);
  status_ok(a, r[0], &st[0], 0);
  check(a, x, N_BIG, s++);

  /* MPI_Test until done; a blocking call on the same communicator issued after it */
  fill(b, x, N_SMALL, s);
  rc_ok(b, "MPI_Iallreduce",
        MPI_Iallreduce(MPI_IN_PLACE, x, N_SMALL, MPI_FLOAT, MPI_SUM, b->comm, &r[0]));
  count(b, 1);
  blocking(b, y, N_BIG, s + 1, 1, NULL);
  for (int flag = 0; !flag;) rc_ok(b, "MPI_Test", MPI_Test(&r[0], &flag, &st[0]));
  status_ok(b, r[0], &st[0], 0);
  check(b, x, N_SMALL, s);
  s += 2;

  /* MPI_Waitall over two served calls, an unsigned one MPI serves, a ring exchange on world
   * and MPI_REQUEST_NULL */
  fill(a, x, N_BIG, s);
  fill(b, z, N_SMALL, s);
  for (int i = 0; i < N_SMALL; i++) u[i] = (unsigned)(rank + i);
  float ping = (float)rank, pong = -1;
  MPI_Iallreduce(MPI_IN_PLACE, x, N_BIG, MPI_FLOAT, MPI_SUM, a->comm, &r[0]);
  MPI_Iallreduce(MPI_IN_PLACE, z, N_SMALL, MPI_FLOAT, MPI_SUM, b->comm, &r[1]);
  MPI_Iallreduce(MPI_IN_PLACE, u, N_SMALL, MPI_UNSIGNED, MPI_SUM, a->comm, &r[2]);
  MPI_Irecv(&pong, 1, MPI_FLOAT, (rank + size - 1) % size, 7, MPI_COMM_WORLD, &r[3]);
  MPI_Isend(&ping, 1, MPI_FLOAT, (rank + 1) % size, 7, MPI_COMM_WORLD, &r[4]);
  r[5] = MPI_REQUEST_NULL;
  rc_ok(a, "MPI_Waitall", MPI_Waitall(6, r, st));
  count(a, 1), count(b, 1);
  n_iall++, x_dtype[1]++;   /* the unsigned one */
  status_ok(a, r[0], &st[0], 1);
  status_ok(b, r[1], &st[1], 1);
  check(a, x, N_BIG, s);
  check(b, z, N_SMALL, s++);
  for (int i = 0; i < N_SMALL; i++) {
    unsigned want = 0;
    for (int m = 0; m < a->n; m++) want += (unsigned)(a->world[m] + i);
    if (u[i] != want) {
      fail(a, "unsigned MPI_Iallreduce", i, u[i], want);
      break;
    }
  }
  if (pong != (float)((rank + size - 1) % size)) fail(a, "ring exchange", 0, pong, 0);
  if (st[3].MPI_SOURCE != (rank + size - 1) % size || st[3].MPI_TAG != 7)
    fail(a, "point-to-point status in MPI_Waitall", 0, st[3].MPI_SOURCE, st[3].MPI_TAG);

  /* MPI_Testall, statuses ignored */
  fill(a, x, N_SMALL, s);
  fill(other, y, N_BIG, s);
  MPI_Iallreduce(MPI_IN_PLACE, x, N_SMALL, MPI_FLOAT, MPI_SUM, a->comm, &r[0]);
  MPI_Iallreduce(MPI_IN_PLACE, y, N_BIG, MPI_FLOAT, MPI_SUM, other->comm, &r[1]);
  for (int flag = 0; !flag;) rc_ok(a, "MPI_Testall", MPI_Testall(2, r, &flag, MPI_STATUSES_IGNORE));
  count(a, 1), count(other, 1);
  if (r[0] != MPI_REQUEST_NULL || r[1] != MPI_REQUEST_NULL)
    fail(a, "Testall left requests", 0, 0, 0);
  check(a, x, N_SMALL, s);
  check(other, y, N_BIG, s++);

  /* MPI_Waitany: each index once, then MPI_UNDEFINED */
  fill(a, x, N_BIG, s);
  fill(b, z, N_SMALL, s);
  fill(other, y, N_SMALL, s);
  MPI_Iallreduce(MPI_IN_PLACE, x, N_BIG, MPI_FLOAT, MPI_SUM, a->comm, &r[0]);
  r[1] = MPI_REQUEST_NULL;
  MPI_Iallreduce(MPI_IN_PLACE, z, N_SMALL, MPI_FLOAT, MPI_SUM, b->comm, &r[2]);
  MPI_Iallreduce(MPI_IN_PLACE, y, N_SMALL, MPI_FLOAT, MPI_SUM, other->comm, &r[3]);
  int seen = 0;
  for (int k = 0; k < 4; k++) {
    int idx = -2;
    rc_ok(a, "MPI_Waitany", MPI_Waitany(4, r, &idx, &st[0]));
    if (k < 3 && (idx < 0 || idx > 3 || idx == 1 || (seen >> idx & 1)))
      fail(a, "MPI_Waitany index", k, idx, 0);
    else if (k < 3)
      seen |= 1 << idx, status_ok(a, r[idx], &st[0], 0);
    if (k == 3 && idx != MPI_UNDEFINED) fail(a, "MPI_Waitany after all", k, idx, MPI_UNDEFINED);
  }
  count(a, 1), count(b, 1), count(other, 1);
  check(a, x, N_BIG, s);
  check(b, z, N_SMALL, s);
  check(other, y, N_SMALL, s++);

  /* MPI_Testany, MPI_Waitsome, MPI_Testsome and MPI_Request_get_status */
  fill(a, x, N_SMALL, s);
  fill(b, z, N_SMALL, s);
  MPI_Iallreduce(MPI_IN_PLACE, x, N_SMALL, MPI_FLOAT, MPI_SUM, a->comm, &r[0]);
  MPI_Iallreduce(MPI_IN_PLACE, z, N_SMALL, MPI_FLOAT, MPI_SUM, b->comm, &r[1]);
  for (int flag = 0; !flag;) MPI_Request_get_status(r[0], &flag, &st[0]);
  if (r[0] == MPI_REQUEST_NULL) fail(a, "MPI_Request_get_status freed the request", 0, 0, 0);
  int idx = -1, flag = 0;
  while (!flag) MPI_Testany(1, r, &idx, &flag, &st[0]);
  if (idx != 0) fail(a, "MPI_Testany index", 0, idx, 0);
  int outcount = 0, idxs[2];
  for (int done = 0; done < 1;) {
    MPI_Testsome(2, r, &outcount, idxs, st);
    if (outcount == MPI_UNDEFINED) break;
    done += outcount;
  }
  count(a, 1), count(b, 1);
  check(a, x, N_SMALL, s);
  check(b, z, N_SMALL, s++);
  fill(b, z, N_SMALL, s);
  MPI_Iallreduce(MPI_IN_PLACE, z, N_SMALL, MPI_FLOAT, MPI_SUM, b->comm, &r[1]);
  rc_ok(b, "MPI_Waitsome", MPI_Waitsome(2, r, &outcount, idxs, st));
  if (outcount != 1 || idxs[0] != 1) fail(b, "MPI_Waitsome", 0, outcount, 1);
  count(b, 1);
  check(b, z, N_SMALL, s++);
  free(x), free(y), free(z), free(u);
}

/* ---- two threads on two communicators ---------------------------------------------- */
typedef struct {
  comm_case *c, *nb;   /* blocking calls on c; non-blocking ones on nb (may be NULL) */
  int stagger;         /* sleep first: the other thread's communicator is entered first */
  int s0;
} thread_arg;

static void *thread_main(void *p) {
  thread_arg *a = p;
  float *buf = malloc(N_BIG * sizeof *buf), *send = malloc(N_BIG * sizeof *send);
  if (!buf || !send) MPI_Abort(MPI_COMM_WORLD, 2);
  if (a->stagger) usleep(100 * 1000);
  for (int k = 0; k < 12; k++) {
    int s = a->s0 + k;
    blocking(a->c, buf, k % 3 ? N_SMALL : N_BIG, s, k & 1, send);
    if (a->nb) {
      MPI_Request req;
      fill(a->nb, send, N_SMALL, s);
      rc_ok(a->nb, "MPI_Iallreduce",
            MPI_Iallreduce(MPI_IN_PLACE, send, N_SMALL, MPI_FLOAT, MPI_SUM, a->nb->comm, &req));
      rc_ok(a->nb, "MPI_Wait", MPI_Wait(&req, MPI_STATUS_IGNORE));
      count(a->nb, 1);
      check(a->nb, send, N_SMALL, s);
    }
  }
  free(buf), free(send);
  return NULL;
}

static void two_threads(comm_case *dup, comm_case *created, comm_case *split) {
  thread_arg ta = {dup, split, rank % 2, 100}, tb = {created, NULL, !(rank % 2), 200};
  pthread_t th;
  if (pthread_create(&th, NULL, thread_main, &ta) != 0) MPI_Abort(MPI_COMM_WORLD, 2);
  thread_main(&tb);
  pthread_join(th, NULL);
}

/* ---- communicators whose first calls come from two threads at once ----------------- */
static long n_fresh, x_fresh_comms;
static void make_case(comm_case *c, const char *name, MPI_Comm comm, long *counter);

/* Each round two fresh dups of world, made by this thread; then two threads make the
 * first call on one each at the same time, so the shim creates both gcomp communicators
 * at once, each rank starting them in the opposite order of its neighbour. Then both are
 * freed, in opposite orders on neighbouring ranks too (each free destroys a gcomp
 * communicator, which waits for its peers). */
typedef struct {
  comm_case c;
  int late, s;
} fresh_arg;

static void *fresh_first_call(void *p) {
  fresh_arg *a = p;
  float *buf = malloc(N_SMALL * sizeof *buf);
  if (!buf) MPI_Abort(MPI_COMM_WORLD, 2);
  if (a->late) usleep(2000);
  blocking(&a->c, buf, N_SMALL, a->s, 1, NULL);
  free(buf);
  return NULL;
}

static void fresh_dups(int rounds) {
  for (int k = 0; k < rounds; k++) {
    MPI_Comm d[2];
    fresh_arg a[2];
    for (int i = 0; i < 2; i++) {
      MPI_Comm_dup(MPI_COMM_WORLD, &d[i]);
      make_case(&a[i].c, i ? "fresh dup b" : "fresh dup a", d[i], &n_fresh);
      a[i].late = (rank + i) % 2, a[i].s = 400 + 2 * k + i;
    }
    pthread_t th;
    if (pthread_create(&th, NULL, fresh_first_call, &a[1]) != 0) MPI_Abort(MPI_COMM_WORLD, 2);
    fresh_first_call(&a[0]);
    pthread_join(th, NULL);
    MPI_Comm_free(&d[rank % 2]);
    MPI_Comm_free(&d[1 - rank % 2]);
    x_fresh_comms += 2;
    free(a[0].c.world), free(a[1].c.world);
  }
}

/* ---- set-up -------------------------------------------------------------------------- */
static void make_case(comm_case *c, const char *name, MPI_Comm comm, long *counter) {
  MPI_Group g, w;
  *c = (comm_case){.name = name, .comm = comm, .counter = counter};
  MPI_Comm_size(comm, &c->n);
  c->world = malloc((size_t)c->n * sizeof *c->world);
  int *idx = malloc((size_t)c->n * sizeof *idx);
  if (!c->world || !idx) MPI_Abort(MPI_COMM_WORLD, 2);
  for (int i = 0; i < c->n; i++) idx[i] = i;
  MPI_Comm_group(comm, &g);
  MPI_Comm_group(MPI_COMM_WORLD, &w);
  MPI_Group_translate_ranks(g, c->n, idx, w, c->world);
  MPI_Group_free(&g), MPI_Group_free(&w);
  free(idx);
}

/* The calls MPI keeps: an inter-communicator between the halves of world, MPI_COMM_SELF */
static void passed_to_mpi(void) {
  MPI_Comm half, inter;
  int low = rank < size / 2;
  MPI_Comm_split(MPI_COMM_WORLD, low, rank, &half);
  MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, low ? size / 2 : 0, 9, &inter);
  int remote = 0;
  MPI_Comm_remote_size(inter, &remote);
  float v = (float)rank, sum = -1, want = 0;
  MPI_Allreduce(&v, &sum, 1, MPI_FLOAT, MPI_SUM, inter);   /* the other group's sum */
  n_inter++, x_inter[0]++;
  for (int r = low ? size / 2 : 0; r < (low ? size : size / 2); r++) want += (float)r;
  comm_case ci = {.name = "inter"};
  if (sum != want) fail(&ci, "inter-communicator sum", 0, sum, want);
  MPI_Comm_free(&inter);
  MPI_Comm_free(&half);
  MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_FLOAT, MPI_SUM, MPI_COMM_SELF);
  n_self++, x_self[0]++;
  if (v != (float)rank) fail(&ci, "MPI_COMM_SELF", 0, v, rank);
}

static void report_lossy(comm_case *const *cs, int n) {
  for (int k = 0; k < n; k++) {
    long inexact = 0, results = 0;
    int me;
    MPI_Comm_rank(cs[k]->comm, &me);
    MPI_Reduce(&cs[k]->inexact, &inexact, 1, MPI_LONG, MPI_SUM, 0, cs[k]->comm);
    MPI_Reduce(&cs[k]->results, &results, 1, MPI_LONG, MPI_SUM, 0, cs[k]->comm);
    if (me != 0 || cs[k]->n < 2) continue;
    printf("lossy: %s: %ld of %ld results inexact\n", cs[k]->name, inexact, results);
    if (inexact == 0) {
      fprintf(stderr, "rank %d: %s: every result exact: no lossy codec ran\n", rank, cs[k]->name);
      failures++;
    }
  }
}

static void silent(int errors_return);

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "exact";
  int multiple = argc > 2 && !strcmp(argv[2], "multiple");
  int provided = MPI_THREAD_SINGLE;
  if (multiple) MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  else MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (!strcmp(mode, "silent")) silent(argc > 2 && !strcmp(argv[2], "return"));
  lossy_mode = !strcmp(mode, "lossy");
  if (!lossy_mode && strcmp(mode, "exact")) {
    if (rank == 0) fprintf(stderr, "usage: shim_comms exact|lossy [multiple] | silent [return]\n");
    MPI_Finalize();
    return 2;
  }
  if (multiple && rank == 0)
    printf("thread level: %s\n", provided == MPI_THREAD_MULTIPLE ? "multiple" : "less");

  MPI_Comm dup, split, created;
  MPI_Group wg, rev;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  MPI_Comm_split(MPI_COMM_WORLD, rank == size - 1, -rank, &split);
  int *order = malloc((size_t)size * sizeof *order);
  for (int i = 0; i < size; i++) order[i] = size - 1 - i;
  MPI_Comm_group(MPI_COMM_WORLD, &wg);
  MPI_Group_incl(wg, size, order, &rev);
  MPI_Comm_create(MPI_COMM_WORLD, rev, &created);
  MPI_Group_free(&rev), MPI_Group_free(&wg);
  free(order);
  comm_case cd, cs, cc;
  make_case(&cd, "dup", dup, &n_dup);
  make_case(&cs, "split", split, &n_split);
  make_case(&cc, "created", created, &n_created);

  float *buf = malloc(N_BIG * sizeof *buf), *send = malloc(N_BIG * sizeof *send);
  if (!buf || !send) MPI_Abort(MPI_COMM_WORLD, 2);
  comm_case *all[] = {&cd, &cs, &cc};
  for (int k = 0; k < 3; k++)
    for (int inplace = 0; inplace < 2; inplace++) {
      blocking(all[k], buf, N_SMALL, inplace, inplace, send);
      blocking(all[k], buf, N_BIG, 2 + inplace, inplace, send);
    }
  if (multiple && provided == MPI_THREAD_MULTIPLE) {
    two_threads(&cd, &cc, &cs);
    fresh_dups(4);
  }
  nonblocking(&cs, &cd, &cc, 300);
  passed_to_mpi();
  free(buf), free(send);
  if (lossy_mode) report_lossy(all, 3);
  MPI_Comm_free(&split);
  MPI_Comm_free(&dup);
  /* created is left for MPI_Finalize to free */

  /* the report, in rank order */
  for (int r = 0; r < size; r++) {
    if (r == rank)
      printf("expect rank %d: served %ld %ld; one rank %ld %ld; inter-communicator %ld %ld; "
             "datatype %ld %ld; communicators %d\n", rank, x_served[0], x_served[1], x_self[0],
             x_self[1], x_inter[0], x_inter[1], x_dtype[0], x_dtype[1],
             1 + 1 + (cs.n > 1) + 1 + (int)x_fresh_comms);
    fflush(stdout);
    PMPI_Barrier(MPI_COMM_WORLD);   /* ordering only: not one of the calls counted above */
  }
  long total = 0;
  MPI_Reduce(&failures, &total, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    printf("calls: dup %ld split %ld created %ld inter %ld self %ld iallreduce %ld fresh %ld\n",
           n_dup, n_split, n_created, n_inter, n_self, n_iall, n_fresh);
    printf("shim_comms: %s (%ld failures)\n", total ? "FAIL" : "PASS", total);
  }
  MPI_Finalize();
  return total ? 1 : 0;
}

/* ---- a silent rank on the dup ------------------------------------------------------- */
static int handler_calls, handler_class, world_handler_calls;
static void dup_handler(MPI_Comm *comm, int *code, ...) {
  (void)comm;
  handler_calls++;
  MPI_Error_class(*code, &handler_class);
}
static void world_handler(MPI_Comm *comm, int *code, ...) {
  (void)comm, (void)code;
  world_handler_calls++;
}

static void silent(int errors_return) {
  MPI_Comm dup;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  MPI_Errhandler eh;
  if (errors_return) {
    MPI_Comm_create_errhandler(dup_handler, &eh);
    MPI_Comm_set_errhandler(dup, eh);
  }
  enum { N = 1 << 18 };
  float *buf = calloc(N, sizeof *buf);
  if (!buf) MPI_Abort(MPI_COMM_WORLD, 2);
  MPI_Allreduce(MPI_IN_PLACE, buf, N, MPI_FLOAT, MPI_SUM, dup);   /* every rank: set up */
  /* the others, to agree that all of them printed before the job ends */
  MPI_Comm others;
  MPI_Comm_split(MPI_COMM_WORLD, rank == size - 1 ? MPI_UNDEFINED : 0, rank, &others);
  if (rank == size - 1) sleep(60);   /* silent, not dead: only a timeout can tell */
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  MPI_Request req[2];
  MPI_Iallreduce(MPI_IN_PLACE, buf, N, MPI_FLOAT, MPI_SUM, dup, &req[0]);
  int rc = MPI_Wait(&req[0], MPI_STATUS_IGNORE);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  char msg[MPI_MAX_ERROR_STRING] = "";
  int len = 0;
  if (rc != MPI_SUCCESS) MPI_Error_string(rc, msg, &len);
  printf("rank %d: MPI_Wait returned %s after %.0f ms; the dup's handler ran %d time(s), "
         "class %d (MPI_ERR_OTHER %d)\n", rank, rc == MPI_SUCCESS ? "MPI_SUCCESS" : msg,
         (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6,
         handler_calls, handler_class, MPI_ERR_OTHER);
  /* a later call on the broken communicator fails at once, through Waitall's statuses */
  MPI_Status st[2];
  MPI_Iallreduce(MPI_IN_PLACE, buf, 4, MPI_FLOAT, MPI_SUM, dup, &req[0]);
  req[1] = MPI_REQUEST_NULL;
  rc = MPI_Waitall(2, req, st);
  int cls = -1;
  MPI_Error_class(st[0].MPI_ERROR, &cls);
  printf("rank %d: then MPI_Waitall returned %s, status class %d; the handler ran %d time(s)\n",
         rank, rc == MPI_ERR_IN_STATUS ? "MPI_ERR_IN_STATUS" : rc == MPI_SUCCESS ? "MPI_SUCCESS"
                                                                                 : "another error",
         cls, handler_calls);
  if (errors_return) {
    /* MPI_Waitany on a call that fails at once */
    MPI_Iallreduce(MPI_IN_PLACE, buf, 4, MPI_FLOAT, MPI_SUM, dup, &req[1]);
    req[0] = MPI_REQUEST_NULL;
    int idx = -1;
    rc = MPI_Waitany(2, req, &idx, &st[0]);
    printf("rank %d: then MPI_Waitany returned %s, index %d; the handler ran %d time(s)\n", rank,
           rc == MPI_ERR_OTHER ? "MPI_ERR_OTHER" : rc == MPI_SUCCESS ? "MPI_SUCCESS" : "another error",
           idx, handler_calls);
    /* a failed call completed after its communicator was freed: world's handler reports it */
    MPI_Errhandler weh;
    MPI_Comm_create_errhandler(world_handler, &weh);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, weh);
    MPI_Iallreduce(MPI_IN_PLACE, buf, 4, MPI_FLOAT, MPI_SUM, dup, &req[0]);
    MPI_Comm_free(&dup);
    rc = MPI_Wait(&req[0], MPI_STATUS_IGNORE);
    printf("rank %d: after MPI_Comm_free MPI_Wait returned %s; world's handler ran %d time(s), "
           "the dup's %d\n", rank, rc == MPI_SUCCESS ? "MPI_SUCCESS" : "an error",
           world_handler_calls, handler_calls);
  }
  fflush(stdout);
  free(buf);
  if (others != MPI_COMM_NULL) MPI_Barrier(others);
  MPI_Abort(MPI_COMM_WORLD, 3);   /* the silent rank will not finish: end the job */
}
