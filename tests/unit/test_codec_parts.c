/* Frames a part at a time (codecs/codec_parts.h). An encode in parts of a sum, fed the
 * operands in parts of any length, writes the frame gcomp_encode writes for the stored sum,
 * byte for byte, and leaves the same residuals and counters, call after call; a decode in
 * parts gives gcomp_decode's (and gcomp_decode_add's) values and refuses every damaged
 * frame; codecs that cannot be coded in parts are refused, and misuse is an error, not
 * garbage. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "codec_parts.h"
#include "gcomp.h"

static uint64_t rng = 7;
static uint64_t next(void) {
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return rng;
}
static float value(void) { return (float)((double)(next() >> 11) / 9007199254740992.0 - 0.5); }

static char *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  fseek(f, 0, SEEK_END);
  *len = (size_t)ftell(f);
  fseek(f, 0, SEEK_SET);
  char *p = malloc(*len ? *len : 1);
  assert_int_equal(fread(p, 1, *len, f), *len);
  fclose(f);
  return p;
}

/* Both codecs' residual files are the same bytes. */
static void same_residuals(gcomp_codec *a, gcomp_codec *b, const char *spec) {
  char pa[64], pb[64];
  snprintf(pa, sizeof pa, "encode_sum_a.%d.ef", (int)getpid());
  snprintf(pb, sizeof pb, "encode_sum_b.%d.ef", (int)getpid());
  assert_int_equal(gcomp_codec_save_residuals(a, pa), GCOMP_OK);
  assert_int_equal(gcomp_codec_save_residuals(b, pb), GCOMP_OK);
  size_t la, lb;
  char *fa = slurp(pa, &la), *fb = slurp(pb, &lb);
  if (la != lb || memcmp(fa, fb, la)) fail_msg("%s: the residuals differ", spec);
  free(fa), free(fb);
  remove(pa), remove(pb);
}

/* Decoded in parts of random whole units, stored then added, the frame gives the values
 * gcomp_decode and gcomp_decode_add give. */
static void decode_matches(gcomp_codec *c, const uint8_t *frame, size_t len, size_t count,
                           const char *spec) {
  size_t unit = gcomp_codec_part_values(c), m = count ? count : 1;
  float *want = malloc(m * sizeof *want), *got = malloc(m * sizeof *got);
  for (int add = 0; add <= 1; add++) {
    for (size_t i = 0; i < count; i++) want[i] = got[i] = (float)i;
    assert_int_equal((add ? gcomp_decode_add : gcomp_decode)(c, frame, len, want, count),
                     GCOMP_OK);
    gcomp_dec_parts d;
    assert_int_equal(gcomp_decode_parts_begin(c, frame, len, count, &d), GCOMP_OK);
    for (size_t at = 0; at < count;) {
      size_t n = unit * (1 + next() % 20);
      if (n > count - at) n = count - at;
      assert_int_equal(gcomp_decode_part(&d, got + at, n, add), GCOMP_OK);
      at += n;
    }
    assert_int_equal(gcomp_decode_parts_end(&d), GCOMP_OK);
    if (count && memcmp(want, got, count * sizeof *got))
      fail_msg("%s, %zu values: decoded in parts (add %d), the values differ", spec, count, add);
  }
  free(want), free(got);
}

/* `steps` encodes of count values, the sum of nsrc operands, through both ways; parts of
 * random lengths (some of one value, some longer than the codec's buffer). */
