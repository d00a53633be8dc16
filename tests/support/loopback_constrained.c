/* The constrained loopback: N ranks in one process over a model of libfabric 1.17's shm
 * (loopback_model.h: few receive entries shared by posted receives and unexpected
 * messages, in-order arrival per pair, in-order sender completions), and the protocol that
 * cuts each message into provider messages of `chunk_bytes`:
 *   - GCOMP_LB_GRANTED, today's rule (fabric/ofi_proto.c): a message's header is matched in
 *     software (at most `headers` unmatched per sender and receiver, then the sender waits),
 *     and payload moves only into receives the receiver posted after the match, a window of
 *     8 chunks at a time, each chunk's send posted once its receive holds an entry (over
 *     shm ofi_proto.c posts a run of granted chunks, up to OFI_RUN_BYTES, as one provider
 *     message, and its windows are in bytes: a model of that passes the run size as
 *     `chunk_bytes`);
 *   - GCOMP_LB_EAGER, the chunk protocol before 9bd5f53 (fabric/ofi_chunk.c): a first chunk
 *     tagged with the message's tag, then its continuation chunks, up to 8 in flight, sent
 *     before the receiver has matched anything; the receiver posts the continuations once
 *     the first chunk landed.
 * One lock per world: its ranks may be driven by one thread each or all from one. */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm.h"
#include "gcomp_common.h"
#include "loopback.h"
#include "loopback_model.h"
#include "loopback_constrained.h"

#define LBC_WINDOW 8   /* chunks of one message in flight, as both libfabric protocols */
#define LBC_FIRST (UINT64_C(1) << 62)
#define LBC_CONT (UINT64_C(2) << 62)

enum { T_SEND = 1, T_RECV = 2 };

struct gcomp_treq {
  int kind;
  int me, peer;
  uint64_t tag;
  const uint8_t *sbuf;
  uint8_t *rbuf;
  size_t len;                /* send: length; receive: capacity, then what arrived */
  int status;                /* 0 pending, 1 done, < 0 failed */
  uint64_t last_ns;          /* last activity */
  size_t next_off;           /* bytes whose provider operation is posted */
  size_t done_bytes;         /* bytes delivered (receive) or completed (send) */
  int inflight;              /* provider operations posted and not finished */
  int first_done;            /* eager receive: the first chunk landed */
  uint64_t seq;              /* eager: the message's number on its (sender, receiver) pair */
  gcomp_treq *match;         /* granted: the matched peer request */
  gcomp_treq *next, *prev;   /* software queues (granted) */
};

typedef struct {
  gcomp_treq *head, *tail;
} rlist;

typedef struct {
  pthread_mutex_t lock;
  int refs, size, headers, protocol;
  size_t chunk;
  lbm model;
  rlist *sw_unexp, *sw_recv; /* [size] granted: unmatched headers, unmatched receives */
  rlist *hdr_wait;           /* [size * size] granted: sends whose header must wait */
  int *hdr_count;            /* [size * size] unmatched headers of (src, dst) */
  uint64_t *send_seq;        /* [size * size] eager */
} lbc_world;

typedef gcomp_lb_rank lbc_transport;   /* its world is an lbc_world */

static lbc_world *world_of(gcomp_transport *tp) { return ((lbc_transport *)tp)->world; }

/* ---- software queues (granted) ------------------------------------------------------------ */
static void r_push(rlist *l, gcomp_treq *r) {
  r->next = NULL;
  r->prev = l->tail;
  if (l->tail)
    l->tail->next = r;
  else
    l->head = r;
  l->tail = r;
}

static void r_unlink(rlist *l, gcomp_treq *r) {
  if (r->prev)
    r->prev->next = r->next;
  else
    l->head = r->next;
  if (r->next)
    r->next->prev = r->prev;
  else
    l->tail = r->prev;
  r->next = r->prev = NULL;
}

static int r_contains(const rlist *l, const gcomp_treq *r) {
  for (const gcomp_treq *q = l->head; q; q = q->next)
    if (q == r) return 1;
  return 0;
}

