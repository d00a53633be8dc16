/* What every transport shares: the wait loops and the topology tables. */
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gcomp_common.h"
#include "transport.h"

/* Busy polling keeps latency at the provider's floor while a peer is running; after a short
 * spin the waiter yields, so ranks that oversubscribe the cores still get scheduled; after
 * a long wait with nothing moving (a slow link, a late peer) it sleeps in short naps, so a
 * progress thread leaves the core to the computation it overlaps. */
#define GCOMP_SPINS_BEFORE_YIELD 200u
#define GCOMP_YIELDS_BEFORE_NAP 2000u
#define GCOMP_NAP_NS 20000L

/* gcomp_idle_naps: spins before the naps. A nap of 10 us sleeps about 60 us with Linux's
 * default timer slack; with these values a 64 MiB sign+ef call of 4 ranks on 2 vCPUs took
 * 4-5% less time than with gcomp_idle's spins and yields. */
#define GCOMP_NAPPER_SPINS 20u
#define GCOMP_NAPPER_NS 10000L
/* GCOMP_NAPS_LENGTHEN: after 8 naps of 10 us (about 0.5 ms: a short call's wait stays as
 * it was), naps of 20, 40, 80, then 160 us. A progress thread reducing 1 MiB buckets across
 * a 1 Gbit/s link woke every ~100 us, ~90 times a bucket, each wake-up a nanosleep, a
 * context switch and a poll of every socket: 20-26 ms of CPU for 8 MiB, taken from the
 * backward pass it overlaps (gloo's threads: 8.5 ms). A wait notices its completion at
 * most one nap late. */
#define GCOMP_NAPPER_SHORT 8u
#define GCOMP_NAPPER_DOUBLINGS 4u

/* A wait that a wait fd can end (gcomp_idle_blocker: every message of the transport wakes
 * it) blocks this long at most: the wait loop then runs once, so that what no fd announces
 * (a request's timeout, a same-host peer's liveness, the clock a test reads every 32nd time)
 * is still seen within a millisecond or so. Gloo's threads block in epoll until data comes;
 * timed naps woke a progress thread 256-314 times a step of 8 x 1 MiB buckets across a
 * 1 Gbit/s link, each a nanosleep, a context switch and a poll of every socket. */
#define GCOMP_BLOCK_NS 1000000L

/* per thread: the thread that waits is the one that drives progress */
static _Thread_local unsigned long moved_count, moved_seen;
static _Thread_local int napper;
/* the transport whose progress last ran on this thread, and the idle step it ran before */
static _Thread_local gcomp_transport *blk_t;
static _Thread_local gcomp_block_fn blk_fn;
static _Thread_local int blk_whole;
static _Thread_local unsigned long idle_steps, blk_at;

void gcomp_moved(void) { moved_count++; }

void gcomp_idle_blocker(gcomp_transport *t, gcomp_block_fn block, int whole) {
  blk_t = t;
  blk_fn = block;
  blk_whole = whole;
  blk_at = idle_steps;
}

/* Blocks in the transport this thread drove since its last idle step, if any: a transport
 * this thread drove before it left a wait is never touched (another thread may drive it by
 * now, or it may be gone), since every wait loop's first idle steps only spin. 1 when it
 * blocked (or found something pending), 0 when the caller must nap ns itself. */
static int idle_block(long ns) {
  if (!blk_t || blk_at + 1 != idle_steps) return 0;
  return blk_fn(blk_t, blk_whole ? GCOMP_BLOCK_NS : ns);
}

int gcomp_idle_naps(int on) {
  int was = napper;
  napper = on;
  return was;
}

void gcomp_idle(unsigned *spins) {
  idle_steps++;
  if (napper) {
    if (++*spins < GCOMP_NAPPER_SPINS) return;
    unsigned k = 0;
    if (napper == GCOMP_NAPS_LENGTHEN) {
      if (moved_count != moved_seen) {   /* chunks flow: short naps again */
        moved_seen = moved_count;
        *spins = GCOMP_NAPPER_SPINS;
      }
      k = *spins - GCOMP_NAPPER_SPINS;
      k = k <= GCOMP_NAPPER_SHORT ? 0 : k - GCOMP_NAPPER_SHORT;
      if (k > GCOMP_NAPPER_DOUBLINGS) k = GCOMP_NAPPER_DOUBLINGS;
    }
    if (idle_block(GCOMP_NAPPER_NS << k)) return;
    struct timespec ts = {0, GCOMP_NAPPER_NS << k};
    nanosleep(&ts, NULL);
    return;
  }
  if (moved_count != moved_seen) {   /* not a long wait: yield, but no nap */
    moved_seen = moved_count;
    if (*spins > GCOMP_SPINS_BEFORE_YIELD) *spins = GCOMP_SPINS_BEFORE_YIELD;
  }
  unsigned s = ++*spins;   /* wraps after years of naps: harmless */
  if (s < GCOMP_SPINS_BEFORE_YIELD) return;
  if (s < GCOMP_SPINS_BEFORE_YIELD + GCOMP_YIELDS_BEFORE_NAP) {
    sched_yield();
    return;
  }
  if (idle_block(GCOMP_NAP_NS)) return;
  struct timespec ts = {0, GCOMP_NAP_NS};
  nanosleep(&ts, NULL);
}

