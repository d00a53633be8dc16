/* The abort notice and the corrupt-frame fault (abort.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "abort.h"
#include "coll.h"
#include "fault.h"
#include "gcomp_common.h"

#define NOTICE_MAGIC 0x6763616bu   /* "gcak" */
#define WATCH_PER_POLL 8

/* One notice: fixed size, so a receive of its size takes exactly one */
typedef struct {
  uint32_t magic;
  int32_t status;     /* what the reporter failed with */
  int32_t reporter, culprit;
  uint32_t seq;       /* the call's number */
  char why[236];      /* the reporter's detail, cut to fit */
} notice;

struct gcomp_abort {
  gcomp_abort_head head;   /* first: abort.h's inline checks read it */
  gcomp_transport *t;
  gcomp_treq **watch;   /* [size]: the posted receive from each peer, NULL when gone */
  notice *in;           /* [size]: where they land */
  notice out;           /* what this rank sends, once */
  unsigned polls;
  int cursor;           /* the next peer whose watch gcomp_abort_poll tests */
  int watching;         /* the receives are posted (GCOMP_NOTICE, on unless measuring it) */
  long calls;           /* user calls begun */
  long corrupt_call;    /* GCOMP_FAULT=corrupt: the call that corrupts a frame, or 0 */
  int corrupt_now;      /* armed for the running call and no frame corrupted yet */
  int told;             /* the peers were sent a notice (by the transport's user only) */
  int heard;            /* a peer's notice failed a call here: this rank does not echo it */
  gcomp_treq *late;     /* the notice to the rank it names, not waited for (tell_everyone) */
};

static uint64_t notice_tag(void) { return gcomp_tag(GCOMP_SEQ_NOTICE, 0); }

static int post(gcomp_abort *a, int peer) {
  return gcomp_irecv(a->t, peer, notice_tag(), &a->in[peer], sizeof a->in[peer],
                     &a->watch[peer]);
}

int gcomp_abort_create(gcomp_transport *t, int watch, gcomp_abort **out) {
  *out = NULL;
  gcomp_abort *a = calloc(1, sizeof *a);
  GCOMP_FAIL_IF(!a, GCOMP_ERR_NOMEM, "abort notices");
  a->t = t;
  a->watch = calloc((size_t)t->size, sizeof *a->watch);
  a->in = calloc((size_t)t->size, sizeof *a->in);
  if (!a->watch || !a->in) {
    gcomp_abort_destroy(a);
    GCOMP_FAIL(GCOMP_ERR_NOMEM, "abort notices for %d ranks", t->size);
  }
  /* the injected fault changes what is sent, never how a rank finds or reports it */
  long call = -1;
  if (gcomp_fault_armed("corrupt", t->rank, &call)) a->corrupt_call = call > 0 ? call : 1;
  a->head.counting = a->corrupt_call != 0;
  a->watching = watch;
  for (int p = 0; a->watching && p < t->size; p++) {
    if (p == t->rank) continue;
    int st = post(a, p);
    if (st < 0) {
      gcomp_abort_destroy(a);
      return gcomp_error_trace(st, __FILE__, __LINE__);
    }
  }
  if (!watch || a->corrupt_call)
    GCOMP_INFO(GCOMP_SUB_REDUCE, "abort notices %s%s", watch ? "watched" : "off (GCOMP_NOTICE=0)",
               a->corrupt_call ? "; GCOMP_FAULT: this rank corrupts a frame" : "");
  *out = a;
  return GCOMP_OK;
}

static void warn_unused(gcomp_abort *a) {
  if (!a->corrupt_now) return;
  a->corrupt_now = 0;
  GCOMP_WARN(GCOMP_SUB_REDUCE, "GCOMP_FAULT=corrupt: rank %d sent no encoded frame in call %ld "
             "(dense, or no codec): nothing corrupted; the fault needs a codec, whose frames "
             "carry checksums", a->t->rank, a->corrupt_call);
}

void gcomp_abort_destroy(gcomp_abort *a) {
  if (!a) return;
  warn_unused(a);
  for (int p = 0; a->watch && p < a->t->size; p++)
    if (a->watch[p]) gcomp_cancel(a->t, a->watch[p]);
  if (a->late) gcomp_cancel(a->t, a->late);
  free(a->watch);
  free(a->in);
  free(a);
}

void gcomp_abort_count_call(gcomp_abort *a) {
  warn_unused(a);
  a->calls++;
  a->corrupt_now = a->corrupt_call && a->calls == a->corrupt_call;
}

