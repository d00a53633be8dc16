"""The "gcomp" backend under each of torch.distributed's init methods: env:// (the
launcher's MASTER_ADDR/PORT), tcp://HOST:PORT and file://PATH with rank and world size given
explicitly, one after another in the same processes (destroy_process_group between them).
Each: an all_reduce and a broadcast checked exactly, the backend's own communicator, and a
broadcast whose count differs between the ranks (an error on every rank, then the group
works on).

    gcomp-run -n 2 -- python3 init_check.py DIR    (DIR: a directory for the file:// store)
"""
import os
import socket
import sys

import torch
import torch.distributed as dist

import gcomp.torch  # noqa: F401  (registers the backend)
from gcomp import backend


def free_port():
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def once(how, **kw):
    """One group's life; returns (ok, a port rank 0 found free, agreed through the group)."""
    dist.init_process_group("gcomp", **kw)
    me, n = dist.get_rank(), dist.get_world_size()
    port = torch.tensor([free_port() if me == 0 else 0], dtype=torch.int64)
    dist.broadcast(port, src=0)
    bad = []
    if dist.get_backend() != "gcomp" or backend.comm_of() is None or backend.comm_of().size() != n:
        bad.append("backend %s, communicator %r" % (dist.get_backend(), backend.comm_of()))
    x = torch.arange(5, dtype=torch.float32) + me
    dist.all_reduce(x)
    want = torch.arange(5, dtype=torch.float32) * n + n * (n - 1) / 2
    if not torch.equal(x, want):
        bad.append("all_reduce %s, wanted %s" % (x.tolist(), want.tolist()))
    y = torch.full((3,), float(me + 7))
    dist.broadcast(y, src=n - 1)
    if not torch.equal(y, torch.full((3,), float(n - 1 + 7))):
        bad.append("broadcast %s" % y.tolist())
    # ranks that disagree on a broadcast's count (on one node the backend's broadcast
    # compares shapes in its own round, not in an exchange before it): an error naming the
    # count on every rank, and the group works on
    z = torch.zeros(3 + me)
    try:
        dist.broadcast(z, src=0)
        bad.append("a broadcast of %d elements against other counts returned" % z.numel())
    except RuntimeError as e:
        if "count" not in str(e):
            bad.append("mismatched broadcast: %s" % e)
    y = torch.full((3,), float(me + 1))
    dist.broadcast(y, src=0)
    if not torch.equal(y, torch.ones(3)):
        bad.append("broadcast after the mismatch %s" % y.tolist())
    dist.barrier()
    dist.destroy_process_group()
    for b in bad:
        print("rank %d: FAIL %s: %s" % (me, how, b), flush=True)
    return not bad, int(port.item())


def main():
    rank, size = int(os.environ["GCOMP_RANK"]), int(os.environ["GCOMP_SIZE"])
    store_dir = sys.argv[1]
    ok, port = once("env://", init_method="env://")
    ok2, _ = once("tcp://", init_method="tcp://%s:%d" % (os.environ["MASTER_ADDR"], port),
                  rank=rank, world_size=size)
    ok3, _ = once("file://", init_method="file://" + os.path.join(store_dir, "init-check-%d" % port),
                  rank=rank, world_size=size)
    ok = ok and ok2 and ok3
    print("rank %d: env://, tcp://, file:// %s" % (rank, "passed" if ok else "FAILED"), flush=True)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
