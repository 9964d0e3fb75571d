/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Organization keys (orgkeys.h): the store's text read strictly, kept as
 * a sorted array (a lookup per slice is a binary search), written so that
 * the key it replaces is gone from the file system's view and from the
 * replaced file's blocks.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/rand.h>

#include "orgkeys.h"

struct seal_org {
	uint64_t org;
	uint32_t line; /* where the file named it (0: not read from one) */
	struct seal_key k;
};

struct seal_orgs {
	struct seal_key dflt;
	uint32_t dflt_line;
	struct seal_org *v; /* ascending org */
	uint32_t n, cap;
	/* The file it was read from, to tell when that file is replaced. */
	bool from_file;
	struct stat st;
};

bool
seal_file_same(const struct stat *a, const struct stat *b)
{
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
	       a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec &&
	       a->st_ctim.tv_sec == b->st_ctim.tv_sec && a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

/* 64 hexadecimal digits that are the whole of @p s (@p n bytes) into @p k. */
static int
parse_key(const char *s, size_t n, struct seal_key *k, const char **why)
{
	uint8_t b[SEAL_KEY_LEN], any = 0;
	size_t i;

	if (n != 2 * SEAL_KEY_LEN) {
		*why = "a key is 64 hexadecimal digits";
		return -1;
	}
	for (i = 0; i < SEAL_KEY_LEN; i++) {
		int hi = seal_hexval((unsigned char)s[2 * i]), lo = seal_hexval((unsigned char)s[2 * i + 1]);

		if (hi < 0 || lo < 0) {
			OPENSSL_cleanse(b, sizeof(b));
			*why = "a key is 64 hexadecimal digits";
			return -1;
		}
		b[i] = (uint8_t)(hi << 4 | lo);
		any |= b[i];
	}
	if (any == 0) {
		*why = "a key of zeros is no secret";
		return -1;
	}
	i = (size_t)seal_key_from(k, b);
	OPENSSL_cleanse(b, sizeof(b));
	if (i != 0) {
		*why = "the key's id could not be derived (libcrypto)";
		return -1;
	}
	return 0;
}

/* "0x" and 1 to 16 hexadecimal digits, the whole of @p s. */
static int
parse_org(const char *s, size_t n, uint64_t *org)
{
	uint64_t v = 0;
	size_t i;

	if (n < 3 || n > 18 || s[0] != '0' || (s[1] != 'x' && s[1] != 'X'))
		return -1;
	for (i = 2; i < n; i++) {
		int d = seal_hexval((unsigned char)s[i]);

		if (d < 0)
			return -1;
		v = v << 4 | (uint64_t)d;
	}
	*org = v;
	return 0;
}

/* A key's bytes and where the file gave it, to find a key given twice. */
struct key_at {
	const uint8_t *key;
	uint32_t line;
};

static int
by_key(const void *a, const void *b)
{
	return memcmp(((const struct key_at *)a)->key, ((const struct key_at *)b)->key,
		      SEAL_KEY_LEN);
}

/*
 * Two lines with one key (copied by hand): a reset that replaces one
 * leaves the other, and whoever holds the store still opens what the key
 * sealed. 0, or -1 with @p err naming both lines.
 */
static int
keys_apart(const struct seal_orgs *o, const char *name, char *err, size_t errlen)
{
	struct key_at *k = calloc((size_t)o->n + 1, sizeof(*k));
	uint32_t i;
	int rc = 0;

	if (k == NULL) {
		snprintf(err, errlen, "%s: no memory", name);
		return -1;
	}
	k[0] = (struct key_at){o->dflt.key, o->dflt_line};
	for (i = 0; i < o->n; i++)
		k[i + 1] = (struct key_at){o->v[i].k.key, o->v[i].line};
	qsort(k, (size_t)o->n + 1, sizeof(*k), by_key);
	for (i = 1; i <= o->n && rc == 0; i++)
		if (memcmp(k[i - 1].key, k[i].key, SEAL_KEY_LEN) == 0) {
			snprintf(err, errlen, "%s: line %u: the key of line %u again: a reset of one "
				 "would not retire the other's (each key is its own)", name,
				 k[i].line > k[i - 1].line ? k[i].line : k[i - 1].line,
				 k[i].line > k[i - 1].line ? k[i - 1].line : k[i].line);
			rc = -1;
		}
	free(k); /* pointers only: no key in it */
	return rc;
}

static int
by_org(const void *a, const void *b)
{
	const struct seal_org *x = a, *y = b;

	return x->org < y->org ? -1 : x->org > y->org;
}

static int
grow(struct seal_orgs *o)
{
	struct seal_org *v;
	uint32_t cap;

	if (o->n < o->cap)
		return 0;
	if (o->cap >= SEAL_ORGS_MAX)
		return -1;
	cap = o->cap == 0 ? 16 : o->cap * 2;
	if (cap > SEAL_ORGS_MAX)
		cap = SEAL_ORGS_MAX;
	/* A new array, the old one wiped: realloc would leave keys behind. */
	v = calloc(cap, sizeof(*v));
	if (v == NULL)
		return -1;
	if (o->n > 0)
		memcpy(v, o->v, o->n * sizeof(*v));
	if (o->v != NULL) {
		OPENSSL_cleanse(o->v, o->cap * sizeof(*o->v));
		free(o->v);
	}
	o->v = v;
	o->cap = cap;
	return 0;
}

/* The `end N` line's count: 0, or -1 when it is not one. */
static int
parse_count(const char *s, size_t n, uint32_t *count)
{
	uint64_t v = 0;
	size_t i;

	if (n == 0 || n > 6 || (n > 1 && s[0] == '0'))
		return -1;
	for (i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (uint64_t)(s[i] - '0');
	}
	if (v > SEAL_ORGS_MAX)
		return -1;
	*count = (uint32_t)v;
	return 0;
}

/*
 * One line (without its newline), number @p line: 0, or -1 with @p err.
 * @p ended says an `end` line was read (and its count into @p count).
 */
static int
parse_line(struct seal_orgs *o, const char *s, size_t n, uint32_t line, bool *ended,
	   uint32_t *count, const char *name, char *err, size_t errlen)
{
	const char *why = NULL;
	const char *sp;

	if (n == 0 || s[0] == '#')
		return 0;
	if (memchr(s, '\r', n) != NULL)
		why = "a carriage return (lines end with a newline only)";
	else if (*ended)
		why = "a line after the 'end' line (it comes last)";
	else if (n > 3 && memcmp(s, "end ", 4) == 0) {
		if (parse_count(s + 4, n - 4, count) != 0)
			why = "'end' and the number of organization lines (0 to 65536)";
		else if (*count != o->n)
			why = "the 'end' line's count is not the number of organization lines above it";
		else
			*ended = true;
	} else if (n > 7 && memcmp(s, "default ", 8) == 0) {
		if (o->dflt.loaded)
			why = "a second default line";
		else if (parse_key(s + 8, n - 8, &o->dflt, &why) == 0)
			o->dflt_line = line;
	} else if (n > 3 && memcmp(s, "org ", 4) == 0) {
		uint64_t org;

		sp = memchr(s + 4, ' ', n - 4);
		if (sp == NULL || parse_org(s + 4, (size_t)(sp - s) - 4, &org) != 0)
			why = "an organization is 0x and 1 to 16 hexadecimal digits, then one space "
			      "and its key";
		else if (grow(o) != 0)
			why = o->cap >= SEAL_ORGS_MAX ? "more organizations than a store holds (65536)"
						      : "no memory";
		else if (parse_key(sp + 1, n - (size_t)(sp + 1 - s), &o->v[o->n].k, &why) == 0) {
			o->v[o->n].org = org;
			o->v[o->n].line = line;
			o->n++;
		}
	} else {
		why = "neither 'default KEY' nor 'org 0xID KEY' nor 'end N' nor a comment";
	}
	if (why == NULL)
		return 0;
	snprintf(err, errlen, "%s: line %u: %s", name, line, why);
	return -1;
}

int
seal_orgs_parse(const char *text, size_t len, const char *name, struct seal_orgs **out,
		char *err, size_t errlen)
{
	struct seal_orgs *o = calloc(1, sizeof(*o));
	uint32_t line = 0, i, count = 0;
	size_t at = 0;
	bool ended = false;

	*out = NULL;
	if (o == NULL) {
		snprintf(err, errlen, "%s: no memory", name);
		goto fail;
	}
	if (len > SEAL_ORGS_FILE_MAX) {
		snprintf(err, errlen, "%s: %zu bytes: a store is at most %u", name, len,
			 SEAL_ORGS_FILE_MAX);
		goto fail;
	}
	if (memchr(text, '\0', len) != NULL) {
		snprintf(err, errlen, "%s: a NUL byte: not a store of keys", name);
		goto fail;
	}
	while (at < len) {
		const char *nl = memchr(text + at, '\n', len - at);
		size_t n = nl != NULL ? (size_t)(nl - (text + at)) : len - at;

		if (parse_line(o, text + at, n, ++line, &ended, &count, name, err, errlen) != 0)
			goto fail;
		at += n + 1;
	}
	if (!o->dflt.loaded) {
		snprintf(err, errlen, "%s: no 'default KEY' line (the key of every organization "
				      "not named)", name);
		goto fail;
	}
	/* Sorted by id; a repeat named by its two lines, the later first. */
	if (o->n > 0)
		qsort(o->v, o->n, sizeof(*o->v), by_org);
	for (i = 1; i < o->n; i++) {
		const struct seal_org *a = &o->v[i - 1], *b = &o->v[i];

		if (a->org == b->org) {
			snprintf(err, errlen, "%s: line %u: organization 0x%" PRIx64
				 " named again (line %u)", name, a->line > b->line ? a->line : b->line,
				 b->org, a->line > b->line ? b->line : a->line);
			goto fail;
		}
	}
	if (keys_apart(o, name, err, errlen) != 0)
		goto fail;
	/* The last line says the store is whole: a copy cut short (still
	 * being written, a disk full) would put the organizations it lost
	 * back on the default key. */
	if (!ended) {
		snprintf(err, errlen, "%s: no 'end N' line at its end: cut short (a copy still "
				      "being written?)", name);
		goto fail;
	}
	*out = o;
	return 0;
fail:
	seal_orgs_free(o);
	return -1;
}

int
seal_orgs_load(const char *path, struct seal_orgs **out, char *err, size_t errlen)
{
	struct stat st;
	char *buf;
	size_t got = 0;
	int fd, rc;

	*out = NULL;
	fd = seal_private_open(path, &st, err, errlen);
	if (fd < 0)
		return -1;
	if (st.st_size > (off_t)SEAL_ORGS_FILE_MAX) {
		snprintf(err, errlen, "%s: %lld bytes: a store is at most %u", path,
			 (long long)st.st_size, SEAL_ORGS_FILE_MAX);
		close(fd);
		return -1;
	}
	/* One byte more than it said, to tell a file that grew. */
	buf = malloc((size_t)st.st_size + 1);
	if (buf == NULL) {
		snprintf(err, errlen, "%s: no memory", path);
		close(fd);
		return -1;
	}
	for (;;) {
		ssize_t n = read(fd, buf + got, (size_t)st.st_size + 1 - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			snprintf(err, errlen, "%s: cannot read: %s", path, strerror(errno));
			OPENSSL_cleanse(buf, got);
			free(buf);
			close(fd);
			return -1;
		}
		if (n == 0 || got + (size_t)n > (size_t)st.st_size)
			break;
		got += (size_t)n;
	}
	close(fd);
	if (got != (size_t)st.st_size) {
		snprintf(err, errlen, "%s: changed while read (%s than the %lld bytes it had): read "
			 "again", path, got < (size_t)st.st_size ? "shorter" : "longer",
			 (long long)st.st_size);
		rc = -1;
	} else {
		rc = seal_orgs_parse(buf, got, path, out, err, errlen);
	}
	OPENSSL_cleanse(buf, (size_t)st.st_size + 1);
	free(buf);
	if (rc == 0) {
		(*out)->from_file = true;
		(*out)->st = st;
	}
	return rc;
}

static int
random_key(struct seal_key *k)
{
	uint8_t b[SEAL_KEY_LEN];
	int rc = RAND_bytes(b, sizeof(b)) == 1 ? seal_key_from(k, b) : -1;

	OPENSSL_cleanse(b, sizeof(b));
	return rc;
}

struct seal_orgs *
seal_orgs_new(void)
{
	struct seal_orgs *o = calloc(1, sizeof(*o));

	if (o != NULL && random_key(&o->dflt) != 0) {
		free(o);
		return NULL;
	}
	return o;
}

/* The index of @p org, or where it would go (@p found says which). */
static uint32_t
find(const struct seal_orgs *o, uint64_t org, bool *found)
{
	uint32_t lo = 0, hi = o->n;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (o->v[mid].org < org)
			lo = mid + 1;
		else
			hi = mid;
	}
	*found = lo < o->n && o->v[lo].org == org;
	return lo;
}

