/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The shard: its control stream, evict data and refills.
 *
 * Control messages are accepted strictly in seq order (early ones held in a
 * window of 64, duplicates ignored, a cumulative ACK after every burst that
 * had any). Accepted messages go, in order, to two queues as the design's two
 * threads do: RESERVE and EVICT to the evict queue, executed in order (an
 * EVICT with no room waits for DELETEs, then answers NO_SPACE after the space
 * timeout); DELETE and REFILL to the refill queue, executed in order, each
 * waiting for its evict_count. EVICT_DATA is stored as it comes; fragments
 * of a batch whose EVICT has not arrived are held for the batch timeout; a
 * batch not whole in time completes with loss and TOKEN_LOST.
 *
 * The refill queue runs on the refill lcore when the port has a second TX
 * queue for it (else on the ingest lcore). REFILL_DATA leaves as a header
 * mbuf chained to mbufs with external buffers pointing into the store,
 * released through their free callback, which ends the refill. kvstore has
 * one writer: the ingest lcore applies the refill queue's DELETEs when the
 * refill lcore hands them over.
 */
#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>
#include <rte_pause.h>
#include <rte_ring.h>
#include <unistd.h>

#include "kvss.h"

#define BURST 32
#define WINDOW 64	/* early control messages held */
#define QMAX 1024	/* messages in each queue */
/* REFILLs may run before this many messages of the refill queue at most. */
#define REFILL_AHEAD 64
#define EARLY_MAX 1024	/* data frames held before their EVICT */

struct fifo {
	struct rte_mbuf *m[QMAX];
	uint64_t seq[QMAX];   /* control seq of each message */
	uint64_t since[QMAX]; /* when the head first had to wait (0: not yet) */
	uint32_t head, tail;
};

static struct {
	uint64_t next_seq;		     /* expected control seq (1 after HELLO) */
	struct rte_mbuf *window[WINDOW];     /* early messages by seq % WINDOW */
	uint64_t window_seq[WINDOW];
	int ack_due;
	uint64_t ack_sent; /* the last cum_seq sent */
	struct fifo evictq, refillq;
	struct rte_mbuf *early[EARLY_MAX];
	uint64_t early_t[EARLY_MAX];
	uint32_t nearly;
	uint64_t batch_t[256]; /* arrival of each open batch's EVICT, by batch_no % 256 */
	uint64_t queued_batch;	/* highest batch_no of an EVICT accepted into the evict queue */
	struct proto_msg msg, msg2;
	uint64_t hz;
} S;

/* ---- Sending -------------------------------------------------------------------- */

/*
 * A full TX ring is back-pressure, not loss: a refill frame dropped here
 * would cost the whole refill. Retry, yielding the core in idle mode, for up
 * to 100 ms; only a port that takes nothing for that long, or whose link is
 * down, loses the frame.
 */
void
kvss_tx_one(struct kvss_lcore_stats *st, uint16_t queue, struct rte_mbuf *m, uint32_t len)
{
	uint64_t t0 = 0, first = 0, hz = rte_get_tsc_hz();
	unsigned int tries = 0;

	while (kvss_tx_burst(kvss.cfg.shard.port, queue, &m, 1) != 1) {
		uint64_t now = rte_get_tsc_cycles();

		if (first == 0)
			first = now;
		if (kvss_gate_shut() && !kvss_quitting() && now - first < hz) {
			/* Not a full ring: memif's control has the port (portgate.c). */
			kvss_wait_turn(&tries);
			continue;
		}
		if (t0 == 0) {
			struct rte_eth_link link;

			/* No peer (a memif driver that went away): nothing to wait for. */
			if (rte_eth_link_get_nowait(kvss.cfg.shard.port, &link) == 0 &&
			    !link.link_status) {
				rte_pktmbuf_free(m);
				st->tx_drops++;
				return;
			}
			t0 = now;
			st->tx_full++;
		}
		if (now - t0 > hz / 10 || kvss_quitting()) {
			rte_pktmbuf_free(m);
			st->tx_drops++;
			return;
		}
		kvss_wait_turn(&tries);
	}
	st->tx_frames++;
	st->tx_bytes += len;
}

/* The reply to a control message that came from @d. */
static void
reply_addr(struct proto_addr *a, const struct proto_addr *d)
{
	memcpy(a->dst_mac, d->src_mac, 6);
	memcpy(a->src_mac, kvss.cfg.shard.addr.mac, 6);
	a->dst_ip = d->src_ip;
	a->src_ip = kvss.cfg.shard.addr.ipv4;
	a->dst_port = d->src_port;
	a->src_port = kvss.cfg.udp.ctrl;
	a->has_vlan = kvss.cfg.shard.addr.vlan != 0;
	a->vlan_tci = kvss.cfg.shard.addr.vlan;
}

