# gcomp-plan: the planner's cost model on paper (links given or read from GCOMP_STATS). It
# links the internal library to call the same cost functions gcomp_allreduce does.
add_executable(gcomp-plan ${CMAKE_CURRENT_SOURCE_DIR}/gcomp-plan.c)
target_link_libraries(gcomp-plan PRIVATE gcomp_internal m)
install(TARGETS gcomp-plan RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
