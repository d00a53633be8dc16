#!/usr/bin/env bash
# Verdicts on small held-out sets: digits cut to 300 rows (60 test rows, one row 1.67
# points) and a 400-row teacher task (100 test rows), at the default 600 steps. Every
# must-fail codec is still flagged on every problem; a drop of a row or two is passed by the
# paired test, saying so; each verdict states what the rows resolve; and the small-tensor
# report says what a deployed job gets (here the whole gradient goes uncompressed), with one
# job that compresses some calls and not others trained and judged too.
# usage: converge_small.sh GCOMP_CONVERGE WORKDIR
set -uo pipefail
conv=$1 dir=$2
mkdir -p "$dir"
fail() { echo "converge_small: $*"; exit 1; }
probs=(--problem teacher/mlp --synth-n 400)
if "$conv" --problem digits/softmax --steps 1 --codec none --quiet --no-progress 2>/dev/null; then
  probs+=(--problem digits/softmax --problem digits/mlp --max-rows 300)
else
  echo "converge_small: digits data set not found (scripts/setup): synthetic problem only"
fi
"$conv" "${probs[@]}" --no-progress --codec none --codec bf16 --codec 'topk:ratio=0.01+ef' \
  --must-fail test_biased --must-fail 'topk:ratio=0.001' --json "$dir/small.json" \
  --junit "$dir/small.xml" --deployed-min-bytes 64k >"$dir/out1" 2>&1 \
  || { cat "$dir/out1"; fail "small sets: exit $?"; }
grep -q "pass topk:ratio=0.01+ef, by the paired test: .*chance alone does as much" "$dir/out1" \
  || { cat "$dir/out1"; fail "no pass by the paired test"; }
grep -q "resolution: 100 test rows (one row 1.00 points); McNemar" "$dir/out1" \
  || fail "no resolution line"

# a job that compresses the weights' call and not the bias's (one call per tensor, 64 B
# threshold): trained beside the raw run, its verdict in the deployed column
"$conv" --problem gmm/softmax --synth-dim 8 --synth-n 400 --per-layer --no-progress \
  --codec 'topk:ratio=0.01+ef' --deployed-min-bytes 64 --json "$dir/mixed.json" >"$dir/out2" 2>&1 \
  || { cat "$dir/out2"; fail "mixed deployed job: exit $?"; }
grep -q "compresses 1 of the 2 calls per step (2 calls of 40 to 320 B" "$dir/out2" \
  || { cat "$dir/out2"; fail "no mixed deployed line"; }
"$conv" --problem gmm/softmax --steps 2 --deployed-min-bytes 12q --codec none 2>"$dir/err3"; rc=$?
[ "$rc" -eq 2 ] && grep -q "deployed-min-bytes '12q' is not a byte count" "$dir/err3" \
  || { cat "$dir/err3"; fail "bad --deployed-min-bytes: exit $rc"; }
"$conv" --problem digits/softmax --max-rows 1 --steps 2 --codec none 2>"$dir/err4"; rc=$?
[ "$rc" -eq 2 ] || { cat "$dir/err4"; fail "--max-rows 1: exit $rc"; }

python3 - "$dir" <<'PY'
import json, sys, xml.etree.ElementTree as ET
d = sys.argv[1]
j = json.load(open(d + "/small.json"))
assert len(j["problems"]) in (1, 3), len(j["problems"])
by_paired = 0
for p in j["problems"]:
    rows = 60 if p["task"] == "digits" else 100
    for c in p["codecs"]:
        name = (p["task"], p["model"], c["run"]["spec"])
        if c["expected"] == "fail":   # every must-fail, every problem
            assert c["verdict"] == "fail", name
        else:
            assert c["verdict"] == "pass", (name, c["why"])
        pa, res = c["paired"], c["resolution"]
        assert pa["test_rows"] == rows and pa["seeds"] == 1 and pa["alpha"] == 0.05, (name, pa)
        assert abs(res["acc_row_points"] - 100 / rows) < 1e-6, (name, res)
        assert abs(res["acc_min_drop_points"] - 500 / rows) < 1e-6, (name, res)
        assert res["loss_rows"] == res["train_rows"] and res["loss_se_rel"] == 0, (name, res)
        assert "accuracy" in c["unresolved"], name   # 5 rows are more than any tolerance
        drop = p["baseline"]["final_test_acc"] - c["run"]["final_test_acc"]
        assert abs(pa["lost"] - pa["gained"] - round(drop * rows)) == 0, (name, pa, drop)
        by_paired += c["note"] != "" and c["verdict"] == "pass"
        dep = c["deployed"]   # these flat gradients are all under 64 KiB: fp32 in a job
        assert (dep["min_bytes"], dep["calls"], dep["compressed_calls"]) == (65536, 1, 0), dep
        assert dep["verdict"] == "fp32", dep
assert by_paired >= 1, "no verdict was decided by the paired test"
suite = ET.parse(d + "/small.xml").getroot().find("testsuite")
assert suite.get("failures") == "0", suite.attrib
assert any("passed by the paired test" in (t.findtext("system-out") or "")
           for t in suite.findall("testcase"))
m = json.load(open(d + "/mixed.json"))["problems"][0]["codecs"][0]["deployed"]
assert (m["calls"], m["compressed_calls"], m["smallest_bytes"], m["largest_bytes"]) == (2, 1, 40, 320), m
assert m["verdict"] in ("pass", "fail") and m["run"]["spec"] == "topk:ratio=0.01+ef", m
assert m["run"]["wire_bytes"] > 0 and m["paired"]["test_rows"] == 100, m
print("converge_small: must-fail flagged on every small problem, paired verdicts, resolution, deployed report")
PY
