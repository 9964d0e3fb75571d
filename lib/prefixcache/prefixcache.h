/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef KVSS_PREFIXCACHE_H
#define KVSS_PREFIXCACHE_H

/**
 * @file
 * The driver's prompt-cache logic (SwDriver): what is cached, refilled,
 * deleted and when. It knows nothing of DPDK: requests and tokens come in,
 * protocol messages (RESERVE, EVICT batches, REFILL, DELETE) go out through a
 * sink of function pointers, and STATUS-derived events (REFILL_DONE,
 * TOKEN_LOST, shard restarts) come back.
 *
 * Model. Each model (target, draft, ...) has caches; caches that follow the
 * same allocation rule form a group sharing one PrefixMap per organization:
 * a map from the chained hash of a prefix's columns to where the column is
 * stored (prompt id, length, evict count, first and last use, parent). A
 * full-attention group has columns of C tokens; a sliding-window group
 * (window W, S sink tokens) has columns of physical window positions, which
 * after the loop-around end at unusual prefix lengths.
 *
 * Guarantees. It never asks a shard to hold more tokens than its capacity
 * (the minimum over the model's shards, per cache), never sends an illegal
 * operation (growth only on the right, deletes only of suffixes), never lets
 * one organization reach another's entries (keys carry the organization,
 * and hashes are seeded with its isolation_id, or with its salted root for
 * a request with a cache salt: another salt's entries are not reached
 * either), never returns an entry past
 * its expiry, and never deletes a column an in-flight refill needs.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PREFIXCACHE_MAX_MODELS 4
#define PREFIXCACHE_MAX_CACHES 16
#define PREFIXCACHE_COLUMN_DEFAULT 64

/** How a cache allocates on the wafer. */
enum prefixcache_rule {
	PREFIXCACHE_FULL, /**< token i at position i */
	PREFIXCACHE_SWA,  /**< sliding window of W positions, S of them sinks */
};

/** Which columns to delete when full. */
enum prefixcache_policy {
	PREFIXCACHE_LRU,      /**< least recently used leaf (default) */
	PREFIXCACHE_LFU,      /**< least often used leaf, then least recent */
	PREFIXCACHE_PRIORITY, /**< LRU, but columns under a request's priority hint go last */
	/**
	 * Segmented LRU. A column starts on probation unless it was seen
	 * before it was stored (a count-min sketch of the columns of every
	 * prompt looked up); a hit makes it protected. Probation is freed
	 * first; protected columns beyond (100 - probation_pct)% of capacity
	 * go back to probation's recent end. Columns seen once are thus kept
	 * from flushing the ones that return.
	 */
	PREFIXCACHE_SLRU,
	/**
	 * LRU with admission by sighting. Columns are new (never seen
	 * before they were stored, never hit) or known (seen before, hit,
	 * or added by a conversation going on), sighted as in SLRU. New
	 * columns are freed first; a new column may free only new ones, and
	 * when none is left its sequence stops caching there (bypass) rather
	 * than push out a known column. Known columns go in LRU order.
	 */
	PREFIXCACHE_ADMIT,
	/**
	 * LRU that learns which sequences get followed up. At its end a
	 * sequence's class is the bit length of the tokens it generated
	 * (its answer); the columns it stored carry the class in a tag
	 * table (ghost_entries slots of one byte, surviving deletion) until
	 * a lookup or a later store sees them again, which counts their
	 * tokens as reused for that class. When the share of stored tokens
	 * reused is under followup_pct for the class, the sequence's columns
	 * go to a cold list, freed first (least recent first); a hit brings
	 * a column back to the main list.
	 */
	PREFIXCACHE_FOLLOWUP,
};

/** The policies' names in enum order, NULL-terminated: "lru", "lfu", "priority", "slru", "admit", "followup". */
extern const char *const prefixcache_policy_names[];

struct prefixcache_cache {
	uint16_t cache_id;
	enum prefixcache_rule rule;
	uint32_t window; /**< SWA: W, positions in the window (sinks included) */
	uint32_t sinks;	 /**< SWA: S */
	/** Tokens the cache can hold: the minimum over the model's shards. */
	uint64_t capacity_tokens;
};

/**
 * The slot in which cache @p c keeps token @p pos of a prefix of @p len
 * tokens: a FULL cache slot pos; a sliding window, once @p len is past its
 * first lap, its sinks in their own slots and the rest in S + (pos - S)
 * mod (W - S). A refill glues tokens in slot order, prefixcache_glue_len()
 * of them: checkers use both.
 */
static inline uint32_t
prefixcache_slot(const struct prefixcache_cache *c, uint32_t len, uint32_t pos)
{
	if (c->rule != PREFIXCACHE_SWA || len <= c->window || pos < c->sinks)
		return pos;
	return c->sinks + (pos - c->sinks) % (c->window - c->sinks);
}

