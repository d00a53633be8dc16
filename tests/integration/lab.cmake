# gcomp-lab's kernel suites run and its options refuse malformed numbers (tests/integration/lab.sh)
add_test(NAME integration.lab COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/lab.sh $<TARGET_FILE:gcomp-lab>)
set_tests_properties(integration.lab PROPERTIES LABELS integration TIMEOUT 120)
