/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef KVSS_KVSTORE_H
#define KVSS_KVSTORE_H

/**
 * @file
 * The shard's storage engine: stores evicted KV bytes and replays them,
 * enforcing the storage rules of PROTOCOL.md section 4.
 *
 * Memory: one region sized up front by kvstore_memsize(), given by the caller
 * (hugepage memory in the app, plain memory in tests). Nothing is allocated
 * per token, frame or message.
 *
 * Layout: each cache has a pool of token slots (capacity + spare) grouped in
 * blocks of KVSTORE_BLOCK_SLOTS; inside a block, bytes are laid out buffer by
 * buffer, so consecutive slots of one block are contiguous in every buffer
 * and a refill of consecutive tokens becomes one segment per buffer and
 * block. Each prompt has a range [offset, offset + n) and a table from token
 * to slot, in pages of KVSTORE_PAGE_ENTRIES entries: the token's bytes may be
 * anywhere. Metadata is about 48 bytes per token of capacity (4 for the
 * table, 8 for the limbo ring, 12 for each slot's version, the rest per
 * prompt and per batch).
 *
 * Threads. One thread, the owner (the ingest lcore), makes every call that
 * changes the store: reserve, evict, data, delete, batch loss, reset. One
 * other thread, the reader (the refill lcore), may at the same time build
 * refills: kvstore_refill_begin(), _next(), and read batches_complete.
 * kvstore_refill_end() may be called from any thread. So there is a single
 * writer and no lock anywhere: the reader sees published state through
 * acquire loads, and whatever the owner frees (slots, table pages, prompt
 * records) is retired to a limbo ring and reused only once every refill that
 * began before it has ended (epoch-based reclamation), so memory a refill
 * references is never rewritten under it. A refill must end within 2^31
 * retire groups (deletes and overwriting batches) of its start. The refill queue's DELETEs are
 * gated by the reader but applied by the owner (the app passes them over a
 * ring), which keeps the single writer.
 *
 * Overwrites (speculative decoding) land in a fresh slot and replace the old
 * one atomically when their batch is published: a refill sees the old token
 * or the new one, never a mix, and the same one in every buffer: the new
 * slot remembers the one it replaced and the epoch it was published in, and
 * a refill that began before reads the old slot (kept for it in limbo) in
 * each of its buffers' transfers, however they interleave with publishing.
 *
 * Batches: evicted tokens become readable when their batch is published,
 * which happens in batch order once a batch's streams are whole or it was
 * declared lost. batches_complete counts published batches; REFILL and DELETE
 * gate on it.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto.h"

#ifdef __cplusplus
extern "C" {
#endif

#define KVSTORE_MAX_CACHES 16
/** Slots per allocation block (one 64-bit free mask per block). */
#define KVSTORE_BLOCK_SLOTS 64
/** Slot ids per table page (the page is 256 bytes). */
#define KVSTORE_PAGE_ENTRIES 60
/** Disjoint received ranges tracked per stream of an open batch. */
#define KVSTORE_MAX_HOLES 64

struct kvstore_cache_params {
	uint32_t bytes_per_token; /**< B_c, this shard's slice; multiple of num_buffers */
	uint16_t num_buffers;	  /**< wafer buffers per token (>= 1) */
	uint64_t capacity_tokens; /**< tokens this cache must be able to hold */
};

struct kvstore_params {
	uint16_t num_caches;
	struct kvstore_cache_params cache[KVSTORE_MAX_CACHES];
	/** Prompts per cache at most; 0: capacity / 32, at least 1024. */
	uint32_t max_prompts;
	/**
	 * Slots per cache beyond capacity, for overwrites in flight and for
	 * memory that refills still reference after a delete; 0: capacity / 256,
	 * at least 512. When they run out an evict waits (-ENOSPC) as if full.
	 */
	uint32_t spare_tokens;
	/** EVICT batches open (data still arriving) at once; 0: 64. */
	uint16_t max_open_batches;
	/** Largest G x C of one batch; 0: 557 (MTU 9000). */
	uint16_t max_batch_entries;
	/** Refills in flight at once; 0: 128. */
	uint16_t max_refills;
	/** Chunks per refill request; 0: 256. */
	uint16_t max_refill_chunks;
};

