/* One allreduce call, on whichever thread runs it (the caller's, or the progress thread):
 * plan -> run -> finish, then the observers.
 *
 * Where things plug in (read this before adding to a call):
 *  - A call is a gcomp_call (comm_impl.h): its arguments, working buffer, plan, and `acc`,
 *    the figures it adds. The algorithms write acc through gcomp_coll.stats; nothing else
 *    of the communicator that other threads read is written while a call runs.
 *  - Observers (locked_observers[] and observers[] below: stats, trace, step, skew, in that
 *    order) see every call once, finished or failed, and are the only code that turns a
 *    call into the communicator's figures. An observer that measures more (a
 *    compute/communication/wait split, per-peer throughput) adds fields to acc or
 *    gcomp_call, fills them where the time is spent (coll_util.c's waits and exchanges, the
 *    algorithms, through gcomp_coll), and reads them in an observer of its own appended to
 *    locked_observers[] (it runs under comm->mu) or observers[] (it may run a collective);
 *    the pipeline does not change.
 *  - Stages (stages[] below) change the call itself: before_run sees the planned call with
 *    the input still in place (sendbuf, or the fp32 working copy of 16-bit input), after_run
 *    the fp32 result in the working buffer, in table order, before it is narrowed back to
 *    the caller's type. The drift guard (guard.c) is the stage ahead of "average":
 *    before_run copies the input (call->sendbuf), after_run runs gcomp_call_internal on
 *    the copy (the dense, uncompressed path, outside every observer and stage), compares,
 *    and may copy the exact result over call->work; its backoff reaches planning through
 *    gcomp_guard_route (call->uncompressed). A stage that fails breaks the communicator like a
 *    failed algorithm (its peers may be mid-call).
 *  - The communicator's own collectives (agreement, calibration, codec probes, straggler
 *    exchanges) use gcomp_call_internal: no stages, no observers, no codec.
 *  - Every collective is a call of this pipeline (call->kind): reduce_scatter, allgather,
 *    broadcast, barrier and alltoall first agree on their arguments (call_coll.c: one small
 *    exchange; on one node, inside the segment algorithm's first round), then take the same
 *    steps as allreduce over a working vector gcomp_call_shape lays out; the planner prices
 *    only algorithms of the call's kind. Stages say which
 *    kinds they serve (the guard: allreduce only); "average" and "nonfinite" act on the
 *    rank's result (res_off, res_len: reduce_scatter's block). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "abort.h"
#include "cast.h"
#include "comm_impl.h"

int gcomp_call_check_args(const char *fn, const gcomp_comm *comm, const void *sendbuf,
                          const void *recvbuf, size_t count, gcomp_dtype dtype, gcomp_op op) {
  GCOMP_FAIL_IF(!comm, GCOMP_ERR_INVALID, "%s: comm is NULL", fn);
  GCOMP_FAIL_IF(!gcomp_dtype_size(dtype), GCOMP_ERR_INVALID, "%s: unknown dtype %d", fn,
                (int)dtype);
  GCOMP_FAIL_IF((unsigned)op > GCOMP_PROD, GCOMP_ERR_INVALID, "%s: unknown op %d", fn, (int)op);
  GCOMP_FAIL_IF(count && (!sendbuf || !recvbuf), GCOMP_ERR_INVALID,
                "%s: NULL buffer for %zu elements", fn, count);
  GCOMP_FAIL_IF(count > SIZE_MAX / 8, GCOMP_ERR_INVALID, "%s: count %zu too large", fn, count);
  return GCOMP_OK;
}

static uint32_t next_seq(gcomp_comm *comm) {
  comm->seq = (comm->seq + 1) & ((1u << GCOMP_TAG_SEQ_BITS) - 1);
  if (comm->seq >= GCOMP_SEQ_RESERVED) comm->seq = 1;   /* keep clear of reserved_seq.h */
  return comm->seq;
}

