/* SPDX-License-Identifier: BSD-3-Clause */
/* kvss-plan's model: read a cluster, give every shard its tokens (plan.h). */
#include "plan.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GB 1000000000.0

const char *
plan_policy_name(enum plan_policy p)
{
	static const char *const n[] = {"equal", "exact", "fair", "ratio"};

	return (unsigned int)p < 4 ? n[p] : "?";
}

/* ---- Planning ------------------------------------------------------------------------- */

static bool
job_has_box(const struct plan_job *j, const char *box)
{
	uint32_t b;

	for (b = 0; b < j->nboxes; b++)
		if (strcmp(j->box[b], box) == 0)
			return true;
	return false;
}

static uint64_t
avail(const struct plan_cluster *c, uint16_t k)
{
	return c->node[k].ram - c->node[k].reserved;
}

/*
 * keep_ratio: the largest T (a multiple of round, at most upper) such that on
 * every node the job's shards there (@p n_on of them, @p pt_on bytes per
 * token together), base + T x mem_per_token each, fit the job's budget on
 * that node. Binary search, rounding down.
 */
static uint64_t
search_tokens(const struct plan_cluster *c, const struct plan_job *j, const uint64_t *node_budget,
	      const uint64_t *n_on, const uint64_t *pt_on)
{
	uint64_t lo = 0, hi = j->tokens_upper / c->round_tokens;
	uint16_t k;

	while (lo < hi) {
		uint64_t mid = lo + (hi - lo + 1) / 2, t = mid * c->round_tokens;
		bool fits = true;

		for (k = 0; k < c->nnodes && fits; k++)
			if (n_on[k] != 0)
				fits = (double)n_on[k] * (double)j->base_mem + (double)t * (double)pt_on[k] <=
				       (double)node_budget[k];
		if (fits)
			lo = mid;
		else
			hi = mid - 1;
	}
	return lo * c->round_tokens;
}

/*
 * What every job's grants start from: @pairs_on, the (job, shard) pairs on
 * each node; @share, each job's share of a node (its ratio, or its boxes
 * among all the cluster's). -1: a job with no shard on its boxes.
 */
static int
plan_shares(const struct plan_cluster *c, uint64_t *pairs_on, double *share, char *err,
	    size_t errlen)
{
	char seen[PLAN_MAX_SHARDS][PLAN_NAME];
	uint64_t total_boxes;
	double ratio_sum = 0;
	uint32_t nseen = 0, b;
	uint16_t ji, s;

	/* All boxes of the cluster, and the (job, shard) pairs on every node. */
	for (s = 0; s < c->nshards; s++) {
		for (b = 0; b < nseen && strcmp(seen[b], c->shard[s].box) != 0; b++)
			;
		if (b == nseen)
			snprintf(seen[nseen++], PLAN_NAME, "%s", c->shard[s].box);
	}
	total_boxes = nseen;
	for (ji = 0; ji < c->njobs; ji++) {
		uint32_t n = 0;

		for (s = 0; s < c->nshards; s++)
			if (job_has_box(&c->job[ji], c->shard[s].box)) {
				pairs_on[c->shard[s].node]++;
				n++;
			}
		if (n == 0) {
			snprintf(err, errlen, "jobs.[%u] (%s): no shard on its boxes", ji, c->job[ji].name);
			return -1;
		}
		ratio_sum += c->job[ji].ratio;
	}
	for (ji = 0; ji < c->njobs; ji++)
		share[ji] = c->policy == PLAN_RATIO ? c->job[ji].ratio / ratio_sum
						    : (double)c->job[ji].nboxes / (double)total_boxes;
	return 0;
}

/* One job's view of the nodes while its grants are made. */
struct job_nodes {
	uint64_t budget[PLAN_MAX_NODES]; /* fair, ratio: the job's share of each node */
	uint64_t n_on[PLAN_MAX_NODES];	 /* the job's shards on each node */
	uint64_t pt_on[PLAN_MAX_NODES];	 /* their bytes per token, summed */
	bool together;			 /* keep_ratio: one token count T for every shard */
	uint64_t T;
};

