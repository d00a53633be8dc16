# shellcheck shell=bash
# Sourced by the fault tests: does every survivor's error name the victim?
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
