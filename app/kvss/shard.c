/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The shard's ingest lcore: busy-polls RX, parses every frame, counts drops
 * by reason, and answers what this build handles (HELLO with STATUS; STATUS
 * every status interval to the driver it last heard from).
 */
#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_pause.h>
#include <unistd.h>

#include "kvss.h"

#define BURST 32

/* Send one control payload to the driver; frees on failure and counts it. */
static void
send_control(struct kvss_lcore_stats *st, const uint8_t *payload, uint32_t len)
{
	struct proto_addr a = kvss.driver_addr;
	struct rte_mbuf *m;
	uint8_t mac[6];
	uint32_t ip;

	/* Answer where the last control message came from. */
	memcpy(mac, a.src_mac, 6);
	memcpy(a.src_mac, kvss.cfg.shard.addr.mac, 6);
	memcpy(a.dst_mac, mac, 6);
	ip = a.src_ip;
	a.src_ip = kvss.cfg.shard.addr.ipv4;
	a.dst_ip = ip;
	a.dst_port = a.src_port;
	a.src_port = kvss.cfg.udp.ctrl;
	a.has_vlan = kvss.cfg.shard.addr.vlan != 0;
	a.vlan_tci = kvss.cfg.shard.addr.vlan;
	m = proto_mbuf_frame(kvss.pool, &a, payload, len);
	if (m == NULL) {
		st->no_mbuf++;
		return;
	}
	if (rte_eth_tx_burst(kvss.cfg.shard.port, 0, &m, 1) != 1) {
		rte_pktmbuf_free(m);
		st->tx_drops++;
		return;
	}
	st->tx_frames++;
	st->tx_bytes += len;
}

static void
send_status(struct kvss_lcore_stats *st)
{
	uint8_t buf[PROTO_HDR_LEN + PROTO_STATUS_LEN + KVSTORE_MAX_CACHES * PROTO_CACHE_INFO_LEN];
	const struct kvstore_params *kp = kvstore_params(kvss.store);
	struct proto_hdr h = {.type = PROTO_T_STATUS, .model_id = kvss.cfg.shard.model,
			      .shard_id = kvss.cfg.shard.id, .epoch = kvss.epoch};
	struct proto_status s = {
		.batches_complete = kvstore_batches_complete(kvss.store),
		.uptime_ns = (rte_get_tsc_cycles() - kvss.start_tsc) * 1000000000ull / rte_get_tsc_hz(),
		.driver_epoch = kvss.driver_epoch};
	struct proto_builder b;
	uint16_t c;

	proto_build_begin(&b, buf, sizeof(buf), &h);
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

static void
handle(struct kvss_lcore_stats *st, struct proto_msg *msg)
{
	switch (msg->hdr.type) {
	case PROTO_T_HELLO:
		st->hello++;
		kvss.driver_addr = msg->addr;
		kvss.have_driver = 1;
		if (msg->hdr.epoch != kvss.driver_epoch) {
			/* A new driver: the old one's data can never be asked for. */
			if (kvss.driver_epoch != 0)
				kvstore_reset(kvss.store);
			kvss.driver_epoch = msg->hdr.epoch;
		}
		send_status(st);
		break;
	default:
		if (proto_type_is_control(msg->hdr.type) && msg->hdr.epoch != kvss.driver_epoch) {
			/* Stale or unknown driver: drop, and tell it both epochs. */
			st->stale_epoch++;
			kvss.driver_addr = msg->addr;
			kvss.have_driver = 1;
			send_status(st);
			break;
		}
		st->not_handled++;
		break;
	}
}

int
kvss_shard_ingest(void *arg)
{
	struct kvss_lcore_stats *st = &kvss.stats[rte_lcore_id()];
	uint16_t port = kvss.cfg.shard.port;
	const uint64_t hz = rte_get_tsc_hz();
	const uint64_t status_every = hz * kvss.cfg.shard.status_interval_ms / 1000;
	uint64_t last_rx = rte_get_tsc_cycles(), next_status = last_rx + status_every;
	unsigned int empty = 0;
	static struct proto_msg msg; /* large: one per lcore, reused */
	struct rte_mbuf *pkts[BURST];

	(void)arg;
	while (!kvss_quitting()) {
		uint64_t t0 = rte_get_tsc_cycles();
		uint16_t n = rte_eth_rx_burst(port, 0, pkts, BURST), i;

		for (i = 0; i < n; i++) {
			enum proto_reason r = proto_parse_mbuf(pkts[i], &kvss.cfg.udp, &msg);

			st->rx_frames++;
			st->rx_bytes += rte_pktmbuf_pkt_len(pkts[i]);
			if (r != PROTO_OK)
				st->drops[r]++;
			else
				handle(st, &msg);
			rte_pktmbuf_free(pkts[i]);
		}
		if (n > 0) {
			last_rx = t0;
			empty = 0;
			st->busy_polls++;
			st->busy_cycles += rte_get_tsc_cycles() - t0;
		} else {
			st->idle_polls++;
			/* Housekeeping only when idle: the status timer, the idle exit. */
			if (kvss.have_driver && t0 >= next_status) {
				send_status(st);
				next_status = t0 + status_every;
			}
			if (kvss.exit_idle_ms && t0 - last_rx > hz / 1000 * kvss.exit_idle_ms)
				__atomic_store_n(&kvss.quit, 1, __ATOMIC_RELAXED);
			if (kvss.cfg.poll == KVSS_POLL_IDLE && ++empty > 64)
				usleep(50); /* cores are shared: let the other side run */
			else
				rte_pause();
			st->idle_cycles += rte_get_tsc_cycles() - t0;
		}
	}
	return 0;
}
