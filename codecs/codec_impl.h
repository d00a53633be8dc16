/* Internal: how a codec kind (none, fp16, bf16, topk, ...) plugs into the codec pipeline.
 *
 * A codec is a pipeline built from a spec: one kind (the lossy or identity transform of
 * fp32 values into a payload), optionally error feedback around it (+ef), optionally one
 * lossless stage over the payload bytes (+zstd, +igzip). codec.c owns the pipeline and
 * the frame; a kind only turns floats into payload bytes and back.
 */
#ifndef GCOMP_CODEC_IMPL_H
#define GCOMP_CODEC_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "gcomp_common.h"

/* Wire ids of the kinds. Fixed forever once shipped: they are in every frame. */
enum {
  GCOMP_KIND_NONE = 1,
  GCOMP_KIND_FP16 = 2,
  GCOMP_KIND_BF16 = 3,
  GCOMP_KIND_TOPK = 4,
  GCOMP_KIND_QUANT = 5,
  GCOMP_KIND_SIGN = 6,
  GCOMP_KIND_TEST_BIASED = 250   /* deliberately wrong codec for the harness's own tests */
};

/* Room for any kind's parsed parameters; a kind casts it to its own struct. */
enum { GCOMP_KIND_CFG_BYTES = 64 };
typedef union {
  unsigned char bytes[GCOMP_KIND_CFG_BYTES];
  uint64_t align_u64;
  double align_dbl;
} gcomp_kind_cfg;

/* Words of a kind's parameters in its identity (gcomp_kind.ident). */
enum { GCOMP_KIND_WORDS = 6 };
/* A parameter of type double as an identity word: its bits, one word for both zeros (they
 * print alike). Parameters are checked finite when set, so no NaN reaches this. */
static inline uint64_t gcomp_ident_dbl(double v) {
  union {
    double d;
    uint64_t u;
  } x = {.d = v};
  return v == 0 ? 0 : x.u;
}

/* The frame's block checksums (codecs/frame.h): fed by an encoder as its output becomes
 * final, asked by a decoder before it reads a part of its input. */
typedef struct gcomp_frame_sums gcomp_frame_sums;
typedef struct gcomp_frame_check gcomp_frame_check;
void gcomp_frame_sums_add(gcomp_frame_sums *s, uint64_t upto);
void gcomp_frame_sums_put(gcomp_frame_sums *s, uint64_t at, uint32_t crc);
int gcomp_frame_verify(gcomp_frame_check *chk, uint64_t upto);

/* Per-call context of an encode. */
typedef struct {
  uint64_t seq;               /* frames this codec encoded before this one (stochastic
                                 rounding keys its generator on (seed, seq, index)) */
  gcomp_codec_stats *stats;   /* counters to update (nonfinite, overflows, underflows) */
  uint32_t param;             /* out: a per-frame word stored in the frame header and handed
                                 back to decode (e.g. fp16's power-of-two scale) */
  uint64_t *kind_state;       /* in/out: a word a kind may keep per tensor between encodes
                                 (topk: its last threshold), 0 at first; NULL: none kept */
  gcomp_frame_sums *sums;     /* the payload's block checksums, or NULL (see below) */
} gcomp_enc_ctx;

/* An encoder reports that payload bytes [0, upto) are final while they are still in cache
 * (a block at a time is enough): the frame's block checksums are taken from there instead
 * of in a second pass. Optional (what is not reported is summed after encode returns);
 * an encoder that rewrites its output calls gcomp_enc_restart first. */
static inline void gcomp_enc_progress(gcomp_enc_ctx *ctx, size_t upto) {
  if (ctx->sums) gcomp_frame_sums_add(ctx->sums, upto);
}
void gcomp_enc_restart(gcomp_enc_ctx *ctx);
/* As gcomp_enc_progress for the whole block that starts at payload byte `at` (the next one
 * not summed), with its checksum crc computed by the encoder itself. */
static inline void gcomp_enc_block_sum(gcomp_enc_ctx *ctx, size_t at, uint32_t crc) {
  if (ctx->sums) gcomp_frame_sums_put(ctx->sums, at, crc);
}
/* Whether reporting progress pays (an encoder may then work in blocks, without streaming
 * stores, so that the checksum reads its output from cache). */
static inline int gcomp_enc_summing(const gcomp_enc_ctx *ctx) { return ctx->sums != NULL; }

