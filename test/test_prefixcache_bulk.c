/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * prefixcache_tokens() against prefixcache_token(): two drivers fed the same
 * seeded requests, one token by token, the other in runs of random length,
 * must make the same sink calls in the same order and end in the same
 * state, under every deletion policy, with one cache and with two, with
 * room to spare and without; the one fed in runs made with its entries
 * reserved at create (prefixcache_params.reserve) in every other trial, so
 * a reserved map holds what a grown one does.
 */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "pc_priv.h"
#include "prefixcache.h"
#include "test_rng.h"

/* A running digest of every sink call (FNV-1a over its arguments). */
struct digest {
	uint64_t h;
	uint64_t calls;
};

static void
mix(struct digest *d, const void *p, size_t n)
{
	const uint8_t *b = p;
	size_t i;

	for (i = 0; i < n; i++) {
		d->h ^= b[i];
		d->h *= 0x100000001b3ULL;
	}
	d->calls++;
}

static void
on_evict(void *arg, uint16_t model, uint64_t batch_no, uint16_t nc, uint16_t g,
	 const struct proto_evict_entry *e)
{
	struct digest *d = arg;
	uint32_t i;

	mix(d, &model, sizeof(model));
	mix(d, &batch_no, sizeof(batch_no));
	mix(d, &nc, sizeof(nc));
	mix(d, &g, sizeof(g));
	for (i = 0; i < (uint32_t)nc * g; i++) {
		mix(d, &e[i].prompt_id, 8);
		mix(d, &e[i].token_idx, 4);
		mix(d, &e[i].sequence_id, 4);
	}
}

static void
on_del(void *arg, uint16_t model, struct prefixcache_shards to, const struct proto_delete *x)
{
	struct digest *d = arg;

	(void)to;
	mix(d, &model, sizeof(model));
	mix(d, &x->prompt_id, 8);
	mix(d, &x->evict_count, 8);
	mix(d, &x->start_token_idx, 4);
	mix(d, &x->end_token_idx, 4);
	mix(d, &x->cache_id, 2);
}

static void
on_refill(void *arg, uint16_t model, const struct proto_refill_req *r,
	  const struct proto_refill_chunk *ch)
{
	struct digest *d = arg;
	uint16_t i;

	mix(d, &model, sizeof(model));
	mix(d, &r->evict_count, 8);
	mix(d, &r->cache_id, 2);
	for (i = 0; i < r->num_chunks; i++) {
		mix(d, &ch[i].prompt_id, 8);
		mix(d, &ch[i].start_token_idx, 4);
		mix(d, &ch[i].num_tokens, 4);
	}
}

static void
on_reserve(void *arg, uint16_t model, const struct proto_reserve *r)
{
	struct digest *d = arg;

	mix(d, &model, sizeof(model));
	mix(d, &r->prompt_id, 8);
	mix(d, &r->start_token_idx, 4);
}

static void
on_column(void *arg, uint16_t model, uint16_t cache_id, uint64_t iso, uint64_t prompt_id,
	  uint32_t a, uint32_t b)
{
	struct digest *d = arg;

	mix(d, &model, sizeof(model));
	mix(d, &cache_id, 2);
	mix(d, &iso, 8);
	mix(d, &prompt_id, 8);
	mix(d, &a, 4);
	mix(d, &b, 4);
}

static struct prefixcache *
driver(struct digest *d, enum prefixcache_policy pol, uint16_t ncaches, uint64_t capacity,
       bool reserve)
{
	struct prefixcache_params p = {.num_models = 1, .column = 8, .policy = pol, .reserve = reserve};
	struct prefixcache_sink sink = {.arg = d, .evict = on_evict, .del = on_del,
					.refill = on_refill, .reserve = on_reserve,
					.column = on_column};
	uint16_t c;

	p.model[0].num_caches = ncaches;
	for (c = 0; c < ncaches; c++)
		p.model[0].cache[c] = (struct prefixcache_cache){c, PREFIXCACHE_FULL, 0, 0, capacity};
	p.model[0].max_batch_tokens = 37; /* runs meet batch ends often */
	return prefixcache_create(&p, &sink);
}

