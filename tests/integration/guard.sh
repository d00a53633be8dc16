#!/usr/bin/env bash
# The drift guard over real processes: 2 ranks on 2 emulated nodes run top-k 0.1% without
# error feedback under GCOMP_GUARD=every=1,backoff=0 (every call checked, every one over
# budget): every rank's GCOMP_STATS lists the key with as many fallbacks as checks, and
# bf16 under the default budget none. Ranks that disagree on GCOMP_GUARD are refused at
# creation, naming it; a malformed spec names its token.
#   guard.sh GCOMP_RUN GCOMP_BENCH
set -u
run=$1 bench=$2 fails=0
for v in $(compgen -e | grep '^GCOMP_'); do unset "$v"; done
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; fails=1; }

job() {   # name guard algo codec
  GCOMP_GUARD=$2 GCOMP_ALGO=$3 GCOMP_STATS="$dir/$1-%r.json" "$run" -n 2 --nodes 2 -- \
    "$bench" allreduce -b 256k -e 256k -n 6 -w 0 --rounds 1 --codec "$4" 2>&1
}
out=$(job topk every=1,backoff=0 sparse topk:ratio=0.001) || fail "top-k job failed: $out"
for r in 0 1; do
  f="$dir/topk-$r.json"
  g=$(grep -o '"guard": {.*' "$f" 2>/dev/null) || { fail "rank $r: no guard in $(cat "$f" 2>&1)"; continue; }
  checks=$(echo "$g" | sed -n 's/.*"checks": \([0-9]*\), "fallbacks": \([0-9]*\), "backoff_calls".*/\1/p')
  fb=$(echo "$g" | sed -n 's/.*"checks": \([0-9]*\), "fallbacks": \([0-9]*\), "backoff_calls".*/\2/p')
  [ -n "$checks" ] && [ "$checks" -ge 6 ] && [ "$checks" = "$fb" ] ||
    fail "rank $r: checks '$checks', fallbacks '$fb': $g"
  echo "$g" | grep -q '"keys": \[{"key": [0-9]*, "count": 65536, "running_sum": 0' ||
    fail "rank $r: the key is not listed: $g"
done
out=$(job bf16 on direct bf16) || fail "bf16 job failed: $out"
for r in 0 1; do
  grep -q '"guard": {"every": 100, "budget": 0.5, "backoff": 100, "checks": [1-9][0-9]*, "fallbacks": 0,' \
    "$dir/bf16-$r.json" || fail "rank $r: bf16 fell back or was not checked: $(grep -o '"guard.*' "$dir/bf16-$r.json")"
done

# settings that differ between ranks: refused on creation, naming the variable
out=$("$run" -n 2 -- bash -c 'GCOMP_GUARD=every=$((5 + GCOMP_RANK)) exec "$0" allreduce -b 8 -e 8 -n 1 --rounds 1' \
  "$bench" 2>&1) && fail "ranks with different guards ran"
echo "$out" | grep -q "GCOMP_GUARD differs between ranks" || fail "no clear error: $out"
# a bad spec names its token
out=$(GCOMP_GUARD=every=5,bogus=1 "$run" -n 2 -- "$bench" allreduce -b 8 -e 8 -n 1 --rounds 1 2>&1) &&
  fail "a bad GCOMP_GUARD ran"
echo "$out" | grep -q "unknown key 'bogus'" || fail "the error does not name the token: $out"
[ "$fails" = 0 ] && echo "guard: all passed"
exit "$fails"
