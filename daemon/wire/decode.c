/*
 * decode.c - control-plane messages (protobuf tileops.Request) into the
 * requests of request.h, and the requests' memory.
 *
 * Every count and length is bounded here, with a message naming the field,
 * so the executor never meets an unbounded array or string.
 */
#include "decode.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sqe.h"

static tileops_status bad(char *err, size_t errlen, tileops_status st, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));

static tileops_status bad(char *err, size_t errlen, tileops_status st, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return st;
}

/* Copy a string into a fixed field; -1 when it does not fit. */
static int copy_name(char *dst, size_t cap, const char *src)
{
	size_t n = src ? strlen(src) : 0;
	if (n >= cap)
		return -1;
	memcpy(dst, src ? src : "", n + 1);
	return 0;
}

static tileops_status decode_spec(const char *what, Tileops__DType dtype, size_t n_shape,
                                  const int64_t *shape, tensor_spec *spec, char *err, size_t errlen)
{
	if (n_shape > TK_MAX_DIMS)
		return bad(err, errlen, TILEOPS_ERR_SHAPE,
		           "%s: rank %zu is over the limit of %d dimensions", what, n_shape,
		           TK_MAX_DIMS);
	spec->dtype = (int)dtype;
	spec->ndim = (int)n_shape;
	for (size_t i = 0; i < n_shape; i++)
		spec->shape[i] = shape[i];
	return TILEOPS_OK;
}

tileops_status wire_decode_op(const Tileops__OpRun *m, op_desc *o, char *err, size_t errlen)
{
	const char *name = m->op && m->op[0] ? m->op : "(no name)";
	memset(o, 0, offsetof(op_desc, param_names));
	if (copy_name(o->op, sizeof(o->op), name) != 0)
		return bad(err, errlen, TILEOPS_ERR_UNKNOWN_OP,
		           "unknown op '%.40s...': op names are at most %d bytes", name,
		           OP_NAME_BYTES - 1);
	if (m->n_inputs > TK_MAX_INPUTS)
		return bad(err, errlen, TILEOPS_ERR_INVALID_ARGUMENT,
		           "%s: %zu inputs given, at most %d", o->op, m->n_inputs, TK_MAX_INPUTS);
	if (m->n_outputs > TK_MAX_OUTPUTS)
		return bad(err, errlen, TILEOPS_ERR_INVALID_ARGUMENT,
		           "%s: %zu outputs given, at most %d", o->op, m->n_outputs,
		           TK_MAX_OUTPUTS);
	if (m->n_params > TK_MAX_PARAMS)
		return bad(err, errlen, TILEOPS_ERR_PARAM, "%s: %zu params given, at most %d",
		           o->op, m->n_params, TK_MAX_PARAMS);
	o->n_in = (int)m->n_inputs;
	o->n_out = (int)m->n_outputs;
	o->n_params = (int)m->n_params;
	/* Empty repeated fields may come as NULL pointers. */
	if (m->n_inputs)
		memcpy(o->in, m->inputs, sizeof(uint64_t) * m->n_inputs);
	if (m->n_outputs)
		memcpy(o->out, m->outputs, sizeof(uint64_t) * m->n_outputs);
	for (size_t i = 0; i < m->n_params; i++) {
		const Tileops__Param *p = m->params[i];
		if (copy_name(o->param_names[i], PARAM_NAME_BYTES, p->name) != 0)
			return bad(err, errlen, TILEOPS_ERR_PARAM,
			           "%s: param '%.40s...' is unknown (param names are at most %d "
			           "bytes)",
			           o->op, p->name, PARAM_NAME_BYTES - 1);
		tk_param *v = &o->params[i];
		switch (p->value_case) {
		case TILEOPS__PARAM__VALUE_I:
			v->kind = TK_PARAM_INT;
			v->v.i = p->i;
			break;
		case TILEOPS__PARAM__VALUE_F:
			v->kind = TK_PARAM_FLOAT;
			v->v.f = p->f;
			break;
		case TILEOPS__PARAM__VALUE_B:
			v->kind = TK_PARAM_BOOL;
			v->v.b = p->b ? 1 : 0;
			break;
		default:
			return bad(err, errlen, TILEOPS_ERR_PARAM, "%s: param '%s' has no value",
			           o->op, o->param_names[i]);
		}
	}
	return TILEOPS_OK;
}

