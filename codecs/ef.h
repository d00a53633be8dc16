/* Internal: the error-feedback residual store, one residual per tensor key, kept in fp32
 * (default) or bf16 (ef:dtype=bf16, half the memory; the residual is rounded to nearest
 * even after every step, so feedback is exact only to bf16 precision).
 *
 * With momentum m > 0 (ef:momentum=m, top-k only) the store also keeps an fp32 velocity u
 * per key and applies Deep Gradient Compression's momentum correction (Lin et al., 2018):
 *     u = m * u + grad;   residual += u;   send topk(residual);   residual = 0 where sent;
 * and with masking (ef:mask=1, the default) also u = 0 where sent (momentum factor
 * masking). The sum of the workers' sent values is then the global momentum update: the
 * optimizer applies it without momentum of its own. Without masking every gradient is
 * eventually sent with the weight momentum SGD gives it, g / (1 - m), only later; masking
 * drops the part of it still in u when its coordinate is sent (for a coordinate sent every
 * step, all but g: the step of plain SGD). */
#ifndef GCOMP_EF_H
#define GCOMP_EF_H

#include <stddef.h>
#include <stdint.h>

#include "codec_impl.h"

typedef struct gcomp_ef gcomp_ef;

/* momentum: 0 (plain error feedback) or in (0, 1): momentum correction; mask: 1 zeroes
 * the velocity where values were sent (ignored without momentum). */
int gcomp_ef_create(int dtype, double momentum, int mask, gcomp_ef **out);
void gcomp_ef_destroy(gcomp_ef *ef);

/* The fp32 residual of tensor `key`, created zeroed on first use. GCOMP_ERR_INVALID when
 * the key was seen before with a different count; GCOMP_ERR_UNSUPPORTED for a bf16 store. */
int gcomp_ef_slot(gcomp_ef *ef, uint64_t key, size_t count, float **residual);

/* Error feedback around kind for tensor `key`: x = grad + residual; encode x into dst;
 * residual = x - decode(encode(x)) (through kind->encode_ef). With momentum, grad is first
 * folded into the velocity (u = m * u + grad, x = u + residual) and, with masking, once
 * the encode has succeeded, u is zeroed wherever the payload carries a value (decoded
 * nonzero or not finite; a value sent as exactly 0 leaves u alone, which only happens when
 * u + residual is 0 there). A non-finite u is zeroed in any case. The residual and the
 * velocity change only when the encode succeeds. Also
 * hands the kind its per-tensor state word (ctx->kind_state). Same errors as
 * gcomp_ef_slot. */
int gcomp_ef_encode(gcomp_ef *ef, const gcomp_kind *kind, const gcomp_kind_cfg *cfg,
                    gcomp_enc_ctx *ctx, uint64_t key, const float *grad, size_t count,
                    uint8_t *dst, size_t cap, size_t *len);

/* Copies the residual of key, widened to fp32, into out[0..count). GCOMP_ERR_INVALID when
 * the key is unknown or has another count. */
int gcomp_ef_residual(const gcomp_ef *ef, uint64_t key, float *out, size_t count);

/* Copies the velocity of key into out[0..count). GCOMP_ERR_INVALID when the store keeps
 * no velocity (momentum 0), or the key is unknown or has another count. */
int gcomp_ef_velocity(const gcomp_ef *ef, uint64_t key, float *out, size_t count);

/* Number of keys holding a residual. */
size_t gcomp_ef_keys(const gcomp_ef *ef);

/* Drops every residual (and kind state): the next encode of any key starts from zero and
 * may use a new length. */
void gcomp_ef_reset(gcomp_ef *ef);

/* Writes every residual (and velocity, with momentum) to path (through a temporary file
 * renamed into place): a versioned file, keys in increasing order, CRC32C over everything.
 * spec is the codec's canonical spec, stored so that a load into a different codec is
 * refused. */
int gcomp_ef_save(const gcomp_ef *ef, const char *spec, const char *path);

/* Replaces every residual with those of the file. GCOMP_ERR_CORRUPT when the file is
 * damaged, truncated or not a residual file; GCOMP_ERR_INVALID when it was written by a
 * codec with another spec than `spec`. On failure the store is unchanged. */
int gcomp_ef_load(gcomp_ef *ef, const char *spec, const char *path);

#endif /* GCOMP_EF_H */
