/* Communicators made from a communicator: gcomp_comm_split and gcomp_comm_dup, and the
 * calibration a communicator lends to those created with a config
 * (gcomp_config_share_calibration).
 *
 * A split is collective over the parent. The ranks exchange (color, key) in one internal
 * allreduce; each color's members, ordered by (key, parent rank), then bootstrap a transport
 * of their own through the parent's point-to-point transport: every out-of-band round, the
 * group's first member gathers the members' records and sends all of them back. The new
 * transport gets the parent's node map (node ids made from the parent's node indices) and
 * settings. In-process ranks (gcomp_comm_init_local) get an in-process transport instead,
 * which the group's first member creates and hands out rank by rank through the parent's
 * (they share the address space). Then the child is created like any communicator, taking
 * the parent's calibration where it holds (calib.c). Members of other colors are done after
 * the exchange: the parent's later calls use later call numbers than the bootstrap's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm_impl.h"

/* The members of one color, in their order in the new communicator */
typedef struct {
  int *ranks;   /* parent ranks */
  int n, me;    /* size, and this rank's index */
  uint32_t seq; /* the parent call number the bootstrap's tags use */
  int round;    /* out-of-band rounds so far */
} members;

/* ---- the exchange of colors and keys -------------------------------------------------- */
typedef struct {
  int rank, key;
} member_key;

static int by_key(const void *a, const void *b) {
  const member_key *x = a, *y = b;
  if (x->key != y->key) return x->key < y->key ? -1 : 1;
  return (x->rank > y->rank) - (x->rank < y->rank);
}

/* Every rank's color and key through the parent; a rank that passed a bad color is named
 * on all of them alike. m->ranks is NULL for GCOMP_UNDEFINED. */
static int exchange_colors(gcomp_comm *comm, int color, int key, members *m) {
  int n = comm->t->size, me = comm->t->rank;
  int64_t *v = calloc(2 * (size_t)n, sizeof *v);
  GCOMP_FAIL_IF(!v, GCOMP_ERR_NOMEM, "gcomp_comm_split: %d ranks", n);
  /* each slot written by one rank, zeros elsewhere: the sum is the allgather */
  /* a color c >= 0 as c + 2, GCOMP_UNDEFINED as 1, a bad one as itself (<= -2) */
  v[2 * me] = color >= 0 ? (int64_t)color + 2 : color == GCOMP_UNDEFINED ? 1 : color;
  v[2 * me + 1] = key;
  int st = gcomp_call_internal(comm, v, 2 * (size_t)n, GCOMP_INT64, GCOMP_SUM, NULL, 0);
  for (int r = 0; st == GCOMP_OK && r < n; r++)
    if (v[2 * r] <= 0)
      st = gcomp_error_set(GCOMP_ERR_INVALID, __FILE__, __LINE__,
                           "gcomp_comm_split: rank %d passed color %lld (a color is >= 0, or "
                           "GCOMP_UNDEFINED)", r, (long long)v[2 * r]);
  member_key *mk = st == GCOMP_OK && color >= 0 ? calloc((size_t)n, sizeof *mk) : NULL;
  if (st == GCOMP_OK && color >= 0 && !mk)
    st = gcomp_error_set(GCOMP_ERR_NOMEM, __FILE__, __LINE__, "gcomp_comm_split: members");
  m->n = 0;
  for (int r = 0; mk && r < n; r++)
    if (v[2 * r] == (int64_t)color + 2) mk[m->n++] = (member_key){r, (int)v[2 * r + 1]};
  free(v);
  if (!mk) return st;
  qsort(mk, (size_t)m->n, sizeof *mk, by_key);
  m->ranks = malloc((size_t)m->n * sizeof *m->ranks);
  for (int i = 0; m->ranks && i < m->n; i++) {
    m->ranks[i] = mk[i].rank;
    if (mk[i].rank == me) m->me = i;
  }
  free(mk);
  GCOMP_FAIL_IF(!m->ranks, GCOMP_ERR_NOMEM, "gcomp_comm_split: members");
  return GCOMP_OK;
}

/* ---- the new transport ---------------------------------------------------------------- */
/* One out-of-band round over the parent's transport: the first member gathers, then sends
 * every record to every member. */
