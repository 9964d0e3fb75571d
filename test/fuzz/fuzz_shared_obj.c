/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libFuzzer: objects and names read from the shared level (another machine
 * wrote them). Whatever the bytes, decoding never reads past them, and what
 * it accepts is canonical: the header it decoded encodes back to the same
 * 128 bytes and its payload checks; a name it parses is the name it would
 * make; a generation's text it parses is the text it would write. Seeds (test/fuzz/regress_shared/): the document's golden slice, a
 * record, and a name of each kind.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shared_obj.h"

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

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct shared_hdr h, h2;
	uint8_t again[SHARED_HDR_LEN];
	uint8_t *copy;

	names(data, size);
	generation(data, size);
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
		if (h.kind == SHARED_SLICE && (uint64_t)h.tokens * h.bytes_per_token != size - SHARED_HDR_LEN)
			abort();
	}
	free(copy);
	return 0;
}
