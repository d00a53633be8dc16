"""gcomp as a torch.distributed backend: a ProcessGroup written in Python over gcomp.Comm.

    import gcomp.torch                       # registers the backend "gcomp"
    dist.init_process_group("gcomp")         # env://, tcp:// or file://, any launcher

Every call returns a real c10d Work (_Work, a Python subclass of torch's Work), so DDP's
reducer, ZeroRedundancyOptimizer and async_op=True take it like gloo's, and its wait()
raises gcomp's error. The C call is issued on the calling thread, in program order (every
rank issues the same sequence, which is what matches them). wait() blocks in
gcomp_request_wait without the GIL on the calling thread; a Work whose future was taken
(DDP's reducer, comm hooks) is completed by a waiter thread instead. Either copies results
back where the call needed a staging buffer (non-contiguous tensors, types gcomp does not
have, CUDA tensors, which are staged through host memory: that path is untested).

The communicator bootstraps through the store torch hands the backend (an allgather of a
few hundred bytes per rank): no port or variable beyond torch's own. Sub-groups
(dist.new_group(ranks, backend="gcomp")) get a communicator of their own.

Codecs: float32 all_reduce and reduce_scatter sums and averages use GCOMP_CODEC across
nodes and GCOMP_INTRA_CODEC inside one (under GCOMP_CODEC_MIN_BYTES and the planner, as
the C API does); all_gather is compressed only with GCOMP_ALLGATHER_CODEC; the rest is
exact. set_codec(group, collective, spec) overrides a group's codec per collective, and
state_dict()/load_state_dict() carry its error-feedback residuals through a checkpoint.
"""
import collections
import os
import queue
import tempfile
import threading

import torch
import torch.distributed as dist

import gcomp

__all__ = ["ProcessGroupGcomp", "register", "comm_of", "set_codec", "codec_of", "abort",
           "state_dict", "load_state_dict", "mpi_env"]

NAME = "gcomp"
_NATIVE = {torch.float32: "float32", torch.float64: "float64", torch.int32: "int32",
           torch.int64: "int64", torch.bfloat16: "bfloat16", torch.float16: "float16"}
# reduced exactly in a wider type gcomp has, then narrowed back (wrapping as torch does)
_WIDE = {torch.uint8: torch.int32, torch.int8: torch.int32, torch.int16: torch.int32,
         torch.bool: torch.int32}
_R = dist.ReduceOp
_OPS = (("sum", _R.SUM), ("prod", _R.PRODUCT), ("min", _R.MIN), ("max", _R.MAX),
        ("avg", _R.AVG))
_GLOO = "; use a gloo group for it (dist.new_group(backend=\"gloo\"))"
_COLLECTIVES = ("allreduce", "reduce_scatter", "allgather")
_KEY_SLOTS = 64   # distinct tensors per size whose error feedback is kept apart
_POOL_BYTES = 1 << 30   # staging buffers a group keeps between calls (_Pool)
_UNCONSUMED = 64   # completed Work nobody waited for, kept alive for C++ holders (_Work)


def _refuse(call, why):
    raise RuntimeError("gcomp backend: %s: %s%s" % (call, why, _GLOO))


def _op_name(call, op, dtype):
    for name, o in _OPS:
        if op == o:
            break
    else:
        names = [n for n in ("BAND", "BOR", "BXOR", "PREMUL_SUM") if op == getattr(_R, n, None)]
        _refuse(call, "reduce op %s is not supported (SUM, PRODUCT, MIN, MAX and AVG are)"
                % (names[0] if names else op))
    if dtype == torch.bool:   # logical or / and, as gloo reduces bools
        name = {"sum": "max", "max": "max", "prod": "min", "min": "min"}.get(name)
        if name is None:
            _refuse(call, "AVG of a bool tensor")
    return name


def _host(t):
    return t if t.device.type == "cpu" else t.detach().to("cpu")


def _wire(dtype):
    """The gcomp type and torch type a tensor of dtype moves as, exactly: its own, or 32-bit
    words holding its bytes (padded)."""
    if dtype in _NATIVE:
        return _NATIVE[dtype], dtype
    return "int32", torch.int32


def _words(t):
    """Elements of t's wire type that hold t."""
    if t.dtype in _NATIVE:
        return t.numel()
    return (t.numel() * t.element_size() + 3) // 4


def _pack(dst, src):
    """src's values (or bytes) into dst, a 1-D slice of the wire type."""
    src = _host(src)
    if src.dtype in _NATIVE:
        dst.copy_(src.reshape(-1))
    else:
        nb = src.numel() * src.element_size()
        dst.view(torch.uint8)[:nb].copy_(src.contiguous().reshape(-1).view(torch.uint8))


