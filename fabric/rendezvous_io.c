/* The rendezvous' byte moving: exact reads and writes on a socket bounded by a deadline,
 * big-endian u32 fields, and the status-plus-reason reply that admits, refuses or aborts. */
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "rendezvous.h"

int gcomp_rv_ms_left(uint64_t deadline_ns) {
  uint64_t now = gcomp_now_ns();
  if (now >= deadline_ns) return 0;
  uint64_t ms = (deadline_ns - now + 999999u) / 1000000u;
  return ms > INT_MAX ? INT_MAX : (int)ms;
}

int gcomp_rv_io(int fd, void *buf, size_t n, int writing, uint64_t deadline_ns) {
  char *p = buf;
  while (n) {
    struct pollfd pfd = {fd, (short)(writing ? POLLOUT : POLLIN), 0};
    int left = gcomp_rv_ms_left(deadline_ns);
    if (left == 0) return -ETIMEDOUT;
    int pr = poll(&pfd, 1, left);
    if (pr < 0 && errno == EINTR) continue;
    if (pr < 0) return -errno;
    if (pr == 0) return -ETIMEDOUT;
    ssize_t k = writing ? send(fd, p, n, MSG_NOSIGNAL) : recv(fd, p, n, 0);
    if (k < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (k < 0) return errno == ECONNRESET || errno == EPIPE ? -EPIPE : -errno;
    if (k == 0) return -EPIPE;
    p += k;
    n -= (size_t)k;
  }
  return 0;
}

const char *gcomp_rv_io_text(int e) {
  return e == -ETIMEDOUT ? "timed out" : e == -EPIPE ? "connection closed" : strerror(-e);
}

int gcomp_rv_put_u32(int fd, uint32_t v, uint64_t dl) {
  v = htonl(v);
  return gcomp_rv_io(fd, &v, 4, 1, dl);
}

int gcomp_rv_get_u32(int fd, uint32_t *v, uint64_t dl) {
  int e = gcomp_rv_io(fd, v, 4, 0, dl);
  *v = ntohl(*v);
  return e;
}

int gcomp_rv_send_status(int fd, uint32_t status, const char *reason, uint64_t dl) {
  uint32_t n = reason ? (uint32_t)strlen(reason) : 0;
  int e = gcomp_rv_put_u32(fd, status, dl);
  if (!e) e = gcomp_rv_put_u32(fd, n, dl);
  if (!e && n) e = gcomp_rv_io(fd, (void *)reason, n, 1, dl);
  return e;
}

int gcomp_rv_recv_status(int fd, uint32_t *status, char *reason, size_t reason_size,
                         uint64_t dl) {
  uint32_t n = 0;
  int e = gcomp_rv_get_u32(fd, status, dl);
  if (!e) e = gcomp_rv_get_u32(fd, &n, dl);
  reason[0] = '\0';
  if (!e && n) {
    char tmp[1024];
    uint32_t k = n < sizeof tmp ? n : (uint32_t)sizeof tmp - 1;
    e = gcomp_rv_io(fd, tmp, k, 0, dl);
    tmp[e ? 0 : k] = '\0';
    for (uint32_t skip = n - k; !e && skip; skip--) {
      char c;
      e = gcomp_rv_io(fd, &c, 1, 0, dl);
    }
    snprintf(reason, reason_size, "%s", tmp);
  }
  return e;
}
