"""The DDP hook against DDP's own allreduce, in one job (each torch import costs seconds).

Run by every rank of `gcomp-run -n 2 --nodes 2 -- python3 ddp_check.py` (tests/python/
python.cmake). Checks, each printed as "ok: ..." or "FAIL: ...":
  - codec none tracks DDP's gloo allreduce: every step's loss within 1e-5 relative over 50
    steps, plain and with gradient_as_bucket_view + static_graph, find_unused_parameters,
    and no_sync() accumulation (each against DDP run the same way);
  - bf16 and top-k 1% + EF (with DGC momentum, as the convergence harness runs it) train
    within the harness's tolerances of the fp32 run: cast class accuracy 0.5 points, final
    loss 1%, loss-curve gap 2%; top-k class accuracy 1 point, final loss 10%; and the codec
    really ran (frames encoded);
  - every rank ends every run with bitwise identical parameters;
  - a float64 model is reduced uncompressed (tracks DDP to 1e-12), bf16 and int32 tensors
    through State.allreduce are exact, a complex bucket is refused naming its type;
  - a malformed codec spec fails at State() naming the token.
Exit status 0 when every check passed.
"""
import hashlib
import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

import gcomp
import gcomp.torch as gt

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "examples"))
import ddp_train as ex   # noqa: E402  (the example's data and batches)

fails = []


def check(ok, what):
    if dist.get_rank() == 0:
        print(("ok: " if ok else "FAIL: ") + what, flush=True)
    if not ok:
        fails.append(what)


