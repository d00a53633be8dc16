/* The cost model's figures, measured when a communicator is created: alpha and beta of
 * each link class by ping-pong, the add rate, and the shared-memory allreduce's round
 * latency and rate; then agreed, so that every rank plans alike. */
#include <math.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "comm_impl.h"

/* The exchanges of creation: recursive doubling over the world on reserved sequences
 * (reserved_seq.h; no call numbers yet: the ranks agree on nothing but these) */
static int calib_max(gcomp_comm *comm, double *v, size_t n, uint32_t seq) {
  return gcomp_call_internal(comm, v, n, GCOMP_FLOAT64, GCOMP_MAX, gcomp_algo_find("rd"), seq);
}

/* Ranks per node when every node holds the same number, else 0 (hier then needs the
 * placement in pieces: gcomp_hier_placement). 3 + 1 ranks on two nodes are uneven. */
int gcomp_even_local(const gcomp_transport *t) {
  int *count = calloc((size_t)t->nnodes, sizeof *count);
  if (!count) return 0;   /* the planner then keeps to flat algorithms */
  for (int r = 0; r < t->size; r++) count[t->node_of[r]]++;
  int local = count[0];
  for (int n = 1; n < t->nnodes; n++)
    if (count[n] != local) local = 0;
  free(count);
  return local;
}

/* Ping-pong between two ranks: the fastest of `iters` round trips, halved. The fastest,
 * not the mean: on oversubscribed cores the mean measures the scheduler. */
static int pingpong(gcomp_transport *t, int peer, int first, size_t bytes, int iters, uint8_t *buf,
                    uint32_t tagbase, double *one_way) {
  double best = 1e30;
  for (int i = -1; i < iters; i++) {   /* iteration -1 warms up */
    uint64_t t0 = gcomp_now_ns();
    uint64_t tag = gcomp_tag(GCOMP_SEQ_CALIB_PINGPONG, tagbase + (uint32_t)(i + 1));
    if (first) {
      GCOMP_CHECK(gcomp_send(t, peer, tag, buf, bytes));
      GCOMP_CHECK(gcomp_recv(t, peer, tag, buf, bytes, NULL));
    } else {
      GCOMP_CHECK(gcomp_recv(t, peer, tag, buf, bytes, NULL));
      GCOMP_CHECK(gcomp_send(t, peer, tag, buf, bytes));
    }
    double rt = (double)(gcomp_now_ns() - t0) * 1e-9 / 2;
    if (i >= 0 && rt < best) best = rt;
  }
  *one_way = best;
  return GCOMP_OK;
}

/* What a communicator measured, before the correction for crowded cores, as it keeps them
 * (comm->calib) and hands them to communicators made from it (gcomp_inherit). */
enum {
  F_INTRA_A, F_INTRA_B, F_INTER_A, F_INTER_B, F_GAMMA,
  F_HAVE,                    /* which link classes were measured: HAVE_INTRA | HAVE_INTER */
  F_SHM_A, F_SHM_B,          /* the shared-memory allreduce's figures, when measured ... */
  F_SHM_RANKS, F_SHM_BYTES,  /* ... with this many ranks and this GCOMP_SHM_BYTES */
  F_COUNT
};
enum { HAVE_INTRA = 1, HAVE_INTER = 2 };

/* The first node with two ranks, or -1 */
static int pair_node(const gcomp_transport *t) {
  for (int r = 0; r + 1 < t->size; r++)
    if (t->node_of[r] == t->node_of[r + 1]) return t->node_of[r];
  return -1;
}

/* Measures alpha and beta of each link class, one pair at a time while the other ranks
 * wait (so the pair has the cores to itself), then agrees on the figures everywhere: all
 * ranks must pick the same algorithms. The big message is 4 MiB so that a rate-limited
 * link's burst allowance does not pass for bandwidth. */
