/*
 * gcomp — gradient compression and low-precision reduction for data-parallel training.
 *
 * This is the one public header. Every function that can fail returns a gcomp_status
 * (GCOMP_OK == 0, errors negative) unless stated otherwise; on failure a human-readable
 * detail of what went wrong is available from gcomp_last_error() in the same thread.
 * libgcomp.so exports exactly the functions declared here.
 *
 * Thread safety: unless a function says otherwise, distinct objects may be used from
 * distinct threads concurrently; one object must not be used from two threads at once.
 * The library reads its environment variables (GCOMP_*) once, the first time any
 * function that needs them runs.
 *
 * The environment: the library sets one variable, and only when it is unset. The first
 * communicator that opens a tcp;ofi_rxm endpoint sets FI_OFI_RXM_EAGER_LIMIT to its
 * GCOMP_CHUNK_BYTES (setenv without overwrite), so that rxm sends each chunk eagerly:
 * libfabric 1.17 takes rxm's eager limit from the environment only, once, at its first
 * fi_getinfo in the process (after that the setting has no effect). A value the user set
 * is kept. setenv is not safe while another thread reads the environment: a program with
 * such threads sets FI_OFI_RXM_EAGER_LIMIT itself (to GCOMP_CHUNK_BYTES' value for the same
 * effect) before creating a communicator. Nothing else is ever written to the environment.
 */
#ifndef GCOMP_H
#define GCOMP_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) && defined(GCOMP_BUILDING_LIBRARY)
#define GCOMP_API __attribute__((visibility("default")))
#else
#define GCOMP_API
#endif

#define GCOMP_VERSION_MAJOR 0
#define GCOMP_VERSION_MINOR 1
#define GCOMP_VERSION_PATCH 0
#define GCOMP_VERSION_NUMBER \
  (GCOMP_VERSION_MAJOR * 10000 + GCOMP_VERSION_MINOR * 100 + GCOMP_VERSION_PATCH)

/* ---------------------------------------------------------------------------------------
 * Status codes. The numbers are fixed: they are part of the ABI.
 * ------------------------------------------------------------------------------------- */
typedef enum {
  GCOMP_OK = 0,
  GCOMP_ERR_INVALID = -1,     /* bad argument, spec or environment value */
  GCOMP_ERR_NOMEM = -2,       /* allocation failed, or a caller buffer is too small */
  GCOMP_ERR_CORRUPT = -3,     /* a frame or file failed validation */
  GCOMP_ERR_UNSUPPORTED = -4, /* valid request this build or machine cannot serve */
  GCOMP_ERR_FABRIC = -5,      /* libfabric reported an error */
  GCOMP_ERR_TIMEOUT = -6,     /* nothing happened within GCOMP_TIMEOUT_MS */
  GCOMP_ERR_PEER = -7,        /* a peer failed or left */
  GCOMP_ERR_BOOTSTRAP = -8,   /* rank discovery or address exchange failed */
  GCOMP_ERR_ABORTED = -9      /* the communicator was aborted (gcomp_comm_abort) */
} gcomp_status;

/* Returns a static, never-NULL name for a status ("GCOMP_ERR_CORRUPT: corrupt data"). */
GCOMP_API const char *gcomp_strerror(int status);

/* Returns the detail of the last failure in the calling thread ("" when none), e.g.
 * "codec spec 'fp16:scael=none': fp16: unknown parameter 'scael' (valid: scale, round, seed)
 *  [codecs/cast.c:58] <- ...". The pointer stays valid until the next failing call in this
 * thread. */
GCOMP_API const char *gcomp_last_error(void);

/* Returns "MAJOR.MINOR.PATCH". */
GCOMP_API const char *gcomp_version(void);
/* Returns the version of the library running, MAJOR * 10000 + MINOR * 100 + PATCH: compare it
 * with GCOMP_VERSION_NUMBER, the header's, to tell which library a program loaded. */
GCOMP_API int gcomp_version_number(void);

/* Reads and validates the GCOMP_* environment, detects the CPU and opens the log. Called
 * implicitly by every entry point that needs it; calling it first only moves the cost and
 * surfaces environment errors early. Thread-safe; runs once per process. Returns
 * GCOMP_ERR_INVALID (naming the variable and value) when a variable is malformed. */
GCOMP_API gcomp_status gcomp_init(void);

/* ---------------------------------------------------------------------------------------
 * Introspection (used by gcomp-info; stable but not performance-relevant).
 * ------------------------------------------------------------------------------------- */

/* Number of GCOMP_* parameters the library knows. */
GCOMP_API int gcomp_param_count(void);

typedef struct {
  const char *name;     /* full variable name, e.g. "GCOMP_TIMEOUT_MS" */
  const char *type;     /* "int", "size", "bool", "string", "enum" */
  const char *value;    /* current value as text (the default when unset) */
  const char *dflt;     /* default as text */
  const char *help;     /* one line */
  int is_set;           /* 1 when taken from the environment */
} gcomp_param_info;

/* Describes parameter i (0 <= i < gcomp_param_count()). Requires gcomp_init() to have
 * succeeded for `value` to reflect the environment. */
GCOMP_API gcomp_status gcomp_param_describe(int i, gcomp_param_info *out);

/* ---------------------------------------------------------------------------------------
 * Configuration without the environment.
 *
 * A config is a set of per-communicator settings, each named like its environment variable
 * ("GCOMP_CODEC_MIN_BYTES"; the "GCOMP_" prefix may be omitted). gcomp_config_create starts
 * from the environment's values (or the defaults), so a config that sets nothing behaves
 * like the environment: a config's values never go into the environment. A value is
 * validated as the variable's would be: a malformed one is GCOMP_ERR_INVALID naming the name
 * and the value (GCOMP_ALGO's algorithm name and GCOMP_CODEC's and GCOMP_INTRA_CODEC's specs
 * too, as a communicator would check them; the environment's values of those, and
 * GCOMP_GUARD, are checked when a communicator is created from the config). Process-wide
 * settings (GCOMP_DEBUG, GCOMP_DEBUG_SUBSYS, GCOMP_DEBUG_FILE, GCOMP_ISA, GCOMP_SHIM_STRICT,
 * GCOMP_SHIM_ROUTE, GCOMP_LIBRARY, GCOMP_FAULT), the training program's (GCOMP_METRICS,
 * GCOMP_SEED) and the launcher's (GCOMP_RANK,
 * GCOMP_SIZE, GCOMP_LOCAL_RANK, GCOMP_ROOT, GCOMP_JOB_TOKEN) are refused by
 * gcomp_config_set with GCOMP_ERR_INVALID naming them. A communicator copies what it needs
 * at creation: the config may be destroyed right after. Wherever a function takes a config,
 * NULL means the environment. One config must not be used by two threads at once while one
 * of them changes it.
 * ------------------------------------------------------------------------------------- */
