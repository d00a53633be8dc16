#!/usr/bin/env bash
# The MPI shim over real processes: mpirun, an unmodified MPI program, LD_PRELOAD.
#   shim_test.sh MODE RANKS PRELOAD SHIM_CHECK [SHIM_COMMS [SHIM_COLL]]
# exact     every mapped type/op/count on world, a dup and a split, and MPI_Iallreduce,
#           served by gcomp (each communicator's GCOMP_STATS file counts exactly its calls on
#           every rank), the rest passed to MPI (the shim's report at MPI_Finalize counts
#           them by reason); all results exact
# thread    the same after MPI_Init_thread(MPI_THREAD_MULTIPLE): the dup and the split are
#           served too (one gcomp communicator and one lock per MPI communicator)
# bf16      GCOMP_CODEC=bf16 on two emulated nodes behind a 1 Gbit/s link model: the calls
#           are served by a compressed algorithm and the sums are within bf16's error
# silent    the last rank goes silent inside the job: with GCOMP_TIMEOUT_MS=2000 the other
#           ranks' MPI_Allreduce fails within it, the shim warns naming the silent rank,
#           MPI_ERRORS_ARE_FATAL aborts the job and MPI_ERRORS_RETURN hands back an error
# badbuf    recvbuf MPI_IN_PLACE and aliased buffers go to MPI, which reports them (no crash,
#           no success); later calls are still served exactly. Without GCOMP_TIMEOUT_MS the
#           shim waits for a late rank as MPI would (30 min), not gcomp's 30 s
# fallback  a bad GCOMP_* value: one warning naming it, every call to MPI, results exact, no
#           stats file; with GCOMP_SHIM_STRICT=1 the job stops instead
# comms     shim_comms under MPI_THREAD_MULTIPLE: a dup, an uneven split, an MPI_Comm_create
#           communicator, blocking and MPI_Iallreduce under every completion call, two
#           threads on two communicators, fresh dups first used by two threads at once; the
#           shim's report must route every call as the program says it must (served, one
#           rank, inter-communicator, datatype) on every rank, and the stats files agree
# lossy     the same program with GCOMP_CODEC=bf16 on two emulated nodes (a slow link
#           model): every served communicator's results visibly inexact, within bf16's bound
# route     GCOMP_SHIM_ROUTE=auto: MPI's allreduce is a choice; every rank logs the same
#           route per size, and the shim's counts follow from those routes exactly;
#           GCOMP_SHIM_ROUTE=mpi sends every call to MPI
# repeat    shim_check repeat shim under each GCOMP_SHIM_ROUTE: a repeated call is not looked
#           up again (the program counts the shim's PMPI_Type_size and PMPI_Comm_get_attr),
#           a dup made after one was freed is served on its own communicator, and the
#           report counts every call where its route sent it
# errors    shim_comms silent: a rank silent on the dup; the dup's own error handler is the
#           one called, MPI_Wait returns the error, a later MPI_Waitall MPI_ERR_IN_STATUS,
#           MPI_Waitany MPI_ERR_OTHER; a failed call completed after MPI_Comm_free of the dup
#           goes through world's handler
# coll      shim_coll: MPI_Reduce_scatter_block, MPI_Reduce_scatter, MPI_Allgather,
#           MPI_Bcast, MPI_Barrier, MPI_Alltoall and their i-forms on world, a dup and a split, bitwise as
#           MPI's own (PMPI) results; under GCOMP_SHIM_ROUTE=gcomp every one gcomp can serve
#           goes to gcomp: each rank's report counts exactly what the program says per
#           collective (served; to MPI by reason), and its stats files count the served
#           calls; GCOMP_SHIM_ROUTE=mpi sends them all to MPI (gcomp runs none)
# collroute shim_coll route: GCOMP_SHIM_ROUTE=auto, the other collectives' per-size routes
#           agreed by every rank; each collective's report line follows from them exactly
set -u
mode=$1 n=$2 preload=$3 prog=$4 comms=${5:-} coll=${6:-}
for v in $(compgen -e | grep -E '^(GCOMP_|OMPI_|PMI_|SLURM_)'); do unset "$v"; done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
ok() { echo "PASS: $*"; }
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }

