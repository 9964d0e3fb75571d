/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The second tier's engine (lib/kvdisk) on this machine's disk: whole
 * columns written, then read back (every read checked: header, key, XXH3),
 * at a queue depth, in bytes per second of slots moved. Its baseline, fio
 * on the same file system with the same block size and queue depth, is run
 * by scripts/bench-kvdisk.sh, which prints the ratios; this program prints
 * its own figures and the fio job that matches them:
 *
 *   bench_kvdisk DIR [COLUMNS [QD]]
 *
 * One cache of 64-token columns of 4 KiB per token (a 256 KiB column,
 * 260 KiB with its header, 4 KiB aligned), COLUMNS of them (default 4096,
 * about 1 GiB), queue depth QD (default 32). The file is made in a
 * directory of its own under DIR (mkdtemp, 0700: kvdisk refuses a
 * directory others can write, such as /var/tmp itself); both are removed
 * at the end.
 *
 * Then replacements as the shard's tier does them when its L2 is full:
 * a file of the demo's columns (64 tokens of 256 B, a 20 KiB
 * slot), 4 x COLUMNS of them written, then each replaced, a delete of the
 * oldest and a put of a new one, in operations (deletes and puts) per
 * second: once with every delete writing its cleared header at once
 * (kvdisk_params.clear_at_once, the baseline: the old way), once with
 * deletes deferred for a put to take their slot.
 *
 * Then the first two again on a sealed file (kvdisk_params.ring: every
 * column encrypted as it is written, opened as it is read): the cost of
 * shard.l2.key_file, against the plain figures of the same run.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kvdisk.h"
#include "mono.h"

#define TOKENS 64
#define BPT 4096
#define RBPT 256 /* the replacements' bytes per token (the demo's shard 0) */

/* Run @p n operations of one kind, @p qd at a time; returns seconds, or -1. */
static double
run(struct kvdisk *d, bool write, uint32_t n, const uint8_t *data)
{
	struct kvdisk_done done[64];
	uint32_t next = 0, finished = 0, bad = 0;
	double t0 = mono_s();

	while (finished < n) {
		while (next < n) {
			struct kvdisk_meta m = {.key = 1 + next, .org = 7, .start = next * TOKENS,
						.tokens = TOKENS};
			int rc = write ? kvdisk_put(d, &m, data + (size_t)(next % 16) * TOKENS * BPT,
						    TOKENS * BPT, next)
				       : kvdisk_get(d, 0, 1 + next, 7, next);

			if (rc == -EBUSY)
				break;
			if (rc != 0) {
				fprintf(stderr, "bench_kvdisk: %s %u: %d\n", write ? "put" : "get", next, rc);
				return -1;
			}
			next++;
		}
		{
			unsigned int k, got = kvdisk_poll(d, done, 64, true);

			for (k = 0; k < got; k++)
				bad += done[k].status != 0;
			finished += got;
		}
	}
	if (bad) {
		fprintf(stderr, "bench_kvdisk: %u operations failed\n", bad);
		return -1;
	}
	return mono_s() - t0;
}

/*
 * Replace @p n columns of a full file of @p n: delete key k, put key n + k,
 * @p qd at a time. @return operations (deletes and puts) per second, or -1.
 */
static double
replace(const char *path, uint32_t n, uint32_t qd, bool at_once, const uint8_t *data,
	uint64_t *written)
{
	struct kvdisk_params p = {.num_caches = 1, .queue_depth = qd, .clear_at_once = at_once};
	struct kvdisk_done done[64];
	struct kvdisk_stats st;
	char err[1024];
	struct kvdisk *d;
	uint32_t next = 0, k;
	uint64_t finished = 0, bad = 0, want;
	bool deleted = false;
	double t0;

	p.cache[0] = (struct kvdisk_cache_params){RBPT, TOKENS, (uint64_t)n * TOKENS};
	if ((d = kvdisk_open(path, &p, err, sizeof(err))) == NULL) {
		fprintf(stderr, "bench_kvdisk: %s\n", err);
		return -1;
	}
	/* Full: n columns, keys 1..n (not timed). */
	for (k = 0; k < n;) {
		struct kvdisk_meta m = {.key = 1 + k, .org = 7, .tokens = TOKENS};
		int rc = kvdisk_put(d, &m, data, TOKENS * RBPT, k);

		if (rc == 0)
			k++;
		else if (rc != -EBUSY)
			goto fail;
		else
			kvdisk_poll(d, done, 64, true);
	}
	while (kvdisk_inflight(d) > 0)
		kvdisk_poll(d, done, 64, true);
	want = (uint64_t)n * 2;
	t0 = mono_s();
	while (finished < want) {
		while (next < n) {
			struct kvdisk_meta m = {.key = 1 + n + next, .org = 7, .tokens = TOKENS};
			int rc = deleted ? 0 : kvdisk_del(d, 0, 1 + next, 7, next);

			if (rc == -EBUSY)
				break;
			if (rc != 0)
				goto fail;
			deleted = true;
			rc = kvdisk_put(d, &m, data + (size_t)(next % 16) * TOKENS * RBPT,
					TOKENS * RBPT, next);
			if (rc == -EBUSY || rc == -EAGAIN)
				break;
			if (rc != 0)
				goto fail;
			deleted = false;
			next++;
		}
		{
			unsigned int i, got = kvdisk_poll(d, done, 64, true);

			for (i = 0; i < got; i++)
				bad += done[i].status != 0;
			finished += got;
		}
	}
	t0 = mono_s() - t0;
	kvdisk_stats(d, &st);
	*written = st.dels_written;
	kvdisk_close(d);
	unlink(path);
	if (bad) {
		fprintf(stderr, "bench_kvdisk: %" PRIu64 " replacements failed\n", bad);
		return -1;
	}
	return (double)want / t0;
fail:
	fprintf(stderr, "bench_kvdisk: replacing %u failed\n", next);
	kvdisk_close(d);
	unlink(path);
	return -1;
}