static inline uint32_t
prefixcache_glue_len(const struct prefixcache_cache *c, uint32_t len)
{
	return c->rule == PREFIXCACHE_SWA && len > c->window ? c->window : len;
}

struct prefixcache_model {
	uint16_t num_caches;
	struct prefixcache_cache cache[PREFIXCACHE_MAX_CACHES];
	/** Refill-time model: fixed latency plus bytes over bandwidth. */
	uint64_t refill_latency_ns;
	double refill_bytes_per_ns;
	/** Bytes per token on the busiest shard (all caches): what one refill moves there. */
	uint64_t refill_bytes_per_token;
	/** Tokens per EVICT batch at most (G); entries G x num_caches fit one frame. */
	uint16_t max_batch_tokens;
	/**
	 * The second tier (each shard's local disk), in tokens per cache: the
	 * minimum over the model's shards; 0: none. Only for a model whose
	 * caches are all full attention (a sliding window's column means
	 * nothing without the window's glue): pc_l2.c.
	 */
	uint64_t l2_capacity_tokens;
	/** What L2 takes of the columns the policy frees (enum prefixcache_l2_admit). */
	uint8_t l2_admit;
	/**
	 * The second tier's line of the refill-time model: what bringing n
	 * tokens up from L2 adds to a refill (latency + n x
	 * refill_bytes_per_token / bandwidth; 0 bandwidth: no bandwidth term).
	 */
	uint64_t l2_latency_ns;
	double l2_bytes_per_ns;
	/**
	 * The shared level's line, the same way: what bringing n tokens staged
	 * from the shared level up adds to a refill (the shards read them from
	 * the cluster, not their disks). A hit of both kinds adds both lines.
	 */
	uint64_t shared_latency_ns;
	double shared_bytes_per_ns;
	/**
	 * The wafer's prefill rate, tokens per ns (0: not known, every hit
	 * taken). A hit is refilled only where that beats computing it: a
	 * DRAM hit whose refill estimate (the line above) is no shorter than
	 * computing its tokens is not taken at all (recompute_faster_tokens),
	 * and of the rest, a part in L2 whose line (below the DRAM one's)
	 * does not beat computing its tokens is not taken either
	 * (l2_recompute_faster_tokens).
	 */
	double recompute_tokens_per_ns;
	/**
	 * Cake's split ("Compute or Load KV Cache? Why Not Both?", ICML 2025):
	 * a hit of H tokens worth refilling is refilled from token k on,
	 * while the wafer computes tokens [0, k): k = (latency + H x b) /
	 * (c + b), b DRAM's line's ns per token refilled and c the ns per
	 * token computed, so that both end together, sooner than either
	 * alone; a part coming up from a tier adds its line's time to the
	 * refill's, and the front is at most the DRAM part (what comes up is
	 * refilled, never computed). Only for a model of one full-attention
	 * group; with a rate to compute by (the rule above).
	 */
	bool split;
};

enum prefixcache_l2_admit {
	PREFIXCACHE_L2_ALL,   /**< every column the policy frees */
	PREFIXCACHE_L2_SEEN2, /**< a column hit at least once (fewer writes, fewer hits) */
	/**
	 * a column hit at least once, or stored by a sequence whose answer was
	 * short (at most PREFIXCACHE_L2_SHORT_ANSWER tokens past its prompt):
	 * on the Mooncake trace a column seen once is read back from L2 at
	 * about 0.6 per token written when its request answered briefly and at
	 * most 0.05 when it answered at length. Not the default: on the
	 * built-in workload (documents re-read, long answers) it loses most of
	 * the second tier's hits (docs/results.md)
	 */
	PREFIXCACHE_L2_SHORT,
};

#define PREFIXCACHE_L2_SHORT_ANSWER 63

/** A column of one cache in the second tier, as the sink's L2 operations name it. */
struct prefixcache_l2col {
	uint64_t key;	       /**< the column's chained hash (organization-scoped) */
	uint64_t parent;       /**< the hash before it (the isolation id for a prompt's first) */
	uint64_t isolation_id; /**< its organization */
	uint64_t prompt_id;    /**< down: the prompt holding it in DRAM; up: the one it goes to */
	uint64_t evict_count;  /**< down: the batch its tokens are complete after */
	uint64_t first_use_ns; /**< its first use (expiry by first use survives a restart) */
	uint32_t start, tokens; /**< token indexes [start, start + tokens) */
	uint16_t cache_id;
	/** up: its bytes come from the shared level, not the shard's disk (PROTOCOL.md section 10) */
	uint8_t shared;
	/** down: times it was hit while in DRAM (what goes down to the shared level may ask for some) */
	uint32_t hits;
};