typedef struct gcomp_config gcomp_config;

/* *out receives a config holding the environment's values (GCOMP_ERR_INVALID, as
 * gcomp_init, when the environment holds a malformed one). */
GCOMP_API gcomp_status gcomp_config_create(gcomp_config **out);
/* Sets name to value (value NULL: back to the default). On failure the config is
 * unchanged. */
GCOMP_API gcomp_status gcomp_config_set(gcomp_config *cfg, const char *name, const char *value);
/* Reads any setting, process-wide ones included: *value receives its text (the default's
 * when unset; valid until the setting changes or the config is destroyed) and *is_set (may
 * be NULL) 1 when the environment or gcomp_config_set gave it. cfg NULL reads the
 * environment as the library read it, even when one of its values was malformed (the text
 * as given; gcomp_init then failed and the library uses the defaults). GCOMP_ERR_INVALID
 * for a name gcomp does not know. */
GCOMP_API gcomp_status gcomp_config_get(const gcomp_config *cfg, const char *name,
                                        const char **value, int *is_set);
GCOMP_API void gcomp_config_destroy(gcomp_config *cfg);   /* NULL is a no-op */

/* CPU features detected (space-separated, e.g. "sse2 avx2 f16c fma"), the kernel level in
 * use ("base", "avx2", "avx512") and the highest level this CPU supports. */
GCOMP_API const char *gcomp_cpu_features(void);
GCOMP_API const char *gcomp_isa_selected(void);
GCOMP_API const char *gcomp_isa_best(void);
/* The level each kernel family runs at: for i = 0, 1, ... the level's name ("base",
 * "avx2", "avx512") and in *family (when not NULL) the family's ("cast", "topk",
 * "quant-encode", "quant-decode", "sign-encode", "sign-decode"); NULL past the last family.
 * GCOMP_ISA=LEVEL puts every family at LEVEL; unset, each gets the CPU's best level unless
 * gcomp's table of measured CPUs has it faster one level down there (gcomp_isa_selected
 * is then the ceiling). Every level gives the same bits. */
GCOMP_API const char *gcomp_kernel_choice(int i, const char **family);

/* The libfabric version gcomp runs against ("1.17"), and the providers that offer
 * tagged RDM endpoints on this machine, space-separated ("shm tcp;ofi_rxm net"); the
 * latter returns the length it needs, like snprintf. */
GCOMP_API const char *gcomp_fabric_version(void);
GCOMP_API size_t gcomp_fabric_providers(char *buf, size_t buf_size);

/* ---------------------------------------------------------------------------------------
 * Codecs, usable without any network. Every encoded buffer is one self-describing frame
 * (see docs/wire-format.md): a decoder needs only the frame, and validates it first.
 *
 * Spec grammar (the same in the API, GCOMP_CODEC and the tools):
 *     codec[:key=value,...][+stage[:key=value,...]]...
 * e.g. "none", "bf16", "fp16:scale=none", "bf16:round=stochastic,seed=7",
 *      "topk:ratio=0.01+ef", "fp16+zstd:level=1".
 *
 * topk keeps the largest magnitudes: ratio=R (0 < R <= 1, k = R * count rounded, at least
 * 1; default 0.01) or k=K; exact=0 (default: the kept count is within 10% of k) or 1
 * (exactly k, ties broken by lower index); values=fp32|bf16|fp16 (fp16 saturates at
 * +-65504, counted as overflows); seed=S (the threshold sample; equal seeds and inputs give
 * equal frames). NaN and Inf are always sent, zeros never; k >= count sends every value.
 * +ef adds error feedback (x = grad + residual[key]; send x; keep what was not sent);
 * +ef:dtype=bf16 keeps residuals in bf16 (half the memory, rounded each step).
 * +ef:momentum=M (0 <= M < 1, top-k only; default 0: off) is Deep Gradient Compression's
 * momentum correction: per key an fp32 velocity u = M * u + grad goes into the residual in
 * place of grad, so the workers' sent values sum to the momentum update; the optimizer
 * must then apply the averaged result without momentum of its own. mask=1 (the default
 * with momentum) also zeroes u where a value was sent (DGC's momentum factor masking);
 * mask=0 keeps it, so every gradient is eventually applied with momentum SGD's full weight;
 * it trains better when the same coordinates are sent most steps (small models, ratios of
 * 1%), where masking leaves them plain SGD's step. The canonical form
 * prints momentum and mask only when momentum is set.
 * ------------------------------------------------------------------------------------- */
typedef struct gcomp_codec gcomp_codec;

/* Creates a codec from a spec. On a bad spec returns GCOMP_ERR_INVALID and
 * gcomp_last_error() names the offending token and the valid choices. *out is NULL on
 * failure. */
GCOMP_API gcomp_status gcomp_codec_create(const char *spec, gcomp_codec **out);

/* Frees the codec and its error-feedback residuals. NULL is a no-op. */
GCOMP_API void gcomp_codec_destroy(gcomp_codec *codec);

/* Writes the canonical form of the codec's spec (every parameter spelled out, so that
 * creating a codec from it gives the same codec) into buf; returns the length it needs
 * (excluding the NUL), like snprintf. */
GCOMP_API size_t gcomp_codec_spec(const gcomp_codec *codec, char *buf, size_t buf_size);

