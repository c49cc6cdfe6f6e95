/*
 * tuning_text.c - the texts of the tuning interfaces (tk_tuning in
 * tileops_kernels.h) that every family writes alike: shape classes
 * checked against a family's syntax, words with a number, choices of one
 * field. (The tables themselves: TK_TUNING_PAIR in tk_internal.h.)
 */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "tk_internal.h"

#define WORD_MAX 32

/* The next word of *s into w (tk_internal.h). */
int tk_next_word(const char **s, char *w, size_t len)
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
		w[n++] = *p++;
	}
	w[n] = '\0';
	*s = p;
	return 1;
}

int tk_word_number(const char *word, const char *prefix, int64_t max, int64_t *out)
{
	size_t pl = strlen(prefix);
	int64_t v = 0;

	if (strncmp(word, prefix, pl) != 0 || word[pl] == '\0')
		return -1;
	for (const char *p = word + pl; *p; p++) {
		if (!isdigit((unsigned char)*p))
			return -1;
		v = v * 10 + (*p - '0');
		if (v > max)
			return -1;
	}
	*out = v;
	return 0;
}

int64_t tk_pow2_ceil(int64_t x)
{
	int64_t p = 1;

	while (p < x && p < ((int64_t)1 << 62))
		p <<= 1;
	return p;
}

void tk_choice_one(tk_choice *c, tk_choice_mode mode, int32_t v0)
{
	memset(c, 0, sizeof(*c));
	c->mode = mode;
	c->v[0] = v0;
}

/* Append word to out (at *at, a space before all but the first); -1 when it does not fit. */
static int append(char *out, size_t len, size_t *at, const char *word)
{
	int n = snprintf(out + *at, len - *at, "%s%s", *at ? " " : "", word);

	if (n < 0 || (size_t)n >= len - *at)
		return -1;
	*at += (size_t)n;
	return 0;
}

/* Whether word is one of the '|'-separated alternatives in item. */
static int one_of(const char *item, const char *word)
{
	size_t wl = strlen(word);

	for (const char *p = item;;) {
		const char *bar = strchr(p, '|');
		size_t n = bar ? (size_t)(bar - p) : strlen(p);
		if (n == wl && strncmp(p, word, n) == 0)
			return 1;
		if (!bar)
			return 0;
		p = bar + 1;
	}
}

/*
 * Check one word against one item of the syntax: 0, 1 when an optional
 * item does not match (the word is then tried on the next item), -1 with
 * why set.
 */
static int check_item(const char *item, const char *word, char *why, size_t whylen)
{
	size_t il = strlen(item);
	int64_t v;

	if (strcmp(item, "DTYPE") == 0) {
		if (tk_dtype_parse(word) != TK_DTYPE_INVALID)
			return 0;
		snprintf(why, whylen, "'%s' is not a dtype", word);
		return -1;
	}
	if (item[0] == '[' && item[il - 1] == ']') {
		char opt[WORD_MAX];
		snprintf(opt, sizeof(opt), "%.*s", (int)(il - 2), item + 1);
		return strcmp(opt, word) == 0 ? 0 : 1;
	}
	if (item[il - 1] == '#' || item[il - 1] == '^') {
		char prefix[WORD_MAX];
		int pow2 = item[il - 1] == '^';
		snprintf(prefix, sizeof(prefix), "%.*s", (int)(il - 1), item);
		if (tk_word_number(word, prefix, (int64_t)1 << 40, &v) == 0 && v >= 1 &&
		    (!pow2 || (v & (v - 1)) == 0))
			return 0;
		snprintf(why, whylen, "'%s' is not %sN with N %s", word, prefix,
		         pow2 ? "a power of two" : "a positive number");
		return -1;
	}
	if (one_of(item, word))
		return 0;
	snprintf(why, whylen, "'%s' is not %s", word, item);
	return -1;
}

int tk_class_check(const char *syntax, const char *text, char *out, size_t len, char *why,
                   size_t whylen)
{
	char item[WORD_MAX], word[WORD_MAX];
	const char *s = syntax, *t = text;
	size_t at = 0;
	int have = tk_next_word(&t, word, sizeof(word));

	if (len > 0)
		out[0] = '\0';
	while (tk_next_word(&s, item, sizeof(item))) {
		if (!have && item[0] == '[')
			continue;
		if (!have) {
			snprintf(why, whylen, "expected '%s'", syntax);
			return -1;
		}
		int r = check_item(item, word, why, whylen);
		if (r == 1)
			continue; /* an optional word that is not there */
		if (r < 0)
			return -1;
		if (append(out, len, &at, word) != 0) {
			snprintf(why, whylen, "the shape class is too long");
			return -1;
		}
		have = tk_next_word(&t, word, sizeof(word));
	}
	if (have) {
		snprintf(why, whylen, "'%s' after the class: expected '%s'", word, syntax);
		return -1;
	}
	return 0;
}
