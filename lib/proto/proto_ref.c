/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Reference wafer content (PROTOCOL.md section 6): a pure function of the
 * token's prefix, so any tool can check replayed bytes without storing them.
 */
#include "proto.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

#define GOLDEN 0x9E3779B97F4A7C15ULL

uint64_t
proto_ref_isolation_id(const void *name, size_t len)
{
	return XXH3_64bits_withSeed(name, len, 0);
}

uint64_t
proto_ref_hash_next(uint64_t prev, uint32_t token)
{
	uint8_t b[4];

	proto_st32(b, token);
	return XXH3_64bits_withSeed(b, sizeof(b), prev);
}

static inline uint64_t
stream_base(uint64_t h, uint32_t model, uint32_t shard, uint32_t cache)
{
	return h ^ (GOLDEN * (1 + (uint64_t)cache + 256 * (uint64_t)shard + 65536 * (uint64_t)model));
}

/* Word k of the splitmix64 stream that starts at @x: random access. */
static inline uint64_t
stream_word(uint64_t x, uint64_t k)
{
	uint64_t z = x + (k + 1) * GOLDEN;

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
	return z ^ (z >> 31);
}

void
proto_ref_fill(uint64_t h, uint32_t model, uint32_t shard, uint32_t cache, uint64_t off,
	       void *out, size_t len)
{
	uint64_t x = stream_base(h, model, shard, cache);
	uint8_t *o = out;
	uint64_t k = off / 8;
	unsigned int skip = (unsigned int)(off % 8);
	uint8_t w[8];

	if (len == 0)
		return;
	if (skip != 0) {
		size_t n = 8 - skip < len ? 8 - skip : len;

		proto_st64(w, stream_word(x, k++));
		memcpy(o, w + skip, n);
		o += n;
		len -= n;
	}
	while (len >= 8) {
		proto_st64(o, stream_word(x, k++));
		o += 8;
		len -= 8;
	}
	if (len != 0) {
		proto_st64(w, stream_word(x, k));
		memcpy(o, w, len);
	}
}

size_t
proto_ref_check(uint64_t h, uint32_t model, uint32_t shard, uint32_t cache, uint64_t off,
		const void *p, size_t len)
{
	uint8_t ref[256];
	const uint8_t *q = p;
	size_t done = 0;

	while (done < len) {
		size_t n = len - done < sizeof(ref) ? len - done : sizeof(ref);
		size_t i;

		proto_ref_fill(h, model, shard, cache, off + done, ref, n);
		if (memcmp(ref, q + done, n) != 0) {
			for (i = 0; i < n; i++)
				if (ref[i] != q[done + i])
					return done + i + 1;
		}
		done += n;
	}
	return 0;
}
