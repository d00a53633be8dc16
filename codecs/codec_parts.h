/* Internal: a frame encoded or decoded a part at a time, for a planner that fuses a codec's
 * passes with its own (reduce/direct.c: the node's sum straight into the shards' encoders,
 * the contributions to a shard decoded and re-encoded without the sum stored). A part is
 * a few KiB, so what the planner hands over or takes is still in cache; the frames are the
 * ones gcomp_encode writes and gcomp_decode reads, byte for byte. For codecs whose kind
 * codes buckets one by one (part_values: sign, quant with nearest rounding), without a
 * lossless stage; with +ef, fp32 residuals without momentum. */
#ifndef GCOMP_CODEC_PARTS_H
#define GCOMP_CODEC_PARTS_H

#include <stddef.h>
#include <stdint.h>

#include "codec_impl.h"
#include "frame.h"

/* The values a part must be a multiple of (but the last), 0 when the codec cannot be
 * encoded in parts, nor decoded. */
size_t gcomp_codec_part_values(const gcomp_codec *codec);

/* An encode of a gradient given as a sum: the frame gcomp_encode(codec, key, x, count, ...)
 * writes (and the residual it leaves), where x = src[0] + src[1] + ... in that order in
 * fp32 (the node's operands as a reduce-scatter round holds them), without x ever stored:
 * it is summed a few KiB at a time into the codec's own buffer (with +ef, added into the
 * residual in the same pass, where the encode forms x + residual) and encoded from there.
 * The one difference: where two operands of a value are NaN, the sum keeps the payload of
 * one, and which may differ from the caller's own sum (it depends on the operand order of
 * an add); the value is NaN either way, and every rank decodes the same frame.
 * Parts come in order and may have any length. The stream is the codec's (one at a time;
 * no gcomp_encode of that codec between begin and end). dst has room for
 * gcomp_codec_max_encoded_size(codec, count). */
int gcomp_encode_sum_begin(gcomp_codec *codec, uint64_t key, size_t count, void *dst,
                           size_t cap);
/* The next n values of x: the sum of src[0..nsrc)[0..n) */
int gcomp_encode_sum_part(gcomp_codec *codec, const float *const *src, int nsrc, size_t n);
/* After count values: seals the frame, *len its bytes */
int gcomp_encode_sum_end(gcomp_codec *codec, size_t *len);

/* A frame of count values decoded in parts, each verified block by block as gcomp_decode
 * would (GCOMP_ERR_CORRUPT on any damage, before a damaged byte is used). */
typedef struct {
  const gcomp_codec *codec;
  const uint8_t *payload;
  size_t len, o;             /* payload bytes; read so far */
  size_t count, done;        /* values in the frame; decoded so far */
  uint32_t param;
  gcomp_frame_check chk;
} gcomp_dec_parts;
int gcomp_decode_parts_begin(const gcomp_codec *codec, const void *frame, size_t len,
                             size_t count, gcomp_dec_parts *d);
/* The next n values (a multiple of gcomp_codec_part_values but at the end) into dst, or
 * added to it (add) */
int gcomp_decode_part(gcomp_dec_parts *d, float *dst, size_t n, int add);
/* After count values: no bytes left over, all verified */
int gcomp_decode_parts_end(gcomp_dec_parts *d);

/* gcomp_decode, the same values and checks, and in *nonfinite (may be NULL) the NaN and Inf
 * it wrote where the kind knows them without reading the output back: sign and quant, whose
 * only such values sit in buckets sent raw and are counted from the payload (a quant grid
 * that ends past FLT_MAX leaves the count unknown); UINT64_MAX for the other kinds, staged
 * frames and failures (the caller counts).
 * stream nonzero: for an output nobody reads soon (a large result, beyond the cache): sign
 * (AVX2, AVX-512) and quant (AVX-512) write it with streaming stores where dst is 16-byte
 * aligned, which skip reading each line of dst into the cache first; other kinds and
 * alignments store as gcomp_decode does. Fenced before it returns. */
int gcomp_decode_tally(const gcomp_codec *codec, const void *src, size_t src_len, float *dst,
                       size_t count, int stream, uint64_t *nonfinite);

#endif /* GCOMP_CODEC_PARTS_H */
