/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What the shard sends on the control path (shard.h): frames onto a TX
 * queue with retry, replies to the driver's last control source (the
 * cumulative ACK here; STATUS in status.c), and the batcher that packs ERROR, REFILL_DONE and
 * TOKEN_LOST records into as few frames as the MTU allows.
 */
#include <errno.h>

#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>

#include "proto_stream.h"
#include "shard.h"

/*
 * A full TX ring is back-pressure, not loss: a refill frame dropped here
 * would cost the whole refill. Retry, yielding the core in idle mode, for up
 * to KVSS_TX_WAIT_MS; only a port that takes nothing for that long, or whose
 * link is down, loses the frame. It was 100 ms: in the demo on the public
 * trace a driver sharing two cores with its shards (its port gate shut for
 * up to 157 ms while EAL's interrupt thread waited for a core) took nothing
 * for longer, 51 frames were dropped and 9 refills waited out their 10 s
 * timeout. Waiting longer is safe since a driver keeps a silent shard's
 * cache (driver.away_ms, dead_ms); a peer that is gone shows as link down.
 */
#define KVSS_TX_WAIT_MS 1000
void
kvss_tx_one(struct kvss_shard_inst *me, struct kvss_lcore_stats *st, uint16_t queue,
	    struct rte_mbuf *m, uint32_t len)
{
	uint64_t t0 = 0, first = 0, hz = rte_get_tsc_hz();
	unsigned int tries = 0;

