# gcomp-run: the local launcher. Plain POSIX: it never links libfabric (ranks are forked
# before anything initialises it), nor the library.
add_executable(gcomp-run ${CMAKE_CURRENT_SOURCE_DIR}/gcomp-run.c)
install(TARGETS gcomp-run RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
