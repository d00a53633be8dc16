"""A rank that dies or stalls mid-training: backward() (or the next step) raises on the others
within GCOMP_TIMEOUT_MS, with gcomp's message. DDP runs with the gcomp hook on gloo, or with
FAIL_CHECK_BACKEND=gcomp on the gcomp backend with no hook.

    gcomp-run -n 2 --nodes 2 --grace 8000 -- python3 fail_check.py kill|stall OUT

The last rank SIGKILLs itself (kill) or sleeps for good (stall) at step 5, after its forward
pass. Every other rank writes to OUT.<rank> how long after that moment its training raised
and the exception's text, then exits with status 3 (which makes gcomp-run stop the stalled
rank). tests/python/fail_check.sh judges the files.
"""
import os
import signal
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

import gcomp.torch as gt


def main():
    mode, out = sys.argv[1], sys.argv[2]
    torch.set_num_threads(1)
    backend = os.environ.get("FAIL_CHECK_BACKEND", "gloo")
    dist.init_process_group(backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    victim = world - 1
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 512), nn.ReLU(), nn.Linear(512, 10))
    ddp = DDP(model)
    if backend != "gcomp":   # on the gcomp backend DDP's own allreduce is gcomp's
        state = gt.State(codec="bf16")
        ddp.register_comm_hook(state, gt.hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    mark = os.path.join(os.path.dirname(out) or ".", "victim.t")
    for step in range(1000):
        x, y = torch.randn(16, 64), torch.randint(0, 10, (16,))
        loss = F.cross_entropy(ddp(x), y)
        if rank == victim and step == 5:
            with open(mark, "w") as f:
                f.write(repr(time.time()))
            if mode == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            time.sleep(3600)
        try:
            loss.backward()
            opt.step()
            opt.zero_grad()
        except Exception as e:   # what a training loop sees
            t = time.time()
            with open(mark) as f:
                since = t - float(f.read())
            with open("%s.%d" % (out, rank), "w") as f:
                f.write("%d\n%s: %s\n" % (int(since * 1000), type(e).__name__, e))
            os._exit(3)   # the communicator is unusable; gloo's teardown would wait for the peer
    os._exit(1)   # never raised


if __name__ == "__main__":
    main()