static void
same_stats(const struct prefixcache *a, const struct prefixcache *b, const char *what)
{
	struct prefixcache_stats x, y;

	prefixcache_stats(a, &x);
	prefixcache_stats(b, &y);
	cr_assert_eq(x.hit_tokens, y.hit_tokens, "%s: hit tokens", what);
	cr_assert_eq(x.evicted_tokens, y.evicted_tokens, "%s: evicted tokens", what);
	cr_assert_eq(x.deleted_tokens, y.deleted_tokens, "%s: deleted tokens", what);
	cr_assert_eq(x.entries, y.entries, "%s: entries", what);
	cr_assert_eq(x.peak_stored_tokens, y.peak_stored_tokens, "%s: peak", what);
	cr_assert_eq(prefixcache_stored(a, 0, 0), prefixcache_stored(b, 0, 0), "%s: stored", what);
}

Test(bulk, runs_of_tokens_do_what_one_at_a_time_does)
{
	uint64_t seed = test_seed("bulk tokens", 0xb01c);
	enum prefixcache_policy pol;
	unsigned int trial = 0;

	for (pol = PREFIXCACHE_LRU; prefixcache_policy_names[pol] != NULL; pol++) {
		uint16_t nc;

		for (nc = 1; nc <= 2; nc++) {
			uint64_t caps[2] = {300, 1u << 20};
			unsigned int ci;

			for (ci = 0; ci < 2; ci++, trial++) {
				struct digest da = {0xcbf29ce484222325ULL, 0}, db = da;
				struct prefixcache *a = driver(&da, pol, nc, caps[ci], false);
				struct prefixcache *b = driver(&db, pol, nc, caps[ci], trial % 2 == 1);
				uint64_t x = seed + trial;
				unsigned int r;

				cr_assert(a != NULL && b != NULL);
				for (r = 0; r < 300; r++) {
					uint32_t t[400], n, j, gen, fed;
					struct prefixcache_request q;
					struct prefixcache_hit ha, hb;
					struct prefixcache_seq *sa, *sb;

					x = x * 6364136223846793005ULL + 1442695040888963407ULL;
					n = 1 + (uint32_t)(x >> 33) % 200;
					gen = (uint32_t)(x >> 13) % 40;
					for (j = 0; j < n + gen; j++)
						t[j] = (uint32_t)((x >> 50) % 6) * 1000 +
						       (j < 50 ? j : j + (uint32_t)(x >> 20) % 3 * 7);
					q = (struct prefixcache_request){
						.isolation_id = 1 + (x >> 60) % 2, .tokens = t, .num_tokens = n,
						.cache_length_allowed = n + gen - (uint32_t)(x >> 40) % 5,
						.first_multimodal = UINT32_MAX, .sequence_id = r};
					sa = prefixcache_begin(a, 0, &q, (uint64_t)r * 1000000, &ha);
					sb = prefixcache_begin(b, 0, &q, (uint64_t)r * 1000000, &hb);
					cr_assert(sa != NULL && sb != NULL);
					cr_assert_eq(ha.hit_tokens, hb.hit_tokens);
					for (j = ha.hit_tokens; j < n + gen; j++)
						prefixcache_token(a, sa, t[j], (uint64_t)r * 1000000);
					for (fed = hb.hit_tokens; fed < n + gen;) {
						uint32_t k = 1 + (uint32_t)((x >> (fed % 40)) % 70);

						if (k > n + gen - fed)
							k = n + gen - fed;
						prefixcache_tokens(b, sb, t + fed, k, (uint64_t)r * 1000000);
						fed += k;
					}
					prefixcache_flush(a);
					prefixcache_flush(b);
					prefixcache_end(a, sa, (uint64_t)r * 1000000);
					prefixcache_end(b, sb, (uint64_t)r * 1000000);
					cr_assert_eq(da.calls, db.calls,
						     "seed %#" PRIx64 " %s, %u caches, capacity %" PRIu64
						     ", request %u: %" PRIu64 " sink calls one by one, %" PRIu64
						     " in runs", seed, prefixcache_policy_names[pol], nc,
						     caps[ci], r, da.calls, db.calls);
					cr_assert_eq(da.h, db.h, "seed %#" PRIx64 " %s, request %u: the sink "
						     "calls differ", seed, prefixcache_policy_names[pol], r);
				}
				same_stats(a, b, prefixcache_policy_names[pol]);
				prefixcache_free(a);
				prefixcache_free(b);
			}
		}
	}
}

/*
 * A driver made with its entries reserved holds, from its creation, every
 * entry its capacity can need: recording up to the capacity, and past it
 * (the policy deleting), never grows its map; two groups' capacities add
 * up; made without, the same driver's map grows on the way. (A first
 * column is recorded before measuring: a prompt's and an organization's
 * records are made at their first use either way.)
 */
