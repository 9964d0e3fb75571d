/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libFuzzer target: the shard with its state. An input is a
 * driver's and a wafer's acts (fuzz_shard.h: HELLO, RESERVE, EVICT and
 * its EVICT_DATA, REFILL, DELETE, L2_DOWN, L2_UP, L2_DELETE, SH_DOWN,
 * SH_UP, REPORT_ACK, a look at STATUS, control messages as raw bytes, data
 * the shard must drop), a shared level that fails and lies
 * (fuzz_shard_rados.c), with the schedule around them: when the refill
 * lcore runs and where it stops, when time passes, when the frames in
 * flight are freed.
 * The frames go through the shard's own code as kvss runs it: its ingest
 * lcore (kvss_shard_ingest: parse, the control stream, the evict and
 * refill queues, the store), its refill lcore (kvss_shard_refill, refill
 * building), the second tier (the second tier's worker (level.c, level_disk.c) on a real kvdisk
 * file in a 0700 directory under /dev/shm, both unlinked once open, so
 * that not even a crash leaves them) and the shared level's thread
 * (level_shared.c's, over lib/shared's API in memory), under AddressSanitizer
 * and UndefinedBehaviorSanitizer. What the shard sends is checked as it goes
 * and at the end of the input (fuzz_shard_check.c).
 *
 * EAL or not. None was wanted; the shard's code keeps its
 * frames in rte_mbufs from a mempool, hands its refill queue over
 * rte_rings and its tier requests through an rte_mempool and two rings,
 * all of which need EAL's memory. So EAL starts once, in
 * LLVMFuzzerInitialize (--no-pci --no-huge --no-shconf, a file prefix of
 * this process, lcore 0, no port: the rx and tx hooks are the port), and
 * each input then runs on a shard as a process starts it: its state
 * zeroed, a store from kvstore_init, an empty second tier, the first HELLO
 * setting its stream (fuzz_shard_env.c).
 *
 * Determinism. The shard's threads take turns (fuzz_shard_env.c), all of
 * them fibers of this one thread (a turn is a switch of stacks): the
 * ingest lcore is this thread's own stack, and every one of its polls
 * begins in the rx hook, which is this file's scheduler: it takes the input's next acts,
 * gives the refill lcore its turns, lets the tier thread answer what the
 * last poll gave it. The shard's clock runs a million times slow (its hz),
 * so no timeout fires by itself; OP_TIME fires them all at the next poll
 * (batches lost, EVICTs refused NO_SPACE, held data dropped, reports sent
 * again). The race of a refill (reading a prompt while a batch
 * that overwrites it completes) is OP_RUN_REFILL stopping the refill
 * lcore after so many REFILL_DATA frames, the ingest lcore taking the
 * overwrite's data, and the refill going on.
 *
 * The wafer's bytes say where they belong: every 32-byte buffer slice of a
 * token begins with a tag (batch, entry, prompt, token, cache, buffer, and
 * a check over them and the stream) and goes on with bytes that only that
 * tag gives (fz_slice), so a refilled token can be traced byte for byte to
 * one batch's write.
 *
 * At the end of each input the harness drains the shard (time passes
 * until nothing moves), looks (HELLO: STATUS and the inventory) and
 * checks both tiers against the driver's model (fz_check_final).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_mbuf.h>
#include <rte_ring.h>

#include "fuzz_shard.h"
#include "kvss.h"
#include "shard/shard.h"

struct fz_model fz;
bool fz_trace;

#define WIRE_MAX 4096
#define DEFER_MAX 4

static struct {
	const uint8_t *p; /* the input not taken yet */
	size_t left;
	uint8_t cfg;
	unsigned int whead, wtail;
	unsigned int ndefer, defer_most;
	bool defer_next;   /* the frame being sent is to be held back */
	unsigned int idle; /* polls with nothing received, still to give */
	bool time_was;	   /* the last poll fired every timeout: put them back */
	enum { PH_INPUT, PH_DRAIN, PH_LOOK, PH_END } phase;
	unsigned int round, look, still; /* still: drain rounds in a row that changed nothing */
	uint64_t sig; /* the drain's progress */
	/* The buffers last (s_reset zeroes only what an input used of them). */
	struct rte_mbuf *wire[WIRE_MAX]; /* frames for the next polls */
	struct {
		uint8_t p[PROTO_PAYLOAD_MAX];
		uint32_t len;
	} defer[DEFER_MAX]; /* control frames held back (FZ_F_DEFER) */
	uint8_t buf[PROTO_PAYLOAD_MAX];
} S;

static struct fz_refill refills[FZ_MAX_REFILLS];

struct fz_refill *
fz_refill_find(uint64_t id)
{
	return id >= 1 && id <= fz.refill_id && id <= FZ_MAX_REFILLS ? &refills[id - 1] : NULL;
}

/* ---- The wafer's bytes ----------------------------------------------------- */

static inline uint64_t
mix64(uint64_t x)
{
	x += 0x9E3779B97F4A7C15ull;
	x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
	x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
	return x ^ (x >> 31);
}

/*
 * A slice's tag hashes (gen, batch), then (entry, prompt), then (token,
 * cache, buffer), each on the last: the stream of a batch (stream_bytes)
 * hashes the first once, the second once a token, and only the third and
 * the slice's bytes per slice. It is the harness's most called code (every
 * slice of every EVICT_DATA fragment, and of every token refilled, checked).
 * Stored as four 8-byte words, the bytes fz_slice always wrote.
 */
static inline uint64_t
slice_h0(uint16_t gen, uint64_t batch)
{
	return mix64(gen ^ (batch << 16));
}

static inline uint64_t
slice_h1(uint64_t h0, uint16_t idx, uint32_t prompt)
{
	return mix64(h0 ^ ((uint64_t)idx << 32 | prompt));
}

static inline void
slice_put(uint8_t *out, uint64_t h1, uint64_t batch, uint16_t idx, uint32_t prompt, uint32_t token,
	  uint16_t cache, uint16_t buf)
{
	uint64_t h = mix64(h1 ^ ((uint64_t)token << 24 | (uint64_t)cache << 8 | buf));

	proto_st64(out, (uint32_t)batch | (uint64_t)idx << 32 | (uint64_t)(uint16_t)prompt << 48);
	proto_st64(out + 8, token | (uint64_t)(uint8_t)cache << 32 | (uint64_t)(uint8_t)buf << 40 |
				    (uint64_t)(uint16_t)h << 48);
	proto_st64(out + 16, mix64(h + 16));
	proto_st64(out + 24, mix64(h + 24));
}

