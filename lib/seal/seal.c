/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Sealing (seal.h): the master key file read with the checks the shard's
 * L2 directory gets, keys by HKDF-SHA256, and AES-256-GCM through
 * OpenSSL's EVP interface (which takes AES-NI and PCLMULQDQ where the CPU
 * has them), through contexts each thread makes once and keeps
 * (seal_thread.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "proto.h"
#include "seal.h"
#include "seal_thread.h"

static const char seal_salt[] = "kvss seal v1";

/*
 * HKDF-SHA256 (RFC 5869) as two HMACs: Extract once per master key (kept
 * in seal_key.prk), Expand to one block per key derived. Equal to
 * libcrypto's EVP_PKEY_HKDF for outputs of up to 32 bytes, at a third of
 * its cost (no context made per key: a disk column is tens of
 * microseconds).
 */
int
seal_derive(const struct seal_key *k, const uint8_t *info, size_t infolen,
	    uint8_t out[SEAL_KEY_LEN])
{
	uint8_t msg[SEAL_INFO_MAX + 1];

	if (!k->loaded || infolen > SEAL_INFO_MAX)
		return -1;
	memcpy(msg, info, infolen);
	msg[infolen] = 1; /* T(1) = HMAC(PRK, info || 0x01) */
	return seal_hmac(k->prk, SEAL_KEY_LEN, msg, infolen + 1, out);
}

int
seal_org_key(const struct seal_key *k, uint64_t org, uint8_t out[SEAL_KEY_LEN])
{
	uint8_t info[11] = {'o', 'r', 'g'};

	proto_st64(info + 3, org);
	return seal_derive(k, info, sizeof(info), out);
}

int
seal_hexval(int c)
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
seal_private_open(const char *path, struct stat *st, char *err, size_t errlen)
{
	int fd;

	/* No symbolic link, and a FIFO never blocks the start. */
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0) {
		snprintf(err, errlen, "%s: %s", path,
			 errno == ELOOP ? "a symbolic link (name the file itself)" : strerror(errno));
		return -1;
	}
	if (fstat(fd, st) != 0 || !S_ISREG(st->st_mode)) {
		snprintf(err, errlen, "%s: not a regular file", path);
		close(fd);
		return -1;
	}
	if (st->st_uid != geteuid()) {
		snprintf(err, errlen, "%s: owned by uid %u, not by the user reading it (uid %u)", path,
			 (unsigned int)st->st_uid, (unsigned int)geteuid());
		close(fd);
		return -1;
	}
	if ((st->st_mode & 077) != 0) {
		snprintf(err, errlen, "%s: readable or writable by group or others (mode %04o): chmod 600 it",
			 path, (unsigned int)(st->st_mode & 07777));
		close(fd);
		return -1;
	}
	return fd;
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
	fd = seal_private_open(path, &st, err, errlen);
	if (fd < 0)
		return -1;
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
			int hi = seal_hexval(buf[2 * i]), lo = seal_hexval(buf[2 * i + 1]);

			if (hi < 0 || lo < 0) {
				size_t at = hi < 0 ? 2 * i : 2 * i + 1;

				snprintf(err, errlen, "%s: %zu hexadecimal digits then byte %#x at %zu: a "
					 "key is 64 hexadecimal digits and at most a newline", path, at,
					 buf[at], at);
				OPENSSL_cleanse(buf, sizeof(buf));
				OPENSSL_cleanse(k, sizeof(*k));
				return -1;
			}
			k->key[i] = (uint8_t)(hi << 4 | lo);
		}
	} else {
		size_t digits = 0;

		while (digits < (size_t)n && seal_hexval(buf[digits]) >= 0)
			digits++;
		/* Hexadecimal digits then what is not one (a CR, a space): say both. */
		if (digits > 0 && digits < (size_t)n)
			snprintf(err, errlen, "%s: %zu hexadecimal digits then byte %#x at %zu: a key is "
				 "32 bytes, or 64 hexadecimal digits and at most a newline (openssl rand "
				 "-hex 32)", path, digits, buf[digits], digits);
		else
			snprintf(err, errlen, "%s: %lld bytes: a key is 32 bytes, or 64 hexadecimal digits "
				 "(openssl rand -hex 32)", path, (long long)st.st_size);
		OPENSSL_cleanse(buf, sizeof(buf));
		return -1;
	}
	OPENSSL_cleanse(buf, sizeof(buf));
	{
		uint8_t any = 0;

		for (i = 0; i < SEAL_KEY_LEN; i++)
			any |= k->key[i];
		if (any == 0) {
			/* Its id is public and anyone derives every key from it. */
			snprintf(err, errlen, "%s: a key of zeros is no secret: make one with openssl "
				 "rand -hex 32", path);
			memset(k, 0, sizeof(*k));
			return -1;
		}
	}
	if (seal_key_from(k, k->key) != 0) {
		snprintf(err, errlen, "%s: the key's id could not be derived (libcrypto)", path);
		return -1;
	}
	return 0;
}

/*
 * @p k's PRK as HKDF-Extract(salt, @p ikm) and its id derived from it
 * (info "id"): 0, or -1 with @p k wiped.
 */
