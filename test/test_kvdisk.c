/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * lib/kvdisk, the shard's second tier, on real files: columns put, read back
 * byte for byte, kept across a close and a reopen, deleted for good (also
 * after a reopen), a flipped byte caught and the column dropped, a file of
 * another configuration or of something else refused, a disk too small
 * refused at open (a 1 MiB tmpfs), and the queue's bounds.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kvdisk.h"

#define B 96	/* bytes per token */
#define COL 16	/* tokens per column */
#define NCOL 40 /* columns of room */

static char dir[64], path[128], err[512];
static struct kvdisk_params params;

static void
setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/kvss_test_kvdisk_%d", (int)getpid());
	cr_assert_eq(mkdir(dir, 0700), 0);
	snprintf(path, sizeof(path), "%s/l2.bin", dir);
	memset(&params, 0, sizeof(params));
	params.num_caches = 1;
	params.cache[0] = (struct kvdisk_cache_params){B, COL, (uint64_t)NCOL * COL};
	params.queue_depth = 8;
}

static void
teardown(void)
{
	char cmd[160];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	cr_assert_eq(system(cmd), 0);
}

TestSuite(kvdisk, .init = setup, .fini = teardown, .timeout = 60);

/* Column @k's bytes, version @v: every byte depends on both. */
static void
fill(uint8_t *out, uint64_t k, uint32_t v, uint32_t tokens)
{
	uint32_t i;

	for (i = 0; i < tokens * B; i++)
		out[i] = (uint8_t)(k * 131 + v * 17 + i * 7 + (i >> 8));
}

static struct kvdisk_meta
meta(uint64_t k, uint32_t tokens)
{
	return (struct kvdisk_meta){.key = 0x1000 + k, .parent = k ? 0x1000 + k - 1 : 0,
				    .org = 77, .first_use_ns = 1000 * k, .start = (uint32_t)k * COL,
				    .tokens = tokens, .cache = 0};
}

/* Finished operations not yet asked for (their GET bytes are not kept). */
static struct kvdisk_done stash[64];
static unsigned int nstash;

/* Poll until the operation with @p cookie finishes; its done record. */
static struct kvdisk_done
wait_for(struct kvdisk *d, uint64_t cookie)
{
	struct kvdisk_done done[16], r;
	unsigned int i, n;

	for (i = 0; i < nstash; i++)
		if (stash[i].cookie == cookie) {
			r = stash[i];
			stash[i] = stash[--nstash];
			return r;
		}
	for (;;) {
		bool found = false;

		n = kvdisk_poll(d, done, 16, true);
		cr_assert(n > 0 || kvdisk_inflight(d) > 0, "operation %" PRIu64 " never finished",
			  cookie);
		for (i = 0; i < n; i++) {
			if (done[i].cookie == cookie && !found) {
				r = done[i];
				found = true;
			} else {
				cr_assert_lt(nstash, 64);
				stash[nstash++] = done[i];
			}
		}
		if (found)
			return r;
	}
}

static int
put_sync(struct kvdisk *d, uint64_t k, uint32_t v)
{
	uint8_t buf[COL * B];
	struct kvdisk_meta m = meta(k, COL);
	int rc;

	fill(buf, k, v, COL);
	rc = kvdisk_put(d, &m, buf, COL * B, 100 + k);
	if (rc != 0)
		return rc;
	return wait_for(d, 100 + k).status;
}

/* Read column @k back: its status; when 0, its bytes checked against version @v. */
static int
get_check(struct kvdisk *d, uint64_t k, uint32_t v)
{
	uint8_t want[COL * B];
	struct kvdisk_done r;
	int rc = kvdisk_get(d, 0, 0x1000 + k, 77, 500 + k);

	if (rc != 0)
		return rc;
	r = wait_for(d, 500 + k);
	if (r.status != 0)
		return r.status;
	fill(want, k, v, COL);
	cr_assert_eq(r.len, COL * B);
	cr_assert_arr_eq(r.data, want, COL * B, "column %" PRIu64 " bytes", k);
	cr_assert_eq(r.meta.parent, k ? 0x1000 + k - 1 : 0);
	cr_assert_eq(r.meta.first_use_ns, 1000 * k);
	return 0;
}

static struct kvdisk *
open_ok(void)
{
	struct kvdisk *d = kvdisk_open(path, &params, err, sizeof(err));

	cr_assert_not_null(d, "%s", err);
	return d;
}

