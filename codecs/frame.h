/* Internal: the wire frame every encoded buffer travels in (docs/wire-format.md).
 *
 *   offset size  field
 *   0      4     magic "GCMP" (0x47 0x43 0x4d 0x50)
 *   4      1     format version (GCOMP_FRAME_VERSION = 2; no other is read)
 *   5      1     kind id (GCOMP_KIND_*)
 *   6      1     lossless stage id (GCOMP_STAGE_*), 0 when none was applied
 *   7      1     flags (GCOMP_FRAME_F_*; unknown bits are refused)
 *   8      8     element count
 *   16     8     payload length in bytes P
 *   24     4     kind parameter word (e.g. fp16's scale exponent)
 *   28     4     CRC-32C (Castagnoli; the standard check value, init and final xor 0xffffffff;
 *                computed with ISA-L crc32_iscsi) over bytes 0..27, then the block checksums
 *   32     P     payload
 *   32+P   4*ceil(P / GCOMP_FRAME_BLOCK)  block checksums: block b is payload bytes
 *                [b * 64 KiB, min(P, (b + 1) * 64 KiB)), its entry the CRC-32C of them
 * All integers little-endian.
 *
 * (Version 1, with one CRC over header and payload and no block checksums, was written only
 * by unreleased development builds; it is refused like any unknown version.)
 * Block checksums let a writer checksum each block of the payload while it is still in cache
 * (gcomp_frame_sums, fed by the kind as it writes) and a reader verify each block just
 * before it decodes it (gcomp_frame_check, asked by the kind as it reads): no second pass
 * over the payload on either side.
 */
#ifndef GCOMP_FRAME_H
#define GCOMP_FRAME_H

#include <stddef.h>
#include <stdint.h>

#include "gcomp_le.h"   /* gcomp_load_le32 and the like: the frame is little-endian */

enum { GCOMP_FRAME_HEADER = 32, GCOMP_FRAME_VERSION = 2 };
enum { GCOMP_FRAME_BLOCK = 1 << 16 };   /* payload bytes per block checksum */

enum {
  GCOMP_STAGE_NONE = 0,
  GCOMP_STAGE_ZSTD = 1,
  GCOMP_STAGE_IGZIP = 2
};

enum {
  GCOMP_FRAME_F_SHUFFLED = 1u << 0,   /* payload bytes were byte-shuffled before the stage */
  GCOMP_FRAME_F_EF = 1u << 1,         /* produced with error feedback (informational) */
  GCOMP_FRAME_F_PLANES = 1u << 2,     /* exponent-plane mode: only the highest byte plane went
                                         through the stage, the others are raw */
  GCOMP_FRAME_F_KNOWN = 0x07u         /* a frame with any other flag bit set is refused */
};

typedef struct {
  uint8_t version;      /* as read; sealing writes GCOMP_FRAME_VERSION */
  uint8_t kind;
  uint8_t stage;
  uint8_t flags;
  uint64_t count;
  uint64_t payload_len;
  uint32_t param;
} gcomp_frame_info;

/* Version 2: the number of block checksums of a payload of len bytes, and the whole frame's
 * size (header, payload, checksums). */
static inline uint64_t gcomp_frame_nblocks(uint64_t payload_len) {
  return payload_len / GCOMP_FRAME_BLOCK + (payload_len % GCOMP_FRAME_BLOCK != 0);
}
static inline uint64_t gcomp_frame_size(uint64_t payload_len) {
  return GCOMP_FRAME_HEADER + payload_len + 4 * gcomp_frame_nblocks(payload_len);
}

/* The block checksums of a payload being written, block by block, while each block is
 * still in cache. crc has room for gcomp_frame_nblocks of the largest payload. */
typedef struct gcomp_frame_sums {
  const uint8_t *payload;
  uint64_t done;        /* payload bytes [0, done) summed: whole blocks (or all, at the end) */
  uint32_t *crc;
} gcomp_frame_sums;

