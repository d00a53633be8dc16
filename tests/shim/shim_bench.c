/* A plain MPI allreduce benchmark (built with mpicc, no gcomp): times MPI_Allreduce of
 * float sums in place on MPI_COMM_WORLD, so the same binary measures Open MPI alone and
 * Open MPI with libgcomp_mpi.so preloaded.
 *
 *   mpirun -n N shim_bench [BYTES...]     (default 8 1048576 16777216 67108864)
 *
 * Per size: a warm-up, then as many calls as fit in about 0.5 s (at least 5, at most 1000),
 * repeated 3 times; rank 0 prints the best repetition's mean time per call (the slowest
 * rank's, so a call counts until every rank has its result) and its bus bandwidth
 * (2 (n-1)/n bytes / time, as nccl-tests do). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static double timed(float *buf, int count, int iters) {
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = MPI_Wtime();
  for (int i = 0; i < iters; i++)
    MPI_Allreduce(MPI_IN_PLACE, buf, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  double dt = (MPI_Wtime() - t0) / iters, worst = 0;
  MPI_Reduce(&dt, &worst, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  MPI_Bcast(&worst, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  return worst;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  long dflt[] = {8, 1 << 20, 16 << 20, 64 << 20};
  int nsizes = argc > 1 ? argc - 1 : 4;
  if (rank == 0) printf("%12s %12s %12s   (ranks %d)\n", "bytes", "time_us", "busbw_GBps", size);
  for (int s = 0; s < nsizes; s++) {
    long bytes = argc > 1 ? atol(argv[s + 1]) : dflt[s];
    int count = (int)(bytes / 4 > 0 ? bytes / 4 : 1);
    float *buf = malloc((size_t)count * sizeof *buf);
    if (!buf) MPI_Abort(MPI_COMM_WORLD, 2);
    for (int i = 0; i < count; i++) buf[i] = (float)((i + rank) % 7);
    double one = timed(buf, count, 2);   /* warm-up, and a first estimate */
    int iters = one > 0 ? (int)(0.5 / one) : 1000;
    if (iters < 5) iters = 5;
    if (iters > 1000) iters = 1000;
    double best = 1e30;
    for (int rep = 0; rep < 3; rep++) {
      double t = timed(buf, count, iters);
      if (t < best) best = t;
    }
    if (rank == 0)
      printf("%12ld %12.2f %12.3f\n", (long)count * 4, best * 1e6,
             2.0 * (size - 1) / size * count * 4 / best / 1e9);
    free(buf);
  }
  MPI_Finalize();
  return 0;
}
