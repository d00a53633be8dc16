#!/usr/bin/env bash
# gcomp-converge run on a real PyTorch model: examples/ddp_train.py (the digits MLP, DDP with
# the gcomp hook, 2 ranks on 2 emulated nodes under gcomp-run) once with no codec and once
# per codec. bf16 and top-k 1% with error feedback must pass; top-k 0.1% without it must be
# flagged. usage: converge_ddp.sh GCOMP_CONVERGE GCOMP_RUN PYTHON EXAMPLE DIGITS WORKDIR
set -uo pipefail
conv=$1 run=$2 py=$3 example=$4 digits=$5 dir=$6
rm -rf "$dir" && mkdir -p "$dir"
fail() { echo "converge_ddp: $*"; exit 1; }
[ -f "$digits" ] || fail "$digits not found (scripts/setup extracts the digits data set)"
"$conv" run --codec bf16 --codec 'topk:ratio=0.01+ef' --must-fail 'topk:ratio=0.001' \
  --launch "$run -n 2 --nodes 2" --dir "$dir/logs" --junit "$dir/converge.xml" \
  --json "$dir/converge.json" --plot "$dir/converge.svg" \
  -- "$py" "$example" --comm gcomp --data "$digits" --steps 200 >"$dir/out" 2>&1
rc=$?
cat "$dir/out"
[ "$rc" -eq 0 ] || fail "exit status $rc, wanted 0"
grep -Eq "^  bf16 .* pass" "$dir/out" || fail "bf16 did not pass"
grep -Eq "^  topk:ratio=0.01\+ef .* pass" "$dir/out" || fail "topk:ratio=0.01+ef did not pass"
grep -Eq "^  topk:ratio=0.001 .* flagged" "$dir/out" || fail "topk:ratio=0.001 was not flagged"
# the codecs ran: the hook encoded frames in every codec run (else a pass checks nothing)
for f in codec-1 codec-2 codec-3; do
  grep -Eq "gcomp: [1-9][0-9]* frames encoded" "$dir/logs/$f.out" \
    || { cat "$dir/logs/$f.out"; fail "$f encoded no frames"; }
done
grep -q "did the codec run" "$dir/out" && fail "a codec left the curve untouched"
echo "converge_ddp: ok"
