/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Replica routing: the design's affinity policy follows load (a hot
 * organization spreads, a cold one stays home), routes the same request the
 * same way while load is unchanged, and the comparison policies do what
 * their names say; a replica added takes its share. And the fleet model
 * (fleet.h): its LRU sets, its shared level, restarts. Prompts are random:
 * the seed is printed (KVSS_SEED=N).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

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

Test(route, an_added_replica_takes_a_fifth_of_the_organizations_and_moves_no_other)
{
	struct route_params p = {.replicas = R, .policy = ROUTE_AFFINITY};
	struct router *rt = route_create(&p);
	uint32_t t[300], before[1000], org, moved = 0;
	int n;

	rng = test_seed("route", 0x5eed);
	prompt(t, 300, 3);
	/* A thousand cold organizations, each at its home. */
	for (org = 0; org < 1000; org++)
		before[org] = route_pick(rt, 1000 + org, t, 300, 60000 * (uint64_t)org);
	n = route_add_replica(rt);
	cr_assert_eq(route_replicas(rt), R + 1);
	for (org = 0; org < 1000; org++) {
		uint32_t now = route_peek(rt, 1000 + org, t, 300);

		if (now != before[org]) {
			cr_assert_eq(now, R, "org %u moved from %u to %u, not to the new replica", org,
				     before[org], now);
			moved++;
		}
	}
	cr_assert_eq((uint32_t)n, moved, "route_add_replica says %d moved, %u did", n, moved);
	/* Jump hash: 1/5 of them, binomially (1000, 0.2): 200 +- 13. */
	cr_assert(moved >= 140 && moved <= 260, "%u of 1000 organizations moved", moved);
	route_free(rt);
}

/* ---- The fleet model (fleet.h) ----------------------------------------------- */

#include "fleet.h"

/* An LRU set against a plain array kept in recency order: the same answers, always. */
Test(fleet, the_column_set_is_an_lru_of_whole_columns)
{
	struct colset s;
	uint64_t ref[64], seed = test_seed("fleet", 0xc01);
	uint32_t nref = 0, op, j, i;

	rng = seed;
	cr_assert_eq(colset_init(&s, 64), 0);
	for (op = 0; op < 200000; op++) {
		uint64_t key = 1 + test_xorshift(&rng) % 200, v = test_xorshift(&rng) % 4;
		struct colset_ent victim;

		for (j = 0; j < nref && ref[j] != key; j++)
			;
		i = colset_find(&s, key);
		cr_assert_eq(i != FLEET_NONE, j < nref, "op %u: key %" PRIu64 " held?", op, key);
		if (j < nref && v == 0) { /* drop it */
			colset_remove(&s, i);
			memmove(ref + j, ref + j + 1, (nref - j - 1) * sizeof(ref[0]));
			nref--;
		} else if (j < nref) { /* use it: most recent */
			colset_touch(&s, i);
			memmove(ref + 1, ref, j * sizeof(ref[0]));
			ref[0] = key;
		} else {
			int rc = colset_insert(&s, key, op, &victim);

			cr_assert_eq(rc, nref == 64, "op %u: a victim only when full", op);
			if (rc == 1) {
				cr_assert_eq(victim.key, ref[63], "op %u: the least recent goes", op);
				nref--;
			}
			memmove(ref + 1, ref, nref * sizeof(ref[0]));
			ref[0] = key;
			nref++;
		}
		cr_assert_eq(s.n, nref);
		if (op % 9973 == 0) { /* the whole order, from the most recent */
			for (i = s.lru.head, j = 0; i != FLEET_NONE; i = s.e[i].lru.next, j++)
				cr_assert_eq(s.e[i].key, ref[j]);
			cr_assert_eq(j, nref);
		}
	}
	colset_clear(&s);
	cr_assert_eq(s.n, 0);
	cr_assert_eq(colset_find(&s, ref[0]), FLEET_NONE);
	colset_fini(&s);
}

