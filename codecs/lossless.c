/* Lossless stages (zstd, ISA-L igzip) over byte-shuffled payload bytes, the staged-payload
 * layout, and the per-thread scratch that keeps them free of per-call allocations. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <isa-l/igzip_lib.h>
/* for ZSTD_c_literalCompressionMode (experimental in the API, present since zstd 1.4.5 and
 * reached through the stable ZSTD_CCtx_setParameter; refused at run time if absent) */
#define ZSTD_STATIC_LINKING_ONLY
#include <zstd.h>
#include <zstd_errors.h>

#include "frame.h"
#include "lossless.h"

/* ---- per-thread scratch ----------------------------------------------------------------
 * Decoding is thread-safe for one codec, so its buffers cannot live in the codec; a
 * buffer per thread, kept between calls, costs one allocation per thread instead of one
 * (with its page faults) per frame. A pthread key frees them when the thread exits. */
typedef struct {
  void *buf[GCOMP_TLS_SLOTS];
  size_t cap[GCOMP_TLS_SLOTS];
  ZSTD_CCtx *cctx;
  ZSTD_CCtx *ectx;   /* entropy-only: for exponent planes */
  ZSTD_DCtx *dctx;
  int registered;
} tls_state;

static _Thread_local tls_state tls;
static pthread_key_t tls_key;
static pthread_once_t tls_once = PTHREAD_ONCE_INIT;
static int tls_key_ok;

static void tls_free(void *arg) {
  tls_state *t = arg;
  for (int i = 0; i < GCOMP_TLS_SLOTS; i++) {
    free(t->buf[i]);
    t->buf[i] = NULL;
    t->cap[i] = 0;
  }
  ZSTD_freeCCtx(t->cctx);
  ZSTD_freeCCtx(t->ectx);
  ZSTD_freeDCtx(t->dctx);
  t->cctx = NULL;
  t->ectx = NULL;
  t->dctx = NULL;
  t->registered = 0;
}

static void tls_make_key(void) { tls_key_ok = pthread_key_create(&tls_key, tls_free) == 0; }

static void tls_register(void) {
  if (tls.registered) return;
  pthread_once(&tls_once, tls_make_key);
  if (tls_key_ok && pthread_setspecific(tls_key, &tls) == 0) tls.registered = 1;
}

void *gcomp_tls_buffer(int slot, size_t need) {
  if (slot < 0 || slot >= GCOMP_TLS_SLOTS) return NULL;
  if (tls.cap[slot] >= need && tls.buf[slot]) return tls.buf[slot];
  tls_register();
  free(tls.buf[slot]);   /* not realloc: the old contents are not needed */
  size_t cap = need < 4096 ? 4096 : need;
  tls.buf[slot] = malloc(cap);
  tls.cap[slot] = tls.buf[slot] ? cap : 0;
  return tls.buf[slot];
}

void gcomp_tls_trim(size_t keep) {
  for (int i = 0; i < GCOMP_TLS_SLOTS; i++) {
    if (tls.cap[i] <= keep) continue;
    free(tls.buf[i]);
    tls.buf[i] = NULL;
    tls.cap[i] = 0;
  }
}

/* ---- byte planes ---------------------------------------------------------------------- */
const gcomp_shuffle_kernels *gcomp_shuffle_kernels_get(void) {
  return gcomp_isa_level() >= GCOMP_ISA_AVX2 ? &gcomp_shuffle_kernels_avx2
                                             : &gcomp_shuffle_kernels_base;
}

enum { MAX_WIDTH = 16 };

void gcomp_shuffle(const uint8_t *restrict in, size_t n, unsigned width, uint8_t *restrict out) {
  if (width < 2 || width > MAX_WIDTH) {
    memcpy(out, in, n);
    return;
  }
  size_t elems = n / width;
  uint8_t *planes[MAX_WIDTH];
  for (unsigned b = 0; b < width; b++) planes[b] = out + b * elems;
  gcomp_shuffle_kernels_get()->split(in, elems, width, planes);
  memcpy(out + elems * width, in + elems * width, n - elems * width);
}

