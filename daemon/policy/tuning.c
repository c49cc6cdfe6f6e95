/*
 * tuning.c - the tuning table (tuning.h): a sorted array of entries under a
 * reader-writer lock (every prepared op of a tunable kernel looks one up;
 * tuning adds one now and then), its file, and first-use tuning.
 *
 * The file (docs/tuning.md):
 *
 *   tileops-tune 2 gpu=NVIDIA H200 sm=90
 *   # family | shape class | choice | measured us
 *   gemm | bf16 nt m128 n2112 k7168 | decode m8 n128 k64 s12 c4 sk4 | 14.210
 *   attention_decode | bf16 d128 b1 t1 h32 g4 kv65536 | splits 16 | 68.100
 *
 * Format 1, which tileops-tune wrote when only GEMMs were tuned, is read
 * too: the header "tileops-gemm-tune 1 gpu=NAME" and lines "shape class |
 * config | us", all of family gemm.
 */
#include "tuning.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"

#define GPU_MAX 128
#define LINE_MAX_LEN 512
#define PATH_MAX_LEN 1024
#define WHY_MAX 256

static const char header_word[] = "tileops-tune";
static const char header_word_v1[] = "tileops-gemm-tune";
static const int format_version = 2;

typedef struct tentry {
	char family[TUNING_FAMILY_MAX];
	char cls[TK_TUNING_TEXT_MAX];
	tk_choice c;
	double us; /* <= 0: a placeholder */
} tentry;

/* A sorted array of entries. */
typedef struct entries {
	tentry *v;
	size_t n, cap;
} entries;

struct tuning {
	pthread_rwlock_t lock; /* guards es and gpu */
	entries es;
	char gpu[GPU_MAX];
	int fixed_gpu;                /* gpu was given: other GPUs' files are not taken */
	pthread_mutex_t save_lock;    /* one save at a time: they share the temporary name */
	atomic_int first_use;         /* read by every executor thread */
	char save_path[PATH_MAX_LEN]; /* set before the threads start */
};

/* ---- the sorted array ------------------------------------------------------- */

static int entry_cmp(const char *fa, const char *ca, const char *fb, const char *cb)
{
	int c = strcmp(fa, fb);

	return c ? c : strcmp(ca, cb);
}

