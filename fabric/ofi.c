/* The libfabric transport: RDM endpoints, tagged messages, manual progress.
 *
 * A rank opens at most two endpoints: GCOMP_INTRA_PROVIDER (shm) for the ranks of its node
 * and GCOMP_PROVIDER (tcp;ofi_rxm) for the others; every rank maps to one of them.
 *
 * Wire protocol of one message (len bytes, user tag T, from a sender's k-th message to
 * this peer, k = seq):
 *   first chunk   tag KIND_FIRST|T, remote CQ data = seq << 40 | len, min(len, first) bytes
 *   other chunks  tag KIND_CONT|seq, chunk bytes each (the last one shorter)
 * first is the chunk size, except on shm, where it is the inject size: libfabric 1.17's shm
 * deadlocks both processes when it truncates a longer message (ranks that disagree on a
 * call's count), while an injected one is truncated cleanly, and the length it carries
 * then shows the mismatch before any further chunk is posted.
 * The receiver posts only the first chunk, learns len and seq from its completion, then
 * posts the rest: receives never need to know the length in advance, and continuation
 * chunks of different messages can never match each other (FI_ORDER_SAS keeps chunks of
 * one message in order). Up to OFI_WINDOW chunks of a request are in flight at once.
 *
 * Receive entries: posted receives and unexpected messages share the provider's entries
 * (rx_attr->size, 1024 on shm). On libfabric 1.17's shm, once they are all taken (receives
 * waiting for later messages, messages whose receives are not posted yet) the message at
 * the head of its queue, often the next chunk of one already matched, finds none and is
 * never taken, and no receive can be posted either: a stall for good. The timeout turns it
 * into GCOMP_ERR_TIMEOUT; when the rank's provider refused a receive in the last second,
 * the message adds that (a wedged endpoint with nothing left to post says nothing more).
 * The collectives budget the chunks they keep in flight to one peer (GCOMP_COLL_MAX_ENTRIES
 * in reduce/coll.h). */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include "bootstrap.h"
#include "gcomp_common.h"
#include "transport.h"

#define OFI_WINDOW GCOMP_TRANSPORT_WINDOW
#define KIND_SHIFT GCOMP_TAG_BITS
#define KIND_FIRST (UINT64_C(1) << KIND_SHIFT)
#define KIND_CONT (UINT64_C(2) << KIND_SHIFT)
#define KIND_PING (UINT64_C(3) << KIND_SHIFT)
#define KIND_BYE (UINT64_C(4) << KIND_SHIFT)
#define LEN_BITS 40
#define SEQ_MASK ((UINT64_C(1) << (64 - LEN_BITS)) - 1)
#define MAX_NAME 256
#define LIVENESS_NS 100000000ull   /* check a silent same-host peer's pid this often */

enum { OP_SEND = 1, OP_RECV = 2 };

typedef struct ofi_slot {
  struct fi_context ctx;    /* FI_CONTEXT: must come first, the provider owns it while posted */
  struct gcomp_treq *req;   /* NULL while the slot is free */
  int first;
} ofi_slot;

typedef struct ofi_ep {
  const char *role;         /* "intra" or "inter" */
  char prov[64];
  struct fi_info *info;
  struct fid_fabric *fabric;
  struct fid_domain *domain;
  struct fid_av *av;
  struct fid_cq *cq;
  struct fid_ep *ep;
  size_t inject, chunk;
  size_t first;             /* bytes of a message's first chunk (see the top) */
  uint64_t recv_refused_ns; /* when the provider last refused to take a receive here */
  int mr_local;
  char name[MAX_NAME];
  size_t namelen;
} ofi_ep;

struct gcomp_treq {
  int op;
  int peer;
  ofi_ep *ep;
  fi_addr_t addr;
  uint64_t tag;             /* full tag of the first chunk */
  char *buf;
  size_t cap;               /* send: length; recv: capacity */
  size_t total;             /* message length (recv: known once the first chunk is in) */
  uint64_t seq;
  size_t next_off;          /* next byte to post */
  size_t done_bytes;
  int first_posted, first_done;
  int inflight;
  int want_post;            /* a later chunk met backpressure: progress retries it */
  int in_fifo;              /* first chunk not posted yet: waits its turn in t->fifo */
  struct gcomp_treq *fnext;
  int no_inject;            /* needs a completion that says the bytes left */
  int status;               /* <0 once failed */
  int zombie;               /* abandoned by the caller: freed when nothing is in flight */
  uint64_t last_ns;         /* start of the current silence; 0: activity since last look */
  struct fid_mr *mr;
  void *desc;
  unsigned polls;           /* tests since the last clock check */
  struct gcomp_treq *next, *prev;
  /* a request is reused without clearing what follows: slots are free whenever it is */
  ofi_slot slot[OFI_WINDOW];
  char err[512];
};
#define REQ_HEADER_BYTES offsetof(struct gcomp_treq, slot)
#define MAX_SPARE_REQS 128

typedef struct {
  int32_t pid;
  char host[64];
  char pidns[64];           /* "pid:[inode]": pids compare only within one namespace */
  char node[128];
} rank_card;

typedef struct {
  uint32_t len[2];
  char name[2][MAX_NAME];
} addr_card;

typedef struct {
  gcomp_transport pub;
  ofi_ep eps[2];
  int neps;
  signed char *ep_of;       /* [size]: index into eps, -1 for self */
  fi_addr_t *addr;          /* [size] */
  uint64_t *send_seq;       /* [size] */
  rank_card *cards;         /* [size] */
  uint64_t *live_check_ns;  /* [size] */
  int *topo;
  gcomp_treq *active;       /* every request not yet freed */
  gcomp_treq *spare;        /* freed requests kept for reuse (small messages are hot) */
  int nspare;
  int npost_pending;
  /* requests whose first chunk is not posted yet, sends and receives apart, in the order
   * the caller posted them: a send (receive) that met backpressure must not be overtaken
   * by a later one, or messages with the same tag would match out of order */
  gcomp_treq *fifo_head[2], *fifo_tail[2];
  int ready;                /* setup finished: destroy says goodbye first */
  int failed;               /* an operation failed: goodbyes are brief */
  char host[64];
  char pidns[64];
} ofi_transport;

