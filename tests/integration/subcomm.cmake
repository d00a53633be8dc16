# Communicators made from communicators (label integration), real processes by gcomp-run:
# concurrent creation from two threads of each rank; splits and dups.
add_executable(subcomm_check ${CMAKE_CURRENT_LIST_DIR}/subcomm_check.c)
target_link_libraries(subcomm_check PRIVATE gcomp_static)   # gcomp.h (+ gcomp_internal.h)

function(gcomp_subcomm_test name n nodes)
  add_test(NAME ${name} COMMAND $<TARGET_FILE:gcomp-run> -n ${n} --nodes ${nodes} --tag-output --
    $<TARGET_FILE:subcomm_check> ${ARGN})
  set_tests_properties(${name} PROPERTIES LABELS integration TIMEOUT 120
    ENVIRONMENT "GCOMP_TIMEOUT_MS=20000")
endfunction()

# shm only, then shm and tcp between two emulated nodes
gcomp_subcomm_test(integration.subcomm.concurrent.shm 3 1 concurrent 8)
gcomp_subcomm_test(integration.subcomm.concurrent.mixed 4 2 concurrent 2)

# a dup and a split by rank parity of 5 ranks on two emulated nodes (3 + 2), driven at once
# by two threads of each rank; hier forced, so the world (3 + 2) and the split's even group
# (2 + 1) run it on uneven nodes over shm and tcp
gcomp_subcomm_test(integration.subcomm.split.hier 5 2 split 12)
set_tests_properties(integration.subcomm.split.hier PROPERTIES ENVIRONMENT
  "GCOMP_TIMEOUT_MS=20000;GCOMP_ALGO=hier")
# the planner's choice, and the calibration the children take from the world
gcomp_subcomm_test(integration.subcomm.split.auto 4 1 split 12)
