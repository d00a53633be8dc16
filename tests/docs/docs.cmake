# docs/env.md must be what gcomp-info --env-md prints from the parameter registry.
add_test(NAME unit.docs.env_md
  COMMAND ${CMAKE_COMMAND} -DGEN=$<TARGET_FILE:gcomp-info> -DDOC=${PROJECT_SOURCE_DIR}/docs/env.md
          -DMODE=check -P ${PROJECT_SOURCE_DIR}/cmake/env_md.cmake)
set_tests_properties(unit.docs.env_md PROPERTIES LABELS unit TIMEOUT 60)

# The documents' relative links and anchors resolve (pages are added by several hands).
find_package(Python3 COMPONENTS Interpreter)
if(Python3_Interpreter_FOUND)
  add_test(NAME unit.docs.links
    COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/md_links.py ${PROJECT_SOURCE_DIR})
  set_tests_properties(unit.docs.links PROPERTIES LABELS unit TIMEOUT 60)
endif()
