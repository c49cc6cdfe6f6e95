/*
 * test_arena_dir.c - client arenas as files of the daemon's arena_dir, the
 * way a client in another container shares memory with tileopsd
 * (docs/operations.md, "Kubernetes"): libtileops finds `arenas` beside the
 * control socket by itself, ops run through it, a client that cannot see
 * the daemon's /dev/shm at all is served, and the names, links, sizes and
 * owners a hostile client could hand the daemon are refused with a message
 * while the daemon goes on serving others. The default (POSIX shm, no
 * arena_dir) is what every other integration test runs.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "integration/daemon2.h"
#include "integration/helpers.h"

#define ARENA_BYTES 8192

static void cleanup(void)
{
	daemon2_kill_running();
}

TestSuite(arena_dir, .fini = cleanup, .timeout = 120);

/* An add through a fresh client; fails the test unless the sum comes back. */
static void add_runs(tileops_client *c)
{
	const int64_t shape[] = { 4 };
	float a[4] = { 1, 2, 3, 4 }, got[4], want[4] = { 2, 4, 6, 8 };
	tileops_tensor ta = th_tensor_f32(c, 1, shape, a);
	tileops_tensor tout = th_tensor_f32(c, 1, shape, NULL);
	tileops_tensor in[2] = { ta, ta };
	tileops_op add = { "add", in, 2, &tout, 1, NULL, 0 };

	th_run(c, &add);
	th_read(c, tout, got, sizeof(got));
	th_expect_close_f32(got, want, 4, 0, 0, "add through the arena folder");
}

/*
 * A spawned client with a /dev/shm of its own (a private mount namespace):
 * it shares nothing with the daemon but the socket's folder, as a client
 * pod does. Exit 77 when the namespace cannot be made (not root).
 */
static int child(const char *role, int arg, int fd)
{
	tileops_client *c = NULL;
	tileops_status st;

	(void)arg;
	(void)fd;
	if (strcmp(role, "private-shm") != 0)
		return 2;
	if (unshare(CLONE_NEWNS) != 0)
		return 77;
	if (mount("none", "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
	    mount("tmpfs", "/dev/shm", "tmpfs", 0, "size=1m") != 0)
		return 77;
	st = th_try_connect("private-shm", 0, &c);
	if (st != TILEOPS_OK) {
		fprintf(stderr, "child: connect: %s\n", tileops_last_error());
		return 1;
	}
	add_runs(c);
	tileops_close(c);
	return 0;
}
TH_CHILD_MAIN(child)

Test(arena_dir, ops_run_through_the_folder_beside_the_socket)
{
	daemon2 d;
	char dir[128];
	struct stat st;
	char buf[4096];
	int ifd, created = 0, deleted = 0;
	ssize_t n;

	daemon2_start(&d, "arena_dir = arenas\n");
	daemon2_use(&d);
	unsetenv("TILEOPS_ARENA_DIR");
	snprintf(dir, sizeof(dir), "%s/arenas", d.dir);
	cr_assert_eq(lstat(dir, &st), 0, "the daemon did not make %s", dir);
	cr_assert(S_ISDIR(st.st_mode));
	cr_assert_eq(st.st_mode & 07777, 01770, "mode %o, expected 1770 (sticky, group-writable)",
	             (unsigned)(st.st_mode & 07777));

	/* Watch the folder: the client's arena must appear there and go away. */
	ifd = inotify_init1(IN_NONBLOCK);
	cr_assert_geq(ifd, 0);
	cr_assert_geq(inotify_add_watch(ifd, dir, IN_CREATE | IN_DELETE), 0);
	tileops_client *c = th_connect("in-folder", 0);
	add_runs(c);
	while ((n = read(ifd, buf, sizeof(buf))) > 0) {
		for (char *p = buf; p < buf + n;) {
			struct inotify_event *e = (struct inotify_event *)p;
			if (e->len && strncmp(e->name, "tileops-", 8) == 0) {
				created += (e->mask & IN_CREATE) != 0;
				deleted += (e->mask & IN_DELETE) != 0;
			}
			p += sizeof(*e) + e->len;
		}
	}
	close(ifd);
	cr_assert_eq(created, 1, "the client's arena was not created in %s", dir);
	cr_assert_eq(deleted, 1, "the arena's name was not removed after Hello");
	tileops_close(c);

	/* A client that cannot see the daemon's /dev/shm. */
	pid_t pid = th_spawn("private-shm", 0, -1);
	int status;
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFEXITED(status));
	if (WEXITSTATUS(status) == 77)
		fprintf(stderr, "arena_dir: no mount namespace (not root): the private /dev/shm "
		                "client was not run\n");
	else
		cr_assert_eq(WEXITSTATUS(status), 0, "the client with its own /dev/shm failed");
	daemon2_stop(&d);
}