static int measure_links(gcomp_comm *comm, double *f) {
  gcomp_transport *t = comm->t;
  enum { BIG = 4 << 20 };
  uint8_t *buf = calloc(1, BIG);
  GCOMP_FAIL_IF(!buf, GCOMP_ERR_NOMEM, "calibration buffer");
  int st = GCOMP_OK;
  /* intra: local ranks 0 and 1 of the first node that has two */
  int intra_node = pair_node(t);
  if (t->node == intra_node && t->local_rank < 2) {
    int peer = t->local_ranks[t->local_rank ^ 1];
    double small = 0, big = 0;
    st = pingpong(t, peer, t->local_rank == 0, 8, 20, buf, 0x100, &small);
    if (st == GCOMP_OK) st = pingpong(t, peer, t->local_rank == 0, BIG, 3, buf, 0x200, &big);
    if (st == GCOMP_OK) f[F_INTRA_A] = small, f[F_INTRA_B] = (big - small) / BIG;
  }
  double gate = 0;   /* a barrier between the two measurements */
  if (st == GCOMP_OK) st = calib_max(comm, &gate, 1, GCOMP_SEQ_CALIB_GATE);
  /* inter: the first ranks of nodes 0 and 1 */
  if (st == GCOMP_OK && t->nnodes > 1 && t->local_rank == 0 && t->node < 2) {
    int peer = -1;
    for (int r = 0; r < t->size && peer < 0; r++)
      if (t->node_of[r] == (t->node ^ 1)) peer = r;
    double small = 0, big = 0;
    st = pingpong(t, peer, t->node == 0, 8, 10, buf, 0x300, &small);
    if (st == GCOMP_OK) st = pingpong(t, peer, t->node == 0, BIG, 2, buf, 0x400, &big);
    if (st == GCOMP_OK) f[F_INTER_A] = small, f[F_INTER_B] = (big - small) / BIG;
  }
  /* gamma: this rank's fp32 add rate */
  if (st == GCOMP_OK) {
    gcomp_reduce_fn add = gcomp_reduce_kernel(GCOMP_FLOAT32, GCOMP_SUM);
    add(buf, buf + BIG / 2, BIG / 8);   /* warm: the first touch measures page faults */
    uint64_t t0 = gcomp_now_ns();
    add(buf, buf + BIG / 2, BIG / 8);
    add(buf, buf + BIG / 2, BIG / 8);
    f[F_GAMMA] = (double)(gcomp_now_ns() - t0) * 1e-9 / (BIG / 2);
  }
  free(buf);
  GCOMP_CHECK(st);
  GCOMP_CHECK(calib_max(comm, f, F_HAVE, GCOMP_SEQ_CALIB_LINKS));
  f[F_HAVE] = (intra_node >= 0 ? HAVE_INTRA : 0) | (t->nnodes > 1 ? HAVE_INTER : 0);
  return GCOMP_OK;
}

/* The figures of the communicator this one is made from (its settings' inherit), in place of
 * measuring: when every rank holds them and they cover the link classes this communicator
 * uses (a split of one node has no inter-node figures to give a split across two). Every
 * rank's figures are the same agreed ones; one MAX exchange, run by every communicator,
 * tells all ranks alike whether to take them, and whether the shared-memory figures hold
 * too (measured with as many ranks and the same segment size). The figures are properties
 * of the links and the cores, not of which ranks form the communicator: a pair of ranks on
 * one node or across two is as fast in a split as in the world. *links 1: taken. */
static int inherit(gcomp_comm *comm, double *f, int *links) {
  const gcomp_inherit *in = &comm->set.inherit;
  const gcomp_transport *t = comm->t;
  int need = (pair_node(t) >= 0 ? HAVE_INTRA : 0) | (t->nnodes > 1 ? HAVE_INTER : 0);
  int ok = in->n == F_COUNT && ((int)in->f[F_HAVE] & need) == need;
  int shm_ok = ok && t->nnodes == 1 && in->f[F_SHM_RANKS] == t->size &&
               in->f[F_SHM_BYTES] == (double)comm->agreed.shm_bytes;
  double w[2 + F_COUNT] = {ok ? 0 : 1, shm_ok ? 0 : 1};
  if (ok) memcpy(w + 2, in->f, F_COUNT * sizeof *w);
  GCOMP_CHECK(calib_max(comm, w, 2 + F_COUNT, GCOMP_SEQ_CALIB_INHERIT));
  *links = w[0] == 0;
  if (!*links) return GCOMP_OK;
  memcpy(f, w + 2, F_COUNT * sizeof *f);
  f[F_HAVE] = need;
  if (w[1] != 0) f[F_SHM_RANKS] = f[F_SHM_A] = f[F_SHM_B] = f[F_SHM_BYTES] = 0;
  return GCOMP_OK;
}

