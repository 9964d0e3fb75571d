/* SPDX-License-Identifier: BSD-3-Clause */
/* lib/proto: test vectors, round trips, malformed frames, segmentation. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "frames.h"
#include "proto.h"

static struct proto_msg msg, msg2;

/*
 * ---- docs/PROTOCOL.md section 10: the golden vectors, read from the
 * document itself, so the contract and the code cannot drift apart.
 */

static uint64_t
golden_u64(const char *name)
{
	char hex[64];

	cr_assert_eq(frames_golden_hex(name, hex, sizeof(hex)), 16, "%s: no 16-digit vector in %s",
		     name, frames_protocol_md());
	return strtoull(hex, NULL, 16);
}

Test(reference, isolation_id_of_acme_matches_the_document)
{
	cr_assert_eq(proto_ref_isolation_id("acme", 4), golden_u64("ref_isolation_acme"));
}

Test(reference, prefix_hashes_of_tokens_1_2_3_match_the_document)
{
	uint64_t h = proto_ref_isolation_id("acme", 4);

	h = proto_ref_hash_next(h, 1);
	cr_assert_eq(h, golden_u64("ref_hash_acme_1"));
	h = proto_ref_hash_next(h, 2);
	cr_assert_eq(h, golden_u64("ref_hash_acme_1_2"));
	h = proto_ref_hash_next(h, 3);
	cr_assert_eq(h, golden_u64("ref_hash_acme_1_2_3"));
}

Test(reference, cache_salt_roots_and_first_column_keys_match_the_document)
{
	uint64_t iso = proto_ref_isolation_id("acme", 4), salt = proto_ref_salt("user-42", 7);
	uint64_t root = proto_ref_chain_root(iso, salt);
	const uint32_t t[4] = {1, 2, 3, 4};
	uint8_t b[16];
	unsigned int i;

	cr_assert_eq(salt, golden_u64("ref_salt_user42"));
	cr_assert_eq(root, golden_u64("ref_root_acme_user42"));
	cr_assert_eq(proto_ref_chain_root(iso, 0), iso, "no salt: the chain starts at the isolation id");
	for (i = 0; i < 4; i++)
		proto_st32(b + 4 * i, t[i]);
	cr_assert_eq(XXH3_64bits_withSeed(b, sizeof(b), iso), golden_u64("ref_key_acme_1234"));
	cr_assert_eq(XXH3_64bits_withSeed(b, sizeof(b), root), golden_u64("ref_key_acme_user42_1234"));
	/* Another salt, another root; one salt in another organization, another root. */
	cr_assert_neq(proto_ref_chain_root(iso, proto_ref_salt("user-43", 7)), root);
	cr_assert_neq(proto_ref_chain_root(proto_ref_isolation_id("acne", 4), salt), root);
	/* A salt whose hash is 0 would read as none: its id is 1. */
	cr_assert_neq(proto_ref_salt("", 0), 0);
}

Test(reference, token_bytes_match_the_document)
{
	uint64_t h3 = golden_u64("ref_hash_acme_1_2_3");
	uint8_t want[20], got[20];

	cr_assert_eq(frames_golden("ref_bytes_m0_s0_c0_16", want, sizeof(want)), 16);
	proto_ref_fill(h3, 0, 0, 0, 0, got, 16);
	cr_assert_arr_eq(got, want, 16);

	cr_assert_eq(frames_golden("ref_bytes_m1_s3_c2_20", want, sizeof(want)), 20);
	proto_ref_fill(h3, 1, 3, 2, 0, got, 20);
	cr_assert_arr_eq(got, want, 20);
}

Test(golden, every_vector_of_the_document_is_one_the_tests_check)
{
	static const char *const known[] = {
		"ref_isolation_acme", "ref_hash_acme_1", "ref_hash_acme_1_2", "ref_hash_acme_1_2_3",
		"ref_bytes_m0_s0_c0_16", "ref_bytes_m1_s3_c2_20", "delete", "refill",
		"ref_salt_user42", "ref_root_acme_user42", "ref_key_acme_1234", "ref_key_acme_user42_1234",
		/* version 2 */
		"ack", "token_lost", "evict_data", "status", "delete_v1", "report_ack",
		/* test_proto_l2.c */
		"l2_down", "l2_up", "l2_delete", "l2_done", "l2_gone", "l2_inventory",
		/* test_proto_l2.c: the shared level (section 10); test_shared_obj.c */
		"sh_down", "sh_up", "sh_done", "sh_key", "sh_down_key", "shared_slice", "shared_layout", "shared_object_id",
		"shared_slice_name", "shared_record_name", "shared_namespace", "shared_generation",
		/* test_shared_seal.c */
		"shared_slice_sealed"};
	FILE *f = fopen(frames_protocol_md(), "r");
	char line[512], name[128];
	unsigned int seen = 0, k;

	cr_assert_not_null(f, "%s: %s", frames_protocol_md(), strerror(errno));
	while (fgets(line, sizeof(line), f) != NULL) {
		if (sscanf(line, "<!-- golden: %127s -->", name) != 1)
			continue;
		for (k = 0; k < sizeof(known) / sizeof(known[0]) && strcmp(known[k], name) != 0; k++)
			;
		cr_assert_lt(k, sizeof(known) / sizeof(known[0]), "vector %s is checked by no test",
			     name);
		seen++;
	}
	fclose(f);
	cr_assert_eq(seen, sizeof(known) / sizeof(known[0]), "every checked vector is in the document");
}

Test(golden, the_captures_carry_the_documents_payloads)
{
	char hex[512];

	cr_assert_gt(frames_golden_hex("delete", hex, sizeof(hex)), 0);
	cr_assert_str_eq(hex, frames_golden_delete_hex);
	cr_assert_gt(frames_golden_hex("refill", hex, sizeof(hex)), 0);
	cr_assert_str_eq(hex, frames_golden_refill_hex);
}

Test(reference, any_slice_equals_the_same_bytes_of_the_whole_stream)
{
	uint8_t whole[300], part[300];
	unsigned int off, len;

	proto_ref_fill(0xdeadbeef, 2, 1, 3, 0, whole, sizeof(whole));
	for (off = 0; off < 40; off++) {
		for (len = 0; off + len <= sizeof(whole); len += 7) {
			memset(part, 0xAA, sizeof(part));
			proto_ref_fill(0xdeadbeef, 2, 1, 3, off, part, len);
			cr_assert_arr_eq(part, whole + off, len, "off %u len %u", off, len);
			cr_assert_eq(proto_ref_check(0xdeadbeef, 2, 1, 3, off, part, len), 0);
		}
	}
}