static size_t pair(const lbc_world *w, int src, int dst) {
  return (size_t)src * (size_t)w->size + (size_t)dst;
}

static void t_fail(gcomp_treq *r, int status) {
  if (r->status == 0) r->status = status;
}

static void on_recv_done(void *ctx, lbm_msg *p, size_t got, int truncated);
static void on_send_done(void *ctx, lbm_msg *p);
static void on_recv_posted(void *ctx, lbm_msg *p);

/* ---- the eager protocol (before 9bd5f53) --------------------------------------------------- */
static void eager_send_more(lbc_world *w, gcomp_treq *s) {
  while (s->status == 0 && s->next_off < s->len && s->inflight < LBC_WINDOW) {
    size_t n = s->len - s->next_off < w->chunk ? s->len - s->next_off : w->chunk;
    lbm_msg *p = lbm_msg_new(1, s->me, s->peer, LBC_CONT | s->seq, s);
    if (!p) {
      t_fail(s, GCOMP_ERR_NOMEM);
      return;
    }
    p->sbuf = s->sbuf + s->next_off, p->len = n, p->off = s->next_off;
    s->next_off += n;
    s->inflight++;
    lbm_send(&w->model, p);
  }
}

static void eager_recv_more(lbc_world *w, gcomp_treq *r) {
  while (r->status == 0 && r->next_off < r->len && r->inflight < LBC_WINDOW) {
    size_t n = r->len - r->next_off < w->chunk ? r->len - r->next_off : w->chunk;
    lbm_msg *p = lbm_msg_new(0, r->peer, r->me, LBC_CONT | r->seq, r);
    if (!p) {
      t_fail(r, GCOMP_ERR_NOMEM);
      return;
    }
    p->rbuf = r->rbuf + r->next_off, p->len = n, p->off = r->next_off;
    r->next_off += n;
    r->inflight++;
    lbm_recv(&w->model, p, 0);
  }
}

/* ---- the granted protocol (fabric/ofi_proto.c's rule) --------------------------------------- */
static void granted_recv_more(lbc_world *w, gcomp_treq *r) {
  while (r->status == 0 && r->match && r->next_off < r->len && r->inflight < LBC_WINDOW) {
    size_t n = r->len - r->next_off < w->chunk ? r->len - r->next_off : w->chunk;
    lbm_msg *p = lbm_msg_new(0, r->peer, r->me, 0, r);
    if (!p) {
      t_fail(r, GCOMP_ERR_NOMEM);
      return;
    }
    p->rbuf = r->rbuf + r->next_off, p->len = n, p->off = r->next_off;
    p->target = p;   /* never matches an unexpected message: nothing is sent unasked */
    r->next_off += n;
    r->inflight++;
    lbm_recv(&w->model, p, 0);
  }
}

static void granted_header_in(lbc_world *w, gcomp_treq *s);

/* s's header meets receive r: the length is checked before any payload moves */
static void granted_match(lbc_world *w, gcomp_treq *s, gcomp_treq *r) {
  uint64_t now = gcomp_now_ns();
  s->last_ns = r->last_ns = now;
  if (s->len > r->len) {
    r->len = s->len;
    t_fail(r, GCOMP_ERR_INVALID);
    s->status = 1;   /* the sender is told to drop it */
    return;
  }
  r->len = s->len;
  if (!s->len) {
    s->status = r->status = 1;
    return;
  }
  s->match = r, r->match = s;
  granted_recv_more(w, r);
}

/* headers waiting at the sender come in, in order, while the receiver has room */
static void granted_admit(lbc_world *w, int src, int dst) {
  size_t k = pair(w, src, dst);
  gcomp_treq *s;
  while (w->hdr_count[k] < w->headers && (s = w->hdr_wait[k].head)) {
    r_unlink(&w->hdr_wait[k], s);
    granted_header_in(w, s);
  }
}

/* an unmatched header left the receiver's queue */
static void granted_header_out(lbc_world *w, int src, int dst) {
  w->hdr_count[pair(w, src, dst)]--;
  granted_admit(w, src, dst);
}

