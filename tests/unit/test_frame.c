/* The wire frame: its exact byte layout (version 2; version 1 refused), the CRC-32C
 * and the per-block checksums, and refusal of every kind of damage (bit flips, truncation,
 * lying lengths, unknown versions and flags) for every pipeline. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "frame.h"
#include "gcomp.h"

/* The standard CRC-32C check value (RFC 3720 B.4 test vectors). */
static void test_crc32c_known_answers(void **state) {
  const char *digits = "123456789";
  assert_int_equal(~gcomp_crc32c(0xffffffffu, digits, 9), 0xe3069283u);
  uint8_t zeros[32] = {0}, ones[32];
  memset(ones, 0xff, sizeof ones);
  assert_int_equal(~gcomp_crc32c(0xffffffffu, zeros, 32), 0x8a9136aau);
  assert_int_equal(~gcomp_crc32c(0xffffffffu, ones, 32), 0x62a8ab43u);
  /* chaining: the frame's CRC runs over the header, then the payload */
  for (size_t cut = 0; cut <= 9; cut++)
    assert_int_equal(gcomp_crc32c(gcomp_crc32c(0xffffffffu, digits, cut), digits + cut, 9 - cut),
                     gcomp_crc32c(0xffffffffu, digits, 9));
  assert_int_equal(gcomp_crc32c(0x1234u, NULL, 0), 0x1234u);
}

static void expect_corrupt(const uint8_t *f, size_t len, const char *fragment) {
  gcomp_frame_info info;
  int s = gcomp_frame_open(f, len, &info);
  if (s != GCOMP_ERR_CORRUPT) fail_msg("status %d, expected GCOMP_ERR_CORRUPT (%s)", s, fragment);
  if (!strstr(gcomp_last_error(), fragment))
    fail_msg("error '%s' lacks '%s'", gcomp_last_error(), fragment);
}

/* docs/wire-format.md, byte for byte: version 2 (what gcomp writes). */
static void test_header_layout(void **state) {
  uint8_t f[GCOMP_FRAME_HEADER + 3 + 4] = {0};
  f[32] = 0xaa, f[33] = 0xbb, f[34] = 0xcc;
  gcomp_frame_info info = {.kind = 2, .stage = 1, .flags = 0x05, .count = 0x0102030405060708ull,
                           .payload_len = 3, .param = 0xdeadbeefu};
  gcomp_frame_seal(f, &info);
  const uint8_t want[28] = {'G', 'C', 'M', 'P', 2, 2, 1, 0x05,
                            0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01,
                            3, 0, 0, 0, 0, 0, 0, 0,
                            0xef, 0xbe, 0xad, 0xde};
  assert_memory_equal(f, want, 28);
  /* one block: its entry is the standard CRC-32C of the payload, after the payload */
  uint32_t block = ~gcomp_crc32c(0xffffffffu, f + 32, 3);
  assert_int_equal(gcomp_load_le32(f + 35), block);
  /* the CRC field: standard CRC-32C of bytes 0..27 then the block checksums */
  uint8_t cat[32];
  memcpy(cat, f, 28);
  memcpy(cat + 28, f + 35, 4);
  uint32_t crc = ~gcomp_crc32c(0xffffffffu, cat, 32);
  assert_int_equal(gcomp_load_le32(f + 28), crc);
  assert_int_equal(f[28], crc & 0xff);
  gcomp_frame_info got;
  assert_int_equal(gcomp_frame_open(f, sizeof f, &got), GCOMP_OK);
  assert_int_equal(got.version, 2);
  assert_int_equal(got.kind, 2);
  assert_int_equal(got.stage, 1);
  assert_int_equal(got.flags, 0x05);
  assert_true(got.count == 0x0102030405060708ull);
  assert_int_equal(got.payload_len, 3);
  assert_int_equal(got.param, 0xdeadbeefu);
  /* sizes: no checksum for an empty payload, one per started 64 KiB block */
  assert_int_equal(gcomp_frame_size(0), 32);
  assert_int_equal(gcomp_frame_size(1), 37);
  assert_int_equal(gcomp_frame_size(65536), 32 + 65536 + 4);
  assert_int_equal(gcomp_frame_size(65537), 32 + 65537 + 8);
  /* the example of docs/wire-format.md, as gcomp_encode writes it */
  const uint8_t doc[44] = {0x47, 0x43, 0x4d, 0x50, 0x02, 0x01, 0x00, 0x00, 0x02, 0, 0, 0, 0, 0,
                           0, 0, 0x08, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xac, 0xa4, 0x1a, 0x1e,
                           0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0xc0, 0xc9, 0xf2, 0x36, 0xaa};
  gcomp_codec *c;
  assert_int_equal(gcomp_codec_create("none", &c), GCOMP_OK);
  const float two[2] = {1.0f, -2.0f};
  uint8_t out[64];
  size_t len;
  assert_int_equal(gcomp_encode(c, 0, two, 2, out, sizeof out, &len), GCOMP_OK);
  assert_int_equal(len, sizeof doc);
  assert_memory_equal(out, doc, sizeof doc);
  gcomp_codec_destroy(c);
}

