/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The shared level's object format (shared_obj.h): encode, name, decode and
 * check. Everything read here came from another machine: every length is
 * bounded before it is used, every reserved byte must be zero, and both
 * checksums are seeded so that a checksum of other bytes (a slice of
 * another column renamed, a header copied over another payload) fails.
 *
 * Header (128 bytes, little-endian):
 *   0 u32 magic "KVSO"   4 u16 version   6 u16 kind
 *   8 u64 org           16 u64 key      24 u64 parent   32 u64 object_id
 *  40 u64 first_use_ns  48 u64 written_ns
 *  56 u32 gen_global    60 u32 gen_org  64 u32 layout
 *  68 u16 model         70 u16 shard    72 u16 cache    74 u16 reserved
 *  76 u32 start         80 u32 tokens   84 u32 bytes_per_token
 *  88 u32 payload_len   92 u32 reserved (a sealed slice: key_id)
 *  96 u64 payload_xxh3 (seed: object_id)
 * 104..119 reserved (zero; a sealed slice: its nonce at 104..115)
 * 120 u64 header_xxh3 of bytes 0..119 (seed: SHARED_HDR_SEED)
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <xxhash.h>

#include "proto.h"
#include "shared_obj.h"

#define SHARED_HDR_SEED 0x6b7673732d6f626aull /* "kvss-obj" */
#define SHARED_ID_SEED 0x6b7673732d696421ull  /* "kvss-id!" */
#define SHARED_LAYOUT_SEED 0x6b7673732d6c6179ull

static const char *const bad_name[] = {
	"ok",
#define SHARED_BAD_NAME(n, s) #n,
	SHARED_BAD_REASONS(SHARED_BAD_NAME)
#undef SHARED_BAD_NAME
};

static const char *const bad_text[] = {
	"ok",
#define SHARED_BAD_TEXT(n, s) s,
	SHARED_BAD_REASONS(SHARED_BAD_TEXT)
#undef SHARED_BAD_TEXT
};

const char *
shared_bad_name(enum shared_bad why)
{
	static char lower[SHARED_BAD_COUNT][16];
	const char *s;
	size_t i;

	if ((unsigned int)why >= SHARED_BAD_COUNT)
		return "unknown";
	if (why == SHARED_OK)
		return "ok";
	if (lower[why][0] == '\0') {
		s = bad_name[why];
		for (i = 0; s[i] != '\0' && i + 1 < sizeof(lower[why]); i++)
			lower[why][i] = (char)(s[i] >= 'A' && s[i] <= 'Z' ? s[i] - 'A' + 'a' : s[i]);
	}
	return lower[why];
}

const char *
shared_bad_text(enum shared_bad why)
{
	return (unsigned int)why < SHARED_BAD_COUNT ? bad_text[why] : "unknown";
}

/* ---- Ids and names --------------------------------------------------------- */

uint32_t
shared_layout(uint16_t model, const char *name, uint16_t num_shards, uint32_t column_tokens,
	      uint16_t nvalues, const uint32_t *bpt)
{
	uint8_t b[10 + 4 * 64 + 1 + 255];
	size_t n = 0, len = strnlen(name, 255);
	uint16_t c;

	if (nvalues > 64)
		nvalues = 64;
	proto_st16(b, model);
	proto_st16(b + 2, num_shards);
	proto_st32(b + 4, column_tokens);
	proto_st16(b + 8, nvalues);
	n = 10;
	for (c = 0; c < nvalues; c++, n += 4)
		proto_st32(b + n, bpt[c]);
	b[n++] = (uint8_t)len;
	memcpy(b + n, name, len);
	n += len;
	return (uint32_t)XXH3_64bits_withSeed(b, n, SHARED_LAYOUT_SEED);
}

uint64_t
shared_object_id(uint64_t org, uint64_t key, uint32_t gen_global, uint32_t gen_org, uint32_t layout)
{
	uint8_t b[28];
	uint64_t id;

	proto_st64(b, org);
	proto_st64(b + 8, key);
	proto_st32(b + 16, gen_global);
	proto_st32(b + 20, gen_org);
	proto_st32(b + 24, layout);
	id = XXH3_64bits_withSeed(b, sizeof(b), SHARED_ID_SEED);
	return id != 0 ? id : 1;
}

