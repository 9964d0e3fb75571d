/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The driver's link to its shards (driver_priv.h): each port's TX queues (control
 * frames first), the control streams (what their windows allow, pushed;
 * what timed out, resent), each shard's EVICT_DATA from the wafer emulator,
 * paced by its EVICTs, and the links watched for a peer that went away.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>

#include "driver_priv.h"
#include "faults.h"
#include "emulator/emulator.h"
#include "kvss.h"

#define BURST 32
/*
 * A batch's data goes out once the EVICT this many batches before it has run
 * at the shard (its ACK came): a shard whose EVICTs wait for space is not
 * sent data it can only hold (and drop after the batch timeout).
 */
#define DRV_DATA_AHEAD 4

static struct kvss_lcore_stats *
lst(void)
{
	return &kvss.stats[rte_lcore_id()];
}

int
drv_link_slot(const struct drv_link *L, uint16_t port)
{
	uint16_t i;

	for (i = 0; i < L->nports; i++)
		if (L->ports[i] == port)
			return i;
	return -1;
}

int
drv_link_add_port(struct drv_link *L, uint16_t port)
{
	struct rte_eth_dev_info info;

	if (drv_link_slot(L, port) >= 0)
		return 0;
	if (L->nports == DRV_MAX_PORTS || rte_eth_dev_info_get(port, &info) != 0)
		return -1;
	L->nrxq[L->nports] = RTE_MAX(info.nb_rx_queues, 1);
	L->ports[L->nports++] = port;
	return 0;
}

uint32_t
drv_link_queued(const struct drv_link *L, uint16_t port)
{
	int k = drv_link_slot(L, port);

	return k < 0 ? 0 : (uint32_t)L->txq[k].n + L->txq[k].nc;
}

static int
link_down(uint16_t port)
{
	struct rte_eth_link link;

	return rte_eth_link_get_nowait(port, &link) == 0 && !link.link_status;
}

/* Send the first @p *n frames of @p v on port @p i; what it does not take stays, in order. */
static uint16_t
txq_send(struct drv_link *L, uint16_t i, struct rte_mbuf **v, uint16_t *n)
{
	uint16_t sent = L->port_stopped[i] ? 0 : kvss_tx_burst(L->ports[i], 0, v, *n);

	if (sent < *n) {
		L->st->tx_retries++;
		memmove(v, v + sent, sizeof(v[0]) * (*n - sent));
	}
	*n = (uint16_t)(*n - sent);
	return sent;
}

/*
 * Send what waits on each port, control frames first; data only once no
 * control frame waits. What the port does not take stays, in order, unless
 * its link is down (then it is dropped).
 */
static void faulted_out(void *arg, struct rte_mbuf *m, uint32_t tag);

void
drv_link_flush(struct drv_link *L)
{
	uint16_t i;

	if (kvss_faults_on())
		kvss_faults_due(KVSS_F_OUT, faulted_out, L);
	for (i = 0; i < L->nports; i++) {
		struct drv_txq *q = &L->txq[i];
		uint16_t sent = 0;

		if (q->n == 0 && q->nc == 0)
			continue;
		if (q->nc > 0)
			sent = txq_send(L, i, q->c, &q->nc);
		if (q->nc == 0 && q->n > 0)
			sent += txq_send(L, i, q->m, &q->n);
		if (sent == 0 && link_down(L->ports[i])) {
			/*
			 * No peer (a memif shard that went away): these frames were
			 * for it. Streams resend their control messages; data is
			 * never resent. Kept, they would reach the shard that
			 * replaces it before it tells us its new epoch, and its
			 * data names batches of a stream that is gone.
			 */
			rte_pktmbuf_free_bulk(q->c, q->nc);
			rte_pktmbuf_free_bulk(q->m, q->n);
			L->st->tx_link_drops += q->nc + q->n;
			q->nc = q->n = 0;
		}
	}
}

/* Queue one frame for @p port: a data frame, or (@p ctl) a control frame. */
static void
enqueue(struct drv_link *L, uint16_t port, struct rte_mbuf *m, uint32_t len, bool ctl)
{
	int k = drv_link_slot(L, port);
	struct drv_txq *q;
	uint16_t *n, max;

	if (k < 0) {
		rte_pktmbuf_free(m);
		return;
	}
	q = &L->txq[k];
	n = ctl ? &q->nc : &q->n;
	max = ctl ? DRV_CTLQ_MAX : DRV_TXQ_MAX;
	if (*n == max)
		drv_link_flush(L);
	if (*n == max) {
		/* A control frame: the stream resends it; a data frame: never made. */
		rte_pktmbuf_free(m);
		lst()->tx_drops++;
		L->st->tx_full_drops += ctl;
		return;
	}
	(ctl ? q->c : q->m)[(*n)++] = m;
	lst()->tx_frames++;
	lst()->tx_bytes += len;
}

