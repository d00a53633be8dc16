/* The planner's cost model as public API (gcomp_plan_predict): a query on paper becomes
 * the gcomp_plan_in the planner sees per call, and the algorithm table answers it. */
#include <math.h>
#include <string.h>

#include "coll.h"
#include "gcomp.h"

/* The first published layouts: a caller's struct may be larger (newer), never smaller. */
#define QUERY_V1 (offsetof(gcomp_plan_query, cores_per_node) + sizeof(int))
#define RESULT_V1 (offsetof(gcomp_plan_result, oversubscribed) + sizeof(int))

static int rate_ok(double bps) { return isfinite(bps) && bps > 0; }
static int latency_ok(double s) { return isfinite(s) && s >= 0 && s <= 10; }

static int check_query(const gcomp_plan_query *q) {
  GCOMP_FAIL_IF(q->nodes < 1 || q->ranks_per_node < 1 ||
                    (long long)q->nodes * q->ranks_per_node > (1 << 24),
                GCOMP_ERR_INVALID, "plan query: %d nodes x %d ranks per node (each >= 1, at "
                "most 2^24 ranks)", q->nodes, q->ranks_per_node);
  GCOMP_FAIL_IF(!latency_ok(q->intra_alpha_s) || !latency_ok(q->inter_alpha_s) ||
                    !latency_ok(q->shm_alpha_s),
                GCOMP_ERR_INVALID, "plan query: latencies must be in [0, 10] s (intra %g, "
                "inter %g, shm %g)", q->intra_alpha_s, q->inter_alpha_s, q->shm_alpha_s);
  GCOMP_FAIL_IF(!rate_ok(q->intra_Bps) || !rate_ok(q->inter_Bps) || !rate_ok(q->reduce_Bps) ||
                    (q->shm_alpha_s > 0 && !rate_ok(q->shm_Bps)),
                GCOMP_ERR_INVALID, "plan query: rates must be > 0 bytes/s (intra %g, inter %g, "
                "reduce %g, shm %g)", q->intra_Bps, q->inter_Bps, q->reduce_Bps, q->shm_Bps);
  GCOMP_FAIL_IF(!(q->codec_ratio >= 0 && q->codec_ratio <= 1) ||
                    (q->codec_ratio > 0 && !rate_ok(q->codec_Bps)),
                GCOMP_ERR_INVALID, "plan query: codec_ratio %g must be in [0, 1], with a "
                "codec_Bps > 0 (%g) when not 0", q->codec_ratio, q->codec_Bps);
  GCOMP_FAIL_IF(q->cores_per_node < 0, GCOMP_ERR_INVALID, "plan query: cores_per_node %d < 0",
                q->cores_per_node);
  return GCOMP_OK;
}

static gcomp_plan_in to_model(const gcomp_plan_query *q) {
  gcomp_plan_in in = {0};
  in.bytes = (size_t)q->bytes;
  in.nnodes = q->nodes;
  in.local = q->ranks_per_node;
  in.n = q->nodes * q->ranks_per_node;
  in.intra = (gcomp_link){q->intra_alpha_s, 1.0 / q->intra_Bps};
  in.inter = (gcomp_link){q->inter_alpha_s, 1.0 / q->inter_Bps};
  in.gamma_spb = 1.0 / q->reduce_Bps;
  if (q->shm_alpha_s > 0) {
    in.shm_alpha = q->shm_alpha_s;
    in.shm_spb = 1.0 / q->shm_Bps;
    in.shm_slot = q->shm_slot_bytes ? (size_t)q->shm_slot_bytes : 256u << 10;
  }
  if (q->codec_ratio > 0) {
    in.ratio = q->codec_ratio;
    in.codec_spb = 1.0 / q->codec_Bps;
    in.sparse = q->codec_sparse != 0;
  }
  return in;
}

/* The latency terms of a cost: every alpha scaled by s, the cost is s * A + B on each piece
 * of the model (an algorithm may switch sub-choices, hier between ring and halving/doubling,
 * where A changes), so A is the slope in s at 1. */
