/* An ordinary MPI program (plain mpicc, knowing nothing of gcomp) that checks the collectives
 * beyond allreduce against MPI's own results, computed through PMPI (which the shim does not
 * intercept) on the same inputs:
 *   MPI_Reduce_scatter_block, MPI_Reduce_scatter (equal counts, and unequal ones), for every
 *   type the shim maps x SUM/MIN/MAX/PROD; MPI_Allgather and MPI_Bcast (roots 0 and last)
 *   for every type, and in MPI_BYTE/MPI_CHAR (served in whole 32-bit words); MPI_Barrier;
 *   MPI_Alltoall for every type (and MPI_CHAR). Each in place (MPI_IN_PLACE; bcast has none)
 *   and not, blocking and non-blocking (completed by MPI_Wait, and four different ones at
 *   once by MPI_Waitall), on MPI_COMM_WORLD, a dup and a split (halves: served when they hold two
 *   ranks or more). Then calls the shim must pass to MPI: an allgather and an alltoall whose
 *   send and receive types differ, a derived type, a barrier on an inter-communicator.
 *   Integer-valued data, so every result must be bitwise MPI's.
 *
 *   shim_coll [mpi]   "mpi": the run has GCOMP_SHIM_ROUTE=mpi (every call gcomp could serve
 *                     is counted as asked for MPI)
 *   shim_coll route   on MPI_COMM_WORLD only, float sums: 30 blocking calls of each
 *                     collective (half of them in place) at 8 B and 16 KiB (a reduce-scatter's
 *                     block, an allgather's contribution, an alltoall's block), 30
 *                     barriers, then 2 non-blocking calls of each; for
 *                     GCOMP_SHIM_ROUTE=auto, which sends some to MPI: every result must
 *                     be MPI's whichever way it went (no expect lines: the test
 *                     derives the counts from the routes the shim logs)
 *
 * Every rank prints "expect rank R: " and the line the shim's report at MPI_Finalize must
 * hold for each collective it called; rank 0 "shim_coll: PASS" or the failures (exit 1). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int wrank, wsize, failures, route_mpi;

enum { RSB, RS, AG, BC, BA, AA, KINDS };
static const char *const names[KINDS][2] = {
    {"MPI_Reduce_scatter_block", "MPI_Ireduce_scatter_block"},
    {"MPI_Reduce_scatter", "MPI_Ireduce_scatter"},
    {"MPI_Allgather", "MPI_Iallgather"},
    {"MPI_Bcast", "MPI_Ibcast"},
    {"MPI_Barrier", "MPI_Ibarrier"},
    {"MPI_Alltoall", "MPI_Ialltoall"}};
/* the shim's reasons, in the order its report lists them */
enum { W_SERVED = -1, W_INTER, W_ONE, W_DTYPE, W_ASKED, W_MISMATCH, W_UNEQUAL, WHYS };
static const char *const why_names[WHYS] = {"inter-communicator", "one rank", "datatype",
                                            "GCOMP_SHIM_ROUTE=mpi", "send/receive mismatch",
                                            "unequal counts"};
static long served[KINDS][2], fell[WHYS][KINDS][2];

/* Where the shim must send a call gcomp could serve on a communicator of `size` ranks */
static void expect(int kind, int nb, int size, int why) {
  if (why == W_SERVED) why = size < 2 ? W_ONE : route_mpi ? W_ASKED : W_SERVED;
  if (why == W_SERVED) served[kind][nb]++;
  else fell[why][kind][nb]++;
}

static const struct {
  MPI_Datatype t;
  size_t size;
  const char *name;
} types[] = {{MPI_FLOAT, 4, "float"}, {MPI_DOUBLE, 8, "double"}, {MPI_INT, 4, "int"},
             {MPI_LONG_LONG, 8, "long long"}};
enum { NTYPES = sizeof types / sizeof types[0] };
static const MPI_Op ops[] = {MPI_SUM, MPI_MIN, MPI_MAX, MPI_PROD};
static const char *const op_names[] = {"sum", "min", "max", "prod"};

