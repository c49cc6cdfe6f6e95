# tileops-bench-decode: the attention decode kernels (contiguous and paged
# KV caches) and kv_cache_append timed through their L1 launchers, against
# the copy bandwidth measured in the same run (scripts/bench-decode.sh runs
# it on the GPU machine). CUDA builds only.
if(TILEOPS_HAVE_CUDA)
  add_executable(tileops-bench-decode ${CMAKE_CURRENT_LIST_DIR}/decode_bench.cu
    ${CMAKE_CURRENT_LIST_DIR}/bench_cuda.c)
  target_link_libraries(tileops-bench-decode PRIVATE tileops_kernels tileops_bench_common
    CUDA::cudart_static)
  target_compile_options(tileops-bench-decode PRIVATE
    "$<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall;${TILEOPS_CUDA_WERROR}>")
endif()