const struct seal_key *
seal_orgs_key(const struct seal_orgs *o, uint64_t org)
{
	bool found;
	uint32_t i = find(o, org, &found);

	return found ? &o->v[i].k : &o->dflt;
}

uint32_t
seal_orgs_count(const struct seal_orgs *o)
{
	return o->n;
}

void
seal_orgs_at(const struct seal_orgs *o, uint32_t i, uint64_t *org, const struct seal_key **k)
{
	*org = o->v[i].org;
	*k = &o->v[i].k;
}

const struct seal_key *
seal_orgs_default(const struct seal_orgs *o)
{
	return &o->dflt;
}

/* A new key for @p org, named from now on. 0 or -1 (nothing changed). */
static int
give_key(struct seal_orgs *o, uint64_t org)
{
	struct seal_key k;
	bool found;
	uint32_t i;

	if (random_key(&k) != 0)
		return -1;
	i = find(o, org, &found);
	if (!found) {
		if (grow(o) != 0) {
			OPENSSL_cleanse(&k, sizeof(k));
			return -1;
		}
		memmove(&o->v[i + 1], &o->v[i], (o->n - i) * sizeof(*o->v));
		o->v[i].org = org;
		o->n++;
	}
	o->v[i].k = k;
	OPENSSL_cleanse(&k, sizeof(k));
	return 0;
}

