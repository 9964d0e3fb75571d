/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * kvss-trace's replays (trace_priv.h): each request of a trace through the
 * driver library, the target and a draft, speculation, a router over
 * replicas; the rates of evictions and refills on the trace's clock and the
 * balance over replicas, for one capacity at a time; with --ttft, each
 * request's hit and its second tier's part, for ttft.c.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mono.h"
#include "replay.h"
#include "route.h"
#include "trace_priv.h"
#include "workload.h"

#define PEAK_WINDOW_S 10	   /* the busiest this many seconds of trace time */
#define RATES_MAX_S (1u << 22) /* seconds counted apart (48 days); later ones go in the last */

/*
 * Per second of trace time, tokens evicted and refilled: each request's are
 * counted at its arrival (the trace has no compute times).
 */
struct rates {
	uint64_t first_ms;
	size_t nsec;
	uint64_t *evict, *refill;
};

static int
rates_init(struct rates *rt, const struct workload *t, size_t n)
{
	uint64_t lo = UINT64_MAX, hi = 0;
	size_t i;

	for (i = 0; i < n; i++) {
		lo = t->r[i].ts_ms < lo ? t->r[i].ts_ms : lo;
		hi = t->r[i].ts_ms > hi ? t->r[i].ts_ms : hi;
	}
	rt->first_ms = n ? lo : 0;
	rt->nsec = n ? (size_t)((hi - lo) / 1000 + 1) : 1;
	if (rt->nsec > RATES_MAX_S) {
		fprintf(stderr, "kvss-trace: the trace spans %zu s; the rates count what comes after "
				"%u s in its %u-th second\n", rt->nsec, RATES_MAX_S, RATES_MAX_S);
		rt->nsec = RATES_MAX_S;
	}
	rt->evict = calloc(rt->nsec, sizeof(uint64_t));
	rt->refill = calloc(rt->nsec, sizeof(uint64_t));
	return rt->evict && rt->refill ? 0 : -1;
}

/* The window for the busiest seconds: PEAK_WINDOW_S, or the whole span when shorter. */
static size_t
rates_window(const struct rates *rt)
{
	return rt->nsec < PEAK_WINDOW_S ? rt->nsec : PEAK_WINDOW_S;
}

/* Over the whole span, and over the busiest window. */
static void
rates_close(const struct rates *rt, const uint64_t *v, double *mean, double *peak)
{
	size_t w = rates_window(rt), i;
	uint64_t sum = 0, total = 0, best = 0;

	for (i = 0; i < rt->nsec; i++) {
		total += v[i];
		sum += v[i];
		if (i >= w)
			sum -= v[i - w];
		if (i + 1 >= w && sum > best)
			best = sum;
	}
	*mean = (double)total / (double)rt->nsec;
	*peak = (double)best / (double)w;
}

/* Per minute of trace time: the busiest replica's tokens over the mean. */
struct balance {
	uint64_t minute;
	double tok[ROUTE_MAX_REPLICAS];
	double sum, worst;
	uint64_t n;
};

static void
balance_close(struct balance *b, uint32_t nrep)
{
	double total = 0, mx = 0;
	uint32_t i;

	for (i = 0; i < nrep; i++) {
		total += b->tok[i];
		if (b->tok[i] > mx)
			mx = b->tok[i];
		b->tok[i] = 0;
	}
	if (total > 0) {
		double ratio = mx / (total / nrep);

		b->sum += ratio;
		b->n++;
		if (ratio > b->worst)
			b->worst = ratio;
	}
}

/* Model @p m's proposals of one round, evicted; returns those of them evicted past @p j. */
static uint64_t
speculate(struct replay *r, struct replay_seq *s, const uint32_t *prop, uint32_t j, uint32_t k,
	  uint64_t now)
{
	struct prefixcache_stats a, b;

	replay_speculate(r, s, prop, j, now);
	prefixcache_stats(replay_pc(r), &a);
	replay_speculate(r, s, prop + j, k - j, now);
	prefixcache_stats(replay_pc(r), &b);
	return b.evicted_tokens - a.evicted_tokens;
}

/*
 * Request @p q (number @p reqno) through the target (model 0) and, with
 * --draft, its draft (model 1): each looks up in its own map, refills from
 * its own shard, and evicts the prompt, then the answer but its last token
 * (workload_evicted_answer()); with --speculate, the answer comes in rounds
 * of proposals that the target verifies, the rejected ones evicted and
 * overwritten in place. Every refilled byte is checked (replay.h). Returns
 * the target's hit tokens.
 */
