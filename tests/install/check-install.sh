#!/usr/bin/env bash
# Installs the build into a scratch prefix and builds a consumer against it two ways:
# find_package(gcomp) (shared and static) and pkg-config.
set -euo pipefail
build=$1 src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
libdir=$(ls -d "$tmp"/prefix/lib* | head -n1)

cmake -S "$src/tests/install/consumer" -B "$tmp/cm" -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
cmake --build "$tmp/cm" >/dev/null
LD_LIBRARY_PATH="$libdir" "$tmp/cm/consumer"
"$tmp/cm/consumer_static"

export PKG_CONFIG_PATH="$libdir/pkgconfig"
cc -o "$tmp/pc_consumer" "$src/tests/install/consumer/consumer.c" $(pkg-config --cflags --libs gcomp)
LD_LIBRARY_PATH="$libdir" "$tmp/pc_consumer"
# static gcomp over the shared dependencies (Debian ships no static libfabric, so
# `pkg-config --static` would name libraries that are not installed)
cc -o "$tmp/pc_consumer_static" "$src/tests/install/consumer/consumer.c" \
  $(pkg-config --cflags gcomp) "$libdir/libgcomp.a" \
  $(pkg-config --libs $(pkg-config --print-requires-private gcomp)) -lpthread -lm
"$tmp/pc_consumer_static"
test -x "$tmp/prefix/bin/gcomp-info"
"$tmp/prefix/bin/gcomp-info" >/dev/null
# the Python package finds the library installed beside it: no LD_LIBRARY_PATH, no
# GCOMP_LIBRARY, nothing from the build tree
pkg="$tmp/prefix/lib/python3/dist-packages"
test -f "$pkg/gcomp/_paths.py"
env -u GCOMP_LIBRARY -u LD_LIBRARY_PATH PYTHONPATH="$pkg" python3 -c '
import gcomp, sys
lib = gcomp.library()._name
assert lib.startswith(sys.argv[1]), lib
print("install: python package loads", lib[len(sys.argv[1]):], "version", gcomp.version())
' "$tmp/prefix/"
echo "install: find_package, pkg-config and python consumers OK"
