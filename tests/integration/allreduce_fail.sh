#!/usr/bin/env bash
# A rank SIGKILLs itself during a run of allreduces: every other rank must return an error
# within GCOMP_TIMEOUT_MS (plus slack for 2 oversubscribed cores) that names it (blame.sh),
# and gcomp-run must name it. The bound holds on the ranks' clocks (from their failing
# call) and on the script's (from gcomp-run's report of the death to each survivor's error
# and exit lines: blame.sh arrival_check).
#   allreduce_fail.sh GCOMP_RUN ALLREDUCE_CHECK [NODES [COLL]]
# NODES=1 puts every rank on one node, where the calls go through the shared-memory segment.
set -u
run=$1 prog=$2 nodes=${3:-2} n=4 victim=2
# COLL (collectives_check): the collective the job runs; the check names its lines after itself
coll=${4:-} name=$(basename "$prog")
for v in $(compgen -e | grep '^GCOMP_'); do unset "$v"; done
export GCOMP_TIMEOUT_MS=3000
slack=3000
spread=800   # ms between the first survivor's error and the last's
. "$(dirname "$0")/blame.sh"
out=$(mktemp) stamped=$(mktemp)
trap 'rm -f "$out" "$stamped"' EXIT
# the grace (8 s) exceeds the bound: a survivor that hangs is over it before gcomp-run ends it
"$run" -n $n --nodes $nodes --netns off --grace 8000 --tag-output -- "$prog" kill $victim $coll 2>&1 |
  stamp >"$stamped"
rc=${PIPESTATUS[0]}
unstamp "$stamped" >"$out"
cat "$out"
fails=0
grep -q "gcomp-run: rank $victim (pid [0-9]*, node [0-9]*) was killed by signal 9" "$out" ||
  { echo "FAIL: gcomp-run did not report rank $victim's death"; fails=1; }
[ $rc = 137 ] || { echo "FAIL: gcomp-run returned $rc, expected 137"; fails=1; }
for r in $(seq 0 $((n - 1))); do
  [ $r = $victim ] && continue
  after=$(sed -n "s/^\[$r\] $name: rank $r: error after \([0-9]*\) ms.*/\1/p" "$out")
  if [ -z "$after" ]; then echo "FAIL: rank $r reported no error"; fails=1; continue; fi
  [ "$after" -le $((GCOMP_TIMEOUT_MS + slack)) ] ||
    { echo "FAIL: rank $r took $after ms (GCOMP_TIMEOUT_MS=$GCOMP_TIMEOUT_MS)"; fails=1; }
done
blame_check "$out" $n $victim "error after" || fails=1
arrival_check "$stamped" $n $victim "gcomp-run: rank $victim \(pid [0-9]+, node [0-9]+\) was killed" \
  $((GCOMP_TIMEOUT_MS + slack)) "$name" || fails=1
# the first survivor to fail tells the others (reduce/abort.c): none waits for another
# survivor's exit (over 1 s: its destroy) or its own timeout (3 s)
spread_check "$stamped" $n $victim $spread "$name" || fails=1
# a failed communicator is destroyed within 1 s (gcomp.h), on 2 oversubscribed cores
destroy_check "$out" 1000 "$name" || fails=1
echo "allreduce_fail: $([ $fails = 0 ] && echo passed || echo FAILED)"
exit $fails
