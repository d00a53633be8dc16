/* The shim's communicators: one gcomp communicator per MPI communicator it serves.
 *
 * MPI_COMM_WORLD's is created at MPI_Init. Any other intra-communicator's is created at the
 * first call that would use it: every member makes that call (MPI requires matching calls),
 * so the creation is collective over the communicator itself: gcomp_comm_init_oob with an
 * allgather through PMPI_Allgather on it, then one PMPI_Allreduce in which the members agree
 * that every one of them started (or all hand the communicator to MPI). The entry hangs on the
 * MPI communicator as an attribute, so a handle MPI reuses after MPI_Comm_free never finds a
 * stale one, and MPI_Comm_free's attribute deletion destroys it. Dups do not inherit it
 * (MPI_COMM_NULL_COPY_FN): each gets its own, so calls on two communicators never interleave
 * in one gcomp communicator, whatever order threads or non-blocking calls put them in. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shim.h"

static struct {
  shim_comm world;            /* MPI_COMM_WORLD's */
  int keyval;                 /* the attribute that holds the others' */
  int world_rank;
  char node[128];
  const gcomp_config *config; /* the job's settings */
  pthread_mutex_t lock;       /* the live list, the reapers */
  shim_comm *live;            /* every entry with a gcomp communicator, but world's */
  int next_id;                /* the next communicator this process leads */
} sc_tab = {.world = {.lock = PTHREAD_MUTEX_INITIALIZER}, .keyval = MPI_KEYVAL_INVALID,
          .lock = PTHREAD_MUTEX_INITIALIZER, .next_id = 1};

int shim_world_rank(void) { return sc_tab.world_rank; }

uint64_t shim_comm_epoch;

static void epoch_next(void) { __atomic_fetch_add(&shim_comm_epoch, 1, __ATOMIC_RELEASE); }

static void live_add(shim_comm *sc) {
  pthread_mutex_lock(&sc_tab.lock);
  sc->prev = NULL, sc->next = sc_tab.live;
  if (sc_tab.live) sc_tab.live->prev = sc;
  sc_tab.live = sc;
  pthread_mutex_unlock(&sc_tab.lock);
}

static void live_remove(shim_comm *sc) {
  pthread_mutex_lock(&sc_tab.lock);
  if (sc->prev) sc->prev->next = sc->next;
  else if (sc_tab.live == sc) sc_tab.live = sc->next;
  if (sc->next) sc->next->prev = sc->prev;
  sc->prev = sc->next = NULL;
  pthread_mutex_unlock(&sc_tab.lock);
}

/* Destroys the gcomp communicator (collective over gcomp's transport: every member frees
 * the MPI communicator too, or finalizes); writes its GCOMP_STATS / GCOMP_TRACE. */
static void release(shim_comm *sc) {
  if (!sc->comm) return;
  live_remove(sc);
  shim_route_report(sc);
  if (gcomp_comm_destroy(sc->comm) < 0)
    SHIM_WARN("rank %d: destroying communicator %s: %s", sc_tab.world_rank, sc->name,
              gcomp_last_error());
  sc->comm = NULL;
}

static void entry_free(shim_comm *sc) {
  pthread_mutex_destroy(&sc->lock);
  free(sc);
}

/* Destroys and frees sc on a thread of its own. gcomp_comm_destroy waits until every member
 * destroys too, and members may free communicators in different orders (Open MPI's
 * MPI_Comm_free returns at once, and garbage-collected bindings free when they collect):
 * waiting in the caller could hold this rank in one destroy while a peer waits in another.
 * MPI_Finalize joins these threads. */
typedef struct reaper {
  pthread_t th;
  shim_comm *sc;
  struct reaper *next;
} reaper;
static reaper *reapers;   /* under sc_tab.lock */

static void *reap(void *arg) {
  reaper *r = arg;
  release(r->sc);
  entry_free(r->sc);
  return NULL;
}

static void release_later(shim_comm *sc) {
  live_remove(sc);   /* MPI_Finalize's sweep of the live ones must not meet it */
  reaper *r = calloc(1, sizeof *r);
  if (r) {
    r->sc = sc;
    pthread_mutex_lock(&sc_tab.lock);
    int ok = pthread_create(&r->th, NULL, reap, r) == 0;
    if (ok) r->next = reapers, reapers = r;
    pthread_mutex_unlock(&sc_tab.lock);
    if (ok) return;
    free(r);
  }
  release(sc);   /* no thread: here, then */
  entry_free(sc);
}

