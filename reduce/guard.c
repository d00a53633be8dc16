/* The drift guard (GCOMP_GUARD=every=N,budget=E[,backoff=M]): a stage of the call
 * (call.c) that checks compressed results against exact ones while a job runs.
 *
 * Its state is kept per tensor size (the call's count of fp32 values), not per caller's
 * key: whether a call is checked, and whether it runs in backoff, decides whether the
 * guard's collectives run and which algorithm the call takes, so every rank must decide
 * alike from what every rank has. Keys are each rank's own: the shim's are buffer
 * addresses, and one rank may reuse a buffer for two tensors where another has two. The
 * calls' order and sizes are what collectives share. Tensors of one size share a schedule
 * and (with error feedback) running sums; the caller's key is kept only to name them.
 *
 *  - Without error feedback, on the first and every Nth compressed call of a size the input
 *    is copied before the call and reduced again, exact (fp32, dense, gcomp_call_internal);
 *    the error is ||compressed - exact|| / ||exact|| over the whole tensor.
 *  - With error feedback a single call's error is large by design; what it promises is
 *    that the running sum of the results tracks the running sum of the gradients (their
 *    difference is the residual, which stays bounded). Each compressed call adds its input
 *    into sum_in (this rank's) and its result into sum_out, on a fixed sample of the tensor
 *    (all of it up to 16 Ki values: see sample_layout); every Nth call a copy of sum_in is
 *    reduced exact and compared with sum_out. The sums run from the size's first call (or
 *    the last fallback), not from the previous check: top-k lags about 1/ratio calls, so
 *    over a window of 100 calls top-k 1% + EF is off by 0.2-1.4 on the harness's problems,
 *    and since the first call by 0.007-0.22.
 *  - Over budget (or not a number): the call returns the exact result (its input, copied
 *    at every checked call, reduced exact; with error feedback the codec's residuals are
 *    cleared too: they hold mass the running sums found undelivered, and every size's
 *    running sums start again: which codec object a rank passes for which tensor is its
 *    own affair), and the size runs uncompressed for its next M calls; then its count
 *    starts again (a check first).
 *
 * The error's two sums are taken by each rank over its share of the tensor and exchanged
 * in one MAX allreduce of a slot per rank, so every rank adds the same numbers in the same
 * order and takes the same decision (ranks that decided differently would disagree on the
 * next call's algorithm). The guard's exchanges cost no wire bytes in the call's figures;
 * their time is the guard's (gcomp_comm_get_guard) and inside the call's total. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec_impl.h"
#include "comm_impl.h"

/* ---- the setting ---------------------------------------------------------------------- */
int gcomp_guard_parse(const char *text, gcomp_guard_cfg *out) {
  *out = (gcomp_guard_cfg){0, GCOMP_GUARD_BUDGET, GCOMP_GUARD_BACKOFF};
  if (!text[0] || !strcmp(text, "off") || !strcmp(text, "0")) return GCOMP_OK;
  out->every = GCOMP_GUARD_EVERY;
  if (!strcmp(text, "on") || !strcmp(text, "1")) return GCOMP_OK;
  char buf[256];
  GCOMP_FAIL_IF(strlen(text) >= sizeof buf, GCOMP_ERR_INVALID, "GCOMP_GUARD: value too long");
  strcpy(buf, text);
  for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    char *eq = strchr(tok, '=');
    GCOMP_FAIL_IF(!eq, GCOMP_ERR_INVALID,
                  "GCOMP_GUARD: '%s' is not key=value (every=N,budget=E[,backoff=M], or off)", tok);
    *eq = '\0';
    const char *v = eq + 1;
    uint64_t u;
    if (!strcmp(tok, "every")) {
      GCOMP_CHECK(gcomp_kv_u64("GCOMP_GUARD", tok, v, 1, 1u << 30, &u));
      out->every = (int)u;
    } else if (!strcmp(tok, "backoff")) {
      GCOMP_CHECK(gcomp_kv_u64("GCOMP_GUARD", tok, v, 0, 1u << 30, &u));
      out->backoff = (int)u;
    } else if (!strcmp(tok, "budget")) {
      GCOMP_CHECK(gcomp_kv_double("GCOMP_GUARD", tok, v, 0, 1e300, &out->budget));
      GCOMP_FAIL_IF(!(out->budget > 0), GCOMP_ERR_INVALID,
                    "GCOMP_GUARD: budget='%s' must be above 0", v);
    } else {
      GCOMP_FAIL(GCOMP_ERR_INVALID,
                 "GCOMP_GUARD: unknown key '%s' (valid: every, budget, backoff)", tok);
    }
  }
  return GCOMP_OK;
}