/* Send one control payload back to @to (a driver's control source), on @queue. */
static void
send_control_to(struct kvss_lcore_stats *st, uint16_t queue, const struct proto_addr *to,
		const uint8_t *payload, uint32_t len)
{
	struct proto_addr a;
	struct rte_mbuf *m;

	reply_addr(&a, to);
	m = proto_mbuf_frame(kvss.pool, &a, payload, len);
	if (m == NULL) {
		st->no_mbuf++;
		return;
	}
	kvss_tx_one(st, queue, m, len);
}

/* From the ingest lcore: to where the driver's last control came from. */
static void
send_control(struct kvss_lcore_stats *st, const uint8_t *payload, uint32_t len)
{
	send_control_to(st, 0, &kvss.driver_addr, payload, len);
}

static void
begin_reply(struct proto_builder *b, uint8_t *buf, uint32_t cap, uint8_t type)
{
	struct proto_hdr h = {.type = type, .model_id = kvss.cfg.shard.model,
			      .shard_id = kvss.cfg.shard.id, .epoch = kvss.epoch};

	proto_build_begin(b, buf, cap, &h);
}

uint32_t
kvss_payload_cap(void)
{
	return kvss.cfg.mtu - PROTO_IP4_LEN - PROTO_UDP_LEN;
}

static void
send_status(struct kvss_lcore_stats *st)
{
	uint8_t buf[PROTO_HDR_LEN + PROTO_STATUS_LEN + KVSTORE_MAX_CACHES * PROTO_CACHE_INFO_LEN];
	const struct kvstore_params *kp = kvstore_params(kvss.store);
	struct proto_status s = {
		.batches_complete = kvstore_batches_complete(kvss.store),
		.last_seq_done = S.next_seq ? S.next_seq - 1 : 0,
		.uptime_ns = (rte_get_tsc_cycles() - kvss.start_tsc) * 1000000000ull / S.hz,
		.flags = S.evictq.head != S.evictq.tail && S.evictq.since[S.evictq.head % QMAX]
				 ? PROTO_STATUS_F_STALLED : 0,
		.driver_epoch = kvss.driver_epoch};
	struct proto_builder b;
	uint16_t c;

	begin_reply(&b, buf, sizeof(buf), PROTO_T_STATUS);
	proto_build_status(&b, &s);
	for (c = 0; c < kp->num_caches; c++) {
		struct kvstore_cache_stats cs;
		struct proto_cache_info ci;

		kvstore_cache_stats(kvss.store, c, &cs);
		ci = (struct proto_cache_info){c, cs.num_buffers, cs.bytes_per_token,
					       cs.capacity_tokens, cs.stored_tokens, cs.prompts};
		proto_build_cache_info(&b, &ci);
	}
	send_control(st, buf, proto_build_end(&b));
	st->status_sent++;
}

/*
 * The cumulative ACK: every message accepted, up to the oldest EVICT or
 * RESERVE not yet run (one waiting for space, or not reached). PROTOCOL.md
 * allows "executed or queued in order". The evict queue is acknowledged as
 * it runs: the driver sends a batch's data only a few batches past what an
 * ACK covers, so the driver's window bounds the EVICTs and data the shard
 * cannot place yet. DELETEs and REFILLs are acknowledged once queued, as the
 * refill lcore's ring has always had them: one waiting for its batch has
 * arrived, and holding its ACK back made it look lost (the driver resent it)
 * and held back the ACK of every EVICT after it, so the driver withheld
 * data the shard could store.
 * The refill queue's own bound (QMAX) then bounds them: beyond it a message
 * is dropped unacknowledged (queue_full) and comes again.
 */
static uint64_t
ack_value(void)
{
	uint64_t a = S.next_seq ? S.next_seq - 1 : 0;

	if (a == 0)
		return 0;
	if (S.evictq.head != S.evictq.tail && S.evictq.seq[S.evictq.head % QMAX] - 1 < a)
		a = S.evictq.seq[S.evictq.head % QMAX] - 1;
	return a;
}

static void
send_ack(struct kvss_lcore_stats *st)
{
	uint8_t buf[PROTO_HDR_LEN + PROTO_ACK_LEN];
	struct proto_ack a = {ack_value()};
	struct proto_builder b;

	begin_reply(&b, buf, sizeof(buf), PROTO_T_ACK);
	proto_build_ack(&b, &a);
	send_control(st, buf, proto_build_end(&b));
	S.ack_sent = a.cum_seq;
	st->acks++;
}

/* Records of one type, packed into as few frames as the MTU allows. */
struct batcher {
	struct proto_builder b;
	uint8_t buf[PROTO_PAYLOAD_MAX];
	uint8_t type;
	uint16_t queue;
	const struct proto_addr *to; /* NULL: the driver's last control source */
	struct kvss_lcore_stats *st;
};

