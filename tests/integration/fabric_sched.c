/* Scheduled messages (GCOMP_TAG_SCHED: receiver-ready grants, fabric/ofi_proto.c) between
 * two real processes: fabric_sched, started by gcomp-run -n 2. Rank 1 receives, rank 0 sends.
 *   - a message shorter than the receive's capacity (posted chunks beyond its end are
 *     withdrawn), zero bytes, and exactly the capacity;
 *   - a message longer than the capacity fails the receive (GCOMP_ERR_INVALID), the send
 *     completes, and the pair keeps working;
 *   - several scheduled messages of one tag pair up in posting order, with the receives
 *     posted before the sends and after them (RTRs stored at the sender), interleaved with
 *     unscheduled messages to the same peer;
 *   - a cancelled scheduled receive whose RTR went out takes no message: the next receive of
 *     its tag gets the next send.
 * Run it with a small GCOMP_CHUNK_BYTES so that messages span several chunks and windows.
 * Exit 0 on success, 1 on a failed check. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gcomp_common.h"
#include "transport.h"
#include "test_hooks.h"

static int me = -1;

#define CHECK(call)                                                                         \
  do {                                                                                      \
    int s_ = (call);                                                                        \
    if (s_ < 0) {                                                                           \
      fprintf(stderr, "fabric_sched rank %d: %s failed: %s: %s\n", me, #call,               \
              gcomp_strerror(s_), gcomp_last_error());                                      \
      exit(1);                                                                              \
    }                                                                                       \
  } while (0)

#define EXPECT(cond, ...)                                                                   \
  do {                                                                                      \
    if (!(cond)) {                                                                          \
      fprintf(stderr, "fabric_sched rank %d: check failed: %s: ", me, #cond);               \
      fprintf(stderr, __VA_ARGS__);                                                         \
      fputc('\n', stderr);                                                                  \
      exit(1);                                                                              \
    }                                                                                       \
  } while (0)

static uint64_t tag_of(uint32_t step, int sched) {
  return gcomp_tag(7, step) | (sched ? GCOMP_TAG_SCHED : 0);
}

static void fill(uint8_t *b, size_t n, int idx) {
  for (size_t i = 0; i < n; i++) b[i] = (uint8_t)(i * 131u + (size_t)idx * 29u + (i >> 12));
}

static void expect_data(const uint8_t *b, size_t n, int idx, const char *what) {
  for (size_t i = 0; i < n; i++)
    EXPECT(b[i] == (uint8_t)(i * 131u + (size_t)idx * 29u + (i >> 12)),
           "%s: byte %zu of %zu differs", what, i, n);
}

/* A small unscheduled message from `from` to the other rank: orders the two sides */
static void sync_msg(gcomp_transport *t, int from, uint32_t step) {
  char b = 's';
  if (me == from)
    CHECK(gcomp_send(t, 1 - me, tag_of(step, 0), &b, 1));
  else
    CHECK(gcomp_recv(t, 1 - me, tag_of(step, 0), &b, 1, NULL));
}

