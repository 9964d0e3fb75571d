/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What each thread keeps for sealing (lib/seal/seal_thread.c): a kept
 * context gives what a fresh one gives, call after call, whatever came
 * before (another key, the other direction, a tag that failed); HMAC-SHA256
 * against RFC 4231's vectors; nonces drawn many at a time never repeat,
 * in a thread, across threads, or in a forked child; the organization
 * keys kept never answer for another pair, even one that lands in the
 * same place; threads that seal at once each get their own state.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "seal.h"
#include "seal_fixture.h"

/* AES-256-GCM through a context made for this call alone: what the kept
 * context must agree with. */
static void
fresh_gcm(const uint8_t key[32], const uint8_t nonce[12], const uint8_t *aad, int aadlen,
	  const uint8_t *in, uint8_t *out, int len, uint8_t tag[16])
{
	EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new();
	int n;

	cr_assert_not_null(c);
	cr_assert_eq(EVP_EncryptInit_ex(c, EVP_aes_256_gcm(), NULL, key, nonce), 1);
	if (aadlen > 0)
		cr_assert_eq(EVP_EncryptUpdate(c, NULL, &n, aad, aadlen), 1);
	if (len > 0)
		cr_assert_eq(EVP_EncryptUpdate(c, out, &n, in, len), 1);
	cr_assert_eq(EVP_EncryptFinal_ex(c, out + len, &n), 1);
	cr_assert_eq(EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_GET_TAG, 16, tag), 1);
	EVP_CIPHER_CTX_free(c);
}

static void
fill(uint8_t *p, size_t n, uint32_t seed)
{
	size_t i;

	for (i = 0; i < n; i++)
		p[i] = (uint8_t)((i + seed) * 2654435761u >> 11);
}

Test(seal_thread, a_kept_context_gives_what_a_fresh_one_gives)
{
	enum { MAX = 70000 };
	uint8_t *in = malloc(MAX), *got = malloc(MAX), *want = malloc(MAX);
	uint8_t key[32], nonce[12], aad[90], tag[16], wtag[16];
	uint32_t r;

	cr_assert(in != NULL && got != NULL && want != NULL);
	/* Lengths, keys, nonces and additional data changing at every call,
	 * and the direction too: every round encrypts, opens what it made,
	 * fails a tag, then opens again. */
	for (r = 0; r < 40; r++) {
		int len = r == 0 ? 0 : (int)((r * 7919u) % MAX);
		int aadlen = (int)(r % sizeof(aad));

		fill(key, sizeof(key), r);
		fill(nonce, sizeof(nonce), r * 3);
		fill(aad, sizeof(aad), r * 5);
		fill(in, (size_t)len, r * 11);
		fresh_gcm(key, nonce, aad, aadlen, in, want, len, wtag);
		cr_assert_eq(
		    seal_gcm_encrypt_to(key, nonce, aad, (size_t)aadlen, in, got, (size_t)len, tag),
		    0);
		cr_assert_arr_eq(got, want, (size_t)len, "round %u: the ciphertext", r);
		cr_assert_arr_eq(tag, wtag, 16, "round %u: the tag", r);
		tag[r % 16] ^= 1;
		cr_assert_eq(
		    seal_gcm_decrypt(key, nonce, aad, (size_t)aadlen, got, (size_t)len, tag), -1,
		    "round %u: a wrong tag opens", r);
		memcpy(got, want, (size_t)len);
		tag[r % 16] ^= 1;
		cr_assert_eq(
		    seal_gcm_decrypt(key, nonce, aad, (size_t)aadlen, got, (size_t)len, tag), 0,
		    "round %u: after a failed tag, the right one does not open", r);
		cr_assert_arr_eq(got, in, (size_t)len, "round %u: the plain bytes", r);
	}
	free(in);
	free(got);
	free(want);
}

/* RFC 4231, test cases 1 and 2 (HMAC-SHA-256). */
Test(seal_thread, hmac_meets_rfc_4231)
{
	uint8_t k1[20], out[32], want[32];
	const char *m2 = "what do ya want for nothing?";

	memset(k1, 0x0b, sizeof(k1));
	cr_assert_eq(seal_hmac(k1, sizeof(k1), (const uint8_t *)"Hi There", 8, out), 0);
	unhex("b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7", want, 32);
	cr_assert_arr_eq(out, want, 32, "case 1");
	cr_assert_eq(seal_hmac((const uint8_t *)"Jefe", 4, (const uint8_t *)m2, strlen(m2), out),
		     0);
	unhex("5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843", want, 32);
	cr_assert_arr_eq(out, want, 32, "case 2: a key of another length, on the kept context");
	cr_assert_eq(seal_hmac(k1, sizeof(k1), (const uint8_t *)"Hi There", 8, out), 0);
	unhex("b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7", want, 32);
	cr_assert_arr_eq(out, want, 32, "case 1 again: the last key left nothing behind");
}

