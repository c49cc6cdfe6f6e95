/*
 * main.c - tileopsd: command line, start-up and exit status.
 * See deploy/tileopsd.conf for every setting and docs/operations.md.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "datadir.h"
#include "log.h"
#include "manifest.h"
#include "server.h"
#include "transport.h"
#include "tuning.h"
#include "warmup.h"

static void usage(FILE *f)
{
	char manifest_dir[4096];
	datadir_find("manifest", manifest_dir, sizeof(manifest_dir), NULL, 0);
	fprintf(f,
	        "usage: tileopsd [OPTIONS]\n"
	        "Runs LLM operators for local clients (libtileops) on a GPU or the CPU.\n"
	        "\n"
	        "  -c, --config FILE      read settings from FILE (see deploy/tileopsd.conf)\n"
	        "  -l, --listen ADDR      control socket (default "
	        "ipc://$XDG_RUNTIME_DIR/tileopsd/tileopsd.sock,\n"
	        "                         or ipc:///run/tileopsd/tileopsd.sock)\n"
	        "  -s, --stats ADDR       stats socket (default stats.sock in the folder\n"
	        "                         of the control socket)\n"
	        "  -b, --backend KIND     auto | cuda | cpu (auto: cuda when a GPU is present)\n"
	        "  -d, --device N         CUDA device ordinal (default 0)\n"
	        "  -m, --manifest PATH    op manifest folder (default %s)\n"
	        "      --log-level LEVEL  error | warn | info | debug (default info)\n"
	        "      --ready-file PATH  write the pid to PATH once serving (removed at exit)\n"
	        "      --warmup FILE      plans to capture before serving (deploy/warmup.yaml)\n"
	        "      --gemm-tune-cache FILE\n"
	        "                         the tuning table (default %s)\n"
	        "      --diagnostic-ops   also serve the diagnostic ops (spin: benches, tests)\n"
	        "      --check            check the config, the manifest and the warm-up file,\n"
	        "                         print what is wrong, and exit (0: all valid)\n"
	        "  -h, --help             print this and exit\n"
	        "  -V, --version          print the version and exit\n"
	        "\n"
	        "Signals: SIGINT/SIGTERM stop after finishing work in flight; SIGHUP reloads\n"
	        "the config file and the manifest.\n",
	        manifest_dir, CONFIG_GEMM_TUNE_CACHE);
}

enum {
	OPT_LOG_LEVEL = 256,
	OPT_READY_FILE,
	OPT_CHECK,
	OPT_WARMUP,
	OPT_DIAGNOSTIC_OPS,
	OPT_GEMM_TUNE_CACHE
};

static int check_only;

static const struct option long_opts[] = {
	{ "config", required_argument, NULL, 'c' },
	{ "listen", required_argument, NULL, 'l' },
	{ "stats", required_argument, NULL, 's' },
	{ "backend", required_argument, NULL, 'b' },
	{ "device", required_argument, NULL, 'd' },
	{ "manifest", required_argument, NULL, 'm' },
	{ "log-level", required_argument, NULL, OPT_LOG_LEVEL },
	{ "ready-file", required_argument, NULL, OPT_READY_FILE },
	{ "check", no_argument, NULL, OPT_CHECK },
	{ "warmup", required_argument, NULL, OPT_WARMUP },
	{ "diagnostic-ops", no_argument, NULL, OPT_DIAGNOSTIC_OPS },
	{ "gemm-tune-cache", required_argument, NULL, OPT_GEMM_TUNE_CACHE },
	{ "help", no_argument, NULL, 'h' },
	{ "version", no_argument, NULL, 'V' },
	{ NULL, 0, NULL, 0 },
};

static const char *opt_key(int c)
{
	switch (c) {
	case 'l':
		return "listen";
	case 's':
		return "stats_listen";
	case 'b':
		return "backend";
	case 'd':
		return "device";
	case 'm':
		return "manifest";
	case OPT_LOG_LEVEL:
		return "log_level";
	case OPT_READY_FILE:
		return "ready_file";
	case OPT_WARMUP:
		return "warmup";
	case OPT_GEMM_TUNE_CACHE:
		return "gemm_tune_cache";
	default:
		return NULL;
	}
}

/* The config file first, then the options, which win over it. */
static int parse_args(int argc, char **argv, config *cfg)
{
	char err[600];
	const char *file = NULL;
	int c;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":c:l:s:b:d:m:hV", long_opts, NULL)) != -1) {
		switch (c) {
		case 'h':
			usage(stdout);
			exit(0);
		case 'V':
			printf("tileopsd %s\n", TILEOPS_VERSION);
			exit(0);
		case 'c':
			file = optarg;
			break;
		case OPT_CHECK:
			check_only = 1;
			break;
		case ':':
			fprintf(stderr, "tileopsd: option '%s' needs a value\n", argv[optind - 1]);
			return -1;
		case '?':
			fprintf(stderr, "tileopsd: unknown option '%s' (see tileopsd --help)\n",
			        argv[optind - 1]);
			return -1;
		default:
			break;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "tileopsd: unexpected argument '%s' (see tileopsd --help)\n",
		        argv[optind]);
		return -1;
	}
	if (file && config_load_file(cfg, file, err, sizeof(err)) != 0) {
		fprintf(stderr, "tileopsd: %s\n", err);
		return -1;
	}
	optind = 1;
	while ((c = getopt_long(argc, argv, ":c:l:s:b:d:m:hV", long_opts, NULL)) != -1) {
		const char *key = opt_key(c);
		if (c == OPT_DIAGNOSTIC_OPS)
			cfg->diagnostic_ops = 1;
		else if (key && config_set(cfg, key, optarg, err, sizeof(err)) != 0) {
			fprintf(stderr, "tileopsd: %s\n", err);
			return -1;
		}
	}
	return 0;
}

