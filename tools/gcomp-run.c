/* gcomp-run: the local launcher.
 *
 *   gcomp-run -n N [--nodes M] [--map-by slot|node] [--inter-node-rate RATE]
 *             [--node-rate NODE=RATE]... [--tag-output] [--grace MS]
 *             [--netns auto|on|off] -- PROGRAM [ARGS...]
 *
 * Starts N ranks of PROGRAM split over M emulated nodes (blocks of consecutive ranks, or
 * round-robin with --map-by node as Open MPI's option does),
 * with GCOMP_RANK, GCOMP_SIZE, GCOMP_LOCAL_RANK, GCOMP_NODE_ID, GCOMP_ROOT and a random
 * GCOMP_JOB_TOKEN, and torch.distributed's RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
 * MASTER_ADDR and MASTER_PORT (a second port beside GCOMP_ROOT's), so that an unmodified
 * DDP script's init_process_group("gloo") meets there. As root with M > 1, each node runs
 * in its own network namespace, joined to the others by a veth link to a private bridge
 * (optionally rate limited with tbf), and the ranks' tcp provider and gloo are pinned to
 * that link (FI_TCP_IFACE, GLOO_SOCKET_IFNAME: gloo otherwise binds to what the host name
 * resolves to, 127.0.0.1, which the other nodes cannot reach); --node-rate gives one
 * node's link its own rate (a slow node, for diagnosis tests); everything is removed on
 * exit, on Ctrl-C, and, after a crash of gcomp-run itself, by the next gcomp-run.
 * Forwards SIGINT/SIGTERM/SIGHUP/SIGQUIT, returns the first non-zero exit status (128+N
 * for a rank killed by signal N), and kills the remaining ranks when one fails. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NETNS_DIR "/var/run/netns"

typedef struct {
  pid_t pid;
  int node, local_rank;
  int running;
  int status;            /* wait status */
  int out_fd, err_fd;    /* --tag-output pipes, -1 otherwise */
  char out_buf[4096], err_buf[4096];
  size_t out_len, err_len;
} rank_proc;

static volatile sig_atomic_t got_signal;
static int verbose;
static int netns_made;       /* namespaces to remove at exit */
static int nnodes_made;
static int bridge_made;
static long job_id;

static void on_signal(int sig) { got_signal = sig; }

static void say(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "gcomp-run: ");
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
}

static uint64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Runs a command given as one string of space-separated words; returns its exit status. */
static int run(const char *fmt, ...) {
  char line[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  char *argv[32];
  int argc = 0;
  for (char *tok = strtok(line, " "); tok && argc < 31; tok = strtok(NULL, " ")) argv[argc++] = tok;
  argv[argc] = NULL;
  if (verbose) {
    fprintf(stderr, "gcomp-run: +");
    for (int i = 0; i < argc; i++) fprintf(stderr, " %s", argv[i]);
    fputc('\n', stderr);
  }
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    if (!verbose) {
      int devnull = open("/dev/null", O_WRONLY);
      if (devnull >= 0) dup2(devnull, 1);
    }
    execvp(argv[0], argv);
    _exit(127);
  }
  int st = 0;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

static int pid_alive(long pid) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%ld", pid);
  return access(path, F_OK) == 0;
}

/* Namespaces and bridges of a gcomp-run that died without cleaning up. */
static void clean_stale(void) {
  DIR *d = opendir(NETNS_DIR);
  if (d) {
    struct dirent *de;
    while ((de = readdir(d))) {
      long pid;
      int k, used = 0;
      if (sscanf(de->d_name, "gcomp-%ld-%d%n", &pid, &k, &used) == 2 && !de->d_name[used] &&
          !pid_alive(pid)) {
        say("removing network namespace %s left by a gcomp-run that is gone", de->d_name);
        run("ip netns del %s", de->d_name);
      }
    }
    closedir(d);
  }
  d = opendir("/sys/class/net");
  if (d) {
    struct dirent *de;
    while ((de = readdir(d))) {
      long pid;
      int used = 0;
      if (sscanf(de->d_name, "gcb%ld%n", &pid, &used) == 1 && !de->d_name[used] && !pid_alive(pid)) {
        say("removing bridge %s left by a gcomp-run that is gone", de->d_name);
        run("ip link del %s", de->d_name);
      }
    }
    closedir(d);
  }
}

