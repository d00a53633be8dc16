#!/usr/bin/env bash
# gcomp-bench allreduce --ab NAME=VALUE: the rounds alternate in ABBA order between the job's
# communicator and a second one made with that setting (out of band, over the first); a
# line gives both medians (time, and the CPU a rank spent per call), and the table's #wrong
# still checks the rounds without it. Fewer
# than 4 rounds are refused before any communicator exists, an unknown setting by name.
#   bench_ab.sh GCOMP_RUN GCOMP_BENCH
set -u
run=$1 bench=$2
for v in $(compgen -e | grep '^GCOMP_'); do unset "$v"; done
out=$("$run" -n 4 --nodes 2 -- "$bench" allreduce -b 1M -e 4M -n 2 -w 0 --rounds 4 \
  --codec 'sign+ef' --ab GCOMP_STREAM_BYTES=0 2>&1) || { echo "FAIL: the job failed: $out"; exit 1; }
lines=$(echo "$out" | grep -c '^# --ab GCOMP_STREAM_BYTES=0, 2 and 2 rounds in ABBA order')
[ "$lines" = 3 ] || { echo "FAIL: $lines --ab lines for 3 sizes"; echo "$out"; exit 1; }
# each with the CPU a rank spent per call, both ways: figures above zero
cpu=$(echo "$out" | grep '^#   CPU a rank per call, mean of the ranks: out of place')
[ "$(echo "$cpu" | grep -c .)" = 3 ] || { echo "FAIL: CPU lines: $cpu"; echo "$out"; exit 1; }
echo "$cpu" | awk '{ for (i = 1; i <= NF; i++) if ($(i) ~ /^[0-9.]+$/) { n++;
                       if (!($(i) + 0 > 0)) bad = 1 } } END { exit (bad || n != 12) }' ||
  { echo "FAIL: CPU figures: $cpu"; exit 1; }
echo "$out" | grep -q '^# CPU a rank per call at the largest size' ||
  { echo "FAIL: no CPU line for the table"; echo "$out"; exit 1; }
out=$("$run" -n 2 -- "$bench" allreduce -b 1M -e 1M -n 1 -w 0 --rounds 4 \
  --ab GCOMP_SHM_BYTES=2m 2>&1) || { echo "FAIL: a dense --ab job failed: $out"; exit 1; }
echo "$out" | grep -q '^# --ab GCOMP_SHM_BYTES=2m' || { echo "FAIL: no --ab line"; echo "$out"; exit 1; }
bad=$("$bench" allreduce --rounds 3 --ab GCOMP_STREAM_BYTES=0 2>&1)
[ $? = 2 ] && echo "$bad" | grep -q 'needs --rounds 4' || { echo "FAIL: 3 rounds: $bad"; exit 1; }
bad=$("$run" -n 2 -- "$bench" allreduce -b 1M -e 1M -n 1 -w 0 --rounds 4 --ab GCOMP_NO_SUCH=1 2>&1)
[ $? != 0 ] && echo "$bad" | grep -q 'GCOMP_NO_SUCH' || { echo "FAIL: unknown setting: $bad"; exit 1; }
echo "ok: $(echo "$out" | grep '^# --ab')"
