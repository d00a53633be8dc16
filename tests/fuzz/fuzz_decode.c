/* Fuzz target: gcomp_decode / gcomp_decode_add for every registered codec spec.
 *
 * Input: one selector byte, then a frame.
 *   selector & 0x1f  index into gcomp_fuzz_specs (modulo its length)
 *   selector & 0x20  decode_add instead of decode
 *   selector & 0x40  reseal: recompute the frame's checksums (and payload length) first,
 *                    so the mutations reach the stage and kind decoders behind them
 *   selector & 0x80  also decode in parts (codec_parts.h; codecs that can), with part
 *                    lengths drawn from the frame's bytes: the parts must succeed exactly
 *                    when the whole decode does, with the same values bit for bit
 * A decode (not an add) is also done with gcomp_decode_tally: the same status and values,
 * and where it counts the NaN and Inf it wrote, as many as the output holds.
 * The element count handed to the decoder is the frame's own (capped), so the count
 * check passes and the payload decoders run. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "codec_parts.h"
#include "frame.h"
#include "fuzz_hash.h"
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

/* frame decoded in parts into dst (add: added), part lengths multiples of the codec's unit
 * drawn from a hash of the frame (so a replay decodes the same parts) */
static int decode_in_parts(const gcomp_codec *c, const uint8_t *frame, size_t len, float *dst,
                           size_t count, int add) {
  size_t unit = gcomp_codec_part_values(c);
  uint64_t h = gcomp_fuzz_hash(frame, len);
  gcomp_dec_parts d;
  int s = gcomp_decode_parts_begin(c, frame, len, count, &d);
  for (size_t at = 0; s == GCOMP_OK && at < count;) {
    h = gcomp_fuzz_mix(h);
    size_t m = unit * (1 + (size_t)(h % 4));
    if (m > count - at) m = count - at;
    s = gcomp_decode_part(&d, dst + at, m, add);
    at += m;
  }
  return s == GCOMP_OK ? gcomp_decode_parts_end(&d) : s;
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
    float *tal = !(sel & 0x20) && s != GCOMP_ERR_NOMEM ? malloc((count ? count : 1) * 4) : NULL;
    if (tal) {
      uint64_t tally, there = 0;
      int stream = (int)(gcomp_fuzz_hash(frame, len) & 1);
      int st = gcomp_decode_tally(c, frame, len, tal, count, stream, &tally);
      if (st != s) __builtin_trap();
      if (s == GCOMP_OK && memcmp(tal, dst, count * sizeof *dst)) __builtin_trap();
      for (size_t i = 0; s == GCOMP_OK && i < count; i++) there += !isfinite(dst[i]);
      if (s == GCOMP_OK && tally != UINT64_MAX && tally != there) __builtin_trap();
      free(tal);
    }
    int parts = (sel & 0x80) && s != GCOMP_ERR_NOMEM && gcomp_codec_part_values(c);
    float *alt = parts ? malloc((count ? count : 1) * sizeof *alt) : NULL;
    if (alt) {
      memset(alt, 0, (count ? count : 1) * sizeof *alt);
      int sp = decode_in_parts(c, frame, len, alt, count, (sel & 0x20) != 0);
      if (sp != GCOMP_OK && sp != GCOMP_ERR_CORRUPT) __builtin_trap();
      if ((sp == GCOMP_OK) != (s == GCOMP_OK)) __builtin_trap();
      if (s == GCOMP_OK && memcmp(alt, dst, count * sizeof *dst)) __builtin_trap();
      free(alt);
    }
  }
  free(dst);
  free(frame);
  return 0;
}