void gcomp_unshuffle(const uint8_t *restrict in, size_t n, unsigned width, uint8_t *restrict out) {
  if (width < 2 || width > MAX_WIDTH) {
    memcpy(out, in, n);
    return;
  }
  size_t elems = n / width;
  const uint8_t *planes[MAX_WIDTH];
  for (unsigned b = 0; b < width; b++) planes[b] = in + b * elems;
  gcomp_shuffle_kernels_get()->join(planes, elems, width, out);
  memcpy(out + elems * width, in + elems * width, n - elems * width);
}

/* ---- parameters shared by the stages ------------------------------------------------- */
static int common_set(const char *stage, int min_level, int max_level, gcomp_stage_cfg *cfg,
                      const char *key, const char *value) {
  gcomp_stage_common *c = (gcomp_stage_common *)cfg;
  if (strcmp(key, "level") == 0) {
    uint64_t v;
    GCOMP_CHECK(gcomp_kv_u64(stage, key, value, (uint64_t)min_level, (uint64_t)max_level, &v));
    c->level = (int)v;
    return GCOMP_OK;
  }
  if (strcmp(key, "planes") == 0) return gcomp_kv_choice(stage, key, value, "exp|all", &c->planes);
  GCOMP_FAIL(GCOMP_ERR_INVALID, "%s: unknown parameter '%s' (valid: level, planes)", stage, key);
}

static size_t common_print(const gcomp_stage_cfg *cfg, char *buf, size_t n) {
  const gcomp_stage_common *c = (const gcomp_stage_common *)cfg;
  return (size_t)snprintf(buf, n, "level=%d,planes=%s", c->level,
                          c->planes == GCOMP_PLANES_ALL ? "all" : "exp");
}

static void defaults_level1(gcomp_stage_cfg *cfg) {
  memset(cfg, 0, sizeof *cfg);
  ((gcomp_stage_common *)cfg)->level = 1;
  ((gcomp_stage_common *)cfg)->planes = GCOMP_PLANES_EXP;
}

/* ---- zstd ----------------------------------------------------------------------------- */
static int zstd_set(gcomp_stage_cfg *cfg, const char *key, const char *value) {
  return common_set("zstd", 1, 19, cfg, key, value);
}

static int zstd_compress(const gcomp_stage_cfg *cfg, const uint8_t *in, size_t in_len,
                         uint8_t *out, size_t cap, size_t *out_len) {
  if (!tls.cctx) {
    tls_register();
    tls.cctx = ZSTD_createCCtx();
    GCOMP_FAIL_IF(!tls.cctx, GCOMP_ERR_NOMEM, "zstd: cannot create a compression context");
  }
  size_t r = ZSTD_compressCCtx(tls.cctx, out, cap, in, in_len,
                               ((const gcomp_stage_common *)cfg)->level);
  if (ZSTD_isError(r)) {
    GCOMP_FAIL_IF(ZSTD_getErrorCode(r) == ZSTD_error_dstSize_tooSmall, GCOMP_ERR_NOMEM,
                  "zstd: output does not fit in %zu bytes", cap);
    GCOMP_FAIL(GCOMP_ERR_INVALID, "zstd: %s", ZSTD_getErrorName(r));
  }
  *out_len = r;
  return GCOMP_OK;
}

/* The exponent plane through zstd's Huffman literal coder alone: the fastest level
 * (whose match search finds next to nothing) with literal compression forced on. On
 * N(0, 1e-3) bf16 exponents this is ~3x faster than level 1 and compresses better (2.98x
 * vs 2.73x, 97% of the order-0 bound): the plane has skew but little repetition. */
static int zstd_compress_plane(const gcomp_stage_cfg *cfg, const uint8_t *in, size_t in_len,
                               uint8_t *out, size_t cap, size_t *out_len) {
  if (!tls.ectx) {
    tls_register();
    ZSTD_CCtx *e = ZSTD_createCCtx();
    GCOMP_FAIL_IF(!e, GCOMP_ERR_NOMEM, "zstd: cannot create a compression context");
    if (ZSTD_isError(ZSTD_CCtx_setParameter(e, ZSTD_c_compressionLevel, ZSTD_minCLevel())) ||
        ZSTD_isError(ZSTD_CCtx_setParameter(e, ZSTD_c_literalCompressionMode, ZSTD_ps_enable))) {
      /* a libzstd without the parameter: level 1 still codes the plane, only slower */
      ZSTD_CCtx_reset(e, ZSTD_reset_session_and_parameters);
      ZSTD_CCtx_setParameter(e, ZSTD_c_compressionLevel, 1);
    }
    tls.ectx = e;
  }
  size_t r = ZSTD_compress2(tls.ectx, out, cap, in, in_len);
  if (ZSTD_isError(r)) {
    GCOMP_FAIL_IF(ZSTD_getErrorCode(r) == ZSTD_error_dstSize_tooSmall, GCOMP_ERR_NOMEM,
                  "zstd: output does not fit in %zu bytes", cap);
    GCOMP_FAIL(GCOMP_ERR_INVALID, "zstd: %s", ZSTD_getErrorName(r));
  }
  *out_len = r;
  return GCOMP_OK;
}

