/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * kvss-udp-client's own encoder and decoder (app/udpclient/ucwire.c): its
 * frames against the golden vectors of docs/PROTOCOL.md, read from the
 * document; and, for the messages the document has no vector of, against
 * lib/proto (the shard's parser reads what this client builds; this client
 * reads what the shard builds). Two implementations written apart that
 * agree with each other and with the page.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "frames.h"
#include "proto.h"
#include "ucwire.h"

static struct proto_msg pm;

static uint32_t
golden(const char *name, uint8_t *out, uint32_t cap)
{
	uint32_t n = frames_golden(name, out, cap);

	cr_assert_gt(n, 0, "no golden vector %s in %s", name, frames_protocol_md());
	return n;
}

static uint64_t
golden_u64(const char *name)
{
	char hex[64];

	cr_assert_eq(frames_golden_hex(name, hex, sizeof(hex)), 16, "no vector %s", name);
	return strtoull(hex, NULL, 16);
}

/* ---- built byte for byte as the document prints them --------------------- */

Test(golden, delete_is_built_byte_for_byte)
{
	uint8_t want[128], got[128];
	uint32_t n = golden("delete", want, sizeof(want));
	struct uc_hdr h = {.shard = UC_SHARD_ALL, .epoch = 0x01020304, .seq = 7};
	struct uc_delete d = {111, 1000, 4, 7, 0};

	cr_assert_eq(uc_build_delete(got, sizeof(got), &h, &d, 1), n);
	cr_assert_arr_eq(got, want, n);
}

Test(golden, refill_is_built_byte_for_byte)
{
	uint8_t want[128], got[128];
	uint32_t n = golden("refill", want, sizeof(want));
	struct uc_hdr h = {.shard = UC_SHARD_ALL, .epoch = 0x01020304, .seq = 8};
	struct uc_chunk ch[2] = {{111, 0, 4}, {222, 4, 8}};
	struct uc_refill_req r = {42, 2580, 9, 0, 0, 2, ch};

	cr_assert_eq(uc_build_refill(got, sizeof(got), &h, &r, 1), n);
	cr_assert_arr_eq(got, want, n);
}

Test(golden, evict_data_is_built_byte_for_byte)
{
	uint8_t want[128], got[128], x[16];
	uint32_t n = golden("evict_data", want, sizeof(want));
	struct uc_hdr h = {.epoch = 0x0a0b0c0d};
	struct uc_data_hdr d = {1000, 0, 16, 32, 0x01020304};

	for (unsigned int i = 0; i < 16; i++)
		x[i] = (uint8_t)i;
	cr_assert_eq(uc_build_evict_data(got, sizeof(got), &h, &d, x, 16), n);
	cr_assert_arr_eq(got, want, n);
}

Test(golden, report_ack_is_built_byte_for_byte)
{
	uint8_t want[128], got[128];
	uint32_t n = golden("report_ack", want, sizeof(want));
	struct uc_hdr h = {.epoch = 0x01020304, .seq = 99 /* a REPORT_ACK is seq 0 whatever is asked */};

	cr_assert_eq(uc_build_report_ack(got, sizeof(got), &h, 7), n);
	cr_assert_arr_eq(got, want, n);
}

Test(golden, a_frame_that_does_not_fit_is_not_built)
{
	uint8_t got[63];
	struct uc_hdr h = {.epoch = 1, .seq = 7};
	struct uc_delete d = {111, 1000, 4, 7, 0};

	cr_assert_eq(uc_build_delete(got, sizeof(got), &h, &d, 1), 0);
	cr_assert_eq(uc_build_hello(got, 31, &h), 0);
}

/* ---- read as the document says ------------------------------------------ */

