/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * followup (pc_policy.c): which sequences get followed up, by class of
 * answer length. When a sequence ends, its columns are tagged with its
 * class (by column hash, in a table of tags); a later lookup or store of a
 * tagged column counts the class as followed up. A class seldom followed up
 * (its reused share under followup_pct) puts its columns on the cold list
 * (list 0, freed first); a hit warms a column again.
 */
#include "pc_priv.h"

#include <stdlib.h>

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

	cls = bit_length(out, FU_CLASSES - 1);
	/* Integer form of (reused + 1) / (stored + 2) < pct / 100: an unknown class is warm. */
	cold = (pc->fu_reused[cls] + 1) * 100 < (pc->fu_stored[cls] + 2) * pc->p.followup_pct;
	for (gi = 0; gi < m->ngroups; gi++) {
		uint8_t gid = (uint8_t)(s->model * MAX_GROUPS + gi);
		uint32_t pi = pc_prompt_find(pc, gid, s->prompt_id), i;

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
			pc_lru_requeue(pc, i);
		}
	}
	/* Keep the shares current over a long life: halve a class past 2^40 tokens. */
	if (pc->fu_stored[cls] > (1ull << 40)) {
		pc->fu_stored[cls] >>= 1;
		pc->fu_reused[cls] >>= 1;
	}
}

/* ---- The hooks ---- */

static int
fu_init(struct prefixcache *pc)
{
	uint32_t n = pc_pow2_ghost(pc->p.ghost_entries ? pc->p.ghost_entries : 1u << 20);

	pc->tag = calloc(n, sizeof(uint32_t));
	if (pc->tag == NULL)
		return -1;
	pc->tag_mask = n - 1;
	return 0;
}

static void
fu_fini(struct prefixcache *pc)
{
	free(pc->tag);
	pc->tag = NULL;
}

static uint8_t
fu_bucket(const struct prefixcache *pc, const struct pc_entry *e)
{
	(void)pc;
	return !e->cold; /* cold columns (0) freed first */
}

static void
fu_touch(struct prefixcache *pc, uint32_t i)
{
	pc->e[i].cold = 0;
}

/* The hit columns are sighted. */
static void
fu_lookup(struct prefixcache *pc, struct prefixcache_seq *s, const struct prefixcache_request *req,
	  const uint32_t *np, uint32_t limit)
{
	const struct pc_model *m = &pc->m[s->model];
	unsigned int gi;
	uint32_t k;

	(void)req;
	(void)limit;
	for (gi = 0; gi < m->ngroups; gi++)
		for (k = 0; k < np[gi]; k++) {
			const struct pc_entry *e = &pc->e[pc->path[gi][k]];

			fu_sight(pc, e->gid, e->hash, e->length - e->start);
		}
}

const struct pc_policy_ops pc_policy_followup = {
	.name = "followup", .init = fu_init, .fini = fu_fini, .bucket = fu_bucket,
	.touch = fu_touch, .sight = fu_lookup, .column_seen = fu_sight, .end = fu_end,
};
