/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libFuzzer: objects and names read from the shared level (another machine
 * wrote them). Whatever the bytes, decoding never reads past them, and what
 * it accepts is canonical: the header it decoded encodes back to the same
 * 128 bytes and its payload checks; a name it parses is the name it would
 * make; a generation's text it parses is the text it would write; a
 * record every reader accepts (shared_record_check) is one of the
 * organization and column asked, not written ahead of the reader's clock
 * by more than the skew allowed; a generation read is never followed
 * downwards; a slice is opened (sealed slices under the document's key)
 * without reading past it, and a plain one never opens where the level is
 * sealed. Seeds (test/fuzz/regress_shared/): the document's golden slice,
 * its sealed form, a record, and a name of each kind.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shared_obj.h"
#include "shared_seal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
names(const uint8_t *data, size_t size)
{
	char s[SHARED_NAME_MAX + 8], again[SHARED_NAME_MAX];
	uint64_t id, org;
	uint16_t shard, cache;
	size_t n = size < sizeof(s) - 1 ? size : sizeof(s) - 1;

	memcpy(s, data, n);
	s[n] = '\0';
	if (shared_parse_name(s, &id, &shard, &cache) == 0) {
		if (shard == 0xffff && cache == 0xffff)
			shared_record_name(again, id);
		else
			shared_slice_name(again, id, shard, cache);
		if (strcmp(s, again) != 0)
			abort(); /* two names for one object */
	}
	if (shared_parse_ns(s, &org) == 0) {
		char ns[SHARED_NS_MAX];

		shared_ns(ns, org);
		if (strcmp(s, ns) != 0)
			abort();
	}
}

/* A generation object's text: what parses prints back the same. */
static void
generation(const uint8_t *data, size_t size)
{
	char again[16];
	uint32_t gen;
	size_t n = size;

	if (shared_gen_parse((const char *)data, size, &gen) != 0)
		return;
	if (n > 0 && data[n - 1] == '\n')
		n--;
	if ((size_t)snprintf(again, sizeof(again), "%u", gen) != n || memcmp(again, data, n) != 0)
		abort();
}

/*
 * A record as every reader checks it, asked for under its own names and
 * under another's, read by clocks taken from the input: what is accepted is
 * a record of exactly that organization and column, and its times are not
 * past the reader's clock by more than the allowed skew.
 */
static void
record(const uint8_t *obj, size_t size, const struct shared_hdr *h, uint64_t now_ns)
{
	const uint64_t asks[][2] = {{h->org, h->object_id}, {h->org + 1, h->object_id},
				    {h->org, h->object_id ^ 1}};
	struct shared_hdr got;
	size_t i;

	for (i = 0; i < sizeof(asks) / sizeof(asks[0]); i++) {
		if (shared_record_check(obj, (uint32_t)size, asks[i][0], asks[i][1], now_ns, &got) !=
		    SHARED_OK)
			continue;
		if (got.kind != SHARED_RECORD || got.org != asks[i][0] || got.object_id != asks[i][1])
			abort(); /* another's record served */
		if (now_ns + SHARED_SKEW_NS >= now_ns &&
		    (got.first_use_ns > now_ns + SHARED_SKEW_NS ||
		     got.written_ns > now_ns + SHARED_SKEW_NS))
			abort(); /* a record from the future kept (it would never expire) */
	}
}

/* A generation read, judged against the highest seen: never followed down. */
static void
judge(uint32_t highest, int rc, uint32_t got)
{
	enum shared_gen_verdict v = shared_gen_judge(highest, rc, got);

	if (v == SHARED_GEN_UP && (rc != 0 || got <= highest || got > SHARED_GEN_MAX))
		abort();
	if (v == SHARED_GEN_SAME && !(rc == 0 ? got == highest : rc == -ENOENT && highest == 0))
		abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct shared_hdr h, h2;
	uint8_t again[SHARED_HDR_LEN];
	uint8_t *copy;

	names(data, size);
	generation(data, size);
	if (size >= 12) {
		uint32_t a, b;
		int rc;

		memcpy(&a, data, 4);
		memcpy(&b, data + 4, 4);
		memcpy(&rc, data + 8, 4);
		judge(a, rc % 128 == 0 ? 0 : -(abs(rc % 128)), b);
	}
	/* An exact-size copy: ASan sees any read past the object. */
	copy = malloc(size ? size : 1);
	if (copy == NULL)
		return 0;
	memcpy(copy, data, size);
	if (shared_obj_decode(copy, size, &h) == SHARED_OK) {
		h2 = h;
		shared_hdr_encode(again, &h2, copy + SHARED_HDR_LEN);
		if (memcmp(again, copy, SHARED_HDR_LEN) != 0 || h2.payload_xxh3 != h.payload_xxh3)
			abort(); /* accepted something that is not what it says */
		if (shared_hdr_match(&h, &h) != SHARED_OK)
			abort();
		if (h.kind == SHARED_SLICE &&
		    (uint64_t)h.tokens * h.bytes_per_token +
				    (h.version == SHARED_OBJ_VERSION_SEALED ? SEAL_TAG_LEN : 0) !=
			    size - SHARED_HDR_LEN)
			abort();
		/* A slice opened by a replica holding the document's key (and
		 * one without): the tag's check reads no byte past the object,
		 * and what opens is the plain length's bytes. */
		if (h.kind == SHARED_SLICE) {
			static struct seal_ring ring;
			enum shared_bad why;

			if (!ring.cur.loaded) {
				uint8_t k[SEAL_KEY_LEN];
				unsigned int i;

				for (i = 0; i < SEAL_KEY_LEN; i++)
					k[i] = (uint8_t)i;
				if (seal_key_from(&ring.cur, k) != 0)
					abort();
			}
			why = shared_slice_open(&h, copy + SHARED_HDR_LEN, NULL);
			if ((why == SHARED_OK) != (h.version != SHARED_OBJ_VERSION_SEALED))
				abort(); /* without a key: plain opens, sealed never */
			why = shared_slice_open(&h, copy + SHARED_HDR_LEN, &ring);
			if (why == SHARED_OK && h.version != SHARED_OBJ_VERSION_SEALED)
				abort(); /* a plain slice where the level is sealed */
		}
		/* The reader's clock: the record's own times moved by the
		 * input's last eight bytes (either way). */
		if (h.kind == SHARED_RECORD) {
			uint64_t move = 0;

			if (size >= 8)
				memcpy(&move, data + size - 8, 8);
			record(copy, size, &h, h.first_use_ns + move);
			record(copy, size, &h, move);
			/* And just short of each time's allowance. */
			record(copy, size, &h, h.written_ns - SHARED_SKEW_NS - 1 - move % 1024);
			record(copy, size, &h, h.first_use_ns - SHARED_SKEW_NS - 1 - move % 1024);
		}
	}
	free(copy);
	return 0;
}
