#!/usr/bin/env bash
# Straggler detection over real processes: rank 1 of 3 sleeps before every call and every
# rank's GCOMP_STATS names it (and gcomp-bench's last line says so); one node and two
# emulated nodes. Ranks that disagree on GCOMP_SKEW_WINDOW are refused at creation,
# naming the variable. gcomp-bench refuses malformed numbers.
# gcomp-stats summarises the job's files and names the same rank; it refuses files that are
# missing, not stats, or two of one rank.
#   straggler.sh GCOMP_RUN GCOMP_BENCH GCOMP_STATS_TOOL
set -u
run=$1 bench=$2 stats=$3 fails=0
for v in $(compgen -e | grep '^GCOMP_'); do unset "$v"; done
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; fails=1; }

for nodes in 1 2; do
  out=$(GCOMP_SKEW_WINDOW=16 GCOMP_STATS="$dir/st-$nodes-%r.json" GCOMP_TRACE="$dir/tr-$nodes-%r.json" \
    "$run" -n 3 --nodes $nodes -- \
    "$bench" allreduce -b 64k -e 64k -n 32 -w 0 --rounds 1 --delay-rank 1 --delay-ms 10 2>&1) ||
    { fail "$nodes node(s): the job failed: $out"; continue; }
  echo "$out" | grep -q "^# stragglers over [0-9]* calls: rank 1 arrived" ||
    fail "$nodes node(s): gcomp-bench does not name rank 1: $(echo "$out" | tail -1)"
  for r in 0 1 2; do
    f="$dir/st-$nodes-$r.json"
    grep -q '"skew": {"window": 16, "calls": [0-9]*' "$f" || { fail "rank $r: no skew in $(cat "$f")"; continue; }
    grep -q '"worst_rank": 1,' "$f" || fail "$nodes node(s), rank $r: worst rank is not 1: $(grep skew "$f")"
  done
  # rank 1's own figures: late by most of the 10 ms, on average
  late=$(sed -n 's/.*"late_mean_us": \([0-9.]*\).*/\1/p' "$dir/st-$nodes-1.json")
  awk -v l="$late" 'BEGIN { exit !(l >= 7000) }' || fail "$nodes node(s): rank 1 late by only ${late} us"
  # the trace: rank 1's calls of complete windows carry their lateness, most of the 10 ms
  n_late=$(grep -o '"late_us": [0-9.]*' "$dir/tr-$nodes-1.json" | awk '$2 >= 7000' | wc -l)
  [ "$n_late" -ge 16 ] || fail "$nodes node(s): rank 1's trace has $n_late calls >= 7 ms late"
  # the job's summary: one row per rank, and the same straggler
  sum=$("$stats" "$dir"/st-$nodes-*.json 2>&1) || fail "$nodes node(s): gcomp-stats failed: $sum"
  [ "$(echo "$sum" | grep -c '^  ')" = 3 ] || fail "$nodes node(s): gcomp-stats rows: $sum"
  echo "$sum" | grep -q "^# latest to arrive: rank 1, " || fail "$nodes node(s): gcomp-stats: $sum"
done

# gcomp-stats: bad input is an error that names the file
out=$("$stats" "$dir/none.json" 2>&1) && fail "gcomp-stats read a missing file"
echo "$out" | grep -q "cannot read '$dir/none.json'" || fail "gcomp-stats, missing file: $out"
echo '{"rank": 0}' >"$dir/bad.json"
out=$("$stats" "$dir/bad.json" 2>&1) && fail "gcomp-stats read a non-stats file"
echo "$out" | grep -q "'$dir/bad.json' is not a GCOMP_STATS file" || fail "gcomp-stats, bad file: $out"
cp "$dir/st-1-0.json" "$dir/again.json"
out=$("$stats" "$dir/st-1-0.json" "$dir/again.json" 2>&1) && fail "gcomp-stats took rank 0 twice"
echo "$out" | grep -q "are both rank 0" || fail "gcomp-stats, one rank twice: $out"
# numbers out of range, or not a rank (1e999 read as "no rank"; two nan ranks were a table)
sed 's/"rank": 0,/"rank": 1e999,/' "$dir/st-1-0.json" >"$dir/huge.json"
out=$("$stats" "$dir/huge.json" 2>&1) && fail "gcomp-stats took rank 1e999"
echo "$out" | grep -q "\"rank\" is out of range or not a finite number" || fail "gcomp-stats, 1e999: $out"
sed 's/"rank": 0,/"rank": 1.5,/' "$dir/st-1-0.json" >"$dir/half.json"
out=$("$stats" "$dir/half.json" 2>&1) && fail "gcomp-stats took rank 1.5"
echo "$out" | grep -q "is not a rank" || fail "gcomp-stats, rank 1.5: $out"

# a window that differs between ranks: refused at creation, naming the variable
out=$("$run" -n 2 -- bash -c 'GCOMP_SKEW_WINDOW=$((8 + GCOMP_RANK)) exec "$0" allreduce -b 8 -e 8 -n 1 --rounds 1' \
  "$bench" 2>&1) && fail "ranks with different windows ran"
echo "$out" | grep -q "GCOMP_SKEW_WINDOW differs between ranks" || fail "no clear error: $out"
# so is every setting the ranks must share (a codec inside the node on one node only, or
# another GCOMP_CODEC_MIN_BYTES, ended calls with different bytes and no error)
for v in 'GCOMP_CODEC_MIN_BYTES=$((1000 + GCOMP_RANK))' \
         'GCOMP_INTRA_CODEC=$([ "$GCOMP_RANK" = 1 ] && echo bf16 || echo none)' \
         'GCOMP_CODEC=$([ "$GCOMP_RANK" = 1 ] && echo bf16 || echo fp16)' \
         'GCOMP_ALGO=$([ "$GCOMP_RANK" = 1 ] && echo ring || echo auto)' \
         'GCOMP_ALPHA_BETA=$([ "$GCOMP_RANK" = 1 ] && echo 1,10,20,1 || echo 1,10,20,2)' \
         'GCOMP_SEGMENT_BYTES=$((65536 + 4096 * GCOMP_RANK))'; do
  name=${v%%=*}
  # shellcheck disable=SC2016
  out=$("$run" -n 2 --nodes 2 -- bash -c "export $v; exec \"\$0\" allreduce -b 8 -e 8 -n 1 --rounds 1" \
    "$bench" 2>&1) && fail "ranks with different $name ran"
  echo "$out" | grep -q "$name differs between ranks" || fail "$name: no clear error: $out"
done

# gcomp-bench allreduce refuses bad numbers, naming them, instead of running something else
for args in "--rounds abc" "--rounds 17" "-n 0" "-b 1M -e 8" "--delay-ms 0"; do
  # shellcheck disable=SC2086
  out=$("$bench" allreduce $args 2>&1) && fail "gcomp-bench allreduce $args ran"
  echo "$out" | grep -qE "is not a number in|must be at least" || fail "gcomp-bench allreduce $args: $out"
done
# the other collectives' tables take the library's sizes (16M was refused) and name a bad one
for args in "alltoall -b 16x" "allgather -e 8q" "broadcast -b 2"; do
  # shellcheck disable=SC2086
  out=$("$bench" $args 2>&1) && fail "gcomp-bench $args ran"
  echo "$out" | grep -q "is not a size of at least 4 bytes" || fail "gcomp-bench $args: $out"
done

echo "straggler: $([ $fails = 0 ] && echo passed || echo FAILED)"
exit $fails
