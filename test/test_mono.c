/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * lib/mono: a count of another clock's ticks in ms, us and ns
 * (mono_ticks_to) against the same sum in 128 bits, at the edges (0, a
 * tick short of a second, 2^64 - 1 ticks) and at random (the seed is
 * printed: KVSS_SEED=N replays it); and the clock itself goes forward.
 */
#include <criterion/criterion.h>
#include <stdint.h>

#include "mono.h"
#include "test_rng.h"

static uint64_t
wide(uint64_t ticks, uint64_t hz, uint64_t per_s)
{
	return (uint64_t)((unsigned __int128)ticks * per_s / hz);
}

static void
same(uint64_t ticks, uint64_t hz, uint64_t per_s)
{
	uint64_t got = mono_ticks_to(ticks, hz, per_s), want = wide(ticks, hz, per_s);

	cr_assert_eq(got, want, "%lu ticks at %lu Hz in 1/%lu s: %lu, want %lu", (unsigned long)ticks,
		     (unsigned long)hz, (unsigned long)per_s, (unsigned long)got, (unsigned long)want);
}

Test(mono, ticks_to_exact_at_the_edges)
{
	static const uint64_t hz[] = {1, 1000, 2100000000ull, 2899999999ull, 4000000000ull};
	static const uint64_t per[] = {1000, 1000000, 1000000000ull};
	unsigned int i, j;

	for (i = 0; i < sizeof(hz) / sizeof(hz[0]); i++)
		for (j = 0; j < sizeof(per) / sizeof(per[0]); j++) {
			if (hz[i] > UINT64_MAX / per[j])
				continue; /* out of its contract */
			same(0, hz[i], per[j]);
			same(hz[i] - 1, hz[i], per[j]);
			same(hz[i], hz[i], per[j]);
			if (per[j] <= hz[i])
				same(UINT64_MAX, hz[i], per[j]); /* the most ticks there are */
		}
	/* A year of a 2.9 GHz TSC in ns: ticks x 1e9 is far past 2^64. */
	same(2899999999ull * 86400ull * 365ull, 2899999999ull, 1000000000ull);
	cr_assert_eq(mono_ticks_to(3 * 2899999999ull, 2899999999ull, 1000000000ull), 3000000000ull);
}

Test(mono, ticks_to_exact_at_random)
{
	uint64_t seed = test_seed("mono ticks_to", 0x6d6f6e6f) | 1;
	unsigned int i;

	for (i = 0; i < 100000; i++) {
		uint64_t hz = 1 + test_xorshift(&seed) % 5000000000ull;
		uint64_t ticks = test_xorshift(&seed);
		uint64_t shift = test_xorshift(&seed) % 64;

		ticks >>= shift; /* short counts as well as long, in an order a replay keeps */
		if (hz < 1000000000ull && ticks > UINT64_MAX / 1000000000ull * hz)
			continue; /* its value in ns is past 2^64: out of the contract */

		same(ticks, hz, 1000000000ull);
		if (hz >= 1000000 || ticks <= UINT64_MAX / 1000000 * hz)
			same(ticks, hz, 1000000);
	}
}

Test(mono, clock_goes_forward)
{
	uint64_t a = mono_ns(), b = mono_ns();

	cr_assert_geq(b, a);
	cr_assert_leq(mono_ms(), mono_ns() / 1000000u);
}
