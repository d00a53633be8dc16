/* The libfabric transport: RDM endpoints, tagged messages, manual progress.
 *
 * A rank opens at most two endpoints: GCOMP_INTRA_PROVIDER (shm) for the ranks of its node
 * and GCOMP_PROVIDER (tcp;ofi_rxm) for the others; every rank maps to one of them. This
 * file creates a transport (who is where, fabric addresses, the ping) and holds the ops
 * table; ofi_impl.h maps the other files. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include "bootstrap.h"
#include "fault.h"
#include "ofi_impl.h"

/* Every rank sends a ping to each peer and waits for one from each: shm failures after
 * fi_av_insert are otherwise silent hangs. */
static int ping_all(ofi_transport *t) {
  int n = t->pub.size;
  gcomp_treq **reqs = calloc((size_t)n * 2, sizeof *reqs);
  uint64_t *bufs = calloc((size_t)n * 2, sizeof *bufs);
  int status = GCOMP_OK;
  if (!reqs || !bufs) {
    free(reqs);
    free(bufs);
    GCOMP_FAIL(GCOMP_ERR_NOMEM, "ping tables");
  }
  for (int p = 0; p < n && status == GCOMP_OK; p++) {
    if (p == t->pub.rank) continue;
    bufs[2 * p] = (uint64_t)t->pub.rank;
    status = ofi_post(t, OP_RECV, p, KIND_PING, &bufs[2 * p + 1], 8, &reqs[2 * p + 1], 0);
    if (status == GCOMP_OK)
      status = ofi_post(t, OP_SEND, p, KIND_PING, &bufs[2 * p], 8, &reqs[2 * p], 0);
  }
  if (status == GCOMP_OK) status = gcomp_waitall(&t->pub, n * 2, reqs, NULL);
  for (int p = 0; p < n && status == GCOMP_OK; p++)
    if (p != t->pub.rank && bufs[2 * p + 1] != (uint64_t)p)
      status = gcomp_error_set(GCOMP_ERR_FABRIC, __FILE__, __LINE__,
                               "ping from rank %d carried %" PRIu64, p, bufs[2 * p + 1]);
  if (status < 0) {
    for (int i = 0; i < 2 * n; i++)
      if (reqs[i]) ofi_req_abandon(t, reqs[i]);
    char detail[1024];
    snprintf(detail, sizeof detail, "checking that every peer answers (ping): %s",
             gcomp_last_error());
    gcomp_error_restore(status, detail);
  }
  free(reqs);
  free(bufs);
  return status;
}

static const gcomp_transport_ops ofi_ops = {
    .name = "ofi",
    .isend = ofi_isend,
    .irecv = ofi_irecv,
    .test = ofi_test,
    .progress = ofi_progress,
    .cancel = ofi_cancel,
    .destroy = ofi_destroy,
};

/* Round 1's cards as they arrived: any bytes (a rank of another build, or a program that is
 * no gcomp rank, may have sent them; tests/fuzz/fuzz_cards.c feeds it anything). Every rank
 * holds every card, so each refuses alike, naming the same two ranks. */
int gcomp_ofi_cards_read(rank_card *cards, int n, unsigned mine, const char **keys) {
  int status = GCOMP_OK;
  for (int r = 0; r < n && status == GCOMP_OK; r++) {
    const rank_card *c = &cards[r], *first = &cards[0];
    if (c->magic != OFI_CARD_MAGIC)
      status = gcomp_error_set(GCOMP_ERR_INVALID, __FILE__, __LINE__, "rank %d's card at "
                               "bootstrap is not a gcomp rank card (magic 0x%08x)", r, c->magic);
    else if (c->version != first->version)
      status = gcomp_error_set(GCOMP_ERR_INVALID, __FILE__, __LINE__, "mismatched gcomp builds: "
                               "rank 0 speaks wire version %u, rank %d wire version %u (this "
                               "rank: %u); run one build on every rank", first->version, r,
                               c->version, mine);
  }
  for (int r = 0; r < n; r++) {   /* strings ended whatever came: the error may name them */
    cards[r].host[sizeof cards[r].host - 1] = '\0';
    cards[r].pidns[sizeof cards[r].pidns - 1] = '\0';
    cards[r].node[sizeof cards[r].node - 1] = '\0';
    keys[r] = cards[r].node;
  }
  return status;
}

