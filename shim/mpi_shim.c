/* The drop-in MPI shim: LD_PRELOAD=libgcomp_mpi.so makes an unmodified MPI program's
 * MPI_Allreduce and MPI_Iallreduce (and its reduce-scatters, allgathers, broadcasts and
 * barriers: shim_coll.c) run through gcomp, where gcomp is the faster (MPI's own
 * allreduce is one more route, timed per size and agreed by the members: shim_route.c), on
 * every intra-communicator it can serve (MPI_COMM_WORLD, its dups and splits, communicators from MPI_Comm_create), each
 * over a gcomp communicator of its own bootstrapped through that MPI communicator
 * (addresses allgathered with PMPI_Allgather, shim_comm.c). MPI_Iallreduce hands back a
 * request that MPI's completion calls finish (shim_req.c).
 *
 * The interposer is conservative: anything it does not handle (inter-communicators, a
 * communicator of one rank, derived datatypes, user ops) goes unchanged to PMPI, and when
 * gcomp cannot start every call does, after one warning. Every decision that changes a
 * route is logged under the `shim` subsystem; the counts are reported at MPI_Finalize
 * (GCOMP_DEBUG=info).
 *
 * shim/ is the only code in gcomp that includes mpi.h. It exports only MPI_* symbols: the
 * library is linked in statically with hidden visibility, so the one .so is all a user
 * preloads, and a program that also links libgcomp.so sees no clash. Like any program built
 * on gcomp it reaches the library only through gcomp.h: it bootstraps with
 * gcomp_comm_init_oob over PMPI_Allgather, and its settings come in a gcomp_config. */
#include <limits.h>
#include <mpi.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "shim.h"

#define SHIM_TIMEOUT_MS (30 * 60 * 1000)   /* without GCOMP_TIMEOUT_MS: see preflight */

shim_counts shim_count;
const char *const shim_fall_names[FALL_COUNT_] = {
    "gcomp off", "inter-communicator", "one rank", "outside MPI_COMM_WORLD", "datatype", "op",
    "bad arguments", "MPI faster", "timing MPI", "GCOMP_SHIM_ROUTE=mpi",
    "send/receive mismatch", "unequal counts"};
const char *const shim_kind_names[SHIM_KINDS][2] = {
    {"MPI_Allreduce", "MPI_Iallreduce"},
    {"MPI_Reduce_scatter_block", "MPI_Ireduce_scatter_block"},
    {"MPI_Reduce_scatter", "MPI_Ireduce_scatter"},
    {"MPI_Allgather", "MPI_Iallgather"},
    {"MPI_Bcast", "MPI_Ibcast"},
    {"MPI_Barrier", "MPI_Ibarrier"},
    {"MPI_Alltoall", "MPI_Ialltoall"}};

static struct {
  MPI_Comm world;        /* the shim's own duplicate of MPI_COMM_WORLD (agreement at start) */
  int rank, size;
  int thread_multiple;   /* MPI_THREAD_MULTIPLE was granted */
  /* GCOMP_DEBUG=trace for the shim, read once the log is open (gcomp's one-time start-up,
   * at the shim's first setting): a call routed to MPI then skips gcomp_log_enabled's
   * subsystem look-up by name, which was 224 of the shim's 535 instructions on such a call
   * (callgrind, MPI_Bcast of 8 B) */
  int trace;
} shim = {.world = MPI_COMM_NULL};

/* ---- bootstrap -------------------------------------------------------------------------- */

/* The settings this rank's communicator is created with */
static gcomp_config *shim_config;

/* A setting's text ("" for a name gcomp does not know, which no caller here passes) */
static const char *setting(const char *name) {
  const char *v = "";
  if (gcomp_config_get(shim_config, name, &v, NULL) < 0) v = "";
  return v;
}

static int setting_is_set(const char *name) {
  const char *v;
  int set = 0;
  return gcomp_config_get(shim_config, name, &v, &set) == GCOMP_OK && set;
}

