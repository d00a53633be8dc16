# gcomp-sim: gcomp's own allreduce under SimGrid's simulator (docs/simulation.md), beside
# gcomp-plan's prediction. Built where SimGrid's smpicc and smpirun are found (Debian:
# libsimgrid-dev). gcomp-sim itself is an ordinary program over the public header; its rank
# program is compiled by smpicc (a shared object smpirun loads once per simulated rank) and
# links the ordinary libgcomp.so: the library never includes mpi.h (fabric/mpi_p2p.c).
find_program(GCOMP_SMPICC smpicc)
find_program(GCOMP_SMPIRUN smpirun)
if(NOT GCOMP_SMPICC OR NOT GCOMP_SMPIRUN OR GCOMP_SANITIZE)
  # the simulator's launcher is not built with the sanitizers' runtime, which must load first
  return()
endif()
add_executable(gcomp-sim ${CMAKE_CURRENT_SOURCE_DIR}/gcomp-sim.c)
target_link_libraries(gcomp-sim PRIVATE gcomp m)
set_target_properties(gcomp-sim PROPERTIES INSTALL_RPATH "$ORIGIN/../${CMAKE_INSTALL_LIBDIR}")
install(TARGETS gcomp-sim RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

# The rank program: beside gcomp-sim in the build tree, in libexec/gcomp once installed.
# Its run path names libgcomp.so's directories in full: smpirun loads a copy of the program
# from a temporary directory for each rank ($ORIGIN would be that directory).
set(GCOMP_SIM_RANK ${CMAKE_CURRENT_BINARY_DIR}/gcomp-sim-rank)
add_custom_command(OUTPUT ${GCOMP_SIM_RANK}
  COMMAND ${GCOMP_SMPICC} -O2 -g -Wall -Wextra -Werror -I${PROJECT_SOURCE_DIR}/include
          -o ${GCOMP_SIM_RANK} ${CMAKE_CURRENT_SOURCE_DIR}/gcomp-sim-rank.c
          -L$<TARGET_FILE_DIR:gcomp> -lgcomp
          "-Wl,-rpath,$<TARGET_FILE_DIR:gcomp>:${CMAKE_INSTALL_FULL_LIBDIR}"
  DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/gcomp-sim-rank.c ${PROJECT_SOURCE_DIR}/include/gcomp.h
          ${PROJECT_SOURCE_DIR}/include/gcomp_mpi.h gcomp
  COMMENT "smpicc gcomp-sim-rank" VERBATIM)
add_custom_target(gcomp-sim-rank ALL DEPENDS ${GCOMP_SIM_RANK})
install(PROGRAMS ${GCOMP_SIM_RANK} DESTINATION ${CMAKE_INSTALL_LIBEXECDIR}/gcomp)
