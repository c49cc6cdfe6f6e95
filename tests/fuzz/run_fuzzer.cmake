# run_fuzzer.cmake: replay the regressions, then fuzz for SECONDS from the
# seeds (ctest's fuzz_<name>, see CMakeLists.txt). Fails on any crash, leak,
# sanitizer report or timeout; libFuzzer leaves the input as crash-* in
# CORPUS/../NAME-crash-* for a new regression.
file(MAKE_DIRECTORY ${CORPUS})
if(NOT EXISTS ${SEEDS}/control)
  execute_process(COMMAND ${SEEDER} ${SEEDS} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "fuzz_seeds failed (${rc})")
  endif()
endif()
if(EXISTS ${REGRESSIONS})
  file(GLOB inputs ${REGRESSIONS}/*)
  if(inputs)
    execute_process(COMMAND ${FUZZER} ${inputs} RESULT_VARIABLE rc)
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR "a regression input crashes ${FUZZER} again")
    endif()
  endif()
endif()
get_filename_component(artifacts ${CORPUS} DIRECTORY)
get_filename_component(name ${CORPUS} NAME)
set(artifacts ${artifacts}/${name}-)
execute_process(COMMAND ${FUZZER} -max_total_time=${SECONDS} -timeout=10 -rss_limit_mb=2048
  -max_len=4096 -print_final_stats=1 -artifact_prefix=${artifacts} ${CORPUS} ${SEED_DIR}
  RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${FUZZER} found a failure (exit ${rc}); the input is ${artifacts}crash-* (add it to regressions/${name}/ once fixed)")
endif()
