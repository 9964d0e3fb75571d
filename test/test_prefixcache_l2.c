/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The driver's second tier (lib/prefixcache/pc_l2.c) through the replay
 * system: a real kvstore per model and a real lib/kvdisk file as its L2,
 * every refilled byte checked against the wafer's reference content. A
 * column the policy frees goes down; a later request hits it there, it
 * comes up into the sequence's prompt as a batch of its own, and the
 * refill brings it with the rest of the hit.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pc_priv.h"
#include "prefixcache.h"
#include "replay.h"
#include "replay_assert.h"
#include "test_rng.h"

#define SEC 1000000000ull

static char dir[64];

static void
setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/kvss_test_pcl2_%d", (int)getpid());
	cr_assert_eq(mkdir(dir, 0700), 0);
}

static void
teardown(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	cr_assert_eq(system(cmd), 0);
}

TestSuite(l2, .init = setup, .fini = teardown, .timeout = 120);

/* The sink's L2 operations, as they came; of those up, the columns, and
 * those staged from the shared level. */
static unsigned int ndown, nup, ndel, nevict_after_down, upcols, upcols_shared;
static int last_op; /* 1 down, 2 delete */

static void
obs_down(void *arg, uint16_t model, const struct prefixcache_l2col *c)
{
	(void)arg;
	(void)model;
	cr_assert_gt(c->key, 0);
	cr_assert_gt(c->tokens, 0);
	ndown++;
	last_op = 1;
}

static void
obs_up(void *arg, uint16_t model, uint64_t batch_no, uint16_t nc, uint16_t g,
       const struct proto_evict_entry *e, const struct prefixcache_l2col *cols, uint32_t ncols)
{
	uint32_t k;

	(void)arg;
	(void)model;
	(void)batch_no;
	(void)nc;
	(void)g;
	(void)e;
	cr_assert_gt(ncols, 0);
	nup++;
	upcols += ncols;
	for (k = 0; k < ncols; k++)
		upcols_shared += cols[k].shared;
}

static void
obs_l2del(void *arg, uint16_t model, uint16_t cache_id, uint64_t key, uint64_t iso, uint64_t ec)
{
	(void)ec;
	(void)arg;
	(void)model;
	(void)cache_id;
	(void)key;
	(void)iso;
	ndel++;
}

static void
obs_del(void *arg, uint16_t model, struct prefixcache_shards to, const struct proto_delete *d)
{
	(void)arg;
	(void)model;
	(void)to;
	(void)d;
	if (last_op == 1)
		nevict_after_down++; /* a DELETE right after a column went down: its room */
	last_op = 2;
}

static struct replay_params
params(uint32_t C, uint64_t dram, uint64_t l2, enum prefixcache_l2_admit admit)
{
	struct replay_params p = {.bytes_per_token = 16, .num_buffers = 2, .l2_dir = dir};

	p.pc.num_models = 1;
	p.pc.column = C;
	p.pc.model[0].num_caches = 1;
	p.pc.model[0].cache[0] = (struct prefixcache_cache){0, PREFIXCACHE_FULL, 0, 0, dram};
	p.pc.model[0].max_batch_tokens = 16;
	p.pc.model[0].l2_capacity_tokens = l2;
	p.pc.model[0].l2_admit = (uint8_t)admit;
	p.observe.l2_down = obs_down;
	p.observe.l2_up = obs_up;
	p.observe.l2_del = obs_l2del;
	p.observe.del = obs_del;
	ndown = nup = ndel = nevict_after_down = upcols = upcols_shared = 0;
	last_op = 0;
	return p;
}

/* Prompt @k: 129 tokens of its own (two columns of 64 hit, the -1 rule). */
static void
prompt(uint32_t k, uint32_t *t)
{
	uint32_t i;

	for (i = 0; i < 129; i++)
		t[i] = k * 1000 + i + 1;
}

static uint32_t org_request(struct replay *r, uint64_t iso, uint32_t k, uint64_t now,
			    uint32_t *l2hit);

/* Prompt @p k of the organization 77 at @p now: its hit, and of it what came from L2. */
static uint32_t
request(struct replay *r, uint32_t k, uint64_t now, uint32_t *l2hit)
{
	return org_request(r, 77, k, now, l2hit);
}