int gcomp_calibrate(gcomp_comm *comm) {
  gcomp_transport *t = comm->t;
  double f[F_COUNT] = {0};
  int inherited = 0;
  GCOMP_CHECK(inherit(comm, f, &inherited));
  if (!inherited) GCOMP_CHECK(measure_links(comm, f));
  comm->calib.n = F_COUNT;
  memcpy(comm->calib.f, f, sizeof f);
  comm->calib_inherited = inherited;
  /* The pair was measured alone; in a call every local rank copies and adds at once, and
   * with more ranks than cores they share the cores (the shm figures below are measured
   * with all ranks running, so they need no such correction). The crowd is the largest
   * node's, not this rank's own: the model must be the same on every rank, or on nodes of
   * different rank counts the ranks pick different algorithms for one call and wait for
   * each other until the timeout (found by gcomp-soak: 8 ranks on 3 nodes, 3+3+2). */
  int crowded = t->local_size;
  for (int node = 0; node < t->nnodes; node++) {
    int on = 0;
    for (int r = 0; r < t->size; r++) on += t->node_of[r] == node;
    crowded = on > crowded ? on : crowded;
  }
  double crowd = 1;
  cpu_set_t cpus;
  if (sched_getaffinity(0, sizeof cpus, &cpus) == 0 && CPU_COUNT(&cpus) > 0 &&
      crowded > CPU_COUNT(&cpus))
    crowd = (double)crowded / CPU_COUNT(&cpus);
  /* floors keep the model sane when a measurement came out at zero */
  comm->model.intra = (gcomp_link){fmax(f[F_INTRA_A], 1e-7), fmax(f[F_INTRA_B] * crowd, 1.0 / 50e9)};
  comm->model.inter = t->nnodes > 1 ? (gcomp_link){fmax(f[F_INTER_A], 1e-7),
                                                   fmax(f[F_INTER_B], 1.0 / 50e9)}
                                    : comm->model.intra;
  comm->model.gamma_spb = fmax(f[F_GAMMA] * crowd, 1.0 / 50e9);
  if (inherited)
    GCOMP_INFO(GCOMP_SUB_TUNING, "rank %d/%d: link figures taken from the parent communicator%s",
               t->rank, t->size, f[F_SHM_RANKS] > 0 ? ", shared-memory figures too" : "");
  return GCOMP_OK;
}

/* The shared-memory allreduce's figures, timed for real: the fastest of 30 one-round
 * 8-byte calls and of 6 one-slot calls, like the ping-pong's figures (the fastest, so that
 * both sides of the planner's comparison are best cases); the slowest rank's figures win. */
int gcomp_calibrate_shm(gcomp_comm *comm) {
  double *kept = comm->calib.f;
  if (comm->calib.n == F_COUNT && kept[F_SHM_RANKS] > 0) {   /* inherited (see inherit) */
    comm->model.shm_alpha = fmax(kept[F_SHM_A], 1e-8);
    comm->model.shm_spb = fmax(kept[F_SHM_B], 1.0 / 100e9);
    return GCOMP_OK;
  }
  size_t slot = gcomp_shm_slot_bytes(comm->shm);
  uint8_t *buf = calloc(1, slot);
  GCOMP_FAIL_IF(!buf, GCOMP_ERR_NOMEM, "shm calibration buffer");
  gcomp_comm_stats scratch = {0};
  gcomp_coll c = {.t = comm->t, .esize = 4, .reduce = gcomp_reduce_kernel(GCOMP_FLOAT32, GCOMP_SUM),
                  .reduce3 = gcomp_reduce3_kernel(GCOMP_FLOAT32, GCOMP_SUM), .stats = &scratch,
                  .world = comm->world, .shm = comm->shm, .scratch = &comm->scratch};
  double f[2] = {1e30, 1e30};
  int st = GCOMP_OK;
  for (int i = -1; i < 36 && st == GCOMP_OK; i++) {   /* -1: warm-up (first touch) */
    int big = i < 0 || i % 6 == 5;
    uint64_t t0 = gcomp_now_ns();
    st = gcomp_shm_allreduce(&c, comm->shm, buf, big ? slot / 4 : 2);
    double dt = (double)(gcomp_now_ns() - t0) * 1e-9;
    if (i >= 0 && dt < f[big]) f[big] = dt;
  }
  free(buf);
  GCOMP_CHECK(st);
  GCOMP_CHECK(calib_max(comm, f, 2, GCOMP_SEQ_CALIB_SHM));
  comm->model.shm_alpha = fmax(f[0], 1e-8);
  comm->model.shm_spb = fmax((f[1] - f[0]) / (double)slot, 1.0 / 100e9);
  if (comm->calib.n == F_COUNT) {
    kept[F_SHM_A] = f[0], kept[F_SHM_B] = (f[1] - f[0]) / (double)slot;
    kept[F_SHM_RANKS] = comm->t->size, kept[F_SHM_BYTES] = (double)comm->agreed.shm_bytes;
  }
  return GCOMP_OK;
}

