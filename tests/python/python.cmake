# The Python package and the DDP hook (label python). The interpreter is the first of
# /usr/bin/python3 (Debian's, where python3-torch lives) and the python3 on PATH that can
# import torch: a python3 first on PATH (pyenv, a venv) often has no torch. scripts/setup
# installs python3-torch; without it the tests are still registered and fail saying so.
if(GCOMP_SANITIZE)
  return()   # an ASan-built libgcomp cannot be loaded into an uninstrumented interpreter
endif()
if(NOT GCOMP_TORCH_PYTHON)
  find_program(GCOMP_PY_PATH python3)
  foreach(py /usr/bin/python3 ${GCOMP_PY_PATH})
    if(EXISTS ${py})
      execute_process(COMMAND ${py} -c "import torch.distributed" RESULT_VARIABLE rc
        OUTPUT_QUIET ERROR_QUIET)
      if(rc EQUAL 0)
        set(GCOMP_TORCH_PYTHON ${py} CACHE FILEPATH "Python interpreter that can import torch")
        break()
      endif()
    endif()
  endforeach()
endif()
set(py_dir ${CMAKE_CURRENT_LIST_DIR})
set(py_run $<TARGET_FILE:gcomp-run>)
if(GCOMP_TORCH_PYTHON)
  set(py ${GCOMP_TORCH_PYTHON})
else()
  set(py ${py_dir}/no_torch.sh)
  message(STATUS "gcomp: no python3 with torch found; the python tests will fail (scripts/setup)")
endif()
# PYTHONPATH: the build tree's copy of the package (its _paths.py names this build's library)
set(py_env "PYTHONPATH=${PROJECT_BINARY_DIR}/python" "GCOMP_ALPHA_BETA=1,10,50,0.1")

add_test(NAME python.package COMMAND ${py_run} -n 2 -- ${py} ${py_dir}/package_check.py)
# two ranks on two emulated nodes (own network namespaces as root): the hook against DDP
add_test(NAME python.ddp COMMAND ${py_run} -n 2 --nodes 2 -- ${py} ${py_dir}/ddp_check.py)
add_test(NAME python.fail_kill COMMAND bash ${py_dir}/fail_check.sh ${py_run} ${py} kill)
add_test(NAME python.fail_stall COMMAND bash ${py_dir}/fail_check.sh ${py_run} ${py} stall)
add_test(NAME python.resume COMMAND bash ${py_dir}/resume_check.sh ${py_run} ${py})
# the torch.distributed backend "gcomp": every call against a reference (3 ranks: a
# sub-group too; 2 emulated nodes), training against gloo, a killed rank
add_test(NAME python.backend COMMAND ${py_run} -n 3 --nodes 2 -- ${py} ${py_dir}/backend_check.py)
add_test(NAME python.backend_train
  COMMAND ${py_run} -n 2 --nodes 2 -- ${py} ${py_dir}/backend_train.py)
add_test(NAME python.backend_fail_kill COMMAND bash ${py_dir}/fail_check.sh ${py_run} ${py} kill)
# a killed rank: the others' pending Work raises from wait() with gcomp's error
add_test(NAME python.backend_kill_wait COMMAND ${py_run} -n 2 --nodes 2 --grace 8000 --
         ${py} ${py_dir}/backend_kill_check.py)
set_tests_properties(python.backend_kill_wait PROPERTIES
  PASS_REGULAR_EXPRESSION "rank 0: pending Work raised" FAIL_REGULAR_EXPRESSION "FAIL")
# env://, tcp:// and file:// in turn in the same two processes
add_test(NAME python.backend_init COMMAND ${py_run} -n 2 -- ${py} ${py_dir}/init_check.py
         ${CMAKE_BINARY_DIR})
# ranks from mpirun: gcomp.backend.mpi_env() and env://, MASTER_PORT given by the user
add_test(NAME python.backend_mpirun COMMAND bash ${py_dir}/mpi_check.sh ${py})
set_tests_properties(python.package python.ddp python.fail_kill python.fail_stall python.resume
  python.backend python.backend_train python.backend_fail_kill python.backend_kill_wait
  python.backend_init python.backend_mpirun PROPERTIES LABELS python TIMEOUT 300 ENVIRONMENT "${py_env}")
set_property(TEST python.backend_fail_kill APPEND PROPERTY ENVIRONMENT FAIL_CHECK_BACKEND=gcomp)
set_property(TEST python.backend_kill_wait APPEND PROPERTY ENVIRONMENT GCOMP_TIMEOUT_MS=3000)
set_property(TEST python.ddp APPEND PROPERTY ENVIRONMENT
  "DDP_CHECK_DIGITS=${PROJECT_SOURCE_DIR}/convergence/data/digits.csv.gz")
# the namespaces and gloo's ports of these jobs must not meet other jobs' mid-run
set_tests_properties(python.ddp python.fail_kill python.fail_stall python.resume python.backend
  python.backend_train python.backend_fail_kill python.backend_kill_wait PROPERTIES RUN_SERIAL ON)

# gcomp.metrics (no torch needed, no launcher)
add_test(NAME python.metrics COMMAND ${py} ${py_dir}/metrics_check.py)
set_tests_properties(python.metrics PROPERTIES LABELS "python;convergence" TIMEOUT 60
  ENVIRONMENT "${py_env}")

# gcomp-converge run on a real PyTorch model (examples/ddp_train.py: the digits MLP, 2 ranks
# on 2 emulated nodes): bf16 and topk:ratio=0.01+ef pass, topk:ratio=0.001 is flagged.
# Four training runs of the command; about 30 s of CPU.
add_test(NAME python.converge_ddp COMMAND bash ${py_dir}/converge_ddp.sh
         $<TARGET_FILE:gcomp-converge> ${py_run} ${py} ${PROJECT_SOURCE_DIR}/examples/ddp_train.py
         ${PROJECT_SOURCE_DIR}/convergence/data/digits.csv.gz ${CMAKE_BINARY_DIR}/converge-ddp)
set_tests_properties(python.converge_ddp PROPERTIES LABELS "python;convergence" TIMEOUT 600
  ENVIRONMENT "${py_env}" RUN_SERIAL ON)

# examples/zero_train.py (ZeRO-2 on the gcomp backend, 4 ranks on 2 emulated nodes) with
# 4-bit gradients across the nodes trains within the tolerances of its fp32 run
add_test(NAME python.converge_zero COMMAND bash ${py_dir}/converge_zero.sh
         $<TARGET_FILE:gcomp-converge> ${py_run} ${py} ${PROJECT_SOURCE_DIR}/examples/zero_train.py
         ${PROJECT_SOURCE_DIR}/convergence/data/digits.csv.gz ${CMAKE_BINARY_DIR}/converge-zero)
set_tests_properties(python.converge_zero PROPERTIES LABELS "python;convergence" TIMEOUT 600
  ENVIRONMENT "${py_env}" RUN_SERIAL ON)
