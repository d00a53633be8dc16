/* A program outside the tree, built against the installed gcomp. */
#include <stdio.h>
#include <string.h>

#include <gcomp.h>

int main(void) {
  int s = gcomp_init();
  if (s != GCOMP_OK) {
    fprintf(stderr, "consumer: %s: %s\n", gcomp_strerror(s), gcomp_last_error());
    return 1;
  }
  if (strcmp(gcomp_version(), "0.0.0") == 0) return 1;
  printf("consumer: gcomp %s, kernels %s\n", gcomp_version(), gcomp_isa_selected());
  return 0;
}