static int members_allgather(gcomp_oob *oob, const void *mine, size_t len, void *all) {
  gcomp_transport *pt = ((void **)oob->ctx)[0];
  members *m = ((void **)oob->ctx)[1];
  uint64_t up = gcomp_tag(m->seq, 2 * (uint32_t)m->round);
  uint64_t down = gcomp_tag(m->seq, 2 * (uint32_t)m->round + 1);
  m->round++;
  if (m->me != 0) {
    gcomp_treq *r = NULL;
    GCOMP_CHECK(gcomp_irecv(pt, m->ranks[0], down, all, len * (size_t)m->n, &r));
    int st = gcomp_send(pt, m->ranks[0], up, mine, len);
    if (st < 0) {
      gcomp_cancel(pt, r);
      return gcomp_error_trace(st, __FILE__, __LINE__);
    }
    return gcomp_wait(pt, r, NULL);
  }
  gcomp_treq **reqs = calloc((size_t)m->n, sizeof *reqs);
  GCOMP_FAIL_IF(!reqs, GCOMP_ERR_NOMEM, "gcomp_comm_split: %d members", m->n);
  memcpy(all, mine, len);
  int st = GCOMP_OK;
  for (int i = 1; i < m->n && st == GCOMP_OK; i++)
    st = gcomp_irecv(pt, m->ranks[i], up, (uint8_t *)all + (size_t)i * len, len, &reqs[i]);
  if (st == GCOMP_OK) st = gcomp_waitall(pt, m->n, reqs, NULL);
  for (int i = 1; i < m->n && st == GCOMP_OK; i++)
    st = gcomp_isend(pt, m->ranks[i], down, all, len * (size_t)m->n, &reqs[i]);
  if (st == GCOMP_OK) st = gcomp_waitall(pt, m->n, reqs, NULL);
  for (int i = 1; i < m->n; i++)
    if (reqs[i]) gcomp_cancel(pt, reqs[i]);
  free(reqs);
  return st;
}

static void members_close(gcomp_oob *oob) { (void)oob; }

/* Over libfabric: a transport of the members' own, bootstrapped through the parent */
static int ofi_child(gcomp_comm *comm, members *m, const gcomp_settings *set,
                     gcomp_transport **out) {
  void *ctx[2] = {comm->t, m};
  gcomp_oob oob = {.rank = m->me, .size = m->n, .allgather = members_allgather,
                   .close = members_close, .ctx = ctx};
  char node[32];
  snprintf(node, sizeof node, "node-%d", comm->t->node);   /* the parent's node map */
  gcomp_fabric_opts opts;
  gcomp_fabric_opts_from(set, &opts);
  return gcomp_transport_create(&oob, node, &opts, out);
}

/* In-process ranks: the first member makes the members' loopback and hands each its
 * transport (a pointer, valid in the one address space they share); NULL when it failed. */
static int loopback_child(gcomp_comm *comm, members *m, const gcomp_settings *set,
                          gcomp_transport **out) {
  gcomp_transport *pt = comm->t;
  uint64_t tag = gcomp_tag(m->seq, 1000);
  if (m->me != 0) {
    uint64_t p = 0;
    GCOMP_CHECK(gcomp_recv(pt, m->ranks[0], tag, &p, sizeof p, NULL));
    *out = (gcomp_transport *)(uintptr_t)p;
    GCOMP_FAIL_IF(!*out, GCOMP_ERR_NOMEM, "gcomp_comm_split: the first member of the new "
                  "communicator (rank %d) could not create its in-process ranks", m->ranks[0]);
    return GCOMP_OK;
  }
  gcomp_transport **ts = calloc((size_t)m->n, sizeof *ts);
  int *node_of = calloc((size_t)m->n, sizeof *node_of);
  int st = ts && node_of ? GCOMP_OK
                         : gcomp_error_set(GCOMP_ERR_NOMEM, __FILE__, __LINE__,
                                           "gcomp_comm_split: %d in-process ranks", m->n);
  for (int i = 0; st == GCOMP_OK && i < m->n; i++) node_of[i] = pt->node_of[m->ranks[i]];
  gcomp_fabric_opts opts;
  gcomp_fabric_opts_from(set, &opts);
  if (st == GCOMP_OK) st = gcomp_loopback_create(m->n, node_of, &opts, ts);
  char detail[1024] = "";
  if (st < 0) snprintf(detail, sizeof detail, "%s", gcomp_last_error());
  /* every member hears, success or not, so none waits for a transport that never comes */
  for (int i = 1; i < m->n; i++) {
    uint64_t p = st == GCOMP_OK ? (uint64_t)(uintptr_t)ts[i] : 0;
    int sst = gcomp_send(pt, m->ranks[i], tag, &p, sizeof p);
    if (sst < 0 && st == GCOMP_OK) {
      st = sst;   /* that member will fail by its timeout; the rest are handed theirs */
      snprintf(detail, sizeof detail, "%s", gcomp_last_error());
    }
  }
  if (st == GCOMP_OK) *out = ts[0];
  free(ts);
  free(node_of);
  return st < 0 ? gcomp_error_restore(st, detail) : GCOMP_OK;
}

