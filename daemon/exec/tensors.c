/*
 * tensors.c - a session's tensors on the device (see tensors.h).
 */
#include "tensors.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "completion.h"
#include "opcache.h"

/* The largest tensor a session may make. */
#define MAX_TENSOR_BYTES (1ull << 46)

/* Check dtype and shape; fill the view and the byte count. */
static tileops_status tensor_describe(int dtype, size_t ndim, const int64_t *shape, tensor *t,
                                      char *err, size_t errlen)
{
	if (dtype <= 0 || dtype >= TK_DTYPE_COUNT) {
		snprintf(err, errlen, "unknown dtype %d", dtype);
		return TILEOPS_ERR_DTYPE;
	}
	if (ndim > TK_MAX_DIMS) {
		snprintf(err, errlen, "rank %zu is over the limit of %d dimensions", ndim,
		         TK_MAX_DIMS);
		return TILEOPS_ERR_SHAPE;
	}
	/* The product of the non-zero extents bounds every stride as well as the
	 * bytes: a tensor with a zero extent holds nothing, but its strides are
	 * still products of the others. */
	uint64_t n = 1, nonzero = 1;
	size_t es = tk_dtype_size((tk_dtype)dtype);
	for (size_t i = 0; i < ndim; i++) {
		if (shape[i] < 0) {
			snprintf(err, errlen, "dimension %zu has extent %lld; extents must be >= 0",
			         i, (long long)shape[i]);
			return TILEOPS_ERR_SHAPE;
		}
		if (shape[i] && nonzero > MAX_TENSOR_BYTES / es / (uint64_t)shape[i]) {
			snprintf(err, errlen,
			         "shape is too large (its non-zero extents multiply to over 2^46 "
			         "bytes)");
			return TILEOPS_ERR_SHAPE;
		}
		if (shape[i])
			nonzero *= (uint64_t)shape[i];
		n *= (uint64_t)shape[i];
	}
	memset(&t->view, 0, sizeof(t->view));
	t->view.dtype = (tk_dtype)dtype;
	t->view.ndim = (int)ndim;
	for (size_t i = 0; i < ndim; i++)
		t->view.shape[i] = shape[i];
	tk_set_contiguous(&t->view);
	t->nbytes = (size_t)(n * es);
	return TILEOPS_OK;
}

void tensors_make(executor *ex, session *s, job *j, const tensor_spec *spec,
                  const unsigned char *ipc)
{
	tensor *t = calloc(1, sizeof(*t));
	if (!t) {
		j->status = TILEOPS_ERR_OUT_OF_MEMORY;
		snprintf(j->msg, sizeof(j->msg), "out of host memory");
		return;
	}
	char err[256];
	tileops_status st =
	        tensor_describe(spec->dtype, (size_t)spec->ndim, spec->shape, t, err, sizeof(err));
	size_t limit = __atomic_load_n(ex->cfg.memory_limit, __ATOMIC_RELAXED);
	if (st == TILEOPS_OK && !ipc && limit && s->bytes + t->nbytes > limit) {
		snprintf(err, sizeof(err),
		         "session memory quota exceeded: %zu bytes held + %zu requested > %zu "
		         "(session_memory_limit)",
		         s->bytes, t->nbytes, limit);
		st = TILEOPS_ERR_QUOTA;
	}
	void *ptr = NULL;
	if (st == TILEOPS_OK)
		st = ipc ? ex->be->ops->ipc_import(ex->be, ipc, &ptr, err, sizeof(err))
		         : ex->be->ops->alloc(ex->be, t->nbytes, &ptr, err, sizeof(err));
	if (st != TILEOPS_OK) {
		free(t);
		j->status = st;
		snprintf(j->msg, sizeof(j->msg), "tensor: %s", err);
		return;
	}
	t->view.data = ptr;
	t->imported = ipc != NULL;
	t->handle = exec_next_handle(ex);
	if (session_tensor_insert(s, t) != 0) {
		if (t->imported)
			ex->be->ops->ipc_close(ex->be, ptr);
		else
			ex->be->ops->free(ex->be, s->stream, ptr);
		free(t);
		j->status = TILEOPS_ERR_OUT_OF_MEMORY;
		snprintf(j->msg, sizeof(j->msg), "out of host memory");
		return;
	}
	j->handle = t->handle;
	j->nbytes = t->nbytes;
}

