/* Reading the GCOMP_STATS files the library writes (reduce/comm.c, write_stats): one JSON
 * object per rank, flat keys, so a key's first occurrence is found by text; and the
 * latency/bandwidth crossover both tools report. Shared by gcomp-plan and gcomp-stats. */
#ifndef GCOMP_STATS_FILE_H
#define GCOMP_STATS_FILE_H

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gcomp.h"

/* "key": number, its first occurrence in text: 0 when found, -1 when absent or not a
 * number, -2 when a number out of range or not finite (1e999, nan) */
static inline int stats_number(const char *text, const char *key, double *out) {
  char pat[64];
  snprintf(pat, sizeof pat, "\"%s\":", key);
  const char *p = strstr(text, pat);
  if (!p) return -1;
  char *end;
  errno = 0;
  double v = strtod(p + strlen(pat), &end);
  if (end == p + strlen(pat)) return -1;
  if (errno == ERANGE || !isfinite(v)) return -2;
  *out = v;
  return 0;
}

/* The whole file as a string (malloc'd), or NULL with errno set. */
static inline char *stats_slurp(const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) return NULL;
  size_t cap = 8192, n = 0;
  char *text = malloc(cap);
  for (size_t got; text && (got = fread(text + n, 1, cap - n - 1, f)) > 0;) {
    n += got;
    if (cap - n - 1 == 0) {
      char *p = realloc(text, cap * 2);
      if (!p) free(text);
      text = p, cap *= 2;
    }
  }
  int bad = ferror(f);
  fclose(f);
  if (!text || bad) {
    free(text);
    errno = bad ? EIO : ENOMEM;
    return NULL;
  }
  text[n] = '\0';
  return text;
}

/* The smallest power of two of bytes from which the planner's choice on q's placement is
 * no longer latency-bound (its latency terms at most half its time); 0: none up to 2^50. */
static inline uint64_t plan_crossover_bytes(const gcomp_plan_query *q) {
  gcomp_plan_query at = *q;
  for (at.bytes = 1; at.bytes <= (uint64_t)1 << 50; at.bytes *= 2) {
    gcomp_plan_result r = {.struct_size = sizeof r};
    if (gcomp_plan_predict(&at, NULL, &r) == GCOMP_OK && r.latency_s <= r.time_s / 2)
      return at.bytes;
  }
  return 0;
}

#endif /* GCOMP_STATS_FILE_H */
