/*
 * config.h - tileopsd settings: defaults, the config file, the command line.
 *
 * The config file is "key = value" lines with '#' comments; the sample
 * deploy/tileopsd.conf documents every key. Command-line options are applied
 * after the file and win over it.
 */
#ifndef TILEOPSD_CONFIG_H
#define TILEOPSD_CONFIG_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "backend.h"
#include "tenant.h"

#define CONFIG_PATH_MAX 512

/* gemm_tune: what the daemon does for a GEMM shape the tuning cache lacks. */
typedef enum gemm_tune_mode {
	GEMM_TUNE_OFF = 0,      /* use the built-in choice */
	GEMM_TUNE_FIRST_USE = 1 /* time the candidates on first use, save the cache */
} gemm_tune_mode;

#define CONFIG_GEMM_TUNE_CACHE "/var/lib/tileops/gemm-tune.txt"

#define CONFIG_CPUS_MAX 256
/* Device ordinals a config may name: 0 .. CONFIG_DEVICE_ORDINALS - 1. */
#define CONFIG_DEVICE_ORDINALS 256

typedef struct config {
	char listen[CONFIG_PATH_MAX];
	char stats_listen[CONFIG_PATH_MAX];
	int stats_listen_set; /* stats_listen given: it no longer follows listen */
	char manifest[CONFIG_PATH_MAX];
	char config_file[CONFIG_PATH_MAX];
	char ready_file[CONFIG_PATH_MAX];
	char warmup[CONFIG_PATH_MAX];
	char gemm_tune_cache[CONFIG_PATH_MAX]; /* tuning cache file; missing is fine */
	gemm_tune_mode gemm_tune;
	int pdl;            /* launch the kernels with programmatic dependent launch */
	int diagnostic_ops; /* serve the manifest's diagnostic ops (spin, ...) */
	backend_kind backend;
	/* devices (or device, for one): the device ordinals the daemon serves,
	 * by index (a client's TensorCreate.device); on the CPU backend the
	 * emulated devices' numbers. */
	int devices[BACKEND_MAX_DEVICES];
	int n_devices;
	int log_level;
	unsigned socket_mode;
	gid_t allow_gid;     /* (gid_t)-1: none */
	int contexts;        /* nng contexts at start */
	int max_contexts;    /* nng contexts at most */
	int max_connections; /* control connections at most */
	int max_sessions_per_process;
	size_t max_message_bytes;
	size_t max_arena_bytes;
	size_t session_memory_limit; /* 0: no limit */
	int max_sessions;
	int max_pending;
	int ring_spin_us;     /* executor spins this long after the last work */
	int ring_batch;       /* ring entries taken from one session per pass */
	int stats_sample;     /* time one op in this many on the GPU */
	int executor_pace;    /* launches one busy executor thread may lead another by */
	int session_queue_us; /* device time a session may queue before it is held (0: off) */
	int device_queues;    /* CUDA hardware work queues and pooled streams (0: none) */
	int executor_threads; /* 0: 8 on the GPU, 1 on the CPU */
	/* executor_cpus: executor thread i runs on cpus[i % n_cpus] (n_cpus 0:
	 * wherever the kernel puts it). */
	int executor_cpus[CONFIG_CPUS_MAX];
	int n_executor_cpus;
	/* An executor thread that goes this long without finishing anything
	 * while it owes work stops the watchdog's petting (0: no such check). */
	int watchdog_stall_ms;
	gid_t admin_gid;            /* (gid_t)-1: none */
	tenant_quota default_quota; /* each session's own tenant */
	tenant_config tenants[TENANTS_MAX];
	int n_tenants;
	/* arena_dir: the folder of client arenas as files (empty: POSIX shm only);
	 * relative to the control socket's folder unless absolute. */
	char arena_dir[CONFIG_PATH_MAX];

	/* The Prometheus page (front/metrics.h) and the roofline's ceilings. */
	char metrics_listen[CONFIG_PATH_MAX]; /* http://HOST:PORT; empty: off */
	double roofline_bandwidth_gbs;        /* 0: the device's */
	double roofline_tflops[4]; /* bf16, fp16, fp32, fp8 (STATS_ROOF_*); 0: the device's */
} config;

/* Parse "NAME graphs=N [bytes=SIZE] [uid=U] [gid=G]". Returns 0 or -1 + message. */
int tenant_config_parse(tenant_config *tc, const char *value, const tenant_quota *defaults,
                        char *err, size_t errlen);

/* Defaults, including the default socket paths (see tileops_default_address). */
void config_defaults(config *cfg);

/*
 * Apply one setting. Returns 0, or -1 with a message naming the key and
 * what was wrong with the value.
 */
int config_set(config *cfg, const char *key, const char *value, char *err, size_t errlen);

/*
 * Read a config file into cfg. Returns 0, or -1 with "FILE:LINE: message".
 * On failure cfg may be partly updated: load into a copy.
 */
int config_load_file(config *cfg, const char *path, char *err, size_t errlen);

/* Parse "64", "4K", "1M", "2G" (powers of 1024). Returns 0 or -1. */
int config_parse_size(const char *s, size_t *out);

/* The folder of an ipc:// address's socket file, made if missing (mode 0750). */
int config_prepare_ipc_dir(const char *address, char *err, size_t errlen);

/* The arena folder, resolved into out; returns 1, or 0 when none is configured. */
int config_arena_dir(const config *cfg, char *out, size_t len);

#endif
