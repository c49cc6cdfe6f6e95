/*
 * op.c - running ops: argument checks, the OpRun request, sync.
 */
#include <string.h>

#include "internal.h"

/* An OpRun request built on the caller's stack; it points into `op`. */
struct op_msg {
	Tileops__Request req;
	Tileops__OpRun body;
	Tileops__Param params[TCI_MAX_PARAMS];
	Tileops__Param *param_ptrs[TCI_MAX_PARAMS];
};

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

/* Everything the library can check without the daemon. */
static tileops_status op_check(const char *call, tileops_client *c, const tileops_op *op)
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

static void op_msg_build(struct op_msg *m, const tileops_op *op)
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

TILEOPS_API tileops_status tileops_op_run(tileops_client *c, const tileops_op *op)
{
	struct op_msg m;
	tileops_status st;

	if ((st = op_check("op_run", c, op)) != TILEOPS_OK)
		return st;
	op_msg_build(&m, op);
	return tci_request_call(c, &m.req, 0, NULL);
}

TILEOPS_API tileops_status tileops_op_submit(tileops_client *c, const tileops_op *op,
                                             tileops_completion **out)
{
	struct op_msg m;
	tileops_status st;

	if (out == NULL)
		return tci_error(TILEOPS_ERR_INVALID_ARGUMENT, "op_submit: out is NULL");
	*out = NULL;
	if ((st = op_check("op_submit", c, op)) != TILEOPS_OK)
		return st;
	op_msg_build(&m, op);
	return tci_request_send(c, &m.req, 0, out);
}

TILEOPS_API tileops_status tileops_sync(tileops_client *c)
{
	Tileops__Request req = TILEOPS__REQUEST__INIT;
	Tileops__Sync body = TILEOPS__SYNC__INIT;

	if (c == NULL)
		return tci_error(TILEOPS_ERR_INVALID_ARGUMENT, "sync: client is NULL");
	req.body_case = TILEOPS__REQUEST__BODY_SYNC;
	req.sync = &body;
	return tci_request_call(c, &req, 0, NULL);
}