def _unpack(dst, src):
    """The inverse of _pack: src (a 1-D slice of the wire type) into the tensor dst."""
    if dst.dtype in _NATIVE:
        dst.copy_(src[:dst.numel()].view(dst.shape))
    else:
        nb = dst.numel() * dst.element_size()
        dst.copy_(src.view(torch.uint8)[:nb].view(dst.dtype).view(dst.shape))


def _direct(t):
    """t itself when gcomp can work on its memory (CPU, contiguous, a gcomp type)."""
    return t.device.type == "cpu" and t.is_contiguous() and t.dtype in _NATIVE


def _relay(fut):
    result, err = fut.value()
    if err:
        raise RuntimeError(err)
    return result


class _Call:
    """One call in flight: its gcomp requests, what runs when they are done (copies back,
    staging buffers back to the pool), and how it ended."""
    __slots__ = ("reqs", "finish", "result", "err", "early", "done", "base", "relay", "work",
                 "consumed", "event")

    def __init__(self, reqs, finish, result):
        self.reqs, self.finish, self.result = reqs, finish, result
        self.err = ""
        self.early = None   # the failure of a request that _poll found done
        self.done = False
        self.base = self.relay = self.work = None
        self.consumed = False
        self.event = None   # set when done, for a call outside the group's order (recv)


class _Work(dist.Work):
    """The c10d Work of a gcomp call: a Python subclass of torch's Work, which torch 1.13
    binds with a trampoline (c10d::PyProcessGroup::PyWork) overriding wait() and
    getFuture(), so DDP's reducer and the C++ broadcast that DDP starts with call these
    methods. wait() raises gcomp's error: the Work that _create_work_from_future makes
    cannot (its wait() is FutureWrappingWork::wait, which calls ivalue::Future::wait(),
    which blocks until the future completes and never throws; only the future's value()
    raises). wait() waits on the calling thread; a future (get_future) completes from the
    group's waiter thread, without anyone waiting.

    A call nobody waits for is completed by a later call's wait(), or at the next call's
    issue once its requests are done.

    The Python object must outlive every C++ reference to it: when it dies first, the C++
    object forgets its Python methods, and c10d's Work::wait() then waits for a completion
    that never comes. The group keeps it until it is complete and was waited for or had its
    future taken (what the C++ callers of torch 1.13 do at once); the last _UNCONSUMED of
    the others are kept too."""

    def __init__(self, pg, call):
        super().__init__()
        self._pg = pg
        self._call = call

    def wait(self, timeout=None):
        c = self._call
        c.consumed = True
        if not c.done:
            self._pg._complete_through(c)
        if c.err:
            raise RuntimeError(c.err)
        return True

    def get_future(self):
        return self._pg._future_of(self._call)

    def is_completed(self):
        return self._call.done or self._pg._poll(self._call)

    def is_success(self):
        return self.is_completed() and not self._call.err

    def exception(self):
        return RuntimeError(self._call.err) if self.is_completed() and self._call.err \
            else None

    def result(self):
        self.wait()
        return self._call.result

    def source_rank(self):
        raise RuntimeError("gcomp backend: source_rank: recv from any source is not "
                           "supported" + _GLOO)

    def synchronize(self):
        pass


def _store_allgather(store, rank, size):
    """allgather(bytes) over torch's store, for gcomp_comm_init_oob."""
    rounds = [0]

    def allgather(mine):
        r = rounds[0]
        rounds[0] += 1
        store.set("gcomp/boot/%d/%d" % (r, rank), mine)
        return [bytes(store.get("gcomp/boot/%d/%d" % (r, i))) for i in range(size)]
    return allgather


class _Waiter:
    """A thread completing the calls whose future was taken (DDP's reducer, comm hooks), in
    issue order, so that their futures complete with nobody waiting."""

    def __init__(self, pg, name):
        self._pg = pg
        self._q = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    def put(self, call):
        self._q.put(call)

    def stop(self):
        self._q.put(None)
        self._thread.join()

    def _loop(self):
        while True:
            call = self._q.get()
            if call is None:
                return
            if not call.done:
                self._pg._complete_through(call)


