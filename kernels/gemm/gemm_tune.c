/*
 * gemm_tune.c - the GEMM tuning table (tk_gemm.h): configuration and shape
 * class strings, the table that maps a shape class to the configuration
 * that measured fastest, and the cache file it is loaded from and saved to
 * (docs/tuning.md). Plain C: every build has it, so a CPU-only tileopsd can
 * still check a cache file.
 *
 * The table is a sorted array under a reader-writer lock: gemm and bmm
 * look an entry up on every call (readers), tuning adds one now and then.
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tk_gemm.h"

#define CLASS_MAX 64
#define GPU_MAX 128
#define LINE_MAX_LEN 512
#define FIELD_MAX (1 << 20)

static const char *const kind_names[TK_GEMM_KIND_COUNT] = { "simple", "sm90", "smallm", "decode",
	                                                    "simt" };
static const char header_word[] = "tileops-gemm-tune";
static const int format_version = 1;

typedef struct tune_entry {
	char cls[CLASS_MAX];
	tk_gemm_config cfg;
	double us;
} tune_entry;

/* What one cache file holds, read and checked. */
typedef struct tune_file {
	tune_entry *v;
	size_t n, cap;
	char gpu[GPU_MAX];
} tune_file;

static struct {
	pthread_rwlock_t lock;
	tune_entry *v; /* sorted by cls */
	size_t n, cap;
	char gpu[GPU_MAX]; /* the device the entries are for; "" unknown */
} table = { PTHREAD_RWLOCK_INITIALIZER, NULL, 0, 0, "" };

/* first_use is read without the lock (atomically) on every gemm and bmm
 * launch; the lock only guards path. */
static struct {
	pthread_mutex_t lock;
	int first_use;
	char path[1024];
} first_use = { PTHREAD_MUTEX_INITIALIZER, 0, "" };

/* ---- strings ---------------------------------------------------------------- */

void tk_gemm_config_str(const tk_gemm_config *c, char *buf, size_t len)
{
	const char *kind =
	        c->kind >= 0 && c->kind < TK_GEMM_KIND_COUNT ? kind_names[c->kind] : "invalid";

	snprintf(buf, len, "%s m%d n%d k%d s%d c%d sk%d", kind, c->tile_m, c->tile_n, c->tile_k,
	         c->stages, c->cluster, c->split_k);
}

/* The next space-separated token of *s, copied into tok; 0 when none is left. */
static int next_token(const char **s, char *tok, size_t len)
{
	const char *p = *s;
	size_t n = 0;

	while (*p == ' ' || *p == '\t')
		p++;
	if (*p == '\0')
		return 0;
	while (*p != '\0' && *p != ' ' && *p != '\t') {
		if (n + 1 >= len)
			return 0;
		tok[n++] = *p++;
	}
	tok[n] = '\0';
	*s = p;
	return 1;
}

/* tok is prefix followed by a decimal number in [0, max]. */
static int parse_field(const char *tok, const char *prefix, int64_t max, int64_t *out)
{
	size_t pl = strlen(prefix);
	int64_t v = 0;

	if (strncmp(tok, prefix, pl) != 0 || tok[pl] == '\0')
		return -1;
	for (const char *p = tok + pl; *p; p++) {
		if (!isdigit((unsigned char)*p))
			return -1;
		v = v * 10 + (*p - '0');
		if (v > max)
			return -1;
	}
	*out = v;
	return 0;
}

int tk_gemm_config_parse(const char *s, tk_gemm_config *c)
{
	static const char *const prefixes[] = { "m", "n", "k", "s", "c", "sk" };
	int *fields[6];
	tk_gemm_config r;
	char tok[32];
	int kind = -1;

	memset(&r, 0, sizeof(r));
	fields[0] = &r.tile_m;
	fields[1] = &r.tile_n;
	fields[2] = &r.tile_k;
	fields[3] = &r.stages;
	fields[4] = &r.cluster;
	fields[5] = &r.split_k;
	if (s == NULL || !next_token(&s, tok, sizeof(tok)))
		return -1;
	for (int k = 0; k < TK_GEMM_KIND_COUNT; k++)
		if (strcmp(tok, kind_names[k]) == 0)
			kind = k;
	if (kind < 0)
		return -1;
	r.kind = kind;
	for (int i = 0; i < 6; i++) {
		int64_t v;
		if (!next_token(&s, tok, sizeof(tok)) ||
		    parse_field(tok, prefixes[i], FIELD_MAX, &v) != 0)
			return -1;
		*fields[i] = (int)v;
	}
	if (next_token(&s, tok, sizeof(tok)))
		return -1;
	*c = r;
	return 0;
}

