/* SPDX-License-Identifier: BSD-3-Clause */
/* The emulated wafer: EVICT_DATA payloads out, REFILL_DATA checked byte by byte. */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "wafer.h"

#define NT 5
#define BPT 96
#define NBUF 3

static struct proto_msg msg;
static uint64_t hash[NT];
static const struct wafer_place at = {.model = 1, .shard = 2, .cache_id = 1,
					    .bytes_per_token = BPT};

static void
setup(void)
{
	uint64_t h = proto_ref_isolation_id("wafer", 5);
	int i;

	for (i = 0; i < NT; i++)
		hash[i] = h = proto_ref_hash_next(h, 1000 + (uint32_t)i);
}

TestSuite(wafer, .init = setup);

Test(wafer, evict_payloads_carry_each_tokens_reference_bytes_in_batch_order)
{
	static uint8_t buf[PROTO_PAYLOAD_MAX], stream[NT * BPT], want[BPT];
	struct wafer_evict w;
	uint32_t n, frames = 0, covered = 0, t;

	wafer_evict_init(&w, &at, 7, hash, NT, 0xAB);
	while ((n = wafer_evict_next(&w, buf, 100)) != 0) {
		cr_assert_eq(proto_parse_payload(buf, n, PROTO_PORT_EVICT_DEFAULT, &proto_ports_default,
						 &msg),
			     PROTO_OK);
		cr_assert_eq(msg.hdr.type, PROTO_T_EVICT_DATA);
		cr_assert_eq(msg.hdr.epoch, 0xAB);
		cr_assert_eq(msg.hdr.model_id, 1);
		cr_assert_eq(msg.u.data.batch_no, 7);
		cr_assert_eq(msg.u.data.cache_id, 1);
		cr_assert_eq(msg.u.data.stream_len, NT * BPT);
		cr_assert_eq(msg.u.data.stream_offset, covered, "payloads in stream order");
		cr_assert_leq(msg.data_len, 100);
		memcpy(stream + covered, buf + msg.data_off, msg.data_len);
		covered += msg.data_len;
		frames++;
	}
	cr_assert_eq(covered, NT * BPT);
	cr_assert_eq(frames, (NT * BPT + 99) / 100);
	for (t = 0; t < NT; t++) {
		proto_ref_fill(hash[t], 1, 2, 1, 0, want, BPT);
		cr_assert_eq(memcmp(stream + t * BPT, want, BPT), 0, "token %u", t);
	}
	cr_assert_eq(wafer_evict_next(&w, buf, 100), 0, "the stream was all sent");
}

Test(wafer, evict_payloads_stop_at_the_frame_size)
{
	static uint8_t buf[PROTO_PAYLOAD_MAX];
	static uint64_t many[200];
	struct wafer_place big = at;
	struct wafer_evict w;
	uint32_t n;

	big.bytes_per_token = 4096;
	wafer_evict_init(&w, &big, 1, many, 200, 1);
	n = wafer_evict_next(&w, buf, UINT32_MAX);
	cr_assert_eq(n, PROTO_PAYLOAD_MAX);
	cr_assert_eq(proto_parse_payload(buf, n, PROTO_PORT_EVICT_DEFAULT, &proto_ports_default, &msg),
		     PROTO_OK);
}

/* REFILL_DATA of the glued tokens for one buffer, bytes [a, z) of its stream. */
static uint32_t
refill_frame(uint8_t *buf, uint64_t refill_id, uint16_t buffer, uint32_t a, uint32_t z,
	     struct proto_refill_data_hdr *rh)
{
	const uint32_t bb = BPT / NBUF;
	uint8_t bytes[NT * BPT];
	uint32_t o;

	for (o = a; o < z; o++)
		proto_ref_fill(hash[o / bb], 1, 2, 1, (uint64_t)buffer * bb + o % bb, &bytes[o - a], 1);
	*rh = (struct proto_refill_data_hdr){.refill_id = refill_id, .sequence_id = 4, .cache_idx = 0,
					     .cache_id = 1, .buffer_id = buffer, .stream_offset = a,
					     .stream_len = NT * bb};
	memcpy(buf, bytes, z - a);
	return z - a;
}

