/* The public codec API: a pipeline (kind [+ef] [+lossless stage]) inside a checked frame. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec_impl.h"
#include "codec_parts.h"
#include "ef.h"
#include "frame.h"
#include "lossless.h"
#include "lowbit.h"
#include "spec.h"

struct gcomp_codec {
  gcomp_spec spec;
  gcomp_spec_ident ident;       /* the spec as words (gcomp_codec_same) */
  uint64_t wire_id;             /* gcomp_spec_wire_id of ident */
  gcomp_ef *ef;                 /* NULL without +ef */
  uint64_t seq;                 /* frames encoded so far */
  gcomp_codec_stats stats;
  uint8_t *scratch;             /* encode-side payload before the lossless stage */
  size_t scratch_cap;
  uint64_t kind_state;          /* without +ef: the kind's state word (one for all keys) */
  uint32_t *sums;               /* the frame being encoded: its block checksums */
  size_t sums_cap;
  struct {                      /* an encode in parts (gcomp_encode_sum_*) */
    int open;
    uint8_t *frame;
    uint64_t key;
    size_t count, fed, room, len;   /* values in all, summed so far; payload room, bytes */
    float *res;                     /* +ef: the key's residual, at value 0 */
    gcomp_frame_sums sums;
    uint32_t param;
    float *buf;                     /* unit values summed, not yet encoded: fill of them */
    size_t unit, fill;
  } part;
};

/* The codec of a parsed (valid) spec: what gcomp_codec_create, the clone and the second
 * stage share. text: what the caller wrote, for the log (NULL: made from a spec). */
static int from_spec(const gcomp_spec *spec, const char *text, gcomp_codec **out) {
  gcomp_codec *c = calloc(1, sizeof *c);
  GCOMP_FAIL_IF(!c, GCOMP_ERR_NOMEM, "allocating a codec");
  c->spec = *spec;
  gcomp_spec_ident_of(&c->spec, &c->ident);
  c->wire_id = gcomp_spec_wire_id(&c->ident);
  int s = c->spec.ef ? gcomp_ef_create(c->spec.ef_dtype, c->spec.ef_momentum, c->spec.ef_mask,
                                       &c->ef)
                     : GCOMP_OK;
  if (s < 0) {
    gcomp_codec_destroy(c);
    return gcomp_error_trace(s, __FILE__, __LINE__);
  }
  char canon[512];
  gcomp_spec_print(&c->spec, canon, sizeof canon);
  GCOMP_INFO(GCOMP_SUB_CODEC, "codec '%s' -> %s (kernels: %s)", text ? text : canon, canon,
             gcomp_isa_selected());
  *out = c;
  return GCOMP_OK;
}

gcomp_status gcomp_codec_create(const char *spec, gcomp_codec **out) {
  GCOMP_FAIL_IF(!out, GCOMP_ERR_INVALID, "gcomp_codec_create: out is NULL");
  *out = NULL;
  GCOMP_CHECK(gcomp_init());
  gcomp_spec s;
  GCOMP_CHECK(gcomp_spec_parse(spec, &s));
  return from_spec(&s, spec, out);
}

void gcomp_codec_destroy(gcomp_codec *codec) {
  if (!codec) return;
  gcomp_ef_destroy(codec->ef);
  free(codec->part.buf);
  free(codec->scratch);
  free(codec->sums);
  free(codec);
}

size_t gcomp_codec_spec(const gcomp_codec *codec, char *buf, size_t buf_size) {
  if (!codec) return 0;
  return gcomp_spec_print(&codec->spec, buf, buf_size);
}

/* ---- answers for planners ------------------------------------------------------------- */
gcomp_status gcomp_codec_describe(const gcomp_codec *codec, gcomp_codec_info *out) {
  GCOMP_FAIL_IF(!codec || !out, GCOMP_ERR_INVALID, "gcomp_codec_describe: NULL argument");
  const gcomp_spec *s = &codec->spec;
  gcomp_codec_info info = {.struct_size = sizeof info,
                           .kind = s->kind->name,
                           .sparse = s->kind->sparse,
                           .error_feedback = s->ef,
                           .ef_momentum = s->ef ? s->ef_momentum : 0,
                           .ef_momentum_given = s->ef && s->ef_momentum_given,
                           .ef_mask = s->ef ? s->ef_mask : 0};
  return GCOMP_SIZED_COPY(out, &info, gcomp_codec_info, ef_mask, "gcomp_codec_describe");
}

