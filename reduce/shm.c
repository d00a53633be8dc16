/* Allreduce inside a node through one shared-memory segment, below libfabric.
 *
 * libfabric's shm provider costs two library calls, a locked queue and, for large messages,
 * a process_vm_readv per message; for the small and middle sizes of a single-node job that
 * is most of the time. Here the node's ranks share one mapping made at
 * communicator creation (POSIX shm, unlinked as soon as everyone has it open), and a call is
 * a few plain copies and flag stores:
 *
 *   one-shot (small): copy my input into my slot, publish; wait for all; every rank sums all
 *     slots in rank order into its output. One synchronisation.
 *   two-phase (larger, in rounds of at most one slot): copy in, publish; wait; reduce my
 *     shard of every slot (rank order) into my output and into my own slot, publish; wait;
 *     copy the other ranks' reduced shards out. Each element is summed by one rank, so all
 *     ranks get the same bits.
 *
 * A call of at most GCOMP_SHM_HOT_DATA bytes skips the slots: its operand goes into the
 * rank's hot line for the round, beside the flag that publishes it (shm_seg.h), and a peer
 * fetches both in one transfer of that line; with a second line (the slot) read after the
 * flag, every call waited for two transfers one after the other.
 *
 * Slots and hot lines are double-buffered by the parity of a per-segment round counter. A rank writes a
 * slot of round r only after it has seen every rank publish round r - 1, and a rank
 * publishes r - 1 only after it finished reading round r - 2, the last user of that slot:
 * no barrier beyond the flags is ever needed. Each parity has its flag, in its hot line;
 * flags only grow: round r publishes 2r + 1 ("my input is in") and, two-phase, 2r + 2 ("my
 * reduced shard is in").
 *
 * A rank that dies leaves its flag still; waiters notice its pid is gone (GCOMP_ERR_PEER)
 * or give up after GCOMP_TIMEOUT_MS (GCOMP_ERR_TIMEOUT). After a failure the segment's
 * state is unknown and every later call on it fails at once. */
#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "abort.h"
#include "coll.h"
#include "procs.h"
#include "shm_seg.h"

enum { ONE_SHOT_MAX = 8192 };
_Static_assert(sizeof(gcomp_shm_hot) == 64, "a hot line is one cache line");
_Static_assert(sizeof(gcomp_shm_ctl) == 256, "a rank's control block is 256 bytes");

static uint8_t *slot_at(const gcomp_shm *s, uint64_t round, int rank) {
  return s->data + ((size_t)(round & 1) * (size_t)s->L + (size_t)rank) * s->stride;
}

/* Rank i's hot line for the round that publishes v (2r + 1 or 2r + 2) */
static gcomp_shm_hot *hot_of(const gcomp_shm *s, int i, uint64_t v) {
  return &s->ctl[i].hot[((v - 1) / 2) & 1];
}

static size_t round_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

/* ---- synchronisation ------------------------------------------------------------------ */
/* Only a pipeline's waiters sleep (c->drive, wait_all_seen), and every local rank runs a
 * round with the same c->drive (the same call, the same algorithm): other rounds publish
 * with a release store alone. A sequentially consistent store waits for this core to own
 * the flag's line, which the waiting peer holds: at 2 ranks that stall, and the fence and
 * the bell's locked add after it, were on every call's critical path. Were a peer to sleep
 * on such a round anyway (ranks in different calls), it wakes at the end of its nap.
 * A pipeline's rounds: flag store, bell, sleepers check, all sequentially consistent, so a
 * waiter that counted itself in sleepers before checking the flag is either seen here or
 * sees the flag. */
