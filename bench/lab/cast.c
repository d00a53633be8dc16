/* gcomp-lab kernels --suite cast: the fp16/bf16 kernels of every table this CPU runs,
 * and the public API around them (frame + CRC32C), each beside a reference timed in the
 * same run: memcpy of the fp32 buffer for encoders and decoders (rate in fp32 bytes, so
 * the ratio is elements/s over memcpy's elements/s), the fp32 add loop acc[i] += x[i] for
 * decode-and-add, a read pass for the max-abs scan. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab.h"
#include "cast.h"
#include "gcomp.h"
#include "gcomp_common.h"

typedef enum {
  OP_F16_ENC,        /* scale=none */
  OP_F16_ENC_AUTO,   /* what the fp16 codec runs by default (gcomp_cast_f16_auto) */
  OP_BF16_ENC,
  OP_F16_ENC_SR,
  OP_BF16_ENC_SR,
  OP_F16_DEC,
  OP_BF16_DEC,
  OP_F16_DEC_ADD,
  OP_BF16_DEC_ADD,
  OP_MAXABS,
  OP_F16_ENC_SUM,    /* one frame block at a time, its checksum folded in registers */
  OP_BF16_ENC_SUM,
  OP_F16_DEC_ADD_SUM,   /* a block at a time, the next block's checksum folded meanwhile */
  OP_BF16_DEC_ADD_SUM
} cast_op;

typedef struct {
  const gcomp_cast_kernels *K;
  cast_op op;
  uint8_t *payload;    /* kb->out + kb->bytes: the memcpy reference writes the first half */
  volatile uint32_t sink;
} kargs;

static void run_kernel(gcomp_kbench *kb, void *arg) {
  kargs *a = arg;
  const gcomp_cast_kernels *K = a->K;
  gcomp_cast_counts c = {0, 0, 0};
  size_t n = kb->count;
  switch (a->op) {
  case OP_F16_ENC: K->f16_enc(kb->grad, n, a->payload, 1.0f, &c); break;
  case OP_F16_ENC_AUTO: gcomp_cast_f16_auto(K, kb->grad, n, a->payload, &c, NULL); break;
  case OP_BF16_ENC: K->bf16_enc(kb->grad, n, a->payload, &c); break;
  case OP_F16_ENC_SR: K->f16_enc_sr(kb->grad, n, a->payload, 1024.0f, 42, 0, &c); break;
  case OP_BF16_ENC_SR: K->bf16_enc_sr(kb->grad, n, a->payload, 42, 0, &c); break;
  case OP_F16_DEC: K->f16_dec(a->payload, n, kb->acc, 1.0f / 1024); break;
  case OP_BF16_DEC: K->bf16_dec(a->payload, n, kb->acc); break;
  case OP_F16_DEC_ADD: K->f16_dec_add(a->payload, n, kb->acc, 1.0f / 1024); break;
  case OP_BF16_DEC_ADD: K->bf16_dec_add(a->payload, n, kb->acc); break;
  case OP_MAXABS: a->sink = K->maxabs(kb->grad, n); break;
  case OP_F16_ENC_SUM:
  case OP_BF16_ENC_SUM:
    for (size_t i = 0, b = 32768; i < n; i += b) {   /* blocks of GCOMP_FRAME_BLOCK bytes */
      size_t m = n - i < b ? (n - i) & ~(size_t)31 : b;
      if (!m) break;
      uint32_t mx;
      a->sink ^= a->op == OP_F16_ENC_SUM
                     ? K->f16_enc_sum(kb->grad + i, m, a->payload + 2 * i, 1.0f, &c, &mx, 1)
                     : K->bf16_enc_sum(kb->grad + i, m, a->payload + 2 * i, &c, 1);
    }
    break;
  case OP_F16_DEC_ADD_SUM:
  case OP_BF16_DEC_ADD_SUM:
    for (size_t i = 0, b = 32768; i < n; i += b) {   /* the last block sums the first */
      size_t m = n - i < b ? (n - i) & ~(size_t)31 : b;
      if (!m) break;
      const uint8_t *next = i + m + m <= n ? a->payload + 2 * (i + m) : a->payload;
      a->sink ^= a->op == OP_F16_DEC_ADD_SUM
                     ? K->f16_dec_add_sum(a->payload + 2 * i, m, kb->acc + i, 1.0f / 1024, next)
                     : K->bf16_dec_add_sum(a->payload + 2 * i, m, kb->acc + i, next);
    }
    break;
  }
  a->sink += (uint32_t)c.underflow;
}

