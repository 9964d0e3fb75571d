/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Sealed slices (shared_seal.h): the master key file read with the checks
 * the shard's L2 directory gets, keys per organization by HKDF-SHA256, and
 * AES-256-GCM through OpenSSL's EVP interface (which takes AES-NI and
 * PCLMULQDQ where the CPU has them). A context per call: a slice is a
 * cluster round trip of milliseconds, a context a microsecond.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <openssl/crypto.h>
#include <openssl/rand.h>

#include "proto.h"
#include "shared_seal.h"

static const char seal_salt[] = "kvss seal v1";

/* HKDF-SHA256 of @p k's bytes with @p info into @p out (@p outlen bytes). */
static int
hkdf(const struct seal_key *k, const uint8_t *info, size_t infolen, uint8_t *out, size_t outlen)
{
	EVP_PKEY_CTX *c = EVP_PKEY_CTX_new_id(EVP_PKEY_HKDF, NULL);
	int ok = c != NULL && EVP_PKEY_derive_init(c) > 0 &&
		 EVP_PKEY_CTX_set_hkdf_md(c, EVP_sha256()) > 0 &&
		 EVP_PKEY_CTX_set1_hkdf_salt(c, (const unsigned char *)seal_salt,
					     (int)sizeof(seal_salt) - 1) > 0 &&
		 EVP_PKEY_CTX_set1_hkdf_key(c, k->key, SEAL_KEY_LEN) > 0 &&
		 EVP_PKEY_CTX_add1_hkdf_info(c, info, (int)infolen) > 0 &&
		 EVP_PKEY_derive(c, out, &outlen) > 0;

	EVP_PKEY_CTX_free(c);
	return ok ? 0 : -1;
}

int
seal_org_key(const struct seal_key *k, uint64_t org, uint8_t out[SEAL_KEY_LEN])
{
	uint8_t info[11] = {'o', 'r', 'g'};

	proto_st64(info + 3, org);
	return hkdf(k, info, sizeof(info), out, SEAL_KEY_LEN);
}

int
seal_slice_key(const struct seal_key *k, uint64_t org, uint64_t object_id, uint16_t shard,
	       uint16_t cache, uint8_t out[SEAL_KEY_LEN])
{
	uint8_t info[25] = {'s', 'l', 'i', 'c', 'e'};

	proto_st64(info + 5, org);
	proto_st64(info + 13, object_id);
	proto_st16(info + 21, shard);
	proto_st16(info + 23, cache);
	return hkdf(k, info, sizeof(info), out, SEAL_KEY_LEN);
}

static int
hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int
seal_key_load(const char *path, struct seal_key *k, char *err, size_t errlen)
{
	/* Room for the longest form and one byte more, to tell a longer file. */
	uint8_t buf[66];
	struct stat st;
	ssize_t n;
	size_t i;
	int fd;

	memset(k, 0, sizeof(*k));
	/* No symbolic link, and a FIFO never blocks the start. */
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0) {
		snprintf(err, errlen, "%s: %s", path,
			 errno == ELOOP ? "a symbolic link (name the file itself)" : strerror(errno));
		return -1;
	}
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		snprintf(err, errlen, "%s: not a regular file", path);
		close(fd);
		return -1;
	}
	if (st.st_uid != geteuid()) {
		snprintf(err, errlen, "%s: owned by uid %u, not by the user kvss runs as (%u)", path,
			 (unsigned int)st.st_uid, (unsigned int)geteuid());
		close(fd);
		return -1;
	}
	if ((st.st_mode & 077) != 0) {
		snprintf(err, errlen, "%s: readable or writable by group or others (mode %04o): chmod 600 it",
			 path, (unsigned int)(st.st_mode & 07777));
		close(fd);
		return -1;
	}
	n = read(fd, buf, sizeof(buf));
	close(fd);
	if (n < 0) {
		snprintf(err, errlen, "%s: cannot read: %s", path, strerror(errno));
		return -1;
	}
	if (n == SEAL_KEY_LEN) {
		memcpy(k->key, buf, SEAL_KEY_LEN);
	} else if (n == 64 || (n == 65 && buf[64] == '\n')) {
		for (i = 0; i < SEAL_KEY_LEN; i++) {
			int hi = hexval(buf[2 * i]), lo = hexval(buf[2 * i + 1]);

			if (hi < 0 || lo < 0) {
				snprintf(err, errlen, "%s: 64 bytes that are not all hexadecimal digits", path);
				OPENSSL_cleanse(buf, sizeof(buf));
				OPENSSL_cleanse(k, sizeof(*k));
				return -1;
			}
			k->key[i] = (uint8_t)(hi << 4 | lo);
		}
	} else {
		snprintf(err, errlen, "%s: %lld bytes: a key is 32 bytes, or 64 hexadecimal digits (openssl rand -hex 32)",
			 path, (long long)st.st_size);
		OPENSSL_cleanse(buf, sizeof(buf));
		return -1;
	}
	OPENSSL_cleanse(buf, sizeof(buf));
	if (seal_key_from(k, k->key) != 0) {
		snprintf(err, errlen, "%s: the key's id could not be derived (libcrypto)", path);
		return -1;
	}
	return 0;
}

