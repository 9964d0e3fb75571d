/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Numbers on a command line, read whole: "1000", "1e6", "2.5e3" and "1M"
 * (k, M, G: thousands, millions, billions, as kvss-trace's --capacity) are
 * whole numbers; "3e3x", "1.5", "1.5k5", "-1", "abc" and "" are refused with
 * a message naming the option and the forms taken, never read as a prefix
 * ("3e3" is 3000, not 3).
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
 * At exit, stdout flushed and checked: when a write to it failed (a full
 * disk, /dev/full, a closed descriptor), "@p tool: stdout: why" on stderr
 * and exit status 1, never a silent 0 with the output lost. Call once, first
 * in main, before any output: stdout becomes a stream that keeps the first
 * failure's errno (line-buffered on a terminal, else fully; setvbuf after
 * this applies to it). @p tool is kept (a literal).
 */
void args_check_stdout_at_exit(const char *tool);

/**
 * @p s as a whole number in [@p lo, @p hi] into *@p out. @return 0, or -1
 * with one line in @p err: "OPT: 'S' is not a whole number", "... is out
 * of range LO..HI".
 */
int args_u64(const char *opt, const char *s, uint64_t lo, uint64_t hi, uint64_t *out, char *err,
	     size_t errlen);

#endif
