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
echo "install: find_package and pkg-config consumers OK"
