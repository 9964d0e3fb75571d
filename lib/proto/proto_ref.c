/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Reference wafer content (PROTOCOL.md section 6): a pure function of the
 * token's prefix, so any tool can check replayed bytes without storing them.
 *
 * The wafer emulator makes every evicted byte and checks every refilled one
 * with these, so they run word by word: the stream's words follow from one
 * another by an add (x += GOLDEN), and on x86-64 with AVX2 four words at a
 * time (the 64-bit multiplies from 32-bit ones). The check compares as it
 * makes, with no copy of the reference, and finds the first differing byte
 * only once a block differs. stream_word() is the definition, one word from
 * its index; the fast paths make exactly its words (test/test_proto_ref.c).
 */
#include "proto.h"

#include <stdbool.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define REF_AVX2 1
#include <immintrin.h>
#endif

#define GOLDEN 0x9E3779B97F4A7C15ULL
#define MIX1 0xBF58476D1CE4E5B9ULL
#define MIX2 0x94D049BB133111EBULL

uint64_t
proto_ref_isolation_id(const void *name, size_t len)
{
	return XXH3_64bits_withSeed(name, len, 0);
}

uint64_t
proto_ref_salt(const void *salt, size_t len)
{
	uint64_t h = XXH3_64bits(salt, len);

	return h != 0 ? h : 1;
}

