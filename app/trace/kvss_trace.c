/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * kvss-trace: replay a request trace through the real driver library, a real
 * kvstore and an emulated wafer that checks every refilled byte, with the
 * trace's clock, for each shard capacity asked: "what hit ratio do I get
 * from this much shard memory?"
 * Trace formats: workload.h.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "replay.h"
#include "oracle.h"
#include "route.h"
#include "tier2.h"
#include "trace_priv.h"
#include "workload.h"
#include "args.h"
#include "config.h"

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

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
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

static int
run(const struct opts *o, const struct workload *t, uint64_t capacity, struct result *res)
{
	return run_tiers(o, t, capacity, 0, 0, res);
}

/*
 * Replay @p t through one driver, or through o->replicas independent drivers
 * (each with the same capacity) with requests routed by o->route; with @p
 * l2 tokens of second tier behind each (a lib/kvdisk file per replica in
 * o->l2_dir), admitting by rule @p admit.
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
	double t0 = now_s();
	bool tty = isatty(2);
	int rc = -1;
	struct rates rt = {0};

	p.pc.num_models = 1;
	p.pc.column = o->column;
	p.pc.policy = o->policy;
	p.pc.probation_pct = (uint8_t)o->probation_pct;
	p.pc.followup_pct = (uint8_t)o->followup_pct;
	p.pc.no_minus_one = o->no_minus_one;
	p.pc.ttl_last_ns = o->ttl_last_s * 1000000000ull;
	p.pc.ttl_first_ns = o->ttl_first_s * 1000000000ull;
	p.pc.model[0].num_caches = 1;
	p.pc.model[0].cache[0] = (struct prefixcache_cache){0, PREFIXCACHE_FULL, 0, 0, cap};
	p.pc.model[0].max_batch_tokens = 256;
	p.pc.model[0].l2_capacity_tokens = l2;
	p.pc.model[0].l2_admit = (uint8_t)admit;
	/* The recompute rule, with the same line as the block model's. */
	p.pc.model[0].refill_bytes_per_token = o->kv_bytes;
	p.pc.model[0].l2_latency_ns = (uint64_t)(o->l2_lat_us * 1000);
	p.pc.model[0].l2_bytes_per_ns = o->l2_gbps; /* GB/s = bytes per ns */
	p.pc.model[0].recompute_tokens_per_ns = o->recompute_tps / 1e9;
	p.l2_dir = l2 ? o->l2_dir : NULL;
	if (o->draft) {
		/* The draft: the target's settings, its own capacity, no second tier. */
		p.pc.num_models = 2;
		p.pc.model[1] = p.pc.model[0];
		p.pc.model[1].cache[0].capacity_tokens = o->draft_cap ? o->draft_cap : t->tokens + 1024;
		p.pc.model[1].l2_capacity_tokens = 0;
	}
	for (k = 0; k < nrep; k++) {
		unsigned int j;

		r[k] = replay_create(&p);
		if (r[k] == NULL) {
			fprintf(stderr, "kvss-trace: cannot set up capacity %" PRIu64 " (memory?)\n", cap);
			goto out;
		}
		for (j = 0; j < o->nottl; j++)
			prefixcache_org_ttl(replay_pc(r[k]), o->ottl[j].iso, o->ottl[j].last_s * 1000000000ull,
					    o->ottl[j].first_s * 1000000000ull);
	}
	if (nrep > 1) {
		struct route_params rp = {.replicas = nrep, .policy = o->route, .seed = 0x5eed};

		router = route_create(&rp);
		if (router == NULL)
			goto out;
	}
	memset(res, 0, sizeof(*res));
	res->capacity = capacity;
	if (rates_init(&rt, t, n) != 0) {
		fprintf(stderr, "kvss-trace: out of memory\n");
		goto out;
	}
	for (i = 0; i < n; i++) {
		const struct wl_req *q = &t->r[i];
		uint64_t now = q->ts_ms * 1000000ull;
		struct prefixcache_request rq = {
			.isolation_id = q->iso, .tokens = q->tokens, .num_tokens = q->n,
			.cache_length_allowed = q->allowed, .first_multimodal = q->first_mm,
			.sequence_id = (uint32_t)i};
		uint32_t rep = 0;

		if (o->orgs)
			rq.isolation_id = proto_ref_isolation_id("org", 3) + q->first_block % o->orgs;
		if (router != NULL) {
			rep = route_pick(router, rq.isolation_id, q->tokens, q->n, q->ts_ms);
			if (q->ts_ms / 60000 != bal.minute) {
				if (bal.minute != UINT64_MAX)
					balance_close(&bal, nrep);
				bal.minute = q->ts_ms / 60000;
			}
			bal.tok[rep] += q->n;
		}
		{
			struct prefixcache_stats before, after;
			size_t sec = (size_t)((q->ts_ms - rt.first_ms) / 1000);
			uint32_t hit;

			prefixcache_stats(replay_pc(r[rep]), &before);
			hit = trace_request(o, r[rep], &rq, q, i, now, res);
			prefixcache_stats(replay_pc(r[rep]), &after);
			if (sec >= rt.nsec)
				sec = rt.nsec - 1;
			rt.evict[sec] += after.evicted_tokens - before.evicted_tokens;
			rt.refill[sec] += hit;
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
		res->l2_slower += ps.l2_recompute_faster_tokens;
		if (rs.max_stored > cap && !(o->draft && (o->draft_cap == 0 || rs.max_stored <= o->draft_cap)))
			res->perr++;
		if (rs.unaccounted_tokens != 0) {
			fprintf(stderr, "kvss-trace: replica %u: the shard holds %" PRIu64 " tokens more or "
					"less than the driver accounts for\n", k, rs.unaccounted_tokens);
			res->perr++;
		}
	}
	rates_close(&rt, rt.evict, &res->evict_rate, &res->evict_peak);
	rates_close(&rt, rt.refill, &res->refill_rate, &res->refill_peak);
	res->peak_window_s = (unsigned int)rates_window(&rt);
	res->wall = now_s() - t0;
	rc = 0;
out:
	free(rt.evict);
	free(rt.refill);
	for (k = 0; k < nrep; k++)
		replay_free(r[k]);
	route_free(router);
	return rc;
}

