/* Hierarchical allreduce: reduce-scatter inside each node, allreduce of every shard across
 * nodes (each local rank carries its share, so all local ranks drive the fabric at once and
 * each node sends one reduced payload in total), allgather inside the node.
 *
 * Nodes may hold different numbers of ranks (a split of a job, a job that does not fill its
 * last node). Each node cuts the vector into one chunk per local rank (gcomp_chunk over its
 * own rank count), so the cross-node step works on pieces: the stretches between the cuts
 * of all nodes together. A piece lies inside one chunk on every node, so one rank per node
 * holds its node's partial sum of it, and those ranks allreduce it. With equal nodes the
 * pieces are the chunks and each rank carries one; otherwise a rank of a smaller node
 * carries several, one after the other and in one order on every rank (order_pieces), so
 * no two ranks wait for each other in opposite orders. */
#include <stdlib.h>
#include <string.h>

#include "coll.h"

/* Pieces after the first run under tag sequences of their own (piece_seq): 16 at most. */
enum { MAX_PIECES = 16 };

typedef struct {
  int npieces;
  size_t cut[MAX_PIECES + 1];   /* piece k is [cut[k], cut[k + 1]) */
  int *holder;                  /* [npieces][nnodes]: the rank holding piece k on node j */
  int even;                     /* every node holds the same number of ranks */
  int order[MAX_PIECES];        /* the pieces in the order every rank runs its own */
} layout;

/* Pieces k and j have a holder in common */
static int share_holder(const layout *lay, int M, int k, int j) {
  for (int n = 0; n < M; n++)
    if (lay->holder[k * M + n] == lay->holder[j * M + n]) return 1;
  return 0;
}

/* The order of the pieces: in rounds of pieces with no holder in common (greedy, in piece
 * order), round by round. In piece order alone, consecutive pieces share a holder and
 * each waits for the one before (3 + 2 ranks: four allreduces one after the other); in
 * rounds, pieces of one round cross at once (two rounds there). Every rank follows the
 * same total order, so the first unfinished piece always has all its holders at it. */
static void order_pieces(layout *lay, int M) {
  int round[MAX_PIECES], n = 0;
  for (int k = 0; k < lay->npieces; k++) {
    int r = 0;
    for (int j = 0; j < k; j++)
      if (round[j] == r && share_holder(lay, M, k, j)) r++, j = -1;   /* try the next round */
    round[k] = r;
  }
  for (int r = 0; n < lay->npieces; r++)
    for (int k = 0; k < lay->npieces; k++)
      if (round[k] == r) lay->order[n++] = k;
}

static int cmp_size(const void *a, const void *b) {
  size_t x = *(const size_t *)a, y = *(const size_t *)b;
  return x < y ? -1 : x > y;
}

/* Ranks per node into count[nnodes]; returns 1 when all nodes hold the same number. */
static int node_counts(const gcomp_transport *t, int *count) {
  memset(count, 0, (size_t)t->nnodes * sizeof *count);
  for (int r = 0; r < t->size; r++) count[t->node_of[r]]++;
  int even = 1;
  for (int j = 1; j < t->nnodes; j++) even &= count[j] == count[0];
  return even;
}

/* The distinct cuts of count elements over nodes of count[j] ranks into cut[], ascending,
 * empty pieces dropped; the number of pieces, or MAX_PIECES + 1 when there are more. */
static int cuts(size_t count, const int *nodes, int nnodes, size_t *cut) {
  size_t all[4 * MAX_PIECES + 2];
  int n = 0;
  all[n++] = count;
  for (int j = 0; j < nnodes; j++) {
    int seen = 0;   /* one pass per distinct rank count */
    for (int k = 0; k < j && !seen; k++) seen = nodes[k] == nodes[j];
    for (int i = 0; !seen && i < nodes[j]; i++) {
      if (n == (int)(sizeof all / sizeof *all)) return MAX_PIECES + 1;
      size_t off, len;
      gcomp_chunk(count, nodes[j], i, &off, &len);
      all[n++] = off;
    }
  }
  qsort(all, (size_t)n, sizeof *all, cmp_size);
  int m = 0;
  for (int i = 0; i < n; i++)
    if (m == 0 || all[i] != cut[m - 1]) {
      if (m == MAX_PIECES + 1) return MAX_PIECES + 1;
      cut[m++] = all[i];
    }
  return m - 1;   /* cut[0] == 0 and cut[m - 1] == count */
}