/* Hello with arena `name` of `bytes` on a fresh raw connection; the status, msg filled. */
static int hello_named(const char *name, uint64_t bytes, char *msg, size_t len)
{
	Tileops__Request req = TILEOPS__REQUEST__INIT;
	Tileops__Hello h = TILEOPS__HELLO__INIT;
	Tileops__Reply *rep;
	th_raw r;
	int status;

	th_raw_open(&r);
	h.protocol_version = TILEOPS__PROTOCOL_VERSION__PROTOCOL_VERSION_CURRENT;
	h.client_name = "hostile";
	h.arena_name = (char *)name;
	h.arena_bytes = bytes;
	h.client_pid = (int32_t)getpid();
	req.body_case = TILEOPS__REQUEST__BODY_HELLO;
	req.hello = &h;
	rep = th_raw_call(&r, &req);
	cr_assert(rep != NULL, "no reply to the Hello naming '%s'", name);
	status = (int)rep->status;
	snprintf(msg, len, "%s", rep->message ? rep->message : "");
	tileops__reply__free_unpacked(rep, NULL);
	th_raw_close(&r);
	return status;
}

static void expect_refused(const char *name, uint64_t bytes, const char *needle)
{
	char msg[512];
	int st = hello_named(name, bytes, msg, sizeof(msg));

	cr_assert_eq(st, TILEOPS__STATUS__STATUS_INVALID_ARGUMENT,
	             "arena '%s': status %d (%s), expected INVALID_ARGUMENT", name, st, msg);
	cr_assert(th_contains(msg, needle), "arena '%s': message '%s' lacks '%s'", name, msg,
	          needle);
}

/* A file of `bytes` bytes at path, mode 0660; its fd closed. */
static void make_file(const char *path, size_t bytes)
{
	int fd = open(path, O_CREAT | O_EXCL | O_RDWR, 0660);

	cr_assert_geq(fd, 0, "create %s: %s", path, strerror(errno));
	cr_assert_eq(ftruncate(fd, (off_t)bytes), 0);
	close(fd);
}

