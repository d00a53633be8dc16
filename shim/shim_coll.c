/* The collectives beyond allreduce: MPI_Reduce_scatter_block, MPI_Reduce_scatter (equal
 * counts), MPI_Allgather, MPI_Bcast, MPI_Barrier and their non-blocking forms, through
 * gcomp_reduce_scatter, gcomp_allgather, gcomp_broadcast, gcomp_barrier and their twins.
 *
 * They take MPI_Allreduce's machinery as it is: the same communicators (shim_comm_get), the
 * same types and ops (shim_map_dtype/op; broadcast and allgather also move byte-like types,
 * copy_dtype), the same NULL-buffer refusal, the same reasons
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
 *  - MPI_Allgather with send and receive types or counts that differ (legal in MPI when the
 *    signatures match) goes to MPI (reason "send/receive mismatch").
 *
 * Codecs as gcomp's defaults give them, no codec passed: reduce-scatter compresses only when
 * GCOMP_CODEC/GCOMP_INTRA_CODEC ask for it (as MPI_Allreduce), allgather only when
 * GCOMP_ALLGATHER_CODEC does; broadcast and barrier are exact.
 *
 * Route: these have no per-size timing against MPI (shim_route.c's table is allreduce's);
 * they go to gcomp whenever it can serve them, and to MPI under GCOMP_SHIM_ROUTE=mpi. */
#include <stdint.h>

#include "shim.h"

/* The route once the arguments are gcomp's: -1 to serve it (c->sc set), or why it goes to
 * MPI. The communicator comes last, so that a gcomp communicator is created only at a call
 * that would use it (every member makes the same decisions before, MPI requiring the same
 * arguments of them). */
static int comm_route(MPI_Comm comm, shim_call *c) {
  int why = -1;
  c->sc = shim_comm_get(comm);
  if (!c->sc->comm) return c->sc->off;
  if (shim_route_fixed(&why) == SHIM_VIA_MPI) return why;
  return -1;
}

/* A call that gcomp serves (why < 0) or MPI does (counted; the caller calls PMPI on 0).
 * Returns 1 with *rc the outcome when the shim ran it. */
static int run(int why, int count, shim_call *c, MPI_Comm comm, MPI_Request *request, int *rc) {
  if (why >= 0) {
    shim_count_fell(c->kind, request != NULL, count, why);
    return 0;
  }
  *rc = request ? shim_istart(c, comm, request) : shim_serve(c, comm);
  return 1;
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
  c->key = shim_tensor_key(recvbuf, c->count, c->dt);
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

static int reduce_scatter_block(int kind, const void *sendbuf, void *recvbuf, int recvcount,
                                MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                                MPI_Request *request, int *rc) {
  shim_call c = {.kind = kind};
  *rc = shim_null_buffer(shim_kind_names[kind][request != NULL], sendbuf, recvbuf, recvcount,
                         comm);
  if (*rc != MPI_SUCCESS) return 1;
  int why = rs_route(sendbuf, recvbuf, recvcount, datatype, op, comm, &c);
  return run(why, recvcount, &c, comm, request, rc);
}

SHIM_API int MPI_Reduce_scatter_block(const void *sendbuf, void *recvbuf, int recvcount,
                                      MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  int rc;
  if (reduce_scatter_block(SHIM_RSB, sendbuf, recvbuf, recvcount, datatype, op, comm, NULL,
                           &rc))
    return rc;
  return PMPI_Reduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, op, comm);
}

SHIM_API int MPI_Ireduce_scatter_block(const void *sendbuf, void *recvbuf, int recvcount,
                                       MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                                       MPI_Request *request) {
  int rc;
  if (reduce_scatter_block(SHIM_RSB, sendbuf, recvbuf, recvcount, datatype, op, comm, request,
                           &rc))
    return rc;
  return PMPI_Ireduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, op, comm, request);
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
                          MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, MPI_Request *request,
                          int *rc) {
  int count = 0, inter = 0;
  /* an inter-communicator's counts are of the remote group: MPI's alone */
  if (comm != MPI_COMM_NULL) PMPI_Comm_test_inter(comm, &inter);
  if (!inter && !equal_counts(recvcounts, comm, &count)) {
    shim_call c = {.kind = SHIM_RS};
    return run(recvcounts ? FALL_UNEQUAL : FALL_ARGS, -1, &c, comm, request, rc);
  }
  if (inter) {
    shim_call c = {.kind = SHIM_RS};
    return run(FALL_INTER, -1, &c, comm, request, rc);
  }
  return reduce_scatter_block(SHIM_RS, sendbuf, recvbuf, count, datatype, op, comm, request,
                              rc);
}

