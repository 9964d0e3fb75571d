/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The driver's time-to-first-token figures (ttft.c): the buckets
 * /swdriver/ttft and the exporter's histogram show, their sum, and the
 * summary's p50, p90 and p99, from the emulator's times in the order the
 * requests finished.
 */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdlib.h>

#include "driver/driver_priv.h"
#include "test_rng.h"

/* Where a time belongs: the first bound at or above it; past the last, the overflow bucket. */
static unsigned int
bucket_of(uint64_t us)
{
	unsigned int k;

	for (k = 0; k < DRV_TTFT_BUCKETS; k++)
		if (us <= drv_ttft_le_us[k])
			return k;
	return DRV_TTFT_BUCKETS;
}

Test(drv_ttft, the_bounds_rise_from_1_ms_to_60_s)
{
	unsigned int k;

	cr_assert_eq(drv_ttft_le_us[0], 1000);
	cr_assert_eq(drv_ttft_le_us[DRV_TTFT_BUCKETS - 1], 60000000);
	for (k = 1; k < DRV_TTFT_BUCKETS; k++)
		cr_assert_gt(drv_ttft_le_us[k], drv_ttft_le_us[k - 1], "bound %u", k);
}

/* A time equal to a bound is in that bound's bucket (Prometheus' le); one past it, in the next. */
Test(drv_ttft, a_bound_holds_its_own_value_and_the_last_bucket_the_rest)
{
	uint64_t v[2 * DRV_TTFT_BUCKETS + 2];
	struct drv_ttft_figures f;
	unsigned int k, n = 0;
	uint64_t sum = 0;

	for (k = 0; k < DRV_TTFT_BUCKETS; k++) {
		v[n++] = drv_ttft_le_us[k];
		v[n++] = (uint64_t)drv_ttft_le_us[k] + 1;
	}
	v[n++] = 0;
	v[n++] = UINT64_MAX / 4; /* a request that waited far past the last bound */
	for (k = 0; k < n; k++)
		sum += v[k];
	cr_assert_eq(drv_ttft_figures(v, n, &f), 0);
	cr_assert_eq(f.hist[0], 2, "0 and 1 ms");
	for (k = 1; k < DRV_TTFT_BUCKETS; k++)
		cr_assert_eq(f.hist[k], 2, "bucket %u: its bound, and one past the bound below", k);
	cr_assert_eq(f.hist[DRV_TTFT_BUCKETS], 2, "60 s + 1 us, and the far one");
	cr_assert_eq(f.sum_us, sum);
}

/* Random times in random order: the same buckets and percentiles as worked out here. */
Test(drv_ttft, figures_are_those_of_the_times_in_any_order)
{
	uint64_t seed = test_seed("drv_ttft figures", 0x77f1), v[1000], orig[1000], sorted[1000];
	uint64_t hist[DRV_TTFT_BUCKETS + 1];
	struct drv_ttft_figures f;
	unsigned int round;

	for (round = 0; round < 20; round++) {
		size_t n = 1 + test_xorshift(&seed) % 1000, i, j;
		uint64_t sum = 0;

		memset(hist, 0, sizeof(hist));
		for (i = 0; i < n; i++) {
			/* Spread over the whole range: 1 us to about 134 s. */
			v[i] = 1 + test_xorshift(&seed) % (1ull << (test_xorshift(&seed) % 28));
			sum += v[i];
			hist[bucket_of(v[i])]++;
		}
		memcpy(sorted, v, sizeof(v[0]) * n);
		memcpy(orig, v, sizeof(v[0]) * n);
		for (i = 1; i < n; i++) /* insertion sort: the test's own */
			for (j = i; j > 0 && sorted[j - 1] > sorted[j]; j--) {
				uint64_t t = sorted[j];

				sorted[j] = sorted[j - 1];
				sorted[j - 1] = t;
			}
		cr_assert_eq(drv_ttft_figures(v, n, &f), 0);
		cr_assert_eq(f.sum_us, sum, "round %u", round);
		cr_assert_arr_eq(f.hist, hist, sizeof(hist), "round %u", round);
		/* floor(n * p / 100), as lib/percentile says. */
		cr_assert_eq(f.p50_us, sorted[n * 50 / 100], "round %u, n %zu", round, n);
		cr_assert_eq(f.p90_us, sorted[n * 90 / 100], "round %u, n %zu", round, n);
		cr_assert_eq(f.p99_us, sorted[n * 99 / 100], "round %u, n %zu", round, n);
		cr_assert_arr_eq(v, orig, sizeof(v[0]) * n, "the caller's times are left as they came");
	}
}

Test(drv_ttft, no_time_gives_zeros)
{
	struct drv_ttft_figures f;

	memset(&f, 0xff, sizeof(f));
	cr_assert_eq(drv_ttft_figures(NULL, 0, &f), 0);
	cr_assert_eq(f.sum_us + f.p50_us + f.p90_us + f.p99_us, 0);
	for (unsigned int k = 0; k <= DRV_TTFT_BUCKETS; k++)
		cr_assert_eq(f.hist[k], 0);
}
