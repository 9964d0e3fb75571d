/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The driver's time-to-first-token figures (ttft.c): the buckets
 * /swdriver/ttft and the exporter's histogram show, their sum, and the
 * summary's p50, p90 and p99, from the emulator's times in the order the
 * requests finished.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <errno.h>
#include <inttypes.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "driver/driver_priv.h"
#include "mono.h"
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

/*
 * The summary says when the wafer emulator was starved of its CPU (the
 * compute-only model never is): the wait the kernel counts for the
 * driver's thread (schedstat's second field), read as three numbers and
 * nothing else, and none where the kernel counts no run time (0 0 0).
 */
Test(drv_ttft, a_schedstat_line_is_three_numbers_and_its_second_the_wait)
{
	const char *bad[] = {"", "1 2", "a b c", "1 2 3 4", "1 2 3x", "-", "1 2 3 \n", "0 0 0\n"};
	uint64_t w = 7;

	cr_assert_eq(drv_schedstat_wait("2451709 984611 1\n", &w), 0);
	cr_assert_eq(w, 984611);
	cr_assert_eq(drv_schedstat_wait("5 18446744073709551615 2", &w), 0);
	cr_assert_eq(w, UINT64_MAX);
	for (unsigned int i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		w = 7;
		cr_assert_eq(drv_schedstat_wait(bad[i], &w), -EINVAL, "'%s'", bad[i]);
		cr_assert_eq(w, 7, "'%s' wrote a wait", bad[i]);
	}
}

/* Spin @p ms on this thread, pinned where it is. */
static void
spin_ms(unsigned int ms)
{
	struct timespec a, b;

	clock_gettime(CLOCK_MONOTONIC, &a);
	do
		clock_gettime(CLOCK_MONOTONIC, &b);
	while ((uint64_t)(b.tv_sec - a.tv_sec) * 1000 +
		   (uint64_t)(b.tv_nsec - a.tv_nsec) / 1000000 <
	       ms);
}

/*
 * A thread that shares its CPU with three processes spinning on it waits
 * for the CPU about three quarters of the time and runs a quarter: the
 * share drv_cpu_wait_share() gives is at least a half (more load on that
 * CPU only adds to it; the time it ran would be under). A run that never
 * started, or whose reads failed, has none.
 */
Test(drv_ttft, a_thread_sharing_its_cpu_with_spinners_is_counted_waiting)
{
	struct drv d;
	cpu_set_t one, was;
	pid_t pid[3];
	uint64_t hz = 1000000000;
	double share;

	memset(&d, 0, sizeof(d));
	cr_assert_eq(sched_getaffinity(0, sizeof(was), &was), 0);
	CPU_ZERO(&one);
	CPU_SET(sched_getcpu(), &one);
	cr_assert_eq(sched_setaffinity(0, sizeof(one), &one), 0);
	for (unsigned int i = 0; i < 3; i++) {
		pid[i] = fork();
		cr_assert_neq(pid[i], -1);
		if (pid[i] == 0) {
			spin_ms(5000); /* killed long before */
			_exit(0);
		}
	}
	usleep(20000);
	d.hz = hz;
	d.started = true;
	d.cpu_wait_tsc[0] = mono_ns();
	d.cpu_wait_start = drv_cpu_wait_ns();
	spin_ms(400);
	d.cpu_wait_end = drv_cpu_wait_ns();
	d.cpu_wait_tsc[1] = mono_ns();
	for (unsigned int i = 0; i < 3; i++) {
		kill(pid[i], SIGKILL);
		cr_assert_eq(waitpid(pid[i], NULL, 0), pid[i]);
	}
	cr_assert_eq(sched_setaffinity(0, sizeof(was), &was), 0);
	cr_assert_neq(d.cpu_wait_start, UINT64_MAX, "no /proc/thread-self/schedstat here");
	share = drv_cpu_wait_share(&d);
	cr_log_info("waited for the CPU %.0f%% of 400 ms beside three spinners", 100 * share);
	cr_assert_geq(share, 0.5, "waited %.3f of the time beside three spinners on its CPU",
		      share);
	cr_assert_leq(share, 1.0);
	d.cpu_wait_end = UINT64_MAX;
	cr_assert_eq(drv_cpu_wait_share(&d), -1, "a failed read gives no share");
	d.cpu_wait_end = d.cpu_wait_start;
	d.started = false;
	cr_assert_eq(drv_cpu_wait_share(&d), -1, "a run that never started gives no share");
}