Test(l2, a_freed_column_goes_down_and_a_later_hit_brings_it_up_byte_for_byte)
{
	struct replay_params p = params(64, 256, 1024, PREFIXCACHE_L2_ALL);
	struct replay *r = replay_create(&p);
	struct prefixcache_stats ps;
	struct replay_stats st;
	uint32_t l2hit, k;

	cr_assert_not_null(r);
	/* A, B fill DRAM (two columns each); C pushes A's down. */
	for (k = 0; k < 3; k++)
		cr_assert_eq(request(r, k, (k + 1) * SEC, &l2hit), 0);
	cr_assert_geq(ndown, 2, "A's two columns went down (%u)", ndown);
	cr_assert_geq(nevict_after_down, 1, "each down before the DELETE of its room");
	/* A again: nothing in DRAM, both columns in L2: they come up, refilled. */
	cr_assert_eq(request(r, 0, 10 * SEC, &l2hit), 128);
	cr_assert_eq(l2hit, 128);
	cr_assert_geq(nup, 1);
	/* And once up, A hits in DRAM. */
	cr_assert_eq(request(r, 0, 11 * SEC, &l2hit), 128);
	cr_assert_eq(l2hit, 0);
	assert_clean(r);
	replay_stats(r, &st);
	prefixcache_stats(replay_pc(r), &ps);
	cr_assert_eq(st.l2_read_tokens, 128, "the L2 file gave %" PRIu64, st.l2_read_tokens);
	cr_assert_eq(st.l2_written_tokens, ps.l2_down_tokens);
	cr_assert_eq(st.l2_columns * 64, ps.l2_stored_tokens,
		     "the L2 file holds %" PRIu64 " columns, the driver counts %" PRIu64 " tokens",
		     st.l2_columns, ps.l2_stored_tokens);
	cr_assert_eq(prefixcache_l2_stored(replay_pc(r), 0, 0), ps.l2_stored_tokens,
		     "one cache: its count is the driver's whole L2 count");
	replay_free(r);
}

Test(l2, another_organization_never_hits_a_column_in_l2)
{
	struct replay_params p = params(64, 256, 1024, PREFIXCACHE_L2_ALL);
	struct replay *r = replay_create(&p);
	uint32_t t[129], l2hit, k;
	struct prefixcache_request q = {.isolation_id = 78, .tokens = t, .num_tokens = 129,
					.cache_length_allowed = 129,
					.first_multimodal = UINT32_MAX, .sequence_id = 9};

	for (k = 0; k < 3; k++)
		request(r, k, (k + 1) * SEC, &l2hit);
	prompt(0, t);
	cr_assert_eq(replay_request(r, 0, &q, NULL, 0, 10 * SEC), 0, "org 78 hit org 77's column");
	assert_clean(r);
	replay_free(r);
}

Test(l2, admitting_only_columns_hit_before_keeps_the_others_out)
{
	struct replay_params p = params(64, 256, 1024, PREFIXCACHE_L2_SEEN2);
	struct replay *r = replay_create(&p);
	uint32_t l2hit, k;

	for (k = 0; k < 3; k++)
		request(r, k, (k + 1) * SEC, &l2hit);
	cr_assert_eq(ndown, 0, "A's columns were never hit: not admitted");
	cr_assert_eq(request(r, 0, 10 * SEC, &l2hit), 0);
	assert_clean(r);
	replay_free(r);
}

Test(l2, a_column_past_its_first_use_ttl_is_not_served_from_l2)
{
	struct replay_params p = params(64, 256, 1024, PREFIXCACHE_L2_ALL);
	struct replay *r;
	uint32_t l2hit, k;

	p.pc.ttl_first_ns = 5 * SEC;
	r = replay_create(&p);
	for (k = 0; k < 3; k++)
		request(r, k, (k + 1) * SEC, &l2hit);
	cr_assert_geq(ndown, 2);
	cr_assert_eq(request(r, 0, 20 * SEC, &l2hit), 0, "an expired column came up");
	cr_assert_geq(ndel, 1, "and L2 was told to let it go");
	cr_assert_eq(nup, 0, "nothing came up");
	assert_clean(r);
	replay_free(r);
}

Test(l2, a_hit_in_l2_that_computing_beats_is_not_taken)
{
	struct replay_params p = params(64, 256, 1024, PREFIXCACHE_L2_ALL);
	struct replay *r;
	struct prefixcache_stats ps;
	uint32_t l2hit, k;

	/* Bringing 128 tokens up costs 1 ms; computing them, 128 ns. */
	p.pc.model[0].l2_latency_ns = 1000000;
	p.pc.model[0].recompute_tokens_per_ns = 1.0;
	r = replay_create(&p);
	for (k = 0; k < 3; k++)
		request(r, k, (k + 1) * SEC, &l2hit);
	cr_assert_geq(ndown, 2);
	cr_assert_eq(request(r, 0, 10 * SEC, &l2hit), 0, "taken though computing was faster");
	cr_assert_eq(nup, 0);
	prefixcache_stats(replay_pc(r), &ps);
	cr_assert_eq(ps.l2_recompute_faster_tokens, 128);
	/* Computed again, A is in DRAM again: L2 let its copies go (one tier at
	 * most); L2 had room for all, so nothing else was let go. */
	cr_assert_eq(ps.l2_deleted_tokens, 128, "L2 let %" PRIu64 " tokens go", ps.l2_deleted_tokens);
	assert_clean(r);
	replay_free(r);
	/* A slow wafer (1,000 tokens/s: 128 ms): taken. */
	p = params(64, 256, 1024, PREFIXCACHE_L2_ALL);
	p.pc.model[0].l2_latency_ns = 1000000;
	p.pc.model[0].recompute_tokens_per_ns = 1e-6;
	r = replay_create(&p);
	for (k = 0; k < 3; k++)
		request(r, k, (k + 1) * SEC, &l2hit);
	cr_assert_eq(request(r, 0, 10 * SEC, &l2hit), 128);
	cr_assert_eq(l2hit, 128);
	assert_clean(r);
	replay_free(r);
}

