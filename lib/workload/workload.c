/* SPDX-License-Identifier: BSD-3-Clause */
/* Request workloads: trace files and the built-in generator (workload.h). */
#include "workload.h"

#include <errno.h>
#include <math.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "fileio.h"
#include "proto.h"

/* ---- A small JSON scanner for flat objects ------------------------------------ */

static const char *
skip_ws(const char *p)
{
	while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')
		p++;
	return p;
}

/* The end of the JSON string that starts at @p p ('"'), past its closing quote; NULL if none. */
static const char *
string_end(const char *p)
{
	for (p++; *p != '\0'; p++) {
		if (*p == '\\' && p[1] != '\0')
			p++;
		else if (*p == '"')
			return p + 1;
	}
	return NULL;
}

/*
 * Is @p line one JSON object and nothing after it, its brackets matched
 * outside strings, each of its own keys followed by ':' and written
 * without an escape? NULL, or what is wrong. The fields are then read by
 * key (json_key); without this, '{...} garbage', '{...}}', '{... "a": [1'
 * and a line with no closing brace were taken for requests, and so were
 * '"cache_salt" "k"' (read as no salt) and '"cache_\u0073alt": "k"' (a
 * salt to any JSON reader, no key to this one).
 */
static const char *
json_shape(const char *line)
{
	char open[64];
	unsigned int depth = 0;
	const char *p = skip_ws(line);
	bool key_next = false; /* at depth 1, after '{' or ',': a key */
	bool colon_next = false; /* at depth 1, after a key: its ':' */

	if (*p != '{')
		return "not a JSON object (each line is one {...})";
	for (; *p != '\0'; p++) {
		if (*p == '"') {
			const char *e = string_end(p);

			if (e == NULL)
				return "a string with no closing quote";
			if (depth == 1 && key_next) {
				if (memchr(p + 1, '\\', (size_t)(e - p - 2)) != NULL)
					return "a key written with an escape (keys are read as written)";
				if (*skip_ws(e) != ':')
					return "a key with no ':' after it";
				key_next = false;
				colon_next = true;
			}
			p = e - 1;
		} else if (*p == ':' && depth == 1) {
			if (!colon_next)
				return "a ':' after a value (a key expected before it)";
			colon_next = false;
		} else if (*p == ',' && depth == 1) {
			key_next = true;
		} else if (*p == '{' || *p == '[') {
			if (depth == 0)
				key_next = true;
			if (depth == sizeof(open))
				return "nested more than 64 deep";
			open[depth++] = *p;
		} else if (*p == '}' || *p == ']') {
			if (depth == 0 || open[depth - 1] != (*p == '}' ? '{' : '['))
				return "a closing bracket that does not match";
			if (--depth == 0)
				return *skip_ws(p + 1) == '\0' ? NULL : "more after the object's end";
		}
	}
	return "an object with no end";
}

/*
 * Find "key": among the top-level keys of the object on @p line (a key of
 * an object nested in it is not the request's); return the value's start,
 * or NULL.
 */
static const char *
json_key_nth(const char *line, const char *key, unsigned int nth)
{
	size_t kl = strlen(key);
	const char *p = line;
	int depth = 0;

	while (*p != '\0') {
		if (*p == '"') {
			const char *e = string_end(p), *q;

			if (e == NULL)
				return NULL;
			q = skip_ws(e);
			if (depth == 1 && *q == ':' && (size_t)(e - p - 2) == kl &&
			    strncmp(p + 1, key, kl) == 0 && nth-- == 0)
				return skip_ws(q + 1);
			p = e;
			continue;
		}
		if (*p == '{' || *p == '[')
			depth++;
		else if (*p == '}' || *p == ']')
			depth--;
		p++;
	}
	return NULL;
}

static const char *
json_key(const char *line, const char *key)
{
	return json_key_nth(line, key, 0);
}

/*
 * A whole number at @p p, up to @p max, ending where a JSON value ends:
 * not negative, not 1e23, not 2^64 (never a prefix of what is written).
 * Returns its end, or NULL.
 */
