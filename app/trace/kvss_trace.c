/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * kvss-trace: replay a request trace through the real driver library, a real
 * kvstore and an emulated wafer that checks every refilled byte, with the
 * trace's clock, for each shard capacity asked: "what hit ratio do I get
 * from this much shard memory?" This file: the options and the table; the
 * replays are trace_run.c's, the times to first token (--ttft) ttft.c's.
 * Trace formats: workload.h.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fleet.h"
#include "kvdisk.h"
#include "replay.h"
#include "oracle.h"
#include "route.h"
#include "tier2.h"
#include "trace_priv.h"
#include "workload.h"
#include "args.h"
#include "config.h"
#include "plot.h"

/* What a capacity may be, for the messages that refuse one. */
#define CAPACITY_FORMS                                                                             \
	"a whole number of tokens up to 1e12 (1000000, 1e6, 1M; k, M, G: thousands, millions, "   \
	"billions) or inf"

/* A comma-separated list with an empty entry ("1e6,", ",lru", "a,,b"): refused, not skipped. */
static bool
list_hole(const char *s)
{
	size_t n = strlen(s);

	return n > 0 && (s[0] == ',' || s[n - 1] == ',' || strstr(s, ",,") != NULL);
}

/*
 * A list of token counts ("1e6,3M,inf") into @p v (16 at most; inf: 0).
 * @return 0, or -1 with the entry refused (or why) in @p why.
 */