/* What a codec is, for planners and harnesses built on gcomp (sized: set struct_size). */
typedef struct {
  size_t struct_size;     /* set by the caller: sizeof the struct it passes */
  const char *kind;       /* its first stage: "none", "fp16", "bf16", "topk", ... (static) */
  int sparse;             /* frames hold a few (index, value) pairs, summed as they are: a
                             reduced shard is dense, so it is never re-encoded (top-k) */
  int error_feedback;     /* +ef */
  double ef_momentum;     /* +ef:momentum (0: none) */
  int ef_momentum_given;  /* the spec it was created from named ef:momentum (0 included) */
  int ef_mask;            /* +ef:mask */
} gcomp_codec_info;
GCOMP_API gcomp_status gcomp_codec_describe(const gcomp_codec *codec, gcomp_codec_info *out);

/* Writes into buf (buf_size bytes, NUL-terminated) the canonical spec of the codec with
 * `params` ("key=value[,key=value...]") applied to its stage `stage` (the kind's name, "ef",
 * or the lossless stage's name) after the spec's own, validated as gcomp_codec_create
 * would. GCOMP_ERR_INVALID when the codec has no such stage or a parameter is refused,
 * GCOMP_ERR_NOMEM when buf is too small. E.g. ("topk:ratio=0.01+ef", "ef", "momentum=0.9")
 * gives "topk:ratio=0.01,...+ef:dtype=fp32,momentum=0.9,mask=1". */
GCOMP_API gcomp_status gcomp_codec_spec_with(const gcomp_codec *codec, const char *stage,
                                             const char *params, char *buf, size_t buf_size);

/* Upper bound, in bytes, of the frame gcomp_encode() produces for `count` floats (SIZE_MAX
 * for a count no buffer could hold: gcomp_encode refuses it). */
GCOMP_API size_t gcomp_codec_max_encoded_size(const gcomp_codec *codec, size_t count);

/* Encodes count fp32 values into one frame at dst (dst_capacity bytes; use
 * gcomp_codec_max_encoded_size). *dst_len receives the frame length. key names the
 * error-feedback residual slot of this tensor (ignored without +ef). Not thread-safe for
 * one codec (it updates residuals and counters). */
GCOMP_API gcomp_status gcomp_encode(gcomp_codec *codec, uint64_t key, const float *src,
                                    size_t count, void *dst, size_t dst_capacity,
                                    size_t *dst_len);

/* Validates the frame (src, src_len) and decodes it into dst[0..count). count must equal
 * the frame's element count. GCOMP_ERR_CORRUPT when the frame is damaged, truncated, or
 * was produced by a different codec than `codec`. The payload is verified block by block
 * (64 KiB each) just before each block is decoded: after GCOMP_ERR_CORRUPT, dst may hold
 * the blocks before the damaged one (as may acc for gcomp_decode_add). Thread-safe for
 * one codec. */
GCOMP_API gcomp_status gcomp_decode(const gcomp_codec *codec, const void *src, size_t src_len,
                                    float *dst, size_t count);

/* As gcomp_decode, but acc[i] += decoded[i], fused (no temporary buffer). */
GCOMP_API gcomp_status gcomp_decode_add(const gcomp_codec *codec, const void *src, size_t src_len,
                                        float *acc, size_t count);

/* Counters a codec keeps since creation (or the last reset). Sized, like every stats struct
 * a caller passes: set struct_size to sizeof the struct (gcomp_codec_stats s =
 * {.struct_size = sizeof s}); the getter fills only what fits, so a program built against an
 * older header keeps working when fields are appended (they only ever are). */
typedef struct {
  size_t struct_size;         /* set by the caller: sizeof the struct it passes */
  uint64_t frames_encoded;
  uint64_t elements_encoded;
  uint64_t bytes_in;          /* fp32 bytes given to gcomp_encode */
  uint64_t bytes_out;         /* frame bytes produced */
  uint64_t nonfinite_inputs;  /* NaN and Inf seen by the encoder (they are kept) */
  uint64_t overflows;         /* finite values the format could not represent */
  uint64_t underflows;        /* nonzero values that became zero */
} gcomp_codec_stats;

/* GCOMP_ERR_INVALID when out->struct_size is smaller than this struct's first published
 * layout (gcomp 0.1's, whose last field is underflows). */
GCOMP_API gcomp_status gcomp_codec_get_stats(const gcomp_codec *codec, gcomp_codec_stats *out);
GCOMP_API void gcomp_codec_reset_stats(gcomp_codec *codec);

/* Error-feedback residuals: save to and restore from a versioned, checksummed file, so a
 * run resumed from a checkpoint keeps its feedback. Save writes every key's residual (and
 * the kind's per-tensor state, e.g. top-k's last threshold, and with ef:momentum the
 * velocity) to a temporary file renamed over path, so a crash never leaves a half-written
 * file; the same residuals always give the same bytes. Load replaces all of the codec's
 * residuals with the file's; a key whose length then differs at the next gcomp_encode is
 * refused (GCOMP_ERR_INVALID) as usual. Load fails with GCOMP_ERR_CORRUPT on a damaged,
 * truncated or foreign file and GCOMP_ERR_INVALID when it was written by a different codec
 * spec (the canonical spec, ef:dtype and momentum included, is stored in the file) or
 * cannot be opened; on failure the codec's residuals are unchanged. Both return
 * GCOMP_ERR_INVALID for a codec without +ef. Not thread-safe for one codec. */
GCOMP_API gcomp_status gcomp_codec_save_residuals(const gcomp_codec *codec, const char *path);
GCOMP_API gcomp_status gcomp_codec_load_residuals(gcomp_codec *codec, const char *path);

/* Drops every error-feedback residual of the codec (and any per-tensor state its kind
 * keeps, such as top-k's last threshold): the next encode of each key starts from a zero
 * residual and may use a new length. Call it when tensor shapes change. GCOMP_ERR_INVALID
 * when codec is NULL; a no-op for a codec without +ef. Not thread-safe for one codec. */
GCOMP_API gcomp_status gcomp_codec_reset_residuals(gcomp_codec *codec);

