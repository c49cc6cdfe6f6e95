/* config.c - tileopsd settings (see config.h). */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "datadir.h"
#include "log.h"

static void default_dir(char *buf, size_t len)
{
	const char *xdg = getenv("XDG_RUNTIME_DIR");
	if (xdg && xdg[0] == '/')
		snprintf(buf, len, "%s/tileopsd", xdg);
	else
		snprintf(buf, len, "/run/tileopsd");
}

void config_defaults(config *cfg)
{
	char dir[CONFIG_PATH_MAX - 32];
	memset(cfg, 0, sizeof(*cfg));
	default_dir(dir, sizeof(dir));
	snprintf(cfg->listen, sizeof(cfg->listen), "ipc://%s/tileopsd.sock", dir);
	snprintf(cfg->stats_listen, sizeof(cfg->stats_listen), "ipc://%s/stats.sock", dir);
	/* Beside the executable (the build tree or any install), else as installed. */
	datadir_find("manifest", cfg->manifest, sizeof(cfg->manifest), NULL, 0);
	snprintf(cfg->gemm_tune_cache, sizeof(cfg->gemm_tune_cache), "%s", CONFIG_GEMM_TUNE_CACHE);
	cfg->gemm_tune = GEMM_TUNE_OFF;
	cfg->pdl = 1;
	cfg->backend = BACKEND_AUTO;
	cfg->devices[0] = 0;
	cfg->n_devices = 1;
	cfg->log_level = LOG_INFO;
	cfg->socket_mode = 0660;
	cfg->allow_gid = (gid_t)-1;
	cfg->contexts = 64;
	cfg->max_contexts = 4096;
	cfg->max_connections = 1024;
	cfg->max_sessions_per_process = 64;
	cfg->max_message_bytes = 1u << 20;
	cfg->max_arena_bytes = 1u << 30;
	cfg->session_memory_limit = 0;
	cfg->max_sessions = 256;
	cfg->max_pending = 256;
	cfg->ring_spin_us = 50;
	cfg->ring_batch = 32;
	cfg->stats_sample = 1024;
	cfg->executor_pace = 64;
	cfg->session_queue_us = 2000;
	cfg->watchdog_stall_ms = 60000;
	cfg->device_queues = 32;
	cfg->admin_gid = (gid_t)-1;
	cfg->default_quota.graphs = 64;
	cfg->default_quota.bytes = (size_t)1 << 30;
}

int config_parse_size(const char *s, size_t *out)
{
	char *end;
	errno = 0;
	if (!isdigit((unsigned char)*s))
		return -1;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno)
		return -1;
	unsigned shift = 0;
	switch (*end) {
	case 'k':
	case 'K':
		shift = 10;
		end++;
		break;
	case 'm':
	case 'M':
		shift = 20;
		end++;
		break;
	case 'g':
	case 'G':
		shift = 30;
		end++;
		break;
	default:
		break;
	}
	if (*end == 'B' || *end == 'b')
		end++;
	if (*end != '\0' || v > (SIZE_MAX >> shift))
		return -1;
	*out = (size_t)(v << shift);
	return 0;
}

static int parse_int(const char *s, long lo, long hi, long *out)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 0);
	if (errno || end == s || *end != '\0' || v < lo || v > hi)
		return -1;
	*out = v;
	return 0;
}

static int set_string(char *dst, size_t cap, const char *key, const char *value, char *err,
                      size_t errlen)
{
	if (strlen(value) >= cap) {
		snprintf(err, errlen, "%s: value is longer than %zu characters", key, cap - 1);
		return -1;
	}
	snprintf(dst, cap, "%s", value);
	return 0;
}

static int set_address(char *dst, const char *key, const char *value, char *err, size_t errlen)
{
	if (strncmp(value, "ipc://", 6) != 0 && strncmp(value, "tcp://", 6) != 0 &&
	    strncmp(value, "inproc://", 9) != 0) {
		snprintf(err, errlen, "%s: '%s' is not an nng address (expected ipc://PATH)", key,
		         value);
		return -1;
	}
	return set_string(dst, CONFIG_PATH_MAX, key, value, err, errlen);
}