static const char *
json_num(const char *p, uint64_t max, uint64_t *v)
{
	char *end;

	if (*p < '0' || *p > '9')
		return NULL;
	errno = 0;
	*v = strtoull(p, &end, 10);
	if (errno != 0 || *v > max)
		return NULL;
	p = skip_ws(end);
	if (*p != ',' && *p != '}' && *p != ']' && *p != '\0')
		return NULL;
	return end;
}

static int
json_u64(const char *line, const char *key, uint64_t max, uint64_t *v)
{
	const char *p = json_key(line, key);

	if (p == NULL)
		return -ENOENT;
	return json_num(p, max, v) != NULL ? 0 : -EINVAL;
}

/* An array of unsigned integers; *out is malloc'd. */
static int
json_u64_array(const char *line, const char *key, uint64_t max, uint64_t **out, size_t *n)
{
	const char *p = json_key(line, key);
	size_t cap = 64;
	uint64_t *a;

	*n = 0;
	if (p == NULL)
		return -ENOENT;
	if (*p != '[')
		return -EINVAL;
	a = malloc(sizeof(*a) * cap);
	if (a == NULL)
		return -ENOMEM;
	p = skip_ws(p + 1);
	while (*p != ']') {
		char *end;

		if (*n == cap) {
			uint64_t *b = realloc(a, sizeof(*a) * cap * 2);

			if (b == NULL) {
				free(a);
				return -ENOMEM;
			}
			a = b;
			cap *= 2;
		}
		end = (char *)json_num(p, max, &a[*n]);
		if (end == NULL) {
			free(a);
			return -EINVAL;
		}
		(*n)++;
		p = skip_ws(end);
		if (*p == ',' && *skip_ws(p + 1) != ']')
			p = skip_ws(p + 1);
		else if (*p != ']') { /* a comma before the ']' too: [1, 2,] is not JSON */
			free(a);
			return -EINVAL;
		}
	}
	*out = a;
	return 0;
}

static int
json_str(const char *line, const char *key, char *out, size_t cap)
{
	const char *p = json_key(line, key), *q;

	if (p == NULL)
		return -ENOENT;
	if (*p != '"')
		return -EINVAL;
	q = strchr(p + 1, '"');
	if (q == NULL || (size_t)(q - p - 1) >= cap)
		return -EINVAL;
	memcpy(out, p + 1, (size_t)(q - p - 1));
	out[q - p - 1] = '\0';
	return 0;
}

/*
 * A cache salt: "cache_salt": "..." of 1 to WL_MAX_SALT bytes, each
 * printable ASCII but the space, '"' and '\\' (so that no escape can
 * make two spellings of one salt), or null (none). Its id (the bytes'
 * XXH3, proto_ref_salt) into *salt; -ENOENT when absent or null.
 */
static int
json_salt(const char *line, uint64_t *salt)
{
	const char *p = json_key(line, "cache_salt"), *q;

	if (p == NULL)
		return -ENOENT;
	if (strncmp(p, "null", 4) == 0) {
		q = skip_ws(p + 4);
		if (*q == ',' || *q == '}' || *q == '\0')
			return -ENOENT;
		return -EINVAL;
	}
	if (*p != '"')
		return -EINVAL;
	for (q = p + 1; *q != '"'; q++)
		if (*q < 0x21 || *q > 0x7e || *q == '\\' || q - p > WL_MAX_SALT)
			return -EINVAL;
	if (q == p + 1)
		return -EINVAL;
	*salt = proto_ref_salt(p + 1, (size_t)(q - p - 1));
	return 0;
}

/* Token id of position @pos of the block named @hash_id: the same everywhere. */
static inline uint32_t
block_token(uint64_t hash_id, uint32_t pos)
{
	uint64_t x = hash_id * 0x9E3779B97F4A7C15ULL + pos + 1;

	x ^= x >> 31;
	x *= 0xBF58476D1CE4E5B9ULL;
	x ^= x >> 29;
	return (uint32_t)x;
}

static bool (*wl_stop)(void);

void
workload_set_stop(bool (*stop)(void))
{
	wl_stop = stop;
}

