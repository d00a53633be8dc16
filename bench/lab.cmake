# gcomp-lab: the layers under the API timed directly (kernels, codec suites, the transport's
# point-to-point, the measurement's cost), through internal headers and the test hooks, as a
# library's own lab programs do. Built, never installed: a developer's instrument. Its front
# end is gcomp-bench's (tools/gcomp-bench.c).
file(GLOB GCOMP_LAB_SRC CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/lab/*.c)
add_executable(gcomp-lab ${PROJECT_SOURCE_DIR}/tools/gcomp-bench.c ${GCOMP_LAB_SRC})
target_include_directories(gcomp-lab PRIVATE ${PROJECT_SOURCE_DIR}/tools ${CMAKE_CURRENT_SOURCE_DIR}/lab)
target_link_libraries(gcomp-lab PRIVATE gcomp_internal gcomp_testing m)
