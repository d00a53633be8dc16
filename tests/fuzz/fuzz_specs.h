/* The codec specs the decode fuzz target (and its seed generator) cycles through, picked
 * by the low bits of an input's first byte. Kinds not registered in this build are
 * skipped at run time, so the list can name every kind the project has or plans; append
 * only (an index is part of every seed). */
#ifndef GCOMP_FUZZ_SPECS_H
#define GCOMP_FUZZ_SPECS_H

static const char *const gcomp_fuzz_specs[] = {
    "none",
    "none+zstd",
    "none+zstd:planes=all",
    "none+igzip",
    "none+igzip:level=2,planes=all",
    "none+ef",
    "fp16",
    "bf16",
    "fp16+zstd",
    "bf16+zstd",
    "bf16+igzip:planes=all",
    "fp16+igzip",
    "topk:ratio=0.01",
    "topk:ratio=0.01+zstd",
    "topk:ratio=0.1+igzip",
    "topk:ratio=0.01+ef+zstd:planes=all",
    "bf16+ef+zstd",
    "none+igzip:level=0",
    "quant",
    "quant:bits=8,bucket=32",
    "quant:bits=3,bucket=64,round=stochastic",
    "quant:bits=1+zstd",
    "quant:bits=2,bucket=128+ef:dtype=bf16",
    "sign",
    "sign:bucket=32+ef",
    "sign+igzip",
};
/* the selector has 5 bits for the spec */
_Static_assert(sizeof gcomp_fuzz_specs / sizeof *gcomp_fuzz_specs <= 32, "at most 32 specs");
enum { GCOMP_FUZZ_NSPECS = sizeof gcomp_fuzz_specs / sizeof *gcomp_fuzz_specs };

#endif
