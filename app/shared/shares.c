/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * kvss-shared sweep's shares of the shared level: which live columns go so
 * that the level keeps within its capacity, every organization within its
 * cap, and no organization below its guarantee loses a column for
 * another's sake (kvss_shared.h, struct ks_shares).
 *
 * The level holds what every replica wrote; no driver sees all of it, so
 * the sweep, which reads every record, is where the level's shares are
 * kept. Like Linux's memory.low, a guarantee is not a reservation: what an
 * organization does not use is lent to the others while the level has
 * room, and taken back by deleting the borrowers' columns once it has
 * none. Tokens count as the driver's shares count them: a column's tokens
 * once, whatever its shards and caches hold.
 *
 * The order, per organization, is the oldest first use first (the column
 * nearest its first-use TTL; ties by the older write, then the object id,
 * so that a run is the same on the same pool). A column goes with every
 * column that hangs on it (its record's key is their records' parent, in
 * the same model): a lookup walks a prefix from its start, so they could
 * never be found again, and left alone they would hold the level's room
 * until their own turn.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvss_shared.h"
#include "proto.h"

int
ks_parse_org(const char *s, uint64_t *org)
{
	size_t n = strlen(s), i;
	uint64_t v = 0;

	if (n == 0)
		return -1;
	if (n > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
		if (n > 18)
			return -1;
		for (i = 2; i < n; i++) {
			char c = s[i];
			unsigned int d;

			if (c >= '0' && c <= '9')
				d = (unsigned int)(c - '0');
			else if (c >= 'a' && c <= 'f')
				d = (unsigned int)(c - 'a' + 10);
			else if (c >= 'A' && c <= 'F')
				d = (unsigned int)(c - 'A' + 10);
			else
				return -1;
			v = v << 4 | d;
		}
		*org = v;
		return 0;
	}
	*org = proto_ref_isolation_id(s, n);
	return 0;
}

/*
 * A fraction in [0, 1] written as digits with at most one '.': "0.25",
 * "1", ".5". Not strtod's whole language: no sign, exponent, hex, "nan" or
 * "inf", nothing after it.
 */
static int
fraction(const char *s, size_t n, double *out)
{
	char buf[32];
	size_t i, dots = 0, digits = 0;
	char *end;

	if (n == 0 || n >= sizeof(buf))
		return -1;
	for (i = 0; i < n; i++) {
		if (s[i] == '.')
			dots++;
		else if (s[i] >= '0' && s[i] <= '9')
			digits++;
		else
			return -1;
	}
	if (dots > 1 || digits == 0)
		return -1;
	memcpy(buf, s, n);
	buf[n] = '\0';
	*out = strtod(buf, &end);
	return *end == '\0' && *out >= 0 && *out <= 1 ? 0 : -1;
}

int
ks_share_parse(const char *arg, bool is_default, struct ks_shares *sh, char *err, size_t errlen)
{
	const char *opt = is_default ? "--share-default" : "--share";
	const char *a = arg, *c1, *c2;
	char safe[KS_SAFE_LEN];
	double share, cap = 1;
	uint64_t org = 0;

	char name[KS_SAFE_LEN] = "";

	if (!is_default) {
		c1 = strchr(arg, ':');
		if (c1 == NULL || (size_t)(c1 - arg) >= sizeof(name) || c1 == arg) {
			snprintf(err, errlen, "%s: '%s' is not ORG:SHARE[:CAP]", opt,
				 ks_safe(arg, safe, sizeof(safe)));
			return -1;
		}
		memcpy(name, arg, (size_t)(c1 - arg));
		name[c1 - arg] = '\0';
		if (ks_parse_org(name, &org) != 0) {
			snprintf(err, errlen, "%s: '%s' is neither a name nor 0x and 1 to 16 hex digits",
				 opt, ks_safe(name, safe, sizeof(safe)));
			return -1;
		}
		for (uint32_t i = 0; i < sh->n; i++)
			if (sh->org[i].org == org) {
				snprintf(err, errlen, "%s: organization '%s' is given twice", opt,
					 ks_safe(name, safe, sizeof(safe)));
				return -1;
			}
		if (sh->n >= KS_MAX_SHARES) {
			snprintf(err, errlen, "%s: more than %d organizations", opt, KS_MAX_SHARES);
			return -1;
		}
		a = c1 + 1;
	}
	c2 = strchr(a, ':');
	if (fraction(a, c2 != NULL ? (size_t)(c2 - a) : strlen(a), &share) != 0 ||
	    (c2 != NULL && fraction(c2 + 1, strlen(c2 + 1), &cap) != 0)) {
		snprintf(err, errlen, "%s: '%s': SHARE and CAP are fractions of the capacity from 0 "
				      "to 1 (digits and a '.')", opt, ks_safe(arg, safe, sizeof(safe)));
		return -1;
	}
	if (cap == 0 || share > cap) {
		snprintf(err, errlen, "%s: '%s': the cap must be above 0 and at least the share", opt,
			 ks_safe(arg, safe, sizeof(safe)));
		return -1;
	}
	if (is_default) {
		sh->share_default = share;
		sh->cap_default = cap;
		sh->default_given = true;
	} else {
		struct ks_share *o = &sh->org[sh->n++];

		o->org = org;
		o->share = share;
		o->cap = cap;
		ks_safe(name, o->label, sizeof(o->label));
	}
	return 0;
}

