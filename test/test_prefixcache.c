/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * lib/prefixcache, driven through the replay system (a real kvstore and an
 * emulated wafer that checks every refilled byte): the design's examples,
 * capacity, isolation, expiry, losses, restarts, speculation, models.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <inttypes.h>

#include "prefixcache.h"
#include "replay.h"
#include "replay_assert.h"

#define SEC 1000000000ull

/* Messages seen, for the checks. */
static struct proto_refill_req refills[64];
static struct proto_refill_chunk chunks[64][16];
static unsigned int nrefills;
static struct proto_delete dels[256];
static struct prefixcache_shards del_to[256];
static unsigned int ndels;
static struct proto_reserve reserves[64];
static unsigned int nreserves;

static void
obs_refill(void *arg, uint16_t model, const struct proto_refill_req *r,
	   const struct proto_refill_chunk *c)
{
	(void)arg;
	(void)model;
	if (nrefills < 64) {
		refills[nrefills] = *r;
		memcpy(chunks[nrefills], c, sizeof(*c) * (r->num_chunks < 16 ? r->num_chunks : 16));
		nrefills++;
	}
}

static void
obs_del(void *arg, uint16_t model, struct prefixcache_shards to, const struct proto_delete *d)
{
	(void)arg;
	(void)model;
	if (ndels < 256) {
		del_to[ndels] = to;
		dels[ndels++] = *d;
	}
}

static void
obs_reserve(void *arg, uint16_t model, const struct proto_reserve *r)
{
	(void)arg;
	(void)model;
	if (nreserves < 64)
		reserves[nreserves++] = *r;
}

static struct replay_params
params_full(uint32_t C, uint64_t capacity, uint16_t G)
{
	struct replay_params p = {.bytes_per_token = 16, .num_buffers = 2};

	p.pc.num_models = 1;
	p.pc.column = C;
	p.pc.model[0].num_caches = 1;
	p.pc.model[0].cache[0] = (struct prefixcache_cache){0, PREFIXCACHE_FULL, 0, 0, capacity};
	p.pc.model[0].max_batch_tokens = G;
	p.observe.refill = obs_refill;
	p.observe.del = obs_del;
	p.observe.reserve = obs_reserve;
	nrefills = ndels = nreserves = 0;
	return p;
}

/* A driver with no shard behind it: one model, one full cache, columns of 4. */
static struct prefixcache *
plain_driver(uint64_t capacity, uint16_t max_batch_tokens)
{
	struct prefixcache_params p = {.num_models = 1, .column = 4};
	struct prefixcache *pc;

	p.model[0].num_caches = 1;
	p.model[0].cache[0] = (struct prefixcache_cache){0, PREFIXCACHE_FULL, 0, 0, capacity};
	p.model[0].max_batch_tokens = max_batch_tokens;
	pc = prefixcache_create(&p, NULL);
	cr_assert_not_null(pc);
	return pc;
}

static struct prefixcache_request
req_of(uint64_t iso, const uint32_t *t, uint32_t n, uint32_t allowed)
{
	struct prefixcache_request q = {.isolation_id = iso, .tokens = t, .num_tokens = n,
					.cache_length_allowed = allowed,
					.first_multimodal = UINT32_MAX, .sequence_id = 5};

	return q;
}

/* On a driver with no shard behind it: begin @q at @now, send its first @n
 * tokens, end. */
static void
plain_request(struct prefixcache *pc, uint16_t model, const struct prefixcache_request *q,
	      uint32_t n, uint64_t now, struct prefixcache_hit *hit)
{
	struct prefixcache_seq *s = prefixcache_begin(pc, model, q, now, hit);
	uint32_t i;

	cr_assert_not_null(s);
	for (i = 0; i < n; i++)
		prefixcache_token(pc, s, q->tokens[i], now);
	prefixcache_end(pc, s, now);
}

/* ---- The design's PrefixMap example, C = 4 ---------------------------------- */

Test(design, prefixmap_example_with_columns_of_four)
{
	/* A B C D E ... N as token ids 1..14; one token per batch, so a token's
	 * evict count is its place among all evictions. */
	uint32_t t[14], i;
	struct replay_params p = params_full(4, 1000, 1);
	struct replay *r = replay_create(&p);
	struct prefixcache *pc = replay_pc(r);
	struct prefixcache_entry_info e1, e2, e3;
	struct prefixcache_request q;
	struct prefixcache_hit hit;
	struct replay_seq *s;
	uint64_t p111, p222, iso = proto_ref_isolation_id("acme", 4);

	for (i = 0; i < 14; i++)
		t[i] = i + 1;
	/* Prompt 111 = ABCDE. */
	q = req_of(iso, t, 5, 5);
	s = replay_begin(r, 0, &q, 1 * SEC, &hit);
	cr_assert_eq(hit.hit_tokens, 0);
	p111 = replay_prompt_id(s);
	replay_send(r, s, 5, NULL, 1 * SEC);
	replay_end(r, s, 1 * SEC);
	/* Prompt 222 = ABCDEFGHIJKLMN, continuing it. */
	q = req_of(iso, t, 14, 14);
	s = replay_begin(r, 0, &q, 2 * SEC, &hit);
	cr_assert_eq(hit.hit_tokens, 4, "hit %u", hit.hit_tokens);
	p222 = replay_prompt_id(s);
	replay_send(r, s, 10, NULL, 2 * SEC);
	replay_end(r, s, 2 * SEC);

	cr_assert_eq(prefixcache_find(pc, 0, 0, iso, t, 4, 3 * SEC, &e1), 0);
	cr_assert_eq(prefixcache_find(pc, 0, 0, iso, t, 8, 3 * SEC, &e2), 0);
	cr_assert_eq(prefixcache_find(pc, 0, 0, iso, t, 12, 3 * SEC, &e3), 0);
	cr_assert_eq(e1.prompt_id, p111);
	cr_assert_eq(e1.length, 4);
	cr_assert_eq(e1.evict_count, 4, "D is the 4th eviction: %" PRIu64, e1.evict_count);
	cr_assert_eq(e2.prompt_id, p222);
	cr_assert_eq(e2.length, 8);
	cr_assert_eq(e2.evict_count, 9, "H is the 9th eviction (A-E, then E-H)");
	cr_assert_eq(e3.prompt_id, p222);
	cr_assert_eq(e3.length, 12);
	cr_assert_eq(e3.evict_count, 13);
	cr_assert_eq(e2.parent_hash, e1.hash);
	cr_assert_eq(e3.parent_hash, e2.hash);
	cr_assert_eq(e1.parent_hash, 0);
	/* The hashes chain: each column seeded with its parent's. */
	cr_assert_eq(e1.hash, prefixcache_column_hash(iso, t, 4));
	cr_assert_eq(e2.hash, prefixcache_column_hash(e1.hash, t + 4, 4));
	cr_assert_eq(prefixcache_find(pc, 0, 0, iso, t, 13, 3 * SEC, &e1), -ENOENT);
	/* The refill of 222 glued prompt 111's column, waiting for D's batch. */
	cr_assert_eq(nrefills, 1);
	cr_assert_eq(refills[0].num_chunks, 1);
	cr_assert_eq(refills[0].evict_count, 4);
	cr_assert_eq(chunks[0][0].prompt_id, p111);
	cr_assert_eq(chunks[0][0].start_token_idx, 0);
	cr_assert_eq(chunks[0][0].num_tokens, 4);
	/* 222 reserved from token 4, continuing 111. */
	cr_assert_eq(reserves[1].prompt_id, p222);
	cr_assert_eq(reserves[1].continue_id, p111);
	cr_assert_eq(reserves[1].start_token_idx, 4);
	/* Trailing tokens that fill no column were deleted: E of 111, MN of 222. */
	cr_assert_eq(ndels, 2);
	cr_assert_eq(dels[0].prompt_id, p111);
	cr_assert_eq(dels[0].start_token_idx, 4);
	cr_assert_eq(dels[0].end_token_idx, 4);
	cr_assert_eq(dels[1].prompt_id, p222);
	cr_assert_eq(dels[1].start_token_idx, 12);
	cr_assert_eq(dels[1].end_token_idx, 13);
	/* A third request glues both prompts. */
	nrefills = 0;
	q = req_of(iso, t, 14, 14);
	cr_assert_eq(replay_request(r, 0, &q, NULL, 0, 4 * SEC), 12);
	cr_assert_eq(refills[0].num_chunks, 2);
	cr_assert_eq(chunks[0][1].prompt_id, p222);
	cr_assert_eq(chunks[0][1].start_token_idx, 4);
	cr_assert_eq(chunks[0][1].num_tokens, 8);
	cr_assert_eq(refills[0].evict_count, 13, "the largest evict count of the entries used");
	assert_clean(r);
	replay_free(r);
}

/* ---- The design's sliding-window example ---------------------------------------- */

/* ---- Cache salts: one organization, users who share nothing --------------- */

/* One request of @p q through @p r at @p now, every token sent: its hit. */
static uint32_t
salted_request(struct replay *r, const struct prefixcache_request *q, uint64_t now)
{
	struct prefixcache_hit hit;
	struct replay_seq *s = replay_begin(r, 0, q, now, &hit);

	cr_assert_not_null(s);
	replay_send(r, s, q->num_tokens - hit.hit_tokens, NULL, now);
	replay_end(r, s, now);
	return hit.hit_tokens;
}

Test(tenants, a_cache_salt_shares_no_column_with_another_salt_or_with_none)
{
	uint32_t t[12], i;
	struct replay_params p = params_full(4, 1000, 1);
	struct replay *r = replay_create(&p);
	struct prefixcache *pc = replay_pc(r);
	struct prefixcache_entry_info e;
	struct prefixcache_org_stats os[4];
	struct prefixcache_request q;
	uint64_t iso = proto_ref_isolation_id("acme", 4);
	uint64_t a = proto_ref_salt("alice", 5), b = proto_ref_salt("bob", 3);

	for (i = 0; i < 12; i++)
		t[i] = i + 1;
	q = req_of(iso, t, 12, 12);
	q.salt = a;
	cr_assert_eq(salted_request(r, &q, 1 * SEC), 0);
	/* Alice's columns are keyed from her salted root, not from the isolation id. */
	cr_assert_eq(prefixcache_find_salted(pc, 0, 0, iso, a, t, 8, 2 * SEC, &e), 0);
	cr_assert_eq(prefixcache_find_salted(pc, 0, 0, iso, a, t, 4, 2 * SEC, &e), 0);
	cr_assert_eq(e.hash, prefixcache_column_hash(proto_ref_chain_root(iso, a), t, 4));
	cr_assert_eq(prefixcache_find_salted(pc, 0, 0, iso, b, t, 4, 2 * SEC, &e), -ENOENT);
	cr_assert_eq(prefixcache_find(pc, 0, 0, iso, t, 4, 2 * SEC, &e), -ENOENT);
	/* Bob, and a request without a salt, miss what Alice cached... */
	q.salt = b;
	cr_assert_eq(salted_request(r, &q, 2 * SEC), 0, "another salt hit");
	q.salt = 0;
	cr_assert_eq(salted_request(r, &q, 3 * SEC), 0, "no salt hit a salted prompt");
	/* ...and each hits its own (the -1 rule: 8 of 12 tokens). */
	q.salt = a;
	cr_assert_eq(salted_request(r, &q, 4 * SEC), 8);
	q.salt = b;
	cr_assert_eq(salted_request(r, &q, 5 * SEC), 8);
	q.salt = 0;
	cr_assert_eq(salted_request(r, &q, 6 * SEC), 8);
	cr_assert_eq(prefixcache_find(pc, 0, 0, iso, t, 4, 7 * SEC, &e), 0);
	cr_assert_eq(e.hash, prefixcache_column_hash(iso, t, 4), "no salt: keys as before salts");
	/* One organization all along: its TTLs, counts and namespace are acme's. */
	cr_assert_eq(prefixcache_orgs(pc, os, 4), 1);
	cr_assert_eq(os[0].isolation_id, iso);
	cr_assert_eq(os[0].requests, 6);
	replay_free(r);
}

