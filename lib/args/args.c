/* SPDX-License-Identifier: BSD-3-Clause */
/* Whole numbers from a command line (args.h). */
#define _GNU_SOURCE /* fopencookie */
#include "args.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* What a count may be, for the messages. */
#define FORMS "1000, 1e6 or 1M (k, M, G: thousands, millions, billions)"

int
args_u64(const char *opt, const char *s, uint64_t lo, uint64_t hi, uint64_t *out, char *err,
	 size_t errlen)
{
	const char *p = s;
	char *end;
	uint64_t v;

	while (*p == ' ')
		p++;
	if (*p < '0' || *p > '9') {
		snprintf(err, errlen, "%s: '%s' is not a whole number%s", opt, s,
			 *p == '-' ? " (it is negative)" : " (" FORMS ")");
		return -1;
	}
	errno = 0;
	v = strtoull(p, &end, 10);
	if (*end == '.' || *end == 'e' || *end == 'E' ||
	    (*end != '\0' && strchr("kKMG", *end) != NULL && end[1] == '\0')) {
		/* Scientific notation, a decimal point or a suffix (as kvss-trace's
		 * --capacity takes them): whole only. */
		double d;

		errno = 0;
		d = strtod(p, &end);
		if (*end != '\0' && strchr("kKMG", *end) != NULL && end[1] == '\0')
			d *= *end == 'G' ? 1e9 : *end == 'M' ? 1e6 : 1e3, end++;
		if (*end != '\0' || errno != 0 || !(d >= 0) || d != floor(d) || d >= 18446744073709551616.0) {
			snprintf(err, errlen, "%s: '%s' is not a whole number (" FORMS ")", opt, s);
			return -1;
		}
		v = (uint64_t)d;
	} else if (*end != '\0' || errno != 0) {
		snprintf(err, errlen, "%s: '%s' is not a whole number%s", opt, s,
			 errno == ERANGE ? " (too large)" : " (" FORMS ")");
		return -1;
	}
	if (v < lo || v > hi) {
		snprintf(err, errlen, "%s: '%s' is out of range %" PRIu64 "..%" PRIu64, opt, s, lo, hi);
		return -1;
	}
	*out = v;
	return 0;
}

void
args_version(const char *tool, unsigned int protocol)
{
	printf("%s %s (wire protocol v%u)\n", tool, KVSS_RELEASE, protocol);
}

static const char *stdout_tool;
static int stdout_errno;

/*
 * stdout's writes, through a cookie stream: the first failure's errno is
 * kept for the message at exit (stdio drops a failed write's buffer, and
 * errno is long overwritten by then).
 */
static ssize_t
stdout_write(void *cookie, const char *buf, size_t n)
{
	size_t done = 0;

	(void)cookie;
	while (done < n) {
		ssize_t k = write(STDOUT_FILENO, buf + done, n - done);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) {
			if (stdout_errno == 0)
				stdout_errno = k < 0 ? errno : EIO;
			return done > 0 ? (ssize_t)done : -1;
		}
		done += (size_t)k;
	}
	return (ssize_t)done;
}

/* atexit: what is still buffered written, and any write that failed said. */
static void
check_stdout(void)
{
	int e;

	errno = 0;
	if (fflush(stdout) == 0 && !ferror(stdout))
		return;
	e = stdout_errno != 0 ? stdout_errno : errno;
	fprintf(stderr, "%s: stdout: %s\n", stdout_tool,
		e != 0 ? strerror(e) : "a write failed");
	_exit(1);
}

void
args_check_stdout_at_exit(const char *tool)
{
	static const cookie_io_functions_t fns = {.write = stdout_write};
	FILE *f;

	stdout_tool = tool;
	/* glibc's stdout is a variable: printf and friends write through this one. */
	fflush(stdout);
	f = fopencookie(NULL, "w", fns);
	if (f != NULL) {
		setvbuf(f, NULL, isatty(STDOUT_FILENO) ? _IOLBF : _IOFBF, BUFSIZ);
		stdout = f;
	}
	atexit(check_stdout);
}
