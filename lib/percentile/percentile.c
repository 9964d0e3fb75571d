/* SPDX-License-Identifier: BSD-3-Clause */
/* The p-th percentile of a sample, by one rule: percentile.h. */
#include "percentile.h"

#include <stdlib.h>

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static int
cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static int
cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

void
percentile_sort_double(double *v, size_t n)
{
	if (n > 1)
		qsort(v, n, sizeof(v[0]), cmp_double);
}

void
percentile_sort_u64(uint64_t *v, size_t n)
{
	if (n > 1)
		qsort(v, n, sizeof(v[0]), cmp_u64);
}

void
percentile_sort_u32(uint32_t *v, size_t n)
{
	if (n > 1)
		qsort(v, n, sizeof(v[0]), cmp_u32);
}

double
percentile_double(const double *sorted, size_t n, unsigned int p)
{
	return n == 0 ? 0 : sorted[percentile_index(n, p)];
}

uint64_t
percentile_u64(const uint64_t *sorted, size_t n, unsigned int p)
{
	return n == 0 ? 0 : sorted[percentile_index(n, p)];
}

uint32_t
percentile_u32(const uint32_t *sorted, size_t n, unsigned int p)
{
	return n == 0 ? 0 : sorted[percentile_index(n, p)];
}
