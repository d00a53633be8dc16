/* Error feedback: the residual store (fp32 or bf16), its checkpoint file, and the generic
 * (unfused) encode around any kind.
 *
 * Residual file, version 1 (all integers little-endian), or version 2 for a store with
 * momentum, which is version 1 with each tensor's velocity after its residuals:
 *   0   8  magic "GCOMPEF\0"
 *   8   4  version (1: residuals only; 2: residuals and velocities)
 *   12  4  residual dtype (0 fp32, 1 bf16)
 *   16  4  spec length S
 *   20  4  0
 *   24  8  number of tensors N
 *   32  S  the codec's canonical spec (no NUL)
 *   then N times, keys increasing: u64 key, u64 count, u64 kind state, count residuals
 *        (4 bytes each for fp32, 2 for bf16), and in version 2 count fp32 velocities
 *   last 4 bytes: CRC32C (as in frames) of everything before them
 */
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "codec_impl.h"
#include "ef.h"
#include "frame.h"
#include "half.h"
#include "spec.h"

typedef struct {
  uint64_t key;
  size_t count;
  uint64_t state;    /* the kind's per-tensor word (topk: last threshold) */
  void *data;        /* count residuals, fp32 or bf16; NULL: empty slot */
  float *vel;        /* count velocities with momentum, else NULL */
} ef_slot;

struct gcomp_ef {
  int dtype;
  float momentum;    /* 0: plain error feedback */
  int mask;          /* momentum factor masking */
  ef_slot *slots;    /* open addressing, power-of-two capacity */
  size_t cap, used;
  float *wide;       /* bf16 stores: the residual being worked on, widened */
  size_t wide_cap;
  float *next;       /* momentum: the velocity being worked on */
  size_t next_cap;
};

static size_t elem_size(int dtype) { return dtype == GCOMP_EF_BF16 ? 2 : 4; }

int gcomp_ef_create(int dtype, double momentum, int mask, gcomp_ef **out) {
  GCOMP_FAIL_IF(dtype != GCOMP_EF_FP32 && dtype != GCOMP_EF_BF16, GCOMP_ERR_INVALID,
                "ef: unknown residual dtype %d", dtype);
  GCOMP_FAIL_IF(!(momentum >= 0 && momentum < 1), GCOMP_ERR_INVALID,
                "ef: momentum %g is out of range [0, 1)", momentum);
  GCOMP_FAIL_IF(momentum > 0 && !((float)momentum > 0.0f && (float)momentum < 1.0f),
                GCOMP_ERR_INVALID, "ef: momentum %.17g rounds to %g in fp32", momentum,
                (double)(float)momentum);
  gcomp_ef *ef = calloc(1, sizeof *ef);
  GCOMP_FAIL_IF(!ef, GCOMP_ERR_NOMEM, "ef: allocating the residual store");
  ef->dtype = dtype;
  ef->momentum = (float)momentum;
  ef->mask = mask != 0;
  *out = ef;
  return GCOMP_OK;
}

static void free_slots(ef_slot *slots, size_t cap) {
  for (size_t i = 0; i < cap; i++) free(slots[i].data), free(slots[i].vel);
  free(slots);
}

void gcomp_ef_destroy(gcomp_ef *ef) {
  if (!ef) return;
  free_slots(ef->slots, ef->cap);
  free(ef->wide);
  free(ef->next);
  free(ef);
}

void gcomp_ef_reset(gcomp_ef *ef) {
  free_slots(ef->slots, ef->cap);
  ef->slots = NULL;
  ef->cap = ef->used = 0;
}

size_t gcomp_ef_keys(const gcomp_ef *ef) { return ef->used; }

static size_t hash_key(uint64_t key) {
  key ^= key >> 33;
  key *= 0xff51afd7ed558ccdull;
  key ^= key >> 33;
  return (size_t)key;
}

static int grow(ef_slot **pslots, size_t *pcap) {
  size_t old = *pcap, cap = old ? old * 2 : 16;
  ef_slot *slots = calloc(cap, sizeof *slots);
  GCOMP_FAIL_IF(!slots, GCOMP_ERR_NOMEM, "ef: growing the residual table to %zu slots", cap);
  for (size_t i = 0; i < old; i++) {
    if (!(*pslots)[i].data) continue;
    size_t j = hash_key((*pslots)[i].key) & (cap - 1);
    while (slots[j].data) j = (j + 1) & (cap - 1);
    slots[j] = (*pslots)[i];
  }
  free(*pslots);
  *pslots = slots;
  *pcap = cap;
  return GCOMP_OK;
}

