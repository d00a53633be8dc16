"""A killed rank on the gcomp backend: every other rank's pending Work raises from wait(),
with gcomp's message, as a c10d Work does (torch.distributed's calls with async_op=True).

    GCOMP_TIMEOUT_MS=3000 gcomp-run -n 2 --nodes 2 --grace 8000 -- python3 backend_kill_check.py

The last rank joins a barrier and SIGKILLs itself; the others start an all_reduce and a
broadcast with async_op=True, which cannot complete, and wait for each. Each survivor
prints "rank R: pending Work raised" when both raised with GCOMP_ERR_PEER or
GCOMP_ERR_TIMEOUT and report it through is_completed(), is_success() and exception(),
then leaves with os._exit (its communicator is unusable).
"""
import os
import signal
import time

import torch
import torch.distributed as dist

import gcomp.torch  # noqa: F401  (registers the backend)


def main():
    torch.set_num_threads(1)
    dist.init_process_group("gcomp")
    rank, world = dist.get_rank(), dist.get_world_size()
    limit = 3 * int(os.environ.get("GCOMP_TIMEOUT_MS", "30000")) / 1000   # a hang guard
    dist.barrier()
    if rank == world - 1:
        time.sleep(0.5)   # the others are past the barrier
        os.kill(os.getpid(), signal.SIGKILL)
    t0 = time.time()
    works = [("all_reduce", dist.all_reduce(torch.ones(1 << 16), async_op=True)),
             ("broadcast", dist.broadcast(torch.ones(1 << 10), src=0, async_op=True))]
    bad = []
    for name, w in works:
        try:
            w.wait()
            bad.append("%s: wait() returned" % name)
            continue
        except RuntimeError as e:
            text = str(e)
        print("rank %d: %s raised after %.1f s: %s" % (rank, name, time.time() - t0,
                                                        text[:200]), flush=True)
        if "GCOMP_ERR_PEER" not in text and "GCOMP_ERR_TIMEOUT" not in text:
            bad.append("%s: not gcomp's error: %s" % (name, text[:200]))
        if not w.is_completed() or w.is_success() or w.exception() is None:
            bad.append("%s: is_completed %s, is_success %s, exception %r" % (
                name, w.is_completed(), w.is_success(), w.exception()))
    if time.time() - t0 > limit:
        bad.append("took %.1f s" % (time.time() - t0))
    for b in bad:
        print("rank %d: FAIL %s" % (rank, b), flush=True)
    if not bad:
        print("rank %d: pending Work raised" % rank, flush=True)
    os._exit(1 if bad else 3)


if __name__ == "__main__":
    main()