/*
 * Seeded: many organizations' prompts over a small DRAM and L2, some
 * returning: every refilled byte right, DRAM as the driver accounts for it,
 * L2's file holding what the driver counts, and both tiers within their
 * capacities, after every request.
 */
static void
seeded_two_tiers(bool split)
{
	uint64_t seed = test_seed("two-tier model test", 0x12c2);
	struct replay_params p = params(16, 512, 2048, PREFIXCACHE_L2_ALL);
	struct replay *r;
	struct prefixcache_stats fin;

	if (split) {
		/* Lines a wafer of a million tokens a second beats for short hits
		 * and splits for long ones: 50 us + 16 ns a token from DRAM, 100 us
		 * more from L2. */
		p.pc.model[0].refill_latency_ns = 50000;
		p.pc.model[0].refill_bytes_per_token = 16;
		p.pc.model[0].refill_bytes_per_ns = 1.0;
		p.pc.model[0].l2_latency_ns = 100000;
		p.pc.model[0].recompute_tokens_per_ns = 1e-3;
		p.pc.model[0].split = true;
	}
	r = replay_create(&p);
	uint64_t x = seed, hits = 0, l2hits = 0;
	unsigned int i;

	cr_assert_not_null(r);
	for (i = 0; i < 600; i++) {
		uint32_t t[200], n, j, base, org;
		struct prefixcache_request q;
		struct prefixcache_stats before, after;
		struct replay_stats st;

		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
		org = (uint32_t)(x >> 60) % 3;
		base = (uint32_t)(x >> 40) % 24; /* 24 prompt families */
		n = 20 + (uint32_t)(x >> 20) % 170;
		for (j = 0; j < n; j++)
			t[j] = base * 100000 + (j < 60 ? j : j + (uint32_t)(x >> 8) % 3 * 1000) + 1;
		q = (struct prefixcache_request){.isolation_id = 100 + org, .tokens = t, .num_tokens = n,
						 .cache_length_allowed = n,
						 .first_multimodal = UINT32_MAX, .sequence_id = i};
		prefixcache_stats(replay_pc(r), &before);
		hits += replay_request(r, 0, &q, NULL, (uint32_t)(x >> 4) % 8, (uint64_t)i * SEC / 10);
		prefixcache_stats(replay_pc(r), &after);
		l2hits += after.l2_hit_tokens - before.l2_hit_tokens;
		replay_stats(r, &st);
		cr_assert_eq(st.protocol_errors + st.verify_failures, 0,
			     "seed %#" PRIx64 " request %u: %" PRIu64 " protocol errors, %" PRIu64
			     " verify failures", seed, i, st.protocol_errors, st.verify_failures);
		cr_assert_eq(st.unaccounted_tokens, 0, "seed %#" PRIx64 " request %u", seed, i);
		cr_assert_leq(st.max_stored, 512);
		cr_assert_leq(after.l2_stored_tokens, 2048);
		cr_assert_eq(st.l2_columns * 16, after.l2_stored_tokens,
			     "seed %#" PRIx64 " request %u: L2 holds %" PRIu64 " columns, the driver "
			     "counts %" PRIu64 " tokens", seed, i, st.l2_columns, after.l2_stored_tokens);
		cr_assert_eq(prefixcache_l2_stored(replay_pc(r), 0, 0), after.l2_stored_tokens,
			     "seed %#" PRIx64 " request %u", seed, i);
	}
	prefixcache_stats(replay_pc(r), &fin);
	printf("two-tier model test%s: %" PRIu64 " hit tokens, %" PRIu64 " of them from L2; %" PRIu64
	       " hits split, fronts of %" PRIu64 " tokens\n", split ? " (split)" : "", hits, l2hits,
	       fin.split_requests, fin.split_tokens);
	cr_assert_gt(l2hits, 0, "the workload never hit L2: the test tests nothing");
	if (split)
		cr_assert_gt(fin.split_requests, 0, "no hit split: the test tests nothing");
	else
		cr_assert_eq(fin.split_requests, 0);
	replay_free(r);
}

Test(l2, a_seeded_workload_over_both_tiers_is_never_wrong)
{
	seeded_two_tiers(false);
}

/*
 * The same with Cake's split: every split refill's tokens land in their
 * slots from the front's end on (cache_idx), its bytes right, whether its
 * hit came from DRAM alone or partly up from L2.
 */
Test(l2, a_seeded_workload_over_both_tiers_split_is_never_wrong)
{
	seeded_two_tiers(true);
}

/* ---- Taking back what the shards kept (prefixcache_l2_adopt) ---- */

static unsigned int adopt_ups, adopt_upcols;
static uint64_t adopt_upkeys[16];

static void
rec_up(void *arg, uint16_t model, uint64_t batch_no, uint16_t nc, uint16_t g,
       const struct proto_evict_entry *e, const struct prefixcache_l2col *cols, uint32_t ncols)
{
	uint32_t k;

	(void)arg, (void)model, (void)batch_no, (void)nc, (void)g, (void)e;
	adopt_ups++;
	for (k = 0; k < ncols; k++) {
		uint32_t j;

		for (j = 0; j < adopt_upcols && adopt_upkeys[j] != cols[k].key; j++)
			;
		if (j == adopt_upcols && adopt_upcols < 16)
			adopt_upkeys[adopt_upcols++] = cols[k].key;
	}
}

