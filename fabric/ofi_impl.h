/* Internals of the libfabric transport, shared by its files:
 *   ofi.c        creation: who is where, fabric addresses, the ping; the ops table
 *   ofi_ep.c     endpoints: provider choice, attributes, opening and closing
 *   ofi_req.c    the request pool and request state
 *   ofi_proto.c  the protocol: headers, credits, grants, software matching; its parts:
 *                ofi_flow.c, ofi_match.c (what they share: ofi_proto.h); the header's wire
 *                encoding: ofi_hdr.c (layout: ofi_hdr.h)
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

#include "fi_lazy.h"   /* after the <rdma/...> headers: see there */

#include "gcomp_common.h"
#include "transport.h"

/* ---- the wire (fabric/ofi_proto.c has the protocol) ------------------------------------ */
#define OFI_WINDOW 8   /* data chunks of one message in flight at once, at least */
#define OFI_WINDOW_MAX 128   /* ... and at most: enough chunks for OFI_WINDOW_BYTES */
#define OFI_WINDOW_BYTES (1u << 20)   /* bytes of one message in flight, where chunks allow */
#define OFI_RUN_BYTES (OFI_WINDOW_BYTES / 2)   /* shm: granted chunks per provider message */
#define KIND_SHIFT GCOMP_TAG_BITS
#define KIND_HDR (UINT64_C(1) << KIND_SHIFT)    /* provider tag of every header */
#define KIND_DATA (UINT64_C(2) << KIND_SHIFT)   /* | token: the chunks of one granted message */
#define KIND_PING (UINT64_C(3) << KIND_SHIFT)   /* match tags of the transport's own messages */
#define KIND_BYE (UINT64_C(4) << KIND_SHIFT)
/* | tag: an inline message's payload alone, where its header would not fit the inject size
 * (shm's 4 KiB); it lands in a header slot (slots ignore these bits), credits in CQ data */
#define KIND_BARE (UINT64_C(5) << KIND_SHIFT)
#define HDR_IGNORE (GCOMP_TAG_MASK | (UINT64_C(4) << KIND_SHIFT))
/* a header slot: the header and, for small messages, the payload: 4 KiB of it where the
 * provider's inject size does not cut it (4 KiB inline over tcp;ofi_rxm is one eager message
 * instead of three) */
#define OFI_HDR_BYTES (4096 + 64)
#define OFI_SLOTS_MAX 16     /* header slots per peer (fewer when the provider has few entries) */
#define OFI_UNEXP_MAX 64     /* unmatched messages per peer kept in software before credits stop */
#define OFI_SCHED_ACTIVE 8   /* scheduled receives per peer with chunks posted and RTR sent */
#define MAX_NAME 256
#define LIVENESS_NS 100000000ull   /* check a silent same-host peer's pid this often */

enum { OP_SEND = 1, OP_RECV = 2 };
enum { CTX_DATA = 1, CTX_HRECV, CTX_HSEND };   /* what a completion's context is */

/* Every context handed to the provider starts so (FI_CONTEXT: the provider owns ctx while
 * the operation is posted). */
typedef struct {
  struct fi_context ctx;
  int what;
} ofi_ctx;

typedef struct ofi_slot {   /* one provider message of data: a run of chunks of a request */
  ofi_ctx c;
  struct gcomp_treq *req;   /* NULL while the slot is free */
  size_t off, len;          /* where in the message, and the bytes posted */
} ofi_slot;

typedef struct {            /* a header slot: a receive always posted for one peer */
  ofi_ctx c;
  int peer;
  int posted;
  int owe;                  /* give its credit back once reposted (not for a held header) */
  char *buf;
} ofi_hrecv;

typedef struct {            /* a header being sent (providers whose inject size is smaller) */
  ofi_ctx c;
  int peer;
  int busy;
  struct gcomp_treq *req;   /* a send that completes with this header (no_inject), or NULL */
  char *buf;
} ofi_hsend;

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
  int batch;                /* chunks per provider message of the receives it posts (ofi_proto.c) */
  size_t inline_max;        /* payload bytes that travel inside the header (ofi_proto.c) */
  size_t bare_max;          /* ... and alone, by fi_tinjectdata, beyond that (0: none) */
  int rx_size;              /* the provider's receive entries */
  int rx_hdr, rx_used;      /* taken by header slots, by chunk receives (ofi_proto.c) */
  int cq_broken;            /* its CQ reported an error it could not read: not read again */
  int cq_fd;                /* the CQ's wait fd (FI_WAIT_FD, GCOMP_CQ_WAIT), or -1: none */
  int mr_local;
  struct fid_mr *arena_mr;  /* the header arena, registered when mr_local */
  void *arena_desc;
  char name[MAX_NAME];
  size_t namelen;
} ofi_ep;