/* gcomp_comm_init_oob's allgather: ctx is the shim's MPI_Comm */
static int oob_allgather(void *ctx, const void *mine, size_t len, void *all) {
  MPI_Comm world = *(MPI_Comm *)ctx;
  if (len > INT_MAX) {
    SHIM_WARN("rank %d: a %zu-byte bootstrap record is more than MPI_Allgather takes",
             shim.rank, len);
    return 1;
  }
  int rc = PMPI_Allgather(mine, (int)len, MPI_BYTE, all, (int)len, MPI_BYTE, world);
  if (rc != MPI_SUCCESS) {
    char msg[MPI_MAX_ERROR_STRING] = "";
    int n = 0;
    PMPI_Error_string(rc, msg, &n);
    SHIM_WARN("rank %d: MPI_Allgather of the bootstrap records failed: %s", shim.rank, msg);
    return 1;
  }
  return 0;
}

/* Node identity: GCOMP_NODE_ID when set (emulated nodes), else the ranks MPI says share
 * memory with this one, named by the lowest world rank among them (the same string on every
 * rank of the node, distinct across nodes, whatever the host names say). */
static void node_identity(char *out, size_t n) {
  if (setting_is_set("GCOMP_NODE_ID") && setting("GCOMP_NODE_ID")[0]) {
    snprintf(out, n, "%s", setting("GCOMP_NODE_ID"));
    return;
  }
  MPI_Comm node;
  int lowest = -1;
  if (PMPI_Comm_split_type(shim.world, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) ==
      MPI_SUCCESS) {
    if (PMPI_Allreduce(&shim.rank, &lowest, 1, MPI_INT, MPI_MIN, node) != MPI_SUCCESS) lowest = -1;
    PMPI_Comm_free(&node);
  }
  if (lowest >= 0) {
    snprintf(out, n, "mpi-node-%d", lowest);
  } else {
    memset(out, 0, n);
    gethostname(out, n - 1);
  }
}

/* Everything that can fail identically on every rank is checked here, before any collective
 * of gcomp's own, so the ranks agree to start or not without waiting on each other. MPI
 * waits for a late rank as long as it takes (a checkpoint, an evaluation on rank 0): unless
 * the user set GCOMP_TIMEOUT_MS, the shim waits as long as a training job's watchdog would
 * (PyTorch's NCCL default is of this order), not gcomp's 30 s: a dead rank on this node is
 * still named at once (by pid), and a dead process ends an mpirun job anyway. */
static int preflight(void) {
  int st = gcomp_config_create(&shim_config);
  if (st == GCOMP_OK && !setting_is_set("GCOMP_TIMEOUT_MS")) {
    char v[32];
    snprintf(v, sizeof v, "%d", SHIM_TIMEOUT_MS);
    st = gcomp_config_set(shim_config, "GCOMP_TIMEOUT_MS", v);
  }
  const char *const specs[] = {"GCOMP_CODEC", "GCOMP_INTRA_CODEC"};
  for (size_t i = 0; st == GCOMP_OK && i < sizeof specs / sizeof *specs; i++) {
    gcomp_codec *c = NULL;
    st = gcomp_codec_create(setting(specs[i]), &c);
    gcomp_codec_destroy(c);
    if (st < 0) {
      char detail[1024];
      snprintf(detail, sizeof detail, "%s", gcomp_last_error());
      return gcomp_error_set(st, __FILE__, __LINE__, "%s: %s", specs[i], detail);
    }
  }
  return st;
}

/* All ranks learn the lowest rank whose `ok` is false (size when none). */
static int first_failure(int ok) {
  int mine = ok ? shim.size : shim.rank, first = 0;
  if (PMPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, shim.world) != MPI_SUCCESS) return 0;
  return first;
}

/* GCOMP_SHIM_STRICT. A malformed GCOMP_* value resets every parameter to its default, so the
 * text is read (gcomp_config_get with no config gives it as set): strict mode must hold
 * exactly when some other value is bad. */
static int strict_mode(void) {
  const char *t = "";
  if (gcomp_config_get(NULL, "GCOMP_SHIM_STRICT", &t, NULL) < 0) return 0;
  return !strcasecmp(t, "1") || !strcasecmp(t, "true") || !strcasecmp(t, "yes") ||
         !strcasecmp(t, "on");
}

