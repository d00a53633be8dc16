/* Parser and printer for codec spec strings ("topk:ratio=0.01+ef+zstd:level=1"). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spec.h"

enum { MAX_SPEC = 512 };

/* Applies "k=v,k=v" through set(); the detail of a failure names the key. */
typedef int (*set_fn)(void *cfg, const char *key, const char *value);

static int apply_params(const char *what, char *params, set_fn set, void *cfg) {
  enum { MAX_SEEN = 32 };
  const char *seen[MAX_SEEN];
  int nseen = 0;
  for (char *kv = params;;) {
    char *comma = strchr(kv, ',');
    if (comma) *comma = '\0';
    /* strict: a stray ',' or a repeated key is a mistake, not something to guess about */
    GCOMP_FAIL_IF(!kv[0], GCOMP_ERR_INVALID, "%s: empty parameter (a stray ',')", what);
    char *eq = strchr(kv, '=');
    GCOMP_FAIL_IF(!eq, GCOMP_ERR_INVALID, "%s: parameter '%s' needs a value (%s=...)", what, kv, kv);
    *eq = '\0';
    GCOMP_FAIL_IF(!kv[0], GCOMP_ERR_INVALID, "%s: empty parameter name before '=%s'", what, eq + 1);
    GCOMP_FAIL_IF(!eq[1], GCOMP_ERR_INVALID, "%s: parameter '%s' has an empty value", what, kv);
    for (int i = 0; i < nseen; i++)
      GCOMP_FAIL_IF(strcmp(seen[i], kv) == 0, GCOMP_ERR_INVALID, "%s: parameter '%s' is given twice",
                    what, kv);
    if (nseen < MAX_SEEN) seen[nseen++] = kv;
    GCOMP_CHECK(set(cfg, kv, eq + 1));
    if (!comma) break;
    kv = comma + 1;
  }
  return GCOMP_OK;
}

typedef struct {
  const gcomp_kind *kind;
  gcomp_kind_cfg *cfg;
} kind_target;
static int kind_set(void *target, const char *key, const char *value) {
  kind_target *t = target;
  return t->kind->set(t->cfg, key, value);
}

typedef struct {
  const gcomp_stage *stage;
  gcomp_stage_cfg *cfg;
} stage_target;
static int stage_set(void *target, const char *key, const char *value) {
  stage_target *t = target;
  return t->stage->set(t->cfg, key, value);
}

static int ef_set(void *target, const char *key, const char *value) {
  gcomp_spec *s = target;
  if (strcmp(key, "dtype") == 0) return gcomp_kv_choice("ef", key, value, "fp32|bf16", &s->ef_dtype);
  if (strcmp(key, "mask") == 0) return gcomp_kv_choice("ef", key, value, "0|1", &s->ef_mask);
  GCOMP_FAIL_IF(strcmp(key, "momentum") != 0, GCOMP_ERR_INVALID,
                "ef: unknown parameter '%s' (valid: dtype, momentum, mask)", key);
  GCOMP_CHECK(gcomp_kv_double("ef", key, value, -1e300, 1e300, &s->ef_momentum));
  s->ef_momentum_given = 1;
  /* 1 would be a velocity that never decays: the sum of every gradient ever seen */
  GCOMP_FAIL_IF(!(s->ef_momentum >= 0.0 && s->ef_momentum < 1.0), GCOMP_ERR_INVALID,
                "ef: momentum='%s' is out of range [0, 1)", value);
  /* the velocity runs in fp32: 0.99999999 would be 1 there, and 1e-50 would be 0 */
  float f = (float)s->ef_momentum;
  GCOMP_FAIL_IF(s->ef_momentum > 0 && !(f > 0.0f && f < 1.0f), GCOMP_ERR_INVALID,
                "ef: momentum='%s' rounds to %g in fp32, where the velocity is kept", value,
                (double)f);
  return GCOMP_OK;
}

/* Momentum correction is for a sparsifier, whose unsent values wait in the residual. A kind
 * that sends every value every step has nothing to correct: with masking it would lose its
 * momentum altogether (silently plain SGD), without it the optimizer's momentum does the
 * same job. */
