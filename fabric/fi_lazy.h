/* libfabric's six exported functions that gcomp calls, reached through a table that
 * fi_lazy.c fills by dlopen on first use rather than by the dynamic linker at start-up.
 * Why: Debian's libfabric1 links PSM and PSM2, whose constructors calibrate a clock with
 * sleeps, about 0.2 s in every process that maps libfabric (measured: an empty main
 * linked against it starts in 0.21 s, against nothing in 0.01 s). A program that never
 * creates a communicator -- gcomp-plan, gcomp-stats, gcomp-converge, `import gcomp` --
 * should not pay that; a rank pays it once, inside gcomp_comm_create.
 * Include this after the <rdma/...> headers: the macros below then redirect the calls of
 * every file that includes it, and the headers' own declarations stay as they are. */
#ifndef GCOMP_FI_LAZY_H
#define GCOMP_FI_LAZY_H
#include <rdma/fabric.h>
#include <rdma/fi_errno.h>

typedef struct {
  int (*getinfo)(uint32_t version, const char *node, const char *service, uint64_t flags,
                 const struct fi_info *hints, struct fi_info **info);
  void (*freeinfo)(struct fi_info *info);
  struct fi_info *(*dupinfo)(const struct fi_info *info);
  int (*fabric)(struct fi_fabric_attr *attr, struct fid_fabric **fabric, void *context);
  const char *(*strerror)(int errnum);
  uint32_t (*version)(void);
} gcomp_fi_table;

/* The table: libfabric's functions once loaded; if it cannot be loaded, stand-ins whose
 * failures (-FI_ENOSYS, NULL, version 0) carry dlerror()'s reason through fi_strerror. */
const gcomp_fi_table *gcomp_fi(void);
/* The loading itself, for tests: soname's functions into *out (0), or the stand-ins (-1). */
int gcomp_fi_open(const char *soname, gcomp_fi_table *out);

#define fi_getinfo(...) (gcomp_fi()->getinfo(__VA_ARGS__))
#define fi_freeinfo(info) (gcomp_fi()->freeinfo(info))
#define fi_dupinfo(info) (gcomp_fi()->dupinfo(info))
#define fi_allocinfo() (gcomp_fi()->dupinfo(NULL))
#define fi_fabric(...) (gcomp_fi()->fabric(__VA_ARGS__))
#define fi_strerror(err) (gcomp_fi()->strerror(err))
#define fi_version() (gcomp_fi()->version())
#endif
