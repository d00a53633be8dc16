# gcomp-bench: the collectives timed as a user's program calls them (tools/bench_*.c register
# their subcommands). It sees gcomp.h and gcomp_internal.h only: the static library, not the
# layers' headers. The layers' own benchmarks are gcomp-lab's (bench/lab/).
file(GLOB GCOMP_BENCH_SRC CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/bench_*.c)
add_executable(gcomp-bench gcomp-bench.c ${GCOMP_BENCH_SRC})
target_link_libraries(gcomp-bench PRIVATE gcomp_static m)
install(TARGETS gcomp-bench RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
if(GCOMP_MPI_FOUND)
  target_link_libraries(gcomp-bench PRIVATE MPI::MPI_C)
  target_compile_definitions(gcomp-bench PRIVATE GCOMP_BENCH_MPI)
endif()