struct prefixcache_params {
	uint16_t num_models;
	struct prefixcache_model model[PREFIXCACHE_MAX_MODELS];
	uint32_t column; /**< C, tokens per column; 0: 64 */
	enum prefixcache_policy policy;
	/**
	 * DRAM shares of an organization prefixcache_org_dram_share() did not
	 * name, as fractions of each cache group's capacity: @p dram_share
	 * guaranteed (0: none), @p dram_cap at most (0: no cap, the whole).
	 */
	double dram_share_default, dram_cap_default;
	/** The same for the second tier (the shards' disks), of its capacity. */
	double l2_share_default, l2_cap_default;
	/** Global expiry from last and first use, ns; 0: none. */
	uint64_t ttl_last_ns;
	uint64_t ttl_first_ns;
	/** Replay the last prompt token too (no "-1" rule). */
	bool no_minus_one;
	/** SLRU, admit: counters per row of the sighting sketch; followup: tag slots (0: 1M; 1 byte per counter, 4 per tag). */
	uint32_t ghost_entries;
	/** SLRU: share of capacity kept for probation, percent (0: 10; at most 90). */
	uint8_t probation_pct;
	/** followup: a class reused less than this share, percent, is cold (0: 10; at most 100). */
	uint8_t followup_pct;
	/**
	 * The second tier: a column sent down is not served until
	 * prefixcache_l2_confirm() says every shard wrote it (a driver whose
	 * shards answer asynchronously); false: at once (a synchronous tier).
	 */
	bool l2_confirm;
	/**
	 * Columns the driver found in the shared level (section 10) and staged
	 * for its lookups (prefixcache_shared_stage), at most; 0: no shared level.
	 * Nonzero, a model without a second tier gets the second tier's index
	 * for them (nothing goes down: its capacity is 0).
	 */
	uint32_t shared_staged;
	/**
	 * Make at create every entry the caches' capacities can hold (each
	 * group's capacity over the column, in all, up to
	 * PREFIXCACHE_RESERVE_MAX), and the index for them: recording then
	 * never allocates, reallocates or rehashes until the map holds more
	 * than that (it grows past it as before). A daemon's driver sets it,
	 * as DPDK sizes its pools at start; false: the map grows from nothing.
	 */
	bool reserve;
};

/** Entries prefixcache_params.reserve makes at most (88 bytes each: 92 MB). */
#define PREFIXCACHE_RESERVE_MAX (1u << 20)

/** Where the library's messages go. Each callback may be NULL. */
/**
 * Which of a model's shards a DELETE goes to: every one (both -1), one alone,
 * or every one but one. The library knows shards only by the index (within
 * the model) that the caller gave prefixcache_token_lost() or
 * prefixcache_error(): after a loss, the shard that lost a token holds less
 * of that prompt than the others, and each must get its own exact suffix.
 */
struct prefixcache_shards {
	int16_t only;	/**< this shard alone, or -1 */
	int16_t except; /**< every shard but this one, or -1 */
};

struct prefixcache_sink {
	void *arg;
	void (*reserve)(void *arg, uint16_t model, const struct proto_reserve *r);
	/** One EVICT batch: entries e[t * num_caches + c]. */
	void (*evict)(void *arg, uint16_t model, uint64_t batch_no, uint16_t num_caches, uint16_t g,
		      const struct proto_evict_entry *e);
	/** One RefillRequest (one cache) with its chunks. */
	void (*refill)(void *arg, uint16_t model, const struct proto_refill_req *r,
		       const struct proto_refill_chunk *chunks);
	void (*del)(void *arg, uint16_t model, struct prefixcache_shards to,
		    const struct proto_delete *d);
	/**
	 * Optional, for tests and tracing: a column entered the PrefixMap
	 * (first cache of its group named), holding prompt tokens [start, end).
	 */
	void (*column)(void *arg, uint16_t model, uint16_t cache_id, uint64_t isolation_id,
		       uint64_t prompt_id, uint32_t start, uint32_t end);
	/*
	 * The second tier (l2_capacity_tokens): all three or none.
	 * l2_down: copy a column's tokens from DRAM to L2 under its key (sent
	 * before the DELETE that frees them). l2_up: an EVICT batch whose bytes
	 * come from L2, not from the wafer: entries as for evict, and the
	 * columns that hold them (a long one spans batches). l2_del: L2 lets a
	 * column go, once batch @p evict_count is complete (a column moved up
	 * goes once its batches have read it; one freed for room at once, 0).
	 */
	void (*l2_down)(void *arg, uint16_t model, const struct prefixcache_l2col *c);
	void (*l2_up)(void *arg, uint16_t model, uint64_t batch_no, uint16_t num_caches, uint16_t g,
		      const struct proto_evict_entry *e, const struct prefixcache_l2col *cols,
		      uint32_t ncols);
	void (*l2_del)(void *arg, uint16_t model, uint16_t cache_id, uint64_t key,
		       uint64_t isolation_id, uint64_t evict_count);
	/**
	 * A whole column was just recorded in DRAM, every token of it verified
	 * (a model with a second tier; one call per cache, fields as l2_down's):
	 * what goes down to the shared level when its rule takes every column
	 * (PROTOCOL.md section 10). NULL: not wanted.
	 */
	void (*whole_column)(void *arg, uint16_t model, const struct prefixcache_l2col *c);
};