Test(golden, ack_status_token_lost_are_read)
{
	uint8_t p[256];
	uint32_t n;
	struct uc_msg m;
	struct uc_ack a;
	struct uc_status s;
	struct uc_cache_info c;
	struct uc_lost l;

	n = golden("ack", p, sizeof(p));
	cr_assert_null(uc_parse(p, n, &m));
	cr_assert_eq(m.h.type, UC_ACK);
	cr_assert_eq(m.h.epoch, 0x05060708);
	uc_get_ack(&m, &a);
	cr_assert_eq(a.cum_seq, 40);
	cr_assert_eq(a.recv_seq, 44);

	n = golden("status", p, sizeof(p));
	cr_assert_null(uc_parse(p, n, &m));
	cr_assert_eq(m.h.type, UC_STATUS);
	cr_assert_eq(m.h.count, 1);
	uc_get_status(&m, &s);
	cr_assert_eq(s.batches_complete, 1000);
	cr_assert_eq(s.reports, 11);
	cr_assert_eq(s.uptime_ns, 1000000000ULL);
	cr_assert_eq(s.flags, 2);
	cr_assert_eq(s.driver_epoch, 0x01020304);
	uc_get_cache_info(&m, 0, &c);
	cr_assert_eq(c.cache, 0);
	cr_assert_eq(c.buffers, 4);
	cr_assert_eq(c.bytes_per_token, 16384);
	cr_assert_eq(c.capacity, 100000);
	cr_assert_eq(c.stored, 4096);
	cr_assert_eq(c.prompts, 3);
	cr_assert_eq(c.l2_capacity, 1000000);
	cr_assert_eq(c.l2_stored, 65536);

	n = golden("token_lost", p, sizeof(p));
	cr_assert_null(uc_parse(p, n, &m));
	cr_assert_eq(m.h.type, UC_TOKEN_LOST);
	uc_get_lost(&m, 0, &l);
	cr_assert_eq(l.prompt, 111);
	cr_assert_eq(l.token, 152);
	cr_assert_eq(l.tokens, 2);
	cr_assert_eq(l.cache, 0);
}

Test(golden, what_a_receiver_drops_is_dropped)
{
	uint8_t p[256], q[256];
	uint32_t n = golden("status", p, sizeof(p));
	struct uc_msg m;

	cr_assert_str_eq(uc_parse(p, 31, &m), "truncated");
	memcpy(q, p, n);
	q[0] = 'X';
	cr_assert_str_eq(uc_parse(q, n, &m), "bad magic");
	memcpy(q, p, n);
	q[4] = 1;
	cr_assert_str_eq(uc_parse(q, n, &m), "bad version");
	memcpy(q, p, n);
	q[5] = 0x3f;
	cr_assert_str_eq(uc_parse(q, n, &m), "bad type");
	cr_assert_str_eq(uc_parse(p, n - 1, &m), "bad body_len");
	memcpy(q, p, n);
	q[14] = 2; /* two CacheInfos said, one there */
	cr_assert_str_eq(uc_parse(q, n, &m), "bad count");
	n = golden("evict_data", p, sizeof(p));
	p[UC_HDR + 12] = 17; /* bytes 17..32 of a 32-byte stream */
	cr_assert_str_eq(uc_parse(p, n, &m), "bad data range");
}

/* ---- the reference content (section 6) ---------------------------------- */

Test(reference, cache_salt_roots_match_the_document)
{
	uint64_t iso = uc_ref_isolation("acme", 4), salt = uc_ref_salt("user-42", 7);
	uint32_t t;
	uint64_t h;

	cr_assert_eq(salt, golden_u64("ref_salt_user42"));
	cr_assert_eq(uc_ref_root(iso, salt), golden_u64("ref_root_acme_user42"));
	cr_assert_eq(uc_ref_root(iso, 0), iso);
	/* The prompt's chain starts at the root: its first hash is the root's next. */
	uc_ref_prompt(uc_ref_root(iso, salt), 1, 1, &h);
	for (t = 1; t <= 128000 && uc_ref_next(uc_ref_root(iso, salt), t) != h; t++)
		;
	cr_assert_leq(t, 128000, "h(0) is the next hash from the salted root");
}

Test(reference, isolation_hashes_and_bytes_match_the_document)
{
	uint64_t h = uc_ref_isolation("acme", 4);
	uint8_t want[32], got[32];
	uint32_t n;

	cr_assert_eq(h, golden_u64("ref_isolation_acme"));
	h = uc_ref_next(h, 1);
	cr_assert_eq(h, golden_u64("ref_hash_acme_1"));
	h = uc_ref_next(h, 2);
	cr_assert_eq(h, golden_u64("ref_hash_acme_1_2"));
	h = uc_ref_next(h, 3);
	cr_assert_eq(h, golden_u64("ref_hash_acme_1_2_3"));
	/* The third token's bytes come from h(2), the hash of the prefix 1, 2, 3. */
	n = golden("ref_bytes_m0_s0_c0_16", want, sizeof(want));
	cr_assert_eq(n, 16);
	uc_ref_bytes(h, 0, 0, 0, 0, got, 16);
	cr_assert_arr_eq(got, want, 16);
	n = golden("ref_bytes_m1_s3_c2_20", want, sizeof(want));
	cr_assert_eq(n, 20);
	uc_ref_bytes(h, 1, 3, 2, 0, got, 20);
	cr_assert_arr_eq(got, want, 20);
}