static int
extract(struct seal_key *k, const uint8_t *ikm, size_t ikmlen)
{
	static const uint8_t info[] = {'i', 'd'};
	uint8_t id[SEAL_KEY_LEN];

	k->loaded = 0;
	if (seal_hmac((const uint8_t *)seal_salt, sizeof(seal_salt) - 1, ikm, ikmlen, k->prk) !=
	    0) {
		OPENSSL_cleanse(k, sizeof(*k));
		return -1;
	}
	k->loaded = 1;
	if (seal_derive(k, info, sizeof(info), id) != 0) {
		OPENSSL_cleanse(k, sizeof(*k));
		return -1;
	}
	k->id = proto_ld32(id);
	OPENSSL_cleanse(id, sizeof(id));
	return 0;
}

int
seal_key_from(struct seal_key *k, const uint8_t bytes[SEAL_KEY_LEN])
{
	/* HKDF-Extract: PRK = HMAC(salt, master key). */
	memmove(k->key, bytes, SEAL_KEY_LEN);
	return extract(k, k->key, SEAL_KEY_LEN);
}

int
seal_key_with_org(const struct seal_key *master, const struct seal_key *org, struct seal_key *out)
{
	uint8_t ikm[2 * SEAL_KEY_LEN];
	int rc;

	memset(out, 0, sizeof(*out));
	if (!master->loaded || !org->loaded)
		return -1;
	/* HKDF-Extract over both secrets, as TLS 1.3's hybrid exchanges
	 * concatenate theirs: the result is as secret as the one not known. */
	memcpy(ikm, master->key, SEAL_KEY_LEN);
	memcpy(ikm + SEAL_KEY_LEN, org->key, SEAL_KEY_LEN);
	/* Every column a shard seals or opens asks for its pair's key: kept
	 * per thread, the two HMACs are made once per pair. */
	if (seal_thread_org_get(ikm, out)) {
		rc = 0;
	} else {
		rc = extract(out, ikm, sizeof(ikm));
		if (rc == 0)
			seal_thread_org_put(ikm, out);
	}
	OPENSSL_cleanse(ikm, sizeof(ikm));
	return rc;
}

static int
gcm(int enc, const uint8_t key[SEAL_KEY_LEN], const uint8_t nonce[SEAL_NONCE_LEN],
    const uint8_t *aad, size_t aadlen, const uint8_t *in, uint8_t *buf, size_t len,
    uint8_t tag[SEAL_TAG_LEN])
{
	EVP_CIPHER_CTX *c = seal_thread_gcm();
	int n = 0, ok;

	/* The context keeps its cipher and nonce length from call to call:
	 * each call sets the direction, the key and the nonce anew. */
	ok = c != NULL && EVP_CipherInit_ex(c, NULL, NULL, key, nonce, enc) == 1 &&
	     (aadlen == 0 || EVP_CipherUpdate(c, NULL, &n, aad, (int)aadlen) == 1);
	/* In pieces of at most 1 GiB (an int's worth); a slice is far less. */
	while (ok && len > 0) {
		int piece = len > (1u << 30) ? (1 << 30) : (int)len;

		ok = EVP_CipherUpdate(c, buf, &n, in, piece) == 1;
		buf += piece;
		in += piece;
		len -= (size_t)piece;
	}
	if (ok && !enc)
		ok = EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_SET_TAG, SEAL_TAG_LEN, tag) == 1;
	if (!ok)
		return -2; /* libcrypto itself failed: nothing said of the bytes */
	/* Decrypting, this is where the tag is checked. */
	ok = EVP_CipherFinal_ex(c, buf, &n) == 1;
	if (ok && enc)
		ok = EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_GET_TAG, SEAL_TAG_LEN, tag) == 1;
	return ok ? 0 : enc ? -2 : -1;
}

int
seal_gcm_encrypt(const uint8_t key[SEAL_KEY_LEN], const uint8_t nonce[SEAL_NONCE_LEN],
		 const uint8_t *aad, size_t aadlen, uint8_t *buf, size_t len,
		 uint8_t tag[SEAL_TAG_LEN])
{
	return gcm(1, key, nonce, aad, aadlen, buf, buf, len, tag);
}

int
seal_gcm_encrypt_to(const uint8_t key[SEAL_KEY_LEN], const uint8_t nonce[SEAL_NONCE_LEN],
		    const uint8_t *aad, size_t aadlen, const uint8_t *in, uint8_t *out, size_t len,
		    uint8_t tag[SEAL_TAG_LEN])
{
	return gcm(1, key, nonce, aad, aadlen, in, out, len, tag);
}

int
seal_gcm_decrypt(const uint8_t key[SEAL_KEY_LEN], const uint8_t nonce[SEAL_NONCE_LEN],
		 const uint8_t *aad, size_t aadlen, uint8_t *buf, size_t len,
		 const uint8_t tag[SEAL_TAG_LEN])
{
	return seal_gcm_decrypt_to(key, nonce, aad, aadlen, buf, buf, len, tag);
}

int
seal_gcm_decrypt_to(const uint8_t key[SEAL_KEY_LEN], const uint8_t nonce[SEAL_NONCE_LEN],
		    const uint8_t *aad, size_t aadlen, const uint8_t *in, uint8_t *out, size_t len,
		    const uint8_t tag[SEAL_TAG_LEN])
{
	uint8_t t[SEAL_TAG_LEN];

	memcpy(t, tag, SEAL_TAG_LEN);
	return gcm(0, key, nonce, aad, aadlen, in, out, len, t);
}