static int
parse_capacities(const char *s, uint64_t *v, unsigned int *n, char *why, size_t whylen)
{
	char buf[512], *tok, *save = NULL;

	if (list_hole(s)) {
		snprintf(why, whylen, "'%s' has an empty entry", s);
		return -1;
	}
	if (strlen(s) >= sizeof(buf)) {
		snprintf(why, whylen, "a list of %zu bytes or more", sizeof(buf));
		return -1;
	}
	strcpy(buf, s);
	for (tok = strtok_r(buf, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
		char *end;
		double x;

		if (*n == 16) {
			snprintf(why, whylen, "more than 16 capacities");
			return -1;
		}
		if (strcmp(tok, "inf") == 0 || strcmp(tok, "unlimited") == 0) {
			v[(*n)++] = 0;
			continue;
		}
		x = strtod(tok, &end);
		if (end != tok && *end != '\0' && end[1] == '\0' && strchr("kKMG", *end) != NULL)
			x *= *end == 'G' ? 1e9 : *end == 'M' ? 1e6 : 1e3, end++;
		if (end == tok || *end != '\0' || !(x >= 0) || x > 1e12 || x != (double)(uint64_t)x) {
			snprintf(why, whylen, "'%s' is not %s", tok, CAPACITY_FORMS);
			return -1;
		}
		v[(*n)++] = (uint64_t)x;
	}
	if (*n == 0) {
		snprintf(why, whylen, "an empty list");
		return -1;
	}
	return 0;
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

/*
 * The same with a floor @p lo: kvss's own (wafer.time_scale and
 * arrival_rate refuse below 1e-6), so that what kvss-trace models, kvss
 * can run; below it a trace's span or a Poisson gap runs past what a
 * clock in nanoseconds holds.
 */
static int
num_f_from(const char *opt, const char *arg, double lo, double hi, double *out)
{
	char *end;
	double x = strtod(arg, &end);

	if (end == arg || *end != '\0' || !(x >= lo) || x > hi) {
		fprintf(stderr, "kvss-trace: %s: '%s' is not a number in [%g, %g] (kvss's range)\n", opt,
			arg, lo, hi);
		return -1;
	}
	*out = x;
	return 0;
}

/*
 * A number @p arg of option @p opt in [0, @p hi]: a latency or an overhead,
 * where none is a value (a fitted line's latency may be 0); or a message and -1.
 */
static int
num_f0(const char *opt, const char *arg, double hi, double *out)
{
	char *end;
	double x = strtod(arg, &end);

	if (end == arg || *end != '\0' || !(x >= 0) || signbit(x) || x > hi) {
		fprintf(stderr, "kvss-trace: %s: '%s' is not a number in [0, %g]\n", opt, arg, hi);
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

/*
 * Sizes in tokens for --shared and --disk ("4e6,inf": as --capacity writes
 * them, but a whole number of at least 1, inf for unlimited) into @p v, at
 * most @p max; or a message naming @p opt and -1.
 */
static int
parse_sizes(const char *opt, const char *s, uint64_t *v, unsigned int max, unsigned int *n)
{
	char buf[512], *tok, *save = NULL;

	*n = 0;
	if (strlen(s) >= sizeof(buf))
		goto bad;
	strcpy(buf, s);
	for (tok = strtok_r(buf, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
		char *end;
		double x;

		if (*n == max)
			goto bad;
		if (strcmp(tok, "inf") == 0 || strcmp(tok, "unlimited") == 0) {
			v[(*n)++] = FLEET_UNLIMITED;
			continue;
		}
		x = strtod(tok, &end);
		if (end == tok || *end != '\0' || !(x >= 1) || x > 1e12 || x != (double)(uint64_t)x)
			goto bad;
		v[(*n)++] = (uint64_t)x;
	}
	if (*n)
		return 0;
bad:
	fprintf(stderr, "kvss-trace: %s: '%s' is not %s size%s in tokens (a whole number from 1 "
			"to 1e12, or inf)\n", opt, s, max > 1 ? "a list of at most 8" : "a",
		max > 1 ? "s" : "");
	return -1;
}

/* --restart REPLICA@REQUEST. */
static int
restart_arg(struct opts *o, const char *arg)
{
	char rep[32];
	const char *at = strchr(arg, '@');
	uint64_t r, i;

	if (at == NULL || at == arg || (size_t)(at - arg) >= sizeof(rep)) {
		fprintf(stderr, "kvss-trace: --restart: '%s': want REPLICA@REQUEST (the replica's number "
				"from 0, the request's index from 1)\n", arg);
		return -1;
	}
	memcpy(rep, arg, (size_t)(at - arg));
	rep[at - arg] = '\0';
	if (num("--restart", rep, 0, ROUTE_MAX_REPLICAS - 1, &r) != 0 ||
	    num("--restart", at + 1, 1, WL_MAX_REQUESTS, &i) != 0)
		return -1;
	o->restart_rep = (int32_t)r;
	o->restart_at = (size_t)i;
	return 0;
}

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
	o->ottl[o->nottl].share = o->share_default;
	o->ottl[o->nottl].cap = o->cap_default ? o->cap_default : 1;
	o->ottl[o->nottl].l2_share = o->l2_share_default;
	o->ottl[o->nottl].l2_cap = o->l2_cap_default ? o->l2_cap_default : 1;
	o->ottl[o->nottl++].first_s = first_s;
	return 0;
}

/* The named organizations' DRAM shares, and the default's once, sum to at most 1. */
static int
shares_fit(const struct opts *o, const char *opt)
{
	double sum = o->share_default;
	unsigned int j;

	for (j = 0; j < o->nottl; j++)
		sum += o->ottl[j].share;
	if (sum > 1 + 1e-9) {
		fprintf(stderr, "kvss-trace: %s: the DRAM shares sum to %g: above the whole (1)\n", opt, sum);
		return -1;
	}
	return 0;
}

/*
 * --org-share NAME:SHARE[:CAP]: an organization's DRAM share and cap, as
 * driver.orgs' dram_share and dram_cap (fractions of the capacity), and its
 * hit ratio reported (as --org-ttl's; its TTLs the global ones unless
 * --org-ttl named it first).
 */
/* A fraction at @p s: digits and one '.', 0 to 1, up to @p stop; its end, or NULL. */
static const char *
fraction(const char *s, char stop, double *v)
{
	const char *p = s;
	int dots = 0;
	char *end;

	for (; *p != stop && *p != '\0'; p++)
		if (!((*p >= '0' && *p <= '9') || (*p == '.' && dots++ == 0)))
			return NULL;
	if (p == s || (p == s + 1 && *s == '.'))
		return NULL;
	*v = strtod(s, &end);
	return end == p && *v >= 0 && *v <= 1 ? p : NULL;
}

static int
org_share_arg(struct opts *o, const char *arg)
{
	char name[64];
	double share = -1, cap = 1;
	const char *c = strchr(arg, ':'), *e = c != NULL ? fraction(c + 1, ':', &share) : NULL;
	unsigned int j;

	if (e != NULL && *e == ':' && fraction(e + 1, '\0', &cap) == NULL)
		e = NULL;
	if (c == NULL || c == arg || (size_t)(c - arg) >= sizeof(name) || e == NULL ||
	    !(share <= cap && cap > 0)) {
		fprintf(stderr, "kvss-trace: --org-share: '%s': want NAME:SHARE[:CAP], fractions of "
				"the capacity with 0 <= SHARE <= CAP <= 1 (CAP 1: none)\n", arg);
		return -1;
	}
	memcpy(name, arg, (size_t)(c - arg));
	name[c - arg] = '\0';
	for (j = 0; j < o->nottl && strcmp(o->ottl[j].name, name) != 0; j++)
		;
	if (j == o->nottl && org_ttl_add(o, name, 0, 0, "--org-share") != 0)
		return -1;
	o->ottl[j].share = share;
	o->ottl[j].cap = cap;
	return shares_fit(o, "--org-share");
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
	o->share_default = cfg.driver.pc.dram_share_default;
	o->cap_default = cfg.driver.pc.dram_cap_default;
	o->l2_share_default = cfg.driver.pc.l2_share_default;
	o->l2_cap_default = cfg.driver.pc.l2_cap_default;
	for (j = 0; j < cfg.driver.num_orgs; j++) {
		if (org_ttl_add(o, cfg.driver.org[j].name, cfg.driver.org[j].ttl_last_ns / 1000000000ull,
				cfg.driver.org[j].ttl_first_ns / 1000000000ull, "--orgs-from") != 0)
			return -1;
		o->ottl[o->nottl - 1].share = cfg.driver.org[j].dram_share;
		o->ottl[o->nottl - 1].cap = cfg.driver.org[j].dram_cap;
		o->ottl[o->nottl - 1].l2_share = cfg.driver.org[j].l2_share;
		o->ottl[o->nottl - 1].l2_cap = cfg.driver.org[j].l2_cap;
	}
	return shares_fit(o, "--orgs-from");
}

/*
 * The options into @p o (and whether any asks for a fleet with a shared
 * level, @p shared_shaped), each checked: -1 to go on, or the exit status
 * (0 after --help or --version; 2 a usage error, said on stderr).
 */
#define NOT_MINE (-2) /* an option group's answer: another group's option */

/* What is replayed: the requests (a trace or the built-in workload), their organizations, multimodal and speculative tokens, the output: -1 taken, 2 refused (said), NOT_MINE another group's. */
static int
opt_workload(int c, struct opts *o)
{
	char err[512], name[512];

	switch (c) {
	case 't':
		o->trace = optarg;
		break;
	case 'Q':
		/* Refused now, not after the run: a directory that is not there. */
		if (plot_check_output(optarg, err, sizeof(err)) != 0) {
			fprintf(stderr, "kvss-trace: --plot %s: %s\n", plot_shown(optarg, name, sizeof(name)), err);
			return 2;
		}
		o->plot = optarg;
		break;
	case 'I':
		NUM("--multimodal-every", 1, 1000000, o->mm_every);
		break;
	case 'k':
		NUM("--documents", 0, 1000000, o->documents);
		break;
	case 'S':
		NUM("--speculate", 1, 64, o->spec_tokens);
		break;
	case 'J':
		NUM("--spec-reject-pct", 0, 100, o->spec_reject_pct);
		break;
	case 'E':
		NUM("--spec-seed", 0, 1ull << 62, o->spec_seed);
		break;
	case 'd': {
		uint64_t v[16];
		unsigned int nv = 0;

		if (parse_capacities(optarg, v, &nv, err, sizeof(err)) != 0 || nv != 1) {
			fprintf(stderr, "kvss-trace: --draft: '%s' is not one capacity: %s\n", optarg,
				CAPACITY_FORMS);
			return 2;
		}
		o->draft = true;
		o->draft_cap = v[0];
		break;
	}
	case 'X':
		if (org_ttl_arg(o, optarg) != 0)
			return 2;
		break;
	case 1001:
		if (org_share_arg(o, optarg) != 0)
			return 2;
		break;
	case 'W':
		if (orgs_from(o, optarg) != 0)
			return 2;
		break;
	case 'j':
		o->json = true;
		break;
	case 'n':
		NUM("--limit", 1, WL_MAX_REQUESTS, o->limit);
		break;
	case 'o':
		NUM("--orgs", 1, 1u << 20, o->orgs);
		break;
	case 'B':
		o->baseline = true;
		break;
	case 'M':
		o->no_minus_one = true;
		break;
	case 'g':
		NUM("--generate", 1, WL_MAX_REQUESTS, o->generate);
		break;
	default:
		return NOT_MINE;
	}
	return -1;
}

/* The tiers replayed: capacities, the second tier and its model, the oracle: -1 taken, 2 refused (said), NOT_MINE another group's. */
static int
opt_cache(int c, struct opts *o)
{
	char err[512];
	unsigned int pi;

	switch (c) {
	case 'c':
		if (parse_capacities(optarg, o->capacity, &o->ncap, err, sizeof(err)) != 0) {
			fprintf(stderr, "kvss-trace: --capacity: %s\n", err);
			return 2;
		}
		break;
	case 'O':
		o->oracle = true;
		break;
	case '2':
		if (parse_capacities(optarg, o->l2, &o->nl2, err, sizeof(err)) != 0) {
			fprintf(stderr, "kvss-trace: --l2: %s\n", err);
			return 2;
		}
		for (pi = 0; pi < o->nl2; pi++)
			if (o->l2[pi] == 0) {
				/* inf is 0 in a capacity list: here it read as no second tier. */
				fprintf(stderr, "kvss-trace: --l2: %s: a second tier of a positive, "
						"finite number of tokens (leave --l2 out for none)\n",
					optarg);
				return 2;
			}
		break;
	case 'A': {
		char buf[64], *tok, *save = NULL;
		unsigned int a;

		if (list_hole(optarg) || strlen(optarg) >= sizeof(buf)) {
			fprintf(stderr, "kvss-trace: --l2-admit: '%s': a list of all, seen2, short\n",
				optarg);
			return 2;
		}
		snprintf(buf, sizeof(buf), "%s", optarg);
		o->l2_admit = 0;
		for (tok = strtok_r(buf, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
			for (a = 0; admit_names[a] != NULL && strcmp(tok, admit_names[a]) != 0; a++)
				;
			if (admit_names[a] == NULL) {
				fprintf(stderr, "kvss-trace: --l2-admit: '%s' is not all, seen2 or short\n", tok);
				return 2;
			}
			o->l2_admit |= 1u << a;
		}
		break;
	}
	case 'G':
		if (num_f("--l2-read-gbps", optarg, 1e4, &o->l2_gbps) != 0)
			return 2;
		break;
	case 'Y':
		if (num_f0("--l2-latency-us", optarg, 1e7, &o->l2_lat_us) != 0)
			return 2;
		break;
	case 'D':
		o->l2_dir = optarg;
		break;
	case 'K':
		NUM("--kv-bytes-per-token", 1, 1ull << 30, o->kv_bytes);
		break;
	default:
		return NOT_MINE;
	}
	return -1;
}

/* The policy: columns, blocks, the deletion policy and its parameters, TTLs: -1 taken, 2 refused (said), NOT_MINE another group's. */
static int
opt_policy(int c, struct opts *o)
{
	switch (c) {
	case 'P':
		NUM("--probation", 1, 90, o->probation_pct);
		break;
	case 'U':
		NUM("--followup", 1, 100, o->followup_pct);
		break;
	case 'C':
		NUM("--column", 1, 4096, o->column);
		break;
	case 'p': {
		char buf[128], *tok, *save = NULL;

		if (list_hole(optarg) || strlen(optarg) >= sizeof(buf)) {
			fprintf(stderr, "kvss-trace: --policy: '%s' has an empty entry or is too "
					"long (a list of policies)\n", optarg);
			return 2;
		}
		snprintf(buf, sizeof(buf), "%s", optarg);
		o->npol = 0;
		for (tok = strtok_r(buf, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
			int pol = 0;

			while (prefixcache_policy_names[pol] != NULL &&
			       strcmp(tok, prefixcache_policy_names[pol]) != 0)
				pol++;
			if (prefixcache_policy_names[pol] == NULL) {
				fprintf(stderr, "kvss-trace: --policy: '%s' is not one of", tok);
				for (pol = 0; prefixcache_policy_names[pol] != NULL; pol++)
					fprintf(stderr, "%s %s", pol ? "," : "",
						prefixcache_policy_names[pol]);
				fprintf(stderr, " (a list: each in turn)\n");
				return 2;
			}
			if (o->npol == 8) {
				fprintf(stderr, "kvss-trace: --policy: more than 8 policies\n");
				return 2;
			}
			o->pols[o->npol++] = (enum prefixcache_policy)pol;
		}
		if (o->npol == 0) {
			fprintf(stderr, "kvss-trace: --policy: empty\n");
			return 2;
		}
		o->policy = o->pols[0];
		break;
	}
	case 'L':
		NUM("--ttl-last", 0, TTL_MAX_S, o->ttl_last_s);
		break;
	case 'F':
		NUM("--ttl-first", 0, TTL_MAX_S, o->ttl_first_s);
		break;
	case 'b':
		NUM("--block-tokens", 1, 1u << 20, o->block);
		break;
	default:
		return NOT_MINE;
	}
	return -1;
}

/* A fleet: replicas, their routing, the shared level, restarts and replicas added: -1 taken, 2 refused (said), NOT_MINE another group's. */
static int
opt_fleet(int c, struct opts *o, bool *shared_shaped)
{
	switch (c) {
	case 'R':
		NUM("--replicas", 1, ROUTE_MAX_REPLICAS, o->replicas);
		break;
	case 'r': {
		int pol = route_policy_parse(optarg);

		if (pol < 0) {
			fprintf(stderr, "kvss-trace: --route: '%s' is not one of affinity, random, "
					"org, prefix, chash\n", optarg);
			return 2;
		}
		o->route = (enum route_policy)pol;
		break;
	}
	case 256:
		if (parse_sizes("--shared", optarg, o->shared, 8, &o->nshared) != 0)
			return 2;
		break;
	case 257: {
		char buf[64], *tok, *save = NULL;
		unsigned int a;

		snprintf(buf, sizeof(buf), "%s", optarg);
		o->shared_admit = 0;
		for (tok = strtok_r(buf, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
			for (a = 0; fleet_admit_names[a] != NULL && strcmp(tok, fleet_admit_names[a]); a++)
				;
			if (fleet_admit_names[a] == NULL) {
				fprintf(stderr, "kvss-trace: --shared-admit: '%s' is not evicted or all\n",
					tok);
				return 2;
			}
			o->shared_admit |= 1u << a;
		}
		if (o->shared_admit == 0) {
			fprintf(stderr, "kvss-trace: --shared-admit: empty\n");
			return 2;
		}
		*shared_shaped = true;
		break;
	}
	case 258:
		NUM("--shared-ttl", 0, TTL_MAX_S, o->shared_ttl_s);
		*shared_shaped = true;
		break;
	case 259: {
		unsigned int nd;

		if (parse_sizes("--disk", optarg, &o->disk, 1, &nd) != 0)
			return 2;
		o->disk_set = true;
		break;
	}
	case 260:
		if (restart_arg(o, optarg) != 0)
			return 2;
		break;
	case 261:
		NUM("--add-replica-at", 1, WL_MAX_REQUESTS, o->add_at);
		break;
	case 262:
		o->shared_touch = true;
		*shared_shaped = true;
		break;
	default:
		return NOT_MINE;
	}
	return -1;
}

/* Time to first token: arrivals, the prefill and refill models: -1 taken, 2 refused (said), NOT_MINE another group's. */
static int
opt_ttft(int c, struct opts *o)
{
	switch (c) {
	case 'T':
		/* kvss's range (driver.recompute_tokens_per_s): below a token a
		 * second the rate per ns rounds to nothing, which the models read
		 * as computing for free. */
		if (num_f_from("--recompute-tokens-per-s", optarg, 1, 1e9, &o->recompute_tps) != 0)
			return 2;
		break;
	case 263:
		o->ttft = true;
		break;
	case 264:
		if (strcmp(optarg, "trace") == 0) {
			o->arrivals = TTFT_ARRIVALS_TRACE;
		} else if (strcmp(optarg, "poisson") == 0) {
			o->arrivals = TTFT_ARRIVALS_POISSON;
		} else {
			fprintf(stderr, "kvss-trace: --arrivals: '%s' is not trace or poisson\n",
				optarg);
			return 2;
		}
		o->ttft_given |= 1u << TTFT_OPT_ARRIVALS;
		break;
	case 265:
		if (num_f_from("--time-scale", optarg, 1e-6, 1e6, &o->time_scale) != 0)
			return 2;
		o->ttft_given |= 1u << TTFT_OPT_TIME_SCALE;
		break;
	case 266:
		if (num_f_from("--arrival-rate", optarg, 1e-6, 1e6, &o->arrival_rate) != 0)
			return 2;
		o->ttft_given |= 1u << TTFT_OPT_ARRIVAL_RATE;
		break;
	case 267:
		NUM("--arrival-seed", 0, 1ull << 62, o->arrival_seed);
		o->ttft_given |= 1u << TTFT_OPT_ARRIVAL_SEED;
		break;
	case 268:
		NUM("--max-inflight", 1, 4096, o->max_inflight);
		o->ttft_given |= 1u << TTFT_OPT_MAX_INFLIGHT;
		break;
	case 269:
		if (num_f0("--prefill-overhead-us", optarg, 1e7, &o->prefill_overhead_us) != 0)
			return 2;
		o->ttft_given |= 1u << TTFT_OPT_PREFILL_OVERHEAD;
		break;
	case 270:
		if (num_f0("--refill-latency-us", optarg, 1e7, &o->refill_lat_us) != 0)
			return 2;
		o->ttft_given |= 1u << TTFT_OPT_REFILL_LATENCY;
		break;
	case 271:
		if (num_f("--refill-read-gbps", optarg, 1e4, &o->refill_gbps) != 0)
			return 2;
		o->ttft_given |= 1u << TTFT_OPT_REFILL_GBPS;
		break;
	default:
		return NOT_MINE;
	}
	return -1;
}

/* The options together, once all are read: -1 to go on, or 2 (said). */
static int
options_check(int argc, char **argv, const struct opts *o)
{
	char err[512];

	/* What is missing, by name, rather than the whole usage. */
	if (optind < argc) {
		fprintf(stderr, "kvss-trace: '%s': not an option (a trace is --trace FILE; "
				"'kvss-trace --help' lists every option)\n", argv[optind]);
		return 2;
	}
	if ((o->trace == NULL) == (o->generate == 0)) {
		fprintf(stderr, "kvss-trace: %s\n", o->trace == NULL
			? "no requests: give --trace FILE (a JSONL trace) or --generate N (the "
			  "built-in workload)"
			: "--trace and --generate: one or the other");
		return 2;
	}
	if (o->l2_dir != NULL) {
		/* Checked now, not after the main replay has run (its JSON then
		 * ended half written). */
		if (o->nl2 == 0) {
			fprintf(stderr, "kvss-trace: --l2-dir: needs --l2 N (the second tier to keep "
					"in its files)\n");
			return 2;
		}
		if (kvdisk_dir_check(o->l2_dir, err, sizeof(err)) != 0) {
			fprintf(stderr, "kvss-trace: --l2-dir '%s': %s\n", o->l2_dir, err);
			return 2;
		}
	}
	if (o->documents > 0 && o->trace != NULL) {
		fprintf(stderr, "kvss-trace: --documents: the built-in workload's library, only with "
				"--generate N\n");
		return 2;
	}
	if (ttft_check(o) != 0)
		return 2;
	if (o->ncap == 0) {
		fprintf(stderr, "kvss-trace: --capacity: missing: the shard capacities to replay, "
				"in tokens (--capacity 1e6,inf; %s)\n", CAPACITY_FORMS);
		return 2;
	}
	return -1;
}

static int
options(int argc, char **argv, struct opts *o, bool *shared_shaped)
{
	static const struct option lo[] = {
		{"trace", required_argument, NULL, 't'}, {"capacity", required_argument, NULL, 'c'},
		{"column", required_argument, NULL, 'C'}, {"policy", required_argument, NULL, 'p'},
		{"ttl-last", required_argument, NULL, 'L'}, {"ttl-first", required_argument, NULL, 'F'},
		{"block-tokens", required_argument, NULL, 'b'}, {"json", no_argument, NULL, 'j'},
		{"limit", required_argument, NULL, 'n'}, {"orgs", required_argument, NULL, 'o'},
		{"baseline", no_argument, NULL, 'B'}, {"no-minus-one", no_argument, NULL, 'M'},
		{"generate", required_argument, NULL, 'g'}, {"replicas", required_argument, NULL, 'R'},
		{"documents", required_argument, NULL, 'k'},
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
		{"org-share", required_argument, NULL, 1001},
		{"multimodal-every", required_argument, NULL, 'I'},
		{"speculate", required_argument, NULL, 'S'},
		{"spec-reject-pct", required_argument, NULL, 'J'},
		{"spec-seed", required_argument, NULL, 'E'}, {"draft", required_argument, NULL, 'd'},
		{"shared", required_argument, NULL, 256}, {"shared-admit", required_argument, NULL, 257},
		{"shared-ttl", required_argument, NULL, 258}, {"disk", required_argument, NULL, 259},
		{"restart", required_argument, NULL, 260},
		{"add-replica-at", required_argument, NULL, 261},
		{"shared-touch", no_argument, NULL, 262}, {"ttft", no_argument, NULL, 263},
		{"arrivals", required_argument, NULL, 264}, {"time-scale", required_argument, NULL, 265},
		{"arrival-rate", required_argument, NULL, 266},
		{"arrival-seed", required_argument, NULL, 267},
		{"max-inflight", required_argument, NULL, 268},
		{"prefill-overhead-us", required_argument, NULL, 269},
		{"refill-latency-us", required_argument, NULL, 270},
		{"refill-read-gbps", required_argument, NULL, 271}, {NULL, 0, NULL, 0}};
	int c;

	while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		int rc = opt_workload(c, o);

		if (rc == NOT_MINE)
			rc = opt_cache(c, o);
		if (rc == NOT_MINE)
			rc = opt_policy(c, o);
		if (rc == NOT_MINE)
			rc = opt_fleet(c, o, shared_shaped);
		if (rc == NOT_MINE)
			rc = opt_ttft(c, o);
		if (rc != NOT_MINE) {
			if (rc != -1)
				return rc;
			continue;
		}
		switch (c) {
		case 'V':
			args_version("kvss-trace", PROTO_VERSION);
			return 0;
		case 'h':
			usage(stdout);
			return 0;
		default:
			/* getopt said which option; the list is one command away. */
			fprintf(stderr, "kvss-trace: 'kvss-trace --help' lists every option\n");
			return 2;
		}
	}
	return options_check(argc, argv, o);
}

/*
 * The plot's points of replay (@pi, @k): the first policy adds a capacity's
 * x, its baseline and (with --l2) the second tier's ratio; every policy its
 * own hit ratio at that x.
 */
static void
keep_points(const struct opts *o, struct oracle_blocks *blocks, struct curves *cv,
	    unsigned int pi, unsigned int k, const struct result *res)
{
	if (o->capacity[k] != 0 && cv->n < 16 && pi == 0) {
		cv->x[cv->n] = (double)o->capacity[k];
		cv->base[cv->n] = res->baseline;
		if (o->plot != NULL && o->nl2) {
			struct tier2_params tp = {.l1_tokens = o->capacity[k], .l2_tokens = o->l2[0],
						  .block = o->block,
						  /* the first rule asked */
						  .admit = (enum tier2_admit)__builtin_ctz(o->l2_admit)};
			struct tier2_result tr;

			if (tier2_run(blocks, &tp, &tr) == 0 && tr.input)
				cv->l2[cv->n] = (double)(tr.hit_l1 + tr.hit_l2) / (double)tr.input;
		}
		cv->n++;
	}
	if (o->capacity[k] != 0) {
		unsigned int j;

		for (j = 0; j < cv->n && cv->x[j] != (double)o->capacity[k]; j++)
			;
		if (j < cv->n)
			cv->hit[pi][j] = res->input ? (double)res->hit / (double)res->input : 0;
	}
}

/* --oracle: the offline references at capacity @k, and Belady's point for the plot. */
static void
run_oracles(const struct opts *o, struct oracle_blocks *blocks, struct curves *cv, unsigned int k,
	    struct result *res)
{
	res->belady = oracle_told(blocks, o->capacity[k], o->block, ORACLE_BELADY);
	res->belady_seen = oracle_told(blocks, o->capacity[k], o->block, ORACLE_BELADY_SEEN);
	res->told = oracle_lru_told(blocks, o->capacity[k], o->block, 0);
	res->told120 = oracle_lru_told(blocks, o->capacity[k], o->block, 120000);
	res->told_uses = oracle_told(blocks, o->capacity[k], o->block, ORACLE_TOLD_USES);
	res->told_rate = oracle_told(blocks, o->capacity[k], o->block, ORACLE_TOLD_RATE);
	res->life_rate = oracle_told(blocks, o->capacity[k], o->block, ORACLE_TOLD_LIFE_RATE);
	res->fitted = oracle_fitted_table(blocks, o->capacity[k], o->block);
	if (o->capacity[k] != 0 && cv->n > 0 && cv->x[cv->n - 1] == (double)o->capacity[k])
		cv->belady[cv->n - 1] = res->belady;
}

/* A replay's capacity as printed: the number of tokens, or @none when unlimited. */
static void
capacity_str(const struct result *res, const char *none, char *b, size_t n)
{
	if (res->capacity)
		snprintf(b, n, "%" PRIu64, res->capacity);
	else
		snprintf(b, n, "%s", none);
}

/* --json: what --draft, --speculate and --org-ttl add. */
static void
print_json_extras(const struct opts *o, const struct result *res)
{
	if (o->draft)
		printf(", \"draft_capacity_tokens\": %" PRIu64 ", \"draft_hit_tokens\": %" PRIu64
		       ", \"draft_hit_ratio\": %.4f, \"requests_hit_target_only\": %" PRIu64
		       ", \"requests_hit_draft_only\": %" PRIu64, o->draft_cap, res->draft_hit,
		       res->input ? (double)res->draft_hit / res->input : 0.0, res->only_target,
		       res->only_draft);
	if (o->spec_tokens)
		printf(", \"spec_tokens\": %u, \"spec_reject_pct\": %u, \"spec_seed\": %" PRIu64
		       ", \"spec_rounds\": %" PRIu64 ", \"spec_proposed\": %" PRIu64
		       ", \"spec_accepted\": %" PRIu64 ", \"spec_overwrites\": %" PRIu64,
		       o->spec_tokens, o->spec_reject_pct, o->spec_seed, res->spec_rounds,
		       res->spec_proposed, res->spec_accepted, res->spec_overwrites);
	if (o->nottl) {
		unsigned int j;

		printf(", \"orgs\": [");
		for (j = 0; j < o->nottl; j++)
			printf("%s{\"org\": \"%s\", \"ttl_last_s\": %" PRIu64 ", \"ttl_first_s\": %" PRIu64
			       ", \"dram_share\": %g, \"dram_cap\": %g"
			       ", \"input_tokens\": %" PRIu64 ", \"hit_tokens\": %" PRIu64
			       ", \"hit_ratio\": %.4f}", j ? ", " : "", o->ottl[j].name, o->ottl[j].last_s,
			       o->ottl[j].first_s, o->ottl[j].share, o->ottl[j].cap, res->org_input[j], res->org_hit[j],
			       res->org_input[j] ? (double)res->org_hit[j] / (double)res->org_input[j] : 0.0);
		printf("]");
	}
}

/* --json: a replay's object up to its second tier and fleet (left open for them). */
static void
print_json(const struct opts *o, const struct result *res)
{
	char cs[32];

	capacity_str(res, "null", cs, sizeof(cs));
	printf("{\"policy\": \"%s\", ", prefixcache_policy_names[o->policy]);
	printf("\"capacity_tokens\": %s, \"requests\": %" PRIu64
	       ", \"input_tokens\": %" PRIu64 ", \"hit_tokens\": %" PRIu64
	       ", \"hit_ratio\": %.4f, \"evicted_tokens\": %" PRIu64
	       ", \"deleted_tokens\": %" PRIu64 ", \"expired_tokens\": %" PRIu64
	       ", \"peak_stored_tokens\": %" PRIu64 ", \"protocol_errors\": %" PRIu64
	       ", \"verify_failures\": %" PRIu64 ", \"wall_s\": %.2f",
	       cs, res->requests, res->input, res->hit,
	       res->input ? (double)res->hit / res->input : 0.0, res->evicted, res->deleted,
	       res->expired, res->peak, res->perr, res->vfail, res->wall);
	printf(", \"evict_tokens_per_s\": %.1f, \"evict_tokens_per_s_peak\": %.1f"
	       ", \"refill_tokens_per_s\": %.1f, \"refill_tokens_per_s_peak\": %.1f"
	       ", \"peak_window_s\": %u",
	       res->evict_rate, res->evict_peak, res->refill_rate, res->refill_peak,
	       res->peak_window_s);
	if (o->kv_bytes)
		printf(", \"evict_gbps\": %.3f, \"evict_gbps_peak\": %.3f"
		       ", \"refill_gbps\": %.3f, \"refill_gbps_peak\": %.3f",
		       gbps(o, res->evict_rate), gbps(o, res->evict_peak),
		       gbps(o, res->refill_rate), gbps(o, res->refill_peak));
	if (res->baseline >= 0)
		printf(", \"baseline_lru_hit_ratio\": %.4f", res->baseline);
	if (res->belady >= 0)
		printf(", \"belady_hit_ratio\": %.4f, \"belady_seen_hit_ratio\": %.4f"
		       ", \"told_lru_hit_ratio\": %.4f, \"told_lru_120s_hit_ratio\": %.4f"
		       ", \"told_uses_hit_ratio\": %.4f, \"told_rate_hit_ratio\": %.4f"
		       ", \"told_life_rate_hit_ratio\": %.4f, \"fitted_table_hit_ratio\": %.4f",
		       res->belady, res->belady_seen, res->told, res->told120, res->told_uses,
		       res->told_rate, res->life_rate, res->fitted);
	if (o->replicas > 1)
		printf(", \"replicas\": %u, \"route\": \"%s\", \"balance_mean\": %.3f"
		       ", \"balance_worst\": %.3f", o->replicas, route_policy_name(o->route),
		       res->balance_mean, res->balance_worst);
	printf(", \"multimodal_trimmed_tokens\": %" PRIu64 ", \"generated_hit_tokens\": %" PRIu64,
	       res->mm_trimmed, res->gen_hit);
	print_json_extras(o, res);
}

/* The lines under the row for multimodal prompts, answers hit, --draft, --speculate, --org-ttl. */
static void
print_text_extras(const struct opts *o, const struct result *res)
{
	if (res->mm_trimmed)
		printf("%-12s multimodal: %" PRIu64 " tokens not cached, after a multimodal "
		       "token\n", "", res->mm_trimmed);
	if (res->gen_hit)
		printf("%-12s %" PRIu64 " hit tokens are an earlier turn's answer (generated)\n",
		       "", res->gen_hit);
	if (o->draft)
		printf("%-12s draft (capacity %" PRIu64 "%s): %" PRIu64 " tokens hit, hit ratio "
		       "%.4f; requests hit in the target only %" PRIu64 ", in the draft only %"
		       PRIu64 "\n", "", o->draft_cap, o->draft_cap ? "" : ", unlimited",
		       res->draft_hit, res->input ? (double)res->draft_hit / res->input : 0.0,
		       res->only_target, res->only_draft);
	if (o->spec_tokens)
		printf("%-12s speculative decoding (%u per round, %u%% rejected, seed %" PRIu64
		       "): %" PRIu64 " rounds, %" PRIu64 " of %" PRIu64 " proposals accepted, %"
		       PRIu64 " rejected tokens evicted and overwritten\n", "", o->spec_tokens,
		       o->spec_reject_pct, o->spec_seed, res->spec_rounds, res->spec_accepted,
		       res->spec_proposed, res->spec_overwrites);
	for (unsigned int j = 0; j < o->nottl; j++)
		printf("%-12s org %s (ttl_last_s %" PRIu64 ", ttl_first_s %" PRIu64 "; 0: the "
		       "global; DRAM share %g, cap %g): %" PRIu64 " of %" PRIu64 " prompt tokens hit, "
		       "hit ratio %.4f\n", "", o->ottl[j].name, o->ottl[j].last_s, o->ottl[j].first_s,
		       o->ottl[j].share, o->ottl[j].cap, res->org_hit[j],
		       res->org_input[j],
		       res->org_input[j] ? (double)res->org_hit[j] / (double)res->org_input[j] : 0.0);
}

/* The table's row of a replay, and the lines under it for the references asked. */
static void
print_text(const struct opts *o, const struct result *res)
{
	char cs[32];

	capacity_str(res, "unlimited", cs, sizeof(cs));
	printf("%-12s %8" PRIu64 " %12" PRIu64 " %12" PRIu64 " %9.4f %12" PRIu64
	       " %12" PRIu64 " %10" PRIu64 " %12" PRIu64 " %6" PRIu64 " %6" PRIu64
	       " %7.1f\n",
	       cs, res->requests, res->input, res->hit,
	       res->input ? (double)res->hit / res->input : 0.0, res->evicted, res->deleted,
	       res->expired, res->peak, res->perr, res->vfail, res->wall);
	printf("%-12s tokens/s of trace time: evicted %.0f, busiest %u s %.0f; refilled "
	       "%.0f, busiest %u s %.0f", "", res->evict_rate, res->peak_window_s,
	       res->evict_peak, res->refill_rate, res->peak_window_s, res->refill_peak);
	if (o->kv_bytes)
		printf(" (Gb/s: %.2f, %.2f; %.2f, %.2f)", gbps(o, res->evict_rate),
		       gbps(o, res->evict_peak), gbps(o, res->refill_rate),
		       gbps(o, res->refill_peak));
	printf("\n");
	if (res->baseline >= 0)
		printf("%-12s plain LRU over blocks: hit ratio %.4f\n", "", res->baseline);
	if (res->belady >= 0)
		printf("%-12s offline: Belady with bypass %.4f, not told of first "
		       "sightings %.4f; LRU told which blocks return %.4f, within 120 s "
		       "%.4f; told how many more uses %.4f, and when the last %.4f, "
		       "only the life's mean gap %.4f; by a table fitted on the trace "
		       "%.4f\n",
		       "", res->belady, res->belady_seen, res->told, res->told120, res->told_uses,
		       res->told_rate, res->life_rate, res->fitted);
	if (o->replicas > 1)
		printf("%-12s %u replicas, route %s: busiest replica over the mean per minute: "
		       "mean %.3f, worst %.3f\n", "", o->replicas, route_policy_name(o->route),
		       res->balance_mean, res->balance_worst);
	print_text_extras(o, res);
}

/*
 * One replay of the trace: policy @p pi at capacity @p k, its line (or
 * JSON) printed, its curves' points kept in @p cv, with --ttft its times
 * to first token at @p arrival_ns; @p bad set when it counted a protocol
 * error or a verify failure. 0, or 1: it could not run.
 */
static int
replay_one(struct opts *o, const struct workload *t, struct oracle_blocks *blocks,
	   struct curves *cv, const uint64_t *arrival_ns, unsigned int pi, unsigned int k, int *bad)
{
	struct result res;
	int rc2;

	o->policy = o->pols[pi];
	if (o->npol > 1 && k == 0 && !o->json)
		printf("policy %s\n", prefixcache_policy_names[o->policy]);
	if (run_tiers(o, t, o->capacity[k], 0, 0, &res) != 0)
		return 1;
	res.baseline = o->baseline ? oracle_plain_lru(blocks, o->capacity[k], o->block) : -1;
	res.belady = res.belady_seen = res.told = res.told120 = res.told_uses = -1;
	res.told_rate = res.life_rate = res.fitted = -1;
	keep_points(o, blocks, cv, pi, k, &res);
	/* The references do not depend on the policy: once is enough (the first). */
	if (o->oracle && pi == 0)
		run_oracles(o, blocks, cv, k, &res);
	*bad |= res.perr != 0 || res.vfail != 0;
	if (o->json)
		print_json(o, &res);
	else
		print_text(o, &res);
	/* --ttft: its line under the row (its keys before the second tier's and the fleet's). */
	rc2 = o->ttft ? ttft_print(o, arrival_ns, &res, "") : 0;
	free(res.ttft);
	if (rc2 != 0)
		return 1;
	/* The second tier and the fleet: their lines under the row, or their keys in the object. */
	if (o->nl2 && (rc2 = print_l2(o, t, blocks, o->capacity[k], arrival_ns)) != 0) {
		if (rc2 < 0)
			return 1;
		*bad = 1;
	}
	if (fleet_asked(o) && print_fleet(o, t, o->capacity[k]) != 0)
		return 1;
	if (o->json)
		printf("}\n");
	fflush(stdout);
	return 0;
}

int
main(int argc, char **argv)
{
	struct opts o = {.column = 64, .block = 512, .l2_admit = 1u << TIER2_ADMIT_ALL,
			 .l2_gbps = 3.0, .l2_lat_us = 100, .spec_reject_pct = 20, .spec_seed = 1,
			 .shared_admit = 1u << FLEET_ADMIT_EVICTED | 1u << FLEET_ADMIT_ALL,
			 .restart_rep = -1, .time_scale = 1, .arrival_rate = 5, .arrival_seed = 1,
			 .max_inflight = 8, .refill_lat_us = 20, .refill_gbps = 12.5};
	bool shared_shaped = false;
	struct workload t = {0};
	struct oracle_blocks *blocks = NULL;
	struct curves cv = {0};
	uint64_t *arrival_ns = NULL;
	unsigned int pi;
	char err[512];
	unsigned int k;
	int c, bad = 0;

	args_check_stdout_at_exit("kvss-trace");
	c = options(argc, argv, &o, &shared_shaped);
	if (c >= 0)
		return c;
	if (o.generate != 0) {
		if (workload_generate_docs(o.generate, o.documents, &t) != 0) {
			fprintf(stderr, "kvss-trace: out of memory\n");
			return 1;
		}
		workload_mark_multimodal(&t, o.mm_every, 64);
	} else if (workload_load(o.trace, o.block, 0, &t, err, sizeof(err)) != 0) {
		fprintf(stderr, "kvss-trace: %s\n", err);
		return 2;
	}
	if (fleet_check(&o, o.limit && o.limit < t.n ? o.limit : t.n, shared_shaped) != 0) {
		workload_free(&t);
		return 2;
	}
	if (o.recompute_tps > 0 && o.kv_bytes == 0) {
		fprintf(stderr, "kvss-trace: --recompute-tokens-per-s needs --kv-bytes-per-token (what "
				"an L2 read of a token costs)\n");
		workload_free(&t);
		return 2;
	}
	if ((o.baseline || o.oracle || o.nl2) && (t.n == 0 || t.r[0].ids == NULL)) {
		/* Their references run over the trace's blocks: none, no figure (not 0.0000). */
		const char *what[3];
		unsigned int nw = 0, w;

		if (o.baseline)
			what[nw++] = "--baseline";
		if (o.oracle)
			what[nw++] = "--oracle";
		if (o.nl2)
			what[nw++] = "--l2";
		fprintf(stderr, "kvss-trace: ");
		for (w = 0; w < nw; w++)
			fprintf(stderr, "%s%s", w == 0 ? "" : w + 1 == nw ? " and " : ", ", what[w]);
		fprintf(stderr, " need%s a trace with block ids (the Mooncake format's hash_ids); %s "
				"has %s\n", nw == 1 ? "s" : "",
			o.trace ? o.trace : "the built-in workload (--generate)",
			t.n == 0 ? "no request" : "none");
		workload_free(&t);
		return 2;
	}
	/* The arrivals before any replay: a trace without its times is refused at once. */
	if (o.ttft && (c = ttft_arrivals(&o, &t, o.limit && o.limit < t.n ? o.limit : t.n,
					  &arrival_ns)) != 0) {
		workload_free(&t);
		return c;
	}
	if ((o.baseline || o.oracle || o.nl2) && (blocks = oracle_blocks_new(&t, o.limit)) == NULL) {
		fprintf(stderr, "kvss-trace: out of memory\n");
		free(arrival_ns);
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
		if (k == o.ncap) {
			k = (unsigned int)-1; /* the next policy, from the first capacity */
			pi++;
			continue;
		}
		if (replay_one(&o, &t, blocks, &cv, arrival_ns, pi, k, &bad) != 0)
			return 1;
	}
	if (o.plot != NULL && draw(&o, &cv) != 0)
		bad = 1;
	free(arrival_ns);
	oracle_blocks_free(blocks);
	workload_free(&t);
	return bad ? 1 : 0;
}