static void granted_header_in(lbc_world *w, gcomp_treq *s) {
  size_t k = pair(w, s->me, s->peer);
  for (gcomp_treq *r = w->sw_recv[s->peer].head; r; r = r->next)
    if (r->peer == s->me && r->tag == s->tag) {
      r_unlink(&w->sw_recv[s->peer], r);
      granted_match(w, s, r);
      return;
    }
  r_push(&w->sw_unexp[s->peer], s);
  w->hdr_count[k]++;
}

/* a receive holds an entry now; a granted one gets its chunk: the sender posts it */
static void on_recv_posted(void *ctx, lbm_msg *p) {
  lbc_world *w = ctx;
  gcomp_treq *r = p->owner, *s = r->match;
  r->last_ns = gcomp_now_ns();
  if (!p->target || !s) return;
  lbm_msg *q = lbm_msg_new(1, s->me, s->peer, 0, s);
  if (!q) {
    t_fail(s, GCOMP_ERR_NOMEM);
    return;
  }
  q->sbuf = s->sbuf + p->off, q->len = p->len, q->off = p->off, q->target = p;
  s->inflight++;
  lbm_send(&w->model, q);
}

/* ---- completions ------------------------------------------------------------------------- */
static void on_recv_done(void *ctx, lbm_msg *p, size_t got, int truncated) {
  lbc_world *w = ctx;
  gcomp_treq *r = p->owner;
  r->last_ns = gcomp_now_ns();
  if (w->protocol == GCOMP_LB_EAGER && !r->first_done) {
    r->first_done = 1;
    size_t total = (size_t)(p->data & ((UINT64_C(1) << 40) - 1));
    r->seq = p->data >> 40;
    r->inflight--;
    if (truncated || total > r->len) {
      r->len = total;
      t_fail(r, GCOMP_ERR_INVALID);
      return;
    }
    r->len = total;
    r->next_off = r->done_bytes = got;
    eager_recv_more(w, r);
  } else {
    r->inflight--;
    r->done_bytes += got;
    if (truncated) t_fail(r, GCOMP_ERR_INVALID);
    if (w->protocol == GCOMP_LB_EAGER)
      eager_recv_more(w, r);
    else
      granted_recv_more(w, r);
  }
  if (r->status == 0 && r->done_bytes >= r->len && r->inflight == 0) {
    r->status = 1;
    if (r->match) r->match->match = NULL;
    r->match = NULL;
  }
}

static void on_send_done(void *ctx, lbm_msg *p) {
  lbc_world *w = ctx;
  gcomp_treq *s = p->owner;
  s->last_ns = gcomp_now_ns();
  s->inflight--;
  s->done_bytes += p->len;
  if (w->protocol == GCOMP_LB_EAGER) eager_send_more(w, s);
  if (s->status == 0 && s->done_bytes >= s->len && s->inflight == 0 &&
      (w->protocol == GCOMP_LB_EAGER ? s->next_off >= s->len : 1)) {
    s->status = 1;
    if (s->match) s->match->match = NULL;
    s->match = NULL;
  }
}

/* Takes everything of r out of the model and the queues: nothing refers to r afterwards. */
static void t_withdraw(lbc_world *w, gcomp_treq *r) {
  lbm_withdraw(&w->model, r);
  if (r->match) {   /* the peer's half of the message cannot finish: it will time out */
    lbm_withdraw(&w->model, r->match);
    r->match->match = NULL;
    r->match = NULL;
  }
  if (r->kind == T_SEND) {
    size_t k = pair(w, r->me, r->peer);
    if (r_contains(&w->hdr_wait[k], r)) r_unlink(&w->hdr_wait[k], r);
    if (r_contains(&w->sw_unexp[r->peer], r)) {
      r_unlink(&w->sw_unexp[r->peer], r);
      granted_header_out(w, r->me, r->peer);
    }
  } else if (r_contains(&w->sw_recv[r->me], r)) {
    r_unlink(&w->sw_recv[r->me], r);
  }
}

