/* SPDX-License-Identifier: BSD-3-Clause */
/* Randomized tests: one generator, one way to choose and print the seed. */
#ifndef KVSS_TEST_RNG_H
#define KVSS_TEST_RNG_H

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* xorshift64: *state must be nonzero. */
static inline uint64_t
test_xorshift(uint64_t *state)
{
	*state ^= *state << 13;
	*state ^= *state >> 7;
	*state ^= *state << 17;
	return *state;
}

/* KVSS_SEED if set, else @p dflt; printed so that a failure can be replayed. */
static inline uint64_t
test_seed(const char *test, uint64_t dflt)
{
	const char *env = getenv("KVSS_SEED");
	uint64_t seed = env ? strtoull(env, NULL, 0) : dflt;

	printf("%s: seed %" PRIu64 " (KVSS_SEED=%" PRIu64 " to replay)\n", test, seed, seed);
	fflush(stdout);
	return seed;
}

#endif
