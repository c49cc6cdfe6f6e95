/*
 * cuda_nccl.c - collectives through NCCL, loaded when first needed (see
 * cuda_nccl.h). nccl.h gives the types and prototypes; nothing here links
 * against the library.
 */
#include "cuda_nccl.h"

#include <dlfcn.h>
#include <nccl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

#define NCCL_LIBRARY "libnccl.so.2"

/* ncclGetVersion's code for 2.10.0, the first NCCL with bf16. */
#define NCCL_BF16_VERSION 21000

/* The functions used, as nccl.h declares them. */
typedef struct nccl_api {
	ncclResult_t (*comm_init_all)(ncclComm_t *comms, int ndev, const int *devlist);
	ncclResult_t (*comm_destroy)(ncclComm_t comm);
	ncclResult_t (*group_start)(void);
	ncclResult_t (*group_end)(void);
	ncclResult_t (*all_reduce)(const void *send, void *recv, size_t count, ncclDataType_t dt,
	                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream);
	ncclResult_t (*all_gather)(const void *send, void *recv, size_t count, ncclDataType_t dt,
	                           ncclComm_t comm, cudaStream_t stream);
	ncclResult_t (*reduce_scatter)(const void *send, void *recv, size_t count,
	                               ncclDataType_t dt, ncclRedOp_t op, ncclComm_t comm,
	                               cudaStream_t stream);
	const char *(*error_string)(ncclResult_t r);
	ncclResult_t (*get_version)(int *version);
} nccl_api;

static const struct {
	const char *name;
	size_t offset;
} nccl_symbols[] = {
	{ "ncclCommInitAll", offsetof(nccl_api, comm_init_all) },
	{ "ncclCommDestroy", offsetof(nccl_api, comm_destroy) },
	{ "ncclGroupStart", offsetof(nccl_api, group_start) },
	{ "ncclGroupEnd", offsetof(nccl_api, group_end) },
	{ "ncclAllReduce", offsetof(nccl_api, all_reduce) },
	{ "ncclAllGather", offsetof(nccl_api, all_gather) },
	{ "ncclReduceScatter", offsetof(nccl_api, reduce_scatter) },
	{ "ncclGetErrorString", offsetof(nccl_api, error_string) },
	{ "ncclGetVersion", offsetof(nccl_api, get_version) },
};

/* The communicators of one ordered list of devices: comm[r] is rank r's. */
typedef struct nccl_comms {
	int n;
	int ordinals[BACKEND_MAX_DEVICES];
	ncclComm_t comm[BACKEND_MAX_DEVICES];
	struct nccl_comms *next;
} nccl_comms;

struct cuda_nccl {
	pthread_mutex_t mu; /* held through every call into NCCL */
	int loaded;
	nccl_api api;
	int major, minor, patch, version;
	nccl_comms *comms;
};

cuda_nccl *cuda_nccl_new(void)
{
	cuda_nccl *nc = calloc(1, sizeof(*nc));
	if (nc)
		pthread_mutex_init(&nc->mu, NULL);
	return nc;
}

void cuda_nccl_close(cuda_nccl *nc)
{
	if (!nc)
		return;
	while (nc->comms) {
		nccl_comms *cm = nc->comms;
		nc->comms = cm->next;
		for (int r = 0; r < cm->n; r++) {
			ncclResult_t res = nc->api.comm_destroy(cm->comm[r]);
			if (res != ncclSuccess)
				log_warn("ncclCommDestroy (CUDA device %d): %s", cm->ordinals[r],
				         nc->api.error_string(res));
		}
		free(cm);
	}
	pthread_mutex_destroy(&nc->mu);
	free(nc);
}

/* NCCL's version code: MAJOR*10000 + MINOR*100 + PATCH since 2.9, before
 * then MAJOR*1000 + MINOR*100 + PATCH (nccl.h, NCCL_VERSION). */
static void version_split(cuda_nccl *nc, int code)
{
	int major_unit = code >= 10000 ? 10000 : 1000;
	nc->version = code >= 10000 ? code : code / 1000 * 10000 + code % 1000;
	nc->major = code / major_unit;
	nc->minor = code % major_unit / 100;
	nc->patch = code % 100;
}

/* Load the library and look its functions up, once (nc->mu held). A
 * failure is not remembered: the next collective tries again. */
