/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * lib/prefixcache against a plain reference, over a seeded random run of
 * requests from several organizations (identical prompts across them),
 * under capacity pressure, with a fake clock and TTLs (global and per
 * organization), sequences that overlap (so columns get stored twice), and
 * incremental expiry.
 *
 * The reference mirrors the PrefixMap from what the library reports (a
 * column entered; DELETE messages) as records keyed by organization and the
 * exact token prefix, never by hash. For every request it computes the
 * longest prefix whose every column is live and unexpired, and the
 * library's hit must equal it. Every refilled byte is also checked by the
 * replay system against the requesting organization's content, and the
 * shard never holds more than its capacity. KVSS_SEED=N replays a run.
 */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdio.h>
#include <time.h>

#include "prefixcache.h"
#include "replay.h"
#include "test_rng.h"

#define C 4
#define CAP 160
#define NORG 4
#define MAXLEN 40
#define SEC 1000000000ull
#define TTL_LAST (30 * SEC)
#define TTL_FIRST_ORG2 (50 * SEC)

struct rec {
	uint64_t iso;
	uint32_t len;
	uint32_t tok[MAXLEN];
	uint64_t holder;
	uint32_t start;
	uint64_t first, last;
	bool live;
};

static struct rec *recs;
static size_t nrec, reccap;
static uint64_t rng;
static uint64_t now;
static uint64_t isos[NORG];

/* Prompt id -> its tokens, for the column callback. */
struct owner {
	uint64_t prompt;
	uint64_t iso;
	uint32_t tok[MAXLEN + 8];
	uint32_t n;
	bool one_off; /* followup: unique tail, long answer */
};
static struct owner owners[8];

static uint64_t
rnd(void)
{
	return test_xorshift(&rng);
}

static struct rec *
rec_find(uint64_t iso, const uint32_t *tok, uint32_t len)
{
	size_t i;

	for (i = 0; i < nrec; i++)
		if (recs[i].live && recs[i].iso == iso && recs[i].len == len &&
		    memcmp(recs[i].tok, tok, sizeof(uint32_t) * len) == 0)
			return &recs[i];
	return NULL;
}

static void
on_column(void *arg, uint16_t model, uint16_t cache_id, uint64_t iso, uint64_t prompt, uint32_t a,
	  uint32_t b)
{
	unsigned int k;
	struct rec *r = NULL;
	size_t i;

	(void)arg;
	(void)model;
	(void)cache_id;
	for (k = 0; k < 8 && owners[k].prompt != prompt; k++)
		;
	cr_assert(k < 8, "column of an unknown prompt");
	cr_assert_eq(owners[k].iso, iso, "a column recorded under another organization");
	cr_assert_leq(b, owners[k].n);
	cr_assert_null(rec_find(iso, owners[k].tok, b), "a column stored twice in the map");
	for (i = 0; i < nrec && r == NULL; i++)
		if (!recs[i].live)
			r = &recs[i];
	if (r == NULL) {
		if (nrec == reccap) {
			reccap = reccap ? 2 * reccap : 256;
			recs = realloc(recs, sizeof(*recs) * reccap);
		}
		r = &recs[nrec++];
	}
	r->iso = iso;
	r->len = b;
	memcpy(r->tok, owners[k].tok, sizeof(uint32_t) * b);
	r->holder = prompt;
	r->start = a;
	r->first = r->last = now;
	r->live = true;
}

static void
on_del(void *arg, uint16_t model, struct prefixcache_shards to, const struct proto_delete *d)
{
	size_t i;

	(void)arg;
	(void)model;
	(void)to;
	/* Columns of that prompt ending past the start are gone. */
	for (i = 0; i < nrec; i++)
		if (recs[i].live && recs[i].holder == d->prompt_id && recs[i].len > d->start_token_idx)
			recs[i].live = false;
}

static bool
rec_expired(const struct rec *r)
{
	return now - r->last >= TTL_LAST ||
	       (r->iso == isos[2] && now - r->first >= TTL_FIRST_ORG2);
}

/* The reference lookup: whole columns, all live and unexpired. */
static uint32_t
ref_hit(uint64_t iso, const uint32_t *tok, uint32_t n)
{
	uint32_t limit = n ? n - 1 : 0, L = 0, end;

	for (end = C; end <= limit; end += C) {
		struct rec *r = rec_find(iso, tok, end);

		if (r == NULL || rec_expired(r))
			break;
		L = end;
	}
	return L;
}

