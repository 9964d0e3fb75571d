/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * kvss's shard lcore on a port (make bench). The application's own ingest
 * lcore (kvss_shard_ingest, shard.c and refill.c as the kvss binary runs
 * them) serves one end of a net_ring port pair on lcore 1; this program is
 * the driver and the wafer on the other end, on lcore 0:
 *
 *  - kvss_shard_ingest_1k / _16k: EVICT batches of 64 tokens (B_c = 1 KiB
 *    and 16 KiB, 4 buffers) and their EVICT_DATA in jumbo frames (8,916
 *    bytes of stream each), stored: bytes per second from the first frame
 *    to the last frame stored, with the DELETEs that make room on the way.
 *    The frames come from a ring of 8,192 whole frames (72 MiB, as a NIC
 *    leaves them in memory) that this end sends again once the shard has
 *    freed them, rewriting only their headers, so it copies nothing.
 *    Baseline: memcpy of the same payloads on one core, the copy any shard
 *    must make.
 *  - kvss_shard_ingest_frames_16k: the same run in frames per second.
 *  - kvss_shard_ingest_1k_l2: the 1 KiB ingest while every 16th prompt's
 *    columns go down to the shard's second tier (L2_DOWN before its DELETE;
 *    the tier thread writes them to a file in /var/tmp, O_DIRECT) against
 *    the ingest alone in the same run; _writes: the L2 write rate it had.
 *  - kvss_shard_refill_16k: 8 GiB of REFILLs of 128 tokens (2 MiB each, four
 *    at a time) sent as gather lists (REFILL_DATA frames of a header mbuf
 *    chained to mbufs over the stored bytes), counted as this end receives
 *    them. Baseline: memcpy of the same bytes out of the store, in frame
 *    payload pieces, on one core (a copying refill's least cost).
 *
 * No NIC here, so these are the software ceilings of one lcore each way,
 * on a machine whose two cores this program's two lcores take. Every run
 * is checked: every batch stored, every refill answered OK with its bytes,
 * no ERROR, no TOKEN_LOST, no frame dropped; otherwise exit status 1.
 *
 *   bench_shard [CONFIG]      (default bench/shard.cfg)
 *
 * BENCH_SHARD_ONLY=1k, 1k_l2 or 16k runs that part alone (1k_l2 measures
 * its baseline too), for a profile of one figure (perf record).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>
#include <rte_ring.h>

#include "kvss.h"
#include "mono.h"
#include "shard/shard.h"

/* The shard under test: the process's first. */
static struct kvss_shard_inst *const shard0 = &kvss_shards[0];

#define G 64		    /* tokens per batch */
#define PROMPT_TOKENS 1024  /* 16 batches per prompt */
#define FRAMES 8192
#define DST_BYTES (64u << 20)
#define FRAME_PAYLOAD 8916  /* stream bytes per EVICT_DATA frame at MTU 9000 */
#define INGEST_BYTES (2ull << 30)
#define REFILL_BYTES (8ull << 30) /* the store's 256 MiB, 32 times over */
#define REFILL_TOKENS 128
#define REFILLS_OUT 4
#define RUNS 3
#define SHARD_LCORE 1

static uint16_t gport; /* this end */
static struct rte_mempool *gpool;
static struct rte_mempool *fpool;
static struct rte_mbuf *frame[FRAMES]; /* whole EVICT_DATA frames; one reference is ours */
static unsigned int next_frame;
static struct proto_addr actl, adata;
static uint32_t epoch;
static uint64_t seq;	    /* the next control seq */
static uint64_t acked;	    /* cumulative ACK */
static uint64_t statuses;   /* STATUS frames received */
static uint64_t refill_bytes, dones, bad;
static uint32_t bpt;	    /* bytes per token of the run */
static uint64_t last_batch; /* of the last ingest: REFILLs wait for it */
static uint64_t last_gen;   /* whose prompts the REFILLs read */
static struct proto_msg rxm;
/* The second tier (kvss_shard_ingest_1k_l2): every l2_every-th prompt goes
 * down to L2 before its DELETE, its columns cycling over L2_KEYS keys. */
#define L2_KEYS 896 /* a replaced column frees its slot once the new one is written: room for the writes in flight */
#define L2_SLOTS 1024
static unsigned int l2_every;
static uint64_t l2_sent, l2_done, l2_key;
/* REFILL_DATA frames taken, freed when their REFILL_DONE comes (after the
 * last of them): a NIC frees a refill's mbufs on the sending lcore, which
 * this end, on another core, would otherwise slow down by freeing them while
 * the shard still attaches more to the same refill. */
#define HELD_MAX 4096
static struct rte_mbuf *held[HELD_MAX];
static unsigned int nheld;

/* Has @p limit seconds passed since @p t0? Reads the clock every 4096th call
 * (*@p k counts them): the waits poll far faster than they need to. */
static int
past(double t0, double limit, unsigned int *k)
{
	return (++*k & 4095) == 0 && mono_s() - t0 > limit;
}

static void
fail(const char *what)
{
	fprintf(stderr, "bench_shard: %s\n", what);
	__atomic_store_n(&kvss.quit, 1, __ATOMIC_RELAXED);
	rte_eal_mp_wait_lcore();
	shard_levels_close(shard0);
	if (shard0->cfg->l2.path[0] != '\0') {
		/* Its second tier's file and directory, if it ran one. */
		unlink(shard0->cfg->l2.path);
		*strrchr(shard0->cfg->l2.path, '/') = '\0';
		rmdir(shard0->cfg->l2.path);
	}
	kvss_eal_stop();
	exit(1);
}

/* Everything the shard sent: ACKs, STATUS, REFILL_DATA, REFILL_DONE. */
static void
poll_rx(void)
{
	struct rte_mbuf *pkts[64];
	uint16_t n = rte_eth_rx_burst(gport, 0, pkts, 64), i;
	unsigned int r;

	for (i = 0; i < n; i++) {
		if (proto_parse_mbuf(pkts[i], &kvss.cfg.udp, &rxm) != PROTO_OK) {
			bad++;
		} else {
			switch (rxm.hdr.type) {
			case PROTO_T_ACK:
				if (rxm.u.ack.cum_seq > acked)
					acked = rxm.u.ack.cum_seq;
				break;
			case PROTO_T_STATUS:
				statuses++;
				break;
			case PROTO_T_REFILL_DATA:
				refill_bytes += rxm.data_len;
				if (nheld < HELD_MAX) {
					held[nheld++] = pkts[i];
					continue;
				}
				break;
			case PROTO_T_L2_DONE:
				for (r = 0; r < rxm.hdr.count; r++) {
					struct proto_l2done d;

					proto_get_l2_done(&rxm, r, &d);
					l2_done++;
					if (d.status != 0 && bad++ < 3)
						fprintf(stderr, "bench_shard: L2_DOWN failed: %s\n",
							proto_err_name(d.status));
				}
				break;
			case PROTO_T_L2_INVENTORY:
				break;
			case PROTO_T_REFILL_DONE:
				rte_pktmbuf_free_bulk(held, nheld);
				nheld = 0;
				for (r = 0; r < rxm.hdr.count; r++) {
					struct proto_refill_done d;

					proto_get_refill_done(&rxm, r, &d);
					dones++;
					if (d.status != 0 || d.tokens != REFILL_TOKENS ||
					    d.bytes != (uint64_t)REFILL_TOKENS * bpt)
						bad++;
				}
				break;
			default: /* ERROR, TOKEN_LOST: the run is wrong */
				if (bad++ < 3)
					fprintf(stderr, "bench_shard: the shard sent %s\n",
						proto_type_name(rxm.hdr.type));
				if (rxm.hdr.type == PROTO_T_ERROR && bad < 3) {
					struct proto_error e;

					proto_get_error(&rxm, 0, &e);
					fprintf(stderr, "  seq %" PRIu64 " prompt %" PRIu64 " token %u code %s\n",
						e.seq, e.prompt_id, e.token_idx, proto_err_name(e.code));
				}
			}
		}
		rte_pktmbuf_free(pkts[i]);
	}
}

/* Send all of @p m, taking what the shard sends meanwhile (it may be
 * waiting for room in its own TX ring). */
static void
tx_all(struct rte_mbuf **m, uint16_t n)
{
	while (n > 0) {
		uint16_t k = rte_eth_tx_burst(gport, 0, m, n);

		m += k;
		n -= k;
		if (n > 0)
			poll_rx();
	}
}

static void
hdr(struct proto_hdr *h, uint8_t type, uint64_t s)
{
	memset(h, 0, sizeof(*h));
	h->version = PROTO_VERSION;
	h->type = type;
	h->epoch = epoch;
	h->seq = s;
}

static void
send_payload(const uint8_t *p, uint32_t len)
{
	struct rte_mbuf *m = proto_mbuf_frame(gpool, &actl, p, len);

	if (m == NULL)
		fail("out of mbufs for a control frame");
	tx_all(&m, 1);
}

/* Wait while more than @p ahead control messages are unacknowledged. */
static void
window(uint64_t ahead)
{
	unsigned int k = 0;
	double t0;

	if (seq - 1 - acked <= ahead)
		return;
	t0 = mono_s();
	while (seq - 1 - acked > ahead) {
		poll_rx();
		if (bad)
			fail("the shard answered with ERROR or TOKEN_LOST");
		if (past(t0, 10, &k))
			fail("no ACK for 10 s");
	}
}

static void
hello(void)
{
	uint8_t p[64];
	struct proto_builder b;
	struct proto_hdr h;
	double t0 = mono_s();

	epoch++;
	hdr(&h, PROTO_T_HELLO, 0);
	proto_build_begin(&b, p, sizeof(p), &h);
	send_payload(p, proto_build_end(&b));
	while (statuses == 0) {
		poll_rx();
		if (mono_s() - t0 > 5)
			fail("the shard did not answer HELLO");
	}
	seq = 1;
	acked = 0;
}

/* Begin the next control message (seq) in @p buf, within the window. */
static void
ctrl_begin(struct proto_builder *b, uint8_t *buf, uint32_t cap, uint8_t type)
{
	struct proto_hdr h;

	window(48);
	hdr(&h, type, seq++);
	proto_build_begin(b, buf, cap, &h);
}

static void
evict(uint64_t batch, uint64_t prompt, uint32_t first)
{
	static uint8_t p[PROTO_PAYLOAD_MAX];
	struct proto_evict_hdr eh = {batch, 1, G, 0};
	struct proto_builder b;
	uint32_t t;

	ctrl_begin(&b, p, sizeof(p), PROTO_T_EVICT);
	proto_build_evict_hdr(&b, &eh);
	for (t = 0; t < G; t++) {
		struct proto_evict_entry e = {prompt, first + t, 1};

		proto_build_evict_entry(&b, &e);
	}
	send_payload(p, proto_build_end(&b));
}

/* A prompt's columns down to L2 (they are whole: its batches up to @p evict_count). */
static void
l2_down_prompt(uint64_t prompt, uint64_t evict_count)
{
	static uint8_t p[PROTO_PAYLOAD_MAX];
	struct proto_builder b;
	uint32_t c;

	ctrl_begin(&b, p, sizeof(p), PROTO_T_L2_DOWN);
	for (c = 0; c < PROMPT_TOKENS / G; c++) {
		struct proto_l2col col = {.key = l2_key++ % L2_KEYS + 1, .parent = 1, .isolation_id = 1,
					  .prompt_id = prompt, .evict_count = evict_count,
					  .first_use_ns = 1, .start_token_idx = c * G, .num_tokens = G};

		proto_build_l2_down(&b, &col);
		l2_sent++;
	}
	send_payload(p, proto_build_end(&b));
}

static void
delete_prompt(uint64_t prompt, uint64_t evict_count)
{
	uint8_t p[128];
	struct proto_delete d = {prompt, evict_count, 0, PROMPT_TOKENS - 1, 0};
	struct proto_builder b;

	ctrl_begin(&b, p, sizeof(p), PROTO_T_DELETE);
	proto_build_delete(&b, &d);
	send_payload(p, proto_build_end(&b));
}

/*
 * Write the headers of an EVICT_DATA frame at @p p whose @p n stream bytes,
 * at @p off of batch @p batch's @p stream, are in place already: L2-L4,
 * the message header (the wafer's epoch: 0 here) and the data header (its
 * stream: the driver epoch of the HELLO).
 * Returns the frame's length.
 */
static uint32_t
data_frame(uint8_t *p, uint64_t batch, uint32_t off, uint32_t n, uint32_t stream)
{
	uint32_t l4 = proto_l2l4_len(&adata);
	struct proto_data_hdr dh = {batch, 0, off, stream, epoch};
	struct proto_hdr h = {.version = PROTO_VERSION, .type = PROTO_T_EVICT_DATA};
	struct proto_builder b;

	proto_build_begin(&b, p + l4, PROTO_HDR_LEN + PROTO_DATA_HDR_LEN + n, &h);
	proto_build_data_hdr(&b, &dh);
	proto_build_bytes(&b, p + l4 + b.len, n);
	proto_build_end(&b);
	proto_write_l2l4(p, &adata, b.len);
	return l4 + b.len;
}

/*
 * A batch's stream as EVICT_DATA frames: the next frames of the ring, each
 * taken when the shard has let go of it (its reference count is back to
 * ours alone), its headers rewritten for this piece of the stream. Returns
 * the frames sent.
 */
static uint64_t
batch_data(uint64_t batch)
{
	uint32_t stream = G * bpt, off;
	uint64_t frames = 0;
	struct rte_mbuf *burst[32];
	uint16_t nb = 0;

	for (off = 0; off < stream; off += FRAME_PAYLOAD) {
		uint32_t n = stream - off < FRAME_PAYLOAD ? stream - off : FRAME_PAYLOAD;
		struct rte_mbuf *m = frame[next_frame++ % FRAMES];

		if (rte_mbuf_refcnt_read(m) != 1) {
			unsigned int k = 0;
			double t0 = mono_s();

			tx_all(burst, nb);
			nb = 0;
			while (rte_mbuf_refcnt_read(m) != 1) {
				poll_rx();
				if (past(t0, 10, &k))
					fail("the shard kept a frame for 10 s");
			}
		}
		m->data_len = (uint16_t)data_frame(rte_pktmbuf_mtod(m, uint8_t *), batch, off, n, stream);
		m->pkt_len = m->data_len;
		rte_mbuf_refcnt_update(m, 1); /* the shard's, dropped when it frees it */
		burst[nb++] = m;
		if (nb == 32) {
			tx_all(burst, nb);
			nb = 0;
		}
		frames++;
	}
	tx_all(burst, nb);
	return frames;
}

/* The frame ring: whole frames of FRAME_PAYLOAD stream bytes each. */
static void
frames_init(void)
{
	uint32_t l4 = proto_l2l4_len(&adata), k;
	unsigned int i;

	fpool = rte_pktmbuf_pool_create("bench_frames", FRAMES, 0, 0,
					(uint16_t)(RTE_PKTMBUF_HEADROOM + PROTO_FRAME_MAX),
					(int)rte_socket_id());
	if (fpool == NULL || rte_pktmbuf_alloc_bulk(fpool, frame, FRAMES) != 0)
		fail("no memory for the frames");
	for (i = 0; i < FRAMES; i++) {
		uint8_t *p = (uint8_t *)rte_pktmbuf_append(frame[i], (uint16_t)(l4 + PROTO_HDR_LEN +
					PROTO_DATA_HDR_LEN + FRAME_PAYLOAD));

		for (k = 0; k < FRAME_PAYLOAD; k++)
			p[l4 + PROTO_HDR_LEN + PROTO_DATA_HDR_LEN + k] = (uint8_t)(i * 31 + k * 7);
		data_frame(p, 1, 0, FRAME_PAYLOAD, FRAME_PAYLOAD);
	}
}

/* Where frame @p i's payload is (the baseline copies from there). */
static const uint8_t *
frame_payload(unsigned int i)
{
	return rte_pktmbuf_mtod_offset(frame[i % FRAMES], const uint8_t *,
				       proto_l2l4_len(&adata) + PROTO_HDR_LEN + PROTO_DATA_HDR_LEN);
}

static uint64_t
shard_stat(size_t off)
{
	return __atomic_load_n((uint64_t *)((uint8_t *)&kvss.stats[SHARD_LCORE] + off),
			       __ATOMIC_RELAXED);
}
#define STAT(f) shard_stat(offsetof(struct kvss_lcore_stats, f))

/* Start the shard lcore over a fresh store of @p B bytes per token. */
static void
shard_start(uint32_t B)
{
	struct kvstore_params *kp = &shard0->cfg->store;
	size_t sz;

	kp->cache[0].bytes_per_token = B;
	kp->cache[0].capacity_tokens = (uint64_t)(256u << 20) / B;
	sz = kvstore_memsize(kp);
	shard0->store_mem = rte_zmalloc("bench_store", sz, 64);
	if (shard0->store_mem == NULL ||
	    (shard0->store = kvstore_init(shard0->store_mem, sz, kp)) == NULL)
		fail("no memory for the store (raise -m)");
	memset(&kvss.stats[SHARD_LCORE], 0, sizeof(kvss.stats[SHARD_LCORE]));
	__atomic_store_n(&kvss.quit, 0, __ATOMIC_RELAXED);
	bpt = B;
	if (l2_every) {
		char err[512];

		shard0->cfg->l2.column = G;
		shard0->cfg->l2.queue_depth = 64;
		shard0->cfg->l2.op_timeout_ms = 10000; /* the configuration's default */
		shard0->cfg->l2.capacity_tokens[0] = (uint64_t)L2_SLOTS * G;
		unlink(shard0->cfg->l2.path);
		if (shard_levels_open(shard0, err, sizeof(err)) != 0)
			fail(err);
		l2_sent = l2_done = 0;
	}
	if (rte_eal_remote_launch(kvss_shard_ingest, NULL, SHARD_LCORE) != 0)
		fail("cannot launch the shard lcore");
	statuses = 0;
	hello();
}

static void
shard_stop(void)
{
	__atomic_store_n(&kvss.quit, 1, __ATOMIC_RELAXED);
	rte_eal_wait_lcore(SHARD_LCORE);
	shard_levels_close(shard0);
	poll_rx();
	rte_pktmbuf_free_bulk(held, nheld);
	nheld = 0;
	/* Refill frames still in flight hold store memory: take them first. */
	while (kvss_refills_in_flight() > 0) {
		poll_rx();
		rte_pktmbuf_free_bulk(held, nheld);
		nheld = 0;
	}
	rte_free(shard0->store_mem);
	shard0->store = NULL;
	shard0->store_mem = NULL;
}

/*
 * Ingest @p total bytes: prompts of PROMPT_TOKENS tokens in two halves of
 * the capacity; before a half is written again, its prompts are deleted.
 * Returns bytes per second; *@p fps gets frames per second, *@p busy_share the
 * share of the shard lcore's cycles spent on polls that found frames.
 */
static double
ingest(uint64_t total, double *fps, double *busy_share)
{
	uint64_t cap = shard0->cfg->store.cache[0].capacity_tokens;
	uint64_t per_half = cap / 2 / PROMPT_TOKENS, batch = 0, frames = 0, done = 0;
	uint64_t last[2][256] = {{0}}, gen = 0, i;
	uint64_t busy0 = STAT(busy_cycles), idle0 = STAT(idle_cycles), busy, idle;
	unsigned int k = 0;
	double t0, dt;

	if (per_half == 0 || per_half > 256)
		fail("capacity does not suit the prompt size");
	t0 = mono_s();
	/* Generation g fills half g % 2 with prompts g * 256 + 1, ...; the
	 * prompts of generation g - 2 are deleted first. Prompt ids are never
	 * reused (a DELETE and a later EVICT run on different queues). */
	while (done < total) {
		uint64_t half = gen % 2;

		for (i = 0; i < per_half; i++) {
			uint32_t tok;

			if (last[half][i] != 0 && l2_every && ((gen - 2) * 256 + i + 1) % l2_every == 0)
				l2_down_prompt((gen - 2) * 256 + i + 1, last[half][i]);
			if (last[half][i] != 0)
				delete_prompt((gen - 2) * 256 + i + 1, last[half][i]);
			for (tok = 0; tok < PROMPT_TOKENS; tok += G) {
				evict(++batch, gen * 256 + i + 1, tok);
				frames += batch_data(batch);
				done += (uint64_t)G * bpt;
			}
			last[half][i] = batch;
		}
		gen++;
	}
	last_gen = gen - 1;
	/* Done when every frame is stored and every EVICT acknowledged (and
	 * every column sent down is on disk). */
	while (STAT(data_frames) < frames || acked + 1 < seq || l2_done < l2_sent) {
		poll_rx();
		if (past(t0, 60, &k))
			fail("ingest did not finish in 60 s");
	}
	dt = mono_s() - t0;
	last_batch = batch;
	busy = STAT(busy_cycles) - busy0;
	idle = STAT(idle_cycles) - idle0;
	*busy_share = busy + idle ? (double)busy / (double)(busy + idle) : 0;
	if (STAT(data_dropped) || STAT(batches_lost) || STAT(lost_tokens) || STAT(queue_full) ||
	    STAT(out_of_window) || STAT(no_mbuf) || STAT(tx_drops) || bad) {
		fprintf(stderr,
			"bench_shard: data dropped %" PRIu64 ", batches lost %" PRIu64
			", queue full %" PRIu64 ", out of window %" PRIu64 ", no mbuf %" PRIu64
			", tx drops %" PRIu64 ", bad answers %" PRIu64 "\n",
			STAT(data_dropped), STAT(batches_lost), STAT(queue_full), STAT(out_of_window),
			STAT(no_mbuf), STAT(tx_drops), bad);
		fail("ingest: the shard dropped or lost something");
	}
	*fps = (double)frames / dt;
	return (double)done / dt;
}

/* REFILLs of REFILL_TOKENS-token pieces of the prompts the last ingest left. */
static double
refill(uint64_t total)
{
	uint64_t cap = shard0->cfg->store.cache[0].capacity_tokens;
	uint64_t per_half = cap / 2 / PROMPT_TOKENS, sent = 0, want, id = 0;
	unsigned int k = 0;
	double t0;

	want = total / ((uint64_t)REFILL_TOKENS * bpt);
	refill_bytes = dones = 0;
	t0 = mono_s();
	while (dones < want) {
		if (sent < want && sent - dones < REFILLS_OUT) {
			static uint8_t p[256];
			uint64_t r = id++, per_prompt = PROMPT_TOKENS / REFILL_TOKENS;
			struct proto_refill_req rq = {r + 1, last_batch, 7, 0, 0, 1};
			struct proto_refill_chunk ch = {last_gen * 256 + (r / per_prompt) % per_half + 1,
							 (uint32_t)(r % per_prompt) * REFILL_TOKENS,
							 REFILL_TOKENS};
			struct proto_builder b;

			ctrl_begin(&b, p, sizeof(p), PROTO_T_REFILL);
			proto_build_refill_req(&b, &rq);
			proto_build_refill_chunk(&b, &ch);
			send_payload(p, proto_build_end(&b));
			sent++;
		}
		poll_rx();
		if (past(t0, 60, &k))
			fail("refills did not finish in 60 s");
	}
	if (bad || refill_bytes != want * REFILL_TOKENS * bpt)
		fail("refill: a REFILL_DONE was not OK, or bytes are missing");
	return (double)refill_bytes / (mono_s() - t0);
}

/* Baselines: memcpy of @p total bytes in pieces of @p piece on one core, from
 * the frames' payloads, or (@p from not NULL) from @p from_len bytes there. */
static double
memcpy_rate(const uint8_t *from, uint64_t from_len, uint64_t total, uint32_t piece)
{
	static uint8_t *dst;
	uint64_t done = 0, at = 0, d = 0, fi = 0;
	double t0;

	if (dst == NULL && (dst = rte_malloc("bench_dst", DST_BYTES, 64)) == NULL)
		fail("no memory for the baseline");
	t0 = mono_s();
	while (done < total) {
		const uint8_t *s;

		if (from != NULL) {
			if (at + piece > from_len)
				at = 0;
			s = from + at;
			at += piece;
		} else {
			s = frame_payload((unsigned int)fi++);
		}
		if (d + piece > DST_BYTES)
			d = 0;
		memcpy(dst + d, s, piece);
		d += piece;
		done += piece;
	}
	return (double)total / (mono_s() - t0);
}

static void
ports(void)
{
	static struct rte_ring *g2s, *s2g;
	struct rte_eth_conf conf = {0};
	int sp, gp;
	uint16_t p;

	g2s = rte_ring_create("bench_g2s", 4096, (int)rte_socket_id(), RING_F_SP_ENQ | RING_F_SC_DEQ);
	s2g = rte_ring_create("bench_s2g", 4096, (int)rte_socket_id(), RING_F_SP_ENQ | RING_F_SC_DEQ);
	if (g2s == NULL || s2g == NULL)
		fail("rings");
	sp = rte_eth_from_rings("net_ring_bsh", &g2s, 1, &s2g, 1, (unsigned int)rte_socket_id());
	gp = rte_eth_from_rings("net_ring_bgen", &s2g, 1, &g2s, 1, (unsigned int)rte_socket_id());
	if (sp < 0 || gp < 0) {
		fail(rte_strerror(rte_errno));
	}
	shard0->cfg->port = (uint16_t)sp;
	gport = (uint16_t)gp;
	for (p = 0; p < 2; p++) {
		uint16_t port = p ? gport : shard0->cfg->port;

		if (rte_eth_dev_configure(port, 1, 1, &conf) != 0 ||
		    rte_eth_rx_queue_setup(port, 0, 1024, SOCKET_ID_ANY, NULL, kvss.pool) != 0 ||
		    rte_eth_tx_queue_setup(port, 0, 1024, SOCKET_ID_ANY, NULL) != 0 ||
		    rte_eth_dev_start(port) != 0)
			fail("port setup");
	}
}

static void
addresses(void)
{
	const struct kvss_endpoint *w = &shard0->cfg->wafer, *s = &shard0->cfg->addr;

	memcpy(actl.src_mac, w->mac, 6);
	memcpy(actl.dst_mac, s->mac, 6);
	actl.src_ip = w->ipv4;
	actl.dst_ip = s->ipv4;
	actl.src_port = actl.dst_port = kvss.cfg.udp.ctrl;
	adata = actl;
	adata.src_port = adata.dst_port = kvss.cfg.udp.evict;
}

/*
 * kvss_shard_ingest_1k_l2: the 1 KiB ingest while the shard's tier thread
 * writes every l2_every-th prompt's columns to L2 (a file in a directory
 * of its own under /var/tmp, O_DIRECT: kvdisk refuses /var/tmp itself,
 * which anyone can write), against the same ingest alone (@p alone, this
 * run's).
 */
static void
bench_ingest_l2(double alone, unsigned int every)
{
	double best = 0, fps, share, wbest = 0;
	int r;

	/* shard_levels_open makes the directory 0700; one that is there already
	 * (another user's, say) is kvdisk_open's to refuse. */
	snprintf(shard0->cfg->l2.path, sizeof(shard0->cfg->l2.path),
		 "/var/tmp/kvss_bench_l2_%d/shard.l2", (int)getpid());
	l2_every = every;
	for (r = 0; r < RUNS; r++) {
		double t0, v, w;

		shard_start(1024);
		t0 = mono_s();
		v = ingest(INGEST_BYTES, &fps, &share);
		w = (double)l2_sent * G * 1024 / (mono_s() - t0);
		if (v > best) {
			best = v;
			wbest = w;
		}
		shard_stop();
	}
	l2_every = 0;
	unlink(shard0->cfg->l2.path);
	*strrchr(shard0->cfg->l2.path, '/') = '\0';
	rmdir(shard0->cfg->l2.path);
	shard0->cfg->l2.path[0] = '\0'; /* nothing left for fail() to remove */
	printf("bench: kvss_shard_ingest_1k_l2 %.2f GB/s (baseline %.2f GB/s, ratio %.2f)\n", best / 1e9,
	       alone / 1e9, best / alone);
	printf("bench: kvss_shard_ingest_1k_l2_writes %.0f MB/s\n", wbest / 1e6);
	fflush(stdout);
}

static double ingest_1k_best;
static const char *name_sfx = ""; /* "_hugepages" when in them */

/*
 * What a token costs in memory, copied into the store (its slot and its
 * share of the store's books: kvstore_memsize over the capacity) against
 * kept as the frames it came in (zero-copy ingest: a batch's frames, each a
 * whole element of the port's mbuf pool, over its tokens, and the same
 * books). Tokens deleted out of a frame that others still use would cost
 * more again (up to a frame a token); not counted here.
 */
static void
memory_per_token(const char *name, uint32_t B)
{
	const struct kvstore_params *kp = &shard0->cfg->store;
	double copy = (double)kvstore_memsize(kp) / (double)kp->cache[0].capacity_tokens;
	double books = copy - B;
	uint64_t frames = ((uint64_t)G * B + FRAME_PAYLOAD - 1) / FRAME_PAYLOAD;
	double elt = kvss.pool->header_size + kvss.pool->elt_size + kvss.pool->trailer_size;
	double keep = (double)frames * elt / G + books;

	printf("bench: %s_zerocopy_bytes_per_token %.0f bytes (baseline %.0f bytes copied, ratio %.3f)\n",
	       name, keep, copy, keep / copy);
}

static void
bench_ingest(const char *name, uint32_t B, int with_refill)
{
	double best = 0, best_fps = 0, best_mc = 0, best_rf = 0, best_rmc = 0, fps, share, busy = 0;
	int r;

	shard_start(B);
	for (r = 0; r < RUNS; r++) {
		double v = ingest(INGEST_BYTES, &fps, &share);
		double mc = memcpy_rate(NULL, 0, INGEST_BYTES, FRAME_PAYLOAD);

		if (v > best) {
			best = v;
			best_fps = fps;
			busy = share;
		}
		if (mc > best_mc)
			best_mc = mc;
		if (with_refill) {
			/* The store's slots as the source of the copying refill. */
			double rf = refill(REFILL_BYTES);
			double rmc = memcpy_rate(shard0->store_mem, (256u << 20), INGEST_BYTES / 2,
						 FRAME_PAYLOAD - 8);

			if (rf > best_rf)
				best_rf = rf;
			if (rmc > best_rmc)
				best_rmc = rmc;
		}
		/* The next run starts on a fresh stream (a new driver epoch). */
		shard_stop();
		if (r + 1 < RUNS)
			shard_start(B);
	}
	if (B == 1024)
		ingest_1k_best = best;
	printf("bench: %s %.2f GB/s (baseline %.2f GB/s, ratio %.2f)\n", name, best / 1e9,
	       best_mc / 1e9, best / best_mc);
	printf("bench: %s_lcore_busy %.2f share\n", name, busy);
	memory_per_token(name, B);
	if (with_refill) {
		printf("bench: kvss_shard_ingest_frames_16k%s %.0f frames/s\n", name_sfx, best_fps);
		printf("bench: kvss_shard_refill_16k%s %.2f GB/s (baseline %.2f GB/s, ratio %.2f)\n",
		       name_sfx, best_rf / 1e9, best_rmc / 1e9, best_rf / best_rmc);
	}
	fflush(stdout);
}

int
main(int argc, char **argv)
{
	char prefix[64], err[512];
	/* BENCH_SHARD_HUGE=1: in hugepages (scripts/bench-shard-huge.sh), the
	 * figures named _hugepages; else in 4 KiB pages, as before. */
	const char *huge = getenv("BENCH_SHARD_HUGE");
	bool in_huge = huge != NULL && strcmp(huge, "1") == 0;
	/* BENCH_SHARD_IOVA=pa|va: EAL's IOVA mode (unset: EAL's own choice, PA
	 * in hugepages on this machine, where refills look each buffer's up). */
	const char *iova = getenv("BENCH_SHARD_IOVA");
	char iova_arg[32];
	char *eal[] = {"bench_shard", "--no-pci", in_huge ? "--huge-unlink" : "--no-huge", "-m", "1024",
		       "--no-telemetry", "--log-level", "lib.eal:error", "-l", "0-1", prefix,
		       iova != NULL ? iova_arg : NULL, NULL};
	const char *cfg = argc > 1 ? argv[1] : "bench/shard.cfg";
	const char *only = getenv("BENCH_SHARD_ONLY");

	snprintf(prefix, sizeof(prefix), "--file-prefix=bench_shard_%d", (int)getpid());
	snprintf(iova_arg, sizeof(iova_arg), "--iova-mode=%s", iova != NULL ? iova : "");
	if (rte_eal_init((int)(sizeof(eal) / sizeof(eal[0])) - (iova != NULL ? 1 : 2), eal) < 0) {
		fprintf(stderr, "bench_shard: EAL init failed: %s\n", rte_strerror(rte_errno));
		return 1;
	}
	if (rte_lcore_count() < 2)
		fail("needs two lcores");
	if (kvss_config_load(cfg, &kvss.cfg, err, sizeof(err)) != 0)
		fail(err);
	kvss.pool = rte_pktmbuf_pool_create("kvss_pool", 8191, 256, 0,
					    (uint16_t)(RTE_PKTMBUF_HEADROOM + PROTO_FRAME_MAX),
					    (int)rte_socket_id());
	gpool = rte_pktmbuf_pool_create("bench_pool", 16383, 256, 0, RTE_PKTMBUF_HEADROOM + 2048,
					(int)rte_socket_id());
	if (kvss.pool == NULL || gpool == NULL)
		fail("no memory for mbufs");
	ports();
	addresses();
	if (only != NULL && strcmp(only, "1k") != 0 && strcmp(only, "1k_l2") != 0 && strcmp(only, "16k") != 0)
		fail("BENCH_SHARD_ONLY: want 1k, 1k_l2 or 16k");
	frames_init();
	if (huge != NULL && !in_huge)
		fail("BENCH_SHARD_HUGE: want 1 (hugepages) or unset");
	if (in_huge)
		name_sfx = "_hugepages";
	if (only == NULL || strncmp(only, "1k", 2) == 0)
		bench_ingest(in_huge ? "kvss_shard_ingest_1k_hugepages" : "kvss_shard_ingest_1k", 1024, 0);
	if ((only == NULL && !in_huge) || (only != NULL && strcmp(only, "1k_l2") == 0))
		bench_ingest_l2(ingest_1k_best, 16);
	if (only == NULL || strcmp(only, "16k") == 0)
		bench_ingest(in_huge ? "kvss_shard_ingest_16k_hugepages" : "kvss_shard_ingest_16k", 16384, 1);
	rte_eth_dev_stop(gport);
	rte_eth_dev_stop(shard0->cfg->port);
	kvss_eal_stop();
	return 0;
}
