# shellcheck shell=bash
# Sourced by the fault tests: does every survivor's error name the victim, and does it come in time?
#   blame_check OUT N VICTIM SELFTAG
# OUT holds gcomp-run --tag-output lines; rank r's error is its line matching
# "[r] ... rank r: <SELFTAG>". A rank's error names the peer it waited on ("receive from
# rank 2", "local rank 0 (rank 2)") and, after the failure exchange (reduce/abort.c's
# gcomp_abort_blame), the ranks that did not answer or had exited: so even a survivor stuck
# behind another survivor names the victim (its "failed too: ..." list does not count: a
# rank listed there answered). Prints what each names, one FAIL line per survivor that does
# not name it, and returns their number.
blame_names() {   # the ranks rank $2's error line in $1 names, itself excluded
  grep "^\[$2\] .*rank $2: $3" "$1" | head -1 | sed 's/local rank [0-9]*//g; s/failed too: [^;]*;//' |
    grep -o "rank [0-9]*" | awk -v me="$2" '$2 != me {print $2}' | sort -u | tr '\n' ' '
}
blame_check() {
  local out=$1 n=$2 victim=$3 tag=$4 bad=0 r names
  for r in $(seq 0 $((n - 1))); do
    [ $r = $victim ] && continue
    names=$(blame_names "$out" $r "$tag")
    echo "rank $r names: ${names:-nothing}"
    case " $names" in *" $victim "*) ;; *)
      echo "FAIL: rank $r's error does not name rank $victim"; bad=$((bad + 1)) ;;
    esac
  done
  return $bad
}
# Does every rank that printed "destroyed after the failure in X ms" (allreduce_check) keep
# gcomp.h's promise, at most 1 s of goodbyes after a failure, plus SLACK_MS?
#   destroy_check OUT SLACK_MS [CHECK_NAME]   (default allreduce_check)
# Returns the number of ranks over; a job whose ranks printed no such line fails too.
destroy_check() {
  local out=$1 slack=$2 who=${3:-allreduce_check} bad=0 seen=0 r ms
  while read -r r ms; do
    seen=$((seen + 1))
    [ "$ms" -le $((1000 + slack)) ] ||
      { echo "FAIL: rank $r took $ms ms to destroy its failed communicator (1 s promised)"; bad=$((bad + 1)); }
  done < <(sed -n "s/^\[\([0-9]*\)\] $who: rank [0-9]*: destroyed after the failure in \([0-9]*\) ms\$/\1 \2/p" "$out")
  [ $seen -gt 0 ] || { echo "FAIL: no rank reported destroying its failed communicator"; bad=1; }
  return $bad
}
# The job's lines as they reach the script, each prefixed with the script's clock in ms:
#   "$run" ... 2>&1 | stamp >"$stamped"
# The bounds below are taken from outside the ranks: a rank's own "error after" starts at
# its failing call, so time it lost in calls before that (or after, in destroy) would not show.
stamp() {
  local line
  while IFS= read -r line; do printf '%s %s\n' "$(( ${EPOCHREALTIME/./} / 1000 ))" "$line"; done
}
unstamp() { cut -d' ' -f2- "$1"; }
# Does every survivor's error, and its exit, reach the script within BOUND_MS of the fault?
#   arrival_check STAMPED N VICTIM EVENT BOUND_MS [CHECK_NAME]
# EVENT: an extended regex of the line that marks the fault (gcomp-run's report of the
# victim's death, or the victim's "stopping"); rank r's error is its "rank r: error after"
# line and its exit the line its check prints last ("destroyed after the failure"), which
# gcomp.h lets come up to 1 s later. Prints each survivor's two figures; returns the number
# of survivors over (or with a line missing).
arrival_check() {
  local stamped=$1 n=$2 victim=$3 event=$4 bound=$5 who=${6:-allreduce_check} bad=0 t0 te tx r
  t0=$(grep -m1 -E "^[0-9]+ $event" "$stamped" | cut -d' ' -f1)
  [ -n "$t0" ] || { echo "FAIL: no line marks the fault (/$event/)"; return 1; }
  for r in $(seq 0 $((n - 1))); do
    [ "$r" = "$victim" ] && continue
    te=$(grep -m1 "^[0-9]* \[$r\] $who: rank $r: error after" "$stamped" | cut -d' ' -f1)
    tx=$(grep -m1 "^[0-9]* \[$r\] $who: rank $r: destroyed after the failure" "$stamped" | cut -d' ' -f1)
    if [ -z "$te" ] || [ -z "$tx" ]; then
      echo "FAIL: rank $r: no error or no exit line reached the script"; bad=$((bad + 1)); continue
    fi
    echo "rank $r: error $((te - t0)) ms, exit $((tx - t0)) ms after the fault (script's clock)"
    [ $((te - t0)) -le "$bound" ] && [ $((tx - t0)) -le $((bound + 1000)) ] ||
      { echo "FAIL: rank $r: over $bound ms (exit: $((bound + 1000)) ms)"; bad=$((bad + 1)); }
  done
  return $bad
}
# Does every survivor's error reach the script within SPREAD_MS of the first survivor's?
#   spread_check STAMPED N VICTIM SPREAD_MS [CHECK_NAME]
# The rank that finds the fault tells the others (reduce/abort.c's notice), so a survivor
# stuck behind another survivor fails with it, not when that one exits (its destroy takes up
# to 1 s more) or at its own GCOMP_TIMEOUT_MS. Both ends of the spread are on the script's
# clock and after the fault, so it holds however late the fault was found. Prints the spread;
# returns 1 when it is over (or a line is missing).
spread_check() {
  local stamped=$1 n=$2 victim=$3 bound=$4 who=${5:-allreduce_check} first= last= r te
  for r in $(seq 0 $((n - 1))); do
    [ "$r" = "$victim" ] && continue
    te=$(grep -m1 "^[0-9]* \[$r\] $who: rank $r: error after" "$stamped" | cut -d' ' -f1)
    [ -n "$te" ] || { echo "FAIL: rank $r: no error line reached the script"; return 1; }
    if [ -z "$first" ] || [ "$te" -lt "$first" ]; then first=$te; fi
    if [ -z "$last" ] || [ "$te" -gt "$last" ]; then last=$te; fi
  done
  echo "survivors' errors spread over $((last - first)) ms (script's clock; bound $bound ms)"
  [ $((last - first)) -le "$bound" ] ||
    { echo "FAIL: the last survivor's error came $((last - first)) ms after the first's"; return 1; }
}
