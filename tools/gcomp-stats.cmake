# gcomp-stats: one table for a job's GCOMP_STATS files (reads the files; needs no library).
add_executable(gcomp-stats ${CMAKE_CURRENT_SOURCE_DIR}/gcomp-stats.c)
target_link_libraries(gcomp-stats PRIVATE m)
install(TARGETS gcomp-stats RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