static int
cmp_nonce(const void *a, const void *b)
{
	return memcmp(a, b, SEAL_NONCE_LEN);
}

Test(seal_thread, nonces_never_repeat_in_a_thread)
{
	enum { N = 20000 };
	uint8_t(*v)[SEAL_NONCE_LEN] = malloc((size_t)N * SEAL_NONCE_LEN);
	uint32_t i;

	cr_assert_not_null(v);
	for (i = 0; i < N; i++)
		cr_assert_eq(seal_nonce(v[i]), 0);
	qsort(v, N, SEAL_NONCE_LEN, cmp_nonce);
	for (i = 1; i < N; i++)
		cr_assert_neq(memcmp(v[i - 1], v[i], SEAL_NONCE_LEN), 0, "a nonce given twice");
	free(v);
}

/* A child forked after its parent drew nonces (so that the parent's next
 * ones wait drawn in memory the child has a copy of) draws its own. */
Test(seal_thread, a_forked_child_draws_its_own_nonces)
{
	uint8_t first[SEAL_NONCE_LEN], child[4][SEAL_NONCE_LEN], parent[4][SEAL_NONCE_LEN];
	int fd[2], st;
	pid_t pid;
	unsigned int i, j;

	cr_assert_eq(seal_nonce(first), 0);
	cr_assert_eq(pipe(fd), 0);
	pid = fork();
	cr_assert_neq(pid, -1);
	if (pid == 0) {
		for (i = 0; i < 4; i++)
			if (seal_nonce(child[i]) != 0)
				_exit(2);
		_exit(write(fd[1], child, sizeof(child)) == (ssize_t)sizeof(child) ? 0 : 3);
	}
	for (i = 0; i < 4; i++)
		cr_assert_eq(seal_nonce(parent[i]), 0);
	cr_assert_eq(read(fd[0], child, sizeof(child)), (ssize_t)sizeof(child));
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	close(fd[0]);
	close(fd[1]);
	for (i = 0; i < 4; i++)
		for (j = 0; j < 4; j++)
			cr_assert_neq(memcmp(child[i], parent[j], SEAL_NONCE_LEN), 0,
				      "the child's nonce %u is the parent's %u", i, j);
}

/* What seal_key_with_org() makes, computed here from its definition
 * (HKDF-Extract over both keys, its id as a master key's). */
static struct seal_key
with_org_by_hand(const struct seal_key *m, const struct seal_key *o)
{
	uint8_t ikm[64];
	struct seal_key k;

	memcpy(ikm, m->key, 32);
	memcpy(ikm + 32, o->key, 32);
	cr_assert_eq(seal_hmac((const uint8_t *)"kvss seal v1", 12, ikm, 64, k.prk), 0);
	k.loaded = 1;
	{
		uint8_t id[32];

		cr_assert_eq(seal_derive(&k, (const uint8_t *)"id", 2, id), 0);
		k.id = (uint32_t)id[0] | (uint32_t)id[1] << 8 | (uint32_t)id[2] << 16 |
		       (uint32_t)id[3] << 24;
	}
	return k;
}

Test(seal_thread, kept_org_keys_never_answer_for_another_pair)
{
	struct seal_key m = doc_key(0), m2 = doc_key(100), o, got, want;
	uint8_t b[32];
	unsigned int i, r;

	for (r = 0; r < 200; r++) {
		/* Organization keys that differ in one byte past the first two
		 * (the place a pair is kept at is a function of those): every
		 * one lands where the one before was kept. */
		for (i = 0; i < 32; i++)
			b[i] = (uint8_t)(7 * i);
		b[2 + r % 30] = (uint8_t)(r + 1);
		cr_assert_eq(seal_key_from(&o, b), 0);
		for (i = 0; i < 2; i++) {
			const struct seal_key *mm = (r + i) % 3 == 0 ? &m2 : &m;

			cr_assert_eq(seal_key_with_org(mm, &o, &got), 0);
			want = with_org_by_hand(mm, &o);
			cr_assert_arr_eq(got.prk, want.prk, 32, "round %u, call %u", r, i);
			cr_assert_eq(got.id, want.id, "round %u, call %u", r, i);
			cr_assert_eq(got.loaded, 1);
		}
	}
	/* An organization whose key is not loaded makes none, kept or not. */
	o.loaded = 0;
	cr_assert_eq(seal_key_with_org(&m, &o, &got), -1);
	cr_assert_eq(got.loaded, 0);
}

struct worker {
	uint32_t seed;
	int failed;
};

