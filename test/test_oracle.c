/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * kvss-trace's offline references (Belady with bypass; LRU told which blocks
 * return; a cache told how many more uses) on workloads small enough to work
 * out by hand; and the two-tier model of kvss-trace --l2 (tier2.h).
 */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <string.h>

#include "oracle.h"
#include "test_rng.h"
#include "tier2.h"

#define BLOCK 10

static struct wl_req reqs[16];
static uint64_t ids[16][4];

/* Request @i: blocks @b (NUL-terminated letters), @n tokens, at @ts_ms. */
static void
req(struct workload *w, const char *b, uint32_t n, uint64_t ts_ms)
{
	size_t i = w->n++, k;

	memset(&reqs[i], 0, sizeof(reqs[i]));
	for (k = 0; b[k] != '\0'; k++)
		ids[i][k] = (uint64_t)b[k];
	reqs[i].ids = ids[i];
	reqs[i].nids = (uint32_t)k;
	reqs[i].n = n;
	reqs[i].ts_ms = ts_ms;
	w->r = reqs;
	w->tokens += n;
}

/* One request a millisecond from 0, each of the one block its letter of @seq names. */
static void
block_per_ms(struct workload *w, const char *seq)
{
	size_t i;

	for (i = 0; seq[i] != '\0'; i++)
		req(w, (char[]){seq[i], 0}, BLOCK, i);
}

/* The same, for a request that generated @out tokens. */
static void
req_out(struct workload *w, const char *b, uint32_t n, uint64_t ts_ms, uint32_t out)
{
	req(w, b, n, ts_ms);
	reqs[w->n - 1].out = out;
}

/* The first five: oracle_told() told what told_of[] says. */
enum ref { BELADY, BELADY_SEEN, TOLD_USES, TOLD_RATE, LIFE_RATE, TOLD, FITTED, PLAIN_LRU };

static const enum oracle_told told_of[] = {
	[BELADY] = ORACLE_BELADY,	  [BELADY_SEEN] = ORACLE_BELADY_SEEN,
	[TOLD_USES] = ORACLE_TOLD_USES, [TOLD_RATE] = ORACLE_TOLD_RATE,
	[LIFE_RATE] = ORACLE_TOLD_LIFE_RATE,
};

/* Reference @k over the blocks @b indexes. */
static double
ref_on(const struct oracle_blocks *b, enum ref k, uint64_t capacity, uint64_t horizon_ms)
{
	return k <= LIFE_RATE	? oracle_told(b, capacity, BLOCK, told_of[k])
	       : k == FITTED	? oracle_fitted_table(b, capacity, BLOCK)
	       : k == PLAIN_LRU ? oracle_plain_lru(b, capacity, BLOCK)
				: oracle_lru_told(b, capacity, BLOCK, horizon_ms);
}

/* Reference @k over the first @limit requests of @w (0: all). */
static double
ref(const struct workload *w, enum ref k, uint64_t capacity, size_t limit, uint64_t horizon_ms)
{
	struct oracle_blocks *b = oracle_blocks_new(w, limit);
	double r;

	cr_assert_not_null(b);
	r = ref_on(b, k, capacity, horizon_ms);
	oracle_blocks_free(b);
	return r;
}

static double
belady(const struct workload *w, uint64_t capacity, size_t limit)
{
	return ref(w, BELADY, capacity, limit, 0);
}

static double
belady_seen(const struct workload *w, uint64_t capacity)
{
	return ref(w, BELADY_SEEN, capacity, 0, 0);
}

static double
told(const struct workload *w, uint64_t capacity, uint64_t horizon_ms)
{
	return ref(w, TOLD, capacity, 0, horizon_ms);
}

static double
told_uses(const struct workload *w, uint64_t capacity)
{
	return ref(w, TOLD_USES, capacity, 0, 0);
}

static double
fitted(const struct workload *w, uint64_t capacity)
{
	return ref(w, FITTED, capacity, 0, 0);
}

static double
plain_lru(const struct workload *w, uint64_t capacity)
{
	return ref(w, PLAIN_LRU, capacity, 0, 0);
}

