/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Deleting (pc_priv.h): batches flushed before the DELETEs that wait for
 * them, DELETE records for a prompt's suffix, a column and everything that
 * hangs on it freed (a shard shrinks a prompt only from the right), and one
 * column freed for room by the policy's lists.
 */
#include "pc_priv.h"

/* ---- Batches and messages ------------------------------------------------------ */

/*
 * The columns of @up (@nup of them) that the batch @batch (@g rows of
 * @num_caches entries) has a token of, in @up's order, into @out; their
 * count. A batch is a few runs of consecutive tokens of one prompt per
 * cache (the sequences it took tokens from), and a promotion names every
 * column of a prompt's hit (a hundred and more): each column is compared
 * with the runs, not with every entry (that was most of the driver's time
 * with the second tier, pc_flush_model a fifth of it). @runs has room for
 * g * num_caches.
 */
uint32_t
pc_up_select(const struct proto_evict_entry *batch, uint32_t g, uint16_t num_caches,
	     const struct prefixcache_l2col *up, uint32_t nup, struct pc_run *runs,
	     struct prefixcache_l2col *out)
{
	uint32_t nr = 0, t, k, r, n = 0;
	uint16_t c;

	/* Each cache's runs: consecutive rows of one prompt, each token the
	 * last one's next. */
	for (c = 0; c < num_caches; c++)
		for (t = 0; t < g; t++) {
			const struct proto_evict_entry *e = &batch[(size_t)t * num_caches + c];

			if (nr > 0 && runs[nr - 1].cache_id == c && runs[nr - 1].prompt_id == e->prompt_id &&
			    runs[nr - 1].hi + 1 == e->token_idx) {
				runs[nr - 1].hi = e->token_idx;
				continue;
			}
			runs[nr++] = (struct pc_run){.prompt_id = e->prompt_id, .lo = e->token_idx,
						     .hi = e->token_idx, .cache_id = c};
		}
	/* A column is read when a run of its cache and prompt meets
	 * [start, start + tokens): then a token of the run is in it. */
	for (k = 0; k < nup; k++) {
		const struct prefixcache_l2col *col = &up[k];

		for (r = 0; r < nr; r++)
			if (runs[r].cache_id == col->cache_id && runs[r].prompt_id == col->prompt_id &&
			    runs[r].hi >= col->start &&
			    (uint64_t)runs[r].lo < (uint64_t)col->start + col->tokens) {
				out[n++] = *col;
				break;
			}
	}
	return n;
}

void
pc_flush_model(struct prefixcache *pc, uint16_t mi)
{
	struct pc_model *m = &pc->m[mi];

	if (m->batch_g == 0)
		return;
	m->batches_sent++;
	if (m->nup > 0) { /* columns coming up from L2: their bytes are the shards' (pc_l2.c) */
		uint32_t n = 0;

		/* Only the columns this batch has tokens of. */
		if (pc_grow((void **)&pc->upsel, &pc->upselcap, sizeof(*pc->upsel), m->nup) == 0 &&
		    pc_grow((void **)&pc->upruns, &pc->uprunscap, sizeof(*pc->upruns),
			    m->batch_g * m->p.num_caches) == 0)
			n = pc_up_select(m->batch, m->batch_g, m->p.num_caches, m->up, m->nup, pc->upruns,
					 pc->upsel);
		pc->sink.l2_up(pc->sink.arg, mi, m->batches_sent, m->p.num_caches, m->batch_g,
			       m->batch, pc->upsel, n);
	} else if (pc->sink.evict != NULL)
		pc->sink.evict(pc->sink.arg, mi, m->batches_sent, m->p.num_caches, m->batch_g,
			       m->batch);
	m->batch_g = 0;
}

void
prefixcache_flush(struct prefixcache *pc)
{
	uint16_t mi;

	for (mi = 0; mi < pc->p.num_models; mi++)
		pc_flush_model(pc, mi);
}

/*
 * Delete [from, to) of prompt @pi from every cache of its group, on every
 * shard of its model. A shard that lost a token of it or refused one
 * already dropped everything from there on; a version 2 DELETE removes from
 * @from wherever the prompt now ends and clears the shard's loss mark
 * (PROTOCOL.md section 4), so the same DELETE is right for every shard.
 * (Version 1 needed the lossy shard's own shorter DELETE.)
 * The DELETE waits for the prompt's latest batch, which must have been sent
 * (a DELETE waiting for a batch that waits for space would deadlock the
 * shard).
 */
static void
emit_delete(struct prefixcache *pc, uint32_t pi, uint32_t from, uint32_t to)
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
		pc_flush_model(pc, mi);
	if (pc->sink.del == NULL)
		return;
	for (c = 0; c < g->ncaches; c++) {
		struct proto_delete d = {.prompt_id = p->id, .evict_count = p->last_batch,
					 .start_token_idx = from, .end_token_idx = to - 1,
					 .cache_id = g->cache[c]};

		pc->sink.del(pc->sink.arg, mi, all, &d);
	}
}

/* ---- Deleting columns ------------------------------------------------------------ */

/*
 * Shrink prompt @pi to @x, and further over the columns no entry references
 * (stored twice, or a live sequence's partial column), emitting the DELETE.
 * A prompt left empty and not live is forgotten.
 */
