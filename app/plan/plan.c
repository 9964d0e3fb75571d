/* SPDX-License-Identifier: BSD-3-Clause */
/* kvss-plan's model: read a cluster, give every shard its tokens (plan.h). */
#include "plan.h"

#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <libconfig.h>
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

/* ---- Loading ------------------------------------------------------------------------ */

struct ld {
	const char *path;
	char *err;
	size_t errlen;
};

/* "f.cfg:12: jobs.[0].boxes: why", as every configuration reader here says it. */
static int __attribute__((format(printf, 4, 5)))
fail(struct ld *l, const config_setting_t *g, const char *key, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	kvss_cfg_vfail(l->path, l->err, l->errlen, g, key, fmt, ap);
	va_end(ap);
	return -1;
}

static int
get_num(struct ld *l, const config_setting_t *g, const char *key, double lo, double hi, double def,
	bool required, double *out)
{
	const config_setting_t *s = config_setting_get_member(g, key);

	if (s == NULL) {
		if (required)
			return fail(l, g, key, "missing");
		*out = def;
		return 0;
	}
	if (config_setting_type(s) == CONFIG_TYPE_INT || config_setting_type(s) == CONFIG_TYPE_INT64)
		*out = (double)config_setting_get_int64(s);
	else if (config_setting_type(s) == CONFIG_TYPE_FLOAT)
		*out = config_setting_get_float(s);
	else
		return fail(l, g, key, "want a number");
	if (*out < lo || *out > hi)
		return fail(l, g, key, "%g is out of range %g..%g", *out, lo, hi);
	return 0;
}

static int
get_name(struct ld *l, const config_setting_t *g, const char *key, char *out)
{
	const char *v;

	if (config_setting_lookup_string(g, key, &v) != CONFIG_TRUE || v[0] == '\0')
		return fail(l, g, key, "missing (a name in quotes)");
	if (strlen(v) >= PLAN_NAME)
		return fail(l, g, key, "longer than %d characters", PLAN_NAME - 1);
	snprintf(out, PLAN_NAME, "%s", v);
	return 0;
}

static int
node_of(const struct plan_cluster *c, const char *name)
{
	int k;

	for (k = 0; k < c->nnodes; k++)
		if (strcmp(c->node[k].name, name) == 0)
			return k;
	return -1;
}

static int
load_nodes(struct ld *l, const config_setting_t *root, struct plan_cluster *c)
{
	const config_setting_t *ns = config_setting_get_member(root, "nodes");
	int i, n;

	if (ns == NULL || !config_setting_is_list(ns) || (n = config_setting_length(ns)) < 1 ||
	    n > PLAN_MAX_NODES)
		return fail(l, root, "nodes", "want a list of 1..%d storage nodes", PLAN_MAX_NODES);
	for (i = 0; i < n; i++) {
		const config_setting_t *e = config_setting_get_elem(ns, (unsigned int)i);
		struct plan_node *nd = &c->node[i];
		double ram, res;

		if (get_name(l, e, "name", nd->name) != 0 ||
		    get_num(l, e, "ram_gb", 0.001, 1e6, 0, true, &ram) != 0 ||
		    get_num(l, e, "reserved_gb", 0, 1e6, 0, false, &res) != 0)
			return -1;
		if (node_of(c, nd->name) >= 0 && node_of(c, nd->name) < i)
			return fail(l, e, "name", "node '%s' appears twice", nd->name);
		if (res >= ram)
			return fail(l, e, "reserved_gb", "%g leaves no memory of %g", res, ram);
		nd->ram = (uint64_t)(ram * GB);
		nd->reserved = (uint64_t)(res * GB);
		c->nnodes = (uint16_t)(i + 1);
	}
	return 0;
}

static int
load_boxes(struct ld *l, const config_setting_t *root, struct plan_cluster *c)
{
	const config_setting_t *bs = config_setting_get_member(root, "boxes");
	int i, n;

	if (bs == NULL || !config_setting_is_list(bs) || (n = config_setting_length(bs)) < 1)
		return fail(l, root, "boxes", "want a list of boxes, each with its shards");
	for (i = 0; i < n; i++) {
		const config_setting_t *b = config_setting_get_elem(bs, (unsigned int)i);
		const config_setting_t *ss = config_setting_get_member(b, "shards");
		char name[PLAN_NAME];
		int k, m;

		if (get_name(l, b, "name", name) != 0)
			return -1;
		if (ss == NULL || !config_setting_is_list(ss) || (m = config_setting_length(ss)) < 1)
			return fail(l, b, "shards", "want a list of shards ( { domain; wio; node; } )");
		for (k = 0; k < m; k++) {
			const config_setting_t *e = config_setting_get_elem(ss, (unsigned int)k);
			struct plan_shard *sh;
			char nodename[PLAN_NAME];
			double dom, wio;
			int nd;

			if (c->nshards == PLAN_MAX_SHARDS)
				return fail(l, b, "shards", "more than %d shards in all", PLAN_MAX_SHARDS);
			sh = &c->shard[c->nshards];
			if (get_num(l, e, "domain", 0, 1023, 0, true, &dom) != 0 ||
			    get_num(l, e, "wio", 1, 1024, 0, true, &wio) != 0 ||
			    get_name(l, e, "node", nodename) != 0)
				return -1;
			nd = node_of(c, nodename);
			if (nd < 0)
				return fail(l, e, "node", "no storage node named '%s' in nodes", nodename);
			snprintf(sh->box, PLAN_NAME, "%s", name);
			sh->domain = (uint16_t)dom;
			sh->wio = (uint16_t)wio;
			sh->node = (uint16_t)nd;
			c->nshards++;
		}
	}
	return 0;
}