struct kvstore;

/**
 * Bytes of memory a store with these parameters needs: the token slots
 * (sum over caches of (capacity + spare) x B_c) plus metadata.
 * @return the size, or 0 if @p p is invalid (errno EINVAL).
 */
size_t kvstore_memsize(const struct kvstore_params *p);

/** Of kvstore_memsize(): the bytes that are not token slots. */
size_t kvstore_meta_size(const struct kvstore_params *p);

/**
 * Create a store in @p mem (64-byte aligned, kvstore_memsize() bytes).
 * @return the store, or NULL with errno EINVAL (bad parameters, misaligned)
 *   or ENOSPC (@p len too small).
 */
struct kvstore *kvstore_init(void *mem, size_t len, const struct kvstore_params *p);

/** The parameters after defaults were applied. */
const struct kvstore_params *kvstore_params(const struct kvstore *s);

/* ---- Owner calls --------------------------------------------------------- */

/** A hint (RESERVE): never fails, never blocks. Counted, otherwise unused: slots are allocated next to the prompt's last one, which gives contiguity without reservations. */
void kvstore_reserve(struct kvstore *s, const struct proto_reserve *r);

/** kvstore_evict() flag: after the space timeout, store what fits and answer NO_SPACE for the rest instead of returning -ENOSPC. */
#define KVSTORE_EVICT_FORCE 0x1

/**
 * Execute one EVICT message: batch @p batch_no of @p g tokens x @p num_caches
 * entries (entry c of token t at @p e[t * num_caches + c]).
 *
 * Each entry is checked alone: growth on the right, overwrite in place, or a
 * new prompt are accepted; anything else gets its error code in @p codes
 * (HOLE, LEFT_GROWTH, NO_SPACE with FORCE: growth past a token refused for
 * room is NO_SPACE too, its cause), and its data will be discarded. A token
 * named twice in one batch: the later entry wins. prompt_id 0 consumes data
 * and stores nothing. With FORCE, @p codes must be given.
 *
 * @param codes one code per entry (0 = accepted), or NULL.
 * @return 0 when the batch was opened (some entries may carry codes);
 *   -ENOSPC if its new tokens do not fit the capacity (or no spare slot is
 *   free): nothing changed, retry after deletes, or pass FORCE;
 *   -EBUSY if max_open_batches are open: retry after completions;
 *   -EINVAL if @p batch_no is not the next batch, or the batch is too big;
 *   -EPROTO if @p num_caches is not the store's: the batch counts as complete
 *   at once with no tokens, and the caller answers BAD_CACHE.
 */
int kvstore_evict(struct kvstore *s, uint64_t batch_no, uint16_t num_caches, uint16_t g,
		  const struct proto_evict_entry *e, uint16_t *codes, unsigned int flags);

/**
 * What an EVICT refused for room (-ENOSPC or -EBUSY, without FORCE) was
 * refused on: the store's state that can make room, and the oldest refill
 * in flight while retired slots wait for refills to end. Take the look
 * just before the try it stands for: when a later look equals it field by
 * field, the same EVICT would be refused again, and need not be tried (a
 * full store's waiting EVICT decodes and looks up all its entries at every
 * try). Taken after the try, a refill that ended in between (on another
 * lcore) would be in the look and not in the try: the EVICT would wait
 * for nothing. Owner only.
 */
struct kvstore_room {
	uint64_t gen;
	uint64_t oldest_reader;
};
void kvstore_room(const struct kvstore *s, struct kvstore_room *r);

/**
 * Store one EVICT_DATA fragment: @p len bytes at @p stream_offset of batch
 * @p batch_no's stream for @p cache_id, whose length is @p stream_len.
 * Fragments may overlap, repeat, and come in any order.
 *
 * @return 0 when consumed; -EAGAIN if the batch's EVICT has not been seen
 *   (the caller may hold the fragment and retry); -ESTALE if the batch is
 *   already complete (drop); -EINVAL if the cache or stream_len do not match
 *   the batch, or the range is outside the stream; -E2BIG if the stream has
 *   too many disjoint holes to track (dropped; the batch may end lost).
 */
