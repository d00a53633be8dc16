#!/usr/bin/env python3
"""ZeRO-2-style sharded data parallelism on the gcomp torch.distributed backend.

Each rank keeps 1/N of the optimizer state: gradients are averaged AND scattered in one
reduce_scatter (compressed across nodes when --rs-codec or GCOMP_CODEC names a codec),
each rank updates its shard of the parameters with its shard of the momentum, and the
parameters come back whole through an exact all_gather. gloo on torch 1.13 CPU has no
reduce_scatter, so --mode ddp runs plain DDP (gloo by default) on the same model, data and
optimizer for comparison: with an exact reduce_scatter the two train alike.

    gcomp-run -n 4 --nodes 2 --inter-node-rate 1gbit -- python3 zero_train.py --rs-codec quant:bits=4+ef
    gcomp-run -n 4 --nodes 2 --inter-node-rate 1gbit -- python3 zero_train.py --mode ddp

Models and data come from ddp_train.py (--model mlp on the UCI digits, or the
communication-bound --model embed). Rank 0 prints one line (median step time, final
training loss, test accuracy); with GCOMP_METRICS set it logs the training loss and test
accuracy there every --eval-every steps (gcomp.metrics), so gcomp-converge run can judge it:

    gcomp-converge run --codec quant:bits=4+ef --launch 'gcomp-run -n 4 --nodes 2' -- \
        python3 zero_train.py
"""
import argparse
import json
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

import ddp_train as ex
import gcomp.metrics
import gcomp.torch  # noqa: F401  (registers the backend "gcomp")
from gcomp import backend as gb


class Sharded:
    """The model's parameters as views of one flat buffer, padded to N equal shards; this
    rank owns shard `rank` of the parameters and of the optimizer's momentum."""

    def __init__(self, model, rank, world, lr, momentum, group=None):
        self.group = group
        self.params = [p for p in model.parameters() if p.requires_grad]
        total = sum(p.numel() for p in self.params)
        self.shard = -(-total // world)
        self.flat = torch.zeros(self.shard * world)
        self.grad = torch.zeros_like(self.flat)
        at = 0
        for p in self.params:   # the parameters live in the flat buffer from here on
            n = p.numel()
            self.flat[at:at + n].copy_(p.detach().reshape(-1))
            p.data = self.flat[at:at + n].view_as(p)
            at += n
        self.lo = rank * self.shard
        self.velocity = torch.zeros(self.shard)   # 1/N of the optimizer state
        self.g_shard = torch.zeros(self.shard)
        self.lr, self.momentum = lr, momentum
        self.phases = None   # a list: step() appends its split (ddp_bench.py reports it)

    def step(self):
        t = [time.perf_counter()] if self.phases is not None else None
        at = 0
        for p in self.params:
            n = p.numel()
            if p.grad is None:
                self.grad[at:at + n].zero_()
            else:
                self.grad[at:at + n].copy_(p.grad.reshape(-1))
            at += n
        self._mark(t)
        # the average of every rank's gradients, this rank's shard only
        dist.reduce_scatter_tensor(self.g_shard, self.grad, op=dist.ReduceOp.AVG,
                                   group=self.group)
        self._mark(t)
        mine = self.flat[self.lo:self.lo + self.shard]
        self.velocity.mul_(self.momentum).add_(self.g_shard)   # torch's SGD momentum
        new = mine - self.lr * self.velocity
        self._mark(t)
        dist.all_gather_into_tensor(self.flat, new, group=self.group)   # every shard, exact
        self._mark(t)
        if t is not None:   # seconds of: gradient copy, reduce_scatter, update, all_gather
            self.phases.append([b - a for a, b in zip(t, t[1:])])

    @staticmethod
    def _mark(t):
        if t is not None:   # both collectives are synchronous: a phase ends with its call
            t.append(time.perf_counter())

    def zero_grad(self):
        for p in self.params:
            p.grad = None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mode", choices=["zero", "ddp"], default="zero")
    ap.add_argument("--backend", choices=["gcomp", "gloo"],
                    help="process group backend (default: gcomp for zero, gloo for ddp; "
                    "zero needs gcomp: gloo has no reduce_scatter on CPU)")
    ap.add_argument("--rs-codec", help="codec of the gradients' reduce_scatter (default: "
                    "GCOMP_CODEC across nodes, GCOMP_INTRA_CODEC inside one)")
    ex.training_args(ap)
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    backend = args.backend or ("gcomp" if args.mode == "zero" else "gloo")
    dist.init_process_group(backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(args.seed)
    model, train, test = ex.build(args)
    if args.mode == "zero":
        if args.rs_codec:
            gb.set_codec(None, "reduce_scatter", args.rs_codec)
        opt = Sharded(model, rank, world, args.lr, args.momentum)
        dist.broadcast(opt.flat, src=0)   # one initial model everywhere
        net = model
    else:
        net = DDP(model)
        opt = torch.optim.SGD(net.parameters(), lr=args.lr, momentum=args.momentum)

    times = []
    it = ex.batches(train, args.batch, rank, world, args.seed * 7919 + args.data_seed)
    every = args.eval_every or max(1, args.steps // 20)
    for step in range(args.steps):
        if step % every == 0 and gcomp.metrics.enabled():
            ex.evaluate(model, train, test, step)
        x, y = next(it)
        t0 = time.perf_counter()
        opt.zero_grad()
        loss = F.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - t0)

    train_loss, acc = ex.evaluate(model, train, test, args.steps)
    t = torch.tensor(sorted(times[args.warmup:]) or [0.0])
    step_ms = t.median().item() * 1e3
    label = "%s/%s%s" % (args.mode, backend, " rs=" + args.rs_codec if args.rs_codec else "")
    extra = ""
    if args.mode == "zero":
        codec = gb.codec_of(None, "reduce_scatter")
        if codec is not None:   # what the reduce_scatter's codec did (0 frames: it never ran)
            extra = "  (gcomp: %s, %d frames encoded)" % (codec.spec(),
                                                          codec.stats()["frames_encoded"])
    if rank == 0:
        print("%-34s step %8.2f ms   final loss %.4f   test acc %6.2f%%%s"
              % (label, step_ms, train_loss, acc, extra), flush=True)
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"mode": args.mode, "backend": backend, "rs_codec": args.rs_codec,
                           "ranks": world, "steps": args.steps, "step_ms": step_ms,
                           "final_loss": train_loss, "test_acc": acc}, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
