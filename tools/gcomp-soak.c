/* gcomp-soak: random sequences of allreduce calls, every element of every result checked.
 *
 *   gcomp-run -n N [--nodes M] -- gcomp-soak [--seed S] [--calls C] [--from K]
 *       [--bytes TOTAL] [--max-bytes B] [--stall-ms MS] [--verbose] [--dry-run]
 *       [--corrupt K] [--blocking]
 *
 * Every rank draws the same sequence of calls from the seed: payloads of 0 to --max-bytes
 * (log-uniform, odd counts included), every dtype and op, in place and out of place,
 * blocking and non-blocking (groups of up to 4 outstanding gcomp_iallreduce requests,
 * completed in issue order, reverse order or by polling gcomp_request_test), with and
 * without a codec. The algorithm is the job's GCOMP_ALGO (one per run: the API chooses it
 * per communicator); GCOMP_CHUNK_BYTES, GCOMP_SEGMENT_BYTES and GCOMP_CODEC_MIN_BYTES come
 * from the environment too. GCOMP_CODEC and GCOMP_INTRA_CODEC must be unset (calls without a
 * codec are checked as exact fp32).
 *
 * Inputs are chosen so that the exact result is computable: integers small enough that
 * every partial sum is exact in the type the library reduces in (for the cast codecs: in
 * bf16 / fp16 too, so a compressed call must be exact as well), products of 1, -1 and 2.
 * Every rank checks every element: SUM, MIN, MAX and PROD bitwise (16-bit types rounded
 * once to nearest even, as the library promises), AVG of floats within 2^-22 (float32),
 * 2^-51 (float64), 2^-7 (bf16), 2^-10 (fp16) relative (one division, one narrowing: about
 * an ulp), AVG of integers exactly (truncated).
 * Top-k codecs: rank r sends c[i] * 2^r, so every rank orders its values alike; each result
 * must be c[i] * m with m an integer in [0, 2^size) (the sum over the ranks that sent i),
 * bitwise equal on every rank; for the sparse algorithm with exact=1 (the same k indices
 * on every rank) m must be 2^size - 1 on exactly the k largest |c[i]| (ties: lower index) and
 * 0 elsewhere; ratio=1 must be exact. quant:bits=8, whose results are not exact: within
 * the bound its grid gives two quantisations (see check_bounded), bitwise equal on every
 * rank. Out-of-place calls must leave sendbuf untouched.
 * The input repeats with a period of at most 131071 elements (a prime), so a result moved
 * by a multiple of that period would go unseen.
 *
 * The total payload is bounded by --bytes: once a call would pass it, it and the calls
 * after it shrink to at most 4096 elements, so the call count stays what was asked. A call
 * (or a group of non-blocking calls) not finished within --stall-ms is a stall: the rank
 * prints it and exits 3. A wrong element: the rank prints the seed, the call index, its
 * parameters and the first wrong element, and exits 1. `--from K` replays from call K (the
 * group holding it): the same parameters and data, on a fresh communicator. `--corrupt K`
 * damages call K's result on the last rank after the call, before the checks: the run must
 * then fail naming call K (the checks' own test).
 */
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gcomp.h"

enum { MAX_GROUP = 4, SMALL_COUNT = 4096 };
#define PERIOD_MAX 131071u   /* a prime: the input's period at most */

/* The codecs the soak passes. kind decides the inputs: the casts need values whose sums
 * every stage represents exactly; top-k gets the scaled inputs described above. Eight at
 * most: a communicator plans for at most 8 codec specs in its life (GCOMP_ERR_UNSUPPORTED
 * past that, reduce/codec_plan.c). */
typedef enum { K_NONE, K_BF16, K_FP16, K_TOPK, K_QUANT } codec_kind;
static const struct {
  const char *spec;
  codec_kind kind;
  int exact_k;   /* topk exact=1 */
  int all;       /* topk ratio=1: every value sent */
  double ratio;
  int bits;      /* quant */
} codec_table[] = {
    {"none", K_NONE, 0, 0, 0, 0},
    {"bf16", K_BF16, 0, 0, 0, 0},
    {"fp16", K_FP16, 0, 0, 0, 0},
    {"bf16+zstd", K_BF16, 0, 0, 0, 0},
    {"topk:ratio=0.01,exact=1", K_TOPK, 1, 0, 0.01, 0},
    {"topk:ratio=0.1+ef", K_TOPK, 0, 0, 0.1, 0},
    {"topk:ratio=1", K_TOPK, 0, 1, 1, 0},
    {"quant:bits=8", K_QUANT, 0, 0, 0, 8},
};
enum { NCODECS = sizeof codec_table / sizeof *codec_table };

static const char *dtype_name[] = {"float32", "float64", "int32", "int64", "bfloat16", "float16"};
static const size_t dtype_size[] = {4, 8, 4, 8, 2, 2};
static const char *op_name[] = {"sum", "avg", "min", "max", "prod"};

