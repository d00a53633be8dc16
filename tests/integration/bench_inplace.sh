#!/usr/bin/env bash
# gcomp-bench times what it should. Its in-place column times the data it was given: it
# refills the buffer before each timed call. It used to run the timed calls back to back on
# what the last call left, 4x larger a call at 4 ranks: past about 64 calls the values
# overflowed, every bucket went raw and the column timed NaN and Inf. 80 calls at 4 ranks
# must leave no non-finite value in any result, dense or compressed.
#   bench_inplace.sh GCOMP_RUN GCOMP_BENCH
set -u
run=$1 bench=$2
for v in $(compgen -e | grep '^GCOMP_'); do unset "$v"; done
out=$("$run" -n 4 --nodes 2 -- "$bench" allreduce -b 256k -e 256k -n 80 -w 0 --rounds 1 \
  --codec none --codec 'sign+ef' 2>&1) || { echo "FAIL: the job failed: $out"; exit 1; }
counts=$(echo "$out" | sed -n 's/^# non-finite values in the results: //p' | tr '\n' ' ')
[ "$counts" = "0 0 " ] || { echo "FAIL: non-finite results (none, sign+ef): $counts"; echo "$out"; exit 1; }
# The ranks meet (an untimed 4-byte allreduce) before every timed run of calls: a rank's
# first call once timed its wait for peers still filling their buffers, and at 64 MiB on
# an oversubscribed machine that added several ms to the out-of-place column. In the trace
# every 256 KiB call follows a meeting or another such call, but for the in-place column's
# untimed check call, one a round, after the round's 8-byte figures.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
GCOMP_TRACE="$tmp/t-%r.json" "$run" -n 2 -- "$bench" allreduce -b 256k -e 256k -n 3 -w 1 \
  --rounds 3 >/dev/null 2>&1 || { echo "FAIL: the traced job failed"; exit 1; }
for r in 0 1; do
  python3 - "$tmp/t-$r.json" <<'PY' || exit 1
import json, sys
ev = sorted((e for e in json.load(open(sys.argv[1]))["traceEvents"] if e.get("ph") == "X"),
            key=lambda e: e["ts"])
b = [e["args"]["bytes"] for e in ev]
odd = [i for i in range(1, len(b)) if b[i] == 262144 and b[i - 1] not in (4, 262144)]
if len(odd) != 3 or b.count(262144) != 3 * (3 + 1 + 3) + 1:
    sys.exit("FAIL: %s: calls of 256 KiB not after a meeting at %s: %s" % (sys.argv[1], odd, b))
PY
done
# --baseline mpi: the communicator bootstraps through MPI's allgather (gcomp.h's
# gcomp_comm_init_oob), and MPI_Allreduce runs on the same buffers; both columns exact.
# Open MPI's own start-up allocations outlive MPI_Finalize: no leak check in this job.
if command -v mpirun >/dev/null; then
  mout=$(mpirun --allow-run-as-root --oversubscribe -n 2 -x ASAN_OPTIONS=detect_leaks=0 "$bench" allreduce -b 8 -e 64k -f 8192 \
    -n 20 -w 1 --rounds 1 --baseline mpi 2>&1) || { echo "FAIL: --baseline mpi failed: $mout"; exit 1; }
  rows=$(echo "$mout" | grep -cE '^ +(8|65536) +[0-9]+ +float +sum')
  wrong=$(echo "$mout" | awk '$1 ~ /^[0-9]+$/ && $1 > 0 { if ($10 != 0 || $15 != 0) print }')
  if [ "$rows" != 2 ] || [ -n "$wrong" ] || ! echo "$mout" | grep -q 'mpi time'; then
    echo "FAIL: --baseline mpi: 2 exact rows with MPI's column expected:"; echo "$mout"; exit 1
  fi
else
  echo "SKIP: --baseline mpi: mpirun not installed"
fi
echo "ok: $(echo "$out" | grep -E '^ +262144')"
