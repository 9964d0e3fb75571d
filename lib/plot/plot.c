/* SPDX-License-Identifier: BSD-3-Clause */
/* A PNG of a few curves through gnuplot: see plot.h. */
#include "plot.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* A string for gnuplot's double quotes: no quote, no backslash, no newline. */
static void
quoted(FILE *f, const char *s)
{
	fputc('"', f);
	for (; s != NULL && *s != '\0'; s++)
		fputc(*s == '"' || *s == '\\' || *s == '\n' ? '\'' : *s, f);
	fputc('"', f);
}

int
plot_png(const struct plot *p, const struct plot_series *s, unsigned int n, char *err,
	 size_t errlen)
{
	char logf[] = "/tmp/kvss_plot_XXXXXX";
	char cmd[128], line[256] = "";
	FILE *f, *lf;
	unsigned int k;
	size_t i;
	int fd, st;

	fd = mkstemp(logf);
	if (fd < 0) {
		snprintf(err, errlen, "plot: a temporary file: %s", strerror(errno));
		return -1;
	}
	close(fd);
	snprintf(cmd, sizeof(cmd), "gnuplot >%s 2>&1", logf);
	f = popen(cmd, "w");
	if (f == NULL) {
		unlink(logf);
		snprintf(err, errlen, "plot: cannot run gnuplot: %s", strerror(errno));
		return -1;
	}
	fprintf(f, "set terminal png size 960,600 noenhanced\nset output ");
	quoted(f, p->png);
	fprintf(f, "\nset title ");
	quoted(f, p->title);
	fprintf(f, "\nset xlabel ");
	quoted(f, p->xlabel);
	fprintf(f, "\nset ylabel ");
	quoted(f, p->ylabel);
	fprintf(f, "\nset grid\nset key left top\n");
	if (p->logx)
		fprintf(f, "set logscale x\n");
	if (p->ymin != 0 || p->ymax != 0)
		fprintf(f, "set yrange [%g:%g]\n", p->ymin, p->ymax);
	for (k = 0; k < n; k++) {
		fprintf(f, "$d%u << EOD\n", k);
		for (i = 0; i < s[k].n; i++)
			fprintf(f, "%.9g %.9g\n", s[k].x[i], s[k].y[i]);
		fprintf(f, "EOD\n");
	}
	fprintf(f, "plot ");
	for (k = 0; k < n; k++) {
		fprintf(f, "%s$d%u using 1:2 with %s title ", k ? ", " : "", k,
			s[k].points ? "linespoints" : "lines");
		quoted(f, s[k].title);
	}
	fprintf(f, "\n");
	st = pclose(f);
	lf = fopen(logf, "r");
	if (lf != NULL) {
		if (fgets(line, sizeof(line), lf) == NULL)
			line[0] = '\0';
		fclose(lf);
	}
	unlink(logf);
	line[strcspn(line, "\n")] = '\0';
	if (st == -1 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		snprintf(err, errlen, "plot: gnuplot %s%s%s", WIFEXITED(st) && WEXITSTATUS(st) == 127
				? "is not installed (Debian's gnuplot-nox; scripts/deps.sh)"
				: "failed", line[0] ? ": " : "", line);
		return -1;
	}
	return 0;
}