Test(reference, check_reports_the_first_wrong_byte)
{
	uint8_t b[1000];

	proto_ref_fill(7, 0, 0, 0, 8, b, sizeof(b));
	cr_assert_eq(proto_ref_check(7, 0, 0, 0, 8, b, sizeof(b)), 0);
	b[777] ^= 1;
	cr_assert_eq(proto_ref_check(7, 0, 0, 0, 8, b, sizeof(b)), 778);
	/* Another cache, shard or model gives other bytes. */
	b[777] ^= 1;
	cr_assert_neq(proto_ref_check(7, 0, 0, 1, 8, b, sizeof(b)), 0);
	cr_assert_neq(proto_ref_check(7, 0, 1, 0, 8, b, sizeof(b)), 0);
	cr_assert_neq(proto_ref_check(7, 1, 0, 0, 8, b, sizeof(b)), 0);
}


Test(golden, delete_payload_parses_to_its_fields)
{
	uint8_t p[128];
	uint32_t n = frames_golden("delete", p, sizeof(p));
	struct proto_delete d;

	cr_assert_eq(n, 64);
	cr_assert_eq(proto_parse_payload(p, n, 7400, &proto_ports_default, &msg), PROTO_OK);
	cr_assert_eq(msg.hdr.type, PROTO_T_DELETE);
	cr_assert_eq(msg.hdr.seq, 7);
	cr_assert_eq(msg.hdr.epoch, 0x01020304);
	cr_assert_eq(msg.hdr.model_id, 0);
	cr_assert_eq(msg.hdr.shard_id, PROTO_SHARD_ALL);
	cr_assert_eq(msg.hdr.count, 1);
	cr_assert_eq(msg.hdr.flags, 0);
	proto_get_delete(&msg, 0, &d);
	cr_assert_eq(d.prompt_id, 111);
	cr_assert_eq(d.evict_count, 1000);
	cr_assert_eq(d.start_token_idx, 4);
	cr_assert_eq(d.end_token_idx, 7);
	cr_assert_eq(d.cache_id, 0);
}

Test(golden, delete_payload_is_built_byte_for_byte)
{
	uint8_t want[128], got[128];
	uint32_t n = frames_golden("delete", want, sizeof(want));
	struct proto_builder b;
	struct proto_hdr h = {.type = PROTO_T_DELETE, .shard_id = PROTO_SHARD_ALL,
			      .epoch = 0x01020304, .seq = 7};
	struct proto_delete d = {.prompt_id = 111, .evict_count = 1000, .start_token_idx = 4,
				 .end_token_idx = 7, .cache_id = 0};

	cr_assert_eq(proto_build_begin(&b, got, sizeof(got), &h), 0);
	cr_assert_eq(proto_build_delete(&b, &d), 0);
	cr_assert_eq(proto_build_end(&b), n);
	cr_assert_arr_eq(got, want, n);
}

Test(golden, refill_payload_parses_to_its_fields)
{
	uint8_t p[128];
	uint32_t n = frames_golden("refill", p, sizeof(p)), off = 0;
	struct proto_refill_req r;
	struct proto_refill_chunk c;
	const uint8_t *chunks;

	cr_assert_eq(n, 96);
	cr_assert_eq(proto_parse_payload(p, n, 7400, &proto_ports_default, &msg), PROTO_OK);
	cr_assert_eq(msg.hdr.type, PROTO_T_REFILL);
	cr_assert_eq(msg.hdr.seq, 8);
	cr_assert_eq(msg.hdr.count, 1);
	cr_assert_eq(proto_next_refill(&msg, &off, &r, &chunks), 1);
	cr_assert_eq(r.refill_id, 42);
	cr_assert_eq(r.evict_count, 2580);
	cr_assert_eq(r.sequence_id, 9);
	cr_assert_eq(r.cache_idx, 0);
	cr_assert_eq(r.cache_id, 0);
	cr_assert_eq(r.num_chunks, 2);
	proto_get_refill_chunk(chunks, 0, &c);
	cr_assert_eq(c.prompt_id, 111);
	cr_assert_eq(c.start_token_idx, 0);
	cr_assert_eq(c.num_tokens, 4);
	proto_get_refill_chunk(chunks, 1, &c);
	cr_assert_eq(c.prompt_id, 222);
	cr_assert_eq(c.start_token_idx, 4);
	cr_assert_eq(c.num_tokens, 8);
	cr_assert_eq(proto_next_refill(&msg, &off, &r, &chunks), 0);
}

Test(golden, refill_payload_is_built_byte_for_byte)
{
	uint8_t want[128], got[128];
	uint32_t n = frames_golden("refill", want, sizeof(want));
	struct proto_builder b;
	struct proto_hdr h = {.type = PROTO_T_REFILL, .shard_id = PROTO_SHARD_ALL,
			      .epoch = 0x01020304, .seq = 8};
	struct proto_refill_req r = {.refill_id = 42, .evict_count = 2580, .sequence_id = 9};
	struct proto_refill_chunk c1 = {111, 0, 4}, c2 = {222, 4, 8};

	cr_assert_eq(proto_build_begin(&b, got, sizeof(got), &h), 0);
	cr_assert_eq(proto_build_refill_req(&b, &r), 0);
	cr_assert_eq(proto_build_refill_chunk(&b, &c1), 0);
	cr_assert_eq(proto_build_refill_chunk(&b, &c2), 0);
	cr_assert_eq(proto_build_end(&b), n);
	cr_assert_arr_eq(got, want, n);
}

/* ---- Version 2's changed records, and version 1 decoded ----------------- */

/* Build @p h with @p add's records and compare with the vector @p name. */
#define GOLDEN_BUILT(name, h, ...)                                                          \
	do {                                                                                \
		uint8_t want_[256], got_[256];                                              \
		uint32_t n_ = frames_golden(name, want_, sizeof(want_));                    \
		struct proto_builder b;                                                     \
		cr_assert_gt(n_, 0, "no vector %s", name);                                  \
		cr_assert_eq(proto_build_begin(&b, got_, sizeof(got_), &(h)), 0);           \
		__VA_ARGS__;                                                                \
		cr_assert_eq(proto_build_end(&b), n_, "%s: length", name);                  \
		cr_assert_arr_eq(got_, want_, n_, "%s: bytes", name);                       \
	} while (0)

