/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * SLRU and admit (pc_policy.c): a count-min sketch of column sightings
 * (4 rows of 8-bit counters, halved now and then) says which columns were
 * seen before. SLRU keeps those protected (list 1) up to 100 -
 * probation_pct percent of capacity, the rest on probation (list 0, freed
 * first). admit also puts new columns on list 0, and a token of a column
 * never seen before takes only the room of other new ones (new_only).
 */
#include "pc_priv.h"

#include <stdlib.h>

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

	while ((ne = pc_next_end(g, pc->p.column, e)) != 0 && ne <= limit) {
		h = prefixcache_column_hash(h, t + e, ne - e);
		if (seen_end == e && sketch_get(pc, h) > 0)
			seen_end = ne;
		sketch_add(pc, h);
		e = ne;
	}
	return seen_end;
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

	for (n = 0; n < 64 && g->protected_tokens > limit && g->lru[1].tail != NIL; n++) {
		uint32_t i = g->lru[1].tail;
		struct pc_entry *e = &pc->e[i];

		pc_lru_unlink(pc, i);
		e->prot = 0;
		g->protected_tokens -= e->length - e->start;
		pc_lru_insert(pc, i, 0, false);
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

/* ---- The hooks ---- */

static int
sketch_init(struct prefixcache *pc)
{
	uint32_t n = pc_pow2_ghost(pc->p.ghost_entries ? pc->p.ghost_entries : 1u << 20);

	/* 4 rows of n 8-bit counters. */
	pc->ghost = calloc(n / 2, sizeof(uint64_t));
	if (pc->ghost == NULL)
		return -1;
	pc->ghost_mask = n - 1;
	return 0;
}

static void
sketch_fini(struct prefixcache *pc)
{
	free(pc->ghost);
	pc->ghost = NULL;
}

static uint8_t
slru_bucket(const struct prefixcache *pc, const struct pc_entry *e)
{
	(void)pc;
	return e->prot; /* probation, or new columns (0), freed first */
}

static void
slru_touch(struct prefixcache *pc, uint32_t i)
{
	if (!pc->e[i].prot)
		slru_protect(pc, i);
}

/* Every column of the prompt is sighted once more (the hit ones are hashed already). */
static void
slru_sight(struct prefixcache *pc, struct prefixcache_seq *s, const struct prefixcache_request *req,
	   const uint32_t *np, uint32_t limit)
{
	const struct pc_model *m = &pc->m[s->model];
	unsigned int gi;
	uint32_t k;

	for (gi = 0; gi < m->ngroups; gi++) {
		uint64_t h = s->root;
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

/*
 * A hit that covers an earlier prompt to its last column is a conversation
 * going on; what it adds is likely wanted by the next turn.
 */
static void
slru_hit(struct prefixcache *pc, struct prefixcache_seq *s, const uint32_t *np)
{
	const struct pc_entry *le;

	if (np[0] == 0)
		return;
	le = &pc->e[pc->path[0][np[0] - 1]];
	s->resumes = le->length + pc->p.column > pc->pr[le->prompt].hi;
}

/* Seen before (this lookup's sighting aside): protected at once. */
static void
slru_recorded(struct prefixcache *pc, struct prefixcache_seq *s, uint32_t i, uint64_t h,
	      uint32_t end)
{
	if (s->resumes || sketch_get(pc, h) >= (end <= s->sketched ? 2 : 1))
		slru_protect(pc, i);
}

/* admit: a token of a column not seen before takes only the room of new ones. */
static bool
admit_new_only(const struct prefixcache *pc, const struct prefixcache_seq *s, uint32_t pos)
{
	(void)pc;
	return !s->resumes && pos >= s->seen_end;
}

const struct pc_policy_ops pc_policy_slru = {
	.name = "slru", .init = sketch_init, .fini = sketch_fini, .bucket = slru_bucket,
	.before_free = slru_demote, .touch = slru_touch, .sight = slru_sight, .hit = slru_hit,
	.recorded = slru_recorded,
};

const struct pc_policy_ops pc_policy_admit = {
	.name = "admit", .init = sketch_init, .fini = sketch_fini, .bucket = slru_bucket,
	.touch = slru_touch, .sight = slru_sight, .hit = slru_hit, .recorded = slru_recorded,
	.new_only = admit_new_only,
};