/* Version 1 frames (one CRC over header and payload, no block checksums), written only by
 * development builds before version 2, are refused like any version this build does not
 * read, naming it: the example of docs/wire-format.md as those builds wrote it. */
static void test_version1_refused(void **state) {
  const uint8_t v1[40] = {0x47, 0x43, 0x4d, 0x50, 0x01, 0x01, 0x00, 0x00, 0x02, 0, 0, 0, 0, 0,
                          0, 0, 0x08, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xc1, 0xaf, 0x69, 0xda,
                          0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0xc0};
  expect_corrupt(v1, sizeof v1, "frame format version 1 is not supported (this build reads "
                                "version 2)");
  gcomp_codec *c;
  assert_int_equal(gcomp_codec_create("none", &c), GCOMP_OK);
  float out[2] = {10, 20};
  assert_int_equal(gcomp_decode_add(c, v1, sizeof v1, out, 2), GCOMP_ERR_CORRUPT);
  assert_true(out[0] == 10.0f && out[1] == 20.0f);
  gcomp_codec_destroy(c);
}

static void test_header_damage_refused(void **state) {
  enum { P = 16, LEN = GCOMP_FRAME_HEADER + P + 4 };
  uint8_t f[LEN], bad[LEN + 8];
  for (int i = 0; i < P; i++) f[GCOMP_FRAME_HEADER + i] = (uint8_t)(i * 11);
  gcomp_frame_info info = {.kind = 1, .count = 4, .payload_len = P};
  gcomp_frame_seal(f, &info);
  gcomp_frame_info out;
  assert_int_equal(gcomp_frame_open(f, sizeof f, &out), GCOMP_OK);
  /* every single-bit flip: header, payload or block checksum */
  for (size_t bit = 0; bit < sizeof f * 8; bit++) {
    memcpy(bad, f, sizeof f);
    bad[bit / 8] ^= (uint8_t)(1u << (bit % 8));
    assert_int_equal(gcomp_frame_open(bad, sizeof f, &out), GCOMP_ERR_CORRUPT);
  }
  /* every truncation, and a NULL frame */
  for (size_t cut = 0; cut < GCOMP_FRAME_HEADER; cut++)
    expect_corrupt(f, cut, "shorter than its 32-byte header");
  for (size_t cut = GCOMP_FRAME_HEADER; cut < sizeof f; cut++)
    expect_corrupt(f, cut, "payload bytes but");
  expect_corrupt(NULL, 0, "shorter than its 32-byte header");
  assert_int_equal(gcomp_frame_open(NULL, 40, &out), GCOMP_ERR_INVALID);
  /* trailing bytes */
  memcpy(bad, f, sizeof f);
  expect_corrupt(bad, sizeof f + 1, "frame says 16 payload bytes but 21 bytes follow the header");
  /* lying payload lengths, huge ones included: refused before anything is read (20 bytes
   * after the header hold exactly a 16-byte payload and its checksum) */
  const uint64_t lies[] = {0, 15, 17, 20, 1ull << 32, UINT64_MAX, UINT64_MAX - 31};
  for (size_t i = 0; i < sizeof lies / sizeof *lies; i++) {
    memcpy(bad, f, sizeof f);
    gcomp_store_le64(bad + 16, lies[i]);
    expect_corrupt(bad, sizeof f, "payload bytes but 20 bytes follow");
  }
  memcpy(bad, f, sizeof f);
  bad[0] = 'X';
  expect_corrupt(bad, sizeof f, "bad magic 58434d50");
  for (unsigned v = 0; v < 256; v += v == 1 ? 2 : 1) {   /* every version but 2 */
    memcpy(bad, f, sizeof f);
    bad[4] = (uint8_t)v;
    char msg[96];
    snprintf(msg, sizeof msg, "version %u is not supported (this build reads version 2)", v);
    expect_corrupt(bad, sizeof f, msg);
  }
  memcpy(bad, f, sizeof f);
  bad[30] ^= 1;
  expect_corrupt(bad, sizeof f, "frame checksum mismatch");
  memcpy(bad, f, sizeof f);
  bad[GCOMP_FRAME_HEADER + 5] ^= 0x10;
  expect_corrupt(bad, sizeof f, "frame block 0 (payload bytes 0..15) checksum mismatch");
}

