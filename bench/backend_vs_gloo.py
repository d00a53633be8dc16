#!/usr/bin/python3
"""The "gcomp" torch.distributed backend against gloo, in one job: all_reduce, all_gather,
broadcast and (gcomp only: gloo on torch 1.13 CPU has none) reduce_scatter through
torch.distributed's own calls, on a gcomp group beside the default gloo group.

    gcomp-run -n 4 -- /usr/bin/python3 bench/backend_vs_gloo.py [--sizes 8,65536,1m,16m,64m]

Per size and call, rounds alternate gloo and gcomp (ABBA); rank 0 prints the median time a
call of each, gcomp's speed-up over gloo (median of the rounds' ratios) and the bus
bandwidth of gcomp's call (nccl-tests' sizes and factors: all_gather and reduce_scatter
count the whole n x bytes buffer), plus the CPU time per call of the process
(every thread: the progress thread and the waiter count).

all_gather gathers into a list of n separate tensors, allocated once and reused by both
backends: each stages through a buffer of its own (gloo allocates its flat temporary every
call, whose page faults were most of its time at 16-64 MiB; gcomp reuses its). gcomp
gathers straight into the blocks of one tensor (list(t.chunk(n))): all_gather_into_tensor
(gcomp only, like reduce_scatter: gloo on torch 1.13 CPU raises) is that case.
"""
import argparse
import statistics
import time

import torch
import torch.distributed as dist

import gcomp.torch  # noqa: F401  (registers the backend)


def size(text):
    mult = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    t = text.strip().lower()
    return int(t[:-1]) * mult[t[-1]] if t[-1] in mult else int(t)


def timed(fn, iters):
    dist.barrier()
    c0, t0 = time.process_time(), time.perf_counter()
    for _ in range(iters):
        fn()
    return (time.perf_counter() - t0) / iters, (time.process_time() - c0) / iters


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="8,65536,1m,16m,64m", help="bytes per rank")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--calls", default="all_reduce,all_gather,broadcast,reduce_scatter,"
                    "all_gather_into_tensor")
    a = ap.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    gc = dist.new_group(backend="gcomp")
    gl = dist.group.WORLD
    n, me = dist.get_world_size(), dist.get_rank()
    factor = {"all_reduce": 2 * (n - 1) / n, "all_gather": (n - 1) / n, "broadcast": 1.0,
              "reduce_scatter": (n - 1) / n, "all_gather_into_tensor": (n - 1) / n}
    if me == 0:
        print("backend_vs_gloo: %d ranks" % n)
        print("%-15s %10s %12s %12s %8s %10s %12s" % ("call", "bytes", "gloo us", "gcomp us",
                                                      "x gloo", "busbw GB/s", "gcomp cpu us"))
    for call in a.calls.split(","):
        for nbytes in map(size, a.sizes.split(",")):
            count = max(1, nbytes // 4)
            x = torch.ones(count)
            outs = [torch.empty(count) for _ in range(n)]
            flat_in = torch.ones(count * n)
            flat_out = torch.empty(count * n)

            def op(g):
                if call == "all_reduce":
                    return lambda: dist.all_reduce(x, group=g)
                if call == "all_gather":
                    return lambda: dist.all_gather(outs, x, group=g)
                if call == "broadcast":
                    return lambda: dist.broadcast(x, src=0, group=g)
                if call == "all_gather_into_tensor":
                    return lambda: dist.all_gather_into_tensor(flat_out, x, group=g)
                return lambda: dist._reduce_scatter_base(x, flat_in, group=g)
            iters = max(2, min(200, (64 << 20) // max(nbytes, 1) // 4))
            has_gloo = call not in ("reduce_scatter", "all_gather_into_tensor")
            t = {"gloo": [], "gcomp": []}
            cpu = []
            op(gc)()   # first calls: connections, calibration, codec probes
            if has_gloo:
                op(gl)()
            for r in range(a.rounds):
                order = ["gloo", "gcomp"] if r % 4 in (0, 3) else ["gcomp", "gloo"]
                for which in order:
                    if which == "gloo" and not has_gloo:
                        continue
                    s, c = timed(op(gc if which == "gcomp" else gl), iters)
                    t[which].append(s)
                    if which == "gcomp":
                        cpu.append(c)
            if me == 0:
                g = statistics.median(t["gcomp"])
                ratio = statistics.median(a / b for a, b in zip(t["gloo"], t["gcomp"])) \
                    if has_gloo else float("nan")
                print("%-15s %10d %12s %12.1f %8s %10.2f %12.1f" % (
                    call, count * 4,
                    "%.1f" % (statistics.median(t["gloo"]) * 1e6) if has_gloo else "-",
                    g * 1e6, "%.2f" % ratio if has_gloo else "-",
                    count * 4 * (n if call in ("all_gather", "reduce_scatter",
                                               "all_gather_into_tensor") else 1) *
                    factor[call] / g / 1e9, statistics.median(cpu) * 1e6),
                    flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
