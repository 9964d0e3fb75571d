/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Sealed slices of the shared level (docs/PROTOCOL.md section 10, "Sealed
 * slices"; docs/SECURITY.md): a slice's bytes leave the replica encrypted
 * and authenticated with AES-256-GCM (OpenSSL's libcrypto; AES-NI where
 * the CPU has it), under a key of its organization and object derived with
 * HKDF-SHA256 from a master key file, the header's identity as additional
 * data. So a pool reader, a backup or an operator reads no KV byte, and a
 * slice forged, moved under another column's name (its header rewritten
 * to match) or from an older generation fails its tag, and one sealed
 * under a key not held is refused by its key id: a miss, counted, never
 * served.
 *
 * The master key file, its checks and the primitives are lib/seal's
 * (seal.h); the key's id goes in each slice it sealed. Where the ring holds
 * an organization key store (orgkeys.h), the key is the master key mixed
 * with the slice's organization's (seal_key_with_org()), and its id is
 * that pair's: replacing the organization's key retires every slice sealed
 * under the pair.
 */
#ifndef KVSS_SHARED_SEAL_H
#define KVSS_SHARED_SEAL_H

#include <stddef.h>
#include <stdint.h>

#include "orgkeys.h"
#include "seal.h"
#include "shared_obj.h"

/**
 * A slice's key: HKDF-SHA256(master, salt "kvss seal v1", info "slice" ||
 * u64le(org) || u64le(object_id) || u16le(shard) || u16le(cache)): each
 * organization's, and within it each object's, so that random nonces
 * repeat under one key only across rewrites of one slice. 0 or -1.
 */
int seal_slice_key(const struct seal_key *k, uint64_t org, uint64_t object_id, uint16_t shard,
		   uint16_t cache, uint8_t out[SEAL_KEY_LEN]);

/**
 * Seal a slice: @p h (a slice's header, payload_len its plain bytes) and
 * the @p h->payload_len bytes at @p payload, which has SEAL_TAG_LEN more
 * bytes of room. The payload is encrypted in place and its tag appended;
 * @p h becomes sealed (version 2, the key's id, a random nonce,
 * payload_len the plain bytes plus the tag). The caller then encodes the
 * header (shared_hdr_encode). 0 or -1.
 */
int shared_slice_seal(struct shared_hdr *h, uint8_t *payload, const struct seal_key *k);

/** shared_slice_seal() with the nonce given (golden vectors and tests; a writer's is random). */
int shared_slice_seal_nonce(struct shared_hdr *h, uint8_t *payload, const struct seal_key *k,
			    const uint8_t nonce[SEAL_NONCE_LEN]);

/**
 * Open a sealed slice decoded into @p h (shared_obj_decode), its payload at
 * @p payload (h->payload_len bytes, the tag last), with @p ring: decrypted
 * in place (h->payload_len - SEAL_TAG_LEN plain bytes) when the tag
 * matches. SHARED_OK, or SHARED_BAD_UNSEALED (a plain slice: the level is
 * sealed), SHARED_BAD_KEY (sealed under a key the ring does not hold: with
 * a store, the slice's organization's key mixed with neither master key),
 * SHARED_BAD_TAG (forged, tampered, moved, another key of the same id) or
 * SHARED_BAD_LOCAL (libcrypto failed here: nothing known of the slice).
 * With @p ring NULL (no key file): a sealed slice is SHARED_BAD_SEALED, a
 * plain one SHARED_OK.
 */
enum shared_bad shared_slice_open(const struct shared_hdr *h, uint8_t *payload,
				  const struct seal_ring *ring);

#endif
