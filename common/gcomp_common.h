/* Internal: errors, parameters, logging and CPU detection. Depends on nothing but libc. */
#ifndef GCOMP_COMMON_H
#define GCOMP_COMMON_H

#include <locale.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "gcomp.h"

#if defined(__GNUC__)
#define GCOMP_PRINTF(f, a) __attribute__((format(printf, f, a)))
#define GCOMP_LIKELY(x) __builtin_expect(!!(x), 1)
#define GCOMP_UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#define GCOMP_PRINTF(f, a)
#define GCOMP_LIKELY(x) (x)
#define GCOMP_UNLIKELY(x) (x)
#endif

/* ---- errors --------------------------------------------------------------------------
 * gcomp_error_set records "message [file:line]" as the thread's last error and returns
 * status. gcomp_error_trace appends " <- file:line" so propagation leaves a trace. */
int gcomp_error_set(int status, const char *file, int line, const char *fmt, ...)
    GCOMP_PRINTF(4, 5);
int gcomp_error_trace(int status, const char *file, int line);
void gcomp_error_clear(void);
int gcomp_error_restore(int status, const char *detail); /* sets the detail verbatim */

#define GCOMP_FAIL_IF(cond, status, ...)                                   \
  do {                                                                     \
    if (GCOMP_UNLIKELY(cond))                                              \
      return gcomp_error_set((status), __FILE__, __LINE__, __VA_ARGS__);   \
  } while (0)

#define GCOMP_FAIL(status, ...) return gcomp_error_set((status), __FILE__, __LINE__, __VA_ARGS__)

#define GCOMP_CHECK(call)                                                  \
  do {                                                                     \
    int gcomp_check_s_ = (call);                                           \
    if (GCOMP_UNLIKELY(gcomp_check_s_ < 0))                                \
      return gcomp_error_trace(gcomp_check_s_, __FILE__, __LINE__);        \
  } while (0)

/* ---- parameters ----------------------------------------------------------------------
 * The registry lives in common/param_list.h; this is the only place in gcomp that reads
 * the environment. Values are read once (gcomp_init) and validated. */
typedef enum {
#define GCOMP_PARAM(id, type, dflt, extra, help) GCOMP_P_##id,
#include "param_list.h"
#undef GCOMP_PARAM
  GCOMP_P_COUNT_
} gcomp_param_id;

int64_t gcomp_param_int(gcomp_param_id id);        /* int, size, bool, enum (index) */
const char *gcomp_param_str(gcomp_param_id id);    /* the text value ("" when unset) */
int gcomp_param_is_set(gcomp_param_id id);
const char *gcomp_param_name(gcomp_param_id id);   /* "GCOMP_TIMEOUT_MS" */

/* Launchers' own variables (RANK, OMPI_COMM_WORLD_SIZE, SLURM_PROCID, ...); NULL when unset. */
const char *gcomp_env_foreign(const char *name);

int gcomp_param_load(void);     /* called by gcomp_init */
void gcomp_param_report(void);  /* logs set values, warns about unknown GCOMP_* names */

/* Re-reads the environment. Not thread-safe: for tests and tools only. */
int gcomp_reinit_for_testing(void);

/* Parses a byte count with an optional k/m/g suffix (powers of 1024). */
int gcomp_parse_size(const char *text, int64_t *out);

/* ---- logging -------------------------------------------------------------------------- */
enum { GCOMP_LOG_NONE = 0, GCOMP_LOG_WARN = 1, GCOMP_LOG_INFO = 2, GCOMP_LOG_TRACE = 3 };
enum {
  GCOMP_SUB_INIT = 1u << 0,
  GCOMP_SUB_CODEC = 1u << 1,
  GCOMP_SUB_REDUCE = 1u << 2,
  GCOMP_SUB_FABRIC = 1u << 3,
  GCOMP_SUB_TUNING = 1u << 4,
  GCOMP_SUB_ENV = 1u << 5,
  GCOMP_SUB_SHIM = 1u << 6,
  GCOMP_SUB_ALL = 0x7fu
};
extern _Atomic int gcomp_log_level;
extern _Atomic unsigned gcomp_log_subsys;

void gcomp_log_emit(int level, unsigned subsys, const char *file, int line, const char *fmt, ...)
    GCOMP_PRINTF(5, 6);

/* The level and subsystem are checked before any argument is formatted. */
#define GCOMP_LOG(level, subsys, ...)                                          \
  do {                                                                         \
    if (GCOMP_UNLIKELY(gcomp_log_level >= (level)) && (gcomp_log_subsys & (subsys))) \
      gcomp_log_emit((level), (subsys), __FILE__, __LINE__, __VA_ARGS__);      \
  } while (0)
#define GCOMP_WARN(subsys, ...) GCOMP_LOG(GCOMP_LOG_WARN, subsys, __VA_ARGS__)
#define GCOMP_INFO(subsys, ...) GCOMP_LOG(GCOMP_LOG_INFO, subsys, __VA_ARGS__)
#define GCOMP_TRACE(subsys, ...) GCOMP_LOG(GCOMP_LOG_TRACE, subsys, __VA_ARGS__)

/* Expands %h (host name), %p (pid) and, when rank >= 0, %r (rank) in an output path. */
size_t gcomp_path_expand(const char *pattern, int rank, char *out, size_t n);

int gcomp_log_open(void);   /* applies GCOMP_DEBUG, GCOMP_DEBUG_SUBSYS, GCOMP_DEBUG_FILE */
void gcomp_log_close(void);

/* ---- CPU ------------------------------------------------------------------------------ */
enum {
  GCOMP_CPU_SSE2 = 1u << 0,
  GCOMP_CPU_SSE42 = 1u << 1,
  GCOMP_CPU_AVX = 1u << 2,
  GCOMP_CPU_AVX2 = 1u << 3,
  GCOMP_CPU_F16C = 1u << 4,
  GCOMP_CPU_FMA = 1u << 5,
  GCOMP_CPU_BMI2 = 1u << 6,
  GCOMP_CPU_AVX512F = 1u << 7,
  GCOMP_CPU_AVX512BW = 1u << 8,
  GCOMP_CPU_AVX512VL = 1u << 9,
  GCOMP_CPU_AVX512BF16 = 1u << 10,
  GCOMP_CPU_AVX512FP16 = 1u << 11
};
typedef enum { GCOMP_ISA_BASE = 0, GCOMP_ISA_AVX2 = 1, GCOMP_ISA_AVX512 = 2 } gcomp_isa;

unsigned gcomp_cpu_detect(void);          /* feature bits, from CPUID and XGETBV */
gcomp_isa gcomp_isa_best_level(unsigned features);
const char *gcomp_isa_name(gcomp_isa isa);
/* The level chosen at init (GCOMP_ISA, capped by the CPU). */
gcomp_isa gcomp_isa_level(void);
int gcomp_cpu_select(void);               /* called by gcomp_init */

/* ---- small helpers -------------------------------------------------------------------- */
uint64_t gcomp_now_ns(void);   /* CLOCK_MONOTONIC */

/* Numbers for machines, in the "C" locale whatever the host program's setlocale: specs,
 * residual files and JSON must read back the same under de_DE (where printf writes 0,5).
 * gcomp_dtoa writes the shortest %g form that reads back as the same double (returns the
 * length, as snprintf). Text output for machines goes between
 * old = uselocale(gcomp_c_locale()) and uselocale(old). */
locale_t gcomp_c_locale(void);
double gcomp_strtod(const char *text, char **end);
size_t gcomp_dtoa(char *buf, size_t n, double v);

#endif /* GCOMP_COMMON_H */