Test(fleet, an_unbounded_set_grows_and_a_set_of_nothing_holds_nothing)
{
	struct colset s;
	struct colset_ent v;
	uint64_t k;

	cr_assert_eq(colset_init(&s, FLEET_UNLIMITED), 0);
	for (k = 1; k <= 100000; k++)
		cr_assert_eq(colset_insert(&s, k * 0x100000001ULL, k, &v), 0);
	for (k = 1; k <= 100000; k += 2)
		colset_remove(&s, colset_find(&s, k * 0x100000001ULL));
	for (k = 1; k <= 100000; k++)
		cr_assert_eq(colset_find(&s, k * 0x100000001ULL) != FLEET_NONE, k % 2 == 0, "key %" PRIu64, k);
	cr_assert_eq(s.n, 50000);
	colset_fini(&s);
	cr_assert_eq(colset_init(&s, 0), 0);
	cr_assert_eq(colset_insert(&s, 7, 3, &v), 1);
	cr_assert_eq(v.key, 7, "what a set of no columns is given passes through");
	cr_assert_eq(s.n, 0);
	colset_fini(&s);
}

/* A hand-made trace: request i of organization org[i], tokens 1..n[i] (one shared family). */
struct hand {
	struct workload w;
	uint32_t tok[4096];
};

static void
hand_add(struct hand *h, uint64_t ts_ms, uint64_t org, uint32_t n)
{
	struct wl_req *q;
	uint32_t i;

	if (h->w.n == h->w.cap) {
		h->w.cap = h->w.cap ? 2 * h->w.cap : 16;
		h->w.r = realloc(h->w.r, h->w.cap * sizeof(*h->w.r));
		cr_assert_not_null(h->w.r);
	}
	for (i = 0; i < 4096; i++)
		h->tok[i] = i + 1;
	q = &h->w.r[h->w.n++];
	*q = (struct wl_req){.ts_ms = ts_ms, .iso = org, .tokens = h->tok, .n = n, .allowed = n,
			     .first_mm = UINT32_MAX};
	h->w.tokens += n;
}

static struct fleet_params
one_replica(uint64_t dram, uint64_t shared, enum fleet_admit admit)
{
	return (struct fleet_params){.replicas = 1, .route = ROUTE_ORG, .column = 4, .minus_one = true,
				     .dram_tokens = dram, .shared_tokens = shared, .admit = admit,
				     .restart_replica = -1};
}

/*
 * A 17-token prompt (4 columns of 4 before its last token), twice, the
 * replica restarted between them: under "all" the second finds the four
 * columns in the shared level (written when computed); under "evicted"
 * nothing (DRAM never had to free them); without a shared level, nothing.
 * The restarted replica's first request hits nothing locally.
 */
Test(fleet, a_restarted_replica_finds_in_the_shared_level_what_was_computed)
{
	struct hand h = {0};
	struct fleet_result r;
	struct fleet_params p;

	hand_add(&h, 0, 1, 17);
	hand_add(&h, 1000, 1, 17);
	p = one_replica(FLEET_UNLIMITED, FLEET_UNLIMITED, FLEET_ADMIT_ALL);
	p.restart_replica = 0;
	p.restart_at = 1;
	cr_assert_eq(fleet_run(&h.w, 2, &p, &r), 0);
	cr_assert(r.rs_done);
	cr_assert_eq(r.rs_first_local, 0, "a restart empties the replica");
	cr_assert_eq(r.hit_shared, 16);
	cr_assert_eq(r.rs_first_shared, 16);
	cr_assert_eq(r.hit_dram + r.hit_disk, 0);
	cr_assert_eq(r.shared_written, 16, "four columns written once");
	cr_assert_eq(r.rs_before.requests, 1);
	cr_assert_eq(r.rs_after.requests, 1);
	cr_assert_eq(r.rs_after.hit, 16);
	p.admit = FLEET_ADMIT_EVICTED;
	cr_assert_eq(fleet_run(&h.w, 2, &p, &r), 0);
	cr_assert_eq(r.hit_shared + r.hit_dram + r.hit_disk, 0);
	cr_assert_eq(r.shared_written, 0, "nothing was evicted");
	p.shared_tokens = 0;
	p.admit = FLEET_ADMIT_ALL;
	cr_assert_eq(fleet_run(&h.w, 2, &p, &r), 0);
	cr_assert_eq(r.hit_shared + r.hit_dram + r.hit_disk, 0);
	/* Watched only, not emptied: the second hits its own DRAM. */
	p.restart_watch_only = true;
	cr_assert_eq(fleet_run(&h.w, 2, &p, &r), 0);
	cr_assert_eq(r.rs_first_local, 16);
	cr_assert_eq(r.hit_dram, 16);
	free(h.w.r);
}

