/*
 * helpers.h - what the integration tests share: connecting to the test
 * daemon, seeded random data, float comparisons, the stats socket and a raw
 * protocol connection for sending the daemon what the library never would.
 *
 * Functions named th_* that return void or a value fail the current
 * Criterion test (cr_assert) when something goes wrong; the th_try_* ones
 * return a status instead and are safe in forked children and threads.
 */
#ifndef TILEOPS_TEST_HELPERS_H
#define TILEOPS_TEST_HELPERS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <unistd.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>

#include "tileops.h"
#include "tileops.pb-c.h"

/* How long a test waits for anything the daemon should do promptly. */
#define TH_TIMEOUT_MS 10000

/* $TILEOPS_ADDRESS and $TILEOPS_STATS_ADDRESS (set by ctest); fail if unset. */
const char *th_address(void);
const char *th_stats_address(void);

/*
 * Connect to the test daemon, retrying for a few seconds while it is busy
 * or still starting. arena_bytes 0 takes the library's default.
 */
tileops_status th_try_connect(const char *name, size_t arena_bytes, tileops_client **out);
/* th_try_connect with each reply awaited at most timeout_ms. */
tileops_status th_try_connect_ms(const char *name, size_t arena_bytes, int timeout_ms,
                                 tileops_client **out);
tileops_client *th_connect(const char *name, size_t arena_bytes);

/* ---- random data (xorshift64*, seeded so a failure repeats) ----------- */

typedef struct th_rng {
	uint64_t s;
} th_rng;

th_rng th_rng_seed(uint64_t seed);
uint64_t th_rng_next(th_rng *r);
/* Uniform in [lo, hi). */
float th_rng_float(th_rng *r, float lo, float hi);
void th_fill_bytes(th_rng *r, void *dst, size_t n);
void th_fill_f32(th_rng *r, float *dst, size_t n, float lo, float hi);

/* ---- comparisons ------------------------------------------------------ */

/*
 * Index of the first element where |got - want| > atol + rtol * |want|
 * (or either is NaN), or -1 when all are close.
 */
long th_mismatch_f32(const float *got, const float *want, size_t n, float atol, float rtol);
/* Fail the test at the first mismatch, naming `what`, the index and both values. */
void th_expect_close_f32(const float *got, const float *want, size_t n, float atol, float rtol,
                         const char *what);

/* bf16 <-> f32, round to nearest even (as the daemon's references do). */
uint16_t th_f32_to_bf16(float f);
float th_bf16_to_f32(uint16_t h);
/* f16 <-> f32, round to nearest even; past the f16 range is infinity. */
uint16_t th_f32_to_f16(float f);
float th_f16_to_f32(uint16_t h);

/* ---- tensors through the public API ----------------------------------- */

/* Create a tensor; fail the test with the daemon's message if refused. */
tileops_tensor th_tensor(tileops_client *c, tileops_dtype dt, int ndim, const int64_t *shape);
/* The same on device `device` (tileops_tensor_create_on). */
tileops_tensor th_tensor_on(tileops_client *c, int device, tileops_dtype dt, int ndim,
                            const int64_t *shape);
/* Create an f32 tensor and write n = numel(shape) floats from data (if not NULL). */
tileops_tensor th_tensor_f32(tileops_client *c, int ndim, const int64_t *shape, const float *data);
void th_write(tileops_client *c, tileops_tensor t, const void *src, size_t len);
void th_read(tileops_client *c, tileops_tensor t, void *dst, size_t len);
/* The first n elements of an f32 or a bf16 tensor as floats (malloc'd; free them). */
float *th_read_f32(tileops_client *c, tileops_tensor t, size_t n);
float *th_read_bf16(tileops_client *c, tileops_tensor t, size_t n);
/* Run an op and fail the test with the daemon's message unless it is accepted. */
void th_run(tileops_client *c, const tileops_op *op);

/* ---- the stats socket ------------------------------------------------- */

/* The stats JSON (malloc'd, NUL-terminated; free it), or NULL. */
char *th_try_stats(void);
char *th_stats(void);
/*
 * A number in a JSON document by dotted path, e.g. "sessions" or
 * "ops.add.count". Returns 0 and sets *out, or -1 when the path is absent.
 */
int th_json_number(const char *json, const char *path, double *out);
/* A string by dotted path into buf; 0 or -1. */
int th_json_string(const char *json, const char *path, char *buf, size_t len);
/* th_json_number on a fresh stats document; fails the test if absent. */
double th_stat(const char *path);
/* th_stat of `field` of the graph cache of c's own tenant (session-<id>). */
double th_own_tenant_stat(tileops_client *c, const char *field);
/*
 * Poll the stats until `path` equals `want` or timeout_ms passes; returns
 * the last value seen. Never assumes how fast the daemon reacts.
 */