void tk_gemm_shape_class(const tk_gemm_problem *p, char *buf, size_t len)
{
	int64_t m = 1;

	while (m < p->m)
		m <<= 1;
	snprintf(buf, len, "%s %s%s m%lld n%lld k%lld", tk_dtype_name(p->dtype),
	         p->trans_b ? "nt" : "nn", p->batch > 1 ? " b" : "", (long long)m, (long long)p->n,
	         (long long)p->k);
}

/*
 * Check a shape class as written in a file and write it in the form
 * tk_gemm_shape_class makes (single spaces), so lookups match. 0 or -1
 * with what was wrong in why.
 */
static int class_parse(const char *s, char *out, size_t len, const char **why)
{
	char tok[32], dt[16], lay[4];
	int64_t m, n, k;
	int batched = 0;

	*why = "expected 'DTYPE nt|nn [b] mM nN kK'";
	if (!next_token(&s, dt, sizeof(dt)) || !next_token(&s, lay, sizeof(lay)))
		return -1;
	tk_dtype d = tk_dtype_parse(dt);
	if (d == TK_DTYPE_INVALID) {
		*why = "unknown dtype in the shape class";
		return -1;
	}
	if (strcmp(lay, "nt") != 0 && strcmp(lay, "nn") != 0) {
		*why = "the layout must be nt or nn";
		return -1;
	}
	if (!next_token(&s, tok, sizeof(tok)))
		return -1;
	if (strcmp(tok, "b") == 0) {
		batched = 1;
		if (!next_token(&s, tok, sizeof(tok)))
			return -1;
	}
	if (parse_field(tok, "m", (int64_t)1 << 40, &m) != 0 || m < 1 || (m & (m - 1)) != 0) {
		*why = "M must be written mM with M a power of two";
		return -1;
	}
	if (!next_token(&s, tok, sizeof(tok)) || parse_field(tok, "n", (int64_t)1 << 40, &n) != 0 ||
	    n < 1 || !next_token(&s, tok, sizeof(tok)) ||
	    parse_field(tok, "k", (int64_t)1 << 40, &k) != 0 || k < 1 ||
	    next_token(&s, tok, sizeof(tok)))
		return -1;
	int w = snprintf(out, len, "%s %s%s m%lld n%lld k%lld", tk_dtype_name(d), lay,
	                 batched ? " b" : "", (long long)m, (long long)n, (long long)k);
	if (w < 0 || (size_t)w >= len) {
		*why = "the shape class is too long";
		return -1;
	}
	return 0;
}

/* ---- the sorted array ------------------------------------------------------- */

/* Index of cls in v[0..n), or -(insertion point) - 1. */
static long find(const tune_entry *v, size_t n, const char *cls)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(v[mid].cls, cls);
		if (c == 0)
			return (long)mid;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return -(long)lo - 1;
}

/* Add or replace; -1 when out of memory. */
static int array_put(tune_entry **v, size_t *n, size_t *cap, const tune_entry *e)
{
	long i = find(*v, *n, e->cls);

	if (i >= 0) {
		(*v)[i] = *e;
		return 0;
	}
	if (*n == *cap) {
		size_t nc = *cap ? 2 * *cap : 64;
		tune_entry *nv = realloc(*v, nc * sizeof(*nv));
		if (nv == NULL)
			return -1;
		*v = nv;
		*cap = nc;
	}
	size_t at = (size_t)(-i - 1);
	memmove(&(*v)[at + 1], &(*v)[at], (*n - at) * sizeof(**v));
	(*v)[at] = *e;
	(*n)++;
	return 0;
}