/* Index of (family, cls), or -(insertion point) - 1. */
static long find(const entries *es, const char *family, const char *cls)
{
	size_t lo = 0, hi = es->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = entry_cmp(es->v[mid].family, es->v[mid].cls, family, cls);
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
static int entries_put(entries *es, const tentry *e)
{
	long i = find(es, e->family, e->cls);

	if (i >= 0) {
		es->v[i] = *e;
		return 0;
	}
	if (es->n == es->cap) {
		size_t nc = es->cap ? 2 * es->cap : 64;
		tentry *nv = realloc(es->v, nc * sizeof(*nv));
		if (nv == NULL)
			return -1;
		es->v = nv;
		es->cap = nc;
	}
	size_t at = (size_t)(-i - 1);
	memmove(&es->v[at + 1], &es->v[at], (es->n - at) * sizeof(es->v[0]));
	es->v[at] = *e;
	es->n++;
	return 0;
}

static void entries_free(entries *es)
{
	free(es->v);
	memset(es, 0, sizeof(*es));
}

/* ---- the table -------------------------------------------------------------- */

tuning *tuning_new(const char *gpu)
{
	tuning *t = calloc(1, sizeof(*t));

	if (t == NULL)
		return NULL;
	pthread_rwlock_init(&t->lock, NULL);
	pthread_mutex_init(&t->save_lock, NULL);
	atomic_init(&t->first_use, 0);
	if (gpu != NULL) {
		snprintf(t->gpu, sizeof(t->gpu), "%s", gpu);
		t->fixed_gpu = 1;
	}
	return t;
}

void tuning_free(tuning *t)
{
	if (t == NULL)
		return;
	entries_free(&t->es);
	pthread_rwlock_destroy(&t->lock);
	pthread_mutex_destroy(&t->save_lock);
	free(t);
}

static int set_entry(tentry *e, const char *family, const char *cls, const tk_choice *c, double us)
{
	if (strlen(family) >= sizeof(e->family) || strlen(cls) >= sizeof(e->cls))
		return -1;
	memset(e, 0, sizeof(*e));
	snprintf(e->family, sizeof(e->family), "%s", family);
	snprintf(e->cls, sizeof(e->cls), "%s", cls);
	e->c = *c;
	e->us = us > 0.0 && c->mode != TK_CHOICE_NONE ? us : 0.0;
	if (e->us <= 0.0)
		memset(&e->c, 0, sizeof(e->c));
	else
		e->c.mode = TK_CHOICE_PREFER;
	return 0;
}

tileops_status tuning_put(tuning *t, const char *family, const char *cls, const tk_choice *c,
                          double us)
{
	tentry e;

	if (t == NULL || family == NULL || cls == NULL || c == NULL ||
	    set_entry(&e, family, cls, c, us) != 0)
		return TILEOPS_ERR_INVALID_ARGUMENT;
	pthread_rwlock_wrlock(&t->lock);
	int bad = entries_put(&t->es, &e);
	pthread_rwlock_unlock(&t->lock);
	return bad ? TILEOPS_ERR_OUT_OF_MEMORY : TILEOPS_OK;
}

int tuning_get(tuning *t, const char *family, const char *cls, tk_choice *c, double *us)
{
	int found = 0;

	if (t == NULL || family == NULL || cls == NULL)
		return 0;
	pthread_rwlock_rdlock(&t->lock);
	long i = find(&t->es, family, cls);
	if (i >= 0) {
		if (c != NULL)
			*c = t->es.v[i].c;
		if (us != NULL)
			*us = t->es.v[i].us;
		found = 1;
	}
	pthread_rwlock_unlock(&t->lock);
	return found;
}

int tuning_count(tuning *t)
{
	if (t == NULL)
		return 0;
	pthread_rwlock_rdlock(&t->lock);
	int n = (int)t->es.n;
	pthread_rwlock_unlock(&t->lock);
	return n;
}

int tuning_entry(tuning *t, int i, char *family, size_t flen, char *cls, size_t clen, tk_choice *c,
                 double *us)
{
	int rc = -1;

	pthread_rwlock_rdlock(&t->lock);
	if (i >= 0 && (size_t)i < t->es.n) {
		const tentry *e = &t->es.v[i];
		if (family != NULL)
			snprintf(family, flen, "%s", e->family);
		if (cls != NULL)
			snprintf(cls, clen, "%s", e->cls);
		if (c != NULL)
			*c = e->c;
		if (us != NULL)
			*us = e->us;
		rc = 0;
	}
	pthread_rwlock_unlock(&t->lock);
	return rc;
}

void tuning_clear(tuning *t)
{
	pthread_rwlock_wrlock(&t->lock);
	entries_free(&t->es);
	pthread_rwlock_unlock(&t->lock);
}

void tuning_gpu(tuning *t, char *buf, size_t len)
{
	pthread_rwlock_rdlock(&t->lock);
	snprintf(buf, len, "%s", t->gpu);
	pthread_rwlock_unlock(&t->lock);
}

const tk_tuning *tuning_family(const char *family)
{
	size_t n;
	const tk_kernel_entry *k = tk_kernels(&n);

	for (size_t i = 0; i < n; i++)
		if (k[i].tuning != NULL && strcmp(k[i].tuning->family, family) == 0)
			return k[i].tuning;
	return NULL;
}

/* The families this build tunes, for a message: "gemm, attention_prefill". */
static void family_list(char *buf, size_t len)
{
	size_t n, at = 0;
	const tk_kernel_entry *k = tk_kernels(&n);

	buf[0] = '\0';
	for (size_t i = 0; i < n; i++) {
		if (k[i].tuning == NULL || tuning_family(k[i].tuning->family) != k[i].tuning)
			continue;
		int w = snprintf(buf + at, len - at, "%s%s", at ? ", " : "", k[i].tuning->family);
		if (w < 0 || (size_t)w >= len - at)
			return;
		at += (size_t)w;
	}
}

/* ---- the file --------------------------------------------------------------- */

/* What one file holds, read and checked. */
typedef struct tfile {
	entries es;
	char gpu[GPU_MAX];
	int version;
} tfile;

static char *trim(char *s)
{
	while (isspace((unsigned char)*s))
		s++;
	char *e = s + strlen(s);
	while (e > s && isspace((unsigned char)e[-1]))
		*--e = '\0';
	return s;
}

/* "tileops-tune 2 gpu=NAME" (or format 1's header): the version and the GPU. */
static int parse_header(char *s, tfile *f, char *why, size_t whylen)
{
	size_t hl = strlen(header_word), hl1 = strlen(header_word_v1);
	int v1 = strncmp(s, header_word_v1, hl1) == 0 && isspace((unsigned char)s[hl1]);
	char *end;

	if (!v1 && (strncmp(s, header_word, hl) != 0 || !isspace((unsigned char)s[hl]))) {
		snprintf(why, whylen, "expected the header '%s %d gpu=NAME', got '%.80s'",
		         header_word, format_version, s);
		return -1;
	}
	s = trim(s + (v1 ? hl1 : hl));
	long v = strtol(s, &end, 10);
	if (end == s || (*end != '\0' && !isspace((unsigned char)*end))) {
		snprintf(why, whylen, "the header has no format version");
		return -1;
	}
	if (v != (v1 ? 1 : format_version)) {
		snprintf(why, whylen,
		         "format version %ld is not supported (this build reads %s %d and %s 1)", v,
		         header_word, format_version, header_word_v1);
		return -1;
	}
	s = trim(end);
	if (strncmp(s, "gpu=", 4) != 0 || *trim(s + 4) == '\0' ||
	    strlen(trim(s + 4)) >= sizeof(f->gpu)) {
		snprintf(why, whylen,
		         "the header must end with gpu=NAME (the GPU it was tuned on)");
		return -1;
	}
	snprintf(f->gpu, sizeof(f->gpu), "%s", trim(s + 4));
	f->version = (int)v;
	return 0;
}

/* Split s at '|' into at most max fields (trimmed); how many there are. */
static int split_bars(char *s, char **field, int max)
{
	int n = 0;

	for (;;) {
		char *bar = strchr(s, '|');
		if (n < max)
			field[n] = s;
		n++;
		if (bar == NULL)
			break;
		*bar = '\0';
		s = bar + 1;
	}
	for (int i = 0; i < n && i < max; i++)
		field[i] = trim(field[i]);
	return n;
}

/* One entry line into e; 0 or -1 (why set). */
static int parse_entry(char *s, int version, tentry *e, char *why, size_t whylen)
{
	char *f[4], note[WHY_MAX], list[200], *end;
	const char *family = "gemm";
	int want = version == 1 ? 3 : 4;
	const char *syntax =
	        version == 1 ? "SHAPE CLASS | CONFIG | US" : "FAMILY | SHAPE CLASS | CHOICE | US";

	char copy[LINE_MAX_LEN];
	snprintf(copy, sizeof(copy), "%s", s);
	if (split_bars(s, f, 4) != want) {
		snprintf(why, whylen, "expected '%s', got '%.80s'", syntax, copy);
		return -1;
	}
	char **fl = f + (version == 1 ? 0 : 1);
	if (version != 1)
		family = f[0];
	const tk_tuning *tu = tuning_family(family);
	if (tu == NULL) {
		family_list(list, sizeof(list));
		snprintf(why, whylen, "unknown family '%.40s' (this build tunes %s)", family, list);
		return -1;
	}
	memset(e, 0, sizeof(*e));
	snprintf(e->family, sizeof(e->family), "%s", tu->family);
	if (tu->parse_class(fl[0], e->cls, sizeof(e->cls), note, sizeof(note)) != 0) {
		int says_syntax = strncmp(note, "expected", 8) == 0;
		snprintf(why, whylen, "%s shape class '%.60s': %.100s%s%s%s", tu->family, fl[0],
		         note, says_syntax ? "" : " (", says_syntax ? "" : tu->class_syntax,
		         says_syntax ? "" : ")");
		return -1;
	}
	if (tu->parse_choice(fl[1], &e->c) != 0) {
		snprintf(why, whylen, "%s %s '%.60s' is not '%s'", tu->family,
		         version == 1 ? "config" : "choice", fl[1], tu->choice_syntax);
		return -1;
	}
	e->c.mode = TK_CHOICE_PREFER;
	errno = 0;
	e->us = strtod(fl[2], &end);
	if (errno || end == fl[2] || *end != '\0' || !isfinite(e->us) || e->us <= 0.0) {
		snprintf(why, whylen, "time '%.30s' is not a positive number of microseconds",
		         fl[2]);
		return -1;
	}
	return 0;
}

/*
 * Read and check path into f. A missing file gives an empty f and *missing
 * set. Returns TILEOPS_OK, TILEOPS_ERR_INVALID_ARGUMENT (malformed, err
 * "FILE:LINE: ...") or TILEOPS_ERR_OUT_OF_MEMORY.
 */
static tileops_status file_read(const char *path, tfile *f, int *missing, char *err, size_t errlen)
{
	FILE *fp = fopen(path, "r");
	char line[LINE_MAX_LEN], why[WHY_MAX];
	int lineno = 0, have_header = 0;
	tileops_status st = TILEOPS_OK;

	memset(f, 0, sizeof(*f));
	*missing = 0;
	if (fp == NULL) {
		if (errno == ENOENT) {
			*missing = 1;
			return TILEOPS_OK;
		}
		snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
		return TILEOPS_ERR_INVALID_ARGUMENT;
	}
	while (st == TILEOPS_OK && fgets(line, sizeof(line), fp)) {
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
			tentry e;
			if (*s == '\0')
				continue;
			if (!have_header) {
				if (parse_header(s, f, why, sizeof(why)) == 0)
					have_header = 1;
			} else if (parse_entry(s, f->version, &e, why, sizeof(why)) == 0 &&
			           entries_put(&f->es, &e) != 0) {
				snprintf(err, errlen, "%s: out of memory", path);
				st = TILEOPS_ERR_OUT_OF_MEMORY;
			}
		}
		if (why[0] != '\0') {
			snprintf(err, errlen, "%s:%d: %s", path, lineno, why);
			st = TILEOPS_ERR_INVALID_ARGUMENT;
		}
	}
	if (st == TILEOPS_OK && ferror(fp)) {
		snprintf(err, errlen, "%s: read error: %s", path, strerror(errno));
		st = TILEOPS_ERR_INVALID_ARGUMENT;
	}
	fclose(fp);
	/* An empty file is as good as none; anything else needs the header. */
	if (st == TILEOPS_OK && !have_header && lineno > 0) {
		snprintf(err, errlen, "%s:%d: no '%s %d gpu=NAME' header line", path, lineno,
		         header_word, format_version);
		st = TILEOPS_ERR_INVALID_ARGUMENT;
	}
	if (st != TILEOPS_OK)
		entries_free(&f->es);
	return st;
}