/* element i of rank r's input as type t: small integers (products of up to 6 ranks stay
 * exact in every type) */
static void fill(void *buf, int t, long n, int r, int seed) {
  for (long i = 0; i < n; i++) {
    long v = (i * 7 + r * 3 + seed) % 5 + 1 - ((i + r) % 4 == 0 ? 3 : 0);
    switch (t) {
    case 0: ((float *)buf)[i] = (float)v; break;
    case 1: ((double *)buf)[i] = (double)v; break;
    case 2: ((int *)buf)[i] = (int)v; break;
    default: ((long long *)buf)[i] = v; break;
    }
  }
}

static void check(const char *what, const char *comm, int t, int op, int count, int inplace,
                  int nb, const void *got, const void *want, size_t bytes) {
  if (!memcmp(got, want, bytes)) return;
  if (failures++ < 10)
    fprintf(stderr, "rank %d: %s on %s, %s %s count %d%s%s: differs from MPI's\n", wrank,
            what, comm, types[t].name, op >= 0 ? op_names[op] : "", count,
            inplace ? " in place" : "", nb ? " non-blocking" : "");
}

static void rc_check(int rc, const char *what) {
  if (rc != MPI_SUCCESS && failures++ < 10)
    fprintf(stderr, "rank %d: %s returned %d\n", wrank, what, rc);
}

static void wait1(MPI_Request *r) { rc_check(MPI_Wait(r, MPI_STATUS_IGNORE), "MPI_Wait"); }

static void reduce_scatter(MPI_Comm comm, const char *cname, int t, int op, int count, int nb) {
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  size_t es = types[t].size, all = (size_t)size * (size_t)count;
  char *in = malloc(all * es + 1), *out = malloc(all * es + 1), *ref = malloc(all * es + 1);
  int *counts = malloc(sizeof(int) * (size_t)size);
  for (int i = 0; i < size; i++) counts[i] = count;
  fill(in, t, (long)all, rank, op);
  PMPI_Reduce_scatter_block(in, ref, count, types[t].t, ops[op], comm);
  for (int inplace = 0; inplace < 2; inplace++)
    for (int kind = RSB; kind <= RS; kind++) {
      MPI_Request req;
      memcpy(out, in, all * es);
      const void *send = inplace ? MPI_IN_PLACE : in;
      void *recv = out;   /* in place: the input is there, the result comes at its start */
      if (kind == RSB && !nb) MPI_Reduce_scatter_block(send, recv, count, types[t].t, ops[op], comm);
      if (kind == RSB && nb) {
        MPI_Ireduce_scatter_block(send, recv, count, types[t].t, ops[op], comm, &req);
        wait1(&req);
      }
      if (kind == RS && !nb) MPI_Reduce_scatter(send, recv, counts, types[t].t, ops[op], comm);
      if (kind == RS && nb) {
        MPI_Ireduce_scatter(send, recv, counts, types[t].t, ops[op], comm, &req);
        wait1(&req);
      }
      expect(kind, nb, size, W_SERVED);
      check(names[kind][nb], cname, t, op, count, inplace, nb, recv, ref, (size_t)count * es);
    }
  free(in), free(out), free(ref), free(counts);
}

/* unequal counts: rank i receives count + i elements (MPI's, counted as such) */
static void reduce_scatter_unequal(MPI_Comm comm, const char *cname, int nb) {
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  int *counts = malloc(sizeof(int) * (size_t)size), total = 0;
  for (int i = 0; i < size; i++) total += counts[i] = 3 + i;
  float *in = malloc(sizeof(float) * (size_t)total), got[16], want[16];
  fill(in, 0, total, rank, 1);
  PMPI_Reduce_scatter(in, want, counts, MPI_FLOAT, MPI_SUM, comm);
  MPI_Request req;
  if (nb) {
    MPI_Ireduce_scatter(in, got, counts, MPI_FLOAT, MPI_SUM, comm, &req);
    wait1(&req);
  } else {
    MPI_Reduce_scatter(in, got, counts, MPI_FLOAT, MPI_SUM, comm);
  }
  expect(RS, nb, size, size > 1 ? W_UNEQUAL : W_SERVED);   /* one count: equal */
  check("MPI_Reduce_scatter unequal", cname, 0, 0, counts[rank], 0, nb, got, want,
        sizeof(float) * (size_t)counts[rank]);
  free(in), free(counts);
}