int
seal_orgs_name(struct seal_orgs *o, uint64_t org)
{
	bool found;

	find(o, org, &found);
	if (found)
		return 1;
	return give_key(o, org);
}

int
seal_orgs_retire(struct seal_orgs *o, bool all, uint64_t org, bool *default_too)
{
	struct seal_key *fresh;
	size_t nfresh, i;
	bool found;

	*default_too = false;
	if (!all) {
		find(o, org, &found);
		if (found)
			return give_key(o, org);
		/* Its slices are under the default key: that is the key to
		 * retire (and every organization not named loses its slices
		 * with it); the organization gets a key of its own. */
		if (o->n >= SEAL_ORGS_MAX)
			return -1;
	}
	/* Every new key made before any is replaced: all or nothing. */
	nfresh = all ? (size_t)o->n + 1 : 1;
	fresh = calloc(nfresh, sizeof(*fresh));
	if (fresh == NULL)
		return -1;
	for (i = 0; i < nfresh; i++)
		if (random_key(&fresh[i]) != 0)
			break;
	if (i < nfresh || (!all && give_key(o, org) != 0)) {
		OPENSSL_cleanse(fresh, nfresh * sizeof(*fresh));
		free(fresh);
		return -1;
	}
	o->dflt = fresh[0];
	for (i = 1; i < nfresh; i++)
		o->v[i - 1].k = fresh[i];
	*default_too = !all;
	OPENSSL_cleanse(fresh, nfresh * sizeof(*fresh));
	free(fresh);
	return 0;
}

