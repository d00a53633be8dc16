/* Fuzz target: the libfabric transport's header decoder (fabric/ofi_hdr.h), which reads
 * whatever a peer's message put into a header slot.
 *
 * Input: one selector byte, then the bytes that arrived.
 *   selector & 0x1f     the credits the sender may give back (0 to 31)
 *   selector & 0x20     the bytes came alone, as an inline message's payload (KIND_BARE):
 *                       the next 8 bytes are its CQ data (the credits), the rest its payload
 * A header the decoder accepts must keep every promise of ofi_hdr.h (known type and flags,
 * credits and lengths within their bounds, a payload only on an inline RTS and exactly its
 * length), and encode back to the same bytes. A refusal must say why. */
#include <stdint.h>
#include <string.h>

#include "gcomp.h"
#include "ofi_hdr.h"
#include "transport.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok) {
  if (!ok) __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  unsigned max_credits = data[0] & 0x1fu;
  const uint8_t *b = data + 1;
  size_t n = size - 1;
  ofi_hdr h;
  if (data[0] & 0x20) {
    if (n < 8) return 0;
    uint64_t cq;
    memcpy(&cq, b, sizeof cq);
    int s = ofi_hdr_bare(cq & 0xff, n - 8, cq, max_credits, &h);
    check(s == GCOMP_OK ? cq <= max_credits && h.type == H_RTS && h.len == n - 8
                        : s == GCOMP_ERR_CORRUPT && cq > max_credits);
    return 0;
  }
  int s = ofi_hdr_decode(b, n, GCOMP_WIRE_VERSION, max_credits, &h);
  if (s != GCOMP_OK) {
    check((s == GCOMP_ERR_CORRUPT || s == GCOMP_ERR_INVALID) && gcomp_last_error()[0]);
    return 0;
  }
  check(n >= OFI_HDR_WIRE && h.type >= H_RTS && h.type <= H_RCANCEL);
  check(h.ret <= max_credits && h.len <= OFI_LEN_MAX && h.chunk <= OFI_LEN_MAX);
  check(h.chunk * (h.batch ? h.batch : 1u) <= OFI_LEN_MAX);
  int in = h.type == H_RTS && (h.flags & F_INLINE);
  check(in ? n - OFI_HDR_WIRE == h.len : n == OFI_HDR_WIRE);
  uint8_t again[OFI_HDR_WIRE];
  ofi_hdr_encode(&h, GCOMP_WIRE_VERSION, again);
  check(memcmp(again, b, OFI_HDR_WIRE) == 0);
  return 0;
}