/* ---- requests ----------------------------------------------------------------------- */

static void req_link(ofi_transport *t, gcomp_treq *r) {
  r->prev = NULL;
  r->next = t->active;
  if (t->active) t->active->prev = r;
  t->active = r;
}

static void req_free(ofi_transport *t, gcomp_treq *r) {
  if (r->prev)
    r->prev->next = r->next;
  else
    t->active = r->next;
  if (r->next) r->next->prev = r->prev;
  if (r->want_post) t->npost_pending--;
  if (r->in_fifo) {
    gcomp_treq **pp = &t->fifo_head[r->op - 1], *last = NULL;
    while (*pp && *pp != r) last = *pp, pp = &(*pp)->fnext;
    if (*pp) *pp = r->fnext;
    if (t->fifo_tail[r->op - 1] == r) t->fifo_tail[r->op - 1] = last;
  }
  if (r->mr) fi_close(&r->mr->fid);
  if (t->nspare < MAX_SPARE_REQS) {
    r->next = t->spare;
    t->spare = r;
    t->nspare++;
  } else {
    free(r);
  }
}

static gcomp_treq *req_alloc(ofi_transport *t) {
  gcomp_treq *r = t->spare;
  if (!r) return calloc(1, sizeof *r);
  t->spare = r->next;
  t->nspare--;
  memset(r, 0, REQ_HEADER_BYTES);
  return r;
}

static void req_fail(gcomp_treq *r, int status, const char *fmt, ...) GCOMP_PRINTF(3, 4);
static void req_fail(gcomp_treq *r, int status, const char *fmt, ...) {
  if (r->status < 0) return;   /* keep the first cause */
  r->status = status;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->err, sizeof r->err, fmt, ap);
  va_end(ap);
}

static ofi_slot *slot_get(gcomp_treq *r) {
  for (int i = 0; i < OFI_WINDOW; i++)
    if (!r->slot[i].req) return &r->slot[i];
  return NULL;
}

static int req_complete(const gcomp_treq *r) {
  if (r->inflight || !r->first_posted) return 0;
  if (r->op == OP_SEND) return r->next_off >= r->total;
  return r->first_done && r->done_bytes >= r->total;
}

static const char *op_name(const gcomp_treq *r) {
  return r->op == OP_SEND ? "send to" : "receive from";
}

static int is_backpressure(ssize_t rc) {
  /* shm answers a full receive pool with -FI_ENOMEM rather than -FI_EAGAIN */
  return rc == -FI_EAGAIN || rc == -FI_ENOMEM;
}

/* Posts as many chunks as the window allows. Backpressure is not an error: a first chunk
 * stays at the head of its FIFO, a later chunk is marked, and progress retries both after
 * draining the completion queues. */
static void req_post(ofi_transport *t, gcomp_treq *r) {
  if (r->want_post) {
    r->want_post = 0;
    t->npost_pending--;
  }
  while (r->status == 0 && !r->zombie) {
    ofi_ep *e = r->ep;
    ssize_t rc;
    if (!r->first_posted) {
      size_t n = r->op == OP_SEND ? (r->total < e->first ? r->total : e->first)
                                  : (r->cap < e->first ? r->cap : e->first);
      if (r->op == OP_SEND && n <= e->inject && !r->no_inject) {
        uint64_t data = r->seq << LEN_BITS | r->total;
        rc = fi_tinjectdata(e->ep, r->buf, n, data, r->addr, r->tag);
        if (rc == 0) {
          r->first_posted = 1;
          r->next_off = n;
          r->last_ns = 0;
          continue;
        }
      } else {
        ofi_slot *s = slot_get(r);
        s->req = r;
        s->first = 1;
        if (r->op == OP_SEND)
          rc = fi_tsenddata(e->ep, r->buf, n, r->desc, r->seq << LEN_BITS | r->total, r->addr,
                            r->tag, &s->ctx);
        else
          rc = fi_trecv(e->ep, r->buf, n, r->desc, r->addr, r->tag, 0, &s->ctx);
        if (rc == 0) {
          r->first_posted = 1;
          r->inflight++;
          r->next_off = n;
          continue;
        }
        s->req = NULL;
      }
    } else {
      if (r->op == OP_RECV && !r->first_done) return;
      if (r->next_off >= r->total || r->inflight >= OFI_WINDOW) return;
      size_t n = r->total - r->next_off < e->chunk ? r->total - r->next_off : e->chunk;
      ofi_slot *s = slot_get(r);
      s->req = r;
      s->first = 0;
      uint64_t tag = KIND_CONT | (r->seq & GCOMP_TAG_MASK);
      void *p = r->buf + r->next_off;
      if (r->op == OP_SEND)
        rc = fi_tsend(e->ep, p, n, r->desc, r->addr, tag, &s->ctx);
      else
        rc = fi_trecv(e->ep, p, n, r->desc, r->addr, tag, 0, &s->ctx);
      if (rc == 0) {
        r->inflight++;
        r->next_off += n;
        continue;
      }
      s->req = NULL;
    }
    if (is_backpressure(rc)) {
      if (r->op == OP_RECV) e->recv_refused_ns = gcomp_now_ns();
      if (r->first_posted) {
        r->want_post = 1;
        t->npost_pending++;
      }
    } else {
      req_fail(r, GCOMP_ERR_FABRIC, "posting a %s rank %d over %s: %s", r->op == OP_SEND ? "send" : "receive",
               r->peer, e->prov, fi_strerror((int)-rc));
    }
    return;
  }
}

/* Posts first chunks in FIFO order until one meets backpressure. */
static void fifo_pump(ofi_transport *t, int q) {
  gcomp_treq *r;
  while ((r = t->fifo_head[q])) {
    if (r->status == 0 && !r->zombie) {
      req_post(t, r);
      if (r->status == 0 && !r->first_posted) return;   /* backpressure: keep the order */
    }
    t->fifo_head[q] = r->fnext;
    if (!t->fifo_head[q]) t->fifo_tail[q] = NULL;
    r->in_fifo = 0;
    r->fnext = NULL;
    if (r->zombie && !r->inflight) req_free(t, r);
  }
}

