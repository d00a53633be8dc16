"""The "gcomp" backend in ranks that mpirun started: gcomp.backend.mpi_env() turns Open
MPI's variables into torch's env:// ones (MASTER_PORT from the command line), then an
all_reduce, a broadcast and an all_gather are checked exactly, and the ranks are Open MPI's.
mpi_env's refusal without MASTER_PORT is checked on a copy of the environment.

    mpirun -n 2 -x MASTER_PORT=PORT python3 mpi_check.py
"""
import os
import sys

import torch
import torch.distributed as dist

import gcomp.torch  # noqa: F401  (registers the backend)
from gcomp import backend


def main():
    bad = []
    env = {k: v for k, v in os.environ.items() if k not in ("MASTER_PORT", "RANK")}
    try:
        backend.mpi_env(env)
        bad.append("mpi_env without MASTER_PORT did not raise")
    except RuntimeError as e:
        if "MASTER_PORT" not in str(e):
            bad.append("mpi_env's refusal does not name MASTER_PORT: %s" % e)
    backend.mpi_env()
    dist.init_process_group("gcomp")
    me, n = dist.get_rank(), dist.get_world_size()
    if me != int(os.environ["OMPI_COMM_WORLD_RANK"]) or \
            n != int(os.environ["OMPI_COMM_WORLD_SIZE"]) or backend.comm_of().size() != n:
        bad.append("rank %d of %d, Open MPI's %s of %s" % (
            me, n, os.environ["OMPI_COMM_WORLD_RANK"], os.environ["OMPI_COMM_WORLD_SIZE"]))
    x = torch.arange(5, dtype=torch.float32) + me
    dist.all_reduce(x)
    if not torch.equal(x, torch.arange(5, dtype=torch.float32) * n + n * (n - 1) / 2):
        bad.append("all_reduce %s" % x.tolist())
    y = torch.full((3,), float(me + 7))
    dist.broadcast(y, src=n - 1)
    if not torch.equal(y, torch.full((3,), float(n + 6))):
        bad.append("broadcast %s" % y.tolist())
    outs = [torch.empty(2, dtype=torch.int64) for _ in range(n)]
    dist.all_gather(outs, torch.tensor([me, 10 * me]))
    if [o.tolist() for o in outs] != [[r, 10 * r] for r in range(n)]:
        bad.append("all_gather %s" % [o.tolist() for o in outs])
    dist.destroy_process_group()
    for b in bad:
        print("rank %d: FAIL %s" % (me, b), flush=True)
    print("rank %d: mpirun %s" % (me, "FAILED" if bad else "passed"), flush=True)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