/*
 * DRAM of 2 columns under "evicted": the first request's columns go in
 * deepest first, so columns 3 and 2 are freed and go up, 1 and 0 stay.
 * The second request hits 0 and 1 in DRAM and 2 and 3 in the shared level
 * (copied down: the shared level keeps them).
 */
Test(fleet, what_dram_frees_goes_up_and_the_hit_continues_there)
{
	struct hand h = {0};
	struct fleet_result r;
	struct fleet_params p = one_replica(8, FLEET_UNLIMITED, FLEET_ADMIT_EVICTED);

	hand_add(&h, 0, 1, 17);
	hand_add(&h, 1000, 1, 17);
	cr_assert_eq(fleet_run(&h.w, 2, &p, &r), 0);
	cr_assert_eq(r.hit_dram, 8);
	cr_assert_eq(r.hit_shared, 8);
	/* Then the second request's columns go in deepest first too: 3 and 2
	 * push 1 and 0 up (written), 1 and 0 push 3 and 2 up (there already). */
	cr_assert_eq(r.shared_written, 8 + 8);
	cr_assert_eq(r.shared_exists, 8);
	cr_assert_eq(r.shared_peak, 16);
	/* With a disk of 2 columns behind DRAM, they go down, not up: all local. */
	p.disk_tokens = 8;
	cr_assert_eq(fleet_run(&h.w, 2, &p, &r), 0);
	cr_assert_eq(r.hit_dram, 8);
	cr_assert_eq(r.hit_disk, 8);
	cr_assert_eq(r.hit_shared, 0);
	cr_assert_eq(r.disk_written, 8 + 16, "a request of twice DRAM's size churns it: 1, 0, 3, 2 go down");
	free(h.w.r);
}

/*
 * The -1 rule, exclusive create, isolation, expiry. A 16-token prompt hits
 * 3 columns at most; after a restart they come from the shared level and
 * the fourth, computed again, is there already (not written: exists).
 * Another organization with the same tokens gets nothing. Past the
 * first-use TTL nothing is served.
 */
Test(fleet, exclusive_create_isolation_and_expiry)
{
	struct hand h = {0};
	struct fleet_result r;
	struct fleet_params p = one_replica(FLEET_UNLIMITED, FLEET_UNLIMITED, FLEET_ADMIT_ALL);

	hand_add(&h, 0, 1, 16);
	hand_add(&h, 4000, 1, 16);
	hand_add(&h, 4500, 2, 16);
	p.restart_replica = 0;
	p.restart_at = 1;
	cr_assert_eq(fleet_run(&h.w, 3, &p, &r), 0);
	cr_assert_eq(r.hit_shared, 12);
	cr_assert_eq(r.shared_exists, 4);
	cr_assert_eq(r.shared_written, 16 + 16, "org 1's four columns, org 2's four");
	cr_assert_eq(r.hit_dram + r.hit_disk, 0, "org 2 hits none of org 1's columns");
	/* A TTL of 5 s by first use: at 4 s they are served, org 2 still gets nothing. */
	p.shared_ttl_ms = 5000;
	cr_assert_eq(fleet_run(&h.w, 3, &p, &r), 0);
	cr_assert_eq(r.hit_shared, 12);
	cr_assert_eq(r.shared_expired, 0);
	/* A TTL of 3 s: the first column has expired, is met and deleted, the hit ends there. */
	p.shared_ttl_ms = 3000;
	cr_assert_eq(fleet_run(&h.w, 3, &p, &r), 0);
	cr_assert_eq(r.hit_shared, 0);
	cr_assert_eq(r.shared_expired, 16, "one met by the lookup, three by the rewrite");
	/* The sweeper: at 4 s it deletes every expired column before anything is looked up. */
	p.sweep_ms = 1;
	cr_assert_eq(fleet_run(&h.w, 3, &p, &r), 0);
	cr_assert_eq(r.hit_shared, 0);
	cr_assert_eq(r.shared_expired, 16);
	free(h.w.r);
}

