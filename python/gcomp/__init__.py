"""gcomp from Python: codecs, communicators and collectives over ctypes (include/gcomp.h).

    import gcomp
    codec = gcomp.Codec("topk:ratio=0.01+ef")
    comm = gcomp.Comm.from_env()          # ranks from gcomp-run, mpirun, srun, torchrun
    comm.allreduce(buf, op="avg", codec=codec, key=7)   # buf: a writable C-contiguous buffer

A failing library call raises gcomp.Error, whose message is the library's
gcomp_last_error() (it names the offending token, variable or peer); .status is the gcomp
status code and .name its symbolic name. gcomp.torch holds the DDP communication hook.
"""
import ctypes

from . import _lib

__all__ = ["Error", "Codec", "Config", "Comm", "Request", "library", "version",
           "DTYPES", "OPS"]

_L = None


def library():
    """The loaded libgcomp (ctypes.CDLL), loaded on first use."""
    global _L
    if _L is None:
        _L = _lib.load()
    return _L


# gcomp_dtype and gcomp_op, by name
DTYPES = {"float32": 0, "float64": 1, "int32": 2, "int64": 3, "bfloat16": 4, "float16": 5}
_ESIZE = {0: 4, 1: 8, 2: 4, 3: 8, 4: 2, 5: 2}
OPS = {"sum": 0, "avg": 1, "min": 2, "max": 3, "prod": 4}


class Error(RuntimeError):
    """A gcomp call failed. str(e) is gcomp's own detail (gcomp_last_error())."""

    def __init__(self, status, detail, call=""):
        self.status = status
        self.name = library().gcomp_strerror(status).decode(errors="replace").split(":")[0]
        self.detail = detail
        self.call = call
        super().__init__("%s%s: %s" % (call + ": " if call else "", self.name, detail))


def check(status, call=""):
    """Raises Error for a negative status, with this thread's gcomp_last_error()."""
    if status < 0:
        raise Error(status, library().gcomp_last_error().decode(errors="replace"), call)
    return status


def version():
    return library().gcomp_version().decode()


def _sized(cls):
    """A sized stats struct: the library fills what fits (fields are only ever appended)."""
    s = cls()
    s.struct_size = ctypes.sizeof(cls)
    return s


def _fields(s):
    return {k: getattr(s, k) for k, _ in s._fields_ if k != "struct_size"}


def param(name):
    """The current value (text) of a GCOMP_* parameter as the library read it."""
    L = library()
    check(L.gcomp_init(), "gcomp_init")
    info = _lib.ParamInfo()
    for i in range(L.gcomp_param_count()):
        check(L.gcomp_param_describe(i, ctypes.byref(info)), "gcomp_param_describe")
        if info.name.decode() == name:
            return info.value.decode() if info.value is not None else ""
    raise KeyError(name)


def _destroy(obj, fn):
    h, obj._h = getattr(obj, "_h", None), None
    if h:
        getattr(library(), fn)(h)


class Codec:
    """A codec from a spec ("none", "bf16", "topk:ratio=0.01+ef", ...). A bad spec raises
    Error naming the token."""

    def __init__(self, spec):
        L = library()
        h = ctypes.c_void_p()
        check(L.gcomp_codec_create(spec.encode(), ctypes.byref(h)))   # names the spec
        self._h = h

    @property
    def handle(self):
        return self._h

    def spec(self):
        """The canonical spec (every parameter spelled out)."""
        L = library()
        n = L.gcomp_codec_spec(self._h, None, 0)
        buf = ctypes.create_string_buffer(n + 1)
        L.gcomp_codec_spec(self._h, buf, n + 1)
        return buf.value.decode()

    def has_ef(self):
        return "+ef" in self.spec()

    def stats(self):
        s = _sized(_lib.CodecStats)
        check(library().gcomp_codec_get_stats(self._h, ctypes.addressof(s)), "codec stats")
        return _fields(s)

    def save_residuals(self, path):
        check(library().gcomp_codec_save_residuals(self._h, str(path).encode()), "save residuals")

    def load_residuals(self, path):
        check(library().gcomp_codec_load_residuals(self._h, str(path).encode()), "load residuals")

    def reset_residuals(self):
        check(library().gcomp_codec_reset_residuals(self._h), "reset residuals")

    def close(self):
        _destroy(self, "gcomp_codec_destroy")

    __del__ = close


class Config:
    """Per-communicator settings named like their GCOMP_* variables (gcomp_config_*):
    Config({"GCOMP_ALGO": "ring", "CODEC_MIN_BYTES": 0}). Starts from the environment."""

    def __init__(self, settings=None):
        L = library()
        self._h = ctypes.c_void_p()
        check(L.gcomp_config_create(ctypes.byref(self._h)), "gcomp_config_create")
        for k, v in (settings or {}).items():
            self.set(k, v)

    def set(self, name, value):
        check(library().gcomp_config_set(self._h, str(name).encode(), str(value).encode()),
              "config %s=%s" % (name, value))

    @property
    def handle(self):
        return self._h

    def close(self):
        _destroy(self, "gcomp_config_destroy")

    __del__ = close


