/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * lib/kvstore's parameters and memory layout (kvstore_priv.h): defaults
 * filled in and checked, and every array carved out of the caller's memory
 * (or only measured, for kvstore_memsize), and kvstore_init, which lays
 * the store out and links every free block, page and prompt record.
 */
#include "kvstore_priv.h"

/* ---- Parameters and layout ---------------------------------------------- */

static uint32_t
pow2_at_least(uint64_t v)
{
	uint32_t r = 1;

	while (r < v && r < (1u << 31))
		r <<= 1;
	return r;
}

int
kv_apply_defaults(const struct kvstore_params *in, struct kvstore_params *p)
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

uint32_t
kv_cache_nslots(const struct kvstore_params *p, unsigned int c)
{
	uint64_t n = p->cache[c].capacity_tokens + p->spare_tokens;

	return (uint32_t)((n + KVSTORE_BLOCK_SLOTS - 1) / KVSTORE_BLOCK_SLOTS * KVSTORE_BLOCK_SLOTS);
}

/*
 * Blocks are 64 x B bytes plus one cache line. Without it, the same lane of
 * different blocks sits a multiple of 64 x B apart, and prompts that start
 * together (each in a fresh block) write one cache set over and over.
 */
size_t
kv_block_stride(uint32_t B)
{
	return (size_t)KVSTORE_BLOCK_SLOTS * B + ALIGN;
}

uint32_t
kv_cache_npages(const struct kvstore_params *p, unsigned int c)
{
	uint64_t n = kv_cache_nslots(p, c) / KVSTORE_PAGE_ENTRIES + 1;

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

size_t
kv_layout(const struct kvstore_params *p, struct kvstore *s, uint8_t *base, size_t *meta)
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
		uint32_t nslots = kv_cache_nslots(p, c), nblocks = nslots / KVSTORE_BLOCK_SLOTS;
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
		CARVE(u32p, uint32_t, nslots);
		if (kc)
			kc->vprev = u32p;
		CARVE(u64p, uint64_t, nslots);
		if (kc)
			kc->vborn = u64p;
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
		CARVE(pg, struct kv_page, kv_cache_npages(p, c));
		if (kc)
			kc->pages = pg;
		/* Every object at most once in limbo. */
		limbo = (uint64_t)nslots + kv_cache_npages(p, c) + p->max_prompts;
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
		size_t sz = (size_t)(kv_cache_nslots(p, c) / KVSTORE_BLOCK_SLOTS) *
			    kv_block_stride(p->cache[c].bytes_per_token);

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

	if (in == NULL || kv_apply_defaults(in, &p) != 0) {
		errno = EINVAL;
		return 0;
	}
	return kv_layout(&p, NULL, NULL, NULL);
}

size_t
kvstore_meta_size(const struct kvstore_params *in)
{
	struct kvstore_params p;
	size_t meta = 0;

	if (in == NULL || kv_apply_defaults(in, &p) != 0) {
		errno = EINVAL;
		return 0;
	}
	kv_layout(&p, NULL, NULL, &meta);
	return meta;
}

const struct kvstore_params *
kvstore_params(const struct kvstore *s)
{
	return &s->p;
}

/* ---- Init ---------------------------------------------------------------- */

struct kvstore *
kvstore_init(void *mem, size_t len, const struct kvstore_params *in)
{
	struct kvstore_params p;
	struct kvstore *s = mem;
	unsigned int ci, i;

	if (mem == NULL || in == NULL || ((uintptr_t)mem & (ALIGN - 1)) != 0 ||
	    kv_apply_defaults(in, &p) != 0) {
		errno = EINVAL;
		return NULL;
	}
	if (len < kv_layout(&p, NULL, NULL, NULL)) {
		errno = ENOSPC;
		return NULL;
	}
	memset(s, 0, sizeof(*s));
	s->p = p;
	kv_layout(&p, s, mem, NULL);
	for (ci = 0; ci < p.num_caches; ci++) {
		struct kv_cache *c = &s->cache[ci];
		uint32_t k, np;

		c->B = p.cache[ci].bytes_per_token;
		c->nb = p.cache[ci].num_buffers;
		c->bb = c->B / c->nb;
		c->stride = kv_block_stride(c->B);
		c->capacity = p.cache[ci].capacity_tokens;
		c->nslots = kv_cache_nslots(&p, ci);
		c->nblocks = c->nslots / KVSTORE_BLOCK_SLOTS;
		c->empty_head = c->partial_head = NIL;
		for (k = c->nblocks; k-- > 0;) {
			c->free_mask[k] = ~0ull;
			kv_blk_push(c, k, BLK_EMPTY);
		}
		c->free_slots = c->nslots;
		/* No slot was published as an overwrite yet (a refill's ticket is >= 1). */
		memset(c->vborn, 0, (size_t)c->nslots * sizeof(c->vborn[0]));
		c->max_prompts = p.max_prompts;
		c->prompt_free = NIL;
		for (i = p.max_prompts; i-- > 0;) {
			c->prompts[i].id = 0;
			kv_prompt_release(c, i);
		}
		for (i = 0; i <= c->hmask; i++) {
			c->hkeys[i] = 0;
			c->hidx[i] = TOMB;
		}
		np = kv_cache_npages(&p, ci);
		c->page_free = NIL;
		for (i = np; i-- > 0;)
			kv_page_release(c, i);
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
