/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * lib/plot: a PNG of a few curves through gnuplot (Debian's gnuplot-nox),
 * for kvss-trace's hit ratio against capacity and the demo's refill
 * latencies. The data go inline (gnuplot 5 data blocks); gnuplot runs as a
 * child process (no shell) with the script on its standard input and the
 * PNG on its standard output: the file's name is never in the script, so
 * no byte of it (a backquote, a quote, a newline) can change what gnuplot
 * does, and the file is written, every write checked, by this library.
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

/**
 * Whether @p png can be written: its directory exists and is writable, it
 * is not itself a directory, a FIFO, a socket or a symbolic link. For a tool to refuse --plot at once rather
 * than after its run. @return 0, or -1 with one line in @p err naming the
 * directory and what to do.
 */
int plot_check_output(const char *png, char *err, size_t errlen);

/**
 * A printable copy of @p s (a file's name) for a message, into @p buf of
 * @p len: control bytes (a newline) as '?'. @return @p buf.
 */
const char *plot_shown(const char *s, char *buf, size_t len);

/**
 * Open (create, truncate) an output file the command line named, for
 * writing: a FIFO or a socket is refused (without blocking: a FIFO with
 * no reader would hold the program at its end for ever), a symbolic link
 * is not followed. @return the
 * descriptor, or -1 with one line in @p err.
 */
int plot_open_output(const char *path, char *err, size_t errlen);

/**
 * Draw @p n series into p->png: written only when gnuplot succeeded and
 * gave a PNG, every write checked (a full disk is an error). @return 0, or
 * -1 with one line in @p err (no gnuplot, gnuplot's own reason, the file).
 */
int plot_png(const struct plot *p, const struct plot_series *s, unsigned int n, char *err,
	     size_t errlen);

#endif
