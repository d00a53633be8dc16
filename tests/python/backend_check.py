"""Conformance of the "gcomp" torch.distributed backend: every supported call against a
reference each rank computes itself from every rank's (seeded) input, over dtypes and ops,
sync and async, on the world group and on a sub-group; unsupported calls raise at once.

    gcomp-run -n 3 [--nodes 2] -- python3 backend_check.py
"""
import os
import sys

import torch
import torch.distributed as dist

import gcomp.torch  # noqa: F401  (registers the backend)
from gcomp import backend

R = dist.ReduceOp
FLOATS = (torch.float32, torch.float64, torch.bfloat16, torch.float16)
INTS = (torch.int32, torch.int64, torch.uint8, torch.int8)
failures = []


def check(what, ok, detail=""):
    if not ok:
        failures.append("%s %s" % (what, detail))
        print("rank %d: FAIL %s %s" % (dist.get_rank(), what, detail), flush=True)


def data(rank, n, dtype, salt=0):
    """Rank rank's input: small integers (exact in every type, sums stay exact)."""
    g = torch.Generator().manual_seed(1000 * rank + 17 * salt + n)
    if dtype == torch.bool:
        return torch.randint(0, 2, (n,), generator=g).bool()
    lo, hi = (1, 4) if dtype in (torch.uint8, torch.int8) else (-8, 9)
    return torch.randint(lo, hi, (n,), generator=g).to(dtype)


def ref_reduce(xs, op, dtype):
    acc = xs[0].double() if dtype != torch.bool else xs[0]
    for x in xs[1:]:
        x = x.double() if dtype != torch.bool else x
        if op == R.SUM:
            acc = acc + x if dtype != torch.bool else acc | x
        elif op == R.PRODUCT:
            acc = acc * x if dtype != torch.bool else acc & x
        elif op == R.MIN:
            acc = torch.minimum(acc, x)
        elif op == R.MAX:
            acc = torch.maximum(acc, x)
        elif op == R.AVG:
            acc = acc + x
    if op == R.AVG and dtype in (torch.bfloat16, torch.float16):
        return (acc.float() / len(xs)).to(dtype)   # fp32 sums, one rounding at the end
    if op == R.AVG:
        acc = acc / len(xs)
        if not dtype.is_floating_point:
            acc = torch.trunc(acc)
    return acc.to(dtype)


def _global(group, r):
    return dist.distributed_c10d._get_global_rank(group, r)


def same(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)


