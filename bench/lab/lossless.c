/* gcomp-lab kernels --suite lossless: CRC32C against a read pass, the byte-plane kernels
 * against memcpy, and each lossless stage's ratio and speed on gradient-like payloads:
 * N(0, 1e-3) fp32, the same values as bf16 and fp16 (round to nearest even, by the scalar
 * conversions of codecs/half.h, so this suite depends on no cast codec's kernels), and a
 * top-k index stream (ascending u32 indices of a 1% random selection). GB/s count the stage's input bytes
 * (the payload, not the fp32 gradient); comp_ratio = payload bytes / staged bytes. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab.h"
#include "frame.h"
#include "gcomp.h"
#include "half.h"
#include "lossless.h"

typedef struct {
  const char *data;            /* "fp32", ... */
  const uint8_t *payload;
  size_t len;
  unsigned width;
  const gcomp_stage *stage;
  gcomp_stage_cfg cfg;
  uint8_t *staged;
  size_t staged_cap, staged_len;
  uint8_t flags;
  int status;
} stage_case;

static void run_encode(gcomp_kbench *kb, void *arg) {
  stage_case *c = arg;
  c->status = gcomp_stage_encode(c->stage, &c->cfg, c->width, c->payload, c->len, c->staged,
                                 c->staged_cap, &c->staged_len, &c->flags);
}

static void run_decode(gcomp_kbench *kb, void *arg) {
  stage_case *c = arg;
  const uint8_t *raw;
  size_t raw_len;
  c->status = gcomp_stage_decode(c->stage, c->flags, c->width, c->staged, c->staged_len, c->len,
                                 &raw, &raw_len);
  if (c->status == GCOMP_OK && (raw_len != c->len || raw[raw_len / 2] != c->payload[raw_len / 2]))
    c->status = GCOMP_ERR_CORRUPT;
}

typedef struct {
  const uint8_t *in;
  size_t len;
} crc_case;
static volatile uint32_t crc_sink;
static void run_crc(gcomp_kbench *kb, void *arg) {
  crc_case *c = arg;
  crc_sink = gcomp_crc32c(0xffffffffu, c->in, c->len);
}

typedef struct {
  const gcomp_shuffle_kernels *k;
  const uint8_t *in;
  size_t elems;
  unsigned width;
  uint8_t *out;
  int join;
} shuf_case;
static void run_shuffle(gcomp_kbench *kb, void *arg) {
  shuf_case *c = arg;
  uint8_t *planes[4];
  for (unsigned b = 0; b < c->width; b++) planes[b] = c->out + b * c->elems;
  if (!c->join) {
    c->k->split(c->in, c->elems, c->width, planes);
  } else {
    const uint8_t *cp[4] = {planes[0], planes[1], planes[2], planes[3]};
    c->k->join(cp, c->elems, c->width, (uint8_t *)c->in);
  }
}

static void stage_rows(gcomp_kbench *kb, stage_case *c, const char *label) {
  char name[160];
  double rs, t = gcomp_kbench_measure(kb, run_encode, c, GCOMP_REF_READ, &rs);
  if (c->status == GCOMP_ERR_NOMEM) {   /* the stage did not shrink it: the frame goes raw */
    snprintf(name, sizeof name, "%s %s enc (raw!)", c->data, label);
    gcomp_kbench_row(kb, "lossless", name, "c", (double)c->len, t, GCOMP_REF_READ, rs,
                     (double)kb->bytes, "comp_ratio", 1.0);
    return;
  }
  if (c->status != GCOMP_OK) {
    fprintf(stderr, "lossless: %s %s: %s\n", c->data, label, gcomp_last_error());
    return;
  }
  double ratio = (double)c->len / (double)c->staged_len;
  snprintf(name, sizeof name, "%s %s enc", c->data, label);
  gcomp_kbench_row(kb, "lossless", name, "c", (double)c->len, t, GCOMP_REF_READ, rs,
                   (double)kb->bytes, "comp_ratio", ratio);
  t = gcomp_kbench_measure(kb, run_decode, c, GCOMP_REF_READ, &rs);
  if (c->status != GCOMP_OK) {
    fprintf(stderr, "lossless: %s %s decode: %s\n", c->data, label, gcomp_last_error());
    return;
  }
  snprintf(name, sizeof name, "%s %s dec", c->data, label);
  gcomp_kbench_row(kb, "lossless", name, "c", (double)c->len, t, GCOMP_REF_READ, rs,
                   (double)kb->bytes, "comp_ratio", ratio);
}

