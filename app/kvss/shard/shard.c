/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The shard's ingest lcore (shard.h lists the other parts): every frame is
 * received and parsed here, once; control messages go through the stream,
 * EVICT_DATA to the evict queue's store (evict.c).
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
#include <errno.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_ring.h>

#include "shard.h"

#define BURST 32


void
shard_rec_of(struct shard_rec *r, const struct proto_msg *msg)
{
	r->hdr = msg->hdr;
	r->addr = msg->addr;
	r->payload_off = msg->payload_off;
	r->data_off = msg->data_off;
	r->data_len = msg->data_len;
	r->gate = 0;
	if (shard_type_batch(msg->hdr.type)) {
		r->u.evict = msg->u.evict;
	} else if (msg->hdr.type == PROTO_T_EVICT_DATA) {
		r->u.data = msg->u.data;
	} else if (msg->hdr.type == PROTO_T_DELETE) {
		unsigned int i;

		for (i = 0; i < msg->hdr.count; i++) {
			struct proto_delete d;

			proto_get_delete(msg, i, &d);
			if (d.evict_count > r->gate)
				r->gate = d.evict_count;
		}
	} else if (shard_type_down(msg->hdr.type) || msg->hdr.type == PROTO_T_L2_DELETE) {
		unsigned int i;

		for (i = 0; i < msg->hdr.count; i++) {
			struct proto_l2col c;
			struct proto_l2del d;
			uint64_t ec;

			if (shard_type_down(msg->hdr.type)) {
				proto_get_l2_down(msg, i, &c);
				ec = c.evict_count;
			} else {
				proto_get_l2_delete(msg, i, &d);
				ec = d.evict_count;
			}
			if (ec > r->gate)
				r->gate = ec;
		}
	} else if (msg->hdr.type == PROTO_T_REFILL) {
		struct proto_refill_req rq;
		const uint8_t *ch;
		uint32_t off = 0;

		while (proto_next_refill(msg, &off, &rq, &ch))
			if (rq.evict_count > r->gate)
				r->gate = rq.evict_count;
	}
}

static void
reset_stream(struct kvss_shard_inst *me)
{
	unsigned int i;

	for (i = 0; i < SHARD_WINDOW; i++) {
		rte_pktmbuf_free(me->st->window[i]);
		me->st->window[i] = NULL;
	}
	while (me->st->evictq.head != me->st->evictq.tail)
		rte_pktmbuf_free(me->st->evictq.m[me->st->evictq.head++ % SHARD_QMAX]);
	while (me->st->refillq.head != me->st->refillq.tail)
		rte_pktmbuf_free(me->st->refillq.m[me->st->refillq.head++ % SHARD_QMAX]);
	me->st->next_seq = 1;
	me->st->queued_batch = 0;
	me->st->ack_sent = 0;
	me->st->recv_sent = 0;
	shard_barrier_reset(me);
	shard_loss_reset(me);
}

/*
 * The rail (PROTOCOL.md section 1): how many routers the frame crossed, by
 * its IPv4 TTL; kept per sender (the driver's control, the wafer's data)
 * and said once. A frame that crossed one is counted, and with
 * shard.routed = "refuse" dropped: the shard does not serve off the rail.
 */
static bool
on_rail(struct kvss_shard_inst *me, struct kvss_lcore_stats *st, const struct proto_msg *msg)
{
	uint8_t hops = proto_hops(&msg->addr);
	bool data = msg->hdr.type == PROTO_T_EVICT_DATA;
	uint8_t *seen = data ? &me->wafer_hops : &me->driver_hops;

	if (*seen != hops)
		__atomic_store_n(seen, hops, __ATOMIC_RELAXED);
	if (hops == 0)
		return true;
	st->routed++;
	if (!me->routed_said) {
		me->routed_said = true;
		printf("kvss: shard %u of model %u: %s from %u.%u.%u.%u crossed %u router(s) (IPv4 "
		       "TTL "
		       "%u): KVSS traffic belongs on the rail; %s\n",
		       me->cfg->id, me->cfg->model, data ? "EVICT_DATA" : "control",
		       msg->addr.src_ip >> 24, (msg->addr.src_ip >> 16) & 0xff,
		       (msg->addr.src_ip >> 8) & 0xff, msg->addr.src_ip & 0xff, hops, msg->addr.ttl,
		       me->cfg->routed == KVSS_ROUTED_REFUSE
			       ? "refusing it (shard.routed = \"refuse\")"
			       : "serving it anyway (shard.routed = \"warn\")");
		fflush(stdout);
	}
	if (me->cfg->routed != KVSS_ROUTED_REFUSE)
		return true;
	st->routed_refused++;
	return false;
}