static void
parse_golden(const char *name, uint16_t port, const struct proto_ports *ports)
{
	uint8_t p[256];
	uint32_t n = frames_golden(name, p, sizeof(p));

	cr_assert_gt(n, 0, "no vector %s", name);
	cr_assert_eq(proto_parse_payload(p, n, port, ports, &msg), PROTO_OK, "%s", name);
}

Test(golden_v2, ack_carries_done_and_received)
{
	struct proto_hdr h = {.type = PROTO_T_ACK, .epoch = 0x05060708};
	struct proto_ack a = {40, 44};

	GOLDEN_BUILT("ack", h, cr_assert_eq(proto_build_ack(&b, &a), 0));
	parse_golden("ack", 7400, &proto_ports_default);
	cr_assert_eq(msg.hdr.version, 2);
	cr_assert_eq(msg.u.ack.cum_seq, 40);
	cr_assert_eq(msg.u.ack.recv_seq, 44);
}

Test(golden_v2, token_lost_is_a_range)
{
	/* A report: its seq is the report seq, never 0 (section 5 keeps 0 for
	 * a report sent with the window full). */
	struct proto_hdr h = {.type = PROTO_T_TOKEN_LOST, .epoch = 0x05060708, .seq = 3};
	struct proto_lost l = {111, 152, 2, 0}, got;

	GOLDEN_BUILT("token_lost", h, cr_assert_eq(proto_build_lost(&b, &l), 0));
	parse_golden("token_lost", 7400, &proto_ports_default);
	cr_assert_eq(msg.hdr.seq, 3);
	proto_get_lost(&msg, 0, &got);
	cr_assert_eq(got.prompt_id, 111);
	cr_assert_eq(got.token_idx, 152);
	cr_assert_eq(got.count, 2);
	cr_assert_eq(got.cache_id, 0);
}

Test(golden_v2, evict_data_names_its_stream)
{
	struct proto_hdr h = {.type = PROTO_T_EVICT_DATA, .epoch = 0x0a0b0c0d};
	struct proto_data_hdr d = {1000, 0, 16, 32, 0x01020304};
	uint8_t x[16];
	unsigned int i;

	for (i = 0; i < 16; i++)
		x[i] = (uint8_t)i;
	GOLDEN_BUILT("evict_data", h, cr_assert_eq(proto_build_data_hdr(&b, &d), 0);
		     cr_assert_eq(proto_build_bytes(&b, x, 16), 0));
	parse_golden("evict_data", 7401, &proto_ports_default);
	cr_assert_eq(msg.u.data.batch_no, 1000);
	cr_assert_eq(msg.u.data.stream_offset, 16);
	cr_assert_eq(msg.u.data.stream_len, 32);
	cr_assert_eq(msg.u.data.driver_epoch, 0x01020304);
	cr_assert_eq(msg.data_len, 16);
}

Test(golden_v2, status_gives_both_tiers)
{
	struct proto_hdr h = {.type = PROTO_T_STATUS, .epoch = 0x05060708};
	struct proto_status st = {1000, 11, 1000000000ull, PROTO_STATUS_F_L2, 0x01020304};
	struct proto_cache_info c = {0, 4, 16384, 100000, 4096, 3, 1000000, 65536}, got;

	GOLDEN_BUILT("status", h, cr_assert_eq(proto_build_status(&b, &st), 0);
		     cr_assert_eq(proto_build_cache_info(&b, &c), 0));
	parse_golden("status", 7400, &proto_ports_default);
	cr_assert_eq(msg.u.status.flags, PROTO_STATUS_F_L2);
	proto_get_cache_info(&msg, 0, &got);
	cr_assert_eq(got.stored_tokens, 4096);
	cr_assert_eq(got.prompts, 3);
	cr_assert_eq(got.l2_capacity_tokens, 1000000);
	cr_assert_eq(got.l2_stored_tokens, 65536);
}

Test(golden_v2, report_ack_acknowledges_reports)
{
	struct proto_hdr h = {.type = PROTO_T_REPORT_ACK, .epoch = 0x01020304};

	GOLDEN_BUILT("report_ack", h, cr_assert_eq(proto_build_report_ack(&b, 7), 0));
	parse_golden("report_ack", 7400, &proto_ports_default);
	cr_assert_eq(msg.hdr.type, PROTO_T_REPORT_ACK);
	cr_assert_eq(msg.hdr.seq, 0);
	cr_assert_eq(msg.u.ack.cum_seq, 7);
}

Test(golden_v2, version_1_is_decoded_only_when_asked)
{
	uint8_t p[128];
	uint32_t n = frames_golden("delete_v1", p, sizeof(p));
	struct proto_ports v1 = proto_ports_default;
	struct proto_delete d;

	cr_assert_eq(n, 64);
	cr_assert_eq(proto_parse_payload(p, n, 7400, &proto_ports_default, &msg),
		     PROTO_R_BAD_VERSION, "a party takes version 2 only");
	v1.accept_v1 = true;
	cr_assert_eq(proto_parse_payload(p, n, 7400, &v1, &msg), PROTO_OK);
	cr_assert_eq(msg.hdr.version, 1);
	proto_get_delete(&msg, 0, &d);
	cr_assert_eq(d.prompt_id, 111);
	cr_assert_eq(d.end_token_idx, 7);
}

Test(golden_v2, version_1_records_keep_their_layout)
{
	/* A v1 TOKEN_LOST (16-byte record) and ACK (reserved second word), by hand. */
	uint8_t p[64] = {'K', 'V', 'S', 'S', 1, PROTO_T_TOKEN_LOST};
	struct proto_ports v1 = proto_ports_default;
	struct proto_lost l;

	v1.accept_v1 = true;
	p[14] = 1;		/* count */
	p[20] = 16;		/* body_len */
	p[32] = 111;		/* prompt_id */
	p[40] = 152;		/* token_idx */
	p[44] = 1;		/* cache_id */
	cr_assert_eq(proto_parse_payload(p, 48, 7400, &v1, &msg), PROTO_OK);
	proto_get_lost(&msg, 0, &l);
	cr_assert_eq(l.prompt_id, 111);
	cr_assert_eq(l.token_idx, 152);
	cr_assert_eq(l.count, 1);
	cr_assert_eq(l.cache_id, 1);
	memset(p, 0, sizeof(p));
	memcpy(p, "KVSS", 4);
	p[4] = 1;
	p[5] = PROTO_T_ACK;
	p[20] = 16;
	p[32] = 9;
	p[40] = 0xEE; /* reserved in version 1: not a received seq */
	cr_assert_eq(proto_parse_payload(p, 48, 7400, &v1, &msg), PROTO_OK);
	cr_assert_eq(msg.u.ack.cum_seq, 9);
	cr_assert_eq(msg.u.ack.recv_seq, 9);
}

