/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * lib/kvstore: see kvstore.h for the model (single writer, lock-free reader,
 * epoch-based reclamation). Fields the reader loads while the owner may
 * write them are accessed with __atomic builtins and marked "rd" below; all
 * others are the owner's alone.
 */
#include "kvstore.h"

#include <errno.h>
#include <string.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#define NIL UINT32_MAX
#define TOMB UINT32_MAX
#define ALIGN 64

#define ld_acq(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define st_rel(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)
#define ld_rlx(p) __atomic_load_n((p), __ATOMIC_RELAXED)
#define st_rlx(p, v) __atomic_store_n((p), (v), __ATOMIC_RELAXED)

/* One page of a prompt's token -> slot table: 256 bytes. */
struct kv_page {
	uint32_t next;	/* rd: next page of the prompt, NIL at the tail */
	uint32_t prev;
	uint32_t dirty; /* entries past the prompt's end were once published */
	uint32_t pad;
	uint32_t slot[KVSTORE_PAGE_ENTRIES]; /* rd */
};

struct kv_prompt {
	uint64_t id;	 /* rd: 0 when the record is free */
	uint32_t offset; /* first token index; fixed while the record lives */
	uint32_t n_pub;	 /* rd: readable tokens */
	uint32_t n_claim; /* accepted tokens: readable ones + open batches' growth */
	uint32_t head;	 /* rd: first page */
	uint32_t tail;
	uint32_t npages;
	uint32_t last_slot; /* allocation hint: the slot of the last claimed token */
	uint32_t free_next;
	uint64_t last_batch; /* the latest batch with an entry of it (0: none) */
};

enum blk_state { BLK_EMPTY, BLK_PARTIAL, BLK_FULL };

struct kv_cache {
	uint32_t B;  /* bytes per token */
	uint32_t nb; /* buffers */
	uint32_t bb; /* bytes per token per buffer */
	uint64_t capacity;
	uint32_t nslots, nblocks;
	uint8_t *data; /* block k at data + k * stride, buffer-major inside */
	size_t stride; /* 64 * B plus one cache line: see block_stride() */
	/* Block allocator: free-lane masks, and lists of empty and partial blocks. */
	uint64_t *free_mask;
	uint32_t *blk_next, *blk_prev;
	uint8_t *blk_state;
	uint32_t empty_head, partial_head;
	uint64_t free_slots;
	uint64_t limbo_slots;
	/* Prompts. */
	struct kv_prompt *prompts;
	uint32_t max_prompts, prompt_free;
	uint64_t nprompts;
	uint64_t *hkeys; /* rd */
	uint32_t *hidx;	 /* rd */
	uint32_t hmask, hlive, htomb;
	uint32_t hseq; /* rd: odd while the table is rebuilt */
	/* Table pages. */
	struct kv_page *pages;
	uint32_t npages, page_free;
	/* Tokens accepted (published + open-batch growth): the capacity measure. */
	uint64_t stored;
	/* Retired objects, oldest first: a ring of exactly the objects there are. */
	struct kv_limbo *limbo;
	uint32_t limbo_cap, limbo_head, limbo_tail, limbo_n;
};

enum entry_kind { E_DISCARD, E_GROW, E_OVER };
#define EF_COMPLETE 0x1 /* all bytes arrived */
#define EF_DEAD 0x2	/* removed by a loss or delete while open: drop its data */

struct kv_entry {
	uint32_t prompt; /* record index, NIL for discard */
	uint32_t token;	 /* token index */
	uint32_t slot;	 /* destination slot, NIL for discard */
	uint8_t kind;
	uint8_t flags;
	uint16_t pad;
};

struct kv_iv {
	uint32_t s, e;
};

struct kv_stream {
	uint32_t n_iv;
	struct kv_iv iv[KVSTORE_MAX_HOLES];
};

struct kv_batch {
	uint64_t no; /* 0: free */
	uint16_t g, nc;
	uint32_t pending; /* entries not complete */
	bool done;	  /* streams whole, or lost */
	struct kv_entry *e;
	struct kv_stream *st; /* one per cache */
};

struct kv_rchunk {
	uint32_t prompt;
	uint32_t rel; /* start, relative to the prompt's offset */
	uint32_t n;
};

