/* The parameter registry: the only place gcomp reads its environment. */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gcomp_common.h"

extern char **environ;

typedef enum { PT_INT, PT_SIZE, PT_BOOL, PT_STR, PT_ENUM } ptype;

typedef struct {
  const char *name;
  ptype type;
  const char *dflt;
  const char *extra;
  const char *help;
} pdef;

static const pdef defs[GCOMP_P_COUNT_] = {
#define GCOMP_PARAM(id, type, dflt, extra, help) {"GCOMP_" #id, PT_##type, dflt, extra, help},
#include "param_list.h"
#undef GCOMP_PARAM
};

/* The environment's values, read once (gcomp_init) */
static gcomp_settings env;

/* Settings of the process, not of one communicator: a config refuses them. GCOMP_FAULT
 * arms a fault on a rank of the job, wherever that rank's layers look (fabric/fault.h). */
static const unsigned char process_wide[GCOMP_P_COUNT_] = {
    [GCOMP_P_DEBUG] = 1,      [GCOMP_P_DEBUG_SUBSYS] = 1, [GCOMP_P_DEBUG_FILE] = 1,
    [GCOMP_P_ISA] = 1,        [GCOMP_P_SHIM_STRICT] = 1,  [GCOMP_P_LIBRARY] = 1,
    [GCOMP_P_SHIM_ROUTE] = 1, [GCOMP_P_FAULT] = 1,
    [GCOMP_P_RANK] = 2,       [GCOMP_P_SIZE] = 2,         [GCOMP_P_LOCAL_RANK] = 2,
    [GCOMP_P_ROOT] = 2,       [GCOMP_P_JOB_TOKEN] = 2,    /* 2: the launcher's */
    [GCOMP_P_METRICS] = 1,    [GCOMP_P_SEED] = 1};        /* the training program's */

static const char *type_name(ptype t) {
  static const char *const names[] = {"int", "size", "bool", "string", "enum"};
  return names[t];
}

int gcomp_parse_size(const char *text, int64_t *out) {
  if (!text || !*text) return GCOMP_ERR_INVALID;
  errno = 0;
  char *end = NULL;
  long long v = strtoll(text, &end, 10);
  if (errno || end == text || v < 0) return GCOMP_ERR_INVALID;
  int shift = 0;
  switch (tolower((unsigned char)*end)) {
  case '\0': break;
  case 'k': shift = 10; end++; break;
  case 'm': shift = 20; end++; break;
  case 'g': shift = 30; end++; break;
  default: return GCOMP_ERR_INVALID;
  }
  if (shift && (*end == 'i' || *end == 'I')) end++;
  if (shift && (*end == 'b' || *end == 'B')) end++;
  if (*end != '\0') return GCOMP_ERR_INVALID;
  if (shift && v > (LLONG_MAX >> shift)) return GCOMP_ERR_INVALID;
  *out = (int64_t)v << shift;
  return GCOMP_OK;
}

static int parse_range(const char *extra, int64_t *lo, int64_t *hi) {
  *lo = INT64_MIN;
  *hi = INT64_MAX;
  if (!extra || !*extra) return 0;
  return sscanf(extra, "%" SCNd64 ":%" SCNd64, lo, hi) == 2 ? 0 : -1;
}

/* Returns the index of `text` among the '|'-separated choices, or -1. */
static int enum_index(const char *choices, const char *text) {
  int idx = 0;
  size_t n = strlen(text);
  for (const char *p = choices; *p; idx++) {
    const char *bar = strchr(p, '|');
    size_t len = bar ? (size_t)(bar - p) : strlen(p);
    if (len == n && strncasecmp(p, text, n) == 0) return idx;
    if (!bar) break;
    p = bar + 1;
  }
  return -1;
}

