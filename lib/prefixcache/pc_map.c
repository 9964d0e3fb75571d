/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The map (pc_priv.h). Entries, one per cached column of one cache group,
 * live in a pool and are found through one chained hash table keyed by
 * (group, organization, chained hash). Each entry knows its parent and
 * children (deleting a column takes what hangs on it), the prompt that holds
 * its tokens (and that prompt's other entries, in order), and its place in
 * the policy's lists of leaves. Prompts: each sequence evicts into a new
 * prompt per cache group, starting at its hit length; the driver tracks
 * each prompt's range [offset, end) as the shards hold it, which is what
 * capacity counts. Organizations carry their TTLs and counters.
 */
#include "pc_priv.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

/* ---- Small helpers -------------------------------------------------------- */

uint32_t
pc_pow2_ghost(uint32_t n)
{
	uint32_t r = 1024;

	while (r < n && r < (1u << 30))
		r <<= 1;
	return r;
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

int
pc_grow(void **p, uint32_t *cap, size_t elem, uint32_t want)
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

/* ---- Organizations -------------------------------------------------------- */

uint32_t
pc_org_get(struct prefixcache *pc, uint64_t iso)
{
	uint32_t b = (uint32_t)mix64(iso) & pc->orgmask, i;

	for (i = pc->orgbucket[b]; i != NIL; i = pc->org[i].hnext)
		if (pc->org[i].isolation_id == iso)
			return i;
	if (pc->norg == pc->orgcap &&
	    pc_grow((void **)&pc->org, &pc->orgcap, sizeof(*pc->org), pc->norg + 1) != 0)
		return NIL;
	i = pc->norg++;
	memset(&pc->org[i], 0, sizeof(pc->org[i]));
	pc->org[i].isolation_id = iso;
	pc->org[i].st.isolation_id = iso;
	pc->org[i].share = pc->p.dram_share_default;
	pc->org[i].cap = pc->p.dram_cap_default;
	pc->org[i].l2_share = pc->p.l2_share_default;
	pc->org[i].l2_cap = pc->p.l2_cap_default;
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
	uint32_t o = pc_org_get(pc, isolation_id);

	if (o == NIL)
		return -ENOMEM;
	pc->org[o].ttl_last = ttl_last_ns;
	pc->org[o].ttl_first = ttl_first_ns;
	return 0;
}

/* An organization's share and cap of DRAM, or of the second tier (@p l2). */
static int
org_share(struct prefixcache *pc, uint64_t isolation_id, double share, double cap, bool l2)
{
	uint32_t o;

	if (cap == 0)
		cap = 1;
	if (!(share >= 0 && share <= cap && cap <= 1))
		return -EINVAL;
	if ((o = pc_org_get(pc, isolation_id)) == NIL)
		return -ENOMEM;
	*(l2 ? &pc->org[o].l2_share : &pc->org[o].share) = share;
	*(l2 ? &pc->org[o].l2_cap : &pc->org[o].cap) = cap;
	if (share > 0 || cap < 1)
		*(l2 ? &pc->l2_shares_on : &pc->shares_on) = true;
	return 0;
}

int
prefixcache_org_dram_share(struct prefixcache *pc, uint64_t isolation_id, double share, double cap)
{
	return org_share(pc, isolation_id, share, cap, false);
}

int
prefixcache_org_l2_share(struct prefixcache *pc, uint64_t isolation_id, double share, double cap)
{
	return org_share(pc, isolation_id, share, cap, true);
}

/* ---- Entries ---------------------------------------------------------------- */

uint32_t
pc_entry_find(const struct prefixcache *pc, uint8_t gid, uint32_t org, uint64_t hash)
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

/* The pool @n records long, the new ones free (the lowest first: taken in address order). */
static int
grow_to(struct prefixcache *pc, uint32_t n)
{
	struct pc_entry *q = realloc(pc->e, sizeof(*pc->e) * (size_t)n);
	uint32_t k;

	if (q == NULL)
		return -ENOMEM;
	pc->e = q;
	for (k = n; k-- > pc->ecap;) {
		pc->e[k].length = 0;
		pc->e[k].gen = 0;
		pc->e[k].hnext = pc->efree;
		pc->efree = k;
	}
	pc->ecap = n;
	return 0;
}

int
pc_entry_reserve(struct prefixcache *pc, uint32_t n)
{
	uint32_t nb = pc->emask + 1;

	/* Two buckets an entry, as pc_entry_alloc() keeps them. */
	while (nb < 2 * n)
		nb *= 2;
	if (nb > pc->emask + 1 && entries_rehash(pc, nb) != 0)
		return -ENOMEM;
	/* Written whole by grow_to(): every page is mapped here, not at a column's recording. */
	return n > pc->ecap ? grow_to(pc, n) : 0;
}

uint32_t
pc_entry_alloc(struct prefixcache *pc)
{
	uint32_t i;

	/* 1.25x: the pool is the driver's largest structure. */
	if (pc->efree == NIL && grow_to(pc, pc->ecap + pc->ecap / 4 + 1024) != 0)
		return NIL;
	i = pc->efree;
	pc->efree = pc->e[i].hnext;
	if (i >= pc->ehigh)
		pc->ehigh = i + 1;
	/* The next one's record, for writing: a warm driver's free list goes
	 * all over its pool, and its next link is read at the next alloc. */
	if (pc->efree != NIL)
		__builtin_prefetch(&pc->e[pc->efree], 1);
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

void
pc_entry_hash_unlink(struct prefixcache *pc, uint32_t i)
{
	struct pc_entry *e = &pc->e[i];
	uint32_t *pp = &pc->ebucket[ebucket_of(pc, e->gid, e->org, e->hash)];

	while (*pp != i)
		pp = &pc->e[*pp].hnext;
	*pp = e->hnext;
}

void
pc_entry_release(struct prefixcache *pc, uint32_t i)
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

uint32_t
pc_prompt_find(const struct prefixcache *pc, uint8_t gid, uint64_t id)
{
	uint32_t i;

	for (i = pc->prbucket[prompt_bucket(pc, gid, id)]; i != NIL; i = pc->pr[i].hnext)
		if (pc->pr[i].id == id && pc->pr[i].gid == gid)
			return i;
	return NIL;
}

uint32_t
pc_prompt_new(struct prefixcache *pc, uint8_t gid, uint64_t id, uint32_t offset,
	   struct prefixcache_seq *s)
{
	uint32_t i, b;

	if (pc->prfree == NIL) {
		uint32_t old = pc->prcap, k, nb;

		if (pc_grow((void **)&pc->pr, &pc->prcap, sizeof(*pc->pr), old + 1) != 0)
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
				       .last = NIL, .seq = s, .tmp = NIL, .org = s->org, .gid = gid};
	b = prompt_bucket(pc, gid, id);
	pc->pr[i].hnext = pc->prbucket[b];
	pc->prbucket[b] = i;
	return i;
}

void
pc_prompt_release(struct prefixcache *pc, uint32_t i)
{
	uint32_t *pp = &pc->prbucket[prompt_bucket(pc, pc->pr[i].gid, pc->pr[i].id)];

	while (*pp != i)
		pp = &pc->pr[*pp].hnext;
	*pp = pc->pr[i].hnext;
	pc->pr[i].id = 0;
	pc->pr[i].hnext = pc->prfree;
	pc->prfree = i;
}

/* The global group id of cache @cache_id of model @mi, or -1 if none. */
int
pc_gid_of_cache(const struct prefixcache *pc, uint16_t mi, uint16_t cache_id)
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

