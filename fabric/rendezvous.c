/* The TCP rendezvous as a gcomp_oob: a star around rank 0. Every other rank connects,
 * presents the job token and its rank, and is admitted once (rank 0's side is
 * rendezvous_root.c). After that the star serves allgather rounds of fixed-size records
 * (node identity, then fabric addresses). Anything that can allgather (an MPI
 * communicator, for the shim) can replace it: see gcomp_oob in transport.h. */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "rendezvous.h"

static void rv_close_fds(rendezvous *rv) {
  if (rv->fd >= 0) close(rv->fd);
  rv->fd = -1;
  if (rv->peer_fd)
    for (int i = 0; i < rv->pub.size; i++)
      if (rv->peer_fd[i] >= 0) {
        close(rv->peer_fd[i]);
        rv->peer_fd[i] = -1;
      }
}

static void rv_close(gcomp_oob *oob) {
  rendezvous *rv = (rendezvous *)oob;
  if (!rv) return;
  rv_close_fds(rv);
  free(rv->peer_fd);
  free(rv);
}

static int rv_allgather(gcomp_oob *oob, const void *mine, size_t len, void *all) {
  rendezvous *rv = (rendezvous *)oob;
  int n = rv->pub.size, me = rv->pub.rank;
  GCOMP_FAIL_IF(len > RV_MAX_RECORD, GCOMP_ERR_INVALID, "rendezvous record of %zu bytes", len);
  /* the root decides who is missing; the others wait a little longer to hear its verdict */
  uint64_t dl = gcomp_now_ns() + ((uint64_t)rv->timeout_ms + (me ? 2000u : 0u)) * 1000000ull;
  char *out = all;
  if (me != 0) {
    int e = gcomp_rv_put_u32(rv->fd, (uint32_t)len, dl);
    if (!e && len) e = gcomp_rv_io(rv->fd, (void *)mine, len, 1, dl);
    uint32_t st = 0;
    char reason[1024];
    if (!e) e = gcomp_rv_recv_status(rv->fd, &st, reason, sizeof reason, dl);
    GCOMP_FAIL_IF(e, e == -ETIMEDOUT ? GCOMP_ERR_TIMEOUT : GCOMP_ERR_BOOTSTRAP,
                  "rank %d: allgather through the rendezvous at %s: %s (GCOMP_TIMEOUT_MS=%d)", me,
                  rv->where, gcomp_rv_io_text(e), rv->timeout_ms);
    GCOMP_FAIL_IF(st != 0, GCOMP_ERR_BOOTSTRAP, "rank %d: the rendezvous root at %s gave up: %s",
                  me, rv->where, reason);
    e = gcomp_rv_io(rv->fd, out, len * (size_t)n, 0, dl);
    GCOMP_FAIL_IF(e, e == -ETIMEDOUT ? GCOMP_ERR_TIMEOUT : GCOMP_ERR_BOOTSTRAP,
                  "rank %d: allgather result from %s: %s", me, rv->where, gcomp_rv_io_text(e));
    return GCOMP_OK;
  }
  memcpy(out, mine, len);
  for (int r = 1; r < n; r++) {
    uint32_t l = 0;
    int e = gcomp_rv_get_u32(rv->peer_fd[r], &l, dl);
    if (!e && l != len) e = -EPROTO;
    if (!e && len) e = gcomp_rv_io(rv->peer_fd[r], out + (size_t)r * len, len, 0, dl);
    if (e) {
      char why[400];
      snprintf(why, sizeof why, "rank %d did not send its record: %s",
               r, e == -EPROTO ? "record length differs" : gcomp_rv_io_text(e));
      gcomp_rv_abort_all(rv, why);
      GCOMP_FAIL(e == -ETIMEDOUT ? GCOMP_ERR_TIMEOUT : GCOMP_ERR_PEER,
                 "rendezvous root at %s: %s (GCOMP_TIMEOUT_MS=%d)", rv->where, why, rv->timeout_ms);
    }
  }
  for (int r = 1; r < n; r++) {
    int e = gcomp_rv_send_status(rv->peer_fd[r], 0, NULL, dl);
    if (!e) e = gcomp_rv_io(rv->peer_fd[r], out, len * (size_t)n, 1, dl);
    GCOMP_FAIL_IF(e, GCOMP_ERR_PEER, "rendezvous root at %s: sending the table to rank %d: %s",
                  rv->where, r, gcomp_rv_io_text(e));
  }
  return GCOMP_OK;
}