Test(reference, any_slice_is_the_same_bytes_of_the_stream_and_lib_proto_agrees)
{
	uint8_t whole[400], part[400], theirs[400];

	uc_ref_bytes(0x1234567890abcdefULL, 3, 2, 1, 0, whole, sizeof(whole));
	proto_ref_fill(0x1234567890abcdefULL, 3, 2, 1, 0, theirs, sizeof(theirs));
	cr_assert_arr_eq(whole, theirs, sizeof(whole));
	for (unsigned int off = 0; off < 24; off++)
		for (unsigned int len = 0; off + len <= sizeof(whole); len += 13) {
			memset(part, 0xAA, sizeof(part));
			uc_ref_bytes(0x1234567890abcdefULL, 3, 2, 1, off, part, len);
			cr_assert_arr_eq(part, whole + off, len, "off %u len %u", off, len);
		}
}

/* ---- no vector in the document: lib/proto reads ours, we read its -------- */

static void
parse_theirs(const uint8_t *p, size_t n, uint16_t port)
{
	cr_assert_eq(proto_parse_payload(p, (uint32_t)n, port, &proto_ports_default, &pm), PROTO_OK,
		     "lib/proto refuses our frame: %s",
		     proto_reason_name(proto_parse_payload(p, (uint32_t)n, port, &proto_ports_default,
							   &pm)));
}

Test(cross, hello_reserve_evict_are_what_the_shards_parser_reads)
{
	uint8_t p[1024];
	size_t n;
	struct uc_hdr h = {.model = 3, .shard = 2, .epoch = 0xcafe, .seq = 5, .flags = UC_F_ACK_REQ};
	struct uc_reserve rs[2] = {{77, 76, 10, 600, 0}, {77, 76, 10, 600, 1}};
	struct uc_entry e[6] = {{77, 10, 7}, {77, 10, 7}, {77, 11, 7}, {77, 11, 7}, {0, 0, 0}, {0, 0, 0}};
	struct proto_reserve r;
	struct proto_evict_entry pe;

	n = uc_build_hello(p, sizeof(p), &h);
	cr_assert_eq(n, 32);
	parse_theirs(p, n, 7400);
	cr_assert_eq(pm.hdr.type, PROTO_T_HELLO);
	cr_assert_eq(pm.hdr.seq, 0, "HELLO has seq 0");
	cr_assert_eq(pm.hdr.model_id, 3);
	cr_assert_eq(pm.hdr.shard_id, 2);
	cr_assert_eq(pm.hdr.epoch, 0xcafe);

	n = uc_build_reserve(p, sizeof(p), &h, rs, 2);
	parse_theirs(p, n, 7400);
	cr_assert_eq(pm.hdr.type, PROTO_T_RESERVE);
	cr_assert_eq(pm.hdr.count, 2);
	cr_assert_eq(pm.hdr.seq, 5);
	cr_assert_eq(pm.hdr.flags, PROTO_F_ACK_REQ);
	proto_get_reserve(&pm, 1, &r);
	cr_assert_eq(r.prompt_id, 77);
	cr_assert_eq(r.continue_id, 76);
	cr_assert_eq(r.start_token_idx, 10);
	cr_assert_eq(r.num_tokens, 600);
	cr_assert_eq(r.cache_id, 1);

	n = uc_build_evict(p, sizeof(p), &h, 9, 2, 3, e);
	parse_theirs(p, n, 7400);
	cr_assert_eq(pm.hdr.type, PROTO_T_EVICT);
	cr_assert_eq(pm.hdr.count, 6);
	cr_assert_eq(pm.u.evict.batch_no, 9);
	cr_assert_eq(pm.u.evict.num_caches, 2);
	cr_assert_eq(pm.u.evict.g, 3);
	proto_get_evict_entry(&pm, 3, &pe);
	cr_assert_eq(pe.prompt_id, 77);
	cr_assert_eq(pe.token_idx, 11);
	cr_assert_eq(pe.sequence_id, 7);
	proto_get_evict_entry(&pm, 5, &pe);
	cr_assert_eq(pe.prompt_id, 0);
}

