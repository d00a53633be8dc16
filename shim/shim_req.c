/* The non-blocking collectives gcomp serves (MPI_Iallreduce through gcomp_iallreduce,
 * MPI_Ireduce_scatter_block, MPI_Iallgather, MPI_Ibcast, MPI_Ibarrier through their gcomp
 * twins), and the completion calls that finish them.
 *
 * The caller gets a real MPI request: a generalized request (MPI_Grequest_start), so that
 * every MPI call that takes a request accepts it, compares it with MPI_REQUEST_NULL, and
 * frees it when it completes. gcomp runs the call on its progress thread; nobody else marks
 * the MPI request complete (MPI_Grequest_complete from that thread would need
 * MPI_THREAD_MULTIPLE): the shim's MPI_Wait, MPI_Test, MPI_Waitall, MPI_Testall,
 * MPI_Waitany, MPI_Testany, MPI_Waitsome, MPI_Testsome and MPI_Request_get_status look the
 * request up, test the gcomp request and, once it is done, complete the MPI one, then let
 * PMPI do the rest (status, freeing, the other requests of the array). While they wait for
 * gcomp they keep MPI's progress going (PMPI_Test on the pending request, which is never
 * complete there), as MPI's own wait would: a peer may need this rank's pending sends to get
 * to its matching MPI_Iallreduce.
 *
 * Status: as Open MPI gives for its own non-blocking collectives (source 0, tag 0, no
 * elements, not cancelled; MPI leaves them undefined); MPI_ERROR is left alone by the
 * single-request calls, as MPI's are. A call that failed in gcomp: the shim warns with
 * gcomp's reason, raises MPI_ERR_OTHER through the communicator's error handler from the
 * completion call (MPI_ERR_IN_STATUS from those that complete several, with MPI_ERR_OTHER in
 * that request's status), and the communicator's later calls fail at once. A request holds
 * its shim communicator until MPI frees the request (not only until gcomp finishes it), so
 * the completion call can tell whether MPI_Comm_free came meanwhile: then MPI_COMM_WORLD's
 * handler reports the failure, as the freed handle may no longer be used. */
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "shim.h"

typedef struct shim_req {
  MPI_Request mpi;          /* the generalized request the caller holds */
  gcomp_request *g;         /* NULL once gcomp finished it */
  shim_comm *sc;            /* counts this request pending until MPI frees it */
  MPI_Comm comm;            /* the caller's: its error handler reports a failure, unless
                               sc says it was freed meanwhile (MPI_COMM_WORLD's then) */
  int status;               /* gcomp's once finished */
  shim_call call;           /* what it runs: its name in warnings, and what to do after */
  struct shim_req *next;    /* hash chain */
} shim_req;

enum { BUCKETS = 256 };
static struct {
  pthread_mutex_t lock;
  shim_req *bucket[BUCKETS];
  int live;                 /* entries: 0 lets every completion call go straight to PMPI */
} reqs = {.lock = PTHREAD_MUTEX_INITIALIZER};

static unsigned bucket_of(MPI_Request h) {
  uint64_t v = 0;
  memcpy(&v, &h, sizeof h < sizeof v ? sizeof h : sizeof v);
  v ^= v >> 29;
  v *= 0xbf58476d1ce4e5b9ull;
  return (unsigned)(v >> 56) % BUCKETS;
}

static shim_req *find(MPI_Request h) {
  if (h == MPI_REQUEST_NULL || !__atomic_load_n(&reqs.live, __ATOMIC_ACQUIRE)) return NULL;
  pthread_mutex_lock(&reqs.lock);
  shim_req *r = reqs.bucket[bucket_of(h)];
  while (r && r->mpi != h) r = r->next;
  pthread_mutex_unlock(&reqs.lock);
  return r;
}

static void insert(shim_req *r) {
  pthread_mutex_lock(&reqs.lock);
  unsigned b = bucket_of(r->mpi);
  r->next = reqs.bucket[b];
  reqs.bucket[b] = r;
  __atomic_fetch_add(&reqs.live, 1, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&reqs.lock);
}

/* ---- the generalized request's callbacks --------------------------------------------- */
static int query_fn(void *extra, MPI_Status *status) {
  (void)extra;
  MPI_Status_set_elements(status, MPI_BYTE, 0);
  MPI_Status_set_cancelled(status, 0);
  status->MPI_SOURCE = 0;
  status->MPI_TAG = 0;
  return MPI_SUCCESS;
}