static tileops_status decode_plan(const Tileops__PlanCreate *m, plan_def **out, char *err,
                                  size_t errlen)
{
	if (m->n_ops == 0 || m->n_ops > PLAN_MAX_OPS)
		return bad(err, errlen, TILEOPS_ERR_INVALID_ARGUMENT,
		           "a plan has 1 to %d ops, this one %zu", PLAN_MAX_OPS, m->n_ops);
	if (m->n_buckets > PLAN_MAX_BUCKETS)
		return bad(err, errlen, TILEOPS_ERR_INVALID_ARGUMENT, "at most %d buckets, got %zu",
		           PLAN_MAX_BUCKETS, m->n_buckets);
	if (m->n_bucketed > PLAN_MAX_BUCKETED)
		return bad(err, errlen, TILEOPS_ERR_INVALID_ARGUMENT,
		           "at most %d bucketed tensors, got %zu", PLAN_MAX_BUCKETED,
		           m->n_bucketed);
	plan_def *d = calloc(1, sizeof(*d));
	if (!d || !(d->ops = calloc(m->n_ops, sizeof(*d->ops))) ||
	    !(d->bucketed = calloc(m->n_bucketed + 1, sizeof(*d->bucketed)))) {
		plan_def_free(d);
		return bad(err, errlen, TILEOPS_ERR_OUT_OF_MEMORY, "out of host memory");
	}
	/* A name that does not fit is shortened: it only labels stats and logs. */
	snprintf(d->name, sizeof(d->name), "%s", m->name ? m->name : "");
	d->n_ops = (int)m->n_ops;
	for (size_t i = 0; i < m->n_ops; i++) {
		char msg[400];
		tileops_status st = wire_decode_op(m->ops[i], &d->ops[i], msg, sizeof(msg));
		if (st != TILEOPS_OK) {
			plan_def_free(d);
			return bad(err, errlen, st, "plan op %zu: %s", i, msg);
		}
	}
	d->n_buckets = (int)m->n_buckets;
	if (m->n_buckets)
		memcpy(d->buckets, m->buckets, sizeof(int64_t) * m->n_buckets);
	d->n_bucketed = (int)m->n_bucketed;
	if (m->n_bucketed)
		memcpy(d->bucketed, m->bucketed, sizeof(uint64_t) * m->n_bucketed);
	*out = d;
	return TILEOPS_OK;
}

tileops_status wire_decode_plan_run(const Tileops__PlanRun *m, plan_run_desc *r, char *err,
                                    size_t errlen)
{
	if (m->n_bindings > PLAN_MAX_BINDINGS)
		return bad(err, errlen, TILEOPS_ERR_INVALID_ARGUMENT,
		           "plan_run: a run binds at most %d tensors, this one %zu",
		           PLAN_MAX_BINDINGS, m->n_bindings);
	r->plan = m->plan;
	r->size = m->size;
	r->n_bindings = (int)m->n_bindings;
	for (size_t i = 0; i < m->n_bindings; i++) {
		r->bindings[i].plan_tensor = m->bindings[i]->plan_tensor;
		r->bindings[i].tensor = m->bindings[i]->tensor;
	}
	return TILEOPS_OK;
}

