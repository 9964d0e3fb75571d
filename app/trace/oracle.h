/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Offline references for kvss-trace, over a Mooncake trace's blocks (by hash
 * id, like the plain LRU baseline): what a cache that knew the future would
 * reach, to say how much of the possible an online policy gets.
 *
 * A request hits the blocks of its longest cached prefix (a partial last
 * block counts its tokens). The result is hit tokens over input tokens.
 */
#ifndef KVSS_ORACLE_H
#define KVSS_ORACLE_H

#include <stddef.h>
#include <stdint.h>

#include "workload.h"

/**
 * Belady with bypass: when full, free the block used again furthest in the
 * future (deepest first among equals, so only leaves go), and do not store a
 * block whose next use comes later than that of every stored one. @p capacity
 * in tokens (0: unlimited); first @p limit requests (0: all). @return the hit
 * ratio, or -1 when out of memory.
 */
double oracle_belady(const struct workload *t, uint64_t capacity, uint32_t block, size_t limit);

/**
 * LRU told which blocks will be used again within @p horizon_ms of trace time
 * (0: ever): the others are never stored, and dropped when last used. An
 * upper bound for any LRU-ordered policy with admission, however it guesses.
 * @return the hit ratio, or -1 when out of memory.
 */
double oracle_lru_told(const struct workload *t, uint64_t capacity, uint32_t block, size_t limit,
		       uint64_t horizon_ms);

#endif
