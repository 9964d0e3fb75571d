/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * References for kvss-trace over a Mooncake trace's blocks (by hash id): the
 * plain LRU baseline, and what a cache that knew the future would reach, to
 * say how much of the possible an online policy gets.
 *
 * A request hits the blocks of its longest cached prefix (a partial last
 * block counts its tokens). Each result is hit tokens over input tokens, or
 * -1 when out of memory.
 */
#ifndef KVSS_ORACLE_H
#define KVSS_ORACLE_H

#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>

#include "workload.h"

/** The trace's block accesses, indexed once for every reference below. */
struct oracle_blocks;

/** Index the first @p limit requests of @p t (0: all); NULL when out of memory. */
struct oracle_blocks *oracle_blocks_new(const struct workload *t, size_t limit);
void oracle_blocks_free(struct oracle_blocks *b);

/**
 * Count a request's hit as the driver could refill it: whole columns of
 * @p column tokens, and with @p minus_one never the prompt's last token
 * (the design's rule, which the driver follows unless --no-minus-one).
 * Every reference below then measures policy against policy under the
 * same rule. Until this is called, every token of a hit block counts.
 */
void oracle_blocks_replay_rule(struct oracle_blocks *b, uint32_t column, bool minus_one);

/**
 * The plain baseline: an LRU cache of at most capacity / block blocks (0:
 * unlimited). A request's blocks become most recent in order, so its last
 * block ends the most recent.
 */
double oracle_plain_lru(const struct oracle_blocks *b, uint64_t capacity, uint32_t block);

/** What a replacement with bypass is told of the future (oracle_told). */
enum oracle_told {
	/**
	 * When each block is used next: Belady with bypass. Frees the block used
	 * again furthest in the future.
	 */
	ORACLE_BELADY,
	/**
	 * The same, but a block's first use counts as never used again (so it
	 * is not stored), later uses as Belady knows them. Measures what knowing
	 * *when* seen blocks return is worth to a policy that admits a block
	 * only on its second sighting.
	 */
	ORACLE_BELADY_SEEN,
	/**
	 * How many more times the block will be used, but not when: frees the
	 * block with the fewest uses left (least recently used among equals).
	 * Measures how much of Belady's lead is knowing popularity rather than
	 * timing.
	 */
	ORACLE_TOLD_USES,
	/**
	 * Also when the block's last use comes: frees the block with the
	 * longest wait per use left (the time to its last use over its uses
	 * left). What a policy that learns each block's rate of use and when
	 * that use ends could reach at best.
	 */
	ORACLE_TOLD_RATE,
	/**
	 * Only each block's mean gap between uses over its whole life (the rate
	 * an online estimate converges to), not whether any use is left: a
	 * block used once ranks last, and a block past its last use keeps its
	 * rank.
	 */
	ORACLE_TOLD_LIFE_RATE,
};

/**
 * Replacement with bypass, told @p told: when full, free the block that
 * ranks last by what it is told (deepest first among equals, so only leaves
 * go), and do not store a block that would rank below every stored one.
 * @p capacity in tokens (0: unlimited).
 */
double oracle_told(const struct oracle_blocks *b, uint64_t capacity, uint32_t block,
		   enum oracle_told told);

/**
 * LRU told which blocks will be used again within @p horizon_ms of trace time
 * (0: ever): the others are never stored, and dropped when last used. An
 * upper bound for any LRU-ordered policy with admission, however it guesses.
 */
double oracle_lru_told(const struct oracle_blocks *b, uint64_t capacity, uint32_t block,
		       uint64_t horizon_ms);

/**
 * Replacement with bypass by a table fitted on the whole trace in hindsight:
 * for each kind of access (the bit length of the request's answer, how often
 * the block was used before, the bit length of its depth and of the prompt's
 * block count, how many blocks follow it in the prompt) and each age since
 * that access (0, 1, 2, 4, ..., 1024 s), the trace's hits per second of
 * residence within the next 200 s. When full, free the sampled leaf with the
 * fewest (64 samples, seeded), and do not store a block that ranks no higher.
 * An upper bound for online policies that guess from these features, which
 * they would have to learn from the past instead.
 */
double oracle_fitted_table(const struct oracle_blocks *b, uint64_t capacity, uint32_t block);

#endif
