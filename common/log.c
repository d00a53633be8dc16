/* Leveled, per-subsystem logging. Callers check the level before formatting (GCOMP_LOG). */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "gcomp_common.h"

_Atomic int gcomp_log_level = GCOMP_LOG_WARN;   /* atomic: set at init, read by every thread */
_Atomic unsigned gcomp_log_subsys = GCOMP_SUB_ALL;

static FILE *log_file;   /* NULL: stderr */
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static char host[64];

static const char *const subsys_names[] = {"init", "codec", "reduce", "fabric", "tuning", "env", "shim"};

static const char *subsys_name(unsigned subsys) {
  for (unsigned i = 0; i < sizeof subsys_names / sizeof *subsys_names; i++)
    if (subsys == 1u << i) return subsys_names[i];
  return "all";
}

static int parse_subsys(const char *text, unsigned *mask) {
  *mask = 0;
  char buf[256];
  snprintf(buf, sizeof buf, "%s", text);
  char *save = NULL;
  int named = 0;
  for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    int neg = tok[0] == '^';
    if (neg) tok++;
    unsigned bit = 0;
    if (strcasecmp(tok, "all") == 0) bit = GCOMP_SUB_ALL;
    for (unsigned i = 0; i < sizeof subsys_names / sizeof *subsys_names && !bit; i++)
      if (strcasecmp(tok, subsys_names[i]) == 0) bit = 1u << i;
    GCOMP_FAIL_IF(!bit, GCOMP_ERR_INVALID,
                  "GCOMP_DEBUG_SUBSYS='%s': unknown subsystem '%s' (valid: all,init,codec,"
                  "reduce,fabric,tuning,env,shim; ^name excludes)", text, tok);
    if (neg) *mask = (*mask ? *mask : GCOMP_SUB_ALL) & ~bit;
    else *mask |= bit;
    named++;
  }
  /* an empty list would silence every message, warnings included */
  GCOMP_FAIL_IF(!named, GCOMP_ERR_INVALID,
                "GCOMP_DEBUG_SUBSYS='%s' names no subsystem (valid: all,init,codec,reduce,fabric,"
                "tuning,env,shim; ^name excludes)", text);
  return GCOMP_OK;
}

size_t gcomp_path_expand(const char *pattern, int rank, char *out, size_t n) {
  char me[64] = "";
  gethostname(me, sizeof me - 1);
  size_t o = 0;
  for (const char *p = pattern; *p && o + 1 < n; p++) {
    int w = -1;
    if (p[0] == '%' && p[1] == 'h') w = snprintf(out + o, n - o, "%s", me);
    else if (p[0] == '%' && p[1] == 'p') w = snprintf(out + o, n - o, "%ld", (long)getpid());
    else if (p[0] == '%' && p[1] == 'r' && rank >= 0) w = snprintf(out + o, n - o, "%d", rank);
    if (w >= 0) {
      o += (size_t)w < n - o ? (size_t)w : n - o - 1;
      p++;
    } else {
      out[o++] = *p;
    }
  }
  out[o] = '\0';
  return o;
}

int gcomp_log_open(void) {
  gethostname(host, sizeof host - 1);
  gcomp_log_level = (int)gcomp_param_int(GCOMP_P_DEBUG);
  unsigned mask;
  GCOMP_CHECK(parse_subsys(gcomp_param_str(GCOMP_P_DEBUG_SUBSYS), &mask));
  gcomp_log_subsys = mask;
  const char *pattern = gcomp_param_str(GCOMP_P_DEBUG_FILE);
  gcomp_log_close();
  if (pattern && *pattern) {
    char path[4096];
    gcomp_path_expand(pattern, -1, path, sizeof path);
    FILE *f = fopen(path, "a");
    GCOMP_FAIL_IF(!f, GCOMP_ERR_INVALID, "GCOMP_DEBUG_FILE: cannot open '%s'", path);
    setvbuf(f, NULL, _IOLBF, 0);
    log_file = f;
  }
  return GCOMP_OK;
}

void gcomp_log_close(void) {
  if (log_file) fclose(log_file);
  log_file = NULL;
}

static void log_vemit(int level, unsigned subsys, const char *file, int line, const char *fmt,
                      va_list ap) {
  static const char *const lv[] = {"NONE", "WARN", "INFO", "TRACE"};
  char msg[1024];
  vsnprintf(msg, sizeof msg, fmt, ap);
  if (!file) file = "";
  const char *f = strrchr(file, '/');
  pthread_mutex_lock(&log_lock);
  fprintf(log_file ? log_file : stderr, "%s:%ld:%ld gcomp %s %s %s:%d %s\n", host, (long)getpid(),
          (long)syscall(SYS_gettid), lv[level & 3], subsys_name(subsys), f ? f + 1 : file, line,
          msg);
  pthread_mutex_unlock(&log_lock);
}

void gcomp_log_emit(int level, unsigned subsys, const char *file, int line, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  log_vemit(level, subsys, file, line, fmt, ap);
  va_end(ap);
}

static unsigned subsys_bit(const char *name) {
  for (unsigned i = 0; name && i < sizeof subsys_names / sizeof *subsys_names; i++)
    if (strcmp(name, subsys_names[i]) == 0) return 1u << i;
  return 0;
}

int gcomp_log_enabled(int level, const char *subsys) {
  unsigned bit = subsys_bit(subsys);
  return bit && level > GCOMP_LOG_NONE && gcomp_log_level >= level && (gcomp_log_subsys & bit);
}

void gcomp_log_message(int level, const char *subsys, const char *file, int line,
                       const char *fmt, ...) {
  if (!gcomp_log_enabled(level, subsys)) return;
  va_list ap;
  va_start(ap, fmt);
  log_vemit(level, subsys_bit(subsys), file, line, fmt, ap);
  va_end(ap);
}

uint64_t gcomp_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
