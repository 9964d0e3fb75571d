/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Reading a configuration file (config_priv.h): only a regular file, opened
 * without blocking, parsed from the same open file; what libconfig would
 * misreport checked in the text first (a byte-order mark, a number too
 * large, @include); errors as "FILE:LINE: KEY: why", with the key libconfig
 * leaves out of a duplicate; and keys nobody asked for refused with the
 * nearest known one.
 */
#include "config_priv.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fileio.h"

config_setting_t *
cfg_member(struct ctx *c, const config_setting_t *g, const char *name)
{
	if (g == NULL)
		return NULL;
	if (c->nseen < SEEN_MAX) {
		c->seen[c->nseen].g = g;
		c->seen[c->nseen++].name = name;
	}
	return config_setting_get_member(g, name);
}

/* "shard.caches.[0].buffers" for a setting (and a child name, or NULL). */
static void
key_of(const config_setting_t *s, const char *child, char *out, size_t n)
{
	const config_setting_t *chain[32];
	int depth = 0, i;
	size_t len = 0;

	out[0] = '\0';
	for (; s != NULL && config_setting_parent(s) != NULL && depth < 32;
	     s = config_setting_parent(s))
		chain[depth++] = s;
	for (i = depth - 1; i >= 0; i--) {
		const char *name = config_setting_name(chain[i]);

		if (name != NULL)
			len += (size_t)snprintf(out + len, len < n ? n - len : 0, "%s%s", len ? "." : "",
						name);
		else
			len += (size_t)snprintf(out + len, len < n ? n - len : 0, "%s[%d]",
						len ? "." : "", config_setting_index(chain[i]));
	}
	if (child != NULL)
		snprintf(out + len, len < n ? n - len : 0, "%s%s", len ? "." : "", child);
}

int
kvss_cfg_vfail(const char *file, char *err, size_t errlen, const config_setting_t *s,
	       const char *child, const char *fmt, va_list ap)
{
	const config_setting_t *at = s;
	char key[256], msg[256];

	if (child != NULL && s != NULL && config_setting_get_member(s, child) != NULL)
		at = config_setting_get_member(s, child);
	key_of(s, child, key, sizeof(key));
	vsnprintf(msg, sizeof(msg), fmt, ap);
	if (at != NULL && config_setting_source_line(at) > 0)
		snprintf(err, errlen, "%s:%d: %s: %s", file, (int)config_setting_source_line(at),
			 key[0] ? key : "(top)", msg);
	else
		snprintf(err, errlen, "%s: %s: %s", file, key[0] ? key : "(top)", msg);
	return -1;
}

int
cfg_fail(struct ctx *c, const config_setting_t *s, const char *child, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	kvss_cfg_vfail(c->path, c->err, c->errlen, s, child, fmt, ap);
	va_end(ap);
	return -1;
}

/*
 * A number libconfig would misread, outside quotes and comments on
 * @p line: a run of 20 or more digits (99999999999999999999 reads as -1),
 * or a decimal integer past 32 bits without its L (libconfig 1.5 keeps
 * the low 32 bits: 4296967296 reads as 2000000). Never read silently
 * wrong: refused, saying how to write it.
 */
static int
long_number(const char *line, char *err, size_t errlen, const char *path, unsigned int n)
{
	const char *p = line;
	bool quoted = false;

	for (; *p != '\0'; p++) {
		if (*p == '"')
			quoted = !quoted;
		if (quoted)
			continue;
		if (*p == '#' || (p[0] == '/' && (p[1] == '/' || p[1] == '*')))
			return 0;
		if (*p >= '0' && *p <= '9' && (p == line || !(p[-1] == '.' || p[-1] == '_' ||
							       (p[-1] >= 'a' && p[-1] <= 'z') ||
							       (p[-1] >= 'A' && p[-1] <= 'Z') ||
							       (p[-1] >= '0' && p[-1] <= '9')))) {
			size_t k = strspn(p, "0123456789");

			if (k >= 20) {
				snprintf(err, errlen, "%s:%u: %.*s is too large for a number (at most "
						      "19 digits)", path, n, (int)k, p);
				return -1;
			}
			if (p[k] != '.' && p[k] != 'e' && p[k] != 'E' && p[k] != 'L' &&
			    !(k > 1 && p[0] == '0') &&
			    strtoull(p, NULL, 10) > (p > line && p[-1] == '-' ? 2147483648ull : 2147483647ull)) {
				snprintf(err, errlen, "%s:%u: %.*s does not fit libconfig's 32-bit integers, "
						      "which would read it wrong: write %.*sL", path, n, (int)k, p,
					 (int)k, p);
				return -1;
			}
			p += k - 1;
		}
	}
	return 0;
}