void
fz_slice(uint8_t *out, uint16_t gen, uint64_t batch, uint16_t idx, uint32_t prompt, uint32_t token,
	 uint16_t cache, uint16_t buf)
{
	slice_put(out, slice_h1(slice_h0(gen, batch), idx, prompt), batch, idx, prompt, token, cache,
		  buf);
}

static uint32_t
bpt(uint16_t cache)
{
	return cache == 0 ? FZ_B0 : FZ_B1;
}

/*
 * Each cache's stream of the batch whose data goes now, its tokens made
 * as fragments need them and kept: a batch's fragments go one after the
 * other (and again: each twice, a retransmission, OP_DATA), and they cut
 * slices in two, so without it most slices were made twice or more. A
 * new batch of that number forgets it (new_batch).
 */
static struct {
	uint64_t b; /* 0: none */
	uint16_t gen;
	uint64_t h0; /* slice_h0 of (gen, b) */
	uint8_t made[FZ_MAX_G];
	uint8_t bytes[FZ_MAX_G * FZ_B0];
} sc[FZ_CACHES];

/* Bytes [off, off + len) of batch @p b's stream of @p cache, as the wafer writes them. */
static void
stream_bytes(uint64_t b, uint16_t cache, uint32_t off, uint32_t len, uint8_t *out)
{
	const struct fz_batch *bt = &fz.batch[b];
	uint32_t B = bpt(cache), t, u;
	__typeof__(sc[0]) *c = &sc[cache];

	if (len == 0)
		return;
	if (c->b != b || c->gen != fz.gen) {
		c->b = b;
		c->gen = fz.gen;
		c->h0 = slice_h0(fz.gen, b);
		memset(c->made, 0, sizeof(c->made));
	}
	for (t = off / B; t <= (off + len - 1) / B; t++) {
		uint64_t h1;

		if (c->made[t])
			continue;
		h1 = slice_h1(c->h0, (uint16_t)t, bt->prompt[t][cache]);
		for (u = 0; u < B / FZ_SLICE; u++)
			slice_put(c->bytes + t * B + u * FZ_SLICE, h1, b, (uint16_t)t,
				  bt->prompt[t][cache], bt->token[t][cache], cache, (uint16_t)u);
		c->made[t] = 1;
	}
	memcpy(out, c->bytes + off, len);
}

/* ---- Frames to the shard -------------------------------------------------- */

static void
addr_to_shard(struct proto_addr *a, uint16_t dst_port)
{
	static const uint8_t dmac[6] = {0x02, 0, 0, 0, 0, 0x02}, smac[6] = {0x02, 0, 0, 0, 0, 0x01};

	memset(a, 0, sizeof(*a));
	memcpy(a->dst_mac, dmac, 6);
	memcpy(a->src_mac, smac, 6);
	a->src_ip = 0x0a000001;
	a->dst_ip = 0x0a000002;
	a->src_port = PROTO_PORT_CTRL_DEFAULT; /* replies come back to it */
	a->dst_port = dst_port;
	a->ttl = PROTO_TTL;
}

static void
wire_push(const struct proto_addr *a, const uint8_t *payload, uint32_t len)
{
	struct rte_mbuf *m;

	/* Not sent (more than the wire or the pool holds): the model cannot follow. */
	m = S.wtail - S.whead == WIRE_MAX ? NULL : proto_mbuf_frame(fz_rx_pool, a, payload, len);
	if (m == NULL) {
		fz.tainted = true;
		return;
	}
	if (a->ttl != 0 && a->ttl != PROTO_TTL) {
		/* Routers on the way (the builder sends PROTO_TTL): the TTL, and the checksum again. */
		uint8_t *ip = rte_pktmbuf_mtod_offset(m, uint8_t *, PROTO_ETH_LEN);
		uint16_t cs;

		ip[8] = a->ttl;
		ip[10] = ip[11] = 0;
		cs = proto_ip4_cksum(ip, PROTO_IP4_LEN);
		ip[10] = (uint8_t)(cs >> 8);
		ip[11] = (uint8_t)cs;
	}
	S.wire[S.wtail++ % WIRE_MAX] = m;
}

/*
 * A frame to the shard on the wire whose @p len bytes of payload the caller
 * writes where this returns (NULL: not sent, as wire_push). What
 * proto_mbuf_frame makes, without its copy: EVICT_DATA, most of what the
 * harness sends, is written in the frame, not built aside and copied in.
 */
static uint8_t *
wire_frame(uint16_t port, uint32_t len)
{
	static struct proto_addr a; /* the same for every frame to @p port: made once */
	struct rte_mbuf *m;
	uint32_t hl;
	uint8_t *p;

	if (a.dst_port != port)
		addr_to_shard(&a, port);
	hl = proto_l2l4_len(&a);
	m = S.wtail - S.whead == WIRE_MAX ? NULL : rte_pktmbuf_alloc(fz_rx_pool);
	if (m != NULL && hl + len > rte_pktmbuf_tailroom(m)) {
		rte_pktmbuf_free(m);
		m = NULL;
	}
	if (m == NULL) {
		fz.tainted = true;
		return NULL;
	}
	p = (uint8_t *)rte_pktmbuf_append(m, (uint16_t)(hl + len));
	proto_write_l2l4(p, &a, len);
	S.wire[S.wtail++ % WIRE_MAX] = m;
	return p + hl;
}

static void
push_payload(const uint8_t *payload, uint32_t len, uint16_t port)
{
	struct proto_addr a;

	addr_to_shard(&a, port);
	wire_push(&a, payload, len);
}

/* A stranger's copy of control payload @p p: the shard must drop it, or answer STATUS. */
static void
push_stranger(const uint8_t *p, uint32_t len, uint8_t how)
{
	uint8_t x[PROTO_PAYLOAD_MAX];
	struct proto_addr a;

	memcpy(x, p, len);
	addr_to_shard(&a, PROTO_PORT_CTRL_DEFAULT);
	if (x[5] == PROTO_T_HELLO && how % 7 == 4)
		how = 0; /* a HELLO of another epoch is no stranger's: it is a new driver */
	switch (how % 7) {
	case 0:
		proto_st16(x + 12, 5); /* another shard */
		break;
	case 5:
		a.src_ip = 0x0a000009; /* another host (a HELLO of the epoch from it: ignored) */
		break;
	case 1:
		proto_st32(x + 8, 3); /* another model */
		break;
	case 2:
		a.dst_ip = 0x0a000009;
		break;
	case 3:
		a.dst_mac[5] = 0x09;
		break;
	case 4:
		proto_st32(x + 16, proto_ld32(x + 16) ^ 0x00800000); /* another driver epoch */
		break;
	default:
		a.ttl = 60; /* crossed routers: served, and said once */
	}
	wire_push(&a, x, len);
}