static int zstd_decompress(const uint8_t *in, size_t in_len, uint8_t *out, size_t want) {
  unsigned long long size = ZSTD_getFrameContentSize(in, in_len);
  GCOMP_FAIL_IF(size == ZSTD_CONTENTSIZE_ERROR || size == ZSTD_CONTENTSIZE_UNKNOWN,
                GCOMP_ERR_CORRUPT, "zstd: payload is not a zstd frame with a known size");
  GCOMP_FAIL_IF(size != want, GCOMP_ERR_CORRUPT, "zstd: payload expands to %llu bytes, not %zu",
                size, want);
  if (!tls.dctx) {
    tls_register();
    tls.dctx = ZSTD_createDCtx();
    GCOMP_FAIL_IF(!tls.dctx, GCOMP_ERR_NOMEM, "zstd: cannot create a decompression context");
  }
  size_t r = ZSTD_decompressDCtx(tls.dctx, out, want, in, in_len);
  GCOMP_FAIL_IF(ZSTD_isError(r), GCOMP_ERR_CORRUPT, "zstd: %s", ZSTD_getErrorName(r));
  GCOMP_FAIL_IF(r != want, GCOMP_ERR_CORRUPT, "zstd: payload expands to %zu bytes, not %zu", r,
                want);
  return GCOMP_OK;
}

static const gcomp_stage stage_zstd = {
    .name = "zstd",
    .id = GCOMP_STAGE_ZSTD,
    .keys = "level, planes",
    .shuffle = 1,
    .defaults = defaults_level1,
    .set = zstd_set,
    .print = common_print,
    .compress = zstd_compress,
    .compress_plane = zstd_compress_plane,
    .decompress = zstd_decompress,
};

/* ---- ISA-L igzip (raw deflate) --------------------------------------------------------
 * Level 0 is ISA-L's fastest mode; on gradients it expands the data (the frame then goes
 * raw), so the default is 1. Levels 1-3 need a level buffer: kept per thread. */
static const uint32_t igzip_level_buf[4] = {0, ISAL_DEF_LVL1_DEFAULT, ISAL_DEF_LVL2_DEFAULT,
                                            ISAL_DEF_LVL3_DEFAULT};

static int igzip_set(gcomp_stage_cfg *cfg, const char *key, const char *value) {
  return common_set("igzip", 0, 3, cfg, key, value);
}

static int igzip_compress(const gcomp_stage_cfg *cfg, const uint8_t *in, size_t in_len,
                          uint8_t *out, size_t cap, size_t *out_len) {
  int level = ((const gcomp_stage_common *)cfg)->level;
  /* ISA-L counts in 32 bits; larger payloads go raw rather than in pieces */
  GCOMP_FAIL_IF(in_len > UINT32_MAX, GCOMP_ERR_NOMEM, "igzip: %zu bytes exceed one stream",
                in_len);
  if (cap > UINT32_MAX) cap = UINT32_MAX;
  uint8_t *mem = gcomp_tls_buffer(GCOMP_TLS_IGZIP, sizeof(struct isal_zstream) +
                                                       igzip_level_buf[level]);
  GCOMP_FAIL_IF(!mem, GCOMP_ERR_NOMEM, "igzip: level buffer of %u bytes", igzip_level_buf[level]);
  struct isal_zstream *zs = (struct isal_zstream *)mem;
  isal_deflate_stateless_init(zs);
  zs->next_in = (uint8_t *)in;
  zs->avail_in = (uint32_t)in_len;
  zs->next_out = out;
  zs->avail_out = (uint32_t)cap;
  zs->end_of_stream = 1;
  zs->flush = NO_FLUSH;
  zs->gzip_flag = IGZIP_DEFLATE;
  zs->level = (uint32_t)level;
  zs->level_buf = level ? mem + sizeof *zs : NULL;
  zs->level_buf_size = igzip_level_buf[level];
  int r = isal_deflate_stateless(zs);
  GCOMP_FAIL_IF(r == STATELESS_OVERFLOW, GCOMP_ERR_NOMEM, "igzip: output does not fit in %zu bytes",
                cap);
  GCOMP_FAIL_IF(r == ISAL_INVALID_LEVEL, GCOMP_ERR_UNSUPPORTED,
                "igzip: level %d is not supported by this ISA-L build", level);
  GCOMP_FAIL_IF(r != COMP_OK, GCOMP_ERR_INVALID, "igzip: isal_deflate_stateless returned %d", r);
  *out_len = zs->total_out;
  return GCOMP_OK;
}

