# gcomp's own allreduce under SimGrid's simulator at 64 ranks (gcomp-sim, the MPI transport
# of fabric/mpi_p2p.c over SMPI), every element of every result checked. Built, and run,
# where smpicc is found (scripts/setup installs libsimgrid-dev); not in the sanitizer tree.
if(TARGET gcomp-sim)
  add_test(NAME integration.sim.allreduce
    COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/sim_allreduce.sh $<TARGET_FILE:gcomp-sim>)
  set_tests_properties(integration.sim.allreduce PROPERTIES LABELS "integration;sim" TIMEOUT 120)
endif()
