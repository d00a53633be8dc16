/* Internal: the wire frame every encoded buffer travels in (docs/wire-format.md).
 *
 *   offset size  field
 *   0      4     magic "GCMP" (0x47 0x43 0x4d 0x50)
 *   4      1     format version (GCOMP_FRAME_VERSION)
 *   5      1     kind id (GCOMP_KIND_*)
 *   6      1     lossless stage id (GCOMP_STAGE_*), 0 when none was applied
 *   7      1     flags (GCOMP_FRAME_F_*; unknown bits are refused)
 *   8      8     element count
 *   16     8     payload length in bytes (what follows the header)
 *   24     4     kind parameter word (e.g. fp16's scale exponent)
 *   28     4     CRC-32C (Castagnoli; the standard check value, init and final xor 0xffffffff;
 *                computed with ISA-L crc32_iscsi) over bytes 0..27, then the payload
 * All integers little-endian.
 */
#ifndef GCOMP_FRAME_H
#define GCOMP_FRAME_H

#include <stddef.h>
#include <stdint.h>

enum { GCOMP_FRAME_HEADER = 32, GCOMP_FRAME_VERSION = 1 };

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
  uint8_t kind;
  uint8_t stage;
  uint8_t flags;
  uint64_t count;
  uint64_t payload_len;
  uint32_t param;
} gcomp_frame_info;

/* Writes the header for a payload already at frame + GCOMP_FRAME_HEADER and computes the
 * CRC over header and payload. */
void gcomp_frame_seal(uint8_t *frame, const gcomp_frame_info *info);

/* Validates magic, version, lengths (never trusting the header's payload length beyond
 * len) and CRC; fills *info. GCOMP_ERR_CORRUPT with a detail on any mismatch. */
int gcomp_frame_open(const uint8_t *frame, size_t len, gcomp_frame_info *info);

/* ISA-L's crc32_iscsi over any length: the raw register, chainable
 * (crc(crc(s, a), b) == crc(s, a || b)); the standard CRC-32C of x is
 * ~gcomp_crc32c(0xffffffff, x). */
uint32_t gcomp_crc32c(uint32_t seed, const void *buf, size_t len);

/* Little-endian loads and stores (unaligned-safe). */
static inline void gcomp_store_le32(uint8_t *p, uint32_t v) {
  p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); p[2] = (uint8_t)(v >> 16); p[3] = (uint8_t)(v >> 24);
}
static inline void gcomp_store_le64(uint8_t *p, uint64_t v) {
  gcomp_store_le32(p, (uint32_t)v);
  gcomp_store_le32(p + 4, (uint32_t)(v >> 32));
}
static inline uint32_t gcomp_load_le32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t gcomp_load_le64(const uint8_t *p) {
  return (uint64_t)gcomp_load_le32(p) | (uint64_t)gcomp_load_le32(p + 4) << 32;
}

#endif /* GCOMP_FRAME_H */
