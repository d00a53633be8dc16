/* Internal to the communicator's files (comm*.c, call*.c, agree.c, calib.c, codec_plan.c,
 * progress.c, call_observe.c): the communicator itself, one call's record, and the seams between
 * them. The algorithms never see this header: they get a gcomp_coll (coll.h).
 *
 *   comm.c        lifecycle: create (calibrate, agree, shared segment), destroy, accessors
 *   comm_init.c   the public ways in: environment, caller's allgather, in-process ranks
 *   comm_split.c  communicators made from one: split, dup, a calibration lent to a config
 *   agree.c       the settings every rank must hold alike, read once and agreed in one
 *                 exchange at creation (gcomp_agreed): the call path reads only these
 *   calib.c       link and shared-memory figures for the cost model, and the fixed-algorithm
 *                 exchanges creation uses
 *   codec_plan.c  what the planner knows of each codec spec (wire ratio, speed, second
 *                 stage), measured once per spec and agreed
 *   call.c        one call: plan -> run -> finish, its stages and the observers it feeds
 *   call_observe.c the observers: stats, trace, stragglers (whose exchanges take the
 *                 internal path), and the JSON files stats and trace leave
 *   skew.c        straggler detection's bookkeeping (no communication)
 *   guard.c       the drift guard: a stage checking compressed results against exact ones
 *   step.c links.c the step split and what the TCP links delivered (measure.h)
 *   progress.c    non-blocking calls: the request queue and the progress thread
 *   cost.c, plan.c (the algorithms' side) the cost primitives and the algorithm table */
#ifndef GCOMP_COMM_IMPL_H
#define GCOMP_COMM_IMPL_H

#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "coll.h"
#include "comm.h"
#include "measure.h"
#include "skew.h"

/* ---- settings agreed at creation ------------------------------------------------------ */
/* GCOMP_GUARD (guard.c); every 0: off */
enum { GCOMP_GUARD_EVERY = 100, GCOMP_GUARD_BACKOFF = 100 };
#define GCOMP_GUARD_BUDGET 0.5
typedef struct {
  int every;                   /* check the first and every Nth compressed call of a size */
  double budget;               /* largest relative error let through */
  int backoff;                 /* uncompressed calls of a size after a fallback */
} gcomp_guard_cfg;
/* Parses GCOMP_GUARD's text; GCOMP_ERR_INVALID names the bad token. */
int gcomp_guard_parse(const char *text, gcomp_guard_cfg *out);

typedef struct {
  int skew_window;             /* GCOMP_SKEW_WINDOW */
  int64_t codec_min_bytes;     /* GCOMP_CODEC_MIN_BYTES */
  size_t chunk_bytes;          /* GCOMP_CHUNK_BYTES (compared across ranks) */
  size_t seg_bytes;            /* GCOMP_SEGMENT_BYTES */
  size_t shm_bytes;            /* GCOMP_SHM_BYTES */
  size_t stream_bytes;         /* GCOMP_STREAM_BYTES (not compared: it changes no bits) */
  int host_ranks;              /* GCOMP_HOST_RANKS (not compared: it changes no bits) */
  const gcomp_algo *forced;    /* GCOMP_ALGO's allreduce algorithm, or NULL for the planner */
  const gcomp_algo *forced_coll[GCOMP_COLL_KINDS];   /* GCOMP_ALGO per collective */
  gcomp_codec *allgather_codec;   /* GCOMP_ALLGATHER_CODEC, or NULL: allgathers are exact */
  gcomp_codec *default_codec;  /* GCOMP_CODEC, or NULL for none */
  gcomp_codec *intra_codec;    /* GCOMP_INTRA_CODEC, or NULL for fp32 inside nodes */
  int links_given;             /* GCOMP_ALPHA_BETA set: no calibration */
  gcomp_guard_cfg guard;       /* GCOMP_GUARD */
} gcomp_agreed;

/* Reads the agreed settings from the communicator's table (codecs created, GCOMP_ALGO
 * resolved); GCOMP_ERR_INVALID names a bad one. Not collective. */
int gcomp_agreed_read(gcomp_comm *comm);
void gcomp_agreed_free(gcomp_agreed *a);
/* Collective, before anything else collective at creation: own is this rank's
 * gcomp_agreed_read status (its detail in gcomp_last_error). Fails on every rank at once
 * when a rank refused its settings (naming that rank and its error) or when ranks hold
 * different values, build or wire versions (GCOMP_ERR_INVALID naming the setting, two ranks
 * and their values); agrees on the traces' time origin too. */
int gcomp_agreed_check(gcomp_comm *comm, int own);

/* The codec as the wire and the planner see it: 52 bits (exact in a double) of its wire
 * identity (gcomp_codec_wire_id: ranks may pick different seeds); NULL is "none". */
