/* backend.c - choosing a backend (see backend.h). */
#include "backend.h"

#include <stdio.h>

backend *backend_open(backend_kind kind, int device, char *err, size_t errlen)
{
	switch (kind) {
	case BACKEND_CPU:
		return backend_cpu_open(err, errlen);
	case BACKEND_CUDA:
#ifdef TILEOPS_HAVE_CUDA
		return backend_cuda_open(device, err, errlen);
#else
		snprintf(err, errlen, "--backend cuda: this tileopsd was built without CUDA");
		return NULL;
#endif
	case BACKEND_AUTO:
	default:
#ifdef TILEOPS_HAVE_CUDA
		if (backend_cuda_available())
			return backend_cuda_open(device, err, errlen);
#endif
		return backend_cpu_open(err, errlen);
	}
}

void backend_close(backend *be)
{
	if (be)
		be->ops->destroy(be);
}
