/* Writes the seed corpora (tests/fuzz/corpus/<target>/): small valid frames of every
 * registered spec, spec strings, a residual file when the reader exists, bootstrap's rank
 * cards, shared-segment slots and transport headers. Rerun after
 * adding a kind or changing the wire format:  build/tests/fuzz_gen_seeds tests/fuzz/corpus */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "codec_parts.h"
#include "fuzz_specs.h"
#include "gcomp.h"
#include "ofi_hdr.h"
#include "ofi_impl.h"

static void put(const char *dir, const char *name, const void *a, size_t alen, const void *b,
                size_t blen) {
  char path[4096];
  mkdir(dir, 0755);
  int len = snprintf(path, sizeof path, "%s/%s", dir, name);
  if (len < 0 || (size_t)len >= sizeof path) {
    fprintf(stderr, "gen_seeds: path too long: %s/%s\n", dir, name);
    exit(1);
  }
  FILE *f = fopen(path, "wb");
  if (!f) {
    perror(path);
    exit(1);
  }
  fwrite(a, 1, alen, f);
  if (blen) fwrite(b, 1, blen, f);
  fclose(f);
}

/* fuzz_cards.c: n cards as bootstrap's first round gathers them (selector n - 1), on one
 * node, on two, each on its own; and the two refusals (a stranger's card, another build) */
static void seed_cards(const char *root) {
  char dir[4096];
  snprintf(dir, sizeof dir, "%s/cards", root);
  static const struct { const char *name; int n, nodes, bad_magic, bad_version; } sets[] = {
      {"one-rank", 1, 1, -1, -1},    {"four-one-node", 4, 1, -1, -1},
      {"four-two-nodes", 4, 2, -1, -1}, {"five-each-alone", 5, 5, -1, -1},
      {"stranger-at-2", 3, 1, 2, -1}, {"other-build-at-1", 3, 2, -1, 1}};
  for (size_t i = 0; i < sizeof sets / sizeof *sets; i++) {
    rank_card cards[8];
    memset(cards, 0, sizeof cards);
    for (int r = 0; r < sets[i].n; r++) {
      rank_card *c = &cards[r];
      c->magic = r == sets[i].bad_magic ? 0x20544547u : OFI_CARD_MAGIC;   /* "GET " */
      c->version = gcomp_wire_version(r) + (r == sets[i].bad_version);
      c->pid = 4000 + r;
      snprintf(c->host, sizeof c->host, "host%d", r * sets[i].nodes / sets[i].n);
      snprintf(c->pidns, sizeof c->pidns, "pid:[4026531836]");
      snprintf(c->node, sizeof c->node, "node%d", r * sets[i].nodes / sets[i].n);
    }
    uint8_t sel = (uint8_t)(sets[i].n - 1);
    put(dir, sets[i].name, &sel, 1, cards, (size_t)sets[i].n * sizeof *cards);
  }
}

/* fuzz_shm_parts.c: slots as gcomp_shm_allgather_parts writes them (a word, the parts'
 * lengths, each part from a 64-byte boundary: reduce/shm.c), with 1, 3 and 8 parts; and
 * one whose second length runs past the slot */
static void seed_shm_parts(const char *root) {
  char dir[4096];
  snprintf(dir, sizeof dir, "%s/shm_parts", root);
  static const int nparts[] = {1, 3, 8, 3};
  for (size_t i = 0; i < sizeof nparts / sizeof *nparts; i++) {
    static uint8_t slot[4096];
    memset(slot, 0, sizeof slot);
    uint64_t word = 1;
    memcpy(slot, &word, 8);
    size_t at = ((size_t)nparts[i] + 1) * 8;
    at = (at + 63) / 64 * 64;
    for (int k = 0; k < nparts[i]; k++) {
      uint64_t len = 40 + 50 * (uint64_t)k;
      if (i == 3 && k == 1) len = sizeof slot;
      memcpy(slot + 8 * (k + 1), &len, 8);
      for (size_t b = 0; b < len && at + b < sizeof slot; b++) slot[at + b] = (uint8_t)(k + b);
      at += (len + 63) / 64 * 64;
    }
    size_t used = at < sizeof slot ? at : sizeof slot;
    char name[32];
    snprintf(name, sizeof name, i == 3 ? "parts%d-overrun" : "parts%d", nparts[i]);
    uint8_t sel = (uint8_t)nparts[i];
    put(dir, name, &sel, 1, slot, used);
  }
}

