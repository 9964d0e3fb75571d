/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * prefixcache_tokens() against prefixcache_token(): two drivers fed the same
 * seeded requests, one token by token, the other in runs of random length,
 * must make the same sink calls in the same order and end in the same
 * state, under every deletion policy, with one cache and with two, with
 * room to spare and without.
 */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

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
driver(struct digest *d, enum prefixcache_policy pol, uint16_t ncaches, uint64_t capacity)
{
	struct prefixcache_params p = {.num_models = 1, .column = 8, .policy = pol};
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
				struct prefixcache *a = driver(&da, pol, nc, caps[ci]);
				struct prefixcache *b = driver(&db, pol, nc, caps[ci]);
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
