/* Numbers that machines read back (codec specs, residual files, JSON stats and traces,
 * GCOMP_* values) in the "C" locale, whatever the host program set: after
 * setlocale(LC_ALL, "de_DE.UTF-8") printf writes 0,5 and strtod stops at the '.' of 0.5. */
#include <locale.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "gcomp_common.h"

static locale_t c_locale;
static pthread_once_t c_once = PTHREAD_ONCE_INIT;

static void make_c_locale(void) { c_locale = newlocale(LC_ALL_MASK, "C", (locale_t)0); }

locale_t gcomp_c_locale(void) {
  pthread_once(&c_once, make_c_locale);
  return c_locale ? c_locale : LC_GLOBAL_LOCALE;   /* (locale_t)0 only when out of memory */
}

double gcomp_strtod(const char *text, char **end) {
  locale_t c = gcomp_c_locale();
  return c != LC_GLOBAL_LOCALE ? strtod_l(text, end, c) : strtod(text, end);
}

size_t gcomp_dtoa(char *buf, size_t n, double v) {
  locale_t old = uselocale(gcomp_c_locale());
  int len = 0;
  for (int prec = 6; prec <= 17; prec++) {   /* the shortest form that reads back equal */
    len = snprintf(buf, n, "%.*g", prec, v);
    if (len < 0 || (size_t)len >= n || strtod(buf, NULL) == v) break;
  }
  uselocale(old);
  return len < 0 ? 0 : (size_t)len;
}