/* MPI_Comm_free (or MPI_Comm_disconnect, or MPI_Finalize) deletes the attribute. MPI lets a
 * communicator be freed with operations pending: then it goes when MPI frees its last
 * request (the completion call still needs to see that it was freed). */
static int delete_attr(MPI_Comm comm, int keyval, void *attr, void *extra) {
  (void)comm, (void)keyval, (void)extra;
  shim_comm *sc = attr;
  epoch_next();   /* before MPI can give comm's handle to another communicator */
  pthread_mutex_lock(&sc->lock);
  int later = sc->pending > 0;
  sc->freed = 1;
  pthread_mutex_unlock(&sc->lock);
  if (!later) release_later(sc);
  return MPI_SUCCESS;
}

void shim_comm_request_done(shim_comm *sc) {
  pthread_mutex_lock(&sc->lock);
  sc->pending--;
  int last = sc->freed && sc->pending == 0;
  pthread_mutex_unlock(&sc->lock);
  if (last) release_later(sc);
}

void shim_comms_start(gcomp_comm *world, int world_rank, const char *node,
                      const gcomp_config *config) {
  sc_tab.world_rank = world_rank;
  snprintf(sc_tab.node, sizeof sc_tab.node, "%s", node);
  sc_tab.config = config;
  shim_comm *w = &sc_tab.world;
  w->comm = world, w->off = FALL_OFF;
  snprintf(w->name, sizeof w->name, "world");
  w->rank = world ? gcomp_comm_rank(world) : world_rank;
  w->size = world ? gcomp_comm_size(world) : 0;
  if (world && PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, delete_attr, &sc_tab.keyval,
                                       NULL) != MPI_SUCCESS) {
    SHIM_WARN("rank %d: MPI_Comm_create_keyval failed: only MPI_COMM_WORLD is served",
              world_rank);
    sc_tab.keyval = MPI_KEYVAL_INVALID;
  }
  if (world) shim_count.comms++;
}

/* ---- creation --------------------------------------------------------------------------- */
static int oob_allgather(void *ctx, const void *mine, size_t len, void *all) {
  MPI_Comm comm = *(MPI_Comm *)ctx;
  if (len > INT_MAX) return 1;
  return PMPI_Allgather(mine, (int)len, MPI_BYTE, all, (int)len, MPI_BYTE, comm) != MPI_SUCCESS;
}

/* Every member is a process of MPI_COMM_WORLD (so it runs the shim, as mpirun started it
 * with the same environment): spawned or connected processes may not. */
static int all_in_world(MPI_Comm comm, int size) {
  MPI_Group g, w;
  int *in = malloc(2 * (size_t)size * sizeof *in), ok = in != NULL;
  if (!ok) return 0;
  for (int i = 0; i < size; i++) in[i] = i;
  PMPI_Comm_group(comm, &g);
  PMPI_Comm_group(MPI_COMM_WORLD, &w);
  ok = PMPI_Group_translate_ranks(g, size, in, w, in + size) == MPI_SUCCESS;
  for (int i = 0; ok && i < size; i++) ok = in[size + i] != MPI_UNDEFINED;
  PMPI_Group_free(&g);
  PMPI_Group_free(&w);
  free(in);
  return ok;
}

/* The job's GCOMP_STATS / GCOMP_TRACE path for communicator `name`: %r becomes this process's
 * world rank and ".<name>" goes before the extension ("stats-%r.json" -> "stats-3.c2.json"),
 * so that world's file keeps its name and the others' sit beside it. */