int
workload_load(const char *path, uint32_t block, size_t limit, struct workload *t, char *err,
	      size_t errlen)
{
	return workload_load_bounded(path, block, limit, WL_MAX_LINE, WL_MAX_REQUESTS, t, err, errlen);
}

/* The line being read: where its errors name it, and where they go. */
struct wl_line {
	const char *path;
	unsigned long lineno;
	char *err;
	size_t errlen;
};

/* "FILE:LINE: " and the message into the caller's error: -1. */
static int __attribute__((format(printf, 2, 3)))
line_fail(const struct wl_line *w, const char *fmt, ...)
{
	int n = snprintf(w->err, w->errlen, "%s:%lu: ", w->path, w->lineno);
	va_list ap;

	if (n >= 0 && (size_t)n < w->errlen) {
		va_start(ap, fmt);
		vsnprintf(w->err + n, w->errlen - (size_t)n, fmt, ap);
		va_end(ap);
	}
	return -1;
}

/* One line's field is not what the format says: the error, and -1. */
static int
field_bad(const struct wl_line *w, const char *field, const char *want)
{
	return line_fail(w, "%s: %s", field, want);
}

/*
 * timestamp, output_length and org. Each field: absent (its default), or
 * what it says, or an error naming the line and the field: never a default
 * for a bad value.
 */
static int
read_fields(const struct wl_line *w, const char *line, uint64_t default_iso, struct wl_req *q)
{
	char org[256];
	uint64_t v;
	int rc;

	/* A field given twice is refused: JSON readers disagree on which one
	 * counts (Python's json takes the last, this reader the first), and a
	 * salt or an organization read differently by two tools is not one. */
	static const char *const fields[] = {"timestamp", "output_length", "org", "cache_salt",
					     "tokens", "hash_ids", "input_length",
					     "cache_length_allowed", "multimodal"};
	unsigned int f;

	for (f = 0; f < sizeof(fields) / sizeof(fields[0]); f++)
		if (json_key_nth(line, fields[f], 1) != NULL)
			return field_bad(w, fields[f], "given twice in the line");
	rc = json_u64(line, "timestamp", WL_MAX_TS_MS, &q->ts_ms);
	if (rc == -ENOENT) {
		/* In order, as kvss-trace reads it; replayed at its time, refused. */
		q->ts_ms = w->lineno;
		q->no_ts = 1;
	} else if (rc != 0)
		return field_bad(w, "timestamp", "want whole milliseconds, 0 to 2^53");
	rc = json_u64(line, "output_length", WL_MAX_TOKENS, &v);
	if (rc == 0)
		q->out = (uint32_t)v;
	else if (rc != -ENOENT)
		return field_bad(w, "output_length", "want a whole number of tokens, 0 to 2^24");
	rc = json_str(line, "org", org, sizeof(org));
	if (rc == 0)
		q->iso = proto_ref_isolation_id(org, strlen(org));
	else if (rc == -ENOENT)
		q->iso = default_iso;
	else
		return field_bad(w, "org", "want a name in quotes, under 256 bytes");
	rc = json_salt(line, &q->salt);
	if (rc == -EINVAL)
		return field_bad(w, "cache_salt", "want null, or 1 to 256 printable ASCII bytes in "
				 "quotes, without spaces, quotes or backslashes");
	return 0;
}

/*
 * The prompt: Mooncake's hash_ids (blocks of @block tokens, input_length of
 * them in all) or native tokens. On an error what it allocated is in
 * q->tokens and q->ids, for the caller to free.
 */
