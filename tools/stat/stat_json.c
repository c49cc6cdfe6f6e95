/*
 * stat_json.c - a small JSON reader, enough for tileopsd's stats document.
 *
 * It never trusts its input: any malformed document (truncated, nested too
 * deep, a wrong type where a number is expected) yields NULL or a missing
 * member, never a crash, because tileops-stat prints whatever a socket sent.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "stat_json.h"

#define JSON_MAX_DEPTH 32

struct json_parser {
	const char *p;
	const char *end;
	int depth;
};

void json_free(struct json *j)
{
	while (j != NULL) {
		struct json *next = j->next;

		json_free(j->child);
		free(j->str);
		free(j->key);
		free(j);
		j = next;
	}
}

static void json_skip_space(struct json_parser *ps)
{
	while (ps->p < ps->end &&
	       (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r'))
		ps->p++;
}

static int json_hex4(const char *s, unsigned *out)
{
	unsigned v = 0;
	int i;

	for (i = 0; i < 4; i++) {
		char ch = s[i];

		v <<= 4;
		if (ch >= '0' && ch <= '9')
			v |= (unsigned)(ch - '0');
		else if (ch >= 'a' && ch <= 'f')
			v |= (unsigned)(ch - 'a' + 10);
		else if (ch >= 'A' && ch <= 'F')
			v |= (unsigned)(ch - 'A' + 10);
		else
			return -1;
	}
	*out = v;
	return 0;
}

/* Append code point cp as UTF-8. */
static size_t utf8_put(char *dst, unsigned cp)
{
	if (cp < 0x80) {
		dst[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		dst[0] = (char)(0xc0 | (cp >> 6));
		dst[1] = (char)(0x80 | (cp & 0x3f));
		return 2;
	}
	dst[0] = (char)(0xe0 | (cp >> 12));
	dst[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
	dst[2] = (char)(0x80 | (cp & 0x3f));
	return 3;
}

/* Parse a string starting at the opening quote; the result is malloc'd. */
static char *json_string(struct json_parser *ps)
{
	char *out, *w;

	/* The decoded string is never longer than the rest of the input. */
	if ((out = malloc((size_t)(ps->end - ps->p) + 1)) == NULL)
		return NULL;
	w = out;
	ps->p++;
	while (ps->p < ps->end && *ps->p != '"') {
		char ch = *ps->p++;
		unsigned cp;

		if (ch != '\\') {
			*w++ = ch;
			continue;
		}
		if (ps->p >= ps->end)
			break;
		ch = *ps->p++;
		switch (ch) {
		case 'n':
			*w++ = '\n';
			break;
		case 't':
			*w++ = '\t';
			break;
		case 'r':
			*w++ = '\r';
			break;
		case 'b':
			*w++ = '\b';
			break;
		case 'f':
			*w++ = '\f';
			break;
		case 'u':
			if (ps->end - ps->p < 4 || json_hex4(ps->p, &cp) != 0)
				goto fail;
			ps->p += 4;
			w += utf8_put(w, cp);
			break;
		default:
			*w++ = ch;
			break;
		}
	}
	if (ps->p >= ps->end)
		goto fail;
	ps->p++;
	*w = '\0';
	return out;
fail:
	free(out);
	return NULL;
}

static struct json *json_value(struct json_parser *ps);

/* Parse the members of an object or the elements of an array. */
static int json_container(struct json_parser *ps, struct json *j, char close)
{
	struct json **tail = &j->child;

	ps->p++;
	json_skip_space(ps);
	if (ps->p < ps->end && *ps->p == close) {
		ps->p++;
		return 0;
	}
	for (;;) {
		char *key = NULL;
		struct json *v;

		json_skip_space(ps);
		if (close == '}') {
			if (ps->p >= ps->end || *ps->p != '"' || (key = json_string(ps)) == NULL)
				return -1;
			json_skip_space(ps);
			if (ps->p >= ps->end || *ps->p++ != ':') {
				free(key);
				return -1;
			}
		}
		if ((v = json_value(ps)) == NULL) {
			free(key);
			return -1;
		}
		v->key = key;
		*tail = v;
		tail = &v->next;
		json_skip_space(ps);
		if (ps->p < ps->end && *ps->p == ',') {
			ps->p++;
			continue;
		}
		if (ps->p < ps->end && *ps->p == close) {
			ps->p++;
			return 0;
		}
		return -1;
	}
}

static int json_literal(struct json_parser *ps, const char *word)
{
	size_t n = strlen(word);

	if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, word, n) != 0)
		return -1;
	ps->p += n;
	return 0;
}

static struct json *json_value(struct json_parser *ps)
{
	struct json *j;
	int rv = 0;

	json_skip_space(ps);
	if (ps->p >= ps->end || ps->depth >= JSON_MAX_DEPTH)
		return NULL;
	if ((j = calloc(1, sizeof(*j))) == NULL)
		return NULL;
	ps->depth++;
	switch (*ps->p) {
	case '{':
		j->type = JSON_OBJECT;
		rv = json_container(ps, j, '}');
		break;
	case '[':
		j->type = JSON_ARRAY;
		rv = json_container(ps, j, ']');
		break;
	case '"':
		j->type = JSON_STRING;
		rv = (j->str = json_string(ps)) == NULL ? -1 : 0;
		break;
	case 't':
		j->type = JSON_BOOL;
		j->num = 1;
		rv = json_literal(ps, "true");
		break;
	case 'f':
		j->type = JSON_BOOL;
		rv = json_literal(ps, "false");
		break;
	case 'n':
		rv = json_literal(ps, "null");
		break;
	default: {
		/* The input is NUL-terminated, so strtod stops in time. */
		char *endp;

		j->type = JSON_NUMBER;
		j->num = strtod(ps->p, &endp);
		rv = endp == ps->p ? -1 : 0;
		ps->p = endp;
	}
	}
	ps->depth--;
	if (rv != 0) {
		json_free(j);
		return NULL;
	}
	return j;
}

struct json *json_parse(const char *text, size_t len)
{
	struct json_parser ps = { text, text + len, 0 };
	struct json *j = json_value(&ps);

	if (j == NULL)
		return NULL;
	/* Trailing bytes other than spaces mean the document is not one value. */
	json_skip_space(&ps);
	if (ps.p != ps.end) {
		json_free(j);
		return NULL;
	}
	return j;
}

const struct json *json_get(const struct json *obj, const char *key)
{
	const struct json *m;

	if (obj == NULL || obj->type != JSON_OBJECT)
		return NULL;
	for (m = obj->child; m != NULL; m = m->next)
		if (m->key != NULL && strcmp(m->key, key) == 0)
			return m;
	return NULL;
}

int json_num_opt(const struct json *obj, const char *key, double *out)
{
	const struct json *v = json_get(obj, key);

	if (v == NULL || (v->type != JSON_NUMBER && v->type != JSON_BOOL) || !isfinite(v->num))
		return 0;
	*out = v->num;
	return 1;
}

double json_num(const struct json *obj, const char *key)
{
	double v = 0.0;

	json_num_opt(obj, key, &v);
	return v;
}

const char *json_str(const struct json *obj, const char *key)
{
	const struct json *v = json_get(obj, key);

	return v != NULL && v->type == JSON_STRING ? v->str : "?";
}