tileops_status wire_decode(const Tileops__Request *m, request *r, char *err, size_t errlen)
{
	memset(r, 0, sizeof(*r));
	r->seq = m->seq;
	r->ring_mark = m->ring_mark;
	switch (m->body_case) {
	case TILEOPS__REQUEST__BODY_TENSOR_CREATE:
		r->kind = REQ_TENSOR_CREATE;
		r->u.tensor.device = m->tensor_create->device;
		return decode_spec("tensor", m->tensor_create->dtype, m->tensor_create->n_shape,
		                   m->tensor_create->shape, &r->u.tensor.spec, err, errlen);
	case TILEOPS__REQUEST__BODY_TENSOR_IMPORT: {
		const Tileops__TensorImport *t = m->tensor_import;
		r->kind = REQ_TENSOR_IMPORT;
		if (t->ipc_handle.len != sizeof(r->u.tensor.ipc))
			return bad(err, errlen, TILEOPS_ERR_INVALID_ARGUMENT,
			           "tensor: ipc_handle has %zu bytes, expected %zu",
			           t->ipc_handle.len, sizeof(r->u.tensor.ipc));
		memcpy(r->u.tensor.ipc, t->ipc_handle.data, sizeof(r->u.tensor.ipc));
		r->u.tensor.offset = t->offset;
		r->u.tensor.bytes = t->bytes;
		return decode_spec("tensor", t->dtype, t->n_shape, t->shape, &r->u.tensor.spec, err,
		                   errlen);
	}
	case TILEOPS__REQUEST__BODY_TENSOR_COPY:
		r->kind = REQ_TENSOR_COPY;
		r->u.pair.dst = m->tensor_copy->dst;
		r->u.pair.src = m->tensor_copy->src;
		return TILEOPS_OK;
	case TILEOPS__REQUEST__BODY_TENSOR_FREE:
		r->kind = REQ_TENSOR_FREE;
		r->u.handle = m->tensor_free->handle;
		return TILEOPS_OK;
	case TILEOPS__REQUEST__BODY_TENSOR_WRITE:
	case TILEOPS__REQUEST__BODY_TENSOR_READ: {
		int write = m->body_case == TILEOPS__REQUEST__BODY_TENSOR_WRITE;
		r->kind = write ? REQ_TENSOR_WRITE : REQ_TENSOR_READ;
		r->u.copy.handle = write ? m->tensor_write->handle : m->tensor_read->handle;
		r->u.copy.tensor_offset =
		        write ? m->tensor_write->tensor_offset : m->tensor_read->tensor_offset;
		r->u.copy.arena_offset =
		        write ? m->tensor_write->arena_offset : m->tensor_read->arena_offset;
		r->u.copy.length = write ? m->tensor_write->length : m->tensor_read->length;
		return TILEOPS_OK;
	}
	case TILEOPS__REQUEST__BODY_TENSOR_EXPORT:
		r->kind = REQ_TENSOR_EXPORT;
		r->u.handle = m->tensor_export->handle;
		return TILEOPS_OK;
	case TILEOPS__REQUEST__BODY_OP_RUN:
		r->kind = REQ_OP_RUN;
		return wire_decode_op(m->op_run, &r->u.op, err, errlen);
	case TILEOPS__REQUEST__BODY_SYNC:
		r->kind = REQ_SYNC;
		return TILEOPS_OK;
	case TILEOPS__REQUEST__BODY_PLAN_CREATE:
		r->kind = REQ_PLAN_CREATE;
		return decode_plan(m->plan_create, &r->u.plan, err, errlen);
	case TILEOPS__REQUEST__BODY_PLAN_RUN:
		r->kind = REQ_PLAN_RUN;
		return wire_decode_plan_run(m->plan_run, &r->u.run, err, errlen);
	case TILEOPS__REQUEST__BODY_PLAN_FREE:
		r->kind = REQ_PLAN_FREE;
		r->u.handle = m->plan_free->plan;
		return TILEOPS_OK;
	case TILEOPS__REQUEST__BODY_PLAN_OPEN:
		r->kind = REQ_PLAN_OPEN;
		if (copy_name(r->u.name, sizeof(r->u.name), m->plan_open->name) != 0)
			return bad(err, errlen, TILEOPS_ERR_UNKNOWN_HANDLE,
			           "plan_open: no warm-up plan '%.40s...' (plan names are at most "
			           "%zu bytes)",
			           m->plan_open->name, sizeof(r->u.name) - 1);
		return TILEOPS_OK;
	case TILEOPS__REQUEST__BODY_TENSOR_VIEW: {
		const Tileops__TensorView *v = m->tensor_view;
		r->kind = REQ_TENSOR_VIEW;
		r->u.view.base = v->base_tensor;
		r->u.view.byte_offset = v->byte_offset;
		tileops_status st = decode_spec("tensor_view", v->dtype, v->n_shape, v->shape,
		                                &r->u.view.spec, err, errlen);
		if (st != TILEOPS_OK)
			return st;
		if (v->n_strides && v->n_strides != v->n_shape)
			return bad(err, errlen, TILEOPS_ERR_INVALID_ARGUMENT,
			           "tensor_view: %zu strides for %zu dimensions (give one per "
			           "dimension, or none for packed row-major)",
			           v->n_strides, v->n_shape);
		r->u.view.has_strides = v->n_strides != 0;
		for (size_t i = 0; i < v->n_strides; i++)
			r->u.view.strides[i] = v->strides[i];
		return TILEOPS_OK;
	}
	case TILEOPS__REQUEST__BODY_EVENT_WAIT:
		r->kind = REQ_EVENT_WAIT;
		if (m->event_wait->ipc_event.len != sizeof(r->u.event))
			return bad(err, errlen, TILEOPS_ERR_INVALID_ARGUMENT,
			           "event_wait: ipc_event has %zu bytes, expected %zu",
			           m->event_wait->ipc_event.len, sizeof(r->u.event));
		memcpy(r->u.event, m->event_wait->ipc_event.data, sizeof(r->u.event));
		return TILEOPS_OK;
	case TILEOPS__REQUEST__BODY_EVENT_RECORD:
		r->kind = REQ_EVENT_RECORD;
		return TILEOPS_OK;
	case TILEOPS__REQUEST__BODY_EVENT_REGISTER:
		r->kind = REQ_EVENT_REGISTER;
		if (m->event_register->ipc_event.len != sizeof(r->u.event))
			return bad(err, errlen, TILEOPS_ERR_INVALID_ARGUMENT,
			           "event_register: ipc_event has %zu bytes, expected %zu",
			           m->event_register->ipc_event.len, sizeof(r->u.event));
		memcpy(r->u.event, m->event_register->ipc_event.data, sizeof(r->u.event));
		return TILEOPS_OK;
	case TILEOPS__REQUEST__BODY_EVENT_RELEASE:
		r->kind = REQ_EVENT_RELEASE;
		r->u.handle = m->event_release->event;
		return TILEOPS_OK;
	case TILEOPS__REQUEST__BODY_EVENT_WAIT_REGISTERED:
		r->kind = REQ_EVENT_WAIT_ID;
		r->u.handle = m->event_wait_registered->event;
		return TILEOPS_OK;
	case TILEOPS__REQUEST__BODY_EVENT_EXPORT:
		r->kind = REQ_EVENT_EXPORT;
		return TILEOPS_OK;
	case TILEOPS__REQUEST__BODY_EVENT_RECORD_EXPORTED:
		r->kind = REQ_EVENT_RECORD_EXPORT;
		return TILEOPS_OK;
	default:
		return bad(err, errlen, TILEOPS_ERR_PROTOCOL,
		           "request has no body the executor runs");
	}
}