static void *
seal_many(void *arg)
{
	struct worker *w = arg;
	uint8_t key[32], nonce[12], buf[4096], plain[4096], tag[16];
	uint32_t r;

	for (r = 0; r < 2000 && !w->failed; r++) {
		fill(key, sizeof(key), w->seed + r);
		fill(plain, sizeof(plain), w->seed * 31 + r);
		if (seal_nonce(nonce) != 0 ||
		    seal_gcm_encrypt_to(key, nonce, NULL, 0, plain, buf, sizeof(buf), tag) != 0 ||
		    seal_gcm_decrypt(key, nonce, NULL, 0, buf, sizeof(buf), tag) != 0 ||
		    memcmp(buf, plain, sizeof(buf)) != 0)
			w->failed = 1;
	}
	return NULL;
}

/* Four threads at once, each with keys of its own, each thread started
 * and ended (its state freed: AddressSanitizer's build of this suite
 * reports it otherwise). */
Test(seal_thread, threads_sealing_at_once_each_have_their_own)
{
	pthread_t t[4];
	struct worker w[4];
	unsigned int i;

	for (i = 0; i < 4; i++) {
		w[i] = (struct worker){.seed = 1000 * (i + 1)};
		cr_assert_eq(pthread_create(&t[i], NULL, seal_many, &w[i]), 0);
	}
	for (i = 0; i < 4; i++) {
		cr_assert_eq(pthread_join(t[i], NULL), 0);
		cr_assert_eq(w[i].failed, 0, "thread %u", i);
	}
}

/*
 * Keys let go (seal_forget(): an organization store freed, a file's keys
 * wiped) leave what a thread keeps: its calls after give what they gave
 * before, the pairs made again, the contexts keyed anew, on this thread
 * and on another that sealed before.
 * Catches: a wipe that leaves a context unusable (its cipher or nonce
 * length lost) or a pair answered from wiped memory.
 */
static void *
forget_worker(void *arg)
{
	int *failed = arg;
	struct seal_key m, o, a, b;
	uint8_t mk[32], ok[32], key[32] = {7}, nonce[12] = {9}, buf[256], plain[256], tag[16];

	memset(mk, 0x11, sizeof(mk));
	memset(ok, 0x22, sizeof(ok));
	fill(plain, sizeof(plain), 5);
	if (seal_key_from(&m, mk) != 0 || seal_key_from(&o, ok) != 0 ||
	    seal_key_with_org(&m, &o, &a) != 0) {
		*failed = 1;
		return NULL;
	}
	seal_forget();
	if (seal_key_with_org(&m, &o, &b) != 0 || memcmp(a.prk, b.prk, 32) != 0 || a.id != b.id ||
	    seal_gcm_encrypt_to(key, nonce, NULL, 0, plain, buf, sizeof(buf), tag) != 0 ||
	    seal_gcm_decrypt(key, nonce, NULL, 0, buf, sizeof(buf), tag) != 0 ||
	    memcmp(buf, plain, sizeof(buf)) != 0)
		*failed = 2;
	return NULL;
}

Test(seal_thread, calls_after_keys_are_let_go_give_what_they_gave)
{
	struct seal_key m = doc_key(0), o = doc_key(50), a, b;
	uint8_t key[32], nonce[12], in[1000], out[1000], want[1000], tag[16], wtag[16], mac[32],
	    mac2[32];
	pthread_t t;
	int failed = 0;

	fill(key, sizeof(key), 1);
	fill(nonce, sizeof(nonce), 2);
	fill(in, sizeof(in), 3);
	cr_assert_eq(seal_key_with_org(&m, &o, &a), 0);
	cr_assert_eq(seal_hmac(key, 32, in, 100, mac), 0);
	fresh_gcm(key, nonce, NULL, 0, in, want, (int)sizeof(in), wtag);
	seal_forget();
	cr_assert_eq(seal_key_with_org(&m, &o, &b), 0);
	cr_assert_arr_eq(a.prk, b.prk, 32);
	cr_assert_eq(a.id, b.id);
	cr_assert_eq(seal_hmac(key, 32, in, 100, mac2), 0);
	cr_assert_arr_eq(mac, mac2, 32);
	cr_assert_eq(seal_gcm_encrypt_to(key, nonce, NULL, 0, in, out, sizeof(in), tag), 0);
	cr_assert_arr_eq(out, want, sizeof(in));
	cr_assert_arr_eq(tag, wtag, 16);
	cr_assert_eq(pthread_create(&t, NULL, forget_worker, &failed), 0);
	cr_assert_eq(pthread_join(t, NULL), 0);
	cr_assert_eq(failed, 0, "another thread after a forget: %d", failed);
}
