/*
 * op.c - running ops: argument checks, the OpRun request, sync, per-op
 * device time. Ops, plan runs and syncs go through the session's rings when
 * it has them (ring.c), over nng otherwise; callers cannot tell the
 * difference. plan.c builds its ops with the same checks and encoding.
 */
#include <string.h>

#include "internal.h"

static tileops_status op_check_params(const tileops_op *op)
{
	size_t i;

	if (op->n_params > TCI_MAX_PARAMS)
		return tci_error(TILEOPS_ERR_INVALID_ARGUMENT, "%s: %zu params, at most %d",
		                 op->name, op->n_params, TCI_MAX_PARAMS);
	if (op->n_params > 0 && op->params == NULL)
		return tci_error(TILEOPS_ERR_INVALID_ARGUMENT,
		                 "%s: params is NULL with n_params %zu", op->name, op->n_params);
	for (i = 0; i < op->n_params; i++) {
		const tileops_param *p = &op->params[i];

		if (p->name == NULL || p->name[0] == '\0')
			return tci_error(TILEOPS_ERR_INVALID_ARGUMENT, "%s: param %zu has no name",
			                 op->name, i);
		if (p->kind != TILEOPS_PARAM_INT && p->kind != TILEOPS_PARAM_FLOAT &&
		    p->kind != TILEOPS_PARAM_BOOL)
			return tci_error(TILEOPS_ERR_INVALID_ARGUMENT,
			                 "%s: param '%s' has unknown kind %d", op->name, p->name,
			                 (int)p->kind);
	}
	return TILEOPS_OK;
}

tileops_status tci_op_check(const char *call, tileops_client *c, const tileops_op *op)
{
	if (c == NULL || op == NULL)
		return tci_error(TILEOPS_ERR_INVALID_ARGUMENT, "%s: %s is NULL", call,
		                 c == NULL ? "client" : "op");
	if (op->name == NULL || op->name[0] == '\0')
		return tci_error(TILEOPS_ERR_INVALID_ARGUMENT, "%s: op has no name", call);
	if (op->n_inputs > TCI_MAX_INPUTS)
		return tci_error(TILEOPS_ERR_INVALID_ARGUMENT, "%s: %zu inputs, at most %d",
		                 op->name, op->n_inputs, TCI_MAX_INPUTS);
	if (op->n_inputs > 0 && op->inputs == NULL)
		return tci_error(TILEOPS_ERR_INVALID_ARGUMENT,
		                 "%s: inputs is NULL with n_inputs %zu", op->name, op->n_inputs);
	if (op->n_outputs > TCI_MAX_OUTPUTS)
		return tci_error(TILEOPS_ERR_INVALID_ARGUMENT, "%s: %zu outputs, at most %d",
		                 op->name, op->n_outputs, TCI_MAX_OUTPUTS);
	if (op->n_outputs > 0 && op->outputs == NULL)
		return tci_error(TILEOPS_ERR_INVALID_ARGUMENT,
		                 "%s: outputs is NULL with n_outputs %zu", op->name, op->n_outputs);
	return op_check_params(op);
}

void tci_op_msg_build(struct tci_op_msg *m, const tileops_op *op)
{
	size_t i;

	tileops__request__init(&m->req);
	tileops__op_run__init(&m->body);
	m->body.op = (char *)op->name;
	m->body.n_inputs = op->n_inputs;
	m->body.inputs = (uint64_t *)op->inputs;
	m->body.n_outputs = op->n_outputs;
	m->body.outputs = (uint64_t *)op->outputs;
	for (i = 0; i < op->n_params; i++) {
		const tileops_param *p = &op->params[i];
		Tileops__Param *w = &m->params[i];

		tileops__param__init(w);
		w->name = (char *)p->name;
		switch (p->kind) {
		case TILEOPS_PARAM_INT:
			w->value_case = TILEOPS__PARAM__VALUE_I;
			w->i = p->v.i;
			break;
		case TILEOPS_PARAM_FLOAT:
			w->value_case = TILEOPS__PARAM__VALUE_F;
			w->f = p->v.f;
			break;
		case TILEOPS_PARAM_BOOL:
			w->value_case = TILEOPS__PARAM__VALUE_B;
			w->b = p->v.b != 0;
			break;
		}
		m->param_ptrs[i] = w;
	}
	m->body.n_params = op->n_params;
	m->body.params = m->param_ptrs;
	m->req.body_case = TILEOPS__REQUEST__BODY_OP_RUN;
	m->req.op_run = &m->body;
}