void gcomp_abort_corrupt_frame(gcomp_abort *a, uint8_t *frame, size_t len, int peer) {
  if (!a || !a->corrupt_now || !len) return;
  a->corrupt_now = 0;
  frame[len / 2] ^= 0x5a;   /* payload or block checksums: either fails the frame's CRCs */
  GCOMP_WARN(GCOMP_SUB_REDUCE, "GCOMP_FAULT=corrupt: rank %d flipped byte %zu of the %zu-byte "
             "frame it sends to rank %d in call %ld", a->t->rank, len / 2, len, peer, a->calls);
}

/* Sends the notice to every peer and waits until each send is done or failed (a dead
 * peer's fails; the live ones have their receive posted since creation), for at most
 * min(1 s, GCOMP_TIMEOUT_MS): a stopped peer may never take its notice, and the rank's
 * own failure must not wait on it. The send to `skip` (the rank found dead or silent, or -1)
 * is posted but not waited for: it stays pending until destroy, and a slow peer still gets
 * it. Once per communicator. */
static void tell_everyone(gcomp_abort *a, int skip) {
  gcomp_transport *t = a->t;
  if (a->told) return;
  a->told = 1;
  uint64_t deadline = gcomp_now_ns() + (uint64_t)(t->timeout_ms < 1000 ? t->timeout_ms : 1000) * 1000000u;
  gcomp_treq **reqs = calloc((size_t)t->size, sizeof *reqs);
  int left = 0;
  for (int p = 0; reqs && p < t->size; p++)
    if (p != t->rank && gcomp_isend(t, p, notice_tag(), &a->out, sizeof a->out, &reqs[p]) == GCOMP_OK)
      left++;
  if (reqs && skip >= 0 && skip < t->size && reqs[skip]) a->late = reqs[skip], reqs[skip] = NULL, left--;
  unsigned spins = 0;
  while (left > 0) {
    int moved = 0;
    for (int p = 0; p < t->size; p++) {
      if (!reqs[p]) continue;
      int done = 0;
      int st = gcomp_test(t, reqs[p], &done, NULL);
      if (st < 0 || done) reqs[p] = NULL, left--, moved = 1;
    }
    if (moved) spins = 0;
    else gcomp_idle(&spins);
    if (left > 0 && gcomp_now_ns() >= deadline) break;
  }
  for (int p = 0; reqs && p < t->size; p++)
    if (reqs[p]) gcomp_cancel(t, reqs[p]);
  free(reqs);
}

int gcomp_abort_corrupt_from(gcomp_abort *a, const gcomp_coll *c, int st, int culprit) {
  int me = c->t->rank;
  char detail[768];
  snprintf(detail, sizeof detail, "%s", gcomp_last_error());
  gcomp_error_set(st, __FILE__, __LINE__, "data from rank %d failed validation at rank %d: %s",
                  culprit, me, detail);
  if (!a || !a->watching || a->told) return st;   /* a->out may still be in flight */
  a->out = (notice){.magic = NOTICE_MAGIC, .status = st, .reporter = me, .culprit = culprit,
                    .seq = c->seq};
  snprintf(a->out.why, sizeof a->out.why, "%s", gcomp_last_error());
  snprintf(detail, sizeof detail, "%s", gcomp_last_error());
  tell_everyone(a, -1);
  return gcomp_error_restore(st, detail);
}

int gcomp_abort_failed(gcomp_abort *a, uint32_t seq, int st) {
  if (!a || !a->watching || a->told || a->heard ||
      (st != GCOMP_ERR_PEER && st != GCOMP_ERR_TIMEOUT))
    return st;
  int culprit = a->t->failed_peer;
  if (culprit < 0 || culprit >= a->t->size || culprit == a->t->rank) culprit = -1;
  char detail[768];
  snprintf(detail, sizeof detail, "%s", gcomp_last_error());
  a->out = (notice){.magic = NOTICE_MAGIC, .status = st, .reporter = a->t->rank,
                    .culprit = culprit, .seq = seq};
  snprintf(a->out.why, sizeof a->out.why, "%.*s", (int)sizeof a->out.why - 1, detail);
  uint64_t t0 = gcomp_now_ns();
  tell_everyone(a, culprit);
  GCOMP_INFO(GCOMP_SUB_REDUCE, "rank %d: told its peers that rank %d %s (%.1f ms)", a->t->rank,
             culprit, st == GCOMP_ERR_PEER ? "is gone" : "is silent",
             (double)(gcomp_now_ns() - t0) / 1e6);
  return gcomp_error_restore(st, detail);
}

