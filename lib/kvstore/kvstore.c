/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * lib/kvstore, the owner's write path: see kvstore.h for the model (single
 * writer, lock-free reader, epoch-based reclamation) and kvstore_priv.h for
 * the structures. Block and slot allocation, prompt lookup, page growth,
 * batches, EVICT and EVICT_DATA: the steps of every evicted token, kept in
 * one translation unit so that the compiler inlines them into kvstore_evict
 * and kvstore_data. Deletions and reclamation (once per batch or per cut,
 * not per token) are kvstore_delete.c; set-up is kvstore_layout.c; the
 * reader and inspection kvstore_read.c.
 */
#include "kvstore_priv.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* ---- Block allocator (owner) ---------------------------------------------- */

static void
blk_unlink(struct kv_cache *c, uint32_t k)
{
	uint32_t *head = c->blk_state[k] == BLK_EMPTY ? &c->empty_head : &c->partial_head;

	if (c->blk_prev[k] != NIL)
		c->blk_next[c->blk_prev[k]] = c->blk_next[k];
	else
		*head = c->blk_next[k];
	if (c->blk_next[k] != NIL)
		c->blk_prev[c->blk_next[k]] = c->blk_prev[k];
}

void
kv_blk_push(struct kv_cache *c, uint32_t k, enum blk_state st)
{
	uint32_t *head = st == BLK_EMPTY ? &c->empty_head : &c->partial_head;

	c->blk_state[k] = (uint8_t)st;
	c->blk_prev[k] = NIL;
	c->blk_next[k] = *head;
	if (*head != NIL)
		c->blk_prev[*head] = k;
	*head = k;
}

/* Move block @k to the list its free mask calls for. */
static void
blk_settle(struct kv_cache *c, uint32_t k)
{
	uint64_t m = c->free_mask[k];
	enum blk_state want = m == ~0ull ? BLK_EMPTY : m == 0 ? BLK_FULL : BLK_PARTIAL;

	if (want == c->blk_state[k])
		return;
	if (c->blk_state[k] != BLK_FULL)
		blk_unlink(c, k);
	if (want == BLK_FULL)
		c->blk_state[k] = BLK_FULL;
	else
		kv_blk_push(c, k, want);
}

static uint32_t
slot_take(struct kv_cache *c, uint32_t slot)
{
	uint32_t k = slot / KVSTORE_BLOCK_SLOTS;

	c->free_mask[k] &= ~(1ull << (slot % KVSTORE_BLOCK_SLOTS));
	c->free_slots--;
	blk_settle(c, k);
	return slot;
}

static bool
slot_is_free(const struct kv_cache *c, uint32_t slot)
{
	return (c->free_mask[slot / KVSTORE_BLOCK_SLOTS] >> (slot % KVSTORE_BLOCK_SLOTS)) & 1;
}

/*
 * Allocate a slot, preferring the one after @hint so a prompt's tokens stay
 * contiguous; then a fresh block (room to stay contiguous); then any free
 * lane. O(1).
 */
static uint32_t
slot_alloc(struct kv_cache *c, uint32_t hint)
{
	uint32_t k;

	if (c->free_slots == 0)
		return NIL;
	if (hint != NIL && hint + 1 < c->nslots && slot_is_free(c, hint + 1))
		return slot_take(c, hint + 1);
	k = c->empty_head != NIL ? c->empty_head : c->partial_head;
	if (k == NIL)
		return NIL;
	return slot_take(c, k * KVSTORE_BLOCK_SLOTS + (uint32_t)__builtin_ctzll(c->free_mask[k]));
}

void
kv_slot_free(struct kv_cache *c, uint32_t slot)
{
	uint32_t k = slot / KVSTORE_BLOCK_SLOTS;

	c->free_mask[k] |= 1ull << (slot % KVSTORE_BLOCK_SLOTS);
	c->free_slots++;
	blk_settle(c, k);
}

/* ---- Prompts and their pages (owner) ------------------------------------ */

static uint32_t
page_alloc(struct kv_cache *c)
{
	uint32_t pg = c->page_free;
	struct kv_page *p;

	if (pg == NIL)
		return NIL;
	p = &c->pages[pg];
	c->page_free = p->next;
	p->prev = NIL;
	p->dirty = 0;
	st_rlx(&p->next, NIL);
	return pg;
}

