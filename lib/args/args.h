/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Numbers on a command line, read whole: "1000", "1e6" and "2.5e3" are
 * whole numbers; "3e3x", "1.5", "-1", "abc" and "" are refused with a
 * message naming the option, never read as a prefix ("3e3" is 3000, not 3).
 */
#ifndef KVSS_ARGS_H
#define KVSS_ARGS_H

#include <stddef.h>
#include <stdint.h>

/* The release every tool reports with --version (beside the wire protocol's). */
#define KVSS_RELEASE "0.26"

/**
 * Print "@p tool RELEASE (wire protocol vN)" on stdout for --version.
 */
void args_version(const char *tool, unsigned int protocol);

/**
 * @p s as a whole number in [@p lo, @p hi] into *@p out. @return 0, or -1
 * with one line in @p err: "OPT: 'S' is not a whole number", "... is out
 * of range LO..HI".
 */
int args_u64(const char *opt, const char *s, uint64_t lo, uint64_t hi, uint64_t *out, char *err,
	     size_t errlen);

#endif
