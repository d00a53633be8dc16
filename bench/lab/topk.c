/* gcomp-lab kernels --suite topk: top-k selection and sparse encoding of the whole
 * buffer, fused error feedback, and the bare filter pass, each beside a single-thread
 * read pass over the same buffer in the same run. kept/k is reported for every encode. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lab.h"
#include "codec_impl.h"
#include "frame.h"
#include "spec.h"
#include "topk.h"

typedef struct {
  gcomp_spec spec;
  int ef;               /* fused error feedback into kb->acc */
  int warm;             /* keep the threshold between calls (as per tensor in training) */
  uint64_t state;
  gcomp_codec_stats stats;
  size_t len;
  int status;
} topk_case;

static void run_case(gcomp_kbench *kb, void *arg) {
  topk_case *c = arg;
  if (!c->warm) c->state = 0;
  gcomp_enc_ctx ctx = {.stats = &c->stats, .kind_state = &c->state};
  const gcomp_kind *k = c->spec.kind;
  size_t cap = 2 * kb->bytes + 4096;
  if (c->ef)
    c->status = k->encode_ef(k, &c->spec.cfg, &ctx, kb->grad, kb->acc, kb->count, kb->out, cap,
                             &c->len);
  else
    c->status = k->encode(&c->spec.cfg, &ctx, kb->grad, kb->count, kb->out, cap, &c->len);
}

typedef struct {
  const gcomp_topk_kernels *kt;
  uint32_t t;
  size_t kept;
} filter_case;

static void run_filter(gcomp_kbench *kb, void *arg) {
  filter_case *f = arg;
  /* the outputs go into kb->out: room for count indices and count values */
  uint32_t *idx = (uint32_t *)(void *)kb->out;
  float *val = (float *)(void *)(kb->out + kb->bytes + 64);
  f->kept = f->kt->filter(kb->grad, kb->count, f->t, 0, idx, val);
}

/* The same interleaved measurement as gcomp_kbench_measure, but in thread CPU time, with
 * the same read pass as reference: on a shared, oversubscribed machine wall time mostly
 * measures the scheduler, CPU time still measures the kernel against memory. */
static volatile float sink;
static void read_pass(const gcomp_kbench *kb) {
  float acc[8] = {0};
  const float *g = kb->grad;
  size_t n = kb->count & ~(size_t)7;
  for (size_t i = 0; i < n; i += 8)
    for (int j = 0; j < 8; j++) acc[j] += g[i + j];
  sink = acc[0] + acc[1] + acc[2] + acc[3] + acc[4] + acc[5] + acc[6] + acc[7];
}
static double cpu_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}
static double measure_cpu(gcomp_kbench *kb, gcomp_kbench_fn fn, void *arg, double *ref_s) {
  double t[64], r[64];
  int reps = kb->reps > 64 ? 64 : kb->reps;
  fn(kb, arg);
  read_pass(kb);
  for (int i = 0; i < reps; i++) {
    double t0 = cpu_s();
    fn(kb, arg);
    double t1 = cpu_s();
    read_pass(kb);
    double t2 = cpu_s();
    t[i] = t1 - t0;
    r[i] = t2 - t1;
  }
  qsort(t, (size_t)reps, sizeof *t, cmp_d);
  qsort(r, (size_t)reps, sizeof *r, cmp_d);
  *ref_s = r[reps / 2];
  return t[reps / 2];
}

static void one(gcomp_kbench *kb, const char *name, const char *spec, int ef, int warm) {
  topk_case c;
  memset(&c, 0, sizeof c);
  if (gcomp_spec_parse(spec, &c.spec) != GCOMP_OK) {
    fprintf(stderr, "bench topk: %s\n", gcomp_last_error());
    return;
  }
  c.ef = ef;
  c.warm = warm;
  if (ef) memset(kb->acc, 0, kb->bytes);
  double rs, t = gcomp_kbench_measure(kb, run_case, &c, GCOMP_REF_READ, &rs);
  if (c.status != GCOMP_OK) {
    fprintf(stderr, "bench topk %s: %s\n", name, gcomp_last_error());
    return;
  }
  /* kept count from the payload header; k as the kind computes it */
  double kept = (double)gcomp_load_le64(kb->out + 4);
  double ratio = 0;
  sscanf(strstr(spec, "ratio=") + 6, "%lf", &ratio);
  double k = (double)(size_t)(ratio * (double)kb->count + 0.5);
  gcomp_kbench_row(kb, "topk", name, gcomp_isa_selected(), (double)kb->bytes, t, GCOMP_REF_READ,
                   rs, (double)kb->bytes, "kept/k", kept / k);
  /* again in CPU time (see measure_cpu) */
  char cname[96];
  snprintf(cname, sizeof cname, "%s [cpu]", name);
  if (ef) memset(kb->acc, 0, kb->bytes);
  t = measure_cpu(kb, run_case, &c, &rs);
  gcomp_kbench_row(kb, "topk", cname, gcomp_isa_selected(), (double)kb->bytes, t, GCOMP_REF_READ,
                   rs, (double)kb->bytes, "kept/k", (double)gcomp_load_le64(kb->out + 4) / k);
}