static int set_group(gid_t *out, const char *key, const char *value, char *err, size_t errlen)
{
	long gid;
	if (parse_int(value, 0, 0x7fffffffL, &gid) == 0) {
		*out = (gid_t)gid;
		return 0;
	}
	struct group gr, *res = NULL;
	char buf[4096];
	if (getgrnam_r(value, &gr, buf, sizeof(buf), &res) != 0 || !res) {
		snprintf(err, errlen, "%s: no group named '%s'", key, value);
		return -1;
	}
	*out = res->gr_gid;
	return 0;
}

int tenant_config_parse(tenant_config *tc, const char *value, const tenant_quota *defaults,
                        char *err, size_t errlen)
{
	char buf[512];
	snprintf(buf, sizeof(buf), "%s", value);
	memset(tc, 0, sizeof(*tc));
	tc->quota = *defaults;
	tc->uid = tc->gid = -1;
	char *save = NULL;
	char *name = strtok_r(buf, " \t", &save);
	if (!name || strlen(name) >= sizeof(tc->name) || strchr(name, '=')) {
		snprintf(err, errlen,
		         "tenant: expected 'NAME graphs=N [bytes=SIZE] [uid=U] "
		         "[gid=G]', got '%s'",
		         value);
		return -1;
	}
	snprintf(tc->name, sizeof(tc->name), "%s", name);
	for (char *tok; (tok = strtok_r(NULL, " \t", &save));) {
		char *eq = strchr(tok, '=');
		long v;
		size_t sz;
		if (!eq) {
			snprintf(err, errlen, "tenant %s: '%s' is not key=value", name, tok);
			return -1;
		}
		*eq = '\0';
		const char *k = tok, *val = eq + 1;
		if (strcmp(k, "graphs") == 0 && parse_int(val, 0, 1 << 20, &v) == 0)
			tc->quota.graphs = (int)v;
		else if (strcmp(k, "bytes") == 0 && config_parse_size(val, &sz) == 0)
			tc->quota.bytes = sz;
		else if (strcmp(k, "uid") == 0 && parse_int(val, 0, 0x7fffffffL, &v) == 0)
			tc->uid = v;
		else if (strcmp(k, "gid") == 0 && parse_int(val, 0, 0x7fffffffL, &v) == 0)
			tc->gid = v;
		else {
			snprintf(err, errlen,
			         "tenant %s: bad setting %s=%s (graphs, bytes, uid, gid)", name, k,
			         val);
			return -1;
		}
	}
	return 0;
}

static int add_tenant(config *cfg, const char *value, char *err, size_t errlen)
{
	tenant_config tc;
	if (tenant_config_parse(&tc, value, &cfg->default_quota, err, errlen) != 0)
		return -1;
	for (int i = 0; i < cfg->n_tenants; i++) {
		if (strcmp(cfg->tenants[i].name, tc.name) == 0) {
			cfg->tenants[i] = tc; /* a later line replaces an earlier one */
			return 0;
		}
	}
	if (cfg->n_tenants == TENANTS_MAX) {
		snprintf(err, errlen, "tenant: at most %d named tenants", TENANTS_MAX);
		return -1;
	}
	cfg->tenants[cfg->n_tenants++] = tc;
	return 0;
}

/* "0-7", "0,2,4-6": each CPU once, in order; at most CONFIG_CPUS_MAX. */
/*
 * A list like 0-7 or 0,2,4-6 of numbers below `below`, each at most once,
 * at most `max` of them, into out[]; `what` names one ("CPU", "device").
 */
