/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A straight line fitted to points as they come (least squares, y = a + b x),
 * with running means and co-moments (Welford), so that points of a billion
 * bytes and nanoseconds lose no precision to cancellation. The driver fits
 * its refill-time model to what refills took: x the bytes the model charges,
 * y the time measured.
 */
#ifndef KVSS_LINFIT_H
#define KVSS_LINFIT_H

#include <stdint.h>

struct linfit {
	uint64_t n;
	double mx, my;	/* means */
	double cxx, cxy; /* sums of (x - mx)^2 and (x - mx)(y - my) */
};

static inline void
linfit_add(struct linfit *f, double x, double y)
{
	double dx = x - f->mx;

	f->n++;
	f->mx += dx / (double)f->n;
	f->my += (y - f->my) / (double)f->n;
	/* dx before the mean moved, (x - mx) and (y - my) after: exact updates. */
	f->cxx += dx * (x - f->mx);
	f->cxy += dx * (y - f->my);
}

/**
 * The line through the points: *@p a its value at x = 0, *@p b its slope.
 * @return 0, or -1 with fewer than @p min_points points or when the x values
 *   (nearly) all coincide, so that no slope can be told.
 */
static inline int
linfit_solve(const struct linfit *f, uint64_t min_points, double *a, double *b)
{
	if (f->n < min_points || f->n < 2 || !(f->cxx > 1e-12 * (double)f->n * (f->mx * f->mx + 1)))
		return -1;
	*b = f->cxy / f->cxx;
	*a = f->my - *b * f->mx;
	return 0;
}

#endif