/* ---- Round trips of every type ------------------------------------------ */

Test(roundtrip, every_sample_covers_every_type)
{
	uint8_t buf[PROTO_PAYLOAD_MAX];
	bool seen[256] = {false};
	unsigned int i, type;

	for (i = 0; i < frames_count(); i++) {
		cr_assert_gt(frames_payload(i, buf, sizeof(buf), &type), 0);
		cr_assert_not_null(proto_type_name(type));
		seen[type & 0xff] = true;
	}
#define WANT(name, val) cr_assert(seen[val], "no sample of " #name);
	PROTO_TYPES(WANT)
#undef WANT
}

static void
roundtrip_frame(unsigned int i, bool vlan)
{
	uint8_t frame[PROTO_FRAME_MAX];
	uint32_t n = frames_frame(i, vlan, frame, sizeof(frame));
	enum proto_reason r;

	cr_assert_gt(n, 0);
	r = proto_parse(frame, n, &proto_ports_default, &msg);
	cr_assert_eq(r, PROTO_OK, "sample %u: %s", i, proto_reason_name(r));
	cr_assert_eq(msg.addr.has_vlan, vlan);
	if (vlan)
		cr_assert_eq(msg.addr.vlan_tci, 0x2064);
	cr_assert_eq(msg.addr.src_ip, 0x0a000001);
	cr_assert_eq(msg.addr.dst_ip, 0x0a000002);
	cr_assert_eq(msg.addr.src_port, 40000);
	cr_assert_eq(msg.hdr.model_id, 1);
	cr_assert_eq(msg.hdr.shard_id, 3);
	cr_assert_eq(msg.hdr.epoch, 0xA1B2C3D4);
	cr_assert_eq(msg.hdr.flags, PROTO_F_ACK_REQ);
}

Test(roundtrip, every_type_parses_back_untagged_and_tagged)
{
	unsigned int i;

	for (i = 0; i < frames_count(); i++) {
		roundtrip_frame(i, false);
		roundtrip_frame(i, true);
	}
}

/* Find the sample of @type and parse its frame into msg. */
static void
parse_sample(unsigned int want_type)
{
	uint8_t pay[PROTO_PAYLOAD_MAX], frame[PROTO_FRAME_MAX];
	unsigned int i, type;
	uint32_t n;

	for (i = 0; i < frames_count(); i++) {
		n = frames_payload(i, pay, sizeof(pay), &type);
		if (type != want_type)
			continue;
		n = frames_wrap(pay, n, type, false, frame, sizeof(frame));
		cr_assert_eq(proto_parse(frame, n, &proto_ports_default, &msg), PROTO_OK);
		return;
	}
	cr_assert_fail("no sample of type %u", want_type);
}

Test(roundtrip, reserve_records_keep_their_values)
{
	struct proto_reserve r;

	parse_sample(PROTO_T_RESERVE);
	cr_assert_eq(msg.hdr.count, 2);
	proto_get_reserve(&msg, 1, &r);
	cr_assert_eq(r.prompt_id, 0x1111222233334445ULL);
	cr_assert_eq(r.continue_id, 0x99);
	cr_assert_eq(r.start_token_idx, 128);
	cr_assert_eq(r.num_tokens, 4096);
	cr_assert_eq(r.cache_id, 1);
}

Test(roundtrip, evict_batch_lists_entries_in_wire_order)
{
	struct proto_evict_entry e;
	unsigned int k;

	parse_sample(PROTO_T_EVICT);
	cr_assert_eq(msg.u.evict.batch_no, 77);
	cr_assert_eq(msg.u.evict.num_caches, 2);
	cr_assert_eq(msg.u.evict.g, 3);
	cr_assert_eq(msg.hdr.count, 6);
	for (k = 0; k < 6; k++) {
		proto_get_evict_entry(&msg, k, &e);
		cr_assert_eq(e.prompt_id, k % 2 ? 0 : 0xABCDEF0123456789ULL);
		cr_assert_eq(e.token_idx, 500 + k / 2);
		cr_assert_eq(e.sequence_id, 31);
	}
}

Test(roundtrip, refill_requests_carry_their_chunks)
{
	struct proto_refill_req r;
	struct proto_refill_chunk c;
	const uint8_t *chunks;
	uint32_t off = 0;
	unsigned int k = 0, j;

	parse_sample(PROTO_T_REFILL);
	cr_assert_eq(msg.hdr.count, 2);
	while (proto_next_refill(&msg, &off, &r, &chunks)) {
		cr_assert_eq(r.refill_id, 42 + k);
		cr_assert_eq(r.evict_count, 2580);
		cr_assert_eq(r.cache_idx, 64 * k);
		cr_assert_eq(r.cache_id, k);
		cr_assert_eq(r.num_chunks, k + 2);
		for (j = 0; j < r.num_chunks; j++) {
			proto_get_refill_chunk(chunks, j, &c);
			cr_assert_eq(c.prompt_id, 111 + j);
			cr_assert_eq(c.start_token_idx, 64 * j);
			cr_assert_eq(c.num_tokens, 64);
		}
		k++;
	}
	cr_assert_eq(k, 2);
}

Test(roundtrip, delete_records_keep_their_values)
{
	struct proto_delete d;

	parse_sample(PROTO_T_DELETE);
	cr_assert_eq(msg.hdr.count, 3);
	proto_get_delete(&msg, 2, &d);
	cr_assert_eq(d.prompt_id, 0x8000000000000003ULL);
	cr_assert_eq(d.evict_count, 1002);
	cr_assert_eq(d.start_token_idx, 8);
	cr_assert_eq(d.end_token_idx, 11);
	cr_assert_eq(d.cache_id, 2);
}

