# gcomp-soak: random sequences of allreduce calls with every element checked (started on
# every rank by gcomp-run). Installed: it uses only the public header, so a user can soak
# their own machine and providers; scripts/soak and the ctest label soak drive it.
add_executable(gcomp-soak ${CMAKE_CURRENT_SOURCE_DIR}/gcomp-soak.c)
target_link_libraries(gcomp-soak PRIVATE gcomp m Threads::Threads)
set_target_properties(gcomp-soak PROPERTIES INSTALL_RPATH "$ORIGIN/../${CMAKE_INSTALL_LIBDIR}")
install(TARGETS gcomp-soak RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
