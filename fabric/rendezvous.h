/* Internal to the TCP rendezvous (rendezvous.c: the gcomp_oob and the joining ranks;
 * rendezvous_root.c: rank 0's side; rendezvous_io.c: bytes on a socket by a deadline). */
#ifndef GCOMP_RENDEZVOUS_H
#define GCOMP_RENDEZVOUS_H

#include <stddef.h>
#include <stdint.h>

#include "bootstrap.h"
#include "gcomp_common.h"

#define RV_MAGIC 0x47435256u   /* "GCRV" */
#define RV_VERSION 1u
#define RV_MAX_TOKEN 255u
#define RV_MAX_RECORD (1u << 20)

typedef struct {
  gcomp_oob pub;
  char where[300];     /* "host:port" for messages */
  int timeout_ms;
  int fd;              /* non-root: connection to root */
  int *peer_fd;        /* root: [size] connection of each rank (-1 for itself) */
} rendezvous;

/* ---- rendezvous_root.c ------------------------------------------------------------------ */
/* Listens on env->root_port and admits env->size - 1 ranks into rv->peer_fd by deadline dl;
 * at the deadline tells those admitted which ranks never came and fails. */
int gcomp_rv_serve(rendezvous *rv, const gcomp_boot_env *env, uint64_t dl);

/* Root tells everybody why the job cannot go on. */
void gcomp_rv_abort_all(rendezvous *rv, const char *reason);

/* ---- rendezvous_io.c -------------------------------------------------------------------- */
/* Milliseconds until deadline_ns (rounded up; 0 once it has passed). */
int gcomp_rv_ms_left(uint64_t deadline_ns);

/* Moves exactly n bytes, or fails at the deadline / on EOF. Returns 0, -ETIMEDOUT, -EPIPE
 * (peer closed) or -errno. */
int gcomp_rv_io(int fd, void *buf, size_t n, int writing, uint64_t deadline_ns);

/* What a gcomp_rv_io failure means, for messages. */
const char *gcomp_rv_io_text(int e);

/* One u32 in network order; the same returns as gcomp_rv_io. */
int gcomp_rv_put_u32(int fd, uint32_t v, uint64_t dl);
int gcomp_rv_get_u32(int fd, uint32_t *v, uint64_t dl);

/* status, then a reason string (refusals and aborts carry one); the receiver keeps at most
 * reason_size - 1 bytes of it */
int gcomp_rv_send_status(int fd, uint32_t status, const char *reason, uint64_t dl);
int gcomp_rv_recv_status(int fd, uint32_t *status, char *reason, size_t reason_size,
                         uint64_t dl);

#endif /* GCOMP_RENDEZVOUS_H */