def run(group, tag):
    me, n = dist.get_rank(group), dist.get_world_size(group)
    ops = [(R.SUM, "sum"), (R.PRODUCT, "prod"), (R.MIN, "min"), (R.MAX, "max"), (R.AVG, "avg")]
    for dtype in FLOATS + INTS + (torch.bool,):
        for op, name in ops:
            if dtype == torch.bool and op == R.AVG:
                continue
            if op == R.PRODUCT and dtype in (torch.bfloat16, torch.float16, torch.uint8,
                                             torch.int8):
                continue   # products of small integers overflow these types
            for async_op in (False, True):
                x = data(me, 37, dtype)
                want = ref_reduce([data(r, 37, dtype) for r in range(n)], op, dtype)
                w = dist.all_reduce(x, op=op, group=group, async_op=async_op)
                if async_op:
                    w.wait()
                check("%s all_reduce %s %s async=%s" % (tag, dtype, name, async_op),
                      same(x, want), "%s vs %s" % (x[:4].tolist(), want[:4].tolist()))
        # reduce_scatter (list and flat forms), sums
        if dtype == torch.bool:
            continue
        ins = [data(me, 5, dtype, salt=j) for j in range(n)]
        out = torch.zeros(5, dtype=dtype)
        dist.reduce_scatter(out, ins, op=R.SUM, group=group)
        want = ref_reduce([data(r, 5, dtype, salt=me) for r in range(n)], R.SUM, dtype)
        check("%s reduce_scatter %s" % (tag, dtype), same(out, want))
        flat = torch.cat([data(me, 5, dtype, salt=j) for j in range(n)])
        out = torch.zeros(5, dtype=dtype)
        dist._reduce_scatter_base(out, flat, group=group)
        check("%s _reduce_scatter_base %s" % (tag, dtype), same(out, want))
        # reduce to a root
        root = n - 1
        x = data(me, 9, dtype)
        orig = x.clone()
        dist.reduce(x, dst=_global(group, root) if group else root, op=R.MAX,
                    group=group)
        want = ref_reduce([data(r, 9, dtype) for r in range(n)], R.MAX, dtype)
        check("%s reduce %s" % (tag, dtype), same(x, want) if me == root else same(x, orig))

    for dtype in FLOATS + INTS + (torch.bool,):
        # broadcast from every root, of a non-contiguous tensor too
        for root in range(n):
            x = data(me, 11, dtype)
            groot = _global(group, root) if group else root
            dist.broadcast(x, src=groot, group=group)
            check("%s broadcast %s root %d" % (tag, dtype, root), same(x, data(root, 11, dtype)))
        m = torch.stack([data(me, 6, dtype), data(me + 50, 6, dtype)], 1)   # 6x2, column view
        col = m[:, 0]
        dist.broadcast(col, src=_global(group, 0) if group else 0, group=group)
        check("%s broadcast non-contiguous %s" % (tag, dtype),
              same(m[:, 0], data(0, 6, dtype)) and same(m[:, 1], data(me + 50, 6, dtype)))
        # all_gather, _all_gather_base, gather, scatter
        outs = [torch.empty(7, dtype=dtype) for _ in range(n)]
        w = dist.all_gather(outs, data(me, 7, dtype), group=group, async_op=True)
        w.wait()
        check("%s all_gather %s" % (tag, dtype),
              all(same(outs[r], data(r, 7, dtype)) for r in range(n)))
        # the blocks of one tensor (gathered into it, no staging), in place too; the same
        # blocks in reverse order (staged); two calls of one shape in flight at once, then
        # again (staging buffers reused from the pool must not be shared or stale)
        whole = torch.zeros(7 * n, dtype=dtype)
        dist.all_gather(list(whole.chunk(n)), data(me, 7, dtype), group=group)
        check("%s all_gather into chunks %s" % (tag, dtype),
              same(whole, torch.cat([data(r, 7, dtype) for r in range(n)])))
        whole = torch.zeros(7 * n, dtype=dtype)
        whole.chunk(n)[me].copy_(data(me, 8, dtype)[1:])
        dist.all_gather(list(whole.chunk(n)), whole.chunk(n)[me], group=group)
        check("%s all_gather in place %s" % (tag, dtype),
              same(whole, torch.cat([data(r, 8, dtype)[1:] for r in range(n)])))
        whole = torch.zeros(7 * n, dtype=dtype)
        dist.all_gather(list(reversed(whole.chunk(n))), data(me, 7, dtype), group=group)
        check("%s all_gather into reversed chunks %s" % (tag, dtype),
              same(whole, torch.cat([data(r, 7, dtype) for r in reversed(range(n))])))
        for rep in range(2):
            o1 = [torch.empty(7, dtype=dtype) for _ in range(n)]
            o2 = [torch.empty(7, dtype=dtype) for _ in range(n)]
            w1 = dist.all_gather(o1, data(me, 7, dtype, salt=rep), group=group, async_op=True)
            w2 = dist.all_gather(o2, data(me + 9, 7, dtype, salt=rep), group=group,
                                 async_op=True)
            w2.wait()
            w1.wait()
            check("%s all_gather twice in flight %s #%d" % (tag, dtype, rep),
                  all(same(o1[r], data(r, 7, dtype, salt=rep)) and
                      same(o2[r], data(r + 9, 7, dtype, salt=rep)) for r in range(n)))
        flat = torch.empty(7 * n, dtype=dtype)
        dist._all_gather_base(flat, data(me, 7, dtype), group=group)
        check("%s _all_gather_base %s" % (tag, dtype),
              same(flat, torch.cat([data(r, 7, dtype) for r in range(n)])))
        g0 = _global(group, 0) if group else 0
        gl = [torch.empty(3, dtype=dtype) for _ in range(n)] if me == 0 else None
        dist.gather(data(me, 3, dtype), gather_list=gl, dst=g0, group=group)
        if me == 0:
            check("%s gather %s" % (tag, dtype),
                  all(same(gl[r], data(r, 3, dtype)) for r in range(n)))
        out = torch.empty(4, dtype=dtype)
        sl = [data(100 + r, 4, dtype) for r in range(n)] if me == 0 else None
        dist.scatter(out, scatter_list=sl, src=g0, group=group)
        check("%s scatter %s" % (tag, dtype), same(out, data(100 + me, 4, dtype)))
        # all_to_all (lists), all_to_all_single equal and unequal splits
        outs = [torch.empty(3, dtype=dtype) for _ in range(n)]
        dist.all_to_all(outs, [data(10 * me + j, 3, dtype) for j in range(n)], group=group)
        check("%s all_to_all %s" % (tag, dtype),
              all(same(outs[i], data(10 * i + me, 3, dtype)) for i in range(n)))
        out = torch.empty(2 * n, dtype=dtype)
        dist.all_to_all_single(out, torch.cat([data(10 * me + j, 2, dtype) for j in range(n)]),
                               group=group)
        check("%s all_to_all_single %s" % (tag, dtype),
              same(out, torch.cat([data(10 * i + me, 2, dtype) for i in range(n)])))
        # rank i sends i + j + 1 rows to rank j
        ins = [data(10 * me + j, me + j + 1, dtype) for j in range(n)]
        out = torch.empty(sum(i + me + 1 for i in range(n)), dtype=dtype)
        dist.all_to_all_single(out, torch.cat(ins), [i + me + 1 for i in range(n)],
                               [me + j + 1 for j in range(n)], group=group)
        check("%s all_to_all_single unequal %s" % (tag, dtype),
              same(out, torch.cat([data(10 * i + me, i + me + 1, dtype) for i in range(n)])))

    # coalesced all_reduce, barrier, send/recv
    xs = [data(me, 4, torch.float32), data(me, 6, torch.float32)]
    dist.all_reduce_coalesced(xs, op=R.SUM, group=group)
    check("%s all_reduce_coalesced" % tag,
          same(xs[0], ref_reduce([data(r, 4, torch.float32) for r in range(n)], R.SUM,
                                 torch.float32)) and
          same(xs[1], ref_reduce([data(r, 6, torch.float32) for r in range(n)], R.SUM,
                                 torch.float32)))
    dist.barrier(group=group)
    if n >= 2 and me < 2:
        peer = _global(group, 1 - me) if group else 1 - me
        if me == 0:
            dist.send(data(77, 5, torch.int64), dst=peer, group=group, tag=3)
            got = torch.empty(5, dtype=torch.int64)
            dist.recv(got, src=peer, group=group, tag=4)
            check("%s recv" % tag, same(got, data(78, 5, torch.int64)))
        else:
            got = torch.empty(5, dtype=torch.int64)
            dist.recv(got, src=peer, group=group, tag=3)
            check("%s recv" % tag, same(got, data(77, 5, torch.int64)))
            dist.send(data(78, 5, torch.int64), dst=peer, group=group, tag=4)