static void
flush_deferred(void)
{
	unsigned int i;

	for (i = 0; i < S.ndefer; i++)
		push_payload(S.defer[i].p, S.defer[i].len, PROTO_PORT_CTRL_DEFAULT);
	S.ndefer = 0;
}

static void
ctrl_begin(struct proto_builder *b, uint8_t type)
{
	bool seqless = type == PROTO_T_HELLO || type == PROTO_T_REPORT_ACK;
	struct proto_hdr h = {.version = PROTO_VERSION,
			      .type = type,
			      .shard_id = PROTO_SHARD_ALL,
			      .epoch = fz.epoch ? fz.epoch : FZ_EPOCH(0) - 1,
			      .seq = seqless ? 0 : fz.next_seq};

	proto_build_begin(b, S.buf, sizeof(S.buf), &h);
}

/* Send the message built; @p flags the operation's. Returns its seq (0: none taken). */
static uint64_t
ctrl_send(struct proto_builder *b, uint8_t flags, uint8_t odd)
{
	uint32_t len = proto_build_end(b);
	uint8_t type = S.buf[5];
	/* A HELLO from another host goes after the driver's: first, it would take
	 * control (it would be the driver). Other strangers go before. */
	bool late = type == PROTO_T_HELLO && odd % 7 == 5;
	uint64_t seq = 0;

	if ((flags & FZ_F_ODD) && !late)
		push_stranger(S.buf, len, odd);
	if ((flags & FZ_F_DEFER) && S.ndefer < DEFER_MAX && type != PROTO_T_HELLO &&
	    type != PROTO_T_REPORT_ACK) {
		memcpy(S.defer[S.ndefer].p, S.buf, len);
		S.defer[S.ndefer++].len = len;
		if (S.ndefer > S.defer_most)
			S.defer_most = S.ndefer;
	} else {
		push_payload(S.buf, len, PROTO_PORT_CTRL_DEFAULT);
		flush_deferred(); /* what was held back goes after it: reordered */
	}
	if ((flags & FZ_F_ODD) && late)
		push_stranger(S.buf, len, odd);
	if (flags & FZ_F_DUP) {
		proto_st16(S.buf + 6, PROTO_F_RETRANSMIT);
		push_payload(S.buf, len, PROTO_PORT_CTRL_DEFAULT);
	}
	if (type != PROTO_T_HELLO && type != PROTO_T_REPORT_ACK && fz.epoch != 0)
		seq = fz.next_seq++;
	return seq;
}

/* One EVICT_DATA fragment of batch @p b (@p epoch: the stream it names; garbage: bytes no batch
 * wrote). */
static void
data_frag(uint64_t b, uint16_t cache, uint32_t off, uint32_t len, uint32_t stream_len,
	  uint32_t epoch, bool garbage)
{
	struct proto_hdr h = {
		.version = PROTO_VERSION, .type = PROTO_T_EVICT_DATA, .epoch = 0xafe1};
	struct proto_data_hdr dh = {b, cache, off, stream_len, epoch};
	uint32_t plen = PROTO_HDR_LEN + PROTO_DATA_HDR_LEN + len;
	struct proto_builder pb;
	uint8_t *p;

	if (len > PROTO_PAYLOAD_MAX - PROTO_HDR_LEN - PROTO_DATA_HDR_LEN ||
	    (p = wire_frame(PROTO_PORT_EVICT_DEFAULT, plen)) == NULL)
		return;
	proto_build_begin(&pb, p, plen, &h);
	proto_build_data_hdr(&pb, &dh);
	if (garbage)
		memset(p + pb.len, 0xee, len);
	else
		stream_bytes(b, cache, off, len, p + pb.len);
	proto_build_bytes(&pb, p + pb.len, len);
	proto_build_end(&pb);
}

static uint32_t
nfrags(const struct fz_batch *bt, uint16_t c)
{
	return (bt->g * bpt(c) + bt->frag - 1) / bt->frag;
}

/* Fragment @p i of cache @p c's stream of batch @p b (@p stale: of another stream, dropped). */
static void
send_frag(uint64_t b, uint16_t c, uint32_t i, bool stale)
{
	struct fz_batch *bt = &fz.batch[b];
	uint32_t len = bt->g * bpt(c), off = i * bt->frag;

	data_frag(b, c, off, len - off < bt->frag ? len - off : bt->frag, len,
		  stale ? fz.epoch ^ 0x40 : fz.epoch, false);
	if (!stale)
		bt->sent[c][i / 8] |= (uint8_t)(1u << (i % 8));
}

static bool
frag_sent(const struct fz_batch *bt, uint16_t c, uint32_t i)
{
	return bt->sent[c][i / 8] & (1u << (i % 8));
}

/*
 * A batch's data: @p mode 0 all in order, 2 all but one, 4 each twice, 5
 * in reverse, 6 the second half (the first went before the EVICT), 7 one
 * of them stale (of another stream: dropped, so the batch waits for it).
 */
static void
send_batch_data(uint64_t b, unsigned int mode, bool first_half)
{
	const struct fz_batch *bt = &fz.batch[b];
	uint16_t c;
	uint32_t i, n;

	for (c = 0; c < FZ_CACHES; c++) {
		n = nfrags(bt, c);
		for (i = 0; i < n; i++) {
			uint32_t k = mode == 5 ? n - 1 - i : i;

			if (mode == 6 && (k < n / 2) != first_half)
				continue;
			if (mode == 2 && k == n / 2)
				continue;
			send_frag(b, c, k, mode == 7 && k == n / 2);
			if (mode == 4)
				send_frag(b, c, k, false);
		}
	}
}

/* ---- The driver's acts ------------------------------------------------------ */

static uint32_t
prompt_of(uint8_t a)
{
	return a % FZ_PROMPTS;
}

static uint16_t
cache_of(uint8_t a)
{
	static const uint16_t m[5] = {0, 1, 0, 1, 2}; /* 2: no such cache */

	return m[a % 5];
}

/* An evict_count: the last batch, none, a batch not sent yet, or one before. */
static uint64_t
gate_of(uint8_t a)
{
	uint64_t back = (a >> 2) % 4, g;

	switch (a & 3) {
	case 0:
		g = fz.batch_no;
		break;
	case 1:
		g = 0;
		break;
	case 2:
		g = fz.batch_no + 1 + (a >> 2) % 2;
		break;
	default:
		g = fz.batch_no > back ? fz.batch_no - back : 0;
	}
	if (g > fz.max_gate)
		fz.max_gate = g;
	return g;
}

/* Token @p t of a batch of @p g from @p start, by @p pattern (a3 of EVICT, L2_UP). */
static uint32_t
token_at(uint32_t start, uint32_t t, uint32_t g, uint8_t pattern)
{
	uint32_t span = (pattern >> 2) % 8 + 1;

	switch (pattern & 3) {
	case 0:
		return start + t;
	case 1:
		return start + t % span; /* a token named again and again */
	case 2:
		return start + (g - 1 - t);
	default:
		return start + (t * 7 + span) % 32;
	}
}