static void netns_teardown(void) {
  for (int k = 0; k < nnodes_made; k++) {
    run("ip link del gch%ld-%d", job_id, k);   /* both ends, now: a namespace goes lazily */
    run("ip netns del gcomp-%ld-%d", job_id, k);
  }
  if (bridge_made) run("ip link del gcb%ld", job_id);
  nnodes_made = 0;
  bridge_made = 0;
  netns_made = 0;
}

/* A tc rate: a positive number and one of tc's units (bit, kbit, mbit, gbit, tbit, bps,
 * kbps, mbps, gbps, tbps; any case). Checked before anything is set up, so that a typo is an
 * error rather than a run without the limit. */
/* A whole number, or -1 for anything else ("4x" is not 4): the range checks that follow
 * then refuse it. */
static int whole(const char *text) {
  char *end;
  long v = strtol(text, &end, 10);
  return end == text || *end || v < 0 || v > 1000000000L ? -1 : (int)v;
}

static int rate_ok(const char *rate) {
  char *end;
  double v = strtod(rate, &end);
  if (end == rate || !(v > 0)) return 0;
  static const char *const units[] = {"bit", "kbit", "mbit", "gbit", "tbit",
                                      "bps", "kbps", "mbps", "gbps", "tbps"};
  for (size_t i = 0; i < sizeof units / sizeof *units; i++)
    if (strcasecmp(end, units[i]) == 0) return 1;
  return 0;
}

/* --node-rate NODE=RATE: NODE is a node index (0..M-1) or its GCOMP_NODE_ID ("node1").
 * Every rate is checked before anything is set up; a node named twice is an error (which
 * rate was meant?). rates[k] receives the rate of node k, the others keep the default. */
static int node_rates(char *const *args, int nargs, int nodes, const char **rates) {
  const char *given[256] = {0};
  for (int a = 0; a < nargs; a++) {
    const char *arg = args[a], *eq = strchr(arg, '=');
    char node[32];
    size_t len = eq ? (size_t)(eq - arg) : 0;
    if (!eq || !len || len >= sizeof node || !rate_ok(eq + 1)) {
      say("--node-rate '%s' is not NODE=RATE (a node index or id, and a rate such as 200mbit)",
          arg);
      return -1;
    }
    memcpy(node, arg, len);
    node[len] = '\0';
    int k = whole(strncmp(node, "node", 4) == 0 ? node + 4 : node);
    if (k < 0 || k >= nodes) {
      say("--node-rate '%s': there is no node '%s' (nodes are 0..%d, or node0..node%d)", arg,
          node, nodes - 1, nodes - 1);
      return -1;
    }
    if (given[k]) {
      say("--node-rate: node %d is given twice ('%s' and '%s')", k, given[k], arg);
      return -1;
    }
    given[k] = arg;
    rates[k] = eq + 1;
  }
  return 0;
}

/* Which node each rank runs on: consecutive blocks (--map-by slot, the default) or
 * round-robin over the nodes (--map-by node: rank r on node r % M, as Open MPI places
 * them), and its index among the node's ranks. */
static void place_ranks(rank_proc *p, int n, int nodes, int round_robin) {
  int count[256] = {0};
  for (int r = 0; r < n; r++) {
    p[r].node = round_robin ? r % nodes : (int)((long)r * nodes / n);
    p[r].local_rank = count[p[r].node]++;
  }
}

/* rates[k]: node k's link rate (--node-rate, else --inter-node-rate), NULL: no limit */
static int netns_setup(int nodes, const char *const *rates) {
  clean_stale();
  if (run("ip link add gcb%ld type bridge", job_id) != 0) {
    say("cannot create a bridge (ip link add type bridge failed)");
    return -1;
  }
  bridge_made = 1;
  netns_made = 1;
  if (run("ip link set gcb%ld up", job_id) != 0) return -1;
  for (int k = 0; k < nodes; k++) {
    if (run("ip netns add gcomp-%ld-%d", job_id, k) != 0) {
      say("cannot create network namespace gcomp-%ld-%d", job_id, k);
      return -1;
    }
    nnodes_made = k + 1;
    if (run("ip link add gch%ld-%d type veth peer name gcn%ld-%d", job_id, k, job_id, k) ||
        run("ip link set gcn%ld-%d netns gcomp-%ld-%d", job_id, k, job_id, k) ||
        /* a /16: node k is 10.213.(k+1)/256.(k+1)%256, so 256 nodes fit (in a /24 node 254
         * got the broadcast address and node 255 none) */
        run("ip -n gcomp-%ld-%d addr add 10.213.%d.%d/16 dev gcn%ld-%d", job_id, k, (k + 1) / 256,
            (k + 1) % 256, job_id, k) ||
        run("ip -n gcomp-%ld-%d link set gcn%ld-%d up", job_id, k, job_id, k) ||
        run("ip -n gcomp-%ld-%d link set lo up", job_id, k) ||
        run("ip link set gch%ld-%d master gcb%ld", job_id, k, job_id) ||
        run("ip link set gch%ld-%d up", job_id, k)) {
      say("setting up the veth link of node %d failed", k);
      return -1;
    }
    const char *rate = rates[k];
    if (rate && (run("tc qdisc add dev gch%ld-%d root tbf rate %s burst 256kb latency 100ms", job_id,
                     k, rate) ||
                 run("ip netns exec gcomp-%ld-%d tc qdisc add dev gcn%ld-%d root tbf rate %s "
                     "burst 256kb latency 100ms", job_id, k, job_id, k, rate))) {
      say("tc tbf rate %s on node %d's link failed (is the rate valid, e.g. 1gbit?)", rate, k);
      return -1;
    }
  }
  return 0;
}

