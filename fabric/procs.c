/* Process liveness and the stale /dev/shm sweep (procs.h), used by the libfabric transport
 * and by reduce/shm.c. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "gcomp_common.h"
#include "procs.h"

int gcomp_pid_gone(int pid) {
  if (pid <= 0) return 0;
  char path[64], buf[256];
  snprintf(path, sizeof path, "/proc/%d/stat", pid);
  FILE *f = fopen(path, "r");
  if (!f) return errno == ENOENT || errno == ESRCH;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  /* "pid (comm) S ...": comm may hold spaces and parentheses, the state follows the last ')' */
  const char *paren = strrchr(buf, ')');
  return paren && paren[1] == ' ' && (paren[2] == 'Z' || paren[2] == 'X');
}

void gcomp_shm_sweep(gcomp_shm_owner_fn owner, int keep_own, int min_age_s, unsigned subsys) {
  DIR *d = opendir("/dev/shm");
  if (!d) return;
  int me = (int)getpid();
  struct dirent *de;
  while ((de = readdir(d))) {
    int pid = owner(de->d_name);
    if (pid <= 0 || (pid == me ? keep_own : !gcomp_pid_gone(pid))) continue;
    char path[300];
    snprintf(path, sizeof path, "/dev/shm/%s", de->d_name);
    struct stat st;
    if (min_age_s > 0 && (stat(path, &st) != 0 || time(NULL) - st.st_mtime < min_age_s)) continue;
    if (unlink(path) == 0)
      GCOMP_INFO(subsys, "removed stale shared-memory file %s (process %d is gone)", path, pid);
  }
  closedir(d);
}
