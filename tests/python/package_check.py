"""The gcomp package without torch: library loading, errors, collectives over ctypes.

    gcomp-run -n 2 -- python3 package_check.py
Exit status 0 when every check passed; each check prints "ok: ..." or "FAIL: ...".
"""
import ctypes
import gc
import weakref
import os
import subprocess
import sys

import gcomp

fails = []


def check(ok, what):
    print(("ok: " if ok else "FAIL: ") + what, flush=True)
    if not ok:
        fails.append(what)


def main():
    check(gcomp.version().count(".") == 2, "gcomp.version() is %s" % gcomp.version())
    try:
        gcomp.Codec("fp16:scael=none")
        check(False, "a bad spec raises")
    except gcomp.Error as e:
        check(e.status == -1 and e.name == "GCOMP_ERR_INVALID" and "scael" in str(e),
              "a bad spec raises gcomp.Error carrying gcomp_last_error(): %s"
              % str(e).split(" [")[0])
    c = gcomp.Codec("topk:ratio=0.5+ef")
    check(c.spec().startswith("topk:ratio=0.5") and c.has_ef(), "canonical spec " + c.spec())

    # the loader: GCOMP_LIBRARY overrides, and a wrong one is an error naming it
    env = dict(os.environ, GCOMP_LIBRARY="/nonexistent/libgcomp.so")
    r = subprocess.run([sys.executable, "-c", "import gcomp; gcomp.version()"], env=env,
                       capture_output=True, text=True)
    check(r.returncode != 0 and "GCOMP_LIBRARY" in r.stderr and "/nonexistent" in r.stderr,
          "a wrong GCOMP_LIBRARY is an OSError naming it")

    comm = gcomp.Comm.from_env()
    rank, size = comm.rank(), comm.size()
    buf = (ctypes.c_float * 1000)(*[float(rank + 1)] * 1000)
    comm.allreduce(buf, op="sum")
    want = size * (size + 1) / 2
    check(all(v == want for v in buf), "allreduce sum over %d ranks" % size)
    d = (ctypes.c_double * 10)(*[float(rank)] * 10)
    req = comm.iallreduce(ctypes.addressof(d), 10, "float64", "max", keep=d)
    req.wait()
    check(all(v == size - 1 for v in d), "iallreduce max of float64, waited")
    s = comm.stats()
    check(s["calls"] == 2 and s["bytes"] == 4000 + 80, "stats: %d calls, %d bytes"
          % (s["calls"], s["bytes"]))
    # the other collectives, blocking, with counts taken from the buffers
    send = (ctypes.c_int32 * (3 * size))(*[rank * 100 + i for i in range(3 * size)])
    got = (ctypes.c_int32 * 3)()
    comm.reduce_scatter(send, got, dtype="int32", op="sum")
    check(list(got) == [sum(r * 100 for r in range(size)) + size * (3 * rank + i)
                        for i in range(3)], "reduce_scatter of int32 blocks")
    mine = (ctypes.c_double * 2)(rank, -rank)
    every = (ctypes.c_double * (2 * size))()
    comm.allgather(mine, every, dtype="float64")
    check(list(every) == [v for r in range(size) for v in (r, -r)], "allgather of float64")
    b = (ctypes.c_int64 * 4)(*([7, 8, 9, 10] if rank == size - 1 else [0] * 4))
    comm.broadcast(b, dtype="int64", root=size - 1)
    check(list(b) == [7, 8, 9, 10], "broadcast from the last rank")
    comm.barrier()
    out = (ctypes.c_float * size)(*[10 * rank + j for j in range(size)])
    back = (ctypes.c_float * size)()
    comm.alltoall(out, back)
    check(list(back) == [10 * i + rank for i in range(size)], "alltoall of float32")
    try:
        comm.reduce_scatter(send, got, recvcount=10, dtype="int32")
        check(False, "a reduce_scatter count past the buffers raises")
    except ValueError as e:
        check("do not fit" in str(e), "a reduce_scatter count past the buffers raises")
    try:
        comm.allreduce(buf, dtype="float32", op="avg", count=10 ** 12)
        check(False, "a count past the buffer's end raises")
    except ValueError as e:
        check("do not fit" in str(e), "a count past the buffer's end raises: %s" % e)
    # a request holds its codec: dropped by the caller and collected, the codec lives on
    # until the request completes (the progress thread uses its handle meanwhile)
    f = (ctypes.c_float * 4096)(*[1.0] * 4096)
    codec = gcomp.Codec("bf16")
    alive = weakref.ref(codec)
    req = comm.iallreduce(ctypes.addressof(f), 4096, "float32", "sum", codec=codec, keep=f)
    del codec
    gc.collect()
    check(alive() is not None, "a codec dropped while its iallreduce runs stays alive")
    req.wait()
    del req
    gc.collect()
    check(alive() is None and all(v == size for v in f), "then freed once the request completed")
    comm.abort()
    try:
        comm.allreduce(buf, op="sum")
        check(False, "a call after Comm.abort() raises")
    except gcomp.Error as e:
        check(e.name == "GCOMP_ERR_ABORTED", "a call after Comm.abort() raises %s" % e.name)
    comm.close()
    try:
        gcomp.Config({"TIMEOUT_MS": "soon"})
        check(False, "a bad config value raises")
    except gcomp.Error as e:
        check("GCOMP_TIMEOUT_MS" in str(e) and "soon" in str(e),
              "a bad config value raises naming it: %s" % str(e).split(" [")[0])
    try:
        gcomp.Config({"GCOMP_DEBUG": "info"})
        check(False, "a process-wide setting is refused")
    except gcomp.Error as e:
        check("GCOMP_DEBUG" in str(e), "a process-wide setting is refused: %s"
              % str(e).split(" [")[0])
    print("package_check: %s" % ("%d failed" % len(fails) if fails else "all passed"))
    sys.exit(1 if fails else 0)


if __name__ == "__main__":
    main()
