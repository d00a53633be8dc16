/* A plain MPI collective benchmark (built with mpicc, no gcomp): times one collective of
 * float sums (copies for allgather, bcast and alltoall) on MPI_COMM_WORLD, called as MPI_* (through
 * libgcomp_mpi.so when it is preloaded) and as PMPI_* (MPI's own, the shim skipped) in the
 * same processes, alternately: the same-run reference for "never slower than MPI".
 *
 *   mpirun -n N shim_bench [COLL] [BYTES...]     (default 8 1048576 16777216 67108864)
 *
 * COLL: allreduce (the default; in place), reduce_scatter_block, allgather, bcast, barrier
 * (no sizes), alltoall. BYTES is the buffer a rank passes: allreduce's and bcast's,
 * reduce-scatter's and alltoall's input and allgather's output (N blocks of at least one
 * float each).
 *
 * Per size: 20 warm-up calls each way (past the shim's timed trial of that size), then as
 * many calls as fit in about 0.2 s (at least 5, at most 100000), 5 repetitions each way,
 * alternating; rank 0 prints the best repetition's mean time per call (the slowest rank's,
 * so a call counts until every rank has its result), its bus bandwidth (as nccl-tests
 * count it), PMPI's time and PMPI's time over MPI's (above 1: the shim is faster). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { ALLREDUCE, RSB, ALLGATHER, BCAST, BARRIER, ALLTOALL };
static const char *const names[] = {"allreduce", "reduce_scatter_block", "allgather", "bcast",
                                    "barrier", "alltoall"};
static int coll, size;

static void call(int pmpi, float *buf, float *out, int block) {
  switch (coll) {
  case ALLREDUCE:
    if (pmpi) PMPI_Allreduce(MPI_IN_PLACE, buf, block, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    else MPI_Allreduce(MPI_IN_PLACE, buf, block, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    break;
  case RSB:
    if (pmpi) PMPI_Reduce_scatter_block(buf, out, block, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    else MPI_Reduce_scatter_block(buf, out, block, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    break;
  case ALLGATHER:
    if (pmpi) PMPI_Allgather(buf, block, MPI_FLOAT, out, block, MPI_FLOAT, MPI_COMM_WORLD);
    else MPI_Allgather(buf, block, MPI_FLOAT, out, block, MPI_FLOAT, MPI_COMM_WORLD);
    break;
  case BCAST:
    if (pmpi) PMPI_Bcast(buf, block, MPI_FLOAT, 0, MPI_COMM_WORLD);
    else MPI_Bcast(buf, block, MPI_FLOAT, 0, MPI_COMM_WORLD);
    break;
  case ALLTOALL:
    if (pmpi) PMPI_Alltoall(buf, block, MPI_FLOAT, out, block, MPI_FLOAT, MPI_COMM_WORLD);
    else MPI_Alltoall(buf, block, MPI_FLOAT, out, block, MPI_FLOAT, MPI_COMM_WORLD);
    break;
  default:
    if (pmpi) PMPI_Barrier(MPI_COMM_WORLD);
    else MPI_Barrier(MPI_COMM_WORLD);
  }
}

/* the timing itself goes through PMPI, so the shim sees only the measured calls */
static double timed(int pmpi, float *buf, float *out, int block, int iters) {
  PMPI_Barrier(MPI_COMM_WORLD);
  double t0 = MPI_Wtime();
  for (int i = 0; i < iters; i++) call(pmpi, buf, out, block);
  double dt = (MPI_Wtime() - t0) / iters, worst = 0;
  PMPI_Allreduce(&dt, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return worst;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int a = 1;
  for (int c = 0; c <= ALLTOALL; c++)
    if (argc > 1 && !strcmp(argv[1], names[c])) coll = c, a = 2;
  long dflt[] = {8, 1 << 20, 16 << 20, 64 << 20};
  int nsizes = coll == BARRIER ? 1 : argc > a ? argc - a : 4;
  if (rank == 0)
    printf("%12s %12s %12s %12s %8s   (%s, ranks %d)\n", "bytes", "time_us", "busbw_GBps",
           "pmpi_us", "speedup", names[coll], size);
  for (int s = 0; s < nsizes; s++) {
    long bytes = argc > a ? atol(argv[s + a]) : dflt[s];
    /* the count of a call: allreduce's and bcast's buffer, the others' block */
    int n = coll == RSB || coll == ALLGATHER || coll == ALLTOALL ? size : 1;
    int block = (int)(bytes / 4 / n > 0 ? bytes / 4 / n : 1);
    size_t total = (size_t)block * (size_t)n;
    float *buf = malloc(total * sizeof *buf), *out = malloc(total * sizeof *out);
    if (!buf || !out) MPI_Abort(MPI_COMM_WORLD, 2);
    for (size_t i = 0; i < total; i++) buf[i] = (float)((i + (size_t)rank) % 7);
    double one = timed(0, buf, out, block, 20);
    timed(1, buf, out, block, 20);
    int iters = one > 0 ? (int)(0.2 / one) : 100000;
    if (iters < 5) iters = 5;
    if (iters > 100000) iters = 100000;
    double best[2] = {1e30, 1e30};
    for (int rep = 0; rep < 10; rep++) {
      double t = timed(rep & 1, buf, out, block, iters);
      if (t < best[rep & 1]) best[rep & 1] = t;
    }
    /* bytes a rank moves as nccl-tests count them, over the call's time */
    double moved = coll == ALLREDUCE   ? 2.0 * (size - 1) / size * (double)total * 4
                   : coll == BCAST     ? (double)total * 4
                   : coll == BARRIER   ? 0
                                       : (double)(size - 1) / size * (double)total * 4;
    if (rank == 0)
      printf("%12ld %12.2f %12.3f %12.2f %8.2f\n", coll == BARRIER ? 0 : (long)total * 4,
             best[0] * 1e6, moved / best[0] / 1e9, best[1] * 1e6, best[1] / best[0]);
    free(buf);
    free(out);
  }
  MPI_Finalize();
  return 0;
}