Test(cross, a_refill_of_several_requests_is_what_the_shards_parser_reads)
{
	uint8_t p[1024];
	struct uc_hdr h = {.shard = 1, .epoch = 0xbeef, .seq = 12, .flags = UC_F_ACK_REQ};
	struct uc_chunk a[2] = {{77, 300, 300}, {77, 0, 300}}, b = {78, 0, 1};
	struct uc_refill_req rq[2] = {{1001, 10, 501, 4096, 1, 2, a}, {1002, 10, 502, 8192, 0, 1, &b}};
	size_t n = uc_build_refill(p, sizeof(p), &h, rq, 2);
	struct proto_refill_req r;
	struct proto_refill_chunk c;
	const uint8_t *chunks;
	uint32_t off = 0;

	parse_theirs(p, n, 7400);
	cr_assert_eq(pm.hdr.count, 2);
	cr_assert_eq(proto_next_refill(&pm, &off, &r, &chunks), 1);
	cr_assert_eq(r.refill_id, 1001);
	cr_assert_eq(r.evict_count, 10);
	cr_assert_eq(r.sequence_id, 501);
	cr_assert_eq(r.cache_idx, 4096);
	cr_assert_eq(r.cache_id, 1);
	cr_assert_eq(r.num_chunks, 2);
	proto_get_refill_chunk(chunks, 1, &c);
	cr_assert_eq(c.prompt_id, 77);
	cr_assert_eq(c.start_token_idx, 0);
	cr_assert_eq(c.num_tokens, 300);
	cr_assert_eq(proto_next_refill(&pm, &off, &r, &chunks), 1);
	cr_assert_eq(r.refill_id, 1002);
	proto_get_refill_chunk(chunks, 0, &c);
	cr_assert_eq(c.prompt_id, 78);
}

/* Build with lib/proto (as the shard does), read with ours. */
#define THEIRS(hdr_, ...)                                                                  \
	({                                                                                 \
		struct proto_builder b_;                                                   \
		cr_assert_eq(proto_build_begin(&b_, buf, sizeof(buf), &(hdr_)), 0);        \
		__VA_ARGS__;                                                               \
		proto_build_end(&b_);                                                      \
	})

Test(cross, what_a_shard_sends_is_read_here)
{
	uint8_t buf[512];
	struct uc_msg m;
	uint32_t n;
	struct proto_hdr h = {.type = PROTO_T_REFILL_DONE, .shard_id = 4, .epoch = 0x99};
	struct proto_refill_done d1 = {1001, 600, 0, 614400}, d2 = {1002, 0, 4, 0};
	struct proto_error e = {12, 77, 600, 1, 5};
	struct proto_refill_data_hdr rd = {1001, 501, 4096, 1, 2, 128, 1024};
	struct uc_refill_done d;
	struct uc_error ue;
	struct uc_refill_data urd;
	uint8_t bytes[64];

	n = THEIRS(h, proto_build_refill_done(&b_, &d1); proto_build_refill_done(&b_, &d2));
	cr_assert_null(uc_parse(buf, n, &m));
	cr_assert_eq(m.h.count, 2);
	uc_get_refill_done(&m, 1, &d);
	cr_assert_eq(d.refill_id, 1002);
	cr_assert_eq(d.status, 4);
	uc_get_refill_done(&m, 0, &d);
	cr_assert_eq(d.tokens, 600);
	cr_assert_eq(d.bytes, 614400);

	h.type = PROTO_T_ERROR;
	h.seq = 3;
	n = THEIRS(h, proto_build_error(&b_, &e));
	cr_assert_null(uc_parse(buf, n, &m));
	cr_assert_eq(m.h.seq, 3, "a report's seq");
	uc_get_error(&m, 0, &ue);
	cr_assert_eq(ue.seq, 12);
	cr_assert_eq(ue.prompt, 77);
	cr_assert_eq(ue.token, 600);
	cr_assert_eq(ue.cache, 1);
	cr_assert_eq(ue.code, 5);
	cr_assert_str_eq(uc_err_name(ue.code), "RANGE");

	h.type = PROTO_T_REFILL_DATA;
	h.seq = 0;
	for (unsigned int i = 0; i < sizeof(bytes); i++)
		bytes[i] = (uint8_t)(i * 7);
	n = THEIRS(h, proto_build_refill_data_hdr(&b_, &rd); proto_build_bytes(&b_, bytes, 64));
	cr_assert_null(uc_parse(buf, n, &m), "%s", uc_parse(buf, n, &m));
	uc_get_refill_data(&m, &urd);
	cr_assert_eq(urd.refill_id, 1001);
	cr_assert_eq(urd.sequence, 501);
	cr_assert_eq(urd.cache_idx, 4096);
	cr_assert_eq(urd.cache, 1);
	cr_assert_eq(urd.buffer, 2);
	cr_assert_eq(urd.offset, 128);
	cr_assert_eq(urd.stream_len, 1024);
	cr_assert_eq(urd.len, 64);
	cr_assert_arr_eq(urd.bytes, bytes, 64);
}
