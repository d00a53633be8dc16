/* Rank discovery from each launcher's variables, and the TCP rendezvous (in threads). */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cmocka.h>

#include "bootstrap.h"
#include "gcomp_common.h"

/* a fake environment: NULL-terminated name, value pairs */
static const char *lookup(const char *name, void *ctx) {
  const char *const *kv = ctx;
  for (; kv[0]; kv += 2)
    if (strcmp(kv[0], name) == 0) return kv[1];
  return NULL;
}

static int parse(const char *const *kv, gcomp_boot_env *e) {
  return gcomp_boot_env_parse(lookup, (void *)kv, "host-a", e);
}

static void test_torchrun(void **state) {
  const char *kv[] = {"RANK", "3", "WORLD_SIZE", "8", "LOCAL_RANK", "1", "MASTER_ADDR", "10.0.0.5",
                      "MASTER_PORT", "29500", NULL};
  gcomp_boot_env e;
  assert_int_equal(parse(kv, &e), GCOMP_OK);
  assert_int_equal(e.rank, 3);
  assert_int_equal(e.size, 8);
  assert_int_equal(e.local_rank, 1);
  assert_string_equal(e.root_host, "10.0.0.5");
  assert_int_equal(e.root_port, 29501);   /* MASTER_PORT itself holds torch's store */
  assert_string_equal(e.node_id, "host-a");
  assert_string_equal(e.source, "torchrun");
  assert_string_equal(e.token, "");
}

static void test_open_mpi_pmi_slurm(void **state) {
  gcomp_boot_env e;
  const char *ompi[] = {"OMPI_COMM_WORLD_RANK", "1", "OMPI_COMM_WORLD_SIZE", "2",
                        "OMPI_COMM_WORLD_LOCAL_RANK", "0", "GCOMP_ROOT", "nodeA:1234",
                        "GCOMP_JOB_TOKEN", "s3cret", NULL};
  assert_int_equal(parse(ompi, &e), GCOMP_OK);
  assert_int_equal(e.rank, 1);
  assert_int_equal(e.size, 2);
  assert_int_equal(e.local_rank, 0);
  assert_string_equal(e.root_host, "nodeA");
  assert_int_equal(e.root_port, 1234);
  assert_string_equal(e.token, "s3cret");
  assert_string_equal(e.source, "Open MPI");
  const char *pmi[] = {"PMI_RANK", "2", "PMI_SIZE", "4", "GCOMP_ROOT", "[::1]:99", NULL};
  assert_int_equal(parse(pmi, &e), GCOMP_OK);
  assert_int_equal(e.rank, 2);
  assert_int_equal(e.size, 4);
  assert_int_equal(e.local_rank, -1);
  assert_string_equal(e.root_host, "::1");
  assert_int_equal(e.root_port, 99);
  assert_string_equal(e.source, "PMI");
  const char *slurm[] = {"SLURM_PROCID", "5", "SLURM_NTASKS", "6", "SLURM_LOCALID", "1",
                         "GCOMP_ROOT", "h:7", "GCOMP_NODE_ID", "emulated-3", NULL};
  assert_int_equal(parse(slurm, &e), GCOMP_OK);
  assert_int_equal(e.rank, 5);
  assert_int_equal(e.local_rank, 1);
  assert_string_equal(e.node_id, "emulated-3");
  assert_string_equal(e.source, "Slurm");
}