/*
 * Is the frame this shard's (PROTOCOL.md section 1, "Addressed to it")?
 * Checked before it touches any state or sequence number: another shard's
 * DELETE must not delete here, nor take the next seq. Counted by reason.
 */
static bool
for_me(struct kvss_shard_inst *me, struct kvss_lcore_stats *st, const struct proto_msg *msg)
{
	static const uint8_t bcast[6] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
	const struct kvss_endpoint *ep = &me->cfg->addr;
	uint16_t i;

	if (memcmp(msg->addr.dst_mac, ep->mac, 6) != 0 &&
	    memcmp(msg->addr.dst_mac, bcast, 6) != 0) {
		st->not_mine_mac++;
		return false;
	}
	if (msg->addr.dst_ip != ep->ipv4) {
		st->not_mine_ip++;
		return false;
	}
	if (msg->hdr.model_id != me->cfg->model) {
		st->not_mine_model++;
		return false;
	}
	if (msg->hdr.shard_id != me->cfg->id && msg->hdr.shard_id != PROTO_SHARD_ALL) {
		st->not_mine_shard++;
		return false;
	}
	if (me->cfg->num_drivers != 0 && proto_type_is_control(msg->hdr.type)) {
		for (i = 0; i < me->cfg->num_drivers; i++)
			if (msg->addr.src_ip == me->cfg->driver_ip[i])
				break;
		if (i == me->cfg->num_drivers) {
			st->not_a_driver++;
			return false;
		}
	}
	return on_rail(me, st, msg);
}

/* Queue an accepted message (the mbuf now belongs to the queue), with its record. */
static void
queue_accepted(struct kvss_shard_inst *me, struct kvss_lcore_stats *st, struct rte_mbuf *m,
	       const struct shard_rec *r)
{
	uint8_t type = r->hdr.type;
	struct shard_fifo *q = type == PROTO_T_RESERVE || shard_type_batch(type) ? &me->st->evictq
										 : &me->st->refillq;

	if ((shard_type_down(type) || type == PROTO_T_L2_DELETE) && !shard_level_on(me, type)) {
		/* No second tier (or no shared level) here (PROTOCOL.md sections 9,
		 * 10): each record refused; the seq is taken. */
		static __thread struct shard_batcher nt;
		static __thread struct proto_msg view;
		const struct proto_msg *msg = shard_msg(r, m, &view);
		unsigned int i;

		shard_batcher_init(&nt, PROTO_T_ERROR, me, st);
		for (i = 0; i < msg->hdr.count; i++) {
			struct proto_l2col c = {0};
			struct proto_l2del d = {0};

			if (shard_type_down(type))
				proto_get_l2_down(msg, i, &c);
			else
				proto_get_l2_delete(msg, i, &d);
			shard_add_error(&nt, msg->hdr.seq, shard_type_down(type) ? c.key : d.key,
					shard_type_down(type) ? c.start_token_idx : 0,
					shard_type_down(type) ? c.cache_id : d.cache_id, PROTO_E_NO_TIER);
		}
		shard_batcher_flush(&nt);
		rte_pktmbuf_free(m);
		me->st->next_seq++;
		return;
	}

	if (q->tail - q->head == SHARD_QMAX) {
		/* The evict queue: not with a driver that keeps to its window. The
		 * refill queue: DELETEs and REFILLs far ahead of their batches.
		 * Dropped unacknowledged: the driver sends it again. */
		rte_pktmbuf_free(m);
		st->queue_full++;
		return;
	}
	q->since[q->tail % SHARD_QMAX] = 0;
	q->m[q->tail % SHARD_QMAX] = m;
	q->rec[q->tail % SHARD_QMAX] = *r;
	if (shard_type_batch(type) || type == PROTO_T_DELETE)
		shard_barrier_accept(me, st, &q->rec[q->tail % SHARD_QMAX], m);
	if (shard_type_down(type))
		me->st->l2down_last = me->st->next_seq;
	q->rec[q->tail % SHARD_QMAX].l2gate = shard_type_up(type) ? me->st->l2down_last : 0;
	q->seq[q->tail % SHARD_QMAX] = me->st->next_seq;
	q->tail++;
	me->st->next_seq++;
	if (shard_type_batch(type) && r->u.evict.batch_no > me->st->queued_batch)
		me->st->queued_batch = r->u.evict.batch_no;
}

