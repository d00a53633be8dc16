#!/usr/bin/env bash
# gcomp-converge run and compare as CI uses them, on a stand-in training program (a shell
# script that logs curves shaped by GCOMP_CODEC and GCOMP_SEED): exit status 0 / 1 / 2,
# reports that parse, the same verdicts from run and from compare on the same logs, and a
# clear error, never a verdict, for a command that fails, a log that is missing or
# malformed, and logs of different steps. usage: converge_run_cli.sh GCOMP_CONVERGE WORKDIR
set -uo pipefail
conv=$1 dir=$2
rm -rf "$dir" && mkdir -p "$dir"
fail() { echo "converge_run_cli: $*"; exit 1; }

# The stand-in: loss 2/(1 + step/10), stretched by a codec's factor; accuracy in percent on
# 400 rows. MODE (its first argument) spoils one run: the codec named in BAD.
cat >"$dir/train.sh" <<'EOF'
#!/usr/bin/env bash
mode=${1:-ok} bad=${2:-}
f=1.0
case "$GCOMP_CODEC" in
  bf16) f=1.002 ;; fp16) f=1.003 ;; topk*+ef*) f=1.02 ;; topk*) f=1.6 ;; quant*) f=1.25 ;;
esac
seed=${GCOMP_SEED:-0}
[ "$mode" = noseed ] && seed=0
if [ "$GCOMP_CODEC" = "$bad" ]; then
  case "$mode" in
    exit3) echo "epoch 1"; echo "RuntimeError: out of memory" >&2; exit 3 ;;
    nolog) exit 0 ;;
    garbage) printf '{"step": 0, "loss": 2}\n{"step": 10, "loss": 1}\n{"step": 20 "loss": 1}\n' \
               >>"$GCOMP_METRICS"; exit 0 ;;
    short) last=30 ;;
    other) step=15 ;;
  esac
fi
for st in 0 10 20 30 40 50; do
  [ -n "${last:-}" ] && [ "$st" -gt "$last" ] && break
  [ -n "${step:-}" ] && [ "$st" = 20 ] && st=$step
  awk -v st="$st" -v f="$f" -v s="$seed" 'BEGIN {
    g = st > 0 ? f : 1
    printf "{\"step\": %d, \"loss\": %.9f, \"accuracy\": %.6f, \"test_rows\": 400, \"lr\": 0.1}\n",
           st, 2.0 / (1 + st / 10.0) * g * (1 + 0.003 * s * (st > 0)), 90 - (g - 1) * 40 }' \
    >>"$GCOMP_METRICS"
done
EOF
chmod +x "$dir/train.sh"
t="$dir/train.sh"
k=0   # runs that fail keep their logs: in --dir "$dir/kN", not in the temporary directory

# 0: codecs within tolerance, a must-fail flagged; the reports written and parsed
"$conv" run --codec bf16 --codec 'topk:ratio=0.01+ef' --must-fail 'topk:ratio=0.001' \
  --dir "$dir/logs" --json "$dir/r.json" --junit "$dir/r.xml" --plot "$dir/r.svg" -- "$t" \
  >"$dir/out1" 2>&1 || { cat "$dir/out1"; fail "passing run: exit $?"; }
grep -q "topk:ratio=0.001 .*flagged" "$dir/out1" || { cat "$dir/out1"; fail "no flagged row"; }
grep -q "^gcomp-converge: PASS (3 codecs" "$dir/out1" || fail "no PASS line"
grep -q "runs of the command took" "$dir/out1" || fail "no timing line"
for f in baseline codec-1 codec-2 codec-3; do
  [ -s "$dir/logs/$f.jsonl" ] || fail "--dir keeps no $f.jsonl"
done
if command -v python3 >/dev/null; then
  python3 - "$dir" <<'EOF' || fail "reports do not parse or say otherwise"