static void
ref_touch(uint64_t iso, const uint32_t *tok, uint32_t L)
{
	uint32_t end;

	for (end = C; end <= L; end += C)
		rec_find(iso, tok, end)->last = now;
}

/* A prompt: a shared opening, a few of a conversation's turns, a random tail. */
static uint32_t
make_prompt(uint32_t *t)
{
	static const uint32_t sys[3][8] = {{1, 2, 3, 4, 5, 6, 7, 8},
					   {1, 2, 3, 4, 9, 9, 9, 9},
					   {7, 7, 7, 7, 7, 7, 7, 7}};
	uint32_t n = 0, s = (uint32_t)(rnd() % 3), conv = (uint32_t)(rnd() % 6), turns, i;

	memcpy(t, sys[s], sizeof(sys[s]));
	n = 8;
	turns = (uint32_t)(rnd() % 5);
	for (i = 0; i < turns && n + 5 <= MAXLEN; i++) {
		uint32_t k;

		for (k = 0; k < 5; k++)
			t[n++] = 100 + conv * 10 + i * 2 + (k % 2);
	}
	for (i = (uint32_t)(rnd() % 6); i > 0 && n < MAXLEN; i--)
		t[n++] = (uint32_t)(rnd() % 4);
	return n;
}

static void
run_model(enum prefixcache_policy policy, const char *pname)
{
	struct replay_params p = {.bytes_per_token = 16, .num_buffers = 2};
	char title[64];
	uint64_t seed;
	struct replay *r;
	struct prefixcache *pc;
	struct replay_stats st;
	struct prefixcache_stats ps;
	unsigned long step, hits = 0, nonzero = 0, overlaps = 0;
	unsigned int o;

	snprintf(title, sizeof(title), "prefixcache model test, policy %s", pname);
	seed = test_seed(title, (uint64_t)time(NULL));
	rng = seed * 2654435761u + 7;
	p.pc.num_models = 1;
	p.pc.policy = policy;
	p.pc.column = C;
	p.pc.ttl_last_ns = TTL_LAST;
	p.pc.model[0].num_caches = 1;
	p.pc.model[0].cache[0] = (struct prefixcache_cache){0, PREFIXCACHE_FULL, 0, 0, CAP};
	p.pc.model[0].max_batch_tokens = 6;
	p.observe.column = on_column;
	p.observe.del = on_del;
	r = replay_create(&p);
	pc = replay_pc(r);
	for (o = 0; o < NORG; o++) {
		char name[8];

		snprintf(name, sizeof(name), "org%u", o);
		isos[o] = proto_ref_isolation_id(name, strlen(name));
	}
	cr_assert_eq(prefixcache_org_ttl(pc, isos[2], 0, TTL_FIRST_ORG2), 0);

	for (step = 0; step < 100000; step++) {
		unsigned int nseq = rnd() % 8 == 0 ? 2 : 1, k;
		struct replay_seq *seq[2];
		struct prefixcache_request q[2];
		struct prefixcache_hit hit;

		now += (rnd() % 200 == 0 ? 35 : rnd() % 4) * SEC;
		for (k = 0; k < nseq; k++) {
			struct owner *ow = &owners[(step * 2 + k) % 8];
			uint32_t want;

			ow->iso = isos[rnd() % NORG];
			/* Overlapping sequences often carry the same prompt. */
			if (k == 1 && rnd() % 2) {
				memcpy(ow->tok, owners[(step * 2) % 8].tok, sizeof(ow->tok));
				ow->n = owners[(step * 2) % 8].n;
				ow->iso = owners[(step * 2) % 8].iso;
			} else {
				ow->n = make_prompt(ow->tok);
			}
			/*
			 * followup: a quarter of single prompts are tokens of their
			 * own (never asked again) with long answers, so that class
			 * goes cold and the cold list is exercised.
			 */
			ow->one_off = policy == PREFIXCACHE_FOLLOWUP && nseq == 1 && rnd() % 4 == 0;
			if (ow->one_off) {
				for (ow->n = 0; ow->n < 13; ow->n++)
					ow->tok[ow->n] = 1000 + (uint32_t)(step * 13 + ow->n);
			}
			q[k] = (struct prefixcache_request){
				.isolation_id = ow->iso, .tokens = ow->tok, .num_tokens = ow->n,
				.cache_length_allowed = rnd() % 10 == 0 ? ow->n / 2 : ow->n,
				.first_multimodal = UINT32_MAX, .sequence_id = (uint32_t)step};
			if (policy == PREFIXCACHE_PRIORITY && rnd() % 3 == 0)
				q[k].priority_tokens = 8; /* a hint on a third of them */
			want = ref_hit(ow->iso, ow->tok, ow->n);
			if (want > q[k].cache_length_allowed / C * C)
				want = q[k].cache_length_allowed / C * C;
			seq[k] = replay_begin(r, 0, &q[k], now, &hit);
			cr_assert_not_null(seq[k]);
			ow->prompt = hit.prompt_id;
			cr_assert_eq(hit.hit_tokens, want,
				     "step %lu: hit %u, reference %u (org %u, %u tokens)", step,
				     hit.hit_tokens, want, (unsigned int)(ow->iso % 1000), ow->n);
			ref_touch(ow->iso, ow->tok, want);
			hits += want;
			nonzero += want > 0;
		}
		/* Interleave the overlapping sequences' tokens. */
		if (nseq == 2) {
			overlaps++;
			replay_send(r, seq[0], 2, NULL, now);
			replay_send(r, seq[1], owners[(step * 2 + 1) % 8].n, NULL, now);
			replay_send(r, seq[0], owners[(step * 2) % 8].n, NULL, now);
		} else {
			const struct owner *ow = &owners[(step * 2) % 8];

			replay_send(r, seq[0], ow->n, NULL, now);
			if (ow->one_off)
				replay_send(r, seq[0], 64, NULL, now); /* a long answer */
		}
		for (k = 0; k < nseq; k++)
			replay_end(r, seq[k], now);
		cr_assert_leq(prefixcache_stored(pc, 0, 0), CAP, "step %lu: over capacity", step);
		if (step % 1000 == 0) {
			replay_stats(r, &st);
			cr_assert_eq(st.unaccounted_tokens, 0,
				     "step %lu: the shard and the driver's account differ by %" PRIu64,
				     step, st.unaccounted_tokens);
		}
		if (step % 10 == 0)
			prefixcache_expire(pc, now, 64);
	}
	replay_stats(r, &st);
	prefixcache_stats(pc, &ps);
	printf("%s: %lu requests hit (%lu tokens), %lu overlapping, "
	       "%" PRIu64 " refills checked (%" PRIu64 " tokens), %" PRIu64 " policy deletes, "
	       "%" PRIu64 " expired entries, %" PRIu64 " duplicate columns, %" PRIu64
	       " cold columns\n",
	       title, nonzero, hits, overlaps, st.refills, st.refill_tokens, ps.policy_deletes,
	       ps.expired_entries, ps.dup_columns, ps.cold_columns);
	cr_assert_eq(st.protocol_errors, 0);
	cr_assert_eq(st.verify_failures, 0);
	cr_assert_eq(st.unaccounted_tokens, 0);
	cr_assert_leq(st.max_stored, CAP);
	/* A run that exercised too little proves nothing. */
	cr_assert_gt(nonzero, 10000);
	cr_assert_gt(ps.policy_deletes, 1000);
	cr_assert_gt(ps.expired_entries, 100);
	cr_assert_gt(ps.dup_columns, 100);
	if (policy == PREFIXCACHE_FOLLOWUP)
		cr_assert_gt(ps.cold_columns, 1000);
	replay_free(r);
	free(recs);
}

