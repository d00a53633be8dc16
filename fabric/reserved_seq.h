/* The reserved call sequences: the one table of the tag sequences (gcomp_tag's seq) that no
 * collective call takes.
 *
 * A call's tags carry its number (reduce/call.c numbers calls 1, 2, ... and wraps below
 * GCOMP_SEQ_RESERVED), so messages of different calls never match. The exchanges below
 * happen outside any numbered call (creation, calibration, the shared segment's handshake,
 * codec probing) or alongside every call (abort notices), so each has a sequence of its
 * own from the top 16 of the 24-bit sequence space. Two exchanges sharing a number could
 * take each other's messages: a rank one exchange ahead would feed its peer the wrong
 * bytes of the right length. The values are on the wire: changing one is a
 * GCOMP_WIRE_VERSION change.
 *
 * Here in fabric/ (the users are in reduce/) because fabric/mpi_p2p.c folds this range into
 * MPI tags of its own, and fabric/ may not include reduce/. Included by transport.h. */
#ifndef GCOMP_RESERVED_SEQ_H
#define GCOMP_RESERVED_SEQ_H

/* The first reserved sequence: calls take 1 .. GCOMP_SEQ_RESERVED - 1 (reduce/call.c), and
 * hier's piece sequences step down past the range (reduce/hier.c) */
#define GCOMP_SEQ_RESERVED 0xfffff0u
/* How many sequences the range holds, up to the top of the 24-bit space (mpi_p2p.c folds
 * them into 4 bits) */
#define GCOMP_SEQ_RESERVED_SPAN 16u

/* The table: X(name, value), one line each, with who uses it. 0xfffff6 and 0xffffff are free. */
#define GCOMP_SEQ_TABLE(X)                                                                   \
  /* reduce/abort.c: each peer's standing receive of abort notices, posted for the whole    \
   * life of the communicator, so it would take any other exchange's message */             \
  X(GCOMP_SEQ_NOTICE, 0xfffff1u)                                                             \
  /* reduce/abort.c gcomp_abort_blame: failing ranks' status and detail after a call        \
   * failed; the peers are then at any point of any call */                                  \
  X(GCOMP_SEQ_BLAME, 0xfffff2u)                                                              \
  /* reduce/agree.c: which ranks hold the extremes of a setting that differs */              \
  X(GCOMP_SEQ_AGREE_WHO, 0xfffff3u)                                                          \
  /* reduce/agree.c: the differing setting's text on the first of those ranks; also a       \
   * refusing rank's error text (the two never run in one creation) */                       \
  X(GCOMP_SEQ_AGREE_TEXT_A, 0xfffff4u)                                                       \
  /* reduce/agree.c: the differing setting's text on the second rank */                      \
  X(GCOMP_SEQ_AGREE_TEXT_B, 0xfffff5u)                                                       \
  /* reduce/calib.c: whether every rank holds the parent communicator's figures, and them */ \
  X(GCOMP_SEQ_CALIB_INHERIT, 0xfffff7u)                                                      \
  /* reduce/calib.c: the shared-memory allreduce's measured figures */                       \
  X(GCOMP_SEQ_CALIB_SHM, 0xfffff8u)                                                          \
  /* reduce/shm.c: the node's shared segment handshake (its name, each rank's mapping, the  \
   * root's verdict), point to point within the node */                                      \
  X(GCOMP_SEQ_SHM_SEGMENT, 0xfffff9u)                                                        \
  /* reduce/agree.c gcomp_agreed_check: every setting, refusals and birth times; the first  \
   * exchange of creation */                                                                 \
  X(GCOMP_SEQ_AGREE, 0xfffffau)                                                              \
  /* reduce/calib.c: the barrier between the intra- and the inter-node ping-pongs */         \
  X(GCOMP_SEQ_CALIB_GATE, 0xfffffbu)                                                         \
  /* reduce/codec_plan.c: a codec's measured rate and ratio and whether every rank passed   \
   * the same spec, on the codec's first use, between numbered calls */                      \
  X(GCOMP_SEQ_CODEC_PROBE, 0xfffffcu)                                                        \
  /* reduce/calib.c: the link figures measured by ping-pong */                               \
  X(GCOMP_SEQ_CALIB_LINKS, 0xfffffdu)                                                        \
  /* reduce/calib.c: the ping-pongs themselves, one pair of ranks at a time (the step field \
   * tells the rounds apart) */                                                              \
  X(GCOMP_SEQ_CALIB_PINGPONG, 0xfffffeu)

#define GCOMP_SEQ_ENUM_(name, value) name = value,
enum { GCOMP_SEQ_TABLE(GCOMP_SEQ_ENUM_) };
#undef GCOMP_SEQ_ENUM_

/* Checked where defined: each inside the range (above its first, which is no call's), and
 * no two equal (one bit each: distinct bits sum to their OR, a repeated one does not) */
#define GCOMP_SEQ_IN_(name, value) &&((value) > GCOMP_SEQ_RESERVED &&                       \
                                      (value) < GCOMP_SEQ_RESERVED + GCOMP_SEQ_RESERVED_SPAN)
#define GCOMP_SEQ_SUM_(name, value) +(1u << (((value)-GCOMP_SEQ_RESERVED) & 15u))
#define GCOMP_SEQ_OR_(name, value) | (1u << (((value)-GCOMP_SEQ_RESERVED) & 15u))
_Static_assert(1 GCOMP_SEQ_TABLE(GCOMP_SEQ_IN_), "a reserved sequence outside the range");
_Static_assert((0u GCOMP_SEQ_TABLE(GCOMP_SEQ_SUM_)) == (0u GCOMP_SEQ_TABLE(GCOMP_SEQ_OR_)),
               "two reserved sequences are equal");
#undef GCOMP_SEQ_IN_
#undef GCOMP_SEQ_SUM_
#undef GCOMP_SEQ_OR_

#endif
