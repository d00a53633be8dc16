/* Internal: lossless stages over a codec's payload bytes (+zstd, +igzip), and the byte
 * shuffle that puts each byte plane of the payload's elements together before them. */
#ifndef GCOMP_LOSSLESS_H
#define GCOMP_LOSSLESS_H

#include <stddef.h>
#include <stdint.h>

#include "codec_impl.h"

enum { GCOMP_STAGE_CFG_BYTES = 32 };
typedef union {
  unsigned char bytes[GCOMP_STAGE_CFG_BYTES];
  uint64_t align_u64;
} gcomp_stage_cfg;

typedef struct {
  const char *name;   /* "zstd" */
  uint8_t id;         /* GCOMP_STAGE_* (frame.h) */
  const char *keys;
  int shuffle;        /* byte-shuffle the payload first */
  void (*defaults)(gcomp_stage_cfg *cfg);
  int (*set)(gcomp_stage_cfg *cfg, const char *key, const char *value);
  size_t (*print)(const gcomp_stage_cfg *cfg, char *buf, size_t n);
  /* Compresses in[0..in_len) into out (capacity cap). Returns GCOMP_ERR_NOMEM when the
   * result would not fit in cap: the caller then sends the payload raw, so a stage never
   * costs bytes. */
  int (*compress)(const gcomp_stage_cfg *cfg, const uint8_t *in, size_t in_len, uint8_t *out,
                  size_t cap, size_t *out_len);
  /* Decompresses exactly; GCOMP_ERR_CORRUPT when in is damaged or would expand past cap. */
  int (*decompress)(const uint8_t *in, size_t in_len, uint8_t *out, size_t cap,
                    size_t *out_len);
} gcomp_stage;

const gcomp_stage *gcomp_stage_find(const char *name);
const gcomp_stage *gcomp_stage_by_id(uint8_t id);
const char *gcomp_stage_names(void);   /* "zstd, igzip" */

/* Byte shuffle of n bytes of width-byte elements: out holds byte plane 0 of every element,
 * then plane 1, ...; a tail of n % width bytes is copied as is. */
void gcomp_shuffle(const uint8_t *restrict in, size_t n, unsigned width, uint8_t *restrict out);
void gcomp_unshuffle(const uint8_t *restrict in, size_t n, unsigned width, uint8_t *restrict out);

#endif /* GCOMP_LOSSLESS_H */