/* A payload of several blocks: each has its own checksum, a damaged one is named, and a
 * decoder that verifies lazily meets the damage only when it reaches that block. */
static void test_blocks_verified_one_by_one(void **state) {
  enum { P = 3 * GCOMP_FRAME_BLOCK + 100 };
  size_t len = (size_t)gcomp_frame_size(P);
  assert_int_equal(len, GCOMP_FRAME_HEADER + P + 16);
  uint8_t *f = malloc(len);
  for (size_t i = 0; i < P; i++) f[GCOMP_FRAME_HEADER + i] = (uint8_t)(i * 7 + (i >> 9));
  gcomp_frame_info info = {.kind = 1, .count = P / 4, .payload_len = P};
  gcomp_frame_seal(f, &info);
  for (int b = 0; b < 4; b++) {
    uint64_t at = (uint64_t)b * GCOMP_FRAME_BLOCK, n = b == 3 ? 100 : GCOMP_FRAME_BLOCK;
    uint32_t want = ~gcomp_crc32c(0xffffffffu, f + GCOMP_FRAME_HEADER + at, (size_t)n);
    assert_int_equal(gcomp_load_le32(f + GCOMP_FRAME_HEADER + P + 4 * b), want);
  }
  /* the block checksums computed as the payload is written give the same frame */
  uint8_t *g = malloc(len);
  memcpy(g, f, len);
  memset(g + GCOMP_FRAME_HEADER + P, 0, 16);
  uint32_t crc[4];
  gcomp_frame_sums sums = {.payload = g + GCOMP_FRAME_HEADER, .done = 0, .crc = crc};
  gcomp_frame_sums_add(&sums, 1000);                       /* no whole block yet */
  assert_int_equal(sums.done, 0);
  gcomp_frame_sums_add(&sums, 2 * GCOMP_FRAME_BLOCK + 5);   /* two */
  assert_int_equal(sums.done, 2 * GCOMP_FRAME_BLOCK);
  gcomp_frame_sums_finish(&sums, P);
  gcomp_frame_seal_sums(g, &info, &sums);
  assert_memory_equal(f, g, len);
  /* damage in block 2: the eager open names it; the lazy one passes blocks 0 and 1 */
  f[GCOMP_FRAME_HEADER + 2 * GCOMP_FRAME_BLOCK + 77] ^= 4;
  expect_corrupt(f, len, "frame block 2 (payload bytes 131072..196607) checksum mismatch");
  gcomp_frame_check chk;
  assert_int_equal(gcomp_frame_open_check(f, len, &info, &chk), GCOMP_OK);
  assert_int_equal(gcomp_frame_verify(&chk, 2 * GCOMP_FRAME_BLOCK), GCOMP_OK);
  assert_int_equal(chk.verified, 2 * GCOMP_FRAME_BLOCK);
  assert_int_equal(gcomp_frame_verify(&chk, 2 * GCOMP_FRAME_BLOCK + 1), GCOMP_ERR_CORRUPT);
  assert_non_null(strstr(gcomp_last_error(), "frame block 2"));
  /* a decoder that sums blocks itself: offered the next whole unverified block only */
  assert_int_equal(gcomp_frame_open_check(f, len, &info, &chk), GCOMP_OK);
  assert_ptr_equal(gcomp_frame_next_block(&chk, 0), f + GCOMP_FRAME_HEADER);
  assert_null(gcomp_frame_next_block(&chk, GCOMP_FRAME_BLOCK));   /* not where checking stands */
  assert_null(gcomp_frame_next_block(NULL, 0));
  const uint8_t *p0 = f + GCOMP_FRAME_HEADER;
  assert_int_equal(gcomp_frame_verify_sum(&chk, 0, ~gcomp_crc32c(0xffffffffu, p0, 7)),
                   GCOMP_ERR_CORRUPT);   /* a wrong sum */
  assert_non_null(strstr(gcomp_last_error(), "frame block 0 (payload bytes 0..65535)"));
  assert_int_equal(chk.verified, 0);
  assert_int_equal(gcomp_frame_verify_sum(&chk, 0,
                                          ~gcomp_crc32c(0xffffffffu, p0, GCOMP_FRAME_BLOCK)),
                   GCOMP_OK);
  assert_int_equal(chk.verified, GCOMP_FRAME_BLOCK);
  assert_null(gcomp_frame_next_block(&chk, 0));                    /* verified already */
  assert_ptr_equal(gcomp_frame_next_block(&chk, GCOMP_FRAME_BLOCK), p0 + GCOMP_FRAME_BLOCK);
  /* a sum for a block it would not offer is ignored: the block is verified from its data */
  assert_int_equal(gcomp_frame_verify_sum(&chk, 2 * GCOMP_FRAME_BLOCK, 0), GCOMP_ERR_CORRUPT);
  assert_non_null(strstr(gcomp_last_error(), "frame block 2"));
  assert_int_equal(chk.verified, 2 * GCOMP_FRAME_BLOCK);
  chk.verified = 3 * GCOMP_FRAME_BLOCK;
  assert_null(gcomp_frame_next_block(&chk, 3 * GCOMP_FRAME_BLOCK));   /* the partial last one */
  /* through the API: decode_add refuses the frame; the blocks before the damage may have
   * been added (gcomp.h says so), the one after never is */
  gcomp_codec *c;
  assert_int_equal(gcomp_codec_create("none", &c), GCOMP_OK);
  float *acc = calloc(P / 4, sizeof *acc);
  assert_int_equal(gcomp_decode_add(c, f, len, acc, P / 4), GCOMP_ERR_CORRUPT);
  for (size_t i = 3 * GCOMP_FRAME_BLOCK / 4; i < P / 4; i++) assert_true(acc[i] == 0.0f);
  gcomp_codec_destroy(c);
  free(acc), free(f), free(g);
}