/* Owner lookup: the record index of @id, or NIL. */
uint32_t
kv_prompt_find(const struct kv_cache *c, uint64_t id)
{
	uint32_t h = hash_pos(id, c->hmask), n;

	for (n = 0; n <= c->hmask; n++, h = (h + 1) & c->hmask) {
		uint64_t k = c->hkeys[h];

		if (k == 0)
			return NIL;
		if (k == id && c->hidx[h] != TOMB)
			return c->hidx[h];
	}
	return NIL;
}

static void
hash_insert(struct kv_cache *c, uint64_t id, uint32_t pi)
{
	uint32_t h = hash_pos(id, c->hmask);

	for (;; h = (h + 1) & c->hmask) {
		uint64_t k = c->hkeys[h];

		if (k == 0 || c->hidx[h] == TOMB) {
			if (k != 0)
				c->htomb--;
			st_rel(&c->hidx[h], pi);
			st_rel(&c->hkeys[h], id);
			c->hlive++;
			return;
		}
	}
}

/* Rebuild the table without tombstones; readers retry meanwhile. */
static void
hash_rebuild(struct kv_cache *c)
{
	uint32_t i;

	st_rel(&c->hseq, c->hseq + 1);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	for (i = 0; i <= c->hmask; i++) {
		st_rlx(&c->hkeys[i], 0);
		st_rlx(&c->hidx[i], TOMB);
	}
	c->hlive = c->htomb = 0;
	for (i = 0; i < c->max_prompts; i++)
		if (c->prompts[i].id != 0 && c->prompts[i].n_claim != 0)
			hash_insert(c, c->prompts[i].id, i);
	st_rel(&c->hseq, c->hseq + 1);
}

void
kv_hash_remove(struct kv_cache *c, uint64_t id)
{
	uint32_t h = hash_pos(id, c->hmask), n;

	for (n = 0; n <= c->hmask; n++, h = (h + 1) & c->hmask) {
		if (c->hkeys[h] == 0)
			return;
		if (c->hkeys[h] == id && c->hidx[h] != TOMB) {
			st_rel(&c->hidx[h], TOMB);
			c->hlive--;
			c->htomb++;
			break;
		}
	}
	/* Keep probe chains short: a quarter of tombstones is enough. */
	if (c->htomb > (c->hmask + 1) / 4)
		hash_rebuild(c);
}

/*
 * The page holding relative index @rel of prompt @p (owner), walked to from
 * the nearer end: DELETEs cut near the end of long prompts (a 100k-token
 * prompt has 1,700 pages; walking there from the head took an eighth of the
 * machine's time in `make demo`).
 */
struct kv_page *
kv_page_of(const struct kv_cache *c, const struct kv_prompt *p, uint32_t rel)
{
	uint32_t k = rel / KVSTORE_PAGE_ENTRIES, pg, i;

	if (k >= p->npages)
		return NULL;
	if (k >= p->npages / 2) {
		pg = p->tail;
		for (i = p->npages - 1; i > k && pg != NIL; i--)
			pg = c->pages[pg].prev;
	} else {
		pg = p->head;
		for (i = k; i > 0 && pg != NIL; i--)
			pg = c->pages[pg].next;
	}
	return pg == NIL ? NULL : &c->pages[pg];
}

/*
 * Make room in the table for relative index @rel == n_claim (growth): a new
 * page at a boundary, or a fresh copy of a tail page that was truncated (its
 * entries past the end may still be read by a refill that began before).
 * Returns the page, or NULL when no page is free.
 */
static struct kv_page *
page_for_growth(struct kvstore *s, uint16_t ci, struct kv_prompt *p, uint32_t rel)
{
	struct kv_cache *c = &s->cache[ci];
	uint32_t pg, old;
	struct kv_page *np, *op;

	if (rel % KVSTORE_PAGE_ENTRIES == 0 && rel / KVSTORE_PAGE_ENTRIES == p->npages) {
		pg = page_alloc(c);
		if (pg == NIL)
			return NULL;
		np = &c->pages[pg];
		np->prev = p->tail;
		if (p->tail == NIL)
			st_rel(&p->head, pg);
		else
			st_rel(&c->pages[p->tail].next, pg);
		p->tail = pg;
		p->npages++;
		return np;
	}
	op = &c->pages[p->tail];
	if (!op->dirty)
		return op;
	/* Copy on write: the new page takes the old one's place in the list. */
	old = p->tail;
	pg = page_alloc(c);
	if (pg == NIL)
		return NULL;
	np = &c->pages[pg];
	memcpy(np->slot, op->slot, sizeof(np->slot[0]) * (rel % KVSTORE_PAGE_ENTRIES));
	np->prev = op->prev;
	if (op->prev == NIL)
		st_rel(&p->head, pg);
	else
		st_rel(&c->pages[op->prev].next, pg);
	p->tail = pg;
	kv_retire(s, ci, L_PAGE, old);
	kv_retire_close(s);
	return np;
}

