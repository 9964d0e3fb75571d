/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * lib/kvstore, the owner's deletions (kvstore_priv.h): a prompt cut back
 * (DELETE, a token evicted again over a stored one), memory retired until no
 * refill in flight can still read it and then reclaimed, a batch given up
 * (TOKEN_LOST), DELETE itself and reset. Calls from the write path
 * (kvstore.c) come once per batch or per cut, not per token.
 */
#include "kvstore_priv.h"

/* ---- Reclamation ----------------------------------------------------------- */

/* Oldest ticket among refills in flight, or UINT64_MAX. */
static uint64_t
oldest_ticket(const struct kvstore *s)
{
	uint64_t m = UINT64_MAX;
	unsigned int i;

	for (i = 0; i < s->p.max_refills; i++) {
		uint64_t t = __atomic_load_n(&s->refills[i].ticket, __ATOMIC_SEQ_CST);

		if (t != 0 && t < m)
			m = t;
	}
	return m;
}

void
kvstore_room(const struct kvstore *s, struct kvstore_room *r)
{
	unsigned int ci;

	r->gen = s->room_gen;
	r->oldest_reader = 0;
	/* Retired slots wait for the refills that may read them: one ending
	 * may let them be reused. */
	for (ci = 0; ci < s->p.num_caches; ci++)
		if (s->cache[ci].limbo_n > 0) {
			r->oldest_reader = oldest_ticket(s);
			break;
		}
}

static void
limbo_free(struct kv_cache *c, const struct kv_limbo *l)
{
	uint32_t index = l->object & ((1u << 30) - 1);

	switch (l->object >> 30) {
	case L_SLOT:
		c->limbo_slots--;
		kv_slot_free(c, index);
		break;
	case L_PAGE:
		kv_page_release(c, index);
		break;
	default:
		kv_prompt_release(c, index);
		break;
	}
}

/* Reuse what no refill in flight can still reference. */
void
kv_reclaim(struct kvstore *s)
{
	uint64_t oldest = 0, now = __atomic_load_n(&s->epoch, __ATOMIC_RELAXED);
	bool scanned = false;
	unsigned int ci;

	for (ci = 0; ci < s->p.num_caches; ci++) {
		struct kv_cache *c = &s->cache[ci];

		while (c->limbo_n > 0) {
			struct kv_limbo *l = &c->limbo[c->limbo_head];
			/* The full tag, from its low bits and the epoch now. */
			uint64_t tag = now - (uint32_t)((uint32_t)now - l->tag);

			/* The refills in flight, looked at once per call. */
			if (!scanned) {
				oldest = oldest_ticket(s);
				scanned = true;
			}
			if (tag >= oldest)
				break;
			limbo_free(c, l);
			s->room_gen++;
			if (++c->limbo_head == c->limbo_cap)
				c->limbo_head = 0;
			c->limbo_n--;
		}
	}
}

/*
 * Retire an object the owner has just unlinked. Objects retired before the
 * next kv_retire_close() share its tag; the reader cannot reach them once it
 * starts later (see kvstore_refill_begin()).
 */
void
kv_retire(struct kvstore *s, uint16_t cache, enum limbo_type type, uint32_t index)
{
	struct kv_cache *c = &s->cache[cache];
	struct kv_limbo *l = &c->limbo[c->limbo_tail];

	l->tag = (uint32_t)__atomic_load_n(&s->epoch, __ATOMIC_RELAXED);
	l->object = (uint32_t)type << 30 | index;
	if (++c->limbo_tail == c->limbo_cap)
		c->limbo_tail = 0;
	c->limbo_n++;
	if (type == L_SLOT)
		c->limbo_slots++;
}

/*
 * End a group of retirements: a refill that begins after this sees the
 * unlinked state; one that began before holds a ticket <= the group's tag.
 */
void
kv_retire_close(struct kvstore *s)
{
	__atomic_fetch_add(&s->epoch, 1, __ATOMIC_SEQ_CST);
	/* With no refill in flight, nothing waits: reuse at once. */
	kv_reclaim(s);
}

void
kv_page_release(struct kv_cache *c, uint32_t pg)
{
	st_rlx(&c->pages[pg].next, c->page_free);
	c->page_free = pg;
}

void
kv_prompt_release(struct kv_cache *c, uint32_t pi)
{
	c->prompts[pi].free_next = c->prompt_free;
	c->prompt_free = pi;
}