/* Sums every whole block that lies within payload bytes [0, upto) and is not summed yet.
 * A kind calls it as its output becomes final (the frame code sums the rest at the end). */
void gcomp_frame_sums_add(gcomp_frame_sums *s, uint64_t upto);
/* Records crc (the standard CRC-32C, computed by the caller) as the checksum of the whole
 * block at payload bytes [at, at + GCOMP_FRAME_BLOCK); at must be where summing stands. */
void gcomp_frame_sums_put(gcomp_frame_sums *s, uint64_t at, uint32_t crc);
/* Sums everything left of a payload of len bytes, the partial last block included. */
void gcomp_frame_sums_finish(gcomp_frame_sums *s, uint64_t len);

/* Writes the header for a payload already at frame + GCOMP_FRAME_HEADER and computes the
 * checksums: the block checksums (a second pass over the payload) into the trailer, then
 * the header's CRC. */
void gcomp_frame_seal(uint8_t *frame, const gcomp_frame_info *info);
/* gcomp_frame_seal with the block checksums already computed (s->done == payload length). */
void gcomp_frame_seal_sums(uint8_t *frame, const gcomp_frame_info *info,
                           const gcomp_frame_sums *s);

/* The payload of an opened frame, verified block by block as a decoder reaches it, and
 * what the decoder saw on the way. */
typedef struct gcomp_frame_check {
  const uint8_t *payload;
  uint64_t len;
  const uint8_t *sums;  /* the block checksums; NULL: nothing left to verify */
  uint64_t verified;    /* payload bytes [0, verified) checked */
  uint64_t nonfinite;   /* kept by the decoders of kinds that count (codec_impl.h,
                           counts_nonfinite): NaN and Inf among the values they wrote, or
                           UINT64_MAX once a value written may be either uncounted */
} gcomp_frame_check;

/* Validates magic, version, lengths (never trusting the header's payload length beyond
 * len) and the header's CRC; fills *info. chk NULL: the payload is verified too; else it
 * is left to gcomp_frame_need.
 * GCOMP_ERR_CORRUPT with a detail on any mismatch. */
int gcomp_frame_open_check(const uint8_t *frame, size_t len, gcomp_frame_info *info,
                           gcomp_frame_check *chk);
/* gcomp_frame_open_check with everything verified. */
int gcomp_frame_open(const uint8_t *frame, size_t len, gcomp_frame_info *info);

/* Verifies the blocks that hold payload bytes [0, upto) (upto <= the payload length) and
 * are not verified yet: GCOMP_ERR_CORRUPT naming the first damaged block. A decoder calls
 * it before it reads those bytes. chk NULL: nothing to verify. */
int gcomp_frame_verify(gcomp_frame_check *chk, uint64_t upto);
static inline int gcomp_frame_need(gcomp_frame_check *chk, uint64_t upto) {
  return !chk || upto <= chk->verified ? 0 : gcomp_frame_verify(chk, upto);
}
/* A decoder that checksums a block itself, as it works on the block before (the cast
 * kinds' decode-and-add): the whole block at payload byte at when it is the next one to
 * verify, else NULL (nothing to verify, already verified, or the partial last block: then
 * gcomp_frame_need). */
const uint8_t *gcomp_frame_next_block(const gcomp_frame_check *chk, uint64_t at);
/* Verifies that block against crc, its standard CRC-32C computed by the decoder, as
 * gcomp_frame_verify does (the same error); a block gcomp_frame_next_block would not have
 * given is verified by gcomp_frame_verify instead. */
int gcomp_frame_verify_sum(gcomp_frame_check *chk, uint64_t at, uint32_t crc);

/* ISA-L's crc32_iscsi over any length: the raw register, chainable
 * (crc(crc(s, a), b) == crc(s, a || b)); the standard CRC-32C of x is
 * ~gcomp_crc32c(0xffffffff, x). */
uint32_t gcomp_crc32c(uint32_t seed, const void *buf, size_t len);

#endif /* GCOMP_FRAME_H */