static void
batcher_flush(struct batcher *bt)
{
	if (bt->b.count > 0)
		send_control_to(bt->st, bt->queue, bt->to ? bt->to : &kvss.driver_addr, bt->buf,
				proto_build_end(&bt->b));
	begin_reply(&bt->b, bt->buf, kvss_payload_cap(), bt->type);
}

static void
batcher_init(struct batcher *bt, uint8_t type, struct kvss_lcore_stats *st)
{
	bt->type = type;
	bt->st = st;
	bt->queue = 0;
	bt->to = NULL;
	begin_reply(&bt->b, bt->buf, kvss_payload_cap(), type);
}

static void
add_error(struct batcher *bt, uint64_t seq, uint64_t prompt, uint32_t token, uint16_t cache,
	  uint16_t code)
{
	struct proto_error e = {seq, prompt, token, cache, code};

	if (proto_build_error(&bt->b, &e) == -ENOSPC) {
		batcher_flush(bt);
		proto_build_error(&bt->b, &e);
	}
	bt->st->errors[code < PROTO_E_MAX ? code : 0]++;
}

/* ---- The evict queue ---------------------------------------------------------------- */

static int
store_data(struct rte_mbuf *m, struct proto_msg *msg)
{
	uint32_t off = msg->data_off, left = msg->data_len, so = msg->u.data.stream_offset;
	const struct rte_mbuf *seg = m;
	int rc = 0;

	/* Walk the chain: each contiguous piece goes in with its stream offset. */
	while (seg != NULL && off >= seg->data_len) {
		off -= seg->data_len;
		seg = seg->next;
	}
	while (seg != NULL && left > 0 && rc == 0) {
		uint32_t n = seg->data_len - off < left ? seg->data_len - off : left;

		rc = kvstore_data(kvss.store, msg->u.data.batch_no, msg->u.data.cache_id, so,
				  msg->u.data.stream_len, rte_pktmbuf_mtod_offset(seg, uint8_t *, off), n);
		so += n;
		left -= n;
		off = 0;
		seg = seg->next;
	}
	return rc;
}

static void
retry_early(struct kvss_lcore_stats *st, uint64_t now)
{
	uint32_t i = 0;

	while (i < S.nearly) {
		int rc = -EAGAIN;

		if (proto_parse_mbuf(S.early[i], &kvss.cfg.udp, &S.msg2) == PROTO_OK)
			rc = store_data(S.early[i], &S.msg2);
		/*
		 * Held while its EVICT has not arrived (for the batch timeout), or
		 * while it waits in the evict queue for room (as long as it waits).
		 */
		if (rc == -EAGAIN &&
		    (S.msg2.u.data.batch_no <= S.queued_batch ||
		     now - S.early_t[i] < S.hz / 1000 * kvss.cfg.shard.batch_timeout_ms)) {
			i++;
			continue;
		}
		if (rc == -EAGAIN)
			st->data_expired++;
		else if (rc == 0)
			st->data_frames++;
		else
			st->data_dropped++;
		rte_pktmbuf_free(S.early[i]);
		S.early[i] = S.early[--S.nearly];
		S.early_t[i] = S.early_t[S.nearly];
	}
}

/* Run the evict queue's head messages; stop at one that must wait. */
static void
run_evictq(struct kvss_lcore_stats *st, struct batcher *err, uint64_t now)
{
	struct fifo *q = &S.evictq;

	while (q->head != q->tail) {
		struct rte_mbuf *m = q->m[q->head % QMAX];
		struct proto_msg *msg = &S.msg2;
		uint16_t codes[PROTO_PAYLOAD_MAX / PROTO_EVICT_ENTRY_LEN];
		struct proto_evict_entry e[PROTO_PAYLOAD_MAX / PROTO_EVICT_ENTRY_LEN];
		unsigned int i, flags = 0;
		int rc;

		proto_parse_mbuf(m, &kvss.cfg.udp, msg);
		if (msg->hdr.type == PROTO_T_RESERVE) {
			for (i = 0; i < msg->hdr.count; i++) {
				struct proto_reserve r;

				proto_get_reserve(msg, i, &r);
				kvstore_reserve(kvss.store, &r);
			}
		} else {
			uint64_t *since = &q->since[q->head % QMAX];

			for (i = 0; i < msg->hdr.count; i++)
				proto_get_evict_entry(msg, i, &e[i]);
			if (*since && now - *since >= S.hz / 1000 * kvss.cfg.shard.space_timeout_ms)
				flags = KVSTORE_EVICT_FORCE; /* waited long enough: NO_SPACE */
			rc = kvstore_evict(kvss.store, msg->u.evict.batch_no, msg->u.evict.num_caches,
					   msg->u.evict.g, e, codes, flags);
			if (rc == -ENOSPC || rc == -EBUSY) {
				if (*since == 0)
					*since = now;
				st->evict_waits++;
				return; /* waits for DELETEs (or for batches to complete) */
			}
			S.batch_t[msg->u.evict.batch_no % 256] = now;
			if (rc == -EPROTO) {
				add_error(err, msg->hdr.seq, 0, 0, 0, PROTO_E_BAD_CACHE);
			} else if (rc != 0) {
				add_error(err, msg->hdr.seq, 0, 0, 0, PROTO_E_MALFORMED);
			} else {
				for (i = 0; i < msg->hdr.count; i++)
					if (codes[i] != 0)
						add_error(err, msg->hdr.seq, e[i].prompt_id, e[i].token_idx,
							  (uint16_t)(i % msg->u.evict.num_caches),
							  codes[i]);
				st->batches++;
			}
			*since = 0;
		}
		rte_pktmbuf_free(m);
		q->head++;
	}
}

