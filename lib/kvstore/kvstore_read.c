/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * lib/kvstore's reader (kvstore.h: any one thread besides the owner): a
 * refill takes a ticket of the current epoch before it reads anything, so
 * that what the owner retires meanwhile is not reused until the ticket is
 * given back (kvstore_refill_end); lookups tolerate the owner inserting,
 * deleting and rebuilding the prompt table. Also the inspection calls
 * (stats, a prompt's range, a token's bytes), which are the owner's.
 */
#include "kvstore_priv.h"

/* Reader lookup: tolerates the owner inserting, deleting and rebuilding. */
uint32_t
kv_prompt_find_rd(const struct kv_cache *c, uint64_t id)
{
	uint32_t seq, h, n, found;

	do {
		seq = ld_acq(&c->hseq);
		if (seq & 1)
			continue;
		found = NIL;
		h = hash_pos(id, c->hmask);
		for (n = 0; n <= c->hmask; n++, h = (h + 1) & c->hmask) {
			uint64_t k = ld_acq(&c->hkeys[h]);
			uint32_t i;

			if (k == 0)
				break;
			if (k != id)
				continue;
			i = ld_acq(&c->hidx[h]);
			/* A reused tombstone may pair a stale key with a new index. */
			if (i != TOMB && i < c->max_prompts && ld_acq(&c->prompts[i].id) == id) {
				found = i;
				break;
			}
		}
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
	} while ((seq & 1) || ld_rlx(&c->hseq) != seq);
	return found;
}

/* ---- Refills (reader) ------------------------------------------------------ */

struct kvstore_refill *
kvstore_refill_begin(struct kvstore *s, uint16_t cache_id, const struct proto_refill_chunk *chunks,
		     unsigned int n, uint16_t *code)
{
	struct kvstore_refill *r = NULL;
	struct kv_cache *c;
	uint64_t tokens = 0, e;
	unsigned int i;

	*code = 0;
	if (cache_id >= s->p.num_caches) {
		*code = PROTO_E_BAD_CACHE;
		return NULL;
	}
	if (n > s->p.max_refill_chunks) {
		errno = E2BIG;
		return NULL;
	}
	for (i = 0; i < s->p.max_refills; i++) {
		struct kvstore_refill *x = &s->refills[(s->refill_cursor + i) % s->p.max_refills];

		if (__atomic_load_n(&x->ticket, __ATOMIC_ACQUIRE) == 0) {
			r = x;
			s->refill_cursor = (uint32_t)((x - s->refills) + 1);
			break;
		}
	}
	if (r == NULL) {
		errno = EBUSY;
		return NULL;
	}
	/*
	 * Take the ticket before reading anything: whatever the owner retires
	 * from now on waits for us; whatever it retired before, we cannot
	 * reach (it was unlinked before the epoch we read). The ticket holds
	 * only once the epoch is still the one it names after it is seen: an
	 * epoch closed between our reading it and our ticket being seen was
	 * reclaimed without us, and with a ticket of that epoch a refill walks
	 * from an overwrite published in it back to the slot it replaced,
	 * which may already hold another prompt's bytes. Then take the new one.
	 */
	for (e = __atomic_load_n(&s->epoch, __ATOMIC_SEQ_CST);;) {
		uint64_t now;

		__atomic_store_n(&r->ticket, e, __ATOMIC_SEQ_CST);
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
		now = __atomic_load_n(&s->epoch, __ATOMIC_SEQ_CST);
		if (now == e)
			break;
		e = now;
	}

	c = &s->cache[cache_id];
	for (i = 0; i < n; i++) {
		uint32_t pi = kv_prompt_find_rd(c, chunks[i].prompt_id);
		struct kv_prompt *p;
		uint32_t off, npub;

		if (chunks[i].prompt_id == 0 || pi == NIL) {
			*code = PROTO_E_UNKNOWN_PROMPT;
			break;
		}
		p = &c->prompts[pi];
		off = p->offset;
		npub = __atomic_load_n(&p->n_pub, __ATOMIC_SEQ_CST);
		if (npub == 0) {
			/* Only batches still open hold it: it is not there yet. */
			*code = PROTO_E_UNKNOWN_PROMPT;
			break;
		}
		if (chunks[i].start_token_idx < off ||
		    (uint64_t)chunks[i].start_token_idx + chunks[i].num_tokens >
			    (uint64_t)off + npub) {
			*code = PROTO_E_RANGE;
			break;
		}
		r->chunks[i].prompt = pi;
		r->chunks[i].rel = chunks[i].start_token_idx - off;
		r->chunks[i].n = chunks[i].num_tokens;
		tokens += chunks[i].num_tokens;
	}
	if (*code != 0 || tokens > UINT32_MAX) {
		if (*code == 0)
			*code = PROTO_E_RANGE;
		__atomic_store_n(&r->ticket, 0, __ATOMIC_RELEASE);
		return NULL;
	}
	r->cache = cache_id;
	r->nchunks = n;
	r->tokens = (uint32_t)tokens;
	return r;
}

uint32_t
kvstore_refill_tokens(const struct kvstore_refill *r)
{
	return r->tokens;
}

uint64_t
kvstore_refill_buffer_len(const struct kvstore_refill *r)
{
	return (uint64_t)r->tokens * r->s->cache[r->cache].bb;
}

/* The table page holding relative index @rel, walking from the head. */
static const struct kv_page *
page_of_rd(const struct kv_cache *c, const struct kv_prompt *p, uint32_t rel)
{
	uint32_t pg = ld_acq(&p->head), i;

	for (i = rel / KVSTORE_PAGE_ENTRIES; i > 0 && pg != NIL; i--)
		pg = ld_acq(&c->pages[pg].next);
	return pg == NIL ? NULL : &c->pages[pg];
}