/* Do @p a and @p b come from one sender (MAC, IPv4 address, UDP port)? */
static bool
same_source(const struct proto_addr *a, const struct proto_addr *b)
{
	return a->src_ip == b->src_ip && a->src_port == b->src_port &&
	       memcmp(a->src_mac, b->src_mac, 6) == 0;
}

/*
 * A HELLO: a driver taking control, or one starting over with a new epoch
 * (the old stream's state dropped); answered with a STATUS and the second
 * tier's inventory.
 */
static void
hello(struct kvss_shard_inst *me, struct kvss_lcore_stats *st, const struct proto_msg *msg)
{
	st->hello++;
	/*
	 * A HELLO of the epoch in force from another address than the one
	 * that took control: not a driver starting over (that would bring
	 * a new epoch) but someone who learned the epoch from a STATUS, and
	 * may have put another's address as its source. Its answer would
	 * be the whole inventory (megabytes for 74 bytes): ignored, counted.
	 */
	if (msg->hdr.epoch == me->driver_epoch && me->driver_epoch != 0 &&
	    !same_source(&msg->addr, &me->ctl_addr)) {
		st->hello_foreign++;
		return;
	}
	me->driver_addr = msg->addr;
	me->ctl_addr = msg->addr;
	me->have_driver = 1;
	if (msg->hdr.epoch != me->driver_epoch) {
		/* A new driver: the old one's data can never be asked for.
		 * The epoch changes first: the old stream's DELETEs and
		 * REFILLs on the refill lcore see it and are dropped (batch
		 * numbers restart, so their gates would open again). */
		uint32_t old = me->driver_epoch;

		__atomic_store_n(&me->driver_epoch, msg->hdr.epoch, __ATOMIC_RELEASE);
		if (old != 0) {
			reset_stream(me);
			kvstore_reset(me->store);
		}
		/*
		 * Data held before this HELLO belongs to no batch of the new
		 * stream: an old driver's, or (old == 0, this shard just
		 * restarted) frames sent to the shard it replaces, which a
		 * driver queued while the link was down. Batch numbers start
		 * over, so kept, it would fill the new stream's batches.
		 */
		st->dropped_restart += shard_drop_held(me);
		me->st->next_seq = 1;
		shard_barrier_reset(me);
		shard_loss_reset(me);
		shard_report_reset(me, false); /* reports of the old stream are of no use */
	}
	shard_send_status(me, st);
	shard_level_inventory(me, st); /* what its second tier holds, kept across restarts */
}

/* Returns 1 when the mbuf was kept (queued or held). */
static int
control(struct kvss_shard_inst *me, struct kvss_lcore_stats *st, struct rte_mbuf *m,
	const struct proto_msg *msg)
{
	uint64_t seq = msg->hdr.seq;
	struct shard_rec r;

	if (msg->hdr.type == PROTO_T_HELLO) {
		hello(me, st, msg);
		return 0;
	}
	if (msg->hdr.type >= PROTO_T_STATUS) {
		st->not_handled++; /* shard -> driver types: not for us */
		return 0;
	}
	if (msg->hdr.type == PROTO_T_REPORT_ACK) {
		/* Outside the ordered stream, as HELLO: seq 0, the epoch ours. */
		if (msg->hdr.epoch == me->driver_epoch && me->driver_epoch != 0) {
			st->report_acks++;
			shard_report_acked(me, st, msg->u.ack.cum_seq);
		} else {
			st->stale_epoch++;
		}
		return 0;
	}
	if (msg->hdr.epoch != me->driver_epoch || me->driver_epoch == 0) {
		/* Stale or unknown driver: drop, and tell it both epochs. */
		st->stale_epoch++;
		me->driver_addr = msg->addr;
		me->have_driver = 1;
		shard_send_status(me, st);
		return 0;
	}
	me->driver_addr = msg->addr;
	me->st->ack_due = 1;
	if (seq < me->st->next_seq) {
		st->duplicates++;
		return 0;
	}
	if (seq >= me->st->next_seq + SHARD_WINDOW) {
		st->out_of_window++;
		return 0;
	}
	if (seq > me->st->next_seq) {
		unsigned int w = seq % SHARD_WINDOW;

		if (me->st->window[w] != NULL) {
			st->duplicates++;
			return 0;
		}
		me->st->window[w] = m;
		shard_rec_of(&me->st->window_rec[w], msg);
		me->st->window_seq[w] = seq;
		st->early++;
		return 1;
	}
	shard_rec_of(&r, msg);
	queue_accepted(me, st, m, &r);
	/* Held successors follow in order. */
	for (;;) {
		unsigned int w = me->st->next_seq % SHARD_WINDOW;
		struct rte_mbuf *x = me->st->window[w];

		if (x == NULL || me->st->window_seq[w] != me->st->next_seq)
			break;
		me->st->window[w] = NULL;
		queue_accepted(me, st, x, &me->st->window_rec[w]);
	}
	return 1;
}

