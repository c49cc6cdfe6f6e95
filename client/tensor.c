/*
 * tensor.c - tensors: dtypes, create (on a device), views, free, copies
 * between tensors, bytes in and out through the arena, CUDA IPC export and
 * import, and CUDA IPC events.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "tileops_codes.h"

static const struct {
	const char *name;
	size_t size;
} dtype_table[TILEOPS_DTYPE_END] = {
#define DTYPE_ROW(name_, value, text, bytes) [value] = { text, bytes },
	TILEOPS_DTYPE_LIST(DTYPE_ROW)
#undef DTYPE_ROW
};

#define DTYPE_COUNT (sizeof(dtype_table) / sizeof(dtype_table[0]))

static int dtype_valid(int dtype)
{
	return dtype > 0 && (size_t)dtype < DTYPE_COUNT && dtype_table[dtype].name != NULL;
}

TILEOPS_API size_t tileops_dtype_size(tileops_dtype dtype)
{
	return dtype_valid((int)dtype) ? dtype_table[dtype].size : 0;
}

TILEOPS_API const char *tileops_dtype_name(tileops_dtype dtype)
{
	return dtype_valid((int)dtype) ? dtype_table[dtype].name : "invalid";
}

/* Check a dtype and shape as tensor_create and tensor_import take them. */
static tileops_status shape_check(const char *call, tileops_dtype dtype, int ndim,
                                  const int64_t *shape)
{
	int i;

	if (!dtype_valid((int)dtype))
		return tci_error(TILEOPS_ERR_INVALID_ARGUMENT, "%s: unknown dtype %d", call,
		                 (int)dtype);
	if (ndim < 0 || ndim > TILEOPS_MAX_DIMS)
		return tci_error(TILEOPS_ERR_INVALID_ARGUMENT, "%s: ndim is %d, expected 0..%d",
		                 call, ndim, TILEOPS_MAX_DIMS);
	if (ndim > 0 && shape == NULL)
		return tci_error(TILEOPS_ERR_INVALID_ARGUMENT, "%s: shape is NULL with ndim %d",
		                 call, ndim);
	for (i = 0; i < ndim; i++)
		if (shape[i] < 0)
			return tci_error(TILEOPS_ERR_INVALID_ARGUMENT,
			                 "%s: extent %d of the shape is %lld, expected >= 0", call,
			                 i, (long long)shape[i]);
	return TILEOPS_OK;
}

/* The handle of a create or import reply; 0 is a protocol error. */
static tileops_status reply_handle(const char *call, const Tileops__TensorCreateReply *body,
                                   tileops_tensor *out)
{
	if (body == NULL || body->handle == 0)
		return tci_error(TILEOPS_ERR_PROTOCOL, "%s: tileopsd's reply carries no handle",
		                 call);
	*out = body->handle;
	return TILEOPS_OK;
}

TILEOPS_API tileops_status tileops_tensor_create(tileops_client *c, tileops_dtype dtype, int ndim,
                                                 const int64_t *shape, tileops_tensor *out)
{
	return tileops_tensor_create_on(c, 0, dtype, ndim, shape, out);
}

TILEOPS_API tileops_status tileops_tensor_create_on(tileops_client *c, int device,
                                                    tileops_dtype dtype, int ndim,
                                                    const int64_t *shape, tileops_tensor *out)
{
	Tileops__Request req = TILEOPS__REQUEST__INIT;
	Tileops__TensorCreate body = TILEOPS__TENSOR_CREATE__INIT;
	Tileops__Reply *reply = NULL;
	tileops_status st;

	if (c == NULL || out == NULL)
		return tci_error(TILEOPS_ERR_INVALID_ARGUMENT, "tensor_create: %s is NULL",
		                 c == NULL ? "client" : "out");
	if ((st = tci_device_check("tensor_create", c, device)) != TILEOPS_OK ||
	    (st = shape_check("tensor_create", dtype, ndim, shape)) != TILEOPS_OK)
		return st;
	body.device = (uint32_t)device;
	body.dtype = (Tileops__DType)dtype;
	body.n_shape = (size_t)ndim;
	body.shape = (int64_t *)shape;
	req.body_case = TILEOPS__REQUEST__BODY_TENSOR_CREATE;
	req.tensor_create = &body;
	if ((st = tci_request_call(c, &req, 0, &reply)) != TILEOPS_OK)
		return st;
	st = reply_handle("tensor_create",
	                  reply->body_case == TILEOPS__REPLY__BODY_TENSOR_CREATE
	                          ? reply->tensor_create
	                          : NULL,
	                  out);
	tileops__reply__free_unpacked(reply, NULL);
	return st;
}