static void
rec_down(void *arg, uint16_t model, const struct prefixcache_l2col *c)
{
	(void)arg, (void)model, (void)c;
}

static void
rec_del(void *arg, uint16_t model, uint16_t cache_id, uint64_t key, uint64_t iso, uint64_t ec)
{
	(void)arg, (void)model, (void)cache_id, (void)key, (void)iso, (void)ec;
}

Test(l2, columns_kept_across_a_restart_are_taken_back_parents_first_and_hit)
{
	struct prefixcache_params p = {.num_models = 1, .column = 64};
	struct prefixcache_sink sink = {.l2_down = rec_down, .l2_up = rec_up, .l2_del = rec_del};
	struct prefixcache_model *m = &p.model[0];
	uint64_t iso = proto_ref_isolation_id("acme", 4), other = proto_ref_isolation_id("zeta", 4);
	uint32_t tok[300], i;
	uint64_t h[4];
	struct prefixcache_l2col c[4];
	struct prefixcache_request rq = {0};
	struct prefixcache_hit hit;
	struct prefixcache_seq *s;
	struct prefixcache_stats st;
	struct prefixcache *pc;

	m->num_caches = 1;
	m->cache[0] = (struct prefixcache_cache){.cache_id = 0, .rule = PREFIXCACHE_FULL,
						 .capacity_tokens = 10000};
	m->refill_latency_ns = 1000;
	m->refill_bytes_per_ns = 10;
	m->refill_bytes_per_token = 256;
	m->l2_capacity_tokens = 3 * 64; /* three columns */
	pc = prefixcache_create(&p, &sink);
	cr_assert_not_null(pc);
	for (i = 0; i < 300; i++)
		tok[i] = 1000 + i * 7;
	/* The chained hashes a shard's inventory lists: they depend on the tokens and the organization only. */
	h[0] = iso;
	for (i = 0; i < 3; i++) {
		h[i + 1] = prefixcache_column_hash(h[i], tok + 64 * i, 64);
		c[i] = (struct prefixcache_l2col){.key = h[i + 1], .parent = h[i], .isolation_id = iso,
						  .first_use_ns = 0, .start = 64 * i, .tokens = 64};
	}
	c[3] = c[2];
	c[3].key ^= 1;
	cr_assert_eq(prefixcache_l2_adopt(pc, 0, &c[1], SEC), -ENOENT, "a child before its parent");
	cr_assert_eq(prefixcache_l2_adopt(pc, 0, &c[0], SEC), 0);
	cr_assert_eq(prefixcache_l2_adopt(pc, 0, &c[0], SEC), -EEXIST);
	cr_assert_eq(prefixcache_l2_adopt(pc, 0, &c[1], SEC), 0);
	cr_assert_eq(prefixcache_l2_adopt(pc, 0, &c[2], SEC), 0);
	cr_assert_eq(prefixcache_l2_adopt(pc, 0, &c[3], SEC), -ENOSPC, "three columns fit, not four");
	{
		struct prefixcache_l2col half = c[2];

		half.tokens = 32;
		cr_assert_eq(prefixcache_l2_adopt(pc, 0, &half, SEC), -EINVAL, "whole columns only");
	}
	/* Another organization's first use an hour ago, its TTL a minute: expired. */
	cr_assert_eq(prefixcache_org_ttl(pc, other, 0, 60 * SEC), 0);
	{
		struct prefixcache_l2col old = {.key = prefixcache_column_hash(other, tok, 64),
						.parent = other, .isolation_id = other,
						.first_use_ns = 0, .start = 0, .tokens = 64};

		cr_assert_eq(prefixcache_l2_adopt(pc, 0, &old, 3600 * SEC), -ETIME);
	}
	prefixcache_stats(pc, &st);
	cr_assert_eq(st.l2_adopted_tokens, 3 * 64);
	cr_assert_eq(st.l2_stored_tokens, 3 * 64);
	/* A request of that organization with those tokens hits all three, from L2. */
	rq.isolation_id = iso;
	rq.tokens = tok;
	rq.num_tokens = 300;
	rq.cache_length_allowed = 300;
	rq.first_multimodal = UINT32_MAX;
	rq.sequence_id = 1;
	s = prefixcache_begin(pc, 0, &rq, 2 * SEC, &hit);
	cr_assert_not_null(s);
	cr_assert_eq(hit.hit_tokens, 192, "hit %u", hit.hit_tokens);
	cr_assert_eq(hit.l2_hit_tokens, 192);
	cr_assert_gt(adopt_ups, 0);
	cr_assert_eq(adopt_upcols, 3, "the three columns came up");
	for (i = 0; i < 3; i++)
		cr_assert_eq(adopt_upkeys[i], h[i + 1]);
	prefixcache_end(pc, s, 3 * SEC);
	/* A restart of the model's shards forgets them (their inventories say again). */
	prefixcache_shard_restart(pc, 0);
	prefixcache_stats(pc, &st);
	cr_assert_eq(st.l2_stored_tokens, 0);
	prefixcache_free(pc);
}

