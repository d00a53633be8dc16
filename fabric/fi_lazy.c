/* libfabric loaded on first use (fi_lazy.h says why). The soname is the ABI gcomp was
 * compiled against: FI_MAJOR_VERSION of the headers. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

#include "fi_lazy.h"

#define STR_(x) #x
#define STR(x) STR_(x)
#define FI_SONAME "libfabric.so." STR(FI_MAJOR_VERSION)

static gcomp_fi_table table;
static char why[256];

static int missing_getinfo(uint32_t v, const char *n, const char *s, uint64_t f,
                           const struct fi_info *h, struct fi_info **info) {
  (void)v, (void)n, (void)s, (void)f, (void)h;
  if (info) *info = NULL;
  return -FI_ENOSYS;
}
static void missing_freeinfo(struct fi_info *info) { (void)info; }
static struct fi_info *missing_dupinfo(const struct fi_info *info) {
  (void)info;
  return NULL;
}
static int missing_fabric(struct fi_fabric_attr *a, struct fid_fabric **f, void *c) {
  (void)a, (void)c;
  if (f) *f = NULL;
  return -FI_ENOSYS;
}
static const char *missing_strerror(int err) {
  (void)err;
  return why;
}
static uint32_t missing_version(void) { return 0; }

int gcomp_fi_open(const char *soname, gcomp_fi_table *out) {
  /* RTLD_LOCAL: libfabric's symbols stay out of the global scope; a program that links
   * libfabric itself (an MPI library) shares the same loaded copy either way */
  void *h = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
  gcomp_fi_table t = {0};
  if (h) {
    *(void **)&t.getinfo = dlsym(h, "fi_getinfo");
    *(void **)&t.freeinfo = dlsym(h, "fi_freeinfo");
    *(void **)&t.dupinfo = dlsym(h, "fi_dupinfo");
    *(void **)&t.fabric = dlsym(h, "fi_fabric");
    *(void **)&t.strerror = dlsym(h, "fi_strerror");
    *(void **)&t.version = dlsym(h, "fi_version");
  }
  if (h && t.getinfo && t.freeinfo && t.dupinfo && t.fabric && t.strerror && t.version) {
    *out = t;
    return 0;
  }
  const char *e = dlerror();
  snprintf(why, sizeof why, "%s could not be loaded: %s (apt-get install libfabric1)", soname,
           e ? e : "a function is missing");
  if (h) dlclose(h);
  *out = (gcomp_fi_table){missing_getinfo, missing_freeinfo, missing_dupinfo, missing_fabric,
                          missing_strerror, missing_version};
  return -1;
}

static void load(void) { gcomp_fi_open(FI_SONAME, &table); }

const gcomp_fi_table *gcomp_fi(void) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, load);
  return &table;
}
