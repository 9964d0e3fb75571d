/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * lib/kvdisk's sealed files (kvdisk.h, "Sealed files"), on real files, each
 * attack made against a plain file too, where it succeeds (so that each
 * check can fail): a reader of the file finds no byte of a column; a
 * writer of the file who can read its file id and forge both checksums
 * (XXH3 is no secret) makes a plain file serve bytes of its choosing, and
 * a sealed one drops the forged header at open (its MAC fails); a column's
 * bytes moved under another column's header are dropped when read
 * (bad_tag); a rotation (the new key and the old one) reads both, and the
 * new key alone drops the old key's columns at open; a file none of whose
 * headers holds under the key given is refused, nothing cleared (a key
 * file swapped); a sealed file opened without a key, or a plain one with,
 * is refused saying so.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kvdisk.h"
#include "orgkeys.h"
#include "kvdisk_priv.h"

#define B 96	/* bytes per token */
#define COL 16	/* tokens per column */
#define NCOL 8	/* columns of room */
#define SLOT 4096u /* 64 + 16 x 96 + 32: one 4 KiB block, sealed or not */
#define SLOT_OFF(i) (4096u + (i) * SLOT)

static char dir[64], path[128], err[512];
static struct kvdisk_params params;
static struct seal_ring ring_a, ring_b, ring_ba;

static void
key_of(struct seal_key *k, uint8_t fill)
{
	uint8_t bytes[SEAL_KEY_LEN];

	memset(bytes, fill, sizeof(bytes));
	cr_assert_eq(seal_key_from(k, bytes), 0);
}

static void
setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/kvss_test_kvdisk_seal_%d", (int)getpid());
	cr_assert_eq(mkdir(dir, 0700), 0);
	snprintf(path, sizeof(path), "%s/l2.bin", dir);
	memset(&params, 0, sizeof(params));
	params.num_caches = 1;
	params.cache[0] = (struct kvdisk_cache_params){B, COL, (uint64_t)NCOL * COL};
	params.queue_depth = 8;
	memset(&ring_a, 0, sizeof(ring_a));
	memset(&ring_b, 0, sizeof(ring_b));
	key_of(&ring_a.cur, 0xa1);
	key_of(&ring_b.cur, 0xb2);
	ring_ba = (struct seal_ring){.cur = ring_b.cur, .old = ring_a.cur};
}

static void
teardown(void)
{
	char cmd[160];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	cr_assert_eq(system(cmd), 0);
}

TestSuite(kvdisk_seal, .init = setup, .fini = teardown, .timeout = 60);

/* Column @k's bytes, version @v. */
static void
fill(uint8_t *out, uint64_t k, uint32_t v)
{
	uint32_t i;

	for (i = 0; i < COL * B; i++)
		out[i] = (uint8_t)(k * 131 + v * 17 + i * 7 + (i >> 8));
}

static struct kvdisk *
open_with(const struct seal_ring *ring)
{
	struct kvdisk *d;

	params.ring = ring;
	d = kvdisk_open(path, &params, err, sizeof(err));
	cr_assert_not_null(d, "%s", err);
	return d;
}

static struct kvdisk_done
wait_for(struct kvdisk *d, uint64_t cookie)
{
	struct kvdisk_done done[16];
	unsigned int i, n;

	for (;;) {
		n = kvdisk_poll(d, done, 16, true);
		cr_assert(n > 0 || kvdisk_inflight(d) > 0, "operation %" PRIu64 " never finished",
			  cookie);
		for (i = 0; i < n; i++)
			if (done[i].cookie == cookie)
				return done[i];
	}
}

static void
put(struct kvdisk *d, uint64_t k, uint32_t v)
{
	uint8_t buf[COL * B];
	struct kvdisk_meta m = {.key = 0x1000 + k, .org = 77, .first_use_ns = k, .start = 0,
				.tokens = COL, .cache = 0};

	fill(buf, k, v);
	cr_assert_eq(kvdisk_put(d, &m, buf, sizeof(buf), 100 + k), 0);
	cr_assert_eq(wait_for(d, 100 + k).status, 0);
}

/* Column @k read back: its status; when 0, whether its bytes are version @v's in @p same. */
static int
get(struct kvdisk *d, uint64_t k, uint32_t v, bool *same)
{
	uint8_t want[COL * B];
	struct kvdisk_done r;
	int rc = kvdisk_get(d, 0, 0x1000 + k, 77, 500 + k);

	if (rc != 0)
		return rc;
	r = wait_for(d, 500 + k);
	if (r.status == 0) {
		fill(want, k, v);
		*same = r.len == sizeof(want) && memcmp(r.data, want, sizeof(want)) == 0;
	}
	return r.status;
}