Test(oracle, a_table_fitted_on_the_trace_bypasses_the_kind_that_never_returns)
{
	struct workload w = {0};

	/* a after a 1-token answer comes back 2 s later; b after 1000 tokens never. */
	req_out(&w, "a", BLOCK, 0, 1);
	req_out(&w, "b", BLOCK, 1000, 1000);
	req_out(&w, "a", BLOCK, 2000, 1);
	cr_assert_float_eq(fitted(&w, 0), 10.0 / 30, 1e-9);
	/*
	 * One block of room. The table says a's kind, 1 s old, returns (one use
	 * in the 1 s it waits) and b's never does: b is bypassed and a hits. A
	 * plain LRU stores b over a and hits nothing.
	 */
	cr_assert_float_eq(fitted(&w, BLOCK), 10.0 / 30, 1e-9);
	cr_assert_float_eq(ref(&w, PLAIN_LRU, BLOCK, 0, 0), 0.0, 1e-9);
}

Test(oracle, a_table_fitted_on_the_trace_cannot_tell_alike_blocks_apart)
{
	struct workload w = {0};

	/* b and a are alike (same answer, depth, prompt length, first use); a returns. */
	req_out(&w, "b", BLOCK, 0, 1);
	req_out(&w, "a", BLOCK, 0, 1);
	req_out(&w, "a", BLOCK, 1000, 1);
	/* One block: a ranks no higher than b and is bypassed. Belady keeps a. */
	cr_assert_float_eq(fitted(&w, BLOCK), 0.0, 1e-9);
	cr_assert_float_eq(belady(&w, BLOCK, 0), 10.0 / 30, 1e-9);
	cr_assert_float_eq(fitted(&w, 2 * BLOCK), 10.0 / 30, 1e-9);
}

Test(oracle, a_table_fitted_on_the_trace_frees_the_lowest_ranked_leaf)
{
	struct workload w = {0};

	/* Kinds by answer: p's returns in 0.5 s, r's in 1 s, q's never. */
	req_out(&w, "p", BLOCK, 0, 2);
	req_out(&w, "q", BLOCK, 0, 1000);
	req_out(&w, "r", BLOCK, 0, 1);
	req_out(&w, "p", BLOCK, 500, 2);
	req_out(&w, "r", BLOCK, 1000, 1);
	/* Two blocks of room: r takes q's place (not p's), and both p and r hit. */
	cr_assert_float_eq(fitted(&w, 2 * BLOCK), 20.0 / 50, 1e-9);
}

Test(oracle, a_table_fitted_on_the_trace_ranks_by_hits_within_the_horizon)
{
	struct workload w = {0};

	/*
	 * x's kind returns once, in 199 s: 1 hit per 199 s of waiting. The kind
	 * of z and y (alike) returns half the time, in 1 s, and never otherwise:
	 * 1 hit per 201 s of waiting (the never counted as the 200 s horizon).
	 * With one block, x stays and z and y are bypassed: x hits. Counting
	 * every wait as a hit would rank z's kind first and lose x.
	 */
	req_out(&w, "x", BLOCK, 0, 1000);
	req_out(&w, "z", BLOCK, 0, 1);
	req_out(&w, "y", BLOCK, 0, 1);
	req_out(&w, "y", BLOCK, 1000, 1);
	req_out(&w, "x", BLOCK, 199000, 1000);
	cr_assert_float_eq(fitted(&w, BLOCK), 10.0 / 50, 1e-9);
}

Test(oracle, a_table_fitted_on_the_trace_ranks_a_block_by_its_age)
{
	struct workload w = {0};

	/*
	 * x's kind returns in 3 s: new, 1 hit per 3 s of waiting; 2 s old, 1 per
	 * 1 s. y's kind (a half block) returns in 1.5 s. When y comes, x is 2 s
	 * old and ranks above it: y is bypassed and x hits (10 tokens). Ranked
	 * as if new, x would give way to y, which hits 5.
	 */
	req_out(&w, "x", BLOCK, 0, 1000);
	req_out(&w, "y", BLOCK / 2, 2000, 1);
	req_out(&w, "x", BLOCK, 3000, 1000);
	req_out(&w, "y", BLOCK / 2, 3500, 1);
	cr_assert_float_eq(fitted(&w, BLOCK), 10.0 / 30, 1e-9);
}

