/* The collectives beyond allreduce: MPI_Reduce_scatter_block, MPI_Reduce_scatter (equal
 * counts), MPI_Allgather, MPI_Bcast, MPI_Barrier, MPI_Alltoall and their non-blocking forms,
 * through gcomp_reduce_scatter, gcomp_allgather, gcomp_broadcast, gcomp_barrier,
 * gcomp_alltoall and their twins.
 *
 * They take MPI_Allreduce's machinery as it is: the same communicators (shim_comm_get), the
 * same types and ops (shim_map_dtype/op; broadcast, allgather and alltoall also move
 * byte-like types, copy_dtype), the same NULL-buffer refusal, the same reasons
 * counted for what goes to PMPI, the same blocking call (shim_serve) and request wrapping
 * (shim_istart). What differs is only how MPI's arguments become gcomp's:
 *  - MPI_IN_PLACE reduce-scatter: MPI wants the input in recvbuf (size x recvcount) and the
 *    result in its first recvcount elements; gcomp's in-place rule (NCCL's) leaves rank r's
 *    result at its own block, recvbuf + r x recvcount. So gcomp runs in place by its rule
 *    and the block is moved to the front after the call (at completion for the i-form).
 *  - MPI_IN_PLACE allgather: the rank's block already sits at recvbuf + rank x recvcount,
 *    which is gcomp's in-place rule as it is.
 *  - MPI_Reduce_scatter with unequal recvcounts goes to MPI (reason "unequal counts"):
 *    gcomp's reduce-scatter has one count; with equal ones it is a Reduce_scatter_block.
 *  - MPI_Allgather or MPI_Alltoall with send and receive types or counts that differ (legal
 *    in MPI when the signatures match) goes to MPI (reason "send/receive mismatch").
 *  - MPI_IN_PLACE alltoall: the input is recvbuf, which gcomp_alltoall takes as sendbuf ==
 *    recvbuf (it copies the input first).
 *
 * Codecs as gcomp's defaults give them, no codec passed: reduce-scatter compresses only when
 * GCOMP_CODEC/GCOMP_INTRA_CODEC ask for it (as MPI_Allreduce), allgather only when
 * GCOMP_ALLGATHER_CODEC does; broadcast, barrier and alltoall are exact.
 *
 * Route: as MPI_Allreduce's, per collective and size on each communicator (shim_route.c):
 * what gcomp can serve goes to the faster of gcomp and MPI, each timed on the first calls of
 * a size and agreed by the members; GCOMP_SHIM_ROUTE=gcomp or mpi forces one. */
#include <stdint.h>

#include "shim.h"

/* The route once the arguments are gcomp's: -1 to serve it (c->sc set), or why it goes to
 * MPI. The communicator comes last, so that a gcomp communicator is created only at a call
 * that would use it (every member makes the same decisions before, MPI requiring the same
 * arguments of them). */
static int comm_route(MPI_Comm comm, shim_call *c) {
  c->sc = shim_comm_get(comm);
  return c->sc->comm ? -1 : c->sc->off;
}

/* ---- reduce-scatter --------------------------------------------------------------------- */

static int rs_route(const void *sendbuf, void *recvbuf, int recvcount, MPI_Datatype datatype,
                    MPI_Op op, MPI_Comm comm, shim_call *c) {
  /* errors MPI reports (MPI_IN_PLACE as recvbuf, aliased buffers without MPI_IN_PLACE) */
  if (recvcount < 0 || recvbuf == MPI_IN_PLACE || (recvcount > 0 && sendbuf == recvbuf))
    return FALL_ARGS;
  if (!shim_map_dtype(datatype, &c->dt)) return FALL_DTYPE;
  if (!shim_map_op(op, &c->op)) return FALL_OP;
  int why = comm_route(comm, c);
  if (why >= 0) return why;
  size_t block = shim_call_bytes((size_t)recvcount, c->dt);
  c->count = (size_t)recvcount;
  if (sendbuf == MPI_IN_PLACE) {
    c->src = recvbuf;
    c->dst = (char *)recvbuf + (size_t)c->sc->rank * block;
    c->move_to = recvbuf;
    c->move_bytes = c->sc->rank ? block : 0;
  } else {
    c->src = sendbuf;
    c->dst = recvbuf;
  }
  return -1;
}

/* MPI_Reduce_scatter_block, or MPI_Reduce_scatter (a->counts) with equal counts */
static int reduce_scatter_block(int kind, const shim_mpi_args *a, MPI_Request *request) {
  shim_call c = {.kind = kind};
  int rc = shim_null_buffer(shim_kind_names[kind][request != NULL], a->sendbuf, a->recvbuf,
                            a->count, a->comm);
  if (rc != MPI_SUCCESS) return rc;
  int why = rs_route(a->sendbuf, a->recvbuf, a->count, a->type, a->op, a->comm, &c);
  return shim_dispatch(&c, why, a, request);
}