/* ---- the ops ------------------------------------------------------------------------------ */
static int lbc_check(const lbc_transport *t, int peer, uint64_t tag, int nullarg,
                     const char *what) {
  GCOMP_FAIL_IF(tag & ~GCOMP_TAG_MASK, GCOMP_ERR_INVALID, "constrained loopback %s: tag 0x%" PRIx64
                " uses the transport's reserved bits", what, tag);
  GCOMP_FAIL_IF(peer < 0 || peer >= t->pub.size || peer == t->pub.rank, GCOMP_ERR_INVALID,
                "constrained loopback %s: rank %d: peer %d is not another rank of the %d", what,
                t->pub.rank, peer, t->pub.size);
  GCOMP_FAIL_IF(nullarg, GCOMP_ERR_INVALID, "constrained loopback %s: NULL argument", what);
  return GCOMP_OK;
}

static gcomp_treq *t_new(int kind, int me, int peer, uint64_t tag, size_t len) {
  gcomp_treq *r = calloc(1, sizeof *r);
  if (!r) return NULL;
  r->kind = kind, r->me = me, r->peer = peer, r->tag = tag, r->len = len;
  r->last_ns = gcomp_now_ns();
  return r;
}

static int lbc_isend(gcomp_transport *tp, int peer, uint64_t tag, const void *buf, size_t len,
                     gcomp_treq **req) {
  lbc_transport *t = (lbc_transport *)tp;
  GCOMP_CHECK(lbc_check(t, peer, tag, !req || (len && !buf), "isend"));
  GCOMP_FAIL_IF(len >> 40, GCOMP_ERR_INVALID, "constrained loopback: %zu bytes over 1 TiB", len);
  lbc_world *w = world_of(tp);
  gcomp_treq *s = t_new(T_SEND, tp->rank, peer, tag, len);
  GCOMP_FAIL_IF(!s, GCOMP_ERR_NOMEM, "constrained loopback send request");
  s->sbuf = buf;
  int status = GCOMP_OK;
  pthread_mutex_lock(&w->lock);
  if (w->protocol == GCOMP_LB_EAGER) {
    s->seq = w->send_seq[pair(w, tp->rank, peer)]++ & ((UINT64_C(1) << 24) - 1);
    size_t n = len < w->chunk ? len : w->chunk;
    lbm_msg *p = lbm_msg_new(1, tp->rank, peer, LBC_FIRST | tag, s);
    if (p) {
      p->sbuf = s->sbuf, p->len = n, p->data = s->seq << 40 | len;
      s->next_off = n;
      s->inflight = 1;
      lbm_send(&w->model, p);
      eager_send_more(w, s);
    } else {
      status = GCOMP_ERR_NOMEM;
    }
  } else {
    r_push(&w->hdr_wait[pair(w, tp->rank, peer)], s);   /* without room it waits here */
    granted_admit(w, tp->rank, peer);
  }
  if (status == GCOMP_OK) lbm_pump(&w->model);
  pthread_mutex_unlock(&w->lock);
  if (status < 0) free(s);
  GCOMP_FAIL_IF(status < 0, status, "constrained loopback send request");
  *req = s;
  return GCOMP_OK;
}

static int lbc_irecv(gcomp_transport *tp, int peer, uint64_t tag, void *buf, size_t capacity,
                     gcomp_treq **req) {
  lbc_transport *t = (lbc_transport *)tp;
  GCOMP_CHECK(lbc_check(t, peer, tag, !req || (capacity && !buf), "irecv"));
  lbc_world *w = world_of(tp);
  gcomp_treq *r = t_new(T_RECV, tp->rank, peer, tag, capacity);
  GCOMP_FAIL_IF(!r, GCOMP_ERR_NOMEM, "constrained loopback receive request");
  r->rbuf = buf;
  int status = GCOMP_OK;
  pthread_mutex_lock(&w->lock);
  if (w->protocol == GCOMP_LB_EAGER) {
    lbm_msg *p = lbm_msg_new(0, peer, tp->rank, LBC_FIRST | tag, r);
    if (p) {
      p->rbuf = buf, p->len = capacity < w->chunk ? capacity : w->chunk;
      r->inflight = 1;
      lbm_recv(&w->model, p, 1);
    } else {
      status = GCOMP_ERR_NOMEM;
    }
  } else {
    gcomp_treq *s = w->sw_unexp[tp->rank].head;
    for (; s; s = s->next)
      if (s->me == peer && s->tag == tag) break;
    if (s) {
      r_unlink(&w->sw_unexp[tp->rank], s);
      granted_header_out(w, peer, tp->rank);
      granted_match(w, s, r);
    } else {
      r_push(&w->sw_recv[tp->rank], r);
    }
  }
  if (status == GCOMP_OK) lbm_pump(&w->model);
  pthread_mutex_unlock(&w->lock);
  if (status < 0) free(r);
  GCOMP_FAIL_IF(status < 0, status, "constrained loopback receive request");
  *req = r;
  return GCOMP_OK;
}