static int parse_value(const pdef *d, const char *text, int64_t *out) {
  int64_t lo, hi;
  switch (d->type) {
  case PT_INT: {
    errno = 0;
    char *end = NULL;
    long long v = strtoll(text, &end, 10);
    int none = end == text;   /* before the trailing blanks: ' ' alone is no number */
    while (end && isspace((unsigned char)*end)) end++;
    GCOMP_FAIL_IF(errno || none || *end != '\0', GCOMP_ERR_INVALID,
                  "%s='%s' is not an integer", d->name, text);
    parse_range(d->extra, &lo, &hi);
    GCOMP_FAIL_IF(v < lo || v > hi, GCOMP_ERR_INVALID,
                  "%s='%s' is out of range [%" PRId64 ", %" PRId64 "]", d->name, text, lo, hi);
    *out = v;
    return GCOMP_OK;
  }
  case PT_SIZE: {
    int64_t v;
    GCOMP_FAIL_IF(gcomp_parse_size(text, &v) != GCOMP_OK, GCOMP_ERR_INVALID,
                  "%s='%s' is not a byte count (digits with an optional k, m or g suffix)",
                  d->name, text);
    parse_range(d->extra, &lo, &hi);
    GCOMP_FAIL_IF(v < lo || v > hi, GCOMP_ERR_INVALID,
                  "%s='%s' is out of range [%" PRId64 ", %" PRId64 "]", d->name, text, lo, hi);
    *out = v;
    return GCOMP_OK;
  }
  case PT_BOOL: {
    int t = enum_index("1|true|yes|on", text), f = enum_index("0|false|no|off", text);
    GCOMP_FAIL_IF(t < 0 && f < 0, GCOMP_ERR_INVALID,
                  "%s='%s' is not a boolean (use 0/1, true/false, yes/no, on/off)", d->name, text);
    *out = t >= 0;
    return GCOMP_OK;
  }
  case PT_ENUM: {
    int i = enum_index(d->extra, text);
    GCOMP_FAIL_IF(i < 0, GCOMP_ERR_INVALID, "%s='%s' is not one of %s", d->name, text, d->extra);
    *out = i;
    return GCOMP_OK;
  }
  case PT_STR:
    *out = 0;
    return GCOMP_OK;
  }
  return GCOMP_ERR_INVALID;
}

static size_t edit_distance(const char *a, const char *b) {
  size_t la = strlen(a), lb = strlen(b);
  if (la > 63 || lb > 63) return 64;
  size_t row[64];
  for (size_t j = 0; j <= lb; j++) row[j] = j;
  for (size_t i = 1; i <= la; i++) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= lb; j++) {
      size_t up = row[j];
      size_t sub = diag + (a[i - 1] != b[j - 1]);
      size_t best = up + 1 < row[j - 1] + 1 ? up + 1 : row[j - 1] + 1;
      row[j] = sub < best ? sub : best;
      diag = up;
    }
  }
  return row[lb];
}

/* Warns about GCOMP_* variables nobody defined: typos are the common bug. */
static void warn_unknown(void) {
  for (char **e = environ; e && *e; e++) {
    if (strncmp(*e, "GCOMP_", 6) != 0) continue;
    const char *eq = strchr(*e, '=');
    size_t n = eq ? (size_t)(eq - *e) : strlen(*e);
    char name[128];
    if (n >= sizeof name) n = sizeof name - 1;
    memcpy(name, *e, n);
    name[n] = '\0';
    int known = 0;
    size_t best = SIZE_MAX;
    const char *best_name = NULL;
    for (int i = 0; i < GCOMP_P_COUNT_ && !known; i++) {
      if (strcmp(defs[i].name, name) == 0) known = 1;
      size_t d = edit_distance(defs[i].name, name);
      if (d < best) best = d, best_name = defs[i].name;
    }
    if (known) continue;
    if (best_name && best <= 3)
      GCOMP_WARN(GCOMP_SUB_ENV, "unknown variable %s ignored; did you mean %s?", name, best_name);
    else
      GCOMP_WARN(GCOMP_SUB_ENV, "unknown variable %s ignored (gcomp-info -e lists them all)", name);
  }
}

