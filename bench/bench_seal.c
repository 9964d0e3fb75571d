/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What sealing a column costs on a shard's CPU beyond AES-256-GCM itself:
 * the disk tier's own calls for a column's write (kd_seal() and the
 * header's MAC, lib/kvdisk/kvdisk_seal.c: the pair's key under an
 * organization key store, a nonce, the write's key, the bytes sealed) and
 * for its read (the header's MAC checked, kd_open(): the bytes opened from
 * the read's buffer straight into the request's, as kvdisk_get_into()
 * does), on a file's keys as kvdisk_open() leaves them, in microseconds a
 * column, against AES-256-GCM of the same bytes through one context kept
 * for the whole run (the floor: no per-column state can cost less than none).
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

#include "kvdisk_priv.h"
#include "mono.h"
#include "orgkeys.h"
#include "seal.h"

struct fixture {
	struct kvdisk d; /* a sealed file's keys and owner, as kvdisk_open() leaves them */
	struct seal_ring ring;
	struct hdr hdr;		    /* the last column's, as the slot would hold it */
	uint8_t *buf, *plain, *out; /* buf: a slot's column and its trailer */
	uint32_t len;
};

#define ORG 0x42

/* The disk tier's write of one column: its bytes sealed, its header's MAC (kvdisk.c's put). */
static int
seal_one(struct fixture *f, uint32_t slot)
{
	struct hdr h = {.magic = 1, .cache = 0, .key = slot, .org = ORG, .tokens = 256};

	if (kd_seal(&f->d, 0, slot, &h, f->plain, f->buf, f->len) != 0)
		return -1;
	h.hdr_hash = kd_hdr_sum(&f->d, &h, 0, slot);
	f->hdr = h;
	return 0;
}

/* Its read: the header's MAC checked, the column opened from the read's buffer into f->out. */
static int
open_one(struct fixture *f, uint32_t slot)
{
	if (!kd_hdr_ok(&f->d, &f->hdr, 0, slot))
		return -1;
	return kd_open(&f->d, 0, slot, &f->hdr, f->buf, f->out, f->len) == KD_OPEN_OK ? 0 : -1;
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
	double ts = 0, to = 0, t0;
	uint32_t i;

	for (i = 0; i < n; i++) {
		t0 = mono_s();
		if (seal_one(f, i) != 0)
			return -1;
		ts += mono_s() - t0;
		t0 = mono_s();
		if (open_one(f, i) != 0)
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
figure(const char *name, uint32_t len, uint32_t n)
{
	struct fixture f = {.len = len};
	double best_floor = 1e9, best_seal = 1e9, best_open = 1e9;
	uint8_t mk[32];
	unsigned int i;
	int rc = -1;

	for (i = 0; i < 32; i++)
		mk[i] = (uint8_t)i;
	/* Under an organization key store, as the demo's sealed run: each
	 * column's key is the master's mixed with its organization's. */
	f.ring.orgs = seal_orgs_new();
	f.buf = malloc(len + KD_TRAILER_LEN);
	f.plain = malloc(len);
	f.out = malloc(len);
	if (f.ring.orgs == NULL || f.buf == NULL || f.plain == NULL || f.out == NULL ||
	    seal_key_from(&f.ring.cur, mk) != 0 || seal_orgs_name(f.ring.orgs, ORG) != 0)
		goto out;
	memset(f.d.file_id, 0x5a, sizeof(f.d.file_id));
	f.d.model = 1;
	f.d.shard = 0;
	f.d.keys = &f.ring;
	if (kd_hdr_keys(&f.d) != 0)
		goto out;
	for (i = 0; i < len; i++)
		f.plain[i] = (uint8_t)(i * 2654435761u >> 13);
	/* Interleaved, so that a busy stretch of the machine falls on both. */
	for (i = 0; i < 3; i++) {
		double fl = floor_run(&f, n), s, o;

		if (fl < 0 || seal_run(&f, n, &s, &o) != 0) {
			fprintf(stderr, "bench_seal: %s: sealing failed\n", name);
			rc = -2;
			goto out;
		}
		best_floor = fl < best_floor ? fl : best_floor;
		best_seal = s < best_seal ? s : best_seal;
		best_open = o < best_open ? o : best_open;
	}
	printf("bench: seal_column_%s %.2f us (baseline %.2f us, ratio %.3f)\n", name,
	       best_seal * 1e6, best_floor * 1e6, best_floor / best_seal);
	printf("bench: open_column_%s %.2f us (baseline %.2f us, ratio %.3f)\n", name,
	       best_open * 1e6, best_floor * 1e6, best_floor / best_open);
	rc = 0;
out:
	if (rc == -1)
		fprintf(stderr, "bench_seal: %s: no keys (memory or randomness)\n", name);
	seal_orgs_free(f.ring.orgs);
	free(f.buf);
	free(f.plain);
	free(f.out);
	return rc == 0 ? 0 : -1;
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