/* ---- state per size ------------------------------------------------------------------- */
typedef struct {
  uint64_t key;           /* the size: the call's count */
  uint64_t user_key;      /* this rank's key of the size's last call: for logs and stats */
  int used;
  size_t count;
  uint64_t seen;          /* compressed calls since the count (re)started */
  int backoff_left;       /* uncompressed calls still to run */
  uint64_t checks, fallbacks;
  double last_error, max_error;
  /* error feedback: running sums over a fixed sample of the tensor (SAMPLE_BLOCK values
   * every `stride` blocks, nsample in all), from the size's first call or last fallback */
  size_t stride, nsample;
  float *sum_in, *sum_out;   /* [nsample] */
  float *vel;             /* with ef momentum m: this rank's u = m u + grad, what it feeds */
  float momentum;
  const gcomp_codec *ef_codec;   /* the last call's codec with error feedback, or NULL */
} guard_key;

struct gcomp_guard {
  guard_key *keys;        /* open addressing, power-of-two capacity */
  size_t cap, used;
  float *exact;           /* the input of a checked call, then its exact sum */
  size_t exact_cap;
  float *sample;          /* a size's sampled running sum of inputs, then its exact sum */
  size_t sample_cap;
  double *slots;          /* 2 per rank: the error's sums */
  gcomp_guard_stats st;   /* under comm->mu */
};

static size_t hash_key(uint64_t key) {
  key ^= key >> 33, key *= 0xff51afd7ed558ccdull, key ^= key >> 33;
  return (size_t)key;
}

static guard_key *find(const gcomp_guard *g, uint64_t key) {
  if (!g || !g->cap) return NULL;
  for (size_t j = hash_key(key) & (g->cap - 1); g->keys[j].used; j = (j + 1) & (g->cap - 1))
    if (g->keys[j].key == key) return &g->keys[j];
  return NULL;
}

static int insert(gcomp_guard *g, uint64_t key, guard_key **out) {
  if ((g->used + 1) * 2 > g->cap) {
    size_t cap = g->cap ? g->cap * 2 : 16;
    guard_key *keys = calloc(cap, sizeof *keys);
    GCOMP_FAIL_IF(!keys, GCOMP_ERR_NOMEM, "guard: a table of %zu keys", cap);
    for (size_t i = 0; i < g->cap; i++) {
      if (!g->keys[i].used) continue;
      size_t j = hash_key(g->keys[i].key) & (cap - 1);
      while (keys[j].used) j = (j + 1) & (cap - 1);
      keys[j] = g->keys[i];
    }
    free(g->keys);
    g->keys = keys, g->cap = cap;
  }
  size_t j = hash_key(key) & (g->cap - 1);
  while (g->keys[j].used) j = (j + 1) & (g->cap - 1);
  g->keys[j] = (guard_key){.key = key, .used = 1};
  g->used++;
  *out = &g->keys[j];
  return GCOMP_OK;
}

static int reserve(float **p, size_t *cap, size_t count) {
  if (*cap >= count) return GCOMP_OK;
  float *q = realloc(*p, count * sizeof *q);
  GCOMP_FAIL_IF(!q, GCOMP_ERR_NOMEM, "guard: a copy of %zu values", count);
  *p = q, *cap = count;
  return GCOMP_OK;
}

static void restart_window(guard_key *k) {
  if (k->sum_in) memset(k->sum_in, 0, k->nsample * sizeof(float));
  if (k->sum_out) memset(k->sum_out, 0, k->nsample * sizeof(float));
  k->seen = 0;
}