struct kvstore_refill {
	uint64_t ticket; /* rd: epoch at begin; 0 when free */
	struct kvstore *s;
	uint16_t cache;
	uint32_t tokens;
	uint32_t nchunks;
	struct kv_rchunk *chunks;
};

enum limbo_type { L_SLOT, L_PAGE, L_PROMPT };

/* A retired object: 8 bytes, since there is one per slot at worst. */
struct kv_limbo {
	uint32_t tag;	 /* low 32 bits of the epoch it was retired in */
	uint32_t object; /* type << 30 | index */
};

/*
 * The prompt found at each entry position of the previous batch: a wafer's
 * batches keep their sequences in place, so entry i of batch n is usually
 * the same prompt as entry i of batch n - 1. Checked by id before use.
 */
struct kv_hint {
	uint64_t id;
	uint32_t pi;
};

struct kvstore {
	struct kvstore_params p;
	struct kv_cache cache[KVSTORE_MAX_CACHES];
	struct kv_hint *hint; /* max_batch_entries */
	/* Batches. */
	struct kv_batch *batches;
	uint64_t next_batch;	   /* number the next EVICT must carry */
	uint64_t oldest_open;	   /* 0 when none open */
	uint64_t batches_complete; /* rd */
	/* Refills and reclamation. */
	struct kvstore_refill *refills;
	uint32_t refill_cursor; /* reader's */
	uint64_t epoch;		/* rd */
	struct kvstore_stats stats;
};

/* ---- Parameters and layout ---------------------------------------------- */

static uint32_t
pow2_at_least(uint64_t v)
{
	uint32_t r = 1;

	while (r < v && r < (1u << 31))
		r <<= 1;
	return r;
}

static int
apply_defaults(const struct kvstore_params *in, struct kvstore_params *p)
{
	unsigned int c;
	uint64_t maxcap = 0;

	*p = *in;
	if (p->num_caches == 0 || p->num_caches > KVSTORE_MAX_CACHES)
		return -EINVAL;
	for (c = 0; c < p->num_caches; c++) {
		const struct kvstore_cache_params *cp = &p->cache[c];

		if (cp->bytes_per_token == 0 || cp->num_buffers == 0 ||
		    cp->bytes_per_token % cp->num_buffers != 0 || cp->capacity_tokens == 0)
			return -EINVAL;
		/* Slot ids fit 30 bits (limbo entries carry a type beside them). */
		if (cp->capacity_tokens > (1ull << 29))
			return -EINVAL;
		if (cp->capacity_tokens > maxcap)
			maxcap = cp->capacity_tokens;
	}
	if (p->max_prompts == 0)
		p->max_prompts = (uint32_t)(maxcap / 32 > 1024 ? maxcap / 32 : 1024);
	if (p->max_prompts > (1u << 28))
		return -EINVAL;
	if (p->spare_tokens == 0)
		p->spare_tokens = (uint32_t)(maxcap / 256 > 512 ? maxcap / 256 : 512);
	if (p->max_open_batches == 0)
		p->max_open_batches = 64;
	if (p->max_batch_entries == 0)
		p->max_batch_entries = 557;
	if (p->max_refills == 0)
		p->max_refills = 128;
	if (p->max_refill_chunks == 0)
		p->max_refill_chunks = 256;
	return 0;
}

static uint32_t
cache_nslots(const struct kvstore_params *p, unsigned int c)
{
	uint64_t n = p->cache[c].capacity_tokens + p->spare_tokens;

	return (uint32_t)((n + KVSTORE_BLOCK_SLOTS - 1) / KVSTORE_BLOCK_SLOTS * KVSTORE_BLOCK_SLOTS);
}

/*
 * Blocks are 64 x B bytes plus one cache line. Without it, the same lane of
 * different blocks sits a multiple of 64 x B apart, and prompts that start
 * together (each in a fresh block) write one cache set over and over.
 */
static size_t
block_stride(uint32_t B)
{
	return (size_t)KVSTORE_BLOCK_SLOTS * B + ALIGN;
}

static uint32_t
cache_npages(const struct kvstore_params *p, unsigned int c)
{
	uint64_t n = cache_nslots(p, c) / KVSTORE_PAGE_ENTRIES + 1;

	/* Each prompt's tail page is partial; copies on regrowth and limbo need slack. */
	return (uint32_t)(n + p->max_prompts + p->max_prompts / 16 + 64);
}

