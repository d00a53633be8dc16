#!/usr/bin/python3
"""Where a DDP step's time goes, bucket by bucket: bench/overlap.py's model, one variant,
every event of a step in milliseconds from its start (the median over --steps steps):
the forward pass's end, the first and last gradient computed, and for each bucket when
the hook issued it, when gcomp's progress thread started and ended its call (from
GCOMP_TRACE), when the waiter thread saw it done and when its future's callback ran; then
backward's and the step's end. Per thread: CPU time, time spent runnable but waiting
for a CPU, and times it was scheduled onto a CPU (its wake-ups, for a thread that sleeps
between them), per step (/proc/self/task/*/schedstat). Variants: hook[:SPEC] (the gcomp hook)
or ddp (gloo, through a hook that only times, so issue and callback are seen too).

    gcomp-run -n 2 --nodes 2 --inter-node-rate 1gbit -- /usr/bin/python3 \\
        bench/overlap_timeline.py --variant hook

GCOMP_TRACE is set here (to a temporary file per rank) unless the environment sets it.
"""
import argparse
import json
import os
import statistics
import tempfile
import threading
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

_TRACE = os.environ.get("GCOMP_TRACE") or os.path.join(tempfile.gettempdir(),
                                                       "gcomp-timeline-%d-%%r.json" % os.getppid())
os.environ["GCOMP_TRACE"] = _TRACE
import gcomp.torch as gt  # noqa: E402  (after GCOMP_TRACE: the communicator reads it)

now = time.monotonic_ns   # CLOCK_MONOTONIC, as the library's own clock
_NAMES = {}   # tid -> the thread's name (/proc/self/task/*/comm)


def threads():
    """tid -> (CPU ns, runnable-but-waiting ns, times scheduled) of every thread of this
    process."""
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open("/proc/self/task/%s/schedstat" % tid) as f:
                run, wait, slices = map(int, f.read().split())
            out[tid] = (run, wait, slices)
            if tid not in _NAMES:
                with open("/proc/self/task/%s/comm" % tid) as f:
                    _NAMES[tid] = f.read().strip()
        except OSError:
            pass   # the thread ended
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--variant", default="hook", help="hook[:SPEC] or ddp")
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--width", type=int, default=512)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--bucket-cap-mb", type=float, default=1.0)
    ap.add_argument("--steps", type=int, default=20)
    args = ap.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    layers = []
    for _ in range(args.layers):
        layers += [nn.Linear(args.width, args.width), nn.ReLU()]
    model = nn.Sequential(*layers, nn.Linear(args.width, 10))
    ddp = DDP(model, bucket_cap_mb=args.bucket_cap_mb)
    ev = []   # (what, monotonic ns, bucket index)
    hook = args.variant.startswith("hook")
    state = gt.State(codec=args.variant.partition(":")[2] or "none") if hook else None

    def timed(st, bucket):
        i = bucket.index()
        ev.append(("issue", now(), i))
        if hook:
            fut = gt.hook(st, bucket)
        else:
            fut = dist.all_reduce(bucket.buffer().div_(dist.get_world_size()),
                                  async_op=True).get_future().then(lambda f: f.value()[0])

        def done(f):
            ev.append(("callback", now(), i))
            return f.value()
        return fut.then(done)
    ddp.register_comm_hook(state, timed)
    if hook:   # the waiter's completion times: State keeps them until the iteration ends
        end_iteration = state._end_iteration
        perf_to_mono = now() - int(time.perf_counter() * 1e9)

        def keep():
            with state._lock:
                ev.extend(("waiter", int(d * 1e9) + perf_to_mono, i) for i, _, d in state._timing)
            end_iteration()
        state._end_iteration = keep
    for p in model.parameters():
        p.register_hook(lambda g: ev.append(("grad", now(), -1)))
    x = torch.randn(args.batch, args.width)
    y = torch.randint(0, 10, (args.batch,))
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    for _ in range(3):   # warm-up, and DDP's bucket rebuild after the first step
        opt.zero_grad()
        F.cross_entropy(ddp(x), y).backward()
        opt.step()
    steps = []
    for _ in range(args.steps):
        dist.barrier()
        ev.clear()
        s0 = threads()
        t0 = now()
        opt.zero_grad()
        loss = F.cross_entropy(ddp(x), y)
        t1 = now()
        loss.backward()
        t2 = now()
        opt.step()
        t3 = now()
        s1 = threads()
        steps.append((t0, t1, t2, t3, list(ev),
                      {k: tuple(a - b for a, b in zip(v, s0[k])) for k, v in s1.items()
                       if k in s0}))
    roles = {str(threading.get_native_id()): "main (forward, backward, hook)"}
    if hook:
        roles[str(state._waiter.native_id)] = "gcomp-waiter"
        state.close()   # writes the trace
    mono_to_real = time.time_ns() - now()
    calls = []
    if hook:
        with open(_TRACE.replace("%r", str(dist.get_rank()))) as f:
            tr = json.load(f)
        origin = tr["otherData"]["time_origin_unix_us"]
        for e in tr["traceEvents"]:
            if e.get("ph") == "X":
                start = int((origin + e["ts"]) * 1e3) - mono_to_real
                calls.append((start, start + int(e["dur"] * 1e3)))
    report(dist.get_rank(), args, steps[2:], calls, roles)
    dist.destroy_process_group()