static int setup(ofi_transport *t, gcomp_oob *oob, const char *node_id,
                 const gcomp_fabric_opts *opts) {
  int n = t->pub.size, me = t->pub.rank;
  t->ep_of = calloc((size_t)n, 1);
  t->addr = calloc((size_t)n, sizeof *t->addr);
  t->cards = calloc((size_t)n, sizeof *t->cards);
  t->live_check_ns = calloc((size_t)n, sizeof *t->live_check_ns);
  const char **keys = calloc((size_t)n, sizeof *keys);
  addr_card *addrs = calloc((size_t)n, sizeof *addrs);
  int status = GCOMP_OK;
  if (!t->ep_of || !t->addr || !t->cards || !t->live_check_ns || !keys || !addrs) {
    free(keys);
    free(addrs);
    GCOMP_FAIL(GCOMP_ERR_NOMEM, "tables for %d ranks", n);
  }
  /* round 1: who is where */
  rank_card mine = {.magic = OFI_CARD_MAGIC, .version = gcomp_wire_version(me)};
  t->wire = mine.version;
  mine.pid = (int32_t)getpid();
  gethostname(t->host, sizeof t->host - 1);
  snprintf(mine.host, sizeof mine.host, "%s", t->host);
  ssize_t nl = readlink("/proc/self/ns/pid", t->pidns, sizeof t->pidns - 1);
  t->pidns[nl > 0 ? nl : 0] = '\0';
  memcpy(mine.pidns, t->pidns, sizeof mine.pidns);
  snprintf(mine.node, sizeof mine.node, "%s", node_id);
  status = oob->allgather(oob, &mine, sizeof mine, t->cards);
  if (status < 0) {
    free(keys);
    free(addrs);
    return status;
  }
  status = gcomp_ofi_cards_read(t->cards, n, mine.version, keys);
  if (status == GCOMP_OK) status = gcomp_topology_fill(&t->pub, keys, &t->topo);
  /* endpoints: one per provider actually needed */
  const char *intra = opts->intra_provider, *inter = opts->provider;
  int need_intra = t->pub.local_size > 1, need_inter = t->pub.nnodes > 1;
  /* CQ wait fds only where they can end every wait: no rank of this node to poll beside
   * the sockets (its shm endpoint and the node's segment have no fd). With one, the fd would
   * only shorten naps of 10-160 us, each then costing a trywait's syscalls: 4 ranks on 2
   * nodes (DDP zero_train, quant:bits=4+ef) took 57-58 ms a step with naps, 63-71 ms so. */
  int cq_wait = opts->cq_wait && !need_intra;
  int same = strcmp(intra, inter) == 0;
  int intra_ep = -1, inter_ep = -1;
  pthread_mutex_lock(&ofi_setup_lock);
  /* before libfabric's first fi_getinfo in this process */
  ofi_rxm_tcp_defaults(inter, opts->chunk_bytes);
  ofi_rxm_tcp_defaults(intra, opts->chunk_bytes);
  if (status == GCOMP_OK && need_intra) {
    intra_ep = t->neps;
    status = ofi_ep_open(&t->eps[t->neps++], "intra", intra, opts->chunk_bytes, n,
                         cq_wait);
  }
  if (status == GCOMP_OK && need_inter) {
    if (same && intra_ep >= 0) {
      inter_ep = intra_ep;
    } else {
      inter_ep = t->neps;
      status = ofi_ep_open(&t->eps[t->neps++], "inter", inter, opts->chunk_bytes, n,
                           cq_wait);
    }
  }
  pthread_mutex_unlock(&ofi_setup_lock);
  /* idle waits block on the CQs' wait fds (gcomp_idle_blocker); for as long as a wait loop
   * lets them only when nothing else can end the wait: every endpoint has an fd, and no rank
   * of this node shares memory with this one (the node's segment, reduce/shm.c, is polled) */
  t->block_whole = t->neps > 0;
  for (int i = 0; i < t->neps; i++) {
    if (t->eps[i].cq_fd >= 0) t->can_block = 1;
    else t->block_whole = 0;
  }
  if (t->pub.local_size > 1) t->block_whole = 0;
  /* round 2: fabric addresses */
  addr_card ac = {0};
  if (intra_ep >= 0) {
    ac.len[0] = (uint32_t)t->eps[intra_ep].namelen;
    memcpy(ac.name[0], t->eps[intra_ep].name, ac.len[0]);
  }
  if (inter_ep >= 0) {
    ac.len[1] = (uint32_t)t->eps[inter_ep].namelen;
    memcpy(ac.name[1], t->eps[inter_ep].name, ac.len[1]);
  }
  /* a rank that failed above still takes part, so the others fail fast instead of waiting */
  char detail[1024] = "";
  if (status < 0) snprintf(detail, sizeof detail, "%s", gcomp_last_error());
  int st2 = oob->allgather(oob, &ac, sizeof ac, addrs);
  if (status < 0)
    gcomp_error_restore(status, detail);   /* the first cause is the one to report */
  else
    status = st2;
  pthread_mutex_lock(&ofi_setup_lock);
  for (int r = 0; r < n && status == GCOMP_OK; r++) {
    if (r == me) {
      t->ep_of[r] = -1;
      continue;
    }
    int local = t->pub.node_of[r] == t->pub.node;
    int which = local ? 0 : 1;
    int epi = local ? intra_ep : inter_ep;
    if (addrs[r].len[which] == 0 || addrs[r].len[which] > MAX_NAME) {
      status = gcomp_error_set(GCOMP_ERR_BOOTSTRAP, __FILE__, __LINE__,
                               "rank %d published no %s-node address (did its endpoint fail?)", r,
                               local ? "intra" : "inter");
      break;
    }
    t->ep_of[r] = (signed char)epi;
    int k = fi_av_insert(t->eps[epi].av, addrs[r].name[which], 1, &t->addr[r], 0, NULL);
    if (k != 1)
      status = gcomp_error_set(GCOMP_ERR_FABRIC, __FILE__, __LINE__,
                               "fi_av_insert of rank %d's address over %s failed (%d)", r,
                               t->eps[epi].prov, k);
  }
  pthread_mutex_unlock(&ofi_setup_lock);
  free(keys);
  free(addrs);
  if (status == GCOMP_OK) status = ofi_proto_setup(t);
  if (status == GCOMP_OK) status = ping_all(t);
  if (status == GCOMP_OK)
    GCOMP_INFO(GCOMP_SUB_FABRIC, "rank %d of %d: node %d of %d (%s), local rank %d of %d; intra %s, "
               "inter %s", me, n, t->pub.node, t->pub.nnodes, node_id, t->pub.local_rank,
               t->pub.local_size, intra_ep >= 0 ? intra : "-", inter_ep >= 0 ? inter : "-");
  return status;
}