int gcomp_codec_same(const gcomp_codec *a, const gcomp_codec *b) {
  if (a == b) return 1;
  if (!a || !b) return 0;
  /* kinds and stages are singletons: their pointers name them */
  return a->spec.kind == b->spec.kind && a->spec.stage == b->spec.stage &&
         a->ident.seed == b->ident.seed && !memcmp(a->ident.w, b->ident.w, sizeof a->ident.w);
}

uint64_t gcomp_codec_wire_id(const gcomp_codec *codec) {
  if (codec) return codec->wire_id;
  gcomp_spec none;
  gcomp_spec_ident id;
  gcomp_spec_none(&none);
  gcomp_spec_ident_of(&none, &id);
  return gcomp_spec_wire_id(&id);
}

int gcomp_codec_clone(const gcomp_codec *codec, gcomp_codec **out) {
  GCOMP_FAIL_IF(!codec || !out, GCOMP_ERR_INVALID, "gcomp_codec_clone: NULL argument");
  return from_spec(&codec->spec, NULL, out);
}

int gcomp_codec_second_stage(const gcomp_codec *codec, gcomp_codec **out) {
  GCOMP_FAIL_IF(!codec || !out, GCOMP_ERR_INVALID, "gcomp_codec_second_stage: NULL argument");
  gcomp_spec s = codec->spec;
  if (s.kind->sparse) {
    gcomp_spec_none(&s);
  } else if (!(s.ef && s.kind->second_ef)) {
    /* without +ef, as the parser leaves a spec that has none */
    s.ef = s.ef_dtype = s.ef_mask = s.ef_momentum_given = 0;
    s.ef_momentum = 0;
  }
  return from_spec(&s, NULL, out);
}

/* The token of `stage` in a canonical spec ("topk:..." is the kind's, "+ef:..." ef's):
 * its start and length, or NULL */
static const char *stage_token(const char *spec, const char *stage, size_t *len) {
  size_t n = strlen(stage);
  for (const char *p = spec; p; p = strchr(p, '+')) {
    if (*p == '+') p++;
    size_t tok = strcspn(p, "+");
    if (strncmp(p, stage, n) == 0 && (p[n] == ':' || p[n] == '+' || p[n] == '\0')) {
      *len = tok;
      return p;
    }
    p += tok;
    if (!*p) break;
  }
  return NULL;
}

/* 1 when the "k=v,k=v" list params names the key key[0..n) */
static int names_key(const char *params, const char *key, size_t n) {
  for (const char *p = params;; p++) {
    if (strncmp(p, key, n) == 0 && p[n] == '=') return 1;
    p += strcspn(p, ",");
    if (!*p) return 0;
  }
}