uint32_t gcomp_call_take_seq(gcomp_comm *comm) { return next_seq(comm); }

/* The algorithms' view of a call over the world */
static gcomp_coll coll_of(gcomp_comm *comm, uint32_t seq, gcomp_dtype wt, gcomp_op op,
                          const gcomp_plan_in *in, gcomp_comm_stats *acc, size_t seg_bytes) {
  return (gcomp_coll){.t = comm->t, .seq = seq, .esize = gcomp_dtype_size(wt),
                      .reduce = gcomp_reduce_kernel(wt, op),
                      .reduce3 = gcomp_reduce3_kernel(wt, op),
                      .scratch = &comm->scratch, .seg_bytes = seg_bytes,
                      .stream_from = comm->agreed.stream_bytes ? comm->agreed.stream_bytes : 1,
                      .nap = comm->oversubscribed, .shape_who = -1,
                      .stats = acc, .plan = in,
                      .world = comm->world, .shm = comm->shm, .abort = comm->abort,
                      .float_data = wt == GCOMP_FLOAT32 || wt == GCOMP_FLOAT64};
}

/* ---- plan ----------------------------------------------------------------------------- */
int gcomp_call_work(gcomp_comm *comm, size_t bytes) {
  if (comm->work_cap >= bytes) return GCOMP_OK;
  uint8_t *p = realloc(comm->work, bytes);
  GCOMP_FAIL_IF(!p, GCOMP_ERR_NOMEM, "working copy of %zu bytes", bytes);
  comm->work = p, comm->work_cap = bytes;
  return GCOMP_OK;
}

/* The working vector (gcomp_call_shape): recvbuf itself, or comm->work; for 16-bit floats
 * an fp32 copy of the input */
static int widen(gcomp_comm *comm, gcomp_call *call) {
  GCOMP_CHECK(gcomp_call_shape(comm, call));
  if (call->wt == call->dtype) return GCOMP_OK;
  size_t count = call->total;
  GCOMP_CHECK(gcomp_call_work(comm, count * 4));
  call->work = comm->work;
  /* the cast codecs' kernels: exact widening, and one round to nearest even at the end */
  const gcomp_cast_kernels *K = gcomp_cast_kernels_get();
  const void *in = call->src ? call->src : call->sendbuf;
  if (call->dtype == GCOMP_BFLOAT16) K->bf16_dec(in, count, (float *)(void *)call->work);
  else K->f16_dec(in, count, (float *)(void *)call->work, 1.0f);
  call->src = NULL;
  return GCOMP_OK;
}

/* A codec applies to fp32 sums (and averages) of at least GCOMP_CODEC_MIN_BYTES */
static int codec_applies(const gcomp_comm *comm, const gcomp_call *call, size_t bytes) {
  return call->dtype == GCOMP_FLOAT32 && (call->op == GCOMP_SUM || call->op == GCOMP_AVG) &&
         (int64_t)bytes >= comm->agreed.codec_min_bytes;
}

/* The planner's pick, or the communicator's last one for the same uncompressed input (not
 * while the trace logs every pick's costs). By size: a benchmark's or a step's calls
 * alternate a few sizes. */
static const gcomp_algo *pick(gcomp_comm *comm, const gcomp_call *call,
                              const gcomp_algo *forced) {
  const gcomp_plan_in *in = &call->plan;
  if (call->ci || GCOMP_UNLIKELY(gcomp_log_level >= GCOMP_LOG_TRACE))
    return gcomp_plan_pick(in, forced);   /* a codec's figures are part of the input */
  enum { SLOTS = sizeof comm->last_pick / sizeof *comm->last_pick };
  unsigned k = (unsigned)((in->bytes * 0x9e3779b97f4a7c15ull) >> 62) % SLOTS;
  gcomp_pick_memo *p = &comm->last_pick[k];
  if (p->algo && p->bytes == in->bytes && p->kind == in->kind && p->forced == forced)
    return p->algo;
  const gcomp_algo *algo = gcomp_plan_pick(in, forced);
  p->algo = algo, p->forced = forced, p->bytes = in->bytes, p->kind = in->kind;
  return algo;
}