int
ks_shares_check(const struct ks_shares *sh, char *err, size_t errlen)
{
	double sum = sh->share_default;
	uint32_t i;

	if (sh->capacity_tokens == 0) {
		if (sh->n > 0 || sh->default_given) {
			snprintf(err, errlen, "--share and --share-default need --capacity-tokens (the "
					      "level's size they are shares of)");
			return -1;
		}
		return 0;
	}
	for (i = 0; i < sh->n; i++)
		sum += sh->org[i].share;
	/* The driver's own rule for its DRAM shares (a default share counts once). */
	if (sum > 1 + 1e-9) {
		snprintf(err, errlen, "the guaranteed shares sum to %.6f%s, above the whole", sum,
			 sh->share_default > 0 ? " (with --share-default's)" : "");
		return -1;
	}
	return 0;
}

/* Organization @p org's share and cap, in tokens of the capacity. */
static void
limits(const struct ks_shares *sh, uint64_t org, uint64_t *guar, uint64_t *cap)
{
	double s = sh->share_default, c = sh->cap_default > 0 ? sh->cap_default : 1;
	uint32_t i;

	for (i = 0; i < sh->n; i++)
		if (sh->org[i].org == org) {
			s = sh->org[i].share;
			c = sh->org[i].cap;
			break;
		}
	*guar = (uint64_t)floor(s * (double)sh->capacity_tokens);
	*cap = (uint64_t)floor(c * (double)sh->capacity_tokens);
}

static int
by_org_age(const void *a, const void *b)
{
	const struct ks_live *x = a, *y = b;

	if (x->org != y->org)
		return x->org < y->org ? -1 : 1;
	if (x->first_use_ns != y->first_use_ns)
		return x->first_use_ns < y->first_use_ns ? -1 : 1;
	if (x->written_ns != y->written_ns)
		return x->written_ns < y->written_ns ? -1 : 1;
	return x->object_id < y->object_id ? -1 : x->object_id > y->object_id;
}

int
ks_lives_add(struct ks_lives *lv, const struct ks_live *x)
{
	if (lv->n == lv->cap) {
		uint32_t n = lv->cap ? lv->cap * 2 : 1024;
		struct ks_live *v = realloc(lv->v, (size_t)n * sizeof(*v));

		if (v == NULL)
			return -ENOMEM;
		lv->v = v;
		lv->cap = n;
	}
	lv->v[lv->n++] = *x;
	return 0;
}

void
ks_lives_free(struct ks_lives *lv)
{
	free(lv->v);
	free(lv->org);
	memset(lv, 0, sizeof(*lv));
}

/* How far @p u is above its guarantee (the heap's key; only those above are in it). */
static uint64_t
excess(const struct ks_org_use *u)
{
	return u->tokens - u->guaranteed;
}

/* Whether heap entry @p a goes before @p b: further above, then the lower id (a stable run). */
static bool
before(const struct ks_org_use *o, uint32_t a, uint32_t b)
{
	return excess(&o[a]) != excess(&o[b]) ? excess(&o[a]) > excess(&o[b]) : o[a].org < o[b].org;
}

