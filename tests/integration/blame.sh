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