def refusals():
    x = torch.ones(4, dtype=torch.int32)
    for what, fn in (("BAND", lambda: dist.all_reduce(x, op=R.BAND)),
                     ("monitored_barrier", lambda: dist.monitored_barrier()),
                     ("two tensors", lambda: dist.all_reduce_multigpu([x, x]))):
        try:
            fn()
        except RuntimeError as e:
            check("refusal %s names gloo" % what, "gloo" in str(e).lower(), str(e))
        except Exception as e:   # torch's own checks come first for some
            check("refusal %s" % what, isinstance(e, (ValueError, TypeError)), repr(e))
        else:
            check("refusal %s" % what, False, "did not raise")


def main():
    dist.init_process_group("gcomp", init_method=os.environ.get("INIT_METHOD", "env://"))
    me, n = dist.get_rank(), dist.get_world_size()
    check("backend name", dist.get_backend() == "gcomp", dist.get_backend())
    check("comm_of", backend.comm_of() is not None and backend.comm_of().size() == n)
    run(None, "world")
    if n >= 3:   # a sub-group of the odd-numbered ranks and 0, in another order
        ranks = [0] + list(range(1, n, 2))
        sub = dist.new_group(ranks, backend="gcomp")
        if me in ranks:
            run(sub, "sub")
    refusals()
    dist.barrier()
    print("rank %d: %d failures" % (me, len(failures)), flush=True)
    dist.destroy_process_group()
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