# run NAME [VAR=value...] -- ARGS...: mpirun with the shim preloaded and VARs exported
# (GCOMP_TIMEOUT_MS=20000 unless NO_TIMEOUT is among them); stdout and stderr land in
# $tmp/NAME.out and $tmp/NAME.err, the exit status in $rc
run() {
  local name=$1; shift
  # every call gcomp can serve goes to gcomp (exact counts) unless a test asks for a route
  local xs=(-x "LD_PRELOAD=$preload" -x ASAN_OPTIONS=detect_leaks=0 -x GCOMP_SHIM_ROUTE=gcomp)
  local user=() timeout_ms=20000
  while [ "$1" != -- ]; do
    if [ "$1" = NO_TIMEOUT ]; then timeout_ms=""; else user+=(-x "$1"); fi
    shift
  done
  [ -n "$timeout_ms" ] && xs+=(-x GCOMP_TIMEOUT_MS=$timeout_ms)
  xs+=("${user[@]}")   # after the defaults: a test's own GCOMP_TIMEOUT_MS or route wins
  shift
  # vader's single-copy path needs ptrace rights some containers withhold; the shim does not
  # depend on how Open MPI moves the calls it passes through
  timeout 100 mpirun --allow-run-as-root --oversubscribe --mca btl_vader_single_copy_mechanism none \
    -n "$n" "${xs[@]}" "$@" \
    >"$tmp/$name.out" 2>"$tmp/$name.err" </dev/null
  rc=$?
}

show() { sed 's/^/    /' "$tmp/$1.out" "$tmp/$1.err" | head -n 40; }

# passed NAME: the program's own verdict
passed() {
  if [ "$rc" -eq 0 ] && grep -q '^shim_check: PASS' "$tmp/$1.out"; then ok "$1: results correct"
  else bad "$1: exit $rc"; show "$1"; fi
}

# calls NAME: sets world dup split dtype op iall from the program's "calls:" line
calls() {
  read -r world dup split dtype op iall < <(sed -n \
    's/^calls: world \([0-9]*\) dup \([0-9]*\) split \([0-9]*\) dtype \([0-9]*\) op \([0-9]*\) iallreduce \([0-9]*\)$/\1 \2 \3 \4 \5 \6/p' \
    "$tmp/$1.out")
  [ -n "${iall:-}" ] || { bad "$1: no calls line"; world=-1 dup=-1 split=-1 dtype=-1 op=-1 iall=-1; }
}

# stats_calls RANK: the "calls" field of that rank's GCOMP_STATS file ("" when none)
stats_calls() { sed -n 's/^{.*"calls": \([0-9]*\),.*/\1/p' "$tmp/stats-$1.json" 2>/dev/null; }

# report NAME RANK SERVED COMMS OFF INTER ONE OUTSIDE DTYPE OP ARGS REFUSED [FASTER TIMING
# ASKED]: the shim's line at MPI_Finalize must say exactly this. SERVED and each reason are
# "blocking/non-blocking" (MPI_Allreduce/MPI_Iallreduce) counts; COMMS the gcomp
# communicators made; the last three (GCOMP_SHIM_ROUTE's reasons) are 0/0 unless given.
report() {
  local name=$1 r=$2 served=$3 ncomm=$4 refused=${12} fast=${13:-0/0} timing=${14:-0/0} asked=${15:-0/0}
  local reasons=("$5" "$6" "$7" "$8" "$9" "${10}" "${11}" "$fast" "$timing" "$asked") tb=0 tn=0 x
  for x in "${reasons[@]}"; do tb=$((tb + ${x%/*})) tn=$((tn + ${x#*/})); done
  local want="rank $r: gcomp served ${served%/*} MPI_Allreduce and ${served#*/} MPI_Iallreduce ([0-9]* bytes) on $ncomm communicator(s); to MPI: $tb MPI_Allreduce and $tn MPI_Iallreduce (gcomp off $5, inter-communicator $6, one rank $7, outside MPI_COMM_WORLD $8, datatype $9, op ${10}, bad arguments ${11}, MPI faster $fast, timing MPI $timing, GCOMP_SHIM_ROUTE=mpi $asked); refused (NULL buffers): $refused"
  if grep -q "gcomp INFO shim .*$want" "$tmp/$name.err"; then
    ok "$name: rank $r's report: $served served on $ncomm communicator(s), $tb/$tn to MPI"
  else
    bad "$name: rank $r's report does not say: $want"
    grep 'INFO shim .*gcomp served' "$tmp/$name.err" | sed 's/^/    /'
  fi
}

# routes_of NAME RANK: the routes rank RANK logged on world, in order ("KIND LO-HI B to VIA")
routes_of() {
  grep -o "gcomp INFO shim .*rank $2: communicator world: MPI_[A-Za-z_]* [0-9]*-[0-9]* B to [A-Za-z]*" "$tmp/$1.err" |
    sed 's/.*communicator world: //'
}