static void
heap_push(const struct ks_org_use *o, uint32_t *h, uint32_t *n, uint32_t k)
{
	uint32_t i = (*n)++;

	while (i > 0 && before(o, k, h[(i - 1) / 2])) {
		h[i] = h[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	h[i] = k;
}

static uint32_t
heap_pop(const struct ks_org_use *o, uint32_t *h, uint32_t *n)
{
	uint32_t top = h[0], last = h[--(*n)], i = 0;

	for (;;) {
		uint32_t c = 2 * i + 1;

		if (c >= *n)
			break;
		if (c + 1 < *n && before(o, h[c + 1], h[c]))
			c++;
		if (!before(o, h[c], last))
			break;
		h[i] = h[c];
		i = c;
	}
	if (*n > 0)
		h[i] = last;
	return top;
}

#define NONE UINT32_MAX

static uint64_t
mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	return x;
}

/*
 * Each column's children among the organization's columns v[a..b): a
 * column whose parent is another's key, in the same model. An open
 * addressing table of the keys, twice their number.
 */
static int
link_children(struct ks_live *v, uint32_t a, uint32_t b)
{
	uint32_t n = b - a, size = 16, i, *t;

	while (size < 2 * n)
		size *= 2;
	t = malloc(size * sizeof(*t));
	if (t == NULL)
		return -ENOMEM;
	for (i = 0; i < size; i++)
		t[i] = NONE;
	for (i = a; i < b; i++) {
		uint32_t h = (uint32_t)mix(v[i].key ^ v[i].layout) & (size - 1);

		v[i].child = v[i].sib = NONE;
		while (t[h] != NONE)
			h = (h + 1) & (size - 1);
		t[h] = i;
	}
	for (i = a; i < b; i++) {
		uint32_t h = (uint32_t)mix(v[i].parent ^ v[i].layout) & (size - 1);

		for (; t[h] != NONE; h = (h + 1) & (size - 1)) {
			struct ks_live *p = &v[t[h]];

			if (p->key == v[i].parent && p->layout == v[i].layout && t[h] != i) {
				v[i].sib = p->child;
				p->child = i;
				break;
			}
		}
	}
	free(t);
	return 0;
}

/*
 * Column @p i and what hangs on it go (those not gone already): the tokens
 * freed. Without recursion: the records are the pool's, and a forged chain
 * may be as deep as the pool is large; @p stack has room for every column
 * (each is pushed once, as it is marked; a cycle of forged parents ends
 * at a column already marked).
 */
static uint64_t
take(struct ks_live *v, uint32_t i, enum ks_victim why, struct ks_org_use *u, uint32_t *stack)
{
	uint64_t freed = 0;
	uint32_t n = 0, c;

	if (v[i].victim != KS_KEPT)
		return 0;
	v[i].victim = why;
	stack[n++] = i;
	while (n > 0) {
		i = stack[--n];
		u->tokens -= v[i].tokens;
		u->deleted_tokens += v[i].tokens;
		u->deleted++;
		freed += v[i].tokens;
		for (c = v[i].child; c != NONE; c = v[c].sib)
			if (v[c].victim == KS_KEPT) {
				v[c].victim = why;
				stack[n++] = c;
			}
	}
	return freed;
}

/* The organization's oldest column still kept, from u->next on; false when none. */
static bool
oldest_kept(const struct ks_live *v, struct ks_org_use *u)
{
	while (u->next < u->end && v[u->next].victim != KS_KEPT)
		u->next++;
	return u->next < u->end;
}

/*
 * Mark the columns to delete (ks_live.victim: KS_OVER_CAP or KS_OVER_SHARE)
 * and sum each organization's use (lv->org[], sorted by organization).
 * Sorts lv->v by organization, then age.
 */
int
ks_shares_pick(const struct ks_shares *sh, struct ks_lives *lv)
{
	uint64_t total = 0;
	uint32_t i, k, *stack;

	free(lv->org);
	lv->org = NULL;
	lv->norg = 0;
	if (lv->n == 0)
		return 0;
	qsort(lv->v, lv->n, sizeof(lv->v[0]), by_org_age);
	lv->org = calloc(lv->n, sizeof(*lv->org)); /* at most one per column */
	stack = malloc(lv->n * sizeof(*stack));
	if (lv->org == NULL || stack == NULL) {
		free(stack);
		return -ENOMEM;
	}
	for (i = 0; i < lv->n; i++) {
		struct ks_org_use *u;

		if (i == 0 || lv->v[i].org != lv->v[i - 1].org) {
			u = &lv->org[lv->norg++];
			u->org = lv->v[i].org;
			u->first = i;
			limits(sh, u->org, &u->guaranteed, &u->cap);
		}
		u = &lv->org[lv->norg - 1];
		u->end = i + 1;
		if ((i + 1 == lv->n || lv->v[i + 1].org != u->org) &&
		    link_children(lv->v, u->first, u->end) != 0) {
			free(stack);
			return -ENOMEM;
		}
		u->tokens += lv->v[i].tokens;
		lv->v[i].victim = KS_KEPT;
		total += lv->v[i].tokens;
	}
	/* Caps first: an organization above its own goes down to it, oldest first. */
	for (k = 0; k < lv->norg; k++) {
		struct ks_org_use *u = &lv->org[k];

		u->next = u->first;
		while (u->tokens > u->cap && oldest_kept(lv->v, u))
			total -= take(lv->v, u->next, KS_OVER_CAP, u, stack);
	}
	/*
	 * Then the capacity: the organization furthest above its guarantee
	 * gives its oldest column, until the level fits. One at or below its
	 * guarantee gives nothing; when none is above, the guarantees alone
	 * fill the level (they sum to at most 1, so only rounding leaves that).
	 * A heap of the organizations above their guarantee, by how far.
	 */
	if (total > sh->capacity_tokens) {
		uint32_t *heap = malloc(lv->norg * sizeof(*heap)), nh = 0;

		if (heap == NULL) {
			free(stack);
			return -ENOMEM;
		}
		for (k = 0; k < lv->norg; k++)
			if (lv->org[k].tokens > lv->org[k].guaranteed && oldest_kept(lv->v, &lv->org[k]))
				heap_push(lv->org, heap, &nh, k);
		while (total > sh->capacity_tokens && nh > 0) {
			struct ks_org_use *most = &lv->org[heap_pop(lv->org, heap, &nh)];

			total -= take(lv->v, most->next, KS_OVER_SHARE, most, stack);
			if (most->tokens > most->guaranteed && oldest_kept(lv->v, most))
				heap_push(lv->org, heap, &nh, (uint32_t)(most - lv->org));
		}
		free(heap);
	}
	free(stack);
	lv->total_tokens = total;
	return 0;
}