int kvstore_data(struct kvstore *s, uint64_t batch_no, uint16_t cache_id, uint32_t stream_offset,
		 uint32_t stream_len, const void *payload, uint32_t len);

/**
 * Has batch @p batch_no's EVICT not been seen yet? Then kvstore_data() of
 * any fragment of it answers -EAGAIN: what a caller holding fragments asks
 * before it reads one again.
 */
bool kvstore_batch_unseen(const struct kvstore *s, uint64_t batch_no);

/**
 * Called once for every cut a loss makes: tokens [@p first, @p first +
 * @p count) of the prompt removed (a version 2 TOKEN_LOST record). A cut
 * that removed nothing (the prompt already ended there) has count 0.
 */
typedef void (*kvstore_lost_fn)(void *arg, uint16_t cache_id, uint64_t prompt_id,
				uint32_t first, uint32_t count);

/**
 * Declare batch @p batch_no timed out: every token with missing bytes, and
 * every later token of its prompt, is removed and reported through @p fn;
 * then the batch completes. (A new prompt whose first EVICT entry is refused
 * for room is marked the same way, from that token.) A prompt cut by a loss
 * stays marked lost from its first lost token (PROTOCOL.md section 4, version 2): EVICTs there or
 * beyond are refused (HOLE), and a prompt the loss emptied stays known,
 * until a DELETE starting at or before that token clears the mark. Batches complete in order: only the oldest open
 * batch can be declared lost (the caller times batches from their EVICT).
 * @return tokens reported, or -EINVAL if @p batch_no is not the oldest open
 *   batch.
 */
int kvstore_batch_lose(struct kvstore *s, uint64_t batch_no, kvstore_lost_fn fn, void *arg);

/** Number of the oldest open batch, or 0 if none is open. */
uint64_t kvstore_oldest_open(const struct kvstore *s);

/**
 * Execute one DeleteRecord (the caller has waited for its evict_count).
 * @return 0, or the protocol error code (UNKNOWN_PROMPT, MALFORMED, RANGE,
 *   DELETE_NOT_RIGHT, BAD_CACHE) with the store unchanged.
 */
int kvstore_delete(struct kvstore *s, const struct proto_delete *d);

/**
 * Forget everything stored (a new driver epoch). Open batches are dropped;
 * batch numbering restarts at 1. Memory that refills still reference stays
 * untouched until they end.
 */
void kvstore_reset(struct kvstore *s);

/* ---- Reader calls -------------------------------------------------------- */

/** Batches published so far, in order (acquire: safe from the reader). */
uint64_t kvstore_batches_complete(const struct kvstore *s);

/** One piece of a refill transfer: @p len bytes at @p addr, not copied. */
struct kvstore_seg {
	const void *addr;
	uint32_t len;
};

struct kvstore_refill;

/** Where a transfer of one buffer has got to; zero it to start. */
struct kvstore_refill_pos {
	uint32_t chunk;	 /**< current chunk */
	uint32_t token;	 /**< token inside the chunk */
	uint32_t byte;	 /**< byte inside the token's buffer slice */
	uint64_t done;	 /**< bytes of the transfer produced so far */
	const void *page; /**< cached table page of the current token */
	uint32_t page_first;
	/**
	 * Slot of the token in progress when a call ended inside its slice
	 * (byte != 0): the next call goes on from the same slot, so an
	 * overwrite published between two frames never tears one token.
	 */
	uint32_t slot;
};

/**
 * Begin a refill of @p n chunks of cache @p cache_id, glued in order. From
 * here until kvstore_refill_end(), the memory of every token named stays as
 * it is, even if the tokens are deleted or overwritten meanwhile. A refill
 * reads the store as its complete batches left it: a prompt that only
 * batches still open hold is UNKNOWN_PROMPT, a chunk reaching into their
 * growth RANGE, and an overwrite they carry not yet seen.
 *
 * @param code set to 0, or the protocol error (UNKNOWN_PROMPT, RANGE,
 *   BAD_CACHE) when NULL is returned for that reason.
 * @return the refill, or NULL (*code set, or 0 with errno EBUSY when
 *   max_refills are in flight, E2BIG when @p n exceeds max_refill_chunks).
 */