static int ef_check(gcomp_spec *s) {
  if (s->ef_momentum == 0) {
    GCOMP_FAIL_IF(s->ef_mask >= 0, GCOMP_ERR_INVALID,
                  "ef: mask=%d needs momentum=M (it masks the momentum of sent values)", s->ef_mask);
    s->ef_mask = 0;
    return GCOMP_OK;
  }
  GCOMP_FAIL_IF(s->kind->id != GCOMP_KIND_TOPK, GCOMP_ERR_INVALID,
                "ef: momentum=%g is momentum correction for sparsifying codecs (topk); '%s' "
                "sends every value every step: keep the momentum in the optimizer",
                s->ef_momentum, s->kind->name);
  if (s->ef_mask < 0) s->ef_mask = 1;   /* DGC as published */
  return GCOMP_OK;
}

static int parse_token(gcomp_spec *out, char *tok, int first) {
  char *colon = strchr(tok, ':');
  char *params = NULL;
  if (colon) {
    *colon = '\0';
    params = colon + 1;
    GCOMP_FAIL_IF(!*params, GCOMP_ERR_INVALID, "'%s:' is followed by no parameters", tok);
  }
  GCOMP_FAIL_IF(!*tok, GCOMP_ERR_INVALID,
                first ? "the codec name is empty (valid: %s)" : "empty stage name (valid: ef, %s)",
                first ? gcomp_kind_names() : gcomp_stage_names());
  if (first) {
    const gcomp_kind *k = gcomp_kind_find(tok);
    GCOMP_FAIL_IF(!k, GCOMP_ERR_INVALID, "unknown codec '%s' (valid: %s)", tok, gcomp_kind_names());
    out->kind = k;
    k->defaults(&out->cfg);
    kind_target t = {k, &out->cfg};
    if (params) GCOMP_CHECK(apply_params(k->name, params, kind_set, &t));
    GCOMP_CHECK(k->validate(&out->cfg));
    return GCOMP_OK;
  }
  if (strcmp(tok, "ef") == 0) {
    GCOMP_FAIL_IF(out->ef, GCOMP_ERR_INVALID, "'+ef' appears twice");
    GCOMP_FAIL_IF(out->stage, GCOMP_ERR_INVALID,
                  "'+ef' must come before the lossless stage '+%s'", out->stage->name);
    out->ef = 1;
    out->ef_dtype = GCOMP_EF_FP32;
    out->ef_momentum = 0;
    out->ef_mask = -1;
    if (params) GCOMP_CHECK(apply_params("ef", params, ef_set, out));
    return ef_check(out);
  }
  const gcomp_stage *st = gcomp_stage_find(tok);
  GCOMP_FAIL_IF(!st && gcomp_kind_find(tok), GCOMP_ERR_INVALID,
                "'%s' is a codec, not a stage: only one codec per spec, first", tok);
  GCOMP_FAIL_IF(!st, GCOMP_ERR_INVALID, "unknown stage '%s' (valid: ef, %s)", tok,
                gcomp_stage_names());
  GCOMP_FAIL_IF(out->stage, GCOMP_ERR_INVALID, "a second lossless stage '+%s' (one at most)", tok);
  out->stage = st;
  st->defaults(&out->stage_cfg);
  stage_target t = {st, &out->stage_cfg};
  if (params) GCOMP_CHECK(apply_params(st->name, params, stage_set, &t));
  return GCOMP_OK;
}

