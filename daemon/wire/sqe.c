/*
 * sqe.c - decoding the binary submission-ring descriptors (sqe.h; the
 * layouts are in proto/tileops_ring.h and docs/protocol.md).
 */
#include "sqe.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

_Static_assert(TILEOPS_SQE_OP_MAX_INPUTS == TK_MAX_INPUTS &&
                       TILEOPS_SQE_OP_MAX_OUTPUTS == TK_MAX_OUTPUTS &&
                       TILEOPS_SQE_OP_MAX_PARAMS == TK_MAX_PARAMS,
               "op descriptor limits are the op layer's");
_Static_assert(TILEOPS_SQE_PLAN_MAX_BINDINGS <= PLAN_MAX_BINDINGS,
               "plan-run descriptor within plan limits");
_Static_assert(TILEOPS_SQE_OP_NAME_BYTES == OP_NAME_BYTES &&
                       TILEOPS_SQE_PARAM_NAME_BYTES == PARAM_NAME_BYTES,
               "descriptor names fit an op_desc");

static int name_terminated(const char *field, size_t bytes)
{
	return memchr(field, '\0', bytes) != NULL;
}

static tileops_status sqe_bad(char *err, size_t errlen, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

static tileops_status sqe_bad(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;
	int n = snprintf(err, errlen, "ring entry: ");

	va_start(ap, fmt);
	vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
	va_end(ap);
	return TILEOPS_ERR_PROTOCOL;
}

static tileops_status sqe_decode_param(const tileops_sqe_param *d, int i, op_desc *o, char *err,
                                       size_t errlen)
{
	if (!name_terminated(d->name, sizeof(d->name)))
		return sqe_bad(err, errlen,
		               "op descriptor: param %d name is not NUL-terminated within its %zu "
		               "bytes",
		               i, sizeof(d->name));
	if (d->reserved != 0)
		return sqe_bad(err, errlen, "op descriptor: param %d reserved is %u, expected 0", i,
		               d->reserved);
	memcpy(o->param_names[i], d->name, sizeof(d->name));
	tk_param *p = &o->params[i];
	switch (d->kind) {
	case TILEOPS_SQE_PARAM_INT:
		p->kind = TK_PARAM_INT;
		p->v.i = d->value.i;
		break;
	case TILEOPS_SQE_PARAM_FLOAT:
		p->kind = TK_PARAM_FLOAT;
		p->v.f = d->value.f;
		break;
	case TILEOPS_SQE_PARAM_BOOL:
		p->kind = TK_PARAM_BOOL;
		p->v.b = d->value.i != 0;
		break;
	default:
		return sqe_bad(err, errlen,
		               "op descriptor: param %d ('%.31s') kind is %u, expected %u (int), "
		               "%u (float) or %u (bool)",
		               i, d->name, d->kind, TILEOPS_SQE_PARAM_INT, TILEOPS_SQE_PARAM_FLOAT,
		               TILEOPS_SQE_PARAM_BOOL);
	}
	return TILEOPS_OK;
}

/*
 * Check an op descriptor and decode it into o. `e` is the worker's own
 * copy of the entry (ring_take), so every field is read once, here.
 */
tileops_status wire_decode_sqe_op(const tileops_sqe *e, op_desc *o, char *err, size_t errlen)
{
	tileops_sqe_op head;
	size_t want, off = sizeof(head);

	if (e->length < sizeof(head))
		return sqe_bad(err, errlen,
		               "op descriptor: length is %u bytes, shorter than its %zu-byte "
		               "header",
		               e->length, sizeof(head));
	memcpy(&head, e->payload, sizeof(head));
	if (head.n_inputs > TK_MAX_INPUTS)
		return sqe_bad(err, errlen, "op descriptor: n_inputs is %u, at most %d",
		               head.n_inputs, TK_MAX_INPUTS);
	if (head.n_outputs > TK_MAX_OUTPUTS)
		return sqe_bad(err, errlen, "op descriptor: n_outputs is %u, at most %d",
		               head.n_outputs, TK_MAX_OUTPUTS);
	if (head.n_params > TK_MAX_PARAMS)
		return sqe_bad(err, errlen, "op descriptor: n_params is %u, at most %d",
		               head.n_params, TK_MAX_PARAMS);
	want = sizeof(head) + sizeof(uint64_t) * (head.n_inputs + head.n_outputs) +
	       sizeof(tileops_sqe_param) * head.n_params;
	if (e->length != want)
		return sqe_bad(err, errlen,
		               "op descriptor: length is %u bytes, expected %zu for %u inputs, %u "
		               "outputs and %u params",
		               e->length, want, head.n_inputs, head.n_outputs, head.n_params);
	if (!name_terminated(head.op, sizeof(head.op)))
		return sqe_bad(err, errlen,
		               "op descriptor: op name is not NUL-terminated within its %zu bytes",
		               sizeof(head.op));
	if (head.reserved != 0)
		return sqe_bad(err, errlen, "op descriptor: reserved is %u, expected 0",
		               head.reserved);
	memcpy(o->op, head.op, sizeof(head.op));
	memcpy(o->in, e->payload + off, sizeof(uint64_t) * head.n_inputs);
	off += sizeof(uint64_t) * head.n_inputs;
	memcpy(o->out, e->payload + off, sizeof(uint64_t) * head.n_outputs);
	off += sizeof(uint64_t) * head.n_outputs;
	for (int i = 0; i < (int)head.n_params; i++, off += sizeof(tileops_sqe_param)) {
		tileops_sqe_param d;

		memcpy(&d, e->payload + off, sizeof(d));
		tileops_status st = sqe_decode_param(&d, i, o, err, errlen);
		if (st != TILEOPS_OK)
			return st;
	}
	o->n_in = (int)head.n_inputs;
	o->n_out = (int)head.n_outputs;
	o->n_params = (int)head.n_params;
	return TILEOPS_OK;
}

/* Check a plan-run descriptor and decode it into o (see sqe_decode_op). */
tileops_status wire_decode_sqe_plan_run(const tileops_sqe *e, plan_run_desc *o, char *err,
                                        size_t errlen)
{
	tileops_sqe_plan_run head;
	size_t want;

	if (e->length < sizeof(head))
		return sqe_bad(err, errlen,
		               "plan-run descriptor: length is %u bytes, shorter than its %zu-byte "
		               "header",
		               e->length, sizeof(head));
	memcpy(&head, e->payload, sizeof(head));
	if (head.n_bindings > TILEOPS_SQE_PLAN_MAX_BINDINGS)
		return sqe_bad(err, errlen, "plan-run descriptor: n_bindings is %u, at most %u",
		               head.n_bindings, TILEOPS_SQE_PLAN_MAX_BINDINGS);
	want = sizeof(head) + sizeof(tileops_sqe_binding) * head.n_bindings;
	if (e->length != want)
		return sqe_bad(err, errlen,
		               "plan-run descriptor: length is %u bytes, expected %zu for %u "
		               "bindings",
		               e->length, want, head.n_bindings);
	if (head.reserved != 0)
		return sqe_bad(err, errlen, "plan-run descriptor: reserved is %u, expected 0",
		               head.reserved);
	for (uint32_t i = 0; i < head.n_bindings; i++) {
		tileops_sqe_binding b;

		memcpy(&b, e->payload + sizeof(head) + sizeof(b) * i, sizeof(b));
		o->bindings[i].plan_tensor = b.plan_tensor;
		o->bindings[i].tensor = b.tensor;
	}
	o->plan = head.plan;
	o->size = head.size;
	o->n_bindings = (int)head.n_bindings;
	return TILEOPS_OK;
}

tileops_status wire_decode_sqe_event(const tileops_sqe *e, uint64_t *event, char *err,
                                     size_t errlen)
{
	tileops_sqe_event d;
	const char *what = e->kind == TILEOPS_SQE_EVENT_RECORD ? "event-record" : "event-wait";

	if (e->length != sizeof(d))
		return sqe_bad(err, errlen, "%s descriptor: length is %u bytes, expected %zu", what,
		               e->length, sizeof(d));
	memcpy(&d, e->payload, sizeof(d));
	if (d.reserved != 0)
		return sqe_bad(err, errlen, "%s descriptor: reserved is %llu, expected 0", what,
		               (unsigned long long)d.reserved);
	if (e->kind == TILEOPS_SQE_EVENT_RECORD && d.event != 0)
		return sqe_bad(err, errlen,
		               "event-record descriptor: event is %llu, expected 0 (the session's "
		               "own event)",
		               (unsigned long long)d.event);
	if (e->kind != TILEOPS_SQE_EVENT_RECORD && d.event == 0)
		return sqe_bad(err, errlen,
		               "event-wait descriptor: event is 0, expected an id event_register "
		               "answered");
	*event = d.event;
	return TILEOPS_OK;
}
