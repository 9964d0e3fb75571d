/* SPDX-License-Identifier: BSD-3-Clause */
/* Whole numbers from a command line (args.h). */
#include "args.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
			 *p == '-' ? " (it is negative)" : "");
		return -1;
	}
	errno = 0;
	v = strtoull(p, &end, 10);
	if (*end == '.' || *end == 'e' || *end == 'E') {
		/* Scientific notation, or a decimal point: whole only. */
		double d;

		errno = 0;
		d = strtod(p, &end);
		if (*end != '\0' || errno != 0 || !(d >= 0) || d != floor(d) || d >= 18446744073709551616.0) {
			snprintf(err, errlen, "%s: '%s' is not a whole number", opt, s);
			return -1;
		}
		v = (uint64_t)d;
	} else if (*end != '\0' || errno != 0) {
		snprintf(err, errlen, "%s: '%s' is not a whole number%s", opt, s,
			 errno == ERANGE ? " (too large)" : "");
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