/* ---- DRAM shares: a noisy organization and a quiet one ---------------------- */

/* An organization's DRAM tokens now, and the columns it yielded to others. */
static uint64_t
org_dram(struct prefixcache *pc, uint64_t iso, uint64_t *yielded)
{
	struct prefixcache_org_stats os[8];
	size_t n = prefixcache_orgs(pc, os, 8), i;

	for (i = 0; i < n && i < 8; i++)
		if (os[i].isolation_id == iso) {
			if (yielded != NULL)
				*yielded = os[i].dram_yielded;
			return os[i].dram_tokens;
		}
	return 0;
}

/*
 * A quiet organization's prompt (24 tokens) between 30 of a noisy one's
 * (20 tokens each, all different) in a DRAM of 100 tokens: without shares
 * the noisy one's flush it (the quiet one's next request hits nothing);
 * with a share of 0.3 (30 tokens) it stays and hits 20. The noisy one,
 * without a share of its own, fills what the quiet one does not use (work
 * conserving) and, capped at 0.5, never holds more than 50 tokens.
 */
static uint32_t
noisy_run(double quiet_share, double noisy_cap, uint64_t *quiet_held, uint64_t *noisy_peak,
	  uint64_t *noisy_end)
{
	uint32_t a[24], t[20], i, k, hit;
	struct replay_params p = params_full(4, 100, 1);
	struct replay *r = replay_create(&p);
	struct prefixcache *pc = replay_pc(r);
	uint64_t quiet = proto_ref_isolation_id("quiet", 5), noisy = proto_ref_isolation_id("noisy", 5);
	struct prefixcache_request q;

	cr_assert_eq(prefixcache_org_dram_share(pc, quiet, quiet_share, 0), 0);
	cr_assert_eq(prefixcache_org_dram_share(pc, noisy, 0, noisy_cap), 0);
	for (i = 0; i < 24; i++)
		a[i] = 1000 + i;
	q = req_of(quiet, a, 24, 24);
	cr_assert_eq(salted_request(r, &q, 1 * SEC), 0);
	*noisy_peak = 0;
	for (k = 0; k < 30; k++) {
		uint64_t held;

		for (i = 0; i < 20; i++)
			t[i] = 100000 * (k + 1) + i;
		q = req_of(noisy, t, 20, 20);
		salted_request(r, &q, (2 + k) * SEC);
		held = org_dram(pc, noisy, NULL);
		if (held > *noisy_peak)
			*noisy_peak = held;
	}
	*quiet_held = org_dram(pc, quiet, NULL);
	*noisy_end = org_dram(pc, noisy, NULL);
	q = req_of(quiet, a, 24, 24);
	hit = salted_request(r, &q, 40 * SEC);
	replay_free(r);
	return hit;
}

Test(tenants, a_dram_share_keeps_a_quiet_organization_s_columns_from_a_noisy_one)
{
	uint64_t held, peak, end;

	cr_assert_eq(noisy_run(0, 0, &held, &peak, &end), 0, "without shares, the quiet one is flushed");
	cr_assert_eq(held, 0);
	cr_assert_eq(noisy_run(0.3, 0, &held, &peak, &end), 20, "with a share of 0.3 it hits its 20");
	cr_assert_eq(held, 24, "its 24 tokens, within its 30, all kept");
	cr_assert_geq(end, 70, "the noisy one fills the rest (work conserving): %" PRIu64, end);
	cr_assert_eq(noisy_run(0.3, 0.5, &held, &peak, &end), 20);
	cr_assert_leq(peak, 50, "capped at 0.5 of 100: %" PRIu64, peak);
	cr_assert_geq(peak, 40, "and it did use its cap: %" PRIu64, peak);
}

Test(tenants, a_share_above_what_is_held_is_lent_and_taken_back)
{
	uint32_t a[24], b[24], t[20], i, k;
	struct replay_params p = params_full(4, 100, 1);
	struct replay *r = replay_create(&p);
	struct prefixcache *pc = replay_pc(r);
	uint64_t quiet = proto_ref_isolation_id("quiet", 5), noisy = proto_ref_isolation_id("noisy", 5);
	uint64_t yielded = 0;
	struct prefixcache_request q;

	cr_assert_eq(prefixcache_org_dram_share(pc, quiet, 0.4, 0), 0);
	/* The noisy one fills the whole DRAM while the quiet one is away. */
	for (k = 0; k < 10; k++) {
		for (i = 0; i < 20; i++)
			t[i] = 100000 * (k + 1) + i;
		q = req_of(noisy, t, 20, 20);
		salted_request(r, &q, (1 + k) * SEC);
	}
	cr_assert_geq(org_dram(pc, noisy, NULL), 96, "lent: %" PRIu64, org_dram(pc, noisy, NULL));
	/* The quiet one comes back: its 48 tokens take the noisy one's room... */
	for (i = 0; i < 24; i++) {
		a[i] = 1000 + i;
		b[i] = 2000 + i;
	}
	q = req_of(quiet, a, 24, 24);
	salted_request(r, &q, 20 * SEC);
	q = req_of(quiet, b, 24, 24);
	salted_request(r, &q, 21 * SEC);
	cr_assert_eq(org_dram(pc, quiet, NULL), 48, "taken back: %" PRIu64, org_dram(pc, quiet, NULL));
	org_dram(pc, noisy, &yielded);
	cr_assert_gt(yielded, 0, "from the noisy one's columns");
	/* ... and above its 40, it lends back what the noisy one needs. */
	for (k = 10; k < 20; k++) {
		for (i = 0; i < 20; i++)
			t[i] = 100000 * (k + 1) + i;
		q = req_of(noisy, t, 20, 20);
		salted_request(r, &q, (30 + k) * SEC);
	}
	cr_assert_leq(org_dram(pc, quiet, NULL), 40, "down to its share: %" PRIu64, org_dram(pc, quiet, NULL));
	cr_assert_geq(org_dram(pc, quiet, NULL), 36, "not below it by more than a column");
	/* Out of range: refused. */
	cr_assert_eq(prefixcache_org_dram_share(pc, quiet, -0.1, 0), -EINVAL);
	cr_assert_eq(prefixcache_org_dram_share(pc, quiet, 0.6, 0.5), -EINVAL);
	cr_assert_eq(prefixcache_org_dram_share(pc, quiet, 0.5, 1.5), -EINVAL);
	cr_assert_eq(prefixcache_org_dram_share(pc, quiet, 0.0 / 0.0, 0), -EINVAL);
	replay_free(r);
}

Test(design, sliding_window_example_w100_c10_s3)
{
	struct replay_params p = params_full(10, 100000, 16);
	struct replay *r;
	struct prefixcache *pc;
	struct prefixcache_entry_info e;
	struct prefixcache_request q;
	uint32_t t[141], i, len;
	static const uint32_t want[] = {10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 107, 117, 127, 137};
	unsigned int k = 0;

	p.pc.model[0].cache[0] = (struct prefixcache_cache){0, PREFIXCACHE_SWA, 100, 3, 100000};
	r = replay_create(&p);
	pc = replay_pc(r);
	for (i = 0; i < 141; i++)
		t[i] = 1000 + i;
	q = req_of(7, t, 140, 140);
	cr_assert_eq(replay_request(r, 0, &q, NULL, 0, SEC), 0);
	/* Entries exactly at the design's lengths (107, not 106: after evicting
	 * tokens 0..106 the prefix length is 107). */
	for (len = 1; len <= 140; len++) {
		int rc = prefixcache_find(pc, 0, 0, 7, t, len, SEC, &e);

		if (k < 14 && len == want[k]) {
			cr_assert_eq(rc, 0, "no entry at %u", len);
			k++;
		} else {
			cr_assert_eq(rc, -ENOENT, "unexpected entry at %u", len);
		}
	}
	/* A request of 141 tokens refills 137 logical tokens as the design glues them. */
	nrefills = 0;
	q = req_of(7, t, 141, 141);
	cr_assert_eq(replay_request(r, 0, &q, NULL, 0, 2 * SEC), 137);
	cr_assert_eq(nrefills, 1);
	cr_assert_eq(refills[0].num_chunks, 3);
	cr_assert_eq(chunks[0][0].start_token_idx, 0);
	cr_assert_eq(chunks[0][0].num_tokens, 3);
	cr_assert_eq(chunks[0][1].start_token_idx, 100);
	cr_assert_eq(chunks[0][1].num_tokens, 37);
	cr_assert_eq(chunks[0][2].start_token_idx, 40);
	cr_assert_eq(chunks[0][2].num_tokens, 60);
	assert_clean(r);
	replay_free(r);
}

/*
 * A model of a full cache and a sliding one (window 100, sinks 3), columns
 * of 10, whose first request of @p n tokens (2000, 2001, ... into @p t)
 * stores its first 141: the refills the next one asks are observed from 0.
 */
static struct replay *
full_and_sliding_after_141(uint32_t *t, uint32_t n)
{
	struct replay_params p = params_full(10, 100000, 16);
	struct prefixcache_request q;
	struct replay *r;
	uint32_t i;

	p.pc.model[0].num_caches = 2;
	p.pc.model[0].cache[1] = (struct prefixcache_cache){1, PREFIXCACHE_SWA, 100, 3, 100000};
	r = replay_create(&p);
	for (i = 0; i < n; i++)
		t[i] = 2000 + i;
	q = req_of(7, t, 141, 141);
	cr_assert_eq(replay_request(r, 0, &q, NULL, 0, SEC), 0);
	nrefills = nreserves = 0;
	return r;
}

/*
 * A model with a full cache (0) and the design's sliding window (1: W = 100,
 * S = 3) in one model. After the loop-around the window's entries end at
 * 107, 117, ..., off the full cache's grid of 10: a second request hits 137
 * tokens (not 100, the last length both grids share). The full cache refills
 * [0, 137) from its columns up to 140 and caches again from 140 on; every
 * refilled byte of both caches is checked, and a third request hits 157.
 */
Test(design, a_full_and_a_sliding_cache_in_one_model_hit_past_the_window)
{
	struct prefixcache_request q;
	uint32_t t[171], k;
	struct replay *r = full_and_sliding_after_141(t, 171);
	int full_req = -1, full_res = -1, swa_res = -1;

	q = req_of(7, t, 161, 161);
	cr_assert_eq(replay_request(r, 0, &q, NULL, 0, 2 * SEC), 137);
	for (k = 0; k < nrefills; k++)
		if (refills[k].cache_id == 0)
			full_req = (int)k;
	cr_assert_geq(full_req, 0);
	cr_assert_eq(refills[full_req].num_chunks, 1);
	cr_assert_eq(chunks[full_req][0].start_token_idx, 0);
	cr_assert_eq(chunks[full_req][0].num_tokens, 137, "the full cache refills [0, 137)");
	for (k = 0; k < nreserves; k++) {
		if (reserves[k].cache_id == 0)
			full_res = (int)k;
		else
			swa_res = (int)k;
	}
	cr_assert_geq(full_res, 0);
	cr_assert_geq(swa_res, 0);
	cr_assert_eq(reserves[full_res].start_token_idx, 140, "after its last used column");
	cr_assert_eq(reserves[swa_res].start_token_idx, 137);
	q = req_of(7, t, 171, 171);
	cr_assert_eq(replay_request(r, 0, &q, NULL, 0, 3 * SEC), 157);
	assert_clean(r);
	replay_free(r);
}

/*
 * The requester learns what it awaits from the lookup's return, not from
 * the sink: one REFILL per cache, each as the sink was given it, its chunks
 * its own group's (a full and a sliding cache glue different tokens).
 */
