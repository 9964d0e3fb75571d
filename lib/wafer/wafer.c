/* SPDX-License-Identifier: BSD-3-Clause */
/* The emulated wafer: EVICT_DATA out, REFILL_DATA checked. */
#include "wafer.h"

#include <errno.h>
#include <string.h>

void
wafer_fill(const struct wafer_place *at, const uint64_t *hash, uint64_t off, uint8_t *out,
	   uint32_t len)
{
	const uint32_t bpt = at->bytes_per_token;
	const uint64_t end = off + len;

	while (off < end) {
		uint64_t t = off / bpt;
		uint32_t in = (uint32_t)(off % bpt), k = bpt - in;

		if (k > end - off)
			k = (uint32_t)(end - off);
		proto_ref_fill(hash[t], at->model, at->shard, at->cache_id, in, out, k);
		out += k;
		off += k;
	}
}

void
wafer_evict_init(struct wafer_evict *w, const struct wafer_place *at,
		       uint64_t batch_no, const uint64_t *hash, uint32_t ntok, uint32_t epoch)
{
	memset(w, 0, sizeof(*w));
	w->at = *at;
	w->batch_no = batch_no;
	w->hash = hash;
	w->ntok = ntok;
	w->epoch = epoch;
}

uint32_t
wafer_evict_next(struct wafer_evict *w, uint8_t *buf, uint32_t max_data)
{
	const uint32_t bpt = w->at.bytes_per_token, total = w->ntok * bpt;
	const uint32_t room = PROTO_PAYLOAD_MAX - PROTO_HDR_LEN - PROTO_DATA_HDR_LEN;
	struct proto_hdr h = {.type = PROTO_T_EVICT_DATA, .model_id = w->at.model,
			      .shard_id = w->at.shard, .epoch = w->epoch};
	struct proto_data_hdr dh = {w->batch_no, w->at.cache_id, w->next, total, w->stream};
	struct proto_builder b;
	uint32_t n, o;

	if (w->next >= total || max_data == 0)
		return 0;
	n = total - w->next;
	if (n > max_data)
		n = max_data;
	if (n > room)
		n = room;
	proto_build_begin(&b, buf, PROTO_PAYLOAD_MAX, &h);
	proto_build_data_hdr(&b, &dh);
	/* The bytes in place: the builder's tail is where they go. */
	o = PROTO_HDR_LEN + PROTO_DATA_HDR_LEN;
	wafer_fill(&w->at, w->hash, w->next, buf + o, n);
	w->next += n;
	proto_build_bytes(&b, buf + o, n);
	return proto_build_end(&b);
}

int
wafer_refill_init(struct wafer_refill *r, const struct wafer_place *at,
			uint16_t num_buffers, uint64_t refill_id, const uint64_t *hash, uint32_t ntok)
{
	memset(r, 0, sizeof(*r));
	if (num_buffers == 0 || num_buffers > WAFER_MAX_BUFFERS ||
	    at->bytes_per_token == 0 || at->bytes_per_token % num_buffers != 0)
		return -EINVAL;
	r->at = *at;
	r->num_buffers = num_buffers;
	r->refill_id = refill_id;
	r->hash = hash;
	r->ntok = ntok;
	return 0;
}

/* Bytes [offset, offset + len) of buffer @p b's stream against the reference: the bad ones. */
static uint64_t
check_piece(const struct wafer_refill *r, uint16_t b, uint64_t offset, const uint8_t *data,
	    uint32_t len)
{
	const uint32_t bb = r->at.bytes_per_token / r->num_buffers;
	uint64_t o = offset, end = offset + len, bad = 0;

	while (o < end) {
		uint32_t t = (uint32_t)(o / bb), in = (uint32_t)(o % bb), k = bb - in;
		uint64_t off = (uint64_t)b * bb + in;
		const uint8_t *p = data + (o - offset);

		if (k > end - o)
			k = (uint32_t)(end - o);
		if (proto_ref_check(r->hash[t], r->at.model, r->at.shard, r->at.cache_id, off, p, k)) {
			uint8_t want[256];
			uint32_t i, c;

			/* Count them, a piece at a time. */
			for (i = 0; i < k; i += c) {
				uint32_t j;

				c = k - i < sizeof(want) ? k - i : (uint32_t)sizeof(want);
				proto_ref_fill(r->hash[t], r->at.model, r->at.shard, r->at.cache_id,
					       off + i, want, c);
				for (j = 0; j < c; j++)
					bad += p[i + j] != want[j];
			}
		}
		o += k;
	}
	return bad;
}