int
shared_ns(char *ns, uint64_t org)
{
	return snprintf(ns, SHARED_NS_MAX, "o%016" PRIx64, org);
}

int
shared_slice_name(char *name, uint64_t object_id, uint16_t shard, uint16_t cache)
{
	return snprintf(name, SHARED_NAME_MAX, "%016" PRIx64 ".s%u.c%u", object_id, shard, cache);
}

int
shared_record_name(char *name, uint64_t object_id)
{
	return snprintf(name, SHARED_NAME_MAX, "%016" PRIx64 ".r", object_id);
}

/* Exactly 16 lowercase hex digits; -1 otherwise. */
static int
hex16(const char *s, uint64_t *v)
{
	uint64_t x = 0;
	int i;

	for (i = 0; i < 16; i++) {
		char ch = s[i];

		if (ch >= '0' && ch <= '9')
			x = x << 4 | (uint64_t)(ch - '0');
		else if (ch >= 'a' && ch <= 'f')
			x = x << 4 | (uint64_t)(ch - 'a' + 10);
		else
			return -1;
	}
	*v = x;
	return 0;
}

/* A decimal below 65536 with no leading zero, ending at @p end's char; -1 otherwise. */
static int
dec16(const char *s, char end, uint16_t *v, const char **rest)
{
	uint32_t x = 0;
	int n = 0;

	while (s[n] >= '0' && s[n] <= '9') {
		x = x * 10 + (uint32_t)(s[n] - '0');
		if (++n > 5 || x > 0xffff)
			return -1;
	}
	if (n == 0 || (n > 1 && s[0] == '0') || s[n] != end)
		return -1;
	*v = (uint16_t)x;
	*rest = s + n;
	return 0;
}

int
shared_parse_name(const char *name, uint64_t *object_id, uint16_t *shard, uint16_t *cache)
{
	const char *p;

	if (strnlen(name, SHARED_NAME_MAX) >= SHARED_NAME_MAX || hex16(name, object_id) != 0 ||
	    name[16] != '.')
		return -1;
	p = name + 17;
	if (p[0] == 'r' && p[1] == '\0') {
		*shard = *cache = 0xffff;
		return 0;
	}
	if (p[0] != 's' || dec16(p + 1, '.', shard, &p) != 0 || p[1] != 'c' ||
	    dec16(p + 2, '\0', cache, &p) != 0)
		return -1;
	return 0;
}

int
shared_parse_ns(const char *ns, uint64_t *org)
{
	if (ns[0] != 'o' || strnlen(ns, SHARED_NS_MAX) != 17)
		return -1;
	return hex16(ns + 1, org);
}

/* ---- Headers --------------------------------------------------------------- */

/*
 * The fields every header starts with, magic to bytes per token (bytes 0 to
 * 87 of @p out): what the header and a sealed slice's additional data share.
 */
static void
hdr_fields(uint8_t *out, const struct shared_hdr *h, uint16_t version)
{
	proto_st32(out + 0, SHARED_OBJ_MAGIC);
	proto_st16(out + 4, version);
	proto_st16(out + 6, h->kind);
	proto_st64(out + 8, h->org);
	proto_st64(out + 16, h->key);
	proto_st64(out + 24, h->parent);
	proto_st64(out + 32, h->object_id);
	proto_st64(out + 40, h->first_use_ns);
	proto_st64(out + 48, h->written_ns);
	proto_st32(out + 56, h->gen_global);
	proto_st32(out + 60, h->gen_org);
	proto_st32(out + 64, h->layout);
	proto_st16(out + 68, h->model);
	proto_st16(out + 70, h->shard);
	proto_st16(out + 72, h->cache);
	proto_st16(out + 74, 0); /* reserved */
	proto_st32(out + 76, h->start);
	proto_st32(out + 80, h->tokens);
	proto_st32(out + 84, h->bytes_per_token);
}

