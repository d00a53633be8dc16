/* Communicators and gcomp_allreduce: argument checks, working types, the planner's choice,
 * and one place where a call's phases begin and end (for stats). */
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cast.h"
#include "coll.h"
#include "comm.h"
#include "skew.h"

struct gcomp_comm;
static void write_stats(const struct gcomp_comm *comm);
static void write_trace(const struct gcomp_comm *comm);

/* What the planner knows about a codec, measured once per communicator and spec. */
enum { MAX_CODECS = 8 };
typedef struct {
  char spec[256];          /* canonical spec of the caller's codec */
  gcomp_codec *second;     /* re-encodes reduced shards: the spec without +ef (top-k: none) */
  double ratio;            /* wire bytes per fp32 byte, measured on a probe, slowest rank's */
  double spb;              /* encode + decode seconds per fp32 byte, agreed across ranks */
  int sparse;              /* top-k */
} codec_info;

struct gcomp_comm {
  gcomp_transport *t;
  int own;
  gcomp_settings set;          /* this communicator's settings, copied at creation */
  uint32_t seq;
  int *world;                  /* 0..size-1 */
  uint8_t *tmp;                /* receive scratch */
  size_t tmp_cap;
  uint8_t *work;               /* fp32 copy of bf16/fp16 data */
  size_t work_cap;
  gcomp_plan_in model;         /* links and placement; bytes set per call */
  const gcomp_algo *forced;    /* GCOMP_ALGO, or NULL */
  size_t seg_bytes;
  gcomp_comm_stats stats;
  gcomp_codec *default_codec;  /* GCOMP_CODEC, or NULL for none */
  gcomp_codec *intra_codec;    /* GCOMP_INTRA_CODEC, or NULL for fp32 inside nodes */
  codec_info codecs[MAX_CODECS];
  int ncodecs;
  const char *last_algo;       /* what the last call ran */
  struct trace_event *trace;   /* GCOMP_TRACE: one event per call */
  size_t ntrace, trace_cap;
  uint64_t born_ns;
  double born_real_us;         /* CLOCK_REALTIME when born_ns was taken, microseconds */
  double epoch_real_us;        /* the job's earliest born_real_us: the traces' time origin */
  gcomp_shm *shm;              /* the node's shared segment (NULL: alone on the node, or none) */
  gcomp_skew skew;             /* straggler detection (GCOMP_SKEW_WINDOW) */
  int broken;                  /* a collective failed part-way: peers are in unknown states */
  char broken_why[768];        /* that failure, for every later call */
  int exchanging;              /* inside the detector's own allreduces: not user calls */
  /* non-blocking calls: a FIFO served by one progress thread, started on first use */
  pthread_mutex_t mu;
  pthread_cond_t cv;           /* queue changed, or a request finished */
  struct gcomp_request *head, *tail;
  int thread_on, stopping;
  int pending;                 /* requests issued and not yet freed by wait or test */
  pthread_t thread;
};

/* One queued call and, once it ran, its outcome. */
struct gcomp_request {
  gcomp_comm *comm;
  const void *sendbuf;
  void *recvbuf;
  size_t count;
  gcomp_dtype dtype;
  gcomp_op op;
  gcomp_codec *codec;
  uint64_t key;
  struct gcomp_request *next;
  uint64_t arrive_ns;          /* when the caller asked: the rank's arrival at this call */
  int done, status;
  char error[1024];            /* gcomp_last_error() of the progress thread on failure */
};

/* One allreduce as the trace shows it: when, how big, which algorithm, and its phases. */
struct trace_event {
  uint64_t start_ns, end_ns;
  size_t bytes;
  const char *algo;
  double wait_s, encode_s, decode_s, reduce_s;
  uint64_t wire_bytes, shm_bytes;
  double late_s;   /* how late this rank arrived (straggler detection), < 0: not known */
};

int gcomp_coll_reserve(gcomp_coll *c, size_t bytes) {
  if (c->tmp_cap >= bytes) return GCOMP_OK;
  /* the communicator owns the scratch, so it survives from call to call */
  uint8_t *p = realloc(*c->tmp_owner, bytes);
  GCOMP_FAIL_IF(!p, GCOMP_ERR_NOMEM, "allreduce scratch of %zu bytes", bytes);
  *c->tmp_owner = c->tmp = p;
  *c->tmp_owner_cap = c->tmp_cap = bytes;
  return GCOMP_OK;
}

static size_t dtype_size(gcomp_dtype d) {
  static const size_t sizes[] = {4, 8, 4, 8, 2, 2};
  return (unsigned)d <= GCOMP_FLOAT16 ? sizes[d] : 0;
}

/* ---- creation ------------------------------------------------------------------------- */
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

/* An allreduce over the world with a fixed algorithm, for the communicator's own use (kept
 * out of the caller's stats). */
static int internal_max(gcomp_comm *comm, double *v, size_t n, uint32_t seq) {
  gcomp_comm_stats scratch = {0};
  gcomp_coll c = {.t = comm->t, .seq = seq, .esize = 8,
                  .reduce = gcomp_reduce_kernel(GCOMP_FLOAT64, GCOMP_MAX), .tmp = comm->tmp,
                  .tmp_cap = comm->tmp_cap, .tmp_owner = &comm->tmp, .tmp_owner_cap = &comm->tmp_cap,
                  .seg_bytes = 1 << 20, .stats = &scratch, .world = comm->world,
                  .chunk_bytes = (size_t)gcomp_settings_int(&comm->set, GCOMP_P_CHUNK_BYTES)};
  gcomp_group all = {comm->world, comm->t->size, comm->t->rank};
  return gcomp_rd_allreduce(&c, &all, (uint8_t *)v, n, 0);
}

/* Ranks per node when every node holds the same number, else 0 (hier cannot serve the
 * placement). A size that divides evenly is not enough: 3 + 1 ranks on two nodes. */
static int even_local(const gcomp_transport *t) {
  int *count = calloc((size_t)t->nnodes, sizeof *count);
  if (!count) return 0;   /* the planner then keeps to flat algorithms */
  for (int r = 0; r < t->size; r++) count[t->node_of[r]]++;
  int local = count[0];
  for (int n = 1; n < t->nnodes; n++)
    if (count[n] != local) local = 0;
  free(count);
  return local;
}