static int set_list(const char *key, const char *value, const char *what, int below, int max,
                    int *out, int *n_out, char *err, size_t errlen)
{
	int n = 0;
	const char *p = value;
	unsigned char seen[CONFIG_CPUS_MAX] = { 0 };
	while (*p) {
		char *end;
		errno = 0;
		long lo = strtol(p, &end, 10), hi = lo;
		if (end == p || errno || lo < 0 || lo >= below)
			goto bad;
		p = end;
		if (*p == '-') {
			hi = strtol(++p, &end, 10);
			if (end == p || errno || hi < lo || hi >= below)
				goto bad;
			p = end;
		}
		for (long c = lo; c <= hi; c++) {
			if (seen[c]) {
				snprintf(err, errlen, "%s: %s %ld is listed twice in '%s'", key,
				         what, c, value);
				return -1;
			}
			if (n == max) {
				snprintf(err, errlen, "%s: '%s' lists more than %d %ss", key, value,
				         max, what);
				return -1;
			}
			seen[c] = 1;
			out[n++] = (int)c;
		}
		if (*p == ',' && p[1] != '\0')
			p++;
		else if (*p != '\0')
			goto bad;
	}
	if (n == 0)
		goto bad;
	*n_out = n;
	return 0;
bad:
	snprintf(err, errlen, "%s: '%s' is not a %s list like 0-7 or 0,2,4-6 (%ss below %d)", key,
	         value, what, what, below);
	return -1;
}

static int set_cpus(config *cfg, const char *key, const char *value, char *err, size_t errlen)
{
	return set_list(key, value, "CPU", CONFIG_CPUS_MAX, CONFIG_CPUS_MAX, cfg->executor_cpus,
	                &cfg->n_executor_cpus, err, errlen);
}

/* devices = LIST, or device = N (one device). */
static int set_devices(config *cfg, const char *key, const char *value, char *err, size_t errlen)
{
	int devices[BACKEND_MAX_DEVICES], n = 0;
	if (set_list(key, value, "device", CONFIG_DEVICE_ORDINALS, BACKEND_MAX_DEVICES, devices, &n,
	             err, errlen) != 0)
		return -1;
	if (strcmp(key, "device") == 0 && n != 1) {
		snprintf(err, errlen,
		         "device: '%s' names %d devices (devices = LIST takes several)", value, n);
		return -1;
	}
	memcpy(cfg->devices, devices, sizeof(devices[0]) * (size_t)n);
	cfg->n_devices = n;
	return 0;
}

typedef struct size_key {
	const char *key;
	size_t offset;
	size_t min;
} size_key;

static const size_key size_keys[] = {
	{ "max_message_bytes", offsetof(config, max_message_bytes), 4096 },
	{ "max_arena_bytes", offsetof(config, max_arena_bytes), 4096 },
	{ "session_memory_limit", offsetof(config, session_memory_limit), 0 },
	{ "tenant_graph_bytes", offsetof(config, default_quota.bytes), 0 },
};

typedef struct int_key {
	const char *key;
	size_t offset;
	long min, max;
} int_key;

static const int_key int_keys[] = {
	{ "contexts", offsetof(config, contexts), 1, 4096 },
	{ "max_contexts", offsetof(config, max_contexts), 1, 1 << 20 },
	{ "max_connections", offsetof(config, max_connections), 1, 1 << 20 },
	{ "max_sessions_per_process", offsetof(config, max_sessions_per_process), 1, 1 << 20 },
	{ "max_sessions", offsetof(config, max_sessions), 1, 65536 },
	{ "max_pending", offsetof(config, max_pending), 1, 65536 },
	{ "ring_spin_us", offsetof(config, ring_spin_us), 0, 100000 },
	{ "ring_batch", offsetof(config, ring_batch), 1, 4096 },
	{ "stats_sample", offsetof(config, stats_sample), 0, 1 << 20 },
	{ "executor_threads", offsetof(config, executor_threads), 0, 64 },
	{ "executor_pace", offsetof(config, executor_pace), 0, 1 << 20 },
	{ "session_queue_us", offsetof(config, session_queue_us), 0, 10000000 },
	{ "watchdog_stall_ms", offsetof(config, watchdog_stall_ms), 0, 3600000 },
	{ "device_queues", offsetof(config, device_queues), 0, 32 },
	{ "tenant_graphs", offsetof(config, default_quota.graphs), 0, 1 << 20 },
};

/*
 * Unless stats_listen was given, the stats socket follows the control
 * socket: stats.sock in the same folder, so that daemons started with
 * different --listen folders (one per GPU) do not share one stats socket.
 * A listen address that is not ipc:// leaves the default.
 */
