#!/usr/bin/env bash
# p2p latency and bandwidth across 2 emulated nodes: gcomp's transport (tcp;ofi_rxm) against
# fi_pingpong -p tcp -e rdm -m tagged, both started by gcomp-run --nodes 2, so both cross the
# same veth pair and bridge between two network namespaces (gcomp-run makes them; needs
# root). The two alternate for every size and repetition; the best of REPS is kept, as in
# `gcomp-lab p2p` (which runs both ranks on one host over 127.0.0.1).
#   bench/p2p_two_nodes.sh BUILD_DIR [REPS] [SIZES...]
# BUILD_DIR holds tools/gcomp-run and bench/gcomp-lab. GCOMP_RUN_ARGS adds gcomp-run
# options (e.g. "--inter-node-rate 1gbit"). Prints the table of gcomp-lab p2p.
set -u
build=$1 reps=${2:-3}
shift $(( $# >= 2 ? 2 : $# ))
sizes=${*:-8 64 512 4096 32768 262144 2097152 16777216 67108864}
run="$build/tools/gcomp-run" bench="$build/bench/gcomp-lab"
extra=${GCOMP_RUN_ARGS:-}

iters_for() {   # as bench/lab/p2p.c
  if [ "$1" -le 4096 ]; then echo 20000; elif [ "$1" -le 65536 ]; then echo 5000
  elif [ "$1" -le 1048576 ]; then echo 500; elif [ "$1" -le 8388608 ]; then echo 60
  else echo 12; fi
}

# one fi_pingpong pair: the server on node 0, the client on node 1; prints usec/xfer MB/sec
ref() {
  # shellcheck disable=SC2086,SC2016 # extra is a word list; the script runs in the ranks
  timeout 300 "$run" -n 2 --nodes 2 $extra --tag-output -- bash -c '
    port=$((MASTER_PORT + 7))
    if [ "$RANK" = 0 ]; then exec fi_pingpong -p tcp -e rdm -m tagged -S '"$1"' -I '"$2"' -B $port
    else sleep 0.5; exec fi_pingpong -p tcp -e rdm -m tagged -S '"$1"' -I '"$2"' -P $port "$MASTER_ADDR"; fi' \
    2>/dev/null | awk '$1 == "[1]" && $2 ~ /^[0-9]/ {print $8, $7}' | tail -1
}

# one gcomp pair: prints the one-way microseconds
mine() {
  # shellcheck disable=SC2086 # extra is a word list
  timeout 300 "$run" -n 2 --nodes 2 $extra -- "$bench" p2p --worker --provider tcp --min "$1" \
    --iters "$2" 2>/dev/null | awk '$1 == "P2P" {print $4}' | tail -1
}

best() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || (b != "" && b + 0 < a + 0)) print b; else print a }'; }

echo "p2p over tcp;ofi_rxm, 2 emulated nodes (gcomp vs fi_pingpong -m tagged, same run; ratios gcomp/fi_pingpong)"
printf "%10s %8s %11s %11s %9s %11s %11s %9s\n" bytes iters "gcomp us" "fi_pp us" "lat x" \
  "gcomp MB/s" "fi_pp MB/s" "bw x"
for s in $sizes; do
  it=$(iters_for "$s")
  g="" r=""
  for _ in $(seq "$reps"); do
    read -r ru _ <<<"$(ref "$s" "$it")"
    r=$(best "$r" "${ru:-}")
    g=$(best "$g" "$(mine "$s" "$it")")
  done
  awk -v s="$s" -v it="$it" -v g="$g" -v r="$r" 'BEGIN {
    gb = g > 0 ? s / g : 0; rb = r > 0 ? s / r : 0
    lat = r > 0 ? g / r : 0; bw = rb > 0 ? gb / rb : 0
    printf "%10d %8d %11.2f %11.2f %9.2f %11.1f %11.1f %9.2f\n", s, it, g, r, lat, gb, rb, bw }'
done
