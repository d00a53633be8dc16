/* Internal to the MPI shim (the files of shim/, the only code in gcomp that includes mpi.h): the
 * per-communicator table, the requests of the non-blocking calls, logging and the counts reported
 * at MPI_Finalize. Of the library only gcomp.h is used, and gcomp_internal.h for the shared
 * error detail and log. */
#ifndef GCOMP_SHIM_H
#define GCOMP_SHIM_H

#include <mpi.h>
#include <pthread.h>
#include <stdint.h>

#include "gcomp_internal.h"

#define SHIM_API __attribute__((visibility("default")))
#define SHIM_LOG(level, ...)                                                              \
  do {                                                                                    \
    if (gcomp_log_enabled((level), "shim"))                                               \
      gcomp_log_message((level), "shim", __FILE__, __LINE__, __VA_ARGS__);                \
  } while (0)
#define SHIM_WARN(...) SHIM_LOG(GCOMP_LOG_WARN, __VA_ARGS__)
#define SHIM_INFO(...) SHIM_LOG(GCOMP_LOG_INFO, __VA_ARGS__)
#define SHIM_TRACE(...) SHIM_LOG(GCOMP_LOG_TRACE, __VA_ARGS__)

/* Why a call went to PMPI instead of gcomp; counted per reason (and per kind of call). */
enum {
  FALL_OFF,      /* gcomp is not running: it could not start (for the job, or on this
                    communicator) */
  FALL_INTER,    /* an inter-communicator */
  FALL_SELF,     /* a communicator of one rank: nothing to reduce, nothing to compress */
  FALL_FOREIGN,  /* ranks from outside MPI_COMM_WORLD (spawned or connected processes), which
                    may not run the shim */
  FALL_DTYPE,    /* a datatype with no gcomp equivalent (derived, unsigned, 16-bit, ...) */
  FALL_OP,       /* an op other than MPI_SUM/MIN/MAX/PROD (user ops included) */
  FALL_ARGS,     /* a negative count, recvbuf MPI_IN_PLACE, aliased buffers: MPI reports
                    the error (NULL buffers never reach MPI: counted as refused) */
  FALL_FASTER,   /* gcomp could serve it, and MPI was measured faster at its size (the
                    members agreed: shim_route.c) */
  FALL_TIMING,   /* one of the first calls of its size, timed through MPI to compare */
  FALL_ASKED,    /* GCOMP_SHIM_ROUTE=mpi */
  /* the reasons only the other collectives have (shim_coll.c): MPI_Allreduce's report line
   * lists the ones above */
  FALL_MISMATCH, /* MPI_Allgather's or MPI_Alltoall's send and receive types or counts
                    differ */
  FALL_UNEQUAL,  /* MPI_Reduce_scatter with unequal recvcounts */
  FALL_COUNT_
};

/* The collectives the shim serves, each blocking ([0]) and non-blocking ([1]) */
enum {
  SHIM_ALLREDUCE,
  SHIM_RSB,        /* MPI_Reduce_scatter_block */
  SHIM_RS,         /* MPI_Reduce_scatter (served when its counts are equal) */
  SHIM_ALLGATHER,
  SHIM_BCAST,
  SHIM_BARRIER,
  SHIM_ALLTOALL,
  SHIM_KINDS
};
extern const char *const shim_kind_names[SHIM_KINDS][2];

/* Where the calls of one collective and one size class (bytes in [2^k, 2^(k+1))) go on one
 * communicator: its first calls go to gcomp, then to MPI, timed; then the members
 * agree on the faster (shim_route.c). Only the threads making the communicator's blocking
 * calls touch it (MPI forbids two of them at once on one communicator). */
enum { SHIM_VIA_GCOMP, SHIM_VIA_MPI };
enum { SHIM_SAMPLES = 8 };   /* timed calls per route at most (shim_route.c's samples()) */
typedef struct {
  uint8_t decided;   /* 0 while timing; then 1 + the SHIM_VIA_ route */
  uint8_t calls;     /* timed calls so far (warm-ups included) */
  float t[2][SHIM_SAMPLES];   /* this rank's timed calls per route, in seconds, in order */
  uint32_t used;     /* blocking calls since the route was agreed */
  uint32_t recheck;  /* the trial runs again after this many (0: none agreed yet) */
} shim_class;
enum { SHIM_CLASSES = 64 };