/** A request starting on one model. */
struct prefixcache_request {
	uint64_t isolation_id; /**< the organization (proto_ref_isolation_id of its name) */
	/**
	 * The request's cache salt, as proto_ref_salt() gives it; 0: none.
	 * Its columns' keys start from proto_ref_chain_root(isolation_id,
	 * salt), so requests of one organization with different salts share
	 * no column in any tier; its organization is still isolation_id's
	 * (its TTLs, its counts, its shared-level namespace).
	 */
	uint64_t salt;
	const uint32_t *tokens; /**< the prompt */
	uint32_t num_tokens;
	/** Leftmost tokens that may be cached; may exceed the prompt (generated tokens). */
	uint32_t cache_length_allowed;
	/** Index of the first multimodal token, or UINT32_MAX: caching stops before it. */
	uint32_t first_multimodal;
	/** Hint: the first this many tokens will be reused often (PRIORITY policy). */
	uint32_t priority_tokens;
	uint32_t sequence_id; /**< on-wafer id, written into EVICT entries and REFILLs */
	/**
	 * How long the wafer's compute is taken by others' prefills before it
	 * could begin this request's (its prefill queue, ns; 0: free now). A
	 * refill ending within that costs the request nothing: a hit is
	 * worth refilling when its estimate is under this wait plus the time
	 * computing it takes (prefixcache_model.recompute_tokens_per_ns), not
	 * under that time alone. Cake's split is judged without it.
	 */
	uint64_t compute_wait_ns;
};

/** One REFILL a lookup asked for (one per cache of its model), as the sink was given it. */
struct prefixcache_refill {
	struct proto_refill_req rq;
	const struct proto_refill_chunk *chunks; /**< rq.num_chunks of them */
};

/** What a lookup found. */
struct prefixcache_hit {
	uint32_t hit_tokens;	/**< tokens refilled instead of recomputed */
	/**
	 * Of them, the front [0, split_tokens) the wafer computes while the
	 * rest refills (params.split): the REFILLs bring [split_tokens,
	 * hit_tokens), each token to its own slot. 0: no split.
	 */
	uint32_t split_tokens;
	uint32_t l2_hit_tokens; /**< of them, those that came up from the second tier */
	uint32_t shared_hit_tokens; /**< of those, the ones staged from the shared level */
	uint32_t lookup_tokens; /**< tokens the lookup could have hit */
	uint64_t refill_id;	/**< 0 when nothing is refilled */
	uint64_t evict_count;	/**< what the refill waits for */
	uint64_t estimate_ns;	/**< refill time by the model */
	uint64_t estimate_bytes; /**< the bytes it charges: hit x bytes/token of the busiest shard */
	uint64_t prompt_id;	/**< the id this sequence's evictions use */
	/**
	 * The REFILLs of the hit (none without one), each as the sink's
	 * refill() was given it: the requester's own copy of what it awaits,
	 * so that it needs no side channel through the sink. Valid until the
	 * next call into the library.
	 */
	const struct prefixcache_refill *refills;
	uint16_t num_refills;
};

struct prefixcache;
struct prefixcache_seq;

/**
 * Create a driver. The sink is copied.
 * @return NULL with errno EINVAL (bad parameters) or ENOMEM.
 */
struct prefixcache *prefixcache_create(const struct prefixcache_params *p,
				       const struct prefixcache_sink *sink);
void prefixcache_free(struct prefixcache *pc);

/** Per-organization expiry (0: the global value). */
int prefixcache_org_ttl(struct prefixcache *pc, uint64_t isolation_id, uint64_t ttl_last_ns,
			uint64_t ttl_first_ns);

/**
 * Replace @p model's refill-time model: a refill of B bytes (on its busiest
 * shard) is estimated to take @p latency_ns + B / @p bytes_per_ns; 0 bytes
 * per ns leaves the bytes out (a fixed time). Lookups from now on use it.
 * @return 0, or -EINVAL (no such model, or a negative or NaN bandwidth).
 */
int prefixcache_set_refill_model(struct prefixcache *pc, uint16_t model, uint64_t latency_ns,
				 double bytes_per_ns);

/** The levels below DRAM with a line of their own in the refill-time model. */
enum prefixcache_level {
	PREFIXCACHE_LEVEL_L2,	  /* the second tier (the shards' disks): l2_latency_ns, l2_bytes_per_ns */
	PREFIXCACHE_LEVEL_SHARED, /* the shared level: shared_latency_ns, shared_bytes_per_ns */
};

/**
 * @p level's line of @p model's refill-time model (what bringing n tokens
 * up from there adds: @p latency_ns + n x refill_bytes_per_token /
 * @p bytes_per_ns; 0: no bandwidth term), as prefixcache_set_refill_model
 * sets DRAM's; and what it is now. 0, or -EINVAL (no such model or level,
 * or, to set, a negative or NaN bandwidth).
 */
