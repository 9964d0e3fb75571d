/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A test's own directory under /tmp (mkdtemp, so that another run or
 * another test on the machine never meets it) and its removal, for the
 * Criterion suites that write files.
 */
#ifndef KVSS_TEST_TMPDIR_H
#define KVSS_TEST_TMPDIR_H

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>

/* Make /tmp/TAG.XXXXXX into @p dir (@p len bytes). */
static inline void
tmpdir_make(char *dir, size_t len, const char *tag)
{
	snprintf(dir, len, "/tmp/%s.XXXXXX", tag);
	cr_assert_not_null(mkdtemp(dir), "mkdtemp %s", dir);
}

/* Remove @p dir and what it holds. */
static inline void
tmpdir_remove(const char *dir)
{
	char cmd[192];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	cr_assert_eq(system(cmd), 0, "%s", cmd);
}

#endif
