#!/usr/bin/env bash
# gcomp's allreduce under smpirun at 64 simulated ranks (8 nodes of 8): ring, rhd, hier and
# the planner's choice each produce exactly the sum on every rank (gcomp-sim --check: every
# element checked by every rank), at a size that splits unevenly; gcomp-sim's JSON carries
# the fields its docs promise; a lossy codec makes the check fail (so it can); --shared,
# --iters 0 and --overlap at 4 ranks; bad arguments are refused.
#   sim_allreduce.sh GCOMP_SIM
set -u
sim=$1 fails=0
for v in $(compgen -e | grep '^GCOMP_'); do unset "$v"; done
fail() { echo "FAIL: $*"; fails=1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

for algo in ring rhd hier auto; do
  out=$("$sim" --json --check --bytes 100004 --ranks-per-node 8 --nodes 8 --iters 2 \
        --algo "$algo" --compute-ms 1 2>"$work/err")
  rc=$?
  [ $rc = 0 ] || { fail "$algo: gcomp-sim exited $rc: $(tail -5 "$work/err")"; continue; }
  echo "$out"
  for key in ranks sim_s plan_s busbw_gbps efficiency mem_per_rank_bytes create_s first_call_s; do
    echo "$out" | grep -q "\"$key\": [0-9.e+-]" || fail "$algo: no number for $key in: $out"
  done
  echo "$out" | grep -q '"ranks": 64,' || fail "$algo: not 64 ranks: $out"
  [ "$algo" = auto ] || echo "$out" | grep -q "\"algo\": \"$algo\"" ||
    fail "$algo: another algorithm ran: $out"
done

# the check can fail: top-k keeps 1% of each sum, never exactly the sum
GCOMP_CODEC=topk:ratio=0.01 GCOMP_CODEC_MIN_BYTES=0 "$sim" --check --bytes 100004 \
  --ranks-per-node 4 --nodes 2 --algo sparse >"$work/out" 2>&1 &&
  fail "a top-k sum passed the exact check: $(tail -3 "$work/out")"
grep -q "is wrong" "$work/out" || fail "no rank named a wrong element: $(tail -5 "$work/out")"

# --shared --iters 0 --overlap: one call over shared buffers; a call hidden behind a long
# compute is 100% efficient with --overlap and less without; --check needs own buffers
out=$("$sim" --json --shared --iters 0 --overlap --compute-ms 50 --bytes 1m --ranks-per-node 2 \
      --nodes 2 --algo ring 2>"$work/err") || fail "--shared --iters 0: $(tail -5 "$work/err")"
echo "$out"
echo "$out" | grep -q '"efficiency": 1,' || fail "--overlap: a 50 ms step not 100% efficient: $out"
echo "$out" | grep -q '"overlap": true' || fail "--overlap: not in the JSON: $out"
out=$("$sim" --json --iters 0 --compute-ms 50 --bytes 1m --ranks-per-node 2 --nodes 2 \
      --algo ring 2>"$work/err") || fail "--iters 0: $(tail -5 "$work/err")"
echo "$out" | grep -q '"efficiency": 0\.9' || fail "no overlap: not T / (T + call): $out"
"$sim" --shared --check --nodes 2 >/dev/null 2>"$work/err" && fail "--shared --check accepted"
grep -q "shared" "$work/err" || fail "--shared --check: the error does not say why: $(cat "$work/err")"

# bad arguments: refused, naming the token, before any simulation
"$sim" --algo nosuch --nodes 2 >/dev/null 2>"$work/err" && fail "--algo nosuch accepted"
grep -q "nosuch" "$work/err" || fail "--algo nosuch: the error does not name it: $(cat "$work/err")"
"$sim" --bytes 3 --nodes 2 >/dev/null 2>"$work/err" && fail "--bytes 3 (not whole floats) accepted"
"$sim" --links 1,2,3 --nodes 2 >/dev/null 2>"$work/err" && fail "--links 1,2,3 accepted"
exit $fails