TILEOPS_API tileops_status tileops_tensor_free(tileops_client *c, tileops_tensor t)
{
	Tileops__Request req = TILEOPS__REQUEST__INIT;
	Tileops__TensorFree body = TILEOPS__TENSOR_FREE__INIT;

	if (c == NULL)
		return tci_error(TILEOPS_ERR_INVALID_ARGUMENT, "tensor_free: client is NULL");
	if (t == 0)
		return TILEOPS_OK;
	body.handle = t;
	req.body_case = TILEOPS__REQUEST__BODY_TENSOR_FREE;
	req.tensor_free = &body;
	return tci_request_call(c, &req, 0, NULL);
}

/*
 * Over nng, after the ring entries before it (its ring_mark): the daemon
 * queues the copy behind the session's earlier work, so ops submitted
 * through the rings before it are ordered first, as with a tensor write.
 * Sizes and layouts are the daemon's to check: only it knows both tensors.
 */
TILEOPS_API tileops_status tileops_tensor_copy(tileops_client *c, tileops_tensor dst,
                                               tileops_tensor src)
{
	Tileops__Request req = TILEOPS__REQUEST__INIT;
	Tileops__TensorCopy body = TILEOPS__TENSOR_COPY__INIT;

	if (c == NULL)
		return tci_error(TILEOPS_ERR_INVALID_ARGUMENT, "tensor_copy: client is NULL");
	if (dst == 0 || src == 0)
		return tci_error(TILEOPS_ERR_INVALID_ARGUMENT,
		                 "tensor_copy: %s handle 0 is not a tensor",
		                 dst == 0 ? "dst" : "src");
	body.dst = dst;
	body.src = src;
	req.body_case = TILEOPS__REQUEST__BODY_TENSOR_COPY;
	req.tensor_copy = &body;
	return tci_request_call(c, &req, 0, NULL);
}

/* Checks shared by write and read. */
static tileops_status transfer_check(const char *call, tileops_client *c, tileops_tensor t,
                                     size_t offset, const void *host, size_t len)
{
	if (c == NULL)
		return tci_error(TILEOPS_ERR_INVALID_ARGUMENT, "%s: client is NULL", call);
	if (len == 0)
		return TILEOPS_OK;
	if (host == NULL)
		return tci_error(TILEOPS_ERR_INVALID_ARGUMENT,
		                 "%s: host buffer is NULL for %zu bytes", call, len);
	if (t == 0)
		return tci_error(TILEOPS_ERR_INVALID_ARGUMENT, "%s: handle 0 is not a tensor",
		                 call);
	if (offset + len < offset)
		return tci_error(TILEOPS_ERR_INVALID_ARGUMENT,
		                 "%s: offset %zu + length %zu overflows", call, offset, len);
	return TILEOPS_OK;
}

