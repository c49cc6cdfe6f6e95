/*
 * fuzz_seeds.c - fuzz_seeds DIR: writes starting corpora for the control and
 * ring harnesses (DIR/control, DIR/ring) and the expression harness
 * (DIR/expr): valid messages and entries of every kind, so the fuzzers
 * start from inputs that pass the first checks. The manifest harness is
 * seeded with manifest/ itself.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tileops.pb-c.h"
#include "tileops_ring.h"

static const char *out_dir;
static int n_written;

static void put(const char *sub, const void *buf, size_t len)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", out_dir, sub);
	mkdir(path, 0755);
	snprintf(path, sizeof(path), "%s/%s/seed-%03d", out_dir, sub, n_written++);
	FILE *f = fopen(path, "wb");
	if (!f || fwrite(buf, 1, len, f) != len || fclose(f) != 0) {
		fprintf(stderr, "fuzz_seeds: %s: %s\n", path, strerror(errno));
		exit(1);
	}
}

static void put_request(Tileops__Request *r)
{
	uint8_t buf[8192];
	size_t len = tileops__request__get_packed_size(r);
	if (len > sizeof(buf))
		exit(2);
	tileops__request__pack(r, buf);
	put("control", buf, len);
}

/* An op with its params, on the harness's handles 1..8. */
static void op_run(Tileops__OpRun *o, const char *name, uint64_t *io, size_t n_in, size_t n_out,
                   Tileops__Param **ps, size_t np)
{
	tileops__op_run__init(o);
	o->op = (char *)name;
	o->inputs = io;
	o->n_inputs = n_in;
	o->outputs = io + n_in;
	o->n_outputs = n_out;
	o->params = ps;
	o->n_params = np;
}