static void
hex_key(char *out, const struct seal_key *k)
{
	static const char digits[] = "0123456789abcdef";
	int i;

	for (i = 0; i < SEAL_KEY_LEN; i++) {
		out[2 * i] = digits[k->key[i] >> 4];
		out[2 * i + 1] = digits[k->key[i] & 15];
	}
	out[2 * SEAL_KEY_LEN] = '\0';
}

/* The store's text into a new buffer (its length into @p len); NULL: no memory. */
static char *
format(const struct seal_orgs *o, size_t *len)
{
	static const char head[] = "# kvss organization keys: written by kvss-shared (keys, reset "
				   "--org-keys); docs/SECURITY.md\n";
	size_t cap = sizeof(head) + 8 + 65 + (size_t)o->n * 96 + 16, n;
	char *buf = malloc(cap), hex[2 * SEAL_KEY_LEN + 1];
	uint32_t i;

	if (buf == NULL)
		return NULL;
	hex_key(hex, &o->dflt);
	n = (size_t)snprintf(buf, cap, "%sdefault %s\n", head, hex);
	for (i = 0; i < o->n; i++) {
		hex_key(hex, &o->v[i].k);
		n += (size_t)snprintf(buf + n, cap - n, "org 0x%" PRIx64 " %s\n", o->v[i].org, hex);
	}
	n += (size_t)snprintf(buf + n, cap - n, "end %u\n", o->n);
	OPENSSL_cleanse(hex, sizeof(hex));
	*len = n;
	return buf;
}

