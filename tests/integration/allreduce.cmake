# Multi-process allreduce over real providers (label integration): shm on one node,
# tcp;ofi_rxm between emulated nodes, each algorithm forced once; compressed paths; a rank
# killed mid-run.
add_executable(allreduce_check ${CMAKE_CURRENT_LIST_DIR}/allreduce_check.c)
target_link_libraries(allreduce_check PRIVATE gcomp_internal m)
set(GCOMP_AR_RUN $<TARGET_FILE:gcomp-run>)
set(GCOMP_AR_CHECK $<TARGET_FILE:allreduce_check>)

function(gcomp_ar_test name n nodes algo mode)
  add_test(NAME ${name} COMMAND ${GCOMP_AR_RUN} -n ${n} --nodes ${nodes} --tag-output --
    ${GCOMP_AR_CHECK} ${mode} ${ARGN})
  set_tests_properties(${name} PROPERTIES LABELS integration TIMEOUT 240
    ENVIRONMENT "GCOMP_TIMEOUT_MS=30000;GCOMP_ALGO=${algo};GCOMP_CODEC_MIN_BYTES=0")
endfunction()

gcomp_ar_test(integration.allreduce.shm.ring 3 1 ring dense)
gcomp_ar_test(integration.allreduce.shm.rhd 3 1 rhd dense)
gcomp_ar_test(integration.allreduce.shm.auto 4 1 auto dense)
gcomp_ar_test(integration.allreduce.shm.shm-segment 4 1 shm dense)
gcomp_ar_test(integration.allreduce.mixed.hier 4 2 hier dense)
gcomp_ar_test(integration.allreduce.tcp.rd 2 2 rd dense)
gcomp_ar_test(integration.allreduce.shm.codecs 3 1 auto codecs)
gcomp_ar_test(integration.allreduce.shm.direct 3 1 direct codecs)
gcomp_ar_test(integration.allreduce.mixed.hier-direct 4 2 hier-direct codecs)
gcomp_ar_test(integration.allreduce.mixed.hier-sparse 4 2 hier-sparse codecs)
# hier-direct's pipeline (reduce/hier_pipe.c): 256 KiB segments cut the 4 MiB calls into 16
# slices that cross the nodes while the nodes reduce and copy out the others
gcomp_ar_test(integration.allreduce.mixed.hier-direct-pipelined 4 2 hier-direct codecs)
set_tests_properties(integration.allreduce.mixed.hier-direct-pipelined PROPERTIES ENVIRONMENT
  "GCOMP_TIMEOUT_MS=30000;GCOMP_ALGO=hier-direct;GCOMP_CODEC_MIN_BYTES=0;GCOMP_SEGMENT_BYTES=262144")
# more ranks than bf16 sums stay exact for (the check rounds its expectation like the
# library: once, to nearest even) and than fp16 products stay finite; 8 ranks per core
gcomp_ar_test(integration.allreduce.shm.16-ranks 16 1 auto dense)
gcomp_ar_test(integration.allreduce.mixed.16-ranks 16 4 auto dense)

add_test(NAME integration.allreduce.kill
  COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/allreduce_fail.sh ${GCOMP_AR_RUN} ${GCOMP_AR_CHECK})
set_tests_properties(integration.allreduce.kill PROPERTIES LABELS integration TIMEOUT 120)
# one node: the calls go through the shared-memory segment, where a dead rank is noticed by
# its pid (or by the timeout), not by the fabric
add_test(NAME integration.allreduce.kill.one-node
  COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/allreduce_fail.sh ${GCOMP_AR_RUN} ${GCOMP_AR_CHECK} 1)
set_tests_properties(integration.allreduce.kill.one-node PROPERTIES LABELS integration TIMEOUT 120)

# a rank stopped with SIGSTOP (alive, silent): every other rank's timeout leads to it; once
# continued its own next call fails too, and the job ends
add_test(NAME integration.allreduce.stop
  COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/allreduce_stop.sh ${GCOMP_AR_RUN} ${GCOMP_AR_CHECK})
set_tests_properties(integration.allreduce.stop PROPERTIES LABELS integration TIMEOUT 120)
add_test(NAME integration.allreduce.stop.one-node
  COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/allreduce_stop.sh ${GCOMP_AR_RUN} ${GCOMP_AR_CHECK} 1)
set_tests_properties(integration.allreduce.stop.one-node PROPERTIES LABELS integration TIMEOUT 120)

