# The exhaustive fp16/bf16 encoder sweep over all 2^32 fp32 patterns, sharded so ctest -j
# spreads it over the cores. Label `long`; release trees only (ASan would make it minutes).
if(NOT GCOMP_SANITIZE)
  add_executable(cast_exhaustive ${CMAKE_CURRENT_SOURCE_DIR}/long/cast_exhaustive.c)
  target_include_directories(cast_exhaustive PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/unit)
  target_link_libraries(cast_exhaustive PRIVATE gcomp_internal m)
  set(GCOMP_CAST_SHARDS 8)
  math(EXPR last "${GCOMP_CAST_SHARDS} - 1")
  foreach(fmt fp16 bf16)
    foreach(shard RANGE ${last})
      add_test(NAME long.cast_exhaustive.${fmt}.${shard}
               COMMAND cast_exhaustive ${fmt} ${shard} ${GCOMP_CAST_SHARDS})
      set_tests_properties(long.cast_exhaustive.${fmt}.${shard} PROPERTIES LABELS long TIMEOUT 600)
    endforeach()
  endforeach()
endif()
