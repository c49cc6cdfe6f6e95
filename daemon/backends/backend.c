/* backend.c - choosing a backend (see backend.h). */
#include "backend.h"

#include <stdio.h>

#include <stdlib.h>

/*
 * The driver reads CUDA_DEVICE_MAX_CONNECTIONS when it makes the context:
 * set it before the first CUDA call, unless the operator already did.
 */
static void ask_for_queues(const backend_options *opt)
{
	char v[16];
	if (opt->queues <= 0)
		return;
	snprintf(v, sizeof(v), "%d", opt->queues);
	setenv("CUDA_DEVICE_MAX_CONNECTIONS", v, 0);
}

backend *backend_open(backend_kind kind, const backend_options *opt, char *err, size_t errlen)
{
	if (kind != BACKEND_CPU)
		ask_for_queues(opt);
	switch (kind) {
	case BACKEND_CPU:
		return backend_cpu_open(err, errlen);
	case BACKEND_CUDA:
#ifdef TILEOPS_HAVE_CUDA
		return backend_cuda_open(opt, err, errlen);
#else
		snprintf(err, errlen, "--backend cuda: this tileopsd was built without CUDA");
		return NULL;
#endif
	case BACKEND_AUTO:
	default:
#ifdef TILEOPS_HAVE_CUDA
		if (backend_cuda_available())
			return backend_cuda_open(opt, err, errlen);
#endif
		return backend_cpu_open(err, errlen);
	}
}

void backend_close(backend *be)
{
	if (be)
		be->ops->destroy(be);
}