# a corrupt frame on the wire (GCOMP_FAULT=corrupt: rank 1 flips a byte of the first frame
# it sends in its 3rd call): every rank, not only the receiver, fails that call with
# GCOMP_ERR_CORRUPT naming rank 1, told by reduce/abort.c's notice (always on) rather than
# by waiting out GCOMP_TIMEOUT_MS, here its production value of 30 s; and the next call
# at once; over libfabric shm, tcp between 2 emulated nodes, and hier
function(gcomp_ar_corrupt name n nodes algo spec)
  gcomp_ar_test(${name} ${n} ${nodes} ${algo} corrupt 3 1 ${spec})
  set_tests_properties(${name} PROPERTIES TIMEOUT 120 ENVIRONMENT
    "GCOMP_TIMEOUT_MS=30000;GCOMP_ALGO=${algo};GCOMP_CODEC_MIN_BYTES=0;GCOMP_FAULT=corrupt:rank=1,call=3")
endfunction()
gcomp_ar_corrupt(integration.allreduce.corrupt.shm-bf16 4 1 direct bf16)
gcomp_ar_corrupt(integration.allreduce.corrupt.shm-quant 4 1 direct quant)
gcomp_ar_corrupt(integration.allreduce.corrupt.tcp-bf16 4 2 direct bf16)
gcomp_ar_corrupt(integration.allreduce.corrupt.mixed-hier-quant 4 2 hier-direct quant)
# the same through hier-direct's pipeline (4 slices of the 1 MiB calls)
gcomp_ar_corrupt(integration.allreduce.corrupt.mixed-hier-quant-pipelined 4 2 hier-direct quant)
set_tests_properties(integration.allreduce.corrupt.mixed-hier-quant-pipelined PROPERTIES
  ENVIRONMENT "GCOMP_TIMEOUT_MS=30000;GCOMP_ALGO=hier-direct;GCOMP_CODEC_MIN_BYTES=0;GCOMP_SEGMENT_BYTES=262144;GCOMP_FAULT=corrupt:rank=1,call=3")

# GCOMP_INTRA_CODEC over real processes: bf16 inside the nodes of a hierarchical call (the
# dense check's integer sums are exact in bf16, so the results must still be exact)
gcomp_ar_test(integration.allreduce.mixed.intra-bf16 4 2 hier dense)
set_tests_properties(integration.allreduce.mixed.intra-bf16 PROPERTIES ENVIRONMENT
  "GCOMP_TIMEOUT_MS=30000;GCOMP_ALGO=hier;GCOMP_CODEC_MIN_BYTES=0;GCOMP_INTRA_CODEC=bf16")

# a segment a killed root left in /dev/shm is swept by the next job on the machine
add_test(NAME integration.allreduce.shm-stale
  COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/shm_stale.sh ${GCOMP_AR_RUN} ${GCOMP_AR_CHECK})
set_tests_properties(integration.allreduce.shm-stale PROPERTIES LABELS integration TIMEOUT 60)

# ranks that pass different counts: a clear error on every rank, no hang, through the node's
# segment and through libfabric's shm provider (which deadlocked on such truncations). The
# algorithm is forced: left to the planner, the two sizes may get different algorithms,
# and then the ranks only time out waiting for each other.
gcomp_ar_test(integration.allreduce.mismatch.segment 2 1 shm mismatch)
gcomp_ar_test(integration.allreduce.mismatch.shm-provider 2 1 rd mismatch)
gcomp_ar_test(integration.allreduce.mismatch.tcp 2 2 ring mismatch)
set_tests_properties(integration.allreduce.mismatch.segment PROPERTIES TIMEOUT 60 ENVIRONMENT
  "GCOMP_TIMEOUT_MS=5000;GCOMP_ALGO=shm")
set_tests_properties(integration.allreduce.mismatch.shm-provider PROPERTIES TIMEOUT 60 ENVIRONMENT
  "GCOMP_TIMEOUT_MS=5000;GCOMP_ALGO=rd;GCOMP_SHM_BYTES=0")
set_tests_properties(integration.allreduce.mismatch.tcp PROPERTIES TIMEOUT 60 ENVIRONMENT
  "GCOMP_TIMEOUT_MS=5000;GCOMP_ALGO=ring")

