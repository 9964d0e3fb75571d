/* SPDX-License-Identifier: BSD-3-Clause */
/* Replica routing (route.h). */
#include "route.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#define ORGS 4096 /* organizations tracked (open addressing) */
#define VNODES 64 /* chash: points per replica */

struct org {
	uint64_t id;  /* 0: free (ids are hashed to nonzero) */
	uint64_t org; /* the organization as given */
	uint32_t home, spread, level;
	double load, slot[ROUTE_MAX_REPLICAS];
	uint64_t last_ms, changed_ms;
};

struct point {
	uint64_t h;
	uint32_t replica;
};

struct router {
	struct route_params p;
	double load[ROUTE_MAX_REPLICAS];
	uint64_t last_ms;
	uint64_t rng;
	struct org org[ORGS];
	struct point ring[ROUTE_MAX_REPLICAS * VNODES];
};

static const char *const names[] = {"affinity", "random", "org", "prefix", "chash"};

const char *
route_policy_name(enum route_policy p)
{
	return (unsigned int)p < 5 ? names[p] : "?";
}

int
route_policy_parse(const char *name)
{
	int i;

	for (i = 0; i < 5; i++)
		if (strcmp(name, names[i]) == 0)
			return i;
	return -1;
}

/* Jump consistent hash (Lamping and Veach): a bucket in [0, n). */
static uint32_t
jump(uint64_t key, uint32_t n)
{
	int64_t b = -1, j = 0;

	while (j < (int64_t)n) {
		b = j;
		key = key * 2862933555777941757ULL + 1;
		j = (int64_t)((double)(b + 1) * ((double)(1LL << 31) / (double)((key >> 33) + 1)));
	}
	return (uint32_t)b;
}

static uint64_t
prefix_hash(uint64_t org, const uint32_t *t, uint32_t n, uint32_t len)
{
	return XXH3_64bits_withSeed(t, sizeof(uint32_t) * (n < len ? n : len), org);
}

static int
cmp_point(const void *a, const void *b)
{
	const struct point *x = a, *y = b;

	return x->h < y->h ? -1 : x->h > y->h;
}

/* The ring of every replica's points (chash), sorted. */
static void
ring_build(struct router *r)
{
	uint32_t i, v;

	for (i = 0; i < r->p.replicas; i++)
		for (v = 0; v < VNODES; v++) {
			uint64_t k = (uint64_t)i << 32 | v;

			r->ring[i * VNODES + v] = (struct point){XXH3_64bits(&k, sizeof(k)), i};
		}
	qsort(r->ring, (size_t)r->p.replicas * VNODES, sizeof(r->ring[0]), cmp_point);
}

struct router *
route_create(const struct route_params *p)
{
	struct router *r;

	if (p->replicas == 0 || p->replicas > ROUTE_MAX_REPLICAS || (unsigned int)p->policy > 4)
		return NULL;
	r = calloc(1, sizeof(*r));
	if (r == NULL)
		return NULL;
	r->p = *p;
	if (r->p.prefix_step == 0)
		r->p.prefix_step = 100;
	if (r->p.max_level == 0)
		r->p.max_level = 8;
	if (r->p.hot <= 0)
		r->p.hot = 1.0;
	if (r->p.bound <= 1)
		r->p.bound = 1.25;
	if (r->p.window_ms == 0)
		r->p.window_ms = 60000;
	if (r->p.period_ms == 0)
		r->p.period_ms = 15000;
	r->rng = p->seed | 1;
	ring_build(r);
	return r;
}

/* An organization's home: a consistent hash of it over the replicas. */
static uint32_t
home_of(const struct router *r, uint64_t org)
{
	return jump(XXH3_64bits_withSeed(&org, sizeof(org), 0x0a5), r->p.replicas);
}

int
route_add_replica(struct router *r)
{
	int moved = 0;
	uint32_t i;

	if (r->p.replicas >= ROUTE_MAX_REPLICAS)
		return -1;
	r->load[r->p.replicas++] = 0;
	ring_build(r);
	for (i = 0; i < ORGS; i++) {
		struct org *o = &r->org[i];
		uint32_t h;

		if (o->id == 0)
			continue;
		h = home_of(r, o->org);
		if (h != o->home) {
			o->home = h;
			moved++;
		}
		if (o->spread > r->p.replicas)
			o->spread = r->p.replicas;
		memset(o->slot, 0, sizeof(o->slot));
	}
	return moved;
}

uint32_t
route_replicas(const struct router *r)
{
	return r->p.replicas;
}

void
route_free(struct router *r)
{
	free(r);
}

static double
decay(const struct router *r, uint64_t from, uint64_t to)
{
	return to > from ? exp(-(double)(to - from) / (double)r->p.window_ms) : 1.0;
}

static void
age_replicas(struct router *r, uint64_t now)
{
	double f = decay(r, r->last_ms, now);
	uint32_t i;

	if (f < 1.0)
		for (i = 0; i < r->p.replicas; i++)
			r->load[i] *= f;
	if (now > r->last_ms)
		r->last_ms = now;
}

static double
mean_load(const struct router *r)
{
	double s = 0;
	uint32_t i;

	for (i = 0; i < r->p.replicas; i++)
		s += r->load[i];
	return s / r->p.replicas;
}