/* ---- the new communicator's settings -------------------------------------------------- */
/* A path setting of the child: the parent's with %r expanded (the rank of the family's
 * first communicator: the parent's own pattern has none left when it is a child) and
 * ".s<N>" before the extension, "stats-%r.json" -> "stats-3.s2.json". */
static int child_path(const gcomp_comm *comm, gcomp_settings *set, gcomp_param_id id, int n) {
  const char *pattern = gcomp_settings_str(&comm->set, id);
  if (!pattern[0]) return GCOMP_OK;
  char path[4096], out[4200];
  gcomp_path_expand(pattern, comm->t->rank, path, sizeof path);
  char *slash = strrchr(path, '/'), *dot = strrchr(path, '.');
  const char *ext = "";
  if (dot && dot > path && (!slash || dot > slash + 1)) {
    ext = dot + 1;
    *dot = '\0';
  }
  snprintf(out, sizeof out, "%s.s%d%s%s", path, n, ext[0] ? "." : "", ext);
  return gcomp_settings_set(set, gcomp_param_name(id), out);
}

static int child_settings(const gcomp_comm *comm, int n, gcomp_settings *set) {
  GCOMP_CHECK(gcomp_settings_copy(set, &comm->set));
  set->inherit = comm->calib;
  int st = child_path(comm, set, GCOMP_P_STATS, n);
  if (st == GCOMP_OK) st = child_path(comm, set, GCOMP_P_TRACE, n);
  if (st < 0) gcomp_settings_free(set);
  return st;
}

/* ---- split and dup -------------------------------------------------------------------- */
/* Non-blocking calls issued before run first: the parent's transport has one user */
static void drain(gcomp_comm *comm) {
  pthread_mutex_lock(&comm->mu);
  while (comm->head) pthread_cond_wait(&comm->cv, &comm->mu);
  pthread_mutex_unlock(&comm->mu);
}

static int make_child(gcomp_comm *comm, members *m, gcomp_comm **out) {
  int n = ++comm->children;
  gcomp_settings set;
  GCOMP_CHECK(child_settings(comm, n, &set));
  m->seq = gcomp_call_take_seq(comm);
  gcomp_transport *t = NULL;
  int st = strcmp(comm->t->ops->name, "loopback") == 0 ? loopback_child(comm, m, &set, &t)
                                                       : ofi_child(comm, m, &set, &t);
  if (st == GCOMP_OK) st = gcomp_comm_create(t, 1, &set, out);
  if (st < 0 && t) gcomp_transport_destroy(t);
  gcomp_settings_free(&set);
  if (st == GCOMP_OK)
    GCOMP_INFO(GCOMP_SUB_INIT, "rank %d/%d: made communicator .s%d, rank %d of %d (%d node(s))",
               comm->t->rank, comm->t->size, n, m->me, m->n, (*out)->t->nnodes);
  return st;
}

gcomp_status gcomp_comm_split(gcomp_comm *comm, int color, int key, gcomp_comm **out) {
  GCOMP_FAIL_IF(!out, GCOMP_ERR_INVALID, "gcomp_comm_split: out is NULL");
  *out = NULL;
  GCOMP_FAIL_IF(!comm, GCOMP_ERR_INVALID, "gcomp_comm_split: comm is NULL");
  drain(comm);
  members m = {0};
  int st = exchange_colors(comm, color, key, &m);
  if (st == GCOMP_OK && m.ranks) st = make_child(comm, &m, out);
  else if (st == GCOMP_OK) comm->children++;   /* counted alike on every rank */
  free(m.ranks);
  return st < 0 ? gcomp_error_trace(st, __FILE__, __LINE__) : GCOMP_OK;
}

gcomp_status gcomp_comm_dup(gcomp_comm *comm, gcomp_comm **out) {
  GCOMP_FAIL_IF(!out, GCOMP_ERR_INVALID, "gcomp_comm_dup: out is NULL");
  *out = NULL;
  GCOMP_FAIL_IF(!comm, GCOMP_ERR_INVALID, "gcomp_comm_dup: comm is NULL");
  GCOMP_FAIL_IF(comm->broken, GCOMP_ERR_PEER,
                "gcomp_comm_dup: communicator unusable since an earlier allreduce failed: %s",
                comm->broken_why);
  drain(comm);
  members m = {.ranks = comm->world, .n = comm->t->size, .me = comm->t->rank};
  int st = make_child(comm, &m, out);
  return st < 0 ? gcomp_error_trace(st, __FILE__, __LINE__) : GCOMP_OK;
}

gcomp_status gcomp_config_share_calibration(gcomp_config *cfg, const gcomp_comm *comm) {
  GCOMP_FAIL_IF(!cfg || !comm, GCOMP_ERR_INVALID,
                "gcomp_config_share_calibration: NULL argument");
  gcomp_config_set_inherit(cfg, &comm->calib);
  return GCOMP_OK;
}