static ef_slot *find_in(ef_slot *slots, size_t cap, uint64_t key) {
  if (!cap) return NULL;
  for (size_t j = hash_key(key) & (cap - 1); slots[j].data; j = (j + 1) & (cap - 1))
    if (slots[j].key == key) return &slots[j];
  return NULL;
}
static ef_slot *find(const gcomp_ef *ef, uint64_t key) { return find_in(ef->slots, ef->cap, key); }

/* Inserts a slot that owns data (the key must be new). */
static int insert(ef_slot **slots, size_t *cap, size_t *used, ef_slot s) {
  if ((*used + 1) * 2 > *cap) GCOMP_CHECK(grow(slots, cap));
  size_t j = hash_key(s.key) & (*cap - 1);
  while ((*slots)[j].data) j = (j + 1) & (*cap - 1);
  (*slots)[j] = s;
  (*used)++;
  return GCOMP_OK;
}

static int get_slot(gcomp_ef *ef, uint64_t key, size_t count, ef_slot **out) {
  ef_slot *s = find(ef, key);
  if (s) {
    GCOMP_FAIL_IF(s->count != count, GCOMP_ERR_INVALID,
                  "ef: tensor key %llu had %zu elements and now has %zu (keys must name one "
                  "tensor; call gcomp_codec_reset_residuals when shapes change)",
                  (unsigned long long)key, s->count, count);
    *out = s;
    return GCOMP_OK;
  }
  void *data = calloc(count ? count : 1, elem_size(ef->dtype));
  float *vel = ef->momentum > 0 ? calloc(count ? count : 1, sizeof *vel) : NULL;
  if (!data || (ef->momentum > 0 && !vel)) {
    free(data), free(vel);
    GCOMP_FAIL(GCOMP_ERR_NOMEM, "ef: allocating %zu residuals for key %llu", count,
               (unsigned long long)key);
  }
  int st = insert(&ef->slots, &ef->cap, &ef->used, (ef_slot){key, count, 0, data, vel});
  if (st < 0) {
    free(data), free(vel);
    return gcomp_error_trace(st, __FILE__, __LINE__);
  }
  *out = find(ef, key);
  return GCOMP_OK;
}

int gcomp_ef_slot(gcomp_ef *ef, uint64_t key, size_t count, float **residual) {
  GCOMP_FAIL_IF(ef->dtype != GCOMP_EF_FP32, GCOMP_ERR_UNSUPPORTED,
                "ef: the store keeps bf16 residuals, not fp32");
  ef_slot *s;
  GCOMP_CHECK(get_slot(ef, key, count, &s));
  *residual = s->data;
  return GCOMP_OK;
}

/* bf16 residuals round to nearest even, saturating: a finite value never becomes Inf, and
 * a NaN (residuals are finite; be safe) becomes 0 (codecs/half.h) */
static uint16_t bf16_of(float x) { return gcomp_bf16_rne_sat(x); }
static float float_of_bf16(uint16_t h) { return gcomp_bf16_to_f32(h); }

static int reserve_floats(float **buf, size_t *cap, size_t count, const char *what) {
  if (*cap >= count) return GCOMP_OK;
  float *p = realloc(*buf, count * sizeof *p);
  GCOMP_FAIL_IF(!p, GCOMP_ERR_NOMEM, "ef: %s of %zu values", what, count);
  *buf = p;
  *cap = count;
  return GCOMP_OK;
}

