/* The algorithm table and the planner that picks from it per call, by the costs each
 * descriptor computes from the primitives of reduce/cost.c. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "coll.h"

/* Four figures, or six with the shared-memory allreduce's round latency and rate. Without
 * those two, shm_alpha is -1: that algorithm runs only when asked for by name. */
int gcomp_plan_parse_links(const char *text, const char *what, gcomp_plan_in *m) {
  /* latencies in [0, 1e7] us (shm's > 0), rates in [1e-6, 1e6] GB/s: every cost the
   * planner computes from them stays finite (nan, inf or 1e-300 GB/s made every cost NaN
   * or Inf, and no algorithm was picked) */
  double v[6] = {0, 0, 0, 0, 0, 0};
  int got = 0, bad = 0;
  const char *p = text;
  for (;;) {
    if (got == 6) {   /* a seventh figure */
      bad = 1;
      break;
    }
    char *end = NULL;
    v[got] = gcomp_strtod(p, &end);   /* "0.5,12" under any locale */
    int rate = got & 1;
    if (end == p || !isfinite(v[got]) ||
        (rate ? !(v[got] >= 1e-6 && v[got] <= 1e6) : !(v[got] >= 0 && v[got] <= 1e7)) ||
        (got == 4 && v[got] == 0))
      bad = 1;
    got++;
    if (bad || *end == '\0') break;
    if (*end != ',') {   /* "1,10,20,1junk" */
      bad = 1;
      break;
    }
    p = end + 1;
  }
  GCOMP_FAIL_IF(bad || (got != 4 && got != 6), GCOMP_ERR_INVALID,
                "%s='%s' is not 'intra_alpha_us,intra_GBps,inter_alpha_us,inter_GBps"
                "[,shm_alpha_us,shm_GBps]' (latencies 0..1e7 us, rates 1e-6..1e6 GB/s)",
                what, text);
  double ia = v[0], ib = v[1], ea = v[2], eb = v[3], sa = v[4], sb = v[5];
  m->intra = (gcomp_link){ia * 1e-6, 1.0 / (ib * 1e9)};
  m->inter = (gcomp_link){ea * 1e-6, 1.0 / (eb * 1e9)};
  m->gamma_spb = 1.0 / 8e9;
  m->shm_alpha = got == 6 ? sa * 1e-6 : -1;
  m->shm_spb = got == 6 ? 1.0 / (sb * 1e9) : 0;
  return GCOMP_OK;
}

static gcomp_group world_group(const gcomp_coll *c) {
  return (gcomp_group){c->world, c->t->size, c->t->rank};
}

static int ring_run(gcomp_coll *c, uint8_t *buf, size_t count) {
  gcomp_group g = world_group(c);
  return gcomp_ring_allreduce(c, &g, buf, count, 0);
}
static double ring_cost(const gcomp_plan_in *in) {
  if (in->n > GCOMP_RING_MAX_RANKS) return -1;   /* it would refuse the call */
  return gcomp_cost_ring_nodes(in);
}

static int rhd_run(gcomp_coll *c, uint8_t *buf, size_t count) {
  gcomp_group g = world_group(c);
  return gcomp_rhd_allreduce(c, &g, buf, count, 0);
}
static double rhd_cost(const gcomp_plan_in *in) {
  return gcomp_cost_rhd(in->n, (double)in->bytes, gcomp_cost_flat_link(in), in->gamma_spb);
}

static int rd_run(gcomp_coll *c, uint8_t *buf, size_t count) {
  gcomp_group g = world_group(c);
  return gcomp_rd_allreduce(c, &g, buf, count, 0);
}
static double rd_cost(const gcomp_plan_in *in) {
  return gcomp_cost_rd(in->n, (double)in->bytes, gcomp_cost_shared_link(in), in->gamma_spb);
}

