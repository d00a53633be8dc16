/*
 * gcomp_internal.h — NOT part of gcomp's API, and not installed.
 *
 * What the layers built beside the library in this tree (the MPI shim, the convergence
 * harness, the tools and the tests) share with it: one thread-local error detail, one log,
 * and numbers in the "C" locale. They link the static library (gcomp_static); these
 * functions are not exported from libgcomp.so, and may change in any release. A program
 * outside this tree uses gcomp.h alone.
 */
#ifndef GCOMP_INTERNAL_H
#define GCOMP_INTERNAL_H

#include "gcomp.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Failures of the layers built on gcomp go through the same thread-local detail, so that
 * gcomp_last_error() reads alike whichever layer failed. gcomp_error_set records
 * "message [file:line]" and returns status; gcomp_error_trace appends " <- file:line" to
 * the detail (propagation leaves a trace) and returns status; gcomp_error_restore sets the
 * detail verbatim (a detail carried from another thread) and returns status. */
int gcomp_error_set(int status, const char *file, int line, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;
int gcomp_error_trace(int status, const char *file, int line);
int gcomp_error_restore(int status, const char *detail);

/* Logging: messages go where the library's go (GCOMP_DEBUG_FILE, else stderr), in the same
 * format, filtered by GCOMP_DEBUG and GCOMP_DEBUG_SUBSYS. subsys is one of "init", "codec",
 * "reduce", "fabric", "tuning", "env", "shim"; another name is never enabled. Thread-safe. */
enum { GCOMP_LOG_WARN = 1, GCOMP_LOG_INFO = 2, GCOMP_LOG_TRACE = 3 };
/* 1 when a message of this level and subsystem would be written: check it before
 * formatting anything costly. */
int gcomp_log_enabled(int level, const char *subsys);
/* Writes one line (when enabled); file and line name the caller's source (may be NULL, 0). */
void gcomp_log_message(int level, const char *subsys, const char *file, int line,
                       const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 5, 6)))
#endif
    ;

/* Numbers in the "C" locale whatever the program's setlocale, as specs and gcomp's files
 * write them: gcomp_strtod reads like strtod ("0.5" under de_DE too); gcomp_dtoa writes the
 * shortest %g form that reads back as the same double and returns its length, like
 * snprintf. */
double gcomp_strtod(const char *text, char **end);
size_t gcomp_dtoa(char *buf, size_t n, double v);

/* A byte count as gcomp's settings write it (4096, 64k, 1M, 2GiB: powers of 1024) into
 * *out; 0, or GCOMP_ERR_INVALID when text is not one. */
int gcomp_parse_size(const char *text, int64_t *out);

#ifdef __cplusplus
}
#endif
#endif /* GCOMP_INTERNAL_H */
