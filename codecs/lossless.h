/* Internal: lossless stages over a codec's payload bytes (+zstd, +igzip), the byte shuffle
 * that puts each byte plane of the payload's elements together before them, and the
 * staged-payload layout (docs/wire-format.md, "Staged payloads").
 *
 * Two plane modes (stage parameter planes=exp|all):
 *   all  shuffle the payload into byte planes, compress all of it;
 *   exp  shuffle, compress only the highest byte plane (sign and exponent of a
 *        little-endian float: all of its compressibility) and copy the other planes raw.
 *        Same ratio on gradients, a fraction of the compressor's work.
 */
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

enum { GCOMP_PLANES_EXP = 0, GCOMP_PLANES_ALL = 1 };

/* Every stage's cfg starts with these; a stage may add its own fields after them (and then
 * into gcomp_spec_ident_of, which compares only these). */
typedef struct {
  int level;
  int planes;   /* GCOMP_PLANES_* */
} gcomp_stage_common;

typedef struct {
  const char *name;   /* "zstd" */
  uint8_t id;         /* GCOMP_STAGE_* (frame.h) */
  const char *keys;   /* "level, planes" */
  int shuffle;        /* byte-shuffle the payload first */
  void (*defaults)(gcomp_stage_cfg *cfg);
  int (*set)(gcomp_stage_cfg *cfg, const char *key, const char *value);
  size_t (*print)(const gcomp_stage_cfg *cfg, char *buf, size_t n);
  /* Compresses in[0..in_len) into out (capacity cap). Returns GCOMP_ERR_NOMEM when the
   * result would not fit in cap: the caller then sends the payload raw, so a stage never
   * costs bytes. */
  int (*compress)(const gcomp_stage_cfg *cfg, const uint8_t *in, size_t in_len, uint8_t *out,
                  size_t cap, size_t *out_len);
  /* As compress, for the exponent plane alone in planes=exp mode (a low-entropy byte
   * stream with little repetition: an entropy coder without match search suits it).
   * Output must decode with decompress. NULL: use compress. */
  int (*compress_plane)(const gcomp_stage_cfg *cfg, const uint8_t *in, size_t in_len,
                        uint8_t *out, size_t cap, size_t *out_len);
  /* Decompresses in[0..in_len) into exactly want bytes at out; GCOMP_ERR_CORRUPT when in
   * is damaged or does not expand to exactly want bytes. Never writes past out + want. */
  int (*decompress)(const uint8_t *in, size_t in_len, uint8_t *out, size_t want);
} gcomp_stage;

const gcomp_stage *gcomp_stage_find(const char *name);
const gcomp_stage *gcomp_stage_by_id(uint8_t id);
const char *gcomp_stage_names(void);   /* "zstd, igzip" */

/* Applies stage st to a kind's payload raw[0..raw_len) made of width-byte elements (width
 * 0 or 1: no element structure, no shuffle), writing the staged payload into out (cap
 * bytes). *flags receives the frame flags that describe it (GCOMP_FRAME_F_SHUFFLED,
 * GCOMP_FRAME_F_PLANES). GCOMP_ERR_NOMEM when the result would not fit in cap: the caller
 * then sends the payload raw. Uses per-thread scratch. */
int gcomp_stage_encode(const gcomp_stage *st, const gcomp_stage_cfg *cfg, unsigned width,
                       const uint8_t *raw, size_t raw_len, uint8_t *out, size_t cap,
                       size_t *out_len, uint8_t *flags);

/* Reverses gcomp_stage_encode for a frame with the given flags. The kind's payload is
 * returned in *raw (a per-thread buffer, valid until the next call of this function in
 * the same thread) and *raw_len, which never exceeds max_raw. GCOMP_ERR_CORRUPT on any
 * inconsistency; never reads past in + in_len. */
int gcomp_stage_decode(const gcomp_stage *st, uint8_t flags, unsigned width, const uint8_t *in,
                       size_t in_len, size_t max_raw, const uint8_t **raw, size_t *raw_len);

/* ---- byte planes ----------------------------------------------------------------------
 * split: planes[b][i] = in[i * width + b] for i < elems; join is its inverse. One kernel
 * set per ISA; gcomp_shuffle_kernels_get() returns the one gcomp_isa_level() selects. */
typedef struct {
  const char *name;
  void (*split)(const uint8_t *restrict in, size_t elems, unsigned width, uint8_t *const *planes);
  void (*join)(const uint8_t *const *planes, size_t elems, unsigned width, uint8_t *restrict out);
} gcomp_shuffle_kernels;

extern const gcomp_shuffle_kernels gcomp_shuffle_kernels_base;
extern const gcomp_shuffle_kernels gcomp_shuffle_kernels_avx2;
const gcomp_shuffle_kernels *gcomp_shuffle_kernels_get(void);

/* The portable twins (also the AVX2 kernels' fallback for other widths and tails). */
void gcomp_split_planes_base(const uint8_t *restrict in, size_t elems, unsigned width,
                             uint8_t *const *planes);
void gcomp_join_planes_base(const uint8_t *const *planes, size_t elems, unsigned width,
                            uint8_t *restrict out);

/* Byte shuffle of n bytes of width-byte elements: out holds byte plane 0 of every element,
 * then plane 1, ...; a tail of n % width bytes is copied as is. width <= 16. */
void gcomp_shuffle(const uint8_t *restrict in, size_t n, unsigned width, uint8_t *restrict out);
void gcomp_unshuffle(const uint8_t *restrict in, size_t n, unsigned width, uint8_t *restrict out);

/* A per-thread growable buffer (slot < GCOMP_TLS_SLOTS), freed when the thread exits.
 * NULL when it cannot grow. Contents are not preserved across growth. */
enum { GCOMP_TLS_RAW = 0, GCOMP_TLS_PLANES = 1, GCOMP_TLS_IGZIP = 2, GCOMP_TLS_SLOTS = 3 };
void *gcomp_tls_buffer(int slot, size_t need);
/* Frees this thread's buffers that are larger than keep bytes: a thread that once decoded
 * a huge frame does not hold its memory for good. */
void gcomp_tls_trim(size_t keep);
enum { GCOMP_TLS_KEEP = 64u << 20 };

#endif /* GCOMP_LOSSLESS_H */