struct lost_ctx {
	struct batcher *bt;
};

static void
on_lost(void *arg, uint16_t cache_id, uint64_t prompt_id, uint32_t token_idx)
{
	struct lost_ctx *l = arg;
	struct proto_lost r = {prompt_id, token_idx, cache_id};

	if (proto_build_lost(&l->bt->b, &r) == -ENOSPC) {
		batcher_flush(l->bt);
		proto_build_lost(&l->bt->b, &r);
	}
	l->bt->st->lost_tokens++;
}

/* Batches whose streams are not whole by the timeout complete with loss. */
static void
expire_batches(struct kvss_lcore_stats *st, uint64_t now)
{
	uint64_t b, limit = S.hz / 1000 * kvss.cfg.shard.batch_timeout_ms;
	static struct batcher lost;
	struct lost_ctx l = {&lost};
	int any = 0;

	while ((b = kvstore_oldest_open(kvss.store)) != 0 && now - S.batch_t[b % 256] >= limit) {
		if (!any)
			batcher_init(&lost, PROTO_T_TOKEN_LOST, st);
		any = 1;
		kvstore_batch_lose(kvss.store, b, on_lost, &l);
		st->batches_lost++;
	}
	if (any)
		batcher_flush(&lost);
}

/* ---- The refill queue ---------------------------------------------------------------- */

/* Apply a DELETE message (the kvstore writer's side); ERRORs to its sender. */
static void
apply_delete(struct kvss_lcore_stats *st, struct batcher *err, struct proto_msg *msg)
{
	unsigned int i;

	for (i = 0; i < msg->hdr.count; i++) {
		struct proto_delete d;
		int code;

		proto_get_delete(msg, i, &d);
		code = kvstore_delete(kvss.store, &d);
		if (code != 0)
			add_error(err, msg->hdr.seq, d.prompt_id, d.start_token_idx, d.cache_id,
				  (uint16_t)code);
		else
			st->deletes++;
	}
}

static void
run_refill_msg(struct kvss_lcore_stats *st, uint16_t queue, struct proto_msg *msg)
{
	static struct batcher done[RTE_MAX_LCORE];
	struct batcher *bt = &done[rte_lcore_id()];
	struct proto_refill_req rq;
	const uint8_t *ch;
	uint32_t off = 0;
	unsigned int i;

	batcher_init(bt, PROTO_T_REFILL_DONE, st);
	bt->queue = queue;
	bt->to = &msg->addr; /* to the REFILL's sender */
	while (proto_next_refill(msg, &off, &rq, &ch)) {
		struct proto_refill_chunk chunks[256];
		struct proto_refill_done rd = {rq.refill_id, 0, 0, 0};
		struct kvstore_refill *r = NULL;
		uint16_t code = 0;
		int64_t sent;

		for (i = 0; i < rq.num_chunks && i < 256; i++)
			proto_get_refill_chunk(ch, i, &chunks[i]);
		if (rq.num_chunks > 256)
			code = PROTO_E_MALFORMED;
		else
			r = kvstore_refill_begin(kvss.store, rq.cache_id, chunks, rq.num_chunks, &code);
		if (r == NULL && code == 0)
			code = PROTO_E_NO_SPACE; /* too many refills in flight */
		if (r != NULL) {
			sent = kvss_refill_send(st, queue, &rq, r);
			if (sent < 0) {
				code = PROTO_E_NO_SPACE;
			} else {
				rd.tokens = kvstore_refill_tokens(r);
				rd.bytes = (uint64_t)sent;
				st->refills++;
			}
		}
		rd.status = code;
		if (proto_build_refill_done(&bt->b, &rd) == -ENOSPC) {
			batcher_flush(bt);
			proto_build_refill_done(&bt->b, &rd);
		}
	}
	batcher_flush(bt);
}