double gcomp_codec_wire_hash(const gcomp_codec *c);

/* ---- calibration (calib.c) ------------------------------------------------------------ */
/* Ranks per node when every node holds the same number, else 0 (hier cannot serve the
 * placement). */
int gcomp_even_local(const gcomp_transport *t);
/* Collective: alpha and beta of each link class and the add rate into comm->model, taken
 * from the settings' inherit when every rank has figures that hold here, else measured;
 * comm->calib keeps them. */
int gcomp_calibrate(gcomp_comm *comm);
/* Collective over the node: the shared-memory allreduce's round latency and rate (inherited
 * with the links when they were measured with as many ranks and the same segment size). */
int gcomp_calibrate_shm(gcomp_comm *comm);

/* ---- what the planner knows of a codec (codec_plan.c) --------------------------------- */
typedef struct {
  gcomp_codec *codec;      /* a clone of the first caller's codec: what later calls' codecs
                              are compared with (gcomp_codec_same), never used to encode */
  char spec[256];          /* its canonical spec, for log lines and errors only */
  gcomp_codec *second;     /* re-encodes reduced shards (gcomp_codec_second_stage) */
  double ratio;            /* wire bytes per fp32 byte, measured on a probe, slowest rank's */
  double spb;              /* encode + decode seconds per fp32 byte, agreed across ranks */
  int sparse;              /* frames are summed as they are (top-k) */
} gcomp_codec_entry;

/* The entry of `codec`, measured (collectively) the first time its spec is seen. */
int gcomp_codec_plan(gcomp_comm *comm, gcomp_codec *codec, gcomp_codec_entry **out);
/* Frees the communicator's entries. */
void gcomp_codec_plan_free(gcomp_comm *comm);

/* ---- one call ------------------------------------------------------------------------- */
/* A call as its stages and observers see it. acc is what the call adds to the
 * communicator's figures; the algorithms write into it (gcomp_coll.stats) and the stats
 * observer merges it, so nothing a running call writes is read by another thread. */
typedef struct gcomp_call {
  int kind;                    /* gcomp_coll_kind */
  const void *sendbuf;
  void *recvbuf;               /* broadcast: the buffer; barrier: NULL */
  size_t count;                /* the caller's count (reduce_scatter: recvcount; allgather:
                                  sendcount; alltoall: per block) */
  gcomp_dtype dtype;
  gcomp_op op;                 /* allgather, broadcast, alltoall, barrier: GCOMP_SUM, unused */
  int root;                    /* broadcast's */
  int shaped;                  /* its shape is compared in its own round (call_coll.c) */
  uint64_t shape;              /* then: its shape word */
  const void *src;             /* the input for the algorithm when work does not hold it
                                  yet (gcomp_coll.src), else NULL */
  size_t res_off, res_len;     /* the elements of work that are this rank's result */
  gcomp_codec *codec;          /* the caller's, or the communicator's default; NULL: none */
  uint64_t key;
  uint64_t arrive_ns;          /* when the caller asked (its gcomp_iallreduce, or the call) */
  gcomp_dtype wt;              /* the working type (fp32 for 16-bit floats) */
  uint8_t *work;               /* the working buffer: recvbuf, or the fp32 copy */
  const gcomp_algo *algo;      /* what runs; NULL before planning (empty or refused calls) */
  gcomp_codec_entry *ci;  /* the codec's planning entry, or NULL */
  gcomp_codec *intra;          /* GCOMP_INTRA_CODEC inside a hierarchical call's nodes, or NULL */
  gcomp_codec_entry *intra_ci; /* its planning entry */
  int uncompressed;            /* the guard's backoff: no codec at any level */
  void *guard_key;             /* the guard's state of this size when it watches the call */
  int guard_check;             /* and this call is checked */
  gcomp_comm_stats acc;        /* what this call adds (struct_size unused) */
  int nonfinite_known;         /* the algorithm counted the NaN and Inf of this rank's share
                                  of work (nonfinite_share), as the "nonfinite" stage would;
                                  a stage that rewrites work clears it */
  uint64_t nonfinite_share;
  int completed;               /* reached its end with the result in recvbuf */
  /* From here on gcomp_call_run writes each field before anything reads it (plan: before
   * the algorithm runs), so a caller need not clear them (gcomp_call_clear): zeroing the
   * whole call was about 70 instructions of an 8 B allreduce */
  gcomp_plan_in plan;          /* the cost model's inputs for this call */
  size_t total;                /* elements of the working vector (coll.h: gcomp_coll_kind) */
  size_t bytes;                /* count * dtype size: the user's bytes */
  uint64_t start_ns, end_ns;
  int status;
  size_t trace_at;             /* its trace event, or SIZE_MAX */
} gcomp_call;

