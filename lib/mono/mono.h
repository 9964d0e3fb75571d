/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The monotonic clock (CLOCK_MONOTONIC) read as one number: nanoseconds,
 * milliseconds or seconds since an unspecified start, for intervals and
 * deadlines within one process (never a date; never compared across
 * processes), and a count of another clock's ticks in such units
 * (mono_ticks_to). Header only: each call is one clock_gettime, which the
 * vDSO answers without a system call. No DPDK.
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

/**
 * @p ticks of a clock of @p hz ticks a second (the TSC's, say) in units of
 * 1/@p per_s second (1000: ms, 1000000: us, 1000000000: ns), rounded down
 * and exact for any uint64_t @p ticks: ticks x per_s would overflow 64 bits
 * within seconds at nanoseconds, and a double loses the last units past
 * 2^53, as long as the answer itself fits in 64 bits (with @p per_s at
 * most @p hz, always). @p hz must not be 0, nor @p per_s past 2^64 / hz.
 */
static inline uint64_t
mono_ticks_to(uint64_t ticks, uint64_t hz, uint64_t per_s)
{
	return ticks / hz * per_s + ticks % hz * per_s / hz;
}

#endif