/* Is every evict_count the message names complete? */
static int
gate_open(struct proto_msg *msg)
{
	uint64_t complete = kvstore_batches_complete(kvss.store);
	unsigned int i;

	if (msg->hdr.type == PROTO_T_DELETE) {
		for (i = 0; i < msg->hdr.count; i++) {
			struct proto_delete d;

			proto_get_delete(msg, i, &d);
			if (d.evict_count > complete)
				return 0;
		}
	} else {
		struct proto_refill_req rq;
		const uint8_t *ch;
		uint32_t off = 0;

		while (proto_next_refill(msg, &off, &rq, &ch))
			if (rq.evict_count > complete)
				return 0;
	}
	return 1;
}

/* Does the DELETE message @p del name a prompt that a chunk of @p refill reads? */
static int
touches(const struct proto_msg *del, const struct proto_msg *refill)
{
	struct proto_refill_req rq;
	const uint8_t *ch;
	uint32_t off = 0;
	unsigned int i, k;

	while (proto_next_refill(refill, &off, &rq, &ch))
		for (k = 0; k < rq.num_chunks; k++) {
			struct proto_refill_chunk c;

			proto_get_refill_chunk(ch, k, &c);
			for (i = 0; i < del->hdr.count; i++) {
				struct proto_delete d;

				proto_get_delete(del, i, &d);
				if (d.prompt_id == c.prompt_id)
					return 1;
			}
		}
	return 0;
}

/*
 * The head of the refill queue waits for its batches. A REFILL behind it
 * whose own batches are complete, and that reads no prompt a DELETE before
 * it names, runs now: that gives what running in order gives (a REFILL only
 * reads; a DELETE changes only the prompts it names), sooner. Otherwise a
 * small REFILL waits behind every DELETE of the sequences that just ended
 * until their last batches are stored.
 *
 * @p slot: the queue's first @p n messages, in order (NULL: ran already);
 * each that runs is freed and its slot set to NULL. The queue runs on one
 * lcore (ingest or refill), so one set of parsed messages serves.
 */
static void
run_ahead(struct kvss_lcore_stats *st, struct rte_mbuf **slot[], unsigned int n, uint16_t queue)
{
	static struct proto_msg msg[REFILL_AHEAD];
	const struct proto_msg *del[REFILL_AHEAD];
	unsigned int i, k, nd = 0;

	for (i = 0; i < n && i < REFILL_AHEAD; i++) {
		struct proto_msg *m = &msg[i];

		if (*slot[i] == NULL)
			continue;
		proto_parse_mbuf(*slot[i], &kvss.cfg.udp, m);
		if (m->hdr.type == PROTO_T_DELETE) {
			del[nd++] = m;
			continue;
		}
		/* The head; or a stale driver's (dropped when it is the head). */
		if (i == 0 || m->hdr.epoch != __atomic_load_n(&kvss.driver_epoch, __ATOMIC_ACQUIRE) ||
		    !gate_open(m) || m->hdr.epoch != __atomic_load_n(&kvss.driver_epoch, __ATOMIC_ACQUIRE))
			continue;
		for (k = 0; k < nd && !touches(del[k], m); k++)
			;
		if (k < nd)
			continue;
		run_refill_msg(st, queue, m);
		rte_pktmbuf_free(*slot[i]);
		*slot[i] = NULL;
		st->refills_ahead++;
	}
}

/*
 * Is a look past the waiting head worth it: have batches completed,
 * messages come or gone since the last look? (A look parses up to
 * REFILL_AHEAD messages; a poll loop would repeat it for nothing.)
 */
static int
ahead_changed(uint64_t came, uint64_t gone)
{
	static uint64_t seen[3] = {UINT64_MAX, UINT64_MAX, UINT64_MAX};
	uint64_t now[3] = {kvstore_batches_complete(kvss.store), came, gone};

	if (memcmp(now, seen, sizeof(now)) == 0)
		return 0;
	memcpy(seen, now, sizeof(now));
	return 1;
}

