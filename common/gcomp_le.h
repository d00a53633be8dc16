/* Little-endian loads and stores (unaligned-safe): every byte layout that crosses the wire
 * or a file (frames, transport headers, residual files) is written with these, whatever the
 * host's byte order. */
#ifndef GCOMP_LE_H
#define GCOMP_LE_H

#include <stdint.h>

static inline void gcomp_store_le16(uint8_t *p, uint16_t v) {
  p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8);
}
static inline void gcomp_store_le32(uint8_t *p, uint32_t v) {
  p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); p[2] = (uint8_t)(v >> 16); p[3] = (uint8_t)(v >> 24);
}
static inline void gcomp_store_le64(uint8_t *p, uint64_t v) {
  gcomp_store_le32(p, (uint32_t)v);
  gcomp_store_le32(p + 4, (uint32_t)(v >> 32));
}
static inline uint16_t gcomp_load_le16(const uint8_t *p) {
  return (uint16_t)(p[0] | p[1] << 8);
}
static inline uint32_t gcomp_load_le32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t gcomp_load_le64(const uint8_t *p) {
  return (uint64_t)gcomp_load_le32(p) | (uint64_t)gcomp_load_le32(p + 4) << 32;
}

#endif /* GCOMP_LE_H */
