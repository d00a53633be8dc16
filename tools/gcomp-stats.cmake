# gcomp-stats: a job's GCOMP_STATS files as one diagnosis (reads the files; prices calls
# with the public gcomp_plan_predict).
add_executable(gcomp-stats ${CMAKE_CURRENT_SOURCE_DIR}/gcomp-stats.c
  ${CMAKE_CURRENT_SOURCE_DIR}/stats_find.c)
target_link_libraries(gcomp-stats PRIVATE gcomp m)
set_target_properties(gcomp-stats PROPERTIES INSTALL_RPATH "$ORIGIN/../${CMAKE_INSTALL_LIBDIR}")
install(TARGETS gcomp-stats RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
