/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * EXPECT(cond, fmt, ...) for the test tools that check a capture: a failed
 * expectation is printed ("  FAIL: ...") and counted in expect_fails, and
 * the check goes on, so one run names every difference.
 */
#ifndef KVSS_TEST_EXPECT_H
#define KVSS_TEST_EXPECT_H

#include <stdio.h>

static int expect_fails;

#define EXPECT(cond, ...)                                                                          \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "  FAIL: " __VA_ARGS__);                                   \
			fprintf(stderr, "\n");                                                     \
			expect_fails++;                                                            \
		}                                                                                  \
	} while (0)

#endif