/* Least and most ranks on a node, and the pieces a long vector is cut into (for the cost
 * model; more than MAX_PIECES: MAX_PIECES + 1). */
int gcomp_hier_placement(const gcomp_transport *t, int *local_min, int *local_max, int *pieces) {
  int *count = malloc((size_t)t->nnodes * sizeof *count);
  GCOMP_FAIL_IF(!count, GCOMP_ERR_NOMEM, "hier: node table");
  node_counts(t, count);
  int lo = count[0], hi = count[0];
  for (int j = 1; j < t->nnodes; j++) {
    lo = count[j] < lo ? count[j] : lo;
    hi = count[j] > hi ? count[j] : hi;
  }
  /* a multiple of every rank count cuts exactly where the fractions i / L fall */
  size_t lcm = 1;
  for (int j = 0; j < t->nnodes && lcm <= ((size_t)1 << 30); j++) {
    size_t a = lcm, b = (size_t)count[j];
    while (b) {
      size_t r = a % b;
      a = b, b = r;
    }
    lcm = lcm / a * (size_t)count[j];
  }
  size_t cut[MAX_PIECES + 1];
  *pieces = lcm > ((size_t)1 << 30) ? MAX_PIECES + 1 : cuts(lcm, count, t->nnodes, cut);
  free(count);
  *local_min = lo, *local_max = hi;
  return GCOMP_OK;
}

/* A tag sequence for piece k (> 0) of call seq: 2^20 apart from seq and from every other
 * piece's, so it meets no live call's (ranks are at most a call or two apart), and clear of
 * the reserved sequences (GCOMP_SEQ_RESERVED up). With equal nodes every piece's holders are other
 * ranks, so all pieces keep the call's own sequence. */
static uint32_t piece_seq(uint32_t seq, int k) {
  uint32_t s = (seq + (uint32_t)k * 0x100000u) & ((1u << GCOMP_TAG_SEQ_BITS) - 1);
  return s >= GCOMP_SEQ_RESERVED ? s - GCOMP_SEQ_RESERVED_SPAN : s;
}

static int layout_build(const gcomp_transport *t, size_t count, layout *lay) {
  int M = t->nnodes;
  int *count_of = malloc((size_t)M * sizeof *count_of);
  GCOMP_FAIL_IF(!count_of, GCOMP_ERR_NOMEM, "hier: node table");
  lay->even = node_counts(t, count_of);
  lay->npieces = cuts(count, count_of, M, lay->cut);
  lay->holder = NULL;
  int st = GCOMP_OK;
  if (lay->npieces > MAX_PIECES)
    st = gcomp_error_set(GCOMP_ERR_UNSUPPORTED, __FILE__, __LINE__,
                         "hier: the nodes' rank counts cut the vector into more than %d pieces",
                         MAX_PIECES);
  if (st == GCOMP_OK && lay->npieces > 0) {
    lay->holder = malloc((size_t)lay->npieces * (size_t)M * sizeof *lay->holder);
    if (!lay->holder) st = gcomp_error_set(GCOMP_ERR_NOMEM, __FILE__, __LINE__, "hier: pieces");
  }
  /* node j's i-th rank (ascending) holds chunk i of that node's partition */
  int *seen = st == GCOMP_OK ? calloc((size_t)M, sizeof *seen) : NULL;
  if (st == GCOMP_OK && !seen) st = gcomp_error_set(GCOMP_ERR_NOMEM, __FILE__, __LINE__, "hier");
  for (int r = 0; st == GCOMP_OK && r < t->size; r++) {
    int j = t->node_of[r], i = seen[j]++;
    size_t off, len;
    gcomp_chunk(count, count_of[j], i, &off, &len);
    for (int k = 0; k < lay->npieces; k++)
      if (lay->cut[k] >= off && lay->cut[k] < off + len) lay->holder[k * M + j] = r;
  }
  free(seen);
  free(count_of);
  if (st < 0) free(lay->holder), lay->holder = NULL;
  else order_pieces(lay, M);
  return st;
}

/* How a piece crosses the nodes. */
enum { CROSS_DENSE, CROSS_DIRECT, CROSS_SPARSE };

