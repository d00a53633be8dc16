/* MPI's own allreduce as one more algorithm: per communicator and per size class (bytes in
 * [2^k, 2^(k+1))), the calls gcomp could serve go to whichever of gcomp and MPI is faster.
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
 * in (warm caches, the peers' real arrival pattern). A class's first calls alternate gcomp,
 * MPI, gcomp, ... (the first of each a warm-up), then every member contributes its best
 * time per route to one PMPI_Allreduce(MAX) on the communicator: the slowest member's best
 * is what a collective costs, and the members agree by construction. MPI requires every
 * member to make the same collective calls in the same order with the same size, so every
 * member times the same calls and reaches the agreement at the same call.
 *
 * A trial on a busy machine (a neighbour's build, a rank descheduled) can pick the slower
 * route, so a size's trial runs again after 256 of its blocking calls, then after 4 times
 * as many each time (up to 2^20): a long run spends at most a few dozen calls per size on
 * the slower route, and a bad pick does not last. */
#include <stdio.h>
#include <time.h>

#include "shim.h"

static shim_route_mode route_mode;

void shim_route_start(shim_route_mode mode) { route_mode = mode; }

static unsigned class_of(size_t bytes) {
  return bytes ? 63u - (unsigned)__builtin_clzll((unsigned long long)bytes) : 0;
}

/* Timed calls per route after its warm-up: the small ones cost nothing to repeat and vary
 * most from call to call; at 64 MiB each MPI call of the trial costs tens of ms. */
static unsigned samples(size_t bytes) {
  return bytes <= (64u << 10) ? 8 : bytes <= (4u << 20) ? 4 : 2;
}

int shim_route_pick(shim_comm *sc, size_t bytes, int *timed, int *why) {
  if (timed) *timed = 0;
  if (route_mode == SHIM_ROUTE_GCOMP) return SHIM_VIA_GCOMP;
  if (route_mode == SHIM_ROUTE_MPI) {
    *why = FALL_ASKED;
    return SHIM_VIA_MPI;
  }
  shim_class *k = &sc->cls[class_of(bytes)];
  /* blocking calls only count towards the next trial: the trial itself is of those */
  if (k->decided && timed && ++k->used > k->recheck) k->decided = 0, k->calls = 0;
  if (k->decided) {
    if (k->decided - 1 == SHIM_VIA_MPI) *why = FALL_FASTER;
    return k->decided - 1;
  }
  if (!timed) return SHIM_VIA_GCOMP;   /* non-blocking, before its size's agreement */
  *timed = 1;
  *why = FALL_TIMING;
  return k->calls & 1 ? SHIM_VIA_MPI : SHIM_VIA_GCOMP;
}

int shim_route_fixed(int *why) {
  if (route_mode != SHIM_ROUTE_MPI) return SHIM_VIA_GCOMP;
  *why = FALL_ASKED;
  return SHIM_VIA_MPI;
}

static void agree(shim_comm *sc, MPI_Comm comm, unsigned cls, shim_class *k, unsigned n) {
  double t[2] = {k->best[0], k->best[1]};
  int ok = PMPI_Allreduce(MPI_IN_PLACE, t, 2, MPI_DOUBLE, MPI_MAX, comm) == MPI_SUCCESS;
  /* MPI's errors are fatal unless the program asked otherwise; then gcomp keeps the class,
   * as it did before MPI was a choice (the members that failed say so below) */
  int via = ok && t[1] < t[0] ? SHIM_VIA_MPI : SHIM_VIA_GCOMP;
  k->decided = (uint8_t)(1 + via);
  k->used = 0;
  k->recheck = !k->recheck ? 256 : k->recheck < (1u << 20) ? 4 * k->recheck : k->recheck;
  unsigned long long lo = 1ull << cls, hi = cls < 63 ? (lo << 1) - 1 : ~0ull;
  if (!ok)
    SHIM_WARN("rank %d: communicator %s: the agreement on %llu-%llu B failed in MPI; gcomp "
              "serves that size", shim_world_rank(), sc->name, lo, hi);
  else
    SHIM_INFO("rank %d: communicator %s: %llu-%llu B to %s (best of %u: gcomp %.2f us, "
              "MPI %.2f us, the slowest rank's)", shim_world_rank(), sc->name, lo, hi,
              via == SHIM_VIA_MPI ? "MPI" : "gcomp", n, t[0] * 1e6, t[1] * 1e6);
}

void shim_route_learn(shim_comm *sc, MPI_Comm comm, size_t bytes, int via, double seconds) {
  unsigned cls = class_of(bytes), n = samples(bytes);
  shim_class *k = &sc->cls[cls];
  if (k->decided) return;
  if (k->calls < 2) k->best[0] = k->best[1] = 1e30f;   /* the warm-ups */
  else if ((float)seconds < k->best[via]) k->best[via] = (float)seconds;
  if (++k->calls == 2 + 2 * n) agree(sc, comm, cls, k, n);
}