gcomp_status gcomp_codec_spec_with(const gcomp_codec *codec, const char *stage, const char *params,
                                   char *buf, size_t buf_size) {
  GCOMP_FAIL_IF(!codec || !stage || !params || !buf, GCOMP_ERR_INVALID,
                "gcomp_codec_spec_with: NULL argument");
  char canon[512], text[1024];
  gcomp_spec_print(&codec->spec, canon, sizeof canon);
  size_t len = 0;
  const char *tok = stage_token(canon, stage, &len);
  GCOMP_FAIL_IF(!tok, GCOMP_ERR_INVALID, "codec '%s' has no stage '%s'", canon, stage);
  /* the token again: its name, then its own parameters that params does not name, then
   * params (the parser refuses a key given twice) */
  const char *colon = memchr(tok, ':', len), *end = tok + len;
  size_t o = (size_t)snprintf(text, sizeof text, "%.*s", (int)((colon ? colon : end) - canon),
                              canon);
  char sep = ':';
  for (const char *p = colon ? colon + 1 : end; p < end;) {
    size_t kv = strcspn(p, ",+"), key = strcspn(p, "=");
    if (!names_key(params, p, key) && o < sizeof text)
      o += (size_t)snprintf(text + o, sizeof text - o, "%c%.*s", sep, (int)kv, p), sep = ',';
    p += kv + (p[kv] == ',');
  }
  if (o < sizeof text) o += (size_t)snprintf(text + o, sizeof text - o, "%c%s%s", sep, params, end);
  GCOMP_FAIL_IF(o >= sizeof text, GCOMP_ERR_INVALID, "codec '%s' with '%s' on '%s': too long",
                canon, params, stage);
  gcomp_spec s;
  GCOMP_CHECK(gcomp_spec_parse(text, &s));   /* validated as gcomp_codec_create would */
  size_t need = gcomp_spec_print(&s, buf, buf_size);
  GCOMP_FAIL_IF(need >= buf_size, GCOMP_ERR_NOMEM,
                "gcomp_codec_spec_with: %zu bytes of room, the spec needs %zu", buf_size,
                need + 1);
  return GCOMP_OK;
}

/* Counts whose frame size would wrap size_t (no buffer that large can exist; a kind's
 * payload is at most a little over 4 bytes a value). */
static int count_too_large(size_t count) { return count > SIZE_MAX / 16; }

static size_t max_payload(const gcomp_codec *codec, size_t count) {
  return codec->spec.kind->max_payload(&codec->spec.cfg, count);
}

size_t gcomp_codec_max_encoded_size(const gcomp_codec *codec, size_t count) {
  if (!codec || count_too_large(count)) return SIZE_MAX;   /* no buffer holds it */
  /* a stage's output is only kept when it is smaller than its input */
  return (size_t)gcomp_frame_size(max_payload(codec, count));
}

void gcomp_enc_restart(gcomp_enc_ctx *ctx) {
  if (ctx->sums) ctx->sums->done = 0;
}

static int reserve(uint8_t **buf, size_t *cap, size_t need) {
  if (*cap >= need) return GCOMP_OK;
  uint8_t *p = realloc(*buf, need);
  GCOMP_FAIL_IF(!p, GCOMP_ERR_NOMEM, "growing a codec buffer to %zu bytes", need);
  *buf = p;
  *cap = need;
  return GCOMP_OK;
}

/* Runs the kind (with error feedback when asked) into dst. */
static int encode_payload(gcomp_codec *c, gcomp_enc_ctx *ctx, uint64_t key, const float *src,
                          size_t count, uint8_t *dst, size_t cap, size_t *len) {
  const gcomp_kind *k = c->spec.kind;
  if (c->ef) return gcomp_ef_encode(c->ef, k, &c->spec.cfg, ctx, key, src, count, dst, cap, len);
  ctx->kind_state = &c->kind_state;
  return k->encode(&c->spec.cfg, ctx, src, count, dst, cap, len);
}

/* Runs the lossless stage over the kind's payload raw[0..raw_len) into the frame (or copies
 * it there raw when the stage does not pay); fills the frame info's stage fields. */
static int stage_payload(gcomp_codec *c, const uint8_t *raw, size_t raw_len, uint8_t *payload,
                         gcomp_frame_info *info, size_t *len) {
  const gcomp_stage *st = c->spec.stage;
  /* the stage must beat the raw payload by at least a byte, or the payload goes raw; that
   * is no failure, so the caller's last error detail survives it */
  char saved[1024];
  snprintf(saved, sizeof saved, "%s", gcomp_last_error());
  uint8_t sflags = 0;
  int s = raw_len > 1 ? gcomp_stage_encode(st, &c->spec.stage_cfg, c->spec.kind->elem_bytes,
                                           raw, raw_len, payload, raw_len - 1, len, &sflags)
                      : GCOMP_ERR_NOMEM;
  if (s == GCOMP_OK) {
    info->stage = st->id;
    info->flags |= sflags;
  } else if (s == GCOMP_ERR_NOMEM) {
    gcomp_error_restore(GCOMP_OK, saved);
    memcpy(payload, raw, raw_len);
    *len = raw_len;
  } else {
    return gcomp_error_trace(s, __FILE__, __LINE__);
  }
  return GCOMP_OK;
}

