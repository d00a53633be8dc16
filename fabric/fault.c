/* GCOMP_FAULT parsing (fault.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fault.h"
#include "gcomp_common.h"
#include "transport.h"

int gcomp_fault_armed(const char *kind, int rank, long *call) {
  if (call) *call = -1;
  /* the process's setting (a config refuses it), read from the registry wherever it is
   * asked: a communicator's creation and its calls see the same */
  const char *v = gcomp_param_str(GCOMP_P_FAULT);
  if (!v || !*v) return 0;
  size_t k = strlen(kind);
  if (strncmp(v, kind, k) != 0 || v[k] != ':') return 0;
  int r = -1, used = 0;
  long n = -1;
  const char *rest = v + k + 1;
  if (sscanf(rest, "rank=%d%n", &r, &used) != 1 ||
      (rest[used] && sscanf(rest + used, ",call=%ld", &n) != 1) || r < 0) {
    GCOMP_WARN(GCOMP_SUB_FABRIC, "GCOMP_FAULT=%s: expected %s:rank=R[,call=N]; no fault armed",
               v, kind);
    return 0;
  }
  if (call) *call = n;
  return r == rank;
}

unsigned gcomp_wire_version(int rank) {
  return GCOMP_WIRE_VERSION + (gcomp_fault_armed("wire-version", rank, NULL) ? 1u : 0u);
}
