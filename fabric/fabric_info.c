/* What libfabric offers here: its version and the providers usable for tagged RDM. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <rdma/fabric.h>

#include "fi_lazy.h"
#include "gcomp_common.h"

static char version_text[32];
static void make_version_text(void) {
  uint32_t v = fi_version();
  snprintf(version_text, sizeof version_text, "%u.%u", FI_MAJOR(v), FI_MINOR(v));
}

const char *gcomp_fabric_version(void) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;   /* callers in several threads */
  pthread_once(&once, make_version_text);
  return version_text;
}

size_t gcomp_fabric_providers(char *buf, size_t buf_size) {
  struct fi_info *hints = fi_allocinfo(), *list = NULL;
  size_t need = 0;
  if (buf && buf_size) buf[0] = '\0';
  if (!hints) return 0;
  hints->ep_attr->type = FI_EP_RDM;
  hints->caps = FI_TAGGED | FI_MSG;
  hints->mode = FI_CONTEXT;
  hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
  if (fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &list) == 0) {
    char seen[1024] = " ";
    for (struct fi_info *i = list; i; i = i->next) {
      char name[128];
      snprintf(name, sizeof name, " %s ", i->fabric_attr->prov_name);
      if (strstr(seen, name)) continue;   /* one line per provider, not per interface */
      if (strlen(seen) + strlen(name) < sizeof seen) strcat(seen, name + 1);
      int w = snprintf(buf ? buf + (need < buf_size ? need : buf_size) : NULL,
                       buf && need < buf_size ? buf_size - need : 0, "%s%s", need ? " " : "",
                       i->fabric_attr->prov_name);
      need += w > 0 ? (size_t)w : 0;
    }
    fi_freeinfo(list);
  }
  fi_freeinfo(hints);
  return need;
}