# agreed NAME RANK LOG LINES: rank RANK logged LINES routes (routes_of), the same as rank 0's
agreed() {
  local routes
  routes=$(echo "$3" | sort)
  [ "$(echo "$routes" | grep -c .)" = "$4" ] || { bad "$1: rank $2 logged routes: $(echo $routes)"; return 1; }
  if [ "$2" = 0 ]; then ref_routes=$routes; ok "$1: rank 0's routes: $(echo $3)"
  elif [ "$routes" = "$ref_routes" ]; then ok "$1: rank $2 agrees"
  else bad "$1: rank $2's routes differ: $(echo $routes)"; fi
}

# replay LOG KIND CLASS:CALLS:ICALLS...: the shim's routing of KIND's calls from the routes
# logged in LOG (routes_of), in order: per size class CALLS blocking calls, then ICALLS
# non-blocking ones (which follow the last route). Each trial runs gcomp's calls, then MPI's
# (the first of each a warm-up, then 8 timed calls each up to 64 KiB, 4 above), the next one runs
# after 256 calls of the agreed route, then 4x as many. Sets served faster timing (blocking)
# and nserved nfaster (non-blocking) counts, whatever the times were (which no test knows).
replay() {
  local log=$1 kind=$2 spec c left nb k t m via recheck got
  shift 2
  served=0 faster=0 timing=0 nserved=0 nfaster=0
  for spec in "$@"; do
    IFS=: read -r c left nb <<<"$spec"
    k=8 recheck=0
    [ "${c%-*}" -gt 65536 ] && k=4
    mapfile -t got < <(echo "$log" | sed -n "s/^$kind $c B to //p")
    [ "${#got[@]}" -gt 0 ] || { bad "$kind $c B: no route logged"; continue; }
    for via in "${got[@]}"; do
      t=$((2 + 2 * k)); [ "$t" -gt "$left" ] && t=$left
      m=$((k + 1)); [ "$m" -gt "$t" ] && m=$t   # gcomp's run first, then MPI's
      served=$((served + m)) timing=$((timing + t - m)) left=$((left - t))
      recheck=$([ "$recheck" = 0 ] && echo 256 || echo $((4 * recheck)))
      m=$recheck; [ "$m" -gt "$left" ] && m=$left
      if [ "$via" = gcomp ]; then served=$((served + m)); else faster=$((faster + m)); fi
      left=$((left - m))
    done
    if [ "${got[-1]}" = gcomp ]; then nserved=$((nserved + nb)); else nfaster=$((nfaster + nb)); fi
    [ "$left" = 0 ] || bad "$kind $c B: ${#got[@]} route(s) logged do not account for its calls"
  done
}

# stats_sum RANK: the calls of every GCOMP_STATS file of that rank (world's and the others')
stats_sum() {
  local f t=0 c
  for f in "$tmp/stats-$1.json" "$tmp/stats-$1".c*.json; do
    [ -f "$f" ] || continue
    c=$(sed -n 's/^{.*"calls": \([0-9]*\),.*/\1/p' "$f")   # as stats_calls, any file
    t=$((t + ${c:-0}))
  done
  echo "$t"
}

# expect_lines NAME: checks every rank's report against the "expect rank R: ..." lines of
# shim_comms, and that its stats files count what it served
expect_lines() {
  local name=$1 r sb snb ob onb ib inb db dnb k
  for ((r = 0; r < n; r++)); do
    read -r sb snb ob onb ib inb db dnb k < <(sed -n "s/^expect rank $r: served \([0-9]*\) \([0-9]*\); one rank \([0-9]*\) \([0-9]*\); inter-communicator \([0-9]*\) \([0-9]*\); datatype \([0-9]*\) \([0-9]*\); communicators \([0-9]*\)$/\1 \2 \3 \4 \5 \6 \7 \8 \9/p" "$tmp/$name.out")
    if [ -z "${k:-}" ]; then bad "$name: no expect line for rank $r"; continue; fi
    report "$name" "$r" "$sb/$snb" "$k" 0/0 "$ib/$inb" "$ob/$onb" 0/0 "$db/$dnb" 0/0 0/0 0
    c=$(stats_sum "$r")
    [ "$c" = $((sb + snb)) ] && ok "$name: rank $r: the stats files count $c calls" ||
      bad "$name: rank $r: the stats files count $c calls, expected $((sb + snb))"
    k=""
  done
}

