/* The settings every rank of a communicator must hold alike: read once from its table at
 * creation, then agreed in one exchange. A rank that differs would plan other algorithms
 * or codecs than its peers: it waits for messages that never come, or (a codec inside the
 * node on one node only, another GCOMP_CODEC_MIN_BYTES) ends the call with other bytes and
 * no error. Calls read only gcomp_agreed, never the table or the environment. */
#include <stdio.h>
#include <string.h>

#include "codec_impl.h"
#include "comm_impl.h"

int gcomp_agreed_read(gcomp_comm *comm) {
  const gcomp_settings *set = &comm->set;
  gcomp_agreed *a = &comm->agreed;
  a->skew_window = (int)gcomp_settings_int(set, GCOMP_P_SKEW_WINDOW);
  a->codec_min_bytes = gcomp_settings_int(set, GCOMP_P_CODEC_MIN_BYTES);
  a->chunk_bytes = (size_t)gcomp_settings_int(set, GCOMP_P_CHUNK_BYTES);
  a->seg_bytes = (size_t)gcomp_settings_int(set, GCOMP_P_SEGMENT_BYTES);
  a->shm_bytes = (size_t)gcomp_settings_int(set, GCOMP_P_SHM_BYTES);
  a->stream_bytes = (size_t)gcomp_settings_int(set, GCOMP_P_STREAM_BYTES);
  a->host_ranks = (int)gcomp_settings_int(set, GCOMP_P_HOST_RANKS);
  a->links_given = gcomp_settings_is_set(set, GCOMP_P_ALPHA_BETA);
  GCOMP_CHECK(gcomp_algo_parse(gcomp_settings_str(set, GCOMP_P_ALGO), a->forced_coll));
  a->forced = a->forced_coll[GCOMP_COLL_ALLREDUCE];
  GCOMP_CHECK(gcomp_guard_parse(gcomp_settings_str(set, GCOMP_P_GUARD), &a->guard));
  const char *dflt = gcomp_settings_str(set, GCOMP_P_CODEC);
  if (strcmp(dflt, "none") != 0) GCOMP_CHECK(gcomp_codec_create(dflt, &a->default_codec));
  const char *intra = gcomp_settings_str(set, GCOMP_P_INTRA_CODEC);
  if (strcmp(intra, "none") != 0) GCOMP_CHECK(gcomp_codec_create(intra, &a->intra_codec));
  const char *ag = gcomp_settings_str(set, GCOMP_P_ALLGATHER_CODEC);
  if (strcmp(ag, "none") != 0) GCOMP_CHECK(gcomp_codec_create(ag, &a->allgather_codec));
  return GCOMP_OK;
}

void gcomp_agreed_free(gcomp_agreed *a) {
  gcomp_codec_destroy(a->default_codec);
  gcomp_codec_destroy(a->intra_codec);
  gcomp_codec_destroy(a->allgather_codec);
  a->default_codec = a->intra_codec = a->allgather_codec = NULL;
}

/* 52 bits of FNV-1a over n bytes: exact in a double */
static double hash52(const void *p, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; i++) h = (h ^ ((const uint8_t *)p)[i]) * 0x100000001b3ull;
  return (double)(h >> 12);
}

/* How a setting is compared: as a number, or by a hash of what it means; VERSION is no
 * setting but the build's and the wire's version (gcomp_wire_version) */
enum { BY_NUMBER, BY_TEXT, BY_CODEC, BY_LINKS, BY_GUARD, BY_VERSION };
enum { BUILD_VERSION = -1, WIRE_VERSION = -2 };
static const struct {
  int id;   /* a gcomp_param_id, or one of the versions */
  int how;
} agreed[] = {
    {BUILD_VERSION, BY_VERSION},          {WIRE_VERSION, BY_VERSION},
    {GCOMP_P_SKEW_WINDOW, BY_NUMBER},     {GCOMP_P_CODEC, BY_CODEC},
    {GCOMP_P_INTRA_CODEC, BY_CODEC},      {GCOMP_P_CODEC_MIN_BYTES, BY_NUMBER},
    {GCOMP_P_ALGO, BY_TEXT},              {GCOMP_P_CHUNK_BYTES, BY_NUMBER},
    {GCOMP_P_SHM_BYTES, BY_NUMBER},       {GCOMP_P_ALPHA_BETA, BY_LINKS},
    {GCOMP_P_SEGMENT_BYTES, BY_NUMBER},   {GCOMP_P_GUARD, BY_GUARD},
    {GCOMP_P_ALLGATHER_CODEC, BY_CODEC},  {GCOMP_P_NOTICE, BY_NUMBER}};