static void allgather(MPI_Comm comm, const char *cname, int t, int count, int nb) {
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  size_t es = types[t].size, all = (size_t)size * (size_t)count;
  char *mine = malloc((size_t)count * es + 1), *out = malloc(all * es + 1),
       *ref = malloc(all * es + 1);
  fill(mine, t, count, rank, 2);
  PMPI_Allgather(mine, count, types[t].t, ref, count, types[t].t, comm);
  for (int inplace = 0; inplace < 2; inplace++) {
    memset(out, 0x5a, all * es);
    if (inplace) memcpy(out + (size_t)rank * (size_t)count * es, mine, (size_t)count * es);
    const void *send = inplace ? MPI_IN_PLACE : mine;
    if (nb) {
      MPI_Request req;
      MPI_Iallgather(send, count, types[t].t, out, count, types[t].t, comm, &req);
      wait1(&req);
    } else {
      MPI_Allgather(send, count, types[t].t, out, count, types[t].t, comm);
    }
    expect(AG, nb, size, W_SERVED);
    check(names[AG][nb], cname, t, -1, count, inplace, nb, out, ref, all * es);
  }
  free(mine), free(out), free(ref);
}

/* block j of rank r's input differs for every (r, j): a block sent to the wrong rank, or
 * from the wrong one, shows */
static void alltoall(MPI_Comm comm, const char *cname, int t, int count, int nb) {
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  size_t es = types[t].size, all = (size_t)size * (size_t)count;
  char *in = malloc(all * es + 1), *out = malloc(all * es + 1), *ref = malloc(all * es + 1);
  fill(in, t, (long)all, rank, 9);
  PMPI_Alltoall(in, count, types[t].t, ref, count, types[t].t, comm);
  for (int inplace = 0; inplace < 2; inplace++) {
    if (inplace) memcpy(out, in, all * es);
    else memset(out, 0x5a, all * es);
    const void *send = inplace ? MPI_IN_PLACE : in;
    if (nb) {
      MPI_Request req;
      MPI_Ialltoall(send, count, types[t].t, out, count, types[t].t, comm, &req);
      wait1(&req);
    } else {
      MPI_Alltoall(send, count, types[t].t, out, count, types[t].t, comm);
    }
    expect(AA, nb, size, W_SERVED);
    check(names[AA][nb], cname, t, -1, count, inplace, nb, out, ref, all * es);
  }
  free(in), free(out), free(ref);
}

static void bcast(MPI_Comm comm, const char *cname, int t, int count, int nb) {
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  size_t es = types[t].size;
  char *buf = malloc((size_t)count * es + 1), *ref = malloc((size_t)count * es + 1);
  for (int root = 0; root < size; root += size > 1 ? size - 1 : 1) {
    fill(ref, t, count, root, 3);   /* the serial reference: the root's data */
    if (rank == root) memcpy(buf, ref, (size_t)count * es);
    else memset(buf, 0x5a, (size_t)count * es);
    if (nb) {
      MPI_Request req;
      MPI_Ibcast(buf, count, types[t].t, root, comm, &req);
      wait1(&req);
    } else {
      MPI_Bcast(buf, count, types[t].t, root, comm);
    }
    expect(BC, nb, size, W_SERVED);
    check(names[BC][nb], cname, t, -1, count, 0, nb, buf, ref, (size_t)count * es);
  }
  free(buf), free(ref);
}