/* Piece k of buf, held here, allreduced among its holders (one per node, in node order). */
static int cross_piece(gcomp_coll *c, const layout *lay, int k, uint8_t *buf, int how) {
  gcomp_transport *t = c->t;
  gcomp_group cross = {lay->holder + (size_t)k * (size_t)t->nnodes, t->nnodes, t->node};
  size_t off = lay->cut[k], len = lay->cut[k + 1] - off;
  gcomp_coll pc = *c;
  if (!lay->even && k > 0) pc.seq = piece_seq(c->seq, k);
  uint8_t *piece = buf + off * c->esize;
  /* the error-feedback slot of the piece: with equal nodes piece k is local rank k's shard,
   * the slot it always had */
  uint64_t salt = 0x100u + (uint64_t)k;
  int st;
  if (how == CROSS_DIRECT) {
    st = gcomp_direct_allreduce(&pc, &cross, (float *)(void *)piece, len, 2, salt);
  } else if (how == CROSS_SPARSE) {
    st = gcomp_sparse_allreduce(&pc, &cross, (float *)(void *)piece, len, 2, salt);
  } else {
    /* the piece's own choice: ring or halving/doubling over the inter-node link */
    double bytes = (double)(len * c->esize);
    double ring = gcomp_cost_ring(cross.n, bytes, c->plan->inter, c->plan->gamma_spb);
    double rhd = gcomp_cost_rhd(cross.n, bytes, c->plan->inter, c->plan->gamma_spb);
    st = ring <= rhd && cross.n <= GCOMP_RING_MAX_RANKS
             ? gcomp_ring_allreduce(&pc, &cross, piece, len, 2)
                     : gcomp_rhd_allreduce(&pc, &cross, piece, len, 2);
  }
  return st;
}

static int hier_run_with(gcomp_coll *c, uint8_t *buf, size_t count, int how) {
  gcomp_transport *t = c->t;
  gcomp_group local = {t->local_ranks, t->local_size, t->local_rank};
  layout lay = {0};
  int st = layout_build(t, count, &lay);
  uint64_t t0 = gcomp_now_ns(), t1 = t0, t2 = t0;
  /* equal nodes with a shared segment: the phases overlap, slice by slice (hier_pipe.c) */
  int slices = st == GCOMP_OK && how == CROSS_DIRECT && c->shm && !c->intra && lay.even &&
                       lay.npieces == t->local_size
                   ? gcomp_hier_pipe_slices(c, count)
                   : 1;
  if (slices > 1) {
    gcomp_group cross = {lay.holder + (size_t)t->local_rank * (size_t)t->nnodes, t->nnodes,
                         t->node};
    st = gcomp_hier_direct_pipelined(c, &cross, buf, count, slices);
    free(lay.holder);
    if (st < 0) return gcomp_error_trace(st, __FILE__, __LINE__);
    GCOMP_TRACE(GCOMP_SUB_REDUCE, "hier %zu B in %d slices, pipelined: %.2f ms", count * c->esize,
                slices, (double)(gcomp_now_ns() - t0) * 1e-6);
    return GCOMP_OK;
  }
  /* inside the node: fp32 by the ring, or GCOMP_INTRA_CODEC by direct exchange */
  if (st == GCOMP_OK && c->intra) {
    gcomp_coll_inplace(c, buf, count);
    st = gcomp_direct_reduce_scatter(c, &local, (float *)(void *)buf, count, 0, 0x200u, c->intra);
  } else if (st == GCOMP_OK && c->shm) {
    st = gcomp_shm_reduce_scatter(c, c->shm, buf, count);   /* the node's shared segment */
    c->src = NULL;   /* buf holds the input's place from here on */
  } else if (st == GCOMP_OK) {
    st = gcomp_ring_reduce_scatter(c, &local, buf, count, 0);
  }
  t1 = gcomp_now_ns();
  /* fp32 inside the node; across it the codec (direct, sparse) or the dense choice */
  for (int i = 0; st == GCOMP_OK && i < lay.npieces; i++) {
    int k = lay.order[i];
    if (lay.holder[(size_t)k * (size_t)t->nnodes + (size_t)t->node] == t->rank)
      st = cross_piece(c, &lay, k, buf, how);
  }
  t2 = gcomp_now_ns();
  if (st == GCOMP_OK && c->intra)
    st = gcomp_direct_allgather(c, &local, (float *)(void *)buf, count, 4, 0x200u, c->intra2);
  else if (st == GCOMP_OK && c->shm)
    st = gcomp_shm_allgather(c, c->shm, buf, count);
  else if (st == GCOMP_OK)
    st = gcomp_ring_allgather(c, &local, buf, count, 4);
  free(lay.holder);
  if (st < 0) return gcomp_error_trace(st, __FILE__, __LINE__);
  GCOMP_TRACE(GCOMP_SUB_REDUCE, "hier %zu B, %d piece(s): in-node reduce-scatter %.2f ms, "
              "across %.2f ms, in-node allgather %.2f ms", count * c->esize, lay.npieces,
              (double)(t1 - t0) * 1e-6, (double)(t2 - t1) * 1e-6,
              (double)(gcomp_now_ns() - t2) * 1e-6);
  return GCOMP_OK;
}