/* The running sums cover blocks 0, stride, 2 stride, ... of SAMPLE_BLOCK values, at most
 * SAMPLE_MAX values in all: two passes over the whole tensor each call cost a quarter of a
 * top-k 1% call's time on 4 MiB; the sample (16 pages) 0.28 ms. */
enum { SAMPLE_BLOCK = 1024, SAMPLE_MAX = 16384 };
static void sample_layout(guard_key *k) {
  size_t blocks = (k->count + SAMPLE_BLOCK - 1) / SAMPLE_BLOCK;
  size_t want = SAMPLE_MAX / SAMPLE_BLOCK;
  k->stride = blocks > want ? (blocks + want - 1) / want : 1;
  k->nsample = 0;
  for (size_t b = 0; b < blocks; b += k->stride) {
    size_t len = k->count - b * SAMPLE_BLOCK;
    k->nsample += len < SAMPLE_BLOCK ? len : SAMPLE_BLOCK;
  }
}

/* acc += the sampled values of x; with a velocity (ef momentum m), u = m u + x on the
 * sample first and acc += u */
static void sample_add(const guard_key *k, float *restrict acc, const float *restrict x,
                       float *restrict vel, float m) {
  size_t j = 0;
  for (size_t o = 0; o < k->count; o += k->stride * SAMPLE_BLOCK) {
    size_t len = k->count - o < SAMPLE_BLOCK ? k->count - o : SAMPLE_BLOCK;
    if (vel) {
      for (size_t i = 0; i < len; i++) {
        vel[j + i] = m * vel[j + i] + x[o + i];
        acc[j + i] += vel[j + i];
      }
    } else {
      for (size_t i = 0; i < len; i++) acc[j + i] += x[o + i];
    }
    j += len;
  }
}

static void drop_sums(guard_key *k) {
  free(k->sum_in), free(k->sum_out), free(k->vel);
  k->sum_in = k->sum_out = k->vel = NULL;
}

void gcomp_guard_free(gcomp_comm *comm) {
  gcomp_guard *g = comm->guard;
  if (!g) return;
  for (size_t i = 0; i < g->cap; i++) drop_sums(&g->keys[i]);
  free(g->keys), free(g->exact), free(g->sample), free(g->slots), free(g);
  comm->guard = NULL;
}

gcomp_status gcomp_comm_get_guard(const gcomp_comm *comm, gcomp_guard_stats *out) {
  GCOMP_FAIL_IF(!comm || !out, GCOMP_ERR_INVALID, "gcomp_comm_get_guard: NULL argument");
  gcomp_guard_stats none = {0};
  pthread_mutex_t *mu = (pthread_mutex_t *)&comm->mu;
  pthread_mutex_lock(mu);
  none.every = comm->agreed.guard.every;
  none.budget = comm->agreed.guard.budget;
  none.backoff = comm->agreed.guard.backoff;
  const gcomp_guard_stats *src = comm->guard ? &comm->guard->st : &none;
  int st = GCOMP_SIZED_COPY(out, src, gcomp_guard_stats, guard_s, "gcomp_comm_get_guard");
  pthread_mutex_unlock(mu);
  return st;
}

/* ---- the call's stage ----------------------------------------------------------------- */
/* Before planning: a size in backoff runs uncompressed */
void gcomp_guard_route(gcomp_comm *comm, gcomp_call *call) {
  guard_key *k = comm->agreed.guard.every && call->wt == GCOMP_FLOAT32
                     ? find(comm->guard, call->count) : NULL;
  if (!k || k->backoff_left <= 0) return;
  k->backoff_left--;
  call->uncompressed = 1;
  pthread_mutex_lock(&comm->mu);
  comm->guard->st.backoff_calls++;
  pthread_mutex_unlock(&comm->mu);
}

/* The codec with error feedback among those the call runs, or NULL; *momentum its ef
 * momentum, *masked 1 with momentum factor masking */
