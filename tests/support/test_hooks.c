/* Test support: the hooks of test_hooks.h, over the library's internal calls. */
#include "test_hooks.h"

#include "gcomp_common.h"

int gcomp_reinit_for_testing(void) {
  gcomp_init();        /* the first initialisation runs once: let it have run first */
  gcomp_init_run();
  return gcomp_init();
}
