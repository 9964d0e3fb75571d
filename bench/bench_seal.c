/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What sealing a column costs on a shard's CPU beyond AES-256-GCM itself:
 * the calls a disk tier's write makes per column (lib/kvdisk/kvdisk_seal.c,
 * under an organization key store: the pair's key, a nonce, the write's
 * key, the header's MAC, the bytes sealed) and those of a read (the same
 * without the nonce, the bytes opened from the read's buffer straight into
 * the request's, as kvdisk_get_into() does), in microseconds a column,
 * against AES-256-GCM of the same bytes through one context kept for the
 * whole run (the floor: no per-column state can cost less than none).
 * Ratios are the floor over the figure: 1.0 is nothing spent beyond the
 * cipher.
 *
 *   bench_seal [ROUNDS]
 *
 * Columns of the demo's size (256 tokens of 256 B, 64 KiB) and of a
 * shared-level slice of 64 tokens (16 KiB); each figure the best of three
 * runs of ROUNDS columns (default 20,000).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "mono.h"
#include "seal.h"

struct fixture {
	struct seal_key master, org;
	uint8_t *buf, *plain, *out;
	size_t len;
};

/* The disk tier's write of one column, call for call. */
static int
seal_one(struct fixture *f, uint32_t slot, uint8_t nonce[SEAL_NONCE_LEN], uint8_t tag[SEAL_TAG_LEN])
{
	struct seal_key k;
	uint8_t info[58] = {'d', 'i', 's', 'k'}, key[SEAL_KEY_LEN], mac[32], hdr[54] = {0};
	uint8_t aad[82] = {0};

	memcpy(info + 38, &slot, sizeof(slot));
	memcpy(hdr + 48, &slot, sizeof(slot));
	if (seal_key_with_org(&f->master, &f->org, &k) != 0 || seal_nonce(nonce) != 0)
		return -1;
	memcpy(info + 42, nonce, SEAL_NONCE_LEN);
	if (seal_derive(&k, info, sizeof(info), key) != 0 ||
	    seal_hmac(key, SEAL_KEY_LEN, hdr, sizeof(hdr), mac) != 0)
		return -1;
	return seal_gcm_encrypt_to(key, nonce, aad, sizeof(aad), f->plain, f->buf, f->len, tag);
}

/* Its read: the pair's key, the write's key, the header's MAC, opened into f->out. */
static int
open_one(struct fixture *f, uint32_t slot, const uint8_t nonce[SEAL_NONCE_LEN],
	 const uint8_t tag[SEAL_TAG_LEN])
{
	struct seal_key k;
	uint8_t info[58] = {'d', 'i', 's', 'k'}, key[SEAL_KEY_LEN], mac[32], hdr[54] = {0};
	uint8_t aad[82] = {0};

	memcpy(info + 38, &slot, sizeof(slot));
	memcpy(hdr + 48, &slot, sizeof(slot));
	memcpy(info + 42, nonce, SEAL_NONCE_LEN);
	if (seal_key_with_org(&f->master, &f->org, &k) != 0 ||
	    seal_derive(&k, info, sizeof(info), key) != 0 ||
	    seal_hmac(key, SEAL_KEY_LEN, hdr, sizeof(hdr), mac) != 0)
		return -1;
	return seal_gcm_decrypt_to(key, nonce, aad, sizeof(aad), f->buf, f->out, f->len, tag);
}

/* Seconds a column: AES-256-GCM alone, one context for every column. */
static double
floor_run(struct fixture *f, uint32_t n)
{
	EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new();
	uint8_t key[32] = {1}, nonce[12] = {2}, aad[82] = {0}, tag[16];
	double t0;
	uint32_t i;
	int m, ok = c != NULL && EVP_EncryptInit_ex(c, EVP_aes_256_gcm(), NULL, NULL, NULL) == 1;

	t0 = mono_s();
	for (i = 0; ok && i < n; i++) {
		nonce[0] = (uint8_t)i;
		ok = EVP_EncryptInit_ex(c, NULL, NULL, key, nonce) == 1 &&
		     EVP_EncryptUpdate(c, NULL, &m, aad, sizeof(aad)) == 1 &&
		     EVP_EncryptUpdate(c, f->buf, &m, f->plain, (int)f->len) == 1 &&
		     EVP_EncryptFinal_ex(c, f->buf, &m) == 1 &&
		     EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_GET_TAG, 16, tag) == 1;
	}
	t0 = mono_s() - t0;
	EVP_CIPHER_CTX_free(c);
	return ok ? t0 / n : -1;
}

/* Seconds a column sealed and a column opened (each checked to open). */
static int
seal_run(struct fixture *f, uint32_t n, double *seal_s, double *open_s)
{
	uint8_t nonce[SEAL_NONCE_LEN], tag[SEAL_TAG_LEN];
	double ts = 0, to = 0, t0;
	uint32_t i;

	for (i = 0; i < n; i++) {
		t0 = mono_s();
		if (seal_one(f, i, nonce, tag) != 0)
			return -1;
		ts += mono_s() - t0;
		t0 = mono_s();
		if (open_one(f, i, nonce, tag) != 0)
			return -1;
		to += mono_s() - t0;
	}
	if (memcmp(f->out, f->plain, f->len) != 0)
		return -1;
	*seal_s = ts / n;
	*open_s = to / n;
	return 0;
}

static int
figure(const char *name, size_t len, uint32_t n)
{
	struct fixture f = {.len = len};
	uint8_t mk[32], ok[32];
	double best_floor = 1e9, best_seal = 1e9, best_open = 1e9;
	unsigned int i;

	for (i = 0; i < 32; i++) {
		mk[i] = (uint8_t)i;
		ok[i] = (uint8_t)(0x80 + i);
	}
	f.buf = malloc(len);
	f.plain = malloc(len);
	f.out = malloc(len);
	if (f.buf == NULL || f.plain == NULL || f.out == NULL ||
	    seal_key_from(&f.master, mk) != 0 || seal_key_from(&f.org, ok) != 0)
		return -1;
	for (i = 0; i < len; i++)
		f.plain[i] = (uint8_t)(i * 2654435761u >> 13);
	/* Interleaved, so that a busy stretch of the machine falls on both. */
	for (i = 0; i < 3; i++) {
		double fl = floor_run(&f, n), s, o;

		if (fl < 0 || seal_run(&f, n, &s, &o) != 0) {
			fprintf(stderr, "bench_seal: %s: sealing failed\n", name);
			return -1;
		}
		best_floor = fl < best_floor ? fl : best_floor;
		best_seal = s < best_seal ? s : best_seal;
		best_open = o < best_open ? o : best_open;
	}
	printf("bench: seal_column_%s %.2f us (baseline %.2f us, ratio %.3f)\n", name,
	       best_seal * 1e6, best_floor * 1e6, best_floor / best_seal);
	printf("bench: open_column_%s %.2f us (baseline %.2f us, ratio %.3f)\n", name,
	       best_open * 1e6, best_floor * 1e6, best_floor / best_open);
	free(f.buf);
	free(f.plain);
	free(f.out);
	return 0;
}

int
main(int argc, char **argv)
{
	uint32_t n = argc > 1 ? (uint32_t)strtoul(argv[1], NULL, 0) : 20000;

	if (n == 0 || n > 100000000) {
		fprintf(stderr, "usage: bench_seal [ROUNDS] (1 to 100000000)\n");
		return 2;
	}
	if (figure("64k", 65536, n) != 0 || figure("16k", 16384, 4 * n) != 0)
		return 1;
	return 0;
}