/* One warning for the job (from the lowest failing rank): what happened and what now. */
static void give_up(int first, const char *why) {
  int strict = strict_mode();
  if (shim.rank == first && strict)
    SHIM_WARN("rank %d: gcomp could not start: %s; GCOMP_SHIM_STRICT=1: "
              "aborting the job", first, why);
  else if (shim.rank == first)
    SHIM_WARN("rank %d: gcomp could not start: %s; every collective goes "
              "to MPI unchanged (GCOMP_SHIM_STRICT=1 aborts instead)", first, why);
  if (strict) PMPI_Abort(MPI_COMM_WORLD, 1);
}

/* GCOMP_SHIM_ROUTE, process-wide (read as strict_mode reads its own) */
static shim_route_mode route_mode(void) {
  const char *t = "";
  if (gcomp_config_get(NULL, "GCOMP_SHIM_ROUTE", &t, NULL) < 0) return SHIM_ROUTE_AUTO;
  return !strcasecmp(t, "gcomp") ? SHIM_ROUTE_GCOMP
         : !strcasecmp(t, "mpi") ? SHIM_ROUTE_MPI : SHIM_ROUTE_AUTO;
}

static void shim_start(int provided) {
  shim.thread_multiple = provided == MPI_THREAD_MULTIPLE;
  shim_route_start(route_mode());
  if (PMPI_Comm_dup(MPI_COMM_WORLD, &shim.world) != MPI_SUCCESS) {
    shim.world = MPI_COMM_NULL;
    SHIM_WARN("MPI_Comm_dup(MPI_COMM_WORLD) failed; every collective goes to "
              "MPI unchanged");
    return;
  }
  PMPI_Comm_rank(shim.world, &shim.rank);
  PMPI_Comm_size(shim.world, &shim.size);
  char why[1024] = "";

  int st = preflight();
  shim.trace = gcomp_log_enabled(GCOMP_LOG_TRACE, "shim");
  if (st < 0) snprintf(why, sizeof why, "%s", gcomp_last_error());
  int first = first_failure(st == GCOMP_OK);
  char node[128] = "";
  if (first < shim.size) {
    give_up(first, shim.rank == first ? why : "");
    shim_comms_start(NULL, shim.rank, node, shim_config);
    return;
  }

  node_identity(node, sizeof node);
  gcomp_comm *comm = NULL;
  st = gcomp_comm_init_oob(shim.rank, shim.size, node, oob_allgather, &shim.world, shim_config,
                           &comm);
  if (st < 0) snprintf(why, sizeof why, "%s", gcomp_last_error());
  first = first_failure(st == GCOMP_OK);
  if (first < shim.size) {
    gcomp_comm_destroy(comm);   /* the ranks that did start let go of theirs */
    give_up(first, shim.rank == first ? why : "");
    shim_comms_start(NULL, shim.rank, node, shim_config);
    return;
  }
  shim_comms_start(comm, shim.rank, node, shim_config);
  /* a codec asked for that cannot apply is worth saying once: on one node only the
   * intra-node codec runs */
  if (shim.rank == 0 && gcomp_comm_nnodes(comm) == 1 &&
      strcmp(setting("GCOMP_CODEC"), "none") != 0 &&
      strcmp(setting("GCOMP_INTRA_CODEC"), "none") == 0)
    SHIM_WARN("GCOMP_CODEC=%s applies between nodes and this job runs on one: "
              "it compresses nothing here (GCOMP_INTRA_CODEC is the codec inside a node)",
              setting("GCOMP_CODEC"));
  /* once for the job: the members' settings are the same (mpirun passes one environment) */
  if (shim.rank == 0)
    SHIM_INFO("active on %d ranks: gcomp serves MPI_Allreduce, MPI_Reduce_scatter_block, "
              "MPI_Reduce_scatter (equal counts), MPI_Allgather, MPI_Bcast, MPI_Barrier, "
              "MPI_Alltoall and "
              "their non-blocking forms on MPI_COMM_WORLD and the communicators made from it "
              "(%d node(s), codec %s, intra-node codec %s, a late rank is waited for %s ms)%s; "
              "route %s", shim.size, gcomp_comm_nnodes(comm), setting("GCOMP_CODEC"),
              setting("GCOMP_INTRA_CODEC"), setting("GCOMP_TIMEOUT_MS"),
              shim.thread_multiple ? ", MPI_THREAD_MULTIPLE" : "",
              route_mode() == SHIM_ROUTE_AUTO
                  ? "auto: each of these collectives goes to MPI's own below its crossover, "
                    "measured per communicator and size class (bytes in [2^k, 2^(k+1))) at "
                    "the first calls of that size (each agreed route is logged, and the "
                    "crossovers at MPI_Finalize)"
              : route_mode() == SHIM_ROUTE_MPI ? "mpi: every call to MPI's own"
                                               : "gcomp: every call gcomp can serve to gcomp");
  SHIM_TRACE("rank %d of %d: node '%s'", shim.rank, shim.size, node);
}

