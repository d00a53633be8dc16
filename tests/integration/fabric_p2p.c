/* One rank of a multi-process fabric test, started by gcomp-run (or mpirun, or by hand).
 *
 *   fabric_p2p p2p [MAX_BYTES [trunc]]  every pair, sizes 0..MAX_BYTES (large ones along a ring),
 *                                same-tag ordering with mixed sizes, short receives,
 *                                and with 'trunc', an oversized message refused
 *   fabric_p2p boot              bootstrap only; prints "boot rank R size S local L/LS node N/NN"
 *   fabric_p2p kill VICTIM       ring of 16 MiB transfers; VICTIM SIGKILLs itself mid-transfer;
 *                                the others must fail (exit 3) within GCOMP_TIMEOUT_MS
 *   fabric_p2p stall VICTIM      the same, but VICTIM stops (SIGSTOP): a silent peer, a timeout
 *   fabric_p2p rxfull N          2 ranks: rank 0 posts N receives rank 1 never sends (more than
 *                                FI_SHM_RX_SIZE): the first and the last must time out saying
 *                                nothing arrived; then N messages that rank 1 does send must
 *                                all arrive
 *   fabric_p2p flood N BYTES     2 ranks: rank 1 sends N messages of BYTES before rank 0 posts
 *                                a receive; rank 0's peak memory may grow by at most 8 MiB
 *                                while it waits, then every message must arrive intact
 *   fabric_p2p netns BYTES       rank 0 sends BYTES to the last rank; both check that their
 *                                FI_TCP_IFACE counters (/proc/net/dev) moved at least that much
 *   fabric_p2p cqwait EXPECT      pairs of ranks (r, r + N/2) take turns: one waits (napping, as
 *                                a progress thread) for 1 MiB the other sends 20 ms later;
 *                                every byte arrives, and with EXPECT 1 the waits blocked on the
 *                                completion queue's wait fd and data arriving woke it, with 0
 *                                none blocked
 *   fabric_p2p batch RUN INLINE  along a ring, messages of odd sizes, unscheduled and scheduled,
 *                                all posted at once: every byte arrives, and each message of L
 *                                bytes took exactly ceil(L / RUN) provider messages at each end
 *                                (the transport's data_msgs: chunks batched into runs of RUN
 *                                bytes); then scheduled messages shorter than their receives
 *                                (a partial last run, runs withdrawn past the end); and a
 *                                message of INLINE bytes takes no data message, one of
 *                                INLINE + 1 one at each end
 * Exit 0 on success, 1 on a failed check, 2 on usage errors, 3 for the expected failure. */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gcomp_common.h"
#include "transport.h"
#include "test_hooks.h"

static int me = -1;

#define CHECK(call)                                                                         \
  do {                                                                                      \
    int s_ = (call);                                                                        \
    if (s_ < 0) {                                                                           \
      fprintf(stderr, "fabric_p2p rank %d: %s failed: %s: %s\n", me, #call,                 \
              gcomp_strerror(s_), gcomp_last_error());                                      \
      exit(1);                                                                              \
    }                                                                                       \
  } while (0)

