/*
 * client.c - the connection to tileopsd and its session: connect, the
 * shared-memory arena, Hello, pipe events, close.
 *
 * A session lives on exactly one nng pipe. When that pipe goes away the
 * session is gone on the daemon's side too, so the client turns dead: every
 * request in flight fails with TILEOPS_ERR_CLOSED and nothing is sent any
 * more. A pipe nng would dial again later is refused, since the daemon
 * would see a stranger without a session on it.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"

#include <nng/protocol/reqrep0/req.h>

/* nng would otherwise keep dialing a lost daemon every 100 ms; each such
 * pipe is refused anyway, so try rarely. */
#define RECONNECT_MIN_MS 60000
#define RECONNECT_MAX_MS 600000

static void client_destroy(struct tileops_client *c)
{
	/* Unmapped only now: completions that outlive tileops_close may still
	 * look at the ring header while they finish. */
	if (c->arena != NULL)
		munmap(c->arena, c->arena_bytes);
	tci_ring_destroy(c);
	pthread_mutex_destroy(&c->arena_mu);
	pthread_mutex_destroy(&c->mu);
	pthread_cond_destroy(&c->slot_cv);
	free(c->address);
	free(c->daemon_version);
	free(c->backend);
	free(c->device);
	tci_devices_free(c);
	free(c);
}

/* Drop one reference; the last one frees the client. */
void tci_client_release(struct tileops_client *c)
{
	int last;

	pthread_mutex_lock(&c->mu);
	last = --c->refs == 0;
	pthread_mutex_unlock(&c->mu);
	if (last)
		client_destroy(c);
}

/* Take a reference for something that may outlive tileops_close (a plan). */
void tci_client_retain(struct tileops_client *c)
{
	pthread_mutex_lock(&c->mu);
	c->refs++;
	pthread_mutex_unlock(&c->mu);
}

static struct tileops_client *client_alloc(void)
{
	struct tileops_client *c = calloc(1, sizeof(*c));

	if (c == NULL)
		return NULL;
	pthread_mutex_init(&c->arena_mu, NULL);
	pthread_mutex_init(&c->mu, NULL);
	pthread_cond_init(&c->slot_cv, NULL);
	c->refs = 1;
	return c;
}

/* Pipe events, on nng's threads. */
static void client_pipe_cb(nng_pipe p, nng_pipe_ev ev, void *arg)
{
	struct tileops_client *c = arg;
	int refuse = 0;

	pthread_mutex_lock(&c->mu);
	if (ev == NNG_PIPE_EV_ADD_PRE) {
		if (c->had_pipe || c->dead) {
			refuse = 1;
		} else {
			c->had_pipe = 1;
			c->pipe_id = (uint32_t)nng_pipe_id(p);
		}
	} else if (ev == NNG_PIPE_EV_REM_POST && c->had_pipe &&
	           (uint32_t)nng_pipe_id(p) == c->pipe_id && !c->dead) {
		c->dead = 1;
		tci_request_abort_all(c);
		pthread_cond_broadcast(&c->slot_cv);
	}
	pthread_mutex_unlock(&c->mu);
	if (refuse)
		nng_pipe_close(p);
}

static tileops_status socket_open(struct tileops_client *c)
{
	int rv;

	if ((rv = nng_req0_open(&c->sock)) != 0)
		return tci_error_nng(TILEOPS_ERR_INTERNAL, rv, "opening an nng REQ socket");
	/* tileopsd executes every request exactly once: never resend. */
	if ((rv = nng_socket_set_ms(c->sock, NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE)) ||
	    (rv = nng_socket_set_size(c->sock, NNG_OPT_RECVMAXSZ, TCI_RECV_MAX_BYTES)) ||
	    (rv = nng_socket_set_ms(c->sock, NNG_OPT_RECONNMINT, RECONNECT_MIN_MS)) ||
	    (rv = nng_socket_set_ms(c->sock, NNG_OPT_RECONNMAXT, RECONNECT_MAX_MS)) ||
	    (rv = nng_pipe_notify(c->sock, NNG_PIPE_EV_ADD_PRE, client_pipe_cb, c)) ||
	    (rv = nng_pipe_notify(c->sock, NNG_PIPE_EV_REM_POST, client_pipe_cb, c))) {
		nng_close(c->sock);
		return tci_error_nng(TILEOPS_ERR_INTERNAL, rv, "setting up the nng REQ socket");
	}
	return TILEOPS_OK;
}