SHIM_API int MPI_Init(int *argc, char ***argv) {
  int rc = PMPI_Init(argc, argv);
  if (rc == MPI_SUCCESS) {
    int provided = MPI_THREAD_SINGLE;
    PMPI_Query_thread(&provided);
    shim_start(provided);
  }
  return rc;
}

SHIM_API int MPI_Init_thread(int *argc, char ***argv, int required, int *provided) {
  int rc = PMPI_Init_thread(argc, argv, required, provided);
  if (rc == MPI_SUCCESS) shim_start(*provided);
  return rc;
}

static unsigned long long sum_fell(int kind, int nb) {
  unsigned long long n = 0;
  for (int i = 0; i < FALL_COUNT_; i++) n += shim_count.fell[i][kind][nb];
  return n;
}

/* The other collectives' line, for those the program called: served, and the reasons of
 * those to MPI that occurred */
static void report_kind(int kind) {
  const uint64_t *s = shim_count.served[kind];
  unsigned long long tb = sum_fell(kind, 0), tn = sum_fell(kind, 1);
  if (!s[0] && !s[1] && !tb && !tn) return;
  char why[512] = "";
  size_t o = 0;
  for (int i = 0; i < FALL_COUNT_ && o < sizeof why; i++) {
    const uint64_t *f = shim_count.fell[i][kind];
    if (f[0] || f[1])
      o += (size_t)snprintf(why + o, sizeof why - o, "%s%s %llu/%llu", o ? ", " : "",
                            shim_fall_names[i], (unsigned long long)f[0],
                            (unsigned long long)f[1]);
  }
  SHIM_INFO("rank %d: gcomp served %llu %s and %llu %s; to MPI: %llu and %llu (%s)",
            shim.rank, (unsigned long long)s[0], shim_kind_names[kind][0],
            (unsigned long long)s[1], shim_kind_names[kind][1], tb, tn, o ? why : "none");
}

/* The counts, one line per rank: what gcomp served, and why the rest went to MPI (each
 * reason as blocking/non-blocking calls). */
static void report(void) {
  if (!gcomp_log_enabled(GCOMP_LOG_INFO, "shim")) return;
  char why[512] = "";
  size_t o = 0;
  /* the reasons an allreduce can have (the line's form is stable for scripts) */
  for (int i = 0; i <= FALL_ASKED && o < sizeof why; i++)
    o += (size_t)snprintf(why + o, sizeof why - o, "%s%s %llu/%llu", i ? ", " : "",
                          shim_fall_names[i], (unsigned long long)shim_count.fell[i][0][0],
                          (unsigned long long)shim_count.fell[i][0][1]);
  SHIM_INFO("rank %d: gcomp served %llu MPI_Allreduce and %llu MPI_Iallreduce (%llu bytes) on "
            "%llu communicator(s); to MPI: %llu MPI_Allreduce and %llu MPI_Iallreduce (%s); "
            "refused (NULL buffers): %llu", shim.rank, (unsigned long long)shim_count.served[0][0],
            (unsigned long long)shim_count.served[0][1],
            (unsigned long long)shim_count.served_bytes, (unsigned long long)shim_count.comms,
            sum_fell(SHIM_ALLREDUCE, 0), sum_fell(SHIM_ALLREDUCE, 1), why,
            (unsigned long long)shim_count.refused);
  for (int k = SHIM_ALLREDUCE + 1; k < SHIM_KINDS; k++) report_kind(k);
}

