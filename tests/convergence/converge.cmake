# The convergence tier (label convergence): the harness's own unit test, and the CI-sized
# check -- every shipped codec on digits and a synthetic task, plus the codecs that must be
# flagged -- through gcomp-converge exactly as a user runs it.
if(TARGET test_converge)
  target_link_libraries(test_converge PRIVATE gcomp_converge)
endif()
if(TARGET test_locale)   # the harness under a decimal-comma locale too
  target_link_libraries(test_locale PRIVATE gcomp_converge)
  target_compile_definitions(test_locale PRIVATE GCOMP_TEST_CONVERGE=1)
endif()
if(TARGET test_converge)
  set_tests_properties(unit.test_converge PROPERTIES LABELS "unit;convergence")
endif()
if(TARGET test_cv_log)   # logged curves: the harness's verdicts, and malformed logs
  target_link_libraries(test_cv_log PRIVATE gcomp_converge)
  set_tests_properties(unit.test_cv_log PROPERTIES LABELS "unit;convergence")
endif()
if(TARGET test_cv_threads)   # worker threads that cannot start: pthread_create made to fail
  target_link_libraries(test_cv_threads PRIVATE gcomp_converge)
  target_link_options(test_cv_threads PRIVATE -Wl,--wrap=pthread_create)
  set_tests_properties(unit.test_cv_threads PROPERTIES LABELS "unit;convergence")
endif()
if(GCOMP_SANITIZE)
  # the sanitizer tree stays fast: a short smoke run of the same command. 200 steps, not
  # fewer: quant:bits=1 (a must-fail) sends each value as its bucket's minimum or maximum,
  # steps about four times too long, which on the convex gmm/softmax speeds the first tens
  # of steps (at 40 its loss was 9-12% below the baseline's, the accuracy drop within
  # chance: missed) and hurts from about 100 on (at 200, loss 27-45% above, seeds 1-3)
  add_test(NAME convergence.ci COMMAND gcomp-converge --ci --quiet --no-progress --steps 200
           --eval-every 20 --synth-n 2000 --task gmm --model softmax,mlp
           --codec none --codec none+ef --codec bf16)
else()
  add_test(NAME convergence.ci COMMAND gcomp-converge --ci --no-progress
           --junit ${CMAKE_BINARY_DIR}/convergence-ci.xml --json ${CMAKE_BINARY_DIR}/convergence-ci.json
           --plot ${CMAKE_BINARY_DIR}/convergence-ci.svg)
endif()
set_tests_properties(convergence.ci PROPERTIES LABELS convergence TIMEOUT 600)

# --real: W processes under gcomp-run match the simulated W threads bitwise.
if(NOT GCOMP_SANITIZE)
  add_test(NAME convergence.real_vs_sim
           COMMAND ${CMAKE_CURRENT_LIST_DIR}/real_vs_sim.sh $<TARGET_FILE:gcomp-run>
                   $<TARGET_FILE:gcomp-converge> ${CMAKE_BINARY_DIR}/convergence-real)
  set_tests_properties(convergence.real_vs_sim PROPERTIES LABELS "convergence;integration"
                       TIMEOUT 300)
endif()

# Small held-out sets (digits cut to 300 rows, a 400-row teacher task): the must-fail codecs
# stay flagged on each, the paired test passes a drop of a row or two and says so, and the
# small-tensor report says what a deployed job gets. About 15 s of CPU.
if(NOT GCOMP_SANITIZE)
  add_test(NAME convergence.small COMMAND ${CMAKE_CURRENT_LIST_DIR}/converge_small.sh
           $<TARGET_FILE:gcomp-converge> ${CMAKE_BINARY_DIR}/convergence-small)
  set_tests_properties(convergence.small PROPERTIES LABELS convergence TIMEOUT 300)
endif()

# The command line as CI uses it: exit statuses, messages, tolerance files, reports; in the
# sanitizer tree too, where its error paths and the noise floor's run under ASan+UBSan and
# LeakSanitizer, less its two longest runs (about 60 s there on a quiet machine).
if(GCOMP_SANITIZE)
  set(GCOMP_CV_CLI_MODE sanitize)
else()
  set(GCOMP_CV_CLI_MODE full)
endif()
add_test(NAME convergence.cli COMMAND ${CMAKE_CURRENT_LIST_DIR}/converge_cli.sh
         $<TARGET_FILE:gcomp-converge> ${CMAKE_BINARY_DIR}/convergence-cli ${GCOMP_CV_CLI_MODE})
set_tests_properties(convergence.cli PROPERTIES LABELS convergence TIMEOUT 300)

# gcomp-converge run and compare on a stand-in training program (a shell script logging
# curves): exit statuses, reports, run's and compare's verdicts alike, and every bad input
# an error naming what is wrong; a second or two, in the sanitizer tree too.
add_test(NAME convergence.run_cli COMMAND ${CMAKE_CURRENT_LIST_DIR}/converge_run_cli.sh
         $<TARGET_FILE:gcomp-converge> ${CMAKE_BINARY_DIR}/convergence-run-cli)
set_tests_properties(convergence.run_cli PROPERTIES LABELS convergence TIMEOUT 120)
