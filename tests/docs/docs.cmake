# docs/env.md must be what gcomp-info --env-md prints from the parameter registry.
add_test(NAME unit.docs.env_md
  COMMAND ${CMAKE_COMMAND} -DGEN=$<TARGET_FILE:gcomp-info> -DDOC=${PROJECT_SOURCE_DIR}/docs/env.md
          -DMODE=check -P ${PROJECT_SOURCE_DIR}/cmake/env_md.cmake)
set_tests_properties(unit.docs.env_md PROPERTIES LABELS unit TIMEOUT 60)