#define EXPECT(cond, ...)                                                                   \
  do {                                                                                      \
    if (!(cond)) {                                                                          \
      fprintf(stderr, "fabric_p2p rank %d: check failed: %s: ", me, #cond);                 \
      fprintf(stderr, __VA_ARGS__);                                                         \
      fputc('\n', stderr);                                                                  \
      exit(1);                                                                              \
    }                                                                                       \
  } while (0)

static uint8_t pattern(int src, int dst, int idx, size_t off) {
  return (uint8_t)(off * 131u + (size_t)src * 7u + (size_t)dst * 13u + (size_t)idx * 29u + (off >> 12));
}

static void fill(uint8_t *b, size_t n, int src, int dst, int idx) {
  for (size_t i = 0; i < n; i++) b[i] = pattern(src, dst, idx, i);
}

static size_t first_bad(const uint8_t *b, size_t n, int src, int dst, int idx) {
  for (size_t i = 0; i < n; i++)
    if (b[i] != pattern(src, dst, idx, i)) return i;
  return n;
}

/* Sizes crossing the interesting boundaries: inject (64 B rxm, 4 KiB shm), chunk (4 MiB). */
/* every rank is done before any leaves: a 1-byte exchange with each peer */
static void all_done(gcomp_transport *t) {
  uint8_t z = 0;
  for (int p = 0; p < t->size; p++) {
    if (p == me) continue;
    gcomp_treq *bq[2];
    CHECK(gcomp_irecv(t, p, gcomp_tag(5, 0), &z, 1, &bq[0]));
    CHECK(gcomp_isend(t, p, gcomp_tag(5, 0), &z, 1, &bq[1]));
    CHECK(gcomp_waitall(t, 2, bq, NULL));
  }
}

static const size_t small_sizes[] = {0, 1, 7, 8, 63, 64, 65, 4095, 4096, 4097, 65536, 200003};

static int mode_p2p(gcomp_transport *t, size_t max_bytes, int check_trunc) {
  int n = t->size;
  size_t nsmall = sizeof small_sizes / sizeof small_sizes[0];
  /* 1: all pairs, small sizes, all posted at once; receives have spare capacity */
  size_t nmsg = nsmall * (size_t)(n - 1);
  gcomp_treq **reqs = calloc(nmsg * 2, sizeof *reqs);
  size_t *lens = calloc(nmsg * 2, sizeof *lens);
  uint8_t **bufs = calloc(nmsg * 2, sizeof *bufs);
  size_t k = 0;
  for (int p = 0; p < n; p++) {
    if (p == me) continue;
    for (size_t s = 0; s < nsmall; s++, k++) {
      bufs[2 * k] = malloc(small_sizes[s] + 1);
      bufs[2 * k + 1] = malloc(small_sizes[s] + 101);
      fill(bufs[2 * k], small_sizes[s], me, p, (int)s);
      CHECK(gcomp_irecv(t, p, gcomp_tag(1, (uint32_t)s), bufs[2 * k + 1], small_sizes[s] + 100,
                        &reqs[2 * k + 1]));
      CHECK(gcomp_isend(t, p, gcomp_tag(1, (uint32_t)s), bufs[2 * k], small_sizes[s], &reqs[2 * k]));
    }
  }
  CHECK(gcomp_waitall(t, (int)(2 * nmsg), reqs, lens));
  k = 0;
  for (int p = 0; p < n; p++) {
    if (p == me) continue;
    for (size_t s = 0; s < nsmall; s++, k++) {
      EXPECT(lens[2 * k + 1] == small_sizes[s], "from rank %d: got %zu bytes, sent %zu", p,
             lens[2 * k + 1], small_sizes[s]);
      size_t bad = first_bad(bufs[2 * k + 1], small_sizes[s], p, me, (int)s);
      EXPECT(bad == small_sizes[s], "from rank %d, %zu bytes: wrong byte at %zu", p,
             small_sizes[s], bad);
      free(bufs[2 * k]);
      free(bufs[2 * k + 1]);
    }
  }
  /* 2: large sizes along the ring (to me+1, from me-1), one at a time */
  int to = (me + 1) % n, from = (me + n - 1) % n;
  size_t large[] = {(1u << 20) - 1, 4u << 20, (4u << 20) + 1, (9u << 20) + 5, max_bytes};
  uint8_t *sb = malloc(max_bytes + 1), *rb = malloc(max_bytes + 1);
  EXPECT(sb && rb, "allocating %zu bytes", max_bytes);
  for (size_t s = 0; s < sizeof large / sizeof large[0]; s++) {
    size_t len = large[s];
    if (len > max_bytes) continue;
    fill(sb, len, me, to, (int)s);
    memset(rb, 0, len);
    gcomp_treq *rq[2] = {NULL, NULL};
    size_t got[2] = {0, 0};
    CHECK(gcomp_irecv(t, from, gcomp_tag(2, (uint32_t)s), rb, max_bytes, &rq[0]));
    CHECK(gcomp_isend(t, to, gcomp_tag(2, (uint32_t)s), sb, len, &rq[1]));
    CHECK(gcomp_waitall(t, 2, rq, got));
    EXPECT(got[0] == len, "large from rank %d: got %zu bytes, sent %zu", from, got[0], len);
    size_t bad = first_bad(rb, len, from, me, (int)s);
    EXPECT(bad == len, "large from rank %d, %zu bytes: wrong byte at %zu", from, len, bad);
  }
  free(sb);
  free(rb);
  /* 3: ordering: one tag, mixed sizes (inject, chunked, empty) back to back, all posted
   * before anything is waited for: the i-th receive must get the i-th send */
  size_t order_sizes[] = {5u << 20, 10, (5u << 20) + 7, 0, 100, 4096, 9u << 20, 3};
  int nord = (int)(sizeof order_sizes / sizeof order_sizes[0]);
  gcomp_treq *oq[32];
  size_t olen[32];
  uint8_t *os[16], *orv[16];
  for (int i = 0; i < nord; i++) {
    size_t len = order_sizes[i] > max_bytes ? max_bytes : order_sizes[i];
    order_sizes[i] = len;
    os[i] = malloc(len + 1);
    orv[i] = malloc((9u << 20) + 8);
    fill(os[i], len, me, to, 100 + i);
    CHECK(gcomp_irecv(t, from, gcomp_tag(3, 7), orv[i], (9u << 20) + 8, &oq[nord + i]));
  }
  for (int i = 0; i < nord; i++) CHECK(gcomp_isend(t, to, gcomp_tag(3, 7), os[i], order_sizes[i], &oq[i]));
  CHECK(gcomp_waitall(t, 2 * nord, oq, olen));
  for (int i = 0; i < nord; i++) {
    EXPECT(olen[nord + i] == order_sizes[i], "ordered message %d from rank %d: %zu bytes, expected %zu",
           i, from, olen[nord + i], order_sizes[i]);
    size_t bad = first_bad(orv[i], order_sizes[i], from, me, 100 + i);
    EXPECT(bad == order_sizes[i], "ordered message %d from rank %d: wrong byte at %zu", i, from, bad);
    free(os[i]);
    free(orv[i]);
  }
  /* 3b: a flood of sends posted before any receive: messages arrive unexpected, and over
   * tcp the provider's queues fill up (-FI_EAGAIN is backpressure, retried by progress;
   * 'rxfull' covers the retry over shm). When some node holds two ranks (shm), 1000
   * messages: libfabric 1.17's shm endpoint has 1024 receive entries (FI_SHM_RX_SIZE),
   * shared by posted receives and unexpected messages, and a flood of 3000 left it, about
   * once in 60 runs with two other fabric jobs looping beside it, with every entry taken
   * and none coming back: the receiver could neither post a receive nor take the next
   * message (its log: "not enough space to post recv", "Error getting rx_entry"), a
   * deadlock only the timeout ended. 1000 ran 534 times under the same load without one. */
  const int FLOOD = t->nnodes < t->size ? 1000 : 3000;   /* the same on every rank */
  gcomp_treq **fq = calloc(2 * FLOOD, sizeof *fq);
  uint8_t *fs = malloc((size_t)FLOOD * 300), *fr = malloc((size_t)FLOOD * 300);
  size_t *fl = calloc(2 * FLOOD, sizeof *fl);
  for (int i = 0; i < FLOOD; i++) {
    size_t len = 100 + (size_t)(i % 200);
    fill(fs + (size_t)i * 300, len, me, to, i);
    CHECK(gcomp_isend(t, to, gcomp_tag(6, 0), fs + (size_t)i * 300, len, &fq[i]));
  }
  for (int i = 0; i < FLOOD; i++)
    CHECK(gcomp_irecv(t, from, gcomp_tag(6, 0), fr + (size_t)i * 300, 300, &fq[FLOOD + i]));
  CHECK(gcomp_waitall(t, 2 * FLOOD, fq, fl));
  for (int i = 0; i < FLOOD; i++) {
    size_t len = 100 + (size_t)(i % 200);
    EXPECT(fl[FLOOD + i] == len && first_bad(fr + (size_t)i * 300, len, from, me, i) == len,
           "flood message %d from rank %d: %zu bytes or content wrong", i, from, fl[FLOOD + i]);
  }
  free(fq);
  free(fs);
  free(fr);
  free(fl);
  /* 4: a message longer than the receive buffer is an error on the receiving side (shm only:
   * after a truncation, ofi_rxm 1.17 delivers nothing more on that endpoint). TRUNCS of them
   * at once, past the inline size (each needs a refusal header back, which the sender's
   * send waits for): more refusals than the 8 a peer once kept, beyond which they were
   * dropped and the sends waited out the timeout */
  enum { TRUNCS = 12, BIG = 8192 };
  static uint8_t big[TRUNCS][BIG], small[TRUNCS][16];
  gcomp_treq *tq[2 * TRUNCS] = {NULL};
  if (check_trunc) {
    for (int i = 0; i < TRUNCS; i++)
      CHECK(gcomp_irecv(t, from, gcomp_tag(4, (uint32_t)i), small[i], sizeof small[i], &tq[TRUNCS + i]));
    for (int i = 0; i < TRUNCS; i++)
      CHECK(gcomp_isend(t, to, gcomp_tag(4, (uint32_t)i), big[i], BIG, &tq[i]));
    for (int i = 0; i < TRUNCS; i++) CHECK(gcomp_wait(t, tq[i], NULL));
    for (int i = 0; i < TRUNCS; i++) {
      int s = gcomp_wait(t, tq[TRUNCS + i], NULL);
      EXPECT(s == GCOMP_ERR_INVALID, "oversized message %d gave %s (%s), expected "
             "GCOMP_ERR_INVALID", i, gcomp_strerror(s), gcomp_last_error());
    }
  }
  all_done(t);   /* 5 */
  printf("fabric_p2p: rank %d of %d OK (node %d of %d, %zu small messages per peer, up to %zu bytes)\n",
         me, n, t->node, t->nnodes, nsmall, max_bytes);
  free(reqs);
  free(lens);
  free(bufs);
  return 0;
}

static int mode_kill(gcomp_transport *t, int victim, int sig) {
  int n = t->size, to = (me + 1) % n, from = (me + n - 1) % n;
  size_t len = 16u << 20;
  uint8_t *sb = calloc(1, len), *rb = calloc(1, len);
  uint64_t start = 0;
  for (int it = 0; it < 1000; it++) {
    gcomp_treq *rq[2] = {NULL, NULL};
    int s = gcomp_irecv(t, from, gcomp_tag(9, (uint32_t)it), rb, len, &rq[0]);
    if (s == 0) s = gcomp_isend(t, to, gcomp_tag(9, (uint32_t)it), sb, len, &rq[1]);
    if (me == victim && it == 3) {
      for (int i = 0; i < 50; i++) gcomp_progress(t);   /* some bytes are on the wire */
      fprintf(stderr, "fabric_p2p rank %d: %s mid-transfer\n", me,
              sig == SIGKILL ? "killing myself" : "stopping (a silent peer)");
      fflush(stderr);
      raise(sig);
    }
    if (it == 3) start = gcomp_now_ns();
    if (s == 0) s = gcomp_waitall(t, 2, rq, NULL);
    if (s < 0) {
      double ms = start ? (double)(gcomp_now_ns() - start) / 1e6 : 0;
      printf("fabric_p2p: rank %d: error after %.0f ms: %s: %s\n", me, ms, gcomp_strerror(s),
             gcomp_last_error());
      fflush(stdout);
      gcomp_transport_destroy(t);
      free(sb);
      free(rb);
      exit(3);
    }
  }
  free(sb);
  free(rb);
  fprintf(stderr, "fabric_p2p rank %d: no error although rank %d was killed\n", me, victim);
  return 1;
}

/* Rank 0 posts more receives from rank 1 than the provider has receive entries (the test
 * sets FI_SHM_RX_SIZE) and rank 1 sends none of them. The first (posted: nothing arrives)
 * and the last (never taken by the provider) must each time out, and say that the
 * provider keeps refusing receives. Then rank 1 does send N messages to N fresh receives:
 * those beyond the entries wait in the transport, are posted as entries free up (the
 * retry after a refusal), and all arrive, in order. */
/* 2 ranks: both are done before either leaves */
static int pair_done(gcomp_transport *t) {
  all_done(t);
  printf("fabric_p2p: rank %d OK\n", me);
  return 0;
}

/* VmHWM (peak resident set) in KiB, or -1 */
static long peak_kib(void) {
  FILE *f = fopen("/proc/self/status", "r");
  if (!f) return -1;
  char line[256];
  long v = -1;
  while (fgets(line, sizeof line, f))
    if (sscanf(line, "VmHWM: %ld", &v) == 1) break;
  fclose(f);
  return v;
}

static int mode_flood(gcomp_transport *t, int n, size_t bytes) {
  EXPECT(t->size == 2 && n >= 1 && bytes >= 1, "flood needs 2 ranks, N >= 1 and BYTES >= 1");
  uint8_t *b = malloc((size_t)n * bytes);
  gcomp_treq **q = calloc((size_t)n, sizeof *q);
  size_t *lens = calloc((size_t)n, sizeof *lens);
  EXPECT(b && q && lens, "out of memory");
  memset(b, 0xee, (size_t)n * bytes);   /* touched now: not counted as the flood's growth */
  if (me == 1) {
    for (int i = 0; i < n; i++) {
      fill(b + (size_t)i * bytes, bytes, 1, 0, i);
      CHECK(gcomp_isend(t, 0, gcomp_tag(10, 0), b + (size_t)i * bytes, bytes, &q[i]));
    }
    CHECK(gcomp_waitall(t, n, q, NULL));
  } else {
    long before = peak_kib();
    /* the sends are all posted by now; progress takes what rank 1 may send meanwhile */
    uint64_t until = gcomp_now_ns() + (uint64_t)t->timeout_ms * 300000u;   /* 0.3 timeout */
    unsigned spins = 0;
    while (gcomp_now_ns() < until) gcomp_progress(t), gcomp_idle(&spins);
    long grew = peak_kib() - before;
    printf("fabric_p2p: rank 0: %d sends of %zu bytes pending at rank 1: peak memory grew %ld KiB\n",
           n, bytes, grew);
    EXPECT(before >= 0 && grew <= 8192, "peak memory grew by %ld KiB while %d messages of %zu "
           "bytes waited for receives", grew, n, bytes);
    for (int i = 0; i < n; i++)
      CHECK(gcomp_irecv(t, 1, gcomp_tag(10, 0), b + (size_t)i * bytes, bytes, &q[i]));
    CHECK(gcomp_waitall(t, n, q, lens));
    for (int i = 0; i < n; i++)
      EXPECT(lens[i] == bytes && first_bad(b + (size_t)i * bytes, bytes, 1, 0, i) == bytes,
             "flood message %d: %zu bytes or content wrong", i, lens[i]);
    printf("fabric_p2p: rank 0: then all %d arrived intact\n", n);
  }
  free(b);
  free(q);
  free(lens);
  return pair_done(t);
}

static int mode_rxfull(gcomp_transport *t, int nrecv) {
  EXPECT(nrecv >= 2, "rxfull needs 2 receives or more, not %d", nrecv);
  if (me == 0) {
    gcomp_treq **rq = calloc((size_t)nrecv, sizeof *rq);
    uint8_t *buf = calloc((size_t)nrecv, 8);
    for (int i = 0; i < nrecv; i++)
      CHECK(gcomp_irecv(t, 1, gcomp_tag(8, (uint32_t)i), buf + 8 * i, 8, &rq[i]));
    /* receives are matched in software: the provider never sees them, whatever their number */
    static const char *const where[2] = {"nothing arrived", "nothing arrived"};
    for (int k = 0; k < 2; k++) {
      int i = k ? nrecv - 1 : 0;
      uint64_t t0 = gcomp_now_ns();
      int s = gcomp_wait(t, rq[i], NULL);
      rq[i] = NULL;   /* the failed wait has freed it */
      double ms = (double)(gcomp_now_ns() - t0) / 1e6;
      const char *msg = gcomp_last_error();
      printf("fabric_p2p: rank 0: receive %d of %d after %.0f ms: %s: %s\n", i + 1, nrecv, ms,
             gcomp_strerror(s), msg);
      EXPECT(s == GCOMP_ERR_TIMEOUT, "receive %d gave %s, expected GCOMP_ERR_TIMEOUT", i + 1,
             gcomp_strerror(s));
      EXPECT(strstr(msg, where[k]) != NULL, "receive %d: the timeout does not say '%s': %s",
             i + 1, where[k], msg);
    }
    for (int i = 0; i < nrecv; i++) CHECK(gcomp_cancel(t, rq[i]));
    memset(buf, 0xff, (size_t)nrecv * 8);
    for (int i = 0; i < nrecv; i++)
      CHECK(gcomp_irecv(t, 1, gcomp_tag(9, 0), buf + 8 * i, 8, &rq[i]));
    CHECK(gcomp_waitall(t, nrecv, rq, NULL));
    for (int i = 0; i < nrecv; i++) {
      uint64_t v;
      memcpy(&v, buf + 8 * i, 8);
      EXPECT(v == (uint64_t)i, "message %d of %d after the refusals carried %llu", i, nrecv,
             (unsigned long long)v);
    }
    printf("fabric_p2p: rank 0: then %d messages arrived in order\n", nrecv);
    free(rq);
    free(buf);
  } else {
    /* out of the way until both of rank 0's receives have timed out, and back well before
     * rank 0's waits below would time out too */
    usleep((useconds_t)(5 * t->timeout_ms / 2) * 1000u);
    gcomp_treq **sq = calloc((size_t)nrecv, sizeof *sq);
    uint64_t *v = calloc((size_t)nrecv, sizeof *v);
    for (int i = 0; i < nrecv; i++) {
      v[i] = (uint64_t)i;
      CHECK(gcomp_isend(t, 0, gcomp_tag(9, 0), &v[i], 8, &sq[i]));
    }
    CHECK(gcomp_waitall(t, nrecv, sq, NULL));
    free(sq);
    free(v);
  }
  return pair_done(t);
}

/* Sizes around the runs: within one chunk, one run, partial last runs, many runs */
static size_t batch_size(size_t run, int i) {
  const size_t fixed[] = {5000, 8192, 8193, 65537};   /* above the inline limits */
  if (i < 4) return fixed[i];
  const size_t rel[][2] = {{1, (size_t)-1}, {1, 0}, {1, 1}, {2, 8191}, {5, 3}, {9, 4095}};
  return rel[i - 4][0] * run + rel[i - 4][1];
}
enum { NBATCH = 10 };

static int mode_batch(gcomp_transport *t, size_t run, size_t inl) {
  int n = t->size, to = (me + 1) % n, from = (me + n - 1) % n;
  EXPECT(run > 0, "RUN must be positive");
  size_t maxlen = batch_size(run, NBATCH - 1) + 8192;
  gcomp_treq *q[4 * NBATCH];
  size_t got[4 * NBATCH];
  uint8_t *sb[2 * NBATCH], *rb[2 * NBATCH];
  uint64_t expect = 0, before = t->data_msgs;
  /* 1: unscheduled (receives of spare capacity) and scheduled (capacity = length), all at once */
  for (int i = 0; i < 2 * NBATCH; i++) {
    size_t len = batch_size(run, i % NBATCH);
    int sched = i >= NBATCH;
    uint64_t tag = gcomp_tag(9, (uint32_t)i) | (sched ? GCOMP_TAG_SCHED : 0);
    sb[i] = malloc(maxlen);   /* part 2 reuses them */
    rb[i] = malloc(maxlen);
    EXPECT(sb[i] && rb[i], "allocating %zu bytes", maxlen);
    fill(sb[i], len, me, to, i);
    CHECK(gcomp_irecv(t, from, tag, rb[i], sched ? len : maxlen, &q[2 * i]));
    CHECK(gcomp_isend(t, to, tag, sb[i], len, &q[2 * i + 1]));
    expect += 2 * ((len + run - 1) / run);
  }
  CHECK(gcomp_waitall(t, 4 * NBATCH, q, got));
  for (int i = 0; i < 2 * NBATCH; i++) {
    size_t len = batch_size(run, i % NBATCH);
    EXPECT(got[2 * i] == len, "message %d from rank %d: %zu bytes, sent %zu", i, from,
           got[2 * i], len);
    size_t bad = first_bad(rb[i], len, from, me, i);
    EXPECT(bad == len, "message %d from rank %d (%zu bytes): wrong byte at %zu", i, from, len, bad);
  }
  uint64_t moved = t->data_msgs - before;
  EXPECT(moved == expect, "%d messages of %zu-%zu bytes each way took %llu provider messages, "
         "expected %llu (runs of %zu bytes)", 2 * NBATCH, batch_size(run, 0),
         batch_size(run, NBATCH - 1), (unsigned long long)moved, (unsigned long long)expect, run);
  /* 2: scheduled messages shorter than their receives: within the last run, at a run's end,
   * a run short of the capacity (the receive's runs past the end are withdrawn) */
  const size_t cut[][2] = {{3 * run + 5, 2 * run + 77}, {3 * run, 2 * run}, {2 * run + 1, run - 1},
                           {run + 4096, 4097}};
  int ncut = (int)(sizeof cut / sizeof cut[0]);
  for (int i = 0; i < ncut; i++) {
    uint64_t tag = gcomp_tag(10, (uint32_t)i) | GCOMP_TAG_SCHED;
    fill(sb[i], cut[i][1], me, to, 50 + i);
    memset(rb[i], 0, cut[i][0]);
    CHECK(gcomp_irecv(t, from, tag, rb[i], cut[i][0], &q[2 * i]));
    CHECK(gcomp_isend(t, to, tag, sb[i], cut[i][1], &q[2 * i + 1]));
  }
  CHECK(gcomp_waitall(t, 2 * ncut, q, got));
  for (int i = 0; i < ncut; i++) {
    EXPECT(got[2 * i] == cut[i][1], "short message %d from rank %d: %zu bytes, sent %zu", i,
           from, got[2 * i], cut[i][1]);
    size_t bad = first_bad(rb[i], cut[i][1], from, me, 50 + i);
    EXPECT(bad == cut[i][1], "short message %d from rank %d: wrong byte at %zu", i, from, bad);
  }
  /* 3: the inline limit: INLINE bytes inside the header, one more by RTS, CTS and data */
  for (int i = 0; i < 2; i++) {
    size_t len = inl + (size_t)i;
    fill(sb[i], len, me, to, 60 + i);
    uint64_t b0 = t->data_msgs;
    CHECK(gcomp_irecv(t, from, gcomp_tag(11, (uint32_t)i), rb[i], maxlen, &q[0]));
    CHECK(gcomp_isend(t, to, gcomp_tag(11, (uint32_t)i), sb[i], len, &q[1]));
    CHECK(gcomp_waitall(t, 2, q, got));
    EXPECT(got[0] == len && first_bad(rb[i], len, from, me, 60 + i) == len,
           "%zu-byte message from rank %d: %zu bytes or content wrong", len, from, got[0]);
    EXPECT(t->data_msgs - b0 == (uint64_t)(2 * i), "a %zu-byte message each way took %llu "
           "data messages, expected %d (inline up to %zu bytes)", len,
           (unsigned long long)(t->data_msgs - b0), 2 * i, inl);
  }
  for (int i = 0; i < 2 * NBATCH; i++) free(sb[i]), free(rb[i]);
  printf("fabric_p2p: rank %d batch OK: %llu provider messages for %d messages, runs of %zu "
         "bytes\n", me, (unsigned long long)moved, 4 * NBATCH, run);
  all_done(t);
  return 0;
}

static int read_iface_bytes(const char *iface, unsigned long long *rx, unsigned long long *tx) {
  FILE *f = fopen("/proc/net/dev", "r");
  if (!f) return -1;
  char line[512];
  int found = -1;
  while (fgets(line, sizeof line, f)) {
    char *colon = strchr(line, ':');
    if (!colon) continue;
    *colon = '\0';
    char *name = line;
    while (*name == ' ') name++;
    if (strcmp(name, iface) != 0) continue;
    unsigned long long v[9];
    if (sscanf(colon + 1, "%llu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2],
               &v[3], &v[4], &v[5], &v[6], &v[7], &v[8]) == 9) {
      *rx = v[0];
      *tx = v[8];
      found = 0;
    }
  }
  fclose(f);
  return found;
}

static int mode_netns(gcomp_transport *t, size_t len) {
  const char *iface = gcomp_env_foreign("FI_TCP_IFACE");
  EXPECT(iface && *iface, "FI_TCP_IFACE is not set (not started by gcomp-run with namespaces?)");
  unsigned long long rx0 = 0, tx0 = 0, rx1 = 0, tx1 = 0;
  EXPECT(read_iface_bytes(iface, &rx0, &tx0) == 0, "interface %s not in /proc/net/dev", iface);
  int last = t->size - 1;
  EXPECT(t->node_of[0] != t->node_of[last], "rank 0 and rank %d are on one node", last);
  uint8_t *b = malloc(len);
  if (me == 0) {
    fill(b, len, 0, last, 1);
    CHECK(gcomp_send(t, last, gcomp_tag(1, 1), b, len));
  } else if (me == last) {
    size_t got = 0;
    CHECK(gcomp_recv(t, 0, gcomp_tag(1, 1), b, len, &got));
    EXPECT(got == len && first_bad(b, len, 0, last, 1) == len, "payload damaged");
  }
  /* barrier so the counters are read after the transfer on both sides */
  uint8_t z = 0;
  if (me == 0 || me == last) {
    int p = me == 0 ? last : 0;
    gcomp_treq *bq[2];
    CHECK(gcomp_irecv(t, p, gcomp_tag(1, 2), &z, 1, &bq[0]));
    CHECK(gcomp_isend(t, p, gcomp_tag(1, 2), &z, 1, &bq[1]));
    CHECK(gcomp_waitall(t, 2, bq, NULL));
  }
  EXPECT(read_iface_bytes(iface, &rx1, &tx1) == 0, "interface %s vanished", iface);
  free(b);
  unsigned long long moved = me == 0 ? tx1 - tx0 : rx1 - rx0;
  printf("fabric_p2p: rank %d on %s: %s %llu bytes over %s (payload %zu)\n", me,
         gcomp_env_foreign("GCOMP_NODE_ID"), me == 0 ? "sent" : "received", moved, iface, len);
  if (me == 0 || me == last)
    EXPECT(moved >= len, "only %llu bytes crossed %s for a %zu-byte message", moved, iface, len);
  return 0;
}

/* Waits that block on the CQ's wait fd (gcomp_idle_blocker) must still see every message: a
 * wait that started long before its message comes blocks, and the data's arrival (not the
 * block's timeout) must end a block at least once. Which wait ends how depends on timing, so
 * only the counts over all rounds are checked. */
static int mode_cqwait(gcomp_transport *t, int expect) {
  enum { ROUNDS = 8, BYTES = 1 << 20 };
  EXPECT(t->size % 2 == 0, "cqwait runs on an even number of ranks, not %d", t->size);
  int half = t->size / 2, side = me >= half, peer = side ? me - half : me + half;
  uint8_t *buf = malloc(BYTES);
  EXPECT(buf != NULL, "no memory");
  int was = gcomp_idle_naps(GCOMP_NAPS_LENGTHEN);
  for (int r = 0; r < ROUNDS; r++) {
    int recv = r % 2 == side;
    if (recv) {
      memset(buf, 0, BYTES);
      CHECK(gcomp_recv(t, peer, gcomp_tag(7, (uint32_t)r), buf, BYTES, NULL));
      size_t bad = first_bad(buf, BYTES, peer, me, r);
      EXPECT(bad == BYTES, "round %d: byte %zu of %d differs", r, bad, BYTES);
    } else {
      fill(buf, BYTES, me, peer, r);
      struct timespec ts = {0, 20000000L};
      nanosleep(&ts, NULL);
      CHECK(gcomp_send(t, peer, gcomp_tag(7, (uint32_t)r), buf, BYTES));
    }
  }
  gcomp_idle_naps(was);
  all_done(t);
  free(buf);
  printf("fabric_p2p: rank %d: %llu waits blocked on the CQ's wait fd, %llu woken by it\n", me,
         (unsigned long long)t->blocked_waits, (unsigned long long)t->fd_wakes);
  if (expect)
    EXPECT(t->blocked_waits > 0 && t->fd_wakes > 0, "no wait blocked on the wait fd, or none was "
           "woken by arriving data");
  else
    EXPECT(t->blocked_waits == 0, "waits blocked without a wait fd");
  return 0;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc < 2) {
    fprintf(stderr, "usage: fabric_p2p p2p [MAX] | boot | kill VICTIM | stall VICTIM | rxfull N | flood N BYTES | netns BYTES | eager LIMIT | batch RUN INLINE | cqwait EXPECT\n");
    return 2;
  }
  gcomp_transport *t = NULL;
  uint64_t t0 = gcomp_now_ns();
  int s = gcomp_transport_env_for_testing(&t);
  if (s < 0) {
    fprintf(stderr, "fabric_p2p: transport: %s: %s\n", gcomp_strerror(s), gcomp_last_error());
    printf("fabric_p2p: bootstrap failed after %.0f ms\n", (double)(gcomp_now_ns() - t0) / 1e6);
    return strcmp(argv[1], "boot") == 0 ? 3 : 1;
  }
  me = t->rank;
  int rc = 2;
  if (strcmp(argv[1], "p2p") == 0) {
    rc = mode_p2p(t, argc > 2 ? (size_t)strtoull(argv[2], NULL, 0) : (size_t)64 << 20,
                  argc > 3 && strcmp(argv[3], "trunc") == 0);
  } else if (strcmp(argv[1], "boot") == 0) {
    printf("boot rank %d size %d local %d/%d node %d/%d\n", t->rank, t->size, t->local_rank,
           t->local_size, t->node, t->nnodes);
    rc = 0;
  } else if (strcmp(argv[1], "kill") == 0 && argc > 2) {
    rc = mode_kill(t, atoi(argv[2]), SIGKILL);
  } else if (strcmp(argv[1], "stall") == 0 && argc > 2) {
    rc = mode_kill(t, atoi(argv[2]), SIGSTOP);
  } else if (strcmp(argv[1], "flood") == 0 && argc > 3) {
    rc = mode_flood(t, atoi(argv[2]), (size_t)strtoull(argv[3], NULL, 10));
  } else if (strcmp(argv[1], "rxfull") == 0 && argc > 2 && t->size == 2) {
    rc = mode_rxfull(t, atoi(argv[2]));
  } else if (strcmp(argv[1], "batch") == 0 && argc > 3) {
    rc = mode_batch(t, (size_t)strtoull(argv[2], NULL, 0), (size_t)strtoull(argv[3], NULL, 0));
  } else if (strcmp(argv[1], "cqwait") == 0 && argc > 2) {
    rc = mode_cqwait(t, atoi(argv[2]));
  } else if (strcmp(argv[1], "netns") == 0 && argc > 2) {
    rc = mode_netns(t, (size_t)strtoull(argv[2], NULL, 0));
  } else if (strcmp(argv[1], "eager") == 0 && argc > 2) {
    /* over tcp;ofi_rxm the transport sends chunks eagerly: FI_OFI_RXM_EAGER_LIMIT is the
     * chunk size, unless the user had set it (argv[2]: the value expected) */
    const char *v = getenv("FI_OFI_RXM_EAGER_LIMIT");
    printf("fabric_p2p: rank %d: FI_OFI_RXM_EAGER_LIMIT=%s\n", me, v ? v : "(unset)");
    rc = 0;
    EXPECT(v && strcmp(v, argv[2]) == 0, "FI_OFI_RXM_EAGER_LIMIT is %s, expected %s", v ? v : "unset",
           argv[2]);
    if (rc == 0) rc = mode_p2p(t, (size_t)16 << 20, 0);
  }
  gcomp_transport_destroy(t);
  return rc;
}