import json, sys, xml.etree.ElementTree as ET
d = sys.argv[1]
r = json.load(open(d + "/r.json"))
c = r["problems"][0]["codecs"]
assert [x["verdict"] for x in c] == ["pass", "pass", "fail"], c
assert [x["expected"] for x in c] == ["pass", "pass", "fail"]
assert c[0]["run"]["logged"] and len(c[0]["run"]["curve"]["step"]) == 6
assert r["config"]["command"].endswith("train.sh")
suite = ET.parse(d + "/r.xml").getroot().find("testsuite")
assert suite.get("tests") == "3" and suite.get("failures") == "0", suite.attrib
ET.parse(d + "/r.svg")
EOF
fi

# compare on the same logs: the same verdicts and exit status
"$conv" compare --json "$dir/c.json" "$dir/logs/baseline.jsonl" bf16="$dir/logs/codec-1.jsonl" \
  'topk:ratio=0.01+ef'="$dir/logs/codec-2.jsonl" \
  --must-fail 'topk:ratio=0.001'="$dir/logs/codec-3.jsonl" >"$dir/out2" 2>&1 \
  || { cat "$dir/out2"; fail "compare: exit $?"; }
if command -v python3 >/dev/null; then
  python3 - "$dir" <<'EOF' || fail "compare's verdicts differ from run's"
import json, sys
d = sys.argv[1]
a = json.load(open(d + "/r.json"))["problems"][0]["codecs"]
b = json.load(open(d + "/c.json"))["problems"][0]["codecs"]
key = lambda c: (c["run"]["spec"], c["verdict"], c["why"], c["expected"])
assert sorted(map(key, a)) == sorted(map(key, b)), (a, b)
EOF
fi

# 1: a codec outside its tolerance, named with metric and margin; a must-fail that passes
"$conv" run --quiet --codec bf16 --codec 'quant:bits=4,bucket=128' -- "$t" 2>"$dir/err3"; rc=$?
[ "$rc" -eq 1 ] || { cat "$dir/err3"; fail "quant: exit $rc, wanted 1"; }
grep -q "FAIL train.sh/logged quant:bits=4,bucket=128: .*exceeded by" "$dir/err3" \
  || { cat "$dir/err3"; fail "no metric and margin"; }
"$conv" compare --quiet "$dir/logs/baseline.jsonl" --must-fail bf16="$dir/logs/codec-1.jsonl" \
  2>"$dir/err4"; rc=$?
[ "$rc" -eq 1 ] && grep -q "expected to exceed its tolerance" "$dir/err4" \
  || { cat "$dir/err4"; fail "must-fail bf16: exit $rc"; }

# 2: a command that fails: which run, its exit status and its last lines; the others judged
"$conv" run --dir "$dir/k$((k += 1))" --codec bf16 --codec fp16 -- "$t" exit3 bf16 >"$dir/out5" 2>&1; rc=$?
[ "$rc" -eq 2 ] || { cat "$dir/out5"; fail "failing command: exit $rc, wanted 2"; }
grep -q "the bf16 run failed: '.*train.sh' exited with status 3" "$dir/out5" \
  && grep -q "RuntimeError: out of memory" "$dir/out5" && grep -q "fp16 .* pass" "$dir/out5" \
  || { cat "$dir/out5"; fail "failing command: message"; }
grep -Eq "^  bf16 +(pass|FAIL)" "$dir/out5" && fail "a failed run got a verdict"
"$conv" run --dir "$dir/k$((k += 1))" --quiet --codec bf16 -- "$t" exit3 none 2>"$dir/err6"; rc=$?
[ "$rc" -eq 2 ] && grep -q "the baseline run failed" "$dir/err6" \
  && grep -q "no baseline, no verdicts" "$dir/err6" || { cat "$dir/err6"; fail "failing baseline"; }
