/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libFuzzer target for the frame parser. Input: two bytes choosing split
 * points, then a frame. The frame is parsed as one buffer and as three
 * segments, each in its own exact-size heap block so that ASan catches any
 * read past a segment; both parses must agree exactly, and a frame that
 * parses has every record read back through the public accessors.
 */
#include <stdlib.h>
#include <string.h>

#include "proto.h"

static struct proto_msg m1, m2;

static void
touch_records(const struct proto_msg *m)
{
	volatile uint64_t sink = 0;
	unsigned int i;

	switch (m->hdr.type) {
	case PROTO_T_RESERVE:
		for (i = 0; i < m->hdr.count; i++) {
			struct proto_reserve r;

			proto_get_reserve(m, i, &r);
			sink += r.prompt_id;
		}
		break;
	case PROTO_T_EVICT:
		for (i = 0; i < m->hdr.count; i++) {
			struct proto_evict_entry e;

			proto_get_evict_entry(m, i, &e);
			sink += e.prompt_id;
		}
		break;
	case PROTO_T_REFILL: {
		struct proto_refill_req r;
		struct proto_refill_chunk c;
		const uint8_t *ch;
		uint32_t off = 0;

		while (proto_next_refill(m, &off, &r, &ch))
			for (i = 0; i < r.num_chunks; i++) {
				proto_get_refill_chunk(ch, i, &c);
				sink += c.prompt_id;
			}
		break;
	}
	case PROTO_T_DELETE:
		for (i = 0; i < m->hdr.count; i++) {
			struct proto_delete d;

			proto_get_delete(m, i, &d);
			sink += d.prompt_id;
		}
		break;
	case PROTO_T_STATUS:
		for (i = 0; i < m->hdr.count; i++) {
			struct proto_cache_info c;

			proto_get_cache_info(m, i, &c);
			sink += c.prompts;
		}
		break;
	case PROTO_T_ERROR:
		for (i = 0; i < m->hdr.count; i++) {
			struct proto_error e;

			proto_get_error(m, i, &e);
			sink += e.seq;
		}
		break;
	case PROTO_T_REFILL_DONE:
		for (i = 0; i < m->hdr.count; i++) {
			struct proto_refill_done d;

			proto_get_refill_done(m, i, &d);
			sink += d.bytes;
		}
		break;
	case PROTO_T_TOKEN_LOST:
		for (i = 0; i < m->hdr.count; i++) {
			struct proto_lost l;

			proto_get_lost(m, i, &l);
			sink += l.prompt_id;
		}
		break;
	case PROTO_T_L2_DONE:
		for (i = 0; i < m->hdr.count; i++) {
			struct proto_l2done l;

			proto_get_l2_done(m, i, &l);
			sink += l.key + l.op + l.status;
		}
		break;
	default:
		break;
	}
	(void)sink;
}

static uint8_t *
dup_exact(const uint8_t *p, size_t n)
{
	uint8_t *q = malloc(n ? n : 1);

	if (n)
		memcpy(q, p, n);
	return q;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	enum proto_reason r1, r2;
	struct proto_seg seg[3];
	struct proto_segs segs = {seg, 3};
	struct proto_src src;
	uint8_t *part[3];
	uint32_t n, s1, s2;

	if (size < 2 || size > PROTO_FRAME_MAX + 2)
		return 0;
	n = (uint32_t)(size - 2);
	s1 = n ? data[0] % (n + 1) : 0;
	s2 = s1 + (n - s1 ? data[1] % (n - s1 + 1) : 0);
	data += 2;

	r1 = proto_parse(data, n, &proto_ports_default, &m1);
	if (r1 == PROTO_OK)
		touch_records(&m1);
	{
		/* kvss-dump's parse, which takes version 1 too (other layouts). */
		static struct proto_msg m3;
		struct proto_ports v1 = proto_ports_default;
		enum proto_reason r3;

		v1.accept_v1 = true;
		r3 = proto_parse(data, n, &v1, &m3);
		if (r3 == PROTO_OK)
			touch_records(&m3);
		if (r1 == PROTO_OK && r3 != PROTO_OK)
			__builtin_trap(); /* what a party takes, the dump takes */
	}

	part[0] = dup_exact(data, s1);
	part[1] = dup_exact(data + s1, s2 - s1);
	part[2] = dup_exact(data + s2, n - s2);
	seg[0] = (struct proto_seg){part[0], s1};
	seg[1] = (struct proto_seg){part[1], s2 - s1};
	seg[2] = (struct proto_seg){part[2], n - s2};
	proto_src_segs(&src, &segs);
	r2 = proto_parse_src(&src, &proto_ports_default, &m2);
	if (r1 != r2)
		__builtin_trap();
	if (r2 == PROTO_OK) {
		touch_records(&m2);
		if (memcmp(&m1.hdr, &m2.hdr, sizeof(m1.hdr)) != 0 || m1.data_len != m2.data_len ||
		    m1.data_off != m2.data_off)
			__builtin_trap();
		if (m1.body != NULL && memcmp(m1.body, m2.body, m1.hdr.body_len) != 0)
			__builtin_trap();
	}
	free(part[0]);
	free(part[1]);
	free(part[2]);
	return 0;
}
