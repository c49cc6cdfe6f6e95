/*
 * tileops-stat - show what a running tileopsd is doing.
 *
 *   tileops-stat [--address ADDR] [--watch [SECONDS]] [--count N]
 *                [--sort time|ops] [--raw] [--check]
 *
 * Asks the daemon's stats socket (nng REQ/REP) for its JSON document and
 * prints it as is (--raw), as a short summary with a table of ops, or
 * (--watch) as a live view of per-interval rates (stat_view.c).
 * The address defaults to $TILEOPS_STATS_ADDRESS, else stats.sock in the
 * daemon's default directory. Exits 1 when the daemon cannot be reached.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>

#include "address.h"
#include "stat_json.h"
#include "stat_view.h"

#define STAT_TIMEOUT_MS 5000

/* ---- talking to the daemon ----------------------------------------------- */

/* Fetch the stats document; on success *out is a NUL-terminated nng message. */
static int stats_fetch(nng_socket sock, const char *address, nng_msg **out)
{
	nng_msg *msg = NULL;
	int rv;

	if ((rv = nng_msg_alloc(&msg, 0)) != 0 || (rv = nng_msg_append(msg, "stats", 5)) != 0 ||
	    (rv = nng_sendmsg(sock, msg, 0)) != 0) {
		if (rv != 0 && msg != NULL)
			nng_msg_free(msg);
		fprintf(stderr, "tileops-stat: sending to %s failed: %s\n", address,
		        nng_strerror(rv));
		return -1;
	}
	if ((rv = nng_recvmsg(sock, &msg, 0)) != 0) {
		fprintf(stderr, "tileops-stat: no stats from tileopsd at %s: %s\n", address,
		        nng_strerror(rv));
		return -1;
	}
	if (nng_msg_append(msg, "", 1) != 0) {
		nng_msg_free(msg);
		return -1;
	}
	*out = msg;
	return 0;
}

static int stats_connect(const char *address, nng_socket *sock)
{
	int rv;

	if ((rv = nng_req0_open(sock)) != 0) {
		fprintf(stderr, "tileops-stat: cannot open an nng socket: %s\n", nng_strerror(rv));
		return -1;
	}
	nng_socket_set_ms(*sock, NNG_OPT_RECVTIMEO, STAT_TIMEOUT_MS);
	nng_socket_set_ms(*sock, NNG_OPT_SENDTIMEO, STAT_TIMEOUT_MS);
	nng_socket_set_size(*sock, NNG_OPT_RECVMAXSZ, (size_t)16 << 20);
	if ((rv = nng_dial(*sock, address, NULL, 0)) != 0) {
		fprintf(stderr,
		        "tileops-stat: cannot reach tileopsd's stats socket at %s: %s\n"
		        "  Is tileopsd running? Pass --address or set TILEOPS_STATS_ADDRESS.\n",
		        address, nng_strerror(rv));
		nng_close(*sock);
		return -1;
	}
	return 0;
}

/* The readiness probe: "ready" is true in the daemon's stats. */
static int is_ready(const char *text, size_t len)
{
	struct json *doc = json_parse(text, len);
	int ready = doc != NULL && doc->type == JSON_OBJECT && json_num(doc, "ready") != 0;

	json_free(doc);
	return ready;
}

static void usage(FILE *f)
{
	fprintf(f,
	        "usage: tileops-stat [--address ADDR] [--watch [SECONDS]] [--count N]\n"
	        "                    [--sort time|ops] [--raw] [--check]\n"
	        "  --address ADDR     the daemon's stats socket (default: $TILEOPS_STATS_ADDRESS,\n"
	        "                     else ipc://$XDG_RUNTIME_DIR/tileopsd/stats.sock if it\n"
	        "                     exists, else ipc:///run/tileopsd/stats.sock)\n"
	        "  --watch [SECONDS]  a live view redrawn every SECONDS (default 2): the first\n"
	        "                     frame since the daemon started, then per interval the\n"
	        "                     ops/s, errors/s, latency percentiles, device time share,\n"
	        "                     GB/s, TFLOP/s and speed-of-light share of each op that\n"
	        "                     ran, and each live session's ops/s and percentiles\n"
	        "  --count N          with --watch: stop after N frames\n"
	        "  --sort time|ops    with --watch: order the ops by device time (default) or\n"
	        "                     by ops/s\n"
	        "  --raw              print the JSON document as the daemon sent it\n"
	        "  --check            print nothing; exit 0 when the daemon is ready, 1 when it\n"
	        "                     is not ready (warming up, stopping) or unreachable\n");
}

