/* Internal: the error-feedback residual store, one residual per tensor key, kept in fp32
 * (default) or bf16 (ef:dtype=bf16, half the memory; the residual is rounded to nearest
 * even after every step, so feedback is exact only to bf16 precision). */
#ifndef GCOMP_EF_H
#define GCOMP_EF_H

#include <stddef.h>
#include <stdint.h>

#include "codec_impl.h"

typedef struct gcomp_ef gcomp_ef;

int gcomp_ef_create(int dtype, gcomp_ef **out);
void gcomp_ef_destroy(gcomp_ef *ef);

/* The fp32 residual of tensor `key`, created zeroed on first use. GCOMP_ERR_INVALID when
 * the key was seen before with a different count; GCOMP_ERR_UNSUPPORTED for a bf16 store. */
int gcomp_ef_slot(gcomp_ef *ef, uint64_t key, size_t count, float **residual);

/* Error feedback around kind for tensor `key`: x = grad + residual; encode x into dst;
 * residual = x - decode(encode(x)) (through kind->encode_ef). Also hands the kind its
 * per-tensor state word (ctx->kind_state). Same errors as gcomp_ef_slot. */
int gcomp_ef_encode(gcomp_ef *ef, const gcomp_kind *kind, const gcomp_kind_cfg *cfg,
                    gcomp_enc_ctx *ctx, uint64_t key, const float *grad, size_t count,
                    uint8_t *dst, size_t cap, size_t *len);

/* Copies the residual of key, widened to fp32, into out[0..count). GCOMP_ERR_INVALID when
 * the key is unknown or has another count. */
int gcomp_ef_residual(const gcomp_ef *ef, uint64_t key, float *out, size_t count);

/* Number of keys holding a residual. */
size_t gcomp_ef_keys(const gcomp_ef *ef);

/* Drops every residual (and kind state): the next encode of any key starts from zero and
 * may use a new length. */
void gcomp_ef_reset(gcomp_ef *ef);

/* Writes every residual to path (through a temporary file renamed into place): a versioned
 * file, keys in increasing order, CRC32C over everything. spec is the codec's canonical
 * spec, stored so that a load into a different codec is refused. */
int gcomp_ef_save(const gcomp_ef *ef, const char *spec, const char *path);

/* Replaces every residual with those of the file. GCOMP_ERR_CORRUPT when the file is
 * damaged, truncated or not a residual file; GCOMP_ERR_INVALID when it was written by a
 * codec with another spec than `spec`. On failure the store is unchanged. */
int gcomp_ef_load(gcomp_ef *ef, const char *spec, const char *path);

#endif /* GCOMP_EF_H */