/* what holds rank d's entries and headers, for the timeout's message */
static void entries_text(const lbc_world *w, int d, char *out, size_t cap) {
  char model[200];
  lbm_describe(&w->model, d, model, sizeof model);
  int headers = 0, waiting = 0;
  for (int s = 0; s < w->size; s++) {
    for (const gcomp_treq *r = w->hdr_wait[pair(w, s, d)].head; r; r = r->next) waiting++;
    headers += w->hdr_count[pair(w, s, d)];
  }
  if (w->protocol == GCOMP_LB_EAGER)
    snprintf(out, cap, "%s", model);
  else
    snprintf(out, cap, "%s; %d unmatched headers, %d more waiting at their senders", model,
             headers, waiting);
}

static int lbc_test(gcomp_transport *tp, gcomp_treq *r, int *done, size_t *len) {
  GCOMP_FAIL_IF(!r || !done, GCOMP_ERR_INVALID, "constrained loopback test: NULL argument");
  lbc_world *w = world_of(tp);
  *done = 0;
  pthread_mutex_lock(&w->lock);
  lbm_pump(&w->model);
  int st = r->status;
  char why[320] = "";
  /* quiet: neither the request nor anything between its two ranks moved (a request
   * waiting behind others to a busy peer does not time out, as over libfabric) */
  uint64_t last = r->last_ns, pair_ns = lbm_pair_active_ns(&w->model, r->me, r->peer);
  last = pair_ns > last ? pair_ns : last;
  if (st == 0 && (gcomp_now_ns() - last) / 1000000u >= (uint64_t)tp->timeout_ms) {
    entries_text(w, r->kind == T_SEND ? r->peer : r->me, why, sizeof why);
    t_withdraw(w, r);
    lbm_pump(&w->model);
    st = GCOMP_ERR_TIMEOUT;
  }
  pthread_mutex_unlock(&w->lock);
  if (st == 0) return GCOMP_OK;
  int kind = r->kind, peer = r->peer;
  uint64_t tag = r->tag;
  size_t got = r->len;
  free(r);
  if (st == 1) {
    if (len) *len = got;
    *done = 1;
    return GCOMP_OK;
  }
  if (st == GCOMP_ERR_TIMEOUT)
    GCOMP_FAIL(st, "constrained loopback rank %d: %s rank %d (tag 0x%" PRIx64 ") did not complete "
               "within GCOMP_TIMEOUT_MS=%d (%s)", tp->rank,
               kind == T_SEND ? "send to" : "receive from", peer, tag, tp->timeout_ms, why);
  if (st == GCOMP_ERR_INVALID)
    GCOMP_FAIL(st, "constrained loopback rank %d: message of %zu bytes from rank %d (tag 0x%" PRIx64
               ") exceeds the receive capacity: do all ranks pass the same count and dtype?",
               tp->rank, got, peer, tag);
  GCOMP_FAIL(st, "constrained loopback rank %d: request to rank %d failed", tp->rank, peer);
}

static int lbc_progress(gcomp_transport *tp) {
  lbc_world *w = world_of(tp);
  pthread_mutex_lock(&w->lock);
  lbm_pump(&w->model);
  pthread_mutex_unlock(&w->lock);
  return GCOMP_OK;
}