case $mode in
exact|thread)
  # the split's halves hold n/2 ranks: served from two up, else MPI's (one rank)
  args=(exact); [ "$mode" = thread ] && args=(exact multiple)
  run "$mode" GCOMP_STATS="$tmp/stats-%r.json" GCOMP_DEBUG=info GCOMP_DEBUG_SUBSYS=shim -- "$prog" "${args[@]}"
  passed "$mode"
  calls "$mode"
  [ "$mode" = thread ] && { grep -q '^thread level: multiple' "$tmp/$mode.out" ||
    echo "MPI_THREAD_MULTIPLE not granted: served as usual"; }
  if [ $((n / 2)) -ge 2 ]; then served=$((world + dup + split)) one=0 k=3
  else served=$((world + dup)) one=$split k=2; fi
  for ((r = 0; r < n; r++)); do
    c=$(stats_calls "$r")
    [ "$c" = $((world + iall)) ] && ok "$mode: rank $r: world's gcomp communicator ran $c calls" ||
      bad "$mode: rank $r: world's GCOMP_STATS calls '${c}', expected $((world + iall))"
    c=$(stats_sum "$r")
    [ "$c" = $((served + iall)) ] && ok "$mode: rank $r: all its gcomp communicators ran $c calls" ||
      bad "$mode: rank $r: GCOMP_STATS files count $c calls, expected $((served + iall))"
    report "$mode" "$r" "$served/$iall" "$k" 0/0 0/0 "$one/0" 0/0 "$dtype/0" "$op/0" 0/0 0
  done
  ;;
bf16)
  # two emulated nodes: ranks 0..n/2-1 and n/2..n-1
  half=$((n / 2))
  run bf16 GCOMP_CODEC=bf16 GCOMP_ALPHA_BETA=2,5,50,0.125 GCOMP_STATS="$tmp/stats-%r.json" \
    GCOMP_TRACE="$tmp/trace-%r.json" GCOMP_DEBUG=info GCOMP_DEBUG_SUBSYS=shim -- \
    sh -c "GCOMP_NODE_ID=node\$((OMPI_COMM_WORLD_RANK / $half)) exec \"\$0\" \"\$@\"" "$prog" lossy
  passed bf16
  grep '^lossy:' "$tmp/bf16.out" | sed 's/^/    /'
  calls bf16
  for ((r = 0; r < n; r++)); do
    c=$(stats_calls "$r")
    [ "$c" = "$world" ] && ok "bf16: rank $r: gcomp served $c calls" ||
      bad "bf16: rank $r: GCOMP_STATS calls '${c}', expected $world"
    report bf16 "$r" "$world/0" 1 0/0 0/0 0/0 0/0 0/0 "$op/0" 0/0 0
  done
  if grep -q '"nodes": 2' "$tmp/stats-0.json" 2>/dev/null; then ok "bf16: two nodes"
  else bad "bf16: not two nodes: $(cat "$tmp/stats-0.json" 2>/dev/null)"; fi
  # every call is at least 64 KiB of floats: each must have run a compressed algorithm
  algos=$(grep -o '"allreduce [a-z-]*"' "$tmp/trace-0.json" 2>/dev/null | sort | uniq -c | tr -s ' ')
  plain=$(grep -o '"allreduce [a-z-]*"' "$tmp/trace-0.json" 2>/dev/null | grep -cvE 'direct|sparse')
  if [ -n "$algos" ] && [ "$plain" -eq 0 ]; then ok "bf16: algorithms:$(echo $algos)"
  else bad "bf16: uncompressed algorithms ran:$(echo $algos)"; fi
  ;;
silent)
  for how in fatal return; do
    start=$(date +%s)
    run "silent-$how" GCOMP_TIMEOUT_MS=2000 -- "$prog" silent $how
    took=$(($(date +%s) - start))
    [ "$rc" -ne 0 ] && [ "$took" -lt 40 ] && ok "silent-$how: the job ended (exit $rc) in $took s" ||
      { bad "silent-$how: exit $rc after $took s"; show "silent-$how"; }
    if grep -q "gcomp WARN shim .*MPI_Allreduce of 262144 elements failed in gcomp: GCOMP_ERR_TIMEOUT.*rank $((n - 1))" "$tmp/silent-$how.err"; then
      ok "silent-$how: $(grep -o 'failed in gcomp: .*' "$tmp/silent-$how.err" | head -1)"
    else bad "silent-$how: no shim warning naming rank $((n - 1))"; show "silent-$how"; fi
  done
  # MPI_ERRORS_RETURN: the callers got an error back, after about the timeout
  if grep -qE "^rank [0-9]+: MPI_Allreduce returned .* after (1[5-9][0-9][0-9]|[2-9][0-9][0-9][0-9]) ms" "$tmp/silent-return.out" &&
     ! grep -q "returned MPI_SUCCESS" "$tmp/silent-return.out"; then
    ok "silent-return: $(grep -m1 '^rank' "$tmp/silent-return.out")"
  else bad "silent-return: no error handed back"; show silent-return; fi
  ;;
