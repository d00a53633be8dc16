#!/usr/bin/env bash
# gcomp-stats' rules on made-up GCOMP_STATS files, the cases a real run rarely lines up:
# a slow node among three (and none with two nodes, where a slow pair cannot be blamed on
# either end), one slow link between two good nodes, one long pause (late_arrival, and no
# straggler for it), a pause under the noise floor, files from before the robust figures,
# and the step split's fractions. diagnose.sh drives the same findings from real runs.
#   stats_rules.sh GCOMP_STATS_TOOL
set -u
stats=$1 fails=0
for v in $(compgen -e | grep '^GCOMP_'); do unset "$v"; done
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; fails=1; }
py=/usr/bin/python3
[ -x $py ] || py=python3

# mk FILE RANK SIZE NODE NODES [TOP] [SKEW] [PEERS]: one rank's file, in the library's layout
mk() {
  local top=${6:-} skew=${7:-'"late_typical_us": 20.0, "spread_typical_us": 40.0, "late_max_call": 7, '}
  cat >"$1" <<JSON
{"rank": $2, "size": $3, "node": $4, "nodes": $5, "calls": 100, "bytes": 104857600, "wire_bytes": 1000, "shm_bytes": 0, "total_s": 1.000000, "wait_s": 0.500000, "reduce_s": 0.100000, "encode_s": 0.000000, "decode_s": 0.000000, "nonfinite": 0, $top
 "model": {"intra_alpha_us": 1.000, "intra_GBps": 10.000, "inter_alpha_us": 20.000, "inter_GBps": 1.000, "reduce_GBps": 8.000, "shm_alpha_us": 0.000, "shm_GBps": 0.000},
 "skew": {"window": 16, "calls": 96, "late_mean_us": 25.0, "late_max_us": 900.0, "last": 30, "spread_mean_us": 50.0, "exchange_s": 0.000100, "worst_rank": 0, ${skew}"ranks_late_mean_us": [], "ranks_last": []},
 "peers": [${8:-}]}
JSON
}
# expect NAME PYTHON-CONDITION MESSAGE over d (gcomp-stats --json of $dir/NAME-*.json) and
# f (kind -> finding)
expect() {
  "$stats" --json "$dir/$1"-*.json >"$dir/$1.out" 2>&1 || { fail "$1: gcomp-stats failed: $(cat "$dir/$1.out")"; return; }
  $py - "$dir/$1.out" "$2" <<'PY' || fail "$1: $3: $(grep -A50 findings "$dir/$1.out" | head -c 1500)"
import json, sys
d = json.load(open(sys.argv[1]))
f = {}
for x in d["findings"]:
    f.setdefault(x["kind"], x)
sys.exit(0 if eval(sys.argv[2]) else 1)
PY
}
peer() { echo "{\"peer\": $1, \"bytes\": $2, \"busy_s\": $3}"; }
G=125000000   # bytes per second at 1 Gbit/s

# 1. three nodes, node 2 at a fifth of the rate: every pair with it is slow
mk "$dir/node3-0.json" 0 3 0 3 "" "" "$(peer 1 $((8 * G)) 8.0)"
mk "$dir/node3-1.json" 1 3 1 3 "" "" "$(peer 2 $((2 * G)) 10.0), $(peer 0 100 0.5)"
mk "$dir/node3-2.json" 2 3 2 3 "" "" "$(peer 0 $((2 * G)) 10.0)"
expect node3 'set(f) == {"slow_link"} and f["slow_link"]["node"] == 2 and "rank" not in f["slow_link"]' "no slow_link on node 2"
expect node3 'abs(f["slow_link"]["evidence"]["node_gbps"] - 0.2) < 1e-3 and abs(f["slow_link"]["evidence"]["median_node_gbps"] - 1.0) < 1e-3' "rates"
expect node3 'f["slow_link"]["evidence"]["pairs_gbps"] == {"0-2": 0.2, "1-2": 0.2}' "pairs"
"$stats" "$dir"/node3-*.json | grep -q "^# 1\. slow_link: node 2's link delivers at most 0.200 Gbit/s" ||
  fail "node3: text: $("$stats" "$dir"/node3-*.json | tail -2)"

