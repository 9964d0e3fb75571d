/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Sealed slices (shared_seal.h): a key per slice derived from the master
 * key (lib/seal), a random nonce per write, the header's identity as
 * additional data.
 */
#include <string.h>

#include <openssl/crypto.h>

#include "orgkeys.h"
#include "proto.h"
#include "shared_seal.h"

int
seal_slice_key(const struct seal_key *k, uint64_t org, uint64_t object_id, uint16_t shard,
	       uint16_t cache, uint8_t out[SEAL_KEY_LEN])
{
	uint8_t info[25] = {'s', 'l', 'i', 'c', 'e'};

	proto_st64(info + 5, org);
	proto_st64(info + 13, object_id);
	proto_st16(info + 21, shard);
	proto_st16(info + 23, cache);
	return seal_derive(k, info, sizeof(info), out);
}

int
shared_slice_seal(struct shared_hdr *h, uint8_t *payload, const struct seal_key *k)
{
	uint8_t nonce[SEAL_NONCE_LEN];

	/* A random nonce per slice, under a key of that slice's own (its
	 * object, shard and cache): a nonce repeats under one key only across
	 * rewrites of one object, far below 2^32 (NIST SP 800-38D, 8.3). */
	if (seal_nonce(nonce) != 0)
		return -1;
	return shared_slice_seal_nonce(h, payload, k, nonce);
}

int
shared_slice_seal_nonce(struct shared_hdr *h, uint8_t *payload, const struct seal_key *k,
			const uint8_t nonce[SEAL_NONCE_LEN])
{
	uint8_t aad[SHARED_AAD_LEN], key[SEAL_KEY_LEN];
	uint32_t plain = h->payload_len;
	int rc;

	if (h->kind != SHARED_SLICE || !k->loaded)
		return -1;
	h->version = SHARED_OBJ_VERSION_SEALED;
	h->key_id = k->id;
	memcpy(h->nonce, nonce, SEAL_NONCE_LEN);
	if (seal_slice_key(k, h->org, h->object_id, h->shard, h->cache, key) != 0)
		return -1;
	shared_hdr_aad(h, aad);
	rc = seal_gcm_encrypt(key, h->nonce, aad, sizeof(aad), payload, plain, payload + plain);
	OPENSSL_cleanse(key, sizeof(key));
	if (rc != 0)
		return -1;
	h->payload_len = plain + SEAL_TAG_LEN;
	return 0;
}

enum shared_bad
shared_slice_open(const struct shared_hdr *h, uint8_t *payload, const struct seal_ring *ring)
{
	struct seal_key k;
	uint8_t aad[SHARED_AAD_LEN], key[SEAL_KEY_LEN];
	uint32_t plain;
	int rc;

	if (h->version != SHARED_OBJ_VERSION_SEALED)
		return ring == NULL ? SHARED_OK : SHARED_BAD_UNSEALED;
	if (ring == NULL)
		return SHARED_BAD_SEALED;
	/* A slice sealed under a key the ring no longer makes (its
	 * organization's retired by a reset) has an id none of its keys has. */
	rc = seal_ring_find(ring, h->org, h->key_id, &k);
	if (rc != 0)
		return rc > 0 ? SHARED_BAD_KEY : SHARED_BAD_LOCAL;
	if (h->payload_len < SEAL_TAG_LEN) {
		OPENSSL_cleanse(&k, sizeof(k));
		return SHARED_BAD_TAG;
	}
	rc = seal_slice_key(&k, h->org, h->object_id, h->shard, h->cache, key);
	OPENSSL_cleanse(&k, sizeof(k));
	if (rc != 0)
		return SHARED_BAD_LOCAL;
	plain = h->payload_len - SEAL_TAG_LEN;
	shared_hdr_aad(h, aad);
	rc = seal_gcm_decrypt(key, h->nonce, aad, sizeof(aad), payload, plain, payload + plain);
	OPENSSL_cleanse(key, sizeof(key));
	return rc == 0 ? SHARED_OK : rc == -1 ? SHARED_BAD_TAG : SHARED_BAD_LOCAL;
}
