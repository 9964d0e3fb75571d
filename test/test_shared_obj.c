/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The shared level's objects (docs/PROTOCOL.md section 10, lib/shared/
 * shared_obj.c): the document's golden slice built byte for byte and read
 * back; every way an object from another machine can be wrong refused with
 * its own reason; names and namespaces made and parsed back, strictly.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "frames.h"
#include "shared_obj.h"

#define FU 1700000000000000000ULL

/* The document's slice: 2 tokens of 4 bytes of cache 1 on shard 3. */
static const uint8_t payload[8] = {1, 2, 3, 4, 5, 6, 7, 8};

/* The document's model: "llama-3.1-8b", 4 shards, columns of 2, caches of 8 and 4 bytes. */
static uint32_t
doc_layout(void)
{
	static const uint32_t bpt[8] = {8, 4, 8, 4, 8, 4, 8, 4};

	return shared_layout(0, "llama-3.1-8b", 4, 2, 8, bpt);
}

static uint64_t
doc_id(void)
{
	return shared_object_id(0x3333, 0x4444, 1, 2, doc_layout());
}

static struct shared_hdr
slice_hdr(void)
{
	return (struct shared_hdr){.kind = SHARED_SLICE, .org = 0x3333, .key = 0x4444,
				   .parent = 0x2222, .object_id = doc_id(),
				   .first_use_ns = FU, .written_ns = FU + 5, .gen_global = 1,
				   .gen_org = 2, .layout = doc_layout(), .model = 0, .shard = 3,
				   .cache = 1, .start = 64, .tokens = 2, .bytes_per_token = 4,
				   .payload_len = 8};
}

static size_t
build(uint8_t *obj)
{
	struct shared_hdr h = slice_hdr();

	shared_hdr_encode(obj, &h, payload);
	memcpy(obj + SHARED_HDR_LEN, payload, sizeof(payload));
	return SHARED_HDR_LEN + sizeof(payload);
}

Test(shared_obj, the_golden_slice_is_built_and_read_back)
{
	uint8_t obj[256], want[256];
	struct shared_hdr h, w = slice_hdr();
	size_t n = build(obj);
	uint32_t m = frames_golden("shared_slice", want, sizeof(want));

	cr_assert_eq(m, n, "the document's slice has %u bytes, built %zu", m, n);
	cr_assert_arr_eq(obj, want, n, "the slice differs from docs/PROTOCOL.md");
	cr_assert_eq(shared_obj_decode(want, m, &h), SHARED_OK);
	cr_assert_eq(shared_hdr_match(&h, &w), SHARED_OK);
	cr_assert_eq(h.written_ns, FU + 5);
}

/* @p obj with byte @p at xor'd by @p x: the reason it is refused. */
static enum shared_bad
flipped(size_t at, uint8_t x)
{
	uint8_t obj[256];
	struct shared_hdr h;
	size_t n = build(obj);

	obj[at] ^= x;
	return shared_obj_decode(obj, n, &h);
}

Test(shared_obj, every_byte_flipped_is_refused)
{
	size_t at, n = SHARED_HDR_LEN + sizeof(payload);

	for (at = 0; at < n; at++) {
		enum shared_bad r = flipped(at, 0x10);

		cr_assert_neq(r, SHARED_OK, "byte %zu changed and still accepted", at);
		if (at < 6)
			cr_assert_eq(r, SHARED_BAD_MAGIC, "byte %zu: %s", at, shared_bad_name(r));
		else if (at < SHARED_HDR_LEN)
			cr_assert_eq(r, SHARED_BAD_HEADER_SUM, "byte %zu: %s", at, shared_bad_name(r));
		else
			cr_assert_eq(r, SHARED_BAD_PAYLOAD_SUM, "byte %zu: %s", at, shared_bad_name(r));
	}
}