/* Room for the block checksums of a payload of up to room bytes. */
static int reserve_sums(gcomp_codec *c, size_t room) {
  size_t nsums = (size_t)gcomp_frame_nblocks(room);
  if (c->sums_cap >= nsums) return GCOMP_OK;
  uint32_t *p = realloc(c->sums, nsums * sizeof *p);
  GCOMP_FAIL_IF(!p, GCOMP_ERR_NOMEM, "gcomp_encode: %zu block checksums", nsums);
  c->sums = p;
  c->sums_cap = nsums;
  return GCOMP_OK;
}

static int check_room(const gcomp_codec *c, size_t count, size_t cap) {
  GCOMP_FAIL_IF(count_too_large(count), GCOMP_ERR_INVALID,
                "gcomp_encode: %zu values are more than any buffer can hold", count);
  size_t max = gcomp_codec_max_encoded_size(c, count);
  GCOMP_FAIL_IF(cap < max, GCOMP_ERR_NOMEM,
                "gcomp_encode: %zu bytes of room, %zu needed for %zu values (see "
                "gcomp_codec_max_encoded_size)", cap, max, count);
  return GCOMP_OK;
}

/* Header and checksums around a payload of len bytes at frame + GCOMP_FRAME_HEADER, and
 * the codec's counters. */
static void seal(gcomp_codec *c, uint8_t *frame, gcomp_frame_info *info, gcomp_frame_sums *sums,
                 size_t count, size_t len, size_t *dst_len) {
  info->payload_len = len;
  gcomp_frame_sums_finish(sums, len);
  gcomp_frame_seal_sums(frame, info, sums);
  *dst_len = (size_t)gcomp_frame_size(len);
  c->seq++;
  c->stats.frames_encoded++;
  c->stats.elements_encoded += count;
  c->stats.bytes_in += count * sizeof(float);
  c->stats.bytes_out += *dst_len;
}

gcomp_status gcomp_encode(gcomp_codec *codec, uint64_t key, const float *src, size_t count,
                          void *dst, size_t dst_capacity, size_t *dst_len) {
  GCOMP_FAIL_IF(!codec || !dst || !dst_len || (!src && count), GCOMP_ERR_INVALID,
                "gcomp_encode: NULL argument");
  gcomp_codec *c = codec;
  GCOMP_CHECK(check_room(c, count, dst_capacity));
  uint8_t *frame = dst, *payload = frame + GCOMP_FRAME_HEADER;
  /* the payload's room stops where the largest payload's checksums would start */
  size_t room = max_payload(c, count);
  GCOMP_CHECK(reserve_sums(c, room));
  gcomp_frame_sums sums = {.payload = payload, .done = 0, .crc = c->sums};
  gcomp_enc_ctx ctx = {.seq = c->seq, .stats = &c->stats, .param = 0};
  gcomp_frame_info info = {.kind = c->spec.kind->id, .count = count,
                           .flags = c->ef ? GCOMP_FRAME_F_EF : 0};
  size_t len = 0;
  if (!c->spec.stage) {
    ctx.sums = &sums;   /* the kind writes the frame's payload: it sums as it goes */
    GCOMP_CHECK(encode_payload(c, &ctx, key, src, count, payload, room, &len));
  } else {
    GCOMP_CHECK(reserve(&c->scratch, &c->scratch_cap, room + 1));
    size_t raw_len;
    GCOMP_CHECK(encode_payload(c, &ctx, key, src, count, c->scratch, room, &raw_len));
    GCOMP_CHECK(stage_payload(c, c->scratch, raw_len, payload, &info, &len));
  }
  info.param = ctx.param;
  seal(c, frame, &info, &sums, count, len, dst_len);
  return GCOMP_OK;
}

/* ---- an encode in parts ----------------------------------------------------------------- */
/* Values summed per encode of a part: whole units, about 16 KiB of them (in L1 while the
 * kind reads them twice) */
