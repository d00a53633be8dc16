"""Checkpoint and resume with the hook's state: bitwise the same next steps.

    gcomp-run -n 2 --nodes 2 -- python3 resume_check.py first DIR   # 2N steps, saves at N
    gcomp-run -n 2 --nodes 2 -- python3 resume_check.py resume DIR  # loads, runs N+1..2N

"first" trains 2N steps without stopping and, after step N, saves model, optimizer and
gcomp state (State.state_dict(): top-k's residuals, thresholds and DGC velocities) to
DIR/ckpt.<rank>.pt; it records the losses and a digest of the parameters after every later
step. "resume" is a new set of processes: it loads the checkpoint, trains steps N+1..2N on
the same batches and checks that every loss and every digest is bitwise the one the
uninterrupted run had. Exit status 0 when all match.
"""
import hashlib
import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

import gcomp.torch as gt

N = 8
SPEC = "topk:ratio=0.01+ef:momentum=0.9"


def digest(model):
    h = hashlib.sha256()
    for p in model.parameters():
        h.update(p.detach().numpy().tobytes())
    return h.hexdigest()


def batch(step, rank):
    g = torch.Generator().manual_seed(1000 * step + rank)
    return torch.randn(16, 64, generator=g), torch.randint(0, 10, (16,), generator=g)


def main():
    mode, d = sys.argv[1], sys.argv[2]
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 768), nn.ReLU(), nn.Linear(768, 384), nn.ReLU(),
                          nn.Linear(384, 10))
    # bucket_cap_mb=1 equals the 1 MiB cap of DDP's first bucket: its rebuild after the first
    # iteration then keeps the layout, which a resumed process starts from again
    ddp = DDP(model, bucket_cap_mb=1)
    state = gt.State(codec=SPEC)
    ddp.register_comm_hook(state, gt.hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    ckpt = os.path.join(d, "ckpt.%d.pt" % rank)
    ref = os.path.join(d, "ref.%d.pt" % rank)
    first = 0
    if mode == "resume":
        c = torch.load(ckpt)
        model.load_state_dict(c["model"])
        opt.load_state_dict(c["opt"])
        state.load_state_dict(c["gcomp"])
        first = N
    record = []
    for step in range(first, 2 * N):
        x, y = batch(step, rank)
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(ddp(x), y)
        loss.backward()
        opt.step()
        if step >= N:
            record.append((loss.item(), digest(model)))
        if mode == "first" and step == N - 1:
            torch.save({"model": model.state_dict(), "opt": opt.state_dict(),
                        "gcomp": state.state_dict()}, ckpt)
    frames = state.stats()["codec"]["frames_encoded"]
    ok = frames > 0
    if not ok:
        print("resume_check: FAIL: the codec never ran", flush=True)
    if mode == "first":
        torch.save(record, ref)
    else:
        want = torch.load(ref)
        for k, (got, exp) in enumerate(zip(record, want)):
            same = got == exp
            ok = ok and same
            if rank == 0 or not same:
                print("resume_check: rank %d step %d: loss %.9g %s %.9g, parameters %s" %
                      (rank, N + k + 1, got[0], "==" if got[0] == exp[0] else "!=", exp[0],
                       "identical" if got[1] == exp[1] else "DIFFER"), flush=True)
        ok = ok and len(record) == len(want) == N
    state.close()
    dist.destroy_process_group()
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
