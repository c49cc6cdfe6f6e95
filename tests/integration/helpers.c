/*
 * helpers.c - shared pieces of the integration tests (see helpers.h).
 */
#include "integration/helpers.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>

/* ---- addresses and connecting ----------------------------------------- */

static const char *env_or_fail(const char *name)
{
	const char *v = getenv(name);

	cr_assert(v && *v, "%s is not set: run this test through ctest (FIXTURE daemon)", name);
	return v;
}

const char *th_address(void)
{
	return env_or_fail("TILEOPS_ADDRESS");
}

const char *th_stats_address(void)
{
	return env_or_fail("TILEOPS_STATS_ADDRESS");
}

void th_sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

int64_t th_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

tileops_status th_try_connect(const char *name, size_t arena_bytes, tileops_client **out)
{
	/* Generous: a hung daemon should fail a test, not stall ctest. */
	return th_try_connect_ms(name, arena_bytes, 60000, out);
}

tileops_status th_try_connect_ms(const char *name, size_t arena_bytes, int timeout_ms,
                                 tileops_client **out)
{
	tileops_connect_options o;
	int64_t deadline = th_now_ms() + TH_TIMEOUT_MS;
	const char *addr = getenv("TILEOPS_ADDRESS");
	tileops_status st;

	memset(&o, 0, sizeof(o));
	o.address = addr;
	o.arena_bytes = arena_bytes;
	o.timeout_ms = timeout_ms;
	o.name = name;
	for (;;) {
		st = tileops_connect_opts(&o, out);
		if (st != TILEOPS_ERR_CONNECT && st != TILEOPS_ERR_BUSY)
			return st;
		if (th_now_ms() > deadline)
			return st;
		th_sleep_ms(50);
	}
}

tileops_client *th_connect(const char *name, size_t arena_bytes)
{
	tileops_client *c = NULL;
	tileops_status st;

	th_address();
	st = th_try_connect(name, arena_bytes, &c);
	cr_assert(st == TILEOPS_OK, "connect to %s failed: %s (%s)", th_address(),
	          tileops_strerror(st), tileops_last_error());
	cr_assert(c != NULL, "connect returned OK but no client");
	return c;
}

/* ---- random data ------------------------------------------------------ */

th_rng th_rng_seed(uint64_t seed)
{
	th_rng r;

	r.s = seed ? seed : 0x9e3779b97f4a7c15ull;
	return r;
}

uint64_t th_rng_next(th_rng *r)
{
	r->s ^= r->s >> 12;
	r->s ^= r->s << 25;
	r->s ^= r->s >> 27;
	return r->s * 0x2545f4914f6cdd1dull;
}

float th_rng_float(th_rng *r, float lo, float hi)
{
	double u = (double)(th_rng_next(r) >> 11) / 9007199254740992.0;

	return lo + (float)(u * (double)(hi - lo));
}

void th_fill_bytes(th_rng *r, void *dst, size_t n)
{
	unsigned char *p = dst;

	while (n >= 8) {
		uint64_t v = th_rng_next(r);

		memcpy(p, &v, 8);
		p += 8;
		n -= 8;
	}
	if (n) {
		uint64_t v = th_rng_next(r);

		memcpy(p, &v, n);
	}
}

void th_fill_f32(th_rng *r, float *dst, size_t n, float lo, float hi)
{
	for (size_t i = 0; i < n; i++)
		dst[i] = th_rng_float(r, lo, hi);
}

/* ---- comparisons ------------------------------------------------------ */

long th_mismatch_f32(const float *got, const float *want, size_t n, float atol, float rtol)
{
	for (size_t i = 0; i < n; i++) {
		float d = fabsf(got[i] - want[i]);

		if (isnan(got[i]) || isnan(want[i]) || !(d <= atol + rtol * fabsf(want[i])))
			return (long)i;
	}
	return -1;
}

void th_expect_close_f32(const float *got, const float *want, size_t n, float atol, float rtol,
                         const char *what)
{
	long i = th_mismatch_f32(got, want, n, atol, rtol);

	cr_assert(i < 0, "%s: element %ld of %zu is %.9g, expected %.9g (atol %g, rtol %g)", what,
	          i, n, i < 0 ? 0.0 : (double)got[i], i < 0 ? 0.0 : (double)want[i], (double)atol,
	          (double)rtol);
}

