/* Internal: the error-feedback residual store, one fp32 residual per tensor key. */
#ifndef GCOMP_EF_H
#define GCOMP_EF_H

#include <stddef.h>
#include <stdint.h>

typedef struct gcomp_ef gcomp_ef;

int gcomp_ef_create(int dtype, gcomp_ef **out);
void gcomp_ef_destroy(gcomp_ef *ef);
/* The residual of tensor `key`, created zeroed on first use. GCOMP_ERR_INVALID when the
 * key was seen before with a different count. */
int gcomp_ef_slot(gcomp_ef *ef, uint64_t key, size_t count, float **residual);

#endif /* GCOMP_EF_H */