static void
sh_obs_down(void *arg, uint16_t model, const struct prefixcache_l2col *c)
{
	(void)arg;
	(void)model;
	(void)c;
}

/*
 * A column staged from the shared level comes up by the shared level's own
 * line of the refill-time model, not the second tier's: with the disks'
 * line fast and the shared level's slow (1 ms for 128 tokens a wafer
 * computes in 128 us), the staged columns are recomputed; with the shared
 * line fast they are taken, counted as shared hits, and the estimate
 * carries the shared level's latency, not the disks'.
 */
Test(l2, a_column_staged_from_the_shared_level_comes_up_by_its_own_line)
{
	struct prefixcache_sink sink = {.l2_down = sh_obs_down, .l2_up = obs_up,
					.l2_del = obs_l2del};
	struct prefixcache_params p = {.num_models = 1, .column = 64, .shared_staged = 16};
	const uint64_t iso = 4242;
	struct prefixcache_request rq = {.isolation_id = iso, .num_tokens = 129,
					 .cache_length_allowed = 129,
					 .first_multimodal = UINT32_MAX, .sequence_id = 1};
	struct prefixcache_stats st;
	struct prefixcache_hit hit;
	struct prefixcache_seq *s;
	struct prefixcache *pc;
	uint64_t keys[4], lat;
	uint32_t tok[129], n, known, k, round;
	double bpn;

	prompt(7, tok);
	rq.tokens = tok;
	p.model[0].num_caches = 1;
	p.model[0].cache[0] = (struct prefixcache_cache){0, PREFIXCACHE_FULL, 0, 0, 4096};
	p.model[0].max_batch_tokens = 16;
	p.model[0].refill_bytes_per_token = 16;
	p.model[0].l2_latency_ns = 1000;		/* the disks: 1 us */
	p.model[0].shared_latency_ns = 1000000;	/* the shared level: 1 ms */
	p.model[0].recompute_tokens_per_ns = 1e-3; /* 1 token per us */
	for (round = 0; round < 2; round++) {
		nup = upcols = upcols_shared = 0;
		pc = prefixcache_create(&p, &sink);
		cr_assert_not_null(pc);
		if (round == 1)
			cr_assert_eq(prefixcache_set_level_model(pc, 0, PREFIXCACHE_LEVEL_SHARED,
								 10000 /* 10 us */, 0), 0);
		prefixcache_level_model(pc, 0, PREFIXCACHE_LEVEL_SHARED, &lat, &bpn);
		cr_assert_eq(lat, round == 0 ? 1000000u : 10000u);
		prefixcache_level_model(pc, 0, PREFIXCACHE_LEVEL_L2, &lat, &bpn);
		cr_assert_eq(lat, 1000u, "the disks' line is its own");
		n = prefixcache_columns(pc, 0, &rq, keys, 4, &known);
		cr_assert_eq(n, 2, "two whole columns before the last token (%u)", n);
		cr_assert_eq(known, 0);
		for (k = 0; k < n; k++) {
			struct prefixcache_l2col c = {.key = keys[k], .parent = k ? keys[k - 1] : iso,
						      .isolation_id = iso, .first_use_ns = SEC,
						      .start = 64 * k, .tokens = 64};

			cr_assert_eq(prefixcache_shared_stage(pc, 0, &c, SEC), 0);
		}
		s = prefixcache_begin(pc, 0, &rq, 2 * SEC, &hit);
		cr_assert_not_null(s);
		prefixcache_stats(pc, &st);
		if (round == 0) {
			cr_assert_eq(hit.hit_tokens, 0, "taken though the shared level's line is slower");
			cr_assert_eq(st.l2_recompute_faster_tokens, 128);
			cr_assert_eq(nup, 0);
		} else {
			cr_assert_eq(hit.hit_tokens, 128, "hit %u", hit.hit_tokens);
			cr_assert_eq(hit.l2_hit_tokens, 128);
			cr_assert_eq(hit.shared_hit_tokens, 128);
			cr_assert_eq(st.shared_hit_tokens, 128);
			/* Each batch of the columns' tokens names the columns it holds tokens of. */
			cr_assert_gt(upcols, 0);
			cr_assert_eq(upcols_shared, upcols, "every column came up as the shared level's");
			/* The refill's line (0 here) and the shared level's, not the disks'. */
			cr_assert_geq(hit.estimate_ns, 10000);
			cr_assert_lt(hit.estimate_ns, 10000 + 1000);
		}
		prefixcache_end(pc, s, 3 * SEC);
		prefixcache_free(pc);
	}
}

/* Prompt @p k's two columns staged from the shared level, then looked up
 * at @p now, the wafer's compute taken for @p wait_ns, and ended: the
 * tokens that came up (0: computed instead). */