/* Zeroes the fields a caller of gcomp_call_run must clear (those before plan) */
static inline void gcomp_call_clear(gcomp_call *call) {
  memset(call, 0, offsetof(gcomp_call, plan));
}

/* 0 for an unknown dtype. Inline: a call asks it about ten times. */
static inline size_t gcomp_dtype_size(gcomp_dtype d) {
  static const size_t sizes[] = {4, 8, 4, 8, 2, 2};
  return (unsigned)d <= GCOMP_FLOAT16 ? sizes[d] : 0;
}
int gcomp_call_check_args(const char *fn, const gcomp_comm *comm, const void *sendbuf,
                          const void *recvbuf, size_t count, gcomp_dtype dtype, gcomp_op op);

/* The call itself on whichever thread runs it (the caller's or the progress thread). */
int gcomp_call_run(gcomp_comm *comm, gcomp_call *call);
/* Runs call (blocking: req NULL) or queues it (*req) in issue order with every other call
 * of comm (progress.c); fn names the caller in errors. */
int gcomp_call_submit(gcomp_comm *comm, const gcomp_call *call, gcomp_request **req,
                      const char *fn);

/* The collectives other than allreduce (call_coll.c). agree: before anything else of the
 * call, each rank checks its own arguments and the ranks compare kind, counts, dtype, op,
 * root and codec in one small exchange: a refusal or a difference is GCOMP_ERR_INVALID on
 * every rank, the communicator stays usable. shape: the working vector (call->total,
 * work, src, res_off/res_len; wt the type the algorithm sees), the input copied in where
 * the algorithm needs it there. */
int gcomp_call_agree(gcomp_comm *comm, gcomp_call *call);
/* Or, for a broadcast on one node with a segment, no agreement before: the algorithm
 * (returned; NULL for every other call) compares the call's shape in its own first round
 * (coll_call.h: shaped). shape_own checks this rank's arguments as agree does and sets
 * call->shape (a refusal included: the rank still takes part in the round); shape_refused
 * says which rank differed, and how, after such a round failed (GCOMP_ERR_INVALID). */
const gcomp_algo *gcomp_call_self_agreeing(const gcomp_comm *comm, const gcomp_call *call);
int gcomp_call_shape_own(const gcomp_comm *comm, gcomp_call *call);
int gcomp_call_shape_refused(const gcomp_comm *comm, const gcomp_call *call, int who,
                             uint64_t theirs);
int gcomp_call_shape(gcomp_comm *comm, gcomp_call *call);
/* comm->work of at least `bytes` */
int gcomp_call_work(gcomp_comm *comm, size_t bytes);
/* One MAX exchange of n int64 values over the call's sequence number, as a call's own
 * algorithm runs (a failure breaks the communicator and is blamed, abort.h); then the
 * call takes a fresh sequence number for its algorithm. */
int gcomp_call_exchange_max(gcomp_comm *comm, int64_t *v, size_t n);

/* The communicator's own allreduce (straggler exchanges, creation's agreements): the
 * planner's dense choice, or `algo` when given, with no codec, no stages and no observers:
 * it leaves the caller's figures, trace and last algorithm alone. A failure part-way breaks
 * the communicator like any call's. seq 0: the next call number. */
int gcomp_call_internal(gcomp_comm *comm, void *buf, size_t count, gcomp_dtype dtype,
                        gcomp_op op, const gcomp_algo *algo, uint32_t seq);

/* A call number for an exchange of the communicator's own that is no allreduce (a split's
 * bootstrap): taken by every rank alike, so its tags meet no call's. */
uint32_t gcomp_call_take_seq(gcomp_comm *comm);

/* A collective failed part-way: every later call fails at once (GCOMP_ERR_PEER). */
int gcomp_comm_mark_broken(gcomp_comm *comm, int status);

/* ---- observers (call_observe.c, skew.c) ----------------------------------------------- */
/* One trace event per call: when, how big, which algorithm, and its phases. */
typedef struct {
  uint64_t start_ns, end_ns;
  size_t bytes;
  const char *algo;
  double wait_s, encode_s, decode_s, reduce_s;
  uint64_t wire_bytes, shm_bytes;
  double late_s;   /* how late this rank arrived (straggler detection), < 0: not known */
  double waited_s; /* how long it waited for the last arrival (the same), < 0: not known */
} gcomp_trace_event;

/* Each returns a status: an observer may run a collective of its own (the straggler
 * exchange). They may note what later ones read (trace_at). Stats and trace run with
 * comm->mu held by the caller (call.c); skew takes it where it needs it. */
int gcomp_stats_observe(gcomp_comm *comm, gcomp_call *call);
int gcomp_trace_observe(gcomp_comm *comm, gcomp_call *call);
int gcomp_skew_observe(gcomp_comm *comm, gcomp_call *call);
/* At destroy: GCOMP_STATS and GCOMP_TRACE (a failed write warns). */
void gcomp_stats_write(const gcomp_comm *comm);
void gcomp_trace_write(const gcomp_comm *comm);