tileops_status tuning_check(const char *path, char *err, size_t errlen)
{
	tfile f;
	int missing;
	tileops_status st = file_read(path, &f, &missing, err, errlen);

	if (st == TILEOPS_OK && errlen > 0)
		err[0] = '\0';
	entries_free(&f.es);
	return st;
}

tileops_status tuning_load(tuning *t, const char *path, char *note, size_t len)
{
	tfile f;
	int missing;
	char msg[WHY_MAX + PATH_MAX_LEN] = "";
	tileops_status st = file_read(path, &f, &missing, note, len);

	if (st != TILEOPS_OK)
		return st;
	pthread_rwlock_wrlock(&t->lock);
	if (missing) {
		snprintf(msg, sizeof(msg), "%s: no such file; the table starts empty", path);
	} else if (t->fixed_gpu && strcmp(f.gpu, t->gpu) != 0) {
		snprintf(msg, sizeof(msg),
		         "%s: tuned on gpu=%s, not on this gpu=%s: its %zu entries are not used",
		         path, f.gpu, t->gpu, f.es.n);
		entries_free(&f.es);
	}
	entries_free(&t->es);
	t->es = f.es;
	if (!t->fixed_gpu && !missing)
		snprintf(t->gpu, sizeof(t->gpu), "%s", f.gpu);
	pthread_rwlock_unlock(&t->lock);
	if (len > 0)
		snprintf(note, len, "%s", msg);
	return TILEOPS_OK;
}