/* x = grad + residual, encoded, residual = what was not sent: the residual in its dtype. */
static int encode_residual(gcomp_ef *ef, ef_slot *s, const gcomp_kind *kind,
                           const gcomp_kind_cfg *cfg, gcomp_enc_ctx *ctx, const float *grad,
                           size_t count, uint8_t *dst, size_t cap, size_t *len) {
  if (ef->dtype == GCOMP_EF_FP32)
    return kind->encode_ef(kind, cfg, ctx, grad, s->data, count, dst, cap, len);
  if (kind->encode_ef_bf16 && cap >= kind->max_payload(cfg, count))   /* it cannot fail midway */
    return kind->encode_ef_bf16(kind, cfg, ctx, grad, s->data, count, dst, cap, len);
  GCOMP_CHECK(reserve_floats(&ef->wide, &ef->wide_cap, count, "widening bf16 residuals"));
  uint16_t *r16 = s->data;
  for (size_t i = 0; i < count; i++) ef->wide[i] = float_of_bf16(r16[i]);
  /* the stored residual changes only when the encode succeeds */
  GCOMP_CHECK(kind->encode_ef(kind, cfg, ctx, grad, ef->wide, count, dst, cap, len));
  for (size_t i = 0; i < count; i++) r16[i] = bf16_of(ef->wide[i]);
  return GCOMP_OK;
}

int gcomp_ef_encode(gcomp_ef *ef, const gcomp_kind *kind, const gcomp_kind_cfg *cfg,
                    gcomp_enc_ctx *ctx, uint64_t key, const float *grad, size_t count,
                    uint8_t *dst, size_t cap, size_t *len) {
  ef_slot *s;
  GCOMP_CHECK(get_slot(ef, key, count, &s));
  ctx->kind_state = &s->state;
  if (!s->vel || count == 0)
    return encode_residual(ef, s, kind, cfg, ctx, grad, count, dst, cap, len);
  /* momentum correction: the velocity goes into the residual in place of the gradient */
  GCOMP_CHECK(reserve_floats(&ef->next, &ef->next_cap, count, "velocity"));
  float *restrict next = ef->next, *restrict vel = s->vel;
  const float m = ef->momentum;
  for (size_t i = 0; i < count; i++) next[i] = m * vel[i] + grad[i];
  GCOMP_CHECK(encode_residual(ef, s, kind, cfg, ctx, next, count, dst, cap, len));
  /* a non-finite velocity is dropped: one NaN gradient must not poison every later step
   * of that element (it was sent, and left no residual) */
  if (!ef->mask) {
    for (size_t i = 0; i < count; i++) vel[i] = isfinite(next[i]) ? next[i] : 0.0f;
    return GCOMP_OK;
  }
  /* masking: the payload says where values went (decoded into vel, zero elsewhere); there
   * the velocity restarts from zero, as the residual did */
  int st = kind->decode(cfg, ctx->param, dst, *len, vel, count, 0, NULL);
  if (st < 0) {   /* cannot happen for a payload just encoded; keep the velocity sane */
    memcpy(vel, next, count * sizeof *vel);
    return gcomp_error_trace(st, __FILE__, __LINE__);
  }
  for (size_t i = 0; i < count; i++) vel[i] = vel[i] != 0.0f || !isfinite(next[i]) ? 0.0f : next[i];
  return GCOMP_OK;
}

int gcomp_ef_residual(const gcomp_ef *ef, uint64_t key, float *out, size_t count) {
  const ef_slot *s = find(ef, key);
  GCOMP_FAIL_IF(!s, GCOMP_ERR_INVALID, "ef: no residual for key %llu", (unsigned long long)key);
  GCOMP_FAIL_IF(s->count != count, GCOMP_ERR_INVALID, "ef: key %llu holds %zu residuals, not %zu",
                (unsigned long long)key, s->count, count);
  if (count == 0) return GCOMP_OK;
  if (ef->dtype == GCOMP_EF_FP32) {
    memcpy(out, s->data, count * sizeof *out);
  } else {
    const uint16_t *r16 = s->data;
    for (size_t i = 0; i < count; i++) out[i] = float_of_bf16(r16[i]);
  }
  return GCOMP_OK;
}

int gcomp_ef_velocity(const gcomp_ef *ef, uint64_t key, float *out, size_t count) {
  GCOMP_FAIL_IF(ef->momentum == 0, GCOMP_ERR_INVALID, "ef: the store keeps no velocity (momentum 0)");
  const ef_slot *s = find(ef, key);
  GCOMP_FAIL_IF(!s, GCOMP_ERR_INVALID, "ef: no velocity for key %llu", (unsigned long long)key);
  GCOMP_FAIL_IF(s->count != count, GCOMP_ERR_INVALID, "ef: key %llu holds %zu velocities, not %zu",
                (unsigned long long)key, s->count, count);
  if (count) memcpy(out, s->vel, count * sizeof *out);
  return GCOMP_OK;
}