Test(roundtrip, status_body_and_caches_keep_their_values)
{
	struct proto_cache_info c;

	parse_sample(PROTO_T_STATUS);
	cr_assert_eq(msg.u.status.batches_complete, 123456);
	cr_assert_eq(msg.u.status.reports, 1001);
	cr_assert_eq(msg.u.status.uptime_ns, 987654321);
	cr_assert_eq(msg.u.status.flags, PROTO_STATUS_F_STALLED);
	cr_assert_eq(msg.u.status.driver_epoch, 0xA1B2C3D4);
	cr_assert_eq(msg.hdr.count, 2);
	proto_get_cache_info(&msg, 1, &c);
	cr_assert_eq(c.cache_id, 1);
	cr_assert_eq(c.num_buffers, 4);
	cr_assert_eq(c.bytes_per_token, 8192);
	cr_assert_eq(c.capacity_tokens, 1000000);
	cr_assert_eq(c.stored_tokens, 1235);
	cr_assert_eq(c.prompts, 7);
	cr_assert_eq(c.l2_capacity_tokens, 8000000); /* version 2 */
	cr_assert_eq(c.l2_stored_tokens, 8192);
}

Test(roundtrip, ack_error_done_lost_keep_their_values)
{
	struct proto_error e;
	struct proto_refill_done d;
	struct proto_lost l;

	parse_sample(PROTO_T_ACK);
	cr_assert_eq(msg.u.ack.cum_seq, 0x0102030405060708ULL);
	cr_assert_eq(msg.u.ack.recv_seq, 0x0102030405060710ULL); /* version 2 */

	parse_sample(PROTO_T_ERROR);
	proto_get_error(&msg, 1, &e);
	cr_assert_eq(e.seq, 1005);
	cr_assert_eq(e.prompt_id, 111);
	cr_assert_eq(e.token_idx, 153);
	cr_assert_eq(e.code, PROTO_E_LEFT_GROWTH);

	parse_sample(PROTO_T_REFILL_DONE);
	proto_get_refill_done(&msg, 0, &d);
	cr_assert_eq(d.refill_id, 42);
	cr_assert_eq(d.tokens, 128);
	cr_assert_eq(d.bytes, 128 * 4096);
	proto_get_refill_done(&msg, 1, &d);
	cr_assert_eq(d.status, PROTO_E_RANGE);

	parse_sample(PROTO_T_TOKEN_LOST);
	proto_get_lost(&msg, 0, &l);
	cr_assert_eq(l.prompt_id, 0xFEEDFACE);
	cr_assert_eq(l.token_idx, 64);
	cr_assert_eq(l.count, 130); /* version 2: a range */
	cr_assert_eq(l.cache_id, 1);
}

Test(roundtrip, data_frames_locate_their_payload)
{
	uint8_t frame[PROTO_FRAME_MAX], pay[PROTO_PAYLOAD_MAX];
	unsigned int i, type;
	uint32_t n;

	for (i = 0; i < frames_count(); i++) {
		n = frames_payload(i, pay, sizeof(pay), &type);
		if (type != PROTO_T_EVICT_DATA && type != PROTO_T_REFILL_DATA)
			continue;
		n = frames_wrap(pay, n, type, true, frame, sizeof(frame));
		cr_assert_eq(proto_parse(frame, n, &proto_ports_default, &msg), PROTO_OK);
		if (type == PROTO_T_EVICT_DATA) {
			cr_assert_eq(msg.u.data.batch_no, 77);
			cr_assert_eq(msg.u.data.cache_id, 1);
			cr_assert_eq(msg.u.data.stream_offset, 16);
			cr_assert_eq(msg.u.data.stream_len, 96);
			cr_assert_eq(msg.u.data.driver_epoch, 0x0A0B0C0D); /* version 2 */
			cr_assert_eq(msg.data_len, 40);
			cr_assert_eq(proto_ref_check(0x1234, 1, 3, 1, 16, frame + msg.data_off, 40), 0);
		} else {
			cr_assert_eq(msg.u.refill_data.refill_id, 42);
			cr_assert_eq(msg.u.refill_data.sequence_id, 9);
			cr_assert_eq(msg.u.refill_data.cache_idx, 128);
			cr_assert_eq(msg.u.refill_data.buffer_id, 2);
			cr_assert_eq(msg.u.refill_data.stream_len, 64);
			cr_assert_eq(msg.data_len, 64);
			cr_assert_eq(proto_ref_check(0x5678, 1, 3, 0, 0, frame + msg.data_off, 64), 0);
		}
		cr_assert_null(msg.body);
	}
}

/* ---- Builder limits ----------------------------------------------------- */

Test(builder, a_record_that_does_not_fit_leaves_the_message_whole)
{
	uint8_t buf[PROTO_HDR_LEN + 2 * PROTO_DELETE_LEN + 5];
	struct proto_builder b;
	struct proto_hdr h = {.type = PROTO_T_DELETE, .seq = 3};
	struct proto_delete d = {.prompt_id = 5, .end_token_idx = 9};

	cr_assert_eq(proto_build_begin(&b, buf, sizeof(buf), &h), 0);
	cr_assert_eq(proto_build_delete(&b, &d), 0);
	cr_assert_eq(proto_build_delete(&b, &d), 0);
	cr_assert_eq(proto_build_delete(&b, &d), -ENOSPC);
	cr_assert_eq(proto_build_end(&b), PROTO_HDR_LEN + 2 * PROTO_DELETE_LEN);
	cr_assert_eq(proto_parse_payload(buf, b.len, 7400, &proto_ports_default, &msg), PROTO_OK);
	cr_assert_eq(msg.hdr.count, 2);
}

Test(builder, records_of_another_type_are_refused)
{
	uint8_t buf[256];
	struct proto_builder b;
	struct proto_hdr h = {.type = PROTO_T_DELETE};
	struct proto_reserve r = {0};
	struct proto_refill_chunk c = {0};

	cr_assert_eq(proto_build_begin(&b, buf, sizeof(buf), &h), 0);
	cr_assert_eq(proto_build_reserve(&b, &r), -EINVAL);
	cr_assert_eq(proto_build_refill_chunk(&b, &c), -EINVAL);
	h.type = 0x7f;
	cr_assert_eq(proto_build_begin(&b, buf, sizeof(buf), &h), -EINVAL);
	h.type = PROTO_T_HELLO;
	cr_assert_eq(proto_build_begin(&b, buf, 31, &h), -ENOSPC);
}

