/* Reading the GCOMP_STATS files the library writes (reduce/comm.c, write_stats): one JSON
 * object per rank, flat keys, so a key's first occurrence is found by text. Shared by
 * gcomp-plan and gcomp-stats. */
#ifndef GCOMP_STATS_FILE_H
#define GCOMP_STATS_FILE_H

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

#endif /* GCOMP_STATS_FILE_H */