/*
 * Ingest work that need not come with a frame: held EVICT_DATA stored, an
 * EVICT that waited for room run, a DELETE applied (the refill lcore's,
 * handed back). A sum of counters that only grow: a poll did some when it
 * changed.
 */
static inline uint64_t
ingest_work(const struct kvss_lcore_stats *st)
{
	return st->data_frames + st->batches + st->deletes;
}

/*
 * End of a poll begun at @p t0, its cycles to a role (kvss.h): refill work
 * is what shard_run_refillq measured (REFILL_DATA built and sent, from
 * @p refill0 on) and, when REFILLs came (@p refills) and no other frame nor
 * ingest work (@p ingest false), the rest of the poll too (the REFILLs
 * received, the ACK); ingest work the rest otherwise. A poll that did
 * neither is idle.
 * One rdtsc here, two around each REFILL message run: exact, not sampled.
 */
static void
account_poll(struct kvss_lcore_stats *st, uint64_t t0, uint64_t refill0, bool ingest, bool refills,
	     unsigned int *empty)
{
	uint64_t refill = st->refill_cycles - refill0, c;

	if (!ingest && !refills && refill == 0) {
		kvss_poll_idle(st, t0, empty);
		return;
	}
	c = kvss_poll_busy(st, t0, empty);
	if (refill > c) /* another core's TSC, after a migration: the poll is refill work */
		st->refill_cycles = refill0 + c;
	else if (ingest)
		st->ingest_cycles += c - refill;
	else
		st->refill_cycles += c - refill;
}

/*
 * An EVICT_DATA frame of this shard's stream: stored, held until its batch
 * has room, or dropped. 1: @m is kept (held); 0: the caller frees it.
 */
static int
ingest_data(struct kvss_shard_inst *me, struct kvss_lcore_stats *st, struct rte_mbuf *m,
	    uint64_t t0)
{
	struct shard_rec rec;
	int rc, kept = 0;

	shard_rec_of(&rec, &me->st->msg);
	rc = shard_store_data(me, m, &rec);
	if (rc == -EAGAIN && shard_hold_data(me, st, m, &rec, t0)) {
		kept = 1;
	} else if (rc == 0) {
		st->data_frames++;
		st->data_bytes += rec.data_len;
	} else if (rc != -EAGAIN) {
		st->data_dropped++;
	}
	/* Taken (stored or held): evidence for the batches before it. */
	if (kept || rc == 0)
		shard_data_seen(me, rec.u.data.batch_no, t0);
	return kept;
}

/*
 * One frame received at @t0: parsed, then taken as data or control, or
 * counted by why not; freed unless kept. True: a REFILL (account_poll).
 */
static bool
ingest_frame(struct kvss_shard_inst *me, struct kvss_lcore_stats *st, struct rte_mbuf *m,
	     struct shard_batcher *err, uint64_t t0)
{
	enum proto_reason r = proto_parse_mbuf(m, &kvss.cfg.udp, &me->st->msg);
	bool refill = false;
	int kept = 0;

	st->rx_frames++;
	st->rx_bytes += rte_pktmbuf_pkt_len(m);
	if (r == PROTO_OK && me->st->msg.hdr.type == PROTO_T_REFILL)
		refill = true;
	if (r != PROTO_OK) {
		st->drops[r]++;
	} else if (!for_me(me, st, &me->st->msg)) {
		/* counted by reason */
	} else if (me->st->msg.hdr.type == PROTO_T_EVICT_DATA &&
		   me->st->msg.u.data.driver_epoch != me->driver_epoch) {
		/* Version 2: data names its stream. An old driver's, or
		 * one sent before this shard's HELLO: batch numbers
		 * restart with every stream, so it is never taken. */
		st->data_stale_stream++;
	} else if (me->st->msg.hdr.type == PROTO_T_EVICT_DATA) {
		kept = ingest_data(me, st, m, t0);
	} else if (me->st->msg.hdr.type == PROTO_T_REFILL_DATA) {
		st->not_handled++;
	} else {
		uint32_t epoch = me->driver_epoch;

		kept = control(me, st, m, &me->st->msg);
		/* A new stream (a HELLO of another epoch): the errors of
		 * the old one's messages that ran in this burst go with
		 * its reports. Sent now, they would be reports of the new
		 * stream, naming seqs its driver gave other messages. */
		if (me->driver_epoch != epoch)
			shard_batcher_init(err, PROTO_T_ERROR, me, st);
		/* An EVICT runs at once: its data, often next in this
		 * burst, is then stored on arrival, not held. */
		shard_run_evictq(me, st, err, t0);
	}
	if (!kept)
		rte_pktmbuf_free(m);
	return refill;
}