/* ---------------------------------------------------------------------------------------
 * Communicators and collectives.
 *
 * A communicator is one rank's handle on a job of `size` ranks, possibly spread over
 * several nodes (ranks with the same GCOMP_NODE_ID / host name share a node). Collective
 * calls must be made by every rank of the communicator, in the same order, with the same
 * count, dtype, op and codec spec. Thread safety: one communicator must not be used by two
 * threads at once; distinct communicators may.
 * ------------------------------------------------------------------------------------- */
typedef enum {
  GCOMP_FLOAT32 = 0,
  GCOMP_FLOAT64 = 1,
  GCOMP_INT32 = 2,
  GCOMP_INT64 = 3,
  GCOMP_BFLOAT16 = 4,   /* reduced in fp32, rounded to nearest even once at the end */
  GCOMP_FLOAT16 = 5     /* likewise */
} gcomp_dtype;

typedef enum {
  GCOMP_SUM = 0,
  GCOMP_AVG = 1,   /* sum divided by the rank count (integers: truncated toward zero) */
  GCOMP_MIN = 2,
  GCOMP_MAX = 3,   /* MIN/MAX propagate NaN */
  GCOMP_PROD = 4
} gcomp_op;

typedef struct gcomp_comm gcomp_comm;

/* Creates this rank's communicator from the environment: rank and size from GCOMP_RANK /
 * GCOMP_SIZE or the launcher's variables (torchrun, Open MPI, PMI, Slurm), node identity
 * from GCOMP_NODE_ID or the host name, and the rendezvous at GCOMP_ROOT or
 * MASTER_ADDR:MASTER_PORT. Collective: every rank of the job must call it. Returns
 * GCOMP_ERR_BOOTSTRAP when ranks cannot meet within GCOMP_TIMEOUT_MS. Every communicator
 * creation also calibrates the cost model (unless GCOMP_ALPHA_BETA is set) and checks that
 * the settings that must be equal on every rank are (GCOMP_ERR_INVALID naming the one that
 * differs). */
GCOMP_API gcomp_status gcomp_comm_init_env(gcomp_comm **out);

/* gcomp_comm_init_env with a config's settings (NULL: exactly gcomp_comm_init_env). */
GCOMP_API gcomp_status gcomp_comm_init_env_config(const gcomp_config *config, gcomp_comm **out);

/* Out-of-band bootstrap (the MPI shim's, a binding's over torch.distributed): the caller
 * says who this rank is and lends an allgather of small records.
 *
 * allgather is called (possibly several times, always by every rank in the same order, from
 * the thread that called gcomp_comm_init_oob) with this rank's `len`-byte record in mine;
 * it must fill all[r * len .. (r + 1) * len) with rank r's record for every r and return 0,
 * or return nonzero on failure (the init then fails with GCOMP_ERR_BOOTSTRAP). len is the
 * same on every rank of one call. ctx is passed through. node_id: ranks with equal strings
 * share a node (shared memory between them); NULL means GCOMP_NODE_ID (the config's or the
 * environment's) or else the host name. Collective over the `size` ranks; 0 <= rank < size.
 * GCOMP_ERR_INVALID for bad arguments. */
typedef int (*gcomp_allgather_fn)(void *ctx, const void *mine, size_t len, void *all);
GCOMP_API gcomp_status gcomp_comm_init_oob(int rank, int size, const char *node_id,
                                           gcomp_allgather_fn allgather, void *ctx,
                                           const gcomp_config *config, gcomp_comm **out);

/* A communicator whose messages go through the caller's point-to-point layer: an MPI
 * library's MPI_Isend/MPI_Irecv (the installed header gcomp_mpi.h fills this table from
 * MPI for any MPI, SimGrid's SMPI included, with one call: gcomp_comm_init_mpi). The
 * library itself never includes mpi.h: the caller's program, compiled against its own MPI,
 * lends these functions. Useful where MPI has a network path and libfabric has none, and
 * the way gcomp's own algorithms run under a simulator (docs/simulation.md).
 *
 * Requests are the caller's handles, `req_bytes` bytes each (sizeof(MPI_Request)), stored
 * by the library in arrays it owns; null_req writes the null handle. Every function returns
 * 0 or a negative gcomp status: GCOMP_ERR_INVALID for a message longer than its receive
 * (MPI_ERR_TRUNCATE), GCOMP_ERR_FABRIC for other failures. Tags are 0..tag_ub. test and
 * waitany complete a request (it becomes the null handle) and give the bytes it moved;
 * waitany blocks until one of n handles (null ones are skipped) completes, *index -1 when
 * all are null. cancel withdraws a pending request and frees its handle. wtime is a clock
 * in seconds (MPI_Wtime: the simulated clock under a simulator). allgather as in
 * gcomp_comm_init_oob. close (may be NULL) is called exactly once with ctx: when the
 * communicator is destroyed, or before gcomp_comm_init_p2p returns a failure.
 *
 * simulated: nonzero under a simulator (SMPI), where every unsuccessful test costs
 * simulated time and the ranks share one process: then a wait that finds nothing new
 * blocks in waitany instead of polling, there is no shared-memory segment between the
 * ranks of a node, and GCOMP_TIMEOUT_MS is not enforced (the simulator reports deadlocks).
 * Elsewhere waits poll with test and requests time out after GCOMP_TIMEOUT_MS. */
typedef struct gcomp_p2p_ops {
  size_t req_bytes;
  int tag_ub;
  int simulated;
  int (*isend)(void *ctx, int peer, int tag, const void *buf, size_t len, void *req);
  int (*irecv)(void *ctx, int peer, int tag, void *buf, size_t capacity, void *req);
  int (*test)(void *ctx, void *req, int *done, size_t *len);
  int (*waitany)(void *ctx, int n, void *reqs, int *index, size_t *len);
  int (*cancel)(void *ctx, void *req);
  void (*null_req)(void *req);
  double (*wtime)(void *ctx);
  gcomp_allgather_fn allgather;
  void (*close)(void *ctx);
} gcomp_p2p_ops;