/* The refill queue on the ingest lcore (a port with one TX queue). */
static void
run_refillq(struct kvss_lcore_stats *st, struct batcher *err)
{
	struct fifo *q = &S.refillq;

	while (q->head != q->tail) {
		struct rte_mbuf *m = q->m[q->head % QMAX];
		struct proto_msg *msg = &S.msg2;

		if (m == NULL) {
			q->head++; /* it ran ahead */
			continue;
		}
		proto_parse_mbuf(m, &kvss.cfg.udp, msg);
		if (!gate_open(msg)) {
			struct rte_mbuf **slot[REFILL_AHEAD];
			uint32_t i, n = q->tail - q->head < REFILL_AHEAD ? q->tail - q->head : REFILL_AHEAD;

			if (n > 1 && ahead_changed(q->tail, q->head)) {
				for (i = 0; i < n; i++)
					slot[i] = &q->m[(q->head + i) % QMAX];
				run_ahead(st, slot, n, 0);
			}
			return;
		}
		if (msg->hdr.type == PROTO_T_DELETE)
			apply_delete(st, err, msg);
		else
			run_refill_msg(st, 0, msg);
		rte_pktmbuf_free(m);
		q->head++;
	}
}

/*
 * With a refill lcore: accepted DELETE and REFILL messages go to it over the
 * ingest_to_refill ring, in order; it gates each on its evict_count, builds
 * and sends refills on TX queue 1, and hands each DELETE back over
 * refill_to_ingest to the ingest lcore (kvstore's only writer); a REFILL
 * runs once every DELETE before it has been applied, so the refill queue
 * stays in order.
 */
static void
pass_to_refill(struct kvss_lcore_stats *st)
{
	struct fifo *q = &S.refillq;

	while (q->head != q->tail) {
		if (rte_ring_enqueue(kvss.ingest_to_refill, q->m[q->head % QMAX]) != 0) {
			st->ring_full++;
			return;
		}
		q->head++;
	}
}

static void
apply_posted_deletes(struct kvss_lcore_stats *st, struct batcher *err)
{
	void *p;

	while (rte_ring_dequeue(kvss.refill_to_ingest, &p) == 0) {
		struct rte_mbuf *m = p;

		proto_parse_mbuf(m, &kvss.cfg.udp, &S.msg2);
		if (S.msg2.hdr.epoch == kvss.driver_epoch)
			apply_delete(st, err, &S.msg2);
		else
			st->dropped_restart++;
		rte_pktmbuf_free(m);
		__atomic_fetch_add(&kvss.deletes_applied, 1, __ATOMIC_RELEASE);
	}
}

/*
 * Wait until the ingest lcore has applied the @p posted DELETEs the refill
 * lcore handed it: a REFILL runs only after every DELETE before it. (Each
 * DELETE waiting for its own application cost a round trip between the two
 * lcores: the refill queue fell behind by its whole ring.)
 */
static void
deletes_applied(uint64_t posted)
{
	unsigned int turns = 0;

	while (__atomic_load_n(&kvss.deletes_applied, __ATOMIC_ACQUIRE) < posted && !kvss_quitting())
		kvss_wait_turn(&turns);
}

int
kvss_shard_refill(void *arg)
{
	struct kvss_lcore_stats *st = &kvss.stats[rte_lcore_id()];
	static struct proto_msg msg; /* one per lcore: only this one runs here */
	struct rte_mbuf *pend[REFILL_AHEAD], *parsed = NULL;
	uint64_t posted = 0, came = 0, gone = 0;
	unsigned int empty = 0, np = 0, i, k;
	void *p;

	(void)arg;
	while (!kvss_quitting()) {
		uint64_t t0 = rte_get_tsc_cycles();

		/* The queue's first messages, in order; those that ran ahead go. */
		for (i = k = 0; i < np; i++)
			if (pend[i] != NULL)
				pend[k++] = pend[i];
		gone += np - k;
		np = k;
		while (np < REFILL_AHEAD && rte_ring_dequeue(kvss.ingest_to_refill, &p) == 0) {
			pend[np++] = p;
			came++;
		}
		if (np == 0) {
			rte_eth_tx_done_cleanup(kvss.cfg.shard.port, 1, 0);
			kvss_poll_idle(st, t0, &empty);
			continue;
		}
		if (pend[0] != parsed) {
			parsed = pend[0];
			proto_parse_mbuf(parsed, &kvss.cfg.udp, &msg);
		}
		/* A DELETE or REFILL of a driver that has restarted since: its
		 * gate could open on the new driver's batches. Dropped. Checked
		 * after the gate too: batches the gate saw that were published
		 * after a reset come after the new epoch's store (acquire). */
		if (msg.hdr.epoch != __atomic_load_n(&kvss.driver_epoch, __ATOMIC_ACQUIRE)) {
			rte_pktmbuf_free(pend[0]);
			pend[0] = parsed = NULL;
			st->dropped_restart++;
			continue;
		}
		if (gate_open(&msg) && msg.hdr.epoch == __atomic_load_n(&kvss.driver_epoch, __ATOMIC_ACQUIRE)) {
			if (msg.hdr.type == PROTO_T_DELETE) {
				unsigned int turns = 0;

				/* The writer applies it, in order; a REFILL waits for that. */
				while (rte_ring_enqueue(kvss.refill_to_ingest, pend[0]) != 0 && !kvss_quitting())
					kvss_wait_turn(&turns);
				posted++;
			} else {
				deletes_applied(posted);
				run_refill_msg(st, 1, &msg);
				rte_pktmbuf_free(pend[0]);
			}
			pend[0] = parsed = NULL;
			kvss_poll_busy(st, t0, &empty);
			continue;
		}
		if (np > 1 && ahead_changed(came, gone)) {
			struct rte_mbuf **slot[REFILL_AHEAD];
			uint64_t before = st->refills_ahead;

			for (i = 0; i < np; i++)
				slot[i] = &pend[i];
			deletes_applied(posted);
			run_ahead(st, slot, np, 1);
			if (st->refills_ahead != before) {
				kvss_poll_busy(st, t0, &empty);
				continue;
			}
		}
		/* Waiting for batches: let completions come. */
		rte_eth_tx_done_cleanup(kvss.cfg.shard.port, 1, 0);
		kvss_poll_idle(st, t0, &empty);
	}
	for (i = 0; i < np; i++)
		rte_pktmbuf_free(pend[i]);
	while (rte_ring_dequeue(kvss.ingest_to_refill, &p) == 0)
		rte_pktmbuf_free(p);
	return 0;
}

