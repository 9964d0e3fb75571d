/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Sealed slices (lib/shared/shared_seal.c; docs/PROTOCOL.md section 10,
 * "Sealed slices"): AES-256-GCM against the GCM specification's own test
 * vectors, the key derivation against values computed by another
 * implementation (Python's hmac, RFC 5869), the document's golden sealed
 * slice byte for byte; every way a sealed slice can be wrong (tampered,
 * moved under another column with its header rewritten to check, another
 * organization, an older generation, another key, plain where sealed)
 * refused with its reason; the master key file refused in every hostile
 * form, naming why, and never blocking on a FIFO.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "frames.h"
#include "shared_obj.h"
#include "seal_fixture.h"
#include "shared_seal.h"
#include "tmpdir.h"
#include "xxhash.h"

#define FU 1700000000000000000ULL

/* The GCM specification's test cases 13 and 14 (AES-256, zero key and nonce). */
Test(seal, aes_256_gcm_meets_the_specification_vectors)
{
	uint8_t key[32] = {0}, nonce[12] = {0}, buf[16] = {0}, tag[16], want[16];

	cr_assert_eq(seal_gcm_encrypt(key, nonce, NULL, 0, buf, 0, tag), 0);
	unhex("530f8afbc74536b9a963b4f1c4cb738b", want, 16);
	cr_assert_arr_eq(tag, want, 16, "case 13: the tag of nothing");
	cr_assert_eq(seal_gcm_encrypt(key, nonce, NULL, 0, buf, 16, tag), 0);
	unhex("cea7403d4d606b6e074ec5d3baf39d18", want, 16);
	cr_assert_arr_eq(buf, want, 16, "case 14: the ciphertext");
	unhex("d0d1c8a799996bf0265b98b5d48ab919", want, 16);
	cr_assert_arr_eq(tag, want, 16, "case 14: the tag");
	cr_assert_eq(seal_gcm_decrypt(key, nonce, NULL, 0, buf, 16, tag), 0);
	memset(want, 0, 16);
	cr_assert_arr_eq(buf, want, 16, "case 14 decrypted");
	buf[3] ^= 1;
	cr_assert_eq(seal_gcm_decrypt(key, nonce, NULL, 0, buf, 16, tag), -1, "a flipped bit opens");
}

/* HKDF-SHA256 (RFC 5869) as Python's hmac computes it, for master key 00..1f. */
Test(seal, keys_derive_as_the_document_says)
{
	struct seal_key k = doc_key(0);
	uint8_t org[32], want[32], other[32];

	cr_assert_eq(k.id, 0xd78800a2u, "the key's id: %08x", k.id);
	cr_assert_eq(seal_org_key(&k, 0x3333, org), 0);
	unhex("fc1791773aa366454f9d15c78eebe480ba792a098b2601af236e99379045d673", want, 32);
	cr_assert_arr_eq(org, want, 32, "organization 0x3333's key");
	cr_assert_eq(seal_org_key(&k, 0x3334, other), 0);
	cr_assert_arr_neq(org, other, 32, "two organizations, one key");
	/* The document's slice's own key (organization 0x3333, its object, shard 3, cache 1). */
	cr_assert_eq(seal_slice_key(&k, 0x3333, 0x870985c5d46bfa18ull, 3, 1, org), 0);
	unhex("9c54de406644796c6e6c5f2bbbb37cf66c1c2719cc9f9d660886916a8679605c", want, 32);
	cr_assert_arr_eq(org, want, 32, "the slice's key");
	cr_assert_eq(seal_slice_key(&k, 0x3333, 0x870985c5d46bfa18ull, 3, 0, other), 0);
	cr_assert_arr_neq(org, other, 32, "two caches, one key");
}

/* The document's slice (test_shared_obj.c's), sealed. */
static const uint8_t payload[8] = {1, 2, 3, 4, 5, 6, 7, 8};

static struct shared_hdr
slice_hdr(void)
{
	static const uint32_t bpt[8] = {8, 4, 8, 4, 8, 4, 8, 4};
	uint32_t layout = shared_layout(0, "llama-3.1-8b", 4, 2, 8, bpt);

	return (struct shared_hdr){.kind = SHARED_SLICE, .org = 0x3333, .key = 0x4444,
				   .parent = 0x2222,
				   .object_id = shared_object_id(0x3333, 0x4444, 1, 2, layout),
				   .first_use_ns = FU, .written_ns = FU + 5, .gen_global = 1,
				   .gen_org = 2, .layout = layout, .model = 0, .shard = 3,
				   .cache = 1, .start = 64, .tokens = 2, .bytes_per_token = 4,
				   .payload_len = 8};
}

/* Seal @p h's slice (payload 1..8) under @p k into @p obj: its length. */
static size_t
seal_into(uint8_t *obj, struct shared_hdr h, const struct seal_key *k)
{
	static const uint8_t nonce[12] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};

	memcpy(obj + SHARED_HDR_LEN, payload, sizeof(payload));
	cr_assert_eq(shared_slice_seal_nonce(&h, obj + SHARED_HDR_LEN, k, nonce), 0);
	shared_hdr_encode(obj, &h, obj + SHARED_HDR_LEN);
	return SHARED_HDR_LEN + h.payload_len;
}

