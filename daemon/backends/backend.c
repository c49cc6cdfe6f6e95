/* backend.c - choosing a backend (see backend.h). */
#include "backend.h"

#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

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
		return backend_cpu_open(opt, err, errlen);
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
		return backend_cpu_open(opt, err, errlen);
	}
}

void backend_close(backend *be)
{
	if (be)
		be->ops->destroy(be);
}

void backend_mark_lost(backend *be, const char *fmt, ...)
{
	int expected = 0;
	/* 2 while the reason is written, 1 once it can be read. */
	if (!__atomic_compare_exchange_n(&be->lost, &expected, 2, 0, __ATOMIC_ACQ_REL,
	                                 __ATOMIC_RELAXED))
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(be->lost_why, sizeof(be->lost_why), fmt, ap);
	va_end(ap);
	__atomic_store_n(&be->lost, 1, __ATOMIC_RELEASE);
}

int backend_lost(backend *be, char *why, size_t len)
{
	int v = __atomic_load_n(&be->lost, __ATOMIC_ACQUIRE);
	if (v == 0)
		return 0;
	if (why && len)
		snprintf(why, len, "%s", v == 1 ? be->lost_why : "the device failed");
	return 1;
}

int backend_usable_cpus(void)
{
	cpu_set_t set;
	if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0)
		return CPU_COUNT(&set);
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	return n > 0 ? (int)n : 1;
}