SHIM_API int MPI_Finalize(void) {
  if (shim.world != MPI_COMM_NULL) {
    report();
    /* collective over gcomp's transports; each writes its GCOMP_STATS and GCOMP_TRACE */
    shim_reqs_finalize();
    shim_comms_finalize();
    gcomp_config_destroy(shim_config);
    shim_config = NULL;
    PMPI_Comm_free(&shim.world);
  }
  return PMPI_Finalize();
}

/* ---- MPI_Allreduce ---------------------------------------------------------------------- */

int shim_map_dtype(MPI_Datatype dt, gcomp_dtype *out) {
  int size = 0;
  if (dt == MPI_FLOAT) *out = GCOMP_FLOAT32;
  else if (dt == MPI_DOUBLE) *out = GCOMP_FLOAT64;
  else if (dt == MPI_INT || dt == MPI_INT32_T) *out = GCOMP_INT32;
  else if (dt == MPI_LONG || dt == MPI_LONG_LONG || dt == MPI_INT64_T) *out = GCOMP_INT64;
  else return 0;
  /* MPI_INT and MPI_LONG are only what their C types are on this ABI */
  PMPI_Type_size(dt, &size);
  return size == (*out == GCOMP_INT32 || *out == GCOMP_FLOAT32 ? 4 : 8);
}

int shim_map_op(MPI_Op op, gcomp_op *out) {
  if (op == MPI_SUM) *out = GCOMP_SUM;
  else if (op == MPI_MIN) *out = GCOMP_MIN;
  else if (op == MPI_MAX) *out = GCOMP_MAX;
  else if (op == MPI_PROD) *out = GCOMP_PROD;
  else return 0;
  return 1;
}

/* The error-feedback key. A training loop hands the same gradient buffer (address, length,
 * type) to MPI_Allreduce every step, so that triple names the tensor across steps; codecs
 * with +ef then find the same residual for the same gradient each time. recvbuf, not
 * sendbuf: in-place calls (the usual case for gradients) have only recvbuf, and an
 * out-of-place caller's send copy may be a fresh temporary each step. Keys are local: ranks
 * may use different addresses. */
uint64_t shim_tensor_key(const void *recvbuf, size_t count, gcomp_dtype dt) {
  uint64_t h = (uint64_t)(uintptr_t)recvbuf;
  h ^= ((uint64_t)count << 8) ^ (uint64_t)dt;
  h ^= h >> 33;   /* a 64-bit finaliser: keys spread over the codec's table */
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ull;
  h ^= h >> 33;
  return h;
}

/* The route of a call, the same on every rank (MPI requires matching comm, type and op):
 * -1 to serve it (*sc, *dt, *op set), or why it goes to MPI. The communicator comes last, so
 * that a gcomp communicator is created only at a call that would use it. */
static int route(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype,
                 MPI_Op op, MPI_Comm comm, gcomp_dtype *dt, gcomp_op *gop, shim_comm **sc) {
  /* errors MPI reports and gcomp would not see (MPI_IN_PLACE as recvbuf is the address 1;
   * aliased buffers without MPI_IN_PLACE are erroneous in MPI) */
  if (count < 0 || recvbuf == MPI_IN_PLACE || (count > 0 && sendbuf == recvbuf)) return FALL_ARGS;
  if (!shim_map_dtype(datatype, dt)) return FALL_DTYPE;
  if (!shim_map_op(op, gop)) return FALL_OP;
  *sc = shim_comm_get(comm);   /* collective on the communicator's first such call */
  return (*sc)->comm ? -1 : (*sc)->off;
}

/* Open MPI 4.1 does not check for NULL buffers and crashes; gcomp would refuse them. Report
 * it as MPI would report a bad buffer, and touch neither (gcomp stays usable). */