static void parts_match(const char *spec, size_t count, int nsrc, int steps, int with_nan) {
  gcomp_codec *whole = NULL, *parts = NULL;
  assert_int_equal(gcomp_codec_create(spec, &whole), GCOMP_OK);
  assert_int_equal(gcomp_codec_create(spec, &parts), GCOMP_OK);
  assert_true(gcomp_codec_part_values(parts) > 0);
  size_t cap = gcomp_codec_max_encoded_size(whole, count);
  uint8_t *fw = malloc(cap), *fp = malloc(cap);
  float *src[4], *x = malloc((count ? count : 1) * sizeof *x);
  for (int j = 0; j < nsrc; j++) src[j] = malloc((count ? count : 1) * sizeof *src[j]);
  const uint64_t key = 0x5eed0000u + (uint64_t)count;
  for (int t = 0; t < steps; t++) {
    for (int j = 0; j < nsrc; j++)
      for (size_t i = 0; i < count; i++) src[j][i] = value() * (1.0f + (float)j);
    if (with_nan && count > 700) src[nsrc - 1][700] = NAN, src[0][count - 1] = INFINITY;
    for (size_t i = 0; i < count; i++) {   /* the sum in operand order, as a node sums */
      x[i] = nsrc > 1 ? src[0][i] + src[1][i] : src[0][i];
      for (int j = 2; j < nsrc; j++) x[i] += src[j][i];
    }
    size_t lw = 0, lp = 0;
    assert_int_equal(gcomp_encode(whole, key, x, count, fw, cap, &lw), GCOMP_OK);
    assert_int_equal(gcomp_encode_sum_begin(parts, key, count, fp, cap), GCOMP_OK);
    for (size_t at = 0; at < count;) {
      size_t n = next() % 4 == 0 ? 1 : 1 + next() % 9000;
      if (n > count - at) n = count - at;
      const float *p[4];
      for (int j = 0; j < nsrc; j++) p[j] = src[j] + at;
      assert_int_equal(gcomp_encode_sum_part(parts, p, nsrc, n), GCOMP_OK);
      at += n;
    }
    assert_int_equal(gcomp_encode_sum_end(parts, &lp), GCOMP_OK);
    if (lw != lp || memcmp(fw, fp, lw))
      fail_msg("%s, %zu values, %d operands, step %d: the frames differ (%zu and %zu bytes)",
               spec, count, nsrc, t, lw, lp);
    decode_matches(parts, fp, lp, count, spec);
  }
  if (strstr(spec, "+ef")) same_residuals(whole, parts, spec);
  gcomp_codec_stats sw = {.struct_size = sizeof sw}, sp = {.struct_size = sizeof sp};
  assert_int_equal(gcomp_codec_get_stats(whole, &sw), GCOMP_OK);
  assert_int_equal(gcomp_codec_get_stats(parts, &sp), GCOMP_OK);
  assert_int_equal(sw.frames_encoded, sp.frames_encoded);
  assert_int_equal(sw.bytes_out, sp.bytes_out);
  assert_int_equal(sw.nonfinite_inputs, sp.nonfinite_inputs);
  if (with_nan && count > 700) assert_true(sp.nonfinite_inputs >= (uint64_t)steps);
  for (int j = 0; j < nsrc; j++) free(src[j]);
  free(x), free(fw), free(fp);
  gcomp_codec_destroy(whole);
  gcomp_codec_destroy(parts);
}

static void test_parts_give_the_whole_frame(void **state) {
  static const char *specs[] = {"sign+ef", "sign", "sign:bucket=96+ef", "quant:bits=4,bucket=128",
                                "quant:bits=2,bucket=128+ef", "quant:bits=8"};
  static const size_t counts[] = {0, 1, 95, 4097, 40037};
  for (size_t s = 0; s < sizeof specs / sizeof *specs; s++)
    for (size_t k = 0; k < sizeof counts / sizeof *counts; k++)
      for (int nsrc = 1; nsrc <= 3; nsrc++) parts_match(specs[s], counts[k], nsrc, 3, 0);
}

/* a bucket with a NaN or an Inf goes raw either way, counted alike */
static void test_parts_nonfinite(void **state) {
  parts_match("sign+ef", 40037, 2, 2, 1);
  parts_match("quant:bits=4,bucket=128+ef", 40037, 3, 2, 1);
}

/* Decodes frame in parts of one unit: GCOMP_OK through the end, or the first failure */
static int decode_all(gcomp_codec *c, const uint8_t *frame, size_t len, size_t count, float *out) {
  gcomp_dec_parts d;
  int st = gcomp_decode_parts_begin(c, frame, len, count, &d);
  size_t unit = gcomp_codec_part_values(c);
  for (size_t at = 0; st == GCOMP_OK && at < count; at += unit)
    st = gcomp_decode_part(&d, out + at, count - at < unit ? count - at : unit, 0);
  return st == GCOMP_OK ? gcomp_decode_parts_end(&d) : st;
}

/* Every flipped byte of the frame (header, payload, block checksums) and every truncation
 * is GCOMP_ERR_CORRUPT, and before a damaged byte is used: what the parts wrote up to the
 * failure are the right values (each block is verified before it is decoded) */