static int
read_prompt(const struct wl_line *w, const char *line, uint32_t block, struct wl_req *q)
{
	uint64_t *ids = NULL;
	size_t nids = 0, i;
	int rc;

	rc = json_u64_array(line, "hash_ids", UINT64_MAX, &ids, &nids);
	if (rc == 0) {
		uint64_t in;

		q->ids = ids; /* freed with the request, or by the caller on an error */
		rc = json_u64(line, "input_length", WL_MAX_TOKENS, &in);
		if (rc == -ENOENT)
			return field_bad(w, "input_length", "missing: hash_ids need it (the prompt's tokens)");
		if (rc != 0)
			return field_bad(w, "input_length", "want a whole number of tokens, 0 to 2^24");
		if (in > (uint64_t)nids * block || (nids > 0 && in <= (uint64_t)(nids - 1) * block))
			return line_fail(w, "input_length %" PRIu64 " does not match "
					 "hash_ids (%zu blocks of %u tokens: more than %" PRIu64
					 ", at most %" PRIu64 ")", in, nids, block,
					 nids > 0 ? (uint64_t)(nids - 1) * block : 0, (uint64_t)nids * block);
		q->n = (uint32_t)in;
		q->nids = (uint32_t)nids;
		q->tokens = malloc(sizeof(uint32_t) * (q->n ? q->n : 1));
		if (q->tokens == NULL)
			return -ENOMEM;
		for (i = 0; i < q->n; i++)
			q->tokens[i] = block_token(ids[i / block], (uint32_t)(i % block));
		q->first_block = nids ? ids[0] : 0;
	} else if (rc == -ENOMEM) {
		return -ENOMEM;
	} else if (rc == -EINVAL) {
		return field_bad(w, "hash_ids", "want an array of whole numbers, 0 to 2^64 - 1");
	} else if ((rc = json_u64_array(line, "tokens", UINT32_MAX, &ids, &nids)) == 0) {
		if (nids > WL_MAX_TOKENS) {
			free(ids);
			return line_fail(w, "%zu tokens is over %u", nids, WL_MAX_TOKENS);
		}
		q->n = (uint32_t)nids;
		q->tokens = malloc(sizeof(uint32_t) * (nids ? nids : 1));
		if (q->tokens == NULL) {
			free(ids);
			return -ENOMEM;
		}
		for (i = 0; i < nids; i++)
			q->tokens[i] = (uint32_t)ids[i];
		q->first_block = nids ? ids[0] : 0;
		free(ids);
	} else if (rc == -ENOMEM) {
		return -ENOMEM;
	} else if (rc == -EINVAL) {
		return field_bad(w, "tokens", "want an array of token ids, whole numbers 0 to 2^32 - 1");
	} else {
		return line_fail(w, "neither hash_ids nor tokens");
	}
	return 0;
}

/* "multimodal": [START, END, ...]: token ranges of images or audio. */
static int
read_multimodal(const struct wl_line *w, const char *line, struct wl_req *q)
{
	uint64_t *mm;
	size_t nmm, m;
	bool ok;
	int rc;

	rc = json_u64_array(line, "multimodal", UINT32_MAX, &mm, &nmm);
	if (rc == -ENOENT)
		return 0;
	if (rc == -ENOMEM)
		return -ENOMEM;
	if (rc != 0)
		return field_bad(w, "multimodal", "want [START, END, ...]: pairs of token indexes");
	ok = nmm % 2 == 0;
	for (m = 0; ok && m < nmm; m += 2) {
		ok = mm[m] < mm[m + 1] && mm[m + 1] <= q->n;
		if (ok && mm[m] < q->first_mm)
			q->first_mm = (uint32_t)mm[m];
	}
	free(mm);
	if (!ok)
		return field_bad(w, "multimodal", "want [START, END, ...]: pairs of token indexes, "
				 "START < END <= the prompt's length");
	return 0;
}

/*
 * One request from a line that is not blank: 0, -1 with the error written,
 * or -ENOMEM. On an error, q->tokens and q->ids are the caller's to free.
 */
static int
read_request(const struct wl_line *w, const char *line, uint32_t block, uint64_t default_iso,
	     struct wl_req *q)
{
	const char *why = json_shape(line);
	uint64_t v;
	int rc;

	if (why != NULL)
		return line_fail(w, "%s", why);
	if (read_fields(w, line, default_iso, q) != 0)
		return -1;
	rc = read_prompt(w, line, block, q);
	if (rc != 0)
		return rc;
	q->allowed = q->n;
	q->first_mm = UINT32_MAX;
	rc = read_multimodal(w, line, q);
	if (rc != 0)
		return rc;
	rc = json_u64(line, "cache_length_allowed", UINT64_MAX, &v);
	if (rc == 0)
		q->allowed = v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
	else if (rc != -ENOENT)
		return field_bad(w, "cache_length_allowed", "want a whole number of tokens");
	return 0;
}

