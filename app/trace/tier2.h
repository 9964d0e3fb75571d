/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A second tier over a Mooncake trace's blocks, for kvss-trace --l2:
 * what a shard's local disk behind its DRAM is worth before it is
 * built, in the same block model as the references of oracle.h, so that it
 * compares with them exactly.
 *
 * L1 (DRAM) is a plain LRU of blocks, as oracle_plain_lru() (with no L2
 * the two agree exactly; capacities count whole blocks). A block L1
 * must free goes down to L2 when L2 admits it, else it is deleted; L2 is
 * an LRU of its own, and what it must free is deleted. A request hits its
 * leading blocks held in either tier (the first in neither ends the hit);
 * every block of it then becomes most recent in L1, those in L2 coming up
 * (moved, not copied: a block is in one tier at most), as in the plain
 * LRU. So admitting all, the two tiers hold exactly what one LRU of their
 * sum would: L1 its most recent part. What a second tier costs is then
 * only its reads and writes, and the admission rule trades hits for
 * writes.
 *
 * An L2 hit is taken only when reading it is faster than computing it
 * again: when a recompute rate is given, a request's L2 part of n tokens
 * costs latency + n x bytes per token / read bandwidth, against n / rate;
 * when it is slower the tokens count as misses (recompute_faster), and
 * still come up to L1 as computed.
 */
#ifndef KVSS_TIER2_H
#define KVSS_TIER2_H

#include <stdint.h>

#include "oracle.h"

/** What L2 admits of what L1 frees. */
enum tier2_admit {
	TIER2_ADMIT_ALL,   /**< every block */
	TIER2_ADMIT_SEEN2, /**< a block used at least twice so far (spares writes) */
	/**< a block used at least twice, or whose latest request's answer, as a
	 * driver sees it (workload_evicted_answer), was at most
	 * TIER2_SHORT_ANSWER tokens (PREFIXCACHE_L2_SHORT's rule) */
	TIER2_ADMIT_SHORT,
};

#define TIER2_SHORT_ANSWER 63

struct tier2_params {
	uint64_t l1_tokens, l2_tokens; /**< capacities (L1 0: unlimited; L2 0: no L2) */
	uint32_t block;
	enum tier2_admit admit;
	uint64_t bytes_per_token;   /**< KV bytes of a token, for the costs (0: 1) */
	double recompute_tokens_per_s; /**< 0: an L2 hit is always taken */
	double l2_read_gbps;	       /**< L2 read bandwidth, GB/s (bytes) */
	double l2_read_latency_us;     /**< per request's L2 part */
};

struct tier2_result {
	uint64_t input, hit_l1, hit_l2; /**< tokens, under the replay rule */
	uint64_t recompute_faster;	/**< L2 hit tokens not taken: computing was faster */
	uint64_t written, read;		/**< L2 tokens written (went down), read (came up) */
	double written_peak, read_peak; /**< tokens per second over the busiest peak_window_s */
	unsigned int peak_window_s;	/**< 10, or the trace's whole span when shorter */
	double seconds;			/**< the trace's span */
};

/** Run the model over @p a. @return 0, or -1 when out of memory. */
int tier2_run(const struct oracle_blocks *a, const struct tier2_params *p, struct tier2_result *r);

#endif