static uint32_t
prompt_create(struct kv_cache *c, uint64_t id, uint32_t offset)
{
	uint32_t pi = c->prompt_free;
	struct kv_prompt *p;

	if (pi == NIL)
		return NIL;
	p = &c->prompts[pi];
	c->prompt_free = p->free_next;
	p->offset = offset;
	st_rlx(&p->n_pub, 0);
	p->n_claim = 0;
	st_rlx(&p->head, NIL);
	p->tail = NIL;
	p->npages = 0;
	p->last_slot = NIL;
	p->last_batch = 0;
	p->lost_at = KV_NOT_LOST;
	st_rel(&p->id, id);
	hash_insert(c, id, pi);
	c->nprompts++;
	return pi;
}


/* ---- Batches --------------------------------------------------------------- */

void
kvstore_reserve(struct kvstore *s, const struct proto_reserve *r)
{
	(void)r;
	s->stats.reserves++;
}

struct kv_batch *
kv_batch_get(const struct kvstore *s, uint64_t no)
{
	struct kv_batch *b = &s->batches[no % s->p.max_open_batches];

	return b->no == no ? b : NULL;
}

/* Make batch @b's tokens readable (it is the oldest open one, and done). */
static void
batch_publish(struct kvstore *s, struct kv_batch *b)
{
	uint32_t i, n = (uint32_t)b->g * b->nc;
	bool retired = false;

	for (i = 0; i < n; i++) {
		struct kv_entry *e = &b->e[i];
		uint16_t ci = (uint16_t)(i % b->nc);
		struct kv_cache *c = &s->cache[ci];
		struct kv_prompt *p;
		struct kv_page *pg;
		uint32_t rel;

		if (e->kind == E_DISCARD)
			continue;
		if (e->flags & EF_DEAD) {
			/* Growth slots of dead entries were never published: free now. */
			kv_retire(s, ci, L_SLOT, e->slot);
			retired = true;
			continue;
		}
		p = &c->prompts[e->prompt];
		rel = e->token - p->offset;
		if (e->kind == E_GROW) {
			if (rel + 1 > p->n_pub)
				st_rel(&p->n_pub, rel + 1);
			continue;
		}
		/* Overwrite: swap the slot in; the old one waits for refills, and
		 * the new one says which it replaced and when (a refill begun
		 * before reads the old one in every buffer). Its stamp is stored
		 * before the swap that publishes it. */
		pg = kv_page_of(c, p, rel);
		st_rlx(&c->vprev[e->slot], pg->slot[rel % KVSTORE_PAGE_ENTRIES]);
		st_rlx(&c->vborn[e->slot], ld_rlx(&s->epoch));
		kv_retire(s, ci, L_SLOT, pg->slot[rel % KVSTORE_PAGE_ENTRIES]);
		__atomic_store_n(&pg->slot[rel % KVSTORE_PAGE_ENTRIES], e->slot, __ATOMIC_SEQ_CST);
		retired = true;
	}
	if (retired)
		kv_retire_close(s);
	st_rel(&s->batches_complete, b->no);
	b->no = 0;
}

/* Publish every done batch at the head of the open window, in order. */
void
kv_batches_advance(struct kvstore *s)
{
	struct kv_batch *b;

	while (s->oldest_open != 0 && (b = kv_batch_get(s, s->oldest_open)) != NULL && b->done) {
		s->room_gen++; /* the window moves; its dead entries' slots go back */
		batch_publish(s, b);
		s->oldest_open = s->oldest_open + 1 < s->next_batch ? s->oldest_open + 1 : 0;
	}
}

