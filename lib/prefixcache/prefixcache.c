/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * lib/prefixcache: the SwDriver's cache logic. See prefixcache.h.
 *
 * Data. Entries (one per cached column of one cache group) live in a pool
 * and are found through one chained hash table keyed by (group,
 * organization, chained hash). Each entry knows its parent and children
 * (deleting a column takes what hangs on it), the prompt that holds its
 * tokens (and that prompt's other entries, in order), and its place in the
 * policy's lists of leaves (only leaves can be freed: a shard shrinks a
 * prompt from the right).
 *
 * Prompts. Each sequence evicts into a new prompt per cache group, starting
 * at its hit length; the driver tracks each prompt's range [offset, end) as
 * the shards hold it, which is what capacity counts.
 */
#include "prefixcache.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#define NIL UINT32_MAX
#define MAX_GROUPS 4 /* per model */
#define NBUCKETS 8   /* policy lists per group */
#define FU_CLASSES 16 /* followup: classes by bit length of the answer */

/*
 * Uses are kept in ticks of 100 ms (32 bits: 13 years): an entry may expire
 * up to one tick early, never late.
 */
#define TICK_NS 100000000ull

struct pc_entry {
	uint64_t hash;
	uint64_t evict_count;
	uint32_t first_used, last_used; /* ticks */
	uint32_t start, length; /* logical tokens [start, length) */
	uint32_t org;
	uint32_t prompt; /* prompt record holding the tokens */
	uint32_t parent, first_child, next_sib, prev_sib;
	uint32_t lru_prev, lru_next; /* policy list (leaves only) */
	uint32_t p_prev, p_next;     /* the prompt's entries, by start */
	uint32_t hnext;		     /* hash chain; free list */
	uint32_t gen;	/* bumped on reuse: refills check it before unpinning */
	uint16_t hits;	/* saturating */
	uint16_t pins;	/* refills in flight, and a live sequence continuing it */
	uint8_t gid;	/* global group id: model * MAX_GROUPS + group */
	uint8_t bucket; /* policy list, or NO_BUCKET when not a leaf */
	uint8_t prio : 1; /* under a request's priority hint */
	uint8_t prot : 1; /* SLRU: protected (else on probation) */
	uint8_t cold : 1; /* followup: its sequence's class is seldom followed up */
};
#define NO_BUCKET 0xff

struct pc_prompt {
	uint64_t id;
	uint32_t offset, end; /* range the shards hold */
	uint32_t hi;	      /* the largest end it had */
	uint32_t first, last; /* entries, by start */
	uint64_t last_batch;  /* batch of its latest eviction */
	struct prefixcache_seq *seq; /* live: evicting into it */
	uint32_t hnext;		     /* id hash chain; free list */
	uint32_t tmp;		     /* truncation point during a deletion, or NIL */
	uint8_t gid;
};

struct pc_group {
	enum prefixcache_rule rule;
	uint32_t window, sinks;
	uint16_t ncaches;
	uint16_t cache[PREFIXCACHE_MAX_CACHES]; /* cache ids */
	uint16_t cache_pos[PREFIXCACHE_MAX_CACHES]; /* index in the model's EVICT entries */
	uint64_t capacity, stored;
	uint64_t protected_tokens; /* SLRU: tokens of protected columns */
	uint32_t lru_head[NBUCKETS], lru_tail[NBUCKETS]; /* head: most recent */
};

struct pc_model {
	struct prefixcache_model p;
	uint16_t ngroups;
	struct pc_group g[MAX_GROUPS];
	uint8_t group_of_cache[PREFIXCACHE_MAX_CACHES];
	uint64_t batches_sent;
	uint16_t batch_g; /* tokens in the current batch */
	struct proto_evict_entry *batch;
};

struct pc_org {
	uint64_t isolation_id;
	uint64_t ttl_last, ttl_first;
	struct prefixcache_org_stats st;
	uint32_t hnext;
};

struct seq_group {
	bool caching;
	uint32_t prompt;     /* record, NIL until the first eviction */
	uint32_t cur_end;    /* end of the last column recorded or hit */
	uint32_t last_entry; /* its entry (parent of the next), or NIL */
	uint32_t last_gen;   /* that record's gen: it may be freed and reused */
	uint64_t last_hash;  /* its hash (isolation_id at the root) */
};

struct prefixcache_seq {
	struct prefixcache_seq *prev, *next; /* live sequences */
	uint16_t model;
	uint32_t org;
	uint64_t isolation_id;
	uint32_t *tokens; /* tokens from tbase on (those before are in the hit) */
	uint32_t tbase;
	uint32_t ntok, cap; /* ntok: absolute count; cap: from tbase */
	uint32_t pos;	  /* next token index */
	uint32_t verified; /* speculative decoding: tokens known right */
	uint32_t allowed;
	uint32_t sketched; /* SLRU: columns ending here or before were sighted at lookup */
	bool resumes;	   /* SLRU: the hit reached the end of an earlier prompt (a chat) */
	uint32_t seen_end; /* admit: the prompt's columns ending here or before were seen before */
	uint32_t prompt_len; /* followup: what the sequence sent past this is its answer */
	uint32_t priority;
	uint32_t seq_id;
	uint64_t prompt_id;
	uint64_t *tok_batch; /* batch of each token's latest eviction (for spec) */
	struct seq_group g[MAX_GROUPS];
};

struct pc_pin {
	uint32_t entry, gen;
};

/* One prefixcache_begin()'s refill: ids [id, id + n), one per cache. */
struct pc_refill {
	uint64_t id;
	uint32_t n, pending;
	struct pc_pin *pin;
	uint32_t npin, pincap;
};

struct prefixcache {
	struct prefixcache_params p;
	struct prefixcache_sink sink;
	struct pc_model m[PREFIXCACHE_MAX_MODELS];
	/* Entries. */
	struct pc_entry *e;
	uint32_t ecap, efree, nentries;
	uint32_t *ebucket;
	uint32_t emask;
	uint32_t expire_cursor;
	/* Prompts. */
	struct pc_prompt *pr;
	uint32_t prcap, prfree;
	uint32_t *prbucket;
	uint32_t prmask;
	uint64_t next_prompt;
	/* Organizations. */
	struct pc_org *org;
	uint32_t norg, orgcap;
	uint32_t *orgbucket;
	uint32_t orgmask;
	/* Refills in flight. */
	struct pc_refill *rf;
	uint32_t nrf, rfcap;
	uint64_t next_refill;
	struct prefixcache_seq *live;
	/* Lookup paths, per group. */
	uint32_t *path[MAX_GROUPS];
	uint32_t pathcap[MAX_GROUPS];
	struct proto_refill_chunk *chunks;
	uint32_t chunkcap;
	/* SLRU: a count-min sketch of column sightings, 4 rows. */
	uint64_t *ghost;
	uint32_t ghost_mask;
	uint64_t sketch_adds;
	/*
	 * followup: by column hash, the class of the sequence that stored the
	 * column (low 8 bits) under 24 bits of the hash (0: none).
	 */
	uint32_t *tag;
	uint32_t tag_mask;
	uint64_t fu_stored[FU_CLASSES], fu_reused[FU_CLASSES]; /* tokens, per class */
	/* Scratch. */
	uint32_t *stack, stackcap;
	uint32_t *touched, ntouched, touchedcap;
	struct prefixcache_stats st;
	uint64_t stored_total;
};

const char *const prefixcache_policy_names[] = {"lru",	 "lfu",	     "priority", "slru",
						 "admit", "followup", NULL};

/* ---- Small helpers -------------------------------------------------------- */

static uint32_t
pow2_ghost(uint32_t n)
{
	uint32_t r = 1024;

	while (r < n && r < (1u << 30))
		r <<= 1;
	return r;
}

static inline uint64_t
mix64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ULL;
	x ^= x >> 33;
	return x;
}

uint64_t
prefixcache_column_hash(uint64_t parent, const uint32_t *tokens, uint32_t n)
{
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	return XXH3_64bits_withSeed(tokens, (size_t)n * 4, parent);
#else
	uint8_t buf[4 * 256];
	uint32_t i;

	for (i = 0; i < n && i < 256; i++)
		proto_st32(buf + 4 * i, tokens[i]);
	return XXH3_64bits_withSeed(buf, (size_t)i * 4, parent);
#endif
}

size_t
prefixcache_bytes_per_entry(void)
{
	/* The record, and its share of the bucket array (two per entry at least). */
	return sizeof(struct pc_entry) + 2 * sizeof(uint32_t);
}

static int
grow(void **p, uint32_t *cap, size_t elem, uint32_t want)
{
	uint32_t n = *cap ? *cap : 16;
	void *q;

	while (n < want)
		n *= 2;
	if (n == *cap)
		return 0;
	q = realloc(*p, (size_t)n * elem);
	if (q == NULL)
		return -ENOMEM;
	*p = q;
	*cap = n;
	return 0;
}

static inline uint32_t
ebucket_of(const struct prefixcache *pc, uint8_t gid, uint32_t org, uint64_t hash)
{
	return (uint32_t)mix64(hash ^ ((uint64_t)org << 8 | gid) * 0x9E3779B97F4A7C15ULL) &
	       pc->emask;
}

/* ---- Organizations -------------------------------------------------------- */

static uint32_t
org_get(struct prefixcache *pc, uint64_t iso)
{
	uint32_t b = (uint32_t)mix64(iso) & pc->orgmask, i;

	for (i = pc->orgbucket[b]; i != NIL; i = pc->org[i].hnext)
		if (pc->org[i].isolation_id == iso)
			return i;
	if (pc->norg == pc->orgcap &&
	    grow((void **)&pc->org, &pc->orgcap, sizeof(*pc->org), pc->norg + 1) != 0)
		return NIL;
	i = pc->norg++;
	memset(&pc->org[i], 0, sizeof(pc->org[i]));
	pc->org[i].isolation_id = iso;
	pc->org[i].st.isolation_id = iso;
	pc->org[i].hnext = pc->orgbucket[b];
	pc->orgbucket[b] = i;
	/* Rehash when the chains grow long on average. */
	if (pc->norg > 2 * (pc->orgmask + 1)) {
		uint32_t nm = (pc->orgmask + 1) * 4 - 1, k;
		uint32_t *nb = malloc(sizeof(uint32_t) * (nm + 1));

		if (nb != NULL) {
			for (k = 0; k <= nm; k++)
				nb[k] = NIL;
			for (k = 0; k < pc->norg; k++) {
				uint32_t bb = (uint32_t)mix64(pc->org[k].isolation_id) & nm;

				pc->org[k].hnext = nb[bb];
				nb[bb] = k;
			}
			free(pc->orgbucket);
			pc->orgbucket = nb;
			pc->orgmask = nm;
		}
	}
	return i;
}

