/* What this process's TCP connections delivered, as the kernel measured it (TCP_INFO): per
 * connection (local and remote address and port: gcomp-stats finds the peer rank by the
 * file holding the mirror image), the bytes the peer acknowledged and the time the
 * connection had data to send (busy, or held back by the peer's receive window or by the
 * send buffer). Bytes over that time is the rate the link delivered while the job used it.
 * The transport's own send completions cannot say it: over tcp;ofi_rxm a send completes
 * once the kernel has copied it, megabytes before the link has carried it (measured: 25
 * Gbit/s "delivered" through a 200 Mbit/s link). Other transports (shared memory, verbs)
 * have no such sockets and show nothing here. */
#include <arpa/inet.h>
#include <dirent.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "measure.h"

typedef struct {
  char local[INET6_ADDRSTRLEN], remote[INET6_ADDRSTRLEN];
  int lport, rport;
  double bytes, active_s;
} link_sum;

static int addr_text(const struct sockaddr_storage *a, char *out, size_t n, int *port) {
  const struct sockaddr_in *v4 = (const struct sockaddr_in *)a;
  const struct sockaddr_in6 *v6 = (const struct sockaddr_in6 *)a;
  const void *p = a->ss_family == AF_INET ? (const void *)&v4->sin_addr
                  : a->ss_family == AF_INET6 ? (const void *)&v6->sin6_addr
                                             : NULL;
  *port = ntohs(a->ss_family == AF_INET ? v4->sin_port : v6->sin6_port);
  return p && inet_ntop(a->ss_family, p, out, (socklen_t)n) ? 0 : -1;
}

/* one socket's figures, or -1 when fd is no connected TCP socket */
static int probe(int fd, link_sum *l) {
  struct sockaddr_storage me, peer;
  socklen_t ml = sizeof me, pl = sizeof peer;
  if (getsockname(fd, (struct sockaddr *)&me, &ml) ||
      getpeername(fd, (struct sockaddr *)&peer, &pl))
    return -1;
  if (addr_text(&me, l->local, sizeof l->local, &l->lport) ||
      addr_text(&peer, l->remote, sizeof l->remote, &l->rport))
    return -1;
  struct tcp_info ti;
  socklen_t tl = sizeof ti;
  memset(&ti, 0, sizeof ti);
  if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &tl) || tl < sizeof ti) return -1;
  l->bytes = (double)ti.tcpi_bytes_acked;
  l->active_s = (double)(ti.tcpi_busy_time + ti.tcpi_rwnd_limited + ti.tcpi_sndbuf_limited) * 1e-6;
  return 0;
}

void gcomp_links_write(FILE *f) {
  fprintf(f, "\"links\": [");
  int n = 0;
  DIR *d = opendir("/proc/self/fd");
  for (struct dirent *e; d && (e = readdir(d));) {
    char *end;
    long fd = strtol(e->d_name, &end, 10);
    link_sum l;
    if (*end || end == e->d_name || fd == dirfd(d) || probe((int)fd, &l) || l.bytes <= 0) continue;
    fprintf(f,
            "%s{\"local\": \"%s\", \"lport\": %d, \"remote\": \"%s\", \"rport\": %d, "
            "\"bytes\": %.0f, \"busy_s\": %.6f}",
            n++ ? ", " : "", l.local, l.lport, l.remote, l.rport, l.bytes, l.active_s);
  }
  if (d) closedir(d);
  fprintf(f, "]");
}