static void test_damage_is_refused(void **state) {
  gcomp_codec *c = NULL;
  assert_int_equal(gcomp_codec_create("sign:bucket=64+ef", &c), GCOMP_OK);
  enum { COUNT = 240000 };   /* a payload of more than one 64 KiB block */
  float *x = malloc(COUNT * sizeof *x), *out = malloc(COUNT * sizeof *out);
  for (size_t i = 0; i < COUNT; i++) x[i] = value() * (i % 7 == 0 ? 0.0f : 1.0f);
  size_t cap = gcomp_codec_max_encoded_size(c, COUNT), len;
  uint8_t *frame = malloc(cap);
  assert_int_equal(gcomp_encode(c, 3, x, COUNT, frame, cap, &len), GCOMP_OK);
  assert_true(len > 32 + 65536);
  float *right = malloc(COUNT * sizeof *right);
  assert_int_equal(decode_all(c, frame, len, COUNT, right), GCOMP_OK);
  for (size_t k = 0; k < 400; k++) {
    size_t at = k < 40 ? k : next() % len;   /* all of the header, then anywhere */
    uint8_t bit = (uint8_t)(1u << (next() % 8));
    frame[at] ^= bit;
    for (size_t i = 0; i < COUNT; i++) out[i] = 1e30f;   /* not written */
    int st = decode_all(c, frame, len, COUNT, out);
    if (st != GCOMP_ERR_CORRUPT) fail_msg("byte %zu of %zu flipped: %d", at, len, st);
    for (size_t i = 0; i < COUNT; i++)
      if (out[i] != 1e30f && out[i] != right[i])
        fail_msg("byte %zu of %zu flipped: value %zu decoded from it (%g, not %g)", at, len, i,
                 out[i], right[i]);
    frame[at] ^= bit;
  }
  free(right);
  assert_int_equal(decode_all(c, frame, len, COUNT, out), GCOMP_OK);
  assert_int_equal(decode_all(c, frame, len - 1, COUNT, out), GCOMP_ERR_CORRUPT);
  assert_int_equal(decode_all(c, frame, 20, COUNT, out), GCOMP_ERR_CORRUPT);
  assert_int_equal(decode_all(c, frame, len, COUNT - 1, out), GCOMP_ERR_CORRUPT);   /* count */
  free(x), free(out), free(frame);
  gcomp_codec_destroy(c);
}

/* A frame made with another bucket (or bit width) is refused as gcomp_decode refuses it,
 * even with no values to decode (fuzz_decode found a frame of 0 values the parts took,
 * before the parameter was checked at begin) */
static void test_other_parameter_is_refused(void **state) {
  static const char *pairs[][2] = {{"sign:bucket=64", "sign:bucket=128"},
                                   {"quant:bits=4", "quant:bits=8"},
                                   {"quant:bits=4,bucket=128", "quant:bits=4,bucket=256"}};
  for (size_t k = 0; k < sizeof pairs / sizeof *pairs; k++) {
    gcomp_codec *a = NULL, *b = NULL;
    assert_int_equal(gcomp_codec_create(pairs[k][0], &a), GCOMP_OK);
    assert_int_equal(gcomp_codec_create(pairs[k][1], &b), GCOMP_OK);
    const size_t counts[] = {0, 1000};
    for (int j = 0; j < 2; j++) {
      size_t n = counts[j], cap = gcomp_codec_max_encoded_size(a, n), len;
      float *x = calloc(n + 1, sizeof *x), *out = calloc(n + 1, sizeof *out);
      for (size_t i = 0; i < n; i++) x[i] = value();
      uint8_t *frame = malloc(cap);
      assert_int_equal(gcomp_encode(a, 1, x, n, frame, cap, &len), GCOMP_OK);
      assert_int_equal(decode_all(a, frame, len, n, out), GCOMP_OK);
      assert_int_equal(gcomp_decode(b, frame, len, out, n), GCOMP_ERR_CORRUPT);
      gcomp_dec_parts d;
      int st = gcomp_decode_parts_begin(b, frame, len, n, &d);
      if (st != GCOMP_ERR_CORRUPT || !strstr(gcomp_last_error(), "frame made with"))
        fail_msg("%s frame of %zu values through %s: %d (%s)", pairs[k][0], n, pairs[k][1], st,
                 gcomp_last_error());
      free(x), free(out), free(frame);
    }
    gcomp_codec_destroy(a);
    gcomp_codec_destroy(b);
  }
}