int prefixcache_set_level_model(struct prefixcache *pc, uint16_t model, enum prefixcache_level level,
				uint64_t latency_ns, double bytes_per_ns);
int prefixcache_level_model(const struct prefixcache *pc, uint16_t model, enum prefixcache_level level,
			    uint64_t *latency_ns, double *bytes_per_ns);

/**
 * @p model's refill-time model now (as configured, or as last set): its
 * latency in *@p latency_ns, its bandwidth in *@p bytes_per_ns (0: none).
 * @return 0, or -EINVAL (no such model).
 */
int prefixcache_refill_model(const struct prefixcache *pc, uint16_t model, uint64_t *latency_ns,
			     double *bytes_per_ns);

/**
 * Start a sequence on @p model: look up the longest cached prefix, emit one
 * REFILL request per cache for the hit and a RESERVE for the evictions to
 * come. The sequence then continues from token hit_tokens: feed every token
 * sent to the wafer from there with prefixcache_token().
 * @return the sequence, or NULL (errno ENOMEM, EINVAL).
 */
struct prefixcache_seq *prefixcache_begin(struct prefixcache *pc, uint16_t model,
					  const struct prefixcache_request *req, uint64_t now_ns,
					  struct prefixcache_hit *hit);

/**
 * A token is sent to the wafer (the next prompt token, or a generated one,
 * whose id is @p token). If it may be cached, room is made (deleting columns
 * by the policy) and its eviction entry goes into the current batch; a
 * completed column enters the PrefixMap.
 * @return 1 when the token is evicted, 0 when not cached.
 */
int prefixcache_token(struct prefixcache *pc, struct prefixcache_seq *s, uint32_t token,
		      uint64_t now);

/**
 * The next @p n tokens, as @p n calls of prefixcache_token() would (the
 * same sink calls in the same order, the same state), but each run of
 * them that needs no room made, no new prompt and no batch sent is taken
 * at once: what a wafer's step sends costs about what hashing it does.
 * @return the tokens evicted.
 */
int prefixcache_tokens(struct prefixcache *pc, struct prefixcache_seq *s, const uint32_t *tokens,
		       uint32_t n, uint64_t now);
/**
 * Speculative decoding: @p n speculative tokens after the verified ones; they
 * are evicted but enter no column until verified.
 */
int prefixcache_speculate(struct prefixcache *pc, struct prefixcache_seq *s,
			  const uint32_t *tokens, uint32_t n, uint64_t now_ns);

/**
 * Speculative decoding: the first @p accepted speculative tokens were right;
 * the rest are dropped (their positions will be evicted again, overwriting
 * in place). Verified columns enter the PrefixMap.
 */
int prefixcache_verify(struct prefixcache *pc, struct prefixcache_seq *s, uint32_t accepted,
		       uint64_t now_ns);

/*
 * Of PREFIXCACHE_PROBE_EVERY DRAM hits in a row that the refill-or-recompute
 * rule refuses, the last is refilled anyway (refill_probes): the rule reads
 * a line learned from refills, and with none taken the line would never
 * move again. One line slowed by a bad minute (a shard's restart, its
 * queues) would otherwise keep the cache unused for good.
 */
#define PREFIXCACHE_PROBE_EVERY 32

/*
 * The same for a hit's part below DRAM (the second tier, the shared level:
 * l2_refill_probes), and, while a level's refills come back in under half
 * the time its line gave them (prefixcache_l2_sampled()), every
 * PREFIXCACHE_PROBE_FAST-th: a window of a line's points is 64 wide and
 * moves by its median, so a line learned slow flips only once half of its
 * points are new, and a probe each 32 refusals takes a thousand refusals
 * for that. After PREFIXCACHE_PROBE_FAST_MAX probes with no refill of the
 * level come back, the slow count again. A probe costs its request at
 * most the prefills queued before it and twice its computing: a refill
 * still out then is given up (the driver).
 */
#define PREFIXCACHE_PROBE_FAST 2
#define PREFIXCACHE_PROBE_FAST_MAX 16

/** Send the current EVICT batch of every model now (a wafer step ends). */
void prefixcache_flush(struct prefixcache *pc);

/** The sequence ends: its trailing tokens that fill no column are deleted. */
void prefixcache_end(struct prefixcache *pc, struct prefixcache_seq *s, uint64_t now_ns);

/**
 * The sequence stops evicting before its end (the wafer's EVICT path backed
 * up): at its prefixcache_end, what it sent is not taken for its whole
 * answer (no answer-length class for the followup policy, no L2 "short").
 */
void prefixcache_cut(struct prefixcache_seq *s);

/**
 * A refill of @p model from @p level (PREFIXCACHE_LEVEL_L2 or _SHARED) came
 * back: @p under_line when in under half the time the level's line gave it
 * (the line is behind: hits it refuses are probed every
 * PREFIXCACHE_PROBE_FAST-th), else not (every PREFIXCACHE_PROBE_EVERY-th).
 * 0, or -EINVAL.
 */
