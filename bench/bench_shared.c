/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The shared level's client (lib/shared) moving whole columns: N objects of
 * SIZE bytes written (exclusive create + write_full, as a shard writes a
 * slice), then read back whole (every read checked: length and the
 * object's stamp at both ends), DEPTH ops in flight, in the default
 * namespace of the pool. Its baseline, fio's rados engine on the same pool
 * with the same object size and depth, is run by scripts/bench-shared.sh
 * (which starts the cluster), in the same run:
 *
 *   bench_shared CONF both PREFIX N DEPTH SIZE   time the writes, then the
 *                                                reads; then delete them
 *   bench_shared CONF fill PREFIX N DEPTH SIZE   write them, untimed, and
 *                                                keep them (fio reads them)
 *   bench_shared CONF sealed PREFIX N DEPTH SIZE as both, each object sealed
 *                                                as a shard seals a slice
 *                                                before it is written (its
 *                                                organization's key derived,
 *                                                AES-256-GCM, the tag in its
 *                                                last 16 bytes) and opened
 *                                                after it is read, on the
 *                                                thread that submits
 *   bench_shared CONF orgkeys PREFIX N DEPTH SIZE as sealed, with an
 *                                                organization key store
 *                                                (shared.org_key_file): the
 *                                                master key mixed with the
 *                                                organization's at each seal
 *                                                and open
 *
 * Objects are named PREFIX.0 .. PREFIX.<N-1>. Prints
 * "shared: write_gbps G p50_ms P p99_ms Q" and the same for read (GB/s of
 * object bytes, 1e9).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mono.h"
#include "orgkeys.h"
#include "percentile.h"
#include "shared.h"
#include "shared_seal.h"

#define MAX_DEPTH 256

/* "sealed": the master key objects are sealed under (its bytes 0..31). */
static struct seal_ring bench_ring;
static bool sealed;
/* Each object's header, from its write to its read (sealed: its nonce, its length). */
static struct shared_hdr *bench_hdrs;

/*
 * As a shard seals and opens a slice (shared_slice_seal(), _open()): a
 * key of the slice's own derived for each object (its number @p i as the
 * object id), a random nonce for each write, the tag after the bytes.
 * The header (@p h, one per object) is kept, not written: the figure is
 * the cost of the seal on the level's reads and writes.
 */
static int
seal_obj(uint8_t *b, uint32_t size, struct shared_hdr *h, uint64_t i, bool open)
{
	if (open)
		return shared_slice_open(h, b, &bench_ring) == SHARED_OK ? 0 : -1;
	struct seal_key k;
	int rc;

	*h = (struct shared_hdr){.kind = SHARED_SLICE, .org = 0x3333, .object_id = i + 1,
				 .payload_len = size - SEAL_TAG_LEN};
	/* The key a shard seals with: the master key, or the pair with a store. */
	rc = seal_ring_key(&bench_ring, h->org, &k);
	return rc == 0 ? shared_slice_seal(h, b, &k) : rc;
}

static void
stamp(uint8_t *b, uint32_t size, uint64_t i)
{
	memcpy(b, &i, sizeof(i));
	memcpy(b + size - sizeof(i), &i, sizeof(i));
}

static bool
stamped(const uint8_t *b, uint32_t size, uint64_t i)
{
	return memcmp(b, &i, sizeof(i)) == 0 && memcmp(b + size - sizeof(i), &i, sizeof(i)) == 0;
}

/* Run @p n ops of @p op at @p depth; seconds, or -1 on any failure. Per-op
 * latencies into @p lat (seconds). */
static double
run(struct shared *s, int op, const char *prefix, uint32_t n, uint32_t depth, uint32_t size,
    uint8_t *bufs, double *lat)
{
	struct shared_done d[MAX_DEPTH];
	uint32_t buf_of_free[MAX_DEPTH], nfree = depth, next = 0, done = 0, i;
	uint32_t *buf_of = calloc(n, sizeof(*buf_of));
	double *t_sub = calloc(n, sizeof(*t_sub));
	struct shared_hdr *hdrs = bench_hdrs;
	double t0 = mono_s(), t;
	char name[64];
	int bad = 0;

	if (buf_of == NULL || t_sub == NULL) {
		free(buf_of);
		free(t_sub);
		return -1;
	}
	for (i = 0; i < depth; i++)
		buf_of_free[i] = i;
	while (done < n && bad == 0) {
		while (next < n && nfree > 0) {
			uint8_t *b;
			int rc;

			buf_of[next] = buf_of_free[--nfree];
			b = bufs + (size_t)buf_of[next] * size;
			snprintf(name, sizeof(name), "%s.%u", prefix, next);
			t_sub[next] = mono_s();
			if (op == SHARED_OP_PUT) {
				stamp(b, size - (sealed ? SEAL_TAG_LEN : 0), next);
				if (sealed && seal_obj(b, size, &hdrs[next], next, false) != 0) {
					fprintf(stderr, "bench_shared: sealing %s failed\n", name);
					bad++;
					break;
				}
				rc = shared_put(s, "", name, b, size, next);
			} else if (op == SHARED_OP_GET) {
				rc = shared_get(s, "", name, b, size, next);
			} else {
				rc = shared_del(s, "", name, next);
			}
			if (rc < 0) {
				fprintf(stderr, "bench_shared: submit %s: %s\n", name, strerror(-rc));
				bad++;
				break;
			}
			next++;
		}
		unsigned int got = shared_poll(s, d, MAX_DEPTH, 1000), k;

		t = mono_s();
		for (k = 0; k < got; k++) {
			uint64_t c = d[k].cookie;

			done++;
			lat[c] = t - t_sub[c];
			buf_of_free[nfree++] = buf_of[c];
			if (d[k].status != 0) {
				fprintf(stderr, "bench_shared: %s.%" PRIu64 ": %s\n", prefix, c,
					strerror(-d[k].status));
				bad++;
			} else if (op == SHARED_OP_GET &&
				   (d[k].len != size ||
				    (sealed && seal_obj(bufs + (size_t)buf_of[c] * size, size, &hdrs[c], c,
							true) != 0) ||
				    !stamped(bufs + (size_t)buf_of[c] * size,
					     size - (sealed ? SEAL_TAG_LEN : 0), c))) {
				fprintf(stderr, "bench_shared: %s.%" PRIu64 " read back wrong\n", prefix,
					c);
				bad++;
			}
		}
	}
	t = mono_s() - t0;
	/* Whatever is still in flight ends before the buffers go. */
	while (shared_inflight(s) > 0)
		shared_poll(s, d, MAX_DEPTH, 1000);
	free(buf_of);
	free(t_sub);
	return bad == 0 ? t : -1;
}

static void
report(const char *what, uint32_t n, uint32_t size, double secs, double *lat)
{
	percentile_sort_double(lat, n);
	printf("shared: %s_gbps %.3f p50_ms %.1f p99_ms %.1f (%u objects of %u bytes in %.2f s)\n",
	       what, (double)n * size / secs / 1e9, percentile_double(lat, n, 50) * 1e3,
	       percentile_double(lat, n, 99) * 1e3, n, size, secs);
}

int
main(int argc, char **argv)
{
	struct shared_params p = { .client = "client.admin", .op_timeout_ms = 30000 };
	struct shared *s;
	char err[256];
	unsigned long n, depth, size;
	uint8_t *bufs;
	double *lat, secs;
	bool fill;
	int ret = 1;

	if (argc != 7 || (strcmp(argv[2], "both") != 0 && strcmp(argv[2], "fill") != 0 &&
			  strcmp(argv[2], "sealed") != 0 && strcmp(argv[2], "orgkeys") != 0)) {
		fprintf(stderr, "usage: bench_shared CONF both|fill|sealed|orgkeys PREFIX N DEPTH SIZE\n");
		return 2;
	}
	fill = strcmp(argv[2], "fill") == 0;
	sealed = strcmp(argv[2], "sealed") == 0 || strcmp(argv[2], "orgkeys") == 0;
	if (strcmp(argv[2], "orgkeys") == 0) {
		/* A store naming the organization (a reset gave it a key of its own). */
		bench_ring.orgs = seal_orgs_new();
		if (bench_ring.orgs == NULL || seal_orgs_name(bench_ring.orgs, 0x3333) != 0) {
			fprintf(stderr, "bench_shared: no organization keys (libcrypto)\n");
			return 1;
		}
	}
	{
		uint8_t k[SEAL_KEY_LEN];
		unsigned int i;

		for (i = 0; i < SEAL_KEY_LEN; i++)
			k[i] = (uint8_t)i;
		if (seal_key_from(&bench_ring.cur, k) != 0) {
			fprintf(stderr, "bench_shared: no key (libcrypto)\n");
			return 1;
		}
	}
	n = strtoul(argv[4], NULL, 10);
	depth = strtoul(argv[5], NULL, 10);
	size = strtoul(argv[6], NULL, 10);
	/* A sealed object holds its two stamps and its tag. */
	if (n == 0 || n > 1000000 || depth == 0 || depth > MAX_DEPTH || size < 16 ||
	    (sealed && size < 16 + SEAL_TAG_LEN) || size > SHARED_PUT_MAX) {
		fprintf(stderr, "bench_shared: N 1..1e6, DEPTH 1..%d, SIZE 16..%u\n", MAX_DEPTH,
			SHARED_PUT_MAX);
		return 2;
	}
	p.conf = argv[1];
	p.max_inflight = (uint32_t)depth;
	bufs = malloc(depth * size);
	lat = calloc(n, sizeof(*lat));
	bench_hdrs = sealed ? calloc(n, sizeof(*bench_hdrs)) : NULL;
	if (bufs == NULL || lat == NULL || (sealed && bench_hdrs == NULL)) {
		fprintf(stderr, "bench_shared: out of memory\n");
		goto out_free;
	}
	memset(bufs, 0x5a, depth * size);
	s = shared_open(&p, err, sizeof(err));
	if (s == NULL) {
		fprintf(stderr, "bench_shared: %s\n", err);
		goto out_free;
	}
	secs = run(s, SHARED_OP_PUT, argv[3], (uint32_t)n, (uint32_t)depth, (uint32_t)size, bufs,
		   lat);
	if (secs < 0)
		goto out_close;
	if (!fill) {
		report("write", (uint32_t)n, (uint32_t)size, secs, lat);
		secs = run(s, SHARED_OP_GET, argv[3], (uint32_t)n, (uint32_t)depth,
			   (uint32_t)size, bufs, lat);
		if (secs < 0)
			goto out_close;
		report("read", (uint32_t)n, (uint32_t)size, secs, lat);
		if (run(s, SHARED_OP_DEL, argv[3], (uint32_t)n, (uint32_t)depth, (uint32_t)size,
			bufs, lat) < 0)
			goto out_close;
	}
	ret = 0;
out_close:
	shared_close(s);
out_free:
	free(bufs);
	free(lat);
	free(bench_hdrs);
	return ret;
}