static int
write_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Zeros over the whole of the file open at @p fd, synced. */
static int
wipe(int fd)
{
	static const char zeros[4096];
	struct stat st;
	off_t at = 0;

	if (fstat(fd, &st) != 0 || lseek(fd, 0, SEEK_SET) != 0)
		return -1;
	while (at < st.st_size) {
		size_t n = st.st_size - at < (off_t)sizeof(zeros) ? (size_t)(st.st_size - at)
								  : sizeof(zeros);

		if (write_all(fd, zeros, n) != 0)
			return -1;
		at += (off_t)n;
	}
	return fsync(fd);
}

/* May the file @p st describes be replaced and overwritten? false with @p err. */
static bool
replaceable(const char *path, const struct stat *st, const struct seal_orgs *o, char *err,
	    size_t errlen)
{
	if (!S_ISREG(st->st_mode)) {
		snprintf(err, errlen, "%s: not a regular file", path);
	} else if (o->from_file && !seal_file_same(st, &o->st)) {
		snprintf(err, errlen, "%s: changed since it was read (another writer?): read it "
				      "again", path);
	} else if (st->st_nlink > 1) {
		snprintf(err, errlen, "%s: %lu names for one file (hard links; a %s.new.* left by a "
				      "write that stopped is one): overwriting it would zero them all; "
				      "give each replica a copy", path, (unsigned long)st->st_nlink, path);
	} else {
		return true;
	}
	return false;
}

/*
 * The store being replaced, opened to be overwritten once nobody finds it
 * by its name: the very file @p o was read from (else another writer came
 * between: refused), with no other name (its zeros would reach them too).
 * The descriptor, -2 when there is none (a new store), -1 with @p err.
 */
