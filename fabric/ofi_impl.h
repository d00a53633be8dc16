/* Internals of the libfabric transport, shared by its files:
 *   ofi.c        creation: who is where, fabric addresses, the ping; the ops table
 *   ofi_ep.c     endpoints: provider choice, attributes, opening and closing
 *   ofi_req.c    the request pool and request state
 *   ofi_chunk.c  the chunk protocol: posting a message's chunks (the wire format is there)
 *   ofi_cq.c     completions: reading the completion queues, progress
 *   ofi_live.c   test, cancel, timeouts and peer liveness
 *   ofi_close.c  teardown (collective goodbyes)
 */
#ifndef GCOMP_OFI_IMPL_H
#define GCOMP_OFI_IMPL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <rdma/fabric.h>

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
  int cq_broken;            /* its CQ reported an error it could not read: not read again */
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
  int fault_cqerr;          /* GCOMP_FAULT=cqerr armed here and setup done (fabric/fault.h) */
  char host[64];
  char pidns[64];
} ofi_transport;

/* ---- shared between the files (see the list at the top) ------------------------------- */
extern pthread_mutex_t ofi_setup_lock;   /* ofi_ep.c: endpoint open/close, address inserts */

void ofi_req_link(ofi_transport *t, gcomp_treq *r);
void ofi_req_free(ofi_transport *t, gcomp_treq *r);
gcomp_treq *ofi_req_alloc(ofi_transport *t);
void ofi_req_fail(gcomp_treq *r, int status, const char *fmt, ...) GCOMP_PRINTF(3, 4);
ofi_slot *ofi_slot_get(gcomp_treq *r);
int ofi_req_complete(const gcomp_treq *r);
const char *ofi_op_name(const gcomp_treq *r);
int ofi_is_backpressure(ssize_t rc);
void ofi_req_abandon(ofi_transport *t, gcomp_treq *r);

void ofi_req_post(ofi_transport *t, gcomp_treq *r);
void ofi_fifo_pump(ofi_transport *t, int q);
int ofi_post(ofi_transport *t, int op, int peer, uint64_t fulltag, void *buf, size_t len,
             gcomp_treq **out, int no_inject);
int ofi_isend(gcomp_transport *tp, int peer, uint64_t tag, const void *buf, size_t len,
              gcomp_treq **req);
int ofi_irecv(gcomp_transport *tp, int peer, uint64_t tag, void *buf, size_t capacity,
              gcomp_treq **req);

int ofi_progress(gcomp_transport *tp);
int ofi_test(gcomp_transport *tp, gcomp_treq *r, int *done, size_t *len);
int ofi_cancel(gcomp_transport *tp, gcomp_treq *r);
void ofi_destroy(gcomp_transport *tp);

void ofi_rxm_tcp_defaults(const char *prov);
int ofi_ep_open(ofi_ep *e, const char *role, const char *prov, int nranks);
void ofi_ep_close(ofi_ep *e);

#endif /* GCOMP_OFI_IMPL_H */