/* Four different non-blocking collectives in flight at once, completed by one MPI_Waitall
 * (issue order through gcomp) */
static void mixed(MPI_Comm comm, const char *cname) {
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  enum { C = 1000 };
  float *rs_in = malloc(sizeof(float) * C * (size_t)size), rs_out[C], rs_ref[C];
  float ag_in[C], *ag_out = malloc(sizeof(float) * C * (size_t)size),
        *ag_ref = malloc(sizeof(float) * C * (size_t)size);
  double bc[C], bc_ref[C];
  fill(rs_in, 0, C * (long)size, rank, 4);
  fill(ag_in, 0, C, rank, 5);
  fill(bc_ref, 1, C, 0, 6);
  if (rank == 0) memcpy(bc, bc_ref, sizeof bc);
  else memset(bc, 0, sizeof bc);
  PMPI_Reduce_scatter_block(rs_in, rs_ref, C, MPI_FLOAT, MPI_SUM, comm);
  PMPI_Allgather(ag_in, C, MPI_FLOAT, ag_ref, C, MPI_FLOAT, comm);
  MPI_Request reqs[4];
  MPI_Ireduce_scatter_block(rs_in, rs_out, C, MPI_FLOAT, MPI_SUM, comm, &reqs[0]);
  MPI_Iallgather(ag_in, C, MPI_FLOAT, ag_out, C, MPI_FLOAT, comm, &reqs[1]);
  MPI_Ibcast(bc, C, MPI_DOUBLE, 0, comm, &reqs[2]);
  MPI_Ibarrier(comm, &reqs[3]);
  rc_check(MPI_Waitall(4, reqs, MPI_STATUSES_IGNORE), "MPI_Waitall");
  expect(RSB, 1, size, W_SERVED);
  expect(AG, 1, size, W_SERVED);
  expect(BC, 1, size, W_SERVED);
  expect(BA, 1, size, W_SERVED);
  check("mixed MPI_Ireduce_scatter_block", cname, 0, 0, C, 0, 1, rs_out, rs_ref, sizeof rs_ref);
  check("mixed MPI_Iallgather", cname, 0, -1, C, 0, 1, ag_out, ag_ref, sizeof(float) * C * (size_t)size);
  check("mixed MPI_Ibcast", cname, 1, -1, C, 0, 1, bc, bc_ref, sizeof bc);
  free(rs_in), free(ag_out), free(ag_ref);
}

static void bytes(MPI_Comm comm, const char *cname);

static void on(MPI_Comm comm, const char *cname) {
  static const int counts[] = {1, 7, 1000, 65536};
  int size;
  MPI_Comm_size(comm, &size);
  for (int nb = 0; nb < 2; nb++) {
    for (int t = 0; t < NTYPES; t++)
      for (int c = 0; c < 4; c++) {
        /* the largest count for one type and op: the algorithms of larger sizes */
        for (int op = 0; op < 4; op++)
          if (c < 3 || (t == 0 && op == 0)) reduce_scatter(comm, cname, t, op, counts[c], nb);
        allgather(comm, cname, t, counts[c], nb);
        bcast(comm, cname, t, counts[c], nb);
        if (c < 3 || t == 0) alltoall(comm, cname, t, counts[c], nb);
      }
    reduce_scatter_unequal(comm, cname, nb);
    if (nb) {
      MPI_Request req;
      MPI_Ibarrier(comm, &req);
      wait1(&req);
    } else {
      rc_check(MPI_Barrier(comm), "MPI_Barrier");
    }
    expect(BA, nb, size, W_SERVED);
  }
  mixed(comm, cname);
  bytes(comm, cname);
}

