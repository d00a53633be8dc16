#!/usr/bin/env python3
"""Data-parallel training with PyTorch DDP, its gradients averaged by gcomp.

An ordinary DDP script: the two lines marked "gcomp" are all it takes. Launch it like any
DDP script (the launcher sets RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT):

    gcomp-run -n 4 --nodes 2 --inter-node-rate 1gbit -- python3 ddp_train.py --comm bf16
    torchrun --nproc_per_node 2 --redirects 1 --tee 1 ddp_train.py --comm 'topk:ratio=0.01+ef'

--comm ddp uses DDP's own allreduce (gloo); --comm gcomp the hook with the codec GCOMP_CODEC
names (none when unset); anything else is a gcomp codec spec for the hook ("none", "bf16",
"topk:ratio=0.01+ef:momentum=0.9"). Models: "mlp" (a two-layer MLP on
the UCI digits, 64 -> --hidden -> 10, or on Gaussian clusters when the data file is
missing) and "embed" (a communication-bound recommender: --tables embedding tables of
--rows x 64 whose dense gradients dwarf the compute, on a seeded synthetic task). Rank 0
prints one line: median step time, final training loss and test accuracy.

Its metrics go to the file GCOMP_METRICS names (gcomp.metrics: a JSON line every
--eval-every steps with the training loss over the whole training set and the test
accuracy), so gcomp-converge can judge the codecs on this model:

    gcomp-converge run --codec bf16 --must-fail topk:ratio=0.001 \
        --launch 'gcomp-run -n 2 --nodes 2' -- python3 ddp_train.py --comm gcomp
"""
import argparse
import gzip
import json
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

import gcomp.metrics                                             # convergence checks

HERE = os.path.dirname(os.path.abspath(__file__))


def load_digits(path):
    rows = []
    with gzip.open(path, "rt") as f:
        for line in f:
            rows.append([float(x) for x in line.split(",")])
    t = torch.tensor(rows)
    x, y = t[:, :-1], t[:, -1].long()
    g = torch.Generator().manual_seed(1)
    perm = torch.randperm(len(x), generator=g)
    x, y = x[perm], y[perm]
    n_test = len(x) // 5
    mu, sd = x[n_test:].mean(0), x[n_test:].std(0) + 1e-3   # training statistics
    x = (x - mu) / sd
    return (x[n_test:], y[n_test:]), (x[:n_test], y[:n_test])