/* MPI frees the request (at completion, or MPI_Request_free of a completed one): its
 * communicator may go now (when it was freed and this was its last request) */
static int free_fn(void *extra) {
  shim_req *r = extra;
  pthread_mutex_lock(&reqs.lock);
  shim_req **p = &reqs.bucket[bucket_of(r->mpi)];
  while (*p && *p != r) p = &(*p)->next;
  if (*p) {
    *p = r->next;
    __atomic_fetch_sub(&reqs.live, 1, __ATOMIC_RELEASE);
  }
  pthread_mutex_unlock(&reqs.lock);
  shim_comm_request_done(r->sc);   /* may destroy it */
  free(r);
  return MPI_SUCCESS;
}

/* A collective cannot be cancelled (MPI_Cancel of one is erroneous): nothing to do */
static int cancel_fn(void *extra, int complete) {
  (void)extra, (void)complete;
  return MPI_SUCCESS;
}

/* ---- finishing ----------------------------------------------------------------------- */
static void finished(shim_req *r, int st) {
  r->g = NULL;
  r->status = st;
  if (st < 0) {
    SHIM_WARN("rank %d: %s of %zu elements failed in gcomp: %s: %s", shim_world_rank(),
              shim_kind_names[r->call.kind][1], r->call.count, gcomp_strerror(st),
              gcomp_last_error());
    pthread_mutex_lock(&r->sc->lock);
    r->sc->broken = 1;
    pthread_mutex_unlock(&r->sc->lock);
  } else {
    shim_call_finish(&r->call);
  }
  PMPI_Grequest_complete(r->mpi);   /* frees r when the caller had freed the request */
}

/* Whether the caller's communicator was freed (r is still the caller's request) */
static int comm_freed(const shim_req *r) {
  pthread_mutex_lock(&r->sc->lock);
  int freed = r->sc->freed;
  pthread_mutex_unlock(&r->sc->lock);
  return freed;
}

/* One look at gcomp's request; 1 when it is finished (now or before). */
static int poll_req(shim_req *r) {
  if (!r->g) return 1;
  int done = 0, st = gcomp_request_test(r->g, &done);
  if (done || st < 0) finished(r, st);
  return done || st < 0;
}

/* The waiting loops' idle step: MPI's progress (on a request that is still pending, so
 * PMPI_Test never completes it), then the CPU to the progress threads after a short spin. */
static void idle(shim_req *pending, unsigned *spins) {
  MPI_Request h = pending->mpi;
  int flag = 0;
  PMPI_Test(&h, &flag, MPI_STATUS_IGNORE);
  if (++*spins > 64) sched_yield();
}

/* A failure's report through the caller's communicator's error handler; returns code. */
static int raise_error(MPI_Comm comm, int freed, int code) {
  PMPI_Comm_call_errhandler(freed ? MPI_COMM_WORLD : comm, code);
  return code;
}

/* ---- starting one ------------------------------------------------------------------- */
int shim_istart(const shim_call *c, MPI_Comm comm, MPI_Request *request) {
  shim_comm *sc = c->sc;
  shim_req *r = calloc(1, sizeof *r);
  if (!r) return raise_error(comm, 0, MPI_ERR_NO_MEM);
  r->comm = comm, r->call = *c, r->sc = sc;
  pthread_mutex_lock(&sc->lock);
  int st = sc->broken ? gcomp_error_set(GCOMP_ERR_PEER, __FILE__, __LINE__,
                                        "shim: an earlier gcomp call on this communicator "
                                        "failed; it is unusable")
                      : shim_call_start(c, &r->g);
  sc->pending++;
  pthread_mutex_unlock(&sc->lock);
  if (PMPI_Grequest_start(query_fn, free_fn, cancel_fn, r, &r->mpi) != MPI_SUCCESS) {
    /* cannot hand out a request: finish gcomp's call here and report that */
    if (st == GCOMP_OK && gcomp_request_wait(r->g) < 0) {
      pthread_mutex_lock(&sc->lock);
      sc->broken = 1;
      pthread_mutex_unlock(&sc->lock);
    }
    shim_comm_request_done(sc);
    free(r);
    return raise_error(comm, 0, MPI_ERR_INTERN);
  }
  insert(r);
  if (st < 0) finished(r, st);   /* the call's outcome, reported where it is completed */
  *request = r->mpi;
  shim_count_served(c, 1);
  return MPI_SUCCESS;
}

