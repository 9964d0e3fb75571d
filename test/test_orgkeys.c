/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Organization keys (lib/seal/orgkeys.c; docs/SECURITY.md, "A reset that
 * retires a key"; PROTOCOL.md section 10, "Sealed slices"): the mixed key
 * against values another implementation computed (Python's hmac, RFC
 * 5869); the store's text read strictly, every hostile form refused naming
 * its line; the file checked as the master key file is; a key retired
 * leaving the others as they were, and the file it replaced overwritten;
 * and what a reset is for: a slice sealed under a retired key is refused by
 * every ring that holds the new store, another organization's still opens.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "orgkeys.h"
#include "shared_obj.h"
#include "seal_fixture.h"
#include "shared_seal.h"
#include "tmpdir.h"

#define FU 1700000000000000000ULL

Test(orgkeys, the_mixed_key_derives_as_the_document_says)
{
	struct seal_key m = doc_key(0), o = doc_key(0x20), mixed, again;
	uint8_t key[32], want[32];

	cr_assert_eq(seal_key_with_org(&m, &o, &mixed), 0);
	cr_assert_eq(mixed.id, 0xfd929a7du, "the pair's id: %08x", mixed.id);
	cr_assert_neq(mixed.id, m.id, "the master key's id");
	cr_assert_neq(mixed.id, o.id, "the organization key's id");
	cr_assert_eq(seal_slice_key(&mixed, 0x3333, 0x870985c5d46bfa18ull, 3, 1, key), 0);
	unhex("a369e95e4bfde626a7c7858af616a3c584db7dfede3fcd1db515bbe2497efb26", want, 32);
	cr_assert_arr_eq(key, want, 32, "the document's slice's key under the pair");
	/* Order matters: the master key first. */
	cr_assert_eq(seal_key_with_org(&o, &m, &again), 0);
	cr_assert_neq(again.id, mixed.id);
	memset(&o, 0, sizeof(o));
	cr_assert_eq(seal_key_with_org(&m, &o, &again), -1, "an organization key not loaded");
}

/* ---- The store's text ---------------------------------------------------- */

static const char K1[] = "1111111111111111111111111111111111111111111111111111111111111111";
static const char K2[] = "2222222222222222222222222222222222222222222222222222222222222222";
static const char K3[] = "3333333333333333333333333333333333333333333333333333333333333333";

static struct seal_orgs *
parse_ok(const char *text)
{
	struct seal_orgs *o;
	char err[256] = "";

	cr_assert_eq(seal_orgs_parse(text, strlen(text), "t", &o, err, sizeof(err)), 0,
		     "refused: %s", err);
	return o;
}

/* @p text (@p len bytes) refused, the message saying "t: line LINE" (0: no line) and @p why. */
static void
refused_n(const char *text, size_t len, unsigned int line, const char *why)
{
	struct seal_orgs *o = (struct seal_orgs *)1;
	char err[256] = "", at[32];

	cr_assert_eq(seal_orgs_parse(text, len, "t", &o, err, sizeof(err)), -1, "accepted: %.80s",
		     text);
	cr_assert_null(o);
	snprintf(at, sizeof(at), line ? "t: line %u: " : "t: ", line);
	cr_assert(strncmp(err, at, strlen(at)) == 0, "not '%s': %s", at, err);
	cr_assert(strstr(err, why) != NULL, "does not say '%s': %s", why, err);
}

static void
refused(const char *text, unsigned int line, const char *why)
{
	refused_n(text, strlen(text), line, why);
}

Test(orgkeys, a_store_is_read_and_looked_up)
{
	char text[512];
	struct seal_orgs *o;
	struct seal_key k1, k2, k3;
	const struct seal_key *k;
	uint64_t org;
	uint8_t b[32];

	snprintf(text, sizeof(text), "# a comment\n\norg 0x20 %s\ndefault %s\norg 0X1f %s\nend 2", K2,
		 K1, K3);
	o = parse_ok(text);
	memset(b, 0x11, 32);
	seal_key_from(&k1, b);
	memset(b, 0x22, 32);
	seal_key_from(&k2, b);
	memset(b, 0x33, 32);
	seal_key_from(&k3, b);
	cr_assert_eq(seal_orgs_default(o)->id, k1.id);
	cr_assert_eq(seal_orgs_key(o, 0x20)->id, k2.id, "organization 0x20: its own");
	cr_assert_eq(seal_orgs_key(o, 0x1f)->id, k3.id, "organization 0x1f: its own");
	cr_assert_eq(seal_orgs_key(o, 0x21)->id, k1.id, "one not named: the default");
	cr_assert_eq(seal_orgs_key(o, 0)->id, k1.id);
	cr_assert_eq(seal_orgs_count(o), 2);
	seal_orgs_at(o, 0, &org, &k);
	cr_assert_eq(org, 0x1f, "ascending");
	seal_orgs_at(o, 1, &org, &k);
	cr_assert_eq(org, 0x20);
	seal_orgs_free(o);
}

Test(orgkeys, hostile_stores_are_refused_naming_the_line)
{
	char t[512];

	refused("", 0, "no 'default KEY' line");
	refused("# only a comment\n", 0, "no 'default KEY' line");
	snprintf(t, sizeof(t), "default %s\ndefault %s\n", K1, K2);
	refused(t, 2, "a second default line");
	snprintf(t, sizeof(t), "default %s\norg 0x5 %s\n\norg 0x05 %s\n", K1, K2, K3);
	refused(t, 4, "organization 0x5 named again (line 2)");
	snprintf(t, sizeof(t), "default %.63s\n", K1);
	refused(t, 1, "a key is 64 hexadecimal digits");
	snprintf(t, sizeof(t), "default %s1\n", K1);
	refused(t, 1, "a key is 64 hexadecimal digits");
	snprintf(t, sizeof(t), "default %.63sg\n", K1);
	refused(t, 1, "a key is 64 hexadecimal digits");
	refused("default 0000000000000000000000000000000000000000000000000000000000000000\n", 1,
		"a key of zeros is no secret");
	snprintf(t, sizeof(t), "default %s\r\n", K1);
	refused(t, 1, "a carriage return");
	snprintf(t, sizeof(t), "default  %s\n", K1);
	refused(t, 1, "a key is 64 hexadecimal digits");
	snprintf(t, sizeof(t), "default %s\norg 5 %s\n", K1, K2);
	refused(t, 2, "an organization is 0x and 1 to 16 hexadecimal digits");
	snprintf(t, sizeof(t), "default %s\norg 0x %s\n", K1, K2);
	refused(t, 2, "an organization is 0x");
	snprintf(t, sizeof(t), "default %s\norg 0x11111111111111111 %s\n", K1, K2);
	refused(t, 2, "an organization is 0x");
	snprintf(t, sizeof(t), "default %s\norg 0x-1 %s\n", K1, K2);
	refused(t, 2, "an organization is 0x");
	snprintf(t, sizeof(t), "default %s\norg 0x1\n", K1);
	refused(t, 2, "an organization is 0x");
	snprintf(t, sizeof(t), "default %s\nDefault %s\n", K1, K2);
	refused(t, 2, "neither 'default KEY' nor 'org 0xID KEY' nor 'end N' nor a comment");
	snprintf(t, sizeof(t), " # indented\ndefault %s\n", K1);
	refused(t, 1, "neither");
	snprintf(t, sizeof(t), "default %s\n", K1);
	t[3] = '\0';
	refused_n(t, strlen(K1) + 9, 0, "a NUL byte");
	/* One key on two lines (copied by hand): a reset of one would not
	 * retire the other's. */
	snprintf(t, sizeof(t), "default %s\norg 0x5 %s\norg 0x6 %s\nend 2\n", K1, K2, K1);
	refused(t, 3, "the key of line 1 again");
	snprintf(t, sizeof(t), "org 0x5 %s\n# x\norg 0x6 %s\ndefault %s\nend 2\n", K2, K2, K1);
	refused(t, 3, "the key of line 1 again");
	/* A store cut short: its organizations would fall back on the default. */
	snprintf(t, sizeof(t), "default %s\norg 0x5 %s\n", K1, K2);
	refused(t, 0, "no 'end N' line at its end: cut short");
	snprintf(t, sizeof(t), "default %s\norg 0x5 %s\nend 2\n", K1, K2);
	refused(t, 3, "the 'end' line's count is not the number of organization lines");
	snprintf(t, sizeof(t), "default %s\nend 0\norg 0x5 %s\n", K1, K2);
	refused(t, 3, "a line after the 'end' line");
	snprintf(t, sizeof(t), "default %s\nend 00\n", K1);
	refused(t, 2, "'end' and the number of organization lines");
	snprintf(t, sizeof(t), "default %s\nend -1\n", K1);
	refused(t, 2, "'end' and the number");
	snprintf(t, sizeof(t), "default %s\nend 0\n\n# after\n", K1);
	seal_orgs_free(parse_ok(t)); /* comments and empty lines after it */
	/* Larger than any store: refused before a line is read. */
	{
		size_t n = SEAL_ORGS_FILE_MAX + 1;
		char *big = malloc(n);

		cr_assert_not_null(big);
		memset(big, '#', n);
		refused_n(big, n, 0, "a store is at most");
		free(big);
	}
}

Test(orgkeys, a_store_holds_at_most_its_limit)
{
	size_t cap = (size_t)(SEAL_ORGS_MAX + 2) * 90, n;
	char *t = malloc(cap);
	struct seal_orgs *o;
	char err[256];
	uint32_t i;
	bool dflt;

	cr_assert_not_null(t);
	n = (size_t)snprintf(t, cap, "default %s\n", K1);
	for (i = 0; i < SEAL_ORGS_MAX; i++) /* a key each (never one twice) */
		n += (size_t)snprintf(t + n, cap - n, "org 0x%x %056x%08x\n", i + 1, 0, i + 1);
	snprintf(t + n, cap - n, "end %u\n", SEAL_ORGS_MAX);
	cr_assert_eq(seal_orgs_parse(t, strlen(t), "t", &o, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(seal_orgs_count(o), SEAL_ORGS_MAX);
	cr_assert_eq(seal_orgs_retire(o, false, 0, &dflt), -1, "a new organization past the limit");
	cr_assert_eq(seal_orgs_name(o, 0), -1, "named past the limit");
	cr_assert_eq(seal_orgs_retire(o, false, 7, &dflt), 0, "one named: replaced in place");
	cr_assert_not(dflt);
	seal_orgs_free(o);
	n += (size_t)snprintf(t + n, cap - n, "org 0x%x %s\n", 0, K2);
	refused_n(t, n, SEAL_ORGS_MAX + 2, "more organizations than a store holds");
	free(t);
}

/* ---- The file ------------------------------------------------------------ */

static char dir[64];

static void
mkdir_tmp(void)
{
	tmpdir_make(dir, sizeof(dir), "kvss-orgkeys");
}

static void
rm_tmp(void)
{
	tmpdir_remove(dir);
}

static const char *
path_of(const char *name)
{
	static char path[128];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return path;
}

static const char *
put(const char *name, const char *text, mode_t mode)
{
	const char *p = path_of(name);
	int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0600);

	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	cr_assert_eq(chmod(p, mode), 0);
	return p;
}

static void
file_refused(const char *path, const char *why)
{
	struct seal_orgs *o;
	char err[256] = "";

	cr_assert_eq(seal_orgs_load(path, &o, err, sizeof(err)), -1, "%s: accepted", path);
	cr_assert(strstr(err, path) != NULL, "the message does not name the file: %s", err);
	cr_assert(strstr(err, why) != NULL, "the message does not say '%s': %s", why, err);
}

Test(orgkeys, hostile_store_files_are_refused, .init = mkdir_tmp, .fini = rm_tmp)
{
	char good[128], link[128];
	const char *p;

	snprintf(good, sizeof(good), "default %s\nend 0\n", K1);
	file_refused(path_of("missing"), "No such file");
	file_refused(put("open", good, 0644), "mode 0644");
	file_refused(put("group", good, 0640), "mode 0640");
	p = put("theirs", good, 0600);
	cr_assert_eq(chown(p, 4242, 4242), 0);
	file_refused(p, "owned by uid 4242");
	p = put("target", good, 0600);
	snprintf(link, sizeof(link), "%s/link", dir);
	cr_assert_eq(symlink(p, link), 0);
	file_refused(link, "symbolic link");
	cr_assert_eq(mkfifo(path_of("fifo"), 0600), 0);
	file_refused(path_of("fifo"), "not a regular file"); /* and it returned */
	file_refused(dir, "not a regular file");
	file_refused("/dev/zero", "not a regular file");
	file_refused(put("short", "default 11\n", 0600), "line 1: a key is 64");
}

/* Every byte of the file open at @p fd is zero (and there are more than @p least). */
static void
all_zeros(int fd, ssize_t least)
{
	static char buf[16384];
	ssize_t n = pread(fd, buf, sizeof(buf), 0), i;

	cr_assert_gt(n, least, "the replaced file holds %zd bytes", n);
	for (i = 0; i < n; i++)
		cr_assert_eq(buf[i], 0, "byte %zd of the replaced file: %#x", i, buf[i]);
}

Test(orgkeys, a_key_retired_leaves_the_others_and_no_copy_in_the_file, .init = mkdir_tmp,
     .fini = rm_tmp)
{
	struct seal_orgs *o, *back;
	const char *p = path_of("store");
	uint32_t d, k5, k9, k7, i;
	char err[256];
	struct stat st;
	bool dflt;
	int old;

	o = seal_orgs_new();
	cr_assert_not_null(o);
	cr_assert_eq(seal_orgs_name(o, 5), 0, "organization 5 named");
	cr_assert_eq(seal_orgs_name(o, 5), 1, "named once");
	/* Sixty more: the store is more than one 4 KiB block. */
	for (i = 0; i < 60; i++)
		cr_assert_eq(seal_orgs_name(o, 100 + i), 0);
	cr_assert_eq(seal_orgs_name(o, 9), 0, "organization 9 named");
	d = seal_orgs_default(o)->id;
	cr_assert_eq(seal_orgs_write(p, o, true, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(seal_orgs_write(p, o, true, err, sizeof(err)), -1, "a new store over a file");
	cr_assert(strstr(err, "File exists") != NULL, "%s", err);
	cr_assert_eq(stat(p, &st), 0);
	cr_assert_eq(st.st_mode & 07777, 0600, "mode %o", st.st_mode & 07777);
	cr_assert_gt(st.st_size, 4096);
	cr_assert_eq(seal_orgs_load(p, &back, err, sizeof(err)), 0, "%s", err);
	cr_assert_not(seal_orgs_changed(p, back), "the file as read");
	k5 = seal_orgs_key(back, 5)->id;
	k9 = seal_orgs_key(back, 9)->id;
	cr_assert_eq(seal_orgs_default(back)->id, d, "written and read back");
	cr_assert_eq(k5, seal_orgs_key(o, 5)->id);
	cr_assert(d != k5 && k5 != k9 && d != k9, "three keys, not three");
	seal_orgs_free(o);
	o = back;

	/* Organization 5's key retired: the file that held it is overwritten, whole. */
	old = open(p, O_RDONLY);
	cr_assert_geq(old, 0);
	cr_assert_eq(seal_orgs_retire(o, false, 5, &dflt), 0);
	cr_assert_not(dflt, "a named organization: the default stays");
	cr_assert_eq(seal_orgs_write(p, o, false, err, sizeof(err)), 0, "%s", err);
	all_zeros(old, 4096);
	close(old);
	cr_assert_eq(seal_orgs_load(p, &back, err, sizeof(err)), 0, "%s", err);
	cr_assert_neq(seal_orgs_key(back, 5)->id, k5, "organization 5: a new key");
	cr_assert_eq(seal_orgs_key(back, 9)->id, k9, "organization 9: untouched");
	cr_assert_eq(seal_orgs_default(back)->id, d, "the default: untouched");
	cr_assert(seal_orgs_changed(p, o), "a replaced file is seen as changed");
	/* ... and one written over in place (cp onto it: the same inode). */
	{
		struct seal_orgs *same;
		FILE *f;

		cr_assert_eq(seal_orgs_load(p, &same, err, sizeof(err)), 0, "%s", err);
		f = fopen(p, "a");
		cr_assert_not_null(f);
		fputs("# appended\n", f);
		fclose(f);
		cr_assert(seal_orgs_changed(p, same), "a file written in place is seen as changed");
		seal_orgs_free(same);
		seal_orgs_free(back); /* read before the append: a write from it is refused */
		cr_assert_eq(seal_orgs_load(p, &back, err, sizeof(err)), 0, "%s", err);
	}
	seal_orgs_free(o);
	o = back;
	/* An organization not named reset: its slices were under the
	 * default key, so the default is retired too; it is named now. */
	cr_assert_eq(seal_orgs_retire(o, false, 7, &dflt), 0);
	cr_assert(dflt, "the default retired with it");
	k7 = seal_orgs_key(o, 7)->id;
	cr_assert_neq(k7, d);
	cr_assert_neq(seal_orgs_default(o)->id, d, "the default key: new");
	cr_assert_eq(seal_orgs_key(o, 9)->id, k9, "organization 9: untouched");
	cr_assert_eq(seal_orgs_count(o), 63);
	cr_assert_eq(seal_orgs_write(p, o, false, err, sizeof(err)), 0, "%s", err);
	seal_orgs_free(o);
	cr_assert_eq(seal_orgs_load(p, &o, err, sizeof(err)), 0, "%s", err);
	/* Every key retired. */
	d = seal_orgs_default(o)->id;
	k5 = seal_orgs_key(o, 5)->id;
	cr_assert_eq(seal_orgs_retire(o, true, 0, &dflt), 0);
	cr_assert_neq(seal_orgs_default(o)->id, d);
	cr_assert_neq(seal_orgs_key(o, 5)->id, k5);
	cr_assert_neq(seal_orgs_key(o, 9)->id, k9);
	cr_assert_neq(seal_orgs_key(o, 7)->id, k7);
	cr_assert_eq(seal_orgs_count(o), 63);
	seal_orgs_free(o);
}

Test(orgkeys, a_write_never_brings_a_retired_key_back, .init = mkdir_tmp, .fini = rm_tmp)
{
	struct seal_orgs *o, *a, *b;
	const char *p = path_of("store");
	char err[256], p2[160];
	uint32_t ka;
	struct stat st;
	bool dflt;
	mode_t um;
	int old;

	/* A new store is 0600 whatever the umask. */
	o = seal_orgs_new();
	cr_assert_eq(seal_orgs_name(o, 5), 0);
	um = umask(0277);
	cr_assert_eq(seal_orgs_write(p, o, true, err, sizeof(err)), 0, "%s", err);
	umask(um);
	cr_assert_eq(stat(p, &st), 0);
	cr_assert_eq(st.st_mode & 07777, 0600, "mode %o under umask 0277", st.st_mode & 07777);
	seal_orgs_free(o);
	/* Two writers read the store; the first retires 5's key; the
	 * second, writing from what it read, would bring 5's old key back. */
	cr_assert_eq(seal_orgs_load(p, &a, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(seal_orgs_load(p, &b, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(seal_orgs_retire(a, false, 5, &dflt), 0);
	ka = seal_orgs_key(a, 5)->id;
	cr_assert_eq(seal_orgs_write(p, a, false, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(seal_orgs_retire(b, false, 9, &dflt), 0);
	cr_assert_eq(seal_orgs_write(p, b, false, err, sizeof(err)), -1, "a stale writer wrote");
	cr_assert(strstr(err, "changed since it was read") != NULL, "%s", err);
	seal_orgs_free(b);
	cr_assert_eq(seal_orgs_load(p, &b, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(seal_orgs_key(b, 5)->id, ka, "the first writer's key stands");
	seal_orgs_free(b);
	seal_orgs_free(a);
	/* A 0400 store is overwritten all the same. */
	cr_assert_eq(chmod(p, 0400), 0);
	cr_assert_eq(seal_orgs_load(p, &a, err, sizeof(err)), 0, "%s", err);
	old = open(p, O_RDONLY);
	cr_assert_geq(old, 0);
	cr_assert_eq(seal_orgs_retire(a, false, 5, &dflt), 0);
	cr_assert_eq(seal_orgs_write(p, a, false, err, sizeof(err)), 0, "%s", err);
	all_zeros(old, 100);
	close(old);
	seal_orgs_free(a);
	/* A store with two names: its zeros would reach the other; refused, nothing changed. */
	snprintf(p2, sizeof(p2), "%s/other-name", dir);
	cr_assert_eq(link(p, p2), 0);
	cr_assert_eq(seal_orgs_load(p, &a, err, sizeof(err)), 0, "%s", err);
	ka = seal_orgs_key(a, 5)->id;
	cr_assert_eq(seal_orgs_retire(a, false, 5, &dflt), 0);
	cr_assert_eq(seal_orgs_write(p, a, false, err, sizeof(err)), -1, "a store with two names");
	cr_assert(strstr(err, "hard links") != NULL, "%s", err);
	seal_orgs_free(a);
	cr_assert_eq(seal_orgs_load(p2, &a, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(seal_orgs_key(a, 5)->id, ka, "nothing changed");
	seal_orgs_free(a);
}

/* ---- What a reset is for ------------------------------------------------- */

static const uint8_t payload[8] = {1, 2, 3, 4, 5, 6, 7, 8};

static struct shared_hdr
slice_of(uint64_t org)
{
	return (struct shared_hdr){.kind = SHARED_SLICE, .org = org, .key = 0x4444,
				   .parent = 0x2222, .object_id = 0x870985c5d46bfa18ull,
				   .first_use_ns = FU, .written_ns = FU + 5, .gen_global = 1,
				   .gen_org = 2, .layout = 7, .shard = 3, .cache = 1, .start = 64,
				   .tokens = 2, .bytes_per_token = 4, .payload_len = 8};
}

/* Seal organization @p org's slice under @p ring as a writer does into @p obj: its length. */
static size_t
seal_with(uint8_t *obj, uint64_t org, const struct seal_ring *ring)
{
	struct shared_hdr h = slice_of(org);
	struct seal_key k;

	memcpy(obj + SHARED_HDR_LEN, payload, sizeof(payload));
	cr_assert_eq(seal_ring_key(ring, org, &k), 0);
	cr_assert_eq(shared_slice_seal(&h, obj + SHARED_HDR_LEN, &k), 0);
	shared_hdr_encode(obj, &h, obj + SHARED_HDR_LEN);
	return SHARED_HDR_LEN + h.payload_len;
}

static enum shared_bad
open_with(const uint8_t *obj, size_t n, const struct seal_ring *ring)
{
	uint8_t copy[256];
	struct shared_hdr h;
	enum shared_bad why;

	memcpy(copy, obj, n);
	why = shared_obj_decode(copy, n, &h);
	if (why == SHARED_OK)
		why = shared_slice_open(&h, copy + SHARED_HDR_LEN, ring);
	if (why == SHARED_OK)
		cr_assert_arr_eq(copy + SHARED_HDR_LEN, payload, sizeof(payload), "opened, not the bytes");
	return why;
}

Test(orgkeys, a_slice_under_a_retired_key_opens_nowhere)
{
	struct seal_orgs *o = seal_orgs_new();
	struct seal_ring ring = {.cur = doc_key(0)}, plain_master = {.cur = doc_key(0)};
	struct seal_ring rotated = {.cur = doc_key(1), .old = doc_key(0)};
	uint8_t a[256], b[256], c[256];
	size_t na, nb, nc;
	bool dflt;

	cr_assert_not_null(o);
	cr_assert_eq(seal_orgs_name(o, 0xa), 0);
	ring.orgs = o;
	na = seal_with(a, 0xa, &ring); /* organization 0xa: its own key */
	nb = seal_with(b, 0xb, &ring); /* 0xb: the default */
	cr_assert_eq(open_with(a, na, &ring), SHARED_OK);
	cr_assert_eq(open_with(b, nb, &ring), SHARED_OK);
	/* The master key alone opens neither: that is what makes a reset stick. */
	cr_assert_eq(open_with(a, na, &plain_master), SHARED_BAD_KEY);
	cr_assert_eq(open_with(b, nb, &plain_master), SHARED_BAD_KEY);
	/* A master key rotation keeps them open (the store is mixed with both). */
	rotated.orgs = o;
	cr_assert_eq(open_with(a, na, &rotated), SHARED_OK, "rotation: the old master key");
	nc = seal_with(c, 0xa, &rotated);
	cr_assert_eq(open_with(c, nc, &rotated), SHARED_OK, "rotation: the new master key");
	/* A slice sealed with the master key alone: refused where a store is held. */
	nc = seal_with(c, 0xa, &plain_master);
	cr_assert_eq(open_with(c, nc, &ring), SHARED_BAD_KEY, "the master key alone, under a store");
	nc = seal_with(c, 0xa, &rotated);
	/* Organization 0xa reset: its slice is refused by its id, 0xb's opens. */
	cr_assert_eq(seal_orgs_retire(o, false, 0xa, &dflt), 0);
	cr_assert_not(dflt);
	cr_assert_eq(open_with(a, na, &ring), SHARED_BAD_KEY, "retired: refused by the key id");
	cr_assert_eq(open_with(c, nc, &rotated), SHARED_BAD_KEY);
	cr_assert_eq(open_with(b, nb, &ring), SHARED_OK, "another organization: untouched");
	/* A slice under a retired key that claims the new pair's id: its tag fails. */
	{
		struct seal_key now;
		struct shared_hdr h;
		uint8_t forged[256];

		memcpy(forged, a, na);
		cr_assert_eq(shared_obj_decode(forged, na, &h), SHARED_OK);
		cr_assert_eq(seal_ring_key(&ring, 0xa, &now), 0);
		h.key_id = now.id;
		shared_hdr_encode(forged, &h, forged + SHARED_HDR_LEN);
		cr_assert_eq(open_with(forged, na, &ring), SHARED_BAD_TAG);
	}
	/* An organization on the default key reset: every slice under the
	 * default is retired with it (0xb's too); whoever holds the master
	 * key and the store as it is now opens none of them. */
	{
		uint8_t d[256];
		size_t nd = seal_with(d, 0xd, &ring);

		cr_assert_eq(open_with(d, nd, &ring), SHARED_OK);
		cr_assert_eq(seal_orgs_retire(o, false, 0xd, &dflt), 0);
		cr_assert(dflt, "0xd was on the default key");
		cr_assert_eq(open_with(d, nd, &ring), SHARED_BAD_KEY, "0xd's slice after its reset");
		cr_assert_eq(open_with(b, nb, &ring), SHARED_BAD_KEY, "the default's slices went with it");
		nb = seal_with(b, 0xb, &ring);
	}
	/* Every key retired: nothing sealed before opens. */
	cr_assert_eq(seal_orgs_retire(o, true, 0, &dflt), 0);
	cr_assert_eq(open_with(b, nb, &ring), SHARED_BAD_KEY, "the default retired");
	nb = seal_with(b, 0xb, &ring);
	cr_assert_eq(open_with(b, nb, &ring), SHARED_OK, "sealed anew");
	seal_orgs_free(o);
}
