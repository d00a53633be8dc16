/* The collectives other than allreduce as calls of the one pipeline (call.c): what each
 * rank checks of its own arguments, the agreement on the call's shape that makes a
 * disagreement an error on every rank (never a hang, never a wrong result), and the working
 * vector each kind hands its algorithm (coll.h: gcomp_coll_kind).
 *
 * Allreduce relies on message lengths to notice ranks that disagree; the other collectives
 * cannot: a broadcast from two different roots, or an allgather whose blocks differ in
 * length on one rank only, would hang or leave some ranks with the wrong bytes. So each
 * call first exchanges its shape (one small MAX allreduce of every value and its negation,
 * as agree.c does for the settings). The exchange is a barrier too: gcomp_barrier is just
 * this, and its algorithm does nothing more. On one node the shape is compared in the call's
 * own first round instead (below: gcomp_call_self_agreeing). */
#include <stdint.h>
#include <string.h>

#include "codec_impl.h"
#include "comm_impl.h"

static const char *fn_name(int kind) {
  static const char *const names[GCOMP_COLL_KINDS] = {
      "gcomp_allreduce", "gcomp_reduce_scatter", "gcomp_allgather", "gcomp_broadcast",
      "gcomp_barrier", "gcomp_alltoall"};
  return kind >= 0 && kind < GCOMP_COLL_KINDS ? names[kind] : "an unknown collective";
}

/* This rank's own arguments, as gcomp_call_check_args checks an allreduce's */
static int check_local(const gcomp_comm *comm, const gcomp_call *call) {
  const char *fn = fn_name(call->kind);
  int n = comm->t->size;
  if (call->kind == GCOMP_COLL_BARRIER) return GCOMP_OK;
  GCOMP_FAIL_IF(!gcomp_dtype_size(call->dtype), GCOMP_ERR_INVALID, "%s: unknown dtype %d", fn,
                (int)call->dtype);
  GCOMP_FAIL_IF((unsigned)call->op > GCOMP_PROD, GCOMP_ERR_INVALID, "%s: unknown op %d", fn,
                (int)call->op);
  GCOMP_FAIL_IF(call->count > SIZE_MAX / 8 / (size_t)n, GCOMP_ERR_INVALID,
                "%s: count %zu too large for %d ranks", fn, call->count, n);
  int bcast = call->kind == GCOMP_COLL_BROADCAST;
  GCOMP_FAIL_IF(bcast && (call->root < 0 || call->root >= n), GCOMP_ERR_INVALID,
                "%s: root %d is not a rank of this communicator (size %d)", fn, call->root, n);
  GCOMP_FAIL_IF(call->count && (!call->recvbuf || (!bcast && !call->sendbuf)),
                GCOMP_ERR_INVALID, "%s: NULL buffer for %zu elements", fn, call->count);
  return GCOMP_OK;
}

enum { V_KIND, V_COUNT, V_DTYPE, V_OP, V_ROOT, V_CODEC, NV };
static const char *const what[NV] = {"collective", "count", "dtype", "op", "root", "codec"};

int gcomp_call_agree(gcomp_comm *comm, gcomp_call *call) {
  int local = check_local(comm, call);
  int64_t v[NV] = {call->kind, 0, 0, 0, 0, 0};
  if (local == GCOMP_OK && call->kind != GCOMP_COLL_BARRIER) {
    v[V_COUNT] = (int64_t)call->count, v[V_DTYPE] = call->dtype;
    v[V_OP] = call->kind == GCOMP_COLL_REDUCE_SCATTER ? call->op : 0;
    v[V_ROOT] = call->kind == GCOMP_COLL_BROADCAST ? call->root : 0;
    /* ranks with different codecs would plan different algorithms */
    if (call->codec && call->count)
      v[V_CODEC] = (int64_t)gcomp_codec_wire_hash(call->codec);
  }
  if (comm->t->size > 1) {
    int64_t w[2 * NV + 1];
    for (int i = 0; i < NV; i++) w[i] = v[i], w[NV + i] = -v[i];
    w[2 * NV] = local < 0;   /* some rank refused its own arguments */
    GCOMP_CHECK(gcomp_call_exchange_max(comm, w, 2 * NV + 1));
    if (local < 0) return local;   /* this rank's own message stands */
    GCOMP_FAIL_IF(w[2 * NV], GCOMP_ERR_INVALID,
                  "%s: another rank's arguments were refused (its error names them)",
                  fn_name(call->kind));
    for (int i = 0; i < NV; i++)
      GCOMP_FAIL_IF(w[i] != -w[NV + i], GCOMP_ERR_INVALID,
                    "%s: the ranks disagree on the %s (from %lld to %lld; this rank %lld): "
                    "every rank must make the same call", fn_name(call->kind), what[i],
                    (long long)-w[NV + i], (long long)w[i], (long long)v[i]);
  }
  return local;
}