/* A decoder with reads_in_blocks set calls this before it reads payload bytes [0, upto):
 * the blocks holding them are verified just before use (GCOMP_ERR_CORRUPT on damage). chk
 * may be NULL (nothing to verify). */
static inline int gcomp_dec_need(gcomp_frame_check *chk, size_t upto) {
  return chk ? gcomp_frame_verify(chk, upto) : GCOMP_OK;
}

/* A counting decoder's n more NaN and Inf written (frame.h's chk->nonfinite; UINT64_MAX:
 * unknown, and it stays so). chk NULL: nothing. */
void gcomp_dec_tally(gcomp_frame_check *chk, uint64_t n);

/* What a kind's decode does with the values: stores them, adds them to dst, or stores them
 * with streaming stores where its kernels can (the same bits as a store: for an output
 * nobody reads soon; the caller fences, gcomp_decode_tally). */
typedef enum { GCOMP_DEC_STORE = 0, GCOMP_DEC_ADD = 1, GCOMP_DEC_STREAM = 2 } gcomp_dec_mode;

typedef struct gcomp_kind gcomp_kind;
struct gcomp_kind {
  const char *name;     /* spec name: "fp16" */
  uint8_t id;           /* GCOMP_KIND_* */
  const char *keys;     /* valid parameter keys, ", "-separated, for error messages */
  unsigned elem_bytes;  /* payload element width for the byte shuffle of a lossless stage
                           (0: the payload has no fixed element width, do not shuffle) */
  int reads_in_blocks;  /* decode calls gcomp_dec_need before it reads each part of its
                           payload; 0: the whole payload is verified before decode runs */
  int sparse;           /* frames hold a few (index, value) pairs: reduced shards are dense,
                           so a planner sums frames as they are instead of re-encoding */
  int second_ef;        /* with +ef, the second quantisation (of reduced shards) keeps error
                           feedback too: the owner's residual per shard (sign: re-signing a
                           sum without it would lose its magnitudes for good) */
  int counts_nonfinite; /* decode and decode_part keep chk->nonfinite (gcomp_dec_tally) in
                           the store modes: the NaN and Inf they write are known without
                           reading the output back (gcomp_decode_tally) */
  /* Values a part must be a multiple of for an encode or a decode in parts (codec_parts.h)
   * when the payload of consecutive parts, each encoded alone (encode or encode_ef), is the
   * whole's payload byte for byte: bucket after bucket, nothing carried between them but
   * the residual. NULL, or 0 for this cfg: the kind cannot be encoded in parts. */
  size_t (*part_values)(const gcomp_kind_cfg *cfg);
  /* With part_values: decodes values [at, at + count) of a payload (at a part's start, the
   * bytes before *o holding the values before at) into dst[0..count), moving *o past
   * them; the checks of decode, but for the bytes after the last value (the caller's).
   * The frame's param is checked first, so count 0 checks only that. add: a
   * gcomp_dec_mode. */
  int (*decode_part)(const gcomp_kind_cfg *cfg, uint32_t param, const uint8_t *restrict src,
                     size_t len, size_t *o, float *restrict dst, size_t at, size_t count,
                     int add, gcomp_frame_check *chk);

  /* Fills cfg with defaults. */
  void (*defaults)(gcomp_kind_cfg *cfg);
  /* Applies key=value. On a bad key or value returns GCOMP_ERR_INVALID with a detail that
   * names the key (and value) and lists the valid choices. */
  int (*set)(gcomp_kind_cfg *cfg, const char *key, const char *value);
  /* Checks the combination once all keys are set. */
  int (*validate)(const gcomp_kind_cfg *cfg);
  /* Writes the canonical "k=v,k=v" parameter list (all parameters, fixed order) like
   * snprintf; "" when the kind has none. */
  size_t (*print)(const gcomp_kind_cfg *cfg, char *buf, size_t n);
  /* The parameters as words, for comparing codecs without printing them: into w (zeroed
   * by the caller) what print shows but the seed, which goes to *seed (0 where it has no
   * effect). Two configurations print alike exactly when their words and seeds are equal
   * (but "-0" and "0", equal in meaning: a double goes in through gcomp_ident_dbl), so a
   * flag print does not show stays out. */
  void (*ident)(const gcomp_kind_cfg *cfg, uint64_t w[GCOMP_KIND_WORDS], uint64_t *seed);

