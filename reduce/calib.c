/* The cost model's figures, measured when a communicator is created: alpha and beta of
 * each link class by ping-pong, the add rate, and the shared-memory allreduce's round
 * latency and rate; then agreed, so that every rank plans alike. */
#include <math.h>
#include <sched.h>
#include <stdlib.h>

#include "comm_impl.h"

/* The exchanges of creation: recursive doubling over the world with fixed tags (no call
 * numbers yet: the ranks agree on nothing but these) */
static int calib_max(gcomp_comm *comm, double *v, size_t n, uint32_t tag) {
  return gcomp_call_internal(comm, v, n, GCOMP_FLOAT64, GCOMP_MAX, gcomp_algo_find("rd"), tag);
}

/* Ranks per node when every node holds the same number, else 0 (hier cannot serve the
 * placement). A size that divides evenly is not enough: 3 + 1 ranks on two nodes. */
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
    uint64_t tag = gcomp_tag(0xfffffeu, tagbase + (uint32_t)(i + 1));
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

/* Measures alpha and beta of each link class, one pair at a time while the other ranks
 * wait (so the pair has the cores to itself), then agrees on the figures everywhere: all
 * ranks must pick the same algorithms. The big message is 4 MiB so that a rate-limited
 * link's burst allowance does not pass for bandwidth. */
int gcomp_calibrate(gcomp_comm *comm) {
  gcomp_transport *t = comm->t;
  enum { BIG = 4 << 20 };
  double f[6] = {0};   /* intra a, intra b, inter a, inter b, gamma, spare */
  uint8_t *buf = calloc(1, BIG);
  GCOMP_FAIL_IF(!buf, GCOMP_ERR_NOMEM, "calibration buffer");
  int st = GCOMP_OK;
  /* intra: local ranks 0 and 1 of the first node that has two */
  int intra_node = -1;
  for (int r = 0; r + 1 < t->size && intra_node < 0; r++)
    if (t->node_of[r] == t->node_of[r + 1]) intra_node = t->node_of[r];
  if (t->node == intra_node && t->local_rank < 2) {
    int peer = t->local_ranks[t->local_rank ^ 1];
    double small = 0, big = 0;
    st = pingpong(t, peer, t->local_rank == 0, 8, 20, buf, 0x100, &small);
    if (st == GCOMP_OK) st = pingpong(t, peer, t->local_rank == 0, BIG, 3, buf, 0x200, &big);
    if (st == GCOMP_OK) f[0] = small, f[1] = (big - small) / BIG;
  }
  double gate = 0;   /* a barrier between the two measurements */
  if (st == GCOMP_OK) st = calib_max(comm, &gate, 1, 0xfffffbu);
  /* inter: the first ranks of nodes 0 and 1 */
  if (st == GCOMP_OK && t->nnodes > 1 && t->local_rank == 0 && t->node < 2) {
    int peer = -1;
    for (int r = 0; r < t->size && peer < 0; r++)
      if (t->node_of[r] == (t->node ^ 1)) peer = r;
    double small = 0, big = 0;
    st = pingpong(t, peer, t->node == 0, 8, 10, buf, 0x300, &small);
    if (st == GCOMP_OK) st = pingpong(t, peer, t->node == 0, BIG, 2, buf, 0x400, &big);
    if (st == GCOMP_OK) f[2] = small, f[3] = (big - small) / BIG;
  }
  /* gamma: this rank's fp32 add rate */
  if (st == GCOMP_OK) {
    gcomp_reduce_fn add = gcomp_reduce_kernel(GCOMP_FLOAT32, GCOMP_SUM);
    add(buf, buf + BIG / 2, BIG / 8);   /* warm: the first touch measures page faults */
    uint64_t t0 = gcomp_now_ns();
    add(buf, buf + BIG / 2, BIG / 8);
    add(buf, buf + BIG / 2, BIG / 8);
    f[4] = (double)(gcomp_now_ns() - t0) * 1e-9 / (BIG / 2);
  }
  free(buf);
  GCOMP_CHECK(st);
  GCOMP_CHECK(calib_max(comm, f, 6, 0xfffffdu));
  /* The pair was measured alone; in a call every local rank copies and adds at once, and
   * with more ranks than cores they share the cores (the shm figures below are measured
   * with all ranks running, so they need no such correction). */
  double crowd = 1;
  cpu_set_t cpus;
  if (sched_getaffinity(0, sizeof cpus, &cpus) == 0 && CPU_COUNT(&cpus) > 0 &&
      t->local_size > CPU_COUNT(&cpus))
    crowd = (double)t->local_size / CPU_COUNT(&cpus);
  f[1] *= crowd, f[4] *= crowd;
  /* floors keep the model sane when a measurement came out at zero */
  comm->model.intra = (gcomp_link){fmax(f[0], 1e-7), fmax(f[1], 1.0 / 50e9)};
  comm->model.inter = t->nnodes > 1 ? (gcomp_link){fmax(f[2], 1e-7), fmax(f[3], 1.0 / 50e9)}
                                    : comm->model.intra;
  comm->model.gamma_spb = fmax(f[4], 1.0 / 50e9);
  return GCOMP_OK;
}

/* The shared-memory allreduce's figures, timed for real: the fastest of 30 one-round
 * 8-byte calls and of 6 one-slot calls, like the ping-pong's figures (the fastest, so that
 * both sides of the planner's comparison are best cases); the slowest rank's figures win. */
int gcomp_calibrate_shm(gcomp_comm *comm) {
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
  GCOMP_CHECK(calib_max(comm, f, 2, 0xfffff8u));
  comm->model.shm_alpha = fmax(f[0], 1e-8);
  comm->model.shm_spb = fmax((f[1] - f[0]) / (double)slot, 1.0 / 100e9);
  return GCOMP_OK;
}

