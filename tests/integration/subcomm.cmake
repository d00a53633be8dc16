# Communicators made from communicators (label integration), real processes by gcomp-run:
# concurrent creation from two threads of each rank.
add_executable(subcomm_check ${CMAKE_CURRENT_LIST_DIR}/subcomm_check.c)
target_link_libraries(subcomm_check PRIVATE gcomp_static)   # gcomp.h only

function(gcomp_subcomm_test name n nodes)
  add_test(NAME ${name} COMMAND $<TARGET_FILE:gcomp-run> -n ${n} --nodes ${nodes} --tag-output --
    $<TARGET_FILE:subcomm_check> ${ARGN})
  set_tests_properties(${name} PROPERTIES LABELS integration TIMEOUT 120
    ENVIRONMENT "GCOMP_TIMEOUT_MS=20000")
endfunction()

# shm only, then shm and tcp between two emulated nodes
gcomp_subcomm_test(integration.subcomm.concurrent.shm 3 1 concurrent 8)
gcomp_subcomm_test(integration.subcomm.concurrent.mixed 4 2 concurrent 2)
