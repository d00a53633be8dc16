# Multi-process fabric tests (label integration): real processes over real libfabric
# providers, launched by gcomp-run (and mpirun for Open MPI's variables). Never a mock.
add_executable(fabric_p2p ${CMAKE_CURRENT_LIST_DIR}/fabric_p2p.c)
target_link_libraries(fabric_p2p PRIVATE gcomp_testing)

set(GCOMP_FABRIC_RUN $<TARGET_FILE:gcomp-run>)
set(GCOMP_FABRIC_P2P $<TARGET_FILE:fabric_p2p>)
# 64 MiB messages; the sanitized build moves 16 MiB (ASan's memcpy and checks are slow and
# the point there is memory safety, not size coverage).
# (fabric_netns.sh likewise emulates 32 nodes there, not 256)
if(GCOMP_SANITIZE)
  set(GCOMP_FABRIC_MAX 16777216)
  set(GCOMP_FABRIC_NETNS_MODE sanitize)
else()
  set(GCOMP_FABRIC_MAX 67108864)
  set(GCOMP_FABRIC_NETNS_MODE full)
endif()

function(gcomp_fabric_test name timeout)
  add_test(NAME ${name} COMMAND ${ARGN})
  set_tests_properties(${name} PROPERTIES LABELS integration TIMEOUT ${timeout}
    ENVIRONMENT "GCOMP_TIMEOUT_MS=20000")
endfunction()

foreach(n 2 3 4)
  # shm only (one node); also checks that an oversized message is refused
  gcomp_fabric_test(integration.fabric.p2p.shm.${n} 120
    ${GCOMP_FABRIC_RUN} -n ${n} --tag-output -- ${GCOMP_FABRIC_P2P} p2p ${GCOMP_FABRIC_MAX} trunc)
  # tcp;ofi_rxm only (every rank its own node, over the host's interface)
  gcomp_fabric_test(integration.fabric.p2p.tcp.${n} 120
    ${GCOMP_FABRIC_RUN} -n ${n} --nodes ${n} --netns off --tag-output -- ${GCOMP_FABRIC_P2P} p2p ${GCOMP_FABRIC_MAX})
  # mixed: two emulated nodes (network namespaces when root), shm inside, tcp between
  gcomp_fabric_test(integration.fabric.p2p.mixed.${n} 120
    ${GCOMP_FABRIC_RUN} -n ${n} --nodes 2 --tag-output -- ${GCOMP_FABRIC_P2P} p2p ${GCOMP_FABRIC_MAX})
endforeach()

# tcp chunks go eagerly (the transport raises rxm's eager limit to the chunk size), unless
# the user set the limit; either way messages still arrive whole
gcomp_fabric_test(integration.fabric.eager.default 60
  ${GCOMP_FABRIC_RUN} -n 2 --nodes 2 --netns off --tag-output -- ${GCOMP_FABRIC_P2P} eager 1048576)
set_tests_properties(integration.fabric.eager.default PROPERTIES ENVIRONMENT
  "GCOMP_TIMEOUT_MS=20000;GCOMP_CHUNK_BYTES=1m")
gcomp_fabric_test(integration.fabric.eager.user 60
  ${GCOMP_FABRIC_RUN} -n 2 --nodes 2 --netns off --tag-output -- ${GCOMP_FABRIC_P2P} eager 20000)
set_tests_properties(integration.fabric.eager.user PROPERTIES ENVIRONMENT
  "GCOMP_TIMEOUT_MS=20000;FI_OFI_RXM_EAGER_LIMIT=20000")

# long waits block on tcp;ofi_rxm's completion queue wait fd, and arriving data wakes them
# (GCOMP_CQ_WAIT); with GCOMP_CQ_WAIT=0, over shm (no wait fd in libfabric 1.17) and with
# ranks sharing a node (their shm endpoint and segment have none: mixed), none blocks.
# Emulated nodes (namespaces when root) with a 1 Gbit/s link, as the benchmarks run.
gcomp_fabric_test(integration.fabric.cqwait.tcp 60
  ${GCOMP_FABRIC_RUN} -n 2 --nodes 2 --inter-node-rate 1gbit --tag-output -- ${GCOMP_FABRIC_P2P} cqwait 1)
gcomp_fabric_test(integration.fabric.cqwait.off 60
  ${GCOMP_FABRIC_RUN} -n 2 --nodes 2 --tag-output -- ${GCOMP_FABRIC_P2P} cqwait 0)