static uint32_t
trace_request(const struct opts *o, struct replay *r, const struct prefixcache_request *rq,
	      const struct wl_req *q, uint64_t reqno, uint64_t now, struct result *res)
{
	struct replay_seq *s[2] = {NULL, NULL};
	struct prefixcache_hit hit[2] = {{0}};
	uint32_t nm = o->draft ? 2 : 1, gen = workload_evicted_answer(q->out), end = q->n + gen;
	uint32_t m, pos;

	for (m = 0; m < nm; m++) {
		s[m] = replay_begin(r, (uint16_t)m, rq, now, &hit[m]);
		if (s[m] == NULL) {
			res->perr++; /* no memory, or the library refused it */
			goto out;
		}
		replay_send(r, s[m], q->n - hit[m].hit_tokens, NULL, now);
	}
	if (o->spec_tokens == 0) {
		for (m = 0; m < nm; m++)
			replay_send(r, s[m], gen, NULL, now);
	}
	for (pos = q->n; o->spec_tokens != 0 && pos < end;) {
		uint32_t prop[64], k = end - pos - 1 < o->spec_tokens ? end - pos - 1 : o->spec_tokens;
		uint32_t j, i;

		/* The target's token at pos: the prefill's, or the last round's correction. */
		for (m = 0; m < nm; m++)
			replay_send(r, s[m], 1, NULL, now);
		if (k == 0)
			break;
		j = workload_spec_accepted(o->spec_seed, reqno, pos + 1, k, o->spec_reject_pct / 100.0);
		for (i = 0; i < k; i++)
			prop[i] = i < j ? workload_answer_token(pos + 1 + i)
				       : workload_spec_wrong_token(pos + 1 + i);
		for (m = 0; m < nm; m++)
			res->spec_overwrites += speculate(r, s[m], prop, j, k, now);
		for (m = 0; m < nm; m++)
			replay_verify(r, s[m], j, now);
		res->spec_rounds++;
		res->spec_proposed += k;
		res->spec_accepted += j;
		pos += 1 + j;
	}
	if (q->ans_len != 0 && hit[0].hit_tokens > q->ans_at)
		res->gen_hit += hit[0].hit_tokens - q->ans_at < q->ans_len ? hit[0].hit_tokens - q->ans_at
									    : q->ans_len;
	if (nm == 2) {
		res->draft_hit += hit[1].hit_tokens;
		res->only_target += hit[0].hit_tokens != 0 && hit[1].hit_tokens == 0;
		res->only_draft += hit[0].hit_tokens == 0 && hit[1].hit_tokens != 0;
	}
out:
	for (m = 0; m < nm; m++)
		if (s[m] != NULL)
			replay_end(r, s[m], now);
	return hit[0].hit_tokens;
}

/*
 * The driver library's and the shard's settings for one replay: the
 * options', capacity @cap, second tier @l2 admitting by @admit, and with
 * --draft a second model beside the target.
 */
static void
tiers_params(const struct opts *o, const struct workload *t, uint64_t cap, uint64_t l2,
	     unsigned int admit, struct replay_params *p)
{
	p->pc.num_models = 1;
	p->pc.column = o->column;
	p->pc.policy = o->policy;
	p->pc.probation_pct = (uint8_t)o->probation_pct;
	p->pc.followup_pct = (uint8_t)o->followup_pct;
	p->pc.no_minus_one = o->no_minus_one;
	p->pc.dram_share_default = o->share_default;
	p->pc.dram_cap_default = o->cap_default;
	p->pc.l2_share_default = o->l2_share_default;
	p->pc.l2_cap_default = o->l2_cap_default;
	p->pc.ttl_last_ns = o->ttl_last_s * 1000000000ull;
	p->pc.ttl_first_ns = o->ttl_first_s * 1000000000ull;
	p->pc.model[0].num_caches = 1;
	p->pc.model[0].cache[0] = (struct prefixcache_cache){0, PREFIXCACHE_FULL, 0, 0, cap};
	p->pc.model[0].max_batch_tokens = 256;
	p->pc.model[0].l2_capacity_tokens = l2;
	p->pc.model[0].l2_admit = (uint8_t)admit;
	/* The recompute rule, with the same line as the block model's. */
	p->pc.model[0].refill_bytes_per_token = o->kv_bytes;
	p->pc.model[0].l2_latency_ns = (uint64_t)(o->l2_lat_us * 1000);
	p->pc.model[0].l2_bytes_per_ns = o->l2_gbps; /* GB/s = bytes per ns */
	/* --ttft takes every hit (the io-only view): ttft.c applies the rule
	 * to each afterwards, beside refilling all and computing all. */
	p->pc.model[0].recompute_tokens_per_ns = o->ttft ? 0 : o->recompute_tps / 1e9;
	p->l2_dir = l2 ? o->l2_dir : NULL;
	if (o->draft) {
		/* The draft: the target's settings, its own capacity, no second tier. */
		p->pc.num_models = 2;
		p->pc.model[1] = p->pc.model[0];
		p->pc.model[1].cache[0].capacity_tokens = o->draft_cap ? o->draft_cap : t->tokens + 1024;
		p->pc.model[1].l2_capacity_tokens = 0;
	}
}

