/* The libfabric transport's endpoints: provider, attributes, opening and closing.
 * See ofi_impl.h for the file map. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include "ofi_impl.h"
#include "procs.h"

/* Two transports of one process may be set up or torn down by two threads at once (the MPI
 * shim creates one per MPI communicator, on the thread that first reduces on it). Their
 * libfabric objects are their own (fi_fabric and fi_domain allocate new ones each call,
 * FI_THREAD_DOMAIN holds per domain), but shm keeps process-wide state behind them: its
 * list of this process's regions, the region names, its signal handlers, and the files in
 * /dev/shm that peers open by name. Opening and closing endpoints (and inserting addresses,
 * which maps peers' regions) therefore runs one thread at a time under this lock; the
 * out-of-band exchange and the ping, which wait for peers, run outside it, so two ranks that
 * create two transports in opposite orders never wait for each other while holding it. */
pthread_mutex_t ofi_setup_lock = PTHREAD_MUTEX_INITIALIZER;

/* ---- endpoints ---------------------------------------------------------------------------- */

void ofi_ep_close(ofi_ep *e) {
  if (e->ep) fi_close(&e->ep->fid);
  if (e->av) fi_close(&e->av->fid);
  if (e->cq) fi_close(&e->cq->fid);
  if (e->domain) fi_close(&e->domain->fid);
  if (e->fabric) fi_close(&e->fabric->fid);
  if (e->info) fi_freeinfo(e->info);
  memset(e, 0, sizeof *e);
  e->cq_fd = -1;
}

/* libfabric's shm regions, named "<pid>:<uid>:<n>" in /dev/shm */
static int shm_region_owner(const char *name) {
  int pid = 0, a = 0, b = 0, used = 0;
  if (sscanf(name, "%d:%d:%d%n", &pid, &a, &b, &used) != 3 || name[used]) return 0;
  return pid;
}

/* Regions of killed shm jobs stay in /dev/shm; a new process that gets the same pid then
 * cannot create its own. Remove those whose process is gone, and those of this process's
 * pid, but the latter only before this process opened its first shm endpoint: after that
 * they are this process's own live regions, which peers still open by name (removing one
 * while another transport was being set up on another thread left its peers unable to map
 * it: shm then dereferenced a missing region inside fi_cq_read). Called under
 * ofi_setup_lock. */
static void shm_clean_stale(void) {
  static int own_swept;   /* under ofi_setup_lock */
  gcomp_shm_sweep(shm_region_owner, own_swept, 0, GCOMP_SUB_FABRIC);
  own_swept = 1;
}

static struct fi_info *pick_info(struct fi_info *list) {
  for (struct fi_info *i = list; i; i = i->next)
    if (i->addr_format == FI_SOCKADDR_IN) return i;   /* IPv4 before link-local IPv6 */
  return list;
}

/* ofi_rxm over tcp sends a message above its eager limit (16 KiB) by rendezvous: the
 * receiver asks for the data once it has matched the header. When both directions of a
 * link are busy (every exchange step of halving/doubling or of hier's cross-node phase)
 * that request waits behind the bulk data queued in the other direction, once per chunk:
 * 2 emulated nodes at 1 Gbit/s reached 60-65% of the link that way, and the same run with
 * every chunk eager 98%. tcp places eager data directly into posted
 * receives, so chunks go eager: the limit is raised to the chunk size unless the user set
 * FI_OFI_RXM_EAGER_LIMIT. libfabric reads it once, at its first fi_getinfo. Over verbs
 * the eager limit must equal rxm's buffer size, so other providers are left alone. */
void ofi_rxm_tcp_defaults(const char *prov, size_t chunk_bytes) {
  static int done;   /* under ofi_setup_lock */
  if (done || !strstr(prov, "tcp")) return;
  done = 1;
  char v[32];
  snprintf(v, sizeof v, "%zu", chunk_bytes);
  /* The library's only setenv (include/gcomp.h says so, and when), and not one of gcomp's
   * settings: rxm reads its eager limit only through fi_param, from the environment (1.17
   * has no hint, endpoint attribute or fi_setopt for it), so there is no other door. It is
   * process-wide (libfabric reads it once), hence the first communicator's
   * GCOMP_CHUNK_BYTES wins; overwrite 0 keeps the user's own value. */
  if (setenv("FI_OFI_RXM_EAGER_LIMIT", v, 0) == 0)
    GCOMP_INFO(GCOMP_SUB_FABRIC, "FI_OFI_RXM_EAGER_LIMIT=%s", getenv("FI_OFI_RXM_EAGER_LIMIT"));
}

/* The completion queue, with a wait fd where asked for and the provider has one: tcp;ofi_rxm
 * does (rxm's fd is an epoll set holding tcp's, which holds the sockets: data arriving, and a
 * socket that can take more of a pending send, make it readable), shm in libfabric 1.17 does
 * not (fi_cq_open refuses FI_WAIT_FD). Without one (refused, or no fd to poll), the CQ is
 * reopened without a wait object and waits nap as before. */
