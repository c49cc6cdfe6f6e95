# tileops-bench-dispatch-baseline: in-process CUDA dispatch figures (launch
# loop, launch + synchronize, a 12-node graph, many processes or streams of
# spin kernels) that client/bench/bench_dispatch.c is compared with. CUDA
# builds only. Included from the kernels' CMake files; it uses the L1
# kernels (the daemon's add), kernels/cuda/spin.cuh, and the report and
# process barrier of client/bench/bench_common.c (tileops_bench_common).
if(TILEOPS_HAVE_CUDA)
  add_executable(tileops-bench-dispatch-baseline ${CMAKE_CURRENT_LIST_DIR}/dispatch_baseline.cu)
  target_link_libraries(tileops-bench-dispatch-baseline PRIVATE tileops_kernels
    tileops_bench_common CUDA::cudart_static Threads::Threads)
  target_compile_options(tileops-bench-dispatch-baseline PRIVATE
    "$<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall;${TILEOPS_CUDA_WERROR}>")
endif()