/* Move one piece, which fits the arena, through it. Called with arena_mu held. */
static tileops_status transfer_piece(tileops_client *c, int is_write, tileops_tensor t,
                                     size_t offset, unsigned char *host, size_t len)
{
	Tileops__Request req = TILEOPS__REQUEST__INIT;
	Tileops__TensorWrite wr = TILEOPS__TENSOR_WRITE__INIT;
	Tileops__TensorRead rd = TILEOPS__TENSOR_READ__INIT;
	unsigned char *area = (unsigned char *)c->arena + c->data_offset;
	tileops_status st;

	if (is_write) {
		memcpy(area, host, len);
		wr.handle = t;
		wr.tensor_offset = offset;
		wr.arena_offset = c->data_offset;
		wr.length = len;
		req.body_case = TILEOPS__REQUEST__BODY_TENSOR_WRITE;
		req.tensor_write = &wr;
	} else {
		rd.handle = t;
		rd.tensor_offset = offset;
		rd.arena_offset = c->data_offset;
		rd.length = len;
		req.body_case = TILEOPS__REQUEST__BODY_TENSOR_READ;
		req.tensor_read = &rd;
	}
	if ((st = tci_request_call(c, &req, 0, NULL)) != TILEOPS_OK)
		return st;
	if (!is_write)
		memcpy(host, area, len);
	return TILEOPS_OK;
}

/*
 * Move len bytes in pieces the size of the arena's data area (the rings, if
 * any, sit before it and are never touched here). arena_mu makes the transfer the
 * arena's only user until its last reply is in, so the daemon never reads
 * the arena while another transfer fills it.
 */
static tileops_status transfer(tileops_client *c, int is_write, tileops_tensor t, size_t offset,
                               unsigned char *host, size_t len)
{
	tileops_status st = TILEOPS_OK;
	size_t done = 0;

	pthread_mutex_lock(&c->arena_mu);
	while (done < len && st == TILEOPS_OK) {
		size_t piece = len - done < c->data_bytes ? len - done : c->data_bytes;

		st = transfer_piece(c, is_write, t, offset + done, host + done, piece);
		done += piece;
	}
	pthread_mutex_unlock(&c->arena_mu);
	return st;
}

TILEOPS_API tileops_status tileops_tensor_write(tileops_client *c, tileops_tensor t, size_t offset,
                                                const void *src, size_t len)
{
	tileops_status st = transfer_check("tensor_write", c, t, offset, src, len);

	if (st != TILEOPS_OK || len == 0)
		return st;
	return transfer(c, 1, t, offset, (unsigned char *)src, len);
}

TILEOPS_API tileops_status tileops_tensor_read(tileops_client *c, tileops_tensor t, size_t offset,
                                               void *dst, size_t len)
{
	tileops_status st = transfer_check("tensor_read", c, t, offset, dst, len);

	if (st != TILEOPS_OK || len == 0)
		return st;
	return transfer(c, 0, t, offset, dst, len);
}

TILEOPS_API tileops_status tileops_tensor_view(tileops_client *c, tileops_tensor base,
                                               size_t byte_offset, tileops_dtype dtype, int ndim,
                                               const int64_t *shape, const int64_t *strides,
                                               tileops_tensor *out)
{
	Tileops__Request req = TILEOPS__REQUEST__INIT;
	Tileops__TensorView body = TILEOPS__TENSOR_VIEW__INIT;
	Tileops__Reply *reply = NULL;
	tileops_status st;
	int i;

	if (c == NULL || out == NULL)
		return tci_error(TILEOPS_ERR_INVALID_ARGUMENT, "tensor_view: %s is NULL",
		                 c == NULL ? "client" : "out");
	if (base == 0)
		return tci_error(TILEOPS_ERR_INVALID_ARGUMENT,
		                 "tensor_view: base handle 0 is not a tensor");
	if ((st = shape_check("tensor_view", dtype, ndim, shape)) != TILEOPS_OK)
		return st;
	if (byte_offset % tileops_dtype_size(dtype) != 0)
		return tci_error(TILEOPS_ERR_INVALID_ARGUMENT,
		                 "tensor_view: byte_offset %zu is not a multiple of %s's %zu bytes",
		                 byte_offset, tileops_dtype_name(dtype), tileops_dtype_size(dtype));
	for (i = 0; strides != NULL && i < ndim; i++)
		if (strides[i] < 0)
			return tci_error(TILEOPS_ERR_INVALID_ARGUMENT,
			                 "tensor_view: stride %d is %lld, expected >= 0", i,
			                 (long long)strides[i]);
	body.base_tensor = base;
	body.byte_offset = byte_offset;
	body.dtype = (Tileops__DType)dtype;
	body.n_shape = (size_t)ndim;
	body.shape = (int64_t *)shape;
	body.n_strides = strides != NULL ? (size_t)ndim : 0;
	body.strides = (int64_t *)strides;
	req.body_case = TILEOPS__REQUEST__BODY_TENSOR_VIEW;
	req.tensor_view = &body;
	if ((st = tci_request_call(c, &req, 0, &reply)) != TILEOPS_OK)
		return st;
	st = reply_handle("tensor_view",
	                  reply->body_case == TILEOPS__REPLY__BODY_TENSOR_VIEW ? reply->tensor_view
	                                                                       : NULL,
	                  out);
	tileops__reply__free_unpacked(reply, NULL);
	return st;
}