/* Creates this rank's communicator over the caller's point-to-point functions (above).
 * rank, size, node_id and config as in gcomp_comm_init_oob. ops is copied; ctx must stay
 * valid until the communicator is destroyed. Collective over the `size` ranks.
 * GCOMP_ERR_INVALID for bad arguments (a missing function, tag_ub below 2^23 - 1). */
GCOMP_API gcomp_status gcomp_comm_init_p2p(int rank, int size, const char *node_id,
                                           const gcomp_p2p_ops *ops, void *ctx,
                                           const gcomp_config *config, gcomp_comm **out);

/* `size` ranks inside this process over the in-process transport (like ncclCommInitAll):
 * comms[0..size) receive one communicator per rank (all NULL on failure). node_of (NULL:
 * one node) gives each rank's node index (0 <= node_of[r] < size), so hierarchical
 * algorithms run too. Each communicator may then be driven by its own thread (one thread
 * per rank): a collective call needs every rank's thread to make it. For simulations (the
 * convergence harness) and tests. Each is destroyed with gcomp_comm_destroy, which for
 * in-process ranks does not wait for the others. 1 <= size <= 4096. */
GCOMP_API gcomp_status gcomp_comm_init_local(int size, const int *node_of,
                                             const gcomp_config *config, gcomp_comm **comms);

GCOMP_API int gcomp_comm_rank(const gcomp_comm *comm);
GCOMP_API int gcomp_comm_size(const gcomp_comm *comm);
/* Node index of this rank (nodes numbered by their lowest rank) and the node count. */
GCOMP_API int gcomp_comm_node(const gcomp_comm *comm);
GCOMP_API int gcomp_comm_nnodes(const gcomp_comm *comm);

/* Frees the communicator; NULL is a no-op. Collective: over libfabric it waits (up to
 * GCOMP_TIMEOUT_MS, 1 s after a failure) until every live peer destroys its communicator
 * too, so that nothing still in flight is lost, like MPI_Finalize; in-process ranks
 * (gcomp_comm_init_local) do not wait. Writes GCOMP_STATS and GCOMP_TRACE (a write that
 * fails draws a warning). While gcomp_iallreduce requests of this communicator are pending
 * (issued, not yet completed by gcomp_request_wait or gcomp_request_test) it refuses:
 * GCOMP_ERR_INVALID naming how many, and the communicator stays usable (complete them, then
 * destroy again). Not thread-safe with other calls on the same communicator. */
GCOMP_API gcomp_status gcomp_comm_destroy(gcomp_comm *comm);

/* Aborts the communicator, like ncclCommAbort: safe from any thread, also while calls or
 * requests of it are pending or running. The running call and every queued request finish
 * with GCOMP_ERR_ABORTED (and so does every later call); the rank tells every peer, whose
 * calls on their communicator then fail promptly too (GCOMP_ERR_ABORTED naming this rank)
 * rather than after GCOMP_TIMEOUT_MS. The notice goes out from the call running at that
 * moment, else from the next call or gcomp_comm_destroy. Once the requests are completed
 * (gcomp_request_wait or _test), gcomp_comm_destroy succeeds without waiting for the peers'
 * goodbyes. NULL is a no-op; a second abort changes nothing. */
GCOMP_API int gcomp_comm_abort(gcomp_comm *comm);

/* Sums (or reduces with op) count elements of dtype over all ranks; every rank receives
 * the result in recvbuf. sendbuf == recvbuf is in place. count may be 0.
 *
 * codec: NULL uses GCOMP_CODEC (default "none") across nodes and GCOMP_INTRA_CODEC on a
 * communicator of one node; a codec applies only to float32 SUM and
 * AVG calls of at least GCOMP_CODEC_MIN_BYTES, and only when the planner predicts it pays;
 * other calls run uncompressed. key names the tensor for error feedback. The algorithm is
 * chosen per call by the cost model, or by GCOMP_ALGO. For a fixed rank count, placement,
 * algorithm and codec the result is bitwise identical on every rank and across runs.
 *
 * Errors: GCOMP_ERR_INVALID (bad argument; or ranks that disagree on count or dtype, seen as
 * a message of the wrong length or shape wherever it arrives), GCOMP_ERR_TIMEOUT / GCOMP_ERR_PEER (a peer
 * stopped answering or died; the detail starts with the ranks that did not answer, or had
 * exited, when the failing ranks compared notes), GCOMP_ERR_CORRUPT (a frame failed
 * validation: every rank of the call reports it at once, naming the sender: the rank that
 * found it tells every peer). After any
 * failure past the argument checks the communicator is unusable: every later call returns
 * GCOMP_ERR_PEER at once, naming the first failure. Destroy it and create a new one. */
GCOMP_API gcomp_status gcomp_allreduce(gcomp_comm *comm, const void *sendbuf, void *recvbuf,
                                       size_t count, gcomp_dtype dtype, gcomp_op op,
                                       gcomp_codec *codec, uint64_t key);

/* Non-blocking allreduce: the same call as gcomp_allreduce, started and returned at once.
 * The call runs on the communicator's progress thread (started on the first non-blocking
 * call; it sleeps when there is nothing to do), so the caller can compute meanwhile; sendbuf
 * and recvbuf must stay untouched until the request completes. Calls on one communicator,
 * blocking or not, run one at a time in the order they were issued (a blocking call issued
 * after non-blocking ones waits for them). Argument errors are returned at once; errors of
 * the call itself come from gcomp_request_wait / gcomp_request_test, with gcomp_last_error()
 * set in the waiting thread. Every request must be completed by wait or test (which free it)
 * before the communicator is destroyed (gcomp_comm_destroy refuses until then). A request
 * may be waited for or tested from another thread than the one that issued it, but by one
 * thread at a time. gcomp_comm_get_stats is exact only when none is pending. */
typedef struct gcomp_request gcomp_request;
GCOMP_API gcomp_status gcomp_iallreduce(gcomp_comm *comm, const void *sendbuf, void *recvbuf,
                                        size_t count, gcomp_dtype dtype, gcomp_op op,
                                        gcomp_codec *codec, uint64_t key, gcomp_request **req);
/* Waits for req and frees it; returns the call's status. */
GCOMP_API gcomp_status gcomp_request_wait(gcomp_request *req);
/* *done = 0: still running (req stays valid); *done = 1: finished, req freed, the call's
 * status returned. */