def gaussian_clusters(n, dim, classes, seed):
    g = torch.Generator().manual_seed(seed)
    centers = torch.randn(classes, dim, generator=g) * 1.5
    y = torch.randint(0, classes, (n,), generator=g)
    x = centers[y] + torch.randn(n, dim, generator=g)
    return (x[n // 5:], y[n // 5:]), (x[:n // 5], y[:n // 5])


class Embed(nn.Module):
    """Categorical features -> embedding tables (dense gradients) -> small MLP."""

    def __init__(self, tables, rows, dim=64, classes=10):
        super().__init__()
        self.tables = nn.ModuleList(nn.EmbeddingBag(rows, dim, mode="mean") for _ in range(tables))
        self.head = nn.Sequential(nn.Linear(tables * dim, 128), nn.ReLU(), nn.Linear(128, classes))

    def forward(self, ids):   # ids: batch x tables x bag
        return self.head(torch.cat([t(ids[:, i]) for i, t in enumerate(self.tables)], 1))


def embed_task(n, tables, rows, seed, bag=4, classes=10):
    """Labels from a hidden class vector per id: learnable, only through the tables."""
    g = torch.Generator().manual_seed(seed)
    hidden = torch.randn(tables, rows, classes, generator=g)
    ids = torch.randint(0, rows, (n, tables, bag), generator=g)
    score = sum(hidden[i][ids[:, i]].sum(1) for i in range(tables))
    y = score.argmax(1)
    return (ids[n // 5:], y[n // 5:]), (ids[:n // 5], y[:n // 5])


def build(args):
    if args.model == "embed":
        train, test = embed_task(args.samples, args.tables, args.rows, args.data_seed)
        model = Embed(args.tables, args.rows)
    else:
        path = args.data or os.path.join(HERE, "..", "convergence", "data", "digits.csv.gz")
        if os.path.exists(path):
            train, test = load_digits(path)
        else:
            if dist.get_rank() == 0:
                print("ddp_train: %s not found (scripts/setup extracts it): Gaussian clusters"
                      % path, flush=True)
            train, test = gaussian_clusters(2000, 64, 10, args.data_seed)
        model = nn.Sequential(nn.Linear(64, args.hidden), nn.ReLU(), nn.Linear(args.hidden, 10))
    return model, train, test


def batches(train, batch, rank, world, seed):
    """Each rank its own minibatches of one seeded shuffle per epoch (disjoint shards)."""
    x, y = train
    epoch = 0
    while True:
        g = torch.Generator().manual_seed(seed * 1000 + epoch)
        perm = torch.randperm(len(x), generator=g)
        per = len(x) // world
        mine = perm[rank * per:(rank + 1) * per]
        for i in range(0, per - batch + 1, batch):
            idx = mine[i:i + batch]
            yield x[idx], y[idx]
        epoch += 1


def evaluate(model, train, test, step):
    """Training loss over the whole training set and test accuracy (percent), logged."""
    with torch.no_grad():
        model.eval()
        loss = F.cross_entropy(model(train[0]), train[1]).item()
        acc = (model(test[0]).argmax(1) == test[1]).float().mean().item() * 100
        model.train()
    gcomp.metrics.log(step, loss=loss, accuracy=acc, test_rows=len(test[1]))
    return loss, acc


def training_args(ap):
    """The model, data, optimizer and run options both examples take (zero_train.py too)."""
    ap.add_argument("--model", choices=["mlp", "embed"], default="mlp")
    ap.add_argument("--data", help="digits CSV (label last), default convergence/data/digits")
    ap.add_argument("--hidden", type=int, default=512)
    ap.add_argument("--tables", type=int, default=4)
    ap.add_argument("--rows", type=int, default=16384)
    ap.add_argument("--samples", type=int, default=20000)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=5, help="steps left out of the step time")
    ap.add_argument("--batch", type=int, default=32, help="per rank")
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--momentum", type=float, default=0.9,
                    help="SGD momentum (0 when the codec's ef stage carries momentum)")
    ap.add_argument("--seed", type=int, default=gcomp.metrics.seed(0),
                    help="model initialisation and batch order (default: GCOMP_SEED, else 0)")
    ap.add_argument("--eval-every", type=int, default=0,
                    help="steps between the metrics records (default: steps/20)")
    ap.add_argument("--data-seed", type=int, default=7)
    ap.add_argument("--threads", type=int, default=1, help="torch threads per rank")
    ap.add_argument("--json", help="write rank 0's results here")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--comm", default="ddp", help="ddp, or a gcomp codec spec for the hook")
    training_args(ap)
    ap.add_argument("--bucket-cap-mb", type=float, default=4.0)
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(args.seed)   # the same initial model everywhere (DDP also broadcasts)
    model, train, test = build(args)
    ddp = DDP(model, bucket_cap_mb=args.bucket_cap_mb)
    momentum = args.momentum
    state = None
    if args.comm != "ddp":
        import gcomp.torch as gt                                 # gcomp
        state = gt.State(codec=None if args.comm == "gcomp" else args.comm)
        ddp.register_comm_hook(state, gt.hook)                   # gcomp
        if "momentum=" in state.codec.spec():   # printed only when set
            momentum = 0.0   # the codec applies momentum (DGC's correction) itself
    opt = torch.optim.SGD(ddp.parameters(), lr=args.lr, momentum=momentum)

    times, losses = [], []
    it = batches(train, args.batch, rank, world, args.seed * 7919 + args.data_seed)
    every = args.eval_every or max(1, args.steps // 20)
    for step in range(args.steps):
        if step % every == 0 and gcomp.metrics.enabled():
            evaluate(model, train, test, step)
        x, y = next(it)
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(ddp(x), y)
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - t0)
        losses.append(loss.item())

    # final training loss over the whole training set, test accuracy: the same everywhere
    train_loss, acc = evaluate(model, train, test, args.steps)
    t = torch.tensor(sorted(times[args.warmup:]) or [0.0])
    step_ms = t.median().item() * 1e3
    out = {"comm": args.comm, "model": args.model, "ranks": world, "steps": args.steps,
           "step_ms": step_ms, "final_loss": train_loss, "test_acc": acc, "losses": losses}
    if state is not None:
        s = state.stats()
        out["codec"] = s["codec"]["spec"]
        out["frames_encoded"] = s["codec"]["frames_encoded"]
        out["wire_bytes"] = s["wire_bytes"]
        out["hidden"] = s["overlap"]["hidden"]
        out["comm_ms_per_step"] = s["overlap"]["comm_s"] / max(1, s["overlap"]["iterations"]) * 1e3
    if rank == 0:
        extra = ""
        if state is not None:
            extra = "  (gcomp: %d frames encoded, %.0f%% of %.1f ms/step of reduction hidden " \
                    "behind backward)" % (out["frames_encoded"], 100 * out["hidden"],
                                          out["comm_ms_per_step"])
        print("%-34s step %8.2f ms   final loss %.4f   test acc %6.2f%%%s"
              % (args.comm, step_ms, train_loss, acc, extra), flush=True)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(out, f)
    if state is not None:
        state.close()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