static void
named_by_l2(uint16_t c, uint32_t p, uint32_t t)
{
	if (c < FZ_CACHES && p < FZ_PROMPTS && t < FZ_TOKENS)
		fz.named_l2[fz.gen & 1][c][p][t / 8] |= (uint8_t)(1u << (t % 8));
}

static void
op_hello(const uint8_t *a, uint8_t flags)
{
	struct proto_builder b;

	if ((a[0] & 1) || fz.epoch == 0) {
		/* A new stream: the shard forgets the old one. */
		fz.gen++;
		fz.epoch = FZ_EPOCH(fz.gen);
		fz.next_seq = 1;
		fz.batch_no = 0;
		fz.max_gate = 0;
		fz.nl2 = 0;
		memset(fz.named_l2[fz.gen & 1], 0, sizeof(fz.named_l2[0]));
	}
	ctrl_begin(&b, PROTO_T_HELLO);
	ctrl_send(&b, flags, a[6]);
}

static void
op_reserve(const uint8_t *a, uint8_t flags)
{
	struct proto_reserve r = {prompt_of(a[0]), a[4], a[1], a[2], cache_of(a[3])};
	struct proto_builder b;

	ctrl_begin(&b, PROTO_T_RESERVE);
	proto_build_reserve(&b, &r);
	ctrl_send(&b, flags, a[6]);
}

/* Fill batch @p b's entries: @p g tokens of @p p from @p start by @p pattern; cache 1 by @p v. */
static struct fz_batch *
new_batch(uint32_t p, uint32_t start, uint32_t g, uint8_t pattern, uint8_t v, bool l2_up)
{
	struct fz_batch *bt;
	uint32_t t;

	if (fz.batch_no >= FZ_MAX_BATCHES)
		return NULL;
	bt = &fz.batch[++fz.batch_no];
	memset(bt->sent, 0, sizeof(bt->sent));
	for (t = 0; t < FZ_CACHES; t++)
		if (sc[t].b == fz.batch_no)
			sc[t].b = 0; /* its stream is this batch's now */
	bt->g = (uint16_t)g;
	bt->l2_up = l2_up;
	for (t = 0; t < g; t++) {
		uint32_t tok = token_at(start, t, g, pattern) % FZ_TOKENS;
		bool pad = (v >> 2) % 8 == 7 && t % 5 == 4; /* prompt 0: received, not stored */

		bt->prompt[t][0] = pad ? 0 : p;
		bt->token[t][0] = tok;
		switch (v & 3) {
		case 0:
			bt->prompt[t][1] = bt->prompt[t][0];
			bt->token[t][1] = tok;
			break;
		case 1:
			bt->prompt[t][1] = 0;
			bt->token[t][1] = tok;
			break;
		case 2:
			bt->prompt[t][1] = p % (FZ_PROMPTS - 1) + 1;
			bt->token[t][1] = tok;
			break;
		default:
			bt->prompt[t][1] = bt->prompt[t][0];
			bt->token[t][1] = (tok + 1) % FZ_TOKENS;
		}
	}
	return bt;
}

static void
build_entries(struct proto_builder *b, const struct fz_batch *bt, uint16_t nc, bool l2_up)
{
	uint32_t t;
	uint16_t c;

	for (t = 0; t < bt->g; t++)
		for (c = 0; c < nc; c++) {
			struct proto_evict_entry e = {bt->prompt[t][c], bt->token[t][c], 7};

			if (l2_up)
				proto_build_l2_up_entry(b, &e);
			else
				proto_build_evict_entry(b, &e);
		}
}

static void
op_evict(const uint8_t *a, uint8_t flags)
{
	uint32_t p = prompt_of(a[0]), g = a[2] % FZ_MAX_G + 1, mtu_room;
	unsigned int mode = a[4] % 8;
	struct fz_batch *bt = new_batch(p, a[1] % 64, g, a[3], a[6], false);
	uint16_t nc =
		(a[6] >> 5) == 7 ? 1 : FZ_CACHES; /* 1: BAD_CACHE, the batch complete at once */
	struct proto_evict_hdr eh;
	struct proto_builder b;

	if (bt == NULL)
		return;
	mtu_room = kvss.cfg.mtu - 28 - PROTO_HDR_LEN - PROTO_DATA_HDR_LEN;
	bt->frag = (a[5] & 0xf0) == 0xf0 ? mtu_room : (a[5] % 16 + 1) * 97 + (a[5] >> 4);
	if (bt->frag > mtu_room)
		bt->frag = mtu_room;
	eh = (struct proto_evict_hdr){fz.batch_no, nc, (uint16_t)g, 0};
	if (mode == 1 || mode == 6)
		send_batch_data(fz.batch_no, mode == 1 ? 0 : 6, true); /* before its EVICT: held */
	ctrl_begin(&b, PROTO_T_EVICT);
	proto_build_evict_hdr(&b, &eh);
	build_entries(&b, bt, nc, false);
	ctrl_send(&b, flags, a[6]);
	if (mode != 1 && mode != 3)
		send_batch_data(fz.batch_no, mode, false);
}

static void
op_data(const uint8_t *a, uint8_t flags)
{
	uint64_t back = a[0] % 8, b;
	const struct fz_batch *bt;
	uint16_t c;
	uint32_t i;

	if (fz.batch_no <= back)
		return;
	b = fz.batch_no - back;
	bt = &fz.batch[b];
	if (bt->l2_up)
		return; /* its bytes come from the second tier */
	for (c = 0; c < FZ_CACHES; c++)
		for (i = 0; i < nfrags(bt, c); i++) {
			if ((a[1] & 3) != 2 && frag_sent(bt, c, i))
				continue;
			send_frag(b, c, i, false);
			if (flags & FZ_F_DUP)
				send_frag(b, c, i, false);
			if ((a[1] & 3) == 1)
				return; /* one fragment */
		}
}