TILEOPS_API tileops_status tileops_tensor_export(tileops_client *c, tileops_tensor t,
                                                 tileops_ipc_handle *out, size_t *offset,
                                                 size_t *bytes)
{
	Tileops__Request req = TILEOPS__REQUEST__INIT;
	Tileops__TensorExport body = TILEOPS__TENSOR_EXPORT__INIT;
	Tileops__Reply *reply = NULL;
	const Tileops__TensorExportReply *ex;
	tileops_status st;

	if (c == NULL || out == NULL)
		return tci_error(TILEOPS_ERR_INVALID_ARGUMENT, "tensor_export: %s is NULL",
		                 c == NULL ? "client" : "out");
	if (t == 0)
		return tci_error(TILEOPS_ERR_INVALID_ARGUMENT,
		                 "tensor_export: handle 0 is not a tensor");
	body.handle = t;
	req.body_case = TILEOPS__REQUEST__BODY_TENSOR_EXPORT;
	req.tensor_export = &body;
	if ((st = tci_request_call(c, &req, 0, &reply)) != TILEOPS_OK)
		return st;
	ex = reply->body_case == TILEOPS__REPLY__BODY_TENSOR_EXPORT ? reply->tensor_export : NULL;
	if (ex == NULL || ex->ipc_handle.len != sizeof(out->bytes)) {
		st = tci_error(
		        TILEOPS_ERR_PROTOCOL,
		        "tensor_export: tileopsd's reply carries %zu handle bytes, expected %zu",
		        ex != NULL ? ex->ipc_handle.len : 0, sizeof(out->bytes));
	} else {
		memcpy(out->bytes, ex->ipc_handle.data, sizeof(out->bytes));
		if (offset != NULL)
			*offset = (size_t)ex->offset;
		if (bytes != NULL)
			*bytes = (size_t)ex->bytes;
	}
	tileops__reply__free_unpacked(reply, NULL);
	return st;
}