static void sleep_s(double s)
{
	struct timespec ts;

	ts.tv_sec = (time_t)s;
	ts.tv_nsec = (long)((s - (double)ts.tv_sec) * 1e9);
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

#define WATCH_DEFAULT_S 2.0

struct stat_args {
	const char *address;
	double watch_s; /* 0: print once */
	long count;     /* frames to print with --watch; 0: until interrupted */
	enum view_sort sort;
	int raw;
	int check;
};

/* A positive number filling all of s, else -1. */
static double positive(const char *s)
{
	char *end;
	double v = strtod(s, &end);

	return end != s && *end == '\0' && v > 0 && v < 1e9 ? v : -1;
}

static int parse_args(int argc, char **argv, struct stat_args *a)
{
	int i, count_given = 0;

	for (i = 1; i < argc; i++) {
		const char *arg = argv[i];

		if (strcmp(arg, "--raw") == 0) {
			a->raw = 1;
		} else if (strcmp(arg, "--check") == 0) {
			a->check = 1;
		} else if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
			usage(stdout);
			exit(0);
		} else if (strcmp(arg, "--address") == 0 && i + 1 < argc) {
			a->address = argv[++i];
		} else if (strcmp(arg, "--watch") == 0) {
			/* SECONDS is optional: the next word is it only when it is a number. */
			a->watch_s = WATCH_DEFAULT_S;
			if (i + 1 < argc && argv[i + 1][0] != '-') {
				if ((a->watch_s = positive(argv[++i])) < 0) {
					fprintf(stderr,
					        "tileops-stat: --watch wants seconds > 0, got "
					        "'%s'\n",
					        argv[i]);
					return -1;
				}
			}
		} else if (strcmp(arg, "--count") == 0 && i + 1 < argc) {
			double v = positive(argv[++i]);

			if (v < 1 || v != (double)(long)v) {
				fprintf(stderr,
				        "tileops-stat: --count wants a whole number > 0, got "
				        "'%s'\n",
				        argv[i]);
				return -1;
			}
			a->count = (long)v;
			count_given = 1;
		} else if (strcmp(arg, "--sort") == 0 && i + 1 < argc) {
			i++;
			if (strcmp(argv[i], "time") == 0) {
				a->sort = VIEW_SORT_TIME;
			} else if (strcmp(argv[i], "ops") == 0) {
				a->sort = VIEW_SORT_OPS;
			} else {
				fprintf(stderr,
				        "tileops-stat: --sort wants time or ops, got '%s'\n",
				        argv[i]);
				return -1;
			}
		} else {
			fprintf(stderr, "tileops-stat: unknown or incomplete option '%s'\n", arg);
			usage(stderr);
			return -1;
		}
	}
	if (count_given && a->watch_s <= 0) {
		fprintf(stderr, "tileops-stat: --count goes with --watch\n");
		return -1;
	}
	return 0;
}

/*
 * --watch without --raw: each frame compares the document just fetched with
 * the one before. On a terminal the frame replaces the last one (cursor home,
 * clear screen), like top; into a pipe or file the frames follow each other,
 * a blank line between them.
 */
static int watch(nng_socket sock, const struct stat_args *a)
{
	struct json *prev = NULL;
	double prev_t = now_s();
	int tty = isatty(STDOUT_FILENO);
	long frame;
	nng_msg *msg;

	for (frame = 0; a->count == 0 || frame < a->count; frame++) {
		struct json *doc;
		double t;

		if (frame > 0)
			sleep_s(a->watch_s);
		if (stats_fetch(sock, a->address, &msg) != 0) {
			json_free(prev);
			return 1;
		}
		t = now_s();
		doc = json_parse(nng_msg_body(msg), nng_msg_len(msg) - 1);
		nng_msg_free(msg);
		if (tty)
			printf("\033[H\033[2J");
		else if (frame > 0)
			putchar('\n');
		if (doc == NULL || doc->type != JSON_OBJECT) {
			/* Keep the last good document to compare the next one with. */
			printf("tileops-stat: the daemon's stats are not valid JSON; skipping "
			       "them\n");
			json_free(doc);
		} else {
			view_frame(doc, prev, t - prev_t, a->sort);
			json_free(prev);
			prev = doc;
			prev_t = t;
		}
		fflush(stdout);
	}
	json_free(prev);
	return 0;
}

int main(int argc, char **argv)
{
	struct stat_args a = { NULL, 0, 0, VIEW_SORT_TIME, 0, 0 };
	char defaddr[512];
	nng_socket sock;
	nng_msg *msg;
	const char *env = getenv("TILEOPS_STATS_ADDRESS");
	long frame;
	int rv;

	if (parse_args(argc, argv, &a) != 0)
		return 2;
	if (a.address == NULL && env != NULL && env[0] != '\0')
		a.address = env;
	if (a.address == NULL) {
		if (tci_default_address("stats.sock", defaddr, sizeof(defaddr)) != TILEOPS_OK) {
			fprintf(stderr, "tileops-stat: %s\n", tileops_last_error());
			return 1;
		}
		a.address = defaddr;
	}
	if (stats_connect(a.address, &sock) != 0)
		return 1;
	if (a.check) {
		int ready = 0;

		if (stats_fetch(sock, a.address, &msg) == 0) {
			ready = is_ready(nng_msg_body(msg), nng_msg_len(msg) - 1);
			nng_msg_free(msg);
		}
		nng_close(sock);
		return ready ? 0 : 1;
	}
	if (a.watch_s > 0 && !a.raw) {
		rv = watch(sock, &a);
		nng_close(sock);
		return rv;
	}
	/* Once, or --raw documents every interval. */
	for (frame = 0;; frame++) {
		if (stats_fetch(sock, a.address, &msg) != 0) {
			nng_close(sock);
			return 1;
		}
		if (a.raw)
			printf("%s\n", (const char *)nng_msg_body(msg));
		else
			view_summary(nng_msg_body(msg), nng_msg_len(msg) - 1);
		nng_msg_free(msg);
		fflush(stdout);
		if (a.watch_s <= 0 || (a.count > 0 && frame + 1 >= a.count))
			break;
		sleep_s(a.watch_s);
	}
	nng_close(sock);
	return 0;
}