static double latency_part(const gcomp_algo *a, const gcomp_plan_in *in) {
  const double eps = 1e-3;
  gcomp_plan_in lo = *in, hi = *in;
  lo.intra.alpha_s *= 1 - eps, hi.intra.alpha_s *= 1 + eps;
  lo.inter.alpha_s *= 1 - eps, hi.inter.alpha_s *= 1 + eps;
  lo.shm_alpha *= 1 - eps, hi.shm_alpha *= 1 + eps;
  double slope = (a->cost(&hi) - a->cost(&lo)) / (2 * eps);
  return slope > 0 ? slope : 0;
}

gcomp_status gcomp_plan_links(gcomp_plan_query *q, const char *text) {
  GCOMP_FAIL_IF(!q || !text, GCOMP_ERR_INVALID, "gcomp_plan_links: NULL argument");
  gcomp_plan_in m = {0};
  GCOMP_CHECK(gcomp_plan_parse_links(text, "links", &m));
  q->intra_alpha_s = m.intra.alpha_s, q->intra_Bps = 1.0 / m.intra.beta_spb;
  q->inter_alpha_s = m.inter.alpha_s, q->inter_Bps = 1.0 / m.inter.beta_spb;
  q->shm_alpha_s = m.shm_alpha > 0 ? m.shm_alpha : 0;
  q->shm_Bps = m.shm_alpha > 0 ? 1.0 / m.shm_spb : 0;
  return GCOMP_OK;
}

gcomp_status gcomp_plan_predict(const gcomp_plan_query *query, const char *algo,
                                gcomp_plan_result *out) {
  GCOMP_FAIL_IF(!query || !out, GCOMP_ERR_INVALID, "gcomp_plan_predict: NULL argument");
  GCOMP_FAIL_IF(query->struct_size < QUERY_V1 || out->struct_size < RESULT_V1, GCOMP_ERR_INVALID,
                "gcomp_plan_predict: struct_size %zu / %zu is smaller than the first layouts "
                "(%zu / %zu): set it to sizeof the struct", query->struct_size, out->struct_size,
                (size_t)QUERY_V1, (size_t)RESULT_V1);
  gcomp_plan_query q = {0};
  memcpy(&q, query, query->struct_size < sizeof q ? query->struct_size : sizeof q);
  GCOMP_CHECK(check_query(&q));
  const gcomp_algo *forced = NULL;
  if (algo) {
    forced = gcomp_algo_find(algo);
    GCOMP_FAIL_IF(!forced || forced->kind != GCOMP_COLL_ALLREDUCE, GCOMP_ERR_INVALID, "gcomp_plan_predict: no algorithm '%s' (valid: %s)",
                  algo, gcomp_algo_names());
  }
  gcomp_plan_in in = to_model(&q);
  const gcomp_algo *a = forced ? forced : gcomp_plan_pick(&in, NULL);
  double t = a->cost(&in);
  GCOMP_FAIL_IF(t < 0 || t >= 1e29, GCOMP_ERR_UNSUPPORTED,
                "gcomp_plan_predict: %s cannot serve %llu B on %d nodes x %d ranks%s", a->name,
                (unsigned long long)q.bytes, q.nodes, q.ranks_per_node,
                a->compressed && q.codec_ratio <= 0 ? " without codec figures" : "");
  gcomp_plan_result r = {0};
  r.struct_size = out->struct_size;
  r.algo = a->name;
  r.time_s = t;
  r.latency_s = fmin(latency_part(a, &in), t);
  r.busbw_Bps = in.n > 1 && t > 0 ? (double)q.bytes / t * 2.0 * (in.n - 1) / in.n : 0;
  r.oversubscribed = q.cores_per_node > 0 && q.ranks_per_node > q.cores_per_node;
  memcpy(out, &r, out->struct_size < sizeof r ? out->struct_size : sizeof r);
  return GCOMP_OK;
}
