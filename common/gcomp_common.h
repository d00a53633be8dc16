/* Internal: errors, parameters, logging and CPU detection. Depends on nothing but libc. */
#ifndef GCOMP_COMMON_H
#define GCOMP_COMMON_H

#include <locale.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "gcomp_internal.h"

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
 * gcomp_error_set, gcomp_error_trace and gcomp_error_restore: include/gcomp_internal.h. */
void gcomp_error_clear(void);

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

/* The environment's values. A communicator reads its own table (gcomp_settings_* below);
 * the layer under reduce/ gets what it needs of it passed down (fabric/transport.h). */
int64_t gcomp_param_int(gcomp_param_id id);        /* int, size, bool, enum (index) */
const char *gcomp_param_str(gcomp_param_id id);    /* the text value (the default when unset) */
int gcomp_param_is_set(gcomp_param_id id);
const char *gcomp_param_name(gcomp_param_id id);   /* "GCOMP_TIMEOUT_MS" */

/* One table of settings: a value for every parameter. The environment's is one (what
 * gcomp_param_* read); a gcomp_config holds another; a communicator copies one at creation
 * and reads only its own afterwards, so nothing a call does depends on the environment or
 * on another communicator's config. Zero-initialise before the first copy. */
/* Calibration figures a communicator created with a table may take instead of measuring
 * them (gcomp_comm_split, gcomp_comm_dup, gcomp_config_share_calibration); what they are is
 * reduce/calib.c's business. n == 0: none. */
enum { GCOMP_INHERIT_MAX = 12 };
typedef struct {
  int n;
  double f[GCOMP_INHERIT_MAX];
} gcomp_inherit;

typedef struct gcomp_settings {
  char *text[GCOMP_P_COUNT_];   /* owned copy of the value as given; NULL: unset (default) */
  int64_t ival[GCOMP_P_COUNT_];
  gcomp_inherit inherit;        /* figures to take instead of calibrating (copied along) */
} gcomp_settings;

/* dst (zeroed or freed) becomes a copy of src; NULL copies the environment's (gcomp_init
 * must have succeeded). On failure dst is left empty. */
int gcomp_settings_copy(gcomp_settings *dst, const gcomp_settings *src);
void gcomp_settings_free(gcomp_settings *s);   /* back to zero */
/* name with or without "GCOMP_"; refuses process-wide and launcher settings */
int gcomp_settings_set(gcomp_settings *s, const char *name, const char *value);
int64_t gcomp_settings_int(const gcomp_settings *s, gcomp_param_id id);
const char *gcomp_settings_str(const gcomp_settings *s, gcomp_param_id id);
int gcomp_settings_is_set(const gcomp_settings *s, gcomp_param_id id);
/* The config's table (NULL config: the environment's, what gcomp_param_* read). */
const gcomp_settings *gcomp_config_settings(const gcomp_config *cfg);
/* gcomp_config_set without the checks of algorithm names, codec specs and the guard's
 * setting, which the layers above common/ make (reduce/config_set.c) */
int gcomp_config_set_value(gcomp_config *cfg, const char *name, const char *value);
/* The id of a setting by name ("GCOMP_" optional), or -1 */
int gcomp_param_lookup(const char *name);
/* Gives the config's table figures to inherit (reduce/ fills them from a communicator). */
void gcomp_config_set_inherit(gcomp_config *cfg, const gcomp_inherit *in);

/* Launchers' own variables (RANK, OMPI_COMM_WORLD_SIZE, SLURM_PROCID, ...); NULL when unset. */
const char *gcomp_env_foreign(const char *name);

int gcomp_param_load(void);     /* called by gcomp_init */
void gcomp_param_report(void);  /* logs set values, warns about unknown GCOMP_* names */

/* Runs the initialisation (environment, log, CPU) and records its status, which gcomp_init
 * returns from then on; gcomp_init runs it once. Running it again re-reads the environment:
 * nothing in the library does (the tests' support library does, between tests, while no
 * other thread is inside gcomp). */
int gcomp_init_run(void);

/* Parses a byte count with an optional k/m/g suffix (powers of 1024). */
int gcomp_parse_size(const char *text, int64_t *out);