/* Well-sealed headers that no writer of this version produces. */
static void test_unknown_flags_refused(void **state) {
  uint8_t f[GCOMP_FRAME_HEADER + 4 + 4] = {0};
  gcomp_frame_info info = {.kind = 1, .stage = 1, .count = 1, .payload_len = 4};
  gcomp_frame_info out;
  for (unsigned fl = 0; fl < 256; fl++) {
    info.flags = (uint8_t)fl;
    info.stage = 1;
    gcomp_frame_seal(f, &info);
    if (fl & ~GCOMP_FRAME_F_KNOWN) expect_corrupt(f, sizeof f, "bits this build does not know");
    else assert_int_equal(gcomp_frame_open(f, sizeof f, &out), GCOMP_OK);
    info.stage = 0;   /* without a stage, shuffle flags are a lie */
    gcomp_frame_seal(f, &info);
    if (fl & ~GCOMP_FRAME_F_KNOWN) expect_corrupt(f, sizeof f, "bits this build does not know");
    else if (fl & (GCOMP_FRAME_F_SHUFFLED | GCOMP_FRAME_F_PLANES))
      expect_corrupt(f, sizeof f, "names no lossless stage");
    else assert_int_equal(gcomp_frame_open(f, sizeof f, &out), GCOMP_OK);
  }
}

/* Every pipeline that this build registers: round trip through a frame, then every bit
 * flip, truncation and a wrong count are refused with GCOMP_ERR_CORRUPT. */
static const char *const pipelines[] = {
    "none", "none+zstd", "none+zstd:planes=all", "none+igzip", "none+igzip:planes=all",
    "none+ef+zstd", "fp16", "bf16", "fp16+zstd", "bf16+zstd:planes=all", "bf16+igzip",
    "topk:ratio=0.05", "topk:ratio=0.05+zstd", "topk:ratio=0.05+ef+igzip"};

