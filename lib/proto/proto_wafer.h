/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The emulated wafer's two data paths (PROTOCOL.md sections 3 and 6),
 * without EAL, so the driver role, test tools and tests share them:
 *
 * - proto_wafer_evict: the EVICT_DATA payloads of one batch for one cache
 *   of one shard: tokens in batch order, B_c bytes each, of the reference
 *   content of each token's prefix hash, cut into payloads of a given size.
 * - proto_wafer_refill: checks the REFILL_DATA of one refill for one cache
 *   of one shard: every byte against the reference content of the glued
 *   tokens, each buffer's stream in order and whole.
 *
 * Both keep a pointer to the caller's array of prefix hashes, which must
 * live as long as they do.
 */
#ifndef PROTO_WAFER_H
#define PROTO_WAFER_H

#include <stdbool.h>
#include <stdint.h>

#include "proto.h"

/** Where reference bytes come from: model, shard and cache of section 6. */
struct proto_wafer_place {
	uint32_t model;
	uint16_t shard;
	uint16_t cache_id;
	uint32_t bytes_per_token; /* B_c */
};

struct proto_wafer_evict {
	struct proto_wafer_place at;
	const uint64_t *hash; /* prefix hash of each token of the batch, in order */
	uint32_t ntok;
	uint64_t batch_no;
	uint32_t epoch; /* the wafer's, in every header */
	uint32_t next;	/* the next stream byte to send */
};

void proto_wafer_evict_init(struct proto_wafer_evict *w, const struct proto_wafer_place *at,
			    uint64_t batch_no, const uint64_t *hash, uint32_t ntok, uint32_t epoch);

/**
 * The next EVICT_DATA payload (header and at most @p max_data stream bytes)
 * into @p buf (room for PROTO_PAYLOAD_MAX). Returns its length, 0 when the
 * whole stream has been given (or @p max_data is 0).
 */
uint32_t proto_wafer_evict_next(struct proto_wafer_evict *w, uint8_t *buf, uint32_t max_data);

#define PROTO_WAFER_MAX_BUFFERS 64

struct proto_wafer_refill {
	struct proto_wafer_place at;
	const uint64_t *hash; /* prefix hash of each glued token, in order */
	uint32_t ntok;
	uint16_t num_buffers;
	uint64_t refill_id;
	uint64_t got[PROTO_WAFER_MAX_BUFFERS]; /* stream bytes received in order, per buffer */
	uint64_t bad_bytes;		       /* differ from the reference */
	uint64_t bad_frames;		       /* not this refill's, out of order, past the end */
};

/** 0, or -EINVAL when the buffers do not divide B_c or are too many. */
int proto_wafer_refill_init(struct proto_wafer_refill *r, const struct proto_wafer_place *at,
			    uint16_t num_buffers, uint64_t refill_id, const uint64_t *hash,
			    uint32_t ntok);

/**
 * One REFILL_DATA message (parsed; its bytes at @p data, @p len of them).
 * Checks its header against the refill and every byte against the
 * reference. Returns the number of bad bytes it carried, or -1 when the
 * frame itself is wrong (counted in bad_frames, its bytes not checked).
 */
int64_t proto_wafer_refill_data(struct proto_wafer_refill *r, const struct proto_refill_data_hdr *h,
				const uint8_t *data, uint32_t len);

/** Has every buffer's stream arrived whole? */
bool proto_wafer_refill_whole(const struct proto_wafer_refill *r);

#endif
