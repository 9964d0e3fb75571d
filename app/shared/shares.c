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
 * What goes is a leaf, as in DRAM: a column nothing kept hangs on (no
 * other record names its key as its parent, in the same model). A lookup
 * walks a prefix from its start, so taking a column from its middle would
 * leave what follows unreachable; taking leaves, every column kept stays
 * reachable, and a prompt shrinks from its end. Among an organization's
 * leaves the oldest first use goes first (the column nearest its
 * first-use TTL; ties by the older write, then the object id, so that a
 * run is the same on the same pool). An organization above its guarantee
 * gives whole columns, so it may end below it by less than one.
 *
 * Shares are exact: billionths of the capacity, parsed from their digits
 * (0.57 of 100 tokens is 57, where a double gave 56).
 */
#include <errno.h>
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
 * A fraction from 0 to 1 written as digits with at most one '.' ("0.25",
 * "1", ".5") into billionths, exactly; -1 for anything else: no sign,
 * exponent, hex, "nan" or "inf", more than 9 decimals, nothing after it.
 */
static int
fraction(const char *s, size_t n, uint32_t *out)
{
	uint64_t whole = 0, part = 0, scale = KS_WHOLE;
	size_t i, digits = 0;
	bool dot = false;

	if (n == 0)
		return -1;
	for (i = 0; i < n; i++) {
		if (s[i] == '.' && !dot) {
			dot = true;
			continue;
		}
		if (s[i] < '0' || s[i] > '9')
			return -1;
		digits++;
		if (!dot) {
			whole = whole * 10 + (uint64_t)(s[i] - '0');
			if (whole > 1)
				return -1;
		} else {
			if (scale == 1)
				return -1; /* a tenth of a billionth */
			scale /= 10;
			part += (uint64_t)(s[i] - '0') * scale;
		}
	}
	if (digits == 0 || whole * KS_WHOLE + part > KS_WHOLE)
		return -1;
	*out = (uint32_t)(whole * KS_WHOLE + part);
	return 0;
}