static bool
box_known(const struct plan_cluster *c, const char *box)
{
	uint16_t s;

	for (s = 0; s < c->nshards; s++)
		if (strcmp(c->shard[s].box, box) == 0)
			return true;
	return false;
}

static int
load_jobs(struct ld *l, const config_setting_t *root, struct plan_cluster *c)
{
	const config_setting_t *js = config_setting_get_member(root, "jobs");
	int i, n;

	if (js == NULL || !config_setting_is_list(js) || (n = config_setting_length(js)) < 1 ||
	    n > PLAN_MAX_JOBS)
		return fail(l, root, "jobs", "want a list of 1..%d jobs", PLAN_MAX_JOBS);
	for (i = 0; i < n; i++) {
		const config_setting_t *e = config_setting_get_elem(js, (unsigned int)i);
		const config_setting_t *bx = config_setting_get_member(e, "boxes");
		const config_setting_t *gr = config_setting_get_member(e, "grants");
		struct plan_job *j = &c->job[i];
		double bpt, base, lo, hi;
		int k, m;

		memset(j, 0, sizeof(*j));
		if (get_name(l, e, "name", j->name) != 0 ||
		    get_num(l, e, "bytes_per_token_per_wio", 1, 1e9, 0, true, &bpt) != 0 ||
		    get_num(l, e, "base_mem_gb", 0, 1e5, 10, false, &base) != 0 ||
		    get_num(l, e, "tokens_lower", 0, 1e12, 0, false, &lo) != 0 ||
		    get_num(l, e, "tokens_upper", 1, 1e12, 1e12, false, &hi) != 0 ||
		    get_num(l, e, "ratio", 0.000001, 1e6, 1, false, &j->ratio) != 0)
			return -1;
		if (config_setting_lookup_string(e, "model", &(const char *){NULL}) == CONFIG_TRUE &&
		    get_name(l, e, "model", j->model) != 0)
			return -1;
		if (lo > hi)
			return fail(l, e, "tokens_lower", "%g is above tokens_upper (%g)", lo, hi);
		j->bytes_per_token_per_wio = (uint64_t)bpt;
		j->base_mem = (uint64_t)(base * GB);
		j->tokens_lower = (uint64_t)lo;
		j->tokens_upper = (uint64_t)hi;
		if (bx == NULL || !config_setting_is_array(bx) || (m = config_setting_length(bx)) < 1)
			return fail(l, e, "boxes", "want an array of box names");
		for (k = 0; k < m && k < PLAN_MAX_SHARDS; k++) {
			const char *b = config_setting_get_string_elem(bx, (unsigned int)k);

			if (b == NULL || !box_known(c, b))
				return fail(l, e, "boxes", "element %d: no box named '%s'", k, b ? b : "");
			snprintf(j->box[k], PLAN_NAME, "%s", b);
		}
		j->nboxes = (uint32_t)m;
		for (k = 0; gr != NULL && k < config_setting_length(gr); k++) {
			const config_setting_t *g = config_setting_get_elem(gr, (unsigned int)k);
			char box[PLAN_NAME];
			double dom, tok;
			uint16_t s;

			if (get_name(l, g, "box", box) != 0 ||
			    get_num(l, g, "domain", 0, 1023, 0, true, &dom) != 0 ||
			    get_num(l, g, "tokens", 0, 1e12, 0, true, &tok) != 0)
				return -1;
			for (s = 0; s < c->nshards; s++)
				if (strcmp(c->shard[s].box, box) == 0 && c->shard[s].domain == (uint16_t)dom)
					break;
			if (s == c->nshards)
				return fail(l, g, "domain", "box '%s' has no shard in domain %g", box, dom);
			j->grant[s] = (uint64_t)tok;
			j->has_grant[s] = true;
		}
		c->njobs = (uint16_t)(i + 1);
	}
	return 0;
}