/* The caller's buffer get_into() reads into (0x5a before each read). */
static uint8_t room[2 * COL * B];

/* get(), its bytes read into a buffer of @p cap bytes of the caller's (kvdisk_get_into()). */
static int
get_into(struct kvdisk *d, uint64_t k, uint32_t v, uint32_t cap, bool *same)
{
	uint8_t want[COL * B];
	struct kvdisk_done r;
	int rc;

	memset(room, 0x5a, sizeof(room));
	rc = kvdisk_get_into(d, 0, 0x1000 + k, 77, room, cap, 600 + k);
	if (rc != 0)
		return rc;
	r = wait_for(d, 600 + k);
	if (r.status == 0) {
		fill(want, k, v);
		*same = r.data == room && r.len == sizeof(want) &&
			memcmp(room, want, sizeof(want)) == 0 && room[sizeof(want)] == 0x5a;
	}
	return r.status;
}

/* Columns 0 and 1 (version 1) written to a file opened with @p ring, closed. */
static void
two_columns(const struct seal_ring *ring)
{
	struct kvdisk *d = open_with(ring);

	put(d, 0, 1);
	put(d, 1, 1);
	kvdisk_close(d);
}

/* The next case of a test on a file of its own: the directory made again. */
static void
afresh(void)
{
	teardown();
	setup();
}

static void
file_read(off_t off, void *buf, size_t len)
{
	int fd = open(path, O_RDONLY);

	cr_assert_geq(fd, 0);
	cr_assert_eq(pread(fd, buf, len, off), (ssize_t)len);
	close(fd);
}

static void
file_write(off_t off, const void *buf, size_t len)
{
	int fd = open(path, O_RDWR);

	cr_assert_geq(fd, 0);
	cr_assert_eq(pwrite(fd, buf, len, off), (ssize_t)len);
	close(fd);
}

/*
 * What a writer of the file who holds no key can do: read the file id from
 * the superblock, and make slot @p i's header's checksums hold again for
 * the header and bytes it now has (kvdisk_priv.h's own hashes).
 */
static void
forge_sums(uint32_t i)
{
	struct kvdisk fake;
	struct sb sb;
	uint8_t slot[SLOT];
	struct hdr *h = (struct hdr *)slot;

	file_read(0, &sb, sizeof(sb));
	memset(&fake, 0, sizeof(fake));
	fake.seed = XXH3_64bits(sb.file_id, sizeof(sb.file_id));
	file_read(SLOT_OFF(i), slot, SLOT);
	h->data_hash = data_hash(&fake, slot + KVDISK_HDR_LEN, (size_t)h->tokens * B);
	h->hdr_hash = hdr_hash(&fake, h, 0, i);
	file_write(SLOT_OFF(i), slot, SLOT);
}

/* The slot of column @k (columns are put into slots 0, 1, ... in order here). */
static uint32_t
slot_of(uint64_t k)
{
	return (uint32_t)k;
}

Test(kvdisk_seal, sealed_columns_come_back_and_the_file_holds_none_of_their_bytes)
{
	struct kvdisk *d = open_with(&ring_a);
	struct kvdisk_stats st;
	uint8_t slot[SLOT], col[COL * B];
	bool same = false;
	uint64_t k;

	for (k = 0; k < 4; k++)
		put(d, k, 1);
	for (k = 0; k < 4; k++) {
		cr_assert_eq(get(d, k, 1, &same), 0);
		cr_assert(same, "column %" PRIu64 " read back other bytes", k);
	}
	kvdisk_stats(d, &st);
	cr_assert_eq(st.sealed, 4);
	cr_assert_eq(st.opened, 4);
	kvdisk_close(d);
	/* On the disk: not one 32-byte run of a column's bytes. */
	for (k = 0; k < 4; k++) {
		file_read(SLOT_OFF(slot_of(k)), slot, SLOT);
		fill(col, k, 1);
		cr_assert_null(memmem(slot, SLOT, col + 512, 32), "column %" PRIu64 " in plain", k);
	}
	/* And after a reopen (the index rebuilt from the headers). */
	d = open_with(&ring_a);
	cr_assert_eq(get(d, 2, 1, &same), 0);
	cr_assert(same);
	kvdisk_close(d);
}

/*
 * A column read into the caller's buffer (the shard's disk tier reads so:
 * a sealed column opened straight into it): the same bytes, sealed or
 * plain, none past the column; a byte of the column changed on the disk
 * fails the read (tag or checksum) and the column is dropped; a buffer
 * short of the column fails the read and keeps the column.
 */