static int igzip_decompress(const uint8_t *in, size_t in_len, uint8_t *out, size_t want) {
  GCOMP_FAIL_IF(in_len > UINT32_MAX || want > UINT32_MAX, GCOMP_ERR_CORRUPT,
                "igzip: %zu bytes into %zu exceed one stream", in_len, want);
  struct inflate_state *st = gcomp_tls_buffer(GCOMP_TLS_IGZIP, sizeof *st);
  GCOMP_FAIL_IF(!st, GCOMP_ERR_NOMEM, "igzip: inflate state of %zu bytes", sizeof *st);
  isal_inflate_init(st);
  st->next_in = (uint8_t *)in;
  st->avail_in = (uint32_t)in_len;
  st->next_out = out;
  st->avail_out = (uint32_t)want;
  st->crc_flag = ISAL_DEFLATE;
  int r = isal_inflate_stateless(st);
  GCOMP_FAIL_IF(r != ISAL_DECOMP_OK, GCOMP_ERR_CORRUPT, "igzip: payload does not inflate (%d)", r);
  GCOMP_FAIL_IF(st->total_out != want, GCOMP_ERR_CORRUPT,
                "igzip: payload inflates to %u bytes, not %zu", st->total_out, want);
  /* the stream must end where the payload does (zstd refuses trailing bytes too): what is
   * left is the unread input plus whole bytes still in the bit buffer */
  size_t left = st->avail_in + (size_t)(st->read_in_length >> 3);
  GCOMP_FAIL_IF(left != 0, GCOMP_ERR_CORRUPT, "igzip: %zu bytes after the end of the stream",
                left);
  return GCOMP_OK;
}

static const gcomp_stage stage_igzip = {
    .name = "igzip",
    .id = GCOMP_STAGE_IGZIP,
    .keys = "level, planes",
    .shuffle = 1,
    .defaults = defaults_level1,
    .set = igzip_set,
    .print = common_print,
    .compress = igzip_compress,
    .decompress = igzip_decompress,
};

static const gcomp_stage *const stages[] = {&stage_zstd, &stage_igzip};
enum { NSTAGES = sizeof stages / sizeof *stages };

const gcomp_stage *gcomp_stage_find(const char *name) {
  for (size_t i = 0; i < NSTAGES; i++)
    if (strcmp(stages[i]->name, name) == 0) return stages[i];
  return NULL;
}

const gcomp_stage *gcomp_stage_by_id(uint8_t id) {
  for (size_t i = 0; i < NSTAGES; i++)
    if (stages[i]->id == id) return stages[i];
  return NULL;
}

const char *gcomp_stage_names(void) {
  static const char names[] = "zstd, igzip";
  return names;
}

/* ---- staged payloads -------------------------------------------------------------------
 *   0  8  raw_len: bytes of the kind's payload
 *   all mode: 8.. the compressor's output over the payload (shuffled when F_SHUFFLED)
 *   exp mode (F_PLANES): 8.. byte planes 0..w-2 and the n % w tail, raw (raw_len - elems
 *            bytes), then the compressor's output over plane w-1 (elems bytes) to the end */
enum { STAGED_HEADER = 8 };

