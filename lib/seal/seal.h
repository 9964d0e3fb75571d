/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Sealing what leaves a replica's DRAM (docs/SECURITY.md): a master key
 * file read with the checks a shard's L2 directory gets, keys derived
 * from it with HKDF-SHA256, and AES-256-GCM (OpenSSL's libcrypto; AES-NI
 * and PCLMULQDQ where the CPU has them). The shared level seals its slices
 * with it (lib/shared/shared_seal.h), the disk tier its columns
 * (lib/kvdisk): each says what its additional data binds.
 *
 * The master key file: exactly 32 bytes, or 64 hexadecimal digits and an
 * optional newline (`openssl rand -hex 32`); a regular file (no symbolic
 * link, no FIFO), owned by the user kvss runs as, readable by nobody else
 * (no access for group or others: 0600, 0400). Its id (the first 4 bytes
 * of seal_derive(info "id")) goes with each thing it sealed, so that a
 * replica holding the current key and the one before (rotation) opens
 * either.
 */
#ifndef KVSS_SEAL_H
#define KVSS_SEAL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#define SEAL_KEY_LEN 32
#define SEAL_TAG_LEN 16
#define SEAL_NONCE_LEN 12
/* The longest info seal_derive() takes. */
#define SEAL_INFO_MAX 64

/* A master key: its bytes and its id. */
struct seal_key {
	uint8_t key[SEAL_KEY_LEN];
	/* HKDF-Extract(salt "kvss seal v1", key): what every derivation
	 * expands (one HMAC each, seal_derive()). */
	uint8_t prk[SEAL_KEY_LEN];
	uint32_t id;
	int loaded;
};

struct seal_orgs; /* organization keys (orgkeys.h) */

/*
 * What a replica holds: the key it seals with, and one it still opens;
 * and, where an organization key store is configured, the organizations'
 * keys that each of those is mixed with (seal_key_with_org()).
 */
struct seal_ring {
	struct seal_key cur, old;
	struct seal_orgs *orgs; /* NULL: none (owned by whoever loaded it) */
};

/**
 * Read master key file @p path into @p k, checked as above. -1: @p err says
 * why in one line starting with the path ("PATH: readable by group or
 * others (mode 0644): chmod 600 it").
 */
int seal_key_load(const char *path, struct seal_key *k, char *err, size_t errlen);

/**
 * Open @p path for reading with the master key file's checks (a regular
 * file, no symbolic link, a FIFO never blocking, owned by this user, no
 * access for group or others); its status into @p st. The descriptor, or
 * -1 with @p err saying why, starting with the path.
 */
int seal_private_open(const char *path, struct stat *st, char *err, size_t errlen);

/**
 * A key derived from @p k for @p info (at most SEAL_INFO_MAX bytes):
 * HKDF-SHA256(master, salt "kvss seal v1", info), its first 32 bytes
 * (RFC 5869: one HMAC over the extracted key, which seal_key_from()
 * keeps). 0 or -1.
 */
int seal_derive(const struct seal_key *k, const uint8_t *info, size_t infolen,
		uint8_t out[SEAL_KEY_LEN]);

/** An organization's key: seal_derive() with info "org" || u64le(org). 0 or -1. */
int seal_org_key(const struct seal_key *k, uint64_t org, uint8_t out[SEAL_KEY_LEN]);

/**
 * AES-256-GCM of @p len bytes at @p buf in place under @p key and
 * @p nonce, @p aad authenticated; the tag into @p tag. 0 or -1.
 */
int seal_gcm_encrypt(const uint8_t key[SEAL_KEY_LEN], const uint8_t nonce[SEAL_NONCE_LEN],
		     const uint8_t *aad, size_t aadlen, uint8_t *buf, size_t len,
		     uint8_t tag[SEAL_TAG_LEN]);

/**
 * Its inverse: 0, -1 when the tag does not match (@p buf is then not to be
 * used), -2 when libcrypto failed (nothing is known of the bytes).
 */
int seal_gcm_decrypt(const uint8_t key[SEAL_KEY_LEN], const uint8_t nonce[SEAL_NONCE_LEN],
		     const uint8_t *aad, size_t aadlen, uint8_t *buf, size_t len,
		     const uint8_t tag[SEAL_TAG_LEN]);

/** A hexadecimal digit's value (either case), or -1 (the key files' readers). */
int seal_hexval(int c);

/**
 * A random nonce (libcrypto's generator, drawn many at a time per thread
 * and process; each handed out once). 0 or -1.
 */
int seal_nonce(uint8_t nonce[SEAL_NONCE_LEN]);

/**
 * seal_gcm_decrypt() of @p len bytes from @p in to @p out (which may be
 * @p in): on -1 or -2, @p out holds bytes not to be used.
 */
int seal_gcm_decrypt_to(const uint8_t key[SEAL_KEY_LEN], const uint8_t nonce[SEAL_NONCE_LEN],
			const uint8_t *aad, size_t aadlen, const uint8_t *in, uint8_t *out,
			size_t len, const uint8_t tag[SEAL_TAG_LEN]);

/** seal_gcm_encrypt() of @p len bytes from @p in to @p out (which may be @p in). */
int seal_gcm_encrypt_to(const uint8_t key[SEAL_KEY_LEN], const uint8_t nonce[SEAL_NONCE_LEN],
			const uint8_t *aad, size_t aadlen, const uint8_t *in, uint8_t *out,
			size_t len, uint8_t tag[SEAL_TAG_LEN]);

/**
 * The key a master key and an organization's key make together:
 * HKDF-Extract(salt "kvss seal v1", master || org), its id derived as a
 * master key's is. Whoever lacks either derives nothing from it, so
 * replacing the organization's key (orgkeys.h) retires everything sealed
 * under the pair, wherever a copy of it lies. 0 or -1.
 */
int seal_key_with_org(const struct seal_key *master, const struct seal_key *org,
		      struct seal_key *out);

/**
 * Keys were let go (an organization store freed, a file's keys wiped):
 * what each thread keeps of keys it derived (seal_thread.c) is wiped, this
 * thread's now, another's at its next sealing call or when it ends.
 */
void seal_forget(void);

/**
 * HMAC-SHA256 of @p len bytes at @p msg under the @p klen bytes of @p k
 * into @p out, through a context this thread keeps. 0 or -1.
 */
int seal_hmac(const uint8_t *k, size_t klen, const uint8_t *msg, size_t len, uint8_t out[32]);

/** A key from its @p bytes, its id derived as seal_key_load() does (tests, tools). 0 or -1. */
int seal_key_from(struct seal_key *k, const uint8_t bytes[SEAL_KEY_LEN]);

#endif