int prefixcache_l2_sampled(struct prefixcache *pc, uint16_t model, enum prefixcache_level level,
			   bool under_line);

/** Every how many refusals in a row @p model probes @p level now (0: no such model or level). */
uint32_t prefixcache_l2_probe_every(const struct prefixcache *pc, uint16_t model,
				    enum prefixcache_level level);

/** A REFILL_DONE arrived: the refill's columns may be deleted again. */
void prefixcache_refill_done(struct prefixcache *pc, uint64_t refill_id);

/**
 * TOKEN_LOST from the model's shard @p shard (its index in the model): every
 * column containing the token goes, and what hangs on it.
 */
void prefixcache_token_lost(struct prefixcache *pc, uint16_t model, uint16_t shard,
			    uint16_t cache_id, uint64_t prompt_id, uint32_t token_idx);

/**
 * An ERROR record from a shard. For an eviction the shard refused (HOLE,
 * LEFT_GROWTH, NO_SPACE, BAD_CACHE) the token is not stored there: as
 * TOKEN_LOST. Others (a DELETE or REFILL the shard refused) change nothing
 * the driver holds; they are counted.
 */
void prefixcache_error(struct prefixcache *pc, uint16_t model, uint16_t shard,
		       uint16_t cache_id, uint64_t prompt_id, uint32_t token_idx, uint16_t code);

/**
 * A STATUS CacheInfo from one of @p model's shards: a capacity below what the
 * driver uses lowers it (the minimum over the model's shards), deleting
 * columns until the stored count fits. Returns the capacity in force.
 */
uint64_t prefixcache_status(struct prefixcache *pc, uint16_t model, uint16_t cache_id,
			    uint64_t capacity_tokens);

/**
 * A shard of @p model restarted (new epoch): all of the model's prefixes go,
 * and what the driver knew of their second tiers (forgotten without a
 * message: the shards keep their L2 and say what it holds in their
 * inventories, prefixcache_l2_adopt()).
 */
void prefixcache_shard_restart(struct prefixcache *pc, uint16_t model);

/**
 * Take back a column that every shard of @p model holds in its second tier
 * (their inventories after a HELLO; PROTOCOL.md section 9), without its
 * bytes: @p c's key, parent, isolation_id, start, tokens, and first_use_ns
 * on the library's clock (@p now's). It goes to L2's cold end. Adopt a
 * prompt's columns in token order: a column is taken only after its parent.
 * @return 0 adopted; -EEXIST known already (nothing to do); otherwise the
 *   caller has the shards let it go (L2_DELETE): -ENOENT its parent is in
 *   neither tier, -ETIME expired (by first use, or last use taken as the
 *   first), -ENOSPC no room, -EINVAL not a whole column of a model with a
 *   second tier, -ENOMEM.
 */
int prefixcache_l2_adopt(struct prefixcache *pc, uint16_t model, const struct prefixcache_l2col *c,
			 uint64_t now);

/**
 * A column found in the shared level (its record read and checked by the
 * caller): staged, so that a lookup that ends in DRAM and the second tier
 * goes on into it and brings it up as from L2 (l2_up with .shared set).
 * Staged columns hold no shard's disk: they count in no capacity, go once
 * brought up, expire as L2's do, and the oldest goes when
 * params.shared_staged are staged. Stage a prompt's columns in token order.
 * @return 0 staged; -EEXIST known (in L2 or staged); -ENOENT its parent is
 *   in no tier; -ETIME expired; -EINVAL not a whole column of a model with a
 *   second tier, or no shared level; -ENOMEM.
 */
int prefixcache_shared_stage(struct prefixcache *pc, uint16_t model,
			     const struct prefixcache_l2col *c, uint64_t now);

/**
 * The keys of @p req's whole columns, as far as it may be cached (at most
 * @p max) into @p keys, and in @p known how many of the first ones the
 * driver holds now (in DRAM, the second tier, or staged): what is past
 * them is what the shared level is asked for. Touches nothing (expiry not
 * considered). @return how many keys.
 */
uint32_t prefixcache_columns(struct prefixcache *pc, uint16_t model,
			     const struct prefixcache_request *req, uint64_t *keys, uint32_t max,
			     uint32_t *known);

/**
 * Is column @p key of @p model's organization @p isolation_id in DRAM now, in
 * prompt @p prompt_id from token @p start, complete after batch
 * @p evict_count (as the library said when it was recorded)? A column
 * sent down later than recorded is copied only while it still is.
 */
bool prefixcache_column_held(const struct prefixcache *pc, uint16_t model, uint64_t isolation_id,
			     uint64_t key, uint64_t prompt_id, uint32_t start, uint64_t evict_count);

/** Forget every staged shared-level column (a new generation: the old ones are not served). */
void prefixcache_shared_unstage(struct prefixcache *pc);

