/* Internal: codec spec strings, parsed and printed. Grammar:
 *     spec  := kind [ '+' stage ]*
 *     kind  := name [ ':' key '=' value [ ',' key '=' value ]* ]
 *     stage := 'ef' [...] | lossless-name [...]        (ef before the lossless stage) */
#ifndef GCOMP_SPEC_H
#define GCOMP_SPEC_H

#include "codec_impl.h"
#include "lossless.h"

enum { GCOMP_EF_FP32 = 0, GCOMP_EF_BF16 = 1 };

typedef struct {
  const gcomp_kind *kind;
  gcomp_kind_cfg cfg;
  int ef;             /* +ef present */
  int ef_dtype;       /* GCOMP_EF_* */
  double ef_momentum; /* ef:momentum=M, 0 <= M < 1: DGC momentum correction (0: off) */
  int ef_mask;        /* ef:mask=0|1 (default 1 with momentum, 0 without): DGC's momentum
                         factor masking (while parsing, -1: not given) */
  int ef_momentum_given; /* the text named ef:momentum (0 included); not printed, so a
                            codec made from the canonical form does not know it */
  const gcomp_stage *stage;   /* NULL: no lossless stage */
  gcomp_stage_cfg stage_cfg;
} gcomp_spec;

/* Parses text; on error GCOMP_ERR_INVALID with a detail that quotes the spec, names the
 * offending token and lists the valid choices. */
int gcomp_spec_parse(const char *text, gcomp_spec *out);

/* Canonical form: every parameter spelled out, fixed order; parse(print(s)) == s. */
size_t gcomp_spec_print(const gcomp_spec *spec, char *buf, size_t n);

/* A spec as fixed words: equal words and seed exactly when the canonical forms are equal,
 * or differ only in the sign of a zero (what print leaves out stays out: ef's fields
 * without +ef, mask without momentum, ef_momentum_given). Words: the kind's id and
 * GCOMP_KIND_WORDS of its parameters; +ef, its dtype, momentum and mask; the stage's id,
 * level and planes; unused ones 0. An array of uint64_t has no padding: memcmp compares it. */
enum { GCOMP_IDENT_WORDS = 1 + GCOMP_KIND_WORDS + 4 + 3 };
typedef struct {
  uint64_t w[GCOMP_IDENT_WORDS];
  uint64_t seed;   /* apart: ranks may differ in it (gcomp_spec_wire_id) */
} gcomp_spec_ident;
void gcomp_spec_ident_of(const gcomp_spec *spec, gcomp_spec_ident *out);
/* 64-bit FNV-1a over the words (byte by byte, least significant first: the same on every
 * host), the seed left out. */
uint64_t gcomp_spec_wire_id(const gcomp_spec_ident *id);
/* The spec of plain "none" (what a NULL codec means). */
void gcomp_spec_none(gcomp_spec *out);

#endif /* GCOMP_SPEC_H */