static void
job_nodes_init(const struct plan_cluster *c, uint16_t ji, double share, struct job_nodes *jn)
{
	const struct plan_job *j = &c->job[ji];
	uint16_t s, k;

	memset(jn, 0, sizeof(*jn));
	jn->together = c->keep_ratio && (c->policy == PLAN_FAIR || c->policy == PLAN_RATIO);
	for (s = 0; s < c->nshards; s++)
		if (job_has_box(j, c->shard[s].box)) {
			jn->n_on[c->shard[s].node]++;
			jn->pt_on[c->shard[s].node] += c->shard[s].wio * j->bytes_per_token_per_wio;
		}
	for (k = 0; k < c->nnodes; k++)
		if (c->policy == PLAN_FAIR || c->policy == PLAN_RATIO)
			jn->budget[k] = (uint64_t)(share * (double)avail(c, k) * (1.0 - c->discount));
	if (jn->together)
		jn->T = search_tokens(c, j, jn->budget, jn->n_on, jn->pt_on);
}

/* Grant @g (job @ji on shard @s) its budget by the cluster's policy. -1: exact without a grant. */
static int
grant_budget(const struct plan_cluster *c, uint16_t ji, uint16_t s, const uint64_t *pairs_on,
	     const struct job_nodes *jn, struct plan_grant *g, char *err, size_t errlen)
{
	const struct plan_job *j = &c->job[ji];
	const struct plan_shard *sh = &c->shard[s];
	uint64_t pt = g->mem_per_token;

	switch (c->policy) {
	case PLAN_EQUAL:
		g->budget = (uint64_t)((double)avail(c, sh->node) / (double)pairs_on[sh->node] *
				       (1.0 - c->discount));
		break;
	case PLAN_EXACT:
		if (!j->has_grant[s]) {
			snprintf(err, errlen, "jobs.[%u] (%s).grants: none for box '%s' domain %u",
				 ji, j->name, sh->box, sh->domain);
			return -1;
		}
		g->budget = j->base_mem + j->grant[s] * pt;
		break;
	default:
		/* Together: the node's share in proportion to bytes per token. */
		if (jn->together && jn->budget[sh->node] > jn->n_on[sh->node] * j->base_mem)
			g->budget = j->base_mem +
				    (uint64_t)((double)(jn->budget[sh->node] -
							jn->n_on[sh->node] * j->base_mem) *
					       (double)pt / (double)jn->pt_on[sh->node]);
		else
			g->budget = jn->budget[sh->node] / jn->n_on[sh->node];
		break;
	}
	return 0;
}

/* Job @ji's grant on each shard of its boxes: budget, tokens, bytes. */
static int
job_grants(const struct plan_cluster *c, struct plan_result *r, uint16_t ji,
	   const uint64_t *pairs_on, const struct job_nodes *jn, char *err, size_t errlen)
{
	const struct plan_job *j = &c->job[ji];
	uint16_t s;

	for (s = 0; s < c->nshards; s++) {
		const struct plan_shard *sh = &c->shard[s];
		struct plan_grant *g;
		uint64_t pt = sh->wio * j->bytes_per_token_per_wio, room;

		if (!job_has_box(j, sh->box))
			continue;
		if (r->ngrants == sizeof(r->grant) / sizeof(r->grant[0])) {
			snprintf(err, errlen, "more than %zu (job, shard) pairs",
				 sizeof(r->grant) / sizeof(r->grant[0]));
			return -1;
		}
		g = &r->grant[r->ngrants++];
		g->job = ji;
		g->shard = s;
		g->mem_per_token = pt;
		if (grant_budget(c, ji, s, pairs_on, jn, g, err, errlen) != 0)
			return -1;
		if (jn->together) {
			g->tokens = jn->T;
		} else if (c->policy == PLAN_EXACT) {
			g->tokens = j->grant[s];
		} else {
			room = g->budget > j->base_mem ? (g->budget - j->base_mem) / pt : 0;
			g->tokens = room / c->round_tokens * c->round_tokens;
			if (g->tokens > j->tokens_upper)
				g->tokens = j->tokens_upper;
		}
		g->bytes = j->base_mem + g->tokens * pt;
	}
	return 0;
}

/*
 * Job @ji's grants from @first on, accounted: what it can use (its
 * smallest shard), each grant's used, wasted, left and over, the node
 * totals, and the same memory as one pool (the grants' bytes per token
 * summed).
 */
