/* Lossless stages: the byte-plane kernels (every ISA variant against the portable twin),
 * the zstd and igzip stages in both plane modes, through frames, and their refusal of
 * damaged staged payloads. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "frame.h"
#include "gcomp.h"
#include "lossless.h"
#include "spec.h"

static uint64_t rng = 0x243f6a8885a308d3ull;
static uint64_t next_u64(void) {
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return rng;
}

/* Gaussian-ish gradient values (sum of uniforms), sigma about 1e-3. */
static void fill_gradient(float *g, size_t n) {
  for (size_t i = 0; i < n; i++) {
    double s = 0;
    for (int j = 0; j < 4; j++) s += (double)(next_u64() >> 11) / 9007199254740992.0 - 0.5;
    g[i] = (float)(s * 1.7e-3);
  }
}

/* A buffer of `len` bytes that ends exactly at an inaccessible page. */
typedef struct {
  uint8_t *map;
  size_t map_len;
  uint8_t *p;
} guarded;

static guarded guard_alloc(size_t len) {
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  size_t data_pages = (len + page - 1) / page;
  guarded g;
  g.map_len = (data_pages + 1) * page;
  g.map = mmap(NULL, g.map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  assert_true(g.map != MAP_FAILED);
  assert_int_equal(mprotect(g.map + data_pages * page, page, PROT_NONE), 0);
  g.p = g.map + data_pages * page - len;
  return g;
}
static void guard_free(guarded g) { munmap(g.map, g.map_len); }

static int have_avx2(void) { return (gcomp_cpu_detect() & GCOMP_CPU_AVX2) != 0; }

/* Splits with kernel set k, and with the base twin, and compares; then joins back. The
 * input and each plane end at a guard page, so an over-read or over-write faults. */
static void check_kernels(const gcomp_shuffle_kernels *k, size_t elems, unsigned width,
                          size_t misalign) {
  size_t n = elems * width;
  guarded in = guard_alloc(n + misalign);
  uint8_t *src = in.p + misalign;
  for (size_t i = 0; i < n; i++) src[i] = (uint8_t)next_u64();
  /* input ends at the guard: place it so when misaligned */
  guarded pl[8], ref[8];
  uint8_t *planes[8], *refp[8];
  for (unsigned b = 0; b < width; b++) {
    pl[b] = guard_alloc(elems + misalign);
    ref[b] = guard_alloc(elems);
    planes[b] = pl[b].p + misalign;
    refp[b] = ref[b].p;
  }
  k->split(src, elems, width, planes);
  gcomp_split_planes_base(src, elems, width, refp);
  for (unsigned b = 0; b < width; b++) {
    if (memcmp(planes[b], refp[b], elems) != 0)
      fail_msg("%s split: width %u, %zu elements, misalign %zu: plane %u differs", k->name, width,
               elems, misalign, b);
    for (size_t i = 0; i < elems; i++)
      if (refp[b][i] != src[i * width + b]) fail_msg("base split wrong at %zu", i);
  }
  guarded out = guard_alloc(n + misalign);
  uint8_t *dst = out.p + misalign;
  const uint8_t *cplanes[8];
  for (unsigned b = 0; b < width; b++) cplanes[b] = planes[b];
  k->join(cplanes, elems, width, dst);
  if (memcmp(dst, src, n) != 0)
    fail_msg("%s join: width %u, %zu elements, misalign %zu: not the input", k->name, width,
             elems, misalign);
  guard_free(out);
  for (unsigned b = 0; b < width; b++) guard_free(pl[b]), guard_free(ref[b]);
  guard_free(in);
}

static void test_shuffle_kernels_match_base(void **state) {
  const gcomp_shuffle_kernels *sets[2] = {&gcomp_shuffle_kernels_base, NULL};
  if (have_avx2()) sets[1] = &gcomp_shuffle_kernels_avx2;
  else print_message("no AVX2 on this CPU: only the portable kernels are tested\n");
  const size_t lens[] = {0, 1, 2, 3, 7, 31, 32, 33, 63, 64, 65, 95, 127, 129, 1000, 4097, 65541};
  const unsigned widths[] = {1, 2, 3, 4, 8};
  for (int s = 0; s < 2 && sets[s]; s++)
    for (size_t w = 0; w < sizeof widths / sizeof *widths; w++)
      for (size_t l = 0; l < sizeof lens / sizeof *lens; l++)
        for (size_t mis = 0; mis < 4; mis += (widths[w] == 2 || widths[w] == 4) ? 1 : 3)
          check_kernels(sets[s], lens[l], widths[w], mis);
}

/* gcomp_shuffle/gcomp_unshuffle with a tail that is not a whole element. */
static void test_shuffle_tail(void **state) {
  for (unsigned w = 1; w <= 8; w++)
    for (size_t n = 0; n < 300; n += 7) {
      uint8_t in[300], sh[300], back[300];
      for (size_t i = 0; i < n; i++) in[i] = (uint8_t)(i * 37 + w);
      gcomp_shuffle(in, n, w, sh);
      size_t elems = w > 1 ? n / w : n;
      if (w > 1) {
        for (size_t i = 0; i < elems; i++) assert_int_equal(sh[elems + i], in[i * w + 1]);
        for (size_t i = elems * w; i < n; i++) assert_int_equal(sh[i], in[i]);
      }
      gcomp_unshuffle(sh, n, w, back);
      assert_memory_equal(back, in, n);
    }
}

static int round_trip(const char *spec, const float *g, size_t n, uint8_t *frame_out,
                      size_t *len_out) {
  gcomp_codec *c;
  assert_int_equal(gcomp_codec_create(spec, &c), GCOMP_OK);
  size_t cap = gcomp_codec_max_encoded_size(c, n), len = 0;
  uint8_t *frame = malloc(cap);
  assert_int_equal(gcomp_encode(c, 3, g, n, frame, cap, &len), GCOMP_OK);
  assert_true(len <= cap);
  float *out = malloc((n ? n : 1) * sizeof *out);
  if (gcomp_decode(c, frame, len, out, n) != GCOMP_OK)
    fail_msg("%s, %zu values: %s", spec, n, gcomp_last_error());
  assert_memory_equal(out, g, n * sizeof *g);
  for (size_t i = 0; i < n; i++) out[i] = 0.5f;
  assert_int_equal(gcomp_decode_add(c, frame, len, out, n), GCOMP_OK);
  for (size_t i = 0; i < n; i++)
    if (out[i] != 0.5f + g[i]) fail_msg("%s: decode_add wrong at %zu", spec, i);
  int stage = frame[6];
  if (frame_out) memcpy(frame_out, frame, len), *len_out = len;
  free(out);
  free(frame);
  gcomp_codec_destroy(c);
  return stage;
}

static const char *const staged_specs[] = {
    "none+zstd", "none+zstd:planes=all", "none+zstd:level=3,planes=exp",
    "none+igzip", "none+igzip:level=0", "none+igzip:level=2,planes=all",
    "none+igzip:level=3", "none+ef+zstd:planes=exp", "none+ef+igzip:planes=all"};
enum { NSTAGED = sizeof staged_specs / sizeof *staged_specs };

static void test_stages_round_trip(void **state) {
  const size_t sizes[] = {0, 1, 2, 5, 511, 512, 513, 4099, 100003};
  float *g = malloc(100003 * sizeof *g);
  for (size_t s = 0; s < NSTAGED; s++)
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
      fill_gradient(g, sizes[i]);
      round_trip(staged_specs[s], g, sizes[i], NULL, NULL);
      /* a compressible pattern, so the staged path (not the raw fallback) is exercised */
      for (size_t j = 0; j < sizes[i]; j++) g[j] = (float)(j % 5) * 0.25f;
      round_trip(staged_specs[s], g, sizes[i], NULL, NULL);
    }
  free(g);
}