static int write_entries(tuning *t, FILE *fp)
{
	char choice[TK_TUNING_TEXT_MAX], gpu[GPU_MAX];

	tuning_gpu(t, gpu, sizeof(gpu));
	fprintf(fp, "%s %d gpu=%s\n", header_word, format_version, gpu[0] ? gpu : "unknown");
	fprintf(fp, "# family | shape class | choice | measured us (docs/tuning.md)\n");
	pthread_rwlock_rdlock(&t->lock);
	for (size_t i = 0; i < t->es.n; i++) {
		const tentry *e = &t->es.v[i];
		const tk_tuning *tu = tuning_family(e->family);
		if (e->us <= 0.0 || tu == NULL ||
		    tu->format_choice(&e->c, choice, sizeof(choice)) != 0)
			continue; /* a placeholder, or nothing this build can name */
		fprintf(fp, "%s | %s | %s | %.3f\n", e->family, e->cls, choice, e->us);
	}
	pthread_rwlock_unlock(&t->lock);
	return ferror(fp) ? -1 : 0;
}

tileops_status tuning_save(tuning *t, const char *path, char *err, size_t errlen)
{
	char tmp[PATH_MAX_LEN + 32];
	tileops_status st = TILEOPS_OK;
	FILE *fp;

	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid()) >= sizeof(tmp)) {
		snprintf(err, errlen, "%s: path is too long", path);
		return TILEOPS_ERR_INVALID_ARGUMENT;
	}
	pthread_mutex_lock(&t->save_lock);
	/* A temporary file renamed over the old one: a reader never sees half. */
	fp = fopen(tmp, "w");
	if (fp == NULL) {
		snprintf(err, errlen, "%s: cannot create: %s", tmp, strerror(errno));
		st = TILEOPS_ERR_INVALID_ARGUMENT;
	} else {
		int bad = write_entries(t, fp);
		if (fclose(fp) != 0 || bad) {
			snprintf(err, errlen, "%s: write failed: %s", tmp, strerror(errno));
			unlink(tmp);
			st = TILEOPS_ERR_INVALID_ARGUMENT;
		} else if (rename(tmp, path) != 0) {
			snprintf(err, errlen, "%s: cannot rename %s over it: %s", path, tmp,
			         strerror(errno));
			unlink(tmp);
			st = TILEOPS_ERR_INVALID_ARGUMENT;
		}
	}
	pthread_mutex_unlock(&t->save_lock);
	if (st == TILEOPS_OK && errlen > 0)
		err[0] = '\0';
	return st;
}

