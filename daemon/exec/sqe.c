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
_Static_assert(TILEOPS_SQE_PLAN_MAX_BINDINGS <= 64, "plan-run descriptor within plan limits");

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

static tileops_status sqe_decode_param(const tileops_sqe_param *d, size_t i, sqe_op_run *o,
                                       char *err, size_t errlen)
{
	Tileops__Param *p = &o->params[i];

	if (!name_terminated(d->name, sizeof(d->name)))
		return sqe_bad(err, errlen,
		               "op descriptor: param %zu name is not NUL-terminated within its %zu "
		               "bytes",
		               i, sizeof(d->name));
	if (d->reserved != 0)
		return sqe_bad(err, errlen, "op descriptor: param %zu reserved is %u, expected 0",
		               i, d->reserved);
	tileops__param__init(p);
	memcpy(o->names[i], d->name, sizeof(d->name));
	p->name = o->names[i];
	switch (d->kind) {
	case TILEOPS_SQE_PARAM_INT:
		p->value_case = TILEOPS__PARAM__VALUE_I;
		p->i = d->value.i;
		break;
	case TILEOPS_SQE_PARAM_FLOAT:
		p->value_case = TILEOPS__PARAM__VALUE_F;
		p->f = d->value.f;
		break;
	case TILEOPS_SQE_PARAM_BOOL:
		p->value_case = TILEOPS__PARAM__VALUE_B;
		p->b = d->value.i != 0;
		break;
	default:
		return sqe_bad(err, errlen,
		               "op descriptor: param %zu ('%.31s') kind is %u, expected %u (int), "
		               "%u (float) or %u (bool)",
		               i, d->name, d->kind, TILEOPS_SQE_PARAM_INT, TILEOPS_SQE_PARAM_FLOAT,
		               TILEOPS_SQE_PARAM_BOOL);
	}
	o->param_ptrs[i] = p;
	return TILEOPS_OK;
}

/*
 * Check an op descriptor and decode it into o. `e` is the worker's own
 * copy of the entry (ring_take), so every field is read once, here.
 */
tileops_status sqe_decode_op(const tileops_sqe *e, sqe_op_run *o, char *err, size_t errlen)
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
	tileops__op_run__init(&o->run);
	memcpy(o->op, head.op, sizeof(head.op));
	memcpy(o->inputs, e->payload + off, sizeof(uint64_t) * head.n_inputs);
	off += sizeof(uint64_t) * head.n_inputs;
	memcpy(o->outputs, e->payload + off, sizeof(uint64_t) * head.n_outputs);
	off += sizeof(uint64_t) * head.n_outputs;
	for (size_t i = 0; i < head.n_params; i++, off += sizeof(tileops_sqe_param)) {
		tileops_sqe_param d;

		memcpy(&d, e->payload + off, sizeof(d));
		tileops_status st = sqe_decode_param(&d, i, o, err, errlen);
		if (st != TILEOPS_OK)
			return st;
	}
	o->run.op = o->op;
	o->run.n_inputs = head.n_inputs;
	o->run.inputs = o->inputs;
	o->run.n_outputs = head.n_outputs;
	o->run.outputs = o->outputs;
	o->run.n_params = head.n_params;
	o->run.params = o->param_ptrs;
	return TILEOPS_OK;
}

/* Check a plan-run descriptor and decode it into o (see sqe_decode_op). */
tileops_status sqe_decode_plan_run(const tileops_sqe *e, sqe_plan_run *o, char *err, size_t errlen)
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
	tileops__plan_run__init(&o->run);
	for (uint32_t i = 0; i < head.n_bindings; i++) {
		tileops_sqe_binding b;

		memcpy(&b, e->payload + sizeof(head) + sizeof(b) * i, sizeof(b));
		tileops__plan_binding__init(&o->bindings[i]);
		o->bindings[i].plan_tensor = b.plan_tensor;
		o->bindings[i].tensor = b.tensor;
		o->binding_ptrs[i] = &o->bindings[i];
	}
	o->run.plan = head.plan;
	o->run.size = head.size;
	o->run.n_bindings = head.n_bindings;
	o->run.bindings = o->binding_ptrs;
	return TILEOPS_OK;
}
