#!/usr/bin/env bash
# examples/zero_train.py (ZeRO-2-style sharding on the gcomp backend: gradients through
# reduce_scatter, parameters through all_gather; the digits MLP, 4 ranks on 2 emulated
# nodes) judged by gcomp-converge run against its own fp32 run: with 4-bit gradients and
# error feedback across the nodes it trains within the harness's tolerances.
# usage: converge_zero.sh GCOMP_CONVERGE GCOMP_RUN PYTHON EXAMPLE DIGITS WORKDIR
set -uo pipefail
conv=$1 run=$2 py=$3 example=$4 digits=$5 dir=$6
rm -rf "$dir" && mkdir -p "$dir"
fail() { echo "converge_zero: $*"; exit 1; }
[ -f "$digits" ] || fail "$digits not found (scripts/setup extracts the digits data set)"
"$conv" run --codec 'quant:bits=4+ef' --launch "$run -n 4 --nodes 2" --dir "$dir/logs" \
  --json "$dir/converge.json" -- "$py" "$example" --data "$digits" --steps 200 \
  >"$dir/out" 2>&1
rc=$?
cat "$dir/out"
[ "$rc" -eq 0 ] || fail "exit status $rc, wanted 0"
grep -Eq "^  quant:bits=4\+ef .* pass" "$dir/out" || fail "quant:bits=4+ef did not pass"
# the codec ran: the gradients' reduce_scatter encoded frames (else a pass checks nothing)
grep -Eq "gcomp: quant.* [1-9][0-9]* frames encoded" "$dir/logs/codec-1.out" \
  || { cat "$dir/logs/codec-1.out"; fail "the reduce_scatter encoded no frames"; }
echo "converge_zero: ok"
