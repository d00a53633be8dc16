/* Internal: straggler detection. Every `window` calls the ranks compare how long each
 * spent inside each call. A call ends at nearly the same moment on every rank (the last
 * message lands everywhere within one step's latency), so the rank that spent the least
 * time arrived last, and rank r arrived (longest - its own) after the first one. No clocks
 * are compared, so nodes need no clock synchronisation. */
#ifndef GCOMP_SKEW_H
#define GCOMP_SKEW_H

#include <stddef.h>
#include <stdint.h>

#include "gcomp.h"
#include "gcomp_common.h"

typedef struct {
  int window;          /* calls per exchange; 0: off */
  int size;            /* ranks */
  int n;               /* calls recorded in the current window */
  float *own;          /* [window] this rank's time in each call, microseconds */
  /* [2 * window] what the first exchange reduces (an int32 MAX): own's bits, then their
   * negation. A non-negative float orders as its bits do as a signed integer, so the MAX
   * finds the longest time and the shortest exactly, and the integer MAX runs in SIMD where
   * the float one (NaN propagating) took 12 instructions an element, ~20 a call amortised */
  int32_t *vec;
  size_t *trace_at;    /* [window] the trace event of each call, or SIZE_MAX */
  double *late;        /* [window] after the first exchange: how late this rank was (s) */
  double *sorted;      /* [window] scratch for the window's medians */
  /* [5 * size]: per rank mean lateness (s), max lateness (s), calls last (3 per rank), then
   * per rank its typical lateness (s) and the call of its longest lateness (2 per rank) */
  double *table;
  gcomp_skew_stats mine;   /* this rank's figures (worst_* filled from the table) */
  double exchange_s;   /* time spent exchanging */
  /* Robust figures, which one long pause does not move (a checkpoint on one rank once): the
   * mean over windows of each window's median, of this rank's lateness and of the calls'
   * first-to-last spread (the same on every rank); and the call (counted from 1) at which
   * this rank was latest, 0 before the first window. */
  double late_typical_s, spread_typical_s;
  uint64_t late_max_call;
  uint64_t windows;    /* windows folded in */
  /* over the windows folded in: this rank's time inside its calls less the last
   * arrival's, the time it waited for the last rank to arrive */
  double waited_s;
} gcomp_skew;

/* window 0 (or size 1) leaves the detector off; it still answers queries. */
int gcomp_skew_init(gcomp_skew *s, int window, int size);
void gcomp_skew_free(gcomp_skew *s);

/* Records one call (time between the rank's arrival and the call's end); returns 1 when
 * the window is full and the exchange is due. Inline: every call pays it. */
static inline int gcomp_skew_note(gcomp_skew *s, double seconds, size_t trace_at) {
  if (!s->window) return 0;
  float us = (float)(seconds * 1e6);
  s->own[s->n] = us > 0 ? us : 0;   /* never -0 or NaN: gcomp_skew_vec orders the bits */
  s->trace_at[s->n] = trace_at;
  return ++s->n == s->window;
}

/* The first exchange: fills vec (2 * n int32) for a MAX allreduce (GCOMP_INT32). */
size_t gcomp_skew_vec(gcomp_skew *s);

/* After the first exchange: folds the window into this rank's figures and late[0..n), and
 * fills the table row of `rank` (the other rows zero) for the second MAX allreduce;
 * returns the table's length. */
size_t gcomp_skew_absorb(gcomp_skew *s, int rank);

/* After the first exchange: how long this rank waited at call i of the window for the
 * last rank to arrive (its time inside less the last arrival's), seconds */
double gcomp_skew_waited(const gcomp_skew *s, int i);

/* The table's figures of rank r after the second exchange: typical lateness and the call of
 * its longest. */
double gcomp_skew_rank_typical(const gcomp_skew *s, int r);
uint64_t gcomp_skew_rank_max_call(const gcomp_skew *s, int r);

/* After the second exchange: takes the worst rank from the table, starts a new window. */
void gcomp_skew_finish(gcomp_skew *s);

#endif /* GCOMP_SKEW_H */