/* A watched receive ended: a notice (returned as its status), or a failure of the receive
 * itself, which is no notice: a timeout (the peer was silent towards this rank, as peers
 * of other algorithms' steps are) posts it again, a dead peer's stays gone. */
static int landed(gcomp_abort *a, int p, int st, size_t len) {
  a->watch[p] = NULL;
  if (st == GCOMP_ERR_TIMEOUT) {
    post(a, p);
    return GCOMP_OK;
  }
  if (st < 0) return GCOMP_OK;
  const notice *m = &a->in[p];
  if (len != sizeof *m || m->magic != NOTICE_MAGIC || m->status >= 0 || m->reporter != p ||
      m->culprit < -1 || m->culprit >= a->t->size)
    GCOMP_FAIL(GCOMP_ERR_CORRUPT, "rank %d sent a malformed abort notice (%zu bytes)", p, len);
  a->heard = 1;
  char why[sizeof m->why + 1];
  memcpy(why, m->why, sizeof m->why);
  why[sizeof m->why] = '\0';
  /* a peer's death or silence another rank found (gcomp_abort_failed): both ranks named */
  if (m->status == GCOMP_ERR_PEER && m->culprit >= 0 && m->culprit != a->t->rank)
    a->t->failed_peer = m->culprit;   /* gcomp_abort_blame waits for no word from it */
  if (m->status == GCOMP_ERR_PEER && m->culprit >= 0)
    GCOMP_FAIL(m->status, "rank %d is gone: rank %d's notice (call seq %u) says: %s", m->culprit,
               p, m->seq, why);
  if (m->status == GCOMP_ERR_TIMEOUT && m->culprit >= 0)
    GCOMP_FAIL(m->status, "rank %d was silent towards rank %d: rank %d's notice (call seq %u) "
               "says: %s", m->culprit, p, p, m->seq, why);
  GCOMP_FAIL(m->status, "call aborted by rank %d's notice (call seq %u): %s", p, m->seq, why);
}

void gcomp_abort_request(gcomp_abort *a) {
  if (a) __atomic_store_n(&a->head.aborted, 1, __ATOMIC_RELEASE);
}

int gcomp_abort_here(gcomp_abort *a) {
  if (!gcomp_abort_requested(a)) return GCOMP_OK;
  int me = a->t->rank;
  if (!a->told && a->watching) {
    a->out = (notice){.magic = NOTICE_MAGIC, .status = GCOMP_ERR_ABORTED, .reporter = me,
                      .culprit = me};
    snprintf(a->out.why, sizeof a->out.why, "gcomp_comm_abort was called on rank %d", me);
    tell_everyone(a, -1);
  }
  GCOMP_FAIL(GCOMP_ERR_ABORTED, "gcomp_comm_abort was called on this rank (%d)", me);
}

int gcomp_abort_poll(gcomp_abort *a) {
  if (!a) return GCOMP_OK;
  if (gcomp_abort_requested(a)) return gcomp_abort_here(a);
  if ((++a->polls & 15u) != 0) return GCOMP_OK;
  /* at most WATCH_PER_POLL peers a pass, in turn: each test of a pending receive drives the
   * transport's progress, so testing all n-1 made an idle pass cost O(n); a notice now waits
   * at most ceil(n / WATCH_PER_POLL) passes to be seen (all at once up to 8 ranks) */
  int n = a->t->size;
  for (int k = 0; k < n && k < WATCH_PER_POLL; k++) {
    int p = a->cursor;
    a->cursor = p + 1 < n ? p + 1 : 0;
    if (!a->watch[p]) continue;
    int done = 0, failed = a->t->failed, failed_peer = a->t->failed_peer;
    size_t len = 0;
    int st = gcomp_test(a->t, a->watch[p], &done, &len);
    /* a watch that timed out (a peer that sent this rank nothing for GCOMP_TIMEOUT_MS) or
     * whose peer is gone is no failure of the transport's user: destroy's goodbyes and the
     * rank a notice names stay the call's */
    if (st < 0) a->t->failed = failed, a->t->failed_peer = failed_peer;
    if (st < 0 || done) GCOMP_CHECK(landed(a, p, st, len));
  }
  return GCOMP_OK;
}

int gcomp_abort_wait(gcomp_abort *a, gcomp_transport *t, gcomp_treq *req, size_t *len) {
  if (!a || !a->watching) return gcomp_wait(t, req, len);
  unsigned spins = 0;
  for (;;) {
    int done = 0;
    GCOMP_CHECK(gcomp_test(t, req, &done, len));
    if (done) return GCOMP_OK;
    gcomp_idle(&spins);
    int st = gcomp_abort_poll(a);
    if (st < 0) {
      gcomp_cancel(t, req);
      return gcomp_error_trace(st, __FILE__, __LINE__);
    }
  }
}