/* The organization's record, created on first sight; NULL when the table is full. */
static struct org *
org_get(struct router *r, uint64_t org, int create)
{
	uint64_t id = org ^ 0x9E3779B97F4A7C15ULL ? org ^ 0x9E3779B97F4A7C15ULL : 1;
	uint32_t i = (uint32_t)(XXH3_64bits(&id, sizeof(id)) % ORGS), k;

	for (k = 0; k < ORGS; k++, i = (i + 1) % ORGS) {
		struct org *o = &r->org[i];

		if (o->id == id)
			return o;
		if (o->id == 0) {
			if (!create)
				return NULL;
			memset(o, 0, sizeof(*o));
			o->id = id;
			o->org = org;
			o->home = home_of(r, org);
			o->spread = 1;
			return o;
		}
	}
	return NULL;
}

static uint32_t
affinity_replica(const struct router *r, const struct org *o, uint64_t org, const uint32_t *t,
		 uint32_t n, uint32_t *slot)
{
	*slot = 0;
	if (o->spread > 1)
		*slot = jump(prefix_hash(org, t, n, o->level * r->p.prefix_step), o->spread);
	return (o->home + *slot) % r->p.replicas;
}

static uint32_t
chash_replica(const struct router *r, uint64_t key)
{
	uint32_t np = r->p.replicas * VNODES, lo = 0, hi = np, k;
	double cap = r->p.bound * mean_load(r) + 1;

	while (lo < hi) {
		uint32_t mid = (lo + hi) / 2;

		if (r->ring[mid].h < key)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (k = 0; k < np; k++) {
		const struct point *pt = &r->ring[(lo + k) % np];

		if (r->load[pt->replica] <= cap)
			return pt->replica;
	}
	return r->ring[lo % np].replica;
}

static uint32_t
choose(struct router *r, uint64_t org, const uint32_t *t, uint32_t n, struct org *o, uint32_t *slot,
       int advance_rng)
{
	uint64_t x;

	*slot = 0;
	switch (r->p.policy) {
	case ROUTE_RANDOM:
		x = r->rng;
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		if (advance_rng)
			r->rng = x;
		return (uint32_t)(x % r->p.replicas);
	case ROUTE_ORG:
		return home_of(r, org);
	case ROUTE_PREFIX:
		return jump(prefix_hash(0, t, n, r->p.prefix_step), r->p.replicas);
	case ROUTE_CHASH:
		return chash_replica(r, prefix_hash(org, t, n, r->p.prefix_step));
	default:
		return o != NULL ? affinity_replica(r, o, org, t, n, slot) : home_of(r, org);
	}
}

/*
 * Affinity, once per period: spread over as many replicas as the load needs
 * (its load / (hot x mean)); if one of them takes more than twice its part,
 * hash a longer prefix; shrink when it cools down.
 */
static void
rebalance(struct router *r, struct org *o, uint64_t now)
{
	double mean = mean_load(r), maxslot = 0;
	uint32_t need, i;

	if (now < o->changed_ms + r->p.period_ms || mean <= 0)
		return;
	need = (uint32_t)ceil(o->load / (r->p.hot * mean));
	if (need < 1)
		need = 1;
	/* Its replicas are overloaded and it is a real part of that: one more. */
	if (r->load[o->home] > r->p.bound * mean && o->load > 0.25 * mean && need <= o->spread)
		need = o->spread + 1;
	if (need > r->p.replicas)
		need = r->p.replicas;
	for (i = 0; i < o->spread; i++)
		if (o->slot[i] > maxslot)
			maxslot = o->slot[i];
	if (need > o->spread ||
	    (o->spread > 1 && 2 * need <= o->spread && r->load[o->home] <= mean)) {
		o->spread = need;
		if (o->spread > 1 && o->level == 0)
			o->level = 1;
		if (o->spread == 1)
			o->level = 0;
	} else if (o->spread > 1 && maxslot > 2.0 * o->load / o->spread && o->level < r->p.max_level) {
		o->level++;
	} else {
		return;
	}
	memset(o->slot, 0, sizeof(o->slot));
	o->changed_ms = now;
}

uint32_t
route_pick(struct router *r, uint64_t org, const uint32_t *tokens, uint32_t n, uint64_t now_ms)
{
	struct org *o = NULL;
	uint32_t rep, slot;

	age_replicas(r, now_ms);
	if (r->p.policy == ROUTE_AFFINITY) {
		o = org_get(r, org, 1);
		if (o != NULL) {
			double f = decay(r, o->last_ms, now_ms);
			uint32_t i;

			o->load *= f;
			for (i = 0; i < o->spread; i++)
				o->slot[i] *= f;
			o->last_ms = now_ms;
			if (o->changed_ms == 0)
				o->changed_ms = now_ms;
			rebalance(r, o, now_ms);
		}
	}
	rep = choose(r, org, tokens, n, o, &slot, 1);
	r->load[rep] += n;
	if (o != NULL) {
		o->load += n;
		o->slot[slot] += n;
	}
	return rep;
}

uint32_t
route_peek(struct router *r, uint64_t org, const uint32_t *tokens, uint32_t n)
{
	struct org *o = r->p.policy == ROUTE_AFFINITY ? org_get(r, org, 0) : NULL;
	uint32_t slot;

	return choose(r, org, tokens, n, o, &slot, 0);
}

void
route_org_state(const struct router *r, uint64_t org, uint32_t *spread, uint32_t *level)
{
	const struct org *o = org_get((struct router *)r, org, 0);

	*spread = o != NULL ? o->spread : 1;
	*level = o != NULL ? o->level : 0;
}