static struct prefixcache *
reserved(bool reserve, uint64_t cap0, uint64_t cap1)
{
	struct prefixcache_params p = {.num_models = 1, .column = 64, .policy = PREFIXCACHE_LRU,
				       .reserve = reserve};

	p.model[0].num_caches = cap1 != 0 ? 2 : 1;
	p.model[0].cache[0] = (struct prefixcache_cache){0, PREFIXCACHE_FULL, 0, 0, cap0};
	/* A window of its own: a second group, with a capacity of its own. */
	p.model[0].cache[1] = (struct prefixcache_cache){1, PREFIXCACHE_SWA, 640, 0, cap1};
	return prefixcache_create(&p, NULL);
}

static void
record_prompts(struct prefixcache *pc, unsigned int prompts, uint32_t len, unsigned int from)
{
	uint32_t *t = malloc(sizeof(uint32_t) * (len + 1)), i;
	unsigned int k;

	cr_assert(t != NULL);
	for (k = from; k < from + prompts; k++) {
		struct prefixcache_request q = {.isolation_id = 5, .tokens = t, .num_tokens = len + 1,
						.cache_length_allowed = len + 1,
						.first_multimodal = UINT32_MAX};
		struct prefixcache_hit hit;
		struct prefixcache_seq *s;

		for (i = 0; i <= len; i++)
			t[i] = k * 1000003u + i;
		s = prefixcache_begin(pc, 0, &q, k, &hit);
		cr_assert(s != NULL);
		cr_assert_eq(hit.hit_tokens, 0);
		prefixcache_tokens(pc, s, t, len + 1, k);
		prefixcache_flush(pc);
		prefixcache_end(pc, s, k);
	}
	free(t);
}

Test(reserve, a_reserved_map_records_its_capacity_without_growing)
{
	/* 100,000 tokens of 64-token columns: 1,563 entries (1,562.5 rounded up). */
	struct prefixcache *r = reserved(true, 100000, 0), *g = reserved(false, 100000, 0);
	struct prefixcache *two = reserved(true, 100000, 3000), *one = reserved(true, 100000, 0);
	size_t at_start, grown0;
	struct prefixcache_stats st;

	cr_assert(r != NULL && g != NULL && two != NULL && one != NULL);
	cr_assert_geq(prefixcache_memory(r), prefixcache_memory(g) + 1563 * 88,
		      "reserved %zu bytes, unreserved %zu", prefixcache_memory(r),
		      prefixcache_memory(g));
	/* The window's group adds its 47 (3,000 / 64 rounded up). */
	cr_assert_geq(prefixcache_memory(two), prefixcache_memory(one) + 47 * 88);
	record_prompts(r, 1, 64, 0);
	record_prompts(g, 1, 64, 0);
	at_start = prefixcache_memory(r);
	grown0 = prefixcache_memory(g);
	/* 1,561 columns more: the capacity less a part column. */
	record_prompts(r, 1, 99904, 1);
	prefixcache_stats(r, &st);
	cr_assert_eq(st.entries, 1562);
	cr_assert_eq(prefixcache_memory(r), at_start, "recording within the capacity grew the map");
	record_prompts(r, 3, 20000, 2); /* past it: the policy deletes, the map stays */
	prefixcache_stats(r, &st);
	cr_assert_gt(st.policy_deletes, 0);
	cr_assert_eq(prefixcache_memory(r), at_start, "recording past the capacity grew the map");
	record_prompts(g, 1, 99904, 1);
	cr_assert_gt(prefixcache_memory(g), grown0, "the unreserved map did not grow: the test "
		     "measures nothing");
	prefixcache_free(r);
	prefixcache_free(g);
	prefixcache_free(two);
	prefixcache_free(one);
}

/*
 * Each way of writing a run's EVICT entries (plain, SSE2, AVX2, AVX-512,
 * as this CPU has them) writes what the plain loop does, for every count
 * up to past a few vectors (every tail a mask or a half store covers),
 * from every start (a token_idx about to wrap too), and nothing after
 * them.
 */