Test(kvdisk_seal, a_column_read_into_the_callers_buffer_is_opened_there_or_not_at_all)
{
	const struct seal_ring *rings[2] = {&ring_a, NULL};
	unsigned int i, j;

	for (i = 0; i < 2; i++) {
		struct kvdisk *d;
		struct kvdisk_stats st;
		uint8_t b = 0;
		bool same = false;

		if (i > 0)
			afresh();
		two_columns(rings[i]);
		d = open_with(rings[i]);
		cr_assert_eq(get_into(d, 0, 1, COL * B, &same), 0, "%s", i ? "plain" : "sealed");
		cr_assert(same, "%s: other bytes, or not in the caller's buffer",
			  i ? "plain" : "sealed");
		cr_assert_eq(get_into(d, 0, 1, COL * B - 1, &same), -EMSGSIZE);
		cr_assert_eq(get_into(d, 0, 1, 2 * COL * B, &same), 0, "kept after a short buffer");
		cr_assert(same);
		cr_assert_eq(kvdisk_get_into(d, 0, 0x1000, 77, NULL, 8, 1), -EINVAL);
		kvdisk_close(d);
		/* One byte of column 1 changed where it lies. */
		file_read(SLOT_OFF(slot_of(1)) + KVDISK_HDR_LEN + 300, &b, 1);
		b ^= 0x40;
		file_write(SLOT_OFF(slot_of(1)) + KVDISK_HDR_LEN + 300, &b, 1);
		d = open_with(rings[i]);
		cr_assert_eq(get_into(d, 1, 1, COL * B, &same), -EBADMSG, "%s",
			     i ? "plain" : "sealed");
		for (j = 0; j < COL * B; j++)
			cr_assert_eq(room[j], 0, "%s: byte %u of a failed read left in the buffer",
				     i ? "plain" : "sealed", j);
		cr_assert_eq(get_into(d, 1, 1, COL * B, &same), -ENOENT, "dropped after it failed");
		kvdisk_stats(d, &st);
		cr_assert_eq(st.corrupt, 1);
		cr_assert_eq(st.bad_tag, i == 0 ? 1 : 0);
		kvdisk_close(d);
	}
}

/*
 * The room a read into the caller's buffer needs is checked once, at
 * submit: the column's length cannot change under it. A half column read
 * into a buffer of exactly its length while the same key is written again
 * whole: the read returns the half column it began on, and nothing lands
 * past the buffer; the whole column is what a read after it finds.
 */
Test(kvdisk_seal, a_column_rewritten_longer_while_read_into_the_callers_buffer_fills_only_it)
{
	const struct seal_ring *rings[2] = {&ring_a, NULL};
	unsigned int i;

	for (i = 0; i < 2; i++) {
		const char *how = i ? "plain" : "sealed";
		struct kvdisk_meta m = {.key = 0x1000, .org = 77, .tokens = COL / 2};
		uint8_t half[COL * B], whole[COL * B];
		struct kvdisk_done done[16];
		struct kvdisk *d;
		bool got = false, wrote = false, same = false;
		unsigned int j, n;

		if (i > 0)
			afresh();
		d = open_with(rings[i]);
		fill(half, 0, 1);
		fill(whole, 0, 2);
		cr_assert_eq(kvdisk_put(d, &m, half, COL / 2 * B, 1), 0);
		cr_assert_eq(wait_for(d, 1).status, 0);
		memset(room, 0x5a, sizeof(room));
		cr_assert_eq(kvdisk_get_into(d, 0, 0x1000, 77, room, COL / 2 * B, 2), 0);
		m.tokens = COL;
		cr_assert_eq(kvdisk_put(d, &m, whole, COL * B, 3), 0, "%s", how);
		while (!got || !wrote) {
			n = kvdisk_poll(d, done, 16, true);
			cr_assert(n > 0 || kvdisk_inflight(d) > 0,
				  "%s: a read or write never ended", how);
			for (j = 0; j < n; j++) {
				if (done[j].cookie == 2) {
					cr_assert_eq(done[j].status, 0, "%s", how);
					cr_assert_eq(done[j].len, COL / 2 * B,
						     "%s: not the half column", how);
					got = true;
				} else if (done[j].cookie == 3) {
					cr_assert_eq(done[j].status, 0, "%s", how);
					wrote = true;
				}
			}
		}
		cr_assert_eq(memcmp(room, half, COL / 2 * B), 0, "%s: other bytes than the half",
			     how);
		for (j = COL / 2 * B; j < sizeof(room); j++)
			cr_assert_eq(room[j], 0x5a, "%s: byte %u past the caller's buffer written",
				     how, j);
		cr_assert_eq(get_into(d, 0, 2, COL * B, &same), 0, "%s", how);
		cr_assert(same, "%s: the whole column after the rewrite", how);
		kvdisk_close(d);
	}
}