Test(arena_dir, hostile_names_links_sizes_and_owners_are_refused)
{
	daemon2 d;
	char dir[128], path[256], path2[256], outside[256];
	char msg[512];

	daemon2_start(&d, "arena_dir = arenas\n");
	daemon2_use(&d);
	snprintf(dir, sizeof(dir), "%s/arenas", d.dir);

	/* Names that would leave the folder. */
	expect_refused("../tileops-x", ARENA_BYTES, "invalid");
	expect_refused("tileops-a/../../log", ARENA_BYTES, "invalid");
	expect_refused("tileops-..", ARENA_BYTES, "invalid");
	expect_refused("", ARENA_BYTES, "invalid");
	expect_refused("log", ARENA_BYTES, "invalid");

	/* A symbolic link to a file of the right size and owner outside. */
	snprintf(outside, sizeof(outside), "%s/outside", d.dir);
	make_file(outside, ARENA_BYTES);
	snprintf(path, sizeof(path), "%s/tileops-link", dir);
	cr_assert_eq(symlink(outside, path), 0);
	expect_refused("tileops-link", ARENA_BYTES, "symbolic link");

	/* A hard link: the file would live on under another name. */
	snprintf(path, sizeof(path), "%s/tileops-hard", dir);
	cr_assert_eq(link(outside, path), 0, "link: %s", strerror(errno));
	expect_refused("tileops-hard", ARENA_BYTES, "names");

	/* A size other than the Hello's. */
	snprintf(path, sizeof(path), "%s/tileops-small", dir);
	make_file(path, ARENA_BYTES / 2);
	expect_refused("tileops-small", ARENA_BYTES, "bytes");

	/* A FIFO: refused, and opening it does not stall the daemon. */
	snprintf(path, sizeof(path), "%s/tileops-fifo", dir);
	cr_assert_eq(mkfifo(path, 0660), 0);
	expect_refused("tileops-fifo", ARENA_BYTES, "not a regular file");

	/* A name with nothing behind it. */
	expect_refused("tileops-missing", ARENA_BYTES, "cannot open");
	/* A shm name this daemon cannot see: the message points at the folder. */
	expect_refused("/tileops-not-in-our-shm", ARENA_BYTES,
	               "must create its arena in arena_dir");

	/* Another user's file (root only: chown). */
	snprintf(path2, sizeof(path2), "%s/tileops-theirs", dir);
	make_file(path2, ARENA_BYTES);
	if (geteuid() == 0) {
		cr_assert_eq(chown(path2, 65534, 65534), 0);
		expect_refused("tileops-theirs", ARENA_BYTES, "belongs to uid 65534");
	} else {
		fprintf(stderr, "arena_dir: not root, the other-owner case was not run\n");
	}

	/* A file of ours passes the same checks, and the daemon removes its name. */
	snprintf(path, sizeof(path), "%s/tileops-good", dir);
	make_file(path, ARENA_BYTES);
	int st = hello_named("tileops-good", ARENA_BYTES, msg, sizeof(msg));
	cr_assert_eq(st, TILEOPS__STATUS__STATUS_OK, "a valid arena file was refused: %s", msg);
	cr_assert_neq(access(path, F_OK), 0, "the daemon left the arena's name behind");

	/* POSIX shm still works beside the folder, and the daemon serves others. */
	unsetenv("TILEOPS_ARENA_DIR");
	th_raw r;
	th_raw_open(&r);
	th_raw_hello(&r, ARENA_BYTES);
	th_raw_close(&r);
	tileops_client *c = th_connect("after-the-refusals", 0);
	add_runs(c);
	tileops_close(c);
	daemon2_stop(&d);
}

Test(arena_dir, absolute_folder_is_swept_at_start_and_named_by_the_environment)
{
	char adir[] = "/tmp/tileops-arenas-XXXXXX";
	char conf[128], stale[160];
	daemon2 d;

	cr_assert_not_null(mkdtemp(adir));
	snprintf(stale, sizeof(stale), "%s/tileops-stale-1", adir);
	make_file(stale, ARENA_BYTES);
	snprintf(conf, sizeof(conf), "arena_dir = %s\n", adir);
	daemon2_start(&d, conf);
	daemon2_use(&d);
	cr_assert_neq(access(stale, F_OK), 0, "a stale arena was left in %s", adir);
	cr_assert(daemon2_log_has(&d, "removed 1 arenas"), "the log does not report the sweep");

	/* Not beside the socket: found through TILEOPS_ARENA_DIR. */
	setenv("TILEOPS_ARENA_DIR", adir, 1);
	tileops_client *c = th_connect("env-folder", 0);
	add_runs(c);
	tileops_close(c);

	/* The wrong folder: the daemon says where it looked. */
	setenv("TILEOPS_ARENA_DIR", "/tmp", 1);
	tileops_client *bad = NULL;
	tileops_connect_options o;
	memset(&o, 0, sizeof(o));
	o.address = d.address;
	cr_assert_neq(tileops_connect_opts(&o, &bad), TILEOPS_OK);
	cr_assert(th_contains(tileops_last_error(), adir), "the error '%s' does not name %s",
	          tileops_last_error(), adir);
	unsetenv("TILEOPS_ARENA_DIR");

	/* Without the variable the client uses POSIX shm, which this daemon takes too. */
	c = th_connect("shm-client", 0);
	add_runs(c);
	tileops_close(c);
	daemon2_stop(&d);
	rmdir(adir);
}

Test(arena_dir, a_daemon_without_arena_dir_refuses_file_names)
{
	daemon2 d;
	char msg[512];

	daemon2_start(&d, "");
	daemon2_use(&d);
	int st = hello_named("tileops-anything", ARENA_BYTES, msg, sizeof(msg));
	cr_assert_eq(st, TILEOPS__STATUS__STATUS_INVALID_ARGUMENT);
	cr_assert(th_contains(msg, "no arena_dir"), "message '%s'", msg);
	daemon2_stop(&d);
}
