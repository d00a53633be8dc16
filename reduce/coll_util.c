/* Shared steps of the dense algorithms: timed waits, and a pairwise exchange that reduces
 * each received segment as soon as it lands. */
#include <stdlib.h>
#include <string.h>

#include "abort.h"
#include "coll.h"

int gcomp_coll_reserve(gcomp_coll *c, size_t bytes) {
  gcomp_scratch *s = c->scratch;
  if (s->cap >= bytes) return GCOMP_OK;
  uint8_t *p = realloc(s->p, bytes);
  GCOMP_FAIL_IF(!p, GCOMP_ERR_NOMEM, "allreduce scratch of %zu bytes", bytes);
  s->p = p;
  s->cap = bytes;
  return GCOMP_OK;
}

void gcomp_scratch_free(gcomp_scratch *s) {
  free(s->p);
  s->p = NULL;
  s->cap = 0;
}

void gcomp_coll_inplace(gcomp_coll *c, uint8_t *buf, size_t count) {
  if (!c->src) return;
  memcpy(buf, c->src, count * c->esize);
  c->src = NULL;
}

int gcomp_coll_waitall(gcomp_coll *c, int n, gcomp_treq **reqs) {
  uint64_t t0 = gcomp_now_ns();
  int s = gcomp_abort_waitall(c->abort, c->t, n, reqs);
  c->stats->wait_s += (double)(gcomp_now_ns() - t0) * 1e-9;
  return s;
}

static void cancel_all(gcomp_coll *c, gcomp_treq **reqs, int n) {
  for (int i = 0; i < n; i++)
    if (reqs[i]) gcomp_cancel(c->t, reqs[i]), reqs[i] = NULL;
}

size_t gcomp_coll_seg_elems(const gcomp_coll *c, size_t count) {
  size_t seg = c->seg_bytes / c->esize ? c->seg_bytes / c->esize : 1;
  size_t most = GCOMP_COLL_MAX_SEGMENTS;
  if (count / seg + (count % seg != 0) > most) seg = count / most + (count % most != 0);
  return seg;
}

/* Sends slen bytes at sbuf to peer and receives rlen bytes from it, both in segments of
 * c->seg_bytes (or more: gcomp_coll_seg_elems). With dst != NULL every received segment
 * is reduced into dst (the segment lands in the scratch first); with dst == NULL it lands
 * directly at rbuf. */