void tk_gemm_table_put(const char *shape_class, const tk_gemm_config *cfg, double us)
{
	tune_entry e;

	if (shape_class == NULL || cfg == NULL || strlen(shape_class) >= CLASS_MAX)
		return;
	memset(&e, 0, sizeof(e));
	snprintf(e.cls, sizeof(e.cls), "%s", shape_class);
	e.cfg = *cfg;
	e.us = us;
	pthread_rwlock_wrlock(&table.lock);
	/* Out of memory leaves the table without this entry: gemm falls back to
	 * the built-in choice, which is correct, only slower. */
	(void)array_put(&table.v, &table.n, &table.cap, &e);
	pthread_rwlock_unlock(&table.lock);
}

int tk_gemm_table_get(const char *shape_class, tk_gemm_config *cfg)
{
	int found = 0;

	pthread_rwlock_rdlock(&table.lock);
	long i = table.n ? find(table.v, table.n, shape_class) : -1;
	if (i >= 0) {
		*cfg = table.v[i].cfg;
		found = 1;
	}
	pthread_rwlock_unlock(&table.lock);
	return found;
}

int tk_gemm_table_count(void)
{
	pthread_rwlock_rdlock(&table.lock);
	int n = (int)table.n;
	pthread_rwlock_unlock(&table.lock);
	return n;
}

void tk_gemm_table_clear(void)
{
	pthread_rwlock_wrlock(&table.lock);
	free(table.v);
	table.v = NULL;
	table.n = table.cap = 0;
	pthread_rwlock_unlock(&table.lock);
}

/* ---- the cache file ---------------------------------------------------------- */

static char *trim(char *s)
{
	while (isspace((unsigned char)*s))
		s++;
	char *e = s + strlen(s);
	while (e > s && isspace((unsigned char)e[-1]))
		*--e = '\0';
	return s;
}

/* "tileops-gemm-tune 1 gpu=NAME": the GPU's name into gpu; 0 or -1 (why set). */
static int parse_header(char *s, char *gpu, size_t len, char *why, size_t whylen)
{
	size_t hl = strlen(header_word);
	char *end;

	if (strncmp(s, header_word, hl) != 0 || !isspace((unsigned char)s[hl])) {
		snprintf(why, whylen, "expected the header '%s %d gpu=NAME', got '%.80s'",
		         header_word, format_version, s);
		return -1;
	}
	s = trim(s + hl);
	long v = strtol(s, &end, 10);
	if (end == s || (*end != '\0' && !isspace((unsigned char)*end))) {
		snprintf(why, whylen, "the header has no format version");
		return -1;
	}
	if (v != format_version) {
		snprintf(why, whylen, "format version %ld is not supported (this build reads %d)",
		         v, format_version);
		return -1;
	}
	s = trim(end);
	if (strncmp(s, "gpu=", 4) != 0 || *trim(s + 4) == '\0' || strlen(trim(s + 4)) >= len) {
		snprintf(why, whylen,
		         "the header must end with gpu=NAME (the GPU it was tuned on)");
		return -1;
	}
	snprintf(gpu, len, "%s", trim(s + 4));
	return 0;
}

/* "shape class | config | us" into e; 0 or -1 (why set). */
static int parse_entry(char *s, tune_entry *e, char *why, size_t whylen)
{
	char *bar1 = strchr(s, '|'), *bar2 = bar1 ? strchr(bar1 + 1, '|') : NULL;
	const char *cwhy;
	char *end;

	if (bar2 == NULL || strchr(bar2 + 1, '|') != NULL) {
		snprintf(why, whylen, "expected 'SHAPE CLASS | CONFIG | US', got '%.80s'", s);
		return -1;
	}
	*bar1 = *bar2 = '\0';
	char *cls = trim(s), *cfg = trim(bar1 + 1), *us = trim(bar2 + 1);
	memset(e, 0, sizeof(*e));
	if (class_parse(cls, e->cls, sizeof(e->cls), &cwhy) != 0) {
		snprintf(why, whylen, "shape class '%.60s': %s", cls, cwhy);
		return -1;
	}
	if (tk_gemm_config_parse(cfg, &e->cfg) != 0) {
		snprintf(why, whylen,
		         "config '%.60s' is not 'KIND mM nN kK sS cC skS' (KIND simple, sm90, "
		         "smallm, decode or simt)",
		         cfg);
		return -1;
	}
	errno = 0;
	e->us = strtod(us, &end);
	if (errno || end == us || *end != '\0' || !isfinite(e->us) || e->us <= 0.0) {
		snprintf(why, whylen, "time '%.30s' is not a positive number of microseconds", us);
		return -1;
	}
	return 0;
}