/*
 * One function lays the region out, for both kvstore_memsize() (s == NULL)
 * and kvstore_init(), so the two cannot disagree.
 */
#define CARVE(ptr, type, count)                                                                    \
	do {                                                                                       \
		off = (off + ALIGN - 1) & ~(size_t)(ALIGN - 1);                                    \
		if (s != NULL)                                                                     \
			(ptr) = (type *)(base + off);                                              \
		off += sizeof(type) * (size_t)(count);                                             \
	} while (0)

static size_t
layout(const struct kvstore_params *p, struct kvstore *s, uint8_t *base, size_t *meta)
{
	size_t off = sizeof(struct kvstore);
	unsigned int c, i;
	uint64_t limbo;
	struct kv_page *pg = NULL;
	struct kv_prompt *pr = NULL;
	uint64_t *u64p = NULL;
	uint32_t *u32p = NULL;
	uint8_t *u8p = NULL;
	struct kv_batch *bp = NULL;
	struct kv_entry *ep = NULL;
	struct kv_stream *sp = NULL;
	struct kvstore_refill *rp = NULL;
	struct kv_rchunk *cp = NULL;
	struct kv_limbo *lp = NULL;

	for (c = 0; c < p->num_caches; c++) {
		uint32_t nslots = cache_nslots(p, c), nblocks = nslots / KVSTORE_BLOCK_SLOTS;
		uint32_t hsize = pow2_at_least((uint64_t)p->max_prompts * 2);
		struct kv_cache *kc = s ? &s->cache[c] : NULL;

		CARVE(u64p, uint64_t, nblocks);
		if (kc)
			kc->free_mask = u64p;
		CARVE(u32p, uint32_t, nblocks);
		if (kc)
			kc->blk_next = u32p;
		CARVE(u32p, uint32_t, nblocks);
		if (kc)
			kc->blk_prev = u32p;
		CARVE(u8p, uint8_t, nblocks);
		if (kc)
			kc->blk_state = u8p;
		CARVE(pr, struct kv_prompt, p->max_prompts);
		if (kc)
			kc->prompts = pr;
		CARVE(u64p, uint64_t, hsize);
		if (kc)
			kc->hkeys = u64p;
		CARVE(u32p, uint32_t, hsize);
		if (kc) {
			kc->hidx = u32p;
			kc->hmask = hsize - 1;
		}
		CARVE(pg, struct kv_page, cache_npages(p, c));
		if (kc)
			kc->pages = pg;
		/* Every object at most once in limbo. */
		limbo = (uint64_t)nslots + cache_npages(p, c) + p->max_prompts;
		CARVE(lp, struct kv_limbo, limbo);
		if (kc) {
			kc->limbo = lp;
			kc->limbo_cap = (uint32_t)limbo;
		}
	}
	CARVE(bp, struct kv_batch, p->max_open_batches);
	if (s)
		s->batches = bp;
	{
		struct kv_hint *hp = NULL;

		CARVE(hp, struct kv_hint, p->max_batch_entries);
		if (s)
			s->hint = hp;
	}
	for (i = 0; i < p->max_open_batches; i++) {
		CARVE(ep, struct kv_entry, p->max_batch_entries);
		CARVE(sp, struct kv_stream, p->num_caches);
		if (s) {
			s->batches[i].e = ep;
			s->batches[i].st = sp;
		}
	}
	CARVE(rp, struct kvstore_refill, p->max_refills);
	if (s)
		s->refills = rp;
	for (i = 0; i < p->max_refills; i++) {
		CARVE(cp, struct kv_rchunk, p->max_refill_chunks);
		if (s)
			s->refills[i].chunks = cp;
	}
	if (meta)
		*meta = (off + ALIGN - 1) & ~(size_t)(ALIGN - 1);
	for (c = 0; c < p->num_caches; c++) {
		size_t sz = (size_t)(cache_nslots(p, c) / KVSTORE_BLOCK_SLOTS) *
			    block_stride(p->cache[c].bytes_per_token);

		CARVE(u8p, uint8_t, sz);
		if (s)
			s->cache[c].data = u8p;
	}
	return (off + ALIGN - 1) & ~(size_t)(ALIGN - 1);
}

size_t
kvstore_memsize(const struct kvstore_params *in)
{
	struct kvstore_params p;

	if (in == NULL || apply_defaults(in, &p) != 0) {
		errno = EINVAL;
		return 0;
	}
	return layout(&p, NULL, NULL, NULL);
}