static const gcomp_codec *ef_codec_of(const gcomp_call *call, float *momentum, int *masked) {
  const gcomp_codec *c[2] = {call->ci && call->algo->compressed ? call->codec : NULL, call->intra};
  for (int i = 0; i < 2; i++) {
    gcomp_codec_info info = {.struct_size = sizeof info};
    if (c[i] && gcomp_codec_describe(c[i], &info) == GCOMP_OK && info.error_feedback) {
      *momentum = (float)info.ef_momentum, *masked = info.ef_momentum > 0 && info.ef_mask;
      return c[i];
    }
  }
  *momentum = 0, *masked = 0;
  return NULL;
}

static void add_time(gcomp_comm *comm, uint64_t t0) {
  double s = (double)(gcomp_now_ns() - t0) * 1e-9;
  pthread_mutex_lock(&comm->mu);
  comm->guard->st.guard_s += s;
  pthread_mutex_unlock(&comm->mu);
}

int gcomp_guard_before(gcomp_comm *comm, gcomp_call *call) {
  const gcomp_guard_cfg *cfg = &comm->agreed.guard;
  call->guard_key = NULL, call->guard_check = 0;
  int lossy = (call->ci && call->algo->compressed) || call->intra;
  if (!cfg->every || call->uncompressed || !lossy || call->wt != GCOMP_FLOAT32) return GCOMP_OK;
  if (!comm->guard) {
    gcomp_guard *g = calloc(1, sizeof *g);
    double *slots = calloc(2 * (size_t)comm->t->size, sizeof *slots);
    if (!g || !slots) free(g), free(slots);
    GCOMP_FAIL_IF(!g || !slots, GCOMP_ERR_NOMEM, "guard: its state");
    g->slots = slots;
    g->st = (gcomp_guard_stats){.every = cfg->every, .budget = cfg->budget,
                                .backoff = cfg->backoff};
    comm->guard = g;
  }
  gcomp_guard *g = comm->guard;
  guard_key *k = find(g, call->count);
  if (!k) GCOMP_CHECK(insert(g, call->count, &k));
  k->user_key = call->key;
  float m;
  int masked;
  const gcomp_codec *ef = ef_codec_of(call, &m, &masked);
  /* momentum factor masking zeroes the velocity where the codec sent: only the codec knows
   * that velocity, so there is nothing exact to hold its running sum against */
  if (masked) return GCOMP_OK;
  /* start over when the kind of check changes: from the codec's spec, which every rank
   * shares (not from the codec object, which is each rank's own) */
  if (k->count != call->count || !k->ef_codec != !ef || k->momentum != m) {
    drop_sums(k);
    k->count = call->count, k->momentum = m, k->seen = 0;
    sample_layout(k);
  }
  k->ef_codec = ef;
  size_t n = call->count, ns = k->nsample;
  const float *in = call->sendbuf;
  if (ef && !k->sum_in) {
    k->sum_in = calloc(ns, sizeof(float)), k->sum_out = calloc(ns, sizeof(float));
    if (m > 0) k->vel = calloc(ns, sizeof(float));
    if (!k->sum_in || !k->sum_out || (m > 0 && !k->vel)) drop_sums(k);
    GCOMP_FAIL_IF(!k->sum_in, GCOMP_ERR_NOMEM, "guard: running sums of %zu values", ns);
  }
  k->seen++;
  call->guard_key = k;
  uint64_t t0 = gcomp_now_ns();
  /* with error feedback, what the codec feeds it (u = m u + grad with momentum) */
  if (ef) sample_add(k, k->sum_in, in, k->vel, m);
  call->guard_check = ef ? k->seen % (uint64_t)cfg->every == 0
                         : (k->seen - 1) % (uint64_t)cfg->every == 0;
  if (call->guard_check) {   /* the input, for the exact result */
    GCOMP_CHECK(reserve(&g->exact, &g->exact_cap, n));
    memcpy(g->exact, in, n * sizeof(float));
  }
  add_time(comm, t0);
  return GCOMP_OK;
}

/* ||c - e|| / ||e|| over the tensor, the same on every rank: each rank's share of the two
 * sums (where the exact value is finite), exchanged a slot per rank */
