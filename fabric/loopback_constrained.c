/* The constrained loopback: N ranks in one process over a model of libfabric 1.17's shm.
 *
 * Two layers, as in the libfabric transport, under one lock per world:
 *   - the provider model: each rank has `entries` receive entries, shared by its posted
 *     provider receives and the unexpected provider messages that arrived for it. Messages
 *     from one sender to one receiver arrive in order: the one at the head is taken when a
 *     posted receive matches it or an entry is free, else it stays with the sender (the
 *     provider holds it) and so does everything behind it. A receive that matches no
 *     unexpected message and finds no entry waits for one (backpressure); first-chunk
 *     receives wait in posting order, as the transport's FIFO posted them. A rank's provider
 *     sends complete in the order they were posted, whatever their peer: a delivered send
 *     behind an undelivered one stays incomplete.
 *   - the protocol that cuts a message into provider messages of `chunk_bytes`:
 *     GCOMP_LB_GRANTED is today's rule (fabric/ofi_proto.c): a header is matched in software
 *     (at most `headers` unmatched per sender and receiver, then the sender waits), and
 *     payload moves only into receives the receiver posted after matching, a window of 8
 *     chunks at a time, each send posted once its receive is. GCOMP_LB_EAGER is the chunk
 *     protocol before 9bd5f53 (fabric/ofi_chunk.c): a first chunk tagged with the message's
 *     tag, then its continuation chunks, up to 8 in flight, sent before the receiver has
 *     matched anything; the receiver posts the continuations once the first chunk landed.
 * Payload is copied straight from the sender's buffer when a send meets its receive. */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gcomp_common.h"
#include "transport.h"

#define LBC_WINDOW 8   /* chunks of one message in flight, as both libfabric protocols */
#define LBC_FIRST (UINT64_C(1) << 62)
#define LBC_CONT (UINT64_C(2) << 62)

enum { T_SEND = 1, T_RECV = 2 };
enum { P_WAIT, P_POSTED, P_UNEXP, P_DELIVERED };

typedef struct pmsg pmsg;
typedef struct plist {
  pmsg *head, *tail;
} plist;

/* one provider operation */
struct pmsg {
  int send;                  /* 1 send, 0 receive */
  int src, dst;
  uint64_t ptag;
  const uint8_t *sbuf;
  uint8_t *rbuf;
  size_t len;                /* send: bytes; receive: capacity */
  uint64_t data;             /* eager first chunk: seq << 40 | message length */
  size_t off;                /* where in the owner's buffer */
  int state;
  pmsg *target;              /* granted send: the receive it was granted for */
  uint8_t *owned;            /* an unexpected message whose sender let go: its copy */
  gcomp_treq *owner;         /* NULL once the owner let go */
  plist *in;                 /* the list it is on, if any */
  pmsg *next, *prev;
  pmsg *onext;               /* sends: the sender's posting order */
};

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
  int header_in;             /* granted send: its header reached the receiver */
  gcomp_treq *next, *prev;   /* software queues (granted) */
};

typedef struct {
  gcomp_treq *head, *tail;
} rlist;

typedef struct {
  pthread_mutex_t lock;
  int refs, size, entries, headers, protocol;
  size_t chunk;
  int *node_of;
  int *free_entries;         /* [size] */
  plist *wait_first;         /* [size] receives waiting for an entry, in order */
  plist *wait_more;          /* [size] continuation / data receives waiting for an entry */
  plist *posted, *unexp;     /* [size] */
  plist *wait_send;          /* [size * size] (src, dst): not taken yet, in order */
  pmsg **ohead, **otail;     /* [size] each sender's provider sends in posting order */
  rlist *sw_unexp, *sw_recv; /* [size] granted: unmatched headers, unmatched receives */
  rlist *hdr_wait;           /* [size * size] granted: sends whose header must wait */
  int *hdr_count;            /* [size * size] unmatched headers of (src, dst) */
  uint64_t *send_seq;        /* [size * size] */
  uint64_t *pair_ns;         /* [size * size] last time anything moved from src to dst */
} lbc_world;