int gcomp_wait(gcomp_transport *t, gcomp_treq *req, size_t *len) {
  GCOMP_FAIL_IF(!t || !req, GCOMP_ERR_INVALID, "gcomp_wait: NULL transport or request");
  unsigned spins = 0;
  for (;;) {
    int done = 0;
    GCOMP_CHECK(t->ops->test(t, req, &done, len));
    if (done) return GCOMP_OK;
    gcomp_idle(&spins);
  }
}

int gcomp_waitall(gcomp_transport *t, int n, gcomp_treq **reqs, size_t *lens) {
  GCOMP_FAIL_IF(!t || n < 0 || (n && !reqs), GCOMP_ERR_INVALID, "gcomp_waitall: bad arguments");
  unsigned spins = 0;
  int left = 0;
  for (int i = 0; i < n; i++) left += reqs[i] != NULL;
  while (left) {
    int moved = 0;
    for (int i = 0; i < n; i++) {
      if (!reqs[i]) continue;
      int done = 0;
      int s = t->ops->test(t, reqs[i], &done, lens ? &lens[i] : NULL);
      if (s < 0) {
        reqs[i] = NULL;
        char detail[1024];
        strncpy(detail, gcomp_last_error(), sizeof detail - 1);
        detail[sizeof detail - 1] = '\0';
        for (int j = 0; j < n; j++)
          if (reqs[j]) {
            t->ops->cancel(t, reqs[j]);
            reqs[j] = NULL;
          }
        gcomp_error_restore(s, detail);
        return gcomp_error_trace(s, __FILE__, __LINE__);
      }
      if (done) {
        reqs[i] = NULL;
        left--;
        moved = 1;
      }
    }
    if (moved)
      spins = 0;
    else
      gcomp_idle(&spins);
  }
  return GCOMP_OK;
}

int gcomp_send(gcomp_transport *t, int peer, uint64_t tag, const void *buf, size_t len) {
  gcomp_treq *r = NULL;
  GCOMP_CHECK(gcomp_isend(t, peer, tag, buf, len, &r));
  GCOMP_CHECK(gcomp_wait(t, r, NULL));
  return GCOMP_OK;
}

int gcomp_recv(gcomp_transport *t, int peer, uint64_t tag, void *buf, size_t capacity,
               size_t *len) {
  gcomp_treq *r = NULL;
  GCOMP_CHECK(gcomp_irecv(t, peer, tag, buf, capacity, &r));
  GCOMP_CHECK(gcomp_wait(t, r, len));
  return GCOMP_OK;
}

void gcomp_transport_destroy(gcomp_transport *t) {
  if (t) t->ops->destroy(t);
}

int gcomp_topology_fill(gcomp_transport *t, const char *const *node_keys, int **storage) {
  int n = t->size;
  int *mem = calloc((size_t)n * 2 + 1, sizeof *mem);
  GCOMP_FAIL_IF(!mem, GCOMP_ERR_NOMEM, "topology tables for %d ranks", n);
  int *node_of = mem, *local = mem + n;
  int nnodes = 0;
  for (int r = 0; r < n; r++) {
    node_of[r] = -1;
    for (int q = 0; q < r; q++)
      if (strcmp(node_keys[q], node_keys[r]) == 0) {
        node_of[r] = node_of[q];
        break;
      }
    if (node_of[r] < 0) node_of[r] = nnodes++;
  }
  int nl = 0;
  t->local_rank = 0;
  for (int r = 0; r < n; r++)
    if (node_of[r] == node_of[t->rank]) {
      if (r == t->rank) t->local_rank = nl;
      local[nl++] = r;
    }
  t->node = node_of[t->rank];
  t->nnodes = nnodes;
  t->local_size = nl;
  t->node_of = node_of;
  t->local_ranks = local;
  *storage = mem;
  return GCOMP_OK;
}