/* A random trace: 6 organizations, prompts of shared families of prefixes. */
static void
random_trace(struct hand *h, struct workload *w, uint32_t nreq, uint32_t **store)
{
	uint32_t i, j;

	memset(w, 0, sizeof(*w));
	w->r = calloc(nreq, sizeof(*w->r));
	*store = calloc((size_t)nreq * 256, sizeof(uint32_t));
	cr_assert(w->r && *store);
	(void)h;
	for (i = 0; i < nreq; i++) {
		uint32_t fam = (uint32_t)(test_xorshift(&rng) % 12), n = 40 + test_xorshift(&rng) % 200;
		uint32_t own = (uint32_t)(test_xorshift(&rng) % 4), *t = *store + (size_t)i * 256;

		/* A family's first 32 tokens, then one of four continuations, then its own. */
		for (j = 0; j < n; j++)
			t[j] = j < 32 ? fam * 1000 + j : j < 96 ? (fam * 4 + own) * 100000 + j
							       : (uint32_t)test_xorshift(&rng);
		w->r[i] = (struct wl_req){.ts_ms = 100ull * i, .iso = 1 + fam % 6, .tokens = t, .n = n,
					  .allowed = n, .first_mm = UINT32_MAX};
		w->n++;
		w->tokens += n;
	}
}

/*
 * Two exact equivalences on a random trace. DRAM and a disk behind it,
 * LRU each, hold what one LRU of their sum holds: the same hits. And a
 * fleet of any size with an unbounded shared level taking every column
 * computed hits exactly what one unbounded cache does.
 */
Test(fleet, two_tiers_are_one_lru_and_an_unbounded_shared_level_is_one_cache)
{
	struct hand h;
	struct workload w;
	struct fleet_result a, b;
	struct fleet_params p = one_replica(64 * 4, 0, FLEET_ADMIT_ALL), q;
	uint32_t *store;

	rng = test_seed("fleet", 0xf1ee7);
	random_trace(&h, &w, 3000, &store);
	p.disk_tokens = 128 * 4;
	cr_assert_eq(fleet_run(&w, w.n, &p, &a), 0);
	q = one_replica(192 * 4, 0, FLEET_ADMIT_ALL);
	cr_assert_eq(fleet_run(&w, w.n, &q, &b), 0);
	cr_assert_gt(a.hit_disk, 0);
	cr_assert_eq(a.hit_dram + a.hit_disk, b.hit_dram, "two tiers %" PRIu64 ", one %" PRIu64,
		     a.hit_dram + a.hit_disk, b.hit_dram);
	p = one_replica(16 * 4, FLEET_UNLIMITED, FLEET_ADMIT_ALL);
	p.replicas = 4;
	p.route = ROUTE_RANDOM;
	cr_assert_eq(fleet_run(&w, w.n, &p, &a), 0);
	q = one_replica(FLEET_UNLIMITED, 0, FLEET_ADMIT_ALL);
	cr_assert_eq(fleet_run(&w, w.n, &q, &b), 0);
	cr_assert_gt(a.hit_shared, 0);
	cr_assert_eq(a.hit_dram + a.hit_disk + a.hit_shared, b.hit_dram);
	/* Under "evicted" a bounded level is a victim cache: it can only add hits. */
	p.shared_tokens = 64 * 4;
	p.admit = FLEET_ADMIT_EVICTED;
	cr_assert_eq(fleet_run(&w, w.n, &p, &a), 0);
	p.shared_tokens = 0;
	cr_assert_eq(fleet_run(&w, w.n, &p, &b), 0);
	/* What DRAM holds is the same either way (a column hit in the shared
	 * level comes down as one computed would), so DRAM hits no fewer. */
	cr_assert_geq(a.hit_dram, b.hit_dram);
	cr_assert_gt(a.hit_shared, 0);
	cr_assert_eq(b.hit_shared, 0);
	free(w.r);
	free(store);
}