int
prefixcache_org_ttl(struct prefixcache *pc, uint64_t isolation_id, uint64_t ttl_last_ns,
		    uint64_t ttl_first_ns)
{
	uint32_t o = org_get(pc, isolation_id);

	if (o == NIL)
		return -ENOMEM;
	pc->org[o].ttl_last = ttl_last_ns;
	pc->org[o].ttl_first = ttl_first_ns;
	return 0;
}

int
prefixcache_set_refill_model(struct prefixcache *pc, uint16_t model, uint64_t latency_ns,
			     double bytes_per_ns)
{
	if (model >= pc->p.num_models || !(bytes_per_ns >= 0))
		return -EINVAL;
	pc->m[model].p.refill_latency_ns = latency_ns;
	pc->m[model].p.refill_bytes_per_ns = bytes_per_ns;
	return 0;
}

int
prefixcache_refill_model(const struct prefixcache *pc, uint16_t model, uint64_t *latency_ns,
			 double *bytes_per_ns)
{
	if (model >= pc->p.num_models)
		return -EINVAL;
	*latency_ns = pc->m[model].p.refill_latency_ns;
	*bytes_per_ns = pc->m[model].p.refill_bytes_per_ns;
	return 0;
}

static inline uint32_t
tick(uint64_t now_ns)
{
	uint64_t t = now_ns / TICK_NS;

	return t > UINT32_MAX ? UINT32_MAX : (uint32_t)t;
}

/* An organization's TTLs, in ticks (0: none). */
struct ttl {
	uint64_t last, first;
};

static inline struct ttl
org_ttl(const struct prefixcache *pc, uint32_t org)
{
	const struct pc_org *o = &pc->org[org];
	uint64_t tl = o->ttl_last ? o->ttl_last : pc->p.ttl_last_ns;
	uint64_t tf = o->ttl_first ? o->ttl_first : pc->p.ttl_first_ns;
	/* Whole ticks, rounded down: an entry expires up to a tick early. */
	struct ttl t = {tl ? (tl + TICK_NS - 1) / TICK_NS : 0, tf ? (tf + TICK_NS - 1) / TICK_NS : 0};

	return t;
}

static inline bool
expired_t(const struct pc_entry *e, struct ttl ttl, uint32_t t)
{
	return (ttl.last && t >= e->last_used && (uint64_t)(t - e->last_used) + 1 > ttl.last) ||
	       (ttl.first && t >= e->first_used && (uint64_t)(t - e->first_used) + 1 > ttl.first);
}

static bool
expired(const struct prefixcache *pc, const struct pc_entry *e, uint64_t now)
{
	return expired_t(e, org_ttl(pc, e->org), tick(now));
}

/* ---- Policy: bucketed LRU lists of leaves ---------------------------------- */

/* Bits needed for @x (0 for 0), at most @max: LFU's lists, followup's classes. */
static inline unsigned int
bit_length(uint64_t x, unsigned int max)
{
	unsigned int n = x ? 64 - (unsigned int)__builtin_clzll(x) : 0;

	return n < max ? n : max;
}

static uint8_t
policy_bucket(const struct prefixcache *pc, const struct pc_entry *e)
{
	switch (pc->p.policy) {
	case PREFIXCACHE_LFU:
		return (uint8_t)bit_length(e->hits, NBUCKETS - 1);
	case PREFIXCACHE_PRIORITY:
		return e->prio ? 1 : 0;
	case PREFIXCACHE_SLRU:
	case PREFIXCACHE_ADMIT:
		return e->prot; /* probation, or new columns (0), freed first */
	case PREFIXCACHE_FOLLOWUP:
		return !e->cold; /* cold columns (0) freed first */
	default:
		return 0;
	}
}

static void
lru_unlink(struct prefixcache *pc, uint32_t i)
{
	struct pc_entry *e = &pc->e[i];
	struct pc_group *g = &pc->m[e->gid / MAX_GROUPS].g[e->gid % MAX_GROUPS];

	if (e->bucket == NO_BUCKET)
		return;
	if (e->lru_prev != NIL)
		pc->e[e->lru_prev].lru_next = e->lru_next;
	else
		g->lru_head[e->bucket] = e->lru_next;
	if (e->lru_next != NIL)
		pc->e[e->lru_next].lru_prev = e->lru_prev;
	else
		g->lru_tail[e->bucket] = e->lru_prev;
	e->bucket = NO_BUCKET;
}

/* Link leaf @i into @bucket just before @x (on the recent side); NIL: at the old end. */
static void
lru_link_before(struct prefixcache *pc, uint32_t i, uint8_t bucket, uint32_t x)
{
	struct pc_entry *e = &pc->e[i];
	struct pc_group *g = &pc->m[e->gid / MAX_GROUPS].g[e->gid % MAX_GROUPS];

	e->bucket = bucket;
	e->lru_next = x;
	e->lru_prev = x != NIL ? pc->e[x].lru_prev : g->lru_tail[bucket];
	if (e->lru_prev != NIL)
		pc->e[e->lru_prev].lru_next = i;
	else
		g->lru_head[bucket] = i;
	if (x != NIL)
		pc->e[x].lru_prev = i;
	else
		g->lru_tail[bucket] = i;
}

/* Put leaf @i at the most recent end of its bucket (or the least recent). */
static void
lru_insert(struct prefixcache *pc, uint32_t i, uint8_t bucket, bool oldest)
{
	const struct pc_entry *e = &pc->e[i];

	lru_link_before(pc, i, bucket,
			oldest ? NIL : pc->m[e->gid / MAX_GROUPS].g[e->gid % MAX_GROUPS].lru_head[bucket]);
}

/* A leaf just used, or whose bucket changed: to the recent end of its policy's bucket. */
static void
lru_requeue(struct prefixcache *pc, uint32_t i)
{
	if (pc->e[i].bucket == NO_BUCKET)
		return;
	lru_unlink(pc, i);
	lru_insert(pc, i, policy_bucket(pc, &pc->e[i]), false);
}

/*
 * Put leaf @i into its bucket by last use: a column whose last child just
 * went becomes a leaf with its own last use, which may be recent (a hot
 * prefix whose one-off continuations were freed) or old. Lists are kept in
 * last-use order (newest at the head): search from both ends, at most 32
 * steps each; past that, the place the head-side search reached is close.
 */
static void
lru_insert_by_use(struct prefixcache *pc, uint32_t i, uint8_t bucket)
{
	const struct pc_entry *e = &pc->e[i];
	const struct pc_group *g = &pc->m[e->gid / MAX_GROUPS].g[e->gid % MAX_GROUPS];
	uint32_t t = e->last_used, x = g->lru_head[bucket], y = g->lru_tail[bucket];
	int n;

	if (y != NIL && t <= pc->e[y].last_used) {
		x = NIL; /* the oldest: the common case */
	} else {
		/* x: the first entry from the head not newer than @i. */
		for (n = 0; n < 32 && x != NIL && pc->e[x].last_used > t; n++)
			x = pc->e[x].lru_next;
		if (x != NIL && pc->e[x].last_used > t) {
			/* Not within 32: from the tail (the head is newer, so y stops by it). */
			for (n = 0; n < 32 && pc->e[y].last_used < t; n++)
				y = pc->e[y].lru_prev;
			if (pc->e[y].last_used >= t)
				x = pc->e[y].lru_next;
		}
	}
	lru_link_before(pc, i, bucket, x);
}

/* ---- Entries ---------------------------------------------------------------- */

static uint32_t
entry_find(const struct prefixcache *pc, uint8_t gid, uint32_t org, uint64_t hash)
{
	uint32_t i;

	for (i = pc->ebucket[ebucket_of(pc, gid, org, hash)]; i != NIL; i = pc->e[i].hnext)
		if (pc->e[i].hash == hash && pc->e[i].org == org && pc->e[i].gid == gid)
			return i;
	return NIL;
}

static int
entries_rehash(struct prefixcache *pc, uint32_t nb)
{
	uint32_t *b = malloc(sizeof(uint32_t) * nb), i;

	if (b == NULL)
		return -ENOMEM;
	for (i = 0; i < nb; i++)
		b[i] = NIL;
	free(pc->ebucket);
	pc->ebucket = b;
	pc->emask = nb - 1;
	for (i = 0; i < pc->ecap; i++) {
		struct pc_entry *e = &pc->e[i];
		uint32_t k;

		if (e->length == 0)
			continue; /* free */
		k = ebucket_of(pc, e->gid, e->org, e->hash);
		e->hnext = b[k];
		b[k] = i;
	}
	return 0;
}

static int
grow_by(struct prefixcache *pc, uint32_t n)
{
	struct pc_entry *q = realloc(pc->e, sizeof(*pc->e) * (size_t)n);

	if (q == NULL)
		return -ENOMEM;
	pc->e = q;
	pc->ecap = n;
	return 0;
}

static uint32_t
entry_alloc(struct prefixcache *pc)
{
	uint32_t i;

	if (pc->efree == NIL) {
		uint32_t old = pc->ecap, k;

		/* 1.25x: the pool is the driver's largest structure. */
		if (grow_by(pc, old + old / 4 + 1024) != 0)
			return NIL;
		for (k = pc->ecap; k-- > old;) {
			pc->e[k].length = 0;
			pc->e[k].gen = 0;
			pc->e[k].hnext = pc->efree;
			pc->efree = k;
		}
	}
	i = pc->efree;
	pc->efree = pc->e[i].hnext;
	/*
	 * Half a chain on average at most: a hit's walk seldom takes a second
	 * dependent load (at two per bucket, a 128k-token hit took 1.2 times
	 * as long).
	 */
	if (2 * (pc->nentries + 1) > pc->emask + 1 && entries_rehash(pc, (pc->emask + 1) * 2) != 0) {
		pc->e[i].hnext = pc->efree;
		pc->efree = i;
		return NIL;
	}
	pc->nentries++;
	return i;
}

static void
entry_hash_unlink(struct prefixcache *pc, uint32_t i)
{
	struct pc_entry *e = &pc->e[i];
	uint32_t *pp = &pc->ebucket[ebucket_of(pc, e->gid, e->org, e->hash)];

	while (*pp != i)
		pp = &pc->e[*pp].hnext;
	*pp = e->hnext;
}

