/* The provider model under the constrained loopback: see loopback_model.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gcomp_common.h"
#include "loopback_model.h"

static void push(lbm_list *l, lbm_msg *p) {
  p->next = NULL;
  p->prev = l->tail;
  if (l->tail)
    l->tail->next = p;
  else
    l->head = p;
  l->tail = p;
  p->in = l;
}

static void unlink_msg(lbm_msg *p) {
  lbm_list *l = p->in;
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

static size_t pair(const lbm *m, int src, int dst) {
  return (size_t)src * (size_t)m->size + (size_t)dst;
}

lbm_msg *lbm_msg_new(int send, int src, int dst, uint64_t ptag, void *owner) {
  lbm_msg *p = calloc(1, sizeof *p);
  if (!p) return NULL;
  p->send = send, p->src = src, p->dst = dst, p->ptag = ptag, p->owner = owner;
  p->state = LBM_WAIT;
  return p;
}

void lbm_send(lbm *m, lbm_msg *s) {
  push(&m->wait_send[pair(m, s->src, s->dst)], s);
  if (m->otail[s->src])
    m->otail[s->src]->onext = s;
  else
    m->ohead[s->src] = s;
  m->otail[s->src] = s;
}

void lbm_recv(lbm *m, lbm_msg *r, int in_order) {
  push(in_order ? &m->wait_first[r->dst] : &m->wait_more[r->dst], r);
}

/* a send meets its receive: the payload moves, the receive is finished, the send waits
 * for its turn to complete */
static void deliver(lbm *m, lbm_msg *s, lbm_msg *r) {
  int truncated = s->len > r->len;
  if (!truncated && s->len) memcpy(r->rbuf, s->owned ? s->owned : s->sbuf, s->len);
  r->data = s->data;
  s->state = LBM_DELIVERED;
  m->pair_ns[pair(m, s->src, s->dst)] = gcomp_now_ns();
  if (r->owner) m->hooks.recv_done(m->hooks.ctx, r, s->len, truncated);
  free(r);
}

static lbm_msg *find(const lbm_list *l, int src, uint64_t ptag) {
  for (lbm_msg *p = l->head; p; p = p->next)
    if (p->src == src && p->ptag == ptag) return p;
  return NULL;
}

/* tries to post receive p at rank d; returns 1 when it left its waiting list */
static int try_recv(lbm *m, int d, lbm_msg *p) {
  lbm_msg *u = p->target ? NULL : find(&m->unexp[d], p->src, p->ptag);
  if (u) {
    unlink_msg(p);
    unlink_msg(u);
    m->free_entries[d]++;
    deliver(m, u, p);
    return 1;
  }
  if (m->free_entries[d] <= 0) return 0;
  unlink_msg(p);
  m->free_entries[d]--;
  p->state = LBM_POSTED;
  push(&m->posted[d], p);
  if (p->owner) m->hooks.recv_posted(m->hooks.ctx, p);
  return 1;
}

static int pass_recvs(lbm *m, int d) {
  int moved = 0;
  for (lbm_msg *p = m->wait_more[d].head, *nx; p; p = nx) {
    /* where nothing arrives unasked, a receive needs an entry: without one, stop */
    if (m->free_entries[d] <= 0 && !m->unasked) break;
    nx = p->next;   /* try_recv's hooks only append to this list */
    moved += try_recv(m, d, p);
  }
  while (m->wait_first[d].head && try_recv(m, d, m->wait_first[d].head)) moved++;
  return moved;
}

static int pass_sends(lbm *m, int s, int d) {
  int moved = 0;
  lbm_list *q = &m->wait_send[pair(m, s, d)];
  while (q->head) {
    lbm_msg *p = q->head;
    lbm_msg *r = p->target ? p->target : find(&m->posted[d], s, p->ptag);
    if (r && r->state == LBM_POSTED) {
      unlink_msg(p);
      unlink_msg(r);
      m->free_entries[d]++;
      deliver(m, p, r);
    } else if (m->free_entries[d] > 0 && !p->target) {
      unlink_msg(p);
      m->free_entries[d]--;
      p->state = LBM_UNEXP;
      push(&m->unexp[d], p);
    } else {
      break;
    }
    moved++;
  }
  return moved;
}

/* completes each sender's delivered sends from the oldest, up to the first that is not */
static int pass_completions(lbm *m, int s) {
  int moved = 0;
  while (m->ohead[s] && m->ohead[s]->state == LBM_DELIVERED) {
    lbm_msg *p = m->ohead[s];
    m->ohead[s] = p->onext;
    if (!m->ohead[s]) m->otail[s] = NULL;
    if (p->owner) m->hooks.send_done(m->hooks.ctx, p);
    free(p->owned);
    free(p);
    moved++;
  }
  return moved;
}

void lbm_pump(lbm *m) {
  for (int moved = 1; moved;) {
    moved = 0;
    for (int d = 0; d < m->size; d++) moved += pass_recvs(m, d);
    for (int s = 0; s < m->size; s++)
      for (int d = 0; d < m->size; d++) moved += pass_sends(m, s, d);
    for (int s = 0; s < m->size; s++) moved += pass_completions(m, s);
  }
}

