#!/usr/bin/env bash
# gcomp-stats --json names each failure mode a real run was given on purpose, with its
# evidence, and a clean run gets no finding:
#   clean        4 ranks on 2 emulated nodes, 8 MiB calls after 20 ms of compute: none; the
#                step split mostly compute on every rank, per marked step in the trace
#   straggler    4 ranks on one node, rank 2 computing twice as long: straggler, rank 2; its
#                step split more compute, the others' more wait
#   early        the straggler job's first 30 steps only, rank 2 computing 1.5x as long, fewer
#                calls than one GCOMP_SKEW_WINDOW (no lateness figures): straggler, rank 2,
#                from the step split; early-clean, the same without the slow rank: none
#   late         4 ranks on 2 nodes, rank 1 sleeping 3 s once before step 20: late_arrival
#                at call 21, the others waiting ~3 s there; no straggler for it
#   placement    the clean job placed round-robin (gcomp-run --map-by node): placement
#   latency      8-byte calls back to back: latency_bound
#   slow-node    3 ranks on 3 emulated nodes in network namespaces, links at 500 Mbit/s and
#                node 2's at a fifth of that (--node-rate): slow_link naming node 2, from
#                the kernel's figures of the job's TCP connections; with every link at
#                500 Mbit/s (clean3) no finding (needs root and network namespaces)
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
  GCOMP_STATS="$dir/$name-%r.json" GCOMP_TRACE="$dir/trace-$name-%r.json" "$run" --netns off "${args[@]}" -- "$job" "$@" >"$dir/$name.log" 2>&1 ||
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

# Calls of 8 MiB where a job must show no latency finding: latency_bound is the cost model's
# verdict from the figures each communicator measures at start, and over loopback tcp 1 MiB
# calls sat at its threshold (latency 51-53% of the predicted time), so a clean run drew it
# now and then (CI at 34688ea). At 8 MiB latency is ~12% of the call; the latency job below
# checks the rule itself with 8-byte calls.
big="--bytes 8388608"
job clean -n 4 --nodes 2 -- --steps 32 --compute-ms 20 --mark-steps 1 $big
expect clean 'len(d["ranks"]) == 4 and [r["node"] for r in d["ranks"]] == [0, 0, 1, 1]' "ranks and nodes"
expect clean 'd["findings"] == []' "a clean run has findings"
# 31 gaps of at least 20 ms of compute between the 32 calls (a loaded machine oversleeps), and
# the split whole
expect clean 'all(0.6 < r["compute_s"] < 1.6 and abs(r["compute_frac"] + r["comm_frac"] + r["wait_frac"] - 1) < 0.01 for r in d["ranks"])' "step split"
$py - "$dir"/trace-clean-*.json <<'PY' || fail "clean: the trace's marked steps"
import json, statistics, sys
for path in sys.argv[1:]:
    ev = json.load(open(path))["traceEvents"]
    steps = [e for e in ev if e.get("cat") == "gcomp.step"]
    assert len(steps) == 32 and all(e["name"].startswith("step ") for e in steps), len(steps)
    # a step runs from one mark to the next: its compute (the next step's 20 ms) outside gcomp
    med = statistics.median(e["args"]["compute_us"] for e in steps[1:])
    assert 15e3 < med < 80e3, med
    assert all(e["args"]["calls"] == 1 for e in steps)
PY
grep -q "^# findings: none" "$dir/clean.txt" || fail "clean: text: $(tail -2 "$dir/clean.txt")"

job straggler -n 4 -- --steps 32 --compute-ms 20 --slow-rank 2 $big
expect straggler '"straggler" in f and f["straggler"]["rank"] == 2 and f["straggler"]["node"] == 0' "no straggler named rank 2"
# rank 2 arrives ~20 ms late each call (its extra compute); the others wait that long
expect straggler '15 < f["straggler"]["evidence"]["late_mean_ms"] < 40 and f["straggler"]["cost_s"] > 0.3' "lateness not ~20 ms"
expect straggler 'set(f) == {"straggler"}' "findings besides the straggler"
# rank 2 computes 40 ms a step, the others 20 ms and then wait ~20 ms for it inside gcomp
# (32 steps: 0.64 s more compute, and as much more wait for the others)
expect straggler 'all(r["compute_s"] + 0.3 < d["ranks"][2]["compute_s"] and r["split_wait_s"] > d["ranks"][2]["split_wait_s"] + 0.3 for r in d["ranks"] if r["rank"] != 2)' "step split of the straggler"
grep -q "^# 1\. straggler: rank 2 (node 0) typically arrives [0-9.]* ms after the first rank" "$dir/straggler.txt" ||
  fail "straggler: text: $(grep '^# 1' "$dir/straggler.txt")"

# a profiling run shorter than one skew window: the step split alone names the rank
GCOMP_SKEW_WINDOW=256 job early -n 4 -- --steps 30 --compute-ms 60 --slow-rank 2 --slow-factor 1.5 $big
expect early 'set(f) == {"straggler"} and f["straggler"]["rank"] == 2 and f["straggler"]["evidence"]["from"] == "step_split"' "no straggler named rank 2 from the step split"
expect early '1.3 < f["straggler"]["evidence"]["compute_ratio"] < 2.5 and f["straggler"]["cost_s"] > 0.1' "compute ratio not ~1.5"
grep -q "^# 1\. straggler: rank 2 (node 0) computes [0-9.]* s outside gcomp, [0-9.]*x the others' median" "$dir/early.txt" ||
  fail "early: text: $(grep '^# 1' "$dir/early.txt")"