class Request:
    """An allreduce in flight (gcomp_iallreduce). wait() releases the GIL while it blocks."""

    def __init__(self, handle, keep):
        self._h = handle
        self._keep = keep   # buffers that must outlive the call

    def wait(self):
        h, self._h = self._h, None
        if h is None:
            raise ValueError("gcomp.Request: already completed")
        st = library().gcomp_request_wait(h)   # ctypes drops the GIL for the call
        self._keep = None
        check(st, "gcomp_request_wait")

    def test(self):
        if self._h is None:
            return True
        done = ctypes.c_int(0)
        st = library().gcomp_request_test(self._h, ctypes.byref(done))
        if done.value:
            self._h = None
            self._keep = None
        check(st, "gcomp_request_test")
        return bool(done.value)


def _addr(buf):
    """Address and byte length of a writable C-contiguous buffer (or a ctypes object)."""
    if isinstance(buf, ctypes.Array) or isinstance(buf, ctypes.Structure):
        return ctypes.addressof(buf), ctypes.sizeof(buf)
    mv = memoryview(buf)
    if mv.readonly or not mv.c_contiguous:
        raise ValueError("gcomp: the buffer must be writable and C-contiguous")
    return ctypes.addressof((ctypes.c_char * mv.nbytes).from_buffer(mv)), mv.nbytes