badbuf)
  run badbuf NO_TIMEOUT GCOMP_STATS="$tmp/stats-%r.json" GCOMP_DEBUG=info GCOMP_DEBUG_SUBSYS=shim -- "$prog" badbuf shim
  passed badbuf
  for ((r = 0; r < n; r++)); do
    c=$(stats_calls "$r")
    [ "$c" = 3 ] && ok "badbuf: rank $r: gcomp served the 3 good calls" ||
      { bad "badbuf: rank $r: GCOMP_STATS calls '${c}', expected 3"; show badbuf; }
    grep -q "gcomp INFO shim .*rank $r: gcomp served 3 MPI_Allreduce and 0 MPI_Iallreduce .*; to MPI: .*bad arguments 2/0, MPI faster 0/0, timing MPI 0/0, GCOMP_SHIM_ROUTE=mpi 0/0); refused (NULL buffers): 2$" "$tmp/badbuf.err" &&
      ok "badbuf: rank $r: the 4 bad calls went back as errors (2 from MPI, 2 from the shim)" || { bad "badbuf: rank $r's report"; show badbuf; }
  done
  grep -q "gcomp INFO shim .*a late rank is waited for 1800000 ms" "$tmp/badbuf.err" &&
    ok "badbuf: without GCOMP_TIMEOUT_MS a late rank is waited for 30 min" ||
    { bad "badbuf: no 30-minute wait for late ranks"; show badbuf; }
  ;;
fallback)
  # a malformed codec spec (the parameters themselves are fine: GCOMP_DEBUG=info holds)
  run spec GCOMP_CODEC=bf17 GCOMP_STATS="$tmp/stats-%r.json" GCOMP_DEBUG=info GCOMP_DEBUG_SUBSYS=shim,init -- "$prog" exact
  passed spec
  calls spec
  w=$(grep -c 'gcomp WARN shim .*gcomp could not start: .*GCOMP_CODEC.*bf17.*goes to MPI unchanged' "$tmp/spec.err")
  [ "$w" -eq 1 ] && ok "spec: one warning: $(grep -o 'gcomp could not start.*' "$tmp/spec.err")" ||
    { bad "spec: $w warnings naming GCOMP_CODEC, expected 1"; show spec; }
  ls "$tmp"/stats-*.json >/dev/null 2>&1 && bad "spec: gcomp wrote stats: it ran" || ok "spec: no gcomp communicator"
  for ((r = 0; r < n; r++)); do
    report spec "$r" 0/0 0 $((world + dup + split))/$iall 0/0 0/0 0/0 "$dtype/0" "$op/0" 0/0 0
  done

  # a malformed parameter: gcomp_init fails on every rank
  run param GCOMP_TIMEOUT_MS=soon GCOMP_STATS="$tmp/stats-%r.json" -- "$prog" exact
  passed param
  w=$(grep -c 'gcomp WARN shim .*gcomp could not start: .*GCOMP_TIMEOUT_MS.*soon.*goes to MPI unchanged' "$tmp/param.err")
  [ "$w" -eq 1 ] && ok "param: one warning from the shim" || { bad "param: $w shim warnings, expected 1"; show param; }
  ls "$tmp"/stats-*.json >/dev/null 2>&1 && bad "param: gcomp wrote stats: it ran" || ok "param: no gcomp communicator"

  # strict mode: the job stops, saying why
  run strict GCOMP_CODEC=bf17 GCOMP_SHIM_STRICT=1 -- "$prog" exact
  if [ "$rc" -ne 0 ] && grep -q 'gcomp could not start: .*bf17.*GCOMP_SHIM_STRICT=1: aborting' "$tmp/strict.err" &&
     ! grep -q '^shim_check:' "$tmp/strict.out"; then ok "strict: the job stopped (exit $rc)"
  else bad "strict: exit $rc"; show strict; fi
  ;;
comms)
  run comms GCOMP_STATS="$tmp/stats-%r.json" GCOMP_DEBUG=info GCOMP_DEBUG_SUBSYS=shim -- "$comms" exact multiple
  [ "$rc" -eq 0 ] && grep -q '^shim_comms: PASS' "$tmp/comms.out" && ok "comms: results exact" ||
    { bad "comms: exit $rc"; show comms; }
  grep -q '^thread level: multiple' "$tmp/comms.out" || bad "comms: MPI_THREAD_MULTIPLE not granted"
  expect_lines comms
  ;;
