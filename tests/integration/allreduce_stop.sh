#!/usr/bin/env bash
# A rank SIGSTOPs itself during a run of allreduces (alive, but silent: no liveness check can
# call it dead): every other rank must return an error within GCOMP_TIMEOUT_MS plus slack
# that names it (tests/integration/blame.sh). Then the test SIGCONTs it: its own next
# call must fail too (its peers have left) within the same bound, and the job must end.
#   allreduce_stop.sh GCOMP_RUN ALLREDUCE_CHECK [NODES [COLL]]
# NODES=1 puts every rank on one node (libfabric shm, the node's segment for small calls);
# NODES=2 puts two ranks on each of two emulated nodes (tcp;ofi_rxm between them).
# Slack: 3000 ms over the timeout, for 2 oversubscribed cores (as allreduce_fail.sh) and
# the failure exchange (250 ms a rank, more for a rank that fails after another exits).
# The bound holds on the ranks' clocks (from their failing call) and on the script's (from
# the victim's "stopping" to each survivor's error and exit lines: blame.sh arrival_check).
set -u
run=$1 prog=$2 nodes=${3:-2} n=4 victim=2
# COLL (collectives_check): the collective the job runs; the check names its lines after itself
coll=${4:-} name=$(basename "$prog")
for v in $(compgen -e | grep '^GCOMP_'); do unset "$v"; done
export GCOMP_TIMEOUT_MS=3000
slack=3000
spread=800   # ms between the first survivor's error and the last's
. "$(dirname "$0")/blame.sh"
stamped=$(mktemp) out=$(mktemp)
trap 'rm -f "$stamped" "$out"' EXIT
# the job's lines, stamped as they come (the job runs in the background: its output goes
# through a descriptor of this shell, closed once it ended, so that stamp ends too)
exec {to_stamp}> >(stamp >"$stamped")
stamper=$!
# a long grace: gcomp-run must not SIGTERM the stopped rank before the test continues it
"$run" -n $n --nodes $nodes --netns off --grace 60000 --tag-output -- "$prog" stop $victim $coll \
  >&$to_stamp 2>&1 {to_stamp}>&- &
job=$!
fails=0
deadline=$(( $(date +%s) + 60 ))
survivors() { grep -c "^[0-9]* \[[0-9]*\] $name: rank [0-9]*: error after" "$stamped"; }
# wait for the victim to stop and every other rank to report its error
until [ "$(survivors)" -ge $((n - 1)) ] || [ "$(date +%s)" -ge $deadline ]; do sleep 0.2; done
vpid=$(sed -n "s/^[0-9]* \[$victim\] $name: rank $victim: stopping (pid \([0-9]*\)).*/\1/p" "$stamped")
if [ -z "$vpid" ]; then
  echo "FAIL: rank $victim never stopped"; fails=1
else
  state=$(ps -o stat= -p "$vpid" 2>/dev/null)
  case "$state" in T*) ;; *) echo "FAIL: rank $victim (pid $vpid) is not stopped: '$state'"; fails=1 ;; esac
  kill -CONT "$vpid" 2>/dev/null
fi
# nothing may hang once the victim runs again
while kill -0 $job 2>/dev/null && [ "$(date +%s)" -lt $((deadline + 30)) ]; do sleep 0.2; done
if kill -0 $job 2>/dev/null; then
  echo "FAIL: the job still runs 30 s after rank $victim was continued: a hang"; fails=1
  pkill -KILL -P $job 2>/dev/null; kill -KILL $job 2>/dev/null
fi
wait $job
rc=$?
exec {to_stamp}>&-
for _ in $(seq 100); do kill -0 "$stamper" 2>/dev/null || break; sleep 0.05; done
unstamp "$stamped" >"$out"
cat "$out"
[ $rc = 3 ] || { echo "FAIL: gcomp-run returned $rc, expected 3 (a rank's error exit)"; fails=1; }
for r in $(seq 0 $((n - 1))); do
  [ $r = $victim ] && continue
  line=$(grep "^\[$r\] $name: rank $r: error after" "$out")
  if [ -z "$line" ]; then echo "FAIL: rank $r reported no error"; fails=1; continue; fi
  after=$(echo "$line" | sed -n 's/.*error after \([0-9]*\) ms.*/\1/p')
  [ "$after" -le $((GCOMP_TIMEOUT_MS + slack)) ] ||
    { echo "FAIL: rank $r took $after ms (GCOMP_TIMEOUT_MS=$GCOMP_TIMEOUT_MS)"; fails=1; }
  # a stopped rank is alive: its partners time out on it (a rank stuck behind one of them
  # may instead see it exit first)
  echo "$line" | grep -qE "GCOMP_ERR_(TIMEOUT|PEER)" ||
    { echo "FAIL: rank $r's error is neither a timeout nor a peer's failure"; fails=1; }
done
# every survivor's error names the victim, also the one stuck behind another survivor
# (over 2 nodes hier's ring neighbour waits on the victim's node-mate)
blame_check "$out" $n $victim "error after" || fails=1
arrival_check "$stamped" $n $victim "\[$victim\] $name: rank $victim: stopping" \
  $((GCOMP_TIMEOUT_MS + slack)) "$name" || fails=1
# the first survivor to fail tells the others (reduce/abort.c): none waits for another
# survivor's exit (over 1 s: its destroy) or its own timeout (3 s)
spread_check "$stamped" $n $victim $spread "$name" || fails=1
# a failed communicator is destroyed within 1 s (gcomp.h), on 2 oversubscribed cores
destroy_check "$out" 1000 "$name" || fails=1
rline=$(grep "^\[$victim\] $name: rank $victim: resumed: error after" "$out")
if [ -z "$rline" ]; then
  echo "FAIL: rank $victim reported no error after it was continued"; fails=1
else
  after=$(echo "$rline" | sed -n 's/.*error after \([0-9]*\) ms.*/\1/p')
  [ "$after" -le $((GCOMP_TIMEOUT_MS + slack)) ] ||
    { echo "FAIL: continued rank $victim took $after ms"; fails=1; }
fi
echo "allreduce_stop nodes=$nodes: $([ $fails = 0 ] && echo passed || echo FAILED)"
exit $fails