int
ks_share_parse(const char *arg, bool is_default, struct ks_shares *sh, char *err, size_t errlen)
{
	const char *opt = is_default ? "--share-default" : "--share";
	char safe[KS_SAFE_LEN], name[KS_SAFE_LEN] = "";
	const char *a = arg, *c1, *c2;
	uint32_t share, cap = 0;
	uint64_t org = 0;

	if (is_default && sh->default_given) {
		snprintf(err, errlen, "%s: given twice", opt);
		return -1;
	}
	if (!is_default) {
		c1 = strchr(arg, ':');
		if (c1 != NULL && (size_t)(c1 - arg) >= sizeof(name)) {
			snprintf(err, errlen, "%s: ORG is longer than %zu characters (give its id, 0x "
					      "and hex)", opt, sizeof(name) - 1);
			return -1;
		}
		if (c1 == NULL || c1 == arg) {
			snprintf(err, errlen, "%s: '%s' is not ORG:SHARE[:CAP] (a name with ':' in "
					      "it: give its id, 0x and hex)", opt,
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
				      "to 1 (digits and a '.', at most 9 decimals)", opt,
			 ks_safe(arg, safe, sizeof(safe)));
		return -1;
	}
	if ((c2 != NULL && cap == 0) || (cap != 0 && share > cap)) {
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
		o->cap = cap; /* 0: the default's, known once every option is read */
		ks_safe(name, o->label, sizeof(o->label));
	}
	return 0;
}

/* Organization @p i's cap in billionths: its own, else the default's, else the whole. */
static uint32_t
cap_of(const struct ks_shares *sh, const struct ks_share *o)
{
	if (o != NULL && o->cap != 0)
		return o->cap;
	return sh->cap_default != 0 ? sh->cap_default : KS_WHOLE;
}

int
ks_shares_check(const struct ks_shares *sh, char *err, size_t errlen)
{
	uint64_t sum = sh->share_default;
	uint32_t i;

	if (sh->capacity_tokens == 0) {
		if (sh->n > 0 || sh->default_given) {
			snprintf(err, errlen, "--share and --share-default need --capacity-tokens (the "
					      "level's size they are shares of)");
			return -1;
		}
		return 0;
	}
	for (i = 0; i < sh->n; i++) {
		if (sh->org[i].share > cap_of(sh, &sh->org[i])) {
			snprintf(err, errlen, "--share %s: its share is above --share-default's cap, "
					      "which it takes: give it a cap of its own",
				 sh->org[i].label);
			return -1;
		}
		sum += sh->org[i].share;
	}
	/* The driver's own rule for its DRAM shares: the default's share
	 * counts once (each organization not named is guaranteed it, so the
	 * guarantees present may still pass the whole: the sweep says so). */
	if (sum > KS_WHOLE) {
		snprintf(err, errlen, "the guaranteed shares sum to %.9f%s, above the whole",
			 (double)sum / KS_WHOLE, sh->share_default > 0 ? " (with --share-default's)" : "");
		return -1;
	}
	return 0;
}

/* @p ppb billionths of the capacity, in tokens, rounded down (exact). */
static uint64_t
of_capacity(const struct ks_shares *sh, uint32_t ppb)
{
	return (uint64_t)((unsigned __int128)sh->capacity_tokens * ppb / KS_WHOLE);
}

/* Organization @p org's share and cap, in tokens of the capacity. */
static void
limits(const struct ks_shares *sh, uint64_t org, uint64_t *guar, uint64_t *cap)
{
	const struct ks_share *o = NULL;
	uint32_t i;

	for (i = 0; i < sh->n; i++)
		if (sh->org[i].org == org)
			o = &sh->org[i];
	*guar = of_capacity(sh, o != NULL ? o->share : sh->share_default);
	*cap = of_capacity(sh, cap_of(sh, o));
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
	free(lv->leaf);
	memset(lv, 0, sizeof(*lv));
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
 * Each column's parent among the organization's columns v[a..b): the one
 * whose key its record names as its parent, in the same model (a prompt's
 * first names the isolation id, no column's key). An open addressing table
 * of the keys, twice their number; a key given twice (forged) is found
 * once.
 */
static int
link_parents(struct ks_live *v, uint32_t a, uint32_t b)
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

		v[i].up = NONE;
		v[i].kids = 0;
		while (t[h] != NONE)
			h = (h + 1) & (size - 1);
		t[h] = i;
	}
	for (i = a; i < b; i++) {
		uint32_t h = (uint32_t)mix(v[i].parent ^ v[i].layout) & (size - 1);

		for (; t[h] != NONE; h = (h + 1) & (size - 1)) {
			uint32_t p = t[h];

			if (p != i && v[p].key == v[i].parent && v[p].layout == v[i].layout) {
				v[i].up = p;
				v[p].kids++;
				break;
			}
		}
	}
	free(t);
	return 0;
}

/*
 * An organization's leaves, a heap in lv->leaf[first .. first + nleaf) by
 * index (the columns are sorted by age within it: the least is the oldest).
 */
static void
leaf_push(uint32_t *h, struct ks_org_use *u, uint32_t x)
{
	uint32_t *heap = h + u->first, i = u->nleaf++;

	while (i > 0 && heap[(i - 1) / 2] > x) {
		heap[i] = heap[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	heap[i] = x;
}

static uint32_t
leaf_pop(uint32_t *h, struct ks_org_use *u)
{
	uint32_t *heap = h + u->first, top = heap[0], last = heap[--u->nleaf], i = 0;

	for (;;) {
		uint32_t c = 2 * i + 1;

		if (c >= u->nleaf)
			break;
		if (c + 1 < u->nleaf && heap[c + 1] < heap[c])
			c++;
		if (heap[c] >= last)
			break;
		heap[i] = heap[c];
		i = c;
	}
	if (u->nleaf > 0)
		heap[i] = last;
	return top;
}

/*
 * The organization's oldest leaf goes: the tokens freed. Its parent, once
 * nothing kept hangs on it, is a leaf in turn. Columns in a cycle of forged
 * parents are never leaves: they stay (and count).
 */
static uint64_t
take_leaf(struct ks_lives *lv, struct ks_org_use *u, enum ks_victim why)
{
	struct ks_live *x = &lv->v[leaf_pop(lv->leaf, u)];

	x->victim = why;
	u->tokens -= x->tokens;
	u->deleted_tokens += x->tokens;
	u->deleted++;
	if (x->up != NONE && --lv->v[x->up].kids == 0)
		leaf_push(lv->leaf, u, x->up);
	return x->tokens;
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

/* Each organization's use, limits, parents and leaves, from lv->v sorted by organization and age. */
static int
orgs_of(const struct ks_shares *sh, struct ks_lives *lv)
{
	uint32_t i, k;

	for (i = 0; i < lv->n; i++) {
		struct ks_org_use *u;

		if (i == 0 || lv->v[i].org != lv->v[i - 1].org) {
			u = &lv->org[lv->norg++];
			u->org = lv->v[i].org;
			u->first = i;
			limits(sh, u->org, &u->guaranteed, &u->cap);
			lv->guaranteed_tokens += u->guaranteed;
		}
		u = &lv->org[lv->norg - 1];
		u->end = i + 1;
		u->tokens += lv->v[i].tokens;
		lv->v[i].victim = KS_KEPT;
		lv->total_tokens += lv->v[i].tokens;
	}
	for (k = 0; k < lv->norg; k++) {
		struct ks_org_use *u = &lv->org[k];

		if (link_parents(lv->v, u->first, u->end) != 0)
			return -ENOMEM;
		for (i = u->first; i < u->end; i++)
			if (lv->v[i].kids == 0)
				leaf_push(lv->leaf, u, i);
	}
	return 0;
}

int
ks_shares_pick(const struct ks_shares *sh, struct ks_lives *lv)
{
	uint32_t *heap, nh = 0, k;

	free(lv->org);
	free(lv->leaf);
	lv->org = NULL;
	lv->leaf = NULL;
	lv->norg = 0;
	lv->total_tokens = lv->guaranteed_tokens = 0;
	if (lv->n == 0)
		return 0;
	qsort(lv->v, lv->n, sizeof(lv->v[0]), by_org_age);
	lv->org = calloc(lv->n, sizeof(*lv->org)); /* at most one per column */
	lv->leaf = malloc(lv->n * sizeof(*lv->leaf));
	if (lv->org == NULL || lv->leaf == NULL || orgs_of(sh, lv) != 0)
		return -ENOMEM;
	/* Caps first: an organization above its own goes down to it, oldest leaf first. */
	for (k = 0; k < lv->norg; k++) {
		struct ks_org_use *u = &lv->org[k];

		while (u->tokens > u->cap && u->nleaf > 0)
			lv->total_tokens -= take_leaf(lv, u, KS_OVER_CAP);
	}
	/*
	 * Then the capacity: the organization furthest above its guarantee
	 * gives its oldest leaf, until the level fits. One at or below its
	 * guarantee gives nothing, so the level stays above its capacity when
	 * the guarantees present pass it (a default share each organization
	 * not named takes, forged cycles): the sweep says so.
	 */
	if (lv->total_tokens <= sh->capacity_tokens)
		return 0;
	heap = malloc(lv->norg * sizeof(*heap));
	if (heap == NULL)
		return -ENOMEM;
	for (k = 0; k < lv->norg; k++)
		if (lv->org[k].tokens > lv->org[k].guaranteed && lv->org[k].nleaf > 0)
			heap_push(lv->org, heap, &nh, k);
	while (lv->total_tokens > sh->capacity_tokens && nh > 0) {
		struct ks_org_use *most = &lv->org[heap_pop(lv->org, heap, &nh)];

		lv->total_tokens -= take_leaf(lv, most, KS_OVER_SHARE);
		if (most->tokens > most->guaranteed && most->nleaf > 0)
			heap_push(lv->org, heap, &nh, (uint32_t)(most - lv->org));
	}
	free(heap);
	return 0;
}
