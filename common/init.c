/* One-time initialisation: environment, logging, CPU. Its status is sticky. */
#include <pthread.h>
#include <string.h>

#include "gcomp_common.h"

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int init_status;
static char init_error[1024];

int gcomp_init_run(void) {
  int s = gcomp_param_load();
  int ls = gcomp_log_open();   /* open the log even after a bad value, to report it */
  if (s == GCOMP_OK) s = ls;
  if (s == GCOMP_OK) gcomp_param_report();
  if (s == GCOMP_OK) s = gcomp_cpu_select();
  init_status = s;
  if (s < 0) {
    strncpy(init_error, gcomp_last_error(), sizeof init_error - 1);
    GCOMP_WARN(GCOMP_SUB_INIT, "initialisation failed: %s", init_error);
  }
  return s;
}

static void run_once(void) { gcomp_init_run(); }

gcomp_status gcomp_init(void) {
  pthread_once(&once, run_once);
  if (init_status < 0) return gcomp_error_restore(init_status, init_error);
  return GCOMP_OK;
}