int gcomp_coll_exchange(gcomp_coll *c, int peer, unsigned phase, unsigned step,
                        const uint8_t *sbuf, size_t slen, uint8_t *rbuf, size_t rlen,
                        uint8_t *dst, const uint8_t *addend) {
  /* one cut for both directions (the peer's slen is this rank's rlen and the other way
   * round), which the in-place reduction below relies on */
  size_t most = slen > rlen ? slen : rlen;
  size_t seg = gcomp_coll_seg_elems(c, (most + c->esize - 1) / c->esize) * c->esize;
  int ns = slen ? (int)((slen + seg - 1) / seg) : 1;
  int nr = rlen ? (int)((rlen + seg - 1) / seg) : 1;
  if (dst) {
    GCOMP_CHECK(gcomp_coll_reserve(c, rlen ? rlen : 1));
    rbuf = gcomp_coll_tmp(c);
  }
  gcomp_treq *stack[64], **reqs = stack;
  int total = ns + nr;
  if (total > 64) {
    reqs = calloc((size_t)total, sizeof *reqs);
    GCOMP_FAIL_IF(!reqs, GCOMP_ERR_NOMEM, "exchange: %d requests", total);
  }
  memset(reqs, 0, (size_t)total * sizeof *reqs);
  int status = GCOMP_OK;
  for (int j = 0; j < nr && status == GCOMP_OK; j++) {
    size_t off = (size_t)j * seg, len = rlen - off < seg ? rlen - off : seg;
    if (!rlen) off = len = 0;
    status = gcomp_irecv(c->t, peer, gcomp_coll_stag(c, phase, step, (unsigned)j, len),
                         rbuf + off, len, &reqs[ns + j]);
  }
  for (int j = 0; j < ns && status == GCOMP_OK; j++) {
    size_t off = (size_t)j * seg, len = slen - off < seg ? slen - off : seg;
    if (!slen) off = len = 0;
    status = gcomp_isend(c->t, peer, gcomp_coll_stag(c, phase, step, (unsigned)j, len),
                         sbuf + off, len, &reqs[j]);
    c->stats->wire_bytes += len;
  }
  /* reduce segments in arrival order. When the reduction target is the buffer being sent
   * (dst == sbuf, recursive doubling), segment j is reduced only once its send is done. */
  int in_place = dst && dst == sbuf;
  unsigned char pend_stack[64], *pending = pend_stack;   /* received, not yet reduced */
  if (nr > 64 && status == GCOMP_OK) {
    pending = calloc((size_t)nr, 1);
    if (!pending) status = gcomp_error_set(GCOMP_ERR_NOMEM, __FILE__, __LINE__, "exchange flags");
  } else {
    memset(pend_stack, 0, sizeof pend_stack);
  }
  int left = total, unreduced = 0;
  int scur = 0, rcur = ns;   /* oldest pending send and receive: both complete in order */
  unsigned spins = 0;
  uint64_t idle_from = 0;
  while (status == GCOMP_OK && (left > 0 || unreduced > 0)) {
    int moved = 0;
    for (int pass = 0; pass < 2 && status == GCOMP_OK; pass++) {
      int *cur = pass ? &scur : &rcur, end = pass ? ns : total;
      while (*cur < end && status == GCOMP_OK) {
        int i = *cur, done = 0;
        size_t got = 0;
        status = gcomp_test(c->t, reqs[i], &done, &got);
        if (status < 0) reqs[i] = NULL;   /* test frees a failed request */
        if (status < 0 || !done) break;
        if (i >= ns) {   /* a receive: exactly the segment this rank expects */
          size_t off = (size_t)(i - ns) * seg, want = rlen - off < seg ? rlen - off : seg;
          if (!rlen) want = 0;
          if (got != want) {
            reqs[i] = NULL;
            status = gcomp_error_set(GCOMP_ERR_INVALID, __FILE__, __LINE__,
                                     "rank %d sent %zu bytes where this rank expected %zu: do all "
                                     "ranks pass the same count and dtype?", peer, got, want);
            break;
          }
        }
        reqs[i] = NULL;
        (*cur)++;
        left--;
        moved = 1;
        if (i >= ns && dst && rlen) pending[i - ns] = 1, unreduced++;
      }
    }
    for (int j = 0; j < nr && unreduced > 0 && status == GCOMP_OK; j++) {
      if (!pending[j] || (in_place && j < ns && reqs[j])) continue;
      size_t off = (size_t)j * seg, len = rlen - off < seg ? rlen - off : seg;
      uint64_t t0 = gcomp_now_ns();
      if (addend && c->recv_first)
        c->reduce3(dst + off, rbuf + off, addend + off, len / c->esize);
      else if (addend)
        c->reduce3(dst + off, addend + off, rbuf + off, len / c->esize);
      else if (c->recv_first)   /* received op= mine in the scratch, then into place */
        c->reduce(rbuf + off, dst + off, len / c->esize), memcpy(dst + off, rbuf + off, len);
      else
        c->reduce(dst + off, rbuf + off, len / c->esize);
      c->stats->reduce_s += (double)(gcomp_now_ns() - t0) * 1e-9;
      pending[j] = 0;
      unreduced--;
      moved = 1;
    }
    if (moved) {
      spins = 0;
      if (idle_from) c->stats->wait_s += (double)(gcomp_now_ns() - idle_from) * 1e-9;
      idle_from = 0;
    } else {
      if (!idle_from) idle_from = gcomp_now_ns();
      gcomp_idle(&spins);
      /* the abort notices (abort.h); never over a failure the tests above found */
      if (status == GCOMP_OK) status = gcomp_abort_poll(c->abort);
    }
  }
  if (pending != pend_stack) free(pending);
  if (idle_from) c->stats->wait_s += (double)(gcomp_now_ns() - idle_from) * 1e-9;
  if (status < 0) cancel_all(c, reqs, total);
  if (reqs != stack) free(reqs);
  if (status < 0) return gcomp_error_trace(status, __FILE__, __LINE__);
  return GCOMP_OK;
}
