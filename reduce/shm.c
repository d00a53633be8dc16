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
 * Slots are double-buffered by the parity of a per-segment round counter. A rank writes a
 * slot of round r only after it has seen every rank publish round r - 1, and a rank
 * publishes r - 1 only after it finished reading round r - 2, the last user of that slot:
 * no barrier beyond the flags is ever needed. Flags only grow: round r publishes 2r + 1
 * ("my input is in") and, two-phase, 2r + 2 ("my reduced shard is in").
 *
 * A rank that dies leaves its flag still; waiters notice its pid is gone (GCOMP_ERR_PEER)
 * or give up after GCOMP_TIMEOUT_MS (GCOMP_ERR_TIMEOUT). After a failure the segment's
 * state is unknown and every later call on it fails at once. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "abort.h"
#include "coll.h"
#include "procs.h"

enum { CTL_BYTES = 64, NAME_BYTES = 64, ONE_SHOT_MAX = 8192 };

typedef struct {
  _Atomic uint64_t flag;
  uint64_t pidns;   /* inode of the rank's pid namespace: its pid means nothing elsewhere */
  uint64_t desc[2]; /* the shape of the call whose first round has this parity (call_desc) */
  int32_t pid;
  /* a waiter that stops spinning sleeps on bell (a futex word bumped at every publish)
   * after counting itself in sleepers; the publisher wakes only when someone sleeps */
  _Atomic uint32_t bell, sleepers;
  char pad[CTL_BYTES - 44];
} shm_ctl;

struct gcomp_shm {
  uint8_t *base;
  size_t map_bytes;
  shm_ctl *ctl;        /* [L] */
  uint8_t *data;       /* slots: [2][L][slot] */
  size_t slot;
  int L, me;
  uint64_t round;
  int broken;
  int timeout_ms;
};

static uint8_t *slot_at(const gcomp_shm *s, uint64_t round, int rank) {
  return s->data + ((size_t)(round & 1) * (size_t)s->L + (size_t)rank) * s->slot;
}

static size_t round_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

/* ---- setup ---------------------------------------------------------------------------- */
/* Maps the segment and signs this rank's control line (before the setup messages that
 * follow, which order these stores before anyone reads them). */