/* After a burst: the queues, in order; then what the time says (ACK, STATUS). */
static void
ingest_after_burst(struct kvss_shard_inst *me, struct kvss_lcore_stats *st,
		   struct shard_batcher *err, uint64_t t0, uint64_t *next_status,
		   uint64_t status_every)
{
	shard_run_evictq(me, st, err, t0);
	if (me->st->nearly)
		shard_retry_held(me, st);
	if (me->refill_lcore_on) {
		shard_pass_to_refill(me, st);
		shard_apply_posted_deletes(me, st, err);
	} else {
		shard_run_refillq(me, st, err);
	}
	shard_level_poll(me, st, err);
	shard_run_evictq(me, st, err, t0); /* deletes may have made room */
	shard_expire_batches(me, st);
	shard_batcher_flush(err);
	shard_report_poll(me, st, t0);
	if (me->st->ack_due || (me->have_driver && shard_ack_value(me) != me->st->ack_sent)) {
		shard_send_ack(me, st);
		me->st->ack_due = 0;
	}
	/*
	 * The periodic STATUS goes out busy or not: a shard that receives
	 * frames at every poll (a stream of EVICT_DATA while its evict queue
	 * waits on the second tier, so no ACK moves) sent nothing else, and
	 * its driver, hearing nothing for away_ms, declared it away.
	 */
	if (me->have_driver && t0 >= *next_status) {
		shard_send_status(me, st);
		/* Version 2: the ACK again. A driver never resends what
		 * arrived (recv_seq), so a lost ACK of what then ran
		 * would otherwise never be repeated. */
		if (me->st->next_seq > 1)
			shard_send_ack(me, st);
		*next_status = t0 + status_every;
	}
}

int
kvss_shard_ingest(void *arg)
{
	struct kvss_lcore_stats *st = &kvss.stats[rte_lcore_id()];
	struct kvss_shard_inst *me =
		&kvss_shards[(uintptr_t)arg]; /* the shard it serves (main.c) */
	uint16_t port = me->cfg->port;
	uint64_t status_every, last_rx, next_status;
	unsigned int empty = 0;
	struct rte_mbuf *pkts[BURST];
	static __thread struct shard_batcher err;

	me->st->hz = rte_get_tsc_hz();
	status_every = me->st->hz * me->cfg->status_interval_ms / 1000;
	last_rx = rte_get_tsc_cycles();
	me->st->looked = last_rx;
	next_status = last_rx + status_every;
	shard_batcher_init(&err, PROTO_T_ERROR, me, st);
	kvss_intr_watch(port, 0); /* poll_mode "interrupt": what wakes this lcore */
	while (!kvss_quitting()) {
		uint64_t t0 = rte_get_tsc_cycles();
		/* What this poll did, for account_poll(): refill cycles so far,
		 * ingest work so far, REFILL frames received. */
		uint64_t refill0 = st->refill_cycles, work0 = ingest_work(st);
		bool read;
		uint16_t n = kvss_rx_burst_read(port, 0, pkts, BURST, &read), i, nrefill = 0;

		for (i = 0; i < n; i++)
			nrefill += ingest_frame(me, st, pkts[i], &err, t0);
		ingest_after_burst(me, st, &err, t0, &next_status, status_every);
		/* Everything that had arrived by t0 is in and has run: the
		 * timeouts' clock moves (shard.h, looked). */
		if (read && n < BURST)
			me->st->looked = t0;
		if (n > 0)
			last_rx = t0;
		if (n == 0 && kvss.exit_idle_ms &&
		    t0 - last_rx > me->st->hz / 1000 * kvss.exit_idle_ms &&
		    me->st->evictq.head == me->st->evictq.tail &&
		    me->st->refillq.head == me->st->refillq.tail &&
		    (!me->refill_lcore_on || rte_ring_empty(me->ingest_to_refill)))
			__atomic_store_n(&kvss.quit, 1, __ATOMIC_RELAXED);
		account_poll(st, t0, refill0, n > nrefill || ingest_work(st) != work0, nrefill > 0, &empty);
	}
	reset_stream(me);
	shard_drop_held(me);
	shard_report_reset(me, true);
	shard_level_gone_drop(me);
	return 0;
}