static void file_free(tune_file *f)
{
	free(f->v);
	memset(f, 0, sizeof(*f));
}

/*
 * Read and check path into f. A missing file gives an empty f and *missing
 * set. Returns TK_OK, TK_ERR_UNSUPPORTED (malformed, err "FILE:LINE: ...")
 * or TK_ERR_NOMEM.
 */
static tk_status file_read(const char *path, tune_file *f, int *missing, char *err, size_t errlen)
{
	FILE *fp = fopen(path, "r");
	char line[LINE_MAX_LEN], why[256];
	int lineno = 0, have_header = 0;
	tk_status st = TK_OK;

	memset(f, 0, sizeof(*f));
	*missing = 0;
	if (fp == NULL) {
		if (errno == ENOENT) {
			*missing = 1;
			return TK_OK;
		}
		snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
		return TK_ERR_UNSUPPORTED;
	}
	while (st == TK_OK && fgets(line, sizeof(line), fp)) {
		lineno++;
		why[0] = '\0';
		if (strchr(line, '\n') == NULL && !feof(fp)) {
			snprintf(why, sizeof(why), "line is longer than %d characters",
			         LINE_MAX_LEN - 2);
		} else {
			char *hash = strchr(line, '#');
			if (hash)
				*hash = '\0';
			char *s = trim(line);
			tune_entry e;
			if (*s == '\0')
				continue;
			if (!have_header) {
				if (parse_header(s, f->gpu, sizeof(f->gpu), why, sizeof(why)) == 0)
					have_header = 1;
			} else if (parse_entry(s, &e, why, sizeof(why)) == 0 &&
			           array_put(&f->v, &f->n, &f->cap, &e) != 0) {
				snprintf(err, errlen, "%s: out of memory", path);
				st = TK_ERR_NOMEM;
			}
		}
		if (why[0] != '\0') {
			snprintf(err, errlen, "%s:%d: %s", path, lineno, why);
			st = TK_ERR_UNSUPPORTED;
		}
	}
	if (st == TK_OK && ferror(fp)) {
		snprintf(err, errlen, "%s: read error: %s", path, strerror(errno));
		st = TK_ERR_UNSUPPORTED;
	}
	fclose(fp);
	if (st == TK_OK && !have_header) {
		/* An empty file is as good as none; anything else needs the header. */
		if (lineno > 0) {
			snprintf(err, errlen, "%s:%d: no '%s %d gpu=NAME' header line", path,
			         lineno, header_word, format_version);
			st = TK_ERR_UNSUPPORTED;
		}
	}
	if (st != TK_OK)
		file_free(f);
	return st;
}

tk_status tk_gemm_table_check(const char *path, char *err, size_t errlen)
{
	tune_file f;
	int missing;
	tk_status st = file_read(path, &f, &missing, err, errlen);

	if (st == TK_OK && errlen > 0)
		err[0] = '\0';
	file_free(&f);
	return st;
}

tk_status tk_gemm_table_load_for(const char *path, const char *gpu, char *err, size_t errlen)
{
	tune_file f;
	int missing;
	char note[256] = "";
	tk_status st = file_read(path, &f, &missing, err, errlen);

	if (st != TK_OK)
		return st;
	if (missing) {
		snprintf(note, sizeof(note), "%s: no such file; the table starts empty", path);
	} else if (gpu != NULL && f.gpu[0] != '\0' && strcmp(f.gpu, gpu) != 0) {
		snprintf(note, sizeof(note),
		         "%s: tuned on gpu=%s, not on this gpu=%s: its %zu entries are not used",
		         path, f.gpu, gpu, f.n);
		f.n = 0;
	}
	pthread_rwlock_wrlock(&table.lock);
	free(table.v);
	table.v = f.v;
	table.n = f.n;
	table.cap = f.cap;
	snprintf(table.gpu, sizeof(table.gpu), "%s", gpu != NULL ? gpu : f.gpu);
	pthread_rwlock_unlock(&table.lock);
	if (errlen > 0)
		snprintf(err, errlen, "%s", note);
	return TK_OK;
}