/* ---- completion calls -------------------------------------------------------------------- */
SHIM_API int MPI_Wait(MPI_Request *request, MPI_Status *status) {
  shim_req *r = find(*request);
  if (!r) return PMPI_Wait(request, status);
  for (unsigned spins = 0; !poll_req(r);) idle(r, &spins);
  int st = r->status, freed = comm_freed(r);
  MPI_Comm comm = r->comm;
  int rc = PMPI_Wait(request, status);   /* frees r */
  return st < 0 ? raise_error(comm, freed, MPI_ERR_OTHER) : rc;
}

SHIM_API int MPI_Test(MPI_Request *request, int *flag, MPI_Status *status) {
  shim_req *r = find(*request);
  if (!r) return PMPI_Test(request, flag, status);
  if (!poll_req(r)) return PMPI_Test(request, flag, status);   /* MPI's progress; flag 0 */
  int st = r->status, freed = comm_freed(r);
  MPI_Comm comm = r->comm;
  int rc = PMPI_Test(request, flag, status);
  return st < 0 ? raise_error(comm, freed, MPI_ERR_OTHER) : rc;
}

SHIM_API int MPI_Request_get_status(MPI_Request request, int *flag, MPI_Status *status) {
  shim_req *r = find(request);
  if (r) poll_req(r);
  return PMPI_Request_get_status(request, flag, status);
}

/* The shim's requests among an array, and what they became, noted before PMPI frees them */
typedef struct {
  shim_req *r;
  int failed, freed;
  MPI_Comm comm;
} req_note;

typedef struct {
  req_note small[32], *at;
  int n, ours;
} req_set;

/* Returns how many of reqs_in are the shim's (0: PMPI alone serves the call), -1 without
 * memory for the notes. */
static int set_open(req_set *s, int n, const MPI_Request *reqs_in) {
  s->n = n, s->ours = 0, s->at = NULL;
  if (n <= 0 || !__atomic_load_n(&reqs.live, __ATOMIC_ACQUIRE)) return 0;
  s->at = n <= 32 ? s->small : calloc((size_t)n, sizeof *s->at);
  if (!s->at) {
    /* no room for notes: finish ours here (their failures are still warned about), then
     * PMPI completes the array */
    for (int i = 0; i < n; i++) {
      shim_req *r = find(reqs_in[i]);
      if (r && r->g) finished(r, gcomp_request_wait(r->g));
    }
    return -1;
  }
  for (int i = 0; i < n; i++) {
    s->at[i] = (req_note){.r = find(reqs_in[i])};
    s->ours += s->at[i].r != NULL;
  }
  if (!s->ours && s->at != s->small) free(s->at);
  return s->ours;
}

static void set_close(req_set *s) {
  if (s->at != s->small) free(s->at);
}

/* Polls each of the set's requests gcomp still runs and notes the outcome of the finished
 * ones; returns a pending one, or NULL when none is. */
static shim_req *set_poll(req_set *s) {
  shim_req *pending = NULL;
  for (int i = 0; i < s->n; i++) {
    req_note *a = &s->at[i];
    if (!a->r) continue;
    if (!poll_req(a->r)) {
      if (!pending) pending = a->r;
      continue;
    }
    a->failed = a->r->status < 0, a->freed = comm_freed(a->r), a->comm = a->r->comm;
  }
  return pending;
}

/* After PMPI completed the k requests idx[0..k) (idx NULL: all n, in order) with rc: their
 * statuses' MPI_ERROR for the failed ones, and MPI_ERR_IN_STATUS through the first failed
 * one's communicator's handler. */
static int report_some(const req_set *s, int k, const int *idx, MPI_Status *statuses, int rc) {
  const req_note *first = NULL;
  for (int j = 0; j < k; j++) {
    const req_note *a = &s->at[idx ? idx[j] : j];
    if (a->r && a->failed && !first) first = a;
  }
  if (!first) return rc;
  for (int j = 0; statuses != MPI_STATUSES_IGNORE && j < k; j++) {
    const req_note *a = &s->at[idx ? idx[j] : j];
    if (a->r && a->failed) statuses[j].MPI_ERROR = MPI_ERR_OTHER;
    else if (rc == MPI_SUCCESS) statuses[j].MPI_ERROR = MPI_SUCCESS;
  }
  return raise_error(first->comm, first->freed, MPI_ERR_IN_STATUS);
}

/* After PMPI completed one index (Waitany, Testany) */
static int report_one(const req_set *s, int index, int rc) {
  if (index < 0 || index == MPI_UNDEFINED || index >= s->n) return rc;
  const req_note *a = &s->at[index];
  return a->r && a->failed ? raise_error(a->comm, a->freed, MPI_ERR_OTHER) : rc;
}