static int plan(gcomp_comm *comm, gcomp_call *call) {
  gcomp_plan_in *in = &call->plan;
  *in = comm->model;
  in->kind = call->kind;
  in->bytes = call->total * gcomp_dtype_size(call->wt);
  gcomp_codec *codec = call->codec;
  if (codec && call->uncompressed) {
    GCOMP_TRACE(GCOMP_SUB_TUNING, "codec skipped: the guard's backoff for key %llu",
                (unsigned long long)call->key);
  } else if (codec && call->shaped) {
    /* the segment's algorithm runs it (call_coll.c): the codecs were compared, not used */
    GCOMP_TRACE(GCOMP_SUB_TUNING, "codec skipped: one node's shared segment, uncompressed");
  } else if (codec && call->dtype != GCOMP_FLOAT32) {
    GCOMP_TRACE(GCOMP_SUB_TUNING, "codec skipped: dtype %d is not float32", (int)call->dtype);
  } else if (codec && call->op != GCOMP_SUM && call->op != GCOMP_AVG) {
    /* codecs decode by adding: only sums (and averages) can go through them */
    GCOMP_TRACE(GCOMP_SUB_TUNING, "codec skipped: op %d is not a sum", (int)call->op);
  } else if (codec && !codec_applies(comm, call, in->bytes)) {
    GCOMP_TRACE(GCOMP_SUB_TUNING, "codec skipped: %zu B < GCOMP_CODEC_MIN_BYTES", in->bytes);
  } else if (codec) {
    int st = gcomp_codec_plan(comm, codec, &call->ci);   /* collective the first time */
    if (st < 0) return gcomp_comm_mark_broken(comm, st);
    in->ratio = call->ci->ratio;
    in->codec_spb = call->ci->spb;
    in->sparse = call->ci->sparse;
  }
  /* a shaped call's algorithm is the one that compares its shape (call_coll.c) */
  const gcomp_algo *forced =
      call->shaped ? gcomp_call_self_agreeing(comm, call) : comm->agreed.forced_coll[call->kind];
  call->algo = pick(comm, call, forced);
  if (call->ci && !call->algo->compressed)
    GCOMP_INFO(GCOMP_SUB_TUNING, "%zu B: not compressing with %s: %s is predicted faster",
               in->bytes, call->ci->spec, call->algo->name);
  if (forced && call->algo != forced)
    GCOMP_INFO(GCOMP_SUB_TUNING, "GCOMP_ALGO=%s cannot serve this placement; using %s",
               forced->name, call->algo->name);
  /* GCOMP_INTRA_CODEC inside the nodes of a hierarchical allreduce or reduce_scatter, under
   * the same rules as any codec (fp32 sums of at least GCOMP_CODEC_MIN_BYTES) */
  gcomp_codec *intra = comm->agreed.intra_codec;
  int level = call->kind == GCOMP_COLL_ALLREDUCE || call->kind == GCOMP_COLL_REDUCE_SCATTER;
  if (intra && level && !call->uncompressed && strstr(call->algo->name, "hier") &&
      codec_applies(comm, call, in->bytes)) {
    int st = gcomp_codec_plan(comm, intra, &call->intra_ci);
    if (st < 0) return gcomp_comm_mark_broken(comm, st);
    call->intra = intra;
  }
  return GCOMP_OK;
}

/* ---- run ------------------------------------------------------------------------------ */
/* An algorithm's failure: the peers hear of a death or silence found here, then who else
 * failed (abort.h), and the communicator is broken. Not for a shaped call whose shape
 * differed from another rank's: every rank failed that round alike, nothing is broken. */