def report(rank, args, steps, calls, roles):
    rows = {}

    def add(name, order, v):
        rows.setdefault(name, (order, []))[1].append(v)
    cpu = {}
    for t0, t1, t2, t3, ev, sched in steps:
        ms = lambda t: (t - t0) / 1e6  # noqa: E731
        add("forward end", 0, ms(t1))
        grads = sorted(t for what, t, _ in ev if what == "grad")
        add("first gradient", 1, ms(grads[0]))
        add("last gradient", 1e9, ms(grads[-1]))
        issued = [(t, i) for what, t, i in ev if what == "issue"]
        mine = [c for c in calls if t0 <= c[0] <= t3]
        for k, (t, i) in enumerate(issued):
            add("bucket %d issued" % k, ms(t), ms(t))
            if len(mine) == len(issued):
                add("bucket %d call starts" % k, ms(mine[k][0]), ms(mine[k][0]))
                add("bucket %d call ends" % k, ms(mine[k][1]), ms(mine[k][1]))
            for what, tw, iw in ev:
                if iw == i and what in ("waiter", "callback"):
                    add("bucket %d %s" % (k, "waiter done" if what == "waiter" else what),
                        ms(tw), ms(tw))
        add("backward end", 2e9, ms(t2))
        add("step end", 3e9, ms(t3))
        for tid, (run, wait, slices) in sched.items():
            cpu.setdefault(tid, []).append((run / 1e6, wait / 1e6, slices))
    print("rank %d, %s: median of %d steps, ms from the step's start" % (
        rank, args.variant, len(steps)), flush=True)
    med = statistics.median
    for name, (_, v) in sorted(rows.items(), key=lambda r: med(r[1][1])):
        print("  %-28s %8.2f" % (name, med(v)))
    for tid in cpu:   # the library names its progress thread
        if _NAMES.get(tid) == "gcomp-progress":
            roles[tid] = "gcomp-progress"
    for tid, v in sorted(cpu.items(), key=lambda r: -med(a for a, _, _ in r[1])):
        run, wait, slices = (med(x[j] for x in v) for j in range(3))
        if run >= 0.5:
            print("  thread %-7s %-30s CPU %6.1f ms, waiting for a CPU %6.1f ms, scheduled %4.0f "
                  "times" % (tid, roles.get(tid, "gloo's or torch's"), run, wait,
                             slices))


if __name__ == "__main__":
    main()
