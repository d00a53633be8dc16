/* Test support: the hooks of test_hooks.h, over the library's internal calls. */
#include "test_hooks.h"

#include "comm.h"
#include "gcomp_common.h"

int gcomp_reinit_for_testing(void) {
  gcomp_init();        /* the first initialisation runs once: let it have run first */
  gcomp_init_run();
  return gcomp_init();
}

int gcomp_loopback_for_testing(int size, const int *node_of, gcomp_transport **out) {
  int st = gcomp_init();
  if (st < 0) return st;
  gcomp_fabric_opts opts;
  gcomp_fabric_opts_from(gcomp_config_settings(NULL), &opts);
  return gcomp_loopback_create(size, node_of, &opts, out);
}

int gcomp_transport_env_for_testing(gcomp_transport **out) {
  int st = gcomp_init();
  if (st < 0) return st;
  gcomp_fabric_opts opts;
  gcomp_fabric_opts_from(gcomp_config_settings(NULL), &opts);
  return gcomp_transport_create_env(&opts, out);
}