/* ---- completions -------------------------------------------------------------------- */

static void on_done(ofi_transport *t, ofi_slot *s, size_t len, uint64_t flags, uint64_t data) {
  gcomp_treq *r = s->req;
  s->req = NULL;
  r->inflight--;
  r->last_ns = 0;   /* activity: the silence (timeout) clock restarts at the next look */
  if (r->op == OP_RECV) {
    if (s->first) {
      r->first_done = 1;
      uint64_t total = (flags & FI_REMOTE_CQ_DATA) ? data & ((UINT64_C(1) << LEN_BITS) - 1) : len;
      r->seq = (flags & FI_REMOTE_CQ_DATA) ? data >> LEN_BITS : 0;
      r->total = (size_t)total;
      if (total > r->cap)
        req_fail(r, GCOMP_ERR_NOMEM, "message of %" PRIu64 " bytes from rank %d exceeds the "
                 "receive capacity of %zu bytes: do all ranks pass the same count and dtype?",
                 total, r->peer, r->cap);
      else if (len != (total < r->ep->first ? total : r->ep->first))
        req_fail(r, GCOMP_ERR_CORRUPT, "first chunk from rank %d has %zu bytes, expected %zu "
                 "(is GCOMP_CHUNK_BYTES equal on all ranks?)", r->peer, len,
                 (size_t)(total < r->ep->first ? total : r->ep->first));
    }
    r->done_bytes += len;
  }
  if (r->zombie && !r->inflight)
    req_free(t, r);
  else if (r->status == 0 && !r->zombie && (r->op == OP_SEND || r->first_done))
    req_post(t, r);
}

static void on_error(ofi_transport *t, ofi_ep *e) {
  struct fi_cq_err_entry err;
  memset(&err, 0, sizeof err);
  if (fi_cq_readerr(e->cq, &err, 0) < 0) return;
  ofi_slot *s = err.op_context;
  if (!s || !s->req) {
    GCOMP_WARN(GCOMP_SUB_FABRIC, "%s completion error without a request: %s", e->prov,
               fi_strerror(err.err));
    return;
  }
  gcomp_treq *r = s->req;
  s->req = NULL;
  r->inflight--;
  err.err = abs(err.err);   /* providers disagree on the sign */
  if (err.err != FI_ECANCELED) {
    char prov[200] = "";
    const char *txt = fi_cq_strerror(e->cq, err.prov_errno, err.err_data, prov, sizeof prov);
    int status = err.err == FI_ETRUNC ? GCOMP_ERR_NOMEM
                 : (err.err == FI_ECONNREFUSED || err.err == FI_ECONNRESET ||
                    err.err == FI_ENOTCONN || err.err == FI_ECONNABORTED || err.err == FI_EIO ||
                    err.err == FI_EHOSTUNREACH)
                     ? GCOMP_ERR_PEER
                     : GCOMP_ERR_FABRIC;
    if (err.err == FI_ETRUNC)
      req_fail(r, status, "a message from rank %d does not fit its %zu-byte receive buffer (%s): "
               "do all ranks pass the same count and dtype?", r->peer, r->cap, e->prov);
    else
      req_fail(r, status, "%s rank %d over %s failed: %s (%s)", op_name(r), r->peer, e->prov,
               fi_strerror(err.err), txt && *txt ? txt : "no provider detail");
  }
  if (r->zombie && !r->inflight) req_free(t, r);
}

static int ofi_progress(gcomp_transport *tp) {
  ofi_transport *t = (ofi_transport *)tp;
  for (int i = 0; i < t->neps; i++) {
    ofi_ep *e = &t->eps[i];
    struct fi_cq_tagged_entry ent[16];
    for (;;) {
      ssize_t n = fi_cq_read(e->cq, ent, 16);
      if (n == -FI_EAGAIN) break;
      if (n == -FI_EAVAIL) {
        on_error(t, e);
        continue;
      }
      if (n < 0) {
        GCOMP_WARN(GCOMP_SUB_FABRIC, "fi_cq_read on %s: %s", e->prov, fi_strerror((int)-n));
        break;
      }
      for (ssize_t k = 0; k < n; k++)
        if (ent[k].op_context) on_done(t, ent[k].op_context, ent[k].len, ent[k].flags, ent[k].data);
      if (n < 16) break;
    }
  }
  for (int q = 0; q < 2; q++)
    if (t->fifo_head[q]) fifo_pump(t, q);
  if (t->npost_pending)
    for (gcomp_treq *r = t->active, *nx; r; r = nx) {
      nx = r->next;
      if (r->want_post) req_post(t, r);
    }
  return GCOMP_OK;
}

/* ---- posting ---------------------------------------------------------------------------- */

static int ofi_post(ofi_transport *t, int op, int peer, uint64_t fulltag, void *buf, size_t len,
                    gcomp_treq **out, int no_inject) {
  GCOMP_FAIL_IF(peer < 0 || peer >= t->pub.size || peer == t->pub.rank, GCOMP_ERR_INVALID,
                "rank %d: peer %d is not another rank of the %d", t->pub.rank, peer, t->pub.size);
  GCOMP_FAIL_IF(!out || (len && !buf), GCOMP_ERR_INVALID, "rank %d: NULL buffer or request",
                t->pub.rank);
  GCOMP_FAIL_IF(op == OP_SEND && (uint64_t)len >> LEN_BITS, GCOMP_ERR_INVALID,
                "message of %zu bytes is over the 1 TiB limit", len);
  ofi_ep *e = &t->eps[t->ep_of[peer]];
  gcomp_treq *r = req_alloc(t);
  GCOMP_FAIL_IF(!r, GCOMP_ERR_NOMEM, "request");
  r->op = op;
  r->peer = peer;
  r->ep = e;
  r->addr = t->addr[peer];
  r->tag = fulltag;
  r->buf = buf;
  r->cap = len;
  r->total = op == OP_SEND ? len : 0;
  r->last_ns = 0;
  r->no_inject = no_inject;
  if (op == OP_SEND) r->seq = t->send_seq[peer]++ & SEQ_MASK;
  if (e->mr_local && len) {
    int rc = fi_mr_reg(e->domain, buf, len, op == OP_SEND ? FI_SEND : FI_RECV, 0, 0, 0, &r->mr,
                       NULL);
    if (rc) {
      r->next = t->spare;   /* back to the spares: nothing links to it yet */
      t->spare = r;
      t->nspare++;
      GCOMP_FAIL(GCOMP_ERR_FABRIC, "registering %zu bytes for rank %d over %s: %s", len, peer,
                 e->prov, fi_strerror(-rc));
    }
    r->desc = fi_mr_desc(r->mr);
  }
  req_link(t, r);
  int q = op - 1;
  r->in_fifo = 1;
  if (t->fifo_tail[q])
    t->fifo_tail[q]->fnext = r;
  else
    t->fifo_head[q] = r;
  t->fifo_tail[q] = r;
  if (t->fifo_head[q] == r) fifo_pump(t, q);
  *out = r;
  return GCOMP_OK;
}