static int direct_run(gcomp_coll *c, uint8_t *buf, size_t count) {
  gcomp_group g = world_group(c);
  gcomp_coll_inplace(c, buf, count);
  return gcomp_direct_allreduce(c, &g, (float *)(void *)buf, count, 0, 0);
}
static double direct_cost(const gcomp_plan_in *in) {
  if (in->ratio <= 0) return -1;
  return gcomp_cost_direct(in->n, (double)in->bytes, gcomp_cost_shared_link(in), in);
}

static int sparse_run(gcomp_coll *c, uint8_t *buf, size_t count) {
  gcomp_group g = world_group(c);
  gcomp_coll_inplace(c, buf, count);
  return gcomp_sparse_allreduce(c, &g, (float *)(void *)buf, count, 0, 0);
}
static double sparse_cost(const gcomp_plan_in *in) {
  if (in->ratio <= 0 || !in->sparse) return -1;
  return gcomp_cost_sparse(in->n, (double)in->bytes, gcomp_cost_shared_link(in), in);
}

static int shm_run(gcomp_coll *c, uint8_t *buf, size_t count) {
  return gcomp_shm_allreduce(c, c->shm, buf, count);
}
static double shm_cost(const gcomp_plan_in *in) { return gcomp_cost_shm(in); }

extern const gcomp_algo gcomp_algo_hier, gcomp_algo_hier_direct, gcomp_algo_hier_sparse;
/* the other collectives' (coll_algos.c, bcast_*.c, alltoall.c) */
extern const gcomp_algo gcomp_algo_rs_ring, gcomp_algo_rs_rhd, gcomp_algo_rs_shm,
    gcomp_algo_rs_direct;
extern const gcomp_algo gcomp_algo_ag_ring, gcomp_algo_ag_rhd, gcomp_algo_ag_shm,
    gcomp_algo_ag_direct;
/* hier_rs.c, hier_ag.c */
extern const gcomp_algo gcomp_algo_rs_hier, gcomp_algo_rs_hier_direct;
extern const gcomp_algo gcomp_algo_ag_hier, gcomp_algo_ag_hier_direct;
extern const gcomp_algo gcomp_algo_bcast_tree, gcomp_algo_bcast_scatter, gcomp_algo_bcast_shm;
extern const gcomp_algo gcomp_algo_barrier, gcomp_algo_barrier_shm, gcomp_algo_alltoall,
    gcomp_algo_alltoall_shm;   /* barrier_shm.c */
static const gcomp_algo algo_ring = {
    "ring", "pipelined ring reduce-scatter + allgather: bandwidth-optimal, 2(n-1) steps",
    ring_run, ring_cost, 0, GCOMP_COLL_ALLREDUCE};
static const gcomp_algo algo_rhd = {
    "rhd", "recursive halving/doubling (Rabenseifner): 2 log2(n) steps, same volume as ring",
    rhd_run, rhd_cost, 0, GCOMP_COLL_ALLREDUCE};
static const gcomp_algo algo_rd = {
    "rd", "recursive doubling: whole vector each step, log2(n) steps, for small messages",
    rd_run, rd_cost, 0, GCOMP_COLL_ALLREDUCE};
static const gcomp_algo algo_direct = {
    "direct", "compressed: shards to their owners, reduced in fp32, re-encoded once, allgathered",
    direct_run, direct_cost, 1, GCOMP_COLL_ALLREDUCE};
static const gcomp_algo algo_sparse = {
    "sparse", "top-k: (index, value) frames allgathered and summed; no re-encoding",
    sparse_run, sparse_cost, 1, GCOMP_COLL_ALLREDUCE};

static const gcomp_algo algo_shm = {
    "shm", "one node: copies through a shared segment, each rank sums one shard; one-shot when small",
    shm_run, shm_cost, 0, GCOMP_COLL_ALLREDUCE};