int gcomp_abort_waitall(gcomp_abort *a, gcomp_transport *t, int n, gcomp_treq **reqs) {
  if (!a || !a->watching) return gcomp_waitall(t, n, reqs, NULL);
  unsigned spins = 0;
  int st = GCOMP_OK, left = 0;
  for (int i = 0; i < n; i++) left += reqs[i] != NULL;
  while (left && st == GCOMP_OK) {
    int moved = 0;
    for (int i = 0; i < n && st == GCOMP_OK; i++) {
      if (!reqs[i]) continue;
      int done = 0;
      st = gcomp_test(t, reqs[i], &done, NULL);
      if (st < 0 || done) reqs[i] = NULL, left--, moved = 1;
    }
    if (st == GCOMP_OK && !moved) {
      gcomp_idle(&spins);
      st = gcomp_abort_poll(a);
    } else {
      spins = 0;
    }
  }
  for (int i = 0; st < 0 && i < n; i++)
    if (reqs[i]) gcomp_cancel(t, reqs[i]), reqs[i] = NULL;
  return st < 0 ? gcomp_error_trace(st, __FILE__, __LINE__) : GCOMP_OK;
}

/* ---- after a failure: who else failed, who is silent ---------------------------------- */
typedef struct {
  gcomp_treq **send, **recv;
  notice *in;
  char *state;   /* per peer: 0 waiting, 'r' reported, 'g' gone (exited), 's' silent */
} blame_tables;

static void blame_free(gcomp_transport *t, blame_tables *b) {
  for (int p = 0; p < t->size; p++) {
    if (b->send && b->send[p]) gcomp_cancel(t, b->send[p]);
    if (b->recv && b->recv[p]) gcomp_cancel(t, b->recv[p]);
  }
  free(b->send), free(b->recv), free(b->in), free(b->state);
}

/* Drives the sends and receives until every peer reported or is gone, or the deadline. The
 * dead peer's receive (-1: none) is waited for only until dead_by: a word it sent before it
 * exited is already here, and nothing more will come from it. */
static void blame_run(gcomp_transport *t, blame_tables *b, uint64_t deadline, int dead,
                      uint64_t dead_by) {
  unsigned spins = 0;
  for (;;) {
    int open = 0, moved = 0;
    uint64_t now = gcomp_now_ns();
    for (int p = 0; p < t->size; p++) {
      int done = 0;
      size_t len = 0;
      if (b->send[p]) {
        int st = gcomp_test(t, b->send[p], &done, NULL);
        if (st < 0 || done) b->send[p] = NULL, moved = 1;
        else open++;
      }
      if (!b->recv[p]) continue;
      done = 0;
      int st = gcomp_test(t, b->recv[p], &done, &len);
      if (st < 0 || done) {
        b->recv[p] = NULL, moved = 1;
        b->state[p] = st == GCOMP_ERR_PEER || p == dead ? (st < 0 ? 'g' : 'r')
                      : st < 0 ? 's' : 'r';
      } else if (p != dead || now < dead_by) {
        open++;
      }
    }
    if (!open || now >= deadline) break;
    if (moved) spins = 0;
    else gcomp_idle(&spins);
  }
  for (int p = 0; p < t->size; p++)
    if (p != t->rank && !b->state[p]) b->state[p] = p == dead ? 'g' : 's';
}

/* "rank 2, rank 5" for the peers in state s; 0 when there are none */
static int blame_list(const gcomp_transport *t, const blame_tables *b, char s, char *out,
                      size_t cap) {
  int k = 0;
  size_t at = 0;
  out[0] = '\0';
  for (int p = 0; p < t->size && at < cap; p++)
    if (p != t->rank && b->state[p] == s) {
      int w = snprintf(out + at, cap - at, "%srank %d", k ? ", " : "", p);
      if (w > 0) at += (size_t)w;
      k++;
    }
  return k;
}

/* The first peer that answered with a notice of this call failing with status, or -1 */
static int reporter_of(const blame_tables *b, int n, uint32_t seq, int status) {
  for (int p = 0; p < n; p++) {
    const notice *m = &b->in[p];
    if (b->state[p] == 'r' && m->magic == NOTICE_MAGIC && m->reporter == p &&
        m->status == status && m->seq == seq)
      return p;
  }
  return -1;
}

