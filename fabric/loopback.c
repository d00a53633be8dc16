/* The in-process twin of the libfabric transport: N ranks in one process.
 *
 * Matching is rendezvous style: a send waits in the receiver's mailbox until a receive
 * matches it, and the receiver copies straight out of the sender's buffer (no staging
 * copy). Whichever side arrives second does the match and the copy under the mailbox lock,
 * so the ranks may be driven by one thread each or all by one thread. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gcomp_common.h"
#include "loopback.h"
#include "transport.h"

enum { LB_SEND = 1, LB_RECV = 2 };

struct gcomp_treq {
  int kind;
  int src, dst;              /* world ranks */
  uint64_t tag;
  const void *sbuf;
  void *rbuf;
  size_t len;                /* send: length; recv: capacity, then received length */
  atomic_int done;           /* 0 pending, 1 done, <0 failed */
  uint64_t posted_ns;
  struct gcomp_treq *next, *prev;   /* mailbox queue, while unmatched */
};

typedef struct {
  pthread_mutex_t lock;
  gcomp_treq *sends_head, *sends_tail;   /* unexpected sends addressed to this rank */
  gcomp_treq *recvs_head, *recvs_tail;   /* posted receives of this rank */
} lb_mailbox;

typedef struct {
  atomic_int refs;
  int size;
  lb_mailbox *box;
} lb_world;

typedef gcomp_lb_rank lb_transport;   /* its world is an lb_world */

static lb_world *world_of(const lb_transport *t) { return t->world; }

static void q_push(gcomp_treq **head, gcomp_treq **tail, gcomp_treq *r) {
  r->next = NULL;
  r->prev = *tail;
  if (*tail)
    (*tail)->next = r;
  else
    *head = r;
  *tail = r;
}

static void q_remove(gcomp_treq **head, gcomp_treq **tail, gcomp_treq *r) {
  if (r->prev)
    r->prev->next = r->next;
  else
    *head = r->next;
  if (r->next)
    r->next->prev = r->prev;
  else
    *tail = r->prev;
  r->next = r->prev = NULL;
}

static int q_contains(const gcomp_treq *head, const gcomp_treq *r) {
  for (; head; head = head->next)
    if (head == r) return 1;
  return 0;
}

/* Copies s into r and completes both; the sender's request must not be touched after its
 * done flag is set (its owner may free it at once). */
static void lb_match(gcomp_treq *s, gcomp_treq *r) {
  if (s->len > r->len) {
    r->len = s->len;   /* report what arrived */
    atomic_store_explicit(&r->done, GCOMP_ERR_INVALID, memory_order_release);
  } else {
    if (s->len) memcpy(r->rbuf, s->sbuf, s->len);
    r->len = s->len;
    atomic_store_explicit(&r->done, 1, memory_order_release);
  }
  atomic_store_explicit(&s->done, 1, memory_order_release);
}

static int lb_check_peer(const lb_transport *t, int peer, const char *what) {
  /* like the libfabric transport: a rank never messages itself */
  GCOMP_FAIL_IF(peer < 0 || peer >= t->pub.size || peer == t->pub.rank, GCOMP_ERR_INVALID,
                "loopback %s: rank %d: peer %d is not another rank of the %d", what, t->pub.rank,
                peer, t->pub.size);
  return GCOMP_OK;
}

static gcomp_treq *lb_new(int kind, int src, int dst, uint64_t tag) {
  gcomp_treq *r = calloc(1, sizeof *r);
  if (!r) return NULL;
  r->kind = kind;
  r->src = src;
  r->dst = dst;
  r->tag = tag;
  r->posted_ns = gcomp_now_ns();
  atomic_init(&r->done, 0);
  return r;
}

static int lb_isend(gcomp_transport *tp, int peer, uint64_t tag, const void *buf, size_t len,
                    gcomp_treq **req) {
  lb_transport *t = (lb_transport *)tp;
  tag &= ~GCOMP_TAG_SCHED;   /* the mark changes no match (transport.h) */
  GCOMP_CHECK(lb_check_peer(t, peer, "isend"));
  GCOMP_FAIL_IF(!req || (len && !buf), GCOMP_ERR_INVALID, "loopback isend: NULL argument");
  gcomp_treq *s = lb_new(LB_SEND, tp->rank, peer, tag);
  GCOMP_FAIL_IF(!s, GCOMP_ERR_NOMEM, "loopback send request");
  s->sbuf = buf;
  s->len = len;
  lb_mailbox *box = &world_of(t)->box[peer];
  pthread_mutex_lock(&box->lock);
  gcomp_treq *r = box->recvs_head;
  for (; r; r = r->next)
    if (r->src == tp->rank && r->tag == tag) break;
  if (r) {
    q_remove(&box->recvs_head, &box->recvs_tail, r);
    lb_match(s, r);
  } else {
    q_push(&box->sends_head, &box->sends_tail, s);
  }
  pthread_mutex_unlock(&box->lock);
  *req = s;
  return GCOMP_OK;
}