/* A list of token counts ("1e6,3e6,inf") into @p v (16 at most; inf: 0). */
static int
parse_capacities(const char *s, uint64_t *v, unsigned int *n)
{
	char buf[512], *tok, *save = NULL;

	if (strlen(s) >= sizeof(buf))
		return -EINVAL;
	strcpy(buf, s);
	for (tok = strtok_r(buf, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
		char *end;
		double x;

		if (*n == 16)
			return -EINVAL;
		if (strcmp(tok, "inf") == 0 || strcmp(tok, "unlimited") == 0) {
			v[(*n)++] = 0;
			continue;
		}
		x = strtod(tok, &end);
		if (end == tok || *end != '\0' || x < 0 || x > 1e12)
			return -EINVAL;
		v[(*n)++] = (uint64_t)x;
	}
	return *n ? 0 : -EINVAL;
}

/* A positive number @p arg of option @p opt, at most @p hi; or a message and -1. */
static int
num_f(const char *opt, const char *arg, double hi, double *out)
{
	char *end;
	double x = strtod(arg, &end);

	if (end == arg || *end != '\0' || !(x > 0) || x > hi) {
		fprintf(stderr, "kvss-trace: %s: '%s' is not a number in (0, %g]\n", opt, arg, hi);
		return -1;
	}
	*out = x;
	return 0;
}

/* Whole number @p arg of option @p opt in [lo, hi] (1e6 allowed), or a message and -1. */
static int
num(const char *opt, const char *arg, uint64_t lo, uint64_t hi, uint64_t *out)
{
	char err[256];

	if (args_u64(opt, arg, lo, hi, out, err, sizeof(err)) != 0) {
		fprintf(stderr, "kvss-trace: %s\n", err);
		return -1;
	}
	return 0;
}

#define NUM(opt, lo, hi, dst)                                                                      \
	do {                                                                                       \
		uint64_t v_;                                                                       \
		if (num(opt, optarg, lo, hi, &v_) != 0)                                            \
			return 2;                                                                  \
		(dst) = (__typeof__(dst))v_;                                                       \
	} while (0)

/* TTLs up to ten years, in seconds. */
#define TTL_MAX_S (10ull * 365 * 86400)

static int
org_ttl_add(struct opts *o, const char *name, uint64_t last_s, uint64_t first_s, const char *opt)
{
	unsigned int j;

	if (name[0] == '\0' || strlen(name) >= sizeof(o->ottl[0].name)) {
		fprintf(stderr, "kvss-trace: %s: an organization's name of 1 to 63 bytes\n", opt);
		return -1;
	}
	for (j = 0; j < o->nottl; j++)
		if (strcmp(o->ottl[j].name, name) == 0) {
			fprintf(stderr, "kvss-trace: %s: '%s' named twice\n", opt, name);
			return -1;
		}
	if (o->nottl == sizeof(o->ottl) / sizeof(o->ottl[0])) {
		fprintf(stderr, "kvss-trace: %s: at most %zu organizations\n", opt,
			sizeof(o->ottl) / sizeof(o->ottl[0]));
		return -1;
	}
	snprintf(o->ottl[o->nottl].name, sizeof(o->ottl[0].name), "%s", name);
	o->ottl[o->nottl].iso = proto_ref_isolation_id(name, strlen(name));
	o->ottl[o->nottl].last_s = last_s;
	o->ottl[o->nottl++].first_s = first_s;
	return 0;
}

/* --org-ttl NAME:LAST_S:FIRST_S (0: the global TTL), as driver.orgs gives them. */
static int
org_ttl_arg(struct opts *o, const char *arg)
{
	char name[64], tail;
	unsigned long long l, f;
	const char *c = strchr(arg, ':');

	if (c == NULL || (size_t)(c - arg) >= sizeof(name) ||
	    sscanf(c + 1, "%llu:%llu%c", &l, &f, &tail) != 2 || l > TTL_MAX_S || f > TTL_MAX_S ||
	    strchr(c + 1, '-') != NULL) {
		fprintf(stderr, "kvss-trace: --org-ttl: '%s': want NAME:TTL_LAST_S:TTL_FIRST_S "
				"(seconds, up to ten years; 0: the global one)\n", arg);
		return -1;
	}
	memcpy(name, arg, (size_t)(c - arg));
	name[c - arg] = '\0';
	return org_ttl_add(o, name, l, f, "--org-ttl");
}

/* --orgs-from FILE: the driver.orgs of a kvss configuration, as the application reads it. */
static int
orgs_from(struct opts *o, const char *path)
{
	static struct kvss_config cfg;
	char err[512];
	uint16_t j;

	if (kvss_config_load_as(path, KVSS_ROLE_DRIVER, &cfg, err, sizeof(err)) != 0) {
		fprintf(stderr, "kvss-trace: --orgs-from: %s\n", err);
		return -1;
	}
	if (cfg.driver.num_orgs == 0)
		fprintf(stderr, "kvss-trace: --orgs-from: %s names no organization (driver.orgs)\n", path);
	for (j = 0; j < cfg.driver.num_orgs; j++)
		if (org_ttl_add(o, cfg.driver.org[j].name, cfg.driver.org[j].ttl_last_ns / 1000000000ull,
				cfg.driver.org[j].ttl_first_ns / 1000000000ull, "--orgs-from") != 0)
			return -1;
	return 0;
}

int
main(int argc, char **argv)
{
	static const struct option lo[] = {
		{"trace", required_argument, NULL, 't'}, {"capacity", required_argument, NULL, 'c'},
		{"column", required_argument, NULL, 'C'}, {"policy", required_argument, NULL, 'p'},
		{"ttl-last", required_argument, NULL, 'L'}, {"ttl-first", required_argument, NULL, 'F'},
		{"block-tokens", required_argument, NULL, 'b'}, {"json", no_argument, NULL, 'j'},
		{"limit", required_argument, NULL, 'n'}, {"orgs", required_argument, NULL, 'o'},
		{"baseline", no_argument, NULL, 'B'}, {"no-minus-one", no_argument, NULL, 'M'},
		{"generate", required_argument, NULL, 'g'}, {"replicas", required_argument, NULL, 'R'},
		{"route", required_argument, NULL, 'r'}, {"probation", required_argument, NULL, 'P'},
		{"oracle", no_argument, NULL, 'O'}, {"followup", required_argument, NULL, 'U'},
		{"kv-bytes-per-token", required_argument, NULL, 'K'}, {"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, 'V'}, {"l2", required_argument, NULL, '2'},
		{"l2-admit", required_argument, NULL, 'A'},
		{"recompute-tokens-per-s", required_argument, NULL, 'T'},
		{"l2-read-gbps", required_argument, NULL, 'G'},
		{"l2-latency-us", required_argument, NULL, 'Y'},
		{"l2-dir", required_argument, NULL, 'D'}, {"plot", required_argument, NULL, 'Q'},
		{"org-ttl", required_argument, NULL, 'X'}, {"orgs-from", required_argument, NULL, 'W'},
		{"multimodal-every", required_argument, NULL, 'I'},
		{"speculate", required_argument, NULL, 'S'},
		{"spec-reject-pct", required_argument, NULL, 'J'},
		{"spec-seed", required_argument, NULL, 'E'}, {"draft", required_argument, NULL, 'd'},
		{NULL, 0, NULL, 0}};
	struct opts o = {.column = 64, .block = 512, .l2_admit = 1u << TIER2_ADMIT_ALL,
			 .l2_gbps = 3.0, .l2_lat_us = 100, .spec_reject_pct = 20, .spec_seed = 1};
	struct workload t = {0};
	struct oracle_blocks *blocks = NULL;
	struct curves cv = {0};
	unsigned int pi;
	char err[512];
	unsigned int k;
	int c, bad = 0;

	while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		switch (c) {
		case 't':
			o.trace = optarg;
			break;
		case 'c':
			if (parse_capacities(optarg, o.capacity, &o.ncap) != 0) {
				fprintf(stderr, "kvss-trace: --capacity: bad list '%s'\n", optarg);
				return 2;
			}
			break;
		case 'O':
			o.oracle = true;
			break;
		case '2':
			if (parse_capacities(optarg, o.l2, &o.nl2) != 0) {
				fprintf(stderr, "kvss-trace: --l2: bad list '%s'\n", optarg);
				return 2;
			}
			break;
		case 'A': {
			char buf[64], *tok, *save = NULL;
			unsigned int a;

			snprintf(buf, sizeof(buf), "%s", optarg);
			o.l2_admit = 0;
			for (tok = strtok_r(buf, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
				for (a = 0; admit_names[a] != NULL && strcmp(tok, admit_names[a]) != 0; a++)
					;
				if (admit_names[a] == NULL) {
					fprintf(stderr, "kvss-trace: --l2-admit: '%s' is not all or seen2\n", tok);
					return 2;
				}
				o.l2_admit |= 1u << a;
			}
			break;
		}
		case 'T':
			if (num_f("--recompute-tokens-per-s", optarg, 1e12, &o.recompute_tps) != 0)
				return 2;
			break;
		case 'G':
			if (num_f("--l2-read-gbps", optarg, 1e4, &o.l2_gbps) != 0)
				return 2;
			break;
		case 'Y':
			if (num_f("--l2-latency-us", optarg, 1e7, &o.l2_lat_us) != 0)
				return 2;
			break;
		case 'D':
			o.l2_dir = optarg;
			break;
		case 'K':
			NUM("--kv-bytes-per-token", 1, 1ull << 30, o.kv_bytes);
			break;
		case 'P':
			NUM("--probation", 1, 90, o.probation_pct);
			break;
		case 'U':
			NUM("--followup", 1, 100, o.followup_pct);
			break;
		case 'C':
			NUM("--column", 1, 4096, o.column);
			break;
		case 'p': {
			char buf[128], *tok, *save = NULL;

			snprintf(buf, sizeof(buf), "%s", optarg);
			o.npol = 0;
			for (tok = strtok_r(buf, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
				int pol = 0;

				while (prefixcache_policy_names[pol] != NULL &&
				       strcmp(tok, prefixcache_policy_names[pol]) != 0)
					pol++;
				if (prefixcache_policy_names[pol] == NULL || o.npol == 8) {
					fprintf(stderr, "kvss-trace: --policy: unknown '%s'\n", tok);
					return 2;
				}
				o.pols[o.npol++] = (enum prefixcache_policy)pol;
			}
			if (o.npol == 0) {
				fprintf(stderr, "kvss-trace: --policy: empty\n");
				return 2;
			}
			o.policy = o.pols[0];
			break;
		}
		case 'Q':
			o.plot = optarg;
			break;
		case 'I':
			NUM("--multimodal-every", 1, 1000000, o.mm_every);
			break;
		case 'S':
			NUM("--speculate", 1, 64, o.spec_tokens);
			break;
		case 'J':
			NUM("--spec-reject-pct", 0, 100, o.spec_reject_pct);
			break;
		case 'E':
			NUM("--spec-seed", 0, 1ull << 62, o.spec_seed);
			break;
		case 'd': {
			uint64_t v[16];
			unsigned int nv = 0;

			if (parse_capacities(optarg, v, &nv) != 0 || nv != 1) {
				fprintf(stderr, "kvss-trace: --draft: '%s' is not one capacity in tokens "
						"(or inf)\n", optarg);
				return 2;
			}
			o.draft = true;
			o.draft_cap = v[0];
			break;
		}
		case 'X':
			if (org_ttl_arg(&o, optarg) != 0)
				return 2;
			break;
		case 'W':
			if (orgs_from(&o, optarg) != 0)
				return 2;
			break;
		case 'L':
			NUM("--ttl-last", 0, TTL_MAX_S, o.ttl_last_s);
			break;
		case 'F':
			NUM("--ttl-first", 0, TTL_MAX_S, o.ttl_first_s);
			break;
		case 'b':
			NUM("--block-tokens", 1, 1u << 20, o.block);
			break;
		case 'j':
			o.json = true;
			break;
		case 'n':
			NUM("--limit", 1, WL_MAX_REQUESTS, o.limit);
			break;
		case 'o':
			NUM("--orgs", 1, 1u << 20, o.orgs);
			break;
		case 'B':
			o.baseline = true;
			break;
		case 'M':
			o.no_minus_one = true;
			break;
		case 'g':
			NUM("--generate", 1, WL_MAX_REQUESTS, o.generate);
			break;
		case 'R':
			NUM("--replicas", 1, ROUTE_MAX_REPLICAS, o.replicas);
			break;
		case 'r': {
			int pol = route_policy_parse(optarg);

			if (pol < 0) {
				fprintf(stderr, "kvss-trace: --route: '%s' is not one of affinity, random, "
						"org, prefix, chash\n", optarg);
				return 2;
			}
			o.route = (enum route_policy)pol;
			break;
		}
		case 'V':
			args_version("kvss-trace", PROTO_VERSION);
			return 0;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (bad || (o.trace == NULL) == (o.generate == 0) || o.ncap == 0) {
		usage(stderr);
		return 2;
	}
	if (o.generate != 0) {
		if (workload_generate(o.generate, &t) != 0) {
			fprintf(stderr, "kvss-trace: out of memory\n");
			return 1;
		}
		workload_mark_multimodal(&t, o.mm_every, 64);
	} else if (workload_load(o.trace, o.block, 0, &t, err, sizeof(err)) != 0) {
		fprintf(stderr, "kvss-trace: %s\n", err);
		return 2;
	}
	if (o.recompute_tps > 0 && o.kv_bytes == 0) {
		fprintf(stderr, "kvss-trace: --recompute-tokens-per-s needs --kv-bytes-per-token (what "
				"an L2 read of a token costs)\n");
		workload_free(&t);
		return 2;
	}
	if ((o.oracle || o.nl2) && (t.n == 0 || t.r[0].ids == NULL)) {
		fprintf(stderr, "kvss-trace: --oracle and --l2 need a trace with block ids (Mooncake "
				"format)\n");
		workload_free(&t);
		return 2;
	}
	if ((o.baseline || o.oracle || o.nl2) && (blocks = oracle_blocks_new(&t, o.limit)) == NULL) {
		fprintf(stderr, "kvss-trace: out of memory\n");
		workload_free(&t);
		return 1;
	}
	if (blocks != NULL)
		oracle_blocks_replay_rule(blocks, o.column, !o.no_minus_one);
	if (!o.json)
		printf("%-12s %8s %12s %12s %9s %12s %12s %10s %12s %6s %6s %7s\n", "capacity",
		       "requests", "input", "hit", "hit_ratio", "evicted", "deleted", "expired",
		       "peak_stored", "perr", "vfail", "wall_s");
	if (o.npol == 0)
		o.pols[o.npol++] = o.policy;
	for (pi = 0, k = 0; pi < o.npol; k++) {
		struct result res;
		int rc2;

		if (k == o.ncap) {
			k = (unsigned int)-1; /* the next policy, from the first capacity */
			pi++;
			continue;
		}
		o.policy = o.pols[pi];
		if (o.npol > 1 && k == 0 && !o.json)
			printf("policy %s\n", prefixcache_policy_names[o.policy]);
		if (run(&o, &t, o.capacity[k], &res) != 0)
			return 1;
		res.baseline = o.baseline ? oracle_plain_lru(blocks, o.capacity[k], o.block) : -1;
		res.belady = res.belady_seen = res.told = res.told120 = res.told_uses = -1;
		res.told_rate = res.life_rate = res.fitted = -1;
		if (o.capacity[k] != 0 && cv.n < 16 && pi == 0) {
			cv.x[cv.n] = (double)o.capacity[k];
			cv.base[cv.n] = res.baseline;
			if (o.plot != NULL && o.nl2) {
				struct tier2_params tp = {.l1_tokens = o.capacity[k], .l2_tokens = o.l2[0],
							  .block = o.block,
							  .admit = o.l2_admit & 1 ? TIER2_ADMIT_ALL
										  : TIER2_ADMIT_SEEN2};
				struct tier2_result tr;

				if (tier2_run(blocks, &tp, &tr) == 0 && tr.input)
					cv.l2[cv.n] = (double)(tr.hit_l1 + tr.hit_l2) / (double)tr.input;
			}
			cv.n++;
		}
		if (o.capacity[k] != 0) {
			unsigned int j;

			for (j = 0; j < cv.n && cv.x[j] != (double)o.capacity[k]; j++)
				;
			if (j < cv.n)
				cv.hit[pi][j] = res.input ? (double)res.hit / (double)res.input : 0;
		}
		if (o.oracle && pi > 0) {
			/* The references do not depend on the policy: once is enough. */
			res.belady = -1;
		} else if (o.oracle) {
			res.belady = oracle_told(blocks, o.capacity[k], o.block, ORACLE_BELADY);
			res.belady_seen = oracle_told(blocks, o.capacity[k], o.block, ORACLE_BELADY_SEEN);
			res.told = oracle_lru_told(blocks, o.capacity[k], o.block, 0);
			res.told120 = oracle_lru_told(blocks, o.capacity[k], o.block, 120000);
			res.told_uses = oracle_told(blocks, o.capacity[k], o.block, ORACLE_TOLD_USES);
			res.told_rate = oracle_told(blocks, o.capacity[k], o.block, ORACLE_TOLD_RATE);
			res.life_rate = oracle_told(blocks, o.capacity[k], o.block, ORACLE_TOLD_LIFE_RATE);
			res.fitted = oracle_fitted_table(blocks, o.capacity[k], o.block);
			if (o.capacity[k] != 0 && cv.n > 0 && cv.x[cv.n - 1] == (double)o.capacity[k])
				cv.belady[cv.n - 1] = res.belady;
		}
		bad |= res.perr != 0 || res.vfail != 0;
		if (o.json) {
			char cs[32];

			if (res.capacity)
				snprintf(cs, sizeof(cs), "%" PRIu64, res.capacity);
			else
				snprintf(cs, sizeof(cs), "null");
			printf("{\"policy\": \"%s\", ", prefixcache_policy_names[o.policy]);
			printf("\"capacity_tokens\": %s, \"requests\": %" PRIu64
			       ", \"input_tokens\": %" PRIu64 ", \"hit_tokens\": %" PRIu64
			       ", \"hit_ratio\": %.4f, \"evicted_tokens\": %" PRIu64
			       ", \"deleted_tokens\": %" PRIu64 ", \"expired_tokens\": %" PRIu64
			       ", \"peak_stored_tokens\": %" PRIu64 ", \"protocol_errors\": %" PRIu64
			       ", \"verify_failures\": %" PRIu64 ", \"wall_s\": %.2f",
			       cs, res.requests, res.input, res.hit,
			       res.input ? (double)res.hit / res.input : 0.0, res.evicted, res.deleted,
			       res.expired, res.peak, res.perr, res.vfail, res.wall);
			printf(", \"evict_tokens_per_s\": %.1f, \"evict_tokens_per_s_peak\": %.1f"
			       ", \"refill_tokens_per_s\": %.1f, \"refill_tokens_per_s_peak\": %.1f"
			       ", \"peak_window_s\": %u",
			       res.evict_rate, res.evict_peak, res.refill_rate, res.refill_peak,
			       res.peak_window_s);
			if (o.kv_bytes)
				printf(", \"evict_gbps\": %.3f, \"evict_gbps_peak\": %.3f"
				       ", \"refill_gbps\": %.3f, \"refill_gbps_peak\": %.3f",
				       gbps(&o, res.evict_rate), gbps(&o, res.evict_peak),
				       gbps(&o, res.refill_rate), gbps(&o, res.refill_peak));
			if (res.baseline >= 0)
				printf(", \"baseline_lru_hit_ratio\": %.4f", res.baseline);
			if (res.belady >= 0)
				printf(", \"belady_hit_ratio\": %.4f, \"belady_seen_hit_ratio\": %.4f"
				       ", \"told_lru_hit_ratio\": %.4f, \"told_lru_120s_hit_ratio\": %.4f"
				       ", \"told_uses_hit_ratio\": %.4f, \"told_rate_hit_ratio\": %.4f"
				       ", \"told_life_rate_hit_ratio\": %.4f, \"fitted_table_hit_ratio\": %.4f",
				       res.belady, res.belady_seen, res.told, res.told120, res.told_uses,
				       res.told_rate, res.life_rate, res.fitted);
			if (o.replicas > 1)
				printf(", \"replicas\": %u, \"route\": \"%s\", \"balance_mean\": %.3f"
				       ", \"balance_worst\": %.3f", o.replicas, route_policy_name(o.route),
				       res.balance_mean, res.balance_worst);
			printf(", \"multimodal_trimmed_tokens\": %" PRIu64 ", \"generated_hit_tokens\": %" PRIu64,
			       res.mm_trimmed, res.gen_hit);
			if (o.draft)
				printf(", \"draft_capacity_tokens\": %" PRIu64 ", \"draft_hit_tokens\": %" PRIu64
				       ", \"draft_hit_ratio\": %.4f, \"requests_hit_target_only\": %" PRIu64
				       ", \"requests_hit_draft_only\": %" PRIu64, o.draft_cap, res.draft_hit,
				       res.input ? (double)res.draft_hit / res.input : 0.0, res.only_target,
				       res.only_draft);
			if (o.spec_tokens)
				printf(", \"spec_tokens\": %u, \"spec_reject_pct\": %u, \"spec_seed\": %" PRIu64
				       ", \"spec_rounds\": %" PRIu64 ", \"spec_proposed\": %" PRIu64
				       ", \"spec_accepted\": %" PRIu64 ", \"spec_overwrites\": %" PRIu64,
				       o.spec_tokens, o.spec_reject_pct, o.spec_seed, res.spec_rounds,
				       res.spec_proposed, res.spec_accepted, res.spec_overwrites);
			if (o.nottl) {
				unsigned int j;

				printf(", \"orgs\": [");
				for (j = 0; j < o.nottl; j++)
					printf("%s{\"org\": \"%s\", \"ttl_last_s\": %" PRIu64 ", \"ttl_first_s\": %" PRIu64
					       ", \"input_tokens\": %" PRIu64 ", \"hit_tokens\": %" PRIu64
					       ", \"hit_ratio\": %.4f}", j ? ", " : "", o.ottl[j].name, o.ottl[j].last_s,
					       o.ottl[j].first_s, res.org_input[j], res.org_hit[j],
					       res.org_input[j] ? (double)res.org_hit[j] / (double)res.org_input[j] : 0.0);
				printf("]");
			}
			if (o.nl2 && (rc2 = print_l2(&o, &t, blocks, o.capacity[k])) != 0) {
				if (rc2 < 0)
					return 1;
				bad = 1;
			}
			printf("}\n");
		} else {
			char cs[32];

			if (res.capacity)
				snprintf(cs, sizeof(cs), "%" PRIu64, res.capacity);
			else
				snprintf(cs, sizeof(cs), "unlimited");
			printf("%-12s %8" PRIu64 " %12" PRIu64 " %12" PRIu64 " %9.4f %12" PRIu64
			       " %12" PRIu64 " %10" PRIu64 " %12" PRIu64 " %6" PRIu64 " %6" PRIu64
			       " %7.1f\n",
			       cs, res.requests, res.input, res.hit,
			       res.input ? (double)res.hit / res.input : 0.0, res.evicted, res.deleted,
			       res.expired, res.peak, res.perr, res.vfail, res.wall);
			printf("%-12s tokens/s of trace time: evicted %.0f, busiest %u s %.0f; refilled "
			       "%.0f, busiest %u s %.0f", "", res.evict_rate, res.peak_window_s,
			       res.evict_peak, res.refill_rate, res.peak_window_s, res.refill_peak);
			if (o.kv_bytes)
				printf(" (Gb/s: %.2f, %.2f; %.2f, %.2f)", gbps(&o, res.evict_rate),
				       gbps(&o, res.evict_peak), gbps(&o, res.refill_rate),
				       gbps(&o, res.refill_peak));
			printf("\n");
			if (res.baseline >= 0)
				printf("%-12s plain LRU over blocks: hit ratio %.4f\n", "", res.baseline);
			if (res.belady >= 0)
				printf("%-12s offline: Belady with bypass %.4f, not told of first "
				       "sightings %.4f; LRU told which blocks return %.4f, within 120 s "
				       "%.4f; told how many more uses %.4f, and when the last %.4f, "
				       "only the life's mean gap %.4f; by a table fitted on the trace "
				       "%.4f\n",
				       "", res.belady, res.belady_seen, res.told, res.told120, res.told_uses,
				       res.told_rate, res.life_rate, res.fitted);
			if (o.replicas > 1)
				printf("%-12s %u replicas, route %s: busiest replica over the mean per minute: "
				       "mean %.3f, worst %.3f\n", "", o.replicas, route_policy_name(o.route),
				       res.balance_mean, res.balance_worst);
			if (res.mm_trimmed)
				printf("%-12s multimodal: %" PRIu64 " tokens not cached, after a multimodal "
				       "token\n", "", res.mm_trimmed);
			if (res.gen_hit)
				printf("%-12s %" PRIu64 " hit tokens are an earlier turn's answer (generated)\n",
				       "", res.gen_hit);
			if (o.draft)
				printf("%-12s draft (capacity %" PRIu64 "%s): %" PRIu64 " tokens hit, hit ratio "
				       "%.4f; requests hit in the target only %" PRIu64 ", in the draft only %"
				       PRIu64 "\n", "", o.draft_cap, o.draft_cap ? "" : ", unlimited",
				       res.draft_hit, res.input ? (double)res.draft_hit / res.input : 0.0,
				       res.only_target, res.only_draft);
			if (o.spec_tokens)
				printf("%-12s speculative decoding (%u per round, %u%% rejected, seed %" PRIu64
				       "): %" PRIu64 " rounds, %" PRIu64 " of %" PRIu64 " proposals accepted, %"
				       PRIu64 " rejected tokens evicted and overwritten\n", "", o.spec_tokens,
				       o.spec_reject_pct, o.spec_seed, res.spec_rounds, res.spec_accepted,
				       res.spec_proposed, res.spec_overwrites);
			for (unsigned int j = 0; j < o.nottl; j++)
				printf("%-12s org %s (ttl_last_s %" PRIu64 ", ttl_first_s %" PRIu64 "; 0: the "
				       "global): %" PRIu64 " of %" PRIu64 " prompt tokens hit, hit ratio %.4f\n", "",
				       o.ottl[j].name, o.ottl[j].last_s, o.ottl[j].first_s, res.org_hit[j],
				       res.org_input[j],
				       res.org_input[j] ? (double)res.org_hit[j] / (double)res.org_input[j] : 0.0);
			if (o.nl2 && (rc2 = print_l2(&o, &t, blocks, o.capacity[k])) != 0) {
				if (rc2 < 0)
					return 1;
				bad = 1;
			}
		}
		fflush(stdout);
	}
	if (o.plot != NULL && draw(&o, &cv) != 0)
		bad = 1;
	oracle_blocks_free(blocks);
	workload_free(&t);
	return bad ? 1 : 0;
}