static void derived_path(const char *pattern, const char *name, char *out, size_t n) {
  char rank[16];
  snprintf(rank, sizeof rank, "%d", sc_tab.world_rank);
  size_t o = 0;
  for (const char *p = pattern; *p && o + 1 < n; p++) {
    if (p[0] == '%' && p[1] == 'r') {
      o += (size_t)snprintf(out + o, n - o, "%s", rank);
      p++;
    } else {
      out[o++] = *p;
    }
  }
  out[o < n ? o : n - 1] = '\0';
  char *slash = strrchr(out, '/'), *dot = strrchr(out, '.');
  char ext[64] = "";
  if (dot && (!slash || dot > slash) && dot != out && strlen(dot) < sizeof ext) {
    snprintf(ext, sizeof ext, "%s", dot);
    *dot = '\0';
  }
  size_t len = strlen(out);
  snprintf(out + len, n - len, ".%s%s", name, ext);
}

/* This communicator's settings: the job's, with its own stats and trace files, and the
 * world's calibration (its ranks are processes of the world, over the same links). */
static int comm_config(const char *name, gcomp_config **out) {
  int st = gcomp_config_create(out);
  if (st == GCOMP_OK) st = gcomp_config_share_calibration(*out, sc_tab.world.comm);
  static const char *const paths[] = {"GCOMP_STATS", "GCOMP_TRACE"};
  const char *names[] = {"GCOMP_TIMEOUT_MS", paths[0], paths[1]};
  for (size_t i = 0; st == GCOMP_OK && i < sizeof names / sizeof *names; i++) {
    const char *v = "";
    int set = 0;
    if (gcomp_config_get(sc_tab.config, names[i], &v, &set) < 0 || !set || !v[0]) continue;
    char path[1024];
    if (i > 0) derived_path(v, name, path, sizeof path);
    st = gcomp_config_set(*out, names[i], i > 0 ? path : v);
  }
  if (st < 0) gcomp_config_destroy(*out), *out = NULL;
  return st;
}

/* The members agree on the lowest rank that failed (size: none) and, with the same
 * allreduce, on the communicator's name: the next number of the member of rank 0 (each
 * process numbers the communicators it leads; two threads creating at once take two), with
 * its world rank when that is not 0: "c5", "c3-2". Unique in the job, the same on every
 * member. */
static int agree(MPI_Comm comm, int ok, int rank, int size, char *name, size_t n) {
  int lead = name && rank == 0;
  int v[3] = {ok ? -size : -rank, -1, -1};
  if (lead) {
    v[1] = __atomic_fetch_add(&sc_tab.next_id, 1, __ATOMIC_RELAXED);
    v[2] = sc_tab.world_rank;
  }
  if (PMPI_Allreduce(MPI_IN_PLACE, v, 3, MPI_INT, MPI_MAX, comm) != MPI_SUCCESS) return rank;
  if (name && v[2] == 0) snprintf(name, n, "c%d", v[1]);
  else if (name) snprintf(name, n, "c%d-%d", v[2], v[1]);
  return -v[0];
}

/* Collective over comm (an intra-communicator of size > 1 whose members are all in world). */
static void start(shim_comm *sc, MPI_Comm comm) {
  gcomp_config *cfg = NULL;
  char why[1024] = "";
  int st = GCOMP_OK;
  int first = agree(comm, 1, sc->rank, sc->size, sc->name, sizeof sc->name);
  if (first == sc->size) {
    st = comm_config(sc->name, &cfg);
    if (st == GCOMP_OK)
      st = gcomp_comm_init_oob(sc->rank, sc->size, sc_tab.node, oob_allgather, &comm, cfg,
                               &sc->comm);
    if (st < 0) snprintf(why, sizeof why, "%s", gcomp_last_error());
    gcomp_config_destroy(cfg);
    first = agree(comm, st == GCOMP_OK, sc->rank, sc->size, NULL, 0);
  }
  if (first < sc->size) {
    gcomp_comm_destroy(sc->comm);   /* the members that did start let go of theirs */
    sc->comm = NULL, sc->off = FALL_OFF;
    if (sc->rank == first)
      SHIM_WARN("rank %d: gcomp could not start on communicator %s (%d ranks): %s; its "
                "MPI_Allreduce calls go to MPI unchanged", sc_tab.world_rank, sc->name, sc->size,
                why);
    return;
  }
  live_add(sc);
  __atomic_fetch_add(&shim_count.comms, 1, __ATOMIC_RELAXED);
  if (sc->rank == 0)
    SHIM_INFO("rank %d: gcomp serves communicator %s (%d ranks, %d node(s))",
              sc_tab.world_rank, sc->name, sc->size, gcomp_comm_nnodes(sc->comm));
}

