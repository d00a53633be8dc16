#!/usr/bin/env bash
# gcomp-bench's in-place column times the data it was given: it refills the
# buffer before each timed call. It used to run the timed calls back to back on what the
# last call left, 4x larger a call at 4 ranks: past about 64 calls the values overflowed,
# every bucket went raw and the column timed NaN and Inf. 80 calls at 4 ranks must leave
# no non-finite value in any result, dense or compressed.
#   bench_inplace.sh GCOMP_RUN GCOMP_BENCH
set -u
run=$1 bench=$2
for v in $(compgen -e | grep '^GCOMP_'); do unset "$v"; done
out=$("$run" -n 4 --nodes 2 -- "$bench" allreduce -b 256k -e 256k -n 80 -w 0 --rounds 1 \
  --codec none --codec 'sign+ef' 2>&1) || { echo "FAIL: the job failed: $out"; exit 1; }
counts=$(echo "$out" | sed -n 's/^# non-finite values in the results: //p' | tr '\n' ' ')
[ "$counts" = "0 0 " ] || { echo "FAIL: non-finite results (none, sign+ef): $counts"; echo "$out"; exit 1; }
echo "ok: $(echo "$out" | grep -E '^ +262144')"
