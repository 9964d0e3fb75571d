/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * lib/percentile: the p-th percentile of a sample, by one rule everywhere
 * (benchmarks, test tools, reports), so that two programs' "p99" of the
 * same values are the same value.
 *
 * The rule: sort the n values ascending; the p-th percentile (p a whole
 * percent) is the value at index floor(n * p / 100), the last one where
 * that index is n or more (p 100, or more). So p 0 is the least value,
 * p 100 the greatest, p 50 of an even count the upper of the two middle
 * values (index n / 2), and p 99 of 100 values the greatest. No
 * interpolation: the answer is always one of the values. An empty sample
 * has none: 0. No DPDK.
 */
#ifndef KVSS_PERCENTILE_H
#define KVSS_PERCENTILE_H

#include <stddef.h>
#include <stdint.h>

/**
 * The index of the @p p-th percentile among @p n > 0 sorted values:
 * floor(n * p / 100), at most n - 1.
 */
static inline size_t
percentile_index(size_t n, unsigned int p)
{
	/* p < 100 keeps the index below n (and n * p from wrapping). */
	return p >= 100 ? n - 1 : n * p / 100;
}

/** Sort @p v[0..n) ascending, in place (qsort: not stable; equal values are equal). */
void percentile_sort_double(double *v, size_t n);
/** The same for whole numbers (compared exactly, at any size). */
void percentile_sort_u64(uint64_t *v, size_t n);

/** The same for 32-bit whole numbers (times in microseconds, as the driver keeps them). */
void percentile_sort_u32(uint32_t *v, size_t n);

/** The @p p-th percentile of @p sorted[0..n) (ascending); 0 when @p n is 0. */
double percentile_double(const double *sorted, size_t n, unsigned int p);
/** The same for whole numbers. */
uint64_t percentile_u64(const uint64_t *sorted, size_t n, unsigned int p);
/** The same for 32-bit whole numbers. */
uint32_t percentile_u32(const uint32_t *sorted, size_t n, unsigned int p);

#endif
