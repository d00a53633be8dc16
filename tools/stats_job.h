/* gcomp-stats' picture of one job: every rank's GCOMP_STATS figures (gcomp-stats.c reads
 * them) and the findings drawn from them (stats_find.c). */
#ifndef GCOMP_STATS_JOB_H
#define GCOMP_STATS_JOB_H

#include <stddef.h>
#include <stdint.h>

/* What one rank sent to one peer, and for how long at least one of those sends was in
 * flight: delivered throughput measured from the job's own calls. */
typedef struct {
  int peer;
  double bytes, busy_s;
} peer_stats;

/* What one of this rank's TCP connections delivered, as the kernel measured it: acknowledged
 * bytes and the time it had data to send; the peer rank is the one whose file holds the
 * same connection seen from the other end (-1: none). */
typedef struct {
  char local[48], remote[48];
  double lport, rport;   /* -1: not recorded */
  double bytes, busy_s;
  int peer;
} link_stats;

typedef struct {
  const char *path;
  double rank, size, node, nodes, calls, bytes, total, wait, reduce, encode, decode, wire, shm;
  double nonfinite;
  /* stragglers; typical (the mean of window medians) and the call of the longest lateness
   * are absent (has_typical 0) in files from before they were recorded */
  int has_skew, has_typical;
  double late_mean_us, late_max_us, last, skew_calls, spread_mean_us;
  double late_typical_us, spread_typical_us, late_max_call;
  /* the step split: the run's wall time, of which outside gcomp (compute); has_steps 0 in
   * files from before it was recorded */
  int has_steps;
  double run_s, compute_s, steps;
  /* of the time inside gcomp: moving and reducing, and waiting for the last rank to arrive
   * (the detector's figure); files without them split total_s by the wait loops' wait_s */
  double comm_s, split_wait_s;
  double cores;          /* CPUs the rank could run on; 0: not recorded */
  int has_model;
  double intra_a, intra_b, inter_a, inter_b, gamma, shm_a, shm_b;   /* us and GB/s */
  peer_stats *peers;     /* [npeers], malloc'd */
  int npeers;
  link_stats *links;     /* [nlinks], malloc'd */
  int nlinks;
} rank_stats;

/* One finding: what, about whom, the evidence (a JSON object's members, and the same in
 * words), what to try, and what it costs (seconds of the job; < 0: not known). */
typedef struct {
  const char *kind;
  int order;             /* place in the measuring order (the JSON's order) */
  int rank, node;        /* -1: not about one */
  double cost_s;
  char evidence[640];    /* JSON members: "late_mean_ms": 10.1, ... */
  char words[640];
  char try_[400];
} finding;

enum { MAX_FINDINGS = 16 };
typedef struct {
  finding f[MAX_FINDINGS];
  int n;
} findings;

/* the measuring order of the kinds */
enum { ORDER_STEP, ORDER_COLLECTIVE, ORDER_RANKS, ORDER_PLACEMENT };

/* Every finding the job's files support, into fs. rs: n ranks sorted by rank. */
void stats_find_all(const rank_stats *rs, int n, findings *fs);

#endif /* GCOMP_STATS_JOB_H */