static uint32_t
staged_lookup_waiting(struct prefixcache *pc, uint32_t k, uint64_t now, uint64_t wait_ns)
{
	const uint64_t iso = 4242;
	uint32_t tok[129], n, known, j;
	struct prefixcache_request rq = {.isolation_id = iso,
					 .tokens = tok,
					 .num_tokens = 129,
					 .cache_length_allowed = 129,
					 .first_multimodal = UINT32_MAX,
					 .sequence_id = k,
					 .compute_wait_ns = wait_ns};
	struct prefixcache_hit hit;
	struct prefixcache_seq *s;
	uint64_t keys[4];

	prompt(k, tok);
	n = prefixcache_columns(pc, 0, &rq, keys, 4, &known);
	cr_assert_eq(n, 2);
	for (j = 0; j < n; j++) {
		struct prefixcache_l2col c = {.key = keys[j],
					      .parent = j ? keys[j - 1] : iso,
					      .isolation_id = iso,
					      .first_use_ns = now,
					      .start = 64 * j,
					      .tokens = 64};

		cr_assert_eq(prefixcache_shared_stage(pc, 0, &c, now), 0);
	}
	s = prefixcache_begin(pc, 0, &rq, now, &hit);
	cr_assert_not_null(s);
	if (hit.num_refills > 0)
		prefixcache_refill_done(pc, hit.refill_id);
	prefixcache_end(pc, s, now + 1);
	return hit.l2_hit_tokens;
}

static uint32_t
staged_lookup(struct prefixcache *pc, uint32_t k, uint64_t now)
{
	return staged_lookup_waiting(pc, k, now, 0);
}

/*
 * A driver over one cache, 128-token hits staged in the shared level, whose
 * line says 1 ms to bring them up (the disks' 1 us) where the wafer
 * computes them in 128 us: every such hit is refused by the rule alone.
 */
static struct prefixcache *
slow_shared_level(void)
{
	struct prefixcache_sink sink = {
	    .l2_down = sh_obs_down, .l2_up = obs_up, .l2_del = obs_l2del};
	struct prefixcache_params p = {.num_models = 1, .column = 64, .shared_staged = 16};
	struct prefixcache *pc;

	p.model[0].num_caches = 1;
	p.model[0].cache[0] = (struct prefixcache_cache){0, PREFIXCACHE_FULL, 0, 0, 1 << 16};
	p.model[0].max_batch_tokens = 16;
	p.model[0].refill_bytes_per_token = 16;
	p.model[0].l2_latency_ns = 1000;
	p.model[0].shared_latency_ns = 1000000;	   /* 1 ms */
	p.model[0].recompute_tokens_per_ns = 1e-3; /* 128 tokens in 128 us */
	pc = prefixcache_create(&p, &sink);
	cr_assert_not_null(pc);
	return pc;
}

/*
 * A level whose line says computing is sooner (learned over a bad minute,
 * say) would never be read again, its line never learning: every
 * PREFIXCACHE_PROBE_EVERY-th refusal in a row is brought up all the same
 * (l2_refill_probes); while the level's refills come back in under half
 * its line's time (prefixcache_l2_sampled), every PREFIXCACHE_PROBE_FAST-th;
 * once one does not, every PREFIXCACHE_PROBE_EVERY-th again; a hit the
 * rule takes starts the count again. The disks' count is their own: it
 * moves nothing for hits all from the shared level. Fast probes whose
 * refills never come back end after PREFIXCACHE_PROBE_FAST_MAX of them.
 * Catches: no probe below DRAM (the line stuck for good); probes at the
 * wrong count; the fast count kept after a refill that did not beat the
 * line, or for good when none comes back; one level's count moving the
 * other's.
 */
