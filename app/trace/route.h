/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Which replica gets a request (the primary design's "Cross-Replica
 * Considerations"): load-balancer affinity instead of a shared cache.
 *
 *  - affinity (the design's): an organization lives on one replica (its
 *    home, by a consistent hash). When it is too hot for one replica (its
 *    recent load above `hot` x the mean replica load, or its home replica
 *    above `bound` x the mean with it a real part of that) it spreads over
 *    as many consecutive replicas as its load needs, a request's place among
 *    them chosen by a hash of the first 100 tokens of its prompt; if one of
 *    them still gets far more than its part, 200 tokens, and so on. When it
 *    cools down it shrinks back. Changes are made at most once per
 *    `period_ms` of trace time per organization, so while load is unchanged
 *    the same request always goes the same way.
 *  - random, org (organization only), prefix (hash of the first 100 tokens
 *    only), and chash: consistent hashing with bounded loads (Mirrokni et
 *    al.) of the organization and first 100 tokens: the first replica on the
 *    ring, from the key's point on, whose recent load is within `bound` x
 *    the mean.
 * Loads are tokens, decayed exponentially with time constant `window_ms` of
 * trace time. No allocation after create, no clock of its own.
 */
#ifndef KVSS_ROUTE_H
#define KVSS_ROUTE_H

#include <stdint.h>

#define ROUTE_MAX_REPLICAS 64

enum route_policy { ROUTE_AFFINITY, ROUTE_RANDOM, ROUTE_ORG, ROUTE_PREFIX, ROUTE_CHASH };

struct route_params {
	uint32_t replicas;
	enum route_policy policy;
	uint32_t prefix_step; /* tokens per level: 100 */
	uint32_t max_level;   /* prefix of at most max_level x prefix_step tokens: 8 */
	double hot;	      /* affinity: spread when load > hot x mean replica load: 1.0 */
	double bound;	      /* chash: a replica takes keys while load <= bound x mean: 1.25 */
	uint64_t window_ms;   /* load decay time constant: 60000 */
	uint64_t period_ms;   /* affinity: an organization changes at most this often: 15000 */
	uint64_t seed;	      /* random */
};

struct router;

/** @return NULL for bad parameters (replicas 0 or above the maximum) or no memory. */
struct router *route_create(const struct route_params *p);
void route_free(struct router *r);

/** The replica for a request at trace time @p now_ms; its tokens count as that replica's load. */
uint32_t route_pick(struct router *r, uint64_t org, const uint32_t *tokens, uint32_t n,
		    uint64_t now_ms);

/** The replica route_pick() would choose now, changing nothing. */
uint32_t route_peek(struct router *r, uint64_t org, const uint32_t *tokens, uint32_t n);

/** An organization's current spread (replicas) and prefix level (0: whole). */
void route_org_state(const struct router *r, uint64_t org, uint32_t *spread, uint32_t *level);

/**
 * One more replica (a scale-out), numbered route's replica count before the
 * call: the consistent hashes take it in, so only keys whose place is now
 * the new replica move (jump hash: about 1/(R+1) of the organizations' homes,
 * all to the new one; chash: the arcs its points take). Known
 * organizations keep their spread and level; their slots' loads restart.
 * @return the known organizations whose home moved, or -1 at the maximum.
 */
int route_add_replica(struct router *r);

/** The replicas routed over now. */
uint32_t route_replicas(const struct router *r);

/** Policy names ("affinity", ...): index by enum, or -1 from a name. */
const char *route_policy_name(enum route_policy p);
int route_policy_parse(const char *name);

#endif
