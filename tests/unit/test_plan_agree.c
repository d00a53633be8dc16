/* The cost model is the same on every rank, so every rank picks the same algorithm for a
 * call. On nodes holding different numbers of ranks, with more ranks than cores, each rank
 * once scaled its measured figures by its own node's crowding: the ranks of the fuller
 * nodes priced hier dearer than the others did, the two halves of the job ran different
 * algorithms for one call and waited for each other until the timeout (gcomp-soak, 8 ranks
 * on 3 nodes of 3+3+2, 4 MiB float64 MAX: hier on the node of 2, rhd on the others). The
 * process is pinned to one core so the crowding applies whatever the machine; the internal
 * header is read for the model and the planner's pick. */
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "comm.h"
#include "comm_impl.h"
#include "gcomp.h"

static void test_uneven_nodes_one_model(void **state) {
  (void)state;
  cpu_set_t saved, one;
  assert_int_equal(sched_getaffinity(0, sizeof saved, &saved), 0);
  CPU_ZERO(&one);
  for (int c = 0; c < CPU_SETSIZE; c++)
    if (CPU_ISSET(c, &saved)) {
      CPU_SET(c, &one);
      break;
    }
  assert_int_equal(sched_setaffinity(0, sizeof one, &one), 0);
  gcomp_config *cfg = NULL;
  assert_int_equal(gcomp_config_create(&cfg), GCOMP_OK);   /* measured figures */
  int node_of[8] = {0, 0, 0, 1, 1, 1, 2, 2};
  gcomp_comm *comms[8];
  int st = gcomp_comm_init_local(8, node_of, cfg, comms);
  assert_int_equal(sched_setaffinity(0, sizeof saved, &saved), 0);
  gcomp_config_destroy(cfg);
  assert_int_equal(st, GCOMP_OK);
  for (int r = 1; r < 8; r++) {
    assert_true(comms[r]->model.intra.alpha_s == comms[0]->model.intra.alpha_s);
    assert_true(comms[r]->model.intra.beta_spb == comms[0]->model.intra.beta_spb);
    assert_true(comms[r]->model.inter.beta_spb == comms[0]->model.inter.beta_spb);
    assert_true(comms[r]->model.gamma_spb == comms[0]->model.gamma_spb);
    for (size_t bytes = 1; bytes <= ((size_t)64 << 20); bytes = bytes * 2 + 3)
      assert_string_equal(gcomp_comm_plan_name(comms[r], bytes),
                          gcomp_comm_plan_name(comms[0], bytes));
  }
  for (int r = 0; r < 8; r++) assert_int_equal(gcomp_comm_destroy(comms[r]), GCOMP_OK);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_uneven_nodes_one_model),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