double th_stat_wait(const char *path, double want, int timeout_ms);

/* Like th_stat_wait, but until the value is at least `min`. */
double th_stat_wait_min(const char *path, double min, int timeout_ms);

/* ---- client processes ------------------------------------------------- */

/*
 * nng refuses to run in a forked child of a process that has used it, so a
 * test's client processes are fresh executions of the test binary itself:
 * th_spawn forks and re-executes /proc/self/exe with TILEOPS_TEST_ROLE,
 * _ARG and _FD in its environment (fd, if >= 0, stays open in the child).
 * A test file that spawns children declares TH_CHILD_MAIN(fn): before
 * Criterion's main runs, a child calls fn(role, arg, fd) and exits with
 * its return value.
 */
pid_t th_spawn(const char *role, int arg, int fd);
/* 1 in a spawned child (and fills the out-parameters), else 0. */
int th_child_role(const char **role, int *arg, int *fd);

#define TH_CHILD_MAIN(fn)                                            \
	__attribute__((constructor)) static void th_child_main(void) \
	{                                                            \
		const char *role_;                                   \
		int arg_, fd_;                                       \
		if (th_child_role(&role_, &arg_, &fd_))              \
			_exit(fn(role_, arg_, fd_));                 \
	}

/* ---- a raw protocol connection ---------------------------------------- */

typedef struct th_raw {
	nng_socket sock;
	uint64_t seq;
	char shm_name[64];
	void *arena; /* mapped shm arena after th_raw_hello, else NULL */
	size_t arena_bytes;
} th_raw;

/* Dial the control socket with a REQ0 socket; replies wait at most TH_TIMEOUT_MS. */
void th_raw_open(th_raw *r);
/*
 * Create a shm arena of arena_bytes and send Hello with `version`.
 * shm_bytes != arena_bytes makes the shm object's size disagree with the
 * Hello. Returns the reply's status.
 */
int th_raw_hello_ex(th_raw *r, uint32_t version, size_t arena_bytes, size_t shm_bytes, char *msg,
                    size_t msglen);
/* A normal Hello that must succeed. */
void th_raw_hello(th_raw *r, size_t arena_bytes);
/* Send a request (its seq is set here) and return the decoded reply, or NULL on time-out. */
Tileops__Reply *th_raw_call(th_raw *r, Tileops__Request *req);
/* Send raw bytes; return the decoded reply, or NULL when none came within timeout_ms. */
Tileops__Reply *th_raw_send_bytes(th_raw *r, const void *buf, size_t len, int timeout_ms);
/* Pack a request (seq set here) into a malloc'd buffer; *len gets its size. */
uint8_t *th_raw_pack(th_raw *r, Tileops__Request *req, size_t *len);
void th_raw_close(th_raw *r);
/*
 * Send n requests at once, each on its own nng context (so none waits for
 * the one before it to be answered), with consecutive seqs from r->seq;
 * then wait for every reply. replies[i] is NULL for a request that got no
 * answer within TH_TIMEOUT_MS. Free them with tileops__reply__free_unpacked.
 */
void th_raw_pipeline(th_raw *r, Tileops__Request **reqs, int n, Tileops__Reply **replies);

/* Small request builders for raw tests (no params beyond what is named). */
Tileops__Reply *th_raw_create(th_raw *r, Tileops__DType dt, size_t ndim, const int64_t *shape);
Tileops__Reply *th_raw_write(th_raw *r, uint64_t handle, uint64_t tensor_offset,
                             uint64_t arena_offset, uint64_t length);
Tileops__Reply *th_raw_read(th_raw *r, uint64_t handle, uint64_t tensor_offset,
                            uint64_t arena_offset, uint64_t length);

/* ---- misc ------------------------------------------------------------- */

void th_sleep_ms(int ms);
/* Monotonic milliseconds. */
int64_t th_now_ms(void);
/* 1 when `haystack` contains `needle`, ignoring case. */
int th_contains(const char *haystack, const char *needle);

/* The backend the test daemon runs: $TILEOPS_TEST_BACKEND, "cpu" by default. */
const char *th_expected_backend(void);

/* utime + stime of process pid, in seconds (asserts it can be read). */
double th_cpu_seconds(pid_t pid);

#endif /* TILEOPS_TEST_HELPERS_H */