/* Reads every parameter; the first malformed one is the error. Defaults must parse. */
int gcomp_param_load(void) {
  gcomp_settings_free(&env);
  int status = GCOMP_OK;
  for (int i = 0; i < GCOMP_P_COUNT_; i++) {
    const char *text = getenv(defs[i].name);
    int64_t v = 0;
    if (text) {
      env.text[i] = strdup(text);
      if (!env.text[i]) GCOMP_FAIL(GCOMP_ERR_NOMEM, "copying %s", defs[i].name);
    }
    int s = parse_value(&defs[i], text ? text : defs[i].dflt, &v);
    if (s < 0 && status == GCOMP_OK) status = s;   /* keep the first error's detail */
    env.ival[i] = s < 0 ? 0 : v;
  }
  if (status < 0) {
    /* a bad value must not leave a half-applied state: fall back to defaults */
    char detail[1024];
    snprintf(detail, sizeof detail, "%s", gcomp_last_error());
    for (int i = 0; i < GCOMP_P_COUNT_; i++) parse_value(&defs[i], defs[i].dflt, &env.ival[i]);
    return gcomp_error_restore(status, detail);
  }
  return GCOMP_OK;
}

void gcomp_param_report(void) {
  warn_unknown();
  for (int i = 0; i < GCOMP_P_COUNT_; i++)
    if (env.text[i])   /* the job's secret is set or not, never printed */
      GCOMP_INFO(GCOMP_SUB_ENV, "%s=%s", defs[i].name,
                 i == GCOMP_P_JOB_TOKEN ? "(set, not shown)" : env.text[i]);
}

int64_t gcomp_param_int(gcomp_param_id id) { return env.ival[id]; }
const char *gcomp_param_str(gcomp_param_id id) { return gcomp_settings_str(&env, id); }
int gcomp_param_is_set(gcomp_param_id id) { return env.text[id] != NULL; }

/* ---- tables of settings, and configs ------------------------------------------------- */
int64_t gcomp_settings_int(const gcomp_settings *s, gcomp_param_id id) { return s->ival[id]; }
const char *gcomp_settings_str(const gcomp_settings *s, gcomp_param_id id) {
  return s->text[id] ? s->text[id] : defs[id].dflt;
}
int gcomp_settings_is_set(const gcomp_settings *s, gcomp_param_id id) {
  return s->text[id] != NULL;
}

void gcomp_settings_free(gcomp_settings *s) {
  for (int i = 0; i < GCOMP_P_COUNT_; i++) free(s->text[i]);
  memset(s, 0, sizeof *s);
}

int gcomp_settings_copy(gcomp_settings *dst, const gcomp_settings *src) {
  if (!src) src = &env;
  memset(dst, 0, sizeof *dst);
  for (int i = 0; i < GCOMP_P_COUNT_; i++) {
    dst->ival[i] = src->ival[i];
    if (src->text[i] && !(dst->text[i] = strdup(src->text[i]))) {
      gcomp_settings_free(dst);
      GCOMP_FAIL(GCOMP_ERR_NOMEM, "copying the setting %s", defs[i].name);
    }
  }
  dst->inherit = src->inherit;
  return GCOMP_OK;
}

/* A name as a config takes it: "GCOMP_CODEC" or "CODEC"; -1 when unknown */
static int param_index(const char *name) {
  const char *bare = strncmp(name, "GCOMP_", 6) == 0 ? name + 6 : name;
  for (int i = 0; i < GCOMP_P_COUNT_; i++)
    if (strcmp(defs[i].name + 6, bare) == 0) return i;
  return -1;
}

static int unknown_name(const char *name) {
  GCOMP_FAIL(GCOMP_ERR_INVALID, "'%s' is not a gcomp setting (gcomp-info -e lists them all)",
             name);
}

int gcomp_settings_set(gcomp_settings *s, const char *name, const char *value) {
  GCOMP_FAIL_IF(!s || !name, GCOMP_ERR_INVALID, "gcomp_config_set: NULL argument");
  int i = param_index(name);
  if (i < 0) return unknown_name(name);
  GCOMP_FAIL_IF(process_wide[i] == 1, GCOMP_ERR_INVALID,
                "%s is a setting of the whole process, not of one communicator: set it in the "
                "environment", defs[i].name);
  GCOMP_FAIL_IF(process_wide[i] == 2, GCOMP_ERR_INVALID,
                "%s is the launcher's (rank discovery and rendezvous), not a communicator's "
                "setting: gcomp_comm_init_oob and gcomp_comm_init_local take ranks as arguments",
                defs[i].name);
  int64_t v = 0;
  GCOMP_CHECK(parse_value(&defs[i], value ? value : defs[i].dflt, &v));
  char *text = NULL;
  GCOMP_FAIL_IF(value && !(text = strdup(value)), GCOMP_ERR_NOMEM, "copying %s", defs[i].name);
  free(s->text[i]);
  s->text[i] = text;
  s->ival[i] = v;
  return GCOMP_OK;
}

