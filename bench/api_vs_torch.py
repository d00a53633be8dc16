#!/usr/bin/python3
"""gcomp's public codec API against PyTorch, in one process and one thread, alternating.

Each round times, over the same 64 MiB of fp32 gradients (N(0, 1e-3)):
  torch   dst16.copy_(src)       fp32 -> bf16 / fp16 into a preallocated tensor (checks nothing)
  torch   acc.add_(src)          the fp32 add loop
  gcomp   gcomp_encode           bf16 / fp16 frames (block checksums included)
  gcomp   gcomp_decode_add       bf16 / fp16 frames into an fp32 accumulator (each block
                                 verified just before it is added)
and prints the median of each and the ratios the issue names: encode against copy_,
decode_add against add_ (rates in fp32 elements per second, > 1: gcomp is faster), as the
median of the per-round ratios and as the ratio of the two fastest rounds (which other
processes taking the core disturb least, on a loaded machine).

  /usr/bin/python3 bench/api_vs_torch.py BUILD_DIR [--rounds N] [--mib M] [--isa LEVEL]

BUILD_DIR holds libgcomp.so (e.g. build/dev). --isa sets GCOMP_ISA for gcomp's kernels.
"""
import argparse
import ctypes
import os
import statistics
import sys
import time


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("build")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--mib", type=int, default=64)
    ap.add_argument("--isa", default=None)
    a = ap.parse_args()
    if a.isa:
        os.environ["GCOMP_ISA"] = a.isa
    import torch  # after GCOMP_ISA: torch does not read it, gcomp reads it at init
    torch.set_num_threads(1)
    lib = ctypes.CDLL(os.path.join(a.build, "libgcomp.so"))
    lib.gcomp_codec_max_encoded_size.restype = ctypes.c_size_t
    lib.gcomp_codec_max_encoded_size.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    lib.gcomp_last_error.restype = ctypes.c_char_p
    lib.gcomp_isa_selected.restype = ctypes.c_char_p
    lib.gcomp_encode.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_void_p,
                                 ctypes.c_size_t, ctypes.c_void_p, ctypes.c_size_t,
                                 ctypes.POINTER(ctypes.c_size_t)]
    lib.gcomp_decode_add.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t,
                                     ctypes.c_void_p, ctypes.c_size_t]

    n = a.mib * (1 << 20) // 4
    g = torch.Generator().manual_seed(42)
    src = torch.randn(n, generator=g) * 1e-3
    acc = torch.zeros(n)
    dst = {"bf16": torch.empty(n, dtype=torch.bfloat16), "fp16": torch.empty(n, dtype=torch.float16)}
    codecs, frames, lens = {}, {}, {}
    for name in ("bf16", "fp16"):
        c = ctypes.c_void_p()
        if lib.gcomp_codec_create(name.encode(), ctypes.byref(c)) != 0:
            sys.exit("gcomp_codec_create: " + lib.gcomp_last_error().decode())
        cap = lib.gcomp_codec_max_encoded_size(c, n)
        codecs[name] = c
        frames[name] = (ctypes.c_uint8 * cap)()
        lens[name] = cap

    def gc_encode(name):
        ln = ctypes.c_size_t()
        if lib.gcomp_encode(codecs[name], 0, src.data_ptr(), n, frames[name], lens[name],
                            ctypes.byref(ln)) != 0:
            sys.exit("gcomp_encode: " + lib.gcomp_last_error().decode())
        return ln.value

    flen = {name: gc_encode(name) for name in codecs}

    def gc_decode_add(name):
        if lib.gcomp_decode_add(codecs[name], frames[name], flen[name], acc.data_ptr(), n) != 0:
            sys.exit("gcomp_decode_add: " + lib.gcomp_last_error().decode())

    cases = [
        ("torch copy_ bf16", lambda: dst["bf16"].copy_(src)),
        ("gcomp encode bf16", lambda: gc_encode("bf16")),
        ("torch copy_ fp16", lambda: dst["fp16"].copy_(src)),
        ("gcomp encode fp16", lambda: gc_encode("fp16")),
        ("torch add_", lambda: acc.add_(src)),
        ("gcomp decode_add bf16", lambda: gc_decode_add("bf16")),
        ("gcomp decode_add fp16", lambda: gc_decode_add("fp16")),
    ]
    times = {k: [] for k, _ in cases}
    for _, fn in cases:   # warm-up: page faults, caches
        fn()
    for _ in range(a.rounds):
        for k, fn in cases:
            t0 = time.perf_counter()
            fn()
            times[k].append(time.perf_counter() - t0)
    med = {k: statistics.median(v) for k, v in times.items()}
    print("# %d MiB fp32, %d rounds alternating, medians; torch %s, gcomp kernels %s" %
          (a.mib, a.rounds, torch.__version__, lib.gcomp_isa_selected().decode()))
    for k, _ in cases:
        print("%-24s %8.3f ms  %6.2f GB/s (fp32)" % (k, med[k] * 1e3, 4 * n / med[k] / 1e9))
    pairs = [("gcomp encode bf16", "torch copy_ bf16"), ("gcomp encode fp16", "torch copy_ fp16"),
             ("gcomp decode_add bf16", "torch add_"), ("gcomp decode_add fp16", "torch add_")]
    for x, y in pairs:
        r = [times[y][i] / times[x][i] for i in range(a.rounds)]   # per round: same weather
        print("ratio %-22s / %-17s %5.2f (median of per-round ratios; min %.2f max %.2f; "
              "of the fastest rounds %.2f)" %
              (x, y, statistics.median(r), min(r), max(r), min(times[y]) / min(times[x])))


if __name__ == "__main__":
    main()
