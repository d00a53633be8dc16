#!/usr/bin/env bash
# A rank dies (kill) or goes silent (stall) mid-transfer: every other rank must return an
# error within GCOMP_TIMEOUT_MS, and gcomp-run must say which rank died and how.
#   fabric_fail.sh GCOMP_RUN FABRIC_P2P kill|stall N_RANKS N_NODES
set -u
run=$1 prog=$2 mode=$3 n=$4 nodes=$5
victim=1
for v in $(compgen -e | grep '^GCOMP_'); do unset "$v"; done
export GCOMP_TIMEOUT_MS=3000
out=$(mktemp)
trap 'rm -f "$out"' EXIT
start=$(date +%s%N)
"$run" -n "$n" --nodes "$nodes" --netns off --grace 5000 --tag-output -- "$prog" "$mode" $victim >"$out" 2>&1
rc=$?
ms=$(( ($(date +%s%N) - start) / 1000000 ))
cat "$out"
fails=0
if [ "$mode" = kill ]; then
  [ $rc = 137 ] || { echo "FAIL: gcomp-run returned $rc, expected 137 (the victim's SIGKILL)"; fails=1; }
  grep -q "gcomp-run: rank $victim (pid [0-9]*, node [0-9]*) was killed by signal 9" "$out" ||
    { echo "FAIL: gcomp-run did not report that rank $victim was killed"; fails=1; }
else
  [ $rc = 3 ] || { echo "FAIL: gcomp-run returned $rc, expected 3 (a survivor's error exit)"; fails=1; }
fi
for r in $(seq 0 $((n - 1))); do
  [ $r = $victim ] && continue
  line=$(grep "^\[$r\] fabric_p2p: rank $r: error after" "$out")
  if [ -z "$line" ]; then
    echo "FAIL: rank $r reported no error"; fails=1; continue
  fi
  after=$(echo "$line" | sed -n 's/.*error after \([0-9]*\) ms.*/\1/p')
  # the error must come within the timeout (plus scheduling slack on 2 oversubscribed cores)
  if [ "$after" -gt $((GCOMP_TIMEOUT_MS + 3000)) ]; then
    echo "FAIL: rank $r took $after ms (GCOMP_TIMEOUT_MS=$GCOMP_TIMEOUT_MS)"; fails=1
  fi
  # the victim's successor receives from it: its error must name it. The predecessor sends
  # to it, and a send may complete into buffers without the victim (tcp;ofi_rxm sends chunks
  # eagerly), so its error names the victim or the rank it itself receives from.
  if [ $r = $(( (victim + 1) % n )) ]; then
    echo "$line" | grep -q "rank $victim" || { echo "FAIL: rank $r's error does not name rank $victim"; fails=1; }
  fi
  if [ $r = $(( (victim + n - 1) % n )) ]; then
    echo "$line" | grep -qE "rank ($victim|$(( (r + n - 1) % n )))\b" ||
      { echo "FAIL: rank $r's error names neither rank $victim nor its own predecessor"; fails=1; }
  fi
done
# the killed rank's shm segment (named "<pid>:<n>:<m>" by the shm provider) stays behind;
# the next job that opens an shm endpoint removes it
if [ "$mode" = kill ]; then
  vpid=$(sed -n "s/^gcomp-run: rank $victim (pid \([0-9]*\),.*/\1/p" "$out")
  if [ -n "$vpid" ] && ls /dev/shm/"$vpid":* >/dev/null 2>&1; then
    "$run" -n 2 -- "$prog" boot >/dev/null 2>&1 || { echo "FAIL: the next job failed"; fails=1; }
    if ls /dev/shm/"$vpid":* >/dev/null 2>&1; then
      echo "FAIL: stale shm segment of killed rank $victim (pid $vpid) not cleaned by the next job"; fails=1
    else
      echo "stale shm segment of pid $vpid removed by the next job"
    fi
  fi
fi
echo "fabric_fail $mode n=$n nodes=$nodes: $([ $fails = 0 ] && echo passed || echo FAILED) in $ms ms"
exit $fails
