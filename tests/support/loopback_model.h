/* The provider model under the constrained loopback (loopback_constrained.c): what
 * libfabric 1.17's shm does with provider messages, in one process, under the caller's lock.
 *
 *   - Each rank has `entries` receive entries, shared by its posted receives and the
 *     unexpected messages that arrived for it.
 *   - Messages from one sender to one receiver arrive in order: the one at the head is taken
 *     when a posted receive matches it (by source and tag, or the receive it was granted for)
 *     or an entry is free; else it stays with its sender, and so does everything behind it.
 *   - A receive that matches no unexpected message and finds no entry waits for one.
 *     Receives posted "in order" wait behind each other (the transport's FIFO); the others
 *     are retried each on its own.
 *   - A rank's sends complete in the order they were posted, whatever their peer.
 * Payload is copied from the sender's buffer when a send meets its receive. The hooks tell
 * the protocol above when a receive got its message or an entry, and when a send completed. */
#ifndef GCOMP_LOOPBACK_MODEL_H
#define GCOMP_LOOPBACK_MODEL_H

#include <stddef.h>
#include <stdint.h>

typedef struct lbm_msg lbm_msg;
typedef struct lbm_list {
  lbm_msg *head, *tail;
} lbm_list;

enum { LBM_WAIT, LBM_POSTED, LBM_UNEXP, LBM_DELIVERED };

/* one provider operation; the caller fills the fields above `state` */
struct lbm_msg {
  int send;                  /* 1 send, 0 receive */
  int src, dst;
  uint64_t ptag;
  const uint8_t *sbuf;
  uint8_t *rbuf;
  size_t len;                /* send: bytes; receive: capacity */
  uint64_t data;             /* carried from the send to its receive */
  size_t off;                /* the protocol's: where in its message */
  lbm_msg *target;           /* a granted send: its receive; a granted receive: itself */
  void *owner;               /* the protocol's request; NULL once it let go */
  int state;
  uint8_t *owned;            /* an unexpected message whose sender let go: its copy */
  lbm_list *in;
  lbm_msg *next, *prev;
  lbm_msg *onext;            /* sends: the sender's posting order */
};

typedef struct lbm_hooks {
  void (*recv_done)(void *ctx, lbm_msg *r, size_t got, int truncated);   /* r freed after */
  void (*recv_posted)(void *ctx, lbm_msg *r);                            /* r holds an entry */
  void (*send_done)(void *ctx, lbm_msg *s);                              /* s freed after */
  void *ctx;
} lbm_hooks;

typedef struct lbm {
  int size, entries;
  int unasked;               /* 0: no send ever arrives unasked (granted receives only) */
  lbm_hooks hooks;
  int *free_entries;         /* [size] */
  lbm_list *wait_first;      /* [size] in-order receives waiting for an entry */
  lbm_list *wait_more;       /* [size] other receives waiting for an entry */
  lbm_list *posted, *unexp;  /* [size] */
  lbm_list *wait_send;       /* [size * size] (src, dst): not taken yet, in order */
  lbm_msg **ohead, **otail;  /* [size] each sender's sends in posting order */
  uint64_t *pair_ns;         /* [size * size] last time a message moved from src to dst */
} lbm;

int lbm_init(lbm *m, int size, int entries, int unasked, const lbm_hooks *hooks);
void lbm_free(lbm *m);
lbm_msg *lbm_msg_new(int send, int src, int dst, uint64_t ptag, void *owner);
void lbm_send(lbm *m, lbm_msg *s);
void lbm_recv(lbm *m, lbm_msg *r, int in_order);
/* Moves everything that can move; the hooks may post more. */
void lbm_pump(lbm *m);
/* Takes owner's operations out (and sends granted for its receives): nothing refers to
 * owner afterwards. Its unexpected messages stay at the receiver, copied. */
void lbm_withdraw(lbm *m, const void *owner);
/* Last time anything moved between ranks a and b, either way (0: never). */
uint64_t lbm_pair_active_ns(const lbm *m, int a, int b);
/* What holds rank d's entries, for an error message. */
void lbm_describe(const lbm *m, int d, char *out, size_t cap);

#endif /* GCOMP_LOOPBACK_MODEL_H */
