# gcomp-bench: every tools/bench_*.c registers its own subcommand or kernel suite. It links
# the static library with internal headers, as fabtests do, to time layers directly.
file(GLOB GCOMP_BENCH_SRC CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/bench_*.c)
add_executable(gcomp-bench gcomp-bench.c ${GCOMP_BENCH_SRC})
target_link_libraries(gcomp-bench PRIVATE gcomp_internal gcomp_testing m)   # test_hooks.h
install(TARGETS gcomp-bench RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
if(GCOMP_MPI_FOUND)
  target_link_libraries(gcomp-bench PRIVATE MPI::MPI_C)
  target_compile_definitions(gcomp-bench PRIVATE GCOMP_BENCH_MPI)
endif()
