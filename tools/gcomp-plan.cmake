# gcomp-plan: the planner's cost model on paper (links given or read from GCOMP_STATS),
# through the public header's gcomp_plan_predict: the same cost functions gcomp_allreduce
# picks its algorithm with.
add_executable(gcomp-plan ${CMAKE_CURRENT_SOURCE_DIR}/gcomp-plan.c)
target_link_libraries(gcomp-plan PRIVATE gcomp m)
set_target_properties(gcomp-plan PROPERTIES INSTALL_RPATH "$ORIGIN/../${CMAKE_INSTALL_LIBDIR}")
install(TARGETS gcomp-plan RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