static void
entry_release(struct prefixcache *pc, uint32_t i)
{
	pc->e[i].length = 0;
	pc->e[i].hnext = pc->efree;
	pc->efree = i;
	pc->nentries--;
}

/* ---- Prompts ------------------------------------------------------------------ */

static uint32_t
prompt_bucket(const struct prefixcache *pc, uint8_t gid, uint64_t id)
{
	return (uint32_t)mix64(id * 31 + gid) & pc->prmask;
}

static uint32_t
prompt_find(const struct prefixcache *pc, uint8_t gid, uint64_t id)
{
	uint32_t i;

	for (i = pc->prbucket[prompt_bucket(pc, gid, id)]; i != NIL; i = pc->pr[i].hnext)
		if (pc->pr[i].id == id && pc->pr[i].gid == gid)
			return i;
	return NIL;
}

static uint32_t
prompt_new(struct prefixcache *pc, uint8_t gid, uint64_t id, uint32_t offset,
	   struct prefixcache_seq *s)
{
	uint32_t i, b;

	if (pc->prfree == NIL) {
		uint32_t old = pc->prcap, k, nb;

		if (grow((void **)&pc->pr, &pc->prcap, sizeof(*pc->pr), old + 1) != 0)
			return NIL;
		for (k = pc->prcap; k-- > old;) {
			pc->pr[k].id = 0;
			pc->pr[k].hnext = pc->prfree;
			pc->prfree = k;
		}
		/* Keep the id index about as large as the records. */
		nb = pc->prcap;
		if (nb > pc->prmask + 1) {
			uint32_t *bk = malloc(sizeof(uint32_t) * nb);

			if (bk == NULL)
				return NIL;
			for (k = 0; k < nb; k++)
				bk[k] = NIL;
			free(pc->prbucket);
			pc->prbucket = bk;
			pc->prmask = nb - 1;
			for (k = 0; k < old; k++)
				if (pc->pr[k].id != 0) {
					uint32_t bb = prompt_bucket(pc, pc->pr[k].gid, pc->pr[k].id);

					pc->pr[k].hnext = bk[bb];
					bk[bb] = k;
				}
		}
	}
	i = pc->prfree;
	pc->prfree = pc->pr[i].hnext;
	pc->pr[i] = (struct pc_prompt){.id = id, .offset = offset, .end = offset, .hi = offset, .first = NIL,
				       .last = NIL, .seq = s, .tmp = NIL, .gid = gid};
	b = prompt_bucket(pc, gid, id);
	pc->pr[i].hnext = pc->prbucket[b];
	pc->prbucket[b] = i;
	return i;
}

static void
prompt_release(struct prefixcache *pc, uint32_t i)
{
	uint32_t *pp = &pc->prbucket[prompt_bucket(pc, pc->pr[i].gid, pc->pr[i].id)];

	while (*pp != i)
		pp = &pc->pr[*pp].hnext;
	*pp = pc->pr[i].hnext;
	pc->pr[i].id = 0;
	pc->pr[i].hnext = pc->prfree;
	pc->prfree = i;
}

static inline struct pc_group *
group_of(struct prefixcache *pc, uint8_t gid)
{
	return &pc->m[gid / MAX_GROUPS].g[gid % MAX_GROUPS];
}

/* The global group id of cache @cache_id of model @mi, or -1 if none. */
static int
gid_of_cache(const struct prefixcache *pc, uint16_t mi, uint16_t cache_id)
{
	const struct pc_model *m;
	uint16_t c;

	if (mi >= pc->p.num_models)
		return -1;
	m = &pc->m[mi];
	for (c = 0; c < m->p.num_caches; c++)
		if (m->p.cache[c].cache_id == cache_id)
			return mi * MAX_GROUPS + m->group_of_cache[c];
	return -1;
}

/* ---- Batches and messages ------------------------------------------------------ */

static void
flush_model(struct prefixcache *pc, uint16_t mi)
{
	struct pc_model *m = &pc->m[mi];

	if (m->batch_g == 0)
		return;
	m->batches_sent++;
	if (pc->sink.evict != NULL)
		pc->sink.evict(pc->sink.arg, mi, m->batches_sent, m->p.num_caches, m->batch_g,
			       m->batch);
	m->batch_g = 0;
}

void
prefixcache_flush(struct prefixcache *pc)
{
	uint16_t mi;

	for (mi = 0; mi < pc->p.num_models; mi++)
		flush_model(pc, mi);
}

/* The batch a token evicted now goes into. */
static inline uint64_t
current_batch(const struct pc_model *m)
{
	return m->batches_sent + 1;
}

/* A token a shard lost: that shard's cache dropped prompt @prompt from @from on. */
struct loss {
	uint32_t prompt; /* record index */
	uint32_t from;
	uint16_t cache_id;
	int16_t shard;
};

/*
 * Delete [from, to) of prompt @pi from every cache of its group, except that
 * if @pi is the prompt that lost a token (@lost, may be NULL), that cache of
 * that shard already dropped everything from lost->from on: the shard gets
 * its own shorter DELETE, the others the whole range. (Prompts that continue
 * it lost nothing: whole range everywhere.)
 * The DELETE waits for the prompt's latest batch, which must have been sent
 * (a DELETE waiting for a batch that waits for space would deadlock the
 * shard).
 */
static void
emit_delete(struct prefixcache *pc, uint32_t pi, uint32_t from, uint32_t to,
	    const struct loss *lost)
{
	struct pc_prompt *p = &pc->pr[pi];
	uint16_t mi = p->gid / MAX_GROUPS;
	struct pc_model *m = &pc->m[mi];
	struct pc_group *g = group_of(pc, p->gid);
	const struct prefixcache_shards all = {-1, -1};
	uint16_t c;

	if (from >= to)
		return;
	if (p->last_batch >= current_batch(m))
		flush_model(pc, mi);
	if (pc->sink.del == NULL)
		return;
	for (c = 0; c < g->ncaches; c++) {
		struct proto_delete d = {.prompt_id = p->id, .evict_count = p->last_batch,
					 .start_token_idx = from, .end_token_idx = to - 1,
					 .cache_id = g->cache[c]};

		if (lost == NULL || g->cache[c] != lost->cache_id || pi != lost->prompt) {
			pc->sink.del(pc->sink.arg, mi, all, &d);
			continue;
		}
		pc->sink.del(pc->sink.arg, mi, (struct prefixcache_shards){-1, lost->shard}, &d);
		if (lost->from > from) {
			d.end_token_idx = lost->from - 1;
			pc->sink.del(pc->sink.arg, mi, (struct prefixcache_shards){lost->shard, -1}, &d);
		}
	}
}

/* ---- Deleting columns ------------------------------------------------------------ */

static void stop_caching(struct prefixcache *pc, struct prefixcache_seq *s, unsigned int gi);

/*
 * Shrink prompt @pi to @x, and further over the columns no entry references
 * (stored twice, or a live sequence's partial column), emitting the DELETE.
 * A prompt left empty and not live is forgotten.
 */
static void
prompt_truncate(struct prefixcache *pc, uint32_t pi, uint32_t x, const struct loss *lost,
		bool send)
{
	struct pc_prompt *p = &pc->pr[pi];
	struct pc_group *g = group_of(pc, p->gid);
	uint32_t keep = p->last != NIL ? pc->e[p->last].length : p->offset;

	if (keep > x)
		keep = x; /* entries past x are being removed by the caller */
	if (p->seq != NULL && keep < p->end) {
		/* A live sequence's next token would be a hole: it stops caching. */
		struct prefixcache_seq *s = p->seq;
		unsigned int gi = p->gid % MAX_GROUPS;

		p->seq = NULL;
		s->g[gi].prompt = NIL;
		if (s->g[gi].caching) {
			s->g[gi].caching = false;
			pc->st.stopped++;
		}
	}
	if (keep < p->end) {
		if (send)
			emit_delete(pc, pi, keep, p->end, lost);
		g->stored -= p->end - keep;
		pc->stored_total -= p->end - keep;
		pc->st.deleted_tokens += p->end - keep;
		p->end = keep;
	}
	if (p->end == p->offset && p->seq == NULL && p->first == NIL)
		prompt_release(pc, pi);
}

static bool
subtree_pinned(struct prefixcache *pc, uint32_t root)
{
	uint32_t n = 0;

	pc->stack[n++] = root;
	while (n > 0) {
		uint32_t i = pc->stack[--n], c;

		if (pc->e[i].pins > 0)
			return true;
		for (c = pc->e[i].first_child; c != NIL; c = pc->e[c].next_sib) {
			if (n == pc->stackcap &&
			    grow((void **)&pc->stack, &pc->stackcap, sizeof(uint32_t), n + 1) != 0)
				return true;
			pc->stack[n++] = c;
		}
	}
	return false;
}

/*
 * Remove entry @root and everything that hangs on it; every prompt involved
 * is truncated at its first removed column. Returns entries removed.
 * @lost: see emit_delete(); @send: emit DELETEs.
 */
static uint32_t
delete_subtree(struct prefixcache *pc, uint32_t root, const struct loss *lost,
	       bool send)
{
	uint32_t n = 0, removed = 0, k, parent = pc->e[root].parent;

	/* Room for every entry and prompt at once: no failure half-way. */
	if (grow((void **)&pc->stack, &pc->stackcap, sizeof(uint32_t), pc->nentries + 1) != 0 ||
	    grow((void **)&pc->touched, &pc->touchedcap, sizeof(uint32_t), pc->prcap + 1) != 0)
		return 0;
	pc->ntouched = 0;
	pc->stack[n++] = root;
	while (n > 0) {
		uint32_t i = pc->stack[--n], c;
		struct pc_entry *e = &pc->e[i];
		struct pc_prompt *p = &pc->pr[e->prompt];

		for (c = e->first_child; c != NIL; c = pc->e[c].next_sib)
			pc->stack[n++] = c;
		/* Remember the prompt's cut. */
		if (p->tmp == NIL) {
			pc->touched[pc->ntouched++] = e->prompt;
			p->tmp = e->start;
		} else if (e->start < p->tmp) {
			p->tmp = e->start;
		}
		/* Unlink from the prompt's list. */
		if (e->p_prev != NIL)
			pc->e[e->p_prev].p_next = e->p_next;
		else
			p->first = e->p_next;
		if (e->p_next != NIL)
			pc->e[e->p_next].p_prev = e->p_prev;
		else
			p->last = e->p_prev;
		entry_hash_unlink(pc, i);
		lru_unlink(pc, i);
		if (e->prot)
			group_of(pc, e->gid)->protected_tokens -= e->length - e->start;
		pc->org[e->org].st.entries--;
		pc->org[e->org].st.cached_tokens -= e->length - e->start;
		removed++;
	}
	/* Detach the root from its parent, which may become a leaf. */
	if (parent != NIL) {
		struct pc_entry *pe = &pc->e[parent];
		struct pc_entry *r = &pc->e[root];

		if (r->prev_sib != NIL)
			pc->e[r->prev_sib].next_sib = r->next_sib;
		else
			pe->first_child = r->next_sib;
		if (r->next_sib != NIL)
			pc->e[r->next_sib].prev_sib = r->prev_sib;
		if (pe->first_child == NIL)
			lru_insert_by_use(pc, parent, policy_bucket(pc, pe));
	}
	/* Free the records (walk again: the stack was consumed). */
	n = 0;
	pc->stack[n++] = root;
	while (n > 0) {
		uint32_t i = pc->stack[--n], c;

		for (c = pc->e[i].first_child; c != NIL; c = pc->e[c].next_sib)
			pc->stack[n++] = c;
		entry_release(pc, i);
	}
	for (k = 0; k < pc->ntouched; k++) {
		uint32_t pi = pc->touched[k], x = pc->pr[pi].tmp;

		pc->pr[pi].tmp = NIL;
		prompt_truncate(pc, pi, x, lost, send);
	}
	return removed;
}

