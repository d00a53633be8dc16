# gcomp-plan's command line: the cost model on paper (no processes, no fabric).
add_test(NAME integration.plan.cli
  COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/plan_cli.sh $<TARGET_FILE:gcomp-plan>)
# (a timeout for hangs only: its ~45 runs took 13 s alone under ASan, 61 s under CI load)
set_tests_properties(integration.plan.cli PROPERTIES LABELS integration TIMEOUT 240)