enum { NAGREED = sizeof agreed / sizeof *agreed };

double gcomp_codec_wire_hash(const gcomp_codec *c) {
  return (double)(gcomp_codec_wire_id(c) >> 12);
}

static double value_of(const gcomp_comm *comm, int i) {
  const gcomp_settings *set = &comm->set;
  int id = agreed[i].id;
  switch (agreed[i].how) {
  case BY_VERSION:
    return id == BUILD_VERSION ? (double)GCOMP_VERSION_NUMBER
                               : (double)gcomp_wire_version(comm->t->rank);
  case BY_CODEC:
    return gcomp_codec_wire_hash(id == GCOMP_P_CODEC         ? comm->agreed.default_codec
                                 : id == GCOMP_P_INTRA_CODEC ? comm->agreed.intra_codec
                                                             : comm->agreed.allgather_codec);
  case BY_TEXT: {
    const char *text = gcomp_settings_str(set, (gcomp_param_id)id);
    return hash52(text, strlen(text));
  }
  case BY_LINKS: {
    /* the figures GCOMP_ALPHA_BETA gave, as parsed (calibrated ones are agreed anyway) */
    if (!gcomp_settings_is_set(set, (gcomp_param_id)id)) return -1;
    const gcomp_plan_in *m = &comm->model;
    double links[6] = {m->intra.alpha_s, m->intra.beta_spb, m->inter.alpha_s,
                       m->inter.beta_spb, m->shm_alpha,     m->shm_spb};
    return hash52(links, sizeof links);
  }
  case BY_GUARD: {   /* as parsed: "every=5,budget=0.1" and "budget=0.1,every=5" agree */
    const gcomp_guard_cfg *g = &comm->agreed.guard;
    double v[3] = {g->every, g->every ? g->budget : 0, g->every ? g->backoff : 0};
    return hash52(v, sizeof v);
  }
  default: return (double)gcomp_settings_int(set, (gcomp_param_id)id);
  }
}

/* What this rank holds for setting i, as the error names it */
static void text_of(const gcomp_comm *comm, int i, char *out, size_t cap) {
  int id = agreed[i].id;
  if (agreed[i].how == BY_VERSION)
    snprintf(out, cap, "%s %u", id == BUILD_VERSION ? "gcomp" : "wire version",
             id == BUILD_VERSION ? (unsigned)GCOMP_VERSION_NUMBER
                                 : gcomp_wire_version(comm->t->rank));
  else if (agreed[i].how == BY_NUMBER)
    snprintf(out, cap, "%lld", (long long)gcomp_settings_int(&comm->set, (gcomp_param_id)id));
  else
    snprintf(out, cap, "'%s'", gcomp_settings_str(&comm->set, (gcomp_param_id)id));
}

static const char *name_of(int i) {
  switch (agreed[i].id) {
  case BUILD_VERSION: return "the gcomp build";
  case WIRE_VERSION: return "the wire version";
  default: return gcomp_param_name((gcomp_param_id)agreed[i].id);
  }
}

/* ---- naming the rank: only when the ranks differ ------------------------------------- */
enum { TEXT = 240 };   /* characters of one rank's text, one per double */

/* Every rank gets the text the rank `from` holds (its MAX with everyone else's zeros) */
static int text_from(gcomp_comm *comm, int from, const char *mine, uint32_t seq, char *out) {
  double w[TEXT] = {0};   /* 2 KB on the stack: creation's failure path only */
  if (comm->t->rank == from)
    for (int k = 0; k < TEXT - 1 && mine[k]; k++) w[k] = (unsigned char)mine[k];
  GCOMP_CHECK(gcomp_call_internal(comm, w, TEXT, GCOMP_FLOAT64, GCOMP_MAX,
                                  gcomp_algo_find("rd"), seq));
  for (int k = 0; k < TEXT; k++) out[k] = (char)(w[k] >= 1 && w[k] <= 255 ? (int)w[k] : 0);
  out[TEXT - 1] = '\0';
  return GCOMP_OK;
}