int gcomp_transport_create(gcomp_oob *oob, const char *node_id, const gcomp_fabric_opts *opts,
                           gcomp_transport **out) {
  GCOMP_FAIL_IF(!oob || !node_id || !opts || !out, GCOMP_ERR_INVALID,
                "gcomp_transport_create: NULL argument");
  GCOMP_CHECK(gcomp_init());
  *out = NULL;
  ofi_transport *t = calloc(1, sizeof *t);
  GCOMP_FAIL_IF(!t, GCOMP_ERR_NOMEM, "transport");
  t->pub.ops = &ofi_ops;
  t->pub.rank = oob->rank;
  t->pub.size = oob->size;
  t->pub.timeout_ms = opts->timeout_ms;
  t->pub.failed_peer = -1;
  int s = setup(t, oob, node_id, opts);
  t->ready = s == GCOMP_OK;
  t->fault_cqerr = t->ready && gcomp_fault_armed("cqerr", t->pub.rank, NULL);
  if (s < 0) {
    ofi_destroy(&t->pub);
    return gcomp_error_trace(s, __FILE__, __LINE__);
  }
  *out = &t->pub;
  return GCOMP_OK;
}

int gcomp_transport_create_env(const gcomp_fabric_opts *opts, gcomp_transport **out) {
  GCOMP_FAIL_IF(!opts || !out, GCOMP_ERR_INVALID, "gcomp_transport_create_env: NULL argument");
  GCOMP_CHECK(gcomp_init());
  gcomp_boot_env env;
  GCOMP_CHECK(gcomp_boot_env_parse(NULL, (void *)opts->node_id, NULL, &env));
  gcomp_oob *oob = NULL;
  GCOMP_CHECK(gcomp_rendezvous_open(&env, opts->timeout_ms, &oob));
  int s = gcomp_transport_create(oob, env.node_id, opts, out);
  oob->close(oob);
  GCOMP_CHECK(s);
  if (env.local_rank >= 0 && env.local_rank != (*out)->local_rank)
    GCOMP_WARN(GCOMP_SUB_FABRIC, "rank %d: the launcher says local rank %d, node ids say %d; "
               "using %d", env.rank, env.local_rank, (*out)->local_rank, (*out)->local_rank);
  return GCOMP_OK;
}