static tileops_status nccl_load(cuda_nccl *nc, char *err, size_t errlen)
{
	if (nc->loaded)
		return TILEOPS_OK;
	void *lib = dlopen(NCCL_LIBRARY, RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		snprintf(err, errlen,
		         "collective: cannot load %s (NCCL 2, which the CUDA backend runs "
		         "collectives on): %s; install NCCL or put its folder on LD_LIBRARY_PATH",
		         NCCL_LIBRARY, dlerror());
		return TILEOPS_ERR_UNSUPPORTED;
	}
	nccl_api api;
	for (size_t i = 0; i < sizeof(nccl_symbols) / sizeof(nccl_symbols[0]); i++) {
		dlerror();
		void *sym = dlsym(lib, nccl_symbols[i].name);
		if (!sym) {
			const char *why = dlerror();
			snprintf(err, errlen,
			         "collective: %s has no %s (%s): not an NCCL 2 library",
			         NCCL_LIBRARY, nccl_symbols[i].name, why ? why : "a null symbol");
			dlclose(lib);
			return TILEOPS_ERR_UNSUPPORTED;
		}
		/* POSIX makes an object pointer from dlsym usable as a function's. */
		memcpy((char *)&api + nccl_symbols[i].offset, &sym, sizeof(sym));
	}
	int code = 0;
	ncclResult_t res = api.get_version(&code);
	if (res != ncclSuccess) {
		snprintf(err, errlen, "collective: ncclGetVersion: %s", api.error_string(res));
		dlclose(lib);
		return TILEOPS_ERR_BACKEND;
	}
	/* Never closed: NCCL keeps process-wide state (threads, its own
	 * handlers at exit) that outlives its communicators. */
	nc->api = api;
	version_split(nc, code);
	nc->loaded = 1;
	log_info("collectives: NCCL %d.%d.%d loaded from %s", nc->major, nc->minor, nc->patch,
	         NCCL_LIBRARY);
	return TILEOPS_OK;
}

/* "0,1,3" */
static void ordinals_str(const int *ordinals, int n, char *buf, size_t len)
{
	size_t used = 0;
	buf[0] = '\0';
	for (int i = 0; i < n && used < len; i++)
		used += (size_t)snprintf(buf + used, len - used, "%s%d", i ? "," : "", ordinals[i]);
}

/* The communicators over ordinals[0..n-1] in that order, made on first
 * use (nc->mu held). */
static tileops_status comms_get(cuda_nccl *nc, const int *ordinals, int n, nccl_comms **out,
                                char *err, size_t errlen)
{
	for (nccl_comms *cm = nc->comms; cm; cm = cm->next) {
		if (cm->n == n && memcmp(cm->ordinals, ordinals, sizeof(int) * (size_t)n) == 0) {
			*out = cm;
			return TILEOPS_OK;
		}
	}
	char list[BACKEND_MAX_DEVICES * 4];
	ordinals_str(ordinals, n, list, sizeof(list));
	nccl_comms *cm = calloc(1, sizeof(*cm));
	if (!cm) {
		snprintf(err, errlen, "out of host memory");
		return TILEOPS_ERR_OUT_OF_MEMORY;
	}
	cm->n = n;
	memcpy(cm->ordinals, ordinals, sizeof(int) * (size_t)n);
	ncclResult_t res = nc->api.comm_init_all(cm->comm, n, cm->ordinals);
	if (res != ncclSuccess) {
		snprintf(err, errlen, "collective: ncclCommInitAll over CUDA devices %s: %s", list,
		         nc->api.error_string(res));
		free(cm);
		return TILEOPS_ERR_BACKEND;
	}
	cm->next = nc->comms;
	nc->comms = cm;
	log_info("collectives: NCCL communicators over CUDA devices %s (rank order)", list);
	*out = cm;
	return TILEOPS_OK;
}

static const char *kind_name(backend_coll_kind k)
{
	switch (k) {
	case BACKEND_ALL_REDUCE:
		return "ncclAllReduce";
	case BACKEND_ALL_GATHER:
		return "ncclAllGather";
	case BACKEND_REDUCE_SCATTER:
		return "ncclReduceScatter";
	}
	return "a collective";
}

/* NCCL's names for what c asks, or a message saying what it cannot. */
static tileops_status coll_check(const backend_coll *c, ncclDataType_t *dt, ncclRedOp_t *op,
                                 char *err, size_t errlen)
{
	switch (c->dtype) {
	case TK_F32:
		*dt = ncclFloat32;
		break;
	case TK_F16:
		*dt = ncclFloat16;
		break;
	case TK_BF16:
		*dt = ncclBfloat16;
		break;
	default:
		snprintf(err, errlen, "collective: dtype %d is none of f32, f16 and bf16",
		         (int)c->dtype);
		return TILEOPS_ERR_DTYPE;
	}
	if (c->kind != BACKEND_ALL_REDUCE && c->kind != BACKEND_ALL_GATHER &&
	    c->kind != BACKEND_REDUCE_SCATTER) {
		snprintf(err, errlen, "collective: unknown kind %d", (int)c->kind);
		return TILEOPS_ERR_INVALID_ARGUMENT;
	}
	switch (c->reduce) {
	case BACKEND_SUM:
		*op = ncclSum;
		break;
	case BACKEND_MAX:
		*op = ncclMax;
		break;
	case BACKEND_MIN:
		*op = ncclMin;
		break;
	default:
		if (c->kind == BACKEND_ALL_GATHER) {
			*op = ncclSum; /* not used */
			break;
		}
		snprintf(err, errlen, "collective: unknown reduction %d", (int)c->reduce);
		return TILEOPS_ERR_INVALID_ARGUMENT;
	}
	for (int r = 0; c->count > 0 && r < c->n; r++) {
		if (!c->parts[r].send || !c->parts[r].recv) {
			snprintf(err, errlen, "collective: rank %d has no %s buffer", r,
			         c->parts[r].send ? "recv" : "send");
			return TILEOPS_ERR_INVALID_ARGUMENT;
		}
	}
	return TILEOPS_OK;
}

