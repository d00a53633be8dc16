# reduce_scatter, allgather, broadcast, barrier and alltoall over real processes (label
# integration): 1-6 ranks on one node (libfabric shm and the node's segment), across 2
# emulated nodes (tcp;ofi_rxm), uneven ones included, each algorithm forced once; compressed
# reduce_scatter and allgather; a rank killed or stopped during each; a corrupt frame.
add_executable(collectives_check ${CMAKE_CURRENT_LIST_DIR}/collectives_check.c)
target_link_libraries(collectives_check PRIVATE gcomp m)
set(GCOMP_CC_CHECK $<TARGET_FILE:collectives_check>)

function(gcomp_cc_test name n nodes algo mode)
  add_test(NAME ${name} COMMAND ${GCOMP_AR_RUN} -n ${n} --nodes ${nodes} --tag-output --
    ${GCOMP_CC_CHECK} ${mode} ${ARGN})
  set_tests_properties(${name} PROPERTIES LABELS integration TIMEOUT 240
    ENVIRONMENT "GCOMP_TIMEOUT_MS=30000;GCOMP_ALGO=${algo};GCOMP_CODEC_MIN_BYTES=0")
endfunction()

gcomp_cc_test(integration.collectives.one-rank 1 1 auto dense)
gcomp_cc_test(integration.collectives.shm.3-ring 3 1 reduce_scatter=ring,allgather=ring,broadcast=tree,alltoall=pairwise dense
  reduce_scatter:ring allgather:ring alltoall:pairwise)
# halving/doubling, 5 ranks: one pair folded, then halving over 4
gcomp_cc_test(integration.collectives.shm.5-rhd 5 1 reduce_scatter=rhd,allgather=rhd dense
  reduce_scatter:rhd allgather:rhd)
gcomp_cc_test(integration.collectives.shm.4-segment 4 1 reduce_scatter=shm,allgather=shm,broadcast=shm,alltoall=shm dense
  reduce_scatter:shm allgather:shm alltoall:shm)
gcomp_cc_test(integration.collectives.shm.6 6 1 auto dense)
gcomp_cc_test(integration.collectives.tcp.2x2 4 2 auto dense)
gcomp_cc_test(integration.collectives.tcp.2 2 2 auto dense)
gcomp_cc_test(integration.collectives.tcp.uneven-5 5 2 broadcast=scatter dense)
gcomp_cc_test(integration.collectives.shm.codecs 4 1 reduce_scatter=direct,allgather=direct codecs)
gcomp_cc_test(integration.collectives.tcp.codecs 4 2 reduce_scatter=direct,allgather=direct codecs)
# hierarchical reduce_scatter and allgather, each check naming the algorithm every call
# must have run: 2 + 2 ranks (the node's shared segment; blocks reordered by local index),
# 2 + 1 under --map-by node (sub-nodes of one rank, blocks reordered), compressed (quant
# fed by the node's segment rounds, bf16 re-encoding the stored node sum), and
# GCOMP_INTRA_CODEC inside the nodes (round-robin placement: blocks in place)
gcomp_cc_test(integration.collectives.tcp.2x2-hier 4 2 reduce_scatter=hier,allgather=hier dense
  reduce_scatter:hier allgather:hier)
# 3 nodes of 2 in node runs: each node's order of the others differs
gcomp_cc_test(integration.collectives.tcp.3x2-hier 6 3 reduce_scatter=hier,allgather=hier dense
  reduce_scatter:hier allgather:hier)
gcomp_cc_test(integration.collectives.tcp.uneven-3-hier 3 "2;--map-by;node"
  reduce_scatter=hier,allgather=hier dense reduce_scatter:hier allgather:hier)
gcomp_cc_test(integration.collectives.tcp.hier-codecs 4 2 reduce_scatter=hier-direct,allgather=hier-direct codecs
  reduce_scatter:hier-direct allgather:hier-direct)
# compressed over node runs (2 + 2 above: nothing moved, the other nodes' shards first) and
# over 3 nodes (each node's order of the others differs), and round-robin (blocks moved)
gcomp_cc_test(integration.collectives.tcp.hier-codecs-3 6 3 reduce_scatter=hier-direct,allgather=hier-direct codecs
  reduce_scatter:hier-direct allgather:hier-direct)