# large calls in small segments: each step's segments to one peer were all posted at once,
# more receives than libfabric 1.17's shm has entries for, and every rank stalled (ring:
# 32 MiB in 8 KiB segments, 3 runs of 3; rhd: 8 MiB in 4 KiB, 4 of 4; rhd in 64 KiB
# segments of 16 KiB chunks, 2 of 2, even with 256 segments). Payload now moves only into
# receives the receiver has posted, headers into slots bounded by credits
# (fabric/ofi_proto.c): segments stay GCOMP_SEGMENT_BYTES, whatever their number.
# 4 ranks on one node, `allreduce_check big COUNT` with ALGO forced and the settings in ENV
function(gcomp_ar_big name algo count env)
  gcomp_ar_test(${name} 4 1 ${algo} big ${count})
  set_tests_properties(${name} PROPERTIES ENVIRONMENT "GCOMP_TIMEOUT_MS=10000;GCOMP_ALGO=${algo};${env}")
endfunction()
gcomp_ar_big(integration.allreduce.shm.ring-many-segments ring 8388608 "GCOMP_SEGMENT_BYTES=8192")
gcomp_ar_big(integration.allreduce.shm.rhd-many-segments rhd 2097152 "GCOMP_SEGMENT_BYTES=4096")
gcomp_ar_big(integration.allreduce.shm.rhd-many-chunks rhd 8388608
  "GCOMP_SEGMENT_BYTES=65536;GCOMP_CHUNK_BYTES=16384")
# chunks no larger than shm's inject size complete at the sender at once and escaped the
# window: stalled 2 of 2 (found by the second review); over shm chunks are now >= 8 KiB
gcomp_ar_big(integration.allreduce.shm.rhd-small-chunks rhd 4194304 "GCOMP_CHUNK_BYTES=4096")
# segments of many chunks: an unmatched send's chunks held back shm's in-order completions
# and the ring stalled every time (16 MiB in 8 KiB chunks); chunks now move only into
# receives the receiver has posted and granted (fabric/ofi_proto.c)
gcomp_ar_big(integration.allreduce.shm.ring-small-chunks ring 4194304 "GCOMP_CHUNK_BYTES=8192")
# scheduled messages (fabric/transport.h): hier's cross-node ring posts its allgather's
# receives early; in small segments (more than the 8 receives a peer announces at once)
# they stalled every rank when posted before the reduce-scatter's (found by the soak)
gcomp_ar_test(integration.allreduce.mixed.hier-many-segments 4 2 hier big 1048576)
set_tests_properties(integration.allreduce.mixed.hier-many-segments PROPERTIES ENVIRONMENT
  "GCOMP_TIMEOUT_MS=10000;GCOMP_ALGO=hier;GCOMP_SEGMENT_BYTES=12345")

# straggler detection: a rank that sleeps before every call is named by every rank
add_test(NAME integration.allreduce.straggler
  COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/straggler.sh ${GCOMP_AR_RUN} $<TARGET_FILE:gcomp-bench>
          $<TARGET_FILE:gcomp-stats>)
set_tests_properties(integration.allreduce.straggler PROPERTIES LABELS integration TIMEOUT 120)

# the drift guard: fallbacks named in every rank's stats; settings agreed and validated
add_test(NAME integration.allreduce.guard
  COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/guard.sh ${GCOMP_AR_RUN} $<TARGET_FILE:gcomp-bench>)
set_tests_properties(integration.allreduce.guard PROPERTIES LABELS integration TIMEOUT 120)

# gcomp-bench's in-place timing refills the buffer before each call (values compounded into Inf)
add_test(NAME integration.allreduce.bench-inplace
  COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/bench_inplace.sh ${GCOMP_AR_RUN} $<TARGET_FILE:gcomp-bench>)
set_tests_properties(integration.allreduce.bench-inplace PROPERTIES LABELS integration TIMEOUT 120)
# gcomp-bench --ab: ABBA rounds against a second communicator with one setting changed
add_test(NAME integration.allreduce.bench-ab
  COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/bench_ab.sh ${GCOMP_AR_RUN} $<TARGET_FILE:gcomp-bench>)
set_tests_properties(integration.allreduce.bench-ab PROPERTIES LABELS integration TIMEOUT 180)

# a malformed or differing setting on one rank, and a rank of another build: every rank's
# creation fails with one error naming the rank and the value, none waits (refuse.sh)
add_test(NAME integration.allreduce.refuse
  COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/refuse.sh ${GCOMP_AR_RUN} ${GCOMP_AR_CHECK})
set_tests_properties(integration.allreduce.refuse PROPERTIES LABELS integration TIMEOUT 240)
