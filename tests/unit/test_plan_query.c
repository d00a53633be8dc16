/* gcomp_plan_predict, the planner's cost model as public API: the same choice as the
 * planner's own, latency terms that are exactly the alpha part of a cost, refusals that
 * name what is wrong, sized structs that older callers can keep passing. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "coll.h"
#include "gcomp.h"

static gcomp_plan_query query(uint64_t bytes, int nodes, int local) {
  gcomp_plan_query q = {.struct_size = sizeof q, .bytes = bytes, .nodes = nodes,
                        .ranks_per_node = local};
  q.intra_alpha_s = 1e-6, q.intra_Bps = 10e9;
  q.inter_alpha_s = 20e-6, q.inter_Bps = 1e9;
  q.reduce_Bps = 8e9;
  return q;
}

static gcomp_plan_result predict(const gcomp_plan_query *q, const char *algo, int want) {
  gcomp_plan_result r = {.struct_size = sizeof r};
  int st = gcomp_plan_predict(q, algo, &r);
  if (st != want) fail_msg("%s: status %d, expected %d: %s", algo ? algo : "planner", st, want,
                           gcomp_last_error());
  return r;
}

static void test_same_choice_as_the_planner(void **state) {
  (void)state;
  const uint64_t sizes[] = {8, 4096, 1 << 20, 64u << 20};
  const int shapes[][2] = {{1, 4}, {2, 2}, {4, 8}, {3, 1}, {16, 8}};
  for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++)
    for (size_t k = 0; k < sizeof shapes / sizeof *shapes; k++) {
      gcomp_plan_query q = query(sizes[s], shapes[k][0], shapes[k][1]);
      gcomp_plan_result r = predict(&q, NULL, GCOMP_OK);
      gcomp_plan_in in = {0};
      in.bytes = (size_t)sizes[s], in.nnodes = shapes[k][0], in.local = shapes[k][1];
      in.n = in.nnodes * in.local;
      in.intra = (gcomp_link){1e-6, 1e-10}, in.inter = (gcomp_link){20e-6, 1e-9};
      in.gamma_spb = 1.0 / 8e9;
      const gcomp_algo *a = gcomp_plan_pick(&in, NULL);
      assert_string_equal(r.algo, a->name);
      assert_true(fabs(r.time_s - a->cost(&in)) <= 1e-12 * r.time_s);
    }
}

/* The planner remembers its last picks by size (plan.c): a call of the same size on another
 * placement, links or forced algorithm must still get its own answer. Each pick is compared
 * with the cost table priced afresh. */
static const gcomp_algo *cheapest(const gcomp_plan_in *in) {
  const gcomp_algo *best = NULL;
  double best_cost = INFINITY;
  for (int i = 0; i < gcomp_algo_count(); i++) {
    const char *name = NULL;
    assert_int_equal(gcomp_algo_describe(i, &name, NULL), GCOMP_OK);
    const gcomp_algo *a = gcomp_algo_find(name);
    if (a->kind != in->kind) continue;   /* another collective's */
    double c = a->cost(in);
    if (c >= 0 && c < best_cost) best = a, best_cost = c;
  }
  return best;
}

static void test_remembered_picks(void **state) {
  (void)state;
  const int shapes[][2] = {{1, 2}, {2, 2}, {1, 8}, {4, 1}};
  const double alphas[] = {1e-7, 1e-4};
  int changed = 0, differ = 0;
  const gcomp_algo *prev = NULL;
  for (int round = 0; round < 2; round++)
    for (size_t k = 0; k < sizeof shapes / sizeof *shapes; k++)
      for (size_t a = 0; a < 2; a++) {
        gcomp_plan_in in = {0};
        in.bytes = 1 << 20, in.nnodes = shapes[k][0], in.local = shapes[k][1];
        in.n = in.nnodes * in.local;
        in.intra = (gcomp_link){alphas[a], 1e-10}, in.inter = (gcomp_link){20 * alphas[a], 1e-9};
        in.gamma_spb = 1.0 / 8e9;
        const gcomp_algo *want = cheapest(&in), *got = gcomp_plan_pick(&in, NULL);
        assert_ptr_equal(got, want);
        /* forced: its own answer for the same input, not the remembered free pick */
        const gcomp_algo *ring = gcomp_algo_find("ring");
        assert_ptr_equal(gcomp_plan_pick(&in, ring), ring);
        changed += want != ring;
        differ += prev && want != prev;
        prev = want;
        assert_ptr_equal(gcomp_plan_pick(&in, NULL), want);
      }
  /* the inputs do ask for different algorithms, of one size */
  assert_true(changed > 0 && differ > 0);
}