static int lbc_cancel(gcomp_transport *tp, gcomp_treq *r) {
  if (!r) return GCOMP_OK;
  lbc_world *w = world_of(tp);
  pthread_mutex_lock(&w->lock);
  t_withdraw(w, r);
  lbm_pump(&w->model);
  pthread_mutex_unlock(&w->lock);
  free(r);
  return GCOMP_OK;
}

static void world_free(lbc_world *w) {
  lbm_free(&w->model);
  free(w->sw_unexp), free(w->sw_recv), free(w->hdr_wait), free(w->hdr_count), free(w->send_seq);
  pthread_mutex_destroy(&w->lock);
  free(w);
}

static void lbc_destroy(gcomp_transport *tp) {
  lbc_world *w = world_of(tp);
  pthread_mutex_lock(&w->lock);
  int last = --w->refs == 0;
  pthread_mutex_unlock(&w->lock);
  if (last) world_free(w);
  gcomp_lb_rank_free(tp);
}

static const gcomp_transport_ops lbc_ops = {
    .name = "loopback",   /* in-process: a split communicator's children get the default one */
    .isend = lbc_isend,
    .irecv = lbc_irecv,
    .test = lbc_test,
    .progress = lbc_progress,
    .cancel = lbc_cancel,
    .destroy = lbc_destroy,
};

static lbc_world *world_new(int size, const gcomp_loopback_limits *lim) {
  lbc_world *w = calloc(1, sizeof *w);
  if (!w) return NULL;
  size_t nn = (size_t)size * (size_t)size;
  w->size = size;
  w->refs = size;
  w->headers = lim && lim->headers > 0 ? lim->headers : 64;
  w->protocol = lim ? lim->protocol : GCOMP_LB_GRANTED;
  w->chunk = lim && lim->chunk_bytes ? lim->chunk_bytes
                                      : (size_t)gcomp_param_int(GCOMP_P_CHUNK_BYTES);
  if (!w->chunk) w->chunk = 1;
  pthread_mutex_init(&w->lock, NULL);
  lbm_hooks hooks = {.recv_done = on_recv_done, .recv_posted = on_recv_posted,
                     .send_done = on_send_done, .ctx = w};
  int entries = lim && lim->entries > 0 ? lim->entries : 16;
  int st = lbm_init(&w->model, size, entries, w->protocol == GCOMP_LB_EAGER, &hooks);
  w->sw_unexp = calloc((size_t)size, sizeof *w->sw_unexp);
  w->sw_recv = calloc((size_t)size, sizeof *w->sw_recv);
  w->hdr_wait = calloc(nn, sizeof *w->hdr_wait);
  w->hdr_count = calloc(nn, sizeof *w->hdr_count);
  w->send_seq = calloc(nn, sizeof *w->send_seq);
  if (st < 0 || !w->sw_unexp || !w->sw_recv || !w->hdr_wait || !w->hdr_count || !w->send_seq) {
    world_free(w);
    return NULL;
  }
  return w;
}

int gcomp_loopback_create_constrained(int size, const int *node_of,
                                      const gcomp_loopback_limits *limits, gcomp_transport **out) {
  GCOMP_FAIL_IF(size < 1 || !out, GCOMP_ERR_INVALID, "constrained loopback: size %d must be >= 1",
                size);
  int proto = limits ? limits->protocol : GCOMP_LB_GRANTED;
  GCOMP_FAIL_IF(proto != GCOMP_LB_GRANTED && proto != GCOMP_LB_EAGER, GCOMP_ERR_INVALID,
                "constrained loopback: protocol %d is neither granted nor eager", proto);
  GCOMP_CHECK(gcomp_init());
  for (int i = 0; i < size; i++) out[i] = NULL;
  lbc_world *w = world_new(size, limits);
  GCOMP_FAIL_IF(!w, GCOMP_ERR_NOMEM, "constrained loopback world of %d ranks", size);
  gcomp_fabric_opts opts;   /* the environment's, as the default loopback's in tests */
  gcomp_fabric_opts_from(gcomp_config_settings(NULL), &opts);
  int status = gcomp_lb_ranks_create(size, node_of, &lbc_ops, w, &opts, out);
  if (status < 0) world_free(w);
  return status;
}