static shim_comm *create(MPI_Comm comm) {
  shim_comm *sc = calloc(1, sizeof *sc);
  if (!sc) return NULL;
  pthread_mutex_init(&sc->lock, NULL);
  int inter = 0;
  PMPI_Comm_test_inter(comm, &inter);
  PMPI_Comm_rank(comm, &sc->rank);
  PMPI_Comm_size(comm, &sc->size);
  /* all of these are the same on every member, so none needs a collective */
  if (inter) sc->off = FALL_INTER;
  else if (sc->size < 2) sc->off = FALL_SELF;
  else if (!all_in_world(comm, sc->size)) sc->off = FALL_FOREIGN;
  else if (!sc_tab.world.comm) sc->off = FALL_OFF;
  else start(sc, comm);
  if (PMPI_Comm_set_attr(comm, sc_tab.keyval, sc) != MPI_SUCCESS) {
    /* without the attribute the next call would create it again, collectively, while a
     * peer whose set_attr worked would not: no rank may serve it */
    SHIM_WARN("rank %d: MPI_Comm_set_attr failed", sc_tab.world_rank);
    release(sc);
    entry_free(sc);
    return NULL;
  }
  return sc;
}

/* A communicator that cannot be given an entry (no memory, no keyval): all of its calls
 * go to MPI, on every member alike only when the cause is alike; the shim says so. */
static shim_comm unservable = {.comm = NULL, .off = FALL_OFF, .lock = PTHREAD_MUTEX_INITIALIZER};

shim_comm *shim_comm_get(MPI_Comm comm) {
  if (comm == MPI_COMM_WORLD) return &sc_tab.world;
  if (sc_tab.keyval == MPI_KEYVAL_INVALID || comm == MPI_COMM_NULL) return &unservable;
  void *attr = NULL;
  int found = 0;
  if (PMPI_Comm_get_attr(comm, sc_tab.keyval, &attr, &found) != MPI_SUCCESS) return &unservable;
  if (found) return attr;
  shim_comm *sc = create(comm);
  return sc ? sc : &unservable;
}

/* ---- MPI_Finalize ------------------------------------------------------------------------ */
static void *release_thread(void *arg) {
  release(arg);
  return NULL;
}

/* Every member destroys each communicator, but not necessarily in the same order (threads
 * may have created them in any order), and each destroy waits for its peers: so they run
 * side by side, beside the reapers of freed ones, and the world's after those started. The
 * entries stay (MPI may still delete their attributes). Called after every request has
 * finished. */
void shim_comms_finalize(void) {
  enum { MAX_THREADS = 64 };
  pthread_t th[MAX_THREADS];
  int nth = 0;
  epoch_next();
  for (;;) {
    pthread_mutex_lock(&sc_tab.lock);
    shim_comm *sc = sc_tab.live;
    if (sc) {   /* off the list here, so the loop moves on while a thread destroys it */
      sc_tab.live = sc->next;
      if (sc->next) sc->next->prev = NULL;
      sc->prev = sc->next = NULL;
    }
    pthread_mutex_unlock(&sc_tab.lock);
    if (!sc) break;
    if (nth < MAX_THREADS && pthread_create(&th[nth], NULL, release_thread, sc) == 0) nth++;
    else release(sc);
  }
  /* the communicators MPI_Comm_free handed to reapers: running beside these */
  pthread_mutex_lock(&sc_tab.lock);
  reaper *r = reapers;
  reapers = NULL;
  pthread_mutex_unlock(&sc_tab.lock);
  while (r) {
    reaper *next = r->next;
    pthread_join(r->th, NULL);
    free(r);
    r = next;
  }
  shim_comm *w = &sc_tab.world;
  if (w->comm) shim_route_report(w);
  if (w->comm && gcomp_comm_destroy(w->comm) < 0)
    SHIM_WARN("rank %d: destroying the world's communicator: %s", sc_tab.world_rank,
              gcomp_last_error());
  w->comm = NULL;
  for (int i = 0; i < nth; i++) pthread_join(th[i], NULL);
}