/* ---- the executor's part ------------------------------------------------------- */

void tuning_apply(tuning *t, const tk_kernel_entry *k, tk_call *call)
{
	char cls[TK_TUNING_TEXT_MAX];
	tk_choice c;

	memset(&call->choice, 0, sizeof(call->choice));
	if (t == NULL || k == NULL || k->tuning == NULL ||
	    k->tuning->shape_class(call, cls, sizeof(cls)) != 0)
		return;
	if (tuning_get(t, k->tuning->family, cls, &c, NULL) && c.mode != TK_CHOICE_NONE) {
		call->choice = c;
		call->choice.mode = TK_CHOICE_PREFER;
	}
}

void tuning_first_use(tuning *t, int on, const char *save_path)
{
	snprintf(t->save_path, sizeof(t->save_path), "%s", save_path ? save_path : "");
	atomic_store(&t->first_use, on != 0);
}

int tuning_claim(tuning *t, const tk_kernel_entry *k, const tk_call *call, char *cls, size_t len)
{
	tentry e;
	tk_choice none;
	int claimed = 0;

	if (t == NULL || !atomic_load_explicit(&t->first_use, memory_order_relaxed) || k == NULL ||
	    k->tuning == NULL || k->tuning->measure == NULL ||
	    k->tuning->shape_class(call, cls, len) != 0)
		return 0;
	memset(&none, 0, sizeof(none));
	/* Most calls find their class: a read lock, then the write lock only to claim. */
	if (tuning_get(t, k->tuning->family, cls, NULL, NULL) ||
	    set_entry(&e, k->tuning->family, cls, &none, 0.0) != 0)
		return 0;
	pthread_rwlock_wrlock(&t->lock);
	if (find(&t->es, e.family, e.cls) < 0)
		claimed = entries_put(&t->es, &e) == 0;
	pthread_rwlock_unlock(&t->lock);
	return claimed;
}

tileops_status tuning_measure(tuning *t, const tk_kernel_entry *k, const tk_call *call,
                              const char *cls, char *err, size_t errlen)
{
	char text[TK_TUNING_TEXT_MAX], why[WHY_MAX] = "";
	tk_choice best;
	double us = 0.0;

	if (k == NULL || k->tuning == NULL || k->tuning->measure == NULL) {
		snprintf(err, errlen, "%s: nothing measures this kernel", k ? k->op : "tuning");
		return TILEOPS_ERR_UNSUPPORTED;
	}
	tk_status ks = k->tuning->measure(call, NULL, 0.0, &best, &us, why, sizeof(why));
	if (ks != TK_OK) {
		snprintf(err, errlen,
		         "%s %s: first-use tuning failed (%s); the built-in choice is used",
		         k->tuning->family, cls, why);
		log_warn("tuning: %s", err);
		return ks == TK_ERR_NOMEM ? TILEOPS_ERR_OUT_OF_MEMORY : TILEOPS_ERR_BACKEND;
	}
	tileops_status st = tuning_put(t, k->tuning->family, cls, &best, us);
	if (st != TILEOPS_OK) {
		snprintf(err, errlen, "%s %s: the measured entry could not be kept",
		         k->tuning->family, cls);
		return st;
	}
	if (k->tuning->format_choice(&best, text, sizeof(text)) != 0)
		snprintf(text, sizeof(text), "?");
	if (t->save_path[0] != '\0' && (st = tuning_save(t, t->save_path, err, errlen)) != 0) {
		log_warn("tuning: %s %s -> %s (%.3f us), not saved: %s", k->tuning->family, cls,
		         text, us, err);
		return st;
	}
	log_info("tuning: %s %s -> %s (%.3f us, first use)%s%s", k->tuning->family, cls, text, us,
	         t->save_path[0] ? "; saved to " : "", t->save_path);
	if (errlen > 0)
		err[0] = '\0';
	return TILEOPS_OK;
}