uint64_t
kvstore_oldest_open(const struct kvstore *s)
{
	return s->oldest_open;
}

uint64_t
kvstore_batches_complete(const struct kvstore *s)
{
	return ld_acq(&s->batches_complete);
}

static struct kv_batch *
batch_open(struct kvstore *s, uint64_t no, uint16_t g, uint16_t nc)
{
	struct kv_batch *b = &s->batches[no % s->p.max_open_batches];
	unsigned int c;

	b->no = no;
	b->g = g;
	b->nc = nc;
	b->pending = (uint32_t)g * nc;
	b->done = b->pending == 0;
	for (c = 0; c < nc; c++)
		b->st[c].n_iv = 0;
	if (s->oldest_open == 0)
		s->oldest_open = no;
	s->next_batch = no + 1;
	s->stats.batches_opened++;
	return b;
}

/*
 * Upper bound of the tokens an EVICT adds to each cache, and of the slots it
 * needs: exact when every entry is legal. Returns the first cache whose
 * tokens would pass its capacity (@p nc: none), whose count, and every later
 * cache's, it stops at: kvstore_evict refuses the batch there, whatever the
 * rest says, before it looks at their slots. A full store's waiting EVICT
 * is tried again only once kvstore_room() says room may have been made.
 */
static uint16_t
evict_needs(struct kvstore *s, uint16_t nc, uint32_t n, const struct proto_evict_entry *e,
	    struct kv_entry *be, uint64_t *add, uint64_t *slots)
{
	uint16_t over = nc;
	uint32_t i;

	for (i = 0; i < n && over > 0; i++) {
		uint16_t ci = (uint16_t)(i % nc);
		struct kv_cache *c = &s->cache[ci];
		uint32_t pi;

		if (ci >= over)
			continue;
		be[i].prompt = NIL;
		if (e[i].prompt_id == 0)
			continue;
		slots[ci]++;
		/* Remembered for evict_one(), which would look it up again. */
		pi = be[i].prompt = kv_prompt_find(c, e[i].prompt_id);
		if ((pi == NIL ||
		     e[i].token_idx >= c->prompts[pi].offset + c->prompts[pi].n_claim) &&
		    c->stored + ++add[ci] > c->capacity)
			over = ci;
	}
	return over;
}

/*
 * True when even if every entry grew its prompt the batch would fit: then the
 * exact count (a hash lookup per entry) is not needed. Usual far from full.
 */
static bool
evict_surely_fits(const struct kvstore *s, uint16_t g)
{
	unsigned int c;

	for (c = 0; c < s->p.num_caches; c++) {
		const struct kv_cache *kc = &s->cache[c];

		if (kc->stored + g > kc->capacity || kc->free_slots < g)
			return false;
	}
	return true;
}

/* Accept entry @e of cache @ci into batch entry @be; return its code. */
static uint16_t
evict_one(struct kvstore *s, uint16_t ci, const struct proto_evict_entry *e, struct kv_entry *be,
	  struct kv_hint *hint)
{
	struct kv_cache *c = &s->cache[ci];
	uint32_t pi = be->prompt, slot;
	struct kv_prompt *p;
	struct kv_page *pg;
	uint32_t rel;
	bool created = false;

