/* Non-blocking calls: a FIFO of requests per communicator, served by one progress thread
 * started on the first gcomp_iallreduce; and gcomp_allreduce, which joins that queue once
 * the thread runs so that calls keep their order and the transport keeps one user. */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm_impl.h"

/* One queued call and, once it ran, its outcome. */
struct gcomp_request {
  gcomp_comm *comm;
  gcomp_call call;
  struct gcomp_request *next;
  int done, status;
  char error[1024];            /* gcomp_last_error() of the progress thread on failure */
};

static void *progress_main(void *arg) {
  gcomp_comm *comm = arg;
  /* named, for top -H and the benchmarks' per-thread CPU (bench/overlap_timeline.py) */
  pthread_setname_np(pthread_self(), "gcomp-progress");
  /* the thread's own setting (comm.c) */
  gcomp_idle_naps(comm->progress_naps ? GCOMP_NAPS_LENGTHEN : GCOMP_NAPS_OFF);
  pthread_mutex_lock(&comm->mu);
  for (;;) {
    while (!comm->head && !comm->stopping) pthread_cond_wait(&comm->cv, &comm->mu);
    if (!comm->head) break;   /* stopping, and nothing left to run */
    gcomp_request *r = comm->head;
    pthread_mutex_unlock(&comm->mu);
    int st = gcomp_call_run(comm, &r->call);
    pthread_mutex_lock(&comm->mu);
    r->status = st;
    if (st < 0) snprintf(r->error, sizeof r->error, "%s", gcomp_last_error());
    comm->head = r->next;
    if (!comm->head) comm->tail = NULL;
    r->done = 1;
    pthread_cond_broadcast(&comm->cv);
  }
  pthread_mutex_unlock(&comm->mu);
  return NULL;
}

/* Runs what is queued, then ends the thread */
void gcomp_progress_stop(gcomp_comm *comm) {
  pthread_mutex_lock(&comm->mu);
  int on = comm->thread_on;
  comm->stopping = 1;
  pthread_cond_broadcast(&comm->cv);
  pthread_mutex_unlock(&comm->mu);
  if (on) pthread_join(comm->thread, NULL);
  __atomic_store_n(&comm->thread_on, 0, __ATOMIC_RELEASE);
}

int gcomp_progress_pending(gcomp_comm *comm) {
  pthread_mutex_lock(&comm->mu);
  int pending = comm->pending;
  pthread_mutex_unlock(&comm->mu);
  return pending;
}

static int enqueue(gcomp_comm *comm, gcomp_request *r) {
  pthread_mutex_lock(&comm->mu);
  if (!comm->thread_on) {
    int rc = pthread_create(&comm->thread, NULL, progress_main, comm);
    if (rc) {
      pthread_mutex_unlock(&comm->mu);
      GCOMP_FAIL(GCOMP_ERR_NOMEM, "gcomp_iallreduce: cannot start the progress thread: %s",
                 strerror(rc));
    }
    __atomic_store_n(&comm->thread_on, 1, __ATOMIC_RELEASE);   /* read unlocked by calls */
  }
  int idle = !comm->head;   /* the thread waits for work: this call is the next to run */
  if (comm->tail) comm->tail->next = r;
  else comm->head = r;
  comm->tail = r;
  comm->pending++;
  pthread_cond_broadcast(&comm->cv);
  pthread_mutex_unlock(&comm->mu);
  /* a progress thread beside the caller's computation (comm.c): woken from its wait, it
   * queued behind the caller for 1.5-7 ms before its call went on the wire (the first
   * bucket of a DDP backward pass on 2 ranks of 2 vCPUs). The caller hands it the CPU at
   * once; the call posts its messages and naps, and the caller goes on. */
  if (idle && comm->progress_naps) sched_yield();
  return GCOMP_OK;
}

/* Only the fields gcomp_call_run reads before writing are cleared (gcomp_call_clear) */
static void call_of(gcomp_call *c, const void *sendbuf, void *recvbuf, size_t count,
                    gcomp_dtype dtype, gcomp_op op, gcomp_codec *codec, uint64_t key) {
  gcomp_call_clear(c);
  c->kind = GCOMP_COLL_ALLREDUCE;
  c->sendbuf = sendbuf, c->recvbuf = recvbuf, c->count = count;
  c->dtype = dtype, c->op = op, c->codec = codec, c->key = key;
}