void
shared_hdr_encode(uint8_t *out, struct shared_hdr *h, const void *payload)
{
	memset(out, 0, SHARED_HDR_LEN);
	h->payload_xxh3 = XXH3_64bits_withSeed(payload != NULL ? payload : out, h->payload_len,
					       h->object_id);
	if (h->version != SHARED_OBJ_VERSION_SEALED)
		h->version = SHARED_OBJ_VERSION;
	hdr_fields(out, h, h->version);
	proto_st32(out + 88, h->payload_len);
	proto_st64(out + 96, h->payload_xxh3);
	if (h->version == SHARED_OBJ_VERSION_SEALED) {
		proto_st32(out + 92, h->key_id);
		memcpy(out + 104, h->nonce, SHARED_SEAL_NONCE_LEN);
	}
	proto_st64(out + 120, XXH3_64bits_withSeed(out, 120, SHARED_HDR_SEED));
}

void
shared_hdr_aad(const struct shared_hdr *h, uint8_t aad[SHARED_AAD_LEN])
{
	/* The header's first 88 bytes as written, then the key id in place of
	 * the payload's length (which the tokens and the tag fix). A plain
	 * header's version is written as 1 (shared_hdr_encode's rule). */
	hdr_fields(aad, h, h->version == SHARED_OBJ_VERSION_SEALED ? SHARED_OBJ_VERSION_SEALED
								   : SHARED_OBJ_VERSION);
	proto_st32(aad + 88, h->key_id);
}

static bool
zero(const uint8_t *p, size_t n)
{
	while (n-- > 0)
		if (*p++ != 0)
			return false;
	return true;
}

enum shared_bad
shared_obj_decode(const uint8_t *buf, size_t len, struct shared_hdr *h)
{
	memset(h, 0, sizeof(*h));
	if (len < SHARED_HDR_LEN)
		return SHARED_BAD_SHORT;
	if (proto_ld32(buf) != SHARED_OBJ_MAGIC || (proto_ld16(buf + 4) != SHARED_OBJ_VERSION &&
						    proto_ld16(buf + 4) != SHARED_OBJ_VERSION_SEALED))
		return SHARED_BAD_MAGIC;
	if (proto_ld64(buf + 120) != XXH3_64bits_withSeed(buf, 120, SHARED_HDR_SEED))
		return SHARED_BAD_HEADER_SUM;
	h->kind = proto_ld16(buf + 6);
	h->org = proto_ld64(buf + 8);
	h->key = proto_ld64(buf + 16);
	h->parent = proto_ld64(buf + 24);
	h->object_id = proto_ld64(buf + 32);
	h->first_use_ns = proto_ld64(buf + 40);
	h->written_ns = proto_ld64(buf + 48);
	h->gen_global = proto_ld32(buf + 56);
	h->gen_org = proto_ld32(buf + 60);
	h->layout = proto_ld32(buf + 64);
	h->model = proto_ld16(buf + 68);
	h->shard = proto_ld16(buf + 70);
	h->cache = proto_ld16(buf + 72);
	h->start = proto_ld32(buf + 76);
	h->tokens = proto_ld32(buf + 80);
	h->bytes_per_token = proto_ld32(buf + 84);
	h->payload_len = proto_ld32(buf + 88);
	h->payload_xxh3 = proto_ld64(buf + 96);
	h->version = proto_ld16(buf + 4);
	if (h->version == SHARED_OBJ_VERSION_SEALED) {
		h->key_id = proto_ld32(buf + 92);
		memcpy(h->nonce, buf + 104, SHARED_SEAL_NONCE_LEN);
	}
	/* Only a slice is sealed: a record carries no KV byte. */
	if ((h->kind != SHARED_SLICE && h->kind != SHARED_RECORD) || proto_ld16(buf + 74) != 0 ||
	    (h->version == SHARED_OBJ_VERSION_SEALED ?
		     h->kind != SHARED_SLICE || !zero(buf + 116, 4) :
		     proto_ld32(buf + 92) != 0 || !zero(buf + 104, 16)) ||
	    h->key == 0 || h->object_id == 0 || h->tokens == 0 ||
	    h->payload_len > SHARED_PAYLOAD_MAX)
		return SHARED_BAD_FORMAT;
	/* A slice is exactly its tokens' bytes (and a sealed one its tag); a
	 * record has none. */
	if (h->kind == SHARED_SLICE ?
		    (uint64_t)h->tokens * h->bytes_per_token +
				    (h->version == SHARED_OBJ_VERSION_SEALED ? 16u : 0u) !=
			    h->payload_len :
		    h->payload_len != 0 || h->bytes_per_token != 0)
		return SHARED_BAD_FORMAT;
	if (len - SHARED_HDR_LEN != h->payload_len)
		return len - SHARED_HDR_LEN < h->payload_len ? SHARED_BAD_SHORT : SHARED_BAD_FORMAT;
	if (XXH3_64bits_withSeed(buf + SHARED_HDR_LEN, h->payload_len, h->object_id) !=
	    h->payload_xxh3)
		return SHARED_BAD_PAYLOAD_SUM;
	return SHARED_OK;
}

