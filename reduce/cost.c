/* The cost model's primitives: predicted seconds of the building blocks over one kind of
 * link (alpha: latency per message, beta: seconds per byte, gamma: reduction seconds per
 * byte), and the links a flat algorithm crosses. Every algorithm's descriptor (plan.c,
 * hier.c) prices itself from these, so one formula serves the planner, hier's choice of
 * its cross-node block and the public predictions (plan_query.c). */
#include <math.h>

#include "coll.h"

static int log2_floor(int n) {
  int k = 0;
  while ((1 << (k + 1)) <= n) k++;
  return k;
}

double gcomp_cost_ring(int n, double m, gcomp_link l, double gamma) {
  if (n <= 1) return 0;
  return 2.0 * (n - 1) * l.alpha_s + 2.0 * (n - 1) / n * m * l.beta_spb +
         (double)(n - 1) / n * m * gamma;
}

/* The ring over nodes of L ranks, ordered by node (ring.c crosses each node boundary once):
 * L - 1 hops of a step run over the intra-node link, one over the inter-node link. A hop
 * moves a chunk only once its receive is posted, and the reduce-scatter posts receives two
 * steps ahead (its two scratch slots), the allgather AG_AHEAD (8) ahead, or every step from
 * the start up to 9 ranks (ring.c): so the node-crossing hop has at most w chunks in flight,
 * sharing its bandwidth, and passes them at one inter-node latency per w steps. A step
 * then takes the longer of the mean hop (the chain of steps going round the ring) and that
 * window's pace, alpha_inter / w + chunk x beta_inter; one more inter-node hop fills and
 * drains the pipeline. Checked against SimGrid under gcomp-sim (docs/simulation.md): within
 * 10% at 2x2 to 128x8 ranks, 64 KiB to 32 MiB, where one inter-node latency a step (the
 * flat formula) was 1.7-3.4x too slow. One node, or one rank a node, is the flat formula. */
static double ring_step(double mean, gcomp_link e, double chunk, int window) {
  double pace = e.alpha_s / window + chunk * e.beta_spb;
  return mean > pace ? mean : pace;
}

double gcomp_cost_ring_nodes(const gcomp_plan_in *in) {
  int n = in->n, nodes = in->nnodes;
  double m = (double)in->bytes;
  if (n <= 1) return 0;
  if (nodes < 2 || nodes >= n) return gcomp_cost_ring(n, m, gcomp_cost_flat_link(in), in->gamma_spb);
  double L = (double)n / nodes, chunk = m / n;
  double t_intra = in->intra.alpha_s + chunk * in->intra.beta_spb;
  double t_inter = in->inter.alpha_s + chunk * in->inter.beta_spb;
  double mean = ((L - 1) * t_intra + t_inter) / L;
  int ag_window = n <= 9 ? n - 1 : 8;
  return (n - 1) * (ring_step(mean, in->inter, chunk, 2) +
                    ring_step(mean, in->inter, chunk, ag_window)) +
         t_inter + (double)(n - 1) / n * m * in->gamma_spb;
}

/* folding a non-power-of-two group costs one whole-vector step before and after */
static double fold_cost(int n, double m, gcomp_link l, double gamma) {
  int p = 1 << log2_floor(n);
  return p == n ? 0 : 2.0 * (l.alpha_s + m * l.beta_spb) + m * gamma;
}

double gcomp_cost_rhd(int n, double m, gcomp_link l, double gamma) {
  if (n <= 1) return 0;
  int k = log2_floor(n), p = 1 << k;
  return 2.0 * k * l.alpha_s + 2.0 * (p - 1) / p * m * l.beta_spb +
         (double)(p - 1) / p * m * gamma + fold_cost(n, m, l, gamma);
}

double gcomp_cost_rd(int n, double m, gcomp_link l, double gamma) {
  if (n <= 1) return 0;
  int k = log2_floor(n);
  return k * (l.alpha_s + m * l.beta_spb + m * gamma) + fold_cost(n, m, l, gamma);
}

/* direct: n-1 frames out and in, twice (shards to owners, reduced shards back); the codec
 * runs over the whole vector once each way, plus the owner's decode of n contributions */
double gcomp_cost_direct(int n, double m, gcomp_link l, const gcomp_plan_in *in) {
  if (n <= 1) return m * in->codec_spb;
  double wire = 2.0 * (n - 1) / n * m * in->ratio;
  return 2.0 * (n - 1) * l.alpha_s + wire * l.beta_spb + 2.0 * m * in->codec_spb +
         (double)(n - 1) / n * m * in->gamma_spb;
}

/* sparse: the whole frame to each of n-1 peers; n frames decoded and added */
double gcomp_cost_sparse(int n, double m, gcomp_link l, const gcomp_plan_in *in) {
  if (n <= 1) return m * in->codec_spb;
  double frame = m * in->ratio;
  return (n - 1) * (l.alpha_s + frame * l.beta_spb) +
         m * in->codec_spb * (1.0 + (n - 1) * in->ratio);
}

/* flat algorithms run at the pace of the slowest link they cross */
gcomp_link gcomp_cost_flat_link(const gcomp_plan_in *in) {
  return in->nnodes > 1 ? in->inter : in->intra;
}

/* ... and when every rank of a node crosses it at once (recursive doubling's cross-node
 * steps, direct's and sparse's all-to-all), the node's link is shared local ways. The ring
 * (one edge per node crosses) and halving/doubling (whose cross-node steps carry 1/local of
 * the vector per rank) need no such correction. */
gcomp_link gcomp_cost_shared_link(const gcomp_plan_in *in) {
  gcomp_link l = gcomp_cost_flat_link(in);
  int local = in->local ? in->local : in->local_max;   /* uneven: the fullest node's */
  if (in->nnodes > 1 && local > 1) l.beta_spb *= local;
  return l;
}

/* the shared-memory allreduce of one node: rounds of shm_slot bytes */
double gcomp_cost_shm(const gcomp_plan_in *in) {
  if (in->nnodes != 1 || in->shm_alpha == 0 || !in->shm_slot) return -1;
  if (in->shm_alpha < 0) return 1e30;   /* not calibrated (GCOMP_ALPHA_BETA): only on request */
  double rounds = in->bytes ? (double)((in->bytes + in->shm_slot - 1) / in->shm_slot) : 1;
  return rounds * in->shm_alpha + (double)in->bytes * in->shm_spb;
}