/* A request sits in at most one of its peer's queues at a time (and a scheduled receive
 * also in its peer's token list until the sender's length header comes) */
enum { Q_NONE = 0, Q_POSTED, Q_RTS, Q_AWAIT, Q_CTS, Q_RTR, Q_SCHED, Q_SLEN, Q_COUNT };

struct gcomp_treq {
  int op;
  int peer;
  ofi_ep *ep;
  fi_addr_t addr;
  uint64_t mtag;            /* matched in software: the caller's tag, or KIND_PING/KIND_BYE */
  char *buf;
  size_t cap;               /* send: length; recv: capacity */
  size_t total;             /* message length (recv: known once matched) */
  uint64_t id;              /* send: this message's number to its peer; recv: the matched one's */
  uint64_t token;           /* data tag of the chunks (the receiver chooses it) */
  size_t chunk;             /* chunk size of the data phase (the receiver's) */
  int batch;                /* chunks per provider message (the receiver's; >= 1 once known) */
  size_t grant;             /* send: bytes the receiver has posted; recv: bytes this side posted */
  size_t next_off;          /* next byte to post */
  size_t done_bytes;        /* bytes whose chunk completed */
  int queue;                /* Q_*: which queue of its peer holds it */
  int matched;              /* recv: a message was matched; send: its header went out */
  int finished;             /* all bytes moved (or the message was inline) */
  int inflight;             /* provider operations posted and not completed */
  size_t inbytes;           /* ... and the bytes they cover */
  int slot_hint;            /* where ofi_slot_get looks first */
  size_t wide;              /* the most bytes it had in flight: receives grant half of it */
  int want_post;            /* a chunk met backpressure: progress retries it */
  int no_inject;            /* needs a completion that says the bytes left */
  int sched;                /* a scheduled message (GCOMP_TAG_SCHED): receiver-ready grants */
  int active;               /* scheduled receive: counted in its peer's nactive */
  int rtr_sent;             /* scheduled receive: its ready-to-receive header went out */
  int len_known;            /* scheduled receive: the sender's length header arrived */
  size_t peer_cap;          /* scheduled send: the receive's capacity (from its RTR) */
  int status;               /* <0 once failed */
  int zombie;               /* abandoned by the caller: freed when nothing is in flight */
  uint64_t last_ns;         /* start of the current silence; 0: activity since last look */
  struct fid_mr *mr;
  void *desc;
  unsigned polls;           /* tests since the last clock check */
  struct gcomp_treq *next, *prev;     /* every live request */
  struct gcomp_treq *qnext, *qprev;   /* its peer's queue */
  struct gcomp_treq *tnext, *tprev;   /* scheduled receive: its peer's token list */
  int in_tok;
  /* a request is reused without clearing what follows: slots are free whenever it is */
  ofi_slot slot[OFI_WINDOW];
  ofi_slot *xslot;          /* [OFI_WINDOW_MAX - OFI_WINDOW] once a window was wider, or NULL */
  char err[512];
};
#define REQ_HEADER_BYTES offsetof(struct gcomp_treq, slot)
#define MAX_SPARE_REQS 128

typedef struct ofi_unexp {  /* a header that matched no posted receive (or send) yet */
  struct ofi_unexp *next;
  uint64_t mtag, len, id;   /* RTR: len granted, id the receive's capacity */
  uint64_t token, chunk;    /* RTR only */
  int batch;                /* RTR only */
  int held;                 /* its credit is returned only when it is matched */
  int in;                   /* its payload is inline */
  int unsched;              /* a refused scheduled send's: the ranks disagree on the mark */
  size_t n;                 /* inline bytes */
  char data[];
} ofi_unexp;

typedef struct {
  gcomp_treq *head, *tail;
} ofi_queue;

typedef struct {            /* a header owed to a peer that no request carries any more */
  int type, flags;
  uint64_t token, len, id;
} ofi_owed;

/* Flow control with one peer (fabric/ofi_proto.c) */
typedef struct {
  int nslots;               /* header slots each side keeps posted for the other */
  int cred;                 /* headers this side may still send to the peer */
  int owed;                 /* credits to give back: slots of the peer's reposted here */
  int nunexp, nheld;
  int nactive;              /* scheduled receives with chunks posted (OFI_SCHED_ACTIVE) */
  uint64_t next_id, next_token;
  ofi_hrecv *hrecv;         /* [nslots] */
  ofi_hsend *hsend;         /* [nslots + 2] */
  ofi_queue q[Q_COUNT];     /* by Q_*: posted receives, unsent headers, sends awaiting grants,
                               receives owing a grant, unsent RTRs, scheduled sends awaiting
                               their RTR, scheduled sends owing their length header */
  ofi_queue tok;            /* scheduled receives whose RTR went out, awaiting the length */
  ofi_unexp *uhead, *utail;
  ofi_unexp *ruhead, *rutail;   /* RTRs that matched no scheduled send yet */
  ofi_owed *owed_hdr;       /* RCANCEL, refusing SLEN and DROP headers owed to the peer (a
                             * DROP: a message too long for its receive; as many as come) */
  int nowed_hdr, owed_hdr_cap;
  int dirty;                /* something may be sendable: progress pumps it */
  int heard;                /* a header that moved something came since test last looked */
  uint64_t heard_ns;        /* when test saw that last (the peer is alive and busy) */
  int broken;               /* a header exchange failed: its requests fail */
} ofi_peer;