int
plan_load(const char *path, struct plan_cluster *c, char *err, size_t errlen)
{
	static const char *const kinds[] = {"equal", "exact", "fair", "ratio", NULL};
	struct ld l = {path, err, errlen};
	const config_setting_t *root, *p;
	config_t lc;
	int rc = -1;

	memset(c, 0, sizeof(*c));
	c->policy = PLAN_FAIR;
	c->keep_ratio = true;
	c->discount = 0.2;
	c->round_tokens = 1000;
	config_init(&lc);
	if (kvss_cfg_read(&lc, path, err, errlen) != 0)
		goto out;
	root = config_root_setting(&lc);
	if (load_nodes(&l, root, c) != 0 || load_boxes(&l, root, c) != 0 || load_jobs(&l, root, c) != 0)
		goto out;
	p = config_setting_get_member(root, "policy");
	if (p != NULL) {
		const char *k;
		double d, r;
		int i, kr;

		if (config_setting_lookup_string(p, "kind", &k) == CONFIG_TRUE) {
			for (i = 0; kinds[i] != NULL && strcmp(kinds[i], k) != 0; i++)
				;
			if (kinds[i] == NULL) {
				fail(&l, p, "kind", "'%s' is not one of equal, exact, fair, ratio", k);
				goto out;
			}
			c->policy = (enum plan_policy)i;
		}
		if (config_setting_lookup_bool(p, "keep_ratio", &kr) == CONFIG_TRUE)
			c->keep_ratio = kr;
		if (get_num(&l, p, "discount", 0, 0.95, 0.2, false, &d) != 0 ||
		    get_num(&l, p, "round_tokens", 1, 1e9, 1000, false, &r) != 0)
			goto out;
		c->discount = d;
		c->round_tokens = (uint64_t)r;
	}
	rc = 0;
out:
	config_destroy(&lc);
	return rc;
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

int
plan_run(const struct plan_cluster *c, struct plan_result *r, char *err, size_t errlen)
{
	uint64_t pairs_on[PLAN_MAX_NODES] = {0}, total_boxes = 0;
	double share[PLAN_MAX_JOBS], ratio_sum = 0;
	char seen[PLAN_MAX_SHARDS][PLAN_NAME];
	uint32_t nseen = 0, b;
	uint16_t ji, s, k;

	memset(r, 0, sizeof(*r));
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

	for (ji = 0; ji < c->njobs; ji++) {
		const struct plan_job *j = &c->job[ji];
		struct plan_job_result *jr = &r->job[ji];
		uint64_t node_budget[PLAN_MAX_NODES] = {0}, n_on[PLAN_MAX_NODES] = {0}, pt_sum = 0;
		uint64_t pt_on[PLAN_MAX_NODES] = {0};
		uint32_t first = r->ngrants;
		bool together = c->keep_ratio && (c->policy == PLAN_FAIR || c->policy == PLAN_RATIO);
		uint64_t T = 0;

		for (s = 0; s < c->nshards; s++)
			if (job_has_box(j, c->shard[s].box)) {
				n_on[c->shard[s].node]++;
				pt_on[c->shard[s].node] += c->shard[s].wio * j->bytes_per_token_per_wio;
			}
		for (k = 0; k < c->nnodes; k++)
			if (c->policy == PLAN_FAIR || c->policy == PLAN_RATIO)
				node_budget[k] = (uint64_t)(share[ji] * (double)avail(c, k) *
							    (1.0 - c->discount));
		if (together)
			T = search_tokens(c, j, node_budget, n_on, pt_on);
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
			pt_sum += pt;
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
				if (together && node_budget[sh->node] > n_on[sh->node] * j->base_mem)
					g->budget = j->base_mem +
						    (uint64_t)((double)(node_budget[sh->node] -
									n_on[sh->node] * j->base_mem) *
							       (double)pt / (double)pt_on[sh->node]);
				else
					g->budget = node_budget[sh->node] / n_on[sh->node];
				break;
			}
			if (together) {
				g->tokens = T;
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
		/* What the job can use: its smallest shard. */
		jr->usable = UINT64_MAX;
		for (b = first; b < r->ngrants; b++)
			if (r->grant[b].tokens < jr->usable)
				jr->usable = r->grant[b].tokens;
		for (b = first; b < r->ngrants; b++) {
			struct plan_grant *g = &r->grant[b];
			uint64_t used = j->base_mem + jr->usable * g->mem_per_token;
			uint64_t held = g->budget > g->bytes ? g->budget : g->bytes;

			g->wasted = held > used ? held - used : 0;
			if (together)
				g->wasted = g->bytes - used; /* 0: every shard holds T */
			jr->budget += g->budget;
			jr->bytes += g->bytes;
			jr->wasted += g->wasted;
			r->node_bytes[c->shard[g->shard].node] += g->bytes;
		}
		/* The same memory as one pool: one base, every stream's bytes per token. */
		jr->ideal = jr->budget > j->base_mem ? (jr->budget - j->base_mem) / pt_sum : 0;
		if (jr->ideal > j->tokens_upper)
			jr->ideal = j->tokens_upper;
		jr->ratio = jr->ideal ? (double)jr->usable / (double)jr->ideal : 0;
		jr->below_lower = jr->usable < j->tokens_lower;
	}
	for (k = 0; k < c->nnodes; k++)
		if (r->node_bytes[k] > avail(c, k))
			r->overcommitted++;
	return 0;
}