/* One gcomp communicator per MPI communicator the shim serves, created at the first call
 * that would use it (collectively: every member makes that call) and destroyed at
 * MPI_Comm_free (or when the last of its requests completes after that) or MPI_Finalize. */
typedef struct shim_comm {
  gcomp_comm *comm;         /* NULL: every call on this communicator goes to MPI */
  int off;                  /* then why (a FALL_ reason) */
  char name[24];            /* agreed by the members ("c5", "c3-2"): names it in logs and in
                               its stats files */
  int rank, size;
  pthread_mutex_t lock;     /* one call into gcomp at a time on this communicator */
  int broken;               /* a gcomp call failed: every later one fails at once */
  int pending;              /* its non-blocking requests MPI has not freed (under lock) */
  int freed;                /* MPI_Comm_free came (set under lock; the entry stays while
                               requests are pending) */
  struct shim_comm *prev, *next;   /* the live ones, for MPI_Finalize */
  shim_class cls[SHIM_KINDS][SHIM_CLASSES];   /* the route per collective and size class
                                                 (GCOMP_SHIM_ROUTE=auto) */
} shim_comm;

/* Counts, per rank, reported at MPI_Finalize (GCOMP_DEBUG=info). */
typedef struct {
  uint64_t served[SHIM_KINDS][2];   /* [kind][0] blocking, [kind][1] non-blocking, through
                                       gcomp */
  uint64_t served_bytes;            /* MPI_Allreduce's and MPI_Iallreduce's */
  uint64_t fell[FALL_COUNT_][SHIM_KINDS][2];
  uint64_t refused;            /* NULL buffers: answered MPI_ERR_BUFFER by the shim */
  uint64_t comms;              /* gcomp communicators created */
} shim_counts;

extern shim_counts shim_count;
extern const char *const shim_fall_names[FALL_COUNT_];

/* One call gcomp serves: which collective, its arguments as gcomp takes them. */
typedef struct {
  int kind;               /* SHIM_ */
  shim_comm *sc;
  const void *src;
  void *dst;              /* bcast: the buffer */
  size_t count;           /* reduce_scatter: per rank; allgather: the sender's; alltoall:
                             per block */
  gcomp_dtype dt;
  gcomp_op op;
  int root;
  uint64_t key;
  /* after a successful call: move_bytes from dst to move_to (MPI_IN_PLACE reduce-scatter,
   * whose result MPI wants at the start of recvbuf, where gcomp leaves it at its block) */
  void *move_to;
  size_t move_bytes;
} shim_call;

/* The same call as the program made it, for PMPI when it goes to MPI (the fields its kind
 * has; count: MPI's, the receive count of reduce-scatter and allgather). */
typedef struct {
  const void *sendbuf;
  void *recvbuf;          /* bcast: the buffer */
  int count;
  MPI_Datatype type;      /* allgather, alltoall: the receive type */
  MPI_Op op;
  int root;
  const int *counts;      /* MPI_Reduce_scatter's recvcounts */
  int sendcount;          /* MPI_Allgather's and MPI_Alltoall's */
  MPI_Datatype sendtype;
  MPI_Comm comm;
} shim_mpi_args;

/* ---- mpi_shim.c ------------------------------------------------------------------------ */
int shim_map_dtype(MPI_Datatype dt, gcomp_dtype *out);
int shim_map_op(MPI_Op op, gcomp_op *out);
size_t shim_call_bytes(size_t count, gcomp_dtype dt);
uint64_t shim_tensor_key(const void *recvbuf, size_t count, gcomp_dtype dt);
/* MPI_ERR_BUFFER (reported, counted as refused) for a NULL buffer of a call with elements */
int shim_null_buffer(const char *call, const void *sendbuf, const void *recvbuf, int count,
                     MPI_Comm comm);
