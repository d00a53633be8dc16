/* Rank 0's side of the rendezvous: listening, admitting each rank once (strangers, wrong
 * tokens and duplicates refused and logged, silent connections dropped), and telling
 * everybody why when the job cannot go on. */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rendezvous.h"

void gcomp_rv_abort_all(rendezvous *rv, const char *reason) {
  uint64_t dl = gcomp_now_ns() + 1000000000ull;
  for (int i = 0; i < rv->pub.size; i++)
    if (rv->peer_fd[i] >= 0) {
      gcomp_rv_send_status(rv->peer_fd[i], 1, reason, dl);
      shutdown(rv->peer_fd[i], SHUT_WR);
    }
  /* closing with unread bytes would reset the connection and lose the reason: drain */
  uint64_t drain_dl = gcomp_now_ns() + 300000000ull;
  for (int i = 0; i < rv->pub.size; i++) {
    char sink[4096];
    while (rv->peer_fd[i] >= 0 && gcomp_rv_ms_left(drain_dl) > 0) {
      struct pollfd pfd = {rv->peer_fd[i], POLLIN, 0};
      if (poll(&pfd, 1, gcomp_rv_ms_left(drain_dl)) <= 0) break;
      if (recv(rv->peer_fd[i], sink, sizeof sink, 0) <= 0) break;
    }
  }
}

/* Reads one hello; returns the admitted rank, or -1 after refusing (and logging) it. */
static int rv_admit(rendezvous *rv, const gcomp_boot_env *env, int fd, const char *from,
                    uint64_t job_dl) {
  /* the hello has started to arrive (gcomp_rv_serve polls for it): the rest gets 2 s, and never
   * more than the job's deadline, so a stranger cannot stall us for long */
  uint64_t dl = gcomp_now_ns() + 2000000000ull;
  if (dl > job_dl) dl = job_dl;
  uint32_t magic = 0, ver = 0, rank = 0, size = 0, tl = 0;
  char token[RV_MAX_TOKEN + 1];
  char why[400] = "";
  int e = gcomp_rv_get_u32(fd, &magic, dl);
  if (!e && magic != RV_MAGIC) snprintf(why, sizeof why, "not a gcomp rank (bad greeting)");
  if (!e && !*why) e = gcomp_rv_get_u32(fd, &ver, dl);
  if (!e && !*why && ver != RV_VERSION)
    snprintf(why, sizeof why, "protocol version %u, expected %u", ver, RV_VERSION);
  if (!e && !*why) e = gcomp_rv_get_u32(fd, &rank, dl);
  if (!e && !*why) e = gcomp_rv_get_u32(fd, &size, dl);
  if (!e && !*why) e = gcomp_rv_get_u32(fd, &tl, dl);
  if (!e && !*why && tl > RV_MAX_TOKEN) snprintf(why, sizeof why, "token too long");
  if (!e && !*why && tl) e = gcomp_rv_io(fd, token, tl, 0, dl);
  if (e) {
    GCOMP_WARN(GCOMP_SUB_FABRIC, "rendezvous at %s: dropped connection from %s: %s", rv->where,
               from, gcomp_rv_io_text(e));
    close(fd);
    return -1;
  }
  token[*why ? 0 : tl] = '\0';
  if (!*why && (tl != strlen(env->token) || memcmp(token, env->token, tl) != 0))
    snprintf(why, sizeof why, "wrong job token (GCOMP_JOB_TOKEN) for rank %u", rank);
  if (!*why && size != (uint32_t)env->size)
    snprintf(why, sizeof why, "rank %u says the job has %u ranks, the root has %d", rank, size,
             env->size);
  if (!*why && (rank == 0 || rank >= (uint32_t)env->size))   /* unsigned: 0xffffffff too */
    snprintf(why, sizeof why, "rank %u is not a valid non-root rank of %d", rank, env->size);
  if (!*why && rv->peer_fd[rank] >= 0)
    snprintf(why, sizeof why, "duplicate rank %u (already admitted)", rank);
  if (*why) {
    GCOMP_WARN(GCOMP_SUB_FABRIC, "rendezvous at %s: refused %s: %s", rv->where, from, why);
    gcomp_rv_send_status(fd, 1, why, dl);
    close(fd);
    return -1;
  }
  if (gcomp_rv_send_status(fd, 0, NULL, dl) != 0) {
    close(fd);
    return -1;
  }
  GCOMP_INFO(GCOMP_SUB_FABRIC, "rendezvous at %s: admitted rank %u from %s", rv->where, rank, from);
  rv->peer_fd[rank] = fd;
  return (int)rank;
}

static int rv_listen(const gcomp_boot_env *env, const char *where) {
  int fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int v6 = fd >= 0;
  if (!v6) fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  GCOMP_FAIL_IF(fd < 0, GCOMP_ERR_BOOTSTRAP, "rendezvous socket: %s", strerror(errno));
  int one = 1, zero = 0;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  int rc;
  if (v6) {
    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
    struct sockaddr_in6 a = {0};
    a.sin6_family = AF_INET6;
    a.sin6_addr = in6addr_any;
    a.sin6_port = htons((uint16_t)env->root_port);
    rc = bind(fd, (struct sockaddr *)&a, sizeof a);
  } else {
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    a.sin_port = htons((uint16_t)env->root_port);
    rc = bind(fd, (struct sockaddr *)&a, sizeof a);
  }
  if (rc != 0 || listen(fd, 256) != 0) {
    int e = errno;
    close(fd);
    GCOMP_FAIL(GCOMP_ERR_BOOTSTRAP, "rank 0: cannot listen for the rendezvous on port %d (%s): %s",
               env->root_port, where, strerror(e));
  }
  return fd;
}

