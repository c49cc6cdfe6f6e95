/*
 * stat_json.h - the JSON reader tileops-stat parses the stats document with.
 */
#ifndef TILEOPS_STAT_JSON_H
#define TILEOPS_STAT_JSON_H

#include <stddef.h>

enum json_type { JSON_NULL, JSON_BOOL, JSON_NUMBER, JSON_STRING, JSON_ARRAY, JSON_OBJECT };

struct json {
	enum json_type type;
	double num;         /* NUMBER, BOOL (0 or 1) */
	char *str;          /* STRING */
	char *key;          /* the member name when inside an object */
	struct json *child; /* ARRAY, OBJECT: first element */
	struct json *next;  /* next sibling */
};

/*
 * Parse text[0..len) as one JSON value; text[len] must be a NUL (numbers are
 * read with strtod). Returns a tree to free with json_free, or NULL when the
 * text is not one well-formed value. json_free(NULL) does nothing.
 */
struct json *json_parse(const char *text, size_t len);
void json_free(struct json *j);

/* The member named key of an object; NULL when obj is no object or lacks it. */
const struct json *json_get(const struct json *obj, const char *key);

/* 1 and *out set when the member is a finite number (or a bool), else 0. */
int json_num_opt(const struct json *obj, const char *key, double *out);

/* The member as a number, 0 when it is absent or not a finite number. */
double json_num(const struct json *obj, const char *key);

/* The member as a string, "?" when it is absent or not a string. */
const char *json_str(const struct json *obj, const char *key);

#endif