static void
op_refill(const uint8_t *a, uint8_t flags)
{
	unsigned int nreq = (a[5] & 2) ? 2 : 1, r, k;
	struct proto_builder b;

	ctrl_begin(&b, PROTO_T_REFILL);
	for (r = 0; r < nreq && fz.refill_id < FZ_MAX_REFILLS; r++) {
		struct fz_refill *f = &refills[fz.refill_id++];
		struct proto_refill_req rq;

		memset(f, 0, sizeof(*f));
		f->id = fz.refill_id;
		f->gen = fz.gen;
		f->cache = r == 0 ? cache_of(a[3]) : (uint16_t)(cache_of(a[3]) ^ 1);
		f->nchunks = (a[5] & 1) ? 2 : 1;
		f->chunk[0].prompt = prompt_of(a[0]);
		f->chunk[0].start = a[1] % 64;
		f->chunk[0].n = a[2] % 65;
		f->chunk[1].prompt = prompt_of(a[6]);
		f->chunk[1].start = (a[6] >> 3) % 32;
		f->chunk[1].n = (a[5] >> 2) % 40;
		rq = (struct proto_refill_req){f->id, gate_of(a[4]), 11, 22, f->cache, 0};
		proto_build_refill_req(&b, &rq);
		for (k = 0; k < f->nchunks; k++) {
			struct proto_refill_chunk ch = {f->chunk[k].prompt, f->chunk[k].start,
							f->chunk[k].n};

			proto_build_refill_chunk(&b, &ch);
			f->tokens += f->chunk[k].n;
		}
	}
	ctrl_send(&b, flags, a[6]);
}

static void
op_delete(const uint8_t *a, uint8_t flags)
{
	uint32_t start = a[1] % 64, end = a[2] == 255 ? UINT32_MAX : start + a[2] % 70;
	struct proto_delete d = {prompt_of(a[0]), gate_of(a[4]), start, end, cache_of(a[3])};
	struct proto_builder b;

	if (end < start)
		d.end_token_idx = start - 1; /* MALFORMED */
	ctrl_begin(&b, PROTO_T_DELETE);
	proto_build_delete(&b, &d);
	if (a[5] & 1) {
		d.prompt_id = prompt_of(a[5] >> 1);
		d.start_token_idx = (a[5] >> 4) * 4;
		d.end_token_idx = UINT32_MAX;
		proto_build_delete(&b, &d);
	}
	ctrl_send(&b, flags, a[6]);
}

static struct fz_l2msg *
l2msg_new(uint8_t type)
{
	struct fz_l2msg *m;

	if (fz.epoch == 0 || fz.nl2 == FZ_MAX_L2MSG) {
		fz.tainted |= fz.epoch != 0; /* more than the model keeps */
		return NULL;
	}
	m = &fz.l2[fz.nl2++];
	memset(m, 0, sizeof(*m));
	m->type = type;
	m->seq = fz.next_seq;
	return m;
}

static void
op_l2_down(const uint8_t *a, uint8_t flags)
{
	struct proto_l2col col = {.key = a[0] % 7,
				  .parent = 1,
				  .isolation_id = a[1] % 2 + 1,
				  .prompt_id = prompt_of(a[2]),
				  .evict_count = gate_of(a[5] >> 3),
				  .first_use_ns = 1,
				  .start_token_idx = a[3] % 64,
				  .num_tokens = a[4] % (FZ_COLUMN + 1) + 1,
				  .cache_id = cache_of(a[5])};
	struct fz_l2msg *m = l2msg_new(PROTO_T_L2_DOWN);
	struct proto_builder b;
	unsigned int n = (a[6] & 3) ? 2 : 1, i;

	ctrl_begin(&b, PROTO_T_L2_DOWN);
	for (i = 0; i < n; i++) {
		if (i == 1 && (a[6] & 3) >= 2) {
			/* Another column beside it (of the other cache: 3). */
			col.key = col.key % 6 + 1;
			col.start_token_idx = (a[6] >> 2) % 64;
			if ((a[6] & 3) == 3)
				col.cache_id ^= 1;
		}
		proto_build_l2_down(&b, &col);
		if (m != NULL)
			m->rec[m->nrec++] = (struct fz_l2rec){
				.cache = col.cache_id, .key = col.key, .org = col.isolation_id};
	}
	ctrl_send(&b, flags, a[6]);
}

static void
op_l2_up(const uint8_t *a, uint8_t flags)
{
	/* From 200 entries on: few tokens named again and again (a5 of the pattern). */
	uint32_t p = prompt_of(a[0]), start = a[1] % 64, g = a[2] >= 200 ? a[2] : a[2] % 48 + 1, t;
	unsigned int ncols = a[4] % 5, k;
	struct fz_batch *bt = new_batch(p, start, g, a[3], 0, true);
	struct proto_evict_hdr eh;
	struct proto_builder b;
	uint16_t c;

	if (bt == NULL)
		return;
	for (t = 0; t < g; t++)
		for (c = 0; c < FZ_CACHES; c++)
			named_by_l2(c, bt->prompt[t][c], bt->token[t][c]);
	eh = (struct proto_evict_hdr){fz.batch_no, FZ_CACHES, (uint16_t)g, (uint16_t)ncols};
	ctrl_begin(&b, PROTO_T_L2_UP);
	proto_build_l2_up_hdr(&b, &eh);
	build_entries(&b, bt, FZ_CACHES, true);
	for (k = 0; k < ncols; k++) {
		/* Columns of both caches in turn, from the batch's first token on. */
		struct proto_l2col col = {.key = (a[5] + k / 2) % 6 + 1,
					  .parent = 1,
					  .isolation_id = (a[6] & 1) + 1,
					  .prompt_id = p,
					  .start_token_idx = start + FZ_COLUMN * (k / 2),
					  .num_tokens = FZ_COLUMN,
					  .cache_id = (uint16_t)(k % 2)};

		if (a[6] & 2)
			col.start_token_idx = start - start % FZ_COLUMN + FZ_COLUMN * (k / 2);
		if ((a[6] & 4) && k + 1 == ncols) {
			/* The last column one the shard refuses (L2_DONE op 2). */
			if ((a[6] >> 3) % 4 == 0)
				col.key = 0;
			else if ((a[6] >> 3) % 4 == 1)
				col.cache_id = FZ_CACHES;
			else
				col.num_tokens = (a[6] >> 3) % 4 == 2 ? 0 : FZ_COLUMN + 1;
		}
		proto_build_l2_up_col(&b, &col);
	}
	ctrl_send(&b, flags, a[6]);
}

/* ---- The shared level's acts (FZ_CFG_SHARED, a0 & 0x80) ------------------------- */

/* SharedColumns sent down, the last SHCOLS: what SH_UPs ask for. */
#define SHCOLS 16
static struct proto_l2col shcol[SHCOLS];
static unsigned int nshcol;

/* A column's object id, as a driver makes it from its key and organization. */
static uint64_t
sh_oid(uint64_t key, uint64_t org)
{
	return 0x5100 + key * 8 + org;
}

