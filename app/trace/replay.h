/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A whole system in one thread, for kvss-trace and tests: lib/prefixcache
 * drives a real lib/kvstore per model, an emulated wafer produces every
 * evicted token's bytes (PROTOCOL.md section 6 reference content) and checks
 * every refilled byte against what the requesting sequence's prefix must
 * give. Any message a shard would refuse counts as a protocol error.
 */
#ifndef KVSS_REPLAY_H
#define KVSS_REPLAY_H

#include <stdbool.h>
#include <stdint.h>

#include "kvstore.h"
#include "prefixcache.h"

struct replay_params {
	struct prefixcache_params pc;
	uint32_t bytes_per_token; /**< B_c of every cache in the emulated shard */
	uint16_t num_buffers;
	/** Called for every protocol message (for tests), may be NULL. */
	struct prefixcache_sink observe;
	/**
	 * The second tier: with a model's l2_capacity_tokens, its emulated
	 * shard keeps L2 in a lib/kvdisk file created in this directory
	 * (removed at the end); NULL: no second tier.
	 */
	const char *l2_dir;
};

struct replay_stats {
	uint64_t protocol_errors; /**< anything a shard refused or a rule broken */
	uint64_t verify_failures; /**< refilled bytes that differ from the reference */
	uint64_t refills;
	uint64_t refill_tokens; /**< tokens checked byte by byte */
	uint64_t evict_batches;
	uint64_t deletes;
	uint64_t max_stored;	/**< largest count the shards held, per cache */
	/** Now: |tokens each shard cache holds - the driver's account of them|, summed. */
	uint64_t unaccounted_tokens;
	/** The second tier: tokens written to and read from the L2 files, columns it holds. */
	uint64_t l2_written_tokens, l2_read_tokens, l2_columns;
	/** Its deletes, and of them those a put's write cleared (no header written). */
	uint64_t l2_deletes, l2_deletes_absorbed;
};

struct replay;
struct replay_seq;

struct replay *replay_create(const struct replay_params *p);
void replay_free(struct replay *r);
struct prefixcache *replay_pc(struct replay *r);
struct kvstore *replay_kv(struct replay *r, uint16_t model);
void replay_stats(const struct replay *r, struct replay_stats *st);

/** Begin a sequence: lookup, refill (checked once its batches are in), reserve. */
struct replay_seq *replay_begin(struct replay *r, uint16_t model,
				const struct prefixcache_request *req, uint64_t now,
				struct prefixcache_hit *hit);
/** Send the sequence's next @p n tokens (prompt, then @p gen beyond the prompt). */
void replay_send(struct replay *r, struct replay_seq *s, uint32_t n, const uint32_t *gen,
		 uint64_t now);
/**
 * Speculative decoding: @p n speculative tokens after what was sent; they are
 * evicted (their batch sent at once, so each eviction carries the bytes of
 * its own prefix) but enter no column until verified.
 */
void replay_speculate(struct replay *r, struct replay_seq *s, const uint32_t *tokens, uint32_t n,
		      uint64_t now);
/**
 * The first @p accepted speculative tokens were right; the rest are dropped,
 * and the next replay_send() sends the corrected tokens at their positions
 * (overwriting them in the shard).
 */
void replay_verify(struct replay *r, struct replay_seq *s, uint32_t accepted, uint64_t now);
/** The prompt id of the sequence (its evictions). */
uint64_t replay_prompt_id(const struct replay_seq *s);
void replay_end(struct replay *r, struct replay_seq *s, uint64_t now);

/** begin + send the whole prompt and @p ngen generated tokens + end. Returns hit tokens. */
uint32_t replay_request(struct replay *r, uint16_t model, const struct prefixcache_request *req,
			const uint32_t *gen, uint32_t ngen, uint64_t now);

#endif