static int ran(gcomp_comm *comm, gcomp_call *call, const gcomp_coll *c, int st) {
  if (st < 0 && c->shaped && c->shape_who >= 0)
    return gcomp_call_shape_refused(comm, call, c->shape_who, c->shape_theirs);
  if (st < 0) st = gcomp_abort_failed(comm->abort, c->seq, st);
  if (st < 0) st = gcomp_abort_blame(comm->t, c->seq, st);
  return st < 0 ? gcomp_comm_mark_broken(comm, st) : GCOMP_OK;
}

static int run(gcomp_comm *comm, gcomp_call *call) {
  const gcomp_algo *algo = call->algo;
  gcomp_coll c = coll_of(comm, comm->seq, call->wt, call->op, &call->plan, &call->acc,
                         comm->agreed.seg_bytes);
  if (algo->compressed) c.codec = call->codec, c.codec2 = call->ci->second;
  c.key = call->key;
  if (call->intra) c.intra = call->intra, c.intra2 = call->intra_ci->second;
  c.src = call->src;
  c.root = call->root;
  c.shaped = call->shaped, c.shape = call->shape;
  int st = algo->run(&c, call->work, call->total);
  call->nonfinite_known = st == GCOMP_OK && c.nonfinite_counted;
  call->nonfinite_share = c.nonfinite_share;
  return ran(comm, call, &c, st);
}

/* A shaped call whose own arguments this rank refused still takes its part in the round
 * that compares the shapes, with nothing to send (root 0, any valid one): the others learn
 * of the refusal there. This rank's own message stands. */
static int refused_round(gcomp_comm *comm, gcomp_call *call, int local) {
  char why[1024];
  snprintf(why, sizeof why, "%s", gcomp_last_error());
  const gcomp_algo *algo = gcomp_call_self_agreeing(comm, call);
  call->plan = comm->model;
  gcomp_coll c = coll_of(comm, comm->seq, GCOMP_INT32, GCOMP_SUM, &call->plan, &call->acc,
                         comm->agreed.seg_bytes);
  c.shaped = 1, c.shape = call->shape;
  static uint8_t none[1];
  int st = algo->run(&c, none, 0);
  if (st < 0 && c.shape_who < 0) return ran(comm, call, &c, st);   /* the round itself failed */
  return gcomp_error_restore(local, why);
}

/* ---- stages --------------------------------------------------------------------------- */
static int stage_average(gcomp_comm *comm, gcomp_call *call) {
  if (call->op != GCOMP_AVG) return GCOMP_OK;
  void *buf = call->work + call->res_off * gcomp_dtype_size(call->wt);
  size_t count = call->res_len;
  int n = comm->t->size;
  switch (call->wt) {
  case GCOMP_FLOAT32: gcomp_scale_f32(buf, count, (float)n); break;
  case GCOMP_FLOAT64: { double *x = buf; for (size_t i = 0; i < count; i++) x[i] /= n; break; }
  case GCOMP_INT32: { int32_t *x = buf; for (size_t i = 0; i < count; i++) x[i] /= n; break; }
  case GCOMP_INT64: { int64_t *x = buf; for (size_t i = 0; i < count; i++) x[i] /= n; break; }
  default: break;
  }
  return GCOMP_OK;
}

/* The part of work this rank counts: an allreduce's own chunk, another call's whole result */
static void share(const gcomp_comm *comm, const gcomp_call *call, size_t *off, size_t *len) {
  *off = call->res_off, *len = call->res_len;
  if (call->kind == GCOMP_COLL_ALLREDUCE)
    gcomp_chunk(call->count, comm->t->size, comm->t->rank, off, len);
}

/* Each rank counts its own share of the result (summed over ranks: every NaN and Inf once),
 * so counting costs 1/n of a pass, not a whole one; none when the algorithm counted it as
 * it wrote it (hier-direct's pipeline). Averaging changes no count (x / n is finite for a
 * finite x, and n is at most 2^31). */