/* A call gcomp served (nb: its request was handed out) */
void shim_count_served(const shim_call *c, int nb);
/* A call of kind (nb: non-blocking) goes to MPI for reason why: counted and traced */
void shim_count_fell(int kind, int nb, int count, int why);
/* A call gcomp serves, blocking: MPI_SUCCESS, or the error raised through comm's handler */
int shim_serve(const shim_call *c, MPI_Comm comm);
/* The call through PMPI (request NULL: the blocking form) */
int shim_pmpi(int kind, const shim_mpi_args *a, MPI_Request *request);
/* Starts c in gcomp (req NULL: runs it to the end); the caller holds c->sc->lock and has
 * checked that sc is not broken. */
gcomp_status shim_call_start(const shim_call *c, gcomp_request **req);
/* A served call's result where MPI wants it (after it succeeded) */
void shim_call_finish(const shim_call *c);

/* ---- shim_comm.c ---------------------------------------------------------------------- */
/* At MPI_Init, once the world's communicator is up (world NULL: gcomp does not run, and no
 * other communicator is tried). node names this process's node for every communicator;
 * config holds the job's settings (the shim keeps it). */
void shim_comms_start(gcomp_comm *world, int world_rank, const char *node,
                      const gcomp_config *config);
/* The entry for comm, created collectively on the first call (never NULL). */
shim_comm *shim_comm_get(MPI_Comm comm);
/* At MPI_Finalize: every communicator still alive is destroyed. */
void shim_comms_finalize(void);
/* MPI freed a request of sc: one fewer pending; destroys sc when it was freed by
 * MPI_Comm_free meanwhile and this was its last. */
void shim_comm_request_done(shim_comm *sc);
int shim_world_rank(void);

/* Bumped whenever the shim lets go of an MPI communicator (MPI_Comm_free, MPI_Finalize):
 * MPI may hand its handle out again for another, so what was remembered of a handle
 * (mpi_shim.c's repeat of a call) holds only while this has not moved. */
extern uint64_t shim_comm_epoch;

/* ---- shim_route.c ---------------------------------------------------------------------- */
typedef enum { SHIM_ROUTE_AUTO, SHIM_ROUTE_GCOMP, SHIM_ROUTE_MPI } shim_route_mode;
extern shim_route_mode shim_route_now;   /* GCOMP_SHIM_ROUTE, set once at MPI_Init */
/* At MPI_Init: GCOMP_SHIM_ROUTE */
void shim_route_start(shim_route_mode mode);
/* The route of kind's calls of `bytes` on sc (their size class) */
shim_class *shim_route_class(shim_comm *sc, int kind, size_t bytes);
/* A call of class k that gcomp could serve, as shim_dispatch would route it, when that needs
 * no timing and no agreement: the FALL_ reason it goes to MPI for (counted towards the
 * class's next trial, as shim_dispatch counts it), or -1: not known here (gcomp's route, or
 * the class is or is about to be on trial), ask shim_dispatch. */
static inline int shim_route_to_mpi(shim_class *k, int blocking) {
  if (shim_route_now != SHIM_ROUTE_AUTO) return shim_route_now == SHIM_ROUTE_MPI ? FALL_ASKED : -1;
  if (k->decided != 1 + SHIM_VIA_MPI || (blocking && k->used >= k->recheck)) return -1;
  k->used += (uint32_t)blocking;
  return FALL_FASTER;
}
/* Before sc is destroyed (at MPI_Comm_free or MPI_Finalize): its member 0 logs, at info,
 * each collective's sizes and where they went when last agreed (the crossovers; a size whose
 * trial is running again is left out). */
void shim_route_report(const shim_comm *sc);
/* Every collective the shim intercepts ends here (request NULL: the blocking form). why < 0:
 * gcomp could serve c (its fields set, but for the key, set here); the size's route then
 * decides between gcomp and MPI, timing a blocking call while its size is on trial. why >= 0:
 * to MPI for that reason. Counts the call either way; returns the MPI error code. */
int shim_dispatch(shim_call *c, int why, const shim_mpi_args *a, MPI_Request *request);

/* ---- shim_req.c ----------------------------------------------------------------------- */
/* A non-blocking call served by gcomp's i-form: *request receives an MPI generalized request
 * that the shim's MPI_Wait/Test/... complete. Returns an MPI error code. */
int shim_istart(const shim_call *c, MPI_Comm comm, MPI_Request *request);
/* At MPI_Finalize: finishes every request gcomp still runs (a program that never waited). */
void shim_reqs_finalize(void);

#endif /* GCOMP_SHIM_H */
