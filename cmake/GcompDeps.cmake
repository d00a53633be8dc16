# Finds gcomp's dependencies: the real Debian packages, through pkg-config.
# A missing one is a configure-time error that says which package brings it.
find_package(Threads REQUIRED)
find_package(PkgConfig)
if(NOT PKG_CONFIG_FOUND)
  message(FATAL_ERROR "pkg-config not found: apt-get install pkg-config (or run scripts/setup)")
endif()

set(GCOMP_DEP_TARGETS "")
set(GCOMP_PC_REQUIRES "")
function(gcomp_require_pc var module debian_pkg)
  pkg_check_modules(${var} QUIET IMPORTED_TARGET GLOBAL ${module})
  if(NOT ${var}_FOUND)
    message(FATAL_ERROR "${module} not found through pkg-config: "
      "apt-get install ${debian_pkg} (or run scripts/setup)")
  endif()
  message(STATUS "gcomp: ${module} ${${var}_VERSION}")
  set(GCOMP_DEP_TARGETS ${GCOMP_DEP_TARGETS} PkgConfig::${var} PARENT_SCOPE)
  set(GCOMP_PC_REQUIRES "${GCOMP_PC_REQUIRES} ${module}" PARENT_SCOPE)
endfunction()

# libfabric: its headers at build time; the library itself is loaded when the first
# communicator needs it (fabric/fi_lazy.h), so it is not on gcomp's link line
pkg_check_modules(FABRIC QUIET libfabric)
if(NOT FABRIC_FOUND)
  message(FATAL_ERROR "libfabric not found through pkg-config: "
    "apt-get install libfabric-dev (or run scripts/setup)")
endif()
message(STATUS "gcomp: libfabric ${FABRIC_VERSION} (loaded at run time)")
gcomp_require_pc(ZSTD libzstd libzstd-dev)
gcomp_require_pc(ISAL libisal libisal-dev)

if(GCOMP_BUILD_TESTS)
  pkg_check_modules(CMOCKA QUIET IMPORTED_TARGET GLOBAL cmocka)
  if(NOT CMOCKA_FOUND)
    message(FATAL_ERROR "cmocka not found: apt-get install libcmocka-dev (or run scripts/setup), "
      "or configure with -DGCOMP_BUILD_TESTS=OFF")
  endif()
endif()

set(GCOMP_MPI_FOUND OFF)
if(NOT GCOMP_WITH_MPI STREQUAL "OFF")
  find_package(MPI COMPONENTS C QUIET)
  if(MPI_C_FOUND)
    set(GCOMP_MPI_FOUND ON)
    message(STATUS "gcomp: MPI ${MPI_C_VERSION} (${MPI_C_LIBRARY_VERSION_STRING})")
  elseif(GCOMP_WITH_MPI STREQUAL "ON")
    message(FATAL_ERROR "GCOMP_WITH_MPI=ON but MPI was not found: "
      "apt-get install openmpi-bin libopenmpi-dev (or run scripts/setup)")
  else()
    message(STATUS "gcomp: MPI not found; the shim and MPI baselines are not built")
  endif()
endif()