Test(design, a_lookup_returns_every_refill_the_sink_was_given)
{
	struct prefixcache_hit hit;
	struct prefixcache_request q;
	struct replay_seq *s;
	uint32_t t[161], k;
	struct replay *r = full_and_sliding_after_141(t, 161);

	q = req_of(7, t, 161, 161);
	s = replay_begin(r, 0, &q, 2 * SEC, &hit);
	cr_assert_not_null(s);
	cr_assert_eq(hit.hit_tokens, 137);
	cr_assert_eq(nrefills, 2, "one REFILL per cache");
	cr_assert_eq(hit.num_refills, nrefills);
	cr_assert_not_null(hit.refills);
	for (k = 0; k < nrefills; k++) {
		const struct prefixcache_refill *x = &hit.refills[k];

		cr_assert_eq(memcmp(&x->rq, &refills[k], sizeof(x->rq)), 0, "REFILL %u as sent", k);
		cr_assert_eq(memcmp(x->chunks, chunks[k], sizeof(*x->chunks) * x->rq.num_chunks), 0,
			     "the chunks of REFILL %u as sent", k);
		cr_assert_eq(x->rq.refill_id - hit.refill_id, x->rq.cache_id, "ids follow the caches");
	}
	cr_assert_neq(memcmp(hit.refills[0].chunks, hit.refills[1].chunks,
			     sizeof(struct proto_refill_chunk)),
		      0, "each group's own chunks, not the last group's for all");
	replay_send(r, s, q.num_tokens - hit.hit_tokens, NULL, 2 * SEC);
	replay_end(r, s, 2 * SEC);
	assert_clean(r);
	replay_free(r);
}

Test(design, a_window_not_a_multiple_of_the_column_stops_caching_there)
{
	struct replay_params p = params_full(10, 100000, 16);
	struct replay *r;
	struct prefixcache_entry_info e;
	struct prefixcache_request q;
	uint32_t t[200], i;

	p.pc.model[0].cache[0] = (struct prefixcache_cache){0, PREFIXCACHE_SWA, 95, 3, 100000};
	r = replay_create(&p);
	for (i = 0; i < 200; i++)
		t[i] = i;
	q = req_of(7, t, 200, 200);
	replay_request(r, 0, &q, NULL, 0, SEC);
	cr_assert_eq(prefixcache_find(replay_pc(r), 0, 0, 7, t, 90, SEC, &e), 0);
	cr_assert_eq(prefixcache_find(replay_pc(r), 0, 0, 7, t, 100, SEC, &e), -ENOENT);
	cr_assert_eq(replay_request(r, 0, &q, NULL, 0, 2 * SEC), 90);
	cr_assert_leq(prefixcache_stored(replay_pc(r), 0, 0), 90);
	assert_clean(r);
	replay_free(r);
}

/* ---- Request inputs -------------------------------------------------------------------- */

Test(inputs, the_last_prompt_token_is_never_replayed_unless_asked)
{
	struct replay_params p = params_full(4, 1000, 8);
	struct replay *r = replay_create(&p);
	struct prefixcache_request q;
	uint32_t t[8] = {1, 2, 3, 4, 5, 6, 7, 8};

	q = req_of(1, t, 8, 8);
	replay_request(r, 0, &q, NULL, 0, SEC);
	cr_assert_eq(replay_request(r, 0, &q, NULL, 0, SEC), 4, "8 - 1 rounds down to 4");
	replay_free(r);
	p = params_full(4, 1000, 8);
	p.pc.no_minus_one = true;
	r = replay_create(&p);
	replay_request(r, 0, &q, NULL, 0, SEC);
	cr_assert_eq(replay_request(r, 0, &q, NULL, 0, SEC), 8);
	assert_clean(r);
	replay_free(r);
}

Test(inputs, caching_stops_at_the_allowed_length_and_before_multimodal_tokens)
{
	struct replay_params p = params_full(4, 1000, 8);
	struct replay *r = replay_create(&p);
	struct prefixcache_request q;
	uint32_t t[20], i;

	for (i = 0; i < 20; i++)
		t[i] = i;
	q = req_of(1, t, 20, 9);
	replay_request(r, 0, &q, NULL, 0, SEC);
	q.cache_length_allowed = 20;
	cr_assert_eq(replay_request(r, 0, &q, NULL, 0, SEC), 8, "only 9 allowed: 2 columns");
	q.isolation_id = 2;
	q.first_multimodal = 6;
	replay_request(r, 0, &q, NULL, 0, SEC);
	q.first_multimodal = UINT32_MAX;
	cr_assert_eq(replay_request(r, 0, &q, NULL, 0, SEC), 4, "cut before token 6: 1 column");
	assert_clean(r);
	replay_free(r);
}

Test(inputs, generated_tokens_are_cached_when_allowed)
{
	struct replay_params p = params_full(4, 1000, 8);
	struct replay *r = replay_create(&p);
	struct prefixcache_request q;
	uint32_t t[16], gen[8] = {90, 91, 92, 93, 94, 95, 96, 97}, i;

	for (i = 0; i < 8; i++)
		t[i] = i;
	memcpy(t + 8, gen, sizeof(gen));
	q = req_of(1, t, 8, 16);
	replay_request(r, 0, &q, gen, 8, SEC);
	/* The next turn's prompt is the whole exchange. */
	q = req_of(1, t, 16, 16);
	cr_assert_eq(replay_request(r, 0, &q, NULL, 0, 2 * SEC), 12);
	assert_clean(r);
	replay_free(r);
}

/* ---- Isolation --------------------------------------------------------------------------- */

Test(isolation, identical_prompts_of_two_organizations_never_meet)
{
	struct replay_params p = params_full(4, 1000, 8);
	struct replay *r = replay_create(&p);
	struct prefixcache_request q;
	uint32_t t[17], i;
	uint64_t a = proto_ref_isolation_id("org-a", 5), b = proto_ref_isolation_id("org-b", 5);

	for (i = 0; i < 17; i++)
		t[i] = 42;
	q = req_of(a, t, 17, 17);
	replay_request(r, 0, &q, NULL, 0, SEC);
	q.isolation_id = b;
	cr_assert_eq(replay_request(r, 0, &q, NULL, 0, SEC), 0);
	cr_assert_eq(replay_request(r, 0, &q, NULL, 0, SEC), 16);
	q.isolation_id = a;
	cr_assert_eq(replay_request(r, 0, &q, NULL, 0, SEC), 16);
	assert_clean(r); /* every refilled byte was the requesting organization's */
	replay_free(r);
}

/* ---- Capacity --------------------------------------------------------------------------- */

Test(capacity, the_shards_never_hold_more_than_capacity)
{
	struct replay_params p = params_full(8, 100, 4);
	struct replay *r = replay_create(&p);
	struct replay_stats st;
	struct prefixcache_stats ps;
	struct prefixcache_request q;
	uint32_t t[64], i, k;

	for (k = 0; k < 200; k++) {
		for (i = 0; i < 64; i++)
			t[i] = (i < 16 ? 7 : k % 13) * 1000 + i;
		q = req_of(1, t, 64, 64);
		replay_request(r, 0, &q, NULL, 0, k * SEC);
		cr_assert_leq(prefixcache_stored(replay_pc(r), 0, 0), 100);
	}
	replay_stats(r, &st);
	prefixcache_stats(replay_pc(r), &ps);
	cr_assert_leq(st.max_stored, 100);
	cr_assert_gt(ps.policy_deletes, 0);
	cr_assert_gt(ps.hit_tokens, 0);
	assert_clean(r);
	replay_free(r);
}

Test(capacity, a_column_an_inflight_refill_needs_is_not_deleted)
{
	struct prefixcache *pc = plain_driver(8, 0);
	struct prefixcache_request q;
	struct prefixcache_hit hit;
	struct prefixcache_seq *s;
	struct prefixcache_entry_info e;
	uint32_t a[8] = {1, 2, 3, 4, 5, 6, 7, 8}, b[8] = {9, 9, 9, 9, 9, 9, 9, 9}, i;
	uint64_t refill_a;

	q = req_of(1, a, 8, 8);
	plain_request(pc, 0, &q, 8, 1, &hit);
	prefixcache_flush(pc);
	/* A refill of a's first column, not done yet. */
	s = prefixcache_begin(pc, 0, &q, 2, &hit);
	cr_assert_eq(hit.hit_tokens, 4);
	cr_assert_neq(hit.refill_id, 0);
	refill_a = hit.refill_id;
	prefixcache_end(pc, s, 2);
	/* b needs room: only a's second column may go... and then nothing. */
	q = req_of(1, b, 8, 8);
	plain_request(pc, 0, &q, 8, 3, &hit);
	cr_assert_eq(prefixcache_find(pc, 0, 0, 1, a, 4, 4, &e), 0, "pinned column deleted");
	cr_assert_leq(prefixcache_stored(pc, 0, 0), 8);
	/* Once the refill is done it can go. */
	prefixcache_refill_done(pc, refill_a);
	q = req_of(1, b, 8, 8);
	s = prefixcache_begin(pc, 0, &q, 5, &hit);
	for (i = hit.hit_tokens; i < 8; i++)
		prefixcache_token(pc, s, b[i], 5);
	prefixcache_end(pc, s, 5);
	cr_assert_eq(prefixcache_find(pc, 0, 0, 1, a, 4, 6, &e), -ENOENT);
	prefixcache_free(pc);
}

/*
 * A sequence continuing a column that a shard restart dropped lets go of its
 * pin when it ends: by then the record may hold another column, which a
 * refill in flight needs. Its pin must stay.
 */
Test(capacity, a_sequence_ending_after_its_column_went_keeps_off_the_new_one)
{
	struct prefixcache *pc = plain_driver(8, 0);
	struct prefixcache_request q;
	struct prefixcache_hit hit;
	struct prefixcache_seq *s, *a_live;
	struct prefixcache_entry_info e;
	uint32_t a[9] = {1, 2, 3, 4, 5, 6, 7, 8, 0}, c[5] = {20, 21, 22, 23, 0},
		 d[8] = {30, 31, 32, 33, 34, 35, 36, 37};

	/* a's two columns are cached; a sequence continues the second. */
	q = req_of(1, a, 8, 8);
	plain_request(pc, 0, &q, 8, 1, &hit);
	q = req_of(1, a, 9, 16);
	a_live = prefixcache_begin(pc, 0, &q, 2, &hit);
	cr_assert_eq(hit.hit_tokens, 8);
	prefixcache_refill_done(pc, hit.refill_id);
	/* The shard restarts: a's columns go, their records are free. */
	prefixcache_shard_restart(pc, 0);
	/* c's column takes a record; a refill of it is in flight. */
	q = req_of(1, c, 5, 4);
	plain_request(pc, 0, &q, 4, 3, &hit);
	s = prefixcache_begin(pc, 0, &q, 4, &hit);
	cr_assert_eq(hit.hit_tokens, 4);
	prefixcache_end(pc, s, 4);
	/* The old sequence ends; then d needs all the room there is. */
	prefixcache_end(pc, a_live, 5);
	q = req_of(1, d, 8, 8);
	plain_request(pc, 0, &q, 8, 6, &hit);
	cr_assert_eq(prefixcache_find(pc, 0, 0, 1, c, 4, 7, &e), 0,
		     "a column a refill in flight needs was deleted");
	cr_assert_leq(prefixcache_stored(pc, 0, 0), 8);
	prefixcache_free(pc);
}

/* ---- Expiry ------------------------------------------------------------------------------ */

Test(expiry, an_entry_past_its_last_use_ttl_is_never_returned)
{
	struct replay_params p = params_full(4, 1000, 8);
	struct replay *r;
	struct prefixcache_request q;
	struct prefixcache_stats st;
	uint32_t t[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};

	p.pc.ttl_last_ns = 10 * SEC;
	r = replay_create(&p);
	q = req_of(1, t, 9, 9);
	replay_request(r, 0, &q, NULL, 0, 0);
	cr_assert_eq(replay_request(r, 0, &q, NULL, 0, 9 * SEC), 8);
	/* Used at 9 s: alive until 19 s, even with no cleanup run. */
	cr_assert_eq(replay_request(r, 0, &q, NULL, 0, 18 * SEC), 8);
	cr_assert_eq(replay_request(r, 0, &q, NULL, 0, 40 * SEC), 0, "expired, before cleanup");
	/* Cleanup removes what expired and deletes it from the shards. */
	ndels = 0;
	cr_assert_gt(prefixcache_expire(replay_pc(r), 100 * SEC, 1000), 0);
	cr_assert_gt(ndels, 0);
	prefixcache_stats(replay_pc(r), &st);
	cr_assert_gt(st.expired_tokens, 0);
	cr_assert_eq(st.entries, 0);
	cr_assert_eq(prefixcache_stored(replay_pc(r), 0, 0), 0);
	assert_clean(r);
	replay_free(r);
}