enum { PART_VALUES = 4096 };

size_t gcomp_codec_part_values(const gcomp_codec *c) {
  const gcomp_kind *k = c ? c->spec.kind : NULL;
  if (!k || !k->part_values || !k->decode_part || !k->reads_in_blocks || c->spec.stage)
    return 0;
  if (c->ef && (c->spec.ef_dtype != GCOMP_EF_FP32 || c->spec.ef_momentum != 0)) return 0;
  return k->part_values(&c->spec.cfg);
}

int gcomp_encode_sum_begin(gcomp_codec *c, uint64_t key, size_t count, void *dst, size_t cap) {
  GCOMP_FAIL_IF(!c || !dst, GCOMP_ERR_INVALID, "gcomp_encode_sum_begin: NULL argument");
  size_t unit = gcomp_codec_part_values(c);
  GCOMP_FAIL_IF(!unit, GCOMP_ERR_UNSUPPORTED,
                "gcomp_encode_sum_begin: codec '%s' cannot be encoded in parts",
                c->spec.kind->name);
  GCOMP_CHECK(check_room(c, count, cap));
  unit *= unit < PART_VALUES ? PART_VALUES / unit : 1;
  if (c->part.unit < unit) {
    float *b = realloc(c->part.buf, unit * sizeof *b);
    GCOMP_FAIL_IF(!b, GCOMP_ERR_NOMEM, "gcomp_encode_sum_begin: a buffer of %zu values", unit);
    c->part.buf = b;
    c->part.unit = unit;
  }
  size_t room = max_payload(c, count);
  GCOMP_CHECK(reserve_sums(c, room));
  float *res = NULL;
  if (c->ef) GCOMP_CHECK(gcomp_ef_slot(c->ef, key, count, &res));
  uint8_t *frame = dst;
  c->part.open = 1;
  c->part.frame = frame;
  c->part.key = key;
  c->part.count = count, c->part.fed = 0, c->part.room = room, c->part.len = 0;
  c->part.res = res;
  c->part.sums = (gcomp_frame_sums){.payload = frame + GCOMP_FRAME_HEADER, .crc = c->sums};
  c->part.param = 0;
  c->part.fill = 0;
  return GCOMP_OK;
}

/* Encodes the values summed since the last flush onto the payload: from the buffer, or with
 * error feedback from the residual, which holds x = residual + sum already. */
static int part_flush(gcomp_codec *c) {
  const gcomp_kind *k = c->spec.kind;
  size_t n = c->part.fill, done = c->part.fed - n, w = 0;
  uint8_t *out = c->part.frame + GCOMP_FRAME_HEADER + c->part.len;
  size_t room = c->part.room - c->part.len;
  /* no state word: a kind that encodes in parts keeps none */
  gcomp_enc_ctx ctx = {.seq = c->seq, .stats = &c->stats};
  int st = c->ef ? k->encode_ef(k, &c->spec.cfg, &ctx, NULL, c->part.res + done, n, out, room,
                                &w)
                 : k->encode(&c->spec.cfg, &ctx, c->part.buf, n, out, room, &w);
  if (st < 0) {
    c->part.open = 0;
    return gcomp_error_trace(st, __FILE__, __LINE__);
  }
  c->part.param = ctx.param;
  c->part.len += w;
  c->part.fill = 0;
  gcomp_frame_sums_add(&c->part.sums, c->part.len);
  return GCOMP_OK;
}

