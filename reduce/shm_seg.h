/* Internal: the layout of a node's shared segment, which reduce/shm_setup.c makes and
 * reduce/shm.c runs the calls over. Not part of coll.h. */
#ifndef GCOMP_SHM_SEG_H
#define GCOMP_SHM_SEG_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "shm.h"

/* A call's bytes that travel in the hot line itself (gcomp_shm_hot.data) */
enum { GCOMP_SHM_HOT_DATA = 48 };
/* Room after each slot for the header of gcomp_shm_allgather_parts (a word and one length
 * a part, from the slot's start: one 64-byte line for up to 7 parts), so that one part of
 * a whole slot travels in one round: a broadcast's 1 MiB piece in a 1 MiB slot took two
 * rounds (1 MiB - 64 B, then 64 B), 365 us against 314 us for 1 MiB - 64 B. */
enum { GCOMP_SHM_HEAD = 64 };

/* What a peer reads of a rank in a round: its flag, the shape of its call and, for the
 * smallest calls, its operand, in one cache line, so that a peer's arrival and its data
 * reach a waiter in one transfer of that line. One per round parity, reused like the
 * slots (shm.c). */
typedef struct {
  _Atomic uint64_t flag;
  uint64_t desc;   /* the shape of the call whose first round this is (shm.c: call_desc) */
  uint8_t data[GCOMP_SHM_HOT_DATA];
} gcomp_shm_hot;

/* A rank's control block: the hot lines, then a line of its own for what peers read only
 * when they wait long (liveness, the futex words), so that a call's stores and the
 * waiters' spins stay on the hot lines. 256 bytes: no 128-byte pair of lines, which the
 * adjacent-line prefetcher fetches together, holds two ranks' lines. */
typedef struct {
  gcomp_shm_hot hot[2];
  uint64_t pidns;   /* inode of the rank's pid namespace: its pid means nothing elsewhere */
  int32_t pid;
  /* a waiter that stops spinning sleeps on bell (a futex word bumped at every publish of a
   * pipeline's rounds) after counting itself in sleepers; the publisher wakes only when
   * someone sleeps */
  _Atomic uint32_t bell, sleepers;
  char pad[256 - 2 * sizeof(gcomp_shm_hot) - 20];
} gcomp_shm_ctl;

struct gcomp_shm {
  uint8_t *base;
  size_t map_bytes;
  gcomp_shm_ctl *ctl;  /* [L] */
  uint8_t *data;       /* slots: [2][L][stride] */
  size_t slot;         /* a round's bytes a rank (the allreduce's and the others' pieces) */
  size_t stride;       /* slot + GCOMP_SHM_HEAD: byte strings' room (shm.c: parts_bytes) */
  int L, me;
  uint64_t round;
  int broken;
  int timeout_ms;
};

#endif /* GCOMP_SHM_SEG_H */