GCOMP_API gcomp_status gcomp_request_test(gcomp_request *req, int *done);

/* ---- the other collectives ----------------------------------------------------------
 * The same conventions as gcomp_allreduce: status and gcomp_last_error(), stats, trace,
 * GCOMP_TIMEOUT_MS, the failure exchange, every dtype and op, every communicator (splits
 * and dups too), and each call's non-blocking twin (completed by gcomp_request_wait/test,
 * in issue order with every other call of the communicator). Every rank must make the same
 * call: before moving data the ranks compare the collective, counts, dtype, op, root and
 * codec, and check their own arguments; a refusal or a disagreement anywhere is
 * GCOMP_ERR_INVALID on every rank (the communicator stays usable), never a hang or a wrong
 * result. Failures past that point break the communicator as gcomp_allreduce's do. The
 * algorithm is the planner's per call, or GCOMP_ALGO's per collective
 * (e.g. GCOMP_ALGO=reduce_scatter=ring,allgather=shm,broadcast=tree; gcomp-info lists them).
 *
 * gcomp_reduce_scatter: sendbuf holds size x recvcount elements; rank r receives in recvbuf
 * the reduction of block r. In place when recvbuf == sendbuf + rank * recvcount (NCCL's
 * rule). codec and key as gcomp_allreduce's (NULL: GCOMP_CODEC across nodes,
 * GCOMP_INTRA_CODEC on one node; float32 SUM/AVG only): each value is quantised once per
 * level, summed in fp32, with error feedback per key and block. On one node with a shared
 * segment a codec passed is not used (the segment's copies beat encoding): only
 * GCOMP_INTRA_CODEC compresses there. */
GCOMP_API gcomp_status gcomp_reduce_scatter(gcomp_comm *comm, const void *sendbuf, void *recvbuf,
                                   size_t recvcount, gcomp_dtype dtype, gcomp_op op,
                                   gcomp_codec *codec, uint64_t key);
/* gcomp_allgather: recvbuf holds size x sendcount elements, block r from rank r. In place
 * when sendbuf == recvbuf + rank * sendcount. Exact unless codec is given or
 * GCOMP_ALLGATHER_CODEC names one (float32 only): then each owner encodes its block once
 * and every rank, the owner too, keeps the decoded values, bitwise the same on all ranks.
 * On one node with a shared segment only GCOMP_ALLGATHER_CODEC compresses; a codec passed is
 * not used there (every rank still holds bitwise the same, exact, values). */
GCOMP_API gcomp_status gcomp_allgather(gcomp_comm *comm, const void *sendbuf, void *recvbuf,
                              size_t sendcount, gcomp_dtype dtype, gcomp_codec *codec,
                              uint64_t key);
/* gcomp_broadcast: root's count elements of buf into every rank's buf. Exact. */
GCOMP_API gcomp_status gcomp_broadcast(gcomp_comm *comm, void *buf, size_t count, gcomp_dtype dtype,
                              int root);
/* gcomp_barrier: returns on a rank once every rank has called it. */
GCOMP_API gcomp_status gcomp_barrier(gcomp_comm *comm);
/* gcomp_alltoall: block j (count elements) of sendbuf goes to rank j; block i of recvbuf
 * came from rank i. Exact; sendbuf == recvbuf is allowed (the input is copied first). */
GCOMP_API gcomp_status gcomp_alltoall(gcomp_comm *comm, const void *sendbuf, void *recvbuf, size_t count,
                             gcomp_dtype dtype);
GCOMP_API gcomp_status gcomp_ireduce_scatter(gcomp_comm *comm, const void *sendbuf, void *recvbuf,
                                    size_t recvcount, gcomp_dtype dtype, gcomp_op op,
                                    gcomp_codec *codec, uint64_t key, gcomp_request **req);
GCOMP_API gcomp_status gcomp_iallgather(gcomp_comm *comm, const void *sendbuf, void *recvbuf,
                               size_t sendcount, gcomp_dtype dtype, gcomp_codec *codec,
                               uint64_t key, gcomp_request **req);
GCOMP_API gcomp_status gcomp_ibroadcast(gcomp_comm *comm, void *buf, size_t count, gcomp_dtype dtype,
                               int root, gcomp_request **req);
GCOMP_API gcomp_status gcomp_ibarrier(gcomp_comm *comm, gcomp_request **req);
GCOMP_API gcomp_status gcomp_ialltoall(gcomp_comm *comm, const void *sendbuf, void *recvbuf,
                              size_t count, gcomp_dtype dtype, gcomp_request **req);

/* Where the time of this communicator's collectives went, summed since creation. Sized: set
 * struct_size (gcomp_comm_stats s = {.struct_size = sizeof s}); see gcomp_codec_stats. */
typedef struct {
  size_t struct_size;        /* set by the caller: sizeof the struct it passes */
  uint64_t calls;
  uint64_t bytes;            /* user bytes reduced (count * dtype size, summed) */
  uint64_t wire_bytes;       /* bytes this rank sent through the transport (libfabric): what
                                crossed a network or the provider's shared memory */
  double total_s;            /* wall time inside gcomp_allreduce */
  double wait_s;             /* of which waiting for peers */
  double reduce_s;           /* of which reducing (adding); not timed for calls of at most
                                48 bytes on one node, whose additions take less than a read
                                of the clock */
  double encode_s;           /* of which encoding */
  double decode_s;           /* of which decoding */
  uint64_t nonfinite;        /* NaN/Inf in this rank's share of the results (rank r counts
                                chunk r of count/size elements; the sum over ranks counts
                                each once). They propagate. */
  uint64_t shm_bytes;        /* bytes this rank copied into its node's shared segment (the
                                shm algorithm, hier's in-node halves): not on any wire */
  uint64_t overflows;        /* GCOMP_FLOAT16 / GCOMP_BFLOAT16 calls: finite fp32 results
                                that became +-Inf when narrowed back to the caller's type
                                (fp16 above 65504), counted like nonfinite: rank r its chunk
                                of the result. Not counted in nonfinite. */
} gcomp_comm_stats;

