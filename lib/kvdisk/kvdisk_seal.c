/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A sealed file's columns (kvdisk.h, "Sealed files"): sealed as they are
 * copied into the slot's buffer, opened in it before a get returns them.
 * Each write's key is its own: derived from the master key, the column's
 * organization, the file (its id and owner), the place and the write's
 * random 96-bit nonce, so that no key seals two writes (a slot rewritten
 * without end, a free list that hands one slot out again and again)
 * unless two nonces meet (about 2^48 writes), and GCM's nonce, under a
 * key used once, cannot repeat under it.
 */
#include "kvdisk_priv.h"

#include <errno.h>
#include <string.h>

#include <openssl/crypto.h>

#include "orgkeys.h"
#include "proto.h"

/* The header's identity: everything before its checksums. */
#define KD_AAD_HDR offsetof(struct hdr, data_hash)
/* That, the file id, the owner, the place and the key's id. */
#define KD_AAD_LEN (KD_AAD_HDR + 16 + 4 + 4 + 2 + 4 + 4)
_Static_assert(KD_AAD_HDR == 48, "the header's identity is its first 48 bytes");

/* The key of one write: info "disk" || u64 org || file id || u32 model || u32 shard || u16 cache || u32 slot || nonce. */
static int
write_key(const struct kvdisk *d, const struct seal_key *k, uint64_t org, uint16_t c,
	  uint32_t slot, const uint8_t nonce[SEAL_NONCE_LEN], uint8_t key[SEAL_KEY_LEN])
{
	uint8_t info[4 + 8 + 16 + 4 + 4 + 2 + 4 + SEAL_NONCE_LEN] = {'d', 'i', 's', 'k'};

	proto_st64(info + 4, org);
	memcpy(info + 12, d->file_id, 16);
	proto_st32(info + 28, d->model);
	proto_st32(info + 32, d->shard);
	proto_st16(info + 36, c);
	proto_st32(info + 38, slot);
	memcpy(info + 42, nonce, SEAL_NONCE_LEN);
	return seal_derive(k, info, sizeof(info), key);
}

static void
aad_of(const struct kvdisk *d, const struct hdr *h, uint16_t c, uint32_t slot, uint32_t key_id,
       uint8_t aad[KD_AAD_LEN])
{
	uint8_t *p = aad + KD_AAD_HDR;

	memcpy(aad, h, KD_AAD_HDR);
	memcpy(p, d->file_id, 16);
	proto_st32(p + 16, d->model);
	proto_st32(p + 20, d->shard);
	proto_st16(p + 24, c);
	proto_st32(p + 26, slot);
	proto_st32(p + 30, key_id);
}

int
kd_seal(struct kvdisk *d, uint16_t c, uint32_t slot, const struct hdr *h, const uint8_t *in,
	uint8_t *out, uint32_t len)
{
	struct seal_key k; /* the master key, mixed with the organization's under a store */
	uint8_t key[SEAL_KEY_LEN], aad[KD_AAD_LEN], *t = out + len;
	int rc = seal_ring_key(d->keys, h->org, &k);

	if (rc == 0) {
		proto_st32(t, k.id);
		rc = seal_nonce(t + 4) != 0 || write_key(d, &k, h->org, c, slot, t + 4, key) != 0 ? -1 : 0;
	}
	if (rc == 0) {
		aad_of(d, h, c, slot, k.id, aad);
		rc = seal_gcm_encrypt_to(key, t + 4, aad, sizeof(aad), in, out, len,
					 t + 4 + SEAL_NONCE_LEN);
	}
	OPENSSL_cleanse(key, sizeof(key));
	OPENSSL_cleanse(&k, sizeof(k));
	return rc == 0 ? 0 : -1;
}

int
kd_open(struct kvdisk *d, uint16_t c, uint32_t slot, const struct hdr *h, const uint8_t *buf,
	uint8_t *out, uint32_t len)
{
	const uint8_t *t = buf + len;
	uint32_t id = proto_ld32(t);
	struct seal_key k;
	uint8_t key[SEAL_KEY_LEN], aad[KD_AAD_LEN];
	int rc;

	/* A column sealed under a key the ring no longer makes (its
	 * organization's retired by a reset) has an id none of its keys has. */
	rc = seal_ring_find(d->keys, h->org, id, &k);
	if (rc != 0)
		return rc > 0 ? KD_OPEN_KEY : KD_OPEN_LOCAL;
	rc = write_key(d, &k, h->org, c, slot, t + 4, key);
	OPENSSL_cleanse(&k, sizeof(k));
	if (rc != 0)
		return KD_OPEN_LOCAL;
	aad_of(d, h, c, slot, id, aad);
	rc = seal_gcm_decrypt_to(key, t + 4, aad, sizeof(aad), buf, out, len,
				 t + 4 + SEAL_NONCE_LEN);
	OPENSSL_cleanse(key, sizeof(key));
	return rc == 0 ? KD_OPEN_OK : rc == -1 ? KD_OPEN_TAG : KD_OPEN_LOCAL;
}

int
kd_hdr_keys(struct kvdisk *d)
{
	/* info "disk header" || file id || u32 model || u32 shard: the
	 * owner too, which the superblock says under an XXH3 only (a sealed
	 * file copied to another shard, its owner rewritten, opens nothing). */
	uint8_t info[11 + 16 + 4 + 4] = {'d', 'i', 's', 'k', ' ', 'h', 'e', 'a', 'd', 'e', 'r'};

	memcpy(info + 11, d->file_id, 16);
	proto_st32(info + 27, d->model);
	proto_st32(info + 31, d->shard);
	if (seal_derive(&d->keys->cur, info, sizeof(info), d->hdr_key[0]) != 0)
		return -1;
	if (d->keys->old.loaded && seal_derive(&d->keys->old, info, sizeof(info), d->hdr_key[1]) != 0)
		return -1;
	return 0;
}

static uint64_t
hdr_mac(const uint8_t key[SEAL_KEY_LEN], const struct hdr *h, uint16_t c, uint32_t slot)
{
	uint8_t msg[offsetof(struct hdr, hdr_hash) + 6], mac[32];
	uint64_t v = 0;

	memcpy(msg, h, offsetof(struct hdr, hdr_hash));
	proto_st16(msg + offsetof(struct hdr, hdr_hash), c);
	proto_st32(msg + offsetof(struct hdr, hdr_hash) + 2, slot);
	/* A failure here gives 0, which no header's MAC is taken to be. */
	if (seal_hmac(key, SEAL_KEY_LEN, msg, sizeof(msg), mac) == 0)
		v = proto_ld64(mac);
	return v;
}

uint64_t
kd_hdr_sum(const struct kvdisk *d, const struct hdr *h, uint16_t c, uint32_t slot)
{
	return d->keys == NULL ? hdr_hash(d, h, c, slot) : hdr_mac(d->hdr_key[0], h, c, slot);
}

bool
kd_hdr_ok(const struct kvdisk *d, const struct hdr *h, uint16_t c, uint32_t slot)
{
	uint64_t v;

	if (d->keys == NULL)
		return h->hdr_hash == hdr_hash(d, h, c, slot);
	if (h->hdr_hash == 0)
		return false;
	v = hdr_mac(d->hdr_key[0], h, c, slot);
	if (v == h->hdr_hash)
		return true;
	return d->keys->old.loaded && hdr_mac(d->hdr_key[1], h, c, slot) == h->hdr_hash;
}

int
kvdisk_set_orgs(struct kvdisk *d, struct seal_orgs *o)
{
	if (d->keys == NULL)
		return -EINVAL;
	d->keys->orgs = o;
	return 0;
}