Test(kvdisk, columns_come_back_byte_for_byte_and_after_a_reopen)
{
	struct kvdisk *d = open_ok();
	struct kvdisk_stats st;
	struct stat sb;
	uint64_t k;

	cr_assert_eq(stat(path, &sb), 0);
	cr_assert_eq(sb.st_mode & 0777, 0600, "created %o", sb.st_mode & 0777);
	cr_assert_eq(kvdisk_slots(d, 0), NCOL);
	for (k = 0; k < 10; k++)
		cr_assert_eq(put_sync(d, k, 1), 0);
	for (k = 0; k < 10; k++)
		cr_assert_eq(get_check(d, k, 1), 0);
	cr_assert_eq(get_check(d, 99, 1), -ENOENT);
	cr_assert_eq(kvdisk_get(d, 0, 0x1000 + 3, 78, 1), -ENOENT, "another organization's");
	/* Deleted: gone now, and after a reopen. Replaced: the new bytes. */
	cr_assert_eq(kvdisk_del(d, 0, 0x1000 + 4, 77, 900), 0);
	cr_assert_eq(wait_for(d, 900).status, 0);
	cr_assert_eq(get_check(d, 4, 1), -ENOENT);
	cr_assert_eq(put_sync(d, 5, 2), 0);
	cr_assert_eq(get_check(d, 5, 2), 0);
	kvdisk_stats(d, &st);
	cr_assert_eq(st.stored[0], 9);
	kvdisk_close(d);

	d = open_ok();
	kvdisk_stats(d, &st);
	cr_assert_eq(st.rebuilt, 9, "rebuilt %" PRIu64, st.rebuilt);
	cr_assert_eq(st.rebuild_dropped, 0);
	cr_assert_eq(get_check(d, 4, 1), -ENOENT, "a deleted column came back");
	cr_assert_eq(get_check(d, 5, 2), 0, "the replaced column's old bytes came back");
	for (k = 0; k < 10; k++)
		if (k != 4 && k != 5)
			cr_assert_eq(get_check(d, k, 1), 0);
	kvdisk_close(d);
}

Test(kvdisk, a_flipped_byte_is_caught_and_the_column_dropped_for_good)
{
	struct kvdisk *d = open_ok();
	struct kvdisk_stats st;
	uint8_t x;
	int fd;

	cr_assert_eq(put_sync(d, 0, 1), 0);
	cr_assert_eq(put_sync(d, 1, 1), 0);
	kvdisk_close(d);
	/* One byte of column 1's data (slot 1 of the only region: after the
	 * superblock and slot 0; the slot is 64 + 16 x 96 bytes, 4 KiB). */
	fd = open(path, O_RDWR);
	cr_assert_geq(fd, 0);
	cr_assert_eq(pread(fd, &x, 1, 4096 + 4096 + 64 + 1000), 1);
	x ^= 0x20;
	cr_assert_eq(pwrite(fd, &x, 1, 4096 + 4096 + 64 + 1000), 1);
	close(fd);
	d = open_ok();
	cr_assert(kvdisk_has(d, 0, 0x1001, 77), "the header still checks: found at open");
	cr_assert_eq(get_check(d, 1, 1), -EBADMSG);
	cr_assert_not(kvdisk_has(d, 0, 0x1001, 77), "dropped once caught");
	cr_assert_eq(get_check(d, 0, 1), 0, "the other column is whole");
	kvdisk_stats(d, &st);
	cr_assert_eq(st.corrupt, 1);
	kvdisk_close(d);
	d = open_ok();
	kvdisk_stats(d, &st);
	cr_assert_eq(st.rebuilt, 1, "its header was cleared: not found again");
	kvdisk_close(d);
}

Test(kvdisk, a_torn_header_is_not_taken_at_open)
{
	struct kvdisk *d = open_ok();
	struct kvdisk_stats st;
	uint8_t x = 0x55;
	int fd;

	cr_assert_eq(put_sync(d, 0, 1), 0);
	kvdisk_close(d);
	fd = open(path, O_RDWR);
	cr_assert_eq(pwrite(fd, &x, 1, 4096 + 20), 1); /* inside the key */
	close(fd);
	d = open_ok();
	kvdisk_stats(d, &st);
	cr_assert_eq(st.rebuilt, 0);
	cr_assert_eq(st.rebuild_dropped, 1);
	kvdisk_close(d);
}

