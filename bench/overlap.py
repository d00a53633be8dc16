#!/usr/bin/python3
"""How much of the gradient reduction a DDP step hides behind backward, per way of reducing.

A deep MLP (--layers layers of --width, batch --batch) whose layers' gradients become ready
one after another, DDP buckets of --bucket-cap-mb. Each variant's step is measured three
ways, in alternating rounds:
  step      forward, backward with the reduction, optimizer step;
  compute   the same under ddp.no_sync() (no reduction: compute alone);
  comm      the same buckets reduced alone, issued back to back, no compute;
and rank 0 prints step / max(compute, comm) and the share of the reduction hidden,
(compute + comm - step) / comm. Variants: ddp (DDP's own allreduce on the default gloo
group), backend (DDP on a gcomp group, no hook), and hook[:SPEC] (the gcomp DDP hook with a
codec, default none).

The floor: no bucket is ready before the forward pass ends, so a step takes at least
forward + comm, and step / max cannot be below (forward + comm) / max(compute, comm)
(the first bucket's backward and the optimizer step come on top). CPU columns: the
process's CPU time per step (every thread: computation, progress and waiter threads,
gloo's) with and without the reduction, load-independent where wall times are not. gcomp
hidden: the hook's own figure (State.stats()["overlap"]) over the step runs.

    gcomp-run -n 2 --nodes 2 --inter-node-rate 1gbit -- /usr/bin/python3 bench/overlap.py
"""
import argparse
import statistics
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

import gcomp.torch as gt

_gc = []


def gcomp_group():
    if not _gc:
        _gc.append(dist.new_group(backend="gcomp"))
    return _gc[0]


def build(args, variant):
    torch.manual_seed(0)
    layers = []
    for _ in range(args.layers):
        layers += [nn.Linear(args.width, args.width), nn.ReLU()]
    model = nn.Sequential(*layers, nn.Linear(args.width, 10))
    state = None
    if variant == "backend":
        ddp = DDP(model, bucket_cap_mb=args.bucket_cap_mb, process_group=gcomp_group())
    else:
        ddp = DDP(model, bucket_cap_mb=args.bucket_cap_mb)
    if variant.startswith("hook"):
        state = gt.State(codec=variant.partition(":")[2] or "none")
        ddp.register_comm_hook(state, gt.hook)
    return ddp, state


def comm_alone(variant, ddp, state, sizes):
    """The step's buckets reduced back to back with nothing else running."""
    bufs = [torch.ones(n) for n in sizes]
    t0 = time.perf_counter()
    if variant.startswith("hook"):
        futs = [state.start(b, None, i) for i, b in enumerate(bufs)]
        for f in futs:
            f.wait()
    else:
        g = gcomp_group() if variant == "backend" else None
        works = [dist.all_reduce(b, group=g, async_op=True) for b in bufs]
        for w in works:
            w.wait()
    return time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--variant", action="append",
                    help="ddp, backend, hook[:SPEC] (default: ddp, backend, hook, hook:bf16)")
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--width", type=int, default=512)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--bucket-cap-mb", type=float, default=1.0)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    variants = args.variant or ["ddp", "backend", "hook", "hook:bf16"]
    res = {v: {k: [] for k in ("step", "compute", "comm", "fwd", "cpu step", "cpu compute",
                               "gcomp hidden")} for v in variants}
    x = torch.randn(args.batch, args.width)
    y = torch.randint(0, 10, (args.batch,))
    for _ in range(args.rounds):
        for v in variants:
            ddp, state = build(args, v)
            opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
            for _ in range(3):   # warm-up, and DDP's bucket rebuild after the first step
                opt.zero_grad()
                F.cross_entropy(ddp(x), y).backward()
                opt.step()
            # the buckets as DDP built them: the gradients' sizes in its order
            sizes = [b.numel() for b in _bucket_sizes(ddp, args.bucket_cap_mb)]
            for kind in ("step", "compute", "comm"):
                times, fwds, cpus = [], [], []
                before = dict(state._overlap) if state is not None else None
                for _ in range(args.steps):
                    dist.barrier()
                    if kind == "comm":
                        times.append(comm_alone(v, ddp, state, sizes))
                        continue
                    c0, t0 = time.process_time(), time.perf_counter()
                    opt.zero_grad()
                    if kind == "compute":
                        with ddp.no_sync():
                            loss = F.cross_entropy(ddp(x), y)
                            fwds.append(time.perf_counter() - t0)
                            loss.backward()
                    else:
                        F.cross_entropy(ddp(x), y).backward()
                    opt.step()
                    times.append(time.perf_counter() - t0)
                    cpus.append(time.process_time() - c0)
                res[v][kind].append(statistics.median(times))
                if kind != "comm":
                    res[v]["cpu " + kind].append(statistics.median(cpus))
                if fwds:
                    res[v]["fwd"].append(statistics.median(fwds))
                if kind == "step" and state is not None:
                    o = state._overlap
                    busy = o["comm_s"] - before["comm_s"]
                    exposed = o["exposed_s"] - before["exposed_s"]
                    res[v]["gcomp hidden"].append(1 - exposed / busy if busy > 0 else 0.0)
            if state is not None:
                state.close()
    if dist.get_rank() == 0:
        print("overlap: %d ranks, %d x %d MLP, batch %d, %.1f MiB buckets, median of %d rounds"
              % (dist.get_world_size(), args.layers, args.width, args.batch,
                 args.bucket_cap_mb, args.rounds))
        print("%-12s %8s %8s %8s %9s %7s %8s %8s %9s %9s %13s" % (
            "variant", "step ms", "compute", "comm", "step/max", "hidden", "forward", "floor",
            "cpu step", "cpu comp", "gcomp hidden"))
        for v in variants:
            s, c, m, f, cs, cc = (statistics.median(res[v][k]) for k in (
                "step", "compute", "comm", "fwd", "cpu step", "cpu compute"))
            g = res[v]["gcomp hidden"]
            print("%-12s %8.1f %8.1f %8.1f %8.2fx %6.0f%% %8.1f %7.2fx %9.1f %9.1f %13s" % (
                v, s * 1e3, c * 1e3, m * 1e3, s / max(c, m), 100 * (c + m - s) / m, f * 1e3,
                (f + m) / max(c, m), cs * 1e3, cc * 1e3,
                "%.0f%%" % (100 * statistics.median(g)) if g else "-"), flush=True)
    dist.destroy_process_group()


def _bucket_sizes(ddp, cap_mb):
    """The gradients grouped as DDP's first bucket layout does: in reverse order of the
    parameters, up to cap_mb each (the first bucket small, as DDP's is)."""
    params = [p for p in ddp.module.parameters() if p.requires_grad][::-1]
    caps = [1 << 20, int(cap_mb * (1 << 20))]   # dist._DEFAULT_FIRST_BUCKET_BYTES, then cap
    out, cur, i = [], 0, 0
    for p in params:
        cur += p.numel() * 4
        if cur >= caps[min(i, 1)]:
            out.append(torch.empty(cur // 4))
            cur, i = 0, i + 1
    if cur:
        out.append(torch.empty(cur // 4))
    return out


if __name__ == "__main__":
    main()
