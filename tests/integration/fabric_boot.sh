#!/usr/bin/env bash
# Bootstrap from each launcher's variables, and the rendezvous refusing what it must refuse.
#   fabric_boot.sh FABRIC_P2P
set -u
prog=$1
for v in $(compgen -e | grep -E '^(GCOMP_|RANK$|WORLD_SIZE$|LOCAL_RANK$|MASTER_|OMPI_COMM_WORLD|PMI_|SLURM_)'); do unset "$v"; done
# generous for the jobs that must work (mpirun and ASan start slowly on a loaded machine),
# short for the ones that must time out
export GCOMP_TIMEOUT_MS=30000
short=2500
tmp=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$tmp"' EXIT
fails=0
# A rendezvous port below Linux's ephemeral range (32768-60999 by default), which the
# connections of tests running beside this one draw from (one of them once held the port
# this picked), and free right now.
port() {
  local p i
  for i in $(seq 1 50); do
    p=$((20000 + (RANDOM * 7 + $$ + i) % 12000))
    python3 -c 'import socket,sys; s=socket.socket(); s.bind(("", int(sys.argv[1])))' "$p" \
      2>/dev/null && { echo "$p"; return; }
  done
  echo "$p"
}
ok() { echo "PASS: $*"; }
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }

# expect_boot NAME LOGFILE... : every log must show a complete, consistent bootstrap
expect_boot() {
  local name=$1; shift
  local f n=$#
  for f in "$@"; do
    if ! grep -q "^boot rank [0-9]* size $n local [0-9]*/$n node 0/1" "$f"; then
      bad "$name: $(basename "$f"): $(cat "$f")"; return
    fi
  done
  local ranks
  ranks=$(cat "$@" | sed -n 's/^boot rank \([0-9]*\) .*/\1/p' | sort -n | tr '\n' ' ')
  [ "$ranks" = "$(seq -s ' ' 0 $((n - 1))) " ] && ok "$name ($n ranks)" || bad "$name: ranks seen: $ranks"
}

# 1. torchrun's variables: gcomp meets on MASTER_PORT + 1 (torch's store holds MASTER_PORT,
# here a listener standing in for it)
p=$(port)
python3 -c 'import socket,sys,time; s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("", int(sys.argv[1]))); s.listen(8); time.sleep(30)' \
  "$((p - 1))" 2>/dev/null &
store=$!
sleep 0.2
pids=()
for r in 0 1; do
  env RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=$((p - 1)) GCOMP_JOB_TOKEN=t1 \
    "$prog" boot >"$tmp/torch.$r" 2>&1 &
  pids+=($!)
done
wait "${pids[@]}"
kill $store 2>/dev/null
wait $store 2>/dev/null
expect_boot torchrun "$tmp/torch.0" "$tmp/torch.1"

# 2. PMI's and 3. Slurm's (with GCOMP_ROOT: neither gives an address)
p=$(port)
for r in 0 1 2; do
  env PMI_RANK=$r PMI_SIZE=3 GCOMP_ROOT=127.0.0.1:$p GCOMP_JOB_TOKEN=t2 "$prog" boot >"$tmp/pmi.$r" 2>&1 &
done
wait
expect_boot PMI "$tmp/pmi.0" "$tmp/pmi.1" "$tmp/pmi.2"
p=$(port)
for r in 0 1; do
  env SLURM_PROCID=$r SLURM_NTASKS=2 SLURM_LOCALID=$r GCOMP_ROOT=localhost:$p GCOMP_JOB_TOKEN=t3 \
    "$prog" boot >"$tmp/slurm.$r" 2>&1 &
done
wait
expect_boot Slurm "$tmp/slurm.0" "$tmp/slurm.1"

# 4. Open MPI's, through mpirun itself
if command -v mpirun >/dev/null; then
  p=$(port)
  mpirun --allow-run-as-root --oversubscribe -n 2 -x GCOMP_ROOT=127.0.0.1:$p -x GCOMP_JOB_TOKEN=t4 \
    -x GCOMP_TIMEOUT_MS --output-filename "$tmp/ompi" "$prog" boot >"$tmp/ompi.log" 2>&1
  files=$(find "$tmp/ompi" -name 'stdout' 2>/dev/null | sort)
  if [ "$(echo "$files" | grep -c .)" = 2 ]; then
    expect_boot "Open MPI (mpirun)" $files
  else
    bad "Open MPI (mpirun): no per-rank output: $(cat "$tmp/ompi.log")"
  fi
else
  echo "SKIP: Open MPI: mpirun not installed"
fi

