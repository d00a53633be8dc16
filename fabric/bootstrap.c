/* Rank discovery and the TCP rendezvous.
 *
 * The rendezvous is a star around rank 0: every other rank connects, presents the job
 * token and its rank, and is admitted once. After that the star serves allgather rounds of
 * fixed-size records (node identity, then fabric addresses). Anything that can allgather
 * (an MPI communicator, for the shim) can replace it: see gcomp_oob in transport.h. */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <limits.h>
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

#include "bootstrap.h"
#include "gcomp_common.h"

#define RV_MAGIC 0x47435256u   /* "GCRV" */
#define RV_VERSION 1u
#define RV_MAX_TOKEN 255u
#define RV_MAX_RECORD (1u << 20)

/* ---- environment ---------------------------------------------------------------------- */

static const char *env_lookup_real(const char *name, void *ctx) {
  if (strncmp(name, "GCOMP_", 6) == 0) {
    for (int i = 0; i < GCOMP_P_COUNT_; i++)
      if (strcmp(gcomp_param_name((gcomp_param_id)i), name) == 0)
        return gcomp_param_is_set((gcomp_param_id)i) ? gcomp_param_str((gcomp_param_id)i) : NULL;
    return NULL;
  }
  return gcomp_env_foreign(name);
}

static int parse_int_var(const char *name, const char *text, long lo, long hi, int *out) {
  char *end = NULL;
  errno = 0;
  long v = strtol(text, &end, 10);
  int none = end == text;
  while (end && isspace((unsigned char)*end)) end++;   /* as the parameter registry reads it */
  GCOMP_FAIL_IF(errno || none || *end != '\0' || v < lo || v > hi, GCOMP_ERR_BOOTSTRAP,
                "%s='%s' is not an integer in [%ld, %ld]", name, text, lo, hi);
  *out = (int)v;
  return GCOMP_OK;
}

/* GCOMP_RANK, GCOMP_SIZE, GCOMP_LOCAL_RANK set to -1, their documented default, mean unset */
static const char *unless_default(const char *text) {
  if (!text) return NULL;
  char *end = NULL;
  long v = strtol(text, &end, 10);
  while (end && isspace((unsigned char)*end)) end++;
  return end != text && *end == '\0' && v == -1 ? NULL : text;
}

typedef struct {
  const char *source, *rank, *size, *local_rank;
} launcher_vars;

