/* The parameter registry: every GCOMP_* environment variable gcomp reads, one line each.
 * GCOMP_PARAM(ID, TYPE, DEFAULT, EXTRA, HELP) defines GCOMP_<ID>.
 *   TYPE  INT (EXTRA "min:max"), SIZE (bytes, k/m/g suffix, EXTRA "min:max"),
 *         BOOL (0/1/true/false/yes/no/on/off), STR (free text), ENUM (EXTRA "a|b|c").
 * A malformed value is an error at init that names the variable and the value.
 * No include guard: this file is included several times with different GCOMP_PARAM. */

/* logging */
GCOMP_PARAM(DEBUG, ENUM, "warn", "none|warn|info|trace",
            "log level: none, warn, info or trace")
GCOMP_PARAM(DEBUG_SUBSYS, STR, "all", "",
            "comma-separated subsystems to log: init,codec,reduce,fabric,tuning,env,shim or all")
GCOMP_PARAM(DEBUG_FILE, STR, "", "",
            "log to this file instead of stderr; %h expands to the host name, %p to the pid")

/* kernels */
GCOMP_PARAM(ISA, ENUM, "auto", "auto|base|avx2|avx512",
            "kernel level: auto gives each kernel family the best the CPU has (avx512: F, BW, VL) unless gcomp's table of measured CPUs lowers it (gcomp-info lists the choice); a level puts every family there; asking for more than the CPU has is an error")

/* codecs and planning */
GCOMP_PARAM(CODEC, STR, "none", "",
            "codec across nodes when the caller passes none, e.g. bf16 or topk:ratio=0.01+ef")
GCOMP_PARAM(INTRA_CODEC, STR, "none", "",
            "codec inside a node: hierarchical calls' intra-node phases, and single-node calls that pass none")
GCOMP_PARAM(CODEC_MIN_BYTES, SIZE, "65536", "0:1099511627776",
            "messages smaller than this go uncompressed")
GCOMP_PARAM(ALGO, STR, "auto", "",
            "algorithms: auto (cost model), an allreduce algorithm's name, or a comma-separated list of NAME "
            "and COLLECTIVE=NAME items, e.g. ring,reduce_scatter=ring,allgather=shm,broadcast=tree (gcomp-info lists them)")
GCOMP_PARAM(ALLGATHER_CODEC, STR, "none", "",
            "codec of allgathers that pass none (none: exact); the owner encodes its block once and every rank, "
            "itself too, keeps the decoded values")
GCOMP_PARAM(GUARD, STR, "off", "",
            "drift guard: every=N,budget=E[,backoff=M] checks the first and every Nth compressed call of a tensor "
            "size against the exact allreduce and falls back over budget (on: every=100,budget=0.5,backoff=100; equal on all ranks)")
GCOMP_PARAM(SEGMENT_BYTES, SIZE, "16m", "4096:1099511627776",
            "pipeline segment of the ring and pairwise steps (each one message; shm copies whole messages best); "
            "grown only where a transfer would need more than 4096 segments; hier-direct's pipelined slices are this, "
            "4 MiB at most (equal on all ranks)")
GCOMP_PARAM(SHM_BYTES, SIZE, "1m", "0:1099511627776",
            "bytes per rank and round of the node's shared segment: the shm algorithm and hier's in-node halves (0: no segment)")
GCOMP_PARAM(STREAM_BYTES, SIZE, "16m", "0:1099511627776",
            "hier-direct's pipelined calls of this many bytes or more write the result with streaming stores, which "
            "skip the cache (0: every call; 1024g: none; need not be equal on all ranks)")
GCOMP_PARAM(HOST_RANKS, INT, "0", "0:1048576",
            "ranks that share this machine's CPUs (0: the node's local ranks; gcomp-run sets it); when they outnumber "
            "the CPUs a rank may run on, hier-direct's pipelined waits nap instead of spinning and yielding")
GCOMP_PARAM(ALPHA_BETA, STR, "", "",
            "skip calibration: 'intra_alpha_us,intra_GBps,inter_alpha_us,inter_GBps[,shm_alpha_us,shm_GBps]'")

