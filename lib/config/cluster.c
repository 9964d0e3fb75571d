/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The cluster description kvss-plan reads (cluster.h): nodes, boxes with
 * their shards, jobs and the policy. With config.c, the only place that
 * includes libconfig.
 */
#include "cluster.h"
#include "config.h"
#include "config_priv.h"

#include <ctype.h>
#include <libconfig.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GB 1000000000.0

/* ---- Loading ------------------------------------------------------------------------ */

/*
 * The reader's context is kvss's (config_priv.h): every key read is
 * remembered through cfg_member, and what the file has beside them is an
 * unknown key, refused with the nearest known one (cfg_check_keys).
 */
struct ld {
	struct ctx c;
};

/* "f.cfg:12: jobs.[0].boxes: why", as every configuration reader here says it. */
#define fail(l, g, key, ...) cfg_fail(&(l)->c, g, key, __VA_ARGS__)
#define member(l, g, key) cfg_member(&(l)->c, g, key)

static int
get_num(struct ld *l, const config_setting_t *g, const char *key, double lo, double hi, double def,
	bool required, double *out)
{
	const config_setting_t *s = member(l, g, key);

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

/* A count: a number as get_num reads it, and whole (wio = 2.7 is refused, not cut to 2). */
static int
get_whole(struct ld *l, const config_setting_t *g, const char *key, double lo, double hi,
	  double def, bool required, double *out)
{
	if (get_num(l, g, key, lo, hi, def, required, out) != 0)
		return -1;
	if (floor(*out) != *out)
		return fail(l, g, key, "%.10g is not a whole number", *out);
	return 0;
}

/*
 * A name: letters, digits, '.', '_' and '-', the first a letter or a digit.
 * Names become file names (--emit-config writes JOB-BOX-dD.cfg) and lines
 * of the configurations it writes: no '/', no "..", no newline, no quote.
 */
static int
get_name(struct ld *l, const config_setting_t *g, const char *key, char *out)
{
	const config_setting_t *s = member(l, g, key);
	const char *v = s != NULL ? config_setting_get_string(s) : NULL;
	size_t i;

	if (s == NULL)
		return fail(l, g, key, "missing (a name in quotes)");
	if (v == NULL)
		return fail(l, g, key, "not a string (a name in quotes)");
	if (v[0] == '\0')
		return fail(l, g, key, "empty (a name in quotes)");
	if (strlen(v) >= PLAN_NAME)
		return fail(l, g, key, "longer than %d characters", PLAN_NAME - 1);
	for (i = 0; v[i] != '\0'; i++)
		if (!isalnum((unsigned char)v[i]) &&
		    (i == 0 || (v[i] != '.' && v[i] != '_' && v[i] != '-'))) {
			char shown[PLAN_NAME];
			size_t k;

			for (k = 0; v[k] != '\0'; k++)
				shown[k] = isprint((unsigned char)v[k]) ? v[k] : '?';
			shown[k] = '\0';
			return fail(l, g, key, "'%s' is not a name: letters, digits, '.', '_' and '-', "
					       "starting with a letter or a digit", shown);
		}
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
	const config_setting_t *ns = member(l, root, "nodes");
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
	const config_setting_t *bs = member(l, root, "boxes");
	int i, n;

	if (bs == NULL || !config_setting_is_list(bs) || (n = config_setting_length(bs)) < 1)
		return fail(l, root, "boxes", "want a list of boxes, each with its shards");
	for (i = 0; i < n; i++) {
		const config_setting_t *b = config_setting_get_elem(bs, (unsigned int)i);
		const config_setting_t *ss = member(l, b, "shards");
		char name[PLAN_NAME];
		int k, m;

		if (get_name(l, b, "name", name) != 0)
			return -1;
		for (k = 0; k < c->nshards; k++)
			if (strcmp(c->shard[k].box, name) == 0)
				return fail(l, b, "name", "box '%s' appears twice", name);
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
			if (get_whole(l, e, "domain", 0, 1023, 0, true, &dom) != 0 ||
			    get_whole(l, e, "wio", 1, 1024, 0, true, &wio) != 0 ||
			    get_name(l, e, "node", nodename) != 0)
				return -1;
			nd = node_of(c, nodename);
			if (nd < 0)
				return fail(l, e, "node", "no storage node named '%s' in nodes", nodename);
			/* A shard is (box, domain): the same domain twice is one shard twice. */
			for (int o = c->nshards - k; o < c->nshards; o++)
				if (c->shard[o].domain == (uint16_t)dom)
					return fail(l, e, "domain", "box '%s' has a shard in domain %g already",
						    name, dom);
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

/*
 * A job's orgs = ( { name; tokens; cap_tokens; }, ... ): each named once,
 * a guarantee of at least a token, a cap (when given) no lower than it.
 */
static int
load_orgs(struct ld *l, const config_setting_t *e, struct plan_job *j)
{
	const config_setting_t *os = member(l, e, "orgs");
	int k, n;

	if (os == NULL)
		return 0;
	/* An empty list is refused, not read as none: leaving the key out says
	 * that, and --emit-config then writes no JOB-orgs.cfg (it would leave
	 * one an earlier plan wrote, which the list seemed to clear). */
	if (!config_setting_is_list(os) || (n = config_setting_length(os)) > PLAN_MAX_ORGS || n < 1)
		return fail(l, e, "orgs", "want a list of 1 to %d organizations "
				      "( { name; tokens; cap_tokens; } ); leave it out for none",
			    PLAN_MAX_ORGS);
	for (k = 0; k < n; k++) {
		const config_setting_t *o = config_setting_get_elem(os, (unsigned int)k);
		struct plan_org *g = &j->org[k];
		double tok, cap;

		if (!config_setting_is_group(o))
			return fail(l, o, NULL, "want a group { name; tokens; cap_tokens; }");
		if (get_name(l, o, "name", g->name) != 0 ||
		    get_whole(l, o, "tokens", 1, 1e12, 0, true, &tok) != 0 ||
		    get_whole(l, o, "cap_tokens", 1, 1e12, 0, false, &cap) != 0)
			return -1;
		for (int m = 0; m < k; m++)
			if (strcmp(j->org[m].name, g->name) == 0)
				return fail(l, o, "name", "organization '%s' appears twice in job '%s'",
					    g->name, j->name);
		if (cap != 0 && cap < tok)
			return fail(l, o, "cap_tokens", "%.0f is below its tokens (%.0f): a cap under the "
					      "guarantee", cap, tok);
		g->tokens = (uint64_t)tok;
		g->cap_tokens = (uint64_t)cap;
		j->norgs = (uint16_t)(k + 1);
	}
	return 0;
}

static int
load_jobs(struct ld *l, const config_setting_t *root, struct plan_cluster *c)
{
	const config_setting_t *js = member(l, root, "jobs");
	int i, n;

	if (js == NULL || !config_setting_is_list(js) || (n = config_setting_length(js)) < 1 ||
	    n > PLAN_MAX_JOBS)
		return fail(l, root, "jobs", "want a list of 1..%d jobs", PLAN_MAX_JOBS);
	for (i = 0; i < n; i++) {
		const config_setting_t *e = config_setting_get_elem(js, (unsigned int)i);
		const config_setting_t *bx = member(l, e, "boxes");
		const config_setting_t *gr = member(l, e, "grants");
		struct plan_job *j = &c->job[i];
		double bpt, base, lo, hi;
		int k, m;

		memset(j, 0, sizeof(*j));
		if (get_name(l, e, "name", j->name) != 0)
			return -1;
		for (k = 0; k < i; k++)
			if (strcmp(c->job[k].name, j->name) == 0)
				return fail(l, e, "name", "job '%s' appears twice", j->name);
		if (
		    get_whole(l, e, "bytes_per_token_per_wio", 1, 1e9, 0, true, &bpt) != 0 ||
		    get_num(l, e, "base_mem_gb", 0, 1e5, 10, false, &base) != 0 ||
		    get_whole(l, e, "tokens_lower", 0, 1e12, 0, false, &lo) != 0 ||
		    get_whole(l, e, "tokens_upper", 1, 1e12, 1e12, false, &hi) != 0 ||
		    get_num(l, e, "ratio", 0.000001, 1e6, 1, false, &j->ratio) != 0)
			return -1;
		if (member(l, e, "model") != NULL && get_name(l, e, "model", j->model) != 0)
			return -1;
		if (load_orgs(l, e, j) != 0)
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
			for (int o = 0; o < k; o++)
				if (strcmp(j->box[o], b) == 0)
					return fail(l, e, "boxes", "element %d: box '%s' is listed twice", k, b);
			snprintf(j->box[k], PLAN_NAME, "%s", b);
		}
		j->nboxes = (uint32_t)m;
		for (k = 0; gr != NULL && k < config_setting_length(gr); k++) {
			const config_setting_t *g = config_setting_get_elem(gr, (unsigned int)k);
			char box[PLAN_NAME];
			double dom, tok;
			uint16_t s;

			if (get_name(l, g, "box", box) != 0 ||
			    get_whole(l, g, "domain", 0, 1023, 0, true, &dom) != 0 ||
			    get_whole(l, g, "tokens", 0, 1e12, 0, true, &tok) != 0)
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
kvss_cluster_load(const char *path, struct plan_cluster *c, char *err, size_t errlen)
{
	static const char *const kinds[] = {"equal", "exact", "fair", "ratio", NULL};
	/* Its list of keys read is large (SEEN_MAX of them): not on the stack. */
	struct ld *l = calloc(1, sizeof(*l));
	const config_setting_t *root, *p;
	config_t lc;
	int rc = -1;

	memset(c, 0, sizeof(*c));
	c->policy = PLAN_FAIR;
	c->keep_ratio = true;
	c->discount = 0.2;
	c->round_tokens = 1000;
	if (l == NULL) {
		snprintf(err, errlen, "%s: out of memory", path);
		return -1;
	}
	l->c.path = path;
	l->c.err = err;
	l->c.errlen = errlen;
	/* No role sections here: a top-level shard or driver is a key like any other. */
	l->c.no_roles = true;
	config_init(&lc);
	if (kvss_cfg_read(&lc, path, err, errlen) != 0)
		goto out;
	root = config_root_setting(&lc);
	if (load_nodes(l, root, c) != 0 || load_boxes(l, root, c) != 0 || load_jobs(l, root, c) != 0)
		goto out;
	p = member(l, root, "policy");
	if (p != NULL) {
		double d, r;
		bool kr;
		int i;

		if ((i = cfg_get_choice(&l->c, p, "kind", kinds, (int)c->policy, false)) < 0 ||
		    cfg_get_bool(&l->c, p, "keep_ratio", c->keep_ratio, &kr) != 0)
			goto out;
		c->policy = (enum plan_policy)i;
		c->keep_ratio = kr;
		if (get_num(l, p, "discount", 0, 0.95, 0.2, false, &d) != 0 ||
		    get_whole(l, p, "round_tokens", 1, 1e9, 1000, false, &r) != 0)
			goto out;
		c->discount = d;
		c->round_tokens = (uint64_t)r;
	}
	/* A key nobody read (token_upper, kidn, polcy): refused, with the nearest known one. */
	if (cfg_check_keys(&l->c, root) != 0)
		goto out;
	rc = 0;
out:
	config_destroy(&lc);
	free(l);
	return rc;
}
