/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The monotonic clock (CLOCK_MONOTONIC) read as one number: nanoseconds,
 * milliseconds or seconds since an unspecified start, for intervals and
 * deadlines within one process (never a date; never compared across
 * processes). Header only: each call is one clock_gettime, which the vDSO
 * answers without a system call. No DPDK.
 */
#ifndef KVSS_MONO_H
#define KVSS_MONO_H

#include <stdint.h>
#include <time.h>

/** The monotonic clock, ns. */
static inline uint64_t
mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/** The monotonic clock, ms (rounded down). */
static inline uint64_t
mono_ms(void)
{
	return mono_ns() / 1000000u;
}

/** The monotonic clock, s, with its ns as the fraction (for rates and wall times). */
static inline double
mono_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

#endif