void
pc_prompt_truncate(struct prefixcache *pc, uint32_t pi, uint32_t x, bool send)
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
			emit_delete(pc, pi, keep, p->end);
		g->stored -= p->end - keep;
		pc->org[p->org].stored[p->gid] -= p->end - keep;
		pc->stored_total -= p->end - keep;
		pc->st.deleted_tokens += p->end - keep;
		p->end = keep;
	}
	if (p->end == p->offset && p->seq == NULL && p->first == NIL)
		pc_prompt_release(pc, pi);
}

bool
pc_subtree_pinned(struct prefixcache *pc, uint32_t root)
{
	uint32_t n = 0;

	pc->stack[n++] = root;
	while (n > 0) {
		uint32_t i = pc->stack[--n], c;

		if (pc->e[i].pins > 0)
			return true;
		for (c = pc->e[i].first_child; c != NIL; c = pc->e[c].next_sib) {
			if (n == pc->stackcap &&
			    pc_grow((void **)&pc->stack, &pc->stackcap, sizeof(uint32_t), n + 1) != 0)
				return true;
			pc->stack[n++] = c;
		}
	}
	return false;
}

/*
 * Remove entry @root and everything that hangs on it; every prompt involved
 * is truncated at its first removed column. Returns entries removed.
 * @send: emit DELETEs.
 */
uint32_t
pc_delete_subtree(struct prefixcache *pc, uint32_t root, bool send)
{
	uint32_t n = 0, removed = 0, k, parent = pc->e[root].parent;

	/* Room for every entry and prompt at once: no failure half-way. */
	if (pc_grow((void **)&pc->stack, &pc->stackcap, sizeof(uint32_t), pc->nentries + 1) != 0 ||
	    pc_grow((void **)&pc->touched, &pc->touchedcap, sizeof(uint32_t), pc->prcap + 1) != 0)
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
		pc_entry_hash_unlink(pc, i);
		pc_lru_unlink(pc, i);
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
			pc_lru_insert_by_use(pc, parent, pc_bucket(pc, pe));
	}
	/* Free the records (walk again: the stack was consumed). */
	n = 0;
	pc->stack[n++] = root;
	while (n > 0) {
		uint32_t i = pc->stack[--n], c;

		for (c = pc->e[i].first_child; c != NIL; c = pc->e[c].next_sib)
			pc->stack[n++] = c;
		pc_entry_release(pc, i);
	}
	for (k = 0; k < pc->ntouched; k++) {
		uint32_t pi = pc->touched[k], x = pc->pr[pi].tmp;

		pc->pr[pi].tmp = NIL;
		pc_prompt_truncate(pc, pi, x, send);
	}
	return removed;
}

/*
 * Whether leaf @p e may go, in round @p round, to make room for
 * organization @p for_org (NIL: for the shard's capacity, anyone's) when
 * DRAM shares are on: one over its cap makes room from its own columns
 * only; else first (round 0) from those of organizations above their share
 * (itself too, when it is), then (round 1) from its own. An organization
 * at or below its share is not deleted from for another's sake.
 */
static inline bool
share_allows(const struct prefixcache *pc, const struct pc_group *g, uint8_t gid,
	     const struct pc_entry *e, uint32_t for_org, bool over_cap, int round)
{
	if (for_org == NIL)
		return true;
	if (over_cap || round == 1)
		return e->org == for_org;
	return pc_org_over_share(pc, e->org, g, gid);
}

/*
 * Free at least one column of group @gid to make room for @p for_org's
 * token (NIL: to fit the capacity): the policy's leaf, skipping pinned
 * ones, ones in the batch being built, and (unless nothing else is left)
 * live sequences' columns; with @first_list_only, only from the list freed
 * first (admit: new columns). With DRAM shares, only a leaf share_allows().
 * Returns false when nothing can go.
 */
bool
pc_free_one(struct prefixcache *pc, uint8_t gid, bool first_list_only, uint32_t for_org)
{
	struct pc_group *g = group_of(pc, gid);
	const struct pc_model *m = &pc->m[gid / MAX_GROUPS];
	/* With shares, the leaves of organizations kept are passed over: look further. */
	uint32_t visits = pc->shares_on && for_org != NIL ? 4096 : 256;
	bool over_cap = pc->shares_on && for_org != NIL &&
			pc->org[for_org].stored[gid] + 1 > pc_org_cap_tokens(pc, for_org, g);
	int rounds = pc->shares_on && for_org != NIL && !over_cap ? 2 : 1, round, pass, b;

	if (pc->pol->before_free != NULL)
		pc->pol->before_free(pc, g);
	for (round = 0; round < rounds; round++) {
		for (pass = 0; pass < 2; pass++) {
			for (b = 0; b < (first_list_only ? 1 : NBUCKETS); b++) {
				uint32_t i, seen = 0;

				/* At most 256 leaves per bucket and pass (4,096 with shares). */
				for (i = g->lru[b].tail; i != NIL && seen < visits;
				     i = pc->e[i].lru.prev, seen++) {
					struct pc_entry *e = &pc->e[i];

					if (e->pins > 0 || e->evict_count >= current_batch(m))
						continue;
					if (pass == 0 && pc->pr[e->prompt].seq != NULL)
						continue;
					if (pc->shares_on &&
					    !share_allows(pc, g, gid, e, for_org, over_cap, round))
						continue;
					if (pc->shares_on && for_org != NIL && e->org != for_org)
						pc->org[e->org].st.dram_yielded++;
					pc_l2_demote(pc, i); /* down to L2 first, if it admits it */
					pc_delete_subtree(pc, i, true);
					pc->st.policy_deletes++;
					return true;
				}
			}
		}
	}
	return false;
}