  /* Upper bound of the payload for count values. */
  size_t (*max_payload)(const gcomp_kind_cfg *cfg, size_t count);
  /* Encodes count values into dst (capacity cap), sets *len. */
  int (*encode)(const gcomp_kind_cfg *cfg, gcomp_enc_ctx *ctx, const float *restrict src,
                size_t count, uint8_t *restrict dst, size_t cap, size_t *len);
  /* Decodes a payload of len bytes holding count values; add is a gcomp_dec_mode
   * (GCOMP_DEC_STREAM only for a kind with decode_part).
   * Must validate everything it reads (GCOMP_ERR_CORRUPT) and never read past len. chk:
   * see reads_in_blocks (NULL: the payload is trusted or already verified). After a
   * failure dst may hold partial results. */
  int (*decode)(const gcomp_kind_cfg *cfg, uint32_t param, const uint8_t *restrict src,
                size_t len, float *restrict dst, size_t count, int add, gcomp_frame_check *chk);
  /* Error feedback fused with the encode: x = grad + residual; encode x; residual =
   * x - decode(encode(x)). Kinds without a fused version use gcomp_ef_encode_generic.
   * grad NULL, for kinds with decode_part: the residual holds x already (an encode in
   * parts formed it there, codec.c). */
  int (*encode_ef)(const gcomp_kind *kind, const gcomp_kind_cfg *cfg, gcomp_enc_ctx *ctx,
                   const float *restrict grad, float *restrict residual, size_t count,
                   uint8_t *restrict dst, size_t cap, size_t *len);
  /* The same with a bf16 residual (ef:dtype=bf16), fused bucket by bucket: each value
   * widened exactly, updated as encode_ef does, rounded back with gcomp_bf16_rne_sat, the
   * bits ef.c's widening of the whole residual around encode_ef gives. Called only with
   * room for max_payload (a failure could leave the residual partly updated). NULL: ef.c
   * widens the whole residual around encode_ef. */
  int (*encode_ef_bf16)(const gcomp_kind *kind, const gcomp_kind_cfg *cfg, gcomp_enc_ctx *ctx,
                        const float *restrict grad, uint16_t *restrict residual, size_t count,
                        uint8_t *restrict dst, size_t cap, size_t *len);
};

/* The registry (codecs/registry.c). */
const gcomp_kind *gcomp_kind_find(const char *name);
/* "none, fp16, bf16, topk": the names a user may write, for error messages. */
const char *gcomp_kind_names(void);

/* Error feedback done the plain way, for kinds without a fused encode_ef: three passes
 * and one temporary buffer. */
int gcomp_ef_encode_generic(const gcomp_kind *kind, const gcomp_kind_cfg *cfg,
                            gcomp_enc_ctx *ctx, const float *restrict grad,
                            float *restrict residual, size_t count, uint8_t *restrict dst,
                            size_t cap, size_t *len);

/* Helpers for kinds' set(): parse a number or a choice, failing with a message that
 * names the kind, key and value. */
int gcomp_kv_double(const char *kind, const char *key, const char *value, double lo, double hi,
                    double *out);
int gcomp_kv_u64(const char *kind, const char *key, const char *value, uint64_t lo, uint64_t hi,
                 uint64_t *out);
/* choices: "a|b|c"; returns the index in *out */
int gcomp_kv_choice(const char *kind, const char *key, const char *value, const char *choices,
                    int *out);

/* ---- what a planner asks of a codec (reduce/; codecs/codec.c answers from the parsed spec,
 * so no caller reads, prints or edits spec text) -------------------------------------------
 * Whether two codecs have the same spec (print the same canonical text), from the parsed
 * fields: defaults left implicit or written out, and parameter order, do not matter (NULL
 * equals only NULL).
 * A few word compares: cheap enough for every call. */
int gcomp_codec_same(const gcomp_codec *a, const gcomp_codec *b);
/* Wire identity: 64 bits of a hash of the spec's fields but the seed (a seed only
 * decorrelates one rank's rounding or sampling, and frames describe themselves), so ranks
 * may differ in it but in nothing else. Computed once, at creation. NULL is "none". */
uint64_t gcomp_codec_wire_id(const gcomp_codec *codec);
/* A new codec of the same spec, with none of the state (residuals, frame count, stats). */
int gcomp_codec_clone(const gcomp_codec *codec, gcomp_codec **out);
/* The codec that re-encodes reduced shards (a second quantisation): the same without error
 * feedback (with it, for a kind with second_ef), or for a sparse codec fp32 ("none": its
 * reduced shards are dense). */
int gcomp_codec_second_stage(const gcomp_codec *codec, gcomp_codec **out);

#endif /* GCOMP_CODEC_IMPL_H */