static int cq_open(ofi_ep *e, const struct fi_info *info, int cq_wait) {
  struct fi_cq_attr cq_attr = {0};
  cq_attr.format = FI_CQ_FORMAT_TAGGED;
  cq_attr.size = info->tx_attr->size + info->rx_attr->size;
  e->cq_fd = -1;
  if (cq_wait) {
    cq_attr.wait_obj = FI_WAIT_FD;
    int rc = fi_cq_open(e->domain, &cq_attr, &e->cq, NULL);
    if (rc == 0) {
      int fd = -1;
      rc = fi_control(&e->cq->fid, FI_GETWAIT, &fd);
      if (rc == 0 && fd >= 0) {
        e->cq_fd = fd;
        return 0;
      }
      fi_close(&e->cq->fid);
      e->cq = NULL;
    }
    GCOMP_INFO(GCOMP_SUB_FABRIC, "%s (%s-node): no completion queue wait fd (%s): waits nap",
               e->prov, e->role, rc ? fi_strerror(-rc) : "no fd");
  }
  cq_attr.wait_obj = FI_WAIT_NONE;
  return fi_cq_open(e->domain, &cq_attr, &e->cq, NULL);
}

int ofi_ep_open(ofi_ep *e, const char *role, const char *prov, size_t chunk_bytes, int nranks,
                int cq_wait) {
  e->role = role;
  e->cq_fd = -1;
  snprintf(e->prov, sizeof e->prov, "%s", prov);
  if (strcmp(prov, "shm") == 0) shm_clean_stale();
  struct fi_info *hints = fi_allocinfo(), *list = NULL;
  GCOMP_FAIL_IF(!hints, GCOMP_ERR_NOMEM, "fi_allocinfo");
  hints->ep_attr->type = FI_EP_RDM;
  hints->caps = FI_TAGGED | FI_MSG | FI_DIRECTED_RECV;
  hints->mode = FI_CONTEXT;
  hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
  hints->domain_attr->threading = FI_THREAD_DOMAIN;
  hints->domain_attr->data_progress = FI_PROGRESS_MANUAL;
  hints->domain_attr->control_progress = FI_PROGRESS_MANUAL;
  hints->domain_attr->resource_mgmt = FI_RM_ENABLED;
  hints->domain_attr->av_type = FI_AV_TABLE;
  hints->tx_attr->msg_order = FI_ORDER_SAS;
  hints->rx_attr->msg_order = FI_ORDER_SAS;
  hints->fabric_attr->prov_name = strdup(prov);
  int rc = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &list);
  fi_freeinfo(hints);
  GCOMP_FAIL_IF(rc || !list, GCOMP_ERR_UNSUPPORTED,
                "libfabric provider '%s' (%s-node) offers no tagged RDM endpoint with manual "
                "progress here: %s (check fi_info -p '%s'; %s selects another)",
                prov, role, fi_strerror(-rc), prov,
                strcmp(role, "intra") == 0 ? "GCOMP_INTRA_PROVIDER" : "GCOMP_PROVIDER");
  e->info = fi_dupinfo(pick_info(list));
  fi_freeinfo(list);
  GCOMP_FAIL_IF(!e->info, GCOMP_ERR_NOMEM, "fi_dupinfo");
  struct fi_info *info = e->info;
  GCOMP_FAIL_IF(info->domain_attr->cq_data_size < 8, GCOMP_ERR_UNSUPPORTED,
                "provider %s carries only %zu bytes of remote CQ data; gcomp needs 8", prov,
                info->domain_attr->cq_data_size);
  e->mr_local = (info->domain_attr->mr_mode & FI_MR_LOCAL) != 0;
  e->inject = info->tx_attr->inject_size;
  e->chunk = chunk_bytes;
  if (info->ep_attr->max_msg_size && e->chunk > info->ep_attr->max_msg_size)
    e->chunk = info->ep_attr->max_msg_size;
  if (!e->chunk) e->chunk = 1;
  /* headers go by fi_tsend from the header arena where they exceed the inject size */
#define EP_TRY(call, what)                                                                   \
  do {                                                                                       \
    int rc_ = (call);                                                                        \
    GCOMP_FAIL_IF(rc_, GCOMP_ERR_FABRIC, "%s (%s, %s-node): %s", what, prov, role,           \
                  fi_strerror(-rc_));                                                        \
  } while (0)
  EP_TRY(fi_fabric(info->fabric_attr, &e->fabric, NULL), "fi_fabric");
  EP_TRY(fi_domain(e->fabric, info, &e->domain, NULL), "fi_domain");
  EP_TRY(cq_open(e, info, cq_wait), "fi_cq_open");
  struct fi_av_attr av_attr = {0};
  av_attr.type = FI_AV_TABLE;
  av_attr.count = (size_t)nranks;
  EP_TRY(fi_av_open(e->domain, &av_attr, &e->av, NULL), "fi_av_open");
  EP_TRY(fi_endpoint(e->domain, info, &e->ep, NULL), "fi_endpoint");
  EP_TRY(fi_ep_bind(e->ep, &e->cq->fid, FI_TRANSMIT | FI_RECV), "binding the CQ");
  EP_TRY(fi_ep_bind(e->ep, &e->av->fid, 0), "binding the AV");
  EP_TRY(fi_enable(e->ep), "fi_enable");
  e->namelen = sizeof e->name;
  EP_TRY(fi_getname(&e->ep->fid, e->name, &e->namelen), "fi_getname");
#undef EP_TRY
  GCOMP_INFO(GCOMP_SUB_FABRIC, "%s-node endpoint: %s (domain %s), inject %zu B, chunk %zu B, "
             "mr_local %d, CQ wait fd %s", role, info->fabric_attr->prov_name,
             info->domain_attr->name, e->inject, e->chunk, e->mr_local,
             e->cq_fd >= 0 ? "yes" : "no");
  return GCOMP_OK;
}