/* ---- Cutting a prompt back ------------------------------------------------- */

/*
 * Remove relative indices [rel, n_claim) of prompt @pi. Published tokens'
 * slots are retired; tokens still in open batches are marked dead there and
 * their slots go back when their batch completes. A prompt left empty is
 * forgotten, unless @lost: a loss marks it lost from there instead, and
 * keeps it known even when empty. Reports the cut through @fn when given.
 */
uint32_t
kv_prompt_truncate(struct kvstore *s, uint16_t ci, uint32_t pi, uint32_t rel, bool lost,
		   kvstore_lost_fn fn, void *arg)
{
	struct kv_cache *c = &s->cache[ci];
	struct kv_prompt *p = &c->prompts[pi];
	uint32_t n_pub = p->n_pub, n_claim = p->n_claim, r, removed = n_claim - rel;
	struct kv_page *pg;
	uint64_t b;

	if (lost && p->offset + rel < p->lost_at)
		p->lost_at = p->offset + rel;
	if (rel > n_claim || (rel == n_claim && (rel != 0 || lost)))
		return 0;
	/* Unpublish first so that no refill begun from now on reaches them. */
	if (n_pub > rel)
		__atomic_store_n(&p->n_pub, rel, __ATOMIC_SEQ_CST);
	p->n_claim = rel;
	c->stored -= removed;

	/* Published tokens: retire their slots. */
	pg = rel < n_pub ? kv_page_of(c, p, rel) : NULL;
	for (r = rel; r < n_pub && pg != NULL; r++) {
		kv_retire(s, ci, L_SLOT, pg->slot[r % KVSTORE_PAGE_ENTRIES]);
		if ((r + 1) % KVSTORE_PAGE_ENTRIES == 0)
			pg = pg->next == NIL ? NULL : &c->pages[pg->next];
	}
	/*
	 * Tokens in open batches (growth past n_pub, and overwrites): dead. Only
	 * batches up to the prompt's last are looked at: most DELETEs are of
	 * prompts no open batch holds (scanning every open batch for each took
	 * a fifth of the machine's time in `make demo`).
	 */
	if (s->oldest_open != 0 && p->last_batch >= s->oldest_open) {
		for (b = s->oldest_open; b < s->next_batch && b <= p->last_batch; b++) {
			struct kv_batch *bt = &s->batches[b % s->p.max_open_batches];
			uint32_t i, n = (uint32_t)bt->g * bt->nc;

			if (bt->no != b || bt->nc <= ci)
				continue;
			for (i = ci; i < n; i += bt->nc) {
				struct kv_entry *e = &bt->e[i];

				if (e->prompt == pi && e->kind != E_DISCARD &&
				    e->token - p->offset >= rel)
					e->flags |= EF_DEAD;
			}
		}
	}
	if (fn != NULL)
		fn(arg, ci, p->id, p->offset + rel, n_claim - rel);

	/* Pages wholly past the new end go; a cut tail page is marked dirty. */
	while (p->npages > (rel + KVSTORE_PAGE_ENTRIES - 1) / KVSTORE_PAGE_ENTRIES) {
		uint32_t t = p->tail;

		p->tail = c->pages[t].prev;
		if (p->tail == NIL)
			st_rel(&p->head, NIL);
		else
			st_rel(&c->pages[p->tail].next, NIL);
		p->npages--;
		kv_retire(s, ci, L_PAGE, t);
	}
	if (p->tail != NIL && rel % KVSTORE_PAGE_ENTRIES != 0)
		c->pages[p->tail].dirty = 1;
	if (rel == 0 && !lost) {
		uint64_t id = p->id;

		__atomic_store_n(&p->id, 0, __ATOMIC_SEQ_CST);
		kv_hash_remove(c, id);
		c->nprompts--;
		kv_retire(s, ci, L_PROMPT, pi);
	}
	kv_retire_close(s);
	return removed;
}

/* ---- Lost batches ---------------------------------------------------------- */

struct lose_ctx {
	kvstore_lost_fn fn;
	void *arg;
	int count;
};

static void
count_lost(void *arg, uint16_t cache_id, uint64_t prompt_id, uint32_t first, uint32_t count)
{
	struct lose_ctx *l = arg;

	l->count += (int)count;
	if (l->fn != NULL && count > 0)
		l->fn(l->arg, cache_id, prompt_id, first, count);
}

