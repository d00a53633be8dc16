/* gcomp-lab kernels --suite quant: the quant and sign codecs through gcomp_encode and
 * gcomp_decode_add (bucket loop, kernels, frame and block checksums: what a caller pays),
 * at every kernel level this CPU runs, each beside a reference timed in the same run:
 * memcpy of the fp32 buffer for encoders (rate in fp32 bytes, so the ratio is elements/s
 * against memcpy's source rate) and the fp32 add loop acc[i] += x[i] for decode-and-add.
 * The extra column is the frame's bytes a value. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab.h"
#include "gcomp.h"
#include "gcomp_common.h"
#include "test_hooks.h"

typedef struct {
  gcomp_codec *codec;
  int decode_add;
  uint8_t *frame;
  size_t cap, len;
} qargs;

static void run(gcomp_kbench *kb, void *arg) {
  qargs *a = arg;
  int s = a->decode_add ? gcomp_decode_add(a->codec, a->frame, a->len, kb->acc, kb->count)
                        : gcomp_encode(a->codec, 1, kb->grad, kb->count, a->frame, a->cap, &a->len);
  if (s != GCOMP_OK) {
    fprintf(stderr, "gcomp-lab quant: %s\n", gcomp_last_error());
    exit(1);
  }
}

static const char *const specs[] = {
    "quant:bits=8",   "quant:bits=4",        "quant:bits=4,bucket=128",
    "quant:bits=2",   "quant:bits=1",        "quant:bits=3",
    "quant:bits=4,round=stochastic",         "quant:bits=2,round=stochastic",
    "quant:bits=4+ef", "sign",               "sign+ef",
    "sign:bucket=128+ef:dtype=bf16",
};

static void suite_quant(gcomp_kbench *kb) {
  static const char *const levels[] = {"base", "avx2", "avx512"};
  int best = gcomp_isa_best_level(gcomp_cpu_detect());
  double fb = (double)kb->bytes;
  for (int l = best; l >= 0; l--) {   /* the level everyone runs first */
    /* a tool may set the environment; the library reads GCOMP_ISA at init */
    setenv("GCOMP_ISA", levels[l], 1);
    if (gcomp_reinit_for_testing() != GCOMP_OK) {
      fprintf(stderr, "gcomp-lab quant: GCOMP_ISA=%s: %s\n", levels[l], gcomp_last_error());
      continue;
    }
    for (size_t i = 0; i < sizeof specs / sizeof *specs; i++) {
      qargs a = {NULL, 0, NULL, 0, 0};
      if (gcomp_codec_create(specs[i], &a.codec) != GCOMP_OK) {
        fprintf(stderr, "gcomp-lab quant: %s\n", gcomp_last_error());
        return;
      }
      a.cap = gcomp_codec_max_encoded_size(a.codec, kb->count);
      a.frame = malloc(a.cap);
      if (!a.frame) {
        fprintf(stderr, "gcomp-lab quant: no room for a %zu-byte frame\n", a.cap);
        exit(1);
      }
      for (int dadd = 0; dadd < 2; dadd++) {
        if (dadd && strstr(specs[i], "+ef")) continue;   /* decoding does not depend on +ef */
        a.decode_add = dadd;
        if (dadd) memset(kb->acc, 0, kb->bytes);
        char name[80];
        snprintf(name, sizeof name, "%s %s", dadd ? "decode_add" : "encode", specs[i]);
        gcomp_bench_ref ref = dadd ? GCOMP_REF_ADD : GCOMP_REF_MEMCPY;
        double rs, s = gcomp_kbench_measure(kb, run, &a, ref, &rs);
        gcomp_kbench_row(kb, "quant", name, levels[l], fb, s, ref, rs, fb, "B/value",
                         (double)a.len / (double)kb->count);
      }
      free(a.frame);
      gcomp_codec_destroy(a.codec);
    }
  }
  unsetenv("GCOMP_ISA");
  gcomp_reinit_for_testing();
}

GCOMP_BENCH_CONSTRUCTOR(register_quant) { gcomp_bench_register_suite("quant", suite_quant); }
