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

#include <math.h>
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

/*
 * How far times fall from a prediction: a histogram of log2(time /
 * predicted) in eighths of an octave over [-8, 8) octaves (the end buckets
 * take the rest). The driver scales its learned refill model by the factor
 * that a chosen share of refills exceeds.
 */
#define RATIOQ_STEPS 8 /* buckets per octave */
#define RATIOQ_OCTAVES 8
#define RATIOQ_BUCKETS (2 * RATIOQ_OCTAVES * RATIOQ_STEPS)

struct ratioq {
	uint64_t n;
	uint64_t b[RATIOQ_BUCKETS];
};

/** Count one time against its prediction (both positive; others are ignored). */
static inline void
ratioq_add(struct ratioq *q, double time, double predicted)
{
	double k;

	if (!(time > 0) || !(predicted > 0))
		return;
	k = floor((log2(time / predicted) + RATIOQ_OCTAVES) * RATIOQ_STEPS);
	k = k < 0 ? 0 : k > RATIOQ_BUCKETS - 1 ? RATIOQ_BUCKETS - 1 : k;
	q->b[(int)k]++;
	q->n++;
}

/**
 * The least bucket edge f such that at most a share @p above of the times
 * counted exceeded f times their prediction (up to an eighth of an octave
 * above the exact quantile); 1 with nothing counted.
 */
static inline double
ratioq_factor(const struct ratioq *q, double above)
{
	double need = ceil((1 - above) * (double)q->n - 1e-9); /* at or below f */
	uint64_t seen = 0;
	int k;

	if (q->n == 0)
		return 1;
	for (k = 0; k < RATIOQ_BUCKETS - 1; k++) {
		seen += q->b[k];
		if ((double)seen >= need)
			break;
	}
	return exp2((double)(k + 1) / RATIOQ_STEPS - RATIOQ_OCTAVES);
}

#endif