	while (kvss_tx_burst(me->cfg->port, queue, &m, 1) != 1) {
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
			if (rte_eth_link_get_nowait(me->cfg->port, &link) == 0 &&
			    !link.link_status) {
				rte_pktmbuf_free(m);
				st->tx_drops++;
				return;
			}
			t0 = now;
			st->tx_full++;
		}
		if (now - t0 > hz / 1000 * KVSS_TX_WAIT_MS || kvss_quitting()) {
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
reply_addr(struct kvss_shard_inst *me, struct proto_addr *a, const struct proto_addr *d)
{
	memcpy(a->dst_mac, d->src_mac, 6);
	memcpy(a->src_mac, me->cfg->addr.mac, 6);
	a->dst_ip = d->src_ip;
	a->src_ip = me->cfg->addr.ipv4;
	a->dst_port = d->src_port;
	a->src_port = kvss.cfg.udp.ctrl;
	a->has_vlan = me->cfg->addr.vlan != 0;
	a->vlan_tci = me->cfg->addr.vlan;
}

/* Send one control payload back to @to (a driver's control source), on @queue. */
static void
send_control_to(struct kvss_shard_inst *me, struct kvss_lcore_stats *st, uint16_t queue,
		const struct proto_addr *to, const uint8_t *payload, uint32_t len)
{
	struct proto_addr a;
	struct rte_mbuf *m;

	reply_addr(me, &a, to);
	m = proto_mbuf_frame(kvss.pool, &a, payload, len);
	if (m == NULL) {
		st->no_mbuf++;
		return;
	}
	kvss_tx_one(me, st, queue, m, len);
}

/* From the ingest lcore: to where the driver's last control came from. */
void
shard_send_control(struct kvss_shard_inst *me, struct kvss_lcore_stats *st, const uint8_t *payload,
		   uint32_t len)
{
	send_control_to(me, st, 0, &me->driver_addr, payload, len);
}

void
shard_begin_reply(struct kvss_shard_inst *me, struct proto_builder *b, uint8_t *buf, uint32_t cap,
		  uint8_t type)
{
	struct proto_hdr h = {.type = type,
			      .model_id = me->cfg->model,
			      .shard_id = me->cfg->id,
			      .epoch = kvss.epoch};

	proto_build_begin(b, buf, cap, &h);
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
 * The refill queue's own bound (SHARD_QMAX) then bounds them: beyond it a message
 * is dropped unacknowledged (queue_full) and comes again.
 */
uint64_t
shard_ack_value(struct kvss_shard_inst *me)
{
	uint64_t a = me->st->next_seq ? me->st->next_seq - 1 : 0;

	if (a == 0)
		return 0;
	if (me->st->evictq.head != me->st->evictq.tail &&
	    me->st->evictq.seq[me->st->evictq.head % SHARD_QMAX] - 1 < a)
		a = me->st->evictq.seq[me->st->evictq.head % SHARD_QMAX] - 1;
	return a;
}

void
shard_send_ack(struct kvss_shard_inst *me, struct kvss_lcore_stats *st)
{
	uint8_t buf[PROTO_HDR_LEN + PROTO_ACK_LEN];
	struct proto_ack a = {shard_ack_value(me), me->st->next_seq ? me->st->next_seq - 1 : 0};
	struct proto_builder b;

	shard_begin_reply(me, &b, buf, sizeof(buf), PROTO_T_ACK);
	proto_build_ack(&b, &a);
	shard_send_control(me, st, buf, proto_build_end(&b));
	me->st->ack_sent = a.cum_seq;
	me->st->recv_sent = a.recv_seq;
	st->acks++;
}


/* ---- Reliable reports (PROTOCOL.md section 5, version 2) ---------------------------- */

#define REPORT_RTO_MS 5
#define REPORT_RTO_MAX_MS 200

void
shard_report_reset(struct kvss_shard_inst *me, bool release)
{
	struct shard_state *s = me->st;

	if (release) {
		free(s->rep);
		s->rep = NULL;
	}
	s->rep_next = 1;
	s->rep_acked = 0;
	s->rep_due = 0;
	s->rep_srtt8 = s->rep_rttvar4 = 0;
	s->rep_recover = 0;
	s->rep_base = s->rep_rto = s->hz / 1000 * REPORT_RTO_MS;
}

unsigned int
shard_report_room(struct kvss_shard_inst *me)
{
	const struct shard_state *s = me->st;
	uint64_t out = s->rep_next > 0 ? s->rep_next - 1 - s->rep_acked : 0;

	return out >= SHARD_REPORTS ? 0 : (unsigned int)(SHARD_REPORTS - out);
}

/*
 * Send report @p payload, kept until acknowledged: its header's seq is the
 * report seq. With SHARD_REPORTS unacknowledged already (a driver that does
 * not answer), it goes unsequenced (seq 0), as version 1 sent every report.
 */
static void
report_send(struct kvss_shard_inst *me, struct kvss_lcore_stats *st, const struct proto_addr *to,
	    uint8_t *payload, uint32_t len)
{
	struct shard_state *s = me->st;
	struct shard_report *r;

	if (s->rep == NULL)
		s->rep = calloc(SHARD_REPORTS, sizeof(*s->rep));
	if (s->rep_next == 0)
		shard_report_reset(me, false);
	if (s->rep == NULL || s->rep_next - 1 - s->rep_acked >= SHARD_REPORTS) {
		st->reports_unsequenced++;
		send_control_to(me, st, 0, to, payload, len);
		return;
	}
	proto_st64(payload + 24, s->rep_next);
	r = &s->rep[s->rep_next % SHARD_REPORTS];
	memcpy(r->p, payload, len);
	r->len = len;
	r->to = *to;
	r->sent = rte_get_tsc_cycles();
	r->sends = 1;
	if (s->rep_next - 1 == s->rep_acked)
		s->rep_due = rte_get_tsc_cycles() + s->rep_rto; /* the oldest: its timer starts */
	s->rep_next++;
	st->reports++;
	send_control_to(me, st, 0, to, payload, len);
}

/* Send report @p q again, flagged, and count it. */
static void
report_resend(struct kvss_shard_inst *me, struct kvss_lcore_stats *st, uint64_t q, uint64_t now)
{
	struct shard_report *r = &me->st->rep[q % SHARD_REPORTS];

	proto_st16(r->p + 6, (uint16_t)(proto_ld16(r->p + 6) | PROTO_F_RETRANSMIT));
	send_control_to(me, st, 0, &r->to, r->p, r->len);
	r->sent = now;
	r->sends++;
	st->reports_resent++;
}

/*
 * The timeout follows the round trip to the REPORT_ACK, as the driver's
 * for its control stream does (srtt + 4 rttvar, Karn's rule), between 5 and
 * 200 ms. It was a fixed 5 ms, and each timeout sent every report not yet
 * acknowledged again: on the memif demo's lossless link about 1% of round
 * trips passed 5 ms (three processes on two cores), each with a burst of
 * L2_DONE reports out, and 10-13% of reports went twice. Now a timeout
 * sends the oldest alone; an ACK that then stops short of what was out
 * (a partial ACK: the driver took the copy and dropped what followed a
 * gap) sends the next at once, as the driver's control stream does
 * (NewReno).
 */
void
shard_report_acked(struct kvss_shard_inst *me, struct kvss_lcore_stats *st, uint64_t cum)
{
	struct shard_state *s = me->st;
	const struct shard_report *r;
	uint64_t now = rte_get_tsc_cycles();

	if (cum <= s->rep_acked || cum >= s->rep_next)
		return; /* stale, or of reports never sent */
	r = &s->rep[cum % SHARD_REPORTS];
	if (r->sends == 1 && now >= r->sent) {
		s->rep_base = proto_rtt_sample(&s->rep_srtt8, &s->rep_rttvar4, now - r->sent,
					       s->hz / 1000 * REPORT_RTO_MS, s->hz / 1000 * REPORT_RTO_MAX_MS);
	}
	s->rep_acked = cum;
	s->rep_rto = s->rep_base;
	s->rep_due = now + s->rep_rto;
	if (s->rep_recover != 0 && cum < s->rep_recover)
		report_resend(me, st, cum + 1, now); /* partial: the next was dropped after a gap */
	else
		s->rep_recover = 0;
}

/* A timeout: the oldest report not acknowledged, again, alone; then wait twice as long. */
void
shard_report_poll(struct kvss_shard_inst *me, struct kvss_lcore_stats *st, uint64_t now)
{
	struct shard_state *s = me->st;

	if (s->rep == NULL || s->rep_next == 0 || s->rep_acked + 1 >= s->rep_next || now < s->rep_due)
		return;
	report_resend(me, st, s->rep_acked + 1, now);
	s->rep_recover = s->rep_next - 1;
	/* Doubles up to the cap, never past it (section 5: 5 ms doubling to 200 ms;
	 * doubling 160 gave 320). */
	s->rep_rto = RTE_MIN(s->rep_rto * 2, s->hz / 1000 * REPORT_RTO_MAX_MS);
	s->rep_due = now + s->rep_rto;
}

static bool
reliable(const struct shard_batcher *bt)
{
	return bt->queue == 0 && bt->b.count > 0 &&
	       (bt->type == PROTO_T_ERROR || bt->type == PROTO_T_TOKEN_LOST ||
		bt->type == PROTO_T_L2_DONE);
}

void
shard_batcher_flush(struct shard_batcher *bt)
{
	if (bt->b.count > 0) {
		uint32_t len = proto_build_end(&bt->b);
		const struct proto_addr *to = bt->to ? bt->to : &bt->me->driver_addr;

		if (reliable(bt))
			report_send(bt->me, bt->st, to, bt->buf, len);
		else
			send_control_to(bt->me, bt->st, bt->queue, to, bt->buf, len);
	}
	shard_begin_reply(bt->me, &bt->b, bt->buf, kvss_payload_cap(), bt->type);
}

void
shard_batcher_send(struct shard_batcher *bt)
{
	send_control_to(bt->me, bt->st, bt->queue, bt->to ? bt->to : &bt->me->driver_addr, bt->buf,
			proto_build_end(&bt->b));
	shard_begin_reply(bt->me, &bt->b, bt->buf, kvss_payload_cap(), bt->type);
}

void
shard_batcher_init(struct shard_batcher *bt, uint8_t type, struct kvss_shard_inst *me,
		   struct kvss_lcore_stats *st)
{
	bt->type = type;
	bt->me = me;
	bt->st = st;
	bt->queue = 0;
	bt->to = NULL;
	shard_begin_reply(me, &bt->b, bt->buf, kvss_payload_cap(), type);
}

void
shard_add_error(struct shard_batcher *bt, uint64_t seq, uint64_t prompt, uint32_t token, uint16_t cache,
	  uint16_t code)
{
	struct proto_error e = {seq, prompt, token, cache, code};

	SHARD_BATCHER_ADD(bt, proto_build_error, &e);
	bt->st->errors[code < PROTO_E_MAX ? code : 0]++;
}


void
shard_add_lost(struct shard_batcher *bt, uint16_t cache_id, uint64_t prompt_id, uint32_t first,
	       uint32_t count)
{
	struct proto_lost r = {prompt_id, first, count, cache_id};

	SHARD_BATCHER_ADD(bt, proto_build_lost, &r);
	bt->st->lost_tokens += count;
	bt->st->lost_records++;
}