/* Decode and open @p obj (@p n bytes) with @p ring: the reason, and the plain bytes when OK. */
static enum shared_bad
open_obj(uint8_t *obj, size_t n, const struct seal_ring *ring)
{
	struct shared_hdr h;
	enum shared_bad why = shared_obj_decode(obj, n, &h);

	return why != SHARED_OK ? why : shared_slice_open(&h, obj + SHARED_HDR_LEN, ring);
}

Test(seal, the_golden_sealed_slice_is_built_and_opened)
{
	struct seal_key k = doc_key(0);
	struct seal_ring ring = {.cur = k};
	uint8_t obj[256], want[256];
	size_t n = seal_into(obj, slice_hdr(), &k);
	uint32_t m = frames_golden("shared_slice_sealed", want, sizeof(want));

	cr_assert_eq(m, n, "the document's sealed slice has %u bytes, built %zu", m, n);
	cr_assert_arr_eq(obj, want, n, "the sealed slice differs from docs/PROTOCOL.md");
	cr_assert_arr_neq(obj + SHARED_HDR_LEN, payload, sizeof(payload), "sealed in plain");
	cr_assert_eq(open_obj(want, m, &ring), SHARED_OK);
	cr_assert_arr_eq(want + SHARED_HDR_LEN, payload, sizeof(payload), "opened, not the bytes");
}

/*
 * A slice an attacker writes with the pool's rights but not the key: every
 * byte of a sealed slice flipped, with both checksums made right again (XXH3
 * is no secret), is refused, and never reads as the column.
 */
Test(seal, every_byte_changed_and_checksummed_again_is_refused)
{
	struct seal_key k = doc_key(0);
	struct seal_ring ring = {.cur = k};
	uint8_t good[256];
	size_t n = seal_into(good, slice_hdr(), &k), at;

	for (at = 6; at < n; at++) {
		uint8_t obj[256];
		struct shared_hdr h;
		enum shared_bad why;

		if ((at >= 96 && at < 104) || (at >= 120 && at < 128))
			continue; /* the two checksums: remade below */
		memcpy(obj, good, n);
		obj[at] ^= 0x10;
		/* Both checksums made to match again. */
		{
			uint64_t oid;

			memcpy(&oid, obj + 32, 8);
			uint64_t p = XXH3_64bits_withSeed(obj + SHARED_HDR_LEN, n - SHARED_HDR_LEN, oid);
			uint64_t hs;

			memcpy(obj + 96, &p, 8);
			hs = XXH3_64bits_withSeed(obj, 120, 0x6b7673732d6f626aULL);
			memcpy(obj + 120, &hs, 8);
		}
		why = shared_obj_decode(obj, n, &h);
		if (why == SHARED_OK)
			why = shared_slice_open(&h, obj + SHARED_HDR_LEN, &ring);
		cr_assert_neq(why, SHARED_OK, "byte %zu changed, checksums made again: opened", at);
	}
}

/* A slice moved: its header rewritten to name another column (checksums right). */
static enum shared_bad
moved(void (*edit)(struct shared_hdr *))
{
	struct seal_key k = doc_key(0);
	struct seal_ring ring = {.cur = k};
	uint8_t obj[256];
	struct shared_hdr h;
	size_t n = seal_into(obj, slice_hdr(), &k);

	cr_assert_eq(shared_obj_decode(obj, n, &h), SHARED_OK);
	edit(&h);
	/* Its bytes, under the new header (re-encoded by one who has no key). */
	shared_hdr_encode(obj, &h, obj + SHARED_HDR_LEN);
	cr_assert_eq(shared_obj_decode(obj, n, &h), SHARED_OK, "the move itself checks");
	return shared_slice_open(&h, obj + SHARED_HDR_LEN, &ring);
}

