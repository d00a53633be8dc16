#!/usr/bin/env bash
# Settings that differ on one rank, and a rank of another build: communicator creation fails
# on every rank with one error naming that rank and the value (reduce/agree.c, the rank
# cards of fabric/ofi.c), before any rank waits on another. GCOMP_TIMEOUT_MS is its
# production 30 s: a rank left waiting would fail with GCOMP_ERR_TIMEOUT (or gcomp-run's
# grace would stop it), which the checks below reject; no clock is read.
#   refuse.sh GCOMP_RUN ALLREDUCE_CHECK
set -u
run=$1 prog=$2
for v in $(compgen -e | grep '^GCOMP_'); do unset "$v"; done
export GCOMP_TIMEOUT_MS=30000
out=$(mktemp)
trap 'rm -f "$out"' EXIT
fails=0
# case N NODES RANK NAME=VALUE STATUS TEXT...: rank RANK alone gets NAME=VALUE; every rank
# must be refused with STATUS and a detail holding every TEXT
case_() {
  local n=$1 nodes=$2 bad=$3 set=$4 status=$5; shift 5
  "$run" -n "$n" --nodes "$nodes" --tag-output -- bash -c \
    'if [ "$GCOMP_RANK" = "$1" ]; then export "$2"; fi; exec "$0" refused' \
    "$prog" "$bad" "$set" >"$out" 2>&1
  local rc=$?
  cat "$out"
  [ $rc = 0 ] || { echo "FAIL ($set on rank $bad): gcomp-run returned $rc"; fails=1; }
  for r in $(seq 0 $((n - 1))); do
    local line
    line=$(grep "^\[$r\] allreduce_check: refused: " "$out")
    if [ -z "$line" ]; then echo "FAIL ($set on rank $bad): rank $r printed no refusal"; fails=1; continue; fi
    case "$line" in *": $status: "*) ;; *) echo "FAIL ($set on rank $bad): rank $r: not $status"; fails=1;; esac
    for text in "$@"; do
      case "$line" in *"$text"*) ;; *) echo "FAIL ($set on rank $bad): rank $r: no '$text'"; fails=1;; esac
    done
  done
}
case_ 3 1 1 GCOMP_ALGO=bogus GCOMP_ERR_INVALID "rank 1 refused its settings" "GCOMP_ALGO='bogus'"
case_ 4 2 2 GCOMP_CODEC=quant:bits=99 GCOMP_ERR_INVALID "rank 2 refused its settings" "bits"
case_ 3 1 0 GCOMP_GUARD=every=often GCOMP_ERR_INVALID "rank 0 refused its settings" "often"
case_ 3 1 2 GCOMP_SEGMENT_BYTES=65536 GCOMP_ERR_INVALID "GCOMP_SEGMENT_BYTES differs" \
  "rank 2 has 65536" "rank 0 has 16777216"
case_ 4 2 3 GCOMP_CODEC=bf16 GCOMP_ERR_INVALID "GCOMP_CODEC differs" "rank 3 has 'bf16'" \
  "rank 0 has 'none'"
# a rank of another build: refused at bootstrap by its rank card, naming both versions
case_ 3 1 1 GCOMP_FAULT=wire-version:rank=1 GCOMP_ERR_INVALID "mismatched gcomp builds" \
  "rank 0 speaks wire version 3, rank 1 wire version 4"
echo "refuse: $([ $fails = 0 ] && echo passed || echo FAILED)"
exit $fails