/* GCOMP_ERR_INVALID when out->struct_size is smaller than the first published layout
 * (gcomp 0.1's, whose last field is shm_bytes). */
GCOMP_API gcomp_status gcomp_comm_get_stats(const gcomp_comm *comm, gcomp_comm_stats *out);

/* Stragglers: how late this rank arrives at its calls, and which rank arrives last. Every
 * GCOMP_SKEW_WINDOW calls (default 256; equal on all ranks; 0: off) the ranks compare the
 * time each spent inside each call of the window, with two small allreduces. Calls end
 * together, so the rank that spent the least time arrived last and rank r arrived
 * (longest time - its time) after the first: no clocks are compared. The estimate is good
 * to about one message latency (one pipeline step for large calls). Figures cover complete
 * windows; for non-blocking calls a rank "arrives" when it calls gcomp_iallreduce. Like
 * gcomp_comm_get_stats, exact only when no request is pending. A failed exchange (a peer
 * gone) is returned by the call that completed the window: its own result is complete.
 * Sized like gcomp_comm_stats (first published layout: up to worst_last). */
typedef struct {
  size_t struct_size;        /* set by the caller: sizeof the struct it passes */
  uint64_t calls;            /* calls measured */
  double late_mean_s;        /* how long after the first rank this rank arrived: mean */
  double late_max_s;         /* and the longest */
  uint64_t last;             /* calls at which this rank arrived last (ties count for all) */
  double spread_mean_s;      /* mean time from the first to the last arrival of a call */
  int worst_rank;            /* the rank with the largest mean lateness; -1 before the
                                first window completes */
  double worst_late_mean_s;  /* its mean lateness */
  uint64_t worst_last;       /* calls at which it arrived last */
} gcomp_skew_stats;

GCOMP_API gcomp_status gcomp_comm_get_skew(const gcomp_comm *comm, gcomp_skew_stats *out);

/* The drift guard (GCOMP_GUARD=every=N,budget=E[,backoff=M], or through gcomp_config_set;
 * "off" by default, "on" for every=100,budget=0.5,backoff=100): on the first and every Nth
 * compressed call of a tensor size (its count: not the key, which may differ between ranks,
 * so every rank decides alike) the exact fp32 allreduce runs too, on the same input, and the
 * codec's relative error ||compressed - exact|| / ||exact|| is measured; with error
 * feedback (+ef), whose single calls err by design, every Nth call compares the running
 * sum of the size's results since its first call (or last fallback) with the exact running
 * sum of its inputs (with ef momentum: of the velocities the codec feeds; codecs with
 * momentum factor masking are not guarded).
 * The +ef running sums cover a fixed sample of the tensor (all of it up to 16,384 values,
 * then 16 blocks of 1,024 spread over it). Over budget the call returns the exact result (with
 * +ef the codec's residuals are cleared too, restarting every running sum) and the size runs
 * uncompressed for its next M calls; the log warns with the size, the key and the error,
 * and GCOMP_STATS lists every checked size with this rank's key of its last call. Equal on
 * all ranks but last_fallback_key (this rank's key of that call). Sized like
 * gcomp_comm_stats (first published layout: up to guard_s). */
typedef struct {
  size_t struct_size;          /* set by the caller: sizeof the struct it passes */
  int every;                   /* the setting (every 0: the guard is off) */
  double budget;
  int backoff;
  uint64_t checks;             /* calls checked */
  uint64_t fallbacks;          /* of which over budget: the exact result returned */
  uint64_t backoff_calls;      /* calls run uncompressed because their size fell back */
  double last_error, max_error;       /* of the checks (NaN when a check gave none) */
  uint64_t last_fallback_key;
  double last_fallback_error;
  double guard_s;              /* seconds the guard took: checks, and with +ef the running
                                  sums of every call (inside the calls' total_s) */
} gcomp_guard_stats;

GCOMP_API gcomp_status gcomp_comm_get_guard(const gcomp_comm *comm, gcomp_guard_stats *out);

/* Marks the end of a training step on this rank (optional). With GCOMP_MEASURE on (the
 * default) each rank's run is split into compute (time outside gcomp between its first and
 * last call), communication (inside, moving and reducing data) and wait (inside, waiting for
 * the last rank to arrive: the straggler detector's figure, see gcomp_comm_get_skew): over
 * the run in GCOMP_STATS (run_s, compute_s, comm_s, split_wait_s) and per step in
 * GCOMP_TRACE. Without marks a step is a window of GCOMP_SKEW_WINDOW calls (256 when the
 * detector is off); from the first mark on, steps end at marks. Not collective; safe from
 * any thread (a non-blocking call in flight belongs to the step in which it completes).
 * GCOMP_ERR_INVALID for a NULL comm. */
GCOMP_API gcomp_status gcomp_comm_mark_step(gcomp_comm *comm);

/* The algorithms this build offers: name and one-line description of algorithm i
 * (0 <= i < gcomp_algo_count()). Allreduce's have plain names ("ring"), the other
 * collectives' "COLLECTIVE:NAME" ("allgather:ring"), which GCOMP_ALGO takes as
 * COLLECTIVE=NAME. */
GCOMP_API int gcomp_algo_count(void);
GCOMP_API gcomp_status gcomp_algo_describe(int i, const char **name, const char **desc);
/* 1 when algorithm `name` runs the codec, 0 when it moves the data uncompressed,
 * GCOMP_ERR_INVALID when this build has no algorithm of that name. */
GCOMP_API int gcomp_algo_compresses(const char *name);

/* The algorithm the last completed call on this communicator ran ("" before any; the
 * pointer is static). */
GCOMP_API const char *gcomp_comm_last_algo(const gcomp_comm *comm);