Test(l2, hits_a_slow_level_refuses_are_probed_and_faster_while_probes_beat_its_line)
{
	struct prefixcache_stats st;
	struct prefixcache *pc = slow_shared_level();
	uint32_t k = 1, i, taken[3] = {0};
	uint64_t now = SEC;

	for (i = 1; i <= 2 * PREFIXCACHE_PROBE_EVERY; i++, k++, now += SEC)
		if (staged_lookup(pc, k, now) > 0) {
			cr_assert_eq(i % PREFIXCACHE_PROBE_EVERY, 0, "lookup %u probed", i);
			taken[0]++;
		}
	cr_assert_eq(taken[0], 2);
	/* The disks' refills under their line: nothing moves for these hits. */
	cr_assert_eq(prefixcache_l2_sampled(pc, 0, PREFIXCACHE_LEVEL_L2, true), 0);
	cr_assert_eq(prefixcache_l2_probe_every(pc, 0, PREFIXCACHE_LEVEL_L2),
		     PREFIXCACHE_PROBE_FAST);
	for (i = 1; i < PREFIXCACHE_PROBE_EVERY; i++, k++, now += SEC)
		cr_assert_eq(staged_lookup(pc, k, now), 0,
			     "a shared hit probed at the disks' count");
	cr_assert_eq(staged_lookup(pc, k++, now), 128);
	now += SEC;
	cr_assert_eq(prefixcache_l2_sampled(pc, 0, PREFIXCACHE_LEVEL_L2, false), 0);
	/* The shared level's refills come back well under its line: faster. */
	cr_assert_eq(prefixcache_l2_sampled(pc, 0, PREFIXCACHE_LEVEL_SHARED, true), 0);
	for (i = 1; i <= 4 * PREFIXCACHE_PROBE_FAST; i++, k++, now += SEC)
		if (staged_lookup(pc, k, now) > 0) {
			cr_assert_eq(i % PREFIXCACHE_PROBE_FAST, 0, "lookup %u probed fast", i);
			taken[1]++;
		}
	cr_assert_eq(taken[1], 4);
	/* One that does not: back to the slow count. */
	cr_assert_eq(prefixcache_l2_sampled(pc, 0, PREFIXCACHE_LEVEL_SHARED, false), 0);
	for (i = 1; i <= PREFIXCACHE_PROBE_EVERY; i++, k++, now += SEC)
		if (staged_lookup(pc, k, now) > 0) {
			cr_assert_eq(i, PREFIXCACHE_PROBE_EVERY, "lookup %u probed", i);
			taken[2]++;
		}
	cr_assert_eq(taken[2], 1);
	prefixcache_stats(pc, &st);
	cr_assert_eq(st.l2_refill_probes, 8);
	cr_assert_eq(st.l2_recompute_faster_tokens,
		     128 * (3 * PREFIXCACHE_PROBE_EVERY + 4 * PREFIXCACHE_PROBE_FAST +
			    PREFIXCACHE_PROBE_EVERY - 8));
	/* Fast, and no refill comes back: PREFIXCACHE_PROBE_FAST_MAX probes, then slow. */
	cr_assert_eq(prefixcache_l2_sampled(pc, 0, PREFIXCACHE_LEVEL_SHARED, true), 0);
	for (i = 1; i <= PREFIXCACHE_PROBE_FAST * PREFIXCACHE_PROBE_FAST_MAX; i++, k++, now += SEC)
		cr_assert_eq(staged_lookup(pc, k, now) > 0, i % PREFIXCACHE_PROBE_FAST == 0,
			     "lookup %u", i);
	cr_assert_eq(prefixcache_l2_probe_every(pc, 0, PREFIXCACHE_LEVEL_SHARED),
		     PREFIXCACHE_PROBE_EVERY, "fast for good with no refill coming back");
	/* A hit the rule takes starts the count again. */
	cr_assert_eq(prefixcache_set_level_model(pc, 0, PREFIXCACHE_LEVEL_SHARED, 10000, 0), 0);
	cr_assert_eq(staged_lookup(pc, k++, now), 128);
	now += SEC;
	cr_assert_eq(prefixcache_set_level_model(pc, 0, PREFIXCACHE_LEVEL_SHARED, 1000000, 0), 0);
	for (i = 1; i < PREFIXCACHE_PROBE_EVERY; i++, k++, now += SEC)
		cr_assert_eq(staged_lookup(pc, k, now), 0, "refusal %u after a hit taken", i);
	cr_assert_eq(staged_lookup(pc, k, now), 128, "the %uth refusal in a row: a probe",
		     PREFIXCACHE_PROBE_EVERY);
	cr_assert_eq(prefixcache_l2_sampled(pc, 1, PREFIXCACHE_LEVEL_SHARED, true), -EINVAL);
	cr_assert_eq(prefixcache_l2_sampled(pc, 0, (enum prefixcache_level)7, true), -EINVAL);
	prefixcache_free(pc);
}

/*
 * The same rule below DRAM counts the prefill queue: 1 ms to bring up 128
 * tokens a wafer computes in 128 us is refused with 871 us of others'
 * prefills ahead (999 us), taken with 873 us (1,001 us).
 */
Test(l2, a_level_slower_than_computing_is_read_when_the_prefill_queue_hides_it)
{
	struct prefixcache *pc = slow_shared_level();

	cr_assert_eq(staged_lookup_waiting(pc, 1, SEC, 871000), 0);
	cr_assert_eq(staged_lookup_waiting(pc, 2, 2 * SEC, 873000), 128);
	prefixcache_free(pc);
}

/*
 * Which columns an L2_UP batch names (pc_up_select, by runs of tokens)
 * against the definition: every column of which some entry of the batch, in
 * the column's cache, is a token of its prompt in [start, start + tokens).
 * Random batches of runs, single tokens, padding (prompt 0), several
 * caches, columns that meet a run at either end, hold it, or miss it by one.
 */
