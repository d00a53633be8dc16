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

#endif /* GCOMP_SPEC_H */