Test(kvdisk_seal, the_same_bytes_in_a_plain_file_are_there_to_read)
{
	/* The check above can fail: a plain file holds its columns as they are. */
	struct kvdisk *d = open_with(NULL);
	uint8_t slot[SLOT], col[COL * B];

	put(d, 0, 1);
	kvdisk_close(d);
	file_read(SLOT_OFF(0), slot, SLOT);
	fill(col, 0, 1);
	cr_assert_not_null(memmem(slot, SLOT, col + 512, 32));
}

/* Overwrite column 1's bytes with the forger's and make the sums hold; read it back. */
static int
forged_read(const struct seal_ring *ring, bool *served_forgery, struct kvdisk_stats *st)
{
	struct kvdisk *d;
	uint8_t forged[COL * B];
	bool same = false;
	int rc;

	two_columns(ring);
	fill(forged, 1, 9); /* version 9: the forger's bytes */
	file_write(SLOT_OFF(slot_of(1)) + KVDISK_HDR_LEN, forged, sizeof(forged));
	forge_sums(slot_of(1));
	d = open_with(ring);
	rc = get(d, 1, 9, &same);
	*served_forgery = rc == 0 && same;
	cr_assert_eq(get(d, 0, 1, &same), 0, "the other column is whole");
	cr_assert(same);
	kvdisk_stats(d, st);
	kvdisk_close(d);
	return rc;
}

Test(kvdisk_seal, a_forged_column_with_its_checksums_made_again_is_dropped_not_served)
{
	struct kvdisk_stats st;
	bool served = false;
	int rc;

	rc = forged_read(NULL, &served, &st);
	cr_assert(rc == 0 && served, "plain: XXH3 made again, the forgery is served (rc %d)", rc);
	afresh();
	rc = forged_read(&ring_a, &served, &st);
	cr_assert_eq(rc, -ENOENT, "sealed: the forged header must be dropped at open (rc %d)", rc);
	cr_assert_not(served);
	cr_assert_eq(st.rebuild_dropped, 1);
	cr_assert_eq(st.rebuilt, 1, "the other column is indexed");
}

/*
 * Column 0's slot (bytes and trailer) under column 1's header, its sums
 * made again where that can be done without a key (plain: XXH3; sealed:
 * the header's MAC cannot be, so the header is left as it was).
 */
static int
moved_read(const struct seal_ring *ring, bool *served_other, struct kvdisk_stats *st)
{
	struct kvdisk *d;
	uint8_t a[SLOT], b[SLOT];
	bool same = false;
	int rc;

	two_columns(ring);
	file_read(SLOT_OFF(slot_of(0)), a, SLOT);
	file_read(SLOT_OFF(slot_of(1)), b, SLOT);
	memcpy(b + KVDISK_HDR_LEN, a + KVDISK_HDR_LEN, SLOT - KVDISK_HDR_LEN);
	file_write(SLOT_OFF(slot_of(1)), b, SLOT);
	if (ring == NULL)
		forge_sums(slot_of(1));
	d = open_with(ring);
	rc = get(d, 1, 1, &same);
	{
		uint8_t want0[COL * B];
		struct kvdisk_done r;

		/* Served: are they column 0's bytes? */
		*served_other = false;
		if (rc == 0 && !same) {
			cr_assert_eq(kvdisk_get(d, 0, 0x1001, 77, 42), 0);
			r = wait_for(d, 42);
			fill(want0, 0, 1);
			*served_other = r.status == 0 && memcmp(r.data, want0, sizeof(want0)) == 0;
		}
	}
	kvdisk_stats(d, st);
	kvdisk_close(d);
	return rc;
}

Test(kvdisk_seal, a_column_moved_under_another_columns_header_is_dropped_not_served)
{
	struct kvdisk_stats st;
	bool other = false;
	int rc;

	rc = moved_read(NULL, &other, &st);
	cr_assert(rc == 0 && other, "plain: column 0's bytes are served as column 1 (rc %d)", rc);
	afresh();
	rc = moved_read(&ring_a, &other, &st);
	cr_assert_eq(rc, -EBADMSG, "sealed: moved bytes must be dropped (rc %d)", rc);
	cr_assert_eq(st.bad_tag, 1);
}