size_t
kvstore_meta_size(const struct kvstore_params *in)
{
	struct kvstore_params p;
	size_t meta = 0;

	if (in == NULL || apply_defaults(in, &p) != 0) {
		errno = EINVAL;
		return 0;
	}
	layout(&p, NULL, NULL, &meta);
	return meta;
}

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

static void
blk_push(struct kv_cache *c, uint32_t k, enum blk_state st)
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
		blk_push(c, k, want);
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

static void
slot_free(struct kv_cache *c, uint32_t slot)
{
	uint32_t k = slot / KVSTORE_BLOCK_SLOTS;

	c->free_mask[k] |= 1ull << (slot % KVSTORE_BLOCK_SLOTS);
	c->free_slots++;
	blk_settle(c, k);
}

static inline uint8_t *
slot_addr(const struct kv_cache *c, uint32_t slot, uint32_t buffer)
{
	uint32_t k = slot / KVSTORE_BLOCK_SLOTS, lane = slot % KVSTORE_BLOCK_SLOTS;

	return c->data + (size_t)k * c->stride + (size_t)buffer * KVSTORE_BLOCK_SLOTS * c->bb +
	       (size_t)lane * c->bb;
}

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

static void page_release(struct kv_cache *c, uint32_t pg);
static void prompt_release(struct kv_cache *c, uint32_t pi);

static void
limbo_free(struct kv_cache *c, const struct kv_limbo *l)
{
	uint32_t index = l->object & ((1u << 30) - 1);

	switch (l->object >> 30) {
	case L_SLOT:
		c->limbo_slots--;
		slot_free(c, index);
		break;
	case L_PAGE:
		page_release(c, index);
		break;
	default:
		prompt_release(c, index);
		break;
	}
}

/* Reuse what no refill in flight can still reference. */
static void
reclaim(struct kvstore *s)
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
			if (++c->limbo_head == c->limbo_cap)
				c->limbo_head = 0;
			c->limbo_n--;
		}
	}
}

/*
 * Retire an object the owner has just unlinked. Objects retired before the
 * next retire_close() share its tag; the reader cannot reach them once it
 * starts later (see kvstore_refill_begin()).
 */
static void
retire(struct kvstore *s, uint16_t cache, enum limbo_type type, uint32_t index)
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
static void
retire_close(struct kvstore *s)
{
	__atomic_fetch_add(&s->epoch, 1, __ATOMIC_SEQ_CST);
	/* With no refill in flight, nothing waits: reuse at once. */
	reclaim(s);
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

static void
page_release(struct kv_cache *c, uint32_t pg)
{
	st_rlx(&c->pages[pg].next, c->page_free);
	c->page_free = pg;
}

static void
prompt_release(struct kv_cache *c, uint32_t pi)
{
	c->prompts[pi].free_next = c->prompt_free;
	c->prompt_free = pi;
}

static inline uint32_t
hash_pos(uint64_t id, uint32_t mask)
{
	id ^= id >> 33;
	id *= 0xff51afd7ed558ccdULL;
	id ^= id >> 33;
	return (uint32_t)id & mask;
}

/* Owner lookup: the record index of @id, or NIL. */
static uint32_t
prompt_find(const struct kv_cache *c, uint64_t id)
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

/* Reader lookup: tolerates the owner inserting, deleting and rebuilding. */
static uint32_t
prompt_find_rd(const struct kv_cache *c, uint64_t id)
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

static void
hash_remove(struct kv_cache *c, uint64_t id)
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
static struct kv_page *
page_of(const struct kv_cache *c, const struct kv_prompt *p, uint32_t rel)
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
	retire(s, ci, L_PAGE, old);
	retire_close(s);
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
	st_rel(&p->id, id);
	hash_insert(c, id, pi);
	c->nprompts++;
	return pi;
}

/*
 * Remove relative indices [rel, n_claim) of prompt @pi. Published tokens'
 * slots are retired; tokens still in open batches are marked dead there and
 * their slots go back when their batch completes. A prompt left empty is
 * forgotten. Reports each removed token through @fn when given.
 */