static int map_segment(gcomp_shm *s, int fd) {
  void *p = mmap(NULL, s->map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  GCOMP_FAIL_IF(p == MAP_FAILED, GCOMP_ERR_NOMEM, "shm: mmap of %zu bytes: %s", s->map_bytes,
                strerror(errno));
  s->base = p;
  s->ctl = (shm_ctl *)(void *)s->base;
  s->data = s->base + round_up((size_t)s->L * CTL_BYTES, 4096);
  struct stat ns;
  s->ctl[s->me].pidns = stat("/proc/self/ns/pid", &ns) == 0 ? (uint64_t)ns.st_ino : 0;
  s->ctl[s->me].pid = (int32_t)getpid();
  return GCOMP_OK;
}

/* Our segments live in /dev/shm only between creation and the moment every local rank has
 * mapped them; a root killed in between leaves "gcomp-<pid>-..." behind. The next root on
 * the machine removes those whose process is gone and that are over a minute old (a pid
 * from another pid namespace, a container sharing /dev/shm, looks dead from here: only
 * files older than any setup, which takes milliseconds, go). */
static int segment_owner(const char *name) {
  int pid = 0, used = 0;
  if (sscanf(name, "gcomp-%d-%n", &pid, &used) != 1 || used == 0) return 0;
  return pid;
}

/* The local root makes the segment; its size is reserved up front (posix_fallocate) so a
 * full /dev/shm is an error here, not a SIGBUS in the middle of a call. */
static int make_segment(gcomp_shm *s, char *name) {
  static _Atomic unsigned counter;
  gcomp_shm_sweep(segment_owner, 1, 60, GCOMP_SUB_REDUCE);
  snprintf(name, NAME_BYTES, "/gcomp-%d-%u-%llx", (int)getpid(), atomic_fetch_add(&counter, 1),
           (unsigned long long)gcomp_now_ns());
  int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
  /* no /dev/shm, or not ours to write: this machine cannot serve the segment (memory is
   * what posix_fallocate and mmap below may lack) */
  GCOMP_FAIL_IF(fd < 0, GCOMP_ERR_UNSUPPORTED, "shm: shm_open(%s): %s", name, strerror(errno));
  int err = posix_fallocate(fd, 0, (off_t)s->map_bytes);
  if (err) {
    close(fd);
    shm_unlink(name);
    GCOMP_FAIL_IF(1, GCOMP_ERR_NOMEM, "shm: reserving %zu bytes in /dev/shm: %s", s->map_bytes,
                  strerror(err));
  }
  int st = map_segment(s, fd);
  close(fd);
  if (st < 0) shm_unlink(name);
  return st;
}

static int open_segment(gcomp_shm *s, const char *name) {
  int fd = shm_open(name, O_RDWR, 0600);
  /* the local root's segment, named by it: a failed exchange of the node's setup */
  GCOMP_FAIL_IF(fd < 0, GCOMP_ERR_BOOTSTRAP, "shm: shm_open(%s): %s", name, strerror(errno));
  int st = map_segment(s, fd);
  close(fd);
  return st;
}

void gcomp_shm_destroy(gcomp_shm *s) {
  if (!s) return;
  if (s->base) munmap(s->base, s->map_bytes);
  free(s);
}

/* Collective over the node's ranks. The root sends the segment's name, everyone answers
 * whether it could map it, the root unlinks the name and sends the verdict: all of the
 * node's ranks end up with the segment or all without. */
int gcomp_shm_create(gcomp_transport *t, size_t slot_bytes, gcomp_shm **out) {
  *out = NULL;
  if (t->local_size < 2 || slot_bytes == 0) return GCOMP_OK;
  gcomp_shm *s = calloc(1, sizeof *s);
  GCOMP_FAIL_IF(!s, GCOMP_ERR_NOMEM, "shm: state");
  s->L = t->local_size;
  s->me = t->local_rank;
  /* at least one 8-byte element per local rank: hier's rounds move one piece of every
   * shard through a slot (piece_elems); a smaller slot once made them overrun into the
   * next ranks' slots */
  s->slot = round_up(slot_bytes > 8 * (size_t)s->L ? slot_bytes : 8 * (size_t)s->L, 64);
  s->timeout_ms = t->timeout_ms;
  s->map_bytes = round_up((size_t)s->L * CTL_BYTES, 4096) + 2 * (size_t)s->L * s->slot;
  const uint32_t seq = GCOMP_SEQ_SHM_SEGMENT;
  int root = t->local_ranks[0];
  char name[NAME_BYTES] = {0};
  int32_t ok = 1, verdict = 1;
  int st = GCOMP_OK;
  if (s->me == 0) {
    int mst = make_segment(s, name);
    if (mst < 0) {
      GCOMP_WARN(GCOMP_SUB_REDUCE, "no shared-memory allreduce on this node: %s (%s)",
                 gcomp_last_error(), gcomp_strerror(mst));
      name[0] = '\0';
      verdict = 0;
    }
    for (int i = 1; i < s->L && st == GCOMP_OK; i++)
      st = gcomp_send(t, t->local_ranks[i], gcomp_tag(seq, 1), name, sizeof name);
    for (int i = 1; i < s->L && st == GCOMP_OK; i++) {
      int32_t theirs = 0;
      st = gcomp_recv(t, t->local_ranks[i], gcomp_tag(seq, 2), &theirs, sizeof theirs, NULL);
      verdict &= theirs;
    }
    if (name[0]) shm_unlink(name);
    for (int i = 1; i < s->L && st == GCOMP_OK; i++)
      st = gcomp_send(t, t->local_ranks[i], gcomp_tag(seq, 3), &verdict, sizeof verdict);
  } else {
    st = gcomp_recv(t, root, gcomp_tag(seq, 1), name, sizeof name, NULL);
    name[NAME_BYTES - 1] = '\0';
    int ost = st == GCOMP_OK && name[0] ? open_segment(s, name) : GCOMP_OK;
    if (ost < 0) {
      GCOMP_WARN(GCOMP_SUB_REDUCE, "no shared-memory allreduce on this node: %s (%s)",
                 gcomp_last_error(), gcomp_strerror(ost));
      ok = 0;
    }
    if (st == GCOMP_OK) {
      ok &= name[0] != '\0';
      st = gcomp_send(t, root, gcomp_tag(seq, 2), &ok, sizeof ok);
    }
    if (st == GCOMP_OK) st = gcomp_recv(t, root, gcomp_tag(seq, 3), &verdict, sizeof verdict, NULL);
  }
  if (st < 0 || !verdict) {
    gcomp_shm_destroy(s);
    return st < 0 ? gcomp_error_trace(st, __FILE__, __LINE__) : GCOMP_OK;
  }
  /* the file was zero-filled: every flag starts at 0 (round 0 published) */
  s->round = 1;
  *out = s;
  return GCOMP_OK;
}

size_t gcomp_shm_slot_bytes(const gcomp_shm *s) { return s ? s->slot : 0; }

/* ---- synchronisation ------------------------------------------------------------------ */
/* Flag store, bell, sleepers check: all sequentially consistent, so a waiter that counted
 * itself in sleepers before checking the flag is either seen here or sees the flag. */
static void publish(gcomp_shm *s, uint64_t v) {
  shm_ctl *me = &s->ctl[s->me];
  atomic_store(&me->flag, v);
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

/* Sleeps until ctl's bell moves (its flag may have reached v) or the nap ends. */
static void sleep_on(shm_ctl *ctl, uint64_t v, long nap_ns) {
  uint32_t b = atomic_load(&ctl->bell);
  atomic_fetch_add(&ctl->sleepers, 1);
  if (atomic_load(&ctl->flag) < v) {
    struct timespec ts = {0, nap_ns};
    (void)syscall(SYS_futex, &ctl->bell, FUTEX_WAIT, b, &ts, NULL, 0);
  }
  atomic_fetch_sub(&ctl->sleepers, 1);
}

/* Waits until every other local rank's flag reaches v. With seen != NULL (a call's first
 * round) it also returns each rank's call shape for the round's parity in seen[], read the
 * moment its flag is seen, while that control line is still in this core's cache. */
static int wait_all_seen(gcomp_coll *c, gcomp_shm *s, uint64_t v, uint64_t round,
                         uint64_t *seen);

static int wait_all(gcomp_coll *c, gcomp_shm *s, uint64_t v) {
  return wait_all_seen(c, s, v, 0, NULL);
}

static int wait_all_seen(gcomp_coll *c, gcomp_shm *s, uint64_t v, uint64_t round,
                         uint64_t *seen) {
  uint64_t start = 0, last_check = 0, last_live = 0;
  unsigned spins = 0;
  for (int i = 0; i < s->L; i++) {
    if (i == s->me) continue;
    while (atomic_load_explicit(&s->ctl[i].flag, memory_order_acquire) < v) {
      if (!start) start = gcomp_now_ns(), last_check = last_live = start;
      /* a pipeline's transfers move on (their failures surface in their requests) */
      if (c->drive) (void)gcomp_progress(c->t);
      /* the clock is read every 64th spin only, as before the futex: reading it at every
       * spin made a 4-rank 8 B call 3.8 -> 9 us */
      if (!c->drive || gcomp_now_ns() - start < SPIN_NS) {
        gcomp_idle(&spins);
        if ((spins & 63u) != 0) continue;
      } else {
        sleep_on(&s->ctl[i], v, NAP_NS);
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
    if (seen) seen[i] = s->ctl[i].desc[round & 1];
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
enum { CALL_PARTS = 0, CALL_ALLREDUCE = 1, CALL_REDUCE_SCATTER = 2, CALL_ALLGATHER = 3 };
static uint64_t call_desc(int kind, size_t count, size_t es) {
  return (uint64_t)count << 8 | (uint64_t)es << 2 | (uint64_t)kind;
}
static const char *kind_name(uint64_t d) {
  return (d & 3) == CALL_ALLREDUCE        ? "allreduce"
         : (d & 3) == CALL_REDUCE_SCATTER ? "reduce-scatter"
         : (d & 3) == CALL_ALLGATHER      ? "allgather"
                                          : "an allgather of frames";
}
static void post_desc(gcomp_shm *s, uint64_t round, uint64_t desc) {
  /* written only when it changes: in a loop of same-shaped calls the control line then sees
   * no store but the flag's, and a peer spinning on the flag is not disturbed twice */
  if (s->ctl[s->me].desc[round & 1] != desc) s->ctl[s->me].desc[round & 1] = desc;
}
/* Waits for the call's first round like wait_all, then compares the shapes seen. */
static int wait_first(gcomp_coll *c, gcomp_shm *s, uint64_t round, uint64_t mine) {
  uint64_t seen_stack[64], *seen = s->L <= 64 ? seen_stack : malloc((size_t)s->L * sizeof *seen);
  GCOMP_FAIL_IF(!seen, GCOMP_ERR_NOMEM, "shm: %d call shapes", s->L);
  int st = wait_all_seen(c, s, 2 * round + 1, round, seen);
  for (int i = 0; st == GCOMP_OK && i < s->L; i++) {
    uint64_t d = seen[i];
    if (i == s->me || d == mine) continue;
    if (seen != seen_stack) free(seen);
    s->broken = 1;
    GCOMP_FAIL(GCOMP_ERR_INVALID,
               "shm: local rank %d called %s with %llu elements of %llu bytes, this rank %s with "
               "%llu of %llu: every rank must pass the same count and dtype", i, kind_name(d),
               (unsigned long long)(d >> 8), (unsigned long long)((d >> 2) & 63), kind_name(mine),
               (unsigned long long)(mine >> 8), (unsigned long long)((mine >> 2) & 63));
  }
  if (seen != seen_stack) free(seen);
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
  const uint64_t desc = call_desc(CALL_REDUCE_SCATTER, count, es);
  if (c->drive) (void)gcomp_progress(c->t);
  if (k == 0) post_desc(s, r, desc);
  publish(s, 2 * r + 1);
  return k == 0 ? wait_first(c, s, r, desc) : wait_all(c, s, 2 * r + 1);
}

int gcomp_shm_reduce_scatter(gcomp_coll *c, gcomp_shm *s, uint8_t *buf, size_t count) {
  GCOMP_CHECK(check_usable(s));
  const size_t es = c->esize, P = piece_elems(c, s);
  const uint8_t *in = c->src ? c->src : buf;
  size_t off0, len0, moff, mlen;
  gcomp_chunk(count, s->L, 0, &off0, &len0);   /* shard 0 is the longest */
  gcomp_chunk(count, s->L, s->me, &moff, &mlen);
  /* my own piece of each round is read by me alone: the reduction takes it from the input
   * (one copy less of a shard per call), except in place on a rank other than local rank
   * 0, whose output would overwrite it before its turn in the rank order */
  const int own_direct = in != buf || s->me == 0;
  for (size_t k = 0; k * P < len0; k++) {
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
  const size_t es = c->esize, P = piece_elems(c, s) * (size_t)s->L;   /* one piece per slot */
  size_t off0, len0, moff, mlen;
  gcomp_chunk(count, s->L, 0, &off0, &len0);
  gcomp_chunk(count, s->L, s->me, &moff, &mlen);
  for (size_t k = 0; k * P < len0; k++) {
    uint64_t r = s->round++;
    size_t n = piece_len(mlen, k, P);
    memcpy(slot_at(s, r, s->me), buf + (moff + k * P) * es, n * es);
    c->stats->shm_bytes += n * es;
    const uint64_t desc = call_desc(CALL_ALLGATHER, count, es);
    if (c->drive) (void)gcomp_progress(c->t);
    if (k == 0) post_desc(s, r, desc);
    publish(s, 2 * r + 1);
    GCOMP_CHECK(k == 0 ? wait_first(c, s, r, desc) : wait_all(c, s, 2 * r + 1));
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

int gcomp_shm_allreduce(gcomp_coll *c, gcomp_shm *s, uint8_t *buf, size_t count) {
  GCOMP_CHECK(check_usable(s));
  GCOMP_FAIL_IF(c->t->nnodes != 1, GCOMP_ERR_INVALID, "shm allreduce: ranks span %d nodes",
                c->t->nnodes);
  const size_t es = c->esize;
  const uint8_t *in = c->src ? c->src : buf;
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
    publish(s, 2 * r + 1);
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
    publish(s, 2 * r + 2);
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
/* A rank's parts in its slot: a word saying whether they are there (1) or did not fit (0),
 * their lengths (8 bytes each), then each part from a 64-byte boundary on. */
static size_t parts_head(int nparts) { return round_up(((size_t)nparts + 1) * 8, 64); }

static size_t parts_bytes(const gcomp_bytes *part, int nparts) {
  size_t at = parts_head(nparts);
  for (int k = 0; k < nparts; k++) at += round_up(part[k].len, 64);
  return at;
}

int gcomp_shm_allgather_parts(gcomp_coll *c, gcomp_shm *s, const gcomp_bytes *part, int nparts,
                              size_t count, gcomp_shm_part_fn fn, void *arg, int *all_in) {
  *all_in = 0;
  GCOMP_CHECK(check_usable(s));
  uint64_t r = s->round++;
  uint8_t *mine = slot_at(s, r, s->me);
  uint64_t in = parts_bytes(part, nparts) <= s->slot;
  memcpy(mine, &in, 8);
  for (size_t k = 0, at = parts_head(nparts); in && k < (size_t)nparts; k++) {
    uint64_t len = part[k].len;
    memcpy(mine + 8 * (k + 1), &len, 8);
    memcpy(mine + at, part[k].p, part[k].len);
    at += round_up(part[k].len, 64);
    c->stats->shm_bytes += part[k].len;
  }
  const uint64_t desc = call_desc(CALL_PARTS, count, c->esize);
  if (c->drive) (void)gcomp_progress(c->t);
  post_desc(s, r, desc);
  publish(s, 2 * r + 1);
  GCOMP_CHECK(wait_first(c, s, r, desc));
  for (int j = 0; j < s->L && in; j++) {
    uint64_t theirs;
    memcpy(&theirs, slot_at(s, r, j), 8);
    in = theirs == 1;
  }
  if (!in) return GCOMP_OK;   /* every rank saw the same words */
  for (int j = 0; j < s->L; j++)
    if (j != s->me)
      GCOMP_CHECK(gcomp_shm_parts_read(slot_at(s, r, j), s->slot, j, nparts, fn, arg));
  *all_in = 1;
  return GCOMP_OK;
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
