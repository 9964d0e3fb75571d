/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What each thread that seals keeps from call to call (seal_thread.h):
 * libcrypto's contexts for AES-256-GCM and HMAC-SHA256, random nonces
 * drawn many at a time, and the keys a master key and an organization's
 * key made last.
 *
 * Made per call they cost more than the work: on this project's machine a
 * 16 KiB slice seals in 3.5 us, while a cipher context made and its cipher
 * fetched cost 1.2 us, an HMAC() 1.2 us (four a disk column: the pair's
 * key twice, the write's key, the header's MAC) and RAND_bytes 2 us
 * whatever its length. Kept, they cost about a microsecond a column in
 * all (bench/bench_seal.c, `seal_column_*` and `open_column_*`).
 *
 * A thread's state lives as long as the thread: a pthread key's
 * destructor frees it, its secrets wiped, when the thread ends. Keys a
 * store or ring let go (seal_forget()) leave it at the thread's next call:
 * its kept pairs wiped, its contexts keyed with zeros. Its nonces lie in a
 * page the kernel zeroes in a forked child (MADV_WIPEONFORK), so a child
 * never hands out its parent's; where the kernel cannot (before 4.14) none
 * are kept: each is drawn as it is handed out. A thread whose state
 * cannot be made (no memory, libcrypto refusing) fails each
 * call as libcrypto failing does.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <openssl/rand.h>

#include "seal.h"
#include "seal_thread.h"

/* Nonces drawn at once: one RAND_bytes call (2 us) for this many writes. */
#define NONCES_AT_ONCE 64
/* Keys of (master, organization) pairs kept: a shard's organizations in
 * turn rarely exceed this between two uses of one (a miss costs two HMACs). */
#define ORG_MEMO 16

struct org_memo {
	uint8_t in[2 * SEAL_KEY_LEN]; /* master key || organization key */
	struct seal_key out;
	bool valid;
};

/* Nonces drawn, in a page of their own (thread_state(): zeroed in a
 * forked child, so that nonces_left is 0 there and the child draws its
 * own: two processes writing one file must never share a nonce). */
struct nonce_page {
	uint8_t nonces[NONCES_AT_ONCE * SEAL_NONCE_LEN];
	unsigned int nonces_left;
};

struct seal_thread {
	EVP_CIPHER_CTX *gcm; /* AES-256-GCM, 96-bit nonces; keyed per call */
	EVP_MAC_CTX *hmac;   /* HMAC-SHA256; keyed per call */
	struct nonce_page *np;
	size_t np_len;
	bool np_wiped;	 /* the kernel wipes np in a child: nonces may be kept */
	uint64_t forgot; /* the seal_forget() count its secrets were last wiped at */
	struct org_memo org[ORG_MEMO];
};

static pthread_once_t once = PTHREAD_ONCE_INIT;
static pthread_key_t key;
static bool key_ok;
/* Fetched once per process: an implicit fetch at each use costs a lookup
 * in libcrypto's method store under its lock. */
static EVP_CIPHER *aes_gcm;
static EVP_MAC *hmac_alg;
static __thread struct seal_thread *mine;
/* seal_forget() calls: a thread whose count is behind wipes its secrets. */
static uint64_t forgotten;

static void
thread_free(void *p)
{
	struct seal_thread *t = p;

	if (t == NULL)
		return;
	EVP_CIPHER_CTX_free(t->gcm);
	EVP_MAC_CTX_free(t->hmac);
	if (t->np != NULL)
		munmap(t->np, t->np_len);
	OPENSSL_cleanse(t, sizeof(*t));
	free(t);
	if (mine == t)
		mine = NULL;
}

static void
init_once(void)
{
	key_ok = pthread_key_create(&key, thread_free) == 0;
	aes_gcm = EVP_CIPHER_fetch(NULL, "AES-256-GCM", NULL);
	hmac_alg = EVP_MAC_fetch(NULL, "HMAC", NULL);
}

/* Its kept pairs wiped, its contexts keyed with zeros (seal_forget()). */
static void
wipe(struct seal_thread *t)
{
	static const uint8_t zero[SEAL_KEY_LEN];

	OPENSSL_cleanse(t->org, sizeof(t->org));
	(void)EVP_CipherInit_ex(t->gcm, NULL, NULL, zero, NULL, 1);
	(void)EVP_MAC_init(t->hmac, zero, sizeof(zero), NULL);
}

