/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * lib/plot: a PNG of a few curves through gnuplot (Debian's gnuplot-nox),
 * for kvss-trace's hit ratio against capacity and the demo's refill
 * latencies. The data go inline (gnuplot 5 data blocks); gnuplot runs as a
 * child process with the script on its standard input.
 */
#ifndef KVSS_PLOT_H
#define KVSS_PLOT_H

#include <stdbool.h>
#include <stddef.h>

struct plot_series {
	const char *title;
	const double *x, *y;
	size_t n;
	bool points; /* points and lines; else lines */
};

struct plot {
	const char *png; /* the file written */
	const char *title, *xlabel, *ylabel;
	bool logx;
	double ymin, ymax; /* both 0: gnuplot's own range */
};

/** Draw @p n series. @return 0, or -1 with one line in @p err (no gnuplot, its message). */
int plot_png(const struct plot *p, const struct plot_series *s, unsigned int n, char *err,
	     size_t errlen);

#endif