static void ring_op(const char *name, const uint64_t *io, uint32_t n_in, uint32_t n_out,
                    const char *pname, double pvalue)
{
	tileops_sqe e;
	memset(&e, 0, sizeof(e));
	e.kind = TILEOPS_SQE_OP;
	tileops_sqe_op head;
	memset(&head, 0, sizeof(head));
	snprintf(head.op, sizeof(head.op), "%s", name);
	head.n_inputs = n_in;
	head.n_outputs = n_out;
	head.n_params = pname ? 1 : 0;
	size_t off = 0;
	memcpy(e.payload, &head, sizeof(head));
	off += sizeof(head);
	memcpy(e.payload + off, io, sizeof(uint64_t) * (n_in + n_out));
	off += sizeof(uint64_t) * (n_in + n_out);
	if (pname) {
		tileops_sqe_param p;
		memset(&p, 0, sizeof(p));
		snprintf(p.name, sizeof(p.name), "%s", pname);
		p.kind = TILEOPS_SQE_PARAM_FLOAT;
		p.value.f = pvalue;
		memcpy(e.payload + off, &p, sizeof(p));
		off += sizeof(p);
	}
	e.length = (uint32_t)off;
	put("ring", &e, 24 + off);
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: fuzz_seeds DIR\n");
		return 2;
	}
	out_dir = argv[1];
	mkdir(out_dir, 0755);

	Tileops__Request r = TILEOPS__REQUEST__INIT;
	Tileops__TensorCreate tc = TILEOPS__TENSOR_CREATE__INIT;
	int64_t shape[3] = { 4, 4096, 0 };
	tc.dtype = TILEOPS__DTYPE__DTYPE_BF16;
	tc.shape = shape;
	tc.n_shape = 2;
	r.seq = 1;
	r.body_case = TILEOPS__REQUEST__BODY_TENSOR_CREATE;
	r.tensor_create = &tc;
	put_request(&r);
	tc.n_shape = 3;
	put_request(&r);

	Tileops__TensorWrite tw = TILEOPS__TENSOR_WRITE__INIT;
	tw.handle = 1;
	tw.length = 64;
	tw.arena_offset = 4096;
	r.body_case = TILEOPS__REQUEST__BODY_TENSOR_WRITE;
	r.tensor_write = &tw;
	put_request(&r);

	Tileops__Param eps = TILEOPS__PARAM__INIT, dim = TILEOPS__PARAM__INIT;
	eps.name = "eps";
	eps.value_case = TILEOPS__PARAM__VALUE_F;
	eps.f = 1e-6;
	dim.name = "dim";
	dim.value_case = TILEOPS__PARAM__VALUE_I;
	dim.i = -1;
	Tileops__Param *ps[2] = { &eps, &dim };
	uint64_t io[8] = { 1, 2, 1, 0, 0, 0, 0, 0 };
	Tileops__OpRun o[4];
	op_run(&o[0], "rms_norm", io, 2, 1, ps, 1);
	op_run(&o[1], "add", io, 2, 1, NULL, 0);
	op_run(&o[2], "softmax", io, 1, 1, ps + 1, 1);
	op_run(&o[3], "gemm", io, 2, 1, NULL, 0);
	r.body_case = TILEOPS__REQUEST__BODY_OP_RUN;
	for (int i = 0; i < 4; i++) {
		r.op_run = &o[i];
		put_request(&r);
	}

	Tileops__OpRun *ops[4] = { &o[0], &o[1], &o[2], &o[3] };
	Tileops__PlanCreate pc = TILEOPS__PLAN_CREATE__INIT;
	int64_t buckets[2] = { 1, 4 };
	uint64_t bucketed[1] = { 1 };
	pc.ops = ops;
	pc.n_ops = 4;
	pc.buckets = buckets;
	pc.n_buckets = 2;
	pc.bucketed = bucketed;
	pc.n_bucketed = 1;
	pc.name = "seed";
	r.body_case = TILEOPS__REQUEST__BODY_PLAN_CREATE;
	r.plan_create = &pc;
	put_request(&r);

	Tileops__PlanBinding b = TILEOPS__PLAN_BINDING__INIT, *bp = &b;
	b.plan_tensor = 1;
	b.tensor = 5;
	Tileops__PlanRun pr = TILEOPS__PLAN_RUN__INIT;
	pr.plan = 9;
	pr.size = 2;
	pr.bindings = &bp;
	pr.n_bindings = 1;
	r.body_case = TILEOPS__REQUEST__BODY_PLAN_RUN;
	r.plan_run = &pr;
	put_request(&r);

	ring_op("rms_norm", io, 2, 1, "eps", 1e-6);
	ring_op("add", io, 2, 1, NULL, 0);
	ring_op("attention_decode", io, 4, 1, "scale", 0.125);
	{
		tileops_sqe e;
		memset(&e, 0, sizeof(e));
		e.kind = TILEOPS_SQE_PLAN_RUN;
		e.flags = TILEOPS_SQE_F_TRACE;
		tileops_sqe_plan_run head = { .plan = 9, .size = 2, .n_bindings = 1 };
		tileops_sqe_binding bind = { 1, 5 };
		memcpy(e.payload, &head, sizeof(head));
		memcpy(e.payload + sizeof(head), &bind, sizeof(bind));
		e.length = (uint32_t)(sizeof(head) + sizeof(bind));
		put("ring", &e, 24 + e.length);
	}
	for (uint32_t k = TILEOPS_SQE_EVENT_WAIT; k <= TILEOPS_SQE_EVENT_RECORD; k++) {
		tileops_sqe e;
		memset(&e, 0, sizeof(e));
		e.kind = k;
		tileops_sqe_event d = { k == TILEOPS_SQE_EVENT_WAIT ? 1 : 0, 0 };
		memcpy(e.payload, &d, sizeof(d));
		e.length = (uint32_t)sizeof(d);
		put("ring", &e, 24 + e.length);
	}
	{
		tileops_sqe e;
		memset(&e, 0, sizeof(e));
		e.kind = TILEOPS_SQE_REQUEST;
		e.flags = TILEOPS_SQE_F_TIMING | TILEOPS_SQE_F_TRACE;
		r.body_case = TILEOPS__REQUEST__BODY_OP_RUN;
		r.op_run = &o[0];
		e.length = (uint32_t)tileops__request__get_packed_size(&r);
		tileops__request__pack(&r, e.payload);
		put("ring", &e, 24 + e.length);
	}

	static const char *const exprs[] = {
		"x.shape[-1]",
		"[x.shape[0], weight.shape[0]]",
		"x.shape[:2] == weight.shape[:2]",
		"2 * n * d / (2 if causal else 1)",
		"eps > 0 and dim >= -x.ndim and dim < x.ndim",
		"not has(weight) or weight.shape[0] == x.shape[-1]",
		"elem_bytes(x) * numel(x) + n // 3 % 7",
		"broadcastable(x, out)",
	};
	for (size_t i = 0; i < sizeof(exprs) / sizeof(exprs[0]); i++)
		put("expr", exprs[i], strlen(exprs[i]));
	printf("fuzz_seeds: %d seeds in %s\n", n_written, out_dir);
	return 0;
}