/*
 * The first line without a timestamp, and the first whose timestamp is
 * earlier than the line's before it: a replay at the trace's times
 * (workload.h, arrival_ts_*) refuses such a trace naming that line,
 * rather than reorder it or make up a time.
 */
static void
arrival_note(struct workload *t, const struct wl_req *q, unsigned long lineno)
{
	if (q->no_ts && t->ts_missing_line == 0)
		t->ts_missing_line = lineno;
	if (!q->no_ts && t->n > 0 && !t->r[t->n - 1].no_ts && q->ts_ms < t->r[t->n - 1].ts_ms &&
	    t->ts_back_line == 0)
		t->ts_back_line = lineno;
}

/* Append @q (its arrays now the workload's): 0, or -ENOMEM. */
static int
workload_push(struct workload *t, const struct wl_req *q)
{
	if (t->n == t->cap) {
		size_t cap = t->cap ? 2 * t->cap : 1024;
		struct wl_req *r = realloc(t->r, sizeof(*t->r) * cap);

		if (r == NULL)
			return -ENOMEM;
		t->r = r;
		t->cap = cap;
	}
	t->r[t->n++] = *q;
	t->tokens += q->n;
	return 0;
}

/*
 * Before a line is parsed: a line too long, a byte order mark (dropped
 * from @line), a NUL byte. 1: a blank line, skipped; -1: the error written.
 */
static int
check_line(const struct wl_line *w, char *line, ssize_t len, size_t max_line)
{
	if (len == -2) {
		if (errno == EFBIG)
			return line_fail(w, "a line longer than %zu bytes", max_line);
		return line_fail(w, "out of memory");
	}
	/* A UTF-8 byte order mark before the first line is not its text. */
	if (w->lineno == 1 && len >= 3 && memcmp(line, "\xef\xbb\xbf", 3) == 0) {
		memmove(line, line + 3, (size_t)len - 2);
		len -= 3;
	}
	if (strlen(line) != (size_t)len)
		/* What follows a NUL would be read by nothing: not taken
		 * (nor skipped as blank when the NUL comes first). */
		return line_fail(w, "a NUL byte in the line");
	if (len <= 1 || skip_ws(line)[0] == '\0')
		return 1;
	return 0;
}

int
workload_load_bounded(const char *path, uint32_t block, size_t limit, size_t max_line,
		      size_t max_requests, struct workload *t, char *err, size_t errlen)
{
	FILE *f = fileio_open(path, err, errlen);
	struct wl_line w = {.path = path, .err = err, .errlen = errlen};
	char *line = NULL;
	size_t lcap = 0;
	ssize_t len;
	uint64_t default_iso = proto_ref_isolation_id("default", 7);

	if (f == NULL)
		return -1;
	while ((limit == 0 || t->n < limit) && (len = fileio_getline(&line, &lcap, max_line, f)) != -1) {
		struct wl_req q = {0};
		int rc;

		w.lineno++;
		if (wl_stop != NULL && (w.lineno % WL_STOP_EVERY == 0 || len > (64 << 10)) && wl_stop()) {
			line_fail(&w, "stopped (a signal) before the end");
			free(line);
			fclose(f);
			workload_free(t);
			errno = EINTR;
			return -1;
		}
		rc = check_line(&w, line, len, max_line);
		if (rc == 1)
			continue;
		if (rc == 0 && t->n == max_requests)
			rc = line_fail(&w, "more than %zu requests (--limit reads fewer)", max_requests);
		if (rc == 0)
			rc = read_request(&w, line, block, default_iso, &q);
		if (rc == 0)
			arrival_note(t, &q, w.lineno);
		if (rc == 0)
			rc = workload_push(t, &q);
		if (rc == 0)
			continue;
		if (rc == -ENOMEM)
			line_fail(&w, "out of memory");
		/* Nothing half-loaded stays behind: this line's arrays, and the rest. */
		free(q.tokens);
		free(q.ids);
		free(line);
		fclose(f);
		workload_free(t);
		return -1;
	}
	free(line);
	fclose(f);
	if (t->n == 0) {
		snprintf(err, errlen, "%s: no requests", path);
		return -1;
	}
	return 0;
}

