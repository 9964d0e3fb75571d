/* SPDX-License-Identifier: BSD-3-Clause */
/* lib/args: command-line numbers read whole, 1e6 notation too, never a prefix. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <string.h>

#include "args.h"

/* Arrays, not pointers: Criterion copies the parameters to its workers. */
struct num_case {
	char s[32];
	uint64_t want; /* when accepted */
	char err[64];  /* "": accepted */
};

static struct num_case cases[] = {
	{"1000", 1000, ""},
	{"1e6", 1000000, ""},
	{"2.5e3", 2500, ""},
	{"3e3", 3000, ""},
	{"0", 0, ""},
	{"18446744073709551615", UINT64_MAX, ""},
	{"3e3x", 0, "'3e3x' is not a whole number"},
	{"1.5", 0, "'1.5' is not a whole number"},
	{"-1", 0, "'-1' is not a whole number (it is negative)"},
	{"abc", 0, "'abc' is not a whole number"},
	{"", 0, "'' is not a whole number"},
	{"12 ", 0, "'12 ' is not a whole number"},
	{"99999999999999999999", 0, "is not a whole number (too large)"},
	{"1e30", 0, "'1e30' is not a whole number"},
	/* kvss-trace's --capacity suffixes, for every count: one parser. */
	{"1M", 1000000, ""},
	{"2k", 2000, ""},
	{"2K", 2000, ""},
	{"1.5k", 1500, ""},
	{"3G", 3000000000ULL, ""},
	{"1.0001k", 0, "'1.0001k' is not a whole number (1000, 1e6 or 1M"},
	{"1Mx", 0, "'1Mx' is not a whole number"},
	{"1m", 0, "'1m' is not a whole number (1000, 1e6 or 1M (k, M, G"},
	{"M", 0, "'M' is not a whole number"},
};

ParameterizedTestParameters(args, whole_numbers_only)
{
	return cr_make_param_array(struct num_case, cases, sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(struct num_case *c, args, whole_numbers_only)
{
	char err[256] = "";
	uint64_t v = 7;
	int rc = args_u64("--n", c->s, 0, UINT64_MAX, &v, err, sizeof(err));

	if (c->err[0] == '\0') {
		cr_assert_eq(rc, 0, "'%s': %s", c->s, err);
		cr_assert_eq(v, c->want, "'%s'", c->s);
	} else {
		cr_assert_eq(rc, -1, "'%s' accepted as %lu", c->s, (unsigned long)v);
		cr_assert(strncmp(err, "--n: ", 5) == 0 && strstr(err, c->err) != NULL,
			  "'%s': %s", c->s, err);
		cr_assert_eq(v, 7, "nothing written on an error");
	}
}

Test(args, the_range_is_named)
{
	char err[256];
	uint64_t v;

	cr_assert_eq(args_u64("--column", "5000", 1, 4096, &v, err, sizeof(err)), -1);
	cr_assert_str_eq(err, "--column: '5000' is out of range 1..4096");
	cr_assert_eq(args_u64("--column", "4e3", 1, 4096, &v, err, sizeof(err)), 0);
	cr_assert_eq(v, 4000);
}