static uint32_t
prompt_truncate(struct kvstore *s, uint16_t ci, uint32_t pi, uint32_t rel, kvstore_lost_fn fn,
		void *arg)
{
	struct kv_cache *c = &s->cache[ci];
	struct kv_prompt *p = &c->prompts[pi];
	uint32_t n_pub = p->n_pub, n_claim = p->n_claim, r, removed = n_claim - rel;
	struct kv_page *pg;
	uint64_t b;

	if (rel > n_claim || (rel == n_claim && rel != 0))
		return 0;
	/* Unpublish first so that no refill begun from now on reaches them. */
	if (n_pub > rel)
		__atomic_store_n(&p->n_pub, rel, __ATOMIC_SEQ_CST);
	p->n_claim = rel;
	c->stored -= removed;

	/* Published tokens: retire their slots. */
	pg = rel < n_pub ? page_of(c, p, rel) : NULL;
	for (r = rel; r < n_pub && pg != NULL; r++) {
		retire(s, ci, L_SLOT, pg->slot[r % KVSTORE_PAGE_ENTRIES]);
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
		for (r = rel; r < n_claim; r++)
			fn(arg, ci, p->id, p->offset + r);

	/* Pages wholly past the new end go; a cut tail page is marked dirty. */
	while (p->npages > (rel + KVSTORE_PAGE_ENTRIES - 1) / KVSTORE_PAGE_ENTRIES) {
		uint32_t t = p->tail;

		p->tail = c->pages[t].prev;
		if (p->tail == NIL)
			st_rel(&p->head, NIL);
		else
			st_rel(&c->pages[p->tail].next, NIL);
		p->npages--;
		retire(s, ci, L_PAGE, t);
	}
	if (p->tail != NIL && rel % KVSTORE_PAGE_ENTRIES != 0)
		c->pages[p->tail].dirty = 1;
	if (rel == 0) {
		uint64_t id = p->id;

		__atomic_store_n(&p->id, 0, __ATOMIC_SEQ_CST);
		hash_remove(c, id);
		c->nprompts--;
		retire(s, ci, L_PROMPT, pi);
	}
	retire_close(s);
	return removed;
}

/* ---- Init ---------------------------------------------------------------- */

struct kvstore *
kvstore_init(void *mem, size_t len, const struct kvstore_params *in)
{
	struct kvstore_params p;
	struct kvstore *s = mem;
	unsigned int ci, i;

	if (mem == NULL || in == NULL || ((uintptr_t)mem & (ALIGN - 1)) != 0 ||
	    apply_defaults(in, &p) != 0) {
		errno = EINVAL;
		return NULL;
	}
	if (len < layout(&p, NULL, NULL, NULL)) {
		errno = ENOSPC;
		return NULL;
	}
	memset(s, 0, sizeof(*s));
	s->p = p;
	layout(&p, s, mem, NULL);
	for (ci = 0; ci < p.num_caches; ci++) {
		struct kv_cache *c = &s->cache[ci];
		uint32_t k, np;

		c->B = p.cache[ci].bytes_per_token;
		c->nb = p.cache[ci].num_buffers;
		c->bb = c->B / c->nb;
		c->stride = block_stride(c->B);
		c->capacity = p.cache[ci].capacity_tokens;
		c->nslots = cache_nslots(&p, ci);
		c->nblocks = c->nslots / KVSTORE_BLOCK_SLOTS;
		c->empty_head = c->partial_head = NIL;
		for (k = c->nblocks; k-- > 0;) {
			c->free_mask[k] = ~0ull;
			blk_push(c, k, BLK_EMPTY);
		}
		c->free_slots = c->nslots;
		c->max_prompts = p.max_prompts;
		c->prompt_free = NIL;
		for (i = p.max_prompts; i-- > 0;) {
			c->prompts[i].id = 0;
			prompt_release(c, i);
		}
		for (i = 0; i <= c->hmask; i++) {
			c->hkeys[i] = 0;
			c->hidx[i] = TOMB;
		}
		np = cache_npages(&p, ci);
		c->page_free = NIL;
		for (i = np; i-- > 0;)
			page_release(c, i);
		c->npages = np;
	}
	for (i = 0; i < p.max_open_batches; i++)
		s->batches[i].no = 0;
	for (i = 0; i < p.max_batch_entries; i++)
		s->hint[i] = (struct kv_hint){0, NIL};
	for (i = 0; i < p.max_refills; i++) {
		s->refills[i].ticket = 0;
		s->refills[i].s = s;
	}
	s->next_batch = 1;
	s->epoch = 1;
	return s;
}

const struct kvstore_params *
kvstore_params(const struct kvstore *s)
{
	return &s->p;
}

/* ---- Batches --------------------------------------------------------------- */

void
kvstore_reserve(struct kvstore *s, const struct proto_reserve *r)
{
	(void)r;
	s->stats.reserves++;
}

static inline struct kv_batch *
batch_get(struct kvstore *s, uint64_t no)
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
			retire(s, ci, L_SLOT, e->slot);
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
		/* Overwrite: swap the slot in; the old one waits for refills. */
		pg = page_of(c, p, rel);
		retire(s, ci, L_SLOT, pg->slot[rel % KVSTORE_PAGE_ENTRIES]);
		__atomic_store_n(&pg->slot[rel % KVSTORE_PAGE_ENTRIES], e->slot, __ATOMIC_SEQ_CST);
		retired = true;
	}
	if (retired)
		retire_close(s);
	st_rel(&s->batches_complete, b->no);
	b->no = 0;
}