static void
to_key(struct shared_hdr *h)
{
	h->key = 0x4445;
}
static void
to_org(struct shared_hdr *h)
{
	h->org = 0x3334;
}
static void
to_old_gen(struct shared_hdr *h)
{
	h->gen_org = 1;
}
static void
to_shard(struct shared_hdr *h)
{
	h->shard = 2;
}
static void
to_cache(struct shared_hdr *h)
{
	h->cache = 0;
}
static void
to_start(struct shared_hdr *h)
{
	h->start = 0;
}
static void
to_layout(struct shared_hdr *h)
{
	h->layout ^= 1;
}
static void
to_model(struct shared_hdr *h)
{
	h->model = 1;
}
static void
to_object(struct shared_hdr *h)
{
	h->object_id ^= 1;
}
static void
to_parent(struct shared_hdr *h)
{
	h->parent = 0x2223;
}

Test(seal, a_slice_moved_under_another_name_fails_its_tag)
{
	cr_assert_eq(moved(to_key), SHARED_BAD_TAG, "another column (key; salt: the key follows it)");
	cr_assert_eq(moved(to_org), SHARED_BAD_TAG, "another organization");
	cr_assert_eq(moved(to_old_gen), SHARED_BAD_TAG, "another generation");
	cr_assert_eq(moved(to_shard), SHARED_BAD_TAG, "another shard");
	cr_assert_eq(moved(to_cache), SHARED_BAD_TAG, "another cache");
	cr_assert_eq(moved(to_start), SHARED_BAD_TAG, "another place in the prompt");
	cr_assert_eq(moved(to_layout), SHARED_BAD_TAG, "another layout");
	cr_assert_eq(moved(to_model), SHARED_BAD_TAG, "another model");
	cr_assert_eq(moved(to_object), SHARED_BAD_TAG, "another object id");
	cr_assert_eq(moved(to_parent), SHARED_BAD_TAG, "another parent");
}

Test(seal, keys_rings_and_plain_slices)
{
	struct seal_key a = doc_key(0), b = doc_key(1);
	struct seal_ring only_b = {.cur = b}, b_then_a = {.cur = b, .old = a};
	uint8_t obj[256], plain[256];
	size_t n = seal_into(obj, slice_hdr(), &a), pn;
	struct shared_hdr h = slice_hdr();
	uint8_t copy[256];

	cr_assert_neq(a.id, b.id);
	memcpy(copy, obj, n);
	cr_assert_eq(open_obj(copy, n, &only_b), SHARED_BAD_KEY, "another key: not held");
	memcpy(copy, obj, n);
	cr_assert_eq(open_obj(copy, n, NULL), SHARED_BAD_SEALED, "no key file: a sealed slice");
	memcpy(copy, obj, n);
	cr_assert_eq(open_obj(copy, n, &b_then_a), SHARED_OK, "rotation: the key before still opens");
	cr_assert_arr_eq(copy + SHARED_HDR_LEN, payload, sizeof(payload));
	/* Another key that claims the id of the one held: its tag fails. */
	{
		struct seal_key forged = b;
		struct seal_ring ring = {.cur = a};

		forged.id = a.id;
		n = seal_into(copy, slice_hdr(), &forged);
		cr_assert_eq(open_obj(copy, n, &ring), SHARED_BAD_TAG, "a key under another's id");
	}
	/* A plain slice where the level is sealed; and where it is not. */
	shared_hdr_encode(plain, &h, payload);
	memcpy(plain + SHARED_HDR_LEN, payload, sizeof(payload));
	pn = SHARED_HDR_LEN + sizeof(payload);
	cr_assert_eq(open_obj(plain, pn, &only_b), SHARED_BAD_UNSEALED);
	cr_assert_eq(open_obj(plain, pn, NULL), SHARED_OK);
}

Test(seal, a_record_is_never_sealed)
{
	struct seal_key k = doc_key(0);
	struct shared_hdr h = slice_hdr();
	uint8_t obj[256];

	h.kind = SHARED_RECORD;
	h.payload_len = 0;
	h.bytes_per_token = 0;
	cr_assert_eq(shared_slice_seal(&h, obj, &k), -1);
	/* And a record that says it is sealed is a bad format. */
	h.version = SHARED_OBJ_VERSION_SEALED;
	shared_hdr_encode(obj, &h, NULL);
	cr_assert_eq(shared_obj_decode(obj, SHARED_HDR_LEN, &h), SHARED_BAD_FORMAT);
}

Test(seal, a_random_nonce_each_time)
{
	struct seal_key k = doc_key(0);
	struct shared_hdr h1 = slice_hdr(), h2 = slice_hdr();
	uint8_t p1[24], p2[24];

	memcpy(p1, payload, 8);
	memcpy(p2, payload, 8);
	cr_assert_eq(shared_slice_seal(&h1, p1, &k), 0);
	cr_assert_eq(shared_slice_seal(&h2, p2, &k), 0);
	cr_assert_arr_neq(h1.nonce, h2.nonce, 12, "two seals, one nonce");
	cr_assert_arr_neq(p1, p2, 24, "two seals, one ciphertext");
	cr_assert_eq(h1.payload_len, 24);
}