int shim_null_buffer(const char *call, const void *sendbuf, const void *recvbuf, int count,
                     MPI_Comm comm) {
  if (count <= 0 || (sendbuf && recvbuf)) return MPI_SUCCESS;
  __atomic_fetch_add(&shim_count.refused, 1, __ATOMIC_RELAXED);
  SHIM_WARN("rank %d: %s of %d elements with a NULL %s buffer", shim.rank, call, count,
            recvbuf ? "send" : "receive");
  PMPI_Comm_call_errhandler(comm, MPI_ERR_BUFFER);
  return MPI_ERR_BUFFER;
}

size_t shim_call_bytes(size_t count, gcomp_dtype dt) {
  return count * (dt == GCOMP_FLOAT32 || dt == GCOMP_INT32 ? 4 : 8);
}
#define call_bytes(count, dt) shim_call_bytes((size_t)(count), (dt))

void shim_count_served(const shim_call *c, int nonblocking) {
  __atomic_fetch_add(&shim_count.served[c->kind][nonblocking], 1, __ATOMIC_RELAXED);
  if (c->kind == SHIM_ALLREDUCE)
    __atomic_fetch_add(&shim_count.served_bytes, (uint64_t)call_bytes(c->count, c->dt),
                       __ATOMIC_RELAXED);
}

void shim_count_fell(int kind, int nb, int count, int why) {
  if (shim.trace)
    SHIM_TRACE("%s of %d elements to MPI: %s", shim_kind_names[kind][nb], count,
               shim_fall_names[why]);
  __atomic_fetch_add(&shim_count.fell[why][kind][nb], 1, __ATOMIC_RELAXED);
}

/* The last MPI_Allreduce (or MPI_Iallreduce) of this thread that gcomp could serve: its
 * communicator, type, op and count, and what route() made of them. Programs repeat their
 * calls (a benchmark's loop, a training step's buckets), and a repeat then costs a compare
 * of these words instead of route()'s type and op mapping (PMPI_Type_size) and
 * communicator look-up (PMPI_Comm_get_attr); when its size goes to MPI, it goes to
 * PMPI_Allreduce from here, with nothing of shim_dispatch's. Per thread: MPI_THREAD_MULTIPLE
 * programs call on several communicators at once. epoch: shim_comm_epoch when recorded. */
typedef struct {
  MPI_Comm comm;
  MPI_Datatype type;
  MPI_Op op;
  int count;   /* > 0 once recorded */
  gcomp_dtype dt;
  gcomp_op gop;
  uint64_t epoch;
  shim_comm *sc;
  shim_class *k;
} shim_repeat;
/* initial-exec: the shim is preloaded, so its TLS sits in the static block and a look-up is
 * one load off the thread pointer (no __tls_get_addr call) */
static __thread shim_repeat last_allreduce __attribute__((tls_model("initial-exec")));

/* A repeat of m's call, with what route() checks of the buffers (count > 0: neither may be
 * NULL) */
static inline int repeats(const shim_repeat *m, uint64_t epoch, const void *sendbuf,
                          const void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                          MPI_Comm comm) {
  return count == m->count && comm == m->comm && datatype == m->type && op == m->op &&
         epoch == m->epoch && sendbuf && recvbuf && recvbuf != MPI_IN_PLACE &&
         sendbuf != recvbuf;
}

/* MPI_Allreduce and MPI_Iallreduce (request non-NULL); out of line, so that MPI_Allreduce's
 * repeat to MPI needs no stack frame and ends in a tail call */
