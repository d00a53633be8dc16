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
  default: return "GCOMP_ERR_UNKNOWN: unknown status";
  }
}

const char *gcomp_last_error(void) { return last_error; }

void gcomp_error_clear(void) { last_error[0] = '\0'; }

static const char *base_name(const char *path) {
  /* keep "folder/file.c": enough to find the line, free of build paths */
  const char *last = strrchr(path, '/');
  if (!last) return path;
  const char *p = last;
  while (p > path && p[-1] != '/') p--;
  return p > path ? p : path;
}

int gcomp_error_set(int status, const char *file, int line, const char *fmt, ...) {
  char msg[ERRBUF - 64];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  snprintf(last_error, sizeof last_error, "%s [%s:%d]", msg, base_name(file), line);
  GCOMP_INFO(GCOMP_SUB_ALL, "%s -> %s", last_error, gcomp_strerror(status));
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

const char *gcomp_version(void) {
#define GCOMP_STR2(x) #x
#define GCOMP_STR(x) GCOMP_STR2(x)
  return GCOMP_STR(GCOMP_VERSION_MAJOR) "." GCOMP_STR(GCOMP_VERSION_MINOR) "." GCOMP_STR(
      GCOMP_VERSION_PATCH);
}