/** Every shard wrote column @p key (l2_confirm): from now on it is served. @return whether known. */
bool prefixcache_l2_confirm(struct prefixcache *pc, uint16_t model, uint64_t isolation_id,
			    uint64_t key);

/**
 * A column did not go down on some shard (L2_DONE with an error: no room, a
 * failed write), or a shard's disk let it go on its own (L2_GONE: its key
 * retired): the driver forgets it, sending nothing (the caller has the
 * shards that hold it let it go). @return whether it was known as a
 * column of the shards' disks (a shared level's staged one is not).
 */
bool prefixcache_l2_forget(struct prefixcache *pc, uint16_t model, uint64_t isolation_id,
			   uint64_t key);

/**
 * Remove expired entries (and what hangs on them), emitting DELETEs.
 * Visits at most @p max_visits entries per call, so the control loop can run
 * it between bursts; a full sweep takes entries / max_visits calls.
 * @return entries removed.
 */
size_t prefixcache_expire(struct prefixcache *pc, uint64_t now_ns, size_t max_visits);

/*
 * The library's counters, each once: X(field, "telemetry key") and what it
 * counts. The driver's /swdriver/stats shows every one under its key
 * (scripts/telemetry-doc.py documents them from this list); the first
 * seven keep the names they had before the rest were shown, the others
 * are pc_ and the field. The loss counters: what lost (or refused) data
 * cost the cache, tokens dropped from the account (the columns from the
 * one holding the lost token to where its prompt then ended, and their
 * descendants, once per prompt whichever shards reported it), and the live
 * sequences that stopped caching at the cut (what they send after it is
 * not cached).
 */
#define PREFIXCACHE_STATS(X)                                                                        \
	X(entries, "entries") /* cached columns (entries of every PrefixMap) */                                   \
	X(policy_deletes, "policy_deletes") /* columns the deletion policy freed for room */     \
	X(bypassed, "policy_bypassed") /* admit: sequences that stopped caching rather than push out a known column */ \
	X(cold_columns, "policy_cold_columns") /* followup: columns sent to the cold list */ \
	X(deleted_tokens, "deleted_tokens") /* tokens deleted (policy, expiry, losses) */               \
	X(expired_tokens, "expired_tokens") /* tokens deleted by expiry */                         \
	X(peak_stored_tokens, "peak_stored_tokens") /* most tokens stored at once */           \
	X(requests, "pc_requests") /* requests the library looked up */                            \
	X(lookup_tokens, "pc_lookup_tokens") /* tokens the lookups covered */                      \
	X(hit_tokens, "pc_hit_tokens") /* of them, hits it handed out */                           \
	X(refills, "pc_refills") /* hits it handed out to be refilled */                                      \
	X(evicted_tokens, "pc_evicted_tokens") /* tokens it asked shards to store */               \
	X(expired_entries, "pc_expired_entries") /* entries removed by expiry */                   \
	X(dup_columns, "pc_dup_columns") /* columns stored twice (concurrent misses), freed later */ \
	X(protected_columns, "pc_protected_columns") /* SLRU, admit: columns made protected or known (seen before, or hit) */ \
	X(demotions, "pc_demotions") /* SLRU: protected columns sent back to probation */          \
	X(stopped, "pc_stopped") /* sequences whose caching stopped (no room, loss) */             \
	X(lost_tokens, "pc_lost_tokens") /* TOKEN_LOST reports received, one per token */                     \
	X(loss_dropped_tokens, "pc_loss_dropped_tokens") /* tokens dropped from the account by a loss */ \
	X(loss_stopped, "pc_loss_stopped") /* live sequences that stopped caching at a loss's cut */ \
	X(shard_errors, "pc_shard_errors") /* ERROR records received */                            \
	X(l2_down_tokens, "pc_l2_down_tokens") /* written to the second tier (per cache group) */   \
	X(l2_hit_tokens, "pc_l2_hit_tokens") /* hit in the second tier and brought up */           \
	X(l2_deleted_tokens, "pc_l2_deleted_tokens") /* let go from the second tier: room, expiry */ \
	X(l2_stored_tokens, "pc_l2_stored_tokens") /* in the second tiers now */                   \
	X(l2_recompute_faster_tokens, "pc_l2_recompute_faster_tokens") /* hit in the second tier but not taken: computing them was faster */ \
	X(recompute_faster_tokens, "pc_recompute_faster_tokens") /* hit in DRAM but not taken: computing them was faster */ \
	X(refill_probes, "pc_refill_probes") /* DRAM hits refilled though the rule refused them: the line kept learning */ \
	X(l2_refill_probes, "pc_l2_refill_probes") /* hits below DRAM brought up though the rule refused them: their lines kept learning */ \
	X(split_requests, "pc_split_requests") /* hits split: the front computed while the back refilled */ \
	X(split_tokens, "pc_split_tokens") /* the fronts they computed (hit tokens, not refilled) */ \
	X(l2_adopted_tokens, "pc_l2_adopted_tokens") /* taken back from the shards' inventories (kept across restarts) */ \
	X(shared_staged_tokens, "pc_shared_staged_tokens") /* found in the shared level and staged for lookups */ \
	X(shared_hit_tokens, "pc_shared_hit_tokens") /* of them, brought up (hits from the shared level) */