/*
 * The name set twice on line @p n of @p path (libconfig's duplicate error
 * names no key): a name set twice on that line, else its first. 0, or -1.
 */
static int
duplicate_on_line(const char *path, int n, char *key, size_t cap)
{
	char line[4096], names[16][64];
	unsigned int nn = 0, i, j, pick;
	const char *p;
	FILE *f;
	int at = 0;

	f = fopen(path, "r");
	if (f == NULL)
		return -1;
	while (at < n && fgets(line, sizeof(line), f) != NULL)
		at++;
	fclose(f);
	if (at != n)
		return -1;
	for (p = line; *p != '\0' && nn < 16;) {
		size_t k = strspn(p, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_0123456789");
		const char *q = p + k;

		while (*q == ' ' || *q == '\t')
			q++;
		if (k > 0 && k < 64 && !(*p >= '0' && *p <= '9') && (*q == '=' || *q == ':')) {
			memcpy(names[nn], p, k);
			names[nn++][k] = '\0';
		}
		p += k ? k : 1;
	}
	if (nn == 0)
		return -1;
	/* The name set twice on the line, else its first. */
	for (pick = 0, i = 0; i < nn && pick == 0; i++)
		for (j = i + 1; j < nn; j++)
			if (strcmp(names[i], names[j]) == 0) {
				pick = i + 1;
				break;
			}
	i = pick ? pick - 1 : 0;
	j = (unsigned int)strlen(names[i]);
	if (j >= cap)
		j = (unsigned int)cap - 1;
	memcpy(key, names[i], j);
	key[j] = '\0';
	return 0;
}

int
kvss_cfg_read(struct config_t *lc, const char *path, char *err, size_t errlen)
{
	char line[4096];
	size_t total = 0;
	unsigned int n = 0;
	int at_start = 1, rc;
	FILE *f;

	/* Not blocking on a FIFO, and only a regular file (fileio.h). */
	f = fileio_open(path, err, errlen);
	if (f == NULL)
		return -1;
	while (fgets(line, sizeof(line), f) != NULL) {
		const char *p = line;
		size_t len = strlen(line);

		/* A bound on what a parse takes (memory, and time a signal
		 * waits for): real configurations are a few kilobytes. */
		total += len;
		if (total > KVSS_CFG_MAX_BYTES) {
			fclose(f);
			snprintf(err, errlen, "%s: over %u MiB: not a configuration", path,
				 KVSS_CFG_MAX_BYTES >> 20);
			return -1;
		}

		if (n == 0 && at_start && (unsigned char)line[0] == 0xef &&
		    (unsigned char)line[1] == 0xbb && (unsigned char)line[2] == 0xbf) {
			fclose(f);
			snprintf(err, errlen, "%s:1: starts with a UTF-8 byte-order mark: save the file "
					      "without it", path);
			return -1;
		}
		if (at_start && long_number(line, err, errlen, path, n + 1) != 0) {
			fclose(f);
			return -1;
		}
		if (at_start) {
			n++;
			p += strspn(p, " \t\r\f\v");
			if (strncmp(p, "@include", 8) == 0) {
				fclose(f);
				snprintf(err, errlen, "%s:%u: @include: not supported (one file)", path,
					 n);
				return -1;
			}
		}
		at_start = len > 0 && line[len - 1] == '\n';
	}
	/* The same open file, read again: never another file by the same name. */
	rewind(f);
	rc = config_read(lc, f);
	fclose(f);
	if (rc != CONFIG_TRUE) {
		char key[64];

		/* libconfig does not say which name: the line does. */
		if (strcmp(config_error_text(lc), "duplicate setting name") == 0 &&
		    duplicate_on_line(path, config_error_line(lc), key, sizeof(key)) == 0)
			snprintf(err, errlen, "%s:%d: duplicate setting name '%s'", path,
				 config_error_line(lc), key);
		else
			snprintf(err, errlen, "%s:%d: %s", path, config_error_line(lc),
				 config_error_text(lc));
		return -1;
	}
	return 0;
}


/* Edit distance of @p a and @p b (both short keys), capped at 9. */
static unsigned int
distance(const char *a, const char *b)
{
	unsigned int la = (unsigned int)strlen(a), lb = (unsigned int)strlen(b), i, j;
	unsigned int row[64], prev, t;

	if (la >= 63 || lb >= 63)
		return 9;
	for (j = 0; j <= lb; j++)
		row[j] = j;
	for (i = 1; i <= la; i++) {
		prev = row[0];
		row[0] = i;
		for (j = 1; j <= lb; j++) {
			t = row[j];
			row[j] = a[i - 1] == b[j - 1] ? prev : 1 + (prev < row[j] ? prev : row[j]);
			if (row[j - 1] + 1 < row[j])
				row[j] = row[j - 1] + 1;
			prev = t;
		}
	}
	return row[lb] < 9 ? row[lb] : 9;
}

static bool
seen(const struct ctx *c, const config_setting_t *g, const char *name)
{
	unsigned int i;

	for (i = 0; i < c->nseen; i++)
		if (c->seen[i].g == g && (name == NULL || strcmp(c->seen[i].name, name) == 0))
			return true;
	return false;
}

/*
 * A required key missing from @p g: when a key there not asked for is
 * within a typo of it (idd for id), the typo is what to fix, and said so.
 */
int
cfg_missing(struct ctx *c, const config_setting_t *g, const char *name, const char *what)
{
	unsigned int lim = strlen(name) >= 4 ? 2 : 1;
	int i, n = g != NULL ? config_setting_length(g) : 0;

	for (i = 0; i < n; i++) {
		const char *e = config_setting_name(config_setting_get_elem(g, (unsigned int)i));

		if (e != NULL && strcmp(e, name) != 0 && !seen(c, g, e) && distance(e, name) <= lim)
			return cfg_fail(c, g, e, "unknown key (did you mean %s?)", name);
	}
	return cfg_fail(c, g, name, "missing%s%s", what[0] != '\0' ? " " : "", what);
}

/*
 * Every key in the groups the loader read is one it asked for: a misspelt
 * key (batch_timout_ms) is an error naming the nearest known one, not a
 * silent default; a section given as a value (wafer = 5) is refused.
 */
int
cfg_check_keys(struct ctx *c, const config_setting_t *g)
{
	/* Sections of a role this configuration does not run are not read. */
	static const char *const sections[] = {"shard", "driver", NULL};
	int i, n = config_setting_length(g);

	for (i = 0; i < n; i++) {
		const config_setting_t *e = config_setting_get_elem(g, (unsigned int)i);
		const char *name = config_setting_name(e);
		unsigned int k, best = 9;
		const char *hint = NULL;

		if (name != NULL && !seen(c, g, name)) {
			for (k = 0; !c->no_roles && config_setting_parent(g) == NULL && sections[k] != NULL;
			     k++)
				if (strcmp(name, sections[k]) == 0)
					break;
			if (!c->no_roles && config_setting_parent(g) == NULL && sections[k] != NULL)
				continue;
			for (k = 0; k < c->nseen; k++) {
				unsigned int d;

				if (c->seen[k].g != g)
					continue;
				d = distance(name, c->seen[k].name);
				if (d < best) {
					best = d;
					hint = c->seen[k].name;
				}
			}
			if (hint != NULL && best <= 3)
				return cfg_fail(c, g, name, "unknown key (did you mean %s?)", hint);
			return cfg_fail(c, g, name, "unknown key");
		}
		if (config_setting_is_group(e) || config_setting_is_list(e)) {
			if (cfg_check_keys(c, e) != 0)
				return -1;
		} else if (name != NULL && seen(c, e, NULL)) {
			return cfg_fail(c, g, name, "want a group { ... }, not a value");
		}
	}
	return 0;
}