/* The same run under every deletion policy: none may break a rule. */
Test(model, longest_prefix_equals_the_reference_over_100k_requests_lru, .timeout = 600)
{
	run_model(PREFIXCACHE_LRU, "lru");
}

Test(model, longest_prefix_equals_the_reference_over_100k_requests_lfu, .timeout = 600)
{
	run_model(PREFIXCACHE_LFU, "lfu");
}

Test(model, longest_prefix_equals_the_reference_over_100k_requests_priority, .timeout = 600)
{
	run_model(PREFIXCACHE_PRIORITY, "priority");
}

Test(model, longest_prefix_equals_the_reference_over_100k_requests_slru, .timeout = 600)
{
	run_model(PREFIXCACHE_SLRU, "slru");
}

Test(model, longest_prefix_equals_the_reference_over_100k_requests_admit, .timeout = 600)
{
	run_model(PREFIXCACHE_ADMIT, "admit");
}

Test(model, longest_prefix_equals_the_reference_over_100k_requests_followup, .timeout = 600)
{
	run_model(PREFIXCACHE_FOLLOWUP, "followup");
}

/* Nothing refused, every refilled byte right, the shard holding what the driver accounts for. */
static void
assert_exact(struct replay *r, unsigned long step, struct replay_stats *st)
{
	replay_stats(r, st);
	cr_assert_eq(st->protocol_errors, 0, "step %lu", step);
	cr_assert_eq(st->verify_failures, 0, "step %lu", step);
	cr_assert_eq(st->unaccounted_tokens, 0, "step %lu", step);
}