/* Exponent-plane mode: on gradients the frame says F_PLANES and is about as small as
 * the whole-payload mode; on zeros the low planes are not random, so the frame goes
 * whole and shrinks far more. */
static void test_planes_mode_choice(void **state) {
  size_t n = 1 << 16;
  float *g = malloc(n * sizeof *g);
  uint8_t *f = malloc(n * 4 + 64);
  size_t exp_len, all_len;
  fill_gradient(g, n);
  const char *stages[] = {"zstd", "igzip"};
  for (int s = 0; s < 2; s++) {
    char spec_exp[64], spec_all[64];
    snprintf(spec_exp, sizeof spec_exp, "none+%s:planes=exp", stages[s]);
    snprintf(spec_all, sizeof spec_all, "none+%s:planes=all", stages[s]);
    assert_int_not_equal(round_trip(spec_exp, g, n, f, &exp_len), GCOMP_STAGE_NONE);
    assert_int_equal(f[7] & (GCOMP_FRAME_F_PLANES | GCOMP_FRAME_F_SHUFFLED),
                     GCOMP_FRAME_F_PLANES | GCOMP_FRAME_F_SHUFFLED);
    assert_int_not_equal(round_trip(spec_all, g, n, f, &all_len), GCOMP_STAGE_NONE);
    assert_int_equal(f[7] & (GCOMP_FRAME_F_PLANES | GCOMP_FRAME_F_SHUFFLED),
                     GCOMP_FRAME_F_SHUFFLED);
    /* both shrink the gradient; the exponent plane carries (nearly) all of the gain */
    assert_true(all_len < n * 4 * 0.92);
    assert_true(exp_len < n * 4 * 0.92);
    assert_true((double)exp_len < (double)all_len * 1.02);
  }
  memset(g, 0, n * sizeof *g);
  assert_int_equal(round_trip("none+zstd:planes=exp", g, n, f, &exp_len), GCOMP_STAGE_ZSTD);
  assert_int_equal(f[7] & GCOMP_FRAME_F_PLANES, 0);
  assert_true(exp_len < n * 4 / 100);
  /* a sorted index stream (1% of 32M positions): byte 0 is random, but bytes 1 and 2
   * change slowly from one index to the next, so the stream goes whole, and compresses
   * far better than exponent-plane mode could (which would leave those planes raw) */
  uint32_t *idx = (uint32_t *)g;
  uint32_t pos = 0;
  for (size_t i = 0; i < n; i++) pos += 1 + (uint32_t)(next_u64() % 199), idx[i] = pos;
  const gcomp_stage *z = gcomp_stage_find("zstd");
  gcomp_stage_cfg cfg;
  z->defaults(&cfg);
  uint8_t sflags;
  assert_int_equal(gcomp_stage_encode(z, &cfg, 4, (const uint8_t *)idx, n * 4, f, n * 4, &exp_len,
                                      &sflags),
                   GCOMP_OK);
  assert_int_equal(sflags, GCOMP_FRAME_F_SHUFFLED);
  assert_true(exp_len < n * 4 / 2);
  /* and random 32-bit words do go through exponent-plane mode (and then do not shrink) */
  for (size_t i = 0; i < n; i++) idx[i] = (uint32_t)next_u64();
  assert_int_equal(gcomp_stage_encode(z, &cfg, 4, (const uint8_t *)idx, n * 4, f, n * 4 - 1,
                                      &exp_len, &sflags),
                   GCOMP_ERR_NOMEM);
  free(f);
  free(g);
}