/* ---- The master key file ------------------------------------------------ */

static char dir[64];

static void
mkdir_tmp(void)
{
	tmpdir_make(dir, sizeof(dir), "kvss-seal");
}

static void
rm_tmp(void)
{
	tmpdir_remove(dir);
}

/* Write @p n bytes of @p b to DIR/NAME with @p mode: its path. */
static const char *
put(const char *name, const void *b, size_t n, mode_t mode)
{
	static char path[128];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, b, n), (ssize_t)n);
	close(fd);
	cr_assert_eq(chmod(path, mode), 0);
	return path;
}

static int
load(const char *path, char *err)
{
	struct seal_key k;

	return seal_key_load(path, &k, err, 256);
}

Test(seal, a_good_key_file_in_either_form, .init = mkdir_tmp, .fini = rm_tmp)
{
	static const char hex[] = "000102030405060708090a0b0c0d0e0f101112131415161718191A1B1C1D1E1F\n";
	uint8_t raw[32];
	struct seal_key k1, k2;
	char err[256];
	unsigned int i;

	for (i = 0; i < 32; i++)
		raw[i] = (uint8_t)i;
	cr_assert_eq(seal_key_load(put("raw", raw, 32, 0600), &k1, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(seal_key_load(put("hex", hex, 65, 0400), &k2, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(seal_key_load(put("hex64", hex, 64, 0600), &k2, err, sizeof(err)), 0, "%s", err);
	cr_assert_arr_eq(k1.key, k2.key, 32, "the two forms read differently");
	cr_assert_eq(k1.id, 0xd78800a2u);
}

/* @p path refused, the message naming it and saying @p why. */
static void
refused(const char *path, const char *why)
{
	char err[256] = "";

	cr_assert_eq(load(path, err), -1, "%s: accepted", path);
	cr_assert(strstr(err, path) != NULL, "the message does not name the file: %s", err);
	cr_assert(strstr(err, why) != NULL, "the message does not say '%s': %s", why, err);
}

Test(seal, hostile_key_files_are_refused, .init = mkdir_tmp, .fini = rm_tmp)
{
	uint8_t raw[66];
	char path[128], link[128];
	const char *p;

	memset(raw, 'a', sizeof(raw));
	snprintf(path, sizeof(path), "%s/missing", dir);
	refused(path, "No such file");
	refused(put("short", raw, 31, 0600), "31 bytes");
	refused(put("long", raw, 33, 0600), "33 bytes");
	refused(put("empty", raw, 0, 0600), "0 bytes");
	refused(put("hex66", raw, 66, 0600), "66 bytes");
	raw[64] = 'x';
	refused(put("hex65", raw, 65, 0600), "64 hexadecimal digits then byte 0x78 at 64");
	memcpy(raw + 64, "\r\n", 2); /* a key written on Windows */
	refused(put("crlf", raw, 66, 0600), "64 hexadecimal digits then byte 0xd at 64");
	raw[63] = '\n'; /* one digit short */
	refused(put("hex63", raw, 64, 0600), "63 hexadecimal digits then byte 0xa at 63");
	memcpy(raw, "zz", 2);
	refused(put("nothex", raw, 64, 0600), "0 hexadecimal digits then byte 0x7a at 0");
	/* A key of zeros: its id is public, and every key derived from it. */
	memset(raw, 0, sizeof(raw));
	refused(put("zeros", raw, 32, 0600), "a key of zeros is no secret");
	memset(raw, '0', 64);
	raw[64] = '\n';
	refused(put("zeroshex", raw, 65, 0600), "a key of zeros is no secret");
	memset(raw, 'a', sizeof(raw));
	p = put("open", raw, 32, 0644);
	refused(p, "mode 0644");
	p = put("group", raw, 32, 0640);
	refused(p, "mode 0640");
	p = put("theirs", raw, 32, 0600);
	cr_assert_eq(chown(p, 4242, 4242), 0);
	refused(p, "owned by uid 4242");
	p = put("target", raw, 32, 0600);
	snprintf(link, sizeof(link), "%s/link", dir);
	cr_assert_eq(symlink(p, link), 0);
	refused(link, "symbolic link");
	snprintf(path, sizeof(path), "%s/fifo", dir);
	cr_assert_eq(mkfifo(path, 0600), 0);
	refused(path, "not a regular file"); /* and it returned: no wait for a writer */
	refused(dir, "not a regular file");
	refused("/dev/zero", "not a regular file");
}