static void
op_sh_down(const uint8_t *a, uint8_t flags)
{
	uint64_t key = (a[0] & 7) % 7, org = (a[1] & 1) + 1;
	struct proto_l2col col = {.key = key,
				  .parent = 1,
				  .isolation_id = org,
				  .prompt_id = prompt_of(a[2]),
				  .evict_count = gate_of(a[5] >> 3),
				  .first_use_ns = 1,
				  .start_token_idx = a[3] % 64,
				  .num_tokens = a[4] % (FZ_COLUMN + 1) + 1,
				  .cache_id = cache_of(a[5]),
				  .gen_global = 1,
				  .gen_org = (a[1] >> 3) & 1,
				  .layout = 0x5a5a};
	struct fz_l2msg *m = l2msg_new(PROTO_T_SH_DOWN);
	struct proto_builder b;
	unsigned int n = (a[6] & 3) ? 2 : 1, i;

	ctrl_begin(&b, PROTO_T_SH_DOWN);
	for (i = 0; i < n; i++) {
		if (i == 1) {
			/* Another column beside it (of the other cache: 3). */
			col.key = col.key % 6 + 1;
			col.start_token_idx = (a[6] >> 2) % 64;
			if ((a[6] & 3) == 3)
				col.cache_id ^= 1;
		}
		switch ((a[1] >> 1) & 3) {
		case 2:
			col.object_id = sh_oid(col.key % 6 + 1, org); /* another column's name */
			break;
		case 3:
			col.object_id = 0; /* MALFORMED */
			break;
		default:
			col.object_id = sh_oid(col.key, org);
		}
		proto_build_l2_down(&b, &col);
		fz_sh_fault((uint8_t)(((a[0] >> 3) & 0x0f) | (a[6] & 0xf0)));
		if (m != NULL)
			m->rec[m->nrec++] = (struct fz_l2rec){
				.cache = col.cache_id, .key = col.key, .org = col.isolation_id};
		shcol[nshcol++ % SHCOLS] = col;
	}
	ctrl_send(&b, flags, a[6]);
}

static void
op_sh_up(const uint8_t *a, uint8_t flags)
{
	struct proto_l2col cols[2], *c0;
	unsigned int ncols = a[4] % 3, lie = (a[4] >> 2) % 8, k;
	uint32_t p, start, g, t;
	struct fz_batch *bt;
	struct proto_evict_hdr eh;
	struct proto_builder b;
	uint16_t c;

	if (nshcol == 0)
		return;
	/* The columns asked for: of those sent down, as they were sent. */
	for (k = 0; k < 2; k++) {
		unsigned int kept = nshcol < SHCOLS ? nshcol : SHCOLS;
		unsigned int w = (k == 0 ? a[0] & 7 : a[5] & 7) % kept;

		cols[k] = shcol[(nshcol - 1 - w) % SHCOLS];
		cols[k].isolation_id = (a[6] & 1) ? cols[k].isolation_id ^ 3 : cols[k].isolation_id;
	}
	c0 = &cols[0];
	/* The batch names the first column's tokens (a1: from its start, or around it). */
	p = (uint32_t)c0->prompt_id;
	start = (a[1] & 1) ? c0->start_token_idx : (c0->start_token_idx + a[1] / 2 % 8) % 64;
	g = a[2] % 48 + 1;
	if (!(a[2] & 0x80) && g < c0->num_tokens)
		g = c0->num_tokens;
	bt = new_batch(p, start, g, (a[1] & 2) ? a[3] : 0, 0, true);
	if (bt == NULL)
		return;
	for (t = 0; t < g; t++)
		for (c = 0; c < FZ_CACHES; c++)
			named_by_l2(c, bt->prompt[t][c], bt->token[t][c]);
	/* How the driver's columns lie (0-3: as sent). */
	switch (lie) {
	case 4:
		c0->start_token_idx++;
		break;
	case 5:
		c0->num_tokens = c0->num_tokens > 1 ? c0->num_tokens - 1 : FZ_COLUMN;
		break;
	case 6:
		c0->object_id ^= 8; /* another column's name */
		break;
	case 7:
		c0->object_id = 0; /* this shard's own disk */
		break;
	default:
		break;
	}
	eh = (struct proto_evict_hdr){fz.batch_no, FZ_CACHES, (uint16_t)g, (uint16_t)ncols};
	ctrl_begin(&b, PROTO_T_SH_UP);
	proto_build_l2_up_hdr(&b, &eh);
	build_entries(&b, bt, FZ_CACHES, true);
	for (k = 0; k < ncols; k++) {
		proto_build_l2_up_col(&b, &cols[k]);
		fz_sh_fault((uint8_t)(((a[0] >> 3) & 0x0f) | (a[6] & 0xf0)));
	}
	ctrl_send(&b, flags, a[6]);
}

static void
op_l2_delete(const uint8_t *a, uint8_t flags)
{
	struct proto_l2del d = {a[0] % 7, a[1] % 2 + 1, gate_of(a[3]), cache_of(a[2])};
	struct fz_l2msg *m = l2msg_new(PROTO_T_L2_DELETE);
	struct proto_builder b;
	unsigned int n = (a[4] & 3) ? 2 : 1, i;

	ctrl_begin(&b, PROTO_T_L2_DELETE);
	for (i = 0; i < n; i++) {
		if (i == 1 && (a[4] & 3) >= 2)
			d.key = d.key % 6 + 1;
		proto_build_l2_delete(&b, &d);
		if (m != NULL)
			m->rec[m->nrec++] = (struct fz_l2rec){
				.cache = d.cache_id, .key = d.key, .org = d.isolation_id};
	}
	ctrl_send(&b, flags, a[6]);
}

static void
op_report_ack(const uint8_t *a, uint8_t flags)
{
	uint64_t taken = fz_shard->st->rep_next ? fz_shard->st->rep_next - 1 : 0;
	struct proto_builder b;
	uint64_t cum;

	switch (a[0] & 3) {
	case 0:
		cum = taken;
		break;
	case 1:
		cum = taken > a[1] ? taken - a[1] : 0;
		break;
	case 2:
		cum = taken + 1 + a[1]; /* reports never sent: ignored */
		break;
	default:
		cum = taken;
	}
	ctrl_begin(&b, PROTO_T_REPORT_ACK);
	proto_build_report_ack(&b, cum);
	if ((a[0] & 3) == 3)
		proto_st32(S.buf + 16, fz.epoch ^ 0x1); /* a stale epoch's */
	ctrl_send(&b, flags, a[6]);
}