"$conv" run --dir "$dir/k$((k += 1))" --quiet --codec bf16 -- "$dir/no-such-program" 2>"$dir/err7"; rc=$?
[ "$rc" -eq 2 ] && grep -q "cannot start" "$dir/err7" || { cat "$dir/err7"; fail "no program"; }

# 2: no metrics, malformed metrics (file and line), other steps (both files and the step)
"$conv" run --dir "$dir/k$((k += 1))" --quiet --codec bf16 -- "$t" nolog bf16 2>"$dir/err8"; rc=$?
[ "$rc" -eq 2 ] && grep -q "the bf16 run wrote no metrics to .*codec-1.jsonl" "$dir/err8" \
  || { cat "$dir/err8"; fail "no metrics: exit $rc"; }
"$conv" run --dir "$dir/k$((k += 1))" --quiet --codec bf16 -- "$t" garbage bf16 2>"$dir/err9"; rc=$?
[ "$rc" -eq 2 ] && grep -q "codec-1.jsonl:3: ',' or '}' expected" "$dir/err9" \
  || { cat "$dir/err9"; fail "malformed metrics: exit $rc"; }
"$conv" run --dir "$dir/k$((k += 1))" --quiet --codec bf16 -- "$t" short bf16 2>"$dir/err10"; rc=$?
[ "$rc" -eq 2 ] && grep -q "baseline.jsonl and .*codec-1.jsonl log different steps: 6 records" \
  "$dir/err10" || { cat "$dir/err10"; fail "a short run: exit $rc"; }
"$conv" run --dir "$dir/k$((k += 1))" --quiet --codec bf16 -- "$t" other bf16 2>"$dir/err11"; rc=$?
[ "$rc" -eq 2 ] && grep -q "record 3 is step 20 in the baseline's and step 15" "$dir/err11" \
  || { cat "$dir/err11"; fail "other steps: exit $rc"; }
"$conv" compare --quiet "$dir/missing.jsonl" bf16="$dir/logs/codec-1.jsonl" 2>"$dir/err12"; rc=$?
[ "$rc" -eq 2 ] && grep -q "missing.jsonl: cannot read the metrics" "$dir/err12" \
  || { cat "$dir/err12"; fail "missing baseline: exit $rc"; }
"$conv" compare --quiet "$dir/logs/baseline.jsonl" bf16 2>"$dir/err13"; rc=$?
[ "$rc" -eq 2 ] && grep -q "'bf16' is not NAME=FILE.jsonl" "$dir/err13" || fail "NAME=FILE: $rc"
"$conv" run --quiet --codec 'tpok:ratio=0.1' -- "$t" 2>"$dir/err14"; rc=$?
[ "$rc" -eq 2 ] && grep -q "tpok" "$dir/err14" || { cat "$dir/err14"; fail "unknown codec: $rc"; }
"$conv" run --quiet --codec bf16 2>"$dir/err15"; rc=$?
[ "$rc" -eq 2 ] && grep -q "no COMMAND" "$dir/err15" || fail "no command: $rc"

# the noise floor: baselines with seeds 2..4 (GCOMP_SEED), widening the limits; a program
# that ignores GCOMP_SEED cannot give one, and says why
"$conv" run --noise-floor 3 --codec bf16 -- "$t" >"$dir/out16" 2>&1 \
  || { cat "$dir/out16"; fail "noise floor: exit $?"; }
grep -q "noise floor (99% bound from 3 baselines with other seeds, seeds 2, 3, 4)" "$dir/out16" \
  || { cat "$dir/out16"; fail "no floor line"; }
"$conv" run --dir "$dir/k$((k += 1))" --quiet --noise-floor 2 --codec bf16 -- "$t" noseed 2>"$dir/err17"; rc=$?
[ "$rc" -eq 2 ] && grep -q "does not take its seed from GCOMP_SEED" "$dir/err17" \
  || { cat "$dir/err17"; fail "seedless floor: exit $rc"; }
echo "converge_run_cli: ok"
