/*
 * expr_internal.h - the parsed form of an expression, shared by the parser
 * (expr.c) and the evaluator (expr_eval.c). Not part of the manifest API.
 */
#ifndef TILEOPS_EXPR_INTERNAL_H
#define TILEOPS_EXPR_INTERNAL_H

#include "expr.h"

enum node_op {
	N_INT,
	N_FLOAT,
	N_BOOL,
	N_TENSOR,
	N_PARAM,
	N_VAR,
	N_ELEM_BYTES0,
	N_SHAPE,
	N_NDIM,
	N_NUMEL,
	N_INDEX,
	N_SLICE,
	N_LIST,
	N_NEG,
	N_NOT,
	N_ADD,
	N_SUB,
	N_MUL,
	N_DIV,
	N_IDIV,
	N_MOD,
	N_EQ,
	N_NE,
	N_LT,
	N_LE,
	N_GT,
	N_GE,
	N_AND,
	N_OR,
	N_COND,
	N_DIM,
	N_PRODUCT,
	N_LEN,
	N_MIN,
	N_MAX,
	N_ELEM_BYTES,
	N_CEIL_DIV,
	N_BROADCASTABLE,
	N_HAS,
	N_BROADCAST_SHAPE
};

typedef struct node {
	uint8_t op;
	uint8_t type;
	int32_t pos;     /* byte offset in the source */
	int32_t a, b, c; /* children; -1 when absent */
	int32_t next;    /* next element of a list literal or argument list */
	union {
		int64_t i;
		double f;
	} v;
} node;

struct expr {
	char *text;
	node *nodes;
	int n;
	int root;
	uint32_t tensors, params, vars;
};

#endif /* TILEOPS_EXPR_INTERNAL_H */
