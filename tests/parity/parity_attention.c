/*
 * parity_attention.c - attention prefill (padded and packed), decode
 * (contiguous and paged) and kv_cache_append on the GPU against their CPU
 * references, through the op launchers with their default choices
 * (tk_kernel_find; tk_call zero-initialised, so a choice the caller does
 * not make is empty): every manifest workload, scaled (parity_rules.c),
 * with valid sequence offsets, lengths, block tables and slots. A workload
 * no CUDA kernel accepts (the manifest's conditions) is skipped, saying
 * so. The kernels' variants and edge cases have their own tests in
 * tests/gpu.
 */
#include "parity/parity.h"

PARITY_WORKLOAD_TESTS(attention)