/*
 * SLRU: while protected columns hold more than their share of capacity, send
 * the least recent protected leaf to probation's recent end (at most 64 per
 * call; protected columns that are not leaves stay until their children go).
 */
static void
slru_demote(struct prefixcache *pc, struct pc_group *g)
{
	uint64_t limit = g->capacity / 100 * (100 - pc->p.probation_pct) +
			 g->capacity % 100 * (100 - pc->p.probation_pct) / 100;
	int n;

	for (n = 0; n < 64 && g->protected_tokens > limit && g->lru_tail[1] != NIL; n++) {
		uint32_t i = g->lru_tail[1];
		struct pc_entry *e = &pc->e[i];

		lru_unlink(pc, i);
		e->prot = 0;
		g->protected_tokens -= e->length - e->start;
		lru_insert(pc, i, 0, false);
		pc->st.demotions++;
	}
}

/* SLRU: a column is hit, or stored after it was seen before. */
static void
slru_protect(struct prefixcache *pc, uint32_t i)
{
	struct pc_entry *e = &pc->e[i];

	if (pc->ghost == NULL || e->prot)
		return;
	e->prot = 1;
	group_of(pc, e->gid)->protected_tokens += e->length - e->start;
	pc->st.protected_columns++;
}

/*
 * Free at least one column of group @gid to make room: the policy's leaf,
 * skipping pinned ones, ones in the batch being built, and (unless nothing
 * else is left) live sequences' columns; with @first_list_only, only from the
 * list freed first (admit: new columns). Returns false when nothing can go.
 */
static bool
free_one(struct prefixcache *pc, uint8_t gid, bool first_list_only)
{
	struct pc_group *g = group_of(pc, gid);
	const struct pc_model *m = &pc->m[gid / MAX_GROUPS];
	int pass, b;

	if (pc->p.policy == PREFIXCACHE_SLRU)
		slru_demote(pc, g);
	for (pass = 0; pass < 2; pass++) {
		for (b = 0; b < (first_list_only ? 1 : NBUCKETS); b++) {
			uint32_t i, seen = 0;

			/* Visits at most 256 leaves per bucket and pass. */
			for (i = g->lru_tail[b]; i != NIL && seen < 256; i = pc->e[i].lru_prev, seen++) {
				struct pc_entry *e = &pc->e[i];

				if (e->pins > 0 || e->evict_count >= current_batch(m))
					continue;
				if (pass == 0 && pc->pr[e->prompt].seq != NULL)
					continue;
				delete_subtree(pc, i, NULL, true);
				pc->st.policy_deletes++;
				return true;
			}
		}
	}
	return false;
}

/* ---- Create ------------------------------------------------------------------------ */

static int
build_groups(struct pc_model *m, uint32_t C)
{
	uint16_t c, gi;

	m->ngroups = 0;
	for (c = 0; c < m->p.num_caches; c++) {
		const struct prefixcache_cache *cc = &m->p.cache[c];

		if (cc->capacity_tokens == 0)
			return -EINVAL;
		if (cc->rule == PREFIXCACHE_SWA && (cc->window == 0 || cc->sinks >= C ||
						    cc->sinks >= cc->window))
			return -EINVAL;
		for (gi = 0; gi < m->ngroups; gi++) {
			struct pc_group *g = &m->g[gi];

			if (g->rule == cc->rule &&
			    (cc->rule == PREFIXCACHE_FULL ||
			     (g->window == cc->window && g->sinks == cc->sinks)))
				break;
		}
		if (gi == m->ngroups) {
			if (gi == MAX_GROUPS)
				return -EINVAL;
			memset(&m->g[gi], 0, sizeof(m->g[gi]));
			m->g[gi].rule = cc->rule;
			m->g[gi].window = cc->window;
			m->g[gi].sinks = cc->sinks;
			m->g[gi].capacity = UINT64_MAX;
			memset(m->g[gi].lru_head, 0xff, sizeof(m->g[gi].lru_head));
			memset(m->g[gi].lru_tail, 0xff, sizeof(m->g[gi].lru_tail));
			m->ngroups++;
		}
		m->g[gi].cache_pos[m->g[gi].ncaches] = c;
		m->g[gi].cache[m->g[gi].ncaches++] = cc->cache_id;
		if (cc->capacity_tokens < m->g[gi].capacity)
			m->g[gi].capacity = cc->capacity_tokens;
		m->group_of_cache[c] = (uint8_t)gi;
	}
	return 0;
}

struct prefixcache *
prefixcache_create(const struct prefixcache_params *p, const struct prefixcache_sink *sink)
{
	struct prefixcache *pc;
	uint16_t mi;
	uint32_t k;

	if (p == NULL || p->num_models == 0 || p->num_models > PREFIXCACHE_MAX_MODELS) {
		errno = EINVAL;
		return NULL;
	}
	pc = calloc(1, sizeof(*pc));
	if (pc == NULL)
		return NULL;
	pc->p = *p;
	if (pc->p.column == 0)
		pc->p.column = PREFIXCACHE_COLUMN_DEFAULT;
	if (pc->p.probation_pct == 0)
		pc->p.probation_pct = 10;
	if (pc->p.followup_pct == 0)
		pc->p.followup_pct = 10;
	if (pc->p.probation_pct > 90 || pc->p.followup_pct > 100 ||
	    (unsigned int)pc->p.policy > PREFIXCACHE_FOLLOWUP)
		goto einval;
	if (sink != NULL)
		pc->sink = *sink;
	for (mi = 0; mi < p->num_models; mi++) {
		struct pc_model *m = &pc->m[mi];

		m->p = p->model[mi];
		if (m->p.num_caches == 0 || m->p.num_caches > PREFIXCACHE_MAX_CACHES ||
		    build_groups(m, pc->p.column) != 0)
			goto einval;
		if (m->p.max_batch_tokens == 0)
			m->p.max_batch_tokens = (uint16_t)(proto_evict_max_entries(9000) / m->p.num_caches);
		if (m->p.max_batch_tokens == 0 ||
		    (uint32_t)m->p.max_batch_tokens * m->p.num_caches > 65535)
			goto einval;
		m->batch = calloc((size_t)m->p.max_batch_tokens * m->p.num_caches,
				  sizeof(*m->batch));
		if (m->batch == NULL)
			goto enomem;
	}
	pc->efree = pc->prfree = NIL;
	pc->emask = 1023;
	pc->ebucket = malloc(sizeof(uint32_t) * 1024);
	pc->prmask = 1023;
	pc->prbucket = malloc(sizeof(uint32_t) * 1024);
	pc->orgmask = 63;
	pc->orgbucket = malloc(sizeof(uint32_t) * 64);
	pc->stackcap = 1024;
	pc->stack = malloc(sizeof(uint32_t) * pc->stackcap);
	if (!pc->ebucket || !pc->prbucket || !pc->orgbucket || !pc->stack)
		goto enomem;
	for (k = 0; k < 1024; k++)
		pc->ebucket[k] = pc->prbucket[k] = NIL;
	for (k = 0; k < 64; k++)
		pc->orgbucket[k] = NIL;
	if (pc->p.policy == PREFIXCACHE_SLRU || pc->p.policy == PREFIXCACHE_ADMIT) {
		uint32_t n = pow2_ghost(pc->p.ghost_entries ? pc->p.ghost_entries : 1u << 20);

		/* 4 rows of n 8-bit counters. */
		pc->ghost = calloc(n / 2, sizeof(uint64_t));
		if (pc->ghost == NULL)
			goto enomem;
		pc->ghost_mask = n - 1;
	}
	if (pc->p.policy == PREFIXCACHE_FOLLOWUP) {
		uint32_t n = pow2_ghost(pc->p.ghost_entries ? pc->p.ghost_entries : 1u << 20);

		pc->tag = calloc(n, sizeof(uint32_t));
		if (pc->tag == NULL)
			goto enomem;
		pc->tag_mask = n - 1;
	}
	pc->next_prompt = 1;
	pc->next_refill = 1;
	return pc;
einval:
	prefixcache_free(pc);
	errno = EINVAL;
	return NULL;
enomem:
	prefixcache_free(pc);
	errno = ENOMEM;
	return NULL;
}

void
prefixcache_free(struct prefixcache *pc)
{
	uint16_t mi;
	uint32_t i;

	if (pc == NULL)
		return;
	while (pc->live != NULL) {
		struct prefixcache_seq *s = pc->live;

		pc->live = s->next;
		free(s->tokens);
		free(s->tok_batch);
		free(s);
	}
	for (mi = 0; mi < PREFIXCACHE_MAX_MODELS; mi++)
		free(pc->m[mi].batch);
	/* Records past nrf keep their pin arrays for reuse: free them all. */
	for (i = 0; i < pc->rfcap; i++)
		free(pc->rf[i].pin);
	for (i = 0; i < MAX_GROUPS; i++)
		free(pc->path[i]);
	free(pc->rf);
	free(pc->chunks);
	free(pc->e);
	free(pc->ebucket);
	free(pc->pr);
	free(pc->prbucket);
	free(pc->org);
	free(pc->orgbucket);
	free(pc->ghost);
	free(pc->tag);
	free(pc->stack);
	free(pc->touched);
	free(pc);
}