/* an unexpected message whose sender lets go: the provider already holds it */
static void keep_copy(lbm *m, int d, lbm_msg *p) {
  p->owned = malloc(p->len ? p->len : 1);
  if (p->owned && p->len) memcpy(p->owned, p->sbuf, p->len);
  if (!p->owned) {   /* cannot keep it: the message is lost, like a dead sender's */
    unlink_msg(p);
    m->free_entries[d]++;
    p->state = LBM_DELIVERED;
  }
  p->owner = NULL;
}

void lbm_withdraw(lbm *m, const void *owner) {
  /* sends first: a granted one may point at a receive of owner's that is freed below */
  for (size_t k = 0; k < (size_t)m->size * (size_t)m->size; k++)
    for (lbm_msg *p = m->wait_send[k].head, *nx; p; p = nx) {
      nx = p->next;
      if (p->owner == owner || (p->target && p->target->owner == owner)) {
        unlink_msg(p);
        p->state = LBM_DELIVERED;   /* freed in its sender's order, with no owner to tell */
        p->owner = NULL;
      }
    }
  for (int d = 0; d < m->size; d++) {
    lbm_list *lists[] = {&m->wait_first[d], &m->wait_more[d], &m->posted[d], &m->unexp[d]};
    for (size_t k = 0; k < sizeof lists / sizeof lists[0]; k++)
      for (lbm_msg *p = lists[k]->head, *nx; p; p = nx) {
        nx = p->next;
        if (p->owner != owner) continue;
        if (p->state == LBM_UNEXP) {
          keep_copy(m, d, p);
          continue;
        }
        if (p->state == LBM_POSTED) m->free_entries[d]++;
        unlink_msg(p);
        free(p);   /* receives only: sends are on no list but their sender's order here */
      }
  }
  for (int s = 0; s < m->size; s++)
    for (lbm_msg *p = m->ohead[s]; p; p = p->onext)
      if (p->owner == owner) p->owner = NULL;
}

uint64_t lbm_pair_active_ns(const lbm *m, int a, int b) {
  uint64_t x = m->pair_ns[pair(m, a, b)], y = m->pair_ns[pair(m, b, a)];
  return x > y ? x : y;
}

void lbm_describe(const lbm *m, int d, char *out, size_t cap) {
  int posted = 0, unexp = 0, held = 0;
  for (const lbm_msg *p = m->posted[d].head; p; p = p->next) posted++;
  for (const lbm_msg *p = m->unexp[d].head; p; p = p->next) unexp++;
  for (int s = 0; s < m->size; s++)
    for (const lbm_msg *p = m->wait_send[pair(m, s, d)].head; p; p = p->next) held++;
  snprintf(out, cap, "rank %d's %d receive entries: %d posted receives, %d unexpected messages; "
           "%d messages held by their senders", d, m->entries, posted, unexp, held);
}

static void free_receives(lbm_list *l) {
  while (l->head) {
    lbm_msg *p = l->head;
    unlink_msg(p);
    if (!p->send) free(p);   /* sends are freed from their sender's order */
  }
}

void lbm_free(lbm *m) {
  for (int i = 0; m->wait_first && i < m->size; i++) {
    free_receives(&m->wait_first[i]), free_receives(&m->wait_more[i]);
    free_receives(&m->posted[i]), free_receives(&m->unexp[i]);
  }
  for (size_t k = 0; m->wait_send && k < (size_t)m->size * (size_t)m->size; k++)
    free_receives(&m->wait_send[k]);
  for (int s = 0; m->ohead && s < m->size; s++)
    for (lbm_msg *p = m->ohead[s], *nx; p; p = nx) {
      nx = p->onext;
      free(p->owned);
      free(p);
    }
  free(m->free_entries), free(m->wait_first), free(m->wait_more), free(m->posted);
  free(m->unexp), free(m->wait_send), free(m->ohead), free(m->otail), free(m->pair_ns);
  memset(m, 0, sizeof *m);
}

int lbm_init(lbm *m, int size, int entries, int unasked, const lbm_hooks *hooks) {
  memset(m, 0, sizeof *m);
  size_t n = (size_t)size, nn = n * n;
  m->size = size, m->entries = entries, m->unasked = unasked, m->hooks = *hooks;
  m->free_entries = calloc(n, sizeof *m->free_entries);
  m->wait_first = calloc(n, sizeof *m->wait_first);
  m->wait_more = calloc(n, sizeof *m->wait_more);
  m->posted = calloc(n, sizeof *m->posted);
  m->unexp = calloc(n, sizeof *m->unexp);
  m->wait_send = calloc(nn, sizeof *m->wait_send);
  m->ohead = calloc(n, sizeof *m->ohead);
  m->otail = calloc(n, sizeof *m->otail);
  m->pair_ns = calloc(nn, sizeof *m->pair_ns);
  if (!m->free_entries || !m->wait_first || !m->wait_more || !m->posted || !m->unexp ||
      !m->wait_send || !m->ohead || !m->otail || !m->pair_ns) {
    lbm_free(m);
    return GCOMP_ERR_NOMEM;
  }
  for (int i = 0; i < size; i++) m->free_entries[i] = entries;
  return GCOMP_OK;
}