/* The built-in workload (workload.h); answers are workload_answer_token(). */
struct chat {
	uint32_t *tok;
	uint32_t n;
	uint64_t iso;
	uint32_t answer;
};

static uint64_t gen_rng;

static uint32_t
grand(uint32_t n)
{
	gen_rng ^= gen_rng << 13;
	gen_rng ^= gen_rng >> 7;
	gen_rng ^= gen_rng << 17;
	return (uint32_t)(gen_rng % n);
}

int
workload_generate(size_t n, struct workload *t)
{
	return workload_generate_docs(n, 0, t);
}

int
workload_generate_docs(size_t n, uint32_t documents, struct workload *t)
{
	enum { ORGS = 8, CHATS = 64 };
	static uint32_t sys[ORGS][2][3000];
	static uint32_t syslen[ORGS][2];
	struct chat chats[CHATS] = {{0}};
	uint64_t ts = 0;
	size_t i;
	unsigned int o, k;

	gen_rng = 0x5eed;

	for (o = 0; o < ORGS; o++)
		for (k = 0; k < 2; k++) {
			syslen[o][k] = 500 + grand(2500);
			for (i = 0; i < syslen[o][k]; i++)
				sys[o][k][i] = 1000000 * (o + 1) + 1000 * k + (uint32_t)i;
		}
	t->cap = n;
	t->r = calloc(n, sizeof(*t->r));
	if (t->r == NULL)
		return -1;
	for (i = 0; i < n; i++) {
		struct wl_req *q = &t->r[i];
		uint32_t kind = grand(10), c = grand(CHATS), msg = 50 + grand(350), j;

		ts += grand(400);
		q->ts_ms = ts;
		q->first_mm = UINT32_MAX;
		q->out = 50 + grand(250);
		if (documents > 0 && kind <= 5) {
			/* A document of the library: its length and tokens are its own. */
			uint32_t d = grand(documents);
			uint64_t mix = (uint64_t)(d + 1) * 0x9E3779B97F4A7C15ull;

			q->n = 5000 + (uint32_t)((mix >> 33) % 15000);
			q->tokens = malloc(sizeof(uint32_t) * q->n);
			for (j = 0; j < q->n; j++)
				q->tokens[j] = 0x80000000u | (uint32_t)(d * 20011 + j);
			q->iso = proto_ref_isolation_id("org", 3) + d % ORGS;
			q->allowed = q->n;
		} else if (documents == 0 && kind == 0) {
			/* A one-off document. */
			o = grand(ORGS);
			q->n = 5000 + grand(15000);
			q->tokens = malloc(sizeof(uint32_t) * q->n);
			for (j = 0; j < q->n; j++)
				q->tokens[j] = 0x80000000u | (uint32_t)(i * 20011 + j);
			q->iso = proto_ref_isolation_id("org", 3) + o;
			q->allowed = q->n;
		} else if ((documents > 0 ? kind == 6 : kind <= 3) || chats[c].tok == NULL) {
			/* A new chat in slot c. */
			o = grand(ORGS);
			k = grand(2);
			free(chats[c].tok);
			chats[c].n = syslen[o][k] + msg;
			chats[c].tok = malloc(sizeof(uint32_t) * chats[c].n);
			memcpy(chats[c].tok, sys[o][k], sizeof(uint32_t) * syslen[o][k]);
			for (j = syslen[o][k]; j < chats[c].n; j++)
				chats[c].tok[j] = 0x40000000u | (uint32_t)(i * 1009 + j);
			chats[c].iso = proto_ref_isolation_id("org", 3) + o;
			goto emit;
		} else {
			/* The chat goes on: its answer, then a new message. */
			struct chat *ch = &chats[c];
			uint32_t n0 = ch->n + ch->answer;

			ch->tok = realloc(ch->tok, sizeof(uint32_t) * (n0 + msg));
			for (j = ch->n; j < n0; j++)
				ch->tok[j] = workload_answer_token(j);
			for (j = n0; j < n0 + msg; j++)
				ch->tok[j] = 0x40000000u | (uint32_t)(i * 1009 + j);
			q->ans_at = ch->n;
			q->ans_len = ch->answer;
			ch->n = n0 + msg;
emit:
			q->n = chats[c].n;
			q->tokens = malloc(sizeof(uint32_t) * q->n);
			memcpy(q->tokens, chats[c].tok, sizeof(uint32_t) * q->n);
			q->iso = chats[c].iso;
			q->allowed = q->n + q->out; /* the answer may be cached */
			chats[c].answer = q->out;
			if (chats[c].n > 60000) {
				free(chats[c].tok);
				chats[c].tok = NULL;
			}
		}
		t->tokens += q->n;
	}
	t->n = n;
	for (k = 0; k < CHATS; k++)
		free(chats[k].tok);
	return 0;
}