/* spec's codec (*c), x[0..count) encoded into a new frame (returned, *len bytes) and that
 * frame decoded into want */
static uint8_t *encoded(const char *spec, const float *x, size_t count, gcomp_codec **c,
                        size_t *len, float *want) {
  assert_int_equal(gcomp_codec_create(spec, c), GCOMP_OK);
  size_t cap = gcomp_codec_max_encoded_size(*c, count);
  uint8_t *frame = malloc(cap);
  assert_non_null(frame);
  assert_int_equal(gcomp_encode(*c, 9, x, count, frame, cap, len), GCOMP_OK);
  assert_int_equal(gcomp_decode(*c, frame, *len, want, count), GCOMP_OK);
  return frame;
}

/* gcomp_decode_tally streamed (streaming stores for sign and quant, plain ones for the
 * rest) gives gcomp_decode's values bit for bit at each alignment of the output, touches
 * nothing around it, and refuses what gcomp_decode refuses. */
static void test_stream_decode_is_decode(void **state) {
  static const char *specs[] = {"sign+ef", "sign:bucket=96", "quant:bits=4", "quant:bits=8+ef",
                                "quant:bits=2,bucket=128", "quant:bits=4,round=stochastic",
                                "quant:bits=4+zstd", "sign+ef:dtype=bf16", "bf16", "none",
                                "topk:ratio=0.01+ef"};
  enum { COUNT = 100003, PAD = 16 };
  float *x = malloc(COUNT * sizeof *x), *want = malloc(COUNT * sizeof *want);
  float *mem = NULL;
  assert_int_equal(posix_memalign((void **)&mem, 64, (COUNT + 2 * PAD) * sizeof *mem), 0);
  assert_non_null(x), assert_non_null(want);
  for (size_t i = 0; i < COUNT; i++) x[i] = value() * (i % 9 == 0 ? 0.0f : 1.0f);
  x[5000] = NAN, x[70001] = -INFINITY;   /* raw buckets */
  for (size_t s = 0; s < sizeof specs / sizeof *specs; s++) {
    gcomp_codec *c = NULL;
    size_t len;
    uint8_t *frame = encoded(specs[s], x, COUNT, &c, &len, want);
    const size_t shifts[] = {0, 4, 1};   /* 64-, 16- and 4-byte aligned */
    for (size_t a = 0; a < 3; a++) {
      memset(mem, 0x7b, (COUNT + 2 * PAD) * sizeof *mem);
      float *d = mem + PAD + shifts[a];
      assert_int_equal(gcomp_decode_tally(c, frame, len, d, COUNT, 1, NULL), GCOMP_OK);
      if (memcmp(d, want, COUNT * sizeof *d))
        fail_msg("%s, output shifted %zu floats: the streamed values differ", specs[s],
                 shifts[a]);
      const uint8_t *b = (const uint8_t *)mem;
      for (size_t i = 0; i < (COUNT + 2 * PAD) * sizeof *mem; i++)
        if ((i < (PAD + shifts[a]) * 4 || i >= (PAD + shifts[a] + COUNT) * 4) && b[i] != 0x7b)
          fail_msg("%s: byte %zu outside the output written", specs[s], i);
    }
    for (int k = 0; k < 20; k++) {   /* damage: the same refusal */
      size_t at = next() % len;
      frame[at] ^= 0x10;
      int s0 = gcomp_decode(c, frame, len, want, COUNT);
      int s1 = gcomp_decode_tally(c, frame, len, mem + PAD, COUNT, 1, NULL);
      if (s0 != s1 || s1 != GCOMP_ERR_CORRUPT)
        fail_msg("%s, byte %zu flipped: gcomp_decode %d, streamed %d", specs[s], at,
                 s0, s1);
      frame[at] ^= 0x10;
    }
    free(frame);
    gcomp_codec_destroy(c);
  }
  free(x), free(want), free(mem);
}

/* gcomp_decode_tally gives gcomp_decode's values and, for sign and quant frames (not
 * staged ones), the NaN and Inf it wrote, counted from the raw buckets' payload: as many as
 * the output holds; for the other kinds UINT64_MAX (not known). */
