#!/usr/bin/env bash
# A killed or a stalled rank under DDP with the gcomp hook: every other rank's training
# raises within GCOMP_TIMEOUT_MS (plus slack for 2 oversubscribed cores), with gcomp's
# message (its status name and the peer).
#   fail_check.sh GCOMP_RUN PYTHON kill|stall
set -u
run=$1 py=$2 mode=$3 n=2
here=$(cd "$(dirname "$0")" && pwd)
export GCOMP_TIMEOUT_MS=3000
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
grace=0; [ "$mode" = kill ] && grace=8000   # the survivors must report before they are stopped
"$run" -n $n --nodes 2 --grace $grace --tag-output -- "$py" "$here/fail_check.py" "$mode" \
  "$tmp/out" >"$tmp/log" 2>&1
rc=$?
tail -n 20 "$tmp/log"
fails=0
[ "$rc" != 0 ] || { echo "FAIL: gcomp-run returned 0"; fails=1; }
for r in $(seq 0 $((n - 2))); do
  f="$tmp/out.$r"
  if [ ! -s "$f" ]; then echo "FAIL: rank $r did not raise"; fails=1; continue; fi
  after=$(head -n1 "$f")
  echo "rank $r raised $after ms after the $mode: $(sed -n 2p "$f" | cut -c1-300)"
  [ "$after" -le $((GCOMP_TIMEOUT_MS + 3000)) ] ||
    { echo "FAIL: rank $r took $after ms (GCOMP_TIMEOUT_MS=$GCOMP_TIMEOUT_MS)"; fails=1; }
  grep -qE 'GCOMP_ERR_(PEER|TIMEOUT)' "$f" ||
    { echo "FAIL: rank $r's exception does not carry gcomp's error"; fails=1; }
done
echo "fail_check $mode: $([ $fails = 0 ] && echo passed || echo FAILED)"
exit $fails
