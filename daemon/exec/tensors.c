/*
 * tensors.c - a session's tensors on the device (see tensors.h).
 */
#include "tensors.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "completion.h"
#include "devices.h"
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

static tensor *tensor_find(session *s, job *j, uint64_t handle, const char *what);

/* A new memory record over ptr, on device index `device`, counted in the
 * session's bytes. */
static tensor_mem *mem_new(session *s, void *ptr, int device, size_t nbytes, int imported)
{
	tensor_mem *m = calloc(1, sizeof(*m));
	if (!m)
		return NULL;
	m->ptr = ptr;
	m->device = device;
	m->nbytes = nbytes;
	m->imported = imported;
	m->refs = 1;
	session_count_bytes(s, (long long)nbytes);
	__atomic_add_fetch(&s->device_bytes[device], nbytes, __ATOMIC_RELAXED);
	return m;
}

/* Give the memory back to the backend (the last tensor naming it went). */
static void mem_release(executor *ex, session *s, tensor_mem *m)
{
	void *stream = s->stream;
	char err[256];
	if (m->imported)
		ex->be->ops->ipc_close(ex->be, m->ptr);
	else if (devices_stream(ex, s, m->device, &stream, err, sizeof(err)) == TILEOPS_OK)
		ex->be->ops->free(ex->be, stream, m->ptr);
	else
		ex->be->ops->free(ex->be, NULL, m->ptr); /* waits for the work queued */
	session_count_bytes(s, -(long long)m->nbytes);
	__atomic_sub_fetch(&s->device_bytes[m->device], m->nbytes, __ATOMIC_RELAXED);
	free(m);
}

static void mem_unref(executor *ex, session *s, tensor_mem *m)
{
	if (m && --m->refs == 0)
		mem_release(ex, s, m);
}

/* Give t a handle and put it in the table; on failure free t (and drop its
 * memory reference) and say so in j. */
static void tensor_publish(executor *ex, session *s, job *j, tensor *t)
{
	t->handle = exec_next_handle(ex);
	if (session_tensor_insert(s, t) != 0) {
		mem_unref(ex, s, t->mem);
		free(t);
		j->status = TILEOPS_ERR_OUT_OF_MEMORY;
		snprintf(j->msg, sizeof(j->msg), "out of host memory");
		return;
	}
	j->handle = t->handle;
	j->nbytes = t->nbytes;
}

static void job_fail(job *j, tileops_status st, const char *what, const char *err)
{
	j->status = st;
	snprintf(j->msg, sizeof(j->msg), "%s: %s", what, err);
}

void tensors_make(executor *ex, session *s, job *j, const tensor_spec *spec, uint32_t device)
{
	if (device >= (uint32_t)ex->be->n_devices) {
		j->status = TILEOPS_ERR_INVALID_ARGUMENT;
		snprintf(j->msg, sizeof(j->msg),
		         "tensor: device %u does not exist: this daemon serves %d device%s "
		         "(indexes 0 to %d; its devices setting)",
		         device, ex->be->n_devices, ex->be->n_devices == 1 ? "" : "s",
		         ex->be->n_devices - 1);
		return;
	}
	tensor *t = calloc(1, sizeof(*t));
	if (!t) {
		job_fail(j, TILEOPS_ERR_OUT_OF_MEMORY, "tensor", "out of host memory");
		return;
	}
	char err[256];
	tileops_status st =
	        tensor_describe(spec->dtype, (size_t)spec->ndim, spec->shape, t, err, sizeof(err));
	size_t limit = __atomic_load_n(ex->cfg.memory_limit, __ATOMIC_RELAXED);
	if (st == TILEOPS_OK && limit && s->bytes + t->nbytes > limit) {
		snprintf(err, sizeof(err),
		         "session memory quota exceeded: %zu bytes held + %zu requested > %zu "
		         "(session_memory_limit)",
		         s->bytes, t->nbytes, limit);
		st = TILEOPS_ERR_QUOTA;
	}
	void *ptr = NULL;
	if (st == TILEOPS_OK)
		st = ex->be->ops->alloc(ex->be, (int)device, t->nbytes, &ptr, err, sizeof(err));
	if (st == TILEOPS_OK && !(t->mem = mem_new(s, ptr, (int)device, t->nbytes, 0))) {
		ex->be->ops->free(ex->be, NULL, ptr);
		snprintf(err, sizeof(err), "out of host memory");
		st = TILEOPS_ERR_OUT_OF_MEMORY;
	}
	if (st != TILEOPS_OK) {
		free(t);
		job_fail(j, st, "tensor", err);
		return;
	}
	t->view.data = ptr;
	tensor_publish(ex, s, j, t);
}