int gcomp_encode_sum_part(gcomp_codec *c, const float *const *src, int nsrc, size_t n) {
  GCOMP_FAIL_IF(!c || !c->part.open, GCOMP_ERR_INVALID,
                "gcomp_encode_sum_part: no encode in parts begun");
  GCOMP_FAIL_IF(nsrc < 1 || !src || n > c->part.count - c->part.fed, GCOMP_ERR_INVALID,
                "gcomp_encode_sum_part: %zu values from %d sources, %zu of %zu left", n, nsrc,
                c->part.count - c->part.fed, c->part.count);
  /* the SIMD fp32 adds of the kinds that encode in parts (sign, quant) */
  const gcomp_lowbit_kernels *K = gcomp_lowbit_kernels_get();
  for (size_t at = 0; at < n;) {
    size_t take = c->part.unit - c->part.fill;
    if (take > n - at) take = n - at;
    /* with error feedback the sum goes straight into the residual, read in the same pass
     * as the operands: r + x is what encode_ef forms from a gradient x, bit for bit */
    float *restrict r = c->ef ? c->part.res + c->part.fed : NULL;
    float *restrict d = c->part.buf + (r ? 0 : c->part.fill);
    const float *restrict a = src[0] + at;
    if (r && nsrc <= 2) {
      if (nsrc == 1) K->addto(r, a, take);
      else K->addto2(r, a, src[1] + at, take);
    } else if (nsrc == 1) {
      memcpy(d, a, take * sizeof *d);
    } else {
      const float *restrict b = src[1] + at;
      for (size_t i = 0; i < take; i++) d[i] = a[i] + b[i];
      for (int j = 2; j < nsrc; j++) {
        const float *restrict e = src[j] + at;
        for (size_t i = 0; i < take; i++) d[i] += e[i];
      }
      if (r) K->addto(r, d, take);
    }
    c->part.fill += take, c->part.fed += take, at += take;
    if (c->part.fill == c->part.unit) GCOMP_CHECK(part_flush(c));
  }
  return GCOMP_OK;
}

int gcomp_encode_sum_end(gcomp_codec *c, size_t *len) {
  GCOMP_FAIL_IF(!c || !len || !c->part.open, GCOMP_ERR_INVALID,
                "gcomp_encode_sum_end: no encode in parts begun");
  GCOMP_FAIL_IF(c->part.fed != c->part.count, GCOMP_ERR_INVALID,
                "gcomp_encode_sum_end: %zu of %zu values given", c->part.fed, c->part.count);
  if (c->part.fill || c->part.count == 0) GCOMP_CHECK(part_flush(c));
  c->part.open = 0;
  gcomp_frame_info info = {.kind = c->spec.kind->id, .count = c->part.count,
                           .flags = c->ef ? GCOMP_FRAME_F_EF : 0, .param = c->part.param};
  seal(c, c->part.frame, &info, &c->part.sums, c->part.count, c->part.len, len);
  return GCOMP_OK;
}

/* Opens a frame of count values for this codec: header, kind and count checked (the
 * payload is left to chk). */
static int open_frame(const gcomp_codec *c, const void *src, size_t src_len, size_t count,
                      gcomp_frame_info *info, gcomp_frame_check *chk) {
  GCOMP_FAIL_IF(count_too_large(count), GCOMP_ERR_INVALID,
                "gcomp_decode: %zu values are more than any buffer can hold", count);
  GCOMP_CHECK(gcomp_frame_open_check(src, src_len, info, chk));
  const gcomp_kind *k = c->spec.kind;
  GCOMP_FAIL_IF(info->kind != k->id, GCOMP_ERR_CORRUPT,
                "frame holds codec id %u, this codec is '%s' (id %u)", info->kind, k->name, k->id);
  GCOMP_FAIL_IF(info->count != count, GCOMP_ERR_CORRUPT,
                "frame holds %llu values, the caller expects %zu",
                (unsigned long long)info->count, count);
  return GCOMP_OK;
}

/* tally: where set, the NaN and Inf written (chk.nonfinite of a kind that counts, in a
 * store mode), else UINT64_MAX */