/* Connections accepted whose hello has not begun: they wait side by side, so a connection
 * that sends nothing delays no one (one at a time, two silent ones failed a job whose
 * ranks had all arrived). Each gets 2 s to begin. */
enum { RV_PENDING = 128 };
typedef struct {
  int fd;
  uint64_t until;
  char from[96];   /* numeric host (at most 46 for IPv6) and port */
} rv_pending;

int gcomp_rv_serve(rendezvous *rv, const gcomp_boot_env *env, uint64_t dl) {
  int lfd = rv_listen(env, rv->where);
  if (lfd < 0) return lfd;
  rv_pending *pend = calloc(RV_PENDING, sizeof *pend);
  if (!pend) {
    close(lfd);
    GCOMP_FAIL(GCOMP_ERR_NOMEM, "rendezvous: pending connections");
  }
  struct pollfd pfd[1 + RV_PENDING];
  int admitted = 0, np = 0;
  while (admitted < env->size - 1) {
    uint64_t now = gcomp_now_ns();
    int left = gcomp_rv_ms_left(dl);
    if (left == 0) break;
    for (int i = 0; i < np; i++) {   /* wake for the earliest expiry (0: one is due) */
      int until = pend[i].until <= now ? 0 : (int)((pend[i].until - now) / 1000000u) + 1;
      if (until < left) left = until;
    }
    pfd[0] = (struct pollfd){lfd, POLLIN, 0};
    for (int i = 0; i < np; i++) pfd[1 + i] = (struct pollfd){pend[i].fd, POLLIN, 0};
    int pr = poll(pfd, (nfds_t)(1 + np), left);
    if (pr < 0 && errno == EINTR) continue;
    if (pr < 0) break;
    /* hellos that began: read them; connections that stayed idle past their 2 s: drop
     * them (only those poll found idle: a hello that arrived while another was being read
     * is read, not dropped). From the end, so removal keeps indices valid. */
    now = gcomp_now_ns();
    for (int i = np - 1; i >= 0; i--) {
      int ready = pr > 0 && pfd[1 + i].revents;
      if (!ready && now < pend[i].until) continue;
      rv_pending p = pend[i];
      pend[i] = pend[--np];
      if (ready) {
        if (rv_admit(rv, env, p.fd, p.from, dl) >= 0) admitted++;
      } else {
        GCOMP_WARN(GCOMP_SUB_FABRIC, "rendezvous at %s: dropped connection from %s: sent "
                   "nothing for 2 s", rv->where, p.from);
        close(p.fd);
      }
    }
    if (!(pfd[0].revents & POLLIN)) continue;
    struct sockaddr_storage sa;
    socklen_t sl = sizeof sa;
    int fd = accept4(lfd, (struct sockaddr *)&sa, &sl, SOCK_CLOEXEC);
    if (fd < 0) continue;
    if (np == RV_PENDING) {   /* a flood: the oldest waiting connection makes room */
      int old = 0;
      for (int i = 1; i < np; i++)
        if (pend[i].until < pend[old].until) old = i;
      GCOMP_WARN(GCOMP_SUB_FABRIC, "rendezvous at %s: dropped connection from %s: too many "
                 "connections waiting", rv->where, pend[old].from);
      close(pend[old].fd);
      pend[old] = pend[--np];
    }
    char host[64] = "?", serv[16] = "?";   /* numeric: INET6_ADDRSTRLEN is 46 */
    getnameinfo((struct sockaddr *)&sa, sl, host, sizeof host, serv, sizeof serv,
                NI_NUMERICHOST | NI_NUMERICSERV);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    pend[np].fd = fd;
    pend[np].until = gcomp_now_ns() + 2000000000ull;
    snprintf(pend[np].from, sizeof pend[np].from, "%s:%s", host, serv);
    np++;
  }
  for (int i = 0; i < np; i++) close(pend[i].fd);
  free(pend);
  close(lfd);
  if (admitted < env->size - 1) {
    char missing[400];
    size_t off = 0;
    int nmiss = 0;
    missing[0] = '\0';
    for (int r = 1; r < env->size; r++)
      if (rv->peer_fd[r] < 0) {
        if (off < sizeof missing - 16)
          off += (size_t)snprintf(missing + off, sizeof missing - off, "%s%d", nmiss ? ", " : "", r);
        nmiss++;
      }
    char why[1024];
    snprintf(why, sizeof why, "%d of %d ranks never arrived at the rendezvous at %s within "
             "GCOMP_TIMEOUT_MS=%d: rank%s %s", nmiss, env->size, rv->where, rv->timeout_ms,
             nmiss > 1 ? "s" : "", missing);
    gcomp_rv_abort_all(rv, why);
    GCOMP_FAIL(GCOMP_ERR_TIMEOUT, "%s", why);
  }
  return GCOMP_OK;
}