void tensors_import(executor *ex, session *s, job *j, const tensor_spec *spec,
                    const unsigned char ipc[64], uint64_t offset, uint64_t bytes)
{
	const char *what = "tensor_import";
	tensor *t = calloc(1, sizeof(*t));
	if (!t) {
		job_fail(j, TILEOPS_ERR_OUT_OF_MEMORY, what, "out of host memory");
		return;
	}
	char err[256];
	tileops_status st =
	        tensor_describe(spec->dtype, (size_t)spec->ndim, spec->shape, t, err, sizeof(err));
	size_t es = st == TILEOPS_OK ? tk_dtype_size(t->view.dtype) : 1;
	if (bytes == 0)
		bytes = t->nbytes;
	if (st == TILEOPS_OK && offset % es != 0) {
		snprintf(err, sizeof(err), "offset %llu is not a multiple of %s's %zu bytes",
		         (unsigned long long)offset, tk_dtype_name(t->view.dtype), es);
		st = TILEOPS_ERR_INVALID_ARGUMENT;
	} else if (st == TILEOPS_OK && t->nbytes > bytes) {
		snprintf(err, sizeof(err),
		         "a %s tensor of this shape needs %zu bytes, more than the %llu it may "
		         "touch",
		         tk_dtype_name(t->view.dtype), t->nbytes, (unsigned long long)bytes);
		st = TILEOPS_ERR_INVALID_ARGUMENT;
	}
	void *ptr = NULL, *base = NULL;
	size_t size = 0;
	if (st == TILEOPS_OK)
		st = ex->be->ops->ipc_import(ex->be, ipc, &ptr, err, sizeof(err));
	if (st == TILEOPS_OK) {
		/* The mapping's real extent, not what the client says of it. */
		st = ex->be->ops->mem_range
		             ? ex->be->ops->mem_range(ex->be, ptr, &base, &size, err, sizeof(err))
		             : TILEOPS_ERR_UNSUPPORTED;
		if (st == TILEOPS_OK && (offset > size || bytes > size - offset)) {
			snprintf(err, sizeof(err),
			         "bytes [%llu, %llu + %llu) are outside the exported allocation's "
			         "%zu bytes",
			         (unsigned long long)offset, (unsigned long long)offset,
			         (unsigned long long)bytes, size);
			st = TILEOPS_ERR_RANGE;
		}
		if (st == TILEOPS_OK && !(t->mem = mem_new(s, ptr, 0, t->nbytes, 1))) {
			snprintf(err, sizeof(err), "out of host memory");
			st = TILEOPS_ERR_OUT_OF_MEMORY;
		}
		if (st != TILEOPS_OK)
			ex->be->ops->ipc_close(ex->be, ptr);
	}
	if (st != TILEOPS_OK) {
		free(t);
		job_fail(j, st, what, err);
		return;
	}
	t->offset = (size_t)offset;
	t->view.data = (char *)ptr + offset;
	tensor_publish(ex, s, j, t);
}