/* ---- logging -------------------------------------------------------------------------- */
enum { GCOMP_LOG_NONE = 0 };   /* WARN, INFO and TRACE: include/gcomp_internal.h */
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
  GCOMP_CPU_AVX512FP16 = 1u << 11,
  GCOMP_CPU_PCLMUL = 1u << 12,
  GCOMP_CPU_VPCLMUL = 1u << 13,     /* VPCLMULQDQ (with AVX-512: on zmm) */
  GCOMP_CPU_AVX512VBMI = 1u << 14,
  GCOMP_CPU_AVX512DQ = 1u << 15
};
typedef enum { GCOMP_ISA_BASE = 0, GCOMP_ISA_AVX2 = 1, GCOMP_ISA_AVX512 = 2 } gcomp_isa;

unsigned gcomp_cpu_detect(void);          /* feature bits, from CPUID and XGETBV */
gcomp_isa gcomp_isa_best_level(unsigned features);
const char *gcomp_isa_name(gcomp_isa isa);
/* The level chosen at init (GCOMP_ISA, capped by the CPU): the ceiling of every family's
 * level (gcomp_kernel_level), and the level of the kernels outside those families. */
gcomp_isa gcomp_isa_level(void);
/* Whether the CPU has every feature in bits (detected at init): a kernel file that needs
 * more than its level's features asks before it is dispatched to. */
int gcomp_cpu_has(unsigned bits);
int gcomp_cpu_select(void);               /* called by gcomp_init */

/* Kernel families, each dispatched at a level of its own: GCOMP_ISA when it is set (every
 * family at that level), else the CPU's best level, lowered for the families that the table
 * in cpu.c says run faster one level down on this CPU (measured, not guessed: the levels
 * give bit-identical results, so ranks whose CPUs choose differently still agree). */
typedef enum {
  GCOMP_KF_CAST,        /* fp16/bf16 encode, decode, decode-and-add (cast_*.c) */
  GCOMP_KF_TOPK,        /* top-k filter passes (topk_*.c) */
  GCOMP_KF_QUANT_ENC,   /* quant: minmax, codes, error feedback's passes (lowbit_*.c) */
  GCOMP_KF_QUANT_DEC,   /* quant: decode and decode-and-add */
  GCOMP_KF_SIGN_ENC,    /* sign: scan, bits, error feedback's passes */
  GCOMP_KF_SIGN_DEC,    /* sign: decode and decode-and-add */
  GCOMP_KF_COUNT
} gcomp_kfamily;
typedef struct {
  char vendor[13];   /* CPUID leaf 0: "GenuineIntel", "AuthenticAMD", ... */
  unsigned family;   /* display family (base + extended), e.g. 0x19 Zen 3/4, 0x1a Zen 5 */
  unsigned model;    /* display model */
} gcomp_cpu_id;
gcomp_cpu_id gcomp_cpu_identify(void);
const char *gcomp_kfamily_name(gcomp_kfamily f);
/* The level family f runs at on a CPU with these features and this identity, GCOMP_ISA
 * unset (pure: the tests ask it about CPUs they do not run on). */
gcomp_isa gcomp_kernel_pick(gcomp_kfamily f, unsigned features, const gcomp_cpu_id *id);
/* The level chosen at init for family f. */
gcomp_isa gcomp_kernel_level(gcomp_kfamily f);

/* ---- sized structs --------------------------------------------------------------------
 * Stats structs a caller passes start with size_t struct_size (sizeof the caller's struct,
 * which may be an older, shorter layout). gcomp_sized_copy fills out with what fits of
 * src (full bytes), keeping out's struct_size; GCOMP_ERR_INVALID (naming fn) when the
 * caller's size is below `first`, the size of the first published layout. */
int gcomp_sized_copy(void *out, const void *src, size_t full, size_t first, const char *fn);
/* first published layout: up to and including member `last` */
#define GCOMP_SIZED_COPY(out, src, type, last, fn)                                         \
  gcomp_sized_copy((out), (src), sizeof(type), offsetof(type, last) + sizeof(((type *)0)->last), \
                   (fn))

/* ---- small helpers -------------------------------------------------------------------- */
uint64_t gcomp_now_ns(void);   /* CLOCK_MONOTONIC */

/* Numbers for machines, in the "C" locale whatever the host program's setlocale: specs,
 * residual files and JSON must read back the same under de_DE (where printf writes 0,5).
 * gcomp_dtoa writes the shortest %g form that reads back as the same double (returns the
 * length, as snprintf). Text output for machines goes between
 * old = uselocale(gcomp_c_locale()) and uselocale(old). */
locale_t gcomp_c_locale(void);   /* gcomp_strtod, gcomp_dtoa: gcomp_internal.h */

#endif /* GCOMP_COMMON_H */