static void stats_beside_listen(config *cfg)
{
	const char *path = cfg->listen + 6, *slash = strrchr(path, '/');
	if (strncmp(cfg->listen, "ipc://", 6) != 0 || !slash)
		return;
	snprintf(cfg->stats_listen, sizeof(cfg->stats_listen), "ipc://%.*s/stats.sock",
	         (int)(slash - path), path);
}

/* "on" or "off" (also true/false, yes/no, 1/0). */
static int set_switch(int *out, const char *key, const char *value, char *err, size_t errlen)
{
	static const char *const on[] = { "on", "true", "yes", "1" };
	static const char *const off[] = { "off", "false", "no", "0" };
	for (size_t i = 0; i < sizeof(on) / sizeof(on[0]); i++) {
		if (strcmp(value, on[i]) == 0) {
			*out = 1;
			return 0;
		}
		if (strcmp(value, off[i]) == 0) {
			*out = 0;
			return 0;
		}
	}
	snprintf(err, errlen, "%s: '%s' is not on or off", key, value);
	return -1;
}

/* ---- metrics and roofline keys ---- */

/* "http://HOST:PORT" with an optional "/": HOST a name, an IPv4 address or
 * [an IPv6 one], PORT in 1..65535. Empty turns the page off. */
static int set_metrics_listen(config *cfg, const char *value, char *err, size_t errlen)
{
	const char *bad = NULL, *colon = NULL;
	if (!value[0]) {
		cfg->metrics_listen[0] = '\0';
		return 0;
	}
	if (strncmp(value, "http://", 7) != 0) {
		bad = "does not start with http://";
	} else {
		const char *host = value + 7, *p = host;
		if (*p == '[') {
			while (*p && *p != ']')
				p++;
			if (*p == ']')
				p++;
		} else {
			while (*p && *p != ':' && *p != '/')
				p++;
		}
		colon = *p == ':' ? p : NULL;
		long port = 0;
		char *end = NULL;
		if (colon)
			port = strtol(colon + 1, &end, 10);
		if (p == host || (host[0] == '[' && p[-1] != ']'))
			bad = "has no host";
		else if (!colon || end == colon + 1 || (*end && strcmp(end, "/") != 0))
			bad = "has no :PORT (or something follows it)";
		else if (port < 1 || port > 65535)
			bad = "has a port outside 1..65535";
	}
	if (bad) {
		snprintf(err, errlen,
		         "metrics_listen: '%s' %s (expected http://HOST:PORT, e.g. "
		         "http://127.0.0.1:9464)",
		         value, bad);
		return -1;
	}
	return set_string(cfg->metrics_listen, sizeof(cfg->metrics_listen), "metrics_listen", value,
	                  err, errlen);
}

/* The roofline keys: a rate >= 0 (0: the device's figure). Returns 1 when
 * key is not one of them. */
static int set_roofline(config *cfg, const char *key, const char *value, char *err, size_t errlen)
{
	static const char *const tflops[] = { "roofline_tflops_bf16", "roofline_tflops_fp16",
		                              "roofline_tflops_fp32", "roofline_tflops_fp8" };
	double *dst = NULL;
	if (strcmp(key, "roofline_bandwidth_gbs") == 0)
		dst = &cfg->roofline_bandwidth_gbs;
	for (int i = 0; i < 4; i++)
		if (strcmp(key, tflops[i]) == 0)
			dst = &cfg->roofline_tflops[i];
	if (!dst)
		return 1;
	char *end;
	errno = 0;
	double v = strtod(value, &end);
	if (!value[0] || *end || errno || !(v >= 0.0 && v < 1e9)) {
		snprintf(err, errlen, "%s: '%s' is not a number >= 0 (0: the device's figure)", key,
		         value);
		return -1;
	}
	*dst = v;
	return 0;
}

