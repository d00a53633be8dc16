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
 * by `tail` (the block checksums): crc32_iscsi chains the raw register, the final inversion
 * is ours. */
static uint32_t header_crc(const uint8_t *frame, const uint8_t *tail, size_t tail_len) {
  uint32_t crc = gcomp_crc32c(0xffffffffu, frame, 28);
  return ~gcomp_crc32c(crc, tail, tail_len);
}

static uint32_t block_crc(const uint8_t *p, uint64_t len) {
  return ~gcomp_crc32c(0xffffffffu, p, (size_t)len);
}

void gcomp_frame_sums_add(gcomp_frame_sums *s, uint64_t upto) {
  for (; s->done + GCOMP_FRAME_BLOCK <= upto; s->done += GCOMP_FRAME_BLOCK)
    s->crc[s->done / GCOMP_FRAME_BLOCK] = block_crc(s->payload + s->done, GCOMP_FRAME_BLOCK);
}

void gcomp_frame_sums_put(gcomp_frame_sums *s, uint64_t at, uint32_t crc) {
  gcomp_frame_sums_add(s, at);   /* a caller that reported up to at, without its sums */
  if (s->done != at) return;     /* not where summing stands: the block is summed later */
  s->crc[at / GCOMP_FRAME_BLOCK] = crc;
  s->done = at + GCOMP_FRAME_BLOCK;
}

void gcomp_frame_sums_finish(gcomp_frame_sums *s, uint64_t len) {
  gcomp_frame_sums_add(s, len);
  if (s->done < len) s->crc[s->done / GCOMP_FRAME_BLOCK] = block_crc(s->payload + s->done,
                                                                   len - s->done);
  s->done = len;
}

static void write_header(uint8_t *frame, const gcomp_frame_info *info) {
  memcpy(frame, magic, 4);
  frame[4] = GCOMP_FRAME_VERSION;
  frame[5] = info->kind;
  frame[6] = info->stage;
  frame[7] = info->flags;
  gcomp_store_le64(frame + 8, info->count);
  gcomp_store_le64(frame + 16, info->payload_len);
  gcomp_store_le32(frame + 24, info->param);
}

void gcomp_frame_seal_sums(uint8_t *frame, const gcomp_frame_info *info,
                           const gcomp_frame_sums *s) {
  write_header(frame, info);
  uint8_t *trailer = frame + GCOMP_FRAME_HEADER + info->payload_len;
  uint64_t nb = gcomp_frame_nblocks(info->payload_len);
  for (uint64_t b = 0; b < nb; b++) gcomp_store_le32(trailer + 4 * b, s->crc[b]);
  gcomp_store_le32(frame + 28, header_crc(frame, trailer, (size_t)(4 * nb)));
}

void gcomp_frame_seal(uint8_t *frame, const gcomp_frame_info *info) {
  /* the trailer itself holds the sums while they are computed */
  uint8_t *payload = frame + GCOMP_FRAME_HEADER, *trailer = payload + info->payload_len;
  for (uint64_t at = 0, b = 0; at < info->payload_len; at += GCOMP_FRAME_BLOCK, b++) {
    uint64_t n = info->payload_len - at < GCOMP_FRAME_BLOCK ? info->payload_len - at
                                                           : GCOMP_FRAME_BLOCK;
    gcomp_store_le32(trailer + 4 * b, block_crc(payload + at, n));
  }
  write_header(frame, info);
  gcomp_store_le32(frame + 28, header_crc(frame, trailer,
                                          (size_t)(4 * gcomp_frame_nblocks(info->payload_len))));
}

/* Block b of a frame under check, payload bytes [at, at + n), whose data gives got. */
static int block_ok(const gcomp_frame_check *chk, uint64_t at, uint64_t n, uint32_t got) {
  uint64_t b = at / GCOMP_FRAME_BLOCK;
  uint32_t want = gcomp_load_le32(chk->sums + 4 * b);
  GCOMP_FAIL_IF(want != got, GCOMP_ERR_CORRUPT,
                "frame block %llu (payload bytes %llu..%llu) checksum mismatch (trailer says "
                "%08x, data gives %08x)", (unsigned long long)b, (unsigned long long)at,
                (unsigned long long)(at + n - 1), want, got);
  return GCOMP_OK;
}

int gcomp_frame_verify(gcomp_frame_check *chk, uint64_t upto) {
  if (!chk || !chk->sums) return GCOMP_OK;
  if (upto > chk->len) upto = chk->len;
  while (chk->verified < upto) {
    uint64_t at = chk->verified;
    uint64_t n = chk->len - at < GCOMP_FRAME_BLOCK ? chk->len - at : GCOMP_FRAME_BLOCK;
    GCOMP_CHECK(block_ok(chk, at, n, block_crc(chk->payload + at, n)));
    chk->verified = at + n;
  }
  return GCOMP_OK;
}

