/*
 * manifest.c - the loader: reads manifest/<family>.yaml with libyaml's document
 * API into manifest_op structs. It checks the schema (known keys, required
 * keys, value types, dtypes, expressions); manifest_check.c checks meaning.
 * Every error names the file, line, column, op and key.
 */
#include "manifest.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <yaml.h>

#include "manifest_yaml.h"

/* ---- dtypes --------------------------------------------------------------- */

static const char *const dtype_names[TK_DTYPE_COUNT] = { "invalid", "f32", "f16", "bf16",
	                                                 "i32",     "i64", "u8",  "fp8_e4m3" };

tk_dtype manifest_dtype_parse(const char *name)
{
	for (int i = 1; i < TK_DTYPE_COUNT; i++)
		if (!strcmp(name, dtype_names[i]))
			return (tk_dtype)i;
	return TK_DTYPE_INVALID;
}

const char *manifest_dtype_name(tk_dtype dt)
{
	return dt > 0 && dt < TK_DTYPE_COUNT ? dtype_names[dt] : "invalid";
}

void manifest_dtype_mask_str(uint32_t mask, char *buf, size_t len)
{
	size_t used = 0;

	if (len)
		buf[0] = 0;
	for (int i = 1; i < TK_DTYPE_COUNT && used < len; i++) {
		if (!(mask & (1u << i)))
			continue;
		int w = snprintf(buf + used, len - used, "%s%s", used ? " | " : "", dtype_names[i]);
		if (w < 0)
			return;
		used += (size_t)w;
	}
}

/* ---- errors ---------------------------------------------------------------- */

int ld_fail(ld *L, const yaml_node_t *n, const char *key, const char *fmt, ...)
{
	va_list ap;
	size_t used = 0;
	int w;

	if (!L->err || !L->errlen)
		return -1;
	w = snprintf(L->err, L->errlen, "%s:%zu:%zu: ", L->file, n ? n->start_mark.line + 1 : 1,
	             n ? n->start_mark.column + 1 : 1);
	used = w > 0 ? (size_t)w : 0;
	if (L->op && L->op->name && used < L->errlen)
		used += (size_t)snprintf(L->err + used, L->errlen - used, "op '%s': ", L->op->name);
	if (key && used < L->errlen)
		used += (size_t)snprintf(L->err + used, L->errlen - used, "key '%s': ", key);
	if (used < L->errlen) {
		va_start(ap, fmt);
		vsnprintf(L->err + used, L->errlen - used, fmt, ap);
		va_end(ap);
	}
	return -1;
}

/* ---- node helpers ----------------------------------------------------------- */

yaml_node_t *ld_node(ld *L, yaml_node_item_t id)
{
	return yaml_document_get_node(&L->doc, id);
}

const char *ld_scalar(ld *L, const yaml_node_t *n, const char *key)
{
	if (!n || n->type != YAML_SCALAR_NODE) {
		ld_fail(L, n, key, "expected a string or number");
		return NULL;
	}
	return (const char *)n->data.scalar.value;
}

int ld_kind(ld *L, const yaml_node_t *n, yaml_node_type_t t, const char *key)
{
	static const char *const names[] = { "nothing", "a scalar", "a list", "a mapping" };

	if (n && n->type == t)
		return 0;
	return ld_fail(L, n, key, "expected %s", names[t]);
}

/* Check a mapping's keys: none unknown, all required present. */
int ld_keys(ld *L, const yaml_node_t *map, const char *what, const char *const *allowed,
            const char *const *required)
{
	if (ld_kind(L, map, YAML_MAPPING_NODE, NULL) < 0)
		return -1;
	for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top;
	     p++) {
		yaml_node_t *k = ld_node(L, p->key);
		const char *ks = ld_scalar(L, k, NULL);
		int ok = 0;

		if (!ks)
			return -1;
		for (int i = 0; allowed[i] && !ok; i++)
			ok = !strcmp(ks, allowed[i]);
		if (!ok) {
			char list[256] = "";
			size_t u = 0;
			for (int i = 0; allowed[i] && u < sizeof(list); i++)
				u += (size_t)snprintf(list + u, sizeof(list) - u, "%s%s",
				                      i ? ", " : "", allowed[i]);
			return ld_fail(L, k, ks, "unknown key in %s (allowed: %s)", what, list);
		}
	}
	for (int i = 0; required && required[i]; i++)
		if (!ld_get(L, map, required[i]))
			return ld_fail(L, map, required[i], "missing required key in %s", what);
	return 0;
}

yaml_node_t *ld_get(ld *L, const yaml_node_t *map, const char *key)
{
	for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top;
	     p++) {
		yaml_node_t *k = ld_node(L, p->key);

		if (k && k->type == YAML_SCALAR_NODE && !strcmp((char *)k->data.scalar.value, key))
			return ld_node(L, p->value);
	}
	return NULL;
}

int ld_string(ld *L, const yaml_node_t *map, const char *key, char **out)
{
	yaml_node_t *n = ld_get(L, map, key);
	const char *s;

	if (!n)
		return 0;
	if (!(s = ld_scalar(L, n, key)))
		return -1;
	free(*out);
	*out = strdup(s);
	return *out ? 0 : ld_fail(L, n, key, "out of memory");
}

