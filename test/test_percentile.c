/* SPDX-License-Identifier: BSD-3-Clause */
/* lib/percentile: one rule (floor(n * p / 100), at most the last), its edges. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdint.h>

#include "percentile.h"

/* Arrays, not pointers: Criterion copies the parameters to its workers. */
struct pct_case {
	char what[48];
	size_t n;
	unsigned int p;
	size_t want; /* the index */
};

static struct pct_case cases[] = {
	{"one value: p 0", 1, 0, 0},
	{"one value: p 50", 1, 50, 0},
	{"one value: p 100", 1, 100, 0},
	{"p 0 is the least", 10, 0, 0},
	{"p 100 is the greatest", 10, 100, 9},
	{"past 100 is the greatest", 10, 250, 9},
	{"no wrap at UINT_MAX", 10, UINT32_MAX, 9},
	{"p 50 of an odd count: the middle", 5, 50, 2},
	{"p 50 of an even count: the upper middle", 4, 50, 2},
	{"p 99 of 100: the greatest", 100, 99, 99},
	{"p 99 of 1000: index 990", 1000, 99, 990},
	{"p 99 of 10: rounded down, index 9", 10, 99, 9},
	{"p 10 of 9: rounded down, index 0", 9, 10, 0},
	{"p 25 of 8: index 2", 8, 25, 2},
};

ParameterizedTestParameters(percentile, the_index_is_floor_n_p_over_100_at_most_the_last)
{
	return cr_make_param_array(struct pct_case, cases, sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(struct pct_case *c, percentile, the_index_is_floor_n_p_over_100_at_most_the_last)
{
	cr_expect_eq(percentile_index(c->n, c->p), c->want, "%s: index %zu, want %zu", c->what,
		     percentile_index(c->n, c->p), c->want);
}

Test(percentile, an_empty_sample_is_0)
{
	cr_expect_eq(percentile_double(NULL, 0, 50), 0);
	cr_expect_eq(percentile_u64(NULL, 0, 99), 0);
	percentile_sort_double(NULL, 0);
	percentile_sort_u64(NULL, 0);
	cr_expect_eq(percentile_u32(NULL, 0, 99), 0);
	percentile_sort_u32(NULL, 0);
}

Test(percentile, doubles_are_sorted_then_picked)
{
	double v[] = {5.5, -1, 3, 3, 100, 0.25, 3, 7};
	size_t i, n = sizeof(v) / sizeof(v[0]);

	percentile_sort_double(v, n);
	for (i = 1; i < n; i++)
		cr_assert_leq(v[i - 1], v[i], "not sorted at %zu", i);
	cr_expect_eq(percentile_double(v, n, 0), -1);
	cr_expect_eq(percentile_double(v, n, 100), 100);
	/* index 4 of -1 0.25 3 3 3 5.5 7 100: a tie, any of the three 3s is 3 */
	cr_expect_eq(percentile_double(v, n, 50), 3);
	cr_expect_eq(percentile_double(v, n, 75), 7);
}

Test(percentile, ties_everywhere_give_the_tie)
{
	uint64_t v[64];
	size_t i;

	for (i = 0; i < 64; i++)
		v[i] = 42;
	percentile_sort_u64(v, 64);
	cr_expect_eq(percentile_u64(v, 64, 0), 42);
	cr_expect_eq(percentile_u64(v, 64, 50), 42);
	cr_expect_eq(percentile_u64(v, 64, 100), 42);
}

Test(percentile, whole_numbers_compare_exactly_past_2_to_the_53)
{
	/* As doubles these two are one value: a sort by subtraction or by
	 * double would be free to put them in either order. */
	uint64_t big = (1ull << 60) + 1, v[] = {UINT64_MAX, big, big - 1, 0, 1};

	percentile_sort_u64(v, 5);
	cr_expect_eq(v[0], 0);
	cr_expect_eq(v[1], 1);
	cr_expect_eq(v[2], big - 1);
	cr_expect_eq(v[3], big);
	cr_expect_eq(v[4], UINT64_MAX);
	cr_expect_eq(percentile_u64(v, 5, 50), big - 1);
	cr_expect_eq(percentile_u64(v, 5, 75), big);
	cr_expect_eq(percentile_u64(v, 5, 99), UINT64_MAX); /* index floor(4.95): 4 */
}

/*
 * The driver's refill times (microseconds, 32 bits): the same rule as the
 * others, not nearest rank (ceil(n p) - 1, which the summary used before:
 * p99 of 100 values was the 99th, here it is the greatest).
 */
Test(percentile, microseconds_in_32_bits_by_the_same_rule)
{
	uint32_t v[100];
	size_t i;

	for (i = 0; i < 100; i++)
		v[i] = (uint32_t)(100 - i) * 10; /* 1000, 990, ..., 10 */
	v[7] = UINT32_MAX;
	percentile_sort_u32(v, 100);
	for (i = 1; i < 100; i++)
		cr_assert_leq(v[i - 1], v[i], "not sorted at %zu", i);
	cr_expect_eq(percentile_u32(v, 100, 0), 10);
	cr_expect_eq(percentile_u32(v, 100, 50), 510); /* index 50 */
	cr_expect_eq(percentile_u32(v, 100, 99), UINT32_MAX); /* index 99, the greatest */
	cr_expect_eq(percentile_u32(v, 100, 98), 1000);
	cr_expect_eq(percentile_u32(v, 99, 50), 500); /* index 49 of the 99 below the greatest */
}