/* No plan that refuses: the ring's steps are 12 bits of the tag, and GCOMP_SIZE allows 2^20
 * ranks. Past GCOMP_RING_MAX_RANKS, at every size and shape (ring-favoured links, one node or
 * many, a node of that many ranks), the planner picks an algorithm that runs; forced, the
 * ring gives way too. */
static void test_no_ring_past_its_limit(void **state) {
  (void)state;
  const int shapes[][2] = {{1, 5000}, {5000, 1}, {2, 4097}, {1 << 20, 1}, {1024, 1024}};
  for (size_t k = 0; k < sizeof shapes / sizeof *shapes; k++)
    for (uint64_t bytes = 8; bytes <= (1ull << 34); bytes <<= 5) {
      gcomp_plan_in in = {0};
      in.bytes = (size_t)bytes, in.nnodes = shapes[k][0], in.local = shapes[k][1];
      in.n = in.nnodes * in.local;
      /* latency nearly free, bandwidth dear: the cost model's case for the ring */
      in.intra = (gcomp_link){1e-9, 1e-9}, in.inter = (gcomp_link){1e-9, 1e-8};
      in.gamma_spb = 1.0 / 8e9;
      const gcomp_algo *a = gcomp_plan_pick(&in, NULL);
      if (!strcmp(a->name, "ring") || (!strcmp(a->name, "hier") && in.local > GCOMP_RING_MAX_RANKS))
        fail_msg("%d x %d ranks, %llu B: the planner picked %s, which refuses that many",
                 in.nnodes, in.local, (unsigned long long)bytes, a->name);
      assert_string_not_equal(gcomp_plan_pick(&in, gcomp_algo_find("ring"))->name, "ring");
    }
  /* at the limit the ring is still a choice */
  gcomp_plan_in in = {.bytes = 1u << 30, .n = GCOMP_RING_MAX_RANKS, .nnodes = 1,
                      .local = GCOMP_RING_MAX_RANKS};
  in.intra = in.inter = (gcomp_link){1e-9, 1e-9};
  in.gamma_spb = 1.0 / 8e9;
  assert_string_equal(gcomp_plan_pick(&in, gcomp_algo_find("ring"))->name, "ring");
  /* a forced algorithm of another collective is no answer for an allreduce (the fast path
   * for a forced pick returns it only for its own kind) */
  const gcomp_algo *rs = gcomp_algo_find("reduce_scatter:ring");
  assert_non_null(rs);
  assert_ptr_equal(gcomp_plan_pick(&in, rs), gcomp_plan_pick(&in, NULL));
  assert_int_equal(gcomp_plan_pick(&in, rs)->kind, GCOMP_COLL_ALLREDUCE);
}