static int stage_nonfinite(gcomp_comm *comm, gcomp_call *call) {
  if (call->wt != GCOMP_FLOAT32) return GCOMP_OK;
  if (call->nonfinite_known) {
    call->acc.nonfinite += call->nonfinite_share;
    return GCOMP_OK;
  }
  size_t off, len;
  share(comm, call, &off, &len);
  const float *x = (const float *)(void *)call->work + off;
  if (len > 4) {
    call->acc.nonfinite += gcomp_count_nonfinite_f32(x, len);
    return GCOMP_OK;
  }
  /* a few values: by their exponent bits here, not through the kernel's dispatch */
  for (size_t i = 0; i < len; i++) {
    uint32_t b;
    memcpy(&b, x + i, sizeof b);
    call->acc.nonfinite += (b & 0x7f800000u) == 0x7f800000u;
  }
  return GCOMP_OK;
}

/* The guard has work only on a communicator with GCOMP_GUARD set (guard.c: its hooks return
 * at once otherwise, and after_run finds no key when before_run did not run) */
static int guard_wants(const gcomp_comm *comm, const gcomp_call *call) {
  (void)call;
  return comm->agreed.guard.every != 0;
}
static int average_wants(const gcomp_comm *comm, const gcomp_call *call) {
  (void)comm;
  return call->op == GCOMP_AVG;
}
static int nonfinite_wants(const gcomp_comm *comm, const gcomp_call *call) {
  (void)comm;
  return call->wt == GCOMP_FLOAT32;
}

typedef struct {
  const char *name;
  int (*before_run)(gcomp_comm *comm, gcomp_call *call);   /* NULL: nothing before */
  int (*after_run)(gcomp_comm *comm, gcomp_call *call);    /* NULL: nothing after */
  unsigned kinds;                                          /* 1 << kind it serves */
  /* whether it has anything to do with this planned call (NULL: every call it serves);
   * asked once a call, before either hook: walking the table and calling hooks that
   * returned at once was 230 instructions of an 8 B allreduce's 1,555 */
  int (*wants)(const gcomp_comm *comm, const gcomp_call *call);
} call_stage;

enum { REDUCING = 1u << GCOMP_COLL_ALLREDUCE | 1u << GCOMP_COLL_REDUCE_SCATTER };
static const call_stage stages[] = {
    /* guard.c: on the sum, before "average" */
    {"guard", gcomp_guard_before, gcomp_guard_after, 1u << GCOMP_COLL_ALLREDUCE, guard_wants},
    {"average", NULL, stage_average, REDUCING, average_wants},
    {"nonfinite", NULL, stage_nonfinite, REDUCING, nonfinite_wants},
};
enum { NSTAGES = sizeof stages / sizeof *stages };

/* The stages this call runs, a bit each in table order: those with a before_run hook in
 * before, those with an after_run hook in after */
static void stages_wanted(const gcomp_comm *comm, const gcomp_call *call, unsigned *before,
                          unsigned *after) {
  *before = *after = 0;
#pragma GCC unroll 8   /* the table is constant: unrolled, the wants calls are direct */
  for (int i = 0; i < NSTAGES; i++)
    if (stages[i].kinds & 1u << call->kind && (!stages[i].wants || stages[i].wants(comm, call))) {
      if (stages[i].before_run) *before |= 1u << i;
      if (stages[i].after_run) *after |= 1u << i;
    }
}

static int run_stages(gcomp_comm *comm, gcomp_call *call, unsigned mask, int after) {
  for (; mask; mask &= mask - 1) {
    const call_stage *sg = &stages[__builtin_ctz(mask)];
    int st = after ? sg->after_run(comm, call) : sg->before_run(comm, call);
    if (st < 0) return gcomp_comm_mark_broken(comm, st);
  }
  return GCOMP_OK;
}

/* ---- finish --------------------------------------------------------------------------- */
/* The result into recvbuf: copied, or the fp32 result back to the caller's 16-bit type.
 * Each rank counts the overflows of its own share (as stage_nonfinite): the sum over ranks
 * counts every value once. */