/* A decoder is not bound to the encoder's plane mode: the frame says which. */
static void test_planes_mode_is_in_the_frame(void **state) {
  size_t n = 4096, len = 0;
  float *g = malloc(n * sizeof *g), *out = malloc(n * sizeof *out);
  uint8_t *f = malloc(n * 4 + 64);
  fill_gradient(g, n);
  round_trip("none+zstd:planes=exp", g, n, f, &len);
  gcomp_codec *all;
  assert_int_equal(gcomp_codec_create("none+zstd:planes=all,level=7", &all), GCOMP_OK);
  assert_int_equal(gcomp_decode(all, f, len, out, n), GCOMP_OK);
  assert_memory_equal(out, g, n * 4);
  /* but a frame of another stage is refused */
  gcomp_codec *gz;
  assert_int_equal(gcomp_codec_create("none+igzip", &gz), GCOMP_OK);
  assert_int_equal(gcomp_decode(gz, f, len, out, n), GCOMP_ERR_CORRUPT);
  assert_non_null(strstr(gcomp_last_error(), "this codec uses igzip"));
  gcomp_codec_destroy(all);
  gcomp_codec_destroy(gz);
  free(f);
  free(out);
  free(g);
}

/* Staged payloads that are internally inconsistent but carry a valid CRC (as a buggy or
 * hostile writer would make them) are refused by the stage, not read out of bounds. */
/* Seals frame anew around a payload of plen bytes (the block checksums follow it); returns
 * the frame's length. */
static size_t reseal(uint8_t *frame, uint64_t plen) {
  gcomp_frame_info info = {.kind = frame[5], .stage = frame[6], .flags = frame[7],
                           .count = gcomp_load_le64(frame + 8), .payload_len = plen,
                           .param = gcomp_load_le32(frame + 24)};
  gcomp_frame_seal(frame, &info);
  return (size_t)gcomp_frame_size(plen);
}

