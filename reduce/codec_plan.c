/* What the planner knows of each codec spec a communicator is called with: its wire ratio
 * and encode + decode speed (measured once on a probe, the slowest rank's figures agreed),
 * whether it is sparse and its second stage, all asked of the codec itself. A call finds
 * its entry by comparing codecs field by field (gcomp_codec_same), never their text. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec_impl.h"
#include "comm_impl.h"

/* ---- codecs in the planner --------------------------------------------------------------- */
/* Measures one codec's encode + decode cost on this rank, then takes the slowest rank's
 * figure so that every rank plans alike. Collective: every rank reaches it at the same
 * call (the first compressed call with this spec). */
static int measure_codec(gcomp_comm *comm, gcomp_codec_entry *ci) {
  enum { N = 1 << 16 };
  gcomp_codec *probe = NULL;
  GCOMP_CHECK(gcomp_codec_clone(ci->codec, &probe));
  float *x = malloc(N * sizeof *x), *y = calloc(N, sizeof *y);
  size_t cap = gcomp_codec_max_encoded_size(probe, N);
  uint8_t *frame = malloc(cap);
  int st = x && y && frame ? GCOMP_OK
                           : gcomp_error_set(GCOMP_ERR_NOMEM, __FILE__, __LINE__, "codec probe");
  /* encode+decode time, wire ratio, and the spec (max and -min: every rank must measure the
   * same codec, or the ranks called with different ones) */
  double id = gcomp_codec_wire_hash(ci->codec);   /* every rank must measure the same codec */
  double f[4] = {0, 0, id, -id};
  if (st == GCOMP_OK) {
    uint64_t s = 0x2545f4914f6cdd1dull;
    for (int i = 0; i < N; i++) {
      s ^= s << 13, s ^= s >> 7, s ^= s << 17;
      x[i] = (float)((double)(s >> 40) / 16777216.0 - 0.5) * 1e-3f;
    }
    size_t len = 0;
    /* the fastest of a few runs after a warm-up: one hiccup must not talk the planner out
     * of a codec for the communicator's whole life */
    double best = 1e30;
    for (int rep = 0; rep < 4 && st == GCOMP_OK; rep++) {
      uint64_t t0 = gcomp_now_ns();
      st = gcomp_encode(probe, 0, x, N, frame, cap, &len);
      if (st == GCOMP_OK) st = gcomp_decode_add(probe, frame, len, y, N);
      double t = (double)(gcomp_now_ns() - t0) * 1e-9;
      if (rep > 0 && t < best) best = t;
    }
    f[0] = best / (N * 4.0);
    f[1] = (double)len / (4.0 * N);   /* the bound is useless for top-k: measure it */
  }
  gcomp_codec_destroy(probe);
  free(x), free(y), free(frame);
  GCOMP_CHECK(st);
  GCOMP_CHECK(gcomp_call_internal(comm, f, 4, GCOMP_FLOAT64, GCOMP_MAX, gcomp_algo_find("rd"),
                                  GCOMP_SEQ_CODEC_PROBE));
  GCOMP_FAIL_IF(f[2] != -f[3], GCOMP_ERR_INVALID,
                "ranks call with different codecs (this rank: '%s'): every rank must pass the "
                "same codec spec to the same call", ci->spec);
  ci->spb = f[0];
  ci->ratio = f[1];
  return GCOMP_OK;
}

static void entry_free(gcomp_codec_entry *ci) {
  if (!ci) return;
  gcomp_codec_destroy(ci->codec);
  gcomp_codec_destroy(ci->second);
  free(ci);
}

void gcomp_codec_plan_free(gcomp_comm *comm) {
  for (int i = 0; i < comm->ncodecs; i++) entry_free(comm->codecs[i]);
  free(comm->codecs);
  comm->codecs = NULL;
  comm->ncodecs = comm->codecs_cap = 0;
}

int gcomp_codec_plan(gcomp_comm *comm, gcomp_codec *codec, gcomp_codec_entry **out) {
  for (int i = 0; i < comm->ncodecs; i++)
    if (gcomp_codec_same(comm->codecs[i]->codec, codec)) {
      *out = comm->codecs[i];
      return GCOMP_OK;
    }
  if (comm->ncodecs == comm->codecs_cap) {
    int cap = comm->codecs_cap ? 2 * comm->codecs_cap : 8;
    gcomp_codec_entry **grown = realloc(comm->codecs, (size_t)cap * sizeof *grown);
    GCOMP_FAIL_IF(!grown, GCOMP_ERR_NOMEM, "the planner's table of %d codec specs", cap);
    comm->codecs = grown;
    comm->codecs_cap = cap;
  }
  gcomp_codec_entry *ci = calloc(1, sizeof *ci);
  GCOMP_FAIL_IF(!ci, GCOMP_ERR_NOMEM, "the planner's entry of a codec");
  gcomp_codec_spec(codec, ci->spec, sizeof ci->spec);   /* once: for log lines and errors */
  gcomp_codec_info info = {.struct_size = sizeof info};
  int st = gcomp_codec_clone(codec, &ci->codec);
  if (st == GCOMP_OK) st = gcomp_codec_describe(codec, &info);
  ci->sparse = info.sparse;
  /* the second quantisation: the same codec without error feedback (top-k's reduced shards
   * are dense, so they travel as fp32) */
  if (st == GCOMP_OK) st = gcomp_codec_second_stage(codec, &ci->second);
  /* the entry counts only once measured: a failed measurement must not leave a codec that
   * later calls would plan with (ratio 0: every call quietly uncompressed) */
  if (st == GCOMP_OK) st = measure_codec(comm, ci);
  if (st < 0) {
    entry_free(ci);
    return gcomp_error_trace(st, __FILE__, __LINE__);
  }
  comm->codecs[comm->ncodecs++] = ci;
  char second[256];
  gcomp_codec_spec(ci->second, second, sizeof second);
  GCOMP_INFO(GCOMP_SUB_TUNING,
             "codec %s: wire ratio %.4f, encode+decode %.2f GB/s, second stage %s", ci->spec,
             ci->ratio, 1e-9 / ci->spb, second);
  *out = ci;
  return GCOMP_OK;
}
