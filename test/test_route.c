/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Replica routing: the design's affinity policy follows load (a hot
 * organization spreads, a cold one stays home), routes the same request the
 * same way while load is unchanged, and the comparison policies do what
 * their names say. Prompts are random: the seed is printed (KVSS_SEED=N).
 */
#include <criterion/criterion.h>
#include <stdio.h>

#include "route.h"
#include "test_rng.h"

#define R 4

static uint64_t rng;

static void
prompt(uint32_t *t, uint32_t n, uint32_t family)
{
	uint32_t i;

	/* A family shares its first 50 tokens; the rest is the request's own. */
	for (i = 0; i < n; i++)
		t[i] = i < 50 ? family * 1000 + i : (uint32_t)test_xorshift(&rng);
}

/*
 * Ten minutes of trace time: org 1 sends 70% of the requests (many prompt
 * families), orgs 2..5 share 29%, org 9 sends 1%. Returns, for the last two
 * minutes, the replicas org 1 and org 9 used and each replica's tokens.
 */
static void
drive(struct router *rt, uint32_t *used1, uint32_t *used9, double *tok)
{
	uint32_t t[300];
	uint64_t ms;

	*used1 = *used9 = 0;
	for (ms = 0; ms < 600000; ms += 50) {
		uint32_t pick = (uint32_t)(test_xorshift(&rng) % 100), org, rep;

		org = pick < 70 ? 1 : pick < 99 ? 2 + pick % 4 : 9;
		prompt(t, 300, org * 100 + (uint32_t)(test_xorshift(&rng) % 40));
		rep = route_pick(rt, org, t, 300, ms);
		if (ms >= 480000) {
			tok[rep] += 300;
			if (org == 1)
				*used1 |= 1u << rep;
			if (org == 9)
				*used9 |= 1u << rep;
		}
	}
}

Test(route, a_hot_organization_spreads_and_a_cold_one_stays_home)
{
	struct route_params p = {.replicas = R, .policy = ROUTE_AFFINITY};
	struct router *rt = route_create(&p);
	uint32_t used1, used9, spread, level, i;
	double tok[R] = {0}, total = 0, max = 0;

	rng = test_seed("route", 0x5eed);
	cr_assert_not_null(rt);
	drive(rt, &used1, &used9, tok);
	route_org_state(rt, 1, &spread, &level);
	cr_assert_geq(spread, 2, "the hot organization spreads (spread %u)", spread);
	cr_assert_geq(level, 1);
	cr_assert_geq(__builtin_popcount(used1), 2, "org 1 used replicas %#x", used1);
	route_org_state(rt, 9, &spread, &level);
	cr_assert_eq(spread, 1, "the cold organization stays on one replica");
	cr_assert_eq(__builtin_popcount(used9), 1, "org 9 used replicas %#x", used9);
	/* And the load follows: no replica carries twice its share. */
	for (i = 0; i < R; i++) {
		total += tok[i];
		if (tok[i] > max)
			max = tok[i];
	}
	cr_assert_lt(max / (total / R), 2.0, "busiest replica %.2f x the mean", max / (total / R));
	route_free(rt);
}

Test(route, organization_only_keeps_a_hot_organization_on_one_replica)
{
	struct route_params p = {.replicas = R, .policy = ROUTE_ORG};
	struct router *rt = route_create(&p);
	uint32_t used1, used9;
	double tok[R] = {0};

	rng = test_seed("route", 0x5eed);
	drive(rt, &used1, &used9, tok);
	cr_assert_eq(__builtin_popcount(used1), 1, "org 1 used replicas %#x", used1);
	route_free(rt);
}

Test(route, the_same_request_goes_the_same_way_while_load_is_unchanged)
{
	enum route_policy pol[] = {ROUTE_AFFINITY, ROUTE_ORG, ROUTE_PREFIX, ROUTE_CHASH};
	uint32_t t[300], k, i;

	rng = test_seed("route", 0x5eed);
	for (k = 0; k < 4; k++) {
		struct route_params p = {.replicas = R, .policy = pol[k]};
		struct router *rt = route_create(&p);
		uint32_t used1, used9, first;
		double tok[R] = {0};

		drive(rt, &used1, &used9, tok);
		prompt(t, 300, 107);
		first = route_peek(rt, 1, t, 300);
		for (i = 0; i < 20; i++)
			cr_assert_eq(route_peek(rt, 1, t, 300), first, "%s", route_policy_name(pol[k]));
		route_free(rt);
	}
}

Test(route, prefix_routing_ignores_the_organization_and_chash_bounds_loads)
{
	struct route_params p = {.replicas = R, .policy = ROUTE_PREFIX};
	struct router *rt = route_create(&p);
	uint32_t t[300], i, reps = 0;

	rng = test_seed("route", 0x5eed);
	prompt(t, 300, 5);
	cr_assert_eq(route_peek(rt, 1, t, 300), route_peek(rt, 2, t, 300));
	route_free(rt);
	/* One key, asked again and again: bounded loads move it on when its
	 * replica exceeds 1.25 x the mean. */
	p.policy = ROUTE_CHASH;
	rt = route_create(&p);
	for (i = 0; i < 400; i++)
		reps |= 1u << route_pick(rt, 1, t, 300, 1000 + i);
	cr_assert_geq(__builtin_popcount(reps), 3, "replicas used %#x", reps);
	route_free(rt);
	cr_assert_null(route_create(&(struct route_params){.replicas = 0}));
	cr_assert_null(route_create(&(struct route_params){.replicas = ROUTE_MAX_REPLICAS + 1}));
}