typedef struct {
  gcomp_transport pub;
  lbc_world *world;
  int *topo;
} lbc_transport;

/* ---- lists ------------------------------------------------------------------------------- */
static void p_push(plist *l, pmsg *p) {
  p->next = NULL;
  p->prev = l->tail;
  if (l->tail)
    l->tail->next = p;
  else
    l->head = p;
  l->tail = p;
  p->in = l;
}

static void p_unlink(pmsg *p) {
  plist *l = p->in;
  if (!l) return;
  if (p->prev)
    p->prev->next = p->next;
  else
    l->head = p->next;
  if (p->next)
    p->next->prev = p->prev;
  else
    l->tail = p->prev;
  p->next = p->prev = NULL;
  p->in = NULL;
}

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

static size_t pair(const lbc_world *w, int src, int dst) { return (size_t)src * (size_t)w->size + (size_t)dst; }

/* ---- the provider model ------------------------------------------------------------------ */
static pmsg *p_new(lbc_world *w, int send, int src, int dst, uint64_t ptag, gcomp_treq *owner) {
  (void)w;
  pmsg *p = calloc(1, sizeof *p);
  if (!p) return NULL;
  p->send = send, p->src = src, p->dst = dst, p->ptag = ptag, p->owner = owner;
  p->state = P_WAIT;
  return p;
}

/* a send enters its pair's queue and its sender's completion order */
static void p_post_send(lbc_world *w, pmsg *p) {
  p_push(&w->wait_send[pair(w, p->src, p->dst)], p);
  if (w->otail[p->src])
    w->otail[p->src]->onext = p;
  else
    w->ohead[p->src] = p;
  w->otail[p->src] = p;
}

static void t_fail(gcomp_treq *r, int status) {
  if (r->status == 0) r->status = status;
}

static void on_recv_done(lbc_world *w, gcomp_treq *r, pmsg *p, size_t got, int truncated);
static void on_send_done(lbc_world *w, gcomp_treq *s, pmsg *p);
static void on_recv_posted(lbc_world *w, pmsg *p);

/* a send meets its receive: the payload moves, the receive is finished, the send waits
 * for its turn to complete */
static void p_deliver(lbc_world *w, pmsg *s, pmsg *r) {
  int truncated = s->len > r->len;
  if (!truncated && s->len) memcpy(r->rbuf, s->owned ? s->owned : s->sbuf, s->len);
  r->data = s->data;
  s->state = P_DELIVERED;
  w->pair_ns[pair(w, s->src, s->dst)] = gcomp_now_ns();
  gcomp_treq *ro = r->owner;
  if (ro) on_recv_done(w, ro, r, s->len, truncated);
  free(r);
}

static pmsg *p_find(const plist *l, int src, uint64_t ptag) {
  for (pmsg *p = l->head; p; p = p->next)
    if (p->src == src && p->ptag == ptag) return p;
  return NULL;
}

/* tries to post receive p at rank d; returns 1 when it left the waiting list */
static int p_try_recv(lbc_world *w, int d, pmsg *p) {
  pmsg *m = p->target ? NULL : p_find(&w->unexp[d], p->src, p->ptag);
  if (m) {
    p_unlink(p);
    p_unlink(m);
    w->free_entries[d]++;
    p_deliver(w, m, p);
    return 1;
  }
  if (w->free_entries[d] <= 0) return 0;
  p_unlink(p);
  w->free_entries[d]--;
  p->state = P_POSTED;
  p_push(&w->posted[d], p);
  if (p->owner) p->owner->last_ns = gcomp_now_ns();
  on_recv_posted(w, p);
  return 1;
}

