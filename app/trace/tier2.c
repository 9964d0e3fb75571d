/* SPDX-License-Identifier: BSD-3-Clause */
/* A second tier over a trace's blocks (kvss-trace --l2): see tier2.h. */
#include "tier2.h"

#include <string.h>

#include "oracle_priv.h"

enum { IN_NONE, IN_L1, IN_L2 };

struct tier2 {
	const struct oracle_blocks *a;
	const struct tier2_params *p;
	uint8_t *where;	  /* per block: IN_NONE, IN_L1, IN_L2 */
	uint32_t *uses;	  /* per block: accesses so far */
	uint8_t *brief;	  /* per block: its latest request answered briefly (admit short) */
	struct lru l1, l2;
	/* Blocks held and the most each tier holds (capacity / block, as
	 * oracle_plain_lru counts: with no L2 the two agree exactly). */
	uint64_t used1, used2, max1, max2;
	uint64_t *wsec, *rsec; /* L2 tokens written and read, per second of the trace */
	size_t nsec;
	uint64_t first_ms;
	struct tier2_result *r;
};

static size_t
sec_of(const struct tier2 *t, uint64_t ts_ms)
{
	size_t s = (size_t)((ts_ms - t->first_ms) / 1000);

	return s < t->nsec ? s : t->nsec - 1;
}

/* L1 frees its least recent block: down to L2 if admitted (L2 freeing its own). */
static void
l1_free_one(struct tier2 *t, size_t sec)
{
	uint32_t b = t->l1.list.tail;

	lru_unlink(&t->l1, b);
	t->used1--;
	t->where[b] = IN_NONE;
	if (t->max2 == 0 || (t->p->admit == TIER2_ADMIT_SEEN2 && t->uses[b] < 2) ||
	    (t->p->admit == TIER2_ADMIT_SHORT && t->uses[b] < 2 && !t->brief[b]))
		return;
	if (t->used2 == t->max2) {
		t->where[t->l2.list.tail] = IN_NONE;
		lru_unlink(&t->l2, t->l2.list.tail);
		t->used2--;
	}
	lru_push(&t->l2, b);
	t->where[b] = IN_L2;
	t->used2++;
	t->r->written += t->p->block;
	t->wsec[sec] += t->p->block;
}

/* Block @b most recent in L1, from wherever it was. */
static void
to_l1(struct tier2 *t, uint32_t b, size_t sec)
{
	if (t->where[b] == IN_L1) {
		lru_touch(&t->l1, b);
		return;
	}
	if (t->where[b] == IN_L2) {
		lru_unlink(&t->l2, b);
		t->used2--;
		t->where[b] = IN_NONE;
	}
	if (t->max1 == 0)
		return; /* L1 smaller than a block: nothing kept */
	if (t->used1 == t->max1)
		l1_free_one(t, sec);
	lru_push(&t->l1, b);
	t->where[b] = IN_L1;
	t->used1++;
}

/* The most tokens per second over any 10 consecutive seconds of @v. */
static double
busiest_10s(const uint64_t *v, size_t n)
{
	uint64_t sum = 0, best = 0;
	size_t i, w = n < 10 ? n : 10;

	for (i = 0; i < n; i++) {
		sum += v[i];
		if (i >= w)
			sum -= v[i - w];
		if (sum > best)
			best = sum;
	}
	return w ? (double)best / (double)w : 0;
}

/* The trace's span: t->first_ms, and its seconds t->nsec; the last request's time. */
static uint64_t
tier2_span(struct tier2 *t)
{
	const struct oracle_blocks *a = t->a;
	uint64_t last_ms;
	size_t i;

	t->first_ms = a->t->r[0].ts_ms;
	last_ms = a->t->r[a->nreq - 1].ts_ms;
	for (i = 0; i < a->nreq; i++) {
		if (a->t->r[i].ts_ms < t->first_ms)
			t->first_ms = a->t->r[i].ts_ms;
		if (a->t->r[i].ts_ms > last_ms)
			last_ms = a->t->r[i].ts_ms;
	}
	t->nsec = (size_t)((last_ms - t->first_ms) / 1000) + 1;
	return last_ms;
}

/*
 * Request @i: its hit, from L1 and from L2 (none from L2 where computing
 * is faster than reading), then its blocks to L1 and their brief mark.
 */
