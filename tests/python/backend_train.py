"""Training on the "gcomp" backend as programs use it, against gloo in the same job:

  - DDP on a gcomp group, no hook, tracks DDP on a gloo group: losses within 1e-5 relative
    over 50 steps (the same model, data and optimizer);
  - ZeroRedundancyOptimizer over a gcomp group tracks SGD under DDP on gloo;
  - PostLocalSGD-style periodic model averaging (torch's PeriodicModelAverager) on a gcomp
    group trains (its loss falls) and leaves every rank's model identical after averaging;
  - the DDP hook on a gcomp group uses the group's own communicator;
  - abort: a pending call on an aborted gcomp group raises GCOMP_ERR_ABORTED.

    gcomp-run -n 2 --nodes 2 -- python3 backend_train.py
"""
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.algorithms.model_averaging.averagers import PeriodicModelAverager
from torch.distributed.optim import ZeroRedundancyOptimizer
from torch.nn.parallel import DistributedDataParallel as DDP

import gcomp.torch as gt

failures = []


def check(what, ok, detail=""):
    if not ok:
        failures.append(what)
    print("rank %d: %s %s %s" % (dist.get_rank(), "ok  " if ok else "FAIL", what, detail),
          flush=True)


def model():
    torch.manual_seed(3)
    return nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(),
                         nn.Linear(64, 10))


def batches(rank, steps):
    g = torch.Generator().manual_seed(100 + rank)
    w = torch.randn(32, 10, generator=torch.Generator().manual_seed(5))
    for _ in range(steps):
        x = torch.randn(16, 32, generator=g)
        yield x, (x @ w).argmax(1)


def train_ddp(pg, steps, hook=None):
    net = DDP(model(), process_group=pg)
    if hook is not None:
        net.register_comm_hook(hook, gt.hook)
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    losses = []
    for x, y in batches(dist.get_rank(), steps):
        opt.zero_grad()
        loss = F.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, net


def rel(a, b):
    return max(abs(x - y) / max(abs(y), 1e-12) for x, y in zip(a, b))


def main():
    dist.init_process_group("gcomp")
    rank = dist.get_rank()
    world = dist.group.WORLD
    gloo = dist.new_group(backend="gloo")

    ref, _ = train_ddp(gloo, 50)
    got, _ = train_ddp(world, 50)
    check("DDP on gcomp tracks DDP on gloo (50 steps)", rel(got, ref) <= 1e-5,
          "max relative difference %.2e" % rel(got, ref))

    # ZeroRedundancyOptimizer: each rank steps its share, broadcasts it (on the gcomp group)
    net = DDP(model(), process_group=world)
    zero = ZeroRedundancyOptimizer(net.parameters(), optimizer_class=torch.optim.SGD,
                                   process_group=world, lr=0.05, momentum=0.9)
    zl = []
    for x, y in batches(rank, 50):
        zero.zero_grad()
        loss = F.cross_entropy(net(x), y)
        loss.backward()
        zero.step()
        zl.append(loss.item())
    check("ZeroRedundancyOptimizer on gcomp tracks SGD on gloo", rel(zl, ref) <= 1e-4,
          "max relative difference %.2e" % rel(zl, ref))

    # periodic model averaging after a warm-up, as PostLocalSGD does
    m = model()
    opt = torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9)
    avg = PeriodicModelAverager(period=4, warmup_steps=8, process_group=world)
    losses = []
    for x, y in batches(rank, 61):   # the 61st call (step 60) averages
        opt.zero_grad()
        loss = F.cross_entropy(m(x), y)
        loss.backward()
        opt.step()
        avg.average_parameters(m.parameters())
        losses.append(loss.item())
    flat = torch.cat([p.detach().reshape(-1) for p in m.parameters()])
    everyone = [torch.empty_like(flat) for _ in range(dist.get_world_size())]
    dist.all_gather(everyone, flat, group=gloo)
    check("model averaging leaves identical models", all(torch.equal(e, flat) for e in everyone))
    check("model averaging trains", sum(losses[-10:]) < 0.8 * sum(losses[:10]),
          "%.3f -> %.3f" % (sum(losses[:10]) / 10, sum(losses[-10:]) / 10))

    # the hook on a gcomp group shares the group's communicator
    state = gt.State(codec="none", process_group=world)
    check("the hook uses the group's communicator", state.comm is gt._backend.comm_of(world))
    hl, _ = train_ddp(world, 20, hook=state)
    check("DDP + hook on gcomp trains like DDP on gloo", rel(hl, ref[:20]) <= 1e-5,
          "max relative difference %.2e" % rel(hl, ref[:20]))
    state.close()

    # abort: a call in flight on an aborted group raises GCOMP_ERR_ABORTED, at once
    sub = dist.new_group(backend="gcomp")
    if rank == 0:
        w = dist.all_reduce(torch.ones(1 << 20), group=sub, async_op=True)  # its peer is away
        gt._backend.abort(sub)
        try:
            w.wait()
            check("an aborted group's pending Work raises", False, "it completed")
        except RuntimeError as e:
            check("an aborted group's pending Work raises", "GCOMP_ERR_ABORTED" in str(e),
                  str(e).split("\n")[0][:160])
        check("a failed Work says so", w.is_completed() and not w.is_success() and
              "GCOMP_ERR_ABORTED" in str(w.exception()))
        try:   # and so does its future, which DDP's reducer reads
            w.get_future().wait()
            check("an aborted group's future raises", False, "it completed")
        except RuntimeError as e:
            check("an aborted group's future raises", "GCOMP_ERR_ABORTED" in str(e),
                  str(e).split("\n")[0][:160])
        try:   # a synchronous call raises from the call itself
            dist.all_reduce(torch.ones(4), group=sub)
            check("a synchronous call on an aborted group raises", False, "it returned")
        except RuntimeError as e:
            check("a synchronous call on an aborted group raises", "GCOMP_ERR" in str(e),
                  str(e).split("\n")[0][:160])
    dist.barrier(group=gloo)   # rank 1 never calls on sub: its peer aborted

    dist.barrier()
    print("rank %d: %d failures" % (rank, len(failures)), flush=True)
    dist.destroy_process_group()
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
