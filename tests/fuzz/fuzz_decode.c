/* Fuzz target: gcomp_decode / gcomp_decode_add for every registered codec spec.
 *
 * Input: one selector byte, then a frame.
 *   selector & 0x1f  index into gcomp_fuzz_specs (modulo its length)
 *   selector & 0x20  decode_add instead of decode
 *   selector & 0x40  reseal: recompute the frame's checksums (and payload length) first,
 *                    so the mutations reach the stage and kind decoders behind them
 * The element count handed to the decoder is the frame's own (capped), so the count
 * check passes and the payload decoders run. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "frame.h"
#include "fuzz_reseal.h"
#include "fuzz_specs.h"
#include "gcomp.h"

enum { MAX_COUNT = 1 << 16 };   /* larger counts are refused by the count check */
static gcomp_codec *codecs[GCOMP_FUZZ_NSPECS];

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  for (int i = 0; i < GCOMP_FUZZ_NSPECS; i++)
    if (gcomp_codec_create(gcomp_fuzz_specs[i], &codecs[i]) != GCOMP_OK) codecs[i] = NULL;
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  uint8_t sel = data[0];
  gcomp_codec *c = codecs[(sel & 0x1f) % GCOMP_FUZZ_NSPECS];
  if (!c) return 0;
  size_t len = size - 1;
  /* an exact-size copy, so ASan sees any read past the frame */
  uint8_t *frame = malloc(len ? len : 1);
  if (!frame) return 0;
  memcpy(frame, data + 1, len);
  size_t count = 0;
  if (len >= GCOMP_FRAME_HEADER) {
    uint64_t want = gcomp_load_le64(frame + 8);
    count = want > MAX_COUNT ? MAX_COUNT : (size_t)want;
    if (sel & 0x40) len = gcomp_fuzz_reseal(frame, len);
  }
  float *dst = malloc((count ? count : 1) * sizeof *dst);
  if (dst) {
    memset(dst, 0, (count ? count : 1) * sizeof *dst);
    int s = (sel & 0x20) ? gcomp_decode_add(c, frame, len, dst, count)
                         : gcomp_decode(c, frame, len, dst, count);
    /* a decoder may only succeed or report a damaged frame */
    if (s != GCOMP_OK && s != GCOMP_ERR_CORRUPT && s != GCOMP_ERR_NOMEM) __builtin_trap();
  }
  free(dst);
  free(frame);
  return 0;
}