Test(builder, evict_fills_in_g_from_the_entries)
{
	uint8_t buf[512];
	struct proto_builder b;
	struct proto_hdr h = {.type = PROTO_T_EVICT, .seq = 1};
	struct proto_evict_hdr eh = {.batch_no = 1, .num_caches = 3, .g = 0};
	struct proto_evict_entry e = {.prompt_id = 9};
	int k;

	cr_assert_eq(proto_build_begin(&b, buf, sizeof(buf), &h), 0);
	cr_assert_eq(proto_build_evict_entry(&b, &e), -EINVAL); /* header first */
	cr_assert_eq(proto_build_evict_hdr(&b, &eh), 0);
	for (k = 0; k < 12; k++)
		cr_assert_eq(proto_build_evict_entry(&b, &e), 0);
	proto_build_end(&b);
	cr_assert_eq(proto_parse_payload(buf, b.len, 7400, &proto_ports_default, &msg), PROTO_OK);
	cr_assert_eq(msg.u.evict.g, 4);
}

Test(builder, evict_limit_follows_section_7)
{
	cr_assert_eq(proto_evict_max_entries(9000), 557);
	cr_assert_eq(proto_evict_max_entries(1500), 89);
	cr_assert_eq(proto_evict_max_entries(10), 0);
}

/* ---- Malformed frames --------------------------------------------------- */

struct bad_case {
	char what[40];
	unsigned int type; /* sample to start from */
	int off;	   /* byte to change: >= 0 from the frame start, < 0 from the payload
			      start (-1 - off) */
	uint8_t xor_mask;
	int set;	  /* >= 0: set the byte to this value instead of xor */
	int fix_ip;	  /* recompute the IPv4 checksum afterwards */
	enum proto_reason want;
};

#define PL(o) (-1 - (o)) /* offset inside the UDP payload */

static struct bad_case bad_cases[] = {
	{"ethertype is ARP", PROTO_T_HELLO, 13, 0, 0x06, 0, PROTO_R_NOT_KVSS},
	{"ethertype is QinQ 0x9100", PROTO_T_HELLO, 12, 0, 0x91, 0, PROTO_R_VLAN_STACKED},
	{"IPv6 version nibble", PROTO_T_HELLO, 14, 0, 0x65, 1, PROTO_R_NOT_KVSS},
	{"IPv4 options", PROTO_T_HELLO, 14, 0, 0x46, 1, PROTO_R_IP_OPTIONS},
	{"TCP not UDP", PROTO_T_HELLO, 23, 0, 6, 1, PROTO_R_NOT_KVSS},
	{"IP checksum wrong", PROTO_T_DELETE, 24, 0x01, -1, 0, PROTO_R_BAD_IP_CHECKSUM},
	{"more fragments", PROTO_T_DELETE, 20, 0, 0x20, 1, PROTO_R_IP_FRAGMENT},
	{"fragment offset", PROTO_T_DELETE, 21, 0, 0x08, 1, PROTO_R_IP_FRAGMENT},
	{"not a KVSS port", PROTO_T_DELETE, 36, 0, 0x10, 0, PROTO_R_NOT_KVSS},
	{"UDP length short", PROTO_T_DELETE, 39, 0x04, -1, 0, PROTO_R_BAD_UDP_LEN},
	{"UDP checksum wrong", PROTO_T_DELETE, 41, 0, 0x55, 0, PROTO_R_BAD_UDP_CHECKSUM},
	{"magic", PROTO_T_DELETE, PL(0), 0x20, -1, 0, PROTO_R_BAD_MAGIC},
	{"magic last byte", PROTO_T_ACK, PL(3), 0x01, -1, 0, PROTO_R_BAD_MAGIC},
	{"version 3", PROTO_T_DELETE, PL(4), 0, 3, 0, PROTO_R_BAD_VERSION},
	{"version 1 to a party", PROTO_T_DELETE, PL(4), 0, 1, 0, PROTO_R_BAD_VERSION},
	{"version 0", PROTO_T_HELLO, PL(4), 0, 0, 0, PROTO_R_BAD_VERSION},
	{"type 0", PROTO_T_DELETE, PL(5), 0, 0, 0, PROTO_R_BAD_TYPE},
	{"type 0x0c", PROTO_T_DELETE, PL(5), 0, 0x0c, 0, PROTO_R_BAD_TYPE},
	{"type 0x22", PROTO_T_EVICT_DATA, PL(5), 0, 0x22, 0, PROTO_R_BAD_TYPE},
	{"control type on evict port", PROTO_T_EVICT_DATA, PL(5), 0, PROTO_T_DELETE, 0,
	 PROTO_R_WRONG_PORT},
	{"REFILL_DATA on control port", PROTO_T_DELETE, PL(5), 0, PROTO_T_REFILL_DATA, 0,
	 PROTO_R_WRONG_PORT},
	{"EVICT_DATA on refill port", PROTO_T_REFILL_DATA, PL(5), 0, PROTO_T_EVICT_DATA, 0,
	 PROTO_R_WRONG_PORT},
	{"body_len one more", PROTO_T_DELETE, PL(20), 0x01, -1, 0, PROTO_R_BAD_BODY_LEN},
	{"body_len huge", PROTO_T_DELETE, PL(23), 0, 0x80, 0, PROTO_R_BAD_BODY_LEN},
	{"delete count too big", PROTO_T_DELETE, PL(14), 0, 4, 0, PROTO_R_BAD_COUNT},
	{"delete count too small", PROTO_T_DELETE, PL(14), 0, 2, 0, PROTO_R_BAD_COUNT},
	{"reserve count zero", PROTO_T_RESERVE, PL(14), 0, 0, 0, PROTO_R_BAD_COUNT},
	{"hello with a count", PROTO_T_HELLO, PL(14), 0, 1, 0, PROTO_R_BAD_COUNT},
	{"ack with a count", PROTO_T_ACK, PL(14), 0, 1, 0, PROTO_R_BAD_COUNT},
	{"evict count != G x C", PROTO_T_EVICT, PL(14), 0, 5, 0, PROTO_R_BAD_COUNT},
	{"evict G wrong", PROTO_T_EVICT, PL(32 + 10), 0, 4, 0, PROTO_R_BAD_COUNT},
	{"evict num_caches wrong", PROTO_T_EVICT, PL(32 + 8), 0, 3, 0, PROTO_R_BAD_COUNT},
	{"refill count wrong", PROTO_T_REFILL, PL(14), 0, 3, 0, PROTO_R_BAD_COUNT},
	{"refill chunks overrun", PROTO_T_REFILL, PL(32 + 26), 0, 9, 0, PROTO_R_BAD_COUNT},
	{"refill chunks underrun", PROTO_T_REFILL, PL(32 + 26), 0, 1, 0, PROTO_R_BAD_COUNT},
	{"refill chunk count huge", PROTO_T_REFILL, PL(32 + 27), 0, 0xff, 0, PROTO_R_BAD_COUNT},
	{"status count wrong", PROTO_T_STATUS, PL(14), 0, 3, 0, PROTO_R_BAD_COUNT},
	{"error count wrong", PROTO_T_ERROR, PL(14), 0, 1, 0, PROTO_R_BAD_COUNT},
	{"refill_done count wrong", PROTO_T_REFILL_DONE, PL(14), 0, 3, 0, PROTO_R_BAD_COUNT},
	{"token_lost count wrong", PROTO_T_TOKEN_LOST, PL(14), 0, 0, 0, PROTO_R_BAD_COUNT},
	{"evict_data with a count", PROTO_T_EVICT_DATA, PL(14), 0, 1, 0, PROTO_R_BAD_COUNT},
	{"evict_data past its stream", PROTO_T_EVICT_DATA, PL(32 + 16), 0, 40, 0,
	 PROTO_R_BAD_DATA_RANGE},
	{"evict_data offset wraps", PROTO_T_EVICT_DATA, PL(32 + 15), 0, 0xff, 0,
	 PROTO_R_BAD_DATA_RANGE},
	{"refill_data past its stream", PROTO_T_REFILL_DATA, PL(32 + 20), 0, 1, 0,
	 PROTO_R_BAD_DATA_RANGE},
};