__attribute__((noinline)) static int allreduce(const void *sendbuf, void *recvbuf, int count,
                                               MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                                               MPI_Request *request) {
  shim_repeat *m = &last_allreduce;
  uint64_t epoch = __atomic_load_n(&shim_comm_epoch, __ATOMIC_ACQUIRE);
  int repeat = repeats(m, epoch, sendbuf, recvbuf, count, datatype, op, comm);
  if (repeat) {
    int why = shim_route_to_mpi(m->k, request == NULL);
    if (why >= 0) {
      shim_count_fell(SHIM_ALLREDUCE, request != NULL, count, why);
      return request ? PMPI_Iallreduce(sendbuf, recvbuf, count, datatype, op, comm, request)
                     : PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm);
    }
  } else {
    int rc = shim_null_buffer(shim_kind_names[SHIM_ALLREDUCE][request != NULL], sendbuf,
                              recvbuf, count, comm);
    if (rc != MPI_SUCCESS) return rc;
  }
  shim_mpi_args a = {.sendbuf = sendbuf, .recvbuf = recvbuf, .count = count,
                     .type = datatype, .op = op, .comm = comm};
  shim_call c = {.kind = SHIM_ALLREDUCE, .dst = recvbuf, .count = (size_t)count,
                 .src = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf};
  int why = -1;
  if (repeat) c.dt = m->dt, c.op = m->gop, c.sc = m->sc;
  else why = route(sendbuf, recvbuf, count, datatype, op, comm, &c.dt, &c.op, &c.sc);
  if (!repeat && why < 0 && count > 0)
    *m = (shim_repeat){.comm = comm, .type = datatype, .op = op, .count = count, .dt = c.dt,
                       .gop = c.op, .epoch = epoch, .sc = c.sc,
                       .k = shim_route_class(c.sc, SHIM_ALLREDUCE, call_bytes(count, c.dt))};
  return shim_dispatch(&c, why, &a, request);
}

/* A repeat whose size goes to MPI is a compare of the remembered call and a tail call of
 * PMPI_Allreduce: about 30 instructions of the shim's (callgrind: ~280 before, most in
 * route()'s look-ups), against the ~1,000 of Open MPI's own 8 B allreduce at 2 ranks. */
SHIM_API int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype,
                           MPI_Op op, MPI_Comm comm) {
  shim_repeat *m = &last_allreduce;
  if (repeats(m, __atomic_load_n(&shim_comm_epoch, __ATOMIC_ACQUIRE), sendbuf, recvbuf, count,
              datatype, op, comm) &&
      !shim.trace) {
    int why = shim_route_to_mpi(m->k, 1);
    if (why >= 0) {
      __atomic_fetch_add(&shim_count.fell[why][SHIM_ALLREDUCE][0], 1, __ATOMIC_RELAXED);
      return PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm);
    }
  }
  return allreduce(sendbuf, recvbuf, count, datatype, op, comm, NULL);
}

int shim_pmpi(int kind, const shim_mpi_args *a, MPI_Request *r) {
  switch (kind) {
  case SHIM_ALLREDUCE:
    return r ? PMPI_Iallreduce(a->sendbuf, a->recvbuf, a->count, a->type, a->op, a->comm, r)
             : PMPI_Allreduce(a->sendbuf, a->recvbuf, a->count, a->type, a->op, a->comm);
  case SHIM_RSB:
    return r ? PMPI_Ireduce_scatter_block(a->sendbuf, a->recvbuf, a->count, a->type, a->op,
                                          a->comm, r)
             : PMPI_Reduce_scatter_block(a->sendbuf, a->recvbuf, a->count, a->type, a->op,
                                         a->comm);
  case SHIM_RS:
    return r ? PMPI_Ireduce_scatter(a->sendbuf, a->recvbuf, a->counts, a->type, a->op, a->comm,
                                    r)
             : PMPI_Reduce_scatter(a->sendbuf, a->recvbuf, a->counts, a->type, a->op, a->comm);
  case SHIM_ALLGATHER:
    return r ? PMPI_Iallgather(a->sendbuf, a->sendcount, a->sendtype, a->recvbuf, a->count,
                               a->type, a->comm, r)
             : PMPI_Allgather(a->sendbuf, a->sendcount, a->sendtype, a->recvbuf, a->count,
                              a->type, a->comm);
  case SHIM_ALLTOALL:
    return r ? PMPI_Ialltoall(a->sendbuf, a->sendcount, a->sendtype, a->recvbuf, a->count,
                              a->type, a->comm, r)
             : PMPI_Alltoall(a->sendbuf, a->sendcount, a->sendtype, a->recvbuf, a->count,
                             a->type, a->comm);
  case SHIM_BCAST:
    return r ? PMPI_Ibcast(a->recvbuf, a->count, a->type, a->root, a->comm, r)
             : PMPI_Bcast(a->recvbuf, a->count, a->type, a->root, a->comm);
  default:
    return r ? PMPI_Ibarrier(a->comm, r) : PMPI_Barrier(a->comm);
  }
}