static const launcher_vars launchers[] = {
    {"GCOMP", "GCOMP_RANK", "GCOMP_SIZE", "GCOMP_LOCAL_RANK"},
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK"},
    {"Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
    {"PMI", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID"},
    {"Slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"},
};

/* "host:port", "[v6addr]:port" */
static int parse_hostport(const char *name, const char *text, char *host, size_t host_size,
                          int *port) {
  const char *colon;
  size_t hl;
  if (text[0] == '[') {
    const char *close = strchr(text, ']');
    GCOMP_FAIL_IF(!close || close[1] != ':', GCOMP_ERR_BOOTSTRAP,
                  "%s='%s' is not [address]:port", name, text);
    colon = close + 1;
    text++;
    hl = (size_t)(close - text);
  } else {
    colon = strrchr(text, ':');
    GCOMP_FAIL_IF(!colon, GCOMP_ERR_BOOTSTRAP, "%s='%s' is not host:port", name, text);
    hl = (size_t)(colon - text);
  }
  GCOMP_FAIL_IF(hl == 0 || hl >= host_size, GCOMP_ERR_BOOTSTRAP, "%s='%s': bad host part", name,
                text);
  memcpy(host, text, hl);
  host[hl] = '\0';
  return parse_int_var(name, colon + 1, 1, 65535, port);
}

int gcomp_boot_env_parse(gcomp_env_lookup lookup, void *ctx, const char *hostname,
                         gcomp_boot_env *out) {
  GCOMP_FAIL_IF(!out, GCOMP_ERR_INVALID, "gcomp_boot_env_parse: NULL output");
  if (!lookup) lookup = env_lookup_real;
  memset(out, 0, sizeof *out);
  out->rank = 0;
  out->size = 1;
  out->local_rank = -1;
  out->source = "default";

  /* the first launcher whose rank variable is set supplies rank, size and local rank;
   * GCOMP_* override each one individually */
  const launcher_vars *use = NULL;
  for (size_t i = 1; i < sizeof launchers / sizeof launchers[0] && !use; i++)
    if (lookup(launchers[i].rank, ctx)) use = &launchers[i];
  if (use) {
    const char *r = lookup(use->rank, ctx), *s = lookup(use->size, ctx);
    GCOMP_FAIL_IF(!s, GCOMP_ERR_BOOTSTRAP, "%s is set (%s launcher) but %s is not", use->rank,
                  use->source, use->size);
    GCOMP_CHECK(parse_int_var(use->rank, r, 0, 1 << 20, &out->rank));
    GCOMP_CHECK(parse_int_var(use->size, s, 1, 1 << 20, &out->size));
    const char *l = lookup(use->local_rank, ctx);
    if (l) GCOMP_CHECK(parse_int_var(use->local_rank, l, 0, 1 << 20, &out->local_rank));
    out->source = use->source;
  }
  const launcher_vars *g = &launchers[0];
  const char *gr = unless_default(lookup(g->rank, ctx)), *gs = unless_default(lookup(g->size, ctx)),
             *gl = unless_default(lookup(g->local_rank, ctx));
  if (gr) GCOMP_CHECK(parse_int_var(g->rank, gr, 0, 1 << 20, &out->rank));
  if (gs) GCOMP_CHECK(parse_int_var(g->size, gs, 1, 1 << 20, &out->size));
  if (gl) GCOMP_CHECK(parse_int_var(g->local_rank, gl, 0, 1 << 20, &out->local_rank));
  if (gr || gs) out->source = "GCOMP";
  GCOMP_FAIL_IF(gr && !gs && !use, GCOMP_ERR_BOOTSTRAP, "GCOMP_RANK is set but GCOMP_SIZE is not");
  /* without it every process would be rank 0 of the job */
  GCOMP_FAIL_IF(gs && !gr && !use && out->size > 1, GCOMP_ERR_BOOTSTRAP,
                "GCOMP_SIZE is set but GCOMP_RANK is not");
  GCOMP_FAIL_IF(out->rank >= out->size, GCOMP_ERR_BOOTSTRAP,
                "rank %d is not below size %d (from %s variables)", out->rank, out->size,
                out->source);

  const char *node = lookup("GCOMP_NODE_ID", ctx);
  if (node && *node) {
    GCOMP_FAIL_IF(strlen(node) >= sizeof out->node_id, GCOMP_ERR_BOOTSTRAP,
                  "GCOMP_NODE_ID is longer than %zu characters", sizeof out->node_id - 1);
    strcpy(out->node_id, node);
  } else if (hostname) {
    snprintf(out->node_id, sizeof out->node_id, "%s", hostname);
  } else {
    GCOMP_FAIL_IF(gethostname(out->node_id, sizeof out->node_id - 1) != 0, GCOMP_ERR_BOOTSTRAP,
                  "gethostname failed: %s", strerror(errno));
  }

  const char *root = lookup("GCOMP_ROOT", ctx);
  const char *maddr = lookup("MASTER_ADDR", ctx), *mport = lookup("MASTER_PORT", ctx);
  if (root && *root) {
    GCOMP_CHECK(parse_hostport("GCOMP_ROOT", root, out->root_host, sizeof out->root_host,
                               &out->root_port));
  } else if (maddr && mport) {
    GCOMP_FAIL_IF(strlen(maddr) >= sizeof out->root_host, GCOMP_ERR_BOOTSTRAP,
                  "MASTER_ADDR is too long");
    strcpy(out->root_host, maddr);
    /* MASTER_PORT itself is torch's: torchrun's agent (or init_process_group) already runs
     * its store there, so gcomp meets on the next port */
    GCOMP_CHECK(parse_int_var("MASTER_PORT", mport, 1, 65534, &out->root_port));
    out->root_port++;
  } else if (out->size > 1) {
    GCOMP_FAIL(GCOMP_ERR_BOOTSTRAP,
               "rank %d of %d (from %s variables): no rendezvous address; set GCOMP_ROOT=host:port "
               "or MASTER_ADDR and MASTER_PORT (gcomp-run sets them)",
               out->rank, out->size, out->source);
  }
  const char *tok = lookup("GCOMP_JOB_TOKEN", ctx);
  if (tok) {
    GCOMP_FAIL_IF(strlen(tok) > RV_MAX_TOKEN, GCOMP_ERR_BOOTSTRAP,
                  "GCOMP_JOB_TOKEN is longer than %u characters", RV_MAX_TOKEN);
    strcpy(out->token, tok);
  }
  return GCOMP_OK;
}

/* ---- socket helpers --------------------------------------------------------------------- */

static int ms_left(uint64_t deadline_ns) {
  uint64_t now = gcomp_now_ns();
  if (now >= deadline_ns) return 0;
  uint64_t ms = (deadline_ns - now + 999999u) / 1000000u;
  return ms > INT_MAX ? INT_MAX : (int)ms;
}

/* Moves exactly n bytes, or fails at the deadline / on EOF. Returns 0, -ETIMEDOUT, -EPIPE
 * (peer closed) or -errno. */
static int io_full(int fd, void *buf, size_t n, int writing, uint64_t deadline_ns) {
  char *p = buf;
  while (n) {
    struct pollfd pfd = {fd, (short)(writing ? POLLOUT : POLLIN), 0};
    int left = ms_left(deadline_ns);
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

static const char *io_text(int e) {
  return e == -ETIMEDOUT ? "timed out" : e == -EPIPE ? "connection closed" : strerror(-e);
}

static int put_u32(int fd, uint32_t v, uint64_t dl) {
  v = htonl(v);
  return io_full(fd, &v, 4, 1, dl);
}

static int get_u32(int fd, uint32_t *v, uint64_t dl) {
  int e = io_full(fd, v, 4, 0, dl);
  *v = ntohl(*v);
  return e;
}

/* status, then a reason string (refusals and aborts carry one) */
static int send_status(int fd, uint32_t status, const char *reason, uint64_t dl) {
  uint32_t n = reason ? (uint32_t)strlen(reason) : 0;
  int e = put_u32(fd, status, dl);
  if (!e) e = put_u32(fd, n, dl);
  if (!e && n) e = io_full(fd, (void *)reason, n, 1, dl);
  return e;
}

static int recv_status(int fd, uint32_t *status, char *reason, size_t reason_size, uint64_t dl) {
  uint32_t n = 0;
  int e = get_u32(fd, status, dl);
  if (!e) e = get_u32(fd, &n, dl);
  reason[0] = '\0';
  if (!e && n) {
    char tmp[1024];
    uint32_t k = n < sizeof tmp ? n : (uint32_t)sizeof tmp - 1;
    e = io_full(fd, tmp, k, 0, dl);
    tmp[e ? 0 : k] = '\0';
    for (uint32_t skip = n - k; !e && skip; skip--) {
      char c;
      e = io_full(fd, &c, 1, 0, dl);
    }
    snprintf(reason, reason_size, "%s", tmp);
  }
  return e;
}

/* ---- the rendezvous ---------------------------------------------------------------------- */

typedef struct {
  gcomp_oob pub;
  char where[300];     /* "host:port" for messages */
  int timeout_ms;
  int fd;              /* non-root: connection to root */
  int *peer_fd;        /* root: [size] connection of each rank (-1 for itself) */
} rendezvous;

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

/* Root tells everybody why the job cannot go on. */
static void rv_abort_all(rendezvous *rv, const char *reason) {
  uint64_t dl = gcomp_now_ns() + 1000000000ull;
  for (int i = 0; i < rv->pub.size; i++)
    if (rv->peer_fd[i] >= 0) {
      send_status(rv->peer_fd[i], 1, reason, dl);
      shutdown(rv->peer_fd[i], SHUT_WR);
    }
  /* closing with unread bytes would reset the connection and lose the reason: drain */
  uint64_t drain_dl = gcomp_now_ns() + 300000000ull;
  for (int i = 0; i < rv->pub.size; i++) {
    char sink[4096];
    while (rv->peer_fd[i] >= 0 && ms_left(drain_dl) > 0) {
      struct pollfd pfd = {rv->peer_fd[i], POLLIN, 0};
      if (poll(&pfd, 1, ms_left(drain_dl)) <= 0) break;
      if (recv(rv->peer_fd[i], sink, sizeof sink, 0) <= 0) break;
    }
  }
}

static int rv_allgather(gcomp_oob *oob, const void *mine, size_t len, void *all) {
  rendezvous *rv = (rendezvous *)oob;
  int n = rv->pub.size, me = rv->pub.rank;
  GCOMP_FAIL_IF(len > RV_MAX_RECORD, GCOMP_ERR_INVALID, "rendezvous record of %zu bytes", len);
  /* the root decides who is missing; the others wait a little longer to hear its verdict */
  uint64_t dl = gcomp_now_ns() + ((uint64_t)rv->timeout_ms + (me ? 2000u : 0u)) * 1000000ull;
  char *out = all;
  if (me != 0) {
    int e = put_u32(rv->fd, (uint32_t)len, dl);
    if (!e && len) e = io_full(rv->fd, (void *)mine, len, 1, dl);
    uint32_t st = 0;
    char reason[1024];
    if (!e) e = recv_status(rv->fd, &st, reason, sizeof reason, dl);
    GCOMP_FAIL_IF(e, e == -ETIMEDOUT ? GCOMP_ERR_TIMEOUT : GCOMP_ERR_BOOTSTRAP,
                  "rank %d: allgather through the rendezvous at %s: %s (GCOMP_TIMEOUT_MS=%d)", me,
                  rv->where, io_text(e), rv->timeout_ms);
    GCOMP_FAIL_IF(st != 0, GCOMP_ERR_BOOTSTRAP, "rank %d: the rendezvous root at %s gave up: %s",
                  me, rv->where, reason);
    e = io_full(rv->fd, out, len * (size_t)n, 0, dl);
    GCOMP_FAIL_IF(e, e == -ETIMEDOUT ? GCOMP_ERR_TIMEOUT : GCOMP_ERR_BOOTSTRAP,
                  "rank %d: allgather result from %s: %s", me, rv->where, io_text(e));
    return GCOMP_OK;
  }
  memcpy(out, mine, len);
  for (int r = 1; r < n; r++) {
    uint32_t l = 0;
    int e = get_u32(rv->peer_fd[r], &l, dl);
    if (!e && l != len) e = -EPROTO;
    if (!e && len) e = io_full(rv->peer_fd[r], out + (size_t)r * len, len, 0, dl);
    if (e) {
      char why[400];
      snprintf(why, sizeof why, "rank %d did not send its record: %s",
               r, e == -EPROTO ? "record length differs" : io_text(e));
      rv_abort_all(rv, why);
      GCOMP_FAIL(e == -ETIMEDOUT ? GCOMP_ERR_TIMEOUT : GCOMP_ERR_PEER,
                 "rendezvous root at %s: %s (GCOMP_TIMEOUT_MS=%d)", rv->where, why, rv->timeout_ms);
    }
  }
  for (int r = 1; r < n; r++) {
    int e = send_status(rv->peer_fd[r], 0, NULL, dl);
    if (!e) e = io_full(rv->peer_fd[r], out, len * (size_t)n, 1, dl);
    GCOMP_FAIL_IF(e, GCOMP_ERR_PEER, "rendezvous root at %s: sending the table to rank %d: %s",
                  rv->where, r, io_text(e));
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
          int left = ms_left(dl);
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
    GCOMP_FAIL_IF(ms_left(dl) == 0, GCOMP_ERR_TIMEOUT,
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
  int e = put_u32(rv->fd, RV_MAGIC, dl);
  if (!e) e = put_u32(rv->fd, RV_VERSION, dl);
  if (!e) e = put_u32(rv->fd, (uint32_t)env->rank, dl);
  if (!e) e = put_u32(rv->fd, (uint32_t)env->size, dl);
  if (!e) e = put_u32(rv->fd, tl, dl);
  if (!e && tl) e = io_full(rv->fd, (void *)env->token, tl, 1, dl);
  uint32_t st = 0;
  char reason[1024] = "";
  if (!e) e = recv_status(rv->fd, &st, reason, sizeof reason, dl);
  GCOMP_FAIL_IF(e, e == -ETIMEDOUT ? GCOMP_ERR_TIMEOUT : GCOMP_ERR_BOOTSTRAP,
                "rank %d: joining the rendezvous at %s: %s", env->rank, rv->where, io_text(e));
  GCOMP_FAIL_IF(st != 0, GCOMP_ERR_BOOTSTRAP, "rank %d: the rendezvous at %s refused us: %s",
                env->rank, rv->where, reason);
  return GCOMP_OK;
}

/* Reads one hello; returns the admitted rank, or -1 after refusing (and logging) it. */
static int rv_admit(rendezvous *rv, const gcomp_boot_env *env, int fd, const char *from,
                    uint64_t job_dl) {
  /* the hello has started to arrive (rv_serve polls for it): the rest gets 2 s, and never
   * more than the job's deadline, so a stranger cannot stall us for long */
  uint64_t dl = gcomp_now_ns() + 2000000000ull;
  if (dl > job_dl) dl = job_dl;
  uint32_t magic = 0, ver = 0, rank = 0, size = 0, tl = 0;
  char token[RV_MAX_TOKEN + 1];
  char why[400] = "";
  int e = get_u32(fd, &magic, dl);
  if (!e && magic != RV_MAGIC) snprintf(why, sizeof why, "not a gcomp rank (bad greeting)");
  if (!e && !*why) e = get_u32(fd, &ver, dl);
  if (!e && !*why && ver != RV_VERSION)
    snprintf(why, sizeof why, "protocol version %u, expected %u", ver, RV_VERSION);
  if (!e && !*why) e = get_u32(fd, &rank, dl);
  if (!e && !*why) e = get_u32(fd, &size, dl);
  if (!e && !*why) e = get_u32(fd, &tl, dl);
  if (!e && !*why && tl > RV_MAX_TOKEN) snprintf(why, sizeof why, "token too long");
  if (!e && !*why && tl) e = io_full(fd, token, tl, 0, dl);
  if (e) {
    GCOMP_WARN(GCOMP_SUB_FABRIC, "rendezvous at %s: dropped connection from %s: %s", rv->where,
               from, io_text(e));
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
    send_status(fd, 1, why, dl);
    close(fd);
    return -1;
  }
  if (send_status(fd, 0, NULL, dl) != 0) {
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

static int rv_serve(rendezvous *rv, const gcomp_boot_env *env, uint64_t dl) {
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
    int left = ms_left(dl);
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
    rv_abort_all(rv, why);
    GCOMP_FAIL(GCOMP_ERR_TIMEOUT, "%s", why);
  }
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
      s = rv_serve(rv, env, dl);
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
