#!/usr/bin/env bash
# Checkpoint resume with the hook's state (resume_check.py): a run of 2N steps that saves at
# N, then new processes that load and run steps N+1..2N, bitwise the same.
#   resume_check.sh GCOMP_RUN PYTHON
set -u
run=$1 py=$2
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# top-k through the sparse algorithm on every call (the harness's choice), small calls too
export GCOMP_ALGO=sparse GCOMP_CODEC_MIN_BYTES=0
"$run" -n 2 --nodes 2 -- "$py" "$here/resume_check.py" first "$tmp" || { echo "FAIL: first run"; exit 1; }
"$run" -n 2 --nodes 2 -- "$py" "$here/resume_check.py" resume "$tmp" || { echo "FAIL: resumed run"; exit 1; }
echo "resume_check: passed"