/* ---- the residual file ----------------------------------------------------------------- */
static const char file_magic[8] = {'G', 'C', 'O', 'M', 'P', 'E', 'F', 0};
enum { FILE_VERSION = 1, FILE_VERSION_VEL = 2, FILE_HEADER = 32 };

typedef struct {
  FILE *f;
  uint32_t crc;
  uint8_t buf[1 << 16];
  size_t n;
} file_out;

static int out_flush(file_out *o) {
  o->crc = gcomp_crc32c(o->crc, o->buf, o->n);
  size_t want = o->n, wrote = fwrite(o->buf, 1, want, o->f);
  o->n = 0;
  GCOMP_FAIL_IF(wrote != want, GCOMP_ERR_INVALID,
                "ef: writing the residual file failed");
  return GCOMP_OK;
}

static int out_bytes(file_out *o, const void *p, size_t len) {
  const uint8_t *b = p;
  while (len) {
    if (o->n == sizeof o->buf) GCOMP_CHECK(out_flush(o));
    size_t take = sizeof o->buf - o->n < len ? sizeof o->buf - o->n : len;
    memcpy(o->buf + o->n, b, take);
    o->n += take;
    b += take;
    len -= take;
  }
  return GCOMP_OK;
}

static int out_u64(file_out *o, uint64_t v) {
  uint8_t b[8];
  gcomp_store_le64(b, v);
  return out_bytes(o, b, 8);
}

static int cmp_slot_key(const void *a, const void *b) {
  uint64_t x = (*(const ef_slot *const *)a)->key, y = (*(const ef_slot *const *)b)->key;
  return x < y ? -1 : x > y;
}

static int out_f32s(file_out *o, const float *v, size_t count) {
  for (size_t j = 0; j < count; j++) {
    uint8_t b[4];
    uint32_t bits;
    memcpy(&bits, &v[j], 4);
    gcomp_store_le32(b, bits);
    GCOMP_CHECK(out_bytes(o, b, 4));
  }
  return GCOMP_OK;
}

static int write_file(const gcomp_ef *ef, const char *spec, file_out *o) {
  uint8_t h[FILE_HEADER] = {0};
  size_t slen = strlen(spec);
  memcpy(h, file_magic, 8);
  gcomp_store_le32(h + 8, ef->momentum > 0 ? FILE_VERSION_VEL : FILE_VERSION);
  gcomp_store_le32(h + 12, (uint32_t)ef->dtype);
  gcomp_store_le32(h + 16, (uint32_t)slen);
  gcomp_store_le64(h + 24, ef->used);
  GCOMP_CHECK(out_bytes(o, h, sizeof h));
  GCOMP_CHECK(out_bytes(o, spec, slen));
  /* keys in increasing order: the same residuals always give the same file */
  const ef_slot **order = malloc((ef->used ? ef->used : 1) * sizeof *order);
  GCOMP_FAIL_IF(!order, GCOMP_ERR_NOMEM, "ef: ordering %zu keys", ef->used);
  size_t m = 0;
  for (size_t i = 0; i < ef->cap; i++)
    if (ef->slots[i].data) order[m++] = &ef->slots[i];
  qsort(order, m, sizeof *order, cmp_slot_key);
  int st = GCOMP_OK;
  for (size_t i = 0; i < m && st == GCOMP_OK; i++) {
    const ef_slot *s = order[i];
    st = out_u64(o, s->key);
    if (st == GCOMP_OK) st = out_u64(o, s->count);
    if (st == GCOMP_OK) st = out_u64(o, s->state);
    if (st < 0) break;
    if (ef->dtype == GCOMP_EF_FP32) {
      st = out_f32s(o, s->data, s->count);
    } else {
      const uint16_t *r = s->data;
      for (size_t j = 0; j < s->count && st == GCOMP_OK; j++) {
        uint8_t b[2] = {(uint8_t)r[j], (uint8_t)(r[j] >> 8)};
        st = out_bytes(o, b, 2);
      }
    }
    if (st == GCOMP_OK && s->vel) st = out_f32s(o, s->vel, s->count);
  }
  free(order);
  GCOMP_CHECK(st);
  GCOMP_CHECK(out_flush(o));
  uint8_t c[4];
  gcomp_store_le32(c, o->crc ^ 0xffffffffu);
  GCOMP_FAIL_IF(fwrite(c, 1, 4, o->f) != 4, GCOMP_ERR_INVALID, "ef: writing the residual file failed");
  return GCOMP_OK;
}