/* ---- the drift guard (guard.c) -------------------------------------------------------- */
typedef struct gcomp_guard gcomp_guard;
/* Before planning: a key in backoff after a fallback runs uncompressed. */
void gcomp_guard_route(gcomp_comm *comm, gcomp_call *call);
/* The stage: before the run (copies or sums the input), after it (checks, may replace the
 * result with the exact one). Collective on checked calls. */
int gcomp_guard_before(gcomp_comm *comm, gcomp_call *call);
int gcomp_guard_after(gcomp_comm *comm, gcomp_call *call);
void gcomp_guard_free(gcomp_comm *comm);
/* Its part of GCOMP_STATS: `,"guard": {...}` when the guard is on. */
void gcomp_guard_write(const gcomp_comm *comm, FILE *f);

/* ---- non-blocking calls (progress.c) -------------------------------------------------- */
/* Stops the progress thread after what is queued; requests not yet completed by the
 * caller make gcomp_comm_destroy refuse before this is reached. */
void gcomp_progress_stop(gcomp_comm *comm);
int gcomp_progress_pending(gcomp_comm *comm);

/* ---- the communicator ----------------------------------------------------------------- */
/* One remembered pick of the planner (gcomp_comm.last_pick) */
typedef struct {
  const gcomp_algo *algo, *forced;   /* algo NULL: nothing remembered */
  size_t bytes;
  int kind;
} gcomp_pick_memo;

struct gcomp_request;

struct gcomp_comm {
  gcomp_transport *t;
  int own;                     /* destroy the transport with the communicator */
  gcomp_settings set;          /* this communicator's settings, copied at creation */
  gcomp_agreed agreed;         /* those the call path reads, agreed across ranks */
  uint32_t seq;                /* call number, part of every tag */
  int children;                /* splits and dups made from this one (names their files) */
  int *world;                  /* 0..size-1 */
  gcomp_scratch scratch;       /* the algorithms' receive scratch, kept across calls */
  uint8_t *work;               /* fp32 copy of bf16/fp16 data */
  size_t work_cap;
  gcomp_plan_in model;         /* links and placement; bytes set per call */
  /* the last picks of uncompressed calls, by size (call.c: pick). The model is fixed after
   * creation, so kind, bytes and the forced algorithm decide them: no copy of the whole
   * input to compare, as gcomp_plan_pick's cache does (~75 instructions of an 8 B call) */
  gcomp_pick_memo last_pick[4];
  gcomp_inherit calib;         /* the figures behind model as measured (or inherited), for
                                  communicators made from this one; n == 0: none (given by
                                  GCOMP_ALPHA_BETA). Fixed after creation. */
  int calib_inherited;         /* the link figures were taken, not measured */
  gcomp_codec_entry **codecs;   /* [ncodecs], each its own allocation: calls keep pointers */
  int ncodecs, codecs_cap;
  gcomp_shm *shm;              /* the node's shared segment (NULL: alone on the node, or none) */
  int oversubscribed;          /* more ranks on this machine than CPUs for this rank */
  int progress_naps;           /* more ranks' two threads than CPUs: the progress thread naps */
  gcomp_skew skew;             /* straggler detection (GCOMP_SKEW_WINDOW) */
  struct gcomp_guard *guard;   /* GCOMP_GUARD's state per key, made at the first check */
  gcomp_step step;             /* the step split (GCOMP_MEASURE) */
  int tracing;                 /* GCOMP_TRACE is set */
  gcomp_trace_event *trace;    /* one event per call */
  size_t ntrace, trace_cap;
  uint64_t born_ns;
  double born_real_us;         /* CLOCK_REALTIME when born_ns was taken, microseconds */
  double epoch_real_us;        /* the job's earliest born_real_us: the traces' time origin */
  struct gcomp_abort *abort;   /* abort notices (abort.h), NULL only before creation ends */
  int broken;                  /* a collective failed part-way: peers are in unknown states */
  char broken_why[768];        /* that failure, for every later call */
  /* what other threads may read while a call runs (gcomp_comm_get_stats, _get_skew,
   * _last_algo): written under mu by the observers */
  gcomp_comm_stats stats;
  const char *last_algo;
  /* non-blocking calls: a FIFO served by one progress thread, started on first use */
  pthread_mutex_t mu;
  pthread_cond_t cv;           /* queue changed, or a request finished */
  struct gcomp_request *head, *tail;
  int thread_on, stopping;
  int pending;                 /* requests issued and not yet freed by wait or test */
  pthread_t thread;
};

#endif /* GCOMP_COMM_IMPL_H */
