/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The process's ports (kvss.h): each set up for its role (queues, MTU,
 * memif's limits, RX interrupts for poll_mode "interrupt"), and role all's
 * net_ring pairs, a pair per shard the process hosts.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rte_dev.h>
#include <rte_devargs.h>
#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_log.h>
#include <rte_ring.h>

#include "kvss.h"

static uint8_t started[RTE_MAX_ETHPORTS];
static struct rte_ring *ring_d2s[KVSS_MAX_LOCAL_SHARDS], *ring_s2d[KVSS_MAX_LOCAL_SHARDS];

int
kvss_port_started(uint16_t port)
{
	return port < RTE_MAX_ETHPORTS && started[port];
}

void
kvss_ports_close(void)
{
	/* memif: closing a port must not meet its peer's disconnect (portgate.c). */
	int held = kvss_gate_wait(1000);
	uint16_t c;

	for (c = 0; c < RTE_MAX_ETHPORTS; c++)
		if (started[c]) {
			rte_eth_dev_stop(c);
			rte_eth_dev_close(c);
			started[c] = 0;
		}
	if (held)
		kvss_gate_leave();
}

/*
 * Role all: the driver and its shards in one process, each shard joined to
 * the driver by a pair of rte_rings made into two ports (net_ring): what
 * one sends, the other receives. The configured port numbers are replaced
 * by these. With one shard, every shard the driver lists is reached through
 * its pair; with several, each through the pair of the shard that is it.
 */
int
kvss_ring_ports(void)
{
	int sport[KVSS_MAX_LOCAL_SHARDS], dport[KVSS_MAX_LOCAL_SHARDS];
	uint16_t m, k, i, n = kvss.cfg.num_local;
	char name[RTE_RING_NAMESIZE];

	for (i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "kvss_d2s%u", i);
		ring_d2s[i] = rte_ring_create(name, 4096, (int)rte_socket_id(), RING_F_SP_ENQ | RING_F_SC_DEQ);
		snprintf(name, sizeof(name), "kvss_s2d%u", i);
		ring_s2d[i] = rte_ring_create(name, 4096, (int)rte_socket_id(), RING_F_SP_ENQ | RING_F_SC_DEQ);
		if (ring_d2s[i] == NULL || ring_s2d[i] == NULL) {
			fprintf(stderr, "kvss: role all: rings: %s\n", rte_strerror(rte_errno));
			return -1;
		}
		snprintf(name, sizeof(name), i ? "net_ring_kvss_s%u" : "net_ring_kvss_shard", i);
		sport[i] = rte_eth_from_rings(name, &ring_d2s[i], 1, &ring_s2d[i], 1, (unsigned int)rte_socket_id());
		snprintf(name, sizeof(name), i ? "net_ring_kvss_d%u" : "net_ring_kvss_drv", i);
		dport[i] = rte_eth_from_rings(name, &ring_s2d[i], 1, &ring_d2s[i], 1, (unsigned int)rte_socket_id());
		if (sport[i] < 0 || dport[i] < 0) {
			fprintf(stderr, "kvss: role all: net_ring ports: %s\n", rte_strerror(rte_errno));
			return -1;
		}
		kvss.cfg.local[i].port = (uint16_t)sport[i];
	}
	kvss.cfg.shard.port = kvss.cfg.local[0].port;
	for (m = 0; m < kvss.cfg.driver.pc.num_models; m++)
		for (k = 0; k < kvss.cfg.driver.models[m].num_shards; k++) {
			struct kvss_shard_ref *r = &kvss.cfg.driver.models[m].shard[k];

			for (i = 0; n > 1 && i < n; i++)
				if (kvss.cfg.local[i].model == m && kvss.cfg.local[i].id == r->id)
					break;
			r->port = (uint16_t)dport[i < n ? i : 0]; /* the config checked that it is one */
		}
	for (i = 0; i < n; i++)
		printf("kvss: role all: shard %u of model %u on port %d, driver on port %d (net_ring pair)\n",
		       kvss.cfg.local[i].id, kvss.cfg.local[i].model, sport[i], dport[i]);
	return 0;
}

