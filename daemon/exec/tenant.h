/*
 * tenant.h - tenants of the graph cache, as configured and as the executor
 * keeps them (plan.c has the plans and the cache itself).
 */
#ifndef TILEOPSD_TENANT_H
#define TILEOPSD_TENANT_H

#include <stddef.h>
#include <stdint.h>

#include "stats.h"

#define TENANT_NAME_MAX 64
#define TENANTS_MAX 64

typedef struct tenant_quota {
	int graphs;   /* captured buckets kept at once (each with a graph per segment) */
	size_t bytes; /* device bytes they may hold (0: no limit) */
} tenant_quota;

/* A named tenant from the config: who may join it and its quota. */
typedef struct tenant_config {
	char name[TENANT_NAME_MAX];
	tenant_quota quota;
	int64_t uid; /* -1: any uid allowed to connect */
	int64_t gid; /* -1: any gid */
} tenant_config;

typedef struct tenant_stats {
	uint64_t runs, hits, misses, captures, evictions;
	double capture_us;
} tenant_stats;

struct plan_graph;

typedef struct tenant {
	char name[TENANT_NAME_MAX];
	tenant_quota quota;
	uint64_t private_to; /* the session id of a session's own tenant, else 0 */
	int sessions;
	int n_graphs;   /* cached entries, one per (plan, bucket): what quota.graphs counts */
	int n_segments; /* the graphs and collectives of those entries, one per plan segment */
	size_t bytes;   /* the device bytes of all their graphs */
	struct plan_graph *lru_head, *lru_tail;
	struct plan *shared; /* warm-up plans its sessions may open by name */
	tenant_stats st;
	struct tenant *next;
} tenant;

#endif