static void publish(const gcomp_coll *c, gcomp_shm *s, uint64_t v) {
  gcomp_shm_ctl *me = &s->ctl[s->me];
  gcomp_shm_hot *h = hot_of(s, s->me, v);
  if (!c->drive) {
    atomic_store_explicit(&h->flag, v, memory_order_release);
    return;
  }
  atomic_store(&h->flag, v);
  atomic_fetch_add(&me->bell, 1);
  if (atomic_load(&me->sleepers))
    (void)syscall(SYS_futex, &me->bell, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

/* A pipeline's waiter (c->drive: transfers in flight) spins and yields (gcomp_idle) for
 * SPIN_NS, then sleeps on the peer's bell, NAP_NS at most so that the link's socket
 * buffers keep moving (at 1 Gbit/s 200 us is 25 KB): with more ranks than cores, spinning
 * took the core from the local rank it waited for, and its progress calls were syscalls.
 * Other waits keep gcomp_idle's spins, yields and naps: with the futex a 4-rank 8 B call was
 * 3x slower on an idle machine (a futex wake is a syscall each way), measured while the
 * loop also read the clock at every spin (itself 3.8 -> 9 us, fixed in 6ed29d4): the futex
 * alone not re-measured. */
enum { SPIN_NS = 50000, NAP_NS = 200000 };
/* A silent peer's pid is looked up this often, as the transport does (LIVENESS_NS): at one
 * read of /proc/<pid>/stat a millisecond per waiter, a 2-node sign+ef job read it about 23
 * times a call (strace); a dead peer is still named within 0.1 s. */
#define LIVE_NS 100000000ull

/* Sleeps until ctl's bell moves (the flag of h, its hot line for v, may have reached v) or
 * the nap ends. */
static void sleep_on(gcomp_shm_ctl *ctl, gcomp_shm_hot *h, uint64_t v, long nap_ns) {
  uint32_t b = atomic_load(&ctl->bell);
  atomic_fetch_add(&ctl->sleepers, 1);
  if (atomic_load(&h->flag) < v) {
    struct timespec ts = {0, nap_ns};
    (void)syscall(SYS_futex, &ctl->bell, FUTEX_WAIT, b, &ts, NULL, 0);
  }
  atomic_fetch_sub(&ctl->sleepers, 1);
}

/* Waits until every other local rank's flag reaches v. With seen != NULL (a call's first
 * round) it also returns each rank's call shape for the round's parity in seen[], read the
 * moment its flag is seen, from the same hot line. */
static int wait_all_seen(gcomp_coll *c, gcomp_shm *s, uint64_t v, uint64_t *seen);

static int wait_all(gcomp_coll *c, gcomp_shm *s, uint64_t v) {
  return wait_all_seen(c, s, v, NULL);
}

static int wait_all_seen(gcomp_coll *c, gcomp_shm *s, uint64_t v, uint64_t *seen) {
  uint64_t start = 0, last_check = 0, last_live = 0;
  unsigned spins = 0;
  for (int i = 0; i < s->L; i++) {
    if (i == s->me) continue;
    gcomp_shm_hot *h = hot_of(s, i, v);
    while (atomic_load_explicit(&h->flag, memory_order_acquire) < v) {
      if (!start) start = gcomp_now_ns(), last_check = last_live = start;
      /* a pipeline's transfers move on (their failures surface in their requests) */
      if (c->drive) (void)gcomp_progress(c->t);
      /* the clock is read every 64th spin only, as before the futex: reading it at every
       * spin made a 4-rank 8 B call 3.8 -> 9 us */
      if (!c->drive || gcomp_now_ns() - start < SPIN_NS) {
        gcomp_idle(&spins);
        if ((spins & 63u) != 0) continue;
      } else {
        sleep_on(&s->ctl[i], h, v, NAP_NS);
      }
      uint64_t now = gcomp_now_ns();
      int ast = c->abort ? gcomp_abort_poll(c->abort) : GCOMP_OK;   /* abort.h */
      if (ast < 0) {
        s->broken = 1;
        return gcomp_error_trace(ast, __FILE__, __LINE__);
      }
      if (now - last_check < 1000000u) continue;
      last_check = now;
      /* a dead rank is noticed by its pid, when it lives in our pid namespace (ranks in
       * separate containers that share /dev/shm only time out) */
      int32_t pid = s->ctl[i].pid;
      uint64_t ns = s->ctl[s->me].pidns;
      int look = now - last_live >= LIVE_NS;
      if (look) last_live = now;
      if (look && pid > 0 && ns && s->ctl[i].pidns == ns && gcomp_pid_gone(pid)) {
        s->broken = 1;
        c->t->failed_peer = c->t->local_ranks[i];
        GCOMP_FAIL_IF(1, GCOMP_ERR_PEER, "shm allreduce: local rank %d (rank %d, pid %d) died",
                      i, c->t->local_ranks[i], (int)pid);
      }
      if (now - start > (uint64_t)s->timeout_ms * 1000000u) {
        s->broken = 1;
        c->t->failed_peer = c->t->local_ranks[i];
        GCOMP_FAIL_IF(1, GCOMP_ERR_TIMEOUT,
                      "shm allreduce: local rank %d (rank %d) silent for %d ms (stalled, or in "
                      "another call: do all ranks make the same calls with the same counts?)", i,
                      c->t->local_ranks[i], s->timeout_ms);
      }
    }
    if (seen) seen[i] = h->desc;
  }
  if (start) c->stats->wait_s += (double)(gcomp_now_ns() - start) * 1e-9;
  return GCOMP_OK;
}

/* dst = slot_0 op slot_1 op ... op slot_{L-1} over [off, off + n) elements, in rank order;
 * with own != NULL this rank's operand is own instead of its slot (which then need not
 * hold it). own may be dst only when this rank is local rank 0 (dst then starts as it). */
static void reduce_slots(gcomp_coll *c, gcomp_shm *s, uint64_t round, size_t off, size_t n,
                         uint8_t *dst, const uint8_t *own) {
  size_t es = c->esize, b = off * es;
  const uint8_t *src[2] = {slot_at(s, round, 0) + b, slot_at(s, round, 1) + b};
  if (own && s->me < 2) src[s->me] = own;
  if (own == dst) {   /* in place, local rank 0: dst holds operand 0 already */
    c->reduce(dst, src[1], n);
  } else if (c->reduce3) {
    c->reduce3(dst, src[0], src[1], n);
  } else {
    memcpy(dst, src[0], n * es);
    c->reduce(dst, src[1], n);
  }
  for (int i = 2; i < s->L; i++)
    c->reduce(dst, own && i == s->me ? own : slot_at(s, round, i) + b, n);
}

/* dst = hot_0 op hot_1 op ... op hot_{L-1} over n elements, in rank order: every rank's
 * operand in its hot line of the round (dst, the caller's buffer, is none of them) */
static void reduce_hot(gcomp_coll *c, gcomp_shm *s, uint64_t round, size_t n, uint8_t *dst) {
  const uint8_t *a = s->ctl[0].hot[round & 1].data, *b = s->ctl[1].hot[round & 1].data;
  if (c->reduce3) {
    c->reduce3(dst, a, b, n);
  } else {
    memcpy(dst, a, n * c->esize);
    c->reduce(dst, b, n);
  }
  for (int i = 2; i < s->L; i++) c->reduce(dst, s->ctl[i].hot[round & 1].data, n);
}

/* ---- the allreduce -------------------------------------------------------------------- */
/* The node's half of a hierarchical call: the vector is cut into one shard per local rank
 * (the gcomp_chunk partition); each round moves one piece of every shard. */
static size_t piece_elems(const gcomp_coll *c, const gcomp_shm *s) {
  return s->slot / c->esize / (size_t)s->L;   /* >= 1: gcomp_shm_create sizes the slot */
}

/* Elements of round k's piece (P elements per round) of a shard of len elements. */
static size_t piece_len(size_t len, size_t k, size_t P) {
  return len > k * P ? (len - k * P < P ? len - k * P : P) : 0;
}

/* Every rank of a call must pass the same count and element size; a rank that does not (a
 * user error) would otherwise read another shape's bytes and return garbage. Each rank
 * writes its call's shape into its control line before the first round's flag, which
 * publishes it; one shape per round parity, protected from reuse like the slots. */
enum { CALL_PARTS = 0, CALL_ALLREDUCE = 1, CALL_REDUCE_SCATTER = 2, CALL_ALLGATHER = 3,
       CALL_ALLTOALL = 4, CALL_SHAPED = 5 };
static uint64_t call_desc(int kind, size_t count, size_t es) {
  return (uint64_t)count << 9 | (uint64_t)es << 3 | (uint64_t)kind;
}
/* a caller's own shape word (gcomp_shm_shaped_parts), below 2^61 */
static uint64_t shaped_desc(uint64_t shape) { return shape << 3 | CALL_SHAPED; }
static const char *kind_name(uint64_t d) {
  return (d & 7) == CALL_ALLREDUCE        ? "allreduce"
         : (d & 7) == CALL_REDUCE_SCATTER ? "reduce-scatter"
         : (d & 7) == CALL_ALLGATHER      ? "allgather"
         : (d & 7) == CALL_ALLTOALL       ? "alltoall"
         : (d & 7) == CALL_SHAPED         ? "a collective other than allreduce"
                                          : "an allgather of frames";
}
static void post_desc(gcomp_shm *s, uint64_t round, uint64_t desc) {
  /* written only when it changes: in a loop of same-shaped calls the control line then sees
   * no store but the flag's, and a peer spinning on the flag is not disturbed twice */
  gcomp_shm_hot *h = &s->ctl[s->me].hot[round & 1];
  if (h->desc != desc) h->desc = desc;
}
/* Waits for the call's first round like wait_all, then compares the shapes seen. A
 * difference breaks the segment, except for a caller that asked for it (differ != NULL):
 * every rank sees every shape, so every rank then fails this round alike and the next
 * round finds them all in step; differ[0] is the first local rank whose shape differs,
 * differ[1] its shape, and the message is the caller's. */
static int wait_first_differ(gcomp_coll *c, gcomp_shm *s, uint64_t round, uint64_t mine,
                             uint64_t *differ) {
  uint64_t seen_stack[64], *seen = s->L <= 64 ? seen_stack : malloc((size_t)s->L * sizeof *seen);
  GCOMP_FAIL_IF(!seen, GCOMP_ERR_NOMEM, "shm: %d call shapes", s->L);
  int st = wait_all_seen(c, s, 2 * round + 1, seen);
  for (int i = 0; st == GCOMP_OK && i < s->L; i++) {
    uint64_t d = seen[i];
    if (i == s->me || d == mine) continue;
    if (seen != seen_stack) free(seen);
    if (differ && (d & 7) == CALL_SHAPED && (mine & 7) == CALL_SHAPED) {
      differ[0] = (uint64_t)i, differ[1] = d >> 3;
      return GCOMP_ERR_INVALID;
    }
    s->broken = 1;
    GCOMP_FAIL_IF((d & 7) == CALL_SHAPED || (mine & 7) == CALL_SHAPED, GCOMP_ERR_INVALID,
                  "shm: local rank %d called %s, this rank %s: every rank must make the same "
                  "calls", i, kind_name(d), kind_name(mine));
    GCOMP_FAIL(GCOMP_ERR_INVALID,
               "shm: local rank %d called %s with %llu elements of %llu bytes, this rank %s with "
               "%llu of %llu: every rank must pass the same count and dtype", i, kind_name(d),
               (unsigned long long)(d >> 9), (unsigned long long)((d >> 3) & 63), kind_name(mine),
               (unsigned long long)(mine >> 9), (unsigned long long)((mine >> 3) & 63));
  }
  if (seen != seen_stack) free(seen);
  return st;
}

static int wait_first(gcomp_coll *c, gcomp_shm *s, uint64_t round, uint64_t mine) {
  return wait_first_differ(c, s, round, mine, NULL);
}

/* A call's first round of kind: its shape word, the caller's when the call compares its own
 * shape here (c->shaped, call_coll.c), and the wait that compares the words. A shaped call
 * that met another shape fails with GCOMP_ERR_INVALID and says whose (c->shape_who, _theirs)
 * for the caller's message; the segment is intact. */
static uint64_t first_desc(const gcomp_coll *c, int kind, size_t count, size_t es) {
  return c->shaped ? shaped_desc(c->shape) : call_desc(kind, count, es);
}
static int wait_call(gcomp_coll *c, gcomp_shm *s, uint64_t round, uint64_t desc) {
  if (!c->shaped) return wait_first(c, s, round, desc);
  uint64_t differ[2] = {UINT64_MAX, 0};
  int st = wait_first_differ(c, s, round, desc, differ);
  if (differ[0] != UINT64_MAX) c->shape_who = (int)differ[0], c->shape_theirs = differ[1];
  return st;
}

static int check_usable(const gcomp_shm *s) {
  GCOMP_FAIL_IF(!s || s->broken, GCOMP_ERR_INVALID,
                "shm: %s", s ? "the segment failed earlier" : "no segment on this node");
  return GCOMP_OK;
}

/* Round r, the k-th of a reduce-scatter of count elements (P a round): this rank's input
 * for the other local ranks (and for itself unless own_direct: the reduction then reads
 * its own piece from the input) into its slot, published; then everyone's awaited. */
static int rs_round(gcomp_coll *c, gcomp_shm *s, const uint8_t *in, size_t count, size_t k,
                    size_t P, int own_direct, uint64_t r) {
  const size_t es = c->esize;
  uint8_t *mine = slot_at(s, r, s->me);
  for (int j = 0; j < s->L; j++) {
    if (j == s->me && own_direct) continue;
    size_t off, len;
    gcomp_chunk(count, s->L, j, &off, &len);
    size_t n = piece_len(len, k, P);
    memcpy(mine + (size_t)j * P * es, in + (off + k * P) * es, n * es);
    c->stats->shm_bytes += n * es;
  }
  const uint64_t desc = first_desc(c, CALL_REDUCE_SCATTER, count, es);
  if (c->drive) (void)gcomp_progress(c->t);
  if (k == 0) post_desc(s, r, desc);
  publish(c, s, 2 * r + 1);
  return k == 0 ? wait_call(c, s, r, desc) : wait_all(c, s, 2 * r + 1);
}

static uint8_t none[1];   /* a shaped call's buffer of no elements (it may be NULL) */

int gcomp_shm_reduce_scatter(gcomp_coll *c, gcomp_shm *s, uint8_t *buf, size_t count) {
  GCOMP_CHECK(check_usable(s));
  if (!buf) buf = none;
  const size_t es = c->esize, P = piece_elems(c, s);
  const uint8_t *in = c->src ? c->src : buf;
  size_t off0, len0, moff, mlen;
  gcomp_chunk(count, s->L, 0, &off0, &len0);   /* shard 0 is the longest */
  gcomp_chunk(count, s->L, s->me, &moff, &mlen);
  /* my own piece of each round is read by me alone: the reduction takes it from the input
   * (one copy less of a shard per call), except in place on a rank other than local rank
   * 0, whose output would overwrite it before its turn in the rank order */
  const int own_direct = in != buf || s->me == 0;
  for (size_t k = 0; k * P < len0 || (k == 0 && c->shaped); k++) {   /* shaped: a round */
    uint64_t r = s->round++;
    GCOMP_CHECK(rs_round(c, s, in, count, k, P, own_direct, r));
    size_t n = piece_len(mlen, k, P);
    uint64_t t0 = gcomp_now_ns();
    const uint8_t *own = own_direct ? in + (moff + k * P) * es : NULL;
    if (n) reduce_slots(c, s, r, (size_t)s->me * P, n, buf + (moff + k * P) * es, own);
    c->stats->reduce_s += (double)(gcomp_now_ns() - t0) * 1e-9;
  }
  return GCOMP_OK;
}

/* The same rounds, the sum left to fn: every rank's own piece read from its input, since
 * nothing is written to an output. */
int gcomp_shm_reduce_scatter_parts(gcomp_coll *c, gcomp_shm *s, const uint8_t *in, size_t count,
                                   gcomp_shm_sum_fn fn, void *arg) {
  GCOMP_CHECK(check_usable(s));
  const size_t es = c->esize, P = piece_elems(c, s);
  const float *stack[8], **src = s->L <= 8 ? stack : malloc((size_t)s->L * sizeof *src);
  GCOMP_FAIL_IF(!src, GCOMP_ERR_NOMEM, "shm: %d sources", s->L);
  size_t off0, len0, moff, mlen;
  gcomp_chunk(count, s->L, 0, &off0, &len0);
  gcomp_chunk(count, s->L, s->me, &moff, &mlen);
  int st = GCOMP_OK;
  for (size_t k = 0; st == GCOMP_OK && k * P < len0; k++) {
    uint64_t r = s->round++;
    st = rs_round(c, s, in, count, k, P, 1, r);
    size_t n = piece_len(mlen, k, P);
    for (int i = 0; i < s->L; i++)
      src[i] = (const float *)(const void *)(i == s->me ? in + (moff + k * P) * es
                                                        : slot_at(s, r, i) + s->me * P * es);
    if (st == GCOMP_OK && n) st = fn(arg, k * P, n, src, s->L);
  }
  if (src != stack) free(src);
  return st;
}

int gcomp_shm_allgather(gcomp_coll *c, gcomp_shm *s, uint8_t *buf, size_t count) {
  GCOMP_CHECK(check_usable(s));
  if (!buf) buf = none;
  const size_t es = c->esize, P = piece_elems(c, s) * (size_t)s->L;   /* one piece per slot */
  size_t off0, len0, moff, mlen;
  gcomp_chunk(count, s->L, 0, &off0, &len0);
  gcomp_chunk(count, s->L, s->me, &moff, &mlen);
  for (size_t k = 0; k * P < len0 || (k == 0 && c->shaped); k++) {   /* shaped: a round */
    uint64_t r = s->round++;
    size_t n = piece_len(mlen, k, P);
    memcpy(slot_at(s, r, s->me), buf + (moff + k * P) * es, n * es);
    c->stats->shm_bytes += n * es;
    const uint64_t desc = first_desc(c, CALL_ALLGATHER, count, es);
    if (c->drive) (void)gcomp_progress(c->t);
    if (k == 0) post_desc(s, r, desc);
    publish(c, s, 2 * r + 1);
    GCOMP_CHECK(k == 0 ? wait_call(c, s, r, desc) : wait_all(c, s, 2 * r + 1));
    for (int j = 0; j < s->L; j++) {
      if (j == s->me) continue;
      size_t off, len;
      gcomp_chunk(count, s->L, j, &off, &len);
      size_t m = piece_len(len, k, P);
      memcpy(buf + (off + k * P) * es, slot_at(s, r, j), m * es);
    }
  }
  return GCOMP_OK;
}

/* Round k moves piece k of every block: this rank's piece for local rank j into part j of
 * its slot, published; then part `me` of every other rank's slot into that rank's block of
 * the output. In place, a piece is in the slot before the output's copy overwrites it. */
int gcomp_shm_alltoall(gcomp_coll *c, gcomp_shm *s, uint8_t *buf, size_t count) {
  GCOMP_CHECK(check_usable(s));
  if (!buf) buf = none;
  const size_t es = c->esize, P = piece_elems(c, s), block = count / (size_t)s->L;
  const uint8_t *in = c->src ? c->src : buf;
  if (in != buf) memcpy(buf + (size_t)s->me * block * es, in + (size_t)s->me * block * es, block * es);
  const uint64_t desc = first_desc(c, CALL_ALLTOALL, count, es);
  for (size_t k = 0; s->L > 1 && (k * P < block || (k == 0 && c->shaped)); k++) {
    uint64_t r = s->round++;
    size_t n = piece_len(block, k, P);
    uint8_t *mine = slot_at(s, r, s->me);
    for (int j = 0; j < s->L; j++)
      if (j != s->me) memcpy(mine + (size_t)j * P * es, in + ((size_t)j * block + k * P) * es, n * es);
    c->stats->shm_bytes += (size_t)(s->L - 1) * n * es;
    if (c->drive) (void)gcomp_progress(c->t);
    if (k == 0) post_desc(s, r, desc);
    publish(c, s, 2 * r + 1);
    GCOMP_CHECK(k == 0 ? wait_call(c, s, r, desc) : wait_all(c, s, 2 * r + 1));
    for (int i = 0; i < s->L; i++)
      if (i != s->me)
        memcpy(buf + ((size_t)i * block + k * P) * es, slot_at(s, r, i) + (size_t)s->me * P * es,
               n * es);
  }
  return GCOMP_OK;
}

/* A round with no data: the flags and the shape words alone */
int gcomp_shm_barrier(gcomp_coll *c, gcomp_shm *s) {
  GCOMP_CHECK(check_usable(s));
  uint64_t r = s->round++;
  const uint64_t desc = first_desc(c, CALL_PARTS, 0, c->esize);
  post_desc(s, r, desc);
  publish(c, s, 2 * r + 1);
  return wait_call(c, s, r, desc);
}

int gcomp_shm_allreduce(gcomp_coll *c, gcomp_shm *s, uint8_t *buf, size_t count) {
  GCOMP_CHECK(check_usable(s));
  GCOMP_FAIL_IF(c->t->nnodes != 1, GCOMP_ERR_INVALID, "shm allreduce: ranks span %d nodes",
                c->t->nnodes);
  const size_t es = c->esize;
  const uint8_t *in = c->src ? c->src : buf;
  if (count * es <= GCOMP_SHM_HOT_DATA) {   /* one round through the hot lines */
    uint64_t r = s->round++;
    memcpy(s->ctl[s->me].hot[r & 1].data, in, count * es);
    c->stats->shm_bytes += count * es;
    const uint64_t desc = call_desc(CALL_ALLREDUCE, count, es);
    post_desc(s, r, desc);
    publish(c, s, 2 * r + 1);
    GCOMP_CHECK(wait_first(c, s, r, desc));
    /* not timed (reduce_s, gcomp.h): a dozen additions take less than one read of the
     * clock, and the two reads were a quarter of a 2-rank call */
    reduce_hot(c, s, r, count, buf);
    return GCOMP_OK;
  }
  size_t per = s->slot / es;   /* elements per round */
  for (size_t off = 0; off < count; off += per) {
    size_t n = count - off < per ? count - off : per;
    uint64_t r = s->round++;
    uint8_t *mine = slot_at(s, r, s->me);
    uint8_t *out = buf + off * es;
    memcpy(mine, in + off * es, n * es);
    c->stats->shm_bytes += n * es;
    const uint64_t desc = call_desc(CALL_ALLREDUCE, count, es);
    if (off == 0) post_desc(s, r, desc);
    publish(c, s, 2 * r + 1);
    GCOMP_CHECK(off == 0 ? wait_first(c, s, r, desc) : wait_all(c, s, 2 * r + 1));
    uint64_t t0 = gcomp_now_ns();
    if (n * es <= ONE_SHOT_MAX) {
      reduce_slots(c, s, r, 0, n, out, NULL);
      c->stats->reduce_s += (double)(gcomp_now_ns() - t0) * 1e-9;
      continue;
    }
    size_t so, sl;
    gcomp_chunk(n, s->L, s->me, &so, &sl);
    if (sl) {
      reduce_slots(c, s, r, so, sl, out + so * es, NULL);
      memcpy(mine + so * es, out + so * es, sl * es);
    }
    c->stats->reduce_s += (double)(gcomp_now_ns() - t0) * 1e-9;
    publish(c, s, 2 * r + 2);
    GCOMP_CHECK(wait_all(c, s, 2 * r + 2));
    for (int i = 0; i < s->L; i++) {
      if (i == s->me) continue;
      gcomp_chunk(n, s->L, i, &so, &sl);
      memcpy(out + so * es, slot_at(s, r, i) + so * es, sl * es);
    }
  }
  return GCOMP_OK;
}

/* ---- byte strings ----------------------------------------------------------------------- */
/* A rank's parts in its slot and the GCOMP_SHM_HEAD bytes after it (s->stride in all): a
 * word saying whether they are there (1) or did not fit (0), their lengths (8 bytes each),
 * then each part from a 64-byte boundary on. One part of a whole slot fits. */
static size_t parts_head(int nparts) { return round_up(((size_t)nparts + 1) * 8, 64); }

static size_t parts_bytes(const gcomp_bytes *part, int nparts) {
  size_t at = parts_head(nparts);
  for (int k = 0; k < nparts; k++) at += round_up(part[k].len, 64);
  return at;
}

static int parts_round(gcomp_coll *c, gcomp_shm *s, const gcomp_bytes *part, int nparts,
                       uint64_t desc, uint64_t *differ, gcomp_shm_part_fn fn, void *arg,
                       int *all_in) {
  *all_in = 0;
  GCOMP_CHECK(check_usable(s));
  uint64_t r = s->round++;
  uint8_t *mine = slot_at(s, r, s->me);
  uint64_t in = parts_bytes(part, nparts) <= s->stride;
  memcpy(mine, &in, 8);
  for (size_t k = 0, at = parts_head(nparts); in && k < (size_t)nparts; k++) {
    uint64_t len = part[k].len;
    memcpy(mine + 8 * (k + 1), &len, 8);
    memcpy(mine + at, part[k].p, part[k].len);
    at += round_up(part[k].len, 64);
    c->stats->shm_bytes += part[k].len;
  }
  if (c->drive) (void)gcomp_progress(c->t);
  post_desc(s, r, desc);
  publish(c, s, 2 * r + 1);
  int st = wait_first_differ(c, s, r, desc, differ);
  if (st == GCOMP_ERR_INVALID && differ) return st;   /* the caller's message */
  GCOMP_CHECK(st);
  for (int j = 0; j < s->L && in; j++) {
    uint64_t theirs;
    memcpy(&theirs, slot_at(s, r, j), 8);
    in = theirs == 1;
  }
  if (!in) return GCOMP_OK;   /* every rank saw the same words */
  for (int j = 0; j < s->L; j++)
    if (j != s->me)
      GCOMP_CHECK(gcomp_shm_parts_read(slot_at(s, r, j), s->stride, j, nparts, fn, arg));
  *all_in = 1;
  return GCOMP_OK;
}

int gcomp_shm_allgather_parts(gcomp_coll *c, gcomp_shm *s, const gcomp_bytes *part, int nparts,
                              size_t count, gcomp_shm_part_fn fn, void *arg, int *all_in) {
  return parts_round(c, s, part, nparts, call_desc(CALL_PARTS, count, c->esize), NULL, fn, arg,
                     all_in);
}

int gcomp_shm_shaped_parts(gcomp_coll *c, gcomp_shm *s, const gcomp_bytes *part, int nparts,
                           uint64_t shape, gcomp_shm_part_fn fn, void *arg, int *all_in,
                           int *who, uint64_t *theirs) {
  *who = -1;
  GCOMP_FAIL_IF(shape >> 61, GCOMP_ERR_INVALID, "shm: shape word %llx over 61 bits",
                (unsigned long long)shape);
  uint64_t differ[2] = {UINT64_MAX, 0};
  int st = parts_round(c, s, part, nparts, shaped_desc(shape), differ, fn, arg, all_in);
  if (differ[0] != UINT64_MAX) *who = (int)differ[0], *theirs = differ[1];
  return st;
}

/* The reader's side alone (tests/fuzz/fuzz_shm_parts.c feeds it any bytes): a peer's slot
 * is trusted no more than a frame from the network. */
int gcomp_shm_parts_read(const uint8_t *slot, size_t slot_bytes, int j, int nparts,
                         gcomp_shm_part_fn fn, void *arg) {
  size_t at = parts_head(nparts);
  GCOMP_FAIL_IF(nparts < 0 || at > slot_bytes, GCOMP_ERR_CORRUPT,
                "shm: %d parts' lengths do not fit local rank %d's %zu-byte slot", nparts, j,
                slot_bytes);
  for (int k = 0; k < nparts; k++) {
    uint64_t len;
    GCOMP_FAIL_IF(at > slot_bytes, GCOMP_ERR_CORRUPT,
                  "shm: local rank %d's part %d starts at %zu of a %zu-byte slot", j, k, at,
                  slot_bytes);
    memcpy(&len, slot + 8 * ((size_t)k + 1), 8);
    /* lengths its writer checked: one past the slot is a broken segment, not a frame */
    GCOMP_FAIL_IF(len > slot_bytes - at, GCOMP_ERR_CORRUPT,
                  "shm: local rank %d's part %d claims %llu bytes at %zu of a %zu-byte slot",
                  j, k, (unsigned long long)len, at, slot_bytes);
    GCOMP_CHECK(fn(arg, j, k, slot + at, (size_t)len));
    at += round_up((size_t)len, 64);
  }
  return GCOMP_OK;
}