static void test_latency_terms(void **state) {
  (void)state;
  /* the ring over 2 nodes x 4 (chunks of 128 KiB) is paced by its node-crossing hop, which
   * passes 2 chunks per inter-node latency in the reduce-scatter and 7 in the allgather
   * (every step posted at once up to 9 ranks), plus one crossing to fill the pipeline:
   * 7 (alpha/2 + alpha/7) + alpha of latency, not one inter-node alpha per step */
  gcomp_plan_query q = query(1 << 20, 2, 4);
  gcomp_plan_result r = predict(&q, "ring", GCOMP_OK);
  assert_string_equal(r.algo, "ring");
  assert_true(fabs(r.latency_s - (7 * (20e-6 / 2 + 20e-6 / 7) + 20e-6)) < 1e-9);
  double chunk = (1 << 20) / 8.0;
  double bw = (2.0 * 7 + 1) * chunk / 1e9 + 7.0 / 8 * (1 << 20) / 8e9;
  assert_true(fabs(r.time_s - (r.latency_s + bw)) < 1e-9);
  /* still below the flat formula (every step at the inter-node latency) ... */
  assert_true(r.time_s < 2.0 * 7 * 20e-6 + 2.0 * 7 / 8 * (1 << 20) / 1e9 + 7.0 / 8 * (1 << 20) / 8e9);
  /* ... which stays the price on one rank a node: every hop crosses */
  gcomp_plan_query flat = query(1 << 20, 8, 1);
  r = predict(&flat, "ring", GCOMP_OK);
  assert_true(fabs(r.latency_s - 2.0 * 7 * 20e-6) < 1e-9);
  assert_true(fabs(r.time_s - (r.latency_s + 2.0 * 7 / 8 * (1 << 20) / 1e9 +
                               7.0 / 8 * (1 << 20) / 8e9)) < 1e-9);
  assert_true(fabs(r.busbw_Bps - (double)(1 << 20) / r.time_s * 2 * 7 / 8) < 1e-3);
  /* hier picks ring or halving/doubling for its shards; still no more than the whole */
  r = predict(&q, "hier", GCOMP_OK);
  assert_true(r.latency_s > 0 && r.latency_s < r.time_s);
  /* 8 bytes: nearly all latency; 1 GiB: nearly none */
  q.bytes = 8;
  r = predict(&q, NULL, GCOMP_OK);
  assert_true(r.latency_s > 0.95 * r.time_s);
  q.bytes = 1ull << 30;
  r = predict(&q, NULL, GCOMP_OK);
  assert_true(r.latency_s < 0.05 * r.time_s);
}

/* reduce_scatter and allgather by halving/doubling: log2(n) latencies where the ring pays
 * n-1 for the same bytes, so the planner takes them over 8 ranks without a shared segment;
 * 3 ranks fold a pair, one step more each way than the ring's 2, and 6 fold two pairs, 4
 * steps against the ring's 5 */
static void test_rhd_collectives(void **state) {
  (void)state;
  const int kinds[] = {GCOMP_COLL_REDUCE_SCATTER, GCOMP_COLL_ALLGATHER};
  const char *rhd[] = {"reduce_scatter:rhd", "allgather:rhd"};
  for (int k = 0; k < 2; k++) {
    gcomp_plan_in in = {.kind = kinds[k], .bytes = 64, .n = 8, .nnodes = 1, .local = 8};
    in.intra = in.inter = (gcomp_link){2e-6, 1e-10};
    in.gamma_spb = 1.0 / 8e9;
    const gcomp_algo *a = gcomp_plan_pick(&in, NULL);
    assert_string_equal(a->name, rhd[k]);
    /* log2(8) = 3 latencies and 7/8 of the vector; the ring's 7 latencies */
    double want = 3 * 2e-6 + 7.0 / 8 * 64 * (1e-10 + (k ? 0 : in.gamma_spb));
    assert_true(fabs(a->cost(&in) - want) < 1e-12);
    assert_true(gcomp_algo_find(rhd[k])->cost(&in) < 7 * 2e-6);
    in.n = in.local = 3;
    assert_string_not_equal(gcomp_plan_pick(&in, NULL)->name, rhd[k]);
    in.n = in.local = 6;
    assert_string_equal(gcomp_plan_pick(&in, NULL)->name, rhd[k]);
    /* forcing names it whatever it costs */
    in.bytes = 1u << 28;
    assert_string_equal(gcomp_plan_pick(&in, gcomp_algo_find(rhd[k]))->name, rhd[k]);
  }
}

