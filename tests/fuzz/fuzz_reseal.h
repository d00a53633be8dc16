/* Reseals a mutated frame with correct checksums so that mutations reach the checks behind
 * them (the stage and kind decoders), as the current version around the largest payload
 * whose frame (payload and block checksums) fits in len bytes. Returns the resealed frame's length (<= len); 0 when len
 * is shorter than a header. */
#ifndef GCOMP_FUZZ_RESEAL_H
#define GCOMP_FUZZ_RESEAL_H

#include <stddef.h>
#include <stdint.h>

#include "frame.h"

static inline size_t gcomp_fuzz_reseal(uint8_t *frame, size_t len) {
  if (len < GCOMP_FRAME_HEADER) return 0;
  uint64_t room = len - GCOMP_FRAME_HEADER;
  uint64_t nb = (room + GCOMP_FRAME_BLOCK + 3) / (GCOMP_FRAME_BLOCK + 4);
  uint64_t whole = nb ? (nb - 1) * (uint64_t)GCOMP_FRAME_BLOCK : 0;   /* nb - 1 full blocks */
  uint64_t p = 4 * nb > room || room - 4 * nb <= whole ? whole : room - 4 * nb;
  gcomp_frame_info info = {.version = GCOMP_FRAME_VERSION, .kind = frame[5],
                           .stage = frame[6], .flags = frame[7],
                           .count = gcomp_load_le64(frame + 8), .payload_len = p,
                           .param = gcomp_load_le32(frame + 24)};
  gcomp_frame_seal(frame, &info);
  return (size_t)gcomp_frame_size(p);
}

#endif