Test(expiry, first_use_expiry_takes_the_children_with_it)
{
	struct replay_params p = params_full(4, 1000, 8);
	struct replay *r;
	struct prefixcache_request q;
	struct prefixcache_entry_info e;
	uint32_t t[13], i;

	p.pc.ttl_first_ns = 100 * SEC;
	r = replay_create(&p);
	for (i = 0; i < 13; i++)
		t[i] = i;
	q = req_of(1, t, 5, 5);
	replay_request(r, 0, &q, NULL, 0, 0);	      /* column 1 at t=0 */
	q = req_of(1, t, 13, 13);
	cr_assert_eq(replay_request(r, 0, &q, NULL, 0, 50 * SEC), 4); /* columns 2, 3 at 50 s */
	cr_assert_eq(prefixcache_find(replay_pc(r), 0, 0, 1, t, 12, 60 * SEC, &e), 0);
	/* At 120 s column 1 is 120 s old: it and everything after it go. */
	cr_assert_eq(prefixcache_expire(replay_pc(r), 120 * SEC, 100), 3);
	cr_assert_eq(prefixcache_stored(replay_pc(r), 0, 0), 0);
	assert_clean(r);
	replay_free(r);
}

Test(expiry, organizations_can_have_their_own_ttls)
{
	struct replay_params p = params_full(4, 1000, 8);
	struct replay *r;
	struct prefixcache_request q;
	uint32_t t[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};

	p.pc.ttl_last_ns = 1000 * SEC;
	r = replay_create(&p);
	cr_assert_eq(prefixcache_org_ttl(replay_pc(r), 2, 5 * SEC, 0), 0);
	q = req_of(1, t, 9, 9);
	replay_request(r, 0, &q, NULL, 0, 0);
	q.isolation_id = 2;
	replay_request(r, 0, &q, NULL, 0, 0);
	cr_assert_eq(replay_request(r, 0, &q, NULL, 0, 10 * SEC), 0, "org 2 keeps 5 s");
	q.isolation_id = 1;
	cr_assert_eq(replay_request(r, 0, &q, NULL, 0, 10 * SEC), 8, "org 1 keeps 1000 s");
	assert_clean(r);
	replay_free(r);
}

/* ---- Shard events ------------------------------------------------------------------------ */

Test(events, a_lost_token_removes_every_column_containing_it)
{
	struct replay_params p = params_full(4, 1000, 8);
	struct replay *r = replay_create(&p);
	struct prefixcache_request q;
	struct prefixcache_hit hit;
	struct prefixcache_entry_info e;
	struct replay_seq *s;
	uint32_t t[13], i;
	uint64_t pid;

	for (i = 0; i < 13; i++)
		t[i] = i;
	q = req_of(1, t, 13, 13);
	s = replay_begin(r, 0, &q, 0, &hit);
	pid = replay_prompt_id(s);
	replay_send(r, s, 13, NULL, 0);
	replay_end(r, s, 0);
	/* The shard reports token 6 lost (it dropped 6.. from its range). */
	{
		struct proto_delete d = {pid, 100, 6, 11, 0};

		cr_assert_eq(kvstore_delete(replay_kv(r, 0), &d), 0);
	}
	ndels = 0;
	prefixcache_token_lost(replay_pc(r), 0, 0, 0, pid, 6);
	cr_assert_eq(prefixcache_find(replay_pc(r), 0, 0, 1, t, 4, 1, &e), 0);
	cr_assert_eq(prefixcache_find(replay_pc(r), 0, 0, 1, t, 8, 1, &e), -ENOENT);
	cr_assert_eq(prefixcache_stored(replay_pc(r), 0, 0), 4);
	/* Version 2: one DELETE of 4..11 for every shard: shard 0, which holds
	 * 4..5 only, removes those (a DELETE ends wherever the prompt ends). */
	cr_assert_eq(ndels, 1);
	cr_assert_eq(del_to[0].only, -1);
	cr_assert_eq(del_to[0].except, -1);
	cr_assert_eq(dels[0].start_token_idx, 4);
	cr_assert_eq(dels[0].end_token_idx, 11);
	cr_assert_eq(replay_request(r, 0, &q, NULL, 0, 2), 4);
	assert_clean(r);
	replay_free(r);
}

/*
 * Two shards. Shard 1 lost token 6 of prompt A (0..11); prompt B continues A
 * (12..19). Version 2: every shard gets A's DELETE from 4 and B's whole
 * range; shard 1, which holds 4..5 of A only, removes those, and the DELETE
 * from 4 (at or before its loss) clears its mark (PROTOCOL.md section 4).
 */
Test(events, a_loss_on_one_shard_gives_every_shard_the_same_delete)
{
	struct prefixcache *pc;
	struct prefixcache_params p = {.num_models = 1, .column = 4};
	struct prefixcache_sink sink = {.del = obs_del};
	struct prefixcache_request q;
	struct prefixcache_hit hit;
	struct prefixcache_seq *s;
	uint32_t t[20], i, k;
	uint64_t a, b;
	int seen_a = 0, seen_b = 0;

	p.model[0].num_caches = 1;
	p.model[0].cache[0] = (struct prefixcache_cache){0, PREFIXCACHE_FULL, 0, 0, 1000};
	pc = prefixcache_create(&p, &sink);
	for (i = 0; i < 20; i++)
		t[i] = 100 + i;
	q = req_of(1, t, 13, 13);
	plain_request(pc, 0, &q, 13, 0, &hit);
	a = hit.prompt_id;
	q = req_of(1, t, 20, 20);
	s = prefixcache_begin(pc, 0, &q, 1, &hit);
	cr_assert_eq(hit.hit_tokens, 12);
	b = hit.prompt_id;
	cr_assert_neq(a, b);
	for (i = 12; i < 20; i++)
		prefixcache_token(pc, s, t[i], 1);
	prefixcache_end(pc, s, 1);
	cr_assert_eq(prefixcache_stored(pc, 0, 0), 12 + 4 + 4, "A 0..11, B 12..19");
	ndels = 0;
	prefixcache_token_lost(pc, 0, 1, 0, a, 6);
	for (k = 0; k < ndels; k++) {
		cr_assert_eq(del_to[k].only, -1, "every shard");
		cr_assert_eq(del_to[k].except, -1);
		if (dels[k].prompt_id == a) {
			cr_assert_eq(dels[k].start_token_idx, 4, "from the column holding 6");
			cr_assert_eq(dels[k].end_token_idx, 11);
			seen_a++;
		} else {
			cr_assert_eq(dels[k].prompt_id, b);
			cr_assert_eq(dels[k].start_token_idx, 12);
			seen_b++;
		}
	}
	cr_assert_eq(seen_a, 1);
	cr_assert_eq(seen_b, 1);
	cr_assert_eq(prefixcache_stored(pc, 0, 0), 4);
	prefixcache_free(pc);
}

/*
 * What a loss costs the cache (the summary's "what they cost the cache"):
 * the tokens from the column holding the lost token to its prompt's end,
 * and the descendants, counted once however many shards report the prompt;
 * a live sequence cut by a loss stops caching, and is counted.
 */
Test(events, what_a_loss_costs_is_counted_once_per_prompt)
{
	struct prefixcache *pc;
	struct prefixcache_params p = {.num_models = 1, .column = 4};
	struct prefixcache_request q;
	struct prefixcache_hit hit;
	struct prefixcache_stats st;
	struct prefixcache_seq *s;
	uint32_t t[20], u[10], i;
	uint64_t a, c;

	p.model[0].num_caches = 1;
	p.model[0].cache[0] = (struct prefixcache_cache){0, PREFIXCACHE_FULL, 0, 0, 1000};
	pc = prefixcache_create(&p, NULL);
	for (i = 0; i < 20; i++)
		t[i] = 100 + i;
	q = req_of(1, t, 13, 13);
	plain_request(pc, 0, &q, 13, 0, &hit);
	a = hit.prompt_id;
	q = req_of(1, t, 20, 20);
	s = prefixcache_begin(pc, 0, &q, 1, &hit);
	for (i = 12; i < 20; i++)
		prefixcache_token(pc, s, t[i], 1);
	prefixcache_end(pc, s, 1);
	/* Shard 1 lost A's token 6, then shard 0 its token 9: 4..11 of A and
	 * B's 12..19 go once. */
	prefixcache_token_lost(pc, 0, 1, 0, a, 6);
	prefixcache_token_lost(pc, 0, 0, 0, a, 9);
	prefixcache_stats(pc, &st);
	cr_assert_eq(st.loss_dropped_tokens, 8 + 8, "A 4..11 and B 12..19, once: %lu",
		     (unsigned long)st.loss_dropped_tokens);
	cr_assert_eq(st.loss_stopped, 0, "no sequence was live");
	/* A live sequence C (10 tokens sent) loses its token 5: 4..9 go, and it
	 * stops caching. */
	for (i = 0; i < 10; i++)
		u[i] = 500 + i;
	q = req_of(1, u, 10, 10);
	s = prefixcache_begin(pc, 0, &q, 2, &hit);
	c = hit.prompt_id;
	for (i = 0; i < 10; i++)
		prefixcache_token(pc, s, u[i], 2);
	prefixcache_token_lost(pc, 0, 0, 0, c, 5);
	prefixcache_stats(pc, &st);
	cr_assert_eq(st.loss_dropped_tokens, 16 + 6, "C 4..9: %lu", (unsigned long)st.loss_dropped_tokens);
	cr_assert_eq(st.loss_stopped, 1, "C stopped caching at the cut");
	prefixcache_end(pc, s, 3);
	prefixcache_free(pc);
}

Test(events, a_shard_restart_drops_every_prefix_of_that_model)
{
	struct prefixcache_params p = {.num_models = 2, .column = 4};
	struct prefixcache *pc;
	struct prefixcache_request q;
	struct prefixcache_hit hit;
	struct prefixcache_seq *s;
	uint32_t t[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9}, m;

	for (m = 0; m < 2; m++) {
		p.model[m].num_caches = 1;
		p.model[m].cache[0] = (struct prefixcache_cache){0, PREFIXCACHE_FULL, 0, 0, 100};
	}
	pc = prefixcache_create(&p, NULL);
	q = req_of(1, t, 9, 9);
	for (m = 0; m < 2; m++) {
		plain_request(pc, (uint16_t)m, &q, 9, 0, &hit);
	}
	prefixcache_shard_restart(pc, 1);
	cr_assert_eq(prefixcache_stored(pc, 1, 0), 0);
	cr_assert_eq(prefixcache_stored(pc, 0, 0), 8);
	s = prefixcache_begin(pc, 1, &q, 1, &hit);
	cr_assert_eq(hit.hit_tokens, 0, "the draft lost its cache");
	prefixcache_end(pc, s, 1);
	s = prefixcache_begin(pc, 0, &q, 1, &hit);
	cr_assert_eq(hit.hit_tokens, 8, "the target kept its own");
	prefixcache_end(pc, s, 1);
	prefixcache_free(pc);
}

/* ---- Models and speculation ---------------------------------------------------------------- */

