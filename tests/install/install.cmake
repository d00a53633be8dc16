if(NOT GCOMP_SANITIZE)   # a sanitized library cannot be linked by a plain consumer
  add_test(NAME install.consumer
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/install/check-install.sh ${PROJECT_BINARY_DIR} ${PROJECT_SOURCE_DIR})
  set_tests_properties(install.consumer PROPERTIES LABELS install TIMEOUT 300)
endif()

add_test(NAME install.exports
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/install/check-exports.sh $<TARGET_FILE:gcomp>
    ${PROJECT_SOURCE_DIR}/include/gcomp.h)
set_tests_properties(install.exports PROPERTIES LABELS "install;unit" TIMEOUT 60)
