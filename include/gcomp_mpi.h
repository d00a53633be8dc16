/* gcomp over MPI point-to-point messages: include after mpi.h, in a program built with its
 * MPI's compiler wrapper (mpicc, or smpicc for SimGrid's simulator).
 *
 *   gcomp_comm *comm;
 *   int st = gcomp_comm_init_mpi(MPI_COMM_WORLD, NULL, NULL, &comm);
 *
 * fills gcomp_p2p_ops (gcomp.h) from this MPI and creates the communicator over a duplicate
 * of the MPI communicator (errors returned, not fatal), so gcomp's own algorithms move
 * their messages with MPI_Isend/MPI_Irecv. node_id NULL: GCOMP_NODE_ID, else
 * MPI_Get_processor_name (under SMPI the simulated host's name). Under SMPI the table says
 * `simulated` (blocking waits, no shared memory between ranks). Everything here is static
 * inline: the library itself never includes mpi.h. */
#ifndef GCOMP_MPI_H
#define GCOMP_MPI_H

#include <limits.h>
#include <stdlib.h>

#include <mpi.h>

#include "gcomp.h"

typedef struct {
  MPI_Comm comm;
} gcomp_mpi_ctx_;

static inline int gcomp_mpi_status_(int rc) {
  if (rc == MPI_SUCCESS) return 0;
  int cls = rc;
  MPI_Error_class(rc, &cls);
  return cls == MPI_ERR_TRUNCATE ? GCOMP_ERR_INVALID : GCOMP_ERR_FABRIC;
}

static inline int gcomp_mpi_isend_(void *ctx, int peer, int tag, const void *buf, size_t len,
                                   void *req) {
  if (len > INT_MAX) return GCOMP_ERR_INVALID;
  return gcomp_mpi_status_(MPI_Isend((void *)buf, (int)len, MPI_BYTE, peer, tag,
                                     ((gcomp_mpi_ctx_ *)ctx)->comm, (MPI_Request *)req));
}

static inline int gcomp_mpi_irecv_(void *ctx, int peer, int tag, void *buf, size_t capacity,
                                   void *req) {
  int cap = capacity > INT_MAX ? INT_MAX : (int)capacity;
  return gcomp_mpi_status_(MPI_Irecv(buf, cap, MPI_BYTE, peer, tag,
                                     ((gcomp_mpi_ctx_ *)ctx)->comm, (MPI_Request *)req));
}

static inline size_t gcomp_mpi_count_(MPI_Status *status) {
  int n = 0;
  MPI_Get_count(status, MPI_BYTE, &n);
  return n > 0 ? (size_t)n : 0;
}

static inline int gcomp_mpi_test_(void *ctx, void *req, int *done, size_t *len) {
  (void)ctx;
  MPI_Status status;
  int rc = MPI_Test((MPI_Request *)req, done, &status);
  if (rc == MPI_SUCCESS && *done && status.MPI_ERROR != MPI_SUCCESS &&
      status.MPI_ERROR != MPI_ERR_PENDING)
    rc = status.MPI_ERROR;
  if (rc != MPI_SUCCESS) *done = 1;
  else if (*done) *len = gcomp_mpi_count_(&status);
  return gcomp_mpi_status_(rc);
}

static inline int gcomp_mpi_waitany_(void *ctx, int n, void *reqs, int *index, size_t *len) {
  (void)ctx;
  MPI_Status status;
  int i = MPI_UNDEFINED;
  int rc = MPI_Waitany(n, (MPI_Request *)reqs, &i, &status);
  *index = i == MPI_UNDEFINED ? -1 : i;
  if (rc == MPI_SUCCESS && i != MPI_UNDEFINED) *len = gcomp_mpi_count_(&status);
  return gcomp_mpi_status_(rc);
}

static inline int gcomp_mpi_cancel_(void *ctx, void *req) {
  (void)ctx;
  MPI_Request *r = (MPI_Request *)req;
  if (*r == MPI_REQUEST_NULL) return 0;
  MPI_Cancel(r);
  return gcomp_mpi_status_(MPI_Request_free(r));
}

static inline void gcomp_mpi_null_req_(void *req) { *(MPI_Request *)req = MPI_REQUEST_NULL; }

static inline double gcomp_mpi_wtime_(void *ctx) {
  (void)ctx;
  return MPI_Wtime();
}

static inline int gcomp_mpi_allgather_(void *ctx, const void *mine, size_t len, void *all) {
  if (len > INT_MAX) return -1;
  return MPI_Allgather((void *)mine, (int)len, MPI_BYTE, all, (int)len, MPI_BYTE,
                       ((gcomp_mpi_ctx_ *)ctx)->comm) == MPI_SUCCESS ? 0 : -1;
}

static inline void gcomp_mpi_close_(void *ctx) {
  gcomp_mpi_ctx_ *c = (gcomp_mpi_ctx_ *)ctx;
  MPI_Comm_free(&c->comm);
  free(c);
}

/* Creates this rank's communicator over MPI communicator `comm` (collective over it).
 * node_id and config as in gcomp_comm_init_oob. Returns a gcomp status. */
static inline int gcomp_comm_init_mpi(MPI_Comm comm, const char *node_id,
                                      const gcomp_config *config, gcomp_comm **out) {
  gcomp_mpi_ctx_ *c = (gcomp_mpi_ctx_ *)calloc(1, sizeof *c);
  if (!c) return GCOMP_ERR_NOMEM;
  if (MPI_Comm_dup(comm, &c->comm) != MPI_SUCCESS) {
    free(c);
    return GCOMP_ERR_BOOTSTRAP;
  }
  MPI_Comm_set_errhandler(c->comm, MPI_ERRORS_RETURN);
  int rank = 0, size = 0, flag = 0;
  MPI_Comm_rank(c->comm, &rank);
  MPI_Comm_size(c->comm, &size);
  int *ub = NULL;
  MPI_Comm_get_attr(c->comm, MPI_TAG_UB, &ub, &flag);
  char host[MPI_MAX_PROCESSOR_NAME + 1] = "";
  const char *given = NULL;
  int is_set = 0;
  if (!node_id && gcomp_config_get(config, "GCOMP_NODE_ID", &given, &is_set) == 0 && is_set &&
      given[0])
    node_id = given;
  if (!node_id) {
    int n = 0;
    MPI_Get_processor_name(host, &n);
    node_id = host;
  }
  gcomp_p2p_ops ops = {
      .req_bytes = sizeof(MPI_Request),
      .tag_ub = flag && ub ? *ub : 32767,
#ifdef SMPI_H
      .simulated = 1,
#endif
      .isend = gcomp_mpi_isend_,
      .irecv = gcomp_mpi_irecv_,
      .test = gcomp_mpi_test_,
      .waitany = gcomp_mpi_waitany_,
      .cancel = gcomp_mpi_cancel_,
      .null_req = gcomp_mpi_null_req_,
      .wtime = gcomp_mpi_wtime_,
      .allgather = gcomp_mpi_allgather_,
      .close = gcomp_mpi_close_,
  };
  return gcomp_comm_init_p2p(rank, size, node_id, &ops, c, config, out);
}

#endif /* GCOMP_MPI_H */
