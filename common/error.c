/* Status names and the thread-local detail of the last failure. */
#include <stdio.h>
#include <string.h>

#include "gcomp_common.h"

enum { ERRBUF = 1024 };
static _Thread_local char last_error[ERRBUF];

const char *gcomp_strerror(int status) {
  switch (status) {
  case GCOMP_OK: return "GCOMP_OK: success";
  case GCOMP_ERR_INVALID: return "GCOMP_ERR_INVALID: invalid argument";
  case GCOMP_ERR_NOMEM: return "GCOMP_ERR_NOMEM: out of memory or buffer too small";
  case GCOMP_ERR_CORRUPT: return "GCOMP_ERR_CORRUPT: corrupt data";
  case GCOMP_ERR_UNSUPPORTED: return "GCOMP_ERR_UNSUPPORTED: not supported";
  case GCOMP_ERR_FABRIC: return "GCOMP_ERR_FABRIC: fabric error";
  case GCOMP_ERR_TIMEOUT: return "GCOMP_ERR_TIMEOUT: timed out";
  case GCOMP_ERR_PEER: return "GCOMP_ERR_PEER: peer failed";
  case GCOMP_ERR_BOOTSTRAP: return "GCOMP_ERR_BOOTSTRAP: bootstrap failed";
  case GCOMP_ERR_ABORTED: return "GCOMP_ERR_ABORTED: communicator aborted";
  default: return "GCOMP_ERR_UNKNOWN: unknown status";
  }
}

const char *gcomp_last_error(void) { return last_error; }

void gcomp_error_clear(void) { last_error[0] = '\0'; }

static const char *base_name(const char *path) {
  if (!path) return "";   /* a public caller may pass no file */
  /* keep "folder/file.c": enough to find the line, free of build paths */
  const char *last = strrchr(path, '/');
  if (!last) return path;
  const char *p = last;
  while (p > path && p[-1] != '/') p--;
  return p > path ? p : path;
}

/* The subsystem a failure is logged under: its layer's, told by the folder of the file that
 * set it (a failure belongs to one subsystem, so GCOMP_DEBUG_SUBSYS can filter it). Layers
 * above the library (the harness, tools) log under init, where a caller's setup goes. */
static unsigned subsys_of(const char *file) {
  static const struct {
    const char *dir;
    unsigned bit;
  } dirs[] = {{"codecs/", GCOMP_SUB_CODEC}, {"reduce/", GCOMP_SUB_REDUCE},
              {"fabric/", GCOMP_SUB_FABRIC}, {"shim/", GCOMP_SUB_SHIM},
              {"common/param.c", GCOMP_SUB_ENV}};
  for (size_t i = 0; i < sizeof dirs / sizeof *dirs; i++)
    if (strncmp(file, dirs[i].dir, strlen(dirs[i].dir)) == 0) return dirs[i].bit;
  return GCOMP_SUB_INIT;
}

int gcomp_error_set(int status, const char *file, int line, const char *fmt, ...) {
  char msg[ERRBUF - 64];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  snprintf(last_error, sizeof last_error, "%s [%s:%d]", msg, base_name(file), line);
  GCOMP_INFO(subsys_of(base_name(file)), "%s -> %s", last_error, gcomp_strerror(status));
  return status;
}

int gcomp_error_restore(int status, const char *detail) {
  snprintf(last_error, sizeof last_error, "%s", detail);
  return status;
}

int gcomp_error_trace(int status, const char *file, int line) {
  size_t len = strlen(last_error);
  if (len == 0)
    snprintf(last_error, sizeof last_error, "%s", gcomp_strerror(status));
  len = strlen(last_error);
  if (len < sizeof last_error - 1)
    snprintf(last_error + len, sizeof last_error - len, " <- %s:%d", base_name(file), line);
  return status;
}

int gcomp_sized_copy(void *out, const void *src, size_t full, size_t first, const char *fn) {
  size_t size;
  memcpy(&size, out, sizeof size);
  GCOMP_FAIL_IF(size < first, GCOMP_ERR_INVALID,
                "%s: struct_size %zu is smaller than the struct's first layout (%zu bytes): set "
                "it to sizeof the struct passed", fn, size, first);
  size_t n = size < full ? size : full;
  memcpy((char *)out + sizeof size, (const char *)src + sizeof size, n - sizeof size);
  return GCOMP_OK;
}

const char *gcomp_version(void) {
#define GCOMP_STR2(x) #x
#define GCOMP_STR(x) GCOMP_STR2(x)
  return GCOMP_STR(GCOMP_VERSION_MAJOR) "." GCOMP_STR(GCOMP_VERSION_MINOR) "." GCOMP_STR(
      GCOMP_VERSION_PATCH);
}

/* The header's version and the build's (project() in CMakeLists.txt) are written twice;
 * this keeps them one. */
_Static_assert(GCOMP_VERSION_NUMBER == GCOMP_PROJECT_VERSION_NUMBER,
               "include/gcomp.h's GCOMP_VERSION_* differ from CMakeLists.txt's project VERSION");

int gcomp_version_number(void) { return GCOMP_VERSION_NUMBER; }