SHIM_API int MPI_Reduce_scatter_block(const void *sendbuf, void *recvbuf, int recvcount,
                                      MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  shim_mpi_args a = {.sendbuf = sendbuf, .recvbuf = recvbuf, .count = recvcount,
                     .type = datatype, .op = op, .comm = comm};
  return reduce_scatter_block(SHIM_RSB, &a, NULL);
}

SHIM_API int MPI_Ireduce_scatter_block(const void *sendbuf, void *recvbuf, int recvcount,
                                       MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                                       MPI_Request *request) {
  shim_mpi_args a = {.sendbuf = sendbuf, .recvbuf = recvbuf, .count = recvcount,
                     .type = datatype, .op = op, .comm = comm};
  return reduce_scatter_block(SHIM_RSB, &a, request);
}

/* MPI_Reduce_scatter: recvcounts[] are the same on every member (MPI requires it), so
 * whether they are all equal is too. 1 with the block count in *count. */
static int equal_counts(const int recvcounts[], MPI_Comm comm, int *count) {
  int size = 0;
  if (!recvcounts || PMPI_Comm_size(comm, &size) != MPI_SUCCESS || size < 1) return 0;
  for (int i = 1; i < size; i++)
    if (recvcounts[i] != recvcounts[0]) return 0;
  *count = recvcounts[0];
  return 1;
}

static int reduce_scatter(const void *sendbuf, void *recvbuf, const int recvcounts[],
                          MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, MPI_Request *request) {
  shim_mpi_args a = {.sendbuf = sendbuf, .recvbuf = recvbuf, .counts = recvcounts,
                     .type = datatype, .op = op, .comm = comm, .count = -1};
  shim_call c = {.kind = SHIM_RS};
  int inter = 0;
  /* an inter-communicator's counts are of the remote group: MPI's alone */
  if (comm != MPI_COMM_NULL) PMPI_Comm_test_inter(comm, &inter);
  if (inter) return shim_dispatch(&c, FALL_INTER, &a, request);
  if (!equal_counts(recvcounts, comm, &a.count))
    return shim_dispatch(&c, recvcounts ? FALL_UNEQUAL : FALL_ARGS, &a, request);
  return reduce_scatter_block(SHIM_RS, &a, request);
}

SHIM_API int MPI_Reduce_scatter(const void *sendbuf, void *recvbuf, const int recvcounts[],
                                MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  return reduce_scatter(sendbuf, recvbuf, recvcounts, datatype, op, comm, NULL);
}

SHIM_API int MPI_Ireduce_scatter(const void *sendbuf, void *recvbuf, const int recvcounts[],
                                 MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                                 MPI_Request *request) {
  return reduce_scatter(sendbuf, recvbuf, recvcounts, datatype, op, comm, request);
}

/* ---- broadcast and allgather: the types they can move ---------------------------------- */

/* They only copy, so beyond the types the reductions map, the byte-like and unsigned types
 * (what IMB and OSU send: MPI_BYTE, MPI_CHAR) are moved as 32-bit words when their bytes
 * come in whole words (never compressed: GCOMP_ALLGATHER_CODEC is for float32). 1 with the
 * gcomp type and count in *dt, *n; 0: the type goes to MPI. The same on every member:
 * MPI requires the same type signature of them. */
static int copy_dtype(MPI_Datatype t, int count, gcomp_dtype *dt, size_t *n) {
  if (shim_map_dtype(t, dt)) {
    *n = (size_t)count;
    return 1;
  }
  const MPI_Datatype words[] = {MPI_BYTE, MPI_CHAR, MPI_SIGNED_CHAR, MPI_UNSIGNED_CHAR,
                                MPI_INT8_T, MPI_UINT8_T, MPI_SHORT, MPI_UNSIGNED_SHORT,
                                MPI_INT16_T, MPI_UINT16_T, MPI_UNSIGNED, MPI_UINT32_T,
                                MPI_UNSIGNED_LONG, MPI_UNSIGNED_LONG_LONG, MPI_UINT64_T};
  int found = 0, size = 0;
  for (size_t i = 0; i < sizeof words / sizeof words[0]; i++) found |= t == words[i];
  if (!found || PMPI_Type_size(t, &size) != MPI_SUCCESS || size <= 0) return 0;
  size_t bytes = (size_t)count * (size_t)size;
  if (bytes % 4) return 0;
  *dt = GCOMP_INT32;
  *n = bytes / 4;
  return 1;
}

