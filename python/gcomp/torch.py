"""gcomp as a DDP communication hook, and (import gcomp.torch registers it) as the
torch.distributed backend "gcomp" (gcomp/backend.py).

    import gcomp.torch as gt
    ddp.register_comm_hook(gt.State(codec="topk:ratio=0.01+ef"), gt.hook)

State is made after dist.init_process_group: its communicator bootstraps through the
process group (an allgather of a few hundred bytes per rank over it), so no second port or
variable is needed. The hook averages every gradient bucket through gcomp_iallreduce; the
returned torch.futures.Future is completed by a waiter thread that blocks in
gcomp_request_wait without the GIL, so backward keeps running while buckets reduce.

With error feedback (a codec with +ef) each parameter of a bucket is its own gcomp call,
keyed by the parameter (numbered in the order DDP's first bucket layout lists them, the same
in every process of a job and in a resumed one): residuals follow their parameter through
DDP's bucket rebuild after the first iteration and through a checkpoint, and a parameter's
result does not depend on which bucket DDP put it in. Without error feedback there is no
state to keep, and the bucket is one call (fewer, larger calls: each call across nodes has a
fixed cost); per_parameter=True/False overrides either choice. Calls run one at a time in
order on the communicator's progress thread; a bucket's future completes when its last call
does.

Only fp32 buckets are compressed; float64, bfloat16 and float16 buckets are reduced
uncompressed in their own type (logged once); other types are refused with TypeError.
CUDA tensors are staged through host memory: that path is untested.
"""
import atexit
import functools
import io
import logging
import os
import queue
import tempfile
import threading
import time
import weakref

import torch
import torch.distributed as dist

import gcomp
from . import backend as _backend

__all__ = ["State", "hook"]
_backend.register()   # dist.init_process_group("gcomp") from here on

log = logging.getLogger("gcomp.torch")

_DTYPES = {torch.float32: "float32", torch.float64: "float64", torch.bfloat16: "bfloat16",
           torch.float16: "float16", torch.int32: "int32", torch.int64: "int64"}
_STATE_VERSION = 1


def _fnv1a64(values):
    h = 0xcbf29ce484222325
    for v in values:
        for b in int(v).to_bytes(8, "little", signed=False):
            h = ((h ^ b) * 0x100000001b3) & 0xffffffffffffffff
    return h


def _pg_allgather(pg):
    """allgather(bytes) -> [bytes per rank] over a torch.distributed process group."""
    device = "cuda" if dist.get_backend(pg) == "nccl" else "cpu"
    n = dist.get_world_size(pg)

    def allgather(mine):
        t = torch.frombuffer(bytearray(mine), dtype=torch.uint8).to(device)
        out = [torch.empty_like(t) for _ in range(n)]
        dist.all_gather(out, t, group=pg)
        return [bytes(o.cpu().numpy().tobytes()) for o in out]
    return allgather


