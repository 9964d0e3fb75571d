/* SPDX-License-Identifier: BSD-3-Clause */
/* The running line fit the driver uses to fit its refill-time model. */
#include <criterion/criterion.h>
#include <math.h>

#include "driver/linfit.h"
#include "test_rng.h"

Test(linfit, points_on_a_line_give_that_line)
{
	struct linfit f = {0};
	double a, b;
	int i;

	for (i = 0; i < 10; i++)
		linfit_add(&f, 1000.0 * i, 250000.0 + 0.4 * 1000.0 * i);
	cr_assert_eq(linfit_solve(&f, 2, &a, &b), 0);
	cr_assert_float_eq(a, 250000.0, 1e-6);
	cr_assert_float_eq(b, 0.4, 1e-12);
}

Test(linfit, too_few_points_or_one_x_value_give_no_line)
{
	struct linfit f = {0};
	double a = -1, b = -1;
	int i;

	cr_assert_eq(linfit_solve(&f, 2, &a, &b), -1, "no points");
	linfit_add(&f, 5, 7);
	cr_assert_eq(linfit_solve(&f, 2, &a, &b), -1, "one point");
	for (i = 0; i < 100; i++)
		linfit_add(&f, 5, 7 + i);
	cr_assert_eq(linfit_solve(&f, 2, &a, &b), -1, "every x the same: no slope");
	linfit_add(&f, 6, 8);
	cr_assert_eq(linfit_solve(&f, 1000, &a, &b), -1, "fewer than asked for");
	cr_assert_eq(linfit_solve(&f, 2, &a, &b), 0, "two x values: a line");
}

/*
 * Refills as the demo sees them: 0.1 to 100 MB at 2 GB/s after 1.5 ms, with
 * noise of +-20% on each time. The fit finds both, the bandwidth within 2.5%
 * and the latency within 0.3 ms (about 7 standard errors).
 */
Test(linfit, noisy_refills_give_latency_and_bandwidth)
{
	uint64_t st = test_seed("linfit noisy", 0x5eed1234), i;
	struct linfit f = {0};
	double a, b;

	for (i = 0; i < 20000; i++) {
		double bytes = 1e5 + (double)(test_xorshift(&st) % 1000000) * 100.0;
		double noise = 1.0 + ((double)(test_xorshift(&st) % 40001) - 20000.0) / 100000.0;

		linfit_add(&f, bytes, (1.5e6 + bytes / 2.0) * noise);
	}
	cr_assert_eq(linfit_solve(&f, 10, &a, &b), 0);
	cr_assert(fabs(1.0 / b - 2.0) < 0.05, "bandwidth %.3f GB/s, want 2", 1.0 / b);
	cr_assert(fabs(a - 1.5e6) < 0.3e6, "latency %.0f ns, want 1.5e6", a);
}

Test(ratioq, nothing_counted_gives_one)
{
	struct ratioq q = {0};

	cr_assert_float_eq(ratioq_factor(&q, 0.1), 1.0, 1e-12);
	ratioq_add(&q, 0, 5);
	ratioq_add(&q, 5, 0);
	ratioq_add(&q, NAN, 5);
	cr_assert_eq(q.n, 0, "times or predictions not positive are not counted");
}

Test(ratioq, times_twice_the_prediction_give_a_factor_of_two)
{
	struct ratioq q = {0};
	int i;

	for (i = 0; i < 100; i++)
		ratioq_add(&q, 2000, 1000);
	/* The upper edge of the eighth of an octave that holds 2. */
	cr_assert_float_eq(ratioq_factor(&q, 0.1), exp2(1.125), 1e-12);
	cr_assert_float_eq(ratioq_factor(&q, 0.5), exp2(1.125), 1e-12);
	/* Far outside the range: the end buckets. */
	ratioq_add(&q, 1e9, 1);
	cr_assert_float_eq(ratioq_factor(&q, 0.001), 256, 1e-12);
}

/*
 * Random ratios over four octaves: the factor is exceeded by at most the
 * share asked for, and the bucket edge below it by more.
 */
Test(ratioq, the_factor_is_the_least_edge_exceeded_by_at_most_the_share)
{
	uint64_t st = test_seed("ratioq random", 0x7a7105), i;
	static double r[5000];
	struct ratioq q = {0};
	const double shares[] = {0.01, 0.1, 0.25, 0.5, 0.9};
	unsigned int k;

	for (i = 0; i < 5000; i++) {
		r[i] = exp2(((double)(test_xorshift(&st) % 40000) - 19999.5) / 10000.0); /* off the edges */
		ratioq_add(&q, 1e6 * r[i], 1e6);
	}
	for (k = 0; k < sizeof(shares) / sizeof(shares[0]); k++) {
		double f = ratioq_factor(&q, shares[k]), below = f / exp2(1.0 / RATIOQ_STEPS);
		unsigned int over = 0, over_below = 0;

		for (i = 0; i < 5000; i++) {
			over += r[i] > f;
			over_below += r[i] >= below;
		}
		cr_assert(over <= shares[k] * 5000, "share %.2f: %u of 5000 exceed %.4f", shares[k],
			  over, f);
		cr_assert(over_below > shares[k] * 5000, "share %.2f: %.4f is not the least edge (%u)",
			  shares[k], f, over_below);
	}
}