set_tests_properties(integration.fabric.cqwait.off PROPERTIES ENVIRONMENT
  "GCOMP_TIMEOUT_MS=20000;GCOMP_CQ_WAIT=0")
gcomp_fabric_test(integration.fabric.cqwait.shm 60
  ${GCOMP_FABRIC_RUN} -n 2 --tag-output -- ${GCOMP_FABRIC_P2P} cqwait 0)
gcomp_fabric_test(integration.fabric.cqwait.mixed 60
  ${GCOMP_FABRIC_RUN} -n 4 --nodes 2 --tag-output -- ${GCOMP_FABRIC_P2P} cqwait 0)

# scheduled messages (receiver-ready grants): shorter, longer, one tag in order, cancelled;
# 64 KiB chunks so that a message spans several chunks and grant windows
add_executable(fabric_sched ${CMAKE_CURRENT_LIST_DIR}/fabric_sched.c)
target_link_libraries(fabric_sched PRIVATE gcomp_testing)
foreach(where "shm;-n;2" "tcp;-n;2;--nodes;2;--netns;off")
  list(GET where 0 prov)
  list(REMOVE_AT where 0)
  gcomp_fabric_test(integration.fabric.sched.${prov} 60
    ${GCOMP_FABRIC_RUN} ${where} --tag-output -- $<TARGET_FILE:fabric_sched>)
  set_tests_properties(integration.fabric.sched.${prov} PROPERTIES ENVIRONMENT
    "GCOMP_TIMEOUT_MS=20000;GCOMP_CHUNK_BYTES=65536")
endforeach()

# 4 KiB chunks: windows of up to 128 chunks (1 MiB in flight per message, fabric/ofi_proto.c),
# the chunks a shorter message leaves posted beyond its end cancelled from the wide slots
foreach(where "shm;-n;2" "tcp;-n;2;--nodes;2;--netns;off")
  list(GET where 0 prov)
  list(REMOVE_AT where 0)
  gcomp_fabric_test(integration.fabric.sched.${prov}.small-chunks 60
    ${GCOMP_FABRIC_RUN} ${where} --tag-output -- $<TARGET_FILE:fabric_sched>)
  set_tests_properties(integration.fabric.sched.${prov}.small-chunks PROPERTIES ENVIRONMENT
    "GCOMP_TIMEOUT_MS=20000;GCOMP_CHUNK_BYTES=4096")
endforeach()
# wide windows take receive entries only while less than half are taken: with 128 (32 of
# them header slots) every message of 4 KiB chunks arrives whole (a quarter on top, the
# first rule, stalled the ordering step of the test)
gcomp_fabric_test(integration.fabric.p2p.shm.small-chunks 120
  ${GCOMP_FABRIC_RUN} -n 3 --tag-output -- ${GCOMP_FABRIC_P2P} p2p 4194304)
set_tests_properties(integration.fabric.p2p.shm.small-chunks PROPERTIES ENVIRONMENT
  "GCOMP_TIMEOUT_MS=20000;GCOMP_CHUNK_BYTES=4096;FI_SHM_RX_SIZE=128")

# over shm granted chunks travel in runs of 512 KiB (64 chunks of 8 KiB: one provider
# message each, fabric/ofi_proto.c), with 3 ranks and few receive entries; over tcp;ofi_rxm
# every chunk stays one eager message. Inline payloads: up to shm's inject size (beyond its
# less the 48-byte header, the payload alone), 4 KiB + 16 B over tcp
gcomp_fabric_test(integration.fabric.batch.shm 60
  ${GCOMP_FABRIC_RUN} -n 3 --tag-output -- ${GCOMP_FABRIC_P2P} batch 524288 4096)
set_tests_properties(integration.fabric.batch.shm PROPERTIES ENVIRONMENT
  "GCOMP_TIMEOUT_MS=20000;GCOMP_CHUNK_BYTES=8192;FI_SHM_RX_SIZE=64")
gcomp_fabric_test(integration.fabric.batch.tcp 60
  ${GCOMP_FABRIC_RUN} -n 2 --nodes 2 --netns off --tag-output -- ${GCOMP_FABRIC_P2P} batch 8192 4112)
set_tests_properties(integration.fabric.batch.tcp PROPERTIES ENVIRONMENT
  "GCOMP_TIMEOUT_MS=20000;GCOMP_CHUNK_BYTES=8192")
# odd chunks: 3000 B, runs of 174 chunks (522000 B)
gcomp_fabric_test(integration.fabric.batch.shm.odd 60
  ${GCOMP_FABRIC_RUN} -n 2 --tag-output -- ${GCOMP_FABRIC_P2P} batch 522000 4096)