int config_set(config *cfg, const char *key, const char *value, char *err, size_t errlen)
{
	if (strcmp(key, "metrics_listen") == 0)
		return set_metrics_listen(cfg, value, err, errlen);
	int roof =
	        strncmp(key, "roofline_", 9) == 0 ? set_roofline(cfg, key, value, err, errlen) : 1;
	if (roof <= 0)
		return roof;
	if (strcmp(key, "listen") == 0) {
		if (set_address(cfg->listen, key, value, err, errlen) != 0)
			return -1;
		if (!cfg->stats_listen_set)
			stats_beside_listen(cfg);
		return 0;
	}
	if (strcmp(key, "stats_listen") == 0) {
		cfg->stats_listen_set = 1;
		return set_address(cfg->stats_listen, key, value, err, errlen);
	}
	if (strcmp(key, "manifest") == 0)
		return set_string(cfg->manifest, sizeof(cfg->manifest), key, value, err, errlen);
	if (strcmp(key, "warmup") == 0)
		return set_string(cfg->warmup, sizeof(cfg->warmup), key, value, err, errlen);
	if (strcmp(key, "ready_file") == 0)
		return set_string(cfg->ready_file, sizeof(cfg->ready_file), key, value, err,
		                  errlen);
	if (strcmp(key, "gemm_tune_cache") == 0)
		return set_string(cfg->gemm_tune_cache, sizeof(cfg->gemm_tune_cache), key, value,
		                  err, errlen);
	if (strcmp(key, "pdl") == 0)
		return set_switch(&cfg->pdl, key, value, err, errlen);
	if (strcmp(key, "gemm_tune") == 0) {
		if (strcmp(value, "off") == 0)
			cfg->gemm_tune = GEMM_TUNE_OFF;
		else if (strcmp(value, "first_use") == 0)
			cfg->gemm_tune = GEMM_TUNE_FIRST_USE;
		else {
			snprintf(err, errlen, "gemm_tune: '%s' is not one of off, first_use",
			         value);
			return -1;
		}
		return 0;
	}
	if (strcmp(key, "diagnostic_ops") == 0)
		return set_switch(&cfg->diagnostic_ops, key, value, err, errlen);
	if (strcmp(key, "backend") == 0) {
		if (strcmp(value, "auto") == 0)
			cfg->backend = BACKEND_AUTO;
		else if (strcmp(value, "cpu") == 0)
			cfg->backend = BACKEND_CPU;
		else if (strcmp(value, "cuda") == 0)
			cfg->backend = BACKEND_CUDA;
		else {
			snprintf(err, errlen, "backend: '%s' is not one of auto, cuda, cpu", value);
			return -1;
		}
		return 0;
	}
	if (strcmp(key, "log_level") == 0) {
		int lv = log_level_parse(value);
		if (lv < 0) {
			snprintf(err, errlen,
			         "log_level: '%s' is not one of error, warn, info, debug", value);
			return -1;
		}
		cfg->log_level = lv;
		return 0;
	}
	if (strcmp(key, "socket_mode") == 0) {
		char *end;
		unsigned long m = strtoul(value, &end, 8);
		if (*value == '\0' || *end != '\0' || m > 0777) {
			snprintf(err, errlen, "socket_mode: '%s' is not an octal mode like 0660",
			         value);
			return -1;
		}
		cfg->socket_mode = (unsigned)m;
		return 0;
	}
	if (strcmp(key, "allow_group") == 0)
		return set_group(&cfg->allow_gid, key, value, err, errlen);
	if (strcmp(key, "admin_group") == 0)
		return set_group(&cfg->admin_gid, key, value, err, errlen);
	if (strcmp(key, "tenant") == 0)
		return add_tenant(cfg, value, err, errlen);
	if (strcmp(key, "executor_cpus") == 0)
		return set_cpus(cfg, key, value, err, errlen);
	if (strcmp(key, "devices") == 0 || strcmp(key, "device") == 0)
		return set_devices(cfg, key, value, err, errlen);
	for (size_t i = 0; i < sizeof(size_keys) / sizeof(size_keys[0]); i++) {
		if (strcmp(key, size_keys[i].key) != 0)
			continue;
		size_t v;
		if (config_parse_size(value, &v) != 0 || v < size_keys[i].min) {
			snprintf(err, errlen, "%s: '%s' is not a size of at least %zu (e.g. 64M)",
			         key, value, size_keys[i].min);
			return -1;
		}
		*(size_t *)((char *)cfg + size_keys[i].offset) = v;
		return 0;
	}
	for (size_t i = 0; i < sizeof(int_keys) / sizeof(int_keys[0]); i++) {
		if (strcmp(key, int_keys[i].key) != 0)
			continue;
		long v;
		if (parse_int(value, int_keys[i].min, int_keys[i].max, &v) != 0) {
			snprintf(err, errlen, "%s: '%s' is not an integer in [%ld, %ld]", key,
			         value, int_keys[i].min, int_keys[i].max);
			return -1;
		}
		*(int *)((char *)cfg + int_keys[i].offset) = (int)v;
		return 0;
	}
	if (strcmp(key, "arena_dir") == 0)
		return set_string(cfg->arena_dir, sizeof(cfg->arena_dir), key, value, err, errlen);
	snprintf(err, errlen, "unknown key '%s'", key);
	return -1;
}

