#!/usr/bin/env bash
# gcomp-plan: the planner's choices on paper match what the library's own tests expect of
# gcomp_allreduce, efficiency never rises with more nodes at fixed compute, a GCOMP_STATS
# file's figures are used, and bad arguments are refused naming the token.
#   plan_cli.sh GCOMP_PLAN
set -u
plan=$1 fails=0
for v in $(compgen -e | grep '^GCOMP_'); do unset "$v"; done
fail() { echo "FAIL: $*"; fails=1; }
algo() { "$plan" --json "$@" | sed -n 's/.*"algo": "\([^"]*\)".*/\1/p' | head -1; }

[ "$(algo --bytes 8 --nodes 1 --ranks-per-node 4 --links 1,10,20,1)" = rd ] || fail "8 B on one node is not rd"
[ "$(algo --bytes 64m --nodes 1 --ranks-per-node 4 --links 1,10,20,1,0.5,12)" = shm ] ||
  fail "64 MiB on one node with shm figures is not shm"
[ "$(algo --bytes 64m --nodes 1 --ranks-per-node 4 --links 1,10,20,1)" != shm ] ||
  fail "shm chosen without shm figures"
[ "$(algo --bytes 64m --nodes 2 --ranks-per-node 2 --links 1,10,20,1)" = hier ] ||
  fail "64 MiB on two nodes behind a slow link is not hier"
a=$(algo --bytes 64m --nodes 2 --ranks-per-node 2 --links 1,10,20,0.125 --codec-ratio 0.01 --codec-gbps 5 --sparse)
[ "$a" = hier-sparse ] || [ "$a" = sparse ] || fail "a 1% top-k codec across a 1 Gbit/s link runs $a"
a=$(algo --bytes 64m --nodes 1 --ranks-per-node 4 --links 1,10,20,0.125,0.5,12 --codec-ratio 0.5 --codec-gbps 5)
[ "$a" = shm ] || fail "a bf16-like codec on one node runs $a, not the (faster) shm"

# efficiency at fixed compute: never higher with more nodes
effs=$("$plan" --json --bytes 100m --compute-ms 100 --nodes 1,2,4,8,16,32 | sed -n 's/.*"efficiency": \([0-9.]*\).*/\1/p')
[ "$(echo "$effs" | wc -l)" = 6 ] || fail "expected 6 efficiency figures, got: $effs"
echo "$effs" | awk 'NR > 1 && $1 > prev + 1e-9 { bad = 1 } { prev = $1 } END { exit bad }' ||
  fail "efficiency rises with nodes: $(echo $effs)"

# figures from a GCOMP_STATS file of a two-node run
stats=$(mktemp)
trap 'rm -f "$stats"' EXIT
cat >"$stats" <<'JSON'
{"rank": 0, "size": 4, "node": 0, "nodes": 2, "calls": 1,
 "model": {"intra_alpha_us": 2.000, "intra_GBps": 8.000, "inter_alpha_us": 40.000, "inter_GBps": 0.125, "reduce_GBps": 6.000, "shm_alpha_us": 0.000, "shm_GBps": 0.000}}
JSON
head=$("$plan" --from-stats "$stats" --nodes 2 --ranks-per-node 2 | head -1)
echo "$head" | grep -q "intra 2.00 us 8.00 GB/s, inter 40.00 us 0.12 GB/s, reduce 6.00 GB/s" ||
  fail "stats figures not used: $head"
echo '{"rank": 0}' >"$stats"
out=$("$plan" --from-stats "$stats" 2>&1); rc=$?
[ $rc = 1 ] && echo "$out" | grep -q "is not a GCOMP_STATS file" || fail "bad stats file: rc $rc: $out"

# bad arguments: exit 2, the token named
for args in "--bytes abc" "--nodes 1,x" "--links 1,2,3" "--ranks-per-node 0" "--ranks-per-node 8x" \
    "--codec-ratio 0.5" "--frobnicate 1" "--links nan,10,20,1" "--links 1,10,20,1junk"; do
  out=$("$plan" $args 2>&1); rc=$?
  tok=${args#* }; [ "$args" = "--frobnicate 1" ] && tok=--frobnicate
  [ "$args" = "--codec-ratio 0.5" ] && tok=--codec-gbps
  [ $rc = 2 ] && echo "$out" | grep -q -- "$tok" || fail "'$args': rc $rc, message: $out"
done
# ranks per node x nodes past int: refused (it printed negative rank counts)
out=$("$plan" --ranks-per-node 4096 --nodes 600000,1048576 2>&1); rc=$?
[ $rc = 2 ] && echo "$out" | grep -q "ranks: at most" || fail "4096 x 600000 ranks: rc $rc: $out"
echo "plan_cli: $([ $fails = 0 ] && echo passed || echo FAILED)"
exit $fails