/* ---- Column geometry ------------------------------------------------------------- */

/*
 * End of the column after the one ending at @end, or 0 when caching stops.
 * Full attention: every C tokens. Sliding window W with S sinks: every C
 * tokens up to W; then the wafer loops over positions [S, W), and a column
 * of positions completes whenever its last position is written, at lengths
 * W + C - S, +C, ..., with a short column (C - S tokens) at each lap start.
 * When W is not a multiple of C, caching stops at the window.
 */
static uint32_t
next_end(const struct pc_group *g, uint32_t C, uint32_t end)
{
	uint32_t W = g->window, S = g->sinks, x, p, q;

	if (g->rule == PREFIXCACHE_FULL)
		return end > UINT32_MAX - C ? 0 : end + C;
	if (end + C <= W)
		return end + C;
	if (W % C != 0 || end < W)
		return 0;
	x = end - W;
	p = S + x % (W - S); /* position the next token writes */
	q = (p / C + 1) * C - 1;  /* last position of its column */
	return end + (q - p + 1);
}

/* ---- SLRU: sighting sketch (count-min, 4 rows of 8-bit counters) ---------- */

static inline uint8_t *
sketch_cell(struct prefixcache *pc, uint64_t h, unsigned int row)
{
	uint64_t x = mix64(h + row * 0x9E3779B97F4A7C15ULL);

	return (uint8_t *)pc->ghost + row * (size_t)(pc->ghost_mask + 1) + (x & pc->ghost_mask);
}

static uint8_t
sketch_get(struct prefixcache *pc, uint64_t h)
{
	uint8_t m = 255;
	unsigned int r;

	for (r = 0; r < 4; r++) {
		uint8_t v = *sketch_cell(pc, h, r);

		if (v < m)
			m = v;
	}
	return m;
}

/* One more sighting (conservative update); halve everything now and then. */
static void
sketch_add(struct prefixcache *pc, uint64_t h)
{
	uint8_t m = sketch_get(pc, h);
	unsigned int r;

	if (m == 255)
		return;
	for (r = 0; r < 4; r++) {
		uint8_t *c = sketch_cell(pc, h, r);

		if (*c == m)
			(*c)++;
	}
	/* Aging: after as many sightings as counters in a row, halve. */
	if (++pc->sketch_adds > pc->ghost_mask + 1) {
		uint8_t *c = (uint8_t *)pc->ghost;
		size_t i, n = 4 * (size_t)(pc->ghost_mask + 1);

		for (i = 0; i < n; i++)
			c[i] >>= 1;
		pc->sketch_adds = 0;
	}
}

/*
 * Count every column of the known prompt from @from on (SLRU). Returns where
 * the run of columns from @from that were seen before ends.
 */
static uint32_t
sketch_prompt(struct prefixcache *pc, const struct pc_group *g, uint64_t h, const uint32_t *t,
	      uint32_t from, uint32_t limit)
{
	uint32_t e = from, ne, seen_end = from;

	while ((ne = next_end(g, pc->p.column, e)) != 0 && ne <= limit) {
		h = prefixcache_column_hash(h, t + e, ne - e);
		if (seen_end == e && sketch_get(pc, h) > 0)
			seen_end = ne;
		sketch_add(pc, h);
		e = ne;
	}
	return seen_end;
}

/* ---- followup: which sequences get followed up, by class of answer length ---------- */

static inline uint64_t
fu_key(uint8_t gid, uint64_t h)
{
	return mix64(h ^ ((uint64_t)gid << 56));
}

/* Tag: 24 bits of the key over the class (never 0: the fingerprint is at least 1). */
static inline uint32_t
fu_tag(uint64_t key, uint32_t cls)
{
	return (uint32_t)((key >> 40) | 1) << 8 | cls;
}

/* A column of @tokens is looked up or stored: if a sequence stored it before, it is reused. */
static void
fu_sight(struct prefixcache *pc, uint8_t gid, uint64_t h, uint32_t tokens)
{
	uint64_t key;
	uint32_t *t;

	if (pc->tag == NULL)
		return;
	key = fu_key(gid, h);
	t = &pc->tag[key & pc->tag_mask];
	if (*t != 0 && *t >> 8 == fu_tag(key, 0) >> 8) {
		pc->fu_reused[*t & 0xff] += tokens;
		*t = 0;
	}
}

/*
 * Sequence @s ends: tag the columns it stored with its class and count their
 * tokens; if the class is seldom followed up (reused share under
 * followup_pct), they go to the cold list.
 */
static void
fu_end(struct prefixcache *pc, const struct prefixcache_seq *s)
{
	const struct pc_model *m = &pc->m[s->model];
	uint32_t out = s->ntok > s->prompt_len ? s->ntok - s->prompt_len : 0, cls, gi;
	bool cold;

	if (pc->tag == NULL)
		return;
	cls = bit_length(out, FU_CLASSES - 1);
	/* Integer form of (reused + 1) / (stored + 2) < pct / 100: an unknown class is warm. */
	cold = (pc->fu_reused[cls] + 1) * 100 < (pc->fu_stored[cls] + 2) * pc->p.followup_pct;
	for (gi = 0; gi < m->ngroups; gi++) {
		uint8_t gid = (uint8_t)(s->model * MAX_GROUPS + gi);
		uint32_t pi = prompt_find(pc, gid, s->prompt_id), i;

		if (pi == NIL)
			continue;
		for (i = pc->pr[pi].first; i != NIL; i = pc->e[i].p_next) {
			struct pc_entry *e = &pc->e[i];
			uint64_t key = fu_key(gid, e->hash);

			pc->tag[key & pc->tag_mask] = fu_tag(key, cls);
			pc->fu_stored[cls] += e->length - e->start;
			if (!cold || e->cold)
				continue;
			e->cold = 1;
			pc->st.cold_columns++;
			lru_requeue(pc, i);
		}
	}
	/* Keep the shares current over a long life: halve a class past 2^40 tokens. */
	if (pc->fu_stored[cls] > (1ull << 40)) {
		pc->fu_stored[cls] >>= 1;
		pc->fu_reused[cls] >>= 1;
	}
}

/* ---- Lookup and refill -------------------------------------------------------------- */

static inline void
touch(struct prefixcache *pc, uint32_t i, uint64_t now)
{
	struct pc_entry *e = &pc->e[i];

	e->last_used = tick(now);
	if (e->hits < UINT16_MAX)
		e->hits++;
	e->cold = 0;
	/* Checked here: an inner column of a long hit is neither on probation nor a leaf. */
	if (pc->ghost != NULL && !e->prot)
		slru_protect(pc, i);
	if (e->bucket != NO_BUCKET)
		lru_requeue(pc, i);
}

static int
pin_add(struct pc_refill *r, const struct pc_entry *e, uint32_t i)
{
	if (r->npin == r->pincap &&
	    grow((void **)&r->pin, &r->pincap, sizeof(*r->pin), r->npin + 1) != 0)
		return -ENOMEM;
	r->pin[r->npin++] = (struct pc_pin){i, e->gen};
	return 0;
}

/* Record @i still holds the entry it held at generation @gen (records are reused). */
static inline bool
entry_is(const struct prefixcache *pc, uint32_t i, uint32_t gen)
{
	return i < pc->ecap && pc->e[i].length != 0 && pc->e[i].gen == gen;
}

static void
unpin(struct prefixcache *pc, uint32_t i, uint32_t gen)
{
	if (entry_is(pc, i, gen) && pc->e[i].pins > 0)
		pc->e[i].pins--;
}

/* Append chunk (prompt, [a, z)) to @out, merging with the previous one. */
static void
chunk_add(struct proto_refill_chunk *out, uint16_t *n, uint64_t prompt, uint32_t a, uint32_t z)
{
	if (a >= z)
		return;
	if (*n > 0 && out[*n - 1].prompt_id == prompt &&
	    out[*n - 1].start_token_idx + out[*n - 1].num_tokens == a) {
		out[*n - 1].num_tokens += z - a;
		return;
	}
	out[*n] = (struct proto_refill_chunk){prompt, a, z - a};
	(*n)++;
}

/* Logical range [a, z) as chunks of the prompts holding it, along @path. */
static void
chunks_of_range(struct prefixcache *pc, const uint32_t *path, uint32_t np, uint32_t a, uint32_t z,
		struct proto_refill_chunk *out, uint16_t *n)
{
	uint32_t k;

	for (k = 0; k < np && a < z; k++) {
		const struct pc_entry *e = &pc->e[path[k]];
		uint32_t lo = a > e->start ? a : e->start, hi = z < e->length ? z : e->length;

		if (lo < hi)
			chunk_add(out, n, pc->pr[e->prompt].id, lo, hi);
	}
}

/*
 * The refill of @L logical tokens for group @g along @path: in wafer position
 * order. Full attention: [0, L). Sliding window with L > W: the S sinks, then
 * the part of the window written since the last lap began, then the rest.
 */
static uint16_t
build_chunks(struct prefixcache *pc, const struct pc_group *g, const uint32_t *path, uint32_t np,
	     uint32_t L, struct proto_refill_chunk *out)
{
	uint16_t n = 0;

	if (g->rule == PREFIXCACHE_FULL || L <= g->window) {
		chunks_of_range(pc, path, np, 0, L, out, &n);
	} else {
		uint32_t W = g->window, S = g->sinks, a = L - (W - S);
		/* The window token at position S: (t - S) a multiple of W - S. */
		uint32_t t0 = a + (W - S - (a - S) % (W - S)) % (W - S);

		chunks_of_range(pc, path, np, 0, S, out, &n);
		chunks_of_range(pc, path, np, t0, L, out, &n);
		chunks_of_range(pc, path, np, a, t0, out, &n);
	}
	return n;
}

static struct pc_refill *
refill_new(struct prefixcache *pc, uint32_t nreq)
{
	struct pc_refill *r;

	if (pc->nrf == pc->rfcap) {
		uint32_t old = pc->rfcap;

		if (grow((void **)&pc->rf, &pc->rfcap, sizeof(*pc->rf), pc->nrf + 1) != 0)
			return NULL;
		memset(&pc->rf[old], 0, sizeof(*pc->rf) * (pc->rfcap - old));
	}
	r = &pc->rf[pc->nrf++];
	r->id = pc->next_refill;
	pc->next_refill += nreq;
	r->n = r->pending = nreq;
	r->npin = 0;
	return r;
}