/* ---------------------------------------------------------------------------------------
 * Communicators made from communicators (data-parallel groups of a hybrid job, a library's
 * private copy), as MPI_Comm_split and MPI_Comm_dup make them.
 *
 * gcomp_comm_split is collective over comm: every rank calls it (in the same order as its
 * other calls on comm), with a color and a key. The ranks of one color form a new
 * communicator, ranked by key (ties: by their rank in comm); color GCOMP_UNDEFINED joins
 * none (*out NULL, GCOMP_OK). A negative color other than that is GCOMP_ERR_INVALID on every
 * rank alike. The new communicator has its own transport (calls on it never interleave with
 * calls on comm, so two threads may drive the two at once), the same node map (ranks that
 * shared a node still do: hierarchical algorithms run on a split whose ranks are uneven over
 * nodes), a copy of comm's settings, its own stats (written at destroy to comm's GCOMP_STATS /
 * GCOMP_TRACE path, with %r the rank in the communicator made from the environment or out of
 * band and ".s<N>" before the extension, N counting the splits and dups made from comm),
 * and comm's calibration where it holds (no new measurement unless the new communicator
 * uses a link class comm did not measure). Non-blocking calls already issued on comm run
 * first. gcomp_comm_dup is gcomp_comm_split with one color and the ranks in comm's order.
 * Each is destroyed with gcomp_comm_destroy, independently of comm (before or after it). A
 * failure (a member that cannot create its transport) fails the members of that color
 * within GCOMP_TIMEOUT_MS; comm stays usable. */
#define GCOMP_UNDEFINED (-1)
GCOMP_API gcomp_status gcomp_comm_split(gcomp_comm *comm, int color, int key, gcomp_comm **out);
GCOMP_API gcomp_status gcomp_comm_dup(gcomp_comm *comm, gcomp_comm **out);

/* Communicators created with cfg (gcomp_comm_init_oob, as the MPI shim creates one per MPI
 * communicator) take the link and add-rate figures comm measured (or took itself) instead of
 * measuring their own, on the same terms as gcomp_comm_split: where every rank of the new
 * communicator was given figures that cover the link classes it uses, else they all measure.
 * For communicators among the processes of comm's job (the figures describe the links and
 * cores, not which ranks use them). The figures are copied: comm may be destroyed right
 * after. Not thread-safe with other calls on cfg. */
GCOMP_API gcomp_status gcomp_config_share_calibration(gcomp_config *cfg, const gcomp_comm *comm);

/* ---------------------------------------------------------------------------------------
 * The planner's cost model, on paper: what gcomp_allreduce would run, and how long the
 * alpha-beta-gamma model says it takes, for a job that need not exist (gcomp-plan prints
 * it). The figures a communicator measured are in its GCOMP_STATS file ("model").
 * The model prices best cases, so trust its choices more than its absolute times: across a
 * link it was within 1-10% of measurement, on nodes with more busy ranks than cores it was
 * 2.6x (2 MiB) to 75x (8 B) optimistic (it does not see ranks waiting for the scheduler),
 * hence `oversubscribed`.
 * Thread-safe; needs no communicator and no network.
 * ------------------------------------------------------------------------------------- */
typedef struct {
  size_t struct_size;        /* sizeof the struct the caller passes (as for the stats) */
  uint64_t bytes;            /* payload of one allreduce (fp32) */
  int nodes;                 /* >= 1 */
  int ranks_per_node;        /* >= 1, the same on every node */
  double intra_alpha_s;      /* inside a node: seconds per message (latency) ... */
  double intra_Bps;          /* ... and bytes per second (bandwidth), > 0 */
  double inter_alpha_s;      /* between nodes, likewise */
  double inter_Bps;
  double reduce_Bps;         /* one rank's fp32 reduction rate, input bytes per second, > 0 */
  double shm_alpha_s;        /* the shared-memory allreduce of a single node: seconds per
                                round; 0: not offered (as without its calibration) */
  double shm_Bps;            /* its rate (> 0 when shm_alpha_s is) */
  uint64_t shm_slot_bytes;   /* bytes per round; 0: 256 KiB (GCOMP_SHM_BYTES' default) */
  double codec_ratio;        /* compressed calls: wire bytes per fp32 byte (0 < r <= 1);
                                0: uncompressed */
  double codec_Bps;          /* encode + decode rate, fp32 bytes per second (with a ratio) */
  int codec_sparse;          /* 1: top-k frames, summed without re-encoding */
  int cores_per_node;        /* cores the node's ranks run on; 0: unknown */
} gcomp_plan_query;

typedef struct {
  size_t struct_size;        /* sizeof the struct the caller passes */
  const char *algo;          /* the algorithm (static string) */
  double time_s;             /* predicted seconds of one call */
  double latency_s;          /* of which the latency terms (alpha: per message, per round).
                                latency_s > time_s / 2: the call is latency-bound, and more
                                ranks or smaller messages cost it more than bandwidth does */
  double busbw_Bps;          /* bytes * 2(n-1)/n / time_s (nccl-tests' bus bandwidth) */
  int oversubscribed;        /* 1 when ranks_per_node > cores_per_node > 0: busy ranks share
                                cores and wait for the scheduler, which the model does not
                                see; time_s is then a lower bound, not an estimate */
} gcomp_plan_result;

/* Sets q's links from text in GCOMP_ALPHA_BETA's format,
 * "intra_us,intra_GBps,inter_us,inter_GBps[,shm_us,shm_GBps]" (latencies in microseconds,
 * rates in GB/s); the other fields are left alone. GCOMP_ERR_INVALID naming the text when
 * malformed (q unchanged). */
GCOMP_API gcomp_status gcomp_plan_links(gcomp_plan_query *q, const char *text);

/* Predicts one allreduce of q->bytes over q->nodes x q->ranks_per_node ranks. algo NULL:
 * the algorithm the planner picks (as gcomp_allreduce with GCOMP_ALGO unset); a name from
 * gcomp_algo_describe: that one, or GCOMP_ERR_UNSUPPORTED when it cannot serve the query
 * (hier on one node, shm across nodes, a compressed algorithm without codec figures).
 * GCOMP_ERR_INVALID names a field out of range or an unknown algorithm. */
GCOMP_API gcomp_status gcomp_plan_predict(const gcomp_plan_query *q, const char *algo,
                                          gcomp_plan_result *out);

#ifdef __cplusplus
}
#endif
#endif /* GCOMP_H */