static void test_refusals(void **state) {
  (void)state;
  gcomp_plan_query q = query(1 << 20, 1, 4);
  predict(&q, "hier", GCOMP_ERR_UNSUPPORTED);   /* one node */
  assert_non_null(strstr(gcomp_last_error(), "hier cannot serve"));
  predict(&q, "direct", GCOMP_ERR_UNSUPPORTED);   /* no codec figures */
  assert_non_null(strstr(gcomp_last_error(), "without codec figures"));
  predict(&q, "shm", GCOMP_ERR_UNSUPPORTED);      /* no shm figures */
  predict(&q, "bogus", GCOMP_ERR_INVALID);
  assert_non_null(strstr(gcomp_last_error(), "'bogus'"));
  q.shm_alpha_s = 2e-6, q.shm_Bps = 10e9;
  assert_string_equal(predict(&q, "shm", GCOMP_OK).algo, "shm");
  gcomp_plan_query bad = q;
  bad.nodes = 0;
  predict(&bad, NULL, GCOMP_ERR_INVALID);
  bad = q, bad.inter_Bps = 0;
  predict(&bad, NULL, GCOMP_ERR_INVALID);
  bad = q, bad.intra_alpha_s = NAN;
  predict(&bad, NULL, GCOMP_ERR_INVALID);
  bad = q, bad.codec_ratio = 0.5;   /* without a codec rate */
  predict(&bad, NULL, GCOMP_ERR_INVALID);
  bad = q, bad.struct_size = 8;
  predict(&bad, NULL, GCOMP_ERR_INVALID);
  assert_non_null(strstr(gcomp_last_error(), "struct_size"));
  gcomp_plan_result r = {0};   /* struct_size unset */
  assert_int_equal(gcomp_plan_predict(&q, NULL, &r), GCOMP_ERR_INVALID);
  assert_int_equal(gcomp_plan_predict(NULL, NULL, &r), GCOMP_ERR_INVALID);
}

static void test_oversubscribed(void **state) {
  (void)state;
  gcomp_plan_query q = query(8, 1, 4);
  assert_int_equal(predict(&q, NULL, GCOMP_OK).oversubscribed, 0);   /* cores unknown */
  q.cores_per_node = 2;
  assert_int_equal(predict(&q, NULL, GCOMP_OK).oversubscribed, 1);
  q.cores_per_node = 4;
  assert_int_equal(predict(&q, NULL, GCOMP_OK).oversubscribed, 0);
}

/* A caller built against the first layout passes smaller structs: nothing past them is
 * read or written. */
static void test_first_layout(void **state) {
  (void)state;
  size_t result_v1 = offsetof(gcomp_plan_result, oversubscribed) + sizeof(int);
  unsigned char buf[sizeof(gcomp_plan_result) + 16];
  memset(buf, 0xab, sizeof buf);
  gcomp_plan_result *r = (gcomp_plan_result *)(void *)buf;
  r->struct_size = result_v1;
  gcomp_plan_query q = query(1 << 20, 2, 2);
  q.struct_size = offsetof(gcomp_plan_query, cores_per_node) + sizeof(int);
  assert_int_equal(gcomp_plan_predict(&q, NULL, r), GCOMP_OK);
  for (size_t i = result_v1; i < sizeof buf; i++) assert_int_equal(buf[i], 0xab);
  assert_true(r->time_s > 0);
}

static void test_links_text(void **state) {
  (void)state;
  gcomp_plan_query q = query(1, 1, 1);
  assert_int_equal(gcomp_plan_links(&q, "2,8,40,0.125,0.5,12"), GCOMP_OK);
  assert_true(fabs(q.intra_alpha_s - 2e-6) < 1e-15 && fabs(q.intra_Bps - 8e9) < 1);
  assert_true(fabs(q.inter_alpha_s - 40e-6) < 1e-15 && fabs(q.inter_Bps - 0.125e9) < 1);
  assert_true(fabs(q.shm_alpha_s - 0.5e-6) < 1e-15 && fabs(q.shm_Bps - 12e9) < 1);
  gcomp_plan_query before = q;
  assert_int_equal(gcomp_plan_links(&q, "1,2,3"), GCOMP_ERR_INVALID);
  assert_non_null(strstr(gcomp_last_error(), "'1,2,3'"));
  assert_memory_equal(&q, &before, sizeof q);
  assert_int_equal(gcomp_plan_links(&q, "1,10,20,1"), GCOMP_OK);
  assert_true(q.shm_alpha_s == 0);   /* four figures: no shm */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_same_choice_as_the_planner),
      cmocka_unit_test(test_remembered_picks),
      cmocka_unit_test(test_no_ring_past_its_limit),
      cmocka_unit_test(test_latency_terms),
      cmocka_unit_test(test_rhd_collectives),
      cmocka_unit_test(test_refusals),
      cmocka_unit_test(test_oversubscribed),
      cmocka_unit_test(test_first_layout),
      cmocka_unit_test(test_links_text),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