static struct seal_thread *
thread_state(void)
{
	struct seal_thread *t = mine;
	OSSL_PARAM p[2];
	char digest[] = "SHA256";
	uint64_t f;

	if (t != NULL) {
		f = __atomic_load_n(&forgotten, __ATOMIC_ACQUIRE);
		if (t->forgot != f) {
			wipe(t);
			t->forgot = f;
		}
		return t;
	}
	if (pthread_once(&once, init_once) != 0 || !key_ok || aes_gcm == NULL || hmac_alg == NULL)
		return NULL;
	t = calloc(1, sizeof(*t));
	if (t == NULL)
		return NULL;
	t->forgot = __atomic_load_n(&forgotten, __ATOMIC_ACQUIRE);
	t->np_len = (sizeof(*t->np) + 4095) & ~(size_t)4095;
	t->np = mmap(NULL, t->np_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (t->np == MAP_FAILED) {
		t->np = NULL;
		free(t);
		return NULL;
	}
#ifdef MADV_WIPEONFORK
	t->np_wiped = madvise(t->np, t->np_len, MADV_WIPEONFORK) == 0;
#endif
	p[0] = OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0);
	p[1] = OSSL_PARAM_construct_end();
	t->gcm = EVP_CIPHER_CTX_new();
	t->hmac = EVP_MAC_CTX_new(hmac_alg);
	/* The cipher and the nonce's length once; the direction, key and
	 * nonce at each call (seal.c, gcm()). */
	if (t->gcm == NULL || t->hmac == NULL ||
	    EVP_CipherInit_ex(t->gcm, aes_gcm, NULL, NULL, NULL, 1) != 1 ||
	    EVP_CIPHER_CTX_ctrl(t->gcm, EVP_CTRL_GCM_SET_IVLEN, SEAL_NONCE_LEN, NULL) != 1 ||
	    EVP_MAC_CTX_set_params(t->hmac, p) != 1 || pthread_setspecific(key, t) != 0) {
		thread_free(t);
		return NULL;
	}
	mine = t;
	return t;
}

EVP_CIPHER_CTX *
seal_thread_gcm(void)
{
	struct seal_thread *t = thread_state();

	return t != NULL ? t->gcm : NULL;
}

int
seal_hmac(const uint8_t *k, size_t klen, const uint8_t *msg, size_t len, uint8_t out[32])
{
	struct seal_thread *t = thread_state();
	size_t n = 0;

	if (t == NULL || EVP_MAC_init(t->hmac, k, klen, NULL) != 1 ||
	    EVP_MAC_update(t->hmac, msg, len) != 1 || EVP_MAC_final(t->hmac, out, &n, 32) != 1 ||
	    n != 32)
		return -1;
	return 0;
}

int
seal_nonce(uint8_t nonce[SEAL_NONCE_LEN])
{
	struct seal_thread *t = thread_state();
	struct nonce_page *np;

	if (t == NULL)
		return -1;
	/* A getpid() a nonce to tell a child would be a system call, a
	 * tenth of a sealed 16 KiB slice's overhead on a virtual machine:
	 * without the kernel's wipe, nothing is kept to hand out twice. */
	if (!t->np_wiped)
		return RAND_bytes(nonce, SEAL_NONCE_LEN) == 1 ? 0 : -1;
	np = t->np;
	if (np->nonces_left == 0) {
		if (RAND_bytes(np->nonces, sizeof(np->nonces)) != 1)
			return -1;
		np->nonces_left = NONCES_AT_ONCE;
	}
	np->nonces_left--;
	memcpy(nonce, np->nonces + (size_t)np->nonces_left * SEAL_NONCE_LEN, SEAL_NONCE_LEN);
	/* Handed out once: never again from this buffer. */
	memset(np->nonces + (size_t)np->nonces_left * SEAL_NONCE_LEN, 0, SEAL_NONCE_LEN);
	return 0;
}

static struct org_memo *
memo_at(struct seal_thread *t, const uint8_t in[2 * SEAL_KEY_LEN])
{
	/* Keys are uniformly random bytes: any of them spreads the pairs. */
	return &t->org[(in[0] ^ in[SEAL_KEY_LEN] ^ in[SEAL_KEY_LEN + 1]) % ORG_MEMO];
}

bool
seal_thread_org_get(const uint8_t in[2 * SEAL_KEY_LEN], struct seal_key *out)
{
	struct seal_thread *t = thread_state();
	struct org_memo *m;

	if (t == NULL)
		return false;
	m = memo_at(t, in);
	/* The whole input compared: the output is a function of it alone. */
	if (!m->valid || CRYPTO_memcmp(m->in, in, sizeof(m->in)) != 0)
		return false;
	*out = m->out;
	return true;
}

void
seal_thread_org_put(const uint8_t in[2 * SEAL_KEY_LEN], const struct seal_key *out)
{
	struct seal_thread *t = thread_state();
	struct org_memo *m;

	if (t == NULL)
		return;
	m = memo_at(t, in);
	memcpy(m->in, in, sizeof(m->in));
	m->out = *out;
	m->valid = true;
}

void
seal_forget(void)
{
	__atomic_add_fetch(&forgotten, 1, __ATOMIC_RELEASE);
	/* This thread's at once; the others' at their next call. */
	(void)thread_state();
}