tk_status tk_gemm_table_load(const char *path, char *err, size_t errlen)
{
#if TK_WITH_CUDA
	char gpu[GPU_MAX];
	if (tk_gemm_device_id(gpu, sizeof(gpu)) == TK_OK)
		return tk_gemm_table_load_for(path, gpu, err, errlen);
#endif
	return tk_gemm_table_load_for(path, NULL, err, errlen);
}

/* The GPU the saved file names: the table's, else the current device's. */
static void save_gpu(char *gpu, size_t len)
{
	pthread_rwlock_rdlock(&table.lock);
	snprintf(gpu, len, "%s", table.gpu);
	pthread_rwlock_unlock(&table.lock);
#if TK_WITH_CUDA
	if (gpu[0] == '\0' && tk_gemm_device_id(gpu, len) != TK_OK)
		gpu[0] = '\0';
#endif
	if (gpu[0] == '\0')
		snprintf(gpu, len, "unknown");
}

static int write_entries(FILE *fp, const char *gpu)
{
	char cfg[96];

	fprintf(fp, "%s %d gpu=%s\n", header_word, format_version, gpu);
	fprintf(fp, "# shape class | config | measured us (docs/tuning.md)\n");
	pthread_rwlock_rdlock(&table.lock);
	for (size_t i = 0; i < table.n; i++) {
		if (!(table.v[i].us > 0.0))
			continue; /* a placeholder for a class whose tuning failed */
		tk_gemm_config_str(&table.v[i].cfg, cfg, sizeof(cfg));
		fprintf(fp, "%s | %s | %.3f\n", table.v[i].cls, cfg, table.v[i].us);
	}
	pthread_rwlock_unlock(&table.lock);
	return ferror(fp) ? -1 : 0;
}

tk_status tk_gemm_table_save(const char *path, char *err, size_t errlen)
{
	char gpu[GPU_MAX], tmp[1024];
	FILE *fp;

	save_gpu(gpu, sizeof(gpu));
	/* A temporary file renamed over the old one: a reader never sees half. */
	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid()) >= sizeof(tmp)) {
		snprintf(err, errlen, "%s: path is too long", path);
		return TK_ERR_UNSUPPORTED;
	}
	fp = fopen(tmp, "w");
	if (fp == NULL) {
		snprintf(err, errlen, "%s: cannot create: %s", tmp, strerror(errno));
		return TK_ERR_UNSUPPORTED;
	}
	int bad = write_entries(fp, gpu);
	if (fclose(fp) != 0 || bad) {
		snprintf(err, errlen, "%s: write failed: %s", tmp, strerror(errno));
		unlink(tmp);
		return TK_ERR_UNSUPPORTED;
	}
	if (rename(tmp, path) != 0) {
		snprintf(err, errlen, "%s: cannot rename %s over it: %s", path, tmp,
		         strerror(errno));
		unlink(tmp);
		return TK_ERR_UNSUPPORTED;
	}
	if (errlen > 0)
		err[0] = '\0';
	return TK_OK;
}

/* ---- first-use tuning --------------------------------------------------------- */

void tk_gemm_tune_configure(int on, const char *cache_path)
{
	pthread_mutex_lock(&first_use.lock);
	snprintf(first_use.path, sizeof(first_use.path), "%s", cache_path ? cache_path : "");
	__atomic_store_n(&first_use.first_use, on != 0, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&first_use.lock);
}

int tk_gemm_tune_first_use(char *cache_path, size_t len)
{
	/* Off (the default): nothing to copy, no lock taken on the launch path. */
	if (!__atomic_load_n(&first_use.first_use, __ATOMIC_ACQUIRE)) {
		if (cache_path != NULL && len > 0)
			cache_path[0] = '\0';
		return 0;
	}
	pthread_mutex_lock(&first_use.lock);
	int on = first_use.first_use;
	if (cache_path != NULL && len > 0)
		snprintf(cache_path, len, "%s", first_use.path);
	pthread_mutex_unlock(&first_use.lock);
	return on;
}
