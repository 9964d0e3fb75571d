/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * kvss-plan: how many tokens each shard gets (the memory-scheduling design,
 * ../shared/seeds/002_fdecab0ebcc58f81.txt).
 *
 * A shard's memory is base_mem + mem_per_token x tokens, where mem_per_token
 * is the job's bytes per token per weight-I/O stream times the shard's
 * weight-I/O count: shards are unequal, and a job can only use the tokens
 * its smallest shard holds. Memory a shard is given beyond that is wasted.
 *
 * A policy gives every (job, shard) a memory budget; the plan then turns
 * budgets into tokens:
 *  - equal:  every shard on a node gets an equal share of the node's RAM
 *            (the naive proposal, kept for comparison);
 *  - exact:  the operator's grant per shard, in tokens;
 *  - fair:   job j gets boxes(j) / all boxes of every node's RAM, divided
 *            among its shards on that node;
 *  - ratio:  as fair, with the jobs' priority ratios instead of their boxes.
 * With keep_ratio (fair and ratio), all shards of a job scale together: one
 * token count T for the job, found by a binary search that rounds down, so
 * that base + T x mem_per_token of its shards fits the job's budget on
 * every node. Without it each shard takes what its own budget holds and the
 * job uses the minimum. A discount (default 20%) is taken off every budget
 * first: the conservative grant the design asks for.
 */
#ifndef KVSS_PLAN_H
#define KVSS_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cluster.h"

/* One (job, shard) of the result. */
struct plan_grant {
	uint16_t job, shard;
	uint64_t mem_per_token;
	uint64_t budget;  /* what the policy gave, after the discount */
	uint64_t tokens;  /* granted */
	uint64_t bytes;	  /* base + tokens x mem_per_token */
	uint64_t used;	  /* base + usable x mem_per_token: what the job can use */
	uint64_t wasted;  /* bytes - used: tokens held that the job cannot use */
	uint64_t left;	  /* budget - bytes when positive: given, not allocated (rounding) */
	uint64_t over;	  /* bytes - budget when positive: the base alone does not fit */
};

/*
 * An organization's guarantee and cap as the driver takes them
 * (driver.orgs: dram_share, dram_cap), fractions of the job's usable tokens
 * written with six decimals: the share the least such fraction whose tokens
 * (the driver's: the fraction times the capacity, rounded down) reach the
 * guarantee, the cap the most whose tokens stay within the cap (never below
 * the share; 1 when there is none).
 */
struct plan_org_result {
	double share, cap;
	uint64_t share_tokens, cap_tokens; /* what the driver makes of them */
	/* The share's tokens (rounded up to give the guarantee) pass the cap:
	 * no fraction gives both (the cap written is the share's). */
	bool cap_short;
};

struct plan_job_result {
	uint64_t usable;	/* the minimum over the job's shards */
	uint64_t ideal;		/* the job's budget as one unsharded pool */
	double ratio;		/* usable / ideal */
	uint64_t budget, bytes, used, wasted, left, over; /* sums; bytes = used + wasted,
							   * budget + over = bytes + left */
	bool below_lower;
	struct plan_org_result org[PLAN_MAX_ORGS];
	uint64_t org_tokens;  /* the guarantees summed */
	double org_share_sum; /* the shares summed: above 1, the driver refuses them */
	bool orgs_over;	      /* the guarantees do not fit what the job can use */
	uint16_t caps_short;  /* organizations whose cap the share passes (cap_short) */
};

struct plan_result {
	uint32_t ngrants;
	struct plan_grant grant[PLAN_MAX_SHARDS * 2];
	struct plan_job_result job[PLAN_MAX_JOBS];
	uint64_t node_bytes[PLAN_MAX_NODES]; /* granted on each node */
	uint32_t overcommitted;		     /* nodes whose grants do not fit */
	uint32_t over_budget;		     /* grants whose base alone exceeds their budget */
};

/** Plan @p c into @p r. @return 0, or -1 with @p err (a job with no shard). */
int plan_run(const struct plan_cluster *c, struct plan_result *r, char *err, size_t errlen);

const char *plan_policy_name(enum plan_policy p);

/**
 * The six-decimal fraction of @p usable tokens the driver needs to give
 * @p tokens: the least whose (uint64_t)(fraction x usable) reaches them
 * (@p up), or the most whose tokens stay within them (!@p up). 1 at most
 * when @p up and the tokens do not fit (the caller sees it by the tokens).
 */
double plan_fraction(uint64_t tokens, uint64_t usable, bool up);

#endif
