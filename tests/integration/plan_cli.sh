#!/usr/bin/env bash
# gcomp-plan: the planner's choices on paper match what the library's own tests expect of
# gcomp_allreduce, efficiency never rises with more nodes at fixed compute, the forced
# ring's latency/bandwidth crossover (90% -> 60% from 512 to 1,024 ranks) comes out of alpha
# and beta alone, more busy ranks than cores are marked rather than estimated, a GCOMP_STATS
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

# the latency/bandwidth crossover from alpha and beta alone (default links: 10 us, 100 Gbit/s):
# 10 MiB a step, 5.7 ms of compute overlapped, 8 ranks per node. The forced ring (paced by
# its node-crossing hop: about 0.65 inter-node latencies a rank, reduce/cost.c) is
# latency-bound from 512 ranks and its efficiency falls from ~92% at 512 to ~60% at 1,024
# ranks; the planner's choice (halving/doubling: 2 log2 n latency steps) stays at 100%.
j=$("$plan" --json --bytes 10m --compute-ms 5.7 --overlap --nodes 16,32,64,128)
eff() {   # eff NODES planner|ring
  echo "$j" | grep "\"nodes\": $1," | if [ "$2" = ring ]; then sed -n 's/.*"ring": {[^}]*"efficiency": \([0-9.]*\)}.*/\1/p'
  else sed -n 's/.*"oversubscribed": false, "efficiency": \([0-9.]*\),.*/\1/p'; fi
}
awk -v a="$(eff 64 ring)" -v b="$(eff 128 ring)" 'BEGIN { exit !(a > 0.89 && a < 0.93 && b > 0.58 && b < 0.62) }' ||
  fail "ring's efficiency at 512 / 1024 ranks: $(eff 64 ring) / $(eff 128 ring), not ~0.91 / ~0.60"
awk -v a="$(eff 128 planner)" 'BEGIN { exit !(a > 0.99) }' || fail "the planner's efficiency at 1024 ranks: $(eff 128 planner)"
echo "$j" | grep -q '"ring": {"latency_bound_from_nodes": 64, "largest_drop": {"from_nodes": 64, "to_nodes": 128' ||
  fail "the ring's crossover is not at 64 nodes: $(echo "$j" | tail -1)"
echo "$j" | grep -q '"planner": {"latency_bound_from_nodes": null' || fail "the planner turned latency-bound: $(echo "$j" | tail -1)"
txt=$("$plan" --bytes 10m --compute-ms 5.7 --overlap --nodes 32,64,128)
echo "$txt" | grep -q "^# ring: latency-bound from 64 nodes (512 ranks)" &&
  echo "$txt" | grep -q "^# ring: efficiency falls most from 64 to 128 nodes (512 to 1024 ranks): 92.1% -> 59.6%" ||
  fail "text output does not name the crossover: $txt"
# an 8-byte call is all latency, a 1 GiB one nearly none; small calls are named as such
lat() { "$plan" --json "$@" | sed -n 's/.*"latency_frac": \([0-9.]*\), "oversubscribed".*/\1/p' | head -1; }
awk -v a="$(lat --bytes 8 --nodes 4)" -v b="$(lat --bytes 1g --nodes 4)" 'BEGIN { exit !(a > 0.95 && b < 0.05) }' ||
  fail "latency share of 8 B / 1 GiB: $(lat --bytes 8 --nodes 4) / $(lat --bytes 1g --nodes 4)"
"$plan" --nodes 8 | grep -q "^# on 8 nodes the planner's calls are latency-bound below [0-9]* B" ||
  fail "no crossover size: $("$plan" --nodes 8 | tail -2)"

# more busy ranks than cores: the times are marked as lower bounds, not printed as estimates
txt=$("$plan" --bytes 8 --nodes 1 --ranks-per-node 4 --cores-per-node 2 --compute-ms 1)
echo "$txt" | grep -q "^       1      4 .* >=" && echo "$txt" | grep -q "<=" &&
  echo "$txt" | grep -q "^# 4 busy ranks per node on 2 cores: .*lower bounds" ||
  fail "4 ranks on 2 cores are not marked: $txt"
"$plan" --json --bytes 8 --nodes 1 --ranks-per-node 4 --cores-per-node 2 | grep -q '"oversubscribed": true' ||
  fail "JSON does not say oversubscribed"
"$plan" --bytes 8 --nodes 1 --ranks-per-node 2 --cores-per-node 2 | grep -q "busy ranks" &&
  fail "2 ranks on 2 cores are called oversubscribed"

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
# a file that records its cores: a job of more ranks per node than that is marked
sed 's/"calls": 1,/"calls": 1, "cores": 2,/' "$stats" >"$stats.c"
"$plan" --from-stats "$stats.c" --nodes 2 --ranks-per-node 4 | grep -q "^# 4 busy ranks per node on 2 cores" ||
  fail "the stats file's cores are not used: $("$plan" --from-stats "$stats.c" --nodes 2 --ranks-per-node 4 | tail -1)"
rm -f "$stats.c"
echo '{"rank": 0}' >"$stats"
out=$("$plan" --from-stats "$stats" 2>&1); rc=$?
[ $rc = 1 ] && echo "$out" | grep -q "is not a GCOMP_STATS file" || fail "bad stats file: rc $rc: $out"

# bad arguments: exit 2, the token named
for args in "--bytes abc" "--nodes 1,x" "--links 1,2,3" "--ranks-per-node 0" "--ranks-per-node 8x" \
    "--codec-ratio 0.5" "--frobnicate 1" "--links nan,10,20,1" "--links 1,10,20,1junk" \
    "--compare bogus" "--cores-per-node 0" "--compute-ms 5x" "--bytes 0" "--bytes 8q" \
    "--codec-ratio 2" "--overlap"; do
  out=$("$plan" $args 2>&1); rc=$?
  tok=${args#* }; [ "$args" = "--frobnicate 1" ] && tok=--frobnicate
  [ "$args" = "--codec-ratio 0.5" ] || [ "$args" = "--codec-ratio 2" ] && tok=--codec-gbps
  [ "$args" = "--overlap" ] && tok=--overlap
  [ $rc = 2 ] && echo "$out" | grep -q -- "$tok" || fail "'$args': rc $rc, message: $out"
done
# ranks per node x nodes past int: refused (it printed negative rank counts)
out=$("$plan" --ranks-per-node 4096 --nodes 600000,1048576 2>&1); rc=$?
[ $rc = 2 ] && echo "$out" | grep -q "ranks: at most" || fail "4096 x 600000 ranks: rc $rc: $out"
echo "plan_cli: $([ $fails = 0 ] && echo passed || echo FAILED)"
exit $fails