static void test_tally_counts_nonfinite(void **state) {
  static const char *specs[] = {"sign+ef", "sign:bucket=96", "quant:bits=4", "quant:bits=8+ef",
                                "quant:bits=1,bucket=128", "quant:bits=4,round=stochastic",
                                "sign+ef:dtype=bf16", "quant:bits=4+zstd", "bf16", "none",
                                "topk:ratio=0.01+ef"};
  static const int counts[] = {1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0};
  enum { COUNT = 20011 };
  float *x = malloc(COUNT * sizeof *x), *want = malloc(COUNT * sizeof *want);
  float *got = malloc(COUNT * sizeof *got);
  assert_non_null(x), assert_non_null(want), assert_non_null(got);
  for (int bad = 0; bad < 3; bad++) {   /* none; a NaN and an Inf; many in a few buckets */
    for (size_t i = 0; i < COUNT; i++) x[i] = value() * (i % 7 == 0 ? 0.0f : 1.0f);
    if (bad) x[3] = NAN, x[COUNT - 1] = -INFINITY;
    for (size_t i = 0; bad == 2 && i < 40; i++) x[9000 + 3 * i] = i % 2 ? INFINITY : -NAN;
    for (size_t s = 0; s < sizeof specs / sizeof *specs; s++) {
      gcomp_codec *c = NULL;
      size_t len;
      uint8_t *frame = encoded(specs[s], x, COUNT, &c, &len, want);
      uint64_t there = 0;
      for (size_t i = 0; i < COUNT; i++) there += !isfinite(want[i]);
      for (int stream = 0; stream < 2; stream++) {
        uint64_t tally = 12345;
        assert_int_equal(gcomp_decode_tally(c, frame, len, got, COUNT, stream, &tally),
                         GCOMP_OK);
        if (memcmp(got, want, COUNT * sizeof *got))
          fail_msg("%s: gcomp_decode_tally's values differ", specs[s]);
        uint64_t expect = counts[s] ? there : UINT64_MAX;
        if (tally != expect)
          fail_msg("%s (%d bad, stream %d): tally %llu, expected %llu", specs[s], bad, stream,
                   (unsigned long long)tally, (unsigned long long)expect);
      }
      assert_true(bad == 0 || there > 0);
      free(frame);
      gcomp_codec_destroy(c);
    }
  }
  free(x), free(want), free(got);
}

/* A quant frame whose grid ends past FLT_MAX (a finite min and step, as the decoder checks,
 * made by hand: no encoder writes one) decodes to Inf where the codes reach the top, and
 * leaves the tally unknown rather than 0. */
static void test_tally_unknown_past_flt_max(void **state) {
  gcomp_codec *c = NULL;
  assert_int_equal(gcomp_codec_create("quant:bits=1,bucket=32", &c), GCOMP_OK);
  float x[32], out[32], want[32];
  for (int i = 0; i < 32; i++) x[i] = (float)(i % 2);
  size_t cap = gcomp_codec_max_encoded_size(c, 32), len;
  uint8_t *frame = malloc(cap);
  assert_int_equal(gcomp_encode(c, 1, x, 32, frame, cap, &len), GCOMP_OK);
  gcomp_frame_info info;
  assert_int_equal(gcomp_frame_open(frame, len, &info), GCOMP_OK);
  assert_int_equal(info.payload_len, 12);   /* min, step, 32 one-bit codes */
  uint8_t *p = frame + GCOMP_FRAME_HEADER;
  const float mn = 2e38f, step = 2e38f;
  memcpy(p, &mn, 4), memcpy(p + 4, &step, 4);   /* little-endian hosts, as the tests are */
  gcomp_frame_seal(frame, &info);
  assert_int_equal(gcomp_decode(c, frame, len, want, 32), GCOMP_OK);
  assert_true(want[0] == 2e38f && isinf(want[1]));
  for (int stream = 0; stream < 2; stream++) {
    uint64_t tally = 0;
    assert_int_equal(gcomp_decode_tally(c, frame, len, out, 32, stream, &tally), GCOMP_OK);
    assert_memory_equal(out, want, sizeof out);
    assert_true(tally == UINT64_MAX);
  }
  free(frame);
  gcomp_codec_destroy(c);
}