/* 52 bits of FNV-1a over n bytes: exact in a double */
static double hash52(const void *p, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; i++) h = (h ^ ((const uint8_t *)p)[i]) * 0x100000001b3ull;
  return (double)(h >> 12);
}

/* The codec as the wire and the planner see it: its canonical spec without seed= (a seed
 * only decorrelates one rank's stochastic rounding or sampling; frames describe themselves,
 * so ranks may pick different seeds) */
static double spec_hash(const gcomp_codec *c) {
  char spec[256] = "none", out[256];
  if (c) gcomp_codec_spec(c, spec, sizeof spec);
  size_t o = 0;
  for (const char *p = spec; *p;) {
    size_t n = strcspn(p, ":,+");
    int seed = (p == spec ? 0 : (p[-1] == ':' || p[-1] == ',')) && !strncmp(p, "seed=", 5);
    if (!seed && o + n + 1 < sizeof out) {
      memcpy(out + o, p, n);
      o += n;
    }
    p += n;
    if (*p) {
      if (!seed && o + 1 < sizeof out) out[o++] = *p;
      else if (seed && *p == '+' && o && (out[o - 1] == ',' || out[o - 1] == ':'))
        out[o - 1] = '+';   /* the separator before the seed gives way to the stage's */
      p++;
    }
  }
  while (o && (out[o - 1] == ',' || out[o - 1] == ':')) o--;   /* a seed that came last */
  return hash52(out, o);
}

/* What every rank must hold alike, agreed in one exchange at creation. A rank that differs
 * would plan other algorithms or codecs than its peers: it waits for messages that never
 * come, or (a codec inside the node on one node only, another GCOMP_CODEC_MIN_BYTES) ends
 * the call with other bytes and no error. The window also fixes when straggler detection
 * exchanges. The same exchange agrees on the traces' time origin: the earliest rank's birth
 * in CLOCK_REALTIME (microseconds are exact in a double), so that every rank's trace shares
 * one time axis (exactly on one host, as well as the hosts' clocks agree across hosts). */
static int agree_at_creation(gcomp_comm *comm) {
  int window = (int)gcomp_settings_int(&comm->set, GCOMP_P_SKEW_WINDOW);
  if (comm->t->size > 1) {
    const char *algo = gcomp_settings_str(&comm->set, GCOMP_P_ALGO);
    /* link figures given by GCOMP_ALPHA_BETA as parsed (calibrated ones are agreed anyway) */
    double links[6] = {comm->model.intra.alpha_s, comm->model.intra.beta_spb,
                       comm->model.inter.alpha_s, comm->model.inter.beta_spb,
                       comm->model.shm_alpha, comm->model.shm_spb};
    int given = gcomp_settings_is_set(&comm->set, GCOMP_P_ALPHA_BETA);
    static const char *const names[] = {
        "GCOMP_SKEW_WINDOW", "GCOMP_CODEC", "GCOMP_INTRA_CODEC", "GCOMP_CODEC_MIN_BYTES",
        "GCOMP_ALGO", "GCOMP_CHUNK_BYTES", "GCOMP_SHM_BYTES", "GCOMP_ALPHA_BETA",
        "GCOMP_SEGMENT_BYTES"};
    enum { K = sizeof names / sizeof *names };
    double v[K] = {window,
                   spec_hash(comm->default_codec),
                   spec_hash(comm->intra_codec),
                   (double)gcomp_settings_int(&comm->set, GCOMP_P_CODEC_MIN_BYTES),
                   hash52(algo, strlen(algo)),
                   (double)gcomp_settings_int(&comm->set, GCOMP_P_CHUNK_BYTES),
                   (double)gcomp_settings_int(&comm->set, GCOMP_P_SHM_BYTES),
                   given ? hash52(links, sizeof links) : -1,
                   (double)gcomp_settings_int(&comm->set, GCOMP_P_SEGMENT_BYTES)};
    double w[2 * K + 1];
    for (int i = 0; i < K; i++) w[2 * i] = v[i], w[2 * i + 1] = -v[i];
    w[2 * K] = -comm->born_real_us;
    GCOMP_CHECK(internal_max(comm, w, 2 * K + 1, 0xfffffau));
    for (int i = 0; i < K; i++) {
      if (w[2 * i] == -w[2 * i + 1]) continue;
      int number = i == 0 || i == 3 || i == 5 || i == 6 || i == 8;   /* the others are hashes */
      if (number)
        GCOMP_FAIL(GCOMP_ERR_INVALID, "%s differs between ranks (from %.0f to %.0f): it must be "
                   "equal on every rank", names[i], -w[2 * i + 1], w[2 * i]);
      GCOMP_FAIL(GCOMP_ERR_INVALID, "%s differs between ranks (this rank: '%s'): it must be "
                 "equal on every rank", names[i],
                 gcomp_settings_str(&comm->set, i == 1   ? GCOMP_P_CODEC
                                                : i == 2 ? GCOMP_P_INTRA_CODEC
                                                : i == 4 ? GCOMP_P_ALGO
                                                         : GCOMP_P_ALPHA_BETA));
    }
    comm->epoch_real_us = -w[2 * K];
  }
  return gcomp_skew_init(&comm->skew, window, comm->t->size);
}

/* Measures alpha and beta of each link class, one pair at a time while the other ranks
 * wait (so the pair has the cores to itself), then agrees on the figures everywhere: all
 * ranks must pick the same algorithms. The big message is 4 MiB so that a rate-limited
 * link's burst allowance does not pass for bandwidth. */