/* Each rank's part, in one group: NCCL launches them together, which a
 * collective over several devices from one thread needs (nc->mu held). */
static tileops_status queue_ranks(cuda_nccl *nc, const nccl_comms *cm, const backend_coll *c,
                                  ncclDataType_t dt, ncclRedOp_t op, const cudaStream_t *streams,
                                  char *err, size_t errlen)
{
	ncclResult_t res = nc->api.group_start();
	if (res != ncclSuccess) {
		snprintf(err, errlen, "collective: ncclGroupStart: %s", nc->api.error_string(res));
		return TILEOPS_ERR_BACKEND;
	}
	tileops_status st = TILEOPS_OK;
	for (int r = 0; r < c->n && st == TILEOPS_OK; r++) {
		const backend_coll_part *p = &c->parts[r];
		cudaError_t e = cudaSetDevice(cm->ordinals[r]);
		if (e != cudaSuccess) {
			cudaGetLastError();
			snprintf(err, errlen, "collective: cudaSetDevice(%d): %s", cm->ordinals[r],
			         cudaGetErrorString(e));
			st = TILEOPS_ERR_BACKEND;
			break;
		}
		switch (c->kind) {
		case BACKEND_ALL_REDUCE:
			res = nc->api.all_reduce(p->send, p->recv, c->count, dt, op, cm->comm[r],
			                         streams[r]);
			break;
		case BACKEND_ALL_GATHER:
			res = nc->api.all_gather(p->send, p->recv, c->count, dt, cm->comm[r],
			                         streams[r]);
			break;
		case BACKEND_REDUCE_SCATTER:
			res = nc->api.reduce_scatter(p->send, p->recv, c->count, dt, op,
			                             cm->comm[r], streams[r]);
			break;
		}
		if (res != ncclSuccess) {
			snprintf(err, errlen, "collective: %s, rank %d of %d (CUDA device %d): %s",
			         kind_name(c->kind), r, c->n, cm->ordinals[r],
			         nc->api.error_string(res));
			st = TILEOPS_ERR_BACKEND;
		}
	}
	/* Closed whatever happened: a group left open would take in the next
	 * collective's calls. */
	res = nc->api.group_end();
	if (res != ncclSuccess && st == TILEOPS_OK) {
		snprintf(err, errlen, "collective: ncclGroupEnd (%s over %d ranks): %s",
		         kind_name(c->kind), c->n, nc->api.error_string(res));
		st = TILEOPS_ERR_BACKEND;
	}
	return st;
}

tileops_status cuda_nccl_run(cuda_nccl *nc, const backend_coll *c, const int *ordinals,
                             const cudaStream_t *streams, char *err, size_t errlen)
{
	ncclDataType_t dt = ncclFloat32;
	ncclRedOp_t op = ncclSum;
	tileops_status st = coll_check(c, &dt, &op, err, errlen);
	if (st != TILEOPS_OK)
		return st;
	pthread_mutex_lock(&nc->mu);
	st = nccl_load(nc, err, errlen);
	if (st == TILEOPS_OK && dt == ncclBfloat16 && nc->version < NCCL_BF16_VERSION) {
		snprintf(err, errlen,
		         "collective: bf16 needs NCCL 2.10 or later, and %s is NCCL %d.%d.%d",
		         NCCL_LIBRARY, nc->major, nc->minor, nc->patch);
		st = TILEOPS_ERR_UNSUPPORTED;
	}
	nccl_comms *cm = NULL;
	/* Nothing to move: done once NCCL is known to be there, so that a
	 * host without it answers alike whatever the count. */
	if (st == TILEOPS_OK && c->count > 0)
		st = comms_get(nc, ordinals, c->n, &cm, err, errlen);
	if (st == TILEOPS_OK && cm)
		st = queue_ranks(nc, cm, c, dt, op, streams, err, errlen);
	pthread_mutex_unlock(&nc->mu);
	return st;
}