/* "[a, b, c]" */
static void dims_str(const int64_t *v, int n, char *buf, size_t len)
{
	size_t u = (size_t)snprintf(buf, len, "[");
	for (int i = 0; i < n && u < len; i++)
		u += (size_t)snprintf(buf + u, len - u, "%s%lld", i ? ", " : "", (long long)v[i]);
	if (u < len)
		snprintf(buf + u, len - u, "]");
}

/*
 * The bytes *span a view (dtype, shape, strides) takes from its first
 * element to one past its last; -1 when that is more than `limit`. Every
 * step is bounded by limit, so nothing overflows. A view with no elements
 * spans nothing.
 */
static int view_span(const tk_tensor *v, uint64_t limit, uint64_t *span)
{
	uint64_t es = tk_dtype_size(v->dtype), last = 0, cap = limit / es;
	for (int d = 0; d < v->ndim; d++)
		if (v->shape[d] == 0) {
			*span = 0;
			return 0;
		}
	for (int d = 0; d < v->ndim; d++) {
		uint64_t n = (uint64_t)v->shape[d] - 1, st = (uint64_t)v->stride[d];
		if (n && st > cap / n)
			return -1;
		last += n * st;
		if (last > cap)
			return -1;
	}
	if (last + 1 > cap)
		return -1;
	*span = (last + 1) * es;
	return 0;
}

void tensors_view(executor *ex, session *s, job *j, uint64_t base_handle, uint64_t byte_offset,
                  const tensor_spec *spec, const int64_t *strides)
{
	const char *what = "tensor_view";
	tensor *base = tensor_find(s, j, base_handle, what);
	if (!base)
		return;
	tensor *t = calloc(1, sizeof(*t));
	if (!t) {
		job_fail(j, TILEOPS_ERR_OUT_OF_MEMORY, what, "out of host memory");
		return;
	}
	char err[480];
	tileops_status st =
	        tensor_describe(spec->dtype, (size_t)spec->ndim, spec->shape, t, err, sizeof(err));
	if (st != TILEOPS_OK) {
		free(t);
		job_fail(j, st, what, err);
		return;
	}
	size_t es = tk_dtype_size(t->view.dtype);
	for (int d = 0; strides && d < t->view.ndim; d++) {
		if (strides[d] < 0) {
			free(t);
			snprintf(err, sizeof(err), "stride %d is %lld; strides must be >= 0", d,
			         (long long)strides[d]);
			job_fail(j, TILEOPS_ERR_INVALID_ARGUMENT, what, err);
			return;
		}
		t->view.stride[d] = strides[d];
	}
	uint64_t at = (uint64_t)base->offset + byte_offset;
	if (byte_offset % es != 0 || at % es != 0) {
		snprintf(err, sizeof(err),
		         "byte_offset %llu (byte %llu of the memory under base %llu) is not a "
		         "multiple of %s's %zu bytes",
		         (unsigned long long)byte_offset, (unsigned long long)at,
		         (unsigned long long)base_handle, tk_dtype_name(t->view.dtype), es);
		free(t);
		job_fail(j, TILEOPS_ERR_INVALID_ARGUMENT, what, err);
		return;
	}
	uint64_t span = 0;
	if (byte_offset > base->nbytes ||
	    view_span(&t->view, base->nbytes - byte_offset, &span) != 0) {
		char shp[160], str[160];
		dims_str(t->view.shape, t->view.ndim, shp, sizeof(shp));
		dims_str(t->view.stride, t->view.ndim, str, sizeof(str));
		snprintf(err, sizeof(err),
		         "a %s view of shape %.100s, strides %.100s at byte_offset %llu reaches "
		         "past the end of base %llu, whose %zu bytes end at byte %zu",
		         tk_dtype_name(t->view.dtype), shp, str, (unsigned long long)byte_offset,
		         (unsigned long long)base_handle, base->nbytes, base->nbytes);
		free(t);
		job_fail(j, TILEOPS_ERR_RANGE, what, err);
		return;
	}
	t->nbytes = (size_t)span;
	t->offset = (size_t)at;
	t->mem = base->mem;
	t->mem->refs++;
	t->is_view = 1;
	t->view.data = (char *)t->mem->ptr + t->offset;
	tensor_publish(ex, s, j, t);
}