/* Setting i differs: the lowest ranks holding its largest and its smallest value, and what
 * each holds */
static int name_mismatch(gcomp_comm *comm, int i, double hi, double lo) {
  int n = comm->t->size, me = comm->t->rank;
  double v = value_of(comm, i), who[2] = {v == hi ? n - me : 0, v == lo ? n - me : 0};
  GCOMP_CHECK(gcomp_call_internal(comm, who, 2, GCOMP_FLOAT64, GCOMP_MAX,
                                  gcomp_algo_find("rd"), GCOMP_SEQ_AGREE_WHO));
  int a = n - (int)who[0], b = n - (int)who[1];
  char mine[TEXT], at_a[TEXT], at_b[TEXT];
  text_of(comm, i, mine, sizeof mine);
  GCOMP_CHECK(text_from(comm, a, mine, GCOMP_SEQ_AGREE_TEXT_A, at_a));
  GCOMP_CHECK(text_from(comm, b, mine, GCOMP_SEQ_AGREE_TEXT_B, at_b));
  GCOMP_FAIL(GCOMP_ERR_INVALID, "%s differs between ranks: rank %d has %s, rank %d has %s; it "
             "must be equal on every rank", name_of(i), a < b ? a : b, a < b ? at_a : at_b,
             a < b ? b : a, a < b ? at_b : at_a);
}

/* Before any rank waits on another (calibration, the shared segment), one MAX exchange of
 * every value and its negation (equal on all ranks when max == -max of the negation), of
 * whether a rank refused its own settings (the lowest such rank), and of the negated birth
 * time. A rank whose settings are malformed takes part all the same: every rank then fails
 * at once with that rank's error (a second exchange carries its text), where the bad rank
 * used to leave creation alone and its peers timed out in calibration. The window also
 * fixes when straggler detection exchanges. The same exchange agrees on the traces' time
 * origin: the earliest rank's birth in CLOCK_REALTIME (microseconds are exact in a
 * double), so that every rank's trace shares one time axis (exactly on one host, as well
 * as the hosts' clocks agree across hosts). */
int gcomp_agreed_check(gcomp_comm *comm, int own) {
  int n = comm->t->size, me = comm->t->rank;
  char why[1024];
  snprintf(why, sizeof why, "%s", own < 0 ? gcomp_last_error() : "");
  if (n > 1) {
    double w[2 * NAGREED + 2];
    for (int i = 0; i < NAGREED; i++) {
      double v = own < 0 ? 0 : value_of(comm, i);
      w[2 * i] = v, w[2 * i + 1] = -v;
    }
    w[2 * NAGREED] = -comm->born_real_us;
    w[2 * NAGREED + 1] = own < 0 ? n - me : 0;   /* the lowest refusing rank wins */
    GCOMP_CHECK(gcomp_call_internal(comm, w, 2 * NAGREED + 2, GCOMP_FLOAT64, GCOMP_MAX,
                                    gcomp_algo_find("rd"), GCOMP_SEQ_AGREE));
    if (w[2 * NAGREED + 1] > 0) {
      int bad = n - (int)w[2 * NAGREED + 1];
      int st = bad == me ? own : GCOMP_ERR_INVALID;
      char text[TEXT];
      GCOMP_CHECK(text_from(comm, bad, why, GCOMP_SEQ_AGREE_TEXT_A, text));
      /* the same words on every rank, the bad one's cut to what the others got */
      GCOMP_FAIL(st, "rank %d refused its settings: %s", bad, text);
    }
    for (int i = 0; i < NAGREED; i++)
      if (w[2 * i] != -w[2 * i + 1]) return name_mismatch(comm, i, w[2 * i], -w[2 * i + 1]);
    comm->epoch_real_us = -w[2 * NAGREED];
  } else if (own < 0) {
    return own;
  }
  return gcomp_skew_init(&comm->skew, comm->agreed.skew_window, comm->t->size);
}