static void filter_row(gcomp_kbench *kb, const char *name, const gcomp_topk_kernels *kt,
                       const char *kname, double ratio) {
  /* the exact threshold for ratio, found once outside the timing */
  size_t n = kb->count, k = (size_t)(ratio * (double)n + 0.5);
  uint32_t *keys = malloc(2 * n * sizeof *keys);
  if (!keys) return;
  for (size_t i = 0; i < n; i++) {
    uint32_t b;
    memcpy(&b, &kb->grad[i], 4);
    keys[i] = b & 0x7fffffffu;
  }
  filter_case f = {kt, gcomp_topk_kth_key(keys, n, k, keys + n), 0};
  free(keys);
  double rs, t = gcomp_kbench_measure(kb, run_filter, &f, GCOMP_REF_READ, &rs);
  gcomp_kbench_row(kb, "topk", name, kname, (double)kb->bytes, t, GCOMP_REF_READ, rs,
                   (double)kb->bytes, "kept/k", (double)f.kept / (double)k);
}

typedef struct {
  gcomp_spec spec;
  uint8_t *payload;
  size_t len;
  int status;
} decode_case;

static void run_decode(gcomp_kbench *kb, void *arg) {
  decode_case *d = arg;
  d->status =
      d->spec.kind->decode(&d->spec.cfg, 0, d->payload, d->len, kb->acc, kb->count, 1, NULL);
}

/* The receiving side: validate a frame's payload and scatter-add it into the fp32
 * accumulator (rate counted in dense fp32 bytes, as for the encoders). */
static void decode_row(gcomp_kbench *kb, const char *name, const char *spec) {
  decode_case d;
  memset(&d, 0, sizeof d);
  if (gcomp_spec_parse(spec, &d.spec) != GCOMP_OK) return;
  size_t cap = 2 * kb->bytes + 4096;
  d.payload = malloc(cap);
  gcomp_codec_stats st = {0};
  gcomp_enc_ctx ctx = {.stats = &st};
  if (!d.payload || d.spec.kind->encode(&d.spec.cfg, &ctx, kb->grad, kb->count, d.payload, cap,
                                        &d.len) != GCOMP_OK) {
    free(d.payload);
    return;
  }
  memset(kb->acc, 0, kb->bytes);
  double rs, t = gcomp_kbench_measure(kb, run_decode, &d, GCOMP_REF_READ, &rs);
  if (d.status == GCOMP_OK)
    gcomp_kbench_row(kb, "topk", name, "c", (double)kb->bytes, t, GCOMP_REF_READ, rs,
                     (double)kb->bytes, "bytes/value", (double)d.len / (double)kb->count);
  free(d.payload);
}

static void suite_topk(gcomp_kbench *kb) {
  gcomp_init();
  one(kb, "approx r=0.01 (sampled)", "topk:ratio=0.01", 0, 0);
  one(kb, "approx r=0.01 (last cut)", "topk:ratio=0.01", 0, 1);
  one(kb, "approx r=0.001 (sampled)", "topk:ratio=0.001", 0, 0);
  one(kb, "approx r=0.001 (last cut)", "topk:ratio=0.001", 0, 1);
  one(kb, "exact r=0.01", "topk:ratio=0.01,exact=1", 0, 0);
  one(kb, "exact r=0.001", "topk:ratio=0.001,exact=1", 0, 0);
  one(kb, "ef+approx r=0.01 (sampled)", "topk:ratio=0.01", 1, 0);
  one(kb, "ef+approx r=0.01 (last cut)", "topk:ratio=0.01", 1, 1);
  one(kb, "ef+approx r=0.001 (last cut)", "topk:ratio=0.001", 1, 1);
  one(kb, "approx r=0.01 values=bf16", "topk:ratio=0.01,values=bf16", 0, 1);
  decode_row(kb, "decode_add r=0.01", "topk:ratio=0.01");
  decode_row(kb, "decode_add r=0.001", "topk:ratio=0.001");
  filter_row(kb, "filter pass r=0.01", &gcomp_topk_kernels_base, "base", 0.01);
  if (gcomp_isa_level() >= GCOMP_ISA_AVX2)
    filter_row(kb, "filter pass r=0.01", &gcomp_topk_kernels_avx2, "avx2", 0.01);
  if (gcomp_isa_level() >= GCOMP_ISA_AVX512)
    filter_row(kb, "filter pass r=0.01", &gcomp_topk_kernels_avx512, "avx512", 0.01);
}

GCOMP_BENCH_CONSTRUCTOR(register_topk) { gcomp_bench_register_suite("topk", suite_topk); }
