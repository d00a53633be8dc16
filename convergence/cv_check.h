/* The harness's own failure macros and helpers. The harness is a program built on gcomp and
 * reaches the library only through gcomp.h: its failures go into the same thread-local
 * detail as the library's (gcomp_error_set, from the in-tree gcomp_internal.h), so that gcomp_last_error() reads alike
 * whichever layer failed. The macros mean what the library's internal ones of the same names
 * mean (common/gcomp_common.h); the two headers are never included together. */
#ifndef GCOMP_CV_CHECK_H
#define GCOMP_CV_CHECK_H

#include <locale.h>
#include <stdarg.h>
#include <stdint.h>

#include "gcomp_internal.h"

#if defined(GCOMP_COMMON_H)
#error "cv_check.h is the harness's: do not mix it with the library's internal header"
#endif

#if defined(__GNUC__)
#define GCOMP_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define GCOMP_PRINTF(f, a)
#endif

#define GCOMP_FAIL(status, ...) return gcomp_error_set((status), __FILE__, __LINE__, __VA_ARGS__)
#define GCOMP_FAIL_IF(cond, status, ...) \
  do { if (cond) GCOMP_FAIL((status), __VA_ARGS__); } while (0)
#define GCOMP_CHECK(call)                                                               \
  do {                                                                                  \
    int cv_check_s_ = (call);                                                           \
    if (cv_check_s_ < 0) return gcomp_error_trace(cv_check_s_, __FILE__, __LINE__);     \
  } while (0)

/* The "C" locale, for the files the harness writes for machines (JSON, JUnit, SVG) */
locale_t gcomp_cv_c_locale(void);
/* CLOCK_MONOTONIC in nanoseconds */
uint64_t gcomp_cv_now_ns(void);

#endif /* GCOMP_CV_CHECK_H */
