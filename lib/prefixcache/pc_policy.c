/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Deletion policies (pc_priv.h, struct pc_policy_ops). Every policy keeps
 * each group's leaves (only leaves can be freed: a shard shrinks a prompt
 * from the right) in up to NBUCKETS lists in last-use order, and frees from
 * the least recent end of the first list that has a leaf it may free
 * (pc_free_one). A policy says which list a leaf is on, and may watch
 * lookups, hits, recorded columns and ended sequences to decide it.
 *
 * This file: the lists, and the policies that need nothing else (lru: one
 * list; lfu: lists by hits; priority: hinted columns last). SLRU and admit
 * are pc_policy_slru.c, followup pc_policy_followup.c. A new policy is a
 * file with its ops and a line in pc_policies.
 */
#include "pc_priv.h"

void
pc_lru_unlink(struct prefixcache *pc, uint32_t i)
{
	struct pc_entry *e = &pc->e[i];
	struct pc_group *g = &pc->m[e->gid / MAX_GROUPS].g[e->gid % MAX_GROUPS];

	if (e->bucket == NO_BUCKET)
		return;
	ilist_unlink(&g->lru[e->bucket], ILIST_LINKS(pc->e, lru), i);
	e->bucket = NO_BUCKET;
}

/* Link leaf @i into @bucket just before @x (on the recent side); NIL: at the old end. */
static void
lru_link_before(struct prefixcache *pc, uint32_t i, uint8_t bucket, uint32_t x)
{
	struct pc_entry *e = &pc->e[i];
	struct pc_group *g = &pc->m[e->gid / MAX_GROUPS].g[e->gid % MAX_GROUPS];

	e->bucket = bucket;
	ilist_insert_before(&g->lru[bucket], ILIST_LINKS(pc->e, lru), i, x);
}

/* Put leaf @i at the most recent end of its bucket (or the least recent). */
void
pc_lru_insert(struct prefixcache *pc, uint32_t i, uint8_t bucket, bool oldest)
{
	const struct pc_entry *e = &pc->e[i];

	lru_link_before(pc, i, bucket,
			oldest ? NIL : pc->m[e->gid / MAX_GROUPS].g[e->gid % MAX_GROUPS].lru[bucket].head);
}

/* A leaf just used, or whose bucket changed: to the recent end of its policy's bucket. */
void
pc_lru_requeue(struct prefixcache *pc, uint32_t i)
{
	if (pc->e[i].bucket == NO_BUCKET)
		return;
	pc_lru_unlink(pc, i);
	pc_lru_insert(pc, i, pc_bucket(pc, &pc->e[i]), false);
}

/*
 * Put leaf @i into its bucket by last use: a column whose last child just
 * went becomes a leaf with its own last use, which may be recent (a hot
 * prefix whose one-off continuations were freed) or old. Lists are kept in
 * last-use order (newest at the head): search from both ends, at most 32
 * steps each; past that, the place the head-side search reached is close.
 */
void
pc_lru_insert_by_use(struct prefixcache *pc, uint32_t i, uint8_t bucket)
{
	const struct pc_entry *e = &pc->e[i];
	const struct pc_group *g = &pc->m[e->gid / MAX_GROUPS].g[e->gid % MAX_GROUPS];
	uint32_t t = e->last_used, x = g->lru[bucket].head, y = g->lru[bucket].tail;
	int n;

	if (y != NIL && t <= pc->e[y].last_used) {
		x = NIL; /* the oldest: the common case */
	} else {
		/* x: the first entry from the head not newer than @i. */
		for (n = 0; n < 32 && x != NIL && pc->e[x].last_used > t; n++)
			x = pc->e[x].lru.next;
		if (x != NIL && pc->e[x].last_used > t) {
			/* Not within 32: from the tail (the head is newer, so y stops by it). */
			for (n = 0; n < 32 && pc->e[y].last_used < t; n++)
				y = pc->e[y].lru.prev;
			if (pc->e[y].last_used >= t)
				x = pc->e[y].lru.next;
		}
	}
	lru_link_before(pc, i, bucket, x);
}

/* ---- The policies of this file ---- */

static uint8_t
lfu_bucket(const struct prefixcache *pc, const struct pc_entry *e)
{
	(void)pc;
	return (uint8_t)bit_length(e->hits, NBUCKETS - 1);
}

static uint8_t
priority_bucket(const struct prefixcache *pc, const struct pc_entry *e)
{
	(void)pc;
	return e->prio ? 1 : 0;
}

static const struct pc_policy_ops lru_ops = {.name = "lru"};
static const struct pc_policy_ops lfu_ops = {.name = "lfu", .bucket = lfu_bucket};
static const struct pc_policy_ops priority_ops = {.name = "priority", .bucket = priority_bucket};

const struct pc_policy_ops *const pc_policies[] = {
	[PREFIXCACHE_LRU] = &lru_ops,
	[PREFIXCACHE_LFU] = &lfu_ops,
	[PREFIXCACHE_PRIORITY] = &priority_ops,
	[PREFIXCACHE_SLRU] = &pc_policy_slru,
	[PREFIXCACHE_ADMIT] = &pc_policy_admit,
	[PREFIXCACHE_FOLLOWUP] = &pc_policy_followup,
};