Test(oracle, a_cache_told_how_many_uses_keeps_the_popular_block)
{
	struct workload w = {0};

	block_per_ms(&w, "baaabbb");
	/* Unlimited: every use after the first hits, a twice and b three times. */
	cr_assert_float_eq(told_uses(&w, 0), 50.0 / 70, 1e-9);
	/*
	 * One block of room. Told only how many uses are left, it keeps b (three
	 * more) and bypasses a (two more): b's last three uses hit. Belady, told
	 * when, holds a while a is wanted sooner and then b again: 4 hits.
	 */
	cr_assert_float_eq(told_uses(&w, BLOCK), 30.0 / 70, 1e-9);
	cr_assert_float_eq(belady(&w, BLOCK, 0), 40.0 / 70, 1e-9);
}

Test(oracle, a_cache_told_when_uses_end_keeps_the_block_wanted_sooner)
{
	struct workload w = {0};

	block_per_ms(&w, "baaabbb");
	/* Unlimited: every use after the first hits, whatever a reference knows. */
	cr_assert_float_eq(ref(&w, TOLD_RATE, 0, 0, 0), 50.0 / 70, 1e-9);
	cr_assert_float_eq(ref(&w, LIFE_RATE, 0, 0, 0), 50.0 / 70, 1e-9);
	/*
	 * One block of room. At t = 1, a has 2 uses left by t = 3 (1 ms a use)
	 * and b 3 by t = 6 (5 / 3): a replaces b and hits twice; once a has
	 * none left, b replaces it and hits twice: 4, as Belady.
	 */
	cr_assert_float_eq(ref(&w, TOLD_RATE, BLOCK, 0, 0), 40.0 / 70, 1e-9);
	/*
	 * Told only the mean gap over each block's life (a 1 ms, b 2 ms), it
	 * keeps a past its last use and bypasses b: 2.
	 */
	cr_assert_float_eq(ref(&w, LIFE_RATE, BLOCK, 0, 0), 20.0 / 70, 1e-9);
	/* A block used once ranks below any used twice. */
	w.n = 0;
	req(&w, "x", BLOCK, 0);
	req(&w, "y", BLOCK, 1);
	req(&w, "y", BLOCK, 100);
	cr_assert_float_eq(ref(&w, LIFE_RATE, BLOCK, 0, 0), 10.0 / 30, 1e-9);
}

Test(oracle, a_cycle_longer_than_the_cache)
{
	struct workload w = {0};

	block_per_ms(&w, "abcabc");
	/*
	 * Two blocks of room. Belady keeps a and b, bypasses c (wanted after
	 * them): a and b hit, 2 of 6. LRU told: stores a, b, c and drops a (the
	 * least recent); then b and c hit, a is not stored again (never used
	 * after): also 2 of 6. A plain LRU would hit none.
	 */
	cr_assert_float_eq(belady(&w, 2 * BLOCK, 0), 2.0 / 6, 1e-9);
	cr_assert_float_eq(told(&w, 2 * BLOCK, 0), 2.0 / 6, 1e-9);
	/* One block: Belady keeps a until its use and bypasses b and c; 1 of 6. */
	cr_assert_float_eq(belady(&w, BLOCK, 0), 1.0 / 6, 1e-9);
	/* The first 3 requests only: nothing is used twice. */
	cr_assert_float_eq(belady(&w, 2 * BLOCK, 3), 0.0, 1e-9);
}

Test(oracle, only_the_common_prefix_hits)
{
	struct workload w = {0};

	req(&w, "xy", 2 * BLOCK, 0);
	req(&w, "xz", 2 * BLOCK, 1);
	cr_assert_float_eq(belady(&w, 0, 0), 10.0 / 40, 1e-9);
	cr_assert_float_eq(told(&w, 0, 0), 10.0 / 40, 1e-9);
	/* With room for one block, the one used again is the one kept. */
	cr_assert_float_eq(belady(&w, BLOCK, 0), 10.0 / 40, 1e-9);
	cr_assert_float_eq(told(&w, BLOCK, 0), 10.0 / 40, 1e-9);
}

Test(oracle, a_partial_last_block_counts_its_tokens)
{
	struct workload w = {0};

	req(&w, "pq", 15, 0);
	req(&w, "pq", 15, 1);
	cr_assert_float_eq(belady(&w, 0, 0), 15.0 / 30, 1e-9);
	/* 15 tokens of room hold both blocks. */
	cr_assert_float_eq(told(&w, 15, 0), 15.0 / 30, 1e-9);
	cr_assert_float_eq(told(&w, 14, 0), 10.0 / 30, 1e-9);
}