	/* Found before the batch, at this position last batch, or by the hash. */
	if ((pi == NIL || c->prompts[pi].id != e->prompt_id) && hint->pi != NIL &&
	    hint->id == e->prompt_id && c->prompts[hint->pi].id == e->prompt_id &&
	    c->prompts[hint->pi].n_claim != 0)
		pi = hint->pi;
	if (pi == NIL || c->prompts[pi].id != e->prompt_id)
		pi = kv_prompt_find(c, e->prompt_id);
	be->kind = E_DISCARD;
	be->prompt = NIL;
	be->slot = NIL;
	be->token = e->token_idx;
	if (pi != NIL) {
		p = &c->prompts[pi];
		if (e->token_idx < p->offset)
			return PROTO_E_LEFT_GROWTH;
		if (e->token_idx >= p->lost_at)
			return PROTO_E_HOLE; /* cut by a loss: refused until a DELETE */
		rel = e->token_idx - p->offset;
		if (rel > p->n_claim)
			return PROTO_E_HOLE;
		if (rel < p->n_claim) {
			/* Overwrite: a fresh slot, swapped in at publish. */
			slot = slot_alloc(c, NIL);
			if (slot == NIL)
				return PROTO_E_NO_SPACE;
			be->kind = E_OVER;
			be->prompt = pi;
			be->slot = slot;
			s->stats.overwritten_tokens++;
			return 0;
		}
		if (e->token_idx == UINT32_MAX)
			return PROTO_E_MALFORMED; /* the range could not end */
	} else {
		/*
		 * Version 2: a new prompt refused for room stays known, empty and
		 * marked from that token (as a loss marks one: PROTOCOL.md section
		 * 4), so that its next tokens, already on their way, cannot create
		 * it at an offset the driver does not know; the driver's DELETE
		 * forgets it.
		 */
		pi = prompt_create(c, e->prompt_id, e->token_idx);
		if (pi == NIL) {
			s->stats.unmarked_refusals++; /* no record left to mark */
			return PROTO_E_NO_SPACE;
		}
		created = true;
		p = &c->prompts[pi];
		rel = 0;
		if (c->stored >= c->capacity || c->free_slots == 0)
			goto no_space;
	}
	/* Growth on the right. */
	if (c->stored >= c->capacity)
		goto no_space;
	pg = page_for_growth(s, ci, p, rel);
	slot = pg == NULL ? NIL : slot_alloc(c, p->last_slot);
	if (slot == NIL)
		goto no_space;
	__atomic_store_n(&pg->slot[rel % KVSTORE_PAGE_ENTRIES], slot, __ATOMIC_RELEASE);
	p->n_claim = rel + 1;
	p->last_slot = slot;
	c->stored++;
	be->kind = E_GROW;
	be->prompt = pi;
	be->slot = slot;
	s->stats.evicted_tokens++;
	return 0;
no_space:
	if (created)
		p->lost_at = e->token_idx; /* known, empty, marked: as above */
	return PROTO_E_NO_SPACE;
}

int
kvstore_evict(struct kvstore *s, uint64_t batch_no, uint16_t num_caches, uint16_t g,
	      const struct proto_evict_entry *e, uint16_t *codes, unsigned int flags)
{
	uint32_t n = (uint32_t)g * num_caches, i;
	/* Entries of each cache refused for room so far in this batch. */
	bool refused[KVSTORE_MAX_CACHES] = {false};
	struct kv_batch *b;

	if (batch_no != s->next_batch)
		return -EINVAL;
	if (s->oldest_open != 0 && batch_no - s->oldest_open >= s->p.max_open_batches)
		return -EBUSY;
	if (num_caches != s->p.num_caches) {
		/* BAD_CACHE: complete at once, its data discarded. */
		b = batch_open(s, batch_no, 0, 0);
		kv_batches_advance(s);
		s->room_gen++;
		return -EPROTO;
	}
	if (n > s->p.max_batch_entries)
		return -EINVAL;
	/* The ring slot of this batch is free (the window check above). */
	b = &s->batches[batch_no % s->p.max_open_batches];
	if (!(flags & KVSTORE_EVICT_FORCE) && !evict_surely_fits(s, g)) {
		/* evict_needs sets each entry's prompt (all of them when it fits). */
		uint64_t add[KVSTORE_MAX_CACHES] = {0}, slots[KVSTORE_MAX_CACHES] = {0};
		unsigned int c, over = evict_needs(s, num_caches, n, e, b->e, add, slots);

		for (c = 0; c < num_caches; c++) {
			struct kv_cache *kc = &s->cache[c];

			/*
			 * The first cache over its capacity refuses the batch; those
			 * before it are within theirs (evict_needs checked each token
			 * it added), and their slots are checked, and reclaimed, first.
			 */
			if (c == over)
				return -ENOSPC;
			if (kc->free_slots < slots[c]) {
				kv_reclaim(s);
				if (kc->free_slots < slots[c])
					return -ENOSPC;
			}
		}
	} else {
		for (i = 0; i < n; i++)
			b->e[i].prompt = NIL;
		if (flags & KVSTORE_EVICT_FORCE)
			kv_reclaim(s);
	}
	b = batch_open(s, batch_no, g, num_caches);
	for (i = 0; i < n; i++) {
		uint16_t code = 0;

		b->e[i].flags = 0;
		if (e[i].prompt_id != 0) {
			code = evict_one(s, (uint16_t)(i % num_caches), &e[i], &b->e[i], &s->hint[i]);
			if (b->e[i].prompt != NIL) {
				s->hint[i] = (struct kv_hint){e[i].prompt_id, b->e[i].prompt};
				s->cache[i % num_caches].prompts[b->e[i].prompt].last_batch = batch_no;
			}
			/*
			 * Growth past a token refused for room is a hole only because
			 * of that refusal: answer its cause. (Rare: look back.)
			 */
			if (code == PROTO_E_HOLE && (flags & KVSTORE_EVICT_FORCE) &&
			    refused[i % num_caches]) {
				uint32_t j;

				for (j = i % num_caches; j < i && codes != NULL; j += num_caches)
					if (e[j].prompt_id == e[i].prompt_id &&
					    codes[j] == PROTO_E_NO_SPACE) {
						code = PROTO_E_NO_SPACE;
						break; /* the first refusal says it */
					}
			}
		}
		else
			b->e[i] = (struct kv_entry){.prompt = NIL, .slot = NIL, .kind = E_DISCARD,
						    .token = e[i].token_idx};
		if (b->e[i].kind == E_DISCARD)
			s->stats.discarded_entries++;
		if (codes != NULL)
			codes[i] = code;
		if (code == PROTO_E_NO_SPACE)
			refused[i % num_caches] = true;
	}
	kv_batches_advance(s);
	s->room_gen++;
	return 0;
}