/* ---- allgather ---------------------------------------------------------------------------- */

/* allgather's and alltoall's checks and route, which are the same: count is per block (the
 * same for every rank). In place, the data to send is read from recvbuf: allgather's from
 * the rank's own block (own_block), alltoall's from the whole buffer. */
static int blocks_call(int kind, const shim_mpi_args *a, MPI_Request *request, int own_block) {
  shim_call c = {.kind = kind};
  int rc = shim_null_buffer(shim_kind_names[kind][request != NULL], a->sendbuf, a->recvbuf,
                            a->count, a->comm);
  if (rc != MPI_SUCCESS) return rc;
  int why = -1, in_place = a->sendbuf == MPI_IN_PLACE;
  if (a->count < 0 || a->recvbuf == MPI_IN_PLACE || (a->count > 0 && a->sendbuf == a->recvbuf))
    why = FALL_ARGS;
  else if (!in_place && (a->sendtype != a->type || a->sendcount != a->count))
    why = FALL_MISMATCH;
  else if (!copy_dtype(a->type, a->count, &c.dt, &c.count))
    why = FALL_DTYPE;
  else
    why = comm_route(a->comm, &c);
  if (why < 0) {
    size_t at = own_block ? (size_t)c.sc->rank * shim_call_bytes(c.count, c.dt) : 0;
    c.dst = a->recvbuf;
    c.src = in_place ? (char *)a->recvbuf + at : a->sendbuf;
  }
  return shim_dispatch(&c, why, a, request);
}

/* MPI_Allgather's and MPI_Alltoall's arguments (and their I-forms'), as one struct */
#define BLOCKS_ARGS(a)                                                                  \
  shim_mpi_args a = {.sendbuf = sendbuf, .sendcount = sendcount, .sendtype = sendtype,  \
                     .recvbuf = recvbuf, .count = recvcount, .type = recvtype, .comm = comm}

SHIM_API int MPI_Allgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                           void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
  BLOCKS_ARGS(a);
  return blocks_call(SHIM_ALLGATHER, &a, NULL, 1);
}

SHIM_API int MPI_Iallgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                            void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm,
                            MPI_Request *request) {
  BLOCKS_ARGS(a);
  return blocks_call(SHIM_ALLGATHER, &a, request, 1);
}

/* ---- alltoall ----------------------------------------------------------------------------- */

SHIM_API int MPI_Alltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                          void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
  BLOCKS_ARGS(a);
  return blocks_call(SHIM_ALLTOALL, &a, NULL, 0);
}

SHIM_API int MPI_Ialltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                           void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm,
                           MPI_Request *request) {
  BLOCKS_ARGS(a);
  return blocks_call(SHIM_ALLTOALL, &a, request, 0);
}

/* ---- broadcast and barrier -------------------------------------------------------------- */

static int bcast(void *buf, int count, MPI_Datatype datatype, int root, MPI_Comm comm,
                 MPI_Request *request) {
  shim_mpi_args a = {.recvbuf = buf, .count = count, .type = datatype, .root = root,
                     .comm = comm};
  shim_call c = {.kind = SHIM_BCAST, .root = root, .dst = buf};
  int rc = shim_null_buffer(shim_kind_names[SHIM_BCAST][request != NULL], buf, buf, count,
                            comm);
  if (rc != MPI_SUCCESS) return rc;
  int why;
  if (count < 0) why = FALL_ARGS;
  else if (!copy_dtype(datatype, count, &c.dt, &c.count)) why = FALL_DTYPE;
  else why = comm_route(comm, &c);
  /* a root out of range is MPI's to report (the same on every member) */
  if (why < 0 && (root < 0 || root >= c.sc->size)) why = FALL_ARGS;
  return shim_dispatch(&c, why, &a, request);
}

SHIM_API int MPI_Bcast(void *buf, int count, MPI_Datatype datatype, int root, MPI_Comm comm) {
  return bcast(buf, count, datatype, root, comm, NULL);
}

SHIM_API int MPI_Ibcast(void *buf, int count, MPI_Datatype datatype, int root, MPI_Comm comm,
                        MPI_Request *request) {
  return bcast(buf, count, datatype, root, comm, request);
}

static int barrier(MPI_Comm comm, MPI_Request *request) {
  shim_mpi_args a = {.comm = comm};
  shim_call c = {.kind = SHIM_BARRIER};
  return shim_dispatch(&c, comm_route(comm, &c), &a, request);
}

SHIM_API int MPI_Barrier(MPI_Comm comm) { return barrier(comm, NULL); }

SHIM_API int MPI_Ibarrier(MPI_Comm comm, MPI_Request *request) {
  return barrier(comm, request);
}
