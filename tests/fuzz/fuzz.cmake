# Fuzzing. Two parts:
#  - in every tree, each fuzz target is also built with a plain main() (replay_main.c) and
#    ctest replays its seed corpus and its crash reproducers (label fuzz);
#  - with -DGCOMP_FUZZ=ON (clang, together with -DGCOMP_SANITIZE=ON, in a tree of its
#    own), the library is instrumented for coverage and the libFuzzer executables
#    fuzz_<target> are built (target gcomp-fuzz). scripts/fuzz runs one; scripts/test runs
#    each for a short bounded time.
set(GCOMP_FUZZ_SRC ${CMAKE_CURRENT_LIST_DIR})
set(GCOMP_FUZZ_TARGETS frame decode spec residuals parts cards shm_parts header)

add_executable(fuzz_gen_seeds ${GCOMP_FUZZ_SRC}/gen_seeds.c)
target_link_libraries(fuzz_gen_seeds PRIVATE gcomp_internal m)

foreach(t IN LISTS GCOMP_FUZZ_TARGETS)
  add_executable(fuzz_replay_${t} ${GCOMP_FUZZ_SRC}/fuzz_${t}.c ${GCOMP_FUZZ_SRC}/replay_main.c)
  target_link_libraries(fuzz_replay_${t} PRIVATE gcomp_internal)
  add_test(NAME fuzz.replay.${t}
    COMMAND fuzz_replay_${t} ${GCOMP_FUZZ_SRC}/corpus/${t} ${GCOMP_FUZZ_SRC}/regressions/${t})
  set_tests_properties(fuzz.replay.${t} PROPERTIES LABELS fuzz TIMEOUT 120)
endforeach()

if(GCOMP_FUZZ)
  if(NOT CMAKE_C_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "GCOMP_FUZZ=ON needs clang (libFuzzer): configure a separate tree with "
      "CC=clang, e.g. scripts/fuzz")
  endif()
  if(NOT GCOMP_SANITIZE)
    message(FATAL_ERROR "GCOMP_FUZZ=ON needs -DGCOMP_SANITIZE=ON: fuzzing without ASan+UBSan "
      "finds only crashes, not the out-of-bounds reads it is for")
  endif()
  # coverage instrumentation for the code under test (the sanitizers come from GCOMP_SANITIZE)
  foreach(layer gcomp_common gcomp_codecs gcomp_fabric gcomp_reduce)
    if(TARGET ${layer})
      target_compile_options(${layer} PRIVATE -fsanitize=fuzzer-no-link)
    endif()
  endforeach()
  add_custom_target(gcomp-fuzz)
  foreach(t IN LISTS GCOMP_FUZZ_TARGETS)
    add_executable(fuzz_${t} ${GCOMP_FUZZ_SRC}/fuzz_${t}.c)
    target_link_libraries(fuzz_${t} PRIVATE gcomp_internal)
    target_compile_options(fuzz_${t} PRIVATE -fsanitize=fuzzer)
    target_link_options(fuzz_${t} PRIVATE -fsanitize=fuzzer)
    add_dependencies(gcomp-fuzz fuzz_${t})
  endforeach()
endif()