static void suite_lossless(gcomp_kbench *kb) {
  gcomp_init();
  /* CRC32C over the whole gradient, against a read pass of the same bytes */
  crc_case cc = {(const uint8_t *)kb->grad, kb->bytes};
  double rs, t = gcomp_kbench_measure(kb, run_crc, &cc, GCOMP_REF_READ, &rs);
  gcomp_kbench_row(kb, "lossless", "crc32c (frame checksum)", "isa-l", (double)kb->bytes, t,
                   GCOMP_REF_READ, rs, (double)kb->bytes, NULL, 0);

  /* byte-plane kernels: bytes of payload per second, against memcpy of the same bytes */
  const gcomp_shuffle_kernels *ks[2] = {&gcomp_shuffle_kernels_base, gcomp_shuffle_kernels_get()};
  int nk = ks[1] == ks[0] ? 1 : 2;
  uint8_t *copy = malloc(kb->bytes);
  if (!copy) return;
  memcpy(copy, kb->grad, kb->bytes);
  for (int k = 0; k < nk; k++)
    for (unsigned w = 2; w <= 4; w += 2)
      for (int join = 0; join < 2; join++) {
        shuf_case sc = {ks[k], copy, kb->bytes / w, w, kb->out, join};
        if (join) run_shuffle(kb, &(shuf_case){ks[k], copy, kb->bytes / w, w, kb->out, 0});
        char name[64];
        snprintf(name, sizeof name, "%s %u-byte planes", join ? "join" : "split", w);
        t = gcomp_kbench_measure(kb, run_shuffle, &sc, GCOMP_REF_MEMCPY, &rs);
        gcomp_kbench_row(kb, "lossless", name, ks[k]->name, (double)kb->bytes, t, GCOMP_REF_MEMCPY,
                         rs, (double)kb->bytes, NULL, 0);
      }
  free(copy);

  /* the payloads */
  size_t n = kb->count;
  uint16_t *bf = malloc(n * 2), *hf = malloc(n * 2);
  uint32_t *idx = malloc((n / 50 + 16) * 4);
  size_t staged_cap = kb->bytes + 4096;
  uint8_t *staged = malloc(staged_cap);
  if (!bf || !hf || !idx || !staged) {
    fprintf(stderr, "lossless: cannot allocate payloads\n");
    free(bf), free(hf), free(idx), free(staged);
    return;
  }
  for (size_t i = 0; i < n; i++) bf[i] = gcomp_bf16_rne(kb->grad[i]), hf[i] = gcomp_f16_rne(kb->grad[i]);
  size_t nidx = 0;
  uint64_t s = 0x9e3779b97f4a7c15ull;
  for (size_t i = 0; i < n && nidx < n / 50 + 16; i++) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    if (s % 100 == 0) idx[nidx++] = (uint32_t)i;
  }
  struct {
    const char *name;
    const void *p;
    size_t len;
    unsigned width;
  } data[] = {{"fp32", kb->grad, n * 4, 4},
              {"bf16", bf, n * 2, 2},
              {"fp16", hf, n * 2, 2},
              {"topk-idx", idx, nidx * 4, 4}};
  struct {
    const char *stage, *params;
  } confs[] = {{"zstd", "level=1,planes=exp"},  {"zstd", "level=1,planes=all"},
               {"zstd", "level=3,planes=all"},  {"igzip", "level=1,planes=exp"},
               {"igzip", "level=1,planes=all"}, {"igzip", "level=0,planes=all"}};
  for (size_t d = 0; d < sizeof data / sizeof *data; d++)
    for (size_t k = 0; k < sizeof confs / sizeof *confs; k++) {
      stage_case c = {.data = data[d].name, .payload = data[d].p, .len = data[d].len,
                      .width = data[d].width, .stage = gcomp_stage_find(confs[k].stage),
                      .staged = staged, .staged_cap = data[d].len - 1};
      c.stage->defaults(&c.cfg);
      char params[64], label[64];
      snprintf(params, sizeof params, "%s", confs[k].params);
      char *comma = strchr(params, ',');
      *comma = '\0';
      c.stage->set(&c.cfg, "level", strchr(params, '=') + 1);
      c.stage->set(&c.cfg, "planes", strchr(comma + 1, '=') + 1);
      snprintf(label, sizeof label, "%s:%s", confs[k].stage, confs[k].params);
      stage_rows(kb, &c, label);
    }
  free(bf);
  free(hf);
  free(idx);
  free(staged);
}

GCOMP_BENCH_CONSTRUCTOR(register_lossless) { gcomp_bench_register_suite("lossless", suite_lossless); }