int
main(int argc, char **argv)
{
	const char *dir = argc > 1 ? argv[1] : "/var/tmp";
	uint32_t n = argc > 2 ? (uint32_t)strtoul(argv[2], NULL, 0) : 4096;
	uint32_t qd = argc > 3 ? (uint32_t)strtoul(argv[3], NULL, 0) : 32;
	struct kvdisk_params p = {.num_caches = 1, .queue_depth = qd};
	char own[480], path[512], err[1024];
	uint64_t slot = (KVDISK_HDR_LEN + TOKENS * BPT + KVDISK_ALIGN - 1) / KVDISK_ALIGN * KVDISK_ALIGN;
	uint8_t *data = malloc((size_t)16 * TOKENS * BPT);
	struct kvdisk *d;
	double tw, tr, tws = -1, trs = -1, rold = -1, rnew = -1;
	struct seal_ring ring = {0};
	uint64_t wold = 0, wnew = 0;
	size_t i;

	if (data == NULL || n == 0 || qd == 0 || qd > 64)
		return 2;
	for (i = 0; i < (size_t)16 * TOKENS * BPT; i++)
		data[i] = (uint8_t)(i * 2654435761u >> 13);
	snprintf(own, sizeof(own), "%s/kvss_bench_l2.XXXXXX", dir);
	if (mkdtemp(own) == NULL) {
		fprintf(stderr, "bench_kvdisk: %s: %s\n", own, strerror(errno));
		return 1;
	}
	snprintf(path, sizeof(path), "%s/l2.bin", own);
	p.cache[0] = (struct kvdisk_cache_params){BPT, TOKENS, (uint64_t)n * TOKENS};
	d = kvdisk_open(path, &p, err, sizeof(err));
	if (d == NULL) {
		fprintf(stderr, "bench_kvdisk: %s\n", err);
		unlink(path);
		rmdir(own);
		return 1;
	}
	tw = run(d, true, n, data);
	tr = tw < 0 ? -1 : run(d, false, n, NULL);
	if (!kvdisk_direct(d))
		printf("bench: note: %s refused O_DIRECT: the page cache was used\n", dir);
	kvdisk_close(d);
	unlink(path);
	/* The same, sealed (a key of bytes 0..31). */
	{
		uint8_t k[SEAL_KEY_LEN];

		for (i = 0; i < SEAL_KEY_LEN; i++)
			k[i] = (uint8_t)i;
		if (tw >= 0 && tr >= 0 && seal_key_from(&ring.cur, k) == 0) {
			p.ring = &ring;
			d = kvdisk_open(path, &p, err, sizeof(err));
			p.ring = NULL;
			if (d == NULL) {
				fprintf(stderr, "bench_kvdisk: %s\n", err);
			} else {
				tws = run(d, true, n, data);
				trs = tws < 0 ? -1 : run(d, false, n, NULL);
				kvdisk_close(d);
			}
			unlink(path);
		}
	}
	if (tw >= 0 && tr >= 0) {
		rold = replace(path, 4 * n, qd, true, data, &wold);
		rnew = rold < 0 ? -1 : replace(path, 4 * n, qd, false, data, &wnew);
	}
	rmdir(own);
	free(data);
	if (tw < 0 || tr < 0 || tws < 0 || trs < 0 || rold < 0 || rnew < 0)
		return 1;
	/* Bytes of slots moved (what fio moves at bs = the slot), and of columns. */
	printf("kvdisk: slot_bytes %" PRIu64 " columns %u qd %u file %s\n", slot, n, qd, path);
	printf("bench: kvdisk_write %.3f GB/s\n", (double)n * (double)slot / tw / 1e9);
	printf("bench: kvdisk_read %.3f GB/s\n", (double)n * (double)slot / tr / 1e9);
	printf("bench: kvdisk_write_sealed %.3f GB/s (baseline %.3f GB/s, ratio %.3f)\n",
	       (double)n * (double)slot / tws / 1e9, (double)n * (double)slot / tw / 1e9, tw / tws);
	printf("bench: kvdisk_read_sealed %.3f GB/s (baseline %.3f GB/s, ratio %.3f)\n",
	       (double)n * (double)slot / trs / 1e9, (double)n * (double)slot / tr / 1e9, tr / trs);
	printf("bench: kvdisk_write_columns %.0f columns/s\n", n / tw);
	printf("bench: kvdisk_read_columns %.0f columns/s\n", n / tr);
	printf("kvdisk: replacements of %u columns of %u B: %" PRIu64 " cleared headers written "
	       "clearing at once, %" PRIu64 " deferred\n", 4 * n, TOKENS * RBPT, wold, wnew);
	printf("bench: kvdisk_replace %.0f ops/s (baseline %.0f ops/s, ratio %.3f)\n", rnew, rold,
	       rnew / rold);
	return 0;
}