/* ---- a call that agrees in its own round ------------------------------------------------ */
/* On one node with a segment, every collective but allreduce has an algorithm of the
 * segment's rounds (bcast_shm.c, shm.c's reduce-scatter, allgather and all-to-all,
 * barrier_shm.c), and a round's hot line carries a word of the call's shape beside its flag
 * anyway (shm_seg.h): comparing the shape there instead of in an exchange before saves a
 * round of the node's ranks a call, half of a 1 MiB broadcast's and of a 16 B all-to-all's.
 * Every rank sees every rank's word in that round, so a difference fails it on every rank
 * alike, and the communicator stays usable as after a refused agreement; a rank that refused
 * its own arguments takes part with nothing to send and a word saying so. Whether a call
 * does this depends on the communicator alone: every rank takes the same path. Such a call
 * runs the segment's algorithm, uncompressed (a codec passed with it is compared, not used; a
 * communicator whose GCOMP_INTRA_CODEC or GCOMP_ALLGATHER_CODEC applies to the kind keeps the
 * agreement and the planner's choice), as the planner picks on one node anyway. */
extern const gcomp_algo gcomp_algo_bcast_shm, gcomp_algo_rs_shm, gcomp_algo_ag_shm,
    gcomp_algo_barrier_shm, gcomp_algo_alltoall_shm;

/* The shape word: count (38 bits), root or op and codec (16), kind (3), dtype (3), then 0; a
 * refused call's is 1 (its fields say nothing). Below 2^61, as gcomp_shm_shaped_parts takes it. */
enum { SHAPE_COUNT_BITS = 38, SHAPE_FIELD_BITS = 16, SHAPE_COUNT_AT = 23, SHAPE_FIELD_AT = 7,
       SHAPE_KIND_AT = 4 };
#define SHAPE_REFUSED 1u

const gcomp_algo *gcomp_call_self_agreeing(const gcomp_comm *comm, const gcomp_call *call) {
  static const gcomp_algo *const shm_of[GCOMP_COLL_KINDS] = {
      [GCOMP_COLL_REDUCE_SCATTER] = &gcomp_algo_rs_shm, [GCOMP_COLL_ALLGATHER] = &gcomp_algo_ag_shm,
      [GCOMP_COLL_BROADCAST] = &gcomp_algo_bcast_shm, [GCOMP_COLL_BARRIER] = &gcomp_algo_barrier_shm,
      [GCOMP_COLL_ALLTOALL] = &gcomp_algo_alltoall_shm};
  const gcomp_algo *shm = shm_of[call->kind], *forced = comm->agreed.forced_coll[call->kind];
  if (!shm || !comm->shm || comm->t->nnodes != 1 || comm->t->size > 1 << SHAPE_FIELD_BITS ||
      (forced && forced != shm))
    return NULL;
  if ((call->kind == GCOMP_COLL_REDUCE_SCATTER && comm->agreed.intra_codec) ||
      (call->kind == GCOMP_COLL_ALLGATHER && comm->agreed.allgather_codec))
    return NULL;   /* a codec of the communicator's may make another algorithm faster */
  return shm->cost(&comm->model) >= 0 ? shm : NULL;   /* the planner could run it */
}

static int too_many(const gcomp_call *call) {
  GCOMP_FAIL(GCOMP_ERR_INVALID, "%s: count %zu: a collective inside one node takes fewer than "
             "2^%d elements", fn_name(call->kind), call->count, (int)SHAPE_COUNT_BITS);
}

/* A codec passed with a reduce-scatter or allgather is not used on one node, but ranks passing
 * different ones still disagree on a setting: its wire identity in 13 bits (0: none), beside a
 * reduce-scatter's op (3 bits). Two codecs of one tag pass unnamed, harmlessly: neither runs. */
enum { SHAPE_OP_BITS = 3, SHAPE_TAG_MOD = (1 << (SHAPE_FIELD_BITS - SHAPE_OP_BITS)) - 1 };

static uint64_t codec_tag(const gcomp_call *call) {
  if (!call->codec || !call->count) return 0;
  return 1 + gcomp_codec_wire_id(call->codec) % SHAPE_TAG_MOD;
}

int gcomp_call_shape_own(const gcomp_comm *comm, gcomp_call *call) {
  int local = check_local(comm, call);
  if (local == GCOMP_OK && call->count >> SHAPE_COUNT_BITS) local = too_many(call);
  /* the field: a broadcast's root; a reduce-scatter's op and an allgather's 0, each with the
   * codec's tag above; the others' dtype and count */
  uint64_t field = call->kind == GCOMP_COLL_BROADCAST        ? (uint64_t)call->root
                   : call->kind == GCOMP_COLL_REDUCE_SCATTER ? (uint64_t)call->op
                                                             : 0;
  if (call->kind == GCOMP_COLL_REDUCE_SCATTER || call->kind == GCOMP_COLL_ALLGATHER)
    field |= codec_tag(call) << SHAPE_OP_BITS;
  uint64_t count = call->kind == GCOMP_COLL_BARRIER ? 0 : call->count;
  uint64_t dtype = call->kind == GCOMP_COLL_BARRIER ? 0 : (uint64_t)call->dtype;
  call->shaped = 1;
  call->shape = local < 0 ? SHAPE_REFUSED
                          : count << SHAPE_COUNT_AT | field << SHAPE_FIELD_AT |
                                (uint64_t)call->kind << SHAPE_KIND_AT | dtype << 1;
  return local;
}

