/* Test support: the constrained loopback transport. */
#ifndef GCOMP_LOOPBACK_CONSTRAINED_H
#define GCOMP_LOOPBACK_CONSTRAINED_H

#include <stddef.h>

#include "transport.h"

/* The constrained loopback (loopback_constrained.c): the loopback's N ranks over a model
 * of libfabric 1.17's shm, so that a stall over it reproduces in one process,
 * deterministically. For the unit tests: it is not part of libgcomp.
 * Each rank has `entries` receive entries shared by its posted receives and the unexpected
 * messages that arrived for it; a message that matches no posted receive and finds no free
 * entry stays with its sender (so does everything behind it from that sender), a receive
 * that finds none waits for one; a rank's provider sends complete in the order they were
 * posted. `protocol` is how messages become provider messages of `chunk_bytes`:
 * GCOMP_LB_GRANTED, today's rule (fabric/ofi_proto.c: headers matched in software, at most
 * `headers` unmatched per pair, payload only into receives posted after the match), which
 * meets the contract above; GCOMP_LB_EAGER, the chunk protocol before flow control (a first
 * chunk, then up to 8 more sent unasked), which does not: it stalls, and the stall ends in
 * GCOMP_ERR_TIMEOUT. A zero field takes its default: 16 entries, 64 headers, GCOMP_CHUNK_BYTES;
 * limits may be NULL (all defaults, granted). Under either, as over libfabric, a rank that
 * waits for one message before posting receives for more than `headers` sent before it by
 * the same peer waits until GCOMP_TIMEOUT_MS: what a rank holds unmatched is bounded.
 * Communicators split from it run over the default loopback (reduce/comm_split.c). */
enum { GCOMP_LB_GRANTED = 0, GCOMP_LB_EAGER = 1 };
typedef struct gcomp_loopback_limits {
  int entries;
  int headers;
  size_t chunk_bytes;
  int protocol;
} gcomp_loopback_limits;
int gcomp_loopback_create_constrained(int size, const int *node_of,
                                      const gcomp_loopback_limits *limits, gcomp_transport **out);

#endif /* GCOMP_LOOPBACK_CONSTRAINED_H */