uint16_t th_f32_to_bf16(float f)
{
	uint32_t u;

	memcpy(&u, &f, 4);
	if ((u & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((u >> 16) | 0x40); /* keep NaN a NaN */
	u += 0x7fffu + ((u >> 16) & 1u);
	return (uint16_t)(u >> 16);
}

float th_bf16_to_f32(uint16_t h)
{
	uint32_t u = (uint32_t)h << 16;
	float f;

	memcpy(&f, &u, 4);
	return f;
}

uint16_t th_f32_to_f16(float f)
{
	uint32_t u, mag;
	uint16_t sign;

	memcpy(&u, &f, 4);
	sign = (uint16_t)((u >> 16) & 0x8000u);
	mag = u & 0x7fffffffu;
	if (mag > 0x7f800000u)
		return sign | 0x7e00u; /* NaN */
	if (mag >= 0x477ff000u)
		return sign | 0x7c00u; /* 65520 and up round to infinity */
	if (mag < 0x38800000u) {
		/* Below 2^-14: a subnormal, in units of 2^-24 (exact in f32, then
		 * rounded to nearest even by lrintf's default mode). */
		float a;

		memcpy(&a, &mag, 4);
		return sign | (uint16_t)lrintf(a * 16777216.0f);
	}
	/* Rebias the exponent (127 to 15) and round the mantissa to 10 bits;
	 * a carry moves into the exponent as it should. */
	mag -= 0x38000000u;
	mag += 0x0fffu + ((mag >> 13) & 1u);
	return sign | (uint16_t)(mag >> 13);
}

float th_f16_to_f32(uint16_t h)
{
	int e = (h >> 10) & 0x1f;
	float m = (float)(h & 0x3ffu), v;

	if (e == 0)
		v = ldexpf(m, -24);
	else if (e == 31)
		v = m != 0.0f ? NAN : INFINITY;
	else
		v = ldexpf(m + 1024.0f, e - 25);
	return (h & 0x8000u) ? -v : v;
}

/* ---- tensors through the public API ----------------------------------- */

tileops_tensor th_tensor_on(tileops_client *c, int device, tileops_dtype dt, int ndim,
                            const int64_t *shape)
{
	tileops_tensor t = 0;
	tileops_status st = tileops_tensor_create_on(c, device, dt, ndim, shape, &t);

	cr_assert(st == TILEOPS_OK, "tensor_create_on(device %d, %s, ndim %d) failed: %s (%s)",
	          device, tileops_dtype_name(dt), ndim, tileops_strerror(st), tileops_last_error());
	cr_assert(t != 0, "tensor_create_on returned handle 0");
	return t;
}

tileops_tensor th_tensor(tileops_client *c, tileops_dtype dt, int ndim, const int64_t *shape)
{
	return th_tensor_on(c, 0, dt, ndim, shape);
}

tileops_tensor th_tensor_f32(tileops_client *c, int ndim, const int64_t *shape, const float *data)
{
	tileops_tensor t = th_tensor(c, TILEOPS_F32, ndim, shape);
	size_t n = 1;

	for (int i = 0; i < ndim; i++)
		n *= (size_t)shape[i];
	if (data)
		th_write(c, t, data, n * sizeof(float));
	return t;
}

void th_write(tileops_client *c, tileops_tensor t, const void *src, size_t len)
{
	tileops_status st = tileops_tensor_write(c, t, 0, src, len);

	cr_assert(st == TILEOPS_OK, "tensor_write(%zu bytes) failed: %s (%s)", len,
	          tileops_strerror(st), tileops_last_error());
}

void th_read(tileops_client *c, tileops_tensor t, void *dst, size_t len)
{
	tileops_status st = tileops_tensor_read(c, t, 0, dst, len);

	cr_assert(st == TILEOPS_OK, "tensor_read(%zu bytes) failed: %s (%s)", len,
	          tileops_strerror(st), tileops_last_error());
}

float *th_read_f32(tileops_client *c, tileops_tensor t, size_t n)
{
	float *v = malloc(n * sizeof(float));

	cr_assert_not_null(v);
	th_read(c, t, v, n * sizeof(float));
	return v;
}

float *th_read_bf16(tileops_client *c, tileops_tensor t, size_t n)
{
	uint16_t *bits = malloc(n * sizeof(uint16_t));
	float *f = malloc(n * sizeof(float));

	cr_assert(bits && f);
	th_read(c, t, bits, n * sizeof(uint16_t));
	for (size_t i = 0; i < n; i++)
		f[i] = th_bf16_to_f32(bits[i]);
	free(bits);
	return f;
}

void th_run(tileops_client *c, const tileops_op *op)
{
	tileops_status st = tileops_op_run(c, op);

	cr_assert(st == TILEOPS_OK, "op %s failed: %s (%s)", op->name, tileops_strerror(st),
	          tileops_last_error());
}

/* ---- the stats socket ------------------------------------------------- */

char *th_try_stats(void)
{
	const char *addr = getenv("TILEOPS_STATS_ADDRESS");
	nng_socket s;
	char *buf = NULL, *out = NULL;
	size_t len = 0;

	if (!addr || nng_req0_open(&s) != 0)
		return NULL;
	nng_socket_set_ms(s, NNG_OPT_RECVTIMEO, TH_TIMEOUT_MS);
	nng_socket_set_ms(s, NNG_OPT_SENDTIMEO, TH_TIMEOUT_MS);
	if (nng_dial(s, addr, NULL, 0) == 0 && nng_send(s, "stats", 5, 0) == 0 &&
	    nng_recv(s, &buf, &len, NNG_FLAG_ALLOC) == 0) {
		out = malloc(len + 1);
		if (out) {
			memcpy(out, buf, len);
			out[len] = '\0';
		}
		nng_free(buf, len);
	}
	nng_close(s);
	return out;
}

char *th_stats(void)
{
	char *j = th_try_stats();

	cr_assert(j != NULL, "no answer from the stats socket %s", th_stats_address());
	return j;
}

static const char *json_ws(const char *p)
{
	while (*p && isspace((unsigned char)*p))
		p++;
	return p;
}

/* p at the opening quote; returns the character after the closing one. */
static const char *json_skip_string(const char *p)
{
	for (p++; *p && *p != '"'; p++)
		if (*p == '\\' && p[1])
			p++;
	return *p ? p + 1 : p;
}

static const char *json_skip_value(const char *p)
{
	int depth = 0;

	p = json_ws(p);
	if (*p == '"')
		return json_skip_string(p);
	if (*p != '{' && *p != '[') {
		while (*p && *p != ',' && *p != '}' && *p != ']' && !isspace((unsigned char)*p))
			p++;
		return p;
	}
	for (; *p; p++) {
		if (*p == '"') {
			p = json_skip_string(p) - 1;
		} else if (*p == '{' || *p == '[') {
			depth++;
		} else if (*p == '}' || *p == ']') {
			if (--depth == 0)
				return p + 1;
		}
	}
	return p;
}

/* The value of `key` (keylen bytes) in the object at obj, or NULL. */
static const char *json_member(const char *obj, const char *key, size_t keylen)
{
	const char *p = json_ws(obj);

	if (*p != '{')
		return NULL;
	p = json_ws(p + 1);
	while (*p == '"') {
		const char *k = p + 1;
		const char *end = json_skip_string(p);
		size_t klen = (size_t)(end - 1 - k);

		p = json_ws(end);
		if (*p != ':')
			return NULL;
		p = json_ws(p + 1);
		if (klen == keylen && strncmp(k, key, keylen) == 0)
			return p;
		p = json_ws(json_skip_value(p));
		if (*p != ',')
			return NULL;
		p = json_ws(p + 1);
	}
	return NULL;
}

static const char *json_path(const char *json, const char *path)
{
	const char *v = json;

	while (v && *path) {
		const char *dot = strchr(path, '.');
		size_t n = dot ? (size_t)(dot - path) : strlen(path);

		v = json_member(v, path, n);
		path += n + (dot ? 1 : 0);
	}
	return v;
}

int th_json_number(const char *json, const char *path, double *out)
{
	const char *v = json ? json_path(json, path) : NULL;
	char *end;
	double d;

	if (!v)
		return -1;
	d = strtod(v, &end);
	if (end == v)
		return -1;
	*out = d;
	return 0;
}

int th_json_string(const char *json, const char *path, char *buf, size_t len)
{
	const char *v = json ? json_path(json, path) : NULL;
	size_t n = 0;

	if (!v || *v != '"' || len == 0)
		return -1;
	for (v++; *v && *v != '"' && n + 1 < len; v++)
		buf[n++] = *v;
	buf[n] = '\0';
	return 0;
}

double th_stat(const char *path)
{
	char *j = th_stats();
	double d = 0;
	int rc = th_json_number(j, path, &d);

	cr_assert(rc == 0, "the stats JSON has no number at '%s': %s", path, j);
	free(j);
	return d;
}

double th_own_tenant_stat(tileops_client *c, const char *field)
{
	tileops_server_info info;
	char path[160];

	cr_assert_eq(tileops_server_info_get(c, &info), TILEOPS_OK);
	snprintf(path, sizeof(path), "tenants.session-%llu.%s", (unsigned long long)info.session_id,
	         field);
	return th_stat(path);
}

double th_stat_wait(const char *path, double want, int timeout_ms)
{
	int64_t deadline = th_now_ms() + timeout_ms;
	double d;

	for (;;) {
		d = th_stat(path);
		if (d == want || th_now_ms() > deadline)
			return d;
		th_sleep_ms(50);
	}
}

double th_stat_wait_min(const char *path, double min, int timeout_ms)
{
	int64_t deadline = th_now_ms() + timeout_ms;
	double d;

	for (;;) {
		d = th_stat(path);
		if (d >= min || th_now_ms() > deadline)
			return d;
		th_sleep_ms(50);
	}
}

/* ---- client processes ------------------------------------------------- */

pid_t th_spawn(const char *role, int arg, int fd)
{
	pid_t pid = fork();

	cr_assert(pid >= 0, "fork failed: %s", strerror(errno));
	if (pid == 0) {
		char a[32], f[32];
		char *argv[] = { "tileops-test-child", NULL };

		snprintf(a, sizeof(a), "%d", arg);
		snprintf(f, sizeof(f), "%d", fd);
		setenv("TILEOPS_TEST_ROLE", role, 1);
		setenv("TILEOPS_TEST_ARG", a, 1);
		setenv("TILEOPS_TEST_FD", f, 1);
		execv("/proc/self/exe", argv);
		_exit(127);
	}
	return pid;
}

int th_child_role(const char **role, int *arg, int *fd)
{
	const char *r = getenv("TILEOPS_TEST_ROLE");
	const char *a = getenv("TILEOPS_TEST_ARG");
	const char *f = getenv("TILEOPS_TEST_FD");

	if (!r || !a || !f)
		return 0;
	*role = r;
	*arg = atoi(a);
	*fd = atoi(f);
	return 1;
}

/* ---- a raw protocol connection ---------------------------------------- */

void th_raw_open(th_raw *r)
{
	int64_t deadline = th_now_ms() + TH_TIMEOUT_MS;
	int rv;

	memset(r, 0, sizeof(*r));
	rv = nng_req0_open(&r->sock);
	cr_assert(rv == 0, "nng_req0_open: %s", nng_strerror(rv));
	nng_socket_set_ms(r->sock, NNG_OPT_RECVTIMEO, TH_TIMEOUT_MS);
	nng_socket_set_ms(r->sock, NNG_OPT_SENDTIMEO, TH_TIMEOUT_MS);
	/* A dropped connection must not make REQ resend behind the test's back. */
	nng_socket_set_ms(r->sock, NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE);
	while ((rv = nng_dial(r->sock, th_address(), NULL, 0)) != 0 && th_now_ms() < deadline)
		th_sleep_ms(50);
	cr_assert(rv == 0, "dial %s: %s", th_address(), nng_strerror(rv));
	r->seq = 0;
}

static int raw_make_shm(th_raw *r, size_t bytes)
{
	static int counter;
	int fd;

	/* A random part too: a test process killed before it unlinked its arena
	 * leaves the name behind for a later process with the same pid. */
	snprintf(r->shm_name, sizeof(r->shm_name), "/tileops-test-%d-%d-%08x", (int)getpid(),
	         ++counter, (unsigned)(th_now_ms() * 2654435761u) ^ (unsigned)rand());
	fd = shm_open(r->shm_name, O_CREAT | O_EXCL | O_RDWR, 0600);
	if (fd < 0)
		return -1;
	if (ftruncate(fd, (off_t)bytes) != 0) {
		close(fd);
		shm_unlink(r->shm_name);
		return -1;
	}
	r->arena = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (r->arena == MAP_FAILED) {
		r->arena = NULL;
		shm_unlink(r->shm_name);
		return -1;
	}
	r->arena_bytes = bytes;
	return 0;
}

int th_raw_hello_ex(th_raw *r, uint32_t version, size_t arena_bytes, size_t shm_bytes, char *msg,
                    size_t msglen)
{
	Tileops__Request req = TILEOPS__REQUEST__INIT;
	Tileops__Hello h = TILEOPS__HELLO__INIT;
	Tileops__Reply *rep;
	int status;

	if (shm_bytes) {
		cr_assert(raw_make_shm(r, shm_bytes) == 0, "cannot create shm %s: %s", r->shm_name,
		          strerror(errno));
	} else {
		/* A name that names nothing. */
		snprintf(r->shm_name, sizeof(r->shm_name), "/tileops-test-missing-%d",
		         (int)getpid());
	}
	h.protocol_version = version;
	h.client_name = "raw-test";
	h.arena_name = r->shm_name;
	h.arena_bytes = arena_bytes;
	h.client_pid = (int32_t)getpid();
	req.body_case = TILEOPS__REQUEST__BODY_HELLO;
	req.hello = &h;
	r->seq = 0;
	rep = th_raw_call(r, &req);
	cr_assert(rep != NULL, "no reply to Hello within %d ms", TH_TIMEOUT_MS);
	status = (int)rep->status;
	if (msg && msglen)
		snprintf(msg, msglen, "%s", rep->message ? rep->message : "");
	tileops__reply__free_unpacked(rep, NULL);
	return status;
}

void th_raw_hello(th_raw *r, size_t arena_bytes)
{
	char msg[512];
	int st = th_raw_hello_ex(r, TILEOPS__PROTOCOL_VERSION__PROTOCOL_VERSION_CURRENT,
	                         arena_bytes, arena_bytes, msg, sizeof(msg));

	cr_assert(st == TILEOPS__STATUS__STATUS_OK, "raw Hello refused (status %d): %s", st, msg);
}

uint8_t *th_raw_pack(th_raw *r, Tileops__Request *req, size_t *len)
{
	uint8_t *buf;

	req->seq = r->seq++;
	*len = tileops__request__get_packed_size(req);
	buf = malloc(*len ? *len : 1);
	cr_assert(buf != NULL);
	tileops__request__pack(req, buf);
	return buf;
}

Tileops__Reply *th_raw_send_bytes(th_raw *r, const void *buf, size_t len, int timeout_ms)
{
	char *rbuf = NULL;
	size_t rlen = 0;
	Tileops__Reply *rep;
	int rv;

	nng_socket_set_ms(r->sock, NNG_OPT_RECVTIMEO, timeout_ms);
	rv = nng_send(r->sock, (void *)buf, len, 0);
	cr_assert(rv == 0, "nng_send of %zu bytes: %s", len, nng_strerror(rv));
	rv = nng_recv(r->sock, &rbuf, &rlen, NNG_FLAG_ALLOC);
	nng_socket_set_ms(r->sock, NNG_OPT_RECVTIMEO, TH_TIMEOUT_MS);
	if (rv != 0)
		return NULL;
	rep = tileops__reply__unpack(NULL, rlen, (const uint8_t *)rbuf);
	nng_free(rbuf, rlen);
	cr_assert(rep != NULL, "the daemon's reply (%zu bytes) is not a valid Reply", rlen);
	return rep;
}

Tileops__Reply *th_raw_call(th_raw *r, Tileops__Request *req)
{
	size_t len;
	uint8_t *buf = th_raw_pack(r, req, &len);
	Tileops__Reply *rep = th_raw_send_bytes(r, buf, len, TH_TIMEOUT_MS);

	free(buf);
	return rep;
}

void th_raw_pipeline(th_raw *r, Tileops__Request **reqs, int n, Tileops__Reply **replies)
{
	nng_ctx ctx[64];
	nng_aio *aio[64];
	cr_assert(n > 0 && n <= 64, "th_raw_pipeline: %d requests, at most 64", n);
	for (int i = 0; i < n; i++) {
		size_t len;
		uint8_t *buf = th_raw_pack(r, reqs[i], &len);
		nng_msg *m;
		cr_assert_eq(nng_ctx_open(&ctx[i], r->sock), 0);
		cr_assert_eq(nng_aio_alloc(&aio[i], NULL, NULL), 0);
		nng_aio_set_timeout(aio[i], TH_TIMEOUT_MS);
		cr_assert_eq(nng_msg_alloc(&m, len), 0);
		memcpy(nng_msg_body(m), buf, len);
		free(buf);
		nng_aio_set_msg(aio[i], m);
		nng_ctx_send(ctx[i], aio[i]);
	}
	for (int i = 0; i < n; i++) {
		nng_aio_wait(aio[i]);
		cr_assert_eq(nng_aio_result(aio[i]), 0, "pipelined request %d: send failed", i);
		nng_ctx_recv(ctx[i], aio[i]);
	}
	for (int i = 0; i < n; i++) {
		nng_aio_wait(aio[i]);
		replies[i] = NULL;
		if (nng_aio_result(aio[i]) == 0) {
			nng_msg *m = nng_aio_get_msg(aio[i]);
			replies[i] = tileops__reply__unpack(NULL, nng_msg_len(m), nng_msg_body(m));
			cr_assert(replies[i] != NULL,
			          "pipelined request %d: the reply is not a Reply", i);
			nng_msg_free(m);
		}
		nng_aio_free(aio[i]);
		nng_ctx_close(ctx[i]);
	}
}

void th_raw_close(th_raw *r)
{
	nng_close(r->sock);
	if (r->arena) {
		munmap(r->arena, r->arena_bytes);
		r->arena = NULL;
	}
	if (r->shm_name[0])
		shm_unlink(r->shm_name);
	r->shm_name[0] = '\0';
}

Tileops__Reply *th_raw_create(th_raw *r, Tileops__DType dt, size_t ndim, const int64_t *shape)
{
	Tileops__Request req = TILEOPS__REQUEST__INIT;
	Tileops__TensorCreate tc = TILEOPS__TENSOR_CREATE__INIT;

	tc.dtype = dt;
	tc.n_shape = ndim;
	tc.shape = (int64_t *)shape;
	req.body_case = TILEOPS__REQUEST__BODY_TENSOR_CREATE;
	req.tensor_create = &tc;
	return th_raw_call(r, &req);
}

Tileops__Reply *th_raw_write(th_raw *r, uint64_t handle, uint64_t tensor_offset,
                             uint64_t arena_offset, uint64_t length)
{
	Tileops__Request req = TILEOPS__REQUEST__INIT;
	Tileops__TensorWrite w = TILEOPS__TENSOR_WRITE__INIT;

	w.handle = handle;
	w.tensor_offset = tensor_offset;
	w.arena_offset = arena_offset;
	w.length = length;
	req.body_case = TILEOPS__REQUEST__BODY_TENSOR_WRITE;
	req.tensor_write = &w;
	return th_raw_call(r, &req);
}

Tileops__Reply *th_raw_read(th_raw *r, uint64_t handle, uint64_t tensor_offset,
                            uint64_t arena_offset, uint64_t length)
{
	Tileops__Request req = TILEOPS__REQUEST__INIT;
	Tileops__TensorRead rd = TILEOPS__TENSOR_READ__INIT;

	rd.handle = handle;
	rd.tensor_offset = tensor_offset;
	rd.arena_offset = arena_offset;
	rd.length = length;
	req.body_case = TILEOPS__REQUEST__BODY_TENSOR_READ;
	req.tensor_read = &rd;
	return th_raw_call(r, &req);
}

/* ---- misc ------------------------------------------------------------- */

int th_contains(const char *haystack, const char *needle)
{
	size_t n = strlen(needle);

	if (!haystack)
		return 0;
	for (; *haystack; haystack++)
		if (strncasecmp(haystack, needle, n) == 0)
			return 1;
	return n == 0;
}

const char *th_expected_backend(void)
{
	const char *b = getenv("TILEOPS_TEST_BACKEND");
	return b && *b ? b : "cpu";
}

double th_cpu_seconds(pid_t pid)
{
	char path[64], buf[2048], *p;
	unsigned long long ut = 0, st = 0;
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	cr_assert(f != NULL, "cannot open %s: %s", path, strerror(errno));
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	/* Fields after the command name, which may hold spaces: state is field 3,
	 * utime 14 and stime 15. */
	p = strrchr(buf, ')');
	cr_assert(p != NULL, "%s is not what Linux writes", path);
	cr_assert_eq(
	        sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st), 2,
	        "cannot parse %s", path);
	return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}