ParameterizedTestParameters(malformed, each_case_has_its_own_reason)
{
	return cr_make_param_array(struct bad_case, bad_cases,
				   sizeof(bad_cases) / sizeof(bad_cases[0]));
}

static uint32_t
sample_frame_of(unsigned int want_type, uint8_t *frame, uint32_t cap)
{
	uint8_t pay[PROTO_PAYLOAD_MAX];
	unsigned int i, type;
	uint32_t n;

	for (i = 0; i < frames_count(); i++) {
		n = frames_payload(i, pay, sizeof(pay), &type);
		if (type == want_type)
			return frames_wrap(pay, n, type, false, frame, cap);
	}
	return 0;
}

ParameterizedTest(struct bad_case *c, malformed, each_case_has_its_own_reason)
{
	uint8_t frame[PROTO_FRAME_MAX];
	uint32_t n = sample_frame_of(c->type, frame, sizeof(frame));
	uint32_t at = c->off >= 0 ? (uint32_t)c->off : PROTO_L2L4_LEN + (uint32_t)(-1 - c->off);
	enum proto_reason r;

	cr_assert_gt(n, at, "%s: offset outside the sample", c->what);
	cr_assert_eq(proto_parse(frame, n, &proto_ports_default, &msg), PROTO_OK);
	if (c->set >= 0)
		frame[at] = (uint8_t)c->set;
	else
		frame[at] ^= c->xor_mask;
	if (c->fix_ip) {
		frame[24] = frame[25] = 0;
		uint16_t ck = proto_ip4_cksum(frame + 14, 20);
		frame[24] = (uint8_t)(ck >> 8);
		frame[25] = (uint8_t)ck;
	}
	r = proto_parse(frame, n, &proto_ports_default, &msg);
	cr_assert_eq(r, c->want, "%s: got %s, want %s", c->what, proto_reason_name(r),
		     proto_reason_name(c->want));
}

Test(malformed, two_vlan_tags_are_dropped)
{
	uint8_t frame[PROTO_FRAME_MAX], two[PROTO_FRAME_MAX];
	uint32_t n = frames_frame(0, true, frame, sizeof(frame));

	/* Insert a second 802.1Q tag after the first. */
	memcpy(two, frame, 16);
	two[16] = 0x81;
	two[17] = 0x00;
	two[18] = 0x00;
	two[19] = 0x05;
	memcpy(two + 20, frame + 16, n - 16);
	cr_assert_eq(proto_parse(two, n + 4, &proto_ports_default, &msg), PROTO_R_VLAN_STACKED);
}

Test(malformed, a_correct_nonzero_udp_checksum_is_accepted)
{
	uint8_t frame[PROTO_FRAME_MAX];
	uint32_t n = sample_frame_of(PROTO_T_REFILL, frame, sizeof(frame)), i, sum = 0;
	uint32_t ulen = n - 34;
	uint16_t ck;

	/* Compute the real UDP checksum over pseudo-header, header and payload. */
	for (i = 26; i < 34; i += 2) /* src and dst IP */
		sum += (uint32_t)(frame[i] << 8 | frame[i + 1]);
	sum += 17 + ulen;
	for (i = 0; i < ulen; i += 2)
		sum += (uint32_t)(frame[34 + i] << 8 | (i + 1 < ulen ? frame[34 + i + 1] : 0));
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	ck = (uint16_t)~sum;
	if (ck == 0)
		ck = 0xffff;
	frame[40] = (uint8_t)(ck >> 8);
	frame[41] = (uint8_t)ck;
	cr_assert_eq(proto_parse(frame, n, &proto_ports_default, &msg), PROTO_OK);
	frame[60] ^= 0x10;
	cr_assert_eq(proto_parse(frame, n, &proto_ports_default, &msg), PROTO_R_BAD_UDP_CHECKSUM);
}

Test(malformed, other_ports_can_be_configured)
{
	uint8_t frame[PROTO_FRAME_MAX];
	uint32_t n = sample_frame_of(PROTO_T_DELETE, frame, sizeof(frame));
	struct proto_ports p = {.ctrl = 9400, .evict = 9401, .refill = 9402};

	cr_assert_eq(proto_parse(frame, n, &p, &msg), PROTO_R_NOT_KVSS);
	frame[36] = 9400 >> 8;
	frame[37] = 9400 & 0xff;
	cr_assert_eq(proto_parse(frame, n, &p, &msg), PROTO_OK);
}

