# tileops-bench-gemm: our GEMM kernels against cuBLASLt on the manifest's
# gemm and bmm workloads (scripts/bench-gemm.sh runs it). CUDA builds
# only. cuBLASLt is linked here and nowhere else: the daemon never uses
# it. The library stays where the CUDA toolkit installs it (it is far too
# large to carry), hence the rpath.
if(TILEOPS_HAVE_CUDA)
  add_executable(tileops-bench-gemm ${CMAKE_CURRENT_LIST_DIR}/gemm_bench.cu
    ${CMAKE_CURRENT_LIST_DIR}/bench_cuda.c
    ${CMAKE_CURRENT_LIST_DIR}/../tune/gemm_workload.c)
  target_link_libraries(tileops-bench-gemm PRIVATE tileops_kernels tileops_manifest tileops_bench_common
    CUDA::cudart_static CUDA::cublasLt)
  target_compile_options(tileops-bench-gemm PRIVATE
    "$<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall;${TILEOPS_CUDA_WERROR}>")
  set_target_properties(tileops-bench-gemm PROPERTIES
    BUILD_RPATH "/usr/local/cuda/lib64;${CUDAToolkit_LIBRARY_DIR}")
endif()