Test(reserve, every_way_of_writing_entries_writes_the_same)
{
	static const uint32_t starts[] = {0, 7, 0xfffffff0u};
	struct proto_evict_entry want[80], got[84];
	int how, tried = 0;
	unsigned int si;
	uint32_t k, i;

	for (how = PC_FILL_PLAIN; how <= PC_FILL_AVX512; how++)
		for (si = 0; si < 3; si++)
			for (k = 0; k <= 70; k++) {
				struct proto_evict_entry ent = {0x1122334455667788ull + k, starts[si],
								0xabcdef01u};
				int r;

				memset(want, 0xa5, sizeof(want));
				memset(got, 0xa5, sizeof(got));
				cr_assert_eq(pc_fill_entries(want, ent, k, PC_FILL_PLAIN), PC_FILL_PLAIN);
				r = pc_fill_entries(got, ent, k, how);
				if (r < 0)
					continue; /* not on this CPU */
				cr_assert_eq(r, how);
				tried |= 1 << how;
				for (i = 0; i < k; i++)
					cr_assert(got[i].prompt_id == ent.prompt_id &&
						  got[i].token_idx == starts[si] + i &&
						  got[i].sequence_id == ent.sequence_id,
						  "way %d, %u entries from %u: entry %u", how, k, starts[si], i);
				cr_assert(memcmp(got, want, sizeof(want)) == 0, "way %d, %u entries", how, k);
				for (i = 0; i < sizeof(got) - k * sizeof(got[0]); i++)
					cr_assert_eq(((uint8_t *)&got[k])[i], 0xa5,
						     "way %d wrote past %u entries", how, k);
			}
	cr_log_info("ways of writing entries tried: %#x", (unsigned int)tried);
	cr_assert(tried & (1 << PC_FILL_PLAIN));
}

static void
l2_down_nop(void *arg, uint16_t model, const struct prefixcache_l2col *c)
{
	(void)arg;
	(void)model;
	(void)c;
}

static void
l2_up_nop(void *arg, uint16_t model, uint64_t batch_no, uint16_t num_caches, uint16_t g,
	  const struct proto_evict_entry *e, const struct prefixcache_l2col *cols, uint32_t ncols)
{
	(void)arg;
	(void)model;
	(void)batch_no;
	(void)num_caches;
	(void)g;
	(void)e;
	(void)cols;
	(void)ncols;
}

static void
l2_del_nop(void *arg, uint16_t model, uint16_t cache_id, uint64_t key, uint64_t isolation_id,
	   uint64_t evict_count)
{
	(void)arg;
	(void)model;
	(void)cache_id;
	(void)key;
	(void)isolation_id;
	(void)evict_count;
}

/*
 * A sequence that stopped evicting before its end (prefixcache_cut: the
 * wafer's EVICT path backed up) is not taken for one that answered briefly:
 * with the second tier's "short" admission, a prompt ended with no answer
 * marks its columns brief; the same prompt cut does not.
 * Catches: a cut sequence's prompt length taken for its whole answer.
 */
Test(reserve, a_cut_sequence_is_not_taken_for_a_short_answer)
{
	unsigned int cut;

	for (cut = 0; cut < 2; cut++) {
		struct prefixcache_params p = {.num_models = 1, .column = 64, .policy = PREFIXCACHE_LRU};
		struct prefixcache_sink sink = {.l2_down = l2_down_nop, .l2_up = l2_up_nop,
						.l2_del = l2_del_nop};
		uint32_t t[257], i, brief = 0;
		struct prefixcache_request q = {.isolation_id = 9, .tokens = t, .num_tokens = 257,
						.cache_length_allowed = 257, .first_multimodal = UINT32_MAX};
		struct prefixcache_hit hit;
		struct prefixcache_seq *s;
		struct prefixcache *pc;

		p.model[0].num_caches = 1;
		p.model[0].cache[0] = (struct prefixcache_cache){0, PREFIXCACHE_FULL, 0, 0, 1u << 20};
		p.model[0].l2_capacity_tokens = 1u << 20;
		p.model[0].l2_admit = PREFIXCACHE_L2_SHORT;
		pc = prefixcache_create(&p, &sink);
		cr_assert_not_null(pc);
		for (i = 0; i < 257; i++)
			t[i] = 4000 + i;
		s = prefixcache_begin(pc, 0, &q, 0, &hit);
		cr_assert_not_null(s);
		prefixcache_tokens(pc, s, t, 200, 0); /* three whole columns, then it stops */
		prefixcache_flush(pc);
		if (cut)
			prefixcache_cut(s);
		prefixcache_end(pc, s, 0);
		for (i = 0; i < pc->ehigh; i++)
			brief += pc->e[i].length != 0 && pc->e[i].brief;
		if (cut)
			cr_assert_eq(brief, 0, "a cut sequence's %u columns taken for a short answer", brief);
		else
			cr_assert_eq(brief, 3, "an ended prompt with no answer: its 3 columns brief (%u)", brief);
		prefixcache_free(pc);
	}
}
