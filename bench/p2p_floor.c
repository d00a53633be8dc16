/* The provider's own streaming rate, without gcomp: one process sends BYTES to another in
 * messages of CHUNK bytes over a tagged RDM endpoint of PROVIDER, the receiver keeping
 * WINDOW receives posted (the sender as many sends in flight). It is the floor under
 * gcomp's chunked transfers: what any window of chunks over this provider can reach.
 *
 *   cc -O2 -o p2p_floor bench/p2p_floor.c -lfabric
 *   ./p2p_floor [PROVIDER=shm] [CHUNK=8192] [BYTES=67108864] [WINDOW=128] [REPS=5]
 *
 * Prints the best of REPS transfers: ms, MB/s and us per message. The two processes
 * exchange endpoint names through pipes (fork), so no launcher is needed. */
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#define DIE(...) (fprintf(stderr, __VA_ARGS__), fputc('\n', stderr), exit(1))
#define TRY(call)                                                                            \
  do {                                                                                       \
    int rc_ = (int)(call);                                                                   \
    if (rc_) DIE("%s: %s", #call, fi_strerror(-rc_));                                        \
  } while (0)

typedef struct {
  struct fid_fabric *fabric;
  struct fid_domain *domain;
  struct fid_av *av;
  struct fid_cq *cq;
  struct fid_ep *ep;
} fab;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void fab_open(fab *f, const char *prov) {
  struct fi_info *hints = fi_allocinfo(), *info = NULL;
  hints->ep_attr->type = FI_EP_RDM;
  hints->caps = FI_TAGGED;
  hints->mode = FI_CONTEXT;
  hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
  hints->domain_attr->data_progress = FI_PROGRESS_MANUAL;
  hints->fabric_attr->prov_name = strdup(prov);
  TRY(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info));
  if (info->domain_attr->mr_mode & FI_MR_LOCAL) DIE("%s needs local registration", prov);
  TRY(fi_fabric(info->fabric_attr, &f->fabric, NULL));
  TRY(fi_domain(f->fabric, info, &f->domain, NULL));
  struct fi_cq_attr cq = {.format = FI_CQ_FORMAT_TAGGED, .wait_obj = FI_WAIT_NONE};
  TRY(fi_cq_open(f->domain, &cq, &f->cq, NULL));
  struct fi_av_attr av = {.type = FI_AV_TABLE, .count = 2};
  TRY(fi_av_open(f->domain, &av, &f->av, NULL));
  TRY(fi_endpoint(f->domain, info, &f->ep, NULL));
  TRY(fi_ep_bind(f->ep, &f->cq->fid, FI_TRANSMIT | FI_RECV));
  TRY(fi_ep_bind(f->ep, &f->av->fid, 0));
  TRY(fi_enable(f->ep));
  fi_freeinfo(hints);
  fi_freeinfo(info);
}

/* Reads one completion (an error is fatal): 1, or 0 when none came and !wait */
static int reap_one(fab *f, int wait) {
  struct fi_cq_tagged_entry e;
  for (;;) {
    ssize_t n = fi_cq_read(f->cq, &e, 1);
    if (n == 1) return 1;
    if (n == -FI_EAGAIN && !wait) return 0;
    if (n == -FI_EAVAIL) {
      struct fi_cq_err_entry err = {0};
      fi_cq_readerr(f->cq, &err, 0);
      DIE("completion error: %s", fi_strerror(err.err));
    }
    if (n != -FI_EAGAIN) DIE("fi_cq_read: %s", fi_strerror((int)-n));
    sched_yield();   /* both ends may share a core (and run under chrt -f) */
  }
}

static void reap(fab *f) { reap_one(f, 1); }

/* Posts one operation, reading completions while the provider pushes back */
static void post(fab *f, int send, char *p, size_t n, fi_addr_t peer, struct fi_context *ctx,
                 long *inflight, long *done) {
  for (;;) {
    ssize_t rc = send ? fi_tsend(f->ep, p, n, NULL, peer, 1, ctx)
                      : fi_trecv(f->ep, p, n, NULL, peer, 1, 0, ctx);
    if (rc == 0) break;
    if (rc != -FI_EAGAIN) DIE("posting: %s", fi_strerror((int)-rc));
    if (reap_one(f, 0)) --*inflight, ++*done;   /* progress: shm connects on a first send */
  }
  ++*inflight;
}