Test(wafer, a_whole_refill_checks_clean_and_every_fault_is_seen)
{
	const uint32_t bb = BPT / NBUF, whole = NT * bb;
	struct proto_refill_data_hdr rh;
	struct wafer_refill r;
	uint8_t d[NT * BPT];
	uint32_t n, a;
	uint16_t b;

	cr_assert_eq(wafer_refill_init(&r, &at, 5, 9, hash, NT), -EINVAL, "5 does not divide 96");
	cr_assert_eq(wafer_refill_init(&r, &at, NBUF, 9, hash, NT), 0);
	for (b = 0; b < NBUF; b++) {
		for (a = 0; a < whole; a += 50) {
			n = refill_frame(d, 9, b, a, a + 50 < whole ? a + 50 : whole, &rh);
			if (b == 1 && a == 50)
				d[7] ^= 1; /* one bad byte */
			cr_assert_eq(wafer_refill_data(&r, &rh, d, n), b == 1 && a == 50 ? 1 : 0);
		}
		if (b < NBUF - 1)
			cr_assert(!wafer_refill_whole(&r), "buffer %u of %u in", b + 1, NBUF);
	}
	cr_assert(wafer_refill_whole(&r));
	cr_assert_eq(r.bad_bytes, 1);
	cr_assert_eq(r.bad_frames, 0);

	/* Frames that are not this refill's, or past the end. */
	n = refill_frame(d, 8, 0, 0, 10, &rh);
	cr_assert_eq(wafer_refill_data(&r, &rh, d, n), -1, "another refill_id");
	cr_assert_eq(wafer_refill_init(&r, &at, NBUF, 9, hash, NT), 0);
	n = refill_frame(d, 9, 0, 0, 10, &rh);
	rh.buffer_id = NBUF;
	cr_assert_eq(wafer_refill_data(&r, &rh, d, n), -1, "no such buffer");
	rh.buffer_id = 0;
	rh.stream_len = whole + 1;
	cr_assert_eq(wafer_refill_data(&r, &rh, d, n), -1, "wrong stream length");
	rh.stream_len = whole;
	cr_assert_eq(wafer_refill_data(&r, &rh, d, whole + 1), -1, "past the end");
	cr_assert_eq(r.bad_frames, 3);
	cr_assert_eq(wafer_refill_data(&r, &rh, d, n), 0);
	cr_assert_eq(r.got[0], 10);
	cr_assert(!wafer_refill_whole(&r));
}

/* A fabric reorders and duplicates: frames ahead of a gap wait for it, copies
 * are counted, and a wrong byte is caught whenever its frame comes. */