enum shared_bad
shared_hdr_match(const struct shared_hdr *got, const struct shared_hdr *want)
{
	if (got->kind != want->kind || got->org != want->org || got->key != want->key ||
	    got->object_id != want->object_id || got->gen_global != want->gen_global ||
	    got->gen_org != want->gen_org || got->layout != want->layout ||
	    got->model != want->model || got->parent != want->parent)
		return SHARED_BAD_IDENTITY;
	if (got->shard != want->shard || got->cache != want->cache || got->start != want->start ||
	    got->tokens != want->tokens || got->bytes_per_token != want->bytes_per_token)
		return SHARED_BAD_GEOMETRY;
	if (want->first_use_ns > got->first_use_ns &&
	    want->first_use_ns - got->first_use_ns > SHARED_SKEW_NS)
		return SHARED_BAD_STALE;
	return SHARED_OK;
}

int
shared_gen_parse(const char *b, size_t n, uint32_t *gen)
{
	uint64_t v = 0;
	size_t i;

	if (n > 0 && b[n - 1] == '\n')
		n--;
	if (n == 0 || n > 10 || (b[0] == '0' && n > 1))
		return -EBADMSG;
	for (i = 0; i < n; i++) {
		if (b[i] < '0' || b[i] > '9')
			return -EBADMSG;
		v = v * 10 + (uint64_t)(b[i] - '0');
	}
	if (v > UINT32_MAX)
		return -EBADMSG;
	if (v > SHARED_GEN_MAX)
		return -ERANGE;
	*gen = (uint32_t)v;
	return 0;
}

enum shared_bad
shared_hdr_times(const struct shared_hdr *h, uint64_t now_ns)
{
	uint64_t limit = now_ns + SHARED_SKEW_NS;

	if (limit < now_ns) /* a clock near the end of time: nothing is ahead of it */
		return SHARED_OK;
	return h->first_use_ns > limit || h->written_ns > limit ? SHARED_BAD_FUTURE : SHARED_OK;
}

enum shared_bad
shared_record_check(const uint8_t *buf, uint32_t len, uint64_t org, uint64_t object_id,
		    uint64_t now_ns, struct shared_hdr *h)
{
	enum shared_bad why = shared_obj_decode(buf, len, h);

	if (why != SHARED_OK)
		return why;
	if (h->kind != SHARED_RECORD || h->org != org || h->object_id != object_id)
		return SHARED_BAD_IDENTITY;
	return shared_hdr_times(h, now_ns);
}

enum shared_gen_verdict
shared_gen_judge(uint32_t highest, int rc, uint32_t got)
{
	if (rc == -ENOENT) {
		if (highest > 0)
			return SHARED_GEN_ABSENT;
		return SHARED_GEN_SAME; /* never reset: generation 0 */
	}
	if (rc == -EBADMSG || rc == -ERANGE)
		return SHARED_GEN_BROKEN;
	if (rc != 0)
		return SHARED_GEN_UNREAD;
	if (got > SHARED_GEN_MAX)
		return SHARED_GEN_BROKEN;
	if (got < highest)
		return SHARED_GEN_LOWER;
	return got > highest ? SHARED_GEN_UP : SHARED_GEN_SAME;
}