/* Token @pos of the sequence (pos >= tbase), and its latest eviction batch. */
#define TOK(s, pos) ((s)->tokens[(pos) - (s)->tbase])
#define TOKP(s, pos) ((s)->tokens + ((pos) - (s)->tbase))
#define TBATCH(s, pos) ((s)->tok_batch[(pos) - (s)->tbase])

/* Room for tokens up to absolute index @n. */
static int
seq_reserve_tokens(struct prefixcache_seq *s, uint32_t n)
{
	uint32_t cap = s->cap;

	n -= s->tbase;
	if (n <= cap)
		return 0;
	if (grow((void **)&s->tokens, &cap, sizeof(uint32_t), n) != 0)
		return -ENOMEM;
	cap = s->cap;
	if (grow((void **)&s->tok_batch, &cap, sizeof(uint64_t), n) != 0)
		return -ENOMEM;
	s->cap = cap;
	return 0;
}

static void
seq_pin_last(struct prefixcache *pc, struct seq_group *sg, uint32_t i)
{
	if (sg->last_entry != NIL)
		unpin(pc, sg->last_entry, sg->last_gen);
	sg->last_entry = i;
	if (i != NIL) {
		sg->last_gen = pc->e[i].gen;
		pc->e[i].pins++;
	}
}

struct prefixcache_seq *
prefixcache_begin(struct prefixcache *pc, uint16_t mi, const struct prefixcache_request *req,
		  uint64_t now, struct prefixcache_hit *hit)
{
	struct pc_model *m;
	struct prefixcache_seq *s;
	uint32_t limit, allowed, L = 0, np[MAX_GROUPS] = {0}, org, gi, k;
	const uint32_t C = pc->p.column;
	uint64_t ec1 = 0;

	memset(hit, 0, sizeof(*hit));
	if (mi >= pc->p.num_models || (req->num_tokens > 0 && req->tokens == NULL)) {
		errno = EINVAL;
		return NULL;
	}
	m = &pc->m[mi];
	org = org_get(pc, req->isolation_id);
	s = calloc(1, sizeof(*s));
	if (org == NIL || s == NULL)
		goto enomem;
	s->ntok = s->prompt_len = req->num_tokens;
	s->model = mi;
	s->org = org;
	s->isolation_id = req->isolation_id;
	s->seq_id = req->sequence_id;
	s->priority = req->priority_tokens;
	allowed = req->cache_length_allowed;
	if (req->first_multimodal < allowed)
		allowed = req->first_multimodal;
	s->allowed = allowed;
	limit = pc->p.no_minus_one ? req->num_tokens : req->num_tokens ? req->num_tokens - 1 : 0;
	if (limit > allowed)
		limit = allowed;

	/* Walk each group's PrefixMap, column by column, to the first miss. */
	for (gi = 0; gi < m->ngroups; gi++) {
		const struct pc_group *g = &m->g[gi];
		uint8_t gid = (uint8_t)(mi * MAX_GROUPS + gi);
		uint64_t h = req->isolation_id;
		uint32_t end = 0, ne;

		uint32_t ne2 = 0;
		uint64_t h2 = 0;
		struct ttl ttl = org_ttl(pc, org);
		uint32_t tnow = tick(now);

		/*
		 * Software-pipelined: while the next column is hashed (it is chained
		 * on this column's hash alone), this column's bucket and entry are
		 * on their way from memory.
		 */
		if ((ne = next_end(g, C, end)) != 0 && ne <= limit) {
			h = prefixcache_column_hash(h, req->tokens, ne);
			__builtin_prefetch(&pc->ebucket[ebucket_of(pc, gid, org, h)]);
		}
		while (ne != 0 && ne <= limit) {
			uint32_t i = pc->ebucket[ebucket_of(pc, gid, org, h)];

			if (i != NIL)
				__builtin_prefetch(&pc->e[i]);
			ne2 = next_end(g, C, ne);
			if (ne2 != 0 && ne2 <= limit) {
				h2 = prefixcache_column_hash(h, req->tokens + ne, ne2 - ne);
				__builtin_prefetch(&pc->ebucket[ebucket_of(pc, gid, org, h2)]);
			}
			while (i != NIL && (pc->e[i].hash != h || pc->e[i].org != org ||
					    pc->e[i].gid != gid))
				i = pc->e[i].hnext;
			if (i == NIL || expired_t(&pc->e[i], ttl, tnow) || pc->e[i].length != ne)
				break;
			/* One group: every hit is used; touch it while it is in cache. */
			if (m->ngroups == 1) {
				touch(pc, i, now);
				if (pc->e[i].evict_count > ec1)
					ec1 = pc->e[i].evict_count;
			}
			if (np[gi] == pc->pathcap[gi] &&
			    grow((void **)&pc->path[gi], &pc->pathcap[gi], sizeof(uint32_t),
				 np[gi] + 1) != 0)
				goto enomem;
			pc->path[gi][np[gi]++] = i;
			end = ne;
			ne = ne2;
			h = h2;
		}
	}
	/* SLRU: every column of the prompt is sighted once more (the hit ones are hashed). */
	if (pc->ghost != NULL) {
		for (gi = 0; gi < m->ngroups; gi++) {
			uint64_t h = req->isolation_id;
			uint32_t from = 0, se;

			for (k = 0; k < np[gi]; k++) {
				const struct pc_entry *e = &pc->e[pc->path[gi][k]];

				sketch_add(pc, e->hash);
				h = e->hash;
				from = e->length;
			}
			se = sketch_prompt(pc, &m->g[gi], h, req->tokens, from, limit);
			if (gi == 0 || se < s->seen_end)
				s->seen_end = se;
		}
		s->sketched = limit;
	}
	/* followup: the hit columns are sighted. */
	for (gi = 0; gi < m->ngroups && pc->tag != NULL; gi++)
		for (k = 0; k < np[gi]; k++) {
			const struct pc_entry *e = &pc->e[pc->path[gi][k]];

			fu_sight(pc, e->gid, e->hash, e->length - e->start);
		}
	/*
	 * The longest length every group can refill: the shortest group's hit.
	 * A group's hit chain certifies every token before its end, and the
	 * shard holds them all (a prompt only shrinks from the right), so a
	 * group can refill any prefix of its hit: a full cache tokens [0, L), a
	 * sliding window its sinks and the W - S tokens before L. (Requiring a
	 * length that ends an entry in every group stopped a model with a full
	 * cache and a window at the window: after its first lap the window's
	 * entries are off the column grid.) Each path keeps the entry holding
	 * token L - 1, which may end past L.
	 */
	for (gi = 0; gi < m->ngroups; gi++) {
		uint32_t end = np[gi] ? pc->e[pc->path[gi][np[gi] - 1]].length : 0;

		if (gi == 0 || end < L)
			L = end;
	}
	for (gi = 0; gi < m->ngroups; gi++)
		while (np[gi] > 0 &&
		       (np[gi] == 1 ? L == 0 : pc->e[pc->path[gi][np[gi] - 2]].length >= L))
			np[gi]--;

	/*
	 * SLRU: a hit that covers an earlier prompt to its last column is a
	 * conversation going on; what it adds is likely wanted by the next turn.
	 */
	if (pc->ghost != NULL && np[0] > 0) {
		const struct pc_entry *le = &pc->e[pc->path[0][np[0] - 1]];

		s->resumes = le->length + C > pc->pr[le->prompt].hi;
	}

	/* The sequence keeps its tokens from L on: the hit ones are hashed already. */
	s->tbase = L;
	if (seq_reserve_tokens(s, req->num_tokens + 64) != 0)
		goto enomem;
	memcpy(s->tokens, req->tokens + L, sizeof(uint32_t) * (req->num_tokens - L));
	s->pos = s->verified = L;
	s->prompt_id = mix64(pc->next_prompt++ * 0x9E3779B97F4A7C15ULL) | 1;
	hit->prompt_id = s->prompt_id;
	hit->hit_tokens = L;
	hit->lookup_tokens = limit;
	for (gi = 0; gi < m->ngroups; gi++) {
		struct seq_group *sg = &s->g[gi];
		uint32_t last = np[gi] ? pc->path[gi][np[gi] - 1] : NIL;

		/*
		 * A group whose last used entry ends past L (another group's hit
		 * was shorter) caches from that entry's end on: the tokens before
		 * it are that entry's, held by its prompt.
		 */
		sg->cur_end = last != NIL && pc->e[last].length > L ? pc->e[last].length : L;
		sg->caching = allowed > sg->cur_end;
		sg->prompt = NIL;
		sg->last_entry = NIL;
		sg->last_hash = last != NIL ? pc->e[last].hash : req->isolation_id;
		if (sg->caching)
			seq_pin_last(pc, sg, last);
	}

	if (L > 0) {
		struct pc_refill *r = NULL;
		uint32_t nreq = m->p.num_caches, done = 0;
		uint64_t ec = ec1;

		for (gi = 0; gi < m->ngroups && m->ngroups > 1; gi++)
			for (k = 0; k < np[gi]; k++) {
				struct pc_entry *e = &pc->e[pc->path[gi][k]];

				touch(pc, pc->path[gi][k], now);
				if (e->evict_count > ec)
					ec = e->evict_count;
			}
		/*
		 * A refill never waits for a batch not yet sent: the shard runs
		 * REFILLs and DELETEs in one ordered queue, so a REFILL waiting
		 * for the open batch would hold back the DELETEs that make room
		 * for that batch (a deadlock until NO_SPACE).
		 */
		if (ec > m->batches_sent)
			flush_model(pc, mi);
		r = refill_new(pc, nreq);
		if (r == NULL)
			goto enomem;
		for (gi = 0; gi < m->ngroups; gi++) {
			const struct pc_group *g = &m->g[gi];
			struct proto_refill_chunk *ch;
			uint16_t nch, c;

			if (grow((void **)&pc->chunks, &pc->chunkcap, sizeof(*ch), 2 * np[gi] + 4) != 0)
				goto enomem;
			ch = pc->chunks;
			/*
			 * Pinning the deepest entry protects the whole path: its
			 * ancestors are not leaves while it lives, and expiry skips
			 * subtrees holding a pin.
			 */
			if (np[gi] > 0) {
				uint32_t i = pc->path[gi][np[gi] - 1];

				if (pin_add(r, &pc->e[i], i) == 0)
					pc->e[i].pins++;
			}
			nch = build_chunks(pc, g, pc->path[gi], np[gi], L, ch);
			for (c = 0; c < g->ncaches; c++) {
				struct proto_refill_req rq = {
					.refill_id = r->id + g->cache_pos[c], .evict_count = ec,
					.sequence_id = s->seq_id, .cache_idx = 0,
					.cache_id = g->cache[c], .num_chunks = nch};

				if (pc->sink.refill != NULL)
					pc->sink.refill(pc->sink.arg, mi, &rq, ch);
				done++;
			}
		}
		(void)done;
		hit->refill_id = r->id;
		hit->evict_count = ec;
		hit->estimate_bytes = (uint64_t)L * m->p.refill_bytes_per_token;
		hit->estimate_ns = m->p.refill_latency_ns;
		if (m->p.refill_bytes_per_ns > 0)
			hit->estimate_ns += (uint64_t)((double)hit->estimate_bytes / m->p.refill_bytes_per_ns);
		pc->st.refills++;
	}
	/* Reserve space for the evictions to come. */
	if (allowed > L && pc->sink.reserve != NULL) {
		for (gi = 0; gi < m->ngroups; gi++) {
			const struct pc_group *g = &m->g[gi];
			uint32_t last = np[gi] ? pc->path[gi][np[gi] - 1] : NIL;
			uint16_t c;

			for (c = 0; c < g->ncaches; c++) {
				uint32_t from = s->g[gi].cur_end;
				struct proto_reserve rv = {
					.prompt_id = s->prompt_id,
					.continue_id = last != NIL ? pc->pr[pc->e[last].prompt].id : 0,
					.start_token_idx = from, .num_tokens = allowed - from,
					.cache_id = g->cache[c]};

				if (allowed > from)
					pc->sink.reserve(pc->sink.arg, mi, &rv);
			}
		}
	}
	pc->st.requests++;
	pc->st.lookup_tokens += limit;
	pc->st.hit_tokens += L;
	pc->org[org].st.requests++;
	pc->org[org].st.hit_tokens += L;
	s->next = pc->live;
	if (pc->live != NULL)
		pc->live->prev = s;
	pc->live = s;
	return s;
enomem:
	if (s != NULL) {
		free(s->tokens);
		free(s->tok_batch);
		free(s);
	}
	errno = ENOMEM;
	return NULL;
}