static void
tier2_request(struct tier2 *t, size_t i)
{
	const struct oracle_blocks *a = t->a;
	const struct tier2_params *p = t->p;
	struct tier2_result *r = t->r;
	double bpt = p->bytes_per_token ? (double)p->bytes_per_token : 1;
	const struct wl_req *q = &a->t->r[i];
	uint32_t k, base = a->first[i];
	size_t sec = sec_of(t, q->ts_ms);
	uint64_t h = 0, take, l1part = 0, got = 0;

	r->input += q->n;
	/* The hit: the leading blocks held in either tier. */
	for (k = 0; k < q->nids && t->where[a->blk[base + k]] != IN_NONE; k++)
		h += block_tokens(q, k, p->block);
	take = replayable(a, q, h);
	/* Which tier each token taken comes from, in order. */
	for (k = 0; got < take; k++) {
		uint64_t n = block_tokens(q, k, p->block);

		if (n > take - got)
			n = take - got;
		if (t->where[a->blk[base + k]] == IN_L1)
			l1part += n;
		got += n;
	}
	if (take > l1part && p->recompute_tokens_per_s > 0 && p->l2_read_gbps > 0) {
		double n = (double)(take - l1part);
		double read_s = p->l2_read_latency_us / 1e6 + n * bpt / (p->l2_read_gbps * 1e9);

		if (read_s > n / p->recompute_tokens_per_s) {
			r->recompute_faster += take - l1part;
			take = l1part;
		}
	}
	r->hit_l1 += l1part;
	r->hit_l2 += take - l1part;
	r->read += take - l1part;
	t->rsec[sec] += take - l1part;
	/* Every block of the request ends most recent in L1. */
	for (k = 0; k < q->nids; k++) {
		uint32_t b = a->blk[base + k];

		t->uses[b]++;
		to_l1(t, b, sec);
	}
	/* Known once the request has answered (the tokens a driver sees of
	 * it: all but the last): for its blocks' next trip down. */
	for (k = 0; k < q->nids; k++)
		t->brief[a->blk[base + k]] = workload_evicted_answer(q->out) <= TIER2_SHORT_ANSWER;
}

/* The rates of writes to and reads from L2: over the span, and in its busiest 10 s. */
static void
tier2_rates(const struct tier2 *t, uint64_t last_ms)
{
	struct tier2_result *r = t->r;

	r->written_peak = busiest_10s(t->wsec, t->nsec);
	r->read_peak = busiest_10s(t->rsec, t->nsec);
	r->seconds = (double)(last_ms - t->first_ms) / 1000;
	r->peak_window_s = t->nsec < 10 ? (unsigned int)t->nsec : 10;
	{
		/* The busiest window is never below the mean over the span (by
		 * whole seconds over more seconds than a short span it read below
		 * it); when the window is the whole trace, it is the mean. */
		double s = r->seconds > 0 ? r->seconds : 1;

		if (t->nsec <= 10 || r->written_peak < (double)r->written / s)
			r->written_peak = (double)r->written / s;
		if (t->nsec <= 10 || r->read_peak < (double)r->read / s)
			r->read_peak = (double)r->read / s;
	}
}

int
tier2_run(const struct oracle_blocks *a, const struct tier2_params *p, struct tier2_result *r)
{
	struct tier2 t = {.a = a, .p = p, .r = r};
	uint64_t last_ms;
	int rc = -1;
	size_t i;

	memset(r, 0, sizeof(*r));
	if (a->nreq == 0)
		return 0;
	last_ms = tier2_span(&t);
	t.max1 = p->l1_tokens ? p->l1_tokens / p->block : UINT64_MAX;
	t.max2 = p->l2_tokens / p->block;
	t.where = calloc(a->nblk + 1, 1);
	t.uses = calloc(a->nblk + 1, sizeof(uint32_t));
	t.brief = calloc(a->nblk + 1, 1);
	t.wsec = calloc(t.nsec, sizeof(uint64_t));
	t.rsec = calloc(t.nsec, sizeof(uint64_t));
	if (lru_init(&t.l1, a->nblk) != 0 || lru_init(&t.l2, a->nblk) != 0 || t.where == NULL ||
	    t.uses == NULL || t.brief == NULL || t.wsec == NULL || t.rsec == NULL)
		goto out;
	for (i = 0; i < a->nreq; i++)
		tier2_request(&t, i);
	tier2_rates(&t, last_ms);
	rc = 0;
out:
	lru_fini(&t.l1);
	lru_fini(&t.l2);
	free(t.where);
	free(t.uses);
	free(t.brief);
	free(t.wsec);
	free(t.rsec);
	return rc;
}