/* @nrep replicas of @p, each with the options' organization TTLs: 0, or -1 (said). */
static int
tiers_create(const struct opts *o, const struct replay_params *p, uint64_t cap,
	     struct replay **r, uint32_t nrep)
{
	uint32_t k;
	unsigned int j;

	for (k = 0; k < nrep; k++) {
		r[k] = replay_create(p);
		if (r[k] == NULL) {
			fprintf(stderr, "kvss-trace: cannot set up capacity %" PRIu64 " (memory?)\n", cap);
			return -1;
		}
		for (j = 0; j < o->nottl; j++) {
			prefixcache_org_ttl(replay_pc(r[k]), o->ottl[j].iso, o->ottl[j].last_s * 1000000000ull,
					    o->ottl[j].first_s * 1000000000ull);
			prefixcache_org_dram_share(replay_pc(r[k]), o->ottl[j].iso, o->ottl[j].share,
						   o->ottl[j].cap);
			prefixcache_org_l2_share(replay_pc(r[k]), o->ottl[j].iso, o->ottl[j].l2_share,
						 o->ottl[j].l2_cap);
		}
	}
	return 0;
}

/*
 * Request @i of the trace through the replica the router picks (the only
 * one without a router): its hits, its organization's, its evictions and
 * refills on the trace's clock, the replicas' load this minute.
 */
static void
tiers_request(const struct opts *o, const struct workload *t, size_t i, struct replay **r,
	      struct router *router, struct balance *bal, struct rates *rt, struct result *res)
{
	const struct wl_req *q = &t->r[i];
	uint64_t now = q->ts_ms * 1000000ull;
	struct prefixcache_request rq = {
		.isolation_id = q->iso, .salt = q->salt, .tokens = q->tokens, .num_tokens = q->n,
		.cache_length_allowed = q->allowed, .first_multimodal = q->first_mm,
		.sequence_id = (uint32_t)i};
	uint32_t rep = 0, nrep = o->replicas > 1 ? o->replicas : 1, k;

	if (o->orgs)
		rq.isolation_id = proto_ref_isolation_id("org", 3) + q->first_block % o->orgs;
	if (router != NULL) {
		rep = route_pick(router, rq.isolation_id, q->tokens, q->n, q->ts_ms);
		if (q->ts_ms / 60000 != bal->minute) {
			if (bal->minute != UINT64_MAX)
				balance_close(bal, nrep);
			bal->minute = q->ts_ms / 60000;
		}
		bal->tok[rep] += q->n;
	}
	{
		struct prefixcache_stats before, after;
		size_t sec = (size_t)((q->ts_ms - rt->first_ms) / 1000);
		uint32_t hit;

		prefixcache_stats(replay_pc(r[rep]), &before);
		hit = trace_request(o, r[rep], &rq, q, i, now, res);
		prefixcache_stats(replay_pc(r[rep]), &after);
		if (res->ttft != NULL)
			res->ttft[i] = (struct ttft_req){
				.n = q->n, .hit = hit,
				.l2 = (uint32_t)(after.l2_hit_tokens - before.l2_hit_tokens)};
		if (sec >= rt->nsec)
			sec = rt->nsec - 1;
		rt->evict[sec] += after.evicted_tokens - before.evicted_tokens;
		rt->refill[sec] += hit;
		res->hit += hit;
		for (k = 0; k < o->nottl; k++)
			if (o->ottl[k].iso == rq.isolation_id) {
				res->org_input[k] += q->n;
				res->org_hit[k] += hit;
			}
	}
	res->input += q->n;
	res->requests++;
	if (q->first_mm < q->allowed)
		res->mm_trimmed += q->allowed - q->first_mm;
	if (o->ttl_last_s || o->ttl_first_s || o->nottl)
		prefixcache_expire(replay_pc(r[rep]), now, 4096);
}

/*
 * After the last request: the replicas' counters summed (the peak is the
 * largest), and the shard's own checks: none held more than its capacity
 * @cap, none holds tokens the driver does not account for.
 */
static void
tiers_collect(const struct opts *o, struct replay **r, uint32_t nrep, uint64_t cap,
	      struct result *res)
{
	uint32_t k;