/*
 * A model with a full cache and a sliding-window cache (W = 24, S = 3, so
 * after the loop-around the window's entries end off the full cache's column
 * grid), under capacity pressure, with conversations that grow and
 * organizations that share prompts. No reference here: the replay system
 * checks every refilled byte of both caches against the requester's content,
 * every message against the shard's rules, and the shard's stored tokens
 * against the driver's account; and hits must go past the window.
 */
static void
run_hybrid(const char *title, bool two_windows)
{
	enum { NCONV = 24, CONVLEN = 120, WIN = 24, SINKS = 3, HCAP = 400 };
	struct replay_params p = {.bytes_per_token = 16, .num_buffers = 2};
	static uint32_t conv[NCONV][CONVLEN];
	uint32_t clen[NCONV] = {0}, gen[8];
	uint64_t seed, ciso[NCONV];
	struct replay *r;
	struct replay_stats st;
	unsigned long step, past_window = 0, hits = 0;
	unsigned int k;

	seed = test_seed(title, (uint64_t)time(NULL));
	rng = seed * 2654435761u + 11;
	p.pc.num_models = 1;
	p.pc.column = C;
	p.pc.model[0].num_caches = 2;
	p.pc.model[0].cache[0] = (struct prefixcache_cache){0, PREFIXCACHE_FULL, 0, 0, HCAP};
	p.pc.model[0].cache[1] = (struct prefixcache_cache){1, PREFIXCACHE_SWA, WIN, SINKS, HCAP};
	if (two_windows) {
		/* A second window, its laps out of step with the first's. */
		p.pc.model[0].num_caches = 3;
		p.pc.model[0].cache[2] = (struct prefixcache_cache){2, PREFIXCACHE_SWA, 16, 2, HCAP};
	}
	p.pc.model[0].max_batch_tokens = 5;
	r = replay_create(&p);
	for (step = 0; step < 20000; step++) {
		unsigned int c = (unsigned int)(rnd() % NCONV), add, i;
		struct prefixcache_request q;
		uint32_t hit;

		if (clen[c] == 0 || clen[c] > CONVLEN - 40 || rnd() % 8 == 0) {
			/* A new conversation: a shared system prompt of one of 3, or none. */
			unsigned int sys = (unsigned int)(rnd() % 4);

			ciso[c] = isos[0] + rnd() % 3;
			clen[c] = sys ? 8 + 4 * sys : 0;
			for (i = 0; i < clen[c]; i++)
				conv[c][i] = 500 * sys + i;
		}
		add = 1 + (unsigned int)(rnd() % 30);
		for (i = 0; i < add; i++)
			conv[c][clen[c] + i] = (uint32_t)rnd() % 50000;
		clen[c] += add;
		for (k = 0; k < 8; k++)
			gen[k] = (uint32_t)rnd() % 50000;
		q = (struct prefixcache_request){.isolation_id = ciso[c], .tokens = conv[c],
						 .num_tokens = clen[c],
						 .cache_length_allowed = clen[c] + 8,
						 .first_multimodal = UINT32_MAX, .sequence_id = 9};
		now += SEC / 10;
		hit = replay_request(r, 0, &q, gen, (uint32_t)(rnd() % 9), now);
		hits += hit;
		if (hit > WIN)
			past_window++;
		if (step % 1000 == 0)
			assert_exact(r, step, &st);
	}
	assert_exact(r, step, &st);
	printf("%s: %lu hit tokens, %lu requests hit past the window, "
	       "%" PRIu64 " refills checked (%" PRIu64 " tokens)\n",
	       title, hits, past_window, st.refills, st.refill_tokens);
	cr_assert_leq(st.max_stored, HCAP);
	cr_assert_gt(past_window, 1000, "too few hits past the window to prove anything");
	replay_free(r);
}

Test(model, a_full_and_a_sliding_cache_stay_exact_over_20k_requests, .timeout = 600)
{
	run_hybrid("prefixcache hybrid model test", false);
}

