#!/usr/bin/env bash
# A node's segment left in /dev/shm by a killed root ("gcomp-<pid>-...", pid gone, over a
# minute old) is removed by the next job's root; a fresh one, or one whose process lives,
# is left alone.
#   shm_stale.sh GCOMP_RUN ALLREDUCE_CHECK
set -u
run=$1 prog=$2
for v in $(compgen -e | grep '^GCOMP_'); do unset "$v"; done
dead=4194000   # a pid no process has (pid_max is 4194304 at most)
while kill -0 $dead 2>/dev/null; do dead=$((dead - 1)); done
old=/dev/shm/gcomp-$dead-0-stale-test-$$ new=/dev/shm/gcomp-$dead-1-fresh-test-$$
live=/dev/shm/gcomp-$$-0-live-test
trap 'rm -f "$old" "$new" "$live"' EXIT
echo x >"$old" && touch -d '2 hours ago' "$old"
echo x >"$new"
echo x >"$live" && touch -d '2 hours ago' "$live"
GCOMP_ALGO=shm "$run" -n 2 -- "$prog" dense >/dev/null 2>&1 || { echo "FAIL: the job failed"; exit 1; }
fails=0
[ -e "$old" ] && { echo "FAIL: the stale segment is still there"; fails=1; }
[ -e "$new" ] || { echo "FAIL: a segment younger than a minute was removed"; fails=1; }
[ -e "$live" ] || { echo "FAIL: the segment of a live process was removed"; fails=1; }
echo "shm_stale: $([ $fails = 0 ] && echo passed || echo FAILED)"
exit $fails