static const struct {
  cast_op op;
  const char *name;
  gcomp_bench_ref ref;
} cases[] = {
    {OP_F16_ENC, "fp16 encode rne scale=none", GCOMP_REF_MEMCPY},
    {OP_F16_ENC_AUTO, "fp16 encode rne scale=auto", GCOMP_REF_MEMCPY},
    {OP_BF16_ENC, "bf16 encode rne", GCOMP_REF_MEMCPY},
    {OP_F16_ENC_SR, "fp16 encode stochastic", GCOMP_REF_MEMCPY},
    {OP_BF16_ENC_SR, "bf16 encode stochastic", GCOMP_REF_MEMCPY},
    {OP_F16_DEC, "fp16 decode", GCOMP_REF_MEMCPY},
    {OP_BF16_DEC, "bf16 decode", GCOMP_REF_MEMCPY},
    {OP_F16_DEC_ADD, "fp16 decode_add", GCOMP_REF_ADD},
    {OP_BF16_DEC_ADD, "bf16 decode_add", GCOMP_REF_ADD},
    {OP_MAXABS, "fp16 max-abs scan", GCOMP_REF_READ},
    {OP_F16_ENC_SUM, "fp16 encode rne + block CRCs", GCOMP_REF_MEMCPY},
    {OP_BF16_ENC_SUM, "bf16 encode rne + block CRCs", GCOMP_REF_MEMCPY},
    {OP_F16_DEC_ADD_SUM, "fp16 decode_add + next block CRC", GCOMP_REF_ADD},
    {OP_BF16_DEC_ADD_SUM, "bf16 decode_add + next block CRC", GCOMP_REF_ADD},
};

/* ---- the public API ------------------------------------------------------------------- */
typedef struct {
  gcomp_codec *codec;
  int decode_add;
  uint8_t *frame;
  size_t cap, len;
} aargs;

static void run_api(gcomp_kbench *kb, void *arg) {
  aargs *a = arg;
  int s = a->decode_add ? gcomp_decode_add(a->codec, a->frame, a->len, kb->acc, kb->count)
                        : gcomp_encode(a->codec, 0, kb->grad, kb->count, a->frame, a->cap, &a->len);
  if (s != GCOMP_OK) {
    fprintf(stderr, "gcomp-lab cast: %s\n", gcomp_last_error());
    exit(1);
  }
}

static void suite_cast(gcomp_kbench *kb) {
  size_t ntables;
  const gcomp_cast_kernels *const *tables = gcomp_cast_tables(&ntables);
  double fb = (double)kb->bytes;
  for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
    for (size_t t = 0; t < ntables; t++) {
      kargs a = {tables[t], cases[c].op, kb->out + kb->bytes, 0};
      gcomp_cast_counts cnt = {0, 0, 0};
      /* decoders read a payload made by the same table's encoder */
      if (a.op == OP_F16_DEC || a.op == OP_F16_DEC_ADD || a.op == OP_F16_DEC_ADD_SUM)
        a.K->f16_enc(kb->grad, kb->count, a.payload, 1024.0f, &cnt);
      if (a.op == OP_BF16_DEC || a.op == OP_BF16_DEC_ADD || a.op == OP_BF16_DEC_ADD_SUM)
        a.K->bf16_enc(kb->grad, kb->count, a.payload, &cnt);
      double rs, s = gcomp_kbench_measure(kb, run_kernel, &a, cases[c].ref, &rs);
      gcomp_kbench_row(kb, "cast", cases[c].name, a.K->name, fb, s, cases[c].ref, rs, fb, NULL, 0);
    }
  }
  static const struct {
    const char *spec;
    int decode_add;
  } api[] = {{"fp16", 0}, {"fp16:scale=none", 0}, {"bf16", 0},
             {"fp16", 1}, {"bf16", 1}};
  for (size_t i = 0; i < sizeof api / sizeof *api; i++) {
    aargs a = {NULL, 0, kb->out + kb->bytes, kb->bytes + 4096, 0};
    if (gcomp_codec_create(api[i].spec, &a.codec) != GCOMP_OK) {
      fprintf(stderr, "gcomp-lab cast: %s\n", gcomp_last_error());
      return;
    }
    run_api(kb, &a);   /* the frame the decode rows read */
    a.decode_add = api[i].decode_add;
    char name[64];
    snprintf(name, sizeof name, "api %s %s", api[i].decode_add ? "decode_add" : "encode",
             api[i].spec);
    gcomp_bench_ref ref = a.decode_add ? GCOMP_REF_ADD : GCOMP_REF_MEMCPY;
    double rs, s = gcomp_kbench_measure(kb, run_api, &a, ref, &rs);
    gcomp_kbench_row(kb, "cast", name, gcomp_isa_selected(), fb, s, ref, rs, fb, NULL, 0);
    gcomp_codec_destroy(a.codec);
  }
}

GCOMP_BENCH_CONSTRUCTOR(register_cast) { gcomp_bench_register_suite("cast", suite_cast); }
