/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The emulated accelerator (wafer): its reference content laid out as a
 * stream, its EVICT_DATA, and the check of what comes back (PROTOCOL.md
 * sections 3 and 6). No EAL and no I/O, so kvss's wafer emulator,
 * kvss-trace, the test tools and the tests share one implementation:
 *
 * - wafer_evict: the EVICT_DATA payloads of one batch for one cache
 *   of one shard: tokens in batch order, B_c bytes each, of the reference
 *   content of each token's prefix hash, cut into payloads of a given size.
 * - wafer_refill: checks the REFILL_DATA of one refill for one cache
 *   of one shard: every byte against the reference content of the glued
 *   tokens, each buffer's stream in order and whole.
 *
 * Both keep a pointer to the caller's array of prefix hashes, which must
 * live as long as they do.
 */
#ifndef WAFER_H
#define WAFER_H

#include <stdbool.h>
#include <stdint.h>

#include "proto.h"

/** Where reference bytes come from: model, shard and cache of section 6. */
struct wafer_place {
	uint32_t model;
	uint16_t shard;
	uint16_t cache_id;
	uint32_t bytes_per_token; /* B_c */
};

/**
 * The stream bytes [off, off + len) of tokens in order, B_c bytes each:
 * token t's bytes are the reference content of @p hash[t] at its place.
 */
void wafer_fill(const struct wafer_place *at, const uint64_t *hash, uint64_t off, uint8_t *out,
		uint32_t len);

struct wafer_evict {
	struct wafer_place at;
	const uint64_t *hash; /* prefix hash of each token of the batch, in order */
	uint32_t ntok;
	uint64_t batch_no;
	uint32_t epoch; /* the wafer's, in every header */
	uint32_t stream; /* the driver epoch of the batch's stream (v2 DataHeader; 0 after init) */
	uint32_t next;	/* the next stream byte to send */
};

void wafer_evict_init(struct wafer_evict *w, const struct wafer_place *at,
			    uint64_t batch_no, const uint64_t *hash, uint32_t ntok, uint32_t epoch);

/**
 * The next EVICT_DATA payload (header and at most @p max_data stream bytes)
 * into @p buf (room for PROTO_PAYLOAD_MAX). Returns its length, 0 when the
 * whole stream has been given (or @p max_data is 0).
 */
uint32_t wafer_evict_next(struct wafer_evict *w, uint8_t *buf, uint32_t max_data);

#define WAFER_MAX_BUFFERS 64

/*
 * Frames held ahead of a gap, per refill. A frame held back 200 us (the
 * fault injector's reorder) lets dozens pass it at memif's rate: at 32 the
 * rest were not taken, the refill could never be whole, and it failed
 * only at refill_timeout_ms (seconds). Each is 16 bytes.
 */
#define WAFER_PENDING 256

struct wafer_piece {
	uint64_t offset;
	uint32_t len;
	uint16_t buffer;
};

struct wafer_refill {
	struct wafer_place at;
	const uint64_t *hash; /* prefix hash of each glued token, in order */
	uint32_t ntok;
	uint16_t num_buffers;
	uint64_t refill_id;
	uint64_t got[WAFER_MAX_BUFFERS]; /* stream bytes received in order, per buffer */
	uint64_t bad_bytes;		       /* differ from the reference */
	uint64_t bad_frames;		       /* not this refill's, past the end, overlapping */
	uint64_t dup_frames;   /* REFILL_DATA of what had arrived (a fabric's copy) */
	uint64_t ahead_frames; /* REFILL_DATA that came before a gap, held until it filled */
	uint64_t untaken_frames; /* ahead of a gap with WAFER_PENDING held already: not taken */
	struct wafer_piece pend[WAFER_PENDING];
	unsigned int npend;
};

/** 0, or -EINVAL when the buffers do not divide B_c or are too many. */
int wafer_refill_init(struct wafer_refill *r, const struct wafer_place *at,
			    uint16_t num_buffers, uint64_t refill_id, const uint64_t *hash,
			    uint32_t ntok);

/**
 * One REFILL_DATA message (parsed; its bytes at @p data, @p len of them).
 * Checks its header against the refill and every byte against the
 * reference. Frames may come out of order or twice, as a fabric may
 * deliver them: a copy of what arrived is counted (dup_frames), one ahead
 * of a gap is held until the gap fills (ahead_frames; WAFER_PENDING at
 * most). Returns the number of bad bytes it carried, or -1 when the frame
 * itself is wrong (counted in bad_frames, its bytes not checked).
 */
int64_t wafer_refill_data(struct wafer_refill *r, const struct proto_refill_data_hdr *h,
				const uint8_t *data, uint32_t len);

/**
 * Bytes of one buffer's stream as they come, wherever from (a REFILL_DATA
 * frame, or a store's gather list): @p offset must be where that buffer's
 * stream stands. Returns the number of bad bytes, or -1 (counted in
 * bad_frames) for a buffer out of range, a gap or bytes past the end.
 */
int64_t wafer_refill_bytes(struct wafer_refill *r, uint16_t buffer_id, uint64_t offset,
			   const uint8_t *data, uint32_t len);

/** Has every buffer's stream arrived whole? */
bool wafer_refill_whole(const struct wafer_refill *r);

#endif
