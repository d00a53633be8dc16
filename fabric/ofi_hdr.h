/* The libfabric transport's header on the wire (the protocol: fabric/ofi_proto.c).
 *
 * OFI_HDR_WIRE bytes, little-endian whatever the host, written and read field by field:
 *   0  magic 'g' 'h'        4  flags (F_*)             8  mtag    RTS, RTR
 *   2  wire version, low    5  credits given back     16  len     see below
 *      byte (transport.h)   6  batch (u16): CTS, RTR  24  id      see below
 *   3  type (H_*)              chunks per provider    32  token   CTS, RTR, SLEN, RCANCEL
 *                              message (0: 1)         40  chunk   CTS, RTR: chunk size
 * len: RTS, SLEN the message's length; CTS, RTR the bytes granted so far. id: RTS, CTS, DROP,
 * SLEN the sender's message number; RTR the receive's capacity. An inline RTS's payload
 * follows the header; no other header carries bytes after it.
 *
 * The decoder refuses, with GCOMP_ERR_CORRUPT, a header with another magic, an unknown type
 * or flag, credits beyond what the receiver can owe, a length, capacity or run (chunk x
 * batch) beyond OFI_LEN_MAX, or a payload other than an inline RTS's; and with
 * GCOMP_ERR_INVALID one of another wire version (another build), naming both versions. */
#ifndef GCOMP_OFI_HDR_H
#define GCOMP_OFI_HDR_H

#include <stddef.h>
#include <stdint.h>

enum { H_RTS = 1, H_CTS, H_DROP, H_CREDIT, H_RTR, H_SLEN, H_RCANCEL };

/* payload follows the header; a scheduled message's; SLEN: the send is not a scheduled one */
enum { F_INLINE = 1, F_SCHED = 2, F_UNSCHED = 4 };

#define OFI_HDR_WIRE 48
#define OFI_HDR_MAGIC0 0x67   /* 'g' */
#define OFI_HDR_MAGIC1 0x68   /* 'h' */
/* No length, capacity or run of chunks a header names exceeds this (256 TiB): larger ones
 * are corrupt, and sums of them cannot overflow */
#define OFI_LEN_MAX (UINT64_C(1) << 48)

typedef struct {            /* a header, decoded */
  uint8_t type;             /* H_* */
  uint8_t flags;            /* F_* */
  uint16_t batch;
  uint32_t ret;             /* credits given back (at most 255 on the wire) */
  uint64_t mtag, len, id, token, chunk;
} ofi_hdr;

/* Writes h's OFI_HDR_WIRE bytes (h->ret <= 255), with the given wire version */
void ofi_hdr_encode(const ofi_hdr *h, unsigned version, uint8_t out[OFI_HDR_WIRE]);

/* Reads the header at the start of buf's len bytes (the payload, if any, follows it) into
 * *h: GCOMP_OK, or an error (see the top) whose detail gcomp_last_error() gives. version:
 * this rank's wire version; max_credits: the most credits the sender can give back now. */
int ofi_hdr_decode(const uint8_t *buf, size_t len, unsigned version, unsigned max_credits,
                   ofi_hdr *h);

/* An inline RTS that came as its payload alone (provider tag KIND_BARE | match tag, the
 * credits as CQ data; len payload bytes): the header it stands for, with the same bound on
 * the credits. */
int ofi_hdr_bare(uint64_t mtag, size_t len, uint64_t cqdata, unsigned max_credits, ofi_hdr *h);

#endif /* GCOMP_OFI_HDR_H */