static int free_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {0};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t l = sizeof a;
  int port = 29500 + (int)(job_id % 20000);
  if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
      getsockname(fd, (struct sockaddr *)&a, &l) == 0)
    port = ntohs(a.sin_port);
  if (fd >= 0) close(fd);
  return port;
}

static void make_token(char *out, size_t n) {
  unsigned char raw[16];
  int fd = open("/dev/urandom", O_RDONLY);
  ssize_t got = fd >= 0 ? read(fd, raw, sizeof raw) : -1;
  if (fd >= 0) close(fd);
  if (got != (ssize_t)sizeof raw) {
    uint64_t x = now_ms() ^ ((uint64_t)getpid() << 32);
    for (size_t i = 0; i < sizeof raw; i++) {
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      raw[i] = (unsigned char)(x >> 56);
    }
  }
  for (size_t i = 0; i < sizeof raw && 2 * i + 2 < n; i++) snprintf(out + 2 * i, 3, "%02x", raw[i]);
}

/* torch.distributed's env:// variables, as torchrun sets them (in the child). */
static void setenv_int(const char *name, int value) {
  char v[32];
  snprintf(v, sizeof v, "%d", value);
  setenv(name, v, 1);
}

static void set_torch_env(int rank, int n, const rank_proc *p, const char *master, int port) {
  int local_n = 0;
  for (int r = 0; r < n; r++) local_n += p[r].node == p[rank].node;
  setenv_int("RANK", rank);
  setenv_int("WORLD_SIZE", n);
  setenv_int("LOCAL_RANK", p[rank].local_rank);
  setenv_int("LOCAL_WORLD_SIZE", local_n);
  setenv("MASTER_ADDR", master, 1);
  setenv_int("MASTER_PORT", port);
}

static void usage(FILE *f) {
  fprintf(f,
          "usage: gcomp-run -n N [--nodes M] [--map-by slot|node] [--inter-node-rate RATE]\n"
          "                 [--node-rate NODE=RATE]... [--tag-output] [--grace MS]\n"
          "                 [--netns auto|on|off] [-v] -- PROGRAM [ARGS...]\n"
          "  -n N                  number of ranks\n"
          "  --nodes M             emulated nodes (ranks are split in consecutive blocks); as root\n"
          "                        each node gets its own network namespace and veth link\n"
          "  --map-by slot|node    slot (default): consecutive blocks of ranks per node; node:\n"
          "                        round-robin, rank r on node r %% M (as Open MPI's option)\n"
          "  --inter-node-rate R   limit each node's link with tc tbf (e.g. 1gbit, 500mbit)\n"
          "  --node-rate NODE=R    limit node NODE's link (index or id: 1, node1) to R instead;\n"
          "                        repeatable, one node each\n"
          "  --tag-output          prefix every output line with [rank]\n"
          "  --grace MS            when a rank fails, let the others run MS milliseconds before\n"
          "                        killing them (default 0)\n"
          "  --netns auto|on|off   network namespaces: auto = when root and M > 1\n"
          "  -v                    show the commands that build the namespaces\n");
}