/*
 * A shard: one RX queue; a TX queue for the ingest lcore and, when the
 * device has a second one and a refill lcore is there, one for the refill
 * lcore. A driver: one TX queue; on memif two RX queues, one per shard TX
 * queue (the driver polls every RX queue it configured).
 */
/*
 * memif: a frame longer than one buffer (the vdev's bsize, 2048 unless
 * given) goes over several descriptors, and such frames arrived corrupted
 * (docs/DESIGN.md). The MTU cannot be set on memif either: so the buffer
 * must hold a whole frame of the configured mtu, or the port is refused.
 */
static int
memif_fits(uint16_t port, const struct rte_eth_dev_info *info, uint32_t mtu)
{
	const struct rte_devargs *da = info->device ? rte_dev_devargs(info->device) : NULL;
	const char *a = da && da->args ? strstr(da->args, "bsize=") : NULL;
	unsigned long bsize = 2048;
	uint32_t frame = mtu + 18; /* Ethernet header and a VLAN tag */

	if (a != NULL && (a == da->args || a[-1] == ','))
		bsize = strtoul(a + 6, NULL, 0);
	if (bsize >= frame)
		return 0;
	fprintf(stderr, "kvss: port %u (net_memif): mtu = %u wants %u-byte frames, but its buffers "
		"hold %lu (bsize%s); give the vdev bsize=%u or more, or lower mtu\n", port, mtu, frame,
		bsize, a ? "" : " unset: 2048", (frame + 1023) / 1024 * 1024);
	return -1;
}

/*
 * A memif client connects as it starts: its shard may come up later (the
 * demo's order is only a convention). Start port @p port again until it
 * does, within the driver's start timeout, stopping on a signal: the last
 * start's result (@p rc, the first one's, when it is not tried again).
 */
static int
memif_start_wait(uint16_t port, int rc)
{
	uint64_t waited = 0, limit = kvss.cfg.driver.start_timeout_ms;
	/* Each try would log memif_connect_client()'s failure, ten a second:
	 * the PMD is quiet while it waits, and says its reason once more if
	 * the last try fails. */
	int lt = rte_log_register("pmd.net.memif"), lvl = lt >= 0 ? rte_log_get_level(lt) : -1;

	printf("kvss: port %u (net_memif): its shard is not there yet; waiting up to %" PRIu64
	       " ms (driver.start_timeout_ms)\n", port, limit);
	fflush(stdout);
	if (lvl >= 0)
		rte_log_set_level(lt, RTE_LOG_EMERG);
	while (rc != 0 && waited < limit && !kvss_quitting()) {
		usleep(100 * 1000);
		waited += 100;
		rc = rte_eth_dev_start(port);
	}
	if (lvl >= 0)
		rte_log_set_level(lt, (uint32_t)lvl);
	if (rc != 0 && !kvss_quitting()) {
		rc = rte_eth_dev_start(port);
		if (rc != 0)
			/* memif's rc is -1 whatever happened: not an EPERM. */
			fprintf(stderr, "kvss: port %u (net_memif): no shard answered on its socket "
					"in %" PRIu64 " ms: start the shards first (each says \"up, "
					"epoch\"), or give them longer (driver.start_timeout_ms)\n",
				port, limit);
	}
	return rc;
}

/*
 * Started, a memif client has its socket; the link is up once memif's
 * interrupt thread has finished the handshake. Until then the port takes
 * no frame and reads as down, and the driver drops what waits for a link
 * that is down: on a busy machine its first data frames were lost so (a
 * TOKEN_LOST a shard, the demo degraded). Wait for it, as for the socket.
 */
static void
memif_link_wait(uint16_t port)
{
	struct rte_eth_link link = {0};
	uint64_t waited = 0, limit = kvss.cfg.driver.start_timeout_ms;

	while ((rte_eth_link_get_nowait(port, &link) != 0 || !link.link_status) &&
	       waited < limit * 10 && !kvss_quitting()) {
		usleep(100);
		waited++;
	}
	if (!link.link_status && !kvss_quitting())
		fprintf(stderr, "kvss: port %u (net_memif): connected, but its link is not up "
				"after %" PRIu64 " ms; going on\n", port, limit);
}