Test(shared_obj, lengths_that_do_not_add_up_are_refused)
{
	uint8_t obj[256];
	struct shared_hdr h = slice_hdr(), d;
	size_t n = build(obj);

	cr_assert_eq(shared_obj_decode(obj, 0, &d), SHARED_BAD_SHORT);
	cr_assert_eq(shared_obj_decode(obj, SHARED_HDR_LEN - 1, &d), SHARED_BAD_SHORT);
	cr_assert_eq(shared_obj_decode(obj, n - 1, &d), SHARED_BAD_SHORT);
	cr_assert_eq(shared_obj_decode(obj, n + 1, &d), SHARED_BAD_FORMAT, "a byte too many");
	/* A header that checks but whose payload length is not tokens x bytes. */
	h.payload_len = 4;
	shared_hdr_encode(obj, &h, payload);
	cr_assert_eq(shared_obj_decode(obj, SHARED_HDR_LEN + 4, &d), SHARED_BAD_FORMAT);
	/* tokens x bytes_per_token past 32 bits does not wrap to a match. */
	h = slice_hdr();
	h.tokens = 0x40000000u;
	h.bytes_per_token = 4;
	h.payload_len = 0;
	shared_hdr_encode(obj, &h, payload);
	cr_assert_eq(shared_obj_decode(obj, SHARED_HDR_LEN, &d), SHARED_BAD_FORMAT);
	/* A record carries no payload. */
	h = slice_hdr();
	h.kind = SHARED_RECORD;
	shared_hdr_encode(obj, &h, payload);
	cr_assert_eq(shared_obj_decode(obj, SHARED_HDR_LEN + 8, &d), SHARED_BAD_FORMAT);
	h.payload_len = 0;
	h.bytes_per_token = 0;
	shared_hdr_encode(obj, &h, NULL);
	cr_assert_eq(shared_obj_decode(obj, SHARED_HDR_LEN, &d), SHARED_OK);
	cr_assert_eq(d.kind, SHARED_RECORD);
	/* Kind 3, key 0: out of range even with a good checksum. */
	h.kind = 3;
	shared_hdr_encode(obj, &h, NULL);
	cr_assert_eq(shared_obj_decode(obj, SHARED_HDR_LEN, &d), SHARED_BAD_FORMAT);
	h.kind = SHARED_RECORD;
	h.key = 0;
	shared_hdr_encode(obj, &h, NULL);
	cr_assert_eq(shared_obj_decode(obj, SHARED_HDR_LEN, &d), SHARED_BAD_FORMAT);
}