# 5. a wrong token is refused; the root then times out naming the missing rank
export GCOMP_TIMEOUT_MS=$short
p=$(port)
env GCOMP_RANK=0 GCOMP_SIZE=2 GCOMP_ROOT=127.0.0.1:$p GCOMP_JOB_TOKEN=right "$prog" boot >"$tmp/tok.0" 2>&1 &
sleep 0.2
env GCOMP_RANK=1 GCOMP_SIZE=2 GCOMP_ROOT=127.0.0.1:$p GCOMP_JOB_TOKEN=wrong "$prog" boot >"$tmp/tok.1" 2>&1
rc1=$?
wait $!; rc0=$?
if [ $rc1 = 3 ] && grep -q "refused us: wrong job token" "$tmp/tok.1" && [ $rc0 = 3 ] &&
   grep -q "refused .*wrong job token" "$tmp/tok.0" && grep -q "never arrived.*rank 1" "$tmp/tok.0"; then
  ok "wrong token refused, root times out naming rank 1"
else
  bad "wrong token: rc $rc0/$rc1: $(cat "$tmp/tok.0" "$tmp/tok.1")"
fi

# 6. a rank that never arrives: a clear timeout on the root and on the ranks that came
p=$(port)
start=$(date +%s%N)
for r in 0 1; do
  env GCOMP_RANK=$r GCOMP_SIZE=3 GCOMP_ROOT=127.0.0.1:$p GCOMP_JOB_TOKEN=t6 "$prog" boot >"$tmp/miss.$r" 2>&1 &
done
wait
ms=$(( ($(date +%s%N) - start) / 1000000 ))
if grep -q "GCOMP_ERR_TIMEOUT.*1 of 3 ranks never arrived.*rank 2" "$tmp/miss.0" &&
   grep -q "root.*gave up.*rank 2" "$tmp/miss.1"; then
  ok "missing rank 2 reported by root and rank 1 (${ms} ms, GCOMP_TIMEOUT_MS=$GCOMP_TIMEOUT_MS)"
else
  bad "missing rank: $(cat "$tmp/miss.0" "$tmp/miss.1")"
fi

# 7. a duplicate rank and a stranger are refused; the real job still runs (rank 2 comes
# last, so the root is still admitting when the duplicate knocks)
export GCOMP_TIMEOUT_MS=30000
p=$(port)
env GCOMP_DEBUG=info GCOMP_DEBUG_SUBSYS=fabric GCOMP_RANK=0 GCOMP_SIZE=3 GCOMP_ROOT=127.0.0.1:$p GCOMP_JOB_TOKEN=t7 "$prog" boot >"$tmp/dup.0" 2>&1 &
pid0=$!
env GCOMP_RANK=1 GCOMP_SIZE=3 GCOMP_ROOT=127.0.0.1:$p GCOMP_JOB_TOKEN=t7 "$prog" boot >"$tmp/dup.1" 2>&1 &
pid1=$!
for i in $(seq 100); do grep -q "admitted rank 1" "$tmp/dup.0" 2>/dev/null && break; sleep 0.1; done
# a stranger speaking something else
(exec 3<>/dev/tcp/127.0.0.1/$p && printf 'GET / HTTP/1.0\r\n\r\n' >&3 && sleep 0.2) 2>/dev/null
env GCOMP_RANK=1 GCOMP_SIZE=3 GCOMP_ROOT=127.0.0.1:$p GCOMP_JOB_TOKEN=t7 "$prog" boot >"$tmp/dup.2" 2>&1
rc2=$?
env GCOMP_RANK=2 GCOMP_SIZE=3 GCOMP_ROOT=127.0.0.1:$p GCOMP_JOB_TOKEN=t7 "$prog" boot >"$tmp/dup.3" 2>&1
rc3=$?
wait $pid0; rc0=$?
wait $pid1; rc1=$?
if [ $rc0 = 0 ] && [ $rc1 = 0 ] && [ $rc3 = 0 ] && [ $rc2 = 3 ] &&
   grep -q "refused.*not a gcomp rank" "$tmp/dup.0" && grep -q "refused us: duplicate rank 1" "$tmp/dup.2"; then
  ok "stranger and duplicate rank refused, job completed"
else
  bad "duplicate/stranger: rc $rc0/$rc1/$rc2/$rc3: $(cat "$tmp/dup.0" "$tmp/dup.1" "$tmp/dup.2" "$tmp/dup.3")"
fi

[ $fails = 0 ] && echo "fabric_boot: all passed" || echo "fabric_boot: $fails failed"
exit $((fails > 0))
