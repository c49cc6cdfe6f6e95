# tileops-bench-prefill: the CUDA attention_prefill kernels timed on the
# manifest's workloads and the performance-target shapes (kernels/bench/
# attention_torch.py times PyTorch on the same shapes; scripts/
# bench-prefill.sh runs both). CUDA builds only.
if(TILEOPS_HAVE_CUDA)
  add_executable(tileops-bench-prefill ${CMAKE_CURRENT_LIST_DIR}/prefill_bench.cu)
  target_link_libraries(tileops-bench-prefill PRIVATE tileops_kernels tileops_bench_common
    CUDA::cudart_static)
  target_compile_options(tileops-bench-prefill PRIVATE
    "$<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall;${TILEOPS_CUDA_WERROR}>")
endif()
