/* The public entry points of reduce_scatter, allgather, broadcast, barrier and alltoall and
 * their non-blocking twins: each builds its call and hands it to the pipeline (call.c)
 * through the request queue (progress.c), so that calls of every kind keep their issue
 * order on a communicator. Their arguments are judged inside the call (call_coll.c), where
 * every rank learns of any rank's refusal. */
#include "comm_impl.h"

static int submit(gcomp_comm *comm, gcomp_call call, gcomp_request **req, const char *fn) {
  if (req) *req = NULL;
  return gcomp_call_submit(comm, &call, req, fn);
}

static gcomp_call rs_call(const void *sendbuf, void *recvbuf, size_t recvcount,
                          gcomp_dtype dtype, gcomp_op op, gcomp_codec *codec, uint64_t key) {
  return (gcomp_call){.kind = GCOMP_COLL_REDUCE_SCATTER, .sendbuf = sendbuf, .recvbuf = recvbuf,
                      .count = recvcount, .dtype = dtype, .op = op, .codec = codec, .key = key};
}
static gcomp_call ag_call(const void *sendbuf, void *recvbuf, size_t sendcount,
                          gcomp_dtype dtype, gcomp_codec *codec, uint64_t key) {
  return (gcomp_call){.kind = GCOMP_COLL_ALLGATHER, .sendbuf = sendbuf, .recvbuf = recvbuf,
                      .count = sendcount, .dtype = dtype, .op = GCOMP_SUM, .codec = codec,
                      .key = key};
}
static gcomp_call bcast_call(void *buf, size_t count, gcomp_dtype dtype, int root) {
  return (gcomp_call){.kind = GCOMP_COLL_BROADCAST, .sendbuf = buf, .recvbuf = buf,
                      .count = count, .dtype = dtype, .op = GCOMP_SUM, .root = root};
}
static gcomp_call barrier_call(void) {
  return (gcomp_call){.kind = GCOMP_COLL_BARRIER, .dtype = GCOMP_FLOAT32, .op = GCOMP_SUM};
}
static gcomp_call a2a_call(const void *sendbuf, void *recvbuf, size_t count, gcomp_dtype dtype) {
  return (gcomp_call){.kind = GCOMP_COLL_ALLTOALL, .sendbuf = sendbuf, .recvbuf = recvbuf,
                      .count = count, .dtype = dtype, .op = GCOMP_SUM};
}

gcomp_status gcomp_reduce_scatter(gcomp_comm *comm, const void *sendbuf, void *recvbuf, size_t recvcount,
                         gcomp_dtype dtype, gcomp_op op, gcomp_codec *codec, uint64_t key) {
  return submit(comm, rs_call(sendbuf, recvbuf, recvcount, dtype, op, codec, key), NULL,
                "gcomp_reduce_scatter");
}
gcomp_status gcomp_ireduce_scatter(gcomp_comm *comm, const void *sendbuf, void *recvbuf,
                          size_t recvcount, gcomp_dtype dtype, gcomp_op op, gcomp_codec *codec,
                          uint64_t key, gcomp_request **req) {
  GCOMP_FAIL_IF(!req, GCOMP_ERR_INVALID, "gcomp_ireduce_scatter: req is NULL");
  return submit(comm, rs_call(sendbuf, recvbuf, recvcount, dtype, op, codec, key), req,
                "gcomp_ireduce_scatter");
}

gcomp_status gcomp_allgather(gcomp_comm *comm, const void *sendbuf, void *recvbuf, size_t sendcount,
                    gcomp_dtype dtype, gcomp_codec *codec, uint64_t key) {
  return submit(comm, ag_call(sendbuf, recvbuf, sendcount, dtype, codec, key), NULL,
                "gcomp_allgather");
}
gcomp_status gcomp_iallgather(gcomp_comm *comm, const void *sendbuf, void *recvbuf, size_t sendcount,
                     gcomp_dtype dtype, gcomp_codec *codec, uint64_t key, gcomp_request **req) {
  GCOMP_FAIL_IF(!req, GCOMP_ERR_INVALID, "gcomp_iallgather: req is NULL");
  return submit(comm, ag_call(sendbuf, recvbuf, sendcount, dtype, codec, key), req,
                "gcomp_iallgather");
}

gcomp_status gcomp_broadcast(gcomp_comm *comm, void *buf, size_t count, gcomp_dtype dtype, int root) {
  return submit(comm, bcast_call(buf, count, dtype, root), NULL, "gcomp_broadcast");
}
gcomp_status gcomp_ibroadcast(gcomp_comm *comm, void *buf, size_t count, gcomp_dtype dtype, int root,
                     gcomp_request **req) {
  GCOMP_FAIL_IF(!req, GCOMP_ERR_INVALID, "gcomp_ibroadcast: req is NULL");
  return submit(comm, bcast_call(buf, count, dtype, root), req, "gcomp_ibroadcast");
}

gcomp_status gcomp_barrier(gcomp_comm *comm) {
  return submit(comm, barrier_call(), NULL, "gcomp_barrier");
}
gcomp_status gcomp_ibarrier(gcomp_comm *comm, gcomp_request **req) {
  GCOMP_FAIL_IF(!req, GCOMP_ERR_INVALID, "gcomp_ibarrier: req is NULL");
  return submit(comm, barrier_call(), req, "gcomp_ibarrier");
}

gcomp_status gcomp_alltoall(gcomp_comm *comm, const void *sendbuf, void *recvbuf, size_t count,
                   gcomp_dtype dtype) {
  return submit(comm, a2a_call(sendbuf, recvbuf, count, dtype), NULL, "gcomp_alltoall");
}
gcomp_status gcomp_ialltoall(gcomp_comm *comm, const void *sendbuf, void *recvbuf, size_t count,
                    gcomp_dtype dtype, gcomp_request **req) {
  GCOMP_FAIL_IF(!req, GCOMP_ERR_INVALID, "gcomp_ialltoall: req is NULL");
  return submit(comm, a2a_call(sendbuf, recvbuf, count, dtype), req, "gcomp_ialltoall");
}