/* One transfer of bytes in chunks, window operations in flight (the sender first waits for
 * the receiver's go byte so that the receives are posted) */
static void transfer(fab *f, int send, char *buf, size_t chunk, size_t bytes, long window,
                     fi_addr_t peer, struct fi_context *ctx, int go_in, int go_out) {
  long nmsg = (long)((bytes + chunk - 1) / chunk), posted = 0, inflight = 0, done = 0;
  char b = 1;
  if (!send) {
    for (; posted < nmsg && posted < window; posted++)
      post(f, 0, buf + (size_t)posted * chunk, chunk, peer, &ctx[posted % window], &inflight,
           &done);
    if (write(go_out, &b, 1) != 1) DIE("pipe");
  } else if (read(go_in, &b, 1) != 1) {
    DIE("pipe");
  }
  while (done < nmsg) {
    while (posted < nmsg && inflight < window) {
      post(f, send, buf + (size_t)posted * chunk, chunk, peer, &ctx[posted % window], &inflight,
           &done);
      posted++;
    }
    if (done == nmsg) break;
    reap(f);
    inflight--;
    done++;
  }
}

int main(int argc, char **argv) {
  const char *prov = argc > 1 ? argv[1] : "shm";
  size_t chunk = argc > 2 ? strtoull(argv[2], NULL, 0) : 8192;
  size_t bytes = argc > 3 ? strtoull(argv[3], NULL, 0) : 64u << 20;
  long window = argc > 4 ? atol(argv[4]) : 128;
  int reps = argc > 5 ? atoi(argv[5]) : 5;
  if (!chunk || !bytes || window < 1 || reps < 1)
    DIE("usage: %s [prov chunk bytes window reps]", argv[0]);
  int to_child[2], to_parent[2];
  if (pipe(to_child) || pipe(to_parent)) DIE("pipe");
  pid_t pid = fork();
  int send = pid != 0;   /* the parent sends, the child receives */
  int in = send ? to_parent[0] : to_child[0], out = send ? to_child[1] : to_parent[1];
  fab f;
  fab_open(&f, prov);
  char name[256], peer_name[256];
  size_t len = sizeof name;
  TRY(fi_getname(&f.ep->fid, name, &len));
  if (write(out, &len, sizeof len) != sizeof len || write(out, name, len) != (ssize_t)len)
    DIE("pipe");
  size_t plen = 0;
  if (read(in, &plen, sizeof plen) != sizeof plen || plen > sizeof peer_name ||
      read(in, peer_name, plen) != (ssize_t)plen)
    DIE("pipe");
  fi_addr_t peer;
  if (fi_av_insert(f.av, peer_name, 1, &peer, 0, NULL) != 1) DIE("fi_av_insert");
  char *buf = malloc(bytes);
  struct fi_context *ctx = calloc((size_t)window, sizeof *ctx);
  if (!buf || !ctx) DIE("memory");
  memset(buf, send ? 7 : 0, bytes);
  double best = 1e30;
  for (int r = 0; r < reps + 1; r++) {   /* the first is a warm-up */
    double t0 = now_s();
    transfer(&f, send, buf, chunk, bytes, window, peer, ctx, in, out);
    char b = 1;   /* the sender's time ends when the receiver has everything */
    if (send ? read(in, &b, 1) != 1 : write(out, &b, 1) != 1) DIE("pipe");
    double dt = now_s() - t0;
    if (r && dt < best) best = dt;
  }
  if (send) {
    long nmsg = (long)((bytes + chunk - 1) / chunk);
    printf("%s chunk %zu bytes %zu window %ld: %.2f ms, %.0f MB/s, %.2f us/message\n", prov,
           chunk, bytes, window, best * 1e3, (double)bytes / best / 1e6, best * 1e6 / (double)nmsg);
    waitpid(pid, NULL, 0);
  }
  fi_close(&f.ep->fid);
  fi_close(&f.av->fid);
  fi_close(&f.cq->fid);
  fi_close(&f.domain->fid);
  fi_close(&f.fabric->fid);
  free(buf);
  free(ctx);
  return 0;
}