/* The directory holding path, synced so that the rename itself survives a crash */
static void sync_dir_of(const char *path) {
  char dir[4096];
  snprintf(dir, sizeof dir, "%s", path);
  char *slash = strrchr(dir, '/');
  if (slash == dir) slash[1] = '\0';
  else if (slash) *slash = '\0';
  else snprintf(dir, sizeof dir, ".");
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) fsync(fd), close(fd);
}

/* Crash-safe: the bytes go to a temporary of this call's own (mkstemp: two threads or two
 * processes saving to one path never share it), reach the disk (fsync) before the rename
 * puts them in place, and the directory is synced after: after a crash path holds the old
 * file or the new one, whole, never a torn one. */
int gcomp_ef_save(const gcomp_ef *ef, const char *spec, const char *path) {
  char tmp[4096];
  int n = snprintf(tmp, sizeof tmp, "%s.tmp.XXXXXX", path);
  GCOMP_FAIL_IF(n < 0 || (size_t)n >= sizeof tmp, GCOMP_ERR_INVALID, "ef: path '%s' is too long", path);
  file_out *o = calloc(1, sizeof *o);
  GCOMP_FAIL_IF(!o, GCOMP_ERR_NOMEM, "ef: file buffer");
  o->crc = 0xffffffffu;
  int fd = mkostemp(tmp, O_CLOEXEC);
  o->f = fd >= 0 ? fdopen(fd, "wb") : NULL;
  if (!o->f) {
    if (fd >= 0) close(fd), remove(tmp);
    free(o);
    GCOMP_FAIL(GCOMP_ERR_INVALID, "ef: cannot create a temporary beside '%s'", path);
  }
  int st = write_file(ef, spec, o);
  if (st == GCOMP_OK && (fflush(o->f) != 0 || fsync(fd) != 0))
    st = gcomp_error_set(GCOMP_ERR_INVALID, __FILE__, __LINE__, "ef: writing '%s' failed", tmp);
  if (fclose(o->f) != 0 && st == GCOMP_OK)
    st = gcomp_error_set(GCOMP_ERR_INVALID, __FILE__, __LINE__, "ef: writing '%s' failed", tmp);
  free(o);
  if (st == GCOMP_OK && rename(tmp, path) != 0)
    st = gcomp_error_set(GCOMP_ERR_INVALID, __FILE__, __LINE__, "ef: cannot rename '%s' to '%s'",
                         tmp, path);
  if (st < 0) {
    remove(tmp);
    return gcomp_error_trace(st, __FILE__, __LINE__);
  }
  sync_dir_of(path);
  return GCOMP_OK;
}

typedef struct {
  FILE *f;
  uint32_t crc;
  uint64_t left;   /* bytes of the file not read yet, the CRC excluded */
} file_in;

static int in_bytes(file_in *in, void *p, size_t len) {
  GCOMP_FAIL_IF(len > in->left, GCOMP_ERR_CORRUPT, "ef: residual file is truncated");
  GCOMP_FAIL_IF(fread(p, 1, len, in->f) != len, GCOMP_ERR_CORRUPT, "ef: residual file is truncated");
  in->crc = gcomp_crc32c(in->crc, p, len);
  in->left -= len;
  return GCOMP_OK;
}

static int in_u64(file_in *in, uint64_t *v) {
  uint8_t b[8];
  GCOMP_CHECK(in_bytes(in, b, 8));
  *v = gcomp_load_le64(b);
  return GCOMP_OK;
}

typedef struct {
  ef_slot *slots;
  size_t cap, used;
} slot_table;