static void test_gcomp_overrides_and_default(void **state) {
  gcomp_boot_env e;
  const char *kv[] = {"RANK", "3", "WORLD_SIZE", "8", "GCOMP_RANK", "0", "GCOMP_SIZE", "1", NULL};
  assert_int_equal(parse(kv, &e), GCOMP_OK);
  assert_int_equal(e.rank, 0);
  assert_int_equal(e.size, 1);
  assert_string_equal(e.source, "GCOMP");
  const char *none[] = {NULL};
  assert_int_equal(parse(none, &e), GCOMP_OK);   /* no launcher: one rank alone */
  assert_int_equal(e.rank, 0);
  assert_int_equal(e.size, 1);
  assert_string_equal(e.root_host, "");
  /* -1, the documented default, means unset (gcomp_init accepted it, and bootstrap then
   * refused it); trailing blanks read as the parameter registry reads them */
  const char *dflt[] = {"GCOMP_RANK", "-1", "GCOMP_SIZE", "-1", "GCOMP_LOCAL_RANK", "-1",
                        "RANK", "1", "WORLD_SIZE", "2", "GCOMP_ROOT", "h:1", NULL};
  if (parse(dflt, &e) != GCOMP_OK) fail_msg("%s", gcomp_last_error());
  assert_int_equal(e.rank, 1);
  assert_int_equal(e.size, 2);
  assert_string_equal(e.source, "torchrun");
  const char *blank[] = {"GCOMP_RANK", "1 ", "GCOMP_SIZE", "2\t", "GCOMP_ROOT", "h:1", NULL};
  if (parse(blank, &e) != GCOMP_OK) fail_msg("%s", gcomp_last_error());
  assert_int_equal(e.rank, 1);
  const char *empty[] = {"GCOMP_RANK", " ", "GCOMP_SIZE", "2", "GCOMP_ROOT", "h:1", NULL};
  assert_int_equal(parse(empty, &e), GCOMP_ERR_BOOTSTRAP);
  /* a size without a rank made every process rank 0 of the job */
  const char *size_only[] = {"GCOMP_SIZE", "2", "GCOMP_ROOT", "h:1", NULL};
  assert_int_equal(parse(size_only, &e), GCOMP_ERR_BOOTSTRAP);
  assert_non_null(strstr(gcomp_last_error(), "GCOMP_SIZE is set but GCOMP_RANK is not"));
}

static void test_errors_name_the_variable(void **state) {
  gcomp_boot_env e;
  const char *bad_rank[] = {"RANK", "x1", "WORLD_SIZE", "2", "GCOMP_ROOT", "h:1", NULL};
  assert_int_equal(parse(bad_rank, &e), GCOMP_ERR_BOOTSTRAP);
  assert_non_null(strstr(gcomp_last_error(), "RANK='x1'"));
  const char *no_size[] = {"SLURM_PROCID", "1", NULL};
  assert_int_equal(parse(no_size, &e), GCOMP_ERR_BOOTSTRAP);
  assert_non_null(strstr(gcomp_last_error(), "SLURM_NTASKS"));
  const char *too_big[] = {"PMI_RANK", "4", "PMI_SIZE", "4", "GCOMP_ROOT", "h:1", NULL};
  assert_int_equal(parse(too_big, &e), GCOMP_ERR_BOOTSTRAP);
  assert_non_null(strstr(gcomp_last_error(), "rank 4 is not below size 4"));
  const char *no_root[] = {"RANK", "0", "WORLD_SIZE", "2", NULL};
  assert_int_equal(parse(no_root, &e), GCOMP_ERR_BOOTSTRAP);
  assert_non_null(strstr(gcomp_last_error(), "GCOMP_ROOT"));
  const char *bad_root[] = {"RANK", "0", "WORLD_SIZE", "2", "GCOMP_ROOT", "hostonly", NULL};
  assert_int_equal(parse(bad_root, &e), GCOMP_ERR_BOOTSTRAP);
  assert_non_null(strstr(gcomp_last_error(), "GCOMP_ROOT='hostonly'"));
  const char *bad_port[] = {"RANK", "0", "WORLD_SIZE", "2", "MASTER_ADDR", "a", "MASTER_PORT",
                            "70000", NULL};
  assert_int_equal(parse(bad_port, &e), GCOMP_ERR_BOOTSTRAP);
  assert_non_null(strstr(gcomp_last_error(), "MASTER_PORT"));
}

/* ---- rendezvous among threads ---------------------------------------------------------- */
typedef struct {
  gcomp_boot_env env;
  int status;
  char err[512];
  int table[8];
} rv_arg;

static void *rv_main(void *p) {
  rv_arg *a = p;
  gcomp_oob *oob = NULL;
  a->status = gcomp_rendezvous_open(&a->env, 1500, &oob);
  if (a->status == 0) {
    int mine = 100 + a->env.rank;
    a->status = oob->allgather(oob, &mine, sizeof mine, a->table);
    oob->close(oob);
  }
  if (a->status) snprintf(a->err, sizeof a->err, "%s", gcomp_last_error());
  return NULL;
}

static void run_job(rv_arg *a, int n, int port, const char *const *tokens) {
  pthread_t th[8];
  for (int r = 0; r < n; r++) {
    memset(&a[r], 0, sizeof a[r]);
    a[r].env.rank = r;
    a[r].env.size = n;
    a[r].env.local_rank = -1;
    snprintf(a[r].env.root_host, sizeof a[r].env.root_host, "127.0.0.1");
    a[r].env.root_port = port;
    snprintf(a[r].env.token, sizeof a[r].env.token, "%s", tokens[r]);
    pthread_create(&th[r], NULL, rv_main, &a[r]);
    if (r == 0) usleep(20000);
  }
  for (int r = 0; r < n; r++) pthread_join(th[r], NULL);
}

