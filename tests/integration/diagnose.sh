#!/usr/bin/env bash
# gcomp-stats --json names each failure mode a real run was given on purpose, with its
# evidence, and a clean run gets no finding:
#   clean        4 ranks on 2 emulated nodes, 1 MiB calls after 20 ms of compute: none
#   straggler    4 ranks on one node, rank 2 computing twice as long: straggler, rank 2
#   placement    the clean job placed round-robin (gcomp-run --map-by node): placement
#   latency      8-byte calls back to back: latency_bound
# The text output gives the same findings in words.
#   diagnose.sh GCOMP_RUN DIAGNOSE_JOB GCOMP_STATS_TOOL
set -u
run=$1 job=$2 stats=$3 fails=0
for v in $(compgen -e | grep '^GCOMP_'); do unset "$v"; done
export GCOMP_TIMEOUT_MS=30000 GCOMP_SKEW_WINDOW=16
dir=$(mktemp -d)
[ -n "${KEEP:-}" ] || trap 'rm -rf "$dir"' EXIT; [ -n "${KEEP:-}" ] && echo "kept $dir"
fail() { echo "FAIL: $*"; fails=1; }
py=/usr/bin/python3
[ -x $py ] || py=python3

# job NAME GCOMP-RUN-ARGS -- JOB-ARGS: runs it, leaves its stats in $dir/NAME-*.json
job() {
  local name=$1; shift
  local args=()
  while [ "$1" != -- ]; do args+=("$1"); shift; done
  shift
  GCOMP_STATS="$dir/$name-%r.json" "$run" "${args[@]}" --netns off -- "$job" "$@" >"$dir/$name.log" 2>&1 ||
    { fail "$name: the job failed: $(tail -3 "$dir/$name.log")"; return 1; }
  "$stats" --json "$dir/$name"-*.json >"$dir/$name.out" 2>&1 || { fail "$name: gcomp-stats --json failed"; return 1; }
  "$stats" "$dir/$name"-*.json >"$dir/$name.txt" 2>&1 || { fail "$name: gcomp-stats failed"; return 1; }
}
# expect NAME PYTHON-CONDITION MESSAGE: the condition over d (the JSON) and f (kind -> finding)
expect() {
  $py - "$dir/$1.out" "$2" <<'PY' || fail "$1: $3: $(cat "$dir/$1.out" | tail -n +2 | grep -v '"rank": [0-9]*, "node"' | head -c 1500)"
import json, sys
d = json.load(open(sys.argv[1]))
f = {x["kind"]: x for x in d["findings"]}
sys.exit(0 if eval(sys.argv[2]) else 1)
PY
}

job clean -n 4 --nodes 2 -- --steps 32 --compute-ms 20
expect clean 'len(d["ranks"]) == 4 and [r["node"] for r in d["ranks"]] == [0, 0, 1, 1]' "ranks and nodes"
expect clean 'd["findings"] == []' "a clean run has findings"
grep -q "^# findings: none" "$dir/clean.txt" || fail "clean: text: $(tail -2 "$dir/clean.txt")"

job straggler -n 4 -- --steps 32 --compute-ms 20 --slow-rank 2
expect straggler '"straggler" in f and f["straggler"]["rank"] == 2 and f["straggler"]["node"] == 0' "no straggler named rank 2"
# rank 2 arrives ~20 ms late each call (its extra compute); the others wait that long
expect straggler '15 < f["straggler"]["evidence"]["late_mean_ms"] < 40 and f["straggler"]["cost_s"] > 0.3' "lateness not ~20 ms"
expect straggler 'set(f) == {"straggler"}' "findings besides the straggler"
grep -q "^# 1\. straggler: rank 2 (node 0) typically arrives [0-9.]* ms after the first rank" "$dir/straggler.txt" ||
  fail "straggler: text: $(grep '^# 1' "$dir/straggler.txt")"

job placement -n 4 --nodes 2 --map-by node -- --steps 16 --compute-ms 20
expect placement '[r["node"] for r in d["ranks"]] == [0, 1, 0, 1]' "round-robin nodes"
expect placement '"placement" in f and f["placement"]["evidence"]["neighbour_crossings"] == 4 and f["placement"]["evidence"]["needed"] == 2' "no placement finding"
expect placement 'set(f) == {"placement"}' "findings besides placement"
grep -q "^# 1\. placement: 4 of 4 neighbouring ranks" "$dir/placement.txt" || fail "placement: text: $(grep '^# 1' "$dir/placement.txt")"

job latency -n 2 -- --steps 2000 --bytes 8
expect latency '"latency_bound" in f and f["latency_bound"]["evidence"]["mean_call_bytes"] == 8 and f["latency_bound"]["evidence"]["latency_frac"] > 0.5 and f["latency_bound"]["evidence"]["crossover_bytes"] > 8' "no latency_bound finding"
grep -q "^# 1\. latency_bound: calls of 8 B on average" "$dir/latency.txt" || fail "latency: text: $(grep '^# 1' "$dir/latency.txt")"

echo "diagnose: $([ $fails = 0 ] && echo passed || echo FAILED)"
exit $fails
