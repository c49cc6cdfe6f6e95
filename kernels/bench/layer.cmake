# tileops-bench-layer-baseline: the decode layer of tileops-bench-layer run
# in-process through the L1 launchers, one by one and as a CUDA graph
# (docs/perf-layer.md). CUDA builds only. The layer itself (tensors, ops,
# contents) comes from client/bench/layer_spec.c, via tileops_bench_common,
# so both benches run the same work.
if(TILEOPS_HAVE_CUDA)
  add_executable(tileops-bench-layer-baseline ${CMAKE_CURRENT_LIST_DIR}/layer_baseline.cu)
  target_link_libraries(tileops-bench-layer-baseline PRIVATE tileops_kernels
    tileops_bench_common CUDA::cudart_static)
  target_compile_options(tileops-bench-layer-baseline PRIVATE
    "$<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall;${TILEOPS_CUDA_WERROR}>")
endif()