int gcomp_spec_parse(const char *text, gcomp_spec *out) {
  GCOMP_FAIL_IF(!text || !out, GCOMP_ERR_INVALID, "codec spec is NULL");
  size_t len = strlen(text);
  GCOMP_FAIL_IF(len == 0, GCOMP_ERR_INVALID, "codec spec is empty (valid codecs: %s)",
                gcomp_kind_names());
  GCOMP_FAIL_IF(len >= MAX_SPEC, GCOMP_ERR_INVALID, "codec spec is %zu characters long (limit %d)",
                len, MAX_SPEC - 1);
  for (const char *p = text; *p; p++)
    GCOMP_FAIL_IF(*p == ' ' || *p == '\t' || *p == '\n', GCOMP_ERR_INVALID,
                  "codec spec '%s' contains white space", text);
  char buf[MAX_SPEC];
  memcpy(buf, text, len + 1);
  memset(out, 0, sizeof *out);

  int status = GCOMP_OK;
  char *tok = buf;
  for (int first = 1; status == GCOMP_OK; first = 0) {
    char *plus = strchr(tok, '+');
    if (plus) *plus = '\0';
    status = parse_token(out, tok, first);
    if (!plus) break;
    tok = plus + 1;
  }
  if (status < 0) {
    char detail[900];
    snprintf(detail, sizeof detail, "%s", gcomp_last_error());
    GCOMP_FAIL(status, "codec spec '%s': %s", text, detail);
  }
  return GCOMP_OK;
}

size_t gcomp_spec_print(const gcomp_spec *spec, char *buf, size_t n) {
  char tmp[MAX_SPEC * 2], params[MAX_SPEC];
  size_t o = 0;
  spec->kind->print(&spec->cfg, params, sizeof params);
  o += (size_t)snprintf(tmp + o, sizeof tmp - o, "%s%s%s", spec->kind->name, params[0] ? ":" : "",
                        params);
  if (spec->ef && o < sizeof tmp)
    o += (size_t)snprintf(tmp + o, sizeof tmp - o, "+ef:dtype=%s",
                          spec->ef_dtype == GCOMP_EF_BF16 ? "bf16" : "fp32");
  /* momentum only when set: every spec without it keeps the canonical form (and the
   * residual files that store it) it always had */
  if (spec->ef && spec->ef_momentum > 0 && o < sizeof tmp) {
    char m[40];
    gcomp_dtoa(m, sizeof m, spec->ef_momentum);
    o += (size_t)snprintf(tmp + o, sizeof tmp - o, ",momentum=%s,mask=%d", m, spec->ef_mask);
  }
  if (spec->stage && o < sizeof tmp) {
    spec->stage->print(&spec->stage_cfg, params, sizeof params);
    o += (size_t)snprintf(tmp + o, sizeof tmp - o, "+%s%s%s", spec->stage->name,
                          params[0] ? ":" : "", params);
  }
  return (size_t)snprintf(buf, n, "%s", tmp);
}

void gcomp_spec_ident_of(const gcomp_spec *spec, gcomp_spec_ident *out) {
  memset(out, 0, sizeof *out);
  uint64_t *w = out->w;
  w[0] = spec->kind->id;
  spec->kind->ident(&spec->cfg, w + 1, &out->seed);
  w += 1 + GCOMP_KIND_WORDS;
  if (spec->ef) {
    w[0] = 1, w[1] = (uint64_t)spec->ef_dtype;
    if (spec->ef_momentum > 0)
      w[2] = gcomp_ident_dbl(spec->ef_momentum), w[3] = (uint64_t)spec->ef_mask;
  }
  w += 4;
  if (spec->stage) {
    /* every stage's parameters are gcomp_stage_common's (lossless.h) */
    const gcomp_stage_common *c = (const gcomp_stage_common *)(const void *)&spec->stage_cfg;
    w[0] = spec->stage->id, w[1] = (uint64_t)c->level, w[2] = (uint64_t)c->planes;
  }
}

uint64_t gcomp_spec_wire_id(const gcomp_spec_ident *id) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (int i = 0; i < GCOMP_IDENT_WORDS; i++)
    for (int b = 0; b < 64; b += 8) h = (h ^ ((id->w[i] >> b) & 0xff)) * 0x100000001b3ull;
  return h;
}

void gcomp_spec_none(gcomp_spec *out) {
  memset(out, 0, sizeof *out);
  out->kind = gcomp_kind_find("none");
  out->kind->defaults(&out->cfg);
}