void tensors_make_warm(executor *ex, session *s, job *j, const warm_tensor *t)
{
	tensor_spec spec = { .dtype = (int)t->dtype, .ndim = t->ndim };
	memcpy(spec.shape, t->shape, sizeof(int64_t) * (size_t)t->ndim);
	tensors_make(ex, s, j, &spec, 0);
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
	mem_unref(ex, s, t->mem);
	free(t);
}

void tensors_free(executor *ex, session *s, job *j, uint64_t handle)
{
	if (!tensor_find(s, j, handle, "tensor_free"))
		return;
	tensor_release(ex, s, session_tensor_remove(s, handle));
}

/* A copy moves a tensor's bytes, so a view with gaps is refused (1, the
 * reason in j); `role` names it in the message. */
static int gaps_refused(job *j, const tensor *t, const char *what, const char *role)
{
	if (tk_is_contiguous(&t->view))
		return 0;
	char str[160];
	dims_str(t->view.stride, t->view.ndim, str, sizeof(str));
	j->status = TILEOPS_ERR_INVALID_ARGUMENT;
	snprintf(j->msg, sizeof(j->msg),
	         "%s: %s %llu is a view with gaps between its elements (strides %.160s), whose "
	         "bytes are not its own; copy through its base or a packed view",
	         what, role, (unsigned long long)t->handle, str);
	return 1;
}

int tensors_copy(worker *w, session *s, job *j, int write, uint64_t handle, uint64_t toff,
                 uint64_t aoff, uint64_t len)
{
	executor *ex = w->ex;
	const char *what = write ? "tensor_write" : "tensor_read";
	tensor *t = tensor_find(s, j, handle, what);
	if (!t)
		return 0;
	if (gaps_refused(j, t, what, "tensor"))
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
	void *stream = NULL;
	j->status = devices_stream(ex, s, t->mem->device, &stream, j->msg, sizeof(j->msg));
	if (j->status != TILEOPS_OK)
		return 0;
	j->status = write ? ex->be->ops->write(ex->be, stream, dev, &s->arena, (size_t)aoff,
	                                       (size_t)len, j->msg, sizeof(j->msg))
	                  : ex->be->ops->read(ex->be, stream, dev, &s->arena, (size_t)aoff,
	                                      (size_t)len, j->msg, sizeof(j->msg));
	if (j->status != TILEOPS_OK)
		return 0;
	completion_defer(w, s, j, 0);
	return 1;
}