struct prefixcache_stats {
#define PREFIXCACHE_STATS_FIELD(n, k) uint64_t n;
	PREFIXCACHE_STATS(PREFIXCACHE_STATS_FIELD)
#undef PREFIXCACHE_STATS_FIELD
};

void prefixcache_stats(const struct prefixcache *pc, struct prefixcache_stats *st);

/** Tokens the driver has asked shards of @p model to hold in @p cache_id. */
uint64_t prefixcache_stored(const struct prefixcache *pc, uint16_t model, uint16_t cache_id);
/**
 * Tokens the driver counts in the second tiers of shards of @p model for
 * @p cache_id (sent down and not let go): what each such shard's STATUS
 * should say its tier holds once every L2 message has run.
 */
uint64_t prefixcache_l2_stored(const struct prefixcache *pc, uint16_t model, uint16_t cache_id);

struct prefixcache_org_stats {
	uint64_t isolation_id;
	uint64_t entries;
	uint64_t cached_tokens;
	uint64_t hit_tokens;
	uint64_t requests;
	/** DRAM tokens it holds now (every model and cache group), and the
	 * tokens its share guarantees and its cap allows, summed the same way. */
	uint64_t dram_tokens, dram_share_tokens, dram_cap_tokens;
	/** Columns of it deleted to make room for another organization's. */
	uint64_t dram_yielded;
	/** The same in the second tier (the shards' disks). */
	uint64_t l2_tokens, l2_share_tokens, l2_cap_tokens, l2_yielded;
};

/**
 * An organization's share of DRAM, as fractions of each cache group's
 * capacity: @p share guaranteed, @p cap at most (0: no cap). Shares are
 * work-conserving: what an organization does not use, others may fill up
 * to their caps, and it is taken back by deletion when its owner needs it.
 * Room is made (whatever the policy) from organizations above their share
 * first, in the policy's order; an organization at or below its share is
 * never deleted from for another's sake, only for its own; one at its cap
 * makes room from its own columns. @return 0, -EINVAL (not 0 <= share <=
 * cap <= 1 with cap 0 as 1), -ENOMEM.
 */
int prefixcache_org_dram_share(struct prefixcache *pc, uint64_t isolation_id, double share,
			       double cap);

/**
 * The same for the second tier (fractions of its capacity): a column goes
 * down only where room is made from organizations above their disk share,
 * or from its own; past its cap, from its own only.
 */
int prefixcache_org_l2_share(struct prefixcache *pc, uint64_t isolation_id, double share,
			     double cap);

/** Organizations known so far; fills up to @p max, returns how many exist. */
size_t prefixcache_orgs(const struct prefixcache *pc, struct prefixcache_org_stats *out,
			size_t max);

/** A PrefixMap entry, as prefixcache_find() reports it. */
struct prefixcache_entry_info {
	uint64_t prompt_id;
	uint32_t start, length; /**< the column is tokens [start, length) of the prefix */
	uint64_t evict_count;
	uint64_t first_used, last_used;
	uint64_t hash, parent_hash;
	uint32_t hits;
};

/**
 * The entry of the column ending at @p len of this prefix, if every column of
 * it is cached and unexpired at @p now (touches nothing).
 * @return 0, -ENOENT, or -EINVAL.
 */
int prefixcache_find(const struct prefixcache *pc, uint16_t model, uint16_t cache_id,
		     uint64_t isolation_id, const uint32_t *tokens, uint32_t len, uint64_t now,
		     struct prefixcache_entry_info *out);

/** prefixcache_find() of a prompt requested with cache salt @p salt (proto_ref_salt()). */
int prefixcache_find_salted(const struct prefixcache *pc, uint16_t model, uint16_t cache_id,
			    uint64_t isolation_id, uint64_t salt, const uint32_t *tokens,
			    uint32_t len, uint64_t now, struct prefixcache_entry_info *out);

/** Bytes the PrefixMap uses per entry (entry record and index). */
size_t prefixcache_bytes_per_entry(void);

/**
 * Bytes the driver holds now: entries, their index, prompts, organizations.
 * Not counted: the policies' fixed tables (slru and admit: 4 x ghost_entries
 * bytes of sketch; followup: 4 x ghost_entries bytes of tags).
 */
size_t prefixcache_memory(const struct prefixcache *pc);

/**
 * Hash of one column: xxh3 of its token ids (u32 little-endian) seeded with
 * the parent's hash (for the first column, the chain's root:
 * proto_ref_chain_root(), the isolation_id when there is no salt).
 */
uint64_t prefixcache_column_hash(uint64_t parent, const uint32_t *tokens, uint32_t n);


#ifdef __cplusplus
}
#endif

#endif /* KVSS_PREFIXCACHE_H */