static int rel_error(gcomp_comm *comm, const float *c, const float *e, size_t count, double *err) {
  int n = comm->t->size, me = comm->t->rank;
  double *s = comm->guard->slots;
  size_t off, len;
  gcomp_chunk(count, n, me, &off, &len);
  double d2 = 0, e2 = 0;
  for (size_t i = off; i < off + len; i++) {
    if (!isfinite(e[i])) continue;
    double d = (double)c[i] - (double)e[i];
    d2 += d * d, e2 += (double)e[i] * (double)e[i];
  }
  memset(s, 0, 2 * (size_t)n * sizeof *s);
  s[2 * me] = d2, s[2 * me + 1] = e2;   /* >= 0 or NaN: the MAX keeps each rank's own */
  if (n > 1)
    GCOMP_CHECK(gcomp_call_internal(comm, s, 2 * (size_t)n, GCOMP_FLOAT64, GCOMP_MAX, NULL, 0));
  d2 = e2 = 0;
  for (int r = 0; r < n; r++) d2 += s[2 * r], e2 += s[2 * r + 1];
  *err = e2 > 0 ? sqrt(d2 / e2) : d2 > 0 ? INFINITY : d2 == 0 ? 0 : NAN;
  return GCOMP_OK;
}

/* The residuals of the codec that fell back are dropped: clear them, and restart every
 * running sum, whichever codec object fed it (a rank's choice of objects is its own: one
 * rank may feed two sizes through one codec, another through two) */
static void clear_residuals(gcomp_comm *comm, gcomp_call *call, const gcomp_codec *ef) {
  gcomp_codec_reset_residuals((gcomp_codec *)ef);
  if (ef == call->codec && call->ci && call->ci->second)
    gcomp_codec_reset_residuals(call->ci->second);
  if (ef == call->intra && call->intra_ci && call->intra_ci->second)
    gcomp_codec_reset_residuals(call->intra_ci->second);
  gcomp_guard *g = comm->guard;
  for (size_t i = 0; i < g->cap; i++)
    if (g->keys[i].used && g->keys[i].ef_codec) {
      restart_window(&g->keys[i]);
      if (g->keys[i].vel) memset(g->keys[i].vel, 0, g->keys[i].nsample * sizeof(float));
    }
}

static void note(gcomp_comm *comm, const guard_key *k, double err, int over) {
  const gcomp_guard_cfg *cfg = &comm->agreed.guard;
  gcomp_guard_stats *st = &comm->guard->st;
  pthread_mutex_lock(&comm->mu);
  st->checks++;
  st->last_error = err;
  if (err > st->max_error || isnan(err)) st->max_error = err;
  if (over) {
    st->fallbacks++;
    st->last_fallback_key = k->user_key;
    st->last_fallback_error = err;
  }
  pthread_mutex_unlock(&comm->mu);
  if (comm->t->rank != 0) return;
  if (!over) {
    GCOMP_INFO(GCOMP_SUB_REDUCE, "guard: %zu values (key %llu): %s error %.3g within the "
               "budget %g at its check %llu", k->count, (unsigned long long)k->user_key,
               k->ef_codec ? "running-sum" : "relative", err, cfg->budget,
               (unsigned long long)k->checks);
    return;
  }
  /* every fallback at info level; the first of a size and each power of two as warnings */
  int loud = (k->fallbacks & (k->fallbacks - 1)) == 0;
  GCOMP_LOG(loud ? GCOMP_LOG_WARN : GCOMP_LOG_INFO, GCOMP_SUB_REDUCE,
            "guard: %zu values (key %llu): %s error %.3g over the budget %g at its check %llu: "
            "this call returns the exact result, the size runs uncompressed for %d calls "
            "(fallback %llu of this size, %llu in all)",
            k->count, (unsigned long long)k->user_key, k->ef_codec ? "running-sum" : "relative",
            err, cfg->budget, (unsigned long long)k->checks, cfg->backoff,
            (unsigned long long)k->fallbacks, (unsigned long long)st->fallbacks);
}