/* Exponent-plane mode pays only when the planes below the top one are close to random,
 * as a float's mantissa bytes are. Zeros, sparse, quantised payloads and sorted index
 * streams have compressible low planes: those frames go through the compressor whole.
 * The test, per low plane, over 8 runs of 512 consecutive elements spread over the
 * payload: the order-0 entropy of the bytes and of the differences between neighbours
 * (a sorted index's middle bytes look uniform overall but barely change from one element
 * to the next), each with the Miller-Madow correction for the sample's bias, must both
 * reach 7.5 bits per byte (so a plane left raw could have shrunk by 6% at most). Small
 * payloads (< 512 elements) always go whole. */
enum { RUNS = 8, RUN = 512 };

static double entropy_bits(const uint32_t hist[256], size_t n) {
  double h = 0;
  unsigned bins = 0;
  for (int v = 0; v < 256; v++) {
    if (!hist[v]) continue;
    double p = (double)hist[v] / (double)n;
    h -= p * log2(p);
    bins++;
  }
  return h + (double)(bins - 1) / (2.0 * (double)n * 0.6931471805599453);
}

static int low_planes_look_random(const uint8_t *raw, size_t elems, unsigned w) {
  if (elems < RUN) return 0;
  size_t runs = elems / RUN < RUNS ? elems / RUN : RUNS;
  size_t gap = (elems - RUN) / (runs > 1 ? runs - 1 : 1);
  for (unsigned b = 0; b + 1 < w; b++) {
    uint32_t hv[256] = {0}, hd[256] = {0};
    size_t nv = 0, nd = 0;
    for (size_t r = 0; r < runs; r++) {
      const uint8_t *p = raw + r * gap * w + b;
      uint8_t prev = p[0];
      hv[prev]++, nv++;
      for (size_t i = 1; i < RUN; i++) {
        uint8_t v = p[i * w];
        hv[v]++, nv++;
        hd[(uint8_t)(v - prev)]++, nd++;
        prev = v;
      }
    }
    if (entropy_bits(hv, nv) < 7.5 || entropy_bits(hd, nd) < 7.5) return 0;
  }
  return 1;
}

static int encode_planes(const gcomp_stage *st, const gcomp_stage_cfg *cfg, unsigned w,
                         const uint8_t *raw, size_t raw_len, uint8_t *out, size_t cap,
                         size_t *out_len) {
  size_t elems = raw_len / w, plain = raw_len - elems;
  GCOMP_FAIL_IF(cap <= STAGED_HEADER + plain, GCOMP_ERR_NOMEM,
                "stage: %zu bytes of room for %zu raw bytes", cap, plain);
  uint8_t *top = gcomp_tls_buffer(GCOMP_TLS_PLANES, elems);
  GCOMP_FAIL_IF(!top, GCOMP_ERR_NOMEM, "stage: plane buffer of %zu bytes", elems);
  uint8_t *planes[MAX_WIDTH];
  uint8_t *body = out + STAGED_HEADER;
  for (unsigned b = 0; b + 1 < w; b++) planes[b] = body + b * elems;
  planes[w - 1] = top;
  gcomp_shuffle_kernels_get()->split(raw, elems, w, planes);
  memcpy(body + (w - 1) * elems, raw + elems * w, raw_len - elems * w);
  size_t zlen;
  int (*compress)(const gcomp_stage_cfg *, const uint8_t *, size_t, uint8_t *, size_t, size_t *) =
      st->compress_plane ? st->compress_plane : st->compress;
  GCOMP_CHECK(compress(cfg, top, elems, body + plain, cap - STAGED_HEADER - plain, &zlen));
  *out_len = STAGED_HEADER + plain + zlen;
  return GCOMP_OK;
}

