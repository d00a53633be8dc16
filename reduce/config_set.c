/* gcomp_config_set: the values common/ cannot judge (algorithm names, codec specs) are
 * checked here, as a communicator created from the config would check them, so a bad one
 * fails at the call that set it, naming the token. */
#include <string.h>

#include "comm_impl.h"

static int check_value(gcomp_param_id id, const char *value) {
  switch (id) {
  case GCOMP_P_ALGO: {
    const gcomp_algo *forced[GCOMP_COLL_KINDS];
    return gcomp_algo_parse(value, forced);
  }
  case GCOMP_P_ALLGATHER_CODEC:
  case GCOMP_P_CODEC:
  case GCOMP_P_INTRA_CODEC: {
    if (strcmp(value, "none") == 0) return GCOMP_OK;
    gcomp_codec *c = NULL;
    int st = gcomp_codec_create(value, &c);   /* its error names the spec and the token */
    gcomp_codec_destroy(c);
    return st < 0 ? gcomp_error_trace(st, __FILE__, __LINE__) : GCOMP_OK;
  }
  default: return GCOMP_OK;
  }
}

gcomp_status gcomp_config_set(gcomp_config *cfg, const char *name, const char *value) {
  GCOMP_FAIL_IF(!cfg, GCOMP_ERR_INVALID, "gcomp_config_set: cfg is NULL");
  int id = gcomp_param_lookup(name);
  if (id >= 0 && value) GCOMP_CHECK(check_value((gcomp_param_id)id, value));
  return gcomp_config_set_value(cfg, name, value);
}