static tileops_status socket_dial(struct tileops_client *c)
{
	int rv = nng_dial(c->sock, c->address, NULL, 0);

	if (rv == 0)
		return TILEOPS_OK;
	if (rv == NNG_EADDRINVAL || rv == NNG_ENOTSUP || rv == NNG_EINVAL)
		return tci_error(TILEOPS_ERR_CONNECT,
		                 "cannot connect to tileopsd: '%s' is not a valid nng address (%s)",
		                 c->address, nng_strerror(rv));
	return tci_error(TILEOPS_ERR_CONNECT,
	                 "cannot connect to tileopsd at %s: %s (is tileopsd running? "
	                 "set TILEOPS_ADDRESS or pass the address it listens on)",
	                 c->address, nng_strerror(rv));
}

static tileops_status arena_fail(const char *what, const char *name, int err)
{
	tileops_status st = TILEOPS_ERR_INTERNAL;

	if (err == ENOMEM || err == ENOSPC || err == EMFILE || err == ENFILE)
		st = TILEOPS_ERR_OUT_OF_MEMORY;
	else if (err == EACCES || err == EPERM)
		st = TILEOPS_ERR_PERMISSION;
	return tci_error(st, "shared-memory arena %s: %s failed: %s", name, what, strerror(err));
}

/* 1 when this process is in group g (effective or supplementary). */
static int in_group(gid_t g)
{
	gid_t gs[256];
	int n = getgroups(256, gs);
	if (g == getegid())
		return 1;
	for (int i = 0; i < n; i++)
		if (gs[i] == g)
			return 1;
	return 0;
}

/*
 * Let tileopsd open the arena when it runs as another user: read and write
 * for the owner and the group whatever the umask, and the group made the
 * one of the daemon's socket file when this process belongs to it (a
 * client in the daemon's group through `usermod -aG` creates files with its
 * own primary group, which the daemon is not in) or is root (which the
 * daemon admits, and which may give its file to any group). Failures leave the
 * arena as it is: the daemon then says why it cannot open it.
 */
static void arena_share(const struct tileops_client *c, int fd)
{
	struct stat st;
	if (fchmod(fd, 0660) != 0)
		return;
	if (strncmp(c->address, "ipc://", 6) != 0 || stat(c->address + 6, &st) != 0)
		return;
	if (st.st_gid != getegid() && (in_group(st.st_gid) || geteuid() == 0) &&
	    fchown(fd, (uid_t)-1, st.st_gid) != 0) {
		/* Left with our own group: the daemon's Hello answer says it cannot open it. */
	}
}

/*
 * Where the arena is created. A daemon in another IPC namespace (another
 * container) cannot see this process's POSIX shm, so a daemon configured
 * with arena_dir takes arenas as files of a folder both sides mount: by
 * default `arenas` beside the control socket, which libtileops finds by
 * itself, so a client that reaches the socket needs no other setting.
 * TILEOPS_ARENA_DIR names another folder. Without either, POSIX shm, which
 * every tileopsd takes. Returns 1 with the folder in dir, else 0.
 */