static int ofi_isend(gcomp_transport *tp, int peer, uint64_t tag, const void *buf, size_t len,
                     gcomp_treq **req) {
  GCOMP_FAIL_IF(tag & ~GCOMP_TAG_MASK, GCOMP_ERR_INVALID, "tag 0x%" PRIx64 " uses reserved bits",
                tag);
  return ofi_post((ofi_transport *)tp, OP_SEND, peer, KIND_FIRST | tag, (void *)buf, len, req, 0);
}

static int ofi_irecv(gcomp_transport *tp, int peer, uint64_t tag, void *buf, size_t capacity,
                     gcomp_treq **req) {
  GCOMP_FAIL_IF(tag & ~GCOMP_TAG_MASK, GCOMP_ERR_INVALID, "tag 0x%" PRIx64 " uses reserved bits",
                tag);
  return ofi_post((ofi_transport *)tp, OP_RECV, peer, KIND_FIRST | tag, buf, capacity, req, 0);
}

/* Withdraws what is still posted; the request is freed once the provider gives the slots
 * back (at once when nothing is in flight). */
static void req_abandon(ofi_transport *t, gcomp_treq *r) {
  r->zombie = 1;
  if (r->want_post) {
    r->want_post = 0;
    t->npost_pending--;
  }
  for (int i = 0; i < OFI_WINDOW; i++)
    if (r->slot[i].req) fi_cancel(&r->ep->ep->fid, &r->slot[i].ctx);
  if (!r->inflight) req_free(t, r);
}

/* A same-host peer whose process is gone will never answer: say so instead of waiting. */
static int peer_dead(ofi_transport *t, int peer) {
  if (strcmp(t->cards[peer].host, t->host) != 0 || !t->pidns[0] ||
      strcmp(t->cards[peer].pidns, t->pidns) != 0)
    return 0;
  uint64_t now = gcomp_now_ns();
  if (now - t->live_check_ns[peer] < LIVENESS_NS) return 0;
  t->live_check_ns[peer] = now;
  char path[64], buf[256];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)t->cards[peer].pid);
  FILE *f = fopen(path, "r");
  if (!f) return 1;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  const char *paren = strrchr(buf, ')');
  return paren && (paren[2] == 'Z' || paren[2] == 'X');
}

static int ofi_test(gcomp_transport *tp, gcomp_treq *r, int *done, size_t *len) {
  ofi_transport *t = (ofi_transport *)tp;
  GCOMP_FAIL_IF(!r || !done, GCOMP_ERR_INVALID, "gcomp_test: NULL argument");
  *done = 0;
  if (r->status == 0 && !req_complete(r)) ofi_progress(tp);
  if (r->status == 0 && req_complete(r)) {
    if (len) *len = r->op == OP_SEND ? r->cap : r->total;
    req_free(t, r);
    *done = 1;
    return GCOMP_OK;
  }
  /* the clock is read every 32nd test only: a spinning waiter polls the CQ, not the clock */
  if (r->status == 0 && (++r->polls & 31u) == 0) {
    uint64_t now = gcomp_now_ns();
    if (!r->last_ns) r->last_ns = now;
    uint64_t idle = now - r->last_ns;
    if (idle > LIVENESS_NS && peer_dead(t, r->peer))
      req_fail(r, GCOMP_ERR_PEER, "%s rank %d: its process (pid %d on %s) has exited",
               op_name(r), r->peer, (int)t->cards[r->peer].pid, t->cards[r->peer].host);
    else if (idle / 1000000u >= (uint64_t)tp->timeout_ms) {
      char where[96];
      /* an endpoint whose receive entries are all taken (see the top) refuses receives */
      const char *refusing = r->ep->recv_refused_ns && now - r->ep->recv_refused_ns < 1000000000ull
                                 ? "; and this rank's provider keeps refusing receives: posted "
                                   "receives and unexpected messages may hold all its receive "
                                   "entries (too many messages in flight?)"
                                 : "";
      if (r->op == OP_SEND)
        snprintf(where, sizeof where, "%zu of %zu bytes handed to the provider", r->next_off, r->cap);
      else if (!r->first_posted)
        snprintf(where, sizeof where, "the provider never took the receive");
      else if (!r->first_done)
        snprintf(where, sizeof where, "nothing arrived");
      else
        snprintf(where, sizeof where, "%zu of %zu bytes arrived", r->done_bytes, r->total);
      req_fail(r, GCOMP_ERR_TIMEOUT, "%s rank %d over %s: no progress within GCOMP_TIMEOUT_MS=%d "
               "(%s; the peer is stalled, or in another call: do all ranks make the same calls "
               "with the same counts?%s)", op_name(r), r->peer, r->ep->prov, tp->timeout_ms, where,
               refusing);
    }
  }
  if (r->status < 0) {
    int s = r->status;
    t->failed = 1;
    char msg[sizeof r->err];
    memcpy(msg, r->err, sizeof msg);
    req_abandon(t, r);
    GCOMP_FAIL(s, "rank %d: %s", tp->rank, msg);
  }
  return GCOMP_OK;
}