/* one pass over the world; returns how many things moved */
static int p_pass(lbc_world *w) {
  int moved = 0;
  for (int d = 0; d < w->size; d++) {
    /* granted data receives never match an unexpected message: without an entry, stop */
    for (pmsg *p = w->wait_more[d].head, *nx; p; p = nx) {
      if (w->free_entries[d] <= 0 && w->protocol == GCOMP_LB_GRANTED) break;
      nx = p->next;   /* p_try_recv only appends to this list */
      moved += p_try_recv(w, d, p);
    }
    while (w->wait_first[d].head && p_try_recv(w, d, w->wait_first[d].head)) moved++;
  }
  for (int s = 0; s < w->size; s++)
    for (int d = 0; d < w->size; d++) {
      plist *q = &w->wait_send[pair(w, s, d)];
      while (q->head) {
        pmsg *p = q->head;
        pmsg *m = p->target ? p->target : p_find(&w->posted[d], s, p->ptag);
        if (m && m->state == P_POSTED) {
          p_unlink(p);
          p_unlink(m);
          w->free_entries[d]++;
          p_deliver(w, p, m);
        } else if (w->free_entries[d] > 0 && !p->target) {
          p_unlink(p);
          w->free_entries[d]--;
          p->state = P_UNEXP;
          p_push(&w->unexp[d], p);
        } else {
          break;
        }
        moved++;
      }
    }
  for (int s = 0; s < w->size; s++)
    while (w->ohead[s] && w->ohead[s]->state == P_DELIVERED) {
      pmsg *p = w->ohead[s];
      w->ohead[s] = p->onext;
      if (!w->ohead[s]) w->otail[s] = NULL;
      gcomp_treq *o = p->owner;
      if (o) on_send_done(w, o, p);
      free(p->owned);
      free(p);
      moved++;
    }
  return moved;
}

static void p_pump(lbc_world *w) {
  while (p_pass(w)) {
  }
}

/* ---- the eager protocol (before 9bd5f53) --------------------------------------------------- */
static void eager_send_more(lbc_world *w, gcomp_treq *s) {
  while (s->status == 0 && s->next_off < s->len && s->inflight < LBC_WINDOW) {
    size_t n = s->len - s->next_off < w->chunk ? s->len - s->next_off : w->chunk;
    pmsg *p = p_new(w, 1, s->me, s->peer, LBC_CONT | s->seq, s);
    if (!p) {
      t_fail(s, GCOMP_ERR_NOMEM);
      return;
    }
    p->sbuf = s->sbuf + s->next_off, p->len = n, p->off = s->next_off;
    s->next_off += n;
    s->inflight++;
    p_post_send(w, p);
  }
}

static void eager_recv_more(lbc_world *w, gcomp_treq *r) {
  while (r->status == 0 && r->next_off < r->len && r->inflight < LBC_WINDOW) {
    size_t n = r->len - r->next_off < w->chunk ? r->len - r->next_off : w->chunk;
    pmsg *p = p_new(w, 0, r->peer, r->me, LBC_CONT | r->seq, r);
    if (!p) {
      t_fail(r, GCOMP_ERR_NOMEM);
      return;
    }
    p->rbuf = r->rbuf + r->next_off, p->len = n, p->off = r->next_off;
    r->next_off += n;
    r->inflight++;
    p_push(&w->wait_more[r->me], p);
  }
}

/* ---- the granted protocol (fabric/ofi_proto.c's rule) --------------------------------------- */
static void granted_recv_more(lbc_world *w, gcomp_treq *r) {
  while (r->status == 0 && r->match && r->next_off < r->len && r->inflight < LBC_WINDOW) {
    size_t n = r->len - r->next_off < w->chunk ? r->len - r->next_off : w->chunk;
    pmsg *p = p_new(w, 0, r->peer, r->me, 0, r);
    if (!p) {
      t_fail(r, GCOMP_ERR_NOMEM);
      return;
    }
    p->rbuf = r->rbuf + r->next_off, p->len = n, p->off = r->next_off;
    p->target = p;   /* never matches an unexpected message: nothing is sent unasked */
    r->next_off += n;
    r->inflight++;
    p_push(&w->wait_more[r->me], p);
  }
}

static void granted_header_in(lbc_world *w, gcomp_treq *s);

