/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * lib/proto's reference content (PROTOCOL.md section 6) made and checked
 * word by word and with AVX2: both paths against the section's definition
 * written out a byte at a time here, and a single wrong byte anywhere
 * (aligned or not, in a head, a body or a tail) found where it is.
 */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proto.h"

#define G 0x9E3779B97F4A7C15ULL

/* Byte i of the stream of (h, m, s, c), as section 6 says it. */
static uint8_t
def_byte(uint64_t h, uint32_t m, uint32_t s, uint32_t c, uint64_t i)
{
	uint64_t x = h ^ (G * (1 + (uint64_t)c + 256 * (uint64_t)s + 65536 * (uint64_t)m));
	uint64_t z = x + (i / 8 + 1) * G; /* x after k + 1 steps of x += G, k = i / 8 */

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
	z ^= z >> 31;
	return (uint8_t)(z >> (8 * (i % 8)));
}

/* The paths this machine has: the word-by-word one, and AVX2 if it can. */
static int
paths(int *p)
{
	int was = proto_ref_simd(-1), n = 0;

	p[n++] = 0;
	proto_ref_simd(1);
	if (proto_ref_simd(-1) == 1)
		p[n++] = 1;
	proto_ref_simd(was);
	return n;
}

static uint64_t rng = 0x1234567;

static uint64_t
next_rand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

#define BIG (3 * 4096 + 200) /* crosses the check's 4 KiB blocks */

Test(reference_fast, fill_is_the_definition_on_every_path)
{
	static uint8_t got[BIG + 16];
	int p[2], np = paths(p), was = proto_ref_simd(-1), i;

	for (i = 0; i < np; i++) {
		unsigned int off, len, t;

		proto_ref_simd(p[i]);
		for (off = 0; off < 40; off++)
			for (len = 0; len < 300; len += (len < 80 ? 1 : 13)) {
				uint64_t o = 4096 * 3 + off; /* a word index past the first */

				memset(got, 0xA5, len + 16);
				proto_ref_fill(0xdeadbeef, 2, 1, 3, o, got, len);
				for (t = 0; t < len; t++)
					cr_assert_eq(got[t], def_byte(0xdeadbeef, 2, 1, 3, o + t),
						     "simd %d off %u len %u byte %u", p[i], off, len, t);
				for (t = len; t < len + 16; t++)
					cr_assert_eq(got[t], 0xA5, "wrote past the end (len %u)", len);
			}
		for (t = 0; t < 200; t++) {
			uint64_t h = next_rand(), o = next_rand() % (1u << 20);
			uint32_t m = (uint32_t)(next_rand() % 4), s = (uint32_t)(next_rand() % 300),
				 c = (uint32_t)(next_rand() % 8), n = (uint32_t)(next_rand() % BIG), b;

			proto_ref_fill(h, m, s, c, o, got, n);
			for (b = 0; b < n; b++)
				cr_assert_eq(got[b], def_byte(h, m, s, c, o + b), "simd %d case %u", p[i],
					     t);
			cr_assert_eq(proto_ref_check(h, m, s, c, o, got, n), 0);
		}
	}
	proto_ref_simd(was);
}

/* Every single wrong byte of @buf (@len, stream offset @off) is found where it is. */
static void
each_byte_wrong(uint8_t *buf, uint64_t off, size_t len, int simd)
{
	size_t i;

	cr_assert_eq(proto_ref_check(77, 1, 2, 3, off, buf, len), 0, "simd %d", simd);
	for (i = 0; i < len; i++) {
		uint8_t keep = buf[i];

		buf[i] ^= (uint8_t)(1u << (i % 8)); /* one bit, each place in turn */
		cr_assert_eq(proto_ref_check(77, 1, 2, 3, off, buf, len), i + 1,
			     "simd %d off %llu len %zu: byte %zu wrong", simd, (unsigned long long)off,
			     len, i);
		buf[i] = keep;
	}
}

Test(reference_fast, a_single_wrong_byte_anywhere_is_found)
{
	static uint8_t buf[BIG];
	int p[2], np = paths(p), was = proto_ref_simd(-1), i;

	for (i = 0; i < np; i++) {
		unsigned int off, len;

		proto_ref_simd(p[i]);
		/* Heads and tails: every alignment, every short length. */
		for (off = 0; off < 16; off++)
			for (len = 1; len <= 80; len++) {
				proto_ref_fill(77, 1, 2, 3, off, buf, len);
				each_byte_wrong(buf, off, len, p[i]);
			}
		/* Long ones, aligned and not, across the check's blocks. */
		for (off = 0; off < 9; off += 3) {
			proto_ref_fill(77, 1, 2, 3, off, buf + off, BIG - off);
			each_byte_wrong(buf + off, off, BIG - off, p[i]);
		}
	}
	proto_ref_simd(was);
}

Test(reference_fast, stale_misplaced_and_mixed_bytes_are_found)
{
	static uint8_t want[8192], got[8192];
	int p[2], np = paths(p), was = proto_ref_simd(-1), i;
	size_t first;

	for (i = 0; i < np; i++) {
		proto_ref_simd(p[i]);
		proto_ref_fill(1000, 0, 0, 0, 0, want, sizeof(want));
		/* Another token's bytes (another prefix hash: a stale or other version). */
		proto_ref_fill(1001, 0, 0, 0, 0, got, sizeof(got));
		cr_assert_neq(proto_ref_check(1000, 0, 0, 0, 0, got, sizeof(got)), 0);
		/* The same token's bytes from another offset (misplaced by a word or a byte). */
		proto_ref_fill(1000, 0, 0, 0, 8, got, sizeof(got));
		cr_assert_eq(proto_ref_check(1000, 0, 0, 0, 0, got, sizeof(got)), 1);
		proto_ref_fill(1000, 0, 0, 0, 1, got, sizeof(got));
		cr_assert_eq(proto_ref_check(1000, 0, 0, 0, 0, got, sizeof(got)), 1);
		/* Another cache, shard or model. */
		proto_ref_fill(1000, 0, 0, 1, 0, got, sizeof(got));
		cr_assert_eq(proto_ref_check(1000, 0, 0, 0, 0, got, sizeof(got)), 1);
		proto_ref_fill(1000, 0, 1, 0, 0, got, sizeof(got));
		cr_assert_eq(proto_ref_check(1000, 0, 0, 0, 0, got, sizeof(got)), 1);
		proto_ref_fill(1000, 1, 0, 0, 0, got, sizeof(got));
		cr_assert_eq(proto_ref_check(1000, 0, 0, 0, 0, got, sizeof(got)), 1);
		/* Mixed: right bytes but for a stretch of another token's, at the same offsets. */
		memcpy(got, want, sizeof(got));
		proto_ref_fill(1001, 0, 0, 0, 5001, got + 5001, 64);
		first = 5001;
		while (got[first] == want[first]) /* the same byte by chance */
			first++;
		cr_assert_lt(first, 5001 + 64);
		cr_assert_eq(proto_ref_check(1000, 0, 0, 0, 0, got, sizeof(got)), first + 1);
	}
	proto_ref_simd(was);
}