TILEOPS_API tileops_status tileops_tensor_import(tileops_client *c, const tileops_ipc_handle *h,
                                                 size_t offset, size_t bytes, tileops_dtype dtype,
                                                 int ndim, const int64_t *shape,
                                                 tileops_tensor *out)
{
	Tileops__Request req = TILEOPS__REQUEST__INIT;
	Tileops__TensorImport body = TILEOPS__TENSOR_IMPORT__INIT;
	Tileops__Reply *reply = NULL;
	tileops_status st;
	uint64_t need;
	int i;

	if (c == NULL || h == NULL || out == NULL)
		return tci_error(TILEOPS_ERR_INVALID_ARGUMENT, "tensor_import: %s is NULL",
		                 c == NULL   ? "client"
		                 : h == NULL ? "handle"
		                             : "out");
	if ((st = shape_check("tensor_import", dtype, ndim, shape)) != TILEOPS_OK)
		return st;
	if (offset % tileops_dtype_size(dtype) != 0)
		return tci_error(TILEOPS_ERR_INVALID_ARGUMENT,
		                 "tensor_import: offset %zu is not a multiple of %s's %zu bytes",
		                 offset, tileops_dtype_name(dtype), tileops_dtype_size(dtype));
	if (offset + bytes < offset)
		return tci_error(TILEOPS_ERR_INVALID_ARGUMENT,
		                 "tensor_import: offset %zu + bytes %zu overflows", offset, bytes);
	/* dtype x shape, saturating: an absurd shape is refused, never wrapped. */
	need = tileops_dtype_size(dtype);
	for (i = 0; i < ndim && need != 0; i++)
		need = shape[i] != 0 && need > UINT64_MAX / (uint64_t)shape[i]
		               ? UINT64_MAX
		               : need * (uint64_t)shape[i];
	if (need > bytes)
		return tci_error(TILEOPS_ERR_INVALID_ARGUMENT,
		                 "tensor_import: a %s tensor of this shape needs %llu bytes, more "
		                 "than the %zu given",
		                 tileops_dtype_name(dtype), (unsigned long long)need, bytes);
	body.ipc_handle.data = (uint8_t *)h->bytes;
	body.ipc_handle.len = sizeof(h->bytes);
	body.dtype = (Tileops__DType)dtype;
	body.n_shape = (size_t)ndim;
	body.shape = (int64_t *)shape;
	body.offset = offset;
	body.bytes = bytes;
	req.body_case = TILEOPS__REQUEST__BODY_TENSOR_IMPORT;
	req.tensor_import = &body;
	if ((st = tci_request_call(c, &req, 0, &reply)) != TILEOPS_OK)
		return st;
	st = reply_handle("tensor_import",
	                  reply->body_case == TILEOPS__REPLY__BODY_TENSOR_IMPORT
	                          ? reply->tensor_import
	                          : NULL,
	                  out);
	tileops__reply__free_unpacked(reply, NULL);
	return st;
}

/*
 * The wait goes the way ops go (the ring when the session has one), so it
 * sits in the session's order between the ops before and after it.
 */
TILEOPS_API tileops_status tileops_event_wait(tileops_client *c, const tileops_ipc_event *ev)
{
	Tileops__Request req = TILEOPS__REQUEST__INIT;
	Tileops__EventWait body = TILEOPS__EVENT_WAIT__INIT;

	if (c == NULL || ev == NULL)
		return tci_error(TILEOPS_ERR_INVALID_ARGUMENT, "event_wait: %s is NULL",
		                 c == NULL ? "client" : "event");
	body.ipc_event.data = (uint8_t *)ev->bytes;
	body.ipc_event.len = sizeof(ev->bytes);
	req.body_case = TILEOPS__REQUEST__BODY_EVENT_WAIT;
	req.event_wait = &body;
	return tci_op_call(c, &req);
}

/* Over nng (its reply carries the handle), after the ring entries before it. */
TILEOPS_API tileops_status tileops_event_record(tileops_client *c, tileops_ipc_event *out)
{
	Tileops__Request req = TILEOPS__REQUEST__INIT;
	Tileops__EventRecord body = TILEOPS__EVENT_RECORD__INIT;
	Tileops__Reply *reply = NULL;
	tileops_status st;

	if (c == NULL || out == NULL)
		return tci_error(TILEOPS_ERR_INVALID_ARGUMENT, "event_record: %s is NULL",
		                 c == NULL ? "client" : "out");
	req.body_case = TILEOPS__REQUEST__BODY_EVENT_RECORD;
	req.event_record = &body;
	if ((st = tci_request_call(c, &req, 0, &reply)) != TILEOPS_OK)
		return st;
	return tci_event_reply(
	        "event_record", reply,
	        reply->body_case == TILEOPS__REPLY__BODY_EVENT_RECORD ? reply->event_record : NULL,
	        out);
}