Test(kvdisk_seal, a_key_not_held_reads_nothing_and_a_rotation_reads_both)
{
	struct kvdisk *d = open_with(&ring_a);
	struct kvdisk_stats st;
	bool same = false;

	put(d, 0, 1);
	put(d, 1, 1);
	put(d, 2, 1);
	kvdisk_close(d);
	/* The new key and the old one: the old key's columns open; what is
	 * written now is sealed under the new key. */
	d = open_with(&ring_ba);
	cr_assert_eq(get(d, 0, 1, &same), 0, "rotation: the old key's column");
	cr_assert(same);
	put(d, 1, 2);
	put(d, 2, 2);
	cr_assert_eq(get(d, 1, 2, &same), 0);
	cr_assert(same);
	kvdisk_close(d);
	/* The rotation rolled back: the old key alone on a file most of whose
	 * columns the new key sealed is another key's file: refused, whole. */
	params.ring = &ring_a;
	errno = 0;
	cr_assert_null(kvdisk_open(path, &params, err, sizeof(err)), "a rollback dropped 2 of 3");
	cr_assert_eq(errno, EKEYREJECTED);
	cr_assert_not_null(strstr(err, "2 of its 3 column headers do not hold"), "%s", err);
	/* The new key alone: the columns it wrote open, the old key's (fewer)
	 * are dropped at open (their headers' MACs are the old key's). */
	d = open_with(&ring_b);
	kvdisk_stats(d, &st);
	cr_assert_eq(st.rebuilt, 2);
	cr_assert_eq(st.rebuild_dropped, 1);
	cr_assert_eq(get(d, 1, 2, &same), 0, "the new key's column");
	cr_assert(same);
	cr_assert_eq(get(d, 0, 1, &same), -ENOENT, "sealed under a key not held");
	kvdisk_close(d);
}

Test(kvdisk_seal, a_file_of_another_key_is_refused_and_nothing_in_it_cleared)
{
	struct kvdisk *d;
	bool same = false;

	two_columns(&ring_a);
	params.ring = &ring_b;
	errno = 0;
	cr_assert_null(kvdisk_open(path, &params, err, sizeof(err)), "opened under another key");
	cr_assert_eq(errno, EKEYREJECTED);
	cr_assert_not_null(strstr(err, "2 of its 2 column headers do not hold"), "%s", err);
	/* With its own key, everything is there still. */
	d = open_with(&ring_a);
	cr_assert_eq(get(d, 0, 1, &same), 0);
	cr_assert(same);
	cr_assert_eq(get(d, 1, 1, &same), 0);
	cr_assert(same);
	kvdisk_close(d);
}

Test(kvdisk_seal, a_sealed_file_without_a_key_and_a_plain_one_with_are_refused_saying_so)
{
	struct kvdisk *d = open_with(&ring_a);

	put(d, 0, 1);
	kvdisk_close(d);
	params.ring = NULL;
	errno = 0;
	cr_assert_null(kvdisk_open(path, &params, err, sizeof(err)));
	cr_assert_eq(errno, EEXIST);
	cr_assert_not_null(strstr(err, "sealed"), "%s", err);
	cr_assert_not_null(strstr(err, "no key file"), "%s", err);
	params.format = true; /* told to: formatted plain, its columns gone */
	d = kvdisk_open(path, &params, err, sizeof(err));
	cr_assert_not_null(d, "%s", err);
	cr_assert_not(kvdisk_has(d, 0, 0x1000, 77));
	put(d, 0, 1);
	kvdisk_close(d);
	params.format = false;
	params.ring = &ring_a;
	errno = 0;
	cr_assert_null(kvdisk_open(path, &params, err, sizeof(err)));
	cr_assert_eq(errno, EEXIST);
	cr_assert_not_null(strstr(err, "plain"), "%s", err);
}

Test(kvdisk_seal, a_ring_without_a_key_is_refused)
{
	struct seal_ring none;

	memset(&none, 0, sizeof(none));
	params.ring = &none;
	cr_assert_null(kvdisk_open(path, &params, err, sizeof(err)));
	cr_assert_not_null(strstr(err, "no key"), "%s", err);
}

/* Byte @p at of column 1's trailer (0: the key id, 4: the nonce, 16: the tag) flipped. */
static int
trailer_read(uint32_t at, struct kvdisk_stats *st)
{
	struct kvdisk *d;
	off_t off = SLOT_OFF(slot_of(1)) + KVDISK_HDR_LEN + COL * B + at;
	bool same = false;
	uint8_t x;
	int rc;

	two_columns(&ring_a);
	file_read(off, &x, 1);
	x ^= 0x01;
	file_write(off, &x, 1);
	d = open_with(&ring_a);
	rc = get(d, 1, 1, &same);
	cr_assert_eq(get(d, 0, 1, &same), 0, "the other column is whole");
	cr_assert(same);
	kvdisk_stats(d, st);
	kvdisk_close(d);
	return rc;
}