int gcomp_guard_after(gcomp_comm *comm, gcomp_call *call) {
  guard_key *k = call->guard_key;
  if (!k) return GCOMP_OK;
  gcomp_guard *g = comm->guard;
  size_t n = call->count;
  float *work = (float *)(void *)call->work;
  uint64_t t0 = gcomp_now_ns();
  if (k->ef_codec) sample_add(k, k->sum_out, work, NULL, 0);
  if (!call->guard_check) {
    if (k->ef_codec) add_time(comm, t0);
    return GCOMP_OK;
  }
  double err = 0;
  if (k->ef_codec) {   /* sum_in stays this rank's: its exact sum goes to a copy */
    size_t ns = k->nsample;
    GCOMP_CHECK(reserve(&g->sample, &g->sample_cap, ns));
    memcpy(g->sample, k->sum_in, ns * sizeof(float));
    GCOMP_CHECK(gcomp_call_internal(comm, g->sample, ns, GCOMP_FLOAT32, GCOMP_SUM, NULL, 0));
    GCOMP_CHECK(rel_error(comm, k->sum_out, g->sample, ns, &err));
  } else {
    GCOMP_CHECK(gcomp_call_internal(comm, g->exact, n, GCOMP_FLOAT32, GCOMP_SUM, NULL, 0));
    GCOMP_CHECK(rel_error(comm, work, g->exact, n, &err));
  }
  k->checks++;
  k->last_error = err;
  if (err > k->max_error || isnan(err)) k->max_error = err;
  int over = !(err <= comm->agreed.guard.budget);
  if (over) {
    if (k->ef_codec) {   /* the call's own exact sum; what the residuals held is dropped */
      GCOMP_CHECK(gcomp_call_internal(comm, g->exact, n, GCOMP_FLOAT32, GCOMP_SUM, NULL, 0));
      clear_residuals(comm, call, k->ef_codec);
    }
    memcpy(work, g->exact, n * sizeof(float));
    call->nonfinite_known = 0;   /* another result: the "nonfinite" stage counts it */
    k->fallbacks++;
    k->backoff_left = comm->agreed.guard.backoff;
  }
  note(comm, k, err, over);
  if (over) restart_window(k);
  add_time(comm, t0);
  return GCOMP_OK;
}

/* ---- GCOMP_STATS ---------------------------------------------------------------------- */
/* A number, or null for none (JSON has no NaN or Inf) */
static void jnum(FILE *f, const char *name, double v) {
  if (isfinite(v)) fprintf(f, ", \"%s\": %.6g", name, v);
  else fprintf(f, ", \"%s\": null", name);
}

/* `,"guard": {...}` inside the stats object: the setting, the totals and every size checked
 * (the first 1024), each with this rank's key of its last call */
void gcomp_guard_write(const gcomp_comm *comm, FILE *f) {
  const gcomp_guard_cfg *cfg = &comm->agreed.guard;
  if (!cfg->every) return;
  const gcomp_guard *g = comm->guard;
  gcomp_guard_stats none = {0};
  const gcomp_guard_stats *s = g ? &g->st : &none;
  fprintf(f,
          ",\n \"guard\": {\"every\": %d, \"budget\": %g, \"backoff\": %d, \"checks\": %llu, "
          "\"fallbacks\": %llu, \"backoff_calls\": %llu, \"guard_s\": %.6f",
          cfg->every, cfg->budget, cfg->backoff, (unsigned long long)s->checks,
          (unsigned long long)s->fallbacks, (unsigned long long)s->backoff_calls, s->guard_s);
  jnum(f, "max_error", s->max_error);
  fprintf(f, ", \"keys\": [");
  int written = 0;
  for (size_t i = 0; g && i < g->cap && written < 1024; i++) {
    const guard_key *k = &g->keys[i];
    if (!k->used || !k->checks) continue;
    fprintf(f, "%s{\"key\": %llu, \"count\": %zu, \"running_sum\": %d, \"checks\": %llu, "
               "\"fallbacks\": %llu",
            written++ ? ", " : "", (unsigned long long)k->user_key, k->count, k->ef_codec != NULL,
            (unsigned long long)k->checks, (unsigned long long)k->fallbacks);
    jnum(f, "last_error", k->last_error);
    jnum(f, "max_error", k->max_error);
    fprintf(f, "}");
  }
  fprintf(f, "]}");
}
