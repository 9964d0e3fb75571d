/* SPDX-License-Identifier: BSD-3-Clause */
/* The emulated wafer: EVICT_DATA out, REFILL_DATA checked. */
#include "proto_wafer.h"

#include <errno.h>
#include <string.h>

void
proto_wafer_evict_init(struct proto_wafer_evict *w, const struct proto_wafer_place *at,
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
proto_wafer_evict_next(struct proto_wafer_evict *w, uint8_t *buf, uint32_t max_data)
{
	const uint32_t bpt = w->at.bytes_per_token, total = w->ntok * bpt;
	const uint32_t room = PROTO_PAYLOAD_MAX - PROTO_HDR_LEN - PROTO_DATA_HDR_LEN;
	struct proto_hdr h = {.type = PROTO_T_EVICT_DATA, .model_id = w->at.model,
			      .shard_id = w->at.shard, .epoch = w->epoch};
	struct proto_data_hdr dh = {w->batch_no, w->at.cache_id, w->next, total};
	struct proto_builder b;
	uint32_t n, end, o;

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
	end = w->next + n;
	while (w->next < end) {
		uint32_t t = w->next / bpt, in = w->next % bpt, k = bpt - in;

		if (k > end - w->next)
			k = end - w->next;
		proto_ref_fill(w->hash[t], w->at.model, w->at.shard, w->at.cache_id, in, buf + o, k);
		o += k;
		w->next += k;
	}
	proto_build_bytes(&b, buf + PROTO_HDR_LEN + PROTO_DATA_HDR_LEN, n);
	return proto_build_end(&b);
}

int
proto_wafer_refill_init(struct proto_wafer_refill *r, const struct proto_wafer_place *at,
			uint16_t num_buffers, uint64_t refill_id, const uint64_t *hash, uint32_t ntok)
{
	memset(r, 0, sizeof(*r));
	if (num_buffers == 0 || num_buffers > PROTO_WAFER_MAX_BUFFERS ||
	    at->bytes_per_token == 0 || at->bytes_per_token % num_buffers != 0)
		return -EINVAL;
	r->at = *at;
	r->num_buffers = num_buffers;
	r->refill_id = refill_id;
	r->hash = hash;
	r->ntok = ntok;
	return 0;
}

int64_t
proto_wafer_refill_data(struct proto_wafer_refill *r, const struct proto_refill_data_hdr *h,
			const uint8_t *data, uint32_t len)
{
	const uint32_t bb = r->at.bytes_per_token / r->num_buffers;
	const uint64_t whole = (uint64_t)r->ntok * bb;
	uint64_t o, end, bad = 0;

	if (h->refill_id != r->refill_id || h->cache_id != r->at.cache_id ||
	    h->buffer_id >= r->num_buffers || h->stream_len != whole ||
	    h->stream_offset != r->got[h->buffer_id] || h->stream_offset + (uint64_t)len > whole) {
		r->bad_frames++;
		return -1;
	}
	o = h->stream_offset;
	end = o + len;
	while (o < end) {
		uint32_t t = (uint32_t)(o / bb), in = (uint32_t)(o % bb), k = bb - in;
		uint64_t off = (uint64_t)h->buffer_id * bb + in;
		const uint8_t *p = data + (o - h->stream_offset);

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
	r->got[h->buffer_id] = end;
	r->bad_bytes += bad;
	return (int64_t)bad;
}

bool
proto_wafer_refill_whole(const struct proto_wafer_refill *r)
{
	const uint64_t whole = (uint64_t)r->ntok * (r->at.bytes_per_token / r->num_buffers);
	uint16_t b;

	for (b = 0; b < r->num_buffers; b++)
		if (r->got[b] != whole)
			return false;
	return true;
}