tileops_status wire_decode_sqe_request(const tileops_sqe *e, request *r, char *err, size_t errlen)
{
	memset(r, 0, sizeof(*r)); /* request_clear is safe after any failure */
	Tileops__Request *m = tileops__request__unpack(NULL, e->length, e->payload);
	if (!m)
		return bad(err, errlen, TILEOPS_ERR_PROTOCOL,
		           "ring entry: the %u-byte payload is not a valid tileops.Request",
		           e->length);
	tileops_status st;
	if (m->body_case != TILEOPS__REQUEST__BODY_OP_RUN &&
	    m->body_case != TILEOPS__REQUEST__BODY_PLAN_RUN &&
	    m->body_case != TILEOPS__REQUEST__BODY_SYNC &&
	    m->body_case != TILEOPS__REQUEST__BODY_EVENT_WAIT)
		st = bad(err, errlen, TILEOPS_ERR_UNSUPPORTED,
		         "ring entry: only op_run, plan_run, sync and event_wait go through the "
		         "ring");
	else
		st = wire_decode(m, r, err, errlen);
	tileops__request__free_unpacked(m, NULL);
	return st;
}

void plan_def_free(plan_def *d)
{
	if (!d)
		return;
	free(d->ops);
	free(d->bucketed);
	free(d);
}

void request_clear(request *r)
{
	if (r && r->kind == REQ_PLAN_CREATE) {
		plan_def_free(r->u.plan);
		r->u.plan = NULL;
	}
}

void request_free(request *r)
{
	request_clear(r);
	free(r);
}

const char *request_kind_name(request_kind k)
{
	static const char *const names[] = {
		[REQ_TENSOR_CREATE] = "tensor_create",
		[REQ_TENSOR_IMPORT] = "tensor_import",
		[REQ_TENSOR_FREE] = "tensor_free",
		[REQ_TENSOR_WRITE] = "tensor_write",
		[REQ_TENSOR_READ] = "tensor_read",
		[REQ_TENSOR_EXPORT] = "tensor_export",
		[REQ_OP_RUN] = "op_run",
		[REQ_SYNC] = "sync",
		[REQ_PLAN_CREATE] = "plan_create",
		[REQ_PLAN_RUN] = "plan_run",
		[REQ_PLAN_FREE] = "plan_free",
		[REQ_PLAN_OPEN] = "plan_open",
		[REQ_TENSOR_VIEW] = "tensor_view",
		[REQ_EVENT_WAIT] = "event_wait",
		[REQ_EVENT_RECORD] = "event_record",
		[REQ_EVENT_REGISTER] = "event_register",
		[REQ_EVENT_RELEASE] = "event_release",
		[REQ_EVENT_WAIT_ID] = "event_wait_registered",
		[REQ_EVENT_EXPORT] = "event_export",
		[REQ_EVENT_RECORD_EXPORT] = "event_record_exported",
		[REQ_TENSOR_COPY] = "tensor_copy",
	};
	return (size_t)k < sizeof(names) / sizeof(names[0]) && names[k] ? names[k] : "request";
}