int64_t
wafer_refill_bytes(struct wafer_refill *r, uint16_t buffer_id, uint64_t offset, const uint8_t *data,
		   uint32_t len)
{
	const uint64_t whole = (uint64_t)r->ntok * (r->at.bytes_per_token / r->num_buffers);
	uint64_t bad;

	if (buffer_id >= r->num_buffers || offset != r->got[buffer_id] ||
	    offset + (uint64_t)len > whole) {
		r->bad_frames++;
		return -1;
	}
	bad = check_piece(r, buffer_id, offset, data, len);
	r->got[buffer_id] = offset + len;
	r->bad_bytes += bad;
	return (int64_t)bad;
}

/* Pieces held ahead of their buffer's stream that now follow it: taken in. */
static void
drain_pending(struct wafer_refill *r)
{
	bool moved = true;

	while (moved) {
		unsigned int i;

		moved = false;
		for (i = 0; i < r->npend; i++) {
			const struct wafer_piece *pc = &r->pend[i];

			if (pc->offset > r->got[pc->buffer])
				continue;
			if (pc->offset == r->got[pc->buffer])
				r->got[pc->buffer] += pc->len;
			r->pend[i] = r->pend[--r->npend];
			moved = true;
			break;
		}
	}
}

int64_t
wafer_refill_data(struct wafer_refill *r, const struct proto_refill_data_hdr *h,
		  const uint8_t *data, uint32_t len)
{
	const uint64_t whole = (uint64_t)r->ntok * (r->at.bytes_per_token / r->num_buffers);
	uint16_t b = h->buffer_id;
	uint64_t off = h->stream_offset, bad;
	unsigned int i;
	int64_t got;

	if (h->refill_id != r->refill_id || h->cache_id != r->at.cache_id ||
	    h->stream_len != whole || b >= r->num_buffers || off + (uint64_t)len > whole) {
		r->bad_frames++;
		return -1;
	}
	if (off == r->got[b]) {
		got = wafer_refill_bytes(r, b, off, data, len);
		drain_pending(r);
		return got;
	}
	/*
	 * A fabric may reorder and duplicate frames: a frame of what arrived
	 * already is a copy, one ahead waits for the gap before it (up to
	 * WAFER_PENDING of them; beyond, it is not taken and the refill will
	 * not be whole). Its bytes are checked either way: a wrong byte is a
	 * wrong byte, whenever it comes.
	 */
	if (off < r->got[b] && off + len > r->got[b]) {
		r->bad_frames++; /* overlaps the end: not a piece of this stream */
		return -1;
	}
	bad = check_piece(r, b, off, data, len);
	r->bad_bytes += bad;
	if (off + len <= r->got[b]) {
		r->dup_frames++;
		return (int64_t)bad;
	}
	for (i = 0; i < r->npend; i++)
		if (r->pend[i].buffer == b && r->pend[i].offset == off) {
			r->dup_frames++;
			return (int64_t)bad;
		}
	if (r->npend == WAFER_PENDING) {
		r->untaken_frames++;
		return (int64_t)bad;
	}
	r->pend[r->npend++] = (struct wafer_piece){off, len, b};
	r->ahead_frames++;
	return (int64_t)bad;
}

bool
wafer_refill_whole(const struct wafer_refill *r)
{
	const uint64_t whole = (uint64_t)r->ntok * (r->at.bytes_per_token / r->num_buffers);
	uint16_t b;

	for (b = 0; b < r->num_buffers; b++)
		if (r->got[b] != whole)
			return false;
	return true;
}
