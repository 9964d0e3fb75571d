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
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kvdisk.h"

#define TOKENS 64
#define BPT 4096

static double
now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Run @p n operations of one kind, @p qd at a time; returns seconds, or -1. */
static double
run(struct kvdisk *d, bool write, uint32_t n, const uint8_t *data)
{
	struct kvdisk_done done[64];
	uint32_t next = 0, finished = 0, bad = 0;
	double t0 = now();

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
	return now() - t0;
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
	double tw, tr;
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
	rmdir(own);
	free(data);
	if (tw < 0 || tr < 0)
		return 1;
	/* Bytes of slots moved (what fio moves at bs = the slot), and of columns. */
	printf("kvdisk: slot_bytes %" PRIu64 " columns %u qd %u file %s\n", slot, n, qd, path);
	printf("bench: kvdisk_write %.3f GB/s\n", (double)n * (double)slot / tw / 1e9);
	printf("bench: kvdisk_read %.3f GB/s\n", (double)n * (double)slot / tr / 1e9);
	printf("bench: kvdisk_write_columns %.0f columns/s\n", n / tw);
	printf("bench: kvdisk_read_columns %.0f columns/s\n", n / tr);
	return 0;
}