/* A held frame of the fault injector, due now. */
static void
faulted_out(void *arg, struct rte_mbuf *m, uint32_t tag)
{
	enqueue(arg, (uint16_t)(tag >> 1), m, rte_pktmbuf_pkt_len(m), tag & 1);
}

/* Queue a frame, through the fault injector when it is on (--faults). */
static void
send_frame(struct drv_link *L, uint16_t port, struct rte_mbuf *m, uint32_t len, bool ctl)
{
	struct rte_mbuf *out[2];
	unsigned int i, n;

	if (!kvss_faults_on()) {
		enqueue(L, port, m, len, ctl);
		return;
	}
	n = kvss_faults_pass(KVSS_F_OUT, m, (uint32_t)port << 1 | ctl, out);
	for (i = 0; i < n; i++)
		enqueue(L, port, out[i], rte_pktmbuf_pkt_len(out[i]), ctl);
}

void
drv_link_send_ctl(struct drv_link *L, const struct drv_shard *sh, const uint8_t *p, uint32_t len)
{
	struct rte_mbuf *m = proto_mbuf_frame(kvss.pool, &sh->ctrl, p, len);

	if (m == NULL) {
		L->st->no_mbuf++;
		return;
	}
	send_frame(L, sh->ref->port, m, len, true);
}

void
drv_link_hello(struct drv_link *L, struct drv_shard *sh, uint32_t epoch, uint64_t tsc)
{
	struct proto_builder b;
	struct proto_hdr h;
	uint8_t buf[PROTO_HDR_LEN];

	drv_hdr_for(&h, sh, epoch, PROTO_T_HELLO);
	proto_build_begin(&b, buf, sizeof(buf), &h);
	drv_link_send_ctl(L, sh, buf, proto_build_end(&b));
	sh->hello_at = tsc;
	L->st->hellos++;
}

void
drv_link_pump_streams(struct drv_link *L, struct drv_shard *shards, uint16_t nsh, uint64_t tsc)
{
	uint16_t i;

	for (i = 0; i < nsh; i++) {
		struct drv_shard *sh = &shards[i];
		const struct proto_stream_msg *r;
		struct drv_ctl_msg *m;

		if (!sh->up)
			continue;
		if (drv_ctlq_close(&sh->q) != 0)
			L->failed = true;
		/*
		 * Resend what timed out, oldest first, but not while control
		 * frames still wait for this port: the copies sent before have
		 * not even left, and a stuck port would fill the queue with
		 * copies. So the queue holds at most two windows per stream.
		 */
		if (L->txq[drv_link_slot(L, sh->ref->port)].nc == 0)
			while ((r = proto_stream_due(&sh->stream, tsc)) != NULL)
				drv_link_send_ctl(L, sh, r->payload, r->len);
		while (drv_ctlq_peek(&sh->q) != NULL && proto_stream_can_push(&sh->stream)) {
			struct drv_ctl_msg *head = drv_ctlq_peek(&sh->q);
			uint64_t seq = proto_stream_push(&sh->stream, head->p, head->len, tsc);

			if (seq == 0)
				break;
			m = drv_ctlq_pop(&sh->q);
			if (L->open_loop) {
				/* Recording: what is sent counts as run. */
				proto_stream_ack(&sh->stream, seq);
				if (m->batch_no > sh->evict_acked)
					sh->evict_acked = m->batch_no;
			} else if (m->batch_no != 0) {
				sh->ev_seq[sh->ev_tail % PROTO_STREAM_WINDOW_MAX] = seq;
				sh->ev_batch[sh->ev_tail % PROTO_STREAM_WINDOW_MAX] = m->batch_no;
				sh->ev_tail++;
			}
			drv_link_send_ctl(L, sh, m->p, m->len);
			if (m->batch_no > sh->evict_sent)
				sh->evict_sent = m->batch_no;
			free(m);
		}
	}
}

void
drv_link_ack(struct drv_shard *sh, uint64_t cum_seq, uint64_t recv_seq, uint64_t tsc)
{
	proto_stream_ack2(&sh->stream, cum_seq, recv_seq, tsc);
	while (sh->ev_head != sh->ev_tail &&
	       sh->ev_seq[sh->ev_head % PROTO_STREAM_WINDOW_MAX] <= sh->stream.acked)
		sh->evict_acked = sh->ev_batch[sh->ev_head++ % PROTO_STREAM_WINDOW_MAX];
}

void
drv_link_reset(struct drv_shard *sh)
{
	proto_stream_reset(&sh->stream);
	drv_ctlq_clear(&sh->q);
	sh->evict_sent = sh->evict_acked = 0;
	sh->ev_head = sh->ev_tail = 0;
}