Test(shared_obj, a_good_object_of_another_column_is_refused_by_what_was_asked)
{
	uint8_t obj[256];
	struct shared_hdr h, w;
	size_t n = build(obj);

	cr_assert_eq(shared_obj_decode(obj, n, &h), SHARED_OK);
#define ASK(field, v, why)                                                                        \
	do {                                                                                        \
		w = slice_hdr();                                                                    \
		w.field = (v);                                                                      \
		cr_assert_eq(shared_hdr_match(&h, &w), why, #field);                                \
	} while (0)
	ASK(org, 0x4444, SHARED_BAD_IDENTITY);
	ASK(key, 0x1112, SHARED_BAD_IDENTITY);
	ASK(parent, 0x2223, SHARED_BAD_IDENTITY);
	ASK(object_id, 1, SHARED_BAD_IDENTITY);
	ASK(gen_global, 2, SHARED_BAD_IDENTITY);
	ASK(gen_org, 3, SHARED_BAD_IDENTITY);
	ASK(layout, 7, SHARED_BAD_IDENTITY);
	ASK(model, 1, SHARED_BAD_IDENTITY);
	ASK(first_use_ns, FU + 1, SHARED_OK); /* the record's to say (expiry), not an identity */
	/* ... but a slice first used before its record says, past the skew
	 * (put back under a record made younger), is stale; younger is not. */
	ASK(first_use_ns, FU + SHARED_SKEW_NS, SHARED_OK);
	ASK(first_use_ns, FU + SHARED_SKEW_NS + 1, SHARED_BAD_STALE);
	ASK(first_use_ns, FU + 3600ull * 1000000000ull, SHARED_BAD_STALE);
	ASK(first_use_ns, 0, SHARED_OK);
	ASK(kind, SHARED_RECORD, SHARED_BAD_IDENTITY);
	ASK(shard, 2, SHARED_BAD_GEOMETRY);
	ASK(cache, 0, SHARED_BAD_GEOMETRY);
	ASK(start, 0, SHARED_BAD_GEOMETRY);
	ASK(tokens, 3, SHARED_BAD_GEOMETRY);
	ASK(bytes_per_token, 8, SHARED_BAD_GEOMETRY);
	ASK(written_ns, 0, SHARED_OK); /* not an identity: when it was written */
#undef ASK
}

static uint64_t
golden_hex(const char *name)
{
	char hex[64];
	int n = frames_golden_hex(name, hex, sizeof(hex));

	cr_assert_gt(n, 0, "no vector %s in %s", name, frames_protocol_md());
	return strtoull(hex, NULL, 16);
}

static void
golden_text(const char *name, const char *got)
{
	char want[64];

	cr_assert_gt(frames_golden_hex(name, want, sizeof(want)), 0, "no vector %s", name);
	cr_assert_str_eq(got, want, "%s differs from docs/PROTOCOL.md", name);
}

/* Section 10's naming, against the document's vectors: a second driver finds what this one wrote. */
Test(shared_obj, the_golden_names_are_made_as_the_document_says)
{
	char name[SHARED_NAME_MAX], ns[SHARED_NS_MAX];
	uint8_t gen[8];
	uint32_t g = 0, n = frames_golden("shared_generation", gen, sizeof(gen));

	cr_assert_eq(doc_layout(), (uint32_t)golden_hex("shared_layout"));
	cr_assert_eq(doc_id(), golden_hex("shared_object_id"));
	shared_slice_name(name, doc_id(), 3, 1);
	golden_text("shared_slice_name", name);
	shared_record_name(name, doc_id());
	golden_text("shared_record_name", name);
	shared_ns(ns, 0x3333);
	golden_text("shared_namespace", ns);
	cr_assert_eq(n, 2);
	cr_assert_eq(shared_gen_parse((const char *)gen, n, &g), 0);
	cr_assert_eq(g, 3);
}

/* Only the model's name tells two models of one geometry apart: their objects differ. */
Test(shared_obj, two_models_of_one_geometry_name_different_objects)
{
	static const uint32_t bpt[8] = {8, 4, 8, 4, 8, 4, 8, 4};
	uint32_t a = shared_layout(0, "llama-3.1-8b", 4, 2, 8, bpt);
	uint32_t b = shared_layout(0, "mistral-7b", 4, 2, 8, bpt);

	cr_assert_neq(a, b);
	cr_assert_neq(shared_object_id(0x3333, 0x4444, 1, 2, a),
		      shared_object_id(0x3333, 0x4444, 1, 2, b));
}

Test(shared_obj, ids_depend_on_every_input)
{
	uint32_t bpt[2] = {1024, 512}, bpt2[2] = {1024, 256};
	uint32_t l = shared_layout(0, "m", 4, 256, 2, bpt);
	uint64_t id = shared_object_id(1, 2, 3, 4, l);

	cr_assert_neq(l, shared_layout(1, "m", 4, 256, 2, bpt));
	cr_assert_neq(l, shared_layout(0, "n", 4, 256, 2, bpt));
	cr_assert_neq(l, shared_layout(0, "m", 8, 256, 2, bpt));
	cr_assert_neq(l, shared_layout(0, "m", 4, 128, 2, bpt));
	cr_assert_neq(l, shared_layout(0, "m", 4, 256, 2, bpt2));
	cr_assert_neq(l, shared_layout(0, "m", 4, 256, 1, bpt));
	cr_assert_eq(l, shared_layout(0, "m", 4, 256, 2, bpt), "deterministic");
	cr_assert_neq(id, 0);
	cr_assert_neq(id, shared_object_id(9, 2, 3, 4, l));
	cr_assert_neq(id, shared_object_id(1, 9, 3, 4, l));
	cr_assert_neq(id, shared_object_id(1, 2, 9, 4, l));
	cr_assert_neq(id, shared_object_id(1, 2, 3, 9, l));
	cr_assert_neq(id, shared_object_id(1, 2, 3, 4, l + 1));
}

Test(shared_obj, names_are_made_and_parsed_back_strictly)
{
	char name[SHARED_NAME_MAX], ns[SHARED_NS_MAX];
	uint64_t id, org;
	uint16_t shard, cache;

	shared_slice_name(name, 0x0123456789abcdefull, 65535, 7);
	cr_assert_str_eq(name, "0123456789abcdef.s65535.c7");
	cr_assert_eq(shared_parse_name(name, &id, &shard, &cache), 0);
	cr_assert_eq(id, 0x0123456789abcdefull);
	cr_assert_eq(shard, 65535);
	cr_assert_eq(cache, 7);
	shared_record_name(name, 42);
	cr_assert_str_eq(name, "000000000000002a.r");
	cr_assert_eq(shared_parse_name(name, &id, &shard, &cache), 0);
	cr_assert_eq(shard, 0xffff);
	shared_ns(ns, 0x3333);
	cr_assert_str_eq(ns, "o0000000000003333");
	cr_assert_eq(shared_parse_ns(ns, &org), 0);
	cr_assert_eq(org, 0x3333);
	{
		static const char *const bad[] = {
			"", "generation", "0123456789abcdef", "0123456789abcdef.", "0123456789ABCDEF.r",
			"0123456789abcdef.rr", "0123456789abcdef.s65536.c0", "0123456789abcdef.s01.c0",
			"0123456789abcdef.s1.c", "0123456789abcdef.s1.c1x", "0123456789abcdef.s.c1",
			"0123456789abcde.s1.c1", "0123456789abcdef.s1c1", "0123456789abcdef.s99999999.c1"};
		size_t i;

		for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
			cr_assert_eq(shared_parse_name(bad[i], &id, &shard, &cache), -1, "'%s'", bad[i]);
		cr_assert_eq(shared_parse_ns("o000000000000333", &org), -1);
		cr_assert_eq(shared_parse_ns("x0000000000003333", &org), -1);
		cr_assert_eq(shared_parse_ns("o00000000000033333", &org), -1);
		cr_assert_eq(shared_parse_ns("", &org), -1);
	}
	cr_assert_str_eq(shared_bad_name(SHARED_BAD_PAYLOAD_SUM), "payload_sum");
	cr_assert_str_eq(shared_bad_name(SHARED_BAD_COUNT), "unknown");
}

/*
 * Generations never go down in a reader: what is lower than the highest it
 * saw, an object gone where a higher one was seen, or one that is not a
 * generation is refused; 4294967295 is not a generation (a reset past it
 * would wrap to 0, where the oldest objects are).
 */
Test(shared_obj, generations_never_go_down)
{
	uint32_t g = 7;

	cr_assert_eq(shared_gen_parse("4294967294\n", 11, &g), 0);
	cr_assert_eq(g, SHARED_GEN_MAX);
	cr_assert_eq(shared_gen_parse("4294967295\n", 11, &g), -ERANGE);
	cr_assert_eq(shared_gen_parse("4294967296", 10, &g), -EBADMSG);
	cr_assert_eq(shared_gen_parse("\x01\x02garbage", 9, &g), -EBADMSG);

	/* Never reset: an absent object is generation 0. */
	cr_assert_eq(shared_gen_judge(0, -ENOENT, 0), SHARED_GEN_SAME);
	cr_assert_eq(shared_gen_judge(0, 0, 0), SHARED_GEN_SAME);
	cr_assert_eq(shared_gen_judge(0, 0, 1), SHARED_GEN_UP);
	cr_assert_eq(shared_gen_judge(3, 0, 4), SHARED_GEN_UP);
	cr_assert_eq(shared_gen_judge(3, 0, 3), SHARED_GEN_SAME);
	/* After a reset: the object removed, rewritten lower, or broken. */
	cr_assert_eq(shared_gen_judge(1, -ENOENT, 0), SHARED_GEN_ABSENT);
	cr_assert_eq(shared_gen_judge(5, 0, 0), SHARED_GEN_LOWER);
	cr_assert_eq(shared_gen_judge(5, 0, 4), SHARED_GEN_LOWER);
	cr_assert_eq(shared_gen_judge(5, -EBADMSG, 0), SHARED_GEN_BROKEN);
	cr_assert_eq(shared_gen_judge(0, -ERANGE, 0), SHARED_GEN_BROKEN);
	cr_assert_eq(shared_gen_judge(0, 0, UINT32_MAX), SHARED_GEN_BROKEN);
	/* The cluster failing says nothing of the generation. */
	cr_assert_eq(shared_gen_judge(5, -ETIMEDOUT, 0), SHARED_GEN_UNREAD);
}

/* A first use (or time written) in the future, past the skew allowed, is a bad object. */
Test(shared_obj, a_first_use_in_the_future_is_bad)
{
	struct shared_hdr h = slice_hdr();
	uint64_t now = FU + 10;

	cr_assert_eq(shared_hdr_times(&h, now), SHARED_OK);
	h.first_use_ns = now + SHARED_SKEW_NS; /* within the skew: taken */
	cr_assert_eq(shared_hdr_times(&h, now), SHARED_OK);
	h.first_use_ns = now + SHARED_SKEW_NS + 1;
	cr_assert_eq(shared_hdr_times(&h, now), SHARED_BAD_FUTURE);
	h.first_use_ns = UINT64_MAX;
	cr_assert_eq(shared_hdr_times(&h, now), SHARED_BAD_FUTURE);
	h = slice_hdr();
	h.written_ns = now + 3600ull * 1000000000ull;
	cr_assert_eq(shared_hdr_times(&h, now), SHARED_BAD_FUTURE);
	cr_assert_str_eq(shared_bad_name(SHARED_BAD_FUTURE), "future");
	cr_assert_str_eq(shared_bad_name(SHARED_BAD_TOO_BIG), "too_big");
}