struct gcomp_config {
  gcomp_settings s;
};

gcomp_status gcomp_config_create(gcomp_config **out) {
  GCOMP_FAIL_IF(!out, GCOMP_ERR_INVALID, "gcomp_config_create: out is NULL");
  *out = NULL;
  GCOMP_CHECK(gcomp_init());
  gcomp_config *c = calloc(1, sizeof *c);
  GCOMP_FAIL_IF(!c, GCOMP_ERR_NOMEM, "allocating a config");
  int st = gcomp_settings_copy(&c->s, NULL);
  if (st < 0) {
    free(c);
    return gcomp_error_trace(st, __FILE__, __LINE__);
  }
  *out = c;
  return GCOMP_OK;
}

/* gcomp_config_set (reduce/config_set.c) once it has checked what only upper layers can */
int gcomp_config_set_value(gcomp_config *cfg, const char *name, const char *value) {
  GCOMP_FAIL_IF(!cfg, GCOMP_ERR_INVALID, "gcomp_config_set: cfg is NULL");
  return gcomp_settings_set(&cfg->s, name, value);
}

int gcomp_param_lookup(const char *name) { return name ? param_index(name) : -1; }

gcomp_status gcomp_config_get(const gcomp_config *cfg, const char *name, const char **value,
                              int *is_set) {
  GCOMP_FAIL_IF(!name || !value, GCOMP_ERR_INVALID, "gcomp_config_get: NULL argument");
  if (!cfg) (void)gcomp_init();   /* the text as given, even when a value was malformed */
  int i = param_index(name);
  if (i < 0) return unknown_name(name);
  const gcomp_settings *s = cfg && !process_wide[i] ? &cfg->s : &env;
  *value = gcomp_settings_str(s, (gcomp_param_id)i);
  if (is_set) *is_set = s->text[i] != NULL;
  return GCOMP_OK;
}

void gcomp_config_destroy(gcomp_config *cfg) {
  if (!cfg) return;
  gcomp_settings_free(&cfg->s);
  free(cfg);
}

const gcomp_settings *gcomp_config_settings(const gcomp_config *cfg) {
  return cfg ? &cfg->s : &env;
}

void gcomp_config_set_inherit(gcomp_config *cfg, const gcomp_inherit *in) { cfg->s.inherit = *in; }

const char *gcomp_param_name(gcomp_param_id id) { return defs[id].name; }

const char *gcomp_env_foreign(const char *name) {
  /* launchers' own variables (RANK, OMPI_COMM_WORLD_RANK, SLURM_PROCID, ...): read here so
   * that this file stays the only one that touches the environment */
  return getenv(name);
}

int gcomp_param_count(void) { return GCOMP_P_COUNT_; }

gcomp_status gcomp_param_describe(int i, gcomp_param_info *out) {
  (void)gcomp_init();   /* the values as the environment set them, and no race with init */
  GCOMP_FAIL_IF(i < 0 || i >= GCOMP_P_COUNT_ || !out, GCOMP_ERR_INVALID,
                "parameter index %d out of range [0, %d)", i, GCOMP_P_COUNT_);
  out->name = defs[i].name;
  out->type = type_name(defs[i].type);
  out->value = i == GCOMP_P_JOB_TOKEN && env.text[i] ? "(set, not shown)"
                                                     : gcomp_settings_str(&env, (gcomp_param_id)i);
  out->dflt = defs[i].dflt;
  out->help = defs[i].help;
  out->is_set = env.text[i] != NULL;
  return GCOMP_OK;
}