lossy)
  half=$((n / 2))
  run lossy GCOMP_CODEC=bf16 GCOMP_ALPHA_BETA=2,5,50,0.125 GCOMP_STATS="$tmp/stats-%r.json" \
    GCOMP_DEBUG=info GCOMP_DEBUG_SUBSYS=shim -- \
    sh -c "GCOMP_NODE_ID=node\$((OMPI_COMM_WORLD_RANK / $half)) exec \"\$0\" \"\$@\"" "$comms" lossy multiple
  [ "$rc" -eq 0 ] && grep -q '^shim_comms: PASS' "$tmp/lossy.out" && ok "lossy: within bf16's bound" ||
    { bad "lossy: exit $rc"; show lossy; }
  for c in dup split created; do
    l=$(grep "^lossy: $c: " "$tmp/lossy.out")
    [ -n "$l" ] && ok "$l" || bad "lossy: no inexact results reported on $c"
  done
  expect_lines lossy
  ;;
errors)
  # fatal: the first rank to time out ends the job, and it may be one whose own peer is a
  # rank still waiting for the silent one (a ring), so only the timeout is required of it;
  # with return every rank but the silent one reports before the job ends
  for how in fatal return; do
    run "errors-$how" GCOMP_TIMEOUT_MS=2000 -- "$comms" silent $how
    who=$([ $how = return ] && echo ".*rank $((n - 1))")
    grep -q "gcomp WARN shim .*MPI_Iallreduce of 262144 elements failed in gcomp: GCOMP_ERR_TIMEOUT$who" "$tmp/errors-$how.err" &&
      ok "errors-$how: the shim reports the timeout${who:+, naming the silent rank}" || { bad "errors-$how: no timeout warning${who:+ naming rank $((n - 1))}"; show "errors-$how"; }
  done
  [ "$rc" -ne 0 ] || bad "errors-return: the job did not end"
  # the dup's handler (MPI_ERRORS_RETURN-like, counting) ran: MPI_Wait returned an error after
  # about the timeout, then MPI_Waitall MPI_ERR_IN_STATUS with MPI_ERR_OTHER's class
  if grep -qE "^rank [0-9]+: MPI_Wait returned .* after (1[5-9][0-9][0-9]|[2-9][0-9][0-9][0-9]) ms; the dup's handler ran 1 time\(s\), class ([0-9]+) \(MPI_ERR_OTHER \2\)" "$tmp/errors-return.out" &&
     grep -qE "^rank [0-9]+: then MPI_Waitall returned MPI_ERR_IN_STATUS, status class ([0-9]+); the handler ran 2 time" "$tmp/errors-return.out" &&
     ! grep -q "MPI_Wait returned MPI_SUCCESS" "$tmp/errors-return.out"; then
    ok "errors-return: $(grep -m1 '^rank .*MPI_Wait' "$tmp/errors-return.out")"
  else bad "errors-return: the dup's handler, MPI_Wait and MPI_Waitall"; show errors-return; fi
  # every rank but the silent one: MPI_Waitany's error through the dup's handler; a failed
  # call completed after MPI_Comm_free of its communicator reported through world's handler
  k=$(grep -cE "^rank [0-9]+: then MPI_Waitany returned MPI_ERR_OTHER, index 1; the handler ran 3 time" "$tmp/errors-return.out")
  [ "$k" = $((n - 1)) ] && ok "errors-return: MPI_Waitany's error on $k ranks" ||
    { bad "errors-return: MPI_Waitany's error ($k of $((n - 1)) ranks)"; show errors-return; }
  k=$(grep -cE "^rank [0-9]+: after MPI_Comm_free MPI_Wait returned an error; world's handler ran 1 time\(s\), the dup's 3$" "$tmp/errors-return.out")
  [ "$k" = $((n - 1)) ] && ok "errors-return: a freed communicator's failure through world's handler on $k ranks" ||
    { bad "errors-return: a freed communicator's failure ($k of $((n - 1)) ranks)"; show errors-return; }
  ;;