/* ---- The control stream ---------------------------------------------------------------- */

static void
reset_stream(void)
{
	unsigned int i;

	for (i = 0; i < WINDOW; i++) {
		rte_pktmbuf_free(S.window[i]);
		S.window[i] = NULL;
	}
	while (S.evictq.head != S.evictq.tail)
		rte_pktmbuf_free(S.evictq.m[S.evictq.head++ % QMAX]);
	while (S.refillq.head != S.refillq.tail)
		rte_pktmbuf_free(S.refillq.m[S.refillq.head++ % QMAX]);
	S.next_seq = 1;
	S.queued_batch = 0;
	S.ack_sent = 0;
}

/* Queue an accepted message (the mbuf now belongs to the queue). */
static void
queue_accepted(struct kvss_lcore_stats *st, struct rte_mbuf *m, uint8_t type)
{
	struct fifo *q = type == PROTO_T_RESERVE || type == PROTO_T_EVICT ? &S.evictq : &S.refillq;

	if (q->tail - q->head == QMAX) {
		/* The evict queue: not with a driver that keeps to its window. The
		 * refill queue: DELETEs and REFILLs far ahead of their batches.
		 * Dropped unacknowledged: the driver sends it again. */
		rte_pktmbuf_free(m);
		st->queue_full++;
		return;
	}
	q->since[q->tail % QMAX] = 0;
	q->m[q->tail % QMAX] = m;
	q->seq[q->tail % QMAX] = S.next_seq;
	q->tail++;
	S.next_seq++;
	if (type == PROTO_T_EVICT) {
		proto_parse_mbuf(m, &kvss.cfg.udp, &S.msg2);
		if (S.msg2.u.evict.batch_no > S.queued_batch)
			S.queued_batch = S.msg2.u.evict.batch_no;
	}
}

/* Returns 1 when the mbuf was kept (queued or held). */
static int
control(struct kvss_lcore_stats *st, struct rte_mbuf *m, struct proto_msg *msg)
{
	uint64_t seq = msg->hdr.seq;

	if (msg->hdr.type == PROTO_T_HELLO) {
		st->hello++;
		kvss.driver_addr = msg->addr;
		kvss.have_driver = 1;
		if (msg->hdr.epoch != kvss.driver_epoch) {
			/* A new driver: the old one's data can never be asked for.
			 * The epoch changes first: the old stream's DELETEs and
			 * REFILLs on the refill lcore see it and are dropped (batch
			 * numbers restart, so their gates would open again). */
			uint32_t old = kvss.driver_epoch;

			__atomic_store_n(&kvss.driver_epoch, msg->hdr.epoch, __ATOMIC_RELEASE);
			if (old != 0) {
				reset_stream();
				kvstore_reset(kvss.store);
			}
			/*
			 * Data held before this HELLO belongs to no batch of the new
			 * stream: an old driver's, or (old == 0, this shard just
			 * restarted) frames sent to the shard it replaces, which a
			 * driver queued while the link was down. Batch numbers start
			 * over, so kept, it would fill the new stream's batches.
			 */
			st->dropped_restart += S.nearly;
			while (S.nearly)
				rte_pktmbuf_free(S.early[--S.nearly]);
			S.next_seq = 1;
		}
		send_status(st);
		return 0;
	}
	if (msg->hdr.type >= PROTO_T_STATUS) {
		st->not_handled++; /* shard -> driver types: not for us */
		return 0;
	}
	if (msg->hdr.epoch != kvss.driver_epoch || kvss.driver_epoch == 0) {
		/* Stale or unknown driver: drop, and tell it both epochs. */
		st->stale_epoch++;
		kvss.driver_addr = msg->addr;
		kvss.have_driver = 1;
		send_status(st);
		return 0;
	}
	kvss.driver_addr = msg->addr;
	S.ack_due = 1;
	if (seq < S.next_seq) {
		st->duplicates++;
		return 0;
	}
	if (seq >= S.next_seq + WINDOW) {
		st->out_of_window++;
		return 0;
	}
	if (seq > S.next_seq) {
		unsigned int w = seq % WINDOW;

		if (S.window[w] != NULL) {
			st->duplicates++;
			return 0;
		}
		S.window[w] = m;
		S.window_seq[w] = seq;
		st->early++;
		return 1;
	}
	queue_accepted(st, m, msg->hdr.type);
	/* Held successors follow in order. */
	for (;;) {
		unsigned int w = S.next_seq % WINDOW;
		struct rte_mbuf *x = S.window[w];

		if (x == NULL || S.window_seq[w] != S.next_seq)
			break;
		S.window[w] = NULL;
		proto_parse_mbuf(x, &kvss.cfg.udp, &S.msg2);
		queue_accepted(st, x, S.msg2.hdr.type);
	}
	return 1;
}

