/* MPI's own collectives as one more algorithm: per communicator, per collective (allreduce,
 * reduce-scatter, allgather, broadcast, barrier, alltoall) and per size class (bytes in
 * [2^k, 2^(k+1)), the bytes of the call's count: a reduce-scatter's block, an allgather's
 * contribution, an alltoall's block, a barrier's none), the calls gcomp could serve go to
 * whichever of gcomp and MPI is faster.
 *
 * Why here and by measurement, not as an entry in reduce/plan.c's cost table: the library
 * knows nothing of MPI (only shim/ includes mpi.h), MPI's collective is a black box whose
 * time no alpha-beta formula of gcomp's describes (Open MPI switches algorithms by size
 * itself), and a call that goes to MPI must cost no more than MPI: it leaves here before
 * any of gcomp's per-call work (arguments, plan, sequence number, observers), one table
 * look-up after the shim's own checks. So both candidates are timed end to end as the
 * program calls them, on its own buffers, and the times are compared, not modelled.
 *
 * Calibrated at first use rather than at creation: a size is timed only if the program uses
 * it (a creation-time sweep to 64 MiB would cost every communicator, dups and splits
 * included, a second of calls and 64 MiB of buffers), in the state the program's calls run
 * in (warm caches, the peers' real arrival pattern). A class's first calls go to gcomp, the
 * next as many to MPI (the first of each run a warm-up), then every member contributes its time of
 * each timed call to one PMPI_Allreduce(MAX) on the communicator: a call costs what its
 * slowest member saw, and each route's median call is compared, so the members agree by
 * construction. MPI requires every member to make the same collective calls in the same
 * order with the same size, so every member times the same calls and reaches the
 * agreement at the same call.
 *
 * Why the median of each call's slowest member, not each member's fastest call: a member's
 * fastest call is the one it came to last, the peers' data already waiting; each member
 * has its own such call, and one-shot gcomp gains more from it than MPI's exchange does. At
 * 2 ranks, 32-63 B (OSU, 1,000 calls a size), the fastest calls had gcomp at 0.36 us
 * against MPI's 0.45, the class went to gcomp, and OSU's median call took 0.62 us against
 * plain Open MPI's 0.56; the trials of 16-63 B flipped between the routes. The median also
 * ignores up to half the calls being descheduled.
 *
 * Why a run of each route, not alternate calls: alternating, each call found the caches
 * holding the other route's buffers (gcomp's segment, vader's fragments): at 2 ranks, 4 MiB,
 * the trial's MPI calls took 875 us against plain Open MPI's 687, and IMB, which makes 10
 * calls of 4 MiB (40 of 1 MiB), timed little else than the trial: 0.78-0.81x from 1 to 4 MiB
 * though the route then went to MPI. A run of calls times each route as it will run.
 *
 * A trial on a busy machine (a neighbour's build, a rank descheduled) can pick the slower
 * route, so a size's trial runs again after 256 of its blocking calls, then after 4 times
 * as many each time (up to 2^20): a long run spends at most a few dozen calls per size on
 * the slower route, and a bad pick does not last. */
#include <stdio.h>
#include <time.h>

#include "shim.h"

shim_route_mode shim_route_now;

void shim_route_start(shim_route_mode mode) { shim_route_now = mode; }

static unsigned class_of(size_t bytes) {
  return bytes ? 63u - (unsigned)__builtin_clzll((unsigned long long)bytes) : 0;
}

shim_class *shim_route_class(shim_comm *sc, int kind, size_t bytes) {
  return &sc->cls[kind][class_of(bytes)];
}

/* Timed calls per route after its warm-up: the small ones cost nothing to repeat and vary
 * most from call to call; at 64 MiB each MPI call of the trial costs tens of ms. */
static unsigned samples(size_t bytes) {
  return bytes <= (64u << 10) ? SHIM_SAMPLES : bytes <= (4u << 20) ? 4 : 2;
}

/* The lower median of n values (the smaller of 2); sorts v */
static double median(double *v, unsigned n) {
  for (unsigned i = 1; i < n; i++)
    for (unsigned j = i; j > 0 && v[j] < v[j - 1]; j--) {
      double x = v[j];
      v[j] = v[j - 1], v[j - 1] = x;
    }
  return v[(n - 1) / 2];
}

/* The route of a call of `bytes` of kind that gcomp could serve; *timed (NULL for the
 * non-blocking forms, which follow a size's agreed route and gcomp's until there is one):
 * time it and hand the time to learn (the members make the same calls in the same order, so
 * they time the same ones). *why: the FALL_ reason when it is MPI. */
static int pick(shim_comm *sc, int kind, size_t bytes, int *timed, int *why) {
  if (shim_route_now == SHIM_ROUTE_GCOMP) return SHIM_VIA_GCOMP;
  if (shim_route_now == SHIM_ROUTE_MPI) {
    *why = FALL_ASKED;
    return SHIM_VIA_MPI;
  }
  shim_class *k = shim_route_class(sc, kind, bytes);
  /* blocking calls only count towards the next trial: the trial itself is of those */
  if (k->decided && timed && ++k->used > k->recheck) k->decided = 0, k->calls = 0;
  if (k->decided) {
    if (k->decided - 1 == SHIM_VIA_MPI) *why = FALL_FASTER;
    return k->decided - 1;
  }
  if (!timed) return SHIM_VIA_GCOMP;   /* non-blocking, before its size's agreement */
  *timed = 1;
  return k->calls <= samples(bytes) ? SHIM_VIA_GCOMP : SHIM_VIA_MPI;
}