void gcomp_dec_tally(gcomp_frame_check *chk, uint64_t n) {
  if (chk) chk->nonfinite = n > UINT64_MAX - chk->nonfinite ? UINT64_MAX : chk->nonfinite + n;
}

const uint8_t *gcomp_frame_next_block(const gcomp_frame_check *chk, uint64_t at) {
  if (!chk || !chk->sums || chk->verified != at || chk->len - at < GCOMP_FRAME_BLOCK)
    return NULL;   /* (verified <= len always, so len - at does not wrap) */
  return chk->payload + at;
}

int gcomp_frame_verify_sum(gcomp_frame_check *chk, uint64_t at, uint32_t crc) {
  if (!gcomp_frame_next_block(chk, at)) return gcomp_frame_verify(chk, at + GCOMP_FRAME_BLOCK);
  GCOMP_CHECK(block_ok(chk, at, GCOMP_FRAME_BLOCK, crc));
  chk->verified = at + GCOMP_FRAME_BLOCK;
  return GCOMP_OK;
}

/* Whether a frame of len bytes holds the payload length P its header says (and P's block
 * checksums); checked without trusting P (it may be huge). */
static int length_ok(uint64_t p, size_t len) {
  size_t room = len - GCOMP_FRAME_HEADER;
  return p <= room && room - p == 4 * gcomp_frame_nblocks(p);
}

int gcomp_frame_open_check(const uint8_t *frame, size_t len, gcomp_frame_info *info,
                           gcomp_frame_check *chk) {
  GCOMP_FAIL_IF(!frame && len, GCOMP_ERR_INVALID, "frame pointer is NULL");
  GCOMP_FAIL_IF(len < GCOMP_FRAME_HEADER, GCOMP_ERR_CORRUPT,
                "frame of %zu bytes is shorter than its %d-byte header", len, GCOMP_FRAME_HEADER);
  GCOMP_FAIL_IF(memcmp(frame, magic, 4) != 0, GCOMP_ERR_CORRUPT,
                "not a gcomp frame (bad magic %02x%02x%02x%02x)", frame[0], frame[1], frame[2],
                frame[3]);
  uint8_t version = frame[4];
  GCOMP_FAIL_IF(version != GCOMP_FRAME_VERSION, GCOMP_ERR_CORRUPT,
                "frame format version %u is not supported (this build reads version %d)",
                version, GCOMP_FRAME_VERSION);
  info->version = version;
  info->kind = frame[5];
  info->stage = frame[6];
  info->flags = frame[7];
  info->count = gcomp_load_le64(frame + 8);
  info->payload_len = gcomp_load_le64(frame + 16);
  info->param = gcomp_load_le32(frame + 24);
  const uint8_t *payload = frame + GCOMP_FRAME_HEADER;
  uint32_t want = gcomp_load_le32(frame + 28);
  GCOMP_FAIL_IF(!length_ok(info->payload_len, len), GCOMP_ERR_CORRUPT,
                "frame says %llu payload bytes but %zu bytes follow the header (payload and "
                "4 per %d-byte block)", (unsigned long long)info->payload_len,
                len - GCOMP_FRAME_HEADER, GCOMP_FRAME_BLOCK);
  uint32_t got = header_crc(frame, payload + info->payload_len,
                            len - GCOMP_FRAME_HEADER - (size_t)info->payload_len);
  GCOMP_FAIL_IF(want != got, GCOMP_ERR_CORRUPT,
                "frame checksum mismatch (header says %08x, data gives %08x)", want, got);
  /* checked after the CRC: a damaged frame reports the checksum, a frame from a newer
   * writer that uses a flag this build does not know reports the flag */
  GCOMP_FAIL_IF(info->flags & ~GCOMP_FRAME_F_KNOWN, GCOMP_ERR_CORRUPT,
                "frame flags 0x%02x include bits this build does not know (0x%02x)", info->flags,
                info->flags & ~GCOMP_FRAME_F_KNOWN);
  GCOMP_FAIL_IF(info->stage == 0 && (info->flags & (GCOMP_FRAME_F_SHUFFLED | GCOMP_FRAME_F_PLANES)),
                GCOMP_ERR_CORRUPT, "frame is marked shuffled but names no lossless stage");
  gcomp_frame_check local, *c = chk ? chk : &local;
  *c = (gcomp_frame_check){.payload = payload, .len = info->payload_len,
                           .sums = payload + info->payload_len, .verified = 0};
  if (!chk) GCOMP_CHECK(gcomp_frame_verify(c, c->len));
  return GCOMP_OK;
}

int gcomp_frame_open(const uint8_t *frame, size_t len, gcomp_frame_info *info) {
  return gcomp_frame_open_check(frame, len, info, NULL);
}
