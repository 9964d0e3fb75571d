/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libFuzzer target: the second tier's file (lib/kvdisk), opened, rebuilt
 * and served as a shard would. The harness makes, once, three
 * files of one geometry (two caches: 8 slots of 4 tokens x 16 B, 4 of 4 x
 * 8 B): this shard's ("own": model 1, shard 2, its known columns, one of
 * them deleted), another shard's ("foreign": shard 3, the same keys and
 * one more) and this shard's from before a format ("stale": same owner,
 * another file id). A column's bytes are a function of its key and of
 * its file's id, so the same key's bytes differ from file to file. An
 * input is either
 *
 *   byte 0 even: a list of mutations of the own file (flip, set, copy a
 *     range from the foreign or stale file or from elsewhere in this one,
 *     truncate or extend, set a superblock field and fix the superblock's
 *     hash, a slot's checksums made again with a seed no file here has,
 *     0 say: a plain XXH3 as version 1 wrote); or
 *   byte 0 odd: the rest of the input as the file's first bytes: over the
 *     own file's (byte 0 & 2 clear), or as the whole file (set). libFuzzer
 *     grows inputs slowly from short ones: a short input still reaches
 *     every slot behind the superblock it writes.
 *
 * The image is written to a file in /dev/shm and opened as shard 2 of
 * model 1 (format false). Then:
 *   - refused: the file is as it was (nothing formatted over);
 *   - opened: it was blank (its first MiB zero) or this shard's file of
 *     this geometry (superblock checked here independently);
 *   - every column in the index is one the harness wrote, with the meta
 *     it wrote, and every get that succeeds returns exactly the bytes
 *     written for that key into the file as opened (its superblock's id):
 *     never another file's bytes, never the deleted column, never a key
 *     only the foreign file has;
 *   - a column put now comes back whole; the close lets the file's lock
 *     go (another open file takes it at once); after a reopen, nothing
 *     dropped comes back, and all of the above holds again.
 * Byte 0 & 4 set: the same, every file sealed (kvdisk_params.ring: the
 * three made under one key), and each open followed by
 * kvdisk_retire_unheld() (every trailer's key id read). In a plain file a slot forged with the
 * file's own seed is not tried: XXH3 is a checksum, and whoever can write the file and read its id
 * can forge one (docs/SECURITY.md); the file's permissions are what stop them. In a sealed file it
 * is (mutation 7 with seed 0): the header's MAC must stop it, and every check above holds.
 *
 * KVSS_FUZZ_KVDISK_SEEDS=DIR: write a seed corpus into DIR and exit.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kvdisk_priv.h"

#define MODEL 1u
#define SHARD 2u
#define NC 2
#define COLT 4u				  /* tokens a column */
static const uint32_t bpt[NC] = {16, 8};  /* bytes a token */
static const uint32_t nslots[NC] = {8, 4}; /* slots a cache */
#define IMG_LEN (KVDISK_ALIGN * (1 + 8 + 4))
#define ORG_A 7u
#define ORG_B 8u
#define DELETED_J 3u /* own: cache 0's column 3 is put, then deleted */
#define ONLY_FOREIGN_J 7u /* cache 0's column 7: only the foreign file has it */
#define NEW_KEY 0x999u

static char dir[64], path[96];
/* The three files, plain ([0]) and sealed ([1]); the input's mode picks. */
static uint8_t own_m[2][IMG_LEN], foreign_m[2][IMG_LEN], stale_m[2][IMG_LEN];
static uint64_t foreign_seed_m[2], stale_seed_m[2];
static const uint8_t *own, *foreign, *stale;
static uint64_t foreign_seed, stale_seed;
/* Sealed files: the key they are sealed with (kvdisk_params.ring). */
static bool sealed;
static struct seal_ring ring;

static void
mode(bool s)
{
	sealed = s;
	own = own_m[s];
	foreign = foreign_m[s];
	stale = stale_m[s];
	foreign_seed = foreign_seed_m[s];
	stale_seed = stale_seed_m[s];
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
die(const char *what)
{
	fprintf(stderr, "fuzz_kvdisk: %s\n", what);
	abort();
}

/* The harness's columns: (cache, j) for j < its slots; key, org, meta. */
static uint64_t
key_of(uint16_t c, uint32_t j)
{
	return 0x100u + c * 16u + j;
}

static uint64_t
org_of(uint32_t j)
{
	return j % 3 == 2 ? ORG_B : ORG_A;
}

static struct kvdisk_meta
meta_of(uint16_t c, uint32_t j)
{
	return (struct kvdisk_meta){.key = key_of(c, j), .parent = j ? key_of(c, j - 1) : 0,
				    .org = org_of(j), .first_use_ns = 1000u * j + c,
				    .start = j * COLT, .tokens = j % COLT + 1, .cache = c};
}

/* A column's bytes: every byte depends on the key and the file's seed. */
static void
fill(uint8_t *out, uint64_t key, uint32_t len, uint64_t seed)
{
	uint32_t i;

	for (i = 0; i < len; i++)
		out[i] = (uint8_t)(key * 131 + (seed >> (i % 8 * 8)) + i * 13 + (i >> 3));
}

/* Field by field: the struct has padding. */
static bool
same_meta(const struct kvdisk_meta *a, const struct kvdisk_meta *b)
{
	return a->key == b->key && a->parent == b->parent && a->org == b->org &&
	       a->first_use_ns == b->first_use_ns && a->start == b->start &&
	       a->tokens == b->tokens && a->cache == b->cache;
}

static struct kvdisk_params
params(uint32_t shard)
{
	struct kvdisk_params p = {.num_caches = NC, .queue_depth = 8, .model = MODEL,
				  .shard = shard, .ring = sealed ? &ring : NULL};
	uint16_t c;

	for (c = 0; c < NC; c++)
		p.cache[c] = (struct kvdisk_cache_params){bpt[c], COLT, (uint64_t)nslots[c] * COLT};
	return p;
}

/* Poll until @p cookie finishes; its record (GET bytes copied into @p buf). */
static struct kvdisk_done
wait_for(struct kvdisk *d, uint64_t cookie, uint8_t *buf)
{
	struct kvdisk_done done[8], r = {.status = -ETIME};
	unsigned int i, n, spins = 0;
	bool found = false;

	while (!found) {
		n = kvdisk_poll(d, done, 8, true);
		if (n == 0 && kvdisk_inflight(d) == 0)
			die("an operation never finished");
		if (++spins > 1000000)
			die("an operation never finished (spinning)");
		for (i = 0; i < n; i++)
			if (done[i].cookie == cookie) {
				r = done[i];
				found = true;
				if (r.status == 0 && r.type == KVDISK_GET && buf != NULL)
					memcpy(buf, r.data, r.len);
			}
	}
	return r;
}

static int
put_sync(struct kvdisk *d, uint16_t c, uint32_t j, uint64_t seed, uint64_t key)
{
	struct kvdisk_meta m = meta_of(c, j);
	struct kvdisk_done done[8];
	uint8_t buf[COLT * 16];
	int rc, tries = 0;

	m.key = key;
	fill(buf, key, m.tokens * bpt[c], seed);
	/* -EAGAIN: a slot being cleared frees once its header is written; -EBUSY:
	 * the ops are clearing what the rebuild dropped. Poll, then again. */
	while (((rc = kvdisk_put(d, &m, buf, m.tokens * bpt[c], 42)) == -EAGAIN || rc == -EBUSY) &&
	       tries++ < 100)
		kvdisk_poll(d, done, 8, kvdisk_inflight(d) > 0);
	if (rc != 0)
		return rc;
	return wait_for(d, 42, NULL).status;
}

static void
read_file(const char *p, uint8_t *out, size_t len)
{
	int fd = open(p, O_RDONLY);

	if (fd < 0 || pread(fd, out, len, 0) != (ssize_t)len)
		die("cannot read back a file the harness made");
	close(fd);
}

static uint64_t
seed_of(const uint8_t *img)
{
	return XXH3_64bits(((const struct sb *)img)->file_id, 16);
}

/* The seed of the file at the path now (its superblock as kvdisk left it). */
static uint64_t
file_seed(void)
{
	uint8_t sb[KVDISK_ALIGN];

	read_file(path, sb, sizeof(sb));
	return seed_of(sb);
}

/* One of the three files, made by kvdisk itself, into @p out. */
static void
make(uint8_t *out, uint32_t shard, bool foreign_key)
{
	struct kvdisk_params p = params(shard);
	char err[1024];
	struct kvdisk *d;
	uint16_t c;
	uint32_t j;

	unlink(path);
	d = kvdisk_open(path, &p, err, sizeof(err));
	if (d == NULL)
		die(err);
	for (c = 0; c < NC; c++)
		for (j = 0; j < nslots[c]; j++) {
			if (c == 0 && j == ONLY_FOREIGN_J && !foreign_key)
				continue;
			if (put_sync(d, c, j, file_seed(), key_of(c, j)) != 0)
				die("a put of the harness's failed");
		}
	if (kvdisk_del(d, 0, key_of(0, DELETED_J), org_of(DELETED_J), 43) != 0 ||
	    wait_for(d, 43, NULL).status != 0)
		die("the harness's delete failed");
	kvdisk_close(d);
	read_file(path, out, IMG_LEN);
	unlink(path);
}

/* The harness's file and directory go with the process. */
static void
cleanup(void)
{
	unlink(path);
	rmdir(dir);
}

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *seeds = getenv("KVSS_FUZZ_KVDISK_SEEDS");

	(void)argc;
	(void)argv;
	/* A directory only this process can write: kvdisk refuses /dev/shm itself. */
	snprintf(dir, sizeof(dir), "/dev/shm/kvss_fuzz_kvdisk_%d", (int)getpid());
	if (mkdir(dir, 0700) != 0 && errno != EEXIST)
		die("cannot make its directory in /dev/shm");
	snprintf(path, sizeof(path), "%s/l2.bin", dir);
	atexit(cleanup);
	{
		uint8_t k[SEAL_KEY_LEN];
		int m;

		memset(k, 0x5e, sizeof(k));
		if (seal_key_from(&ring.cur, k) != 0)
			die("no key (libcrypto)");
		for (m = 1; m >= 0; m--) {
			mode(m);
			make(own_m[m], SHARD, false);
			make(foreign_m[m], SHARD + 1, true);
			make(stale_m[m], SHARD, false);
			foreign_seed_m[m] = seed_of(foreign_m[m]);
			stale_seed_m[m] = seed_of(stale_m[m]);
		}
		mode(false);
	}
	if (seeds != NULL) {
		static const uint8_t mut[][24] = {
			{0},				      /* the own file as it is */
			{0, 0, 0x00, 0x10, 0x14, 0x55},	      /* a byte of slot 0's key */
			{0, 2, 0x00, 0x20, 0x00, 0x10, 0x00}, /* slot 1 from the foreign file */
			{0, 3, 0x00, 0x30, 0x00, 0x10, 0x00}, /* slot 2 from the stale file */
			{0, 4, 0x00, 0x10, 0x00, 0x00, 0x30, 0x00, 0x01, 0x00}, /* 0 to 2 */
			{0, 5, 0x00, 0x60, 0x00},	      /* truncated */
			{0, 6, 0, 20, 1, 3},		      /* shard 3, its hash fixed */
			{0, 7, 0, 0, 0, 0, 0, 0, 0, 0, 1},   /* slot 1 forged, seed 0 */
			{0, 0, 0x00, 0x10, 0x64, 0x01},	      /* a byte of slot 0's bytes */
			/* Sealed: as it is; slot 1 forged with the file's own seed;
			 * slot 1 from the foreign file; slot 0's bytes over slot 2's. */
			{4},
			{4, 7, 0, 0, 0, 0, 0, 0, 0, 0, 1},
			{4, 2, 0x00, 0x20, 0x00, 0x10, 0x00},
			{4, 4, 0x00, 0x10, 0x40, 0x00, 0x30, 0x40, 0x0f, 0xc0, 7, 0, 0, 0, 0, 0, 0,
			 0, 0, 2},
		};
		char f[256];
		FILE *o;
		size_t i;

		for (i = 0; i < sizeof(mut) / sizeof(mut[0]); i++) {
			snprintf(f, sizeof(f), "%s/seed_mut_%zu", seeds, i);
			if ((o = fopen(f, "wb")) == NULL || fwrite(mut[i], 1, sizeof(mut[i]), o) !=
								  sizeof(mut[i]))
				die("cannot write a seed");
			fclose(o);
		}
		/* Whole files: the three; a blank one; ext4's magic alone. Over the
		 * own file: the stale and the foreign superblocks. */
		static uint8_t zero[KVDISK_ALIGN], ext4[1082] = {[1080] = 0x53, [1081] = 0xef};
		const struct {
			uint8_t mode;
			const uint8_t *img;
			size_t len;
		} raw[] = {{3, own, IMG_LEN},	     {3, foreign, IMG_LEN},
			   {3, stale, IMG_LEN},	     {3, zero, sizeof(zero)},
			   {3, ext4, sizeof(ext4)},  {1, stale, KVDISK_ALIGN},
			   {1, foreign, KVDISK_ALIGN}};

		for (i = 0; i < sizeof(raw) / sizeof(raw[0]); i++) {
			snprintf(f, sizeof(f), "%s/seed_raw_%zu", seeds, i);
			if ((o = fopen(f, "wb")) == NULL || fputc(raw[i].mode, o) != raw[i].mode ||
			    fwrite(raw[i].img, 1, raw[i].len, o) != raw[i].len)
				die("cannot write a seed");
			fclose(o);
		}
		exit(0);
	}
	return 0;
}

/* ---- The input: mutations of the own file, or a file ------------------- */

struct rd {
	const uint8_t *p;
	size_t n, at;
};

static uint32_t
take(struct rd *r, unsigned int bytes)
{
	uint32_t v = 0;

	while (bytes-- > 0)
		v = v << 8 | (r->at < r->n ? r->p[r->at++] : 0);
	return v;
}

/* Checksums made again with @p seed, for this place (a writer of another file). */
static void
forge(uint8_t *img, size_t len, uint32_t slot, uint64_t seed)
{
	struct kvdisk f = {.seed = seed};
	uint16_t c = slot < nslots[0] ? 0 : 1;
	uint32_t i = c == 0 ? slot : slot - nslots[0];
	size_t off = KVDISK_ALIGN * (1 + (size_t)slot);
	struct hdr *h = (struct hdr *)(img + off);

	if (off + KVDISK_ALIGN > len || h->tokens > COLT)
		return;
	h->data_hash = data_hash(&f, img + off + KVDISK_HDR_LEN, (size_t)h->tokens * bpt[c]);
	h->hdr_hash = hdr_hash(&f, h, c, i);
}

/* Apply the mutations in @p r to the own file in @p img; its new length. */
static size_t
mutate(struct rd *r, uint8_t *img, size_t cap)
{
	size_t len = IMG_LEN;
	unsigned int ops = 0;

	memcpy(img, own, IMG_LEN);
	while (r->at < r->n && ops++ < 64) {
		uint32_t op = take(r, 1) % 8, off, n, src;

		if (len == 0 && op != 5)
			continue; /* nothing to change but its length */
		switch (op) {
		case 0: /* flip a byte */
			off = take(r, 3) % len;
			img[off] ^= (uint8_t)(take(r, 1) | 1);
			break;
		case 1: /* set up to 64 bytes */
			off = take(r, 3) % len;
			n = take(r, 1) % 65;
			while (n-- > 0 && off < len)
				img[off++] = (uint8_t)take(r, 1);
			break;
		case 2: /* a range of the foreign file, in the same place */
		case 3: /* ... of the stale file */
			off = take(r, 3) % IMG_LEN;
			n = take(r, 2) % (IMG_LEN - off + 1);
			if (off + n <= len)
				memcpy(img + off, op == 2 ? foreign + off : stale + off, n);
			break;
		case 4: /* a range of this file, elsewhere in it */
			src = take(r, 3) % len;
			off = take(r, 3) % len;
			n = take(r, 2);
			if (n > len - src)
				n = (uint32_t)(len - src);
			if (n > len - off)
				n = (uint32_t)(len - off);
			memmove(img + off, img + src, n);
			break;
		case 5: /* truncated or extended (with zeros) */
			n = take(r, 3) % (uint32_t)cap;
			if (n > len)
				memset(img + len, 0, n - len);
			len = n;
			break;
		case 6: /* a superblock field set, its hash made good (not another file's id) */
			if (len < KVDISK_ALIGN)
				break;
			off = take(r, 2) % offsetof(struct sb, hash);
			n = take(r, 1) % 9;
			while (n-- > 0 && off < offsetof(struct sb, hash))
				img[off++] = (uint8_t)take(r, 1);
			if (seed_of(img) == foreign_seed || seed_of(img) == stale_seed)
				memcpy(img + offsetof(struct sb, file_id),
				       own + offsetof(struct sb, file_id), 16);
			((struct sb *)img)->hash = XXH3_64bits(img, offsetof(struct sb, hash));
			break;
		case 7: { /* a slot's checksums made again with a seed no file here has */
			uint64_t seed = (uint64_t)take(r, 4) << 32 | take(r, 4);

			/* Sealed: with the file's own seed (seed 0), a forgery
			 * XXH3 cannot catch: the seal must. */
			if (sealed && seed == 0) {
				forge(img, len, take(r, 1) % (nslots[0] + nslots[1]), seed_of(img));
				break;
			}
			/* Not one of the three files' seeds: a slot forged with the seed of
			 * the superblock it ends up under is a forgery XXH3 cannot catch
			 * (the stale superblock can be copied in after). Another file's
			 * own slots come in by copying. */
			if (seed == seed_of(own) || seed == foreign_seed || seed == stale_seed)
				seed ^= 1;
			n = take(r, 1) % (nslots[0] + nslots[1]);
			forge(img, len, n, seed);
			break;
		}
		}
	}
	return len;
}

/* ---- What was served ------------------------------------------------------ */

/* Is (cache, key, org) one of the own file's live columns? Its j, or -1. */
static int
own_column(uint16_t c, uint64_t key, uint64_t org)
{
	uint32_t j;

	if (c >= NC)
		return -1;
	for (j = 0; j < nslots[c]; j++)
		if (key == key_of(c, j) && org == org_of(j) && !(c == 0 && j == DELETED_J) &&
		    !(c == 0 && j == ONLY_FOREIGN_J))
			return (int)j;
	return -1;
}

struct seen {
	uint64_t key[16], org[16];
	uint16_t cache[16];
	unsigned int n;
	bool bad;
};

static void
list(void *arg, const struct kvdisk_meta *m)
{
	struct seen *s = arg;
	struct kvdisk_meta want;
	int j = own_column(m->cache, m->key, m->org);

	if (m->key == NEW_KEY && m->cache == 0 && m->org == ORG_A)
		j = 0; /* the column put after the first open */
	if (j < 0 || s->n >= 16) {
		s->bad = true;
		return;
	}
	want = meta_of(m->cache, (uint32_t)j);
	if (m->key != NEW_KEY && !same_meta(&want, m))
		s->bad = true;
	s->key[s->n] = m->key;
	s->org[s->n] = m->org;
	s->cache[s->n++] = m->cache;
}

static bool
in(const struct seen *s, uint16_t c, uint64_t key, uint64_t org)
{
	unsigned int i;

	for (i = 0; i < s->n; i++)
		if (s->cache[i] == c && s->key[i] == key && s->org[i] == org)
			return true;
	return false;
}

/* Ask for every column any of the three files holds; check what comes back
 * against the bytes written for it into the file of seed @p seed. */
static void
serve(struct kvdisk *d, uint64_t seed)
{
	uint8_t got[COLT * 16], want[COLT * 16];
	uint16_t c;
	uint32_t j;

	for (c = 0; c < NC; c++)
		for (j = 0; j < nslots[c]; j++) {
			struct kvdisk_meta m = meta_of(c, j);
			struct kvdisk_done r, done[8];
			int rc, tries = 0;

			/* Every other column read into a buffer of the caller's
			 * (kvdisk_get_into(): a sealed one opened straight there).
			 * -EBUSY: the ops are clearing what the rebuild dropped;
			 * poll, again. */
			bool into = (j & 1) != 0;

			while ((rc = into ? kvdisk_get_into(d, c, m.key, m.org, got, sizeof(got), 7)
					  : kvdisk_get(d, c, m.key, m.org, 7)) == -EBUSY &&
			       tries++ < 100)
				kvdisk_poll(d, done, 8, kvdisk_inflight(d) > 0);
			if (rc == -ENOENT)
				continue;
			if (rc != 0)
				die("kvdisk_get failed with nothing in flight");
			if (own_column(c, m.key, m.org) < 0)
				die("a column the own file does not hold is in the index");
			r = wait_for(d, 7, into ? NULL : got);
			if (r.status != 0)
				continue; /* dropped: counted, not served */
			if (into && r.data != got)
				die("a column read into the caller's buffer was not put there");
			fill(want, m.key, m.tokens * bpt[c], seed);
			if (r.len != m.tokens * bpt[c] || memcmp(got, want, r.len) != 0)
				die("served bytes that are not what was written for this key");
			if (!same_meta(&r.meta, &m))
				die("served a column with another meta");
		}
}

static bool
blank(const uint8_t *img, size_t len)
{
	size_t i, n = len < KD_PROBE_LEN ? len : KD_PROBE_LEN;

	for (i = 0; i < n; i++)
		if (img[i] != 0)
			return false;
	return true;
}

/* This shard's file of this geometry, by its superblock, checked apart from the library. */
static bool
ours(const uint8_t *img, size_t len)
{
	const struct sb *a = (const struct sb *)img, *b = (const struct sb *)own;

	return len >= IMG_LEN && a->magic == b->magic && a->version == b->version &&
	       a->num_caches == b->num_caches && a->flags == b->flags && a->model == MODEL &&
	       a->shard == SHARD && memcmp(a->cache, b->cache, sizeof(a->cache)) == 0 &&
	       a->hash == XXH3_64bits(img, offsetof(struct sb, hash));
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t img[2 * IMG_LEN], back[2 * IMG_LEN];
	struct kvdisk_params p = params(SHARD);
	struct seen first = {0}, second = {0};
	char err[2048];
	struct kvdisk *d;
	uint64_t seed;
	size_t len;
	int fd;

	if (size < 1)
		return 0;
	mode((data[0] & 4) != 0);
	p = params(SHARD);
	if (data[0] & 1) {
		len = size - 1 < sizeof(img) ? size - 1 : sizeof(img);
		memcpy(img, own, IMG_LEN);
		memcpy(img, data + 1, len);
		if (!(data[0] & 2) && len < IMG_LEN)
			len = IMG_LEN;
	} else {
		struct rd r = {data + 1, size - 1, 0};

		len = mutate(&r, img, sizeof(img));
	}
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 || (len > 0 && write(fd, img, len) != (ssize_t)len))
		die("cannot write the image");
	close(fd);

	err[0] = '\0';
	d = kvdisk_open(path, &p, err, sizeof(err));
	if (d == NULL) {
		/* Refused: said, and nothing written over. */
		if (err[0] == '\0' || strncmp(err, path, strlen(path)) != 0)
			die("a refusal that does not name the file");
		fd = open(path, O_RDONLY);
		if (fd < 0 || pread(fd, back, sizeof(back), 0) != (ssize_t)len ||
		    memcmp(back, img, len) != 0)
			die("a refused file was changed");
		close(fd);
		return 0;
	}
	if (!blank(img, len) && !ours(img, len))
		die("opened a file that is neither blank nor this shard's");
	/* A sealed file's columns whose trailer names a key not held go at
	 * once (an organization key store replaced while the shard was down):
	 * never more than the index holds, never an error on a file that
	 * opened. */
	if (sealed && kvdisk_retire_unheld(d) < 0)
		die("kvdisk_retire_unheld failed on a file that opened");
	/* The file's id: the image's, or a new one when it was blank. */
	seed = file_seed();
	if (!blank(img, len) && seed != seed_of(img))
		die("a file of this shard's got another id");
	kvdisk_foreach(d, list, &first);
	if (first.bad || (blank(img, len) && first.n > 0))
		die("the index holds a column the own file does not, or with another meta");
	serve(d, seed);
	/* Room made by what was dropped is usable: a column put now comes back. */
	if (put_sync(d, 0, 0, seed, NEW_KEY) == 0) {
		uint8_t got[COLT * 16], want[COLT * 16];
		struct kvdisk_done r;

		struct kvdisk_done done[8];
		int rc, tries = 0;

		while ((rc = kvdisk_get(d, 0, NEW_KEY, ORG_A, 8)) == -EBUSY && tries++ < 100)
			kvdisk_poll(d, done, 8, kvdisk_inflight(d) > 0);
		if (rc != 0)
			die("a column just put is not there");
		r = wait_for(d, 8, got);
		fill(want, NEW_KEY, bpt[0], seed);
		if (r.status != 0 || r.len != bpt[0] || memcmp(got, want, r.len) != 0)
			die("a column just put did not come back whole");
		if (first.n < 16) {
			first.key[first.n] = NEW_KEY;
			first.org[first.n] = ORG_A;
			first.cache[first.n++] = 0;
		}
	}
	kvdisk_close(d);
	/* The lock went with the close, not when the ring's teardown let the
	 * file go: taken at once here, with no wait (kvdisk_open() would wait
	 * a moment for it and hide a lock that outlives the close). */
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || flock(fd, LOCK_EX | LOCK_NB) != 0)
		die("the file's lock outlived kvdisk_close()");
	close(fd);

	/* Again: what was dropped or cleared stays gone; the rest still checks. */
	d = kvdisk_open(path, &p, err, sizeof(err));
	if (d == NULL)
		die(err);
	if (sealed && kvdisk_retire_unheld(d) < 0)
		die("kvdisk_retire_unheld failed on a file that opened again");
	kvdisk_foreach(d, list, &second);
	if (second.bad)
		die("after a reopen, the index holds a column the own file does not");
	for (unsigned int i = 0; i < second.n; i++)
		if (!in(&first, second.cache[i], second.key[i], second.org[i]))
			die("a column that was not served before came back after a reopen");
	serve(d, seed);
	kvdisk_close(d);
	return 0;
}