void
prefixcache_refill_done(struct prefixcache *pc, uint64_t refill_id)
{
	uint32_t i, k;

	for (i = 0; i < pc->nrf; i++) {
		struct pc_refill *r = &pc->rf[i];

		if (refill_id < r->id || refill_id >= r->id + r->n)
			continue;
		if (--r->pending > 0)
			return;
		for (k = 0; k < r->npin; k++)
			unpin(pc, r->pin[k].entry, r->pin[k].gen);
		/* Swap the last record in; keep its pin array. */
		{
			struct pc_refill t = *r;

			*r = pc->rf[pc->nrf - 1];
			pc->rf[pc->nrf - 1] = t;
			pc->nrf--;
		}
		return;
	}
}

/* ---- Evicting tokens and recording columns ------------------------------------------------ */

/*
 * The sequence lets go of group @gi: its pin, and its prompt, whose tokens no
 * entry references (a partial column, columns stored twice) are deleted.
 */
static void
seq_release_group(struct prefixcache *pc, struct prefixcache_seq *s, unsigned int gi)
{
	struct seq_group *sg = &s->g[gi];

	seq_pin_last(pc, sg, NIL);
	if (sg->prompt != NIL) {
		uint32_t pi = sg->prompt;

		pc->pr[pi].seq = NULL;
		sg->prompt = NIL;
		prompt_truncate(pc, pi, pc->pr[pi].end, NULL, true);
	}
}

static void
stop_caching(struct prefixcache *pc, struct prefixcache_seq *s, unsigned int gi)
{
	if (!s->g[gi].caching)
		return;
	s->g[gi].caching = false;
	pc->st.stopped++;
	seq_release_group(pc, s, gi);
}

static void
record_column(struct prefixcache *pc, struct prefixcache_seq *s, unsigned int gi, uint32_t a,
	      uint32_t b, uint64_t now)
{
	struct seq_group *sg = &s->g[gi];
	uint8_t gid = (uint8_t)(s->model * MAX_GROUPS + gi);
	uint64_t h = prefixcache_column_hash(sg->last_hash, TOKP(s, a), b - a), ec = 0;
	uint32_t i, parent = sg->last_entry, t;
	struct pc_entry *e;
	struct pc_prompt *p;

	fu_sight(pc, gid, h, b - a);
	/*
	 * The parent must still be there, or this column is unreachable (a
	 * restart or a lost token may have freed it, and its record may hold
	 * another column since).
	 */
	if (parent != NIL && !entry_is(pc, parent, sg->last_gen)) {
		sg->last_entry = NIL;
		stop_caching(pc, s, gi);
		return;
	}
	i = entry_find(pc, gid, s->org, h);
	if (i != NIL && expired(pc, &pc->e[i], now) && !subtree_pinned(pc, i)) {
		delete_subtree(pc, i, NULL, true);
		i = NIL;
		if (!sg->caching)
			return;
	}
	if (i != NIL) {
		/* Stored twice (another sequence got there first): ours is unreferenced. */
		pc->st.dup_columns++;
		seq_pin_last(pc, sg, i);
		sg->last_hash = h;
		sg->cur_end = b;
		return;
	}
	i = entry_alloc(pc);
	if (i == NIL) {
		stop_caching(pc, s, gi);
		return;
	}
	for (t = a; t < b; t++)
		if (TBATCH(s, t) > ec)
			ec = TBATCH(s, t);
	e = &pc->e[i];
	p = &pc->pr[sg->prompt];
	*e = (struct pc_entry){.hash = h, .evict_count = ec, .first_used = tick(now), .last_used = tick(now),
			       .start = a, .length = b, .org = s->org, .prompt = sg->prompt,
			       .parent = parent, .first_child = NIL, .next_sib = NIL,
			       .prev_sib = NIL, .lru_prev = NIL, .lru_next = NIL,
			       .p_prev = p->last, .p_next = NIL, .gen = e->gen + 1,
			       .gid = gid, .bucket = NO_BUCKET, .prio = b <= s->priority};
	/* Index, prompt list, family. */
	{
		uint32_t k = ebucket_of(pc, gid, s->org, h);

		e->hnext = pc->ebucket[k];
		pc->ebucket[k] = i;
	}
	if (p->last != NIL)
		pc->e[p->last].p_next = i;
	else
		p->first = i;
	p->last = i;
	if (parent != NIL) {
		struct pc_entry *pe = &pc->e[parent];

		lru_unlink(pc, parent); /* no longer a leaf */
		e->next_sib = pe->first_child;
		if (pe->first_child != NIL)
			pc->e[pe->first_child].prev_sib = i;
		pe->first_child = i;
	}
	/* SLRU: seen before (this lookup's sighting aside) is protected at once. */
	if (pc->ghost != NULL &&
	    (s->resumes || sketch_get(pc, h) >= (b <= s->sketched ? 2 : 1)))
		slru_protect(pc, i);
	lru_insert(pc, i, policy_bucket(pc, e), false);
	if (pc->sink.column != NULL)
		pc->sink.column(pc->sink.arg, s->model, pc->m[s->model].g[gi].cache[0], s->isolation_id,
				s->prompt_id, a, b);
	pc->org[s->org].st.entries++;
	pc->org[s->org].st.cached_tokens += b - a;
	seq_pin_last(pc, sg, i);
	sg->last_hash = h;
	sg->cur_end = b;
}

/*
 * Evict token @pos of @s into the current batch; complete columns if
 * @complete. Making room may send DELETEs, and a DELETE first flushes the
 * batch it waits for: so the token's entries, and the batch number its
 * prompts record, are taken only once every group has its room.
 */
static int
evict_token(struct prefixcache *pc, struct prefixcache_seq *s, uint32_t pos, uint64_t now,
	    bool complete)
{
	struct pc_model *m = &pc->m[s->model];
	struct proto_evict_entry *be;
	const uint32_t C = pc->p.column;
	uint64_t pid[MAX_GROUPS] = {0}, batch;
	unsigned int gi;
	int evicted = 0;
	/* admit: a token of a new column only takes the room of new ones. */
	const bool is_new = pc->p.policy == PREFIXCACHE_ADMIT && !s->resumes && pos >= s->seen_end;

	for (gi = 0; gi < m->ngroups; gi++) {
		struct pc_group *g = &m->g[gi];
		struct seq_group *sg = &s->g[gi];
		uint8_t gid = (uint8_t)(s->model * MAX_GROUPS + gi);
		struct pc_prompt *p;

		if (sg->caching && next_end(g, C, sg->cur_end) == 0)
			stop_caching(pc, s, gi); /* past the last column (window) */
		if (pos < sg->cur_end && sg->prompt == NIL)
			continue; /* inside its last hit entry (held by that entry's prompt) */
		if (sg->caching) {
			bool growth = sg->prompt == NIL || pos >= pc->pr[sg->prompt].end;

			while (growth && sg->caching && g->stored + 1 > g->capacity)
				if (!free_one(pc, gid, is_new)) {
					if (is_new)
						pc->st.bypassed++;
					stop_caching(pc, s, gi);
				}
		}
		if (!sg->caching)
			continue;
		if (sg->prompt == NIL) {
			sg->prompt = prompt_new(pc, gid, s->prompt_id, pos, s);
			if (sg->prompt == NIL) {
				stop_caching(pc, s, gi);
				continue;
			}
		}
		p = &pc->pr[sg->prompt];
		if (pos == p->end) {
			p->end++;
			if (p->end > p->hi)
				p->hi = p->end;
			g->stored++;
			pc->stored_total++;
			if (pc->stored_total > pc->st.peak_stored_tokens)
				pc->st.peak_stored_tokens = pc->stored_total;
		}
		pid[gi] = s->prompt_id;
		evicted = 1;
	}
	/* Now no more flushes: this is the batch the token goes in. */
	batch = current_batch(m);
	be = m->batch + (size_t)m->batch_g * m->p.num_caches;
	for (gi = 0; gi < m->ngroups; gi++) {
		const struct pc_group *g = &m->g[gi];
		uint16_t c;

		/* A group that stopped after an earlier one's room-making: not stored. */
		if (pid[gi] != 0 && !s->g[gi].caching)
			pid[gi] = 0;
		if (pid[gi] != 0)
			pc->pr[s->g[gi].prompt].last_batch = batch;
		for (c = 0; c < g->ncaches; c++)
			be[g->cache_pos[c]] = (struct proto_evict_entry){pid[gi], pos, s->seq_id};
	}
	TBATCH(s, pos) = batch;
	m->batch_g++;
	if (evicted)
		pc->st.evicted_tokens++;
	if (complete) {
		for (gi = 0; gi < m->ngroups; gi++) {
			struct seq_group *sg = &s->g[gi];
			uint32_t ne;

			while (sg->caching && (ne = next_end(&m->g[gi], C, sg->cur_end)) != 0 &&
			       ne <= s->verified && sg->prompt != NIL)
				record_column(pc, s, gi, sg->cur_end, ne, now);
		}
	}
	if (m->batch_g == m->p.max_batch_tokens)
		flush_model(pc, s->model);
	return evicted;
}