Test(l2, an_up_batch_names_exactly_the_columns_it_has_tokens_of)
{
	uint64_t seed = test_seed("up-batch columns", 0x5e1ec7), x = seed;
	static struct proto_evict_entry b[64 * 3];
	static struct prefixcache_l2col up[300], want[300], got[300];
	static struct pc_run runs[64 * 3];
	unsigned int round;

	for (round = 0; round < 20000; round++) {
		uint16_t nc = (uint16_t)(1 + test_xorshift(&x) % 3), c;
		uint32_t g = (uint32_t)(1 + test_xorshift(&x) % 64), n_up = (uint32_t)(test_xorshift(&x) % 300);
		uint32_t t, k, nw = 0, ng;

		for (c = 0; c < nc; c++) {
			uint64_t pid = 1 + test_xorshift(&x) % 3;
			uint32_t tok = (uint32_t)(test_xorshift(&x) % 400);

			for (t = 0; t < g; t++) {
				struct proto_evict_entry *e = &b[(size_t)t * nc + c];

				switch (test_xorshift(&x) % 16) {
				case 0: /* another prompt, elsewhere */
					pid = test_xorshift(&x) % 4;
					tok = (uint32_t)(test_xorshift(&x) % 400);
					break;
				case 1: /* a gap */
					tok += (uint32_t)(2 + test_xorshift(&x) % 5);
					break;
				default:
					tok++;
				}
				memset(e, 0, sizeof(*e));
				e->prompt_id = pid;
				e->token_idx = tok;
			}
		}
		for (k = 0; k < n_up; k++)
			up[k] = (struct prefixcache_l2col){
				.key = k, .prompt_id = test_xorshift(&x) % 4,
				.start = (uint32_t)(test_xorshift(&x) % 420),
				.tokens = (uint32_t)(1 + test_xorshift(&x) % 70),
				.cache_id = (uint16_t)(test_xorshift(&x) % nc)};
		for (k = 0; k < n_up; k++)
			for (t = 0; t < g; t++) {
				const struct proto_evict_entry *e = &b[(size_t)t * nc + up[k].cache_id];

				if (e->prompt_id == up[k].prompt_id && e->token_idx >= up[k].start &&
				    e->token_idx - up[k].start < up[k].tokens) {
					want[nw++] = up[k];
					break;
				}
			}
		ng = pc_up_select(b, g, nc, up, n_up, runs, got);
		cr_assert_eq(ng, nw, "seed %#" PRIx64 " round %u: %u columns named, %u have tokens in the batch",
			     seed, round, ng, nw);
		for (k = 0; k < nw; k++)
			cr_assert_eq(got[k].key, want[k].key, "seed %#" PRIx64 " round %u: column %u is %" PRIu64
				     ", not %" PRIu64, seed, round, k, got[k].key, want[k].key);
	}
}

/* Prompt @p k of organization @p iso at @p now: its hit, and of it what came from L2. */
static uint32_t
org_request(struct replay *r, uint64_t iso, uint32_t k, uint64_t now, uint32_t *l2hit)
{
	uint32_t t[129];
	struct prefixcache_request q = {.isolation_id = iso, .tokens = t, .num_tokens = 129,
					.cache_length_allowed = 129,
					.first_multimodal = UINT32_MAX, .sequence_id = k};
	struct prefixcache_stats before, after;
	uint32_t hit;

	prompt(k, t);
	prefixcache_stats(replay_pc(r), &before);
	hit = replay_request(r, 0, &q, NULL, 0, now);
	prefixcache_stats(replay_pc(r), &after);
	*l2hit = (uint32_t)(after.l2_hit_tokens - before.l2_hit_tokens);
	return hit;
}

/*
 * A quiet organization's prompt (two columns) pushed down to L2 by a noisy
 * one's 30 prompts, which churn through L2 (1,024 tokens, 16 columns):
 * without a share the quiet one's columns are flushed from L2 too; with
 * l2_share 0.25 (256 tokens) they stay, and come up, byte for byte.
 */
static uint32_t
l2_noisy_run(double quiet_l2_share, uint64_t *quiet_held)
{
	struct replay_params p = params(64, 256, 1024, PREFIXCACHE_L2_ALL);
	struct replay *r = replay_create(&p);
	struct prefixcache_org_stats os[4];
	uint32_t l2hit, k, hit;
	size_t n, i;

	cr_assert_not_null(r);
	cr_assert_eq(prefixcache_org_l2_share(replay_pc(r), 55, quiet_l2_share, 0), 0);
	org_request(r, 55, 500, 1 * SEC, &l2hit);
	for (k = 0; k < 30; k++)
		org_request(r, 77, k, (2 + k) * SEC, &l2hit);
	n = prefixcache_orgs(replay_pc(r), os, 4);
	*quiet_held = 0;
	for (i = 0; i < n && i < 4; i++)
		if (os[i].isolation_id == 55)
			*quiet_held = os[i].l2_tokens;
	hit = org_request(r, 55, 500, 40 * SEC, &l2hit);
	cr_assert_eq(l2hit, hit, "what hit came from L2 (DRAM holds the noisy one's latest)");
	assert_clean(r);
	replay_free(r);
	return hit;
}

Test(l2, a_second_tier_share_keeps_a_quiet_organization_s_columns_from_a_noisy_one)
{
	uint64_t held;

	cr_assert_eq(l2_noisy_run(0, &held), 0, "without a share, flushed from L2 too");
	cr_assert_eq(held, 0);
	cr_assert_eq(l2_noisy_run(0.25, &held), 128, "with l2_share 0.25, both columns come up");
	cr_assert_eq(held, 128, "its two columns, within its 256 tokens, kept on the disk");
}

Test(l2, a_second_tier_share_out_of_range_is_refused)
{
	struct replay_params p = params(64, 256, 1024, PREFIXCACHE_L2_ALL);
	struct replay *r = replay_create(&p);

	cr_assert_not_null(r);
	cr_assert_eq(prefixcache_org_l2_share(replay_pc(r), 55, -0.5, 0), -EINVAL);
	cr_assert_eq(prefixcache_org_l2_share(replay_pc(r), 55, 0.6, 0.5), -EINVAL);
	cr_assert_eq(prefixcache_org_l2_share(replay_pc(r), 55, 0.5, 2), -EINVAL);
	cr_assert_eq(prefixcache_org_l2_share(replay_pc(r), 55, 0.5, 0), 0, "cap 0: none");
	replay_free(r);
}
