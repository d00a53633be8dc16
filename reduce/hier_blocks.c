/* Where each rank's block lies during a hierarchical reduce_scatter or allgather
 * (coll_hier.h). Uneven nodes are cut into sub-nodes of equal size, the greatest common
 * divisor of the nodes' rank counts: 4 + 2 ranks are three sub-nodes of 2, 2 + 1 three of 1
 * (the flat exchange, which is what such a placement gets). Every level then works on
 * whole blocks, with the same building blocks as equal nodes. */
#include <stdlib.h>
#include <string.h>

#include "coll_hier.h"

static int gcd(int a, int b) {
  while (b) {
    int r = a % b;
    a = b, b = r;
  }
  return a;
}

void gcomp_hier_blocks_free(gcomp_hier_blocks *h) {
  free(h->in), free(h->cross), free(h->pos);
  h->in = h->cross = h->pos = NULL;
}

int gcomp_hier_blocks_runs(const gcomp_hier_blocks *h) {
  for (int r = 0; r < h->g * h->nsub; r++)
    if (h->pos[r] != (r % h->g) * h->nsub + r / h->g) return 0;
  return 1;
}

int gcomp_hier_blocks_make(const gcomp_transport *t, gcomp_hier_blocks *h) {
  int n = t->size, M = t->nnodes;
  memset(h, 0, sizeof *h);
  int *cnt = calloc((size_t)M, sizeof *cnt), *base = calloc((size_t)M, sizeof *base);
  int *sub = malloc((size_t)n * sizeof *sub), *idx = malloc((size_t)n * sizeof *idx);
  h->pos = malloc((size_t)n * sizeof *h->pos);
  if (!cnt || !base || !sub || !idx || !h->pos) {
    free(cnt), free(base), free(sub), free(idx), gcomp_hier_blocks_free(h);
    GCOMP_FAIL(GCOMP_ERR_NOMEM, "hierarchical blocks of %d ranks", n);
  }
  for (int r = 0; r < n; r++) cnt[t->node_of[r]]++;
  int g = 0;
  for (int j = 0; j < M; j++) g = gcd(g, cnt[j]);
  for (int j = 1; j < M; j++) base[j] = base[j - 1] + cnt[j - 1] / g;   /* first sub-node */
  memset(cnt, 0, (size_t)M * sizeof *cnt);
  for (int r = 0; r < n; r++) {   /* ranks ascending: local order on every node */
    int j = t->node_of[r], local = cnt[j]++;
    sub[r] = base[j] + local / g, idx[r] = local % g;
  }
  h->g = g, h->nsub = n / g;
  h->sub = sub[t->rank], h->idx = idx[t->rank];
  h->whole = g == t->local_size && h->nsub == M;
  h->identity = 1;
  h->in = malloc((size_t)g * sizeof *h->in);
  h->cross = malloc((size_t)h->nsub * sizeof *h->cross);
  int st = h->in && h->cross ? GCOMP_OK
                             : gcomp_error_set(GCOMP_ERR_NOMEM, __FILE__, __LINE__, "hier blocks");
  for (int r = 0; st == GCOMP_OK && r < n; r++) {
    h->pos[r] = idx[r] * h->nsub + sub[r];
    h->identity &= h->pos[r] == r;
    if (sub[r] == h->sub) h->in[idx[r]] = r;
    if (idx[r] == h->idx) h->cross[sub[r]] = r;
  }
  free(cnt), free(base), free(sub), free(idx);
  if (st < 0) gcomp_hier_blocks_free(h);
  return st;
}

/* Follows each cycle of the permutation once: the block at the cycle's start is parked in
 * the scratch, and every other block moves into the place its successor left. */
int gcomp_hier_blocks_move(gcomp_coll *c, const gcomp_hier_blocks *h, uint8_t *buf, size_t block,
                           int to_pos) {
  int n = h->g * h->nsub;
  size_t bytes = block * c->esize;
  if (h->identity || !bytes) return GCOMP_OK;
  uint8_t *done = calloc((size_t)n, 1);
  GCOMP_FAIL_IF(!done, GCOMP_ERR_NOMEM, "hier blocks: %d ranks", n);
  int st = gcomp_coll_reserve(c, bytes);
  uint8_t *park = gcomp_coll_tmp(c);
  /* to_pos: the block at position p comes from rank src(p), where pos[src(p)] == p */
  int *from = st == GCOMP_OK ? malloc((size_t)n * sizeof *from) : NULL;
  if (st == GCOMP_OK && !from) st = gcomp_error_set(GCOMP_ERR_NOMEM, __FILE__, __LINE__, "hier");
  for (int r = 0; st == GCOMP_OK && r < n; r++) {
    if (to_pos) from[h->pos[r]] = r;
    else from[r] = h->pos[r];
  }
  for (int s = 0; st == GCOMP_OK && s < n; s++) {
    if (done[s] || from[s] == s) continue;
    memcpy(park, buf + (size_t)s * bytes, bytes);
    int p = s;
    for (; from[p] != s; p = from[p]) {
      memcpy(buf + (size_t)p * bytes, buf + (size_t)from[p] * bytes, bytes);
      done[p] = 1;
    }
    memcpy(buf + (size_t)p * bytes, park, bytes);
    done[p] = 1;
  }
  free(from), free(done);
  return st;
}

int gcomp_hier_blocks_g(const gcomp_plan_in *in) { return in->local > 0 ? in->local : 1; }