unsigned int
kvstore_refill_next(struct kvstore_refill *r, uint16_t buffer, struct kvstore_refill_pos *pos,
		    uint32_t max_bytes, struct kvstore_seg *segs, unsigned int max_segs)
{
	const struct kv_cache *c = &r->s->cache[r->cache];
	unsigned int ns = 0;
	uint32_t bytes = 0;

	if (buffer >= c->nb)
		return 0;
	while (bytes < max_bytes && pos->chunk < r->nchunks) {
		const struct kv_rchunk *ch = &r->chunks[pos->chunk];
		const struct kv_prompt *p = &c->prompts[ch->prompt];
		const struct kv_page *pg = pos->page;
		uint32_t rel, slot, len;
		const uint8_t *a;

		if (pos->token >= ch->n) {
			pos->chunk++;
			pos->token = 0;
			pos->page = NULL;
			continue;
		}
		rel = ch->rel + pos->token;
		if (pg == NULL || rel / KVSTORE_PAGE_ENTRIES != pos->page_first) {
			if (pg != NULL && rel / KVSTORE_PAGE_ENTRIES == pos->page_first + 1) {
				uint32_t nx = ld_acq(&pg->next);

				pg = nx == NIL ? NULL : &c->pages[nx];
			} else {
				pg = page_of_rd(c, p, rel);
			}
			if (pg == NULL)
				break; /* cannot happen while the ticket holds */
			pos->page = pg;
			pos->page_first = rel / KVSTORE_PAGE_ENTRIES;
		}
		/* A token is read from one slot, one version, even across calls,
		 * and in every buffer the version published when the refill began:
		 * an overwrite published since (its epoch >= our ticket) is passed
		 * for the slot it replaced, which its ticket keeps in limbo. */
		if (pos->byte != 0) {
			slot = pos->slot;
		} else {
			slot = __atomic_load_n(&pg->slot[rel % KVSTORE_PAGE_ENTRIES], __ATOMIC_SEQ_CST);
			while (ld_rlx(&c->vborn[slot]) >= r->ticket)
				slot = ld_rlx(&c->vprev[slot]);
		}
		pos->slot = slot;
		a = slot_addr(c, slot, buffer) + pos->byte;
		len = c->bb - pos->byte;
		if (len > max_bytes - bytes)
			len = max_bytes - bytes;
		if (ns > 0 && (const uint8_t *)segs[ns - 1].addr + segs[ns - 1].len == a &&
		    segs[ns - 1].len <= UINT32_MAX - len) {
			segs[ns - 1].len += len;
		} else {
			if (ns == max_segs)
				break;
			segs[ns].addr = a;
			segs[ns].len = len;
			ns++;
		}
		bytes += len;
		pos->done += len;
		pos->byte += len;
		if (pos->byte == c->bb) {
			pos->byte = 0;
			pos->token++;
		}
	}
	return ns;
}

void
kvstore_refill_end(struct kvstore_refill *r)
{
	__atomic_store_n(&r->ticket, 0, __ATOMIC_RELEASE);
}

/* ---- Inspection ------------------------------------------------------------ */

void
kvstore_cache_stats(const struct kvstore *s, uint16_t cache_id, struct kvstore_cache_stats *st)
{
	const struct kv_cache *c = &s->cache[cache_id];

	st->stored_tokens = c->stored;
	st->prompts = c->nprompts;
	st->free_slots = c->free_slots;
	st->limbo_slots = c->limbo_slots;
	st->capacity_tokens = c->capacity;
	st->bytes_per_token = c->B;
	st->num_buffers = (uint16_t)c->nb;
}

void
kvstore_stats(const struct kvstore *s, struct kvstore_stats *st)
{
	*st = s->stats;
}

int
kvstore_prompt(const struct kvstore *s, uint16_t cache_id, uint64_t prompt_id, uint32_t *offset,
	       uint32_t *n)
{
	const struct kv_cache *c;
	uint32_t pi;

	if (cache_id >= s->p.num_caches)
		return -ENOENT;
	c = &s->cache[cache_id];
	pi = kv_prompt_find(c, prompt_id);
	if (pi == NIL || c->prompts[pi].n_pub == 0)
		return -ENOENT; /* absent, or held only by batches still open */
	*offset = c->prompts[pi].offset;
	*n = c->prompts[pi].n_pub;
	return 0;
}

int
kvstore_read_token(const struct kvstore *s, uint16_t cache_id, uint64_t prompt_id,
		   uint32_t token_idx, void *out)
{
	const struct kv_cache *c;
	const struct kv_prompt *p;
	struct kv_page *pg;
	uint32_t pi, rel, slot, b;

	if (cache_id >= s->p.num_caches)
		return -ENOENT;
	c = &s->cache[cache_id];
	pi = kv_prompt_find(c, prompt_id);
	if (pi == NIL)
		return -ENOENT;
	p = &c->prompts[pi];
	if (token_idx < p->offset || token_idx - p->offset >= p->n_pub)
		return -ENOENT;
	rel = token_idx - p->offset;
	pg = kv_page_of(c, p, rel);
	slot = pg->slot[rel % KVSTORE_PAGE_ENTRIES];
	for (b = 0; b < c->nb; b++)
		memcpy((uint8_t *)out + (size_t)b * c->bb, slot_addr(c, slot, b), c->bb);
	return 0;
}