/* Every reference under a replay rule, over @w with unlimited room. */
static void
assert_replay_rule(const struct workload *w, uint32_t column, bool minus_one, double want)
{
	struct oracle_blocks *b = oracle_blocks_new(w, 0);
	enum ref k;

	cr_assert_not_null(b);
	oracle_blocks_replay_rule(b, column, minus_one);
	for (k = BELADY; k <= PLAIN_LRU; k++) {
		double r;

		if (k == BELADY_SEEN)
			continue; /* it stores nothing on a block's first sighting */
		r = ref_on(b, k, 0, 0);
		cr_assert_float_eq(r, want, 1e-9, "reference %d, column %u, minus one %d: %f, want %f",
				   (int)k, column, (int)minus_one, r, want);
	}
	oracle_blocks_free(b);
}

Test(oracle, a_replay_rule_counts_whole_columns_and_never_the_last_token)
{
	struct workload w = {0};

	req(&w, "pq", 15, 0);
	req(&w, "pq", 15, 1);
	/* The repeat holds all 15 tokens: 14 of them may be refilled, 12 in
	 * columns of 4, 10 in columns of 5; without the -1 rule 12 and 15. */
	assert_replay_rule(&w, 4, true, 12.0 / 30);
	assert_replay_rule(&w, 5, true, 10.0 / 30);
	assert_replay_rule(&w, 4, false, 12.0 / 30);
	assert_replay_rule(&w, 5, false, 15.0 / 30);
	assert_replay_rule(&w, 1, false, 15.0 / 30);
}

Test(oracle, the_horizon_limits_what_lru_is_told)
{
	struct workload w = {0};

	req(&w, "a", BLOCK, 0);
	req(&w, "a", BLOCK, 200000);
	cr_assert_float_eq(told(&w, 0, 0), 0.5, 1e-9);
	cr_assert_float_eq(told(&w, 0, 120000), 0.0, 1e-9);
	cr_assert_float_eq(told(&w, 0, 200000), 0.5, 1e-9);
}

Test(oracle, belady_not_told_of_first_sightings_stores_a_block_on_its_second)
{
	struct workload w = {0};

	/* a three times, b twice: 40 tokens. */
	req(&w, "a", BLOCK, 0);
	req(&w, "b", BLOCK, 1);
	req(&w, "a", BLOCK, 2);
	req(&w, "b", BLOCK, 3);
	req(&w, "a", BLOCK, 4);
	/* Told everything, unlimited: a hits twice, b once. */
	cr_assert_float_eq(belady(&w, 0, 0), 30.0 / 50, 1e-9);
	/* Not told of first sightings: a is stored at its second use, b never. */
	cr_assert_float_eq(belady_seen(&w, 0), 10.0 / 50, 1e-9);
	/* One block of room changes nothing for it; Belady keeps a (wanted sooner). */
	cr_assert_float_eq(belady_seen(&w, BLOCK), 10.0 / 50, 1e-9);
	cr_assert_float_eq(belady(&w, BLOCK, 0), 20.0 / 50, 1e-9);
	/* A request's later blocks count as seen even when its first went unstored. */
	w = (struct workload){0};
	req(&w, "xy", 2 * BLOCK, 0);
	req(&w, "xy", 2 * BLOCK, 1);
	req(&w, "xy", 2 * BLOCK, 2);
	cr_assert_float_eq(belady_seen(&w, 0), 20.0 / 60, 1e-9);
}

/* ---- The second tier (tier2.h) ------------------------------------------------- */

static struct tier2_result
tier2(struct workload *w, uint64_t l1, uint64_t l2, enum tier2_admit admit)
{
	struct oracle_blocks *b = oracle_blocks_new(w, 0);
	struct tier2_params p = {.l1_tokens = l1, .l2_tokens = l2, .block = BLOCK, .admit = admit};
	struct tier2_result r;

	cr_assert_not_null(b);
	cr_assert_eq(tier2_run(b, &p, &r), 0);
	oracle_blocks_free(b);
	return r;
}