static int arena_folder(const struct tileops_client *c, char *dir, size_t len)
{
	const char *env = getenv("TILEOPS_ARENA_DIR");
	const char *slash;
	struct stat st;

	if (env != NULL && env[0] != '\0') {
		snprintf(dir, len, "%s", env);
		return 1;
	}
	if (strncmp(c->address, "ipc://", 6) != 0 || (slash = strrchr(c->address + 6, '/')) == NULL)
		return 0;
	if ((size_t)snprintf(dir, len, "%.*s/arenas", (int)(slash - (c->address + 6)),
	                     c->address + 6) >= len)
		return 0;
	return stat(dir, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Remove the arena's name: the shm name, or the file of the folder. */
static void arena_unlink(const struct tci_arena_name *an)
{
	if (an->path[0] != '\0')
		unlink(an->path);
	else
		shm_unlink(an->name);
}

/*
 * Create the arena: a fresh, exclusive name, sized and mapped. The name
 * stays until the daemon has mapped it (after Hello): an->name is what the
 * Hello carries ("/tileops-..." for shm, a bare file name in a folder).
 */
static tileops_status arena_create(struct tileops_client *c, struct tci_arena_name *an)
{
	unsigned char rnd[8];
	char dir[384];
	int in_dir = arena_folder(c, dir, sizeof(dir));
	int fd = -1;
	int tries;

	an->path[0] = '\0';
	for (tries = 0; tries < 8 && fd < 0; tries++) {
		uint64_t v = 0;

		if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
			return arena_fail("getrandom", "name", errno);
		memcpy(&v, rnd, sizeof(v));
		snprintf(an->name, sizeof(an->name), "%stileops-%ld-%016llx", in_dir ? "" : "/",
		         (long)getpid(), (unsigned long long)v);
		if (in_dir) {
			snprintf(an->path, sizeof(an->path), "%s/%s", dir, an->name);
			/* O_NOFOLLOW: a link planted under our fresh name is not followed. */
			fd = open(an->path, O_CREAT | O_EXCL | O_RDWR | O_NOFOLLOW | O_CLOEXEC,
			          0660);
		} else {
			fd = shm_open(an->name, O_CREAT | O_EXCL | O_RDWR, 0660);
		}
		if (fd < 0 && errno != EEXIST)
			return arena_fail(in_dir ? "open" : "shm_open",
			                  in_dir ? an->path : an->name, errno);
	}
	if (fd < 0)
		return arena_fail(in_dir ? "open" : "shm_open", in_dir ? an->path : an->name,
		                  EEXIST);
	arena_share(c, fd);
	if (ftruncate(fd, (off_t)c->arena_bytes) != 0) {
		int err = errno;

		close(fd);
		arena_unlink(an);
		return arena_fail("ftruncate", an->name, err);
	}
	c->arena = mmap(NULL, c->arena_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (c->arena == MAP_FAILED) {
		int err = errno;

		c->arena = NULL;
		close(fd);
		arena_unlink(an);
		return arena_fail("mmap", an->name, err);
	}
	close(fd);
	return TILEOPS_OK;
}

static char *str_dup_or_empty(const char *s)
{
	return strdup(s != NULL ? s : "");
}

/* Keep what the daemon said about itself. */
static tileops_status server_info_store(struct tileops_client *c, const Tileops__Reply *reply)
{
	const Tileops__HelloReply *h = reply->hello;

	if (reply->body_case != TILEOPS__REPLY__BODY_HELLO || h == NULL)
		return tci_error(TILEOPS_ERR_PROTOCOL,
		                 "tileopsd answered Hello without a HelloReply");
	if (h->protocol_version != TCI_PROTOCOL_VERSION)
		return tci_error(TILEOPS_ERR_VERSION,
		                 "tileopsd speaks protocol version %u, this libtileops %d",
		                 h->protocol_version, TCI_PROTOCOL_VERSION);
	c->daemon_version = str_dup_or_empty(h->daemon_version);
	c->backend = str_dup_or_empty(h->backend);
	c->device = str_dup_or_empty(h->device);
	if (c->daemon_version == NULL || c->backend == NULL || c->device == NULL)
		return tci_error(TILEOPS_ERR_OUT_OF_MEMORY, "out of memory for server info");
	c->info.protocol_version = h->protocol_version;
	c->info.daemon_version = c->daemon_version;
	c->info.backend = c->backend;
	c->info.device = c->device;
	c->info.capabilities = h->capabilities;
	c->info.session_id = h->session_id;
	c->info.max_message_bytes = h->max_message_bytes;
	return tci_devices_store(c, h);
}

/*
 * The arena: with rings, the ring header, the submission and completion
 * rings, then the data area of the size the caller asked for; without, only
 * the data area. Tensor bytes always move through the data area.
 */
static tileops_status arena_plan(struct tileops_client *c, size_t data_bytes, uint32_t ring_entries)
{
	c->data_offset = ring_entries != 0 ? tci_ring_region_bytes(ring_entries) : 0;
	c->data_bytes = data_bytes;
	if (data_bytes > SIZE_MAX - c->data_offset)
		return tci_error(TILEOPS_ERR_INVALID_ARGUMENT,
		                 "connect: arena_bytes %zu is too large", data_bytes);
	c->arena_bytes = c->data_offset + data_bytes;
	return TILEOPS_OK;
}

static tileops_status session_hello(struct tileops_client *c, const char *client_name,
                                    const char *tenant, uint32_t ring_entries)
{
	Tileops__Request req = TILEOPS__REQUEST__INIT;
	Tileops__Hello hello = TILEOPS__HELLO__INIT;
	Tileops__Reply *reply = NULL;
	struct tci_arena_name an;
	tileops_status st;
	int rings;

	if ((st = arena_create(c, &an)) != TILEOPS_OK)
		return st;
	if (ring_entries != 0)
		tci_ring_layout(c->arena, ring_entries);
	hello.protocol_version = TCI_PROTOCOL_VERSION;
	hello.client_name = (char *)client_name;
	hello.arena_name = an.name;
	hello.arena_bytes = c->arena_bytes;
	hello.client_pid = (int32_t)getpid();
	hello.rings = ring_entries != 0;
	/* Empty: the daemon gives the session a tenant of its own. */
	hello.tenant = (char *)(tenant != NULL ? tenant : "");
	req.body_case = TILEOPS__REQUEST__BODY_HELLO;
	req.hello = &hello;

	st = tci_request_call(c, &req, 0, &reply);
	/* Mapped by the daemon by now (or never will be): the name can go. */
	arena_unlink(&an);
	if (st == TILEOPS_ERR_CLOSED)
		/* tileopsd closes a connection at once when the peer's credentials
		 * are not allowed, so say so rather than "lost". */
		return tci_error(
		        TILEOPS_ERR_CLOSED,
		        "tileopsd closed the connection before answering Hello: it accepts "
		        "only its own uid, root and the members of its allow_group (this "
		        "process runs as uid %u), it had more than max_connections at once, "
		        "or it stopped",
		        (unsigned)getuid());
	if (st != TILEOPS_OK)
		return st;
	st = server_info_store(c, reply);
	/* A daemon that does not serve rings says so; ops then go over nng. */
	rings = st == TILEOPS_OK && reply->hello->rings && ring_entries != 0;
	tileops__reply__free_unpacked(reply, NULL);
	if (rings)
		st = tci_ring_attach(c, ring_entries);
	return st;
}

/* Tear down what connect or use built. Sends nothing. */
static void client_shutdown(struct tileops_client *c)
{
	pthread_mutex_lock(&c->mu);
	c->closed = 1;
	c->dead = 1;
	pthread_cond_broadcast(&c->slot_cv);
	pthread_mutex_unlock(&c->mu);
	/* Fails every request in flight with NNG_ECLOSED, and returns only after
	 * the pipe callbacks have run. */
	nng_close(c->sock);
	/* What the daemon finished keeps its status; the rest is closed. */
	tci_ring_fail_all(c, TILEOPS_ERR_CLOSED, "the client was closed (tileops_close)");
	tci_client_release(c);
}

static const char *resolve_address(const char *given, char *buf, size_t len)
{
	const char *env = getenv("TILEOPS_ADDRESS");

	if (given != NULL && given[0] != '\0')
		return given;
	if (env != NULL && env[0] != '\0')
		return env;
	if (tci_default_address("tileopsd.sock", buf, len) != TILEOPS_OK)
		return NULL;
	return buf;
}

/*
 * How long one Hello may go unanswered before connect tries again on a new
 * connection: 5 s (well past what a loaded machine takes to answer one),
 * doubling up to 20 s. A Hello sent on a connection the daemon has not yet
 * taken in (nng finishing the handshake of an ipc pipe made just as another
 * one closed) can wait with no answer and no error, and nng's REQ would
 * resend it only after a minute, on that same pipe. Until its answer the
 * daemon holds nothing of ours, so dropping the connection and making a new
 * one is safe; a session it did open is reaped with the connection.
 */
#define HELLO_TRY_MS 5000
#define HELLO_TRY_MAX_MS 20000

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* One connection and its Hello, answered within hello_ms. */
static tileops_status connect_once(const tileops_connect_options *opts, const char *address,
                                   const char *name, uint32_t ring_entries, int hello_ms,
                                   struct tileops_client **out)
{
	struct tileops_client *c;
	tileops_status st;

	if ((c = client_alloc()) == NULL)
		return tci_error(TILEOPS_ERR_OUT_OF_MEMORY, "connect: out of memory");
	st = arena_plan(c, opts->arena_bytes != 0 ? opts->arena_bytes : TCI_DEFAULT_ARENA_BYTES,
	                ring_entries);
	if (st != TILEOPS_OK) {
		client_destroy(c);
		return st;
	}
	if ((c->address = strdup(address)) == NULL) {
		client_destroy(c);
		return tci_error(TILEOPS_ERR_OUT_OF_MEMORY, "connect: out of memory");
	}
	if ((st = socket_open(c)) != TILEOPS_OK) {
		client_destroy(c);
		return st;
	}
	c->timeout_ms = hello_ms;
	if ((st = socket_dial(c)) != TILEOPS_OK ||
	    (st = session_hello(c, name, opts->tenant, ring_entries)) != TILEOPS_OK) {
		client_shutdown(c);
		return st;
	}
	c->timeout_ms = opts->timeout_ms;
	*out = c;
	return TILEOPS_OK;
}

TILEOPS_API tileops_status tileops_connect_opts(const tileops_connect_options *opts,
                                                tileops_client **out)
{
	char defaddr[512];
	const char *address;
	const char *name;
	uint32_t ring_entries;
	tileops_status st;

	if (out == NULL)
		return tci_error(TILEOPS_ERR_INVALID_ARGUMENT, "connect: out is NULL");
	*out = NULL;
	if (opts == NULL)
		return tci_error(TILEOPS_ERR_INVALID_ARGUMENT, "connect: options are NULL");
	if (opts->timeout_ms < 0)
		return tci_error(TILEOPS_ERR_INVALID_ARGUMENT,
		                 "connect: timeout_ms is %d, expected >= 0 (0 waits without limit)",
		                 opts->timeout_ms);
	if ((address = resolve_address(opts->address, defaddr, sizeof(defaddr))) == NULL)
		return TILEOPS_ERR_INVALID_ARGUMENT;
	if ((st = tci_ring_config(&ring_entries)) != TILEOPS_OK)
		return st;
	name = opts->name != NULL && opts->name[0] != '\0' ? opts->name
	                                                   : program_invocation_short_name;

	const int64_t t0 = now_ms();
	int try_ms = HELLO_TRY_MS, tries = 0;
	for (;;) {
		int hello_ms = try_ms;
		if (opts->timeout_ms > 0) {
			int64_t left = t0 + opts->timeout_ms - now_ms();
			if (left < hello_ms)
				hello_ms = left > 1 ? (int)left : 1;
		}
		tries++;
		st = connect_once(opts, address, name, ring_entries, hello_ms, out);
		if (st != TILEOPS_ERR_TIMEOUT)
			return st;
		if (opts->timeout_ms > 0 && now_ms() - t0 >= opts->timeout_ms)
			break;
		try_ms = try_ms * 2 > HELLO_TRY_MAX_MS ? HELLO_TRY_MAX_MS : try_ms * 2;
	}
	return tci_error(TILEOPS_ERR_TIMEOUT,
	                 "connect: tileopsd at %s did not answer Hello within %d ms (%d "
	                 "connection%s tried)",
	                 address, opts->timeout_ms, tries, tries == 1 ? "" : "s");
}

TILEOPS_API tileops_status tileops_connect(const char *address, tileops_client **out)
{
	tileops_connect_options opts;

	memset(&opts, 0, sizeof(opts));
	opts.address = address;
	return tileops_connect_opts(&opts, out);
}

TILEOPS_API tileops_status tileops_server_info_get(tileops_client *c, tileops_server_info *out)
{
	if (c == NULL || out == NULL)
		return tci_error(TILEOPS_ERR_INVALID_ARGUMENT, "server_info_get: %s is NULL",
		                 c == NULL ? "client" : "out");
	*out = c->info;
	return TILEOPS_OK;
}

/* Say Goodbye so the daemon frees the session now rather than on disconnect. */
static void session_goodbye(struct tileops_client *c)
{
	Tileops__Request req = TILEOPS__REQUEST__INIT;
	Tileops__Goodbye bye = TILEOPS__GOODBYE__INIT;
	char saved[1024];

	/* Best effort: whatever happens must not replace the caller's last error. */
	snprintf(saved, sizeof(saved), "%s", tileops_last_error());
	req.body_case = TILEOPS__REQUEST__BODY_GOODBYE;
	req.goodbye = &bye;
	(void)tci_request_call(c, &req, TCI_SEND_CLOSING, NULL);
	tci_error_set_text(saved);
}

TILEOPS_API void tileops_close(tileops_client *c)
{
	if (c == NULL)
		return;
	session_goodbye(c);
	client_shutdown(c);
}