size_t
workload_mark_multimodal(struct workload *t, uint32_t every, uint32_t len)
{
	size_t i, n = 0;

	for (i = 0; every && i < t->n; i++)
		if ((i + 1) % every == 0 && t->r[i].n > len) {
			t->r[i].first_mm = t->r[i].n - len;
			n++;
		}
	return n;
}

/* splitmix64's finalizer: a well-mixed 64-bit function of its input. */
static uint64_t
mix64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

uint32_t
workload_spec_accepted(uint64_t seed, uint64_t req, uint32_t pos, uint32_t k, double reject)
{
	uint32_t i;

	for (i = 0; i < k; i++) {
		uint64_t h = mix64(seed ^ mix64(req * 0x9e3779b97f4a7c15ull + pos + i));

		/* The top 53 bits as a uniform number in [0, 1). */
		if ((double)(h >> 11) * 0x1.0p-53 < reject)
			break;
	}
	return i;
}

void
workload_free(struct workload *t)
{
	size_t i;

	for (i = 0; i < t->n; i++) {
		free(t->r[i].tokens);
		free(t->r[i].ids);
	}
	free(t->r);
	memset(t, 0, sizeof(*t));
}

/* A uniform draw in (0, 1] from a splitmix64 state: its log is finite. */
static double
unit_draw(uint64_t *x)
{
	uint64_t z = (*x += 0x9E3779B97F4A7C15ull);

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	z ^= z >> 31;
	return ((double)(z >> 11) + 1.0) / 9007199254740992.0;
}

int
workload_arrivals(const struct workload *w, size_t n, double scale, double rate, uint64_t seed,
		  uint64_t *out_ns, char *err, size_t errlen)
{
	double t = 0;
	size_t i;

	if (n > w->n)
		n = w->n;
	if (rate == 0 && w->ts_missing_line != 0) {
		snprintf(err, errlen, "line %lu has no timestamp (arrivals at the trace's times need "
			 "one on every line)", w->ts_missing_line);
		return -1;
	}
	if (rate == 0 && w->ts_back_line != 0) {
		snprintf(err, errlen, "line %lu's timestamp is earlier than the line's before it "
			 "(arrivals are replayed in the trace's order, never reordered)",
			 w->ts_back_line);
		return -1;
	}
	if (!(rate >= 0) || !(scale > 0)) {
		snprintf(err, errlen, "a rate of %g or a scale of %g", rate, scale);
		return -1;
	}
	for (i = 0; i < n; i++) {
		if (rate > 0)
			t += i == 0 ? 0 : -log(unit_draw(&seed)) / rate * 1e9;
		else
			t = (double)(w->r[i].ts_ms - w->r[0].ts_ms) * scale * 1e6;
		if (!(t <= (double)WL_MAX_ARRIVAL_NS)) {
			/* %.9g: 86,400.0001 s is not printed as 86400, a day. */
			snprintf(err, errlen,
				 "request %zu would arrive %.9g s after the first: more than "
				 "a day",
				 i + 1, t / 1e9);
			return -1;
		}
		out_ns[i] = (uint64_t)t;
	}
	return 0;
}