route)
  # GCOMP_SHIM_ROUTE=auto: each size's first calls go to gcomp, then as many to MPI (the
  # first of each a warm-up, then 8 timed calls each up to 64 KiB, 4 above), the ranks agree on a
  # route, and after 256 calls of that size the trial runs again (8 B is called 300 times:
  # twice). Every rank must log the same routes, and the counts must follow exactly from
  # them, whatever the times were (which this test cannot know).
  run auto GCOMP_SHIM_ROUTE=auto GCOMP_STATS="$tmp/stats-%r.json" GCOMP_DEBUG=info GCOMP_DEBUG_SUBSYS=shim -- "$prog" route
  passed auto
  calls auto
  for ((r = 0; r < n; r++)); do
    log=$(routes_of auto "$r")
    agreed auto "$r" "$log" 6 || continue
    # 8 B is called 300 times (two trials), the other sizes 30; then one MPI_Iallreduce each
    replay "$log" MPI_Allreduce 8-15:300:1 64-127:30:1 4096-8191:30:1 65536-131071:30:1 1048576-2097151:30:1
    report auto "$r" "$served/$nserved" 1 0/0 0/0 0/0 0/0 "$dtype/0" "$op/0" 0/0 0 "$faster/$nfaster" "$timing/0"
    c=$(stats_calls "$r")
    [ "$c" = $((served + nserved)) ] && ok "auto: rank $r: gcomp ran the $c calls routed to it" ||
      bad "auto: rank $r: GCOMP_STATS calls '${c}', expected $((served + nserved))"
  done
  [ "$world" = 420 ] || bad "auto: $world calls, expected 420"

  # GCOMP_SHIM_ROUTE=mpi: every call gcomp could serve goes to MPI, counted as asked
  run mpi GCOMP_SHIM_ROUTE=mpi GCOMP_STATS="$tmp/stats-%r.json" GCOMP_DEBUG=info GCOMP_DEBUG_SUBSYS=shim -- "$prog" route
  passed mpi
  calls mpi
  for ((r = 0; r < n; r++)); do
    report mpi "$r" 0/0 1 0/0 0/0 0/0 0/0 "$dtype/0" "$op/0" 0/0 0 0/0 0/0 "$world/$iall"
    c=$(stats_calls "$r")
    [ "$c" = 0 ] && ok "mpi: rank $r: gcomp ran no call" || bad "mpi: rank $r: GCOMP_STATS calls '${c}'"
  done
  ;;
repeat)
  # 40 calls on world, 40 on a dup, 3 on a second dup made after the first was freed (and
  # the user op): gcomp serves the 83 under GCOMP_SHIM_ROUTE=gcomp on 3 communicators, MPI
  # takes them under =mpi; under =auto (routes by timing) the results and look-ups only
  for route in gcomp mpi auto; do
    run "repeat-$route" GCOMP_SHIM_ROUTE=$route GCOMP_DEBUG=info GCOMP_DEBUG_SUBSYS=shim -- "$prog" repeat shim
    passed "repeat-$route"
    calls "repeat-$route"
    [ "$world/$dup" = 40/43 ] || bad "repeat-$route: calls: world $world, dups $dup"
  done
  for ((r = 0; r < n; r++)); do
    report repeat-gcomp "$r" 83/0 3 0/0 0/0 0/0 0/0 0/0 1/0 0/0 0
    report repeat-mpi "$r" 0/0 3 0/0 0/0 0/0 0/0 0/0 1/0 0/0 0 0/0 0/0 83/0
  done
  ;;