int gcomp_stage_encode(const gcomp_stage *st, const gcomp_stage_cfg *cfg, unsigned width,
                       const uint8_t *raw, size_t raw_len, uint8_t *out, size_t cap,
                       size_t *out_len, uint8_t *flags) {
  *flags = 0;
  GCOMP_FAIL_IF(raw_len == 0 || cap <= STAGED_HEADER, GCOMP_ERR_NOMEM,
                "stage: nothing to gain on %zu bytes", raw_len);
  int shuffle = st->shuffle && width >= 2 && width <= MAX_WIDTH && raw_len >= width;
  gcomp_store_le64(out, raw_len);
  if (shuffle && ((const gcomp_stage_common *)cfg)->planes == GCOMP_PLANES_EXP &&
      low_planes_look_random(raw, raw_len / width, width)) {
    GCOMP_CHECK(encode_planes(st, cfg, width, raw, raw_len, out, cap, out_len));
    *flags = GCOMP_FRAME_F_SHUFFLED | GCOMP_FRAME_F_PLANES;
    return GCOMP_OK;
  }
  const uint8_t *in = raw;
  if (shuffle) {
    uint8_t *shuf = gcomp_tls_buffer(GCOMP_TLS_PLANES, raw_len);
    GCOMP_FAIL_IF(!shuf, GCOMP_ERR_NOMEM, "stage: shuffle buffer of %zu bytes", raw_len);
    gcomp_shuffle(raw, raw_len, width, shuf);
    in = shuf;
  }
  size_t zlen;
  GCOMP_CHECK(st->compress(cfg, in, raw_len, out + STAGED_HEADER, cap - STAGED_HEADER, &zlen));
  *out_len = STAGED_HEADER + zlen;
  *flags = shuffle ? GCOMP_FRAME_F_SHUFFLED : 0;
  return GCOMP_OK;
}

int gcomp_stage_decode(const gcomp_stage *st, uint8_t flags, unsigned width, const uint8_t *in,
                       size_t in_len, size_t max_raw, const uint8_t **raw, size_t *raw_len) {
  GCOMP_FAIL_IF(in_len < STAGED_HEADER, GCOMP_ERR_CORRUPT,
                "%s: staged payload of %zu bytes lacks its %d-byte header", st->name, in_len,
                STAGED_HEADER);
  uint64_t n = gcomp_load_le64(in);
  GCOMP_FAIL_IF(n == 0 || n > max_raw, GCOMP_ERR_CORRUPT,
                "%s: staged payload claims %llu bytes, the codec allows 1 to %zu", st->name,
                (unsigned long long)n, max_raw);
  int shuffled = (flags & GCOMP_FRAME_F_SHUFFLED) != 0, planes = (flags & GCOMP_FRAME_F_PLANES) != 0;
  GCOMP_FAIL_IF(shuffled && (width < 2 || width > MAX_WIDTH || n < width), GCOMP_ERR_CORRUPT,
                "%s: frame is marked shuffled but its elements have no byte planes", st->name);
  GCOMP_FAIL_IF(planes && !shuffled, GCOMP_ERR_CORRUPT,
                "%s: frame is marked exponent-plane but not shuffled", st->name);
  uint8_t *out = gcomp_tls_buffer(GCOMP_TLS_RAW, n);
  GCOMP_FAIL_IF(!out, GCOMP_ERR_NOMEM, "%s: decode buffer of %llu bytes", st->name,
                (unsigned long long)n);
  const uint8_t *body = in + STAGED_HEADER;
  size_t body_len = in_len - STAGED_HEADER;
  if (planes) {
    size_t elems = n / width, plain = n - elems;
    GCOMP_FAIL_IF(body_len <= plain, GCOMP_ERR_CORRUPT,
                  "%s: staged payload of %zu bytes cannot hold %zu raw plane bytes", st->name,
                  in_len, plain);
    uint8_t *top = gcomp_tls_buffer(GCOMP_TLS_PLANES, elems);
    GCOMP_FAIL_IF(!top, GCOMP_ERR_NOMEM, "%s: plane buffer of %zu bytes", st->name, elems);
    GCOMP_CHECK(st->decompress(body + plain, body_len - plain, top, elems));
    const uint8_t *p[MAX_WIDTH];
    for (unsigned b = 0; b + 1 < width; b++) p[b] = body + b * elems;
    p[width - 1] = top;
    gcomp_shuffle_kernels_get()->join(p, elems, width, out);
    memcpy(out + elems * width, body + (width - 1) * elems, n - elems * width);
  } else if (shuffled) {
    uint8_t *tmp = gcomp_tls_buffer(GCOMP_TLS_PLANES, n);
    GCOMP_FAIL_IF(!tmp, GCOMP_ERR_NOMEM, "%s: shuffle buffer of %llu bytes", st->name,
                  (unsigned long long)n);
    GCOMP_CHECK(st->decompress(body, body_len, tmp, n));
    gcomp_unshuffle(tmp, n, width, out);
  } else {
    GCOMP_CHECK(st->decompress(body, body_len, out, n));
  }
  *raw = out;
  *raw_len = n;
  return GCOMP_OK;
}