/* gcomp takes a size class only when its median call beats MPI's by this share: a route to
 * MPI costs a repeated call a handful of instructions (mpi_shim.c), so a tie or a near tie
 * measured on a busy machine, which could as well be a loss, goes to the route that is
 * never slower than MPI; a class where gcomp is faster by less gives that little up. */
#define GCOMP_EDGE 0.95

static int mpi_wins(double gcomp_s, double mpi_s) { return !(gcomp_s < GCOMP_EDGE * mpi_s); }

static void agree(shim_comm *sc, MPI_Comm comm, int kind, unsigned cls, shim_class *k,
                  unsigned n) {
  double v[2 * SHIM_SAMPLES], t[2];
  for (unsigned i = 0; i < n; i++) v[i] = k->t[0][i], v[n + i] = k->t[1][i];
  int ok = PMPI_Allreduce(MPI_IN_PLACE, v, (int)(2 * n), MPI_DOUBLE, MPI_MAX, comm) ==
           MPI_SUCCESS;
  t[0] = median(v, n), t[1] = median(v + n, n);
  /* MPI's errors are fatal unless the program asked otherwise; then gcomp keeps the class,
   * as it did before MPI was a choice (the members that failed say so below) */
  int via = ok && mpi_wins(t[0], t[1]) ? SHIM_VIA_MPI : SHIM_VIA_GCOMP;
  k->decided = (uint8_t)(1 + via);
  k->used = 0;
  k->recheck = !k->recheck ? 256 : k->recheck < (1u << 20) ? 4 * k->recheck : k->recheck;
  unsigned long long lo = cls ? 1ull << cls : 0, hi = cls < 63 ? (2ull << cls) - 1 : ~0ull;
  if (!ok)
    SHIM_WARN("rank %d: communicator %s: the agreement on %s of %llu-%llu B failed in MPI; "
              "gcomp serves that size", shim_world_rank(), sc->name, shim_kind_names[kind][0],
              lo, hi);
  else
    SHIM_INFO("rank %d: communicator %s: %s %llu-%llu B to %s (median of %u: gcomp %.2f us, "
              "MPI %.2f us, each call's slowest rank)", shim_world_rank(), sc->name,
              shim_kind_names[kind][0], lo, hi, via == SHIM_VIA_MPI ? "MPI" : "gcomp", n,
              t[0] * 1e6, t[1] * 1e6);
}

/* A timed call took `seconds`; after the last one of its size, collective over comm: the
 * members agree on the route (PMPI_Allreduce of each call's slowest member's time). */
static void learn(shim_comm *sc, MPI_Comm comm, int kind, size_t bytes, int via,
                  double seconds) {
  unsigned cls = class_of(bytes), n = samples(bytes);
  shim_class *k = &sc->cls[kind][cls];
  if (k->decided) return;
  /* gcomp's calls 0 (its warm-up) to n, then MPI's n + 1 (its warm-up) to 2n + 1 */
  unsigned i = via == SHIM_VIA_GCOMP ? k->calls : k->calls - (n + 1);
  if (i > 0) k->t[via][i - 1] = (float)seconds;
  if (++k->calls == 2 + 2 * n) agree(sc, comm, kind, cls, k, n);
}

void shim_route_report(const shim_comm *sc) {
  if (shim_route_now != SHIM_ROUTE_AUTO || sc->rank != 0 ||
      !gcomp_log_enabled(GCOMP_LOG_INFO, "shim"))
    return;
  char line[1024] = "";
  size_t o = 0;
  for (int kind = 0; kind < SHIM_KINDS; kind++) {
    int first = 1;
    for (unsigned c = 0; c < SHIM_CLASSES && o < sizeof line; c++) {
      int via = sc->cls[kind][c].decided;
      if (!via) continue;
      /* neighbouring classes that went the same way make one range */
      unsigned e = c;
      while (e + 1 < SHIM_CLASSES && sc->cls[kind][e + 1].decided == via) e++;
      unsigned long long lo = c ? 1ull << c : 0, hi = e < 63 ? (2ull << e) - 1 : ~0ull;
      const char *sep = !first ? ", " : o ? "; " : "", *name = shim_kind_names[kind][0];
      o += (size_t)snprintf(line + o, sizeof line - o, "%s%s%s%llu-%llu B %s", sep,
                            first ? name : "", first ? " " : "", lo, hi,
                            via - 1 == SHIM_VIA_MPI ? "MPI" : "gcomp");
      first = 0;
      c = e;
    }
  }
  if (o) SHIM_INFO("communicator %s: the sizes' last agreed routes: %s", sc->name, line);
}

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int shim_dispatch(shim_call *c, int why, const shim_mpi_args *a, MPI_Request *request) {
  int nb = request != NULL, timed = 0, via = SHIM_VIA_MPI;
  size_t bytes = 0;
  if (why < 0) {
    bytes = shim_call_bytes(c->count, c->dt);   /* a barrier's count is 0 */
    via = pick(c->sc, c->kind, bytes, nb ? NULL : &timed, &why);
  }
  if (via == SHIM_VIA_MPI && why < 0) why = FALL_TIMING;   /* a timed call through MPI */
  if (via == SHIM_VIA_MPI) shim_count_fell(c->kind, nb, a->count, why);
  else c->key = shim_tensor_key(a->recvbuf, c->count, c->dt);
  double t0 = timed ? now() : 0;
  int rc = via == SHIM_VIA_MPI ? shim_pmpi(c->kind, a, request)
           : request           ? shim_istart(c, a->comm, request)
                               : shim_serve(c, a->comm);
  if (timed && rc == MPI_SUCCESS) learn(c->sc, a->comm, c->kind, bytes, via, now() - t0);
  return rc;
}