int
kvstore_batch_lose(struct kvstore *s, uint64_t batch_no, kvstore_lost_fn fn, void *arg)
{
	struct kv_batch *b;
	struct lose_ctx l = {fn, arg, 0};
	uint32_t i, n;

	if (batch_no == 0 || batch_no != s->oldest_open || (b = kv_batch_get(s, batch_no)) == NULL)
		return -EINVAL;
	s->room_gen++;
	n = (uint32_t)b->g * b->nc;
	for (i = 0; i < n; i++) {
		struct kv_entry *e = &b->e[i];
		uint16_t ci = (uint16_t)(i % b->nc);
		struct kv_prompt *p;

		if ((e->flags & (EF_COMPLETE | EF_DEAD)) || e->kind == E_DISCARD)
			continue;
		/* A token missing bytes truncates its prompt there. */
		p = &s->cache[ci].prompts[e->prompt];
		kv_prompt_truncate(s, ci, e->prompt, e->token - p->offset, true, count_lost, &l);
		/* An overwrite past the new end, or itself lost: dead too. */
		e->flags |= EF_DEAD;
	}
	b->done = true;
	s->stats.batches_lost++;
	s->stats.lost_tokens += (uint64_t)l.count;
	kv_batches_advance(s);
	return l.count;
}

/* ---- Delete and reset ------------------------------------------------------ */

int
kvstore_delete(struct kvstore *s, const struct proto_delete *d)
{
	struct kv_cache *c;
	struct kv_prompt *p;
	uint32_t pi, last;

	if (d->cache_id >= s->p.num_caches)
		return PROTO_E_BAD_CACHE;
	s->room_gen++;
	c = &s->cache[d->cache_id];
	pi = kv_prompt_find(c, d->prompt_id);
	if (d->prompt_id == 0 || pi == NIL)
		return PROTO_E_UNKNOWN_PROMPT;
	if (d->start_token_idx > d->end_token_idx)
		return PROTO_E_MALFORMED;
	p = &c->prompts[pi];
	if (d->start_token_idx < p->offset)
		return PROTO_E_RANGE;
	/* Version 2: everything from start on, wherever the prompt now ends (a
	 * loss may have cut it before the driver heard); not a suffix is refused. */
	last = p->offset + p->n_claim; /* one past the last stored token */
	if (p->n_claim > 0 && d->end_token_idx < last - 1)
		return PROTO_E_DELETE_NOT_RIGHT;
	if (d->start_token_idx <= p->lost_at)
		p->lost_at = KV_NOT_LOST; /* the driver knows of the loss: EVICTs may come */
	if (d->start_token_idx < last)
		s->stats.deleted_tokens += kv_prompt_truncate(s, d->cache_id, pi,
							      d->start_token_idx - p->offset, false,
							      NULL, NULL);
	else if (p->n_claim == 0 && p->lost_at == KV_NOT_LOST)
		kv_prompt_truncate(s, d->cache_id, pi, 0, false, NULL, NULL); /* emptied: forgotten */
	return 0;
}

void
kvstore_reset(struct kvstore *s)
{
	unsigned int ci;
	uint64_t b;
	uint32_t i;

	s->room_gen++;
	/* Every prompt goes; this marks the open batches' entries dead. */
	for (ci = 0; ci < s->p.num_caches; ci++) {
		struct kv_cache *c = &s->cache[ci];

		for (i = 0; i < c->max_prompts; i++)
			if (c->prompts[i].id != 0)
				kv_prompt_truncate(s, (uint16_t)ci, i, 0, false, NULL, NULL);
	}
	/* Open batches are dropped: their slots go back (after refills end). */
	for (b = s->oldest_open; s->oldest_open != 0 && b < s->next_batch; b++) {
		struct kv_batch *bt = kv_batch_get(s, b);

		if (bt == NULL)
			continue;
		for (i = 0; i < (uint32_t)bt->g * bt->nc; i++)
			if (bt->e[i].kind != E_DISCARD)
				kv_retire(s, (uint16_t)(i % bt->nc), L_SLOT, bt->e[i].slot);
		bt->no = 0;
	}
	s->oldest_open = 0;
	s->next_batch = 1;
	st_rel(&s->batches_complete, 0);
	kv_retire_close(s);
}