/* Publish every done batch at the head of the open window, in order. */
static void
batches_advance(struct kvstore *s)
{
	struct kv_batch *b;

	while (s->oldest_open != 0 && (b = batch_get(s, s->oldest_open)) != NULL && b->done) {
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
 * needs: exact when every entry is legal.
 */
static void
evict_needs(struct kvstore *s, uint16_t nc, uint32_t n, const struct proto_evict_entry *e,
	    struct kv_entry *be, uint64_t *add, uint64_t *slots)
{
	uint32_t i;

	for (i = 0; i < n; i++) {
		uint16_t ci = (uint16_t)(i % nc);
		struct kv_cache *c = &s->cache[ci];
		uint32_t pi;

		be[i].prompt = NIL;
		if (e[i].prompt_id == 0)
			continue;
		slots[ci]++;
		/* Remembered for evict_one(), which would look it up again. */
		pi = be[i].prompt = prompt_find(c, e[i].prompt_id);
		if (pi == NIL ||
		    e[i].token_idx >= c->prompts[pi].offset + c->prompts[pi].n_claim)
			add[ci]++;
	}
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
		pi = prompt_find(c, e->prompt_id);
	be->kind = E_DISCARD;
	be->prompt = NIL;
	be->slot = NIL;
	be->token = e->token_idx;
	if (pi != NIL) {
		p = &c->prompts[pi];
		if (e->token_idx < p->offset)
			return PROTO_E_LEFT_GROWTH;
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
		if (c->stored >= c->capacity || c->free_slots == 0)
			return PROTO_E_NO_SPACE;
		pi = prompt_create(c, e->prompt_id, e->token_idx);
		if (pi == NIL)
			return PROTO_E_NO_SPACE;
		created = true;
		p = &c->prompts[pi];
		rel = 0;
	}
	/* Growth on the right. */
	if (c->stored >= c->capacity)
		return PROTO_E_NO_SPACE;
	pg = page_for_growth(s, ci, p, rel);
	slot = pg == NULL ? NIL : slot_alloc(c, p->last_slot);
	if (slot == NIL) {
		if (created)
			prompt_truncate(s, ci, pi, 0, NULL, NULL);
		return PROTO_E_NO_SPACE;
	}
	__atomic_store_n(&pg->slot[rel % KVSTORE_PAGE_ENTRIES], slot, __ATOMIC_RELEASE);
	p->n_claim = rel + 1;
	p->last_slot = slot;
	c->stored++;
	be->kind = E_GROW;
	be->prompt = pi;
	be->slot = slot;
	s->stats.evicted_tokens++;
	return 0;
}

int
kvstore_evict(struct kvstore *s, uint64_t batch_no, uint16_t num_caches, uint16_t g,
	      const struct proto_evict_entry *e, uint16_t *codes, unsigned int flags)
{
	uint32_t n = (uint32_t)g * num_caches, i;
	struct kv_batch *b;

	if (batch_no != s->next_batch)
		return -EINVAL;
	if (s->oldest_open != 0 && batch_no - s->oldest_open >= s->p.max_open_batches)
		return -EBUSY;
	if (num_caches != s->p.num_caches) {
		/* BAD_CACHE: complete at once, its data discarded. */
		b = batch_open(s, batch_no, 0, 0);
		batches_advance(s);
		return -EPROTO;
	}
	if (n > s->p.max_batch_entries)
		return -EINVAL;
	/* The ring slot of this batch is free (the window check above). */
	b = &s->batches[batch_no % s->p.max_open_batches];
	for (i = 0; i < n; i++)
		b->e[i].prompt = NIL;
	if (!(flags & KVSTORE_EVICT_FORCE) && !evict_surely_fits(s, g)) {
		uint64_t add[KVSTORE_MAX_CACHES] = {0}, slots[KVSTORE_MAX_CACHES] = {0};
		unsigned int c;

		evict_needs(s, num_caches, n, e, b->e, add, slots);
		for (c = 0; c < num_caches; c++) {
			struct kv_cache *kc = &s->cache[c];

			if (kc->stored + add[c] > kc->capacity)
				return -ENOSPC;
			if (kc->free_slots < slots[c]) {
				reclaim(s);
				if (kc->free_slots < slots[c])
					return -ENOSPC;
			}
		}
	} else if (flags & KVSTORE_EVICT_FORCE) {
		reclaim(s);
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
			if (code == PROTO_E_HOLE && (flags & KVSTORE_EVICT_FORCE)) {
				uint32_t j;

				for (j = i % num_caches; j < i; j += num_caches)
					if (e[j].prompt_id == e[i].prompt_id && codes != NULL &&
					    codes[j] == PROTO_E_NO_SPACE)
						code = PROTO_E_NO_SPACE;
			}
		}
		else
			b->e[i] = (struct kv_entry){.prompt = NIL, .slot = NIL, .kind = E_DISCARD,
						    .token = e[i].token_idx};
		if (b->e[i].kind == E_DISCARD)
			s->stats.discarded_entries++;
		if (codes != NULL)
			codes[i] = code;
	}
	batches_advance(s);
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
static inline void
copy_in(uint8_t *dst, const uint8_t *src, uint32_t n)
{
#if defined(__SSE2__)
	if (n >= 256) {
		uint32_t head = (uint32_t)(-(uintptr_t)dst & 15);

		if (head != 0)
			memcpy(dst, src, head);
		dst += head;
		src += head;
		n -= head;
		for (; n >= 64; n -= 64, dst += 64, src += 64) {
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

/* Copy bytes [x, x + len) of a token (buffer-major slot layout). */
static inline void
token_write(const struct kv_cache *c, uint32_t slot, uint32_t x, const uint8_t *src, uint32_t len)
{
	while (len > 0) {
		uint32_t buf = x / c->bb, in = x % c->bb;
		uint32_t n = c->bb - in < len ? c->bb - in : len;

		copy_in(slot_addr(c, slot, buf) + in, src, n);
		src += n;
		x += n;
		len -= n;
	}
}

int
kvstore_data(struct kvstore *s, uint64_t batch_no, uint16_t cache_id, uint32_t stream_offset,
	     uint32_t stream_len, const void *payload, uint32_t len)
{
	struct kv_batch *b = batch_get(s, batch_no);
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
		batches_advance(s);
	}
	return 0;
}

struct lose_ctx {
	kvstore_lost_fn fn;
	void *arg;
	int count;
};

static void
count_lost(void *arg, uint16_t cache_id, uint64_t prompt_id, uint32_t token_idx)
{
	struct lose_ctx *l = arg;

	l->count++;
	if (l->fn != NULL)
		l->fn(l->arg, cache_id, prompt_id, token_idx);
}

int
kvstore_batch_lose(struct kvstore *s, uint64_t batch_no, kvstore_lost_fn fn, void *arg)
{
	struct kv_batch *b;
	struct lose_ctx l = {fn, arg, 0};
	uint32_t i, n;

	if (batch_no == 0 || batch_no != s->oldest_open || (b = batch_get(s, batch_no)) == NULL)
		return -EINVAL;
	n = (uint32_t)b->g * b->nc;
	for (i = 0; i < n; i++) {
		struct kv_entry *e = &b->e[i];
		uint16_t ci = (uint16_t)(i % b->nc);
		struct kv_prompt *p;

		if ((e->flags & (EF_COMPLETE | EF_DEAD)) || e->kind == E_DISCARD)
			continue;
		/* A token missing bytes truncates its prompt there. */
		p = &s->cache[ci].prompts[e->prompt];
		prompt_truncate(s, ci, e->prompt, e->token - p->offset, count_lost, &l);
		/* An overwrite past the new end, or itself lost: dead too. */
		e->flags |= EF_DEAD;
	}
	b->done = true;
	s->stats.batches_lost++;
	s->stats.lost_tokens += (uint64_t)l.count;
	batches_advance(s);
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
	c = &s->cache[d->cache_id];
	pi = prompt_find(c, d->prompt_id);
	if (d->prompt_id == 0 || pi == NIL)
		return PROTO_E_UNKNOWN_PROMPT;
	if (d->start_token_idx > d->end_token_idx)
		return PROTO_E_MALFORMED;
	p = &c->prompts[pi];
	last = p->offset + p->n_claim - 1;
	if (d->start_token_idx < p->offset || d->end_token_idx > last)
		return PROTO_E_RANGE;
	if (d->end_token_idx < last)
		return PROTO_E_DELETE_NOT_RIGHT;
	s->stats.deleted_tokens +=
		prompt_truncate(s, d->cache_id, pi, d->start_token_idx - p->offset, NULL, NULL);
	return 0;
}

void
kvstore_reset(struct kvstore *s)
{
	unsigned int ci;
	uint64_t b;
	uint32_t i;

	/* Every prompt goes; this marks the open batches' entries dead. */
	for (ci = 0; ci < s->p.num_caches; ci++) {
		struct kv_cache *c = &s->cache[ci];

		for (i = 0; i < c->max_prompts; i++)
			if (c->prompts[i].id != 0)
				prompt_truncate(s, (uint16_t)ci, i, 0, NULL, NULL);
	}
	/* Open batches are dropped: their slots go back (after refills end). */
	for (b = s->oldest_open; s->oldest_open != 0 && b < s->next_batch; b++) {
		struct kv_batch *bt = batch_get(s, b);

		if (bt == NULL)
			continue;
		for (i = 0; i < (uint32_t)bt->g * bt->nc; i++)
			if (bt->e[i].kind != E_DISCARD)
				retire(s, (uint16_t)(i % bt->nc), L_SLOT, bt->e[i].slot);
		bt->no = 0;
	}
	s->oldest_open = 0;
	s->next_batch = 1;
	st_rel(&s->batches_complete, 0);
	retire_close(s);
}

/* ---- Refills (reader) ------------------------------------------------------ */

struct kvstore_refill *
kvstore_refill_begin(struct kvstore *s, uint16_t cache_id, const struct proto_refill_chunk *chunks,
		     unsigned int n, uint16_t *code)
{
	struct kvstore_refill *r = NULL;
	struct kv_cache *c;
	uint64_t tokens = 0;
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
	 * reach (it was unlinked before the epoch we read).
	 */
	__atomic_store_n(&r->ticket, __atomic_load_n(&s->epoch, __ATOMIC_SEQ_CST),
			 __ATOMIC_SEQ_CST);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);

	c = &s->cache[cache_id];
	for (i = 0; i < n; i++) {
		uint32_t pi = prompt_find_rd(c, chunks[i].prompt_id);
		struct kv_prompt *p;
		uint32_t off, npub;

		if (chunks[i].prompt_id == 0 || pi == NIL) {
			*code = PROTO_E_UNKNOWN_PROMPT;
			break;
		}
		p = &c->prompts[pi];
		off = p->offset;
		npub = __atomic_load_n(&p->n_pub, __ATOMIC_SEQ_CST);
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
		/* A token is read from one slot, one version, even across calls. */
		slot = pos->byte != 0 ? pos->slot
				      : __atomic_load_n(&pg->slot[rel % KVSTORE_PAGE_ENTRIES],
							__ATOMIC_SEQ_CST);
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
	pi = prompt_find(c, prompt_id);
	if (pi == NIL)
		return -ENOENT;
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
	pi = prompt_find(c, prompt_id);
	if (pi == NIL)
		return -ENOENT;
	p = &c->prompts[pi];
	if (token_idx < p->offset || token_idx - p->offset >= p->n_pub)
		return -ENOENT;
	rel = token_idx - p->offset;
	pg = page_of(c, p, rel);
	slot = pg->slot[rel % KVSTORE_PAGE_ENTRIES];
	for (b = 0; b < c->nb; b++)
		memcpy((uint8_t *)out + (size_t)b * c->bb, slot_addr(c, slot, b), c->bb);
	return 0;
}
