# gcomp-converge: the convergence harness's command line (convergence/ holds the work; its
# target is defined after tools/, which CMake resolves at generate time).
if(EXISTS ${PROJECT_SOURCE_DIR}/convergence/CMakeLists.txt)
  add_executable(gcomp-converge ${CMAKE_CURRENT_SOURCE_DIR}/gcomp-converge.c
                 ${CMAKE_CURRENT_SOURCE_DIR}/converge_run.c)
  target_link_libraries(gcomp-converge PRIVATE gcomp_converge)
  install(TARGETS gcomp-converge RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
