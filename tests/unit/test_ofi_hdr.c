/* The transport header (fabric/ofi_hdr.h): its exact little-endian layout, a round trip of
 * every type, and refusal of crafted headers: another magic, another wire version (both
 * versions named), credits beyond what the sender can owe, lengths beyond the bound, unknown
 * types and flags, payloads that lie. Each decode reads a buffer that ends at a PROT_NONE
 * page, so a read past the header faults. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "gcomp.h"
#include "ofi_hdr.h"
#include "test_util.h"
#include "transport.h"

enum { V = GCOMP_WIRE_VERSION, CRED = 16 };

/* decodes the n bytes of b from a guarded copy */
static int decode(const uint8_t *b, size_t n, unsigned version, unsigned max_credits,
                  ofi_hdr *h) {
  guarded g;
  uint8_t *p = guard_alloc(&g, n ? n : 1);
  memcpy(p, b, n);
  int s = ofi_hdr_decode(p, n, version, max_credits, h);
  guard_free(&g);
  return s;
}

static void expect_refused(const uint8_t *b, size_t n, unsigned max_credits, int status,
                           const char *fragment) {
  ofi_hdr h;
  int s = decode(b, n, V, max_credits, &h);
  if (s != status) fail_msg("status %d, expected %d (%s)", s, status, fragment);
  if (!strstr(gcomp_last_error(), fragment))
    fail_msg("error '%s' lacks '%s'", gcomp_last_error(), fragment);
}

static void test_layout(void **state) {
  (void)state;
  ofi_hdr h = {.type = H_CTS, .flags = F_SCHED, .batch = 0x0102, .ret = 5,
               .mtag = 0x1112131415161718u, .len = 0x2122232425u, .id = 0x31,
               .token = 0x4142434445464748u, .chunk = 0x10000};
  uint8_t b[OFI_HDR_WIRE];
  ofi_hdr_encode(&h, V, b);
  const uint8_t head[8] = {'g', 'h', V, H_CTS, F_SCHED, 5, 0x02, 0x01};
  assert_memory_equal(b, head, sizeof head);
  const uint8_t mtag[8] = {0x18, 0x17, 0x16, 0x15, 0x14, 0x13, 0x12, 0x11};
  assert_memory_equal(b + 8, mtag, 8);
  const uint8_t len[8] = {0x25, 0x24, 0x23, 0x22, 0x21, 0, 0, 0};
  assert_memory_equal(b + 16, len, 8);
  assert_int_equal(b[24], 0x31);
  assert_int_equal(b[32], 0x48);
  assert_int_equal(b[39], 0x41);
  const uint8_t chunk[8] = {0, 0, 1, 0, 0, 0, 0, 0};
  assert_memory_equal(b + 40, chunk, 8);
}

static void test_round_trip(void **state) {
  (void)state;
  for (int type = H_RTS; type <= H_RCANCEL; type++) {
    ofi_hdr h = {.type = (uint8_t)type, .flags = type == H_SLEN ? F_UNSCHED : 0,
                 .batch = type == H_CTS || type == H_RTR ? 64 : 0, .ret = (uint32_t)type,
                 .mtag = 7u << 20, .len = 1u << 20, .id = 99, .token = 3, .chunk = 8192};
    uint8_t b[OFI_HDR_WIRE];
    ofi_hdr_encode(&h, V, b);
    ofi_hdr d;
    assert_int_equal(decode(b, sizeof b, V, CRED, &d), GCOMP_OK);
    assert_int_equal(d.type, h.type);
    assert_int_equal(d.flags, h.flags);
    assert_int_equal(d.batch, h.batch);
    assert_int_equal(d.ret, h.ret);
    assert_true(d.mtag == h.mtag && d.len == h.len && d.id == h.id && d.token == h.token &&
                d.chunk == h.chunk);
  }
  /* an inline RTS: its payload follows, exactly its length */
  uint8_t b[OFI_HDR_WIRE + 5];
  ofi_hdr h = {.type = H_RTS, .flags = F_INLINE, .len = 5};
  ofi_hdr_encode(&h, V, b);
  memcpy(b + OFI_HDR_WIRE, "hello", 5);
  ofi_hdr d;
  assert_int_equal(decode(b, sizeof b, V, 0, &d), GCOMP_OK);
  assert_int_equal(d.len, 5);
}

static void test_bad_magic(void **state) {
  (void)state;
  uint8_t b[OFI_HDR_WIRE];
  ofi_hdr h = {.type = H_CREDIT};
  ofi_hdr_encode(&h, V, b);
  b[1] = 'x';
  expect_refused(b, sizeof b, CRED, GCOMP_ERR_CORRUPT, "magic 0x6778, expected 0x6768");
  memset(b, 0, sizeof b);   /* what a stray message of zeros would be */
  expect_refused(b, sizeof b, CRED, GCOMP_ERR_CORRUPT, "no gcomp transport header");
}