Test(fleet, bad_parameters_are_refused)
{
	struct hand h = {0};
	struct fleet_result r;
	struct fleet_params p = one_replica(FLEET_UNLIMITED, 0, FLEET_ADMIT_ALL);

	hand_add(&h, 0, 1, 17);
	hand_add(&h, 1, 1, 17);
	p.restart_replica = 1; /* of one replica */
	p.restart_at = 1;
	cr_assert_eq(fleet_run(&h.w, 2, &p, &r), -2);
	p.restart_replica = 0;
	p.restart_at = 2; /* past the end */
	cr_assert_eq(fleet_run(&h.w, 2, &p, &r), -2);
	p = one_replica(3, 0, FLEET_ADMIT_ALL); /* DRAM under a column */
	cr_assert_eq(fleet_run(&h.w, 2, &p, &r), -2);
	p = one_replica(64, 0, FLEET_ADMIT_ALL);
	p.replicas = 0;
	cr_assert_eq(fleet_run(&h.w, 2, &p, &r), -2);
	p.replicas = 1;
	p.add_at = 1; /* one to two */
	cr_assert_eq(fleet_run(&h.w, 2, &p, &r), 0);
	cr_assert(r.add_done);
	cr_assert_eq(r.add_before.requests, 1);
	free(h.w.r);
}

/*
 * Room for two columns in the shared level, every column written when
 * computed: A (org 1), B (org 2), A again (a local hit), C (org 3), then the
 * replica restarts and A comes once more. Without touch, C pushes out A,
 * least recently written; with it, A's local hit made it most recent, so B
 * goes and A is found.
 */
Test(fleet, a_local_hit_keeps_the_shared_copy_when_touch_is_on)
{
	struct hand h = {0};
	struct fleet_result r;
	struct fleet_params p = one_replica(FLEET_UNLIMITED, 8, FLEET_ADMIT_ALL);

	hand_add(&h, 0, 1, 5);
	hand_add(&h, 1, 2, 5);
	hand_add(&h, 2, 1, 5);
	hand_add(&h, 3, 3, 5);
	hand_add(&h, 4, 1, 5);
	p.restart_replica = 0;
	p.restart_at = 4;
	cr_assert_eq(fleet_run(&h.w, 5, &p, &r), 0);
	cr_assert_eq(r.hit_dram, 4, "A's second use, locally");
	cr_assert_eq(r.hit_shared, 0);
	cr_assert_eq(r.shared_evicted, 8, "A for C, then B for A computed again");
	cr_assert_eq(r.shared_touched, 0);
	p.shared_touch = true;
	cr_assert_eq(fleet_run(&h.w, 5, &p, &r), 0);
	cr_assert_eq(r.hit_dram, 4);
	cr_assert_eq(r.shared_touched, 4);
	cr_assert_eq(r.hit_shared, 4, "after the restart A comes from the shared level");
	cr_assert_eq(r.shared_evicted, 4, "B for C");
	free(h.w.r);
}