/* Merge [a, z) into the stream's received ranges; the merged range is *m. */
static int
stream_add(struct kv_stream *st, uint32_t a, uint32_t z, struct kv_iv *m, uint32_t *dup)
{
	uint32_t i = st->n_iv, j, k, covered = 0;

	/* Usually in order: find from the end the first range not after z. */
	while (i > 0 && st->iv[i - 1].s > z)
		i--;
	/* Ranges [j, i) touch [a, z). */
	j = i;
	while (j > 0 && st->iv[j - 1].e >= a)
		j--;
	for (k = j; k < i; k++) {
		uint32_t s0 = st->iv[k].s > a ? st->iv[k].s : a;
		uint32_t e0 = st->iv[k].e < z ? st->iv[k].e : z;

		if (e0 > s0)
			covered += e0 - s0;
	}
	*dup = covered;
	if (j == i) {
		if (st->n_iv == KVSTORE_MAX_HOLES)
			return -E2BIG;
		memmove(&st->iv[i + 1], &st->iv[i], sizeof(st->iv[0]) * (st->n_iv - i));
		st->iv[i] = (struct kv_iv){a, z};
		st->n_iv++;
		*m = st->iv[i];
		return 0;
	}
	if (st->iv[j].s < a)
		a = st->iv[j].s;
	if (st->iv[i - 1].e > z)
		z = st->iv[i - 1].e;
	st->iv[j] = (struct kv_iv){a, z};
	memmove(&st->iv[j + 1], &st->iv[i], sizeof(st->iv[0]) * (st->n_iv - i));
	st->n_iv -= i - j - 1;
	*m = st->iv[j];
	return 0;
}

/*
 * Copy evicted bytes into a slot. The store's bytes are not read again by
 * this core (the NIC reads them at refill time), so pieces of 256 bytes and
 * more go with non-temporal stores: no read-for-ownership of the destination,
 * half the memory traffic of a cached copy. kvstore_data() fences when a
 * batch completes, before anything of it can be published.
 */
#define COPY_AHEAD 1024

