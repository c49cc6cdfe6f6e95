/*
 * tileops-stat - show what a running tileopsd is doing.
 *
 *   tileops-stat [--address ADDR] [--watch SECONDS] [--raw] [--check]
 *
 * Asks the daemon's stats socket (nng REQ/REP) for its JSON document and
 * prints it as is (--raw) or as a short summary with a table of ops.
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

#define STAT_TIMEOUT_MS 5000
#define JSON_MAX_DEPTH 32

/* ---- a small JSON reader, enough for the stats document ------------------ */

enum json_type { JSON_NULL, JSON_BOOL, JSON_NUMBER, JSON_STRING, JSON_ARRAY, JSON_OBJECT };

struct json {
	enum json_type type;
	double num;         /* NUMBER, BOOL (0 or 1) */
	char *str;          /* STRING */
	char *key;          /* the member name when inside an object */
	struct json *child; /* ARRAY, OBJECT: first element */
	struct json *next;  /* next sibling */
};

struct json_parser {
	const char *p;
	const char *end;
	int depth;
};

static void json_free(struct json *j)
{
	while (j != NULL) {
		struct json *next = j->next;

		json_free(j->child);
		free(j->str);
		free(j->key);
		free(j);
		j = next;
	}
}

static void json_skip_space(struct json_parser *ps)
{
	while (ps->p < ps->end &&
	       (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r'))
		ps->p++;
}

static int json_hex4(const char *s, unsigned *out)
{
	unsigned v = 0;
	int i;

	for (i = 0; i < 4; i++) {
		char ch = s[i];

		v <<= 4;
		if (ch >= '0' && ch <= '9')
			v |= (unsigned)(ch - '0');
		else if (ch >= 'a' && ch <= 'f')
			v |= (unsigned)(ch - 'a' + 10);
		else if (ch >= 'A' && ch <= 'F')
			v |= (unsigned)(ch - 'A' + 10);
		else
			return -1;
	}
	*out = v;
	return 0;
}

/* Append code point cp as UTF-8. */
static size_t utf8_put(char *dst, unsigned cp)
{
	if (cp < 0x80) {
		dst[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		dst[0] = (char)(0xc0 | (cp >> 6));
		dst[1] = (char)(0x80 | (cp & 0x3f));
		return 2;
	}
	dst[0] = (char)(0xe0 | (cp >> 12));
	dst[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
	dst[2] = (char)(0x80 | (cp & 0x3f));
	return 3;
}

/* Parse a string starting at the opening quote; the result is malloc'd. */
static char *json_string(struct json_parser *ps)
{
	char *out, *w;

	/* The decoded string is never longer than the rest of the input. */
	if ((out = malloc((size_t)(ps->end - ps->p) + 1)) == NULL)
		return NULL;
	w = out;
	ps->p++;
	while (ps->p < ps->end && *ps->p != '"') {
		char ch = *ps->p++;
		unsigned cp;

		if (ch != '\\') {
			*w++ = ch;
			continue;
		}
		if (ps->p >= ps->end)
			break;
		ch = *ps->p++;
		switch (ch) {
		case 'n':
			*w++ = '\n';
			break;
		case 't':
			*w++ = '\t';
			break;
		case 'r':
			*w++ = '\r';
			break;
		case 'b':
			*w++ = '\b';
			break;
		case 'f':
			*w++ = '\f';
			break;
		case 'u':
			if (ps->end - ps->p < 4 || json_hex4(ps->p, &cp) != 0)
				goto fail;
			ps->p += 4;
			w += utf8_put(w, cp);
			break;
		default:
			*w++ = ch;
			break;
		}
	}
	if (ps->p >= ps->end)
		goto fail;
	ps->p++;
	*w = '\0';
	return out;
fail:
	free(out);
	return NULL;
}

static struct json *json_value(struct json_parser *ps);

/* Parse the members of an object or the elements of an array. */
static int json_container(struct json_parser *ps, struct json *j, char close)
{
	struct json **tail = &j->child;

	ps->p++;
	json_skip_space(ps);
	if (ps->p < ps->end && *ps->p == close) {
		ps->p++;
		return 0;
	}
	for (;;) {
		char *key = NULL;
		struct json *v;

		json_skip_space(ps);
		if (close == '}') {
			if (ps->p >= ps->end || *ps->p != '"' || (key = json_string(ps)) == NULL)
				return -1;
			json_skip_space(ps);
			if (ps->p >= ps->end || *ps->p++ != ':') {
				free(key);
				return -1;
			}
		}
		if ((v = json_value(ps)) == NULL) {
			free(key);
			return -1;
		}
		v->key = key;
		*tail = v;
		tail = &v->next;
		json_skip_space(ps);
		if (ps->p < ps->end && *ps->p == ',') {
			ps->p++;
			continue;
		}
		if (ps->p < ps->end && *ps->p == close) {
			ps->p++;
			return 0;
		}
		return -1;
	}
}

static int json_literal(struct json_parser *ps, const char *word)
{
	size_t n = strlen(word);

	if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, word, n) != 0)
		return -1;
	ps->p += n;
	return 0;
}

static struct json *json_value(struct json_parser *ps)
{
	struct json *j;
	int rv = 0;

	json_skip_space(ps);
	if (ps->p >= ps->end || ps->depth >= JSON_MAX_DEPTH)
		return NULL;
	if ((j = calloc(1, sizeof(*j))) == NULL)
		return NULL;
	ps->depth++;
	switch (*ps->p) {
	case '{':
		j->type = JSON_OBJECT;
		rv = json_container(ps, j, '}');
		break;
	case '[':
		j->type = JSON_ARRAY;
		rv = json_container(ps, j, ']');
		break;
	case '"':
		j->type = JSON_STRING;
		rv = (j->str = json_string(ps)) == NULL ? -1 : 0;
		break;
	case 't':
		j->type = JSON_BOOL;
		j->num = 1;
		rv = json_literal(ps, "true");
		break;
	case 'f':
		j->type = JSON_BOOL;
		rv = json_literal(ps, "false");
		break;
	case 'n':
		rv = json_literal(ps, "null");
		break;
	default: {
		/* The input is NUL-terminated, so strtod stops in time. */
		char *endp;

		j->type = JSON_NUMBER;
		j->num = strtod(ps->p, &endp);
		rv = endp == ps->p ? -1 : 0;
		ps->p = endp;
	}
	}
	ps->depth--;
	if (rv != 0) {
		json_free(j);
		return NULL;
	}
	return j;
}

static struct json *json_parse(const char *text, size_t len)
{
	struct json_parser ps = { text, text + len, 0 };

	return json_value(&ps);
}

static const struct json *json_get(const struct json *obj, const char *key)
{
	const struct json *m;

	if (obj == NULL || obj->type != JSON_OBJECT)
		return NULL;
	for (m = obj->child; m != NULL; m = m->next)
		if (m->key != NULL && strcmp(m->key, key) == 0)
			return m;
	return NULL;
}

static double json_num(const struct json *obj, const char *key)
{
	const struct json *v = json_get(obj, key);

	return v != NULL && (v->type == JSON_NUMBER || v->type == JSON_BOOL) ? v->num : 0.0;
}

static const char *json_str(const struct json *obj, const char *key)
{
	const struct json *v = json_get(obj, key);

	return v != NULL && v->type == JSON_STRING ? v->str : "?";
}

/* ---- printing ------------------------------------------------------------ */

static void print_bytes(double b)
{
	static const char *const unit[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	int u = 0;

	while (b >= 1024.0 && u < 4) {
		b /= 1024.0;
		u++;
	}
	if (u == 0)
		printf("%.0f B", b);
	else
		printf("%.1f %s", b, unit[u]);
}

static int op_cmp(const void *a, const void *b)
{
	double ta = json_num(*(const struct json *const *)a, "total_time_us");
	double tb = json_num(*(const struct json *const *)b, "total_time_us");

	return (ta < tb) - (ta > tb);
}

static void print_ops(const struct json *ops)
{
	const struct json *m;
	const struct json **list;
	size_t n = 0, i;

	for (m = ops != NULL && ops->type == JSON_OBJECT ? ops->child : NULL; m; m = m->next)
		n += m->type == JSON_OBJECT;
	if (n == 0) {
		printf("no ops run yet\n");
		return;
	}
	if ((list = calloc(n, sizeof(*list))) == NULL)
		return;
	for (i = 0, m = ops->child; m != NULL; m = m->next)
		if (m->type == JSON_OBJECT)
			list[i++] = m;
	/* The ops that cost the most time first. */
	qsort(list, n, sizeof(*list), op_cmp);
	printf("%-24s %10s %8s %12s %10s\n", "op", "count", "errors", "total ms", "mean us");
	for (i = 0; i < n; i++) {
		double count = json_num(list[i], "count");
		double us = json_num(list[i], "total_time_us");

		printf("%-24s %10.0f %8.0f %12.3f %10.1f\n", list[i]->key, count,
		       json_num(list[i], "errors"), us / 1000.0, count > 0 ? us / count : 0.0);
	}
	free(list);
}

/*
 * One line per executor thread: how evenly the sessions and the ring ops are
 * spread, what an entry costs it and how much of that is the launch call,
 * and entries that took a millisecond or more (a stalled launch path).
 */
static void print_executor(const struct json *ex)
{
	const struct json *t;

	if (ex == NULL || ex->type != JSON_OBJECT || ex->child == NULL)
		return;
	printf("%-8s %10s %12s %12s %10s %10s %9s %8s\n", "thread", "sessions", "ring ops",
	       "pace waits", "us/op", "us/launch", "slow ops", "sleeps");
	for (t = ex->child; t != NULL; t = t->next) {
		if (t->type != JSON_OBJECT)
			continue;
		double ops = json_num(t, "ring_ops");
		printf("%-8s %10.0f %12.0f %12.0f %10.2f %10.2f %9.0f %8.0f\n", t->key,
		       json_num(t, "sessions"), ops, json_num(t, "pace_waits"),
		       ops > 0 ? json_num(t, "ring_op_us") / ops : 0.0,
		       json_num(t, "launches_timed") > 0
		               ? json_num(t, "launch_us") / json_num(t, "launches_timed")
		               : 0.0,
		       json_num(t, "slow_ops"), json_num(t, "sleeps"));
	}
	putchar('\n');
}

static int print_summary(const char *text, size_t len)
{
	struct json *doc = json_parse(text, len);

	if (doc == NULL || doc->type != JSON_OBJECT) {
		fprintf(stderr, "tileops-stat: the daemon's stats are not valid JSON; "
		                "printing them as received\n");
		json_free(doc);
		fwrite(text, 1, len, stdout);
		putchar('\n');
		return 0;
	}
	printf("tileopsd %s, up %.1f s, %s\n", json_str(doc, "version"), json_num(doc, "uptime_s"),
	       json_num(doc, "ready") != 0 ? "ready" : "not ready");
	printf("backend  %s (%s)\n", json_str(doc, "backend"), json_str(doc, "device"));
	printf("sessions %.0f, tensors %.0f, ", json_num(doc, "sessions"),
	       json_num(doc, "tensors"));
	print_bytes(json_num(doc, "bytes_in_use"));
	printf(" in use\n");
	printf("requests %.0f, errors %.0f\n\n", json_num(doc, "requests"),
	       json_num(doc, "errors"));
	print_executor(json_get(doc, "executor"));
	print_ops(json_get(doc, "ops"));
	json_free(doc);
	return 0;
}

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
	        "usage: tileops-stat [--address ADDR] [--watch SECONDS] [--raw] [--check]\n"
	        "  --address ADDR   the daemon's stats socket (default: $TILEOPS_STATS_ADDRESS,\n"
	        "                   else ipc://$XDG_RUNTIME_DIR/tileopsd/stats.sock or\n"
	        "                   ipc:///run/tileopsd/stats.sock)\n"
	        "  --watch SECONDS  print again every SECONDS until interrupted\n"
	        "  --raw            print the JSON document as the daemon sent it\n"
	        "  --check          print nothing; exit 0 when the daemon is ready, 1 when it\n"
	        "                   is not ready (warming up, stopping) or unreachable\n");
}

static void sleep_s(double s)
{
	struct timespec ts;

	ts.tv_sec = (time_t)s;
	ts.tv_nsec = (long)((s - (double)ts.tv_sec) * 1e9);
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

struct stat_args {
	const char *address;
	double watch_s;
	int raw;
	int check;
};

static int parse_args(int argc, char **argv, struct stat_args *a)
{
	int i;

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
		} else if (strcmp(arg, "--watch") == 0 && i + 1 < argc) {
			char *end;

			a->watch_s = strtod(argv[++i], &end);
			if (*end != '\0' || a->watch_s <= 0) {
				fprintf(stderr,
				        "tileops-stat: --watch wants seconds > 0, got '%s'\n",
				        argv[i]);
				return -1;
			}
		} else {
			fprintf(stderr, "tileops-stat: unknown or incomplete option '%s'\n", arg);
			usage(stderr);
			return -1;
		}
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct stat_args a = { NULL, 0, 0, 0 };
	char defaddr[512];
	nng_socket sock;
	nng_msg *msg;
	const char *env = getenv("TILEOPS_STATS_ADDRESS");

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
	for (;;) {
		if (stats_fetch(sock, a.address, &msg) != 0) {
			nng_close(sock);
			return 1;
		}
		if (a.check) {
			int ready = is_ready(nng_msg_body(msg), nng_msg_len(msg) - 1);
			nng_msg_free(msg);
			nng_close(sock);
			return ready ? 0 : 1;
		}
		if (a.raw)
			printf("%s\n", (const char *)nng_msg_body(msg));
		else
			print_summary(nng_msg_body(msg), nng_msg_len(msg) - 1);
		nng_msg_free(msg);
		fflush(stdout);
		if (a.watch_s <= 0)
			break;
		sleep_s(a.watch_s);
		if (!a.raw)
			printf("\n");
	}
	nng_close(sock);
	return 0;
}
