#!/usr/bin/env bash
# gcomp-lab: every kernel suite runs and prints its rows at a small size, p2p runs a pair of
# ranks (figures not checked), and malformed numbers are refused, naming them, instead of
# running something else.
#   lab.sh GCOMP_LAB
lab=$1
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

out=$("$lab" kernels --size 64k --reps 1 2>&1) || fail "gcomp-lab kernels: $out"
for s in memory cast lossless quant topk; do
  echo "$out" | grep -q "^$s " || fail "suite $s printed no row"
done
# p2p starts its two ranks through the build tree's gcomp-run (tools/, beside bench/)
out=$("$lab" p2p --provider shm --min 8 --max 8 --reps 1 --no-ref 2>&1) || fail "gcomp-lab p2p: $out"
echo "$out" | awk '$1 == 8 && $3 > 0 { ok = 1 } END { exit !ok }' || fail "gcomp-lab p2p printed no 8 B row: $out"
for args in "kernels --size 64x" "kernels --size -1" "kernels --size 0"; do   # 64x was 4 KiB
  # shellcheck disable=SC2086
  out=$("$lab" $args 2>&1) && fail "gcomp-lab $args ran"
  echo "$out" | grep -q "is not a size in" || fail "gcomp-lab $args: $out"
done
for args in "p2p --reps abc" "p2p --iters -1" "kernels --reps 0"; do
  # shellcheck disable=SC2086
  out=$("$lab" $args 2>&1) && fail "gcomp-lab $args ran"
  echo "$out" | grep -q "is not a number in" || fail "gcomp-lab $args: $out"
done

echo "lab: $([ $fails = 0 ] && echo passed || echo FAILED)"
exit $fails
