/*
 * cuda_nccl.h - the CUDA backend's collectives (backend_coll, backend.h)
 * through NCCL.
 *
 * NCCL is loaded with dlopen("libnccl.so.2") when the first collective
 * runs, not linked: the library is large and not on every host, and a
 * daemon that never runs a collective never needs it. A host without it
 * serves everything else; its collectives fail with
 * TILEOPS_ERR_UNSUPPORTED, naming the library and what dlopen said.
 *
 * Communicators: one set per ordered list of devices (rank r on the list's
 * r-th device), made with ncclCommInitAll on the first collective over
 * that list and kept until cuda_nccl_close. NCCL allows a communicator to
 * be used by one thread at a time, so calls are serialized by a mutex of
 * the state's own; any executor thread may call.
 */
#ifndef TILEOPSD_CUDA_NCCL_H
#define TILEOPSD_CUDA_NCCL_H

#include <cuda_runtime_api.h>
#include <stddef.h>

#include "backend.h"

typedef struct cuda_nccl cuda_nccl;

/* A state with nothing loaded yet (no CUDA or NCCL call); NULL when out
 * of memory. */
cuda_nccl *cuda_nccl_new(void);

/* Destroy every communicator made (NCCL finishes their work first) and
 * free the state. The library stays loaded: NCCL keeps state of its own
 * for the life of the process. NULL is a no-op. No call may be running. */
void cuda_nccl_close(cuda_nccl *nc);

/*
 * Queue collective c: rank r on CUDA device ordinals[r] (each once), on
 * streams[r], a stream of that device; c's streams are not read. Returns
 * before it has run, like a launch. On failure nothing is queued, or
 * (when NCCL fails part way through) the ranks' streams hold what NCCL
 * queued before it failed:
 * - TILEOPS_ERR_UNSUPPORTED: NCCL cannot be loaded, or is too old for c's
 *   dtype;
 * - TILEOPS_ERR_DTYPE: a dtype other than f32, f16 or bf16;
 * - TILEOPS_ERR_INVALID_ARGUMENT: an unknown kind or reduction, a rank
 *   without a buffer;
 * - TILEOPS_ERR_OUT_OF_MEMORY: no host memory to keep new communicators;
 * - TILEOPS_ERR_BACKEND: NCCL failed (its message is in err).
 * The calling thread's current CUDA device is changed.
 */
tileops_status cuda_nccl_run(cuda_nccl *nc, const backend_coll *c, const int *ordinals,
                             const cudaStream_t *streams, char *err, size_t errlen);

#endif