/* A port below Linux's ephemeral range (32768-60999 by default), from which the
 * connections of tests running beside this one are numbered, and free right now. */
static int test_port(void) {
  for (int i = 0; i < 100; i++) {
    int p = 20000 + (int)(((long)getpid() * 7 + i * 131) % 12000);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)p)};
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    int ok = fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0;
    if (fd >= 0) close(fd);
    if (ok) return p;
  }
  return 20000 + (int)(getpid() % 12000);
}

static void test_rendezvous_allgather(void **state) {
  rv_arg a[4];
  const char *tok[] = {"t", "t", "t", "t"};
  run_job(a, 4, test_port(), tok);
  for (int r = 0; r < 4; r++) {
    assert_int_equal(a[r].status, 0);
    for (int q = 0; q < 4; q++) assert_int_equal(a[r].table[q], 100 + q);
  }
}

static void test_rendezvous_wrong_token(void **state) {
  rv_arg a[3];
  const char *tok[] = {"good", "good", "evil"};
  run_job(a, 3, test_port(), tok);
  assert_int_equal(a[2].status, GCOMP_ERR_BOOTSTRAP);
  assert_non_null(strstr(a[2].err, "wrong job token"));
  assert_int_equal(a[0].status, GCOMP_ERR_TIMEOUT);
  assert_non_null(strstr(a[0].err, "never arrived"));
  assert_non_null(strstr(a[0].err, "rank 2"));
  assert_int_equal(a[1].status, GCOMP_ERR_BOOTSTRAP);   /* told by the root why */
  assert_non_null(strstr(a[1].err, "rank 2"));
}

/* Strangers at the rendezvous of a job without a token (mpirun, srun, torchrun set none):
 * a hello claiming rank 0xffffffff (read as -1, it passed the range check and indexed the
 * table 16 GB away), and connections that send nothing (read one at a time, two of them
 * made the real rank miss the deadline). The job must still start. */
static int stranger(int port, int hello, uint32_t rank) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  for (int i = 0; i < 100 && connect(fd, (struct sockaddr *)&a, sizeof a) != 0; i++) {
    close(fd);
    usleep(10000);
    fd = socket(AF_INET, SOCK_STREAM, 0);
  }
  if (hello) {
    uint32_t w[5] = {htonl(0x47435256u), htonl(1), htonl(rank), htonl(2), htonl(0)};
    if (write(fd, w, sizeof w) != (ssize_t)sizeof w) return -1;
    char buf[256];
    (void)!read(fd, buf, sizeof buf);   /* the refusal */
    close(fd);
    return -1;
  }
  return fd;   /* silent: kept open */
}

static void test_rendezvous_strangers(void **state) {
  int port = test_port();
  rv_arg a[2];
  memset(a, 0, sizeof a);
  for (int r = 0; r < 2; r++) {
    a[r].env.rank = r, a[r].env.size = 2, a[r].env.local_rank = -1;
    snprintf(a[r].env.root_host, sizeof a[r].env.root_host, "127.0.0.1");
    a[r].env.root_port = port;
  }
  pthread_t th[2];
  pthread_create(&th[0], NULL, rv_main, &a[0]);
  usleep(50000);
  stranger(port, 1, 0xffffffffu);
  stranger(port, 1, 7);
  int s1 = stranger(port, 0, 0), s2 = stranger(port, 0, 0);
  pthread_create(&th[1], NULL, rv_main, &a[1]);
  for (int r = 0; r < 2; r++) pthread_join(th[r], NULL);
  close(s1), close(s2);
  for (int r = 0; r < 2; r++)
    if (a[r].status != 0) fail_msg("rank %d: %s", r, a[r].err);
  assert_int_equal(a[0].table[1], 101);
}

/* A rank-1 stand-in: connects at once, sends its hello later, and returns the root's
 * admission status (0: admitted; -1: the connection was dropped). */
static int raw_connect(int port) {
  int fd = -1;
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  for (int i = 0; i < 100; i++) {
    fd = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0) return fd;
    close(fd);
    usleep(10000);
  }
  return -1;
}

static long raw_hello(int fd) {
  uint32_t w[5] = {htonl(0x47435256u), htonl(1), htonl(1), htonl(2), htonl(0)};
  if (write(fd, w, sizeof w) != (ssize_t)sizeof w) return -1;
  uint32_t st;
  ssize_t k = read(fd, &st, 4);
  return k == 4 ? (long)ntohl(st) : -1;
}

