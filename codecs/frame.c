/* Frame header: writing, validating, and the CRC32C that guards it. */
#include <string.h>

#include <isa-l/crc.h>

#include "codec_impl.h"
#include "frame.h"

static const uint8_t magic[4] = {'G', 'C', 'M', 'P'};

uint32_t gcomp_crc32c(uint32_t seed, const void *buf, size_t len) {
  /* crc32_iscsi takes an int length: feed huge buffers in pieces */
  const unsigned char *p = buf;
  while (len > 0) {
    size_t n = len > (1u << 30) ? (1u << 30) : len;
    seed = crc32_iscsi((unsigned char *)p, (int)n, seed);
    p += n;
    len -= n;
  }
  return seed;
}

/* The standard CRC-32C (as in iSCSI, ext4, Python's crc32c) of header bytes 0..27 followed
 * by the payload: crc32_iscsi chains the raw register, the final inversion is ours. */
static uint32_t frame_crc(const uint8_t *frame, size_t payload_len) {
  uint32_t crc = gcomp_crc32c(0xffffffffu, frame, 28);
  return ~gcomp_crc32c(crc, frame + GCOMP_FRAME_HEADER, payload_len);
}

void gcomp_frame_seal(uint8_t *frame, const gcomp_frame_info *info) {
  memcpy(frame, magic, 4);
  frame[4] = GCOMP_FRAME_VERSION;
  frame[5] = info->kind;
  frame[6] = info->stage;
  frame[7] = info->flags;
  gcomp_store_le64(frame + 8, info->count);
  gcomp_store_le64(frame + 16, info->payload_len);
  gcomp_store_le32(frame + 24, info->param);
  gcomp_store_le32(frame + 28, frame_crc(frame, info->payload_len));
}

int gcomp_frame_open(const uint8_t *frame, size_t len, gcomp_frame_info *info) {
  GCOMP_FAIL_IF(!frame && len, GCOMP_ERR_INVALID, "frame pointer is NULL");
  GCOMP_FAIL_IF(len < GCOMP_FRAME_HEADER, GCOMP_ERR_CORRUPT,
                "frame of %zu bytes is shorter than its %d-byte header", len, GCOMP_FRAME_HEADER);
  GCOMP_FAIL_IF(memcmp(frame, magic, 4) != 0, GCOMP_ERR_CORRUPT,
                "not a gcomp frame (bad magic %02x%02x%02x%02x)", frame[0], frame[1], frame[2],
                frame[3]);
  GCOMP_FAIL_IF(frame[4] != GCOMP_FRAME_VERSION, GCOMP_ERR_CORRUPT,
                "frame format version %u is not supported (this build reads version %d)",
                frame[4], GCOMP_FRAME_VERSION);
  info->kind = frame[5];
  info->stage = frame[6];
  info->flags = frame[7];
  info->count = gcomp_load_le64(frame + 8);
  info->payload_len = gcomp_load_le64(frame + 16);
  info->param = gcomp_load_le32(frame + 24);
  GCOMP_FAIL_IF(info->payload_len != len - GCOMP_FRAME_HEADER, GCOMP_ERR_CORRUPT,
                "frame says %llu payload bytes but %zu follow the header",
                (unsigned long long)info->payload_len, len - GCOMP_FRAME_HEADER);
  uint32_t want = gcomp_load_le32(frame + 28);
  uint32_t got = frame_crc(frame, info->payload_len);
  GCOMP_FAIL_IF(want != got, GCOMP_ERR_CORRUPT,
                "frame checksum mismatch (header says %08x, data gives %08x)", want, got);
  /* checked after the CRC: a damaged frame reports the checksum, a frame from a newer
   * writer that uses a flag this build does not know reports the flag */
  GCOMP_FAIL_IF(info->flags & ~GCOMP_FRAME_F_KNOWN, GCOMP_ERR_CORRUPT,
                "frame flags 0x%02x include bits this build does not know (0x%02x)", info->flags,
                info->flags & ~GCOMP_FRAME_F_KNOWN);
  GCOMP_FAIL_IF(info->stage == 0 && (info->flags & (GCOMP_FRAME_F_SHUFFLED | GCOMP_FRAME_F_PLANES)),
                GCOMP_ERR_CORRUPT, "frame is marked shuffled but names no lossless stage");
  return GCOMP_OK;
}