/* measurement */
GCOMP_PARAM(STATS, STR, "", "",
            "write a JSON summary of each communicator's calls here when it is destroyed (%r rank, %p pid, %h host)")
GCOMP_PARAM(TRACE, STR, "", "",
            "write a Chrome trace-event JSON of every allreduce here (open in Perfetto; %r rank, %p pid, %h host)")

GCOMP_PARAM(METRICS, STR, "", "",
            "not read by the library: the file a training program writes its metrics to, JSON lines from rank 0 (gcomp.metrics; gcomp-converge run sets it)")
GCOMP_PARAM(SEED, STR, "", "",
            "not read by the library: the seed a training program takes (gcomp.metrics.seed; gcomp-converge run --noise-floor sets it)")

GCOMP_PARAM(SKEW_WINDOW, INT, "256", "0:65536",
            "straggler detection: compare arrival times every this many calls (equal on all ranks; 0: off)")
GCOMP_PARAM(NOTICE, BOOL, "1", "",
            "a rank that finds corrupt data or a dead or silent peer tells every rank at once (equal on all ranks; 0 only to measure what that costs)")
GCOMP_PARAM(MEASURE, BOOL, "1", "",
            "the step split (compute/communication/wait) and per-peer delivered throughput in GCOMP_STATS and GCOMP_TRACE (0: off)")

/* transport and launch */
GCOMP_PARAM(TIMEOUT_MS, INT, "30000", "1:86400000",
            "a peer that does not answer within this many milliseconds is an error")
GCOMP_PARAM(PROVIDER, STR, "tcp;ofi_rxm", "", "libfabric provider between nodes")
GCOMP_PARAM(INTRA_PROVIDER, STR, "shm", "", "libfabric provider inside a node")
GCOMP_PARAM(FAULT, STR, "", "",
            "debug fault injection for tests, off when empty: KIND:rank=R[,call=N] (fabric/fault.h)")
GCOMP_PARAM(NODE_ID, STR, "", "", "node identity (overrides the host name; for emulated nodes)")
GCOMP_PARAM(RANK, INT, "-1", "-1:1048576", "this process's rank (else from launcher variables)")
GCOMP_PARAM(SIZE, INT, "-1", "-1:1048576", "number of ranks (else from launcher variables)")
GCOMP_PARAM(LOCAL_RANK, INT, "-1", "-1:1048576", "rank within the node (else derived)")
GCOMP_PARAM(ROOT, STR, "", "", "rendezvous address host:port (else MASTER_ADDR on port MASTER_PORT + 1)")
GCOMP_PARAM(JOB_TOKEN, STR, "", "", "secret every rank presents at the rendezvous (set by the launcher)")
GCOMP_PARAM(CQ_WAIT, BOOL, "1", "",
            "a long wait sleeps on the libfabric completion queue's wait fd, woken when data arrives, instead of in timed "
            "naps, where the provider has one (tcp;ofi_rxm; not shm) and no other rank shares the node (0: naps alone)")
GCOMP_PARAM(CHUNK_BYTES, SIZE, "4m", "1:1099511627776",
            "large messages move in chunks of this size, pipelined (equal on all ranks); tcp;ofi_rxm sends them eagerly")

/* the Python package (python/gcomp): listed so that setting it draws no "unknown variable" */
GCOMP_PARAM(LIBRARY, STR, "", "",
            "Python package only: the libgcomp.so it loads (else the one installed beside it); the library ignores it")

/* MPI shim (libgcomp_mpi.so) */
GCOMP_PARAM(SHIM_STRICT, BOOL, "0", "",
            "MPI shim: abort the job when gcomp cannot start (default: warn once and pass every call to MPI)")
GCOMP_PARAM(SHIM_ROUTE, ENUM, "auto", "auto|gcomp|mpi",
            "MPI shim: where the calls gcomp can serve go: auto times gcomp and MPI on the first calls of each size (per power of two) and sends the rest to the faster, as every rank agrees; gcomp or mpi sends them all there")