static void *root_long(void *p) {   /* rank 0 with a 6 s timeout */
  rv_arg *a = p;
  gcomp_oob *oob = NULL;
  a->status = gcomp_rendezvous_open(&a->env, 6000, &oob);
  if (oob) oob->close(oob);
  return NULL;
}

static void start_root(rv_arg *a, int port, pthread_t *th) {
  memset(a, 0, sizeof *a);
  a->env.rank = 0, a->env.size = 2, a->env.local_rank = -1;
  snprintf(a->env.root_host, sizeof a->env.root_host, "127.0.0.1");
  a->env.root_port = port;
  pthread_create(th, NULL, root_long, a);
  usleep(50000);
}

/* A rank whose hello arrives while the root reads a stranger's half hello (2 s) is read
 * afterwards, not dropped as silent; and in a flood of silent connections the oldest go
 * first, never a rank that just connected. */
static void test_rendezvous_late_hello_and_flood(void **state) {
  int port = test_port();
  rv_arg root;
  pthread_t th;
  start_root(&root, port, &th);
  int r1 = raw_connect(port);
  int half = raw_connect(port);
  usleep(100000);
  assert_int_equal(write(half, "G", 1), 1);   /* stalls the root's read for 2 s */
  usleep(300000);
  long st = raw_hello(r1);   /* arrives during that read; r1's own 2 s run out meanwhile */
  close(half);
  close(r1);
  pthread_join(th, NULL);
  if (st != 0) fail_msg("rank 1 behind a half hello: status %ld (dropped?)", st);

  port = test_port();
  start_root(&root, port, &th);
  int silent[130];
  for (int i = 0; i < 128; i++) silent[i] = raw_connect(port);
  usleep(100000);
  r1 = raw_connect(port);
  usleep(50000);
  silent[128] = raw_connect(port), silent[129] = raw_connect(port);   /* two more evictions */
  usleep(100000);
  st = raw_hello(r1);
  for (int i = 0; i < 130; i++) close(silent[i]);
  close(r1);
  pthread_join(th, NULL);
  if (st != 0) fail_msg("rank 1 in a flood: status %ld (evicted?)", st);
}

/* A root that never answers (its SYNs dropped: a full accept queue here) is a timeout
 * within GCOMP_TIMEOUT_MS, not a connect() blocked for the kernel's two minutes. */
static void test_rendezvous_unanswered_root(void **state) {
  int port = test_port();
  int lfd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  assert_int_equal(bind(lfd, (struct sockaddr *)&sa, sizeof sa), 0);
  assert_int_equal(listen(lfd, 0), 0);
  int fill[4];   /* fill the accept queue so that further SYNs are dropped */
  for (int i = 0; i < 4; i++) {
    fill[i] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    (void)!connect(fill[i], (struct sockaddr *)&sa, sizeof sa);
  }
  usleep(100000);
  rv_arg a;
  memset(&a, 0, sizeof a);
  a.env.rank = 1, a.env.size = 2, a.env.local_rank = -1;
  snprintf(a.env.root_host, sizeof a.env.root_host, "127.0.0.1");
  a.env.root_port = port;
  /* No timing is asserted: the join must end in the rendezvous's own timeout error. A
   * blocking connect() would end in the same words after the kernel's SYN retries (about
   * two minutes), so the join runs on a thread and 60 s without an end is called a hang:
   * a watchdog 40x the timeout, not a measurement. */
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, rv_main, &a), 0);
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += 60;
  int joined = pthread_timedjoin_np(th, NULL, &until);
  for (int i = 0; i < 4; i++) close(fill[i]);
  close(lfd);
  if (joined != 0) fail_msg("the join against an unanswering root still runs after 60 s (1500 ms timeout)");
  assert_int_equal(a.status, GCOMP_ERR_TIMEOUT);
  if (!strstr(a.err, "within GCOMP_TIMEOUT_MS=1500"))
    fail_msg("the join did not end in the rendezvous's timeout: %s", a.err);
}

int main(void) {
  gcomp_init();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_torchrun),
      cmocka_unit_test(test_open_mpi_pmi_slurm),
      cmocka_unit_test(test_gcomp_overrides_and_default),
      cmocka_unit_test(test_errors_name_the_variable),
      cmocka_unit_test(test_rendezvous_allgather),
      cmocka_unit_test(test_rendezvous_wrong_token),
      cmocka_unit_test(test_rendezvous_strangers),
      cmocka_unit_test(test_rendezvous_unanswered_root),
      cmocka_unit_test(test_rendezvous_late_hello_and_flood),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
