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
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

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
 * A line through the last LINWIN points only, fitted robustly (Theil-Sen:
 * the slope is the median of the slopes between every two points, the
 * value at x = 0 the median of what each point leaves above that slope).
 * The driver's estimates take it: on a busy machine a refill now and then
 * takes a thousand times its usual time (its lcore's core taken, a disk
 * that paused), and a least-squares line through every refill so far
 * follows those few (one run here learned 150 ms + 0.02 Gb/s from a
 * 16-second pause at its start, for refills of 5 ms, and held every
 * sequence for it). A median ignores fewer than about three points in ten
 * that are off, however far off; and points from before the window
 * (a pause that ended) count no more.
 */
#define LINWIN 64

struct linwin {
	uint64_t n; /* points ever added; the last min(n, LINWIN) are kept */
	double x[LINWIN], y[LINWIN];
};

static inline void
linwin_add(struct linwin *w, double x, double y)
{
	w->x[w->n % LINWIN] = x;
	w->y[w->n % LINWIN] = y;
	w->n++;
}

static inline int
linwin_cmp(const void *p, const void *q)
{
	double x = *(const double *)p, y = *(const double *)q;

	return x < y ? -1 : x > y;
}

/* The median of @p v[0..n) (n > 0), which it sorts: the mean of the two
 * middle values when n is even. At most 2,016 values, every 16th refill. */
static inline double
linwin_median(double *v, size_t n)
{
	qsort(v, n, sizeof(*v), linwin_cmp);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/**
 * The line through the window's points: *@p a its value at x = 0, *@p b its
 * slope, and *@p level the median of the times (what a line with no slope
 * would say).
 * @return 0, or -1 with fewer than @p min_points points kept (at most
 *   LINWIN count) or no two of them at different x, so that no slope can
 *   be told.
 */
static inline int
linwin_solve(const struct linwin *w, uint64_t min_points, double *a, double *b, double *level)
{
	double s[LINWIN * (LINWIN - 1) / 2], r[LINWIN];
	size_t n = w->n < LINWIN ? (size_t)w->n : LINWIN, ns = 0, i, j;

	if (w->n < min_points || n < 2)
		return -1;
	for (i = 0; i < n; i++)
		for (j = i + 1; j < n; j++) {
			double dx = w->x[j] - w->x[i];

			if (fabs(dx) > 1e-9 * (fabs(w->x[i]) + fabs(w->x[j]) + 1))
				s[ns++] = (w->y[j] - w->y[i]) / dx;
		}
	if (ns == 0)
		return -1;
	*b = linwin_median(s, ns);
	for (i = 0; i < n; i++)
		r[i] = w->y[i] - *b * w->x[i];
	*a = linwin_median(r, n);
	for (i = 0; i < n; i++)
		r[i] = w->y[i];
	*level = linwin_median(r, n);
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
