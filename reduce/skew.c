/* Straggler detection: the bookkeeping (the exchanges themselves are in comm.c). */
#include "skew.h"

#include <stdlib.h>
#include <string.h>

int gcomp_skew_init(gcomp_skew *s, int window, int size) {
  memset(s, 0, sizeof *s);
  s->mine.worst_rank = -1;
  if (window <= 0 || size < 2) return GCOMP_OK;
  s->own = malloc((size_t)window * sizeof *s->own);
  s->vec = malloc(2 * (size_t)window * sizeof *s->vec);
  s->trace_at = malloc((size_t)window * sizeof *s->trace_at);
  s->late = malloc((size_t)window * sizeof *s->late);
  s->sorted = malloc((size_t)window * sizeof *s->sorted);
  s->table = calloc(5 * (size_t)size, sizeof *s->table);
  if (!s->own || !s->vec || !s->trace_at || !s->late || !s->sorted || !s->table) {
    gcomp_skew_free(s);
    GCOMP_FAIL(GCOMP_ERR_NOMEM, "straggler detection: buffers for a window of %d calls", window);
  }
  s->window = window;
  s->size = size;
  return GCOMP_OK;
}

void gcomp_skew_free(gcomp_skew *s) {
  free(s->own);
  free(s->vec);
  free(s->trace_at);
  free(s->late);
  free(s->sorted);
  free(s->table);
  s->own = NULL, s->vec = NULL, s->trace_at = NULL, s->late = NULL, s->sorted = NULL, s->table = NULL;
  s->window = 0;
}

static int32_t bits_of(float x) {
  int32_t b;
  memcpy(&b, &x, sizeof b);
  return b;
}

static float float_of(int32_t b) {
  float x;
  memcpy(&x, &b, sizeof x);
  return x;
}

/* After the first exchange: the longest and the shortest time of call i over the ranks */
static float longest(const gcomp_skew *s, int i) { return float_of(s->vec[i]); }
static float shortest(const gcomp_skew *s, int i) { return float_of(-s->vec[s->n + i]); }

size_t gcomp_skew_vec(gcomp_skew *s) {
  for (int i = 0; i < s->n; i++) {
    int32_t b = bits_of(s->own[i]);   /* own >= 0 (gcomp_skew_note): no sign bit */
    s->vec[i] = b;
    s->vec[s->n + i] = -b;   /* MAX of the negation: the shortest time */
  }
  return 2 * (size_t)s->n;
}

/* The median of x[0..n) (n >= 1), by selection: x is reordered. */
static double median(double *x, int n) {
  int lo = 0, hi = n - 1, k = n / 2;
  while (lo < hi) {   /* Hoare's selection: O(n) on average, no full sort per window */
    double pivot = x[lo + (hi - lo) / 2];
    int i = lo, j = hi;
    while (i <= j) {
      while (x[i] < pivot) i++;
      while (x[j] > pivot) j--;
      if (i <= j) {
        double t = x[i];
        x[i++] = x[j], x[j--] = t;
      }
    }
    if (k <= j) hi = j;
    else if (k >= i) lo = i;
    else break;
  }
  return x[k];
}

/* The window's medians folded into the running means over windows. */
static void absorb_typical(gcomp_skew *s) {
  memcpy(s->sorted, s->late, (size_t)s->n * sizeof *s->sorted);
  double late = median(s->sorted, s->n);
  for (int i = 0; i < s->n; i++) s->sorted[i] = (double)(longest(s, i) - shortest(s, i)) * 1e-6;
  double spread = median(s->sorted, s->n);
  double w = (double)s->windows;
  s->late_typical_s = (s->late_typical_s * w + late) / (w + 1);
  s->spread_typical_s = (s->spread_typical_s * w + spread) / (w + 1);
  s->windows++;
}

size_t gcomp_skew_absorb(gcomp_skew *s, int rank) {
  gcomp_skew_stats *m = &s->mine;
  double sum = m->late_mean_s * (double)m->calls, spread = m->spread_mean_s * (double)m->calls;
  for (int i = 0; i < s->n; i++) {
    float hi = longest(s, i), lo = shortest(s, i);
    double late = (double)(hi - s->own[i]) * 1e-6;
    s->late[i] = late;
    sum += late;
    spread += (double)(hi - lo) * 1e-6;
    if (late > m->late_max_s) m->late_max_s = late, s->late_max_call = m->calls + (uint64_t)i + 1;
    if (s->own[i] == lo) m->last++;   /* ties all count: they arrived together */
    s->waited_s += gcomp_skew_waited(s, i);
  }
  if (s->n) absorb_typical(s);
  m->calls += (uint64_t)s->n;
  m->late_mean_s = sum / (double)m->calls;
  m->spread_mean_s = spread / (double)m->calls;
  memset(s->table, 0, 5 * (size_t)s->size * sizeof *s->table);
  s->table[3 * rank] = m->late_mean_s;
  s->table[3 * rank + 1] = m->late_max_s;
  s->table[3 * rank + 2] = (double)m->last;
  s->table[3 * (size_t)s->size + 2 * (size_t)rank] = s->late_typical_s;
  s->table[3 * (size_t)s->size + 2 * (size_t)rank + 1] = (double)s->late_max_call;
  return 5 * (size_t)s->size;
}

double gcomp_skew_waited(const gcomp_skew *s, int i) {
  return (double)(s->own[i] - shortest(s, i)) * 1e-6;
}

double gcomp_skew_rank_typical(const gcomp_skew *s, int r) {
  return s->table && r >= 0 && r < s->size ? s->table[3 * (size_t)s->size + 2 * (size_t)r] : 0;
}

uint64_t gcomp_skew_rank_max_call(const gcomp_skew *s, int r) {
  return s->table && r >= 0 && r < s->size
             ? (uint64_t)s->table[3 * (size_t)s->size + 2 * (size_t)r + 1]
             : 0;
}

void gcomp_skew_finish(gcomp_skew *s) {
  gcomp_skew_stats *m = &s->mine;
  m->worst_rank = 0;
  for (int r = 1; r < s->size; r++)
    if (s->table[3 * r] > s->table[3 * m->worst_rank]) m->worst_rank = r;
  m->worst_late_mean_s = s->table[3 * m->worst_rank];
  m->worst_last = (uint64_t)s->table[3 * m->worst_rank + 2];
  s->n = 0;
}