static const gcomp_algo *const algos[] = {&algo_ring,        &algo_rhd,
                                          &algo_rd,          &algo_shm,
                                          &gcomp_algo_hier,
                                          &algo_direct,      &algo_sparse,
                                          &gcomp_algo_hier_direct, &gcomp_algo_hier_sparse,
                                          &gcomp_algo_rs_ring,     &gcomp_algo_rs_rhd,
                                          &gcomp_algo_rs_shm,
                                          &gcomp_algo_rs_direct,   &gcomp_algo_rs_hier,
                                          &gcomp_algo_rs_hier_direct, &gcomp_algo_ag_ring,
                                          &gcomp_algo_ag_rhd,
                                          &gcomp_algo_ag_shm,      &gcomp_algo_ag_direct,
                                          &gcomp_algo_ag_hier,     &gcomp_algo_ag_hier_direct,
                                          &gcomp_algo_bcast_tree,  &gcomp_algo_bcast_scatter,
                                          &gcomp_algo_bcast_shm,
                                          &gcomp_algo_barrier,     &gcomp_algo_barrier_shm,
                                          &gcomp_algo_alltoall,
                                          &gcomp_algo_alltoall_shm};
enum { NALGOS = sizeof algos / sizeof *algos };

const gcomp_algo *gcomp_algo_find(const char *name) {
  for (int i = 0; i < NALGOS; i++)
    if (strcmp(algos[i]->name, name) == 0) return algos[i];
  return NULL;
}

static char algo_names[1024];
static void build_algo_names(void) {
  for (int i = 0; i < NALGOS; i++) {
    size_t len = strlen(algo_names);
    snprintf(algo_names + len, sizeof algo_names - len, "%s%s", len ? ", " : "", algos[i]->name);
  }
}

const char *gcomp_algo_names(void) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;   /* error messages of concurrent creates */
  pthread_once(&once, build_algo_names);
  return algo_names;
}

int gcomp_algo_count(void) { return NALGOS; }

const char *gcomp_coll_kind_name(int kind) {
  static const char *const names[GCOMP_COLL_KINDS] = {
      "allreduce", "reduce_scatter", "allgather", "broadcast", "barrier", "alltoall"};
  return kind >= 0 && kind < GCOMP_COLL_KINDS ? names[kind] : NULL;
}

/* One item of GCOMP_ALGO: NAME or COLLECTIVE=NAME, len bytes at p */
static int parse_item(const char *p, size_t len, const gcomp_algo **forced) {
  char item[160], name[192];
  GCOMP_FAIL_IF(len == 0 || len >= sizeof item, GCOMP_ERR_INVALID,
                "GCOMP_ALGO: an empty or overlong item");
  memcpy(item, p, len);
  item[len] = '\0';
  char *eq = strchr(item, '=');
  if (eq) {
    *eq = '\0';
    snprintf(name, sizeof name, "%s:%s", item, eq + 1);
    if (!strcmp(item, "allreduce")) snprintf(name, sizeof name, "%s", eq + 1);
  } else {
    snprintf(name, sizeof name, "%s", item);
  }
  const gcomp_algo *a = gcomp_algo_find(name);
  if (eq) *eq = '=';
  GCOMP_FAIL_IF(!a, GCOMP_ERR_INVALID,
                "GCOMP_ALGO='%s' is not an algorithm (valid: auto, %s; or a comma-separated "
                "list, COLLECTIVE=NAME naming COLLECTIVE:NAME)", item, gcomp_algo_names());
  GCOMP_FAIL_IF(forced[a->kind], GCOMP_ERR_INVALID, "GCOMP_ALGO: two algorithms for %s",
                gcomp_coll_kind_name(a->kind));
  forced[a->kind] = a;
  return GCOMP_OK;
}

int gcomp_algo_parse(const char *text, const gcomp_algo **forced) {
  for (int k = 0; k < GCOMP_COLL_KINDS; k++) forced[k] = NULL;
  if (!strcmp(text, "auto")) return GCOMP_OK;
  for (const char *p = text;;) {
    const char *end = strchr(p, ',');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    GCOMP_CHECK(parse_item(p, len, forced));
    if (!end) return GCOMP_OK;
    p = end + 1;
  }
}