class Comm:
    """One rank's communicator. Make it with Comm.from_env() or Comm.from_allgather()."""

    def __init__(self, handle):
        self._h = handle

    @classmethod
    def from_env(cls):
        h = ctypes.c_void_p()
        check(library().gcomp_comm_init_env(ctypes.byref(h)), "gcomp_comm_init_env")
        return cls(h)

    @classmethod
    def from_allgather(cls, rank, size, allgather, node_id=None, config=None):
        """Bootstraps through the caller's allgather (gcomp_comm_init_oob): allgather(bytes)
        must return the list of every rank's bytes (same length), in rank order. config: a
        dict of GCOMP_* settings or a Config. Collective."""
        L = library()
        failure = []

        def cb(ctx, mine, n, all_out):
            try:
                parts = allgather(ctypes.string_at(mine, n))
                if len(parts) != size or any(len(p) != n for p in parts):
                    raise ValueError("allgather returned %d records (want %d of %d bytes)"
                                     % (len(parts), size, n))
                ctypes.memmove(all_out, b"".join(parts), n * size)
                return 0
            except BaseException as e:   # never let an exception unwind through C
                failure.append(e)
                return 1

        fn = _lib.ALLGATHER_FN(cb)
        cfg = config if isinstance(config, Config) or config is None else Config(config)
        h = ctypes.c_void_p()
        st = L.gcomp_comm_init_oob(rank, size, node_id.encode() if node_id else None, fn, None,
                                   cfg.handle if cfg else None, ctypes.byref(h))
        if st < 0 and failure:
            raise Error(st, "%s (the allgather raised %r)"
                        % (L.gcomp_last_error().decode(errors="replace"), failure[0]),
                        "gcomp_comm_init_oob")
        check(st, "gcomp_comm_init_oob")
        return cls(h)

    @property
    def handle(self):
        return self._h

    def rank(self):
        return library().gcomp_comm_rank(self._h)

    def size(self):
        return library().gcomp_comm_size(self._h)

    def node(self):
        return library().gcomp_comm_node(self._h)

    def nnodes(self):
        return library().gcomp_comm_nnodes(self._h)

    def stats(self):
        s = _sized(_lib.CommStats)
        check(library().gcomp_comm_get_stats(self._h, ctypes.addressof(s)), "comm stats")
        return _fields(s)

    def _args(self, buf, count, dtype, op, codec, key):
        addr, nbytes = _addr(buf) if not isinstance(buf, int) else (buf, None)
        dt = DTYPES[dtype] if isinstance(dtype, str) else dtype
        if nbytes is not None and count * _ESIZE[dt] > nbytes:   # C would read past the end
            raise ValueError("gcomp: %d elements of %s do not fit the %d-byte buffer"
                             % (count, dtype, nbytes))
        return (self._h, addr, addr, count, DTYPES[dtype] if isinstance(dtype, str) else dtype,
                OPS[op] if isinstance(op, str) else op, codec.handle if codec else None, key)

    def allreduce(self, buf, count=None, dtype="float32", op="sum", codec=None, key=0):
        """In place. buf: a buffer (or an address with count); count defaults to its size."""
        if count is None:
            count = _addr(buf)[1] // _ESIZE[DTYPES[dtype] if isinstance(dtype, str) else dtype]
        check(library().gcomp_allreduce(*self._args(buf, count, dtype, op, codec, key)),
              "gcomp_allreduce")

    def iallreduce(self, addr, count, dtype, op, codec=None, key=0, keep=None):
        """Starts an in-place allreduce of count elements at addr; returns a Request. The
        request holds keep (the buffers) and the codec until it completes: the progress
        thread uses the codec's handle while the call runs."""
        req = ctypes.c_void_p()
        check(library().gcomp_iallreduce(*self._args(addr, count, dtype, op, codec, key),
                                         ctypes.byref(req)), "gcomp_iallreduce")
        return Request(req, (keep, codec))

    def abort(self):
        """gcomp_comm_abort, from any thread: the running call and every pending request
        fail with GCOMP_ERR_ABORTED, the peers are told; close() then succeeds once the
        requests are completed."""
        h = getattr(self, "_h", None)
        if h:
            check(library().gcomp_comm_abort(h), "gcomp_comm_abort")

    # ---- the other collectives (include/gcomp.h): blocking forms take buffers (or
    # addresses with counts), the i-forms addresses and return a Request. Counts are per
    # rank's block, as in C: reduce_scatter's recvcount, allgather's sendcount, alltoall's
    # count per peer.
    def _blocks(self, send, recv, count, dtype, nsend, nrecv):
        """Addresses of send and recv, with count inferred from the buffers when None, and
        checked against their sizes (C would read or write past the end)."""
        dt = DTYPES[dtype] if isinstance(dtype, str) else dtype
        s_addr, s_bytes = (send, None) if isinstance(send, int) else _addr(send)
        r_addr, r_bytes = (recv, None) if isinstance(recv, int) else _addr(recv)
        if count is None:
            if r_bytes is None:
                raise ValueError("gcomp: count is needed with addresses")
            count = r_bytes // (_ESIZE[dt] * nrecv)
        for what, nbytes, blocks in (("send", s_bytes, nsend), ("receive", r_bytes, nrecv)):
            if nbytes is not None and count * blocks * _ESIZE[dt] > nbytes:
                raise ValueError("gcomp: %d x %d elements of %s do not fit the %d-byte %s "
                                 "buffer" % (blocks, count, dtype, nbytes, what))
        return s_addr, r_addr, count, dt

    def _icall(self, fn, args, keep):
        req = ctypes.c_void_p()
        check(getattr(library(), fn)(self._h, *args, ctypes.byref(req)), fn)
        return Request(req, keep)

    def reduce_scatter(self, send, recv, recvcount=None, dtype="float32", op="sum", codec=None,
                       key=0):
        """send holds size() blocks of recvcount elements; recv receives the reduction of
        block rank(). In place when recv is block rank() of send (as addresses)."""
        self.ireduce_scatter(*self._blocks(send, recv, recvcount, dtype, self.size(), 1), op,
                             codec, key, keep=(send, recv)).wait()

    def ireduce_scatter(self, send, recv, recvcount, dtype, op="sum", codec=None, key=0,
                        keep=None):
        return self._icall("gcomp_ireduce_scatter",
                           (send, recv, recvcount, DTYPES.get(dtype, dtype),
                            OPS[op] if isinstance(op, str) else op,
                            codec.handle if codec else None, key), (keep, codec))

    def allgather(self, send, recv, sendcount=None, dtype="float32", codec=None, key=0):
        """recv receives size() blocks of sendcount elements, block r from rank r. Exact
        unless a codec is given (or GCOMP_ALLGATHER_CODEC names one)."""
        s, r, n, dt = self._blocks(send, recv, sendcount, dtype, 1, self.size())
        self.iallgather(s, r, n, dt, codec, key, keep=(send, recv)).wait()

    def iallgather(self, send, recv, sendcount, dtype, codec=None, key=0, keep=None):
        return self._icall("gcomp_iallgather",
                           (send, recv, sendcount, DTYPES.get(dtype, dtype),
                            codec.handle if codec else None, key), (keep, codec))

    def broadcast(self, buf, count=None, dtype="float32", root=0):
        """Rank root's buf to every rank's buf."""
        _, addr, n, dt = self._blocks(buf, buf, count, dtype, 1, 1)
        self.ibroadcast(addr, n, dt, root, keep=buf).wait()

    def ibroadcast(self, buf, count, dtype, root=0, keep=None):
        return self._icall("gcomp_ibroadcast", (buf, count, DTYPES.get(dtype, dtype), root),
                           keep)

    def barrier(self):
        self.ibarrier().wait()

    def ibarrier(self):
        return self._icall("gcomp_ibarrier", (), None)

    def alltoall(self, send, recv, count=None, dtype="float32"):
        """Block j of send goes to rank j; block i of recv came from rank i (count elements
        each)."""
        s, r, n, dt = self._blocks(send, recv, count, dtype, self.size(), self.size())
        self.ialltoall(s, r, n, dt, keep=(send, recv)).wait()

    def ialltoall(self, send, recv, count, dtype, keep=None):
        return self._icall("gcomp_ialltoall", (send, recv, count, DTYPES.get(dtype, dtype)),
                           keep)

    def close(self):
        """Destroys the communicator (gcomp_comm_destroy)."""
        h, self._h = getattr(self, "_h", None), None
        if h:
            check(library().gcomp_comm_destroy(h), "gcomp_comm_destroy")

    def __del__(self):
        try:
            self.close()
        except Error:
            pass