enum { NMULTI = 6 };

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  gcomp_transport *t = NULL;
  int s = gcomp_transport_env_for_testing(&t);
  if (s < 0) {
    fprintf(stderr, "fabric_sched: transport: %s: %s\n", gcomp_strerror(s), gcomp_last_error());
    return 1;
  }
  me = t->rank;
  EXPECT(t->size == 2, "needs 2 ranks, has %d", t->size);
  const size_t cap = (size_t)1 << 20;
  uint8_t *buf = malloc(cap + 4096), *big = malloc(cap + 4096);
  EXPECT(buf && big, "memory");
  int peer = 1 - me;

  /* shorter, empty, exact */
  const size_t lens[] = {300001, 0, cap, 1, 65536};
  for (int i = 0; i < (int)(sizeof lens / sizeof *lens); i++) {
    if (me == 0) {
      fill(buf, lens[i], i);
      CHECK(gcomp_send(t, peer, tag_of(1, 1), buf, lens[i]));
    } else {
      memset(buf, 0xee, cap + 4096);
      size_t got = 12345;
      CHECK(gcomp_recv(t, peer, tag_of(1, 1), buf, cap, &got));
      EXPECT(got == lens[i], "message %d: %zu bytes received, %zu sent", i, got, lens[i]);
      expect_data(buf, got, i, "short message");
      EXPECT(buf[got] == 0xee || got == cap, "message %d: byte past the end was written", i);
    }
  }
  printf("fabric_sched rank %d: shorter, empty and exact messages ok\n", me);

  /* longer than the capacity: refused, the send completes, the pair goes on */
  if (me == 0) {
    fill(big, cap + 1, 50);
    CHECK(gcomp_send(t, peer, tag_of(2, 1), big, cap + 1));
    fill(buf, 4000, 51);
    CHECK(gcomp_send(t, peer, tag_of(2, 1), buf, 4000));
  } else {
    size_t got = 0;
    int st = gcomp_recv(t, peer, tag_of(2, 1), big, cap, &got);
    EXPECT(st == GCOMP_ERR_INVALID, "a message longer than the receive: %s (%s)",
           gcomp_strerror(st), st < 0 ? gcomp_last_error() : "no error");
    EXPECT(strstr(gcomp_last_error(), "exceeds the receive capacity"), "error says: %s",
           gcomp_last_error());
    CHECK(gcomp_recv(t, peer, tag_of(2, 1), buf, cap, &got));
    EXPECT(got == 4000, "after a refusal: %zu bytes", got);
    expect_data(buf, got, 51, "after a refusal");
  }
  printf("fabric_sched rank %d: a longer message refused\n", me);

  /* several of one tag, in posting order: receives first, then sends first */
  for (int order = 0; order < 2; order++) {
    uint8_t *m[NMULTI];
    gcomp_treq *rq[NMULTI] = {0}, *uq[NMULTI] = {0};
    uint8_t small[NMULTI][64];
    size_t mlen[NMULTI];
    for (int i = 0; i < NMULTI; i++) {
      mlen[i] = (size_t)(i + 1) * 150001u % cap;
      m[i] = malloc(cap);
      EXPECT(m[i], "memory");
    }
    int recv_first = order == 0;
    if (me == 1 && !recv_first) sync_msg(t, 0, 10 + (uint32_t)order);   /* sender posts first */
    if (me == 0 && recv_first) sync_msg(t, 1, 10 + (uint32_t)order);    /* RTRs went out first */
    if (me == 1) {
      for (int i = 0; i < NMULTI; i++) {
        CHECK(gcomp_irecv(t, peer, tag_of(3, 1), m[i], cap, &rq[i]));
        CHECK(gcomp_irecv(t, peer, tag_of(5, 0), small[i], sizeof small[i], &uq[i]));
      }
      if (recv_first) sync_msg(t, 1, 10 + (uint32_t)order);
      for (int i = 0; i < NMULTI; i++) {
        size_t got = 0;
        CHECK(gcomp_wait(t, rq[i], &got));
        EXPECT(got == mlen[i], "order %d message %d: %zu bytes, sent %zu", order, i, got,
               mlen[i]);
        expect_data(m[i], got, 100 + i, "one tag, in order");
        CHECK(gcomp_wait(t, uq[i], &got));
        EXPECT(got == 1 && small[i][0] == (uint8_t)i, "unscheduled message %d", i);
      }
    } else {
      gcomp_treq *sq[2 * NMULTI];
      uint8_t one[NMULTI];
      for (int i = 0; i < NMULTI; i++) {
        fill(m[i], mlen[i], 100 + i);
        one[i] = (uint8_t)i;
        CHECK(gcomp_isend(t, peer, tag_of(3, 1), m[i], mlen[i], &sq[2 * i]));
        CHECK(gcomp_isend(t, peer, tag_of(5, 0), &one[i], 1, &sq[2 * i + 1]));
      }
      if (!recv_first) sync_msg(t, 0, 10 + (uint32_t)order);
      CHECK(gcomp_waitall(t, 2 * NMULTI, sq, NULL));
    }
    for (int i = 0; i < NMULTI; i++) free(m[i]);
    printf("fabric_sched rank %d: %d messages of one tag in order (%s first)\n", me, NMULTI,
           recv_first ? "receives" : "sends");
  }

  /* a cancelled scheduled receive takes no message */
  if (me == 1) {
    gcomp_treq *r = NULL;
    CHECK(gcomp_irecv(t, peer, tag_of(4, 1), big, cap, &r));
    sync_msg(t, 1, 20);   /* the RTR went out before this */
    CHECK(gcomp_cancel(t, r));
    sync_msg(t, 1, 21);   /* ... and the cancellation before this */
    size_t got = 0;
    memset(buf, 0, cap);
    CHECK(gcomp_recv(t, peer, tag_of(4, 1), buf, cap, &got));
    EXPECT(got == 77777, "after a cancelled receive: %zu bytes", got);
    expect_data(buf, got, 60, "after a cancelled receive");
  } else {
    sync_msg(t, 1, 20);
    sync_msg(t, 1, 21);
    fill(buf, 77777, 60);
    CHECK(gcomp_send(t, peer, tag_of(4, 1), buf, 77777));
  }
  printf("fabric_sched rank %d: a cancelled receive took no message\n", me);

  sync_msg(t, 0, 30);
  free(buf);
  free(big);
  gcomp_transport_destroy(t);
  printf("fabric_sched rank %d: ok\n", me);
  return 0;
}