Test(wafer, refill_frames_out_of_order_or_twice_are_taken_and_checked)
{
	const uint32_t whole = NT * BPT / NBUF;
	struct proto_refill_data_hdr rh;
	struct wafer_refill r;
	uint8_t d[NT * BPT];
	uint32_t n, a;
	uint16_t b;

	cr_assert_eq(wafer_refill_init(&r, &at, NBUF, 9, hash, NT), 0);
	for (b = 0; b < NBUF; b++) {
		/* Pieces of 40 bytes, last first, each twice. */
		for (a = (whole - 1) / 40 * 40 + 40; a >= 40; a -= 40) {
			uint32_t s = a - 40, e = a < whole ? a : whole;

			n = refill_frame(d, 9, b, s, e, &rh);
			if (b == 2 && s == 40)
				d[3] ^= 0x10; /* a wrong byte, in a frame that comes early */
			cr_assert_eq(wafer_refill_data(&r, &rh, d, n), b == 2 && s == 40 ? 1 : 0);
			cr_assert_eq(wafer_refill_data(&r, &rh, d, n), b == 2 && s == 40 ? 1 : 0,
				     "its copy, checked too");
		}
		cr_assert_eq(r.got[b], whole, "buffer %u whole once its first piece came", b);
	}
	cr_assert(wafer_refill_whole(&r));
	cr_assert_eq(r.bad_frames, 0);
	cr_assert_eq(r.bad_bytes, 2);
	cr_assert_eq(r.dup_frames, NBUF * ((whole + 39) / 40));
	cr_assert_gt(r.ahead_frames, 0);
	cr_assert_eq(r.npend, 0);
	/* A gap with every byte after it come first, a frame a byte (159 of
	 * them a buffer, more than the 32 once held): whole when it fills. */
	cr_assert_eq(wafer_refill_init(&r, &at, NBUF, 9, hash, NT), 0);
	for (a = whole - 1; a >= 1; a--) {
		n = refill_frame(d, 9, 0, a, a + 1, &rh);
		cr_assert_eq(wafer_refill_data(&r, &rh, d, n), 0);
	}
	cr_assert_eq(r.npend, whole - 1);
	cr_assert_eq(r.untaken_frames, 0);
	n = refill_frame(d, 9, 0, 0, 1, &rh);
	cr_assert_eq(wafer_refill_data(&r, &rh, d, n), 0);
	cr_assert_eq(r.got[0], whole, "the gap filled, the %u held frames taken in", whole - 1);
	cr_assert_eq(r.npend, 0);
	/* Past WAFER_PENDING held (every buffer's gap open): the rest not taken. */
	cr_assert_eq(wafer_refill_init(&r, &at, NBUF, 9, hash, NT), 0);
	for (b = 0; b < NBUF; b++)
		for (a = whole - 1; a >= 1; a--) {
			n = refill_frame(d, 9, b, a, a + 1, &rh);
			cr_assert_eq(wafer_refill_data(&r, &rh, d, n), 0);
		}
	cr_assert_eq(r.npend, WAFER_PENDING);
	cr_assert_eq(r.untaken_frames, NBUF * (whole - 1) - WAFER_PENDING);
	/* A piece overlapping the end of what arrived is no piece of this stream. */
	cr_assert_eq(wafer_refill_init(&r, &at, NBUF, 9, hash, NT), 0);
	n = refill_frame(d, 9, 0, 0, 40, &rh);
	cr_assert_eq(wafer_refill_data(&r, &rh, d, n), 0);
	n = refill_frame(d, 9, 0, 20, 60, &rh);
	cr_assert_eq(wafer_refill_data(&r, &rh, d, n), -1);
	cr_assert_eq(r.bad_frames, 1);
}

Test(wafer, bytes_from_a_gather_list_are_checked_as_they_come_and_a_gap_is_refused)
{
	/* Buffer 1 of a refill of tokens 1..3: as a store's gather list gives it. */
	static uint8_t stream[NT * BPT], buf1[3 * (BPT / NBUF)];
	const uint32_t bb = BPT / NBUF;
	struct wafer_refill r;
	uint32_t t;

	wafer_fill(&at, hash, 0, stream, NT * BPT);
	for (t = 0; t < 3; t++)
		memcpy(buf1 + t * bb, stream + (1 + t) * BPT + bb, bb);
	cr_assert_eq(wafer_refill_init(&r, &at, NBUF, 9, hash + 1, 3), 0);
	cr_assert_eq(wafer_refill_bytes(&r, 1, 0, buf1, 10), 0, "a piece within a token");
	cr_assert_eq(wafer_refill_bytes(&r, 1, 20, buf1 + 20, 5), -1, "a gap is refused");
	buf1[bb + 3] ^= 0x40;
	cr_assert_eq(wafer_refill_bytes(&r, 1, 10, buf1 + 10, 3 * bb - 10), 1, "one flipped byte");
	cr_assert_eq(r.bad_bytes, 1);
	cr_assert_eq(r.bad_frames, 1);
	cr_assert_eq(wafer_refill_bytes(&r, 1, 3 * bb, buf1, 1), -1, "nothing past the end");
	cr_assert_eq(wafer_refill_bytes(&r, NBUF, 0, buf1, 1), -1, "no such buffer");
	cr_assert(!wafer_refill_whole(&r), "buffers 0 and 2 never came");
}