static int ofi_cancel(gcomp_transport *tp, gcomp_treq *r) {
  if (!r) return GCOMP_OK;
  ofi_transport *t = (ofi_transport *)tp;
  int peer = r->peer, inflight = r->inflight;
  req_abandon(t, r);
  if (inflight)
    GCOMP_TRACE(GCOMP_SUB_FABRIC, "cancelled a request to/from rank %d with %d chunks in flight",
                peer, inflight);
  /* give the provider a moment to hand the buffers back */
  for (int i = 0; i < 64; i++) ofi_progress(tp);
  return GCOMP_OK;
}

/* Two transports of one process may be set up or torn down by two threads at once (the MPI
 * shim creates one per MPI communicator, on the thread that first reduces on it). Their
 * libfabric objects are their own (fi_fabric and fi_domain allocate new ones each call,
 * FI_THREAD_DOMAIN holds per domain), but shm keeps process-wide state behind them: its
 * list of this process's regions, the region names, its signal handlers, and the files in
 * /dev/shm that peers open by name. Opening and closing endpoints (and inserting addresses,
 * which maps peers' regions) therefore runs one thread at a time under this lock; the
 * out-of-band exchange and the ping, which wait for peers, run outside it, so two ranks that
 * create two transports in opposite orders never wait for each other while holding it. */
static pthread_mutex_t setup_lock = PTHREAD_MUTEX_INITIALIZER;

/* ---- endpoints ---------------------------------------------------------------------------- */

static void ep_close(ofi_ep *e) {
  if (e->ep) fi_close(&e->ep->fid);
  if (e->av) fi_close(&e->av->fid);
  if (e->cq) fi_close(&e->cq->fid);
  if (e->domain) fi_close(&e->domain->fid);
  if (e->fabric) fi_close(&e->fabric->fid);
  if (e->info) fi_freeinfo(e->info);
  memset(e, 0, sizeof *e);
}

/* Closing an endpoint drops what the provider has not written yet (with manual progress a
 * completed inject may still sit in a tcp queue). So destroy is collective, like
 * MPI_Finalize: each rank sends every peer a goodbye that needs a real completion and waits
 * for everybody's, i.e. until no peer will send it anything more. Dead peers are skipped. */
static void farewell(ofi_transport *t) {
  int n = t->pub.size;
  gcomp_treq **reqs = calloc((size_t)n * 2, sizeof *reqs);
  uint64_t *bufs = calloc((size_t)n * 2, sizeof *bufs);
  if (!reqs || !bufs) goto out;
  for (int p = 0; p < n; p++) {
    if (p == t->pub.rank) continue;
    if (ofi_post(t, OP_RECV, p, KIND_BYE, &bufs[2 * p + 1], 8, &reqs[2 * p + 1], 0) < 0)
      reqs[2 * p + 1] = NULL;
    if (ofi_post(t, OP_SEND, p, KIND_BYE, &bufs[2 * p], 8, &reqs[2 * p], 1) < 0)
      reqs[2 * p] = NULL;
  }
  unsigned spins = 0;
  /* after a failure the job is going down anyway: do not wait a whole timeout per peer */
  uint64_t deadline = gcomp_now_ns() + (t->failed ? 1000000000ull : UINT64_MAX / 2);
  for (;;) {
    int left = 0;
    for (int i = 0; i < 2 * n; i++) {
      if (!reqs[i]) continue;
      int done = 0;
      if (ofi_test(&t->pub, reqs[i], &done, NULL) < 0) {
        GCOMP_INFO(GCOMP_SUB_FABRIC, "closing: no goodbye %s rank %d: %s",
                   i % 2 ? "from" : "to", i / 2, gcomp_last_error());
        reqs[i] = NULL;
      } else if (done) {
        reqs[i] = NULL;
      } else {
        left++;
      }
    }
    if (!left) break;
    if (gcomp_now_ns() > deadline) {
      for (int i = 0; i < 2 * n; i++)
        if (reqs[i]) req_abandon(t, reqs[i]);
      GCOMP_INFO(GCOMP_SUB_FABRIC, "closing after a failure: %d goodbyes not exchanged", left);
      break;
    }
    gcomp_idle(&spins);
  }
out:
  free(reqs);
  free(bufs);
}

static void ofi_destroy(gcomp_transport *tp) {
  ofi_transport *t = (ofi_transport *)tp;
  if (!t) return;
  if (t->ready) farewell(t);
  pthread_mutex_lock(&setup_lock);
  for (int i = 0; i < t->neps; i++)
    if (t->eps[i].ep) {
      fi_close(&t->eps[i].ep->fid);   /* nothing completes after this: requests can go */
      t->eps[i].ep = NULL;
    }
  while (t->active) req_free(t, t->active);
  while (t->spare) {
    gcomp_treq *r = t->spare;
    t->spare = r->next;
    free(r);
  }
  for (int i = 0; i < t->neps; i++) ep_close(&t->eps[i]);
  pthread_mutex_unlock(&setup_lock);
  free(t->ep_of);
  free(t->addr);
  free(t->send_seq);
  free(t->cards);
  free(t->live_check_ns);
  free(t->topo);
  free(t);
}

/* Segments of killed shm jobs stay in /dev/shm, named "<pid>:<uid>:<n>"; a new process that
 * gets the same pid then cannot create its own. Remove those whose process is gone, and
 * those of this process's pid, but the latter only before this process opened its first shm
 * endpoint: after that they are this process's own live regions, which peers still open by
 * name (removing one while another transport was being set up on another thread left its
 * peers unable to map it: shm then dereferenced a missing region inside fi_cq_read). Called
 * under setup_lock. */