int
drv_link_pump_data(struct drv_link *L, struct emu *emu, struct drv_shard *shards, uint16_t nsh)
{
	uint32_t maxdata = kvss_payload_cap() - PROTO_HDR_LEN - PROTO_DATA_HDR_LEN;
	int frames = 0;
	uint16_t i;

	for (i = 0; i < nsh; i++) {
		struct drv_shard *sh = &shards[i];
		int k = drv_link_slot(L, sh->ref->port), budget = 2 * BURST;
		/* Batches whose EVICT has gone out, and not too far past what ran. */
		uint64_t through = sh->evict_acked + DRV_DATA_AHEAD < sh->evict_sent
					   ? sh->evict_acked + DRV_DATA_AHEAD
					   : sh->evict_sent;

		if (!sh->up || k < 0)
			continue;
		while (budget > 0 && emu_data_ready(emu, sh->k, through)) {
			uint32_t hl = proto_l2l4_len(&sh->evict), len;
			struct rte_mbuf *m;

			if (L->txq[k].n == DRV_TXQ_MAX) {
				drv_link_flush(L);
				if (L->txq[k].n == DRV_TXQ_MAX)
					break;
			}
			m = rte_pktmbuf_alloc(kvss.pool);
			if (m == NULL) {
				L->st->no_mbuf++;
				break;
			}
			len = emu_data_next(emu, sh->k, through, kvss.epoch,
					    L->model_epoch != NULL ? L->model_epoch[sh->model] : 0,
					    rte_pktmbuf_mtod(m, uint8_t *) + hl, maxdata);
			if (len == 0) {
				rte_pktmbuf_free(m);
				break;
			}
			budget--;
			if (L->lose_data_every && ++L->data_count % L->lose_data_every == 0) {
				/* Fault injection: this frame is lost on the way. */
				rte_pktmbuf_free(m);
				L->st->data_withheld++;
				continue;
			}
			proto_write_l2l4(rte_pktmbuf_mtod(m, uint8_t *), &sh->evict, len);
			m->data_len = (uint16_t)(hl + len);
			m->pkt_len = hl + len;
			L->st->evict_frames++;
			L->st->evict_bytes += len - PROTO_HDR_LEN - PROTO_DATA_HDR_LEN;
			send_frame(L, sh->ref->port, m, hl + len, false);
			frames++;
		}
	}
	/* Jobs every shard is done with go. */
	emu_data_gc(emu);
	return frames;
}

void
drv_link_watch(struct drv_link *L, struct drv_shard *shards, uint16_t nsh, uint64_t tsc,
	       void (*went_down)(void *arg, struct drv_shard *sh, uint64_t tsc),
	       void (*came_up)(void *arg, struct drv_shard *sh, uint64_t tsc), void *arg)
{
	uint64_t hz = rte_get_tsc_hz();
	uint16_t i, k;

	for (i = 0; i < L->nports; i++) {
		struct rte_eth_link link;
		bool say;

		if (rte_eth_link_get_nowait(L->ports[i], &link) != 0 || link.link_status) {
			/* Up again after it was seen down: whoever is at the other
			 * end now (the same shard, or one started in its place)
			 * is asked who it is. */
			if (L->down_since[i] != 0 && came_up != NULL)
				for (k = 0; k < nsh; k++)
					if (shards[k].ref->port == L->ports[i])
						came_up(arg, &shards[k], tsc);
			L->down_since[i] = 0;
			L->down_restarts[i] = 0;
			continue;
		}
		if (L->down_since[i] == 0) {
			L->down_since[i] = tsc;
			for (k = 0; k < nsh; k++)
				if (shards[k].ref->port == L->ports[i])
					went_down(arg, &shards[k], tsc);
			continue;
		}
		if (tsc - L->down_since[i] < hz)
			continue;
		/* Not while the interrupt thread may be connecting it (portgate.c). */
		if (!kvss_gate_enter())
			continue;
		/* Restarted every second while down; said at the 1st, 2nd, 4th,
		 * 8th... restart, so a peer gone for an hour is a dozen lines,
		 * not seven thousand. */
		L->down_restarts[i]++;
		say = (L->down_restarts[i] & (L->down_restarts[i] - 1)) == 0;
		if (say) {
			printf("kvss: driver: port %u is down: restarting it (restart %u since it went "
			       "down; said again at restart %u)\n", L->ports[i], L->down_restarts[i],
			       2 * L->down_restarts[i]);
			fflush(stdout);
		}
		if (!L->port_stopped[i])
			rte_eth_dev_stop(L->ports[i]);
		L->port_stopped[i] = rte_eth_dev_start(L->ports[i]) != 0;
		if (L->port_stopped[i] && say)
			fprintf(stderr, "kvss: driver: port %u: restart failed (its peer is not there yet?); "
					"trying again every second\n", L->ports[i]);
		kvss_gate_leave();
		L->st->link_restarts++;
		L->down_since[i] = tsc;
	}
}

void
drv_link_free(struct drv_link *L)
{
	uint16_t i;

	for (i = 0; i < L->nports; i++) {
		rte_pktmbuf_free_bulk(L->txq[i].c, L->txq[i].nc);
		rte_pktmbuf_free_bulk(L->txq[i].m, L->txq[i].n);
		L->txq[i].nc = L->txq[i].n = 0;
	}
}