struct kvstore_refill *kvstore_refill_begin(struct kvstore *s, uint16_t cache_id,
					    const struct proto_refill_chunk *chunks, unsigned int n,
					    uint16_t *code);

/** Tokens in the refill (sum of the chunks). */
uint32_t kvstore_refill_tokens(const struct kvstore_refill *r);

/** Bytes of one buffer's transfer: tokens x B_c / num_buffers. */
uint64_t kvstore_refill_buffer_len(const struct kvstore_refill *r);

/**
 * Produce the next segments of buffer @p buffer's transfer, at most
 * @p max_bytes in all and @p max_segs segments, adjacent memory merged.
 * @return segments written; 0 when the transfer is complete.
 */
unsigned int kvstore_refill_next(struct kvstore_refill *r, uint16_t buffer,
				 struct kvstore_refill_pos *pos, uint32_t max_bytes,
				 struct kvstore_seg *segs, unsigned int max_segs);

/** The refill's memory is no longer referenced (any thread). */
void kvstore_refill_end(struct kvstore_refill *r);

/* ---- Inspection (owner, or approximate from elsewhere) ------------------ */

struct kvstore_cache_stats {
	uint64_t stored_tokens; /**< claimed: published and in open batches */
	uint64_t prompts;
	uint64_t free_slots;	/**< immediately reusable */
	uint64_t limbo_slots;	/**< freed, waiting for refills to end */
	uint64_t capacity_tokens;
	uint32_t bytes_per_token;
	uint16_t num_buffers;
};

void kvstore_cache_stats(const struct kvstore *s, uint16_t cache_id,
			 struct kvstore_cache_stats *st);

/*
 * Counters of the whole store (owner-written; read approximately), each
 * once: X(field) and what it counts. A shard's /kvss/stats shows each as
 * store_ and the field, summed over the process's shards
 * (scripts/telemetry-doc.py documents them from this list).
 */
#define KVSTORE_STATS(X)                                                                            \
	X(batches_opened) /* batches an EVICT opened */                                            \
	X(batches_lost) /* batches that timed out with tokens missing */                           \
	X(evicted_tokens) /* tokens named by EVICT entries and taken */                            \
	X(overwritten_tokens) /* of them, tokens that replaced a stored one */                     \
	X(discarded_entries) /* EVICT entries not taken: prompt 0 or refused */                    \
	X(data_bytes) /* EVICT_DATA payload bytes written into the store */                        \
	X(data_dup_bytes) /* of them, bytes received twice */                                      \
	X(deleted_tokens) /* tokens a DELETE let go */                                             \
	X(lost_tokens) /* tokens of batches lost */                                                \
	X(reserves) /* RESERVE records run */                                                      \
	X(unmarked_refusals) /* a new prompt refused with no record left to mark it */

struct kvstore_stats {
#define KVSTORE_STATS_FIELD(n) uint64_t n;
	KVSTORE_STATS(KVSTORE_STATS_FIELD)
#undef KVSTORE_STATS_FIELD
};

void kvstore_stats(const struct kvstore *s, struct kvstore_stats *st);

/**
 * A prompt's stored range in a cache, as a refill sees it.
 * @return 0 with *@p offset and *@p n (readable tokens), or -ENOENT (also
 * for a prompt that only batches still open hold).
 */
int kvstore_prompt(const struct kvstore *s, uint16_t cache_id, uint64_t prompt_id,
		   uint32_t *offset, uint32_t *n);

/**
 * Copy token @p token_idx's bytes (all buffers, B_c bytes) into @p out, for
 * tests and tools. @return 0, or -ENOENT.
 */
int kvstore_read_token(const struct kvstore *s, uint16_t cache_id, uint64_t prompt_id,
		       uint32_t token_idx, void *out);

#ifdef __cplusplus
}
#endif

#endif /* KVSS_KVSTORE_H */