static void shm_clean_stale(void) {
  static int own_swept;   /* under setup_lock */
  DIR *d = opendir("/dev/shm");
  if (!d) return;
  struct dirent *de;
  int me = (int)getpid();
  while ((de = readdir(d))) {
    int pid = 0, a = 0, b = 0, used = 0;
    if (sscanf(de->d_name, "%d:%d:%d%n", &pid, &a, &b, &used) != 3 || de->d_name[used] || pid <= 0)
      continue;
    char proc[64];
    snprintf(proc, sizeof proc, "/proc/%d", pid);
    if (pid == me ? own_swept : access(proc, F_OK) == 0) continue;
    char path[300];
    snprintf(path, sizeof path, "/dev/shm/%s", de->d_name);
    if (unlink(path) == 0)
      GCOMP_INFO(GCOMP_SUB_FABRIC, "removed stale shm segment %s (process %d is gone)", path, pid);
  }
  closedir(d);
  own_swept = 1;
}

static struct fi_info *pick_info(struct fi_info *list) {
  for (struct fi_info *i = list; i; i = i->next)
    if (i->addr_format == FI_SOCKADDR_IN) return i;   /* IPv4 before link-local IPv6 */
  return list;
}

/* ofi_rxm over tcp sends a message above its eager limit (16 KiB) by rendezvous: the
 * receiver asks for the data once it has matched the header. When both directions of a
 * link are busy (every exchange step of halving/doubling or of hier's cross-node phase)
 * that request waits behind the bulk data queued in the other direction, once per chunk:
 * 2 emulated nodes at 1 Gbit/s reached 60-65% of the link that way, and the same run with
 * every chunk eager 98% (bench/RESULTS.md). tcp places eager data directly into posted
 * receives, so chunks go eager: the limit is raised to the chunk size unless the user set
 * FI_OFI_RXM_EAGER_LIMIT. libfabric reads it once, at its first fi_getinfo. Over verbs
 * the eager limit must equal rxm's buffer size, so other providers are left alone. */
static void rxm_tcp_defaults(const char *prov) {
  static int done;   /* under setup_lock */
  if (done || !strstr(prov, "tcp")) return;
  done = 1;
  char v[32];
  snprintf(v, sizeof v, "%lld", (long long)gcomp_param_int(GCOMP_P_CHUNK_BYTES));
  /* The library's only setenv, and not one of gcomp's settings: rxm reads its eager limit
   * only through fi_param, from the environment (1.17 has no hint, endpoint attribute or
   * fi_setopt for it), so there is no other door. It is process-wide (libfabric reads it
   * once), hence the first communicator's GCOMP_CHUNK_BYTES wins; overwrite 0 keeps the
   * user's own value. */
  if (setenv("FI_OFI_RXM_EAGER_LIMIT", v, 0) == 0)
    GCOMP_INFO(GCOMP_SUB_FABRIC, "FI_OFI_RXM_EAGER_LIMIT=%s", getenv("FI_OFI_RXM_EAGER_LIMIT"));
}

static int ep_open(ofi_ep *e, const char *role, const char *prov, int nranks) {
  e->role = role;
  snprintf(e->prov, sizeof e->prov, "%s", prov);
  if (strcmp(prov, "shm") == 0) shm_clean_stale();
  struct fi_info *hints = fi_allocinfo(), *list = NULL;
  GCOMP_FAIL_IF(!hints, GCOMP_ERR_NOMEM, "fi_allocinfo");
  hints->ep_attr->type = FI_EP_RDM;
  hints->caps = FI_TAGGED | FI_MSG | FI_DIRECTED_RECV;
  hints->mode = FI_CONTEXT;
  hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
  hints->domain_attr->threading = FI_THREAD_DOMAIN;
  hints->domain_attr->data_progress = FI_PROGRESS_MANUAL;
  hints->domain_attr->control_progress = FI_PROGRESS_MANUAL;
  hints->domain_attr->resource_mgmt = FI_RM_ENABLED;
  hints->domain_attr->av_type = FI_AV_TABLE;
  hints->tx_attr->msg_order = FI_ORDER_SAS;
  hints->rx_attr->msg_order = FI_ORDER_SAS;
  hints->fabric_attr->prov_name = strdup(prov);
  int rc = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &list);
  fi_freeinfo(hints);
  GCOMP_FAIL_IF(rc || !list, GCOMP_ERR_UNSUPPORTED,
                "libfabric provider '%s' (%s-node) offers no tagged RDM endpoint with manual "
                "progress here: %s (check fi_info -p '%s'; %s selects another)",
                prov, role, fi_strerror(-rc), prov,
                strcmp(role, "intra") == 0 ? "GCOMP_INTRA_PROVIDER" : "GCOMP_PROVIDER");
  e->info = fi_dupinfo(pick_info(list));
  fi_freeinfo(list);
  GCOMP_FAIL_IF(!e->info, GCOMP_ERR_NOMEM, "fi_dupinfo");
  struct fi_info *info = e->info;
  GCOMP_FAIL_IF(info->domain_attr->cq_data_size < 8, GCOMP_ERR_UNSUPPORTED,
                "provider %s carries only %zu bytes of remote CQ data; gcomp needs 8", prov,
                info->domain_attr->cq_data_size);
  e->mr_local = (info->domain_attr->mr_mode & FI_MR_LOCAL) != 0;
  e->inject = info->tx_attr->inject_size;
  e->chunk = (size_t)gcomp_param_int(GCOMP_P_CHUNK_BYTES);
  if (info->ep_attr->max_msg_size && e->chunk > info->ep_attr->max_msg_size)
    e->chunk = info->ep_attr->max_msg_size;
  if (!e->chunk) e->chunk = 1;
  /* shm completes a send of up to its inject size at once, whether or not the receiver has
   * taken it: chunks that small would escape the window (OFI_WINDOW) and pile up at the
   * receiver unmatched. rhd on 4 ranks with GCOMP_CHUNK_BYTES=4096 stalled so, 2 runs of 2
   * (see "Receive entries" at the top). So over shm chunks are at least twice that size. */
  if (!strcmp(info->fabric_attr->prov_name, "shm") && e->inject > 0 && e->chunk < 2 * e->inject &&
      (!info->ep_attr->max_msg_size || 2 * e->inject <= info->ep_attr->max_msg_size))
    e->chunk = 2 * e->inject;
  e->first = e->chunk;
  if (!strcmp(info->fabric_attr->prov_name, "shm") && e->inject > 0 && e->inject < e->chunk)
    e->first = e->inject;