/* A control message the input writes: header fields from @p a, the body from the input. */
static void
op_raw(const uint8_t *a, uint8_t flags)
{
	static const uint8_t types[] = {PROTO_T_HELLO,	PROTO_T_RESERVE,   PROTO_T_EVICT,
					PROTO_T_REFILL, PROTO_T_DELETE,	   PROTO_T_L2_DOWN,
					PROTO_T_L2_UP,	PROTO_T_L2_DELETE, PROTO_T_REPORT_ACK,
					PROTO_T_STATUS};
	uint8_t type = types[a[0] % RTE_DIM(types)];
	uint32_t n = a[1] < S.left ? a[1] : (uint32_t)S.left;
	struct proto_hdr h = {.version = PROTO_VERSION,
			      .type = type,
			      .shard_id = PROTO_SHARD_ALL,
			      .epoch = fz.epoch,
			      .seq = fz.next_seq};
	static struct proto_msg m;
	uint32_t len = PROTO_HDR_LEN + n;

	(void)flags;
	proto_build_begin(&(struct proto_builder){0}, S.buf, sizeof(S.buf), &h);
	memcpy(S.buf + PROTO_HDR_LEN, S.p, n);
	S.p += n;
	S.left -= n;
	proto_st16(S.buf + 14, (a[0] & 0x80) ? a[2] : (uint16_t)(n / 16)); /* count */
	proto_st32(S.buf + 20, n);					   /* body_len */
	/* Its seq ahead (a3 odd): held early, or (64 on) past the window. */
	if (a[3] & 1)
		proto_st64(S.buf + 24, fz.next_seq + (a[3] >> 1));
	/* What the shard will make of it, by the same parser: taken, the model cannot follow. */
	if (proto_parse_payload(S.buf, len, PROTO_PORT_CTRL_DEFAULT, &proto_ports_default, &m) ==
		    PROTO_OK &&
	    fz.epoch != 0 && type != PROTO_T_HELLO && type != PROTO_T_REPORT_ACK &&
	    type != PROTO_T_STATUS) {
		fz.tainted = true;
		if (proto_ld64(S.buf + 24) == fz.next_seq)
			fz.next_seq++;
	}
	push_payload(S.buf, len, PROTO_PORT_CTRL_DEFAULT);
}

/* EVICT_DATA the shard must drop: the wrong stream, length, cache or range, or a batch complete. */
static void
op_odd_data(const uint8_t *a, uint8_t flags)
{
	uint64_t b = fz.batch_no > a[0] % 8 ? fz.batch_no - a[0] % 8 : 0;
	uint64_t complete = kvstore_batches_complete(fz_shard->store);
	uint32_t len = b ? fz.batch[b].g * FZ_B0 : 64;

	(void)flags;
	if (b == 0 || fz.epoch == 0)
		return;
	switch (a[1] % 5) {
	case 0:
		data_frag(b, 0, 0, 32, len, fz.epoch ^ 0x40, true);
		break;
	case 1:
		data_frag(b, 0, 0, 32, len + FZ_B0, fz.epoch, true);
		break;
	case 2:
		data_frag(b, 5, 0, 32, len, fz.epoch, true);
		break;
	case 3:
		data_frag(b, 0, len - 16, 32, len, fz.epoch, true);
		break;
	default:
		/* A batch complete (by the store, read now; it stays complete). */
		if (complete > 0 && fz.batch_no >= complete && complete <= FZ_MAX_BATCHES)
			data_frag(complete, 0, 0, 32, fz.batch[complete].g * FZ_B0, fz.epoch, true);
	}
}

/* ---- The scheduler ------------------------------------------------------------ */

static void
time_passes(void)
{
	struct kvss_shard_cfg *c = fz_shard->cfg;

	c->batch_timeout_ms = 0;
	c->space_timeout_ms = 0;
	fz_shard->st->rep_due = 0;
	S.time_was = true;
}

/* Run the input's next operation: its flags, or -1 at the input's end. */
static int
next_op(void)
{
	uint8_t op[FZ_OP_LEN] = {0}, code, flags;
	bool shared;
	const uint8_t *a = op + 1;
	size_t n = S.left < FZ_OP_LEN ? S.left : FZ_OP_LEN;

	if (S.left == 0)
		return -1;
	memcpy(op, S.p, n);
	S.p += n;
	S.left -= n;
	code = op[0] & 0x0f;
	flags = op[0] & 0xf0;
	shared = (S.cfg & FZ_CFG_SHARED) && (a[0] & 0x80) &&
		 (code == OP_L2_DOWN || code == OP_L2_UP || code == OP_L2_DELETE);
	if (fz_trace) {
		static const char *const names[OP_COUNT] = {
			"HELLO",   "RESERVE", "EVICT",	   "DATA",	 "REFILL",     "DELETE",
			"L2_DOWN", "L2_UP",   "L2_DELETE", "REPORT_ACK", "RUN_REFILL", "TIME",
			"RELEASE", "FLUSH",   "RAW",	   "ODD_DATA"};

		fprintf(stderr,
			"op %-10s%s%s%s%s %3u %3u %3u %3u %3u %3u %3u  (seq %" PRIu64
			", batch %" PRIu64 ")\n",
			!shared		     ? names[code]
			: code == OP_L2_DOWN ? "SH_DOWN"
			: code == OP_L2_UP   ? "SH_UP"
					     : "CLUSTER",
			flags & FZ_F_DEFER ? " defer" : "",
			flags & FZ_F_DUP ? " dup" : "", flags & FZ_F_MORE ? " more" : "",
			flags & FZ_F_ODD ? " odd" : "", a[0], a[1], a[2], a[3], a[4], a[5], a[6],
			fz.next_seq, fz.batch_no);
	}
	switch (code) {
	case OP_HELLO:
		op_hello(a, flags);
		break;
	case OP_RESERVE:
		op_reserve(a, flags);
		break;
	case OP_EVICT:
		op_evict(a, flags);
		break;
	case OP_DATA:
		op_data(a, flags);
		break;
	case OP_REFILL:
		op_refill(a, flags);
		break;
	case OP_DELETE:
		op_delete(a, flags);
		break;
	case OP_L2_DOWN:
		if (shared)
			op_sh_down(a, flags);
		else
			op_l2_down(a, flags);
		break;
	case OP_L2_UP:
		if (shared)
			op_sh_up(a, flags);
		else
			op_l2_up(a, flags);
		break;
	case OP_L2_DELETE:
		if (shared)
			fz_sh_act(a[1], a[2]);
		else
			op_l2_delete(a, flags);
		break;
	case OP_REPORT_ACK:
		op_report_ack(a, flags);
		break;
	case OP_RUN_REFILL: {
		unsigned int k;

		for (k = 0; k <= a[0] % 8; k++)
			fz_refill_turn(a[1] % 8);
		break;
	}
	case OP_TIME:
		time_passes();
		break;
	case OP_RELEASE:
		if (a[0] & 1)
			fz_check_release();
		S.idle += a[1] % 4;
		break;
	case OP_FLUSH:
		flush_deferred();
		fz_sh_release(); /* and the cluster answers what it held */
		break;
	case OP_RAW:
		op_raw(a, flags);
		break;
	default:
		op_odd_data(a, flags);
	}
	return flags;
}

