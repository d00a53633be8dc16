# Sourced by the fault tests: does every survivor's error lead to the victim?
#   blame_check OUT N VICTIM SELFTAG
# OUT holds gcomp-run --tag-output lines; rank r's error is its line matching
# "[r] ... rank r: <SELFTAG>". A rank's error names the peers it waited on ("receive from
# rank 2", "local rank 0 (rank 2)"): a survivor stuck behind another survivor names that
# one. Every survivor must name the victim, or name a survivor whose error leads to it;
# prints what each names, and one FAIL line per survivor that leads elsewhere. Returns the
# number of such survivors.
blame_names() {   # the ranks rank $2's error line in $1 names, itself excluded
  grep "^\[$2\] .*rank $2: $3" "$1" | head -1 | sed 's/local rank [0-9]*//g' |
    grep -o "rank [0-9]*" | awk -v me="$2" '$2 != me {print $2}' | sort -u | tr '\n' ' '
}
blame_check() {
  local out=$1 n=$2 victim=$3 tag=$4 bad=0 r
  declare -A names
  for r in $(seq 0 $((n - 1))); do [ $r = $victim ] || names[$r]=$(blame_names "$out" $r "$tag"); done
  for r in $(seq 0 $((n - 1))); do
    [ $r = $victim ] && continue
    local seen=" $r " todo="${names[$r]}" found=0 q
    while [ -n "${todo// /}" ] && [ $found = 0 ]; do
      local next=""
      for q in $todo; do
        if [ "$q" = "$victim" ]; then found=1; break; fi
        case "$seen" in *" $q "*) continue ;; esac
        seen="$seen$q "
        next="$next ${names[$q]:-}"
      done
      todo=$next
    done
    echo "rank $r names: ${names[$r]:-nothing}"
    [ $found = 1 ] || { echo "FAIL: rank $r's error does not lead to rank $victim"; bad=$((bad + 1)); }
  done
  return $bad
}
