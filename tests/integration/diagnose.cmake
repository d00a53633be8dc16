# Diagnosis (gcomp-stats --json findings) from real multi-process runs of a training loop
# with each failure mode made on purpose, and a clean run that must report none.
add_executable(diagnose_job ${CMAKE_CURRENT_LIST_DIR}/diagnose_job.c)
target_link_libraries(diagnose_job PRIVATE gcomp m)
add_test(NAME integration.diagnose
  COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/diagnose.sh $<TARGET_FILE:gcomp-run>
          $<TARGET_FILE:diagnose_job> $<TARGET_FILE:gcomp-stats>)
set_tests_properties(integration.diagnose PROPERTIES LABELS integration TIMEOUT 180)
# gcomp-stats' rules on made-up files (no processes): the cases real runs rarely line up
add_test(NAME integration.diagnose.rules
  COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/stats_rules.sh $<TARGET_FILE:gcomp-stats>)
set_tests_properties(integration.diagnose.rules PROPERTIES LABELS integration TIMEOUT 60)
