#!/usr/bin/env python3
"""Step time of DDP with its own gloo allreduce against the gcomp hook, in one job.

    gcomp-run -n 4 --nodes 2 --inter-node-rate 1gbit -- python3 ddp_bench.py

Every round trains each variant (ddp, then the hook with each codec, DDP on the gcomp
backend, zero_train.py's sharded optimizer) from the same seed for
--steps steps of ddp_train.py's communication-bound "embed" model and times the steps after
--warmup; variants alternate within a round so that the machine's load falls on all of
them. Rank 0 prints, per variant, the median step time over rounds, the median over rounds
of its ratio to ddp's step time in the same round, the training loss after the last round,
and the hook's overlap (the share of its reduction time hidden behind backward); for the zero
variants, their step's split (forward and backward, gradient copy, reduce_scatter, update,
all_gather) and the CPU time of a step (every thread of rank 0's process).
"""
import argparse
import statistics
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

import ddp_train as ex


_gcomp_group = []


def gcomp_group():
    """A gcomp group beside the default gloo one (made once, on first use)."""
    if not _gcomp_group:
        import gcomp.torch  # noqa: F401  (registers the backend)
        _gcomp_group.append(dist.new_group(backend="gcomp"))
    return _gcomp_group[0]


def run(comm, args, train):
    torch.manual_seed(args.seed)
    model = ex.Embed(args.tables, args.rows)
    state, momentum = None, 0.9
    if comm == "backend":   # DDP's own allreduce on the gcomp backend, no hook
        ddp = DDP(model, bucket_cap_mb=args.bucket_cap_mb, process_group=gcomp_group())
    elif comm.startswith("zero"):   # zero_train.py's sharded optimizer, "zero[:RS_CODEC]"
        from gcomp import backend
        import zero_train
        pg = gcomp_group()
        backend.set_codec(pg, "reduce_scatter", comm.partition(":")[2] or "none")
        ddp = model
        opt = zero_train.Sharded(model, dist.get_rank(), dist.get_world_size(), args.lr,
                                 momentum, group=pg)
        opt.phases = []
    else:
        ddp = DDP(model, bucket_cap_mb=args.bucket_cap_mb)
    if comm not in ("ddp", "backend") and not comm.startswith("zero"):
        import gcomp.torch as gt
        state = gt.State(codec=comm)
        ddp.register_comm_hook(state, gt.hook)
        if "momentum=" in state.codec.spec():
            momentum = 0.0
    if not comm.startswith("zero"):
        opt = torch.optim.SGD(ddp.parameters(), lr=args.lr, momentum=momentum)
    it = ex.batches(train, args.batch, dist.get_rank(), dist.get_world_size(), 7)
    times, fwbw, cpu = [], [], []
    for step in range(args.warmup + args.steps):
        x, y = next(it)
        dist.barrier()   # every variant starts its steps together
        t0, c0 = time.perf_counter(), time.process_time()
        opt.zero_grad()
        F.cross_entropy(ddp(x), y).backward()
        t1 = time.perf_counter()
        opt.step()
        if step >= args.warmup:
            times.append(time.perf_counter() - t0)
            fwbw.append(t1 - t0)
            cpu.append(time.process_time() - c0)   # every thread of the process
        elif comm.startswith("zero"):
            opt.phases.clear()
    with torch.no_grad():
        loss = F.cross_entropy(model(train[0]), train[1]).item()
    hidden = None
    if state is not None:
        hidden = state.stats()["overlap"]["hidden"]
        state.close()
    if comm.startswith("zero"):   # the step's split: medians of each phase over the steps
        hidden = [statistics.median(fwbw)] + [statistics.median(p[i] for p in opt.phases)
                                               for i in range(4)] + [statistics.median(cpu)]
    return statistics.median(times), loss, hidden


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--comm", action="append",
                    help="variants beside ddp on gloo: a hook codec spec, 'backend' (DDP on "
                    "a gcomp group, no hook) or 'zero[:SPEC]' (zero_train.py's sharded "
                    "optimizer on a gcomp group, SPEC on its reduce_scatter); default: none, "
                    "bf16, topk:ratio=0.01+ef:momentum=0.9")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--tables", type=int, default=4)
    ap.add_argument("--rows", type=int, default=8192)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=0.5)
    ap.add_argument("--bucket-cap-mb", type=float, default=4.0)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    comms = ["ddp"] + (args.comm or ["none", "bf16", "topk:ratio=0.01+ef:momentum=0.9"])
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    train, _ = ex.embed_task(20000, args.tables, args.rows, 7)
    res = {c: [] for c in comms}
    for _ in range(args.rounds):
        for c in comms:
            res[c].append(run(c, args, train))
    if dist.get_rank() == 0:
        mb = args.tables * args.rows * 64 * 4 / 2**20
        print("ddp_bench: %d ranks, embed model %.1f MiB of gradients, %d rounds of %d steps"
              % (dist.get_world_size(), mb, args.rounds, args.steps))
        print("%-34s %10s %10s %10s %8s" % ("comm", "step ms", "x ddp", "loss", "hidden"))
        split = []
        for c in comms:
            ratios = [r[0] / d[0] for r, d in zip(res[c], res["ddp"])]
            h = res[c][-1][2]
            if isinstance(h, list):   # zero: its step's split, over every round
                split.append((c, [statistics.median(r[2][i] for r in res[c]) for i in range(6)]))
                h = None
            print("%-34s %10.1f %10.2f %10.4f %8s" % (
                c, statistics.median(r[0] for r in res[c]) * 1e3, statistics.median(ratios),
                res[c][-1][1], "-" if h is None else "%.0f%%" % (100 * h)), flush=True)
        for c, p in split:   # rank 0's medians
            print("%s: forward+backward %.1f ms, gradient copy %.1f ms, reduce_scatter %.1f ms, "
                  "update %.1f ms, all_gather %.1f ms; CPU %.1f ms a step (rank 0, all threads)"
                  % (c, *(x * 1e3 for x in p)), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