/* What a rank tells every other at bootstrap: magic and version first, so that a rank of
 * another build is refused by name */
#define OFI_CARD_MAGIC 0x67636364u   /* "gccd" */
typedef struct {
  uint32_t magic;           /* OFI_CARD_MAGIC */
  uint32_t version;         /* gcomp_wire_version */
  int32_t pid;
  char host[64];
  char pidns[64];           /* "pid:[inode]": pids compare only within one namespace */
  char node[128];
} rank_card;
/* Checks the n cards of bootstrap's first round (magic, and one wire version: mine is this
 * rank's, for the error) and ends their strings; keys[r] = rank r's node name */
int gcomp_ofi_cards_read(rank_card *cards, int n, unsigned mine, const char **keys);

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
  ofi_peer *peers;          /* [size] */
  char *arena;              /* every peer's header slots and header send buffers */
  size_t arena_bytes;
  rank_card *cards;         /* [size] */
  uint64_t *live_check_ns;  /* [size] */
  int *topo;
  gcomp_treq *active;       /* every request not yet freed */
  gcomp_treq *spare;        /* freed requests kept for reuse (small messages are hot) */
  int nspare;
  int ndirty;               /* peers with dirty set */
  int npost_pending;        /* requests with want_post set */
  int ready;                /* setup finished: destroy says goodbye first */
  int fault_cqerr;          /* GCOMP_FAULT=cqerr armed here and setup done (fabric/fault.h) */
  int can_block;            /* an endpoint's CQ has a wait fd: idle waits may block on it */
  int block_whole;          /* ... every endpoint's, and no rank shares this node */
  int trywait_again;        /* fi_trywait found something pending this many times running */
  unsigned wire;            /* the wire version this rank speaks (its rank card's) */
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
int ofi_nslots(const gcomp_treq *r);              /* slots it has: index with ofi_slot_at */
ofi_slot *ofi_slot_at(gcomp_treq *r, int i);
int ofi_slots_widen(gcomp_treq *r);               /* 0 when it has OFI_WINDOW_MAX slots */
void ofi_req_release(gcomp_treq *r);              /* frees a request for good */
int ofi_req_complete(const gcomp_treq *r);
const char *ofi_op_name(const gcomp_treq *r);
int ofi_is_backpressure(ssize_t rc);
void ofi_req_abandon(ofi_transport *t, gcomp_treq *r);

int ofi_post(ofi_transport *t, int op, int peer, uint64_t mtag, void *buf, size_t len,
             gcomp_treq **out, int no_inject);
int ofi_isend(gcomp_transport *tp, int peer, uint64_t tag, const void *buf, size_t len,
              gcomp_treq **req);
int ofi_irecv(gcomp_transport *tp, int peer, uint64_t tag, void *buf, size_t capacity,
              gcomp_treq **req);
int ofi_proto_setup(ofi_transport *t);   /* after the addresses: header slots posted */
void ofi_proto_pump(ofi_transport *t);   /* sends what credits allow, reposts slots */
/* a completion: its length, provider tag and CQ data */
void ofi_proto_done(ofi_transport *t, ofi_ctx *c, size_t len, uint64_t tag, uint64_t data);
void ofi_proto_error(ofi_transport *t, ofi_ctx *c, int err, const char *detail);
void ofi_proto_unqueue(ofi_transport *t, gcomp_treq *r);
/* a request leaves its scheduled pairing (cancelled: the peer is told) */
void ofi_proto_forget(ofi_transport *t, gcomp_treq *r, int cancelled);
void ofi_proto_free(ofi_transport *t);

int ofi_progress(gcomp_transport *tp);
int ofi_block(gcomp_transport *tp, long ns);   /* gcomp_block_fn: ofi_cq.c */
int ofi_test(gcomp_transport *tp, gcomp_treq *r, int *done, size_t *len);
int ofi_cancel(gcomp_transport *tp, gcomp_treq *r);
void ofi_destroy(gcomp_transport *tp);

void ofi_rxm_tcp_defaults(const char *prov, size_t chunk_bytes);
int ofi_ep_open(ofi_ep *e, const char *role, const char *prov, size_t chunk_bytes, int nranks,
                int cq_wait);
void ofi_ep_close(ofi_ep *e);

#endif /* GCOMP_OFI_IMPL_H */