#define EP_TRY(call, what)                                                                   \
  do {                                                                                       \
    int rc_ = (call);                                                                        \
    GCOMP_FAIL_IF(rc_, GCOMP_ERR_FABRIC, "%s (%s, %s-node): %s", what, prov, role,           \
                  fi_strerror(-rc_));                                                        \
  } while (0)
  EP_TRY(fi_fabric(info->fabric_attr, &e->fabric, NULL), "fi_fabric");
  EP_TRY(fi_domain(e->fabric, info, &e->domain, NULL), "fi_domain");
  struct fi_cq_attr cq_attr = {0};
  cq_attr.format = FI_CQ_FORMAT_TAGGED;
  cq_attr.wait_obj = FI_WAIT_NONE;
  cq_attr.size = info->tx_attr->size + info->rx_attr->size;
  EP_TRY(fi_cq_open(e->domain, &cq_attr, &e->cq, NULL), "fi_cq_open");
  struct fi_av_attr av_attr = {0};
  av_attr.type = FI_AV_TABLE;
  av_attr.count = (size_t)nranks;
  EP_TRY(fi_av_open(e->domain, &av_attr, &e->av, NULL), "fi_av_open");
  EP_TRY(fi_endpoint(e->domain, info, &e->ep, NULL), "fi_endpoint");
  EP_TRY(fi_ep_bind(e->ep, &e->cq->fid, FI_TRANSMIT | FI_RECV), "binding the CQ");
  EP_TRY(fi_ep_bind(e->ep, &e->av->fid, 0), "binding the AV");
  EP_TRY(fi_enable(e->ep), "fi_enable");
  e->namelen = sizeof e->name;
  EP_TRY(fi_getname(&e->ep->fid, e->name, &e->namelen), "fi_getname");
#undef EP_TRY
  GCOMP_INFO(GCOMP_SUB_FABRIC, "%s-node endpoint: %s (domain %s), inject %zu B, chunk %zu B, "
             "mr_local %d", role, info->fabric_attr->prov_name, info->domain_attr->name,
             e->inject, e->chunk, e->mr_local);
  return GCOMP_OK;
}

/* Every rank sends a ping to each peer and waits for one from each: shm failures after
 * fi_av_insert are otherwise silent hangs. */
static int ping_all(ofi_transport *t) {
  int n = t->pub.size;
  gcomp_treq **reqs = calloc((size_t)n * 2, sizeof *reqs);
  uint64_t *bufs = calloc((size_t)n * 2, sizeof *bufs);
  int status = GCOMP_OK;
  if (!reqs || !bufs) {
    free(reqs);
    free(bufs);
    GCOMP_FAIL(GCOMP_ERR_NOMEM, "ping tables");
  }
  for (int p = 0; p < n && status == GCOMP_OK; p++) {
    if (p == t->pub.rank) continue;
    bufs[2 * p] = (uint64_t)t->pub.rank;
    status = ofi_post(t, OP_RECV, p, KIND_PING, &bufs[2 * p + 1], 8, &reqs[2 * p + 1], 0);
    if (status == GCOMP_OK)
      status = ofi_post(t, OP_SEND, p, KIND_PING, &bufs[2 * p], 8, &reqs[2 * p], 0);
  }
  if (status == GCOMP_OK) status = gcomp_waitall(&t->pub, n * 2, reqs, NULL);
  for (int p = 0; p < n && status == GCOMP_OK; p++)
    if (p != t->pub.rank && bufs[2 * p + 1] != (uint64_t)p)
      status = gcomp_error_set(GCOMP_ERR_FABRIC, __FILE__, __LINE__,
                               "ping from rank %d carried %" PRIu64, p, bufs[2 * p + 1]);
  if (status < 0) {
    for (int i = 0; i < 2 * n; i++)
      if (reqs[i]) req_abandon(t, reqs[i]);
    char detail[1024];
    snprintf(detail, sizeof detail, "checking that every peer answers (ping): %s",
             gcomp_last_error());
    gcomp_error_restore(status, detail);
  }
  free(reqs);
  free(bufs);
  return status;
}

static const gcomp_transport_ops ofi_ops = {
    .name = "ofi",
    .isend = ofi_isend,
    .irecv = ofi_irecv,
    .test = ofi_test,
    .progress = ofi_progress,
    .cancel = ofi_cancel,
    .destroy = ofi_destroy,
};

