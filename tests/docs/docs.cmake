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

# docs/sim/transition.svg is what scripts/sim_plot.py draws from the gcomp-sim JSON committed
# beside it (docs/simulation.md): the plot and its data cannot drift apart.
if(Python3_Interpreter_FOUND)
  add_test(NAME unit.docs.sim_plot
    COMMAND bash -c "\"$0\" \"$1/scripts/sim_plot.py\" sim_plot.svg ring=$1/docs/sim/ring.jsonl hier=$1/docs/sim/hier.jsonl \"hier-direct, 4-bit=$1/docs/sim/codec.jsonl\" && cmp sim_plot.svg \"$1/docs/sim/transition.svg\""
            ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR})
  set_tests_properties(unit.docs.sim_plot PROPERTIES LABELS unit TIMEOUT 60)
endif()