tileops_status tci_op_send(tileops_client *c, Tileops__Request *req, int timed,
                           tileops_completion **out)
{
	tileops_status st;

	if (c->ring != NULL) {
		st = tci_ring_submit(c, req, timed, out);
		if (st != TILEOPS_OK || *out != NULL)
			return st;
	}
	if ((st = tci_request_send(c, req, 0, out)) == TILEOPS_OK)
		(*out)->timed = timed; /* asked for, though nng cannot measure it */
	return st;
}

tileops_status tci_op_call(tileops_client *c, Tileops__Request *req)
{
	tileops_completion *r = NULL;
	tileops_status st;

	if ((st = tci_op_send(c, req, 0, &r)) != TILEOPS_OK)
		return st;
	st = tci_request_wait(r, -1);
	tci_request_free(r);
	return st;
}

TILEOPS_API tileops_status tileops_op_run(tileops_client *c, const tileops_op *op)
{
	struct tci_op_msg m;
	tileops_status st;

	if ((st = tci_op_check("op_run", c, op)) != TILEOPS_OK)
		return st;
	tci_op_msg_build(&m, op);
	return tci_op_call(c, &m.req);
}

static tileops_status op_submit(const char *call, tileops_client *c, const tileops_op *op,
                                int timed, tileops_completion **out)
{
	struct tci_op_msg m;
	tileops_status st;

	if (out == NULL)
		return tci_error(TILEOPS_ERR_INVALID_ARGUMENT, "%s: out is NULL", call);
	*out = NULL;
	if ((st = tci_op_check(call, c, op)) != TILEOPS_OK)
		return st;
	tci_op_msg_build(&m, op);
	return tci_op_send(c, &m.req, timed, out);
}

TILEOPS_API tileops_status tileops_op_submit(tileops_client *c, const tileops_op *op,
                                             tileops_completion **out)
{
	return op_submit("op_submit", c, op, 0, out);
}

TILEOPS_API tileops_status tileops_op_submit_timed(tileops_client *c, const tileops_op *op,
                                                   tileops_completion **out)
{
	return op_submit("op_submit_timed", c, op, 1, out);
}

TILEOPS_API tileops_status tileops_completion_gpu_us(tileops_completion *cp, double *us)
{
	tileops_status st;

	if (cp == NULL || us == NULL)
		return tci_error(TILEOPS_ERR_INVALID_ARGUMENT, "completion_gpu_us: %s is NULL",
		                 cp == NULL ? "completion" : "us");
	if ((st = tci_request_wait(cp, 0)) != TILEOPS_OK)
		return st;
	if (!cp->on_ring || !cp->timed || !cp->has_gpu_us)
		return tci_error(TILEOPS_ERR_UNSUPPORTED,
		                 "completion_gpu_us: no device time was measured for this op (%s)",
		                 !cp->timed ? "it was not submitted with tileops_op_submit_timed"
		                 : !cp->on_ring ? "it went to tileopsd over nng, not the rings"
		                                : "tileopsd did not report one");
	*us = cp->gpu_us;
	return TILEOPS_OK;
}

TILEOPS_API tileops_status tileops_sync(tileops_client *c)
{
	Tileops__Request req = TILEOPS__REQUEST__INIT;
	Tileops__Sync body = TILEOPS__SYNC__INIT;

	if (c == NULL)
		return tci_error(TILEOPS_ERR_INVALID_ARGUMENT, "sync: client is NULL");
	req.body_case = TILEOPS__REQUEST__BODY_SYNC;
	req.sync = &body;
	return tci_op_call(c, &req);
}