/* MPI_BYTE and MPI_CHAR (what IMB and OSU move): served in whole 32-bit words, else MPI's */
static void bytes(MPI_Comm comm, const char *cname) {
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  static const int counts[] = {12, 4096, 3};
  for (int c = 0; c < 3; c++) {
    int n = counts[c], why = n % 4 ? W_DTYPE : W_SERVED;
    unsigned char *buf = malloc((size_t)n * (size_t)size), *ref = malloc((size_t)n * (size_t)size);
    for (int i = 0; i < n; i++) ref[i] = (unsigned char)(i * 13 + 7);
    if (rank == size - 1) memcpy(buf, ref, (size_t)n);
    else memset(buf, 0, (size_t)n);
    MPI_Bcast(buf, n, MPI_BYTE, size - 1, comm);
    expect(BC, 0, size, why);
    check("MPI_Bcast MPI_BYTE", cname, 2, -1, n, 0, 0, buf, ref, (size_t)n);
    for (int inplace = 0; inplace < 2; inplace++) {
      unsigned char mine[4096];
      for (int i = 0; i < n; i++) mine[i] = (unsigned char)(i + rank * 5);
      PMPI_Allgather(mine, n, MPI_CHAR, ref, n, MPI_CHAR, comm);
      memset(buf, 0, (size_t)n * (size_t)size);
      if (inplace) memcpy(buf + (size_t)rank * (size_t)n, mine, (size_t)n);
      MPI_Allgather(inplace ? MPI_IN_PLACE : mine, n, MPI_CHAR, buf, n, MPI_CHAR, comm);
      expect(AG, 0, size, why);
      check("MPI_Allgather MPI_CHAR", cname, 2, -1, n, inplace, 0, buf, ref, (size_t)n * (size_t)size);
    }
    /* alltoall MPI_CHAR: block j of rank r is n bytes of (r, j, i) */
    unsigned char *in = malloc((size_t)n * (size_t)size);
    for (size_t i = 0; i < (size_t)n * (size_t)size; i++)
      in[i] = (unsigned char)(i * 3 + (size_t)rank * 11);
    PMPI_Alltoall(in, n, MPI_CHAR, ref, n, MPI_CHAR, comm);
    memset(buf, 0, (size_t)n * (size_t)size);
    MPI_Alltoall(in, n, MPI_CHAR, buf, n, MPI_CHAR, comm);
    expect(AA, 0, size, why);
    check("MPI_Alltoall MPI_CHAR", cname, 2, -1, n, 0, 0, buf, ref, (size_t)n * (size_t)size);
    free(in);
    free(buf), free(ref);
  }
}

/* calls the shim must pass to MPI, each still correct */
static void passed_on(MPI_Comm split, int color) {
  /* allgather with different (matching) send and receive types */
  MPI_Datatype pair;
  MPI_Type_contiguous(2, MPI_INT, &pair);
  MPI_Type_commit(&pair);
  int mine[4], *all = malloc(sizeof(int) * 4 * (size_t)wsize),
      *ref = malloc(sizeof(int) * 4 * (size_t)wsize);
  fill(mine, 2, 4, wrank, 7);
  PMPI_Allgather(mine, 4, MPI_INT, ref, 4, MPI_INT, MPI_COMM_WORLD);
  MPI_Allgather(mine, 2, pair, all, 4, MPI_INT, MPI_COMM_WORLD);
  expect(AG, 0, wsize, W_MISMATCH);
  check("MPI_Allgather pair/int", "world", 2, -1, 4, 0, 0, all, ref, sizeof(int) * 4 * (size_t)wsize);
  /* alltoall with different (matching) send and receive types: 2 ints per block */
  size_t a2a_bytes = sizeof(int) * 2 * (size_t)wsize;
  int *a2a = malloc(a2a_bytes), *a2a_out = malloc(a2a_bytes), *a2a_ref = malloc(a2a_bytes);
  fill(a2a, 2, 2L * wsize, wrank, 10);
  PMPI_Alltoall(a2a, 2, MPI_INT, a2a_ref, 2, MPI_INT, MPI_COMM_WORLD);
  MPI_Alltoall(a2a, 1, pair, a2a_out, 2, MPI_INT, MPI_COMM_WORLD);
  expect(AA, 0, wsize, W_MISMATCH);
  check("MPI_Alltoall pair/int", "world", 2, -1, 2, 0, 0, a2a_out, a2a_ref, a2a_bytes);
  free(a2a), free(a2a_out), free(a2a_ref);
  /* a derived type */
  int b[4];
  fill(ref, 2, 4, 0, 8);
  if (wrank == 0) memcpy(b, ref, sizeof b);
  else memset(b, 0, sizeof b);
  MPI_Bcast(b, 2, pair, 0, MPI_COMM_WORLD);
  expect(BC, 0, wsize, W_DTYPE);
  check("MPI_Bcast pair", "world", 2, -1, 4, 0, 0, b, ref, sizeof b);
  MPI_Type_free(&pair);
  free(all), free(ref);
  /* an inter-communicator between the split's halves (leaders: world ranks 0 and 1) */
  if (wsize >= 2) {
    MPI_Comm inter;
    MPI_Intercomm_create(split, 0, MPI_COMM_WORLD, color ? 0 : 1, 77, &inter);
    rc_check(MPI_Barrier(inter), "MPI_Barrier on an inter-communicator");
    expect(BA, 0, 2, W_INTER);
    MPI_Comm_free(&inter);
  }
}