/* s's header meets receive r: the length is checked before any payload moves */
static void granted_match(lbc_world *w, gcomp_treq *s, gcomp_treq *r) {
  uint64_t now = gcomp_now_ns();
  s->last_ns = r->last_ns = w->pair_ns[pair(w, s->me, s->peer)] = now;
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
  s->header_in = 1;
  for (gcomp_treq *r = w->sw_recv[s->peer].head; r; r = r->next)
    if (r->peer == s->me && r->tag == s->tag) {
      r_unlink(&w->sw_recv[s->peer], r);
      granted_match(w, s, r);
      return;
    }
  r_push(&w->sw_unexp[s->peer], s);
  w->hdr_count[k]++;
}

/* a data receive holds an entry now: its chunk is granted and the sender posts it */
static void on_recv_posted(lbc_world *w, pmsg *p) {
  if (!p->target) return;
  gcomp_treq *r = p->owner, *s = r ? r->match : NULL;
  if (!s) return;
  pmsg *q = p_new(w, 1, s->me, s->peer, 0, s);
  if (!q) {
    t_fail(s, GCOMP_ERR_NOMEM);
    return;
  }
  q->sbuf = s->sbuf + p->off, q->len = p->len, q->off = p->off, q->target = p;
  s->inflight++;
  p_post_send(w, q);
}