int
prefixcache_token(struct prefixcache *pc, struct prefixcache_seq *s, uint32_t token, uint64_t now)
{
	uint32_t pos = s->pos;

	if (seq_reserve_tokens(s, pos + 1) != 0)
		return 0;
	TOK(s, pos) = token;
	if (pos + 1 > s->ntok)
		s->ntok = pos + 1;
	s->pos = pos + 1;
	s->verified = s->pos;
	if (pos >= s->allowed)
		return 0;
	return evict_token(pc, s, pos, now, true);
}

int
prefixcache_speculate(struct prefixcache *pc, struct prefixcache_seq *s, const uint32_t *tokens,
		      uint32_t n, uint64_t now)
{
	uint32_t k;
	int ev = 0;

	if (seq_reserve_tokens(s, s->pos + n) != 0)
		return -ENOMEM;
	for (k = 0; k < n; k++) {
		uint32_t pos = s->pos++;

		TOK(s, pos) = tokens[k];
		if (pos + 1 > s->ntok)
			s->ntok = pos + 1;
		if (pos < s->allowed)
			ev += evict_token(pc, s, pos, now, false);
	}
	return ev;
}

int
prefixcache_verify(struct prefixcache *pc, struct prefixcache_seq *s, uint32_t accepted,
		   uint64_t now)
{
	struct pc_model *m = &pc->m[s->model];
	unsigned int gi;

	if (s->verified + accepted > s->pos)
		return -EINVAL;
	s->verified += accepted;
	/* Rejected tokens are sent again (corrected), overwriting in place. */
	s->pos = s->verified;
	s->ntok = s->pos;
	for (gi = 0; gi < m->ngroups; gi++) {
		struct seq_group *sg = &s->g[gi];
		uint32_t ne;

		while (sg->caching && sg->prompt != NIL &&
		       (ne = next_end(&m->g[gi], pc->p.column, sg->cur_end)) != 0 &&
		       ne <= s->verified)
			record_column(pc, s, gi, sg->cur_end, ne, now);
	}
	return 0;
}

void
prefixcache_end(struct prefixcache *pc, struct prefixcache_seq *s, uint64_t now)
{
	struct pc_model *m = &pc->m[s->model];
	unsigned int gi;

	(void)now;
	fu_end(pc, s);
	/* The trailing tokens that fill no column go. */
	for (gi = 0; gi < m->ngroups; gi++)
		seq_release_group(pc, s, gi);
	if (s->prev != NULL)
		s->prev->next = s->next;
	else
		pc->live = s->next;
	if (s->next != NULL)
		s->next->prev = s->prev;
	free(s->tokens);
	free(s->tok_batch);
	free(s);
}

/* ---- Events from the shards ---------------------------------------------------------- */

void
prefixcache_token_lost(struct prefixcache *pc, uint16_t mi, uint16_t shard, uint16_t cache_id,
		       uint64_t prompt_id, uint32_t token_idx)
{
	int gid = gid_of_cache(pc, mi, cache_id);
	uint32_t pi, i;

	if (gid < 0)
		return;
	pi = prompt_find(pc, (uint8_t)gid, prompt_id);
	pc->st.lost_tokens++;
	if (pi == NIL || token_idx >= pc->pr[pi].end || token_idx < pc->pr[pi].offset)
		return; /* already gone */
	/* The first column holding the token, and all after it. */
	for (i = pc->pr[pi].first; i != NIL && pc->e[i].length <= token_idx; i = pc->e[i].p_next)
		;
	{
		const struct loss lost = {pi, token_idx, cache_id, (int16_t)shard};

		if (i != NIL)
			delete_subtree(pc, i, &lost, true);
		else
			prompt_truncate(pc, pi, token_idx, &lost, true);
	}
}

void
prefixcache_error(struct prefixcache *pc, uint16_t mi, uint16_t shard, uint16_t cache_id,
		  uint64_t prompt_id, uint32_t token_idx, uint16_t code)
{
	pc->st.shard_errors++;
	switch (code) {
	case PROTO_E_HOLE:
	case PROTO_E_LEFT_GROWTH:
	case PROTO_E_NO_SPACE:
	case PROTO_E_BAD_CACHE:
		if (prompt_id != 0) {
			pc->st.lost_tokens--; /* counted as an error, not a loss */
			prefixcache_token_lost(pc, mi, shard, cache_id, prompt_id, token_idx);
		}
		break;
	default:
		break;
	}
}

uint64_t
prefixcache_status(struct prefixcache *pc, uint16_t mi, uint16_t cache_id, uint64_t capacity)
{
	int gid = gid_of_cache(pc, mi, cache_id);
	struct pc_group *g;

	if (gid < 0)
		return 0;
	g = group_of(pc, (uint8_t)gid);
	if (capacity < g->capacity) {
		g->capacity = capacity;
		/* Live sequences' columns may go too: the shard cannot hold more. */
		while (g->stored > g->capacity && free_one(pc, (uint8_t)gid, false))
			;
	}
	return g->capacity;
}

void
prefixcache_shard_restart(struct prefixcache *pc, uint16_t mi)
{
	struct pc_model *m;
	uint32_t i;

	if (mi >= pc->p.num_models)
		return;
	m = &pc->m[mi];
	/* The shard holds nothing: drop every entry and prompt, sending nothing. */
	for (i = 0; i < pc->ecap; i++)
		if (pc->e[i].length != 0 && pc->e[i].gid / MAX_GROUPS == mi &&
		    pc->e[i].parent == NIL)
			delete_subtree(pc, i, NULL, false);
	for (i = 0; i < pc->prcap; i++)
		if (pc->pr[i].id != 0 && pc->pr[i].gid / MAX_GROUPS == mi) {
			struct prefixcache_seq *s = pc->pr[i].seq;

			if (s != NULL)
				stop_caching(pc, s, pc->pr[i].gid % MAX_GROUPS);
			if (pc->pr[i].id != 0)
				prompt_truncate(pc, i, pc->pr[i].offset, NULL, false);
		}
	/* A new control stream: batches count from 1 again. */
	m->batches_sent = 0;
	m->batch_g = 0;
}

size_t
prefixcache_expire(struct prefixcache *pc, uint64_t now, size_t max_visits)
{
	size_t removed = 0, v;
	uint64_t deleted0 = pc->st.deleted_tokens;

	if (pc->ecap == 0)
		return 0;
	for (v = 0; v < max_visits && v < pc->ecap; v++) {
		uint32_t i = pc->expire_cursor++ % pc->ecap;

		if (pc->e[i].length == 0 || !expired(pc, &pc->e[i], now))
			continue;
		if (subtree_pinned(pc, i))
			continue; /* a refill needs it; next sweep */
		removed += delete_subtree(pc, i, NULL, true);
	}
	pc->st.expired_entries += removed;
	pc->st.expired_tokens += pc->st.deleted_tokens - deleted0;
	return removed;
}

/* ---- Inspection -------------------------------------------------------------------- */

void
prefixcache_stats(const struct prefixcache *pc, struct prefixcache_stats *st)
{
	*st = pc->st;
	st->entries = pc->nentries;
}

uint64_t
prefixcache_stored(const struct prefixcache *pc, uint16_t mi, uint16_t cache_id)
{
	int gid = gid_of_cache(pc, mi, cache_id);

	return gid < 0 ? 0 : pc->m[mi].g[gid % MAX_GROUPS].stored;
}

size_t
prefixcache_orgs(const struct prefixcache *pc, struct prefixcache_org_stats *out, size_t max)
{
	size_t i;

	for (i = 0; i < pc->norg && i < max; i++)
		out[i] = pc->org[i].st;
	return pc->norg;
}

int
prefixcache_find(const struct prefixcache *pc, uint16_t mi, uint16_t cache_id, uint64_t isolation_id,
		 const uint32_t *tokens, uint32_t len, uint64_t now, struct prefixcache_entry_info *out)
{
	const struct pc_group *g;
	uint32_t b, o, i = NIL, end = 0, ne;
	uint64_t h = isolation_id;
	int gid = gid_of_cache(pc, mi, cache_id);

	if (gid < 0)
		return -EINVAL;
	g = &pc->m[mi].g[gid % MAX_GROUPS];
	/* The organization, without creating it. */
	for (o = pc->orgbucket[(uint32_t)mix64(isolation_id) & pc->orgmask]; o != NIL;
	     o = pc->org[o].hnext)
		if (pc->org[o].isolation_id == isolation_id)
			break;
	if (o == NIL)
		return -ENOENT;
	while (end < len && (ne = next_end(g, pc->p.column, end)) != 0 && ne <= len) {
		h = prefixcache_column_hash(h, tokens + end, ne - end);
		i = entry_find(pc, (uint8_t)gid, o, h);
		if (i == NIL || expired(pc, &pc->e[i], now))
			return -ENOENT;
		end = ne;
	}
	if (end != len || i == NIL)
		return -ENOENT;
	b = pc->e[i].parent;
	out->prompt_id = pc->pr[pc->e[i].prompt].id;
	out->start = pc->e[i].start;
	out->length = pc->e[i].length;
	out->evict_count = pc->e[i].evict_count;
	out->first_used = pc->e[i].first_used * TICK_NS;
	out->last_used = pc->e[i].last_used * TICK_NS;
	out->hash = pc->e[i].hash;
	out->parent_hash = b != NIL ? pc->e[b].hash : 0;
	out->hits = pc->e[i].hits;
	return 0;
}

size_t
prefixcache_memory(const struct prefixcache *pc)
{
	return (size_t)pc->ecap * sizeof(*pc->e) + (size_t)(pc->emask + 1) * sizeof(uint32_t) +
	       (size_t)pc->prcap * sizeof(*pc->pr) + (size_t)(pc->prmask + 1) * sizeof(uint32_t) +
	       (size_t)pc->orgcap * sizeof(*pc->org) + (size_t)(pc->orgmask + 1) * sizeof(uint32_t);
}
