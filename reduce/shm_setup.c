/* A node's shared segment: made by the local root at communicator creation (POSIX shm,
 * unlinked as soon as every local rank has it open), mapped by all, swept when a killed
 * root left one behind. The calls over it are in shm.c. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "coll.h"
#include "procs.h"
#include "shm_seg.h"

enum { NAME_BYTES = 64 };

static size_t round_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

/* Maps the segment and signs this rank's control line (before the setup messages that
 * follow, which order these stores before anyone reads them). */
static int map_segment(gcomp_shm *s, int fd) {
  void *p = mmap(NULL, s->map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  GCOMP_FAIL_IF(p == MAP_FAILED, GCOMP_ERR_NOMEM, "shm: mmap of %zu bytes: %s", s->map_bytes,
                strerror(errno));
  s->base = p;
  s->ctl = (gcomp_shm_ctl *)(void *)s->base;
  s->data = s->base + round_up((size_t)s->L * sizeof(gcomp_shm_ctl), 4096);
  struct stat ns;
  s->ctl[s->me].pidns = stat("/proc/self/ns/pid", &ns) == 0 ? (uint64_t)ns.st_ino : 0;
  s->ctl[s->me].pid = (int32_t)getpid();
  return GCOMP_OK;
}

/* Our segments live in /dev/shm only between creation and the moment every local rank has
 * mapped them; a root killed in between leaves "gcomp-<pid>-..." behind. The next root on
 * the machine removes those whose process is gone and that are over a minute old (a pid
 * from another pid namespace, a container sharing /dev/shm, looks dead from here: only
 * files older than any setup, which takes milliseconds, go). */
static int segment_owner(const char *name) {
  int pid = 0, used = 0;
  if (sscanf(name, "gcomp-%d-%n", &pid, &used) != 1 || used == 0) return 0;
  return pid;
}

/* The local root makes the segment; its size is reserved up front (posix_fallocate) so a
 * full /dev/shm is an error here, not a SIGBUS in the middle of a call. */
static int make_segment(gcomp_shm *s, char *name) {
  static _Atomic unsigned counter;
  gcomp_shm_sweep(segment_owner, 1, 60, GCOMP_SUB_REDUCE);
  snprintf(name, NAME_BYTES, "/gcomp-%d-%u-%llx", (int)getpid(), atomic_fetch_add(&counter, 1),
           (unsigned long long)gcomp_now_ns());
  int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
  /* no /dev/shm, or not ours to write: this machine cannot serve the segment (memory is
   * what posix_fallocate and mmap below may lack) */
  GCOMP_FAIL_IF(fd < 0, GCOMP_ERR_UNSUPPORTED, "shm: shm_open(%s): %s", name, strerror(errno));
  int err = posix_fallocate(fd, 0, (off_t)s->map_bytes);
  if (err) {
    close(fd);
    shm_unlink(name);
    GCOMP_FAIL_IF(1, GCOMP_ERR_NOMEM, "shm: reserving %zu bytes in /dev/shm: %s", s->map_bytes,
                  strerror(err));
  }
  int st = map_segment(s, fd);
  close(fd);
  if (st < 0) shm_unlink(name);
  return st;
}

static int open_segment(gcomp_shm *s, const char *name) {
  int fd = shm_open(name, O_RDWR, 0600);
  /* the local root's segment, named by it: a failed exchange of the node's setup */
  GCOMP_FAIL_IF(fd < 0, GCOMP_ERR_BOOTSTRAP, "shm: shm_open(%s): %s", name, strerror(errno));
  int st = map_segment(s, fd);
  close(fd);
  return st;
}

void gcomp_shm_destroy(gcomp_shm *s) {
  if (!s) return;
  if (s->base) munmap(s->base, s->map_bytes);
  free(s);
}

/* Collective over the node's ranks. The root sends the segment's name, everyone answers
 * whether it could map it, the root unlinks the name and sends the verdict: all of the
 * node's ranks end up with the segment or all without. */
int gcomp_shm_create(gcomp_transport *t, size_t slot_bytes, gcomp_shm **out) {
  *out = NULL;
  if (t->local_size < 2 || slot_bytes == 0) return GCOMP_OK;
  gcomp_shm *s = calloc(1, sizeof *s);
  GCOMP_FAIL_IF(!s, GCOMP_ERR_NOMEM, "shm: state");
  s->L = t->local_size;
  s->me = t->local_rank;
  /* at least one 8-byte element per local rank: hier's rounds move one piece of every
   * shard through a slot (piece_elems); a smaller slot once made them overrun into the
   * next ranks' slots */
  s->slot = round_up(slot_bytes > 8 * (size_t)s->L ? slot_bytes : 8 * (size_t)s->L, 64);
  s->stride = s->slot + GCOMP_SHM_HEAD;
  s->timeout_ms = t->timeout_ms;
  s->map_bytes = round_up((size_t)s->L * sizeof(gcomp_shm_ctl), 4096) + 2 * (size_t)s->L * s->stride;
  const uint32_t seq = GCOMP_SEQ_SHM_SEGMENT;
  int root = t->local_ranks[0];
  char name[NAME_BYTES] = {0};
  int32_t ok = 1, verdict = 1;
  int st = GCOMP_OK;
  if (s->me == 0) {
    int mst = make_segment(s, name);
    if (mst < 0) {
      GCOMP_WARN(GCOMP_SUB_REDUCE, "no shared-memory allreduce on this node: %s (%s)",
                 gcomp_last_error(), gcomp_strerror(mst));
      name[0] = '\0';
      verdict = 0;
    }
    for (int i = 1; i < s->L && st == GCOMP_OK; i++)
      st = gcomp_send(t, t->local_ranks[i], gcomp_tag(seq, 1), name, sizeof name);
    for (int i = 1; i < s->L && st == GCOMP_OK; i++) {
      int32_t theirs = 0;
      st = gcomp_recv(t, t->local_ranks[i], gcomp_tag(seq, 2), &theirs, sizeof theirs, NULL);
      verdict &= theirs;
    }
    if (name[0]) shm_unlink(name);
    for (int i = 1; i < s->L && st == GCOMP_OK; i++)
      st = gcomp_send(t, t->local_ranks[i], gcomp_tag(seq, 3), &verdict, sizeof verdict);
  } else {
    st = gcomp_recv(t, root, gcomp_tag(seq, 1), name, sizeof name, NULL);
    name[NAME_BYTES - 1] = '\0';
    int ost = st == GCOMP_OK && name[0] ? open_segment(s, name) : GCOMP_OK;
    if (ost < 0) {
      GCOMP_WARN(GCOMP_SUB_REDUCE, "no shared-memory allreduce on this node: %s (%s)",
                 gcomp_last_error(), gcomp_strerror(ost));
      ok = 0;
    }
    if (st == GCOMP_OK) {
      ok &= name[0] != '\0';
      st = gcomp_send(t, root, gcomp_tag(seq, 2), &ok, sizeof ok);
    }
    if (st == GCOMP_OK) st = gcomp_recv(t, root, gcomp_tag(seq, 3), &verdict, sizeof verdict, NULL);
  }
  if (st < 0 || !verdict) {
    gcomp_shm_destroy(s);
    return st < 0 ? gcomp_error_trace(st, __FILE__, __LINE__) : GCOMP_OK;
  }
  /* the file was zero-filled: every flag starts at 0 (round 0 published) */
  s->round = 1;
  *out = s;
  return GCOMP_OK;
}

size_t gcomp_shm_slot_bytes(const gcomp_shm *s) { return s ? s->slot : 0; }
