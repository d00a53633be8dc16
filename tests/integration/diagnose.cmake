# Diagnosis (gcomp-stats --json findings) from real multi-process runs of a training loop
# with each failure mode made on purpose, and a clean run that must report none.
add_executable(diagnose_job ${CMAKE_CURRENT_LIST_DIR}/diagnose_job.c)
target_link_libraries(diagnose_job PRIVATE gcomp m)
add_test(NAME integration.diagnose
  COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/diagnose.sh $<TARGET_FILE:gcomp-run>
          $<TARGET_FILE:diagnose_job> $<TARGET_FILE:gcomp-stats>)
# RUN_SERIAL: its jobs are built to be slow on purpose (a 1.5x rank, a 100 Mbit/s node) and
# the findings are judged from their timings; a second test on the same two cores at once
# hid them twice under ASan (a 1.5x compute ratio measured under 1.4; no slow link)
set_tests_properties(integration.diagnose PROPERTIES LABELS integration TIMEOUT 180 RUN_SERIAL TRUE)
# gcomp-stats' rules on made-up files (no processes): the cases real runs rarely line up
add_test(NAME integration.diagnose.rules
  COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/stats_rules.sh $<TARGET_FILE:gcomp-stats>)
set_tests_properties(integration.diagnose.rules PROPERTIES LABELS integration TIMEOUT 60)