/* The file is little-endian whatever the host: fixes n 4-byte values in place. */
static void le32_in_place(void *p, size_t n) {
  uint8_t *b = p;
  for (size_t j = 0; j < n; j++) {
    uint32_t bits = gcomp_load_le32(b + 4 * j);
    memcpy(b + 4 * j, &bits, 4);
  }
}

static int read_slots(file_in *in, int dtype, int with_vel, uint64_t nkeys, slot_table *t) {
  size_t es = elem_size(dtype), per = es + (with_vel ? sizeof(float) : 0);
  for (uint64_t i = 0; i < nkeys; i++) {
    uint64_t key = 0, count = 0, state = 0;   /* set by the reads below; -O3 cannot tell */
    GCOMP_CHECK(in_u64(in, &key));
    GCOMP_CHECK(in_u64(in, &count));
    GCOMP_CHECK(in_u64(in, &state));
    /* never trust a count beyond what the file can hold */
    GCOMP_FAIL_IF(count > in->left / per, GCOMP_ERR_CORRUPT,
                  "ef: residual file claims %llu values for key %llu, more than it holds",
                  (unsigned long long)count, (unsigned long long)key);
    GCOMP_FAIL_IF(find_in(t->slots, t->cap, key), GCOMP_ERR_CORRUPT,
                  "ef: key %llu appears twice", (unsigned long long)key);
    void *data = calloc(count ? count : 1, es);
    float *vel = with_vel ? calloc(count ? count : 1, sizeof *vel) : NULL;
    if (!data || (with_vel && !vel)) {
      free(data), free(vel);
      GCOMP_FAIL(GCOMP_ERR_NOMEM, "ef: %llu residuals for key %llu", (unsigned long long)count,
                 (unsigned long long)key);
    }
    int st = in_bytes(in, data, count * es);
    if (st == GCOMP_OK && vel) st = in_bytes(in, vel, count * sizeof *vel);
    if (st == GCOMP_OK)
      st = insert(&t->slots, &t->cap, &t->used, (ef_slot){key, count, state, data, vel});
    if (st < 0) {
      free(data), free(vel);
      return gcomp_error_trace(st, __FILE__, __LINE__);
    }
    if (dtype == GCOMP_EF_FP32) {
      le32_in_place(data, count);
    } else {
      uint8_t *b = data;
      for (size_t j = 0; j < count; j++) {
        uint16_t v = (uint16_t)(b[2 * j] | b[2 * j + 1] << 8);
        memcpy(b + 2 * j, &v, 2);
      }
    }
    if (vel) le32_in_place(vel, count);
  }
  return GCOMP_OK;
}

static int read_file(file_in *in, const char *spec, int dtype, int with_vel, slot_table *t) {
  uint8_t h[FILE_HEADER];
  GCOMP_CHECK(in_bytes(in, h, sizeof h));
  GCOMP_FAIL_IF(memcmp(h, file_magic, 8) != 0, GCOMP_ERR_CORRUPT, "ef: not a gcomp residual file");
  uint32_t version = gcomp_load_le32(h + 8), fdtype = gcomp_load_le32(h + 12);
  uint32_t slen = gcomp_load_le32(h + 16);
  uint64_t nkeys = gcomp_load_le64(h + 24);
  GCOMP_FAIL_IF(version != FILE_VERSION && version != FILE_VERSION_VEL, GCOMP_ERR_CORRUPT,
                "ef: residual file version %u (this gcomp reads versions %d and %d)", version,
                FILE_VERSION, FILE_VERSION_VEL);
  GCOMP_FAIL_IF(fdtype > GCOMP_EF_BF16 || gcomp_load_le32(h + 20) != 0 || slen > 4096,
                GCOMP_ERR_CORRUPT, "ef: residual file header is damaged");
  char fspec[4097];
  GCOMP_CHECK(in_bytes(in, fspec, slen));
  fspec[slen] = '\0';
  GCOMP_CHECK(read_slots(in, (int)fdtype, version == FILE_VERSION_VEL, nkeys, t));
  GCOMP_FAIL_IF(in->left != 0, GCOMP_ERR_CORRUPT, "ef: %llu unexpected bytes in the residual file",
                (unsigned long long)in->left);
  uint8_t c[4];
  GCOMP_FAIL_IF(fread(c, 1, 4, in->f) != 4, GCOMP_ERR_CORRUPT, "ef: residual file is truncated");
  GCOMP_FAIL_IF(gcomp_load_le32(c) != (in->crc ^ 0xffffffffu), GCOMP_ERR_CORRUPT,
                "ef: residual file checksum mismatch (damaged file)");
  /* intact, but is it ours? */
  GCOMP_FAIL_IF(strcmp(fspec, spec) != 0 || (int)fdtype != dtype, GCOMP_ERR_INVALID,
                "ef: residual file was written by codec '%s', this codec is '%s'", fspec, spec);
  /* the spec names the momentum, so this only catches a file made up to match it */
  GCOMP_FAIL_IF((version == FILE_VERSION_VEL) != with_vel, GCOMP_ERR_INVALID,
                "ef: residual file %s velocities, codec '%s' %s", with_vel ? "holds no" : "holds",
                spec, with_vel ? "needs them (ef:momentum)" : "keeps none");
  return GCOMP_OK;
}