class State:
    """Per-process state of the hook: the gcomp communicator, the codec (and its error
    feedback residuals), and the waiter thread.

    codec: a spec such as "bf16" or "topk:ratio=0.01+ef"; None takes GCOMP_CODEC (default
    "none"). A malformed spec (or GCOMP_CODEC) raises gcomp.Error naming the token.
    process_group: the group whose ranks reduce together (None: the default group).
    config: optional dict of per-communicator GCOMP_* settings (gcomp_config_set), e.g.
    {"GCOMP_ALGO": "sparse"}; the environment supplies the rest.
    per_parameter: one call per parameter (default: with error feedback) or per bucket.
    """

    def __init__(self, codec=None, process_group=None, config=None, per_parameter=None):
        if not dist.is_initialized():
            raise RuntimeError("gcomp.torch.State: call dist.init_process_group first")
        self.process_group = process_group if process_group is not None else dist.group.WORLD
        if codec is None:
            spec = gcomp.param("GCOMP_CODEC") or "none"
            try:
                self.codec = gcomp.Codec(spec)
            except gcomp.Error as e:
                raise gcomp.Error(e.status, e.detail, "GCOMP_CODEC=%r" % spec) from None
        else:
            self.codec = gcomp.Codec(codec)
        pg = self.process_group
        rank, size = dist.get_rank(pg), dist.get_world_size(pg)
        # a gcomp group's own communicator serves the hook too; others get one of their own
        self.comm = _backend.comm_of(pg) if config is None else None
        self._own_comm = self.comm is None
        if self._own_comm:
            self.comm = gcomp.Comm.from_allgather(rank, size, _pg_allgather(pg), config=config)
        if self.comm.rank() != rank or self.comm.size() != size:
            raise RuntimeError("gcomp.torch.State: communicator rank %d/%d differs from the "
                               "process group's %d/%d" % (self.comm.rank(), self.comm.size(),
                                                          rank, size))
        self.rank, self.size = rank, size
        self._ef = self.codec.has_ef()
        self.per_parameter = self._ef if per_parameter is None else bool(per_parameter)
        self._param_ids = {}        # id(parameter) -> its number, in order of first sight
        self._params = []           # the parameters themselves (keeps ids valid)
        self._tensor_keys = {}      # id(tensor) -> (weakref to it, its allreduce number)
        self._tensors_seen = 0
        self._warned = set()
        self._pending = 0
        self._lock = threading.Lock()
        self._queue = queue.Queue()
        self._waiter = threading.Thread(target=self._wait_loop, name="gcomp-waiter", daemon=True)
        self._waiter.start()
        self._timing = []           # (bucket index, issued, done, bytes) of this iteration
        self._overlap = {"iterations": 0, "comm_s": 0.0, "exposed_s": 0.0}
        self._closed = False
        # a script that never closes its State: the waiter is stopped before the interpreter
        # tears down (a daemon thread still inside Future.set_result then crashed the exit)
        self._exit_hook = functools.partial(_close_at_exit, weakref.WeakMethod(self._close_at_exit))
        atexit.register(self._exit_hook)

    # ---- the hook's side ----------------------------------------------------------------
    def _param_key(self, p):
        """The parameter's number: its error-feedback key."""
        n = self._param_ids.get(id(p))
        if n is None:
            n = self._param_ids[id(p)] = len(self._params)
            self._params.append(p)
        return n

    def _dtype_of(self, t):
        name = _DTYPES.get(t.dtype)
        if name is None or name.startswith("int"):
            raise TypeError("gcomp.torch: cannot average a %s gradient bucket (float32, float64, "
                            "bfloat16 and float16 are supported)" % t.dtype)
        if name != "float32" and name not in self._warned:
            self._warned.add(name)
            log.warning("gcomp.torch: %s buckets are reduced uncompressed (codecs are fp32 only)",
                        name)
        return name

    def start(self, tensor, parts=None, index=-1):
        """Starts averaging tensor (1-D) in place, one call per (offset, count, key) of parts
        (default: one call, key 0); returns a torch.futures.Future of tensor."""
        fut = torch.futures.Future()
        dtype = self._dtype_of(tensor)
        host = tensor if tensor.device.type == "cpu" else tensor.detach().to("cpu")
        if not host.is_contiguous():
            raise ValueError("gcomp.torch: the tensor must be contiguous")
        codec = self.codec if dtype == "float32" else None
        base, esize = host.data_ptr(), host.element_size()
        reqs = []
        issued = time.perf_counter()
        try:
            for off, count, key in parts or [(0, host.numel(), 0)]:
                reqs.append(self.comm.iallreduce(base + off * esize, count, dtype, "avg", codec,
                                                 key, keep=host))
        finally:   # requests already started are waited for even when a later one failed
            if reqs:
                with self._lock:
                    self._pending += 1
                self._queue.put((reqs, fut, tensor, host, index, issued))
        return fut

    def _wait_loop(self):
        while True:
            item = self._queue.get()
            if item is None:
                return
            reqs, fut, tensor, host, index, issued = item
            err = None
            for req in reqs:
                try:
                    req.wait()   # blocks in C without the GIL
                except gcomp.Error as e:
                    err = err or e
            done = time.perf_counter()
            with self._lock:
                self._pending -= 1
                self._timing.append((index, issued, done))
            if err is not None:
                fut.set_exception(err)
                continue
            if host is not tensor:
                tensor.copy_(host)
            fut.set_result(tensor)

    def _end_iteration(self):
        """After the last bucket of an iteration completed: the overlap figures. Calls run one
        at a time in issue order, so call i is busy from max(its issue, call i-1's end) to its
        end; what ran after the last bucket was issued is exposed (backward had finished)."""
        with self._lock:
            t, self._timing = sorted(self._timing, key=lambda x: x[2]), []
        if not t:
            return
        busy, prev_end = 0.0, 0.0
        for _, issued, done in t:
            busy += done - max(issued, prev_end)
            prev_end = done
        last_issue = max(i for _, i, _ in t)
        self._overlap["iterations"] += 1
        self._overlap["comm_s"] += busy
        self._overlap["exposed_s"] += prev_end - last_issue

    # ---- the user's side ----------------------------------------------------------------
    def allreduce(self, tensor, op="avg"):
        """Reduces tensor in place across the group (op: sum, avg, min, max, prod), blocking;
        fp32 sums and averages go through the State's codec (the tensor's error feedback
        keyed by the tensor itself: _tensor_key). Returns tensor."""
        if op not in gcomp.OPS:
            raise ValueError("gcomp.torch: op %r is not one of %s" % (op, ", ".join(gcomp.OPS)))
        dtype = _DTYPES.get(tensor.dtype)
        if dtype is None:
            raise TypeError("gcomp.torch: cannot reduce a %s tensor" % tensor.dtype)
        host = tensor if tensor.device.type == "cpu" else tensor.detach().to("cpu")
        if not host.is_contiguous():
            host = host.contiguous()
        codec = self.codec if dtype == "float32" and op in ("sum", "avg") else None
        key = _fnv1a64([1 << 62, self._tensor_key(tensor), gcomp.OPS[op]])
        self.comm.iallreduce(host.data_ptr(), host.numel(), dtype, op, codec, key,
                             keep=host).wait()
        if host is not tensor:
            tensor.copy_(host)
        return tensor

    def _tensor_key(self, tensor):
        """The tensor's number, in order of first sight (the same on every rank when the
        ranks reduce their tensors in the same order): its own error-feedback residual, where
        keying by size shared one between two tensors of the same size. A number is not
        reused while its tensor lives."""
        ref, n = self._tensor_keys.get(id(tensor), (None, None))
        if ref is None or ref() is not tensor:
            n = self._tensors_seen
            self._tensors_seen += 1
            self._tensor_keys[id(tensor)] = (weakref.ref(tensor), n)
        return n

    def stats(self):
        """The communicator's stats (gcomp_comm_get_stats) as a dict, with the codec's under
        "codec" and the hook's overlap under "overlap": comm_s is the time gcomp spent
        reducing buckets (summed over iterations), exposed_s the part of it after the last
        bucket was handed over (what the end of backward waits for), and hidden the share of
        comm_s that ran while backward was still computing."""
        s = self.comm.stats()
        s["codec"] = self.codec.stats()
        s["codec"]["spec"] = self.codec.spec()
        o = dict(self._overlap)
        o["hidden"] = 1 - o["exposed_s"] / o["comm_s"] if o["comm_s"] > 0 else 0.0
        s["overlap"] = o
        return s

    def state_dict(self):
        """What a resumed run needs to continue exactly: the codec's canonical spec, its
        error-feedback residuals, one per parameter (with top-k's thresholds and ef:momentum's
        velocities), as the library's checksummed residual file."""
        self._quiesce()
        blob = b""
        if self._ef:
            fd, path = tempfile.mkstemp(prefix="gcomp-ef-")
            os.close(fd)
            try:
                self.codec.save_residuals(path)
                with open(path, "rb") as f:
                    blob = f.read()
            finally:
                os.unlink(path)
        return {"version": _STATE_VERSION, "codec": self.codec.spec(), "rank": self.rank,
                "size": self.size, "residuals": blob,
                "params": len(self._params)}

    def load_state_dict(self, sd):
        """Restores state_dict()'s output (this rank's). Raises ValueError for a state made
        with another codec or group size; gcomp.Error for damaged residuals."""
        self._quiesce()
        if sd.get("version") != _STATE_VERSION:
            raise ValueError("gcomp.torch: state version %r (this gcomp reads %d)"
                             % (sd.get("version"), _STATE_VERSION))
        if sd["codec"] != self.codec.spec() or sd["size"] != self.size:
            raise ValueError("gcomp.torch: state of codec %r on %d ranks; this State is %r on %d"
                             % (sd["codec"], sd["size"], self.codec.spec(), self.size))
        if self._ef:
            fd, path = tempfile.mkstemp(prefix="gcomp-ef-")
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(sd["residuals"])
                self.codec.load_residuals(path)
            finally:
                os.unlink(path)

    def _quiesce(self):
        with self._lock:
            busy = self._pending
        if busy:
            raise RuntimeError("gcomp.torch: %d bucket(s) still reducing; save or load the "
                               "state between steps" % busy)

    def abort(self):
        """Aborts the communicator (gcomp_comm_abort), from any thread: buckets in flight
        fail with GCOMP_ERR_ABORTED (their futures raise it), the peers are told and fail
        promptly too; close() then returns without waiting for them."""
        self.comm.abort()

    def close(self):
        """Stops the waiter and destroys the communicator (collective)."""
        if self._closed:
            return
        self._closed = True
        atexit.unregister(self._exit_hook)
        self._queue.put(None)
        self._waiter.join()
        if self._own_comm:
            self.comm.close()
        self.codec.close()

    def _close_at_exit(self):
        try:
            self.close()
        except Exception as e:   # the exit goes on; say why the State could not close
            log.warning("gcomp.torch: closing the State at exit: %s", e)


def _close_at_exit(method):
    m = method()
    if m is not None:
        m()


def hook(state, bucket):
    """DDP communication hook: averages the bucket through gcomp (register it with
    ddp.register_comm_hook(gcomp.torch.State(...), gcomp.torch.hook))."""
    try:
        buf = bucket.buffer()
        parts = None   # one call for the bucket
        if state.per_parameter:
            parts, off = [], 0
            for p in bucket.parameters():   # the bucket holds them flat, in this order
                parts.append((off, p.numel(), state._param_key(p)))
                off += p.numel()
            if off != buf.numel():
                raise RuntimeError("gcomp.torch: bucket %d holds %d values, its parameters %d"
                                   % (bucket.index(), buf.numel(), off))
        fut = state.start(buf, parts, bucket.index())
    except Exception as e:   # e.g. a communicator that failed earlier: raise in backward
        fut = torch.futures.Future()
        fut.set_exception(e)
        return fut
    if bucket.is_last():
        return fut.then(lambda f: _last_done(state, f))
    return fut


def _last_done(state, f):
    t = f.value()   # raises the reduction's error
    # the callback runs once this future is complete; earlier buckets completed before it
    state._end_iteration()
    return t