Test(models, draft_and_target_have_their_own_maps_and_capacity)
{
	struct replay_params p = params_full(4, 1000, 8);
	struct replay *r;
	struct prefixcache_request q;
	uint32_t t[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};

	p.pc.num_models = 2;
	p.pc.model[1] = p.pc.model[0];
	p.pc.model[1].cache[0].capacity_tokens = 4;
	r = replay_create(&p);
	q = req_of(1, t, 9, 9);
	replay_request(r, 0, &q, NULL, 0, 0);
	cr_assert_eq(replay_request(r, 1, &q, NULL, 0, 1), 0, "the draft has not seen it");
	cr_assert_eq(replay_request(r, 1, &q, NULL, 0, 2), 4, "its capacity holds one column");
	cr_assert_eq(replay_request(r, 0, &q, NULL, 0, 3), 8);
	assert_clean(r);
	replay_free(r);
}

Test(models, the_refill_estimate_is_latency_plus_bytes_over_bandwidth)
{
	struct prefixcache_params p = {.num_models = 2, .column = 4};
	uint32_t t[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
	struct prefixcache_request q = req_of(1, t, 9, 9);
	struct prefixcache_hit hit;
	struct prefixcache *pc;
	uint64_t lat;
	double bpns;

	p.model[0].num_caches = 1;
	p.model[0].cache[0] = (struct prefixcache_cache){0, PREFIXCACHE_FULL, 0, 0, 1000};
	p.model[0].refill_latency_ns = 20000;
	p.model[0].refill_bytes_per_ns = 1.25; /* 10 Gb/s */
	p.model[0].refill_bytes_per_token = 1000;
	p.model[1] = p.model[0];
	pc = prefixcache_create(&p, NULL);
	cr_assert_not_null(pc);
	plain_request(pc, 0, &q, 9, 0, &hit);
	cr_assert_eq(hit.hit_tokens, 0);
	cr_assert_eq(hit.estimate_ns, 0, "a miss refills nothing");
	/* 8 tokens hit: 8,000 bytes at 1.25 per ns after 20 us. */
	plain_request(pc, 0, &q, 9, 1, &hit);
	cr_assert_eq(hit.hit_tokens, 8);
	cr_assert_eq(hit.estimate_bytes, 8000);
	cr_assert_eq(hit.estimate_ns, 20000 + 6400);
	/* A model learned at run time: 1 ms plus 0.5 bytes per ns; model 1 keeps its own. */
	cr_assert_eq(prefixcache_set_refill_model(pc, 0, 1000000, 0.5), 0);
	plain_request(pc, 0, &q, 9, 2, &hit);
	cr_assert_eq(hit.estimate_ns, 1000000 + 16000);
	plain_request(pc, 1, &q, 9, 3, &hit);
	plain_request(pc, 1, &q, 9, 4, &hit);
	cr_assert_eq(hit.estimate_ns, 20000 + 6400);
	/* No bandwidth term: a fixed time. */
	cr_assert_eq(prefixcache_set_refill_model(pc, 0, 7000, 0), 0);
	plain_request(pc, 0, &q, 9, 5, &hit);
	cr_assert_eq(hit.estimate_ns, 7000);
	cr_assert_eq(hit.estimate_bytes, 8000);
	cr_assert_eq(prefixcache_set_refill_model(pc, 2, 0, 1), -EINVAL, "no model 2");
	cr_assert_eq(prefixcache_set_refill_model(pc, 0, 0, -1), -EINVAL);
	cr_assert_eq(prefixcache_set_refill_model(pc, 0, 0, 0.0 / 0.0), -EINVAL);
	plain_request(pc, 0, &q, 9, 6, &hit);
	cr_assert_eq(hit.estimate_ns, 7000, "a refused model changes nothing");
	/* What each model estimates with now: model 0 as last set, model 1 as configured. */
	cr_assert_eq(prefixcache_refill_model(pc, 0, &lat, &bpns), 0);
	cr_assert(lat == 7000 && bpns == 0);
	cr_assert_eq(prefixcache_refill_model(pc, 1, &lat, &bpns), 0);
	cr_assert(lat == 20000 && bpns == 1.25);
	cr_assert_eq(prefixcache_refill_model(pc, 2, &lat, &bpns), -EINVAL, "no model 2");
	prefixcache_free(pc);
}

/*
 * The one-cache model the adaptive rule's tests work by hand: columns of
 * 4, one full cache of 1,000 tokens, a refill line of @p latency_ns +
 * @p bytes_per_token per token at @p bytes_per_ns, computing at
 * @p tokens_per_ns.
 */
static struct prefixcache_params
rule_params(uint64_t latency_ns, double bytes_per_ns, uint32_t bytes_per_token, double tokens_per_ns)
{
	struct prefixcache_params p = {.num_models = 1, .column = 4};

	p.model[0].num_caches = 1;
	p.model[0].cache[0] = (struct prefixcache_cache){0, PREFIXCACHE_FULL, 0, 0, 1000};
	p.model[0].refill_latency_ns = latency_ns;
	p.model[0].refill_bytes_per_ns = bytes_per_ns;
	p.model[0].refill_bytes_per_token = bytes_per_token;
	p.model[0].recompute_tokens_per_ns = tokens_per_ns;
	return p;
}

/*
 * The adaptive rule (prefixcache.h, recompute_tokens_per_ns), worked by
 * hand: 8 tokens hit (a prompt of 9, columns of 4, the last never
 * replayed); refilling them takes 20 us + 8,000 bytes at 1.25 per ns =
 * 26.4 us; computing them at 1e-3 tokens per ns (a million a second), 8 us.
 * The hit is not taken: no tokens, no REFILL, counted in
 * recompute_faster_tokens, each time it is looked up; once the line is 1 us
 * (learned, prefixcache_set_refill_model) it is taken, counted no more.
 * Without a rate (0) the slow line's hit is taken. The prompt computed
 * again is not stored twice.
 * Catches: the rule dropped, the comparison turned (> for <), the count
 * not kept or kept when the hit is taken, a REFILL sent (or a refill id
 * given) for a hit not taken, the configured line used after a learned
 * one, a rate of 0 taken for "computing is instant" (every hit refused).
 */
Test(models, a_dram_hit_slower_to_refill_than_to_compute_is_not_taken)
{
	struct prefixcache_params p = rule_params(20000, 1.25, 1000, 1e-3);
	uint32_t t[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
	struct prefixcache_request q = req_of(1, t, 9, 9);
	struct prefixcache_stats ps;
	struct prefixcache_hit hit;
	struct prefixcache *pc;
	uint64_t stored;

	pc = prefixcache_create(&p, NULL);
	cr_assert_not_null(pc);
	plain_request(pc, 0, &q, 9, 0, &hit);
	cr_assert_eq(hit.hit_tokens, 0);
	stored = prefixcache_stored(pc, 0, 0);
	cr_assert_eq(stored, 8, "the prompt's two whole columns are in DRAM: %lu", (unsigned long)stored);
	prefixcache_stats(pc, &ps);
	cr_assert_eq(ps.recompute_faster_tokens, 0, "a miss is not a hit computed");
	/* 26.4 us to refill, 8 us to compute: computed. */
	plain_request(pc, 0, &q, 9, 1, &hit);
	cr_assert_eq(hit.hit_tokens, 0, "a hit taken though computing it was sooner");
	cr_assert_eq(hit.num_refills, 0);
	cr_assert_eq(hit.refill_id, 0);
	cr_assert_eq(hit.estimate_ns, 0);
	cr_assert_eq(hit.lookup_tokens, 8);
	prefixcache_stats(pc, &ps);
	cr_assert_eq(ps.recompute_faster_tokens, 8);
	cr_assert_eq(ps.hit_tokens, 0);
	cr_assert_eq(ps.refills, 0);
	cr_assert_eq(prefixcache_stored(pc, 0, 0), stored, "computed again, stored once");
	/* Computed, not evicted again: its columns are DRAM's already (a copy
	 * would be sent to every shard and deleted at its end). */
	cr_assert_eq(ps.dup_columns, 0, "the cached prefix evicted a second time");
	cr_assert_eq(ps.evicted_tokens, 10, "9 by the first request, then its last token only (not past the cached 8): %lu",
		     (unsigned long)ps.evicted_tokens);
	plain_request(pc, 0, &q, 9, 2, &hit);
	cr_assert_eq(hit.hit_tokens, 0);
	prefixcache_stats(pc, &ps);
	cr_assert_eq(ps.recompute_faster_tokens, 16, "counted at each lookup");
	cr_assert_eq(prefixcache_stored(pc, 0, 0), stored);
	/* A line of 1 us (learned): refilling is sooner, the hit is taken. */
	cr_assert_eq(prefixcache_set_refill_model(pc, 0, 1000, 0), 0);
	plain_request(pc, 0, &q, 9, 3, &hit);
	cr_assert_eq(hit.hit_tokens, 8, "the learned line is the rule's");
	cr_assert_eq(hit.num_refills, 1);
	cr_assert_neq(hit.refill_id, 0);
	cr_assert_eq(hit.estimate_ns, 1000);
	prefixcache_stats(pc, &ps);
	cr_assert_eq(ps.recompute_faster_tokens, 16, "a hit taken is not counted");
	cr_assert_eq(ps.hit_tokens, 8);
	prefixcache_free(pc);
	/* No rate: nothing is known to beat, the slow line's hit is taken. */
	p.model[0].recompute_tokens_per_ns = 0;
	pc = prefixcache_create(&p, NULL);
	cr_assert_not_null(pc);
	plain_request(pc, 0, &q, 9, 0, &hit);
	plain_request(pc, 0, &q, 9, 1, &hit);
	cr_assert_eq(hit.hit_tokens, 8);
	cr_assert_eq(hit.num_refills, 1);
	cr_assert_eq(hit.estimate_ns, 26400);
	prefixcache_stats(pc, &ps);
	cr_assert_eq(ps.recompute_faster_tokens, 0);
	prefixcache_free(pc);
	/* A slow wafer, 1e-4 tokens per ns (80 us for 8): the same line is taken. */
	p.model[0].recompute_tokens_per_ns = 1e-4;
	pc = prefixcache_create(&p, NULL);
	cr_assert_not_null(pc);
	plain_request(pc, 0, &q, 9, 0, &hit);
	plain_request(pc, 0, &q, 9, 1, &hit);
	cr_assert_eq(hit.hit_tokens, 8);
	prefixcache_stats(pc, &ps);
	cr_assert_eq(ps.recompute_faster_tokens, 0);
	prefixcache_free(pc);
}

/*
 * The rule is strict: a refill only where it is sooner. With every value
 * exact in binary: 8 tokens at 1/1024 tokens per ns take 8,192 ns to
 * compute; a refill of 4,096 ns + 8 x 512 bytes at 1 byte per ns takes
 * 8,192 too: not taken. A nanosecond less (4,095 + 4,096): taken.
 * Catches: <= for < (the tie taken), the bandwidth term left out of the
 * rule's estimate (4,096 < 8,192 would take the tie's hit), the latency
 * left out.
 */
Test(models, a_refill_no_sooner_than_computing_is_not_taken_one_ns_sooner_is)
{
	struct prefixcache_params p = rule_params(4096, 1.0, 512, 1.0 / 1024);
	uint32_t t[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
	struct prefixcache_request q = req_of(1, t, 9, 9);
	struct prefixcache_stats ps;
	struct prefixcache_hit hit;
	struct prefixcache *pc;

	pc = prefixcache_create(&p, NULL);
	cr_assert_not_null(pc);
	plain_request(pc, 0, &q, 9, 0, &hit);
	plain_request(pc, 0, &q, 9, 1, &hit);
	cr_assert_eq(hit.hit_tokens, 0, "a refill of 8,192 ns taken against 8,192 ns of computing");
	cr_assert_eq(hit.num_refills, 0);
	prefixcache_stats(pc, &ps);
	cr_assert_eq(ps.recompute_faster_tokens, 8);
	cr_assert_eq(prefixcache_set_refill_model(pc, 0, 4095, 1.0), 0);
	plain_request(pc, 0, &q, 9, 2, &hit);
	cr_assert_eq(hit.hit_tokens, 8, "8,191 ns beats 8,192");
	cr_assert_eq(hit.num_refills, 1);
	cr_assert_eq(hit.estimate_ns, 8191, "the rule's estimate is the hit's");
	prefixcache_stats(pc, &ps);
	cr_assert_eq(ps.recompute_faster_tokens, 8);
	prefixcache_free(pc);
}

/*
 * Through the replay system (a real store, every refilled byte checked):
 * a hit computed rather than refilled, then, the line learned faster, the
 * same prefix and a longer prompt over it refilled: every byte right, the
 * shard holding what the driver accounts for.
 * Catches: a hit not taken that still pins, reserves or evicts over the
 * columns it did not take (wrong bytes, or tokens unaccounted for).
 */
Test(models, a_hit_computed_rather_than_refilled_leaves_every_byte_right)
{
	struct replay_params p = params_full(4, 1000, 8);
	struct replay *r;
	struct prefixcache_request q;
	struct prefixcache_stats ps;
	uint32_t t[21], i;

	for (i = 0; i < 21; i++)
		t[i] = 100 + i;
	p.pc.model[0].refill_latency_ns = 1000000; /* 1 ms; 8 tokens compute in 8 us */
	p.pc.model[0].recompute_tokens_per_ns = 1e-3;
	r = replay_create(&p);
	q = req_of(1, t, 9, 9);
	cr_assert_eq(replay_request(r, 0, &q, NULL, 0, SEC), 0);
	cr_assert_eq(replay_request(r, 0, &q, NULL, 0, 2 * SEC), 0, "1 ms against 8 us: computed");
	prefixcache_stats(replay_pc(r), &ps);
	cr_assert_eq(ps.recompute_faster_tokens, 8);
	assert_clean(r);
	cr_assert_eq(prefixcache_set_refill_model(replay_pc(r), 0, 100, 0), 0);
	cr_assert_eq(replay_request(r, 0, &q, NULL, 0, 3 * SEC), 8);
	q = req_of(1, t, 21, 21);
	cr_assert_eq(replay_request(r, 0, &q, NULL, 0, 4 * SEC), 8);
	cr_assert_eq(replay_request(r, 0, &q, NULL, 0, 5 * SEC), 20);
	assert_clean(r);
	replay_free(r);
}

Test(models, several_caches_with_the_same_rule_share_one_map)
{
	struct replay_params p = params_full(4, 1000, 8);
	struct replay *r;
	struct prefixcache_request q;
	uint32_t t[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};

	p.pc.model[0].num_caches = 3;
	p.pc.model[0].cache[1] = p.pc.model[0].cache[0];
	p.pc.model[0].cache[1].cache_id = 1;
	p.pc.model[0].cache[2] = p.pc.model[0].cache[0];
	p.pc.model[0].cache[2].cache_id = 2;
	r = replay_create(&p);
	q = req_of(1, t, 9, 9);
	replay_request(r, 0, &q, NULL, 0, 0);
	cr_assert_eq(replay_request(r, 0, &q, NULL, 0, 1), 8);
	cr_assert_eq(nrefills, 3, "one refill request per cache");
	assert_clean(r); /* each cache's bytes checked against its own reference */
	replay_free(r);
}

Test(models, speculative_tokens_enter_the_map_only_when_verified)
{
	struct prefixcache_request q;
	struct prefixcache_hit hit;
	struct prefixcache_entry_info e;
	uint32_t t[4] = {1, 2, 3, 4}, spec[6] = {5, 6, 7, 8, 9, 10}, fixed[8] = {1, 2, 3, 4, 5, 6, 70, 80};

	/* A plain driver: 4 verified, 4 speculative (5 6 7 8), 2 accepted, then 70 80. */
	{
		struct prefixcache *d = plain_driver(100, 1);
		struct prefixcache_seq *x;

		q = req_of(1, t, 4, 100);
		x = prefixcache_begin(d, 0, &q, 0, &hit);
		for (int i = 0; i < 4; i++)
			prefixcache_token(d, x, t[i], 0);
		cr_assert_eq(prefixcache_speculate(d, x, spec, 4, 0), 4);
		cr_assert_eq(prefixcache_find(d, 0, 0, 1, (uint32_t[]){1, 2, 3, 4, 5, 6, 7, 8}, 8, 0, &e),
			     -ENOENT, "speculative column entered the map");
		cr_assert_eq(prefixcache_verify(d, x, 2, 0), 0);
		prefixcache_token(d, x, 70, 0); /* overwrites position 6 */
		prefixcache_token(d, x, 80, 0); /* overwrites position 7 */
		cr_assert_eq(prefixcache_find(d, 0, 0, 1, fixed, 8, 0, &e), 0);
		cr_assert_eq(e.evict_count, 10, "the corrected tokens' batches count");
		cr_assert_eq(prefixcache_stored(d, 0, 0), 8, "overwrites take no room");
		prefixcache_end(d, x, 0);
		prefixcache_free(d);
	}
}

Test(events, an_eviction_the_shard_refused_is_not_counted_as_cached)
{
	struct prefixcache *pc = plain_driver(100, 0);
	struct prefixcache_request q;
	struct prefixcache_hit hit;
	struct prefixcache_entry_info e;
	struct prefixcache_stats st;
	uint32_t t[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};

	q = req_of(1, t, 9, 9);
	plain_request(pc, 0, &q, 9, 0, &hit);
	/* The shard answered NO_SPACE for token 5 after its timeout. */
	prefixcache_error(pc, 0, 0, 0, hit.prompt_id, 5, PROTO_E_NO_SPACE);
	cr_assert_eq(prefixcache_find(pc, 0, 0, 1, t, 4, 0, &e), 0);
	cr_assert_eq(prefixcache_find(pc, 0, 0, 1, t, 8, 0, &e), -ENOENT);
	cr_assert_eq(prefixcache_stored(pc, 0, 0), 4);
	/* A refused DELETE changes nothing here. */
	prefixcache_error(pc, 0, 0, 0, hit.prompt_id, 0, PROTO_E_RANGE);
	cr_assert_eq(prefixcache_find(pc, 0, 0, 1, t, 4, 0, &e), 0);
	prefixcache_stats(pc, &st);
	cr_assert_eq(st.shard_errors, 2);
	prefixcache_free(pc);
}

Test(events, a_shard_reporting_less_capacity_lowers_it)
{
	struct replay_params p = params_full(4, 100, 8);
	struct replay *r = replay_create(&p);
	struct prefixcache_request q;
	uint32_t t[41], i;

	for (i = 0; i < 41; i++)
		t[i] = i;
	q = req_of(1, t, 41, 41);
	replay_request(r, 0, &q, NULL, 0, 0);
	cr_assert_eq(prefixcache_stored(replay_pc(r), 0, 0), 40);
	cr_assert_eq(prefixcache_status(replay_pc(r), 0, 0, 500), 100, "more is not taken");
	cr_assert_eq(prefixcache_status(replay_pc(r), 0, 0, 16), 16);
	cr_assert_leq(prefixcache_stored(replay_pc(r), 0, 0), 16);
	cr_assert_eq(replay_request(r, 0, &q, NULL, 0, 1), 16, "the shallow columns stayed");
	assert_clean(r);
	replay_free(r);
}

/* ---- Ordering the shard can live with ------------------------------------------- */

static uint64_t order_batches_sent, order_refill_ec, order_refill_seen_batches;

static void
order_evict(void *arg, uint16_t model, uint64_t batch_no, uint16_t nc, uint16_t g,
	    const struct proto_evict_entry *e)
{
	(void)arg;
	(void)model;
	(void)nc;
	(void)g;
	(void)e;
	order_batches_sent = batch_no;
}

static void
order_refill(void *arg, uint16_t model, const struct proto_refill_req *r,
	     const struct proto_refill_chunk *c)
{
	(void)arg;
	(void)model;
	(void)c;
	order_refill_ec = r->evict_count;
	order_refill_seen_batches = order_batches_sent;
}

/*
 * A shard runs REFILLs and DELETEs in one ordered queue, each waiting for
 * its evict_count. A REFILL that waited for the batch still being filled
 * would hold back the DELETEs that make room for that batch: the shard would
 * stall until NO_SPACE. So the batch goes out before such a REFILL.
 */
Test(ordering, a_refill_never_waits_for_a_batch_not_yet_sent)
{
	struct prefixcache_params p = {.num_models = 1, .column = 4};
	struct prefixcache_sink sink = {.evict = order_evict, .refill = order_refill};
	uint32_t t[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, i;
	struct prefixcache_request q = req_of(7, t, 10, 10);
	struct prefixcache_hit hit;
	struct prefixcache_seq *a, *b;
	struct prefixcache *pc;

	p.model[0].num_caches = 1;
	p.model[0].cache[0] = (struct prefixcache_cache){0, PREFIXCACHE_FULL, 0, 0, 1000};
	p.model[0].max_batch_tokens = 64; /* nothing flushes by itself */
	pc = prefixcache_create(&p, &sink);
	cr_assert_not_null(pc);
	order_batches_sent = order_refill_ec = order_refill_seen_batches = 0;
	a = prefixcache_begin(pc, 0, &q, 0, &hit);
	cr_assert_not_null(a);
	for (i = 0; i < 10; i++)
		prefixcache_token(pc, a, t[i], 1);
	cr_assert_eq(order_batches_sent, 0, "the batch is still open");
	/* Another request finds the two columns while their batch is open. */
	b = prefixcache_begin(pc, 0, &q, 2, &hit);
	cr_assert_not_null(b);
	cr_assert_eq(hit.hit_tokens, 8);
	cr_assert_eq(order_refill_ec, 1);
	cr_assert_geq(order_refill_seen_batches, order_refill_ec,
		      "REFILL waits for batch %" PRIu64 " but only %" PRIu64 " went out before it",
		      order_refill_ec, order_refill_seen_batches);
	prefixcache_end(pc, b, 3);
	prefixcache_end(pc, a, 3);
	prefixcache_free(pc);
}

/* ---- Deletion policies -------------------------------------------------------- */

/*
 * Prompt @k: 9 tokens of its own, two columns of 4 of which get cached (the
 * ninth is never replayed, so its partial column is deleted at the end).
 * A shard of 25 tokens holds three prompts and one partial column.
 */
#define POL_CAP 25

static struct replay *
policy_replay(enum prefixcache_policy pol, uint64_t capacity)
{
	struct replay_params p = params_full(4, capacity, 4);

	p.pc.policy = pol;
	return replay_create(&p);
}

static void
prompt_of(uint32_t k, uint32_t *t)
{
	uint32_t i;

	for (i = 0; i < 9; i++)
		t[i] = k * 100 + i;
}

/* Prompt @k at @sec, answered with @ngen generated tokens; returns its hit. */
static uint32_t
send_request(struct replay *r, uint32_t k, uint32_t priority_tokens, uint32_t ngen, uint64_t sec)
{
	uint32_t t[9];
	struct prefixcache_request q;

	prompt_of(k, t);
	q = req_of(1, t, 9, 9);
	q.priority_tokens = priority_tokens;
	return replay_request(r, 0, &q, NULL, ngen, sec * SEC);
}

static uint32_t
send_prompt(struct replay *r, uint32_t k, uint32_t priority_tokens, uint64_t sec)
{
	return send_request(r, k, priority_tokens, 0, sec);
}

/* Prompts 1 to @n, each sent twice (at 2k and 2k + 1 s), the second a whole hit. */
static void
send_reused_prompts(struct replay *r, uint32_t n)
{
	uint32_t k;

	for (k = 1; k <= n; k++) {
		send_prompt(r, k, 0, 2 * k);
		cr_assert_eq(send_prompt(r, k, 0, 2 * k + 1), 8, "prompt %u", k);
	}
}

/* Are both columns of prompt @k cached (touching nothing)? */
static bool
cached(struct replay *r, uint32_t k)
{
	uint32_t t[9];
	struct prefixcache_entry_info e;

	prompt_of(k, t);
	return prefixcache_find(replay_pc(r), 0, 0, 1, t, 8, 100 * SEC, &e) == 0;
}

Test(policy, lru_frees_the_least_recent_and_slru_keeps_what_was_reused)
{
	enum prefixcache_policy pol[2] = {PREFIXCACHE_LRU, PREFIXCACHE_SLRU};
	unsigned int k;

	for (k = 0; k < 2; k++) {
		struct replay *r = policy_replay(pol[k], POL_CAP);
		bool slru = pol[k] == PREFIXCACHE_SLRU;

		send_prompt(r, 1, 0, 1);
		cr_assert_eq(send_prompt(r, 1, 0, 2), 8);
		send_prompt(r, 2, 0, 3);
		send_prompt(r, 3, 0, 4);
		send_prompt(r, 4, 0, 5); /* full: two columns must go */
		/* LRU: prompt 1, used last at 2 s. SLRU: prompt 2, on probation (seen once). */
		cr_assert_eq(cached(r, 1), slru, "%s: prompt 1", slru ? "slru" : "lru");
		cr_assert_eq(cached(r, 2), !slru, "%s: prompt 2", slru ? "slru" : "lru");
		cr_assert(cached(r, 3) && cached(r, 4));
		cr_assert_leq(prefixcache_stored(replay_pc(r), 0, 0), POL_CAP);
		assert_clean(r);
		replay_free(r);
	}
}

Test(policy, lfu_frees_the_least_often_used_even_if_recent)
{
	struct replay *r = policy_replay(PREFIXCACHE_LFU, POL_CAP);

	send_prompt(r, 1, 0, 1);
	send_prompt(r, 1, 0, 2);
	send_prompt(r, 1, 0, 3); /* two hits */
	send_prompt(r, 2, 0, 4);
	send_prompt(r, 2, 0, 5); /* one hit */
	send_prompt(r, 3, 0, 6); /* none, and the most recent */
	send_prompt(r, 4, 0, 7);
	cr_assert(cached(r, 1) && cached(r, 2) && cached(r, 4));
	cr_assert_not(cached(r, 3));
	assert_clean(r);
	replay_free(r);
}

Test(policy, priority_hint_columns_go_last)
{
	struct replay *r = policy_replay(PREFIXCACHE_PRIORITY, POL_CAP);

	send_prompt(r, 1, 8, 1); /* "the first 8 tokens will be reused often" */
	send_prompt(r, 2, 0, 2);
	send_prompt(r, 3, 0, 3);
	send_prompt(r, 4, 0, 4);
	cr_assert(cached(r, 1), "the oldest, but hinted");
	cr_assert_not(cached(r, 2));
	cr_assert(cached(r, 3) && cached(r, 4));
	assert_clean(r);
	replay_free(r);
}

Test(policy, slru_protects_a_column_seen_before_it_was_stored)
{
	enum prefixcache_policy pol[2] = {PREFIXCACHE_LRU, PREFIXCACHE_SLRU};
	unsigned int k;

	for (k = 0; k < 2; k++) {
		struct replay *r = policy_replay(pol[k], POL_CAP);
		bool slru = pol[k] == PREFIXCACHE_SLRU;
		struct prefixcache_stats st;

		send_prompt(r, 1, 0, 1);
		send_prompt(r, 2, 0, 2);
		send_prompt(r, 3, 0, 3);
		send_prompt(r, 4, 0, 4); /* prompt 1 goes */
		cr_assert_not(cached(r, 1));
		cr_assert_eq(send_prompt(r, 1, 0, 5), 0, "a miss: stored again");
		prefixcache_stats(replay_pc(r), &st);
		cr_assert_eq(st.protected_columns, slru ? 2 : 0, "never hit, but seen before");
		send_prompt(r, 5, 0, 6);
		send_prompt(r, 6, 0, 7);
		send_prompt(r, 7, 0, 8); /* LRU: prompt 1 is the least recent by now */
		cr_assert_eq(cached(r, 1), slru, "%s", slru ? "slru" : "lru");
		cr_assert_leq(prefixcache_stored(replay_pc(r), 0, 0), POL_CAP);
		assert_clean(r);
		replay_free(r);
	}
}

Test(policy, slru_protects_what_a_conversation_adds_but_not_a_branch)
{
	struct replay *r = policy_replay(PREFIXCACHE_SLRU, 1000);
	struct prefixcache_stats st;
	struct prefixcache_request q;
	uint32_t t[17], i;

	send_prompt(r, 1, 0, 1);
	/* The next turn: all of prompt 1's columns, then 9 new tokens. */
	prompt_of(1, t);
	for (i = 8; i < 17; i++)
		t[i] = 5000 + i;
	q = req_of(1, t, 17, 17);
	cr_assert_eq(replay_request(r, 0, &q, NULL, 0, 2 * SEC), 8);
	prefixcache_stats(replay_pc(r), &st);
	cr_assert_eq(st.protected_columns, 4, "2 hit, 2 new of a conversation: %" PRIu64,
		     st.protected_columns);
	/* A branch off prompt 1's first column is not a conversation going on. */
	for (i = 4; i < 17; i++)
		t[i] = 7000 + i;
	q = req_of(1, t, 17, 17);
	cr_assert_eq(replay_request(r, 0, &q, NULL, 0, 3 * SEC), 4);
	prefixcache_stats(replay_pc(r), &st);
	cr_assert_eq(st.protected_columns, 4, "%" PRIu64, st.protected_columns);
	assert_clean(r);
	replay_free(r);
}

Test(policy, slru_sends_protected_columns_over_their_share_back_to_probation)
{
	struct replay *r = policy_replay(PREFIXCACHE_SLRU, POL_CAP);
	struct prefixcache_stats st;

	send_reused_prompts(r, 3); /* 24 protected tokens, over 90% of 25 */
	send_prompt(r, 4, 0, 10);
	prefixcache_stats(replay_pc(r), &st);
	cr_assert_gt(st.demotions, 0);
	cr_assert_not(cached(r, 1), "the least recent protected prompt went");
	cr_assert(cached(r, 2) && cached(r, 3) && cached(r, 4));
	cr_assert_leq(prefixcache_stored(replay_pc(r), 0, 0), POL_CAP);
	assert_clean(r);
	replay_free(r);
}

Test(policy, admit_stores_a_new_column_only_in_the_room_of_new_ones)
{
	enum prefixcache_policy pol[2] = {PREFIXCACHE_LRU, PREFIXCACHE_ADMIT};
	unsigned int k;

	for (k = 0; k < 2; k++) {
		struct replay *r = policy_replay(pol[k], POL_CAP);
		bool admit = pol[k] == PREFIXCACHE_ADMIT;
		const char *name = admit ? "admit" : "lru";
		struct prefixcache_stats st;

		send_prompt(r, 1, 0, 1);
		cr_assert_eq(send_prompt(r, 1, 0, 2), 8); /* known: hit */
		send_prompt(r, 2, 0, 3);
		send_prompt(r, 3, 0, 4); /* full: 24 of 25 tokens */
		/* A new prompt: LRU frees prompt 1 (used at 2 s); admit frees new prompt 2. */
		send_prompt(r, 4, 0, 5);
		cr_assert_eq(cached(r, 1), admit, "%s: prompt 1", name);
		cr_assert_eq(cached(r, 2), !admit, "%s: prompt 2", name);
		cr_assert(cached(r, 3) && cached(r, 4), "%s", name);
		prefixcache_stats(replay_pc(r), &st);
		cr_assert_eq(st.bypassed, 0, "%s: new columns made the room", name);
		cr_assert_leq(prefixcache_stored(replay_pc(r), 0, 0), POL_CAP);
		assert_clean(r);
		replay_free(r);
	}
}

Test(policy, admit_bypasses_a_new_column_rather_than_free_a_known_one)
{
	struct replay *r = policy_replay(PREFIXCACHE_ADMIT, POL_CAP);
	struct prefixcache_stats st;

	send_reused_prompts(r, 3); /* 24 tokens of known columns */
	/* Full of known columns: a new prompt is not stored. */
	cr_assert_eq(send_prompt(r, 4, 0, 10), 0);
	prefixcache_stats(replay_pc(r), &st);
	cr_assert_eq(st.bypassed, 1);
	cr_assert_not(cached(r, 4));
	cr_assert(cached(r, 1) && cached(r, 2) && cached(r, 3));
	/* Seen once now, it is known: it takes the least recent known prompt's room. */
	cr_assert_eq(send_prompt(r, 4, 0, 11), 0);
	cr_assert(cached(r, 4), "stored on its second sighting");
	cr_assert_not(cached(r, 1));
	cr_assert(cached(r, 2) && cached(r, 3));
	prefixcache_stats(replay_pc(r), &st);
	cr_assert_eq(st.bypassed, 1);
	cr_assert_leq(prefixcache_stored(replay_pc(r), 0, 0), POL_CAP);
	assert_clean(r);
	replay_free(r);
}

static uint32_t
send_answered(struct replay *r, uint32_t k, uint32_t ngen, uint64_t sec)
{
	return send_request(r, k, 0, ngen, sec);
}

Test(policy, followup_frees_first_what_answers_of_a_cold_length_stored)
{
	enum prefixcache_policy pol[2] = {PREFIXCACHE_LRU, PREFIXCACHE_FOLLOWUP};
	unsigned int k;

	for (k = 0; k < 2; k++) {
		struct replay *r = policy_replay(pol[k], POL_CAP);
		bool fu = pol[k] == PREFIXCACHE_FOLLOWUP;
		const char *name = fu ? "followup" : "lru";
		struct prefixcache_stats st;

		/*
		 * Long answers (100 tokens: class 7), never asked again. Stored
		 * 0 of 8, then 0 of 16 tokens reused: from the third on, cold.
		 */
		send_answered(r, 10, 100, 1);
		send_answered(r, 11, 100, 2);
		send_answered(r, 12, 100, 3);
		prefixcache_stats(replay_pc(r), &st);
		cr_assert_eq(st.cold_columns, fu ? 2 : 0, "%s: %" PRIu64, name, st.cold_columns);
		/* A short answer (class 2, unknown: warm). LRU frees prompt 10; followup, cold 12. */
		send_answered(r, 1, 2, 4);
		cr_assert_eq(cached(r, 10), fu, "%s: prompt 10", name);
		cr_assert_eq(cached(r, 12), !fu, "%s: prompt 12", name);
		cr_assert(cached(r, 11) && cached(r, 1), "%s", name);
		cr_assert_leq(prefixcache_stored(replay_pc(r), 0, 0), POL_CAP);
		assert_clean(r);
		replay_free(r);
	}
}

Test(policy, followup_learns_from_sightings_and_a_hit_warms_a_cold_column)
{
	struct replay_params p = params_full(4, POL_CAP, 4);
	struct replay *r;
	struct prefixcache_stats st;

	/* Cold when under half reused: (reused + 1) / (stored + 2) < 50%. */
	p.pc.policy = PREFIXCACHE_FOLLOWUP;
	p.pc.followup_pct = 50;
	r = replay_create(&p);
	send_answered(r, 10, 100, 1); /* class 7: 0 of 8 reused */
	send_answered(r, 1, 2, 2);     /* class 2 */
	cr_assert_eq(send_answered(r, 1, 2, 3), 8); /* class 2: 8 of 8 */
	send_answered(r, 2, 2, 4);		    /* 8 of 16 */
	send_answered(r, 3, 2, 5);		    /* 8 of 24; prompt 10 goes */
	cr_assert_not(cached(r, 10));
	/* Deleted, prompt 10 is stored again: its columns are sighted, 8 of 16. */
	cr_assert_eq(send_answered(r, 10, 100, 6), 0);
	send_answered(r, 11, 100, 7);
	prefixcache_stats(replay_pc(r), &st);
	cr_assert_eq(st.cold_columns, 0, "class 7 was reused half: %" PRIu64, st.cold_columns);
	send_answered(r, 12, 100, 8); /* 8 of 24: cold */
	prefixcache_stats(replay_pc(r), &st);
	cr_assert_eq(st.cold_columns, 2);
	/* A hit warms prompt 12 again. */
	cr_assert_eq(send_answered(r, 12, 100, 9), 8);
	send_answered(r, 4, 2, 10); /* class 2, 8 of 24: cold; prompt 10 (LRU) goes */
	send_answered(r, 5, 2, 11); /* cold too: frees cold prompt 4, not the older 11 */
	prefixcache_stats(replay_pc(r), &st);
	cr_assert_eq(st.cold_columns, 6);
	cr_assert_not(cached(r, 10));
	cr_assert_not(cached(r, 4), "the cold column goes before older warm ones");
	cr_assert(cached(r, 11) && cached(r, 5));
	cr_assert(cached(r, 12), "hit since it went cold: warm");
	cr_assert_leq(prefixcache_stored(replay_pc(r), 0, 0), POL_CAP);
	assert_clean(r);
	replay_free(r);
}

Test(policy, an_unknown_policy_is_refused)
{
	struct prefixcache_params p = {.num_models = 1, .column = 4,
				       .policy = (enum prefixcache_policy)(PREFIXCACHE_FOLLOWUP + 1)};

	p.model[0].num_caches = 1;
	p.model[0].cache[0] = (struct prefixcache_cache){0, PREFIXCACHE_FULL, 0, 0, 100};
	cr_assert_null(prefixcache_create(&p, NULL));
	cr_assert_eq(errno, EINVAL);
	p.policy = PREFIXCACHE_FOLLOWUP;
	prefixcache_free(prefixcache_create(&p, NULL));
}

/* A share over its limit is refused; at the limit, taken. */
Test(policy, slru_probation_and_followup_shares_are_checked)
{
	unsigned int k;

	for (k = 0; k < 2; k++) {
		struct prefixcache_params p = {.num_models = 1, .column = 4};
		struct prefixcache *pc;
		uint8_t *share = k == 0 ? &p.probation_pct : &p.followup_pct;
		uint8_t limit = k == 0 ? 90 : 100;

		p.policy = k == 0 ? PREFIXCACHE_SLRU : PREFIXCACHE_FOLLOWUP;
		p.model[0].num_caches = 1;
		p.model[0].cache[0] = (struct prefixcache_cache){0, PREFIXCACHE_FULL, 0, 0, 100};
		*share = (uint8_t)(limit + 1);
		cr_assert_null(prefixcache_create(&p, NULL), "share %u", limit + 1);
		cr_assert_eq(errno, EINVAL);
		*share = limit;
		pc = prefixcache_create(&p, NULL);
		cr_assert_not_null(pc, "share %u", limit);
		prefixcache_free(pc);
	}
}

/*
 * A hit is worth refilling when its refill ends before computing it would,
 * the wafer's compute first taken by others' prefills for the request's
 * compute_wait_ns: 26.4 us of refill against 8 us of computing is refused
 * with no wait or 18 us of it (26 us), taken with 19 us (27 us).
 * Catches: the wait not counted; counted twice or as the whole time.
 */
Test(models, a_refill_that_ends_within_the_prefill_queue_is_worth_taking)
{
	struct prefixcache_params p = rule_params(20000, 1.25, 1000, 1e-3);
	uint32_t t[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
	struct prefixcache_request q = req_of(1, t, 9, 9);
	const uint64_t waits[3] = {0, 18000, 19000};
	const uint32_t want[3] = {0, 0, 8};
	struct prefixcache_hit hit;
	struct prefixcache *pc;
	unsigned int i;

	pc = prefixcache_create(&p, NULL);
	cr_assert_not_null(pc);
	plain_request(pc, 0, &q, 9, 0, &hit); /* stored */
	for (i = 0; i < 3; i++) {
		q.compute_wait_ns = waits[i];
		plain_request(pc, 0, &q, 9, 1 + i, &hit);
		cr_assert_eq(hit.hit_tokens, want[i], "a wait of %" PRIu64 " ns: hit %u", waits[i],
			     hit.hit_tokens);
		if (hit.num_refills > 0)
			prefixcache_refill_done(pc, hit.refill_id);
	}
	prefixcache_free(pc);
}

/*
 * A line that stays slow (learned over a bad minute) would keep every hit
 * computed for good, the line never learning again: every
 * PREFIXCACHE_PROBE_EVERY-th refusal in a row is refilled (a probe), and a
 * hit taken by the rule starts the count again.
 * Catches: no probe; a probe at the wrong count; the count not reset by a
 * probe or by a hit the rule takes.
 */
Test(models, every_32nd_dram_hit_refused_in_a_row_is_refilled_as_a_probe)
{
	/* 26.4 us to refill against 8 us of computing */
	struct prefixcache_params p = rule_params(20000, 1.25, 1000, 1e-3);
	uint32_t t[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
	struct prefixcache_request q = req_of(1, t, 9, 9);
	struct prefixcache_stats ps;
	struct prefixcache_hit hit;
	struct prefixcache *pc;
	unsigned int i, taken = 0;

	pc = prefixcache_create(&p, NULL);
	cr_assert_not_null(pc);
	plain_request(pc, 0, &q, 9, 0, &hit); /* stored */
	for (i = 1; i <= 2 * PREFIXCACHE_PROBE_EVERY; i++) {
		plain_request(pc, 0, &q, 9, i, &hit);
		if (hit.hit_tokens != 0) {
			cr_assert_eq(i % PREFIXCACHE_PROBE_EVERY, 0, "lookup %u probed", i);
			cr_assert_eq(hit.num_refills, 1);
			prefixcache_refill_done(pc, hit.refill_id);
			taken++;
		}
	}
	prefixcache_stats(pc, &ps);
	cr_assert_eq(taken, 2, "one probe each %u refusals", PREFIXCACHE_PROBE_EVERY);
	cr_assert_eq(ps.refill_probes, 2);
	cr_assert_eq(ps.recompute_faster_tokens, 8 * (2 * PREFIXCACHE_PROBE_EVERY - 2));
	/* A hit the rule takes starts the count again. */
	cr_assert_eq(prefixcache_set_refill_model(pc, 0, 1000, 0), 0);
	plain_request(pc, 0, &q, 9, 1000, &hit);
	cr_assert_eq(hit.hit_tokens, 8);
	prefixcache_refill_done(pc, hit.refill_id);
	cr_assert_eq(prefixcache_set_refill_model(pc, 0, 20000, 1.25), 0);
	for (i = 1; i < PREFIXCACHE_PROBE_EVERY; i++) {
		plain_request(pc, 0, &q, 9, 1000 + i, &hit);
		cr_assert_eq(hit.hit_tokens, 0, "refusal %u after a hit taken: no probe yet", i);
	}
	plain_request(pc, 0, &q, 9, 2000, &hit);
	cr_assert_eq(hit.hit_tokens, 8, "the %uth refusal in a row: a probe", PREFIXCACHE_PROBE_EVERY);
	prefixcache_free(pc);
}

/*
 * A library made with @p p, @p q looked up and sent twice (at 0 and 1):
 * *@p hit is the second lookup's, what the first stored.
 */
static struct prefixcache *
second_lookup(const struct prefixcache_params *p, const struct prefixcache_request *q, uint32_t n,
	      struct prefixcache_hit *hit)
{
	struct prefixcache *pc = prefixcache_create(p, NULL);

	cr_assert_not_null(pc);
	plain_request(pc, 0, q, n, 0, hit);
	plain_request(pc, 0, q, n, 1, hit);
	return pc;
}

/*
 * Cake's split (struct prefixcache_model's split), worked by hand: a prompt
 * of 401 tokens hits 400; DRAM's line is 20 us + 1,000 bytes a token at
 * 1.25 bytes per ns (800 ns a token), computing 1,000 ns a token. The
 * whole refill takes 340 us, computing all of it 400 us: refilled, and
 * split where both end together, k = (20,000 + 400 x 800) / (1,000 + 800)
 * = 188.9, so 188: the wafer computes [0, 188) in 188 us while [188, 400)
 * refills in 20 + 212 x 0.8 = 189.6 us, 1.8x sooner than the whole
 * refill. The REFILL brings [188, 400) only, its estimate that line's;
 * counted; the REFILL names slot 188 for its first token (cache_idx), where
 * the wafer puts it. Without split (the adaptive policy) the same hit is
 * refilled whole from slot 0. A hit the rule refuses (computing sooner) is
 * not split: none of it is refilled. A model whose cache is a sliding
 * window is not split (its chunks wrap).
 * Catches: the split point off (a fraction kept, c and b swapped, the
 * latency left out), chunks from 0 still sent, the estimate of the whole
 * hit, a split made without the flag or for a hit computed whole.
 */
Test(models, a_split_lands_where_computing_the_front_and_refilling_the_back_end_together)
{
	struct prefixcache_params p = rule_params(20000, 1.25, 1000, 1e-3);
	uint32_t t[401], i, n, first;
	struct prefixcache_request q;
	struct prefixcache_stats ps;
	struct prefixcache_hit hit;
	struct prefixcache *pc;

	for (i = 0; i < 401; i++)
		t[i] = i + 1;
	q = req_of(1, t, 401, 401);
	p.model[0].split = true;
	pc = second_lookup(&p, &q, 401, &hit);
	cr_assert_eq(hit.hit_tokens, 400);
	cr_assert_eq(hit.split_tokens, 188, "split at %u", hit.split_tokens);
	cr_assert_eq(hit.num_refills, 1);
	for (i = 0, n = 0, first = UINT32_MAX; i < hit.refills[0].rq.num_chunks; i++) {
		n += hit.refills[0].chunks[i].num_tokens;
		if (hit.refills[0].chunks[i].start_token_idx < first)
			first = hit.refills[0].chunks[i].start_token_idx;
	}
	cr_assert_eq(first, 188, "the REFILL begins at %u", first);
	cr_assert_eq(hit.refills[0].rq.cache_idx, 188, "its first token's slot");
	cr_assert_eq(n, 212, "the REFILL brings %u tokens", n);
	cr_assert_eq(hit.estimate_bytes, 212000);
	cr_assert_eq(hit.estimate_ns, 189600);
	/* Both end together: within one token's time of each other. */
	cr_assert_leq(hit.estimate_ns > 188000 ? hit.estimate_ns - 188000 : 188000 - hit.estimate_ns, 1800);
	prefixcache_stats(pc, &ps);
	cr_assert_eq(ps.split_requests, 1);
	cr_assert_eq(ps.split_tokens, 188);
	cr_assert_eq(ps.hit_tokens, 400, "the split front is still a hit");
	prefixcache_free(pc);

	/* Adaptive, no split: the whole hit refilled. */
	p.model[0].split = false;
	pc = second_lookup(&p, &q, 401, &hit);
	cr_assert_eq(hit.hit_tokens, 400);
	cr_assert_eq(hit.split_tokens, 0);
	cr_assert_eq(hit.estimate_ns, 340000);
	cr_assert_eq(hit.refills[0].chunks[0].start_token_idx, 0);
	cr_assert_eq(hit.refills[0].rq.cache_idx, 0);
	prefixcache_stats(pc, &ps);
	cr_assert_eq(ps.split_requests, 0);
	prefixcache_free(pc);

	/* A sliding window of 512 (the prompt fits it, yet the rule is not full): not split. */
	p.model[0].split = true;
	p.model[0].cache[0] = (struct prefixcache_cache){0, PREFIXCACHE_SWA, 512, 2, 1000};
	pc = second_lookup(&p, &q, 401, &hit);
	cr_assert_eq(hit.hit_tokens, 400);
	cr_assert_eq(hit.split_tokens, 0, "a window's hit split");
	cr_assert_eq(hit.estimate_ns, 340000);
	prefixcache_free(pc);

	/* A line slower than computing (60 us + 1,250 ns a token): computed whole, not split. */
	p = rule_params(60000, 0.8, 1000, 1e-3);
	p.model[0].split = true;
	pc = second_lookup(&p, &q, 401, &hit);
	cr_assert_eq(hit.hit_tokens, 0);
	cr_assert_eq(hit.split_tokens, 0);
	cr_assert_eq(hit.num_refills, 0);
	prefixcache_stats(pc, &ps);
	cr_assert_eq(ps.split_requests, 0);
	prefixcache_free(pc);
}