int gcomp_call_shape_refused(const gcomp_comm *comm, const gcomp_call *call, int who,
                             uint64_t theirs) {
  const char *fn = fn_name(call->kind);
  int rank = who >= 0 && who < comm->t->local_size ? comm->t->local_ranks[who] : -1;
  GCOMP_FAIL_IF(theirs == SHAPE_REFUSED, GCOMP_ERR_INVALID,
                "%s: rank %d's arguments were refused (its error names them)", fn, rank);
  const uint64_t mine = call->shape;
  int64_t v[4][2];   /* kind, count, dtype, root or op: this rank's, then theirs */
  for (int k = 0; k < 2; k++) {
    uint64_t w = k ? theirs : mine;
    v[0][k] = (int64_t)(w >> SHAPE_KIND_AT & 7);
    v[1][k] = (int64_t)(w >> SHAPE_COUNT_AT);
    v[2][k] = (int64_t)(w >> 1 & 7);
    v[3][k] = (int64_t)(w >> SHAPE_FIELD_AT & ((1u << SHAPE_FIELD_BITS) - 1));
  }
  GCOMP_FAIL_IF(v[0][0] != v[0][1], GCOMP_ERR_INVALID,
                "%s: the ranks disagree on the collective (rank %d: %s; this rank %s): every "
                "rank must make the same call", fn, rank, fn_name((int)v[0][1]), fn);
  const char *names[5] = {"collective", "count", "dtype",
                          call->kind == GCOMP_COLL_BROADCAST ? "root" : "op", "codec"};
  int f = v[1][0] != v[1][1] ? 1 : v[2][0] != v[2][1] ? 2 : 3;
  if (f == 3 && call->kind != GCOMP_COLL_BROADCAST) {
    int64_t op[2] = {v[3][0] & 7, v[3][1] & 7};
    if (op[0] == op[1])
      GCOMP_FAIL(GCOMP_ERR_INVALID, "%s: the ranks disagree on the codec (rank %d: %s; this "
                 "rank %s): every rank must pass the same codec", fn, rank,
                 v[3][1] >> SHAPE_OP_BITS ? "a codec" : "none",
                 v[3][0] >> SHAPE_OP_BITS ? "another" : "none");
    v[3][0] = op[0], v[3][1] = op[1];
  }
  GCOMP_FAIL(GCOMP_ERR_INVALID,
             "%s: the ranks disagree on the %s (rank %d: %lld; this rank %lld): every rank must "
             "make the same call", fn, names[f], rank, (long long)v[f][1], (long long)v[f][0]);
}

/* Do [a, a + an) and [b, b + bn) share a byte? */
static int overlap(const void *a, size_t an, const void *b, size_t bn) {
  uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
  return an && bn && x < y + bn && y < x + an;
}

int gcomp_call_shape(gcomp_comm *comm, gcomp_call *call) {
  int me = comm->t->rank;
  size_t es = gcomp_dtype_size(call->dtype), block = call->count;
  call->wt = call->dtype;
  call->work = call->recvbuf;
  call->src = NULL;
  call->res_off = 0, call->res_len = call->total;
  int half = call->dtype == GCOMP_BFLOAT16 || call->dtype == GCOMP_FLOAT16;
  switch (call->kind) {
  case GCOMP_COLL_ALLREDUCE:
    if (half) call->wt = GCOMP_FLOAT32;
    if (call->sendbuf != call->recvbuf) call->src = call->sendbuf;
    break;
  case GCOMP_COLL_REDUCE_SCATTER:
    /* the whole vector is reduced in a buffer of the communicator's (the caller's holds one
     * block); the algorithms read the input from src (in place too: block `me` of the
     * input is read before the result is written over it) */
    call->res_off = (size_t)me * block, call->res_len = block;
    call->src = call->sendbuf;
    if (half) {
      call->wt = GCOMP_FLOAT32;   /* widen() makes the fp32 copy */
      break;
    }
    GCOMP_CHECK(gcomp_call_work(comm, call->total * es));
    call->work = comm->work;
    break;
  case GCOMP_COLL_ALLGATHER: {
    /* block `me` of recvbuf takes the input; the algorithms fill in the others */
    uint8_t *mine = (uint8_t *)call->recvbuf + (size_t)me * block * es;
    if (call->sendbuf != mine) memmove(mine, call->sendbuf, block * es);
    break;
  }
  case GCOMP_COLL_ALLTOALL:
    call->src = call->sendbuf;
    if (overlap(call->sendbuf, call->total * es, call->recvbuf, call->total * es)) {
      GCOMP_CHECK(gcomp_call_work(comm, call->total * es));
      memcpy(comm->work, call->sendbuf, call->total * es);
      call->src = comm->work;
    }
    break;
  default: break;   /* broadcast: the buffer itself */
  }
  return GCOMP_OK;
}