gcomp_cc_test(integration.collectives.tcp.hier-codecs-rr 4 "2;--map-by;node"
  reduce_scatter=hier-direct,allgather=hier-direct codecs reduce_scatter:hier-direct allgather:hier-direct)
gcomp_cc_test(integration.collectives.tcp.hier-intra-codec 4 "2;--map-by;node"
  reduce_scatter=hier,allgather=hier dense reduce_scatter:hier allgather:hier intra)
set_tests_properties(integration.collectives.tcp.hier-intra-codec PROPERTIES ENVIRONMENT
  "GCOMP_TIMEOUT_MS=30000;GCOMP_ALGO=reduce_scatter=hier,allgather=hier;GCOMP_CODEC_MIN_BYTES=0;GCOMP_INTRA_CODEC=bf16")

# a rank killed (SIGKILL) or stopped (SIGSTOP) during a run of one collective: every other
# rank fails within GCOMP_TIMEOUT_MS naming it (the allreduce scripts, given the collective)
foreach(coll reduce_scatter allgather broadcast alltoall barrier)
  add_test(NAME integration.collectives.kill.${coll}
    COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/allreduce_fail.sh ${GCOMP_AR_RUN} ${GCOMP_CC_CHECK} 2 ${coll})
  set_tests_properties(integration.collectives.kill.${coll} PROPERTIES LABELS integration TIMEOUT 120)
endforeach()
add_test(NAME integration.collectives.kill.one-node.allgather
  COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/allreduce_fail.sh ${GCOMP_AR_RUN} ${GCOMP_CC_CHECK} 1 allgather)
set_tests_properties(integration.collectives.kill.one-node.allgather PROPERTIES LABELS integration TIMEOUT 120)
foreach(coll reduce_scatter broadcast)
  add_test(NAME integration.collectives.stop.${coll}
    COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/allreduce_stop.sh ${GCOMP_AR_RUN} ${GCOMP_CC_CHECK} 2 ${coll})
  set_tests_properties(integration.collectives.stop.${coll} PROPERTIES LABELS integration TIMEOUT 120)
endforeach()

# a corrupt frame (GCOMP_FAULT=corrupt: rank 1 flips a byte of the first frame it sends in
# its 3rd call) in a compressed reduce_scatter or allgather: GCOMP_ERR_CORRUPT on every rank
foreach(coll reduce_scatter allgather)
  gcomp_cc_test(integration.collectives.corrupt.${coll} 4 2 direct corrupt 3 1 quant ${coll})
  set_tests_properties(integration.collectives.corrupt.${coll} PROPERTIES TIMEOUT 60 ENVIRONMENT
    "GCOMP_TIMEOUT_MS=5000;GCOMP_ALGO=reduce_scatter=direct,allgather=direct;GCOMP_CODEC_MIN_BYTES=0;GCOMP_FAULT=corrupt:rank=1,call=3")
endforeach()
# hierarchical: the culprit's frame reaches one rank of the other node; its node's ranks
# and the culprit's must fail alike
foreach(coll reduce_scatter allgather)
  gcomp_cc_test(integration.collectives.corrupt.hier-${coll} 4 2 direct corrupt 3 1 quant ${coll}
    ${coll}:hier-direct)
  set_tests_properties(integration.collectives.corrupt.hier-${coll} PROPERTIES TIMEOUT 60 ENVIRONMENT
    "GCOMP_TIMEOUT_MS=5000;GCOMP_ALGO=reduce_scatter=hier-direct,allgather=hier-direct;GCOMP_CODEC_MIN_BYTES=0;GCOMP_FAULT=corrupt:rank=1,call=3")
endforeach()

# gcomp-bench's tables of the four timed collectives run and end well (figures not checked)
foreach(coll reduce_scatter allgather broadcast alltoall)
  add_test(NAME integration.collectives.bench.${coll} COMMAND ${GCOMP_AR_RUN} -n 2 --
    $<TARGET_FILE:gcomp-bench> ${coll} -b 8 -e 64k -f 64 -n 2 --rounds 1)
  set_tests_properties(integration.collectives.bench.${coll} PROPERTIES LABELS integration TIMEOUT 60
    PASS_REGULAR_EXPRESSION "${coll}:")
endforeach()