static int calibrate(gcomp_comm *comm) {
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
  if (st == GCOMP_OK) st = internal_max(comm, &gate, 1, 0xfffffbu);
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
  GCOMP_CHECK(internal_max(comm, f, 6, 0xfffffdu));
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
static int calibrate_shm(gcomp_comm *comm) {
  size_t slot = gcomp_shm_slot_bytes(comm->shm);
  uint8_t *buf = calloc(1, slot);
  GCOMP_FAIL_IF(!buf, GCOMP_ERR_NOMEM, "shm calibration buffer");
  gcomp_comm_stats scratch = {0};
  gcomp_coll c = {.t = comm->t, .esize = 4, .reduce = gcomp_reduce_kernel(GCOMP_FLOAT32, GCOMP_SUM),
                  .reduce3 = gcomp_reduce3_kernel(GCOMP_FLOAT32, GCOMP_SUM), .stats = &scratch,
                  .world = comm->world, .shm = comm->shm};
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
  GCOMP_CHECK(internal_max(comm, f, 2, 0xfffff8u));
  comm->model.shm_alpha = fmax(f[0], 1e-8);
  comm->model.shm_spb = fmax((f[1] - f[0]) / (double)slot, 1.0 / 100e9);
  return GCOMP_OK;
}

int gcomp_comm_create(gcomp_transport *t, int own, const gcomp_settings *set, gcomp_comm **out) {
  GCOMP_FAIL_IF(!t || !out, GCOMP_ERR_INVALID, "gcomp_comm_create: NULL argument");
  *out = NULL;
  GCOMP_CHECK(gcomp_init());
  gcomp_comm *comm = calloc(1, sizeof *comm);
  GCOMP_FAIL_IF(!comm, GCOMP_ERR_NOMEM, "allocating a communicator");
  int cst = gcomp_settings_copy(&comm->set, set);
  if (cst < 0) {
    free(comm);
    return gcomp_error_trace(cst, __FILE__, __LINE__);
  }
  comm->t = t;
  comm->born_ns = gcomp_now_ns();
  struct timespec real;
  clock_gettime(CLOCK_REALTIME, &real);
  comm->born_real_us = comm->epoch_real_us = (double)real.tv_sec * 1e6 + (double)real.tv_nsec / 1e3;
  pthread_mutex_init(&comm->mu, NULL);
  pthread_cond_init(&comm->cv, NULL);
  comm->seg_bytes = (size_t)gcomp_settings_int(&comm->set, GCOMP_P_SEGMENT_BYTES);
  comm->world = malloc((size_t)t->size * sizeof *comm->world);
  int st = comm->world ? GCOMP_OK : gcomp_error_set(GCOMP_ERR_NOMEM, __FILE__, __LINE__, "world");
  for (int r = 0; st == GCOMP_OK && r < t->size; r++) comm->world[r] = r;
  comm->model.n = t->size;
  comm->model.nnodes = t->nnodes;
  comm->model.local = even_local(t);
  const char *algo = gcomp_settings_str(&comm->set, GCOMP_P_ALGO);
  if (st == GCOMP_OK && strcmp(algo, "auto") != 0) {
    comm->forced = gcomp_algo_find(algo);
    if (!comm->forced)
      st = gcomp_error_set(GCOMP_ERR_INVALID, __FILE__, __LINE__,
                           "GCOMP_ALGO='%s' is not an algorithm (valid: auto, %s)", algo,
                           gcomp_algo_names());
  }
  const char *dflt = gcomp_settings_str(&comm->set, GCOMP_P_CODEC);
  if (st == GCOMP_OK && strcmp(dflt, "none") != 0) st = gcomp_codec_create(dflt, &comm->default_codec);
  const char *intra = gcomp_settings_str(&comm->set, GCOMP_P_INTRA_CODEC);
  if (st == GCOMP_OK && strcmp(intra, "none") != 0) st = gcomp_codec_create(intra, &comm->intra_codec);
  if (st == GCOMP_OK) {
    if (gcomp_settings_is_set(&comm->set, GCOMP_P_ALPHA_BETA))
      st = gcomp_plan_parse_links(gcomp_settings_str(&comm->set, GCOMP_P_ALPHA_BETA),
                                  "GCOMP_ALPHA_BETA", &comm->model);
    else
      st = calibrate(comm);
  }
  /* a shared segment per node: the shm algorithm on one node, hier's intra-node halves on
   * several */
  if (st == GCOMP_OK && t->local_size > 1)
    st = gcomp_shm_create(t, (size_t)gcomp_settings_int(&comm->set, GCOMP_P_SHM_BYTES), &comm->shm);
  if (st == GCOMP_OK && comm->shm && t->nnodes == 1) {
    comm->model.shm_slot = gcomp_shm_slot_bytes(comm->shm);
    if (!gcomp_settings_is_set(&comm->set, GCOMP_P_ALPHA_BETA)) st = calibrate_shm(comm);
  }
  if (st == GCOMP_OK) st = agree_at_creation(comm);
  if (st < 0) {
    comm->own = 0;   /* the caller keeps the transport on failure */
    gcomp_comm_destroy(comm);
    return gcomp_error_trace(st, __FILE__, __LINE__);
  }
  comm->own = own;
  GCOMP_INFO(GCOMP_SUB_TUNING,
             "rank %d/%d node %d/%d: intra %.2f us %.2f GB/s, inter %.2f us %.2f GB/s, add %.2f GB/s, "
             "shm %.2f us %.2f GB/s (%zu B rounds)",
             t->rank, t->size, t->node, t->nnodes, comm->model.intra.alpha_s * 1e6,
             1e-9 / comm->model.intra.beta_spb, comm->model.inter.alpha_s * 1e6,
             1e-9 / comm->model.inter.beta_spb, 1e-9 / comm->model.gamma_spb,
             comm->model.shm_alpha * 1e6, comm->model.shm_spb > 0 ? 1e-9 / comm->model.shm_spb : 0,
             comm->model.shm_slot);
  *out = comm;
  return GCOMP_OK;
}

int gcomp_comm_from_transport(gcomp_transport *t, int own, gcomp_comm **out) {
  return gcomp_comm_create(t, own, NULL, out);
}

static void stop_progress(gcomp_comm *comm);

/* The requests the caller has not completed: while there are any, destroying would free
 * what the progress thread and the caller's later wait or test still use. */
static int refuse_pending(gcomp_comm *comm) {
  pthread_mutex_lock(&comm->mu);
  int pending = comm->pending;
  pthread_mutex_unlock(&comm->mu);
  GCOMP_FAIL_IF(pending > 0, GCOMP_ERR_INVALID,
                "gcomp_comm_destroy: %d gcomp_iallreduce request%s pending: complete %s with "
                "gcomp_request_wait or gcomp_request_test first (the communicator stays usable)",
                pending, pending == 1 ? " is" : "s are", pending == 1 ? "it" : "them");
  return GCOMP_OK;
}

int gcomp_comm_destroy(gcomp_comm *comm) {
  if (!comm) return GCOMP_OK;
  GCOMP_CHECK(refuse_pending(comm));
  stop_progress(comm);
  locale_t old_locale = uselocale(gcomp_c_locale());   /* JSON numbers: 0.5, never 0,5 */
  write_stats(comm);
  write_trace(comm);
  uselocale(old_locale);
  free(comm->trace);
  gcomp_skew_free(&comm->skew);
  gcomp_shm_destroy(comm->shm);
  if (comm->own) gcomp_transport_destroy(comm->t);
  gcomp_codec_destroy(comm->default_codec);
  gcomp_codec_destroy(comm->intra_codec);
  for (int i = 0; i < comm->ncodecs; i++) gcomp_codec_destroy(comm->codecs[i].second);
  free(comm->world);
  free(comm->tmp);
  free(comm->work);
  pthread_mutex_destroy(&comm->mu);
  pthread_cond_destroy(&comm->cv);
  gcomp_settings_free(&comm->set);
  free(comm);
  return GCOMP_OK;
}

int gcomp_comm_rank(const gcomp_comm *comm) { return comm ? comm->t->rank : -1; }
int gcomp_comm_size(const gcomp_comm *comm) { return comm ? comm->t->size : -1; }
int gcomp_comm_node(const gcomp_comm *comm) { return comm ? comm->t->node : -1; }
int gcomp_comm_nnodes(const gcomp_comm *comm) { return comm ? comm->t->nnodes : -1; }
gcomp_transport *gcomp_comm_transport(gcomp_comm *comm) { return comm->t; }

int gcomp_comm_get_stats(const gcomp_comm *comm, gcomp_comm_stats *out) {
  GCOMP_FAIL_IF(!comm || !out, GCOMP_ERR_INVALID, "gcomp_comm_get_stats: NULL argument");
  return GCOMP_SIZED_COPY(out, &comm->stats, gcomp_comm_stats, shm_bytes, "gcomp_comm_get_stats");
}

int gcomp_comm_get_skew(const gcomp_comm *comm, gcomp_skew_stats *out) {
  GCOMP_FAIL_IF(!comm || !out, GCOMP_ERR_INVALID, "gcomp_comm_get_skew: NULL argument");
  return GCOMP_SIZED_COPY(out, &comm->skew.mine, gcomp_skew_stats, worst_last,
                          "gcomp_comm_get_skew");
}

const char *gcomp_comm_last_algo(const gcomp_comm *comm) {
  return comm && comm->last_algo ? comm->last_algo : "";
}

const char *gcomp_comm_plan_name(gcomp_comm *comm, size_t bytes) {
  gcomp_plan_in in = comm->model;
  in.bytes = bytes;
  return gcomp_plan_pick(&in, comm->forced)->name;
}

/* ---- codecs in the planner --------------------------------------------------------------- */
/* Measures one codec's encode + decode cost on this rank, then takes the slowest rank's
 * figure so that every rank plans alike. Collective: every rank reaches it at the same
 * call (the first compressed call with this spec). */
static int measure_codec(gcomp_comm *comm, codec_info *ci) {
  enum { N = 1 << 16 };
  gcomp_codec *probe = NULL;
  GCOMP_CHECK(gcomp_codec_create(ci->spec, &probe));
  float *x = malloc(N * sizeof *x), *y = calloc(N, sizeof *y);
  size_t cap = gcomp_codec_max_encoded_size(probe, N);
  uint8_t *frame = malloc(cap);
  int st = x && y && frame ? GCOMP_OK : gcomp_error_set(GCOMP_ERR_NOMEM, __FILE__, __LINE__, "codec probe");
  /* encode+decode time, wire ratio, and the spec (max and -min: every rank must measure the
   * same codec, or the ranks called with different ones) */
  double f[4] = {0, 0, spec_hash(probe), -spec_hash(probe)};
  if (st == GCOMP_OK) {
    uint64_t s = 0x2545f4914f6cdd1dull;
    for (int i = 0; i < N; i++) {
      s ^= s << 13, s ^= s >> 7, s ^= s << 17;
      x[i] = (float)((double)(s >> 40) / 16777216.0 - 0.5) * 1e-3f;
    }
    size_t len = 0;
    /* the fastest of a few runs after a warm-up: one hiccup must not talk the planner out
     * of a codec for the communicator's whole life */
    double best = 1e30;
    for (int rep = 0; rep < 4 && st == GCOMP_OK; rep++) {
      uint64_t t0 = gcomp_now_ns();
      st = gcomp_encode(probe, 0, x, N, frame, cap, &len);
      if (st == GCOMP_OK) st = gcomp_decode_add(probe, frame, len, y, N);
      double t = (double)(gcomp_now_ns() - t0) * 1e-9;
      if (rep > 0 && t < best) best = t;
    }
    f[0] = best / (N * 4.0);
    f[1] = (double)len / (4.0 * N);   /* the bound is useless for top-k: measure it */
  }
  gcomp_codec_destroy(probe);
  free(x), free(y), free(frame);
  GCOMP_CHECK(st);
  GCOMP_CHECK(internal_max(comm, f, 4, 0xfffffcu));
  GCOMP_FAIL_IF(f[2] != -f[3], GCOMP_ERR_INVALID,
                "ranks call with different codecs (this rank: '%s'): every rank must pass the "
                "same codec spec to the same call", ci->spec);
  ci->spb = f[0];
  ci->ratio = f[1];
  return GCOMP_OK;
}

static int codec_lookup(gcomp_comm *comm, gcomp_codec *codec, codec_info **out) {
  char spec[256];
  gcomp_codec_spec(codec, spec, sizeof spec);
  for (int i = 0; i < comm->ncodecs; i++)
    if (!strcmp(comm->codecs[i].spec, spec)) {
      *out = &comm->codecs[i];
      return GCOMP_OK;
    }
  GCOMP_FAIL_IF(comm->ncodecs == MAX_CODECS, GCOMP_ERR_UNSUPPORTED,
                "a communicator plans for at most %d codec specs", MAX_CODECS);
  codec_info *ci = &comm->codecs[comm->ncodecs];
  memset(ci, 0, sizeof *ci);
  snprintf(ci->spec, sizeof ci->spec, "%s", spec);
  ci->sparse = !strncmp(spec, "topk", 4);
  /* the second quantisation: the same codec without error feedback; top-k's reduced shards
   * are dense, so they travel as fp32 */
  char second[256];
  snprintf(second, sizeof second, "%s", spec);
  char *ef = strstr(second, "+ef");
  if (ef) {
    char *next = strchr(ef + 1, '+');
    memmove(ef, next ? next : ef + strlen(ef), strlen(next ? next : ef + strlen(ef)) + 1);
  }
  GCOMP_CHECK(gcomp_codec_create(ci->sparse ? "none" : second, &ci->second));
  /* the entry counts only once measured: a failed measurement must not leave a codec that
   * later calls would plan with (ratio 0: every call quietly uncompressed) */
  int st = measure_codec(comm, ci);
  if (st < 0) {
    gcomp_codec_destroy(ci->second);
    ci->second = NULL;
    return gcomp_error_trace(st, __FILE__, __LINE__);
  }
  comm->ncodecs++;
  GCOMP_INFO(GCOMP_SUB_TUNING, "codec %s: wire ratio %.4f, encode+decode %.2f GB/s, second stage %s",
             spec, ci->ratio, 1e-9 / ci->spb, ci->sparse ? "none" : second);
  *out = ci;
  return GCOMP_OK;
}

/* A collective failed part-way: the ranks no longer agree on where they are, so the
 * communicator refuses every later call at once (GCOMP_ERR_PEER naming this failure). */
static int mark_broken(gcomp_comm *comm, int st) {
  comm->broken = 1;
  snprintf(comm->broken_why, sizeof comm->broken_why, "%s: %s", gcomp_strerror(st),
           gcomp_last_error());
  return gcomp_error_trace(st, __FILE__, __LINE__);
}

/* ---- stats and traces ------------------------------------------------------------------ */
static void record(gcomp_comm *comm, uint64_t t0, uint64_t t1, size_t bytes, const char *algo,
                   const gcomp_comm_stats *before) {
  if (comm->ntrace == comm->trace_cap) {
    size_t cap = comm->trace_cap ? comm->trace_cap * 2 : 1024;
    if (cap > (1u << 22)) return;   /* a bounded trace: the first 4M calls */
    struct trace_event *p = realloc(comm->trace, cap * sizeof *p);
    if (!p) return;
    comm->trace = p, comm->trace_cap = cap;
  }
  const gcomp_comm_stats *a = &comm->stats;
  comm->trace[comm->ntrace++] = (struct trace_event){
      t0, t1, bytes, algo, a->wait_s - before->wait_s, a->encode_s - before->encode_s,
      a->decode_s - before->decode_s, a->reduce_s - before->reduce_s,
      a->wire_bytes - before->wire_bytes, a->shm_bytes - before->shm_bytes, -1.0};
}

static void write_stats(const gcomp_comm *comm) {
  const char *pattern = gcomp_settings_str(&comm->set, GCOMP_P_STATS);
  if (!pattern[0]) return;
  char path[4096];
  gcomp_path_expand(pattern, comm->t->rank, path, sizeof path);
  FILE *f = fopen(path, "w");
  if (!f) {
    GCOMP_WARN(GCOMP_SUB_REDUCE, "GCOMP_STATS: cannot write '%s'", path);
    return;
  }
  const gcomp_comm_stats *s = &comm->stats;
  fprintf(f,
          "{\"rank\": %d, \"size\": %d, \"node\": %d, \"nodes\": %d, \"calls\": %llu, "
          "\"bytes\": %llu, \"wire_bytes\": %llu, \"shm_bytes\": %llu, \"total_s\": %.6f, "
          "\"wait_s\": %.6f, "
          "\"reduce_s\": %.6f, \"encode_s\": %.6f, \"decode_s\": %.6f, \"nonfinite\": %llu,\n"
          " \"model\": {\"intra_alpha_us\": %.3f, \"intra_GBps\": %.3f, \"inter_alpha_us\": %.3f, "
          "\"inter_GBps\": %.3f, \"reduce_GBps\": %.3f, \"shm_alpha_us\": %.3f, \"shm_GBps\": %.3f},\n",
          comm->t->rank, comm->t->size, comm->t->node, comm->t->nnodes,
          (unsigned long long)s->calls, (unsigned long long)s->bytes,
          (unsigned long long)s->wire_bytes, (unsigned long long)s->shm_bytes, s->total_s,
          s->wait_s, s->reduce_s, s->encode_s,
          s->decode_s, (unsigned long long)s->nonfinite, comm->model.intra.alpha_s * 1e6,
          1e-9 / comm->model.intra.beta_spb, comm->model.inter.alpha_s * 1e6,
          1e-9 / comm->model.inter.beta_spb, 1e-9 / comm->model.gamma_spb,
          comm->model.shm_alpha > 0 ? comm->model.shm_alpha * 1e6 : 0,
          comm->model.shm_alpha > 0 && comm->model.shm_spb > 0 ? 1e-9 / comm->model.shm_spb : 0);
  /* stragglers: this rank's figures, then every rank's as of the last window */
  const gcomp_skew *k = &comm->skew;
  const gcomp_skew_stats *m = &k->mine;
  fprintf(f,
          " \"skew\": {\"window\": %d, \"calls\": %llu, \"late_mean_us\": %.1f, \"late_max_us\": "
          "%.1f, \"last\": %llu, \"spread_mean_us\": %.1f, \"exchange_s\": %.6f, "
          "\"worst_rank\": %d, \"ranks_late_mean_us\": [",
          k->window, (unsigned long long)m->calls, m->late_mean_s * 1e6, m->late_max_s * 1e6,
          (unsigned long long)m->last, m->spread_mean_s * 1e6, k->exchange_s, m->worst_rank);
  for (int r = 0; k->table && m->calls && r < k->size; r++)
    fprintf(f, "%s%.1f", r ? ", " : "", k->table[3 * r] * 1e6);
  fprintf(f, "], \"ranks_last\": [");
  for (int r = 0; k->table && m->calls && r < k->size; r++)
    fprintf(f, "%s%.0f", r ? ", " : "", k->table[3 * r + 2]);
  fprintf(f, "]}}\n");
  fclose(f);
}

/* Chrome trace-event format: one complete ("X") event per call on this rank's track. Times
 * count from the job's epoch (see agree_at_creation), so the ranks' files merge into one
 * timeline. */
static void write_trace(const gcomp_comm *comm) {
  const char *pattern = gcomp_settings_str(&comm->set, GCOMP_P_TRACE);
  if (!pattern[0]) return;
  char path[4096];
  gcomp_path_expand(pattern, comm->t->rank, path, sizeof path);
  FILE *f = fopen(path, "w");
  if (!f) {
    GCOMP_WARN(GCOMP_SUB_REDUCE, "GCOMP_TRACE: cannot write '%s'", path);
    return;
  }
  fprintf(f, "{\"traceEvents\": [\n");
  fprintf(f, " {\"name\": \"process_name\", \"ph\": \"M\", \"pid\": %d, \"args\": {\"name\": "
             "\"rank %d (node %d)\"}}", comm->t->rank, comm->t->rank, comm->t->node);
  for (size_t i = 0; i < comm->ntrace; i++) {
    const struct trace_event *e = &comm->trace[i];
    fprintf(f,
            ",\n {\"name\": \"allreduce %s\", \"cat\": \"gcomp\", \"ph\": \"X\", \"pid\": %d, "
            "\"tid\": 0, \"ts\": %.3f, \"dur\": %.3f, \"args\": {\"bytes\": %zu, \"wire_bytes\": "
            "%llu, \"shm_bytes\": %llu, \"wait_us\": %.1f, \"encode_us\": %.1f, "
            "\"decode_us\": %.1f, \"reduce_us\": %.1f",
            e->algo, comm->t->rank,
            (double)(e->start_ns - comm->born_ns) / 1e3 + (comm->born_real_us - comm->epoch_real_us),
            (double)(e->end_ns - e->start_ns) / 1e3, e->bytes, (unsigned long long)e->wire_bytes,
            (unsigned long long)e->shm_bytes, e->wait_s * 1e6, e->encode_s * 1e6,
            e->decode_s * 1e6, e->reduce_s * 1e6);
    if (e->late_s >= 0) fprintf(f, ", \"late_us\": %.1f", e->late_s * 1e6);
    fprintf(f, "}}");
  }
  fprintf(f, "\n], \"displayTimeUnit\": \"ms\", \"otherData\": {\"time_origin_unix_us\": %.0f}}\n",
          comm->epoch_real_us);
  fclose(f);
}

/* ---- allreduce ------------------------------------------------------------------------ */
static void finish_avg(void *buf, size_t count, gcomp_dtype wt, int n) {
  switch (wt) {
  case GCOMP_FLOAT32: gcomp_scale_f32(buf, count, (float)n); break;
  case GCOMP_FLOAT64: { double *x = buf; for (size_t i = 0; i < count; i++) x[i] /= n; break; }
  case GCOMP_INT32: { int32_t *x = buf; for (size_t i = 0; i < count; i++) x[i] /= n; break; }
  case GCOMP_INT64: { int64_t *x = buf; for (size_t i = 0; i < count; i++) x[i] /= n; break; }
  default: break;
  }
}

static int check_args(const char *fn, const gcomp_comm *comm, const void *sendbuf,
                      const void *recvbuf, size_t count, gcomp_dtype dtype, gcomp_op op) {
  GCOMP_FAIL_IF(!comm, GCOMP_ERR_INVALID, "%s: comm is NULL", fn);
  GCOMP_FAIL_IF(!dtype_size(dtype), GCOMP_ERR_INVALID, "%s: unknown dtype %d", fn, (int)dtype);
  GCOMP_FAIL_IF((unsigned)op > GCOMP_PROD, GCOMP_ERR_INVALID, "%s: unknown op %d", fn, (int)op);
  GCOMP_FAIL_IF(count && (!sendbuf || !recvbuf), GCOMP_ERR_INVALID,
                "%s: NULL buffer for %zu elements", fn, count);
  GCOMP_FAIL_IF(count > SIZE_MAX / 8, GCOMP_ERR_INVALID, "%s: count %zu too large", fn, count);
  return GCOMP_OK;
}

static int skew_exchange(gcomp_comm *comm);

/* The call itself, on whichever thread runs it (the caller's, or the progress thread).
 * arrive_ns: when the caller arrived (the call itself, or its gcomp_iallreduce; 0: now). */
static int allreduce_now(gcomp_comm *comm, const void *sendbuf, void *recvbuf, size_t count,
                         gcomp_dtype dtype, gcomp_op op, gcomp_codec *codec, uint64_t key,
                         uint64_t arrive_ns) {
  size_t es = dtype_size(dtype);
  /* codec per link level: on one node every link is intra-node */
  if (!codec) codec = comm->t->nnodes == 1 ? comm->intra_codec : comm->default_codec;
  uint64_t t0 = gcomp_now_ns();
  int tracing = gcomp_settings_str(&comm->set, GCOMP_P_TRACE)[0] != '\0';
  gcomp_comm_stats before = comm->stats;
  comm->seq = (comm->seq + 1) & ((1u << GCOMP_TAG_SEQ_BITS) - 1);
  if (comm->seq >= 0xfffff0u) comm->seq = 1;   /* keep clear of the calibration tags */
  comm->stats.calls++;
  comm->stats.bytes += count * es;
  /* after a collective failed part-way the ranks no longer agree on which messages belong
   * to which call: fail at once, as NCCL does with an aborted communicator, instead of
   * waiting out another timeout per call (empty calls too: "every later call") */
  GCOMP_FAIL_IF(comm->broken, GCOMP_ERR_PEER,
                "communicator unusable since an earlier allreduce failed: %s", comm->broken_why);
  if (count == 0) return GCOMP_OK;

  /* the working buffer: recvbuf itself, or an fp32 copy of 16-bit floats */
  gcomp_dtype wt = dtype;
  uint8_t *work = recvbuf;
  if (dtype == GCOMP_BFLOAT16 || dtype == GCOMP_FLOAT16) {
    wt = GCOMP_FLOAT32;
    if (comm->work_cap < count * 4) {
      uint8_t *p = realloc(comm->work, count * 4);
      GCOMP_FAIL_IF(!p, GCOMP_ERR_NOMEM, "allreduce: fp32 working copy of %zu values", count);
      comm->work = p, comm->work_cap = count * 4;
    }
    work = comm->work;
    /* the cast codecs' kernels: exact widening, and one round to nearest even at the end */
    const gcomp_cast_kernels *K = gcomp_cast_kernels_get();
    if (dtype == GCOMP_BFLOAT16) K->bf16_dec(sendbuf, count, (float *)(void *)work);
    else K->f16_dec(sendbuf, count, (float *)(void *)work, 1.0f);
  }

  gcomp_plan_in in = comm->model;
  in.bytes = count * dtype_size(wt);
  codec_info *ci = NULL;
  if (codec && dtype != GCOMP_FLOAT32) {
    GCOMP_TRACE(GCOMP_SUB_TUNING, "codec skipped: dtype %d is not float32", (int)dtype);
  } else if (codec && op != GCOMP_SUM && op != GCOMP_AVG) {
    /* codecs decode by adding: only sums (and averages) can go through them */
    GCOMP_TRACE(GCOMP_SUB_TUNING, "codec skipped: op %d is not a sum", (int)op);
  } else if (codec && (int64_t)in.bytes < gcomp_settings_int(&comm->set, GCOMP_P_CODEC_MIN_BYTES)) {
    GCOMP_TRACE(GCOMP_SUB_TUNING, "codec skipped: %zu B < GCOMP_CODEC_MIN_BYTES", in.bytes);
  } else if (codec) {
    int st = codec_lookup(comm, codec, &ci);   /* collective the first time: a failure breaks */
    if (st < 0) return mark_broken(comm, st);
    in.ratio = ci->ratio;
    in.codec_spb = ci->spb;
    in.sparse = ci->sparse;
  }
  const gcomp_algo *algo = gcomp_plan_pick(&in, comm->forced);
  if (ci && !algo->compressed)
    GCOMP_INFO(GCOMP_SUB_TUNING, "%zu B: not compressing with %s: %s is predicted faster", in.bytes,
               ci->spec, algo->name);
  if (comm->forced && algo != comm->forced)
    GCOMP_INFO(GCOMP_SUB_TUNING, "GCOMP_ALGO=%s cannot serve this placement; using %s",
               comm->forced->name, algo->name);
  gcomp_coll c = {.t = comm->t, .seq = comm->seq, .esize = dtype_size(wt),
                  .reduce = gcomp_reduce_kernel(wt, op), .tmp = comm->tmp,
                  .tmp_cap = comm->tmp_cap, .tmp_owner = &comm->tmp, .tmp_owner_cap = &comm->tmp_cap,
                  .seg_bytes = comm->seg_bytes, .stats = &comm->stats,
                  .chunk_bytes = (size_t)gcomp_settings_int(&comm->set, GCOMP_P_CHUNK_BYTES),
                  .plan = &in, .world = comm->world, .shm = comm->shm,
                  .float_data = wt == GCOMP_FLOAT32 || wt == GCOMP_FLOAT64};
  if (algo->compressed) c.codec = codec, c.codec2 = ci->second;
  c.key = key;
  /* GCOMP_INTRA_CODEC inside the nodes of a hierarchical call, under the same rules as any
   * codec (fp32 sums of at least GCOMP_CODEC_MIN_BYTES) */
  if (comm->intra_codec && !strncmp(algo->name, "hier", 4) && dtype == GCOMP_FLOAT32 &&
      (op == GCOMP_SUM || op == GCOMP_AVG) &&
      (int64_t)in.bytes >= gcomp_settings_int(&comm->set, GCOMP_P_CODEC_MIN_BYTES)) {
    codec_info *intra;
    int st = codec_lookup(comm, comm->intra_codec, &intra);
    if (st < 0) return mark_broken(comm, st);
    c.intra = comm->intra_codec, c.intra2 = intra->second;
  }
  c.reduce3 = gcomp_reduce3_kernel(wt, op);
  if (work == recvbuf && sendbuf != recvbuf) c.src = sendbuf;   /* out of place */
  comm->last_algo = algo->name;
  int st = algo->run(&c, work, count);
  if (st < 0) return mark_broken(comm, st);

  if (op == GCOMP_AVG) finish_avg(work, count, wt, comm->t->size);
  if (wt == GCOMP_FLOAT32) {
    /* each rank counts its own share of the result (summed over ranks: every NaN and Inf
     * once), so counting costs 1/n of a pass, not a whole one */
    size_t off, len;
    gcomp_chunk(count, comm->t->size, comm->t->rank, &off, &len);
    comm->stats.nonfinite += gcomp_count_nonfinite_f32((const float *)(void *)work + off, len);
  }
  if (work != recvbuf) {
    const gcomp_cast_kernels *K = gcomp_cast_kernels_get();
    gcomp_cast_counts counts = {0, 0, 0};
    if (dtype == GCOMP_BFLOAT16) K->bf16_enc((const float *)(void *)work, count, recvbuf, &counts);
    else K->f16_enc((const float *)(void *)work, count, recvbuf, 1.0f, &counts);
  }
  uint64_t t1 = gcomp_now_ns();
  comm->stats.total_s += (double)(t1 - t0) * 1e-9;
  if (comm->exchanging) return GCOMP_OK;
  size_t at = SIZE_MAX;
  if (tracing) {
    record(comm, t0, t1, count * es, algo->name, &before);
    if (comm->ntrace && comm->trace[comm->ntrace - 1].start_ns == t0) at = comm->ntrace - 1;
  }
  if (gcomp_skew_note(&comm->skew, (double)(t1 - (arrive_ns ? arrive_ns : t0)) * 1e-9, at))
    return skew_exchange(comm);
  return GCOMP_OK;
}

/* The detector's two exchanges, through the planner's choice of algorithm like any small
 * call, but kept out of the caller's stats and trace. */
static int skew_exchange(gcomp_comm *comm) {
  gcomp_skew *s = &comm->skew;
  gcomp_comm_stats saved = comm->stats;
  const char *last = comm->last_algo;
  uint64_t t0 = gcomp_now_ns();
  comm->exchanging = 1;
  int n = s->n;
  size_t len = gcomp_skew_vec(s);
  int st = allreduce_now(comm, s->vec, s->vec, len, GCOMP_FLOAT32, GCOMP_MAX, NULL, 0, 0);
  if (st == GCOMP_OK) {
    len = gcomp_skew_absorb(s, comm->t->rank);
    for (int i = 0; i < n; i++)
      if (s->trace_at[i] < comm->ntrace) comm->trace[s->trace_at[i]].late_s = s->late[i];
    st = allreduce_now(comm, s->table, s->table, len, GCOMP_FLOAT64, GCOMP_MAX, NULL, 0, 0);
  }
  comm->exchanging = 0;
  comm->stats = saved;
  comm->last_algo = last;
  s->exchange_s += (double)(gcomp_now_ns() - t0) * 1e-9;
  if (st < 0) {
    s->n = 0;
    return gcomp_error_trace(st, __FILE__, __LINE__);
  }
  gcomp_skew_finish(s);
  const gcomp_skew_stats *m = &s->mine;
  if (comm->t->rank == 0)
    GCOMP_INFO(GCOMP_SUB_REDUCE,
               "stragglers after %llu calls: rank %d arrives %.3f ms after the first on average "
               "and last in %llu calls; first to last arrival %.3f ms on average",
               (unsigned long long)m->calls, m->worst_rank, m->worst_late_mean_s * 1e3,
               (unsigned long long)m->worst_last, m->spread_mean_s * 1e3);
  return GCOMP_OK;
}

/* ---- non-blocking calls --------------------------------------------------------------- */
static void *progress_main(void *arg) {
  gcomp_comm *comm = arg;
  pthread_mutex_lock(&comm->mu);
  for (;;) {
    while (!comm->head && !comm->stopping) pthread_cond_wait(&comm->cv, &comm->mu);
    if (!comm->head) break;   /* stopping, and nothing left to run */
    gcomp_request *r = comm->head;
    pthread_mutex_unlock(&comm->mu);
    int st = allreduce_now(comm, r->sendbuf, r->recvbuf, r->count, r->dtype, r->op, r->codec,
                           r->key, r->arrive_ns);
    pthread_mutex_lock(&comm->mu);
    r->status = st;
    if (st < 0) snprintf(r->error, sizeof r->error, "%s", gcomp_last_error());
    comm->head = r->next;
    if (!comm->head) comm->tail = NULL;
    r->done = 1;
    pthread_cond_broadcast(&comm->cv);
  }
  pthread_mutex_unlock(&comm->mu);
  return NULL;
}

/* Runs what is queued, then ends the thread (requests nobody waited for are left to the
 * caller, who must not have any: see gcomp.h). */
static void stop_progress(gcomp_comm *comm) {
  pthread_mutex_lock(&comm->mu);
  int on = comm->thread_on;
  comm->stopping = 1;
  pthread_cond_broadcast(&comm->cv);
  pthread_mutex_unlock(&comm->mu);
  if (on) pthread_join(comm->thread, NULL);
  comm->thread_on = 0;
}

static int enqueue(gcomp_comm *comm, gcomp_request *r) {
  pthread_mutex_lock(&comm->mu);
  if (!comm->thread_on) {
    int rc = pthread_create(&comm->thread, NULL, progress_main, comm);
    if (rc) {
      pthread_mutex_unlock(&comm->mu);
      GCOMP_FAIL(GCOMP_ERR_NOMEM, "gcomp_iallreduce: cannot start the progress thread: %s",
                 strerror(rc));
    }
    comm->thread_on = 1;
  }
  if (comm->tail) comm->tail->next = r;
  else comm->head = r;
  comm->tail = r;
  comm->pending++;
  pthread_cond_broadcast(&comm->cv);
  pthread_mutex_unlock(&comm->mu);
  return GCOMP_OK;
}

int gcomp_iallreduce(gcomp_comm *comm, const void *sendbuf, void *recvbuf, size_t count,
                     gcomp_dtype dtype, gcomp_op op, gcomp_codec *codec, uint64_t key,
                     gcomp_request **req) {
  GCOMP_FAIL_IF(!req, GCOMP_ERR_INVALID, "gcomp_iallreduce: req is NULL");
  *req = NULL;
  GCOMP_CHECK(check_args("gcomp_iallreduce", comm, sendbuf, recvbuf, count, dtype, op));
  gcomp_request *r = calloc(1, sizeof *r);
  GCOMP_FAIL_IF(!r, GCOMP_ERR_NOMEM, "gcomp_iallreduce: request");
  *r = (gcomp_request){.comm = comm, .sendbuf = sendbuf, .recvbuf = recvbuf, .count = count,
                       .dtype = dtype, .op = op, .codec = codec, .key = key,
                       .arrive_ns = gcomp_now_ns()};
  int st = enqueue(comm, r);
  if (st < 0) {
    free(r);
    return st;
  }
  *req = r;
  return GCOMP_OK;
}

/* Frees a request that has run (under comm->mu, which the caller holds) */
static int finish(gcomp_request *r) {
  r->comm->pending--;
  int st = r->status;
  if (st < 0) gcomp_error_restore(st, r->error);
  free(r);
  return st;
}

int gcomp_request_wait(gcomp_request *req) {
  GCOMP_FAIL_IF(!req, GCOMP_ERR_INVALID, "gcomp_request_wait: req is NULL");
  gcomp_comm *comm = req->comm;
  pthread_mutex_lock(&comm->mu);
  while (!req->done) pthread_cond_wait(&comm->cv, &comm->mu);
  int st = finish(req);
  pthread_mutex_unlock(&comm->mu);
  return st;
}

int gcomp_request_test(gcomp_request *req, int *done) {
  GCOMP_FAIL_IF(!req || !done, GCOMP_ERR_INVALID, "gcomp_request_test: NULL argument");
  gcomp_comm *comm = req->comm;
  pthread_mutex_lock(&comm->mu);
  *done = req->done;
  int st = *done ? finish(req) : GCOMP_OK;
  pthread_mutex_unlock(&comm->mu);
  return st;
}

int gcomp_allreduce(gcomp_comm *comm, const void *sendbuf, void *recvbuf, size_t count,
                    gcomp_dtype dtype, gcomp_op op, gcomp_codec *codec, uint64_t key) {
  GCOMP_CHECK(check_args("gcomp_allreduce", comm, sendbuf, recvbuf, count, dtype, op));
  /* once a progress thread serves this communicator, every call goes through its queue:
   * calls keep their order and the transport keeps one user */
  if (!comm->thread_on)   /* written only by the user's thread, like this read */
    return allreduce_now(comm, sendbuf, recvbuf, count, dtype, op, codec, key, 0);
  gcomp_request *r;
  GCOMP_CHECK(gcomp_iallreduce(comm, sendbuf, recvbuf, count, dtype, op, codec, key, &r));
  return gcomp_request_wait(r);
}