static void test_refused_codecs(void **state) {
  static const char *specs[] = {"bf16", "none", "topk:ratio=0.01+ef", "sign+ef:dtype=bf16",
                                "quant:bits=4,round=stochastic", "quant:bits=4+zstd"};
  uint8_t frame[4096];
  for (size_t s = 0; s < sizeof specs / sizeof *specs; s++) {
    gcomp_codec *c = NULL;
    assert_int_equal(gcomp_codec_create(specs[s], &c), GCOMP_OK);
    assert_int_equal(gcomp_codec_part_values(c), 0);
    assert_int_equal(gcomp_encode_sum_begin(c, 1, 10, frame, sizeof frame), GCOMP_ERR_UNSUPPORTED);
    if (!strstr(gcomp_last_error(), "cannot be encoded in parts"))
      fail_msg("%s: '%s'", specs[s], gcomp_last_error());
    gcomp_dec_parts d;
    assert_int_equal(gcomp_decode_parts_begin(c, frame, sizeof frame, 10, &d),
                     GCOMP_ERR_UNSUPPORTED);
    gcomp_codec_destroy(c);
  }
}

static void test_misuse_is_an_error(void **state) {
  gcomp_codec *c = NULL;
  assert_int_equal(gcomp_codec_create("sign+ef", &c), GCOMP_OK);
  float v[100] = {1.0f};
  const float *p[2] = {v, v};
  size_t cap = gcomp_codec_max_encoded_size(c, 100), len;
  uint8_t *frame = malloc(cap);
  assert_int_equal(gcomp_encode_sum_part(c, p, 2, 10), GCOMP_ERR_INVALID);   /* not begun */
  assert_int_equal(gcomp_encode_sum_end(c, &len), GCOMP_ERR_INVALID);
  assert_int_equal(gcomp_encode_sum_begin(c, 1, 100, frame, cap - 1), GCOMP_ERR_NOMEM);
  assert_int_equal(gcomp_encode_sum_begin(c, 1, 100, frame, cap), GCOMP_OK);
  assert_int_equal(gcomp_encode_sum_part(c, p, 2, 60), GCOMP_OK);
  assert_int_equal(gcomp_encode_sum_part(c, p, 2, 41), GCOMP_ERR_INVALID);   /* past count */
  assert_int_equal(gcomp_encode_sum_part(c, p, 0, 1), GCOMP_ERR_INVALID);    /* no operand */
  assert_int_equal(gcomp_encode_sum_end(c, &len), GCOMP_ERR_INVALID);        /* 60 of 100 */
  assert_non_null(strstr(gcomp_last_error(), "60 of 100"));
  assert_int_equal(gcomp_encode_sum_part(c, p, 2, 40), GCOMP_OK);
  assert_int_equal(gcomp_encode_sum_end(c, &len), GCOMP_OK);
  assert_int_equal(gcomp_encode_sum_end(c, &len), GCOMP_ERR_INVALID);        /* ended */
  /* the same key with another length is the residual store's error, as for gcomp_encode */
  assert_int_equal(gcomp_encode_sum_begin(c, 1, 99, frame, cap), GCOMP_ERR_INVALID);
  /* decoding: parts of whole buckets (512) but the last, no more than the frame holds */
  float out[100];
  gcomp_dec_parts d;
  assert_int_equal(gcomp_decode_parts_begin(c, frame, len, 100, &d), GCOMP_OK);
  assert_int_equal(gcomp_decode_parts_end(&d), GCOMP_ERR_INVALID);        /* 0 of 100 */
  assert_int_equal(gcomp_decode_part(&d, out, 99, 0), GCOMP_ERR_INVALID);  /* not a bucket */
  assert_int_equal(gcomp_decode_part(&d, out, 101, 0), GCOMP_ERR_INVALID);
  assert_int_equal(gcomp_decode_part(&d, out, 100, 0), GCOMP_OK);
  assert_int_equal(gcomp_decode_parts_end(&d), GCOMP_OK);
  free(frame);
  gcomp_codec_destroy(c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_parts_give_the_whole_frame),
      cmocka_unit_test(test_parts_nonfinite),
      cmocka_unit_test(test_damage_is_refused),
      cmocka_unit_test(test_other_parameter_is_refused),
      cmocka_unit_test(test_stream_decode_is_decode),
      cmocka_unit_test(test_tally_counts_nonfinite),
      cmocka_unit_test(test_tally_unknown_past_flt_max),
      cmocka_unit_test(test_refused_codecs),
      cmocka_unit_test(test_misuse_is_an_error),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