/* rank 0 says whether any rank failed; the exit status */
static int verdict(void) {
  int all_failures = 0;
  PMPI_Allreduce(&failures, &all_failures, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (wrank == 0) printf(all_failures ? "shim_coll: FAIL (%d)\n" : "shim_coll: PASS\n", all_failures);
  fflush(stdout);
  MPI_Finalize();
  return all_failures ? 1 : 0;
}

/* shim_coll route: each collective's sizes repeated, as a program's are */
static void routes(void) {
  static const int counts[] = {2, 4096};
  for (int nb = 0; nb < 2; nb++) {
    for (int c = 0; c < 2; c++)
      for (int i = 0; i < (nb ? 1 : 15); i++) {   /* each makes 2 calls of every kind */
        reduce_scatter(MPI_COMM_WORLD, "world", 0, 0, counts[c], nb);
        allgather(MPI_COMM_WORLD, "world", 0, counts[c], nb);
        bcast(MPI_COMM_WORLD, "world", 0, counts[c], nb);
        alltoall(MPI_COMM_WORLD, "world", 0, counts[c], nb);
      }
    for (int i = 0; i < (nb ? 2 : 30); i++) {
      MPI_Request req;
      if (nb) {
        MPI_Ibarrier(MPI_COMM_WORLD, &req);
        wait1(&req);
      } else {
        rc_check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
      }
    }
  }
}

int main(int argc, char **argv) {
  route_mpi = argc > 1 && !strcmp(argv[1], "mpi");
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
  MPI_Comm_size(MPI_COMM_WORLD, &wsize);
  if (argc > 1 && !strcmp(argv[1], "route")) {
    routes();
    return verdict();
  }
  MPI_Comm dup, split;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  int color = wrank % 2;
  MPI_Comm_split(MPI_COMM_WORLD, color, wrank, &split);
  on(MPI_COMM_WORLD, "world");
  on(dup, "dup");
  on(split, "split");
  passed_on(split, color);
  MPI_Comm_free(&dup);
  MPI_Comm_free(&split);

  for (int k = 0; k < KINDS; k++) {
    char why[512] = "";
    size_t o = 0;
    long tb = 0, tn = 0;
    for (int w = 0; w < WHYS; w++) {
      long b = fell[w][k][0], n = fell[w][k][1];
      tb += b, tn += n;
      if (b || n) o += (size_t)snprintf(why + o, sizeof why - o, "%s%s %ld/%ld", o ? ", " : "",
                                        why_names[w], b, n);
    }
    printf("expect rank %d: gcomp served %ld %s and %ld %s; to MPI: %ld and %ld (%s)\n", wrank,
           served[k][0], names[k][0], served[k][1], names[k][1], tb, tn, o ? why : "none");
  }
  return verdict();
}