static void flush_lines(int rank, char *buf, size_t *len, FILE *to, int final) {
  size_t start = 0;
  for (size_t i = 0; i < *len; i++)
    if (buf[i] == '\n') {
      fprintf(to, "[%d] %.*s\n", rank, (int)(i - start), buf + start);
      start = i + 1;
    }
  if (final && start < *len) {
    fprintf(to, "[%d] %.*s\n", rank, (int)(*len - start), buf + start);
    start = *len;
  }
  if (start == 0 && *len == 4096) {   /* a very long line: cut it */
    fprintf(to, "[%d] %.*s\n", rank, (int)*len, buf);
    start = *len;
  }
  memmove(buf, buf + start, *len - start);
  *len -= start;
  fflush(to);
}

static void pump(rank_proc *p, int n, int timeout_ms) {
  struct pollfd pfd[2 * 256];
  int who[2 * 256], which[2 * 256], m = 0;
  for (int r = 0; r < n && m + 2 <= 2 * 256; r++) {   /* two pipes for each of 256 ranks */
    if (p[r].out_fd >= 0) pfd[m] = (struct pollfd){p[r].out_fd, POLLIN, 0}, who[m] = r, which[m++] = 1;
    if (p[r].err_fd >= 0) pfd[m] = (struct pollfd){p[r].err_fd, POLLIN, 0}, who[m] = r, which[m++] = 2;
  }
  if (m == 0) {
    struct timespec ts = {0, (long)timeout_ms * 1000000L};
    nanosleep(&ts, NULL);
    return;
  }
  if (poll(pfd, (nfds_t)m, timeout_ms) <= 0) return;
  for (int i = 0; i < m; i++) {
    if (!(pfd[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
    rank_proc *q = &p[who[i]];
    int *fd = which[i] == 1 ? &q->out_fd : &q->err_fd;
    char *buf = which[i] == 1 ? q->out_buf : q->err_buf;
    size_t *len = which[i] == 1 ? &q->out_len : &q->err_len;
    ssize_t k = read(*fd, buf + *len, sizeof q->out_buf - *len);
    if (k <= 0) {
      flush_lines(who[i], buf, len, which[i] == 1 ? stdout : stderr, 1);
      close(*fd);
      *fd = -1;
      continue;
    }
    *len += (size_t)k;
    flush_lines(who[i], buf, len, which[i] == 1 ? stdout : stderr, 0);
  }
}

static void describe(int rank, const rank_proc *p, char *out, size_t n) {
  if (WIFSIGNALED(p->status))
    snprintf(out, n, "rank %d (pid %d, node %d) was killed by signal %d (%s)", rank, (int)p->pid,
             p->node, WTERMSIG(p->status), strsignal(WTERMSIG(p->status)));
  else
    snprintf(out, n, "rank %d (pid %d, node %d) exited with status %d", rank, (int)p->pid, p->node,
             WEXITSTATUS(p->status));
}

int main(int argc, char **argv) {
  int n = 0, nodes = 1, tag = 0, grace_ms = 0, netns_mode = -1;   /* -1 auto */
  const char *rate = NULL;
  char *node_rate_args[256];
  int n_node_rates = 0, round_robin = 0;
  int i = 1;
  for (; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--") == 0) {
      i++;
      break;
    } else if (strcmp(a, "-n") == 0 && i + 1 < argc) {
      n = whole(argv[++i]);
    } else if (strcmp(a, "--nodes") == 0 && i + 1 < argc) {
      nodes = whole(argv[++i]);
    } else if (strcmp(a, "--inter-node-rate") == 0 && i + 1 < argc) {
      rate = argv[++i];
    } else if (strcmp(a, "--node-rate") == 0 && i + 1 < argc) {
      if (n_node_rates == 256) {
        say("--node-rate: at most 256 (one per node)");
        return 2;
      }
      node_rate_args[n_node_rates++] = argv[++i];
    } else if (strcmp(a, "--map-by") == 0 && i + 1 < argc) {
      const char *v = argv[++i];
      round_robin = strcmp(v, "node") == 0;
      if (!round_robin && strcmp(v, "slot") != 0) {
        say("--map-by '%s' is not slot or node", v);
        return 2;
      }
    } else if (strcmp(a, "--tag-output") == 0) {
      tag = 1;
    } else if (strcmp(a, "--grace") == 0 && i + 1 < argc) {
      grace_ms = whole(argv[++i]);
      if (grace_ms < 0) {
        say("--grace '%s' is not a whole number of milliseconds", argv[i]);
        return 2;
      }
    } else if (strcmp(a, "--netns") == 0 && i + 1 < argc) {
      const char *v = argv[++i];
      netns_mode = strcmp(v, "on") == 0 ? 1 : strcmp(v, "off") == 0 ? 0 : -1;
      if (netns_mode < 0 && strcmp(v, "auto") != 0) {
        say("--netns '%s' is not auto, on or off", v);
        return 2;
      }
    } else if (strcmp(a, "-v") == 0) {
      verbose = 1;
    } else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      usage(stdout);
      return 0;
    } else if (a[0] != '-') {
      break;   /* PROGRAM without "--" */
    } else {
      say("unknown option '%s'", a);
      usage(stderr);
      return 2;
    }
  }
  if (i >= argc || n < 1 || n > 256 || nodes < 1 || nodes > n) {
    if (n < 1 || n > 256) say("-n must be between 1 and 256");
    else if (nodes < 1 || nodes > n) say("--nodes must be between 1 and the number of ranks");
    if (i >= argc) say("no program given");
    usage(stderr);
    return 2;
  }
  char **prog = argv + i;
  job_id = (long)getpid();

  int root = geteuid() == 0;
  int use_netns = netns_mode == 1 || (netns_mode == -1 && root && nodes > 1);
  if (use_netns && !root) {
    say("--netns on needs root");
    return 2;
  }
  if (nodes > 1 && !use_netns)
    say("%s: emulating %d nodes with GCOMP_NODE_ID only (no network namespaces); traffic "
        "between them still uses the inter-node provider over the host's own interfaces",
        root ? "--netns off" : "not root", nodes);
  if (rate && !rate_ok(rate)) {
    say("--inter-node-rate '%s' is not a rate: a number and a unit, e.g. 1gbit, 500mbit, 100mbps",
        rate);
    return 2;
  }
  const char *rates[256];
  for (int k = 0; k < nodes; k++) rates[k] = rate;
  if (node_rates(node_rate_args, n_node_rates, nodes, rates) != 0) return 2;
  if (rate && !use_netns) say("--inter-node-rate %s ignored: it needs network namespaces", rate);
  if (n_node_rates && !use_netns) say("--node-rate ignored: it needs network namespaces");

  struct sigaction sa = {0};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
  for (size_t s = 0; s < sizeof sigs / sizeof sigs[0]; s++) sigaction(sigs[s], &sa, NULL);
  /* a closed stdout (gcomp-run ... | head) must not kill the launcher before it tears the
   * namespaces down: writes then fail with EPIPE instead, and the ranks get SIGPIPE as
   * usual (restored in the child) */
  signal(SIGPIPE, SIG_IGN);

  if (use_netns && netns_setup(nodes, rates) != 0) {
    netns_teardown();
    if (netns_mode == 1) return 1;
    say("network namespaces are not available here: emulating %d nodes with GCOMP_NODE_ID "
        "only%s", nodes, rate || n_node_rates ? " (and no rate limit)" : "");
    use_netns = 0;
  }

  char token[64] = "";
  make_token(token, sizeof token);
  int port = free_port(), torch_port = free_port();
  for (int k = 0; k < 8 && torch_port == port; k++) torch_port = free_port();
  const char *master = use_netns ? "10.213.0.1" : "127.0.0.1";
  char rootaddr[64];
  snprintf(rootaddr, sizeof rootaddr, "%s:%d", master, port);

  rank_proc *p = calloc((size_t)n, sizeof *p);
  if (!p) return 1;
  place_ranks(p, n, nodes, round_robin);
  for (int r = 0; r < n; r++) p[r].out_fd = p[r].err_fd = -1;
  fflush(NULL);
  int started = 0, failed_start = 0;
  for (int r = 0; r < n && !got_signal; r++) {
    int out[2] = {-1, -1}, err[2] = {-1, -1};
    if (tag && (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0)) {
      say("pipe: %s", strerror(errno));
      failed_start = 1;
      break;
    }
    int nsfd = -1;
    if (use_netns) {
      char path[128];
      snprintf(path, sizeof path, NETNS_DIR "/gcomp-%ld-%d", job_id, p[r].node);
      nsfd = open(path, O_RDONLY | O_CLOEXEC);
      if (nsfd < 0) {
        say("cannot open %s: %s", path, strerror(errno));
        failed_start = 1;
        break;
      }
    }
    pid_t pid = fork();
    if (pid == 0) {
      setpgid(0, 0);
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      for (size_t s = 0; s < sizeof sigs / sizeof sigs[0]; s++) signal(sigs[s], SIG_DFL);
      signal(SIGPIPE, SIG_DFL);
      if (nsfd >= 0 && setns(nsfd, CLONE_NEWNET) != 0) {
        fprintf(stderr, "gcomp-run: rank %d: setns: %s\n", r, strerror(errno));
        _exit(126);
      }
      if (tag) {
        dup2(out[1], 1);
        dup2(err[1], 2);
      }
      char v[64];
      snprintf(v, sizeof v, "%d", r);
      setenv("GCOMP_RANK", v, 1);
      snprintf(v, sizeof v, "%d", n);
      setenv("GCOMP_SIZE", v, 1);
      setenv("GCOMP_HOST_RANKS", v, 0);   /* every rank shares this machine's CPUs */
      snprintf(v, sizeof v, "%d", p[r].local_rank);
      setenv("GCOMP_LOCAL_RANK", v, 1);
      snprintf(v, sizeof v, "node%d", p[r].node);
      setenv("GCOMP_NODE_ID", v, 1);
      setenv("GCOMP_ROOT", rootaddr, 1);
      setenv("GCOMP_JOB_TOKEN", token, 1);
      set_torch_env(r, n, p, master, torch_port);
      if (use_netns) {
        snprintf(v, sizeof v, "gcn%ld-%d", job_id, p[r].node);
        setenv("FI_TCP_IFACE", v, 1);
        setenv("GLOO_SOCKET_IFNAME", v, 1);
      }
      execvp(prog[0], prog);
      fprintf(stderr, "gcomp-run: rank %d: cannot run %s: %s\n", r, prog[0], strerror(errno));
      _exit(127);
    }
    if (nsfd >= 0) close(nsfd);
    if (pid < 0) {
      say("fork: %s", strerror(errno));
      failed_start = 1;
      break;
    }
    setpgid(pid, pid);
    p[r].pid = pid;
    p[r].running = 1;
    started++;
    if (tag) {
      close(out[1]);
      close(err[1]);
      p[r].out_fd = out[0];
      p[r].err_fd = err[0];
    }
  }

  int running = started, first_fail = -1, exit_code = 0;
  uint64_t kill_at = 0, hard_kill_at = 0;
  int forwarded = 0;
  if (failed_start || got_signal) kill_at = now_ms();
  for (;;) {
    pump(p, started, 50);
    int st;
    pid_t pid;
    while ((pid = waitpid(-1, &st, WNOHANG)) > 0) {
      for (int r = 0; r < started; r++) {
        if (p[r].pid != pid || !p[r].running) continue;
        p[r].running = 0;
        p[r].status = st;
        running--;
        int bad = !WIFEXITED(st) || WEXITSTATUS(st) != 0;
        if (bad && first_fail < 0 && !got_signal) {
          first_fail = r;
          exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
          char what[200];
          describe(r, &p[r], what, sizeof what);
          say("%s%s", what, running ? "; stopping the other ranks" : "");
          if (!kill_at) kill_at = now_ms() + (uint64_t)grace_ms;
        }
      }
    }
    if (got_signal && !forwarded) {
      for (int r = 0; r < started; r++)
        if (p[r].running) kill(-p[r].pid, got_signal);
      forwarded = 1;
      hard_kill_at = now_ms() + 5000;
    }
    uint64_t t = now_ms();
    if (kill_at && t >= kill_at && running) {
      for (int r = 0; r < started; r++)
        if (p[r].running) {
          kill(-p[r].pid, SIGTERM);
          kill(-p[r].pid, SIGCONT);   /* a stopped rank must see it too */
        }
      kill_at = 0;
      hard_kill_at = t + 3000;
    }
    if (hard_kill_at && t >= hard_kill_at && running) {
      for (int r = 0; r < started; r++)
        if (p[r].running) kill(-p[r].pid, SIGKILL);
      hard_kill_at = 0;
    }
    if (running == 0) {
      int open_fds = 0;
      for (int r = 0; r < started; r++) open_fds += (p[r].out_fd >= 0) + (p[r].err_fd >= 0);
      if (!open_fds) break;
    }
  }
  if (first_fail >= 0 && started > 1) {
    for (int r = 0; r < started; r++) {
      if (r == first_fail) continue;
      char what[200];
      describe(r, &p[r], what, sizeof what);
      if (!WIFEXITED(p[r].status) || WEXITSTATUS(p[r].status) != 0) say("  then %s", what);
    }
  }
  if (netns_made) netns_teardown();
  free(p);
  if (got_signal) {
    say("interrupted by signal %d (%s)", (int)got_signal, strsignal(got_signal));
    return 128 + got_signal;
  }
  if (failed_start && !exit_code) exit_code = 1;
  return exit_code;
}
