#!/usr/bin/env bash
# libgcomp.so exports exactly the functions include/gcomp.h declares: nothing internal leaks
# (the in-tree layers reach gcomp_internal.h's functions through the static library), and
# nothing declared is missing.
#   check-exports.sh LIBGCOMP_SO GCOMP_H
set -euo pipefail
lib=$1 header=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
nm -D --defined-only "$lib" | awk '{print $NF}' | sed 's/@.*//' | sort -u >"$tmp/exported"
# every declaration starts with GCOMP_API; the name is the identifier before the first '('
grep -v '^#' "$header" | grep -o 'GCOMP_API[^(]*(' | sed 's/($//; s/.*[ *]//' | sort -u >"$tmp/declared"
[ -s "$tmp/declared" ] || { echo "FAIL: no GCOMP_API declaration found in $header"; exit 1; }
if ! diff -u "$tmp/declared" "$tmp/exported" >"$tmp/diff"; then
  echo "FAIL: exports of $lib differ from $header's declarations (- declared only, + exported only):"
  grep '^[-+][^-+]' "$tmp/diff"
  exit 1
fi
echo "exports: $(wc -l <"$tmp/exported") symbols, all declared in gcomp.h"