GCOMP_SKEW_WINDOW=256 job early-clean -n 4 -- --steps 30 --compute-ms 60 $big
expect early-clean 'd["findings"] == []' "a clean short run has findings"

job late -n 4 --nodes 2 -- --steps 40 --compute-ms 10 --sleep-once 1:20:3 $big
expect late 'set(f) == {"late_arrival"} and f["late_arrival"]["rank"] == 1 and f["late_arrival"]["node"] == 0 and f["late_arrival"]["evidence"]["call"] == 21' "no late_arrival of rank 1 at call 21"
expect late '2.5 < f["late_arrival"]["evidence"]["others_waited_s"] < 3.5 and 2.8 < f["late_arrival"]["evidence"]["late_s"] < 3.5' "the others' wait"
grep -q "^# 1\. late_arrival: rank 1 (node 0) arrived [23]\.[0-9]* s late at call 21" "$dir/late.txt" || fail "late: text: $(grep '^# 1' "$dir/late.txt")"

job placement -n 4 --nodes 2 --map-by node -- --steps 16 --compute-ms 20 $big
expect placement '[r["node"] for r in d["ranks"]] == [0, 1, 0, 1]' "round-robin nodes"
expect placement '"placement" in f and f["placement"]["evidence"]["neighbour_crossings"] == 4 and f["placement"]["evidence"]["needed"] == 2' "no placement finding"
expect placement 'set(f) == {"placement"}' "findings besides placement"
grep -q "^# 1\. placement: 4 of 4 neighbouring ranks" "$dir/placement.txt" || fail "placement: text: $(grep '^# 1' "$dir/placement.txt")"

job latency -n 2 -- --steps 2000 --bytes 8
expect latency '"latency_bound" in f and f["latency_bound"]["evidence"]["mean_call_bytes"] == 8 and f["latency_bound"]["evidence"]["latency_frac"] > 0.5 and f["latency_bound"]["evidence"]["crossover_bytes"] > 8' "no latency_bound finding"
grep -q "^# 1\. latency_bound: calls of 8 B on average" "$dir/latency.txt" || fail "latency: text: $(grep '^# 1' "$dir/latency.txt")"

if [ "$(id -u)" = 0 ] && ip netns add gcomp-probe-$$ 2>/dev/null; then
  ip netns del gcomp-probe-$$
  job slow-node -n 3 --nodes 3 --inter-node-rate 500mbit --node-rate 2=100mbit --netns on -- --steps 16 --compute-ms 5
  expect slow-node 'set(f) == {"slow_link"} and f["slow_link"]["node"] == 2 and f["slow_link"]["evidence"]["measured_by"] == "tcp_info"' "no slow_link naming node 2"
  # 100 Mbit/s and the tbf's 256 KiB bursts: measured 0.092-0.115 Gbit/s, ratio 0.16-0.32
  expect slow-node '0.1 < f["slow_link"]["evidence"]["ratio"] < 0.45 and 0.06 < f["slow_link"]["evidence"]["node_gbps"] < 0.13' "node 2's rate not ~100 Mbit/s against ~500"
  # per peer: each rank's connections, their peers found by the other end's file; every
  # connection of rank 2 (node 2) carrying the calls' data (16 MiB or more; the others carry
  # creation's few MB in bursts) at ~100 Mbit/s, every other one well above
  expect slow-node 'all(l["peer"] in (0, 1, 2) and l["peer"] != r["rank"] for r in d["ranks"] for l in r["links"]) and len([l for r in d["ranks"] for l in r["links"] if l["bytes"] >= 1 << 20]) >= 3' "links without peers"
  expect slow-node 'all((l["gbps"] < 0.13) == (2 in (r["rank"], l["peer"])) and (l["gbps"] > 0.25 or 2 in (r["rank"], l["peer"])) for r in d["ranks"] for l in r["links"] if l["bytes"] >= 16 << 20)' "per-peer rates"
  grep -q "^# 1\. slow_link: node 2's link delivers at most 0\.[01][0-9]* Gbit/s" "$dir/slow-node.txt" || fail "slow-node: text: $(grep '^# 1' "$dir/slow-node.txt")"
  [ $fails = 0 ] || { echo "slow-node: the ranks' connections:"; grep -o '"rank": [0-9]*, "node": [0-9]*\|"links": \[[^]]*\]' "$dir/slow-node.out"; }
  job clean3 -n 3 --nodes 3 --inter-node-rate 500mbit --netns on -- --steps 16 --compute-ms 5
  expect clean3 'd["findings"] == []' "findings on three equal nodes"
else
  echo "SKIP: slow-node: network namespaces need root and a kernel that allows them"
fi

echo "diagnose: $([ $fails = 0 ] && echo passed || echo FAILED)"
exit $fails