static void test_every_pipeline_detects_damage(void **state) {
  enum { N = 1031 };   /* odd, and past the 512-element exponent-plane threshold */
  float *g = malloc(N * sizeof *g), *out = malloc(N * sizeof *out);
  uint64_t s = 99;
  for (int i = 0; i < N; i++) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    g[i] = (float)((double)(s >> 11) / 9007199254740992.0 - 0.5) * 2e-3f;
  }
  int ran = 0;
  for (size_t p = 0; p < sizeof pipelines / sizeof *pipelines; p++) {
    gcomp_codec *c;
    if (gcomp_codec_create(pipelines[p], &c) != GCOMP_OK) {
      print_message("skipping '%s' (not in this build: %s)\n", pipelines[p], gcomp_last_error());
      continue;
    }
    ran++;
    size_t cap = gcomp_codec_max_encoded_size(c, N), len;
    uint8_t *f = malloc(cap), *bad = malloc(cap + 1);
    assert_int_equal(gcomp_encode(c, 1, g, N, f, cap, &len), GCOMP_OK);
    assert_int_equal(gcomp_decode(c, f, len, out, N), GCOMP_OK);
    /* flip every bit of the header, and bits spread over the payload */
    for (size_t bit = 0; bit < len * 8; bit += bit < GCOMP_FRAME_HEADER * 8 ? 1 : 7) {
      memcpy(bad, f, len);
      bad[bit / 8] ^= (uint8_t)(1u << (bit % 8));
      int st = gcomp_decode(c, bad, len, out, N);
      if (st != GCOMP_ERR_CORRUPT) fail_msg("%s: bit %zu flipped gave %d", pipelines[p], bit, st);
    }
    for (size_t cut = 0; cut < len; cut += 1 + cut / 8)
      assert_int_equal(gcomp_decode_add(c, f, cut, out, N), GCOMP_ERR_CORRUPT);
    assert_int_equal(gcomp_decode(c, f, len, out, N - 1), GCOMP_ERR_CORRUPT);
    assert_int_equal(gcomp_decode(c, f, len, out, N + 1), GCOMP_ERR_CORRUPT);
    free(bad);
    free(f);
    gcomp_codec_destroy(c);
  }
  assert_true(ran >= 5);   /* none's pipelines always exist */
  free(out);
  free(g);
}

/* A frame made by one kind is refused by a codec of another. */
static void test_kind_mismatch_refused(void **state) {
  gcomp_codec *a, *b;
  if (gcomp_codec_create("bf16", &b) != GCOMP_OK) {
    print_message("bf16 is not in this build: kind mismatch tested on a forged id\n");
    b = NULL;
  }
  assert_int_equal(gcomp_codec_create("none", &a), GCOMP_OK);
  float g[16] = {1, 2, 3}, out[16];
  uint8_t f[256];
  size_t len;
  assert_int_equal(gcomp_encode(a, 0, g, 16, f, sizeof f, &len), GCOMP_OK);
  if (b) {
    assert_int_equal(gcomp_decode(b, f, len, out, 16), GCOMP_ERR_CORRUPT);
    assert_non_null(strstr(gcomp_last_error(), "frame holds codec id 1"));
  }
  gcomp_frame_info info = {.kind = 77, .count = 16, .payload_len = gcomp_load_le64(f + 16)};
  gcomp_frame_seal(f, &info);
  assert_int_equal(gcomp_decode(a, f, len, out, 16), GCOMP_ERR_CORRUPT);
  assert_non_null(strstr(gcomp_last_error(), "frame holds codec id 77"));
  gcomp_codec_destroy(a);
  gcomp_codec_destroy(b);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_crc32c_known_answers),
      cmocka_unit_test(test_header_layout),
      cmocka_unit_test(test_version1_refused),
      cmocka_unit_test(test_header_damage_refused),
      cmocka_unit_test(test_blocks_verified_one_by_one),
      cmocka_unit_test(test_unknown_flags_refused),
      cmocka_unit_test(test_every_pipeline_detects_damage),
      cmocka_unit_test(test_kind_mismatch_refused),
  };
  return cmocka_run_group_tests_name("frame", tests, NULL, NULL);
}