int ld_int(ld *L, const yaml_node_t *n, const char *key, int64_t *out)
{
	const char *s = ld_scalar(L, n, key);
	char *end;

	if (!s)
		return -1;
	errno = 0;
	*out = strtoll(s, &end, 10);
	if (!*s || *end || errno)
		return ld_fail(L, n, key, "expected an integer, got '%s'", s);
	return 0;
}

int ld_double(ld *L, const yaml_node_t *n, const char *key, double *out)
{
	const char *s = ld_scalar(L, n, key);
	char *end;

	if (!s)
		return -1;
	if (!strcmp(s, "inf") || !strcmp(s, ".inf")) {
		*out = HUGE_VAL;
		return 0;
	}
	if (!strcmp(s, "-inf") || !strcmp(s, "-.inf")) {
		*out = -HUGE_VAL;
		return 0;
	}
	errno = 0;
	*out = strtod(s, &end);
	if (!*s || *end || errno)
		return ld_fail(L, n, key, "expected a number, got '%s'", s);
	return 0;
}

int ld_bool(ld *L, const yaml_node_t *n, const char *key, int *out)
{
	const char *s = ld_scalar(L, n, key);

	if (!s)
		return -1;
	if (!strcmp(s, "true") || !strcmp(s, "false")) {
		*out = s[0] == 't';
		return 0;
	}
	return ld_fail(L, n, key, "expected true or false, got '%s'", s);
}

int ld_flag(ld *L, const yaml_node_t *map, const char *key, int *out)
{
	yaml_node_t *n = ld_get(L, map, key);

	*out = 0;
	return n ? ld_bool(L, n, key, out) : 0;
}

/* Parse an expression held by node `n`; its type must be one of `types`. */
int ld_expr(ld *L, const yaml_node_t *n, const char *key, const expr_scope *scope,
            const expr_type *types, int n_types, expr **out)
{
	const char *s = ld_scalar(L, n, key);
	char msg[256];
	int col = 0;

	if (!s)
		return -1;
	if (expr_parse(s, scope, out, &col, msg, sizeof(msg)) < 0) {
		yaml_node_t at = *n;
		int quoted = n->data.scalar.style == YAML_SINGLE_QUOTED_SCALAR_STYLE ||
		             n->data.scalar.style == YAML_DOUBLE_QUOTED_SCALAR_STYLE;

		at.start_mark.column += (size_t)(col - 1 + quoted);
		return ld_fail(L, &at, key, "bad expression '%s': %s", s, msg);
	}
	for (int i = 0; i < n_types; i++)
		if (expr_result_type(*out) == types[i])
			return 0;
	ld_fail(L, n, key, "expression '%s' is %s, expected %s", s,
	        expr_type_name(expr_result_type(*out)), expr_type_name(types[0]));
	expr_free(*out);
	*out = NULL;
	return -1;
}

/* ---- files -------------------------------------------------------------------- */

static int check_all(manifest *m, char *err, size_t errlen);

/* Load one document from a parser whose input is set; `path` names it. */
static int load_parser(manifest *m, const char *path, yaml_parser_t *parser, char *err,
                       size_t errlen)
{
	ld L;
	int rc;

	memset(&L, 0, sizeof(L));
	L.file = path;
	L.err = err;
	L.errlen = errlen;
	L.m = m;
	if (!yaml_parser_load(parser, &L.doc)) {
		snprintf(err, errlen, "%s:%zu:%zu: bad YAML: %s%s%s", path,
		         parser->problem_mark.line + 1, parser->problem_mark.column + 1,
		         parser->problem ? parser->problem : "syntax error",
		         parser->context ? " " : "", parser->context ? parser->context : "");
		return -1;
	}
	yaml_node_t *root = yaml_document_get_root_node(&L.doc);
	if (!root) {
		snprintf(err, errlen, "%s:1:1: the file is empty", path);
		rc = -1;
	} else {
		rc = ld_file(&L, root);
	}
	yaml_document_delete(&L.doc);
	return rc;
}

static int load_file(manifest *m, const char *path, char *err, size_t errlen)
{
	yaml_parser_t parser;
	FILE *f = fopen(path, "rb");
	if (!f) {
		snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
		return -1;
	}
	yaml_parser_initialize(&parser);
	yaml_parser_set_input_file(&parser, f);
	int rc = load_parser(m, path, &parser, err, errlen);
	yaml_parser_delete(&parser);
	fclose(f);
	return rc;
}