# 2. two nodes: the slow pair is the only pair; neither end can be blamed
mk "$dir/two-0.json" 0 2 0 2 "" "" "$(peer 1 $((2 * G)) 10.0)"
mk "$dir/two-1.json" 1 2 1 2 "" "" "$(peer 0 $((8 * G)) 8.0)"
expect two 'd["findings"] == []' "findings with two nodes"

# 3. four nodes, only the link between nodes 2 and 3 slow: a pair, not a node
for r in 0 1 2 3; do
  nxt=$(( (r + 1) % 4 )); rate=$([ $r = 2 ] && echo 10.0 || echo 8.0); b=$([ $r = 2 ] && echo $((2 * G)) || echo $((8 * G)))
  mk "$dir/pair-$r.json" $r 4 $r 4 "" "" "$(peer $nxt $b $rate)"
done
expect pair 'set(f) == {"slow_link"} and f["slow_link"]["evidence"]["nodes"] == [2, 3] and "pair_gbps" in f["slow_link"]["evidence"]' "no slow pair 2-3"

# 4. one rank pauses 3 s once, at call 40: late_arrival, and no straggler for it (its mean is
# 30 ms, its typical lateness 20 us)
for r in 0 1 2 3; do
  skew='"late_typical_us": 20.0, "spread_typical_us": 40.0, "late_max_call": 7, '
  [ $r = 1 ] && skew='"late_typical_us": 25.0, "spread_typical_us": 40.0, "late_max_call": 40, '
  mk "$dir/once-$r.json" $r 4 0 1 "" "$skew"
done
sed -i 's/"late_mean_us": 25.0, "late_max_us": 900.0/"late_mean_us": 30000.0, "late_max_us": 3000000.0/' "$dir/once-1.json"
expect once 'set(f) == {"late_arrival"} and f["late_arrival"]["rank"] == 1 and f["late_arrival"]["evidence"]["call"] == 40' "no late_arrival at call 40"
expect once 'abs(f["late_arrival"]["evidence"]["others_waited_s"] - 3.0) < 0.01 and abs(f["late_arrival"]["cost_s"] - 3.0) < 0.01' "others' wait"
"$stats" "$dir"/once-*.json | grep -q "^# 1\. late_arrival: rank 1 (node 0) arrived 3.000 s late at call 40" ||
  fail "once: text: $("$stats" "$dir"/once-*.json | tail -1)"
# ... under 0.25 s it is the scheduler's noise on a loaded machine, not a finding
sed -i 's/"late_max_us": 3000000.0/"late_max_us": 200000.0/' "$dir/once-1.json"
expect once 'd["findings"] == []' "a 0.2 s pause is a finding"

# 5. files from before the robust figures: no late_arrival (no call to name), the straggler
# judged by the mean
for r in 0 1 2; do mk "$dir/old-$r.json" $r 3 0 1 "" " "; done
sed -i 's/"late_mean_us": 25.0/"late_mean_us": 9000.0/' "$dir/old-2.json"
expect old 'set(f) == {"straggler"} and f["straggler"]["rank"] == 2' "old files: straggler by the mean"
expect old 'all("late_typical_us" not in r for r in d["ranks"])' "typical lateness made up"

# 6. the step split: run 2 s, 1 s outside gcomp, 0.5 s waiting inside it
for r in 0 1; do mk "$dir/steps-$r.json" $r 2 0 1 '"run_s": 2.000000, "compute_s": 1.000000, "steps": 100, "cores": 2,'; done
expect steps 'all(abs(r["compute_frac"] - 0.5) < 1e-6 and abs(r["comm_frac"] - 0.25) < 1e-6 and abs(r["wait_frac"] - 0.25) < 1e-6 for r in d["ranks"])' "fractions"
expect steps 'd["findings"] == []' "findings in the steps case"
"$stats" "$dir"/steps-*.json | grep -q "|   2.000   50.0%   25.0%   25.0%" || fail "steps: text: $("$stats" "$dir"/steps-*.json)"
expect node3 'all(r["compute_frac"] is None for r in d["ranks"])' "fractions without a step split"

echo "stats_rules: $([ $fails = 0 ] && echo passed || echo FAILED)"
exit $fails
