/* arena.c - client arenas: POSIX shm objects or files of arena_dir (see arena.h). */
#include "arena.h"

#include <dirent.h>
#include <errno.h>
#include <linux/magic.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

/*
 * The guard: a thread inside a guarded copy has arena_guard_active set and a
 * jump buffer; a SIGBUS raised there (by a truncated shm object) jumps back
 * and the copy reports failure. A SIGBUS anywhere else is a real bug and
 * gets the default action.
 */
static _Thread_local sigjmp_buf arena_guard_jmp;
static _Thread_local volatile sig_atomic_t arena_guard_active;

static void arena_sigbus(int sig, siginfo_t *info, void *uctx)
{
	(void)info;
	(void)uctx;
	if (arena_guard_active) {
		arena_guard_active = 0;
		siglongjmp(arena_guard_jmp, 1);
	}
	signal(sig, SIG_DFL);
	raise(sig);
}

int arena_global_init(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = arena_sigbus;
	sa.sa_flags = SA_SIGINFO | SA_NODEFER;
	sigemptyset(&sa.sa_mask);
	return sigaction(SIGBUS, &sa, NULL);
}

/* "tileops-" then at least one of [A-Za-z0-9._-], at most 200 in all. */
static int name_ok_chars(const char *name)
{
	size_t n = strlen(name);
	if (n < 9 || n > 200 || strncmp(name, "tileops-", 8) != 0)
		return 0;
	for (size_t i = 0; i < n; i++) {
		char c = name[i];
		if (!(c == '-' || c == '_' || c == '.' || (c >= '0' && c <= '9') ||
		      (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')))
			return 0;
	}
	return 1;
}

/* A POSIX shm name: '/' then a file name as above. */
static int name_ok(const char *name)
{
	return name[0] == '/' && name_ok_chars(name + 1);
}

/*
 * The checks both kinds of arena pass once open: a regular file (a FIFO or a
 * device node is refused before anything reads it), one name only (no hard
 * link elsewhere keeps it alive or lets it be found again), owned by the
 * client, of the size the Hello named. Maps it; closes fd in every case.
 */
static int map_checked(arena *a, int fd, const char *name, uint64_t size, uid_t owner_uid,
                       char *err, size_t errlen)
{
	struct stat st;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		snprintf(err, errlen, "arena '%s' is not a regular file or shared-memory object",
		         name);
		close(fd);
		return -1;
	}
	/* Another user's arena would let one client read or write another's bytes. */
	if (st.st_uid != owner_uid) {
		snprintf(err, errlen, "arena '%s' belongs to uid %u, not to the client (uid %u)",
		         name, (unsigned)st.st_uid, (unsigned)owner_uid);
		close(fd);
		return -1;
	}
	if (st.st_nlink != 1) {
		snprintf(err, errlen, "arena '%s' has %lu names (hard links); it must have one",
		         name, (unsigned long)st.st_nlink);
		close(fd);
		return -1;
	}
	if ((uint64_t)st.st_size != size) {
		snprintf(err, errlen, "arena '%s' has %lld bytes, the Hello said %llu", name,
		         (long long)st.st_size, (unsigned long long)size);
		close(fd);
		return -1;
	}
	void *p = mmap(NULL, (size_t)size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (p == MAP_FAILED) {
		snprintf(err, errlen, "cannot map arena '%s': %s", name, strerror(errno));
		return -1;
	}
	a->base = p;
	a->size = (size_t)size;
	return 0;
}

static int size_ok(uint64_t size, uint64_t max_size, char *err, size_t errlen)
{
	if (size == 0 || size > max_size) {
		snprintf(err, errlen, "arena size %llu is out of range [1, %llu] (max_arena_bytes)",
		         (unsigned long long)size, (unsigned long long)max_size);
		return 0;
	}
	return 1;
}

int arena_map(arena *a, const char *name, uint64_t size, uint64_t max_size, uid_t owner_uid,
              char *err, size_t errlen)
{
	memset(a, 0, sizeof(*a));
	if (!name_ok(name)) {
		snprintf(
		        err, errlen,
		        "arena name '%.64s' is invalid (expected '/tileops-' then letters, digits, "
		        "'-', '_' or '.')",
		        name);
		return -1;
	}
	if (!size_ok(size, max_size, err, errlen))
		return -1;
	int fd = shm_open(name, O_RDWR | O_NOFOLLOW | O_CLOEXEC, 0);
	if (fd < 0) {
		snprintf(err, errlen, "cannot open arena '%s': %s", name, strerror(errno));
		return -1;
	}
	if (map_checked(a, fd, name, size, owner_uid, err, errlen) != 0)
		return -1;
	/* Both sides have it mapped now: the name is not needed any more, and a
	 * client killed before it could remove the name leaves nothing behind. */
	shm_unlink(name);
	return 0;
}

int arena_map_in_dir(arena *a, const char *dir, const char *name, uint64_t size, uint64_t max_size,
                     uid_t owner_uid, char *err, size_t errlen)
{
	memset(a, 0, sizeof(*a));
	if (!dir || !dir[0]) {
		snprintf(err, errlen,
		         "arena '%.64s' is not a POSIX shm name ('/tileops-...') and this tileopsd "
		         "has no arena_dir",
		         name);
		return -1;
	}
	/* A file name of the folder, nothing else: no '/', so no way out of it
	 * ('..' cannot pass either: the name starts with "tileops-"). */
	if (strchr(name, '/') || strstr(name, "..") || name[0] == '\0' || !name_ok_chars(name)) {
		snprintf(err, errlen,
		         "arena name '%.64s' is invalid (expected a file name in arena_dir: "
		         "'tileops-' then letters, digits, '-', '_' or '.', no '/' or '..')",
		         name);
		return -1;
	}
	if (!size_ok(size, max_size, err, errlen))
		return -1;
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0) {
		snprintf(err, errlen, "cannot open arena_dir %s: %s", dir, strerror(errno));
		return -1;
	}
	/* O_NOFOLLOW: a symbolic link planted in the folder is refused, whatever
	 * it points at. O_NONBLOCK: a FIFO cannot stall the daemon's open. */
	int fd = openat(dfd, name, O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	if (fd < 0) {
		int e = errno;
		if (e == ELOOP)
			snprintf(err, errlen, "arena '%s' in %s is a symbolic link, not a file",
			         name, dir);
		else
			snprintf(err, errlen, "cannot open arena '%s' in %s: %s", name, dir,
			         strerror(e));
		close(dfd);
		return -1;
	}
	if (map_checked(a, fd, name, size, owner_uid, err, errlen) != 0) {
		close(dfd);
		return -1;
	}
	/* As for shm: mapped on both sides, the name has done its work. */
	unlinkat(dfd, name, 0);
	close(dfd);
	return 0;
}

int arena_dir_prepare(const char *dir, gid_t gid, char *note, size_t notelen, char *err,
                      size_t errlen)
{
	note[0] = '\0';
	/* Sticky and group-writable, like /tmp for the daemon's group: members
	 * create their arenas, only the owner (or the daemon) removes one. */
	if (mkdir(dir, 0700) == 0) {
		if (gid != (gid_t)-1 && chown(dir, (uid_t)-1, gid) != 0) {
			snprintf(
			        err, errlen,
			        "arena_dir %s: cannot give it group %u (allow_group): %s; tileopsd "
			        "must belong to allow_group",
			        dir, (unsigned)gid, strerror(errno));
			rmdir(dir); /* not left half made for the next start */
			return -1;
		}
		if (chmod(dir, 01770) != 0) {
			snprintf(err, errlen, "arena_dir %s: cannot set its mode: %s", dir,
			         strerror(errno));
			rmdir(dir);
			return -1;
		}
	} else if (errno != EEXIST) {
		snprintf(err, errlen, "cannot create arena_dir %s: %s", dir, strerror(errno));
		return -1;
	}
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0) {
		snprintf(err, errlen, "arena_dir %s is not a folder: %s", dir, strerror(errno));
		return -1;
	}
	/* Arenas of clients killed between creating the file and their Hello:
	 * nothing will ever map them, and on a tmpfs they hold memory. */
	int swept = 0;
	DIR *d = fdopendir(dup(dfd));
	if (d) {
		struct dirent *e;
		while ((e = readdir(d)) != NULL)
			if (strncmp(e->d_name, "tileops-", 8) == 0 &&
			    unlinkat(dfd, e->d_name, 0) == 0)
				swept++;
		closedir(d);
	}
	struct statfs sf;
	int tmpfs = fstatfs(dfd, &sf) != 0 || sf.f_type == TMPFS_MAGIC;
	char removed[64] = "";
	if (swept)
		snprintf(removed, sizeof(removed), "removed %d arenas left by earlier clients",
		         swept);
	if (!tmpfs)
		snprintf(note, notelen,
		         "arena_dir %s is not on a tmpfs: a disk backs the arenas%s%s", dir,
		         swept ? "; " : "", removed);
	else if (swept)
		snprintf(note, notelen, "arena_dir %s: %s", dir, removed);
	close(dfd);
	return 0;
}

void arena_unmap(arena *a)
{
	if (a->base)
		munmap(a->base, a->size);
	a->base = NULL;
	a->size = 0;
}

int arena_range_ok(const arena *a, uint64_t off, uint64_t len)
{
	return a->base && off <= a->size && len <= a->size - off;
}

/*
 * The jump buffer does not save the signal mask (a syscall each time): the
 * handler runs with SA_NODEFER, so SIGBUS is never left blocked.
 */
#define GUARDED(stmt)                                   \
	do {                                            \
		if (sigsetjmp(arena_guard_jmp, 0) != 0) \
			return -1;                      \
		arena_guard_active = 1;                 \
		stmt;                                   \
		arena_guard_active = 0;                 \
	} while (0)

static int guarded_copy(void *dst, const void *src, size_t len)
{
	GUARDED(memcpy(dst, src, len));
	return 0;
}

static int word_ok(const arena *a, size_t off, size_t size)
{
	return a->base && off % size == 0 && off <= a->size - size;
}

int arena_load_u64(const arena *a, size_t off, uint64_t *v)
{
	if (!word_ok(a, off, 8))
		return -1;
	uint64_t *p = (uint64_t *)((char *)a->base + off);
	GUARDED(*v = __atomic_load_n(p, __ATOMIC_ACQUIRE));
	return 0;
}

int arena_store_u64(const arena *a, size_t off, uint64_t v)
{
	if (!word_ok(a, off, 8))
		return -1;
	uint64_t *p = (uint64_t *)((char *)a->base + off);
	GUARDED(__atomic_store_n(p, v, __ATOMIC_RELEASE));
	return 0;
}

int arena_load_u32(const arena *a, size_t off, uint32_t *v)
{
	if (!word_ok(a, off, 4))
		return -1;
	uint32_t *p = (uint32_t *)((char *)a->base + off);
	GUARDED(*v = __atomic_load_n(p, __ATOMIC_ACQUIRE));
	return 0;
}

int arena_store_u32(const arena *a, size_t off, uint32_t v)
{
	if (!word_ok(a, off, 4))
		return -1;
	uint32_t *p = (uint32_t *)((char *)a->base + off);
	GUARDED(__atomic_store_n(p, v, __ATOMIC_SEQ_CST));
	return 0;
}

int arena_add_u32(const arena *a, size_t off, uint32_t v)
{
	if (!word_ok(a, off, 4))
		return -1;
	uint32_t *p = (uint32_t *)((char *)a->base + off);
	GUARDED(__atomic_fetch_add(p, v, __ATOMIC_SEQ_CST));
	return 0;
}

int arena_copy_in(const arena *a, size_t off, void *dst, size_t len)
{
	if (!arena_range_ok(a, off, len))
		return -1;
	return guarded_copy(dst, (const char *)a->base + off, len);
}

int arena_copy_out(const arena *a, size_t off, const void *src, size_t len)
{
	if (!arena_range_ok(a, off, len))
		return -1;
	return guarded_copy((char *)a->base + off, src, len);
}