int gcomp_ef_load(gcomp_ef *ef, const char *spec, const char *path) {
  file_in in = {.crc = 0xffffffffu};
  in.f = fopen(path, "rb");
  GCOMP_FAIL_IF(!in.f, GCOMP_ERR_INVALID, "ef: cannot open residual file '%s'", path);
  struct stat sb;
  if (fstat(fileno(in.f), &sb) != 0 || !S_ISREG(sb.st_mode)) {   /* a directory opens too */
    fclose(in.f);
    GCOMP_FAIL(GCOMP_ERR_INVALID, "ef: residual file '%s' is not a regular file", path);
  }
  long size = -1;
  if (fseek(in.f, 0, SEEK_END) == 0) size = ftell(in.f);
  if (size < 0 || fseek(in.f, 0, SEEK_SET) != 0) {
    fclose(in.f);
    GCOMP_FAIL(GCOMP_ERR_INVALID, "ef: cannot read residual file '%s'", path);
  }
  slot_table t = {0};
  int st;
  if (size < FILE_HEADER + 4) {
    st = gcomp_error_set(GCOMP_ERR_CORRUPT, __FILE__, __LINE__,
                         "ef: residual file '%s' is truncated (%ld bytes)", path, size);
  } else {
    in.left = (uint64_t)size - 4;
    st = read_file(&in, spec, ef->dtype, ef->momentum > 0, &t);
  }
  fclose(in.f);
  if (st < 0) {
    free_slots(t.slots, t.cap);
    return gcomp_error_trace(st, __FILE__, __LINE__);
  }
  free_slots(ef->slots, ef->cap);
  ef->slots = t.slots;
  ef->cap = t.cap;
  ef->used = t.used;
  return GCOMP_OK;
}

/* ---- error feedback around kinds without a fused version --------------------------------- */
int gcomp_ef_encode_generic(const gcomp_kind *kind, const gcomp_kind_cfg *cfg,
                            gcomp_enc_ctx *ctx, const float *restrict grad,
                            float *restrict residual, size_t count, uint8_t *restrict dst,
                            size_t cap, size_t *len) {
  if (count == 0) return kind->encode(cfg, ctx, grad, 0, dst, cap, len);
  float *x = malloc(count * sizeof *x);
  GCOMP_FAIL_IF(!x, GCOMP_ERR_NOMEM, "ef: temporary of %zu values", count);
  for (size_t i = 0; i < count; i++) x[i] = grad[i] + residual[i];
  const float *xs = x;
  int s = kind->encode(cfg, ctx, xs, count, dst, cap, len);
  if (s == GCOMP_OK) {
    /* residual = x - decode(encode(x)): decode-and-add into -x gives -(residual) */
    for (size_t i = 0; i < count; i++) residual[i] = -x[i];
    s = kind->decode(cfg, ctx->param, dst, *len, residual, count, 1, NULL);
    /* a non-finite value is sent as it is and leaves no residual: one NaN must not
     * poison every later step of that element */
    for (size_t i = 0; i < count; i++) {
      float r = -residual[i];
      residual[i] = isfinite(r) ? r : 0.0f;
    }
  }
  free(x);
  if (s < 0) return gcomp_error_trace(s, __FILE__, __LINE__);
  return GCOMP_OK;
}