SHIM_API int MPI_Reduce_scatter(const void *sendbuf, void *recvbuf, const int recvcounts[],
                                MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  int rc;
  if (reduce_scatter(sendbuf, recvbuf, recvcounts, datatype, op, comm, NULL, &rc)) return rc;
  return PMPI_Reduce_scatter(sendbuf, recvbuf, recvcounts, datatype, op, comm);
}

SHIM_API int MPI_Ireduce_scatter(const void *sendbuf, void *recvbuf, const int recvcounts[],
                                 MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                                 MPI_Request *request) {
  int rc;
  if (reduce_scatter(sendbuf, recvbuf, recvcounts, datatype, op, comm, request, &rc))
    return rc;
  return PMPI_Ireduce_scatter(sendbuf, recvbuf, recvcounts, datatype, op, comm, request);
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

static int allgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                     int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request,
                     int *rc) {
  shim_call c = {.kind = SHIM_ALLGATHER};
  *rc = shim_null_buffer(shim_kind_names[SHIM_ALLGATHER][request != NULL], sendbuf, recvbuf,
                         recvcount, comm);
  if (*rc != MPI_SUCCESS) return 1;
  int why = -1, in_place = sendbuf == MPI_IN_PLACE;
  if (recvcount < 0 || recvbuf == MPI_IN_PLACE || (recvcount > 0 && sendbuf == recvbuf))
    why = FALL_ARGS;
  else if (!in_place && (sendtype != recvtype || sendcount != recvcount))
    why = FALL_MISMATCH;
  else if (!copy_dtype(recvtype, recvcount, &c.dt, &c.count))
    why = FALL_DTYPE;
  else
    why = comm_route(comm, &c);
  if (why < 0) {
    c.dst = recvbuf;
    c.src = in_place ? (char *)recvbuf + (size_t)c.sc->rank * shim_call_bytes(c.count, c.dt)
                     : sendbuf;
    c.key = shim_tensor_key(recvbuf, c.count, c.dt);
  }
  return run(why, recvcount, &c, comm, request, rc);
}

SHIM_API int MPI_Allgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                           void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
  int rc;
  if (allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, NULL, &rc))
    return rc;
  return PMPI_Allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
}

SHIM_API int MPI_Iallgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                            void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm,
                            MPI_Request *request) {
  int rc;
  if (allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, request, &rc))
    return rc;
  return PMPI_Iallgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm,
                         request);
}

/* ---- broadcast and barrier -------------------------------------------------------------- */

static int bcast(void *buf, int count, MPI_Datatype datatype, int root, MPI_Comm comm,
                 MPI_Request *request, int *rc) {
  shim_call c = {.kind = SHIM_BCAST, .root = root};
  *rc = shim_null_buffer(shim_kind_names[SHIM_BCAST][request != NULL], buf, buf, count, comm);
  if (*rc != MPI_SUCCESS) return 1;
  int why;
  if (count < 0) why = FALL_ARGS;
  else if (!copy_dtype(datatype, count, &c.dt, &c.count)) why = FALL_DTYPE;
  else why = comm_route(comm, &c);
  /* a root out of range is MPI's to report (the same on every member) */
  if (why < 0 && (root < 0 || root >= c.sc->size)) why = FALL_ARGS;
  c.dst = buf;
  return run(why, count, &c, comm, request, rc);
}

SHIM_API int MPI_Bcast(void *buf, int count, MPI_Datatype datatype, int root, MPI_Comm comm) {
  int rc;
  if (bcast(buf, count, datatype, root, comm, NULL, &rc)) return rc;
  return PMPI_Bcast(buf, count, datatype, root, comm);
}

SHIM_API int MPI_Ibcast(void *buf, int count, MPI_Datatype datatype, int root, MPI_Comm comm,
                        MPI_Request *request) {
  int rc;
  if (bcast(buf, count, datatype, root, comm, request, &rc)) return rc;
  return PMPI_Ibcast(buf, count, datatype, root, comm, request);
}

SHIM_API int MPI_Barrier(MPI_Comm comm) {
  shim_call c = {.kind = SHIM_BARRIER};
  int rc;
  if (run(comm_route(comm, &c), 0, &c, comm, NULL, &rc)) return rc;
  return PMPI_Barrier(comm);
}

SHIM_API int MPI_Ibarrier(MPI_Comm comm, MPI_Request *request) {
  shim_call c = {.kind = SHIM_BARRIER};
  int rc;
  if (run(comm_route(comm, &c), 0, &c, comm, request, &rc)) return rc;
  return PMPI_Ibarrier(comm, request);
}