class _Pool:
    """Staging buffers kept between calls. A fresh large tensor is a fresh mapping (glibc
    maps anything past 32 MiB anew and unmaps it at free), and its first touch costs a page
    fault per 4 KiB page: at 64 MiB a rank on 4 ranks, all_gather's 256 MiB staging
    buffer took 65,536 faults, most of the call's CPU (gloo pays the same for its own
    temporary). A buffer given back after its call is reused by the next call of the same
    shape; at most limit bytes are kept, the least recently used dropped first."""

    def __init__(self, limit):
        self._free = collections.OrderedDict()   # (numel, dtype) -> [tensor]
        self._bytes = 0
        self._limit = limit
        self._lock = threading.Lock()

    def take(self, numel, dtype):
        key = (numel, dtype)
        with self._lock:
            free = self._free.get(key)
            if free:
                t = free.pop()
                if not free:
                    del self._free[key]
                self._bytes -= t.numel() * t.element_size()
                return t
        return torch.empty(numel, dtype=dtype)

    def give(self, t):
        nb = t.numel() * t.element_size()
        if nb > self._limit:
            return
        key = (t.numel(), t.dtype)
        with self._lock:
            self._free.setdefault(key, []).append(t)
            self._free.move_to_end(key)
            self._bytes += nb
            while self._bytes > self._limit:
                old, free = next(iter(self._free.items()))
                gone = free.pop(0)
                if not free:
                    del self._free[old]
                self._bytes -= gone.numel() * gone.element_size()

    def clear(self):
        with self._lock:
            self._free.clear()
            self._bytes = 0


def _adjacent(outs, t, rank):
    """The address of one buffer that outs are consecutive blocks of (each contiguous, of
    t's type and size, in rank order), as the blocks of one tensor's chunk() are; None
    otherwise, or when t overlaps that buffer anywhere but at block rank (in place)."""
    if not _direct(t) or any(not _direct(o) or o.dtype != t.dtype for o in outs):
        return None
    nb = t.numel() * t.element_size()
    base = outs[0].data_ptr()
    if nb == 0 or any(o.data_ptr() != base + r * nb for r, o in enumerate(outs)):
        return None
    src = t.data_ptr()
    if src != base + rank * nb and base - nb < src < base + len(outs) * nb:
        return None
    return base


