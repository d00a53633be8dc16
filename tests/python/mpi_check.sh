#!/usr/bin/env bash
# The "gcomp" backend under mpirun (Open MPI): 2 ranks of mpi_check.py, MASTER_PORT a free
# port given on the command line as a user would; both ranks must pass.
#   mpi_check.sh PYTHON
py=$1
dir=$(cd "$(dirname "$0")" && pwd)
if ! command -v mpirun >/dev/null; then
  echo "SKIP: mpirun not installed"
  exit 0
fi
port=$("$py" -c 'import socket; s = socket.socket(); s.bind(("", 0)); print(s.getsockname()[1])')
out=$(timeout 120 mpirun --allow-run-as-root --oversubscribe -n 2 -x MASTER_PORT="$port" \
  -x PYTHONPATH -x GCOMP_ALPHA_BETA "$py" "$dir/mpi_check.py" 2>&1)
rc=$?
echo "$out"
# mpirun forwards both ranks' lines through one pipe and may splice them ("...passedrank 0:
# ..."): count the verdicts, not the lines
if [ $rc = 0 ] && [ "$(echo "$out" | grep -o 'mpirun passed' | wc -l)" = 2 ] &&
  ! echo "$out" | grep -q 'FAIL'; then
  echo "mpi_check: passed"
  exit 0
fi
echo "mpi_check: FAILED (mpirun exit $rc)"
exit 1