int
seal_key_from(struct seal_key *k, const uint8_t bytes[SEAL_KEY_LEN])
{
	static const uint8_t info[] = {'i', 'd'};
	uint8_t id[4];

	memmove(k->key, bytes, SEAL_KEY_LEN);
	k->loaded = 0;
	if (hkdf(k, info, sizeof(info), id, sizeof(id)) != 0) {
		OPENSSL_cleanse(k, sizeof(*k));
		return -1;
	}
	k->id = proto_ld32(id);
	k->loaded = 1;
	return 0;
}

static int
gcm(int enc, const uint8_t key[SEAL_KEY_LEN], const uint8_t nonce[SEAL_NONCE_LEN],
    const uint8_t *aad, size_t aadlen, uint8_t *buf, size_t len, uint8_t tag[SEAL_TAG_LEN])
{
	EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new();
	int n = 0, ok;

	ok = c != NULL && EVP_CipherInit_ex(c, EVP_aes_256_gcm(), NULL, NULL, NULL, enc) == 1 &&
	     EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_SET_IVLEN, SEAL_NONCE_LEN, NULL) == 1 &&
	     EVP_CipherInit_ex(c, NULL, NULL, key, nonce, enc) == 1 &&
	     (aadlen == 0 || EVP_CipherUpdate(c, NULL, &n, aad, (int)aadlen) == 1);
	/* In pieces of at most 1 GiB (an int's worth); a slice is far less. */
	while (ok && len > 0) {
		int piece = len > (1u << 30) ? (1 << 30) : (int)len;

		ok = EVP_CipherUpdate(c, buf, &n, buf, piece) == 1;
		buf += piece;
		len -= (size_t)piece;
	}
	if (ok && !enc)
		ok = EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_SET_TAG, SEAL_TAG_LEN, tag) == 1;
	if (!ok) {
		EVP_CIPHER_CTX_free(c);
		return -2; /* libcrypto itself failed: nothing said of the bytes */
	}
	/* Decrypting, this is where the tag is checked. */
	ok = EVP_CipherFinal_ex(c, buf, &n) == 1;
	if (ok && enc)
		ok = EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_GET_TAG, SEAL_TAG_LEN, tag) == 1;
	EVP_CIPHER_CTX_free(c);
	return ok ? 0 : enc ? -2 : -1;
}

int
seal_gcm_encrypt(const uint8_t key[SEAL_KEY_LEN], const uint8_t nonce[SEAL_NONCE_LEN],
		 const uint8_t *aad, size_t aadlen, uint8_t *buf, size_t len,
		 uint8_t tag[SEAL_TAG_LEN])
{
	return gcm(1, key, nonce, aad, aadlen, buf, len, tag);
}

int
seal_gcm_decrypt(const uint8_t key[SEAL_KEY_LEN], const uint8_t nonce[SEAL_NONCE_LEN],
		 const uint8_t *aad, size_t aadlen, uint8_t *buf, size_t len,
		 const uint8_t tag[SEAL_TAG_LEN])
{
	uint8_t t[SEAL_TAG_LEN];

	memcpy(t, tag, SEAL_TAG_LEN);
	return gcm(0, key, nonce, aad, aadlen, buf, len, t);
}

int
shared_slice_seal(struct shared_hdr *h, uint8_t *payload, const struct seal_key *k)
{
	uint8_t nonce[SEAL_NONCE_LEN];

	/* A random nonce per slice, under a key of that slice's own (its
	 * object, shard and cache): a nonce repeats under one key only across
	 * rewrites of one object, far below 2^32 (NIST SP 800-38D, 8.3). */
	if (RAND_bytes(nonce, SEAL_NONCE_LEN) != 1)
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
	const struct seal_key *k;
	uint8_t aad[SHARED_AAD_LEN], key[SEAL_KEY_LEN];
	uint32_t plain;
	int rc;

	if (h->version != SHARED_OBJ_VERSION_SEALED)
		return ring == NULL ? SHARED_OK : SHARED_BAD_UNSEALED;
	if (ring == NULL)
		return SHARED_BAD_SEALED;
	if (ring->cur.loaded && h->key_id == ring->cur.id)
		k = &ring->cur;
	else if (ring->old.loaded && h->key_id == ring->old.id)
		k = &ring->old;
	else
		return SHARED_BAD_KEY;
	if (h->payload_len < SEAL_TAG_LEN)
		return SHARED_BAD_TAG;
	if (seal_slice_key(k, h->org, h->object_id, h->shard, h->cache, key) != 0)
		return SHARED_BAD_LOCAL;
	plain = h->payload_len - SEAL_TAG_LEN;
	shared_hdr_aad(h, aad);
	rc = seal_gcm_decrypt(key, h->nonce, aad, sizeof(aad), payload, plain, payload + plain);
	OPENSSL_cleanse(key, sizeof(key));
	return rc == 0 ? SHARED_OK : rc == -1 ? SHARED_BAD_TAG : SHARED_BAD_LOCAL;
}