static int hier_run(gcomp_coll *c, uint8_t *buf, size_t count) {
  return hier_run_with(c, buf, count, CROSS_DENSE);
}
static int hier_direct_run(gcomp_coll *c, uint8_t *buf, size_t count) {
  return hier_run_with(c, buf, count, CROSS_DIRECT);
}
static int hier_sparse_run(gcomp_coll *c, uint8_t *buf, size_t count) {
  return hier_run_with(c, buf, count, CROSS_SPARSE);
}

/* Inside the nodes the largest one is the slowest (a ring's volume over local_max ranks).
 * Across them the ranks of the smallest node pace the step: each carries m / local_min
 * bytes, their node's link shared local_min ways (every node sends m bytes in all), in as
 * many allreduces one after the other as pieces fall in its chunk, each past the first
 * paying its latency again. With equal nodes that is hier's usual cost. */
static double hier_cost_with(const gcomp_plan_in *in, int how) {
  int even = in->local > 0;
  int lo = even ? in->local : in->local_min, hi = even ? in->local : in->local_max;
  int pieces = even ? in->local : in->pieces;
  if (in->nnodes < 2 || lo < 1 || pieces > MAX_PIECES) return -1;
  if (hi > GCOMP_RING_MAX_RANKS) return -1;   /* the nodes' rings would refuse the call */
  if (how != CROSS_DENSE && in->ratio <= 0) return -1;
  if (how == CROSS_SPARSE && !in->sparse) return -1;
  double m = (double)in->bytes;
  int M = in->nnodes;
  double intra = gcomp_cost_ring(hi, m, in->intra, in->gamma_spb);
  gcomp_link shared = {in->inter.alpha_s, in->inter.beta_spb * lo};
  int each = (pieces + lo - 1) / lo;   /* pieces the busiest rank carries */
  double extra = (each - 1) * 2.0 * (M - 1) * in->inter.alpha_s;
  if (how == CROSS_DIRECT) return intra + extra + gcomp_cost_direct(M, m / lo, shared, in);
  if (how == CROSS_SPARSE) return intra + extra + gcomp_cost_sparse(M, m / lo, shared, in);
  double ring = gcomp_cost_ring(M, m / lo, shared, in->gamma_spb);
  double rhd = gcomp_cost_rhd(M, m / lo, shared, in->gamma_spb);
  return intra + extra + (ring < rhd ? ring : rhd);
}
static double hier_cost(const gcomp_plan_in *in) { return hier_cost_with(in, CROSS_DENSE); }
static double hier_direct_cost(const gcomp_plan_in *in) { return hier_cost_with(in, CROSS_DIRECT); }
static double hier_sparse_cost(const gcomp_plan_in *in) { return hier_cost_with(in, CROSS_SPARSE); }

const gcomp_algo gcomp_algo_hier = {
    "hier", "reduce-scatter in each node, allreduce of shards across nodes, allgather in node",
    hier_run, hier_cost, 0, GCOMP_COLL_ALLREDUCE};
const gcomp_algo gcomp_algo_hier_direct = {
    "hier-direct", "hier with fp32 inside nodes and the codec's direct exchange across them",
    hier_direct_run, hier_direct_cost, 1, GCOMP_COLL_ALLREDUCE};
const gcomp_algo gcomp_algo_hier_sparse = {
    "hier-sparse", "hier with fp32 inside nodes and top-k frames allgathered across them",
    hier_sparse_run, hier_sparse_cost, 1, GCOMP_COLL_ALLREDUCE};
