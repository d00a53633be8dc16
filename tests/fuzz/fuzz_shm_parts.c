/* Fuzz target: a node's shared segment as the parts protocol reads it (reduce/shm.c
 * gcomp_shm_parts_read): another local rank's slot, its parts' lengths and then the parts.
 * Any process that maps the segment can write any bytes there, and a rank that dies
 * mid-write leaves half a slot: the reader trusts it no more than a frame off the network.
 *
 * Input: one selector byte, then the slot (exactly the input's remaining bytes, in a buffer
 * of that size, so that ASan sees a read past it).
 *   selector % (MAX_PARTS + 1)    the parts the call expects (0 to MAX_PARTS)
 *   selector & 0x80               the callback fails at part (selector >> 4) & 7
 * The reader must return GCOMP_OK after one callback per part, in order, each inside the
 * slot from a 64-byte boundary, with parts apart from each other and from the lengths; or
 * GCOMP_ERR_CORRUPT with a message; or the callback's own failure, passed on unchanged and
 * without another callback after it. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "coll.h"
#include "gcomp.h"

enum { MAX_PARTS = 8, LOCAL_RANK = 3 };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct {
  const uint8_t *slot;
  size_t slot_bytes;
  int next;        /* the part expected next */
  int fail_at;     /* the part whose callback fails, or -1 */
  size_t end;      /* where the previous part ended */
  unsigned sum;    /* every byte of every part, read */
} reader;

static int on_part(void *arg, int j, int k, const uint8_t *p, size_t len) {
  reader *r = arg;
  if (j != LOCAL_RANK || k != r->next || r->next < 0) __builtin_trap();
  size_t at = (size_t)(p - r->slot);
  if (p < r->slot || at > r->slot_bytes || len > r->slot_bytes - at) __builtin_trap();
  if (at % 64 || at < r->end || at < 8 * ((size_t)k + 2)) __builtin_trap();
  for (size_t i = 0; i < len; i++) r->sum += p[i];
  r->end = at + len;
  if (k == r->fail_at) {
    r->next = -1;   /* no callback may follow */
    return GCOMP_ERR_UNSUPPORTED;
  }
  r->next++;
  return GCOMP_OK;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  int nparts = data[0] % (MAX_PARTS + 1);
  int fail_at = data[0] & 0x80 ? (data[0] >> 4) & 7 : -1;
  size_t slot_bytes = size - 1;
  uint8_t *slot = malloc(slot_bytes ? slot_bytes : 1);
  if (!slot) return 0;
  memcpy(slot, data + 1, slot_bytes);
  reader r = {.slot = slot, .slot_bytes = slot_bytes, .fail_at = fail_at};
  int st = gcomp_shm_parts_read(slot, slot_bytes, LOCAL_RANK, nparts, on_part, &r);
  if (st == GCOMP_OK) {
    if (r.next != nparts) __builtin_trap();
  } else if (st == GCOMP_ERR_UNSUPPORTED) {
    if (r.next != -1) __builtin_trap();
  } else if (st != GCOMP_ERR_CORRUPT || !gcomp_last_error()[0] || r.next < 0) {
    __builtin_trap();
  }
  free(slot);
  return 0;
}