/* What moves in the shard: the drain ends when two rounds see none. */
static uint64_t
progress(void)
{
	const struct shard_state *s = fz_shard->st;
	/* Frames sent, but not reports sent again (each round of time resends them). */
	uint64_t h = kvss.stats[0].tx_frames - kvss.stats[0].reports_resent +
		     3 * kvss.stats[1].tx_frames;

	h = h * 31 + s->evictq.head;
	h = h * 31 + s->refillq.head;
	h = h * 31 + s->nearly;
	h = h * 31 + rte_ring_count(fz_shard->ingest_to_refill);
	h = h * 31 + rte_ring_count(fz_shard->refill_to_ingest);
	h = h * 31 + kvstore_batches_complete(fz_shard->store);
	h = h * 31 + fz_shard->deletes_applied;
	return h;
}

static void
refill_until_idle(void)
{
	unsigned int k;

	for (k = 0; k < 64; k++) {
		fz_refill_turn(0);
		if (fz_refill_idle())
			break;
	}
}

uint16_t
fz_sched(struct rte_mbuf **pkts, uint16_t n)
{
	struct kvss_shard_cfg *c = fz_shard->cfg;

	if (fz.iter == 0)
		fz_trace = getenv("FUZZ_SHARD_TRACE") != NULL;
	if (fz.iter++ == 0) {
		/* A millisecond of the shard's is a thousand seconds here: only
		 * OP_TIME fires its timeouts. */
		fz_shard->st->hz = rte_get_tsc_hz() * 1000000ull;
	}
	if (S.time_was) {
		c->batch_timeout_ms = 50;
		c->space_timeout_ms = 100;
		S.time_was = false;
	}
	fz_tier_settle(); /* what the last poll gave the tier, answered before this one */
	fz_check_poll_end();
	for (;;) {
		if (S.wtail != S.whead) {
			uint16_t k = 0;

			while (k < n && S.whead != S.wtail)
				pkts[k++] = S.wire[S.whead++ % WIRE_MAX];
			FZ_TRACE("poll %" PRIu64 ": %u frames\n", fz.iter, k);
			return k;
		}
		if (S.idle > 0) {
			S.idle--;
			return 0;
		}
		switch (S.phase) {
		case PH_INPUT: {
			int f;

			/* The next operation, and those its flags put in the same burst. */
			while ((f = next_op()) >= 0 && (f & FZ_F_MORE) && !S.time_was)
				;
			if (f < 0) {
				flush_deferred();
				S.phase = PH_DRAIN;
				S.round = 0;
				S.sig = 0;
				S.still = 0;
			}
			if (S.time_was)
				return 0; /* a poll with every timeout fired */
			break;
		}
		case PH_DRAIN: {
			/*
			 * Everything that can finish, finishes: time passes, the
			 * refill lcore runs, until two rounds in a row change
			 * nothing. Two: the shard's timeouts read its looked clock
			 * (the last poll that read its queue empty), which the
			 * first round's poll may only set, as it ends, when the
			 * input's last poll read a full burst; the space timeout
			 * of an EVICT that waits from before then fires in the
			 * second.
			 */
			uint64_t sig;

			fz_sh_release(); /* the cluster answers what it held */
			refill_until_idle();
			sig = progress();
			S.still = sig == S.sig && fz_tier_backlog() == 0 ? S.still + 1 : 0;
			if (S.still == 2 || ++S.round > 512) {
				S.phase = PH_LOOK;
				S.look = 0;
				break;
			}
			S.sig = sig;
			time_passes();
			return 0;
		}
		case PH_LOOK:
			/* HELLO of the stream: STATUS, then the inventory (the tier
			 * lists it; the next poll sends it). */
			if (S.look++ == 0) {
				uint8_t a[7] = {0};

				if (fz.epoch == 0)
					a[0] = 1;
				fz_check_final_look();
				op_hello(a, 0);
				break;
			}
			if (S.look < 4 || fz_tier_backlog() != 0)
				return 0;
			fz_check_final();
			S.phase = PH_END;
			break;
		default:
			/* The input is over: its refills' frames freed (the refill
			 * lcore's contexts are its thread's), its lcores stopped. */
			fz_check_release();
			fz_env_keep_reports();
			__atomic_store_n(&kvss.quit, 1, __ATOMIC_RELEASE);
			fz_env_stop_refill();
			return 0;
		}
	}
}

/* ---- libFuzzer ------------------------------------------------------------------ */

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	if (fz_env_init() != 0)
		abort();
	return 0;
}

/*
 * S as a memset leaves it, but of its buffers (80 kB) only what the last
 * input used: the wire's entries below its tail (which only grows), the
 * deferred frames up to the most held. FUZZ_SHARD_CHECK_RESET=1 checks it.
 */
static void
s_reset(void)
{
	static int check = -1;
	unsigned int w = S.wtail < WIRE_MAX ? S.wtail : WIRE_MAX;
	const uint8_t *b = (const uint8_t *)&S;
	size_t i;

	if (check < 0)
		check = getenv("FUZZ_SHARD_CHECK_RESET") != NULL;
	memset(S.wire, 0, w * sizeof(S.wire[0]));
	memset(S.defer, 0, S.defer_most * sizeof(S.defer[0]));
	memset(S.buf, 0, sizeof(S.buf));
	memset(&S, 0, offsetof(typeof(S), wire));
	for (i = 0; check && i < sizeof(S); i++)
		if (b[i] != 0)
			fz_fail("reset: the harness's state is not what a memset leaves");
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	s_reset();
	S.cfg = data[0];
	S.p = data + 1;
	S.left = size - 1;
	fz.epoch = 0;
	fz.gen = 0;
	fz.next_seq = 1;
	fz.batch_no = 0;
	fz.refill_id = 0;
	fz.nl2 = 0;
	fz.tainted = false;
	fz.iter = 0;
	memset(fz.named_l2, 0, sizeof(fz.named_l2));
	nshcol = 0;
	fz_check_begin(S.cfg & FZ_CFG_HOLD_REFILLS);
	fz_env_begin(S.cfg & FZ_CFG_REFILL_LCORE, (S.cfg & FZ_CFG_MTU_1500) ? 1500 : 9000);
	kvss_shard_ingest(NULL);
	/* Frames the input left on the wire, and the refills' records. */
	while (S.whead != S.wtail)
		rte_pktmbuf_free(S.wire[S.whead++ % WIRE_MAX]);
	fz_check_end();
	if (!fz_env_end())
		fz_fail("mbufs not given back: %u received, %u sent still in use",
			rte_mempool_in_use_count(fz_rx_pool), rte_mempool_in_use_count(kvss.pool));
	return 0;
}