SHIM_API int MPI_Waitall(int count, MPI_Request reqs_in[], MPI_Status statuses[]) {
  req_set s;
  if (set_open(&s, count, reqs_in) <= 0) return PMPI_Waitall(count, reqs_in, statuses);
  unsigned spins = 0;
  for (shim_req *p; (p = set_poll(&s));) idle(p, &spins);
  int rc = report_some(&s, count, NULL, statuses, PMPI_Waitall(count, reqs_in, statuses));
  set_close(&s);
  return rc;
}

SHIM_API int MPI_Testall(int count, MPI_Request reqs_in[], int *flag, MPI_Status statuses[]) {
  req_set s;
  if (set_open(&s, count, reqs_in) <= 0) return PMPI_Testall(count, reqs_in, flag, statuses);
  /* with one of ours pending PMPI cannot complete them all: MPI's progress, flag 0 */
  set_poll(&s);
  int rc = PMPI_Testall(count, reqs_in, flag, statuses);
  if (*flag) rc = report_some(&s, count, NULL, statuses, rc);
  set_close(&s);
  return rc;
}

SHIM_API int MPI_Waitany(int count, MPI_Request reqs_in[], int *index, MPI_Status *status) {
  req_set s;
  if (set_open(&s, count, reqs_in) <= 0) return PMPI_Waitany(count, reqs_in, index, status);
  unsigned spins = 0;
  int rc, flag = 0;
  for (;;) {
    shim_req *pending = set_poll(&s);
    if (!pending) {
      rc = PMPI_Waitany(count, reqs_in, index, status);
      break;
    }
    /* one of ours that finished, or one of MPI's */
    rc = PMPI_Testany(count, reqs_in, index, &flag, status);
    if (flag || rc != MPI_SUCCESS) break;
    idle(pending, &spins);
  }
  rc = report_one(&s, *index, rc);
  set_close(&s);
  return rc;
}

SHIM_API int MPI_Testany(int count, MPI_Request reqs_in[], int *index, int *flag,
                         MPI_Status *status) {
  req_set s;
  if (set_open(&s, count, reqs_in) <= 0) return PMPI_Testany(count, reqs_in, index, flag, status);
  set_poll(&s);
  int rc = PMPI_Testany(count, reqs_in, index, flag, status);
  if (*flag) rc = report_one(&s, *index, rc);
  set_close(&s);
  return rc;
}

SHIM_API int MPI_Waitsome(int incount, MPI_Request reqs_in[], int *outcount, int indices[],
                          MPI_Status statuses[]) {
  req_set s;
  if (set_open(&s, incount, reqs_in) <= 0)
    return PMPI_Waitsome(incount, reqs_in, outcount, indices, statuses);
  unsigned spins = 0;
  int rc;
  for (;;) {
    shim_req *pending = set_poll(&s);
    if (!pending) {
      rc = PMPI_Waitsome(incount, reqs_in, outcount, indices, statuses);
      break;
    }
    rc = PMPI_Testsome(incount, reqs_in, outcount, indices, statuses);
    if (*outcount != 0 || rc != MPI_SUCCESS) break;
    idle(pending, &spins);
  }
  if (*outcount != MPI_UNDEFINED) rc = report_some(&s, *outcount, indices, statuses, rc);
  set_close(&s);
  return rc;
}

SHIM_API int MPI_Testsome(int incount, MPI_Request reqs_in[], int *outcount, int indices[],
                          MPI_Status statuses[]) {
  req_set s;
  if (set_open(&s, incount, reqs_in) <= 0)
    return PMPI_Testsome(incount, reqs_in, outcount, indices, statuses);
  set_poll(&s);
  int rc = PMPI_Testsome(incount, reqs_in, outcount, indices, statuses);
  if (*outcount != MPI_UNDEFINED) rc = report_some(&s, *outcount, indices, statuses, rc);
  set_close(&s);
  return rc;
}

/* ---- MPI_Finalize ------------------------------------------------------------------------ */
void shim_reqs_finalize(void) {
  for (;;) {
    shim_req *r = NULL;
    pthread_mutex_lock(&reqs.lock);
    for (int b = 0; b < BUCKETS && !r; b++)
      for (shim_req *q = reqs.bucket[b]; q && !r; q = q->next)
        if (q->g) r = q;
    pthread_mutex_unlock(&reqs.lock);
    if (!r) return;
    finished(r, gcomp_request_wait(r->g));
  }
}
