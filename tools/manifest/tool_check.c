/*
 * tool_check.c - tileops-manifest check-ops: every op of the manifest has
 * the parts docs/adding-an-op.md lists, where they belong.
 *
 * For each op it reads the source tree under ROOT (no build needed) and
 * reports, one line per missing part, "FILE:LINE: OP: PART: what is
 * missing and where it should be", FILE:LINE being the op's entry in the
 * manifest:
 *   - every op: a doc string, a roofline (flops and bytes) and an entry in
 *     docs/ops.md (the status is required by the loader itself);
 *   - implemented ops: a cpu kernel in the manifest and tk_cpu_<op>
 *     defined in a .c file of kernels/<family>/; when the manifest lists a
 *     cuda kernel, tk_cuda_<op> defined in a .cu file there (without one
 *     the op is reported "cpu only", which is no failure); a workload from a
 *     real model (model not "none...", except in the diagnostic family);
 *     and the family's CPU reference test tests/kernels/test_<family>.c
 *     naming the op; a collective (served by the backends, no kernels)
 *     instead is named by the CPU backend's tests/unit/test_cpu_collective.c.
 * A function counts as defined where it is written out with its body, or
 * where a macro that pastes tk_cpu_##arg (or tk_cuda_##arg, possibly
 * through other such macros) is invoked with the op as that argument: the
 * elementwise families define theirs that way. A definition outside the
 * family's folder, or in a file of the other kind (.c / .cu), is reported
 * where it is.
 */
#include <ctype.h>
#include <dirent.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tool.h"

#define MAX_MACROS 256
#define MAX_DEFS 4096

typedef struct src {
	char *path; /* relative to the root: kernels/<family>/<name> */
	char *text; /* comments and string contents blanked, newlines kept */
	size_t len;
} src;

/* A macro whose expansion defines tk_<backend>_<its argument `arg`>. */
typedef struct gen_macro {
	char name[64];
	int arg;
	int cuda;
} gen_macro;

/* A function tk_cpu_X or tk_cuda_X defined at path:line. */
typedef struct def {
	char name[96];
	const src *file;
	int line;
} def;

typedef struct tree {
	const char *root;
	src *files;
	int n_files;
	gen_macro macros[MAX_MACROS];
	int n_macros;
	def defs[MAX_DEFS];
	int n_defs;
} tree;

/* ---- reading the sources ------------------------------------------------------------ */

static char *read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	long n;

	if (f == NULL)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
	    (buf = malloc((size_t)n + 1)) != NULL) {
		*len = fread(buf, 1, (size_t)n, f);
		buf[*len] = '\0';
	}
	fclose(f);
	return buf;
}

/* Blank comments and the insides of string and character literals. */
static void blank_comments(char *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (s[i] == '/' && i + 1 < n && s[i + 1] == '/') {
			for (; i < n && s[i] != '\n'; i++)
				s[i] = ' ';
		} else if (s[i] == '/' && i + 1 < n && s[i + 1] == '*') {
			s[i] = s[i + 1] = ' ';
			for (i += 2; i < n && !(s[i] == '*' && i + 1 < n && s[i + 1] == '/'); i++)
				if (s[i] != '\n')
					s[i] = ' ';
			if (i < n)
				s[i] = ' ';
			if (i + 1 < n)
				s[++i] = ' ';
		} else if (s[i] == '"' || s[i] == '\'') {
			char q = s[i];

			for (i++; i < n && s[i] != q && s[i] != '\n'; i++) {
				if (s[i] == '\\' && i + 1 < n)
					s[i++] = ' ';
				s[i] = ' ';
			}
		}
	}
}

static int has_ext(const char *name, const char *ext)
{
	size_t n = strlen(name), e = strlen(ext);

	return n > e && !strcmp(name + n - e, ext);
}