/* The window's robust line (linwin): what the driver's estimates take. */

Test(linwin, points_on_a_line_give_that_line)
{
	struct linwin w = {0};
	double a, b, level;
	int i;

	for (i = 0; i < 10; i++)
		linwin_add(&w, 1000.0 * i, 250000.0 + 0.4 * 1000.0 * i);
	cr_assert_eq(linwin_solve(&w, 2, &a, &b, &level), 0);
	cr_assert_float_eq(a, 250000.0, 1e-6);
	cr_assert_float_eq(b, 0.4, 1e-12);
	cr_assert_float_eq(level, 250000.0 + 0.4 * 4500.0, 1e-6, "the median time");
}

Test(linwin, too_few_points_or_one_x_value_give_no_line)
{
	struct linwin w = {0};
	double a = -1, b = -1, level = -1;
	int i;

	cr_assert_eq(linwin_solve(&w, 2, &a, &b, &level), -1, "no points");
	linwin_add(&w, 5, 7);
	cr_assert_eq(linwin_solve(&w, 2, &a, &b, &level), -1, "one point");
	for (i = 0; i < 100; i++)
		linwin_add(&w, 5, 7 + i);
	cr_assert_eq(linwin_solve(&w, 2, &a, &b, &level), -1, "every x the same: no slope");
	linwin_add(&w, 6, 8);
	cr_assert_eq(linwin_solve(&w, 1000, &a, &b, &level), -1, "fewer than asked for");
	cr_assert_eq(linwin_solve(&w, 2, &a, &b, &level), 0, "two x values: a line");
	cr_assert_eq(w.n, 102, "points ever added");
}

/* One refill of a busy machine: 5 ms + 2 GB/s for 0.1 to 10 MB, +-20%. */
static double
refill_ns(uint64_t *st, double *bytes)
{
	double noise = 1.0 + ((double)(test_xorshift(st) % 40001) - 20000.0) / 100000.0;

	*bytes = 1e5 + (double)(test_xorshift(st) % 100000) * 100.0;
	return (5e6 + *bytes / 2.0) * noise;
}

/*
 * A window of 64 refills of which 12 (one in five or so, at random places)
 * took a thousand times their time, as on a machine whose cores were
 * taken: the window's line is within 20% of the true one in bandwidth and
 * 2 ms in latency; the least-squares line through the same points is
 * pulled by them by far more (checked, so that the case is one where
 * least squares fails).
 */
Test(linwin, a_few_refills_a_thousand_times_slower_move_the_line_little)
{
	uint64_t st = test_seed("linwin outliers", 0x0b5e55ed), i;
	struct linwin w = {0};
	struct linfit f = {0};
	double a, b, level, fa, fb;

	for (i = 0; i < LINWIN; i++) {
		double bytes, ns = refill_ns(&st, &bytes);

		if (test_xorshift(&st) % 64 < 12)
			ns *= 1000;
		linwin_add(&w, bytes, ns);
		linfit_add(&f, bytes, ns);
	}
	cr_assert_eq(linwin_solve(&w, 20, &a, &b, &level), 0);
	cr_assert(b > 0 && fabs(1.0 / b - 2.0) < 0.4, "bandwidth %.3f GB/s, want 2", 1.0 / b);
	cr_assert(fabs(a - 5e6) < 2e6, "latency %.0f ns, want 5e6", a);
	cr_assert_eq(linfit_solve(&f, 20, &fa, &fb), 0);
	cr_assert(fabs(fa - 5e6) > 50e6 || fb <= 0 || fabs(1.0 / fb - 2.0) > 1.0,
		  "least squares was not pulled off (%.0f ns, slope %g): the case tests nothing", fa, fb);
}

/*
 * A pause that ended: the first 20 refills each took seconds (a disk that
 * answered nothing for 16 s, seen here), then 64 as usual. The window's
 * line is the usual one again; the whole run's least-squares line still
 * says a refill takes ten times longer than it does.
 */
Test(linwin, a_pause_that_ended_leaves_the_window)
{
	uint64_t st = test_seed("linwin pause", 0x9a05e), i;
	struct linwin w = {0};
	struct linfit f = {0};
	double a, b, level, fa, fb;

	for (i = 0; i < 20 + LINWIN; i++) {
		double bytes, ns = refill_ns(&st, &bytes);

		if (i < 20)
			ns += 3e9;
		linwin_add(&w, bytes, ns);
		linfit_add(&f, bytes, ns);
	}
	cr_assert_eq(linwin_solve(&w, 20, &a, &b, &level), 0);
	cr_assert(b > 0 && fabs(1.0 / b - 2.0) < 0.4, "bandwidth %.3f GB/s, want 2", 1.0 / b);
	cr_assert(fabs(a - 5e6) < 2e6, "latency %.0f ns, want 5e6", a);
	cr_assert_lt(level, 20e6, "the median time %.0f ns", level);
	cr_assert_eq(linfit_solve(&f, 20, &fa, &fb), 0);
	cr_assert_gt(fa + fb * 5e6, 10 * (5e6 + 5e6 / 2.0), "the whole run's line: %.0f ns + %g ns/B", fa, fb);
}