static inline void
copy_in(uint8_t *dst, const uint8_t *src, uint32_t n)
{
#ifdef KVSTORE_NOCOPY_PROBE
	/* scripts/bench-zerocopy.sh's build only: the store keeps its books
	 * and copies nothing, what a shard lcore costs when the frames are
	 * the storage (zero-copy ingest's ceiling; never a product build). */
	__asm__ volatile("" : : "r"(dst), "r"(src), "r"(n) : "memory");
	return;
#endif
#if defined(__SSE2__)
	if (n >= 256) {
		uint32_t head = (uint32_t)(-(uintptr_t)dst & 15);

		if (head != 0)
			memcpy(dst, src, head);
		dst += head;
		src += head;
		n -= head;
		for (; n >= 64; n -= 64, dst += 64, src += 64) {
			_mm_prefetch((const char *)src + COPY_AHEAD, _MM_HINT_T0);
			__m128i a = _mm_loadu_si128((const __m128i *)src);
			__m128i b = _mm_loadu_si128((const __m128i *)(src + 16));
			__m128i c = _mm_loadu_si128((const __m128i *)(src + 32));
			__m128i d = _mm_loadu_si128((const __m128i *)(src + 48));

			_mm_stream_si128((__m128i *)dst, a);
			_mm_stream_si128((__m128i *)(dst + 16), b);
			_mm_stream_si128((__m128i *)(dst + 32), c);
			_mm_stream_si128((__m128i *)(dst + 48), d);
		}
		for (; n >= 16; n -= 16, dst += 16, src += 16)
			_mm_stream_si128((__m128i *)dst, _mm_loadu_si128((const __m128i *)src));
		if (n == 0)
			return;
	}
#endif
	memcpy(dst, src, n);
}

static inline void
copy_fence(void)
{
#if defined(__SSE2__)
	_mm_sfence();
#endif
}

/* Copy bytes [x, x + len) of a token (buffer-major slot layout): one
 * division a token (it was the hot spot of the bookkeeping at 1 KiB). */
static inline void
token_write(const struct kv_cache *c, uint32_t slot, uint32_t x, const uint8_t *src, uint32_t len)
{
	uint32_t buf = x / c->bb, in = x - buf * c->bb;
	uint8_t *dst = slot_addr(c, slot, buf);

	while (len > 0) {
		uint32_t n = c->bb - in < len ? c->bb - in : len;

		copy_in(dst + in, src, n);
		src += n;
		len -= n;
		in = 0;
		dst += (size_t)KVSTORE_BLOCK_SLOTS * c->bb; /* the next buffer's lane */
	}
}

bool
kvstore_batch_unseen(const struct kvstore *s, uint64_t batch_no)
{
	/* kvstore_data's -EAGAIN: no open batch of that number, and not one before. */
	return kv_batch_get(s, batch_no) == NULL && batch_no >= s->next_batch;
}

int
kvstore_data(struct kvstore *s, uint64_t batch_no, uint16_t cache_id, uint32_t stream_offset,
	     uint32_t stream_len, const void *payload, uint32_t len)
{
	struct kv_batch *b = kv_batch_get(s, batch_no);
	const uint8_t *src = payload;
	struct kv_cache *c;
	struct kv_iv m;
	uint32_t B, t, t_end, dup;
	uint64_t end = (uint64_t)stream_offset + len;
	int rc;

	if (b == NULL)
		return batch_no >= s->next_batch ? -EAGAIN : -ESTALE;
	if (b->done)
		return -ESTALE;
	if (cache_id >= b->nc)
		return -EINVAL;
	c = &s->cache[cache_id];
	B = c->B;
	if (stream_len != (uint64_t)b->g * B || end > stream_len)
		return -EINVAL;
	if (len == 0)
		return 0;
	rc = stream_add(&b->st[cache_id], stream_offset, (uint32_t)end, &m, &dup);
	if (rc != 0)
		return rc;
	s->stats.data_bytes += len;
	s->stats.data_dup_bytes += dup;

	t = stream_offset / B;
	t_end = (uint32_t)((end - 1) / B);
	for (; t <= t_end; t++) {
		struct kv_entry *e = &b->e[(size_t)t * b->nc + cache_id];
		uint32_t ts = t * B, a = stream_offset > ts ? stream_offset : ts;
		uint32_t z = end < (uint64_t)ts + B ? (uint32_t)end : ts + B;

		if (e->kind != E_DISCARD && !(e->flags & EF_DEAD) && dup < len)
			token_write(c, e->slot, a - ts, src + (a - stream_offset), z - a);
		if (!(e->flags & EF_COMPLETE) && m.s <= ts && m.e >= ts + B) {
			e->flags |= EF_COMPLETE;
			b->pending--;
		}
	}
	/* Coverage changed only inside this fragment: no other token completed. */
	if (b->pending == 0) {
		/* Streaming stores of every fragment must be visible before the
		 * batch can be published; one fence per batch, not per frame. */
		copy_fence();
		b->done = true;
		kv_batches_advance(s);
	}
	return 0;
}