void tensors_copy_pair(executor *ex, session *s, job *j, uint64_t dst_handle, uint64_t src_handle)
{
	const char *what = "tensor_copy";
	tensor *dst = tensor_find(s, j, dst_handle, what),
	       *src = dst ? tensor_find(s, j, src_handle, what) : NULL;
	if (!src)
		return;
	if (gaps_refused(j, dst, what, "destination tensor") ||
	    gaps_refused(j, src, what, "source tensor"))
		return;
	if (dst->nbytes != src->nbytes) {
		j->status = TILEOPS_ERR_INVALID_ARGUMENT;
		snprintf(j->msg, sizeof(j->msg),
		         "%s: destination tensor %llu has %zu bytes, source tensor %llu has %zu: a "
		         "copy moves every byte, so they must match",
		         what, (unsigned long long)dst_handle, dst->nbytes,
		         (unsigned long long)src_handle, src->nbytes);
		return;
	}
	if (dst->nbytes == 0 || dst->view.data == src->view.data)
		return;
	if (dst->mem == src->mem && dst->offset < src->offset + src->nbytes &&
	    src->offset < dst->offset + dst->nbytes) {
		j->status = TILEOPS_ERR_INVALID_ARGUMENT;
		snprintf(j->msg, sizeof(j->msg),
		         "%s: destination tensor %llu (bytes [%zu, %zu) of its memory) overlaps "
		         "source tensor %llu (bytes [%zu, %zu))",
		         what, (unsigned long long)dst_handle, dst->offset,
		         dst->offset + dst->nbytes, (unsigned long long)src_handle, src->offset,
		         src->offset + src->nbytes);
		return;
	}
	void *ds = NULL, *ss = NULL;
	j->status = devices_stream(ex, s, dst->mem->device, &ds, j->msg, sizeof(j->msg));
	if (j->status == TILEOPS_OK)
		j->status = devices_stream(ex, s, src->mem->device, &ss, j->msg, sizeof(j->msg));
	/* On the destination's stream once the source's work so far is done;
	 * the source's later work (which may overwrite it) waits for the copy. */
	if (j->status == TILEOPS_OK && ds != ss)
		j->status = ex->be->ops->stream_wait(ex->be, ds, ss, j->msg, sizeof(j->msg));
	if (j->status == TILEOPS_OK)
		j->status = ex->be->ops->copy(ex->be, ds, dst->view.data, src->view.data,
		                              dst->nbytes, j->msg, sizeof(j->msg));
	if (j->status == TILEOPS_OK && ds != ss)
		j->status = ex->be->ops->stream_wait(ex->be, ss, ds, j->msg, sizeof(j->msg));
}

void tensors_export(executor *ex, session *s, job *j, uint64_t handle)
{
	tensor *t = tensor_find(s, j, handle, "tensor_export");
	if (!t)
		return;
	if (t->mem->imported) {
		j->status = TILEOPS_ERR_UNSUPPORTED;
		snprintf(j->msg, sizeof(j->msg),
		         "tensor_export: an imported tensor belongs to its exporter; export it "
		         "from there");
		return;
	}
	/* A handle names an allocation's base: the tensor is an offset into it. */
	void *base = t->mem->ptr;
	size_t size = 0;
	if (ex->be->ops->mem_range) {
		j->status = ex->be->ops->mem_range(ex->be, t->view.data, &base, &size, j->msg,
		                                   sizeof(j->msg));
		if (j->status != TILEOPS_OK)
			return;
	}
	j->status = ex->be->ops->ipc_export(ex->be, base, j->ipc, j->msg, sizeof(j->msg));
	j->ipc_offset = (uint64_t)((char *)t->view.data - (char *)base);
	j->ipc_bytes = t->nbytes;
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

static tileops_status session_view(const void *ctx, uint64_t handle, tk_tensor *v, int *device)
{
	tensor *t = session_tensor_find(ctx, handle);
	if (!t)
		return TILEOPS_ERR_UNKNOWN_HANDLE;
	*v = t->view;
	*device = t->mem->device;
	return TILEOPS_OK;
}

tensor_resolver tensors_resolver(const session *s)
{
	return (tensor_resolver){ session_view, s };
}

tileops_status tensors_event_wait(executor *ex, session *s, const unsigned char ev[64], char *err,
                                  size_t errlen)
{
	if (!ex->be->ops->event_wait) {
		snprintf(err, errlen,
		         "event_wait: CUDA IPC events need the CUDA backend (this daemon runs on "
		         "the %s)",
		         ex->be->name);
		return TILEOPS_ERR_UNSUPPORTED;
	}
	return ex->be->ops->event_wait(ex->be, s->stream, ev, err, errlen);
}

tileops_status tensors_event_record(executor *ex, session *s, unsigned char out[64], char *err,
                                    size_t errlen)
{
	if (!ex->be->ops->event_record) {
		snprintf(err, errlen,
		         "event_record: CUDA IPC events need the CUDA backend (this daemon runs "
		         "on the %s)",
		         ex->be->name);
		return TILEOPS_ERR_UNSUPPORTED;
	}
	return ex->be->ops->event_record(ex->be, s->stream, out, err, errlen);
}