Test(kvdisk, a_file_of_another_configuration_or_of_something_else_is_refused)
{
	struct kvdisk *d = open_ok();
	FILE *f;

	cr_assert_eq(put_sync(d, 0, 1), 0);
	kvdisk_close(d);
	params.cache[0].capacity_tokens = 2 * NCOL * COL;
	cr_assert_null(kvdisk_open(path, &params, err, sizeof(err)));
	cr_assert(strstr(err, "made for another configuration (it holds 1 cache(s): [0] 16 tokens x "
			      "96 B, 40 columns; this one asks 1 cache(s): [0] 16 tokens x 96 B, 80 "
			      "columns)") != NULL, "%s", err);
	snprintf(path, sizeof(path), "%s/other.bin", dir);
	f = fopen(path, "w");
	cr_assert_not_null(f);
	fprintf(f, "%08192d", 7);
	fclose(f);
	cr_assert_null(kvdisk_open(path, &params, err, sizeof(err)));
	cr_assert(strstr(err, "not a kvss second-tier file") != NULL, "%s", err);
	cr_assert_null(kvdisk_open("/dev/zero", &params, err, sizeof(err)));
	cr_assert(strstr(err, "not a regular file or a block device") != NULL, "%s", err);
}

Test(kvdisk, a_disk_too_small_is_refused_at_open)
{
	char mnt[96];

	snprintf(mnt, sizeof(mnt), "%s/small", dir);
	cr_assert_eq(mkdir(mnt, 0700), 0);
	if (mount("kvss_test", mnt, "tmpfs", 0, "size=1m") != 0)
		cr_skip_test("cannot mount a tmpfs here (%s): needs root", strerror(errno));
	snprintf(path, sizeof(path), "%s/l2.bin", mnt);
	params.cache[0].capacity_tokens = 4096 * COL; /* 16 MiB */
	cr_assert_null(kvdisk_open(path, &params, err, sizeof(err)));
	umount(mnt);
	cr_assert(strstr(err, "cannot allocate 16781312 bytes for the second tier: No space left on "
			      "device") != NULL, "%s", err);
}

Test(kvdisk, a_full_tier_and_a_full_queue_say_so)
{
	struct kvdisk *d;
	uint8_t buf[COL * B];
	struct kvdisk_meta m;
	uint64_t k;

	params.cache[0].capacity_tokens = 3 * COL;
	d = open_ok();
	for (k = 0; k < 3; k++)
		cr_assert_eq(put_sync(d, k, 1), 0);
	m = meta(3, COL);
	fill(buf, 3, 1, COL);
	cr_assert_eq(kvdisk_put(d, &m, buf, COL * B, 1), -ENOSPC, "the driver deletes first");
	m.tokens = COL + 1;
	cr_assert_eq(kvdisk_put(d, &m, buf, COL * B, 1), -EINVAL, "more than a column");
	cr_assert_eq(kvdisk_del(d, 0, 0x1000, 77, 2), 0);
	m.tokens = COL;
	cr_assert_eq(kvdisk_put(d, &m, buf, COL * B, 1), -EAGAIN,
		     "the only room is a slot whose cleared header is not written yet");
	cr_assert_eq(wait_for(d, 2).status, 0);
	cr_assert_eq(put_sync(d, 3, 1), 0);
	/* Eight reads in flight fill a queue of eight. */
	for (k = 0; k < 8; k++)
		cr_assert_eq(kvdisk_get(d, 0, 0x1001, 77, 10 + k), 0);
	cr_assert_eq(kvdisk_get(d, 0, 0x1001, 77, 99), -EBUSY);
	for (k = 0; k < 8; k++)
		cr_assert_eq(wait_for(d, 10 + k).status, 0);
	kvdisk_close(d);
}

Test(kvdisk, a_column_deleted_while_read_is_read_whole_then_cleared)
{
	struct kvdisk *d = open_ok();
	struct kvdisk_done r;
	uint8_t want[COL * B];
	struct kvdisk_stats st;

	cr_assert_eq(put_sync(d, 0, 1), 0);
	cr_assert_eq(kvdisk_get(d, 0, 0x1000, 77, 1), 0);
	cr_assert_eq(kvdisk_del(d, 0, 0x1000, 77, 2), 0);
	r = wait_for(d, 1);
	cr_assert_eq(r.status, 0);
	fill(want, 0, 1, COL);
	cr_assert_arr_eq(r.data, want, COL * B);
	cr_assert_eq(wait_for(d, 2).status, 0);
	kvdisk_close(d);
	d = open_ok();
	kvdisk_stats(d, &st);
	cr_assert_eq(st.rebuilt, 0);
	kvdisk_close(d);
}
