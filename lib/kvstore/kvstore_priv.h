/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * lib/kvstore's insides, shared by its files: kvstore.c (the owner's write
 * path: slots, prompts, batches, data, deletes, reclamation),
 * kvstore_read.c (the lock-free reader: refills) and kvstore_layout.c
 * (parameters, the memory layout, init). Fields the reader loads while the
 * owner may write them are accessed with __atomic builtins and marked "rd";
 * all others are the owner's alone. Nothing outside lib/kvstore includes it.
 */
#ifndef KVSTORE_PRIV_H
#define KVSTORE_PRIV_H

#include "kvstore.h"

#include <errno.h>
#include <string.h>

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
	uint32_t lost_at;    /* a loss cut it here (KV_NOT_LOST: none): EVICTs from it refused */
};

#define KV_NOT_LOST UINT32_MAX

enum blk_state { BLK_EMPTY, BLK_PARTIAL, BLK_FULL };

struct kv_cache {
	uint32_t B;  /* bytes per token */
	uint32_t nb; /* buffers */
	uint32_t bb; /* bytes per token per buffer */
	uint64_t capacity;
	uint32_t nslots, nblocks;
	uint8_t *data; /* block k at data + k * stride, buffer-major inside */
	/*
	 * Versions. An overwrite's slot, when its batch is published, records
	 * the slot it replaced (vprev, rd) and the epoch it was published in
	 * (vborn, rd; 0 for a slot never published as an overwrite). A refill
	 * that began with a ticket <= vborn reads vprev instead, in every
	 * buffer, so all of a token's buffers come from the version the refill
	 * began with; vprev is in limbo until that refill ends (its retire tag
	 * is vborn), so it is whole.
	 */
	uint32_t *vprev;
	uint64_t *vborn;
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
	/* Bumped by whatever may make room: a DELETE, a loss, a batch run or
	 * completed, slots reclaimed, a reset (kvstore_room). */
	uint64_t room_gen;
	struct kvstore_stats stats;
};

static inline uint8_t *
slot_addr(const struct kv_cache *c, uint32_t slot, uint32_t buffer)
{
	uint32_t k = slot / KVSTORE_BLOCK_SLOTS, lane = slot % KVSTORE_BLOCK_SLOTS;

	return c->data + (size_t)k * c->stride + (size_t)buffer * KVSTORE_BLOCK_SLOTS * c->bb +
	       (size_t)lane * c->bb;
}

static inline uint32_t
hash_pos(uint64_t id, uint32_t mask)
{
	id ^= id >> 33;
	id *= 0xff51afd7ed558ccdULL;
	id ^= id >> 33;
	return (uint32_t)id & mask;
}

/* ---- Between the files ---- */

/* The slot table page holding relative token @p rel of @p p (owner; kvstore.c). */
struct kv_page *kv_page_of(const struct kv_cache *c, const struct kv_prompt *p, uint32_t rel);

/* The owner's lookup of prompt @p id: its record index, or NIL (kvstore.c). */
uint32_t kv_prompt_find(const struct kv_cache *c, uint64_t id);

/* The write path's pieces the other owner files call (kvstore.c). */
void kv_blk_push(struct kv_cache *c, uint32_t k, enum blk_state st);
void kv_slot_free(struct kv_cache *c, uint32_t slot);
void kv_hash_remove(struct kv_cache *c, uint64_t id);
/* Batch @p no's ring slot when it holds that batch, else NULL; @p s const so
 * that read-only callers (kvstore_batch_unseen) can ask too. */
struct kv_batch *kv_batch_get(const struct kvstore *s, uint64_t no);
void kv_batches_advance(struct kvstore *s);

/* Deletions and reclamation (kvstore_delete.c): retire a page or prompt
 * record until no refill in flight can read it, close the retirement
 * ticket, free what no refill can read any more; release records; cut
 * prompt @p pi back to relative token @p rel, reporting each stored token
 * dropped to @p fn (may be NULL), returning how many. */
void kv_retire(struct kvstore *s, uint16_t cache, enum limbo_type type, uint32_t index);
void kv_retire_close(struct kvstore *s);
void kv_reclaim(struct kvstore *s);
void kv_page_release(struct kv_cache *c, uint32_t pg);
void kv_prompt_release(struct kv_cache *c, uint32_t pi);
uint32_t kv_prompt_truncate(struct kvstore *s, uint16_t ci, uint32_t pi, uint32_t rel, bool lost, kvstore_lost_fn fn,
			    void *arg);

/* The reader's lookup (kvstore_read.c): tolerates the owner changing the table. */
uint32_t kv_prompt_find_rd(const struct kv_cache *c, uint64_t id);

/* Sizes of cache @p c's slots, slot stride, pages (kvstore_layout.c). */
uint32_t kv_cache_nslots(const struct kvstore_params *p, unsigned int c);
size_t kv_block_stride(uint32_t B);
uint32_t kv_cache_npages(const struct kvstore_params *p, unsigned int c);

/* Lay the store out in @p base (NULL: measure only); *@p meta the metadata bytes (kvstore_layout.c). */
size_t kv_layout(const struct kvstore_params *p, struct kvstore *s, uint8_t *base, size_t *meta);

/* @p in with every default filled in, checked: 0, or -EINVAL (kvstore_layout.c). */
int kv_apply_defaults(const struct kvstore_params *in, struct kvstore_params *p);

#endif
