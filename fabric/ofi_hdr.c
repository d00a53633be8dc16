/* The transport header's encoding (layout and rules: ofi_hdr.h). Kept apart from the
 * protocol and from libfabric so that a fuzz target reaches the decoder alone. */
#include <inttypes.h>

#include "gcomp_common.h"
#include "gcomp_le.h"
#include "ofi_hdr.h"

/* The flags each type may carry (index: H_*) */
static const uint8_t flags_of[] = {
    [H_RTS] = F_INLINE | F_UNSCHED, [H_CTS] = F_SCHED, [H_DROP] = 0, [H_CREDIT] = 0,
    [H_RTR] = 0,                    [H_SLEN] = F_UNSCHED, [H_RCANCEL] = 0};

void ofi_hdr_encode(const ofi_hdr *h, unsigned version, uint8_t out[OFI_HDR_WIRE]) {
  out[0] = OFI_HDR_MAGIC0;
  out[1] = OFI_HDR_MAGIC1;
  out[2] = (uint8_t)version;
  out[3] = h->type;
  out[4] = h->flags;
  out[5] = (uint8_t)h->ret;
  gcomp_store_le16(out + 6, h->batch);
  gcomp_store_le64(out + 8, h->mtag);
  gcomp_store_le64(out + 16, h->len);
  gcomp_store_le64(out + 24, h->id);
  gcomp_store_le64(out + 32, h->token);
  gcomp_store_le64(out + 40, h->chunk);
}

int ofi_hdr_decode(const uint8_t *buf, size_t len, unsigned version, unsigned max_credits,
                   ofi_hdr *h) {
  GCOMP_FAIL_IF(len < OFI_HDR_WIRE, GCOMP_ERR_CORRUPT, "a transport header of %zu bytes "
                "arrived (it has %d)", len, OFI_HDR_WIRE);
  GCOMP_FAIL_IF(buf[0] != OFI_HDR_MAGIC0 || buf[1] != OFI_HDR_MAGIC1, GCOMP_ERR_CORRUPT,
                "a message that is no gcomp transport header arrived (magic 0x%02x%02x, "
                "expected 0x%02x%02x)", buf[0], buf[1], OFI_HDR_MAGIC0, OFI_HDR_MAGIC1);
  GCOMP_FAIL_IF(buf[2] != (uint8_t)version, GCOMP_ERR_INVALID, "mismatched gcomp builds: a "
                "transport header of wire version %u arrived, this rank speaks wire version %u; "
                "run one build on every rank", buf[2], version & 0xffu);
  h->type = buf[3];
  h->flags = buf[4];
  h->ret = buf[5];
  h->batch = gcomp_load_le16(buf + 6);
  h->mtag = gcomp_load_le64(buf + 8);
  h->len = gcomp_load_le64(buf + 16);
  h->id = gcomp_load_le64(buf + 24);
  h->token = gcomp_load_le64(buf + 32);
  h->chunk = gcomp_load_le64(buf + 40);
  GCOMP_FAIL_IF(h->type < H_RTS || h->type > H_RCANCEL, GCOMP_ERR_CORRUPT,
                "a transport header of unknown type %u arrived", h->type);
  GCOMP_FAIL_IF(h->flags & ~flags_of[h->type], GCOMP_ERR_CORRUPT, "a transport header of type "
                "%u carries unknown flags 0x%02x", h->type, h->flags);
  GCOMP_FAIL_IF(h->ret > max_credits, GCOMP_ERR_CORRUPT, "a transport header gives back %" PRIu32
                " credits, more than the %u the sender can owe", h->ret, max_credits);
  uint64_t run = h->chunk * (h->batch ? h->batch : 1u);   /* chunk <= OFI_LEN_MAX: no wrap */
  GCOMP_FAIL_IF(h->len > OFI_LEN_MAX || h->chunk > OFI_LEN_MAX || run > OFI_LEN_MAX ||
                (h->type == H_RTR && h->id > OFI_LEN_MAX), GCOMP_ERR_CORRUPT,
                "a transport header of type %u names %" PRIu64 " bytes, a capacity of %" PRIu64
                " or chunks of %" PRIu64 " bytes (%u a message): over the bound of %" PRIu64,
                h->type, h->len, h->type == H_RTR ? h->id : 0, h->chunk, h->batch, OFI_LEN_MAX);
  size_t n = len - OFI_HDR_WIRE;
  int in = h->type == H_RTS && (h->flags & F_INLINE);
  GCOMP_FAIL_IF(in ? n != h->len : n != 0, GCOMP_ERR_CORRUPT, "a transport header of type %u "
                "carries %zu payload bytes (%s)", h->type, n,
                in ? "not the message's length" : "it carries none");
  return GCOMP_OK;
}

int ofi_hdr_bare(uint64_t mtag, size_t len, uint64_t cqdata, unsigned max_credits, ofi_hdr *h) {
  GCOMP_FAIL_IF(cqdata > max_credits, GCOMP_ERR_CORRUPT, "an inline message gives back %" PRIu64
                " credits, more than the %u the sender can owe", cqdata, max_credits);
  *h = (ofi_hdr){.type = H_RTS, .flags = F_INLINE, .ret = (uint32_t)cqdata, .mtag = mtag,
                 .len = len};
  return GCOMP_OK;
}