static void test_staged_payload_lies_refused(void **state) {
  size_t n = 2048, len = 0;
  float *g = malloc(n * sizeof *g), *out = malloc(n * sizeof *out);
  uint8_t *f = malloc(n * 4 + 64), *bad = malloc(n * 4 + 64);
  fill_gradient(g, n);
  for (size_t s = 0; s < NSTAGED; s++) {
    if (round_trip(staged_specs[s], g, n, f, &len) == GCOMP_STAGE_NONE) continue;
    gcomp_codec *c;
    assert_int_equal(gcomp_codec_create(staged_specs[s], &c), GCOMP_OK);
    uint64_t plen = gcomp_load_le64(f + 16);
    const uint64_t lies[] = {0, 1, n * 4 - 1, n * 4 + 1, n * 4 + 4, UINT64_MAX, 1ull << 40};
    for (size_t l = 0; l < sizeof lies / sizeof *lies; l++) {   /* raw length */
      memcpy(bad, f, len);
      gcomp_store_le64(bad + GCOMP_FRAME_HEADER, lies[l]);
      reseal(bad, plen);
      if (gcomp_decode(c, bad, len, out, n) != GCOMP_ERR_CORRUPT)
        fail_msg("%s: raw length %llu accepted", staged_specs[s], (unsigned long long)lies[l]);
    }
    for (uint8_t fl = 0; fl < 8; fl++) {   /* every combination of the stage's flag bits */
      if ((fl & (GCOMP_FRAME_F_SHUFFLED | GCOMP_FRAME_F_PLANES)) ==
          (f[7] & (GCOMP_FRAME_F_SHUFFLED | GCOMP_FRAME_F_PLANES)))
        continue;
      memcpy(bad, f, len);
      bad[7] = (uint8_t)((f[7] & GCOMP_FRAME_F_EF) | (fl & ~GCOMP_FRAME_F_EF));
      reseal(bad, plen);
      int st = gcomp_decode(c, bad, len, out, n);
      /* a flag change may still decode (e.g. unshuffled vs shuffled bytes), but never
       * into the original values, and never out of bounds */
      if (st == GCOMP_OK) assert_true(memcmp(out, g, n * 4) != 0);
      else assert_int_equal(st, GCOMP_ERR_CORRUPT);
    }
    for (size_t cut = 1; cut < plen; cut += 1 + cut / 3) {   /* truncation */
      memcpy(bad, f, GCOMP_FRAME_HEADER + plen - cut);
      size_t blen = reseal(bad, plen - cut);
      assert_int_equal(gcomp_decode(c, bad, blen, out, n), GCOMP_ERR_CORRUPT);
    }
    /* bytes after the end of the compressed stream: zstd refused them, igzip did not */
    assert_true(gcomp_frame_size(plen + 8) <= n * 4 + 64);
    memcpy(bad, f, GCOMP_FRAME_HEADER + plen);
    memcpy(bad + GCOMP_FRAME_HEADER + plen, "JUNKJUNK", 8);
    size_t blen = reseal(bad, plen + 8);
    if (gcomp_decode(c, bad, blen, out, n) != GCOMP_ERR_CORRUPT)
      fail_msg("%s: 8 bytes after the stream accepted", staged_specs[s]);
    for (size_t i = 8; i < plen; i += 1 + i / 5) {   /* garbled body */
      memcpy(bad, f, len);
      bad[GCOMP_FRAME_HEADER + i] ^= 0x5a;
      reseal(bad, plen);
      int st = gcomp_decode(c, bad, len, out, n);
      /* a byte in a raw plane changes one value; a byte in compressed data is an error
       * or changes values: never silently the original */
      if (st == GCOMP_OK) assert_true(memcmp(out, g, n * 4) != 0);
      else assert_int_equal(st, GCOMP_ERR_CORRUPT);
    }
    gcomp_codec_destroy(c);
  }
  free(bad);
  free(f);
  free(out);
  free(g);
}

