/* SPDX-License-Identifier: BSD-3-Clause */
/* Helpers for kvstore tests and benchmarks: a store in plain memory, token
 * content from the reference function, whole-batch eviction. */
#ifndef KVSS_TEST_KV_HARNESS_H
#define KVSS_TEST_KV_HARNESS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvstore.h"
#include "proto.h"

/* The content of (prompt, token, version) in cache @c: reference bytes. */
static inline uint64_t
kvh_hash(uint64_t prompt, uint32_t token, uint32_t version)
{
	uint64_t h = proto_ref_hash_next(prompt, token);

	return version ? proto_ref_hash_next(h, version) : h;
}

static inline void
kvh_fill(uint64_t prompt, uint32_t token, uint32_t version, uint16_t c, void *out, uint32_t B)
{
	proto_ref_fill(kvh_hash(prompt, token, version), 0, 0, c, 0, out, B);
}

static inline struct kvstore *
kvh_create(const struct kvstore_params *p, void **mem)
{
	size_t sz = kvstore_memsize(p);
	struct kvstore *s;

	if (sz == 0 || posix_memalign(mem, 64, sz) != 0)
		return NULL;
	memset(*mem, 0xA5, sz); /* the store must not rely on zeroed memory */
	s = kvstore_init(*mem, sz, p);
	return s;
}

/*
 * Send the data of a whole batch for cache @c: @g tokens described by
 * (prompt, token, version) triples, in fragments of @frag bytes; a token
 * with prompt 0 gets filler bytes.
 */
static inline int
kvh_send(struct kvstore *s, uint64_t batch, uint16_t c, uint32_t B, uint32_t g,
	 const uint64_t *prompt, const uint32_t *token, const uint32_t *version, uint32_t frag)
{
	uint8_t *stream = malloc((size_t)g * B);
	uint32_t off, t;
	int rc = 0;

	for (t = 0; t < g; t++) {
		if (prompt[t] != 0)
			kvh_fill(prompt[t], token[t], version[t], c, stream + (size_t)t * B, B);
		else
			memset(stream + (size_t)t * B, 0xEE, B);
	}
	for (off = 0; off < g * B && rc == 0; off += frag) {
		uint32_t n = g * B - off < frag ? g * B - off : frag;

		rc = kvstore_data(s, batch, c, off, g * B, stream + off, n);
	}
	free(stream);
	return rc;
}

/* Check a token's stored bytes against a version; 0 when equal. */
static inline int
kvh_check_token(const struct kvstore *s, uint16_t c, uint32_t B, uint64_t prompt, uint32_t token,
		uint32_t version)
{
	uint8_t *got = malloc(B), *want = malloc(B);
	int rc = kvstore_read_token(s, c, prompt, token, got);

	if (rc == 0) {
		kvh_fill(prompt, token, version, c, want, B);
		rc = memcmp(got, want, B) == 0 ? 0 : 1;
	}
	free(got);
	free(want);
	return rc;
}

/*
 * Gather a whole refill of one buffer into @out (which holds
 * kvstore_refill_buffer_len() bytes), in frames of @frame bytes.
 */
static inline uint64_t
kvh_gather(struct kvstore_refill *r, uint16_t buffer, uint32_t frame, uint8_t *out)
{
	struct kvstore_refill_pos pos;
	struct kvstore_seg segs[64];
	uint64_t total = 0;
	unsigned int n, i;

	memset(&pos, 0, sizeof(pos));
	while ((n = kvstore_refill_next(r, buffer, &pos, frame, segs, 64)) > 0)
		for (i = 0; i < n; i++) {
			memcpy(out + total, segs[i].addr, segs[i].len);
			total += segs[i].len;
		}
	return total;
}

#endif