Test(malformed, ethernet_padding_after_the_datagram_is_ignored)
{
	uint8_t frame[PROTO_FRAME_MAX];
	uint32_t n = sample_frame_of(PROTO_T_HELLO, frame, sizeof(frame));

	memset(frame + n, 0, 60);
	cr_assert_eq(proto_parse(frame, n + 17, &proto_ports_default, &msg), PROTO_OK);
}

Test(truncation, every_truncation_of_every_type_is_truncated)
{
	uint8_t frame[PROTO_FRAME_MAX];
	unsigned int i, v;
	uint32_t n, len;
	enum proto_reason r;

	for (v = 0; v < 2; v++) {
		for (i = 0; i < frames_count(); i++) {
			n = frames_frame(i, v, frame, sizeof(frame));
			for (len = 0; len < n; len++) {
				/* A fresh heap copy of exactly len bytes: ASan sees any overread. */
				uint8_t *cut = malloc(len ? len : 1);

				memcpy(cut, frame, len);
				r = proto_parse(cut, len, &proto_ports_default, &msg);
				free(cut);
				cr_assert_eq(r, PROTO_R_TRUNCATED, "sample %u vlan %u len %u/%u: %s",
					     i, v, len, n, proto_reason_name(r));
			}
		}
	}
}

/* ---- Segmented frames --------------------------------------------------- */

static void
assert_same_msg(const struct proto_msg *a, const struct proto_msg *b)
{
	cr_assert_eq(memcmp(&a->hdr, &b->hdr, sizeof(a->hdr)), 0);
	cr_assert_eq(memcmp(&a->addr, &b->addr, sizeof(a->addr)), 0);
	cr_assert_eq(a->data_off, b->data_off);
	cr_assert_eq(a->data_len, b->data_len);
	if (a->body != NULL) {
		cr_assert_not_null(b->body);
		cr_assert_eq(memcmp(a->body, b->body, a->hdr.body_len), 0);
	}
}

Test(segments, every_split_into_two_or_three_parses_like_one_buffer)
{
	uint8_t frame[PROTO_FRAME_MAX];
	unsigned int i;
	uint32_t n, s1, s2;

	for (i = 0; i < frames_count(); i++) {
		n = frames_frame(i, i & 1, frame, sizeof(frame));
		cr_assert_eq(proto_parse(frame, n, &proto_ports_default, &msg), PROTO_OK);
		for (s1 = 0; s1 <= n; s1++) {
			for (s2 = s1; s2 <= n; s2 += (s1 % 5 == 0 ? 1 : 13)) {
				struct proto_seg seg[3] = {
					{frame, s1}, {frame + s1, s2 - s1}, {frame + s2, n - s2}};
				struct proto_segs segs = {seg, 3};
				struct proto_src src;

				proto_src_segs(&src, &segs);
				cr_assert_eq(proto_parse_src(&src, &proto_ports_default, &msg2),
					     PROTO_OK, "sample %u split %u/%u", i, s1, s2);
				assert_same_msg(&msg, &msg2);
			}
		}
	}
}

/* ---- Fuzz regressions: every input the fuzzer ever crashed on ----------- */

Test(fuzz_regress, stored_inputs_parse_alike_flat_and_segmented)
{
	const char *dir = "test/fuzz/regress";
	DIR *d = opendir(dir);
	struct dirent *de;
	unsigned int files = 0;
	static uint8_t buf[1 << 16];

	cr_assert_not_null(d, "%s missing (run from the repository root)", dir);
	while ((de = readdir(d)) != NULL) {
		char path[512];
		FILE *f;
		size_t n;
		uint32_t split;
		enum proto_reason r1, r2;

		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		f = fopen(path, "rb");
		cr_assert_not_null(f, "%s", path);
		n = fread(buf, 1, sizeof(buf), f);
		fclose(f);
		/* Fuzz inputs are two split-point bytes, then the frame. */
		cr_assert_geq(n, 2, "%s: too short", path);
		n -= 2;
		r1 = proto_parse(buf + 2, (uint32_t)n, &proto_ports_default, &msg);
		for (split = 0; split <= n; split++) {
			struct proto_seg seg[2] = {{buf + 2, split},
						   {buf + 2 + split, (uint32_t)n - split}};
			struct proto_segs segs = {seg, 2};
			struct proto_src src;

			proto_src_segs(&src, &segs);
			r2 = proto_parse_src(&src, &proto_ports_default, &msg2);
			cr_assert_eq(r1, r2, "%s split %u", path, split);
		}
		files++;
	}
	closedir(d);
	cr_assert_gt(files, 0, "no regression inputs in %s", dir);
}

Test(builder, a_gather_list_counts_in_body_len_like_bytes_built_in_place)
{
	static const uint8_t bytes[100] = {1, 2, 3};
	struct proto_refill_data_hdr dh = {7, 1, 0, 0, 1, 300, 900};
	struct proto_hdr h = {.type = PROTO_T_REFILL_DATA, .epoch = 9};
	uint8_t whole[256], head[64];
	struct proto_builder b;
	uint32_t n;

	cr_assert_eq(proto_build_begin(&b, whole, sizeof(whole), &h), 0);
	cr_assert_eq(proto_build_refill_data_hdr(&b, &dh), 0);
	cr_assert_eq(proto_build_bytes(&b, bytes, sizeof(bytes)), 0);
	n = proto_build_end(&b);
	cr_assert_eq(n, PROTO_HDR_LEN + PROTO_REFILL_DATA_HDR_LEN + sizeof(bytes));

	cr_assert_eq(proto_build_begin(&b, head, sizeof(head), &h), 0);
	cr_assert_eq(proto_build_gather(&b, 10), -EINVAL, "the data header comes first");
	cr_assert_eq(proto_build_refill_data_hdr(&b, &dh), 0);
	cr_assert_eq(proto_build_gather(&b, sizeof(bytes)), 0);
	cr_assert_eq(proto_build_gather(&b, PROTO_PAYLOAD_MAX), -ENOSPC);
	cr_assert_eq(proto_build_end(&b), PROTO_HDR_LEN + PROTO_REFILL_DATA_HDR_LEN,
		     "only the headers are in the buffer");
	cr_assert_arr_eq(head, whole, PROTO_HDR_LEN + PROTO_REFILL_DATA_HDR_LEN,
			 "the same headers, body_len included");
	cr_assert_eq(proto_parse_payload(whole, n, PROTO_PORT_REFILL_DEFAULT, &proto_ports_default,
					 &msg),
		     PROTO_OK);
}