set_tests_properties(integration.fabric.batch.shm.odd PROPERTIES ENVIRONMENT
  "GCOMP_TIMEOUT_MS=20000;GCOMP_CHUNK_BYTES=3000")

gcomp_fabric_test(integration.fabric.boot 120
  bash ${CMAKE_CURRENT_LIST_DIR}/fabric_boot.sh ${GCOMP_FABRIC_P2P})

gcomp_fabric_test(integration.fabric.kill.shm 60
  bash ${CMAKE_CURRENT_LIST_DIR}/fabric_fail.sh ${GCOMP_FABRIC_RUN} ${GCOMP_FABRIC_P2P} kill 3 1)
gcomp_fabric_test(integration.fabric.kill.mixed 60
  bash ${CMAKE_CURRENT_LIST_DIR}/fabric_fail.sh ${GCOMP_FABRIC_RUN} ${GCOMP_FABRIC_P2P} kill 4 2)
gcomp_fabric_test(integration.fabric.stall.tcp 60
  bash ${CMAKE_CURRENT_LIST_DIR}/fabric_fail.sh ${GCOMP_FABRIC_RUN} ${GCOMP_FABRIC_P2P} stall 3 3)

gcomp_fabric_test(integration.fabric.netns 300
  bash ${CMAKE_CURRENT_LIST_DIR}/fabric_netns.sh ${GCOMP_FABRIC_RUN} ${GCOMP_FABRIC_P2P}
  ${GCOMP_FABRIC_NETNS_MODE})
set_tests_properties(integration.fabric.netns PROPERTIES SKIP_RETURN_CODE 77)

# a provider that does not exist is an error naming it (and the variable), at once
add_test(NAME integration.fabric.bad_provider COMMAND ${GCOMP_FABRIC_RUN} -n 2 --nodes 2
  --netns off --tag-output -- ${GCOMP_FABRIC_P2P} boot)
set_tests_properties(integration.fabric.bad_provider PROPERTIES LABELS integration TIMEOUT 60
  ENVIRONMENT "GCOMP_PROVIDER=nosuchprov;GCOMP_TIMEOUT_MS=20000"
  # whichever rank fails first says so; gcomp-run may stop the other before it prints
  PASS_REGULAR_EXPRESSION "\\[[01]\\] fabric_p2p: transport: GCOMP_ERR_UNSUPPORTED: [^\n]*provider 'nosuchprov' \\(inter-node\\)[^\n]*GCOMP_PROVIDER selects another")

# more receives than the endpoint has receive entries (FI_SHM_RX_SIZE): receives are matched
# in software, so they time out saying nothing arrived, and later messages all arrive
gcomp_fabric_test(integration.fabric.rxfull 60
  ${GCOMP_FABRIC_RUN} -n 2 --tag-output -- ${GCOMP_FABRIC_P2P} rxfull 100)
set_tests_properties(integration.fabric.rxfull PROPERTIES ENVIRONMENT
  "GCOMP_TIMEOUT_MS=3000;FI_SHM_RX_SIZE=64")

# a completion queue error that fi_cq_readerr cannot read (GCOMP_FAULT=cqerr, fabric/fault.h)
# fails that rank's requests at once, naming the cause; it used to spin inside progress
gcomp_fabric_test(integration.fabric.cqerr 60
  ${GCOMP_FABRIC_RUN} -n 2 --tag-output -- ${GCOMP_FABRIC_P2P} p2p 65536)
set_tests_properties(integration.fabric.cqerr PROPERTIES ENVIRONMENT
  "GCOMP_TIMEOUT_MS=5000;GCOMP_FAULT=cqerr:rank=1"
  PASS_REGULAR_EXPRESSION "\\[1\\] fabric_p2p rank 1: [^\n]*GCOMP_ERR_FABRIC: [^\n]*fi_cq_readerr cannot read")

# 5,000 sends posted before the peer posts a receive: the receiver's peak memory grows by at
# most 8 MiB (headers wait at the sender once the receiver's unmatched ones reach their
# bound), then all arrive; over shm and over tcp
gcomp_fabric_test(integration.fabric.flood.shm 120
  ${GCOMP_FABRIC_RUN} -n 2 --tag-output -- ${GCOMP_FABRIC_P2P} flood 5000 4000)
gcomp_fabric_test(integration.fabric.flood.tcp 120
  ${GCOMP_FABRIC_RUN} -n 2 --nodes 2 --netns off --tag-output -- ${GCOMP_FABRIC_P2P} flood 5000 4000)