static int setup(ofi_transport *t, gcomp_oob *oob, const char *node_id) {
  int n = t->pub.size, me = t->pub.rank;
  t->ep_of = calloc((size_t)n, 1);
  t->addr = calloc((size_t)n, sizeof *t->addr);
  t->send_seq = calloc((size_t)n, sizeof *t->send_seq);
  t->cards = calloc((size_t)n, sizeof *t->cards);
  t->live_check_ns = calloc((size_t)n, sizeof *t->live_check_ns);
  const char **keys = calloc((size_t)n, sizeof *keys);
  addr_card *addrs = calloc((size_t)n, sizeof *addrs);
  int status = GCOMP_OK;
  if (!t->ep_of || !t->addr || !t->send_seq || !t->cards || !t->live_check_ns || !keys || !addrs) {
    free(keys);
    free(addrs);
    GCOMP_FAIL(GCOMP_ERR_NOMEM, "tables for %d ranks", n);
  }
  /* round 1: who is where */
  rank_card mine = {0};
  mine.pid = (int32_t)getpid();
  gethostname(t->host, sizeof t->host - 1);
  snprintf(mine.host, sizeof mine.host, "%s", t->host);
  ssize_t nl = readlink("/proc/self/ns/pid", t->pidns, sizeof t->pidns - 1);
  t->pidns[nl > 0 ? nl : 0] = '\0';
  memcpy(mine.pidns, t->pidns, sizeof mine.pidns);
  snprintf(mine.node, sizeof mine.node, "%s", node_id);
  status = oob->allgather(oob, &mine, sizeof mine, t->cards);
  if (status < 0) {
    free(keys);
    free(addrs);
    return status;
  }
  for (int r = 0; r < n; r++) {
    t->cards[r].host[sizeof t->cards[r].host - 1] = '\0';
    t->cards[r].pidns[sizeof t->cards[r].pidns - 1] = '\0';
    t->cards[r].node[sizeof t->cards[r].node - 1] = '\0';
    keys[r] = t->cards[r].node;
  }
  if (status == GCOMP_OK) status = gcomp_topology_fill(&t->pub, keys, &t->topo);
  /* endpoints: one per provider actually needed */
  const char *intra = gcomp_param_str(GCOMP_P_INTRA_PROVIDER);
  const char *inter = gcomp_param_str(GCOMP_P_PROVIDER);
  int need_intra = t->pub.local_size > 1, need_inter = t->pub.nnodes > 1;
  int same = strcmp(intra, inter) == 0;
  int intra_ep = -1, inter_ep = -1;
  pthread_mutex_lock(&setup_lock);
  rxm_tcp_defaults(inter);   /* before libfabric's first fi_getinfo in this process */
  rxm_tcp_defaults(intra);
  if (status == GCOMP_OK && need_intra) {
    intra_ep = t->neps;
    status = ep_open(&t->eps[t->neps++], "intra", intra, n);
  }
  if (status == GCOMP_OK && need_inter) {
    if (same && intra_ep >= 0) {
      inter_ep = intra_ep;
    } else {
      inter_ep = t->neps;
      status = ep_open(&t->eps[t->neps++], "inter", inter, n);
    }
  }
  pthread_mutex_unlock(&setup_lock);
  /* round 2: fabric addresses */
  addr_card ac = {0};
  if (intra_ep >= 0) {
    ac.len[0] = (uint32_t)t->eps[intra_ep].namelen;
    memcpy(ac.name[0], t->eps[intra_ep].name, ac.len[0]);
  }
  if (inter_ep >= 0) {
    ac.len[1] = (uint32_t)t->eps[inter_ep].namelen;
    memcpy(ac.name[1], t->eps[inter_ep].name, ac.len[1]);
  }
  /* a rank that failed above still takes part, so the others fail fast instead of waiting */
  char detail[1024] = "";
  if (status < 0) snprintf(detail, sizeof detail, "%s", gcomp_last_error());
  int st2 = oob->allgather(oob, &ac, sizeof ac, addrs);
  if (status < 0)
    gcomp_error_restore(status, detail);   /* the first cause is the one to report */
  else
    status = st2;
  pthread_mutex_lock(&setup_lock);
  for (int r = 0; r < n && status == GCOMP_OK; r++) {
    if (r == me) {
      t->ep_of[r] = -1;
      continue;
    }
    int local = t->pub.node_of[r] == t->pub.node;
    int which = local ? 0 : 1;
    int epi = local ? intra_ep : inter_ep;
    if (addrs[r].len[which] == 0 || addrs[r].len[which] > MAX_NAME) {
      status = gcomp_error_set(GCOMP_ERR_BOOTSTRAP, __FILE__, __LINE__,
                               "rank %d published no %s-node address (did its endpoint fail?)", r,
                               local ? "intra" : "inter");
      break;
    }
    t->ep_of[r] = (signed char)epi;
    int k = fi_av_insert(t->eps[epi].av, addrs[r].name[which], 1, &t->addr[r], 0, NULL);
    if (k != 1)
      status = gcomp_error_set(GCOMP_ERR_FABRIC, __FILE__, __LINE__,
                               "fi_av_insert of rank %d's address over %s failed (%d)", r,
                               t->eps[epi].prov, k);
  }
  pthread_mutex_unlock(&setup_lock);
  free(keys);
  free(addrs);
  if (status == GCOMP_OK) status = ping_all(t);
  if (status == GCOMP_OK)
    GCOMP_INFO(GCOMP_SUB_FABRIC, "rank %d of %d: node %d of %d (%s), local rank %d of %d; intra %s, "
               "inter %s", me, n, t->pub.node, t->pub.nnodes, node_id, t->pub.local_rank,
               t->pub.local_size, intra_ep >= 0 ? intra : "-", inter_ep >= 0 ? inter : "-");
  return status;
}

int gcomp_transport_create(gcomp_oob *oob, const char *node_id, gcomp_transport **out) {
  GCOMP_FAIL_IF(!oob || !node_id || !out, GCOMP_ERR_INVALID, "gcomp_transport_create: NULL argument");
  GCOMP_CHECK(gcomp_init());
  *out = NULL;
  ofi_transport *t = calloc(1, sizeof *t);
  GCOMP_FAIL_IF(!t, GCOMP_ERR_NOMEM, "transport");
  t->pub.ops = &ofi_ops;
  t->pub.rank = oob->rank;
  t->pub.size = oob->size;
  t->pub.timeout_ms = (int)gcomp_param_int(GCOMP_P_TIMEOUT_MS);
  int s = setup(t, oob, node_id);
  t->ready = s == GCOMP_OK;
  if (s < 0) {
    ofi_destroy(&t->pub);
    return gcomp_error_trace(s, __FILE__, __LINE__);
  }
  *out = &t->pub;
  return GCOMP_OK;
}

int gcomp_transport_create_env(gcomp_transport **out) {
  GCOMP_FAIL_IF(!out, GCOMP_ERR_INVALID, "gcomp_transport_create_env: NULL argument");
  GCOMP_CHECK(gcomp_init());
  gcomp_boot_env env;
  GCOMP_CHECK(gcomp_boot_env_parse(NULL, NULL, NULL, &env));
  gcomp_oob *oob = NULL;
  GCOMP_CHECK(gcomp_rendezvous_open(&env, (int)gcomp_param_int(GCOMP_P_TIMEOUT_MS), &oob));
  int s = gcomp_transport_create(oob, env.node_id, out);
  oob->close(oob);
  GCOMP_CHECK(s);
  if (env.local_rank >= 0 && env.local_rank != (*out)->local_rank)
    GCOMP_WARN(GCOMP_SUB_FABRIC, "rank %d: the launcher says local rank %d, node ids say %d; "
               "using %d", env.rank, env.local_rank, (*out)->local_rank, (*out)->local_rank);
  return GCOMP_OK;
}
