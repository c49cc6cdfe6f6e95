/* arena.c - client shm arenas (see arena.h). */
#include "arena.h"

#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
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

static int name_ok(const char *name)
{
	size_t n = strlen(name);
	if (n < 10 || n > 200 || strncmp(name, "/tileops-", 9) != 0)
		return 0;
	for (size_t i = 1; i < n; i++) {
		char c = name[i];
		if (!(c == '-' || c == '_' || c == '.' || (c >= '0' && c <= '9') ||
		      (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')))
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
	if (size == 0 || size > max_size) {
		snprintf(err, errlen, "arena size %llu is out of range [1, %llu] (max_arena_bytes)",
		         (unsigned long long)size, (unsigned long long)max_size);
		return -1;
	}
	int fd = shm_open(name, O_RDWR | O_NOFOLLOW | O_CLOEXEC, 0);
	if (fd < 0) {
		snprintf(err, errlen, "cannot open arena '%s': %s", name, strerror(errno));
		return -1;
	}
	struct stat st;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		snprintf(err, errlen, "arena '%s' is not a shared-memory object", name);
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
	/* Both sides have it mapped now: the name is not needed any more, and a
	 * client killed before it could remove the name leaves nothing behind. */
	shm_unlink(name);
	a->base = p;
	a->size = (size_t)size;
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