int manifest_parse_text(const char *name, const char *text, size_t len, manifest **out, char *err,
                        size_t errlen)
{
	char scratch[8];
	if (!err || !errlen) {
		err = scratch;
		errlen = sizeof(scratch);
	}
	*out = NULL;
	manifest *m = calloc(1, sizeof(*m));
	if (!m || !(m->files = calloc(1, sizeof(char *))) || !(m->files[0] = strdup(name))) {
		manifest_free(m);
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	m->n_files = 1;
	yaml_parser_t parser;
	yaml_parser_initialize(&parser);
	yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
	int rc = load_parser(m, m->files[0], &parser, err, errlen);
	yaml_parser_delete(&parser);
	if (rc == 0)
		rc = check_all(m, err, errlen);
	if (rc != 0) {
		manifest_free(m);
		return -1;
	}
	*out = m;
	return 0;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/*
 * Append the *.yaml files of dir, in name order, to names[*count..]. A
 * directory that is missing is an error unless `optional`; an empty one is
 * an error unless `optional`.
 */
static int list_dir(const char *dir, int optional, char ***names, int *count, char *err,
                    size_t errlen)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int n = *count, cap = *count, first = *count;
	char **v = *names;

	if (!d) {
		if (optional && errno == ENOENT)
			return 0;
		snprintf(err, errlen, "%s: cannot open directory: %s", dir, strerror(errno));
		return -1;
	}
	while ((de = readdir(d))) {
		size_t len = strlen(de->d_name);

		if (len < 6 || strcmp(de->d_name + len - 5, ".yaml") || de->d_name[0] == '.')
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 16;
			char **nv = realloc(v, (size_t)cap * sizeof(*v));
			if (!nv)
				break;
			v = nv;
		}
		size_t plen = strlen(dir) + len + 2;
		if (!(v[n] = malloc(plen)))
			break;
		snprintf(v[n++], plen, "%s/%s", dir, de->d_name);
	}
	closedir(d);
	*names = v;
	*count = n;
	if (n == first && !optional) {
		snprintf(err, errlen, "%s: no *.yaml files in the directory", dir);
		return -1;
	}
	qsort(v + first, (size_t)(n - first), sizeof(*v), cmp_str);
	return 0;
}

static int cmp_op(const void *a, const void *b)
{
	return strcmp(((const manifest_op *)a)->name, ((const manifest_op *)b)->name);
}

static int check_all(manifest *m, char *err, size_t errlen)
{
	qsort(m->ops, (size_t)m->n_ops, sizeof(*m->ops), cmp_op);
	for (int i = 0; i < m->n_ops; i++) {
		const manifest_op *op = &m->ops[i];

		if (i > 0 && !strcmp(op->name, m->ops[i - 1].name)) {
			snprintf(err, errlen, "%s:%d: op '%s' is declared twice (also at %s:%d)",
			         op->file, op->line, op->name, m->ops[i - 1].file,
			         m->ops[i - 1].line);
			return -1;
		}
		if (manifest_check_op(op, err, errlen) < 0)
			return -1;
	}
	return 0;
}

int manifest_parse(const char *path, manifest **out, char *err, size_t errlen)
{
	char scratch[8];
	struct stat st;
	manifest *m;

	if (!err || !errlen) {
		err = scratch;
		errlen = sizeof(scratch);
	}
	*out = NULL;
	if (!path || stat(path, &st) < 0) {
		snprintf(err, errlen, "%s: %s", path ? path : "(null)",
		         path ? strerror(errno) : "no manifest path");
		return -1;
	}
	if (!(m = calloc(1, sizeof(*m)))) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	int n_product = 0;
	if (S_ISDIR(st.st_mode)) {
		char diag[4096];
		snprintf(diag, sizeof(diag), "%s/" MANIFEST_DIAGNOSTIC_DIR, path);
		if (list_dir(path, 0, &m->files, &m->n_files, err, errlen) < 0) {
			manifest_free(m);
			return -1;
		}
		n_product = m->n_files;
		if (list_dir(diag, 1, &m->files, &m->n_files, err, errlen) < 0) {
			manifest_free(m);
			return -1;
		}
	} else {
		m->files = calloc(1, sizeof(char *));
		if (!m->files || !(m->files[0] = strdup(path))) {
			manifest_free(m);
			snprintf(err, errlen, "out of memory");
			return -1;
		}
		m->n_files = 1;
		n_product = 1;
	}
	for (int i = 0; i < m->n_files; i++) {
		int before = m->n_ops;
		if (load_file(m, m->files[i], err, errlen) < 0) {
			manifest_free(m);
			return -1;
		}
		for (int k = before; k < m->n_ops; k++)
			m->ops[k].diagnostic = i >= n_product;
	}
	if (check_all(m, err, errlen) < 0) {
		manifest_free(m);
		return -1;
	}
	*out = m;
	return 0;
}

const manifest_op *manifest_find(const manifest *m, const char *name)
{
	int lo = 0, hi;

	if (!m || !name)
		return NULL;
	hi = m->n_ops - 1;
	while (lo <= hi) {
		int mid = lo + (hi - lo) / 2;
		int c = strcmp(name, m->ops[mid].name);

		if (c == 0)
			return &m->ops[mid];
		if (c < 0)
			hi = mid - 1;
		else
			lo = mid + 1;
	}
	return NULL;
}

void manifest_free(manifest *m)
{
	if (!m)
		return;
	for (int i = 0; i < m->n_ops; i++)
		manifest_op_clear(&m->ops[i]);
	free(m->ops);
	for (int i = 0; i < m->n_files; i++)
		free(m->files[i]);
	free(m->files);
	free(m);
}