Test(kvdisk_seal, a_tampered_trailer_is_dropped_when_read_counted_by_reason)
{
	/* The trailer is outside the header's checksums: only the seal sees it. */
	struct kvdisk_stats st;
	int rc;

	rc = trailer_read(20, &st);
	cr_assert_eq(rc, -EBADMSG, "a flipped tag (rc %d)", rc);
	cr_assert_eq(st.bad_tag, 1);
	afresh();
	rc = trailer_read(6, &st);
	cr_assert_eq(rc, -EBADMSG, "a flipped nonce (rc %d)", rc);
	cr_assert_eq(st.bad_tag, 1);
	afresh();
	rc = trailer_read(0, &st);
	cr_assert_eq(rc, -EBADMSG, "another key id (rc %d)", rc);
	cr_assert_eq(st.bad_key, 1);
	cr_assert_eq(st.bad_tag, 0);
}

/*
 * The additional data binds the header's identity: column 1's first use
 * rewritten and its header's MAC made again (with the file's header key,
 * which only a holder of the master key has: the MAC is not what is
 * tested here), its bytes and trailer left as they were: the tag fails.
 */
Test(kvdisk_seal, a_header_rewritten_under_a_good_mac_fails_its_tag)
{
	struct kvdisk *d;
	struct kvdisk fake;
	struct kvdisk_stats st;
	struct sb sb;
	uint8_t slot[SLOT];
	struct hdr *h = (struct hdr *)slot;
	bool same = false;

	two_columns(&ring_a);
	file_read(0, &sb, sizeof(sb));
	memset(&fake, 0, sizeof(fake));
	memcpy(fake.file_id, sb.file_id, sizeof(fake.file_id));
	fake.model = sb.model;
	fake.shard = sb.shard;
	fake.keys = &ring_a;
	cr_assert_eq(kd_hdr_keys(&fake), 0);
	file_read(SLOT_OFF(slot_of(1)), slot, SLOT);
	cr_assert_eq(h->hdr_hash, kd_hdr_sum(&fake, h, 0, slot_of(1)), "the test's MAC is kvdisk's");
	h->first_use_ns += 1000;
	h->hdr_hash = kd_hdr_sum(&fake, h, 0, slot_of(1));
	file_write(SLOT_OFF(slot_of(1)), slot, SLOT);
	d = open_with(&ring_a);
	cr_assert(kvdisk_has(d, 0, 0x1001, 77), "the header holds: indexed");
	cr_assert_eq(get(d, 1, 1, &same), -EBADMSG, "its identity is not what was sealed");
	kvdisk_stats(d, &st);
	cr_assert_eq(st.bad_tag, 1);
	cr_assert_eq(get(d, 0, 1, &same), 0);
	cr_assert(same);
	kvdisk_close(d);
}

/* Shard 0's sealed file at shard 1's path, its superblock's owner rewritten (hash made good). */
Test(kvdisk_seal, a_sealed_file_of_another_shard_with_its_owner_rewritten_opens_nothing)
{
	struct sb sb;

	two_columns(&ring_a);
	file_read(0, &sb, sizeof(sb));
	sb.shard = 1;
	sb.hash = XXH3_64bits(&sb, offsetof(struct sb, hash));
	file_write(0, &sb, sizeof(sb));
	params.shard = 1;
	params.ring = &ring_a;
	errno = 0;
	cr_assert_null(kvdisk_open(path, &params, err, sizeof(err)), "another shard's columns opened");
	cr_assert_eq(errno, EKEYREJECTED, "%s", err);
}

/* ---- Organization keys (kvdisk_set_orgs) ----------------------------------- */

/* Column @p k of organization @p org, version 1, written and waited for. */
static void
put_org(struct kvdisk *d, uint64_t k, uint64_t org)
{
	uint8_t buf[COL * B];
	struct kvdisk_meta m = {.key = 0x1000 + k, .org = org, .first_use_ns = k, .start = 0,
				.tokens = COL, .cache = 0};

	fill(buf, k, 1);
	cr_assert_eq(kvdisk_put(d, &m, buf, sizeof(buf), 100 + k), 0);
	cr_assert_eq(wait_for(d, 100 + k).status, 0);
}

/* Column @p k of @p org read back: its status (0: its bytes checked). */
static int
get_org(struct kvdisk *d, uint64_t k, uint64_t org)
{
	uint8_t want[COL * B];
	struct kvdisk_done r;
	int rc = kvdisk_get(d, 0, 0x1000 + k, org, 500 + k);

	if (rc != 0)
		return rc;
	r = wait_for(d, 500 + k);
	if (r.status == 0) {
		fill(want, k, 1);
		cr_assert(r.len == sizeof(want) && memcmp(r.data, want, sizeof(want)) == 0,
			  "column %" PRIu64 ": other bytes", k);
	}
	return r.status;
}