Test(model, a_full_cache_and_two_windows_stay_exact_over_20k_requests, .timeout = 600)
{
	run_hybrid("prefixcache hybrid model test, two windows", true);
}

/*
 * Speculative decoding through a real shard: every answer is generated in
 * rounds of 1 to 4 speculative tokens, of which a random number is accepted
 * and the first rejected one is corrected (sent again at its position,
 * overwriting it in the shard). The conversation then continues from the
 * corrected answer, so later hits cover overwritten positions: every
 * refilled byte must be the corrected token's, never the speculative one's.
 */
Test(model, speculative_answers_refill_only_corrected_bytes_over_10k_requests, .timeout = 600)
{
	enum { NCONV = 16, CONVLEN = 400, SCAP = 2000 };
	struct replay_params p = {.bytes_per_token = 16, .num_buffers = 2};
	static uint32_t conv[NCONV][CONVLEN];
	uint32_t clen[NCONV] = {0}, ans[NCONV] = {0};
	uint64_t seed;
	struct replay *r;
	struct replay_stats st;
	unsigned long step, into_answers = 0, overwrites = 0;

	seed = test_seed("prefixcache speculation model test", (uint64_t)time(NULL));
	rng = seed * 2654435761u + 13;
	p.pc.num_models = 1;
	p.pc.column = C;
	p.pc.model[0].num_caches = 1;
	p.pc.model[0].cache[0] = (struct prefixcache_cache){0, PREFIXCACHE_FULL, 0, 0, SCAP};
	p.pc.model[0].max_batch_tokens = 7;
	r = replay_create(&p);
	for (step = 0; step < 10000; step++) {
		unsigned int c = (unsigned int)(rnd() % NCONV), add, i, answer_from;
		struct prefixcache_request q;
		struct prefixcache_hit hit;
		struct replay_seq *s;
		uint32_t target;

		if (clen[c] == 0 || clen[c] > CONVLEN - 80 || rnd() % 10 == 0)
			clen[c] = ans[c] = 0;
		add = 1 + (unsigned int)(rnd() % 20);
		for (i = 0; i < add; i++)
			conv[c][clen[c] + i] = (uint32_t)rnd() % 50000;
		clen[c] += add;
		q = (struct prefixcache_request){.isolation_id = 77, .tokens = conv[c],
						 .num_tokens = clen[c],
						 .cache_length_allowed = clen[c] + 40,
						 .first_multimodal = UINT32_MAX, .sequence_id = 3};
		now += SEC / 10;
		s = replay_begin(r, 0, &q, now, &hit);
		cr_assert_not_null(s);
		if (ans[c] > 0 && hit.hit_tokens > ans[c])
			into_answers++; /* the hit reaches into the last answer */
		replay_send(r, s, clen[c] - hit.hit_tokens, NULL, now);
		/* The answer: up to 24 tokens, in speculative rounds. */
		answer_from = clen[c];
		target = clen[c] + 1 + (uint32_t)(rnd() % 24);
		while (clen[c] < target) {
			uint32_t k = 1 + (uint32_t)(rnd() % 4), spec[4], a, fix;

			for (i = 0; i < k; i++)
				spec[i] = (uint32_t)rnd() % 50000;
			replay_speculate(r, s, spec, k, now);
			a = (uint32_t)(rnd() % (k + 1));
			replay_verify(r, s, a, now);
			for (i = 0; i < a; i++)
				conv[c][clen[c]++] = spec[i];
			if (a < k) {
				fix = spec[a] + 1 + (uint32_t)(rnd() % 1000);
				replay_send(r, s, 1, &fix, now);
				conv[c][clen[c]++] = fix;
				overwrites++;
			}
		}
		ans[c] = answer_from;
		replay_end(r, s, now);
		if (step % 1000 == 0)
			assert_exact(r, step, &st);
	}
	assert_exact(r, step, &st);
	printf("prefixcache speculation model test: %lu corrected tokens, %lu hits into an answer, "
	       "%" PRIu64 " refills checked (%" PRIu64 " tokens)\n",
	       overwrites, into_answers, st.refills, st.refill_tokens);
	cr_assert_leq(st.max_stored, SCAP);
	cr_assert_gt(overwrites, 5000, "too few corrections to prove anything");
	cr_assert_gt(into_answers, 2000, "too few hits into answers to prove anything");
	replay_free(r);
}