static int
open_replaced(const char *path, const struct seal_orgs *o, mode_t *made_writable, char *err,
	      size_t errlen)
{
	struct stat st, was;
	int fd = open(path, O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	bool checked = false;

	if (fd < 0 && errno == EACCES) {
		/* A 0400 store: checked as below first, then made writable
		 * through a descriptor (never a name a link could redirect);
		 * the file then opened for writing must be that one. */
		int ro = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);

		if (ro >= 0 && (fstat(ro, &was) != 0 || !replaceable(path, &was, o, err, errlen))) {
			close(ro);
			return -1;
		}
		if (ro >= 0 && fchmod(ro, S_IRUSR | S_IWUSR) == 0) {
			*made_writable = was.st_mode & 07777; /* given back if nothing is replaced */
			fd = open(path, O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		}
		if (ro >= 0)
			close(ro);
		if (fd < 0 && ro >= 0)
			errno = EACCES;
		checked = fd >= 0;
	}
	if (fd < 0 && errno == ENOENT && !o->from_file)
		return -2;
	if (fd < 0) {
		snprintf(err, errlen, "%s: cannot open it to overwrite it once replaced: %s", path,
			 strerror(errno));
		return -1;
	}
	if (fstat(fd, &st) == 0 &&
	    (checked ? st.st_dev == was.st_dev && st.st_ino == was.st_ino
		     : replaceable(path, &st, o, err, errlen)))
		return fd;
	if (checked)
		snprintf(err, errlen, "%s: replaced while it was made writable: read it again", path);
	if (*made_writable != 0)
		fchmod(fd, *made_writable);
	close(fd);
	return -1;
}

/* The replaced file, when nothing replaced it after all: its mode as it was, closed. */
static void
give_back(int old, mode_t mode)
{
	if (old < 0)
		return;
	/* Should that fail, its mode stays 0600: still no access for others. */
	if (mode != 0)
		(void)!fchmod(old, mode);
	close(old);
}

int
seal_orgs_write(const char *path, const struct seal_orgs *o, bool create, char *err,
		size_t errlen)
{
	char tmp[4096], dir[4096];
	size_t len;
	char *text;
	int fd, old = -2, dfd, rc;
	mode_t was_mode = 0; /* a 0400 store made writable: its mode, given back on failure */

	if (snprintf(tmp, sizeof(tmp), "%s.new.XXXXXX", path) >= (int)sizeof(tmp) ||
	    snprintf(dir, sizeof(dir), "%s", path) >= (int)sizeof(dir)) {
		snprintf(err, errlen, "%s: name too long", path);
		return -1;
	}
	if (!create) {
		old = open_replaced(path, o, &was_mode, err, errlen);
		if (old == -1)
			return -1;
	}
	text = format(o, &len);
	if (text == NULL) {
		snprintf(err, errlen, "%s: no memory", path);
		give_back(old, was_mode);
		return -1;
	}
	fd = mkstemp(tmp);
	/* 0600 whatever the umask (mkstemp's mode is under it). */
	rc = fd >= 0 && fchmod(fd, S_IRUSR | S_IWUSR) == 0 && write_all(fd, text, len) == 0 &&
			     fsync(fd) == 0
		     ? 0
		     : -1;
	OPENSSL_cleanse(text, len);
	free(text);
	if (fd < 0 || close(fd) != 0 || rc != 0) {
		snprintf(err, errlen, "%s: writing a file beside it: %s", path, strerror(errno));
		if (fd >= 0)
			unlink(tmp);
		give_back(old, was_mode);
		return -1;
	}
	/* A new store never takes the place of a file made meanwhile. */
	rc = create ? link(tmp, path) : rename(tmp, path);
	if (rc != 0) {
		snprintf(err, errlen, "%s: %s: %s", path, create ? "making it" : "renaming the new file over it",
			 strerror(errno));
		unlink(tmp);
		give_back(old, was_mode);
		return -1;
	}
	/* From here the new store is in place: what fails is said, and
	 * returned as 1, the rest still done. */
	rc = 0;
	if (create && unlink(tmp) != 0) {
		snprintf(err, errlen, "%s: in place, but %s, a second name of it, could not be "
				      "removed (remove it: a store with two names is not written "
				      "again): %s", path, tmp, strerror(errno));
		rc = 1;
	}
	dfd = open(dirname(dir), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if ((dfd < 0 || fsync(dfd) != 0) && rc == 0) {
		snprintf(err, errlen, "%s: in place, but its directory could not be synced: %s",
			 path, strerror(errno));
		rc = 1;
	}
	if (dfd >= 0)
		close(dfd);
	if (old >= 0) {
		if (wipe(old) != 0 && rc == 0) {
			snprintf(err, errlen, "%s: in place, but the file it replaced could not be "
					      "overwritten: %s", path, strerror(errno));
			rc = 1;
		}
		close(old);
	}
	return rc;
}

bool
seal_orgs_changed(const char *path, const struct seal_orgs *o)
{
	struct stat st;

	return !o->from_file || lstat(path, &st) != 0 || !seal_file_same(&st, &o->st);
}

void
seal_orgs_free(struct seal_orgs *o)
{
	if (o == NULL)
		return;
	if (o->v != NULL) {
		OPENSSL_cleanse(o->v, o->cap * sizeof(*o->v));
		free(o->v);
	}
	OPENSSL_cleanse(o, sizeof(*o));
	free(o);
	seal_forget(); /* what threads keep of its keys */
}

int
seal_ring_key(const struct seal_ring *r, uint64_t org, struct seal_key *out)
{
	if (r->orgs == NULL) {
		*out = r->cur;
		return r->cur.loaded ? 0 : -1;
	}
	return seal_key_with_org(&r->cur, seal_orgs_key(r->orgs, org), out);
}

int
seal_ring_find(const struct seal_ring *r, uint64_t org, uint32_t id, struct seal_key *out)
{
	const struct seal_key *master[2] = {&r->cur, &r->old};
	unsigned int i;

	for (i = 0; i < 2; i++) {
		if (!master[i]->loaded)
			continue;
		if (r->orgs == NULL) {
			*out = *master[i];
		} else if (seal_key_with_org(master[i], seal_orgs_key(r->orgs, org), out) != 0) {
			OPENSSL_cleanse(out, sizeof(*out));
			return -1;
		}
		if (out->id == id)
			return 0;
	}
	OPENSSL_cleanse(out, sizeof(*out));
	return 1;
}