/* ---- completions ------------------------------------------------------------------------- */
static void on_recv_done(lbc_world *w, gcomp_treq *r, pmsg *p, size_t got, int truncated) {
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

static void on_send_done(lbc_world *w, gcomp_treq *s, pmsg *p) {
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

/* Takes everything of r out of the model: nothing refers to r afterwards. Unexpected
 * messages already at the receiver stay there (the provider holds them) with a copy. */
static void t_withdraw(lbc_world *w, gcomp_treq *r) {
  for (size_t k = 0; k < (size_t)w->size * (size_t)w->size; k++)
    for (pmsg *p = w->wait_send[k].head, *nx; p; p = nx) {
      nx = p->next;
      /* r's own sends, and sends granted for r's receives (before those are freed) */
      if (p->owner == r || (p->target && p->target->owner == r)) {
        p_unlink(p);
        if (p->owner && p->owner != r) p->owner->inflight--;
        p->state = P_DELIVERED;
        p->owner = NULL;
      }
    }
  for (int i = 0; i < w->size; i++) {
    plist *lists[] = {&w->wait_first[i], &w->wait_more[i], &w->posted[i], &w->unexp[i]};
    for (size_t k = 0; k < sizeof lists / sizeof lists[0]; k++)
      for (pmsg *p = lists[k]->head, *nx; p; p = nx) {
        nx = p->next;
        if (p->owner != r) continue;
        if (p->state == P_UNEXP) {
          p->owned = malloc(p->len ? p->len : 1);
          if (p->owned && p->len) memcpy(p->owned, p->sbuf, p->len);
          if (!p->owned) {   /* cannot keep it: the message is lost, like a dead sender's */
            p_unlink(p);
            w->free_entries[i]++;
            p->state = P_DELIVERED;
          }
          p->owner = NULL;
          continue;
        }
        if (p->state == P_POSTED) w->free_entries[i]++;
        p_unlink(p);
        if (!p->send) free(p);
        else p->state = P_DELIVERED, p->owner = NULL;   /* freed in posting order */
      }
  }
  for (int s = 0; s < w->size; s++)
    for (pmsg *p = w->ohead[s]; p; p = p->onext)
      if (p->owner == r) p->owner = NULL;
  if (r->match) {   /* the peer's half of the message cannot finish: it will time out */
    gcomp_treq *o = r->match;
    o->match = NULL;
    for (int i = 0; i < w->size; i++) {
      plist *lists[] = {&w->wait_more[i], &w->posted[i]};
      for (size_t k = 0; k < 2; k++)
        for (pmsg *p = lists[k]->head, *nx; p; p = nx) {
          nx = p->next;
          if (p->owner != o || !p->target) continue;
          if (p->state == P_POSTED) w->free_entries[i]++;
          p_unlink(p);
          o->inflight--;
          free(p);
        }
    }
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
  lbc_world *w = t->world;
  gcomp_treq *s = t_new(T_SEND, tp->rank, peer, tag, len);
  GCOMP_FAIL_IF(!s, GCOMP_ERR_NOMEM, "constrained loopback send request");
  s->sbuf = buf;
  int status = GCOMP_OK;
  pthread_mutex_lock(&w->lock);
  if (w->protocol == GCOMP_LB_EAGER) {
    s->seq = w->send_seq[pair(w, tp->rank, peer)]++ & ((UINT64_C(1) << 24) - 1);
    size_t n = len < w->chunk ? len : w->chunk;
    pmsg *p = p_new(w, 1, tp->rank, peer, LBC_FIRST | tag, s);
    if (p) {
      p->sbuf = s->sbuf, p->len = n, p->data = s->seq << 40 | len;
      s->next_off = n;
      s->inflight = 1;
      p_post_send(w, p);
      eager_send_more(w, s);
    } else {
      status = GCOMP_ERR_NOMEM;
    }
  } else {
    r_push(&w->hdr_wait[pair(w, tp->rank, peer)], s);   /* without room it waits here */
    granted_admit(w, tp->rank, peer);
  }
  if (status == GCOMP_OK) p_pump(w);
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
  lbc_world *w = t->world;
  gcomp_treq *r = t_new(T_RECV, tp->rank, peer, tag, capacity);
  GCOMP_FAIL_IF(!r, GCOMP_ERR_NOMEM, "constrained loopback receive request");
  r->rbuf = buf;
  int status = GCOMP_OK;
  pthread_mutex_lock(&w->lock);
  if (w->protocol == GCOMP_LB_EAGER) {
    pmsg *p = p_new(w, 0, peer, tp->rank, LBC_FIRST | tag, r);
    if (p) {
      p->rbuf = buf, p->len = capacity < w->chunk ? capacity : w->chunk;
      r->inflight = 1;
      p_push(&w->wait_first[tp->rank], p);
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
  if (status == GCOMP_OK) p_pump(w);
  pthread_mutex_unlock(&w->lock);
  if (status < 0) free(r);
  GCOMP_FAIL_IF(status < 0, status, "constrained loopback receive request");
  *req = r;
  return GCOMP_OK;
}

/* what holds the entries of rank d, for the timeout's message */
static void entries_text(const lbc_world *w, int d, char *out, size_t cap) {
  int posted = 0, unexp = 0, held = 0, headers = 0, waiting = 0;
  for (const pmsg *p = w->posted[d].head; p; p = p->next) posted++;
  for (const pmsg *p = w->unexp[d].head; p; p = p->next) unexp++;
  for (int s = 0; s < w->size; s++) {
    for (const pmsg *p = w->wait_send[pair(w, s, d)].head; p; p = p->next) held++;
    for (const gcomp_treq *r = w->hdr_wait[pair(w, s, d)].head; r; r = r->next) waiting++;
    headers += w->hdr_count[pair(w, s, d)];
  }
  snprintf(out, cap, "rank %d's %d receive entries: %d posted receives, %d unexpected messages; "
           "%d messages held by their senders; %d unmatched headers, %d more waiting to be sent",
           d, w->entries, posted, unexp, held, headers, waiting);
}

static int lbc_test(gcomp_transport *tp, gcomp_treq *r, int *done, size_t *len) {
  lbc_transport *t = (lbc_transport *)tp;
  GCOMP_FAIL_IF(!r || !done, GCOMP_ERR_INVALID, "constrained loopback test: NULL argument");
  lbc_world *w = t->world;
  *done = 0;
  pthread_mutex_lock(&w->lock);
  p_pump(w);
  int st = r->status;
  char why[320] = "";
  /* quiet: neither the request nor anything between its two ranks moved (a request
   * waiting behind others to a busy peer does not time out, as over libfabric) */
  uint64_t last = r->last_ns, a = w->pair_ns[pair(w, r->me, r->peer)],
           b = w->pair_ns[pair(w, r->peer, r->me)];
  last = a > last ? a : last;
  last = b > last ? b : last;
  if (st == 0 && (gcomp_now_ns() - last) / 1000000u >= (uint64_t)tp->timeout_ms) {
    entries_text(w, r->kind == T_SEND ? r->peer : r->me, why, sizeof why);
    t_withdraw(w, r);
    p_pump(w);
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
               "within GCOMP_TIMEOUT_MS=%d (%s)", tp->rank, kind == T_SEND ? "send to" : "receive from",
               peer, tag, tp->timeout_ms, why);
  if (st == GCOMP_ERR_INVALID)
    GCOMP_FAIL(st, "constrained loopback rank %d: message of %zu bytes from rank %d (tag 0x%" PRIx64
               ") exceeds the receive capacity: do all ranks pass the same count and dtype?",
               tp->rank, got, peer, tag);
  GCOMP_FAIL(st, "constrained loopback rank %d: request to rank %d failed", tp->rank, peer);
}

static int lbc_progress(gcomp_transport *tp) {
  lbc_world *w = ((lbc_transport *)tp)->world;
  pthread_mutex_lock(&w->lock);
  p_pump(w);
  pthread_mutex_unlock(&w->lock);
  return GCOMP_OK;
}

static int lbc_cancel(gcomp_transport *tp, gcomp_treq *r) {
  if (!r) return GCOMP_OK;
  lbc_world *w = ((lbc_transport *)tp)->world;
  pthread_mutex_lock(&w->lock);
  t_withdraw(w, r);
  p_pump(w);
  pthread_mutex_unlock(&w->lock);
  free(r);
  return GCOMP_OK;
}

static void free_plist(plist *l) {
  while (l->head) {
    pmsg *p = l->head;
    p_unlink(p);
    if (!p->send) free(p);   /* sends are freed from their sender's order below */
  }
}

static void world_free(lbc_world *w) {
  for (int i = 0; w->wait_first && i < w->size; i++) {
    free_plist(&w->wait_first[i]), free_plist(&w->wait_more[i]);
    free_plist(&w->posted[i]), free_plist(&w->unexp[i]);
  }
  for (size_t k = 0; w->wait_send && k < (size_t)w->size * (size_t)w->size; k++)
    free_plist(&w->wait_send[k]);
  for (int s = 0; w->ohead && s < w->size; s++)
    for (pmsg *p = w->ohead[s], *nx; p; p = nx) {
      nx = p->onext;
      free(p->owned);
      free(p);
    }
  free(w->node_of), free(w->free_entries), free(w->wait_first), free(w->wait_more);
  free(w->posted), free(w->unexp), free(w->wait_send), free(w->ohead), free(w->otail);
  free(w->sw_unexp), free(w->sw_recv), free(w->hdr_wait), free(w->hdr_count), free(w->send_seq);
  free(w->pair_ns);
  pthread_mutex_destroy(&w->lock);
  free(w);
}

static void lbc_destroy(gcomp_transport *tp) {
  lbc_transport *t = (lbc_transport *)tp;
  lbc_world *w = t->world;
  pthread_mutex_lock(&w->lock);
  int last = --w->refs == 0;
  pthread_mutex_unlock(&w->lock);
  if (last) world_free(w);
  free(t->topo);
  free(t);
}

static const gcomp_transport_ops lbc_ops = {
    .name = "loopback",
    .isend = lbc_isend,
    .irecv = lbc_irecv,
    .test = lbc_test,
    .progress = lbc_progress,
    .cancel = lbc_cancel,
    .destroy = lbc_destroy,
};

static lbc_world *world_new(int size, const int *node_of, const gcomp_loopback_limits *lim) {
  lbc_world *w = calloc(1, sizeof *w);
  if (!w) return NULL;
  size_t n = (size_t)size, nn = n * n;
  w->size = size;
  w->refs = size;
  w->entries = lim && lim->entries > 0 ? lim->entries : 16;
  w->headers = lim && lim->headers > 0 ? lim->headers : 64;
  w->protocol = lim ? lim->protocol : GCOMP_LB_GRANTED;
  w->chunk = lim && lim->chunk_bytes ? lim->chunk_bytes : (size_t)gcomp_param_int(GCOMP_P_CHUNK_BYTES);
  if (!w->chunk) w->chunk = 1;
  pthread_mutex_init(&w->lock, NULL);
  w->node_of = calloc(n, sizeof *w->node_of);
  w->free_entries = calloc(n, sizeof *w->free_entries);
  w->wait_first = calloc(n, sizeof *w->wait_first);
  w->wait_more = calloc(n, sizeof *w->wait_more);
  w->posted = calloc(n, sizeof *w->posted);
  w->unexp = calloc(n, sizeof *w->unexp);
  w->wait_send = calloc(nn, sizeof *w->wait_send);
  w->ohead = calloc(n, sizeof *w->ohead);
  w->otail = calloc(n, sizeof *w->otail);
  w->sw_unexp = calloc(n, sizeof *w->sw_unexp);
  w->sw_recv = calloc(n, sizeof *w->sw_recv);
  w->hdr_wait = calloc(nn, sizeof *w->hdr_wait);
  w->hdr_count = calloc(nn, sizeof *w->hdr_count);
  w->send_seq = calloc(nn, sizeof *w->send_seq);
  w->pair_ns = calloc(nn, sizeof *w->pair_ns);
  if (!w->node_of || !w->free_entries || !w->wait_first || !w->wait_more || !w->posted ||
      !w->unexp || !w->wait_send || !w->ohead || !w->otail || !w->sw_unexp || !w->sw_recv ||
      !w->hdr_wait || !w->hdr_count || !w->send_seq || !w->pair_ns) {
    world_free(w);
    return NULL;
  }
  for (int i = 0; i < size; i++) {
    w->node_of[i] = node_of ? node_of[i] : 0;
    w->free_entries[i] = w->entries;
  }
  return w;
}

int gcomp_loopback_create_constrained(int size, const int *node_of,
                                      const gcomp_loopback_limits *limits, gcomp_transport **out) {
  GCOMP_FAIL_IF(size < 1 || !out, GCOMP_ERR_INVALID, "constrained loopback: size %d must be >= 1",
                size);
  GCOMP_FAIL_IF(limits && limits->protocol != GCOMP_LB_GRANTED && limits->protocol != GCOMP_LB_EAGER,
                GCOMP_ERR_INVALID, "constrained loopback: protocol %d is neither granted nor eager",
                limits->protocol);
  GCOMP_CHECK(gcomp_init());
  for (int i = 0; i < size; i++) out[i] = NULL;
  lbc_world *w = world_new(size, node_of, limits);
  GCOMP_FAIL_IF(!w, GCOMP_ERR_NOMEM, "constrained loopback world of %d ranks", size);
  char (*keys)[16] = calloc((size_t)size, sizeof *keys);
  const char **kp = calloc((size_t)size, sizeof *kp);
  int status = keys && kp ? GCOMP_OK
                          : gcomp_error_set(GCOMP_ERR_NOMEM, __FILE__, __LINE__, "node keys");
  for (int i = 0; status == GCOMP_OK && i < size; i++) {
    snprintf(keys[i], sizeof keys[i], "%d", w->node_of[i]);
    kp[i] = keys[i];
  }
  int made = 0;
  for (int i = 0; i < size && status == GCOMP_OK; i++) {
    lbc_transport *t = calloc(1, sizeof *t);
    if (!t) {
      status = gcomp_error_set(GCOMP_ERR_NOMEM, __FILE__, __LINE__, "loopback rank %d", i);
      break;
    }
    t->pub.ops = &lbc_ops;
    t->pub.rank = i;
    t->pub.size = size;
    t->pub.timeout_ms = (int)gcomp_param_int(GCOMP_P_TIMEOUT_MS);
    t->world = w;
    status = gcomp_topology_fill(&t->pub, kp, &t->topo);
    if (status < 0) {
      free(t);
      break;
    }
    out[i] = &t->pub;
    made++;
  }
  free(keys);
  free(kp);
  if (status < 0) {
    for (int i = 0; i < made; i++) {
      lbc_transport *t = (lbc_transport *)out[i];
      free(t->topo);
      free(t);
      out[i] = NULL;
    }
    world_free(w);
    return status;
  }
  return GCOMP_OK;
}
