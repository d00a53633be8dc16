/* Fuzz target: the frame parser. Any input is either refused with
 * GCOMP_ERR_CORRUPT or accepted, and an accepted frame is exactly what sealing its parsed
 * header gives back. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "frame.h"
#include "fuzz_reseal.h"
#include "gcomp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const uint8_t *frame, size_t size) {
  gcomp_frame_info info;
  int s = gcomp_frame_open(frame, size, &info);
  if (s != GCOMP_OK && s != GCOMP_ERR_CORRUPT) __builtin_trap();
  if (s != GCOMP_OK) return;
  if (gcomp_frame_size(info.payload_len) != size) __builtin_trap();
  uint8_t *copy = malloc(size);
  if (!copy) return;
  memcpy(copy, frame, size);
  gcomp_frame_seal(copy, &info);
  if (memcmp(copy, frame, size) != 0) __builtin_trap();
  free(copy);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  uint8_t *frame = malloc(size ? size : 1);   /* exact size: ASan sees over-reads */
  if (!frame) return 0;
  memcpy(frame, data, size);
  check(frame, size);
  /* the same bytes with correct checksums reach the checks behind them */
  if (size >= GCOMP_FRAME_HEADER) check(frame, gcomp_fuzz_reseal(frame, size));
  free(frame);
  return 0;
}