static int decode_frame(const gcomp_codec *c, const void *src, size_t src_len, float *dst,
                        size_t count, int add, uint64_t *tally) {
  if (tally) *tally = UINT64_MAX;
  GCOMP_FAIL_IF(!c || (!src && src_len) || (!dst && count), GCOMP_ERR_INVALID,
                "gcomp_decode: NULL argument");
  gcomp_frame_info info;
  gcomp_frame_check chk;
  GCOMP_CHECK(open_frame(c, src, src_len, count, &info, &chk));
  const gcomp_kind *k = c->spec.kind;
  const uint8_t *payload = (const uint8_t *)src + GCOMP_FRAME_HEADER;
  size_t plen = (size_t)info.payload_len;
  if (info.stage == GCOMP_STAGE_NONE) {   /* gcomp_frame_open refused shuffle flags here */
    /* a kind that reads in blocks has each verified just before it reads it */
    if (!k->reads_in_blocks) GCOMP_CHECK(gcomp_frame_verify(&chk, plen));
    GCOMP_CHECK(k->decode(&c->spec.cfg, info.param, payload, plen, dst, count, add, &chk));
    /* bytes a decoder did not need are checked too */
    GCOMP_CHECK(gcomp_frame_verify(&chk, plen));
    if (tally && k->counts_nonfinite && add != GCOMP_DEC_ADD) *tally = chk.nonfinite;
    return GCOMP_OK;
  }
  const gcomp_stage *st = c->spec.stage;
  GCOMP_FAIL_IF(!st || st->id != info.stage, GCOMP_ERR_CORRUPT,
                "frame was compressed with stage id %u, this codec uses %s", info.stage,
                st ? st->name : "no lossless stage");
  GCOMP_CHECK(gcomp_frame_verify(&chk, plen));
  /* the stage decodes into a per-thread buffer: no allocation per frame, and decoding
   * stays thread-safe for one codec */
  const uint8_t *raw;
  size_t raw_len;
  GCOMP_CHECK(gcomp_stage_decode(st, info.flags, k->elem_bytes, payload, plen,
                                 max_payload(c, count), &raw, &raw_len));
  int s = k->decode(&c->spec.cfg, info.param, raw, raw_len, dst, count, add, NULL);
  gcomp_tls_trim(GCOMP_TLS_KEEP);   /* past 64 MiB the page faults of a fresh buffer are noise */
  if (s < 0) return gcomp_error_trace(s, __FILE__, __LINE__);
  return GCOMP_OK;
}

int gcomp_decode_parts_begin(const gcomp_codec *c, const void *frame, size_t len, size_t count,
                             gcomp_dec_parts *d) {
  GCOMP_FAIL_IF(!c || !d || (!frame && len), GCOMP_ERR_INVALID,
                "gcomp_decode_parts_begin: NULL argument");
  GCOMP_FAIL_IF(!gcomp_codec_part_values(c), GCOMP_ERR_UNSUPPORTED,
                "gcomp_decode_parts_begin: codec '%s' cannot be decoded in parts",
                c->spec.kind->name);
  gcomp_frame_info info;
  *d = (gcomp_dec_parts){.codec = c, .count = count};
  GCOMP_CHECK(open_frame(c, frame, len, count, &info, &d->chk));
  GCOMP_FAIL_IF(info.stage != GCOMP_STAGE_NONE, GCOMP_ERR_CORRUPT,
                "frame was compressed with stage id %u, this codec uses no lossless stage",
                info.stage);
  d->payload = (const uint8_t *)frame + GCOMP_FRAME_HEADER;
  d->len = (size_t)info.payload_len;
  d->param = info.param;
  /* the frame's parameter, checked now as gcomp_decode checks it before any value: a frame
   * of 0 values has no part to check it in */
  size_t o = 0;
  return c->spec.kind->decode_part(&c->spec.cfg, d->param, d->payload, d->len, &o, NULL, 0, 0, 0,
                                   &d->chk);
}

int gcomp_decode_part(gcomp_dec_parts *d, float *dst, size_t n, int add) {
  GCOMP_FAIL_IF(!d || !d->codec || (!dst && n), GCOMP_ERR_INVALID,
                "gcomp_decode_part: NULL argument");
  const gcomp_codec *c = d->codec;
  size_t unit = gcomp_codec_part_values(c);
  GCOMP_FAIL_IF(n > d->count - d->done || (n % unit && d->done + n != d->count),
                GCOMP_ERR_INVALID, "gcomp_decode_part: %zu values at %zu of %zu (parts of %zu)",
                n, d->done, d->count, unit);
  GCOMP_CHECK(c->spec.kind->decode_part(&c->spec.cfg, d->param, d->payload, d->len, &d->o, dst,
                                        d->done, n, add, &d->chk));
  d->done += n;
  return GCOMP_OK;
}