Test(kvdisk_seal, a_reset_retires_one_organizations_columns_on_the_disk)
{
	struct seal_orgs *o = seal_orgs_new();
	struct kvdisk_stats st;
	struct kvdisk *d;
	bool dflt;

	cr_assert_not_null(o);
	cr_assert_eq(seal_orgs_name(o, 77), 0);
	d = open_with(&ring_a);
	cr_assert_eq(kvdisk_set_orgs(d, o), 0);
	put_org(d, 0, 77); /* under 77's own key */
	put_org(d, 1, 88); /* under the default key */
	put_org(d, 2, 77);
	cr_assert_eq(get_org(d, 0, 77), 0);
	cr_assert_eq(get_org(d, 1, 88), 0);
	/* The master key alone opens none of them. */
	cr_assert_eq(kvdisk_set_orgs(d, NULL), 0);
	cr_assert_eq(get_org(d, 2, 77), -EBADMSG, "the master key alone opened a column");
	kvdisk_stats(d, &st);
	cr_assert_eq(st.bad_key, 1);
	/* 77 reset: its column refused by its key id, 88's opens. */
	cr_assert_eq(kvdisk_set_orgs(d, o), 0);
	cr_assert_eq(seal_orgs_retire(o, false, 77, &dflt), 0);
	cr_assert_not(dflt);
	cr_assert_eq(get_org(d, 0, 77), -EBADMSG, "a retired key's column was served");
	cr_assert_eq(get_org(d, 1, 88), 0, "another organization's column");
	kvdisk_stats(d, &st);
	cr_assert_eq(st.bad_key, 2);
	/* After the reset, 77's new columns open. */
	put_org(d, 3, 77);
	cr_assert_eq(get_org(d, 3, 77), 0);
	/* The file opens again (its headers are the master key's) and keeps 88's and 77's new one. */
	kvdisk_close(d);
	d = open_with(&ring_a);
	cr_assert_eq(kvdisk_set_orgs(d, o), 0);
	cr_assert_eq(get_org(d, 1, 88), 0);
	cr_assert_eq(get_org(d, 3, 77), 0);
	kvdisk_close(d);
	/* A plain file takes no organization keys. */
	afresh();
	d = open_with(NULL);
	cr_assert_eq(kvdisk_set_orgs(d, o), -EINVAL);
	kvdisk_close(d);
	seal_orgs_free(o);
}

/* What kvdisk_retire_orgs() gave up: the columns' metadata. */
struct gone_list {
	struct kvdisk_meta m[NCOL];
	unsigned int n;
};

static void
gone_add(void *arg, const struct kvdisk_meta *m)
{
	struct gone_list *g = arg;

	cr_assert_lt(g->n, NCOL, "more columns given up than the file holds");
	g->m[g->n++] = *m;
}