static int is_source(const char *name)
{
	return has_ext(name, ".c") || has_ext(name, ".cu") || has_ext(name, ".h") ||
	       has_ext(name, ".cuh");
}

static int add_file(tree *t, const char *rel)
{
	char path[4096];
	src *f;

	snprintf(path, sizeof(path), "%s/%s", t->root, rel);
	f = realloc(t->files, sizeof(*f) * (size_t)(t->n_files + 1));
	if (f == NULL)
		return -1;
	t->files = f;
	f = &t->files[t->n_files];
	if ((f->text = read_file(path, &f->len)) == NULL)
		return 0; /* unreadable: as if absent */
	f->path = strdup(rel);
	blank_comments(f->text, f->len);
	t->n_files++;
	return 0;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The sorted entries of directory `path` (NULL when it cannot be read). */
static char **list_dir(const char *path, int *n)
{
	DIR *d = opendir(path);
	struct dirent *e;
	char **names = NULL;

	*n = 0;
	if (d == NULL)
		return NULL;
	while ((e = readdir(d)) != NULL) {
		char **x;

		if (e->d_name[0] == '.' ||
		    (x = realloc(names, sizeof(*x) * (size_t)(*n + 1))) == NULL)
			continue;
		names = x;
		names[(*n)++] = strdup(e->d_name);
	}
	closedir(d);
	qsort(names, (size_t)*n, sizeof(*names), cmp_str);
	return names;
}

static void free_names(char **names, int n)
{
	for (int i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

/* The headers directly in kernels/ and every source of each folder kernels/<dir>/. */
static int read_kernels(tree *t)
{
	char path[2048];
	int n, rc = 0;
	char **dirs;

	snprintf(path, sizeof(path), "%s/kernels", t->root);
	if ((dirs = list_dir(path, &n)) == NULL)
		return -1;
	for (int i = 0; i < n && rc == 0; i++) {
		char sub[4096], rel[1024];
		struct stat st;
		int m;
		char **names;

		snprintf(sub, sizeof(sub), "%s/%s", path, dirs[i]);
		if (stat(sub, &st) != 0)
			continue;
		if (!S_ISDIR(st.st_mode)) {
			snprintf(rel, sizeof(rel), "kernels/%s", dirs[i]);
			if (is_source(dirs[i]))
				rc = add_file(t, rel);
			continue;
		}
		names = list_dir(sub, &m);
		for (int k = 0; k < m && rc == 0; k++) {
			snprintf(rel, sizeof(rel), "kernels/%s/%s", dirs[i], names[k]);
			if (is_source(names[k]))
				rc = add_file(t, rel);
		}
		free_names(names, m);
	}
	free_names(dirs, n);
	return rc;
}

/* ---- scanning ---------------------------------------------------------------------- */

static int ident_char(char c)
{
	return isalnum((unsigned char)c) || c == '_';
}

static int line_of(const src *f, size_t at)
{
	int line = 1;

	for (size_t i = 0; i < at && i < f->len; i++)
		line += f->text[i] == '\n';
	return line;
}

/* The end of the preprocessor directive starting at `i` (its continuation lines included). */
static size_t directive_end(const char *s, size_t n, size_t i)
{
	for (; i < n && s[i] != '\n'; i++)
		if (s[i] == '\\' && i + 1 < n && s[i + 1] == '\n')
			i++;
	return i;
}

static size_t skip_space(const char *s, size_t n, size_t i)
{
	while (i < n && isspace((unsigned char)s[i]))
		i++;
	return i;
}

/* After "(" at `i`: the index of its matching ")", or n. */
static size_t match_paren(const char *s, size_t n, size_t i)
{
	int depth = 0;

	for (; i < n; i++) {
		if (s[i] == '(')
			depth++;
		else if (s[i] == ')' && --depth == 0)
			return i;
	}
	return n;
}

/*
 * The arguments of a call or parameter list "(a, b(c, d), e)" starting at
 * `i` ('('): up to `max` of them, trimmed, into args (each `len` bytes).
 */
static int split_args(const char *s, size_t n, size_t i, char (*args)[64], int max)
{
	size_t end = match_paren(s, n, i), start = i + 1;
	int depth = 0, k = 0;

	for (size_t j = i + 1; j <= end && j < n && k < max; j++) {
		if (s[j] == '(' || s[j] == '[' || s[j] == '{')
			depth++;
		else if ((s[j] == ')' || s[j] == ']' || s[j] == '}') && j != end)
			depth--;
		if ((s[j] == ',' && depth == 0) || j == end) {
			size_t a = skip_space(s, n, start), b = j;

			while (b > a && isspace((unsigned char)s[b - 1]))
				b--;
			snprintf(args[k++], 64, "%.*s", (int)(b - a < 63 ? b - a : 63), s + a);
			start = j + 1;
		}
	}
	return k;
}

static const gen_macro *find_macro(const tree *t, const char *name, size_t len)
{
	for (int i = 0; i < t->n_macros; i++)
		if (strlen(t->macros[i].name) == len && !strncmp(t->macros[i].name, name, len))
			return &t->macros[i];
	return NULL;
}

static int add_macro(tree *t, const char *name, size_t len, int arg, int cuda)
{
	for (int i = 0; i < t->n_macros; i++)
		if (strlen(t->macros[i].name) == len && !strncmp(t->macros[i].name, name, len) &&
		    t->macros[i].arg == arg && t->macros[i].cuda == cuda)
			return 0;
	if (t->n_macros == MAX_MACROS || len >= sizeof(t->macros[0].name))
		return 0;
	snprintf(t->macros[t->n_macros].name, sizeof(t->macros[0].name), "%.*s", (int)len, name);
	t->macros[t->n_macros].arg = arg;
	t->macros[t->n_macros++].cuda = cuda;
	return 1;
}

/*
 * One #define NAME(params) body, s[i..end): when the body pastes
 * tk_cpu_##P or tk_cuda_##P, or invokes a known generator with P in its
 * pasted position, NAME is a generator of that backend for P's position.
 * Returns how many generators it added.
 */
static int scan_define(tree *t, const char *s, size_t i, size_t end)
{
	char params[16][64];
	size_t name, name_end, body;
	int np, added = 0;

	i = skip_space(s, end, i + 1);
	if (strncmp(s + i, "define", 6) != 0)
		return 0;
	name = skip_space(s, end, i + 6);
	for (name_end = name; name_end < end && ident_char(s[name_end]); name_end++)
		;
	if (name_end >= end || s[name_end] != '(')
		return 0; /* not function-like */
	np = split_args(s, end, name_end, params, 16);
	body = match_paren(s, end, name_end) + 1;
	for (size_t j = body; j < end; j++) {
		if (j > body && ident_char(s[j - 1]))
			continue;
		for (int cuda = 0; cuda < 2; cuda++) {
			const char *pre = cuda ? "tk_cuda_" : "tk_cpu_";
			size_t pl = strlen(pre), k;

			if (strncmp(s + j, pre, pl) != 0)
				continue;
			k = skip_space(s, end, j + pl);
			if (k + 1 >= end || s[k] != '#' || s[k + 1] != '#')
				continue;
			k = skip_space(s, end, k + 2);
			for (int p = 0; p < np; p++)
				if (params[p][0] != '\0' &&
				    !strncmp(s + k, params[p], strlen(params[p])) &&
				    !ident_char(s[k + strlen(params[p])]))
					added += add_macro(t, s + name, name_end - name, p, cuda);
		}
		/* A generator invoked with one of our params in its position. */
		size_t e = j;
		while (e < end && ident_char(s[e]))
			e++;
		const gen_macro *g = e > j ? find_macro(t, s + j, e - j) : NULL;
		size_t open = skip_space(s, end, e);
		if (g != NULL && open < end && s[open] == '(') {
			char args[16][64];
			int na = split_args(s, end, open, args, 16);
			for (int p = 0; g->arg < na && p < np; p++)
				if (params[p][0] != '\0' && !strcmp(args[g->arg], params[p]))
					added +=
					        add_macro(t, s + name, name_end - name, p, g->cuda);
		}
		j = e > j ? e - 1 : j;
	}
	return added;
}

static void find_macros(tree *t)
{
	/* Generators built on generators: repeat until nothing is added. */
	for (int round = 0, added = 1; added && round < 8; round++) {
		added = 0;
		for (int f = 0; f < t->n_files; f++) {
			const char *s = t->files[f].text;
			size_t n = t->files[f].len;

			for (size_t i = 0; i < n; i++) {
				size_t h = i;

				while (h < n && (s[h] == ' ' || s[h] == '\t'))
					h++;
				if (h < n && s[h] == '#') {
					size_t end = directive_end(s, n, h);
					added += scan_define(t, s, h, end);
					i = end;
				} else {
					while (i < n && s[i] != '\n')
						i++;
				}
			}
		}
	}
}

static void add_def(tree *t, const char *name, size_t len, const src *f, int line)
{
	if (t->n_defs == MAX_DEFS || len >= sizeof(t->defs[0].name))
		return;
	snprintf(t->defs[t->n_defs].name, sizeof(t->defs[0].name), "%.*s", (int)len, name);
	t->defs[t->n_defs].file = f;
	t->defs[t->n_defs++].line = line;
}

/* Definitions outside directives: tk_cpu_X(...) { and GENERATOR(..., X, ...). */
static void find_defs(tree *t, const src *f)
{
	const char *s = f->text;
	size_t n = f->len;
	int at_line_start = 1;

	for (size_t i = 0; i < n; i++) {
		if (at_line_start) {
			size_t h = i;
			while (h < n && (s[h] == ' ' || s[h] == '\t'))
				h++;
			if (h < n && s[h] == '#') {
				i = directive_end(s, n, h);
				continue;
			}
		}
		at_line_start = s[i] == '\n';
		if (!ident_char(s[i]) || (i > 0 && ident_char(s[i - 1])))
			continue;
		size_t e = i;
		while (e < n && ident_char(s[e]))
			e++;
		size_t open = skip_space(s, n, e);
		if (open >= n || s[open] != '(') {
			i = e - 1;
			continue;
		}
		const gen_macro *g = find_macro(t, s + i, e - i);
		size_t close = match_paren(s, n, open);
		if ((!strncmp(s + i, "tk_cpu_", 7) || !strncmp(s + i, "tk_cuda_", 8)) &&
		    close < n && s[skip_space(s, n, close + 1)] == '{') {
			add_def(t, s + i, e - i, f, line_of(f, i));
		} else if (g != NULL) {
			char args[16][64], name[96];
			/* Every generator of this name: one macro may define both backends. */
			for (int k = 0; k < t->n_macros; k++) {
				const gen_macro *m = &t->macros[k];
				if (strlen(m->name) != e - i || strncmp(m->name, s + i, e - i))
					continue;
				if (m->arg < split_args(s, n, open, args, 16)) {
					snprintf(name, sizeof(name), "%s%s",
					         m->cuda ? "tk_cuda_" : "tk_cpu_", args[m->arg]);
					add_def(t, name, strlen(name), f, line_of(f, i));
				}
			}
		}
		i = e - 1;
	}
}

static void tree_free(tree *t)
{
	for (int i = 0; i < t->n_files; i++) {
		free(t->files[i].path);
		free(t->files[i].text);
	}
	free(t->files);
}

/* ---- the checks ---------------------------------------------------------------------- */

typedef struct report {
	const char *root;
	int problems, cpu_only;
} report;

static const char *rel_path(const report *r, const char *path)
{
	size_t n = strlen(r->root);

	if (!strncmp(path, r->root, n) && path[n] == '/')
		return path + n + 1;
	return path;
}

static void problem(report *r, const manifest_op *op, const char *part, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));

static void problem(report *r, const manifest_op *op, const char *part, const char *fmt, ...)
{
	va_list ap;

	printf("%s:%d: %s: %s: ", rel_path(r, op->file), op->line, op->name, part);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	r->problems++;
}

static int lists_kernel(const manifest_op *op, const char *backend)
{
	for (int i = 0; i < op->n_kernels; i++)
		if (!strcmp(op->kernels[i].backend, backend))
			return 1;
	return 0;
}

/* "kernels/<family>/" is where f lives. */
static int in_family(const src *f, const char *family)
{
	size_t n = strlen(family);

	return !strncmp(f->path, "kernels/", 8) && !strncmp(f->path + 8, family, n) &&
	       f->path[8 + n] == '/';
}

static void check_function(report *r, const tree *t, const manifest_op *op, int cuda)
{
	const char *ext = cuda ? ".cu" : ".c";
	char fn[128];
	const def *elsewhere = NULL;

	snprintf(fn, sizeof(fn), "%s%s", cuda ? "tk_cuda_" : "tk_cpu_", op->name);
	for (int i = 0; i < t->n_defs; i++) {
		if (strcmp(t->defs[i].name, fn))
			continue;
		if (in_family(t->defs[i].file, op->family) && has_ext(t->defs[i].file->path, ext))
			return;
		if (elsewhere == NULL)
			elsewhere = &t->defs[i];
	}
	if (elsewhere != NULL)
		problem(r, op, cuda ? "cuda kernel" : "cpu kernel",
		        "%s is defined in %s:%d, not in kernels/%s/*%s", fn, elsewhere->file->path,
		        elsewhere->line, op->family, ext);
	else
		problem(r, op, cuda ? "cuda kernel" : "cpu kernel",
		        "%s is not defined in kernels/%s/*%s", fn, op->family, ext);
}

static int real_model(const char *model)
{
	return model != NULL && *model != '\0' && strncmp(model, "none", 4) != 0;
}

/* Whether `text` holds the identifier `word` (or tk_cpu_<word>, cpu_<word>). */
static int mentions(const char *text, const char *word)
{
	size_t n = strlen(word);

	for (const char *p = text; (p = strstr(p, word)) != NULL; p++) {
		const char *b = p;

		if (ident_char(p[n]))
			continue;
		if (b - text >= 7 && !strncmp(b - 7, "tk_cpu_", 7))
			b -= 7;
		else if (b - text >= 4 && !strncmp(b - 4, "cpu_", 4))
			b -= 4;
		if (b == text || !ident_char(b[-1]))
			return 1;
	}
	return 0;
}

/* docs/ops.md has "### <op>" on a line of its own. */
static int documented(const char *ops_md, const char *name)
{
	size_t n = strlen(name);

	for (const char *p = ops_md; p && (p = strstr(p, "### ")) != NULL; p += 4)
		if ((p == ops_md || p[-1] == '\n') && !strncmp(p + 4, name, n) &&
		    (p[4 + n] == '\n' || p[4 + n] == '\0'))
			return 1;
	return 0;
}

/* The family's reference test, `test` under the root, names the op. */
static void check_test(report *r, const manifest_op *op, const char *test)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", r->root, test);
	size_t len;
	char *text = read_file(path, &len);
	if (text == NULL)
		problem(r, op, "cpu reference test",
		        "%s does not exist (the family's CPU reference test)", test);
	else if (!mentions(text, op->name))
		problem(r, op, "cpu reference test", "%s does not name the op", test);
	free(text);
}

/* A collective has no kernels: the backends' collective operation serves
 * it, and the CPU backend's, the reference, has its own test. */
static void check_collective(report *r, const manifest_op *op)
{
	check_test(r, op, "tests/unit/test_cpu_collective.c");
}

static void check_op(report *r, const tree *t, const manifest_op *op, const char *ops_md)
{
	char test[256];
	int real = 0;

	if (op->doc == NULL || op->doc[0] == '\0')
		problem(r, op, "doc", "no doc string (doc: in its manifest entry)");
	if (op->flops == NULL || op->bytes == NULL)
		problem(r, op, "roofline", "no flops and bytes (roofline: in its manifest entry)");
	if (ops_md == NULL)
		problem(r, op, "docs",
		        "docs/ops.md does not exist (tileops-manifest docs docs/ops.md)");
	else if (!documented(ops_md, op->name))
		problem(r, op, "docs",
		        "no entry in docs/ops.md (regenerate it: tileops-manifest docs "
		        "docs/ops.md)");
	if (op->status != MANIFEST_IMPLEMENTED)
		return;
	for (int i = 0; i < op->n_workloads; i++)
		real |= real_model(op->workloads[i].model) || !strcmp(op->family, "diagnostic");
	if (!real)
		problem(r, op, "workloads",
		        "no workload from a real model (model: other than none)");
	if (op->collective) {
		check_collective(r, op);
		return;
	}
	if (lists_kernel(op, "cpu"))
		check_function(r, t, op, 0);
	else
		problem(r, op, "cpu kernel",
		        "none in the manifest (kernels: - name: cpu_%s, backend: cpu)", op->name);
	if (lists_kernel(op, "cuda")) {
		check_function(r, t, op, 1);
	} else {
		printf("%s:%d: %s: cpu only (the manifest lists no cuda kernel)\n",
		       rel_path(r, op->file), op->line, op->name);
		r->cpu_only++;
	}
	snprintf(test, sizeof(test), "tests/kernels/test_%s.c", op->family);
	check_test(r, op, test);
}

static int by_line(const void *a, const void *b)
{
	return (*(const manifest_op *const *)a)->line - (*(const manifest_op *const *)b)->line;
}

int tool_check_ops(const manifest *m, const char *root)
{
	static tree t;
	report r = { root, 0, 0 };
	char path[4096];
	size_t len;
	char *ops_md;

	memset(&t, 0, sizeof(t));
	t.root = root;
	if (read_kernels(&t) < 0) {
		fprintf(stderr,
		        "tileops-manifest: cannot read %s/kernels (give the source tree: "
		        "check-ops --root DIR)\n",
		        root);
		tree_free(&t);
		return 1;
	}
	find_macros(&t);
	for (int i = 0; i < t.n_files; i++)
		if (has_ext(t.files[i].path, ".c") || has_ext(t.files[i].path, ".cu"))
			find_defs(&t, &t.files[i]);
	snprintf(path, sizeof(path), "%s/docs/ops.md", root);
	ops_md = read_file(path, &len);
	/* File by file, each op where it is written (m->ops is sorted by name). */
	const manifest_op **ops = malloc(sizeof(*ops) * (size_t)(m->n_ops + 1));
	for (int fi = 0; ops != NULL && fi < m->n_files; fi++) {
		int n = 0;

		for (int i = 0; i < m->n_ops; i++)
			if (!strcmp(m->ops[i].file, m->files[fi]))
				ops[n++] = &m->ops[i];
		qsort(ops, (size_t)n, sizeof(*ops), by_line);
		for (int i = 0; i < n; i++)
			check_op(&r, &t, ops[i], ops_md);
	}
	free(ops);
	free(ops_md);
	tree_free(&t);
	if (r.problems)
		printf("check-ops: %d missing part%s in %d ops\n", r.problems,
		       r.problems == 1 ? "" : "s", m->n_ops);
	else
		printf("check-ops: ok, %d ops have every part (%d cpu only)\n", m->n_ops,
		       r.cpu_only);
	return r.problems ? 1 : 0;
}