gcomp_status shim_call_start(const shim_call *c, gcomp_request **req) {
  gcomp_comm *g = c->sc->comm;
  switch (c->kind) {
  case SHIM_ALLREDUCE:
    return req ? gcomp_iallreduce(g, c->src, c->dst, c->count, c->dt, c->op, NULL, c->key, req)
               : gcomp_allreduce(g, c->src, c->dst, c->count, c->dt, c->op, NULL, c->key);
  case SHIM_RSB:
  case SHIM_RS:
    return req ? gcomp_ireduce_scatter(g, c->src, c->dst, c->count, c->dt, c->op, NULL, c->key,
                                       req)
               : gcomp_reduce_scatter(g, c->src, c->dst, c->count, c->dt, c->op, NULL, c->key);
  case SHIM_ALLGATHER:
    return req ? gcomp_iallgather(g, c->src, c->dst, c->count, c->dt, NULL, c->key, req)
               : gcomp_allgather(g, c->src, c->dst, c->count, c->dt, NULL, c->key);
  case SHIM_ALLTOALL:
    return req ? gcomp_ialltoall(g, c->src, c->dst, c->count, c->dt, req)
               : gcomp_alltoall(g, c->src, c->dst, c->count, c->dt);
  case SHIM_BCAST:
    return req ? gcomp_ibroadcast(g, c->dst, c->count, c->dt, c->root, req)
               : gcomp_broadcast(g, c->dst, c->count, c->dt, c->root);
  default:
    return req ? gcomp_ibarrier(g, req) : gcomp_barrier(g);
  }
}

void shim_call_finish(const shim_call *c) {
  if (c->move_bytes) memmove(c->move_to, c->dst, c->move_bytes);
}

/* A call gcomp serves, blocking */
int shim_serve(const shim_call *c, MPI_Comm comm) {
  shim_comm *sc = c->sc;
  pthread_mutex_lock(&sc->lock);
  int st;
  if (sc->broken) {
    st = gcomp_error_set(GCOMP_ERR_PEER, __FILE__, __LINE__, "shim: an earlier gcomp call on "
                         "this communicator failed; it is unusable");
  } else {
    st = shim_call_start(c, NULL);
    sc->broken = st < 0;
  }
  pthread_mutex_unlock(&sc->lock);
  if (st == GCOMP_OK) {
    shim_call_finish(c);
    shim_count_served(c, 0);
    return MPI_SUCCESS;
  }
  /* never silent garbage: say why, then let the communicator's error handler decide
   * (MPI_ERRORS_ARE_FATAL aborts the job, MPI_ERRORS_RETURN hands back the code) */
  SHIM_WARN("rank %d: %s of %zu elements failed in gcomp: %s: %s", shim.rank,
            shim_kind_names[c->kind][0], c->count, gcomp_strerror(st), gcomp_last_error());
  PMPI_Comm_call_errhandler(comm, MPI_ERR_OTHER);
  return MPI_ERR_OTHER;
}

/* The same routes as MPI_Allreduce; served ones through gcomp_iallreduce (shim_req.c). Its
 * first call on a communicator creates the gcomp communicator, which waits for every member
 * to make that call: MPI promises a non-blocking call returns regardless of the other ranks,
 * so a program that needs a rank's MPI_Iallreduce to return before a peer makes its own
 * (sending to the peer only after it, say) waits here; it is the one place the shim does
 * not keep that promise (the other non-blocking collectives' first calls likewise). */
SHIM_API int MPI_Iallreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype,
                            MPI_Op op, MPI_Comm comm, MPI_Request *request) {
  return allreduce(sendbuf, recvbuf, count, datatype, op, comm, request);
}