int gcomp_abort_blame(gcomp_transport *t, uint32_t seq, int st) {
  if ((st != GCOMP_ERR_TIMEOUT && st != GCOMP_ERR_PEER && st != GCOMP_ERR_CORRUPT &&
       st != GCOMP_ERR_INVALID) || t->size < 2)
    return st;
  char detail[1024];
  snprintf(detail, sizeof detail, "%s", gcomp_last_error());
  int n = t->size;
  blame_tables b = {calloc((size_t)n, sizeof *b.send), calloc((size_t)n, sizeof *b.recv),
                    calloc((size_t)n, sizeof *b.in), calloc((size_t)n, 1)};
  if (!b.send || !b.recv || !b.in || !b.state) {
    blame_free(t, &b);
    return gcomp_error_restore(st, detail);
  }
  notice out = {.magic = NOTICE_MAGIC, .status = st, .reporter = t->rank, .culprit = -1,
                .seq = seq};
  snprintf(out.why, sizeof out.why, "%.*s", (int)sizeof out.why - 1, detail);
  uint64_t tag = gcomp_tag(GCOMP_SEQ_BLAME, 0);
  /* the peer this failure says is dead (found here, or named by a notice) sends nothing
   * more: its word is read only if it is already here (a rank that refused a mismatched call
   * sends its word, then exits; the survivor finds it the exit first) */
  int dead = st == GCOMP_ERR_PEER ? t->failed_peer : -1;
  for (int p = 0; p < n; p++) {
    if (p == t->rank) continue;
    if (gcomp_irecv(t, p, tag, &b.in[p], sizeof b.in[p], &b.recv[p]) < 0) b.recv[p] = NULL;
    if (p == dead) continue;
    if (gcomp_isend(t, p, tag, &out, sizeof out, &b.send[p]) < 0) b.send[p] = NULL;
  }
  /* ranks stuck on the same culprit time out within a few ms of each other; a rank stuck
   * behind a failing one fails once that one exits, and finds its word already there */
  int wait_ms = t->timeout_ms / 4 < 250 ? t->timeout_ms / 4 : 250;
  /* the rank that found corrupt data stays until the others hear it: they answer when their
   * own wait times out (at once when the abort notice reached them), and a peer that has
   * exited takes no more messages */
  if (st == GCOMP_ERR_CORRUPT) wait_ms += t->timeout_ms;
  uint64_t now = gcomp_now_ns();
  /* a word already here takes a few polls of progress to match; 20 ms is ample for that and
   * keeps the survivors' errors within ms of each other */
  int dead_ms = wait_ms < 20 ? wait_ms : 20;
  blame_run(t, &b, now + (uint64_t)wait_ms * 1000000u, dead,
            now + (uint64_t)dead_ms * 1000000u);
  char failed[160], gone[160], silent[160], why[sizeof b.in->why + 32] = "";
  int nf = blame_list(t, &b, 'r', failed, sizeof failed);
  int ng = blame_list(t, &b, 'g', gone, sizeof gone);
  int ns = blame_list(t, &b, 's', silent, sizeof silent);
  /* a peer that found corrupt data, or the ranks' calls disagreeing (a count or dtype
   * mismatch: the peer that saw it may have left before its refusal reached this rank): that
   * is what this rank's timeout or peer failure came from. Corruption first. */
  int cause = 0, by = -1;
  if (st == GCOMP_ERR_TIMEOUT || st == GCOMP_ERR_PEER) {
    cause = GCOMP_ERR_CORRUPT, by = reporter_of(&b, n, seq, cause);
    if (by < 0) cause = GCOMP_ERR_INVALID, by = reporter_of(&b, n, seq, cause);
    if (by < 0) cause = 0;
    else
      snprintf(why, sizeof why, "rank %d reported: %.*s; ", by, (int)sizeof b.in->why,
               b.in[by].why);
  }
  blame_free(t, &b);
  /* every peer failed alike, or this rank found the corruption or mismatch itself: its own
   * detail */
  if (st == GCOMP_ERR_CORRUPT || st == GCOMP_ERR_INVALID || (!ng && !ns && !cause))
    return gcomp_error_restore(st, detail);
  char head[600];
  snprintf(head, sizeof head, "%s%s%s%s%s%s%s%s", ns ? "no word after the failure from " : "",
           ns ? silent : "", ns ? " (stopped, hung, or still waiting)" : "", ns && ng ? "; " : "",
           ng ? "exited: " : "", ng ? gone : "", nf && (ns || ng) ? "; " : "",
           nf ? "failed too: " : "");
  return gcomp_error_set(cause ? cause : st, __FILE__, __LINE__,
                         "%s%s%s; this rank: %s", why, head, nf ? failed : "", detail);
}
