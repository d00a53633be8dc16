# Multi-process fabric tests: real processes over real libfabric providers (label integration).
add_executable(fabric_p2p ${CMAKE_CURRENT_LIST_DIR}/fabric_p2p.c)
target_link_libraries(fabric_p2p PRIVATE gcomp_internal)