uint64_t
proto_ref_chain_root(uint64_t isolation_id, uint64_t salt)
{
	uint8_t b[13] = {'s', 'a', 'l', 't', 0};

	if (salt == 0)
		return isolation_id;
	proto_st64(b + 5, salt);
	return XXH3_64bits_withSeed(b, sizeof(b), isolation_id);
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

static inline uint64_t
mix(uint64_t z)
{
	z = (z ^ (z >> 30)) * MIX1;
	z = (z ^ (z >> 27)) * MIX2;
	return z ^ (z >> 31);
}

/* Word k of the splitmix64 stream that starts at @x: random access. */
static inline uint64_t
stream_word(uint64_t x, uint64_t k)
{
	return mix(x + (k + 1) * GOLDEN);
}

/* Words k .. k + n - 1 into @o, one at a time. */
static void
fill_words_scalar(uint64_t x, uint64_t k, uint8_t *o, size_t n)
{
	uint64_t z = x + (k + 1) * GOLDEN;
	size_t i;

	for (i = 0; i < n; i++, z += GOLDEN)
		proto_st64(o + 8 * i, mix(z));
}

/* Do words k .. k + n - 1 equal the 8n bytes at @p? */
static bool
same_words_scalar(uint64_t x, uint64_t k, const uint8_t *p, size_t n)
{
	uint64_t z = x + (k + 1) * GOLDEN, acc = 0;
	size_t i;

	for (i = 0; i < n; i++, z += GOLDEN)
		acc |= mix(z) ^ proto_ld64(p + 8 * i);
	return acc == 0;
}

#ifdef REF_AVX2
/* a * b for four 64-bit lanes, b a constant given as its halves. */
__attribute__((target("avx2"))) static inline __m256i
mul64(__m256i a, __m256i b_lo, __m256i b_hi)
{
	__m256i lo = _mm256_mul_epu32(a, b_lo);
	__m256i cross = _mm256_add_epi64(_mm256_mul_epu32(_mm256_srli_epi64(a, 32), b_lo),
					 _mm256_mul_epu32(a, b_hi));

	return _mm256_add_epi64(lo, _mm256_slli_epi64(cross, 32));
}

__attribute__((target("avx2"))) static inline __m256i
mix4(__m256i z)
{
	const __m256i m1l = _mm256_set1_epi64x((long long)(MIX1 & 0xffffffffu));
	const __m256i m1h = _mm256_set1_epi64x((long long)(MIX1 >> 32));
	const __m256i m2l = _mm256_set1_epi64x((long long)(MIX2 & 0xffffffffu));
	const __m256i m2h = _mm256_set1_epi64x((long long)(MIX2 >> 32));

	z = mul64(_mm256_xor_si256(z, _mm256_srli_epi64(z, 30)), m1l, m1h);
	z = mul64(_mm256_xor_si256(z, _mm256_srli_epi64(z, 27)), m2l, m2h);
	return _mm256_xor_si256(z, _mm256_srli_epi64(z, 31));
}

/* The lanes of words k .. k + 3. */
__attribute__((target("avx2"))) static inline __m256i
first4(uint64_t x, uint64_t k)
{
	uint64_t z = x + (k + 1) * GOLDEN;

	return _mm256_set_epi64x((long long)(z + 3 * GOLDEN), (long long)(z + 2 * GOLDEN),
				 (long long)(z + GOLDEN), (long long)z);
}

/* Two vectors (eight words) a step: two independent chains of multiplies. */
__attribute__((target("avx2"))) static void
fill_words_avx2(uint64_t x, uint64_t k, uint8_t *o, size_t n)
{
	const __m256i step = _mm256_set1_epi64x((long long)(8 * GOLDEN));
	__m256i z0 = first4(x, k), z1 = first4(x, k + 4);
	size_t i = 0;

	for (; i + 8 <= n; i += 8) {
		_mm256_storeu_si256((__m256i *)(void *)(o + 8 * i), mix4(z0));
		_mm256_storeu_si256((__m256i *)(void *)(o + 8 * i + 32), mix4(z1));
		z0 = _mm256_add_epi64(z0, step);
		z1 = _mm256_add_epi64(z1, step);
	}
	fill_words_scalar(x, k + i, o + 8 * i, n - i);
}

__attribute__((target("avx2"))) static bool
same_words_avx2(uint64_t x, uint64_t k, const uint8_t *p, size_t n)
{
	const __m256i step = _mm256_set1_epi64x((long long)(8 * GOLDEN));
	__m256i z0 = first4(x, k), z1 = first4(x, k + 4), acc = _mm256_setzero_si256();
	size_t i = 0;

	for (; i + 8 <= n; i += 8) {
		__m256i d0 = _mm256_loadu_si256((const __m256i *)(const void *)(p + 8 * i));
		__m256i d1 = _mm256_loadu_si256((const __m256i *)(const void *)(p + 8 * i + 32));

		acc = _mm256_or_si256(acc, _mm256_xor_si256(mix4(z0), d0));
		acc = _mm256_or_si256(acc, _mm256_xor_si256(mix4(z1), d1));
		z0 = _mm256_add_epi64(z0, step);
		z1 = _mm256_add_epi64(z1, step);
	}
	return _mm256_testz_si256(acc, acc) && same_words_scalar(x, k + i, p + 8 * i, n - i);
}
#endif

/* -1: not yet asked; then 0 or 1. Set by proto_ref_simd() too; any thread may ask. */
static int use_simd = -1;

static inline bool
simd(void)
{
#ifdef REF_AVX2
	int v = __atomic_load_n(&use_simd, __ATOMIC_RELAXED);

	if (__builtin_expect(v < 0, 0)) {
		v = __builtin_cpu_supports("avx2") ? 1 : 0;
		__atomic_store_n(&use_simd, v, __ATOMIC_RELAXED);
	}
	return v == 1;
#else
	return false;
#endif
}

int
proto_ref_simd(int on)
{
	int was = simd();

#ifdef REF_AVX2
	if (on >= 0)
		__atomic_store_n(&use_simd, on && __builtin_cpu_supports("avx2") ? 1 : 0,
				 __ATOMIC_RELAXED);
#else
	(void)on;
#endif
	return was;
}

static inline void
fill_words(uint64_t x, uint64_t k, uint8_t *o, size_t n)
{
#ifdef REF_AVX2
	if (simd()) {
		fill_words_avx2(x, k, o, n);
		return;
	}
#endif
	fill_words_scalar(x, k, o, n);
}

static inline bool
same_words(uint64_t x, uint64_t k, const uint8_t *p, size_t n)
{
#ifdef REF_AVX2
	if (simd())
		return same_words_avx2(x, k, p, n);
#endif
	return same_words_scalar(x, k, p, n);
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
	if (len >= 8) {
		fill_words(x, k, o, len / 8);
		k += len / 8;
		o += len / 8 * 8;
		len %= 8;
	}
	if (len != 0) {
		proto_st64(w, stream_word(x, k));
		memcpy(o, w, len);
	}
}

/* Index of the first byte of @p (n of them) that differs from @ref, or n. */
static size_t
first_diff(const uint8_t *ref, const uint8_t *p, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (ref[i] != p[i])
			break;
	return i;
}

#define CHECK_BLOCK 4096 /* bytes compared before looking for the first bad one */

size_t
proto_ref_check(uint64_t h, uint32_t model, uint32_t shard, uint32_t cache, uint64_t off,
		const void *p, size_t len)
{
	const uint64_t x = stream_base(h, model, shard, cache);
	const uint8_t *q = p;
	uint64_t k = off / 8;
	unsigned int skip = (unsigned int)(off % 8);
	size_t done = 0;
	uint8_t w[8];

	if (len == 0)
		return 0;
	if (skip != 0) {
		size_t n = 8 - skip < len ? 8 - skip : len, i;

		proto_st64(w, stream_word(x, k++));
		i = first_diff(w + skip, q, n);
		if (i < n)
			return i + 1;
		done = n;
	}
	while (len - done >= 8) {
		size_t words = (len - done) / 8;

		if (words > CHECK_BLOCK / 8)
			words = CHECK_BLOCK / 8;
		if (!same_words(x, k, q + done, words)) {
			/* Which byte: the block again, a word at a time. */
			size_t j;

			for (j = 0; j < words; j++) {
				size_t i;

				proto_st64(w, stream_word(x, k + j));
				i = first_diff(w, q + done + 8 * j, 8);
				if (i < 8)
					return done + 8 * j + i + 1;
			}
		}
		k += words;
		done += words * 8;
	}
	if (done < len) {
		size_t n = len - done, i;

		proto_st64(w, stream_word(x, k));
		i = first_diff(w, q + done, n);
		if (i < n)
			return done + i + 1;
	}
	return 0;
}
