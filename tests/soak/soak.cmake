# The short soak (label soak): gcomp-soak over every config of scripts/soak, 30 random
# calls each (at most 64 MiB of payload per config, 16 MiB per call), every element of
# every result checked on every rank. Release trees only: under the sanitizers the same
# calls take many times longer (scripts/test runs this tree's ctest, which includes it).
# The long soak is `scripts/soak` (10,000 calls: too long for CI, run before a release).
if(NOT GCOMP_SANITIZE)
  set(GCOMP_SOAK_SCRIPT ${PROJECT_SOURCE_DIR}/scripts/soak)
  execute_process(COMMAND bash ${GCOMP_SOAK_SCRIPT} --list OUTPUT_VARIABLE GCOMP_SOAK_CONFIGS
                  OUTPUT_STRIP_TRAILING_WHITESPACE)
  string(REPLACE "\n" ";" GCOMP_SOAK_CONFIGS "${GCOMP_SOAK_CONFIGS}")
  foreach(cfg IN LISTS GCOMP_SOAK_CONFIGS)
    add_test(NAME soak.${cfg} COMMAND bash ${GCOMP_SOAK_SCRIPT} 30 --only ${cfg}
      --build ${CMAKE_BINARY_DIR} --bytes-per-config 64m --max-bytes 16m)
    set_tests_properties(soak.${cfg} PROPERTIES LABELS soak TIMEOUT 300)
  endforeach()
  # the checks themselves: a result damaged after the call must be reported, naming the
  # seed and the call to replay: seed 5's call 10 is a float16 MIN (checked bitwise), its
  # call 11 a float64 AVG (within 2^-51 relative), seed 24's call 4 a float32 SUM
  # with quant:bits=8 (within the quantisation bound)
  foreach(case 5:10 5:11 24:4)
    string(REPLACE ":" ";" sk ${case})
    list(GET sk 0 s)
    list(GET sk 1 k)
    add_test(NAME soak.catches-a-wrong-element-${s}-${k} COMMAND $<TARGET_FILE:gcomp-run> -n 3 --
      $<TARGET_FILE:gcomp-soak> --seed ${s} --calls 12 --max-bytes 1m --corrupt ${k} --blocking)
    set_tests_properties(soak.catches-a-wrong-element-${s}-${k} PROPERTIES LABELS soak TIMEOUT 120
      PASS_REGULAR_EXPRESSION "rank 2: WRONG seed=${s} call=${k} .*replay: gcomp-soak --seed ${s} --from ${k}")
  endforeach()
endif()