class ProcessGroupGcomp(dist.ProcessGroup):
    """The "gcomp" backend's process group (made by torch through register()'s creator)."""

    def __init__(self, store, rank, size, timeout=None):
        super().__init__(rank, size)
        self._store = store
        self.comm = gcomp.Comm.from_allgather(rank, size, _store_allgather(store, rank, size))
        self._calls = collections.deque()   # calls in flight, in issue order
        self._completing = threading.Lock()   # held by the thread completing calls
        self._flock = threading.Lock()   # a call's done flag against its future's creation
        self._unconsumed = collections.deque(maxlen=_UNCONSUMED)
        self._waiter = _Waiter(self, "gcomp-pg-%d" % rank)
        self._pool = _Pool(_POOL_BYTES)
        self._codecs = {}
        for c in _COLLECTIVES:
            self.set_codec(c, None)
        self._keys = collections.defaultdict(collections.OrderedDict)   # numel -> ptr -> slot
        self._p2p = collections.Counter()   # (src, dst, tag) -> messages so far
        self._closed = False

    # ---- plumbing -------------------------------------------------------------------------
    def getBackendName(self):
        return NAME

    def set_codec(self, collective, spec):
        """The codec of one collective ("allreduce", "reduce_scatter", "allgather") on this
        group: a spec, "none", or None for the environment's choice (GCOMP_CODEC across
        nodes, GCOMP_INTRA_CODEC inside one; all_gather: GCOMP_ALLGATHER_CODEC)."""
        if collective not in _COLLECTIVES:
            raise ValueError("gcomp backend: set_codec: %r is not one of %s"
                             % (collective, ", ".join(_COLLECTIVES)))
        if spec is None:
            if collective == "allgather":
                spec = gcomp.param("GCOMP_ALLGATHER_CODEC")
            else:
                spec = gcomp.param("GCOMP_INTRA_CODEC" if self.comm.nnodes() == 1
                                   else "GCOMP_CODEC")
        old = self._codecs.get(collective)
        self._codecs[collective] = gcomp.Codec(spec) if spec and spec != "none" else None
        if old is not None:
            self._complete_all()   # a pending call may still use it
            old.close()

    def codec(self, collective):
        """The gcomp.Codec one collective uses on this group, or None (exact)."""
        return self._codecs[collective]

    def _codec(self, collective, t, op):
        if t.dtype != torch.float32 or op not in ("sum", "avg"):
            return None
        return self._codecs[collective]

    def _key(self, t):
        """Error-feedback key of a tensor: its size and the order in which tensors of that
        size (by address) first came, the same on every rank and in a resumed run."""
        slots = self._keys[t.numel()]
        ptr = t.data_ptr()
        slot = slots.get(ptr)
        if slot is None:
            slot = len(slots)
            if slot >= _KEY_SLOTS:   # recycle the least recently used slot
                _, slot = slots.popitem(last=False)
            slots[ptr] = slot
        slots.move_to_end(ptr)
        return (t.numel() << 8) | slot

    def _work(self, reqs, finish, result, pooled=()):
        """Work for requests reqs; finish (or None) runs when they are done, before the
        pooled staging buffers go back to the pool."""
        if pooled:
            finish = self._then_release(finish, pooled)
        call = _Call(reqs, finish, result)
        work = _Work(self, call)
        call.work = work   # until it is complete and consumed (see _Work)
        if reqs:
            if self._calls:   # calls nobody waited for yet: release those that are done
                self._poll()
            self._calls.append(call)
        else:   # nothing in flight: done now, whatever calls before it still run
            self._finish(call)
        return work

    def _complete_through(self, call):
        """Completes the calls in flight up to call, in issue order, on this thread: each
        one's requests are waited for (without the GIL), its finish runs, its future (if
        taken) completes. gcomp completes a communicator's requests in issue order, so the
        earlier ones cost nothing more."""
        if call.event is not None:
            call.event.wait()
            return
        with self._completing:
            while not call.done:
                self._finish(self._calls.popleft())

    def _complete_all(self):
        with self._completing:
            while self._calls:
                self._finish(self._calls.popleft())

    def _finish(self, c):
        err = c.early
        for req in c.reqs:   # every request is waited for, even after one failed
            try:
                req.wait()
            except gcomp.Error as e:
                err = err or e
        if err is None and c.finish is not None:
            try:
                c.finish()
            except Exception as e:   # a copy back that failed: the Work raises it
                err = e
        c.reqs = c.finish = None
        self._settle(c, "" if err is None else "gcomp backend: %s" % err)

    def _settle(self, c, err):
        with self._flock:
            c.err = err
            c.done = True
            base = c.base
        if base is not None:
            base.set_result((c.result, c.err))
        if not c.consumed:
            self._unconsumed.append(c.work)
        c.work = None

    def _future_of(self, call):
        """The torch future of a call (its value the result; a failure is a C++ error, as
        DDP's reducer, which reads the value in C++, needs: Future.set_exception would only
        store the exception as the value). It completes from the waiter thread."""
        call.consumed = True
        with self._flock:
            if call.relay is None:
                call.base = torch.futures.Future()
                call.relay = call.base.then(_relay)
                if call.done:
                    call.base.set_result((call.result, call.err))
                elif call.event is None:
                    self._waiter.put(call)
        return call.relay

    def _poll(self, call=None):
        """Completes the calls in flight whose requests are done, in order, up to call (None:
        all of them); never blocks (a call another thread is completing counts as not done
        yet). Returns whether call is complete."""
        if call is not None and call.event is not None or \
                not self._completing.acquire(blocking=False):
            return call is not None and call.done
        try:
            while self._calls and (call is None or not call.done):
                c = self._calls[0]
                while c.reqs:
                    try:
                        if not c.reqs[0].test():
                            return False
                    except gcomp.Error as e:   # done, and failed
                        c.early = c.early or e
                    c.reqs = c.reqs[1:]
                self._finish(self._calls.popleft())
            return call is not None and call.done
        finally:
            self._completing.release()

    def _then_release(self, finish, pooled):
        def run():
            if finish is not None:
                finish()
            for b in pooled:   # only after a call that succeeded: it no longer writes them
                self._pool.give(b)
        return run

    def _check_open(self, call):
        if self._closed:
            raise RuntimeError("gcomp backend: %s after the group was shut down" % call)

    def _one(self, call, tensors):
        self._check_open(call)
        if len(tensors) != 1:
            _refuse(call, "%d tensors per call (one per process is supported)" % len(tensors))
        return tensors[0]

    def _reduce_buf(self, t):
        """(buffer gcomp reduces, its gcomp type, copy back or None) for tensor t."""
        if _direct(t):
            return t, _NATIVE[t.dtype], None
        wide = _WIDE.get(t.dtype, t.dtype)
        if wide not in _NATIVE:
            _refuse("reduction", "tensors of %s cannot be reduced" % t.dtype)
        buf = _host(t).to(wide).contiguous()
        return buf, _NATIVE[wide], lambda: t.copy_(buf)

    # ---- reductions -----------------------------------------------------------------------
    def allreduce(self, tensors, opts=None):
        t = self._one("all_reduce", tensors)
        op = _op_name("all_reduce", opts.reduceOp if opts is not None else _R.SUM, t.dtype)
        buf, dt, back = self._reduce_buf(t)
        codec = self._codec("allreduce", buf, op)
        req = self.comm.iallreduce(buf.data_ptr(), buf.numel(), dt, op, codec,
                                   self._key(buf) if codec else 0, keep=buf)
        return self._work([req], back, tensors)

    def allreduce_coalesced(self, tensors, opts=None):
        self._check_open("all_reduce_coalesced")
        if not tensors:
            return self._work([], None, tensors)
        if len({t.dtype for t in tensors}) != 1:
            _refuse("all_reduce_coalesced", "tensors of several types")
        op = _op_name("all_reduce_coalesced", opts.reduceOp if opts is not None else _R.SUM,
                      tensors[0].dtype)
        flat = torch.cat([_host(t).reshape(-1) for t in tensors])
        buf, dt, _ = self._reduce_buf(flat)
        codec = self._codec("allreduce", buf, op)
        req = self.comm.iallreduce(buf.data_ptr(), buf.numel(), dt, op, codec,
                                   self._key(buf) if codec else 0, keep=buf)

        def back():
            at = 0
            for t in tensors:
                t.copy_(buf[at:at + t.numel()].view(t.shape))
                at += t.numel()
        return self._work([req], back, tensors)

    def reduce(self, tensors, opts):
        t = self._one("reduce", tensors)
        op = _op_name("reduce", opts.reduceOp, t.dtype)
        root = opts.rootRank
        if self.rank() == root:
            buf, dt, back = self._reduce_buf(t)
        else:   # only the root's tensor changes
            buf = _host(t).to(_WIDE.get(t.dtype, t.dtype)).contiguous().clone()
            dt, back = _NATIVE[buf.dtype], None
        req = self.comm.iallreduce(buf.data_ptr(), buf.numel(), dt, op, None, 0, keep=buf)
        return self._work([req], back, tensors)

    def reduce_scatter(self, output_tensors, input_tensors, opts=None):
        out = self._one("reduce_scatter", output_tensors)
        ins = input_tensors[0] if len(input_tensors) == 1 else None
        if ins is None or len(ins) != self.size():
            _refuse("reduce_scatter", "want one list of %d input tensors" % self.size())
        if any(i.numel() != out.numel() for i in ins):
            _refuse("reduce_scatter", "input tensors of another size than the output")
        flat = torch.cat([_host(i).reshape(-1) for i in ins])
        return self._reduce_scatter(out, flat, opts, output_tensors)

    def _reduce_scatter_base(self, output, input, opts=None):
        self._check_open("_reduce_scatter_base")
        if input.numel() != output.numel() * self.size():
            _refuse("_reduce_scatter_base", "input of %d elements for an output of %d on %d "
                    "ranks" % (input.numel(), output.numel(), self.size()))
        return self._reduce_scatter(output, input.reshape(-1), opts, output)

    def _reduce_scatter(self, out, flat, opts, result):
        op = _op_name("reduce_scatter", opts.reduceOp if opts is not None else _R.SUM,
                      out.dtype)
        send, dt, _ = self._reduce_buf(flat)
        if _direct(out):
            recv, back = out, None
        else:
            recv = torch.empty(out.numel(), dtype=send.dtype)

            def back():
                out.copy_(recv.view(out.shape))
        codec = self._codec("reduce_scatter", send, op)
        req = self.comm.ireduce_scatter(send.data_ptr(), recv.data_ptr(), out.numel(), dt, op,
                                        codec, self._key(send) if codec else 0,
                                        keep=(send, recv))
        return self._work([req], back, result)

    # ---- data movement --------------------------------------------------------------------
    def broadcast(self, tensors, opts):
        t = self._one("broadcast", tensors)
        root = opts.rootRank
        if _direct(t):
            buf, back = t, None
        else:
            dt, wt = _wire(t.dtype)
            buf = torch.zeros(_words(t), dtype=wt)
            if self.rank() == root:
                _pack(buf, t)

            def back():
                _unpack(t, buf)
        req = self.comm.ibroadcast(buf.data_ptr(), buf.numel(), _wire(buf.dtype)[0], root,
                                   keep=buf)
        return self._work([req], back, tensors)

    def _gather_flat(self, call, t, codec_ok):
        """Starts an allgather of t; returns (request, flat receive buffer, words a block)."""
        dt, wt = _wire(t.dtype)
        n = _words(t)
        if _direct(t):
            send = t
        else:
            send = torch.zeros(n, dtype=wt)
            _pack(send, t)
        recv = self._pool.take(n * self.size(), wt)
        codec = self._codecs["allgather"] if codec_ok and t.dtype == torch.float32 else None
        req = self.comm.iallgather(send.data_ptr(), recv.data_ptr(), n, dt, codec, 0,
                                   keep=(send, recv))
        return req, recv, n

    def allgather(self, output_tensors, input_tensors, opts=None):
        t = self._one("all_gather", input_tensors)
        outs = output_tensors[0] if len(output_tensors) == 1 else None
        if outs is None or len(outs) != self.size():
            _refuse("all_gather", "want one list of %d output tensors" % self.size())
        if any(o.numel() != t.numel() or o.dtype != t.dtype for o in outs):
            _refuse("all_gather", "output tensors differ from the input in size or type")
        base = _adjacent(outs, t, self.rank())
        if base is not None:   # one buffer's blocks: gathered into it, no staging
            codec = self._codecs["allgather"] if t.dtype == torch.float32 else None
            req = self.comm.iallgather(t.data_ptr(), base, t.numel(), _NATIVE[t.dtype], codec,
                                       0, keep=(t, outs))
            return self._work([req], None, output_tensors)
        req, recv, n = self._gather_flat("all_gather", t, True)

        def back():
            for r, o in enumerate(outs):
                _unpack(o, recv[r * n:(r + 1) * n])
        return self._work([req], back, output_tensors, (recv,))

    def _allgather_base(self, output, input, opts=None):
        self._check_open("_allgather_base")
        if output.numel() != input.numel() * self.size() or output.dtype != input.dtype:
            _refuse("_allgather_base", "output of %d %s for an input of %d %s on %d ranks"
                    % (output.numel(), output.dtype, input.numel(), input.dtype, self.size()))
        if _direct(output) and _direct(input):
            codec = self._codecs["allgather"] if input.dtype == torch.float32 else None
            req = self.comm.iallgather(input.data_ptr(), output.data_ptr(), input.numel(),
                                       _NATIVE[input.dtype], codec, 0, keep=(input, output))
            return self._work([req], None, output)
        req, recv, n = self._gather_flat("_allgather_base", input, True)
        flat = output.view(-1) if output.is_contiguous() else None

        def back():
            for r in range(self.size()):
                blk = torch.empty_like(input)
                _unpack(blk, recv[r * n:(r + 1) * n])
                if flat is not None:
                    flat[r * input.numel():(r + 1) * input.numel()].copy_(blk.reshape(-1))
                else:
                    output.view(-1)[r * input.numel():(r + 1) * input.numel()].copy_(
                        blk.reshape(-1))
        return self._work([req], back, output, (recv,))

    def allgather_coalesced(self, output_lists, input_list, opts=None):
        _refuse("allgather_coalesced", "not supported")

    def gather(self, output_tensors, input_tensors, opts):
        t = self._one("gather", input_tensors)
        root = opts.rootRank
        outs = output_tensors[0] if self.rank() == root else None
        if self.rank() == root and (outs is None or len(outs) != self.size()):
            _refuse("gather", "the root wants a list of %d output tensors" % self.size())
        req, recv, n = self._gather_flat("gather", t, False)   # an allgather: every rank moves

        def back():
            for r, o in enumerate(outs or []):
                _unpack(o, recv[r * n:(r + 1) * n])
        return self._work([req], back, output_tensors, (recv,))

    def scatter(self, output_tensors, input_tensors, opts):
        out = self._one("scatter", output_tensors)
        root = opts.rootRank
        dt, wt = _wire(out.dtype)
        n = _words(out)
        buf = torch.zeros(n * self.size(), dtype=wt)
        if self.rank() == root:
            ins = input_tensors[0] if len(input_tensors) == 1 else []
            if len(ins) != self.size() or any(i.numel() != out.numel() for i in ins):
                _refuse("scatter", "the root wants %d input tensors of the output's size"
                        % self.size())
            for r, i in enumerate(ins):
                _pack(buf[r * n:(r + 1) * n], i)
        # the whole list from the root, each rank keeps its block: exact, n x size words
        req = self.comm.ibroadcast(buf.data_ptr(), buf.numel(), dt, root, keep=buf)
        me = self.rank()
        return self._work([req], lambda: _unpack(out, buf[me * n:(me + 1) * n]),
                          output_tensors)

    def alltoall(self, output_tensors, input_tensors, opts=None):
        self._check_open("all_to_all")
        if len(output_tensors) != self.size() or len(input_tensors) != self.size():
            _refuse("all_to_all", "want %d input and output tensors" % self.size())
        return self._alltoall("all_to_all", output_tensors, input_tensors, output_tensors,
                              True)

    def alltoall_base(self, output, input, output_split_sizes, input_split_sizes, opts=None):
        self._check_open("all_to_all_single")
        n = self.size()

        def split(t, sizes, what):
            rows = t.shape[0] if t.dim() else 1
            if not sizes:
                if rows % n:
                    _refuse("all_to_all_single", "%s of %d rows for %d ranks" % (what, rows, n))
                sizes = [rows // n] * n
            if len(sizes) != n or sum(sizes) != rows:
                _refuse("all_to_all_single", "%s split sizes %s for %d rows on %d ranks"
                        % (what, list(sizes), rows, n))
            return list(torch.split(t, list(sizes))) if t.dim() else [t]
        ins = split(input, input_split_sizes, "input")
        outs = split(output, output_split_sizes, "output")
        return self._alltoall("all_to_all_single", outs, ins, output,
                              bool(input_split_sizes or output_split_sizes))

    def _alltoall(self, call, outs, ins, result, uneven):
        """uneven: blocks may differ in size (on some rank): every rank then agrees on the
        largest first, since the decision must be the same everywhere."""
        dtypes = {t.dtype for t in outs} | {t.dtype for t in ins}
        if len(dtypes) != 1:
            _refuse(call, "tensors of several types")
        dt, wt = _wire(dtypes.pop())
        w = max([_words(t) for t in outs] + [_words(t) for t in ins] + [0])
        if uneven:   # blocks go as equal ones padded to the largest anywhere
            m = torch.tensor([w], dtype=torch.int64)
            self.comm.iallreduce(m.data_ptr(), 1, "int64", "max", None, 0, keep=m).wait()
            w = int(m.item())
        n = self.size()
        send = torch.zeros(n * w, dtype=wt)
        for j, t in enumerate(ins):
            _pack(send[j * w:j * w + _words(t)], t)
        recv = self._pool.take(n * w, wt)
        req = self.comm.ialltoall(send.data_ptr(), recv.data_ptr(), w, dt, keep=(send, recv))

        def back():
            for i, t in enumerate(outs):
                _unpack(t, recv[i * w:i * w + _words(t)])
        return self._work([req], back, result, (recv,))

    def barrier(self, opts=None):
        self._check_open("barrier")
        return self._work([self.comm.ibarrier()], None, [])

    def monitored_barrier(self, opts=None, wait_all_ranks=False):
        _refuse("monitored_barrier", "not supported")

    # ---- point to point, through the store ------------------------------------------------
    # Messages go through torch's store: right for the few small messages of control code,
    # slow for data (every byte crosses the store's server).
    def send(self, tensors, dst, tag):
        t = self._one("send", tensors)
        k = (self.rank(), dst, tag)
        seq, self._p2p[k] = self._p2p[k], self._p2p[k] + 1
        data = _host(t).contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()
        self._store.set("gcomp/p2p/%d/%d/%d/%d" % (k + (seq,)), data)
        return self._work([], None, tensors)

    def recv(self, tensors, src, tag):
        t = self._one("recv", tensors)
        k = (src, self.rank(), tag)
        seq, self._p2p[k] = self._p2p[k], self._p2p[k] + 1
        key = "gcomp/p2p/%d/%d/%d/%d" % (k + (seq,))
        call = _Call([], None, tensors)
        call.event = threading.Event()
        work = _Work(self, call)
        call.work = work

        def run():
            try:
                data = bytes(self._store.get(key))   # waits up to the store's timeout
                nb = t.numel() * t.element_size()
                if len(data) != nb:
                    raise RuntimeError("recv of %d bytes from rank %d, %d sent"
                                       % (nb, src, len(data)))
                buf = torch.frombuffer(bytearray(data), dtype=torch.uint8)
                t.copy_(buf.view(t.dtype).view(t.shape))
                try:
                    self._store.delete_key(key)
                except Exception:   # stores without delete (FileStore) keep it
                    pass
                err = ""
            except Exception as e:
                err = "gcomp backend: recv: %s" % e
            self._settle(call, err)
            call.event.set()
        threading.Thread(target=run, name="gcomp-recv", daemon=True).start()
        return work

    def recv_anysource(self, tensors, tag):
        _refuse("recv_anysource", "not supported")

    # ---- checkpoints and shutdown ---------------------------------------------------------
    def state_dict(self):
        """Every collective's codec spec and its error-feedback residuals (the library's
        checksummed residual file), for a checkpoint; save it between steps."""
        self._complete_all()
        sd = {"version": 1, "size": self.size(), "codecs": {}}
        for c, codec in self._codecs.items():
            if codec is None:
                continue
            fd, path = tempfile.mkstemp(prefix="gcomp-ef-")
            os.close(fd)
            try:
                codec.save_residuals(path)
                with open(path, "rb") as f:
                    sd["codecs"][c] = (codec.spec(), f.read())
            finally:
                os.unlink(path)
        return sd

    def load_state_dict(self, sd):
        self._complete_all()
        if sd.get("version") != 1 or sd.get("size") != self.size():
            raise ValueError("gcomp backend: state of version %r on %r ranks; this group has "
                             "%d" % (sd.get("version"), sd.get("size"), self.size()))
        for c, (spec, blob) in sd["codecs"].items():
            codec = self._codecs.get(c)
            if codec is None or codec.spec() != spec:
                raise ValueError("gcomp backend: state of %s with codec %r; this group's is %r"
                                 % (c, spec, codec.spec() if codec else "none"))
            fd, path = tempfile.mkstemp(prefix="gcomp-ef-")
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(blob)
                codec.load_residuals(path)
            finally:
                os.unlink(path)

    def abort(self):
        """Aborts the group's communicator (gcomp_comm_abort), from any thread: pending and
        running calls fail with GCOMP_ERR_ABORTED (their Work raises it), the peers are
        told and fail promptly too; shutdown() then returns at once."""
        self.comm.abort()

    def shutdown(self):
        """Waits for pending calls, stops the waiter, destroys the communicator."""
        if self._closed:
            return
        self._closed = True
        self._complete_all()
        self._waiter.stop()
        self.comm.close()
        self._pool.clear()
        for codec in self._codecs.values():
            if codec is not None:
                codec.close()


_groups = []   # every group made here, shut down at exit (before the interpreter's teardown)


def _create(store, rank, size, timeout):
    pg = ProcessGroupGcomp(store, rank, size, timeout)
    _groups.append(pg)
    return pg


def _shutdown_all():
    while _groups:
        try:
            _groups.pop().shutdown()
        except Exception:   # a broken communicator: nothing more to do at exit
            pass


def register():
    """Registers the backend "gcomp" with torch.distributed (idempotent)."""
    if not hasattr(dist.Backend, NAME.upper()):
        dist.Backend.register_backend(NAME, _create)
        import atexit
        atexit.register(_shutdown_all)


def comm_of(group=None):
    """The gcomp.Comm behind a gcomp group (None: the default group), or None."""
    pg = group if group is not None else dist.group.WORLD
    return pg.comm if isinstance(pg, ProcessGroupGcomp) else None


def _pg(group):
    pg = group if group is not None else dist.group.WORLD
    if not isinstance(pg, ProcessGroupGcomp):
        raise TypeError("gcomp backend: %r is not a gcomp group" % (pg,))
    return pg


def set_codec(group, collective, spec):
    """Overrides the codec of one collective on a gcomp group (None: the default group):
    set_codec(None, "reduce_scatter", "quant:bits=4")."""
    _pg(group).set_codec(collective, spec)


def codec_of(group, collective):
    """The gcomp.Codec of one collective on a gcomp group (None: the default group), or
    None when it is exact; its stats() say what it encoded."""
    return _pg(group).codec(collective)


def abort(group=None):
    """Aborts a gcomp group (None: the default group): ProcessGroupGcomp.abort()."""
    _pg(group).abort()


def state_dict(group=None):
    return _pg(group).state_dict()


def load_state_dict(sd, group=None):
    _pg(group).load_state_dict(sd)


# torch's env:// variable: Open MPI's, for ranks that mpirun started
_MPI_VARS = (("RANK", "OMPI_COMM_WORLD_RANK"), ("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE"),
             ("LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK"),
             ("LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE"))


def mpi_env(environ=None):
    """Makes torch's env:// work in ranks started by mpirun (Open MPI), before
    dist.init_process_group("gcomp"): RANK, WORLD_SIZE, LOCAL_RANK and LOCAL_WORLD_SIZE from
    OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK and _LOCAL_SIZE where unset, and MASTER_ADDR
    127.0.0.1 when every rank is on this node. MASTER_PORT (and MASTER_ADDR across nodes:
    rank 0's host, which no rank knows before torch's store exists) come from the user:
    mpirun -x MASTER_ADDR=node0 -x MASTER_PORT=29500. Does nothing outside mpirun or when
    RANK is set already (torchrun, gcomp-run); raises RuntimeError naming what is missing.
    environ: the mapping to read and fill (os.environ)."""
    env = os.environ if environ is None else environ
    if "RANK" in env or "OMPI_COMM_WORLD_RANK" not in env:
        return
    for mine, ompi in _MPI_VARS:
        if mine not in env and ompi in env:
            env[mine] = env[ompi]
    if "MASTER_ADDR" not in env and env.get("OMPI_COMM_WORLD_LOCAL_SIZE") == env["WORLD_SIZE"]:
        env["MASTER_ADDR"] = "127.0.0.1"
    missing = [v for v in ("MASTER_ADDR", "MASTER_PORT") if v not in env]
    if missing:
        raise RuntimeError("gcomp backend: under mpirun, torch's env:// needs %s: rank 0's "
                           "host and a free port on it, e.g. mpirun -x MASTER_ADDR=%s "
                           "-x MASTER_PORT=29500" % (" and ".join(missing),
                                                     env.get("MASTER_ADDR", "node0")))