/* --check: everything a start would read, without starting. */
static int check_files(const config *cfg)
{
	char err[4096];
	manifest *m = NULL;
	warm_spec *w = NULL;
	int rc = 0;
	if (manifest_load(cfg->manifest, &m, err, sizeof(err)) != 0) {
		fprintf(stderr, "tileopsd: manifest: %s\n", err);
		rc = 1;
	}
	if (cfg->warmup[0] && warmup_load(cfg->warmup, &w, err, sizeof(err)) != 0) {
		fprintf(stderr, "tileopsd: warm-up: %s\n", err);
		rc = 1;
	}
	if (tuning_check(cfg->gemm_tune_cache, err, sizeof(err)) != TILEOPS_OK) {
		fprintf(stderr, "tileopsd: tuning table: %s\n", err);
		rc = 1;
	}
	manifest_free(m);
	warmup_free(w);
	if (rc == 0)
		printf("tileopsd: valid (config file: %s; manifest: %s; warm-up file: %s)\n",
		       cfg->config_file[0] ? cfg->config_file : "none", cfg->manifest,
		       cfg->warmup[0] ? cfg->warmup : "none");
	return rc;
}

int main(int argc, char **argv)
{
	static server srv;
	config_defaults(&srv.cfg);
	if (parse_args(argc, argv, &srv.cfg) != 0)
		return 1;
	if (check_only)
		return check_files(&srv.cfg);
	log_set_level((log_level)srv.cfg.log_level);
	char err[4096];
	if (server_start(&srv, err, sizeof(err)) != 0) {
		fprintf(stderr, "tileopsd: %s\n", err);
		log_error("start-up failed: %s", err);
		server_finish(&srv);
		return 1;
	}
	server_run(&srv);
	int code = srv.exit_code;
	server_finish(&srv);
	log_info("stopped%s", code ? " (the device failed)" : "");
	/* A thread stuck in nng_close still holds nng's state: leave without
	 * the atexit handlers that would wait on it or count it as leaked. */
	if (transport_nng_wedged()) {
		fflush(NULL);
		_exit(code);
	}
	return code;
}