	for (k = 0; k < nrep; k++) {
		struct prefixcache_stats ps;
		struct replay_stats rs;

		prefixcache_stats(replay_pc(r[k]), &ps);
		replay_stats(r[k], &rs);
		res->evicted += ps.evicted_tokens;
		res->deleted += ps.deleted_tokens;
		res->expired += ps.expired_tokens;
		if (ps.peak_stored_tokens > res->peak)
			res->peak = ps.peak_stored_tokens;
		res->perr += rs.protocol_errors;
		res->vfail += rs.verify_failures;
		res->l2_hit += ps.l2_hit_tokens;
		res->l2_down += ps.l2_down_tokens;
		res->l2_read += rs.l2_read_tokens;
		res->l2_dels += rs.l2_deletes;
		res->l2_dels_absorbed += rs.l2_deletes_absorbed;
		res->l2_slower += ps.l2_recompute_faster_tokens;
		if (rs.max_stored > cap && !(o->draft && (o->draft_cap == 0 || rs.max_stored <= o->draft_cap)))
			res->perr++;
		if (rs.unaccounted_tokens != 0) {
			fprintf(stderr, "kvss-trace: replica %u: the shard holds %" PRIu64 " tokens more or "
					"less than the driver accounts for\n", k, rs.unaccounted_tokens);
			res->perr++;
		}
	}
}

/*
 * Replay @p t through one driver, or through o->replicas independent drivers
 * (each with the same capacity) with requests routed by o->route; with @p
 * l2 tokens of second tier behind each (a lib/kvdisk file per replica in
 * o->l2_dir), admitting by rule @p admit. With --ttft, each request's
 * hit in res->ttft, for ttft.c (the caller frees it).
 */
int
run_tiers(const struct opts *o, const struct workload *t, uint64_t capacity, uint64_t l2,
	  unsigned int admit, struct result *res)
{
	struct replay_params p = {.bytes_per_token = 8, .num_buffers = 1};
	struct replay *r[ROUTE_MAX_REPLICAS] = {NULL};
	struct router *router = NULL;
	struct balance bal = {.minute = UINT64_MAX};
	size_t i, n = o->limit && o->limit < t->n ? o->limit : t->n, step = n / 20 ? n / 20 : 1;
	uint64_t cap = capacity ? capacity : t->tokens + 1024;
	uint32_t nrep = o->replicas > 1 ? o->replicas : 1, k;
	double t0 = mono_s();
	bool tty = isatty(2);
	int rc = -1;
	struct rates rt = {0};

	memset(res, 0, sizeof(*res));
	tiers_params(o, t, cap, l2, admit, &p);
	if (tiers_create(o, &p, cap, r, nrep) != 0)
		goto out;
	if (nrep > 1) {
		struct route_params rp = {.replicas = nrep, .policy = o->route, .seed = 0x5eed};

		router = route_create(&rp);
		if (router == NULL)
			goto out;
	}
	res->capacity = capacity;
	if (o->ttft && (res->ttft = calloc(n ? n : 1, sizeof(*res->ttft))) == NULL) {
		fprintf(stderr, "kvss-trace: out of memory\n");
		goto out;
	}
	if (rates_init(&rt, t, n) != 0) {
		fprintf(stderr, "kvss-trace: out of memory\n");
		goto out;
	}
	for (i = 0; i < n; i++) {
		tiers_request(o, t, i, r, router, &bal, &rt, res);
		if ((i + 1) % step == 0 && (tty || (i + 1) % (5 * step) == 0))
			fprintf(stderr, "%skvss-trace: capacity %" PRIu64 ": %zu/%zu requests, hit ratio %.3f%s",
				tty ? "\r" : "", capacity, i + 1, n,
				res->input ? (double)res->hit / res->input : 0, tty ? "" : "\n");
	}
	if (tty)
		fprintf(stderr, "\n");
	if (router != NULL) {
		balance_close(&bal, nrep);
		res->balance_mean = bal.n ? bal.sum / bal.n : 0;
		res->balance_worst = bal.worst;
	}
	tiers_collect(o, r, nrep, cap, res);
	rates_close(&rt, rt.evict, &res->evict_rate, &res->evict_peak);
	rates_close(&rt, rt.refill, &res->refill_rate, &res->refill_peak);
	res->peak_window_s = (unsigned int)rates_window(&rt);
	res->wall = mono_s() - t0;
	rc = 0;
out:
	if (rc != 0) {
		free(res->ttft);
		res->ttft = NULL;
	}
	free(rt.evict);
	free(rt.refill);
	for (k = 0; k < nrep; k++)
		replay_free(r[k]);
	route_free(router);
	return rc;
}