static void narrow(gcomp_comm *comm, gcomp_call *call) {
  /* a shaped call of no elements (call_coll.c) gets here; its buffers may be NULL */
  if (call->work == call->recvbuf || !call->res_len) return;
  size_t res = call->res_off, end = res + call->res_len;
  if (call->wt == call->dtype) {
    size_t es = gcomp_dtype_size(call->dtype);
    memcpy(call->recvbuf, call->work + res * es, call->res_len * es);
    return;
  }
  const gcomp_cast_kernels *K = gcomp_cast_kernels_get();
  size_t off, len;
  share(comm, call, &off, &len);
  const size_t from[3] = {res, off, off + len}, to[3] = {off, off + len, end};
  const float *w = (const float *)(void *)call->work;
  uint8_t *out = call->recvbuf;   /* element res of work is the output's first */
  for (int i = 0; i < 3; i++) {
    gcomp_cast_counts counts = {0, 0, 0};
    size_t n = to[i] - from[i];
    if (!n) continue;
    if (call->dtype == GCOMP_BFLOAT16) K->bf16_enc(w + from[i], n, out + 2 * (from[i] - res), &counts);
    else K->f16_enc(w + from[i], n, out + 2 * (from[i] - res), 1.0f, &counts);
    if (i == 1) call->acc.overflows += counts.overflow;
  }
}

static int call_body(gcomp_comm *comm, gcomp_call *call) {
  /* after a collective failed part-way the ranks no longer agree on which messages belong
   * to which call: fail at once, as NCCL does with an aborted communicator, instead of
   * waiting out another timeout per call (empty calls too: "every later call") */
  GCOMP_FAIL_IF(comm->broken, GCOMP_ERR_PEER,
                "communicator unusable since an earlier allreduce failed: %s", comm->broken_why);
  if (gcomp_call_self_agreeing(comm, call)) {   /* the shape is compared in the call's round */
    int local = gcomp_call_shape_own(comm, call);
    if (local < 0) return refused_round(comm, call, local);
  } else if (call->kind != GCOMP_COLL_ALLREDUCE) {
    GCOMP_CHECK(gcomp_call_agree(comm, call));
  }
  if (call->count == 0 && !call->shaped) return GCOMP_OK;
  GCOMP_CHECK(widen(comm, call));
  if (call->kind == GCOMP_COLL_ALLREDUCE) gcomp_guard_route(comm, call);
  GCOMP_CHECK(plan(comm, call));
  unsigned before, after;
  stages_wanted(comm, call, &before, &after);
  if (before) GCOMP_CHECK(run_stages(comm, call, before, 0));
  GCOMP_CHECK(run(comm, call));
  if (after) GCOMP_CHECK(run_stages(comm, call, after, 1));
  narrow(comm, call);
  call->completed = 1;
  return GCOMP_OK;
}

/* Every call, finished or failed, goes to every observer (the first failure of an observer
 * is the call's status when the call itself succeeded: a straggler exchange's). Stats,
 * trace and step write what other threads read under comm->mu (gcomp_comm_get_stats,
 * gcomp_comm_mark_step): they run under one hold of it (one each was three pairs of locked
 * instructions a call); skew's exchange is a call of its own and runs outside it. */
typedef int (*call_observer)(gcomp_comm *comm, gcomp_call *call);
static const call_observer locked_observers[] = {gcomp_stats_observe, gcomp_trace_observe,
                                                 gcomp_step_observe_locked};
static const call_observer observers[] = {gcomp_skew_observe};