int
kvss_shard_ingest(void *arg)
{
	struct kvss_lcore_stats *st = &kvss.stats[rte_lcore_id()];
	uint16_t port = kvss.cfg.shard.port;
	uint64_t status_every, last_rx, next_status;
	unsigned int empty = 0;
	struct rte_mbuf *pkts[BURST];
	static struct batcher err;

	(void)arg;
	S.hz = rte_get_tsc_hz();
	status_every = S.hz * kvss.cfg.shard.status_interval_ms / 1000;
	last_rx = rte_get_tsc_cycles();
	next_status = last_rx + status_every;
	batcher_init(&err, PROTO_T_ERROR, st);
	while (!kvss_quitting()) {
		uint64_t t0 = rte_get_tsc_cycles();
		uint16_t n = kvss_rx_burst(port, 0, pkts, BURST), i;

		for (i = 0; i < n; i++) {
			struct rte_mbuf *m = pkts[i];
			enum proto_reason r = proto_parse_mbuf(m, &kvss.cfg.udp, &S.msg);
			int kept = 0;

			st->rx_frames++;
			st->rx_bytes += rte_pktmbuf_pkt_len(m);
			if (r != PROTO_OK) {
				st->drops[r]++;
			} else if (S.msg.hdr.type == PROTO_T_EVICT_DATA) {
				int rc = store_data(m, &S.msg);

				if (rc == -EAGAIN && S.nearly < EARLY_MAX) {
					S.early[S.nearly] = m;
					S.early_t[S.nearly++] = t0;
					kept = 1;
				} else if (rc == 0) {
					st->data_frames++;
				} else {
					st->data_dropped++;
				}
			} else if (S.msg.hdr.type == PROTO_T_REFILL_DATA) {
				st->not_handled++;
			} else {
				kept = control(st, m, &S.msg);
			}
			if (!kept)
				rte_pktmbuf_free(m);
		}
		/* The queues, in order; then what the time says. */
		run_evictq(st, &err, t0);
		if (S.nearly)
			retry_early(st, t0);
		if (kvss.refill_lcore_on) {
			pass_to_refill(st);
			apply_posted_deletes(st, &err);
		} else {
			run_refillq(st, &err);
		}
		run_evictq(st, &err, t0); /* deletes may have made room */
		expire_batches(st, t0);
		batcher_flush(&err);
		if (S.ack_due || (kvss.have_driver && ack_value() != S.ack_sent)) {
			send_ack(st);
			S.ack_due = 0;
		}
		if (n > 0) {
			last_rx = t0;
			kvss_poll_busy(st, t0, &empty);
		} else {
			if (kvss.have_driver && t0 >= next_status) {
				send_status(st);
				next_status = t0 + status_every;
			}
			if (kvss.exit_idle_ms && t0 - last_rx > S.hz / 1000 * kvss.exit_idle_ms &&
			    S.evictq.head == S.evictq.tail && S.refillq.head == S.refillq.tail &&
			    (!kvss.refill_lcore_on || rte_ring_empty(kvss.ingest_to_refill)))
				__atomic_store_n(&kvss.quit, 1, __ATOMIC_RELAXED);
			kvss_poll_idle(st, t0, &empty);
		}
	}
	reset_stream();
	while (S.nearly)
		rte_pktmbuf_free(S.early[--S.nearly]);
	return 0;
}