int gcomp_decode_parts_end(gcomp_dec_parts *d) {
  GCOMP_FAIL_IF(!d || !d->codec || d->done != d->count, GCOMP_ERR_INVALID,
                "gcomp_decode_parts_end: %zu of %zu values decoded", d ? d->done : 0,
                d ? d->count : 0);
  GCOMP_FAIL_IF(d->o != d->len, GCOMP_ERR_CORRUPT, "%s: %zu bytes after the last bucket",
                d->codec->spec.kind->name, d->len - d->o);
  return gcomp_frame_verify(&d->chk, d->len);
}

gcomp_status gcomp_decode(const gcomp_codec *codec, const void *src, size_t src_len, float *dst,
                          size_t count) {
  return decode_frame(codec, src, src_len, dst, count, GCOMP_DEC_STORE, NULL);
}

gcomp_status gcomp_decode_add(const gcomp_codec *codec, const void *src, size_t src_len, float *acc,
                              size_t count) {
  return decode_frame(codec, src, src_len, acc, count, GCOMP_DEC_ADD, NULL);
}

int gcomp_decode_tally(const gcomp_codec *codec, const void *src, size_t src_len, float *dst,
                       size_t count, int stream, uint64_t *nonfinite) {
  /* only the kinds that decode in parts take the streaming mode; the others store as usual */
  int mode = stream && codec && codec->spec.kind->decode_part ? GCOMP_DEC_STREAM
                                                              : GCOMP_DEC_STORE;
  int st = decode_frame(codec, src, src_len, dst, count, mode, nonfinite);
#if defined(__x86_64__) || defined(__i386__)
  if (mode == GCOMP_DEC_STREAM) __builtin_ia32_sfence();   /* the streaming stores, visible */
#endif
  return st;
}

gcomp_status gcomp_codec_get_stats(const gcomp_codec *codec, gcomp_codec_stats *out) {
  GCOMP_FAIL_IF(!codec || !out, GCOMP_ERR_INVALID, "gcomp_codec_get_stats: NULL argument");
  return GCOMP_SIZED_COPY(out, &codec->stats, gcomp_codec_stats, underflows,
                          "gcomp_codec_get_stats");
}

void gcomp_codec_reset_stats(gcomp_codec *codec) {
  if (codec) memset(&codec->stats, 0, sizeof codec->stats);
}

gcomp_status gcomp_codec_save_residuals(const gcomp_codec *codec, const char *path) {
  GCOMP_FAIL_IF(!codec || !path, GCOMP_ERR_INVALID, "gcomp_codec_save_residuals: NULL argument");
  GCOMP_FAIL_IF(!codec->ef, GCOMP_ERR_INVALID,
                "gcomp_codec_save_residuals: the codec has no error feedback (+ef)");
  char canon[1024];
  gcomp_spec_print(&codec->spec, canon, sizeof canon);
  return gcomp_ef_save(codec->ef, canon, path);
}

gcomp_status gcomp_codec_load_residuals(gcomp_codec *codec, const char *path) {
  GCOMP_FAIL_IF(!codec || !path, GCOMP_ERR_INVALID, "gcomp_codec_load_residuals: NULL argument");
  GCOMP_FAIL_IF(!codec->ef, GCOMP_ERR_INVALID,
                "gcomp_codec_load_residuals: the codec has no error feedback (+ef)");
  char canon[1024];
  gcomp_spec_print(&codec->spec, canon, sizeof canon);
  return gcomp_ef_load(codec->ef, canon, path);
}

gcomp_status gcomp_codec_reset_residuals(gcomp_codec *codec) {
  GCOMP_FAIL_IF(!codec, GCOMP_ERR_INVALID, "gcomp_codec_reset_residuals: NULL codec");
  if (codec->ef) gcomp_ef_reset(codec->ef);
  codec->kind_state = 0;
  return GCOMP_OK;
}