void tensors_make_warm(executor *ex, session *s, job *j, const warm_tensor *t)
{
	tensor_spec spec = { .dtype = (int)t->dtype, .ndim = t->ndim };
	memcpy(spec.shape, t->shape, sizeof(int64_t) * (size_t)t->ndim);
	tensors_make(ex, s, j, &spec, NULL);
	if (j->status != TILEOPS_OK) {
		char msg[sizeof(j->msg)];
		snprintf(msg, sizeof(msg), "%s", j->msg);
		snprintf(j->msg, sizeof(j->msg), "tensor '%.40s': %.400s", t->name, msg);
	}
}

static tensor *tensor_find(session *s, job *j, uint64_t handle, const char *what)
{
	tensor *t = session_tensor_find(s, handle);
	if (!t) {
		j->status = TILEOPS_ERR_UNKNOWN_HANDLE;
		snprintf(j->msg, sizeof(j->msg),
		         "%s: tensor handle %llu is not a tensor of this session (never created "
		         "here, or already freed)",
		         what, (unsigned long long)handle);
	}
	return t;
}

static void tensor_release(executor *ex, session *s, tensor *t)
{
	opcache_forget(s, t->handle);
	if (t->imported)
		ex->be->ops->ipc_close(ex->be, t->view.data);
	else
		ex->be->ops->free(ex->be, s->stream, t->view.data);
	free(t);
}

void tensors_free(executor *ex, session *s, job *j, uint64_t handle)
{
	if (!tensor_find(s, j, handle, "tensor_free"))
		return;
	tensor_release(ex, s, session_tensor_remove(s, handle));
}

int tensors_copy(worker *w, session *s, job *j, int write, uint64_t handle, uint64_t toff,
                 uint64_t aoff, uint64_t len)
{
	executor *ex = w->ex;
	const char *what = write ? "tensor_write" : "tensor_read";
	tensor *t = tensor_find(s, j, handle, what);
	if (!t)
		return 0;
	if (toff > t->nbytes || len > t->nbytes - toff) {
		j->status = TILEOPS_ERR_RANGE;
		snprintf(j->msg, sizeof(j->msg),
		         "%s: tensor bytes [%llu, %llu + %llu) are outside the tensor's %zu bytes",
		         what, (unsigned long long)toff, (unsigned long long)toff,
		         (unsigned long long)len, t->nbytes);
		return 0;
	}
	if (!arena_range_ok(&s->arena, aoff, len) || !ring_data_range_ok(&s->ring, aoff, len)) {
		j->status = TILEOPS_ERR_RANGE;
		snprintf(j->msg, sizeof(j->msg),
		         "%s: arena bytes [%llu, %llu + %llu) are outside the arena's data area "
		         "[%llu, %zu)",
		         what, (unsigned long long)aoff, (unsigned long long)aoff,
		         (unsigned long long)len,
		         (unsigned long long)(s->ring.enabled ? s->ring.data_off : 0),
		         s->arena.size);
		return 0;
	}
	if (len == 0)
		return 0;
	char *dev = (char *)t->view.data + toff;
	j->status = write ? ex->be->ops->write(ex->be, s->stream, dev, &s->arena, (size_t)aoff,
	                                       (size_t)len, j->msg, sizeof(j->msg))
	                  : ex->be->ops->read(ex->be, s->stream, dev, &s->arena, (size_t)aoff,
	                                      (size_t)len, j->msg, sizeof(j->msg));
	if (j->status != TILEOPS_OK)
		return 0;
	completion_defer(w, s, j, 0);
	return 1;
}

void tensors_export(executor *ex, session *s, job *j, uint64_t handle)
{
	tensor *t = tensor_find(s, j, handle, "tensor_export");
	if (!t)
		return;
	if (t->imported) {
		j->status = TILEOPS_ERR_UNSUPPORTED;
		snprintf(j->msg, sizeof(j->msg),
		         "tensor_export: an imported tensor belongs to its exporter; export it "
		         "from there");
		return;
	}
	j->status = ex->be->ops->ipc_export(ex->be, t->view.data, j->ipc, j->msg, sizeof(j->msg));
}

void tensors_free_all(executor *ex, session *s)
{
	for (size_t b = 0; b < s->n_buckets; b++) {
		while (s->buckets[b]) {
			tensor *t = session_tensor_remove(s, s->buckets[b]->handle);
			tensor_release(ex, s, t);
		}
	}
}

static tileops_status session_view(const void *ctx, uint64_t handle, tk_tensor *v)
{
	tensor *t = session_tensor_find(ctx, handle);
	if (!t)
		return TILEOPS_ERR_UNKNOWN_HANDLE;
	*v = t->view;
	return TILEOPS_OK;
}

tensor_resolver tensors_resolver(const session *s)
{
	return (tensor_resolver){ session_view, s };
}