/* A copy of store @p o, as a replica reads it again: written to the test's directory, loaded. */
static struct seal_orgs *
store_copy(const struct seal_orgs *o)
{
	char sp[160];
	struct seal_orgs *c;

	snprintf(sp, sizeof(sp), "%s/org.keys", dir);
	unlink(sp);
	cr_assert_eq(seal_orgs_write(sp, o, true, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(seal_orgs_load(sp, &c, err, sizeof(err)), 0, "%s", err);
	return c;
}

/* Every operation out finished (the cleared headers written). */
static void
settle(struct kvdisk *d)
{
	struct kvdisk_done done[16];

	kvdisk_flush(d);
	while (kvdisk_inflight(d) > 0)
		kvdisk_poll(d, done, 16, true);
}

/*
 * Organization 77 named in store @p o; a file opened under a copy of it
 * (*@p was) holding columns 0 and 2 of 77 and 1 of 88 (the default key).
 */
static struct kvdisk *
three_columns(struct seal_orgs *o, struct seal_orgs **was)
{
	struct kvdisk *d;

	cr_assert_eq(seal_orgs_name(o, 77), 0);
	*was = store_copy(o);
	d = open_with(&ring_a);
	cr_assert_eq(kvdisk_set_orgs(d, *was), 0);
	put_org(d, 0, 77);
	put_org(d, 1, 88);
	put_org(d, 2, 77);
	return d;
}

Test(kvdisk_seal, a_new_store_lets_a_retired_keys_columns_go_at_once_and_names_them)
{
	struct seal_orgs *o = seal_orgs_new(), *was, *now;
	struct gone_list g = {.n = 0};
	uint8_t buf[COL * B];
	struct kvdisk_meta m4 = {.key = 0x1004, .org = 77, .first_use_ns = 4, .start = 0,
				 .tokens = COL, .cache = 0};
	struct kvdisk_stats st;
	struct kvdisk *d;
	bool dflt;
	unsigned int i;

	cr_assert_not_null(o);
	d = three_columns(o, &was);
	/* 77's column 4 is being written when the new store comes. */
	fill(buf, 4, 1);
	cr_assert_eq(kvdisk_put(d, &m4, buf, sizeof(buf), 104), 0);
	cr_assert_eq(seal_orgs_retire(o, false, 77, &dflt), 0);
	now = store_copy(o);
	cr_assert_eq(kvdisk_retire_orgs(d, now, gone_add, &g), 2, "77's two columns held");
	cr_assert_eq(g.n, 2);
	for (i = 0; i < g.n; i++)
		cr_assert(g.m[i].org == 77 && (g.m[i].key == 0x1000 || g.m[i].key == 0x1002),
			  "gave up column %" PRIx64 " of %" PRIu64, g.m[i].key, g.m[i].org);
	/* Out of the index at once: never asked of the disk, never served. */
	cr_assert_not(kvdisk_has(d, 0, 0x1000, 77));
	cr_assert_not(kvdisk_has(d, 0, 0x1002, 77));
	cr_assert_eq(get_org(d, 0, 77), -ENOENT);
	/* The write in flight ends failed: sealed under the key retired. */
	cr_assert_eq(wait_for(d, 104).status, -ESTALE);
	cr_assert_not(kvdisk_has(d, 0, 0x1004, 77));
	cr_assert_eq(get_org(d, 1, 88), 0, "another organization's column");
	kvdisk_stats(d, &st);
	cr_assert_eq(st.retired, 3, "%" PRIu64 " retired", st.retired);
	cr_assert_eq(st.bad_key, 0, "nothing was read under the retired key");
	cr_assert_eq(st.stored[0], 1);
	/* 77 writes again under its new key; the same store again gives nothing up. */
	put_org(d, 5, 77);
	cr_assert_eq(get_org(d, 5, 77), 0);
	cr_assert_eq(kvdisk_retire_orgs(d, now, gone_add, &g), 0);
	cr_assert_eq(g.n, 2);
	/* Their headers were cleared: a restart does not bring them back. */
	settle(d);
	kvdisk_close(d);
	d = open_with(&ring_a);
	cr_assert_eq(kvdisk_set_orgs(d, now), 0);
	kvdisk_stats(d, &st);
	cr_assert_eq(st.rebuilt, 2, "%" PRIu64 " columns found at open (88's and 77's new one)",
		     st.rebuilt);
	cr_assert_not(kvdisk_has(d, 0, 0x1000, 77));
	cr_assert_eq(get_org(d, 5, 77), 0);
	kvdisk_close(d);
	/* A plain file has no keys to retire. */
	afresh();
	d = open_with(NULL);
	cr_assert_eq(kvdisk_retire_orgs(d, now, NULL, NULL), -EINVAL);
	kvdisk_close(d);
	seal_orgs_free(now);
	seal_orgs_free(was);
	seal_orgs_free(o);
}

Test(kvdisk_seal, a_file_written_under_a_store_replaced_since_lets_those_columns_go_at_open)
{
	struct seal_orgs *o = seal_orgs_new(), *was, *now;
	struct kvdisk_stats st;
	struct kvdisk *d;
	bool dflt;

	cr_assert_not_null(o);
	d = three_columns(o, &was);
	kvdisk_close(d);
	/* A reset while the shard was down. */
	cr_assert_eq(seal_orgs_retire(o, false, 77, &dflt), 0);
	now = store_copy(o);
	d = open_with(&ring_a);
	cr_assert_eq(kvdisk_set_orgs(d, now), 0);
	kvdisk_stats(d, &st);
	cr_assert_eq(st.rebuilt, 3, "the headers hold under the master key");
	cr_assert_eq(kvdisk_retire_unheld(d), 2, "77's two columns");
	cr_assert_not(kvdisk_has(d, 0, 0x1000, 77));
	cr_assert_not(kvdisk_has(d, 0, 0x1002, 77));
	cr_assert(kvdisk_has(d, 0, 0x1001, 88));
	cr_assert_eq(get_org(d, 1, 88), 0);
	kvdisk_stats(d, &st);
	cr_assert_eq(st.retired, 2);
	cr_assert_eq(st.stored[0], 1);
	cr_assert_eq(st.bad_key, 0, "nothing read under the retired key");
	/* Their headers cleared: the next start finds 88's alone. */
	settle(d);
	kvdisk_close(d);
	d = open_with(&ring_a);
	cr_assert_eq(kvdisk_set_orgs(d, now), 0);
	kvdisk_stats(d, &st);
	cr_assert_eq(st.rebuilt, 1);
	cr_assert_eq(kvdisk_retire_unheld(d), 0, "nothing more to let go");
	kvdisk_close(d);
	/* A plain file has no key ids. */
	afresh();
	d = open_with(NULL);
	cr_assert_eq(kvdisk_retire_unheld(d), -EINVAL);
	kvdisk_close(d);
	seal_orgs_free(now);
	seal_orgs_free(was);
	seal_orgs_free(o);
}
