/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * kvss-udp-client's encoder and decoder (ucwire.h), from docs/PROTOCOL.md
 * sections 2, 3 and 6. Byte access is spelled out byte by byte: nothing
 * here depends on the host's byte order or alignment.
 */
#include "ucwire.h"

#include <string.h>

#include <xxhash.h>

static void
st16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

static void
st32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void
st64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint16_t
ld16(const uint8_t *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

static uint32_t
ld32(const uint8_t *p)
{
	uint32_t v = 0;

	for (int i = 3; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static uint64_t
ld64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

/* The 32-byte header (section 2) for a body of @p body_len bytes: 0 when it does not fit. */
static size_t
put_hdr(uint8_t *p, size_t cap, const struct uc_hdr *h, uint16_t count, size_t body_len)
{
	if (cap < UC_HDR || body_len > cap - UC_HDR || body_len > UINT32_MAX)
		return 0;
	memset(p, 0, UC_HDR + body_len);
	memcpy(p, "KVSS", 4);
	p[4] = UC_VERSION;
	p[5] = h->type;
	st16(p + 6, h->flags);
	st32(p + 8, h->model);
	st16(p + 12, h->shard);
	st16(p + 14, count);
	st32(p + 16, h->epoch);
	st32(p + 20, (uint32_t)body_len);
	st64(p + 24, h->seq);
	return UC_HDR + body_len;
}

static struct uc_hdr
typed(const struct uc_hdr *h, uint8_t type)
{
	struct uc_hdr t = *h;

	t.type = type;
	return t;
}

size_t
uc_build_hello(uint8_t *p, size_t cap, const struct uc_hdr *h)
{
	struct uc_hdr t = typed(h, UC_HELLO);

	t.seq = 0;
	return put_hdr(p, cap, &t, 0, 0);
}

size_t
uc_build_reserve(uint8_t *p, size_t cap, const struct uc_hdr *h, const struct uc_reserve *r,
		 unsigned int n)
{
	struct uc_hdr t = typed(h, UC_RESERVE);
	size_t len;

	if (n > UINT16_MAX || (len = put_hdr(p, cap, &t, (uint16_t)n, (size_t)n * UC_RESERVE_LEN)) == 0)
		return 0;
	for (unsigned int i = 0; i < n; i++) {
		uint8_t *q = p + UC_HDR + (size_t)i * UC_RESERVE_LEN;

		st64(q, r[i].prompt);
		st64(q + 8, r[i].continue_id);
		st32(q + 16, r[i].start);
		st32(q + 20, r[i].tokens);
		st16(q + 24, r[i].cache);
	}
	return len;
}

size_t
uc_build_evict(uint8_t *p, size_t cap, const struct uc_hdr *h, uint64_t batch, uint16_t ncaches,
	       uint16_t g, const struct uc_entry *e)
{
	struct uc_hdr t = typed(h, UC_EVICT);
	size_t n = (size_t)ncaches * g, len;

	if (n > UINT16_MAX ||
	    (len = put_hdr(p, cap, &t, (uint16_t)n, UC_EVICT_HDR_LEN + n * UC_EVICT_ENTRY_LEN)) == 0)
		return 0;
	st64(p + UC_HDR, batch);
	st16(p + UC_HDR + 8, ncaches);
	st16(p + UC_HDR + 10, g);
	for (size_t i = 0; i < n; i++) {
		uint8_t *q = p + UC_HDR + UC_EVICT_HDR_LEN + i * UC_EVICT_ENTRY_LEN;

		st64(q, e[i].prompt);
		st32(q + 8, e[i].token);
		st32(q + 12, e[i].sequence);
	}
	return len;
}

size_t
uc_build_refill(uint8_t *p, size_t cap, const struct uc_hdr *h, const struct uc_refill_req *r,
		unsigned int n)
{
	struct uc_hdr t = typed(h, UC_REFILL);
	size_t body = 0, len, off = UC_HDR;

	for (unsigned int i = 0; i < n; i++)
		body += UC_REFILL_REQ_LEN + (size_t)r[i].nchunks * UC_CHUNK_LEN;
	if (n > UINT16_MAX || (len = put_hdr(p, cap, &t, (uint16_t)n, body)) == 0)
		return 0;
	for (unsigned int i = 0; i < n; i++) {
		st64(p + off, r[i].refill_id);
		st64(p + off + 8, r[i].evict_count);
		st32(p + off + 16, r[i].sequence);
		st32(p + off + 20, r[i].cache_idx);
		st16(p + off + 24, r[i].cache);
		st16(p + off + 26, r[i].nchunks);
		off += UC_REFILL_REQ_LEN;
		for (unsigned int k = 0; k < r[i].nchunks; k++, off += UC_CHUNK_LEN) {
			st64(p + off, r[i].chunk[k].prompt);
			st32(p + off + 8, r[i].chunk[k].start);
			st32(p + off + 12, r[i].chunk[k].tokens);
		}
	}
	return len;
}

size_t
uc_build_delete(uint8_t *p, size_t cap, const struct uc_hdr *h, const struct uc_delete *d,
		unsigned int n)
{
	struct uc_hdr t = typed(h, UC_DELETE);
	size_t len;

	if (n > UINT16_MAX || (len = put_hdr(p, cap, &t, (uint16_t)n, (size_t)n * UC_DELETE_LEN)) == 0)
		return 0;
	for (unsigned int i = 0; i < n; i++) {
		uint8_t *q = p + UC_HDR + (size_t)i * UC_DELETE_LEN;

		st64(q, d[i].prompt);
		st64(q + 8, d[i].evict_count);
		st32(q + 16, d[i].start);
		st32(q + 20, d[i].end);
		st16(q + 24, d[i].cache);
	}
	return len;
}

size_t
uc_build_report_ack(uint8_t *p, size_t cap, const struct uc_hdr *h, uint64_t cum)
{
	struct uc_hdr t = typed(h, UC_REPORT_ACK);
	size_t len;

	t.seq = 0;
	if ((len = put_hdr(p, cap, &t, 0, UC_ACK_LEN)) == 0)
		return 0;
	st64(p + UC_HDR, cum);
	return len;
}

size_t
uc_build_evict_data(uint8_t *p, size_t cap, const struct uc_hdr *h, const struct uc_data_hdr *d,
		    const uint8_t *bytes, uint32_t len)
{
	struct uc_hdr t = typed(h, UC_EVICT_DATA);
	size_t n;

	t.seq = 0;
	if ((n = put_hdr(p, cap, &t, 0, (size_t)UC_DATA_HDR_LEN + len)) == 0)
		return 0;
	st64(p + UC_HDR, d->batch);
	st16(p + UC_HDR + 8, d->cache);
	st32(p + UC_HDR + 12, d->offset);
	st32(p + UC_HDR + 16, d->stream_len);
	st32(p + UC_HDR + 20, d->driver_epoch);
	memcpy(p + UC_HDR + UC_DATA_HDR_LEN, bytes, len);
	return n;
}

/* The body a header of @p type with @p count records must have: 0 fixed, else checked here. */
static const char *
check_body(const struct uc_hdr *h, const uint8_t *b)
{
	uint64_t n = h->count, len = h->body_len;

	switch (h->type) {
	case UC_HELLO:
		return n == 0 && len == 0 ? NULL : "bad body_len";
	case UC_ACK:
	case UC_REPORT_ACK:
		return n == 0 && len == UC_ACK_LEN ? NULL : "bad body_len";
	case UC_RESERVE:
		return len == n * UC_RESERVE_LEN ? NULL : "bad count";
	case UC_DELETE:
		return len == n * UC_DELETE_LEN ? NULL : "bad count";
	case UC_ERROR:
		return len == n * UC_ERROR_LEN ? NULL : "bad count";
	case UC_REFILL_DONE:
		return len == n * UC_REFILL_DONE_LEN ? NULL : "bad count";
	case UC_TOKEN_LOST:
		return len == n * UC_LOST_LEN ? NULL : "bad count";
	case UC_L2_DONE:
		return len == n * 24 ? NULL : "bad count";
	case UC_L2_INVENTORY:
		return len == 16 + n * 64 ? NULL : "bad count";
	case UC_STATUS:
		return len == UC_STATUS_LEN + n * UC_CACHE_INFO_LEN ? NULL : "bad count";
	case UC_EVICT:
		if (len < UC_EVICT_HDR_LEN)
			return "bad body_len";
		if ((uint64_t)ld16(b + 8) * ld16(b + 10) != n ||
		    len != UC_EVICT_HDR_LEN + n * UC_EVICT_ENTRY_LEN)
			return "bad count";
		return NULL;
	case UC_REFILL: {
		uint64_t off = 0;

		for (uint64_t i = 0; i < n; i++) {
			if (len - off < UC_REFILL_REQ_LEN)
				return "bad count";
			off += UC_REFILL_REQ_LEN + (uint64_t)ld16(b + off + 26) * UC_CHUNK_LEN;
			if (off > len)
				return "bad count";
		}
		return off == len ? NULL : "bad count";
	}
	case UC_EVICT_DATA:
	case UC_REFILL_DATA: {
		uint64_t hl = h->type == UC_EVICT_DATA ? UC_DATA_HDR_LEN : UC_REFILL_DATA_HDR_LEN;
		uint64_t off, slen;

		if (n != 0 || len < hl)
			return "bad body_len";
		off = ld32(b + (h->type == UC_EVICT_DATA ? 12 : 20));
		slen = ld32(b + (h->type == UC_EVICT_DATA ? 16 : 24));
		return off + (len - hl) <= slen ? NULL : "bad data range";
	}
	default:
		return "bad type";
	}
}

const char *
uc_parse(const uint8_t *p, size_t len, struct uc_msg *m)
{
	if (len < UC_HDR)
		return "truncated";
	if (memcmp(p, "KVSS", 4) != 0)
		return "bad magic";
	if (p[4] != UC_VERSION)
		return "bad version";
	m->h.type = p[5];
	m->h.flags = ld16(p + 6);
	m->h.model = ld32(p + 8);
	m->h.shard = ld16(p + 12);
	m->h.count = ld16(p + 14);
	m->h.epoch = ld32(p + 16);
	m->h.body_len = ld32(p + 20);
	m->h.seq = ld64(p + 24);
	if (m->h.body_len != len - UC_HDR)
		return "bad body_len";
	m->body = p + UC_HDR;
	return check_body(&m->h, m->body);
}

void
uc_get_status(const struct uc_msg *m, struct uc_status *s)
{
	const uint8_t *b = m->body;

	s->batches_complete = ld64(b);
	s->reports = ld64(b + 8);
	s->uptime_ns = ld64(b + 16);
	s->flags = ld32(b + 24);
	s->driver_epoch = ld32(b + 28);
}

void
uc_get_cache_info(const struct uc_msg *m, unsigned int i, struct uc_cache_info *c)
{
	const uint8_t *b = m->body + UC_STATUS_LEN + (size_t)i * UC_CACHE_INFO_LEN;

	c->cache = ld16(b);
	c->buffers = ld16(b + 2);
	c->bytes_per_token = ld32(b + 4);
	c->capacity = ld64(b + 8);
	c->stored = ld64(b + 16);
	c->prompts = ld64(b + 24);
	c->l2_capacity = ld64(b + 32);
	c->l2_stored = ld64(b + 40);
}

void
uc_get_ack(const struct uc_msg *m, struct uc_ack *a)
{
	a->cum_seq = ld64(m->body);
	a->recv_seq = ld64(m->body + 8);
}

void
uc_get_error(const struct uc_msg *m, unsigned int i, struct uc_error *e)
{
	const uint8_t *b = m->body + (size_t)i * UC_ERROR_LEN;

	e->seq = ld64(b);
	e->prompt = ld64(b + 8);
	e->token = ld32(b + 16);
	e->cache = ld16(b + 20);
	e->code = ld16(b + 22);
}

void
uc_get_refill_done(const struct uc_msg *m, unsigned int i, struct uc_refill_done *d)
{
	const uint8_t *b = m->body + (size_t)i * UC_REFILL_DONE_LEN;

	d->refill_id = ld64(b);
	d->tokens = ld32(b + 8);
	d->status = ld32(b + 12);
	d->bytes = ld64(b + 16);
}

void
uc_get_lost(const struct uc_msg *m, unsigned int i, struct uc_lost *l)
{
	const uint8_t *b = m->body + (size_t)i * UC_LOST_LEN;

	l->prompt = ld64(b);
	l->token = ld32(b + 8);
	l->tokens = ld32(b + 12);
	l->cache = ld16(b + 16);
}

void
uc_get_refill_data(const struct uc_msg *m, struct uc_refill_data *d)
{
	const uint8_t *b = m->body;

	d->refill_id = ld64(b);
	d->sequence = ld32(b + 8);
	d->cache_idx = ld32(b + 12);
	d->cache = ld16(b + 16);
	d->buffer = ld16(b + 18);
	d->offset = ld32(b + 20);
	d->stream_len = ld32(b + 24);
	d->bytes = b + UC_REFILL_DATA_HDR_LEN;
	d->len = m->h.body_len - UC_REFILL_DATA_HDR_LEN;
}

const char *
uc_err_name(unsigned int code)
{
	static const char *const names[] = {
		"OK",	     "HOLE",	 "LEFT_GROWTH", "DELETE_NOT_RIGHT", "UNKNOWN_PROMPT",
		"RANGE",     "NO_SPACE", "MALFORMED",	"BAD_CACHE",	    "NO_TIER",
		"L2_FAILED", "SHARED_FAILED", "SHARED_BAD", "SHARED_KEY"};

	return code < sizeof(names) / sizeof(names[0]) ? names[code] : "?";
}

uint64_t
uc_ref_isolation(const char *name, size_t len)
{
	return XXH3_64bits_withSeed(name, len, 0);
}

uint64_t
uc_ref_salt(const char *salt, size_t len)
{
	uint64_t h = XXH3_64bits_withSeed(salt, len, 0);

	return h ? h : 1;
}

/* Section 6: xxh3 of "salt", a zero byte and the salt's id, seeded with the isolation id. */
uint64_t
uc_ref_root(uint64_t isolation, uint64_t salt_id)
{
	uint8_t b[13];

	if (salt_id == 0)
		return isolation;
	memcpy(b, "salt", 5); /* its zero byte too */
	st64(b + 5, salt_id);
	return XXH3_64bits_withSeed(b, sizeof(b), isolation);
}

uint64_t
uc_ref_next(uint64_t prev, uint32_t token)
{
	uint8_t b[4];

	st32(b, token);
	return XXH3_64bits_withSeed(b, sizeof(b), prev);
}

void
uc_ref_prompt(uint64_t root, uint64_t seed, uint64_t n, uint64_t *h)
{
	uint64_t x = seed;

	for (uint64_t i = 0; i < n; i++) {
		uint64_t z = (x += 0x9E3779B97F4A7C15ULL);
		uint32_t tok;

		z = (z ^ (z >> 31)) * 0xD6E8FEB86659FD93ULL;
		tok = (uint32_t)(1 + (z >> 32) % 128000);
		h[i] = uc_ref_next(i == 0 ? root : h[i - 1], tok);
	}
}

/* Section 6: a splitmix64 stream from h(i) and the slot, written little-endian. */
void
uc_ref_bytes(uint64_t h, uint32_t model, uint32_t shard, uint32_t cache, uint64_t off,
	     uint8_t *out, size_t len)
{
	const uint64_t golden = 0x9E3779B97F4A7C15ULL;
	uint64_t x = h ^ (golden * (1 + (uint64_t)cache + 256 * (uint64_t)shard + 65536 * (uint64_t)model));
	uint64_t k = off / 8, end = off + len;
	uint8_t w[8];

	/* Word k is the (k+1)th step of the generator from x. */
	x += k * golden;
	for (uint64_t pos = k * 8; pos < end; pos += 8) {
		uint64_t z;

		x += golden;
		z = x;
		z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
		z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
		z ^= z >> 31;
		st64(w, z);
		for (unsigned int j = 0; j < 8; j++)
			if (pos + j >= off && pos + j < end)
				out[pos + j - off] = w[j];
	}
}