collroute)
  # GCOMP_SHIM_ROUTE=auto for the other collectives: each has its own route per size, timed
  # and agreed as MPI_Allreduce's. shim_coll route makes 30 blocking calls of each at 8 B
  # and 16 KiB (the barrier: 30), then 2 non-blocking ones; every rank must log the same
  # routes, and each collective's report line must count exactly what its routes imply.
  run croute GCOMP_SHIM_ROUTE=auto GCOMP_STATS="$tmp/stats-%r.json" GCOMP_DEBUG=info \
    GCOMP_DEBUG_SUBSYS=shim -- "$coll" route
  [ "$rc" -eq 0 ] && grep -q '^shim_coll: PASS' "$tmp/croute.out" &&
    ok "croute: every result bitwise MPI's" || { bad "croute: exit $rc"; show croute; }
  for ((r = 0; r < n; r++)); do
    log=$(routes_of croute "$r")
    agreed croute "$r" "$log" 11 || continue
    total=0
    for kind in MPI_Reduce_scatter_block MPI_Reduce_scatter MPI_Allgather MPI_Bcast MPI_Barrier MPI_Alltoall; do
      if [ $kind = MPI_Barrier ]; then replay "$log" $kind 0-1:30:2
      else replay "$log" $kind 8-15:30:2 16384-32767:30:2; fi
      why=""
      [ $((faster + nfaster)) != 0 ] && why="MPI faster $faster/$nfaster"
      [ "$timing" != 0 ] && why="${why:+$why, }timing MPI $timing/0"
      ikind="MPI_I$(echo "${kind:4:1}" | tr A-Z a-z)${kind:5}"
      want="rank $r: gcomp served $served $kind and $nserved $ikind; to MPI: $((faster + timing)) and $nfaster (${why:-none})"
      if grep -F "$want" "$tmp/croute.err" | grep -q "gcomp INFO shim .*$want\$"; then ok "croute: $want"
      else
        bad "croute: the report does not say: $want"
        grep "INFO shim .*rank $r: gcomp served" "$tmp/croute.err" | sed 's/^/    /'
      fi
      total=$((total + served + nserved))
    done
    c=$(stats_sum "$r")
    [ "$c" = "$total" ] && ok "croute: rank $r: the stats files count the $c calls routed to gcomp" ||
      bad "croute: rank $r: the stats files count $c calls, expected $total"
    [ "$r" = 0 ] || continue
    # rank 0 alone says at MPI_Init that the shim is active and how it routes, and at
    # MPI_Finalize where each collective's sizes went (the crossovers), as it logged them
    n_up=$(grep -c "gcomp INFO shim .*active on $n ranks: gcomp serves .*route auto: " "$tmp/croute.err")
    [ "$n_up" = 1 ] && ok "croute: one start-up line" || bad "croute: $n_up start-up lines"
    want="communicator world: the sizes' last agreed routes: " sep=""
    for kind in MPI_Reduce_scatter_block MPI_Reduce_scatter MPI_Allgather MPI_Bcast MPI_Barrier MPI_Alltoall; do
      want+="$sep$kind" sep="; "
      c=""
      for cls in 0-1 8-15 16384-32767; do
        via=$(echo "$log" | sed -n "s/^$kind $cls B to //p" | tail -1)
        [ -n "$via" ] && want+="$c $cls B $via" c=","
      done
    done
    n_sum=$(grep -F "$want" "$tmp/croute.err" | grep -c "gcomp INFO shim .*$want\$")
    [ "$n_sum" = 1 ] && ok "croute: rank 0's crossovers at MPI_Finalize: ${want#*: }" ||
      { bad "croute: $n_sum lines say: $want"; grep "last agreed" "$tmp/croute.err" | sed 's/^/    /'; }
  done
  ;;
coll)
  # every call gcomp can serve goes to it (GCOMP_SHIM_ROUTE=gcomp), or none (mpi)
  for route in gcomp mpi; do
    name=coll-$route
    rm -f "$tmp"/stats-*.json
    run "$name" GCOMP_SHIM_ROUTE=$route GCOMP_STATS="$tmp/stats-%r.json" GCOMP_DEBUG=info \
      GCOMP_DEBUG_SUBSYS=shim -- "$coll" $([ $route = mpi ] && echo mpi)
    [ "$rc" -eq 0 ] && grep -q '^shim_coll: PASS' "$tmp/$name.out" &&
      ok "$name: every result bitwise MPI's" || { bad "$name: exit $rc"; show "$name"; }
    for ((r = 0; r < n; r++)); do
      lines=$(grep -c "^expect rank $r: gcomp served" "$tmp/$name.out")
      [ "$lines" = 6 ] || bad "$name: rank $r: $lines expect lines, not 6"
      total=0
      while read -r want; do
        if grep -F "$want" "$tmp/$name.err" | grep -q "gcomp INFO shim .*$want\$"; then
          ok "$name: $want"
        else
          bad "$name: the report does not say: $want"
          grep "INFO shim .*rank $r: gcomp served" "$tmp/$name.err" | sed 's/^/    /'
        fi
        read -r b nb < <(echo "$want" | sed 's/.*gcomp served \([0-9]*\) [A-Za-z_]* and \([0-9]*\) .*/\1 \2/')
        total=$((total + b + nb))
      done < <(sed -n "s/^expect //p" "$tmp/$name.out" | grep "^rank $r: ")
      [ $route = mpi ] && [ "$total" != 0 ] && bad "$name: rank $r: $total calls expected served"
      c=$(stats_sum "$r")
      [ "$c" = "$total" ] && ok "$name: rank $r: the stats files count the $c served calls" ||
        bad "$name: rank $r: the stats files count $c calls, expected $total"
    done
  done
  ;;
*)
  echo "usage: shim_test.sh exact|thread|bf16|badbuf|fallback|silent|comms|lossy|errors|route|coll|collroute RANKS PRELOAD SHIM_CHECK [SHIM_COMMS [SHIM_COLL]]" >&2
  exit 2
  ;;
esac

[ "$fails" -eq 0 ] && echo "shim_test $mode: all passed" || echo "shim_test $mode: $fails failed"
[ "$fails" -eq 0 ]
