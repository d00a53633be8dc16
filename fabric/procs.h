/* Processes of this machine, as fabric/ and reduce/ need them: whether a pid still runs,
 * and the /dev/shm files that processes which are gone left behind. */
#ifndef GCOMP_PROCS_H
#define GCOMP_PROCS_H

/* 1 when no process has this pid here or it is a zombie (killed, not yet reaped), else 0
 * (running, or not readable: not ours to judge). Pids compare only within one pid
 * namespace: callers check that first. */
int gcomp_pid_gone(int pid);

/* The pid a /dev/shm file name belongs to, or 0 when the name is not one the caller makes. */
typedef int (*gcomp_shm_owner_fn)(const char *name);

/* Removes the /dev/shm files owner() claims whose process is gone, or that carry this
 * process's own pid (left by an earlier process with the same pid) unless keep_own, and
 * that are at least min_age_s seconds old. subsys names the caller in the log. */
void gcomp_shm_sweep(gcomp_shm_owner_fn owner, int keep_own, int min_age_s, unsigned subsys);

#endif /* GCOMP_PROCS_H */