gcomp_status gcomp_iallreduce(gcomp_comm *comm, const void *sendbuf, void *recvbuf, size_t count,
                              gcomp_dtype dtype, gcomp_op op, gcomp_codec *codec, uint64_t key,
                              gcomp_request **req) {
  GCOMP_FAIL_IF(!req, GCOMP_ERR_INVALID, "gcomp_iallreduce: req is NULL");
  *req = NULL;
  GCOMP_CHECK(gcomp_call_check_args("gcomp_iallreduce", comm, sendbuf, recvbuf, count, dtype, op));
  gcomp_request *r = calloc(1, sizeof *r);
  GCOMP_FAIL_IF(!r, GCOMP_ERR_NOMEM, "gcomp_iallreduce: request");
  r->comm = comm;
  call_of(&r->call, sendbuf, recvbuf, count, dtype, op, codec, key);
  r->call.arrive_ns = gcomp_now_ns();   /* the rank's arrival at this call */
  int st = enqueue(comm, r);
  if (st < 0) {
    free(r);
    return st;
  }
  *req = r;
  return GCOMP_OK;
}

/* Frees a request that has run (under comm->mu, which the caller holds) */
static int finish(gcomp_request *r) {
  r->comm->pending--;
  int st = r->status;
  if (st < 0) gcomp_error_restore(st, r->error);
  free(r);
  return st;
}

gcomp_status gcomp_request_wait(gcomp_request *req) {
  GCOMP_FAIL_IF(!req, GCOMP_ERR_INVALID, "gcomp_request_wait: req is NULL");
  gcomp_comm *comm = req->comm;
  pthread_mutex_lock(&comm->mu);
  while (!req->done) pthread_cond_wait(&comm->cv, &comm->mu);
  int st = finish(req);
  pthread_mutex_unlock(&comm->mu);
  return st;
}

gcomp_status gcomp_request_test(gcomp_request *req, int *done) {
  GCOMP_FAIL_IF(!req || !done, GCOMP_ERR_INVALID, "gcomp_request_test: NULL argument");
  gcomp_comm *comm = req->comm;
  pthread_mutex_lock(&comm->mu);
  *done = req->done;
  int st = *done ? finish(req) : GCOMP_OK;
  pthread_mutex_unlock(&comm->mu);
  return st;
}

int gcomp_call_submit(gcomp_comm *comm, const gcomp_call *call, gcomp_request **req,
                      const char *fn) {
  GCOMP_FAIL_IF(!comm, GCOMP_ERR_INVALID, "%s: comm is NULL", fn);
  /* as gcomp_allreduce: the caller's thread runs it */
  if (!req && !__atomic_load_n(&comm->thread_on, __ATOMIC_ACQUIRE)) {
    gcomp_call c = *call;
    return gcomp_call_run(comm, &c);
  }
  gcomp_request *r = calloc(1, sizeof *r);
  GCOMP_FAIL_IF(!r, GCOMP_ERR_NOMEM, "%s: request", fn);
  r->comm = comm;
  r->call = *call;
  r->call.arrive_ns = gcomp_now_ns();
  int st = enqueue(comm, r);
  if (st < 0) {
    free(r);
    return st;
  }
  if (!req) return gcomp_request_wait(r);
  *req = r;
  return GCOMP_OK;
}

gcomp_status gcomp_allreduce(gcomp_comm *comm, const void *sendbuf, void *recvbuf, size_t count,
                             gcomp_dtype dtype, gcomp_op op, gcomp_codec *codec, uint64_t key) {
  GCOMP_CHECK(gcomp_call_check_args("gcomp_allreduce", comm, sendbuf, recvbuf, count, dtype, op));
  /* once a progress thread serves this communicator, every call goes through its queue:
   * calls keep their order and the transport keeps one user */
  /* an atomic read: an iallreduce on another thread may be starting the thread right now
   * (enqueue sets thread_on under mu, with the queue); taking mu here cost two locked
   * instructions a call */
  if (!__atomic_load_n(&comm->thread_on, __ATOMIC_ACQUIRE)) {
    gcomp_call call;
    call_of(&call, sendbuf, recvbuf, count, dtype, op, codec, key);
    return gcomp_call_run(comm, &call);
  }
  gcomp_request *r;
  GCOMP_CHECK(gcomp_iallreduce(comm, sendbuf, recvbuf, count, dtype, op, codec, key, &r));
  return gcomp_request_wait(r);
}