Test(tier2, what_l1_frees_goes_down_and_a_hit_in_l2_comes_up)
{
	struct workload w = {0};
	struct tier2_result r;

	/*
	 * One block in each tier. a, b: a goes down. a hits in L2 and comes up,
	 * b goes down; b hits in L2 likewise. 20 of 40 tokens, all from L2;
	 * three blocks written (a, b, a), two read. One LRU of two blocks hits
	 * the same; of one block, none.
	 */
	block_per_ms(&w, "abab");
	r = tier2(&w, BLOCK, BLOCK, TIER2_ADMIT_ALL);
	cr_assert_eq(r.input, 40);
	cr_assert_eq(r.hit_l1, 0);
	cr_assert_eq(r.hit_l2, 20);
	cr_assert_eq(r.written, 3 * BLOCK);
	cr_assert_eq(r.read, 20);
	cr_assert_float_eq(plain_lru(&w, 2 * BLOCK), 0.5, 1e-9);
	cr_assert_float_eq(plain_lru(&w, BLOCK), 0.0, 1e-9);
	/* Admitting only blocks used twice: a and b each go when first freed
	 * (neither was used twice yet), so nothing hits; a, freed last, was. */
	r = tier2(&w, BLOCK, BLOCK, TIER2_ADMIT_SEEN2);
	cr_assert_eq(r.hit_l1 + r.hit_l2, 0);
	cr_assert_eq(r.written, BLOCK);
}

Test(tier2, a_hit_that_computing_beats_is_a_miss)
{
	struct workload w = {0};
	struct oracle_blocks *b;
	struct tier2_params p = {.l1_tokens = BLOCK, .l2_tokens = BLOCK, .block = BLOCK,
				 .bytes_per_token = 1 << 20, .recompute_tokens_per_s = 1e6,
				 .l2_read_gbps = 1, .l2_read_latency_us = 100};
	struct tier2_result r;

	/* 10 tokens of 1 MiB at 1 GB/s and 100 us: 10.6 ms; computing them, 10 us. */
	block_per_ms(&w, "abab");
	b = oracle_blocks_new(&w, 0);
	cr_assert_not_null(b);
	cr_assert_eq(tier2_run(b, &p, &r), 0);
	cr_assert_eq(r.hit_l2, 0);
	cr_assert_eq(r.recompute_faster, 20);
	/* A fast disk: taken. */
	p.l2_read_gbps = 1000;
	p.l2_read_latency_us = 1;
	p.recompute_tokens_per_s = 1e3;
	cr_assert_eq(tier2_run(b, &p, &r), 0);
	cr_assert_eq(r.hit_l2, 20);
	cr_assert_eq(r.recompute_faster, 0);
	oracle_blocks_free(b);
}

/*
 * Admitting all, two LRU tiers hold what one LRU of their sum holds: over a
 * random workload, the hit is the plain LRU's at L1 + L2 exactly, and with
 * no L2 the plain LRU's at L1.
 */
Test(tier2, admitting_all_two_tiers_hit_as_one_lru_of_their_sum)
{
	uint64_t seed = test_seed("tier2 random workload", 0x7132);
	struct workload w = {0};
	static struct wl_req rq[3000];
	static uint64_t id[3000][6];
	uint64_t x = seed;
	size_t i, k;

	for (i = 0; i < 3000; i++) {
		uint32_t nb = 1 + (uint32_t)(i % 6);

		for (k = 0; k < nb; k++) {
			x = x * 6364136223846793005ULL + 1442695040888963407ULL;
			/* Shared first blocks, a long tail after them. */
			id[i][k] = k == 0 ? (x >> 33) % 8 : (x >> 33) % (40 * k);
			id[i][k] = id[i][k] * 16 + k;
		}
		rq[i] = (struct wl_req){.ids = id[i], .nids = nb, .n = nb * BLOCK, .ts_ms = i * 10};
		w.tokens += rq[i].n;
	}
	w.r = rq;
	w.n = 3000;
	for (k = 1; k <= 4; k++) {
		uint64_t l1 = k * 8 * BLOCK, l2 = k * 30 * BLOCK;
		struct tier2_result all = tier2(&w, l1, l2, TIER2_ADMIT_ALL);
		struct tier2_result none = tier2(&w, l1, 0, TIER2_ADMIT_ALL);
		double sum = plain_lru(&w, l1 + l2), one = plain_lru(&w, l1);

		cr_assert_float_eq((double)(all.hit_l1 + all.hit_l2) / (double)all.input, sum, 1e-12,
				   "seed %#" PRIx64 ": L1 %" PRIu64 " + L2 %" PRIu64, seed, l1, l2);
		cr_assert_gt(all.hit_l2, 0);
		cr_assert_eq(all.read, all.hit_l2);
		cr_assert_float_eq((double)none.hit_l1 / (double)none.input, one, 1e-12);
		cr_assert_eq(none.hit_l2 + none.written, 0);
	}
}