typedef struct {
  uint64_t index;
  size_t count;
  gcomp_dtype dtype;
  gcomp_op op;
  int codec;       /* index in codec_table, -1: none */
  int inplace;
  int group;       /* 0: blocking; else this call's group has `group` non-blocking calls */
  int first;       /* first call of its group (or blocking) */
  int finish;      /* group completion: 0 issue order, 1 reverse, 2 polling test */
  uint64_t seed;   /* the data's */
} call_params;

/* ---- random numbers ------------------------------------------------------------------- */
static uint64_t mix64(uint64_t x) {   /* splitmix64's finaliser */
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
static uint64_t next(uint64_t *s) { return mix64(*s += 0x9e3779b97f4a7c15ull); }
static uint64_t below(uint64_t *s, uint64_t n) { return n ? next(s) % n : 0; }
static double unit(uint64_t *s) { return (double)(next(s) >> 11) * 0x1p-53; }

/* ---- the sequence ---------------------------------------------------------------------- */
typedef struct {
  uint64_t seed, budget, used, max_bytes;
  int left_in_group, group, finish;
  int blocking_only;   /* --blocking: the same calls, none of them non-blocking */
} planner;

/* Draws call k; must be called for k = 0, 1, 2, ... in order (grouping and the budget
 * depend on the calls before). */
static void plan_call(planner *p, uint64_t k, call_params *c) {
  uint64_t s = mix64(p->seed ^ mix64(k + 1));
  memset(c, 0, sizeof *c);
  c->index = k;
  c->seed = next(&s);
  /* drawn for every call, used by a group's first: the other draws stay the same whatever
   * the grouping (--blocking runs the same calls) */
  uint64_t nb = below(&s, 10), g = 1 + below(&s, MAX_GROUP), fin = below(&s, 3);
  if (p->left_in_group == 0) {
    p->group = nb < 4 ? (int)g : 0;
    p->left_in_group = p->group ? p->group : 1;
    p->finish = (int)fin;
    c->first = 1;
  }
  c->group = p->blocking_only ? 0 : p->group;
  c->first |= p->blocking_only;
  c->finish = p->finish;
  p->left_in_group--;
  /* float32 most often: it is the type codecs apply to */
  static const gcomp_dtype dts[] = {GCOMP_FLOAT32, GCOMP_FLOAT32, GCOMP_FLOAT32, GCOMP_FLOAT64,
                                    GCOMP_INT32,   GCOMP_INT64,   GCOMP_BFLOAT16, GCOMP_FLOAT16};
  c->dtype = dts[below(&s, sizeof dts / sizeof *dts)];
  static const gcomp_op ops[] = {GCOMP_SUM, GCOMP_SUM, GCOMP_SUM, GCOMP_AVG,
                                 GCOMP_MIN, GCOMP_MAX, GCOMP_PROD};
  c->op = ops[below(&s, sizeof ops / sizeof *ops)];
  c->inplace = (int)below(&s, 2);
  c->codec = -1;
  if (c->dtype == GCOMP_FLOAT32 && below(&s, 3) != 0) {
    c->codec = (int)below(&s, NCODECS);
    if (codec_table[c->codec].kind == K_TOPK) c->op = GCOMP_SUM;
    else if (c->op != GCOMP_AVG) c->op = GCOMP_SUM;
  }
  /* payload: 0 B sometimes, else log-uniform in [1 B, max_bytes], often made odd */
  size_t ds = dtype_size[c->dtype];
  uint64_t cap = p->max_bytes;
  if (p->group) cap = cap / 4 > 4096 ? cap / 4 : cap;   /* several outstanding: smaller */
  if (below(&s, 20) == 0) {
    c->count = 0;
  } else {
    double lb = unit(&s) * log2((double)cap);
    uint64_t bytes = (uint64_t)exp2(lb);
    c->count = (size_t)(bytes / ds);
    if (c->count == 0 || below(&s, 3) == 0) c->count |= 1;
    if ((uint64_t)c->count * ds > cap) c->count = (size_t)(cap / ds);
  }
  if (p->used + (uint64_t)c->count * ds > p->budget) c->count = (size_t)below(&s, SMALL_COUNT + 1);
  p->used += (uint64_t)c->count * ds;
}

static void describe(const call_params *c, char *buf, size_t n) {
  snprintf(buf, n, "count=%zu dtype=%s op=%s %s codec=%s %s", c->count, dtype_name[c->dtype],
           op_name[c->op], c->inplace ? "in-place" : "out-of-place",
           c->codec < 0 ? "(none)" : codec_table[c->codec].spec,
           c->group ? (c->finish == 0 ? "non-blocking(wait in order)"
                       : c->finish == 1 ? "non-blocking(wait reversed)"
                                        : "non-blocking(test polling)")
                    : "blocking");
}

/* ---- inputs and expectations ----------------------------------------------------------- */
/* Rank r's element i is value(a[(i + off[r]) % period]) (times 2^r for top-k): integers
 * (units of 2^-10 for float64) within +-range, chosen so every partial sum is exact. */
typedef struct {
  const call_params *c;
  int size;
  size_t period;
  int64_t *a;        /* period entries */
  size_t *off;       /* per rank */
  int topk;
  double scale;      /* value of one unit: 2^-10 for float64 sums, else 1 */
} call_data;

static int64_t value_range(const call_params *c, int size) {
  if (c->codec >= 0) {
    switch (codec_table[c->codec].kind) {
    case K_BF16: return 256 / size;    /* shard sums <= 256: exact in bf16 */
    case K_FP16: return 2048 / size;   /* <= 2048: exact in fp16 without scaling */
    case K_TOPK: return 15;
    case K_QUANT: return 256 / size;
    case K_NONE: break;
    }
  }
  switch (c->dtype) {
  case GCOMP_FLOAT32: return (1 << 23) / size;
  case GCOMP_FLOAT64: return (int64_t)(((uint64_t)1 << 50) / (uint64_t)size);
  case GCOMP_INT32: return (1 << 30) / size;
  case GCOMP_INT64: return (int64_t)(((uint64_t)1 << 62) / (uint64_t)size);
  case GCOMP_BFLOAT16: return 128;    /* exact in bf16; sums exact in fp32, rounded once */
  case GCOMP_FLOAT16: return 1024;
  }
  return 1;
}

static int make_data(call_data *d, const call_params *c, int size) {
  memset(d, 0, sizeof *d);
  d->c = c, d->size = size;
  d->period = c->count < PERIOD_MAX ? c->count : PERIOD_MAX;
  if (d->period == 0) d->period = 1;
  d->topk = c->codec >= 0 && codec_table[c->codec].kind == K_TOPK;
  d->scale = c->dtype == GCOMP_FLOAT64 && c->op != GCOMP_PROD ? 0x1p-10 : 1;
  d->a = malloc(d->period * sizeof *d->a);
  d->off = malloc((size_t)size * sizeof *d->off);
  if (!d->a || !d->off) return -1;
  uint64_t s = c->seed;
  int64_t range = value_range(c, size);
  for (size_t j = 0; j < d->period; j++) {
    if (c->op == GCOMP_PROD) {
      uint64_t v = below(&s, 4);
      d->a[j] = v == 0 ? -1 : v == 1 ? 2 : 1;
    } else {
      d->a[j] = (int64_t)below(&s, (uint64_t)(2 * range + 1)) - range;
    }
  }
  /* top-k: no offsets, so every rank's magnitudes rank the indices alike */
  for (int r = 0; r < size; r++) d->off[r] = d->topk ? 0 : (size_t)below(&s, d->period);
  return 0;
}

static void free_data(call_data *d) { free(d->a), free(d->off); }

static int64_t unit_of(const call_data *d, int r, size_t j) {
  int64_t v = d->a[(j + d->off[r]) % d->period];
  return d->topk ? v * ((int64_t)1 << r) : v;
}

static uint16_t bf16_rne(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
static uint16_t fp16_rne(float f) {
  _Float16 h = (_Float16)f;
  uint16_t u;
  memcpy(&u, &h, 2);
  return u;
}

/* Writes units v as one element of the dtype (the narrowing rounds to nearest even). */
static void put(const call_data *d, void *buf, size_t i, int64_t v) {
  switch (d->c->dtype) {
  case GCOMP_FLOAT32: ((float *)buf)[i] = (float)v; break;
  case GCOMP_FLOAT64: ((double *)buf)[i] = (double)v * d->scale; break;
  case GCOMP_INT32: ((int32_t *)buf)[i] = (int32_t)v; break;
  case GCOMP_INT64: ((int64_t *)buf)[i] = v; break;
  case GCOMP_BFLOAT16: ((uint16_t *)buf)[i] = bf16_rne((float)v); break;
  case GCOMP_FLOAT16: ((uint16_t *)buf)[i] = fp16_rne((float)v); break;
  }
}

static double get(gcomp_dtype t, const void *buf, size_t i) {
  switch (t) {
  case GCOMP_FLOAT32: return ((const float *)buf)[i];
  case GCOMP_FLOAT64: return ((const double *)buf)[i];
  case GCOMP_INT32: return ((const int32_t *)buf)[i];
  case GCOMP_INT64: return (double)((const int64_t *)buf)[i];
  case GCOMP_BFLOAT16: {
    uint32_t u = (uint32_t)((const uint16_t *)buf)[i] << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
  }
  case GCOMP_FLOAT16: {
    _Float16 h;
    memcpy(&h, (const uint16_t *)buf + i, 2);
    return (double)h;
  }
  }
  return 0;
}

/* Fills buf with count elements: one period written, then copied. */
static void fill_periodic(void *buf, const void *pattern, size_t period, size_t count, size_t ds) {
  for (size_t i = 0; i < count; i += period) {
    size_t m = count - i < period ? count - i : period;
    memcpy((char *)buf + i * ds, pattern, m * ds);
  }
}

/* rank r's input pattern (one period) */
static void *input_pattern(const call_data *d, int r) {
  size_t ds = dtype_size[d->c->dtype];
  void *p = malloc(d->period * ds);
  if (p)
    for (size_t j = 0; j < d->period; j++) put(d, p, j, unit_of(d, r, j));
  return p;
}

/* The exact reduction of one period, in units. */
static int64_t *exact_units(const call_data *d) {
  int64_t *e = malloc(d->period * sizeof *e);
  if (!e) return NULL;
  for (size_t j = 0; j < d->period; j++) {
    int64_t acc = unit_of(d, 0, j);
    for (int r = 1; r < d->size; r++) {
      int64_t v = unit_of(d, r, j);
      switch (d->c->op) {
      case GCOMP_SUM: case GCOMP_AVG: acc += v; break;
      case GCOMP_MIN: acc = v < acc ? v : acc; break;
      case GCOMP_MAX: acc = v > acc ? v : acc; break;
      case GCOMP_PROD: acc *= v; break;
      }
    }
    e[j] = acc;
  }
  return e;
}

/* ---- checking -------------------------------------------------------------------------- */
static int rank_, size_;
static uint64_t seed_;
static char config_[256] = "";   /* the settings that shape a call, for replays */

static int report_wrong(const call_params *c, size_t i, double got, double want, const char *why) {
  char what[256];
  describe(c, what, sizeof what);
  printf("gcomp-soak: rank %d: WRONG seed=%" PRIu64 " call=%" PRIu64 " %s: [%zu] = %.17g, want %.17g"
         " (%s) [%s] (replay: gcomp-soak --seed %" PRIu64 " --from %" PRIu64 ")\n",
         rank_, seed_, c->index, what, i, got, want, why, config_, seed_, c->index);
  fflush(stdout);
  return 1;
}

static double avg_tolerance(gcomp_dtype t) {   /* about one unit in the last place, relative */
  return t == GCOMP_FLOAT64 ? 0x1p-51 : t == GCOMP_FLOAT32 ? 0x1p-22
       : t == GCOMP_BFLOAT16 ? 0x1p-7 : 0x1p-10;
}

static int is_float(gcomp_dtype t) { return t != GCOMP_INT32 && t != GCOMP_INT64; }

/* Every element of a dense (exact or AVG) result. */
static int check_dense(const call_data *d, const void *out, const int64_t *e) {
  const call_params *c = d->c;
  size_t ds = dtype_size[c->dtype];
  if (c->op == GCOMP_AVG && is_float(c->dtype)) {
    double tol = avg_tolerance(c->dtype);
    for (size_t i = 0, j = 0; i < c->count; i++, j = j + 1 == d->period ? 0 : j + 1) {
      double want = (double)e[j] * d->scale / d->size, got = get(c->dtype, out, i);
      if (!(fabs(got - want) <= fabs(want) * tol)) return report_wrong(c, i, got, want, "average");
    }
    return 0;
  }
  /* bitwise: the expected period in the dtype, compared block by block */
  unsigned char *pat = malloc(d->period * ds);
  if (!pat) return report_wrong(c, 0, 0, 0, "out of memory");
  for (size_t j = 0; j < d->period; j++) {
    int64_t v = e[j];
    if (c->op == GCOMP_AVG) v /= d->size;   /* integers: truncated toward zero */
    put(d, pat, j, v);
  }
  int bad = 0;
  for (size_t i = 0; i < c->count && !bad; i += d->period) {
    size_t m = c->count - i < d->period ? c->count - i : d->period;
    if (memcmp((const char *)out + i * ds, pat, m * ds) == 0) continue;
    for (size_t j = 0; j < m; j++)
      if (memcmp((const char *)out + (i + j) * ds, pat + j * ds, ds) != 0) {
        bad = report_wrong(c, i + j, get(c->dtype, out, i + j), get(c->dtype, pat, j), "exact");
        break;
      }
  }
  free(pat);
  return bad;
}

/* quant (lossy, not exact): a value is quantised at most twice (each rank's contribution,
 * then the reduced shard: the library's promise), each time within half a step of its
 * bucket's grid, and a step is at most the bucket's range over 2^bits - 1. Contributions
 * lie in [-R, R] and reduced shards in [-size R, size R], so the error is at most
 * (size R + size R) / (2^bits - 1), with a little room for fp32 rounding; divided by size
 * for an average. Ranks must also agree bitwise (checked by the caller). */
static int check_bounded(const call_data *d, const void *out, const int64_t *e) {
  const call_params *c = d->c;
  double range = (double)value_range(c, d->size), steps = exp2(codec_table[c->codec].bits) - 1;
  double tol = 2 * d->size * range / steps * (1 + 0x1p-10) + 0x1p-10;
  int avg = c->op == GCOMP_AVG;
  if (avg) tol /= d->size;
  for (size_t i = 0, j = 0; i < c->count; i++, j = j + 1 == d->period ? 0 : j + 1) {
    double want = (double)e[j] / (avg ? d->size : 1), got = get(c->dtype, out, i);
    if (!(fabs(got - want) <= tol)) return report_wrong(c, i, got, want, "quant: error bound");
  }
  return 0;
}

/* Top-k: result[i] = c[i] * m, m in [0, 2^size); strict for sparse + exact=1; exact for
 * ratio=1. */
static int check_topk(const call_data *d, const float *out, const char *algo) {
  const call_params *c = d->c;
  int64_t all = ((int64_t)1 << d->size) - 1;
  /* sparse selects k of the whole vector on every rank; hier-sparse selects per shard of
   * the node's sum, whose layout is the library's: only the generic check there */
  int strict = codec_table[c->codec].exact_k && algo && !strcmp(algo, "sparse");
  int every = codec_table[c->codec].all;
  size_t kept = 0, nonzero = 0;
  int64_t min_kept = INT64_MAX, max_dropped = INT64_MIN;   /* keys: |c| * 2^32 - ... */
  for (size_t i = 0, j = 0; i < c->count; i++, j = j + 1 == d->period ? 0 : j + 1) {
    int64_t cv = d->a[j];
    double got = out[i];
    if (cv == 0) {
      if (got != 0) return report_wrong(c, i, got, 0, "top-k: a zero everywhere");
      continue;
    }
    nonzero++;
    double m = got / (double)cv;
    if (!(m >= 0 && m <= (double)all && m == floor(m)) || (double)cv * m != got)
      return report_wrong(c, i, got, (double)cv * (double)all, "top-k: not a sum of sent values");
    if ((every || strict) && m != 0 && m != (double)all)
      return report_wrong(c, i, got, (double)cv * (double)all, "top-k: not sent by every rank");
    if (every && m != (double)all)
      return report_wrong(c, i, got, (double)cv * (double)all, "top-k ratio=1: all sent");
    /* order key: larger |c| first, then lower index */
    int64_t key = (int64_t)(cv < 0 ? -cv : cv) * ((int64_t)1 << 40) - (int64_t)i;
    if (m != 0) kept++, min_kept = key < min_kept ? key : min_kept;
    else max_dropped = key > max_dropped ? key : max_dropped;
  }
  if (strict) {
    double k = floor(codec_table[c->codec].ratio * (double)c->count + 0.5);
    if (k < 1) k = 1;
    double want = k < (double)nonzero ? k : (double)nonzero;
    if (fabs((double)kept - want) > 1)
      return report_wrong(c, 0, (double)kept, want, "top-k exact=1: kept count");
    if (kept && max_dropped > min_kept)
      return report_wrong(c, 0, (double)max_dropped, (double)min_kept,
                          "top-k exact=1: a larger value dropped for a smaller one");
  }
  return 0;
}

static uint64_t digest(const void *p, size_t n) {
  const unsigned char *b = p;
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

/* ---- the stall watchdog ---------------------------------------------------------------- */
static _Atomic uint64_t watch_deadline_ms;   /* 0: nothing running */
static _Atomic uint64_t watch_call;
static char watch_what[256];
static pthread_mutex_t watch_mu = PTHREAD_MUTEX_INITIALIZER;
static uint64_t stall_ms_ = 120000;
static uint64_t corrupt_call_ = UINT64_MAX;   /* --corrupt: proves the checks can fail */

static uint64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void *watchdog(void *arg) {
  (void)arg;
  for (;;) {
    usleep(100000);
    uint64_t dl = atomic_load(&watch_deadline_ms);
    if (dl && now_ms() > dl) {
      pthread_mutex_lock(&watch_mu);
      printf("gcomp-soak: rank %d: STALL seed=%" PRIu64 " call=%" PRIu64 " %s: not done within"
             " %" PRIu64 " ms [%s] (replay: gcomp-soak --seed %" PRIu64
             " --from %" PRIu64 ")\n",
             rank_, seed_, atomic_load(&watch_call), watch_what, stall_ms_, config_, seed_,
             atomic_load(&watch_call));
      fflush(stdout);
      _exit(3);
    }
  }
  return NULL;
}

static void watch_start(const call_params *c) {
  pthread_mutex_lock(&watch_mu);
  describe(c, watch_what, sizeof watch_what);
  pthread_mutex_unlock(&watch_mu);
  atomic_store(&watch_call, c->index);
  atomic_store(&watch_deadline_ms, now_ms() + stall_ms_);
}
static void watch_stop(void) { atomic_store(&watch_deadline_ms, 0); }

/* ---- running --------------------------------------------------------------------------- */
typedef struct {
  call_params p;
  call_data d;
  void *in, *out;
  gcomp_request *req;
  int done;
} live_call;

/* gcomp's algorithms of every collective (25 today): calls counted per algorithm that ran */
enum { ALGOS_MAX = 64 };

typedef struct {
  gcomp_comm *comm;
  gcomp_codec *codecs[NCODECS];
  uint64_t calls, blocking, groups, bytes, elements_checked, codec_calls;
  uint64_t algo_calls[ALGOS_MAX];
  int verbose;
} soak;

static int algo_index(const char *name) {
  for (int i = 0; i < gcomp_algo_count() && i < ALGOS_MAX; i++) {
    const char *n;
    if (gcomp_algo_describe(i, &n, NULL) == GCOMP_OK && !strcmp(n, name)) return i;
  }
  return -1;
}

static int prepare(live_call *l, int size) {
  size_t ds = dtype_size[l->p.dtype], bytes = l->p.count * ds;
  if (make_data(&l->d, &l->p, size)) return -1;
  l->in = malloc(bytes + 1);
  l->out = l->p.inplace ? l->in : malloc(bytes + 1);
  void *pat = input_pattern(&l->d, rank_);
  if (!l->in || !l->out || !pat) {
    free(pat);
    return -1;
  }
  fill_periodic(l->in, pat, l->d.period, l->p.count, ds);
  free(pat);
  if (!l->p.inplace) memset(l->out, 0xa5, bytes);   /* garbage the result must replace */
  return 0;
}

static void release(live_call *l) {
  if (l->out != l->in) free(l->out);
  free(l->in);
  free_data(&l->d);
}

static int call_failed(const call_params *c, int st, const char *when) {
  char what[256];
  describe(c, what, sizeof what);
  printf("gcomp-soak: rank %d: FAILED seed=%" PRIu64 " call=%" PRIu64 " %s: %s: %s: %s"
         " [%s] (replay: gcomp-soak --seed %" PRIu64 " --from %" PRIu64 ")\n",
         rank_, seed_, c->index, what, when, gcomp_strerror(st), gcomp_last_error(), config_,
         seed_, c->index);
  fflush(stdout);
  return 1;
}

/* All checks of one completed call. algo: what it ran (NULL when not known exactly). */
static int verify(soak *s, live_call *l, const char *algo) {
  const call_params *c = &l->p;
  size_t ds = dtype_size[c->dtype];
  if (c->count == 0) return 0;
  int bad = 0;
  if (!c->inplace) {   /* sendbuf untouched */
    void *pat = input_pattern(&l->d, rank_);
    if (!pat) return report_wrong(c, 0, 0, 0, "out of memory");
    for (size_t i = 0; i < c->count && !bad; i += l->d.period) {
      size_t m = c->count - i < l->d.period ? c->count - i : l->d.period;
      if (memcmp((char *)l->in + i * ds, pat, m * ds))
        bad = report_wrong(c, i, get(c->dtype, l->in, i), get(c->dtype, pat, 0),
                           "sendbuf changed by an out-of-place call");
    }
    free(pat);
    if (bad) return 1;
  }
  if (l->d.topk) {
    bad = check_topk(&l->d, l->out, algo);
  } else {
    int64_t *e = exact_units(&l->d);
    if (!e) return report_wrong(c, 0, 0, 0, "out of memory");
    int lossy = c->codec >= 0 && codec_table[c->codec].kind == K_QUANT;
    bad = lossy ? check_bounded(&l->d, l->out, e) : check_dense(&l->d, l->out, e);
    free(e);
  }
  s->elements_checked += c->count;
  return bad;
}

/* Results that are not fully determined by the inputs (top-k, averages) must still be the
 * same bytes on every rank: two small allreduces of the digest. */
static int same_everywhere(soak *s, live_call *l) {
  const call_params *c = &l->p;
  int64_t h = (int64_t)(digest(l->out, c->count * dtype_size[c->dtype]) >> 1), lo = h, hi = h;
  int st = gcomp_allreduce(s->comm, &lo, &lo, 1, GCOMP_INT64, GCOMP_MIN, NULL, 0);
  if (st == GCOMP_OK) st = gcomp_allreduce(s->comm, &hi, &hi, 1, GCOMP_INT64, GCOMP_MAX, NULL, 0);
  if (st) return call_failed(c, st, "digest exchange");
  if (lo != hi) return report_wrong(c, 0, (double)lo, (double)hi, "ranks hold different results");
  return 0;
}

static int needs_digest(const call_params *c) {
  return (c->codec >= 0 && codec_table[c->codec].kind >= K_TOPK) ||
         (c->op == GCOMP_AVG && is_float(c->dtype));
}

static gcomp_codec *codec_of(soak *s, const call_params *c) {
  return c->codec < 0 ? NULL : s->codecs[c->codec];
}

/* Runs calls[0..n) (one blocking call or one group of non-blocking ones). */
static int run_group(soak *s, live_call *calls, int n) {
  for (int i = 0; i < n; i++)
    if (prepare(&calls[i], size_)) return report_wrong(&calls[i].p, 0, 0, 0, "out of memory");
  watch_start(&calls[0].p);
  if (!calls[0].p.group) {
    live_call *l = &calls[0];
    int st = gcomp_allreduce(s->comm, l->in, l->out, l->p.count, l->p.dtype, l->p.op,
                             codec_of(s, &l->p), l->p.index);
    if (st) return call_failed(&l->p, st, "gcomp_allreduce");
    l->done = 1;
  } else {
    for (int i = 0; i < n; i++) {
      live_call *l = &calls[i];
      int st = gcomp_iallreduce(s->comm, l->in, l->out, l->p.count, l->p.dtype, l->p.op,
                                codec_of(s, &l->p), l->p.index, &l->req);
      if (st) return call_failed(&l->p, st, "gcomp_iallreduce");
    }
    int finish = calls[0].p.finish, left = n;
    while (left > 0) {
      for (int k = 0; k < n; k++) {
        live_call *l = &calls[finish == 1 ? n - 1 - k : k];
        if (l->done) continue;
        int st, done = 1;
        if (finish == 2) st = gcomp_request_test(l->req, &done);
        else st = gcomp_request_wait(l->req);
        if (done) l->done = 1, left--;
        if (st) return call_failed(&l->p, st, finish == 2 ? "gcomp_request_test" : "gcomp_request_wait");
      }
      if (finish == 2 && left) usleep(50);
    }
  }
  watch_stop();
  for (int i = 0; i < n; i++) {
    live_call *l = &calls[i];
    if (l->p.index != corrupt_call_ || rank_ != size_ - 1 || !l->p.count) continue;
    size_t ds = dtype_size[l->p.dtype];   /* the top byte of the middle element */
    ((unsigned char *)l->out)[(l->p.count / 2) * ds + ds - 1] ^= 0x40;
  }
  const char *algo = gcomp_comm_last_algo(s->comm);
  int ai = algo_index(algo);
  if (!calls[0].p.group && ai >= 0) s->algo_calls[ai]++;
  for (int i = 0; i < n; i++) {
    live_call *l = &calls[i];
    /* the algorithm is known per call only for a blocking one */
    if (verify(s, l, calls[0].p.group ? NULL : algo)) return 1;
    if (needs_digest(&l->p) && l->p.count && same_everywhere(s, l)) return 1;
    s->calls++;
    s->bytes += (uint64_t)l->p.count * dtype_size[l->p.dtype];
    if (l->p.codec >= 0) s->codec_calls++;
  }
  if (calls[0].p.group) s->groups++;
  else s->blocking++;
  /* error feedback: start every call from zero residuals, so its result is checkable */
  for (int i = 0; i < n; i++)
    if (calls[i].p.codec >= 0) gcomp_codec_reset_residuals(s->codecs[calls[i].p.codec]);
  if (s->verbose && rank_ == 0)
    for (int i = 0; i < n; i++) {
      char what[256];
      describe(&calls[i].p, what, sizeof what);
      printf("gcomp-soak: call %" PRIu64 " ok: %s (%s)\n", calls[i].p.index, what,
             calls[0].p.group ? "group" : algo);
    }
  for (int i = 0; i < n; i++) release(&calls[i]);
  return 0;
}

/* ---- command line ---------------------------------------------------------------------- */
static int parse_size(const char *text, uint64_t *out) {
  char *end;
  double v = strtod(text, &end);
  uint64_t mul = 1;
  if (*end == 'k' || *end == 'K') mul = 1ull << 10, end++;
  else if (*end == 'm' || *end == 'M') mul = 1ull << 20, end++;
  else if (*end == 'g' || *end == 'G') mul = 1ull << 30, end++;
  if (end == text || *end || !(v >= 0)) return -1;
  *out = (uint64_t)(v * (double)mul);
  return 0;
}

static int usage(const char *bad) {
  if (bad) fprintf(stderr, "gcomp-soak: bad argument '%s'\n", bad);
  fprintf(stderr,
          "usage: gcomp-run -n N [--nodes M] -- gcomp-soak [--seed S] [--calls C] [--from K]\n"
          "         [--bytes TOTAL] [--max-bytes B] [--stall-ms MS] [--verbose] [--dry-run]\n"
          "         [--corrupt K]   (the last rank flips a byte of call K's result: must fail)\n"
          "         [--blocking]    (the same calls, all blocking: to tell a non-blocking bug)\n"
          "  defaults: --seed 1 --calls 200 --from 0 --bytes 1g --max-bytes 64m --stall-ms 120000\n");
  return 2;
}

int main(int argc, char **argv) {
  uint64_t seed = 1, calls = 200, from = 0, budget = 1ull << 30, max_bytes = 64ull << 20;
  int verbose = 0, dry = 0, blocking = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    char *end = NULL;
    if (!strcmp(a, "--verbose")) { verbose = 1; continue; }
    if (!strcmp(a, "--dry-run")) { dry = 1; continue; }
    if (!strcmp(a, "--blocking")) { blocking = 1; continue; }
    if (!v) return usage(a);
    i++;
    if (!strcmp(a, "--seed")) seed = strtoull(v, &end, 0);
    else if (!strcmp(a, "--calls")) calls = strtoull(v, &end, 0);
    else if (!strcmp(a, "--from")) from = strtoull(v, &end, 0);
    else if (!strcmp(a, "--stall-ms")) stall_ms_ = strtoull(v, &end, 0);
    else if (!strcmp(a, "--corrupt")) corrupt_call_ = strtoull(v, &end, 0);
    else if (!strcmp(a, "--bytes")) { if (parse_size(v, &budget)) return usage(v); continue; }
    else if (!strcmp(a, "--max-bytes")) {
      if (parse_size(v, &max_bytes) || max_bytes < 16) return usage(v);
      continue;
    } else return usage(a);
    if (!end || *end || *v == '-' || !*v) return usage(v);
  }
  seed_ = seed;
  planner pl = {.seed = seed, .budget = budget, .max_bytes = max_bytes,
                .blocking_only = blocking};
  if (dry) {   /* the sequence only: no communicator */
    for (uint64_t k = 0; k < calls; k++) {
      call_params c;
      char what[256];
      plan_call(&pl, k, &c);
      describe(&c, what, sizeof what);
      if (k >= from) printf("call %" PRIu64 ": %s%s\n", k, what, c.first ? " [starts]" : "");
    }
    return 0;
  }
  soak s = {.verbose = verbose};
  int st = gcomp_comm_init_env(&s.comm);
  if (st) {
    fprintf(stderr, "gcomp-soak: gcomp_comm_init_env: %s\n", gcomp_last_error());
    return 1;
  }
  rank_ = gcomp_comm_rank(s.comm), size_ = gcomp_comm_size(s.comm);
  if (size_ > 16) {
    fprintf(stderr, "gcomp-soak: at most 16 ranks (top-k inputs scale by 2^rank)\n");
    return 2;
  }
  snprintf(config_, sizeof config_, "%d ranks on %d node(s)", size_, gcomp_comm_nnodes(s.comm));
  static const char *shaping[] = {"GCOMP_ALGO", "GCOMP_CHUNK_BYTES", "GCOMP_SEGMENT_BYTES",
                                  "GCOMP_CODEC_MIN_BYTES", "GCOMP_SHM_BYTES"};
  for (size_t i = 0; i < sizeof shaping / sizeof *shaping; i++) {
    const char *value = NULL;
    if (gcomp_config_get(NULL, shaping[i], &value, NULL) != GCOMP_OK || !value) continue;
    size_t len = strlen(config_);
    snprintf(config_ + len, sizeof config_ - len, " %s=%s", shaping[i], value);
  }
  for (int i = 0; i < NCODECS; i++)
    if (gcomp_codec_create(codec_table[i].spec, &s.codecs[i])) {
      fprintf(stderr, "gcomp-soak: codec %s: %s\n", codec_table[i].spec, gcomp_last_error());
      return 1;
    }
  pthread_t wd;
  pthread_create(&wd, NULL, watchdog, NULL);
  pthread_detach(wd);
  uint64_t t0 = now_ms();
  live_call group[MAX_GROUP];
  int bad = 0;
  for (uint64_t k = 0; k < calls && !bad;) {
    int n = 0;
    do {   /* one group: its first call, then the rest it announced */
      memset(&group[n], 0, sizeof group[n]);
      plan_call(&pl, k + (uint64_t)n, &group[n].p);
      n++;
    } while (group[0].p.group && n < group[0].p.group && k + (uint64_t)n < calls);
    /* a group cut short by --calls runs what it has; a replay starts at the group of K */
    if (k + (uint64_t)n > from) bad = run_group(&s, group, n);
    k += (uint64_t)n;
  }
  double secs = (double)(now_ms() - t0) * 1e-3;
  int64_t sums[3] = {(int64_t)s.elements_checked, bad, 0};
  if (!bad) {
    st = gcomp_allreduce(s.comm, sums, sums, 3, GCOMP_INT64, GCOMP_SUM, NULL, 0);
    if (st) bad = 1, printf("gcomp-soak: rank %d: FAILED the summary: %s\n", rank_, gcomp_last_error());
  }
  if (!bad && rank_ == 0) {
    char algos[512] = "";
    for (int i = 0; i < gcomp_algo_count() && i < ALGOS_MAX; i++) {
      const char *name;
      if (!s.algo_calls[i] || gcomp_algo_describe(i, &name, NULL)) continue;
      size_t len = strlen(algos);
      snprintf(algos + len, sizeof algos - len, "%s%s=%" PRIu64, len ? " " : "", name, s.algo_calls[i]);
    }
    printf("gcomp-soak: seed %" PRIu64 " [%s]: %" PRIu64
           " calls (%" PRIu64 " blocking, %" PRIu64 " non-blocking groups, %" PRIu64
           " with a codec), %" PRIu64 " bytes, %" PRId64 " elements checked over all ranks,"
           " 0 wrong, 0 stalls, %.1f s; blocking calls ran: %s\n",
           seed, config_, s.calls, s.blocking, s.groups,
           s.codec_calls, s.bytes, sums[0], secs, algos);
  }
  /* after a failure the others are stopped by gcomp-run: a collective destroy would only
   * wait for them */
  if (bad) return 1;
  for (int i = 0; i < NCODECS; i++) gcomp_codec_destroy(s.codecs[i]);
  st = gcomp_comm_destroy(s.comm);
  if (st) bad = 1, printf("gcomp-soak: rank %d: FAILED destroy: %s\n", rank_, gcomp_last_error());
  return bad ? 1 : 0;
}