static void
job_account(const struct plan_cluster *c, struct plan_result *r, uint16_t ji, uint32_t first)
{
	const struct plan_job *j = &c->job[ji];
	struct plan_job_result *jr = &r->job[ji];
	uint64_t pt_sum = 0;
	uint32_t b;

	/* What the job can use: its smallest shard. */
	jr->usable = UINT64_MAX;
	for (b = first; b < r->ngrants; b++)
		if (r->grant[b].tokens < jr->usable)
			jr->usable = r->grant[b].tokens;
	for (b = first; b < r->ngrants; b++) {
		struct plan_grant *g = &r->grant[b];
		/* Allocated = used + wasted, exactly; what the budget gave
		 * beyond the allocation (rounding down) is left, apart. */
		g->used = j->base_mem + jr->usable * g->mem_per_token;
		g->wasted = g->bytes - g->used; /* usable <= tokens: never negative */
		g->left = g->budget > g->bytes ? g->budget - g->bytes : 0;
		/* A budget below the base: no token, and still more than given. */
		g->over = g->bytes > g->budget ? g->bytes - g->budget : 0;
		r->over_budget += g->over != 0;
		jr->over += g->over;
		jr->budget += g->budget;
		jr->bytes += g->bytes;
		jr->used += g->used;
		jr->wasted += g->wasted;
		jr->left += g->left;
		r->node_bytes[c->shard[g->shard].node] += g->bytes;
		pt_sum += g->mem_per_token;
	}
	/* The same memory as one pool: one base, every stream's bytes per token. */
	jr->ideal = jr->budget > j->base_mem ? (jr->budget - j->base_mem) / pt_sum : 0;
	if (jr->ideal > j->tokens_upper)
		jr->ideal = j->tokens_upper;
	jr->ratio = jr->ideal ? (double)jr->usable / (double)jr->ideal : 0;
	jr->below_lower = jr->usable < j->tokens_lower;
}

/* @p f as the driver reads it back from its six decimals. */
static double
six_decimals(double f)
{
	char t[32];

	snprintf(t, sizeof(t), "%.6f", f);
	return strtod(t, NULL);
}

double
plan_fraction(uint64_t tokens, uint64_t usable, bool up)
{
	double f;

	if (usable == 0)
		return up ? 1 : 0;
	if (tokens >= usable)
		return 1;
	f = six_decimals((double)tokens / (double)usable);
	if (up) {
		while (f < 1 && (uint64_t)(f * (double)usable) < tokens)
			f = six_decimals(f + 1e-6);
		while (f > 1e-6 && (uint64_t)(six_decimals(f - 1e-6) * (double)usable) >= tokens)
			f = six_decimals(f - 1e-6);
	} else {
		while (f > 0 && (uint64_t)(f * (double)usable) > tokens)
			f = six_decimals(f - 1e-6);
		while (f < 1 && (uint64_t)(six_decimals(f + 1e-6) * (double)usable) <= tokens)
			f = six_decimals(f + 1e-6);
	}
	return f < 0 ? 0 : f > 1 ? 1 : f;
}

/*
 * The job's organizations (plan_cluster.h, plan_org): each guarantee and
 * cap as the driver's fractions of what the job can use, and whether the
 * guarantees fit it.
 */
static void
job_orgs(const struct plan_job *j, struct plan_job_result *jr)
{
	uint16_t k;

	for (k = 0; k < j->norgs; k++) {
		const struct plan_org *o = &j->org[k];
		struct plan_org_result *x = &jr->org[k];

		x->share = plan_fraction(o->tokens, jr->usable, true);
		x->cap = o->cap_tokens ? plan_fraction(o->cap_tokens, jr->usable, false) : 1;
		if (x->cap < x->share) {
			x->cap = x->share;
			x->cap_short = true;
			jr->caps_short++;
		}
		x->share_tokens = (uint64_t)(x->share * (double)jr->usable);
		x->cap_tokens = (uint64_t)(x->cap * (double)jr->usable);
		jr->org_tokens += o->tokens;
		jr->org_share_sum += x->share;
	}
	jr->orgs_over = j->norgs > 0 && (jr->org_tokens > jr->usable || jr->org_share_sum > 1 + 1e-9);
}

int
plan_run(const struct plan_cluster *c, struct plan_result *r, char *err, size_t errlen)
{
	uint64_t pairs_on[PLAN_MAX_NODES] = {0};
	double share[PLAN_MAX_JOBS];
	uint16_t ji, k;

	memset(r, 0, sizeof(*r));
	if (plan_shares(c, pairs_on, share, err, errlen) != 0)
		return -1;
	for (ji = 0; ji < c->njobs; ji++) {
		struct job_nodes jn;
		uint32_t first = r->ngrants;

		job_nodes_init(c, ji, share[ji], &jn);
		if (job_grants(c, r, ji, pairs_on, &jn, err, errlen) != 0)
			return -1;
		job_account(c, r, ji, first);
		job_orgs(&c->job[ji], &r->job[ji]);
	}
	for (k = 0; k < c->nnodes; k++)
		if (r->node_bytes[k] > avail(c, k))
			r->overcommitted++;
	return 0;
}