static int lb_irecv(gcomp_transport *tp, int peer, uint64_t tag, void *buf, size_t capacity,
                    gcomp_treq **req) {
  lb_transport *t = (lb_transport *)tp;
  tag &= ~GCOMP_TAG_SCHED;   /* the mark changes no match (transport.h) */
  GCOMP_CHECK(lb_check_peer(t, peer, "irecv"));
  GCOMP_FAIL_IF(!req || (capacity && !buf), GCOMP_ERR_INVALID, "loopback irecv: NULL argument");
  gcomp_treq *r = lb_new(LB_RECV, peer, tp->rank, tag);
  GCOMP_FAIL_IF(!r, GCOMP_ERR_NOMEM, "loopback receive request");
  r->rbuf = buf;
  r->len = capacity;
  lb_mailbox *box = &world_of(t)->box[tp->rank];
  pthread_mutex_lock(&box->lock);
  gcomp_treq *s = box->sends_head;
  for (; s; s = s->next)
    if (s->src == peer && s->tag == tag) break;
  if (s) {
    q_remove(&box->sends_head, &box->sends_tail, s);
    lb_match(s, r);
  } else {
    q_push(&box->recvs_head, &box->recvs_tail, r);
  }
  pthread_mutex_unlock(&box->lock);
  *req = r;
  return GCOMP_OK;
}

/* Removes r from its mailbox if it is still waiting there; returns 1 when it was. */
static int lb_withdraw(lb_transport *t, gcomp_treq *r) {
  lb_mailbox *box = &world_of(t)->box[r->dst];
  int was = 0;
  pthread_mutex_lock(&box->lock);
  if (atomic_load_explicit(&r->done, memory_order_acquire) == 0) {
    if (r->kind == LB_SEND && q_contains(box->sends_head, r)) {
      q_remove(&box->sends_head, &box->sends_tail, r);
      was = 1;
    } else if (r->kind == LB_RECV && q_contains(box->recvs_head, r)) {
      q_remove(&box->recvs_head, &box->recvs_tail, r);
      was = 1;
    }
  }
  pthread_mutex_unlock(&box->lock);
  return was;
}

static int lb_test(gcomp_transport *tp, gcomp_treq *r, int *done, size_t *len) {
  lb_transport *t = (lb_transport *)tp;
  GCOMP_FAIL_IF(!r || !done, GCOMP_ERR_INVALID, "loopback test: NULL argument");
  int d = atomic_load_explicit(&r->done, memory_order_acquire);
  *done = 0;
  if (d == 1) {
    if (len) *len = r->len;
    *done = 1;
    free(r);
    return GCOMP_OK;
  }
  if (d < 0) {
    int peer = r->src;
    size_t got = r->len;
    uint64_t tag = r->tag;
    free(r);
    GCOMP_FAIL(d, "loopback rank %d: message of %zu bytes from rank %d (tag 0x%llx) exceeds "
               "the receive capacity: do all ranks pass the same count and dtype?", tp->rank, got,
               peer, (unsigned long long)tag);
  }
  uint64_t waited = gcomp_now_ns() - r->posted_ns;
  if (waited / 1000000u >= (uint64_t)tp->timeout_ms && lb_withdraw(t, r)) {
    int peer = r->kind == LB_SEND ? r->dst : r->src;
    const char *what = r->kind == LB_SEND ? "send to" : "receive from";
    uint64_t tag = r->tag;
    free(r);
    tp->failed_peer = peer;
    GCOMP_FAIL(GCOMP_ERR_TIMEOUT, "loopback rank %d: %s rank %d (tag 0x%llx) did not complete "
               "within GCOMP_TIMEOUT_MS=%d", tp->rank, what, peer, (unsigned long long)tag,
               tp->timeout_ms);
  }
  return GCOMP_OK;
}

static int lb_progress(gcomp_transport *tp) { return GCOMP_OK; }