/* The stage layer directly: exact lengths in, exact lengths out. */
static void test_stage_api_edges(void **state) {
  const gcomp_stage *z = gcomp_stage_find("zstd"), *gz = gcomp_stage_find("igzip");
  assert_non_null(z);
  assert_non_null(gz);
  assert_ptr_equal(gcomp_stage_by_id(GCOMP_STAGE_IGZIP), gz);
  assert_null(gcomp_stage_by_id(0));
  assert_null(gcomp_stage_by_id(99));
  assert_null(gcomp_stage_find("lz4"));
  gcomp_stage_cfg cfg;
  uint8_t raw[1000], out[2000], flags;
  size_t len;
  memset(raw, 7, sizeof raw);
  const gcomp_stage *both[] = {z, gz};
  for (int s = 0; s < 2; s++) {
    both[s]->defaults(&cfg);
    /* nothing to gain on an empty payload, or with no room */
    assert_int_equal(gcomp_stage_encode(both[s], &cfg, 4, raw, 0, out, sizeof out, &len, &flags),
                     GCOMP_ERR_NOMEM);
    assert_int_equal(gcomp_stage_encode(both[s], &cfg, 4, raw, 1000, out, 8, &len, &flags),
                     GCOMP_ERR_NOMEM);
    assert_int_equal(gcomp_stage_encode(both[s], &cfg, 4, raw, 1000, out, 12, &len, &flags),
                     GCOMP_ERR_NOMEM);
    /* width 0 (no element structure): not shuffled */
    assert_int_equal(gcomp_stage_encode(both[s], &cfg, 0, raw, 1000, out, sizeof out, &len, &flags),
                     GCOMP_OK);
    assert_int_equal(flags, 0);
    const uint8_t *back;
    size_t back_len;
    assert_int_equal(gcomp_stage_decode(both[s], flags, 0, out, len, 1000, &back, &back_len),
                     GCOMP_OK);
    assert_int_equal(back_len, 1000);
    assert_memory_equal(back, raw, 1000);
    /* the caller's bound on the raw size is enforced */
    assert_int_equal(gcomp_stage_decode(both[s], flags, 0, out, len, 999, &back, &back_len),
                     GCOMP_ERR_CORRUPT);
    /* shuffled with no element width is a lie */
    assert_int_equal(gcomp_stage_decode(both[s], GCOMP_FRAME_F_SHUFFLED, 0, out, len, 1000, &back,
                                        &back_len),
                     GCOMP_ERR_CORRUPT);
    assert_int_equal(gcomp_stage_decode(both[s], 0, 0, out, 7, 1000, &back, &back_len),
                     GCOMP_ERR_CORRUPT);
  }
}

/* Decoding is thread-safe for one codec: the stage's buffers are per thread. Threads
 * decode different frames through one codec at once; each thread's buffers are freed
 * when it exits (LeakSanitizer would report them otherwise). */
typedef struct {
  const gcomp_codec *c;
  const uint8_t *frame;
  size_t len, n;
  const float *want;
  int bad;
} decode_job;

static void *decode_thread(void *arg) {
  decode_job *j = arg;
  float *out = malloc(j->n * sizeof *out);
  for (int rep = 0; rep < 50 && out; rep++) {
    if (gcomp_decode(j->c, j->frame, j->len, out, j->n) != GCOMP_OK ||
        memcmp(out, j->want, j->n * sizeof *out) != 0)
      j->bad++;
  }
  free(out);
  return NULL;
}

static void test_concurrent_decode(void **state) {
  enum { T = 4 };
  const char *specs[] = {"none+zstd", "none+igzip:planes=all"};
  for (int s = 0; s < 2; s++) {
    gcomp_codec *c;
    assert_int_equal(gcomp_codec_create(specs[s], &c), GCOMP_OK);
    decode_job jobs[T];
    pthread_t th[T];
    for (int t = 0; t < T; t++) {
      size_t n = 3000 + 1000 * (size_t)t;
      float *g = malloc(n * sizeof *g);
      fill_gradient(g, n);
      size_t cap = gcomp_codec_max_encoded_size(c, n);
      uint8_t *f = malloc(cap);
      size_t len;
      assert_int_equal(gcomp_encode(c, (uint64_t)t, g, n, f, cap, &len), GCOMP_OK);
      assert_int_not_equal(f[6], GCOMP_STAGE_NONE);
      jobs[t] = (decode_job){c, f, len, n, g, 0};
    }
    for (int t = 0; t < T; t++) assert_int_equal(pthread_create(&th[t], NULL, decode_thread, &jobs[t]), 0);
    for (int t = 0; t < T; t++) {
      pthread_join(th[t], NULL);
      assert_int_equal(jobs[t].bad, 0);
      free((void *)jobs[t].frame);
      free((void *)jobs[t].want);
    }
    gcomp_codec_destroy(c);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_shuffle_kernels_match_base),
      cmocka_unit_test(test_shuffle_tail),
      cmocka_unit_test(test_stages_round_trip),
      cmocka_unit_test(test_planes_mode_choice),
      cmocka_unit_test(test_planes_mode_is_in_the_frame),
      cmocka_unit_test(test_staged_payload_lies_refused),
      cmocka_unit_test(test_stage_api_edges),
      cmocka_unit_test(test_concurrent_decode),
  };
  return cmocka_run_group_tests_name("lossless", tests, NULL, NULL);
}