int gcomp_call_run(gcomp_comm *comm, gcomp_call *call) {
  /* codec per link level: on one node every link is intra-node; allgathers (weights) only
   * with a codec of their own */
  int reducing = call->kind == GCOMP_COLL_ALLREDUCE || call->kind == GCOMP_COLL_REDUCE_SCATTER;
  if (!call->codec && reducing)
    call->codec = comm->t->nnodes == 1 ? comm->agreed.intra_codec : comm->agreed.default_codec;
  if (!call->codec && call->kind == GCOMP_COLL_ALLGATHER) call->codec = comm->agreed.allgather_codec;
  int blocks = call->kind == GCOMP_COLL_REDUCE_SCATTER || call->kind == GCOMP_COLL_ALLGATHER ||
               call->kind == GCOMP_COLL_ALLTOALL;
  call->total = blocks && call->count <= SIZE_MAX / 8 / (size_t)comm->t->size
                    ? call->count * (size_t)comm->t->size : call->count;
  call->bytes = call->total * gcomp_dtype_size(call->dtype);
  call->trace_at = SIZE_MAX;
  call->start_ns = gcomp_now_ns();
  if (!call->arrive_ns) call->arrive_ns = call->start_ns;
  next_seq(comm);
  /* aborted (gcomp_comm_abort, any thread): this call and every later one, told peers once */
  int st = gcomp_abort_call_begins(comm->abort) ? gcomp_abort_here(comm->abort)
                                                : call_body(comm, call);
  call->end_ns = gcomp_now_ns();
  call->status = st;
  pthread_mutex_lock(&comm->mu);
#pragma GCC unroll 8   /* constant tables: unrolled, the observers are called directly */
  for (size_t i = 0; i < sizeof locked_observers / sizeof *locked_observers; i++) {
    int ost = locked_observers[i](comm, call);
    if (ost < 0 && st == GCOMP_OK) st = ost;
  }
  pthread_mutex_unlock(&comm->mu);
#pragma GCC unroll 8
  for (size_t i = 0; i < sizeof observers / sizeof *observers; i++) {
    int ost = observers[i](comm, call);
    if (ost < 0 && st == GCOMP_OK) st = ost;
  }
  return st;
}

int gcomp_call_exchange_max(gcomp_comm *comm, int64_t *v, size_t n) {
  gcomp_plan_in in = comm->model;
  in.bytes = n * sizeof *v;
  const gcomp_algo *algo = gcomp_plan_pick(&in, comm->agreed.forced);
  gcomp_comm_stats scratch = {0};   /* not the call's figures */
  gcomp_coll c = coll_of(comm, comm->seq, GCOMP_INT64, GCOMP_MAX, &in, &scratch,
                         comm->agreed.seg_bytes);
  int st = algo->run(&c, (uint8_t *)v, n);
  next_seq(comm);   /* the call's own messages: other tags than the exchange's */
  if (st < 0) st = gcomp_abort_failed(comm->abort, c.seq, st);
  if (st < 0) st = gcomp_abort_blame(comm->t, c.seq, st);
  return st < 0 ? gcomp_comm_mark_broken(comm, st) : GCOMP_OK;
}

/* ---- the communicator's own ----------------------------------------------------------- */
int gcomp_call_internal(gcomp_comm *comm, void *buf, size_t count, gcomp_dtype dtype,
                        gcomp_op op, const gcomp_algo *algo, uint32_t seq) {
  GCOMP_FAIL_IF(comm->broken, GCOMP_ERR_PEER,
                "communicator unusable since an earlier allreduce failed: %s", comm->broken_why);
  if (!seq) seq = next_seq(comm);
  gcomp_plan_in in = comm->model;
  in.bytes = count * gcomp_dtype_size(dtype);
  /* creation's exchanges (a fixed algorithm) run before the segment size is agreed */
  size_t seg = algo ? (size_t)1 << 20 : comm->agreed.seg_bytes;
  if (!algo) algo = gcomp_plan_pick(&in, comm->agreed.forced);
  gcomp_comm_stats scratch = {0};   /* the caller's figures stay the caller's */
  gcomp_coll c = coll_of(comm, seq, dtype, op, &in, &scratch, seg);
  int st = algo->run(&c, buf, count);
  return st < 0 ? gcomp_comm_mark_broken(comm, st) : GCOMP_OK;
}
