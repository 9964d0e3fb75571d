/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The wafer emulator's cost a byte (the emulator must never be the
 * bottleneck), each printed as `bench: NAME VALUE UNIT` with its baseline
 * measured in the same run, best of 5 interleaved:
 *  - wafer_fill_8k: lib/wafer making EVICT_DATA payloads (8,916 bytes, a
 *    jumbo frame's) of 8 KiB tokens into a pool of frame buffers much larger
 *    than the caches, as the emulator fills mbufs;
 *  - wafer_check_8k: lib/wafer checking those bytes as one refill's stream
 *    (wafer_refill_bytes, every byte against the reference);
 *  - the same two on the word-by-word path (_word), where the CPU has no
 *    AVX2 or before it was used.
 * Baseline: a plain memcpy of the same frames from one such pool into
 * another, what a shard spends a byte at the least (it copies each one).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mono.h"
#include "wafer.h"

#define FRAME_PAYLOAD 8916 /* MTU 9000 - IPv4 - UDP - KVSS header - DataHeader */
#define FRAME_STRIDE 9216  /* an mbuf's data room */
#define POOL_FRAMES 4096   /* 36 MiB of frames */
#define B 8192
#define STREAM ((uint64_t)POOL_FRAMES * FRAME_PAYLOAD)
#define NTOK ((uint32_t)((STREAM + B - 1) / B))

static uint8_t *src, *dst;
static uint64_t *hash;

static const struct wafer_place at = {0, 1, 0, B};

static double
fill_rate(void)
{
	double t = mono_s();
	uint32_t f;

	for (f = 0; f < POOL_FRAMES; f++)
		wafer_fill(&at, hash, (uint64_t)f * FRAME_PAYLOAD, dst + (size_t)f * FRAME_STRIDE,
			   FRAME_PAYLOAD);
	return (double)STREAM / (mono_s() - t);
}

static double
check_rate(void)
{
	struct wafer_refill r;
	double t;
	uint32_t f;

	if (wafer_refill_init(&r, &at, 1, 1, hash, NTOK) != 0)
		abort();
	t = mono_s();
	for (f = 0; f < POOL_FRAMES; f++)
		if (wafer_refill_bytes(&r, 0, (uint64_t)f * FRAME_PAYLOAD,
				       dst + (size_t)f * FRAME_STRIDE, FRAME_PAYLOAD) != 0) {
			fprintf(stderr, "bench: wafer_check found a bad byte\n");
			exit(1);
		}
	return (double)STREAM / (mono_s() - t);
}

static double
memcpy_rate(void)
{
	double t = mono_s();
	uint32_t f;

	for (f = 0; f < POOL_FRAMES; f++)
		memcpy(src + (size_t)f * FRAME_STRIDE, dst + (size_t)f * FRAME_STRIDE, FRAME_PAYLOAD);
	return (double)STREAM / (mono_s() - t);
}

static void
line(const char *name, double v, double base)
{
	printf("bench: %s %.2f GB/s (baseline %.2f GB/s, ratio %.2f)\n", name, v / 1e9, base / 1e9,
	       v / base);
}

static void
run(const char *suffix, int simd)
{
	double fill = 0, check = 0, mc = 0;
	char n[64];
	int r;

	proto_ref_simd(simd);
	for (r = 0; r < 5; r++) {
		double a = fill_rate(), b = check_rate(), c = memcpy_rate();

		fill = a > fill ? a : fill;
		check = b > check ? b : check;
		mc = c > mc ? c : mc;
	}
	snprintf(n, sizeof(n), "wafer_fill_8k%s", suffix);
	line(n, fill, mc);
	snprintf(n, sizeof(n), "wafer_check_8k%s", suffix);
	line(n, check, mc);
}

int
main(void)
{
	uint64_t h = proto_ref_isolation_id("bench", 5);
	int was = proto_ref_simd(-1);
	uint32_t t;

	src = malloc((size_t)POOL_FRAMES * FRAME_STRIDE);
	dst = malloc((size_t)POOL_FRAMES * FRAME_STRIDE);
	hash = malloc(NTOK * sizeof(*hash));
	if (src == NULL || dst == NULL || hash == NULL) {
		fprintf(stderr, "bench: out of memory\n");
		return 1;
	}
	memset(src, 1, (size_t)POOL_FRAMES * FRAME_STRIDE);
	memset(dst, 2, (size_t)POOL_FRAMES * FRAME_STRIDE);
	for (t = 0; t < NTOK; t++)
		hash[t] = h = proto_ref_hash_next(h, 1000 + t);
	if (was)
		run("", 1);
	else
		printf("bench-wafer: no AVX2 here: the word-by-word path only\n");
	run("_word", 0);
	proto_ref_simd(was);
	free(src);
	free(dst);
	free(hash);
	return 0;
}