/* fuzz_header.c: a header of every type (selector: 16 credits may come back), an inline RTS
 * with its payload, and an inline message that came alone (selector bit 0x20) */
static void seed_header(const char *root) {
  char dir[4096];
  snprintf(dir, sizeof dir, "%s/header", root);
  for (int type = H_RTS; type <= H_RCANCEL; type++) {
    ofi_hdr h = {.type = (uint8_t)type, .flags = type == H_CTS ? F_SCHED : 0, .ret = 2,
                 .batch = type == H_CTS || type == H_RTR ? 64 : 0, .mtag = 0x2a00000007u,
                 .len = 1 << 20, .id = 3, .token = 5, .chunk = 8192};
    uint8_t b[OFI_HDR_WIRE], sel = 16;
    ofi_hdr_encode(&h, GCOMP_WIRE_VERSION, b);
    char name[32];
    snprintf(name, sizeof name, "type%d", type);
    put(dir, name, &sel, 1, b, sizeof b);
  }
  uint8_t in[OFI_HDR_WIRE + 12], sel = 16;
  ofi_hdr rts = {.type = H_RTS, .flags = F_INLINE, .ret = 1, .mtag = 9, .len = 12};
  ofi_hdr_encode(&rts, GCOMP_WIRE_VERSION, in);
  memcpy(in + OFI_HDR_WIRE, "twelve bytes", 12);
  put(dir, "rts-inline", &sel, 1, in, sizeof in);
  uint8_t bare[8 + 12] = {3}, bsel = 0x20 | 16;   /* CQ data 3 (little-endian host) */
  memcpy(bare + 8, "twelve bytes", 12);
  put(dir, "bare", &bsel, 1, bare, sizeof bare);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: fuzz_gen_seeds CORPUS_DIR\n");
    return 2;
  }
  char dir[4096];
  float g[600];
  uint64_t s = 12345;
  for (int i = 0; i < 600; i++) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    g[i] = (float)((double)(s >> 11) / 9007199254740992.0 - 0.5) * 3e-3f;
  }
  const size_t counts[] = {1, 64, 600};
  snprintf(dir, sizeof dir, "%s/decode", argv[1]);
  for (int i = 0; i < GCOMP_FUZZ_NSPECS; i++) {
    gcomp_codec *c;
    if (gcomp_codec_create(gcomp_fuzz_specs[i], &c) != GCOMP_OK) {
      fprintf(stderr, "skip %s: %s\n", gcomp_fuzz_specs[i], gcomp_last_error());
      continue;
    }
    for (size_t k = 0; k < sizeof counts / sizeof *counts; k++) {
      size_t cap = gcomp_codec_max_encoded_size(c, counts[k]), len;
      uint8_t *frame = malloc(cap);
      if (gcomp_encode(c, (uint64_t)k, g, counts[k], frame, cap, &len) == GCOMP_OK) {
        char name[64];
        uint8_t sel = (uint8_t)(i | (k == 1 ? 0x40 : 0) | (k == 2 ? 0x20 : 0));
        snprintf(name, sizeof name, "spec%02d-n%zu", i, counts[k]);
        put(dir, name, &sel, 1, frame, len);
        if (gcomp_codec_part_values(c)) {   /* and decoded in parts too (fuzz_decode.c) */
          uint8_t both = (uint8_t)(sel | 0x80);
          char parts[80];
          snprintf(parts, sizeof parts, "%s-parts", name);
          put(dir, parts, &both, 1, frame, len);
        }
        if (i == 0 || i == 1 || i == 3) {
          char fdir[4096];
          snprintf(fdir, sizeof fdir, "%s/frame", argv[1]);
          put(fdir, name, frame, len, NULL, 0);
        }
      }
      free(frame);
    }
    gcomp_codec_destroy(c);
  }
  snprintf(dir, sizeof dir, "%s/spec", argv[1]);
  const char *specs[] = {"none", "none+ef:dtype=fp32+zstd:level=3,planes=all",
                         "bf16+igzip:level=1,planes=exp", "fp16:scale=none",
                         "topk:ratio=0.01,exact=1+ef", "bf16:round=stochastic,seed=7",
                         "none+zstd:", "none+lz4", "none+ef+ef",
                         "quant:bits=2,bucket=128,round=stochastic,seed=3+ef:dtype=bf16",
                         "sign:bucket=64+ef+zstd", "quant:bits=9", "sign:bucket=100"};
  for (size_t i = 0; i < sizeof specs / sizeof *specs; i++) {
    char name[32];
    snprintf(name, sizeof name, "spec%02zu", i);
    put(dir, name, specs[i], strlen(specs[i]), NULL, 0);
  }
  snprintf(dir, sizeof dir, "%s/residuals", argv[1]);
  /* one residual file per writer: version 1 (residuals) and version 2 (with velocities);
   * the selector byte indexes fuzz_residuals.c's spec table */
  static const struct { const char *spec, *name; uint8_t sel; } res[] = {
      {"none+ef", "none-ef-2keys", 0}, {"topk:ratio=0.01+ef:momentum=0.9", "topk-momentum-2keys", 4}};
  for (size_t i = 0; i < sizeof res / sizeof *res; i++) {
    gcomp_codec *c;
    if (gcomp_codec_create(res[i].spec, &c) != GCOMP_OK) {
      fprintf(stderr, "gen_seeds: %s: %s\n", res[i].spec, gcomp_last_error());
      return 1;
    }
    uint8_t frame[4096];
    size_t len;
    gcomp_encode(c, 5, g, 100, frame, sizeof frame, &len);
    gcomp_encode(c, 9, g, 7, frame, sizeof frame, &len);
    char tmp[64];
    snprintf(tmp, sizeof tmp, "/tmp/gcomp-gen-seeds-%ld.res", (long)getpid());
    if (gcomp_codec_save_residuals(c, tmp) != GCOMP_OK) {
      fprintf(stderr, "gen_seeds: saving %s residuals: %s\n", res[i].spec, gcomp_last_error());
      return 1;
    }
    FILE *f = fopen(tmp, "rb");
    static uint8_t buf[65536];
    size_t n = f ? fread(buf, 1, sizeof buf, f) : 0;
    if (f) fclose(f);
    remove(tmp);
    put(dir, res[i].name, &res[i].sel, 1, buf, n);
    gcomp_codec_destroy(c);
  }
  /* fuzz_parts.c: the 600 values as 1 to 3 operands for each of its 8 specs (selector
   * s + 8 k: spec s, k + 1 operands), and once with a NaN, an Inf, -0 and a subnormal */
  snprintf(dir, sizeof dir, "%s/parts", argv[1]);
  float special[600];
  memcpy(special, g, sizeof special);
  special[5] = -0.0f, special[100] = NAN, special[300] = INFINITY, special[450] = 1e-40f;
  for (unsigned sel = 0; sel < 24; sel++) {
    char name[32];
    uint8_t b = (uint8_t)sel;
    snprintf(name, sizeof name, "sel%02u", sel);
    put(dir, name, &b, 1, g, sizeof g);
    snprintf(name, sizeof name, "sel%02u-special", sel);
    if (sel >= 8 && sel < 16) put(dir, name, &b, 1, special, sizeof special);
  }
  seed_cards(argv[1]);
  seed_shm_parts(argv[1]);
  seed_header(argv[1]);
  return 0;
}