static void test_bad_version(void **state) {
  (void)state;
  uint8_t b[OFI_HDR_WIRE];
  ofi_hdr h = {.type = H_CREDIT};
  ofi_hdr_encode(&h, V + 1, b);
  char want[96];
  snprintf(want, sizeof want, "wire version %u arrived, this rank speaks wire version %u",
           V + 1, V);
  expect_refused(b, sizeof b, CRED, GCOMP_ERR_INVALID, want);
  expect_refused(b, sizeof b, CRED, GCOMP_ERR_INVALID, "mismatched gcomp builds");
}

static void test_credits_bounded(void **state) {
  (void)state;
  uint8_t b[OFI_HDR_WIRE];
  ofi_hdr h = {.type = H_CREDIT, .ret = 4};
  ofi_hdr_encode(&h, V, b);
  ofi_hdr d;
  assert_int_equal(decode(b, sizeof b, V, 4, &d), GCOMP_OK);
  expect_refused(b, sizeof b, 3, GCOMP_ERR_CORRUPT, "gives back 4 credits, more than the 3");
  b[5] = 255;   /* the most the byte holds */
  expect_refused(b, sizeof b, CRED, GCOMP_ERR_CORRUPT, "gives back 255 credits");
  /* a bare inline message's credits come as CQ data: the same bound */
  assert_int_equal(ofi_hdr_bare(9, 100, 2, 2, &d), GCOMP_OK);
  assert_int_equal(d.type, H_RTS);
  assert_int_equal(d.flags, F_INLINE);
  assert_int_equal(d.len, 100);
  assert_int_equal(ofi_hdr_bare(9, 100, UINT64_C(1) << 40, CRED, &d), GCOMP_ERR_CORRUPT);
  assert_non_null(strstr(gcomp_last_error(), "more than the 16"));
}

static void test_fields_bounded(void **state) {
  (void)state;
  uint8_t b[OFI_HDR_WIRE + 1];
  ofi_hdr h = {.type = H_RTS, .len = OFI_LEN_MAX + 1};
  ofi_hdr_encode(&h, V, b);
  expect_refused(b, OFI_HDR_WIRE, CRED, GCOMP_ERR_CORRUPT, "over the bound");
  h = (ofi_hdr){.type = H_CTS, .len = 1, .chunk = UINT64_C(1) << 40, .batch = 1u << 9};
  ofi_hdr_encode(&h, V, b);   /* each field fits, their run does not */
  expect_refused(b, OFI_HDR_WIRE, CRED, GCOMP_ERR_CORRUPT, "over the bound");
  h = (ofi_hdr){.type = H_RTR, .id = UINT64_MAX, .chunk = 1};
  ofi_hdr_encode(&h, V, b);
  expect_refused(b, OFI_HDR_WIRE, CRED, GCOMP_ERR_CORRUPT, "a capacity of");
  h = (ofi_hdr){.type = H_RCANCEL + 1};
  ofi_hdr_encode(&h, V, b);
  expect_refused(b, OFI_HDR_WIRE, CRED, GCOMP_ERR_CORRUPT, "unknown type 8");
  h = (ofi_hdr){.type = 0};
  ofi_hdr_encode(&h, V, b);
  expect_refused(b, OFI_HDR_WIRE, CRED, GCOMP_ERR_CORRUPT, "unknown type 0");
  h = (ofi_hdr){.type = H_CTS, .flags = F_INLINE, .chunk = 1};
  ofi_hdr_encode(&h, V, b);
  expect_refused(b, OFI_HDR_WIRE, CRED, GCOMP_ERR_CORRUPT, "unknown flags 0x01");
  /* payloads: an inline RTS's must be its length, no other header carries one */
  h = (ofi_hdr){.type = H_RTS, .flags = F_INLINE, .len = 2};
  ofi_hdr_encode(&h, V, b);
  expect_refused(b, OFI_HDR_WIRE + 1, CRED, GCOMP_ERR_CORRUPT, "carries 1 payload bytes");
  h = (ofi_hdr){.type = H_RTS, .len = 1};
  ofi_hdr_encode(&h, V, b);
  expect_refused(b, OFI_HDR_WIRE + 1, CRED, GCOMP_ERR_CORRUPT, "it carries none");
  for (size_t n = 0; n < OFI_HDR_WIRE; n += 7)
    expect_refused(b, n, CRED, GCOMP_ERR_CORRUPT, "bytes arrived");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_layout),         cmocka_unit_test(test_round_trip),
      cmocka_unit_test(test_bad_magic),      cmocka_unit_test(test_bad_version),
      cmocka_unit_test(test_credits_bounded), cmocka_unit_test(test_fields_bounded),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