static char *trim(char *s)
{
	while (isspace((unsigned char)*s))
		s++;
	char *e = s + strlen(s);
	while (e > s && isspace((unsigned char)e[-1]))
		*--e = '\0';
	return s;
}

int config_load_file(config *cfg, const char *path, char *err, size_t errlen)
{
	FILE *f = fopen(path, "r");
	if (!f) {
		snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
		return -1;
	}
	char line[1024];
	int lineno = 0, rc = 0;
	while (fgets(line, sizeof(line), f)) {
		lineno++;
		if (!strchr(line, '\n') && !feof(f)) {
			snprintf(err, errlen, "%s:%d: line is longer than %zu characters", path,
			         lineno, sizeof(line) - 2);
			rc = -1;
			break;
		}
		char *hash = strchr(line, '#');
		if (hash)
			*hash = '\0';
		char *s = trim(line);
		if (*s == '\0')
			continue;
		char *eq = strchr(s, '=');
		if (!eq) {
			snprintf(err, errlen, "%s:%d: expected 'key = value', got '%s'", path,
			         lineno, s);
			rc = -1;
			break;
		}
		*eq = '\0';
		char *key = trim(s), *value = trim(eq + 1);
		char msg[512];
		if (config_set(cfg, key, value, msg, sizeof(msg)) != 0) {
			snprintf(err, errlen, "%s:%d: %s", path, lineno, msg);
			rc = -1;
			break;
		}
	}
	fclose(f);
	if (rc == 0)
		snprintf(cfg->config_file, sizeof(cfg->config_file), "%s", path);
	return rc;
}

int config_prepare_ipc_dir(const char *address, char *err, size_t errlen)
{
	if (strncmp(address, "ipc://", 6) != 0)
		return 0;
	char dir[CONFIG_PATH_MAX];
	snprintf(dir, sizeof(dir), "%s", address + 6);
	char *slash = strrchr(dir, '/');
	if (!slash || slash == dir)
		return 0;
	*slash = '\0';
	struct stat st;
	if (stat(dir, &st) == 0)
		return 0;
	/* Make each missing component; the last one holds the socket files. */
	for (char *p = dir + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
			snprintf(err, errlen, "cannot create %s: %s", dir, strerror(errno));
			return -1;
		}
		*p = '/';
	}
	if (mkdir(dir, 0750) != 0 && errno != EEXIST) {
		snprintf(err, errlen, "cannot create %s: %s", dir, strerror(errno));
		return -1;
	}
	return 0;
}

int config_arena_dir(const config *cfg, char *out, size_t len)
{
	out[0] = '\0';
	if (!cfg->arena_dir[0])
		return 0;
	/* Relative: inside the control socket's folder, where libtileops looks
	 * for it (and one line serves every daemon of a node, each its own). */
	const char *slash = strrchr(cfg->listen, '/');
	if (cfg->arena_dir[0] != '/' && strncmp(cfg->listen, "ipc://", 6) == 0 && slash &&
	    slash > cfg->listen + 6)
		snprintf(out, len, "%.*s/%s", (int)(slash - (cfg->listen + 6)), cfg->listen + 6,
		         cfg->arena_dir);
	else
		snprintf(out, len, "%s", cfg->arena_dir);
	return 1;
}