static int lb_cancel(gcomp_transport *tp, gcomp_treq *r) {
  if (!r) return GCOMP_OK;
  lb_withdraw((lb_transport *)tp, r);
  /* matched or withdrawn: either way nobody else holds r any more */
  free(r);
  return GCOMP_OK;
}

static void lb_world_release(lb_world *w) {
  if (atomic_fetch_sub(&w->refs, 1) != 1) return;
  for (int i = 0; i < w->size; i++) {
    lb_mailbox *b = &w->box[i];
    /* requests still queued belong to their owners, who may have leaked them: free here */
    while (b->sends_head) {
      gcomp_treq *r = b->sends_head;
      q_remove(&b->sends_head, &b->sends_tail, r);
      free(r);
    }
    while (b->recvs_head) {
      gcomp_treq *r = b->recvs_head;
      q_remove(&b->recvs_head, &b->recvs_tail, r);
      free(r);
    }
    pthread_mutex_destroy(&b->lock);
  }
  free(w->box);
  free(w);
}

static void lb_destroy(gcomp_transport *tp) {
  lb_world_release(world_of((lb_transport *)tp));
  gcomp_lb_rank_free(tp);
}

static const gcomp_transport_ops lb_ops = {
    .name = "loopback",
    .isend = lb_isend,
    .irecv = lb_irecv,
    .test = lb_test,
    .progress = lb_progress,
    .cancel = lb_cancel,
    .destroy = lb_destroy,
};

void gcomp_lb_rank_free(gcomp_transport *tp) {
  gcomp_lb_rank *t = (gcomp_lb_rank *)tp;
  free(t->topo);
  free(t);
}

int gcomp_lb_ranks_create(int size, const int *node_of, const gcomp_transport_ops *ops,
                          void *world, const gcomp_fabric_opts *opts, gcomp_transport **out) {
  char (*keys)[16] = calloc((size_t)size, sizeof *keys);
  const char **kp = calloc((size_t)size, sizeof *kp);
  int status = keys && kp ? GCOMP_OK
                          : gcomp_error_set(GCOMP_ERR_NOMEM, __FILE__, __LINE__, "node keys");
  for (int i = 0; status == GCOMP_OK && i < size; i++) {
    snprintf(keys[i], sizeof keys[i], "%d", node_of ? node_of[i] : 0);
    kp[i] = keys[i];
  }
  int made = 0;
  for (int i = 0; i < size && status == GCOMP_OK; i++) {
    gcomp_lb_rank *t = calloc(1, sizeof *t);
    if (!t) {
      status = gcomp_error_set(GCOMP_ERR_NOMEM, __FILE__, __LINE__, "loopback rank %d", i);
      break;
    }
    t->pub.ops = ops;
    t->pub.rank = i;
    t->pub.size = size;
    t->pub.timeout_ms = opts->timeout_ms;
    t->pub.failed_peer = -1;
    t->world = world;
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
  for (int i = 0; status < 0 && i < made; i++) {
    gcomp_lb_rank_free(out[i]);
    out[i] = NULL;
  }
  return status;
}

int gcomp_loopback_create(int size, const int *node_of, const gcomp_fabric_opts *opts,
                          gcomp_transport **out) {
  GCOMP_FAIL_IF(size < 1 || !out, GCOMP_ERR_INVALID, "loopback: size %d must be >= 1", size);
  GCOMP_FAIL_IF(!opts, GCOMP_ERR_INVALID, "loopback: opts is NULL");
  GCOMP_CHECK(gcomp_init());
  for (int i = 0; i < size; i++) out[i] = NULL;
  lb_world *w = calloc(1, sizeof *w);
  GCOMP_FAIL_IF(!w, GCOMP_ERR_NOMEM, "loopback world of %d ranks", size);
  w->size = size;
  w->box = calloc((size_t)size, sizeof *w->box);
  if (!w->box) {
    free(w);
    GCOMP_FAIL(GCOMP_ERR_NOMEM, "loopback world of %d ranks", size);
  }
  for (int i = 0; i < size; i++) pthread_mutex_init(&w->box[i].lock, NULL);
  atomic_init(&w->refs, size);
  int status = gcomp_lb_ranks_create(size, node_of, &lb_ops, w, opts, out);
  if (status < 0) {
    for (int i = 0; i < size; i++) pthread_mutex_destroy(&w->box[i].lock);
    free(w->box);
    free(w);
    return status;
  }
  return GCOMP_OK;
}
