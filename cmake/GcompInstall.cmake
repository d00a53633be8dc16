# Install: library, header, tools, pkg-config file and a CMake package (find_package(gcomp)).
include(CMakePackageConfigHelpers)

install(TARGETS gcomp gcomp_static EXPORT gcompTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES include/gcomp.h include/gcomp_mpi.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

install(EXPORT gcompTargets NAMESPACE gcomp:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/gcomp)
configure_package_config_file(cmake/gcomp-config.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/gcomp-config.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/gcomp)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/gcomp-config-version.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/gcomp-config.cmake
  ${CMAKE_CURRENT_BINARY_DIR}/gcomp-config-version.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/gcomp)

string(STRIP "${GCOMP_PC_REQUIRES}" GCOMP_PC_REQUIRES)
# relocatable: the prefix is found from where the .pc file lies
file(RELATIVE_PATH GCOMP_PC_UP "/prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/prefix")
configure_file(cmake/gcomp.pc.in ${CMAKE_CURRENT_BINARY_DIR}/gcomp.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/gcomp.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