static int rv_connect(rendezvous *rv, const gcomp_boot_env *env, uint64_t dl) {
  char port[16];
  snprintf(port, sizeof port, "%d", env->root_port);
  struct addrinfo hints = {0}, *res = NULL;
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  unsigned delay_ms = 10;
  int last = 0;
  for (;;) {
    int g = getaddrinfo(env->root_host, port, &hints, &res);
    if (g == 0) {
      for (struct addrinfo *a = res; a; a = a->ai_next) {
        int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
                        a->ai_protocol);
        if (fd < 0) continue;
        /* non-blocking, bounded by the deadline: a root whose SYNs are dropped would hold a
         * blocking connect for the kernel's retries (about two minutes) */
        int c = connect(fd, a->ai_addr, a->ai_addrlen);
        if (c != 0 && errno == EINPROGRESS) {
          struct pollfd pfd = {fd, POLLOUT, 0};
          int left = gcomp_rv_ms_left(dl);
          int pr = left ? poll(&pfd, 1, left < 1000 ? left : 1000) : 0;
          int err = 0;
          socklen_t el = sizeof err;
          if (pr == 1 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) == 0 && err == 0) c = 0;
          else errno = pr == 1 ? (err ? err : ECONNREFUSED) : ETIMEDOUT;
        }
        if (c == 0) {
          freeaddrinfo(res);
          int one = 1;
          setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
          rv->fd = fd;
          return GCOMP_OK;
        }
        last = errno;
        close(fd);
      }
      freeaddrinfo(res);
    } else {
      last = EHOSTUNREACH;
    }
    GCOMP_FAIL_IF(gcomp_rv_ms_left(dl) == 0, GCOMP_ERR_TIMEOUT,
                  "rank %d: could not reach the rendezvous at %s within GCOMP_TIMEOUT_MS=%d "
                  "(last error: %s%s)", env->rank, rv->where, rv->timeout_ms,
                  g ? gai_strerror(g) : strerror(last), g ? ", name lookup" : "");
    struct timespec ts = {0, (long)delay_ms * 1000000L};
    nanosleep(&ts, NULL);
    if (delay_ms < 100) delay_ms *= 2;
  }
}

static int rv_join(rendezvous *rv, const gcomp_boot_env *env, uint64_t dl) {
  GCOMP_CHECK(rv_connect(rv, env, dl));
  uint32_t tl = (uint32_t)strlen(env->token);
  int e = gcomp_rv_put_u32(rv->fd, RV_MAGIC, dl);
  if (!e) e = gcomp_rv_put_u32(rv->fd, RV_VERSION, dl);
  if (!e) e = gcomp_rv_put_u32(rv->fd, (uint32_t)env->rank, dl);
  if (!e) e = gcomp_rv_put_u32(rv->fd, (uint32_t)env->size, dl);
  if (!e) e = gcomp_rv_put_u32(rv->fd, tl, dl);
  if (!e && tl) e = gcomp_rv_io(rv->fd, (void *)env->token, tl, 1, dl);
  uint32_t st = 0;
  char reason[1024] = "";
  if (!e) e = gcomp_rv_recv_status(rv->fd, &st, reason, sizeof reason, dl);
  GCOMP_FAIL_IF(e, e == -ETIMEDOUT ? GCOMP_ERR_TIMEOUT : GCOMP_ERR_BOOTSTRAP,
                "rank %d: joining the rendezvous at %s: %s", env->rank, rv->where,
                gcomp_rv_io_text(e));
  GCOMP_FAIL_IF(st != 0, GCOMP_ERR_BOOTSTRAP, "rank %d: the rendezvous at %s refused us: %s",
                env->rank, rv->where, reason);
  return GCOMP_OK;
}

int gcomp_rendezvous_open(const gcomp_boot_env *env, int timeout_ms, gcomp_oob **out) {
  GCOMP_FAIL_IF(!env || !out, GCOMP_ERR_INVALID, "gcomp_rendezvous_open: NULL argument");
  *out = NULL;
  rendezvous *rv = calloc(1, sizeof *rv);
  GCOMP_FAIL_IF(!rv, GCOMP_ERR_NOMEM, "rendezvous");
  rv->pub.rank = env->rank;
  rv->pub.size = env->size;
  rv->pub.allgather = rv_allgather;
  rv->pub.close = rv_close;
  rv->timeout_ms = timeout_ms;
  rv->fd = -1;
  snprintf(rv->where, sizeof rv->where, "%s:%d", env->root_host, env->root_port);
  if (!env->token[0] && env->size > 1)
    GCOMP_WARN(GCOMP_SUB_FABRIC, "GCOMP_JOB_TOKEN is not set: the rendezvous at %s admits any "
               "process that knows its address", rv->where);
  uint64_t dl = gcomp_now_ns() + (uint64_t)timeout_ms * 1000000ull;
  int s = GCOMP_OK;
  if (env->size > 1) {
    if (env->rank == 0) {
      rv->peer_fd = malloc(sizeof(int) * (size_t)env->size);
      if (!rv->peer_fd) {
        free(rv);
        GCOMP_FAIL(GCOMP_ERR_NOMEM, "rendezvous table");
      }
      for (int i = 0; i < env->size; i++) rv->peer_fd[i] = -1;
      s = gcomp_rv_serve(rv, env, dl);
    } else {
      s = rv_join(rv, env, dl);
    }
  }
  if (s < 0) {
    rv_close(&rv->pub);
    return gcomp_error_trace(s, __FILE__, __LINE__);
  }
  GCOMP_INFO(GCOMP_SUB_FABRIC, "rank %d of %d joined the rendezvous at %s", env->rank, env->size,
             rv->where);
  *out = &rv->pub;
  return GCOMP_OK;
}