gcomp_status gcomp_algo_describe(int i, const char **name, const char **desc) {
  GCOMP_FAIL_IF(i < 0 || i >= NALGOS, GCOMP_ERR_INVALID, "algorithm index %d out of range", i);
  if (name) *name = algos[i]->name;
  if (desc) *desc = algos[i]->desc;
  return GCOMP_OK;
}

int gcomp_algo_compresses(const char *name) {
  const gcomp_algo *a = name ? gcomp_algo_find(name) : NULL;
  GCOMP_FAIL_IF(!a, GCOMP_ERR_INVALID, "'%s' is not an algorithm (valid: %s)",
                name ? name : "(null)", gcomp_algo_names());
  return a->compressed != 0;
}

/* The last picks of this thread, by size: the calls of a training step or a benchmark repeat
 * the same few shapes, and pricing the whole table was about 500 of the ~1,700 instructions
 * gcomp spent outside its waits in an 8 B call at 2 ranks (callgrind). A pick depends on
 * nothing but its input and the forced algorithm, so an input equal byte for byte has the
 * same answer (padding that differs only costs a miss). Not used while the tuning trace is
 * on: every pick then logs its costs. */
enum { PICK_CACHE = 8 };
static _Thread_local struct {
  gcomp_plan_in in;
  const gcomp_algo *forced, *best;
} picked[PICK_CACHE];

static const gcomp_algo *price(const gcomp_plan_in *in, const gcomp_algo *forced);

const gcomp_algo *gcomp_plan_pick(const gcomp_plan_in *in, const gcomp_algo *forced) {
  if (gcomp_log_level >= GCOMP_LOG_TRACE && (gcomp_log_subsys & GCOMP_SUB_TUNING))
    return price(in, forced);
  /* a forced algorithm that serves the call wins whatever the others cost (price's last
   * rule): a one-node call's segment algorithm needs no table and no lookup (the cache's
   * compare of the input was ~40 of an 8 B allreduce's instructions) */
  if (forced && forced->kind == in->kind && forced->cost(in) >= 0) return forced;
  unsigned k = (unsigned)((in->bytes * 0x9e3779b97f4a7c15ull) >> 61);   /* 3 bits: PICK_CACHE */
  if (picked[k].best && picked[k].forced == forced && !memcmp(&picked[k].in, in, sizeof *in))
    return picked[k].best;
  const gcomp_algo *best = price(in, forced);
  memcpy(&picked[k].in, in, sizeof *in);
  picked[k].forced = forced, picked[k].best = best;
  return best;
}

static const gcomp_algo *price(const gcomp_plan_in *in, const gcomp_algo *forced) {
  const gcomp_algo *best = NULL;
  double best_cost = INFINITY;
  for (int i = 0; i < NALGOS; i++) {
    if (algos[i]->kind != in->kind) continue;
    double cost = algos[i]->cost(in);
    if (cost >= 0 && cost < best_cost) best = algos[i], best_cost = cost;
    GCOMP_TRACE(GCOMP_SUB_TUNING, "%zu B n=%d nodes=%d: %s %.1f us", in->bytes, in->n, in->nnodes,
                algos[i]->name, cost * 1e6);
  }
  if (forced && forced->kind == in->kind && forced->cost(in) >= 0) best = forced;
  if (!best) {   /* every cost NaN or Inf: figures the parser should have refused */
    /* allreduce: rhd, which any rank count runs (the ring refuses past its limit) */
    static const gcomp_algo *const rings[GCOMP_COLL_KINDS] = {
        &algo_rhd, &gcomp_algo_rs_ring, &gcomp_algo_ag_ring, &gcomp_algo_bcast_tree,
        &gcomp_algo_barrier, &gcomp_algo_alltoall};
    best = rings[in->kind];
    GCOMP_WARN(GCOMP_SUB_TUNING, "%zu B: the cost model priced no algorithm; running %s",
               in->bytes, best->name);
  }
  GCOMP_TRACE(GCOMP_SUB_TUNING, "%zu B: %s%s", in->bytes, best->name, forced ? " (GCOMP_ALGO)" : "");
  return best;
}