class Net(nn.Module):
    def __init__(self, hidden, unused=False, dtype=torch.float32):
        super().__init__()
        self.a = nn.Linear(64, hidden, dtype=dtype)
        self.b = nn.Linear(hidden, hidden // 2, dtype=dtype)
        self.c = nn.Linear(hidden // 2, 10, dtype=dtype)
        if unused:   # made last, so the other layers' initial values do not change
            self.spare = nn.Linear(10, 10, dtype=dtype)

    def forward(self, x):
        return self.c(F.relu(self.b(F.relu(self.a(x)))))


layout_ok = [0, 0]   # buckets whose parameters lie in the buffer as the hook assumes; others


def layout_checked(state, bucket):
    """gt.hook, after checking that each parameter's gradient is the buffer's next slice."""
    buf, off, ok = bucket.buffer(), 0, True
    for p, g in zip(bucket.parameters(), bucket.gradients()):
        ok = ok and p.shape == g.shape and torch.equal(g.flatten(), buf[off:off + p.numel()])
        off += p.numel()
    layout_ok[0 if ok and off == buf.numel() else 1] += 1
    return gt.hook(state, bucket)


def params_digest(model):
    h = hashlib.sha256()
    for p in model.parameters():
        h.update(p.detach().contiguous().numpy().tobytes())
    return h.hexdigest()


def same_everywhere(model):
    mine = params_digest(model)
    all_ = [None] * dist.get_world_size()
    dist.all_gather_object(all_, mine)
    return all(d == mine for d in all_)


TRAIN, TEST = ex.load_digits(os.environ["DDP_CHECK_DIGITS"]) if os.path.exists(
    os.environ.get("DDP_CHECK_DIGITS", "")) else ex.gaussian_clusters(2000, 64, 10, 7)


def train(comm, steps, hidden=64, momentum=0.9, accumulate=1, dtype=torch.float32,
          config=None, batch=16, **ddp_opts):
    """Trains from seed 0; returns (per-step losses, final loss, test accuracy, state stats,
    parameters identical on every rank, training-set loss every 10 steps)."""
    torch.manual_seed(0)
    model = Net(hidden, unused=ddp_opts.get("find_unused_parameters", False), dtype=dtype)
    ddp = DDP(model, bucket_cap_mb=0.004, **ddp_opts)   # several buckets
    state = None
    if comm != "ddp":
        state = gt.State(codec=comm, config=config)
        ddp.register_comm_hook(state, layout_checked)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=momentum)
    it = ex.batches(TRAIN, batch, dist.get_rank(), dist.get_world_size(), 7)
    losses, curve = [], []
    for step in range(steps):
        opt.zero_grad(set_to_none=True)
        total = 0.0
        for m in range(accumulate):
            x, y = next(it)
            x = x.to(dtype)
            if m < accumulate - 1:
                with ddp.no_sync():
                    loss = F.cross_entropy(ddp(x), y) / accumulate
                    loss.backward()
            else:
                loss = F.cross_entropy(ddp(x), y) / accumulate
                loss.backward()
            total += loss.item()
        opt.step()
        losses.append(total)
        if (step + 1) % 10 == 0:   # the harness's loss curve: the training set's loss
            with torch.no_grad():
                curve.append(F.cross_entropy(model(TRAIN[0].to(dtype)), TRAIN[1]).item())
    with torch.no_grad():
        final = F.cross_entropy(model(TRAIN[0].to(dtype)), TRAIN[1]).item()
        acc = (model(TEST[0].to(dtype)).argmax(1) == TEST[1]).float().mean().item() * 100
    stats = state.stats() if state else None
    same = same_everywhere(model)
    if state:
        state.close()
    return losses, final, acc, stats, same, curve


def max_rel(a, b):
    return max(abs(x - y) / max(abs(y), 1e-12) for x, y in zip(a, b))


def exact_runs():
    variants = [("plain", {}, 1),
                ("gradient_as_bucket_view + static_graph",
                 {"gradient_as_bucket_view": True, "static_graph": True}, 1),
                ("find_unused_parameters", {"find_unused_parameters": True}, 1),
                ("no_sync accumulation of 2", {}, 2)]
    for name, opts, acc in variants:
        ref, _, _, _, same_ref, _ = train("ddp", 50, accumulate=acc, **opts)
        got, _, _, st, same, _ = train("none", 50, accumulate=acc, **opts)
        r = max_rel(got, ref)
        check(r <= 1e-5, "none tracks DDP's allreduce (%s): max relative loss difference %.2e "
              "over 50 steps (bound 1e-5)" % (name, r))
        check(same and same_ref, "identical parameters on every rank (%s)" % name)
        check(st["calls"] > 0, "the hook ran (%s): %d calls" % (name, st["calls"]))
    check(layout_ok[0] > 0 and layout_ok[1] == 0, "every bucket holds its parameters' gradients "
          "in order, flat (%d buckets checked, %d not)" % tuple(layout_ok))


def lossy_runs():
    steps = 300
    # 64 per rank: the global batch of the harness's runs (8 workers of 16)
    _, base_loss, base_acc, _, _, base_curve = train("ddp", steps, batch=64)
    # each State forces the compressed algorithm the harness runs (direct for casts, sparse
    # for top-k) and compresses these small gradients too, through its own config
    cases = [("bf16", "direct", 0.9, 0.5, 0.01, 0.02),
             ("topk:ratio=0.01+ef:momentum=0.9,mask=0", "sparse", 0.0, 1.0, 0.10, None)]
    for spec, algo, mom, tol_acc, tol_loss, tol_gap in cases:
        cfg = {"GCOMP_ALGO": algo, "CODEC_MIN_BYTES": 0}
        _, loss, acc, st, same, curve = train(spec, steps, momentum=mom, batch=64, config=cfg)
        frames = st["codec"]["frames_encoded"]
        check(frames > 0, "%s ran through the codec: %d frames encoded" % (spec, frames))
        check(base_acc - acc <= tol_acc, "%s test accuracy %.2f%% vs fp32 %.2f%% (tolerance %.1f "
              "points)" % (spec, acc, base_acc, tol_acc))
        check(loss <= base_loss * (1 + tol_loss), "%s final loss %.5f vs fp32 %.5f (tolerance "
              "%.0f%%)" % (spec, loss, base_loss, tol_loss * 100))
        if tol_gap is not None:
            gap = sum(abs(a - b) / b for a, b in zip(curve, base_curve)) / len(curve)
            check(gap <= tol_gap, "%s loss-curve gap %.4f (tolerance %.2f)" % (spec, gap, tol_gap))
        check(same, "identical parameters on every rank (%s)" % spec)


def dtype_runs():
    ref = train("ddp", 20, dtype=torch.float64)[0]
    got, _, _, st, same, _ = train("topk:ratio=0.01+ef", 20, dtype=torch.float64)
    r = max_rel(got, ref)
    check(r <= 1e-12 and st["codec"]["frames_encoded"] == 0,
          "a float64 model is reduced uncompressed: max relative loss difference %.1e, %d "
          "frames encoded" % (r, st["codec"]["frames_encoded"]))
    check(same, "identical parameters on every rank (float64)")
    state = gt.State(codec="bf16")
    rank, n = dist.get_rank(), dist.get_world_size()
    b = torch.full((1000,), float(rank + 1), dtype=torch.bfloat16)
    state.allreduce(b, op="sum")
    i = torch.arange(1000, dtype=torch.int32) * (rank + 1)
    state.allreduce(i, op="max")
    check(bool((b == float(n * (n + 1) // 2)).all()) and bool((i == torch.arange(1000) * n).all()),
          "State.allreduce on bfloat16 (sum) and int32 (max) tensors is exact")
    try:
        state.start(torch.zeros(4, dtype=torch.complex64))
        check(False, "a complex64 bucket is refused")
    except TypeError as e:
        check("complex64" in str(e), "a complex64 bucket is refused: %s" % e)
    # error feedback is keyed per tensor: two tensors of one size no longer share a residual
    x, y = torch.zeros(1000), torch.zeros(1000)
    kx, ky = state._tensor_key(x), state._tensor_key(y)
    check(kx != ky and state._tensor_key(x) == kx, "State.allreduce keys tensors of one size "
          "apart (%d, %d), and a tensor alike each time" % (kx, ky))
    state.close()


def unclosed_state():
    """A State the script never closes, its waiter having completed a future: the exit must
    be clean (the atexit hook stops the waiter before the interpreter tears down)."""
    global _unclosed
    _unclosed = gt.State(codec="bf16")
    fut = _unclosed.start(torch.ones(100))
    check(bool((fut.wait() == 1).all()), "a bucket averaged by a State left open")


def bad_specs():
    for spec, token in [("topk:ratio=2+ef", "ratio='2'"), ("bf16+zztop", "zztop")]:
        try:
            gt.State(codec=spec)
            check(False, "State(codec=%r) raises" % spec)
        except gcomp.Error as e:
            check(token in str(e), "State(codec=%r) raises naming %s: %s"
                  % (spec, token, str(e).split(" [")[0]))


def main():
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    bad_specs()
    exact_runs()
    lossy_runs()
    dtype_runs()
    unclosed_state()
    if dist.get_rank() == 0:
        print("ddp_check: %d failed" % len(fails) if fails else "ddp_check: all passed",
              flush=True)
    dist.destroy_process_group()
    sys.exit(1 if fails else 0)


if __name__ == "__main__":
    main()