int
kvss_port_init(uint16_t port, uint32_t mtu, int want_refill, int is_shard, bool *refill_on)
{
	struct rte_eth_conf conf = {0};
	struct rte_eth_dev_info info;
	uint16_t ntx = 1, nrx = 1, q;
	int rc;

	if (!rte_eth_dev_is_valid_port(port)) {
		fprintf(stderr, "kvss: port %u: no such port (EAL found %u; add a NIC or --vdev)\n",
			port, rte_eth_dev_count_avail());
		return -1;
	}
	rc = rte_eth_dev_info_get(port, &info);
	if (rc != 0)
		return rc;
	/*
	 * A memif connection carries the rings both ends configured queues for,
	 * and fails when their counts differ. What a shard sends on its second
	 * TX queue (the refill lcore's) arrives only where the driver set up a
	 * second RX queue, which it then polls. So on memif a shard always has
	 * two TX queues and a driver two RX queues, whether a refill lcore
	 * runs or not.
	 */
	if (strcmp(info.driver_name, "net_memif") == 0) {
		if (memif_fits(port, &info, mtu) != 0)
			return -EDOM;
		if (is_shard && info.max_tx_queues >= 2)
			ntx = 2;
		if (!is_shard && info.max_rx_queues >= 2)
			nrx = 2;
	}
	if (want_refill && info.max_tx_queues >= 2)
		ntx = 2;
	else if (want_refill)
		printf("kvss: port %u (%s) has one TX queue: the refill queue runs on the ingest "
		       "lcore\n", port, info.driver_name);
	if (refill_on != NULL)
		*refill_on = want_refill && ntx == 2;
	/* poll_mode "interrupt": RX queues that can wake a sleeping lcore. */
	conf.intr_conf.rxq = kvss.cfg.poll == KVSS_POLL_INTERRUPT;
	if ((rc = rte_eth_dev_configure(port, nrx, ntx, &conf)) != 0)
		goto fail;
	for (q = 0; q < nrx; q++)
		if ((rc = rte_eth_rx_queue_setup(port, q, 1024, rte_eth_dev_socket_id(port), NULL,
						 kvss.pool)) != 0)
			goto fail;
	for (q = 0; q < ntx; q++)
		if ((rc = rte_eth_tx_queue_setup(port, q, 1024, rte_eth_dev_socket_id(port), NULL)) != 0)
			goto fail;
	/* Virtual devices may not support it; the parser enforces sizes anyway. */
	if (rte_eth_dev_set_mtu(port, (uint16_t)mtu) != 0)
		fprintf(stderr, "kvss: port %u (%s): MTU %u not set, keeping the default\n", port,
			info.driver_name, mtu);
	rc = rte_eth_dev_start(port);
	if (rc != 0 && !is_shard && strcmp(info.driver_name, "net_memif") == 0) {
		rc = memif_start_wait(port, rc);
		if (rc != 0 && !kvss_quitting())
			return rc; /* said */
	}
	if (rc != 0) {
		if (kvss_quitting())
			return -EINTR;
		fprintf(stderr, "kvss: port %u: start failed: %s\n", port, rte_strerror(-rc));
		return rc;
	}
	if (!is_shard && strcmp(info.driver_name, "net_memif") == 0)
		memif_link_wait(port);
	printf("kvss: port %u (%s) started\n", port, info.driver_name);
	started[port] = 1;
	if (kvss.cfg.poll == KVSS_POLL_INTERRUPT) {
		kvss_intr_port_probe(port);
		if (!kvss_intr_port_ok(port))
			printf("kvss: port %u (%s) has no RX interrupts: poll_mode \"interrupt\" sleeps "
			       "briefly on it instead (as \"idle\")\n", port, info.driver_name);
	}
	return 0;
fail:
	fprintf(stderr, "kvss: port %u (%s): setup failed: %s\n", port, info.driver_name,
		rte_strerror(-rc));
	return rc;
}

void
kvss_ring_ports_free(void)
{
	unsigned int i;

	for (i = 0; i < KVSS_MAX_LOCAL_SHARDS; i++) {
		rte_ring_free(ring_d2s[i]);
		rte_ring_free(ring_s2d[i]);
	}
}
