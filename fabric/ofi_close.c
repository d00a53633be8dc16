/* The libfabric transport's teardown. See ofi_impl.h for the file map. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include "ofi_impl.h"

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
  uint64_t deadline = gcomp_now_ns() + (t->pub.failed ? 1000000000ull : UINT64_MAX / 2);
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
        if (reqs[i]) ofi_req_abandon(t, reqs[i]);
      GCOMP_INFO(GCOMP_SUB_FABRIC, "closing after a failure: %d goodbyes not exchanged", left);
      break;
    }
    gcomp_idle(&spins);
  }
out:
  free(reqs);
  free(bufs);
}

void ofi_destroy(gcomp_transport *tp) {
  ofi_transport *t = (ofi_transport *)tp;
  if (!t) return;
  if (t->ready) farewell(t);
  if (t->can_block)
    GCOMP_INFO(GCOMP_SUB_FABRIC, "rank %d: %" PRIu64 " idle waits blocked on the completion "
               "queue's wait fd, %" PRIu64 " of them woken by it", t->pub.rank,
               t->pub.blocked_waits, t->pub.fd_wakes);
  pthread_mutex_lock(&ofi_setup_lock);
  for (int i = 0; i < t->neps; i++)
    if (t->eps[i].ep) {
      fi_close(&t->eps[i].ep->fid);   /* nothing completes after this: requests can go */
      t->eps[i].ep = NULL;
    }
  while (t->active) ofi_req_free(t, t->active);
  while (t->spare) {
    gcomp_treq *r = t->spare;
    t->spare = r->next;
    ofi_req_release(r);
  }
  ofi_proto_free(t);
  for (int i = 0; i < t->neps; i++) ofi_ep_close(&t->eps[i]);
  pthread_mutex_unlock(&ofi_setup_lock);
  free(t->ep_of);
  free(t->addr);
  free(t->cards);
  free(t->live_check_ns);
  free(t->topo);
  free(t);
}
